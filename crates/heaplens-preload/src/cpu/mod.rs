//! CPU-time sampling (`heaplens run --cpu`), MemProfLib's profiling mode: every thread has a
//! timer on its own CPU-time clock that sends it `SIGPROF` every `1/HZ` seconds of CPU it
//! uses, so a thread that sleeps or waits is never sampled and a busy one is, in proportion.
//! The handler unwinds the interrupted code with the monitor's unwinder (allocation-free) and
//! puts the time and the return addresses in the thread's ring; the writer thread drains the
//! rings, interns the stacks into the trie and writes Samples blocks
//! ([`heaplens_trace::record::SampleRecord`]).
//!
//! The signal goes through the monitor's signal table (`crate::crash`): a SIGPROF from one of
//! these timers (SI_TIMER with [`MAGIC`] as its value) is a sample; any other goes to the
//! program's own handler, so a program with a SIGPROF profiler of its own keeps it. The handler
//! is installed with `SA_RESTART`, and a CPU-time timer fires only while its thread runs, not
//! while it waits in a system call, so the program's blocking calls are not interrupted. A
//! sample that lands while the thread runs monitor code is dropped (that time is the monitor's,
//! not the program's) and counted.

use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

use heaplens_trace::record::{Sample, SampleRecord};

use crate::{procinfo, tls, unwind};

// The CPU-only monitor never attaches.
#[cfg_attr(feature = "cpu_monitor", allow(dead_code))]
pub mod attached;

/// The signal the timers send.
pub const SIGNAL: i32 = libc::SIGPROF;

/// The value the monitor's timers carry in their signals (`sigev_value`), telling their
/// signals from the program's.
const MAGIC: u64 = 0x6865_6170_6c65_6e73; // "heaplens"

/// Words of a thread's ring: at 999 Hz and 30 frames a sample, a quarter of a second of CPU
/// time, against the writer's sweep of 10 ms.
const RING_WORDS: usize = 8192;

/// Deepest stack a sample keeps.
const MAX_FRAMES: usize = 256;

/// Threads sampled at once (samplers of ended threads give their place back once drained).
const MAX_THREADS: usize = 1024;

/// Samples per second of CPU time per thread (0: off).
static HZ: AtomicU32 = AtomicU32::new(0);

/// The rate asked for (`HEAPLENS_CPU_HZ`), for the Process record, which is written before
/// sampling starts.
static REQUESTED: AtomicU32 = AtomicU32::new(0);

/// Notes the rate asked for, before [`start`].
pub fn request(hz: u32) {
    REQUESTED.store(hz.min(100_000), Ordering::Relaxed);
}

/// The rate asked for (0: none).
pub fn requested_hz() -> u32 {
    REQUESTED.load(Ordering::Relaxed)
}

/// Samples dropped: the thread was inside the monitor, or its ring was full.
static DROPPED: AtomicU64 = AtomicU64::new(0);

/// Nanoseconds spent in [`on_signal`] on the monitor's samples, all threads: the sampler's
/// own cost, shown beside the profile so its overhead is measured, not guessed.
static HANDLER_NS: AtomicU64 = AtomicU64::new(0);

/// Nanoseconds spent in the sampling handler so far, all threads.
pub fn handler_ns() -> u64 {
    HANDLER_NS.load(Ordering::Relaxed)
}

/// Adds the time since its start to [`HANDLER_NS`] when dropped, however the handler returns.
struct Timed(u64);

impl Drop for Timed {
    fn drop(&mut self) {
        HANDLER_NS.fetch_add(procinfo::now_ns().saturating_sub(self.0), Ordering::Relaxed);
    }
}

/// The monitor's own code (the executable mapping of this library): a sample whose instruction
/// lies there is the monitor's time (an entry stub, a hook before its guard), not the program's.
static OWN_TEXT: [AtomicU64; 2] = [AtomicU64::new(0), AtomicU64::new(0)];

/// Finds the executable mapping that holds this function, from `/proc/self/maps`.
fn find_own_text() {
    let here = find_own_text as *const () as u64;
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap_or_default();
    for line in maps.lines() {
        let mut f = line.split_whitespace();
        let (Some(range), Some(perms)) = (f.next(), f.next()) else { continue };
        let Some((lo, hi)) = range.split_once('-') else { continue };
        let (Ok(lo), Ok(hi)) = (u64::from_str_radix(lo, 16), u64::from_str_radix(hi, 16)) else { continue };
        if perms.contains('x') && (lo..hi).contains(&here) {
            OWN_TEXT[0].store(lo, Ordering::Relaxed);
            OWN_TEXT[1].store(hi, Ordering::Relaxed);
            return;
        }
    }
}

/// Threads not sampled: more than [`MAX_THREADS`] at once, or no timer.
static UNSAMPLED: AtomicU64 = AtomicU64::new(0);

/// One thread's sampler. Made on the thread itself, then reached from its signal handler
/// (through its TLS slot) and from the writer (through [`SAMPLERS`]), which frees it once the
/// thread has ended and its last samples are written.
pub struct Sampler {
    tid: u32,
    stack: Range<u64>,
    cache: Box<unwind::Cache>,
    /// Records `ts weight n frame*n`, written by the handler at `tail`, read by the writer at `head`.
    ring: Box<[u64]>,
    head: AtomicUsize,
    tail: AtomicUsize,
    timer: libc::timer_t,
    /// Set when the thread ended: no sample comes any more.
    ended: AtomicBool,
    /// Made for a thread that was running when the monitor attached (see [`attached`]), not
    /// on the thread itself: its stack bounds are found per sample, unless known (the main
    /// thread's).
    adopted: bool,
}

/// Every sampled thread's [`Sampler`] (0: a free place). The ring is single-producer (the
/// thread's handler) single-consumer (the writer, under the stack trie's lock).
static SAMPLERS: [AtomicUsize; MAX_THREADS] = [const { AtomicUsize::new(0) }; MAX_THREADS];

/// The thread id of each place of [`SAMPLERS`] (0: none), set once the sampler is in place and
/// cleared before it is freed: a signal handler finds its thread's sampler by it without
/// reading another thread's sampler, which the writer may be freeing.
static TIDS: [AtomicU32; MAX_THREADS] = [const { AtomicU32::new(0) }; MAX_THREADS];

/// Samplers are made one at a time (a thread starting, the attach adopting the running ones),
/// so that a thread never gets two.
static CREATE: Mutex<()> = Mutex::new(());

/// The sampling generation: each attach with `--cpu` starts a new one, and a thread's slot
/// holding a sampler of an earlier one (freed at its detach) looks its sampler up again.
static GENERATION: AtomicU64 = AtomicU64::new(0);

/// Handlers taking a sample right now, all threads (a detach waits for none before it frees
/// the samplers).
static IN_HANDLER: AtomicUsize = AtomicUsize::new(0);

/// The key whose destructor stops an ending thread's timer (any way it ends: return,
/// `pthread_exit`, cancellation).
static KEY: AtomicU32 = AtomicU32::new(u32::MAX);

/// Whether CPU sampling is on.
pub fn enabled() -> bool {
    HZ.load(Ordering::Relaxed) != 0
}

/// Nanoseconds of CPU time per sample.
pub fn period_ns() -> u64 {
    1_000_000_000 / u64::from(HZ.load(Ordering::Relaxed).max(1))
}

/// Samples dropped so far.
pub fn dropped() -> u64 {
    DROPPED.load(Ordering::Relaxed)
}

/// Threads that could not be sampled so far.
pub fn unsampled_threads() -> u64 {
    UNSAMPLED.load(Ordering::Relaxed)
}

/// Turns sampling on at `hz` samples per CPU second (at most 100 000) and starts it on the
/// calling thread (the main thread, at start-up, after `crash::install`). Threads the program
/// creates later start theirs as they begin (see `hooks/threads.rs`). Call once SIGPROF goes
/// to [`on_signal`] (`crash::take_over_sigprof`). Returns false, with sampling off, if the
/// thread-exit key could not be made.
pub fn start(hz: u32) -> bool {
    if !enable(hz) {
        return false;
    }
    start_thread();
    true
}

/// Turns sampling on at `hz` samples per CPU second (at most 100 000), starting no timer: the
/// thread-exit key (made once), the monitor's own code. False, with sampling off, if the key
/// could not be made.
fn enable(hz: u32) -> bool {
    if hz == 0 {
        return false;
    }
    if KEY.load(Ordering::Relaxed) == u32::MAX {
        let mut key: libc::pthread_key_t = 0;
        // SAFETY: a key with a destructor of the right signature.
        if unsafe { libc::pthread_key_create(&mut key, Some(on_thread_exit)) } != 0 {
            return false;
        }
        KEY.store(key, Ordering::Relaxed);
    }
    HZ.store(hz.min(100_000), Ordering::Relaxed);
    find_own_text();
    true
}

/// Starts sampling the calling thread: its sampler, then a timer on its CPU-time clock. Runs
/// outside any signal handler (it allocates).
pub fn start_thread() {
    let slot = tls::slot();
    let generation = GENERATION.load(Ordering::Acquire);
    if !enabled() || (!slot.cpu.is_null() && slot.cpu_gen == generation) {
        return;
    }
    let tid = procinfo::gettid();
    let Ok(_one) = CREATE.lock() else { return };
    // A sampler with this thread's id is an adopted one (made for this very thread by an
    // attach that came while it started), or a thread's that ended unseen: this one's wins.
    retire(tid);
    let Some(s) = make(tid, libc::CLOCK_THREAD_CPUTIME_ID, procinfo::thread_stack(), false) else { return };
    slot.cpu = s.cast();
    slot.cpu_gen = generation;
    // SAFETY: the key made by `enable`; the sampler just made.
    unsafe { libc::pthread_setspecific(KEY.load(Ordering::Relaxed), s.cast()) };
    arm(s);
}

/// Makes the sampler of thread `tid`, its timer on `clock` (disarmed) and puts it in a free
/// place of [`SAMPLERS`]; `None` (counted as an unsampled thread) when there is no timer or
/// no place. Call under [`CREATE`].
fn make(tid: u32, clock: libc::clockid_t, stack: Range<u64>, adopted: bool) -> Option<*mut Sampler> {
    // SAFETY: a sigevent for thread `tid` (of this process) and a timer on `clock`.
    let timer = unsafe {
        let mut sev: libc::sigevent = std::mem::zeroed();
        sev.sigev_notify = libc::SIGEV_THREAD_ID;
        sev.sigev_signo = SIGNAL;
        sev.sigev_notify_thread_id = tid as i32;
        sev.sigev_value.sival_ptr = MAGIC as *mut libc::c_void;
        let mut timer: libc::timer_t = std::mem::zeroed();
        if libc::timer_create(clock, &mut sev, &mut timer) != 0 {
            UNSAMPLED.fetch_add(1, Ordering::Relaxed);
            return None;
        }
        timer
    };
    let s = Box::into_raw(Box::new(Sampler {
        tid,
        stack,
        cache: Box::default(),
        ring: vec![0; RING_WORDS].into_boxed_slice(),
        head: AtomicUsize::new(0),
        tail: AtomicUsize::new(0),
        timer,
        ended: AtomicBool::new(false),
        adopted,
    }));
    let place =
        SAMPLERS.iter().position(|p| p.compare_exchange(0, s as usize, Ordering::AcqRel, Ordering::Relaxed).is_ok());
    let Some(i) = place else {
        UNSAMPLED.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the timer and box made above, never shared.
        unsafe {
            libc::timer_delete(timer);
            drop(Box::from_raw(s));
        }
        return None;
    };
    TIDS[i].store(tid, Ordering::Release);
    Some(s)
}

/// Starts the timer of sampler `s`: every [`period_ns`] of its thread's CPU time.
fn arm(s: *mut Sampler) {
    let period = period_ns() as i64;
    let ts = libc::timespec { tv_sec: period / 1_000_000_000, tv_nsec: period % 1_000_000_000 };
    let spec = libc::itimerspec { it_interval: ts, it_value: ts };
    // SAFETY: a sampler in place (freed only by the writer once ended), and its timer.
    unsafe { libc::timer_settime((*s).timer, 0, &spec, std::ptr::null_mut()) };
}

/// The place of thread `tid`'s sampler in [`SAMPLERS`], if it has one.
fn place_of(tid: u32) -> Option<usize> {
    (0..MAX_THREADS).find(|&i| TIDS[i].load(Ordering::Acquire) == tid && SAMPLERS[i].load(Ordering::Acquire) != 0)
}

/// Stops the timer of thread `tid`'s sampler, if it has one, and leaves it to the writer to
/// free once drained. Call under [`CREATE`].
fn retire(tid: u32) {
    if let Some(i) = place_of(tid) {
        TIDS[i].store(0, Ordering::Release);
        // SAFETY: in place until the writer frees it, which it does only once ended.
        let s = unsafe { &*(SAMPLERS[i].load(Ordering::Acquire) as *const Sampler) };
        // SAFETY: the sampler's own timer.
        unsafe { libc::timer_delete(s.timer) };
        s.ended.store(true, Ordering::Release);
    }
}

/// The thread is ending: its timer goes, its last samples are still written. `p` may be a
/// sampler of an earlier attach (the key's value outlives it), then freed: it is acted on only
/// while in place as this thread's.
unsafe extern "C" fn on_thread_exit(p: *mut libc::c_void) {
    let tid = procinfo::gettid();
    {
        // Under CREATE: an attach's `stop` must not delete this timer too (its id, once
        // deleted, may be the program's next timer's).
        let _one = CREATE.lock().unwrap_or_else(|e| e.into_inner());
        let Some(i) = place_of(tid) else { return };
        if SAMPLERS[i].load(Ordering::Acquire) != p as usize {
            return;
        }
        let s = &*(p as *const Sampler);
        tls::slot().cpu = std::ptr::null_mut();
        libc::timer_delete(s.timer);
        s.ended.store(true, Ordering::Release);
    }
    // Its name, for its samples: a thread that never allocated has no state of the
    // recording's to name it at its end. (Guarded: the name is the monitor's allocation.)
    if let Some(_g) = tls::Guard::enter() {
        crate::queue::thread_name(tid);
    }
}

/// The threads sampled now (for their names).
pub fn sampled_tids() -> Vec<u32> {
    (0..MAX_THREADS)
        .filter(|&i| SAMPLERS[i].load(Ordering::Acquire) != 0)
        .map(|i| TIDS[i].load(Ordering::Acquire))
        .filter(|&t| t != 0)
        .collect()
}

/// In a forked child: the parent's samplers are not this process's threads, and timers are not
/// inherited. Starts over on the one thread the child has.
pub fn after_fork_child() {
    if !enabled() {
        return;
    }
    forget_all();
    start_thread();
}

/// Forgets every sampler without freeing it (in a forked child: they are the parent's threads').
fn forget_all() {
    for (p, t) in SAMPLERS.iter().zip(&TIDS) {
        t.store(0, Ordering::Relaxed);
        p.store(0, Ordering::Relaxed);
    }
    tls::slot().cpu = std::ptr::null_mut();
}

/// The SIGPROF handler's first step (from `crash`): true if the signal was one of the
/// monitor's timers, now taken as a sample; false if it is the program's.
///
/// # Safety
/// `info` and `ctx` are the kernel's arguments to an `SA_SIGINFO` handler (or null).
pub unsafe fn on_signal(info: *mut libc::siginfo_t, ctx: *mut libc::c_void) -> bool {
    // SAFETY: the kernel passes a valid siginfo and ucontext to an SA_SIGINFO handler. For
    // SI_TIMER the kernel's siginfo holds, after signo, errno, code and padding (16 bytes), the
    // timer id and overrun count (two ints, at 16 and 20), then the timer's sigval (at 24;
    // include/uapi/asm-generic/siginfo.h).
    unsafe {
        if info.is_null() || ctx.is_null() || (*info).si_code != libc::SI_TIMER {
            return false;
        }
        if std::ptr::read_unaligned((info as *const u8).add(24) as *const u64) != MAGIC {
            return false;
        }
        IN_HANDLER.fetch_add(1, Ordering::AcqRel);
        let _busy = InHandler;
        let _timed = Timed(procinfo::now_ns());
        let overrun = std::ptr::read_unaligned((info as *const u8).add(20) as *const i32);
        let errno = *libc::__errno_location();
        let slot = tls::slot();
        let s = own_sampler(slot);
        if s.is_null() {
            return true;
        }
        let uc = ctx as *mut libc::ucontext_t;
        let g = &(*uc).uc_mcontext.gregs;
        let (ip, sp, bp) =
            (g[libc::REG_RIP as usize] as u64, g[libc::REG_RSP as usize] as u64, g[libc::REG_RBP as usize] as u64);
        let own = OWN_TEXT[0].load(Ordering::Relaxed)..OWN_TEXT[1].load(Ordering::Relaxed);
        if slot.guard != 0 || own.contains(&ip) {
            DROPPED.fetch_add(1, Ordering::Relaxed);
            return true;
        }
        slot.guard = 1;
        let mut frames = [0u64; MAX_FRAMES];
        let s = &mut *s;
        let stack =
            if s.adopted && s.stack.is_empty() { procinfo::stack_below_thread_pointer(sp) } else { s.stack.clone() };
        let n = unwind::sample(&mut s.cache, &stack, ip, sp, bp, &mut frames);
        s.push(procinfo::now_ticks(), 1 + overrun.max(0) as u64, &frames[..n]);
        slot.guard = 0;
        *libc::__errno_location() = errno;
        true
    }
}

/// Counts the handler out of [`IN_HANDLER`] however it returns.
struct InHandler;

impl Drop for InHandler {
    fn drop(&mut self) {
        IN_HANDLER.fetch_sub(1, Ordering::AcqRel);
    }
}

/// The calling thread's sampler (null: none, or sampling is off): its slot's, when of the
/// current generation, else found by thread id (an adopted thread's first sample, or the first
/// after another attach) and noted in the slot. Async-signal-safe.
fn own_sampler(slot: &mut tls::Tls) -> *mut Sampler {
    if !enabled() {
        return std::ptr::null_mut();
    }
    let generation = GENERATION.load(Ordering::Acquire);
    if !slot.cpu.is_null() && slot.cpu_gen == generation {
        return slot.cpu.cast();
    }
    let Some(i) = place_of(procinfo::gettid()) else { return std::ptr::null_mut() };
    slot.cpu = SAMPLERS[i].load(Ordering::Acquire) as *mut libc::c_void;
    slot.cpu_gen = generation;
    slot.cpu.cast()
}

impl Sampler {
    /// Appends a sample (from the handler).
    fn push(&self, ts: u64, weight: u64, frames: &[u64]) {
        let need = 3 + frames.len();
        let (head, tail) = (self.head.load(Ordering::Acquire), self.tail.load(Ordering::Relaxed));
        if tail - head + need > self.ring.len() {
            DROPPED.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let ring = self.ring.as_ptr() as *mut u64;
        let put = |i: usize, w: u64| {
            // SAFETY: `i` is within the free part of the ring, which only this producer writes.
            unsafe { *ring.add(i % self.ring.len()) = w };
        };
        put(tail, ts);
        put(tail + 1, weight);
        put(tail + 2, frames.len() as u64);
        for (k, &f) in frames.iter().enumerate() {
            put(tail + 3 + k, f);
        }
        self.tail.store(tail + need, Ordering::Release);
    }

    /// Takes the samples written so far: `f(ts, weight, frames)` each, outermost frame last.
    fn drain(&self, f: &mut dyn FnMut(u64, u64, &[u64])) {
        let (mut head, tail) = (self.head.load(Ordering::Relaxed), self.tail.load(Ordering::Acquire));
        let len = self.ring.len();
        let mut frames = Vec::new();
        while head < tail {
            let ts = self.ring[head % len];
            let weight = self.ring[(head + 1) % len];
            let n = self.ring[(head + 2) % len] as usize;
            frames.clear();
            frames.extend((0..n).map(|k| self.ring[(head + 3 + k) % len]));
            f(ts, weight, &frames);
            head += 3 + n;
        }
        self.head.store(head, Ordering::Release);
    }
}

/// Drains every thread's samples, interning their stacks with `intern` (frames innermost
/// first to a trie node): one record per thread with samples. Frees the samplers of threads
/// that ended (when [`CREATE`] is free, else on a later call). Call under the stack trie's
/// lock (one drainer at a time).
pub fn drain(intern: &mut dyn FnMut(&[u64]) -> u32) -> Vec<SampleRecord> {
    // Samplers are freed only under CREATE, so that an attach's `stop` never reads a freed one;
    // when it is busy, those of ended threads wait for the next round.
    let held = CREATE.try_lock().ok();
    if let Some(held) = &held {
        attached::reap_ended(held);
    }
    let period_ns = period_ns();
    let mut out = Vec::new();
    for (i, place) in SAMPLERS.iter().enumerate() {
        let p = place.load(Ordering::Acquire);
        if p == 0 {
            continue;
        }
        // SAFETY: a sampler stays until this function frees it.
        let s = unsafe { &*(p as *const Sampler) };
        let ended = s.ended.load(Ordering::Acquire);
        let mut rec = SampleRecord { tid: s.tid, period_ns, samples: Vec::new() };
        s.drain(&mut |ts, weight, frames| {
            let weight = weight.min(u32::MAX.into()) as u32;
            rec.samples.push(Sample { ts, stack: intern(frames), weight });
        });
        if !rec.samples.is_empty() {
            out.push(rec);
        }
        if ended && held.is_some() {
            TIDS[i].store(0, Ordering::Release);
            place.store(0, Ordering::Release);
            // SAFETY: the thread ended (no handler runs for it) and its place is cleared.
            drop(unsafe { Box::from_raw(p as *mut Sampler) });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sampler() -> Sampler {
        Sampler {
            tid: 1,
            stack: 0..0,
            cache: Box::default(),
            ring: vec![0; 64].into_boxed_slice(),
            head: AtomicUsize::new(0),
            tail: AtomicUsize::new(0),
            // SAFETY: never armed nor deleted in these tests.
            timer: unsafe { std::mem::zeroed() },
            ended: AtomicBool::new(false),
            adopted: false,
        }
    }

    fn drained(s: &Sampler) -> Vec<(u64, u64, Vec<u64>)> {
        let mut out = Vec::new();
        s.drain(&mut |ts, w, frames| out.push((ts, w, frames.to_vec())));
        out
    }

    #[test]
    fn the_ring_wraps_and_keeps_order() {
        let s = sampler();
        let before = dropped();
        // 10 words a sample (3 + 7 frames): 6 fit in 64 words, the 7th does not.
        for round in 0..5u64 {
            for k in 0..7u64 {
                let frames: Vec<u64> = (0..7).map(|f| round * 100 + k * 10 + f).collect();
                s.push(round * 10 + k, 1 + k, &frames);
            }
            let got = drained(&s);
            assert_eq!(got.len(), 6, "round {round}");
            for (k, (ts, w, frames)) in got.iter().enumerate() {
                let k = k as u64;
                assert_eq!((*ts, *w), (round * 10 + k, 1 + k));
                assert_eq!(frames, &(0..7).map(|f| round * 100 + k * 10 + f).collect::<Vec<_>>());
            }
        }
        assert!(dropped() - before >= 5, "a full ring drops the sample");
    }
}
