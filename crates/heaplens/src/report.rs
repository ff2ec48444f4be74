//! `heaplens report`: load a trace, analyse it, print the summary and mprof's tables as text or
//! as one JSON document.

use std::io::{self, IsTerminal, Write};
use std::path::{Path, PathBuf};

use anyhow::Context;
use heaplens_report::render_text::{self, TextOptions};
use heaplens_report::{analyze_file, Options, Report};

use crate::{Format, ReportArgs};

/// Has glibc's malloc grow a heap by at least 64 MiB of address space at a time. The report
/// allocates hundreds of MiB in its reader and replay threads, whose arenas otherwise grow by
/// one `mprotect` call per allocation that does not fit (4000-6000 calls a report). Address
/// space only: a page still costs memory only once touched. The python3 report took 0.95 of
/// its time, sqlite3's 0.97, gcc's 0.97 (9 interleaved rounds).
fn grow_heaps_in_large_steps() {
    // SAFETY: mallopt only sets a malloc parameter; M_TOP_PAD is -2 in glibc's malloc.h.
    #[cfg(target_env = "gnu")]
    unsafe {
        const M_TOP_PAD: libc::c_int = -2;
        libc::mallopt(M_TOP_PAD, 64 << 20);
    }
}

/// Runs `heaplens report`. Errors (unreadable file, not a trace) come back as one line; a
/// damaged trace is reported as far as it reads, with a warning on stderr.
pub fn execute(a: &ReportArgs) -> anyhow::Result<()> {
    grow_heaps_in_large_steps();
    let opts = Options {
        leak_depth: a.leak_depth as usize,
        call_sites: a.call_sites,
        progress: io::stderr().is_terminal(),
        lifetimes: a.lifetimes,
        cxx: a.cxx,
        naming: heaplens_interpret::paths::Naming { by_line: a.lines, full_names: a.full_names },
        attribution: a.attribution.rule()?,
        payload_budget: (a.memory << 20) as usize,
        profile: false,
    };
    let traces = traces(a)?;
    if traces.len() > 1 && (a.cpu || a.cxx || a.lifetimes || cpu_only(&traces[0])) {
        let first = heaplens_trace::process_of(&traces[0]).map_or_else(String::new, |p| format!(" (pid {})", p.pid));
        eprintln!(
            "heaplens: note: {} is the first of {} processes; with --cpu, --cxx or --lifetimes the whole \
             report is of one process, this first one{first}: choose another with --process PID, or \
             leave those options out for the tree's summed tables",
            traces[0].display(),
            traces.len()
        );
    }
    let trace = match traces.as_slice() {
        [t] => t,
        [t, ..] if a.cpu || a.cxx || a.lifetimes || cpu_only(t) => t,
        _ => return tree_report(a, &opts, &traces),
    };
    if a.cpu || cpu_only(trace) {
        return cpu_report(a, trace, &opts);
    }
    memory_report(a, trace, &opts)
}

/// The traces to report: those given, or the first of a `--follow-children` run with the
/// traces of its process tree beside it; with `--process`, the one of that pid.
fn traces(a: &ReportArgs) -> anyhow::Result<Vec<PathBuf>> {
    let all = match a.traces.as_slice() {
        [first] if a.alone => vec![first.clone()],
        [first] => heaplens_report::tree::family(first),
        given => {
            // One file named twice (or through a link) is one process, not two.
            let mut seen = std::collections::HashSet::new();
            given
                .iter()
                .filter(|t| {
                    std::fs::metadata(t).map_or(true, |m| {
                        seen.insert((std::os::unix::fs::MetadataExt::dev(&m), std::os::unix::fs::MetadataExt::ino(&m)))
                    })
                })
                .cloned()
                .collect()
        }
    };
    let Some(pid) = a.process else { return Ok(all) };
    let mut pids = Vec::new();
    for t in &all {
        // After an exec a pid has a trace per program; the last is the one that ran on.
        if heaplens_trace::process_of(t).is_some_and(|p| p.pid == pid) {
            pids.push(t.clone());
        }
    }
    if pids.len() > 1 {
        // The images before the exec are reachable by their own files.
        let me = crate::invocation::invoked_as();
        let earlier: Vec<String> =
            pids[..pids.len() - 1].iter().map(|t| format!("{me} report --alone {}", t.display())).collect();
        eprintln!(
            "heaplens: note: process {pid} exec'd: this is its last program; before the exec: {}",
            earlier.join(" or ")
        );
    }
    match pids.pop() {
        Some(t) => Ok(vec![t]),
        None => anyhow::bail!(
            "no trace of process {pid} among {} (its processes: {})",
            a.traces[0].display(),
            all.iter()
                .filter_map(|t| heaplens_trace::process_of(t).map(|p| p.pid.to_string()))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// The reports of a process tree's traces, the first first; a child's trace that cannot be
/// read is left out with a warning (one unreadable child should not hide the rest of a build).
pub fn analyze_tree(traces: &[PathBuf], opts: &Options) -> anyhow::Result<Vec<Report>> {
    let mut reports = Vec::with_capacity(traces.len());
    for (i, t) in traces.iter().enumerate() {
        let r = match analyze_file(t, opts) {
            Ok(r) => r,
            Err(e) if i > 0 => {
                eprintln!("heaplens: warning: {}: left out of the process tree: {e}", t.display());
                continue;
            }
            Err(e) => return Err(e.into()),
        };
        warn_if_damaged(&r);
        reports.push(r);
    }
    Ok(reports)
}

/// Several traces: the process tree's report, summed over its processes.
fn tree_report(a: &ReportArgs, opts: &Options, traces: &[PathBuf]) -> anyhow::Result<()> {
    let reports = analyze_tree(traces, opts)?;
    let tree = heaplens_report::tree::merge(&reports);
    match a.format {
        Format::Text => print(&heaplens_report::tree::render(&tree, &text_options(a, opts))),
        Format::Json => print_json(&tree),
    }
}

fn text_options(a: &ReportArgs, opts: &Options) -> TextOptions {
    let only = a.leaks || a.bins || a.direct || a.call_graph || a.cxx;
    TextOptions {
        summary: !only,
        leaks: !only || a.leaks,
        suppressed: !only,
        bins: !only || a.bins,
        direct: !only || a.direct,
        call_graph: !only || a.call_graph,
        top: a.top,
        leak_depth: opts.leak_depth,
    }
}

/// The memory report (summary and tables) in the format asked for.
fn memory_report(a: &ReportArgs, trace: &Path, opts: &Options) -> anyhow::Result<()> {
    let report = analyze_file(trace, opts)?;
    warn_if_damaged(&report);
    if (a.cxx && report.cxx.is_none()) || (a.lifetimes && report.lifetimes.is_none()) {
        eprintln!(
            "heaplens: warning: {}: recorded with --aggregate, the trace has counters but no events: \
             --cxx and --lifetimes need the events (record without --aggregate)",
            trace.display()
        );
    }
    match a.format {
        Format::Text => print(&render_text::render(&report, &text_options(a, opts))),
        Format::Json => print_json(&report),
    }
}

/// `heaplens report --cpu`.
fn cpu_report(a: &ReportArgs, trace: &Path, opts: &Options) -> anyhow::Result<()> {
    let r = heaplens_report::cpu::cpu_report_file(trace, opts.naming, opts.progress)?;
    if r.samples == 0 && !a.cpu {
        // No samples after all (a damaged trace that looked recorded with --cpu-only): the
        // memory report says what there is.
        return memory_report(a, trace, opts);
    }
    if r.trace.truncated || r.trace.corrupt_blocks > 0 || r.trace.malformed_blocks > 0 {
        eprintln!(
            "heaplens: warning: {}: damaged trace, reporting what could be read: {}",
            r.trace.path,
            render_text::health_of(&r.trace)
        );
    }
    match a.format {
        Format::Text => print(&heaplens_report::cpu::text::render(&r, a.top)),
        Format::Json => print_json(&r),
    }
}

/// Whether the trace was recorded with `--cpu-only`: it has CPU samples and no allocation
/// events. Read from the monitor's settings in the Process record would be cheaper, but
/// older traces lack them; the first blocks tell.
fn cpu_only(trace: &std::path::Path) -> bool {
    heaplens_interpret::cpu::recorded_cpu_only(trace)
}

/// Writes `value` as pretty JSON and a line end to stdout, streamed: a report of 145,000
/// functions made a document of hundreds of megabytes when it was built as a string first.
pub fn print_json(value: &impl serde::Serialize) -> anyhow::Result<()> {
    let mut stdout = io::BufWriter::with_capacity(1 << 16, io::stdout().lock());
    written(
        serde_json::to_writer_pretty(&mut stdout, value)
            .map_err(io::Error::from)
            .and_then(|()| stdout.write_all(b"\n"))
            .and_then(|()| stdout.flush()),
    )
}

/// Writes a report to stdout.
pub fn print(out: &str) -> anyhow::Result<()> {
    let mut stdout = io::stdout().lock();
    written(stdout.write_all(out.as_bytes()).and_then(|()| stdout.flush()))
}

/// The outcome of writing a report to stdout: `heaplens report t | head` is not an error.
fn written(r: io::Result<()>) -> anyhow::Result<()> {
    match r {
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(()),
        r => r.context("cannot write the report"),
    }
}

pub fn warn_if_damaged(r: &Report) {
    let t = &r.trace;
    // A wrapper (a shell-script shim) that execs the real program leaves a trace of the
    // wrapper alone, which would otherwise read as the program's.
    if t.exec_unfollowed {
        eprintln!("heaplens: warning: {}: {}", t.path, render_text::exec_warning(r.process.attached));
    }
    // Stacks missing their nodes: a stack id the trie never defined, which only damage names.
    if t.truncated || t.corrupt_blocks > 0 || t.malformed_blocks > 0 || t.incomplete_stacks > 0 {
        eprintln!(
            "heaplens: warning: {}: damaged trace, reporting what could be read: {}",
            t.path,
            render_text::health(r)
        );
    }
}
