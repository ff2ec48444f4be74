//! The set of granules (addresses `>> GRANULE_SHIFT`) the blocks touch, which the first pass
//! marks once per block: a bitmap per 2^16 granules (4 GiB of addresses, 8 KiB of bits), found
//! by a search from the bitmap marked last. A process's blocks lie in a few such ranges (the
//! heap, the arenas, the `mmap`'d chunks), so a mark is a compare and a bit, where a hash set
//! of millions of inserts was a tenth of the map's time on a 10^8-event trace.

/// log2 of the granules of one bitmap.
const PAGE_SHIFT: u32 = 16;
const WORDS: usize = (1 << PAGE_SHIFT) / 64;

/// A set of granule numbers.
#[derive(Clone, Default)]
pub struct Granules {
    /// Bitmaps by their first granule `>> PAGE_SHIFT`, in order.
    pages: Vec<(u64, Box<[u64; WORDS]>)>,
    /// The index of the page marked last.
    last: usize,
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

    /// Whether `g` is in the set.
    pub fn contains(&self, g: u64) -> bool {
        let bit = (g & ((1 << PAGE_SHIFT) - 1)) as usize;
        self.pages
            .binary_search_by_key(&(g >> PAGE_SHIFT), |p| p.0)
            .is_ok_and(|i| self.pages[i].1[bit / 64] & (1 << (bit % 64)) != 0)
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.pages.iter().all(|p| p.1.iter().all(|&w| w == 0))
    }

    /// The granules, in increasing order.
    pub fn iter(&self) -> impl Iterator<Item = u64> + '_ {
        self.pages.iter().flat_map(|(page, bits)| {
            bits.iter().enumerate().flat_map(move |(w, &word)| {
                let base = (page << PAGE_SHIFT) + 64 * w as u64;
                (0..64).filter(move |b| word & (1 << b) != 0).map(move |b| base + b)
            })
        })
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
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    #[test]
    fn a_set_of_granules_in_order() {
        let marks = [5u64, 1 << 40, 70_000, 5, 63, 64, (1 << 40) + 65_535, 70_001, 0];
        let (mut a, mut b) = (Granules::default(), Granules::default());
        let mut want = BTreeSet::new();
        for (i, &g) in marks.iter().enumerate() {
            if i % 2 == 0 { &mut a } else { &mut b }.insert(g);
            want.insert(g);
        }
        assert!(a.contains(70_000) && !a.contains(70_001) && b.contains(70_001));
        a.extend(b);
        assert_eq!(a.iter().collect::<Vec<_>>(), want.iter().copied().collect::<Vec<_>>());
        assert!(marks.iter().all(|&g| a.contains(g)) && !a.contains(1) && !a.contains(1 << 41));
        assert!(!a.is_empty() && Granules::default().is_empty());
    }
}
