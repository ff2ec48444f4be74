//! The pipeline: replay the events, symbolize the stacks that allocated, build the tables.

use std::path::Path;

use crate::load::{LoadError, Trace};
use crate::model::Report;
use crate::paths::resolve;
use crate::replay::replay;
use crate::symbolize::{ElfSymbolizer, Symbolizer};
use crate::tables::{bins, callgraph, direct, leaks, summary, Inputs};

/// Choices that change the numbers of the report (not just its rendering).
#[derive(Debug, Clone)]
pub struct Options {
    /// Frames kept per leak-table path (mprof: 5).
    pub leak_depth: usize,
    /// Tell call sites within a function apart in the leak table.
    pub call_sites: bool,
    /// Show progress bars on stderr (only drawn when it is a terminal).
    pub progress: bool,
}

impl Default for Options {
    fn default() -> Self {
        Self { leak_depth: 5, call_sites: false, progress: false }
    }
}

/// Analyses a loaded trace with the given symbolizer.
pub fn analyze(trace: &Trace, sym: &mut dyn Symbolizer, opts: &Options) -> Report {
    let r = match &trace.aggregate {
        Some(a) => crate::aggregated::replay(a, &trace.clock),
        None => replay(trace.events()),
    };
    let ids: Vec<u32> = r.stacks.iter().map(|s| s.stack).collect();
    let (frames, paths) = resolve(&trace.stacks, &ids, sym, opts.progress);
    let inp = Inputs { replay: &r, frames: &frames, paths: &paths };
    let mut info = summary::trace_info(trace, &r, paths.incomplete);
    info.symbol_warnings = sym.warnings();
    Report {
        trace: info,
        process: summary::process_info(trace),
        summary: summary::summary(trace, &r),
        leaks: leaks::leaks(inp, opts.leak_depth, opts.call_sites),
        bins: bins::bins(&r.bins),
        direct: direct::direct(inp),
        call_graph: callgraph::call_graph(inp),
    }
}

/// Loads the trace at `path` and analyses it, symbolizing from the module files the trace
/// names (they must still be on this machine for names to resolve).
///
/// # Errors
/// [`LoadError`] when the file cannot be read or is not a heaplens trace.
pub fn analyze_file(path: &Path, opts: &Options) -> Result<Report, LoadError> {
    let trace = Trace::load(path, opts.progress)?;
    let mut sym = ElfSymbolizer::new(&trace.modules);
    Ok(analyze(&trace, &mut sym, opts))
}
