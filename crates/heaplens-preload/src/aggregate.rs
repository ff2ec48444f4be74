//! The aggregated (long-run) mode, `heaplens run --aggregate`: instead of an event per call,
//! each thread adds to per-stack and per-size counters, and a map of live blocks (address →
//! stack, size) keeps leaks and the in-use total exact. The trace gets an Aggregate record at
//! exit and whenever `heaplens snapshot` asks for one, so it grows with the number of distinct
//! call stacks, not with the number of allocations (mprof kept such counters in-process;
//! memray's aggregated mode is the modern equivalent).

use std::collections::HashMap;
use std::hash::BuildHasherDefault;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;

use heaplens_trace::aggregate::{size_class, LARGE_BIN};
use heaplens_trace::{AggregateRecord, Op, SizeCounters, StackCounters};

use crate::procinfo;

static ENABLED: AtomicBool = AtomicBool::new(false);
static IN_USE: AtomicU64 = AtomicU64::new(0);
static PEAK: AtomicU64 = AtomicU64::new(0);
static PEAK_TS: AtomicU64 = AtomicU64::new(0);
static UNMATCHED: AtomicU64 = AtomicU64::new(0);

type FxMap<K, V> = HashMap<K, V, BuildHasherDefault<rustc_hash::FxHasher>>;
/// One shard of the live-block map: address → (stack id, requested size in bytes).
type LiveShard = FxMap<u64, (u32, u64)>;
const SHARDS: usize = 64;
/// Live blocks: address → (stack, requested size). Sharded by address so threads rarely meet.
static LIVE: [Mutex<Option<LiveShard>>; SHARDS] = [const { Mutex::new(None) }; SHARDS];
/// Counters of threads that have exited.
static RETIRED: Mutex<Option<Counters>> = Mutex::new(None);

/// Turns the mode on. Call at start-up.
pub fn enable() {
    ENABLED.store(true, Ordering::Relaxed);
}

/// True in aggregated mode.
#[inline(always)]
pub fn enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

/// True (once per request) when `heaplens snapshot` asked for a snapshot of the trace at
/// `trace`: it creates the request file ([`heaplens_trace::snapshot_request_path`]), which is
/// removed here, telling it the request was taken. A file, not a signal: the program's signals
/// stay its own.
pub fn snapshot_wanted(trace: &std::path::Path) -> bool {
    std::fs::remove_file(heaplens_trace::snapshot_request_path(trace)).is_ok()
}

/// One thread's counters.
#[derive(Default)]
pub struct Counters {
    calls: FxMap<u8, u64>,
    /// [allocs, bytes, frees, freed bytes] per size 0..=1024 and `LARGE_BIN`.
    sizes: Vec<[u64; 4]>,
    /// Indexed by stack id.
    stacks: Vec<StackCounters>,
}

impl Counters {
    fn stack(&mut self, id: u32) -> &mut StackCounters {
        let i = id as usize;
        if i >= self.stacks.len() {
            self.stacks.resize(i + 1, StackCounters::default());
        }
        &mut self.stacks[i]
    }

    fn size(&mut self, size: u64) -> &mut [u64; 4] {
        if self.sizes.is_empty() {
            self.sizes = vec![[0; 4]; LARGE_BIN as usize + 1];
        }
        &mut self.sizes[size.min(LARGE_BIN) as usize]
    }

    fn add_into(&self, total: &mut Counters) {
        for (&op, &n) in &self.calls {
            *total.calls.entry(op).or_default() += n;
        }
        for (size, s) in self.sizes.iter().enumerate() {
            let t = total.size(size as u64);
            for k in 0..4 {
                t[k] += s[k];
            }
        }
        for (id, s) in self.stacks.iter().enumerate() {
            if s.allocs == 0 && s.frees == 0 {
                continue;
            }
            let t = total.stack(id as u32);
            t.allocs += s.allocs;
            t.bytes += s.bytes;
            t.frees += s.frees;
            t.freed_bytes += s.freed_bytes;
            for k in 0..4 {
                t.class_bytes[k] += s.class_bytes[k];
                t.class_freed[k] += s.class_freed[k];
            }
        }
    }
}

fn shard(addr: u64) -> usize {
    (addr >> 4) as usize % SHARDS
}

/// Counts one call through `op`.
pub fn call(c: &mut Counters, op: Op) {
    *c.calls.entry(op as u8).or_default() += 1;
}

/// Counts a block of `size` bytes allocated at `addr` by stack `stack`.
pub fn allocated(c: &mut Counters, addr: u64, size: u64, stack: u32) {
    if let Ok(mut m) = LIVE[shard(addr)].lock() {
        m.get_or_insert_with(FxMap::default).insert(addr, (stack, size));
    }
    let s = c.size(size);
    s[0] += 1;
    s[1] += size;
    let st = c.stack(stack);
    st.allocs += 1;
    st.bytes += size;
    st.class_bytes[size_class(size)] += size;
    let now = IN_USE.fetch_add(size, Ordering::Relaxed) + size;
    if now > PEAK.load(Ordering::Relaxed) && PEAK.fetch_max(now, Ordering::Relaxed) < now {
        PEAK_TS.store(procinfo::now_ticks(), Ordering::Relaxed);
    }
}

/// Counts the release of the block at `addr`, if the monitor saw it allocated.
pub fn released(c: &mut Counters, addr: u64) {
    let found = LIVE[shard(addr)].lock().ok().and_then(|mut m| m.as_mut().and_then(|m| m.remove(&addr)));
    let Some((stack, size)) = found else {
        UNMATCHED.fetch_add(1, Ordering::Relaxed);
        return;
    };
    let s = c.size(size);
    s[2] += 1;
    s[3] += size;
    let st = c.stack(stack);
    st.frees += 1;
    st.freed_bytes += size;
    st.class_freed[size_class(size)] += size;
    IN_USE.fetch_sub(size, Ordering::Relaxed);
}

/// Keeps an exiting thread's counters.
pub fn retire(c: &Counters) {
    if let Ok(mut r) = RETIRED.lock() {
        c.add_into(r.get_or_insert_with(Counters::default));
    }
}

/// The totals so far: retired threads plus every live thread's counters (`each` visits them).
pub fn snapshot(each: impl FnOnce(&mut dyn FnMut(&Counters))) -> AggregateRecord {
    let mut total = Counters::default();
    if let Ok(r) = RETIRED.lock() {
        if let Some(r) = r.as_ref() {
            r.add_into(&mut total);
        }
    }
    each(&mut |c| c.add_into(&mut total));
    let mut calls: Vec<(u8, u64)> = total.calls.into_iter().collect();
    calls.sort_unstable();
    let sizes = total
        .sizes
        .iter()
        .enumerate()
        .filter(|(_, s)| s[0] != 0 || s[2] != 0)
        .map(|(size, s)| SizeCounters { size: size as u64, allocs: s[0], bytes: s[1], frees: s[2], freed_bytes: s[3] })
        .collect();
    let stacks = total
        .stacks
        .iter()
        .enumerate()
        .filter(|(_, s)| s.allocs != 0 || s.frees != 0)
        .map(|(id, s)| StackCounters { stack: id as u32, ..*s })
        .collect();
    AggregateRecord {
        ts: procinfo::now_ticks(),
        peak_bytes: PEAK.load(Ordering::Relaxed),
        peak_ts: PEAK_TS.load(Ordering::Relaxed),
        in_use_bytes: IN_USE.load(Ordering::Relaxed),
        unmatched_frees: UNMATCHED.load(Ordering::Relaxed),
        calls,
        sizes,
        stacks,
    }
}

/// In a forked child: the counters and live blocks were the parent's; start from zero (frees
/// of inherited blocks then count as unmatched).
pub fn reset_after_fork() {
    for s in &LIVE {
        if let Ok(mut m) = s.lock() {
            *m = None;
        }
    }
    if let Ok(mut r) = RETIRED.lock() {
        *r = None;
    }
    for a in [&IN_USE, &PEAK, &PEAK_TS, &UNMATCHED] {
        a.store(0, Ordering::Relaxed);
    }
}
