//! Fatal signals write the trace out before the program dies: a crashing program is the one
//! whose heap a user most wants to see.
//!
//! For each signal whose default action ends the process ([`FATAL`]) the monitor keeps its own
//! handler installed and the program's wish (its `sigaction`) in a table, which the interposed
//! `sigaction` and `signal` read and write, so the program sees exactly what it set. The handler
//! runs the program's own handler if it set one (with the flags and mask it asked for, which the
//! kernel applies since they are installed with ours); only when the program left the default
//! does the monitor write the trace out (events and End block), restore the default and raise
//! the signal again, so the program dies by it as it would have, core dump included. Ignored
//! signals are left to the kernel.
//!
//! While CPU time is sampled (`heaplens run --cpu`) the same table holds the program's SIGPROF:
//! the monitor's timers' signals are samples (the [`Sampler`] it was given), any other SIGPROF (the program's
//! own `setitimer` profiler, a `kill`) goes to the program's handler or default as before.
//!
//! Not covered: `sigset`, `sysv_signal` and `bsd_signal` (rare; the signal then kills without a
//! flush), a SIGSEGV from a stack overflow without an alternate signal stack (the handler cannot
//! run), and SIGKILL (the writer's 10 ms sweep bounds that loss).

use std::cell::UnsafeCell;
use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use crate::{output, tls};

/// Signals whose default action ends the process and that the monitor watches.
pub const FATAL: [c_int; 17] = [
    libc::SIGHUP,
    libc::SIGINT,
    libc::SIGQUIT,
    libc::SIGILL,
    libc::SIGTRAP,
    libc::SIGABRT,
    libc::SIGBUS,
    libc::SIGFPE,
    libc::SIGUSR1,
    libc::SIGSEGV,
    libc::SIGUSR2,
    libc::SIGPIPE,
    libc::SIGALRM,
    libc::SIGTERM,
    libc::SIGXCPU,
    libc::SIGXFSZ,
    libc::SIGSYS,
];

const NSIG: usize = 65;

type SigactionFn = unsafe extern "C" fn(c_int, *const libc::sigaction, *mut libc::sigaction) -> c_int;

/// glibc's `sigaction` (0 until [`install`]).
static REAL: AtomicUsize = AtomicUsize::new(0);
/// Set once [`install`] has run: the table is in use.
static INSTALLED: AtomicBool = AtomicBool::new(false);
/// Bit `sig`: the monitor's handler is installed for `sig` and the table holds the program's.
static MANAGED: AtomicU64 = AtomicU64::new(0);
/// Guards [`PROGRAM`] against concurrent `sigaction` calls (a spin lock: no allocation, and
/// taken only briefly, never inside the handler).
static TABLE_LOCK: AtomicBool = AtomicBool::new(false);

struct Table(UnsafeCell<[libc::sigaction; NSIG]>);
// SAFETY: written under TABLE_LOCK; the handler reads one entry, which a concurrent writer may
// tear only if the program changes a disposition while that very signal is being handled.
unsafe impl Sync for Table {}
// SAFETY: `sigaction` is plain data, for which all zeros is SIG_DFL with no flags.
static PROGRAM: Table = Table(UnsafeCell::new(unsafe { std::mem::zeroed() }));

fn real() -> Option<SigactionFn> {
    let mut p = REAL.load(Ordering::Acquire);
    if p == 0 {
        // Called before start-up (another library's constructor): find it now.
        // SAFETY: a NUL-terminated name.
        p = unsafe { libc::dlsym(libc::RTLD_NEXT, c"sigaction".as_ptr()) } as usize;
        REAL.store(p, Ordering::Release);
    }
    // SAFETY: set from dlsym of "sigaction", whose type this is.
    (p != 0).then(|| unsafe { std::mem::transmute::<usize, SigactionFn>(p) })
}

/// Attach mode: the monitor holds SIGPROF alone (see [`take_over_sigprof_alone`]).
static SIGPROF_ALONE: AtomicBool = AtomicBool::new(false);

/// Signals whose disposition the monitor holds: the fatal ones (not when attached), and
/// SIGPROF while CPU time is sampled.
fn is_watched(sig: c_int) -> bool {
    (FATAL.contains(&sig) && !SIGPROF_ALONE.load(Ordering::Acquire))
        || (sig == libc::SIGPROF && SAMPLER.load(Ordering::Acquire) != 0)
}

fn managed(sig: c_int) -> bool {
    MANAGED.load(Ordering::Acquire) & (1 << sig) != 0
}

fn lock() {
    while TABLE_LOCK.swap(true, Ordering::Acquire) {
        std::hint::spin_loop();
    }
}

fn unlock() {
    TABLE_LOCK.store(false, Ordering::Release);
}

/// Finds glibc's `sigaction` and puts the monitor's handler in front of every fatal signal that
/// is not ignored. Call once at start-up, before recording.
pub fn install() {
    if real().is_none() {
        return;
    }
    lock();
    for sig in FATAL {
        take_over(sig);
    }
    INSTALLED.store(true, Ordering::Release);
    unlock();
}

/// What takes a SIGPROF as a CPU sample: true if it was one (`crate::cpu::on_signal`).
pub type Sampler = unsafe fn(*mut libc::siginfo_t, *mut c_void) -> bool;

/// The [`Sampler`] SIGPROF goes to first (0: none, SIGPROF is the program's alone).
static SAMPLER: AtomicUsize = AtomicUsize::new(0);

/// Puts the monitor's handler in front of SIGPROF, keeping the program's disposition in the
/// table, and hands each SIGPROF to `sampler` first (CPU-time sampling, after [`install`]).
/// False if that failed.
pub fn take_over_sigprof(sampler: Sampler) -> bool {
    if !INSTALLED.load(Ordering::Acquire) {
        return false;
    }
    lock();
    SAMPLER.store(sampler as usize, Ordering::Release);
    let ok = take_over(libc::SIGPROF);
    if !ok {
        SAMPLER.store(0, Ordering::Release);
    }
    unlock();
    ok
}

/// Attach mode (`heaplens attach --cpu`): puts the monitor's handler in front of SIGPROF alone,
/// the program's disposition kept in the table (the program's `sigaction` and `signal` reach
/// the table through hooked GOT slots), with glibc's `sigaction` at `real` (the attach's own
/// lookup). The fatal signals stay the program's. False if that failed.
pub fn take_over_sigprof_alone(sampler: Sampler, real: usize) -> bool {
    if real != 0 {
        REAL.store(real, Ordering::Release);
    }
    if self::real().is_none() {
        return false;
    }
    SIGPROF_ALONE.store(true, Ordering::Release);
    INSTALLED.store(true, Ordering::Release);
    take_over_sigprof(sampler)
}

/// Gives SIGPROF back to the program: its disposition from the table is installed again and
/// the sampler forgotten (attach mode's detach, once no sample is pending).
pub fn release_sigprof() {
    lock();
    if managed(libc::SIGPROF) {
        // SAFETY: the program's own sigaction for SIGPROF, as it set it; glibc's sigaction.
        unsafe {
            let prog = (*PROGRAM.0.get())[libc::SIGPROF as usize];
            real_sigaction(libc::SIGPROF, &prog, std::ptr::null_mut());
        }
        MANAGED.fetch_and(!(1 << libc::SIGPROF), Ordering::AcqRel);
    }
    SAMPLER.store(0, Ordering::Release);
    unlock();
}

/// Takes `sig` over unless the program ignores it (SIGPROF always). Caller holds the lock.
fn take_over(sig: c_int) -> bool {
    // SAFETY: plain data; `real` fills it.
    let mut cur: libc::sigaction = unsafe { std::mem::zeroed() };
    // SAFETY: glibc's sigaction with valid pointers.
    if unsafe { real_sigaction(sig, std::ptr::null(), &mut cur) } != 0 {
        return false;
    }
    if cur.sa_sigaction == libc::SIG_IGN && sig != libc::SIGPROF {
        return false;
    }
    // SAFETY: as above.
    unsafe { set(sig, &cur) == 0 }
}

/// # Safety
/// `act` and `old` are null or valid.
unsafe fn real_sigaction(sig: c_int, act: *const libc::sigaction, old: *mut libc::sigaction) -> c_int {
    match real() {
        Some(f) => f(sig, act, old),
        None => {
            *libc::__errno_location() = libc::ENOSYS;
            -1
        }
    }
}

/// Records the program's `act` for `sig` and installs what makes it happen: the kernel's own
/// ignoring for SIG_IGN, else the monitor's handler with the program's mask and flags.
///
/// # Safety
/// Caller holds the table lock (or is at start-up); `act` is valid.
unsafe fn set(sig: c_int, act: &libc::sigaction) -> c_int {
    // SIGPROF carries the samples: the monitor's handler stays even when the program ignores it.
    let r = if act.sa_sigaction == libc::SIG_IGN && sig != libc::SIGPROF {
        MANAGED.fetch_and(!(1 << sig), Ordering::AcqRel);
        real_sigaction(sig, act, std::ptr::null_mut())
    } else {
        let mut ours = *act;
        ours.sa_sigaction = on_signal as extern "C" fn(c_int, *mut libc::siginfo_t, *mut c_void) as usize;
        // SA_RESETHAND is emulated in the table: the kernel would reset the monitor's handler.
        ours.sa_flags = (act.sa_flags & !libc::SA_RESETHAND) | libc::SA_SIGINFO;
        if sig == libc::SIGPROF {
            // Samples must not make the program's system calls fail with EINTR.
            ours.sa_flags |= libc::SA_RESTART;
        }
        let r = real_sigaction(sig, &ours, std::ptr::null_mut());
        if r == 0 {
            MANAGED.fetch_or(1 << sig, Ordering::AcqRel);
        }
        r
    };
    if r == 0 {
        (*PROGRAM.0.get())[sig as usize] = *act;
    }
    r
}

/// The interposed `sigaction`: the program reads and writes its own view of the fatal signals.
///
/// # Safety
/// As `sigaction(2)`.
#[no_mangle]
pub unsafe extern "C" fn sigaction(sig: c_int, act: *const libc::sigaction, old: *mut libc::sigaction) -> c_int {
    if !INSTALLED.load(Ordering::Acquire) || !is_watched(sig) {
        return real_sigaction(sig, act, old);
    }
    lock();
    let r = if managed(sig) {
        let prev = (*PROGRAM.0.get())[sig as usize];
        let r = if act.is_null() { 0 } else { set(sig, &*act) };
        if r == 0 && !old.is_null() {
            *old = prev;
        }
        r
    } else {
        // Ignored (or never taken over): the kernel holds the program's disposition.
        let mut prev: libc::sigaction = std::mem::zeroed();
        let mut r = real_sigaction(sig, std::ptr::null(), &mut prev);
        if r == 0 && !act.is_null() {
            r = set(sig, &*act);
        }
        if r == 0 && !old.is_null() {
            *old = prev;
        }
        r
    };
    unlock();
    r
}

/// The interposed `signal`: glibc's BSD semantics (restarting system calls, the signal blocked
/// in its handler) on top of [`sigaction`].
///
/// # Safety
/// As `signal(2)`.
#[no_mangle]
pub unsafe extern "C" fn signal(sig: c_int, handler: libc::sighandler_t) -> libc::sighandler_t {
    let mut act: libc::sigaction = std::mem::zeroed();
    act.sa_sigaction = handler;
    act.sa_flags = libc::SA_RESTART;
    libc::sigemptyset(&mut act.sa_mask);
    if sig > 0 && (sig as usize) < NSIG {
        libc::sigaddset(&mut act.sa_mask, sig);
    }
    let mut old: libc::sigaction = std::mem::zeroed();
    if sigaction(sig, &act, &mut old) != 0 {
        return libc::SIG_ERR;
    }
    old.sa_sigaction
}

/// Set once the trace was written out for a fatal signal.
static FLUSHED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(sig: c_int, info: *mut libc::siginfo_t, ctx: *mut c_void) {
    // SAFETY: the kernel's own arguments to this SA_SIGINFO handler.
    let sampler = SAMPLER.load(Ordering::Acquire);
    // SAFETY: set from a `Sampler` in take_over_sigprof; the kernel's own arguments.
    if sig == libc::SIGPROF && sampler != 0 && unsafe { std::mem::transmute::<usize, Sampler>(sampler)(info, ctx) } {
        return;
    }
    // SAFETY: `sig` is one the table covers; the entry is the program's sigaction.
    let prog = unsafe { (*PROGRAM.0.get())[sig as usize] };
    let h = prog.sa_sigaction;
    if h == libc::SIG_IGN {
        return;
    }
    if h != libc::SIG_DFL {
        if prog.sa_flags & libc::SA_RESETHAND != 0 {
            lock();
            // SAFETY: under the lock; a default entry.
            unsafe { (*PROGRAM.0.get())[sig as usize] = std::mem::zeroed() };
            unlock();
        }
        // SAFETY: the program's handler, called as the kernel would have (a one-argument
        // handler ignores the other two registers).
        unsafe {
            let f: extern "C" fn(c_int, *mut libc::siginfo_t, *mut c_void) = std::mem::transmute(h);
            f(sig, info, ctx);
        }
        return;
    }
    flush_before_death();
    // SAFETY: restores the default and lets the signal through; plain system calls.
    unsafe {
        let mut dfl: libc::sigaction = std::mem::zeroed();
        dfl.sa_sigaction = libc::SIG_DFL;
        real_sigaction(sig, &dfl, std::ptr::null_mut());
        MANAGED.fetch_and(!(1 << sig), Ordering::AcqRel);
        // A fault the kernel raised at an instruction (si_code > 0 on a synchronous signal)
        // recurs when the instruction runs again; any other signal is sent again, whether a
        // process sent it (kill, raise, abort: si_code <= 0) or the kernel did for an event
        // (Ctrl-C or Ctrl-\ at a terminal, a hangup, SIGXCPU: SI_KERNEL, above 0).
        let synchronous =
            matches!(sig, libc::SIGSEGV | libc::SIGBUS | libc::SIGFPE | libc::SIGILL | libc::SIGTRAP | libc::SIGSYS);
        let code = if info.is_null() { 0 } else { (*info).si_code };
        // A breakpoint (int3: SIGTRAP, SI_KERNEL) has run: it does not recur.
        let fault = synchronous && code > 0 && !(sig == libc::SIGTRAP && code == libc::SI_KERNEL);
        if !fault {
            libc::raise(sig);
        }
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, sig);
        libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
    }
}

/// Writes the trace out once, unless this thread was inside the monitor when the signal came
/// (its locks may be held: dying without the last events beats hanging) or this is a `vfork`
/// child on its parent's memory.
fn flush_before_death() {
    let slot = tls::slot();
    if slot.guard != 0 || !crate::own_process() || FLUSHED.swap(true, Ordering::AcqRel) {
        return;
    }
    crate::shutdown_with(output::Checkpoint::Signal);
}
