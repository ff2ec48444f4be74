//! `heaplens export`: the trace in another tool's format (see `heaplens-export`).

use std::io::{self, IsTerminal};

use heaplens_export::{export, Format, Metric, Options};

use crate::{ExportArgs, ExportFormat, ExportMetric};

/// Runs `heaplens export`. Errors (unreadable trace, unwritable output) come back as one line;
/// a damaged trace is exported as far as it reads, with a warning on stderr.
pub fn execute(a: &ExportArgs) -> anyhow::Result<()> {
    let opts = Options {
        format: match a.format {
            ExportFormat::Collapsed => Format::Collapsed,
            ExportFormat::Flamegraph => Format::Flamegraph,
            ExportFormat::PprofText => Format::PprofText,
            ExportFormat::Pprof => Format::Pprof,
            ExportFormat::Firefox => Format::Firefox,
            ExportFormat::Heaptrack => Format::Heaptrack,
            ExportFormat::Parquet => Format::Parquet,
        },
        metric: match a.metric {
            ExportMetric::AllocBytes => Metric::AllocBytes,
            ExportMetric::AllocCount => Metric::AllocCount,
            ExportMetric::InuseBytes => Metric::InuseBytes,
            ExportMetric::LeakedBytes => Metric::LeakedBytes,
            ExportMetric::LeakedCount => Metric::LeakedCount,
        },
        progress: io::stderr().is_terminal(),
    };
    let done = export(&a.trace, &a.output, &opts)?;
    for w in &done.warnings {
        eprintln!("heaplens: warning: {w}");
    }
    eprintln!("heaplens: wrote {} stacks to {}", done.stacks, a.output.display());
    Ok(())
}
