//! The monitor's incremental stack walk (stop unwinding where the stack meets the previous one)
//! must record exactly the stacks a full unwind records. Each program here runs twice, once with
//! `HEAPLENS_FULL_UNWIND=1`, and every table that depends on call stacks must come out equal.

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

fn both_ways(name: &str, env: &[(&str, &str)], program: &std::path::Path, args: &[&str]) -> (Value, Value) {
    let dir = WorkDir::new(name);
    let mut reports = Vec::new();
    for full in ["0", "1"] {
        let trace = dir.join(format!("{name}-{full}.hltrace"));
        let mut e: Vec<(&str, &str)> = env.to_vec();
        e.push(("HEAPLENS_FULL_UNWIND", full));
        run_traced_env(&dir, &trace, &e, program, args).ok("heaplens run");
        reports.push(report(&dir, &trace));
    }
    let full = reports.pop().unwrap();
    let incremental = reports.pop().unwrap();
    (incremental, full)
}

fn assert_same_stacks(name: &str, env: &[(&str, &str)], program: &std::path::Path, args: &[&str]) -> Value {
    let (inc, full) = both_ways(name, env, program, args);
    assert!(u(&inc, "summary/allocations") > 0, "{name}: nothing recorded");
    assert_eq!(stack_tables(&inc), stack_tables(&full), "{name}: incremental and full unwinding disagree");
    inc
}

#[test]
fn deep_recursion_same_stacks_and_every_stack_reaches_main() {
    let dir = WorkDir::new("deep-build");
    let exe = compile_c(&dir, "deep.c", &[]);
    let v = assert_same_stacks("deep", &[], &exe, &["3000"]);
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
    assert_same_stacks("widgets", &[], &exe, &["5000"]);
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
    let script = "import json\nd=[{'k%d'%i:[i,str(i)]} for i in range(3000)]\nprint(len(json.loads(json.dumps(d))))\n";
    let dir = WorkDir::new("python-script");
    let path = dir.join("s.py");
    std::fs::write(&path, script).unwrap();
    let env = [("PYTHONMALLOC", "malloc"), ("PYTHONHASHSEED", "0")];
    assert_same_stacks("python", &env, std::path::Path::new("/usr/bin/python3"), &[path.to_str().unwrap()]);
}
