//! Attach mode: the monitor loaded into a running process (`heaplens attach PID`).
//!
//! gdb calls `dlopen` on this library inside the process, then [`heaplens_attach`]. Loaded
//! that way the library is in no scope the program's calls resolve in, so its start-up code
//! does nothing ([`preloaded`] is false); `heaplens_attach` sets the monitor up as `heaplens
//! run` would (trace, trie, module map, writer thread), looks the real functions up in the
//! program's global scope, and hooks the allocation entry points of every loaded module by
//! their GOT entries ([`crate::got`]), and `dlopen` itself, so that a library the program loads
//! is hooked before `dlopen` returns ([`dlopen`]); the writer thread also looks for modules
//! loaded otherwise (every 10 ms). The exec family is hooked too, so that a program that execs
//! leaves a sealed trace. With `--cpu`, every thread's CPU time is sampled
//! ([`crate::cpu::attached`]).
//!
//! Detaching ([`tick`], on the writer thread, when `TRACE.detach` appears, or when the
//! `heaplens attach` that started the recording is gone: killed, it can no longer end it at
//! its `--duration` or Ctrl-C, and a production process must not record on forever): the CPU timers
//! stop, the entries are put back, recording stops, the End block is written, the trace closed and the writer thread
//! ends. The library stays loaded (a thread may still be inside a hook); a later
//! `heaplens_attach` (after a second `dlopen`, which only returns the same handle) starts a
//! new trace: each thread starts its state over on its next event (see
//! [`crate::thread::new_generation`]).
//!
//! In a child forked while attached the entries are put back and nothing is recorded.

use std::ffi::{c_char, CStr};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Mutex;

use crate::{cpu, got, modules, output, queue, real, thread, tls};

mod dlopen;
mod targets;

use targets::{global_real, module_base, own_base, real_definition};

pub use heaplens_trace::{ATTACH_BUSY, ATTACH_FAILED, ATTACH_NO_TRACE, ATTACH_OK};

/// Set once `heaplens_attach` ran: this monitor was loaded into a running process.
static ATTACHED: AtomicBool = AtomicBool::new(false);
/// When the writer last looked for a detach request (`CLOCK_MONOTONIC` ns).
static LAST_LOOK: AtomicU64 = AtomicU64::new(0);
/// The process of the `heaplens attach` that started the current recording (0: none to watch).
static WATCHER: AtomicU32 = AtomicU32::new(0);
/// The detach request file of the current trace.
static REQUEST: Mutex<Option<PathBuf>> = Mutex::new(None);

/// How often the writer looks for a detach request, in nanoseconds.
const LOOK_NS: u64 = 50_000_000;

/// Whether this monitor was loaded by `heaplens attach` (attached now or detached since).
#[inline(always)]
pub fn attached() -> bool {
    ATTACHED.load(Ordering::Relaxed)
}

/// Whether the library was loaded at the program's start (`LD_PRELOAD`, as `heaplens run`
/// does, or linked in), rather than by `dlopen` into a running process: `HEAPLENS_OUTPUT` is
/// set, the monitor is part of the program itself, or the program's global scope finds this
/// library's `heaplens_attach` (`dlopen` as `heaplens attach` does, `RTLD_LOCAL`, keeps the
/// library out of it).
pub fn preloaded() -> bool {
    if std::env::var_os("HEAPLENS_OUTPUT").is_some() {
        return true;
    }
    // Built into the program itself (the monitor's unit tests).
    // SAFETY: no preconditions.
    let entry = unsafe { libc::getauxval(libc::AT_ENTRY) } as usize;
    if module_base(entry) == own_base() {
        return true;
    }
    // The program's own handle searches the global scope alone (`RTLD_DEFAULT` from here would
    // also search this library's local scope).
    // SAFETY: a NUL-terminated name; the loader's lock is recursive (this runs at load time).
    unsafe {
        let program = libc::dlopen(std::ptr::null(), libc::RTLD_LAZY);
        !program.is_null() && !libc::dlsym(program, c"heaplens_attach".as_ptr()).is_null()
    }
}

/// Starts recording into the trace at `output` (a NUL-terminated absolute path; `%p` becomes
/// the pid), stacks cut at `max_frames` frames (the first attach's value holds for later
/// ones), and with `cpu_hz` > 0 CPU-time samples of every thread at that rate (samples per
/// CPU second, at most 100 000). Called by gdb inside the process after it loaded this library
/// with `dlopen`. With `watcher` not 0, recording ends (as by a detach request) once process
/// `watcher` (the `heaplens attach` asking, in this process's pid namespace) is gone.
///
/// Returns [`ATTACH_OK`], [`ATTACH_BUSY`] (already recording: attached, or started by
/// `heaplens run`), [`ATTACH_NO_TRACE`] (the trace cannot be created; nothing was hooked) or
/// [`ATTACH_FAILED`]. The process is left as it was on every error.
///
/// # Safety
/// `output` must be a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn heaplens_attach(output: *const c_char, max_frames: u32, cpu_hz: u32, watcher: u32) -> i32 {
    let Some(_g) = tls::Guard::enter() else { return ATTACH_BUSY };
    if output.is_null() {
        return ATTACH_FAILED;
    }
    let path = PathBuf::from(std::ffi::OsStr::from_encoded_bytes_unchecked(CStr::from_ptr(output).to_bytes()));
    std::panic::catch_unwind(|| arm(&path, max_frames, cpu_hz, watcher)).unwrap_or(ATTACH_FAILED)
}

fn arm(output: &std::path::Path, max_frames: u32, cpu_hz: u32, watcher: u32) -> i32 {
    if preloaded() || crate::STATE.load(Ordering::Acquire) != crate::OFF && !attached() {
        return ATTACH_BUSY; // started by `heaplens run`: it records already
    }
    if crate::trace_open() {
        return ATTACH_BUSY;
    }
    static FIRST: std::sync::Once = std::sync::Once::new();
    FIRST.call_once(|| {
        // The start-up code did the rest (the fast path's offset, the heap's reserve).
        real::use_global_scope();
        crate::owner_lock::init();
        thread::init_key();
        output::on_each_round(tick);
        let _ = crate::CONFIG.set(crate::Config {
            output: output.to_path_buf(),
            max_frames: (max_frames as usize).clamp(1, 1 << 16),
            follow_children: false,
            full_unwind: false,
            stats: false,
            check_unwind: false,
        });
        thread::set_cpus(std::thread::available_parallelism().map_or(1, |n| n.get()));
        std::panic::set_hook(Box::new(|info| crate::disable(&format!("internal error ({info})"))));
        // SAFETY: plain function pointers with C ABI.
        unsafe { libc::pthread_atfork(Some(crate::fork_prepare), Some(crate::fork_parent), Some(crate::fork_child)) };
    });
    real::resolve_all();
    real::fix_each(|name, addr| real_definition(CStr::from_bytes_with_nul(name.as_bytes()).unwrap_or(c""), addr));
    dlopen::resolve();
    cpu::request(cpu_hz);
    crate::PID.store(std::process::id(), Ordering::Relaxed);
    crate::UNRECORDED.store(0, Ordering::Relaxed);
    // A new recording: the previous one's leftovers are dropped, every thread starts over.
    thread::new_generation();
    output::forget_pending();
    output::fresh_trie();
    let pid = std::process::id();
    let path = heaplens_trace::naming::fill_pid(output.as_os_str(), &pid.to_string());
    let process = crate::process_record(crate::config().max_frames, true);
    let Ok(path) = output::open(&path, &process) else { return ATTACH_NO_TRACE };
    if let Ok(mut r) = REQUEST.lock() {
        *r = Some(heaplens_trace::detach_request_path(&path));
    }
    WATCHER.store(watcher, Ordering::Relaxed);
    modules::refresh(process.start_mono_ns);
    // Every module, also those a previous recording saw.
    queue::module_changes(&modules::snapshot());
    ATTACHED.store(true, Ordering::Release);
    crate::STATE.store(crate::ON, Ordering::Release);
    if targets::targets(cpu_hz > 0).is_empty() {
        return ATTACH_FAILED;
    }
    // The samplers first: a thread the program creates once `pthread_create` is hooked starts
    // its own, and is then left alone.
    if cpu_hz > 0 && !cpu::attached::start(cpu_hz, global_real(c"sigaction")) {
        crate::disable("cannot sample CPU time (SIGPROF)");
    }
    hook_new_modules();
    output::ensure_writer();
    ATTACH_OK
}

/// Hooks the modules loaded since the last look (cheap when none was: one step of
/// `dl_iterate_phdr`).
fn hook_new_modules() {
    got::patch(targets::targets(cpu::enabled()), own_base());
}

/// The real function `name` for the C stubs of `csrc/lifetime.c` (the exec family): in attach
/// mode the global scope's definition (`RTLD_NEXT` means nothing from a library in no scope of
/// the program's), null when preloaded (they then look it up themselves).
pub fn real_for_c(name: &CStr) -> usize {
    if attached() {
        global_real(name)
    } else {
        0
    }
}

/// The writer thread's round (every 10 ms or sooner) while attached: hooks modules loaded
/// since the last round and, every 50 ms, looks for a detach request. Returns false once it
/// detached (the trace is closed; the writer then ends).
pub fn tick(now: u64) -> bool {
    if !crate::trace_open() {
        return false;
    }
    hook_new_modules();
    if now.saturating_sub(LAST_LOOK.load(Ordering::Relaxed)) < LOOK_NS {
        return true;
    }
    LAST_LOOK.store(now, Ordering::Relaxed);
    let Some(request) = REQUEST.lock().ok().and_then(|r| r.clone()) else { return true };
    if !request.exists() && !watcher_gone() {
        return true;
    }
    detach();
    let _ = std::fs::remove_file(&request);
    false
}

/// Whether the `heaplens attach` that started the recording has ended (it is no longer there
/// to detach at its `--duration` or Ctrl-C: killed, or its terminal closed).
fn watcher_gone() -> bool {
    let pid = WATCHER.load(Ordering::Relaxed);
    if pid == 0 {
        return false;
    }
    // SAFETY: signal 0 only checks the process exists (EPERM: it does, as another user).
    let gone = unsafe { libc::kill(pid as libc::pid_t, 0) } == -1
        && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH);
    // A zombie is gone too (its parent has not reaped it yet).
    gone || std::fs::read(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| s.iter().rposition(|&b| b == b')').and_then(|i| s.get(i + 2).copied()))
        == Some(b'Z')
}

/// Stops the CPU timers, puts the program's entries back, stops recording, writes the last
/// samples and the End block, gives SIGPROF back and closes the trace.
fn detach() {
    let sampling = cpu::enabled();
    let settled = sampling && cpu::attached::stop();
    got::restore();
    if crate::STATE.swap(crate::DONE, Ordering::AcqRel) != crate::DONE {
        output::checkpoint(output::Checkpoint::Detach);
    }
    if sampling {
        cpu::attached::finish(settled);
    }
    output::close();
}

/// In a child forked while attached (its only thread): put the child's entries back, record
/// nothing, drop the child's copy of the trace (the parent goes on writing it) and forget the
/// parent's pending data and other threads.
pub fn stop_in_child() {
    crate::STATE.store(crate::DONE, Ordering::Release);
    got::restore();
    cpu::attached::stop_in_child();
    output::close_in_child(tls::slot().thread as usize);
}
