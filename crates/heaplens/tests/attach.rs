//! `heaplens attach PID` / `heaplens detach PID` on running programs (`examples/attach_loop.c`):
//! the program's output and exit status stay those of a bare run, the allocations recorded
//! between attach and detach are the program's own count over that window, repeated attaches
//! leave no descriptor or thread behind, forks, sleeps and blocking reads go on as before, and
//! every refusal is one line with the program untouched.
//!
//! The tests need ptrace (gdb attaches to the program): where the machine forbids it, each
//! test says so on stderr and stops there.

mod attaching;
mod common;

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use attaching::*;
use common::*;

/// The program's allocation sizes: 200..=263 bytes in the loop.
const LOOP_SIZES: std::ops::RangeInclusive<u64> = 200..=263;

/// The program's counter lines (stderr): (CLOCK_MONOTONIC ns, allocations so far).
fn counters(stderr: &str) -> Vec<(u64, u64)> {
    stderr
        .lines()
        .filter_map(|l| {
            let t = truth(l, "attach_loop");
            Some((t.get("t")?.parse().ok()?, t.get("allocs")?.parse().ok()?))
        })
        .collect()
}

/// Allocations of the loop's sizes in the trace, and its recording window (CLOCK_MONOTONIC ns).
fn recorded(dir: &WorkDir, trace: &Path) -> (u64, u64, u64) {
    let v = report(dir, trace);
    assert_eq!(at(&v, "process/attached"), &serde_json::Value::Bool(true), "the report says attached");
    assert_eq!(at(&v, "trace/complete"), &serde_json::Value::Bool(true), "the trace is sealed");
    let allocs: u64 = LOOP_SIZES.map(|s| bin_row(&v, s).map_or(0, |r| u(r, "allocs"))).sum();
    let start = heaplens_trace::process_of(trace).expect("Process record").start_mono_ns;
    (allocs, start, start + u(&v, "summary/runtime_ns"))
}

/// Asserts `n` allocations recorded over `[start, end]` are the program's count over that
/// window, to within one of its 100 ms reports on either side.
fn assert_window(n: u64, start: u64, end: u64, counts: &[(u64, u64)]) {
    let before = |t: u64| counts.iter().rev().find(|c| c.0 <= t).map_or(0, |c| c.1);
    let after = |t: u64| counts.iter().find(|c| c.0 >= t).map_or(u64::MAX, |c| c.1);
    let (low, high) = (before(end).saturating_sub(after(start)), after(end).saturating_sub(before(start)));
    assert!(
        low <= n && n <= high,
        "{n} allocations recorded over {} ms, the program counted {low}..={high} in that window",
        (end - start) / 1_000_000
    );
}

#[test]
fn attach_detach_attach_again_records_the_window_and_changes_nothing() {
    let dir = WorkDir::new("attach-window");
    need_ptrace!(dir);
    let exe = loop_program(&dir);
    let (bare, program) = bare_then_started(&dir, &exe, &["loop", "4000000"]);
    assert_eq!(bare.status.code(), Some(7), "bare run\n{}", bare.show());
    let pid = program.pid();
    std::thread::sleep(Duration::from_millis(300));
    let (fds, threads) = fds_and_threads(pid);
    let first = dir.join("first.hltrace");
    attach(&dir, pid, &["-o", first.to_str().unwrap(), "--duration", "2"]).ok("first attach");
    assert_eq!(fds_and_threads(pid), (fds.clone(), threads), "descriptors and threads after the detach");
    std::thread::sleep(Duration::from_millis(300));
    // Again, until the program ends.
    let second = dir.join("second.hltrace");
    let again = attach_in_background(&dir, pid, &["-o", second.to_str().unwrap()]);
    let out = program.finish();
    let again = wait_with_timeout(again, "second attach");
    assert!(again.status.success(), "second attach\n{}", again.show());
    assert!(again.stderr.contains("the process exited"), "{}", again.show());

    assert_eq!(out.stdout, bare.stdout, "stdout as in a bare run");
    assert_eq!(out.status.code(), bare.status.code(), "exit status as in a bare run");
    let counts = counters(&out.stderr);
    assert!(counts.len() > 20, "the program's counter lines\n{}", out.show());
    let (n, start, end) = recorded(&dir, &first);
    assert!(n > 10_000, "{n} allocations recorded in 2 s");
    assert!((1_900_000_000..10_000_000_000).contains(&(end - start)), "recorded for {} ns", end - start);
    assert_window(n, start, end, &counts);
    let (n2, start2, end2) = recorded(&dir, &second);
    assert!(n2 > 0 && start2 > end, "the second trace starts after the first");
    assert_window(n2, start2, end2, &counts);
    // The blocks the threads held when the first attach came were freed unseen, not leaked.
    let v = report(&dir, &first);
    assert!(u(&v, "summary/frees_before_attach") <= 4 * 64, "frees of blocks from before the attach");
    assert_eq!(u(&v, "summary/unmatched_frees"), 0, "which are no unmatched frees");
    let text = heaplens(&dir, &["report", first.to_str().unwrap()]).ok("report");
    assert!(text.stdout.contains("attached to the running process at "), "{}", text.show());
    assert!(text.stdout.contains("frees of blocks allocated before the attach"), "{}", text.show());
}

#[test]
fn attaching_and_detaching_fifty_times_leaves_nothing_behind() {
    let dir = WorkDir::new("attach-fifty");
    need_ptrace!(dir);
    let exe = loop_program(&dir);
    // Runs until killed (about 90 s).
    let program = Program::start(&dir, &exe, &["loop", "40000000"], false);
    let pid = program.pid();
    std::thread::sleep(Duration::from_millis(200));
    let (fds, threads) = fds_and_threads(pid);
    assert_eq!(threads, 5, "main and 4 workers");
    let trace = dir.join("cycle.hltrace");
    let started = Instant::now();
    let mut cycles = 0;
    while cycles < 50 && started.elapsed() < Duration::from_secs(60) {
        attach(&dir, pid, &["-q", "-o", trace.to_str().unwrap(), "--duration", "0.05"]).ok("attach");
        assert_eq!(fds_and_threads(pid), (fds.clone(), threads), "after detach {cycles}");
        assert!(!maps_have_monitor(pid) || trace_open(pid).is_none(), "no trace open after detach {cycles}");
        let v = report(&dir, &trace);
        assert_eq!(at(&v, "trace/complete"), &serde_json::Value::Bool(true), "trace {cycles} sealed");
        assert!(u(&v, "summary/allocations") > 0, "trace {cycles} holds allocations");
        std::fs::remove_file(&trace).unwrap();
        cycles += 1;
    }
    eprintln!("{cycles} attach/detach cycles in {:.1} s", started.elapsed().as_secs_f64());
    assert!(cycles >= 20, "only {cycles} cycles in 60 s");
    // Still running its loop, never crashed: ends by our signal only.
    let mut child = program.child;
    assert!(child.try_wait().unwrap().is_none(), "the program ended during the cycles");
    unsafe { libc::kill(pid as i32, libc::SIGKILL) };
    let status = child.wait().unwrap();
    assert_eq!(std::os::unix::process::ExitStatusExt::signal(&status), Some(libc::SIGKILL));
}

/// Allocations of sizes `sizes` in the trace.
fn allocs_of(dir: &WorkDir, trace: &Path, sizes: std::ops::RangeInclusive<u64>) -> u64 {
    let v = report(dir, trace);
    sizes.map(|s| bin_row(&v, s).map_or(0, |r| u(r, "allocs"))).sum()
}

#[test]
fn forks_sleeps_and_blocking_reads_go_on_as_before() {
    let dir = WorkDir::new("attach-fork-sleep-read");
    need_ptrace!(dir);
    let exe = loop_program(&dir);

    // Forks after the attach: the child runs unrecorded, the parent is recorded to its end.
    let (bare, program) = bare_then_started(&dir, &exe, &["fork", "2000000"]);
    let pid = program.pid();
    let trace = dir.join("fork.hltrace");
    let attached = attach_in_background(&dir, pid, &["-o", trace.to_str().unwrap()]);
    let out = program.finish();
    wait_with_timeout(attached, "attach").ok("attach to the forking program");
    assert_eq!(out.stdout, bare.stdout, "stdout of the forking program");
    assert_eq!(out.status.code(), Some(7));
    assert!(out.stdout.contains("child exited 3"), "{}", out.show());
    // The parent's 100 blocks of 900..999 bytes; the child's went unrecorded.
    assert_eq!(allocs_of(&dir, &trace, 900..=999), 100, "the parent's blocks, not the child's");
    let children: Vec<_> = std::fs::read_dir(&dir.path)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("fork.hltrace."))
        .collect();
    assert!(children.is_empty(), "the child wrote no trace");

    // Asleep when attached.
    let (bare, program) = bare_then_started(&dir, &exe, &["sleep", "2"]);
    let pid = program.pid();
    std::thread::sleep(Duration::from_millis(200));
    let trace = dir.join("sleep.hltrace");
    let attached = attach_in_background(&dir, pid, &["-o", trace.to_str().unwrap()]);
    let out = program.finish();
    wait_with_timeout(attached, "attach").ok("attach to the sleeping program");
    assert_eq!((out.stdout.as_str(), out.status.code()), (bare.stdout.as_str(), Some(5)), "{}", out.show());
    assert_eq!(allocs_of(&dir, &trace, 900..=999), 100, "the blocks made after the sleep");

    // Blocked in read when attached.
    let mut program = Program::start(&dir, &exe, &["read"], true);
    let pid = program.pid();
    std::thread::sleep(Duration::from_millis(200));
    let trace = dir.join("read.hltrace");
    let mut attached = attach_in_background(&dir, pid, &["-o", trace.to_str().unwrap()]);
    wait_attached(pid, &mut attached);
    let mut stdin = program.child.stdin.take().unwrap();
    stdin.write_all(b"typed\n").unwrap();
    drop(stdin);
    let out = program.finish();
    wait_with_timeout(attached, "attach").ok("attach to the reading program");
    assert_eq!(out.stdout, "attach_loop: typed blocks=100 last=typed 99\n", "{}", out.show());
    assert_eq!(out.status.code(), Some(6));
    assert_eq!(allocs_of(&dir, &trace, 900..=999), 100, "the blocks made after the read");
}

/// Asserts a refused attach: one line naming `what`, the program untouched.
fn assert_refused(out: &Out, what: &str, pid: u32) {
    assert_one_line_error(out, what);
    assert!(out.stderr.contains(what), "expected '{what}'\n{}", out.show());
    assert!(!maps_have_monitor(pid), "the monitor was not loaded into {pid}");
}

#[test]
fn refusals_are_one_line_and_leave_the_program_alone() {
    let dir = WorkDir::new("attach-errors");
    need_ptrace!(dir);
    let exe = loop_program(&dir);

    // No such process (one that ended and was reaped).
    let mut gone = Command::new("true").spawn().unwrap();
    let gone_pid = gone.id();
    gone.wait().unwrap();
    let out = attach(&dir, gone_pid, &[]);
    assert_one_line_error(&out, "attach to an ended process");
    assert!(out.stderr.contains(&format!("no process {gone_pid}")), "{}", out.show());
    let out = heaplens(&dir, &["detach", &gone_pid.to_string()]);
    assert_one_line_error(&out, "detach from an ended process");

    // A zombie: exited, its parent has not waited yet.
    let mut zombie = Command::new("true").spawn().unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let out = attach(&dir, zombie.id(), &[]);
    assert_refused(&out, "has exited", zombie.id());
    zombie.wait().unwrap();

    let program = Program::start(&dir, &exe, &["sleep", "8"], false);
    let pid = program.pid();
    std::thread::sleep(Duration::from_millis(100));

    // gdb missing.
    let mut cmd = Command::new(heaplens_exe());
    cmd.args(["attach", &pid.to_string()]).env("PATH", dir.join("empty"));
    let out = run_cmd(cmd, &dir.path);
    assert_refused(&out, "gdb is not installed", pid);

    // Another user's process: ptrace refused.
    let mut cmd = Command::new("setpriv");
    cmd.args(["--reuid=65534", "--regid=65534", "--clear-groups"]).arg(heaplens_exe()).args([
        "attach",
        &pid.to_string(),
        "-o",
        "/tmp/never.hltrace",
    ]);
    let out = run_cmd(cmd, &dir.path);
    assert_refused(&out, "belongs to another user", pid);

    // Already traced by a debugger: ptrace refused.
    let mut gdb = Command::new("gdb")
        .args(["-nx", "-batch", "-q", "-p", &pid.to_string(), "-ex", "shell sleep 3", "-ex", "detach"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap().contains("TracerPid:\t0") {
        assert!(start.elapsed() < Duration::from_secs(30), "gdb did not attach");
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = attach(&dir, pid, &[]);
    assert_refused(&out, "is already traced by process", pid);
    gdb.wait().unwrap();

    // Not attached: nothing to detach.
    let out = heaplens(&dir, &["detach", &pid.to_string()]);
    assert_one_line_error(&out, "detach from a process not attached");
    assert!(out.stderr.contains("is not attached"), "{}", out.show());

    let out = program.finish();
    assert_eq!(out.status.code(), Some(5), "the program went on\n{}", out.show());
    assert!(out.stdout.contains("after-sleep blocks=100"), "{}", out.show());

    // A static binary.
    let static_exe = compile(&dir, "gcc", "attach_loop.c", "attach_loop_static", &["-O2", "-static", "-pthread"]);
    let program = Program::start(&dir, &static_exe, &["sleep", "3"], false);
    std::thread::sleep(Duration::from_millis(100));
    let out = attach(&dir, program.pid(), &[]);
    assert_refused(&out, "is statically linked", program.pid());
    assert_eq!(program.finish().status.code(), Some(5));

    // Already under heaplens run.
    let mut run = Command::new(heaplens_exe());
    run.args(["run", "-q", "-o"]).arg(dir.join("run.hltrace")).arg("--").arg(&exe).args(["sleep", "3"]);
    run.current_dir(&dir.path).stdout(Stdio::null()).stderr(Stdio::null());
    let mut run = run.spawn().unwrap();
    let start = Instant::now();
    let target = loop {
        let children =
            std::fs::read_to_string(format!("/proc/{}/task/{}/children", run.id(), run.id())).unwrap_or_default();
        if let Some(p) = children.split_whitespace().next().and_then(|p| p.parse::<u32>().ok()) {
            break p;
        }
        assert!(start.elapsed() < Duration::from_secs(10), "heaplens run did not start its program");
        std::thread::sleep(Duration::from_millis(20));
    };
    std::thread::sleep(Duration::from_millis(300));
    let out = attach(&dir, target, &[]);
    assert_one_line_error(&out, "attach to a program under heaplens run");
    assert!(out.stderr.contains("already runs under heaplens"), "{}", out.show());
    let out = heaplens(&dir, &["detach", &target.to_string()]);
    assert_one_line_error(&out, "detach from a program under heaplens run");
    assert!(run.wait().unwrap().code() == Some(5), "the program under heaplens run went on");

    // Attached already.
    let program = Program::start(&dir, &exe, &["sleep", "4"], false);
    let pid = program.pid();
    std::thread::sleep(Duration::from_millis(100));
    let trace = dir.join("busy.hltrace");
    let mut attached = attach_in_background(&dir, pid, &["-o", trace.to_str().unwrap()]);
    wait_attached(pid, &mut attached);
    let out = attach(&dir, pid, &["-o", dir.join("other.hltrace").to_str().unwrap()]);
    assert_one_line_error(&out, "attach twice");
    assert!(out.stderr.contains("is already attached"), "{}", out.show());
    heaplens(&dir, &["detach", &pid.to_string()]).ok("detach");
    let attached = wait_with_timeout(attached, "attach");
    assert!(attached.status.success() && attached.stderr.contains("detached"), "{}", attached.show());
    assert_eq!(program.finish().status.code(), Some(5));
}

/// `kill -STOP` / `kill -CONT` on `pid`.
fn signal(pid: u32, sig: &str) {
    assert!(Command::new("kill").args([sig, &pid.to_string()]).status().unwrap().success(), "kill {sig} {pid}");
}

#[test]
fn a_killed_attach_ends_the_recording_it_started() {
    let dir = WorkDir::new("attach-killed");
    need_ptrace!(dir);
    let exe = loop_program(&dir);
    let (bare, program) = bare_then_started(&dir, &exe, &["loop", "2500000"]);
    let pid = program.pid();
    let trace = dir.join("killed.hltrace");
    // Killed (SIGKILL: no handler runs) long before its --duration: the monitor sees its
    // attacher gone and detaches by itself, the trace sealed, the program untouched.
    let mut attached = attach_in_background(&dir, pid, &["-o", trace.to_str().unwrap(), "--duration", "600"]);
    wait_attached(pid, &mut attached);
    std::thread::sleep(Duration::from_millis(300));
    attached.kill().unwrap();
    attached.wait().unwrap();
    let start = Instant::now();
    while trace_open(pid).is_some() {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "process {pid} went on recording after its attach was killed"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let (fds, _) = fds_and_threads(pid);
    assert!(!fds.iter().any(|f| f.contains("hltrace")), "{fds:?}");
    let v = report(&dir, &trace);
    assert_eq!(at(&v, "trace/detached"), &serde_json::Value::Bool(true), "{v:#}");
    assert_eq!(at(&v, "trace/complete"), &serde_json::Value::Bool(true), "{v:#}");
    assert!(u(&v, "summary/allocations") > 0);
    let out = program.finish();
    assert_eq!((out.status.code(), &out.stdout), (bare.status.code(), &bare.stdout), "as a bare run");
}

#[test]
fn live_follows_an_attach_whose_output_replaces_a_file_to_its_end() {
    let dir = WorkDir::new("attach-live-replace");
    need_ptrace!(dir);
    let exe = loop_program(&dir);
    let program = Program::start(&dir, &exe, &["loop", "4000000"], false);
    let pid = program.pid();
    // `-o` names a file that is there: the attach records into a hidden name beside it and
    // moves it over the file when recording ends, while the view follows it by the pid.
    let trace = dir.join("kept.hltrace");
    std::fs::write(&trace, b"an earlier trace").unwrap();
    let mut attached = attach_in_background(&dir, pid, &["-o", trace.to_str().unwrap(), "--duration", "1.5"]);
    wait_attached(pid, &mut attached);
    let live = heaplens(&dir, &["live", &pid.to_string(), "--plain", "--frames", "4"]);
    let live = live.ok("live PID across the attach's end");
    // (The header is cut at the screen's width after a long program path.)
    assert!(live.stdout.contains("attached, recording s"), "recording stopped: {}", live.stdout);
    wait_with_timeout(attached, "attach").ok("attach");
    assert_eq!(at(&report(&dir, &trace), "trace/detached"), &serde_json::Value::Bool(true));
    let _ = program.finish();
}

#[test]
fn a_stopped_process_detaches_when_it_continues_and_its_live_blocks_are_no_leaks() {
    let dir = WorkDir::new("attach-stopped");
    need_ptrace!(dir);
    let exe = loop_program(&dir);

    // A process that has a trace open for reading is not attached: it is attached to.
    let old = dir.join("old.hltrace");
    std::fs::write(&old, b"not recorded by this process").unwrap();
    let mut reader = Command::new("sh")
        .arg("-c")
        .arg(format!("exec 3<'{}'; exec '{}' loop 40000000", old.display(), exe.display()))
        .current_dir(&dir.path)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = reader.id();
    std::thread::sleep(Duration::from_millis(400));
    let out = heaplens(&dir, &["detach", &pid.to_string()]);
    assert_one_line_error(&out, "detach from a process that only reads a trace");
    assert!(out.stderr.contains("is not attached"), "{}", out.show());

    // Stopped when the attach would begin: refused, untouched.
    signal(pid, "-STOP");
    std::thread::sleep(Duration::from_millis(100));
    let out = attach(&dir, pid, &[]);
    assert_refused(&out, "is stopped", pid);
    signal(pid, "-CONT");

    // Stopped when the detach comes: the attach says so, and the process detaches once it
    // continues.
    let trace = dir.join("stopped.hltrace");
    let mut attached = attach_in_background(&dir, pid, &["-o", trace.to_str().unwrap(), "--duration", "1.5"]);
    wait_attached(pid, &mut attached);
    std::thread::sleep(Duration::from_millis(500));
    signal(pid, "-STOP");
    let attached = wait_with_timeout(attached, "attach");
    assert_eq!(attached.status.code(), Some(2), "{}", attached.show());
    assert!(attached.stderr.contains("is stopped"), "{}", attached.show());
    assert!(
        std::fs::read_link(format!("/proc/{pid}/fd/3")).is_ok_and(|t| t == old),
        "the program's own descriptor is there"
    );
    signal(pid, "-CONT");
    let start = Instant::now();
    // The monitor closes the trace, then removes the request it took.
    while trace_open(pid).is_some_and(|t| t == trace) || heaplens_trace::detach_request_path(&trace).exists() {
        assert!(start.elapsed() < Duration::from_secs(10), "the monitor did not detach once the process continued");
        std::thread::sleep(Duration::from_millis(20));
    }

    // What the threads held at the detach is live at the detach, not leaked.
    let v = report(&dir, &trace);
    assert_eq!(at(&v, "trace/detached"), &serde_json::Value::Bool(true), "{v:#}");
    assert!(u(&v, "summary/leaked_objects") > 0, "the threads hold blocks");
    let text = heaplens(&dir, &["report", trace.to_str().unwrap()]).ok("report");
    assert!(text.stdout.contains("BLOCKS LIVE AT DETACH (not leaks"), "{}", text.show());
    assert!(text.stdout.contains("live at detach"), "{}", text.show());
    assert!(!text.stdout.contains("MEMORY LEAK TABLE"), "{}", text.show());
    assert!(text.stdout.contains("(detached; the process went on)"), "{}", text.show());
    assert!(!text.stdout.contains("live at exit"), "nothing was live at an exit: {}", text.show());
    let lives = heaplens(&dir, &["report", trace.to_str().unwrap(), "--lifetimes"]).ok("report --lifetimes");
    assert!(lives.stdout.contains("live at detach (never freed"), "{}", lives.show());
    let check = heaplens(&dir, &["check", trace.to_str().unwrap(), "--no-leaks"]);
    assert_eq!(check.status.code(), Some(2), "{}", check.show());
    assert!(check.stderr.contains("cannot check leaks"), "{}", check.show());

    let _ = reader.kill();
    let _ = reader.wait();
}

#[test]
fn a_program_whose_path_is_not_utf8_is_attached_to() {
    use std::os::unix::ffi::OsStrExt;
    let dir = WorkDir::new("attach-bytes");
    need_ptrace!(dir);
    let exe = loop_program(&dir);
    // Its name (in /proc/PID/status) and its mapped path (in /proc/PID/maps) hold the byte.
    let odd_dir = dir.join(std::ffi::OsStr::from_bytes(b"dir\xffx"));
    std::fs::create_dir(&odd_dir).unwrap();
    let odd = odd_dir.join(std::ffi::OsStr::from_bytes(b"loop\xff"));
    std::fs::copy(&exe, &odd).unwrap();
    let program = Program::start(&dir, &odd, &["sleep", "3"], false);
    std::thread::sleep(Duration::from_millis(400));
    let trace = dir.join("odd.hltrace");
    let out = attach(&dir, program.pid(), &["-o", trace.to_str().unwrap(), "--duration", "0.5"]);
    assert!(out.status.success(), "{}", out.show());
    assert_eq!(program.finish().status.code(), Some(5));
    assert_eq!(at(&report(&dir, &trace), "trace/detached"), &serde_json::Value::Bool(true));
}
