//! Block lifetimes per allocation stack (issue 18, item 3): a view over the public replay
//! (`heaplens_interpret::view`), run as a second pass when the report is asked for them.
//!
//! A lifetime is measured twice: in nanoseconds, and in *steps*, the allocations the allocating
//! thread made between the block's allocation and its release. A block released before its
//! thread's next allocation (0 steps) is *short-lived*, heaptrack's "temporary" allocation.

use heaplens_interpret::idmap::IdMap;
use heaplens_interpret::view::{Block, Release, View};

/// Buckets of a lifetime histogram: bucket 0 holds 0, bucket `k` holds `2^(k-1)..2^k`.
pub const BUCKETS: usize = 65;

/// The bucket of `v`.
pub fn bucket(v: u64) -> usize {
    64 - v.leading_zeros() as usize
}

/// The smallest value of bucket `k`.
pub fn bucket_floor(k: usize) -> u64 {
    if k == 0 {
        0
    } else {
        1 << (k - 1)
    }
}

/// A histogram over [`BUCKETS`], holding only the buckets that counted something (sorted):
/// a stack's blocks fill a few, and a trace of 145,000 stacks made the dense ones 300 MB.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Histogram(Vec<(u8, u64)>);

impl Histogram {
    /// Counts one value in bucket `k`.
    pub fn count(&mut self, k: usize) {
        self.add(k, 1);
    }

    fn add(&mut self, k: usize, n: u64) {
        let k = k.min(BUCKETS - 1) as u8;
        match self.0.binary_search_by_key(&k, |e| e.0) {
            Ok(i) => self.0[i].1 = self.0[i].1.saturating_add(n),
            Err(i) => self.0.insert(i, (k, n)),
        }
    }

    /// Adds `o`'s counts.
    pub fn merge(&mut self, o: &Histogram) {
        for &(k, n) in &o.0 {
            self.add(usize::from(k), n);
        }
    }

    /// The counts of buckets `0..=` the last that counted anything.
    pub fn dense(&self) -> Vec<u64> {
        let len = self.0.last().map_or(0, |e| usize::from(e.0) + 1);
        let mut v = vec![0; len];
        for &(k, n) in &self.0 {
            v[usize::from(k)] = n;
        }
        v
    }
}

/// Lifetimes of the blocks of one allocation stack.
#[derive(Debug, Clone, Default)]
pub struct StackLifetimes {
    /// Blocks released.
    pub freed: u64,
    /// Of them, released before their thread's next allocation.
    pub short_lived: u64,
    /// Lifetimes in nanoseconds, by [`bucket`].
    pub ns: Histogram,
    /// Lifetimes in steps, by [`bucket`].
    pub steps: Histogram,
    /// The longest lifetime, nanoseconds.
    pub max_ns: u64,
    /// Blocks still live at the end of the trace.
    pub live_at_exit: u64,
}

impl StackLifetimes {
    /// Adds `o` (another stack of the same call site).
    pub fn add(&mut self, o: &StackLifetimes) {
        self.freed += o.freed;
        self.short_lived += o.short_lived;
        self.ns.merge(&o.ns);
        self.steps.merge(&o.steps);
        self.max_ns = self.max_ns.max(o.max_ns);
        self.live_at_exit += o.live_at_exit;
    }
}

/// The view: lifetimes per stack id.
#[derive(Default)]
pub struct Lifetimes {
    /// By allocation stack id.
    pub stacks: IdMap<u32, StackLifetimes>,
    /// Allocations made so far, per thread.
    made: IdMap<u32, u64>,
    /// The allocating thread's count of allocations before each live block's.
    step_of: IdMap<u64, u64>,
}

impl View for Lifetimes {
    fn allocation(&mut self, b: &Block) {
        let n = self.made.entry(b.tid).or_default();
        self.step_of.insert(b.addr, *n);
        *n += 1;
    }

    fn deallocation(&mut self, r: &Release, b: &Block) {
        let at = self.step_of.remove(&b.addr).unwrap_or(0);
        let steps = self.made.get(&b.tid).copied().unwrap_or(0).saturating_sub(at + 1);
        let ns = r.ts.saturating_sub(b.ts);
        let s = self.stacks.entry(b.stack).or_default();
        s.freed += 1;
        s.short_lived += u64::from(steps == 0);
        s.ns.count(bucket(ns));
        s.steps.count(bucket(steps));
        s.max_ns = s.max_ns.max(ns);
    }

    fn overwritten(&mut self, b: &Block) {
        self.step_of.remove(&b.addr);
    }

    fn end(&mut self, live: &mut dyn Iterator<Item = &Block>) {
        for b in live {
            self.stacks.entry(b.stack).or_default().live_at_exit += 1;
        }
    }
}
