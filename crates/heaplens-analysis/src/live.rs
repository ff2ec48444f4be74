//! The live set of the replay: address -> (requested size, stack slot) of every block allocated
//! and not yet released.
//!
//! A hash table spreads neighbouring blocks over the whole table, so with millions of live
//! blocks nearly every operation is a cache miss. Allocators hand out neighbouring addresses
//! to blocks allocated close in time, so this map keeps that locality: the address space is
//! cut in 4 KiB pages, each page (found through a small directory and a one-entry cache) has a
//! dense array of 128 slots, one per 32-byte granule (glibc's smallest chunk: two live blocks
//! of glibc are at least 32 bytes apart). A slot also stores bit 4 of its block's address, so
//! another block in the same granule (allocators with 16-byte chunks) is told apart and goes,
//! with unaligned addresses, to an ordinary hash map.
//!
//! Slots take 32 bits, as the replay's time goes into bringing them to the cache: a block of
//! less than 64 KiB from one of the first 16383 stacks fits in its slot, any other block in a
//! side table the slot points to.

use std::collections::HashMap;
use std::hash::BuildHasherDefault;

use rustc_hash::FxHasher;

use std::sync::Arc;

use crate::chunk::{Cell, Chunk, ChunkSource, CHUNK_CELLS};

type Fx = BuildHasherDefault<FxHasher>;

const PAGE_SHIFT: u32 = 12;
const GRANULE_SHIFT: u32 = 5;
const SLOTS: usize = 1 << (PAGE_SHIFT - GRANULE_SHIFT);
/// Pages per arena chunk (2 MiB of slots).
const CHUNK_PAGES: usize = CHUNK_CELLS / SLOTS;
/// Bit 0 of a slot: bit 4 of the address. Bit 1: the block is in the side table, at the index
/// in the bits above; else `slot + 1` (0 = empty) in the next 14 bits, the size in the top 16.
const TAG_BIT: u64 = 1 << 4;
const SIDE: Cell = 2;
const STACK_SHIFT: u32 = 2;
const STACK_LIMIT: u64 = 1 << 14;
const SIZE_SHIFT: u32 = 16;
const SIZE_LIMIT: u64 = 1 << 16;
/// Side-table indices that fit in a slot.
const SIDE_LIMIT: usize = 1 << 30;
const NO_PAGE: u64 = u64::MAX;

#[inline(always)]
fn tag_matches(v: Cell, addr: u64) -> bool {
    (v & 1 != 0) == (addr & TAG_BIT != 0)
}

/// Pages per region of the directory (2 MiB of address space).
const REGION_SHIFT: u32 = 9;
const REGION_PAGES: usize = 1 << REGION_SHIFT;

/// Live blocks by address.
pub(crate) struct LiveMap {
    /// Region number (page number >> REGION_SHIFT) -> region index.
    dir: HashMap<u64, u32, Fx>,
    /// Per region, per page: page index + 1, 0 for none. Neighbouring pages are neighbours
    /// here too, so walking the heap does not miss the cache in the directory.
    regions: Vec<Box<[u32]>>,
    /// Slots of all pages, `CHUNK_PAGES` pages a chunk.
    chunks: Vec<Chunk>,
    /// Where chunks come from when another thread makes them.
    source: Option<Arc<ChunkSource>>,
    /// Blocks too large for their slot, and the free entries among them.
    side: Vec<(u64, u32)>,
    side_free: Vec<u32>,
    /// Live blocks per page.
    counts: Vec<u32>,
    /// Indices of pages not in the directory, all slots zero.
    spare: Vec<u32>,
    /// Pages in the directory with no live block.
    empty_pages: usize,
    /// Unaligned addresses, granule neighbours, and blocks when the side table is full.
    other: HashMap<u64, (u64, u32), Fx>,
    len: u64,
    /// Direct-mapped cache of the directory: (region, index) by region number.
    cache: Box<[(u64, u32)]>,
}

/// Entries of the directory cache.
const CACHE: usize = 256;

impl Default for LiveMap {
    fn default() -> Self {
        Self {
            dir: HashMap::default(),
            regions: Vec::new(),
            chunks: Vec::new(),
            source: None,
            side: Vec::new(),
            side_free: Vec::new(),
            counts: Vec::new(),
            spare: Vec::new(),
            empty_pages: 0,
            other: HashMap::default(),
            len: 0,
            cache: vec![(NO_PAGE, 0); CACHE].into_boxed_slice(),
        }
    }
}

impl LiveMap {
    /// Takes its chunks from `source` from now on.
    pub fn use_chunks(&mut self, source: Arc<ChunkSource>) {
        self.source = Some(source);
    }

    /// Live blocks.
    #[cfg(test)]
    pub fn len(&self) -> u64 {
        self.len
    }

    #[inline(always)]
    fn region_of(&mut self, region: u64) -> Option<u32> {
        let c = &mut self.cache[region as usize % CACHE];
        if c.0 == region {
            return Some(c.1);
        }
        let ri = *self.dir.get(&region)?;
        *c = (region, ri);
        Some(ri)
    }

    #[inline(always)]
    fn page_of(&mut self, page: u64) -> Option<u32> {
        let ri = self.region_of(page >> REGION_SHIFT)?;
        match self.regions[ri as usize][page as usize % REGION_PAGES] {
            0 => None,
            v => Some(v - 1),
        }
    }

    #[inline(always)]
    fn cell(&mut self, idx: u32, addr: u64) -> &mut Cell {
        let i = idx as usize;
        &mut self.chunks[i / CHUNK_PAGES][(i % CHUNK_PAGES) * SLOTS + ((addr >> GRANULE_SHIFT) as usize & (SLOTS - 1))]
    }

    #[cold]
    #[inline(never)]
    fn new_page(&mut self, page: u64) -> u32 {
        let idx = match self.spare.pop() {
            Some(i) => i,
            None => {
                let i = self.counts.len();
                if i.is_multiple_of(CHUNK_PAGES) {
                    let c = self.source.as_ref().map_or_else(|| Chunk::new(CHUNK_CELLS), |s| s.take());
                    self.chunks.push(c);
                }
                self.counts.push(0);
                i as u32
            }
        };
        let region = page >> REGION_SHIFT;
        let ri = match self.region_of(region) {
            Some(ri) => ri,
            None => {
                self.regions.push(vec![0u32; REGION_PAGES].into_boxed_slice());
                let ri = (self.regions.len() - 1) as u32;
                self.dir.insert(region, ri);
                self.cache[region as usize % CACHE] = (region, ri);
                ri
            }
        };
        self.regions[ri as usize][page as usize % REGION_PAGES] = idx + 1;
        self.empty_pages += 1;
        idx
    }

    /// Returns pages without live blocks to the spare list once they are more than half of all
    /// pages (so a page that empties and fills again is not churned through the directory).
    #[cold]
    #[inline(never)]
    fn sweep(&mut self) {
        for r in &mut self.regions {
            for v in r.iter_mut().filter(|v| **v != 0) {
                if self.counts[*v as usize - 1] == 0 {
                    self.spare.push(*v - 1);
                    *v = 0;
                }
            }
        }
        self.empty_pages = 0;
    }

    /// Pages in use.
    fn pages(&self) -> usize {
        self.counts.len() - self.spare.len()
    }

    /// The slot value of a block at `addr`; `None` when the side table is full.
    #[inline(always)]
    fn pack(&mut self, addr: u64, size: u64, slot: u32) -> Option<Cell> {
        let tag = Cell::from(addr & TAG_BIT != 0);
        let s = u64::from(slot) + 1;
        if size < SIZE_LIMIT && s < STACK_LIMIT {
            return Some(tag | (s as Cell) << STACK_SHIFT | (size as Cell) << SIZE_SHIFT);
        }
        self.pack_side(size, slot).map(|v| v | tag)
    }

    #[cold]
    #[inline(never)]
    fn pack_side(&mut self, size: u64, slot: u32) -> Option<Cell> {
        let i = match self.side_free.pop() {
            Some(i) => {
                self.side[i as usize] = (size, slot);
                i
            }
            None if self.side.len() < SIDE_LIMIT => {
                self.side.push((size, slot));
                (self.side.len() - 1) as u32
            }
            None => return None,
        };
        Some(SIDE | i << STACK_SHIFT)
    }

    /// The block a slot value stands for.
    #[inline(always)]
    fn unpack(&self, v: Cell) -> (u64, u32) {
        if v & SIDE != 0 {
            return self.side[(v >> STACK_SHIFT) as usize];
        }
        (u64::from(v >> SIZE_SHIFT), ((v >> STACK_SHIFT) & (STACK_LIMIT as Cell - 1)) - 1)
    }

    /// The block a slot value stands for, which leaves the map.
    #[inline(always)]
    fn take(&mut self, v: Cell) -> (u64, u32) {
        let b = self.unpack(v);
        if v & SIDE != 0 {
            self.side_free.push(v >> STACK_SHIFT);
        }
        b
    }

    /// Inserts a block; returns the block that was live at the same address (its release was
    /// never seen), if any.
    #[inline(always)]
    pub fn insert(&mut self, addr: u64, size: u64, slot: u32) -> Option<(u64, u32)> {
        if addr & (TAG_BIT - 1) != 0 {
            return self.insert_other(addr, size, slot);
        }
        let page = addr >> PAGE_SHIFT;
        let idx = match self.page_of(page) {
            Some(i) => i,
            None => self.new_page(page),
        };
        let old = *self.cell(idx, addr);
        if old != 0 && !tag_matches(old, addr) {
            // The other half of the granule is live: this block goes aside.
            return self.insert_other(addr, size, slot);
        }
        let Some(new) = self.pack(addr, size, slot) else { return self.insert_other(addr, size, slot) };
        *self.cell(idx, addr) = new;
        if old != 0 {
            return Some(self.take(old));
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
    #[inline(never)]
    fn insert_other(&mut self, addr: u64, size: u64, slot: u32) -> Option<(u64, u32)> {
        // The address may hold a packed block from before.
        let old = if addr & (TAG_BIT - 1) == 0 { self.remove_paged(addr) } else { None };
        let old2 = self.other.insert(addr, (size, slot));
        if old2.is_none() {
            self.len += 1;
        }
        old.or(old2)
    }

    #[inline(always)]
    fn remove_paged(&mut self, addr: u64) -> Option<(u64, u32)> {
        let idx = self.page_of(addr >> PAGE_SHIFT)?;
        let cell = self.cell(idx, addr);
        let old = *cell;
        if old == 0 || !tag_matches(old, addr) {
            return None;
        }
        *cell = 0;
        self.len -= 1;
        let c = &mut self.counts[idx as usize];
        *c -= 1;
        if *c == 0 {
            self.empty_pages += 1;
            if self.empty_pages > 64 && self.empty_pages * 2 > self.pages() {
                self.sweep();
            }
        }
        Some(self.take(old))
    }

    /// Removes the block at `addr`, if live.
    #[inline(always)]
    pub fn remove(&mut self, addr: u64) -> Option<(u64, u32)> {
        if addr & (TAG_BIT - 1) == 0 {
            if let Some(v) = self.remove_paged(addr) {
                return Some(v);
            }
        }
        if self.other.is_empty() {
            return None;
        }
        self.remove_other(addr)
    }

    #[cold]
    #[inline(never)]
    fn remove_other(&mut self, addr: u64) -> Option<(u64, u32)> {
        let v = self.other.remove(&addr)?;
        self.len -= 1;
        Some(v)
    }

    /// Calls `f(size, slot)` for every live block (in no particular order).
    pub fn for_each(&self, mut f: impl FnMut(u64, u32)) {
        for &v in self.regions.iter().flat_map(|r| r.iter()).filter(|&&v| v != 0) {
            let i = v as usize - 1;
            if self.counts[i] == 0 {
                continue;
            }
            let page = &self.chunks[i / CHUNK_PAGES][(i % CHUNK_PAGES) * SLOTS..][..SLOTS];
            for &v in page.iter().filter(|&&v| v != 0) {
                let (size, slot) = self.unpack(v);
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
            if x.is_multiple_of(97) {
                addr += 8;
            }
            let size = if x.is_multiple_of(101) { 1 << 50 } else { x % 3000 };
            let slot = if x.is_multiple_of(103) { 1 << 30 } else { (x % 1000) as u32 };
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
