//! `heaplens check TRACE` and `heaplens run --check`: a run against memory budgets, for CI
//! (see `heaplens_report::budget`). Exit status 0 when every budget holds, 1 when one is broken
//! (a line each: what, the value, the limit, the function contributing most), 2 when the trace
//! cannot be read or a budget is malformed.

use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::Args;
use heaplens_report::budget::{self, Budgets, Verdict};
use serde::Deserialize;

use crate::attribution::AttributionArgs;
use crate::{parse_bytes, parse_percent, Format};

/// The budgets, from the command line and a budgets file.
#[derive(Args, Debug, Clone, Default, PartialEq)]
pub struct BudgetArgs {
    /// Fail when the peak bytes in use exceed SIZE (with units: 64MiB, 512KiB, 1.5GiB; KB, MB
    /// and GB are powers of 1000).
    #[arg(long, value_name = "SIZE", value_parser = parse_bytes)]
    pub max_peak: Option<u64>,
    /// Fail when the bytes leaked (live at exit, suppressions apart) exceed SIZE.
    #[arg(long, value_name = "SIZE", value_parser = parse_bytes)]
    pub max_leaked: Option<u64>,
    /// Fail when the program makes more than N allocations.
    #[arg(long, value_name = "N")]
    pub max_allocations: Option<u64>,
    /// Fail when more than PERCENT of the allocations are temporary (freed by their thread's
    /// very next call: heaptrack's temporaries), as `20%` or `20`.
    #[arg(long, value_name = "PERCENT", value_parser = parse_percent)]
    pub max_temporary: Option<f64>,
    /// Fail when any block is leaked (live at exit, suppressions apart).
    #[arg(long)]
    pub no_leaks: bool,
    /// With --base: fail when allocations, bytes allocated, peak bytes or leaked bytes grew by
    /// more than PERCENT over the base run's (`10%`).
    #[arg(long, value_name = "PERCENT", value_parser = parse_percent)]
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

/// A size in a budgets file: bytes, or a string with units.
#[derive(Deserialize, Debug)]
#[serde(untagged)]
enum Size {
    Bytes(u64),
    Text(String),
}

/// A percentage in a budgets file: a number, or a string such as `"10%"`.
#[derive(Deserialize, Debug)]
#[serde(untagged)]
enum Percent {
    Number(f64),
    Text(String),
}

/// The budgets file.
#[derive(Deserialize, Debug, Default)]
#[serde(deny_unknown_fields)]
struct BudgetsFile {
    max_peak: Option<Size>,
    max_leaked: Option<Size>,
    max_allocations: Option<u64>,
    max_temporary: Option<Percent>,
    no_leaks: Option<bool>,
    max_growth: Option<Percent>,
    base: Option<PathBuf>,
}

fn size(s: Option<Size>, key: &str) -> anyhow::Result<Option<u64>> {
    match s {
        None => Ok(None),
        Some(Size::Bytes(n)) => Ok(Some(n)),
        Some(Size::Text(t)) => parse_bytes(&t).map(Some).map_err(|e| anyhow::anyhow!("{key}: {e}")),
    }
}

fn percent(p: Option<Percent>, key: &str) -> anyhow::Result<Option<f64>> {
    match p {
        None => Ok(None),
        Some(Percent::Number(n)) if n >= 0.0 => Ok(Some(n)),
        Some(Percent::Number(n)) => anyhow::bail!("{key}: {n} is negative"),
        Some(Percent::Text(t)) => parse_percent(&t).map(Some).map_err(|e| anyhow::anyhow!("{key}: {e}")),
    }
}

impl BudgetArgs {
    /// The budgets asked for (the file's, overridden by the options) and the base trace.
    ///
    /// # Errors
    /// An unreadable or malformed budgets file, or no budget at all.
    pub fn resolve(&self) -> anyhow::Result<(Budgets, Option<PathBuf>)> {
        let file = match &self.budgets {
            Some(path) => {
                let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
                toml::from_str::<BudgetsFile>(&text).map_err(|e| {
                    let line = e.span().map_or(1, |r| text[..r.start.min(text.len())].matches('\n').count() + 1);
                    anyhow::anyhow!("{}:{line}: not a budgets file: {}", path.display(), e.message().trim())
                })?
            }
            None => BudgetsFile::default(),
        };
        let b = Budgets {
            max_peak: self.max_peak.or(size(file.max_peak, "max_peak")?),
            max_leaked: self.max_leaked.or(size(file.max_leaked, "max_leaked")?),
            max_allocations: self.max_allocations.or(file.max_allocations),
            max_temporary_percent: self.max_temporary.or(percent(file.max_temporary, "max_temporary")?),
            no_leaks: self.no_leaks || file.no_leaks.unwrap_or(false),
            max_growth_percent: self.max_growth.or(percent(file.max_growth, "max_growth")?),
        };
        // A base named in the file is relative to the file, as the file travels with its
        // repository and runs from any directory.
        let file_dir = self.budgets.as_deref().and_then(Path::parent).unwrap_or(Path::new(""));
        let base = self.base.clone().or(file.base.map(|b| file_dir.join(b)));
        if b == Budgets::default() {
            anyhow::bail!("no budget to check: give --max-peak, --max-leaked, --max-allocations, --max-temporary, --no-leaks, --max-growth or --budgets FILE");
        }
        if b.max_growth_percent.is_some() && base.is_none() {
            anyhow::bail!(
                "max_growth needs a base run: give --base BASE, or `base = \"BASE.hltrace\"` in the budgets file"
            );
        }
        Ok((b, base))
    }
}

/// Checks the trace at `trace`: the verdicts, every budget's.
pub fn verdicts(trace: &Path, budgets: &BudgetArgs, attribution: &AttributionArgs) -> anyhow::Result<Vec<Verdict>> {
    let (b, base) = budgets.resolve()?;
    let opts = crate::diff::options(attribution, 5)?;
    let new = checkable(crate::diff::analyze(trace, &opts)?)?;
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
    let growth = match &base {
        Some(base) => Some(heaplens_report::diff::diff(&checkable(crate::diff::analyze(base, &opts)?)?, &new)),
        None => None,
    };
    Ok(budget::check(&new, growth.as_ref(), &b))
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
