//! Heap over time (what massif and heaptrack's GUI show): bytes in use per column of time,
//! stacked by the top call sites, the peak marked and its top holders named.

use heaplens_interpret::idmap::IdMap;
use heaplens_interpret::view::{Block, Release, View};

/// Bytes in use per call site over time, in columns.
pub struct Timeline<'a> {
    /// Per stack, its site's index (stacks of no top site count in the last slot, "the rest").
    site_of: &'a IdMap<u32, usize>,
    sites: usize,
    /// Bytes in use per site, the rest last.
    live: Vec<i64>,
    total: i64,
    /// The window, `CLOCK_MONOTONIC` ns, and its columns.
    t0: u64,
    t1: u64,
    ns_per_col: f64,
    /// Per column: the highest total seen in it and the split at that moment.
    high: Vec<Option<(i64, Vec<i64>)>>,
    /// The highest total of the window and when.
    pub peak: (i64, u64),
    /// The split at the peak.
    pub at_peak: Vec<i64>,
}

impl<'a> Timeline<'a> {
    /// A timeline of `width` columns over `[t0, t1]` for `sites` top call sites.
    pub fn new(site_of: &'a IdMap<u32, usize>, sites: usize, width: usize, (t0, t1): (u64, u64)) -> Timeline<'a> {
        Timeline {
            site_of,
            sites,
            live: vec![0; sites + 1],
            total: 0,
            t0,
            t1,
            ns_per_col: (t1.saturating_sub(t0)).max(1) as f64 / width as f64,
            high: vec![None; width],
            peak: (0, t0),
            at_peak: vec![0; sites + 1],
        }
    }

    fn event(&mut self, ts: u64, stack: u32, delta: i64) {
        let site = self.site_of.get(&stack).copied().unwrap_or(self.sites);
        self.live[site] += delta;
        self.total += delta;
        if ts < self.t0 || ts > self.t1 {
            return;
        }
        let col = (((ts - self.t0) as f64 / self.ns_per_col) as usize).min(self.high.len() - 1);
        if self.total > self.peak.0 {
            self.peak = (self.total, ts);
            self.at_peak.copy_from_slice(&self.live);
        }
        match &mut self.high[col] {
            Some((h, split)) => {
                if self.total > *h {
                    *h = self.total;
                    split.copy_from_slice(&self.live);
                }
            }
            slot => *slot = Some((self.total, self.live.clone())),
        }
    }

    /// Per column, bytes in use per site (the rest last); a column without events keeps the
    /// split of the column before it.
    pub fn columns(&self) -> Vec<Vec<i64>> {
        let mut last = vec![0; self.sites + 1];
        self.high
            .iter()
            .map(|h| {
                if let Some((_, split)) = h {
                    last = split.clone();
                }
                last.clone()
            })
            .collect()
    }
}

impl View for Timeline<'_> {
    fn allocation(&mut self, b: &Block) {
        if b.addr != 0 {
            self.event(b.ts, b.stack, b.size as i64);
        }
    }

    fn deallocation(&mut self, r: &Release, b: &Block) {
        self.event(r.ts, b.stack, -(b.size as i64));
    }

    fn overwritten(&mut self, b: &Block) {
        self.event(b.ts, b.stack, -(b.size as i64));
    }
}
