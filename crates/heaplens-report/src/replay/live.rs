//! The live set of the replay: address -> (requested size, stack slot) of every block allocated
//! and not yet released.
//!
//! A hash table spreads neighbouring blocks over the whole table, so with millions of live
//! blocks nearly every operation is a cache miss. Allocators hand out neighbouring addresses
//! to blocks allocated close in time, so this map keeps that locality: the address space is
//! cut in 4 KiB pages, found through a small directory and a cache of it. A page starts
//! *sparse*: up to 32 blocks, each with the number of its 32-byte granule (glibc's smallest
//! chunk: two live blocks of glibc are at least 32 bytes apart) in a byte, found by comparing
//! eight of those bytes at a time. Its 33rd block turns it *dense*: 128 slots, one per
//! granule. A slot also stores bit 4 of its block's address, so another block in the same
//! granule (allocators with 16-byte chunks) is told apart and goes, with unaligned addresses, to
//! an ordinary hash map.
//!
//! Most blocks die young: a direct-mapped table of 4096 entries by address (64 KiB, which
//! stays in the processor's cache) holds the newest blocks, and a block goes to its page only
//! when a newer one takes its entry. A block allocated and released while in the table never
//! touches a page. An allocation still looks for its address in the pages (one read, where a
//! page holds an older block whose release was lost), so the answers are those of the pages
//! alone. On the benchmark's traces, the report's processor time: -18% (gcc's cc1), -23% (the
//! C++ churn), -34% (deep recursion), -28% (sqlite3); unchanged on Python, where the table
//! turns itself off (see [`Youth`]; figures in docs/EXPERIMENTS.md).
//!
//! Slots take 32 bits, and sparse pages a third of a dense one, as the replay's time goes into
//! bringing them to the cache and the kernel's into zeroing them: a block of less than 64 KiB
//! from one of the first 16383 stacks fits in its slot, any other block in a side table the
//! slot points to.

use std::collections::HashMap;
use std::hash::BuildHasherDefault;
use std::sync::Arc;

use rustc_hash::FxHasher;

use crate::replay::arena::Arena;
use crate::replay::chunk::{Cell, ChunkSource};

type Fx = BuildHasherDefault<FxHasher>;

const PAGE_SHIFT: u32 = 12;
const GRANULE_SHIFT: u32 = 5;
/// Slots of a dense page.
const SLOTS: usize = 1 << (PAGE_SHIFT - GRANULE_SHIFT);
/// Blocks of a sparse page, and the cells of its granule bytes (granule + 1, 0 = free), which
/// its slots follow.
const SPARSE: usize = 32;
const KEYS: usize = SPARSE / 4;
/// A directory entry: page index + 1 (0 = none), this bit set for a dense page.
const DENSE: u32 = 1 << 31;
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

/// A page a (non-zero) directory entry points at: its index in its arena.
#[derive(Clone, Copy)]
enum Page {
    Sparse(u32),
    Dense(u32),
}

impl Page {
    /// The page of non-zero directory entry `v`.
    #[inline(always)]
    fn of(v: u32) -> Self {
        match v & DENSE {
            0 => Page::Sparse(v - 1),
            _ => Page::Dense((v & !DENSE) - 1),
        }
    }

    /// Its directory entry.
    fn entry(self) -> u32 {
        match self {
            Page::Sparse(i) => i + 1,
            Page::Dense(i) => (i + 1) | DENSE,
        }
    }
}

#[inline(always)]
fn tag_matches(v: Cell, addr: u64) -> bool {
    (v & 1 != 0) == (addr & TAG_BIT != 0)
}

#[inline(always)]
fn granule(addr: u64) -> usize {
    (addr >> GRANULE_SHIFT) as usize & (SLOTS - 1)
}

/// Where granule byte `key` is among the first `n` of a sparse page's.
#[inline(always)]
fn find(page: &[Cell], key: u8, n: usize) -> Option<usize> {
    let hits = matches(&page[..KEYS], key) & ((1u64 << n) - 1);
    (hits != 0).then(|| hits.trailing_zeros() as usize)
}

/// Bit `j` set when granule byte `j` of `keys` is `key`.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn matches(keys: &[Cell], key: u8) -> u64 {
    use std::arch::x86_64::{_mm_cmpeq_epi8, _mm_loadu_si128, _mm_movemask_epi8, _mm_set1_epi8};
    assert!(keys.len() * 4 >= 32);
    // SAFETY: SSE2 is part of x86_64; the two unaligned loads read the 32 bytes of `keys`.
    unsafe {
        let k = _mm_set1_epi8(key as i8);
        let p = keys.as_ptr().cast::<std::arch::x86_64::__m128i>();
        let lo = _mm_movemask_epi8(_mm_cmpeq_epi8(_mm_loadu_si128(p), k)) as u32;
        let hi = _mm_movemask_epi8(_mm_cmpeq_epi8(_mm_loadu_si128(p.add(1)), k)) as u32;
        u64::from(lo) | u64::from(hi) << 16
    }
}

/// Bit `j` set when granule byte `j` of `keys` is `key`.
#[cfg(not(target_arch = "x86_64"))]
#[inline(always)]
fn matches(keys: &[Cell], key: u8) -> u64 {
    (0..SPARSE).filter(|&j| self::key(keys, j) == key).fold(0, |m, j| m | 1 << j)
}

/// Granule byte `j` of a sparse page: byte `j` of its first [`KEYS`] cells, as [`matches`]
/// reads them.
#[inline(always)]
fn key(page: &[Cell], j: usize) -> u8 {
    key_bytes(page)[j]
}

#[inline(always)]
fn set_key(page: &mut [Cell], j: usize, key: u8) {
    key_bytes_mut(page)[j] = key;
}

/// The first [`KEYS`] cells of a sparse page as bytes: granule byte `j` is byte `j`, where
/// [`matches`] compares it (a byte store instead of masking it into its cell).
#[inline(always)]
fn key_bytes(page: &[Cell]) -> &[u8; SPARSE] {
    let keys: &[Cell; KEYS] = page[..KEYS].try_into().expect("a sparse page starts with its keys");
    // SAFETY: KEYS cells of 4 bytes are SPARSE bytes, any bit pattern is a valid u8, and u8 has
    // no alignment requirement.
    unsafe { &*(keys as *const [Cell; KEYS]).cast::<[u8; SPARSE]>() }
}

#[inline(always)]
fn key_bytes_mut(page: &mut [Cell]) -> &mut [u8; SPARSE] {
    let keys: &mut [Cell; KEYS] = (&mut page[..KEYS]).try_into().expect("a sparse page starts with its keys");
    // SAFETY: as in `key_bytes`, and the borrow is unique.
    unsafe { &mut *(keys as *mut [Cell; KEYS]).cast::<[u8; SPARSE]>() }
}

/// Pages per region of the directory (2 MiB of address space).
const REGION_SHIFT: u32 = 9;
const REGION_PAGES: usize = 1 << REGION_SHIFT;

/// Live blocks by address.
pub(crate) struct LiveMap {
    /// Region number (page number >> REGION_SHIFT) -> region index.
    dir: HashMap<u64, u32, Fx>,
    /// Per region, per page: its directory entry. Neighbouring pages are neighbours here too,
    /// so walking the heap does not miss the cache in the directory.
    regions: Vec<[u32; REGION_PAGES]>,
    dense: Arena<SLOTS>,
    sparse: Arena<{ KEYS + SPARSE }>,
    /// Where chunks come from when another thread makes them.
    source: Option<Arc<ChunkSource>>,
    /// Blocks too large for their slot, and the free entries among them.
    side: Vec<(u64, u32)>,
    side_free: Vec<u32>,
    /// Pages in the directory with no live block.
    empty_pages: usize,
    /// Unaligned addresses, granule neighbours, and blocks when the side table is full.
    other: HashMap<u64, (u64, u32), Fx>,
    len: u64,
    /// Direct-mapped cache of the directory: (region, index) by region number.
    cache: Box<[(u64, u32); CACHE]>,
    /// The young blocks: (address, packed block), address 0 = empty, by [`young_index`]. An
    /// address is here or in the pages and `other`, never in both.
    young: Box<[(u64, u64)]>,
    /// Young blocks.
    young_len: u32,
    youth: Youth,
}

/// Entries of the directory cache.
const CACHE: usize = 256;

impl Default for LiveMap {
    fn default() -> Self {
        Self {
            dir: HashMap::default(),
            regions: Vec::new(),
            dense: Arena::new(),
            sparse: Arena::new(),
            source: None,
            side: Vec::new(),
            side_free: Vec::new(),
            empty_pages: 0,
            other: HashMap::default(),
            len: 0,
            cache: Box::new([(NO_PAGE, 0); CACHE]),
            young: vec![(0, 0); YOUNG].into_boxed_slice(),
            young_len: 0,
            youth: Youth::default(),
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

    /// Where the directory puts `page`, if it has it.
    #[inline(always)]
    fn page_of(&mut self, page: u64) -> Option<Page> {
        let ri = self.region_of(page >> REGION_SHIFT)?;
        match self.regions[ri as usize][page as usize % REGION_PAGES] {
            0 => None,
            v => Some(Page::of(v)),
        }
    }

    /// Points the directory entry of `page` at `p`, making its region if needed.
    fn set_entry(&mut self, page: u64, p: Page) {
        let region = page >> REGION_SHIFT;
        let ri = match self.region_of(region) {
            Some(ri) => ri,
            None => {
                self.regions.push([0u32; REGION_PAGES]);
                let ri = (self.regions.len() - 1) as u32;
                self.dir.insert(region, ri);
                self.cache[region as usize % CACHE] = (region, ri);
                ri
            }
        };
        self.regions[ri as usize][page as usize % REGION_PAGES] = p.entry();
    }

    /// A new sparse page for `page`; its index.
    #[cold]
    #[inline(never)]
    fn new_page(&mut self, page: u64) -> u32 {
        let i = self.sparse.alloc(self.source.as_ref());
        self.set_entry(page, Page::Sparse(i));
        self.empty_pages += 1;
        i
    }

    /// Turns the full sparse page `idx` of `page` dense; its index.
    #[cold]
    #[inline(never)]
    fn make_dense(&mut self, page: u64, idx: u32) -> u32 {
        let d = self.dense.alloc(self.source.as_ref());
        let (sparse, dense) = (self.sparse.page_mut(idx), self.dense.page_mut(d));
        for j in 0..SPARSE {
            dense[usize::from(key(sparse, j)) - 1] = sparse[KEYS + j];
        }
        sparse.fill(0);
        self.dense.counts[d as usize] = std::mem::take(&mut self.sparse.counts[idx as usize]);
        self.sparse.free(idx);
        self.set_entry(page, Page::Dense(d));
        d
    }

    /// Returns pages without live blocks to the spare lists once they are more than half of all
    /// pages (so a page that empties and fills again is not churned through the directory).
    #[cold]
    #[inline(never)]
    fn sweep(&mut self) {
        for r in &mut self.regions {
            for v in r.iter_mut().filter(|v| **v != 0) {
                let freed = match Page::of(*v) {
                    Page::Sparse(i) => self.sparse.free_if_empty(i),
                    Page::Dense(i) => self.dense.free_if_empty(i),
                };
                if freed {
                    *v = 0;
                }
            }
        }
        self.empty_pages = 0;
    }

    /// Pages in use.
    fn pages(&self) -> usize {
        self.dense.in_use() + self.sparse.in_use()
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
        let i = young_index(addr);
        let Some(packed) = young_pack(addr, size, slot).filter(|_| self.admit()) else {
            // An address lives in one place: the pages take it, out of the young blocks.
            let young = self.young_len != 0 && self.young[i].0 == addr && addr != 0;
            let old = young.then(|| self.take_young(i));
            let o = self.insert_paged(addr, size, slot);
            return old.or(o);
        };
        let e = self.young[i];
        if e.0 == addr {
            self.young[i].1 = packed;
            return Some(young_unpack(e.1));
        }
        // Not among the young blocks, but maybe in the pages (a block whose release was lost).
        let old = self.remove_paged_or_other(addr);
        if e.0 != 0 {
            let (size, slot) = self.take_young(i);
            let clash = self.insert_paged(e.0, size, slot);
            debug_assert!(clash.is_none(), "an address is young or paged, never both");
        }
        self.young[i] = (addr, packed);
        self.young_len += 1;
        self.len += 1;
        old
    }

    /// Takes the young block in entry `i` out of the map.
    #[inline(always)]
    fn take_young(&mut self, i: usize) -> (u64, u32) {
        let e = std::mem::take(&mut self.young[i]);
        self.young_len -= 1;
        self.len -= 1;
        young_unpack(e.1)
    }

    /// Whether an allocation's block may enter the young entries (see [`Youth`]).
    #[inline(always)]
    fn admit(&mut self) -> bool {
        if self.youth.left == 0 {
            self.turn();
        }
        self.youth.left -= 1;
        self.youth.on
    }

    #[cold]
    #[inline(never)]
    fn turn(&mut self) {
        if self.youth.turn() {
            return;
        }
        // While off, the entries are empty and nothing reads them.
        for i in 0..YOUNG {
            let addr = self.young[i].0;
            if addr != 0 {
                let (size, slot) = self.take_young(i);
                let clash = self.insert_paged(addr, size, slot);
                debug_assert!(clash.is_none(), "an address is young or paged, never both");
            }
        }
    }

    /// Inserts a block into the pages.
    #[inline(always)]
    fn insert_paged(&mut self, addr: u64, size: u64, slot: u32) -> Option<(u64, u32)> {
        if addr & (TAG_BIT - 1) != 0 {
            return self.insert_other(addr, size, slot);
        }
        let page = addr >> PAGE_SHIFT;
        let idx = match self.page_of(page) {
            Some(Page::Dense(d)) => return self.insert_dense(d, addr, size, slot),
            Some(Page::Sparse(i)) => i,
            None => self.new_page(page),
        };
        let key = granule(addr) as u8 + 1;
        let n = self.sparse.counts[idx as usize] as usize;
        let p = self.sparse.page(idx);
        if let Some(j) = find(p, key, n) {
            let old = p[KEYS + j];
            if !tag_matches(old, addr) {
                return self.insert_other(addr, size, slot);
            }
            let Some(new) = self.pack(addr, size, slot) else { return self.insert_other(addr, size, slot) };
            self.sparse.page_mut(idx)[KEYS + j] = new;
            return Some(self.take(old));
        }
        if n == SPARSE {
            let d = self.make_dense(page, idx);
            return self.insert_dense(d, addr, size, slot);
        }
        let Some(new) = self.pack(addr, size, slot) else { return self.insert_other(addr, size, slot) };
        let p = self.sparse.page_mut(idx);
        set_key(p, n, key);
        p[KEYS + n] = new;
        self.sparse.counts[idx as usize] += 1;
        self.added(n == 0, addr)
    }

    #[inline(always)]
    fn insert_dense(&mut self, idx: u32, addr: u64, size: u64, slot: u32) -> Option<(u64, u32)> {
        let g = granule(addr);
        let old = self.dense.page(idx)[g];
        if old != 0 && !tag_matches(old, addr) {
            // The other half of the granule is live: this block goes aside.
            return self.insert_other(addr, size, slot);
        }
        let Some(new) = self.pack(addr, size, slot) else { return self.insert_other(addr, size, slot) };
        self.dense.page_mut(idx)[g] = new;
        if old != 0 {
            return Some(self.take(old));
        }
        let c = &mut self.dense.counts[idx as usize];
        *c += 1;
        let first = *c == 1;
        self.added(first, addr)
    }

    /// A block went into a page (`first`: into an empty one).
    #[inline(always)]
    fn added(&mut self, first: bool, addr: u64) -> Option<(u64, u32)> {
        if first {
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
        let (old, emptied) = match self.page_of(addr >> PAGE_SHIFT)? {
            Page::Dense(idx) => {
                let cell = &mut self.dense.page_mut(idx)[granule(addr)];
                let old = *cell;
                if old == 0 || !tag_matches(old, addr) {
                    return None;
                }
                *cell = 0;
                let c = &mut self.dense.counts[idx as usize];
                *c -= 1;
                (old, *c == 0)
            }
            Page::Sparse(idx) => {
                let n = self.sparse.counts[idx as usize] as usize;
                let p = self.sparse.page_mut(idx);
                let j = find(p, granule(addr) as u8 + 1, n)?;
                let old = p[KEYS + j];
                if !tag_matches(old, addr) {
                    return None;
                }
                // The last block moves into the hole.
                let n = n - 1;
                let last = key(p, n);
                set_key(p, j, last);
                p[KEYS + j] = p[KEYS + n];
                set_key(p, n, 0);
                p[KEYS + n] = 0;
                self.sparse.counts[idx as usize] = n as u32;
                (old, n == 0)
            }
        };
        self.len -= 1;
        if emptied {
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
        let i = young_index(addr);
        if self.young_len != 0 && self.young[i].0 == addr && addr != 0 {
            self.youth.hits += 1;
            return Some(self.take_young(i));
        }
        self.remove_paged_or_other(addr)
    }

    /// Removes the block at `addr` from the pages or the hash map, if it is there.
    #[inline(always)]
    fn remove_paged_or_other(&mut self, addr: u64) -> Option<(u64, u32)> {
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

    /// Calls `f(address, size, slot)` for every live block (in no particular order).
    pub fn for_each(&self, mut f: impl FnMut(u64, u64, u32)) {
        let place = |c: Cell, granule: usize| (granule as u64) << GRANULE_SHIFT | u64::from(c & 1) << 4;
        for (&region, &ri) in &self.dir {
            for (j, &v) in self.regions[ri as usize].iter().enumerate().filter(|(_, &v)| v != 0) {
                let base = (region << REGION_SHIFT | j as u64) << PAGE_SHIFT;
                let mut block = |c: Cell, granule: usize| {
                    let (size, slot) = self.unpack(c);
                    f(base | place(c, granule), size, slot);
                };
                match Page::of(v) {
                    Page::Dense(i) => {
                        for (g, &c) in self.dense.page(i).iter().enumerate().filter(|(_, &c)| c != 0) {
                            block(c, g);
                        }
                    }
                    Page::Sparse(i) => {
                        let p = self.sparse.page(i);
                        for k in 0..self.sparse.counts[i as usize] as usize {
                            block(p[KEYS + k], usize::from(key(p, k)) - 1);
                        }
                    }
                }
            }
        }
        for (&addr, &(size, slot)) in &self.other {
            f(addr, size, slot);
        }
        for &(addr, packed) in self.young.iter().filter(|e| e.0 != 0) {
            let (size, slot) = young_unpack(packed);
            f(addr, size, slot);
        }
    }
}

/// Entries of the young blocks (64 KiB: in the processor's second-level cache).
const YOUNG: usize = 1 << 12;
/// A young entry's block is `size << YOUNG_SLOT_BITS | stack slot`.
const YOUNG_SLOT_BITS: u32 = 24;
const YOUNG_SLOT_LIMIT: u32 = 1 << YOUNG_SLOT_BITS;
const YOUNG_SIZE_LIMIT: u64 = 1 << (64 - YOUNG_SLOT_BITS);

/// Whether new blocks enter the young entries. A program whose blocks mostly outlive their
/// entry (the widgets program keeps them all until the end) gains nothing there and pays a
/// second page for each allocation (its own, looked up, and the one it pushes out): after a
/// window of [`WINDOW`] allocations of which fewer than half were released young, the young
/// blocks move to their pages and new blocks go straight there for [`OFF_WINDOWS`] windows;
/// then the young entries are tried again.
struct Youth {
    on: bool,
    /// Allocations left in this window.
    left: u32,
    /// Releases of young blocks in this window.
    hits: u32,
}

const WINDOW: u32 = 1 << 16;
const OFF_WINDOWS: u32 = 15;

impl Default for Youth {
    fn default() -> Self {
        Self { on: true, left: WINDOW, hits: 0 }
    }
}

impl Youth {
    /// Starts the next window, on or off; whether it is on.
    fn turn(&mut self) -> bool {
        self.on = !self.on || self.hits >= WINDOW / 2;
        self.left = if self.on { WINDOW } else { WINDOW * OFF_WINDOWS };
        self.hits = 0;
        self.on
    }
}

/// The young entry of `addr`: neighbouring blocks go to neighbouring entries.
#[inline(always)]
fn young_index(addr: u64) -> usize {
    (addr >> 4) as usize & (YOUNG - 1)
}

/// A young entry's block; `None` for one that goes to the pages (unaligned, null, or too
/// large a size or slot for the entry).
#[inline(always)]
fn young_pack(addr: u64, size: u64, slot: u32) -> Option<u64> {
    let fits = addr & (TAG_BIT - 1) == 0 && addr != 0 && size < YOUNG_SIZE_LIMIT && slot < YOUNG_SLOT_LIMIT;
    fits.then(|| size << YOUNG_SLOT_BITS | u64::from(slot))
}

#[inline(always)]
fn young_unpack(v: u64) -> (u64, u32) {
    (v >> YOUNG_SLOT_BITS, (v & (u64::from(YOUNG_SLOT_LIMIT) - 1)) as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Random operations on addresses spread over `spread` 16-byte places per region: a few
    /// blocks a page (sparse pages), a few dozen (pages turning dense), or more.
    fn check(spread: u64) -> (usize, usize) {
        let mut m = LiveMap::default();
        let mut r: HashMap<u64, (u64, u32)> = HashMap::new();
        let mut x = 12345u64;
        for i in 0..200_000u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            // Mostly aligned addresses in a few regions, some odd ones, some huge values.
            let region = [0x5555_0000_0000u64, 0x7f00_1234_0000, 0x10][(x % 3) as usize];
            let mut addr = region + (x >> 8) % spread * 16;
            if x.is_multiple_of(97) {
                addr += 8;
            }
            let size = if x.is_multiple_of(101) { 1 << 50 } else { x % 3000 };
            let slot = if x.is_multiple_of(103) { 1 << 30 } else { (x % 1000) as u32 };
            if i % 3 == 2 {
                // Half of the releases are of live blocks.
                let addr = if i % 2 == 0 { r.keys().next().copied().unwrap_or(addr) } else { addr };
                assert_eq!(m.remove(addr), r.remove(&addr));
            } else {
                assert_eq!(m.insert(addr, size, slot), r.insert(addr, (size, slot)));
            }
            assert_eq!(m.len(), r.len() as u64);
        }
        let mut all = Vec::new();
        m.for_each(|a, s, sl| all.push((a, (s, sl))));
        let mut want: Vec<_> = r.iter().map(|(&a, &b)| (a, b)).collect();
        all.sort_unstable();
        want.sort_unstable();
        assert_eq!(all, want);
        let pages = (m.sparse.in_use(), m.dense.in_use());
        // Empty it: the sweep must not lose anything.
        for a in r.keys() {
            assert!(m.remove(*a).is_some());
        }
        assert_eq!(m.len(), 0);
        let mut all = Vec::new();
        m.for_each(|a, s, sl| all.push((a, s, sl)));
        assert!(all.is_empty());
        pages
    }

    #[test]
    fn behaves_like_a_hash_map() {
        let (sparse, dense) = check(4_000_000);
        assert!(sparse > 1000 && dense < 10, "{sparse} {dense}");
        let (sparse, dense) = check(200_000);
        assert!(sparse > 100 && dense > 100, "{sparse} {dense}");
        check(50_000);
        // Few enough places that most blocks stay young, and places a young table apart.
        check(3_000);
        check(YOUNG as u64 * 3);
    }

    #[test]
    fn young_entries_turn_off_and_on() {
        let mut m = LiveMap::default();
        let kept = u64::from(WINDOW) + 100;
        // Blocks that all outlive their entry: after a window the entries are off and empty.
        for k in 0..kept {
            assert_eq!(m.insert(0x5555_0000_0000 + k * 48, k, 7), None);
        }
        assert!(!m.youth.on);
        assert_eq!((m.young_len, m.len()), (0, kept));
        // Blocks released right away: the entries come back on after the off windows.
        for k in 0..u64::from(WINDOW * OFF_WINDOWS) + 10 {
            let a = 0x7f00_0000_0000 + (k % 1000) * 32;
            assert_eq!(m.insert(a, 1, 1), None);
            assert_eq!(m.remove(a), Some((1, 1)));
        }
        assert!(m.youth.on);
        let mut n = 0;
        m.for_each(|a, size, slot| {
            assert_eq!((a, slot), (0x5555_0000_0000 + size * 48, 7));
            n += 1;
        });
        assert_eq!(n, kept);
    }

    #[test]
    fn a_young_block_and_a_lost_release() {
        let mut m = LiveMap::default();
        let a = 0x5555_0000_1000u64;
        let b = a + (YOUNG as u64) * 16; // the same young entry as `a`
        assert_eq!(m.insert(a, 10, 1), None);
        assert_eq!(m.insert(b, 20, 2), None); // `a` moves to its page
        assert_eq!(m.insert(a, 30, 3), Some((10, 1)), "the older block at `a`, found in its page");
        assert_eq!(m.remove(b), Some((20, 2)));
        assert_eq!(m.remove(a), Some((30, 3)));
        assert_eq!(m.remove(a), None);
        assert_eq!(m.insert(a, 1 << 50, 4), None); // too large for an entry
        assert_eq!(m.insert(a, 5, 5), Some((1 << 50, 4)));
        assert_eq!(m.insert(a, 1 << 50, 6), Some((5, 5)));
        assert_eq!(m.len(), 1);
    }
}
