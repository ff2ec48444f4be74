//! The program's exit status passes through `heaplens run`: an exit code, death by a signal,
//! and a SIGKILL in the middle of the run that still leaves a readable trace.

mod common;

use std::io::BufRead;
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::*;
use serde_json::Value;

/// Runs `endings ARGS` bare and traced; checks stdout and status agree; returns the report.
fn ending(name: &str, args: &[&str]) -> (Out, Value, WorkDir) {
    let dir = WorkDir::new(name);
    let exe = compile_c(&dir, "endings.c", &[]);
    let bare = run_bare(&dir, &exe, args);
    let trace = dir.join("endings.hltrace");
    let out = run_traced(&dir, &trace, &exe, args);
    assert_eq!(
        describe(&out.status),
        describe(&bare.status),
        "heaplens run ended differently from the program\n{}",
        out.show()
    );
    let norm = |s: &str| -> Vec<_> { truths(s, "endings").into_iter().map(stable).collect() };
    assert_eq!(norm(&out.stdout), norm(&bare.stdout), "stdout differs\n{}", out.show());
    assert!(!norm(&out.stdout).is_empty(), "the program printed nothing\n{}", out.show());
    assert!(trace.exists(), "no trace written\n{}", out.show());
    let v = report(&dir, &trace);
    (out, v, dir)
}

#[test]
fn exit_code_passes_through() {
    let (out, v, _dir) = ending("exit3", &["exit", "3"]);
    assert_eq!(out.status.code(), Some(3), "{}", out.show());
    assert_eq!(at(&v, "process/exit_code").as_i64(), Some(3), "process/exit_code");
    assert!(at(&v, "process/exit_signal").is_null(), "process/exit_signal");
    // exit() runs the monitor's exit path: everything is recorded.
    assert_eq!(at(&v, "trace/complete"), &Value::Bool(true));
    let b = bin_row(&v, 96).expect("96-byte bin");
    assert_eq!(u(b, "allocs"), 1000);
    assert_eq!(u(b, "frees"), 500);
    assert_consistent(&v);
}

#[test]
fn sigsegv_passes_through() {
    let (out, v, _dir) = ending("segv", &["segv"]);
    assert_eq!(out.status.signal(), Some(libc::SIGSEGV), "{}", out.show());
    assert_eq!(at(&v, "process/exit_signal").as_i64(), Some(libc::SIGSEGV as i64), "process/exit_signal");
    assert!(at(&v, "process/exit_code").is_null(), "process/exit_code");
    assert_consistent(&v);
}

#[test]
fn sigabrt_passes_through() {
    let (out, v, _dir) = ending("abort", &["abort"]);
    assert_eq!(out.status.signal(), Some(libc::SIGABRT), "{}", out.show());
    assert_eq!(at(&v, "process/exit_signal").as_i64(), Some(libc::SIGABRT as i64), "process/exit_signal");
    assert_consistent(&v);
}

#[test]
fn sigkill_mid_run_leaves_a_readable_trace() {
    let v = killed_mid_run("sigkill", &[]);
    let allocs = u(&v, "summary/allocations");
    assert!(allocs <= 200_000, "more allocations than made: {allocs}");
    assert_eq!(u(&v, "summary/allocations") - u(&v, "summary/deallocations"), u(&v, "summary/leaked_objects"));
}

/// While sampling, a single-threaded program has no writer thread: its own thread writes the
/// samples (at once when the last write is 10 ms old), so a program killed while it sleeps
/// still leaves them.
#[test]
fn sigkill_while_sampling_leaves_the_samples_written() {
    let v = killed_mid_run("sigkill-sampled", &["--sample-rate", "4KiB"]);
    assert_eq!(u(&v, "summary/sample_rate"), 4096);
    // Estimates (about 4 700 samples, 1.5% standard error), each rounded on its own.
    let allocs = u(&v, "summary/allocations");
    assert!(allocs <= 220_000, "far more allocations estimated than made: {allocs}");
    let (a, d, l) = (u(&v, "summary/allocations"), u(&v, "summary/deallocations"), u(&v, "summary/leaked_objects"));
    assert!((a - d).abs_diff(l) <= 1, "allocations {a} - deallocations {d} != leaked {l}");
}

/// Whom [`signalled_mid_run`] sends its signal to.
enum Target {
    /// The program alone (by the pid it prints).
    Program,
    /// The process group of `heaplens run` and the program, as a terminal's Ctrl-C does.
    Group,
}

/// Runs `endings wait` (allocates, prints its pid, sleeps) under `heaplens run RUN_ARGS`, in a
/// process group of its own, sends `signal` to `target` once the program has printed, and
/// returns how `heaplens run` ended, the trace and its directory.
fn signalled_mid_run(name: &str, run_args: &[&str], target: Target, signal: i32) -> (Out, PathBuf, WorkDir) {
    use std::os::unix::process::CommandExt;
    let dir = WorkDir::new(name);
    let exe = compile_c(&dir, "endings.c", &[]);
    let trace = dir.join(format!("{name}.hltrace"));
    let mut cmd = Command::new(heaplens_exe());
    cmd.arg("run").args(run_args).arg("-o").arg(&trace).arg("--").arg(&exe).args(["wait", "200000"]);
    cmd.current_dir(&dir.path).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    // A process group of its own, as a shell gives a foreground job.
    cmd.process_group(0);
    no_core_dumps(&mut cmd);
    let mut child = cmd.spawn().expect("start heaplens run");

    // The program prints its pid once it has made its allocations, then sleeps for a minute.
    let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    stdout.read_line(&mut line).expect("read the program's line");
    let t = truths(&line, "endings");
    assert_eq!(t.len(), 1, "unexpected first line {line:?}");
    let pid = num(&t[0], "pid") as libc::pid_t;
    assert_ne!(pid as u32, child.id(), "the pid printed is the program's, not heaplens's");
    // Give the monitor's writer a moment, as any run signalled later than right away would.
    std::thread::sleep(Duration::from_millis(500));
    let to = match target {
        Target::Program => pid,
        Target::Group => -(child.id() as libc::pid_t),
    };
    assert_eq!(unsafe { libc::kill(to, signal) }, 0, "send signal {signal}");
    child.stdout = Some(stdout.into_inner());
    let out = wait_with_timeout(child, "heaplens run (signalled program)");
    assert_no_panic(&out, "heaplens run");
    (out, trace, dir)
}

/// [`signalled_mid_run`] with SIGKILL to the program: checks the trace reads back; returns
/// the report.
fn killed_mid_run(name: &str, run_args: &[&str]) -> Value {
    let (out, trace, dir) = signalled_mid_run(name, run_args, Target::Program, libc::SIGKILL);
    assert_eq!(out.status.signal(), Some(libc::SIGKILL), "heaplens run dies by the program's signal\n{}", out.show());
    assert!(trace.exists(), "no trace after SIGKILL\n{}", out.show());

    let v = report(&dir, &trace);
    assert!(u(&v, "summary/allocations") > 0, "nothing recorded before SIGKILL");
    assert_eq!(at(&v, "trace/complete"), &Value::Bool(false), "a SIGKILLed run cannot be complete");
    assert_eq!(at(&v, "process/exit_signal").as_i64(), Some(9), "process/exit_signal");
    v
}

/// Ctrl-C in a terminal sends SIGINT to the whole foreground process group: the program dies
/// of it as it would bare, and `heaplens run` outlives it to seal the trace, then ends the same
/// way. (heaplens catches SIGINT with a handler, which exec resets to the default in the program.)
#[test]
fn ctrl_c_ends_the_program_and_heaplens_seals_the_trace() {
    let (out, trace, dir) = signalled_mid_run("ctrl-c", &[], Target::Group, libc::SIGINT);
    assert_eq!(out.status.signal(), Some(libc::SIGINT), "heaplens run ends by the program's signal\n{}", out.show());
    let v = report(&dir, &trace);
    assert!(u(&v, "summary/allocations") > 0, "nothing recorded before Ctrl-C\n{}", out.show());
    assert_eq!(at(&v, "process/exit_signal").as_i64(), Some(2), "the program died of SIGINT\n{}", out.show());
    assert_eq!(at(&v, "trace/complete"), &Value::Bool(true), "the monitor sealed the trace\n{}", out.show());
}

/// Ctrl-C typed at a real terminal (a pseudo-terminal under `script`): the kernel sends SIGINT
/// with `si_code` SI_KERNEL, not SI_USER as kill(2) does, and the monitor, which flushes the
/// trace on it, must still let it end the program.
#[test]
fn ctrl_c_typed_at_a_terminal_ends_the_program() {
    use std::io::Write;
    let dir = WorkDir::new("ctrl-c-tty");
    let exe = compile_c(&dir, "endings.c", &[]);
    let trace = dir.join("tty.hltrace");
    let inner =
        format!("'{}' run -q -o '{}' -- '{}' wait 200000", heaplens_exe().display(), trace.display(), exe.display());
    let mut child = Command::new("script")
        .args(["-qfec", &inner, "/dev/null"])
        .current_dir(&dir.path)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start script (util-linux)");
    let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    stdout.read_line(&mut line).expect("read the program's line");
    assert!(line.contains("endings: mode=wait"), "unexpected first line {line:?}");
    std::thread::sleep(Duration::from_millis(300));
    // The terminal's interrupt character; the line discipline turns it into SIGINT for the
    // foreground process group. The pipe stays open until the run ends.
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"\x03").unwrap();
    stdin.flush().unwrap();
    child.stdout = Some(stdout.into_inner());
    let out = wait_with_timeout(child, "script: heaplens run, Ctrl-C");
    drop(stdin);
    // script -e exits with the command's status: 128 + SIGINT when it died of the signal.
    assert_eq!(out.status.code(), Some(128 + libc::SIGINT), "{}", out.show());
    let v = report(&dir, &trace);
    assert_eq!(at(&v, "process/exit_signal").as_i64(), Some(2), "the program died of SIGINT\n{}", out.show());
}

/// The program finds SIGINT and SIGQUIT as it would bare: at their defaults, or ignored when
/// heaplens itself was started with them ignored (a shell's background job).
#[test]
fn the_program_inherits_sigint_and_sigquit_as_bare() {
    use std::os::unix::process::CommandExt;
    let dir = WorkDir::new("signal-dispositions");
    let exe = compile_c(&dir, "endings.c", &[]);
    let trace = dir.join("signals.hltrace");
    for ignored in [false, true] {
        let with = |mut cmd: Command| {
            if ignored {
                // SAFETY: signal() is async-signal-safe.
                unsafe {
                    cmd.pre_exec(|| {
                        libc::signal(libc::SIGINT, libc::SIG_IGN);
                        libc::signal(libc::SIGQUIT, libc::SIG_IGN);
                        Ok(())
                    });
                }
            }
            run_cmd(cmd, &dir.path)
        };
        let mut bare = Command::new(&exe);
        bare.arg("signals");
        let bare = with(bare);
        let mut traced = Command::new(heaplens_exe());
        traced.arg("run").arg("-o").arg(&trace).arg("--").arg(&exe).arg("signals");
        let traced = with(traced);
        assert_no_panic(&traced, "heaplens run");
        let line = |o: &Out| o.stdout.lines().find(|l| l.contains("sigint=")).map(str::to_string);
        let want = if ignored { "endings: sigint=ign sigquit=ign" } else { "endings: sigint=dfl sigquit=dfl" };
        assert_eq!(line(&bare).as_deref(), Some(want), "bare\n{}", bare.show());
        assert_eq!(line(&traced), line(&bare), "ignored={ignored}\n{}", traced.show());
        assert!(traced.status.success(), "{}", traced.show());
    }
}
