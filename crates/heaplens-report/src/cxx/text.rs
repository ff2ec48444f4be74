//! The C++ tables as text, after mtrace++'s `stat` output: the analysis by invocation scenario
//! with its two columns, then the per-class, object distribution, allocation path (DACT),
//! depth (DAT) and entry point tables. Class names and paths come from the trace: each is
//! written through `names::for_terminal`.

use std::collections::BTreeSet;
use std::fmt::Write;

use heaplens_interpret::names::for_terminal;

use super::model::{CountBytes, CxxTables};
use super::scenario::Scenario;
use crate::tables::pct;

/// Short column heads for the scenarios, in [`Scenario::ALL`]'s order.
const HEADS: [&str; 7] = ["ctor", "copy", "op=", "conv", "m.data", "m.func", "others"];

/// Appends the tables; `top` rows per table at most (0: all).
pub fn render(t: &CxxTables, top: usize, out: &mut String) {
    let limit = |n: usize| if top == 0 { n } else { n.min(top) };
    let more = |out: &mut String, shown: usize, all: usize, what: &str| {
        if all > shown {
            let _ = writeln!(out, "  ... {} more {what} (--top 0 shows all)", all - shown);
        }
    };
    let _ = writeln!(out, "C++ ALLOCATIONS (mtrace++'s tables, from the call stacks)");
    let _ = writeln!(
        out,
        "  {} allocations, {} bytes; {} ({:.2}%) with a class member function on the path",
        t.allocations,
        t.bytes,
        t.in_classes,
        pct(t.in_classes, t.allocations)
    );

    let _ =
        writeln!(out, "\nANALYSIS BY INVOCATION SCENARIO (first level: outermost member function; lowest: innermost)");
    let _ = writeln!(out, "  {:<22} {:>28}   {:>28}", "", "first level", "lowest level");
    let _ = writeln!(
        out,
        "  {:<22} {:>10} {:>8} {:>8}   {:>10} {:>8} {:>8}",
        "scenario", "allocs", "%", "bytes", "allocs", "%", "bytes"
    );
    for (i, s) in t.scenarios.iter().enumerate() {
        let _ = writeln!(
            out,
            "  {:<22} {:>10} {:>7.2}% {:>8}   {:>10} {:>7.2}% {:>8}",
            format!("{}. {}", i + 1, s.scenario.label()),
            s.first.count,
            s.first_pct,
            s.first.bytes,
            s.lowest.count,
            s.lowest_pct,
            s.lowest.bytes
        );
    }
    let _ = writeln!(out, "  {:<22} {:>10} {:>7.2}% {:>8}", "total", t.allocations, 100.0, t.bytes);

    let _ = writeln!(out, "\nPER-CLASS TABLE (allocations made in each class's member functions, by scenario)");
    let _ = writeln!(out, "  {:>10} {:>12}  class / scenario", "allocs", "bytes");
    let n = limit(t.classes.len());
    for c in &t.classes[..n] {
        let _ = writeln!(out, "  {:>10} {:>12}  {}", c.total.count, c.total.bytes, for_terminal(&c.class));
        for (s, cb) in &c.by_scenario {
            let _ = writeln!(out, "  {:>10} {:>12}      {}", cb.count, cb.bytes, s.label());
        }
    }
    more(out, n, t.classes.len(), "classes");

    let _ = writeln!(out, "\nOBJECT DISTRIBUTION (allocations by requested size and lowest-level scenario)");
    let mut head = format!("  {:>8}", "size");
    for h in HEADS {
        let _ = write!(head, " {h:>7}");
    }
    let _ = writeln!(out, "{head} {:>9} {:>12}", "allocs", "bytes");
    // The most frequent sizes, shown in size order.
    let mut shown: Vec<_> = t.sizes.iter().collect();
    shown.sort_by(|a, b| b.total.count.cmp(&a.total.count).then(a.size.cmp(&b.size)));
    shown.truncate(limit(t.sizes.len()));
    shown.sort_by_key(|r| r.size);
    for r in &shown {
        let mut line = format!("  {:>8}", r.size);
        for s in Scenario::ALL {
            let c = r.by_scenario.get(&s).map_or(0, |cb| cb.count);
            let _ = write!(line, " {:>7}", if c == 0 { String::new() } else { c.to_string() });
        }
        let _ = writeln!(out, "{line} {:>9} {:>12}", r.total.count, r.total.bytes);
    }
    more(out, shown.len(), t.sizes.len(), "sizes");
    for (label, pick) in [("<ALLOCS>", 0), ("<BYTES>", 1)] {
        let mut line = format!("  {label:>8}");
        for s in Scenario::ALL {
            let sum: CountBytes = t
                .sizes
                .iter()
                .filter_map(|r| r.by_scenario.get(&s))
                .fold(CountBytes::default(), |a, b| CountBytes { count: a.count + b.count, bytes: a.bytes + b.bytes });
            let _ = write!(line, " {:>7}", if pick == 0 { sum.count } else { sum.bytes });
        }
        let _ = writeln!(out, "{line}");
    }

    let _ = writeln!(out, "\nDYNAMIC ALLOCATION CALL TREE (paths of member functions, outermost first)");
    let _ = writeln!(out, "  {:<8} {:>8} {:>10} {:>12}  path", "entry", "size", "allocs", "bytes");
    let n = limit(t.paths.len());
    for p in &t.paths[..n] {
        let path = if p.path.is_empty() {
            "(outside classes)".to_string()
        } else {
            p.path.iter().map(|f| for_terminal(f)).collect::<Vec<_>>().join(" -> ")
        };
        let _ = writeln!(out, "  {:<8} {:>8} {:>10} {:>12}  {path}", p.entry, p.size, p.count, p.bytes);
    }
    more(out, n, t.paths.len(), "paths");

    let _ = writeln!(out, "\nDEPTH OF ALLOCATION TREE (member functions on the path: allocations by depth)");
    let _ = writeln!(out, "  {:>4}  {:<40}  class", "max", "depth:allocs");
    let row = |class: &str, max: usize, by: &[u64]| {
        let d: Vec<String> = by.iter().enumerate().filter(|(_, &n)| n > 0).map(|(d, n)| format!("{d}:{n}")).collect();
        format!("  {max:>4}  {:<40}  {}\n", d.join(" "), for_terminal(class))
    };
    out.push_str(&row("<all>", t.depth.overall.max, &t.depth.overall.allocations));
    let n = limit(t.depth.classes.len());
    for c in &t.depth.classes[..n] {
        out.push_str(&row(c.class.as_deref().unwrap_or(""), c.max, &c.allocations));
    }
    more(out, n, t.depth.classes.len(), "classes");

    let _ = writeln!(out, "\nNEW VERSUS MALLOC (allocations per entry point, by the class that allocates)");
    let entries: BTreeSet<&str> = t.entry_points.iter().flat_map(|r| r.by_entry.keys().map(String::as_str)).collect();
    let mut head = String::from(" ");
    for e in &entries {
        let _ = write!(head, " {e:>8}");
    }
    let _ = writeln!(out, "{head} {:>12}  class", "bytes");
    let n = limit(t.entry_points.len());
    for r in &t.entry_points[..n] {
        let mut line = String::from(" ");
        for e in &entries {
            let c = r.by_entry.get(*e).map_or(0, |cb| cb.count);
            let _ = write!(line, " {:>8}", if c == 0 { String::new() } else { c.to_string() });
        }
        let class = r.class.as_deref().unwrap_or("(outside classes)");
        let _ = writeln!(out, "{line} {:>12}  {}", r.total.bytes, for_terminal(class));
    }
    more(out, n, t.entry_points.len(), "classes");
}
