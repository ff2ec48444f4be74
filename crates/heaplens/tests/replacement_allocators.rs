//! Programs that link mimalloc, jemalloc or tcmalloc and call their own entry points
//! (`examples/replacement_allocators.c`): every call is counted under its own name, exactly,
//! and the blocks a function leaks through them are in the leak table with their bytes.

mod common;

use std::process::Command;

use common::*;

fn check(allocator: &str, define: &str) {
    let dir = WorkDir::new(&format!("replacement-{allocator}"));
    let exe = dir.join(allocator);
    let mut cc = Command::new("gcc");
    cc.args(["-O2", "-g", define, "-o"]).arg(&exe).arg(examples_dir().join("replacement_allocators.c"));
    cc.arg(format!("-l{allocator}"));
    let o = run_cmd(cc, &dir.path);
    assert!(o.status.success(), "compiling against {allocator} failed (is its -dev package installed?)\n{}", o.show());
    let bare = run_bare::<&str>(&dir, &exe, &[]).ok("bare run");
    let trace = dir.join("t.hltrace");
    let out = run_traced::<&str>(&dir, &trace, &exe, &[]).ok("run under heaplens");
    assert_eq!(out.stdout, bare.stdout, "the program prints the same under heaplens");
    let t = truth(&out.stdout, allocator);
    let v = report(&dir, &trace);
    let (leaked, leaked_bytes) = (num(&t, "leaked"), num(&t, "leaked_bytes"));
    for (label, want) in t.iter().filter(|(k, _)| !k.starts_with("leaked")) {
        let want: u64 = want.parse().unwrap();
        let calls = &at(&v, "summary/calls_by_kind")[label.as_str()];
        let frees = &at(&v, "summary/frees_by_kind")[label.as_str()];
        let got = calls.as_u64().or(frees.as_u64());
        assert_eq!(got, Some(want), "{allocator}: {label} calls\n{:#}", at(&v, "summary"));
    }
    let rows: Vec<(u64, u64)> = arr(&v, "leaks")
        .iter()
        .filter(|r| leak_path(r).last().is_some_and(|f| f == "leak_site"))
        .map(|r| (u(r, "allocs"), u(r, "bytes")))
        .collect();
    assert_eq!(rows, [(leaked, leaked_bytes)], "{allocator}: leak_site's blocks");
}

#[test]
fn mimalloc_entry_points_are_counted_by_name() {
    check("mimalloc", "-DUSE_MIMALLOC");
}

#[test]
fn jemalloc_entry_points_are_counted_by_name() {
    check("jemalloc", "-DUSE_JEMALLOC");
}

#[test]
fn tcmalloc_entry_points_are_counted_by_name() {
    check("tcmalloc", "-DUSE_TCMALLOC");
}
