//! The monitor's incremental stack walk (stop unwinding where the stack meets the previous one)
//! must record exactly the stacks a full unwind records. Each program here runs twice, once with
//! `HEAPLENS_FULL_UNWIND=1`, and every table that depends on call stacks must come out equal.
//! The incremental walk runs twice: once leaving its stacks to the writer thread (stack
//! commands replayed on a mirror of the walker's chains and recent stacks), once interning
//! them in place like the full run, so both interning paths are checked, whatever the machine's
//! processor count; and the first writes its events as columns, the others as rows, so the two
//! layouts are as well.
//!
//! The incremental run also unwinds every stack a second time, whole, on the same call
//! (`HEAPLENS_CHECK_UNWIND=1`), and no stack may differ. That check is all a program whose
//! allocations vary from run to run (Python, under load) can be held to.

mod common;

use common::*;
use serde_json::Value;

/// The parts of a report built from call stacks.
fn stack_tables(v: &Value) -> Value {
    serde_json::json!({
        "leaks": v["leaks"],
        "direct": v["direct"],
        "call_graph": v["call_graph"],
        "allocations": v["summary"]["allocations"],
    })
}

/// The reports of an incremental run interning in the writer, one interning in the thread, and
/// a full run; with the share of the first run's captures that repeated a recent stack.
fn three_ways(name: &str, env: &[(&str, &str)], program: &std::path::Path, args: &[&str]) -> ([Value; 3], f64) {
    let dir = WorkDir::new(name);
    let mut reports = Vec::new();
    let mut repeats = 0.0;
    for (full, intern, columns) in [("0", "writer", "1"), ("0", "thread", "0"), ("1", "thread", "0")] {
        let trace = dir.join(format!("{name}-{full}-{intern}.hltrace"));
        let mut e: Vec<(&str, &str)> = env.to_vec();
        e.extend([("HEAPLENS_FULL_UNWIND", full), ("HEAPLENS_INTERN", intern), ("HEAPLENS_COLUMNS", columns)]);
        if full == "0" {
            e.extend([("HEAPLENS_CHECK_UNWIND", "1"), ("HEAPLENS_STATS", "1")]);
        }
        let out = run_traced_env(&dir, &trace, &e, program, args).ok("heaplens run");
        let r = report(&dir, &trace);
        if full == "0" {
            assert_checked(name, &out.stderr, u(&r, "summary/allocations"));
        }
        if intern == "writer" {
            repeats = repeated_share(name, &out.stderr);
        }
        reports.push(r);
    }
    (reports.try_into().unwrap(), repeats)
}

/// The share of captures that repeated a recent stack, from the `HEAPLENS_STATS=1` line.
fn repeated_share(name: &str, stderr: &str) -> f64 {
    let line = stderr
        .lines()
        .find(|l| l.starts_with("heaplens: ") && l.contains("stacks captured"))
        .unwrap_or_else(|| panic!("{name}: no capture statistics in\n{stderr}"));
    let pct = line.split_whitespace().find_map(|w| w.strip_suffix('%')).unwrap_or_else(|| panic!("{name}: {line:?}"));
    pct.parse::<f64>().unwrap() / 100.0
}

/// Asserts that the monitor's same-run check (`HEAPLENS_CHECK_UNWIND=1`, printed on `stderr`)
/// compared about every one of the `allocations` and found no stack that differed.
fn assert_checked(name: &str, stderr: &str, allocations: u64) {
    let line = stderr
        .lines()
        .find(|l| l.starts_with("heaplens: unwind check: "))
        .unwrap_or_else(|| panic!("{name}: no unwind check line in\n{stderr}"));
    let nums: Vec<u64> = line.split_whitespace().filter_map(|w| w.parse().ok()).collect();
    let [checked, differed] = nums[..] else { panic!("{name}: unreadable check line {line:?}") };
    assert_eq!(differed, 0, "{name}: {differed} of {checked} incremental stacks differ from a whole unwind");
    // Every allocation's stack, but those whose walk stopped in code loaded since (a few).
    assert!(
        checked + 16 >= allocations && checked <= allocations + 16,
        "{name}: {checked} checked, {allocations} allocations"
    );
}

/// Runs the program the three ways and checks that they record the same stacks; returns the
/// first report and the share of its captures that repeated a recent stack.
fn assert_same_stacks(name: &str, env: &[(&str, &str)], program: &std::path::Path, args: &[&str]) -> (Value, f64) {
    let ([inc, inc_thread, full], repeats) = three_ways(name, env, program, args);
    assert!(u(&inc, "summary/allocations") > 0, "{name}: nothing recorded");
    assert_eq!(stack_tables(&inc), stack_tables(&full), "{name}: incremental (writer) and full unwinding disagree");
    assert_eq!(
        stack_tables(&inc_thread),
        stack_tables(&full),
        "{name}: incremental (thread) and full unwinding disagree"
    );
    for key in ["summary/allocations", "summary/deallocations", "summary/leaked_objects", "summary/leaked_bytes"] {
        assert_eq!(u(&inc, key), u(&full, key), "{name}: {key} differs between columns and rows");
    }
    (inc, repeats)
}

#[test]
fn deep_recursion_same_stacks_and_every_stack_reaches_main() {
    let dir = WorkDir::new("deep-build");
    let exe = compile_c(&dir, "deep.c", &[]);
    let (v, _) = assert_same_stacks("deep", &[], &exe, &["3000"]);
    // Every allocation of `leaf` (depth 100..300, far past heaptrack's 64-frame cut) has main
    // on its path: main's inclusive calls equal all of leaf's calls.
    let leaf = graph_entry(&v, "leaf").expect("leaf in the call graph");
    let main = graph_entry(&v, "main").expect("main in the call graph");
    assert_eq!(u(leaf, "calls"), 3000);
    assert_eq!(u(main, "calls"), u(&v, "summary/allocations"));
}

#[test]
fn widgets_same_stacks() {
    let dir = WorkDir::new("widgets-build");
    let exe = compile_c(&dir, "widgets.c", &[]);
    let (_, repeats) = assert_same_stacks("widgets", &[], &exe, &["5000"]);
    // Its two stacks share their innermost frame (`malloc` in make_widget) and come in random
    // order: after the first of each, every capture repeats one of them.
    assert!(repeats > 0.99, "widgets: only {:.1}% of captures repeated a recent stack", repeats * 100.0);
}

#[test]
fn mutual_recursion_same_stacks() {
    let dir = WorkDir::new("recursive-build");
    let exe = compile_c(&dir, "recursive.c", &[]);
    assert_same_stacks("recursive", &[], &exe, &[]);
}

#[test]
fn cxx_same_stacks() {
    let dir = WorkDir::new("cxx-build");
    let exe = compile(&dir, "g++", "cxx_new.cpp", "cxx_new", &["-O2", "-g"]);
    assert_same_stacks("cxx", &[], &exe, &[]);
}

#[test]
fn python_same_stacks() {
    // Python's allocations differ from run to run (by one string now and then, seen when the
    // machine is loaded), so two runs' reports cannot be compared: each run checks every
    // stack against a whole unwind of the same call instead, with either interning path and
    // either layout.
    let script = "import json\nd=[{'k%d'%i:[i,str(i)]} for i in range(3000)]\n\
                  print(len(json.loads(json.dumps(d))))\n";
    let dir = WorkDir::new("python-script");
    let path = dir.join("s.py");
    std::fs::write(&path, script).unwrap();
    for (intern, columns) in [("writer", "1"), ("thread", "0")] {
        let trace = dir.join(format!("python-{intern}.hltrace"));
        let env = [
            ("PYTHONMALLOC", "malloc"),
            ("HEAPLENS_INTERN", intern),
            ("HEAPLENS_COLUMNS", columns),
            ("HEAPLENS_CHECK_UNWIND", "1"),
            ("HEAPLENS_STATS", "1"),
        ];
        let out = run_traced_env(&dir, &trace, &env, "/usr/bin/python3", &[path.to_str().unwrap()]).ok("heaplens run");
        assert_eq!(out.stdout.trim(), "3000");
        let r = report(&dir, &trace);
        let allocations = u(&r, "summary/allocations");
        assert!(allocations > 50_000, "python ({intern}): only {allocations} allocations");
        assert_checked(&format!("python ({intern})"), &out.stderr, allocations);
        // The stacks reach the interpreter's entry point.
        let main = graph_entry(&r, "Py_BytesMain").expect("Py_BytesMain in the call graph");
        assert_eq!(u(main, "calls"), allocations, "python ({intern}): a stack stops short of Py_BytesMain");
    }
}

/// The depth of every recorded stack of deep.c, allocation by allocation, is the recursion
/// depth its random number generator chose plus a constant number of outer frames. The
/// walker's archive of deep stacks (matched when recursion comes back down) must never give a
/// stack one frame too many or too few.
#[test]
fn deep_recursion_every_stack_has_its_exact_depth() {
    let dir = WorkDir::new("deep-depths");
    let exe = compile_c(&dir, "deep.c", &[]);
    const N: usize = 20_000;
    // deep.c's generator and depth choice, step for step.
    let mut rng: u64 = 1;
    let want: Vec<i64> = (0..N)
        .map(|_| {
            rng = rng.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            100 + i64::from((rng >> 56) as i32 % 200)
        })
        .collect();
    let mut outer_frames = Vec::new();
    for full in ["0", "1"] {
        let trace = dir.join(format!("deep-{full}.hltrace"));
        run_traced_env(&dir, &trace, &[("HEAPLENS_FULL_UNWIND", full)], &exe, &[N.to_string()]).ok("heaplens run");
        let t = heaplens_interpret::Trace::load(&trace, false).expect("trace loads");
        // The leaf's allocations are 16..80 bytes; printf's buffer is the only other one.
        let depths: Vec<i64> = t
            .events()
            .filter(|e| e.stack != 0 && (16..80).contains(&e.size))
            .map(|e| t.stacks.walk(e.stack).count() as i64)
            .collect();
        assert_eq!(depths.len(), N, "full={full}: one leaf allocation per iteration");
        let extra: std::collections::BTreeSet<i64> = depths.iter().zip(&want).map(|(d, w)| d - w).collect();
        assert_eq!(extra.len(), 1, "full={full}: stack depth minus recursion depth varies: {extra:?}");
        outer_frames.push(*extra.first().unwrap());
    }
    assert_eq!(outer_frames[0], outer_frames[1], "incremental and full unwinding disagree on the outer frames");
}
