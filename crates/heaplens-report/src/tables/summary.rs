//! The summary and the trace/process headers.

use std::collections::BTreeMap;

use heaplens_trace::Op;

use super::count;
use crate::model::{ProcessInfo, Summary, TraceInfo};
use crate::replay::Replay;
use heaplens_interpret::load::Trace;

/// The trace's condition.
pub fn trace_info(t: &Trace, r: &Replay, incomplete_stacks: u64) -> TraceInfo {
    TraceInfo {
        path: t.path.display().to_string(),
        truncated: t.health.truncated_at.is_some(),
        truncated_at: t.health.truncated_at,
        corrupt_blocks: t.health.corrupt_blocks,
        malformed_blocks: t.health.malformed_blocks + r.malformed_blocks,
        complete: t.health.end_seen,
        dropped_events: t.end.map(|e| e.dropped),
        events: r.events,
        exec_unfollowed: t.end.is_some_and(|e| e.exec_unfollowed),
        exec: t.end.is_some_and(|e| e.exec),
        sample_rate: r.sample_rate,
        detached: t.end.is_some_and(|e| e.detached),
        aggregated: t.aggregate.is_some(),
        incomplete_stacks,
        symbol_warnings: Vec::new(),
        time_unit_ns: t.clock.span_ns(1).max(1),
        coarse_time_events: t.times.coarse_events,
        coarse_time_unit_ns: if t.times.coarse_events > 0 { t.clock.span_ns(1 << t.times.max_shift) } else { 0 },
    }
}

/// Who was profiled and how it ended.
pub fn process_info(t: &Trace) -> ProcessInfo {
    let p = t.process.clone().unwrap_or_default();
    ProcessInfo {
        pid: t.process.as_ref().map(|p| p.pid),
        ppid: t.process.as_ref().map(|p| p.ppid),
        exe: p.exe.to_string_lossy().into_owned(),
        argv: p.argv,
        exit_code: t.exit.and_then(|e| e.code),
        exit_signal: t.exit.and_then(|e| e.signal),
        thread_names: t.thread_names.iter().map(|n| (n.tid, n.name.clone())).collect(),
        attached: p.attached,
        recording_start_unix_ns: t.process.as_ref().map(|p| p.start_unix_ns),
        recording_stop_unix_ns: t
            .process
            .as_ref()
            .zip(t.end)
            .map(|(p, e)| p.start_unix_ns.saturating_add(e.end_mono_ns.saturating_sub(p.start_mono_ns))),
    }
}

/// The monotonic time the process started: the Process record's, else the first event's.
pub fn start_ns(t: &Trace, r: &Replay) -> u64 {
    match &t.process {
        Some(p) if p.start_mono_ns != 0 => p.start_mono_ns,
        _ => r.first_ts.unwrap_or(0),
    }
}

/// The monotonic time the run ended: the exit record's, else the End record's, else the last
/// event's.
pub fn end_ns(t: &Trace, r: &Replay) -> u64 {
    let recorded =
        t.exit.map(|e| e.end_mono_ns).filter(|&n| n != 0).or(t.end.map(|e| e.end_mono_ns).filter(|&n| n != 0));
    recorded.or(r.last_ts).unwrap_or(0)
}

/// Totals.
pub fn summary(t: &Trace, r: &Replay) -> Summary {
    let by_label = |counts: &[f64]| -> BTreeMap<String, u64> {
        Op::ALL
            .iter()
            .filter(|&&op| counts.get(op as usize).copied().unwrap_or(0.0) > 0.0)
            .map(|&op| (op.label().to_string(), count(counts[op as usize])))
            .collect()
    };
    let start = start_ns(t, r);
    // Attached: a release of an address not seen allocated frees a block from before the
    // attach, which is no mystery and no error.
    let attached = t.process.as_ref().is_some_and(|p| p.attached);
    let unseen = count(r.unmatched_frees);
    Summary {
        calls_by_kind: by_label(&r.calls_by_op),
        frees_by_kind: by_label(&r.frees_by_op),
        sample_rate: r.sample_rate,
        allocations: count(r.allocations),
        deallocations: count(r.deallocations),
        unmatched_frees: if attached { 0 } else { unseen },
        frees_before_attach: if attached { unseen } else { 0 },
        null_frees: count(r.null_frees) + t.end.map_or(0, |e| e.null_frees),
        overwritten_allocations: count(r.overwritten),
        failed_allocations: count(r.failed_allocations),
        bytes_allocated: count(r.bytes_allocated),
        peak_bytes: count(r.peak_bytes),
        peak_objects: count(r.peak_objects),
        peak_time_ns: if r.peak_bytes > 0.0 { r.peak_ts.saturating_sub(start) } else { 0 },
        leaked_bytes: count(r.leaked_bytes),
        leaked_objects: count(r.leaked_objects),
        suppressed_bytes: 0,
        suppressed_objects: 0,
        temporary_allocations: count(r.temporary_allocations),
        runtime_ns: end_ns(t, r).saturating_sub(start),
        threads: r.threads,
    }
}
