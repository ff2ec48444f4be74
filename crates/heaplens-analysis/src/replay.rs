//! Replays the merged event stream: the live set, the peak, temporaries, size bins, and
//! counters per allocation stack. Everything per-function is derived later from the per-stack
//! counters, so this loop does no symbol work and allocates only when the live set grows.
//!
//! **Sampled traces.** When the trace was recorded with a sampling rate `R` (see
//! [`heaplens_trace::ProcessRecord::sample_rate`]), an allocation of `s` bytes was recorded
//! with probability `p(s) = 1 - exp(-s / R)`, and a deallocation only when its block was
//! recorded. Each recorded block then stands for `1 / p(s)` blocks and `s / p(s)` bytes (the
//! correction pprof applies to heap profiles), and every counter here adds those weights
//! instead of 1 and `s`, so all of them are unbiased estimates. That is why counters are
//! `f64`: they hold exact integers when the trace is not sampled (every count below 2^53), and
//! the report rounds them only after summing them into its rows.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use heaplens_trace::{Event, Op, OpClass, TimeMap};

use crate::live::LiveMap;

/// Number of exact-size bins (0..=1024) plus one for larger sizes, as in mprof.
pub const BIN_COUNT: usize = 1026;
/// The largest size with its own bin.
pub const BIN_MAX_EXACT: u64 = 1024;

/// mprof's size classes: s = 0..=32, m = 33..=256, l = 257..=2048, x = larger (bytes).
#[inline(always)]
pub fn size_class(size: u64) -> usize {
    match size {
        0..=32 => 0,
        33..=256 => 1,
        257..=2048 => 2,
        _ => 3,
    }
}

#[inline(always)]
fn bin_of(size: u64) -> usize {
    if size <= BIN_MAX_EXACT {
        size as usize
    } else {
        BIN_COUNT - 1
    }
}

/// Counters of one allocation stack (trie node). Byte counts are requested sizes. All counts
/// are weighted (see the module documentation): exact integers for unsampled traces.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StackStats {
    /// The trie node id.
    pub stack: u32,
    /// Successful allocations made from this stack.
    pub allocs: f64,
    /// Bytes requested by them.
    pub bytes: f64,
    /// `bytes` split by [`size_class`].
    pub bytes_by_class: [f64; 4],
    /// Of these allocations, how many were released.
    pub frees: f64,
    /// Blocks still live at the end of the trace.
    pub kept: f64,
    /// Bytes still live at the end of the trace.
    pub kept_bytes: f64,
    /// `kept_bytes` split by [`size_class`].
    pub kept_by_class: [f64; 4],
    /// Allocations whose thread's next event was their own release.
    pub temporary: f64,
}

/// Per-size counters, mprof's allocation bin table: index = size for 0..=1024, 1025 = larger.
#[derive(Debug, Clone)]
pub struct Bins {
    /// Allocations per bin.
    pub allocs: Vec<f64>,
    /// Bytes allocated per bin.
    pub bytes: Vec<f64>,
    /// Releases of blocks per bin (by the size they were allocated with).
    pub frees: Vec<f64>,
    /// Bytes released per bin.
    pub freed_bytes: Vec<f64>,
}

impl Default for Bins {
    fn default() -> Self {
        Self {
            allocs: vec![0.0; BIN_COUNT],
            bytes: vec![0.0; BIN_COUNT],
            frees: vec![0.0; BIN_COUNT],
            freed_bytes: vec![0.0; BIN_COUNT],
        }
    }
}

/// Everything the replay counts. Counts and bytes are weighted (see the module
/// documentation).
#[derive(Debug, Clone, Default)]
pub struct Replay {
    /// Calls per allocating entry point (alloc and realloc classes, failed ones included),
    /// indexed by `Op as u8`.
    pub calls_by_op: Vec<f64>,
    /// Calls per releasing entry point, indexed by `Op as u8`.
    pub frees_by_op: Vec<f64>,
    /// Successful allocations (a successful realloc counts as one).
    pub allocations: f64,
    /// Releases of tracked live blocks (a moving realloc releases one; an allocation returning
    /// an address that was still live implies one, see `overwritten`).
    pub deallocations: f64,
    /// Releases of addresses that were not live (allocated before tracking or untracked).
    pub unmatched_frees: f64,
    /// `free(NULL)` and friends: no-ops.
    pub null_frees: f64,
    /// Allocations returning an address that was still live: its release was not seen.
    pub overwritten: f64,
    /// Allocations that returned NULL.
    pub failed_allocations: f64,
    /// Bytes requested by successful allocations.
    pub bytes_allocated: f64,
    /// Highest sum of live requested bytes.
    pub peak_bytes: f64,
    /// Live blocks at that moment.
    pub peak_objects: f64,
    /// Timestamp (`CLOCK_MONOTONIC` ns) when the peak was first reached; 0 with no events.
    pub peak_ts: u64,
    /// Live bytes at the end.
    pub leaked_bytes: f64,
    /// Live blocks at the end.
    pub leaked_objects: f64,
    /// Temporary allocations (heaptrack's definition).
    pub temporary_allocations: f64,
    /// Events replayed (recorded events, not weighted).
    pub events: u64,
    /// First and last event timestamps.
    pub first_ts: Option<u64>,
    /// Last event timestamp.
    pub last_ts: Option<u64>,
    /// Distinct threads with events.
    pub threads: u64,
    /// Per-stack counters, one entry per stack that allocated, in order of first use.
    pub stacks: Vec<StackStats>,
    /// Size bins.
    pub bins: Bins,
    /// The sampling rate the weights come from (0: every allocation was recorded).
    pub sample_rate: u64,
    /// Events payloads whose records stopped decoding part-way (damaged after their checksum).
    pub malformed_blocks: u64,
}

/// A fast hasher for addresses and ids (FxHash's multiply, with the high bits folded down so
/// that aligned keys spread over the table; keys are not adversarial).
#[derive(Default, Clone, Copy)]
pub struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0.rotate_left(26)
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0.wrapping_add(v)).wrapping_mul(0xf135_7aea_2e62_a9c5);
    }
    fn write_u32(&mut self, v: u32) {
        self.write_u64(u64::from(v));
    }
}

/// A `HashMap` keyed by addresses or ids.
pub type IdMap<K, V> = HashMap<K, V, BuildHasherDefault<IdHasher>>;

/// The weight of a recorded allocation of `size` bytes: how many allocations it stands for.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Weights {
    rate: f64,
}

impl Weights {
    pub fn new(sample_rate: u64) -> Self {
        Self { rate: sample_rate as f64 }
    }

    /// `1 / p(size)`; 1 for unsampled traces, and for zero-byte blocks (which a sampler over
    /// bytes never picks, so one in a trace was recorded for another reason).
    #[inline(always)]
    pub fn of(&self, size: u64) -> f64 {
        if self.rate == 0.0 || size == 0 {
            return 1.0;
        }
        let p = -(-(size as f64) / self.rate).exp_m1();
        if p > 0.0 {
            1.0 / p
        } else {
            1.0
        }
    }
}

/// Replay state while walking events. Threads are small indices (streams); their thread ids
/// do not matter here.
pub(crate) struct State {
    r: Replay,
    w: Weights,
    sampled: bool,
    live: LiveMap,
    /// Trie node id -> index into `r.stacks` (u32::MAX = none yet).
    slot_of: Vec<u32>,
    /// Per thread: the address its last event allocated, 0 if its last event was anything else.
    last_alloc: Vec<u64>,
    seen: Vec<bool>,
    cur_bytes: f64,
    cur_objects: f64,
    /// Raw timestamps, converted at the end.
    first_ts: Option<u64>,
    last_ts: u64,
    peak_ts: u64,
    /// Largest (timestamp, thread) replayed so far.
    pub max_key: (u64, u32),
}

impl State {
    pub fn new(sample_rate: u64) -> Self {
        let n_ops = Op::ALL.iter().map(|&o| o as usize).max().unwrap_or(0) + 1;
        Self {
            r: Replay {
                calls_by_op: vec![0.0; n_ops],
                frees_by_op: vec![0.0; n_ops],
                sample_rate,
                ..Replay::default()
            },
            w: Weights::new(sample_rate),
            sampled: sample_rate != 0,
            live: LiveMap::default(),
            slot_of: Vec::new(),
            last_alloc: Vec::new(),
            seen: Vec::new(),
            cur_bytes: 0.0,
            cur_objects: 0.0,
            first_ts: None,
            last_ts: 0,
            peak_ts: 0,
            max_key: (0, 0),
        }
    }

    #[inline(always)]
    fn slot(&mut self, stack: u32) -> u32 {
        // A wild id (a damaged writer) would size the table by it: count it as no stack.
        let stack = if stack > crate::load::MAX_STACK_ID { 0 } else { stack };
        let i = stack as usize;
        if let Some(&s) = self.slot_of.get(i) {
            if s != u32::MAX {
                return s;
            }
        }
        self.new_slot(stack)
    }

    #[cold]
    fn new_slot(&mut self, stack: u32) -> u32 {
        let i = stack as usize;
        if i >= self.slot_of.len() {
            self.slot_of.resize(i + 1, u32::MAX);
        }
        self.slot_of[i] = self.r.stacks.len() as u32;
        self.r.stacks.push(StackStats { stack, ..StackStats::default() });
        self.slot_of[i]
    }

    /// Weight of a recorded allocation of `size` bytes.
    #[inline(always)]
    fn weight(&self, size: u64) -> f64 {
        if self.sampled {
            self.w.of(size)
        } else {
            1.0
        }
    }

    #[inline(always)]
    fn alloc(&mut self, e: &Event, w: f64) {
        let slot = self.slot(e.stack);
        if let Some(old) = self.live.insert(e.addr, e.size, slot) {
            // The release of the block that had this address was never seen.
            let ow = self.weight(old.0);
            self.r.overwritten += ow;
            self.release(old.0, old.1, ow, false);
        }
        let size = e.size as f64;
        let bytes = size * w;
        let s = &mut self.r.stacks[slot as usize];
        s.allocs += w;
        s.bytes += bytes;
        s.bytes_by_class[size_class(e.size)] += bytes;
        let b = bin_of(e.size);
        self.r.bins.allocs[b] += w;
        self.r.bins.bytes[b] += bytes;
        self.r.allocations += w;
        self.r.bytes_allocated += bytes;
        self.cur_bytes += bytes;
        self.cur_objects += w;
        if self.cur_bytes > self.r.peak_bytes {
            self.r.peak_bytes = self.cur_bytes;
            self.r.peak_objects = self.cur_objects;
            self.peak_ts = e.ts;
        }
    }

    /// Releases `addr` for thread `t`; false if it was not live. Returns the block's weight.
    #[inline(always)]
    fn free(&mut self, t: usize, addr: u64) -> Option<f64> {
        let (size, slot) = self.live.remove(addr)?;
        let temporary = self.last_alloc[t] == addr;
        let w = self.weight(size);
        self.release(size, slot, w, temporary);
        Some(w)
    }

    #[inline(always)]
    fn release(&mut self, size: u64, slot: u32, w: f64, temporary: bool) {
        let s = &mut self.r.stacks[slot as usize];
        s.frees += w;
        if temporary {
            s.temporary += w;
            self.r.temporary_allocations += w;
        }
        let bytes = size as f64 * w;
        let b = bin_of(size);
        self.r.bins.frees[b] += w;
        self.r.bins.freed_bytes[b] += bytes;
        self.r.deallocations += w;
        self.cur_bytes -= bytes;
        self.cur_objects -= w;
    }

    #[cold]
    fn new_thread(&mut self, t: usize) {
        if t >= self.seen.len() {
            self.seen.resize(t + 1, false);
            self.last_alloc.resize(t + 1, 0);
        }
        if !self.seen[t] {
            self.seen[t] = true;
            self.r.threads += 1;
        }
    }

    /// Replays one event of thread (stream) `t`.
    #[inline(always)]
    pub fn event(&mut self, e: &Event, t: u32) {
        let t = t as usize;
        if !self.seen.get(t).copied().unwrap_or(false) {
            self.new_thread(t);
        }
        self.r.events += 1;
        if self.first_ts.is_none() {
            self.first_ts = Some(e.ts);
        }
        self.last_ts = e.ts;
        if (e.ts, t as u32) > self.max_key {
            self.max_key = (e.ts, t as u32);
        }
        let mut allocated = 0;
        match e.op.class() {
            OpClass::Alloc => {
                let w = self.weight(e.size);
                self.r.calls_by_op[e.op as usize] += w;
                if e.addr == 0 {
                    self.r.failed_allocations += w;
                } else {
                    self.alloc(e, w);
                    allocated = e.addr;
                }
            }
            OpClass::Realloc => {
                if e.addr != 0 || e.size == 0 {
                    // A sampled trace records a realloc whose new block was not sampled as a
                    // bare release (address 0, size 0): the call itself is estimated through
                    // the sampled new blocks only.
                    let w = if self.sampled && e.addr == 0 { 0.0 } else { self.weight(e.size) };
                    self.r.calls_by_op[e.op as usize] += w;
                    if e.old_addr != 0 && self.free(t, e.old_addr).is_none() {
                        self.r.unmatched_frees += 1.0;
                    }
                    if e.addr != 0 {
                        self.alloc(e, w);
                        allocated = e.addr;
                    }
                } else {
                    let w = self.weight(e.size);
                    self.r.calls_by_op[e.op as usize] += w;
                    self.r.failed_allocations += w;
                }
            }
            OpClass::Dealloc => {
                let w = if e.addr == 0 {
                    self.r.null_frees += 1.0;
                    1.0
                } else {
                    match self.free(t, e.addr) {
                        Some(w) => w,
                        None => {
                            self.r.unmatched_frees += 1.0;
                            1.0
                        }
                    }
                };
                self.r.frees_by_op[e.op as usize] += w;
            }
        }
        self.last_alloc[t] = allocated;
    }

    /// Events payloads that stopped decoding part-way.
    pub fn add_malformed(&mut self, n: u64) {
        self.r.malformed_blocks += n;
    }

    /// The counters, with timestamps mapped through `clock`.
    pub fn finish(mut self, clock: &TimeMap) -> Replay {
        let w = self.w;
        let sampled = self.sampled;
        let stacks = &mut self.r.stacks;
        let (mut bytes, mut objects) = (0.0, 0.0);
        self.live.for_each(|size, slot| {
            let wt = if sampled { w.of(size) } else { 1.0 };
            let b = size as f64 * wt;
            let s = &mut stacks[slot as usize];
            s.kept += wt;
            s.kept_bytes += b;
            s.kept_by_class[size_class(size)] += b;
            bytes += b;
            objects += wt;
        });
        self.r.leaked_bytes = bytes;
        self.r.leaked_objects = objects;
        self.r.first_ts = self.first_ts.map(|t| clock.to_ns(t));
        self.r.last_ts = self.first_ts.map(|_| clock.to_ns(self.last_ts));
        self.r.peak_ts = if self.r.peak_bytes > 0.0 { clock.to_ns(self.peak_ts) } else { 0 };
        self.r
    }
}

/// Replays `events` (in timestamp order, timestamps already in nanoseconds) of a trace that
/// recorded every allocation.
pub fn replay(events: impl Iterator<Item = Event>) -> Replay {
    replay_sampled(events, 0)
}

/// Replays `events` of a trace sampled at `sample_rate` bytes (0: not sampled).
pub fn replay_sampled(events: impl Iterator<Item = Event>, sample_rate: u64) -> Replay {
    let mut st = State::new(sample_rate);
    let mut index: IdMap<u32, u32> = IdMap::default();
    let mut last = (u32::MAX, 0u32);
    for e in events {
        if e.tid != last.0 {
            let n = index.len() as u32;
            last = (e.tid, *index.entry(e.tid).or_insert(n));
        }
        st.event(&e, last.1);
    }
    st.finish(&TimeMap::default())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(ts: u64, tid: u32, op: Op, addr: u64, old_addr: u64, size: u64, stack: u32) -> Event {
        Event { ts, tid, op, addr, old_addr, size, usable: size, stack }
    }

    #[test]
    fn realloc_free_unmatched_failed_and_temporaries() {
        let evs = [
            ev(1, 1, Op::Malloc, 0x100, 0, 10, 1),      // A
            ev(2, 1, Op::Free, 0x100, 0, 0, 0),         // A freed right away: temporary
            ev(3, 1, Op::Malloc, 0x200, 0, 20, 1),      // B
            ev(4, 2, Op::Malloc, 0x300, 0, 30, 2),      // C (other thread)
            ev(5, 1, Op::Realloc, 0x400, 0x200, 50, 1), // B -> D; B's release is temporary (heaptrack)
            ev(6, 1, Op::Free, 0x999, 0, 0, 0),         // unmatched
            ev(7, 1, Op::Malloc, 0, 0, 1 << 40, 1),     // failed
            ev(8, 1, Op::Realloc, 0, 0x400, 0, 1),      // realloc(D, 0): release only
            ev(9, 1, Op::Realloc, 0, 0x300, 99, 1),     // failed realloc: C stays
            ev(10, 1, Op::Free, 0, 0, 0, 0),            // free(NULL)
        ];
        let r = replay(evs.into_iter());
        assert_eq!(r.allocations, 4.0);
        assert_eq!(r.deallocations, 3.0);
        assert_eq!(r.leaked_objects, 1.0);
        assert_eq!(r.leaked_bytes, 30.0);
        assert_eq!(r.unmatched_frees, 1.0);
        assert_eq!(r.null_frees, 1.0);
        assert_eq!(r.failed_allocations, 2.0);
        assert_eq!(r.temporary_allocations, 2.0);
        assert_eq!(r.bytes_allocated, 110.0);
        assert_eq!((r.peak_bytes, r.peak_ts), (80.0, 5));
        assert_eq!(r.calls_by_op[Op::Malloc as usize], 4.0);
        assert_eq!(r.calls_by_op[Op::Realloc as usize], 3.0);
        assert_eq!(r.frees_by_op[Op::Free as usize], 3.0);
        assert_eq!(r.threads, 2);
        assert_eq!(r.allocations - r.deallocations, r.leaked_objects);
        let s2 = r.stacks.iter().find(|s| s.stack == 2).unwrap();
        assert_eq!((s2.allocs, s2.kept, s2.kept_bytes, s2.kept_by_class), (1.0, 1.0, 30.0, [30.0, 0.0, 0.0, 0.0]));
        assert_eq!(r.bins.frees[50], 1.0);
        assert_eq!(r.bins.allocs[10], 1.0);
    }

    #[test]
    fn reused_live_address_implies_a_release() {
        let evs = [ev(1, 1, Op::Malloc, 0x100, 0, 10, 1), ev(2, 1, Op::Malloc, 0x100, 0, 2000, 1)];
        let r = replay(evs.into_iter());
        assert_eq!((r.allocations, r.deallocations, r.overwritten, r.leaked_objects), (2.0, 1.0, 1.0, 1.0));
        assert_eq!(r.bins.allocs[BIN_COUNT - 1], 1.0);
        assert_eq!(r.leaked_bytes, 2000.0);
    }

    #[test]
    fn sampled_events_are_weighted() {
        // Rate 1000: a 500-byte block is recorded with p = 1 - e^-0.5.
        let w = 1.0 / (1.0 - (-0.5f64).exp());
        let evs = [
            ev(1, 1, Op::Malloc, 0x100, 0, 500, 1),
            ev(2, 1, Op::Malloc, 0x200, 0, 500, 1),
            ev(3, 1, Op::Free, 0x100, 0, 0, 0),
            ev(4, 1, Op::Realloc, 0, 0x200, 0, 1), // only the release of a sampled block
        ];
        let r = replay_sampled(evs.into_iter(), 1000);
        assert_eq!(r.sample_rate, 1000);
        assert!((r.allocations - 2.0 * w).abs() < 1e-9);
        assert!((r.bytes_allocated - 1000.0 * w).abs() < 1e-9);
        assert!((r.peak_bytes - 1000.0 * w).abs() < 1e-9);
        assert!((r.deallocations - 2.0 * w).abs() < 1e-9);
        assert!((r.frees_by_op[Op::Free as usize] - w).abs() < 1e-9);
        assert!((r.calls_by_op[Op::Malloc as usize] - 2.0 * w).abs() < 1e-9);
        assert_eq!(r.calls_by_op[Op::Realloc as usize], 0.0);
        assert!(r.leaked_bytes.abs() < 1e-9);
    }
}
