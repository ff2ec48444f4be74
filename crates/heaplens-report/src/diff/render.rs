//! The text of `heaplens diff`: the totals side by side, then the functions and call paths that
//! grew and that shrank, largest change first, each number as `new - base` with its change in
//! percent of the base.

use std::fmt::Write;

use super::{Change, Changes, Diff, SummaryChange};

use heaplens_interpret::elide::Unambiguous;
use heaplens_interpret::names::for_terminal;

use crate::render_text::{human_bytes, human_ns, terminal_lines};

fn signed(d: i64) -> String {
    if d > 0 {
        format!("+{d}")
    } else {
        d.to_string()
    }
}

/// `+10000 (+100.0%)`, `+3 (new)` when the base was 0, `0` when nothing changed.
fn with_percent(base: u64, d: i64) -> String {
    match (d, base) {
        (0, _) => "0".into(),
        (_, 0) => format!("{} (new)", signed(d)),
        _ => format!("{} ({:+.1}%)", signed(d), d as f64 * 100.0 / base as f64),
    }
}

fn summary_line(out: &mut String, s: &SummaryChange) {
    let (label, show): (&str, fn(u64) -> String) = match s.name {
        "allocations" => ("allocations", |n| n.to_string()),
        "bytes_allocated" => ("bytes allocated", human_bytes),
        "peak_bytes" => ("peak bytes in use", human_bytes),
        "leaked_bytes" => ("leaked bytes", human_bytes),
        "temporary_allocations" => ("temporary allocations", |n| n.to_string()),
        _ => ("run time", human_ns),
    };
    let sign = if s.change > 0 {
        "+"
    } else if s.change < 0 {
        "-"
    } else {
        ""
    };
    let magnitude = format!("{sign}{}", show(s.change.unsigned_abs()));
    let change = match s.percent {
        _ if s.change == 0 => "0".to_string(),
        Some(p) => format!("{magnitude} ({p:+.1}%)"),
        None => format!("{magnitude} (new)"),
    };
    let _ = writeln!(out, "  {label:<22} {:>14} {:>14}  {change}", show(s.base), show(s.new));
}

/// How names are shown: elided where unambiguous among both runs' functions.
struct Names(Unambiguous);

impl Names {
    fn of(d: &Diff) -> Self {
        let rows = [&d.functions, &d.paths].into_iter().flat_map(|c| c.grew.iter().chain(&c.shrank));
        let changed = rows.flat_map(|r| r.key.iter().map(String::as_str));
        Names(Unambiguous::of(changed.chain(d.names.iter().map(String::as_str))))
    }

    fn show(&self, name: &str) -> String {
        // Each name escaped alone: a line end in one would split the table's row.
        for_terminal(&self.0.show(name)).into_owned()
    }
}

fn rows(out: &mut String, names: &Names, title: &str, rows: &[Change], top: usize, peak: bool, path: bool) {
    if rows.is_empty() {
        return;
    }
    let _ = writeln!(out, "\n{title}");
    let peak_head = if peak { "bytes at peak" } else { "" };
    let _ = writeln!(
        out,
        "  {:>22} {:>20} {:>22} {:>22}  {}",
        "bytes allocated",
        "allocations",
        peak_head,
        "bytes leaked",
        if path { "call path (outermost first)" } else { "function" }
    );
    let n = if top == 0 { rows.len() } else { rows.len().min(top) };
    for r in &rows[..n] {
        let (b, c) = (&r.base, &r.change);
        let peak_cell = if peak { with_percent(b.peak_bytes, c.peak_bytes) } else { String::new() };
        let _ = writeln!(
            out,
            "  {:>22} {:>20} {:>22} {:>22}  {}",
            with_percent(b.bytes, c.bytes),
            with_percent(b.calls, c.calls),
            peak_cell,
            with_percent(b.leaked_bytes, c.leaked_bytes),
            r.key.iter().map(|k| names.show(k)).collect::<Vec<_>>().join(" > ")
        );
    }
    if rows.len() > n {
        let _ = writeln!(out, "  ... {} more (--top 0 shows all)", rows.len() - n);
    }
}

fn both(out: &mut String, names: &Names, what: &str, c: &Changes, top: usize, peak: bool, path: bool) {
    rows(out, names, &format!("{what} THAT GREW"), &c.grew, top, peak, path);
    rows(out, names, &format!("{what} THAT SHRANK"), &c.shrank, top, peak, path);
}

/// The diff as text: at most `top` rows per table (0: all).
pub fn render(d: &Diff, top: usize) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "heaplens diff: base {}", for_terminal(&d.base));
    let _ = writeln!(out, "               new  {}", for_terminal(&d.new));
    for line in &d.damage {
        let _ = writeln!(out, "  DAMAGED {}: what could be read is compared", for_terminal(line));
    }
    let _ = writeln!(out, "\nSUMMARY                            base            new  change (new - base, % of base)");
    for s in &d.summary {
        summary_line(&mut out, s);
    }
    if d.is_empty() {
        let _ = writeln!(out, "\nNo function or call path changed.");
        return terminal_lines(&out);
    }
    let _ =
        writeln!(out, "\nEach number: new - base (% of base); functions as the report's direct table attributes them.");
    if !d.peak_compared {
        let _ = writeln!(
            out,
            "Bytes at the peak are not compared: a trace was sampled or aggregated, or its peak is unknown."
        );
    }
    let names = Names::of(d);
    both(&mut out, &names, "FUNCTIONS", &d.functions, top, d.peak_compared, false);
    both(
        &mut out,
        &names,
        &format!("CALL PATHS (the innermost {} frames)", d.path_depth),
        &d.paths,
        top,
        d.peak_compared,
        true,
    );
    terminal_lines(&out)
}
