//! The replay of the trace so far, tallied for the screen (it grows with each round's events):
//! bytes in use over time, and per stack and per thread what is held now and what was
//! allocated.

use rustc_hash::FxHashMap;

use heaplens_interpret::view::{Block, Release, View};

/// Width of a step of the bytes-in-use series, in nanoseconds.
pub const STEP_NS: u64 = 100_000_000;

/// Steps of the series kept at most (a day and more): past it the oldest half goes. A screen
/// shows the last hundred or so; a damaged trace's time can jump by centuries.
pub const MAX_STEPS: usize = 1 << 20;

/// Per allocation stack.
#[derive(Debug, Clone, Copy, Default)]
pub struct StackTally {
    /// Bytes of its blocks still live.
    pub live_bytes: u64,
    /// Its blocks still live.
    pub live_blocks: u64,
    /// Bytes it allocated since recording started.
    pub allocated_bytes: u64,
    /// Allocations it made since recording started.
    pub allocations: u64,
    /// Bytes and blocks of its live blocks older than the threshold (leak candidates), and the
    /// oldest one's age in nanoseconds (set at the end of the replay).
    pub old_bytes: u64,
    /// See [`StackTally::old_bytes`].
    pub old_blocks: u64,
    /// See [`StackTally::old_bytes`].
    pub oldest_ns: u64,
}

/// Per thread.
#[derive(Debug, Clone, Copy, Default)]
pub struct ThreadTally {
    /// Allocations it made.
    pub allocations: u64,
    /// Bytes of the live blocks it allocated.
    pub live_bytes: u64,
}

/// The tally of one replay.
#[derive(Debug, Default)]
pub struct Tally {
    /// Blocks older than this (nanoseconds) at the end are leak candidates.
    pub old_after_ns: u64,
    /// Bytes in use now.
    pub in_use: u64,
    /// Blocks live now.
    pub blocks: u64,
    /// Most bytes in use at once.
    pub peak: u64,
    /// Allocations and bytes allocated.
    pub allocations: u64,
    /// See [`Tally::allocations`].
    pub allocated_bytes: u64,
    /// Frees of blocks allocated before recording started (or of no block).
    pub unmatched: u64,
    /// First and last event times (`CLOCK_MONOTONIC` ns; 0 before any).
    pub first_ts: u64,
    /// See [`Tally::first_ts`].
    pub last_ts: u64,
    /// Bytes in use at the end of each [`STEP_NS`] step since `first_ts`.
    pub series: Vec<u64>,
    /// By stack id (FxHash: two lookups per event, where SipHash was most of a round's time).
    pub stacks: FxHashMap<u32, StackTally>,
    /// By thread id.
    pub threads: FxHashMap<u32, ThreadTally>,
}

impl Tally {
    /// An empty tally whose leak candidates are blocks older than `old_after_ns`.
    pub fn new(old_after_ns: u64) -> Self {
        Tally { old_after_ns, ..Default::default() }
    }

    fn at(&mut self, ts: u64) {
        if self.first_ts == 0 {
            self.first_ts = ts;
        }
        self.last_ts = self.last_ts.max(ts);
        let step = self.step_of(ts);
        // Steps without events hold the level of the step before.
        let level = self.series.last().copied().unwrap_or(0);
        if self.series.len() <= step {
            self.series.resize(step + 1, level);
        }
    }

    /// The step of `ts`, the series moved on (its oldest steps dropped) so that it holds at
    /// most [`MAX_STEPS`].
    fn step_of(&mut self, ts: u64) -> usize {
        let step = ts.saturating_sub(self.first_ts) / STEP_NS;
        if step < MAX_STEPS as u64 {
            return step as usize;
        }
        let drop = step - (MAX_STEPS / 2) as u64;
        let level = self.series.last().copied().unwrap_or(0);
        self.series.drain(..(drop as usize).min(self.series.len()));
        if self.series.is_empty() {
            self.series.push(level);
        }
        self.first_ts = self.first_ts.saturating_add(drop.saturating_mul(STEP_NS));
        (ts.saturating_sub(self.first_ts) / STEP_NS).min(MAX_STEPS as u64 - 1) as usize
    }

    fn note_level(&mut self) {
        if let Some(last) = self.series.last_mut() {
            *last = self.in_use;
        }
        self.peak = self.peak.max(self.in_use);
    }

    fn release(&mut self, b: &Block) {
        self.in_use = self.in_use.saturating_sub(b.size);
        self.blocks = self.blocks.saturating_sub(1);
        let s = self.stacks.entry(b.stack).or_default();
        s.live_bytes = s.live_bytes.saturating_sub(b.size);
        s.live_blocks = s.live_blocks.saturating_sub(1);
        let t = self.threads.entry(b.tid).or_default();
        t.live_bytes = t.live_bytes.saturating_sub(b.size);
    }
}

impl View for Tally {
    fn allocation(&mut self, b: &Block) {
        self.at(b.ts);
        self.in_use += b.size;
        self.blocks += 1;
        self.allocations += 1;
        self.allocated_bytes += b.size;
        let s = self.stacks.entry(b.stack).or_default();
        s.live_bytes += b.size;
        s.live_blocks += 1;
        s.allocated_bytes += b.size;
        s.allocations += 1;
        let t = self.threads.entry(b.tid).or_default();
        t.allocations += 1;
        t.live_bytes += b.size;
        self.note_level();
    }

    fn deallocation(&mut self, r: &Release, b: &Block) {
        self.at(r.ts);
        self.release(b);
        self.note_level();
    }

    fn unmatched(&mut self, r: &Release) {
        self.at(r.ts);
        if r.addr != 0 {
            self.unmatched += 1;
        }
    }

    fn overwritten(&mut self, b: &Block) {
        self.release(b);
    }

    fn end(&mut self, live: &mut dyn Iterator<Item = &Block>) {
        self.mark_old(live, 0);
    }
}

impl Tally {
    /// Holds the level of the last step in the series up to `now` (`CLOCK_MONOTONIC` ns):
    /// a program that stopped allocating still holds its bytes while time goes on.
    pub fn extend_to(&mut self, now: u64) {
        if self.first_ts == 0 || now <= self.last_ts {
            return;
        }
        let step = self.step_of(now);
        let level = self.series.last().copied().unwrap_or(0);
        if self.series.len() <= step {
            self.series.resize(step + 1, level);
        }
    }

    /// Counts the blocks of `live` (the blocks live now) older than the threshold at `now`
    /// (`CLOCK_MONOTONIC` ns; the last event's time when later), per stack, in place of what
    /// an earlier call counted.
    pub fn mark_old(&mut self, live: &mut dyn Iterator<Item = &Block>, now: u64) {
        for s in self.stacks.values_mut() {
            (s.old_bytes, s.old_blocks, s.oldest_ns) = (0, 0, 0);
        }
        let now = self.last_ts.max(now);
        for b in live {
            let age = now.saturating_sub(b.ts);
            if age >= self.old_after_ns {
                let s = self.stacks.entry(b.stack).or_default();
                s.old_bytes += b.size;
                s.old_blocks += 1;
                s.oldest_ns = s.oldest_ns.max(age);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use heaplens_trace::Op;

    fn block(ts: u64, addr: u64, size: u64, stack: u32) -> Block {
        Block { ts, tid: 7, addr, size, usable: size, op: Op::Malloc, stack }
    }

    #[test]
    fn counts_what_is_held_and_what_is_old() {
        let mut t = Tally::new(1_000_000_000);
        t.allocation(&block(1_000_000_000, 0x10, 100, 1));
        t.allocation(&block(1_050_000_000, 0x20, 50, 2));
        let r = Release { ts: 1_250_000_000, tid: 7, addr: 0x20, op: Op::Free };
        t.deallocation(&r, &block(1_050_000_000, 0x20, 50, 2));
        t.allocation(&block(2_500_000_000, 0x30, 30, 2));
        t.unmatched(&Release { ts: 2_500_000_000, tid: 7, addr: 0x99, op: Op::Free });
        let live = [block(1_000_000_000, 0x10, 100, 1), block(2_500_000_000, 0x30, 30, 2)];
        t.end(&mut live.iter());
        assert_eq!((t.in_use, t.blocks, t.peak, t.unmatched), (130, 2, 150, 1));
        assert_eq!(t.series.len(), 16);
        assert_eq!((t.series[0], t.series[2], t.series[10], t.series[15]), (150, 100, 100, 130));
        let s1 = t.stacks[&1];
        assert_eq!((s1.live_bytes, s1.old_bytes, s1.old_blocks, s1.oldest_ns), (100, 100, 1, 1_500_000_000));
        let s2 = t.stacks[&2];
        assert_eq!((s2.live_bytes, s2.allocated_bytes, s2.allocations, s2.old_blocks), (30, 80, 2, 0));
        assert_eq!((t.threads[&7].allocations, t.threads[&7].live_bytes), (3, 130));
    }

    #[test]
    fn a_time_centuries_on_keeps_the_series_bounded() {
        let mut t = Tally::new(1_000_000_000);
        t.allocation(&block(1_000_000_000, 0x10, 100, 1));
        t.allocation(&block(1 << 62, 0x20, 50, 2));
        t.extend_to(u64::MAX);
        assert!(t.series.len() <= MAX_STEPS, "{}", t.series.len());
        assert_eq!(t.series.last().copied(), Some(150), "the level goes on");
    }
}
