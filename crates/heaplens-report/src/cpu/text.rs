//! `heaplens report --cpu` as text: gprof's flat profile and call graph, CPU time per thread.
//! Names (functions, modules, threads) come from the trace: each is written through
//! `names::for_terminal`, and the whole text through `render_text::terminal_lines`.

use std::fmt::Write;

use heaplens_interpret::names::for_terminal;

use super::model::{CpuGraphEdge, CpuReport};
use crate::render_text::{human_ns, process_lines, terminal_lines};

/// Renders the profile; `top` rows per table (0 = all).
pub fn render(r: &CpuReport, top: usize) -> String {
    terminal_lines(&render_raw(r, top))
}

fn render_raw(r: &CpuReport, top: usize) -> String {
    let limit = |n: usize| if top == 0 { n } else { n.min(top) };
    let mut out = String::new();
    let o = &mut out;
    let _ = writeln!(o, "heaplens report --cpu: {}", for_terminal(&r.trace.path));
    process_lines(&r.trace, &r.process, o);
    for w in &r.trace.symbol_warnings {
        let _ = writeln!(o, "  warning              {}", for_terminal(w));
    }
    let _ = writeln!(o);
    let _ = writeln!(o, "CPU SAMPLES");
    if r.samples == 0 {
        let _ = writeln!(o, "  none: record with `heaplens run --cpu` (or --cpu-only) to sample CPU time");
        return out;
    }
    let _ = writeln!(
        o,
        "  {:<20} {:>14}  at {} Hz of each thread's CPU time (one per {})",
        "samples",
        r.samples,
        r.rate_hz,
        human_ns(r.period_ns)
    );
    let _ = writeln!(o, "  {:<20} {:>14}", "CPU time", human_ns(r.cpu_ns));
    if r.samples_dropped > 0 {
        let _ = writeln!(
            o,
            "  {:<20} {:>14}  (the thread was in the monitor, recording an allocation, or its ring was full)",
            "samples not taken", r.samples_dropped
        );
    }
    if let Some(m) = &r.monitor {
        let _ = writeln!(
            o,
            "  {:<20} {:>14}  {:.2}% of the CPU time sampled: {} in the sampling handler, {} in the writer thread",
            "monitor's own time",
            human_ns(m.sampler_ns.saturating_add(m.writer_cpu_ns)),
            m.percent,
            human_ns(m.sampler_ns),
            human_ns(m.writer_cpu_ns)
        );
    }
    let _ = writeln!(o, "  {:<20} {:>14}", "threads sampled", r.threads.len());
    let _ = writeln!(o);

    let _ = writeln!(o, "CPU TIME BY THREAD");
    let _ =
        writeln!(o, "  {:>8} {:<16} {:>9} {:>12} {:>6}  hottest function", "tid", "name", "samples", "CPU time", "%");
    for t in &r.threads[..limit(r.threads.len())] {
        let _ = writeln!(
            o,
            "  {:>8} {:<16} {:>9} {:>12} {:>6.1}  {}",
            t.tid,
            for_terminal(&t.name),
            t.samples,
            human_ns(t.cpu_ns),
            t.percent,
            for_terminal(&t.top_function)
        );
    }
    let _ = writeln!(o);

    let _ = writeln!(o, "FLAT PROFILE (gprof layout: functions by CPU time spent in them)");
    let _ =
        writeln!(o, "  self: samples with the function innermost; total: with it anywhere on the stack (once each)");
    let _ = writeln!(
        o,
        "  {:>6} {:>7} {:>12} {:>8} {:>6} {:>12} {:>8}  function",
        "%self", "cumul%", "self", "samples", "%total", "total", "samples"
    );
    for f in &r.flat[..limit(r.flat.len())] {
        let module = f.module.as_deref().map(|m| format!(" ({})", for_terminal(m))).unwrap_or_default();
        let _ = writeln!(
            o,
            "  {:>6.1} {:>7.1} {:>12} {:>8} {:>6.1} {:>12} {:>8}  {}{}",
            f.self_percent,
            f.cumulative_percent,
            human_ns(f.self_ns),
            f.self_samples,
            f.inclusive_percent,
            human_ns(f.inclusive_ns),
            f.inclusive_samples,
            for_terminal(&f.function),
            module
        );
    }
    if r.flat.len() > limit(r.flat.len()) {
        let _ = writeln!(o, "  ... {} more functions (--top 0 shows all)", r.flat.len() - limit(r.flat.len()));
    }
    let _ = writeln!(o);

    let _ = writeln!(o, "CPU CALL GRAPH (gprof layout: callers above each entry, callees below)");
    let _ = writeln!(
        o,
        "  self: CPU time in the entry itself; self+desc: with its callees; called: samples through it\n  \
         caller and callee lines: the same through that edge; called = via the edge / via the callee"
    );
    let _ = writeln!(o, "  {:<7} {:>6} {:>12} {:>12} {:>13}  name", "index", "%total", "self", "self+desc", "called");
    let rule = format!("  {}", "-".repeat(86));
    let edge = |o: &mut String, e: &CpuGraphEdge| {
        let called = format!("{}/{}", e.samples, e.total_samples);
        let _ = writeln!(
            o,
            "  {:<7} {:>6} {:>12} {:>12} {:>13}      {} [{}]",
            "",
            "",
            human_ns(e.self_ns),
            human_ns(e.ns),
            called,
            for_terminal(&e.name),
            e.index
        );
    };
    let n = limit(r.call_graph.len());
    for e in &r.call_graph[..n] {
        let _ = writeln!(o, "{rule}");
        for c in &e.callers {
            edge(o, c);
        }
        let called = if e.recursive_samples > 0 {
            format!("{}+{}", e.samples, e.recursive_samples)
        } else {
            e.samples.to_string()
        };
        let _ = writeln!(
            o,
            "  {:<7} {:>6.1} {:>12} {:>12} {:>13}  {} [{}]",
            format!("[{}]", e.index),
            e.inclusive_percent,
            human_ns(e.self_ns),
            human_ns(e.inclusive_ns),
            called,
            for_terminal(&e.name),
            e.index
        );
        if e.is_cycle {
            let _ = writeln!(
                o,
                "  {:<7} {:>6} {:>12} {:>12} {:>13}    members: {}",
                "",
                "",
                "",
                "",
                "",
                e.members.iter().map(|m| for_terminal(m)).collect::<Vec<_>>().join(", ")
            );
        }
        for c in &e.callees {
            edge(o, c);
        }
    }
    if n > 0 {
        let _ = writeln!(o, "{rule}");
    }
    if r.call_graph.len() > n {
        let _ = writeln!(o, "  ... {} more entries (--top 0 shows all)", r.call_graph.len() - n);
    }
    out
}
