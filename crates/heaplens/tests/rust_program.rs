//! A Rust program under the monitor: std's start-up (which calls `pthread_getattr_np` and
//! mallocs inside it), a second thread, boxes of a known size, and a known number leaked.

mod common;

use std::process::Command;

use common::*;

#[test]
fn rust_boxes_counted_and_attributed() {
    let dir = WorkDir::new("rust-boxes");
    let exe = dir.join("boxes");
    let mut rustc = Command::new("rustc");
    rustc.args(["-O", "-g", "--edition", "2021", "-o"]).arg(&exe).arg(examples_dir().join("boxes.rs"));
    let built = run_cmd(rustc, &dir.path);
    assert!(built.status.success(), "rustc failed\n{}", built.show());

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
}
