//! Memory budgets for CI (`heaplens check`, `heaplens run --check`): limits on a run's peak,
//! leaks, allocations and temporaries, and on its growth over a baseline run, each checked
//! against the report and named with the function that contributes most to it.

use serde::Serialize;

use crate::diff::Diff;
use crate::model::{Metrics, Report};
use heaplens_interpret::elide::elide_generics;
use heaplens_interpret::names::for_terminal;

use crate::render_text::human_bytes;

/// The limits; `None` (or `false`) checks nothing.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Budgets {
    /// Highest bytes in use, bytes.
    pub max_peak: Option<u64>,
    /// Bytes live at exit that no suppression covers, bytes.
    pub max_leaked: Option<u64>,
    /// Successful allocations.
    pub max_allocations: Option<u64>,
    /// Temporary allocations (freed by their thread's very next event) in percent of all.
    pub max_temporary_percent: Option<f64>,
    /// No block live at exit that no suppression covers.
    pub no_leaks: bool,
    /// Growth over the base run in percent of the base's, for each of allocations, bytes
    /// allocated, peak bytes and leaked bytes (a growth from 0 breaks it).
    pub max_growth_percent: Option<f64>,
}

/// The function that contributes most to a checked number.
#[derive(Debug, Clone, Serialize)]
pub struct Contributor {
    /// Its name (attributed as in the report's direct table).
    pub function: String,
    /// Its share: its bytes or allocations (for a growth budget, how many more than in the
    /// base run).
    pub amount: u64,
    /// `bytes` or `allocations`.
    pub unit: &'static str,
}

/// One budget checked.
#[derive(Debug, Clone, Serialize)]
pub struct Verdict {
    /// The budget's option name without dashes: `max-peak`, `max-leaked`, `max-allocations`,
    /// `max-temporary`, `no-leaks`, `max-growth`.
    pub budget: &'static str,
    /// What is checked (`peak bytes in use`, `growth of bytes allocated`, ...).
    pub what: String,
    /// The limit, in `unit`.
    pub limit: f64,
    /// The run's value, in `unit`.
    pub value: f64,
    /// `bytes`, `allocations` or `percent`.
    pub unit: &'static str,
    /// The value is within the limit.
    pub holds: bool,
    /// The function contributing most, where one is known.
    pub top: Option<Contributor>,
}

impl Verdict {
    /// One line for a person: `peak bytes in use: 5.20 MiB, over the budget of 4.00 MiB (most:
    /// build_index, 3.10 MiB)`.
    pub fn line(&self) -> String {
        let show = |v: f64| match self.unit {
            _ if v.is_infinite() => "new (from 0)".to_string(),
            "bytes" => human_bytes(v as u64),
            "percent" => format!("{v:.1}%"),
            _ => format!("{v}"),
        };
        let (mut value, mut limit) = (show(self.value), show(self.limit));
        // Rounded alike, the two would not show why the budget broke.
        if value == limit && self.value != self.limit {
            (value, limit) = match self.unit {
                "bytes" => (format!("{} B", self.value), format!("{} B", self.limit)),
                _ => (format!("{}", self.value), format!("{}", self.limit)),
            };
        }
        let verdict = if self.holds { "within" } else { "over" };
        let mut s = format!("{}: {value}, {verdict} the budget of {limit} (--{})", self.what, self.budget);
        if let Some(t) = &self.top {
            let mut amount = match t.unit {
                "bytes" => human_bytes(t.amount),
                _ => format!("{} allocations", t.amount),
            };
            if self.unit == "percent" && self.budget == "max-growth" {
                amount.push_str(" more");
            }
            s.push_str(&format!("; most from {} ({amount})", for_terminal(&elide_generics(&t.function))));
        }
        s
    }
}

/// The function of `r`'s profile with the most of `field` (none without a profile or when all
/// are 0).
fn top(r: &Report, field: fn(&Metrics) -> u64, unit: &'static str) -> Option<Contributor> {
    let p = r.profile.as_ref()?;
    let best = p.functions.iter().max_by_key(|f| field(&f.metrics)).filter(|f| field(&f.metrics) > 0)?;
    Some(Contributor { function: best.key.join(" > "), amount: field(&best.metrics), unit })
}

/// The leak table's largest row, by its innermost frame (suppressed blocks are not leaks).
fn top_leak(r: &Report) -> Option<Contributor> {
    let row = r.leaks.first()?;
    Some(Contributor { function: row.path.last().cloned().unwrap_or_default(), amount: row.bytes, unit: "bytes" })
}

/// Checks `r` against `b`; `growth` is the diff from the base run, for `max_growth_percent`
/// (no growth budget is checked without it). Verdicts in the order of [`Budgets`]' fields.
pub fn check(r: &Report, growth: Option<&Diff>, b: &Budgets) -> Vec<Verdict> {
    let s = &r.summary;
    let mut out = Vec::new();
    let mut add = |budget, what: &str, limit: f64, value: f64, unit, top: Option<Contributor>| {
        let holds = value <= limit;
        out.push(Verdict { budget, what: what.into(), limit, value, unit, holds, top: if holds { None } else { top } });
    };
    if let Some(max) = b.max_peak {
        add(
            "max-peak",
            "peak bytes in use",
            max as f64,
            s.peak_bytes as f64,
            "bytes",
            top(r, |m| m.peak_bytes, "bytes"),
        );
    }
    if let Some(max) = b.max_leaked {
        add("max-leaked", "leaked bytes", max as f64, s.leaked_bytes as f64, "bytes", top_leak(r));
    }
    if let Some(max) = b.max_allocations {
        add(
            "max-allocations",
            "allocations",
            max as f64,
            s.allocations as f64,
            "allocations",
            top(r, |m| m.calls, "allocations"),
        );
    }
    if let Some(max) = b.max_temporary_percent {
        let pct = if s.allocations == 0 { 0.0 } else { s.temporary_allocations as f64 * 100.0 / s.allocations as f64 };
        add("max-temporary", "temporary allocations", max, pct, "percent", top(r, |m| m.temporary, "allocations"));
    }
    if b.no_leaks {
        add("no-leaks", "leaked blocks", 0.0, s.leaked_objects as f64, "allocations", top_leak(r));
    }
    if let (Some(max), Some(d)) = (b.max_growth_percent, growth) {
        for line in d.summary.iter().filter(|l| l.name != "temporary_allocations" && l.name != "runtime_ns") {
            // Growth from nothing is unbounded.
            let pct = match line.percent {
                Some(p) => p,
                None if line.change > 0 => f64::INFINITY,
                None => 0.0,
            };
            let field: fn(&crate::diff::MetricsChange) -> i64 = match line.name {
                "allocations" => |c| c.calls,
                "bytes_allocated" => |c| c.bytes,
                "peak_bytes" => |c| c.peak_bytes,
                _ => |c| c.leaked_bytes,
            };
            let grew = d.functions.grew.iter().max_by_key(|c| field(&c.change)).filter(|c| field(&c.change) > 0);
            let unit = if line.name == "allocations" { "allocations" } else { "bytes" };
            let top = grew.map(|c| Contributor { function: c.key.join(" > "), amount: field(&c.change) as u64, unit });
            let what = format!("growth of {} over the base", line.name.replace('_', " "));
            add("max-growth", &what, max, pct, "percent", top);
        }
    }
    out
}
