//! Merging the threads' event streams by time, straight into the replay.
//!
//! The order is that of a k-way merge on `(timestamp, stream)`, a stream's index being the
//! order in which its thread's first block appears in the file: at every step the smallest
//! head goes next, and each stream keeps its own order. Instead of one heap operation per
//! event, the merger replays a *run* of events from one stream for as long as they stay below
//! the smallest head of the others, so a single thread, or threads whose blocks do not
//! overlap in time, cost one comparison per event.
//!
//! The merger can also start before the whole trace is read ([`Merger::run`] with a horizon):
//! it then assumes that a stream with no more events in memory has none older than what was
//! already replayed, and [`Merger::push`] checks that assumption for every block that arrives;
//! when it fails the caller replays again from the start ([`Merger::rewind`]).
//!
//! Payloads are decoded whole, where they are replayed or ahead by the reader thread once it has
//! read the whole file ([`Ahead`]): whichever thread claims a block first decodes it.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};

use heaplens_trace::Event;

use crate::decode::decode_all;
use crate::replay::{Counter, Counts, State};

/// Events decoded ahead of the replay (by the reader thread), capped so that blocks the
/// replay holds back do not pile up decoded.
const AHEAD_CAP: u64 = 1 << 20;

/// A payload that another thread may decode ahead of the replay. Whoever claims it first
/// decodes it: the reader thread when it has time, else the replay itself.
pub(crate) struct SharedBlock {
    pub payload: Vec<u8>,
    /// 0: not claimed; 1: being decoded ahead; 2: decoded ahead, in `decoded`; 3: claimed by
    /// the replay, which decodes the payload itself; 4: the same while being decoded ahead (the
    /// replay does not wait for it: that work is dropped).
    state: AtomicU8,
    decoded: Mutex<Option<(Vec<Event>, bool)>>,
}

impl SharedBlock {
    pub fn new(payload: Vec<u8>) -> Self {
        Self { payload, state: AtomicU8::new(0), decoded: Mutex::new(None) }
    }

    /// Whether the replay has claimed it or it is decoded.
    pub fn taken(&self) -> bool {
        self.state.load(Ordering::Acquire) != 0
    }
}

/// What the reader thread and the replay share to decode ahead.
#[derive(Default)]
pub(crate) struct Ahead {
    /// Events decoded ahead and not yet replayed.
    in_flight: AtomicU64,
    /// The replay wants no more (finished, or replaying from the start).
    pub stop: AtomicBool,
    pool: Mutex<Vec<Vec<Event>>>,
}

impl Ahead {
    /// Decodes `b` if nobody claimed it and not too much is decoded already; false when the
    /// cap stopped it (try again later).
    pub fn decode(&self, b: &SharedBlock) -> bool {
        if self.in_flight.load(Ordering::Acquire) >= AHEAD_CAP {
            return false;
        }
        if b.state.compare_exchange(0, 1, Ordering::AcqRel, Ordering::Acquire).is_err() {
            return true;
        }
        let mut evs = self.pool.lock().map(|mut p| p.pop()).ok().flatten().unwrap_or_default();
        evs.clear();
        let bad = decode_all(&b.payload, &mut evs);
        let n = evs.len() as u64;
        let Ok(mut d) = b.decoded.lock() else { return true };
        if b.state.compare_exchange(1, 2, Ordering::AcqRel, Ordering::Acquire).is_ok() {
            // Published under the lock: the replay takes it only after this.
            *d = Some((evs, bad));
            self.in_flight.fetch_add(n, Ordering::AcqRel);
        } else {
            drop(d);
            self.recycle(evs);
        }
        true
    }

    /// The events of `b` if they were decoded ahead; `None` (and `b` is the replay's to decode)
    /// otherwise.
    fn claim(&self, b: &SharedBlock) -> Option<(Vec<Event>, bool)> {
        let taken = match b.state.compare_exchange(0, 3, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => return None,
            // Being decoded right now: do not wait (the reader may not even be running).
            Err(1) => match b.state.compare_exchange(1, 4, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return None,
                Err(s) => s,
            },
            Err(s) => s,
        };
        if taken != 2 {
            return None;
        }
        let d = b.decoded.lock().ok()?.take()?;
        self.in_flight.fetch_sub(d.0.len() as u64, Ordering::AcqRel);
        Some(d)
    }

    fn recycle(&self, v: Vec<Event>) {
        if let Ok(mut p) = self.pool.lock() {
            if p.len() < 64 {
                p.push(v);
            }
        }
    }
}

/// A stream's payloads.
enum Blocks<'a> {
    Borrowed(&'a [Vec<u8>]),
    Shared(Vec<Arc<SharedBlock>>),
}

impl Blocks<'_> {
    #[inline(always)]
    fn payload(&self, i: usize) -> Option<&[u8]> {
        match self {
            Blocks::Borrowed(b) => b.get(i).map(|v| &v[..]),
            Blocks::Shared(b) => b.get(i).map(|v| &v.payload[..]),
        }
    }

    fn len(&self) -> usize {
        match self {
            Blocks::Borrowed(b) => b.len(),
            Blocks::Shared(b) => b.len(),
        }
    }
}

/// One thread's payloads and where its decoding stands.
pub(crate) struct Stream<'a> {
    blocks: Blocks<'a>,
    /// The current payload; `blk == len` when every payload in memory was used.
    blk: usize,
    /// The current payload's events (`None`: not opened yet): (events, next, malformed).
    pre: Option<(Vec<Event>, usize, bool)>,
    /// An emptied events buffer for the next payload.
    spare: Vec<Event>,
    /// The next event, decoded but not replayed (it is in the heap).
    head: Option<Event>,
}

impl Stream<'_> {
    /// Opens payload `blk`: takes its events decoded ahead, or decodes them here.
    #[inline(always)]
    fn open(&mut self, ahead: Option<&Ahead>) {
        if let (Some(a), Blocks::Shared(b)) = (ahead, &self.blocks) {
            if let Some((evs, bad)) = a.claim(&b[self.blk]) {
                self.pre = Some((evs, 0, bad));
                return;
            }
        }
        let mut evs = std::mem::take(&mut self.spare);
        evs.clear();
        let bad = self.blocks.payload(self.blk).is_some_and(|d| decode_all(d, &mut evs));
        self.pre = Some((evs, 0, bad));
    }

    /// Moves on to the next payload.
    #[inline(always)]
    fn close(&mut self, ahead: Option<&Ahead>, malformed: &mut u64) {
        if let Some((evs, _, bad)) = self.pre.take() {
            *malformed += u64::from(bad);
            match ahead {
                Some(a) => a.recycle(evs),
                None => self.spare = evs,
            }
        }
        self.blk += 1;
    }

    /// The next event in memory, moving on to the next payload at the end of one (or at a
    /// malformed record, counted in `malformed`).
    fn next(&mut self, ahead: Option<&Ahead>, malformed: &mut u64) -> Option<Event> {
        loop {
            if self.blk >= self.blocks.len() {
                return None;
            }
            if self.pre.is_none() {
                self.open(ahead);
            }
            if let Some((evs, next, _)) = &mut self.pre {
                if let Some(&e) = evs.get(*next) {
                    *next += 1;
                    return Some(e);
                }
            }
            self.close(ahead, malformed);
        }
    }
}

/// The merge of all streams, feeding a [`State`].
pub(crate) struct Merger<'a> {
    streams: Vec<Stream<'a>>,
    /// `(head timestamp, stream)` of every stream with a head.
    heap: BinaryHeap<Reverse<(u64, u32)>>,
    malformed: u64,
    /// Events decoded ahead by another thread (until the first rewind).
    ahead: Option<Arc<Ahead>>,
}

impl<'a> Merger<'a> {
    /// A merger over fully loaded threads (payloads in file order per thread, threads in order
    /// of first appearance).
    pub fn borrowed(threads: &'a [(u32, Vec<Vec<u8>>)]) -> Self {
        let mut m = Merger { streams: Vec::new(), heap: BinaryHeap::new(), malformed: 0, ahead: None };
        for (_, blocks) in threads {
            m.streams.push(Stream {
                blocks: Blocks::Borrowed(blocks),
                blk: 0,
                pre: None,
                spare: Vec::new(),
                head: None,
            });
        }
        m.rewind();
        m
    }

    /// An empty merger that is fed payloads with [`Merger::push`], some of them decoded ahead
    /// through `ahead`.
    pub fn streaming(ahead: Arc<Ahead>) -> Self {
        Merger { streams: Vec::new(), heap: BinaryHeap::new(), malformed: 0, ahead: Some(ahead) }
    }

    /// Adds a payload of stream `i` (a new stream when `i` is the number of streams). Returns
    /// false when its first event is older than what was already replayed (`max_key`), which
    /// the streaming replay assumed could not happen.
    pub fn push(&mut self, i: u32, block: Arc<SharedBlock>, max_key: (u64, u32), replayed: bool) -> bool {
        if i as usize == self.streams.len() {
            self.streams.push(Stream {
                blocks: Blocks::Shared(Vec::new()),
                blk: 0,
                pre: None,
                spare: Vec::new(),
                head: None,
            });
        }
        let s = &mut self.streams[i as usize];
        let Blocks::Shared(blocks) = &mut s.blocks else { unreachable!("streaming streams share their blocks") };
        blocks.push(block);
        if s.head.is_some() || s.blk + 1 < blocks.len() {
            // The stream still has events in memory before this payload.
            return true;
        }
        let Some(e) = s.next(self.ahead.as_deref(), &mut self.malformed) else { return true };
        s.head = Some(e);
        self.heap.push(Reverse((e.ts, i)));
        !replayed || (e.ts, i) >= max_key
    }

    /// Goes back to the first event of every stream (for replaying again from the start).
    /// Events decoded ahead are not used any more.
    pub fn rewind(&mut self) {
        if let Some(a) = self.ahead.take() {
            a.stop.store(true, Ordering::Release);
        }
        self.heap.clear();
        self.malformed = 0;
        for (i, s) in self.streams.iter_mut().enumerate() {
            s.blk = 0;
            s.pre = None;
            s.head = s.next(None, &mut self.malformed);
            if let Some(e) = &s.head {
                self.heap.push(Reverse((e.ts, i as u32)));
            }
        }
    }

    /// Replays, in merge order, every event in memory with a timestamp up to `horizon`
    /// (`u64::MAX`: all of them).
    pub fn run(&mut self, st: &mut State, horizon: u64) {
        match st {
            State::Exact(c) => self.run_counting(c, horizon),
            State::Sampled(c, _) => self.run_counting(c, horizon),
        }
    }

    fn run_counting<C: Counter>(&mut self, st: &mut Counts<C>, horizon: u64) {
        let ahead = self.ahead.clone();
        let ahead = ahead.as_deref();
        while let Some(&Reverse((ts, i))) = self.heap.peek() {
            if ts > horizon {
                return;
            }
            self.heap.pop();
            let limit = match self.heap.peek() {
                Some(&Reverse(k)) => k.min((horizon, u32::MAX)),
                None => (horizon, u32::MAX),
            };
            let s = &mut self.streams[i as usize];
            let e = s.head.take().expect("a stream in the heap has a head");
            let mut last = st.begin_run(i, e.ts);
            st.event(&e, &mut last);
            let (mut n, mut last_ts, mut max_ts) = (1u64, e.ts, e.ts);
            // The rest of the run, payload by payload, in a tight loop.
            'payloads: loop {
                if s.blk >= s.blocks.len() {
                    break;
                }
                if s.pre.is_none() {
                    s.open(ahead);
                }
                if let Some((evs, next, _)) = &mut s.pre {
                    for &e in &evs[*next..] {
                        if (e.ts, i) >= limit {
                            s.head = Some(e);
                            *next += 1;
                            self.heap.push(Reverse((e.ts, i)));
                            break 'payloads;
                        }
                        *next += 1;
                        st.event(&e, &mut last);
                        n += 1;
                        last_ts = e.ts;
                        max_ts = max_ts.max(e.ts);
                    }
                }
                s.close(ahead, &mut self.malformed);
            }
            st.end_run(i, last, n, last_ts, max_ts);
        }
    }

    /// Malformed payloads met so far.
    pub fn malformed(&self) -> u64 {
        self.malformed
    }
}

/// Iterator over every event of a set of threads in merge order, one event at a time (for
/// [`crate::Trace::events`]).
pub struct MergedEvents<'a> {
    m: Merger<'a>,
    clock: heaplens_trace::TimeMap,
}

impl<'a> MergedEvents<'a> {
    pub(crate) fn new(threads: &'a [(u32, Vec<Vec<u8>>)], clock: heaplens_trace::TimeMap) -> Self {
        Self { m: Merger::borrowed(threads), clock }
    }
}

impl Iterator for MergedEvents<'_> {
    type Item = Event;

    fn next(&mut self) -> Option<Event> {
        let Reverse((_, i)) = self.m.heap.pop()?;
        let s = &mut self.m.streams[i as usize];
        let mut out = s.head.take()?;
        s.head = s.next(None, &mut self.m.malformed);
        if let Some(e) = &s.head {
            self.m.heap.push(Reverse((e.ts, i)));
        }
        out.ts = self.clock.to_ns(out.ts);
        Some(out)
    }
}
