//! The live set of the replay: address -> (requested size, stack slot) of every block allocated
//! and not yet released.
//!
//! A hash table spreads neighbouring blocks over the whole table, so with millions of live
//! blocks nearly every operation is a cache miss. Allocators hand out neighbouring addresses
//! to blocks allocated close in time, so this map keeps that locality: the address space is
//! cut in 4 KiB pages, each page (found through a small directory and a one-entry cache) has a
//! dense array of 256 slots, one per 16-byte granule. Addresses that are not 16-byte aligned,
//! and values that do not pack into 64 bits, go to an ordinary hash map.

use std::collections::HashMap;
use std::hash::BuildHasherDefault;

use rustc_hash::FxHasher;

type Fx = BuildHasherDefault<FxHasher>;

const PAGE_SHIFT: u32 = 12;
const GRANULE_SHIFT: u32 = 4;
const SLOTS: usize = 1 << (PAGE_SHIFT - GRANULE_SHIFT);
/// Bits of the packed value holding `slot + 1` (0 = empty).
const SLOT_BITS: u32 = 24;
const SLOT_MASK: u64 = (1 << SLOT_BITS) - 1;
/// Sizes below this pack next to the slot.
const SIZE_LIMIT: u64 = 1 << (64 - SLOT_BITS);
const NO_PAGE: u64 = u64::MAX;

#[inline(always)]
fn pack(size: u64, slot: u32) -> Option<u64> {
    let s = u64::from(slot) + 1;
    (size < SIZE_LIMIT && s <= SLOT_MASK).then_some((size << SLOT_BITS) | s)
}

#[inline(always)]
fn unpack(v: u64) -> (u64, u32) {
    (v >> SLOT_BITS, ((v & SLOT_MASK) - 1) as u32)
}

/// Live blocks by address.
pub(crate) struct LiveMap {
    /// Page number -> index into `pages`.
    dir: HashMap<u64, u32, Fx>,
    pages: Vec<Box<[u64]>>,
    /// Live blocks per page.
    counts: Vec<u32>,
    /// Indices of pages not in the directory, all slots zero.
    spare: Vec<u32>,
    /// Pages in the directory with no live block.
    empty_pages: usize,
    /// Unaligned addresses and unpackable values.
    other: HashMap<u64, (u64, u32), Fx>,
    len: u64,
    cache_page: u64,
    cache_idx: u32,
}

impl Default for LiveMap {
    fn default() -> Self {
        Self {
            dir: HashMap::default(),
            pages: Vec::new(),
            counts: Vec::new(),
            spare: Vec::new(),
            empty_pages: 0,
            other: HashMap::default(),
            len: 0,
            cache_page: NO_PAGE,
            cache_idx: 0,
        }
    }
}

impl LiveMap {
    /// Live blocks.
    pub fn len(&self) -> u64 {
        self.len
    }

    #[inline(always)]
    fn page_of(&mut self, page: u64) -> Option<u32> {
        if page == self.cache_page {
            return Some(self.cache_idx);
        }
        let idx = *self.dir.get(&page)?;
        self.cache_page = page;
        self.cache_idx = idx;
        Some(idx)
    }

    #[cold]
    fn new_page(&mut self, page: u64) -> u32 {
        let idx = match self.spare.pop() {
            Some(i) => i,
            None => {
                self.pages.push(vec![0u64; SLOTS].into_boxed_slice());
                self.counts.push(0);
                (self.pages.len() - 1) as u32
            }
        };
        self.dir.insert(page, idx);
        self.empty_pages += 1;
        self.cache_page = page;
        self.cache_idx = idx;
        idx
    }

    /// Returns pages without live blocks to the spare list once they are more than half of all
    /// pages (so a page that empties and fills again is not churned through the directory).
    #[cold]
    fn sweep(&mut self) {
        let counts = &self.counts;
        let spare = &mut self.spare;
        self.dir.retain(|_, &mut idx| {
            let keep = counts[idx as usize] != 0;
            if !keep {
                spare.push(idx);
            }
            keep
        });
        self.empty_pages = 0;
        self.cache_page = NO_PAGE;
    }

    /// Inserts a block; returns the block that was live at the same address (its release was
    /// never seen), if any.
    #[inline(always)]
    pub fn insert(&mut self, addr: u64, size: u64, slot: u32) -> Option<(u64, u32)> {
        let packed = pack(size, slot);
        if addr & ((1 << GRANULE_SHIFT) - 1) != 0 || packed.is_none() {
            return self.insert_other(addr, size, slot);
        }
        let page = addr >> PAGE_SHIFT;
        let idx = match self.page_of(page) {
            Some(i) => i,
            None => self.new_page(page),
        };
        let cell = &mut self.pages[idx as usize][((addr >> GRANULE_SHIFT) as usize) & (SLOTS - 1)];
        let old = *cell;
        *cell = packed.unwrap_or(0);
        if old != 0 {
            return Some(unpack(old));
        }
        let c = &mut self.counts[idx as usize];
        *c += 1;
        if *c == 1 {
            self.empty_pages -= 1;
        }
        self.len += 1;
        if !self.other.is_empty() {
            if let Some(o) = self.other.remove(&addr) {
                self.len -= 1;
                return Some(o);
            }
        }
        None
    }

    #[cold]
    fn insert_other(&mut self, addr: u64, size: u64, slot: u32) -> Option<(u64, u32)> {
        // An aligned address may hold a packed block from before.
        let old = if addr & ((1 << GRANULE_SHIFT) - 1) == 0 { self.remove_paged(addr) } else { None };
        let old2 = self.other.insert(addr, (size, slot));
        if old2.is_none() {
            self.len += 1;
        }
        old.or(old2)
    }

    #[inline(always)]
    fn remove_paged(&mut self, addr: u64) -> Option<(u64, u32)> {
        let page = addr >> PAGE_SHIFT;
        let idx = self.page_of(page)?;
        let cell = &mut self.pages[idx as usize][((addr >> GRANULE_SHIFT) as usize) & (SLOTS - 1)];
        let old = std::mem::take(cell);
        if old == 0 {
            return None;
        }
        self.len -= 1;
        let c = &mut self.counts[idx as usize];
        *c -= 1;
        if *c == 0 {
            self.empty_pages += 1;
            if self.empty_pages > 64 && self.empty_pages * 2 > self.dir.len() {
                self.sweep();
            }
        }
        Some(unpack(old))
    }

    /// Removes the block at `addr`, if live.
    #[inline(always)]
    pub fn remove(&mut self, addr: u64) -> Option<(u64, u32)> {
        if addr & ((1 << GRANULE_SHIFT) - 1) == 0 {
            if let Some(v) = self.remove_paged(addr) {
                return Some(v);
            }
        }
        if self.other.is_empty() {
            return None;
        }
        let v = self.other.remove(&addr)?;
        self.len -= 1;
        Some(v)
    }

    /// Calls `f(size, slot)` for every live block (in no particular order).
    pub fn for_each(&self, mut f: impl FnMut(u64, u32)) {
        for &idx in self.dir.values() {
            if self.counts[idx as usize] == 0 {
                continue;
            }
            for &v in self.pages[idx as usize].iter().filter(|&&v| v != 0) {
                let (size, slot) = unpack(v);
                f(size, slot);
            }
        }
        for &(size, slot) in self.other.values() {
            f(size, slot);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn behaves_like_a_hash_map() {
        let mut m = LiveMap::default();
        let mut r: HashMap<u64, (u64, u32)> = HashMap::new();
        let mut x = 12345u64;
        for i in 0..200_000u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            // Mostly aligned addresses in a few regions, some odd ones, some huge values.
            let region = [0x5555_0000_0000u64, 0x7f00_1234_0000, 0x10][(x % 3) as usize];
            let mut addr = region + (x >> 8) % 50_000 * 16;
            if x % 97 == 0 {
                addr += 8;
            }
            let size = if x % 101 == 0 { 1 << 50 } else { x % 3000 };
            let slot = if x % 103 == 0 { 1 << 30 } else { (x % 1000) as u32 };
            if i % 3 == 2 {
                assert_eq!(m.remove(addr), r.remove(&addr));
            } else {
                assert_eq!(m.insert(addr, size, slot), r.insert(addr, (size, slot)));
            }
            assert_eq!(m.len(), r.len() as u64);
        }
        let mut all = Vec::new();
        m.for_each(|s, sl| all.push((s, sl)));
        let mut want: Vec<_> = r.values().copied().collect();
        all.sort_unstable();
        want.sort_unstable();
        assert_eq!(all, want);
        // Empty it: the sweep must not lose anything.
        for a in r.keys() {
            assert!(m.remove(*a).is_some());
        }
        assert_eq!(m.len(), 0);
    }
}
