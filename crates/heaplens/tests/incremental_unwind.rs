//! The monitor's incremental stack walk (stop unwinding where the stack meets the previous one)
//! must record exactly the stacks a full unwind records. Each program here runs twice, once with
//! `HEAPLENS_FULL_UNWIND=1`, and every table that depends on call stacks must come out equal.
//! The incremental run leaves its stacks to the writer thread (stack commands replayed on a
//! mirror of the walker's chains), the full run interns them in place, so the two interning
//! paths are checked against each other too, whatever the machine's processor count; and the
//! first writes its events as columns, the second as rows, so the two layouts are as well.

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
        e.push(("HEAPLENS_INTERN", if full == "1" { "thread" } else { "writer" }));
        // And events as columns one way, rows the other.
        e.push(("HEAPLENS_COLUMNS", if full == "1" { "0" } else { "1" }));
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
    for key in ["summary/allocations", "summary/deallocations", "summary/leaked_objects", "summary/leaked_bytes"] {
        assert_eq!(u(&inc, key), u(&full, key), "{name}: {key} differs between columns and rows");
    }
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
    // Without check_circular: the encoder's check keys a dict by each container's address, and
    // the size of an int holding an address depends on its magnitude, so two runs' byte totals
    // differed whenever glibc happened to place the heap above 1 GiB in one run only.
    let script = "import json\nd=[{'k%d'%i:[i,str(i)]} for i in range(3000)]\n\
                  print(len(json.loads(json.dumps(d, check_circular=False))))\n";
    let dir = WorkDir::new("python-script");
    let path = dir.join("s.py");
    std::fs::write(&path, script).unwrap();
    let env = [("PYTHONMALLOC", "malloc"), ("PYTHONHASHSEED", "0")];
    assert_same_stacks("python", &env, std::path::Path::new("/usr/bin/python3"), &[path.to_str().unwrap()]);
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
        let t = heaplens_analysis::Trace::load(&trace, false).expect("trace loads");
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
