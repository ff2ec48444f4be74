//! Replays the merged event stream: the live set, the peak, temporaries, size bins, and
//! counters per allocation stack. Everything per-function is derived later from the per-stack
//! counters, so this loop does no symbol work and allocates only when the live set grows.
//!
//! **Sampled traces.** When the trace was recorded with a sampling rate `R` (see
//! [`heaplens_trace::ProcessRecord::sample_rate`]), an allocation of `s` bytes was recorded
//! with probability `p(s) = 1 - exp(-s / R)`, and a deallocation only when its block was
//! recorded. Each recorded block then stands for `1 / p(s)` blocks and `s / p(s)` bytes (the
//! correction pprof applies to heap profiles), and every counter here adds those weights
//! instead of 1 and `s`, so all of them are unbiased estimates. That is why counters are
//! `f64`: they hold exact integers when the trace is not sampled (every count below 2^53), and
//! the report rounds them only after summing them into its rows.

use std::sync::Arc;

use heaplens_interpret::idmap::IdTable;
use heaplens_interpret::merge::{Consumer, Merger};
use heaplens_trace::{Event, Op, OpClass, TimeMap};

use self::chunk::ChunkSource;
use self::live::LiveMap;

pub mod aggregated;
mod arena;
pub(crate) mod chunk;
pub mod from_file;
mod live;
pub(crate) mod split;
mod tail;
pub(crate) use tail::{Join, TailLog};

/// Number of exact-size bins (0..=1024) plus one for larger sizes, as in mprof.
pub const BIN_COUNT: usize = 1026;
/// The largest size with its own bin.
pub const BIN_MAX_EXACT: u64 = 1024;

/// mprof's size classes: s = 0..=32, m = 33..=256, l = 257..=2048, x = larger (bytes).
pub use heaplens_trace::aggregate::size_class;

#[inline(always)]
fn bin_of(size: u64) -> usize {
    size.min(BIN_MAX_EXACT + 1) as usize
}

/// [`size_class`] by table, without branches (sizes come in any order): three instructions
/// where three comparisons took nine.
#[inline(always)]
fn class_of(size: u64) -> usize {
    usize::from(CLASS_OF[size.min(CLASSED) as usize])
}

/// Sizes up to this have a [`CLASS_OF`] entry of their own; larger ones share the last.
const CLASSED: u64 = 2049;
const CLASS_OF: [u8; CLASSED as usize + 1] = {
    let mut t = [0u8; CLASSED as usize + 1];
    let mut size = 0;
    while size <= CLASSED as usize {
        t[size] = (size > 32) as u8 + (size > 256) as u8 + (size > 2048) as u8;
        size += 1;
    }
    t
};

/// Counters of one allocation stack (trie node). Byte counts are requested sizes. All counts
/// are weighted (see the module documentation): exact integers for unsampled traces.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StackStats {
    /// The trie node id.
    pub stack: u32,
    /// Successful allocations made from this stack.
    pub allocs: f64,
    /// Bytes requested by them.
    pub bytes: f64,
    /// `bytes` split by [`size_class`].
    pub bytes_by_class: [f64; 4],
    /// Of these allocations, how many were released.
    pub frees: f64,
    /// Blocks still live at the end of the trace.
    pub kept: f64,
    /// Bytes still live at the end of the trace.
    pub kept_bytes: f64,
    /// `kept_bytes` split by [`size_class`].
    pub kept_by_class: [f64; 4],
    /// Allocations whose thread's next event was their own release.
    pub temporary: f64,
}

/// Per-size counters, mprof's allocation bin table: index = size for 0..=1024, 1025 = larger.
#[derive(Debug, Clone)]
pub struct Bins {
    /// Allocations per bin.
    pub allocs: Vec<f64>,
    /// Bytes allocated per bin.
    pub bytes: Vec<f64>,
    /// Releases of blocks per bin (by the size they were allocated with).
    pub frees: Vec<f64>,
    /// Bytes released per bin.
    pub freed_bytes: Vec<f64>,
}

impl Default for Bins {
    fn default() -> Self {
        Self {
            allocs: vec![0.0; BIN_COUNT],
            bytes: vec![0.0; BIN_COUNT],
            frees: vec![0.0; BIN_COUNT],
            freed_bytes: vec![0.0; BIN_COUNT],
        }
    }
}

/// Everything the replay counts. Counts and bytes are weighted (see the module
/// documentation).
#[derive(Debug, Clone, Default)]
pub struct Replay {
    /// Calls per allocating entry point (alloc and realloc classes, failed ones included),
    /// indexed by `Op as u8`.
    pub calls_by_op: Vec<f64>,
    /// Calls per releasing entry point, indexed by `Op as u8`.
    pub frees_by_op: Vec<f64>,
    /// Successful allocations (a successful realloc counts as one).
    pub allocations: f64,
    /// Releases of tracked live blocks (a moving realloc releases one; an allocation returning
    /// an address that was still live implies one, see `overwritten`).
    pub deallocations: f64,
    /// Releases of addresses that were not live (allocated before tracking or untracked).
    pub unmatched_frees: f64,
    /// `free(NULL)` and friends: no-ops.
    pub null_frees: f64,
    /// Allocations returning an address that was still live: its release was not seen.
    pub overwritten: f64,
    /// Allocations that returned NULL.
    pub failed_allocations: f64,
    /// Bytes requested by successful allocations.
    pub bytes_allocated: f64,
    /// Highest sum of live requested bytes.
    pub peak_bytes: f64,
    /// Live blocks at that moment.
    pub peak_objects: f64,
    /// Timestamp (`CLOCK_MONOTONIC` ns) when the peak was first reached; 0 with no events.
    pub peak_ts: u64,
    /// Live bytes at the end.
    pub leaked_bytes: f64,
    /// Live blocks at the end.
    pub leaked_objects: f64,
    /// Temporary allocations (heaptrack's definition).
    pub temporary_allocations: f64,
    /// Events replayed (recorded events, not weighted).
    pub events: u64,
    /// First and last event timestamps.
    pub first_ts: Option<u64>,
    /// Last event timestamp.
    pub last_ts: Option<u64>,
    /// Distinct threads with events.
    pub threads: u64,
    /// Per-stack counters, one entry per stack that allocated, in order of first use.
    pub stacks: Vec<StackStats>,
    /// Size bins.
    pub bins: Bins,
    /// The sampling rate the weights come from (0: every allocation was recorded).
    pub sample_rate: u64,
    /// Events payloads whose records stopped decoding part-way (damaged after their checksum).
    pub malformed_blocks: u64,
}

pub use heaplens_interpret::idmap::{IdHasher, IdMap};

/// The weight of a recorded allocation of `size` bytes: how many allocations it stands for.
#[derive(Debug, Clone, Copy)]
pub struct Weights {
    rate: f64,
}

impl Weights {
    /// The weights of a trace sampled at `sample_rate` bytes (0: not sampled).
    pub fn new(sample_rate: u64) -> Self {
        Self { rate: sample_rate as f64 }
    }

    /// `1 / p(size)`; 1 for unsampled traces, and for zero-byte blocks (which a sampler over
    /// bytes never picks, so one in a trace was recorded for another reason).
    #[inline(always)]
    pub fn of(&self, size: u64) -> f64 {
        if self.rate == 0.0 || size == 0 {
            return 1.0;
        }
        let p = -(-(size as f64) / self.rate).exp_m1();
        if p > 0.0 {
            1.0 / p
        } else {
            1.0
        }
    }
}

/// The type the replay counts in: `u64` when every allocation was recorded (each counts 1),
/// `f64` for sampled traces (each counts its weight).
pub(crate) trait Counter:
    Copy + Default + PartialOrd + std::ops::AddAssign + std::ops::SubAssign + std::ops::Mul<Output = Self>
{
    /// Whether events have weights.
    const SAMPLED: bool;
    /// The weight of a recorded block of `size` bytes.
    fn weight(w: &Weights, size: u64) -> Self;
    /// `size` as a count.
    fn size(size: u64) -> Self;
    /// Nothing.
    fn zero() -> Self;
    /// One.
    fn one() -> Self;
    /// As a float.
    fn f(self) -> f64;
}

impl Counter for u64 {
    const SAMPLED: bool = false;
    #[inline(always)]
    fn weight(_: &Weights, _: u64) -> Self {
        1
    }
    #[inline(always)]
    fn size(size: u64) -> Self {
        size
    }
    #[inline(always)]
    fn zero() -> Self {
        0
    }
    #[inline(always)]
    fn one() -> Self {
        1
    }
    #[inline(always)]
    fn f(self) -> f64 {
        self as f64
    }
}

impl Counter for f64 {
    const SAMPLED: bool = true;
    #[inline(always)]
    fn weight(w: &Weights, size: u64) -> Self {
        w.of(size)
    }
    #[inline(always)]
    fn size(size: u64) -> Self {
        size as f64
    }
    #[inline(always)]
    fn zero() -> Self {
        0.0
    }
    #[inline(always)]
    fn one() -> Self {
        1.0
    }
    #[inline(always)]
    fn f(self) -> f64 {
        self
    }
}

/// Counters of one stack while replaying; [`StackStats`] is derived from them at the end.
#[derive(Debug, Clone, Copy, Default)]
struct StackAcc<C> {
    allocs: C,
    bytes_by_class: [C; 4],
    frees: C,
    freed_by_class: [C; 4],
    temporary: C,
}

impl<C: Counter> StackAcc<C> {
    /// Adds the counters of `other` (the same stack in another part of the trace).
    pub(crate) fn add(&mut self, other: &Self) {
        self.allocs += other.allocs;
        self.frees += other.frees;
        self.temporary += other.temporary;
        for c in 0..4 {
            self.bytes_by_class[c] += other.bytes_by_class[c];
            self.freed_by_class[c] += other.freed_by_class[c];
        }
    }
}

impl<C: Counter, const TAIL: bool> Consumer for Counts<C, TAIL> {
    #[inline(always)]
    fn begin_run(&mut self, stream: u32, first_ts: u64) -> u64 {
        Counts::begin_run(self, stream, first_ts)
    }
    #[inline(always)]
    fn event(&mut self, e: &Event, last: &mut u64) {
        Counts::event(self, e, last)
    }
    #[inline(always)]
    fn end_run(&mut self, stream: u32, last: u64, events: u64, last_ts: u64, max_ts: u64) {
        Counts::end_run(self, stream, last, events, last_ts, max_ts)
    }
}

/// Replay state while walking events, counting in `C` (see [`Counter`]). Threads are small
/// indices (streams); their thread ids do not matter here. Only what cannot be derived later
/// is counted per event: totals come from the per-stack and per-bin counters, and what is live
/// at the end from allocations minus releases.
pub(crate) struct Counts<C, const TAIL: bool = false> {
    w: Weights,
    /// What a tail replay (one that starts part-way through the trace, see `tail.rs`) notes
    /// for joining it to the replay before it; empty otherwise.
    tail: TailLog,
    live: LiveMap,
    /// Trie node id -> index into `stacks` (u32::MAX = none yet); sized by the stacks seen,
    /// not by the ids a damaged trace may declare.
    slot_of: IdTable<u32>,
    stacks: Vec<StackAcc<C>>,
    stack_ids: Vec<u32>,
    calls_by_op: Vec<C>,
    frees_by_op: Vec<C>,
    failed: C,
    overwritten: C,
    unmatched_frees: u64,
    null_frees: u64,
    events: u64,
    threads: u64,
    malformed: u64,
    /// Allocations and releases per size bin.
    bin_allocs: Vec<C>,
    bin_frees: Vec<C>,
    /// Bytes of the `> 1024` bin (the others are size * count).
    big_bytes: C,
    big_freed: C,
    /// Per thread: the address its last event allocated, 0 if its last event was anything else.
    last_alloc: Vec<u64>,
    seen: Vec<bool>,
    cur_bytes: C,
    cur_objects: C,
    peak_bytes: C,
    peak_objects: C,
    /// Raw timestamps, converted at the end.
    first_ts: Option<u64>,
    last_ts: u64,
    peak_ts: u64,
    /// Largest (timestamp, thread) replayed so far.
    max_key: (u64, u32),
}

impl<C: Counter, const TAIL: bool> Counts<C, TAIL> {
    pub(crate) fn new(w: Weights) -> Self {
        let n_ops = Op::ALL.iter().map(|&o| o as usize).max().unwrap_or(0) + 1;
        Self {
            w,
            tail: TailLog::default(),
            live: LiveMap::default(),
            slot_of: IdTable::new(u32::MAX),
            stacks: Vec::new(),
            stack_ids: Vec::new(),
            calls_by_op: vec![C::zero(); n_ops],
            frees_by_op: vec![C::zero(); n_ops],
            failed: C::zero(),
            overwritten: C::zero(),
            unmatched_frees: 0,
            null_frees: 0,
            events: 0,
            threads: 0,
            malformed: 0,
            bin_allocs: vec![C::zero(); BIN_COUNT],
            bin_frees: vec![C::zero(); BIN_COUNT],
            big_bytes: C::zero(),
            big_freed: C::zero(),
            last_alloc: Vec::new(),
            seen: Vec::new(),
            cur_bytes: C::zero(),
            cur_objects: C::zero(),
            peak_bytes: C::zero(),
            peak_objects: C::zero(),
            first_ts: None,
            last_ts: 0,
            peak_ts: 0,
            max_key: (0, 0),
        }
    }

    /// Takes the live map's memory from `source`.
    pub(crate) fn use_chunks(&mut self, source: Arc<ChunkSource>) {
        self.live.use_chunks(source);
    }

    /// The largest (timestamp, stream) replayed so far.
    pub(crate) fn max_key(&self) -> (u64, u32) {
        self.max_key
    }

    #[inline(always)]
    fn slot(&mut self, stack: u32) -> u32 {
        let s = self.slot_of.get(stack);
        if s != u32::MAX {
            return s;
        }
        self.new_slot(stack)
    }

    #[cold]
    #[inline(never)]
    fn new_slot(&mut self, stack: u32) -> u32 {
        // A wild id (a damaged writer) would size the table by it: count it as no stack.
        let stack = if stack > heaplens_interpret::load::MAX_STACK_ID { 0 } else { stack };
        let s = self.slot_of.get(stack);
        if s != u32::MAX {
            return s;
        }
        let s = self.stacks.len() as u32;
        self.slot_of.set(stack, s);
        self.stacks.push(StackAcc::default());
        self.stack_ids.push(stack);
        s
    }

    #[inline(always)]
    fn weight(&self, size: u64) -> C {
        C::weight(&self.w, size)
    }

    #[inline(always)]
    fn alloc(&mut self, e: &Event, w: C) {
        let slot = self.slot(e.stack);
        if let Some(old) = self.live.insert(e.addr, e.size, slot) {
            self.overwritten(old);
        }
        if TAIL {
            self.tail.touched.insert(e.addr);
        }
        let bytes = C::size(e.size) * w;
        let s = &mut self.stacks[slot as usize];
        s.allocs += w;
        s.bytes_by_class[class_of(e.size)] += bytes;
        let b = bin_of(e.size);
        self.bin_allocs[b] += w;
        if b == BIN_COUNT - 1 {
            self.big_bytes += bytes;
        }
        self.cur_bytes += bytes;
        self.cur_objects += w;
        if self.cur_bytes > self.peak_bytes {
            self.peak_bytes = self.cur_bytes;
            self.peak_objects = self.cur_objects;
            self.peak_ts = e.ts;
        }
    }

    /// An allocation returned an address that was still live: the release of the block that
    /// had it was never seen.
    #[cold]
    #[inline(never)]
    fn overwritten(&mut self, (size, slot): (u64, u32)) {
        let w = self.weight(size);
        self.overwritten += w;
        self.release(size, slot, w, false);
    }

    /// Releases `addr` for a thread whose last event allocated `last`; `None` if it was not
    /// live, else the block's weight.
    #[inline(always)]
    fn free(&mut self, last: u64, addr: u64) -> Option<C> {
        let (size, slot) = self.live.remove(addr)?;
        let w = self.weight(size);
        if TAIL && last >> 63 != 0 {
            // The thread's first event in a tail replay: temporary if its last event before
            // allocated this address, which only the join can tell.
            self.tail.first_release(last, addr, slot);
        }
        self.release(size, slot, w, last == addr);
        Some(w)
    }

    #[inline(always)]
    fn release(&mut self, size: u64, slot: u32, w: C, temporary: bool) {
        let bytes = C::size(size) * w;
        let s = &mut self.stacks[slot as usize];
        s.frees += w;
        s.freed_by_class[class_of(size)] += bytes;
        if temporary {
            s.temporary += w;
        }
        let b = bin_of(size);
        self.bin_frees[b] += w;
        if b == BIN_COUNT - 1 {
            self.big_freed += bytes;
        }
        self.cur_bytes -= bytes;
        self.cur_objects -= w;
    }

    /// Starts a run of events of thread (stream) `t`: returns the address its last event
    /// allocated, for [`Counts::event`].
    #[inline(always)]
    pub fn begin_run(&mut self, t: u32, first_ts: u64) -> u64 {
        let t = t as usize;
        if !self.seen.get(t).copied().unwrap_or(false) {
            if t >= self.seen.len() {
                self.seen.resize(t + 1, false);
                let from = self.last_alloc.len();
                self.last_alloc.resize(t + 1, 0);
                if TAIL {
                    // The thread's last event is before the tail: unknown here (see `tail.rs`).
                    for (j, l) in self.last_alloc.iter_mut().enumerate().skip(from) {
                        *l = tail::unknown_last(j as u32);
                    }
                }
            }
            self.seen[t] = true;
            self.threads += 1;
        }
        if self.first_ts.is_none() {
            self.first_ts = Some(first_ts);
        }
        self.last_alloc[t]
    }

    /// Ends a run of `events` events of thread `t`, the last at `last_ts`, the latest at
    /// `max_ts`.
    #[inline(always)]
    pub fn end_run(&mut self, t: u32, last_alloc: u64, events: u64, last_ts: u64, max_ts: u64) {
        self.last_alloc[t as usize] = last_alloc;
        self.events += events;
        self.last_ts = last_ts;
        if (max_ts, t) > self.max_key {
            self.max_key = (max_ts, t);
        }
    }

    /// Replays one event of the current run; `last` is the address the thread's previous
    /// event allocated (0 if none), updated.
    #[inline(always)]
    pub fn event(&mut self, e: &Event, last: &mut u64) {
        let mut allocated = 0;
        match e.op.class() {
            OpClass::Alloc => {
                let w = self.weight(e.size);
                self.calls_by_op[e.op as usize] += w;
                if e.addr == 0 {
                    self.failed += w;
                } else {
                    self.alloc(e, w);
                    allocated = e.addr;
                }
            }
            OpClass::Realloc => self.realloc(e, *last, &mut allocated),
            OpClass::Dealloc => {
                let w = if e.addr == 0 {
                    self.null_frees += 1;
                    C::one()
                } else {
                    match self.free(*last, e.addr) {
                        Some(w) => w,
                        None => {
                            self.unmatched(e.addr, *last);
                            C::one()
                        }
                    }
                };
                self.frees_by_op[e.op as usize] += w;
            }
        }
        *last = allocated;
    }

    /// A release of `addr`, which is not live, by a thread whose last event allocated `last`:
    /// unmatched, or in a tail replay possibly a block allocated before it started.
    #[inline(always)]
    fn unmatched(&mut self, addr: u64, last: u64) {
        if TAIL {
            self.pending(addr, last);
        } else {
            self.unmatched_frees += 1;
        }
    }

    #[inline(never)]
    fn realloc(&mut self, e: &Event, last: u64, allocated: &mut u64) {
        if e.addr != 0 || e.size == 0 {
            // A sampled trace records a realloc whose new block was not sampled as a bare
            // release (address 0, size 0): the call itself is estimated through the sampled
            // new blocks only.
            let w = if C::SAMPLED && e.addr == 0 { C::zero() } else { self.weight(e.size) };
            self.calls_by_op[e.op as usize] += w;
            if e.old_addr != 0 && self.free(last, e.old_addr).is_none() {
                self.unmatched(e.old_addr, last);
            }
            if e.addr != 0 {
                self.alloc(e, w);
                *allocated = e.addr;
            }
        } else {
            let w = self.weight(e.size);
            self.calls_by_op[e.op as usize] += w;
            self.failed += w;
        }
    }

    /// The counters, with timestamps mapped through `clock`.
    fn finish(self, clock: &TimeMap, sample_rate: u64) -> Replay {
        let f = |v: &[C]| v.iter().map(|c| c.f()).collect::<Vec<f64>>();
        let mut r = Replay {
            calls_by_op: f(&self.calls_by_op),
            frees_by_op: f(&self.frees_by_op),
            unmatched_frees: self.unmatched_frees as f64,
            null_frees: self.null_frees as f64,
            overwritten: self.overwritten.f(),
            failed_allocations: self.failed.f(),
            peak_bytes: self.peak_bytes.f(),
            peak_objects: self.peak_objects.f(),
            events: self.events,
            threads: self.threads,
            sample_rate,
            malformed_blocks: self.malformed,
            ..Replay::default()
        };
        // What is live at the end: for a sampled trace summed from the live blocks' weights
        // (allocations minus releases could leave rounding dust), else counted exactly.
        let mut kept = vec![(0.0, [0.0; 4]); self.stacks.len()];
        if C::SAMPLED {
            let (w, stacks) = (self.w, &mut kept);
            self.live.for_each(|_, size, slot| {
                let wt = w.of(size);
                let k = &mut stacks[slot as usize];
                k.0 += wt;
                k.1[class_of(size)] += size as f64 * wt;
            });
        } else {
            for (k, s) in kept.iter_mut().zip(&self.stacks) {
                k.0 = s.allocs.f() - s.frees.f();
                for c in 0..4 {
                    k.1[c] = s.bytes_by_class[c].f() - s.freed_by_class[c].f();
                }
            }
        }
        r.stacks = Vec::with_capacity(self.stacks.len());
        for ((s, &stack), k) in self.stacks.iter().zip(&self.stack_ids).zip(&kept) {
            let bytes_by_class = s.bytes_by_class.map(C::f);
            let st = StackStats {
                stack,
                allocs: s.allocs.f(),
                bytes: bytes_by_class.iter().sum(),
                bytes_by_class,
                frees: s.frees.f(),
                kept: k.0,
                kept_bytes: k.1.iter().sum(),
                kept_by_class: k.1,
                temporary: s.temporary.f(),
            };
            r.allocations += st.allocs;
            r.bytes_allocated += st.bytes;
            r.deallocations += st.frees;
            r.temporary_allocations += st.temporary;
            r.leaked_objects += st.kept;
            r.leaked_bytes += st.kept_bytes;
            r.stacks.push(st);
        }
        for b in 0..BIN_COUNT {
            r.bins.allocs[b] = self.bin_allocs[b].f();
            r.bins.frees[b] = self.bin_frees[b].f();
            (r.bins.bytes[b], r.bins.freed_bytes[b]) = if b == BIN_COUNT - 1 {
                (self.big_bytes.f(), self.big_freed.f())
            } else {
                (self.bin_allocs[b].f() * b as f64, self.bin_frees[b].f() * b as f64)
            };
        }
        r.first_ts = self.first_ts.map(|t| clock.to_ns(t));
        r.last_ts = self.first_ts.map(|_| clock.to_ns(self.last_ts));
        r.peak_ts = if r.peak_bytes > 0.0 { clock.to_ns(self.peak_ts) } else { 0 };
        r
    }
}

/// The replay's state: exact integer counts, or weighted ones for a sampled trace.
pub(crate) enum State {
    Exact(Counts<u64>),
    Sampled(Counts<f64>, u64),
}

impl State {
    /// Replays into these counters, in merge order, the events of `m` up to `horizon` (see
    /// [`Merger::run`]).
    pub(crate) fn run(&mut self, m: &mut Merger<'_>, horizon: u64) {
        match self {
            State::Exact(c) => m.run(c, horizon),
            State::Sampled(c, _) => m.run(c, horizon),
        }
    }

    pub fn new(sample_rate: u64) -> Self {
        if sample_rate == 0 {
            State::Exact(Counts::new(Weights::new(0)))
        } else {
            State::Sampled(Counts::new(Weights::new(sample_rate)), sample_rate)
        }
    }

    /// The same, its live map taking chunks from `source`.
    pub fn with_chunks(sample_rate: u64, source: &Arc<ChunkSource>) -> Self {
        let mut st = Self::new(sample_rate);
        match &mut st {
            State::Exact(c) => c.use_chunks(source.clone()),
            State::Sampled(c, _) => c.use_chunks(source.clone()),
        }
        st
    }

    /// The sampling rate the weights come from.
    pub fn sample_rate(&self) -> u64 {
        match self {
            State::Exact(_) => 0,
            State::Sampled(_, r) => *r,
        }
    }

    /// Whether any event was replayed.
    pub fn replayed(&self) -> bool {
        match self {
            State::Exact(c) => c.first_ts.is_some(),
            State::Sampled(c, _) => c.first_ts.is_some(),
        }
    }

    /// The largest (timestamp, stream) replayed so far.
    pub fn max_key(&self) -> (u64, u32) {
        match self {
            State::Exact(c) => c.max_key(),
            State::Sampled(c, _) => c.max_key(),
        }
    }

    /// Events payloads that stopped decoding part-way.
    pub fn add_malformed(&mut self, n: u64) {
        match self {
            State::Exact(c) => c.malformed += n,
            State::Sampled(c, _) => c.malformed += n,
        }
    }

    /// Replays one event of thread `t` on its own (a run of one).
    pub fn event_alone(&mut self, e: &Event, t: u32) {
        fn one<C: Counter>(c: &mut Counts<C>, e: &Event, t: u32) {
            let mut last = c.begin_run(t, e.ts);
            c.event(e, &mut last);
            c.end_run(t, last, 1, e.ts, e.ts);
        }
        match self {
            State::Exact(c) => one(c, e, t),
            State::Sampled(c, _) => one(c, e, t),
        }
    }

    /// The counters, with timestamps mapped through `clock`.
    pub fn finish(self, clock: &TimeMap) -> Replay {
        match self {
            State::Exact(c) => c.finish(clock, 0),
            State::Sampled(c, r) => c.finish(clock, r),
        }
    }
}

/// Replays `events` (in timestamp order, timestamps already in nanoseconds) of a trace that
/// recorded every allocation.
pub fn replay(events: impl Iterator<Item = Event>) -> Replay {
    replay_sampled(events, 0)
}

/// Replays `events` of a trace sampled at `sample_rate` bytes (0: not sampled).
pub fn replay_sampled(events: impl Iterator<Item = Event>, sample_rate: u64) -> Replay {
    let mut st = State::new(sample_rate);
    let mut index: IdMap<u32, u32> = IdMap::default();
    let mut last = (u32::MAX, 0u32);
    for e in events {
        if e.tid != last.0 {
            let n = index.len() as u32;
            last = (e.tid, *index.entry(e.tid).or_insert(n));
        }
        st.event_alone(&e, last.1);
    }
    st.finish(&TimeMap::default())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(ts: u64, tid: u32, op: Op, addr: u64, old_addr: u64, size: u64, stack: u32) -> Event {
        Event { ts, tid, op, addr, old_addr, size, usable: size, stack }
    }

    #[test]
    fn realloc_free_unmatched_failed_and_temporaries() {
        let evs = [
            ev(1, 1, Op::Malloc, 0x100, 0, 10, 1),      // A
            ev(2, 1, Op::Free, 0x100, 0, 0, 0),         // A freed right away: temporary
            ev(3, 1, Op::Malloc, 0x200, 0, 20, 1),      // B
            ev(4, 2, Op::Malloc, 0x300, 0, 30, 2),      // C (other thread)
            ev(5, 1, Op::Realloc, 0x400, 0x200, 50, 1), // B -> D; B's release is temporary (heaptrack)
            ev(6, 1, Op::Free, 0x999, 0, 0, 0),         // unmatched
            ev(7, 1, Op::Malloc, 0, 0, 1 << 40, 1),     // failed
            ev(8, 1, Op::Realloc, 0, 0x400, 0, 1),      // realloc(D, 0): release only
            ev(9, 1, Op::Realloc, 0, 0x300, 99, 1),     // failed realloc: C stays
            ev(10, 1, Op::Free, 0, 0, 0, 0),            // free(NULL)
        ];
        let r = replay(evs.into_iter());
        assert_eq!(r.allocations, 4.0);
        assert_eq!(r.deallocations, 3.0);
        assert_eq!(r.leaked_objects, 1.0);
        assert_eq!(r.leaked_bytes, 30.0);
        assert_eq!(r.unmatched_frees, 1.0);
        assert_eq!(r.null_frees, 1.0);
        assert_eq!(r.failed_allocations, 2.0);
        assert_eq!(r.temporary_allocations, 2.0);
        assert_eq!(r.bytes_allocated, 110.0);
        assert_eq!((r.peak_bytes, r.peak_ts), (80.0, 5));
        assert_eq!(r.calls_by_op[Op::Malloc as usize], 4.0);
        assert_eq!(r.calls_by_op[Op::Realloc as usize], 3.0);
        assert_eq!(r.frees_by_op[Op::Free as usize], 3.0);
        assert_eq!(r.threads, 2);
        assert_eq!(r.allocations - r.deallocations, r.leaked_objects);
        let s2 = r.stacks.iter().find(|s| s.stack == 2).unwrap();
        assert_eq!((s2.allocs, s2.kept, s2.kept_bytes, s2.kept_by_class), (1.0, 1.0, 30.0, [30.0, 0.0, 0.0, 0.0]));
        assert_eq!(r.bins.frees[50], 1.0);
        assert_eq!(r.bins.allocs[10], 1.0);
    }

    #[test]
    fn classes_and_bins() {
        for size in (0..5000).chain([u64::MAX, 1 << 40]) {
            assert_eq!(class_of(size), size_class(size), "{size}");
            assert_eq!(bin_of(size), if size <= BIN_MAX_EXACT { size as usize } else { BIN_COUNT - 1 });
        }
    }

    #[test]
    fn reused_live_address_implies_a_release() {
        let evs = [ev(1, 1, Op::Malloc, 0x100, 0, 10, 1), ev(2, 1, Op::Malloc, 0x100, 0, 2000, 1)];
        let r = replay(evs.into_iter());
        assert_eq!((r.allocations, r.deallocations, r.overwritten, r.leaked_objects), (2.0, 1.0, 1.0, 1.0));
        assert_eq!(r.bins.allocs[BIN_COUNT - 1], 1.0);
        assert_eq!(r.leaked_bytes, 2000.0);
    }

    #[test]
    fn sampled_events_are_weighted() {
        // Rate 1000: a 500-byte block is recorded with p = 1 - e^-0.5.
        let w = 1.0 / (1.0 - (-0.5f64).exp());
        let evs = [
            ev(1, 1, Op::Malloc, 0x100, 0, 500, 1),
            ev(2, 1, Op::Malloc, 0x200, 0, 500, 1),
            ev(3, 1, Op::Free, 0x100, 0, 0, 0),
            ev(4, 1, Op::Realloc, 0, 0x200, 0, 1), // only the release of a sampled block
        ];
        let r = replay_sampled(evs.into_iter(), 1000);
        assert_eq!(r.sample_rate, 1000);
        assert!((r.allocations - 2.0 * w).abs() < 1e-9);
        assert!((r.bytes_allocated - 1000.0 * w).abs() < 1e-9);
        assert!((r.peak_bytes - 1000.0 * w).abs() < 1e-9);
        assert!((r.deallocations - 2.0 * w).abs() < 1e-9);
        assert!((r.frees_by_op[Op::Free as usize] - w).abs() < 1e-9);
        assert!((r.calls_by_op[Op::Malloc as usize] - 2.0 * w).abs() < 1e-9);
        assert_eq!(r.calls_by_op[Op::Realloc as usize], 0.0);
        assert!(r.leaked_bytes.abs() < 1e-9);
    }
}
