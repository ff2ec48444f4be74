//! Process trees: a build (`g++` running `cc1plus` and `as`, `make -j2` running many) writes
//! one trace per process under `heaplens run --follow-children`, and wants one answer. Each
//! trace is analysed alone (with the same options) and the [`Report`]s are summed here by
//! function: the summary's counts, the leak table by path, the bin table by size and the direct
//! table by (function, module), the call graph by entry ([`call_graph`]). The peak is the
//! largest single process's, since the processes' peaks need not coincide and their heaps are
//! apart anyway.

mod call_graph;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::Write;
use std::path::{Path, PathBuf};

use heaplens_interpret::names::for_terminal;
use serde::Serialize;

use crate::model::{
    BinRow, BinTable, BinTotal, ByClass, DirectRow, DirectTable, LeakRow, Metrics, Profile, ProfileRow, Report,
    Summary, SuppressionRow,
};
use crate::render_text::{self, human_bytes, human_ns, TextOptions};

/// The traces of `first`'s process tree: `first`, then the `FIRST.PID` traces beside it whose
/// Process record's chain of parents leads to `first`'s process (a stale `FIRST.PID` of an
/// earlier run has another parent and stays out).
pub fn family(first: &Path) -> Vec<PathBuf> {
    let mut out = vec![first.to_path_buf()];
    if let Some(root) = heaplens_trace::process_of(first) {
        out.extend(descendants(root.pid, heaplens_trace::naming::child_traces(first)));
    }
    out
}

/// Those of `candidates` whose Process record's chain of parents leads to process `root`, in
/// their order (a trace of `root`'s own pid counts: that process after an exec).
pub fn descendants(root: u32, candidates: Vec<PathBuf>) -> Vec<PathBuf> {
    let kids: Vec<(PathBuf, heaplens_trace::ProcessRecord)> =
        candidates.into_iter().filter_map(|p| heaplens_trace::process_of(&p).map(|r| (p, r))).collect();
    let mut members: HashSet<u32> = HashSet::from([root]);
    let mut joined = vec![false; kids.len()];
    // Names sort grandchildren anywhere among children: join until nothing more joins.
    loop {
        let mut more = false;
        for (i, (_, r)) in kids.iter().enumerate() {
            if !joined[i] && (members.contains(&r.ppid) || members.contains(&r.pid)) {
                joined[i] = true;
                members.insert(r.pid);
                more = true;
            }
        }
        if !more {
            break;
        }
    }
    kids.into_iter().zip(joined).filter(|(_, j)| *j).map(|((p, _), _)| p).collect()
}

/// One process of the tree, a row of the PROCESSES table.
#[derive(Debug, Clone, Serialize)]
pub struct ProcessRow {
    /// Process id (`null` when its Process block was lost).
    pub pid: Option<u32>,
    /// Parent process id.
    pub ppid: Option<u32>,
    /// The executable's basename and its first three arguments (`…` for more), for a table
    /// column, as the trace holds them (unescaped).
    pub program: String,
    /// The executable's path, whole.
    pub exe: String,
    /// The command line, whole.
    pub argv: Vec<String>,
    /// The trace file.
    pub trace: String,
    /// Exit status, when `heaplens run` recorded it (its own child only).
    pub exit_code: Option<i32>,
    /// Terminating signal, when recorded.
    pub exit_signal: Option<i32>,
    /// The monitor shut down cleanly (its End record is there).
    pub complete: bool,
    /// The process exec'd another program here (the pid's next trace goes on from there).
    pub exec: bool,
    /// Successful allocations.
    pub allocations: u64,
    /// Bytes requested by them.
    pub bytes_allocated: u64,
    /// The process's highest live bytes.
    pub peak_bytes: u64,
    /// Bytes live at its exit (suppressions apart).
    pub leaked_bytes: u64,
    /// Its run time, ns.
    pub runtime_ns: u64,
}

/// A process tree's report: its processes, and their tables summed by function in the keys of
/// a single process's report (`summary`, `leaks`, `bins`, `direct`, ...). `process` and `trace`
/// are the first process's.
#[derive(Debug, Clone, Serialize)]
pub struct TreeReport {
    /// The processes, in the order their traces were given (the first process first).
    pub processes: Vec<ProcessRow>,
    /// The process whose peak is `summary.peak_bytes`: a tree's peak is its largest single
    /// process's.
    pub peak_pid: Option<u32>,
    /// The summed report.
    #[serde(flatten)]
    pub merged: Report,
}

/// The program column: the executable's basename and up to three arguments.
fn program(r: &Report) -> String {
    let p = &r.process;
    let exe = Path::new(&p.exe).file_name().map(|n| n.to_string_lossy().into_owned());
    let name = exe.or_else(|| p.argv.first().cloned()).unwrap_or_else(|| "?".into());
    let mut words = vec![name];
    words.extend(p.argv.iter().skip(1).take(3).cloned());
    if p.argv.len() > 4 {
        words.push("…".into());
    }
    words.join(" ")
}

fn add_class(a: &mut ByClass<u64>, b: ByClass<u64>) {
    *a = ByClass { s: a.s + b.s, m: a.m + b.m, l: a.l + b.l, x: a.x + b.x };
}

fn pct(n: u64, total: u64) -> f64 {
    if total == 0 {
        0.0
    } else {
        n as f64 * 100.0 / total as f64
    }
}

fn pct_class(c: ByClass<u64>, total: u64) -> ByClass<f64> {
    ByClass { s: pct(c.s, total), m: pct(c.m, total), l: pct(c.l, total), x: pct(c.x, total) }
}

/// Sums the reports of a tree's processes. `reports` must not be empty; the first is the root.
pub fn merge(reports: &[Report]) -> TreeReport {
    let first = &reports[0];
    let processes = reports
        .iter()
        .map(|r| ProcessRow {
            pid: r.process.pid,
            ppid: r.process.ppid,
            program: program(r),
            exe: r.process.exe.clone(),
            argv: r.process.argv.clone(),
            trace: r.trace.path.clone(),
            exit_code: r.process.exit_code,
            exit_signal: r.process.exit_signal,
            complete: r.trace.complete,
            exec: r.trace.exec,
            allocations: r.summary.allocations,
            bytes_allocated: r.summary.bytes_allocated,
            peak_bytes: r.summary.peak_bytes,
            leaked_bytes: r.summary.leaked_bytes,
            runtime_ns: r.summary.runtime_ns,
        })
        .collect();
    let peak = reports.iter().max_by_key(|r| r.summary.peak_bytes).unwrap_or(first);
    let summary = sum_summaries(reports, peak);
    let leaks = sum_leaks(reports.iter().map(|r| &r.leaks), summary.leaked_bytes);
    let suppressed_leaks = sum_leaks(reports.iter().map(|r| &r.suppressed_leaks), summary.suppressed_bytes);
    let mut merged = Report {
        trace: first.trace.clone(),
        process: first.process.clone(),
        leaks,
        suppressed_leaks,
        suppressions: sum_suppressions(reports),
        bins: sum_bins(reports),
        direct: sum_direct(reports),
        call_graph: call_graph::merge(reports, summary.bytes_allocated),
        lifetimes: None,
        cxx: None,
        profile: sum_profiles(reports, peak),
        summary,
    };
    // The tree is as damaged as its worst trace.
    let t = &mut merged.trace;
    for r in &reports[1..] {
        let o = &r.trace;
        t.truncated |= o.truncated;
        t.corrupt_blocks += o.corrupt_blocks;
        t.malformed_blocks += o.malformed_blocks;
        t.complete &= o.complete;
        t.dropped_events = match (t.dropped_events, o.dropped_events) {
            (Some(a), Some(b)) => Some(a + b),
            (a, b) => a.or(b),
        };
        t.aggregated |= o.aggregated;
        t.incomplete_stacks += o.incomplete_stacks;
    }
    t.events = reports.iter().map(|r| r.trace.events).sum();
    TreeReport { processes, peak_pid: peak.process.pid, merged }
}

/// The processes' profiles summed by key, when each has one. Bytes at the peak are the peak
/// process's alone, as the tree's peak is.
fn sum_profiles(reports: &[Report], peak: &Report) -> Option<Profile> {
    let mut functions: BTreeMap<Vec<String>, Metrics> = BTreeMap::new();
    let mut paths: BTreeMap<Vec<String>, Metrics> = BTreeMap::new();
    let (mut depth, mut peak_known) = (0, true);
    for r in reports {
        let p = r.profile.as_ref()?;
        let is_peak = std::ptr::eq(r, peak);
        depth = depth.max(p.depth);
        peak_known &= p.peak_known;
        for (rows, into) in [(&p.functions, &mut functions), (&p.paths, &mut paths)] {
            for row in rows {
                let m = into.entry(row.key.clone()).or_default();
                m.bytes += row.metrics.bytes;
                m.calls += row.metrics.calls;
                m.leaked_bytes += row.metrics.leaked_bytes;
                m.temporary += row.metrics.temporary;
                if is_peak {
                    m.peak_bytes += row.metrics.peak_bytes;
                }
            }
        }
    }
    let rows =
        |m: BTreeMap<Vec<String>, Metrics>| m.into_iter().map(|(key, metrics)| ProfileRow { key, metrics }).collect();
    Some(Profile { functions: rows(functions), paths: rows(paths), peak_known, depth })
}

fn sum_summaries(reports: &[Report], peak: &Report) -> Summary {
    let sum = |field: fn(&Summary) -> u64| reports.iter().map(|r| field(&r.summary)).sum::<u64>();
    let mut s = Summary { calls_by_kind: BTreeMap::new(), frees_by_kind: BTreeMap::new(), ..peak.summary.clone() };
    s.allocations = sum(|x| x.allocations);
    s.deallocations = sum(|x| x.deallocations);
    s.unmatched_frees = sum(|x| x.unmatched_frees);
    s.frees_before_attach = sum(|x| x.frees_before_attach);
    s.null_frees = sum(|x| x.null_frees);
    s.overwritten_allocations = sum(|x| x.overwritten_allocations);
    s.failed_allocations = sum(|x| x.failed_allocations);
    s.bytes_allocated = sum(|x| x.bytes_allocated);
    s.leaked_bytes = sum(|x| x.leaked_bytes);
    s.leaked_objects = sum(|x| x.leaked_objects);
    s.suppressed_bytes = sum(|x| x.suppressed_bytes);
    s.suppressed_objects = sum(|x| x.suppressed_objects);
    s.temporary_allocations = sum(|x| x.temporary_allocations);
    s.threads = sum(|x| x.threads);
    // The processes overlap in time: the tree ran as long as its longest process.
    s.runtime_ns = reports.iter().map(|r| r.summary.runtime_ns).max().unwrap_or(0);
    s.sample_rate = reports.iter().map(|r| r.summary.sample_rate).max().unwrap_or(0);
    for r in reports {
        for (k, n) in &r.summary.calls_by_kind {
            *s.calls_by_kind.entry(k.clone()).or_default() += n;
        }
        for (k, n) in &r.summary.frees_by_kind {
            *s.frees_by_kind.entry(k.clone()).or_default() += n;
        }
    }
    s
}

fn sum_leaks<'a>(tables: impl Iterator<Item = &'a Vec<LeakRow>>, total: u64) -> Vec<LeakRow> {
    let mut by_path: HashMap<Vec<String>, LeakRow> = HashMap::new();
    for row in tables.flatten() {
        let e = by_path.entry(row.path.clone()).or_insert_with(|| LeakRow {
            path: row.path.clone(),
            cut: false,
            allocs: 0,
            bytes: 0,
            percent: 0.0,
        });
        e.cut |= row.cut;
        e.allocs += row.allocs;
        e.bytes += row.bytes;
    }
    let mut rows: Vec<LeakRow> = by_path.into_values().collect();
    for r in &mut rows {
        r.percent = pct(r.bytes, total);
    }
    rows.sort_by(|a, b| b.bytes.cmp(&a.bytes).then_with(|| a.path.cmp(&b.path)));
    rows
}

fn sum_suppressions(reports: &[Report]) -> Vec<SuppressionRow> {
    let mut rows: Vec<SuppressionRow> = Vec::new();
    for s in reports.iter().flat_map(|r| &r.suppressions) {
        match rows.iter_mut().find(|x| x.pattern == s.pattern && x.origin == s.origin) {
            Some(x) => {
                x.blocks += s.blocks;
                x.bytes += s.bytes;
            }
            None => rows.push(s.clone()),
        }
    }
    rows.sort_by(|a, b| b.bytes.cmp(&a.bytes).then_with(|| a.pattern.cmp(&b.pattern)));
    rows
}

fn sum_bins(reports: &[Report]) -> BinTable {
    let mut by_size: HashMap<Option<u64>, BinRow> = HashMap::new();
    let mut total = BinTotal { allocs: 0, bytes: 0, frees: 0, kept_bytes: 0 };
    for r in reports {
        let t = &r.bins.total;
        total.allocs += t.allocs;
        total.bytes += t.bytes;
        total.frees += t.frees;
        total.kept_bytes += t.kept_bytes;
        for row in &r.bins.rows {
            let e = by_size.entry(row.size).or_insert_with(|| BinRow {
                size: row.size,
                allocs: 0,
                bytes: 0,
                bytes_percent: 0.0,
                frees: 0,
                kept_bytes: 0,
                kept_percent: 0.0,
                types: Vec::new(),
            });
            e.allocs += row.allocs;
            e.bytes += row.bytes;
            e.frees += row.frees;
            e.kept_bytes += row.kept_bytes;
            for ty in &row.types {
                if !e.types.contains(ty) {
                    e.types.push(ty.clone());
                }
            }
        }
    }
    let mut rows: Vec<BinRow> = by_size.into_values().collect();
    for r in &mut rows {
        r.bytes_percent = pct(r.bytes, total.bytes);
        r.kept_percent = pct(r.kept_bytes, total.kept_bytes);
    }
    // Sizes in increasing order, the `> 1024` bin last.
    rows.sort_by_key(|r| (r.size.is_none(), r.size));
    BinTable { rows, total }
}

fn sum_direct(reports: &[Report]) -> DirectTable {
    let empty = |function: &str, module: Option<String>| DirectRow {
        function: function.to_string(),
        module,
        via: None,
        via_others: 0,
        bytes: 0,
        percent: 0.0,
        bytes_by_class: ByClass::default(),
        percent_by_class: ByClass::default(),
        kept_bytes: 0,
        kept_by_class: ByClass::default(),
        kept_percent_by_class: ByClass::default(),
        calls: 0,
    };
    let add = |e: &mut DirectRow, row: &DirectRow| {
        e.bytes += row.bytes;
        add_class(&mut e.bytes_by_class, row.bytes_by_class);
        e.kept_bytes += row.kept_bytes;
        add_class(&mut e.kept_by_class, row.kept_by_class);
        e.calls += row.calls;
    };
    let mut by_fn: HashMap<(String, Option<String>), (DirectRow, u64)> = HashMap::new();
    let mut total = empty(&reports[0].direct.total.function, None);
    for r in reports {
        add(&mut total, &r.direct.total);
        for row in &r.direct.rows {
            let (e, via_bytes) = by_fn
                .entry((row.function.clone(), row.module.clone()))
                .or_insert_with(|| (empty(&row.function, row.module.clone()), 0));
            add(e, row);
            // Others it came through: at least each process's, and another process's top.
            let other_top = row.via.is_some() && e.via.is_some() && row.via != e.via;
            e.via_others = e.via_others.max(row.via_others) + u64::from(other_top);
            // The library function most bytes came through, over all processes.
            if row.via.is_some() && row.bytes >= *via_bytes {
                e.via = row.via.clone();
                *via_bytes = row.bytes;
            }
        }
    }
    let (all, kept) = (total.bytes, total.kept_bytes);
    let finish = |r: &mut DirectRow| {
        r.percent = pct(r.bytes, all);
        r.percent_by_class = pct_class(r.bytes_by_class, all);
        r.kept_percent_by_class = pct_class(r.kept_by_class, kept);
    };
    let mut rows: Vec<DirectRow> = by_fn.into_values().map(|(r, _)| r).collect();
    rows.iter_mut().for_each(finish);
    rows.sort_by(|a, b| b.bytes.cmp(&a.bytes).then_with(|| a.function.cmp(&b.function)));
    finish(&mut total);
    DirectTable { rows, total }
}

/// The tree's text report: the PROCESSES table, the summed summary (with a line on what its
/// peak is), then the summed tables `o` selects.
pub fn render(t: &TreeReport, o: &TextOptions) -> String {
    let mut out = String::new();
    let r = &t.merged;
    if o.summary {
        let _ =
            writeln!(out, "heaplens report: process tree of {} processes, from {}", t.processes.len(), r.trace.path);
        let _ = writeln!(out);
        let _ = writeln!(out, "PROCESSES");
        let _ = writeln!(
            out,
            "  {:>8} {:>8} {:>12} {:>12} {:>12} {:>10}  {:<10} program",
            "pid", "parent", "allocations", "peak bytes", "leaked", "run time", "ended"
        );
        for p in &t.processes {
            let id = |n: Option<u32>| n.map_or("?".to_string(), |n| n.to_string());
            let ended = match (p.exit_code, p.exit_signal) {
                (_, Some(sig)) => format!("signal {sig}"),
                (Some(c), None) => format!("status {c}"),
                (None, None) if p.exec => "exec'd".into(),
                (None, None) if p.complete => "exited".into(),
                (None, None) => "unknown".into(),
            };
            let _ = writeln!(
                out,
                "  {:>8} {:>8} {:>12} {:>12} {:>12} {:>10}  {:<10} {}",
                id(p.pid),
                id(p.ppid),
                p.allocations,
                human_bytes(p.peak_bytes),
                human_bytes(p.leaked_bytes),
                human_ns(p.runtime_ns),
                ended,
                for_terminal(&p.program)
            );
        }
        let _ = writeln!(out);
        let _ = writeln!(out, "Summed over the processes by function; one process alone: --process PID.");
        render_text::totals(r, &mut out);
        let pid = t.peak_pid.map_or("?".to_string(), |n| n.to_string());
        let _ = writeln!(
            out,
            "  {:<20} the largest single process's (pid {pid}): the processes' heaps are apart",
            "(peak)"
        );
    }
    let rest = TextOptions { summary: false, ..o.clone() };
    let tables = render_text::render(r, &rest);
    if !tables.is_empty() {
        out.push('\n');
        out.push_str(&tables);
    }
    render_text::terminal_lines(&out)
}
