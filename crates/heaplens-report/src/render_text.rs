//! The text rendering of a [`Report`]: aligned tables for people, laid out as mprof laid them
//! out (percent cells below 1% are left blank, as mprof does, so the eye finds what matters).
//!
//! Names come from the trace, so each is written through `names::for_terminal` (one name,
//! one line, nothing a terminal acts on), and every finished line once more
//! ([`terminal_lines`]) for whatever text quotes the trace without being a name.

use std::fmt::Write;

use heaplens_interpret::names::for_terminal;
use heaplens_trace::Op;

use crate::model::{ByClass, CallGraphEdge, Report};

/// Which sections to print and how many rows.
#[derive(Debug, Clone)]
pub struct TextOptions {
    /// The summary block.
    pub summary: bool,
    /// The memory leak table.
    pub leaks: bool,
    /// The suppressed blocks, after the leak table (the leaks alone leave them out).
    pub suppressed: bool,
    /// The allocation bin table.
    pub bins: bool,
    /// The direct allocation table.
    pub direct: bool,
    /// The allocation call graph.
    pub call_graph: bool,
    /// Rows per table (0 = all).
    pub top: usize,
    /// The leak depth the report was built with (for the table's title).
    pub leak_depth: usize,
}

impl Default for TextOptions {
    fn default() -> Self {
        Self {
            summary: true,
            leaks: true,
            suppressed: true,
            bins: true,
            direct: true,
            call_graph: true,
            top: 20,
            leak_depth: 5,
        }
    }
}

impl TextOptions {
    fn limit(&self, n: usize) -> usize {
        if self.top == 0 {
            n
        } else {
            n.min(self.top)
        }
    }
}

/// Appends one section's text.
type Section = fn(&Report, &TextOptions, &mut String);

/// Renders the selected sections.
pub fn render(r: &Report, o: &TextOptions) -> String {
    let mut out = String::new();
    let sections: [(bool, Section); 7] = [
        (o.summary, summary),
        (o.leaks, leaks),
        (o.bins, bins),
        (o.direct, direct),
        (o.call_graph, call_graph),
        (r.lifetimes.is_some(), lifetimes),
        (r.cxx.is_some(), cxx),
    ];
    for (on, f) in sections {
        if on {
            if !out.is_empty() {
                out.push('\n');
            }
            f(r, o, &mut out);
        }
    }
    terminal_lines(&out)
}

/// `text` with each line's trailing spaces trimmed (blank cells leave them; they only get in
/// the way of diffs and copy-paste) and anything in it a terminal would act on escaped.
pub fn terminal_lines(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        out.push_str(&for_terminal(line.trim_end()));
        out.push('\n');
    }
    out
}

/// Names as a table shows them: escaped, and joined by `sep`.
fn joined(names: &[String], sep: &str) -> String {
    names.iter().map(|n| for_terminal(n)).collect::<Vec<_>>().join(sep)
}

/// `1.95 MiB`-style size.
pub fn human_bytes(n: u64) -> String {
    heaplens_interpret::units::human_bytes_to(n, 2)
}

/// `1.234 s` / `12.3 ms` / `45 µs`-style duration.
pub fn human_ns(ns: u64) -> String {
    match ns {
        0..=999 => format!("{ns} ns"),
        1_000..=999_999 => format!("{:.1} µs", ns as f64 / 1e3),
        1_000_000..=999_999_999 => format!("{:.1} ms", ns as f64 / 1e6),
        _ => format!("{:.3} s", ns as f64 / 1e9),
    }
}

/// An argument as a shell would need it, on one line: bare when safe, single-quoted when it has
/// spaces or shell syntax, double-quoted with escapes (`"a\nb"`) when it has characters a
/// terminal acts on.
fn shell_quote(a: &str) -> String {
    let safe = |c: char| c.is_ascii_alphanumeric() || "_@%+=:,./-".contains(c);
    if !a.is_empty() && a.chars().all(safe) {
        a.to_string()
    } else if for_terminal(a) != a {
        format!("\"{}\"", for_terminal(&a.replace('\\', "\\\\").replace('"', "\\\"")))
    } else {
        format!("'{}'", a.replace('\'', "'\\''"))
    }
}

/// mprof's percent cell: a whole percent, blank below 1%.
fn pcell(p: f64) -> String {
    if p < 1.0 {
        "   ".into()
    } else {
        format!("{:>3}", p.round().min(100.0) as u64)
    }
}

/// A `bytes (%)` cell.
fn bytes_pct(bytes: u64, p: f64, width: usize) -> String {
    let p = if p < 1.0 { "     ".to_string() } else { format!("({})", pcell(p)) };
    format!("{bytes:>width$} {p}")
}

fn classes(c: ByClass<f64>) -> String {
    c.to_array().iter().map(|&p| pcell(p)).collect::<Vec<_>>().join(" ")
}

fn labelled(counts: &std::collections::BTreeMap<String, u64>) -> String {
    // In entry-point order (malloc, calloc, realloc, ...), not alphabetical.
    Op::ALL
        .iter()
        .filter_map(|op| counts.get(op.label()).map(|n| format!("{} {n}", op.label())))
        .collect::<Vec<_>>()
        .join(", ")
}

fn summary(r: &Report, _o: &TextOptions, out: &mut String) {
    let _ = writeln!(out, "heaplens report: {}", for_terminal(&r.trace.path));
    process_lines(&r.trace, &r.process, out);
    totals(r, out);
}

/// The sampling note, symbol warnings and the SUMMARY block: what a process tree's report
/// shows for its summed totals, under its own title.
pub fn totals(r: &Report, out: &mut String) {
    let s = &r.summary;
    if r.trace.sample_rate > 0 {
        let _ = writeln!(
            out,
            "  sampled              one allocation recorded per {} allocated on average (Poisson over bytes):\n  \
             {:21}every count and byte total below is an estimate scaled up from the samples",
            human_bytes(r.trace.sample_rate),
            ""
        );
    }
    for w in &r.trace.symbol_warnings {
        let _ = writeln!(out, "  warning              {}", for_terminal(w));
    }
    let _ = writeln!(out);
    let _ = writeln!(out, "SUMMARY");
    // Saturating: an aggregated trace's counters are numbers a damaged file can make anything.
    let calls: u64 = s.calls_by_kind.values().fold(0, |a, &b| a.saturating_add(b));
    let frees: u64 = s.frees_by_kind.values().fold(0, |a, &b| a.saturating_add(b));
    let row = |out: &mut String, label: &str, n: u64, note: String| {
        let _ = writeln!(out, "  {label:<20} {n:>14}  {note}");
    };
    row(out, "allocation calls", calls, labelled(&s.calls_by_kind));
    row(out, "free calls", frees, labelled(&s.frees_by_kind));
    row(out, "allocations", s.allocations, String::new());
    row(out, "deallocations", s.deallocations, String::new());
    if r.process.attached {
        row(out, "before the attach", s.frees_before_attach, "(frees of blocks allocated before the attach)".into());
    } else {
        row(out, "unmatched frees", s.unmatched_frees, "(frees of blocks not allocated under the monitor)".into());
    }
    row(out, "failed allocations", s.failed_allocations, String::new());
    row(out, "bytes allocated", s.bytes_allocated, format!("({})", human_bytes(s.bytes_allocated)));
    row(
        out,
        "peak bytes in use",
        s.peak_bytes,
        format!(
            "({}) in {} blocks, {} after the start",
            human_bytes(s.peak_bytes),
            s.peak_objects,
            human_ns(s.peak_time_ns)
        ),
    );
    if r.trace.detached {
        let (b, n) = (human_bytes(s.leaked_bytes), s.leaked_objects);
        row(out, "live at detach", s.leaked_bytes, format!("({b}) in {n} blocks (not leaks: the process went on)"));
    } else {
        row(
            out,
            "leaked bytes",
            s.leaked_bytes,
            format!("({}) in {} blocks live at exit", human_bytes(s.leaked_bytes), s.leaked_objects),
        );
    }
    if s.suppressed_objects > 0 {
        let what: Vec<String> = r
            .suppressions
            .iter()
            .map(|x| if x.what.is_empty() { for_terminal(&x.pattern).into_owned() } else { x.what.to_string() })
            .fold(Vec::new(), |mut v, w| {
                if !v.contains(&w) {
                    v.push(w);
                }
                v
            });
        row(
            out,
            "suppressed",
            s.suppressed_bytes,
            format!(
                "({}) in {} blocks {}, not leaks: {}",
                human_bytes(s.suppressed_bytes),
                s.suppressed_objects,
                live_at(r),
                what.join(", ")
            ),
        );
    }
    if r.trace.aggregated {
        let _ =
            writeln!(out, "  {:<20} {:>14}  (an aggregated trace records no order of events)", "temporary allocs", "-");
    } else {
        let tpct = if s.allocations == 0 { 0.0 } else { s.temporary_allocations as f64 * 100.0 / s.allocations as f64 };
        row(out, "temporary allocs", s.temporary_allocations, format!("({tpct:.1}% of allocations, freed right away)"));
    }
    let _ = writeln!(out, "  {:<20} {:>14}", "run time", human_ns(s.runtime_ns));
    row(out, "threads", s.threads, String::new());
}

/// The program, how it ended and the trace's condition, under a report's title.
pub fn process_lines(t: &crate::model::TraceInfo, p: &crate::model::ProcessInfo, out: &mut String) {
    if !p.exe.is_empty() || !p.argv.is_empty() {
        let pid = p.pid.map(|n| format!(" (pid {n})")).unwrap_or_default();
        let cmd = if p.argv.is_empty() {
            shell_quote(&p.exe)
        } else {
            p.argv.iter().map(|a| shell_quote(a)).collect::<Vec<_>>().join(" ")
        };
        let _ = writeln!(out, "  program              {cmd}{pid}");
    }
    if p.attached {
        let at = p.recording_start_unix_ns.map(utc).unwrap_or_else(|| "an unknown time".into());
        let _ = writeln!(out, "  recording            attached to the running process at {at}");
        if let Some(stop) = p.recording_stop_unix_ns {
            let why = if t.detached {
                "detached; the process went on"
            } else if t.exec_unfollowed {
                "the process exec'd another program, which went on unrecorded"
            } else {
                "the process ended"
            };
            let _ = writeln!(out, "                       stopped at {} ({why})", utc(stop));
        }
    }
    let ended = match (p.exit_code, p.exit_signal) {
        (_, Some(sig)) => format!("killed by signal {sig}"),
        (Some(code), None) => format!("exited with status {code}"),
        (None, None) if t.detached => "still running when recording stopped (detached)".into(),
        (None, None) if t.exec_unfollowed && p.attached => "went on as another program (exec) while attached".into(),
        (None, None) if t.exec => {
            "exec'd another program (its heap went with it: blocks live then are no leaks)".into()
        }
        // `heaplens run` appends the Exit record for its own child only; a child of that
        // process that shut down cleanly still left the monitor's End record.
        (None, None) if t.complete && p.attached => "exited while attached (status not recorded)".into(),
        (None, None) if t.complete => "exited (status not recorded: not heaplens run's own child)".into(),
        (None, None) => "unknown (no exit record)".into(),
    };
    let _ = writeln!(out, "  ended                {ended}");
    if t.exec_unfollowed {
        let _ = writeln!(out, "  warning              {}", exec_warning(p.attached));
    }
    let _ = writeln!(out, "  trace                {}", health_of(t));
}

/// `ns` since the Unix epoch as `2026-11-26 22:48:01 UTC`.
fn utc(ns: u64) -> String {
    let secs = ns / 1_000_000_000;
    let (days, rest) = (secs / 86_400, secs % 86_400);
    // Howard Hinnant's civil_from_days.
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02} UTC", rest / 3600, rest % 3600 / 60, rest % 60)
}

/// What a trace whose process exec'd without `--follow-children` lacks, and the cure.
pub const EXEC_UNFOLLOWED: &str =
    "the process exec'd another program, which was not recorded: record with --follow-children";

/// The warning for a trace whose process exec'd another program: under `heaplens run`
/// ([`EXEC_UNFOLLOWED`]), or while attached, where following it is not offered.
pub fn exec_warning(attached: bool) -> &'static str {
    if attached {
        "the process exec'd another program while attached: recording stopped there"
    } else {
        EXEC_UNFOLLOWED
    }
}

/// One line on the trace's condition.
pub fn health(r: &Report) -> String {
    health_of(&r.trace)
}

/// One line on the condition of a trace.
pub fn health_of(t: &crate::model::TraceInfo) -> String {
    let mut parts = Vec::new();
    if let Some(at) = t.truncated_at {
        parts.push(format!("TRUNCATED at byte {at}"));
    }
    if t.corrupt_blocks > 0 {
        parts.push(format!("{} corrupt blocks skipped", t.corrupt_blocks));
    }
    if t.malformed_blocks > 0 {
        parts.push(format!("{} malformed blocks", t.malformed_blocks));
    }
    if !t.complete {
        parts.push("no End block (the monitor did not shut down cleanly)".into());
    }
    if let Some(d) = t.dropped_events.filter(|&d| d > 0) {
        parts.push(format!("{d} events dropped by the monitor"));
    }
    if t.incomplete_stacks > 0 {
        parts.push(format!("{} stacks missing outer frames", t.incomplete_stacks));
    }
    let state = if parts.is_empty() { "complete".to_string() } else { parts.join("; ") };
    if t.events == 0 {
        return state;
    }
    format!("{state} ({} events)", t.events)
}

/// Under a table's title: the note that its numbers are estimates, for a sampled trace.
fn estimates(r: &Report, out: &mut String) {
    if r.trace.sample_rate > 0 {
        let _ = writeln!(
            out,
            "  (estimates: the trace sampled one allocation per {} on average)",
            human_bytes(r.trace.sample_rate)
        );
    }
}

fn more(out: &mut String, shown: usize, total: usize, what: &str) {
    if total > shown {
        let _ = writeln!(out, "  ... {} more {what} (--top 0 shows all)", total - shown);
    }
}

fn leaks(r: &Report, o: &TextOptions, out: &mut String) {
    if r.trace.detached {
        let _ = writeln!(
            out,
            "BLOCKS LIVE AT DETACH (not leaks: the process went on; by the last {} frames of their path)",
            o.leak_depth
        );
    } else {
        let _ =
            writeln!(out, "MEMORY LEAK TABLE (blocks live at exit, by the last {} frames of their path)", o.leak_depth);
    }
    estimates(r, out);
    if r.leaks.is_empty() {
        let none = if r.trace.detached {
            "none: every block allocated while recorded was released"
        } else if r.suppressions.is_empty() {
            "no leaks: every tracked allocation was released"
        } else {
            "no leaks: only suppressed blocks are live at exit"
        };
        let _ = writeln!(out, "  {none}");
    } else {
        leak_rows(r, o, out);
    }
    if !r.suppressions.is_empty() && o.suppressed {
        suppressed(r, o, out);
    }
}

fn leak_rows(r: &Report, o: &TextOptions, out: &mut String) {
    let _ = writeln!(out, "  {:>10} {:>20}  path", "allocs", "bytes (%)");
    let n = o.limit(r.leaks.len());
    for l in &r.leaks[..n] {
        let path = if l.path.is_empty() { "<no stack>".to_string() } else { joined(&l.path, " > ") };
        let cut = if l.cut { "... > " } else { "" };
        let _ = writeln!(out, "  {:>10} {}  {cut}{path}", l.allocs, bytes_pct(l.bytes, l.percent, 14));
    }
    more(out, n, r.leaks.len(), "paths");
}

/// The blocks live at exit that suppressions cover, under their own heading: which
/// suppression matched how many blocks, then their paths.
fn suppressed(r: &Report, o: &TextOptions, out: &mut String) {
    let _ = writeln!(out, "\nSUPPRESSED (blocks live at exit by design or by --suppressions; not leaks)");
    let _ = writeln!(out, "  {:>10} {:>14}  suppression", "blocks", "bytes");
    for s in &r.suppressions {
        let what = if s.what.is_empty() { String::new() } else { format!("  ({})", s.what) };
        let _ = writeln!(out, "  {:>10} {:>14}  {}:{}{what}", s.blocks, s.bytes, s.origin, for_terminal(&s.pattern));
    }
    let n = o.limit(r.suppressed_leaks.len());
    if n > 0 {
        let _ = writeln!(out, "  {:>10} {:>14}  their paths (the last {} frames)", "blocks", "bytes", o.leak_depth);
    }
    for l in &r.suppressed_leaks[..n] {
        let path = if l.path.is_empty() { "<no stack>".to_string() } else { joined(&l.path, " > ") };
        let cut = if l.cut { "... > " } else { "" };
        let _ = writeln!(out, "  {:>10} {:>14}  {cut}{path}", l.allocs, l.bytes);
    }
    more(out, n, r.suppressed_leaks.len(), "paths");
}

fn bins(r: &Report, o: &TextOptions, out: &mut String) {
    let b = &r.bins;
    let _ = writeln!(out, "ALLOCATION BIN TABLE (by requested size)");
    estimates(r, out);
    let _ =
        writeln!(out, "  {:>8} {:>10} {:>20} {:>10} {:>20}  types", "size", "allocs", "bytes (%)", "frees", "kept (%)");
    // Exact sizes: the `--top` largest by bytes, shown in size order; the > 1024 bin always.
    let (big, exact) = b.rows.split_last().expect("the > 1024 bin is always present");
    let n = o.limit(exact.len());
    let mut shown: Vec<_> = exact.iter().collect();
    shown.sort_by(|x, y| y.bytes.cmp(&x.bytes).then(x.size.cmp(&y.size)));
    shown.truncate(n);
    shown.sort_by_key(|row| row.size);
    shown.push(big);
    for row in shown {
        let size = row.size.map_or("> 1024".to_string(), |s| s.to_string());
        let _ = writeln!(
            out,
            "  {size:>8} {:>10} {} {:>10} {}  {}",
            row.allocs,
            bytes_pct(row.bytes, row.bytes_percent, 14),
            row.frees,
            bytes_pct(row.kept_bytes, row.kept_percent, 14),
            some_types(&row.types)
        );
    }
    let t = &b.total;
    let _ =
        writeln!(out, "  {:>8} {:>10} {:>14}       {:>10} {:>14}", "<TOTAL>", t.allocs, t.bytes, t.frees, t.kept_bytes);
    more(out, n, exact.len(), "sizes");
}

/// The first few of a size's types, the rest counted: a Rust or C++ program has dozens of
/// types of one size, and a line of thousands of characters says nothing (JSON has them all).
fn some_types(types: &[String]) -> String {
    const SHOWN: usize = 3;
    let mut s = joined(&types[..types.len().min(SHOWN)], ", ");
    if types.len() > SHOWN {
        let _ = write!(s, " and {} more", types.len() - SHOWN);
    }
    s
}

fn cxx(r: &Report, o: &TextOptions, out: &mut String) {
    if let Some(t) = &r.cxx {
        estimates(r, out);
        crate::cxx::text::render(t, o.top, out);
    }
}

fn lifetimes(r: &Report, o: &TextOptions, out: &mut String) {
    let Some(rows) = &r.lifetimes else { return };
    let _ = writeln!(
        out,
        "LIFETIMES (blocks by the function that allocated them; steps: the thread's allocations in between)"
    );
    let unit = r.trace.coarse_time_unit_ns;
    if unit > 0 {
        // The monitor rounds the times of a thread that records alone (see TraceInfo).
        let (coarse, exact) = (human_ns(unit), human_ns(r.trace.time_unit_ns));
        let _ = match r.trace.events.saturating_sub(r.trace.coarse_time_events) {
            0 => writeln!(out, "  times kept to {coarse}: one thread recorded at a time"),
            rest => {
                writeln!(out, "  times kept to {coarse} where one thread recorded alone, to {exact} for {rest} events")
            }
        };
        let _ =
            writeln!(out, "  (a lifetime under {coarse} reads <{coarse}; `heaplens run --exact-times` keeps {exact})");
    }
    // Three views of one table: the most short-lived blocks (heaptrack's temporaries), the
    // longest-lived freed ones, and the blocks never freed.
    let mut by: Vec<&crate::model::LifetimeRow> = rows.iter().filter(|r| r.short_lived > 0).collect();
    let live = live_at(r);
    lifetime_rows(out, o, unit, live, "most short-lived (freed before the thread's next allocation)", &by);
    by = rows.iter().filter(|r| r.freed > 0).collect();
    by.sort_by(|a, b| b.median_ns.cmp(&a.median_ns).then(b.max_ns.cmp(&a.max_ns)).then(b.freed.cmp(&a.freed)));
    lifetime_rows(out, o, unit, live, "longest-lived (by median lifetime of the freed blocks)", &by);
    by = rows.iter().filter(|r| r.live_at_exit > 0).collect();
    by.sort_by(|a, b| b.live_at_exit.cmp(&a.live_at_exit).then_with(|| a.function.cmp(&b.function)));
    lifetime_rows(out, o, unit, live, &format!("{live} (never freed: no lifetime)"), &by);
}

/// How the report says a block was still allocated when recording ended: at the process's
/// exit, at a detach (the process went on), or at an exec (its heap went with it).
fn live_at(r: &Report) -> &'static str {
    if r.trace.detached {
        "live at detach"
    } else if r.trace.exec {
        "live at exec"
    } else {
        "live at exit"
    }
}

/// One view of the lifetimes table. `unit`: the coarsest unit times were kept to (0: exact), a
/// lifetime of 0 reads as under it.
fn lifetime_rows(
    out: &mut String,
    o: &TextOptions,
    unit: u64,
    live: &str,
    title: &str,
    rows: &[&crate::model::LifetimeRow],
) {
    let _ = writeln!(out, "  {title}:");
    if rows.is_empty() {
        let _ = writeln!(out, "    none");
        return;
    }
    // The histograms keep powers of two: the median is known to its bucket, shown as a range.
    let _ = writeln!(
        out,
        "  {:>10} {:>11} {:>21} {:>12} {:>9} {:>12}  name",
        "freed", "short-lived", "median (between)", "longest", "m.steps", live
    );
    let n = o.limit(rows.len());
    let range = |lo: String, hi: String| if lo == hi { lo } else { format!("{lo}-{hi}") };
    let time = |ns: u64| if ns == 0 && unit > 0 { format!("<{}", human_ns(unit)) } else { human_ns(ns) };
    for row in &rows[..n] {
        let ns = range(time(row.median_ns), time(row.median_ns_high));
        let steps = range(row.median_steps.to_string(), row.median_steps_high.to_string());
        let _ = writeln!(
            out,
            "  {:>10} {:>11} {:>21} {:>12} {:>9} {:>12}  {}",
            row.freed,
            row.short_lived,
            ns,
            time(row.max_ns),
            steps,
            row.live_at_exit,
            for_terminal(&row.function)
        );
    }
    more(out, n, rows.len(), "functions");
}

fn direct(r: &Report, o: &TextOptions, out: &mut String) {
    let d = &r.direct;
    let _ = writeln!(out, "DIRECT ALLOCATION TABLE (functions that called the allocator)");
    estimates(r, out);
    let _ = writeln!(
        out,
        "  {:>5} {:>14} | {:^15} | {:>14} | {:^15} | {:>10}  name",
        "% mem", "bytes", "% mem(size)", "bytes kept", "% all kept", "calls"
    );
    let _ = writeln!(
        out,
        "  {:>5} {:>14} | {:>15} | {:>14} | {:>15} | {:>10}",
        "", "", "s   m   l   x", "", "s   m   l   x", ""
    );
    let n = o.limit(d.rows.len());
    for row in std::iter::once(&d.total).chain(&d.rows[..n]) {
        let _ = writeln!(
            out,
            "  {:>5.1} {:>14} | {:>15} | {:>14} | {:>15} | {:>10}  {}",
            row.percent,
            row.bytes,
            classes(row.percent_by_class),
            row.kept_bytes,
            classes(row.kept_percent_by_class),
            row.calls,
            for_terminal(&row.function)
        );
        if let Some(via) = &row.via {
            out.truncate(out.len() - 1);
            let others = match row.via_others {
                0 => String::new(),
                1 => " and 1 other".into(),
                n => format!(" and {n} others"),
            };
            let _ = writeln!(out, "  via {}{others}", for_terminal(via));
        }
    }
    more(out, n, d.rows.len(), "functions");
}

fn call_graph(r: &Report, o: &TextOptions, out: &mut String) {
    let _ = writeln!(out, "ALLOCATION CALL GRAPH (gprof layout: callers above each entry, callees below)");
    estimates(r, out);
    let _ = writeln!(
        out,
        "  self: bytes it allocated itself; self+desc: with its callees; called: allocations through it\n  \
         caller and callee lines: the same through that edge; called = via the edge / via the callee"
    );
    let _ = writeln!(out, "  {:<7} {:>6} {:>14} {:>14} {:>15}  name", "index", "%total", "self", "self+desc", "called");
    let rule = format!("  {}", "-".repeat(90));
    let edge_line = |out: &mut String, e: &CallGraphEdge| {
        let called = format!("{}/{}", e.calls, e.total_calls);
        let _ = writeln!(
            out,
            "  {:<7} {:>6} {:>14} {:>14} {:>15}      {} [{}]",
            "",
            "",
            e.self_bytes,
            e.bytes,
            called,
            for_terminal(&e.name),
            e.index
        );
    };
    let n = o.limit(r.call_graph.len());
    for e in &r.call_graph[..n] {
        let _ = writeln!(out, "{rule}");
        for c in &e.callers {
            edge_line(out, c);
        }
        let called =
            if e.recursive_calls > 0 { format!("{}+{}", e.calls, e.recursive_calls) } else { e.calls.to_string() };
        let _ = writeln!(
            out,
            "  {:<7} {:>6.1} {:>14} {:>14} {:>15}  {} [{}]",
            format!("[{}]", e.index),
            e.inclusive_percent,
            e.self_bytes,
            e.inclusive_bytes,
            called,
            for_terminal(&e.name),
            e.index
        );
        if e.is_cycle {
            let _ = writeln!(
                out,
                "  {:<7} {:>6} {:>14} {:>14} {:>15}    members: {}",
                "",
                "",
                "",
                "",
                "",
                joined(&e.members, ", ")
            );
        }
        for c in &e.callees {
            edge_line(out, c);
        }
    }
    if n > 0 {
        let _ = writeln!(out, "{rule}");
    }
    more(out, n, r.call_graph.len(), "entries");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_times() {
        assert_eq!(super::utc(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(super::utc(1_795_733_281_000_000_000), "2026-11-26 22:48:01 UTC");
        assert_eq!(super::utc(951_782_400_000_000_000), "2000-02-29 00:00:00 UTC");
    }

    #[test]
    fn quoting_keeps_the_command_on_one_line() {
        assert_eq!(shell_quote("-c"), "-c");
        assert_eq!(shell_quote("a b"), "'a b'");
        assert_eq!(shell_quote("it's"), "'it'\\''s'");
        assert_eq!(shell_quote("x\ny"), "\"x\\ny\"");
        assert_eq!(shell_quote("a\x1b[2J\"\\"), r#""a\x1b[2J\"\\""#);
        assert_eq!(shell_quote("r\u{202e}l"), r#""r\u{202e}l""#);
        assert_eq!(shell_quote(""), "''");
    }

    #[test]
    fn no_line_holds_what_a_terminal_acts_on() {
        assert_eq!(terminal_lines("a \x1b[31m\x07 \n\tb\x01  \n"), "a \\x1b[31m\\x07\n\\tb\\x01\n");
        assert_eq!(joined(&["x\ny".into(), "z".into()], " > "), "x\\ny > z");
    }

    #[test]
    fn percent_cells_blank_below_one() {
        assert_eq!(pcell(0.99), "   ");
        assert_eq!(pcell(1.0), "  1");
        assert_eq!(pcell(99.6), "100");
        assert_eq!(human_bytes(2_040_000), "1.95 MiB");
        assert_eq!(human_ns(1_500_000_000), "1.500 s");
    }
}
