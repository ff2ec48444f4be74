//! The address axis, compacted: a process's blocks sit in a few ranges far apart (the main
//! heap after the program's data, each thread arena's 64 MiB heap, each `mmap`'d chunk), so a
//! linear axis would be 99% empty. The ranges the blocks touch, at a granularity of 64 KiB, are
//! kept; the gaps between them are cut out and drawn as labelled bands.

/// log2 of the granularity at which occupied addresses are noted.
pub const GRANULE_SHIFT: u32 = 16;

/// Gaps up to this many granules stay on the axis (a heap's own free stretches).
const KEEP_GAP: u64 = 16;

/// Pixel rows between two segments, for the band that marks a gap.
pub const GAP_ROWS: f64 = 7.0;

/// How the address range `[lo, hi)` is written: in hex, and for the blocks of a program's own
/// pools (addresses with [`heaplens_trace::event::POOL_TAG`]) their real addresses, marked.
pub fn range_label(lo: u64, hi: u64) -> String {
    use heaplens_trace::event::POOL_TAG;
    if lo & POOL_TAG != 0 {
        format!("pool blocks {:#x}-{:#x}", lo & !POOL_TAG, hi & !POOL_TAG)
    } else {
        format!("{lo:#x}-{hi:#x}")
    }
}

/// A kept range of addresses and the rows it takes.
#[derive(Debug, Clone, PartialEq)]
pub struct Segment {
    /// First address.
    pub lo: u64,
    /// One past the last address.
    pub hi: u64,
    /// Its bottom row (rows count up from the bottom of the map).
    pub y0: f64,
    /// Its top row.
    pub y1: f64,
}

/// The compacted axis: segments from the lowest addresses up.
#[derive(Debug, Clone, Default)]
pub struct AddressAxis {
    /// The segments.
    pub segments: Vec<Segment>,
    /// Rows per byte of each segment.
    per_byte: Vec<f64>,
}

impl AddressAxis {
    /// Lays out the granule ranges `[lo, hi)` (addresses `>> GRANULE_SHIFT`, in any order) on
    /// `height` rows: ranges with gaps of up to 1 MiB are one segment; segments share the rows
    /// by their sizes, each at least `min_rows` high while there is room, with a band of
    /// [`GAP_ROWS`] between two. Ranges, not granules, so that a block of many gigabytes costs
    /// no more than a small one.
    pub fn new(mut granules: Vec<(u64, u64)>, height: f64, min_rows: f64) -> AddressAxis {
        granules.sort_unstable();
        let mut ranges: Vec<(u64, u64)> = Vec::new();
        for (lo, hi) in granules {
            match ranges.last_mut() {
                Some((_, end)) if lo <= end.saturating_add(KEEP_GAP) => *end = (*end).max(hi),
                _ => ranges.push((lo, hi)),
            }
        }
        // Too many segments for their bands and minimum heights: merge across the smallest gaps
        // (ties from the lowest addresses), all at once, as a damaged trace can scatter its
        // blocks into a hundred thousand ranges.
        let fits = (height / (min_rows + GAP_ROWS)).floor().max(1.0) as usize;
        if ranges.len() > fits {
            let mut gaps: Vec<(u64, usize)> =
                (0..ranges.len() - 1).map(|i| (ranges[i + 1].0 - ranges[i].1, i)).collect();
            gaps.sort_unstable();
            let mut merge = vec![false; ranges.len()];
            for &(_, i) in &gaps[..ranges.len() - fits] {
                merge[i + 1] = true;
            }
            let mut kept: Vec<(u64, u64)> = Vec::with_capacity(fits);
            for (r, m) in ranges.into_iter().zip(merge) {
                match kept.last_mut() {
                    Some(k) if m => k.1 = r.1,
                    _ => kept.push(r),
                }
            }
            ranges = kept;
        }
        let n = ranges.len() as f64;
        let free_rows = (height - GAP_ROWS * (n - 1.0).max(0.0)).max(1.0);
        let total: f64 = ranges.iter().map(|(lo, hi)| (hi - lo) as f64).sum();
        // Each segment's share of the rows, raised to the minimum and the rest scaled down.
        let mut rows: Vec<f64> = ranges.iter().map(|(lo, hi)| (hi - lo) as f64 / total * free_rows).collect();
        let small: f64 = rows.iter().filter(|&&r| r < min_rows).count() as f64 * min_rows;
        let large: f64 = rows.iter().filter(|&&r| r >= min_rows).sum();
        if small > 0.0 && large > 0.0 && small < free_rows {
            let scale = (free_rows - small) / large;
            for r in &mut rows {
                *r = if *r < min_rows { min_rows } else { *r * scale };
            }
        }
        let mut y = 0.0;
        let segments = ranges
            .iter()
            .zip(rows)
            .map(|(&(lo, hi), r)| {
                // The last granule of the address space ends at 2^64, one past what a u64 holds.
                let s =
                    Segment { lo: lo << GRANULE_SHIFT, hi: hi.saturating_mul(1 << GRANULE_SHIFT), y0: y, y1: y + r };
                y += r + GAP_ROWS;
                s
            })
            .collect::<Vec<Segment>>();
        let per_byte = segments.iter().map(|s| (s.y1 - s.y0) / (s.hi - s.lo) as f64).collect();
        AddressAxis { segments, per_byte }
    }

    /// The index of the segment holding `addr`.
    pub fn segment(&self, addr: u64) -> Option<usize> {
        let i = self.segments.partition_point(|s| s.hi <= addr);
        self.segments.get(i).filter(|s| s.lo <= addr).map(|_| i)
    }

    /// The rows `[y0, y1)` of the block `[addr, addr + size)`, or `None` off the axis.
    pub fn rows(&self, addr: u64, size: u64) -> Option<(f64, f64)> {
        self.rows_in(self.segments.partition_point(|s| s.hi <= addr), addr, size)
    }

    /// [`AddressAxis::rows`], looking in segment `*hint` first and leaving there the segment
    /// found: a replay's blocks come in runs from one segment, and the search was a third of
    /// the drawing's own time.
    #[inline]
    pub fn rows_hinted(&self, addr: u64, size: u64, hint: &mut usize) -> Option<(f64, f64)> {
        if !self.segments.get(*hint).is_some_and(|s| s.lo <= addr && addr < s.hi) {
            *hint = self.segments.partition_point(|s| s.hi <= addr);
        }
        self.rows_in(*hint, addr, size)
    }

    #[inline]
    fn rows_in(&self, i: usize, addr: u64, size: u64) -> Option<(f64, f64)> {
        let s = self.segments.get(i).filter(|s| s.lo <= addr)?;
        let per_byte = self.per_byte[i];
        // Offsets below 2^63 convert through i64 in one instruction.
        let y0 = s.y0 + (addr - s.lo) as i64 as f64 * per_byte;
        let end = addr.saturating_add(size.max(1)).min(s.hi);
        Some((y0, s.y0 + (end - s.lo) as i64 as f64 * per_byte))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn many_ranges_merge_across_their_smallest_gaps_as_one_at_a_time_did() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for n in [2usize, 40, 41, 300] {
            let mut ranges: Vec<(u64, u64)> = Vec::new();
            let mut at = 0;
            for _ in 0..n {
                // Gaps from a few values, so that ties are common.
                at += KEEP_GAP + 1 + next() % 4 * 100;
                let len = 1 + next() % 3;
                ranges.push((at, at + len));
                at += len;
            }
            // The merge as it was: the smallest gap (the lowest on ties), one at a time.
            let mut want = ranges.clone();
            while want.len() > 1 && (want.len() as f64) * (12.0 + GAP_ROWS) > 640.0 {
                let i = (0..want.len() - 1).min_by_key(|&i| want[i + 1].0 - want[i].1).unwrap();
                want[i].1 = want[i + 1].1;
                want.remove(i + 1);
            }
            let got = AddressAxis::new(ranges, 640.0, 12.0);
            let got: Vec<(u64, u64)> =
                got.segments.iter().map(|s| (s.lo >> GRANULE_SHIFT, s.hi >> GRANULE_SHIFT)).collect();
            assert_eq!(got, want, "{n} ranges");
        }
    }

    #[test]
    fn gaps_are_cut_and_small_segments_stay_visible() {
        // A 4 MiB heap and one 64 KiB chunk far above it.
        let g = vec![(0x7f00_0000, 0x7f00_0001), (0x100, 0x120), (0x110, 0x140)];
        let a = AddressAxis::new(g, 200.0, 12.0);
        assert_eq!(a.segments.len(), 2);
        let (heap, chunk) = (&a.segments[0], &a.segments[1]);
        assert_eq!((heap.lo, heap.hi), (0x100 << 16, 0x140 << 16));
        assert!((chunk.y1 - chunk.y0 - 12.0).abs() < 1e-9, "the chunk keeps its minimum height");
        assert!((chunk.y1 - 200.0).abs() < 1e-6, "the segments fill the height");
        let (y0, y1) = a.rows(0x100 << 16, 1 << 21).unwrap();
        assert!(y0 == 0.0 && (y1 - heap.y1 / 2.0).abs() < 1e-6, "half the heap is half its rows");
        assert_eq!(a.rows(0x200 << 16, 16), None);
        let mut hint = 1;
        for addr in [0x100 << 16, 0x7f00_0000 << 16, 0x200 << 16, (0x100 << 16) + 4096, 0] {
            assert_eq!(a.rows_hinted(addr, 64, &mut hint), a.rows(addr, 64), "{addr:#x}");
        }
    }
}
