//! The program's heap counters for `heaplens_api::stats()` (dhat-rs's heap statistics, answered
//! by the monitor): blocks and bytes allocated in total, live now, and at the peak. Off until the
//! program first asks (its `heaplens_api::Counting` allocator asks at its first allocation, so
//! that a Rust program's counts start with it): a map of live blocks costs every call a lock
//! and a hash lookup, which a program that never asks should not pay. Blocks allocated before
//! are not in the map, and their releases are not counted. Pool blocks (`heaplens_pool_v1`) are
//! the program's own allocator's, not the heap's; a sampled run has no exact counts to give.
//! A forked child's counters go on from its parent's, as its heap does.

use std::collections::HashMap;
use std::hash::BuildHasherDefault;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;

static ENABLED: AtomicBool = AtomicBool::new(false);

type Shard = HashMap<u64, u64, BuildHasherDefault<rustc_hash::FxHasher>>;
const SHARDS: usize = 64;
/// Live blocks: address → requested size, sharded by address so that threads rarely meet.
static LIVE: [Mutex<Option<Shard>>; SHARDS] = [const { Mutex::new(None) }; SHARDS];

/// [total blocks, total bytes, live blocks, live bytes, peak blocks, peak bytes]: the layout of
/// `heaplens_heap_stats_v1`'s answer.
static COUNTS: [AtomicU64; 6] = [const { AtomicU64::new(0) }; 6];
const TOTAL_BLOCKS: usize = 0;
const TOTAL_BYTES: usize = 1;
const LIVE_BLOCKS: usize = 2;
const LIVE_BYTES: usize = 3;
const PEAK_BLOCKS: usize = 4;
const PEAK_BYTES: usize = 5;

/// Whether the counters run.
#[inline(always)]
pub fn enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

fn shard(addr: u64) -> usize {
    (addr >> 4) as usize % SHARDS
}

/// A block of `size` bytes at `addr` was allocated.
pub fn allocated(addr: u64, size: u64) {
    if let Ok(mut m) = LIVE[shard(addr)].lock() {
        m.get_or_insert_with(Shard::default).insert(addr, size);
    }
    COUNTS[TOTAL_BLOCKS].fetch_add(1, Ordering::Relaxed);
    COUNTS[TOTAL_BYTES].fetch_add(size, Ordering::Relaxed);
    let blocks = COUNTS[LIVE_BLOCKS].fetch_add(1, Ordering::Relaxed) + 1;
    let bytes = COUNTS[LIVE_BYTES].fetch_add(size, Ordering::Relaxed) + size;
    if bytes > COUNTS[PEAK_BYTES].load(Ordering::Relaxed)
        && COUNTS[PEAK_BYTES].fetch_max(bytes, Ordering::Relaxed) < bytes
    {
        COUNTS[PEAK_BLOCKS].store(blocks, Ordering::Relaxed);
    }
}

/// The block at `addr` was released (nothing when it was allocated before the counters ran).
pub fn released(addr: u64) {
    let size = LIVE[shard(addr)].lock().ok().and_then(|mut m| m.as_mut().and_then(|m| m.remove(&addr)));
    if let Some(size) = size {
        COUNTS[LIVE_BLOCKS].fetch_sub(1, Ordering::Relaxed);
        COUNTS[LIVE_BYTES].fetch_sub(size, Ordering::Relaxed);
    }
}

/// `heaplens_heap_stats_v1(out, n)`: turns the counters on if they were off, and writes the
/// first `n` (at most 6) of [total blocks, total bytes, live blocks, live bytes, peak blocks,
/// peak bytes] to `out`. Returns 1 when they were already on (the numbers count from then), 0
/// when this call turned them on (all 0), -1 when the monitor cannot count (a sampled run).
///
/// # Safety
/// `out` is valid for `n` writes of `u64`.
#[cfg(not(feature = "cpu_monitor"))]
#[no_mangle]
pub unsafe extern "C" fn heaplens_heap_stats_v1(out: *mut u64, n: usize) -> i32 {
    if crate::sampling::enabled() {
        return -1;
    }
    let was = ENABLED.swap(true, Ordering::AcqRel);
    for (i, c) in COUNTS.iter().enumerate().take(n.min(COUNTS.len())) {
        // SAFETY: the caller gives room for `n` values.
        unsafe { out.add(i).write(c.load(Ordering::Relaxed)) };
    }
    i32::from(was)
}
