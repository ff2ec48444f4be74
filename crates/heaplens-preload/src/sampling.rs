//! Sampling for production (`heaplens run --sample-rate BYTES`): allocations are sampled as a
//! Poisson process over bytes, as tcmalloc, jemalloc and Go's heap profiler do. Each thread
//! counts down the bytes it allocates; an allocation that crosses zero is recorded and a new
//! exponentially distributed distance is drawn, so an allocation of `s` bytes is recorded with
//! probability `1 - exp(-s / rate)` and reports can weight it back to an unbiased estimate.
//!
//! Only the deallocations of recorded blocks are recorded. Which blocks those are is kept in a
//! counting filter (one byte per bucket, 64 KiB in this library's .bss) backed by an exact set,
//! and the filter's occupied buckets in a bitmap of 8 KiB: a free of an unrecorded block costs
//! one bit test, in a table small enough to stay in the first-level cache.

use std::collections::HashSet;
use std::hash::BuildHasherDefault;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::Mutex;

use crate::tls::Tls;

/// Mean bytes between samples; 0 when every allocation is recorded.
static RATE: AtomicU64 = AtomicU64::new(0);

/// 64 KiB of counters: small enough to stay in cache on the hot free path.
const BUCKETS: usize = 1 << 16;
const SHARDS: usize = 64;
static COUNTS: [AtomicU8; BUCKETS] = [const { AtomicU8::new(0) }; BUCKETS];
/// Bit `b` set when bucket `b` of [`COUNTS`] is not zero (what the free paths test).
pub(crate) static OCCUPIED: [AtomicU8; BUCKETS / 8] = [const { AtomicU8::new(0) }; BUCKETS / 8];
type FxSet = HashSet<u64, BuildHasherDefault<rustc_hash::FxHasher>>;
static EXACT: [Mutex<Option<FxSet>>; SHARDS] = [const { Mutex::new(None) }; SHARDS];

/// Turns sampling on with mean distance `rate` bytes (0 = off). Call at start-up.
pub fn set_rate(rate: u64) {
    RATE.store(rate, Ordering::Relaxed);
}

/// The mean distance between samples in bytes (0 = off).
pub fn rate() -> u64 {
    RATE.load(Ordering::Relaxed)
}

/// True when allocations are sampled.
#[inline(always)]
pub fn enabled() -> bool {
    RATE.load(Ordering::Relaxed) != 0
}

/// The hooks' fast path while sampling, taken before entering the monitor: counts `size`
/// bytes down in this thread's slot and tells whether the allocation goes unrecorded (nearly
/// always). False when sampling is off. When it returns false the allocation is recorded and
/// [`rearm`] draws the next distance.
#[inline(always)]
pub fn skip(size: usize) -> bool {
    if !enabled() {
        return false;
    }
    let slot = crate::tls::slot();
    slot.sample_left = slot.sample_left.wrapping_sub(size as i64);
    slot.sample_left > 0
}

/// Draws the distance to the next sample after the count crossed zero.
#[cold]
pub fn rearm(slot: &mut Tls) {
    let rate = RATE.load(Ordering::Relaxed) as f64;
    while slot.sample_left <= 0 {
        slot.sample_left += next_distance(&mut slot.rng, rate);
    }
}

/// Whether an allocation of `size` bytes on this thread is to be recorded ([`skip`] and
/// [`rearm`] in one, for reallocations).
#[inline(always)]
pub fn take(slot: &mut Tls, size: usize) -> bool {
    slot.sample_left -= size as i64;
    if slot.sample_left > 0 {
        return false;
    }
    rearm(slot);
    true
}

/// The deallocation hooks' fast path while sampling: true when `addr` is not a recorded block
/// (its release goes unrecorded); a recorded one is forgotten here. False when sampling is off.
#[inline(always)]
pub fn skip_free(addr: u64) -> bool {
    enabled() && !remove(addr)
}

/// An exponentially distributed distance with mean `rate` bytes (at least 1).
fn next_distance(rng: &mut u64, rate: f64) -> i64 {
    if *rng == 0 {
        // Seed per thread from its id and the clock, so threads do not sample in lockstep.
        *rng = (u64::from(crate::procinfo::gettid()) << 32) ^ crate::procinfo::now_ns() | 1;
    }
    // xorshift64*, then a uniform in (0, 1].
    *rng ^= *rng >> 12;
    *rng ^= *rng << 25;
    *rng ^= *rng >> 27;
    let u = ((rng.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11) as f64 + 1.0) / (1u64 << 53) as f64;
    ((-u.ln() * rate) as i64).max(1)
}

/// The filter bucket of a block (`crate::fastpath` computes the same in assembly).
#[inline(always)]
fn bucket(addr: u64) -> usize {
    ((addr >> 4).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 48) as usize & (BUCKETS - 1)
}

/// Makes bucket `b`'s bit say whether its count is non-zero. Threads that change the count at
/// once may write the bit in either order: whoever writes it last checks the count did not
/// move meanwhile, and writes again if it did.
fn sync_bit(b: usize) {
    let (byte, bit) = (&OCCUPIED[b / 8], 1u8 << (b % 8));
    loop {
        let c = COUNTS[b].load(Ordering::Acquire);
        if c != 0 {
            byte.fetch_or(bit, Ordering::AcqRel);
        } else {
            byte.fetch_and(!bit, Ordering::AcqRel);
        }
        if COUNTS[b].load(Ordering::Acquire) == c {
            return;
        }
    }
}

/// Whether bucket `b` may hold a recorded block.
#[inline(always)]
fn occupied(b: usize) -> bool {
    OCCUPIED[b / 8].load(Ordering::Acquire) & (1 << (b % 8)) != 0
}

/// Remembers that the block at `addr` was recorded.
pub fn insert(addr: u64) {
    let b = bucket(addr);
    // Saturate rather than wrap: a saturated bucket just always consults the exact set.
    let _ = COUNTS[b].fetch_update(Ordering::AcqRel, Ordering::Acquire, |v| Some(v.saturating_add(1)));
    sync_bit(b);
    if let Ok(mut s) = EXACT[(addr >> 4) as usize % SHARDS].lock() {
        s.get_or_insert_with(FxSet::default).insert(addr);
    }
}

/// Forgets the block at `addr`; true when it was a recorded block (its release is recorded).
#[inline(always)]
pub fn remove(addr: u64) -> bool {
    let b = bucket(addr);
    if !occupied(b) {
        return false;
    }
    remove_slow(addr, b)
}

#[cold]
fn remove_slow(addr: u64, b: usize) -> bool {
    let found =
        EXACT[(addr >> 4) as usize % SHARDS].lock().is_ok_and(|mut s| s.as_mut().is_some_and(|s| s.remove(&addr)));
    if found {
        let _ =
            COUNTS[b].fetch_update(Ordering::AcqRel, Ordering::Acquire, |v| Some(if v == u8::MAX { v } else { v - 1 }));
        sync_bit(b);
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_remembers_exactly() {
        for a in (0x1000u64..0x1000 + 64 * 100).step_by(64) {
            insert(a);
        }
        assert!(remove(0x1000));
        assert!(!remove(0x1000));
        assert!(!remove(0x1010));
        assert!(remove(0x1000 + 64 * 99));
        // Every bucket's bit agrees with its count once the blocks are gone again.
        for a in (0x1000u64..0x1000 + 64 * 99).step_by(64).skip(1) {
            assert!(remove(a), "{a:#x}");
        }
        for (b, count) in COUNTS.iter().enumerate() {
            assert_eq!(occupied(b), count.load(Ordering::Relaxed) != 0, "bucket {b}");
        }
    }

    #[test]
    fn distances_average_the_rate() {
        let mut rng = 0;
        let n = 200_000;
        let mean = (0..n).map(|_| next_distance(&mut rng, 4096.0) as f64).sum::<f64>() / n as f64;
        assert!((mean - 4096.0).abs() < 4096.0 * 0.02, "mean distance {mean}");
    }
}
