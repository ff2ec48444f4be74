//! Process trees: `heaplens run --follow-children` writes a trace per process, and `heaplens
//! report` reports them as one tree (given the first trace, or the traces themselves), with
//! `--process PID` for one. spawn_tree.c runs two children that print their own truth.

mod common;

use std::collections::BTreeMap;
use std::path::PathBuf;

use common::*;
use serde_json::Value;

/// spawn_tree run under `--follow-children` in `dir`: the first trace, heaplens' output and the
/// truth of each process by pid.
fn traced_tree(dir: &WorkDir) -> (PathBuf, Out, BTreeMap<u64, BTreeMap<String, String>>) {
    let exe = compile_c(dir, "spawn_tree.c", &[]);
    let trace = dir.join("tree.hltrace");
    let out = follow(dir, &[OsStr("-o"), trace.as_os_str(), OsStr("--"), exe.as_os_str()]);
    let truths: BTreeMap<u64, _> = truths(&out.stdout, "spawn_tree").into_iter().map(|t| (num(&t, "pid"), t)).collect();
    assert_eq!(truths.len(), 3, "{}", out.show());
    (trace, out, truths)
}

/// `heaplens run --follow-children ARGS...`, which must succeed.
fn follow(dir: &WorkDir, args: &[&std::ffi::OsStr]) -> Out {
    let mut all = vec![OsStr("run"), OsStr("--follow-children")];
    all.extend_from_slice(args);
    let out = heaplens(dir, &all).ok("heaplens run --follow-children");
    assert_no_panic(&out, "heaplens run");
    out
}

fn json(dir: &WorkDir, args: &[&std::ffi::OsStr]) -> Value {
    let mut all: Vec<&std::ffi::OsStr> = vec!["report".as_ref()];
    all.extend_from_slice(args);
    all.extend(["--format", "json", "--top", "0"].map(std::ffi::OsStr::new));
    let out = heaplens(dir, &all).ok("heaplens report");
    assert_no_panic(&out, "heaplens report");
    serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("invalid JSON ({e}):\n{}", out.stdout))
}

/// The tree's processes and sums against each program's truth.
fn check_tree(v: &Value, truths: &BTreeMap<u64, BTreeMap<String, String>>) {
    let parent = truths.values().find(|t| t["role"] == "parent").expect("parent truth");
    let procs = arr(v, "processes");
    assert_eq!(procs.len(), 3, "{procs:?}");
    assert_eq!(u(&procs[0], "pid"), num(parent, "pid"), "the first process is the root");
    for p in procs {
        let t = &truths[&u(p, "pid")];
        assert_eq!(u(p, "ppid"), num(t, "ppid"), "parent of {p}");
        assert_eq!(u(p, "allocations"), num(t, "allocs"), "allocations of {p}");
        assert_eq!(u(p, "bytes_allocated"), num(t, "bytes"), "bytes of {p}");
        assert_eq!(u(p, "leaked_bytes"), num(t, "kept_bytes"), "leaked bytes of {p}");
    }
    let sum = |k: &str| truths.values().map(|t| num(t, k)).sum::<u64>();
    assert_eq!(u(v, "summary/allocations"), sum("allocs"));
    assert_eq!(u(v, "summary/bytes_allocated"), sum("bytes"));
    assert_eq!(u(v, "summary/deallocations"), sum("frees"));
    assert_eq!(u(v, "summary/leaked_bytes"), sum("kept_bytes"));
    // The largest single process's peak: the 500-block child's, all 500 blocks before its frees.
    assert_eq!(u(v, "summary/peak_bytes"), 500 * 64);
    // The direct table summed by function, the bins by size, the leaks by path.
    let rows = direct_rows(v, "allocate_blocks");
    assert_eq!(rows.len(), 1, "one row per (function, module)");
    assert_eq!((u(rows[0], "bytes"), u(rows[0], "calls")), (sum("bytes"), sum("allocs")));
    for (size, n) in [(48, 300), (64, 500), (100, 40)] {
        let b = bin_row(v, size).unwrap_or_else(|| panic!("no {size}-byte bin"));
        assert_eq!(u(b, "allocs"), n, "bin {size}");
    }
    let leaked: u64 = arr(v, "leaks")
        .iter()
        .filter(|r| leak_path(r).last().is_some_and(|f| f == "allocate_blocks"))
        .map(|r| u(r, "bytes"))
        .sum();
    assert_eq!(leaked, sum("kept_bytes"));
    // The call graph summed by entry: allocate_blocks once, called from main in every process.
    let graph = arr(v, "call_graph");
    let entries: Vec<&Value> = graph.iter().filter(|e| e["name"] == "allocate_blocks").collect();
    assert_eq!(entries.len(), 1, "one call-graph entry per function: {graph:?}");
    let e = entries[0];
    assert_eq!((u(e, "self_bytes"), u(e, "calls")), (sum("bytes"), sum("allocs")), "{e}");
    assert_eq!(&graph[u(e, "index") as usize], e, "an entry's index is its position");
    let callers = arr(e, "callers");
    let main = callers.iter().find(|c| c["name"] == "main").unwrap_or_else(|| panic!("no main caller: {e}"));
    assert_eq!((u(main, "bytes"), u(main, "calls")), (sum("bytes"), sum("allocs")), "{main}");
    assert_eq!(graph[u(main, "index") as usize]["name"], "main", "edges point at their entries");
}

#[test]
fn the_first_trace_reports_the_tree() {
    let dir = WorkDir::new("tree-first");
    let (trace, out, truths) = traced_tree(&dir);
    // heaplens run names each child's program.
    for (pid, t) in &truths {
        if t["role"] == "child" {
            let line = format!("trace of spawn_tree (pid {pid}) written to {}.{pid}", trace.display());
            assert!(out.stderr.contains(&line), "no '{line}'\n{}", out.show());
        }
    }
    let v = json(&dir, &[trace.as_os_str()]);
    check_tree(&v, &truths);

    // The text report: the PROCESSES table, a row per process with its program.
    let text = heaplens(&dir, &[OsStr("report"), trace.as_os_str()]).ok("heaplens report").stdout;
    assert!(text.contains("PROCESSES"), "{text}");
    for (pid, t) in &truths {
        let row = text
            .lines()
            .find(|l| l.split_whitespace().next() == Some(&pid.to_string()))
            .unwrap_or_else(|| panic!("no row for pid {pid}\n{text}"));
        let cells: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(cells[1], t["ppid"], "{row}");
        assert_eq!(cells[2], t["allocs"], "{row}");
        assert!(row.contains("spawn_tree"), "{row}");
        // Children shut down cleanly: they exited, though heaplens run saw only the root's status.
        assert!(!row.contains("unknown"), "{row}");
    }
}

#[test]
fn export_takes_the_first_process_and_says_so() {
    let dir = WorkDir::new("tree-export");
    let (trace, _, truths) = traced_tree(&dir);
    let parent = truths.values().find(|t| t["role"] == "parent").expect("parent truth");
    let folded = dir.join("tree.folded");
    let out = heaplens(
        &dir,
        &[OsStr("export"), trace.as_os_str(), OsStr("--format"), OsStr("collapsed"), OsStr("-o"), folded.as_os_str()],
    )
    .ok("heaplens export");
    assert!(out.stderr.contains("has 2 child trace(s)"), "{}", out.show());
    assert!(out.stderr.contains(&format!("heaplens export {}.", trace.display())), "{}", out.show());
    // The root's bytes alone.
    let text = std::fs::read_to_string(&folded).expect("folded stacks");
    let bytes: u64 = text.lines().filter_map(|l| l.rsplit_once(' ')).map(|(_, n)| n.parse::<u64>().unwrap()).sum();
    assert_eq!(bytes, num(parent, "bytes"), "{text}");
}

#[allow(non_snake_case)]
fn OsStr(s: &str) -> &std::ffi::OsStr {
    std::ffi::OsStr::new(s)
}

#[test]
fn explicit_traces_and_one_process() {
    let dir = WorkDir::new("tree-explicit");
    let (trace, _, truths) = traced_tree(&dir);
    let children: Vec<PathBuf> = truths
        .iter()
        .filter(|(_, t)| t["role"] == "child")
        .map(|(pid, _)| PathBuf::from(format!("{}.{pid}", trace.display())))
        .collect();
    let mut args: Vec<&std::ffi::OsStr> = vec![trace.as_os_str()];
    args.extend(children.iter().map(|c| c.as_os_str()));
    check_tree(&json(&dir, &args), &truths);

    // --process PID: that process's own report, exactly.
    let child = &children[1];
    let pid = child.extension().and_then(|e| e.to_str()).unwrap().to_string();
    let alone = json(&dir, &[trace.as_os_str(), OsStr("--process"), OsStr(&pid)]);
    assert!(alone.get("processes").is_none(), "one process: the single-trace JSON");
    let own = report(&dir, child);
    for key in ["summary", "leaks", "bins", "direct", "call_graph", "process"] {
        assert_eq!(alone[key], own[key], "{key} of --process {pid}");
    }
    let t = &truths[&pid.parse::<u64>().unwrap()];
    assert_eq!(u(&alone, "summary/allocations"), num(t, "allocs"));
    assert_eq!(u(&alone, "process/ppid"), num(t, "ppid"));

    // A child's own trace says it exited, though heaplens run did not see its status.
    let text = heaplens(&dir, &[OsStr("report"), child.as_os_str()]).ok("report child").stdout;
    assert!(text.contains("exited (status not recorded"), "{text}");
}

/// A compiler driver: `g++ -c` runs cc1plus and as, and the tree holds each with the numbers of
/// its own trace.
#[test]
fn gxx_compile_is_one_tree() {
    let dir = WorkDir::new("tree-gxx");
    std::fs::write(
        dir.join("small.cpp"),
        "#include <vector>\nint f(int n) { std::vector<int> v(n); return v.size(); }\n",
    )
    .expect("write small.cpp");
    let trace = dir.join("gxx.hltrace");
    let mut args = vec![OsStr("-o"), trace.as_os_str()];
    args.extend(["--", "g++", "-c", "small.cpp", "-o", "small.o"].map(OsStr));
    let out = follow(&dir, &args);
    assert!(out.stderr.contains("trace of cc1plus (pid "), "{}", out.show());
    let v = json(&dir, &[trace.as_os_str()]);
    let procs = arr(&v, "processes");
    let cc1plus = procs
        .iter()
        .find(|p| at(p, "program").as_str().unwrap_or("").starts_with("cc1plus "))
        .unwrap_or_else(|| panic!("no cc1plus in {procs:?}"));
    assert_eq!(u(cc1plus, "ppid"), u(&procs[0], "pid"), "cc1plus is the driver's child");
    // Its whole command line (the table's column shows three arguments).
    let argv: Vec<&str> = arr(cc1plus, "argv").iter().filter_map(|a| a.as_str()).collect();
    assert!(argv.len() > 4 && argv[0].ends_with("cc1plus"), "{argv:?}");
    assert!(at(cc1plus, "exe").as_str().unwrap().ends_with("cc1plus"), "{cc1plus}");
    let own = report(&dir, std::path::Path::new(at(cc1plus, "trace").as_str().unwrap()));
    assert!(u(&own, "summary/allocations") > 1000, "cc1plus allocates");
    for key in ["allocations", "bytes_allocated", "peak_bytes", "leaked_bytes"] {
        assert_eq!(u(cc1plus, key), u(&own, &format!("summary/{key}")), "{key} of cc1plus");
    }
    let sum: u64 = procs.iter().map(|p| u(p, "allocations")).sum();
    assert_eq!(u(&v, "summary/allocations"), sum);
}

/// Without `-o` each process fills its own pid into `heaplens.PROGRAM.%p.hltrace`: the
/// children's traces are gathered beside the first as `FIRST.PID`, so the tree is found.
#[test]
fn default_names_gather_the_tree() {
    let dir = WorkDir::new("tree-default");
    let exe = compile_c(&dir, "spawn_tree.c", &[]);
    let out = follow(&dir, &[OsStr("--"), exe.as_os_str()]);
    let truths = truths(&out.stdout, "spawn_tree");
    let root = truths.iter().find(|t| t["role"] == "parent").expect("parent truth");
    let first = dir.join(format!("heaplens.spawn_tree.{}.hltrace", root["pid"]));
    for t in truths.iter().filter(|t| t["role"] == "child") {
        let child = std::path::PathBuf::from(format!("{}.{}", first.display(), t["pid"]));
        assert!(child.is_file(), "no {}\n{}", child.display(), out.show());
    }
    let v = json(&dir, &[first.as_os_str()]);
    assert_eq!(arr(&v, "processes").len(), 3, "{}", out.show());
    assert_eq!(u(&v, "summary/allocations"), truths.iter().map(|t| num(t, "allocs")).sum::<u64>());
}

/// A wrapper that `exec`s the real program (a shell-script shim): without
/// `--follow-children` the trace is the wrapper's alone, and the report says so; with it, the
/// program's own trace joins the tree.
#[test]
fn an_unfollowed_exec_is_reported() {
    let dir = WorkDir::new("tree-exec");
    let exe = compile_c(&dir, "spawn_tree.c", &[]);
    let script = format!("exec {} child 30 8", exe.display());
    let plain = dir.join("plain.hltrace");
    run_traced(&dir, &plain, "/bin/sh", &["-c", &script]).ok("heaplens run sh -c exec");
    let out = heaplens(&dir, &[OsStr("report"), plain.as_os_str()]).ok("heaplens report");
    assert!(out.stderr.contains("exec'd another program, which was not recorded"), "{}", out.show());
    assert!(out.stdout.contains("record with --follow-children"), "{}", out.show());
    assert!(report(&dir, &plain)["trace"]["exec_unfollowed"].as_bool().unwrap());

    let followed = dir.join("followed.hltrace");
    let out =
        follow(&dir, &[OsStr("-o"), followed.as_os_str(), OsStr("--"), OsStr("/bin/sh"), OsStr("-c"), OsStr(&script)]);
    let t = truth(&out.stdout, "spawn_tree");
    let r = heaplens(&dir, &[OsStr("report"), followed.as_os_str()]).ok("heaplens report");
    assert!(!r.stderr.contains("not recorded"), "{}", r.show());
    let v = json(&dir, &[followed.as_os_str()]);
    let procs = arr(&v, "processes");
    let program = procs
        .iter()
        .find(|p| at(p, "program").as_str().unwrap_or("").starts_with("spawn_tree child"))
        .unwrap_or_else(|| panic!("no spawn_tree in {procs:?}"));
    assert_eq!(u(program, "allocations"), num(&t, "allocs"));
    assert_eq!(u(program, "pid"), num(&t, "pid"), "the exec'd program keeps the wrapper's pid");
    assert_eq!(at(program, "exit_code").as_i64(), Some(0), "the status is the program's, which exited: {program}");
    // The wrapper's heap went with the exec: no leak of the tree, and no status of its own.
    let wrapper = procs.iter().find(|p| {
        at(p, "program").as_str().unwrap_or("").starts_with("dash")
            || at(p, "program").as_str().unwrap_or("").starts_with("sh")
    });
    let wrapper = wrapper.unwrap_or_else(|| panic!("no shell in {procs:?}"));
    assert_eq!((at(wrapper, "exec").as_bool(), u(wrapper, "leaked_bytes")), (Some(true), 0), "{wrapper}");
    assert!(at(wrapper, "exit_code").is_null(), "{wrapper}");
    assert_eq!(u(&v, "summary/leaked_bytes"), num(&t, "kept_bytes"), "the program's own blocks alone leak");
    let r = heaplens(&dir, &[OsStr("report"), followed.as_os_str()]).ok("report").stdout;
    assert!(r.lines().any(|l| l.contains("exec'd") && (l.contains(" dash ") || l.contains(" sh "))), "{r}");
    // The wrapper alone, as the note for its pid says: its blocks are the exec's.
    let pid = num(&t, "pid").to_string();
    let one = heaplens(&dir, &[OsStr("report"), followed.as_os_str(), OsStr("--process"), OsStr(&pid)]).ok("report");
    assert!(one.stderr.contains("before the exec:") && one.stderr.contains("report --alone"), "{}", one.show());
    let alone = json(&dir, &[OsStr("--alone"), followed.as_os_str()]);
    assert_eq!(at(&alone, "trace/exec"), &Value::Bool(true), "{alone}");
    assert_eq!(u(&alone, "summary/leaked_bytes"), 0, "{alone}");
    assert!(u(&alone, "summary/suppressed_bytes") > 0, "{alone}");
    assert_eq!(at(&alone, "suppressions/0/pattern"), "exec", "{alone}");
    // A CI job checking the tree for leaks sees the program's alone.
    let kept = num(&t, "kept_bytes").to_string();
    let checked = heaplens(
        &dir,
        &[
            OsStr("run"),
            OsStr("-q"),
            OsStr("--follow-children"),
            OsStr("--check"),
            OsStr("--max-leaked"),
            OsStr(&kept),
            OsStr("-o"),
            dir.join("checked.hltrace").as_os_str(),
            OsStr("--"),
            OsStr("/bin/sh"),
            OsStr("-c"),
            OsStr(&script),
        ],
    );
    assert_eq!(checked.status.code(), Some(0), "{}", checked.show());
}
