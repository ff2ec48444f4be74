//! `heaplens attach PID` and `heaplens detach PID`: load the monitor into a running program
//! and record its allocations from then on, then put the program back as it was.
//!
//! gdb (in batch mode) stops the process, calls `dlopen` on the monitor inside it and then the
//! monitor's `heaplens_attach`, which hooks the allocation entry points of every loaded module
//! by their GOT entries, and lets the process go (see the monitor's `attach` module). gdb is
//! gone from then on: the process runs untraced while it is recorded. Detaching needs no
//! debugger: a request file beside the trace (`TRACE.detach`), which the monitor's writer
//! thread looks for every 50 ms; the monitor puts the entries back, seals the trace, closes it,
//! removes the request and its writer thread ends.
//!
//! Everything that can be checked is checked before gdb touches the process, so that each
//! refusal is one clear line and the process is left untouched.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use heaplens_trace::{ATTACH_BUSY, ATTACH_NO_TRACE, ATTACH_OK};

use crate::snapshot::{trace_of, writer_running};
use crate::{AttachArgs, DetachArgs};

/// How long gdb may take to load the monitor (it reads the symbols of every loaded library).
const GDB_LIMIT: Duration = Duration::from_secs(120);
/// How long a detach may take: the monitor looks for the request every 50 ms, then writes out
/// what it holds.
const DETACH_LIMIT: Duration = Duration::from_secs(30);

/// What the checks found out about the process.
struct Target {
    /// Its executable's file name, for messages and the trace's default name.
    name: String,
}

/// A file of `/proc`, its bytes not UTF-8 replaced: a program's name or a mapped path may be
/// any bytes, which must not read as a missing process.
fn proc_text(path: impl AsRef<Path>) -> std::io::Result<String> {
    std::fs::read(path).map(|b| String::from_utf8_lossy(&b).into_owned())
}

/// Refuses, with one line, a process heaplens cannot or must not attach to.
fn check_target(pid: u32) -> Result<Target> {
    let proc = PathBuf::from(format!("/proc/{pid}"));
    let status = match proc_text(proc.join("status")) {
        Ok(s) => s,
        Err(_) => bail!("no process {pid} (has it exited?)"),
    };
    let field = |key: &str| {
        status.lines().find_map(|l| l.strip_prefix(key)).map(|v| v.split_whitespace().next().unwrap_or("").to_string())
    };
    if field("State:").is_some_and(|s| s == "Z" || s == "X") {
        bail!("process {pid} has exited (it is a zombie waiting for its parent)");
    }
    let name = std::fs::read_link(proc.join("exe"))
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .or_else(|| field("Name:"))
        .unwrap_or_else(|| "program".into());
    // A kernel thread has no program (its `exe` link reads as nothing) and no heap.
    if field("Kthread:").is_some_and(|k| k == "1")
        || (std::fs::read_link(proc.join("exe")).is_err() && field("VmSize:").is_none())
    {
        bail!("process {pid} is a kernel thread: it has no heap to record");
    }
    // SAFETY: no preconditions.
    let euid = unsafe { libc::geteuid() };
    if let Some(uid) = field("Uid:").and_then(|u| u.parse::<u32>().ok()) {
        if euid != 0 && uid != euid {
            bail!(
                "process {pid} belongs to another user (uid {uid}): ptrace is refused; attach as that user or as root"
            );
        }
    }
    if let Some(scope) =
        std::fs::read_to_string("/proc/sys/kernel/yama/ptrace_scope").ok().map(|s| s.trim().to_string())
    {
        match scope.as_str() {
            "3" => bail!("ptrace is disabled on this machine (kernel.yama.ptrace_scope=3): heaplens cannot attach"),
            "1" | "2" if euid != 0 => bail!(
                "ptrace is restricted on this machine (kernel.yama.ptrace_scope={scope}): attach as root, or allow it with sysctl kernel.yama.ptrace_scope=0"
            ),
            _ => {}
        }
    }
    match tracer(pid) {
        Some((t, _)) if attach_in_progress(pid) => {
            bail!("another heaplens attach is loading its monitor into process {pid} (gdb, process {t})")
        }
        Some((t, comm)) => {
            bail!("process {pid} is already traced by process {t} ({comm}, a debugger?): ptrace is refused")
        }
        None => {}
    }
    if field("State:").is_some_and(|s| s == "T") {
        bail!("process {pid} is stopped (by a signal, such as Ctrl-Z): continue it first (kill -CONT {pid})");
    }
    let environ = std::fs::read(proc.join("environ"))
        .with_context(|| format!("cannot read the environment of process {pid}: ptrace is refused"))?;
    let under_run = environ.split(|&b| b == 0).any(|v| {
        v.starts_with(b"HEAPLENS_OUTPUT=")
            || (v.starts_with(b"LD_PRELOAD=") && v.windows(19).any(|w| w == b"libheaplens_preload"))
    });
    if under_run {
        bail!("process {pid} already runs under heaplens (heaplens run records it from its start)");
    }
    if trace_of(pid).is_ok() {
        bail!("process {pid} is already attached (heaplens detach {pid} ends that first)");
    }
    let read_maps = || {
        proc_text(proc.join("maps"))
            .with_context(|| format!("cannot read the memory map of process {pid}: ptrace is refused"))
    };
    let has_libc = |maps: &str| maps.lines().any(|l| l.contains("/libc.so.6"));
    let mut maps = read_maps()?;
    // A process that just started may still be in the loader, its libraries not all mapped.
    let start = Instant::now();
    while !has_libc(&maps) && start.elapsed() < Duration::from_secs(2) {
        std::thread::sleep(Duration::from_millis(20));
        maps = read_maps()?;
    }
    if !maps.lines().any(|l| l.contains("/ld-linux") || l.contains("/ld-2.") || l.contains("/ld64")) {
        bail!("process {pid} ({name}) is statically linked: heaplens can only attach to programs that use the dynamic loader");
    }
    // A process that just started may still be in the loader, or in the C library's start-up,
    // where dlopen cannot run: give it a moment.
    if let Some(age) = age(pid) {
        std::thread::sleep(MIN_AGE.saturating_sub(age));
    }
    if !has_libc(&maps) {
        bail!("process {pid} ({name}) does not use the GNU C library: heaplens cannot load its monitor into it");
    }
    Ok(Target { name })
}

/// How long a process must have run before gdb loads the monitor into it.
const MIN_AGE: Duration = Duration::from_millis(300);

/// How long process `pid` has run (from `/proc/PID/stat` and the system's uptime).
fn age(pid: u32) -> Option<Duration> {
    let stat = proc_text(format!("/proc/{pid}/stat")).ok()?;
    // Field 22, counted after the command's closing parenthesis (field 2 may hold spaces).
    let start_ticks: u64 = stat.rsplit_once(')')?.1.split_whitespace().nth(19)?.parse().ok()?;
    // SAFETY: no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    let uptime: f64 = std::fs::read_to_string("/proc/uptime").ok()?.split_whitespace().next()?.parse().ok()?;
    Some(Duration::from_secs_f64((uptime - start_ticks as f64 / hz).max(0.0)))
}

/// gdb, from `$PATH`.
fn find_gdb() -> Result<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path).map(|d| d.join("gdb")).find(|p| p.is_file()).ok_or_else(|| {
        anyhow::anyhow!("gdb is not installed: heaplens attach loads its monitor through gdb (apt-get install gdb)")
    })
}

/// `s` as a C string literal for gdb.
fn gdb_string(s: &Path) -> Result<String> {
    let s = s.to_str().with_context(|| format!("{} is not UTF-8, which gdb cannot pass", s.display()))?;
    if s.chars().any(|c| c.is_control()) {
        bail!("{s:?} holds control characters, which gdb cannot pass");
    }
    Ok(format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\"")))
}

/// Picks the thread gdb runs the monitor's loading on: one with no frame of the allocator or
/// the loader on its stack, preferably stopped in a system call (the instruction before its pc
/// is `syscall`: waiting, outside everything), the main thread first. `dlopen` allocates: a thread stopped inside
/// `malloc` (in the `brk` or `mmap` of `sysmalloc`, say) and made to call it would corrupt the
/// heap or deadlock. Without such a thread, gdb lets the process run 25 ms and looks again, up
/// to 40 times. Sets `$heaplens_safe` to 1 when it found one.
const CHOOSE_THREAD: &str = r#"
import time
import gdb

UNSAFE = ("malloc", "free", "calloc", "realloc", "memalign", "valloc", "alloc_", "_int_", "arena",
          "tcache", "brk", "morecore", "chunk", "_dl_", "dl_open", "dlopen", "dlclose", "_Znw", "_Zna",
          "_Zdl", "_Zda", "operator new", "operator delete", "heaplens")

def safe(thread, inferior, in_syscall):
    thread.switch()
    try:
        pc = int(gdb.parse_and_eval("$pc"))
        if in_syscall and bytes(inferior.read_memory(pc - 2, 2)) != b"\x0f\x05":
            return False
        frame = gdb.newest_frame()
        for _ in range(256):
            if frame is None:
                return True
            if any(u in (frame.name() or "") for u in UNSAFE):
                return False
            frame = frame.older()
    except gdb.error:
        return False
    return False

inferior = gdb.selected_inferior()
pid = inferior.pid
for attempt in range(40):
    threads = sorted(inferior.threads(), key=lambda t: t.num)
    chosen = next((t for t in threads if safe(t, inferior, True)), None)
    if chosen is None:
        chosen = next((t for t in threads if safe(t, inferior, False)), None)
    if chosen is not None:
        chosen.switch()
        gdb.set_convenience_variable("heaplens_safe", 1)
        break
    gdb.execute("detach", to_string=True)
    time.sleep(0.025)
    gdb.execute("attach %d" % pid, to_string=True)
    inferior = gdb.selected_inferior()
"#;

/// Loads the monitor into process `pid` and starts it writing `trace` (`max_frames` deep,
/// with CPU samples at `cpu_hz` per CPU second when not 0): gdb calls `dlopen`, then
/// `heaplens_attach`.
fn inject(pid: u32, library: &Path, trace: &Path, max_frames: u32, cpu_hz: u32) -> Result<()> {
    let gdb = find_gdb()?;
    // The monitor ends the recording itself if this process goes (killed, it could not detach
    // at `--duration` or Ctrl-C); a pid means something there only in the same pid namespace.
    let ns = |p: &str| std::fs::read_link(format!("/proc/{p}/ns/pid")).ok();
    let watcher = if ns("self").is_some() && ns("self") == ns(&pid.to_string()) { std::process::id() } else { 0 };
    let script = tempfile::Builder::new().prefix("heaplens-attach-").suffix(".gdb").tempfile()?;
    let commands = format!(
        "set confirm off\nset pagination off\nset debuginfod enabled off\n\
         if $heaplens_safe == 1\n\
         print (void *) dlopen({lib}, 2)\n\
         if $1 != 0\n  print ((int (*)(char *, unsigned, unsigned, unsigned)) dlsym($1, \"heaplens_attach\"))({out}, {max_frames}, {cpu_hz}, {watcher})\n\
         else\n  print (char *) dlerror()\nend\n\
         else\n  echo heaplens: no safe point\\n\nend\ndetach\nquit\n",
        lib = gdb_string(library)?,
        out = gdb_string(trace)?,
    );
    std::fs::write(script.path(), commands)?;
    let choose = tempfile::Builder::new().prefix("heaplens-attach-").suffix(".py").tempfile()?;
    std::fs::write(choose.path(), CHOOSE_THREAD)?;
    let child = Command::new(&gdb)
        // Only the C library's symbols (for dlopen): reading every library's takes twice as long.
        .args(["-nx", "-batch", "-q", "-iex", "set auto-solib-add off", "-p", &pid.to_string()])
        .args(["-ex", "sharedlibrary libc\\.so", "-x"])
        // A script of its own: without Python in gdb it fails alone, and gdb goes on.
        .arg(choose.path())
        .arg("-x")
        .arg(script.path())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Out of the terminal's process group: a Ctrl-C must not interrupt gdb in the middle
        // of its call into the program (heaplens detaches right after instead).
        .process_group(0)
        .spawn()
        .with_context(|| format!("cannot run {}", gdb.display()))?;
    let out = wait_output(child, GDB_LIMIT)
        .with_context(|| format!("gdb did not finish within {} s", GDB_LIMIT.as_secs()))?;
    let text = format!("{}\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    let value = |n: u32| {
        let key = format!("${n} = ");
        text.lines().find_map(|l| l.strip_prefix(&key).map(str::to_string))
    };
    if text.contains("ptrace: Operation not permitted") {
        // Another tracer got there first: another heaplens attach, or a debugger.
        if tracer(pid).is_some() {
            bail!("process {pid} is being traced by another program (another heaplens attach, or a debugger): try again when it is done");
        }
        bail!("ptrace is refused for process {pid} (another user's process, a debugger attached, or kernel.yama.ptrace_scope)");
    }
    if text.contains("heaplens: no safe point") {
        bail!("process {pid} was inside its allocator or loader at every look for a second: not attached, try again");
    }
    // A process gone while gdb was at it leaves whatever gdb was printing then.
    if text.contains("ptrace: No such process") || (text.contains("exited") || !alive(pid)) && value(2).is_none() {
        bail!("process {pid} exited before heaplens could attach");
    }
    let Some(handle) = value(1) else {
        let why = text.lines().find(|l| !l.trim().is_empty() && !l.starts_with('[')).unwrap_or("no answer").trim();
        bail!("gdb could not load the monitor into process {pid}: {why}");
    };
    let answer = value(2).unwrap_or_default();
    if handle.ends_with(" 0x0") {
        if answer.contains("cannot open shared object file") {
            bail!(
                "process {pid} could not load the monitor: {} is not there as the process sees its files (in a container or a chroot, the library must be at the same path inside it)",
                library.display()
            );
        }
        bail!("process {pid} could not load the monitor: {answer}");
    }
    match answer.trim().parse::<i32>() {
        Ok(ATTACH_OK) => Ok(()),
        Ok(ATTACH_BUSY) => bail!("process {pid} is already recorded by heaplens"),
        Ok(ATTACH_NO_TRACE) => bail!(
            "process {pid} cannot create its trace {} (can its user write there?); it was left as it was",
            trace.display()
        ),
        _ => bail!("the monitor could not start in process {pid} ({answer}); it was left as it was"),
    }
}

/// Waits for `child` at most `limit`, killing it after that.
fn wait_output(mut child: std::process::Child, limit: Duration) -> Result<std::process::Output> {
    let start = Instant::now();
    loop {
        if child.try_wait()?.is_some() {
            return Ok(child.wait_with_output()?);
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            bail!("timed out");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn alive(pid: u32) -> bool {
    state(pid).is_some_and(|s| s != "Z" && s != "X")
}

/// Whether a `heaplens attach` is loading the monitor into `pid` now: its tracer is a gdb
/// started by heaplens.
fn attach_in_progress(pid: u32) -> bool {
    let Some((t, comm)) = tracer(pid) else { return false };
    let parent = proc_text(format!("/proc/{t}/stat"))
        .ok()
        .and_then(|s| s.rsplit_once(')').and_then(|(_, rest)| rest.split_whitespace().nth(1)?.parse::<u32>().ok()));
    let parent_comm = parent.and_then(|p| proc_text(format!("/proc/{p}/comm")).ok()).unwrap_or_default();
    comm == "gdb" && parent_comm.starts_with("heaplens")
}

/// Whether a `heaplens attach PID` of `pid` runs (by the command lines in /proc), though it
/// may not have started gdb yet.
fn attacher_running(pid: u32) -> bool {
    let want = pid.to_string();
    let Ok(procs) = std::fs::read_dir("/proc") else { return false };
    procs.flatten().any(|p| {
        let Ok(cmdline) = std::fs::read(p.path().join("cmdline")) else { return false };
        let argv: Vec<&[u8]> = cmdline.split(|&b| b == 0).collect();
        let heaplens =
            argv.first().and_then(|a| a.rsplit(|&b| b == b'/').next()).is_some_and(|n| n.starts_with(b"heaplens"));
        heaplens && argv.get(1) == Some(&&b"attach"[..]) && argv.contains(&want.as_bytes())
    })
}

/// The process tracing `pid` (its `TracerPid`) and its command name.
fn tracer(pid: u32) -> Option<(u32, String)> {
    let status = proc_text(format!("/proc/{pid}/status")).ok()?;
    let t: u32 = status.lines().find_map(|l| l.strip_prefix("TracerPid:"))?.trim().parse().ok()?;
    (t != 0).then(|| (t, proc_text(format!("/proc/{t}/comm")).unwrap_or_default().trim_end().to_string()))
}

/// Whether process `pid` is stopped (by a signal, or a debugger).
fn stopped(pid: u32) -> bool {
    state(pid).is_some_and(|s| s == "T" || s == "t")
}

/// The state letter of process `pid` (`R`, `S`, `T`, `Z`, ...).
fn state(pid: u32) -> Option<String> {
    let status = proc_text(format!("/proc/{pid}/status")).ok()?;
    status.lines().find_map(|l| l.strip_prefix("State:")).and_then(|v| v.split_whitespace().next()).map(str::to_string)
}

/// How long a process may stay stopped while a detach waits for it.
const STOPPED_LIMIT: Duration = Duration::from_secs(2);

/// Asks the monitor writing `trace` in process `pid` to detach, and waits until it has: its
/// writer thread gone, which it ends after putting the entries back and sealing the trace.
/// (Not until the request file is gone: the monitor runs as the program's user, who may not
/// remove a file root made in a sticky directory such as /tmp.)
///
/// # Errors
/// When the request cannot be made, or the process does not detach in time. The request then
/// stays in place, so that a process that was stopped detaches as soon as it continues.
fn request_detach(pid: u32, trace: &Path) -> Result<()> {
    let request = heaplens_trace::detach_request_path(trace);
    heaplens_output::create_request(&request).with_context(|| format!("cannot create {}", request.display()))?;
    let start = Instant::now();
    let mut stopped_since: Option<Instant> = None;
    while alive(pid) && writer_running(pid) {
        stopped_since = if stopped(pid) { stopped_since.or(Some(Instant::now())) } else { None };
        if stopped_since.is_some_and(|t| t.elapsed() > STOPPED_LIMIT) {
            bail!(
                "process {pid} is stopped (kill -CONT {pid} continues it): it goes on recording until it continues, then detaches ({} stays until then)",
                request.display()
            );
        }
        if start.elapsed() > DETACH_LIMIT {
            bail!(
                "process {pid} did not detach within {} s: it goes on recording; it detaches once its monitor sees {}",
                DETACH_LIMIT.as_secs(),
                request.display()
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let _ = std::fs::remove_file(&request);
    Ok(())
}

/// Set by SIGINT or SIGTERM while attached.
static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_stop(_: libc::c_int) {
    STOP.store(true, Ordering::Relaxed);
}

/// The trace's default name: `heaplens.NAME.PID.hltrace`, then `heaplens.NAME.PID.2.hltrace`
/// and so on for later attaches.
fn default_trace(cwd: &Path, name: &str, pid: u32) -> PathBuf {
    (1..)
        .map(|n| {
            let n = if n == 1 { String::new() } else { format!(".{n}") };
            cwd.join(format!("heaplens.{name}.{pid}{n}.hltrace"))
        })
        .find(|p| !p.exists())
        .unwrap_or_default()
}

/// Runs `heaplens attach`: attaches, waits for `--duration`, Ctrl-C, a `heaplens detach` or
/// the end of the process, and detaches.
pub fn execute_attach(a: &AttachArgs) -> Result<ExitCode> {
    let pid = a.pid;
    let target = check_target(pid)?;
    find_gdb()?;
    let library = crate::run::find_preload()?;
    let cwd = std::env::current_dir().context("cannot read the current directory")?;
    let template = match &a.output {
        Some(o) if o.as_os_str() == "-" => o.clone(),
        Some(o) => cwd.join(o),
        None => default_trace(&cwd, &target.name, pid),
    };
    let exe = std::fs::read_link(format!("/proc/{pid}/exe")).ok();
    let dest = crate::run::destination(&template, exe.as_deref())?;
    // Neither a name with %p (the monitor fills it in) nor the staged name may exist.
    let trace = heaplens_trace::naming::fill_pid(dest.monitor.as_os_str(), &pid.to_string());
    // A request left by an earlier detach that timed out would end this recording at once.
    let _ = std::fs::remove_file(heaplens_trace::detach_request_path(&trace));
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: installs a handler that only stores to an atomic.
        unsafe { libc::signal(sig, on_stop as *const () as libc::sighandler_t) };
    }
    inject(pid, &library, &dest.monitor, a.max_frames, a.cpu.unwrap_or(0))?;
    if !a.quiet {
        eprintln!("heaplens: attached to process {pid} ({}); recording to {}", target.name, trace.display());
        if let Some(old) = &dest.replaces {
            // The existing file stays as it was until the new trace is whole (`heaplens live`
            // follows the new one by the name above).
            eprintln!("heaplens: the trace replaces {} once recording ends", old.display());
        }
        eprintln!("heaplens: detach with Ctrl-C or: {} detach {pid}", crate::invocation::invoked_as());
    }
    let symbols = heaplens_interpret::symbolize::embedded::OnTheSide::start(&trace, pid);
    let start = Instant::now();
    let request = heaplens_trace::detach_request_path(&trace);
    let how = loop {
        if STOP.load(Ordering::Relaxed) || a.duration.is_some_and(|d| start.elapsed() >= d) {
            request_detach(pid, &trace)?;
            break "detached";
        }
        if !alive(pid) {
            break "the process exited";
        }
        // Detached by `heaplens detach` (the trace is no longer open in the process).
        if !request.exists() && trace_of(pid).is_err() && !writer_running(pid) {
            break "detached";
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    // A program that execs while attached sealed the trace first (its End block says so).
    let how = if how == "detached" && exec_sealed(&trace) { "the process exec'd another program" } else { how };
    if let Some(t) = &symbols.finish() {
        if let Err(e) = heaplens_interpret::symbolize::embedded::append(&trace, t) {
            eprintln!("heaplens: warning: cannot append the symbols to {}: {e:#}", trace.display());
        }
    }
    let shown = match &dest.replaces {
        Some(old) => {
            std::fs::rename(&trace, old).context("cannot rename the trace over the earlier one")?;
            old.clone()
        }
        None => trace,
    };
    if !a.quiet {
        eprintln!("heaplens: {how}: trace written to {}", shown.display());
        eprintln!("heaplens: see it with: {} report {}", crate::invocation::invoked_as(), shown.display());
    }
    Ok(ExitCode::SUCCESS)
}

/// Whether the last End block of `trace` was written before an exec.
fn exec_sealed(trace: &Path) -> bool {
    use heaplens_trace::BlockKind;
    let Ok(mut reader) = heaplens_trace::TraceReader::open(trace) else { return false };
    let mut exec = false;
    while let Ok(Some((kind, payload))) = reader.next_block_of(|k| k == BlockKind::End) {
        if kind == BlockKind::End {
            exec = heaplens_trace::record::EndRecord::decode(&payload).is_ok_and(|e| e.exec_unfollowed);
        }
    }
    exec
}

/// Runs `heaplens detach`.
pub fn execute_detach(a: &DetachArgs) -> Result<()> {
    let pid = a.pid;
    if !alive(pid) {
        bail!("no process {pid} (has it exited?)");
    }
    let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
    if environ.split(|&b| b == 0).any(|v| v.starts_with(b"HEAPLENS_OUTPUT=")) {
        bail!("process {pid} runs under heaplens run, which records it until it exits");
    }
    // A detach asked for while an attach loads the monitor waits for it to finish.
    let start = Instant::now();
    while attach_in_progress(pid) && start.elapsed() < GDB_LIMIT {
        std::thread::sleep(Duration::from_millis(20));
    }
    // The monitor starts its writer just before gdb lets the process go; a `heaplens attach`
    // of this process that has not started gdb yet is waited for too.
    let trace = loop {
        match trace_of(pid) {
            Ok(t) => break t,
            Err(_) if start.elapsed() < Duration::from_millis(500) => std::thread::sleep(Duration::from_millis(20)),
            Err(_) if start.elapsed() < GDB_LIMIT && attacher_running(pid) => {
                std::thread::sleep(Duration::from_millis(20))
            }
            Err(_) => bail!("process {pid} is not attached (its monitor has no trace open)"),
        }
    };
    request_detach(pid, &trace)?;
    // An attach told to replace an earlier trace writes beside it, and renames when done.
    let hidden = trace.file_name().is_some_and(|n| n.as_encoded_bytes().starts_with(b".heaplens-"));
    if hidden {
        eprintln!("heaplens: detached from process {pid}; `heaplens attach` puts the trace where its -o said");
    } else {
        eprintln!("heaplens: detached from process {pid}; trace written to {}", trace.display());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn gdb_strings_are_quoted() {
        let q = super::gdb_string(std::path::Path::new("/tmp/a \"b\"\\c")).unwrap();
        assert_eq!(q, r#""/tmp/a \"b\"\\c""#);
        assert!(super::gdb_string(std::path::Path::new("/tmp/a\nb")).is_err());
    }
}
