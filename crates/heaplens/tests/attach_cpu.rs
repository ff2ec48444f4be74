//! `heaplens attach --cpu`: CPU-time samples from the attach on, of the threads running then
//! and of those created while attached (`examples/attach_busy.c`: one thread spins from the
//! start, a second starts spinning while attached, a third sleeps until it ends while attached,
//! its timer then retired at once), and nothing left behind at the detach: no descriptor, no thread, no timer, SIGPROF's disposition as it was; the
//! program's output and exit status those of a bare run.

mod attaching;
mod common;

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use attaching::*;
use common::*;
use serde_json::Value;

/// Runs `exe` bare, feeding it `lines` then the end of its input after `wait`.
fn bare_with_input(dir: &WorkDir, exe: &Path, lines: &str, wait: Duration) -> Out {
    let mut cmd = Command::new(exe);
    cmd.current_dir(&dir.path).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("start the program");
    child.stdin.as_mut().unwrap().write_all(lines.as_bytes()).unwrap();
    std::thread::sleep(wait);
    drop(child.stdin.take());
    wait_with_timeout(child, "the bare run")
}

/// The process's SIGPROF disposition as `/proc` shows it: (blocked, ignored, caught).
fn sigprof_disposition(pid: u32) -> (bool, bool, bool) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let bit = |key: &str| {
        let mask = status.lines().find_map(|l| l.strip_prefix(key)).map(|v| u64::from_str_radix(v.trim(), 16).unwrap());
        mask.unwrap() & (1 << (libc::SIGPROF - 1)) != 0
    };
    (bit("SigBlk:"), bit("SigIgn:"), bit("SigCgt:"))
}

/// The POSIX timers process `pid` holds (`/proc/PID/timers`; empty where the kernel lacks it).
fn timers(pid: u32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/timers")).unwrap_or_default()
}

/// The ids of process `pid`'s POSIX timers (empty where the kernel lacks `/proc/PID/timers`).
fn timer_ids(pid: u32) -> Vec<String> {
    timers(pid).lines().filter(|l| l.starts_with("ID:")).map(str::to_string).collect()
}

/// The flat profile's samples with `name` innermost-inclusive.
fn samples_in(v: &Value, name: &str) -> u64 {
    arr(v, "flat")
        .iter()
        .filter(|r| r["function"].as_str().is_some_and(|f| f.starts_with(name)))
        .map(|r| u(r, "inclusive_samples"))
        .sum()
}

#[test]
fn attach_cpu_samples_the_busy_functions_and_leaves_nothing_armed() {
    let dir = WorkDir::new("attach-cpu");
    need_ptrace!(dir);
    let exe = compile_c(&dir, "attach_busy.c", &["-pthread"]);
    let bare = bare_with_input(&dir, &exe, "one\nlate\nidle\ntwo\n", Duration::from_millis(300));
    assert_eq!(bare.status.code(), Some(5), "bare run\n{}", bare.show());
    assert_eq!(bare.stdout, "attach_busy: lines=4 late=1\n");

    let mut program = Program::start(&dir, &exe, &[], true);
    let pid = program.pid();
    program.child.stdin.as_mut().unwrap().write_all(b"one\n").unwrap();
    std::thread::sleep(Duration::from_millis(400));
    let (fds, threads) = fds_and_threads(pid);
    assert_eq!(threads, 3, "main, the spinner and the sleeper");
    let (disposition, armed) = (sigprof_disposition(pid), timers(pid));
    let trace = dir.join("busy.hltrace");
    let mut attaching = attach_in_background(&dir, pid, &["--cpu", "-o", trace.to_str().unwrap(), "--duration", "3"]);
    wait_attached(pid, &mut attaching);
    std::thread::sleep(Duration::from_millis(600));
    // A thread created while attached.
    program.child.stdin.as_mut().unwrap().write_all(b"late\n").unwrap();
    std::thread::sleep(Duration::from_millis(400));
    // The sleeper (running at the attach) ends while attached: its timer goes within a
    // writer round or two, not at the detach.
    let with_sleeper = timer_ids(pid);
    program.child.stdin.as_mut().unwrap().write_all(b"idle\n").unwrap();
    std::thread::sleep(Duration::from_millis(900));
    if !with_sleeper.is_empty() {
        assert_eq!(timer_ids(pid).len() + 1, with_sleeper.len(), "the ended sleeper's timer is gone");
    }
    let attached = wait_with_timeout(attaching, "heaplens attach --cpu");
    assert!(attached.status.success(), "{}", attached.show());
    assert_eq!(fds_and_threads(pid), (fds, threads), "descriptors as before, the late thread added, the sleeper gone");
    assert_eq!(sigprof_disposition(pid), disposition, "SIGPROF's disposition as before");
    assert_eq!(timers(pid), armed, "no timer left");
    program.child.stdin.as_mut().unwrap().write_all(b"two\n").unwrap();
    drop(program.child.stdin.take());
    let out = program.finish();
    assert_eq!(out.stdout, bare.stdout, "stdout as in a bare run");
    assert_eq!(out.status.code(), Some(5), "exit status as in a bare run\n{}", out.show());

    let v = report_with(&dir, &trace, &["--cpu"]);
    let samples = u(&v, "samples");
    let (early, late) = (samples_in(&v, "spin_early"), samples_in(&v, "spin_late"));
    // About 3 s of the early spinner and 2 s of the late one on two shared processors, at the
    // kernel's 250 ticks a second: hundreds of samples; most of them are the spinners'.
    assert!(samples >= 100, "{samples} samples\n{v:#}");
    assert!(early >= samples / 5, "spin_early has {early} of {samples} samples\n{v:#}");
    assert!(late >= samples / 10, "spin_late has {late} of {samples} samples\n{v:#}");
    assert!(early + late >= samples * 9 / 10, "the spinners have {early} + {late} of {samples} samples\n{v:#}");
    let allocs = report(&dir, &trace);
    assert_eq!(at(&allocs, "process/attached"), &Value::Bool(true));
    assert_eq!(at(&allocs, "trace/complete"), &Value::Bool(true), "the trace is sealed");
    assert!(bin_row(&allocs, 333).is_some_and(|r| u(r, "allocs") == 2), "the late and idle lines' blocks\n{allocs:#}");
}
