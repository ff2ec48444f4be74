//! `heaplens run`: start the program with the monitor preloaded, symbolize its stacks on the
//! side as they reach the trace, wait for it, seal the trace with the exit record and the
//! symbols, and end the way the program ended. The trace's path is checked first without
//! changing anything there, and never lands on the program; an existing trace is replaced only
//! by a complete one.

use std::ffi::{OsStr, OsString};
use std::fs::OpenOptions;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use anyhow::{Context, Result};
use heaplens_trace::{naming, BlockKind, BlockWriter, ExitRecord};

use crate::RunArgs;

/// File name of the monitor library.
const PRELOAD: &str = "libheaplens_preload.so";
/// The CPU-only monitor's file name (package heaplens-preload-cpu).
const CPU_PRELOAD: &str = "libheaplens_preload_cpu.so";

/// Finds the monitor: `$HEAPLENS_PRELOAD`, else next to this executable, else in `../lib`.
pub(crate) fn find_preload() -> Result<PathBuf> {
    if let Some(p) = std::env::var_os("HEAPLENS_PRELOAD") {
        return Ok(PathBuf::from(p));
    }
    find_library(PRELOAD).ok_or_else(|| {
        let exe = std::env::current_exe().unwrap_or_default();
        anyhow::anyhow!(
            "cannot find {PRELOAD} next to {} (build the whole workspace: cargo build --release)",
            exe.display()
        )
    })
}

/// The CPU-only monitor (`heaplens run --cpu-only`): the monitor's sources built without the
/// allocation hooks, so the program's `malloc` calls do not pass through it. `$HEAPLENS_PRELOAD`
/// still picks the library; without the CPU-only one, the full monitor does the same job.
fn find_cpu_preload() -> Result<PathBuf> {
    if std::env::var_os("HEAPLENS_PRELOAD").is_none() {
        if let Some(p) = find_library(CPU_PRELOAD) {
            return Ok(p);
        }
    }
    find_preload()
}

/// `name` next to this executable, in `../lib` or in `../lib/heaplens`.
fn find_library(name: &str) -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let dir = exe.parent().unwrap_or(Path::new("."));
    [dir.join(name), dir.join("../lib").join(name), dir.join("../lib/heaplens").join(name)]
        .into_iter()
        .find(|c| c.is_file())
        .map(|c| c.canonicalize().unwrap_or(c))
}

/// The program as `exec` finds it: a name with a slash as it is, else the first executable
/// file of that name in `$PATH`.
fn resolve_program(program: &OsStr) -> Option<PathBuf> {
    if program.as_bytes().contains(&b'/') {
        return Some(PathBuf::from(program));
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|d| d.join(program)).find(|c| {
        std::fs::metadata(c)
            .is_ok_and(|m| m.is_file() && std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o111 != 0)
    })
}

/// Where the trace goes, checked before the program starts without changing what is there:
/// the path the monitor is to write, and the file it is to replace once complete.
pub(crate) struct Destination {
    /// `HEAPLENS_OUTPUT`: `%p` still in it.
    pub(crate) monitor: PathBuf,
    /// An existing trace (or other regular file) the monitor's trace is renamed over at the
    /// end: it stays as it was until then, and if no trace comes.
    pub(crate) replaces: Option<PathBuf>,
}

/// Checks that the trace can be written at `template`, and that it is not the program's own
/// file. Nothing that exists is truncated or removed: a name not taken is created (exclusively)
/// and removed again, a device or FIFO must be writable, and an existing regular file is kept
/// until a new trace written beside it replaces it.
pub(crate) fn destination(template: &Path, program: Option<&Path>) -> Result<Destination> {
    let cannot = || format!("cannot write the trace {}", template.display());
    let dir = template.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    if naming::has_pid(template.as_os_str()) {
        // The name is known once the program runs: creating a file in its directory will do.
        tempfile::Builder::new().prefix(".heaplens-probe-").tempfile_in(dir).with_context(cannot)?;
        return Ok(Destination { monitor: template.to_path_buf(), replaces: None });
    }
    heaplens_output::refuse_inputs(template, program.as_slice()).with_context(cannot)?;
    if heaplens_output::descriptor(template).is_some() {
        // The monitor opens the path in the program, which would truncate what a shell's `>>`
        // opened there, and the program's own output shares the descriptor.
        anyhow::bail!(
            "cannot write the trace to {}: it names an open descriptor (the standard output, /proc/PID/fd/N), which the monitor would reopen and truncate and the program writes to too; give a file name",
            template.display()
        );
    }
    // A link is followed as a shell's `>` follows it: a dangling one names the file to create.
    let real = heaplens_output::link_target(template).with_context(cannot)?;
    let template = real.as_path();
    match std::fs::metadata(template) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            OpenOptions::new().write(true).create_new(true).open(template).with_context(cannot)?;
            // Ours alone: it did not exist a moment ago.
            std::fs::remove_file(template).with_context(cannot)?;
            Ok(Destination { monitor: template.to_path_buf(), replaces: None })
        }
        Err(e) => Err(e).with_context(cannot),
        Ok(m) if m.is_dir() => anyhow::bail!("cannot write the trace {}: it is a directory", template.display()),
        Ok(m) if m.is_file() => {
            // A link's target is what the user means: renaming over the link would make it a
            // file of its own.
            let replaces = std::fs::canonicalize(template).unwrap_or_else(|_| template.to_path_buf());
            let dir = replaces.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(dir);
            // A name beside it nobody can guess, given to the monitor, which creates it anew.
            let staged = tempfile::Builder::new()
                .prefix(".heaplens-")
                .suffix(".hltrace")
                .tempfile_in(dir)
                .with_context(cannot)?
                .into_temp_path();
            let monitor = staged.to_path_buf();
            staged.close().with_context(cannot)?;
            Ok(Destination { monitor, replaces: Some(replaces) })
        }
        Ok(_) => {
            let c = std::ffi::CString::new(template.as_os_str().as_bytes()).with_context(cannot)?;
            // SAFETY: a NUL-terminated path. Opening a FIFO to try would wait for a reader.
            if unsafe { libc::access(c.as_ptr(), libc::W_OK) } != 0 {
                return Err(std::io::Error::last_os_error()).with_context(cannot);
            }
            Ok(Destination { monitor: template.to_path_buf(), replaces: None })
        }
    }
}

/// Runs `heaplens run`; returns the program's exit code, or does not return when the program
/// died by a signal (heaplens then dies by the same signal).
pub fn execute(a: &RunArgs) -> Result<ExitCode> {
    if !a.check && a.budgets != crate::check::BudgetArgs::default() {
        anyhow::bail!("budgets are checked with --check");
    }
    // Malformed budgets, a missing or damaged base, or a recording whose numbers could not
    // answer them are found before the program runs, not after.
    let prepared = match a.check {
        true => Some(crate::check::prepare(&a.budgets, &Default::default())?),
        false => None,
    };
    if a.check && a.sample_rate.is_some() {
        anyhow::bail!("--check needs every allocation: a sampled trace (--sample-rate) holds estimates");
    }
    if a.check && a.aggregate && prepared.as_ref().is_some_and(|p| p.checks_temporaries()) {
        anyhow::bail!("--max-temporary cannot be checked with --aggregate: an aggregated trace records no temporaries");
    }
    let preload = if a.cpu_only { find_cpu_preload()? } else { find_preload()? };
    let program = &a.command[0];
    let shown = Path::new(program).display();
    let name = Path::new(program).file_name().unwrap_or(OsStr::new("program"));
    let cwd = std::env::current_dir().context("cannot read the current directory")?;
    let template = match &a.output {
        // `-` is the standard output, which is the program's: refused as such below.
        Some(o) if o.as_os_str() == "-" => o.clone(),
        Some(o) => cwd.join(o),
        None => {
            let mut n = OsString::from("heaplens.");
            n.push(name);
            n.push(".%p.hltrace");
            cwd.join(n)
        }
    };
    let dest = destination(&template, resolve_program(program).as_deref())?;
    if a.check && std::fs::metadata(&template).is_ok_and(|m| !m.is_file()) {
        anyhow::bail!(
            "--check reads the trace once the run ends: {} is no file it could read back; give -o a file name",
            template.display()
        );
    }

    let mut preload_var = OsString::from(preload.as_os_str());
    if let Some(prev) = std::env::var_os("LD_PRELOAD").filter(|v| !v.is_empty()) {
        preload_var.push(":");
        preload_var.push(prev);
    }
    let mut cmd = Command::new(program);
    cmd.args(&a.command[1..])
        .env("LD_PRELOAD", preload_var)
        .env("HEAPLENS_OUTPUT", &dest.monitor)
        .env("HEAPLENS_MAX_FRAMES", a.max_frames.to_string());
    if a.follow_children {
        cmd.env("HEAPLENS_FOLLOW_CHILDREN", "1");
    }
    if a.aggregate {
        cmd.env("HEAPLENS_AGGREGATE", "1");
    }
    if let Some(rate) = a.sample_rate {
        cmd.env("HEAPLENS_SAMPLE_RATE", rate.to_string());
    }
    if a.cpu.is_some() || a.cpu_only {
        cmd.env("HEAPLENS_CPU_HZ", a.cpu.unwrap_or(999).to_string());
    }
    if a.cpu_only {
        cmd.env("HEAPLENS_CPU_ONLY", "1");
    }
    if a.exact_times {
        cmd.env("HEAPLENS_EXACT_TIMES", "1");
    }
    // heaplens outlives Ctrl-C to seal the trace; the program gets the signal as usual. A
    // signal caught here (rather than ignored) goes back to its default action in the program at
    // exec, so the child needs no code of its own before exec, and std starts it with
    // posix_spawn instead of fork (a fork copies heaplens' page tables: 0.2 ms of the fixed cost
    // that short programs pay under `--cpu-only`). A signal heaplens was started with ignored
    // (a shell's background job has SIGINT and SIGQUIT ignored) stays ignored, for the program
    // too, as it would be bare.
    extern "C" fn outlive(_: libc::c_int) {}
    for sig in [libc::SIGINT, libc::SIGQUIT] {
        // SAFETY: reads the disposition, then installs an empty handler with SA_RESTART (so
        // that the waits go on) unless the signal is ignored.
        unsafe {
            let mut old: libc::sigaction = std::mem::zeroed();
            libc::sigaction(sig, std::ptr::null(), &mut old);
            if old.sa_sigaction != libc::SIG_IGN {
                let mut sa: libc::sigaction = std::mem::zeroed();
                sa.sa_sigaction = outlive as *const () as usize;
                sa.sa_flags = libc::SA_RESTART;
                libc::sigaction(sig, &sa, std::ptr::null_mut());
            }
        }
    }
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        // As a shell, `env` and `timeout` say it: 127 for a program not found, 126 for one
        // that cannot run, so that a script testing for them sees the same under heaplens.
        Err(e) if matches!(e.kind(), std::io::ErrorKind::NotFound | std::io::ErrorKind::PermissionDenied) => {
            eprintln!("heaplens: error: cannot run {shown}: {e}");
            let code = if e.kind() == std::io::ErrorKind::NotFound { 127 } else { 126 };
            return Ok(ExitCode::from(code));
        }
        Err(e) => return Err(e).with_context(|| format!("cannot run {shown}")),
    };
    let child_id = child.id();
    let trace = naming::fill_pid(dest.monitor.as_os_str(), &child.id().to_string());
    // Symbolize on the side as the stacks reach the trace (see `symbolize::embedded`), except
    // when sampling: that mode promises the program under 5% more time, and symbolizing took
    // short multi-threaded programs 7-26% more (bench/compare, churn and widgets); a sampled
    // trace is cheap to symbolize when reported. The same holds for --cpu-only, whose promise is
    // a slowdown under 3%.
    let symbols = (a.sample_rate.is_none() && !a.cpu_only)
        .then(|| heaplens_interpret::symbolize::embedded::OnTheSide::start(&trace, child.id()));
    let status = if a.live {
        live_beside(child, &trace, &a.live_screens)?
    } else {
        child.wait().context("waiting for the program")?
    };
    let exit =
        ExitRecord { code: status.code(), signal: status.signal(), end_mono_ns: heaplens_trace::monotonic_now_ns() };
    let symbols = symbols.and_then(|s| s.finish());

    if a.follow_children && trace.is_file() {
        gather_children(&dest.monitor, &trace, child_id);
    }
    let mut written = None;
    if trace.is_file() {
        // A program that exec'd (followed) ended as the pid's next trace: the status is its.
        let exited = naming::with_suffix(&trace, child_id);
        let exited = if a.follow_children && exited.is_file() { exited } else { trace.clone() };
        let appended = append_exit(&exited, &exit).and_then(|()| match &symbols {
            Some(t) => heaplens_interpret::symbolize::embedded::append(&trace, t).context("cannot append the symbols"),
            None => Ok(()),
        });
        // The trace is complete: it replaces the file that was there.
        let (trace, appended) = match &dest.replaces {
            Some(old) => match std::fs::rename(&trace, old) {
                Ok(()) => {
                    // Children's traces follow the name, so that they sit beside their parent's.
                    let n = trace.file_name().map_or(0, |n| n.len() + 1);
                    for child in naming::child_traces(&trace) {
                        let pids = child.file_name().map(|f| f.to_string_lossy()[n..].to_string()).unwrap_or_default();
                        let _ = std::fs::rename(&child, naming::with_suffix(old, pids));
                    }
                    (old.clone(), appended)
                }
                Err(e) => (trace, appended.and(Err(e).context("cannot rename it over the earlier trace"))),
            },
            None => (trace, appended),
        };
        written = Some(trace.clone());
        match appended {
            Ok(()) if !a.quiet => {
                eprintln!("heaplens: trace written to {}", trace.display());
                let children = naming::child_traces(&trace);
                // A child's trace is named by its pid alone (users and scripts rely on the
                // names): say which program each one is.
                for extra in &children {
                    eprintln!("heaplens: trace of {} written to {}", program_of(extra), extra.display());
                }
                let me = crate::invocation::invoked_as();
                if children.is_empty() {
                    eprintln!("heaplens: see it with: {me} report {}", trace.display());
                } else {
                    eprintln!(
                        "heaplens: see the process tree with: {me} report {} (one process: --process PID)",
                        trace.display()
                    );
                }
            }
            Ok(()) => {}
            Err(e) => {
                eprintln!("heaplens: warning: cannot append the exit status or symbols to {}: {e:#}", trace.display())
            }
        }
    } else if trace.exists() {
        if !a.quiet {
            eprintln!(
                "heaplens: the trace went to {} (not a regular file: heaplens cannot read it back to check it, nor add the exit status or symbols)",
                trace.display()
            );
        }
    } else if !a.quiet {
        eprintln!(
            "heaplens: warning: no trace was written to {} (is {shown} statically linked or setuid? the monitor needs the dynamic loader)",
            trace.display()
        );
    }

    let checked = prepared.map(|p| check_run(written.as_deref(), &p));
    if let Some(sig) = status.signal() {
        // SAFETY: restore the default action and die the way the program did.
        unsafe {
            libc::signal(sig, libc::SIG_DFL);
            libc::raise(sig);
        }
        return Ok(ExitCode::from(128 + sig as u8));
    }
    match status.code() {
        // As `heaplens check`: 1 for a broken budget, 2 when the run could not be checked.
        Some(0) if checked == Some(Checked::Broken) => Ok(ExitCode::from(1)),
        Some(0) if checked == Some(Checked::Unchecked) => Ok(ExitCode::from(2)),
        code => Ok(ExitCode::from(code.unwrap_or(1) as u8)),
    }
}

/// How `--check` ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Checked {
    Hold,
    Broken,
    /// No trace, or one whose numbers cannot answer the budgets.
    Unchecked,
}

/// `--check`: the run's trace against the budgets, the verdicts on stderr.
fn check_run(trace: Option<&Path>, p: &crate::check::Prepared) -> Checked {
    let Some(trace) = trace else {
        eprintln!("heaplens: check: no trace to check");
        return Checked::Unchecked;
    };
    match crate::check::verdicts_of(trace, p) {
        Ok(v) => {
            for line in crate::check::text(&v).lines() {
                eprintln!("heaplens: check: {line}");
            }
            if v.iter().all(|x| x.holds) {
                Checked::Hold
            } else {
                Checked::Broken
            }
        }
        Err(e) => {
            eprintln!("heaplens: check: {}", heaplens_interpret::names::for_terminal(&format!("{e:#}")));
            Checked::Unchecked
        }
    }
}

/// `--live`: the live view of `trace` on the terminal while `child` runs (and after, until the
/// user quits), or with --plain its screens as text on stderr (stdout is the program's);
/// returns how the child ended.
fn live_beside(
    mut child: std::process::Child,
    trace: &Path,
    screens: &crate::LiveScreens,
) -> Result<std::process::ExitStatus> {
    let ended = Arc::new(AtomicBool::new(false));
    let done = ended.clone();
    let waiter = std::thread::spawn(move || {
        let status = child.wait();
        done.store(true, Ordering::Release);
        status
    });
    let options = heaplens_live::Options::default();
    if let Err(e) = crate::live::show(trace, screens, &options, Some(&ended), &mut std::io::stderr().lock()) {
        eprintln!("heaplens: warning: no live view ({e:#}); the program runs on");
    }
    waiter.join().map_err(|_| anyhow::anyhow!("waiting for the program"))?.context("waiting for the program")
}

/// Appends the exit record to a finished trace.
fn append_exit(trace: &Path, exit: &ExitRecord) -> Result<()> {
    let f = OpenOptions::new().append(true).open(trace)?;
    let len = f.metadata()?.len();
    let mut w = BlockWriter::append(f, len);
    w.write_block(BlockKind::Exit, &exit.encode())?;
    Ok(())
}

/// `cc1plus (pid 11919)`: the program whose trace `path` is, from its Process record, escaped
/// for the terminal (a program names itself).
fn program_of(path: &Path) -> String {
    match heaplens_trace::process_of(path) {
        Some(p) => {
            let name = p.exe.file_name().unwrap_or(p.exe.as_os_str()).to_string_lossy().into_owned();
            format!("{} (pid {})", heaplens_interpret::names::for_terminal(&name), p.pid)
        }
        None => "a child process".into(),
    }
}

/// Under `--follow-children` with `%p` in the trace's name, every exec'd process fills in its
/// own pid, and its trace would read as another run of the first program. They are renamed
/// `TRACE.PID` beside the first process's trace, as with a plain name, so that `heaplens
/// report TRACE` finds the tree. Only traces whose parents lead to this run's process move.
fn gather_children(template: &Path, trace: &Path, root: u32) {
    let others: Vec<PathBuf> =
        naming::filled_by_pid(template).into_iter().filter(|(_, pid)| *pid != root).map(|(p, _)| p).collect();
    for path in heaplens_report::tree::descendants(root, others) {
        let Some(pid) = heaplens_trace::process_of(&path).map(|p| p.pid) else { continue };
        let to = naming::with_suffix(trace, pid);
        if !to.exists() {
            let _ = std::fs::rename(&path, &to);
        }
    }
}
