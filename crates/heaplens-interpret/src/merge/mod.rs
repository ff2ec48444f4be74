//! Merging the threads' event streams by time, straight into the replay.
//!
//! The order is that of a k-way merge on `(timestamp, stream)`, a stream's index being the
//! order in which its thread's first block appears in the file: at every step the smallest
//! head goes next (the heads are kept in `heads.rs`), and each stream keeps its own order.
//! Instead of one queue operation per event, the merger replays a *run* of events from one
//! stream for as long as they stay below the smallest head of the others, so a single thread,
//! or threads whose blocks do not overlap in time, cost one comparison per event.
//!
//! The merger can also start before the whole trace is read ([`Merger::run`] with a horizon):
//! it then assumes that a stream with no more events in memory has none older than what was
//! already replayed, and [`Merger::push`] checks that assumption for every block that arrives;
//! when it fails the caller replays again from the start. Such a streaming merger releases each
//! payload once replayed.
//!
//! Payloads are decoded as they are replayed ([`crate::decode::Cursor`]), unless the reader
//! thread decoded them ahead (`predecode.rs`).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use heaplens_trace::Event;

mod heads;
pub mod ondisk;

use self::heads::Heads;
use self::ondisk::{BlockAt, DiskBlocks};
use crate::decode::ahead::{Ahead, Slot};
use crate::decode::{Cursor, CursorPool};

/// A stream's payloads: borrowed from a loaded trace, or shared with the reader thread, which
/// may decode them ahead (see [`crate::decode::ahead`]).
enum Blocks<'a> {
    Borrowed(&'a [Vec<u8>]),
    Shared(Vec<Arc<Slot>>),
    /// Read from the file when reached (see `ondisk.rs`).
    OnDisk(Arc<DiskBlocks>, Vec<BlockAt>),
}

impl Blocks<'_> {
    #[inline(always)]
    fn len(&self) -> usize {
        match self {
            Blocks::Borrowed(b) => b.len(),
            Blocks::Shared(b) => b.len(),
            Blocks::OnDisk(_, b) => b.len(),
        }
    }
}

/// One thread's payloads and where its decoding stands.
struct Stream<'a> {
    blocks: Blocks<'a>,
    /// The current payload; `blk == len` when every payload in memory was used.
    blk: usize,
    /// The current payload, being decoded (`None`: not opened yet).
    cur: Option<Cursor>,
    /// The next event, decoded but not replayed (it is in the heap).
    head: Option<Event>,
    /// The index of `blocks[0]` among all the stream's payloads (a tail merger leaves out those
    /// before its cut).
    first: usize,
    /// How many payloads at the start of `blocks` are not released when done with.
    keep: usize,
}

impl<'a> Stream<'a> {
    fn new(blocks: Blocks<'a>) -> Self {
        Stream { blocks, blk: 0, cur: None, head: None, first: 0, keep: 0 }
    }

    /// The current payload's cursor, opening it if needed; `None` when every payload in memory
    /// was used.
    #[inline(always)]
    fn cursor(&mut self, pool: &mut CursorPool) -> Option<&mut Cursor> {
        if self.blk >= self.blocks.len() {
            return None;
        }
        if self.cur.is_none() {
            self.cur = Some(match &mut self.blocks {
                Blocks::Shared(b) => {
                    let slot = &b[self.blk];
                    match slot.open(pool.ahead.as_deref()) {
                        // A payload released already (only a tail merger could meet one: see
                        // `Merger::tail`) has no events for it.
                        None => match slot.payload() {
                            Some(p) => Cursor::open_shared(p, pool),
                            None => Cursor::open(&[], pool),
                        },
                        Some(d) => Cursor::packed(d),
                    }
                }
                Blocks::Borrowed(b) => Cursor::open(&b[self.blk], pool),
                Blocks::OnDisk(file, at) => match file.payload(at[self.blk].offset) {
                    Some(p) => Cursor::open_shared(Arc::new(p), pool),
                    None => Cursor::open(&[], pool),
                },
            });
        }
        self.cur.as_mut()
    }

    /// Moves on to the next payload, releasing the one done with (a streaming merger does not
    /// go back: see [`Merger::rewind`]).
    fn close(&mut self, pool: &mut CursorPool, malformed: &mut u64) {
        let keep_all = pool.keep_all;
        *malformed += u64::from(self.put_back(pool));
        if let Blocks::Shared(b) = &self.blocks {
            if self.blk >= self.keep && !keep_all {
                b[self.blk].release();
            }
        }
        self.blk += 1;
    }

    /// Closes the current payload's cursor, if open; true when the payload was malformed.
    fn put_back(&mut self, pool: &mut CursorPool) -> bool {
        self.cur.take().is_some_and(|c| c.close(pool))
    }

    /// The next event in memory, moving on to the next payload at the end of one (or at a
    /// malformed record, counted in `malformed`).
    fn next(&mut self, pool: &mut CursorPool, malformed: &mut u64) -> Option<Event> {
        loop {
            if let Some(e) = self.cursor(pool)?.next_event() {
                return Some(e);
            }
            self.close(pool, malformed);
        }
    }
}

/// What the merger feeds, in merge order: runs of events of one stream (a thread, numbered in
/// order of its first block in the file). The mprof counters (`replay.rs`) are one consumer,
/// the lifetimes that views see (`view.rs`) another.
pub trait Consumer {
    /// Starts a run of stream `stream`, whose first event is at `first_ts`: returns the value
    /// the stream's last run ended with (see [`Consumer::end_run`]), for [`Consumer::event`].
    fn begin_run(&mut self, stream: u32, first_ts: u64) -> u64;
    /// One event of the run; `last` is carried from event to event of the stream.
    fn event(&mut self, e: &Event, last: &mut u64);
    /// Ends the run: `last` as the last event left it, `events` replayed, the last at
    /// `last_ts`, the latest at `max_ts`.
    fn end_run(&mut self, stream: u32, last: u64, events: u64, last_ts: u64, max_ts: u64);
}

/// How [`Merger::run_pair`] ended.
enum Pair {
    /// Events were replayed, or a payload ended.
    Replayed,
    /// Nothing could be (the next event is for the general loop).
    Nothing,
    /// One stream's events came [`LONG_RUN`] in a row: the general loop replays the rest of
    /// that run, a cheaper step per event.
    OneSided,
    /// The merger was interrupted as a payload ended.
    Interrupted,
}

/// How far behind the newest block read a streaming replay stays, in nanoseconds, where blocks
/// may still come out of time order (threads' blocks reach the file in no set order): the
/// monitor writes a thread's events within its sweep period (10 ms) of the first, and a full
/// buffer soon after, so a block older than this is not expected any more. The report's
/// streaming replay and `heaplens live` (`follow.rs`) both wait this long.
pub const WINDOW_NS: u64 = 200_000_000;

/// Events of one stream in a row after which [`Merger::run_pair`] leaves the rest of the run to
/// the general loop. A thread that waits (a main thread joining its one worker) keeps its head
/// far ahead, and the pair loop, which picks and copies a head per event, then replayed every
/// event of the other: 15% of the single-worker churn report's instructions.
const LONG_RUN: u32 = 16;

/// A tail merger (see [`Merger::tail`]) keeps the first two payloads of each stream: the one
/// the cut falls in and the next, where the merger replaying up to the cut looks for its end.
const TAIL_KEEPS: usize = 2;

/// The merge of all streams, feeding a [`State`].
pub struct Merger<'a> {
    streams: Vec<Stream<'a>>,
    /// `(head timestamp, stream)` of every stream with a head.
    heap: Heads,
    malformed: u64,
    pool: CursorPool,
    /// Set from another thread to make [`Merger::run`] return early.
    interrupt: Option<Arc<AtomicBool>>,
}

impl<'a> Merger<'a> {
    fn empty() -> Self {
        Merger {
            streams: Vec::new(),
            heap: Heads::default(),
            malformed: 0,
            pool: CursorPool::default(),
            interrupt: None,
        }
    }

    /// A merger over fully loaded threads (payloads in file order per thread, threads in order
    /// of first appearance).
    pub fn borrowed(threads: &'a [(u32, Vec<Vec<u8>>)]) -> Self {
        let mut m = Self::empty();
        m.streams.extend(threads.iter().map(|(_, blocks)| Stream::new(Blocks::Borrowed(blocks))));
        m.rewind();
        m
    }

    /// A merger over the Events blocks `blocks` (in file order) of the trace in `file`, each
    /// payload read when reached; with the thread id of each stream (threads in order of
    /// their first block).
    pub fn on_disk(file: Arc<DiskBlocks>, blocks: &[BlockAt]) -> (Self, Vec<u32>) {
        let mut streams: Vec<(u32, Vec<BlockAt>)> = Vec::new();
        let mut index: HashMap<u32, usize> = HashMap::new();
        for b in blocks {
            let i = *index.entry(b.tid).or_insert_with(|| {
                streams.push((b.tid, Vec::new()));
                streams.len() - 1
            });
            streams[i].1.push(*b);
        }
        let mut m = Self::empty();
        m.streams.extend(streams.iter_mut().map(|(_, b)| Stream::new(Blocks::OnDisk(file.clone(), std::mem::take(b)))));
        m.rewind();
        (m, streams.into_iter().map(|(tid, _)| tid).collect())
    }

    /// An empty merger that is fed payloads with [`Merger::push`], giving the buffers of
    /// events decoded ahead back to `ahead`.
    pub fn streaming(ahead: Arc<Ahead>) -> Self {
        let mut m = Self::empty();
        m.pool.ahead = Some(ahead);
        m
    }

    /// Adds a payload of stream `i` (a new stream when `i` is the number of streams). Returns
    /// false when its first event is older than what was already replayed (`max_key`), which
    /// the streaming replay assumed could not happen.
    pub fn push(&mut self, i: u32, payload: Arc<Slot>, max_key: (u64, u32), replayed: bool) -> bool {
        if i as usize == self.streams.len() {
            self.streams.push(Stream::new(Blocks::Shared(Vec::new())));
        }
        let s = &mut self.streams[i as usize];
        let Blocks::Shared(blocks) = &mut s.blocks else { unreachable!("streaming streams share their blocks") };
        blocks.push(payload);
        if s.head.is_some() || s.blk + 1 < blocks.len() {
            // The stream still has events in memory before this payload.
            return true;
        }
        let Some(e) = s.next(&mut self.pool, &mut self.malformed) else { return true };
        s.head = Some(e);
        self.heap.push((e.ts, i));
        !replayed || (e.ts, i) >= max_key
    }

    /// Goes back to the first event of every stream (for replaying again from the start). Only
    /// for a merger that kept its payloads (borrowed, or see [`Merger::keep_payloads`]).
    pub fn rewind(&mut self) {
        debug_assert!(self.pool.keep_all || self.streams.iter().all(|s| !matches!(s.blocks, Blocks::Shared(_))));
        self.heap.clear();
        self.malformed = 0;
        for (i, s) in self.streams.iter_mut().enumerate() {
            s.put_back(&mut self.pool);
            s.blk = 0;
            s.head = s.next(&mut self.pool, &mut self.malformed);
            if let Some(e) = &s.head {
                self.heap.push((e.ts, i as u32));
            }
        }
    }

    /// Replays into `st`, in merge order, every event in memory with a timestamp up to
    /// `horizon` (`u64::MAX`: all of them), or fewer if interrupted (see
    /// [`Merger::interrupt_on`]).
    pub fn run<K: Consumer>(&mut self, st: &mut K, horizon: u64) {
        // False right after the pair loop met a long run of one stream: the next run is this
        // loop's.
        let mut pairs = true;
        while let Some((ts, i)) = self.heap.peek() {
            if ts > horizon {
                return;
            }
            if self.heap.len() >= 2 && pairs {
                match self.run_pair(st, horizon) {
                    Pair::Interrupted => return,
                    Pair::Replayed => continue,
                    Pair::OneSided => {
                        pairs = false;
                        continue;
                    }
                    Pair::Nothing => {}
                }
            }
            pairs = true;
            self.heap.pop();
            let limit = match self.heap.peek() {
                Some(k) => k.min((horizon, u32::MAX)),
                None => (horizon, u32::MAX),
            };
            let s = &mut self.streams[i as usize];
            let e = s.head.take().expect("a stream in the heap has a head");
            let mut last = st.begin_run(i, e.ts);
            st.event(&e, &mut last);
            let (mut n, mut last_ts, mut max_ts) = (1u64, e.ts, e.ts);
            // `(ts, i) >= limit` with this run's `i` fixed: `ts >= stop`, unless no timestamp
            // reaches the limit (the limit is `u64::MAX` and a later stream's). Two plain values,
            // as testing an `Option` per event cost 0.5% more instructions.
            let stop = if i >= limit.1 { Some(limit.0) } else { limit.0.checked_add(1) };
            let (stop, endless) = (stop.unwrap_or(u64::MAX), stop.is_none());
            // The rest of the run, payload by payload, in a tight loop.
            'payloads: while let Some(cur) = s.cursor(&mut self.pool) {
                while let Some(e) = cur.next_event() {
                    if e.ts >= stop && !endless {
                        debug_assert!((e.ts, i) >= limit);
                        s.head = Some(e);
                        self.heap.push((e.ts, i));
                        break 'payloads;
                    }
                    st.event(&e, &mut last);
                    n += 1;
                    last_ts = e.ts;
                    max_ts = max_ts.max(e.ts);
                }
                s.close(&mut self.pool, &mut self.malformed);
                if self.interrupt.as_deref().is_some_and(|f| f.load(Ordering::Relaxed)) {
                    // Stop here, with this stream's next event back in the heap.
                    if let Some(e) = s.next(&mut self.pool, &mut self.malformed) {
                        s.head = Some(e);
                        self.heap.push((e.ts, i));
                    }
                    st.end_run(i, last, n, last_ts, max_ts);
                    return;
                }
            }
            st.end_run(i, last, n, last_ts, max_ts);
        }
    }

    /// Two threads allocating at once interleave their events in runs of two or three, and each
    /// run's end (a mispredicted branch, a queue operation, a cursor switch) cost about as much
    /// as replaying its events. This replays the two streams with the oldest heads without
    /// runs: each step replays the older of the two heads, picked by index rather than by a
    /// branch, and takes the next event of its stream, until a payload ends, or an event passes
    /// `horizon` or the third stream's head; the heads then go back to the queue.
    fn run_pair<K: Consumer>(&mut self, st: &mut K, horizon: u64) -> Pair {
        let (Some((_, x)), Some((_, y))) = (self.heap.pop(), self.heap.pop()) else { unreachable!("two heads") };
        let ids = [x.min(y), x.max(y)];
        // Stream t's events replay while their timestamps stay below bound[t]: up to the
        // horizon, and before the third head in (timestamp, stream) order. (An event at the
        // largest timestamp is left to the general loop.)
        let bound = ids.map(|i| {
            let third = match self.heap.peek() {
                Some((ts, j)) if i < j => ts.saturating_add(1),
                Some((ts, _)) => ts,
                None => u64::MAX,
            };
            third.min(horizon.saturating_add(1))
        });
        let Ok([s0, s1]) = self.streams.get_disjoint_mut(ids.map(|i| i as usize)) else { unreachable!("two streams") };
        let mut h = [s0.head.take().expect("a head"), s1.head.take().expect("a head")];
        // The older head first: the first run begun sets the replay's first timestamp.
        let mut last = [0; 2];
        let first = usize::from(h[1].ts < h[0].ts);
        for t in [first, 1 - first] {
            last[t] = st.begin_run(ids[t], h[t].ts);
        }
        let (mut n, mut max_ts) = ([0u64; 2], [0u64; 2]);
        let mut last_ts = 0;
        // The stream whose payload ended, if one did.
        let mut ended = 2;
        // Events of stream `prev` in a row, less one.
        let (mut streak, mut prev) = (0u32, 2usize);
        {
            let (Some(c0), Some(c1)) = (s0.cur.as_mut(), s1.cur.as_mut()) else {
                unreachable!("heads come from cursors")
            };
            let cursors = [c0, c1];
            loop {
                // Ties go to the first stream, as in the queue's (timestamp, stream) order.
                let t = usize::from(h[1].ts < h[0].ts);
                let ts = h[t].ts;
                if ts >= bound[t] {
                    break;
                }
                st.event(&h[t], &mut last[t]);
                n[t] += 1;
                max_ts[t] = max_ts[t].max(ts);
                last_ts = ts;
                match cursors[t].next_event() {
                    Some(e) => h[t] = e,
                    None => {
                        ended = t;
                        break;
                    }
                }
                streak = (streak + 1) * u32::from(t == prev);
                prev = t;
                if streak >= LONG_RUN {
                    break;
                }
            }
        }
        for (t, s) in [s0, s1].into_iter().enumerate() {
            if n[t] > 0 {
                st.end_run(ids[t], last[t], n[t], last_ts, max_ts[t]);
            }
            s.head = if t == ended { s.next(&mut self.pool, &mut self.malformed) } else { Some(h[t]) };
            if let Some(e) = &s.head {
                self.heap.push((e.ts, ids[t]));
            }
        }
        if ended < 2 && self.interrupt.as_deref().is_some_and(|f| f.load(Ordering::Relaxed)) {
            Pair::Interrupted
        } else if streak >= LONG_RUN {
            Pair::OneSided
        } else if n == [0, 0] && ended == 2 {
            Pair::Nothing
        } else {
            Pair::Replayed
        }
    }

    /// Makes [`Merger::run`] return early, at the end of a payload, once `flag` is set
    /// (`None`: never).
    pub fn interrupt_on(&mut self, flag: Option<Arc<AtomicBool>>) {
        self.interrupt = flag;
    }

    /// Malformed payloads met so far.
    pub fn malformed(&self) -> u64 {
        self.malformed
    }

    /// The timestamps of the first events of every payload in memory, per stream (`None` for a
    /// payload without one), with the payloads' sizes in bytes.
    pub fn payload_starts(&self) -> Vec<Vec<(Option<u64>, usize)>> {
        self.streams
            .iter()
            .map(|s| {
                let start = |d: &[u8]| (crate::decode::payload::first_ts(d), d.len());
                match &s.blocks {
                    Blocks::Borrowed(b) => b.iter().map(|d| start(d)).collect(),
                    Blocks::Shared(b) => b.iter().map(|d| d.payload().map_or((None, 0), |p| start(&p))).collect(),
                    Blocks::OnDisk(_, b) => b.iter().map(|b| (b.first_ts, b.len)).collect(),
                }
            })
            .collect()
    }

    /// A merger over the events of every stream from its first at or after timestamp `cut` on
    /// (sharing the payloads; `starts` as [`Merger::payload_starts`] gives them), for replaying the tail of the trace while this merger replays
    /// up to the cut; `None` when a stream's payloads do not start in time order, so that
    /// where the cut falls in it is not known from their first events.
    pub fn tail(&self, cut: u64, starts: &[Vec<(Option<u64>, usize)>]) -> Option<Merger<'a>> {
        let mut m = Merger::empty();
        m.pool.ahead = self.pool.ahead.clone();
        for (s, starts) in self.streams.iter().zip(starts) {
            // The tail starts in the last payload that starts before the cut.
            let (mut from, mut prev) = (0, 0);
            for (j, (ts, _)) in starts.iter().enumerate() {
                let Some(ts) = *ts else { continue };
                if ts < prev {
                    return None;
                }
                prev = ts;
                if ts < cut {
                    from = j;
                }
            }
            // Nor before this merger's current payload (those before are replayed, and released).
            let from = from.max(s.blk);
            let blocks = match &s.blocks {
                Blocks::Borrowed(b) => Blocks::Borrowed(&b[from.min(b.len())..]),
                Blocks::Shared(b) => Blocks::Shared(b[from.min(b.len())..].to_vec()),
                Blocks::OnDisk(f, b) => Blocks::OnDisk(f.clone(), b[from.min(b.len())..].to_vec()),
            };
            m.streams.push(Stream { first: from, keep: TAIL_KEEPS, ..Stream::new(blocks) });
        }
        for (i, s) in m.streams.iter_mut().enumerate() {
            while let Some(e) = s.next(&mut m.pool, &mut m.malformed) {
                if e.ts >= cut {
                    s.head = Some(e);
                    m.heap.push((e.ts, i as u32));
                    break;
                }
            }
        }
        Some(m)
    }

    /// Whether payloads are kept once replayed (for [`Merger::rewind`]); turning it off
    /// releases those replayed so far.
    pub fn keep_payloads(&mut self, keep: bool) {
        self.pool.keep_all = keep;
        if !keep {
            for s in &self.streams {
                if let Blocks::Shared(b) = &s.blocks {
                    b[s.keep.min(s.blk)..s.blk].iter().for_each(|slot| slot.release());
                }
            }
        }
    }

    /// Releases every shared payload (the merger is given up).
    pub fn release_all(&mut self) {
        for s in &mut self.streams {
            s.put_back(&mut self.pool);
            if let Blocks::Shared(b) = &s.blocks {
                b.iter().for_each(|slot| slot.release());
            }
        }
    }

    /// Where a streaming merger gives back the buffers of events decoded ahead.
    pub fn ahead(&self) -> Arc<Ahead> {
        self.pool.ahead.clone().expect("a streaming merger")
    }

    /// Stops the reader thread's decoding ahead (see [`crate::decode::ahead`]).
    pub fn stop_decoding_ahead(&self) {
        if let Some(a) = &self.pool.ahead {
            a.stop();
        }
    }

    /// Where every stream stands: its next event and the index of the payload it is in.
    pub fn heads(&self) -> Vec<Option<(usize, Event)>> {
        self.streams.iter().map(|s| s.head.map(|e| (s.first + s.blk, e))).collect()
    }
}

/// Iterator over every event of a set of threads in merge order, one event at a time (for
/// [`crate::Trace::events`]).
pub struct MergedEvents<'a> {
    m: Merger<'a>,
    clock: heaplens_trace::TimeMap,
}

impl<'a> MergedEvents<'a> {
    /// The events of `threads` (as [`crate::Trace::payloads`]), times mapped through `clock`.
    pub fn new(threads: &'a [(u32, Vec<Vec<u8>>)], clock: heaplens_trace::TimeMap) -> Self {
        Self { m: Merger::borrowed(threads), clock }
    }
}

impl Iterator for MergedEvents<'_> {
    type Item = Event;

    fn next(&mut self) -> Option<Event> {
        let (_, i) = self.m.heap.pop()?;
        let s = &mut self.m.streams[i as usize];
        let mut out = s.head.take()?;
        s.head = s.next(&mut self.m.pool, &mut self.m.malformed);
        if let Some(e) = &s.head {
            self.m.heap.push((e.ts, i));
        }
        out.ts = self.clock.to_ns(out.ts);
        Some(out)
    }
}
