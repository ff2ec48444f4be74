//! `heaplens diff BASE NEW`: what changed between two runs (see `heaplens_report::diff`).

use std::io::{self, IsTerminal};
use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use heaplens_report::{analyze_file, Options, Report};

use crate::attribution::AttributionArgs;
use crate::Format;

/// Arguments of `heaplens diff`.
#[derive(Args, Debug)]
pub struct DiffArgs {
    /// The trace of the run before (the base).
    #[arg(value_name = "BASE")]
    pub base: PathBuf,
    /// The trace of the run after, compared with the base.
    #[arg(value_name = "NEW")]
    pub new: PathBuf,
    /// Frames per call path compared (the innermost, from the function charged; at least 1).
    #[arg(long, default_value_t = 5, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub path_depth: u64,
    /// Rows shown per table (0 = all).
    #[arg(long, default_value_t = 20, value_name = "N")]
    pub top: usize,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// How allocations are charged to functions (as in `heaplens report`).
    #[command(flatten)]
    pub attribution: AttributionArgs,
}

/// The options both runs are analysed with: the report's, with the profile a diff compares.
pub fn options(attribution: &AttributionArgs, path_depth: usize) -> anyhow::Result<Options> {
    Ok(Options {
        leak_depth: path_depth.max(1),
        progress: io::stderr().is_terminal(),
        attribution: attribution.rule()?,
        profile: true,
        // Matched by whole names: instantiations of one template that changed in opposite
        // directions would cancel out under one elided name (the text elides where it can).
        naming: heaplens_interpret::paths::Naming { full_names: true, ..Default::default() },
        ..Options::default()
    })
}

/// Analyses one run for a comparison, saying on stderr what is wrong with a damaged trace: a
/// process, or the process tree whose first trace it is (`--follow-children`), summed as
/// `heaplens report` sums it.
pub fn analyze(trace: &std::path::Path, opts: &Options) -> anyhow::Result<Report> {
    analyze_saying(trace, opts, true)
}

/// As [`analyze`]; with `warn` false, a damaged trace is left to the caller to say (`check`
/// refuses one in a line of its own).
pub fn analyze_saying(trace: &std::path::Path, opts: &Options, warn: bool) -> anyhow::Result<Report> {
    let family = heaplens_report::tree::family(trace);
    if family.len() == 1 {
        let r = analyze_file(trace, opts)?;
        if warn {
            crate::report::warn_if_damaged(&r);
        }
        return Ok(r);
    }
    eprintln!(
        "heaplens: note: {} is the first trace of a process tree of {} processes: they are summed",
        trace.display(),
        family.len()
    );
    let reports = crate::report::analyze_tree(&family, opts)?;
    Ok(heaplens_report::tree::merge(&reports).merged)
}

/// Runs `heaplens diff`.
pub fn execute(a: &DiffArgs) -> anyhow::Result<()> {
    let opts = options(&a.attribution, a.path_depth as usize)?;
    let base = analyze(&a.base, &opts)?;
    let new = analyze(&a.new, &opts)?;
    let d = heaplens_report::diff::diff(&base, &new);
    let out = match a.format {
        Format::Text => heaplens_report::diff::render::render(&d, a.top),
        Format::Json => {
            let mut s = serde_json::to_string_pretty(&d).context("cannot serialize the diff")?;
            s.push('\n');
            s
        }
    };
    crate::report::print(&out)
}
