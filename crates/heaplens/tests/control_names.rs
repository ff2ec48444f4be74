//! (Issue 28, item 6.) Names holding control characters act in no output: a program whose
//! functions, thread, executable and argument hold ESC, BEL, SOH, a newline, a `;` and a
//! right-to-left override (`examples/control_names.c`) is traced, and every view of the trace
//! is read back: the report prints no control character to the terminal, the SVG pictures and
//! the flame graph are well-formed XML, folded stacks keep one stack per line, and heaptrack's
//! and pprof's line formats still read. Each shows the names as visible escapes (`\x1b`), and
//! the JSON report keeps them as they are.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;
use serde_json::Value;

const CTL: &str = "ctl\x01\x1b[31m\x07name";
const CTL_SHOWN: &str = r"ctl\x01\x1b[31m\x07name";
const SEMI: &str = "a\nb;c 7";
const SEMI_SHOWN: &str = r"a\nb;c 7";
const BIDI: &str = "bidi\u{202e}right";
const BIDI_SHOWN: &str = r"bidi\u{202e}right";
const THREAD_SHOWN: &str = r"th\x1b]0;x\x07";
const ARG: &str = "arg\x1b[2Jx";

/// `examples/control_names.c` built with its functions renamed: the executable (its own name
/// holding ESC).
fn build(dir: &WorkDir) -> PathBuf {
    let obj = dir.join("control_names.o");
    let mut cc = Command::new("gcc");
    cc.args(["-O2", "-fno-omit-frame-pointer", "-pthread", "-c", "-o"])
        .arg(&obj)
        .arg(examples_dir().join("control_names.c"));
    run_cmd(cc, &dir.path).ok("compiling control_names.c");
    let mut oc = Command::new("objcopy");
    for (from, to) in [("ctl_placeholder", CTL), ("semi_placeholder", SEMI), ("bidi_placeholder", BIDI)] {
        oc.arg(format!("--redefine-sym={from}={to}"));
    }
    oc.arg(&obj);
    run_cmd(oc, &dir.path).ok("objcopy --redefine-sym");
    let exe = dir.join("names\x1b[7m");
    let mut ld = Command::new("gcc");
    ld.arg("-pthread").arg("-o").arg(&exe).arg(&obj);
    run_cmd(ld, &dir.path).ok("linking control_names");
    exe
}

/// Asserts `text` holds no character a terminal acts on: no C0 control but newline and tab, no
/// DEL, no C1 control, no bidirectional override or isolate.
fn assert_terminal_safe(text: &str, what: &str) {
    let bad = text.char_indices().find(|&(_, c)| {
        (c.is_control() && c != '\n' && c != '\t') || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
    });
    if let Some((i, c)) = bad {
        let from = text[..i].char_indices().rev().nth(60).map_or(0, |(j, _)| j);
        panic!("{what} prints {c:?} at byte {i}: {:?}", &text[from..(i + 20).min(text.len())]);
    }
}

/// Asserts the file parses as XML (Python's parser, which holds to XML 1.0's characters).
fn assert_xml(dir: &WorkDir, file: &Path) {
    let mut py = Command::new("python3");
    py.args(["-c", "import sys, xml.etree.ElementTree as E; print(E.parse(sys.argv[1]).getroot().tag)"]).arg(file);
    let o = run_cmd(py, &dir.path);
    assert!(o.status.success(), "{} is not well-formed XML:\n{}", file.display(), o.show());
    assert!(o.stdout.trim().ends_with("svg"), "{}: root {}", file.display(), o.stdout);
}

/// `heaplens ARGS`, which must succeed without a panic and print nothing that acts.
fn ok(dir: &WorkDir, args: &[&str]) -> Out {
    let o = heaplens(dir, args);
    assert_no_panic(&o, &args.join(" "));
    let o = o.ok(&args.join(" "));
    assert_terminal_safe(&o.stdout, &format!("heaplens {} (stdout)", args[0]));
    assert_terminal_safe(&o.stderr, &format!("heaplens {} (stderr)", args[0]));
    o
}

#[test]
fn control_characters_in_names_act_in_no_output() {
    let dir = WorkDir::new("control-names");
    let exe = build(&dir);
    let trace = dir.join("n.hltrace");
    let run = run_traced(&dir, &trace, &exe, &[ARG]).ok("control_names under heaplens");
    let t = truth(&run.stdout, "names");
    let tr = trace.to_str().unwrap();

    // The JSON report keeps the names as the program gave them (serde escapes them).
    let v = report(&dir, &trace);
    assert_consistent(&v);
    for (name, key) in [(CTL, "ctl"), (SEMI, "semi"), (BIDI, "bidi")] {
        let rows = direct_rows(&v, name);
        assert_eq!(rows.len(), 1, "one direct row for {name:?}: {:#?}", arr(&v, "direct/rows"));
        assert_eq!(u(rows[0], "bytes"), num(&t, &format!("{key}_bytes")), "{name:?}'s bytes");
    }

    // The text reports: every name on its line, escaped.
    for extra in [&[][..], &["--cxx"][..], &["--lifetimes"][..], &["--lines"][..]] {
        let mut args = vec!["report", tr];
        args.extend_from_slice(extra);
        let o = ok(&dir, &args);
        if extra.is_empty() {
            for shown in [CTL_SHOWN, SEMI_SHOWN, BIDI_SHOWN, r"names\x1b[7m", r"arg\x1b[2Jx"] {
                assert!(o.stdout.contains(shown), "the report shows {shown}:\n{}", o.stdout);
            }
        }
    }

    // diff against a run of `true` (every function new) and check: each name on its row.
    let base = dir.join("true.hltrace");
    run_traced(&dir, &base, "true", &[] as &[&str]).ok("true under heaplens");
    let b = base.to_str().unwrap();
    let d = ok(&dir, &["diff", b, tr]);
    for shown in [CTL_SHOWN, SEMI_SHOWN, BIDI_SHOWN] {
        assert!(d.stdout.lines().any(|l| l.ends_with(shown)), "the diff shows {shown} on its row:\n{}", d.stdout);
    }
    let c = heaplens(&dir, &["check", tr, "--max-allocations", "1"]);
    assert_terminal_safe(&c.stdout, "heaplens check");
    assert!(c.stdout.contains(&format!("most from {CTL_SHOWN}")), "{}", c.stdout);
    let change = dir.join("change.svg");
    ok(&dir, &["export", tr, "--base", b, "--format", "flamegraph", "-o", change.to_str().unwrap()]);
    assert_xml(&dir, &change);

    // The pictures as SVG: well-formed, with the names escaped; their legends on stderr too.
    let svg = |name: &str| dir.join(name).to_str().unwrap().to_string();
    let pictures = [
        ("map", svg("map.svg"), vec!["--color", "function"], CTL_SHOWN),
        ("map", svg("threads.svg"), vec!["--color", "thread"], THREAD_SHOWN),
        ("timeline", svg("timeline.svg"), vec![], SEMI_SHOWN),
    ];
    for (cmd, out, extra, shown) in &pictures {
        let mut args = vec![*cmd, tr, "-o", out];
        args.extend(extra.iter().copied());
        ok(&dir, &args);
        assert_xml(&dir, Path::new(out));
        let text = std::fs::read_to_string(out).unwrap();
        assert!(text.contains(shown), "{cmd} {extra:?} shows {shown}");
    }
    for (cmd, out) in [("map", "map.png"), ("timeline", "timeline.png")] {
        ok(&dir, &[cmd, tr, "-o", &svg(out)]);
        assert!(std::fs::metadata(dir.join(out)).unwrap().len() > 0, "{cmd} wrote an empty PNG");
    }

    // The flame graph: inferno's SVG, well-formed, the name escaped.
    let flame = svg("flame.svg");
    ok(&dir, &["export", tr, "--format", "flamegraph", "-o", &flame]);
    assert_xml(&dir, Path::new(&flame));
    let text = std::fs::read_to_string(&flame).unwrap();
    assert!(text.contains(CTL_SHOWN), "the flame graph shows {CTL_SHOWN}");

    // Folded stacks: one stack per line, each ending in a space and its count, and nothing
    // before that a reader would take for a second count (a differential flame graph's).
    let folded = svg("stacks.folded");
    let o = ok(&dir, &["export", tr, "--format", "collapsed", "-o", &folded]);
    let stacks: usize = o
        .stderr
        .split_whitespace()
        .skip_while(|w| *w != "wrote")
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no 'wrote N stacks' in\n{}", o.stderr));
    let text = std::fs::read_to_string(&folded).unwrap();
    assert_eq!(text.lines().count(), stacks, "one line per stack:\n{text}");
    let mut sum = 0;
    for line in text.lines() {
        let (stack, n) = line.rsplit_once(' ').unwrap_or_else(|| panic!("no count: {line:?}"));
        sum += n.parse::<u64>().unwrap_or_else(|_| panic!("no count: {line:?}"));
        let last = stack.rsplit_once(' ').map_or(stack, |(_, w)| w);
        assert!(last.parse::<f64>().is_err(), "{line:?} reads as a differential line");
    }
    assert_eq!(sum, u(&v, "summary/bytes_allocated"), "the folded stacks add up to the bytes allocated");
    let semi_line = text.lines().find(|l| l.contains(r"a\nb")).unwrap_or_else(|| panic!("a\\nb in\n{text}"));
    assert_eq!(semi_line.matches(';').count(), 1, "`main;` then the one frame: {semi_line:?}");

    // heaptrack's format: heaptrack_print reads it all and shows the names escaped.
    let ht = svg("out.heaptrack");
    ok(&dir, &["export", tr, "--format", "heaptrack", "-o", &ht]);
    let mut hp = Command::new("heaptrack_print");
    hp.arg("-f").arg(&ht);
    let p = run_cmd(hp, &dir.path).ok("heaptrack_print");
    let calls = p.stdout.lines().find_map(|l| l.strip_prefix("calls to allocation functions: ")).expect("calls");
    assert_eq!(calls.split(' ').next().unwrap().parse::<u64>().unwrap(), u(&v, "summary/allocations"));
    assert!(p.stdout.contains(CTL_SHOWN), "heaptrack_print names {CTL_SHOWN}:\n{}", p.stdout);
    assert_terminal_safe(&p.stdout, "heaptrack_print");

    // pprof's text: the records and the module lines keep their fields.
    let heap = svg("out.heap");
    ok(&dir, &["export", tr, "--format", "pprof-text", "-o", &heap]);
    let text = std::fs::read_to_string(&heap).unwrap();
    let (records, maps) = text.split_once("\nMAPPED_LIBRARIES:\n").expect("MAPPED_LIBRARIES");
    let allocated: u64 = records
        .lines()
        .skip(1)
        .filter(|l| !l.is_empty())
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            assert!(f.len() >= 7 && f[5] == "@" && f[6].starts_with("0x"), "a record: {l:?}");
            f[4].trim_end_matches(']').parse::<u64>().unwrap()
        })
        .sum();
    assert_eq!(allocated, u(&v, "summary/bytes_allocated"));
    for l in maps.lines() {
        assert!(l.split_whitespace().count() >= 6 && l.contains('-'), "a module line: {l:?}");
    }
    assert!(maps.contains(r"names\x1b[7m"), "the program's path, escaped:\n{maps}");

    // The Firefox Profiler's JSON keeps them as they are.
    let ff = svg("firefox.json");
    ok(&dir, &["export", tr, "--format", "firefox", "-o", &ff]);
    let json: Value = serde_json::from_str(&std::fs::read_to_string(&ff).unwrap()).expect("firefox JSON");
    assert!(json.to_string().contains("ctl\\u0001\\u001b[31m\\u0007name"), "firefox keeps the name");
}

/// A thread name is any bytes but NUL: one that is not UTF-8 is recorded (its bad bytes as
/// U+FFFD), not dropped.
#[test]
fn a_thread_name_that_is_not_utf8_is_kept() {
    let dir = WorkDir::new("thread-name-bytes");
    let source = "#define _GNU_SOURCE\n#include <pthread.h>\n#include <stdlib.h>\n#include <unistd.h>\n\
         static void *worker(void *a) {\n\
           pthread_setname_np(pthread_self(), \"\\xff\\xfeworker\");\n\
           for (int i = 0; i < 10; i++) { void *volatile p = malloc(100); free(p); }\n\
           usleep(1500000);\n\
           return a;\n\
         }\n\
         int main(void) { pthread_t t; pthread_create(&t, 0, worker, 0); pthread_join(t, 0); return 0; }\n";
    let exe = compile_source(&dir, "gcc", "named.c", source, "named", &["-O1", "-pthread"]);
    let trace = dir.join("named.hltrace");
    run_traced(&dir, &trace, &exe, &[] as &[&str]).ok("named");
    let v = report(&dir, &trace);
    let names = at(&v, "process/thread_names");
    let shown: Vec<&str> =
        names.as_object().map(|o| o.values().filter_map(Value::as_str).collect()).unwrap_or_default();
    assert!(shown.contains(&"\u{fffd}\u{fffd}worker"), "thread names: {names}");
}
