//! heaplens report: the first view of a trace. It replays the events into per-stack counters
//! (`replay`: the live set, peak, temporaries, size bins), on the merged stream that
//! `heaplens-interpret` delivers, and builds the report from them: the summary and mprof's four
//! tables (memory leaks, allocation bins, direct allocation, call graph), as data
//! ([`model::Report`], serializable to JSON) or as text ([`render_text`]).
//!
//! ```no_run
//! let report = heaplens_report::analyze_file("app.hltrace".as_ref(), &Default::default())?;
//! print!("{}", heaplens_report::render_text::render(&report, &Default::default()));
//! # Ok::<(), heaplens_interpret::LoadError>(())
//! ```

#![warn(missing_docs)]

pub mod analyze;
pub mod budget;
pub mod cpu;
pub mod cxx;
pub mod diff;
pub mod lifetimes;
pub mod model;
pub mod peak;
pub mod render_text;
pub mod replay;
pub mod tables;
pub mod tree;

pub use analyze::{analyze, analyze_file, Options};
pub use model::Report;
