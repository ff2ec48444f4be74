use alloc::boxed::Box;
use core::mem::MaybeUninit;

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
    /// cache line (the entries are 16 bytes, the array page-aligned). An entry of address 0 is
    /// empty (no code is at address 0).
    entries: Box<[CacheEntry<R>]>,
    stats: CacheStats,
}

impl<R: UnwindRule> RuleCache<R> {
    pub fn new() -> Self {
        Self {
            // heaplens: built on the heap, not the stack (a program's thread may have a small one),
            // and zeroed by the allocator (fresh pages from the kernel for 512 KiB) rather than
            // written entry by entry: a thread that unwinds little touches few of its pages.
            // SAFETY: all-zero bytes are a valid (empty) entry: a u64, a u16, and a MaybeUninit.
            entries: unsafe { Box::<[CacheEntry<R>]>::new_zeroed_slice(CACHE_ENTRY_COUNT).assume_init() },
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
            let entry = &self.entries[base + way];
            if entry.address == 0 {
                empty = true;
            } else if entry.address == address {
                if entry.modules_generation == modules_generation {
                    self.stats.hit_count += 1;
                    // SAFETY: an entry with an address was written by `insert`, rule and all.
                    return CacheResult::Hit(unsafe { entry.unwind_rule.assume_init() });
                }
                wrong_modules = true;
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
        if address == 0 {
            return;
        }
        let entry = CacheEntry {
            address,
            modules_generation,
            unwind_rule: MaybeUninit::new(unwind_rule),
        };
        let set = &mut self.entries[base..base + WAYS];
        // The new entry goes first; out goes an older entry of this address (from an earlier
        // module set) or else the set's least recently inserted one.
        let at = set.iter().position(|e| e.address == address).unwrap_or(WAYS - 1);
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
    /// 0: empty.
    address: u64,
    modules_generation: u16,
    /// Written whenever `address` is not 0.
    unwind_rule: MaybeUninit<R>,
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

    // Ensure that the size of CacheEntry<UnwindRuleX86_64> doesn't change by accident.
    #[test]
    fn test_cache_entry_size() {
        assert_eq!(core::mem::size_of::<CacheEntry<UnwindRuleX86_64>>(), 16);
        assert_eq!(
            core::mem::size_of::<CacheEntry<UnwindRuleAarch64>>(),
            24 // <-- larger than we'd like
        );
    }

    #[test]
    fn a_new_cache_is_empty_and_keeps_what_is_inserted() {
        let mut c = RuleCache::<UnwindRuleX86_64>::new();
        let CacheResult::Miss(h) = c.lookup(0x1234, 1) else { panic!("a new cache hit") };
        assert_eq!(c.stats().miss_empty_slot_count, 1);
        c.insert(h, UnwindRuleX86_64::JustReturn);
        assert!(matches!(c.lookup(0x1234, 1), CacheResult::Hit(UnwindRuleX86_64::JustReturn)));
        assert!(matches!(c.lookup(0x1234, 2), CacheResult::Miss(_)), "another module generation");
    }
}
