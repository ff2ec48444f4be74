//! Memory budgets for CI (`heaplens check`, `heaplens run --check`): limits on a run's peak,
//! leaks, allocations and temporaries, and on its growth over a baseline run, each checked
//! against the report and named with the function that contributes most to it.

use serde::Serialize;

use crate::diff::Diff;
use crate::model::{Metrics, Report};
use heaplens_interpret::elide::Unambiguous;
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
    /// The name as a line shows it: generic arguments elided, unless another function of the
    /// run would then read the same.
    #[serde(skip)]
    pub shown: String,
}

/// `name` as a line shows it among the whole names `all` of the run's functions (`name` one
/// of them).
fn shown<'a>(name: &str, all: impl Iterator<Item = &'a str>) -> String {
    Unambiguous::of(all).show(name).into_owned()
}

/// A budget's limit or a run's value: a whole number (bytes, allocations), exact up to 2^64 - 1,
/// or a percentage (infinite for growth from nothing; JSON `null` then).
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd, Serialize)]
#[serde(untagged)]
pub enum Amount {
    /// Bytes or allocations.
    Whole(u64),
    /// Percent.
    Percent(f64),
}

impl Amount {
    fn whole(self) -> u64 {
        match self {
            Amount::Whole(n) => n,
            Amount::Percent(p) => p as u64,
        }
    }

    fn percent(self) -> f64 {
        match self {
            Amount::Whole(n) => n as f64,
            Amount::Percent(p) => p,
        }
    }
}

impl std::fmt::Display for Amount {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Amount::Whole(n) => write!(f, "{n}"),
            Amount::Percent(p) => write!(f, "{p}"),
        }
    }
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
    pub limit: Amount,
    /// The run's value, in `unit`.
    pub value: Amount,
    /// `bytes`, `allocations` or `percent`.
    pub unit: &'static str,
    /// The value is within the limit.
    pub holds: bool,
    /// The function contributing most, where one is known.
    pub top: Option<Contributor>,
    /// Where the budget was given: `command line`, or the budgets file's path.
    pub source: String,
}

/// `a` and `b` as `show` gives them with the fewest places (from `places` up to 12) that
/// tell them apart, so that a broken budget never reads as equal to its value.
fn apart(a: f64, b: f64, places: usize, show: impl Fn(f64, usize) -> String) -> (String, String) {
    let mut p = places;
    while p < 12 && a != b && show(a, p) == show(b, p) {
        p += 1;
    }
    (show(a, p), show(b, p))
}

impl Verdict {
    fn show_limit(&self) -> String {
        match self.unit {
            "bytes" => human_bytes(self.limit.whole()),
            "percent" => format!("{}%", self.limit),
            _ => format!("{}", self.limit),
        }
    }

    /// One line for a person: `peak bytes in use: 5.20 MiB, over the budget of 4.00 MiB (most:
    /// build_index, 3.10 MiB)`.
    pub fn line(&self) -> String {
        let (value, limit) = match self.unit {
            _ if self.value.percent().is_infinite() => ("new (from 0)".to_string(), self.show_limit()),
            "bytes" => {
                let (v, l) = (self.value.whole(), self.limit.whole());
                // Bytes within 1% of each other could round alike, or into two units
                // (1.00 GiB, 1024.00 MiB): shown whole then.
                if v != l && v.abs_diff(l) < (l / 100).max(1) {
                    (format!("{v} B"), format!("{l} B"))
                } else {
                    (human_bytes(v), human_bytes(l))
                }
            }
            "percent" => apart(self.value.percent(), self.limit.percent(), 1, |v, p| format!("{v:.p$}%")),
            _ => (format!("{}", self.value), format!("{}", self.limit)),
        };
        let verdict = if self.holds { "within" } else { "over" };
        let origin = match self.source.as_str() {
            "command line" => format!("--{}", self.budget),
            file => format!("{} in {}", self.budget.replace('-', "_"), for_terminal(file)),
        };
        let mut s = format!("{}: {value}, {verdict} the budget of {limit} ({origin})", self.what);
        if let Some(t) = &self.top {
            let mut amount = match t.unit {
                "bytes" => human_bytes(t.amount),
                _ => format!("{} allocations", t.amount),
            };
            if self.unit == "percent" && self.budget == "max-growth" {
                amount.push_str(" more");
            }
            s.push_str(&format!("; most from {} ({amount})", for_terminal(&t.shown)));
        }
        s
    }
}

/// The function of `r`'s profile with the most of `field` (none without a profile or when all
/// are 0).
fn top(r: &Report, field: fn(&Metrics) -> u64, unit: &'static str) -> Option<Contributor> {
    let p = r.profile.as_ref()?;
    let best = p.functions.iter().max_by_key(|f| field(&f.metrics)).filter(|f| field(&f.metrics) > 0)?;
    let function = best.key.join(" > ");
    let shown = shown(&function, p.functions.iter().flat_map(|f| f.key.iter().map(String::as_str)));
    Some(Contributor { function, amount: field(&best.metrics), unit, shown })
}

/// The leak table's largest row, by its innermost frame (suppressed blocks are not leaks).
fn top_leak(r: &Report) -> Option<Contributor> {
    let row = r.leaks.first()?;
    let function = row.path.last().cloned().unwrap_or_default();
    let shown = shown(&function, r.leaks.iter().filter_map(|l| l.path.last().map(String::as_str)));
    Some(Contributor { function, amount: row.bytes, unit: "bytes", shown })
}

/// Checks `r` against `b`; `growth` is the diff from the base run, for `max_growth_percent`
/// (no growth budget is checked without it). Verdicts in the order of [`Budgets`]' fields.
pub fn check(r: &Report, growth: Option<&Diff>, b: &Budgets) -> Vec<Verdict> {
    let s = &r.summary;
    let mut out = Vec::new();
    let mut add = |budget, what: &str, limit: Amount, value: Amount, unit, top: Option<Contributor>| {
        let holds = value <= limit;
        let top = if holds { None } else { top };
        let source = "command line".to_string();
        out.push(Verdict { budget, what: what.into(), limit, value, unit, holds, top, source });
    };
    if let Some(max) = b.max_peak {
        add(
            "max-peak",
            "peak bytes in use",
            Amount::Whole(max),
            Amount::Whole(s.peak_bytes),
            "bytes",
            top(r, |m| m.peak_bytes, "bytes"),
        );
    }
    if let Some(max) = b.max_leaked {
        add("max-leaked", "leaked bytes", Amount::Whole(max), Amount::Whole(s.leaked_bytes), "bytes", top_leak(r));
    }
    if let Some(max) = b.max_allocations {
        add(
            "max-allocations",
            "allocations",
            Amount::Whole(max),
            Amount::Whole(s.allocations),
            "allocations",
            top(r, |m| m.calls, "allocations"),
        );
    }
    if let Some(max) = b.max_temporary_percent {
        let pct = if s.allocations == 0 { 0.0 } else { s.temporary_allocations as f64 * 100.0 / s.allocations as f64 };
        let top = top(r, |m| m.temporary, "allocations");
        add("max-temporary", "temporary allocations", Amount::Percent(max), Amount::Percent(pct), "percent", top);
    }
    if b.no_leaks {
        add("no-leaks", "leaked blocks", Amount::Whole(0), Amount::Whole(s.leaked_objects), "allocations", top_leak(r));
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
            let all = || d.names.iter().map(String::as_str);
            let top = grew.map(|c| {
                let function = c.key.join(" > ");
                Contributor { shown: shown(&function, all()), function, amount: field(&c.change) as u64, unit }
            });
            let what = format!("growth of {} over the base", line.name.replace('_', " "));
            add("max-growth", &what, Amount::Percent(max), Amount::Percent(pct), "percent", top);
        }
    }
    out
}
