//! Exceptions, longjmp, signal handlers, a failing operator new and a thread that exits: the
//! program behaves the same under heaplens, every block is counted, and the stacks recorded
//! after control left a chain abruptly are the real ones (the incremental stack walk must not
//! reuse frames that no longer exist), with incremental and full unwinding agreeing.

mod common;

use common::*;
use serde_json::Value;

fn leak_paths_of_size(v: &Value, size: u64) -> Vec<(Vec<String>, u64)> {
    // Leak rows do not carry sizes: blocks of each size come from distinct functions here, so
    // select rows by the bytes they hold.
    arr(v, "leaks")
        .iter()
        .filter(|r| u(r, "bytes").is_multiple_of(size) && u(r, "bytes") / size == u(r, "allocs"))
        .map(|r| (leak_path(r), u(r, "allocs")))
        .collect()
}

#[test]
fn abrupt_control_flow_is_recorded_right() {
    let dir = WorkDir::new("control-flow");
    let exe = compile(&dir, "g++", "control_flow.cpp", "control_flow", &["-O2", "-g", "-pthread"]);
    let bare = run_bare(&dir, &exe, &["60"]);
    assert!(bare.status.success(), "{}", bare.show());
    let mut reports = Vec::new();
    for full in ["0", "1"] {
        let trace = dir.join(format!("cf-{full}.hltrace"));
        let out = run_traced_env(&dir, &trace, &[("HEAPLENS_FULL_UNWIND", full)], &exe, &["60"]).ok("heaplens run");
        assert_eq!(out.stdout, bare.stdout);
        reports.push(report(&dir, &trace));
    }
    let t = truth(&bare.stdout, "control_flow");
    let rounds = num(&t, "rounds");
    assert_eq!((num(&t, "thrown"), num(&t, "jumped"), num(&t, "bad_alloc")), (rounds, rounds, 1));
    let v = &reports[0];
    assert_consistent(v);
    for (size, count) in
        [(111, rounds), (222, rounds), (333, rounds), (444, rounds), (555, num(&t, "signals")), (666, 1)]
    {
        let bin = bin_row(v, size).unwrap_or_else(|| panic!("no {size}-byte bin"));
        assert_eq!(u(bin, "allocs"), count, "{size}-byte blocks");
        assert_eq!(u(bin, "kept_bytes"), count * size, "{size}-byte blocks kept");
    }
    // After the exception and the longjmp, the stack is main's own call again.
    let expect_path = |size: u64, tail: &[&str]| {
        let rows = leak_paths_of_size(v, size);
        let total: u64 = rows
            .iter()
            .filter(|(p, _)| p.ends_with(&tail.iter().map(|s| s.to_string()).collect::<Vec<_>>()))
            .map(|(_, n)| n)
            .sum();
        assert_eq!(
            total,
            if size == 555 { num(&t, "signals") } else { rounds },
            "{size}-byte blocks via {tail:?}: {rows:?}"
        );
    };
    // (Static C++ functions: DWARF names them without a linkage name, the symbol table with
    // their parameters.)
    expect_path(333, &["main", "after_throw()"]);
    expect_path(444, &["main", "after_jump()"]);
    expect_path(111, &["deep_throw(int)", "deep_throw(int)"]);
    expect_path(222, &["deep_jump(int)", "deep_jump(int)"]);
    expect_path(555, &["on_signal(int)"]);
    // Same slot, same return address into `common`, different caller above it.
    let sides = leak_paths_of_size(v, 777);
    for side in ["left()", "right()"] {
        let n: u64 = sides
            .iter()
            .filter(|(p, _)| p.ends_with(&["main".to_string(), side.to_string(), "common()".to_string()]))
            .map(|(_, n)| n)
            .sum();
        assert_eq!(n, rounds / 2, "777-byte blocks via main > {side} > common: {sides:?}");
    }
    // Incremental and full unwinding recorded the same stacks.
    for key in ["leaks", "direct", "call_graph"] {
        assert_eq!(reports[0][key], reports[1][key], "{key} differs between incremental and full unwinding");
    }
}
