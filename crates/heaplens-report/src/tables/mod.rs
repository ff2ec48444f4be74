//! The tables of the report, one module each, all built from the per-stack counters of
//! [`crate::replay`] and the symbolized paths of [`heaplens_interpret::paths`].

pub mod bins;
pub mod callgraph;
pub mod direct;
pub mod leaks;
pub mod lifetimes;
pub mod profile;
pub mod summary;

use crate::replay::Replay;
use heaplens_interpret::paths::{FrameTable, Paths};

/// What the per-function tables are built from: `paths.get(i)` is the call path of
/// `replay.stacks[i]`.
#[derive(Clone, Copy)]
pub struct Inputs<'a> {
    /// Counters.
    pub replay: &'a Replay,
    /// Interned functions and sites.
    pub frames: &'a FrameTable,
    /// Call paths, innermost first.
    pub paths: &'a Paths,
    /// The process exec'd: every block live at the end went with its heap, none is a leak.
    pub replaced: bool,
}

impl Inputs<'_> {
    /// Whether the blocks of stack `i` live at the end are not leaks: a suppression covers its
    /// path, or an exec replaced the heap.
    pub fn suppressed(&self, i: usize) -> bool {
        self.replaced || self.paths.suppression(i).is_some()
    }
}

/// A weighted count as the report shows it: rounded to the nearest integer (counters are sums
/// of weights, see [`crate::replay`]; for traces that recorded everything they are exact).
pub fn count(x: f64) -> u64 {
    x.round() as u64
}

/// `part` as a percentage of `total` (0 when `total` is 0).
pub fn pct(part: u64, total: u64) -> f64 {
    if total == 0 {
        0.0
    } else {
        part as f64 * 100.0 / total as f64
    }
}
