//! `heaplens check` and `heaplens run --check`: each budget holds at the run's true value and
//! breaks one below it, the exit statuses (0, 1, 2), the budgets file, growth over a base run.
//! Widgets' truth: `made` allocations of `size` bytes, `red` of them leaked; diff_grow's: 300
//! temporaries in parse_input, 50 in write_output, build_index's blocks held to the end.

mod common;

use std::ffi::OsStr;
use std::path::Path;

use common::*;
use serde_json::Value;

fn check(dir: &WorkDir, trace: &Path, args: &[&str]) -> Out {
    let mut all: Vec<&OsStr> = vec!["check".as_ref(), trace.as_os_str()];
    all.extend(args.iter().map(OsStr::new));
    let out = heaplens(dir, &all);
    assert_no_panic(&out, "heaplens check");
    out
}

/// The verdicts of `check --format json`, which must exit `status`.
fn verdicts(dir: &WorkDir, trace: &Path, args: &[&str], status: i32) -> Value {
    let mut all = args.to_vec();
    all.extend(["--format", "json"]);
    let out = check(dir, trace, &all);
    assert_eq!(out.status.code(), Some(status), "heaplens check {args:?}\n{}", out.show());
    serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("invalid JSON ({e}):\n{}", out.stdout))
}

/// Checks one budget at `value` (holds) and at `value - 1` (breaks), where `value` is the run's
/// true number; the broken verdict names `top` and the run's value.
fn holds_at_and_breaks_below(dir: &WorkDir, trace: &Path, option: &str, value: u64, top: &str) {
    let at = value.to_string();
    let v = verdicts(dir, trace, &[option, &at], 0);
    assert_eq!(v["holds"], true, "{v}");
    let below = (value - 1).to_string();
    let v = verdicts(dir, trace, &[option, &below], 1);
    let b = &arr(&v, "budgets")[0];
    assert_eq!((b["holds"].as_bool(), b["value"].as_f64()), (Some(false), Some(value as f64)), "{b}");
    assert_eq!(b["top"]["function"], top, "{b}");
    // The text form: one FAIL line naming the value, the limit and the function.
    let out = check(dir, trace, &[option, &below]);
    assert_eq!(out.status.code(), Some(1), "{}", out.show());
    let fail: Vec<&str> = out.stdout.lines().filter(|l| l.starts_with("FAIL")).collect();
    assert_eq!(fail.len(), 1, "{}", out.stdout);
    assert!(fail[0].contains(&format!("({option})")) && fail[0].contains(top), "{}", fail[0]);
}

#[test]
fn each_budget_holds_at_the_true_value_and_breaks_below_it() {
    let dir = WorkDir::new("check-budgets");
    let exe = compile_c(&dir, "widgets.c", &[]);
    let trace = dir.join("w.hltrace");
    let t = truth(&run_traced(&dir, &trace, &exe, &["1000"]).ok("widgets").stdout, "widgets");
    let (made, red, size) = (num(&t, "made"), num(&t, "red"), num(&t, "size"));
    let peak = u(&report(&dir, &trace), "summary/peak_bytes");
    holds_at_and_breaks_below(&dir, &trace, "--max-peak", peak, "make_widget");
    holds_at_and_breaks_below(&dir, &trace, "--max-leaked", red * size, "make_widget");
    holds_at_and_breaks_below(&dir, &trace, "--max-allocations", made, "make_widget");
    // --no-leaks: widgets leaks its red widgets.
    let v = verdicts(&dir, &trace, &["--no-leaks"], 1);
    assert_eq!(at(&v, "budgets/0/value").as_f64(), Some(red as f64), "{v}");
    // Sizes with units, fractions, and decimal units as powers of 1000.
    assert_eq!(verdicts(&dir, &trace, &["--max-peak", "64MiB", "--max-leaked", "1MiB"], 0)["holds"], true);
    let v = verdicts(&dir, &trace, &["--max-peak", "0.5MB", "--max-leaked", "1.5KiB"], 1);
    assert_eq!(at(&v, "budgets/0/limit").as_f64(), Some(500_000.0), "{v}");
    assert_eq!(at(&v, "budgets/1/limit").as_f64(), Some(1536.0), "{v}");
    // One byte over: the line shows the bytes where rounding would show two equal numbers.
    let out = check(&dir, &trace, &["--max-peak", &(peak - 1).to_string()]);
    assert!(out.stdout.contains(&format!("{peak} B, over the budget of {} B", peak - 1)), "{}", out.stdout);
    // A budget a fraction of a byte below the value breaks: the limit is never rounded up.
    let v = verdicts(&dir, &trace, &["--max-peak", &format!("{}.9", peak - 1)], 1);
    assert_eq!(at(&v, "budgets/0/limit").as_f64(), Some((peak - 1) as f64), "{v}");

    // Temporaries: diff_grow's 350 of its allocations.
    let grow = compile_c(&dir, "diff_grow.c", &[]);
    let gt = dir.join("g.hltrace");
    run_traced(&dir, &gt, &grow, &[] as &[&str]).ok("diff_grow");
    let r = report(&dir, &gt);
    let (temps, allocs) = (u(&r, "summary/temporary_allocations"), u(&r, "summary/allocations"));
    assert_eq!(temps, 350, "parse_input's 300 and write_output's 50");
    let share = temps as f64 * 100.0 / allocs as f64;
    let v = verdicts(&dir, &gt, &["--max-temporary", &format!("{}%", share.ceil())], 0);
    assert_eq!(v["holds"], true, "{v}");
    let v = verdicts(&dir, &gt, &["--max-temporary", &format!("{}", share.floor())], 1);
    let b = &arr(&v, "budgets")[0];
    assert_eq!(b["top"]["function"], "parse_input", "{b}");
    assert_eq!(b["top"]["amount"], 300, "{b}");
    // No leaks there (the stdio buffer is the runtime's, suppressed).
    assert_eq!(verdicts(&dir, &gt, &["--no-leaks"], 0)["holds"], true);
}

#[test]
fn bad_input_exits_2_with_one_line() {
    let dir = WorkDir::new("check-bad");
    let (_, trace) = traced_widgets(&dir, &["100"]);
    let missing = dir.join("missing.hltrace");
    for (args, what) in [
        (vec![missing.to_str().unwrap(), "--max-peak", "1MiB"], "a missing trace"),
        (vec![trace.to_str().unwrap()], "no budget"),
        (vec![trace.to_str().unwrap(), "--max-growth", "10%"], "growth without a base"),
    ] {
        let out = heaplens(&dir, &[&["check"], args.as_slice()].concat());
        assert_eq!(out.status.code(), Some(2), "{what}: {}", out.show());
        assert_one_line_error(&out, what);
    }
    // clap's own usage error, which says what was wrong with the size, also exits 2.
    let out = check(&dir, &trace, &["--max-peak", "12 parsecs"]);
    assert_eq!(out.status.code(), Some(2), "{}", out.show());
    assert!(out.stderr.contains("unknown unit in `12 parsecs`"), "{}", out.stderr);
    // A trace cut short, or one the monitor never finished, is not checked: its numbers are
    // part of a run's, which would pass budgets the whole run breaks.
    let bytes = std::fs::read(&trace).unwrap();
    let half = dir.join("half.hltrace");
    std::fs::write(&half, &bytes[..common::damage::cut_inside_a_block(&bytes, bytes.len() / 2)]).unwrap();
    let out = check(&dir, &half, &["--max-peak", "1GiB"]);
    assert_eq!(out.status.code(), Some(2), "{}", out.show());
    assert!(out.stderr.contains("cannot check") && out.stderr.contains("TRUNCATED"), "{}", out.stderr);
    assert_one_line_error(&out, "a trace cut short");
    let bad = dir.join("bad.toml");
    std::fs::write(&bad, "max_peak = \"1MiB\"\nmax_peek = \"4MiB\"\n").unwrap();
    let out = check(&dir, &trace, &["--budgets", bad.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2), "{}", out.show());
    assert_one_line_error(&out, "a misspelt budget");
    assert!(out.stderr.contains("bad.toml:2") && out.stderr.contains("max_peek"), "{}", out.stderr);
    // A value of the wrong kind is named with its file, line and key, and what the key takes.
    for (text, says) in [
        ("no_leaks = true\nmax_peak = -5\n", "bad.toml:2: max_peak: -5 is negative"),
        ("max_peak = 74000.5\n", "bad.toml:1: max_peak: takes a size"),
        ("max_temporary = \"-5%\"\n", "bad.toml:1: max_temporary:"),
    ] {
        std::fs::write(&bad, text).unwrap();
        let out = check(&dir, &trace, &["--budgets", bad.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(2), "{}", out.show());
        assert_one_line_error(&out, text);
        assert!(out.stderr.contains(says), "{text}: {}", out.stderr);
    }
}

#[test]
fn a_sampled_or_cut_short_run_is_not_checked() {
    let dir = WorkDir::new("check-partial");
    let exe = compile_c(&dir, "widgets.c", &[]);
    let exe = exe.to_str().unwrap();
    // Sampled: its numbers are estimates, which would pass or break a budget by chance.
    let sampled = dir.join("s.hltrace");
    let s = sampled.to_str().unwrap();
    heaplens(&dir, &["run", "-q", "--sample-rate", "4KiB", "-o", s, "--", exe, "1000"]).ok("sampled run");
    let out = check(&dir, &sampled, &["--max-allocations", "1000000"]);
    assert_eq!(out.status.code(), Some(2), "{}", out.show());
    assert!(out.stderr.contains("sampled"), "{}", out.stderr);
    let out = heaplens(&dir, &["run", "-q", "--check", "--sample-rate", "4KiB", "--max-peak", "1GiB", "--", exe, "10"]);
    assert_eq!(out.status.code(), Some(2), "refused before the program runs: {}", out.show());
    assert!(out.stdout.is_empty(), "{}", out.show());
    // A wrapper that exec's the program: only the wrapper was recorded.
    let out = heaplens(
        &dir,
        &["run", "-q", "--check", "--max-peak", "1GiB", "-o", "x.hltrace", "--", "sh", "-c", "exec true"],
    );
    assert_eq!(out.status.code(), Some(2), "{}", out.show());
    assert!(out.stderr.contains("exec'd another one"), "{}", out.stderr);
    // A base that cannot be read is found before the program runs, and is exit 2, not 1.
    let out =
        heaplens(&dir, &["run", "-q", "--check", "--base", "missing.hltrace", "--max-growth", "10%", "--", exe, "10"]);
    assert_eq!(out.status.code(), Some(2), "{}", out.show());
    assert!(out.stdout.is_empty(), "the program did not run: {}", out.show());
}

#[test]
fn a_budgets_file_and_options_over_it() {
    let dir = WorkDir::new("check-file");
    let exe = compile_c(&dir, "widgets.c", &[]);
    let trace = dir.join("w.hltrace");
    let t = truth(&run_traced(&dir, &trace, &exe, &["1000"]).ok("widgets").stdout, "widgets");
    let made = num(&t, "made");
    let file = dir.join("budgets.toml");
    std::fs::write(
        &file,
        format!("# memory budgets\nmax_peak = \"64MiB\"\nmax_allocations = {}\nmax_temporary = \"5%\"\n", made - 1),
    )
    .unwrap();
    let f = file.to_str().unwrap();
    let v = verdicts(&dir, &trace, &["--budgets", f], 1);
    let broken: Vec<&str> =
        arr(&v, "budgets").iter().filter(|b| b["holds"] == false).map(|b| b["budget"].as_str().unwrap()).collect();
    assert_eq!(broken, ["max-allocations"], "{v}");
    assert_eq!(arr(&v, "budgets").len(), 3, "{v}");
    // A budget from the file says so.
    let out = check(&dir, &trace, &["--budgets", f]);
    assert!(out.stdout.contains("(max_allocations in ") && out.stdout.contains("budgets.toml)"), "{}", out.stdout);
    assert_eq!(at(&v, "budgets/1/source").as_str(), Some(f), "{v}");
    // An option wins over the file.
    let v = verdicts(&dir, &trace, &["--budgets", f, "--max-allocations", &made.to_string()], 0);
    assert_eq!(v["holds"], true, "{v}");
    assert_eq!(at(&v, "budgets/1/source"), "command line", "{v}");
}

#[test]
fn growth_over_a_base_run_names_the_function_that_grew() {
    let dir = WorkDir::new("check-growth");
    let (base, _) = traced_grow(&dir, "once", &[]);
    let (new, _) = traced_grow(&dir, "twice", &["-DFACTOR=2"]);
    let (rb, rn) = (report(&dir, &base), report(&dir, &new));
    let growth = |k: &str| (u(&rn, k) as f64 - u(&rb, k) as f64) * 100.0 / u(&rb, k) as f64;
    let peak = growth("summary/peak_bytes");
    assert!(peak > growth("summary/allocations") && peak > growth("summary/bytes_allocated"));
    let b = base.to_str().unwrap();
    let v = verdicts(&dir, &new, &["--base", b, "--max-growth", &format!("{}%", peak.ceil())], 0);
    assert_eq!(arr(&v, "budgets").len(), 4, "allocations, bytes, peak and leaks: {v}");
    let v = verdicts(&dir, &new, &["--base", b, "--max-growth", &format!("{}%", peak.floor())], 1);
    let broken: Vec<&Value> = arr(&v, "budgets").iter().filter(|b| b["holds"] == false).collect();
    assert_eq!(broken.len(), 1, "only the peak grew that much: {v}");
    assert_eq!(broken[0]["what"], "growth of peak bytes over the base");
    assert_eq!(broken[0]["top"]["function"], "build_index");
    assert_eq!(broken[0]["top"]["amount"], 200 * 48, "build_index's extra bytes");
    // The same against itself: no growth.
    assert_eq!(verdicts(&dir, &new, &["--base", new.to_str().unwrap(), "--max-growth", "0%"], 0)["holds"], true);
}

#[test]
fn run_check_runs_and_checks_in_one_step() {
    let dir = WorkDir::new("check-run");
    let exe = compile_c(&dir, "widgets.c", &[]);
    let trace = dir.join("w.hltrace");
    let run = |budget: &str, program: &[&OsStr]| {
        let mut all: Vec<&OsStr> = ["run", "-q", "--check", "--max-allocations", budget, "-o"].map(OsStr::new).to_vec();
        all.push(trace.as_os_str());
        all.push("--".as_ref());
        all.extend_from_slice(program);
        heaplens(&dir, &all)
    };
    let widgets: [&OsStr; 2] = [exe.as_os_str(), "500".as_ref()];
    let bare = run_bare(&dir, &exe, &["500"]);
    let ok = run("500", &widgets);
    assert_eq!(ok.status.code(), Some(0), "{}", ok.show());
    assert_eq!(ok.stdout, bare.stdout, "the program's output passes through");
    assert!(ok.stderr.contains("heaplens: check: all 1 budgets hold"), "{}", ok.stderr);
    let broken = run("499", &widgets);
    assert_eq!(broken.status.code(), Some(1), "{}", broken.show());
    assert!(broken.stderr.contains("FAIL  allocations: 500, over the budget of 499"), "{}", broken.stderr);
    assert!(trace.is_file(), "the trace stays for a closer look");
    // The program's own failure wins over the budgets.
    let failing: [&OsStr; 3] = ["sh".as_ref(), "-c".as_ref(), "exit 3".as_ref()];
    assert_eq!(run("0", &failing).status.code(), Some(3));
    // Budgets without --check are a mistake, said before the program runs.
    let out = heaplens(&dir, &["run", "--max-peak", "1MiB", "--", "true"]);
    assert_eq!(out.status.code(), Some(2), "{}", out.show());
    assert!(out.stderr.contains("--check"), "{}", out.stderr);
    // So is a trace that could not be read back.
    let out = heaplens(
        &dir,
        &["run", "-q", "--check", "--max-peak", "1GiB", "-o", "/dev/null", "--", exe.to_str().unwrap(), "5"],
    );
    assert_eq!(out.status.code(), Some(2), "{}", out.show());
    assert!(out.stdout.is_empty() && out.stderr.contains("no file it could read back"), "not run: {}", out.show());
}

#[test]
fn budgets_are_exact_whole_numbers_and_mistakes_are_one_line() {
    let dir = WorkDir::new("check-numbers");
    let (_, trace) = traced_widgets(&dir, &["100"]);
    // Limits past 2^53 stay exact, in the text and the JSON.
    let max = u64::MAX.to_string();
    let out = check(&dir, &trace, &["--max-allocations", &max]);
    assert!(out.status.success() && out.stdout.contains(&format!("within the budget of {max}")), "{}", out.show());
    let v = verdicts(&dir, &trace, &["--max-allocations", &max, "--max-peak", "1GiB"], 0);
    assert_eq!(at(&v, "budgets/1/limit").as_u64(), Some(u64::MAX), "{v}");
    assert_eq!(at(&v, "budgets/0/limit").as_u64(), Some(1 << 30), "{v}");
    assert!(at(&v, "budgets/0/value").is_u64(), "{v}");
    // A negative number is said to be one.
    for (option, value) in [("--max-peak", "-1"), ("--max-peak", "-1MiB"), ("--max-allocations", "-5")] {
        let out = check(&dir, &trace, &[option, value]);
        assert_eq!(out.status.code(), Some(2), "{}", out.show());
        assert!(out.stderr.contains("is negative"), "{option} {value}: {}", out.stderr);
    }
    // A base with nothing to compare it, and a budgets file with no budget, are said to be so.
    let t = trace.to_str().unwrap();
    let out = check(&dir, &trace, &["--base", t, "--max-peak", "1GiB"]);
    assert_one_line_error(&out, "--base without --max-growth");
    assert!(out.stderr.contains("--max-growth"), "{}", out.stderr);
    let empty = dir.join("empty.toml");
    std::fs::write(&empty, "# only a comment\n").unwrap();
    let out = check(&dir, &trace, &["--budgets", empty.to_str().unwrap()]);
    assert_one_line_error(&out, "a budgets file without budgets");
    assert!(out.stderr.contains("empty.toml sets no budget"), "{}", out.stderr);
}

#[test]
fn an_aggregated_trace_has_no_temporaries_to_check() {
    let dir = WorkDir::new("check-aggregate");
    let exe = compile_c(&dir, "diff_grow.c", &[]);
    let trace = dir.join("agg.hltrace");
    let out = heaplens(&dir, &["run", "-q", "--aggregate", "-o", trace.to_str().unwrap(), "--", exe.to_str().unwrap()]);
    assert!(out.status.success(), "{}", out.show());
    let out = check(&dir, &trace, &["--max-temporary", "1%"]);
    assert_eq!(out.status.code(), Some(2), "{}", out.show());
    assert_one_line_error(&out, "--max-temporary on an aggregated trace");
    assert!(out.stderr.contains("records no temporaries"), "{}", out.stderr);
    // The other budgets hold there as anywhere.
    assert_eq!(verdicts(&dir, &trace, &["--max-allocations", "1000000"], 0)["holds"], true);
    let text = heaplens(&dir, &["report", trace.to_str().unwrap()]).ok("report");
    assert!(text.stdout.contains("an aggregated trace records no order of events"), "{}", text.stdout);
}
