//! `heaplens diff BASE NEW`: what changed between two runs, as pprof's `-diff_base` and
//! `heaptrack_print --diff` answer it. Both runs are analysed alone with the same options
//! ([`crate::Options::profile`] set) and their [`Profile`]s compared by symbolized name: a
//! function by its name, a call path by its frames' names, never by address or module, so that
//! two builds of one program compare (ASLR, a rebuild that moved code, another file name).
//!
//! Every number is `new - base`; a relative change is of the base (`None` when the base is 0).

pub mod render;

use std::collections::BTreeMap;

use serde::Serialize;

use crate::model::{Metrics, Profile, ProfileRow, Report};

/// One line of the summary: a total of each run and its change.
#[derive(Debug, Clone, Serialize)]
pub struct SummaryChange {
    /// What it counts (`allocations`, `bytes_allocated`, `peak_bytes`, `leaked_bytes`,
    /// `temporary_allocations` (left out when either trace is aggregated), `runtime_ns`).
    pub name: &'static str,
    /// The base run's.
    pub base: u64,
    /// The new run's.
    pub new: u64,
    /// `new - base`.
    pub change: i64,
    /// The change in percent of the base (`None` when the base is 0).
    pub percent: Option<f64>,
}

/// The four numbers' changes (`new - base`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct MetricsChange {
    /// Bytes allocated.
    pub bytes: i64,
    /// Allocations.
    pub calls: i64,
    /// Bytes in use at the peak.
    pub peak_bytes: i64,
    /// Bytes live at exit.
    pub leaked_bytes: i64,
}

impl MetricsChange {
    fn of(base: Metrics, new: Metrics) -> Self {
        let d = |a: u64, b: u64| b as i64 - a as i64;
        MetricsChange {
            bytes: d(base.bytes, new.bytes),
            calls: d(base.calls, new.calls),
            peak_bytes: d(base.peak_bytes, new.peak_bytes),
            leaked_bytes: d(base.leaked_bytes, new.leaked_bytes),
        }
    }

    /// The change that decides a row's direction and rank: the first of bytes allocated, bytes
    /// at the peak, leaked bytes and allocations that is not 0.
    pub fn primary(&self) -> i64 {
        [self.bytes, self.peak_bytes, self.leaked_bytes, self.calls].into_iter().find(|&d| d != 0).unwrap_or(0)
    }

    /// Largest absolute byte change, then absolute allocation change: the rank of a row.
    fn rank(&self) -> (u64, u64) {
        let bytes = [self.bytes, self.peak_bytes, self.leaked_bytes].map(i64::unsigned_abs);
        (bytes.into_iter().max().unwrap_or(0), self.calls.unsigned_abs())
    }
}

/// A function or call path whose numbers changed.
#[derive(Debug, Clone, Serialize)]
pub struct Change {
    /// The function's name, or the path's frames outermost first.
    pub key: Vec<String>,
    /// Its numbers in the base run (0 where it did not occur).
    pub base: Metrics,
    /// Its numbers in the new run (0 where it did not occur).
    pub new: Metrics,
    /// `new - base`.
    pub change: MetricsChange,
}

/// Rows that grew and rows that shrank, each largest change first.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Changes {
    /// Rows whose [`MetricsChange::primary`] change is positive.
    pub grew: Vec<Change>,
    /// Rows whose [`MetricsChange::primary`] change is negative.
    pub shrank: Vec<Change>,
}

/// What `heaplens diff` shows: the JSON document of `--format json`.
#[derive(Debug, Clone, Serialize)]
pub struct Diff {
    /// The base trace's path.
    pub base: String,
    /// The new trace's path.
    pub new: String,
    /// The totals of both runs and their changes.
    pub summary: Vec<SummaryChange>,
    /// Functions (attributed as the report's direct table) whose numbers changed.
    pub functions: Changes,
    /// Call paths (the innermost `path_depth` frames) whose numbers changed.
    pub paths: Changes,
    /// What is wrong with either trace, one line each (`base: TRUNCATED at byte 1000 ...`):
    /// a damaged, incomplete or partial trace compares what could be read of it.
    pub damage: Vec<String>,
    /// Frames per call path.
    pub path_depth: usize,
    /// Whether bytes at the peak were compared per function and path (both traces recorded
    /// every event; not for sampled or aggregated traces).
    pub peak_compared: bool,
    /// Every function name of either run (changed or not), sorted: a name is elided in a line
    /// only where no other of them would then read the same.
    #[serde(skip)]
    pub names: Vec<String>,
}

impl Diff {
    /// Nothing changed: no function, no call path, and no total but the run time.
    pub fn is_empty(&self) -> bool {
        self.functions.grew.is_empty()
            && self.functions.shrank.is_empty()
            && self.paths.grew.is_empty()
            && self.paths.shrank.is_empty()
            && self.summary.iter().all(|s| s.change == 0 || s.name == "runtime_ns")
    }
}

fn percent(base: u64, change: i64) -> Option<f64> {
    (base != 0).then(|| change as f64 * 100.0 / base as f64)
}

/// The change of `new` over `base`. Reports without a profile (not analysed with
/// [`crate::Options::profile`]) compare as having no functions or paths.
pub fn diff(base: &Report, new: &Report) -> Diff {
    let (a, b) = (&base.summary, &new.summary);
    let line = |name, x: u64, y: u64| {
        let change = y as i64 - x as i64;
        SummaryChange { name, base: x, new: y, change, percent: percent(x, change) }
    };
    let mut summary = vec![
        line("allocations", a.allocations, b.allocations),
        line("bytes_allocated", a.bytes_allocated, b.bytes_allocated),
        line("peak_bytes", a.peak_bytes, b.peak_bytes),
        line("leaked_bytes", a.leaked_bytes, b.leaked_bytes),
    ];
    // An aggregated trace records no temporaries: its 0 is not a count.
    if !base.trace.aggregated && !new.trace.aggregated {
        summary.push(line("temporary_allocations", a.temporary_allocations, b.temporary_allocations));
    }
    summary.push(line("runtime_ns", a.runtime_ns, b.runtime_ns));
    let empty = Profile { functions: Vec::new(), paths: Vec::new(), peak_known: false, depth: 0 };
    let (pa, pb) = (base.profile.as_ref().unwrap_or(&empty), new.profile.as_ref().unwrap_or(&empty));
    let peak_compared = pa.peak_known && pb.peak_known;
    let compare = |x: &[ProfileRow], y: &[ProfileRow]| changes(x, y, peak_compared);
    let mut damage = Vec::new();
    for (side, r) in [("base", base), ("new", new)] {
        let t = &r.trace;
        let dropped = t.dropped_events.unwrap_or(0) > 0;
        if t.truncated || t.corrupt_blocks > 0 || t.malformed_blocks > 0 || !t.complete || dropped {
            damage.push(format!("{side}: {}", crate::render_text::health_of(t)));
        }
        if t.exec_unfollowed {
            damage.push(format!("{side}: the program exec'd another one, not recorded"));
        }
    }
    Diff {
        damage,
        base: base.trace.path.clone(),
        new: new.trace.path.clone(),
        summary,
        functions: compare(&pa.functions, &pb.functions),
        paths: compare(&pa.paths, &pb.paths),
        path_depth: pa.depth.max(pb.depth),
        peak_compared,
        names: names(&[pa, pb]),
    }
}

/// The function names of the profiles' functions and paths, sorted, each once.
fn names(profiles: &[&Profile]) -> Vec<String> {
    let rows = profiles.iter().flat_map(|p| p.functions.iter().chain(&p.paths));
    let all: std::collections::BTreeSet<&str> = rows.flat_map(|r| r.key.iter().map(String::as_str)).collect();
    all.into_iter().map(str::to_string).collect()
}

/// Rows of either side matched by key; those that changed, split by direction and ranked.
fn changes(base: &[ProfileRow], new: &[ProfileRow], peak: bool) -> Changes {
    let mut both: BTreeMap<&[String], (Metrics, Metrics)> = BTreeMap::new();
    for r in base {
        both.entry(&r.key).or_default().0 = r.metrics;
    }
    for r in new {
        both.entry(&r.key).or_default().1 = r.metrics;
    }
    let mut out = Changes::default();
    for (key, (mut x, mut y)) in both {
        if !peak {
            (x.peak_bytes, y.peak_bytes) = (0, 0);
        }
        let change = MetricsChange::of(x, y);
        let row = Change { key: key.to_vec(), base: x, new: y, change };
        match change.primary() {
            0 => {}
            d if d > 0 => out.grew.push(row),
            _ => out.shrank.push(row),
        }
    }
    let by_rank = |p: &Change, q: &Change| q.change.rank().cmp(&p.change.rank()).then_with(|| p.key.cmp(&q.key));
    out.grew.sort_by(by_rank);
    out.shrank.sort_by(by_rank);
    out
}
