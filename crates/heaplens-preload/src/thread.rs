//! Per-thread recording state: the event buffer, the unwind cache and the stack cache. Only its
//! own thread writes events into it; the writer thread (and exit or fork) may swap a filled
//! buffer out under the state's lock ([`OwnerLock`]), which its owner finds free but for those
//! rare moments.

use std::ops::Range;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

use heaplens_trace::event::MAX_EVENT_LEN;
use heaplens_trace::EventEncoder;

use crate::intern::NodeCache;
use crate::owner_lock::OwnerLock;
use crate::{modules, procinfo, queue, resolve, tls, unwind};

/// Bytes of events a thread collects before handing them to the writer, at least: a buffer
/// holds at least two events with stacks of `max_frames` new frames.
pub const BUFFER_BYTES: usize = 128 << 10;

/// The size of every thread buffer, for stacks of at most `max_frames` frames.
pub fn buffer_bytes(max_frames: usize) -> usize {
    BUFFER_BYTES.max(2 * (MAX_EVENT_LEN + resolve::command_len(max_frames)))
}

/// One thread's recording state.
pub struct ThreadState {
    lock: OwnerLock,
    /// Kernel thread id.
    pub tid: u32,
    buf: Box<[u8]>,
    pos: usize,
    header: usize,
    enc: EventEncoder,
    /// Trie edges this thread has used.
    pub nodes: NodeCache,
    /// The stack walker, which remembers the previous stack.
    pub walker: unwind::Walker,
    /// With `HEAPLENS_CHECK_UNWIND=1`, a second walker that unwinds every stack whole, to
    /// check the incremental walk on the very same calls (see [`ThreadState::capture`]).
    check: Option<Box<unwind::Walker>>,
    /// Capture counters.
    pub stats: crate::stats::Stats,
    /// Counters of the aggregated mode (unused otherwise).
    agg: crate::aggregate::Counters,
    /// This thread's stack, bounding the unwinder's reads.
    pub stack: Range<u64>,
    /// Whether this thread's buffer holds stack commands for the writer to resolve (see
    /// [`resolve`]) rather than stack ids.
    deferred: bool,
    /// Rounds of thread-specific destructors this thread has been through (see
    /// [`on_thread_exit`]).
    exit_rounds: u32,
    /// Releases of a null pointer this thread made (only its owner writes it).
    null_frees: AtomicU64,
    /// The recording this state belongs to ([`GENERATION`] when it was last reset).
    generation: u32,
}

/// Null releases counted by threads that have exited.
static EXITED_NULL_FREES: AtomicU64 = AtomicU64::new(0);

/// Releases of a null pointer counted so far, by every thread (for the End record).
pub fn null_frees() -> u64 {
    let live = REGISTRY.lock().map_or(0, |r| {
        // SAFETY: registered states stay alive until removed under this lock.
        r.iter().map(|&p| unsafe { &*(p as *const ThreadState) }.null_frees.load(Ordering::Relaxed)).sum()
    });
    EXITED_NULL_FREES.load(Ordering::Relaxed) + live
}

/// Counts the recordings of this process: a monitor attached again (`heaplens attach`) starts
/// a new trace with a new trie, and each thread starts its state over on its next event.
static GENERATION: AtomicU32 = AtomicU32::new(0);

/// Starts a new recording: every thread's state is reset on its next event, and until then its
/// buffer (which may hold an event of the previous recording) is left out of the sweeps.
pub fn new_generation() {
    EXITED_NULL_FREES.store(0, Ordering::Relaxed);
    GENERATION.fetch_add(1, Ordering::AcqRel);
}

/// Threads that have recording state, and the processors this process may run on: stacks are
/// left to the writer thread only while it has a processor of its own to intern them on.
static LIVE: AtomicUsize = AtomicUsize::new(0);
static CPUS: AtomicUsize = AtomicUsize::new(1);
/// Notes how many processors the process may use (at start-up): 0 makes every thread intern
/// in place, `usize::MAX` leaves every stack to the writer.
pub fn set_cpus(n: usize) {
    CPUS.store(n, Ordering::Relaxed);
}

/// Sets the count of recording threads (after fork, where only the forking thread lives on).
pub fn set_live(n: usize) {
    LIVE.store(n, Ordering::Relaxed);
}

/// True when new stacks should go to the writer as commands: fewer recording threads than
/// processors. With as many threads as processors the writer's extra work would only take their
/// time, and interning in place, from a cache each thread keeps, costs less. (Counting live
/// threads, not busy ones, measured better: an idle main thread waiting on one worker leaves
/// the writer a processor, but converting the worker's stacks and encoding its columns on it
/// held the worker back.)
#[inline(always)]
fn defer_stacks() -> bool {
    LIVE.load(Ordering::Relaxed) < CPUS.load(Ordering::Relaxed)
}

/// True when the threads recording (alive, and `busy` of them lately, see
/// [`crate::activity`]) do not outnumber the processors. The writer then encodes events as
/// columns; beyond, the threads write out the backlog themselves and the encoding would slow
/// every one of them (see `output.rs`).
pub fn columns_affordable(busy: usize) -> bool {
    LIVE.load(Ordering::Relaxed).min(busy) <= CPUS.load(Ordering::Relaxed)
}

/// Every live thread's state, so exit, fork and the writer can reach their buffers.
pub static REGISTRY: Mutex<Vec<usize>> = Mutex::new(Vec::new());

impl ThreadState {
    fn new(max_frames: usize, stack: Range<u64>) -> Self {
        let mut s = Self {
            lock: OwnerLock::default(),
            tid: procinfo::gettid(),
            buf: queue::take_buffer(buffer_bytes(max_frames)),
            pos: 0,
            header: 0,
            enc: EventEncoder::default(),
            nodes: NodeCache::new(),
            walker: {
                let mut w = unwind::Walker::new(max_frames);
                w.incremental = !crate::config().full_unwind;
                w
            },
            check: crate::config().check_unwind.then(|| {
                let mut w = Box::new(unwind::Walker::new(max_frames));
                w.incremental = false;
                w
            }),
            stack,
            stats: Default::default(),
            agg: Default::default(),
            deferred: false,
            exit_rounds: 0,
            null_frees: AtomicU64::new(0),
            generation: GENERATION.load(Ordering::Acquire),
        };
        s.begin();
        s
    }

    fn begin(&mut self) {
        self.pos = 0;
        self.enc.begin(&mut self.buf, &mut self.pos, self.tid);
        self.header = self.pos;
    }

    /// Whether the buffer holds events. From another thread, only with the state's lock taken
    /// (see [`ThreadState::lock`]).
    pub fn has_events(&self) -> bool {
        self.pos > self.header
    }

    /// The lock on this state (for [`OwnerLock::peek_all`]).
    pub fn lock(&self) -> &OwnerLock {
        &self.lock
    }

    /// Hands the filled buffer to the writer and starts a new one. Caller holds the lock.
    /// Returns the buffers queued now, when it queued one.
    fn rotate(&mut self) -> Option<usize> {
        let mut queued = None;
        if self.has_events() {
            let fresh = queue::take_buffer(self.buf.len());
            let full = std::mem::replace(&mut self.buf, fresh);
            queued = Some(queue::submit(full, self.pos, self.deferred));
        }
        self.begin();
        queued
    }

    /// Appends one event through `encode`, which gets the buffer, the position and the encoder.
    /// Returns the buffers queued when it handed a filled one over, for the caller to pass to
    /// [`crate::output::handed_over`] (with no lock held).
    #[inline(always)]
    #[must_use]
    pub fn push(&mut self, encode: impl FnOnce(&mut [u8], &mut usize, &mut EventEncoder)) -> Option<usize> {
        self.lock.enter();
        let queued = if self.pos + MAX_EVENT_LEN > self.buf.len() { self.rotate() } else { None };
        encode(&mut self.buf, &mut self.pos, &mut self.enc);
        self.lock.leave();
        queued
    }

    /// Captures the stack of the program's call and appends an allocation event through
    /// `encode`, which leaves out the final stack field; this appends it: the stack id, or
    /// the capture's command for the writer to resolve (see [`resolve`]). Returns as
    /// [`ThreadState::push`].
    #[inline(always)]
    #[must_use]
    pub fn push_with_stack(
        &mut self,
        caller: &unwind::Caller,
        leaf: Option<u64>,
        encode: impl FnOnce(&mut [u8], &mut usize, &mut EventEncoder),
    ) -> Option<usize> {
        let deferred = defer_stacks();
        let switch = deferred != self.deferred;
        if switch {
            // Neither side knows the other's nodes: start the chains over.
            self.walker.forget();
        }
        let c = self.capture(caller);
        let node = if deferred { 0 } else { self.intern_leaf(&c, leaf) };
        self.lock.enter();
        let need = MAX_EVENT_LEN + resolve::command_len(c.depth - c.keep);
        // A buffer holds one kind of stack field.
        let queued = if switch || self.pos + need > self.buf.len() { self.rotate() } else { None };
        self.deferred = deferred;
        encode(&mut self.buf, &mut self.pos, &mut self.enc);
        if deferred {
            resolve::put_command_leaf(&mut self.buf, &mut self.pos, &c, self.walker.new_frames(&c), leaf);
        } else {
            heaplens_trace::varint::put_at(&mut self.buf, &mut self.pos, node.into());
        }
        self.lock.leave();
        queued
    }

    /// Counts a release of a null pointer: a no-op, so no event (see
    /// `heaplens_trace::EndRecord::null_frees`). A plain load and store: only this thread writes.
    #[inline(always)]
    pub fn count_null_free(&self) {
        self.null_frees.store(self.null_frees.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
    }

    /// Captures the stack of the program's call into the allocator (see [`unwind::Walker`]).
    #[inline(always)]
    pub fn capture(&mut self, caller: &unwind::Caller) -> unwind::Capture {
        let mut c = self.walker.capture(&self.stack, caller);
        if c.unknown_code && modules_changed() {
            // The first walk moved the chains in ways no command will replay: start afresh.
            self.walker.forget();
            c = self.walker.capture(&self.stack, caller);
        }
        self.stats.captures += 1;
        self.stats.unwound += c.unwound as u64;
        self.stats.repeats += u64::from(c.hit.is_some());
        self.stats.depth += c.depth as u64;
        if self.check.is_some() {
            self.check_capture(caller, &c);
        }
        c
    }

    /// `HEAPLENS_CHECK_UNWIND=1`: unwinds the same call whole with the second walker and counts
    /// whether the incremental capture `c` recorded the same stack. Out of the hot path.
    #[cold]
    #[inline(never)]
    fn check_capture(&mut self, caller: &unwind::Caller, c: &unwind::Capture) {
        let Some(full) = &mut self.check else { return };
        let f = full.capture(&self.stack, caller);
        // A walk that stopped in code of a module loaded since is compared on its next capture,
        // once both walkers know the module.
        if !c.unknown_code && !f.unknown_code {
            self.stats.checked += 1;
            if full.stack() != self.walker.stack() {
                self.stats.check_failures += 1;
            }
        }
    }

    /// This thread's capture counters, with its unwind-rule cache's.
    pub fn stats(&self) -> crate::stats::Stats {
        let c = self.walker.rule_cache_stats();
        crate::stats::Stats {
            rule_hits: c.hit_count,
            rule_misses: c.miss_empty_slot_count,
            rule_conflicts: c.miss_wrong_address_count + c.miss_wrong_modules_count,
            ..self.stats
        }
    }

    /// Interns capture `c` in place, through this thread's cache of trie edges; returns the
    /// stack's trie node.
    #[inline(always)]
    pub fn intern(&mut self, c: &unwind::Capture) -> u32 {
        let nodes = &mut self.nodes;
        self.walker.intern(c, |parent, addr| nodes.child(parent, addr))
    }

    /// [`ThreadState::intern`], with one more frame `leaf` below the stack (a pool's).
    #[inline(always)]
    pub fn intern_leaf(&mut self, c: &unwind::Capture, leaf: Option<u64>) -> u32 {
        let node = self.intern(c);
        match leaf {
            Some(l) => self.nodes.child(node, l),
            None => node,
        }
    }

    /// Updates this thread's aggregated-mode counters under its lock.
    #[inline(always)]
    pub fn counters(&mut self, f: impl FnOnce(&mut crate::aggregate::Counters)) {
        self.lock.enter();
        f(&mut self.agg);
        self.lock.leave();
    }

    /// Reads this thread's aggregated-mode counters from another thread (bounded wait, as in
    /// [`ThreadState::flush`]).
    pub fn visit_counters(&self, f: &mut dyn FnMut(&crate::aggregate::Counters)) {
        if self.lock.steal() {
            f(&self.agg);
            self.lock.unsteal();
        }
    }

    /// Hands over whatever the buffer holds (used by the writer's periodic sweep, exit, fork).
    /// Gives up after a bounded wait (see [`OwnerLock::steal`]).
    pub fn flush(&mut self) {
        if self.generation != GENERATION.load(Ordering::Acquire) {
            return; // a previous recording's state: its owner resets it on its next event
        }
        if self.lock.steal() {
            let _ = self.rotate();
            self.lock.unsteal();
        }
    }

    /// A new recording began (see [`new_generation`]): the owner starts its state over, its
    /// buffer's events and its trie edges belonging to the previous trace.
    #[cold]
    #[inline(never)]
    fn start_over(&mut self) {
        self.lock.enter();
        self.deferred = false;
        self.forget_recording();
        self.generation = GENERATION.load(Ordering::Acquire);
        self.lock.leave();
    }

    /// After fork, in the child: the thread has a new id, and the trie started over.
    pub fn reset_after_fork(&mut self) {
        self.tid = procinfo::gettid();
        self.lock.reset();
        EXITED_NULL_FREES.store(0, Ordering::Relaxed);
        self.forget_recording();
    }

    /// Drops what belonged to the trace being written before (trie edges, the walker's
    /// stacks, aggregates, the null-free count) and starts a new buffer.
    fn forget_recording(&mut self) {
        self.nodes.clear();
        self.walker.forget();
        self.agg = Default::default();
        self.null_frees.store(0, Ordering::Relaxed);
        self.begin();
    }
}

static mut KEY: libc::pthread_key_t = 0;

/// Creates the thread-exit hook. Call once, at start-up.
pub fn init_key() {
    // SAFETY: called once before any thread state exists.
    unsafe { libc::pthread_key_create(std::ptr::addr_of_mut!(KEY), Some(on_thread_exit)) };
}

/// The calling thread's state, created on its first event. `None` once the thread has been
/// torn down (late frees during thread exit are not recorded).
#[inline(always)]
pub fn current() -> Option<&'static mut ThreadState> {
    let slot = tls::slot();
    if !slot.thread.is_null() {
        // SAFETY: set below to a leaked Box that only this thread's exit frees.
        let st = unsafe { &mut *(slot.thread as *mut ThreadState) };
        if st.generation != GENERATION.load(Ordering::Relaxed) {
            st.start_over();
        }
        return Some(st);
    }
    if slot.dead != 0 {
        return None;
    }
    create()
}

#[cold]
fn create() -> Option<&'static mut ThreadState> {
    let st = Box::into_raw(Box::new(ThreadState::new(crate::config().max_frames, procinfo::thread_stack())));
    REGISTRY.lock().ok()?.push(st as usize);
    LIVE.fetch_add(1, Ordering::Relaxed);
    tls::slot().thread = st.cast();
    // SAFETY: KEY was created at start-up; the value is only read back by on_thread_exit.
    unsafe { libc::pthread_setspecific(KEY, st.cast()) };
    // SAFETY: freshly leaked, owned by this thread.
    Some(unsafe { &mut *st })
}

/// glibc's `PTHREAD_DESTRUCTOR_ITERATIONS`: rounds of thread-specific destructors it runs at
/// thread exit, as long as some destructor sets a value again.
const DESTRUCTOR_ROUNDS: u32 = 4;

/// The thread-exit hook. The program's own thread-specific destructors run in the same rounds,
/// after this one (its keys were made later), and free and allocate: so every round but the last
/// sets the key again and keeps the state, and only the last round tears it down. (C++
/// `thread_local` destructors run before any of these rounds.)
unsafe extern "C" fn on_thread_exit(p: *mut libc::c_void) {
    let Some(_g) = tls::Guard::enter() else { return };
    let st = p as *mut ThreadState;
    (*st).exit_rounds += 1;
    if (*st).exit_rounds < DESTRUCTOR_ROUNDS {
        libc::pthread_setspecific(KEY, p);
        return;
    }
    let state = &mut *st;
    // Handed over before it leaves the registry: `solo.rs` counts on finding every thread's
    // events in the registry's states or the queue.
    let registry = REGISTRY.lock();
    state.flush();
    if let Ok(mut r) = registry {
        r.retain(|&x| x != st as usize);
    }
    LIVE.fetch_sub(1, Ordering::Relaxed);
    crate::stats::add_stats(&state.stats());
    crate::aggregate::retire(&state.agg);
    EXITED_NULL_FREES.fetch_add(state.null_frees.load(Ordering::Relaxed), Ordering::Relaxed);
    queue::thread_name(state.tid);
    let slot = tls::slot();
    slot.thread = std::ptr::null_mut();
    slot.dead = 1;
    drop(Box::from_raw(st));
}

/// Flushes every registered thread's buffer (the writer's sweep, exit).
pub fn flush_all() {
    let Ok(r) = REGISTRY.lock() else { return };
    for &p in r.iter() {
        // SAFETY: registered states stay alive until removed under this lock.
        unsafe { (*(p as *mut ThreadState)).flush() };
    }
}

static LAST_ADDS: AtomicU64 = AtomicU64::new(0);

/// The walk stopped in unknown code: if the loader has mapped something since we last looked
/// (a dlopen), refresh the module map. Returns whether anything changed.
#[cold]
fn modules_changed() -> bool {
    let now = modules::loader_adds();
    if LAST_ADDS.swap(now, Ordering::AcqRel) == now {
        return false;
    }
    let changes = modules::refresh(procinfo::now_ns());
    queue::module_changes(&changes);
    !changes.is_empty()
}
