//! `heaplens diff` and the differential exports, on programs whose true change is known: two
//! widgets runs of 10,000 and 20,000 widgets (other seeds), and two builds of
//! `examples/diff_grow.c` where only `build_index` allocates twice as much (rebuilt with its
//! code moved, so no address matches).

mod common;

use std::path::Path;
use std::process::Command;

use common::*;
use serde_json::Value;

fn i(v: &Value, path: &str) -> i64 {
    let x = at(v, path);
    x.as_i64().unwrap_or_else(|| panic!("{path} is not an integer: {x}"))
}

fn diff_json(dir: &WorkDir, base: &Path, new: &Path) -> Value {
    let out =
        heaplens(dir, &["diff".as_ref(), base.as_os_str(), new.as_os_str(), "--format".as_ref(), "json".as_ref()])
            .ok("heaplens diff");
    assert_no_panic(&out, "heaplens diff");
    serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("invalid JSON ({e}):\n{}", out.stdout))
}

/// The row of `changes` (`functions/grew`, ...) whose key is `key`.
fn row<'a>(d: &'a Value, changes: &str, key: &[&str]) -> Option<&'a Value> {
    arr(d, changes).iter().find(|r| arr(r, "key").iter().map(|k| k.as_str().unwrap()).eq(key.iter().copied()))
}

fn summary<'a>(d: &'a Value, name: &str) -> &'a Value {
    arr(d, "summary").iter().find(|s| s["name"] == name).unwrap_or_else(|| panic!("no {name} in {d}"))
}

/// `heaplens export NEW --base BASE --format FORMAT -o OUT`, which must succeed.
fn export_change(dir: &WorkDir, (base, new): (&Path, &Path), format: &str, out: &Path) {
    let args = ["export".as_ref(), new.as_os_str(), "--base".as_ref(), base.as_os_str(), "--format".as_ref()];
    let mut all: Vec<&std::ffi::OsStr> = args.to_vec();
    all.extend([format.as_ref(), "-o".as_ref(), out.as_os_str()]);
    heaplens(dir, &all).ok("heaplens export --base");
}

#[test]
fn twice_the_widgets_double_make_widget_and_grow_the_red_leak() {
    let dir = WorkDir::new("diff-widgets");
    let exe = compile_c(&dir, "widgets.c", &[]);
    let (a, b) = (dir.join("a.hltrace"), dir.join("b.hltrace"));
    let ta = truth(&run_traced(&dir, &a, &exe, &["10000", "1"]).ok("widgets 10000").stdout, "widgets");
    let tb = truth(&run_traced(&dir, &b, &exe, &["20000", "7"]).ok("widgets 20000").stdout, "widgets");
    let size = num(&ta, "size");
    let d = diff_json(&dir, &a, &b);
    let made = |t| num(t, "made") as i64;
    let red = |t| num(t, "red") as i64;

    assert_eq!(i(summary(&d, "allocations"), "change"), made(&tb) - made(&ta));
    assert_eq!(i(summary(&d, "bytes_allocated"), "change"), (made(&tb) - made(&ta)) * size as i64);
    assert_eq!(i(summary(&d, "leaked_bytes"), "change"), (red(&tb) - red(&ta)) * size as i64);
    // make_widget, the only function that calls malloc: exactly twice the allocations.
    let grew = arr(&d, "functions/grew");
    assert_eq!(grew.len(), 1, "only make_widget allocates: {grew:?}");
    let mw = row(&d, "functions/grew", &["make_widget"]).expect("make_widget grew");
    assert_eq!(u(mw, "new/calls"), 2 * u(mw, "base/calls"), "{mw}");
    assert_eq!(u(mw, "base/calls"), made(&ta) as u64);
    assert_eq!(i(mw, "change/bytes"), made(&ta) * size as i64);
    assert!(arr(&d, "functions/shrank").is_empty(), "{d}");
    // The leak grew by the extra red widgets, on the path through make_red_widget.
    let red_path = arr(&d, "paths/grew")
        .iter()
        .find(|r| arr(r, "key").iter().any(|k| k == "make_red_widget"))
        .unwrap_or_else(|| panic!("no path through make_red_widget grew: {d}"));
    assert_eq!(i(red_path, "change/leaked_bytes"), (red(&tb) - red(&ta)) * size as i64, "{red_path}");
    assert_eq!(u(red_path, "base/leaked_bytes"), red(&ta) as u64 * size);
    let blue_path = arr(&d, "paths/grew")
        .iter()
        .find(|r| arr(r, "key").iter().any(|k| k == "make_blue_widget"))
        .expect("the blue path grew");
    assert_eq!(i(blue_path, "change/leaked_bytes"), 0, "blue widgets are freed: {blue_path}");

    // The text names them too.
    let text = heaplens(&dir, &["diff".as_ref(), a.as_os_str(), b.as_os_str()]).ok("heaplens diff").stdout;
    assert!(text.contains("FUNCTIONS THAT GREW") && text.contains("make_widget"), "{text}");
    assert!(text.contains("main > make_red_widget > make_widget"), "{text}");
}

#[test]
fn a_rebuilt_program_shows_the_one_function_that_changed() {
    let dir = WorkDir::new("diff-rebuilt");
    let (a, ta) = traced_grow(&dir, "grow_once", &[]);
    let (b, tb) = traced_grow(&dir, "grow_twice", &["-DFACTOR=2", "-DPAD"]);
    let d = diff_json(&dir, &a, &b);
    assert_eq!(arr(&d, "functions/grew").len(), 1, "build_index alone changed: {d}");
    assert!(arr(&d, "functions/shrank").is_empty(), "{d}");
    let f = row(&d, "functions/grew", &["build_index"]).expect("build_index grew");
    let extra = (num(&tb, "build_index") - num(&ta, "build_index")) as i64;
    assert_eq!(i(f, "change/bytes"), extra);
    assert_eq!(i(f, "change/calls"), (num(&tb, "build_index_calls") - num(&ta, "build_index_calls")) as i64);
    // Its blocks are all held when main frees them: the peak grew by as much.
    assert_eq!(i(f, "change/peak_bytes"), extra, "{f}");
    assert_eq!(i(summary(&d, "peak_bytes"), "change"), extra);
    assert_eq!(arr(&d, "paths/grew").len(), 1, "{d}");

    // The differential flame graph parses, and only build_index (grown) is red.
    let svg = dir.join("change.svg");
    export_change(&dir, (&a, &b), "flamegraph", &svg);
    let text = std::fs::read_to_string(&svg).unwrap();
    let mut py = Command::new("python3");
    py.args(["-c", "import sys, xml.etree.ElementTree as E; print(E.parse(sys.argv[1]).getroot().tag)"]).arg(&svg);
    let parsed = run_cmd(py, &dir.path).ok("python3's XML parser reads the SVG");
    assert!(parsed.stdout.contains("svg"), "{}", parsed.stdout);
    let fill = |name: &str| -> String {
        let at = text.find(&format!("<title>{name} (")).unwrap_or_else(|| panic!("no frame {name}"));
        let rest = &text[at..];
        let f = rest.find("fill=\"").unwrap() + 6;
        rest[f..f + rest[f..].find('"').unwrap()].to_string()
    };
    let red = |c: &str| c.starts_with("rgb(255,") && !c.starts_with("rgb(255,255");
    assert!(red(&fill("build_index")), "build_index grew: {}", fill("build_index"));
    for same in ["parse_input", "write_output"] {
        assert_eq!(fill(same), "rgb(250,250,250)", "{same} did not change");
    }
    // The folded form: `stack base new`, build_index's numbers the program's.
    let folded = dir.join("change.folded");
    export_change(&dir, (&a, &b), "collapsed", &folded);
    let lines = std::fs::read_to_string(&folded).unwrap();
    let line = lines.lines().find(|l| l.split(' ').next().unwrap().ends_with(";build_index")).expect("build_index");
    let n: Vec<u64> = line.rsplitn(3, ' ').take(2).map(|x| x.parse().unwrap()).collect();
    assert_eq!((n[1], n[0]), (num(&ta, "build_index"), num(&tb, "build_index")), "{line}");

    // go tool pprof -diff_base on the two pprof exports: the same change at build_index.
    let (pa, pb) = (dir.join("a.pb.gz"), dir.join("b.pb.gz"));
    for (t, p) in [(&a, &pa), (&b, &pb)] {
        heaplens(
            &dir,
            &["export".as_ref(), t.as_os_str(), "--format".as_ref(), "pprof".as_ref(), "-o".as_ref(), p.as_os_str()],
        )
        .ok("export --format pprof");
    }
    let mut go = Command::new("go");
    go.args(["tool", "pprof", "-top", "-sample_index=alloc_space", "-unit=B", "-diff_base"]).arg(&pa).arg(&pb);
    let top = run_cmd(go, &dir.path).ok("go tool pprof -diff_base (apt-get install golang-go)").stdout;
    let flat: Vec<(String, String)> = top
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .filter(|c| c.len() >= 6 && c[0].ends_with('B'))
        .map(|c| (c[5].to_string(), c[0].to_string()))
        .collect();
    let changed: Vec<&(String, String)> = flat.iter().filter(|(_, v)| v != "0").collect();
    assert_eq!(changed, vec![&("build_index".to_string(), format!("{extra}B"))], "{top}");
}

#[test]
fn a_trace_against_itself_is_no_change() {
    let dir = WorkDir::new("diff-self");
    let (_, trace) = traced_widgets(&dir, &["2000"]);
    let d = diff_json(&dir, &trace, &trace);
    for changes in ["functions/grew", "functions/shrank", "paths/grew", "paths/shrank"] {
        assert!(arr(&d, changes).is_empty(), "{changes}: {d}");
    }
    assert!(arr(&d, "summary").iter().all(|s| i(s, "change") == 0), "{d}");
    let text = heaplens(&dir, &["diff".as_ref(), trace.as_os_str(), trace.as_os_str()]).ok("heaplens diff").stdout;
    assert!(text.contains("No function or call path changed."), "{text}");
}

#[test]
fn a_bad_trace_is_one_line_and_status_2() {
    let dir = WorkDir::new("diff-bad");
    let (_, trace) = traced_widgets(&dir, &["100"]);
    let missing = dir.join("missing.hltrace");
    let out = heaplens(&dir, &["diff".as_ref(), trace.as_os_str(), missing.as_os_str()]);
    assert_eq!(out.status.code(), Some(2), "{}", out.show());
    assert_one_line_error(&out, "heaplens diff with a missing trace");
    assert!(out.stderr.contains("missing.hltrace"), "{}", out.stderr);
}

#[test]
fn a_process_tree_compares_summed() {
    let dir = WorkDir::new("diff-tree");
    let exe = compile_c(&dir, "spawn_tree.c", &[]);
    let tree = dir.join("tree.hltrace");
    let args = ["run".as_ref(), "--follow-children".as_ref(), "-o".as_ref(), tree.as_os_str(), "--".as_ref()];
    let out = heaplens(&dir, &[&args[..], &[exe.as_os_str()]].concat()).ok("spawn_tree --follow-children");
    let truths = truths(&out.stdout, "spawn_tree");
    let small = truths.iter().find(|t| t["allocs"] == "300").expect("the 300-block child");
    // The base: the small child alone; the new run: the whole tree, summed.
    let base = dir.join(format!("tree.hltrace.{}", small["pid"]));
    assert!(base.is_file(), "{}", out.show());
    let cmd = ["diff".as_ref(), base.as_os_str(), tree.as_os_str(), "--format".as_ref(), "json".as_ref()];
    let out = heaplens(&dir, &cmd).ok("heaplens diff of a tree");
    assert!(out.stderr.contains("process tree of 3 processes"), "{}", out.stderr);
    let d: Value = serde_json::from_str(&out.stdout).unwrap();
    let others = truths.iter().filter(|t| t["pid"] != small["pid"]);
    let (calls, bytes) = others.fold((0, 0), |(c, b), t| (c + num(t, "allocs"), b + num(t, "bytes")));
    let f = row(&d, "functions/grew", &["allocate_blocks"]).expect("allocate_blocks grew");
    assert_eq!((i(f, "change/calls"), i(f, "change/bytes")), (calls as i64, bytes as i64), "{f}");
}

#[test]
fn template_instantiations_are_told_apart_and_runtime_buffers_are_no_leaks() {
    let dir = WorkDir::new("diff-templates");
    // fill<int> and fill<long> change in opposite directions: under one elided name,
    // `fill<…>(int)`, they would cancel out.
    let src = dir.join("tpl.cpp");
    std::fs::write(
        &src,
        "#include <cstdio>\n\
         template <class T> __attribute__((noinline)) void fill(int n) {\n\
           for (int i = 0; i < n; i++) { T *p = new T[4]; p[0] = 1; delete[] p; }\n\
         }\n\
         int main(int argc, char **) {\n\
           fill<int>(A); fill<long>(B);\n\
           if (argc > 1) std::printf(\"said something\\n\");\n\
           return 0;\n\
         }\n",
    )
    .unwrap();
    let s = src.to_str().unwrap();
    let one = compile(&dir, "g++", s, "tpl1", &["-O0", "-g", "-DA=100", "-DB=200"]);
    let two = compile(&dir, "g++", s, "tpl2", &["-O0", "-g", "-DA=200", "-DB=150"]);
    let (a, b) = (dir.join("a.hltrace"), dir.join("b.hltrace"));
    run_traced(&dir, &a, &one, &[] as &[&str]).ok("tpl1");
    // The second run prints: the C library's stdout buffer stays allocated, by design.
    run_traced(&dir, &b, &two, &["speak"]).ok("tpl2");
    let d = diff_json(&dir, &a, &b);
    let grew = row(&d, "functions/grew", &["void fill<int>(int)"]).unwrap_or_else(|| panic!("fill<int> grew: {d}"));
    assert_eq!((i(grew, "change/calls"), i(grew, "change/bytes")), (100, 1600), "{grew}");
    let shrank =
        row(&d, "functions/shrank", &["void fill<long>(int)"]).unwrap_or_else(|| panic!("fill<long> shrank: {d}"));
    assert_eq!((i(shrank, "change/calls"), i(shrank, "change/bytes")), (-50, -1600), "{shrank}");
    assert_eq!(i(summary(&d, "leaked_bytes"), "change"), 0, "{d}");
    for side in ["functions/grew", "functions/shrank", "paths/grew", "paths/shrank"] {
        for r in arr(&d, side) {
            assert_eq!(i(r, "change/leaked_bytes"), 0, "the stdout buffer is suppressed, not leaked: {r}");
        }
    }
    let text = heaplens(&dir, &["diff".as_ref(), a.as_os_str(), b.as_os_str()]).ok("diff").stdout;
    assert!(text.contains("fill<int>(int)") && text.contains("fill<long>(int)"), "{text}");
    // Only fill<int> changes: fill<long>, unchanged but in the runs, still keeps it whole, in
    // the diff and in check's verdict.
    let three = compile(&dir, "g++", s, "tpl3", &["-O0", "-g", "-DA=200", "-DB=200"]);
    let c = dir.join("c.hltrace");
    run_traced(&dir, &c, &three, &[] as &[&str]).ok("tpl3");
    let text = heaplens(&dir, &["diff".as_ref(), a.as_os_str(), c.as_os_str()]).ok("diff").stdout;
    assert!(text.contains("fill<int>(int)") && !text.contains("fill‹…>"), "{text}");
    let args =
        ["check".as_ref(), c.as_os_str(), "--base".as_ref(), a.as_os_str(), "--max-growth".as_ref(), "1%".as_ref()];
    let out = heaplens(&dir, &args);
    assert_eq!(out.status.code(), Some(1), "{}", out.show());
    assert!(out.stdout.contains("most from void fill<int>(int)") && !out.stdout.contains("fill‹…>"), "{}", out.stdout);
    // The differential flame graph's input keeps them apart too.
    let folded = dir.join("change.folded");
    export_change(&dir, (&a, &b), "collapsed", &folded);
    let folded = std::fs::read_to_string(&folded).unwrap();
    assert!(folded.lines().any(|l| l.ends_with("fill<int>(int) 1600 3200")), "{folded}");
    assert!(folded.lines().any(|l| l.ends_with("fill<long>(int) 6400 4800")), "{folded}");
    // So does one run's flame graph input: two instantiations are two frames, while a name
    // no other function reads alike is elided.
    let one_run = dir.join("b.folded");
    let cmd = ["export".as_ref(), b.as_os_str(), "--format".as_ref(), "collapsed".as_ref(), "-o".as_ref()];
    heaplens(&dir, &[&cmd[..], &[one_run.as_os_str()]].concat()).ok("export collapsed");
    let folded = std::fs::read_to_string(&one_run).unwrap();
    assert!(folded.lines().any(|l| l.ends_with("fill<int>(int) 3200")), "{folded}");
    assert!(folded.lines().any(|l| l.ends_with("fill<long>(int) 4800")), "{folded}");
    assert!(!folded.contains("fill‹…>"), "{folded}");
}

#[test]
fn an_empty_run_compares_its_peak_and_a_damaged_one_says_so() {
    let dir = WorkDir::new("diff-empty");
    let (_, trace) = traced_widgets(&dir, &["1000"]);
    let empty = dir.join("empty.hltrace");
    run_traced(&dir, &empty, Path::new("/bin/true"), &[] as &[&str]).ok("true");
    // A run that allocated nothing had a peak of nothing: bytes at the peak still compare.
    let d = diff_json(&dir, &empty, &trace);
    assert_eq!(d["peak_compared"], true, "{d}");
    let grew = row(&d, "functions/grew", &["make_widget"]).unwrap_or_else(|| panic!("make_widget grew: {d}"));
    assert!(i(grew, "change/peak_bytes") > 0, "{grew}");
    assert!(arr(&d, "damage").is_empty(), "{d}");
    // Everything removed: the differential flame graph draws the base's widths, all shrunk.
    let svg = dir.join("removed.svg");
    export_change(&dir, (&trace, &empty), "flamegraph", &svg);
    let svg = std::fs::read_to_string(&svg).unwrap();
    assert!(svg.contains("the new run has no bytes; widths are the base&apos;s"), "{svg}");
    let widget = svg.split("<g>").find(|g| g.contains("<title>make_widget")).expect("make_widget drawn");
    assert!(widget.contains("; -"), "a shrink in its tooltip: {widget}");
    assert!(widget.contains(",255)\""), "blue: {widget}");
    // A damaged trace is compared for what could be read, and the diff says so.
    let bytes = std::fs::read(&trace).unwrap();
    let half = dir.join("half.hltrace");
    std::fs::write(&half, &bytes[..common::damage::cut_inside_a_block(&bytes, bytes.len() / 2)]).unwrap();
    let d = diff_json(&dir, &trace, &half);
    let damage = arr(&d, "damage");
    assert!(damage.len() == 1 && damage[0].as_str().unwrap().starts_with("new: TRUNCATED"), "{d}");
    let text = heaplens(&dir, &["diff".as_ref(), trace.as_os_str(), half.as_os_str()]).ok("diff").stdout;
    assert!(text.contains("DAMAGED new: TRUNCATED"), "{text}");
    // A path of no frames is no comparison.
    let out =
        heaplens(&dir, &["diff".as_ref(), trace.as_os_str(), trace.as_os_str(), "--path-depth".as_ref(), "0".as_ref()]);
    assert_eq!(out.status.code(), Some(2), "{}", out.show());
}
