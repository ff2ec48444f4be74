//! `heaplens run --sample-rate`: allocations sampled as a Poisson process over bytes, and
//! reports that scale the samples back to unbiased estimates of the true numbers.
//!
//! Widgets are 204 bytes; at a 4 KiB rate each is recorded with probability
//! p = 1 - exp(-204/4096) = 0.0486, so the ~100 000 leaked red widgets of a 200 000-widget run
//! give ~4 850 samples and a relative standard error of about 1.4%. The bounds below (10%) are
//! seven standard errors: a correct sampler fails them about once in 10^11 runs.

mod common;

use std::path::Path;

use common::*;
use serde_json::Value;

const RATE: u64 = 4096;
const TOLERANCE: f64 = 0.10;

fn sample_rate_of(v: &Value) -> u64 {
    ["summary", "trace"].iter().find_map(|k| v[k]["sample_rate"].as_u64()).expect("report states the sampling rate")
}

/// Profiles `exe args` under `heaplens run --sample-rate rate`; returns the program's standard
/// output (its truth lines) and the JSON report of the trace.
fn profile_sampled(dir: &WorkDir, exe: &Path, rate: &str, args: &[&str]) -> (String, Value) {
    let trace = dir.join("sampled.hltrace");
    let mut cmd = std::process::Command::new(heaplens_exe());
    cmd.args(["run", "--sample-rate", rate, "-o"]).arg(&trace).arg("--").arg(exe).args(args);
    let out = run_cmd(cmd, &dir.path).ok("heaplens run --sample-rate");
    (out.stdout, report(dir, &trace))
}

fn close(what: &str, estimate: u64, truth: u64) {
    let err = (estimate as f64 - truth as f64).abs() / truth as f64;
    assert!(err <= TOLERANCE, "{what}: estimate {estimate} is {:.1}% off the true {truth}", err * 100.0);
}

#[test]
fn sampled_widgets_estimate_the_true_totals() {
    let dir = WorkDir::new("sampled-widgets");
    let exe = compile_c(&dir, "widgets.c", &[]);
    let (stdout, v) = profile_sampled(&dir, &exe, "4KiB", &["200000"]);
    let t = truth(&stdout, "widgets");
    let (made, red) = (num(&t, "made"), num(&t, "red"));

    assert_eq!(sample_rate_of(&v), RATE);
    // Far fewer events were recorded than allocations happened.
    assert!(u(&v, "trace/events") < made / 5, "{} events for {made} widgets", u(&v, "trace/events"));
    close("allocations", u(&v, "summary/allocations"), made);
    close("bytes allocated", u(&v, "summary/bytes_allocated"), made * 204);
    close("leaked bytes", u(&v, "summary/leaked_bytes"), red * 204);
    close("leaked objects", u(&v, "summary/leaked_objects"), red);
    let bin = bin_row(&v, 204).expect("204-byte bin");
    close("204-byte allocations", u(bin, "allocs"), made);
    let leak: u64 = arr(&v, "leaks")
        .iter()
        .filter(|r| leak_path(r).ends_with(&["make_red_widget".to_string(), "make_widget".to_string()]))
        .map(|r| u(r, "bytes"))
        .sum();
    close("leak path main > make_red_widget > make_widget", leak, red * 204);
}

/// The C++ operators sample on the same fast path as malloc, and nothing is counted twice:
/// an operator that allocates through another hooked function (aligned new through
/// aligned_alloc) must not draw from the byte count again. cxx_new's blocks are 32 to a few
/// hundred bytes; at a 1 KiB rate that is tens of thousands of samples per entry point, so
/// 10% is again far outside the sampling error.
#[test]
fn sampled_cxx_operators_estimate_the_true_counts() {
    let dir = WorkDir::new("sampled-cxx");
    let exe = compile(&dir, "g++", "cxx_new.cpp", "cxx_new", &["-O0", "-g"]);
    let (stdout, v) = profile_sampled(&dir, &exe, "1KiB", &["100000"]);
    let t = truth(&stdout, "cxx_new");
    let n = |k: &str| num(&t, k);
    let allocated = n("new") + n("new_array") + n("new_nothrow") + n("malloc");
    let released = n("delete") + n("delete_array") + n("free");

    assert_eq!(sample_rate_of(&v), 1024);
    assert!(u(&v, "trace/events") < allocated / 2, "{} events for {allocated} allocations", u(&v, "trace/events"));
    close("allocations", u(&v, "summary/allocations"), allocated);
    close("deallocations", u(&v, "summary/deallocations"), released);
    close("leaked objects", u(&v, "summary/leaked_objects"), allocated - released);
    close("operator new", u(&v, "summary/calls_by_kind/operator new"), n("new"));
    close("operator new[]", u(&v, "summary/calls_by_kind/operator new[]"), n("new_array"));
    close("operator new(nothrow)", u(&v, "summary/calls_by_kind/operator new(nothrow)"), n("new_nothrow"));
}

/// A program that starts single-threaded (no writer thread while sampling, see the monitor's
/// `output::sampled`) and then runs 8 threads at once: every thread's samples are kept and
/// weighted back. Each thread mallocs 100 000 blocks of its own size (503 to 559 bytes); at a
/// 4 KiB rate about 12 000 of each are sampled, a relative standard error under 1%, so 10% is
/// again more than ten standard errors.
#[test]
fn sampled_threads_estimate_each_threads_totals() {
    let dir = WorkDir::new("sampled-threads");
    let exe = compile_c(&dir, "threads.c", &["-pthread"]);
    let (stdout, v) = profile_sampled(&dir, &exe, "4KiB", &["8", "100000"]);
    let t = truth(&stdout, "threads");
    let per = truths(&stdout, "thread");
    assert_eq!(per.len(), 8);

    assert_eq!(sample_rate_of(&v), RATE);
    assert!(u(&v, "summary/threads") >= 8, "summary/threads = {}", u(&v, "summary/threads"));
    close("allocations", u(&v, "summary/allocations"), num(&t, "allocations"));
    close("deallocations", u(&v, "summary/deallocations"), num(&t, "frees"));
    close("leaked bytes", u(&v, "summary/leaked_bytes"), num(&t, "kept_bytes"));
    for p in &per {
        let size = num(p, "size");
        let b = bin_row(&v, size).unwrap_or_else(|| panic!("no {size}-byte bin"));
        close(&format!("bin {size} allocations"), u(b, "allocs"), num(p, "allocs"));
        close(&format!("bin {size} frees"), u(b, "frees"), num(p, "frees"));
    }
}

/// realloc under sampling: the returned block is sampled by its new size, the release of a
/// sampled old block is recorded (growth.c, nine reallocs per buffer from 16 to 4096 bytes).
/// At a 4 KiB rate the estimate of all 900 000 reallocs has a standard error under 1%, and the
/// 4096-byte kept buffers are sampled with probability 0.63.
#[test]
fn sampled_reallocs_estimate_the_true_totals() {
    let dir = WorkDir::new("sampled-growth");
    let exe = compile_c(&dir, "growth.c", &[]);
    let (stdout, v) = profile_sampled(&dir, &exe, "4KiB", &["100000"]);
    let t = truth(&stdout, "growth");

    assert_eq!(sample_rate_of(&v), RATE);
    close("reallocs", u(&v, "summary/calls_by_kind/realloc"), num(&t, "reallocs"));
    close("bytes allocated", u(&v, "summary/bytes_allocated"), num(&t, "bytes"));
    close("deallocations", u(&v, "summary/deallocations"), num(&t, "released") + num(&t, "frees"));
    let grown: u64 = arr(&v, "leaks")
        .iter()
        .filter(|r| leak_path(r).last().is_some_and(|f| f == "grow"))
        .map(|r| u(r, "bytes"))
        .sum();
    close("leaked by grow", grown, num(&t, "kept_bytes"));
}
