//! The page's pass over the replay: every block of the window with its times, address, sizes,
//! stack and thread, in columns ready to be sent to the browser as typed arrays.
//!
//! A browser stays responsive with a couple of million blocks. Past `max`, the page keeps the
//! blocks that cover the most of the map, by area (usable bytes times lifetime): whenever more
//! than `max` are kept, the smaller half goes and no block smaller than the last one dropped
//! is taken any more, so that in the end every block of the window larger than that threshold
//! is on the page, and the blocks left out are those a whole-run view draws below a pixel.

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
    /// Most blocks kept (see the module documentation).
    max: usize,
    /// Blocks of the window, kept or not.
    pub in_window: u64,
    /// Blocks of no larger area than this are not kept (0: every block was).
    min_area: f64,
    /// Each kept block's area: usable bytes (at least 1) times lifetime in ns (at least 1).
    area: Vec<f64>,
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
        self.in_window += 1;
        let area = b.usable.max(1) as f64 * end.saturating_sub(b.ts).max(1) as f64;
        // Areas are at least 1, so a threshold of 0 lets every block in.
        if area <= self.min_area {
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
        self.area.push(area);
        if self.alloc_ns.len() > self.max {
            self.drop_smaller_half();
        }
    }

    /// Keeps the larger half of the blocks by area (at most `max / 2`), and from now on only
    /// blocks larger than the largest dropped.
    #[cold]
    fn drop_smaller_half(&mut self) {
        let keep = (self.max / 2).max(1).min(self.area.len());
        let mut sorted = self.area.clone();
        let at = sorted.len() - keep;
        sorted.select_nth_unstable_by(at, f64::total_cmp);
        // The `keep` largest are from `at` on: those above the largest before it stay (fewer
        // when it ties with some of them).
        let dropped = sorted[..at].iter().copied().fold(0.0, f64::max);
        self.min_area = self.min_area.max(dropped);
        let min = self.min_area;
        let kept: Vec<bool> = self.area.iter().map(|&a| a > min).collect();
        fn retain<T: Copy>(v: &mut Vec<T>, kept: &[bool]) {
            let mut k = kept.iter();
            v.retain(|_| *k.next().unwrap());
        }
        retain(&mut self.alloc_ns, &kept);
        retain(&mut self.free_ns, &kept);
        retain(&mut self.live, &kept);
        retain(&mut self.addr, &kept);
        retain(&mut self.size, &kept);
        retain(&mut self.usable, &kept);
        retain(&mut self.stack, &kept);
        retain(&mut self.thread, &kept);
        retain(&mut self.area, &kept);
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

#[cfg(test)]
mod tests {
    use super::*;
    use heaplens_trace::Op;

    #[test]
    fn past_max_the_largest_areas_stay() {
        let mut b = Blocks::new((0, u64::MAX / 2), None, 1 << 40, 100);
        // 1000 blocks of pseudo-random sizes and lifetimes, some tied.
        let mut x = 7u64;
        let mut areas = Vec::new();
        for i in 0..1000u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let (usable, life) = (16 + x % 64 * 16, 1 + (x >> 20) % 50);
            let blk =
                Block { ts: 1000 * i, tid: 1, addr: 4096 + 64 * i, size: usable, usable, op: Op::Malloc, stack: 1 };
            b.keep(&blk, blk.ts + life, false);
            areas.push((usable * life) as f64);
        }
        assert_eq!(b.in_window, 1000);
        assert!(b.alloc_ns.len() <= 100 && !b.alloc_ns.is_empty(), "{}", b.alloc_ns.len());
        let larger = areas.iter().filter(|&&a| a > b.min_area).count();
        assert_eq!(larger, b.alloc_ns.len(), "every block larger than the threshold is kept, no other");
        let kept: Vec<f64> =
            b.usable.iter().zip(b.alloc_ns.iter().zip(&b.free_ns)).map(|(u, (a, f))| u * (f - a)).collect();
        assert!(kept.iter().all(|&a| a > b.min_area));
        assert_eq!([b.free_ns.len(), b.addr.len(), b.stack.len(), b.thread.len(), b.live.len()], [kept.len(); 5]);
    }
}
