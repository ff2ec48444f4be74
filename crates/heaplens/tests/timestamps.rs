//! Event times come out in nanoseconds whatever clock the monitor stamped them with (TSC ticks
//! when the kernel's clocksource is the TSC, CLOCK_MONOTONIC otherwise).

mod common;

use common::*;

#[test]
fn peak_time_reflects_a_known_sleep() {
    let dir = WorkDir::new("timed");
    let exe = compile_c(&dir, "timed.c", &[]);
    let trace = dir.join("timed.hltrace");
    let started = std::time::Instant::now();
    let out = run_traced(&dir, &trace, &exe, &[] as &[&str]).ok("heaplens run timed");
    let wall_ns = started.elapsed().as_nanos() as u64;
    let t = truth(&out.stdout, "timed");
    let v = report(&dir, &trace);
    assert_eq!(u(&v, "summary/peak_bytes"), num(&t, "peak_bytes"));
    let sleep_ns = num(&t, "sleep_ms") * 1_000_000;
    let peak_at = u(&v, "summary/peak_time_ns");
    let runtime = u(&v, "summary/runtime_ns");
    assert!(peak_at >= sleep_ns, "peak at {peak_at} ns, but it came after a {sleep_ns} ns sleep");
    assert!(peak_at <= runtime, "peak at {peak_at} ns after a run of {runtime} ns");
    assert!(runtime <= wall_ns, "run time {runtime} ns longer than the {wall_ns} ns heaplens run took");
}

/// Events recorded while no other thread's can fall among them keep coarser times (trace
/// format 4's time shift, `heaplens-preload/src/solo.rs`), the others exact ones; either way
/// every free meets its allocation when the threads' events are merged: blocks handed between
/// threads that take turns, and between two threads running at once, freed and reused across
/// them microseconds apart.
#[test]
fn coarse_times_keep_every_free_after_its_allocation() {
    let dir = WorkDir::new("turns");
    let exe = compile_c(&dir, "turns.c", &["-pthread"]);
    let trace = dir.join("turns.hltrace");
    let out = run_traced(&dir, &trace, &exe, &["20000", "20000"]).ok("heaplens run turns");
    let t = truth(&out.stdout, "turns");
    let v = report(&dir, &trace);
    assert_eq!(u(&v, "summary/unmatched_frees"), 0, "a free merged before its allocation");
    assert_eq!(u(&v, "summary/overwritten_allocations"), 0, "an allocation merged before the free of its address");
    assert_eq!(u(&v, "summary/deallocations"), num(&t, "frees"));
    assert_eq!(u(&v, "summary/leaked_objects"), num(&t, "leaked_blocks"));
    assert_eq!(u(&v, "summary/leaked_bytes"), num(&t, "leaked_bytes"));
    assert_eq!(u(&v, "summary/calls_by_kind/malloc"), num(&t, "mallocs"));

    // The phases where one thread runs alone were coarsened (the time deltas of a payload are
    // then in units of 2^5 of the trace's): at least the main thread's first 20,000 blocks.
    let bytes = std::fs::read(&trace).unwrap();
    let mut r = heaplens_trace::TraceReader::new(&bytes[..]).unwrap();
    let mut coarse = 0;
    while let Some((kind, p)) = r.next_block().unwrap() {
        if kind == heaplens_trace::BlockKind::EventColumns && heaplens_trace::columns::time_shift(&p).unwrap() > 0 {
            coarse += heaplens_trace::columns::event_count(&p).unwrap();
        }
    }
    assert!(coarse >= 20_000, "{coarse} events with coarse times");
}

/// A single-threaded program's times are kept to the coarser unit, and the report says so:
/// blocks freed at once read as living under that unit, not 0 ns; `--exact-times` keeps every
/// time to the exact unit. Known lifetimes: 50,000 blocks freed right away, 20 held across a
/// 2 ms sleep each.
#[test]
fn reports_state_how_precisely_times_were_kept() {
    const SOURCE: &str = r#"
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
__attribute__((noinline)) void quick_blocks(int n) {
    for (int i = 0; i < n; i++) { volatile char *p = malloc(32); p[0] = 1; free((void *)p); }
}
__attribute__((noinline)) void slow_blocks(int n) {
    struct timespec ms2 = {0, 2000000};
    for (int i = 0; i < n; i++) { volatile char *p = malloc(64); p[0] = 1; nanosleep(&ms2, 0); free((void *)p); }
}
int main(void) {
    quick_blocks(50000);
    slow_blocks(20);
    printf("lifetimes: quick=50000 slow=20 slow_ns=2000000\n");
    return 0;
}
"#;
    let dir = WorkDir::new("precision");
    let exe = compile_source(&dir, "gcc", "precision.c", SOURCE, "precision", &["-O2", "-g"]);
    let row = |v: &serde_json::Value, f: &str| -> serde_json::Value {
        let rows = at(v, "lifetimes").as_array().unwrap();
        rows.iter().find(|r| r["function"] == f).unwrap_or_else(|| panic!("no lifetimes row for {f}: {v}")).clone()
    };
    let coarse = dir.join("coarse.hltrace");
    let out = run_traced(&dir, &coarse, &exe, &[] as &[&str]).ok("heaplens run precision");
    let t = truth(&out.stdout, "lifetimes");
    let v = report_with(&dir, &coarse, &["--lifetimes"]);
    let events = u(&v, "trace/events");
    assert_eq!(u(&v, "trace/coarse_time_events"), events, "one thread recorded: every time coarse");
    let (unit, exact) = (u(&v, "trace/coarse_time_unit_ns"), u(&v, "trace/time_unit_ns"));
    // 2^5 exact units; an exact unit is 32 TSC ticks (a TSC of 0.5-10 GHz) or 1 ns.
    assert!((1..=64).contains(&exact), "exact unit {exact} ns");
    assert!(unit >= 30 * exact && unit <= 34 * exact, "coarse unit {unit} ns, exact {exact} ns");
    let quick = row(&v, "quick_blocks");
    assert_eq!(u(&quick, "freed"), num(&t, "quick"));
    assert_eq!(u(&quick, "median_ns"), 0, "a block freed at once, in units of {unit} ns");
    let slow = row(&v, "slow_blocks");
    assert_eq!(u(&slow, "freed"), num(&t, "slow"));
    assert!(u(&slow, "median_ns_high") >= num(&t, "slow_ns"), "{slow}");
    let text = heaplens(&dir, &["report", "--lifetimes", coarse.to_str().unwrap()]).ok("report --lifetimes");
    let lifetimes = &text.stdout[text.stdout.find("LIFETIMES").unwrap()..];
    let line = lifetimes.lines().find(|l| l.ends_with("quick_blocks")).unwrap();
    assert!(line.contains(&format!("<{unit} ns")), "{line}");
    assert!(
        text.stdout.contains(&format!("times kept to {unit} ns: one thread recorded at a time")),
        "{}",
        text.stdout
    );

    let exact_trace = dir.join("exact.hltrace");
    let mut cmd = std::process::Command::new(heaplens_exe());
    cmd.args(["run", "--exact-times", "-o"]).arg(&exact_trace).arg("--").arg(&exe);
    run_cmd(cmd, &dir.path).ok("heaplens run --exact-times");
    let v = report_with(&dir, &exact_trace, &["--lifetimes"]);
    assert_eq!(u(&v, "trace/coarse_time_events"), 0);
    assert_eq!(u(&v, "trace/coarse_time_unit_ns"), 0);
    assert_eq!(u(&row(&v, "quick_blocks"), "freed"), num(&t, "quick"));
    // malloc, a store and free take more than one exact unit, under the monitor.
    assert!(u(&row(&v, "quick_blocks"), "median_ns") > 0);
    let text = heaplens(&dir, &["report", "--lifetimes", exact_trace.to_str().unwrap()]).ok("report --lifetimes");
    assert!(!text.stdout.contains("times kept to"), "{}", text.stdout);
}
