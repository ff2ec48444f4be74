//! The C++ tables' pass over the replay: allocations counted by stack, entry point and
//! requested size, everything the tables are built from once the stacks are symbolized.

use heaplens_interpret::view::{Block, View};
use heaplens_trace::Op;
use rustc_hash::FxHashMap as HashMap;

use crate::replay::Weights;

/// The entry-point families mtrace++ tells apart (its `m`, `c`, `r` records and `new`): every
/// form of `operator new` is `new`, of `operator new[]` is `new[]`, `reallocarray` is
/// `realloc`; the aligned C functions keep their names.
pub fn entry(op: Op) -> &'static str {
    use Op::*;
    match op {
        New | NewNothrow | NewAligned | NewAlignedNothrow => "new",
        NewArray | NewArrayNothrow | NewArrayAligned | NewArrayAlignedNothrow => "new[]",
        Realloc | ReallocArray => "realloc",
        other => other.label(),
    }
}

/// A view counting successful allocations (a reallocation's new block included, as the
/// report's allocation count does) by `(stack, entry point, requested size)`.
pub struct CxxCounts {
    weights: Weights,
    /// Weighted allocations (exact counts for a trace that recorded every allocation).
    pub counts: HashMap<(u32, &'static str, u64), f64>,
}

impl CxxCounts {
    /// An empty count for a trace sampled at `sample_rate` bytes (0: not sampled).
    pub fn new(sample_rate: u64) -> Self {
        CxxCounts { weights: Weights::new(sample_rate), counts: HashMap::default() }
    }
}

impl View for CxxCounts {
    fn allocation(&mut self, b: &Block) {
        *self.counts.entry((b.stack, entry(b.op), b.size)).or_default() += self.weights.of(b.size);
    }
}
