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
//! with unaligned addresses and values that do not pack into 64 bits, to an ordinary hash map.

use std::collections::HashMap;
use std::hash::BuildHasherDefault;

use rustc_hash::FxHasher;

type Fx = BuildHasherDefault<FxHasher>;

const PAGE_SHIFT: u32 = 12;
const GRANULE_SHIFT: u32 = 5;
const SLOTS: usize = 1 << (PAGE_SHIFT - GRANULE_SHIFT);
/// Pages per arena chunk (2 MiB of slots).
const CHUNK_PAGES: usize = 2048;
/// Bit 0 of a packed value: bit 4 of the address. Then `slot + 1` (0 = empty), then the size.
const TAG_BIT: u64 = 1 << 4;
const SLOT_SHIFT: u32 = 1;
const SLOT_BITS: u32 = 23;
const SLOT_MASK: u64 = (1 << SLOT_BITS) - 1;
const SIZE_SHIFT: u32 = SLOT_SHIFT + SLOT_BITS;
/// Sizes below this pack next to the slot.
const SIZE_LIMIT: u64 = 1 << (64 - SIZE_SHIFT);
const NO_PAGE: u64 = u64::MAX;

#[inline(always)]
fn pack(addr: u64, size: u64, slot: u32) -> Option<u64> {
    let s = u64::from(slot) + 1;
    (size < SIZE_LIMIT && s <= SLOT_MASK)
        .then_some((size << SIZE_SHIFT) | (s << SLOT_SHIFT) | u64::from(addr & TAG_BIT != 0))
}

#[inline(always)]
fn unpack(v: u64) -> (u64, u32) {
    (v >> SIZE_SHIFT, (((v >> SLOT_SHIFT) & SLOT_MASK) - 1) as u32)
}

#[inline(always)]
fn tag_matches(v: u64, addr: u64) -> bool {
    (v & 1 != 0) == (addr & TAG_BIT != 0)
}

/// Zeroed memory for slots, mapped directly and populated in one go: faulting it in a page at
/// a time (twice, as reading a fresh page maps the zero page first) costs more than the replay.
/// A chunk is one aligned huge page when the kernel has them to spare, which also spares the
/// replay a TLB miss per page of slots.
struct Chunk {
    ptr: *mut u64,
    len: usize,
}

/// The size of a transparent huge page on x86_64 and aarch64 (with 4 KiB pages).
const HUGE: usize = 2 << 20;

impl Chunk {
    fn new(len: usize) -> Self {
        let bytes = len * std::mem::size_of::<u64>();
        let fail = || std::alloc::handle_alloc_error(std::alloc::Layout::array::<u64>(len).expect("small layout"));
        // Over-allocated by a huge page, to cut an aligned range out of it.
        let map = bytes + HUGE;
        // SAFETY: an anonymous private mapping of our own; checked for failure below.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            fail();
        }
        let head = (HUGE - p as usize % HUGE) % HUGE;
        // SAFETY: unmapping the parts of our own mapping outside the aligned range, then advice
        // on that range; failures of the advice only cost speed.
        let p = unsafe {
            if head > 0 {
                libc::munmap(p, head);
            }
            let tail = map - head - bytes;
            let p = p.cast::<u8>().add(head);
            if tail > 0 {
                libc::munmap(p.add(bytes).cast(), tail);
            }
            libc::madvise(p.cast(), bytes, libc::MADV_HUGEPAGE);
            const MADV_POPULATE_WRITE: libc::c_int = 23;
            libc::madvise(p.cast(), bytes, MADV_POPULATE_WRITE);
            p
        };
        Self { ptr: p.cast(), len }
    }
}

impl std::ops::Deref for Chunk {
    type Target = [u64];
    fn deref(&self) -> &[u64] {
        // SAFETY: the mapping holds `len` zero-initialized u64s for the chunk's lifetime.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

impl std::ops::DerefMut for Chunk {
    fn deref_mut(&mut self) -> &mut [u64] {
        // SAFETY: as in `deref`, and `&mut self` is unique.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}

impl Drop for Chunk {
    fn drop(&mut self) {
        // SAFETY: unmaps the mapping made in `new`, exactly once.
        unsafe { libc::munmap(self.ptr.cast(), self.len * std::mem::size_of::<u64>()) };
    }
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
    /// Live blocks per page.
    counts: Vec<u32>,
    /// Indices of pages not in the directory, all slots zero.
    spare: Vec<u32>,
    /// Pages in the directory with no live block.
    empty_pages: usize,
    /// Unaligned addresses, granule neighbours and unpackable values.
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
    fn cell(&mut self, idx: u32, addr: u64) -> &mut u64 {
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
                    self.chunks.push(Chunk::new(CHUNK_PAGES * SLOTS));
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

    /// Inserts a block; returns the block that was live at the same address (its release was
    /// never seen), if any.
    #[inline(always)]
    pub fn insert(&mut self, addr: u64, size: u64, slot: u32) -> Option<(u64, u32)> {
        let packed = match pack(addr, size, slot) {
            Some(p) if addr & (TAG_BIT - 1) == 0 => p,
            _ => return self.insert_other(addr, size, slot),
        };
        let page = addr >> PAGE_SHIFT;
        let idx = match self.page_of(page) {
            Some(i) => i,
            None => self.new_page(page),
        };
        let cell = self.cell(idx, addr);
        let old = *cell;
        if old != 0 {
            if tag_matches(old, addr) {
                *cell = packed;
                return Some(unpack(old));
            }
            // The other half of the granule is live: this block goes aside.
            return self.insert_other(addr, size, slot);
        }
        *cell = packed;
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
        Some(unpack(old))
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
