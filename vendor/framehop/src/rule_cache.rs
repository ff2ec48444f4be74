use alloc::boxed::Box;

use crate::unwind_rule::UnwindRule;

// heaplens: upstream framehop 0.16.0 has 509 direct-mapped slots. Large programs (gcc's cc1,
// 25 MB of code) missed it on most frames. This cache has 8192 sets of four ways (32768 entries,
// 512 KiB; a set is one cache line), indexed by a multiplicative (Fibonacci) hash of the
// address. With one way per set, hot return addresses that shared a slot evicted each other on
// every capture: cc1 has 4508 distinct ones, yet missed 514143 times at 32749 direct-mapped
// slots, re-parsing DWARF CFI each time.
const SET_BITS: u32 = 13;
const SET_COUNT: usize = 1 << SET_BITS;
const WAYS: usize = 4;
const CACHE_ENTRY_COUNT: usize = SET_COUNT * WAYS;

pub struct RuleCache<R: UnwindRule> {
    /// Set `s` is `entries[WAYS * s..WAYS * (s + 1)]`, the most recently inserted first: one
    /// cache line (the entries are 16 bytes, the array page-aligned).
    entries: Box<[Option<CacheEntry<R>>; CACHE_ENTRY_COUNT]>,
    stats: CacheStats,
}

impl<R: UnwindRule> RuleCache<R> {
    pub fn new() -> Self {
        Self {
            // heaplens: built on the heap, not the stack (a program's thread may have a small one).
            entries: vec![None; CACHE_ENTRY_COUNT].into_boxed_slice().try_into().unwrap_or_else(|_| unreachable!()),
            stats: CacheStats::new(),
        }
    }

    #[inline]
    fn set_of(address: u64) -> u16 {
        (address.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - SET_BITS)) as u16
    }

    #[inline(always)]
    pub fn lookup(&mut self, address: u64, modules_generation: u16) -> CacheResult<R> {
        let slot = Self::set_of(address);
        let base = slot as usize * WAYS;
        let mut empty = false;
        let mut wrong_modules = false;
        for way in 0..WAYS {
            match &self.entries[base + way] {
                None => empty = true,
                Some(entry) if entry.address == address => {
                    if entry.modules_generation == modules_generation {
                        self.stats.hit_count += 1;
                        return CacheResult::Hit(entry.unwind_rule);
                    }
                    wrong_modules = true;
                }
                Some(_) => {}
            }
        }
        if wrong_modules {
            self.stats.miss_wrong_modules_count += 1;
        } else if empty {
            self.stats.miss_empty_slot_count += 1;
        } else {
            self.stats.miss_wrong_address_count += 1;
        }
        CacheResult::Miss(CacheHandle {
            slot,
            address,
            modules_generation,
        })
    }

    /// Inserts into the set's first way, moving the others down (hits do not reorder: up to
    /// `WAYS` hot addresses of one set all stay).
    pub fn insert(&mut self, handle: CacheHandle, unwind_rule: R) {
        let CacheHandle {
            slot,
            address,
            modules_generation,
        } = handle;
        let base = slot as usize * WAYS;
        let entry = Some(CacheEntry {
            address,
            modules_generation,
            unwind_rule,
        });
        let set = &mut self.entries[base..base + WAYS];
        // The new entry goes first; out goes an older entry of this address (from an earlier
        // module set) or else the set's least recently inserted one.
        let at = set.iter().position(|e| matches!(e, Some(e) if e.address == address)).unwrap_or(WAYS - 1);
        set.copy_within(0..at, 1);
        set[0] = entry;
    }

    /// Returns a snapshot of the cache usage statistics.
    pub fn stats(&self) -> CacheStats {
        self.stats
    }
}

pub enum CacheResult<R: UnwindRule> {
    Miss(CacheHandle),
    Hit(R),
}

pub struct CacheHandle {
    /// The set.
    slot: u16,
    address: u64,
    modules_generation: u16,
}

const _: () = assert!(
    SET_COUNT as u64 <= u16::MAX as u64 + 1,
    "u16 should be sufficient to store the cache set index"
);

#[derive(Clone, Copy, Debug)]
struct CacheEntry<R: UnwindRule> {
    address: u64,
    modules_generation: u16,
    unwind_rule: R,
}

/// Statistics about the effectiveness of the rule cache.
#[derive(Default, Debug, Clone, Copy)]
pub struct CacheStats {
    /// The number of successful cache hits.
    pub hit_count: u64,
    /// The number of cache misses that were due to an empty slot.
    pub miss_empty_slot_count: u64,
    /// The number of cache misses that were due to a filled slot whose module
    /// generation didn't match the unwinder's current module generation.
    /// (This means that either the unwinder's modules have changed since the
    /// rule in this slot was stored, or the same cache is used with multiple
    /// unwinders and the unwinders are stomping on each other's cache slots.)
    pub miss_wrong_modules_count: u64,
    /// The number of cache misses that were due to cache slot collisions of
    /// different addresses.
    pub miss_wrong_address_count: u64,
}

impl CacheStats {
    /// Create a new instance.
    pub fn new() -> Self {
        Default::default()
    }

    /// The number of total lookups.
    pub fn total(&self) -> u64 {
        self.hits() + self.misses()
    }

    /// The number of total hits.
    pub fn hits(&self) -> u64 {
        self.hit_count
    }

    /// The number of total misses.
    pub fn misses(&self) -> u64 {
        self.miss_empty_slot_count + self.miss_wrong_modules_count + self.miss_wrong_address_count
    }
}

#[cfg(test)]
mod tests {
    use crate::{aarch64::UnwindRuleAarch64, x86_64::UnwindRuleX86_64};

    use super::*;

    // Ensure that the size of Option<CacheEntry<UnwindRuleX86_64>> doesn't change by accident.
    #[test]
    fn test_cache_entry_size() {
        assert_eq!(
            core::mem::size_of::<Option<CacheEntry<UnwindRuleX86_64>>>(),
            16
        );
        assert_eq!(
            core::mem::size_of::<Option<CacheEntry<UnwindRuleAarch64>>>(),
            24 // <-- larger than we'd like
        );
    }
}
