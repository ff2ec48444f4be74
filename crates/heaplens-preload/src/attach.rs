//! Attach mode: the monitor loaded into a running process (`heaplens attach PID`).
//!
//! gdb calls `dlopen` on this library inside the process, then [`heaplens_attach`]. Loaded
//! that way the library is in no scope the program's calls resolve in, so its start-up code
//! does nothing ([`preloaded`] is false); `heaplens_attach` sets the monitor up as `heaplens
//! run` would (trace, trie, module map, writer thread), looks the real functions up in the
//! program's global scope, and hooks the allocation entry points of every loaded module by
//! their GOT entries ([`crate::got`]). The writer thread hooks modules loaded later as it sees
//! them (every 10 ms: a `dlopen` wrapper would make the loader take the wrapper for the caller,
//! and resolve the program's library names by the monitor's own search path).
//!
//! Detaching ([`tick`], on the writer thread, when `TRACE.detach` appears): the entries are put
//! back, recording stops, the End block is written, the trace closed and the writer thread
//! ends. The library stays loaded (a thread may still be inside a hook); a later
//! `heaplens_attach` (after a second `dlopen`, which only returns the same handle) starts a
//! new trace: each thread starts its state over on its next event (see
//! [`crate::thread::new_generation`]).
//!
//! In a child forked while attached the entries are put back and nothing is recorded.

use std::ffi::{c_char, CStr};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

use crate::{got, intern, modules, output, queue, real, resolve, thread, tls};

/// [`heaplens_attach`]: recording started.
pub const ATTACH_OK: i32 = 0;
/// [`heaplens_attach`]: this monitor is recording already (attached, or preloaded).
pub const ATTACH_BUSY: i32 = 1;
/// [`heaplens_attach`]: the trace cannot be created at the path given.
pub const ATTACH_NO_TRACE: i32 = 2;
/// [`heaplens_attach`]: an internal error; nothing was hooked.
pub const ATTACH_FAILED: i32 = 3;

/// Set once `heaplens_attach` ran: this monitor was loaded into a running process.
static ATTACHED: AtomicBool = AtomicBool::new(false);
/// When the writer last looked for a detach request (`CLOCK_MONOTONIC` ns).
static LAST_LOOK: AtomicU64 = AtomicU64::new(0);
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

/// The entry points hooked in every module.
const HOOKED: &[&CStr] = &[
    c"malloc",
    c"calloc",
    c"realloc",
    c"reallocarray",
    c"free",
    c"memalign",
    c"posix_memalign",
    c"aligned_alloc",
    c"valloc",
    c"pvalloc",
    c"_Znwm",
    c"_Znam",
    c"_ZnwmRKSt9nothrow_t",
    c"_ZnamRKSt9nothrow_t",
    c"_ZnwmSt11align_val_t",
    c"_ZnamSt11align_val_t",
    c"_ZnwmSt11align_val_tRKSt9nothrow_t",
    c"_ZnamSt11align_val_tRKSt9nothrow_t",
    c"_ZdlPv",
    c"_ZdaPv",
    c"_ZdlPvm",
    c"_ZdaPvm",
    c"_ZdlPvSt11align_val_t",
    c"_ZdaPvSt11align_val_t",
    c"_ZdlPvmSt11align_val_t",
    c"_ZdaPvmSt11align_val_t",
    c"_ZdlPvRKSt9nothrow_t",
    c"_ZdaPvRKSt9nothrow_t",
    c"_ZdlPvSt11align_val_tRKSt9nothrow_t",
    c"_ZdaPvSt11align_val_tRKSt9nothrow_t",
    c"_exit",
    c"_Exit",
];

/// The entry points hooked in every module, with this library's definitions of them (see
/// [`crate::hooks`]). They are looked up in this library's own handle: the library's code
/// reaches its exported names through its GOT like any module, where the loader put the
/// global scope's definitions (glibc's).
fn targets() -> &'static [got::Target] {
    static T: OnceLock<Vec<got::Target>> = OnceLock::new();
    T.get_or_init(|| {
        let Some(me) = crate::own_path().and_then(|p| std::ffi::CString::new(p).ok()) else { return Vec::new() };
        // SAFETY: a NUL-terminated path; RTLD_NOLOAD only finds this library, already loaded
        // (the extra reference is never dropped: the library stays loaded anyway).
        let handle = unsafe { libc::dlopen(me.as_ptr(), libc::RTLD_NOW | libc::RTLD_NOLOAD) };
        if handle.is_null() {
            return Vec::new();
        }
        HOOKED
            .iter()
            // SAFETY: a handle from dlopen and NUL-terminated names.
            .map(|&n| (n, unsafe { libc::dlsym(handle, n.as_ptr()) } as usize))
            .filter(|&(_, hook)| hook != 0)
            .collect()
    })
}

/// `addr`, found for the real `name` (NUL-terminated) in the global scope, if a function
/// starts there outside this library; else the C library's own `name`, else 0. A non-PIE
/// program that takes a function's address exports its PLT entry under the function's name,
/// and the global lookup finds that: a jump through the program's GOT slot, which the hooks
/// now hold (every call would loop into them).
fn real_definition(name: &'static str, addr: usize) -> usize {
    let own = own_base();
    let starts_function = |a: usize| {
        if a == 0 || module_base(a) == own {
            return false;
        }
        // SAFETY: `dladdr` only reads the loader's tables and fills `info`; a symbol starts at
        // `a`, so its first bytes are mapped code.
        unsafe {
            let mut info: libc::Dl_info = std::mem::zeroed();
            libc::dladdr(a as *const libc::c_void, &mut info) != 0
                && info.dli_saddr as usize == a
                && !jumps_through_memory(a as *const u8)
        }
    };
    if starts_function(addr) {
        return addr;
    }
    // SAFETY: RTLD_NOLOAD only finds the C library, loaded already; NUL-terminated names.
    let libc_own = unsafe {
        let libc = libc::dlopen(c"libc.so.6".as_ptr(), libc::RTLD_NOW | libc::RTLD_NOLOAD);
        if libc.is_null() {
            0
        } else {
            libc::dlsym(libc, name.as_ptr().cast()) as usize
        }
    };
    if starts_function(libc_own) {
        libc_own
    } else {
        0
    }
}

/// Whether the code at `p` is a PLT entry: `jmp *slot(%rip)` (`ff 25`), after an `endbr64`
/// and a `bnd` prefix if present. (The loader's `dladdr` names an undefined symbol by its
/// canonical PLT entry.)
///
/// # Safety
/// `p` points to at least 7 bytes of mapped code.
unsafe fn jumps_through_memory(p: *const u8) -> bool {
    let mut at = p;
    if std::slice::from_raw_parts(at, 4) == [0xf3, 0x0f, 0x1e, 0xfa] {
        at = at.add(4);
    }
    if *at == 0xf2 {
        at = at.add(1);
    }
    std::slice::from_raw_parts(at, 2) == [0xff, 0x25]
}

/// This library's load address (its own GOT entries are never rewritten).
fn own_base() -> usize {
    module_base(own_base as *const () as usize)
}

/// The load address of the module holding `addr`, 0 when none does.
fn module_base(addr: usize) -> usize {
    // SAFETY: `dladdr` only reads the loader's tables and fills `info`.
    unsafe {
        let mut info: libc::Dl_info = std::mem::zeroed();
        if libc::dladdr(addr as *const libc::c_void, &mut info) == 0 {
            return 0;
        }
        info.dli_fbase as usize
    }
}

/// Starts recording into the trace at `output` (a NUL-terminated absolute path; `%p` becomes
/// the pid), stacks cut at `max_frames` frames (the first attach's value holds for later
/// ones). Called by gdb inside the process after it loaded this library with `dlopen`.
///
/// Returns [`ATTACH_OK`], [`ATTACH_BUSY`] (already recording: attached, or started by
/// `heaplens run`), [`ATTACH_NO_TRACE`] (the trace cannot be created; nothing was hooked) or
/// [`ATTACH_FAILED`]. The process is left as it was on every error.
///
/// # Safety
/// `output` must be a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn heaplens_attach(output: *const c_char, max_frames: u32) -> i32 {
    let Some(_g) = tls::Guard::enter() else { return ATTACH_BUSY };
    if output.is_null() {
        return ATTACH_FAILED;
    }
    let path = PathBuf::from(std::ffi::OsStr::from_encoded_bytes_unchecked(CStr::from_ptr(output).to_bytes()));
    std::panic::catch_unwind(|| arm(&path, max_frames)).unwrap_or(ATTACH_FAILED)
}

fn arm(output: &std::path::Path, max_frames: u32) -> i32 {
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
    real::fix_each(real_definition);
    crate::PID.store(std::process::id(), Ordering::Relaxed);
    crate::UNRECORDED.store(0, Ordering::Relaxed);
    // A new recording: the previous one's leftovers are dropped, every thread starts over.
    thread::new_generation();
    queue::QUEUE.lock().map(|mut q| q.clear()).ok();
    queue::EXTRA.lock().map(|mut e| e.clear()).ok();
    if let Ok(mut t) = intern::TRIE.lock() {
        *t = Some(intern::Trie::new());
        if let Ok(mut m) = resolve::MIRRORS.lock() {
            *m = None;
        }
    }
    let pid = std::process::id();
    let path = heaplens_trace::naming::fill_pid(output.as_os_str(), &pid.to_string());
    let process = crate::process_record(crate::config().max_frames, true);
    let Ok(path) = output::open(&path, &process) else { return ATTACH_NO_TRACE };
    if let Ok(mut r) = REQUEST.lock() {
        *r = Some(heaplens_trace::detach_request_path(&path));
    }
    modules::refresh(process.start_mono_ns);
    // Every module, also those a previous recording saw.
    queue::module_changes(&modules::snapshot());
    ATTACHED.store(true, Ordering::Release);
    crate::STATE.store(crate::ON, Ordering::Release);
    if targets().is_empty() {
        return ATTACH_FAILED;
    }
    got::patch(targets(), own_base());
    output::ensure_writer();
    ATTACH_OK
}

/// The writer thread's round (every 10 ms or sooner) while attached: hooks modules loaded
/// since the last round and, every 50 ms, looks for a detach request. Returns false once it
/// detached (the trace is closed; the writer then ends).
pub fn tick(now: u64) -> bool {
    if !crate::trace_open() {
        return false;
    }
    got::patch(targets(), own_base());
    if now.saturating_sub(LAST_LOOK.load(Ordering::Relaxed)) < LOOK_NS {
        return true;
    }
    LAST_LOOK.store(now, Ordering::Relaxed);
    let Some(request) = REQUEST.lock().ok().and_then(|r| r.clone()) else { return true };
    if !request.exists() {
        return true;
    }
    detach();
    let _ = std::fs::remove_file(&request);
    false
}

/// Puts the program's entries back, stops recording, writes the End block and closes the
/// trace.
fn detach() {
    got::restore();
    if crate::STATE.swap(crate::DONE, Ordering::AcqRel) == crate::DONE {
        return;
    }
    output::checkpoint(output::Checkpoint::Exit);
    output::close();
}

/// In a child forked while attached (its only thread): put the child's entries back, record
/// nothing, drop the child's copy of the trace (the parent goes on writing it) and forget the
/// parent's pending data and other threads.
pub fn stop_in_child() {
    crate::STATE.store(crate::DONE, Ordering::Release);
    got::restore();
    output::close_in_child(tls::slot().thread as usize);
}
