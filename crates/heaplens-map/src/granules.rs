//! The set of granules (addresses `>> GRANULE_SHIFT`) the blocks touch, which the first pass
//! marks once per block: a bitmap per 2^16 granules (4 GiB of addresses, 8 KiB of bits), found
//! by a search from the bitmap marked last. A process's blocks lie in a few such ranges (the
//! heap, the arenas, the `mmap`'d chunks), so a mark is a compare and a bit, where a hash set
//! of millions of inserts was a tenth of the map's time on a 10^8-event trace.
//!
//! A block wider than [`WIDE`] granules is kept as a range instead: marking it bit by bit would
//! cost time and bitmaps by its size, which is a number read from the trace (a damaged one
//! declared 2^50 bytes, and the first pass marked 2^34 granules), and a real reserve of 64 GiB
//! needs no more than its ends to draw.

/// log2 of the granules of one bitmap.
const PAGE_SHIFT: u32 = 16;
const WORDS: usize = (1 << PAGE_SHIFT) / 64;

/// Blocks spanning more granules than this (64 MiB) are noted as ranges, not bits.
pub const WIDE: u64 = 1 << 10;

/// Wide ranges noted before they are sorted and merged again.
const MERGE_AT: usize = 1 << 12;

/// Bitmaps kept at most (8 MiB, 4 TiB of addresses in 4 GiB regions; a process touches a
/// few): past them blocks are noted as ranges, since a damaged trace scattering its blocks
/// 4 GiB apart would otherwise cost 8 KiB of bitmap per block.
const MAX_PAGES: usize = 1 << 10;

/// A set of granule numbers.
#[derive(Clone, Default)]
pub struct Granules {
    /// Bitmaps by their first granule `>> PAGE_SHIFT`, in order.
    pages: Vec<(u64, Box<[u64; WORDS]>)>,
    /// The index of the page marked last.
    last: usize,
    /// Granule ranges `[lo, hi)` of wide blocks, merged whenever their number doubles, so a
    /// program that maps and unmaps the same large chunks keeps a few.
    wide: Vec<(u64, u64)>,
    /// `wide.len()` after its last merge.
    merged: usize,
}

impl Granules {
    /// Adds granule `g`.
    #[inline]
    pub fn insert(&mut self, g: u64) {
        let page = g >> PAGE_SHIFT;
        if self.pages.get(self.last).is_none_or(|p| p.0 != page) {
            self.last = match self.pages.binary_search_by_key(&page, |p| p.0) {
                Ok(i) => i,
                Err(i) => {
                    self.pages.insert(i, (page, Box::new([0; WORDS])));
                    i
                }
            };
        }
        let bit = (g & ((1 << PAGE_SHIFT) - 1)) as usize;
        self.pages[self.last].1[bit / 64] |= 1 << (bit % 64);
    }

    /// Adds granules `first..=last`: bit by bit up to [`WIDE`] of them, else as one range, so
    /// a block costs at most [`WIDE`] marks whatever size it declares.
    #[inline]
    pub fn insert_span(&mut self, first: u64, last: u64) {
        if last - first < WIDE && self.pages.len() < MAX_PAGES {
            for g in first..=last {
                self.insert(g);
            }
        } else {
            self.insert_wide(first, last);
        }
    }

    #[cold]
    #[inline(never)]
    fn insert_wide(&mut self, first: u64, last: u64) {
        self.wide.push((first, last.saturating_add(1)));
        if self.wide.len() >= (2 * self.merged).max(MERGE_AT) {
            merge(&mut self.wide);
            self.merged = self.wide.len();
        }
    }

    /// Whether `g` is in the set.
    pub fn contains(&self, g: u64) -> bool {
        let bit = (g & ((1 << PAGE_SHIFT) - 1)) as usize;
        self.pages
            .binary_search_by_key(&(g >> PAGE_SHIFT), |p| p.0)
            .is_ok_and(|i| self.pages[i].1[bit / 64] & (1 << (bit % 64)) != 0)
            || self.wide.iter().any(|&(lo, hi)| lo <= g && g < hi)
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.wide.is_empty() && self.pages.iter().all(|p| p.1.iter().all(|&w| w == 0))
    }

    /// The set as ranges of granules `[lo, hi)`, in increasing order, neither overlapping nor
    /// touching: in time by the bitmaps' size and the ranges' number, never by the granules'.
    pub fn ranges(&self) -> Vec<(u64, u64)> {
        let mut out = self.wide.clone();
        for (page, bits) in &self.pages {
            let base = page << PAGE_SHIFT;
            let mut run: Option<u64> = None;
            for (w, &word) in bits.iter().enumerate() {
                if run.is_none() && word == 0 || run.is_some() && word == !0 {
                    continue;
                }
                for b in 0..64 {
                    let g = base + 64 * w as u64 + b;
                    match (word & (1 << b) != 0, run) {
                        (true, None) => run = Some(g),
                        (false, Some(lo)) => {
                            out.push((lo, g));
                            run = None;
                        }
                        _ => {}
                    }
                }
            }
            if let Some(lo) = run {
                out.push((lo, base + (1 << PAGE_SHIFT)));
            }
        }
        merge(&mut out);
        out
    }

    /// The ranges of [`Granules::ranges`] clipped to granules `[lo, hi)`.
    pub fn ranges_in(&self, lo: u64, hi: u64) -> Vec<(u64, u64)> {
        self.ranges().into_iter().filter(|r| r.0 < hi && r.1 > lo).map(|r| (r.0.max(lo), r.1.min(hi))).collect()
    }

    /// Adds the granules of `other`.
    pub fn extend(&mut self, other: Granules) {
        for (page, bits) in other.pages {
            match self.pages.binary_search_by_key(&page, |p| p.0) {
                Ok(i) => {
                    for (a, b) in self.pages[i].1.iter_mut().zip(bits.iter()) {
                        *a |= b;
                    }
                }
                Err(i) => self.pages.insert(i, (page, bits)),
            }
        }
        if !other.wide.is_empty() {
            self.wide.extend(other.wide);
            merge(&mut self.wide);
            self.merged = self.wide.len();
        }
    }
}

/// Sorts `ranges` and merges those that overlap or touch.
fn merge(ranges: &mut Vec<(u64, u64)>) {
    ranges.sort_unstable();
    let mut n = 0;
    for i in 0..ranges.len() {
        let r = ranges[i];
        if n > 0 && r.0 <= ranges[n - 1].1 {
            ranges[n - 1].1 = ranges[n - 1].1.max(r.1);
        } else {
            ranges[n] = r;
            n += 1;
        }
    }
    ranges.truncate(n);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    /// Ranges `[lo, hi)` of consecutive granules in `set`.
    fn runs(set: &BTreeSet<u64>) -> Vec<(u64, u64)> {
        let mut out: Vec<(u64, u64)> = Vec::new();
        for &g in set {
            match out.last_mut() {
                Some(r) if r.1 == g => r.1 = g + 1,
                _ => out.push((g, g + 1)),
            }
        }
        out
    }

    #[test]
    fn a_set_of_granules_in_order() {
        let marks = [5u64, 1 << 40, 70_000, 5, 63, 64, (1 << 40) + 65_535, 70_001, 0, 65_535, 65_536];
        let (mut a, mut b) = (Granules::default(), Granules::default());
        let mut want = BTreeSet::new();
        for (i, &g) in marks.iter().enumerate() {
            if i % 2 == 0 { &mut a } else { &mut b }.insert(g);
            want.insert(g);
        }
        assert!(a.contains(70_000) && !a.contains(70_001) && b.contains(70_001));
        a.extend(b);
        assert_eq!(a.ranges(), runs(&want));
        assert!(marks.iter().all(|&g| a.contains(g)) && !a.contains(1) && !a.contains(1 << 41));
        assert!(!a.is_empty() && Granules::default().is_empty());
        assert_eq!(a.ranges_in(60, 70_001), vec![(63, 65), (65_535, 65_537), (70_000, 70_001)]);
    }

    #[test]
    fn wide_spans_cost_ranges_not_bits() {
        let mut a = Granules::default();
        // 2^50 bytes and a 64 GiB reserve: ranges, merged with the bits beside them.
        a.insert_span(1 << 20, (1 << 20) + (1 << 34) - 1);
        a.insert_span(1 << 40, (1 << 40) + (1 << 20) - 1);
        a.insert_span((1 << 40) + (1 << 20), (1 << 40) + (1 << 20) + 3);
        a.insert_span(7, 8);
        assert!(a.pages.len() <= 2, "no bitmap per 4 GiB of the wide spans");
        assert_eq!(a.ranges(), vec![(7, 9), (1 << 20, (1 << 20) + (1 << 34)), (1 << 40, (1 << 40) + (1 << 20) + 4)]);
        assert!(a.contains((1 << 20) + 12345) && !a.contains(9));
        // The same chunk mapped again and again keeps one range.
        for _ in 0..3 * MERGE_AT {
            a.insert_span(1 << 45, (1 << 45) + WIDE);
        }
        assert!(a.wide.len() < MERGE_AT, "{}", a.wide.len());
        assert_eq!(a.ranges().len(), 4);
    }

    #[test]
    fn blocks_scattered_over_the_address_space_cost_no_bitmap_each() {
        let mut a = Granules::default();
        let n = 3 * MAX_PAGES as u64;
        for i in 0..n {
            a.insert_span(i << 20, i << 20);
        }
        assert!(a.pages.len() <= MAX_PAGES);
        let r = a.ranges();
        assert_eq!(r.len(), n as usize);
        assert!(r.iter().enumerate().all(|(i, &g)| g == ((i as u64) << 20, ((i as u64) << 20) + 1)));
    }
}
