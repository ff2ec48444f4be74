//! `heaplens report --cpu`: the CPU-time samples of `heaplens run --cpu` as MemProfLib's
//! profiling mode shows them (reference 002): gprof's flat profile and call graph, per
//! function, with time per thread. The call graph is the allocation call graph's code
//! ([`crate::tables::callgraph`]) fed with CPU time for bytes and samples for allocations, so
//! both graphs merge cycles and count alike.

pub mod model;
pub mod text;

use std::path::Path;

use heaplens_interpret::cpu::CpuSamples;
use heaplens_interpret::load::{LoadError, Sink, Trace};
use heaplens_interpret::paths::{resolve_samples, FrameTable, Naming, Paths};
use heaplens_interpret::Symbolizer;
use rustc_hash::FxHashSet as HashSet;

use crate::replay::{Replay, StackStats};
use crate::tables::{callgraph, pct, summary, Inputs};
use model::{CpuGraphEdge, CpuGraphEntry, CpuReport, CpuThread, FlatRow, MonitorCost};

/// Reads the samples of the trace at `path` (its events are skipped) and builds the profile,
/// symbolizing as the other views do.
///
/// # Errors
/// [`LoadError`] when the file cannot be read or is not a heaplens trace.
pub fn cpu_report_file(path: &Path, naming: Naming, progress: bool) -> Result<CpuReport, LoadError> {
    let t = Trace::load_into(path, None, &mut SkipEvents)?;
    let (mut sym, _damaged) = heaplens_interpret::symbolize::for_trace(path, &t);
    Ok(cpu_report(&t, sym.as_mut(), naming, progress))
}

/// The profile of a loaded trace's samples.
pub fn cpu_report(t: &Trace, sym: &mut dyn Symbolizer, naming: Naming, progress: bool) -> CpuReport {
    let samples = CpuSamples::of(t);
    let by_stack = samples.by_stack();
    let ids: Vec<u32> = by_stack.iter().map(|&(s, _, _)| s).collect();
    let (frames, paths) = resolve_samples(&t.stacks, &ids, sym, progress, naming);
    let total_ns = samples.cpu_ns();
    // The allocation call graph's input, in CPU units: a "byte" is a nanosecond, an
    // "allocation" a sample.
    let replay = Replay {
        bytes_allocated: total_ns as f64,
        stacks: by_stack
            .iter()
            .map(|&(stack, n, ns)| StackStats {
                stack,
                allocs: n as f64,
                bytes: ns as f64,
                bytes_by_class: [ns as f64, 0.0, 0.0, 0.0],
                ..StackStats::default()
            })
            .collect(),
        ..Replay::default()
    };
    let inp = Inputs { replay: &replay, frames: &frames, paths: &paths, replaced: false };
    let mut info = summary::trace_info(t, &replay, paths.incomplete);
    info.symbol_warnings = sym.warnings();
    info.events = 0;
    let process = summary::process_info(t);
    // The rate asked for, as the Process record states it; else what the period implies.
    let hz = match t.process.as_ref().map_or(0, |p| p.cpu_hz) {
        0 => (1_000_000_000 + samples.period_ns / 2).checked_div(samples.period_ns).unwrap_or(0),
        hz => u64::from(hz),
    };
    let threads = threads(&samples, &process.thread_names, &frames, &paths, &ids, total_ns);
    CpuReport {
        trace: info,
        process,
        rate_hz: hz,
        period_ns: samples.period_ns,
        samples: samples.count(),
        cpu_ns: total_ns,
        samples_dropped: t.end.map_or(0, |e| e.samples_dropped),
        monitor: t.end.map(|e| MonitorCost {
            sampler_ns: e.sampler_ns,
            writer_cpu_ns: e.writer_cpu_ns,
            percent: e.sampler_ns.saturating_add(e.writer_cpu_ns) as f64 * 100.0 / total_ns.max(1) as f64,
        }),
        threads,
        flat: flat(&by_stack, &frames, &paths, total_ns),
        call_graph: callgraph::call_graph(inp).into_iter().map(entry).collect(),
    }
}

/// Per-thread totals and each thread's hottest function.
fn threads(
    s: &CpuSamples,
    names: &std::collections::BTreeMap<u32, String>,
    frames: &FrameTable,
    paths: &Paths,
    ids: &[u32],
    total_ns: u64,
) -> Vec<CpuThread> {
    let mut out: Vec<CpuThread> = s
        .threads
        .iter()
        .map(|th| {
            let mut self_ns: rustc_hash::FxHashMap<u32, u64> = Default::default();
            for x in &th.samples {
                if let Ok(i) = ids.binary_search(&x.stack) {
                    if let Some(&site) = paths.get(i).first() {
                        {
                            let e = self_ns.entry(frames.function_of(site)).or_default();
                            *e = e.saturating_add(x.cpu_ns);
                        }
                    }
                }
            }
            let top = self_ns.iter().max_by_key(|&(f, ns)| (*ns, std::cmp::Reverse(*f))).map(|(&f, _)| f);
            CpuThread {
                tid: th.tid,
                name: names.get(&th.tid).cloned().unwrap_or_default(),
                samples: th.samples.len() as u64,
                cpu_ns: th.cpu_ns(),
                percent: pct(th.cpu_ns(), total_ns),
                top_function: top.map(|f| frames.name(f).to_string()).unwrap_or_default(),
            }
        })
        .collect();
    out.sort_by(|a, b| b.cpu_ns.cmp(&a.cpu_ns).then(a.tid.cmp(&b.tid)));
    out
}

/// gprof's flat profile: self time by innermost function, inclusive time once per sample.
fn flat(by_stack: &[(u32, u64, u64)], frames: &FrameTable, paths: &Paths, total_ns: u64) -> Vec<FlatRow> {
    #[derive(Default, Clone, Copy)]
    struct Acc {
        self_n: u64,
        self_ns: u64,
        incl_n: u64,
        incl_ns: u64,
    }
    let mut acc: rustc_hash::FxHashMap<u32, Acc> = Default::default();
    let mut seen: HashSet<u32> = HashSet::default();
    for (i, &(_, n, ns)) in by_stack.iter().enumerate() {
        let path = paths.get(i);
        let Some(&inner) = path.first() else { continue };
        let a = acc.entry(frames.function_of(inner)).or_default();
        // Saturating, as every sum of sample times: a damaged trace's are any number.
        a.self_n += n;
        a.self_ns = a.self_ns.saturating_add(ns);
        seen.clear();
        for &site in path {
            let f = frames.function_of(site);
            if seen.insert(f) {
                let a = acc.entry(f).or_default();
                a.incl_n += n;
                a.incl_ns = a.incl_ns.saturating_add(ns);
            }
        }
    }
    let mut rows: Vec<(u32, Acc)> = acc.into_iter().collect();
    rows.sort_by(|(fa, a), (fb, b)| {
        b.self_ns.cmp(&a.self_ns).then(b.incl_ns.cmp(&a.incl_ns)).then_with(|| frames.name(*fa).cmp(frames.name(*fb)))
    });
    let mut cumulative = 0u64;
    rows.into_iter()
        .map(|(f, a)| {
            cumulative = cumulative.saturating_add(a.self_ns);
            FlatRow {
                function: frames.name(f).to_string(),
                module: frames.functions[f as usize].module.clone(),
                self_samples: a.self_n,
                self_ns: a.self_ns,
                self_percent: pct(a.self_ns, total_ns),
                cumulative_percent: pct(cumulative, total_ns),
                inclusive_samples: a.incl_n,
                inclusive_ns: a.incl_ns,
                inclusive_percent: pct(a.incl_ns, total_ns),
            }
        })
        .collect()
}

/// An allocation call graph entry read back in CPU units.
fn entry(e: crate::model::CallGraphEntry) -> CpuGraphEntry {
    let edge = |x: crate::model::CallGraphEdge| CpuGraphEdge {
        name: x.name,
        index: x.index,
        ns: x.bytes,
        self_ns: x.self_bytes,
        samples: x.calls,
        total_samples: x.total_calls,
    };
    CpuGraphEntry {
        index: e.index,
        name: e.name,
        module: e.module,
        members: e.members,
        is_cycle: e.is_cycle,
        self_ns: e.self_bytes,
        inclusive_ns: e.inclusive_bytes,
        inclusive_percent: e.inclusive_percent,
        samples: e.calls,
        recursive_samples: e.recursive_calls,
        callers: e.callers.into_iter().map(edge).collect(),
        callees: e.callees.into_iter().map(edge).collect(),
    }
}

/// Reads a trace's records, skipping its events.
struct SkipEvents;

impl Sink for SkipEvents {
    fn events(&mut self, _t: &mut Trace, _tid: u32, _payload: Vec<u8>, _offset: u64) {}
}
