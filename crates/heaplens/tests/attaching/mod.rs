//! Helpers of the tests that attach to running programs (`heaplens attach`): a program started
//! to attach to, whether ptrace is allowed here, attaching in the foreground or background, and
//! what a process holds (descriptors, threads, the monitor's mapping, an open trace).

#![allow(dead_code)]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::*;

/// A program started for a test, its output collected when it ends.
pub struct Program {
    pub child: Child,
}

impl Program {
    pub fn start(dir: &WorkDir, exe: &Path, args: &[&str], stdin: bool) -> Program {
        let mut cmd = Command::new(exe);
        cmd.args(args)
            .current_dir(&dir.path)
            .stdin(if stdin { Stdio::piped() } else { Stdio::null() })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        no_core_dumps(&mut cmd);
        Program { child: cmd.spawn().expect("start the program") }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn finish(self) -> Out {
        wait_with_timeout(self.child, "the program")
    }
}

/// Whether gdb may attach here: `None` when it can, else why not (the tests then say so and
/// stop). gdb itself must be installed (scripts/test installs it).
pub fn ptrace_refused(dir: &WorkDir) -> Option<String> {
    assert!(
        Command::new("gdb").arg("--version").output().is_ok_and(|o| o.status.success()),
        "gdb is not installed (scripts/test installs it: apt-get install gdb)"
    );
    let mut sleeper = Command::new("sleep").arg("10").stdout(Stdio::null()).spawn().expect("sleep");
    let out = Command::new("gdb")
        .args(["-nx", "-batch", "-q", "-p", &sleeper.id().to_string(), "-ex", "detach"])
        .current_dir(&dir.path)
        .output()
        .expect("gdb");
    let _ = sleeper.kill();
    let _ = sleeper.wait();
    let text = String::from_utf8_lossy(&out.stderr);
    text.contains("ptrace:").then(|| text.lines().find(|l| l.contains("ptrace:")).unwrap_or("").to_string())
}

#[macro_export]
macro_rules! need_ptrace {
    ($dir:expr) => {
        if let Some(why) = $crate::attaching::ptrace_refused(&$dir) {
            eprintln!("SKIPPED: gdb cannot attach to processes on this machine ({why})");
            return;
        }
    };
}

/// Runs the program bare to its end, then starts it again to attach to.
pub fn bare_then_started(dir: &WorkDir, exe: &Path, args: &[&str]) -> (Out, Program) {
    (run_bare(dir, exe, args), Program::start(dir, exe, args, false))
}

pub fn loop_program(dir: &WorkDir) -> PathBuf {
    compile_c(dir, "attach_loop.c", &["-pthread"])
}

/// `heaplens attach PID ARGS...`, to its end.
pub fn attach(dir: &WorkDir, pid: u32, args: &[&str]) -> Out {
    let mut a = vec!["attach".to_string(), pid.to_string()];
    a.extend(args.iter().map(|s| s.to_string()));
    let out = heaplens(dir, &a);
    assert_no_panic(&out, "heaplens attach");
    out
}

/// `heaplens attach PID ARGS...` started in the background.
pub fn attach_in_background(dir: &WorkDir, pid: u32, args: &[&str]) -> Child {
    let mut cmd = Command::new(heaplens_exe());
    cmd.arg("attach").arg(pid.to_string()).args(args).current_dir(&dir.path);
    cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    cmd.spawn().expect("start heaplens attach")
}

/// Waits until process `pid` has a heaplens trace open (the attach by `attaching` is done).
pub fn wait_attached(pid: u32, attaching: &mut Child) {
    let start = Instant::now();
    // Attached: the monitor has its trace open and gdb has let the process go (the writer
    // starts just before gdb detaches).
    while trace_open(pid).is_none() || traced(pid) {
        if let Ok(Some(st)) = attaching.try_wait() {
            let mut err = String::new();
            let _ = std::io::Read::read_to_string(attaching.stderr.as_mut().unwrap(), &mut err);
            panic!("heaplens attach ended ({st}) before process {pid} was attached:\n{err}");
        }
        assert!(start.elapsed() < Duration::from_secs(60), "process {pid} was not attached within 60 s");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Whether a debugger (gdb, loading the monitor) traces process `pid`.
fn traced(pid: u32) -> bool {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status.lines().find_map(|l| l.strip_prefix("TracerPid:")).is_some_and(|t| t.trim() != "0")
}

pub fn trace_open(pid: u32) -> Option<PathBuf> {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .ok()?
        .flatten()
        .filter_map(|e| std::fs::read_link(e.path()).ok())
        .find(|t| t.extension().is_some_and(|x| x == "hltrace"))
}

/// The process's open descriptors (their targets) and its threads' count.
pub fn fds_and_threads(pid: u32) -> (BTreeSet<String>, usize) {
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .expect("read fds")
        .flatten()
        .map(|e| format!("{} -> {:?}", e.file_name().to_string_lossy(), std::fs::read_link(e.path()).ok()))
        .collect();
    let threads = std::fs::read_dir(format!("/proc/{pid}/task")).expect("read tasks").count();
    (fds, threads)
}

pub fn maps_have_monitor(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap_or_default().contains("libheaplens_preload")
}
