//! `heaplens`: the command line. Thin glue over the monitor (`run`) and the views (`report`,
//! `export`); each subcommand lives in its own module.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand, ValueEnum};

mod attach;
mod attribution;
mod check;
mod diff;
mod export;
mod invocation;
mod live;
mod map;
mod one_process;
mod picture;
mod report;
mod run;
mod sampled;
mod snapshot;
mod timeline;
mod units;
mod view;

pub use units::{parse_bytes, parse_percent};
use units::{parse_duration, parse_range, parse_size, parse_time};

/// Heap allocation profiler for native programs on Linux.
///
/// Record every allocation and deallocation of a program with its call stack, then see who
/// allocates, how much, of what size, for how long, and what leaks.
#[derive(Parser, Debug)]
#[command(name = "heaplens", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run a program under the monitor and record its allocations to a trace (with its call
    /// stacks symbolized while it runs, unless sampling, so the trace can be reported on any
    /// machine).
    Run(RunArgs),
    /// Print the summary and mprof's tables (leaks, size bins, direct allocators, call graph).
    Report(ReportArgs),
    /// Compare two runs: the totals side by side, then the functions and call paths whose
    /// bytes allocated, allocations, bytes at the peak or leaked bytes changed most, in both
    /// directions. Functions match by name, never by address, so two builds compare.
    Diff(diff::DiffArgs),
    /// Check a run against memory budgets, for CI: exit 0 when every budget holds, 1 when one
    /// is broken (a line each, naming the function contributing most), 2 when the trace
    /// cannot be read or checked, or a budget is malformed. Budgets come as options or from a
    /// TOML file kept in the repository.
    Check(check::CheckArgs),
    /// Write the trace in another tool's format: folded stacks, flame graphs, pprof.
    Export(ExportArgs),
    /// Draw the memory map: time on x, address on y, one rectangle per block from its
    /// allocation to its release, coloured by call site, thread, size, waste or lifetime, with
    /// the bytes in use below (PNG or SVG).
    Map(MapArgs),
    /// Draw bytes in use over time, stacked by the call sites holding the most, with the peak
    /// marked and its holders named (PNG or SVG).
    Timeline(TimelineArgs),
    /// Write one self-contained HTML page: the memory map with zoom, pan and a tooltip per
    /// block, the bytes in use and heap over time on the same time axis, flame graphs of the
    /// bytes allocated, in use at the peak and leaked, and the report.
    View(ViewArgs),
    /// Ask a program running under `heaplens run --aggregate` to write a snapshot of its
    /// counters into its trace now (then `heaplens report` the trace while it runs).
    Snapshot(SnapshotArgs),
    /// Attach to a running program (through gdb) and record its allocations from now on,
    /// until --duration, Ctrl-C or `heaplens detach PID`; the program then goes on as before.
    Attach(AttachArgs),
    /// Detach heaplens from a program it attached to: its entry points are put back and the
    /// trace is sealed.
    Detach(DetachArgs),
    /// Watch a trace while it is written (by heaplens run or heaplens attach) in the terminal:
    /// bytes in use over time, the call sites holding and allocating the most, old blocks,
    /// threads; a new screen every second. Keys: q quits, s sorts the call sites (in use now, per
    /// second, in all).
    Live(LiveArgs),
}

/// Arguments of `heaplens live`.
#[derive(Args, Debug)]
pub struct LiveArgs {
    /// The trace, or the process id of a program heaplens records now.
    #[arg(value_name = "TRACE|PID")]
    pub target: PathBuf,
    /// How the view shows its screens.
    #[command(flatten)]
    pub screens: LiveScreens,
    /// Blocks live longer than this are shown as leak candidates (250ms, 2s, 1.5m; a plain
    /// number is seconds).
    #[arg(long, value_name = "TIME", default_value = "10", value_parser = parse_duration)]
    pub old: std::time::Duration,
    /// Rows per table.
    #[arg(long, default_value_t = 8, value_name = "N")]
    pub top: usize,
}

/// How `heaplens live` and `heaplens run --live` show their screens. On the terminal, keys: q
/// (or Esc, Ctrl-C) quits, s sorts the call sites by the next order (in use now, per second,
/// in all).
#[derive(Args, Debug, Clone)]
pub struct LiveScreens {
    /// Print screens as text instead of drawing on the terminal (for scripts; `heaplens run
    /// --live` prints them on stderr, leaving stdout to the program).
    #[arg(long)]
    pub plain: bool,
    /// With --plain: print this many screens, one a second, then stop [default: 1].
    #[arg(long, value_name = "N")]
    pub frames: Option<usize>,
    /// The call sites' order at the start: in-use (bytes held now), rate (bytes allocated per
    /// second) or total (bytes allocated since recording started); s cycles it on the terminal.
    #[arg(long, value_name = "ORDER", default_value = "in-use", value_parser = parse_sort)]
    pub sort: heaplens_live::Sort,
}

/// `--sort`: one of [`heaplens_live::Sort`]'s names.
fn parse_sort(s: &str) -> Result<heaplens_live::Sort, String> {
    s.parse()
}

/// Arguments of `heaplens attach`.
#[derive(Args, Debug)]
pub struct AttachArgs {
    /// The process id of the running program.
    #[arg(value_name = "PID")]
    pub pid: u32,
    /// Trace file to write [default: heaplens.PROGRAM.PID.hltrace in the current directory,
    /// heaplens.PROGRAM.PID.N.hltrace when attaching again]. The program's user must be able to
    /// create it.
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Detach after this long (250ms, 2s, 1.5m; a plain number is seconds) [default: until
    /// Ctrl-C, `heaplens detach PID` or the end of the program].
    #[arg(long, value_name = "TIME", value_parser = parse_duration)]
    pub duration: Option<std::time::Duration>,
    /// Deepest call stack recorded, in frames (the first attach to a process sets it).
    #[arg(long, default_value_t = 1024, value_name = "FRAMES")]
    pub max_frames: u32,
    /// Also sample where CPU time goes from now on, as `heaplens run --cpu` does: every thread,
    /// on its own CPU-time clock, HZ times per CPU second (default 999), with its call stack;
    /// `heaplens report --cpu` shows them. The timers stop and SIGPROF is the program's again
    /// at the detach.
    #[arg(long, value_name = "HZ", num_args = 0..=1, require_equals = true, default_missing_value = "999",
          value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub cpu: Option<u32>,
    /// Print nothing but errors.
    #[arg(short, long)]
    pub quiet: bool,
}

/// Arguments of `heaplens detach`.
#[derive(Args, Debug)]
pub struct DetachArgs {
    /// The process id of the program `heaplens attach` records.
    #[arg(value_name = "PID")]
    pub pid: u32,
}

/// Arguments of `heaplens snapshot`.
#[derive(Args, Debug)]
pub struct SnapshotArgs {
    /// The process id of the running program, or the path of the trace it writes.
    #[arg(value_name = "PID|TRACE")]
    pub target: PathBuf,
}

/// Arguments of `heaplens run`.
#[derive(Args, Debug)]
#[command(trailing_var_arg = true)]
pub struct RunArgs {
    /// Trace file to write [default: heaplens.PROGRAM.PID.hltrace in the current directory].
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Also profile programs that the target execs or spawns; each writes FILE.PID.
    #[arg(long)]
    pub follow_children: bool,
    /// Deepest call stack recorded, in frames.
    #[arg(long, default_value_t = 1024, value_name = "FRAMES")]
    pub max_frames: u32,
    /// Sample allocations instead of recording all of them: on average one per BYTES allocated
    /// (a Poisson process over bytes, as tcmalloc, jemalloc and Go do; reports scale the
    /// samples back to unbiased estimates). Accepts suffixes: 512KiB, 512k, 1MiB, 1m.
    #[arg(long, value_name = "BYTES", value_parser = parse_size)]
    pub sample_rate: Option<u64>,
    /// Long runs: keep per-stack and per-size counters in the process instead of recording
    /// every call, so the trace grows with the number of call stacks, not of allocations (leaks
    /// and peak stay exact; lifetimes and the timeline are not recorded). The program writes
    /// a snapshot of the counters when `heaplens snapshot PID` asks, and at exit. Counts every
    /// call, so it cannot be combined with --sample-rate.
    #[arg(long, conflicts_with = "sample_rate")]
    pub aggregate: bool,
    /// Also sample where CPU time goes: every thread, on its own CPU-time clock, HZ times per
    /// CPU second (default 999), with its call stack; `heaplens report --cpu` shows them.
    /// Uses SIGPROF (a program's own SIGPROF handlers still get their signals).
    #[arg(long, value_name = "HZ", num_args = 0..=1, require_equals = true, default_missing_value = "999",
          value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub cpu: Option<u32>,
    /// Sample CPU time only (at the --cpu rate), recording no allocations: the lowest overhead.
    #[arg(long, conflicts_with_all = ["aggregate", "sample_rate"])]
    pub cpu_only: bool,
    /// Keep every event's time exact (to 32 TSC ticks, about 13 ns). By default the times of a
    /// thread that records alone (every event of a single-threaded program) are kept to 1,024
    /// ticks, about 0.4 µs, which makes the trace up to half smaller (the report says which
    /// unit, and lifetimes under it read as under it). Events of threads that run at once
    /// always keep exact times.
    #[arg(long, conflicts_with_all = ["aggregate", "cpu_only"])]
    pub exact_times: bool,
    /// Print nothing but the program's own output.
    #[arg(short, long)]
    pub quiet: bool,
    /// Check the run against memory budgets once it ends (the options below, or --budgets
    /// FILE), as `heaplens check` does: the verdicts go to stderr, and when the program
    /// succeeded, heaplens exits 1 if a budget is broken. A program's own failure status wins.
    #[arg(long)]
    pub check: bool,
    /// The budgets of --check.
    #[command(flatten)]
    pub budgets: check::BudgetArgs,
    /// Watch the heap live in the terminal while the program runs (as `heaplens live`; q
    /// quits the view, the program runs on; s sorts the call sites). The program's own output
    /// shares the terminal.
    #[arg(long)]
    pub live: bool,
    /// With --live: how the view shows its screens (--plain, --frames, --sort).
    #[command(flatten)]
    pub live_screens: LiveScreens,
    /// The program to profile and its arguments.
    /// Taken as the OS gives them: arguments and paths need not be UTF-8.
    #[arg(required = true, value_name = "PROGRAM [ARGS]...", value_parser = clap::value_parser!(std::ffi::OsString))]
    pub command: Vec<std::ffi::OsString>,
}

/// Which tables `heaplens report` prints.
#[derive(Args, Debug, Clone)]
pub struct ReportArgs {
    /// The trace written by `heaplens run`. The first trace of a `--follow-children` run
    /// reports its process tree (the `TRACE.PID` traces beside it); several traces report them
    /// as one tree.
    #[arg(required = true, value_name = "TRACE")]
    pub traces: Vec<PathBuf>,
    /// Of a process tree, report only the process with this pid, as its own trace would (of a
    /// pid that exec'd, its last program).
    #[arg(long, value_name = "PID")]
    pub process: Option<u32>,
    /// Report the trace given alone, not the process tree it is the first of: a
    /// `--follow-children` run's first process by itself (before its exec, if it exec'd).
    #[arg(long, conflicts_with = "process")]
    pub alone: bool,
    /// Only the memory leak table.
    #[arg(long)]
    pub leaks: bool,
    /// Only the allocation bin table.
    #[arg(long)]
    pub bins: bool,
    /// Only the direct allocation table.
    #[arg(long)]
    pub direct: bool,
    /// Only the allocation call graph.
    #[arg(long)]
    pub call_graph: bool,
    /// Callers shown in each leak path (mprof shows the last 5; at least 1).
    #[arg(long, default_value_t = 5, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub leak_depth: u64,
    /// Tell call sites within one function apart (function+offset, file:line) in the leak table.
    #[arg(long)]
    pub call_sites: bool,
    /// Add the lifetime table: how long blocks live, per function that allocated them, in time
    /// and in allocations in between (a second pass over the trace).
    #[arg(long)]
    pub lifetimes: bool,
    /// For C++ programs, mtrace++'s tables instead of mprof's: allocations by invocation
    /// scenario (constructor, copy constructor, operator=, type conversion, member data,
    /// member function, others) at the first and the lowest class level, per class, by size,
    /// by path of member functions, by depth, and new versus malloc (a second pass over the
    /// trace). With --leaks, --bins, --direct or --call-graph, those tables come too.
    #[arg(long)]
    pub cxx: bool,
    /// Where CPU time went, from the samples of `heaplens run --cpu` or --cpu-only: CPU time per
    /// thread, gprof's flat profile (self and total time per function) and the call graph in
    /// the allocation call graph's layout. A trace recorded with --cpu-only gets this report
    /// without asking.
    #[arg(long, conflicts_with_all = ["leaks", "bins", "direct", "call_graph", "lifetimes", "cxx"])]
    pub cpu: bool,
    /// Attribute by source line: in every table a function is one line of it,
    /// `function@file:line` (the line of the call it was making), so the tables say which
    /// line allocates. Needs debug information (-g); frames without it stay whole functions.
    #[arg(long)]
    pub lines: bool,
    /// Show C++ template and Rust generic arguments in full (`std::vector<long,
    /// std::allocator<long> >::push_back(long const&)`); by default they are elided
    /// (`std::vector<…>::push_back(long const&)`) and a function's instantiations are one row.
    #[arg(long)]
    pub full_names: bool,
    /// How allocations are charged to functions.
    #[command(flatten)]
    pub attribution: attribution::AttributionArgs,
    /// Rows shown per table of the text (0 = all; --format json holds every row).
    #[arg(long, default_value_t = 20, value_name = "N")]
    pub top: usize,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// Decompressed trace held in memory at once, in MiB: the report reads on once the replay
    /// has used some (its memory is this plus the live blocks and the distinct stacks).
    #[arg(long, default_value_t = 128, value_name = "MIB", value_parser = clap::value_parser!(u64).range(1..=1 << 20))]
    pub memory: u64,
}

/// Arguments of `heaplens export`.
#[derive(Args, Debug)]
#[command(group(clap::ArgGroup::new("to").required(true).args(["output", "dataset"])))]
pub struct ExportArgs {
    /// The trace file written by `heaplens run`.
    pub trace: PathBuf,
    /// The format to write.
    #[arg(long, value_enum)]
    pub format: ExportFormat,
    /// The file to write (for `parquet`, a directory).
    #[arg(short, long, value_name = "OUT")]
    pub output: Option<PathBuf>,
    /// With `--format parquet`: add the trace to the Hive-partitioned data set DIR, as
    /// `DIR/{events,stacks,frames}/host=H/program=P/pid=N/part-0.parquet` (replacing the same
    /// host, program and pid), so that many traces are queried as one table.
    #[arg(long, value_name = "DIR")]
    pub dataset: Option<PathBuf>,
    /// The machine that recorded the trace, for `--dataset` [default: this machine's host name;
    /// traces do not record it].
    #[arg(long, value_name = "NAME")]
    pub host: Option<String>,
    /// The number each stack gets, for the formats that hold one (collapsed, flamegraph); `cpu`
    /// also makes `pprof` a CPU profile [default: alloc-bytes, or cpu for a trace recorded with
    /// `heaplens run --cpu-only`].
    #[arg(long, value_enum)]
    pub metric: Option<ExportMetric>,
    /// Export the change from the run traced in BASE instead (with collapsed: `stack base new`
    /// lines; with flamegraph or icicle: a differential flame graph, the new run's widths,
    /// grown frames red, shrunk blue). Stacks match by function names, so two builds compare.
    #[arg(long, value_name = "BASE")]
    pub base: Option<PathBuf>,
}

/// The call sites the pictures give colours of their own (`map`, `timeline`, `view`).
#[derive(Args, Debug)]
pub struct SiteArgs {
    /// Call sites (with `map --color thread`, threads) with a colour of their own, at most 10;
    /// the rest are grey.
    #[arg(long, default_value_t = 8, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=10))]
    pub top: u64,
    /// Frames of the program's own code that name a call site (1: the allocating function).
    #[arg(long, default_value_t = 2, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=16))]
    pub depth: u64,
    /// Frames passed over when naming a call site, as in `heaplens report`.
    #[command(flatten)]
    pub skip: attribution::SkipArgs,
}

/// The part of the run a picture draws (`map`, `timeline`, `view`).
#[derive(Args, Debug)]
pub struct TimeWindowArgs {
    /// Start of the time window, since the first event (`250ms`, `1.5s`, `2000us`, or ns).
    #[arg(long, value_name = "TIME", value_parser = parse_time)]
    pub from: Option<u64>,
    /// End of the time window, since the first event.
    #[arg(long, value_name = "TIME", value_parser = parse_time)]
    pub to: Option<u64>,
}

/// Arguments of `heaplens map`.
#[derive(Args, Debug)]
pub struct MapArgs {
    /// The trace file written by `heaplens run`.
    pub trace: PathBuf,
    /// The picture to write: `.png`, or `.svg` (the map as an embedded bitmap, labels as text).
    #[arg(short, long, value_name = "OUT")]
    pub output: PathBuf,
    /// Which call sites get colours of their own.
    #[command(flatten)]
    pub sites: SiteArgs,
    /// The part of the run drawn.
    #[command(flatten)]
    pub time: TimeWindowArgs,
    /// What colour shows: the call site that allocated the block (its allocating function and
    /// caller, outside the standard and C libraries), its thread, its size class, its waste
    /// (usable minus requested bytes, blue none to red most) or its lifetime.
    #[arg(long, value_enum, default_value_t = MapColor::Function)]
    pub color: MapColor,
    /// The bias of the antialiasing (Moreta & Telea's equation 1): lower values show thin,
    /// isolated blocks more; 1 is plain coverage antialiasing.
    #[arg(long, default_value_t = 0.3, value_name = "ALPHA", value_parser = parse_alpha)]
    pub alpha: f32,
    /// Draw without antialiasing (each block paints the pixels whose centres it covers; blocks
    /// smaller than a pixel vanish), for comparison.
    #[arg(long)]
    pub no_antialias: bool,
    /// The blocks' shading, so neighbouring blocks of one colour are told apart.
    #[arg(long, value_enum, default_value_t = MapCushion::Plateau)]
    pub cushion: MapCushion,
    /// Columns of the map (time).
    #[arg(long, default_value_t = 1200, value_parser = clap::value_parser!(u64).range(64..=16384))]
    pub width: u64,
    /// Rows of the map (addresses).
    #[arg(long, default_value_t = 640, value_parser = clap::value_parser!(u64).range(64..=16384))]
    pub height: u64,
    /// The address range drawn, `LO-HI` in hexadecimal (`0x55d0c0000000-0x55d0c1000000`).
    #[arg(long, value_name = "LO-HI", value_parser = parse_range)]
    pub addresses: Option<(u64, u64)>,
    /// One view per size class of usable bytes (glibc's bins: up to 32 B, 64 B, ... 1 KiB, the
    /// large bins, mmap'd chunks) or per arena (the main heap, each thread arena, each mmap'd
    /// chunk), as the paper's correlated views.
    #[arg(long, value_enum, value_name = "BY")]
    pub bins: Option<MapBins>,
    /// With --bins: views one above the other on a shared time axis, or side by side.
    #[arg(long, value_enum, default_value_t = MapAlign::Time)]
    pub align: MapAlign,
    /// Events payload bytes from which the blocks are drawn from the two halves of the trace
    /// at once, on two processors (default 4 MiB; tests set 0 to always split).
    #[arg(long, value_name = "BYTES", hide = true)]
    pub split_min_bytes: Option<usize>,
}

/// What the map's views are split by.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum MapBins {
    /// Size class of usable bytes.
    Size,
    /// Address range: main heap, thread arenas, mmap'd chunks.
    Arena,
}

/// How several views are laid out.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum MapAlign {
    /// One above the other, sharing the time axis.
    Time,
    /// Side by side, each on its own address axis.
    Address,
}

/// Arguments of `heaplens timeline`.
#[derive(Args, Debug)]
pub struct TimelineArgs {
    /// The trace file written by `heaplens run`.
    pub trace: PathBuf,
    /// The picture to write: `.png` or `.svg`.
    #[arg(short, long, value_name = "OUT")]
    pub output: PathBuf,
    /// Which call sites get colours of their own.
    #[command(flatten)]
    pub sites: SiteArgs,
    /// The part of the run drawn.
    #[command(flatten)]
    pub time: TimeWindowArgs,
    /// Columns of the chart (time).
    #[arg(long, default_value_t = 1200, value_parser = clap::value_parser!(u64).range(64..=16384))]
    pub width: u64,
    /// Rows of the chart (bytes).
    #[arg(long, default_value_t = 400, value_parser = clap::value_parser!(u64).range(64..=16384))]
    pub height: u64,
    /// Events payload bytes from which each pass replays the two halves of the trace at once,
    /// on two processors (default 4 MiB; tests set 0 to always split).
    #[arg(long, value_name = "BYTES", hide = true)]
    pub split_min_bytes: Option<usize>,
}

/// Arguments of `heaplens view`.
#[derive(Args, Debug)]
pub struct ViewArgs {
    /// The trace file written by `heaplens run`.
    pub trace: PathBuf,
    /// The page to write (`.html`).
    #[arg(short, long, value_name = "OUT")]
    pub output: PathBuf,
    /// Which call sites get colours of their own.
    #[command(flatten)]
    pub sites: SiteArgs,
    /// The part of the run drawn.
    #[command(flatten)]
    pub time: TimeWindowArgs,
    /// Most blocks on the page (a browser draws a million in a fraction of a second); past it,
    /// the page draws those of the largest bytes times lifetime, the ones a whole-run view
    /// shows (all of a part: --from/--to/--addresses; all of them: `heaplens map`): between
    /// N/2 and N of them, as it thins them by halves while it reads.
    #[arg(long, default_value_t = 2_000_000, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub max_blocks: u64,
    /// The address range, `LO-HI` in hexadecimal.
    #[arg(long, value_name = "LO-HI", value_parser = parse_range)]
    pub addresses: Option<(u64, u64)>,
}

/// What the map's colour shows.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum MapColor {
    /// The call site that allocated the block.
    Function,
    /// The allocating thread.
    Thread,
    /// The size class (log2 of the usable size).
    Size,
    /// Usable minus requested bytes.
    Waste,
    /// Lifetime, on a log scale.
    Lifetime,
}

/// The blocks' shading.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum MapCushion {
    /// Flat.
    None,
    /// Beveled edges.
    Plateau,
    /// A parabola across each block: more contrast.
    Parabolic,
}

fn parse_alpha(s: &str) -> Result<f32, String> {
    match s.parse::<f32>() {
        Ok(a) if a > 0.0 && a <= 4.0 => Ok(a),
        _ => Err(format!("`{s}` is not a bias between 0 (excluded) and 4")),
    }
}

/// Export formats.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExportFormat {
    /// Folded stacks (`outer;...;inner count`), for flamegraph.pl, inferno, speedscope.
    Collapsed,
    /// An interactive SVG flame graph (open it in a browser).
    Flamegraph,
    /// The same flame graph drawn top down (an icicle graph): the program's entry at the top.
    Icicle,
    /// pprof's legacy heap profile text, for `google-pprof --text PROGRAM OUT`.
    PprofText,
    /// pprof's profile.proto, gzipped, for `go tool pprof OUT` and pprof.me.
    Pprof,
    /// The Firefox Profiler's format: open it at profiler.firefox.com.
    Firefox,
    /// heaptrack's file (name it .zst to compress it), for heaptrack_print and heaptrack_gui.
    Heaptrack,
    /// A directory of Parquet tables (events, stacks, frames), for DuckDB and other SQL engines.
    Parquet,
}

/// What each stack counts in an export.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExportMetric {
    /// Bytes allocated.
    AllocBytes,
    /// Allocations.
    AllocCount,
    /// Bytes in use at the peak.
    InuseBytes,
    /// Bytes still live at exit.
    LeakedBytes,
    /// Blocks still live at exit.
    LeakedCount,
    /// CPU-time samples (`heaplens run --cpu`), counted in samples: folded stacks and flame
    /// graph of where the CPU time went, or with `--format pprof` a CPU profile.
    Cpu,
}

/// Report output formats.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Aligned tables for people.
    Text,
    /// One JSON document for scripts and tests.
    Json,
}

/// A regular expression (the regex crate's syntax).
pub fn parse_regex(s: &str) -> Result<regex::Regex, String> {
    regex::Regex::new(s).map_err(|e| e.to_string())
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // The views of one process say when the trace is the first of a process tree.
    let one_process = match &cli.command {
        Command::Export(a) => Some((&a.trace, "export")),
        Command::Map(a) => Some((&a.trace, "map")),
        Command::Timeline(a) => Some((&a.trace, "timeline")),
        Command::View(a) => Some((&a.trace, "view")),
        Command::Run(_)
        | Command::Report(_)
        | Command::Diff(_)
        | Command::Check(_)
        | Command::Snapshot(_)
        | Command::Attach(_)
        | Command::Detach(_)
        | Command::Live(_) => None,
    };
    if let Some((trace, command)) = one_process {
        one_process::note_children(trace, command);
        sampled::note_sampled(trace, command);
    }
    let result = match cli.command {
        Command::Run(a) => run::execute(&a),
        Command::Report(a) => report::execute(&a).map(|()| ExitCode::SUCCESS),
        Command::Diff(a) => diff::execute(&a).map(|()| ExitCode::SUCCESS),
        Command::Check(a) => check::execute(&a),
        Command::Export(a) => export::execute(&a).map(|()| ExitCode::SUCCESS),
        Command::Map(a) => map::execute(&a).map(|()| ExitCode::SUCCESS),
        Command::Timeline(a) => timeline::execute(&a).map(|()| ExitCode::SUCCESS),
        Command::View(a) => view::execute(&a).map(|()| ExitCode::SUCCESS),
        Command::Snapshot(a) => snapshot::execute(&a).map(|()| ExitCode::SUCCESS),
        Command::Attach(a) => attach::execute_attach(&a),
        Command::Detach(a) => attach::execute_detach(&a).map(|()| ExitCode::SUCCESS),
        Command::Live(a) => live::execute(&a).map(|()| ExitCode::SUCCESS),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            // An error can quote the trace (a module path, a name): nothing in it may act.
            eprintln!("heaplens: error: {}", heaplens_interpret::names::for_terminal(&format!("{e:#}")));
            ExitCode::from(2)
        }
    }
}
