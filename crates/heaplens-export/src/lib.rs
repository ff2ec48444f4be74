//! heaplens export: a trace written in the formats of the tools people already use, from the
//! one replay every view reads (`heaplens_interpret::view`), in memory that does not grow with
//! the trace.
//!
//! | format | what opens it | CPU samples (`heaplens run --cpu`) |
//! |---|---|---|
//! | [`Format::Collapsed`] | flame graph tools: Brendan Gregg's folded stacks, `stack count` | with [`Metric::CpuSamples`]: stacks weighted by samples |
//! | [`Format::Flamegraph`] | a browser: an interactive SVG flame graph (inferno) | with [`Metric::CpuSamples`] |
//! | [`Format::PprofText`] | `google-pprof --text PROGRAM OUT`: the legacy heap profile text | no |
//! | [`Format::Pprof`] | `go tool pprof OUT`, pprof.me, Grafana Pyroscope: gzipped profile.proto | with [`Metric::CpuSamples`]: a CPU profile (`samples`/count, `cpu`/nanoseconds) |
//! | [`Format::Parquet`] | DuckDB, Spark, DataFusion: events, stacks and frames as Parquet tables; with [`export_dataset`], one partition of a data set of many traces | no |
//! | [`Format::Heaptrack`] | `heaptrack_print OUT`, `heaptrack_gui OUT` | no |
//! | [`Format::Firefox`] | profiler.firefox.com (Load a profile from file): allocation samples, memory track | always: each thread's samples on its track |
//!
//! Without [`Metric::CpuSamples`] the formats hold the allocations; the Firefox profile holds
//! both whatever the metric. [`default_metric`] picks CPU samples for a trace recorded with
//! `heaplens run --cpu-only`.
//!
//! ```no_run
//! use heaplens_export::{export, Format, Metric, Options};
//! let opts = Options { format: Format::Flamegraph, metric: Metric::AllocBytes, progress: false };
//! let done = export("app.hltrace".as_ref(), "app.svg".as_ref(), &opts)?;
//! println!("{} stacks, {} bytes", done.stacks, done.total);
//! # Ok::<(), heaplens_export::ExportError>(())
//! ```

#![warn(missing_docs)]

mod collapsed;
mod differential;
mod firefox;
mod heaptrack;
#[cfg(feature = "parquet")]
mod parquet;
mod pprof;
mod pprof_text;
mod prune;
pub mod totals;

use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use heaplens_interpret::cpu::CpuSamples;
use heaplens_interpret::paths::Naming;
use heaplens_interpret::view::replay_with_progress;
use heaplens_interpret::{LoadError, Trace};

use crate::totals::{PeakLive, StackTotals, Totals};

/// The export formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Folded stacks: one line per stack, `outer;...;inner count`, outermost frame first.
    Collapsed,
    /// An SVG flame graph of the folded stacks.
    Flamegraph,
    /// The flame graph drawn top down (an icicle graph, inferno's inverted mode): the program's
    /// entry at the top, so that a deep graph shown in a small frame opens on its widest
    /// frames rather than on empty space.
    Icicle,
    /// The legacy pprof heap profile: in-use (at exit) and allocated objects and bytes per
    /// stack of return addresses, and the module map for symbolizing them.
    PprofText,
    /// pprof's profile.proto, gzipped: the four heap sample types, symbolized locations with
    /// lines and inlined functions, mappings with build ids, a `thread` label per sample. With
    /// [`Metric::CpuSamples`], a CPU profile instead: sample types `samples`/count and
    /// `cpu`/nanoseconds, the sampling period in nanoseconds of CPU time.
    Pprof,
    /// The Firefox Profiler's processed profile (JSON): every allocation and deallocation as
    /// a native allocation sample, and a memory counter track; when the trace holds CPU
    /// samples, each sampled thread's samples on its own track (whatever the metric).
    Firefox,
    /// heaptrack's data file, for `heaptrack_print` and `heaptrack_gui` (zstd-compressed when
    /// the output's name ends in `.zst`, as heaptrack's own).
    Heaptrack,
    /// A directory of Parquet files (events, stacks, frames) for DuckDB, Spark, DataFusion.
    Parquet,
}

/// The number each stack gets, for the formats that hold one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Metric {
    /// Bytes allocated (requested sizes).
    #[default]
    AllocBytes,
    /// Allocations.
    AllocCount,
    /// Bytes live at the peak (the first moment the process's live bytes were highest).
    InuseBytes,
    /// Bytes still live at the end of the trace.
    LeakedBytes,
    /// Blocks still live at the end.
    LeakedCount,
    /// CPU-time samples (`heaplens run --cpu` or `--cpu-only`), counted in samples: the folded
    /// stacks and flame graph weight each sampled stack by its samples, and [`Format::Pprof`]
    /// writes a CPU profile. The other formats cannot hold it (but [`Format::Firefox`] holds the
    /// samples always).
    CpuSamples,
}

impl Metric {
    /// This metric of one stack's allocation totals (0 for [`Metric::CpuSamples`], which is no
    /// allocation counter).
    pub fn of(self, t: &StackTotals) -> u64 {
        match self {
            Metric::CpuSamples => 0,
            Metric::AllocBytes => t.bytes,
            Metric::AllocCount => t.allocs,
            Metric::InuseBytes => t.peak_bytes,
            Metric::LeakedBytes => t.leaked_bytes,
            Metric::LeakedCount => t.leaked,
        }
    }

    /// What it counts (the flame graph's unit).
    pub fn unit(self) -> &'static str {
        match self {
            Metric::AllocBytes | Metric::InuseBytes | Metric::LeakedBytes => "bytes",
            Metric::AllocCount | Metric::LeakedCount => "blocks",
            Metric::CpuSamples => "samples",
        }
    }
}

/// The metric an export of the trace at `path` takes when none is asked for:
/// [`Metric::CpuSamples`] for a trace recorded with `heaplens run --cpu-only` (it holds no
/// allocations), else [`Metric::AllocBytes`].
pub fn default_metric(path: &Path) -> Metric {
    if heaplens_interpret::cpu::recorded_cpu_only(path) {
        Metric::CpuSamples
    } else {
        Metric::AllocBytes
    }
}

/// What to export.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// The format.
    pub format: Format,
    /// The number per stack for the collapsed stacks and the flame graph. The pprof profile
    /// holds its own four heap counters, or with [`Metric::CpuSamples`] is a CPU profile; the
    /// other formats ignore it, except that [`Metric::CpuSamples`] is an error for those that
    /// cannot hold samples.
    pub metric: Metric,
    /// Show progress bars on stderr (drawn only when it is a terminal).
    pub progress: bool,
}

/// What an export wrote.
#[derive(Debug, Clone, Default)]
pub struct Exported {
    /// Stacks written (for Firefox: distinct allocation stacks plus distinct sample stacks).
    pub stacks: usize,
    /// The sum of the metric over them (for pprof text and the heap pprof: the bytes allocated;
    /// for [`Metric::CpuSamples`]: the samples; for Firefox: the bytes allocated).
    pub total: u64,
    /// Problems worth a line on stderr: a damaged trace (what could be read was exported),
    /// symbols that could not be found.
    pub warnings: Vec<String>,
}

/// Why an export failed.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    /// The trace could not be read.
    #[error(transparent)]
    Load(#[from] LoadError),
    /// This build cannot write the format, or the format cannot hold the metric.
    #[error("this heaplens cannot export {0}")]
    Unsupported(&'static str),
    /// CPU samples were asked for and the trace holds none.
    #[error("the trace holds no CPU samples (record it with heaplens run --cpu)")]
    NoSamples,
    /// The output could not be written.
    #[error("cannot write {path}: {reason}")]
    Write {
        /// The output file.
        path: PathBuf,
        /// What went wrong.
        reason: std::io::Error,
    },
}

/// Exports the trace at `trace` to `out`, replaced whole when the export succeeds and left as it
/// was when it fails (see `heaplens_output`; a device such as `/dev/null` is written in place).
///
/// # Errors
/// [`ExportError::Load`] when the trace cannot be read at all (a damaged one is exported as far
/// as it reads, with a warning), [`ExportError::Write`] when `out` cannot be written or is the
/// trace itself (the same file, through a link too).
///
/// With [`Metric::CpuSamples`]: [`ExportError::NoSamples`] when the trace holds no CPU samples,
/// [`ExportError::Unsupported`] for pprof text, heaptrack and Parquet.
pub fn export(trace: &Path, out: &Path, opts: &Options) -> Result<Exported, ExportError> {
    if opts.metric == Metric::CpuSamples {
        match opts.format {
            Format::Collapsed | Format::Flamegraph | Format::Icicle | Format::Pprof => {
                return export_cpu(trace, out, opts)
            }
            Format::Firefox => {}
            Format::PprofText => {
                return Err(ExportError::Unsupported("CPU samples as pprof text (use --format pprof)"))
            }
            Format::Heaptrack => return Err(ExportError::Unsupported("CPU samples in heaptrack's format")),
            Format::Parquet => return Err(ExportError::Unsupported("CPU samples as Parquet")),
        }
    }
    if opts.format == Format::Firefox {
        return export_firefox(trace, out, opts);
    }
    if opts.format == Format::Heaptrack {
        return export_heaptrack(trace, out, opts);
    }
    if opts.format == Format::Parquet {
        #[cfg(feature = "parquet")]
        return parquet::export(trace, out, opts);
        #[cfg(not(feature = "parquet"))]
        return Err(ExportError::Unsupported("parquet (built without the `parquet` feature)"));
    }
    let (t, by_thread) = heap_totals(trace, opts)?;
    let stacks = by_stack(&by_thread);
    let mut done = Exported { warnings: damage(&t), ..Exported::default() };
    let write_err = |reason| ExportError::Write { path: out.into(), reason };
    let output = heaplens_output::Output::create(out, &[trace]).map_err(write_err)?;
    let mut w = BufWriter::new(output.file().map_err(write_err)?);
    write_heap(&mut w, trace, &t, (&by_thread, &stacks), opts, &mut done)
        .and_then(|()| w.flush())
        .and_then(|()| output.commit())
        .map_err(write_err)?;
    Ok(done)
}

/// Exports the change from the run traced at `base` to the one at `trace` into `out`: with
/// [`Format::Collapsed`], differential folded stacks (`stack base new` per line, as
/// `difffolded.pl` writes them); with [`Format::Flamegraph`] or [`Format::Icicle`], a
/// differential flame graph (inferno's: the new run's widths, grown frames red, shrunk blue).
/// Stacks match by their symbolized frames, so two builds of a program compare. The metric is
/// any of the allocation metrics. `out` appears whole or not at all, as with [`export`].
///
/// # Errors
/// As [`export`] for either trace; [`ExportError::Unsupported`] for the other formats and for
/// [`Metric::CpuSamples`].
pub fn export_differential(base: &Path, trace: &Path, out: &Path, opts: &Options) -> Result<Exported, ExportError> {
    if !matches!(opts.format, Format::Collapsed | Format::Flamegraph | Format::Icicle) {
        return Err(ExportError::Unsupported("a comparison with --base in this format (use collapsed, flamegraph or icicle; for pprof, export both and use pprof -diff_base)"));
    }
    if opts.metric == Metric::CpuSamples {
        return Err(ExportError::Unsupported("a comparison of CPU samples"));
    }
    let mut done = Exported::default();
    let mut folded = Vec::with_capacity(2);
    for t in [base, trace] {
        let (loaded, by_thread) = heap_totals(t, opts)?;
        done.warnings.extend(damage(&loaded).into_iter().map(|w| format!("{}: {w}", t.display())));
        // Whole names: instantiations of one template that changed in opposite directions
        // would cancel out under one elided name.
        let naming = Naming { full_names: true, ..Naming::default() };
        let (lines, warnings) = collapsed::lines(t, &loaded, &by_stack(&by_thread), opts.metric, opts.progress, naming);
        done.warnings.extend(warnings);
        folded.push(lines);
    }
    let lines = differential::join(&folded[0], &folded[1]);
    done.stacks = lines.len();
    done.total = lines.iter().map(|l| l.2).sum();
    let write_err = |reason| ExportError::Write { path: out.into(), reason };
    let output = heaplens_output::Output::create(out, &[base, trace]).map_err(write_err)?;
    let mut w = BufWriter::new(output.file().map_err(write_err)?);
    match opts.format {
        Format::Collapsed => differential::write(&mut w, &lines),
        _ => differential::flamegraph(&mut w, &lines, opts.metric, (base, trace), opts.format == Format::Icicle),
    }
    .and_then(|()| w.flush())
    .and_then(|()| output.commit())
    .map_err(write_err)?;
    Ok(done)
}

/// Exports the trace at `trace` as Parquet into the Hive-partitioned data set `dir` (created if
/// missing), where the traces of many processes and machines are one table each:
/// `DIR/{events,stacks,frames}/host=H/program=P/pid=N/part-0.parquet`, with the tables of
/// [`Format::Parquet`]. `host` is the machine that recorded the trace (traces do not say; `None`
/// is this machine's name); the program is the executable's file name. Partition values are
/// percent-encoded as Hive does, so that any program name is one path component.
///
/// The partition of the same host, program and pid is replaced whole (written beside, then
/// swapped in); the others are untouched. Returns what was written and the partition's path
/// under each table's directory.
///
/// # Errors
/// As [`export`]; [`ExportError::Write`] also when the partition to replace holds files other
/// than Parquet (left as it was); [`ExportError::Unsupported`] in a build without the `parquet`
/// feature, and for [`Metric::CpuSamples`].
pub fn export_dataset(
    trace: &Path,
    dir: &Path,
    host: Option<&str>,
    opts: &Options,
) -> Result<(Exported, PathBuf), ExportError> {
    if opts.metric == Metric::CpuSamples {
        return Err(ExportError::Unsupported("CPU samples as Parquet"));
    }
    #[cfg(feature = "parquet")]
    return parquet::export_partition(trace, dir, host, opts);
    #[cfg(not(feature = "parquet"))]
    {
        let _ = (trace, dir, host);
        Err(ExportError::Unsupported("parquet (built without the `parquet` feature)"))
    }
}

/// Exports the trace at `trace` into `w` rather than a file of its own (`heaplens view` puts
/// flame graphs in its page this way, with no temporary file anyone could plant): the
/// allocation metrics as [`Format::Collapsed`], [`Format::Flamegraph`], [`Format::PprofText`]
/// or [`Format::Pprof`]. `w` is flushed at the end.
///
/// # Errors
/// As [`export`], with the path `-` in [`ExportError::Write`]; [`ExportError::Unsupported`]
/// for the other formats (whose outputs are several files or named by their path) and for
/// [`Metric::CpuSamples`].
pub fn export_to(trace: &Path, w: &mut dyn Write, opts: &Options) -> Result<Exported, ExportError> {
    if opts.metric == Metric::CpuSamples {
        return Err(ExportError::Unsupported("CPU samples into a stream (export them to a file)"));
    }
    if matches!(opts.format, Format::Firefox | Format::Heaptrack | Format::Parquet) {
        return Err(ExportError::Unsupported("this format into a stream (export it to a file)"));
    }
    let (t, by_thread) = heap_totals(trace, opts)?;
    write_stream(w, trace, &t, &by_thread, &by_stack(&by_thread), opts)
}

/// Writes one heap export into `w` from the replay's totals, and flushes it: what
/// [`export_to`] and [`export_metrics`] share.
fn write_stream(
    w: &mut dyn Write,
    trace: &Path,
    t: &Trace,
    by_thread: &ByThread,
    stacks: &[(u32, StackTotals)],
    opts: &Options,
) -> Result<Exported, ExportError> {
    let mut done = Exported { warnings: damage(t), ..Exported::default() };
    write_heap(w, trace, t, (by_thread, stacks), opts, &mut done)
        .and_then(|()| w.flush())
        .map_err(|reason| ExportError::Write { path: "-".into(), reason })?;
    Ok(done)
}

/// The folded-stacks exports of `trace` in `format` (collapsed, flame graph or icicle graph),
/// one per metric of `metrics`, from one replay (two when one metric is
/// [`Metric::InuseBytes`]) instead of one or two each: what [`export_to`] writes for each, as
/// bytes, in order.
///
/// # Errors
/// As [`export_to`]; [`ExportError::Unsupported`] for any other format or for
/// [`Metric::CpuSamples`].
pub fn export_metrics(trace: &Path, format: Format, metrics: &[Metric]) -> Result<Vec<Vec<u8>>, ExportError> {
    if !folded(format) || metrics.contains(&Metric::CpuSamples) {
        return Err(ExportError::Unsupported("several metrics at once, but as folded stacks of the heap"));
    }
    let (t, by_thread) = heap_totals_for(trace, metrics.contains(&Metric::InuseBytes), false)?;
    let stacks = by_stack(&by_thread);
    let mut out = Vec::new();
    for &metric in metrics {
        let mut w = Vec::new();
        write_stream(&mut w, trace, &t, &by_thread, &stacks, &Options { format, metric, progress: false })?;
        out.push(w);
    }
    Ok(out)
}

/// Totals per (stack id, thread id).
type ByThread = Vec<((u32, u32), StackTotals)>;

/// The replay's totals per (stack, thread), in that order, with the bytes each stack held at
/// the peak when the metric asks for them.
fn heap_totals(trace: &Path, opts: &Options) -> Result<(Trace, ByThread), ExportError> {
    let at_peak = opts.metric == Metric::InuseBytes && folded(opts.format);
    heap_totals_for(trace, at_peak, opts.progress)
}

/// Whether `format` is a folded-stacks one (one number per stack, the metric's).
fn folded(format: Format) -> bool {
    matches!(format, Format::Collapsed | Format::Flamegraph | Format::Icicle)
}

/// [`heap_totals`], with the bytes at the peak when `at_peak` (a second replay).
fn heap_totals_for(trace: &Path, at_peak: bool, progress: bool) -> Result<(Trace, ByThread), ExportError> {
    let mut totals = Totals::default();
    let t = replay_with_progress(trace, &mut totals, progress)?;
    if at_peak {
        let mut peak = PeakLive::new(totals.peak.1);
        replay_with_progress(trace, &mut peak, progress)?;
        // Counted per stack only: the thread the key names is the first that allocated there
        // (looked up in a map: a scan of the keys per stack took 25 s for 145,000 stacks).
        let mut first_key: std::collections::HashMap<u32, (u32, u32)> = Default::default();
        for &k in totals.stacks.keys() {
            first_key.entry(k.0).or_insert(k);
        }
        for (stack, (bytes, blocks)) in peak.snapshot.unwrap_or_default() {
            let key = first_key.get(&stack).copied().unwrap_or((stack, 0));
            let s = totals.stacks.entry(key).or_default();
            s.peak_bytes = bytes;
            s.peak_blocks = blocks;
        }
    }
    let mut by_thread: ByThread = totals.stacks.into_iter().collect();
    by_thread.sort_unstable_by_key(|&(key, _)| key);
    Ok((t, by_thread))
}

/// Writes the heap formats that are one stream: what [`export`] and [`export_to`] share.
fn write_heap(
    w: &mut dyn Write,
    trace: &Path,
    t: &Trace,
    (by_thread, stacks): (&ByThread, &[(u32, StackTotals)]),
    opts: &Options,
    done: &mut Exported,
) -> std::io::Result<()> {
    match opts.format {
        Format::PprofText => pprof_text::write(w, t, stacks, done),
        Format::Pprof => pprof::write(w, trace, t, by_thread, opts.metric, done),
        Format::Firefox | Format::Heaptrack | Format::Parquet => unreachable!("exported by their own functions"),
        Format::Collapsed | Format::Flamegraph | Format::Icicle => {
            let folded = collapsed::lines(trace, t, stacks, opts.metric, opts.progress, Naming::default());
            write_folded(w, folded, trace, opts, done)
        }
    }
}

/// The CPU samples as folded stacks, a flame graph or a pprof CPU profile: the trace's records
/// only (its events are skipped).
fn export_cpu(trace: &Path, out: &Path, opts: &Options) -> Result<Exported, ExportError> {
    let t = Trace::load_into(trace, None, &mut NoEvents)?;
    let samples = CpuSamples::of(&t);
    if samples.is_empty() {
        return Err(ExportError::NoSamples);
    }
    let mut done = Exported { warnings: damage(&t), ..Exported::default() };
    let write_err = |reason| ExportError::Write { path: out.into(), reason };
    let output = heaplens_output::Output::create(out, &[trace]).map_err(write_err)?;
    let mut w = BufWriter::new(output.file().map_err(write_err)?);
    match opts.format {
        Format::Pprof => pprof::write_cpu(&mut w, trace, &t, &samples, opts.progress, &mut done),
        _ => {
            let by_stack: Vec<(u32, u64)> = samples.by_stack().iter().map(|&(s, n, _)| (s, n)).collect();
            let folded = collapsed::sample_lines(trace, &t, &by_stack, opts.progress);
            write_folded(&mut w, folded, trace, opts, &mut done)
        }
    }
    .and_then(|()| w.flush())
    .and_then(|()| output.commit())
    .map_err(write_err)?;
    Ok(done)
}

/// Writes folded stacks (with their symbolizer's warnings) as the collapsed format or a flame
/// graph, and notes what was written in `done`.
fn write_folded(
    w: &mut dyn Write,
    (lines, warnings): (Vec<(String, u64)>, Vec<String>),
    trace: &Path,
    opts: &Options,
    done: &mut Exported,
) -> std::io::Result<()> {
    done.warnings.extend(warnings);
    done.stacks = lines.len();
    done.total = lines.iter().map(|(_, n)| n).sum();
    if opts.format == Format::Collapsed {
        collapsed::write(w, &lines)
    } else {
        collapsed::flamegraph(w, &lines, opts.metric, trace, opts.format == Format::Icicle)
    }
}

/// The Firefox profile: one pass of the replay building it, then the JSON. (The crate keeps the
/// whole profile in memory until it is written, about 40 bytes an event.)
fn export_firefox(trace: &Path, out: &Path, opts: &Options) -> Result<Exported, ExportError> {
    // The stack trie and the modules first, for symbolizing as the replay goes.
    let t = Trace::load_into(trace, None, &mut NoEvents)?;
    let (sym, _damaged) = heaplens_interpret::symbolize::for_trace(trace, &t);
    let mut ff = firefox::Firefox::new(&t, sym);
    ff.add_cpu_samples(&CpuSamples::of(&t), opts.progress);
    let replayed = replay_with_progress(trace, &mut ff, opts.progress)?;
    let mut done = Exported { warnings: damage(&replayed), stacks: ff.stacks(), total: ff.bytes };
    done.warnings.extend(ff.warnings());
    let end = t.exit.as_ref().map(|e| e.end_mono_ns).unwrap_or(0);
    let write_err = |reason| ExportError::Write { path: out.into(), reason };
    let output = heaplens_output::Output::create(out, &[trace]).map_err(write_err)?;
    let mut w = BufWriter::new(output.file().map_err(write_err)?);
    ff.write(&mut w, end).and_then(|()| w.flush()).and_then(|()| output.commit()).map_err(write_err)?;
    Ok(done)
}

/// heaptrack's file, written as the replay goes.
fn export_heaptrack(trace: &Path, out: &Path, opts: &Options) -> Result<Exported, ExportError> {
    let t = Trace::load_into(trace, None, &mut NoEvents)?;
    let (sym, _damaged) = heaplens_interpret::symbolize::for_trace(trace, &t);
    let write_err = |reason| ExportError::Write { path: out.into(), reason };
    let output = heaplens_output::Output::create(out, &[trace]).map_err(write_err)?;
    let file = BufWriter::new(output.file().map_err(write_err)?);
    let zst = out.extension().is_some_and(|e| e == "zst");
    let w: Box<dyn Write> = if zst {
        Box::new(zstd::stream::Encoder::new(file, 3).map_err(write_err)?.auto_finish())
    } else {
        Box::new(file)
    };
    let mut ht = heaptrack::Heaptrack::new(w, &t, sym).map_err(write_err)?;
    let replayed = replay_with_progress(trace, &mut ht, opts.progress)?;
    let mut done = Exported { warnings: damage(&replayed), stacks: ht.stacks(), total: ht.bytes };
    let end = t.exit.as_ref().map(|e| e.end_mono_ns).unwrap_or(0);
    let (mut w, warnings) = ht.finish(end).map_err(write_err)?;
    w.flush().map_err(write_err)?;
    drop(w);
    output.commit().map_err(write_err)?;
    done.warnings.extend(warnings);
    Ok(done)
}

/// Reads a trace's records, dropping its events.
pub(crate) struct NoEvents;

impl heaplens_interpret::load::Sink for NoEvents {
    fn events(&mut self, _t: &mut Trace, _tid: u32, _payload: Vec<u8>, _offset: u64) {}
}

/// The totals of every stack over its threads, by stack id.
fn by_stack(by_thread: &[((u32, u32), StackTotals)]) -> Vec<(u32, StackTotals)> {
    let mut out: Vec<(u32, StackTotals)> = Vec::new();
    for &((stack, _), t) in by_thread {
        match out.last_mut() {
            Some((s, sum)) if *s == stack => {
                sum.allocs += t.allocs;
                sum.bytes += t.bytes;
                sum.leaked += t.leaked;
                sum.leaked_bytes += t.leaked_bytes;
                sum.peak_bytes += t.peak_bytes;
                sum.peak_blocks += t.peak_blocks;
            }
            _ => out.push((stack, t)),
        }
    }
    out
}

/// Warnings for a damaged trace.
pub(crate) fn damage(t: &Trace) -> Vec<String> {
    let h = &t.health;
    let mut w = Vec::new();
    if let Some(at) = h.truncated_at {
        w.push(format!("the trace is truncated at byte {at}: exported what it holds before"));
    }
    if h.corrupt_blocks + h.malformed_blocks > 0 {
        w.push(format!(
            "{} damaged blocks in the trace were skipped: exported the rest",
            h.corrupt_blocks + h.malformed_blocks
        ));
    }
    w
}
