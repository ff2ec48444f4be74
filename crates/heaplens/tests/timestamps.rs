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
