//! heaplens interpret: everything between a trace file and a view. It reads a trace (`load`),
//! decodes its event payloads (`decode`), merges the threads' events in time order in bounded
//! memory (`merge`), and symbolizes call stacks (`symbolize`, `paths`). Views consume it at one
//! of two levels:
//!
//! - [`view`]: allocations and deallocations in time order, each deallocation with the
//!   allocation it ends, and the blocks live at the end: what exports, pictures and most
//!   tables need;
//! - [`merge::Merger`] with a [`merge::Consumer`]: the raw merged events a run of one thread at
//!   a time, for a view that keeps its own live set and replays in parallel (the report's
//!   counters, in `heaplens-report`).
//!
//! It depends on `heaplens-trace` only, and knows no view.

#![warn(missing_docs)]

pub mod cpu;
pub mod decode;
pub mod elide;
pub mod follow;
pub mod idmap;
pub mod live;
pub mod load;
pub mod merge;
pub mod names;
pub mod paths;
pub mod progress;
pub mod scan;
pub mod split;
pub mod suppress;
pub mod symbolize;
pub mod threaded;
pub mod units;
pub mod view;

pub use load::{Health, LoadError, Trace};
pub use symbolize::{ElfSymbolizer, Frame, MapSymbolizer, Symbolizer};
