//! Heap over time (what massif and heaptrack's GUI show): bytes in use per column of time,
//! stacked by the top call sites, the peak marked and its top holders named.
//!
//! The bytes in use are kept as *runs*: the events of one column between two marks, each with
//! the highest total seen in it, when, and the split by site at that moment. A mark is a
//! release, in the later half of a split replay ([`heaplens_interpret::split`]), of a block
//! allocated before the cut: that half does not know the block's site or size, so its levels
//! are relative to the cut and a mark changes them by an amount the join learns. Between two
//! marks the amount is fixed, so a run's highest moment is the same whatever it turns out to
//! be, and the join lowers every run after a mark by its block. (The occupancy bar under the
//! map does the same for the total alone, see `occupancy.rs`.)

use heaplens_interpret::idmap::{IdMap, IdTable};
use heaplens_interpret::split::{Half, Joinable};
use heaplens_interpret::view::{Block, Release, View};

use crate::time_columns::TimeColumns;

/// Bytes in use per call site over time, in columns.
pub struct Timeline {
    /// Per stack id, its site's index (stacks of no top site, and those past the end, count in
    /// the last slot, "the rest"). Dense: every event looks its stack up.
    site_of: IdTable<u16>,
    sites: usize,
    /// Bytes in use per site, the rest last (relative to the cut, in a later half).
    live: Vec<i64>,
    total: i64,
    /// The window, `CLOCK_MONOTONIC` ns, and its columns.
    time: TimeColumns,
    width: usize,
    /// Runs of events, in order, and their splits: `sites + 1` values per run, at its highest
    /// total and after its last event (what the quiet columns after it hold).
    runs: Vec<Run>,
    splits: Vec<i64>,
    ends: Vec<i64>,
    /// The split when the window began (before its first event), and the marks before then:
    /// what the columns before the first event hold.
    start: Option<(Vec<i64>, u32)>,
    /// Marks so far; only a later half makes them.
    marks: u32,
    later: bool,
}

/// Events in one column between two marks.
#[derive(Debug, Clone, Copy)]
struct Run {
    col: u32,
    /// Marks before the run.
    marks: u32,
    /// The highest total in it, and when it was first reached.
    high: i64,
    ts: u64,
    /// Made by a mark (the release itself): it counts only if the join gives the mark a block,
    /// as a release of a block allocated before the replay is no event of this view.
    tentative: bool,
}

/// The columns of a [`Timeline`] once its replay ended.
#[derive(Debug, Clone, PartialEq)]
pub struct Columns {
    /// Per column, bytes in use per site (the rest last): the split at the column's highest
    /// total; a column without events keeps the split of the column before it.
    pub columns: Vec<Vec<i64>>,
    /// The highest total of the window, bytes, and when (`CLOCK_MONOTONIC` ns; the window's
    /// start when nothing was ever in use).
    pub peak: (i64, u64),
    /// The split at the peak.
    pub at_peak: Vec<i64>,
}

impl Timeline {
    /// A timeline of `width` columns over `[t0, t1]` for `sites` top call sites (`site_of`:
    /// each top stack's site), for `half` of a replay.
    pub fn new(site_of: &IdMap<u32, usize>, sites: usize, width: usize, (t0, t1): (u64, u64), half: Half) -> Timeline {
        let mut dense = IdTable::new(sites as u16);
        for (&stack, &site) in site_of {
            dense.set(stack, site as u16);
        }
        let width = width.max(1);
        Timeline {
            site_of: dense,
            sites,
            live: vec![0; sites + 1],
            total: 0,
            time: TimeColumns::new(width, (t0, t1)),
            width,
            runs: Vec::new(),
            splits: Vec::new(),
            ends: Vec::new(),
            start: None,
            marks: 0,
            later: half == Half::Later,
        }
    }

    fn site(&self, stack: u32) -> usize {
        site_in(&self.site_of, stack)
    }

    fn col(&self, ts: u64) -> Option<u32> {
        self.time.of(ts).map(|c| c.min(self.width - 1) as u32)
    }

    fn event(&mut self, ts: u64, stack: u32, delta: i64) {
        let site = self.site(stack);
        let col = self.col(ts);
        // The level when the window began: before its first event, or before the first event
        // after it (a window with no event of its own).
        if col.is_some() || ts > self.time.t1 {
            self.begin();
        }
        self.live[site] += delta;
        self.total += delta;
        if let Some(col) = col {
            self.at(col, ts, false);
        }
    }

    /// Notes the levels now as the window's start, unless it began already.
    fn begin(&mut self) {
        if self.start.is_none() {
            self.start = Some((self.live.clone(), self.marks));
        }
    }

    /// The levels now, at column `col`.
    fn at(&mut self, col: u32, ts: u64, tentative: bool) {
        let n = self.sites + 1;
        match self.runs.last_mut() {
            Some(r) if r.col == col && r.marks == self.marks && !r.tentative && !tentative => {
                let at = self.splits.len() - n;
                if self.total > r.high {
                    (r.high, r.ts) = (self.total, ts);
                    self.splits[at..].copy_from_slice(&self.live);
                }
                self.ends[at..].copy_from_slice(&self.live);
            }
            _ => {
                self.runs.push(Run { col, marks: self.marks, high: self.total, ts, tentative });
                self.splits.extend_from_slice(&self.live);
                self.ends.extend_from_slice(&self.live);
            }
        }
    }

    /// The columns, the peak and its split.
    pub fn finish(&self) -> Columns {
        let n = self.sites + 1;
        let mut best: Vec<Option<usize>> = vec![None; self.width];
        let mut last_of: Vec<Option<usize>> = vec![None; self.width];
        // What was in use when the window began counts for its peak (blocks live before it).
        let start = self.start.as_ref().map_or_else(|| self.live.clone(), |s| s.0.clone());
        let start_total: i64 = start.iter().sum();
        let (mut peak, mut at_peak) = ((start_total.max(0), self.time.t0), None);
        for (k, r) in self.runs.iter().enumerate().filter(|(_, r)| !r.tentative) {
            let b = &mut best[r.col as usize];
            if b.is_none_or(|j| r.high > self.runs[j].high) {
                *b = Some(k);
            }
            last_of[r.col as usize] = Some(k);
            if r.high > peak.0 {
                (peak, at_peak) = ((r.high, r.ts), Some(k));
            }
        }
        let split = |k: usize| self.splits[k * n..(k + 1) * n].to_vec();
        let end = |k: usize| self.ends[k * n..(k + 1) * n].to_vec();
        // A column with events shows its highest moment; a quiet one what the last event
        // before it left (a burst of releases in one column leaves the level low).
        let mut last = start.clone();
        let columns = best
            .iter()
            .zip(&last_of)
            .map(|(b, l)| match (*b, *l) {
                (Some(k), Some(e)) => {
                    last = end(e);
                    split(k)
                }
                _ => last.clone(),
            })
            .collect();
        let at_peak = at_peak.map_or_else(|| if start_total > 0 { start } else { vec![0; n] }, split);
        Columns { columns, peak, at_peak }
    }
}

/// The site of `stack` in `site_of` ([`Timeline`]'s): the rest's index when it has none.
fn site_in(site_of: &IdTable<u16>, stack: u32) -> usize {
    usize::from(site_of.get(stack))
}

impl View for Timeline {
    fn allocation(&mut self, b: &Block) {
        if b.addr != 0 {
            self.event(b.ts, b.stack, b.size as i64);
        }
    }

    fn deallocation(&mut self, r: &Release, b: &Block) {
        self.event(r.ts, b.stack, -(b.size as i64));
    }

    fn unmatched(&mut self, r: &Release) {
        if self.later && r.addr != 0 {
            self.marks += 1;
            if let Some(col) = self.col(r.ts) {
                self.begin();
                self.at(col, r.ts, true);
            }
        }
    }

    fn overwritten(&mut self, b: &Block) {
        self.event(b.ts, b.stack, -(b.size as i64));
    }
}

impl Joinable for Timeline {
    fn join(&mut self, later: Timeline, releases: &[(Release, Option<Block>)]) {
        let n = self.sites + 1;
        let (base, base_total) = (self.live.clone(), self.total);
        // What the marks so far released: per site and in all.
        let site_of = &self.site_of;
        let (mut lowered, mut lowered_total, mut k) = (vec![0i64; n], 0i64, 0usize);
        let mut lower_to = |marks: u32, lowered: &mut Vec<i64>, lowered_total: &mut i64| {
            while k < marks as usize {
                if let Some((_, Some(b))) = releases.get(k) {
                    lowered[site_in(site_of, b.stack)] += b.size as i64;
                    *lowered_total += b.size as i64;
                }
                k += 1;
            }
        };
        if let (None, Some((s, marks))) = (&self.start, &later.start) {
            // The window began in the later half: its level then, known now.
            lower_to(*marks, &mut lowered, &mut lowered_total);
            self.start = Some(((0..n).map(|i| base[i] + s[i] - lowered[i]).collect(), self.marks));
        }
        for (i, r) in later.runs.iter().enumerate() {
            lower_to(r.marks, &mut lowered, &mut lowered_total);
            let held = |m: u32| releases.get(m as usize - 1).is_some_and(|(_, b)| b.is_some());
            if r.tentative && !held(r.marks) {
                continue;
            }
            let high = base_total + r.high - lowered_total;
            self.runs.push(Run { col: r.col, marks: self.marks, high, ts: r.ts, tentative: false });
            let split = &later.splits[i * n..(i + 1) * n];
            self.splits.extend((0..n).map(|s| base[s] + split[s] - lowered[s]));
            let end = &later.ends[i * n..(i + 1) * n];
            self.ends.extend((0..n).map(|s| base[s] + end[s] - lowered[s]));
        }
        lower_to(later.marks, &mut lowered, &mut lowered_total);
        for s in 0..n {
            self.live[s] = base[s] + later.live[s] - lowered[s];
        }
        self.total = base_total + later.total - lowered_total;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use heaplens_trace::Op;

    fn block(ts: u64, addr: u64, size: u64, stack: u32) -> Block {
        Block { ts, tid: 1, addr, size, usable: size, op: Op::Malloc, stack }
    }

    fn release(ts: u64, addr: u64) -> Release {
        Release { ts, tid: 1, addr, op: Op::Free }
    }

    /// A small run replayed whole, and cut at each event and joined, as `split.rs` does: the
    /// same columns, peak and split at the peak.
    #[test]
    fn halves_joined_give_the_whole_replays_columns() {
        let sites: IdMap<u32, usize> = [(7, 0), (8, 1)].into_iter().collect();
        // (ts, allocation or release, addr, size, stack) over 10 columns of 10 ns.
        let events: Vec<(u64, bool, u64, u64, u32)> = vec![
            (0, true, 0x10, 100, 7),
            (5, true, 0x20, 40, 8),
            (12, true, 0x30, 7, 9),
            (14, false, 0x10, 0, 0),
            (31, true, 0x40, 500, 7),
            (33, false, 0x20, 0, 0),
            (47, false, 0x40, 0, 0),
            (52, true, 0x50, 60, 8),
            (55, false, 0x30, 0, 0),
            (58, false, 0x99, 0, 0), // released unseen: allocated before the trace
            (77, false, 0x50, 0, 0),
            (91, true, 0x60, 1, 7),
        ];
        let replay = |tl: &mut Timeline, from: usize, to: usize, live: &mut IdMap<u64, Block>| {
            for &(ts, alloc, addr, size, stack) in &events[from..to] {
                if alloc {
                    let b = block(ts, addr, size, stack);
                    live.insert(addr, b);
                    tl.allocation(&b);
                } else {
                    match live.remove(&addr) {
                        Some(b) => tl.deallocation(&release(ts, addr), &b),
                        None => tl.unmatched(&release(ts, addr)),
                    }
                }
            }
        };
        let mut whole = Timeline::new(&sites, 2, 10, (0, 99), Half::Whole);
        replay(&mut whole, 0, events.len(), &mut IdMap::default());
        let want = whole.finish();
        assert_eq!(want.peak, (547, 31));
        assert_eq!(want.at_peak, vec![500, 40, 7]);
        assert_eq!(want.columns[1], vec![100, 40, 7], "the split at the column's highest total");
        assert_eq!(want.columns[2], vec![0, 40, 7], "a column without events keeps what the one before left");
        for cut in 1..events.len() {
            let (mut head_live, mut tail_live) = (IdMap::default(), IdMap::default());
            let mut head = Timeline::new(&sites, 2, 10, (0, 99), Half::Earlier);
            replay(&mut head, 0, cut, &mut head_live);
            let mut later = Timeline::new(&sites, 2, 10, (0, 99), Half::Later);
            replay(&mut later, cut, events.len(), &mut tail_live);
            let releases: Vec<(Release, Option<Block>)> = events[cut..]
                .iter()
                .filter(|&&(_, alloc, addr, ..)| !alloc && !events[cut..].iter().any(|&(_, a, ad, ..)| a && ad == addr))
                .map(|&(ts, _, addr, ..)| (release(ts, addr), head_live.remove(&addr)))
                .collect();
            head.join(later, &releases);
            assert_eq!(head.finish(), want, "cut before event {cut}");
        }
        // A window that begins with blocks live: they are in use from its first column, and
        // count for its peak; one with no event of its own holds what was live throughout.
        let mut from_50 = Timeline::new(&sites, 2, 5, (50, 99), Half::Whole);
        replay(&mut from_50, 0, events.len(), &mut IdMap::default());
        let c = from_50.finish();
        assert_eq!(c.columns, vec![vec![0, 60, 7], vec![0, 60, 0], vec![0, 0, 0], vec![0, 0, 0], vec![1, 0, 0]]);
        assert_eq!((c.peak, c.at_peak), ((67, 52), vec![0, 60, 7]));
        let mut quiet = Timeline::new(&sites, 2, 5, (60, 70), Half::Whole);
        replay(&mut quiet, 0, events.len(), &mut IdMap::default());
        let c = quiet.finish();
        assert_eq!(c.columns, vec![vec![0, 60, 0]; 5]);
        assert_eq!((c.peak, c.at_peak), ((60, 60), vec![0, 60, 0]));
    }
}
