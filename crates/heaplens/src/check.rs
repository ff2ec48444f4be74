//! `heaplens check TRACE` and `heaplens run --check`: a run against memory budgets, for CI
//! (see `heaplens_report::budget`). Exit status 0 when every budget holds, 1 when one is broken
//! (a line each: what, the value, the limit, the function contributing most), 2 when the trace
//! cannot be read or a budget is malformed.

use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::Args;
use heaplens_report::budget::{self, Budgets, Verdict};
use serde::Deserialize;
use toml::Spanned;

use crate::attribution::AttributionArgs;
use crate::{parse_bytes, parse_percent, Format};

/// The budgets, from the command line and a budgets file.
#[derive(Args, Debug, Clone, Default, PartialEq)]
pub struct BudgetArgs {
    /// Fail when the peak bytes in use exceed SIZE (with units: 64MiB, 512KiB, 1.5GiB; KB, MB
    /// and GB are powers of 1000).
    #[arg(long, value_name = "SIZE", value_parser = parse_bytes, allow_hyphen_values = true)]
    pub max_peak: Option<u64>,
    /// Fail when the bytes leaked (live at exit, suppressions apart) exceed SIZE.
    #[arg(long, value_name = "SIZE", value_parser = parse_bytes, allow_hyphen_values = true)]
    pub max_leaked: Option<u64>,
    /// Fail when the program makes more than N allocations.
    #[arg(long, value_name = "N", value_parser = parse_count, allow_hyphen_values = true)]
    pub max_allocations: Option<u64>,
    /// Fail when more than PERCENT of the allocations are temporary (freed by their thread's
    /// very next call: heaptrack's temporaries), as `20%` or `20`.
    #[arg(long, value_name = "PERCENT", value_parser = parse_percent, allow_hyphen_values = true)]
    pub max_temporary: Option<f64>,
    /// Fail when any block is leaked (live at exit, suppressions apart).
    #[arg(long)]
    pub no_leaks: bool,
    /// With --base: fail when allocations, bytes allocated, peak bytes or leaked bytes grew by
    /// more than PERCENT over the base run's (`10%`).
    #[arg(long, value_name = "PERCENT", value_parser = parse_percent, allow_hyphen_values = true)]
    pub max_growth: Option<f64>,
    /// The trace of the baseline run, for --max-growth.
    #[arg(long, value_name = "BASE")]
    pub base: Option<PathBuf>,
    /// Read budgets from a TOML file kept in the repository (`max_peak = "64MiB"`,
    /// `max_leaked = "0"`, `max_allocations = 100000`, `max_temporary = "20%"`,
    /// `no_leaks = true`, `max_growth = "10%"`); options given on the command line win.
    #[arg(long, value_name = "FILE")]
    pub budgets: Option<PathBuf>,
}

/// A count: a whole number of 0 or more.
fn parse_count(s: &str) -> Result<u64, String> {
    match s.trim().parse::<u64>() {
        Ok(n) => Ok(n),
        Err(_) if s.trim().starts_with('-') => Err(format!("`{s}` is negative: a count is 0 or more")),
        Err(_) => Err(format!("`{s}` is not a whole number")),
    }
}

/// Arguments of `heaplens check`.
#[derive(Args, Debug)]
pub struct CheckArgs {
    /// The trace file written by `heaplens run`.
    pub trace: PathBuf,
    /// The budgets.
    #[command(flatten)]
    pub budgets: BudgetArgs,
    /// Output format: a line per budget, or one JSON document.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// How allocations are charged to functions (as in `heaplens report`).
    #[command(flatten)]
    pub attribution: AttributionArgs,
}

/// The budgets file: each value kept with where it stands, for errors that name the line.
#[derive(Deserialize, Debug, Default)]
#[serde(deny_unknown_fields)]
struct BudgetsFile {
    max_peak: Option<Spanned<toml::Value>>,
    max_leaked: Option<Spanned<toml::Value>>,
    max_allocations: Option<Spanned<toml::Value>>,
    max_temporary: Option<Spanned<toml::Value>>,
    no_leaks: Option<Spanned<toml::Value>>,
    max_growth: Option<Spanned<toml::Value>>,
    base: Option<Spanned<toml::Value>>,
}

/// A budgets file's text and path, for reading its values with one-line errors.
struct FileValues<'a> {
    path: &'a Path,
    text: &'a str,
}

impl FileValues<'_> {
    fn line(&self, at: usize) -> usize {
        self.text[..at.min(self.text.len())].matches('\n').count() + 1
    }

    /// `f`'s reading of the value of `key`, or an error naming the file, the line and what
    /// the key takes.
    fn read<T>(
        &self,
        key: &str,
        v: Option<Spanned<toml::Value>>,
        takes: &str,
        f: impl FnOnce(&toml::Value) -> Result<T, String>,
    ) -> anyhow::Result<Option<T>> {
        let Some(v) = v else { return Ok(None) };
        f(v.get_ref()).map(Some).map_err(|why| {
            let why = if why.is_empty() { format!("takes {takes}") } else { why };
            anyhow::anyhow!("{}:{}: {key}: {why}", self.path.display(), self.line(v.span().start))
        })
    }
}

/// A size: a whole number of bytes, or a string with units.
fn size(v: &toml::Value) -> Result<u64, String> {
    match v {
        toml::Value::Integer(n) => u64::try_from(*n).map_err(|_| format!("{n} is negative")),
        toml::Value::String(t) => parse_bytes(t),
        _ => Err(String::new()),
    }
}

/// A percentage: a number, or a string such as `"10%"`.
fn percent(v: &toml::Value) -> Result<f64, String> {
    let n = match v {
        toml::Value::Integer(n) => *n as f64,
        toml::Value::Float(n) => *n,
        toml::Value::String(t) => return parse_percent(t),
        _ => return Err(String::new()),
    };
    if n.is_finite() && n >= 0.0 {
        Ok(n)
    } else {
        Err(format!("{n} is not a percentage of at least 0"))
    }
}

/// The budgets and where each came from (`command line` or the budgets file's path), the base
/// trace, and the path of the file when one was read.
#[derive(Debug, Clone, Default)]
pub struct Resolved {
    /// The limits.
    pub budgets: Budgets,
    /// The baseline run's trace, for the growth budget.
    pub base: Option<PathBuf>,
    /// Option names (`max-peak`, ...) of the budgets the file gave.
    from_file: Vec<&'static str>,
    file: Option<PathBuf>,
}

impl BudgetArgs {
    /// The budgets asked for (the file's, overridden by the options) and the base trace.
    ///
    /// # Errors
    /// An unreadable or malformed budgets file (`FILE:LINE: key: why`), or no budget at all.
    pub fn resolve(&self) -> anyhow::Result<Resolved> {
        let file = match &self.budgets {
            Some(path) => {
                let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
                let values = FileValues { path, text: &text };
                let f = toml::from_str::<BudgetsFile>(&text).map_err(|e| {
                    let line = e.span().map_or(1, |r| values.line(r.start));
                    anyhow::anyhow!("{}:{line}: not a budgets file: {}", path.display(), e.message().trim())
                })?;
                let whole = |v: &toml::Value| match v {
                    toml::Value::Integer(n) => u64::try_from(*n).map_err(|_| format!("{n} is negative")),
                    _ => Err(String::new()),
                };
                let flag = |v: &toml::Value| v.as_bool().ok_or_else(String::new);
                let text_path = |v: &toml::Value| v.as_str().map(PathBuf::from).ok_or_else(String::new);
                let sizes = "a size (`64MiB`, or a whole number of bytes)";
                let pct = "a percentage (`\"10%\"` or 10)";
                Some((
                    path,
                    Budgets {
                        max_peak: values.read("max_peak", f.max_peak, sizes, size)?,
                        max_leaked: values.read("max_leaked", f.max_leaked, sizes, size)?,
                        max_allocations: values.read("max_allocations", f.max_allocations, "a whole number", whole)?,
                        max_temporary_percent: values.read("max_temporary", f.max_temporary, pct, percent)?,
                        no_leaks: values.read("no_leaks", f.no_leaks, "true or false", flag)?.unwrap_or(false),
                        max_growth_percent: values.read("max_growth", f.max_growth, pct, percent)?,
                    },
                    values.read("base", f.base, "a path (a string)", text_path)?,
                ))
            }
            None => None,
        };
        let (file_path, f, file_base) = match file {
            Some((p, b, base)) => (Some(p.clone()), b, base),
            None => (None, Budgets::default(), None),
        };
        let b = Budgets {
            max_peak: self.max_peak.or(f.max_peak),
            max_leaked: self.max_leaked.or(f.max_leaked),
            max_allocations: self.max_allocations.or(f.max_allocations),
            max_temporary_percent: self.max_temporary.or(f.max_temporary_percent),
            no_leaks: self.no_leaks || f.no_leaks,
            max_growth_percent: self.max_growth.or(f.max_growth_percent),
        };
        let mut from_file = Vec::new();
        for (name, cli, file) in [
            ("max-peak", self.max_peak.is_some(), f.max_peak.is_some()),
            ("max-leaked", self.max_leaked.is_some(), f.max_leaked.is_some()),
            ("max-allocations", self.max_allocations.is_some(), f.max_allocations.is_some()),
            ("max-temporary", self.max_temporary.is_some(), f.max_temporary_percent.is_some()),
            ("no-leaks", self.no_leaks, f.no_leaks),
            ("max-growth", self.max_growth.is_some(), f.max_growth_percent.is_some()),
        ] {
            if file && !cli {
                from_file.push(name);
            }
        }
        // A base named in the file is relative to the file, as the file travels with its
        // repository and runs from any directory.
        let file_dir = self.budgets.as_deref().and_then(Path::parent).unwrap_or(Path::new(""));
        let base = self.base.clone().or(file_base.map(|b| file_dir.join(b)));
        if b == Budgets::default() {
            match &self.budgets {
                Some(path) => anyhow::bail!(
                    "{} sets no budget and none was given: set max_peak, max_leaked, max_allocations, max_temporary, no_leaks or max_growth",
                    path.display()
                ),
                None => anyhow::bail!("no budget to check: give --max-peak, --max-leaked, --max-allocations, --max-temporary, --no-leaks, --max-growth or --budgets FILE"),
            }
        }
        if base.is_some() && b.max_growth_percent.is_none() {
            anyhow::bail!("a base run is compared only by --max-growth (or max_growth in the budgets file): give it, or drop the base");
        }
        if b.max_growth_percent.is_some() && base.is_none() {
            anyhow::bail!(
                "max_growth needs a base run: give --base BASE, or `base = \"BASE.hltrace\"` in the budgets file"
            );
        }
        Ok(Resolved { budgets: b, base, from_file, file: file_path })
    }
}

/// What a check needs before the run it checks: the budgets, how functions are named, and the
/// base run's report. `heaplens run --check` prepares before the program starts, so that a
/// missing or damaged base is found then.
pub struct Prepared {
    resolved: Resolved,
    opts: heaplens_report::Options,
    base: Option<heaplens_report::model::Report>,
}

impl Prepared {
    /// A budget on temporaries is asked for.
    pub fn checks_temporaries(&self) -> bool {
        self.resolved.budgets.max_temporary_percent.is_some()
    }
}

/// Reads the budgets and the base run.
///
/// # Errors
/// As [`BudgetArgs::resolve`]; an unreadable, damaged or incomplete base trace.
pub fn prepare(budgets: &BudgetArgs, attribution: &AttributionArgs) -> anyhow::Result<Prepared> {
    let resolved = budgets.resolve()?;
    let opts = crate::diff::options(attribution, 5)?;
    let base = match &resolved.base {
        Some(base) => Some(checkable(crate::diff::analyze_saying(base, &opts, false)?)?),
        None => None,
    };
    Ok(Prepared { resolved, opts, base })
}

/// Checks the trace at `trace`: the verdicts, every budget's.
///
/// # Errors
/// As [`prepare`]; a trace that cannot be read, or whose numbers cannot answer a budget
/// (damaged, incomplete, sampled, cut at an exec or a detach, aggregated for temporaries).
pub fn verdicts(trace: &Path, budgets: &BudgetArgs, attribution: &AttributionArgs) -> anyhow::Result<Vec<Verdict>> {
    verdicts_of(trace, &prepare(budgets, attribution)?)
}

/// As [`verdicts`], with the budgets and the base read before.
pub fn verdicts_of(trace: &Path, p: &Prepared) -> anyhow::Result<Vec<Verdict>> {
    let b = &p.resolved.budgets;
    let new = checkable(crate::diff::analyze_saying(trace, &p.opts, false)?)?;
    if b.max_temporary_percent.is_some() && new.trace.aggregated {
        anyhow::bail!(
            "cannot check --max-temporary on {}: an aggregated trace (heaplens run --aggregate) records no temporaries",
            trace.display()
        );
    }
    if (b.max_leaked.is_some() || b.no_leaks) && new.trace.detached {
        anyhow::bail!(
            "cannot check leaks on {}: recording stopped at a detach while the process went on, so no block is known to leak",
            trace.display()
        );
    }
    let growth = p.base.as_ref().map(|base| heaplens_report::diff::diff(base, &new));
    let mut v = budget::check(&new, growth.as_ref(), b);
    if let Some(file) = &p.resolved.file {
        for x in v.iter_mut().filter(|x| p.resolved.from_file.contains(&x.budget)) {
            x.source = file.display().to_string();
        }
    }
    Ok(v)
}

/// `r`, unless its trace is damaged or was cut short: a budget checked on part of a run
/// would pass what the whole run breaks.
fn checkable(r: heaplens_report::model::Report) -> anyhow::Result<heaplens_report::model::Report> {
    let t = &r.trace;
    let dropped = t.dropped_events.unwrap_or(0) > 0;
    if t.truncated || t.corrupt_blocks > 0 || t.malformed_blocks > 0 || !t.complete || dropped {
        anyhow::bail!(
            "cannot check {}: the trace is damaged or incomplete ({}), and budgets checked on part of a run prove nothing",
            t.path,
            heaplens_report::render_text::health_of(t)
        );
    }
    if t.exec_unfollowed {
        anyhow::bail!(
            "cannot check {}: the program exec'd another one, which was not recorded, and budgets checked on part of a run prove nothing (record with heaplens run --follow-children)",
            t.path
        );
    }
    if t.sample_rate > 0 {
        anyhow::bail!(
            "cannot check {}: a sampled trace (--sample-rate) holds estimates, which would pass or break a budget by chance; record without --sample-rate",
            t.path
        );
    }
    Ok(r)
}

/// `FAIL  what...` / `ok    what...` per verdict, and a last line that counts them.
pub fn text(v: &[Verdict]) -> String {
    let mut out = String::new();
    for x in v {
        let mark = if x.holds { "ok  " } else { "FAIL" };
        out.push_str(&format!("{mark}  {}\n", x.line()));
    }
    let broken = v.iter().filter(|x| !x.holds).count();
    match broken {
        0 => out.push_str(&format!("all {} budgets hold\n", v.len())),
        n => out.push_str(&format!("{n} of {} budgets broken\n", v.len())),
    }
    heaplens_report::render_text::terminal_lines(&out)
}

/// Runs `heaplens check`: 0 when every budget holds, 1 when one is broken.
pub fn execute(a: &CheckArgs) -> anyhow::Result<std::process::ExitCode> {
    let v = verdicts(&a.trace, &a.budgets, &a.attribution)?;
    let out = match a.format {
        Format::Text => text(&v),
        Format::Json => {
            let doc = serde_json::json!({
                "trace": a.trace.display().to_string(),
                "holds": v.iter().all(|x| x.holds),
                "budgets": v,
            });
            let mut s = serde_json::to_string_pretty(&doc).context("cannot serialize the verdicts")?;
            s.push('\n');
            s
        }
    };
    crate::report::print(&out)?;
    Ok(std::process::ExitCode::from(if v.iter().all(|x| x.holds) { 0 } else { 1 }))
}
