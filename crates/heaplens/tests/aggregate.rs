//! `heaplens run --aggregate`: counters instead of events. Every table must come out exactly as
//! from a full trace of the same deterministic program, and the trace must not grow with the
//! number of allocations.

mod common;

use std::process::Command;

use common::*;
use serde_json::{json, Value};

fn tables(v: &Value) -> Value {
    let s = &v["summary"];
    json!({
        "allocations": s["allocations"], "deallocations": s["deallocations"],
        "bytes_allocated": s["bytes_allocated"], "leaked_bytes": s["leaked_bytes"],
        "leaked_objects": s["leaked_objects"], "peak_bytes": s["peak_bytes"],
        "calls_by_kind": s["calls_by_kind"], "frees_by_kind": s["frees_by_kind"],
        "leaks": v["leaks"], "bins": v["bins"], "direct": v["direct"], "call_graph": v["call_graph"],
    })
}

fn record(dir: &WorkDir, exe: &std::path::Path, n: &str, aggregate: bool) -> (Value, u64) {
    let trace = dir.join(format!("w-{n}-{aggregate}.hltrace"));
    let mut cmd = Command::new(heaplens_exe());
    cmd.arg("run");
    if aggregate {
        cmd.arg("--aggregate");
    }
    cmd.arg("-o").arg(&trace).arg("--").arg(exe).arg(n);
    run_cmd(cmd, &dir.path).ok("heaplens run");
    let size = std::fs::metadata(&trace).unwrap().len();
    (report(dir, &trace), size)
}

#[test]
fn aggregated_widgets_match_the_full_trace_exactly() {
    let dir = WorkDir::new("aggregate-widgets");
    let exe = compile_c(&dir, "widgets.c", &[]);
    let (full, _) = record(&dir, &exe, "20000", false);
    let (agg, small) = record(&dir, &exe, "20000", true);
    assert_eq!(tables(&agg), tables(&full));
    assert_eq!(u(&agg, "summary/peak_bytes"), u(&full, "summary/peak_bytes"));
    // Ten times the allocations, about the same trace.
    let (agg10, big) = record(&dir, &exe, "200000", true);
    assert_eq!(u(&agg10, "summary/allocations"), 200000);
    assert!(big < small + 4096, "aggregated trace grew from {small} to {big} bytes with 10x the allocations");
}

/// `heaplens snapshot PID` makes a running program write its counters (by a request file the
/// monitor polls, not a signal): the report then shows its allocations while it still runs.
#[test]
fn heaplens_snapshot_writes_a_snapshot_while_running() {
    let dir = WorkDir::new("aggregate-snapshot");
    let exe = compile_c(&dir, "endings.c", &[]);
    let trace = dir.join("snap.hltrace");
    let mut cmd = Command::new(heaplens_exe());
    cmd.args(["run", "--aggregate", "-o"]).arg(&trace).args(["--"]).arg(&exe).arg("wait");
    cmd.current_dir(&dir.path).stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    // endings.c's wait mode prints its pid, then sleeps.
    let mut line = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(child.stdout.as_mut().unwrap()), &mut line).unwrap();
    let t = truth(&line, "endings");
    let pid = num(&t, "pid") as i32;
    let pid_arg = pid.to_string();
    let asked = heaplens(&dir, &["snapshot", pid_arg.as_str()]);
    assert!(asked.status.success(), "heaplens snapshot failed: {}", asked.stderr);
    assert!(asked.stderr.contains("snapshot written to"), "{}", asked.stderr);
    // Asking again, by the trace's path this time, works too.
    let again = heaplens(&dir, &["snapshot".as_ref(), trace.as_os_str()]);
    assert!(again.status.success(), "heaplens snapshot TRACE failed: {}", again.stderr);
    let mut v = None;
    for _ in 0..100 {
        std::thread::sleep(std::time::Duration::from_millis(50));
        let out = heaplens(&dir, &["report".as_ref(), trace.as_os_str(), "--format".as_ref(), "json".as_ref()]);
        if out.status.success() {
            let r: Value = serde_json::from_str(&out.stdout).unwrap();
            if u(&r, "summary/allocations") > 0 {
                v = Some(r);
                break;
            }
        }
    }
    // SAFETY: as above.
    unsafe { libc::kill(pid, libc::SIGKILL) };
    let _ = child.wait();
    let v = v.expect("a snapshot was written while the program ran");
    assert!(u(&v, "summary/allocations") >= num(&t, "allocs"), "{v:#}");
}
