//! Heap assertions in Rust tests (`examples/heap_assert.rs`): `heaplens_api::stats()` answered
//! by the monitor under `heaplens run` and by the `Counting` allocator without it, with the same
//! numbers: `names(100)` makes 101 allocations (a String per name and the vector). The test
//! passes both ways, and fails both ways when `names` allocates more (`--cfg grow`: 201).

mod common;

use common::*;

/// Runs the test binary `exe` (bare, or under heaplens with `run_args`): its exit status and
/// what it measured (`source`, `blocks`, `bytes`, `live`).
fn measure(dir: &WorkDir, exe: &std::path::Path, run_args: Option<&[&str]>) -> (Option<i32>, Vec<String>) {
    let test_args = ["--test-threads=1", "--nocapture"];
    let out = match run_args {
        None => run_bare(dir, exe, &test_args),
        Some(extra) => {
            let trace = dir.join("t.hltrace");
            let mut args: Vec<&std::ffi::OsStr> = vec!["run".as_ref(), "-q".as_ref(), "-o".as_ref(), trace.as_os_str()];
            args.extend(extra.iter().map(std::ffi::OsStr::new));
            args.extend(["--".as_ref(), exe.as_os_str()]);
            args.extend(test_args.iter().map(std::ffi::OsStr::new));
            heaplens(dir, &args)
        }
    };
    let t = truth(&out.stdout, "heap_assert");
    let got = ["source", "blocks", "bytes", "live"].map(|k| t[k].clone()).to_vec();
    (out.status.code(), got)
}

#[test]
fn the_monitor_and_the_counting_allocator_count_the_same() {
    let dir = WorkDir::new("heap-assert");
    let exe = compile_rust_with_api(&dir, "heap_assert.rs", "heap_assert", &["--test"]);
    let (status, bare) = measure(&dir, &exe, None);
    assert_eq!(status, Some(0), "passes without heaplens: {bare:?}");
    assert_eq!(bare[..2], ["Counting", "101"], "{bare:?}");
    let (status, traced) = measure(&dir, &exe, Some(&[]));
    assert_eq!(status, Some(0), "passes under heaplens: {traced:?}");
    assert_eq!(traced[..2], ["Monitor", "101"], "{traced:?}");
    assert_eq!(bare[1..], traced[1..], "the same blocks, bytes and live blocks either way");
    // A sampled run cannot count exactly: the Counting allocator answers there.
    let (status, sampled) = measure(&dir, &exe, Some(&["--sample-rate", "4096"]));
    assert_eq!((status, &sampled[..2]), (Some(0), &["Counting".to_string(), "101".to_string()][..]));
}

#[test]
fn the_monitor_counts_without_the_counting_allocator() {
    let dir = WorkDir::new("heap-assert-monitor");
    let exe = compile_rust_with_api(&dir, "heap_assert.rs", "heap_assert", &["--test", "--cfg", "no_counting"]);
    let (status, traced) = measure(&dir, &exe, Some(&[]));
    assert_eq!((status, &traced[..2]), (Some(0), &["Monitor".to_string(), "101".to_string()][..]), "{traced:?}");
    // Without heaplens nobody counts, and the test says so by failing.
    let (status, bare) = measure(&dir, &exe, None);
    assert_eq!((status, bare[0].as_str()), (Some(101), "None"), "{bare:?}");
}

#[test]
fn allocating_more_fails_the_test_both_ways() {
    let dir = WorkDir::new("heap-assert-grow");
    let exe = compile_rust_with_api(&dir, "heap_assert.rs", "heap_assert_grow", &["--test", "--cfg", "grow"]);
    for run in [None, Some(&[] as &[&str])] {
        let (status, got) = measure(&dir, &exe, run);
        assert_eq!(status, Some(101), "libtest's failure status: {got:?}");
        assert_eq!(got[1], "201", "a copy of each name too: {got:?}");
    }
}
