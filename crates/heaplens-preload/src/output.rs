//! The trace file and the writer thread. Threads hand filled event buffers over through a
//! queue; the writer turns them into columns while the threads leave it room
//! (`heaplens_trace::columns`) and frames them into checksummed blocks compressed with
//! Zstandard. Every 10 ms it also sweeps partly filled buffers, so a process killed with
//! SIGKILL loses at most that much.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use heaplens_trace::naming;
use heaplens_trace::record::EndRecord;
use heaplens_trace::{BlockKind, BlockWriter, Codec, ColumnEncoder, ModuleRecord, ProcessRecord};

use crate::activity::Activity;
use crate::trace_file::TraceFile;
use crate::{intern, modules, procinfo, queue, resolve, thread, tls};

/// The open trace, and where it is.
pub struct Sink {
    writer: BlockWriter<TraceFile>,
    /// The path of this process's trace.
    pub path: PathBuf,
    events: u64,
    /// Turns the threads' row payloads into EventColumns payloads (a third of the size once
    /// compressed); its buffers are kept from block to block.
    columns: ColumnEncoder,
    column_buf: Vec<u8>,
    /// Which threads are busy: columns only while they do not outnumber the processors.
    activity: Activity,
}

static SINK: Mutex<Option<Sink>> = Mutex::new(None);
static WRITER_RUNNING: AtomicBool = AtomicBool::new(false);
/// Whether events are written as columns: 0 while the recording threads do not outnumber the
/// processors ([`thread::columns_affordable`]), 1 never, 2 always.
///
/// Columns make a trace a third smaller than Zstandard-compressed rows, for 15-20% more of the
/// writer's processor time (docs/EXPERIMENTS.md, "Columns while the threads fill every
/// processor"). With one busy thread per processor (2 on 2) the writer keeps up, and the program
/// paid 6-12% more time for a trace 32-39% smaller; with more (8 on 2) the threads write out
/// the backlog themselves and paid 17%, which made the 8-thread program's slowdown 1.36 times
/// the single-thread one's (issue 3 allows 1.25): rows there.
static COLUMNS: AtomicU8 = AtomicU8::new(0);

/// Forces events to columns (`Some(true)`) or rows (`Some(false)`); `None` leaves it to whether
/// the recording threads outnumber the processors.
pub fn set_columns(force: Option<bool>) {
    COLUMNS.store(force.map_or(0, |c| if c { 2 } else { 1 }), Ordering::Relaxed);
}

/// Whether to write columns now, given whether the threads leave room for them.
fn columns_now(affordable: bool) -> bool {
    match COLUMNS.load(Ordering::Relaxed) {
        0 => affordable,
        mode => mode == 2,
    }
}

/// Most bytes of one thread's rows that make one EventColumns block.
const GROUP_BYTES: usize = 1 << 20;
static DROPPED: AtomicU64 = AtomicU64::new(0);

/// Buffers queued beyond which the threads that fill them write them out themselves: with more
/// busy threads than cores the writer thread alone falls behind, and the queue (memory) grows.
const HIGH_WATER: usize = 16;

/// After a program's thread pushed an event and let go of its state's lock: `queued` is what
/// the push returned, the buffers queued when it queued a filled one ([`queue::submit`]). Then
/// this starts the writer thread if the trace needs it, and writes the backlog out on the
/// caller's thread when there is no writer, or when the backlog is so long that the writer
/// alone falls behind.
#[inline(always)]
pub fn handed_over(queued: Option<usize>) {
    if let Some(backlog) = queued {
        help_writer(backlog);
    }
}

#[cold]
fn help_writer(backlog: usize) {
    if !writer_needed() {
        // No writer thread (see [`writer_needed`]): the caller writes its buffer out itself.
        return write_pending();
    }
    ensure_writer();
    if backlog >= HIGH_WATER {
        write_pending();
    }
}

/// Whether the trace needs the writer thread. While sampling, a program that has only its one
/// thread does without: glibc's allocator skips its locks and atomics while the process is
/// single-threaded (`__libc_single_threaded`), and a second thread of ours would cost every
/// unsampled call of the program more than the monitor does, while the few samples are written
/// by the program's thread itself (see [`sampled`]).
pub fn writer_needed() -> bool {
    !crate::sampling::enabled() || !procinfo::single_threaded()
}

/// When the recording threads last wrote out the buffers themselves (`CLOCK_MONOTONIC` ns).
static LAST_SELF_SWEEP: AtomicU64 = AtomicU64::new(0);

/// Without the writer thread, a sample that comes at least this long after the last write is
/// written out at once, with everything held before it (nanoseconds).
const SELF_SWEEP_NS: u64 = 10_000_000;

/// After a sample was recorded. Without the writer thread ([`writer_needed`]) nothing writes
/// on a timer, so the recording thread does it: a sample that comes [`SELF_SWEEP_NS`] or more
/// after the last write goes to the file at once with all that every thread holds. At most a
/// hundred writes a second, and a program killed while it does not allocate (SIGKILL, or a
/// SIGTERM that skips the exit path) loses only the samples of its last 10 ms of allocating.
/// The writer thread starts as soon as the program has a second thread.
#[cold]
pub fn sampled() {
    if WRITER_RUNNING.load(Ordering::Relaxed) {
        return;
    }
    if writer_needed() {
        ensure_writer();
        return;
    }
    let now = procinfo::now_ns();
    if now.saturating_sub(LAST_SELF_SWEEP.load(Ordering::Relaxed)) >= SELF_SWEEP_NS {
        LAST_SELF_SWEEP.store(now, Ordering::Relaxed);
        thread::flush_all();
        queue::extra(BlockKind::Clock, procinfo::clock_sync().encode());
        write_pending();
    }
}

/// How often partly filled buffers are written out, in nanoseconds: what a process killed with
/// SIGKILL loses at most.
const SWEEP_NS: u64 = 10_000_000;

/// Creates the trace at `path`, or when it already exists (an exec'd or forked process of the
/// same run) at `path.PID`, then `path.PID.N`; a `path` that is not a regular file (a device, a
/// FIFO) is written as it is. Writes the file header and the Process block.
///
/// # Errors
/// The error of the last attempt to create the file.
pub fn open(path: &Path, process: &ProcessRecord) -> io::Result<PathBuf> {
    let pid = process.pid;
    let mut candidates = vec![path.to_path_buf(), naming::with_suffix(path, pid)];
    candidates.extend((1..100).map(|n| naming::with_suffix(path, format_args!("{pid}.{n}"))));
    let mut last = io::Error::other("no candidate path");
    for p in candidates {
        let created = match TraceFile::create_new(&p) {
            // `-o /dev/null`: a device or FIFO is written as it is, never sidestepped by a
            // `/dev/null.PID` created beside it.
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists && p == path && !path.is_file() && !path.is_dir() => {
                TraceFile::open_in_place(&p)
            }
            r => r,
        };
        match created {
            Ok(f) => {
                let mut writer = BlockWriter::new(f)?;
                writer.write_block(BlockKind::Process, &process.encode())?;
                writer.write_block(BlockKind::Clock, &procinfo::clock_sync().encode())?;
                *SINK.lock().map_err(|_| io::Error::other("poisoned"))? = Some(Sink {
                    writer,
                    path: p.clone(),
                    events: 0,
                    columns: ColumnEncoder::default(),
                    column_buf: Vec::new(),
                    activity: Activity::default(),
                });
                return Ok(p);
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => last = e,
            Err(e) => return Err(e),
        }
    }
    Err(last)
}

/// Starts the writer thread if it is not running (at start-up, and lazily in a forked child).
pub fn ensure_writer() {
    if WRITER_RUNNING.swap(true, Ordering::AcqRel) {
        return;
    }
    // A raw pthread, so that the guard is up before the thread runs any code that allocates
    // (std's thread start-up would be recorded as the program's).
    extern "C" fn start(_: *mut libc::c_void) -> *mut libc::c_void {
        tls::slot().guard = 1;
        // Signals are the program's: a process-directed signal must go to one of its threads
        // (which may be waiting for it with sigwaitinfo or signalfd), never to this one.
        block_all_signals();
        // SAFETY: names this thread; the name is NUL-terminated and under 16 bytes.
        unsafe { libc::pthread_setname_np(libc::pthread_self(), c"heaplens-writer".as_ptr()) };
        let _ = std::panic::catch_unwind(writer_loop);
        // A detached monitor's writer ends for good; the next attach starts another.
        if ROUND.get().is_some() {
            WRITER_RUNNING.store(false, Ordering::Release);
        }
        std::ptr::null_mut()
    }
    // The new thread starts with every signal blocked: blocked only once it runs, it could take
    // a process-directed signal meant for the program in between (and die of its default
    // action: 1 run in 20 of the sigwait test on a loaded machine).
    // SAFETY: plain pthread creation with default attributes; the thread is detached. The
    // calling thread's mask is restored as it was.
    unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_BLOCK, &all, &mut old);
        let mut th: libc::pthread_t = 0;
        // glibc's own pthread_create: the interposed one would give this thread a CPU sampler.
        if crate::real::call::pthread_create(&mut th, std::ptr::null(), start, std::ptr::null_mut()) == 0 {
            libc::pthread_detach(th);
        } else {
            WRITER_RUNNING.store(false, Ordering::Release);
        }
        libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
    }
}

/// Blocks every signal on the calling thread.
fn block_all_signals() {
    // SAFETY: a full set built by sigfillset; pthread_sigmask only changes this thread.
    unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_BLOCK, &all, std::ptr::null_mut());
    }
}

/// Called by the writer thread on each round with the time (`CLOCK_MONOTONIC` ns); returning
/// false ends the thread. Set by a monitor loaded into a running process (`crate::attach`).
static ROUND: std::sync::OnceLock<fn(u64) -> bool> = std::sync::OnceLock::new();

/// Has `round` called on each round of the writer thread (at least every 10 ms); the thread
/// ends when it returns false, and a later [`ensure_writer`] starts a new one.
pub fn on_each_round(round: fn(u64) -> bool) {
    let _ = ROUND.set(round);
}

/// How often the writer writes a pair of clock readings, in nanoseconds.
const CLOCK_NS: u64 = 50_000_000;

/// The writer thread's CPU time at its last sweep, nanoseconds (for the End record).
static WRITER_CPU_NS: AtomicU64 = AtomicU64::new(0);

/// How often the writer wakes when only CPU samples are recorded (`--cpu-only`), in
/// nanoseconds: a thread's ring holds a quarter of a second or more, and each wake-up costs
/// the program's processors some 40 us (measured by the End record's `writer_cpu_ns` on a
/// sleeping program: 13.7 ms in 3 s at 10 ms).
const SAMPLES_SWEEP_NS: u64 = 50_000_000;

fn writer_loop() {
    let mut last_sweep = procinfo::now_ns();
    let mut last_clock = 0;
    let (mut last_names, mut named) = (0, std::collections::HashMap::new());
    let wait = if crate::cpu_only() { SAMPLES_SWEEP_NS } else { SWEEP_NS };
    while crate::trace_open() {
        if let Ok(q) = queue::QUEUE.lock() {
            let _ = queue::WAKE.wait_timeout(q, Duration::from_nanos(wait));
        }
        if !crate::trace_open() {
            break;
        }
        let now = procinfo::now_ns();
        // Attach mode: hook modules loaded since, or detach when asked (then the trace is closed).
        if ROUND.get().is_some_and(|round| !round(now)) {
            break;
        }
        if now - last_sweep >= SWEEP_NS {
            thread::flush_all();
            last_sweep = now;
        }
        // Pairs of clock readings let readers measure the TSC rate even if the process is
        // killed early on (a few bytes every 50 ms).
        if now - last_clock >= CLOCK_NS {
            queue::extra(BlockKind::Clock, procinfo::clock_sync().encode());
            let first = last_clock == 0;
            last_clock = now;
            // A first snapshot at once tells a reader (`heaplens live`) that the trace holds
            // counters, not events, before the program ends or is asked for one.
            if crate::aggregate::enabled() && (first || path().is_some_and(|p| crate::aggregate::snapshot_wanted(&p))) {
                queue::extra(BlockKind::Aggregate, aggregate_snapshot());
            }
        }
        if now - last_names >= NAMES_NS {
            name_threads(&mut named);
            last_names = now;
        }
        write_pending();
        WRITER_CPU_NS.store(procinfo::thread_cpu_ns(), Ordering::Relaxed);
        if procinfo::only_monitor_left() {
            // The program's last thread ended (its main thread called pthread_exit): glibc
            // would now exit(0) but counts this thread as the program's. Do it for it; the
            // program's exit handlers run here, recorded as this thread's.
            tls::slot().guard = 0;
            // SAFETY: what glibc's last exiting thread calls.
            unsafe { libc::exit(0) };
        }
    }
}

/// How often the writer writes the names of the program's threads, in nanoseconds.
const NAMES_NS: u64 = 1_000_000_000;

/// Writes the name of each registered thread not written yet or renamed since (`named`: what
/// was written, by thread id), so that a trace read while it is written (`heaplens live`)
/// names the threads; the names at exit come in any case. The names are read after the
/// registry's lock is let go: threads starting and ending take it.
fn name_threads(named: &mut std::collections::HashMap<u32, String>) {
    let mut tids: Vec<u32> = match thread::REGISTRY.lock() {
        // SAFETY: registered states are alive while registered (and the lock is held).
        Ok(r) => r.iter().map(|&p| unsafe { (*(p as *const thread::ThreadState)).tid }).collect(),
        Err(_) => return,
    };
    // Threads that are sampled but never allocated (`--cpu`, `--cpu-only`).
    for tid in crate::cpu::sampled_tids() {
        if !tids.contains(&tid) {
            tids.push(tid);
        }
    }
    named.retain(|tid, _| tids.contains(tid));
    for tid in tids {
        let name = procinfo::thread_name(tid);
        if !name.is_empty() && named.get(&tid) != Some(&name) {
            queue::named(tid, name.clone());
            named.insert(tid, name);
        }
    }
}

/// An Events payload ready to write: converted from commands, or a thread buffer that holds
/// its final form.
enum Payload {
    Converted(Vec<u8>),
    Final(Box<[u8]>, usize),
}

impl Payload {
    fn bytes(&self) -> &[u8] {
        match self {
            Payload::Converted(out) => &out[..],
            Payload::Final(buf, len) => &buf[..*len],
        }
    }
}

/// Writes everything queued: module and thread records, new stack nodes, then event buffers,
/// converted from the threads' stack commands to stack ids (see [`resolve`]). Conversion runs
/// under the trie's lock, which is handed over to the sink's: a thread's commands must be
/// replayed in the order they were made, and every node an event refers to is written no later
/// than the event's own block.
pub fn write_pending() {
    let Ok(mut trie_lock) = intern::TRIE.lock() else { return };
    let trie = trie_lock.get_or_insert_with(intern::Trie::new);
    let (buffers, time_shift) = crate::solo::take();
    let extras = queue::EXTRA.lock().map(|mut e| std::mem::take(&mut *e)).unwrap_or_default();
    let mut events = Vec::with_capacity(buffers.len());
    let mut pool = Vec::with_capacity(buffers.len());
    if !buffers.is_empty() {
        let Ok(mut mirrors) = resolve::MIRRORS.lock() else { return };
        let mirrors = mirrors.get_or_insert_with(Default::default);
        for (buf, len, deferred) in buffers {
            if deferred {
                let mut out = Vec::with_capacity(len);
                if mirrors.convert(trie, &buf[..len], &mut out).is_err() {
                    // Cannot happen unless the monitor is broken; keep what converted.
                    DROPPED.fetch_add(1, Ordering::Relaxed);
                }
                events.push(Payload::Converted(out));
                pool.push(buf);
            } else {
                events.push(Payload::Final(buf, len));
            }
        }
    }
    // CPU samples: their stacks interned now, so that their nodes go out with the others.
    let samples = if crate::cpu::enabled() { crate::cpu::drain(&mut |frames| trie.intern(frames)) } else { Vec::new() };
    let stacks = trie.take_pending();
    if let Some((path, process)) = (!events.is_empty() || !samples.is_empty()).then(take_deferred).flatten() {
        // A forked child's first events or samples: only now does it get a trace of its own (a child
        // that just execs another program leaves no empty file behind).
        if let Err(e) = open(&path, &process) {
            crate::abandon(&format!("cannot create the trace of child process {}: {e}", process.pid));
            return;
        }
        if let Some(s) = SINK.lock().ok().as_mut().and_then(|s| s.as_mut()) {
            let _ = s.writer.write_block(BlockKind::Modules, &ModuleRecord::encode_all(&modules::snapshot()));
        }
    }
    let Ok(mut sink) = SINK.lock() else { return };
    // The sink is ours: a later caller's nodes and events now queue up behind this one's, and
    // threads that intern in place need not wait for the compression below.
    drop(trie_lock);
    let Some(s) = sink.as_mut() else { return };
    let mut result = Ok(());
    for (kind, payload) in &extras {
        result = result.and_then(|()| s.writer.write_block(*kind, payload));
    }
    if !stacks.is_empty() {
        result = result.and_then(|()| s.writer.write_block(BlockKind::Stacks, &stacks));
    }
    for rec in &samples {
        result = result.and_then(|()| s.writer.write_block(BlockKind::Samples, &rec.encode()));
    }
    // A thread's buffers next to each other (each thread's in its order; the replay merges
    // threads by time, not by place in the file): with threads taking turns at the queue, a
    // block per buffer instead of per thread gave the column model and the compressor less to
    // work on (the 8-thread churn's columns: 16.5 -> 15.7 MB).
    let mut events: Vec<(u32, Payload)> =
        events.into_iter().map(|p| (heaplens_trace::event::tid(p.bytes()).unwrap_or(0), p)).collect();
    events.sort_by_key(|&(tid, _)| tid);
    let (tids, events): (Vec<u32>, Vec<Payload>) = events.into_iter().unzip();
    s.columns.set_time_shift(time_shift);
    let mut i = 0;
    while i < events.len() {
        let now = procinfo::now_ns();
        s.activity.saw(tids[i], events[i].bytes().len(), now);
        let busy = s.activity.busy(now);
        // One thread's consecutive buffers make one block, up to GROUP_BYTES of rows.
        let (mut j, mut total) = (i + 1, events[i].bytes().len());
        while j < events.len() && tids[j] == tids[i] && total + events[j].bytes().len() <= GROUP_BYTES {
            total += events[j].bytes().len();
            j += 1;
        }
        let parts: Vec<&[u8]> = events[i..j].iter().map(Payload::bytes).collect();
        s.column_buf.clear();
        // Rows that do not decode stay rows.
        if columns_now(thread::columns_affordable(busy)) && s.columns.encode_all(&parts, &mut s.column_buf).is_ok() {
            result = result.and_then(|()| s.writer.write_block(BlockKind::EventColumns, &s.column_buf));
        } else {
            for p in &parts {
                result = result.and_then(|()| s.writer.write_block_as(BlockKind::Events, p, Codec::Zstd));
            }
        }
        s.events += (j - i) as u64;
        i = j;
    }
    for payload in events {
        if let Payload::Final(buf, _) = payload {
            pool.push(buf);
        }
    }
    if let Err(e) = result {
        crate::abandon(&format!("cannot write the trace {}: {e}", s.path.display()));
        *sink = None;
    }
    drop(sink);
    if let Ok(mut p) = queue::POOL.lock() {
        if p.len() < 64 {
            p.extend(pool);
        }
    }
}

/// Why the trace is written out with an End block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Checkpoint {
    /// The process exits.
    Exit,
    /// The process is about to `exec`: if that fails, recording goes on.
    Exec,
    /// The process dies by a signal: in a signal handler, where the loader's lock may be held
    /// by the interrupted code (no module refresh).
    Signal,
    /// `heaplens detach`: recording ends while the process goes on.
    Detach,
}

/// Flushes every thread and writes the End block. Called once, at process exit.
pub fn finish() {
    checkpoint(Checkpoint::Exit);
}

/// Flushes every thread's events and writes the End block (see [`Checkpoint`]). A later End
/// block supersedes this one.
pub fn checkpoint(why: Checkpoint) {
    thread::flush_all();
    let mut named = Vec::new();
    if let Ok(r) = thread::REGISTRY.lock() {
        for &p in r.iter() {
            // SAFETY: registered states are alive while registered.
            let st = unsafe { &*(p as *const thread::ThreadState) };
            queue::thread_name(st.tid);
            named.push(st.tid);
            if why != Checkpoint::Exec {
                crate::stats::add_stats(&st.stats());
            }
        }
    }
    for tid in crate::cpu::sampled_tids().into_iter().filter(|t| !named.contains(t)) {
        queue::thread_name(tid);
    }
    if crate::config().stats && why != Checkpoint::Exec {
        crate::stats::print_stats();
    }
    if why != Checkpoint::Signal {
        queue::module_changes(&modules::refresh(procinfo::now_ns()));
    }
    queue::extra(BlockKind::Clock, procinfo::clock_sync().encode());
    if crate::aggregate::enabled() {
        queue::extra(BlockKind::Aggregate, aggregate_snapshot());
    }
    write_pending();
    let nodes = intern::TRIE.lock().ok().and_then(|t| t.as_ref().map(|t| t.nodes)).unwrap_or(0);
    if let Ok(mut sink) = SINK.lock() {
        if let Some(s) = sink.as_mut() {
            let end = EndRecord {
                events: s.events,
                stack_nodes: nodes,
                dropped: DROPPED.load(Ordering::Relaxed) + crate::unrecorded(),
                end_mono_ns: procinfo::now_ns(),
                samples_dropped: crate::cpu::dropped(),
                sampler_ns: crate::cpu::handler_ns(),
                writer_cpu_ns: WRITER_CPU_NS.load(Ordering::Relaxed),
                exec_unfollowed: why == Checkpoint::Exec && !crate::config().follow_children,
                null_frees: thread::null_frees(),
                detached: why == Checkpoint::Detach,
                exec: why == Checkpoint::Exec,
            };
            let _ = s.writer.write_block(BlockKind::End, &end.encode());
            let _ = s.writer.flush();
        }
    }
}

/// The aggregated-mode counters of every thread, encoded as an Aggregate payload.
fn aggregate_snapshot() -> Vec<u8> {
    crate::aggregate::snapshot(|f| {
        if let Ok(r) = thread::REGISTRY.lock() {
            for &p in r.iter() {
                // SAFETY: registered states are alive while registered.
                unsafe { (*(p as *const thread::ThreadState)).visit_counters(f) };
            }
        }
    })
    .encode()
}

/// The path of this process's trace.
pub fn path() -> Option<PathBuf> {
    SINK.lock().ok().and_then(|s| s.as_ref().map(|s| s.path.clone()))
}

/// Locks held across fork, so the child inherits them in a consistent state.
pub struct ForkLocks {
    _trie: MutexGuard<'static, Option<intern::Trie>>,
    _registry: MutexGuard<'static, Vec<usize>>,
    _queue: MutexGuard<'static, queue::Queue>,
    _pool: MutexGuard<'static, Vec<Box<[u8]>>>,
    _extra: MutexGuard<'static, Vec<(BlockKind, Vec<u8>)>>,
    _sink: MutexGuard<'static, Option<Sink>>,
}

/// Takes every lock (in the one order used everywhere) before fork.
pub fn lock_for_fork() -> Option<ForkLocks> {
    Some(ForkLocks {
        _trie: intern::TRIE.lock().ok()?,
        _registry: thread::REGISTRY.lock().ok()?,
        _queue: queue::QUEUE.lock().ok()?,
        _pool: queue::POOL.lock().ok()?,
        _extra: queue::EXTRA.lock().ok()?,
        _sink: SINK.lock().ok()?,
    })
}

/// Closes the trace after its End block (a detach): what the sink holds is dropped, the
/// descriptor closed, and counters start over for the next trace.
pub fn close() {
    if let Ok(mut s) = SINK.lock() {
        *s = None;
    }
    DROPPED.store(0, Ordering::Relaxed);
}

/// In a child forked while attached: closes the child's copy of the trace (the parent's writer
/// goes on writing it), forgets what the parent had queued and the parent's other threads
/// (`me` is the forking thread's state, 0 if it has none), and notes that the child has no
/// writer thread.
pub fn close_in_child(me: usize) {
    close();
    forget_parent(me);
}

/// Drops the events and records queued for the writer (they belong to a trace no longer
/// written here).
pub fn forget_pending() {
    queue::QUEUE.lock().map(|mut q| q.clear()).ok();
    queue::EXTRA.lock().map(|mut e| e.clear()).ok();
}

/// Starts the stack trie (and the writer's mirrors of it) over, for a new trace.
pub fn fresh_trie() {
    if let Ok(mut t) = intern::TRIE.lock() {
        *t = Some(intern::Trie::new());
        if let Ok(mut m) = resolve::MIRRORS.lock() {
            *m = None;
        }
    }
}

/// In a forked child: forgets the parent's queued data and its other threads (`me` is the
/// forking thread's state, 0 if it has none; the others do not exist in the child, and their
/// states are leaked, not touched), and notes that the child has no writer thread.
fn forget_parent(me: usize) {
    forget_pending();
    if let Ok(mut r) = thread::REGISTRY.lock() {
        r.retain(|&p| p == me);
        thread::set_live(r.len());
    }
    WRITER_RUNNING.store(false, Ordering::Release);
}

/// A forked child's trace, created when its first events are written.
static DEFERRED: Mutex<Option<(PathBuf, ProcessRecord)>> = Mutex::new(None);

fn take_deferred() -> Option<(PathBuf, ProcessRecord)> {
    DEFERRED.lock().ok().and_then(|mut d| d.take())
}

/// In a forked child, after the locks are released: prepare this process's own trace at
/// `PARENT_TRACE.PID` (created with its first events), with a fresh trie, and forget the
/// parent's pending data and threads.
pub fn restart_in_child(process: &ProcessRecord, me: usize) {
    let parent_path = SINK.lock().ok().and_then(|s| s.as_ref().map(|s| s.path.clone())).unwrap_or_default();
    if let Ok(mut s) = SINK.lock() {
        // The parent's file stays open in the parent; the child's copy of it is just closed.
        *s = None;
    }
    fresh_trie();
    forget_parent(me);
    if let Ok(mut d) = DEFERRED.lock() {
        *d = Some((naming::with_suffix(&parent_path, process.pid), process.clone()));
    }
}
