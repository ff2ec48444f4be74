//! A Rust program reporting to heaplens through the heaplens-api crate
//! (`examples/rust_pools.rs`): its own global allocator (a bump allocator that never calls
//! malloc) wrapped in `heaplens_api::Tracked`, and an arena of its own with resets. Its boxes
//! are counted exactly, attributed to the functions that made them with the pool as the
//! innermost frame, and the arena's blocks are released by its resets.

mod common;

use common::*;

#[test]
fn a_tracked_global_allocator_and_an_arena_report_exact_blocks() {
    let dir = WorkDir::new("rust-pools");
    let exe = compile_rust_with_api(&dir, "rust_pools.rs", "rust_pools", &[]);

    let bare = run_bare(&dir, &exe, &["2000"]).ok("bare run");
    assert!(bare.stdout.contains("recording=false"), "{}", bare.stdout);
    let trace = dir.join("p.hltrace");
    let out = run_traced(&dir, &trace, &exe, &["2000"]).ok("run under heaplens");
    assert_eq!(out.stdout.replace("recording=true", "recording=false"), bare.stdout);
    let t = truth(&out.stdout, "rustpools");
    let (boxes, kept) = (num(&t, "boxes"), num(&t, "kept"));
    let v = report(&dir, &trace);

    // The boxes: one bin of 300 bytes, all from the bump pool.
    let bin = bin_row(&v, 300).expect("a 300-byte bin");
    assert_eq!((u(bin, "allocs"), u(bin, "frees"), u(bin, "kept_bytes")), (boxes, boxes - kept, kept * 300));
    // Boxes leaked by call site, by innermost frame (by default the report passes over
    // Box::new for the program's frame): the pool innermost, Box::new above it (the wrapper's
    // and the compiler's allocator frames between them cut), then the function.
    let raw = report_with(&dir, &trace, &["--raw-frames"]);
    let site = |f: &str| -> (u64, u64) {
        arr(&raw, "leaks")
            .iter()
            .filter(|r| {
                let p = leak_path(r);
                let boxed = p.iter().rev().skip(1).take(2).any(|c| c.starts_with("alloc::boxed::"));
                p.last().is_some_and(|l| l == "[pool] bump") && boxed && p.iter().any(|c| c.contains(f))
            })
            .fold((0, 0), |(n, b), r| (n + u(r, "allocs"), b + u(r, "bytes")))
    };
    assert_eq!(site("leak_site"), (num(&t, "leaked"), num(&t, "leaked_bytes")), "{:#}", at(&raw, "leaks"));
    assert_eq!(site("make_boxes").1, kept * 300, "{:#}", at(&raw, "leaks"));
    // The arena: every block released by a reset, none unmatched.
    assert_eq!(u(&v, "summary/frees_by_kind/heaplens_pool_reset"), num(&t, "scratch_blocks"));
    let scratch = arr(&v, "direct/rows").iter().find(|r| r["function"] == "[pool] scratch").expect("the arena");
    assert_eq!((u(scratch, "bytes"), u(scratch, "kept_bytes")), (num(&t, "scratch_bytes"), 0));
    assert!(u(&v, "summary/unmatched_frees") <= 1, "{:#}", at(&v, "summary"));
}
