//! Replays the merged event stream: the live set, the peak, temporaries, size bins, and
//! counters per allocation stack. Everything per-function is derived later from the per-stack
//! counters, so this loop does no symbol work and allocates only when the live set grows.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use heaplens_trace::{Event, Op, OpClass};

/// Number of exact-size bins (0..=1024) plus one for larger sizes, as in mprof.
pub const BIN_COUNT: usize = 1026;
/// The largest size with its own bin.
pub const BIN_MAX_EXACT: u64 = 1024;

/// mprof's size classes: s = 0..=32, m = 33..=256, l = 257..=2048, x = larger (bytes).
pub use heaplens_trace::aggregate::size_class;

fn bin_of(size: u64) -> usize {
    if size <= BIN_MAX_EXACT {
        size as usize
    } else {
        BIN_COUNT - 1
    }
}

/// Counters of one allocation stack (trie node). Byte counts are requested sizes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StackStats {
    /// The trie node id.
    pub stack: u32,
    /// Successful allocations made from this stack.
    pub allocs: u64,
    /// Bytes requested by them.
    pub bytes: u64,
    /// `bytes` split by [`size_class`].
    pub bytes_by_class: [u64; 4],
    /// Of these allocations, how many were released.
    pub frees: u64,
    /// Blocks still live at the end of the trace.
    pub kept: u64,
    /// Bytes still live at the end of the trace.
    pub kept_bytes: u64,
    /// `kept_bytes` split by [`size_class`].
    pub kept_by_class: [u64; 4],
    /// Allocations whose thread's next event was their own release.
    pub temporary: u64,
}

/// Per-size counters, mprof's allocation bin table: index = size for 0..=1024, 1025 = larger.
#[derive(Debug, Clone)]
pub struct Bins {
    /// Allocations per bin.
    pub allocs: Vec<u64>,
    /// Bytes allocated per bin.
    pub bytes: Vec<u64>,
    /// Releases of blocks per bin (by the size they were allocated with).
    pub frees: Vec<u64>,
    /// Bytes released per bin.
    pub freed_bytes: Vec<u64>,
}

impl Default for Bins {
    fn default() -> Self {
        Self {
            allocs: vec![0; BIN_COUNT],
            bytes: vec![0; BIN_COUNT],
            frees: vec![0; BIN_COUNT],
            freed_bytes: vec![0; BIN_COUNT],
        }
    }
}

/// Everything the replay counts.
#[derive(Debug, Clone, Default)]
pub struct Replay {
    /// Calls per allocating entry point (alloc and realloc classes, failed ones included),
    /// indexed by `Op as u8`.
    pub calls_by_op: Vec<u64>,
    /// Calls per releasing entry point, indexed by `Op as u8`.
    pub frees_by_op: Vec<u64>,
    /// Successful allocations (a successful realloc counts as one).
    pub allocations: u64,
    /// Releases of tracked live blocks (a moving realloc releases one; an allocation returning
    /// an address that was still live implies one, see `overwritten`).
    pub deallocations: u64,
    /// Releases of addresses that were not live (allocated before tracking or untracked).
    pub unmatched_frees: u64,
    /// `free(NULL)` and friends: no-ops.
    pub null_frees: u64,
    /// Allocations returning an address that was still live: its release was not seen.
    pub overwritten: u64,
    /// Allocations that returned NULL.
    pub failed_allocations: u64,
    /// Bytes requested by successful allocations.
    pub bytes_allocated: u64,
    /// Highest sum of live requested bytes.
    pub peak_bytes: u64,
    /// Live blocks at that moment.
    pub peak_objects: u64,
    /// Timestamp (`CLOCK_MONOTONIC` ns) when the peak was first reached; 0 with no events.
    pub peak_ts: u64,
    /// Live bytes at the end.
    pub leaked_bytes: u64,
    /// Live blocks at the end.
    pub leaked_objects: u64,
    /// Temporary allocations (heaptrack's definition).
    pub temporary_allocations: u64,
    /// Events replayed.
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
}

/// A fast hasher for addresses and ids (FxHash's multiply-rotate; keys are not adversarial).
#[derive(Default, Clone, Copy)]
pub struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0.rotate_left(5) ^ v).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
    fn write_u32(&mut self, v: u32) {
        self.write_u64(u64::from(v));
    }
}

/// A `HashMap` keyed by addresses or ids.
pub type IdMap<K, V> = HashMap<K, V, BuildHasherDefault<IdHasher>>;

#[derive(Clone, Copy)]
struct Live {
    size: u64,
    /// Index into `Replay::stacks`.
    slot: u32,
}

/// Replay state while walking events.
struct State {
    r: Replay,
    live: IdMap<u64, Live>,
    /// Trie node id -> index into `r.stacks` (u32::MAX = none yet).
    slot_of: Vec<u32>,
    /// Per thread: the address its last event allocated, 0 if its last event was anything else.
    last_alloc: IdMap<u32, u64>,
    cur_bytes: u64,
}

impl State {
    fn slot(&mut self, stack: u32) -> u32 {
        // A wild id (a damaged writer) would size the table by it: count it as no stack.
        let stack = if stack > crate::load::MAX_STACK_ID { 0 } else { stack };
        let i = stack as usize;
        if i >= self.slot_of.len() {
            self.slot_of.resize(i + 1, u32::MAX);
        }
        if self.slot_of[i] == u32::MAX {
            self.slot_of[i] = self.r.stacks.len() as u32;
            self.r.stacks.push(StackStats { stack, ..StackStats::default() });
        }
        self.slot_of[i]
    }

    fn alloc(&mut self, e: &Event) {
        if let Some(old) = self.live.get(&e.addr).copied() {
            // The release of the block that had this address was never seen.
            self.r.overwritten += 1;
            self.release(old, false);
        }
        let slot = self.slot(e.stack);
        let s = &mut self.r.stacks[slot as usize];
        s.allocs += 1;
        s.bytes += e.size;
        s.bytes_by_class[size_class(e.size)] += e.size;
        let b = bin_of(e.size);
        self.r.bins.allocs[b] += 1;
        self.r.bins.bytes[b] += e.size;
        self.r.allocations += 1;
        self.r.bytes_allocated += e.size;
        self.live.insert(e.addr, Live { size: e.size, slot });
        self.cur_bytes += e.size;
        if self.cur_bytes > self.r.peak_bytes {
            self.r.peak_bytes = self.cur_bytes;
            self.r.peak_objects = self.live.len() as u64;
            self.r.peak_ts = e.ts;
        }
    }

    /// Releases `addr` for thread `tid`; false if it was not live.
    fn free(&mut self, tid: u32, addr: u64) -> bool {
        let Some(l) = self.live.remove(&addr) else {
            return false;
        };
        let temporary = self.last_alloc.get(&tid) == Some(&addr);
        self.release(l, temporary);
        true
    }

    fn release(&mut self, l: Live, temporary: bool) {
        let s = &mut self.r.stacks[l.slot as usize];
        s.frees += 1;
        if temporary {
            s.temporary += 1;
            self.r.temporary_allocations += 1;
        }
        let b = bin_of(l.size);
        self.r.bins.frees[b] += 1;
        self.r.bins.freed_bytes[b] += l.size;
        self.r.deallocations += 1;
        self.cur_bytes -= l.size;
    }

    fn event(&mut self, e: &Event) {
        self.r.events += 1;
        self.r.first_ts.get_or_insert(e.ts);
        self.r.last_ts = Some(e.ts);
        let mut allocated = 0;
        match e.op.class() {
            OpClass::Alloc => {
                self.r.calls_by_op[e.op as usize] += 1;
                if e.addr == 0 {
                    self.r.failed_allocations += 1;
                } else {
                    self.alloc(e);
                    allocated = e.addr;
                }
            }
            OpClass::Realloc => {
                self.r.calls_by_op[e.op as usize] += 1;
                if e.addr != 0 || e.size == 0 {
                    if e.old_addr != 0 && !self.free(e.tid, e.old_addr) {
                        self.r.unmatched_frees += 1;
                    }
                    if e.addr != 0 {
                        self.alloc(e);
                        allocated = e.addr;
                    }
                } else {
                    self.r.failed_allocations += 1;
                }
            }
            OpClass::Dealloc => {
                self.r.frees_by_op[e.op as usize] += 1;
                if e.addr == 0 {
                    self.r.null_frees += 1;
                } else if !self.free(e.tid, e.addr) {
                    self.r.unmatched_frees += 1;
                }
            }
        }
        self.last_alloc.insert(e.tid, allocated);
    }

    fn finish(mut self) -> Replay {
        for l in self.live.values() {
            let s = &mut self.r.stacks[l.slot as usize];
            s.kept += 1;
            s.kept_bytes += l.size;
            s.kept_by_class[size_class(l.size)] += l.size;
            self.r.leaked_bytes += l.size;
        }
        self.r.leaked_objects = self.live.len() as u64;
        self.r.threads = self.last_alloc.len() as u64;
        self.r
    }
}

/// Replays `events` (in timestamp order).
pub fn replay(events: impl Iterator<Item = Event>) -> Replay {
    let n_ops = Op::ALL.iter().map(|&o| o as usize).max().unwrap_or(0) + 1;
    let mut st = State {
        r: Replay { calls_by_op: vec![0; n_ops], frees_by_op: vec![0; n_ops], ..Replay::default() },
        live: IdMap::default(),
        slot_of: Vec::new(),
        last_alloc: IdMap::default(),
        cur_bytes: 0,
    };
    for e in events {
        st.event(&e);
    }
    st.finish()
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
        assert_eq!(r.allocations, 4);
        assert_eq!(r.deallocations, 3);
        assert_eq!(r.leaked_objects, 1);
        assert_eq!(r.leaked_bytes, 30);
        assert_eq!(r.unmatched_frees, 1);
        assert_eq!(r.null_frees, 1);
        assert_eq!(r.failed_allocations, 2);
        assert_eq!(r.temporary_allocations, 2);
        assert_eq!(r.bytes_allocated, 110);
        assert_eq!((r.peak_bytes, r.peak_ts), (80, 5));
        assert_eq!(r.calls_by_op[Op::Malloc as usize], 4);
        assert_eq!(r.calls_by_op[Op::Realloc as usize], 3);
        assert_eq!(r.frees_by_op[Op::Free as usize], 3);
        assert_eq!(r.threads, 2);
        assert_eq!(r.allocations - r.deallocations, r.leaked_objects);
        let s2 = r.stacks.iter().find(|s| s.stack == 2).unwrap();
        assert_eq!((s2.allocs, s2.kept, s2.kept_bytes, s2.kept_by_class), (1, 1, 30, [30, 0, 0, 0]));
        assert_eq!(r.bins.frees[50], 1);
        assert_eq!(r.bins.allocs[10], 1);
    }

    #[test]
    fn reused_live_address_implies_a_release() {
        let evs = [ev(1, 1, Op::Malloc, 0x100, 0, 10, 1), ev(2, 1, Op::Malloc, 0x100, 0, 2000, 1)];
        let r = replay(evs.into_iter());
        assert_eq!((r.allocations, r.deallocations, r.overwritten, r.leaked_objects), (2, 1, 1, 1));
        assert_eq!(r.bins.allocs[BIN_COUNT - 1], 1);
        assert_eq!(r.leaked_bytes, 2000);
    }
}
