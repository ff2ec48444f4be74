//! `heaplens export`: the trace in another tool's format (see `heaplens-export`).

use std::io::{self, IsTerminal};

use heaplens_export::{default_metric, export, export_dataset, export_differential, Format, Metric, Options};
use heaplens_interpret::names::for_terminal;

use crate::{ExportArgs, ExportFormat, ExportMetric};

/// Runs `heaplens export`. Errors (unreadable trace, unwritable output) come back as one line;
/// a damaged trace is exported as far as it reads, with a warning on stderr.
pub fn execute(a: &ExportArgs) -> anyhow::Result<()> {
    let format = match a.format {
        ExportFormat::Collapsed => Format::Collapsed,
        ExportFormat::Flamegraph => Format::Flamegraph,
        ExportFormat::Icicle => Format::Icicle,
        ExportFormat::PprofText => Format::PprofText,
        ExportFormat::Pprof => Format::Pprof,
        ExportFormat::Firefox => Format::Firefox,
        ExportFormat::Heaptrack => Format::Heaptrack,
        ExportFormat::Parquet => Format::Parquet,
    };
    let metric = match a.metric {
        Some(ExportMetric::AllocBytes) => Metric::AllocBytes,
        Some(ExportMetric::AllocCount) => Metric::AllocCount,
        Some(ExportMetric::InuseBytes) => Metric::InuseBytes,
        Some(ExportMetric::LeakedBytes) => Metric::LeakedBytes,
        Some(ExportMetric::LeakedCount) => Metric::LeakedCount,
        Some(ExportMetric::Cpu) => Metric::CpuSamples,
        // A --cpu-only trace has samples and no allocations: the formats that hold samples
        // export them (the others keep their allocation default, and write what there is).
        None if matches!(format, Format::Collapsed | Format::Flamegraph | Format::Icicle | Format::Pprof) => {
            default_metric(&a.trace)
        }
        None => Metric::AllocBytes,
    };
    let opts = Options { format, metric, progress: io::stderr().is_terminal() };
    let (done, wrote) = match (&a.dataset, &a.output) {
        (Some(_), _) if a.base.is_some() => anyhow::bail!("--base is for collapsed, flamegraph and icicle"),
        (None, Some(out)) if a.base.is_some() => {
            let base = a.base.as_deref().expect("checked");
            (export_differential(base, &a.trace, out, &opts)?, out.display().to_string())
        }
        (Some(dir), _) => {
            if format != Format::Parquet {
                anyhow::bail!("--dataset is for --format parquet");
            }
            let (done, part) = export_dataset(&a.trace, dir, a.host.as_deref(), &opts)?;
            (done, format!("{} (partition {})", dir.display(), part.display()))
        }
        (None, _) if a.host.is_some() => anyhow::bail!("--host is for --dataset"),
        (None, Some(out)) => (export(&a.trace, out, &opts)?, out.display().to_string()),
        (None, None) => unreachable!("clap requires -o or --dataset"),
    };
    for w in &done.warnings {
        eprintln!("heaplens: warning: {}", for_terminal(w));
    }
    eprintln!("heaplens: wrote {} stacks to {}", done.stacks, for_terminal(&wrote));
    Ok(())
}
