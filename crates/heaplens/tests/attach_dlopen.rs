//! A library loaded while attached is hooked before `dlopen` returns, and the loader still
//! takes the program for `dlopen`'s caller (its RUNPATH finds the library); a program that
//! execs while attached leaves a sealed trace (`examples/attach_dlopen.c`, `plugin.c`).

mod attaching;
mod common;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use attaching::*;
use common::*;
use serde_json::Value;

/// The program, with `libplugin.so` beside it (found through its RUNPATH, `$ORIGIN`).
fn program(dir: &WorkDir) -> PathBuf {
    compile(dir, "gcc", "plugin.c", "libplugin.so", &["-O2", "-g", "-fPIC", "-shared"]);
    compile(dir, "gcc", "attach_dlopen.c", "attach_dlopen", &["-O2", "-g", "-Wl,-rpath,$ORIGIN", "-ldl"])
}

/// Runs the program bare with `args`, its input one line.
fn bare(dir: &WorkDir, exe: &Path, args: &[&str]) -> Out {
    let mut cmd = Command::new(exe);
    cmd.args(args).current_dir(&dir.path).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("start the program");
    child.stdin.take().unwrap().write_all(b"go\n").unwrap();
    wait_with_timeout(child, "the bare run")
}

/// Runs the program with `args` attached from before its `dlopen` until it exits (or execs);
/// returns its output, heaplens attach's, and the trace's report.
fn attached(dir: &WorkDir, exe: &Path, args: &[&str]) -> (Out, Out, Value) {
    let mut program = Program::start(dir, exe, args, true);
    let pid = program.pid();
    std::thread::sleep(std::time::Duration::from_millis(200));
    let trace = dir.join("dlopen.hltrace");
    let mut attaching = attach_in_background(dir, pid, &["-o", trace.to_str().unwrap()]);
    wait_attached(pid, &mut attaching);
    program.child.stdin.take().unwrap().write_all(b"go\n").unwrap();
    let out = program.finish();
    let attach = wait_with_timeout(attaching, "heaplens attach");
    assert!(attach.status.success(), "{}", attach.show());
    (out, attach, report(dir, &trace))
}

/// The 777-byte blocks plugin_alloc made right after the dlopen: all 500, by plugin_alloc.
fn assert_plugin_blocks(v: &Value) {
    let row = bin_row(v, 777).unwrap_or_else(|| panic!("no 777-byte block recorded\n{v:#}"));
    assert_eq!(u(row, "allocs"), 500, "plugin_alloc's blocks\n{v:#}");
    let direct = direct_rows(v, "plugin_alloc");
    assert_eq!(direct.iter().map(|r| u(r, "bytes")).sum::<u64>(), 500 * 777, "by plugin_alloc\n{v:#}");
    assert_eq!(at(v, "trace/complete"), &Value::Bool(true), "the trace is sealed");
}

#[test]
fn a_library_loaded_while_attached_is_recorded_from_its_first_call() {
    let dir = WorkDir::new("attach-dlopen");
    need_ptrace!(dir);
    let exe = program(&dir);
    let bare = bare(&dir, &exe, &[]);
    assert_eq!(bare.stdout, "attach_dlopen: allocs=500 size=777 kept=0\n", "bare run\n{}", bare.show());
    let (out, _, v) = attached(&dir, &exe, &[]);
    assert_eq!(out.stdout, bare.stdout, "stdout as in a bare run (the library found by the RUNPATH)");
    assert_eq!(out.status.code(), bare.status.code(), "exit status as in a bare run");
    assert_plugin_blocks(&v);
}

#[test]
fn a_program_that_execs_while_attached_leaves_a_sealed_trace() {
    let dir = WorkDir::new("attach-exec");
    need_ptrace!(dir);
    let exe = program(&dir);
    let bare = bare(&dir, &exe, &["exec"]);
    assert_eq!(bare.status.code(), Some(6), "bare run\n{}", bare.show());
    let (out, attach, v) = attached(&dir, &exe, &["exec"]);
    assert_eq!(out.stdout, bare.stdout, "stdout as in a bare run");
    assert_eq!(out.status.code(), Some(6), "exit status as in a bare run\n{}", out.show());
    assert!(attach.stderr.contains("exec"), "heaplens attach says the program exec'd\n{}", attach.show());
    assert_plugin_blocks(&v);
    assert_eq!(at(&v, "trace/exec_unfollowed"), &Value::Bool(true), "the End block says exec\n{v:#}");
}
