//! heaplens analysis: reads a trace, symbolizes its call stacks (file:line, inlined frames,
//! demangled names), reduces its events into per-stack counters and builds the report: the
//! summary and mprof's four tables (memory leaks, allocation bins, direct allocation, call
//! graph), as data ([`model::Report`], serializable to JSON) or as text ([`render_text`]).
//!
//! ```no_run
//! let report = heaplens_analysis::analyze_file("app.hltrace".as_ref(), &Default::default())?;
//! print!("{}", heaplens_analysis::render_text::render(&report, &Default::default()));
//! # Ok::<(), heaplens_analysis::LoadError>(())
//! ```

#![warn(missing_docs)]

pub mod aggregated;
pub mod analyze;
mod arena;
mod budget;
mod chunk;
mod cpu_share;
mod decode;
mod heads;
mod live;
pub mod load;
mod merge;
pub mod model;
mod ondisk;
mod packed;
pub mod paths;
mod predecode;
pub mod progress;
pub mod render_text;
pub mod replay;
mod rows;
mod split;
pub mod symbolize;
pub mod tables;
pub mod view;

pub use analyze::{analyze, analyze_file, Options};
pub use load::{Health, LoadError, Trace};
pub use model::Report;
pub use symbolize::{ElfSymbolizer, Frame, MapSymbolizer, Symbolizer};
