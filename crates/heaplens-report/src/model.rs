//! The report: plain data, serialized as the JSON document of `heaplens report --format json`
//! and rendered as text by [`crate::render_text`]. All byte counts are requested sizes in bytes;
//! all times are nanoseconds; percentages are 0..=100.

use std::collections::BTreeMap;

use serde::Serialize;

/// Everything `heaplens report` shows.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// The trace file and its condition.
    pub trace: TraceInfo,
    /// The profiled process.
    pub process: ProcessInfo,
    /// Totals.
    pub summary: Summary,
    /// mprof's memory leak table, largest first: blocks live at exit that no suppression
    /// covers.
    pub leaks: Vec<LeakRow>,
    /// The blocks live at exit that a suppression covers, by path as `leaks` are.
    pub suppressed_leaks: Vec<LeakRow>,
    /// Each suppression that covered blocks, with what it covered.
    pub suppressions: Vec<SuppressionRow>,
    /// mprof's allocation bin table.
    pub bins: BinTable,
    /// mprof's direct allocation table.
    pub direct: DirectTable,
    /// mprof's allocation call graph, largest inclusive bytes first; `index` is the position.
    pub call_graph: Vec<CallGraphEntry>,
    /// Block lifetimes per function that called the allocator, when asked for (`--lifetimes`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lifetimes: Option<Vec<LifetimeRow>>,
    /// mtrace++'s C++ tables, when asked for (`--cxx`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cxx: Option<crate::cxx::model::CxxTables>,
    /// Per function and call path, what a diff compares, when asked for
    /// ([`crate::Options::profile`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub profile: Option<Profile>,
}

/// A suppression and the blocks live at exit it covered.
#[derive(Debug, Clone, Serialize)]
pub struct SuppressionRow {
    /// The pattern: a runtime function (`_IO_file_doallocate`) or a `leak:` pattern.
    pub pattern: String,
    /// `runtime` (built in) or `user` (`--suppressions`).
    pub origin: &'static str,
    /// What the runtime keeps there (`stdio buffer`); empty for the user's.
    pub what: &'static str,
    /// Blocks covered.
    pub blocks: u64,
    /// Bytes covered.
    pub bytes: u64,
}

/// Lifetimes of the blocks one function allocated directly. Steps are the allocations the
/// allocating thread made between a block's allocation and its release; histograms are by
/// powers of two (bucket 0: 0, bucket k: 2^(k-1) to 2^k - 1).
#[derive(Debug, Clone, Serialize)]
pub struct LifetimeRow {
    /// The function.
    pub function: String,
    /// Its module's basename.
    pub module: Option<String>,
    /// Blocks released.
    pub freed: u64,
    /// Blocks released before their thread's next allocation (heaptrack's temporaries).
    pub short_lived: u64,
    /// The median lifetime, nanoseconds: the lower bound of its power-of-two bucket (the
    /// histogram keeps no more); the median is in `median_ns..=median_ns_high`.
    pub median_ns: u64,
    /// The upper bound of the median's bucket, nanoseconds, no more than `max_ns`.
    pub median_ns_high: u64,
    /// The longest lifetime, nanoseconds.
    pub max_ns: u64,
    /// The median lifetime in steps: the lower bound of its bucket, the median in
    /// `median_steps..=median_steps_high`.
    pub median_steps: u64,
    /// The upper bound of the median's bucket, steps.
    pub median_steps_high: u64,
    /// Blocks still live at exit (no lifetime).
    pub live_at_exit: u64,
    /// Released blocks per lifetime bucket in nanoseconds.
    pub ns_buckets: Vec<u64>,
    /// Released blocks per lifetime bucket in steps.
    pub steps_buckets: Vec<u64>,
}

/// The trace file and its condition.
#[derive(Debug, Clone, Serialize)]
pub struct TraceInfo {
    /// Path as given.
    pub path: String,
    /// The file ends inside a block (the process or copy was cut short).
    pub truncated: bool,
    /// Byte offset of the incomplete block, when truncated.
    pub truncated_at: Option<u64>,
    /// Blocks skipped for a bad checksum or compression.
    pub corrupt_blocks: u64,
    /// Blocks that passed their checksum but whose records did not decode.
    pub malformed_blocks: u64,
    /// The monitor's End block was seen: it shut down cleanly.
    pub complete: bool,
    /// Events the monitor reported lost (from the End block).
    pub dropped_events: Option<u64>,
    /// Events read.
    pub events: u64,
    /// The process `exec`'d another program without `--follow-children`: the trace holds its
    /// allocations up to the exec only (a wrapper script's, say).
    pub exec_unfollowed: bool,
    /// The process `exec`'d (followed or not) and its heap went with it: the blocks live then
    /// are not leaks (the report counts them as suppressed, by the suppression `exec`).
    pub exec: bool,
    /// The trace was sampled: on average one allocation recorded per this many bytes
    /// allocated (a Poisson process over bytes); 0 when every allocation was recorded. When it
    /// is set, every count and byte total of the report is an unbiased estimate scaled up
    /// from the samples.
    pub sample_rate: u64,
    /// Recording ended by `heaplens detach` (or the end of `heaplens attach`) while the process
    /// went on: the blocks live then (`leaked_bytes`, the leak table) are live at the detach,
    /// not leaks.
    pub detached: bool,
    /// The trace holds snapshots of counts per call stack (`heaplens run --aggregate`), not
    /// events: temporaries, lifetimes and the bytes at the peak per stack are not recorded.
    pub aggregated: bool,
    /// Allocation stacks whose trie nodes were missing (paths lack their outer frames).
    pub incomplete_stacks: u64,
    /// Symbolization problems (a module file missing or rebuilt since the run), one line each.
    pub symbol_warnings: Vec<String>,
    /// The unit of the trace's exact times, in nanoseconds (32 TSC ticks, about 13 ns; 1 ns
    /// where the monitor read `CLOCK_MONOTONIC`).
    pub time_unit_ns: u64,
    /// Events whose times the monitor kept to `coarse_time_unit_ns` instead of exactly (their
    /// thread recorded alone, so no other thread's event fell among them); 0 when every time
    /// is exact.
    pub coarse_time_events: u64,
    /// The unit those times were rounded down to, in nanoseconds (0: every time exact): a
    /// lifetime under it reads 0.
    pub coarse_time_unit_ns: u64,
}

/// The profiled process.
#[derive(Debug, Clone, Serialize)]
pub struct ProcessInfo {
    /// Process id (`null` when the Process block was lost).
    pub pid: Option<u32>,
    /// The parent's process id, which links a child's trace to its parent's in a process tree
    /// (`null` when the Process block was lost).
    pub ppid: Option<u32>,
    /// Executable path.
    pub exe: String,
    /// Command line.
    pub argv: Vec<String>,
    /// Exit status, when it exited.
    pub exit_code: Option<i32>,
    /// Terminating signal, when a signal killed it.
    pub exit_signal: Option<i32>,
    /// Thread names by thread id.
    pub thread_names: BTreeMap<u32, String>,
    /// Recorded by `heaplens attach`: recording started while the process ran, and frees of
    /// blocks allocated before that are the summary's `frees_before_attach`.
    pub attached: bool,
    /// When recording started, nanoseconds since the Unix epoch (the process's start for
    /// `heaplens run`, the attach for `heaplens attach`; `null` when the Process block was lost).
    pub recording_start_unix_ns: Option<u64>,
    /// When recording stopped, ns since the Unix epoch (the monitor's last End block; `null`
    /// without one).
    pub recording_stop_unix_ns: Option<u64>,
}

/// Totals over the whole run. For a sampled trace (`sample_rate` > 0) every count and byte
/// total is an estimate.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    /// Mean bytes between recorded allocations when the trace was sampled, 0 when every
    /// allocation was recorded (the same as `trace.sample_rate`).
    pub sample_rate: u64,
    /// Calls per allocating entry point label (`malloc`, `operator new`, `realloc`, ...),
    /// failed calls included.
    pub calls_by_kind: BTreeMap<String, u64>,
    /// Calls per releasing entry point label (`free`, `operator delete`, ...).
    pub frees_by_kind: BTreeMap<String, u64>,
    /// Successful allocations (a successful realloc is one).
    pub allocations: u64,
    /// Releases of tracked blocks. `allocations - deallocations == leaked_objects +
    /// suppressed_objects`.
    pub deallocations: u64,
    /// Releases of addresses that were not live (allocated before tracking, or untracked); 0
    /// for an attached process, whose such releases are `frees_before_attach`.
    pub unmatched_frees: u64,
    /// Of an attached process (`heaplens attach`): releases of blocks allocated before the
    /// attach (addresses not seen allocated while recording), apart from the unmatched frees.
    pub frees_before_attach: u64,
    /// Releases of NULL (no-ops).
    pub null_frees: u64,
    /// Allocations that returned an address still live (its release was never seen; counted
    /// as a deallocation).
    pub overwritten_allocations: u64,
    /// Allocations that returned NULL.
    pub failed_allocations: u64,
    /// Bytes requested by successful allocations.
    pub bytes_allocated: u64,
    /// Highest live bytes.
    pub peak_bytes: u64,
    /// Live blocks at the peak.
    pub peak_objects: u64,
    /// When the peak was reached, ns since the process started.
    pub peak_time_ns: u64,
    /// Bytes live at the end.
    pub leaked_bytes: u64,
    /// Blocks live at the end.
    pub leaked_objects: u64,
    /// Bytes live at exit that a suppression covers (the runtime's one-time buffers, the
    /// user's `--suppressions`): not counted in `leaked_bytes`.
    pub suppressed_bytes: u64,
    /// Blocks live at exit that a suppression covers: not counted in `leaked_objects`.
    pub suppressed_objects: u64,
    /// Allocations freed by their thread's very next event.
    pub temporary_allocations: u64,
    /// From process start to exit (or the last record), ns.
    pub runtime_ns: u64,
    /// Threads that allocated or freed.
    pub threads: u64,
}

/// One row of the memory leak table: blocks live at exit grouped by partial call path.
#[derive(Debug, Clone, Serialize)]
pub struct LeakRow {
    /// The last frames of the path, outermost first, ending at the direct allocator.
    pub path: Vec<String>,
    /// The full path was longer than shown.
    pub cut: bool,
    /// Blocks live at exit.
    pub allocs: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Share of all leaked bytes.
    pub percent: f64,
}

/// Four numbers, one per mprof size class: s (0-32 bytes), m (33-256), l (257-2048), x (more).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct ByClass<T> {
    /// Small: 0..=32 bytes.
    pub s: T,
    /// Medium: 33..=256 bytes.
    pub m: T,
    /// Large: 257..=2048 bytes.
    pub l: T,
    /// Extra large: more than 2048 bytes.
    pub x: T,
}

impl<T: Copy> ByClass<T> {
    /// From an array indexed by class.
    pub fn from_array(a: [T; 4]) -> Self {
        Self { s: a[0], m: a[1], l: a[2], x: a[3] }
    }

    /// As an array indexed by class.
    pub fn to_array(self) -> [T; 4] {
        [self.s, self.m, self.l, self.x]
    }
}

/// One row of the allocation bin table.
#[derive(Debug, Clone, Serialize)]
pub struct BinRow {
    /// The exact requested size, or `null` for the bin of sizes above 1024.
    pub size: Option<u64>,
    /// Allocations of this size.
    pub allocs: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Share of all bytes allocated.
    pub bytes_percent: f64,
    /// Releases of blocks of this size.
    pub frees: u64,
    /// Bytes of this size never released.
    pub kept_bytes: u64,
    /// Share of all bytes never released.
    pub kept_percent: f64,
    /// The program's struct, class and union types of this size (from its DWARF), as mprof
    /// showed them.
    pub types: Vec<String>,
}

/// Totals of the bin table.
#[derive(Debug, Clone, Serialize)]
pub struct BinTotal {
    /// All allocations.
    pub allocs: u64,
    /// All bytes.
    pub bytes: u64,
    /// All releases.
    pub frees: u64,
    /// All bytes never released.
    pub kept_bytes: u64,
}

/// The allocation bin table: sizes that occur in increasing order, then the `> 1024` bin.
#[derive(Debug, Clone, Serialize)]
pub struct BinTable {
    /// Rows; the `> 1024` bin is always last.
    pub rows: Vec<BinRow>,
    /// Totals.
    pub total: BinTotal,
}

/// One row of the direct allocation table: a function that called the allocator itself.
#[derive(Debug, Clone, Serialize)]
pub struct DirectRow {
    /// Function name (`<TOTAL>` in the total row).
    pub function: String,
    /// Module basename.
    pub module: Option<String>,
    /// The library function most of its bytes came through (`std::vector<…>::push_back`),
    /// when the attribution passed over library frames to reach it; absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub via: Option<String>,
    /// How many other library functions some of its bytes came through (`via` names the one
    /// most did); absent when none.
    #[serde(skip_serializing_if = "is_zero")]
    pub via_others: u64,
    /// Bytes it allocated.
    pub bytes: u64,
    /// Share of all bytes allocated.
    pub percent: f64,
    /// `bytes` by size class.
    pub bytes_by_class: ByClass<u64>,
    /// `bytes_by_class` as shares of all bytes allocated (mprof's `% mem(size)`).
    pub percent_by_class: ByClass<f64>,
    /// Bytes it allocated that were never released.
    pub kept_bytes: u64,
    /// `kept_bytes` by size class.
    pub kept_by_class: ByClass<u64>,
    /// `kept_by_class` as shares of all kept bytes (mprof's `% all kept`).
    pub kept_percent_by_class: ByClass<f64>,
    /// Allocations it made.
    pub calls: u64,
}

/// The direct allocation table.
#[derive(Debug, Clone, Serialize)]
pub struct DirectTable {
    /// Functions, most bytes first.
    pub rows: Vec<DirectRow>,
    /// Totals over all functions.
    pub total: DirectRow,
}

/// A caller or callee line of a call-graph entry.
#[derive(Debug, Clone, Serialize)]
pub struct CallGraphEdge {
    /// The other entry's name.
    pub name: String,
    /// The other entry's index.
    pub index: usize,
    /// Bytes allocated through this edge (by the callee and its descendants).
    pub bytes: u64,
    /// Of these, bytes the callee allocated itself.
    pub self_bytes: u64,
    /// `bytes` by size class.
    pub bytes_by_class: ByClass<u64>,
    /// Allocations that went through this edge.
    pub calls: u64,
    /// All allocations that went through the callee (gprof's called/total: for callers, the
    /// entry's `calls`; for callees, the callee's).
    pub total_calls: u64,
}

/// One entry of the allocation call graph: a function, or a cycle of mutually recursive
/// functions merged into one node.
#[derive(Debug, Clone, Serialize)]
pub struct CallGraphEntry {
    /// Position in `call_graph`.
    pub index: usize,
    /// Function name, or `<cycle N>`.
    pub name: String,
    /// Module of a single function.
    pub module: Option<String>,
    /// The functions merged into this entry (one for a plain function).
    pub members: Vec<String>,
    /// A strongly connected component of more than one function, or a self-recursive one.
    pub is_cycle: bool,
    /// Bytes the entry allocated directly.
    pub self_bytes: u64,
    /// `self_bytes` by size class.
    pub self_by_class: ByClass<u64>,
    /// Bytes allocated with the entry on the call path (each allocation counted once).
    pub inclusive_bytes: u64,
    /// `inclusive_bytes` as a share of all bytes allocated.
    pub inclusive_percent: f64,
    /// Allocations with the entry on the call path (each counted once).
    pub calls: u64,
    /// Extra frames of the entry in those paths (recursion; gprof's `+recur`).
    pub recursive_calls: u64,
    /// Callers, most bytes first.
    pub callers: Vec<CallGraphEdge>,
    /// Callees, most bytes first.
    pub callees: Vec<CallGraphEdge>,
}

/// The four numbers a diff compares, for a function, a call path or the whole run. Bytes are
/// requested sizes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Metrics {
    /// Bytes allocated.
    pub bytes: u64,
    /// Allocations.
    pub calls: u64,
    /// Bytes in use at the peak (the first moment the process's live bytes were highest).
    pub peak_bytes: u64,
    /// Bytes live at exit (suppressed blocks included: they are the same in both runs).
    pub leaked_bytes: u64,
    /// Allocations freed by their thread's very next event (heaptrack's temporaries).
    pub temporary: u64,
}

/// One function (`key` is its name) or call path (`key` is its frames, outermost first) of a
/// [`Profile`].
#[derive(Debug, Clone, Serialize)]
pub struct ProfileRow {
    /// The function's name, or the path's frames outermost first.
    pub key: Vec<String>,
    /// Its numbers.
    pub metrics: Metrics,
}

/// What `heaplens diff` compares of a run ([`crate::tables::profile`]), when asked for with
/// [`crate::Options::profile`].
#[derive(Debug, Clone, Serialize)]
pub struct Profile {
    /// Per function the allocations are attributed to, sorted by name.
    pub functions: Vec<ProfileRow>,
    /// Per call path (its innermost `depth` frames), sorted.
    pub paths: Vec<ProfileRow>,
    /// Whether the bytes at the peak were counted (not for sampled or aggregated traces).
    pub peak_known: bool,
    /// Frames per path.
    pub depth: usize,
}

/// For `skip_serializing_if`: a count of none.
fn is_zero(n: &u64) -> bool {
    *n == 0
}
