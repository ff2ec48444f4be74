//! The heaplens monitor, `libheaplens_preload.so`.
//!
//! The same sources also build `libheaplens_preload_cpu.so` (package `heaplens-preload-cpu`,
//! feature `cpu_monitor`): the monitor without one exported allocation entry point, which
//! `heaplens run --cpu-only` loads so that the program's allocation calls never pass through it.
//!
//! Loaded into the target with `LD_PRELOAD` by `heaplens run`, it interposes every allocation
//! entry point of the C library and the C++ runtime ([`hooks`]), captures each allocation's call
//! stack ([`unwind`]), interns it ([`intern`]), appends a compact event to a per-thread buffer
//! ([`thread`]) and lets a writer thread frame the buffers into the trace ([`output`]).
//!
//! Rules it keeps: the program's behaviour never changes (no panic crosses into the program; on
//! an internal failure the monitor turns itself into a pass-through and says so once on
//! stderr), the monitor never records itself (a thread-local guard), and the hot path takes no
//! lock but its own thread's uncontended spin lock.
//!
//! Configuration comes from the environment `heaplens run` sets:
//! `HEAPLENS_OUTPUT` (trace path; `%p` becomes the pid), `HEAPLENS_MAX_FRAMES` (stack depth
//! cap, default 1024), `HEAPLENS_FOLLOW_CHILDREN=1` (keep `LD_PRELOAD` for exec'd programs),
//! `HEAPLENS_FULL_UNWIND=1` (unwind every stack to the root, for checking the incremental walk),
//! `HEAPLENS_CHECK_UNWIND=1` (unwind every stack both ways in the same run and count the
//! differences), `HEAPLENS_STATS=1` (print capture counters at exit), `HEAPLENS_SAMPLE_RATE=BYTES` (sample
//! allocations, see [`sampling`]), `HEAPLENS_AGGREGATE=1` (keep counters instead of events, see
//! [`aggregate`]), `HEAPLENS_INTERN=thread|writer` (who interns stacks, see [`resolve`]; by
//! default the writer while it has a processor to itself), `HEAPLENS_COLUMNS=0|1` (whether the
//! writer encodes events as columns, see [`heaplens_trace::columns`]; by default while the
//! recording threads do not outnumber the processors).

pub mod activity;
pub mod aggregate;
#[cfg(not(feature = "cpu_monitor"))]
pub mod attach;
pub mod cpu;
pub mod crash;
#[cfg_attr(feature = "cpu_monitor", allow(unused_macros, unused_imports))]
pub mod fastpath;
#[cfg(not(feature = "cpu_monitor"))]
pub mod got;
pub mod heap;
pub mod heap_stats;
// In the CPU-only monitor the allocation hooks are built but not exported (see `hooks::entry!`).
#[cfg_attr(feature = "cpu_monitor", allow(dead_code, unused_imports, unused_macros))]
pub mod hooks;
pub mod intern;
pub mod lifetime;
pub mod modules;
pub mod output;
pub mod owner_lock;
pub mod pools;
pub mod procinfo;
pub mod queue;
pub mod real;
pub mod record;
pub mod resolve;
pub mod sampling;
pub mod solo;
pub mod stats;
pub mod sysalloc;
pub mod thread;
pub mod tls;
pub mod trace_file;
pub mod unwind;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::sync::OnceLock;

use heaplens_trace::ProcessRecord;

#[global_allocator]
static ALLOC: heap::MonitorHeap = heap::MonitorHeap;

/// Settings read once at start-up.
#[derive(Debug, Clone)]
pub struct Config {
    /// Where the trace goes.
    pub output: PathBuf,
    /// Deepest stack recorded, in frames.
    pub max_frames: usize,
    /// Whether exec'd programs are profiled too.
    pub follow_children: bool,
    /// Unwind every stack completely instead of stopping where it meets the previous one
    /// (`HEAPLENS_FULL_UNWIND=1`; slower, for checking the incremental walk).
    pub full_unwind: bool,
    /// Print capture counters at exit (`HEAPLENS_STATS=1`).
    pub stats: bool,
    /// Unwind every stack a second time, whole, and count the captures whose stacks differ
    /// (`HEAPLENS_CHECK_UNWIND=1`, printed with the stats; for testing the incremental walk
    /// on programs whose allocations vary from run to run).
    pub check_unwind: bool,
}

static CONFIG: OnceLock<Config> = OnceLock::new();

/// The settings (defaults before start-up).
pub fn config() -> &'static Config {
    CONFIG.get_or_init(|| Config {
        output: PathBuf::new(),
        max_frames: 1024,
        follow_children: false,
        full_unwind: false,
        stats: false,
        check_unwind: false,
    })
}

const OFF: u8 = 0;
const ON: u8 = 1;
/// Not recording any more (out of memory, an internal error), but the trace is still open: what
/// was recorded is written out at exit, with the count of calls that went unrecorded.
const STOPPED: u8 = 2;
const DONE: u8 = 3;
static STATE: AtomicU8 = AtomicU8::new(OFF);

/// Allocation calls that passed through unrecorded after recording stopped.
static UNRECORDED: AtomicU64 = AtomicU64::new(0);

/// The process whose trace this monitor writes (updated in a forked child). In a `vfork` child,
/// which shares the parent's memory, `getpid()` differs: the monitor then touches nothing.
static PID: AtomicU32 = AtomicU32::new(0);

/// True while events are being recorded.
#[inline(always)]
pub fn active() -> bool {
    STATE.load(Ordering::Relaxed) == ON
}

/// `--cpu-only`: CPU samples are recorded, allocations are not.
static CPU_ONLY: AtomicBool = AtomicBool::new(false);

/// Whether only CPU samples are recorded (`--cpu-only`).
pub fn cpu_only() -> bool {
    CPU_ONLY.load(Ordering::Relaxed)
}

/// True while allocation calls are being recorded.
#[inline(always)]
pub fn allocations_active() -> bool {
    active() && !CPU_ONLY.load(Ordering::Relaxed)
}

/// Counts a call that went unrecorded because recording stopped early (not after a clean
/// shutdown, when late destructors are expected to pass through).
#[cold]
pub fn note_unrecorded() {
    if STATE.load(Ordering::Relaxed) == STOPPED {
        UNRECORDED.fetch_add(1, Ordering::Relaxed);
    }
}

/// Calls that went unrecorded since recording stopped early.
pub fn unrecorded() -> u64 {
    UNRECORDED.load(Ordering::Relaxed)
}

/// Whether the trace is still open: recording, or stopped early with its data still to write.
pub fn trace_open() -> bool {
    matches!(STATE.load(Ordering::Relaxed), ON | STOPPED)
}

/// True in the process the monitor started in (or a forked child after its fork handler), false
/// in a `vfork` child running on the parent's memory.
pub fn own_process() -> bool {
    // SAFETY: no preconditions.
    PID.load(Ordering::Relaxed) == unsafe { libc::getpid() } as u32
}

/// Stops recording (the program goes on untouched) and says why, once. What was recorded is
/// still written at exit, marked with the number of calls that went unrecorded.
pub fn disable(why: &str) {
    if STATE.compare_exchange(ON, STOPPED, Ordering::AcqRel, Ordering::Acquire).is_ok() {
        eprintln!("heaplens: {why}; recording stopped, the program continues");
    }
}

/// Stops recording for good without writing anything more (the trace cannot be written).
pub fn abandon(why: &str) {
    static SAID: AtomicBool = AtomicBool::new(false);
    STATE.store(DONE, Ordering::Release);
    // Also while the final write-out runs (state already DONE): say it once.
    if !SAID.swap(true, Ordering::AcqRel) {
        eprintln!("heaplens: {why}; recording stopped, the program continues");
    }
}

#[used]
#[link_section = ".init_array"]
static INIT: extern "C" fn() = init;

#[used]
#[link_section = ".fini_array"]
static FINI: extern "C" fn() = fini;

extern "C" fn init() {
    let Some(_g) = tls::Guard::enter() else { return };
    let r = std::panic::catch_unwind(|| {
        std::panic::set_hook(Box::new(|info| {
            disable(&format!("internal error ({info})"));
        }));
        start();
    });
    if r.is_err() {
        disable("internal error during start-up");
    }
}

fn start() {
    tls::init_fast_path();
    heap::set_reserve_aside();
    PID.store(std::process::id(), Ordering::Relaxed);
    procinfo::note_main_stack();
    // Loaded by `heaplens attach` (dlopen into a running process): nothing more until
    // `heaplens_attach` is called (see [`attach`]); `RTLD_NEXT` means nothing from there.
    #[cfg(not(feature = "cpu_monitor"))]
    if !attach::preloaded() {
        return;
    }
    real::resolve_all();
    let Some(out) = std::env::var_os("HEAPLENS_OUTPUT") else { return };
    let pid = std::process::id();
    let output = heaplens_trace::naming::fill_pid(&out, &pid.to_string());
    let max_frames =
        std::env::var("HEAPLENS_MAX_FRAMES").ok().and_then(|v| v.parse().ok()).unwrap_or(1024usize).clamp(1, 1 << 16);
    let follow_children = std::env::var_os("HEAPLENS_FOLLOW_CHILDREN").is_some_and(|v| v == "1");
    let full_unwind = std::env::var_os("HEAPLENS_FULL_UNWIND").is_some_and(|v| v == "1");
    let stats = std::env::var_os("HEAPLENS_STATS").is_some_and(|v| v == "1");
    let check_unwind = std::env::var_os("HEAPLENS_CHECK_UNWIND").is_some_and(|v| v == "1");
    if std::env::var_os("HEAPLENS_AGGREGATE").is_some_and(|v| v == "1") {
        aggregate::enable();
    }
    // Aggregated counters promise exact peak and leaks, which a sample cannot give: aggregate
    // mode records every call and the sample rate is dropped (the CLI refuses the pair).
    if !aggregate::enabled() {
        sampling::set_rate(std::env::var("HEAPLENS_SAMPLE_RATE").ok().and_then(|v| v.parse().ok()).unwrap_or(0));
    }
    // CPU-time samples (`--cpu`, `--cpu-only`).
    let cpu_hz = std::env::var("HEAPLENS_CPU_HZ").ok().and_then(|v| v.parse().ok()).unwrap_or(0u32);
    cpu::request(cpu_hz);
    CPU_ONLY.store(cpu_hz > 0 && std::env::var_os("HEAPLENS_CPU_ONLY").is_some_and(|v| v == "1"), Ordering::Relaxed);
    let _ =
        CONFIG.set(Config { output: output.clone(), max_frames, follow_children, full_unwind, stats, check_unwind });
    if !follow_children {
        forget_preload();
    }
    let process = process_record(max_frames, false);
    if let Err(e) = output::open(&output, &process) {
        eprintln!("heaplens: cannot create the trace {}: {e}; the program runs without recording", output.display());
        STATE.store(DONE, Ordering::Release);
        return;
    }
    if let Ok(mut t) = intern::TRIE.lock() {
        *t = Some(intern::Trie::new());
    }
    let changes = modules::refresh(process.start_mono_ns);
    queue::module_changes(&changes);
    thread::init_key();
    owner_lock::init();
    // Who interns stacks: `HEAPLENS_INTERN=thread` or `writer` forces one (for tests and tuning).
    thread::set_cpus(match std::env::var("HEAPLENS_INTERN").as_deref() {
        Ok("thread") => 0,
        Ok("writer") => usize::MAX,
        _ => std::thread::available_parallelism().map_or(1, |n| n.get()),
    });
    solo::set_exact(std::env::var("HEAPLENS_EXACT_TIMES").as_deref() == Ok("1"));
    output::set_columns(match std::env::var("HEAPLENS_COLUMNS").as_deref() {
        Ok("0") => Some(false),
        Ok("1") => Some(true),
        _ => None,
    });
    // SAFETY: plain function pointers with C ABI.
    unsafe { libc::pthread_atfork(Some(fork_prepare), Some(fork_parent), Some(fork_child)) };
    STATE.store(ON, Ordering::Release);
    crash::install();
    fastpath::arm();
    // CPU-time samples: the timers start last, once all is set up.
    // SIGPROF first goes to the sampler (wired here: the signal table and the sampler know
    // nothing of each other).
    if cpu_hz > 0 && crash::take_over_sigprof(cpu::on_signal) {
        cpu::start(cpu_hz);
    }
    if output::writer_needed() || cpu::enabled() {
        output::ensure_writer();
    }
}

fn process_record(max_frames: usize, attached: bool) -> ProcessRecord {
    ProcessRecord {
        pid: std::process::id(),
        // SAFETY: no preconditions.
        ppid: unsafe { libc::getppid() } as u32,
        start_unix_ns: procinfo::unix_ns(),
        start_mono_ns: procinfo::now_ns(),
        exe: procinfo::exe_path(),
        argv: procinfo::argv(),
        max_frames: max_frames as u32,
        time_source: procinfo::choose_time_source(),
        sample_rate: sampling::rate(),
        cpu_hz: cpu::requested_hz(),
        cpu_only: CPU_ONLY.load(Ordering::Relaxed),
        attached,
    }
}

/// Removes this library from `LD_PRELOAD` (and our settings from the environment), so programs
/// the target execs run unprofiled, as they would without heaplens.
///
/// This library is recognized by its name or by the path it was loaded from (a copy under
/// another name). The variable is rewritten only when that removes something: `setenv`
/// allocates from the program's heap, and a monitor that allocates there moves the program's
/// blocks (see `real.rs`).
fn forget_preload() {
    if let Some(v) = std::env::var_os("LD_PRELOAD") {
        let v = v.to_string_lossy().into_owned();
        let me = own_path();
        let entries: Vec<&str> = v.split([':', ' ']).filter(|s| !s.is_empty()).collect();
        let rest: Vec<&str> = entries
            .iter()
            .copied()
            .filter(|s| !s.contains("libheaplens_preload") && Some(*s) != me.as_deref())
            .collect();
        if rest.is_empty() {
            std::env::remove_var("LD_PRELOAD");
        } else if rest.len() < entries.len() {
            std::env::set_var("LD_PRELOAD", rest.join(":"));
        }
    }
    for k in [
        "HEAPLENS_OUTPUT",
        "HEAPLENS_MAX_FRAMES",
        "HEAPLENS_FOLLOW_CHILDREN",
        "HEAPLENS_FULL_UNWIND",
        "HEAPLENS_STATS",
        "HEAPLENS_CHECK_UNWIND",
        "HEAPLENS_CPU_HZ",
        "HEAPLENS_CPU_ONLY",
    ] {
        std::env::remove_var(k);
    }
}

/// The path this library was loaded from, as the loader has it (`dladdr` allocates nothing).
fn own_path() -> Option<String> {
    // SAFETY: `dladdr` fills `info` for an address inside this library; `dli_fname` is then a
    // NUL-terminated string owned by the loader.
    unsafe {
        let mut info: libc::Dl_info = std::mem::zeroed();
        if libc::dladdr(own_path as *const libc::c_void, &mut info) == 0 || info.dli_fname.is_null() {
            return None;
        }
        Some(std::ffi::CStr::from_ptr(info.dli_fname).to_string_lossy().into_owned())
    }
}

extern "C" fn fini() {
    shutdown();
}

/// Writes out everything recorded and the End block; later events pass through unrecorded.
pub fn shutdown() {
    shutdown_with(output::Checkpoint::Exit);
}

/// [`shutdown`], for the reason given (a fatal signal skips what may not run in its handler).
pub fn shutdown_with(why: output::Checkpoint) {
    if !own_process() {
        return; // a vfork child: the trace and every buffer are the parent's
    }
    let slot = tls::slot();
    let saved = slot.guard;
    slot.guard = 1;
    let was = STATE.swap(DONE, Ordering::AcqRel);
    if was == ON || was == STOPPED {
        let _ = std::panic::catch_unwind(|| output::checkpoint(why));
    }
    slot.guard = saved;
}

static mut FORK_LOCKS: Option<output::ForkLocks> = None;

extern "C" fn fork_prepare() {
    if !trace_open() {
        return;
    }
    tls::slot().guard += 1;
    // This thread's recent events belong to the parent: hand them over before the fork.
    if let Some(st) = thread::current() {
        st.flush();
    }
    // SAFETY: fork handlers run on the forking thread only.
    unsafe { FORK_LOCKS = output::lock_for_fork() };
    // Last: nothing allocates from here until the fork is done.
    heap::lock_for_fork();
    HEAP_LOCKED.store(true, Ordering::Relaxed);
}

/// Whether `fork_prepare` holds the monitor's heap lock.
static HEAP_LOCKED: AtomicBool = AtomicBool::new(false);

/// Releases the heap lock `fork_prepare` took (parent and child alike), first of all.
fn unlock_heap_after_fork() {
    if HEAP_LOCKED.swap(false, Ordering::Relaxed) {
        heap::unlock_after_fork();
    }
}

extern "C" fn fork_parent() {
    unlock_heap_after_fork();
    // SAFETY: as in fork_prepare.
    let held = unsafe { (*std::ptr::addr_of_mut!(FORK_LOCKS)).take() };
    if held.is_some() || trace_open() {
        drop(held);
        tls::slot().guard -= 1;
    }
}

extern "C" fn fork_child() {
    unlock_heap_after_fork();
    // SAFETY: as in fork_prepare.
    let held = unsafe { (*std::ptr::addr_of_mut!(FORK_LOCKS)).take() };
    if held.is_none() && !trace_open() {
        return;
    }
    drop(held);
    PID.store(std::process::id(), Ordering::Relaxed);
    #[cfg(not(feature = "cpu_monitor"))]
    if attach::attached() {
        // An attached monitor leaves the child alone: the child runs unhooked, untraced.
        attach::stop_in_child();
        tls::slot().guard -= 1;
        return;
    }
    let r = std::panic::catch_unwind(|| {
        owner_lock::init();
        let me = thread::current().map(|s| {
            s.reset_after_fork();
            s as *mut thread::ThreadState as usize
        });
        aggregate::reset_after_fork();
        output::restart_in_child(&process_record(config().max_frames, false), me.unwrap_or(0));
        cpu::after_fork_child();
        if cpu::enabled() {
            // Samples come without events: nothing else would start the child's writer.
            output::ensure_writer();
        }
    });
    if r.is_err() {
        disable("internal error after fork");
    }
    tls::slot().guard -= 1;
}
