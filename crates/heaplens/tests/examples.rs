//! The programs in `examples/`, run under `heaplens run`, with every number of
//! `heaplens report --format json` checked against the truth the program prints about itself.

mod common;

use common::*;
use serde_json::Value;

const WIDGET: u64 = 204;

/// Runs an example bare and under heaplens, checks the program's output and exit status are the
/// same both ways (up to pids), and returns (traced output, report).
fn profile(dir: &WorkDir, exe: &std::path::Path, args: &[&str], prefix: &str) -> (Out, Value) {
    let bare = run_bare(dir, exe, args).ok("bare run");
    let trace = dir.join(format!("{prefix}.hltrace"));
    let out = run_traced(dir, &trace, exe, args).ok("heaplens run");
    let strip = |s: &str| -> Vec<_> { truths(s, prefix).into_iter().map(stable).collect() };
    assert_eq!(strip(&out.stdout), strip(&bare.stdout), "stdout differs under heaplens\n{}", out.show());
    assert_eq!(out.stdout.lines().count(), bare.stdout.lines().count(), "stdout differs\n{}", out.show());
    assert_eq!(out.program_stderr(), bare.program_stderr(), "stderr differs under heaplens");
    assert!(
        out.stderr.contains(&format!("heaplens: trace written to {}", trace.display())),
        "heaplens run did not say where the trace went\n{}",
        out.show()
    );
    let v = report(dir, &trace);
    assert_consistent(&v);
    assert_eq!(at(&v, "trace/truncated"), &Value::Bool(false), "trace/truncated");
    assert_eq!(at(&v, "trace/complete"), &Value::Bool(true), "trace/complete");
    assert_eq!(u(&v, "trace/corrupt_blocks"), 0, "trace/corrupt_blocks");
    assert_eq!(at(&v, "process/exit_code").as_i64(), Some(0), "process/exit_code");
    assert!(at(&v, "process/exit_signal").is_null(), "process/exit_signal");
    (out, v)
}

/// The mprof paper's producer/consumer example, checked table by table (its Figures 2 to 5).
fn check_widgets(v: &Value, t: &std::collections::BTreeMap<String, String>, exe_name: &str) {
    let (n, red, blue) = (num(t, "made"), num(t, "red"), num(t, "blue"));
    assert_eq!(num(t, "size"), WIDGET);
    assert_eq!(red + blue, n);

    // Summary. widgets.c makes no allocation but its widgets (stdout is unbuffered).
    assert_eq!(u(v, "summary/allocations"), n, "summary/allocations");
    assert_eq!(u(v, "summary/deallocations"), blue, "summary/deallocations");
    assert_eq!(u(v, "summary/leaked_objects"), red, "summary/leaked_objects");
    assert_eq!(u(v, "summary/leaked_bytes"), red * WIDGET, "summary/leaked_bytes");
    assert_eq!(u(v, "summary/bytes_allocated"), n * WIDGET, "summary/bytes_allocated");
    // Every widget is made before the first one is consumed.
    assert_eq!(u(v, "summary/peak_bytes"), n * WIDGET, "summary/peak_bytes");
    assert_eq!(u(v, "summary/unmatched_frees"), 0, "summary/unmatched_frees");
    assert_eq!(u(v, "summary/failed_allocations"), 0, "summary/failed_allocations");
    assert_eq!(u(v, "summary/calls_by_kind/malloc"), n, "calls_by_kind/malloc");
    assert_eq!(u(v, "summary/frees_by_kind/free"), blue, "frees_by_kind/free");
    assert_eq!(u(v, "summary/threads"), 1, "summary/threads");
    assert!(u(v, "summary/runtime_ns") > 0, "summary/runtime_ns");
    assert!(at(v, "process/exe").as_str().unwrap_or("").ends_with(exe_name), "process/exe is {}", at(v, "process/exe"));

    // Memory leak table (Figure 2): one path, main > make_red_widget > make_widget.
    let leaks = arr(v, "leaks");
    let red_rows: Vec<&Value> =
        leaks.iter().filter(|r| leak_path(r).ends_with(&["make_red_widget".into(), "make_widget".into()])).collect();
    assert_eq!(red_rows.len(), 1, "expected one leak path through make_red_widget: {leaks:#?}");
    let row = red_rows[0];
    assert_eq!(leak_path(row), ["main", "make_red_widget", "make_widget"], "leak path");
    assert_eq!(u(row, "allocs"), red, "leak allocs");
    assert_eq!(u(row, "bytes"), red * WIDGET, "leak bytes");
    assert_eq!(row["cut"], Value::Bool(false), "a 3-frame path ending at main is not cut");
    let pct = row["percent"].as_f64().expect("leak percent");
    assert!(pct > 99.0 && pct <= 100.0, "the one leak holds all leaked bytes, percent = {pct}");
    assert_eq!(leaks.len(), 1, "widgets leaks nothing else: {leaks:#?}");
    for r in leaks {
        assert!(!leak_path(r).iter().any(|f| f == "make_blue_widget"), "blue widgets are freed");
    }

    // Allocation bin table (Figure 3).
    let bin = bin_row(v, WIDGET).expect("no 204-byte bin");
    assert_eq!(u(bin, "allocs"), n, "bin 204 allocs");
    assert_eq!(u(bin, "bytes"), n * WIDGET, "bin 204 bytes");
    assert_eq!(u(bin, "frees"), blue, "bin 204 frees");
    assert_eq!(u(bin, "kept_bytes"), red * WIDGET, "bin 204 kept_bytes");
    let bp = bin["bytes_percent"].as_f64().expect("bytes_percent");
    assert!(bp > 99.0 && bp <= 100.0, "bin 204 holds every byte, bytes_percent = {bp}");
    // The program's type of that size, from its DWARF, as mprof's table showed it (issue 18,
    // item 2): `typedef struct { ... } widget`.
    let types: Vec<&str> = arr(bin, "types").iter().filter_map(|t| t.as_str()).collect();
    assert_eq!(types, ["widget"], "types of the 204-byte bin");

    // Direct allocation table (Figure 4): make_widget alone, all medium-sized (33-256 bytes).
    let rows = arr(v, "direct/rows");
    assert_eq!(rows.len(), 1, "only make_widget allocates: {rows:#?}");
    let d = &rows[0];
    assert_eq!(d["function"], "make_widget");
    assert!(d["module"].as_str().unwrap_or("").ends_with(exe_name), "module {}", d["module"]);
    assert_eq!(u(d, "bytes"), n * WIDGET, "direct make_widget bytes");
    assert_eq!(u(d, "calls"), n, "direct make_widget calls");
    assert_eq!(u(d, "kept_bytes"), red * WIDGET, "direct make_widget kept_bytes");
    assert_eq!(u(d, "bytes_by_class/m"), n * WIDGET, "make_widget medium bytes");
    assert_eq!(u(d, "kept_by_class/m"), red * WIDGET, "make_widget medium kept");
    for c in ["s", "l", "x"] {
        assert_eq!(u(d, &format!("bytes_by_class/{c}")), 0, "make_widget {c} bytes");
    }
    assert_eq!(u(v, "direct/total/bytes"), n * WIDGET);
    assert_eq!(u(v, "direct/total/calls"), n);

    // Allocation call graph (Figure 5).
    let mw = graph_entry(v, "make_widget").expect("make_widget in the call graph");
    assert_eq!(mw["is_cycle"], Value::Bool(false));
    assert_eq!(u(mw, "self_bytes"), n * WIDGET, "make_widget self bytes");
    assert_eq!(u(mw, "inclusive_bytes"), n * WIDGET, "make_widget inclusive bytes");
    assert_eq!(u(mw, "calls"), n, "make_widget calls");
    let callers = mw["callers"].as_array().expect("callers");
    for (name, count) in [("make_red_widget", red), ("make_blue_widget", blue)] {
        let c = callers
            .iter()
            .find(|c| c["name"] == name)
            .unwrap_or_else(|| panic!("{name} is not a caller of make_widget: {callers:#?}"));
        assert_eq!(u(c, "bytes"), count * WIDGET, "{name} -> make_widget bytes");
        assert_eq!(u(c, "calls"), count, "{name} -> make_widget calls");
    }
    assert_eq!(callers.len(), 2, "make_widget has two callers: {callers:#?}");
    for (name, count) in [("make_red_widget", red), ("make_blue_widget", blue)] {
        let e = graph_entry(v, name).unwrap_or_else(|| panic!("{name} in the call graph"));
        assert_eq!(u(e, "self_bytes"), 0, "{name} allocates nothing itself");
        assert_eq!(u(e, "inclusive_bytes"), count * WIDGET, "{name} inclusive bytes");
        assert!(
            e["callees"].as_array().unwrap().iter().any(|c| c["name"] == "make_widget"),
            "{name} calls make_widget"
        );
        let callers = e["callers"].as_array().unwrap();
        assert!(callers.iter().any(|c| c["name"] == "main"), "main calls {name}: {callers:#?}");
    }
    let main = graph_entry(v, "main").expect("main in the call graph");
    assert_eq!(u(main, "inclusive_bytes"), n * WIDGET, "main inclusive bytes");
    assert_eq!(u(main, "self_bytes"), 0, "main allocates nothing itself");
}

#[test]
fn widgets_without_frame_pointers() {
    let dir = WorkDir::new("widgets");
    let exe = compile_c(&dir, "widgets.c", &[]);
    let (out, v) = profile(&dir, &exe, &["10000", "1"], "widgets");
    let t = truth(&out.stdout, "widgets");
    assert_eq!(num(&t, "made"), 10000);
    check_widgets(&v, &t, "widgets");
    let argv: Vec<&str> = arr(&v, "process/argv").iter().filter_map(Value::as_str).collect();
    assert!(argv.ends_with(&["10000", "1"]), "process/argv = {argv:?}");

    // The text report prints the same tables.
    let text = heaplens(&dir, &["report", dir.join("widgets.hltrace").to_str().unwrap()]).ok("report");
    assert_no_panic(&text, "heaplens report");
    for needle in ["make_red_widget", "make_widget", "204"] {
        assert!(text.stdout.contains(needle), "text report lacks {needle}\n{}", text.show());
    }
}

#[test]
fn widgets_with_frame_pointers_and_another_seed() {
    let dir = WorkDir::new("widgets-fp");
    let exe = compile(&dir, "gcc", "widgets.c", "widgets", &["-O0", "-fno-omit-frame-pointer", "-g"]);
    let (out, v) = profile(&dir, &exe, &["3001", "42"], "widgets");
    let t = truth(&out.stdout, "widgets");
    assert_eq!(num(&t, "made"), 3001);
    check_widgets(&v, &t, "widgets");
}

#[test]
fn widgets_default_trace_name() {
    let dir = WorkDir::new("widgets-default");
    let exe = compile_c(&dir, "widgets.c", &[]);
    let out = heaplens(&dir, &["run", "--", exe.to_str().unwrap(), "500"]).ok("heaplens run");
    assert_no_panic(&out, "heaplens run");
    let traces: Vec<String> = std::fs::read_dir(&dir.path)
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.starts_with("heaplens.widgets.") && n.ends_with(".hltrace"))
        .collect();
    assert_eq!(traces.len(), 1, "expected heaplens.widgets.PID.hltrace in the cwd, got {traces:?}");
    let pid = traces[0].trim_start_matches("heaplens.widgets.").trim_end_matches(".hltrace");
    assert!(pid.parse::<u32>().is_ok(), "not a pid: {pid}");
    assert!(out.stderr.contains(&traces[0]), "stderr does not name the trace\n{}", out.show());
    let v = report(&dir, &dir.join(&traces[0]));
    assert_eq!(u(&v, "process/pid").to_string(), pid, "process/pid matches the file name");
    let t = truth(&out.stdout, "widgets");
    check_widgets(&v, &t, "widgets");
}

#[test]
fn recursive_cycle_is_merged() {
    let dir = WorkDir::new("recursive");
    let exe = compile_c(&dir, "recursive.c", &[]);
    let (out, v) = profile(&dir, &exe, &["24"], "recursive");
    let t = truth(&out.stdout, "recursive");
    let (allocs, bytes) = (num(&t, "allocations"), num(&t, "bytes"));
    let (kept, kept_bytes) = (num(&t, "kept"), num(&t, "kept_bytes"));

    assert_eq!(u(&v, "summary/allocations"), allocs, "summary/allocations");
    assert_eq!(u(&v, "summary/bytes_allocated"), bytes, "summary/bytes_allocated");
    assert_eq!(u(&v, "summary/leaked_objects"), kept, "summary/leaked_objects");
    assert_eq!(u(&v, "summary/leaked_bytes"), kept_bytes, "summary/leaked_bytes");
    assert_eq!(u(&v, "summary/calls_by_kind/malloc"), num(&t, "a_calls"));
    assert_eq!(u(&v, "summary/calls_by_kind/calloc"), num(&t, "b_calls"));

    // The cycle: one entry whose members are exactly walk_a and walk_b, holding every byte.
    let graph = arr(&v, "call_graph");
    let cycles: Vec<&Value> = graph.iter().filter(|e| e["is_cycle"] == Value::Bool(true)).collect();
    assert_eq!(cycles.len(), 1, "expected one cycle: {cycles:#?}");
    let c = cycles[0];
    let mut members: Vec<&str> = c["members"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
    members.sort_unstable();
    assert_eq!(members, ["walk_a", "walk_b"], "cycle members");
    assert_eq!(u(c, "inclusive_bytes"), bytes, "cycle inclusive bytes");
    assert_eq!(u(c, "self_bytes"), bytes, "cycle self bytes: both members allocate directly");
    let ip = c["inclusive_percent"].as_f64().unwrap();
    assert!(ip > 99.0 && ip <= 100.0, "cycle inclusive_percent = {ip}");
    let callers = c["callers"].as_array().unwrap();
    assert!(callers.iter().any(|x| x["name"] == "main"), "main calls into the cycle: {callers:#?}");
    let main = graph_entry(&v, "main").expect("main");
    assert_eq!(u(main, "inclusive_bytes"), bytes, "main inclusive bytes");

    // Direct table: each member's own allocations.
    for (f, b, calls) in [("walk_a", "a_bytes", "a_calls"), ("walk_b", "b_bytes", "b_calls")] {
        let rows = direct_rows(&v, f);
        assert_eq!(rows.len(), 1, "one direct row for {f}");
        assert_eq!(u(rows[0], "bytes"), num(&t, b), "{f} direct bytes");
        assert_eq!(u(rows[0], "calls"), num(&t, calls), "{f} direct calls");
    }
    assert_eq!(u(direct_rows(&v, "walk_a")[0], "kept_bytes"), kept_bytes, "walk_a kept bytes");

    // Leak table: paths of at most 5 callers; a path that does not reach main is marked cut.
    let mut leaked = 0;
    for r in arr(&v, "leaks") {
        let p = leak_path(r);
        assert!(p.len() <= 5, "leak path longer than 5 callers: {p:?}");
        assert_eq!(p.last().map(String::as_str), Some("walk_a"), "only walk_a leaks: {p:?}");
        if p[0] != "main" {
            assert_eq!(r["cut"], Value::Bool(true), "path not reaching main must be cut: {p:?}");
        } else {
            assert_eq!(r["cut"], Value::Bool(false), "path from main is whole: {p:?}");
        }
        leaked += u(r, "allocs");
    }
    assert_eq!(leaked, kept, "leak table allocs");
}

#[test]
fn cxx_new_and_delete_by_kind() {
    let dir = WorkDir::new("cxx");
    let exe = compile(&dir, "g++", "cxx_new.cpp", "cxx_new", &["-O0", "-g"]);
    let (out, v) = profile(&dir, &exe, &["1000"], "cxx_new");
    let t = truth(&out.stdout, "cxx_new");
    let it = num(&t, "iterations");
    let kept = num(&t, "kept_buffers");
    let calls = at(&v, "summary/calls_by_kind");
    let frees = at(&v, "summary/frees_by_kind");
    assert_eq!(u_or0(calls, "operator new"), num(&t, "new"), "operator new calls: {calls}");
    assert_eq!(u_or0(calls, "operator new[]"), num(&t, "new_array"), "operator new[] calls: {calls}");
    assert_eq!(u_or0(calls, "operator new(nothrow)"), num(&t, "new_nothrow"), "new(nothrow): {calls}");
    assert_eq!(
        u_or0(frees, "operator delete") + u_or0(frees, "operator delete(sized)"),
        num(&t, "delete"),
        "operator delete (sized or not): {frees}"
    );
    assert_eq!(
        u_or0(frees, "operator delete[]") + u_or0(frees, "operator delete[](sized)"),
        num(&t, "delete_array"),
        "operator delete[] (sized or not): {frees}"
    );
    // g++ uses sized deallocation from C++14 on: `delete meta_` of a complete type is sized.
    assert!(u_or0(frees, "operator delete(sized)") > 0, "no sized delete seen: {frees}");
    // `new` is not counted as malloc: the program's 5 mallocs (libstdc++ may add its own
    // emergency exception pool at start-up, from before main).
    let mallocs = u_or0(calls, "malloc");
    assert!((5..=8).contains(&mallocs), "malloc calls = {mallocs}: operator new counted as malloc? {calls}");

    // Bins of the program's own sizes.
    let row = |size: u64| bin_row(&v, size).unwrap_or_else(|| panic!("no {size}-byte bin"));
    let (bsz, msz, nsz) = (num(&t, "buffer_size"), num(&t, "meta_size"), num(&t, "node_size"));
    assert_eq!(u(row(bsz), "allocs"), it, "Buffer objects");
    assert_eq!(u(row(bsz), "kept_bytes"), kept * bsz, "Buffers kept");
    assert_eq!(u(row(msz), "allocs"), 2 * it, "Meta objects (member and nothrow)");
    assert_eq!(u(row(msz), "frees"), 2 * it - kept, "Meta objects freed");
    assert_eq!(u(row(300), "allocs"), it, "Buffer data");
    assert_eq!(u(row(100), "allocs"), it, "int[25]");
    assert_eq!(u(row(4 * nsz + 8), "allocs"), it, "Node[4] with its array cookie");
    assert_eq!(u(row(1000), "allocs"), 5, "malloc(1000)");
    assert_eq!(u(row(1000), "frees"), 5, "free of malloc(1000)");

    // The constructor allocates the members; main allocates the rest.
    let ctor: Vec<&Value> = arr(&v, "direct/rows")
        .iter()
        .filter(|r| r["function"].as_str().unwrap_or("").starts_with("Buffer::Buffer"))
        .collect();
    assert!(!ctor.is_empty(), "no direct row for Buffer::Buffer: {:#?}", arr(&v, "direct/rows"));
    let ctor_bytes: u64 = ctor.iter().map(|r| u(r, "bytes")).sum();
    assert_eq!(ctor_bytes, it * (300 + msz), "Buffer::Buffer direct bytes");
    let main = direct_rows(&v, "main");
    assert_eq!(main.len(), 1, "one direct row for main");
    assert_eq!(u(main[0], "bytes"), it * (bsz + 100 + 4 * nsz + 8 + msz) + 5 * 1000, "main direct bytes");

    // Leaks: the kept Buffers (from main) and their members (from the constructor).
    let leaks = arr(&v, "leaks");
    let (mut ca, mut cb, mut ma, mut mb) = (0, 0, 0, 0);
    for r in leaks {
        let p = leak_path(r);
        if p.last().is_some_and(|f| f.starts_with("Buffer::Buffer")) {
            assert_eq!(p[0], "main", "constructor leak path starts at main: {p:?}");
            ca += u(r, "allocs");
            cb += u(r, "bytes");
        } else if p == ["main"] {
            ma += u(r, "allocs");
            mb += u(r, "bytes");
        }
    }
    assert_eq!((ca, cb), (2 * kept, kept * (300 + msz)), "leaks from Buffer::Buffer: {leaks:#?}");
    assert_eq!((ma, mb), (kept, kept * bsz), "leaks from main: {leaks:#?}");
}

#[test]
fn threads_each_with_own_size() {
    threads_exact("threads", "8", "5000");
}

/// Eight threads allocating long enough to keep every processor of a small machine busy: the
/// monitor then writes rows, Zstandard-compressed by the threads themselves (`output.rs`,
/// `COLUMNS`), and the report must count them as exactly.
#[test]
fn threads_saturating_the_machine() {
    let trace = threads_exact("threads_busy", "8", "100000");
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    if cores <= 4 {
        let zstd_rows = blocks(&trace).iter().filter(|b| (b.kind, b.codec) == (4, 2)).count();
        assert!(zstd_rows > 0, "no Zstandard event rows with 8 busy threads on {cores} processors");
    }
}

/// Two busy threads on a machine of two processors or more: columns all the way (the writer
/// keeps up while the threads do not outnumber the processors), counted exactly.
#[test]
fn threads_as_many_as_processors_write_columns() {
    let trace = threads_exact("threads_two", "2", "100000");
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    if cores >= 2 {
        let kinds: Vec<u8> = blocks(&trace).iter().map(|b| b.kind).collect();
        assert!(!kinds.contains(&4), "event rows with 2 threads on {cores} processors");
        assert!(kinds.iter().filter(|&&k| k == 10).count() >= 2, "EventColumns blocks: {kinds:?}");
    }
}

/// Profiles `threads THREADS PER_THREAD` and checks every per-thread count and byte total against
/// the program's truth; returns the trace's bytes.
fn threads_exact(name: &str, threads: &str, per_thread: &str) -> Vec<u8> {
    let dir = WorkDir::new(name);
    let exe = compile_c(&dir, "threads.c", &["-pthread"]);
    let (out, v) = profile(&dir, &exe, &[threads, per_thread], "threads");
    let t = truth(&out.stdout, "threads");
    let per = truths(&out.stdout, "thread");
    assert_eq!(per.len() as u64, num(&t, "threads"));
    let n: u64 = threads.parse().unwrap();
    assert!(u(&v, "summary/threads") > n, "summary/threads = {}", u(&v, "summary/threads"));
    let mut bytes = 0;
    for p in &per {
        let size = num(p, "size");
        let b = bin_row(&v, size).unwrap_or_else(|| panic!("no {size}-byte bin"));
        assert_eq!(u(b, "allocs"), num(p, "allocs"), "bin {size} allocs");
        assert_eq!(u(b, "frees"), num(p, "frees"), "bin {size} frees");
        assert_eq!(u(b, "kept_bytes"), num(p, "kept") * size, "bin {size} kept bytes");
        bytes += u(b, "bytes");
    }
    assert_eq!(bytes, num(&t, "bytes"));
    let allocs = u(&v, "summary/allocations");
    assert!(allocs >= num(&t, "allocations"), "summary/allocations {allocs}");
    assert!(allocs <= num(&t, "allocations") + 200, "summary/allocations {allocs}: too many extra");
    assert!(u(&v, "summary/leaked_bytes") >= num(&t, "kept_bytes"));
    let w = direct_rows(&v, "worker");
    assert_eq!(w.len(), 1, "one direct row for worker");
    assert_eq!(u(w[0], "bytes"), num(&t, "bytes"), "worker direct bytes");
    assert_eq!(u(w[0], "calls"), num(&t, "allocations"), "worker direct calls");
    assert_eq!(u(w[0], "kept_bytes"), num(&t, "kept_bytes"), "worker kept bytes");
    std::fs::read(dir.join("threads.hltrace")).unwrap()
}

#[test]
fn fork_child_writes_its_own_trace() {
    let dir = WorkDir::new("fork");
    let exe = compile_c(&dir, "fork.c", &[]);
    let bare = run_bare(&dir, &exe, &["200", "300", "300"]).ok("bare fork");
    let trace = dir.join("fork.hltrace");
    let out = run_traced(&dir, &trace, &exe, &["200", "300", "300"]).ok("heaplens run fork");
    let norm = |s: &str| -> Vec<_> { truths(s, "fork").into_iter().map(stable).collect() };
    assert_eq!(norm(&out.stdout), norm(&bare.stdout), "stdout differs\n{}", out.show());
    let ts = truths(&out.stdout, "fork");
    let child = ts.iter().find(|t| t["role"] == "child").expect("child line");
    let parent = ts.iter().find(|t| t["role"] == "parent").expect("parent line");
    let child_pid = num(child, "pid");
    assert_eq!(num(parent, "child"), child_pid);
    let child_trace = dir.join(format!("fork.hltrace.{child_pid}"));
    assert!(child_trace.exists(), "no child trace {}\n{}", child_trace.display(), out.show());
    assert!(
        out.stderr.contains(&child_trace.display().to_string()),
        "heaplens run does not list the child's trace\n{}",
        out.show()
    );

    // The first trace alone reports the tree of both; --process picks the parent.
    let pv = report_with(&dir, &trace, &["--process", &parent["pid"]]);
    assert_consistent(&pv);
    assert_eq!(u(&pv, "process/pid"), num(parent, "pid"), "parent trace pid");
    let b = bin_row(&pv, 311).expect("parent 311-byte bin");
    assert_eq!(u(b, "allocs"), num(parent, "allocs"), "parent allocs");
    assert_eq!(u(b, "frees"), num(parent, "frees"), "parent frees");
    assert_eq!(u(b, "kept_bytes"), num(parent, "kept") * 311, "parent kept");
    assert!(bin_row(&pv, 313).is_none_or(|r| u(r, "allocs") == 0), "child's blocks in the parent trace");

    let cv = report(&dir, &child_trace);
    assert_eq!(u(&cv, "process/pid"), child_pid, "child trace pid");
    assert_eq!(u(&cv, "summary/allocations") - u(&cv, "summary/deallocations"), u(&cv, "summary/leaked_objects"));
    let b = bin_row(&cv, 313).expect("child 313-byte bin");
    assert_eq!(u(b, "allocs"), num(child, "allocs"), "child allocs");
    assert_eq!(u(b, "frees"), num(child, "frees"), "child frees");
    assert_eq!(u(b, "kept_bytes"), num(child, "kept") * 313, "child kept");
    assert!(arr(&cv, "direct/rows").iter().any(|r| r["function"] == "churn"), "child allocations attributed to churn");
}

fn check_plugin(close: bool) {
    let dir = WorkDir::new(if close { "dlopen-close" } else { "dlopen" });
    let so = compile(&dir, "gcc", "plugin.c", "libplugin.so", &["-O2", "-g", "-fPIC", "-shared"]);
    let exe = compile_c(&dir, "dlopen_main.c", &["-ldl"]);
    let mut args = vec![so.to_str().unwrap(), "1000", "10"];
    if close {
        args.push("close");
    }
    let (out, v) = profile(&dir, &exe, &args, "dlopen");
    let t = truth(&out.stdout, "dlopen");
    let (n, kept, size) = (num(&t, "allocs"), num(&t, "kept"), num(&t, "size"));
    assert_eq!(size, 777);

    let b = bin_row(&v, size).expect("no 777-byte bin");
    assert_eq!(u(b, "allocs"), n, "bin 777 allocs");
    assert_eq!(u(b, "frees"), n - kept, "bin 777 frees");
    assert_eq!(u(b, "kept_bytes"), kept * size, "bin 777 kept");

    let rows = direct_rows(&v, "plugin_alloc");
    assert_eq!(rows.len(), 1, "one direct row for plugin_alloc: {:#?}", arr(&v, "direct/rows"));
    assert_eq!(u(rows[0], "bytes"), n * size, "plugin_alloc bytes");
    assert_eq!(u(rows[0], "calls"), n, "plugin_alloc calls");
    assert_eq!(u(rows[0], "kept_bytes"), kept * size, "plugin_alloc kept");
    assert!(
        rows[0]["module"].as_str().unwrap_or("").ends_with("libplugin.so"),
        "plugin_alloc module = {}",
        rows[0]["module"]
    );
    let leak: Vec<&Value> =
        arr(&v, "leaks").iter().filter(|r| leak_path(r).last().is_some_and(|f| f == "plugin_alloc")).collect();
    assert_eq!(leak.len(), 1, "one leak path through plugin_alloc: {:#?}", arr(&v, "leaks"));
    assert_eq!(leak_path(leak[0]), ["main", "plugin_alloc"]);
    assert_eq!(u(leak[0], "allocs"), kept);
    assert_eq!(u(leak[0], "bytes"), kept * size);
}

#[test]
fn dlopen_plugin_is_symbolized() {
    check_plugin(false);
}

#[test]
fn dlclosed_plugin_is_still_symbolized() {
    check_plugin(true);
}

/// Trace files in `dir` named `stem` or `stem.*`.
fn traces_named(dir: &WorkDir, stem: &str) -> Vec<std::path::PathBuf> {
    let mut v: Vec<_> = std::fs::read_dir(&dir.path)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            let n = p.file_name().unwrap().to_string_lossy().into_owned();
            n == stem || n.starts_with(&format!("{stem}."))
        })
        .collect();
    v.sort();
    v
}

#[test]
fn exec_children_are_profiled_only_when_asked() {
    let dir = WorkDir::new("follow");
    let exe = compile_c(&dir, "widgets.c", &[]);
    let script = format!("{0} 100 && {0} 50 3", exe.display());

    // Without --follow-children: one trace, of the shell; the programs it runs are not profiled.
    let trace = dir.join("plain.hltrace");
    let out = run_traced(&dir, &trace, "/bin/sh", &["-c", &script]).ok("heaplens run sh");
    assert_eq!(truths(&out.stdout, "widgets").len(), 2, "{}", out.show());
    let files = traces_named(&dir, "plain.hltrace");
    assert_eq!(files, std::slice::from_ref(&trace), "only the shell's trace");
    let v = report(&dir, &trace);
    assert!(bin_row(&v, WIDGET).is_none(), "widgets were profiled without --follow-children");

    // With it: each widgets run writes its own trace, listed by heaplens run.
    let trace = dir.join("follow.hltrace");
    let mut cmd = std::process::Command::new(heaplens_exe());
    cmd.args(["run", "--follow-children", "-o"]).arg(&trace).args(["--", "/bin/sh", "-c", &script]);
    let out = run_cmd(cmd, &dir.path).ok("heaplens run --follow-children sh");
    assert_no_panic(&out, "heaplens run --follow-children");
    let truth_lines = truths(&out.stdout, "widgets");
    assert_eq!(truth_lines.len(), 2, "{}", out.show());
    let mut seen = Vec::new();
    for f in traces_named(&dir, "follow.hltrace") {
        let v = report(&dir, &f);
        if !at(&v, "process/exe").as_str().unwrap_or("").ends_with("/widgets") {
            continue;
        }
        assert!(out.stderr.contains(&f.display().to_string()), "{} not listed\n{}", f.display(), out.show());
        let argv: Vec<String> = arr(&v, "process/argv").iter().filter_map(|a| a.as_str().map(str::to_string)).collect();
        let t = truth_lines
            .iter()
            .find(|t| argv.get(1) == t.get("made"))
            .unwrap_or_else(|| panic!("no truth line for argv {argv:?}"));
        check_widgets(&v, t, "widgets");
        seen.push(argv);
    }
    assert_eq!(seen.len(), 2, "expected a trace for each widgets run, got {seen:?}");
}

/// realloc: each call is one allocation, and one deallocation when its old block is not NULL.
/// growth.c grows every buffer from 16 to 4096 bytes in nine reallocs and frees every odd one.
#[test]
fn growth_by_realloc() {
    let dir = WorkDir::new("growth");
    let exe = compile_c(&dir, "growth.c", &[]);
    let (out, v) = profile(&dir, &exe, &["3000"], "growth");
    let t = truth(&out.stdout, "growth");
    let n = num(&t, "buffers");
    assert_eq!(u(&v, "summary/calls_by_kind/realloc"), num(&t, "reallocs"));
    let mallocs = u_or0(&v["summary"]["calls_by_kind"], "malloc");
    assert_eq!(u(&v, "summary/allocations"), num(&t, "reallocs") + mallocs);
    assert_eq!(u(&v, "summary/deallocations"), num(&t, "released") + num(&t, "frees"));
    assert_eq!(u(&v, "summary/frees_by_kind/free"), num(&t, "frees"));
    for size in [16, 32, 64, 128, 256, 512, 1024] {
        let b = bin_row(&v, size).unwrap_or_else(|| panic!("no {size}-byte bin"));
        assert_eq!((u(b, "allocs"), u(b, "frees")), (n, n), "bin {size}");
    }
    let grown: u64 = arr(&v, "leaks")
        .iter()
        .filter(|r| leak_path(r).last().is_some_and(|f| f == "grow"))
        .map(|r| u(r, "bytes"))
        .sum();
    assert_eq!(grown, num(&t, "kept_bytes"), "leaked by grow");
}
