//! The hostile-programs suite: programs of the kinds real daemons, servers and libraries are
//! (`examples/hostile.c`, `examples/hostile_tls.cpp`), each run bare and under `heaplens run`.
//! Under the monitor each must print the same, leave the same files, end the same way (exit
//! status or signal), and have every allocation it made recorded.

mod common;

use std::path::Path;

use common::*;
use serde_json::Value;

/// Runs `hostile ARGS` bare (in `bare/`) and under heaplens (in `traced/`); asserts the same
/// output and ending; returns the traced run, its report (when a trace exists) and the truth.
struct Case {
    dir: WorkDir,
    traced: Out,
    bare: Out,
    trace: std::path::PathBuf,
}

impl Case {
    fn run(name: &str, args: &[&str]) -> Case {
        Case::run_with(name, args, &[])
    }

    fn run_with(name: &str, args: &[&str], run_flags: &[&str]) -> Case {
        let dir = WorkDir::new(name);
        let exe = compile_c(&dir, "hostile.c", &["-pthread"]);
        for sub in ["bare", "traced"] {
            std::fs::create_dir_all(dir.join(sub)).unwrap();
        }
        let mut cmd = std::process::Command::new(&exe);
        cmd.args(args);
        let bare = run_cmd(cmd, &dir.join("bare"));
        let trace = dir.join("traced/run.hltrace");
        let mut cmd = std::process::Command::new(heaplens_exe());
        cmd.arg("run").args(run_flags).arg("-o").arg(&trace).arg("--").arg(&exe).args(args);
        let traced = run_cmd(cmd, &dir.join("traced"));
        assert_no_panic(&traced, "heaplens run");
        assert_eq!(describe(&traced.status), describe(&bare.status), "ended differently\n{}", traced.show());
        assert_eq!(traced.stdout, bare.stdout, "stdout differs\n{}", traced.show());
        Case { dir, traced, bare, trace }
    }

    fn truth(&self) -> std::collections::BTreeMap<String, String> {
        truth(&self.bare.stdout, "hostile")
    }

    fn report(&self) -> Value {
        assert!(self.trace.exists(), "no trace written\n{}", self.traced.show());
        report(&self.dir, &self.trace)
    }

    /// The report counts at least the program's own allocations and frees (stdio and the C
    /// library add a few of their own), and never fewer.
    fn assert_recorded(&self, v: &Value, slack: u64) {
        let t = self.truth();
        let (allocs, frees) = (num(&t, "allocs"), num(&t, "frees"));
        let (a, f) = (u(v, "summary/allocations"), u(v, "summary/deallocations"));
        assert!(a >= allocs && a <= allocs + slack, "allocations {a}, the program made {allocs}\n{v:#}");
        assert!(f >= frees && f <= frees + slack, "deallocations {f}, the program made {frees}\n{v:#}");
        assert_eq!(u(v, "summary/unmatched_frees"), 0, "unmatched frees");
    }
}

fn file(p: &Path) -> Vec<u8> {
    std::fs::read(p).unwrap_or_else(|e| panic!("cannot read {}: {e}", p.display()))
}

/// (Issue 20, item 1.) A daemon closes every descriptor >= 3 and writes its own data file: the file holds its
/// 150 bytes only, and the trace every event (the monitor reopened its trace).
#[test]
fn closing_every_descriptor_leaves_the_programs_file_alone() {
    for how in ["close", "dup2", "replace"] {
        let c = Case::run(&format!("fds-{how}"), &["fds", how]);
        let data = file(&c.dir.join("traced/data.bin"));
        assert_eq!(data.len(), 150, "{how}: the program's file has {} bytes\n{}", data.len(), c.traced.show());
        assert_eq!(data, file(&c.dir.join("bare/data.bin")), "{how}: the program's file differs");
        let v = c.report();
        c.assert_recorded(&v, 2);
        assert!(at(&v, "trace/complete").as_bool().unwrap(), "{how}: trace incomplete\n{v:#}");
    }
}

/// (Issue 20, item 2.) Signals sent to the process while the program blocks them and takes them with
/// signalfd and sigwaitinfo reach the program's thread, never the monitor's (which would die
/// by them): 20 runs, none killed.
#[test]
fn blocked_signals_are_taken_by_the_program() {
    for run in 0..20 {
        let c = Case::run(&format!("sigwait-{run}"), &["sigwait"]);
        assert_eq!(num(&truth(&c.traced.stdout, "hostile"), "taken"), 20, "run {run}");
        if run == 0 {
            c.assert_recorded(&c.report(), 2);
        }
    }
}

/// (Issue 20, item 2.) A SIGPROF handler that allocates always runs on the program's thread, and its
/// allocations are recorded.
#[test]
fn sigprof_handlers_run_on_the_programs_thread() {
    let c = Case::run("sigprof", &["sigprof"]);
    let t = truth(&c.traced.stdout, "hostile");
    assert_eq!(num(&t, "off_main"), 0, "handler runs off the main thread\n{}", c.traced.show());
    let runs = num(&t, "runs");
    let v = c.report();
    // Each handler run mallocs 24 bytes once.
    let row = bin_row(&v, 24).unwrap_or_else(|| panic!("no 24-byte bin\n{v:#}"));
    assert!(u(row, "allocs") >= runs, "{} 24-byte allocations for {runs} handler runs", u(row, "allocs"));
}

/// (Issue 20, item 3.) `--aggregate` leaves SIGUSR2 alone: a program that raises it dies by it (snapshots come
/// through `heaplens snapshot`), and every fatal signal under plain recording too.
#[test]
fn raising_sigusr2_kills_the_program_under_aggregate() {
    for flags in [&["--aggregate"][..], &[][..]] {
        let c = Case::run_with("usr2", &["crash", "usr2"], flags);
        assert_eq!(describe(&c.traced.status), format!("signal {}", libc::SIGUSR2), "{flags:?}");
        let v = c.report();
        assert_eq!(u(&v, "summary/allocations"), 50000 + 1, "{flags:?}: 50000 and stdout's buffer");
    }
}

/// (Issue 20, item 4.) main leaving with pthread_exit: the process ends with its last thread, status 0.
#[test]
fn pthread_exit_from_main_ends_the_process() {
    let c = Case::run("pthread-exit", &["pthread-exit"]);
    assert!(c.traced.status.success());
    c.assert_recorded(&c.report(), 4);
}

/// (Issue 20, item 5.) Out of memory: the monitor never aborts the program; it stops recording and says how
/// many calls went unrecorded.
#[test]
fn out_of_memory_does_not_abort_the_program() {
    let c = Case::run("oom", &["oom"]);
    assert!(c.traced.status.success(), "{}", c.traced.show());
    let v = c.report();
    let dropped = at(&v, "trace/dropped_events").as_u64().unwrap_or(0);
    if dropped > 0 {
        assert!(c.traced.stderr.contains("heaplens: out of memory"), "said once\n{}", c.traced.show());
        assert_eq!(c.traced.stderr.matches("out of memory").count(), 1, "{}", c.traced.show());
    }
    assert!(u(&v, "summary/allocations") > 1000, "the allocations before memory ran out are recorded");
}

/// (Issue 20, item 6.) A vfork child that fails to exec and calls _exit leaves the parent's recording alone.
#[test]
fn vfork_child_exit_keeps_the_parent_recording() {
    let c = Case::run("vfork", &["vfork"]);
    let v = c.report();
    c.assert_recorded(&v, 2);
    assert!(at(&v, "trace/complete").as_bool().unwrap());
}

/// (Issue 20, item 7.) Thread-specific destructors (also one that sets its value again for a second round) are
/// recorded: no false leaks, no missing frees.
#[test]
fn thread_exit_destructors_are_recorded() {
    let c = Case::run("keys", &["keys"]);
    let v = c.report();
    let t = c.truth();
    assert_eq!(u(&v, "summary/calls_by_kind/malloc"), num(&t, "allocs") + 1, "mallocs (and stdout's buffer)");
    for size in [100u64, 200] {
        let row = bin_row(&v, size).unwrap_or_else(|| panic!("no {size}-byte bin\n{v:#}"));
        assert_eq!(u(row, "allocs"), u(row, "frees"), "{size}-byte blocks left live\n{v:#}");
    }
    assert_eq!(u(bin_row(&v, 100).unwrap(), "allocs"), 100);
}

/// (Issue 20, item 7.) C++ thread_local destructors and key destructors that allocate, at thread exit.
#[test]
fn thread_local_destructors_are_recorded() {
    let dir = WorkDir::new("tls");
    let exe = compile(&dir, "g++", "hostile_tls.cpp", "hostile_tls", &["-O2", "-g", "-pthread"]);
    let bare = run_bare(&dir, &exe, &[] as &[&str]);
    let trace = dir.join("tls.hltrace");
    let out = run_traced(&dir, &trace, &exe, &[] as &[&str]).ok("heaplens run");
    assert_eq!(out.stdout, bare.stdout);
    let t = truth(&bare.stdout, "hostile_tls");
    let v = report(&dir, &trace);
    let calls = |f: &str| direct_rows(&v, f).iter().map(|r| u(r, "calls")).sum::<u64>();
    assert_eq!(calls("Holder::~Holder()"), num(&t, "allocs_2222"), "thread_local destructors\n{v:#}");
    assert_eq!(calls("on_key(void*)"), num(&t, "allocs_1111"), "key destructors\n{v:#}");
}

/// (Issue 20, item 8.) exec writes the trace out first.
#[test]
fn exec_keeps_what_was_recorded() {
    let c = Case::run("exec", &["exec"]);
    let v = c.report();
    c.assert_recorded(&v, 2);
    assert!(at(&v, "trace/complete").as_bool().unwrap(), "{v:#}");
}

/// (Issue 20, item 9.) With RLIMIT_NOFILE = 3 (no /proc/self/maps for the stack's bounds) stacks are still recorded, and the forked child that cannot have a
/// trace of its own is said so, once.
#[test]
fn stacks_are_recorded_without_descriptors() {
    let c = Case::run("nofile", &["nofile"]);
    let v = c.report();
    // The 50 blocks leak through main > nofile_mode > alloc_range (mid_alloc and leaf_alloc end
    // in tail calls, so they leave no frame).
    let leaks = arr(&v, "leaks");
    let row = leaks.iter().find(|r| leak_path(r).iter().any(|f| f == "alloc_range"));
    let row = row.unwrap_or_else(|| panic!("no leak path through alloc_range: stacks missing\n{v:#}"));
    assert_eq!(u(row, "allocs"), num(&c.truth(), "allocs"));
    assert_eq!(leak_path(row)[0], "main", "{row}");
    let child = std::fs::read_dir(c.dir.join("traced")).unwrap().flatten().any(|e| {
        let n = e.file_name().to_string_lossy().into_owned();
        n.starts_with("run.hltrace.") && !n.ends_with(".snapshot")
    });
    let said = c.traced.stderr.matches("cannot create the trace of child process").count();
    assert!(child || said == 1, "the child's trace is neither written nor said to be missing\n{}", c.traced.show());
}

/// (Issue 20, item 10.) A program that dies by abort, a segmentation fault (with or without a handler of its
/// own that re-raises) or SIGTERM in its first 100 ms has all 75,000 events in its trace; one
/// killed by SIGKILL after 200 ms of idling too.
#[test]
fn crashing_programs_leave_every_event() {
    for (how, sig) in [
        ("abort", libc::SIGABRT),
        ("segv", libc::SIGSEGV),
        ("term", libc::SIGTERM),
        ("handler", libc::SIGSEGV),
        ("kill", libc::SIGKILL),
    ] {
        let c = Case::run(&format!("crash-{how}"), &["crash", how]);
        assert_eq!(describe(&c.traced.status), format!("signal {sig}"), "{how}");
        let v = c.report();
        assert_eq!(u(&v, "summary/allocations"), 50000 + 1, "{how}: 50000 and stdout's buffer\n{v:#}");
        assert_eq!(u(&v, "summary/deallocations"), 25000, "{how}");
        if how != "kill" {
            assert!(at(&v, "trace/complete").as_bool().unwrap(), "{how}: trace incomplete");
        }
    }
}

/// (Issue 20, item 11.) free(NULL) is counted.
#[test]
fn null_frees_are_counted() {
    let c = Case::run("null-frees", &["null-frees"]);
    let v = c.report();
    assert!(u(&v, "summary/null_frees") >= 37, "{v:#}");
    assert!(u(&v, "summary/null_frees") <= 37 + 4, "{v:#}");
}

/// (Issue 19, A.3.) Under the CPU sampler (`--cpu`: a SIGPROF timer on every thread's CPU
/// clock) every hostile program still prints the same and ends the same way.
#[test]
fn hostile_programs_behave_the_same_under_the_cpu_sampler() {
    for args in [
        &["fds", "close"][..],
        &["fds", "dup2"],
        &["sigwait"],
        &["sigprof"],
        &["pthread-exit"],
        &["vfork"],
        &["keys"],
        &["exec"],
        &["crash", "abort"],
        &["crash", "segv"],
        &["crash", "handler"],
    ] {
        let c = Case::run_with(&format!("cpu-{}", args.join("-")), args, &["--cpu"]);
        assert!(c.trace.exists(), "{args:?}: no trace\n{}", c.traced.show());
    }
}
