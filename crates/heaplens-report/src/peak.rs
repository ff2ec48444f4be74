//! The bytes each allocation stack held at the peak: a view over the public replay
//! (`heaplens_interpret::view`), run as a second pass when the report is asked for them
//! ([`crate::Options::peak_by_stack`], which `heaplens diff` sets). The first pass found the
//! peak's height; this one follows the live bytes per stack and keeps them as they are the first
//! moment the total reaches that height, which is the peak's moment (mprof's and heaptrack's
//! "peak" is the first such moment too).

use heaplens_interpret::idmap::IdMap;
use heaplens_interpret::view::{Block, Release, View};

/// Live bytes per stack, snapshotted when the total first reaches the peak.
#[derive(Debug)]
pub struct PeakByStack {
    target: u64,
    total: u64,
    live: IdMap<u32, u64>,
    /// Bytes live per stack id at the peak, once the total reached it.
    pub at_peak: Option<IdMap<u32, u64>>,
}

impl PeakByStack {
    /// Follows the live bytes up to a peak of `peak_bytes` (the first pass's).
    pub fn new(peak_bytes: u64) -> Self {
        PeakByStack { target: peak_bytes, total: 0, live: IdMap::default(), at_peak: None }
    }

    fn release(&mut self, b: &Block) {
        if let Some(n) = self.live.get_mut(&b.stack) {
            *n = n.saturating_sub(b.size);
        }
        self.total = self.total.saturating_sub(b.size);
    }
}

impl View for PeakByStack {
    fn allocation(&mut self, b: &Block) {
        *self.live.entry(b.stack).or_default() += b.size;
        self.total += b.size;
        if self.at_peak.is_none() && self.total >= self.target {
            self.at_peak = Some(self.live.clone());
        }
    }
    fn deallocation(&mut self, _r: &Release, b: &Block) {
        self.release(b);
    }
    fn overwritten(&mut self, b: &Block) {
        self.release(b);
    }
}
