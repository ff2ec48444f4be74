//! Counters per allocation stack, from one pass of the replay (two for the bytes in use at the
//! peak): what every export that holds one number per stack writes.

use heaplens_interpret::idmap::IdMap;
use heaplens_interpret::view::{Block, Release, View};

/// What one allocation stack (a node of the trace's stack trie) allocated.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StackTotals {
    /// Successful allocations (a reallocation's new block counts as one).
    pub allocs: u64,
    /// Bytes they requested.
    pub bytes: u64,
    /// Blocks still live at the end of the trace.
    pub leaked: u64,
    /// Bytes still live at the end.
    pub leaked_bytes: u64,
    /// Bytes live at the peak (the first moment the live bytes of the whole process were
    /// highest); filled by [`PeakLive`].
    pub peak_bytes: u64,
    /// Blocks live at the peak.
    pub peak_blocks: u64,
}

/// Counts allocations per stack and, at the end, what each stack left live; also finds the
/// peak (by its position in the event stream), for [`PeakLive`].
#[derive(Debug, Default)]
pub struct Totals {
    /// Counters by (stack id, allocating thread id).
    pub stacks: IdMap<(u32, u32), StackTotals>,
    /// Events seen (allocations, deallocations, failed and unmatched calls).
    pub events: u64,
    live_bytes: u64,
    /// The highest live bytes, and the number of events seen when it was first reached.
    pub peak: (u64, u64),
}

impl View for Totals {
    fn allocation(&mut self, b: &Block) {
        self.events += 1;
        let s = self.stacks.entry((b.stack, b.tid)).or_default();
        s.allocs += 1;
        s.bytes += b.size;
        self.live_bytes += b.size;
        if self.live_bytes > self.peak.0 {
            self.peak = (self.live_bytes, self.events);
        }
    }
    fn deallocation(&mut self, _r: &Release, b: &Block) {
        self.events += 1;
        self.live_bytes -= b.size;
    }
    fn failed_allocation(&mut self, _b: &Block) {
        self.events += 1;
    }
    fn unmatched(&mut self, _r: &Release) {
        self.events += 1;
    }
    fn overwritten(&mut self, b: &Block) {
        // The block's release was not seen: it is no longer live.
        self.live_bytes -= b.size;
    }
    fn end(&mut self, live: &mut dyn Iterator<Item = &Block>) {
        for b in live {
            let s = self.stacks.entry((b.stack, b.tid)).or_default();
            s.leaked += 1;
            s.leaked_bytes += b.size;
        }
    }
}

/// The second pass for the bytes in use at the peak: the live bytes and blocks of every stack
/// once the `at`th event (as [`Totals::peak`] counts) has been replayed.
#[derive(Debug)]
pub struct PeakLive {
    at: u64,
    events: u64,
    live: IdMap<u32, (u64, u64)>,
    /// The live (bytes, blocks) per stack at the peak, once reached.
    pub snapshot: Option<IdMap<u32, (u64, u64)>>,
}

impl PeakLive {
    /// Snapshots after event number `at` (1-based, as [`Totals::peak`] gives it).
    pub fn new(at: u64) -> Self {
        PeakLive { at, events: 0, live: IdMap::default(), snapshot: None }
    }

    fn step(&mut self) {
        self.events += 1;
        if self.events == self.at {
            self.snapshot = Some(self.live.clone());
        }
    }
}

impl View for PeakLive {
    fn allocation(&mut self, b: &Block) {
        let e = self.live.entry(b.stack).or_default();
        e.0 += b.size;
        e.1 += 1;
        self.step();
    }
    fn deallocation(&mut self, _r: &Release, b: &Block) {
        if let Some(e) = self.live.get_mut(&b.stack) {
            e.0 -= b.size;
            e.1 -= 1;
        }
        self.step();
    }
    fn failed_allocation(&mut self, _b: &Block) {
        self.step();
    }
    fn unmatched(&mut self, _r: &Release) {
        self.step();
    }
    fn overwritten(&mut self, b: &Block) {
        if let Some(e) = self.live.get_mut(&b.stack) {
            e.0 -= b.size;
            e.1 -= 1;
        }
    }
}
