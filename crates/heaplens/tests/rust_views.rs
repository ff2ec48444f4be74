//! (Issue 28, item 8.) Every view of a Rust program's trace: heaplens profiling its own
//! `heaplens report`, whose names are long, elided (`Vec<…>`) and cut for the pictures'
//! legends. The map and the timeline once cut those labels at a byte inside `…` and panicked,
//! leaving an empty PNG.

mod common;

use std::path::Path;

use common::*;

/// `heaplens ARGS`, which must succeed without a panic.
fn ok(dir: &WorkDir, args: &[&str]) -> Out {
    let o = heaplens(dir, args);
    assert_no_panic(&o, &args.join(" "));
    o.ok(&args.join(" "))
}

fn non_empty(path: &Path) {
    let len = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
    assert!(len > 0, "{} is empty", path.display());
}

#[test]
fn every_view_of_a_rust_programs_trace() {
    let dir = WorkDir::new("rust-views");
    let (_, widgets) = traced_widgets(&dir, &["200"]);
    let trace = dir.join("r.hltrace");
    let exe = heaplens_exe();
    run_traced(&dir, &trace, &exe, &["report", widgets.to_str().unwrap()]).ok("heaplens report under heaplens");
    let tr = trace.to_str().unwrap();
    let out = |name: &str| dir.join(name).to_str().unwrap().to_string();

    let v = report(&dir, &trace);
    assert_consistent(&v);
    // The case that broke the pictures: a label longer than a legend line with `…` in it.
    assert!(
        all_names(&v).iter().any(|n| n.contains('…') && n.chars().count() > 44),
        "the report has long elided names: {:#?}",
        all_names(&v)
    );
    for extra in [&[][..], &["--cxx"][..], &["--lifetimes"][..], &["--lines"][..]] {
        let mut args = vec!["report", tr];
        args.extend_from_slice(extra);
        let o = ok(&dir, &args);
        assert!(o.stdout.contains("SUMMARY") || !extra.is_empty(), "{extra:?}:\n{}", o.stdout);
    }

    for (format, file) in [
        ("collapsed", "r.folded"),
        ("flamegraph", "r.svg"),
        ("pprof-text", "r.heap"),
        ("pprof", "r.pb.gz"),
        ("firefox", "r.json"),
        ("heaptrack", "r.heaptrack"),
        ("parquet", "r.parquet"),
    ] {
        ok(&dir, &["export", tr, "--format", format, "-o", &out(file)]);
        assert!(dir.join(file).exists(), "{format}: {file}");
    }

    for (cmd, file, extra) in [
        ("map", "map.png", &[][..]),
        ("map", "map.svg", &[][..]),
        ("map", "threads.png", &["--color", "thread"][..]),
        ("timeline", "timeline.png", &[][..]),
        ("timeline", "timeline.svg", &[][..]),
        ("view", "view.html", &[][..]),
    ] {
        let mut args = vec![cmd, tr, "-o"];
        let path = out(file);
        args.push(&path);
        args.extend_from_slice(extra);
        ok(&dir, &args);
        non_empty(&dir.join(file));
    }
}
