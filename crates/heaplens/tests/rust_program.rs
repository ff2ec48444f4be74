//! A Rust program under the monitor: std's start-up (which calls `pthread_getattr_np` and
//! mallocs inside it), a second thread, boxes of a known size, and a known number leaked.

mod common;

use common::*;

#[test]
fn rust_boxes_counted_and_attributed() {
    let dir = WorkDir::new("rust-boxes");
    let exe = compile_rust(&dir, "boxes.rs", "boxes");

    let bare = run_bare(&dir, &exe, &["2000"]);
    let trace = dir.join("boxes.hltrace");
    let out = run_traced(&dir, &trace, &exe, &["2000"]).ok("heaplens run boxes");
    assert_eq!(out.stdout, bare.stdout);
    let t = truth(&out.stdout, "boxes");
    let (made, kept) = (num(&t, "made"), num(&t, "kept"));

    let v = report(&dir, &trace);
    assert_consistent(&v);
    assert!(u(&v, "summary/threads") >= 2);
    let bin = bin_row(&v, 300).expect("a 300-byte bin");
    assert_eq!(u(bin, "allocs"), made);
    assert_eq!(u(bin, "frees"), made - kept);
    assert_eq!(u(bin, "kept_bytes"), kept * 300);
    // The boxes are attributed to the program's own function, past Rust's allocator frames.
    let holders: u64 = arr(&v, "leaks")
        .iter()
        .filter(|r| leak_path(r).iter().any(|f| f.contains("make_boxes")))
        .map(|r| u(r, "bytes"))
        .sum();
    assert_eq!(holders, kept * 300, "leaked boxes not attributed to make_boxes: {:#?}", arr(&v, "leaks"));
    // Paths start at the program's own main (or its thread's closure): Rust's start-up glue
    // above it is dropped, as the C library's is above C's main.
    for r in arr(&v, "leaks") {
        let path = leak_path(r);
        assert!(
            !path.iter().any(|f| f.starts_with("std::rt::") || f.contains("__rust_begin_short_backtrace")),
            "{path:?}"
        );
    }

    // Names are demangled (no `_ZN...E` or `_R...` symbols, no `::h0123456789abcdef` hashes),
    // with generic arguments elided.
    for name in all_names(&v) {
        assert!(!name.starts_with("_ZN") && !name.starts_with("_R"), "not demangled: {name}");
        let hashed = name
            .split("::")
            .any(|p| p.len() == 17 && p.starts_with('h') && p[1..].chars().all(|c| c.is_ascii_hexdigit()));
        assert!(!hashed, "hash left in {name}");
        let args_left = name.match_indices("::<").any(|(i, _)| !name[i + 3..].starts_with('…'));
        assert!(
            !args_left && !name.contains("Vec<T") && !name.contains("Vec<u8"),
            "generic arguments not elided: {name}"
        );
    }

    // By source line: the line of boxes.rs that makes the boxes allocates them all.
    let src = std::fs::read_to_string(examples_dir().join("boxes.rs")).unwrap();
    let line = 1 + src.lines().position(|l| l.contains("Box::new([i as u8; 300])")).unwrap();
    let args = ["report", trace.to_str().unwrap(), "--lines", "--format", "json", "--top", "0"];
    let lines: serde_json::Value = serde_json::from_str(&heaplens(&dir, &args).ok("--lines").stdout).unwrap();
    let at = format!("@boxes.rs:{line}");
    let at_line: u64 = arr(&lines, "leaks")
        .iter()
        .filter(|r| leak_path(r).iter().any(|f| f.contains("make_boxes") && f.ends_with(&at)))
        .map(|r| u(r, "bytes"))
        .sum();
    assert_eq!(at_line, kept * 300, "leaked boxes not attributed to boxes.rs:{line}: {:#?}", arr(&lines, "leaks"));

    // pprof's legacy profile maps addresses through each segment's file offset, which in a
    // Rust binary differs from its address: google-pprof must name make_boxes too.
    let heap = dir.join("boxes.heap");
    let args = ["export", trace.to_str().unwrap(), "--format", "pprof-text", "-o", heap.to_str().unwrap()];
    heaplens(&dir, &args).ok("export pprof-text");
    let mut cmd = std::process::Command::new("google-pprof");
    cmd.args(["--text", "--cum", "--show_bytes", "--alloc_space"]).arg(&exe).arg(&heap);
    let out = run_cmd(cmd, &dir.path).ok("google-pprof (apt-get install google-perftools)");
    // `flat flat% sum% cum cum% function`: make_boxes holds every box in its cumulative bytes.
    let cum = out
        .stdout
        .lines()
        .find(|l| l.contains("make_boxes"))
        .and_then(|l| l.split_whitespace().nth(3)?.parse::<u64>().ok());
    assert!(cum.is_some_and(|c| c >= made * 300), "google-pprof's make_boxes\n{}", out.stdout);
}
