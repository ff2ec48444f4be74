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

    // The page in a browser: its legend keeps each site's innermost frame (the end of its
    // label) and fits beside the map in a 1500-pixel window, the whole label in the tooltip.
    let found = browse(&dir, &dir.join("view.html"), &dir.join("view.png"), "heaplens");
    assert_eq!(found("errors"), "[]");
    assert_eq!(found("fits"), "true", "the page is no wider than the window");
    let rows: Vec<(String, String)> = serde_json::from_str(&found("legend_rows")).unwrap();
    let sites: Vec<_> = rows.iter().filter(|(text, _)| text != "the rest").collect();
    assert!(sites.len() >= 3, "{rows:?}");
    for (text, title) in sites {
        let shown = text.trim_start_matches("...");
        let (shown, full) = (shown.rsplit_once(" (").unwrap().0, title.rsplit_once(" (").unwrap().0);
        let innermost = full.rsplit(" > ").next().unwrap();
        let name = innermost.rsplit("::").next().unwrap();
        assert!(shown.chars().count() <= 44, "{text:?}");
        assert!(shown.ends_with(name), "the row {text:?} ends with the innermost frame of {title:?}");
    }
}
