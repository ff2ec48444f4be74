//! The occupancy bar under the map (Moreta & Telea, section 4.1.3): bytes in use over time,
//! blue (low) to red (the peak), with the stretches where nothing happened drawn as plateau
//! cushions (their Figure 5c), so bursts of activity stand out as flat colour between them.
//!
//! The bytes in use are kept as the highest level of each run of events in one column, runs
//! also broken at each *mark* (a release of a block this replay did not see allocated). A
//! replay cut in two (`heaplens_interpret::split`) then joins exactly: the later half's levels
//! are relative to the cut, and each mark's block, once the earlier half names it, lowers the
//! level of every run after it.

use crate::color::{blue_to_red, to_u8};
use crate::cushion::Cushion;

/// Bytes in use and events, per column of the map.
pub struct Occupancy {
    width: usize,
    /// Runs of events, in order.
    runs: Vec<Run>,
    /// Bytes in use now (relative to the cut, in a later half).
    level: i64,
    /// Marks so far.
    marks: u32,
}

/// Events in one column between two marks.
#[derive(Debug, Clone, Copy)]
struct Run {
    col: u32,
    /// Marks before the run.
    marks: u32,
    /// Highest bytes in use.
    high: i64,
    /// Bytes in use after its last event: what the quiet columns after it hold.
    end: i64,
    /// A release by a mark, which counts only once a join says the block was this bar's.
    tentative: bool,
}

/// No-activity stretches narrower than this many columns are not cushioned.
const MIN_QUIET: usize = 3;

impl Occupancy {
    /// `width` columns, nothing in use.
    pub fn new(width: usize) -> Occupancy {
        Occupancy { width, runs: Vec::new(), level: 0, marks: 0 }
    }

    /// Bytes in use changed by `delta` at column `col` (`None`: outside the window, where only
    /// the running total changes).
    #[inline]
    pub fn event(&mut self, col: Option<usize>, delta: i64) {
        self.level += delta;
        if let Some(c) = col.filter(|&c| c < self.width) {
            self.at(c as u32);
        }
    }

    #[inline]
    fn at(&mut self, col: u32) {
        match self.runs.last_mut() {
            Some(r) if r.col == col && r.marks == self.marks && !r.tentative => {
                r.high = r.high.max(self.level);
                r.end = self.level;
            }
            _ => self.runs.push(Run { col, marks: self.marks, high: self.level, end: self.level, tentative: false }),
        }
    }

    /// A release of a block allocated before this replay started (see the module's
    /// documentation); its size is known only at [`Occupancy::join`].
    pub fn mark(&mut self) {
        self.marks += 1;
    }

    /// A [`Occupancy::mark`] whose block may not be this bar's (a view of some of the blocks):
    /// its column counts as one with events only if the join gives the block to this bar.
    pub fn mark_tentative(&mut self, col: Option<usize>) {
        self.mark();
        if let Some(c) = col.filter(|&c| c < self.width) {
            let level = self.level;
            self.runs.push(Run { col: c as u32, marks: self.marks, high: level, end: level, tentative: true });
        }
    }

    /// Bytes in use at the start of the window (before any drawn event).
    pub fn start(&mut self) {
        if self.runs.is_empty() && self.width > 0 {
            self.at(0);
        }
    }

    /// Appends the runs of `later`, the same bar over the events after this one's: `sizes`
    /// are the bytes of its marks' blocks, in order (`None` for a block that is not this bar's,
    /// or that this one did not hold).
    pub fn join(&mut self, later: Occupancy, sizes: &[Option<u64>]) {
        let mut before = Vec::with_capacity(sizes.len() + 1);
        let mut sum = 0i64;
        before.push(0);
        for &s in sizes {
            sum += s.unwrap_or(0) as i64;
            before.push(sum);
        }
        let lowered = |marks: u32| before.get(marks as usize).copied().unwrap_or(sum);
        let base = self.level;
        for r in &later.runs {
            // A tentative run follows its mark: it counts if the mark's block is this bar's.
            if r.tentative && !sizes.get(r.marks as usize - 1).is_some_and(|s| s.is_some()) {
                continue;
            }
            let (high, end) = (base + r.high - lowered(r.marks), base + r.end - lowered(r.marks));
            self.runs.push(Run { col: r.col, marks: self.marks, high, end, tentative: false });
        }
        self.level = base + later.level - lowered(later.marks);
    }

    /// Highest bytes in use seen in each column and the bytes in use after its last event
    /// (`None`: no event there).
    fn highs(&self) -> Vec<Option<(u64, u64)>> {
        let mut high: Vec<Option<(u64, u64)>> = vec![None; self.width];
        for r in self.runs.iter().filter(|r| !r.tentative) {
            let h = high[r.col as usize].get_or_insert((0, 0));
            *h = (h.0.max(r.high.max(0) as u64), r.end.max(0) as u64);
        }
        high
    }

    /// The peak of the columns, bytes.
    pub fn peak(&self) -> u64 {
        self.runs.iter().filter(|r| !r.tentative).map(|r| r.high.max(0) as u64).max().unwrap_or(0)
    }

    /// The bar, `height` rows of the map's width, rows top first.
    pub fn render(&self, height: usize) -> Vec<[u8; 3]> {
        let high = self.highs();
        let w = high.len();
        let peak = self.peak().max(1) as f32;
        let level = drawn(&high);
        // Luminance per column: 1 where events happened, a plateau cushion across each quiet run.
        let mut lum = vec![1.0f32; w];
        let mut c = 0;
        while c < w {
            if high[c].is_some() {
                c += 1;
                continue;
            }
            let start = c;
            while c < w && high[c].is_none() {
                c += 1;
            }
            if c - start >= MIN_QUIET {
                for (i, l) in lum[start..c].iter_mut().enumerate() {
                    *l = Cushion::Plateau.at((i as f32 + 0.5) / (c - start) as f32) * 0.85;
                }
            }
        }
        let row: Vec<[u8; 3]> =
            (0..w).map(|c| to_u8(blue_to_red(level[c] as f32 / peak).map(|x| x * lum[c]))).collect();
        (0..height).flat_map(|_| row.iter().copied()).collect()
    }
}

/// The bytes in use each column shows: its highest where it had events; in a quiet one, the
/// bytes in use after the last event before it (a burst of releases in one column leaves the
/// level low, not at that column's highest).
fn drawn(high: &[Option<(u64, u64)>]) -> Vec<u64> {
    let mut last = 0;
    high.iter()
        .map(|h| match *h {
            Some((top, end)) => {
                last = end;
                top
            }
            None => last,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bytes in use per column, 0 where nothing happened.
    fn levels(o: &Occupancy) -> Vec<u64> {
        o.highs().into_iter().map(|h| h.map_or(0, |h| h.0)).collect()
    }

    #[test]
    fn quiet_columns_after_a_burst_of_releases_hold_what_is_left() {
        // 40 B, then ten blocks of 500 B in column 1, all released in column 2, then nothing.
        let mut o = Occupancy::new(5);
        o.event(Some(0), 40);
        for _ in 0..10 {
            o.event(Some(1), 500);
        }
        for _ in 0..10 {
            o.event(Some(2), -500);
        }
        assert_eq!(drawn(&o.highs()), vec![40, 5040, 4540, 40, 40]);
    }

    #[test]
    fn a_bar_joined_at_a_cut_is_the_bar_of_one_replay() {
        // Blocks a (100 B) and b (50 B) allocated in column 0; c (10 B) in column 1; a released
        // in column 2, c in column 2, b in column 3.
        let mut whole = Occupancy::new(4);
        for (col, d) in [(0, 100), (0, 50), (1, 10), (2, -100), (2, -10), (3, -50)] {
            whole.event(Some(col), d);
        }
        // Cut after column 1: the later half sees a's and b's releases as marks.
        let mut earlier = Occupancy::new(4);
        for (col, d) in [(0, 100), (0, 50), (1, 10)] {
            earlier.event(Some(col), d);
        }
        let mut later = Occupancy::new(4);
        later.mark();
        later.event(Some(2), 0);
        later.event(Some(2), -10);
        later.mark();
        later.event(Some(3), 0);
        earlier.join(later, &[Some(100), Some(50)]);
        assert_eq!(levels(&whole), vec![150, 160, 60, 0]);
        assert_eq!(levels(&earlier), levels(&whole));
        assert_eq!(earlier.level, 0);

        // A view of b alone: a's release is not its event, b's is.
        let mut whole = Occupancy::new(4);
        whole.event(Some(0), 50);
        whole.event(Some(3), -50);
        let mut earlier = Occupancy::new(4);
        earlier.event(Some(0), 50);
        let mut later = Occupancy::new(4);
        later.mark_tentative(Some(2));
        later.mark_tentative(Some(3));
        earlier.join(later, &[None, Some(50)]);
        assert_eq!(earlier.highs(), whole.highs());
        assert_eq!(earlier.highs(), vec![Some((50, 50)), None, None, Some((0, 0))]);
    }
}
