//! The page's pass over the replay: every block of the window with its times, address, sizes,
//! stack and thread, in columns ready to be sent to the browser as typed arrays.

use heaplens_interpret::idmap::IdMap;
use heaplens_interpret::view::{Block, Release, View};

/// The blocks, one entry per block in each column.
#[derive(Default)]
pub struct Blocks {
    /// The window, `CLOCK_MONOTONIC` ns; times are stored relative to `t0`.
    t0: u64,
    t1: u64,
    /// Addresses drawn (`None`: all).
    addresses: Option<(u64, u64)>,
    /// The trace's last event, where live blocks end.
    end_ts: u64,
    /// Most blocks kept; past it `overflow` is set and no more are kept.
    max: usize,
    /// Allocation time, ns since `t0`.
    pub alloc_ns: Vec<f64>,
    /// Release time, ns since `t0` (`end_ts` for a block live at exit).
    pub free_ns: Vec<f64>,
    /// The block was live at exit.
    pub live: Vec<u8>,
    /// Address.
    pub addr: Vec<f64>,
    /// Bytes requested (an `f64`, exact below 2^53: a block of 4 GiB or more is not cut short).
    pub size: Vec<f64>,
    /// Bytes usable.
    pub usable: Vec<f64>,
    /// Index into `stacks`.
    pub stack: Vec<u32>,
    /// Index into `threads`.
    pub thread: Vec<u16>,
    /// Stack ids, by index.
    pub stacks: Vec<u32>,
    stack_index: IdMap<u32, u32>,
    /// Thread ids, by index.
    pub threads: Vec<u32>,
    thread_index: IdMap<u32, u16>,
    /// More blocks than `max` were in the window.
    pub overflow: bool,
}

impl Blocks {
    /// Keeps at most `max` blocks of the window `[t0, t1]` and `addresses`.
    pub fn new((t0, t1): (u64, u64), addresses: Option<(u64, u64)>, end_ts: u64, max: usize) -> Blocks {
        Blocks { t0, t1, addresses, end_ts, max, ..Blocks::default() }
    }

    fn keep(&mut self, b: &Block, end: u64, live: bool) {
        if b.addr == 0 || end < self.t0 || b.ts > self.t1 {
            return;
        }
        if self.addresses.is_some_and(|(lo, hi)| b.addr >= hi || b.addr.saturating_add(b.usable.max(1)) <= lo) {
            return;
        }
        if self.alloc_ns.len() >= self.max {
            self.overflow = true;
            return;
        }
        let stack = match self.stack_index.get(&b.stack) {
            Some(&i) => i,
            None => {
                let i = self.stacks.len() as u32;
                self.stacks.push(b.stack);
                self.stack_index.insert(b.stack, i);
                i
            }
        };
        let thread = match self.thread_index.get(&b.tid) {
            Some(&i) => i,
            None => {
                let i = self.threads.len().min(u16::MAX as usize) as u16;
                self.threads.push(b.tid);
                self.thread_index.insert(b.tid, i);
                i
            }
        };
        self.alloc_ns.push(b.ts as f64 - self.t0 as f64);
        self.free_ns.push(end as f64 - self.t0 as f64);
        self.live.push(u8::from(live));
        self.addr.push(b.addr as f64);
        self.size.push(b.size as f64);
        self.usable.push(b.usable as f64);
        self.stack.push(stack);
        self.thread.push(thread);
    }

    /// The columns as one little-endian byte string: `alloc_ns`, `free_ns`, `addr`, `size`,
    /// `usable` (f64 each), `stack` (u32), `thread` (u16), `live` (u8), in that order.
    pub fn to_bytes(&self) -> Vec<u8> {
        let n = self.alloc_ns.len();
        let mut out = Vec::with_capacity(n * 47);
        for col in [&self.alloc_ns, &self.free_ns, &self.addr, &self.size, &self.usable] {
            col.iter().for_each(|v| out.extend_from_slice(&v.to_le_bytes()));
        }
        self.stack.iter().for_each(|v| out.extend_from_slice(&v.to_le_bytes()));
        self.thread.iter().for_each(|v| out.extend_from_slice(&v.to_le_bytes()));
        out.extend_from_slice(&self.live);
        out
    }
}

impl View for Blocks {
    fn deallocation(&mut self, r: &Release, b: &Block) {
        self.keep(b, r.ts, false);
    }

    fn end(&mut self, live: &mut dyn Iterator<Item = &Block>) {
        let end = self.end_ts;
        for b in live {
            self.keep(b, end, true);
        }
    }
}
