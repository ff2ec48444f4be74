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
