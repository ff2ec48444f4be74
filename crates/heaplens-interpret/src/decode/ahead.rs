//! Decoding event payloads ahead of the replay, on the reader's thread.
//!
//! The replay is the report's longest stage, and a third to a half of its time goes into
//! decoding the payloads (varints, the column model), which needs nothing from the replay. So
//! the reader thread decodes payloads into a simple layout (`packed.rs`) that the replay reads
//! back in order: while it reads the file, those it reads while the replay has another one in
//! hand ([`IN_HAND`]); once the file is read, every payload the replay has not reached.
//!
//! Each payload is a [`Slot`] shared by both threads, and whoever comes first decodes it: the
//! replay, on reaching a payload not decoded yet (or still being decoded), decodes it itself
//! as it goes, as it would without this module, and never waits for the reader thread (which,
//! on a busy machine, may not even be running). The reader keeps at most [`AHEAD_EVENTS`]
//! decoded events waiting, so memory stays bounded however far behind the replay is.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use heaplens_trace::{ColumnDecoder, Event};

use crate::decode::budget::Budget;
use crate::decode::cpu_share::Span;
use crate::decode::packed::PackedEvents;
use crate::decode::payload::{untag, COLUMNS};
use crate::decode::rows::Push;

impl Push for PackedEvents {
    #[inline(always)]
    fn push_event(&mut self, e: Event) {
        self.push(&e);
    }
}

/// The events of one payload decoded ahead; `bad` when it was malformed part-way (the events
/// before the fault are there).
pub struct Decoded {
    /// The events, packed.
    pub events: PackedEvents,
    /// The payload was malformed part-way.
    pub bad: bool,
    /// The payload's thread id.
    pub tid: u32,
}

/// Where a payload's decoding ahead stands.
enum State {
    /// Nobody has opened it: either thread may decode it.
    Fresh,
    /// The reader thread is decoding it.
    Decoding,
    /// Decoded ahead, not replayed yet.
    Decoded(Decoded),
    /// The replay has opened it (and decodes it itself if it was not decoded yet: it never
    /// waits for the reader thread, which may not even be running).
    Taken,
}

/// One in-memory payload (see [`crate::decode`]) shared by the reader and the replay. The
/// replay releases the payload once it is done with it ([`Slot::release`]), so a report holds
/// the payloads being replayed and decoded, not the whole trace decompressed.
pub struct Slot {
    /// `None` once released. Shared, as the reader thread may still be decoding it then.
    payload: Mutex<Option<Arc<Vec<u8>>>>,
    state: Mutex<State>,
    /// Where the payload's bytes are counted until released (see `budget.rs`).
    budget: Option<Arc<Budget>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panicking holder leaves consistent data here (every change is one assignment).
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Slot {
    /// A slot holding in-memory payload `payload`.
    pub fn new(payload: Vec<u8>) -> Arc<Self> {
        Self::with(payload, State::Fresh, None)
    }

    fn with(payload: Vec<u8>, st: State, budget: Option<Arc<Budget>>) -> Arc<Self> {
        Arc::new(Slot { payload: Mutex::new(Some(Arc::new(payload))), state: Mutex::new(st), budget })
    }

    /// The in-memory payload; `None` once released.
    pub fn payload(&self) -> Option<Arc<Vec<u8>>> {
        lock(&self.payload).clone()
    }

    /// Drops the payload (its memory goes back to the allocator once the reader thread, if it
    /// is decoding it, is done too).
    pub fn release(&self) {
        let gone = lock(&self.payload).take();
        if let (Some(p), Some(b)) = (gone, &self.budget) {
            b.give(p.len());
        }
    }

    /// For the replay: the events of the payload when they were decoded ahead (`ahead` then
    /// counts them as taken); `None` when the replay is to decode the payload itself.
    pub fn open(&self, ahead: Option<&Ahead>) -> Option<Decoded> {
        let decoded = match std::mem::replace(&mut *lock(&self.state), State::Taken) {
            State::Decoded(d) => Some(d),
            State::Fresh | State::Decoding => None,
            // Opened before (a replay from the start): counted then.
            State::Taken => return None,
        };
        if let Some(a) = ahead {
            a.taken(decoded.as_ref().map_or(0, |d| d.events.len()));
        }
        decoded
    }

    /// Whether nobody has opened the payload yet.
    fn fresh(&self) -> bool {
        matches!(*lock(&self.state), State::Fresh)
    }

    /// For the reader thread: whether it may decode the payload (the replay has not opened it).
    pub fn claim(&self) -> bool {
        let mut st = lock(&self.state);
        let fresh = matches!(*st, State::Fresh);
        if fresh {
            *st = State::Decoding;
        }
        fresh
    }

    /// Stores the events the reader thread decoded; gives them back when the replay opened the
    /// payload in the meantime.
    pub fn fill(&self, d: Decoded) -> Result<(), Decoded> {
        let mut st = lock(&self.state);
        match *st {
            State::Decoding => {
                *st = State::Decoded(d);
                Ok(())
            }
            _ => Err(d),
        }
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.release();
    }
}

/// Events decoded ahead and not yet taken by the replay, at most: 2.5-3 MiB of packed events,
/// whose buffers go round from payload to payload. (With 2^20, the buffers alone faulted in
/// 20 MiB of fresh memory, at about 2 µs a page on a VM: 5-8% of the processor time of the
/// widgets and sqlite3 reports.)
pub const AHEAD_EVENTS: usize = 1 << 17;

/// Events decoded ahead and waiting, at most, while the reader thread waits for room in the
/// budget: more than [`AHEAD_EVENTS`], as a payload decoded ahead whose thread's events wait
/// in the merge (the 2-thread churn's main thread frees its last blocks after the workers
/// end) counts as waiting until the replay reaches it. With [`AHEAD_EVENTS`], the 2-thread
/// churn trace of 10^8 events decoded one payload ahead in 4546 and took 2.0 s instead of 1.5.
const AHEAD_WHILE_WAITING: usize = 4 * AHEAD_EVENTS;

/// Payloads the replay has in hand, not opened yet, from which the reader thread decodes the
/// payloads it reads before passing them on (fewer: it passes them on as they are, so that the
/// replay never waits for it).
const IN_HAND: usize = 2;

/// What the reader and the replay share: the count of events waiting, spare event buffers
/// (a new buffer is faulted in page by page; a reused one is not), and the stop signal.
#[derive(Default)]
pub struct Ahead {
    waiting: Mutex<usize>,
    changed: Condvar,
    spare: Mutex<Vec<PackedEvents>>,
    stop: AtomicBool,
    /// Payloads the replay opened for the first time.
    opened: AtomicUsize,
    /// Payloads passed on to it (by [`Ahead::pass`]).
    passed: AtomicUsize,
    columns: Mutex<ColumnDecoder>,
    /// The reader thread waited for a processor while it last decoded: the machine is busy,
    /// and decoding ahead would take the replay's time instead of overlapping it.
    crowded: AtomicBool,
    /// The payload bytes passed on and not released yet.
    pub budget: Arc<Budget>,
    /// Calls of [`Ahead::decode_one_more`].
    probes: AtomicUsize,
}

/// While the machine is busy, the reader thread still decodes one payload in this many (to
/// notice when it is not any more) and otherwise sleeps this long between them.
const PROBE_EVERY: usize = 16;
const BUSY_NAP: std::time::Duration = std::time::Duration::from_millis(2);

impl Ahead {
    /// Events decoded ahead and waiting.
    #[cfg(test)]
    pub fn waiting(&self) -> usize {
        *lock(&self.waiting)
    }

    /// Sharing that holds at most `budget` bytes of payloads (see `budget.rs`).
    pub fn with_budget(budget: usize) -> Self {
        Ahead { budget: Arc::new(Budget::new(budget)), ..Default::default() }
    }

    fn taken(&self, n: usize) {
        self.opened.fetch_add(1, Ordering::AcqRel);
        self.taken_back(n);
    }

    fn taken_back(&self, n: usize) {
        if n > 0 {
            let mut w = lock(&self.waiting);
            *w = w.saturating_sub(n);
            self.changed.notify_one();
        }
    }

    /// The slot in which the reader thread passes in-memory `payload` on to the replay:
    /// decoded now while the replay has enough in hand and not too much waits, else as it is.
    /// Waits first while the payloads passed on and not released fill the budget.
    pub fn pass(&self, payload: Vec<u8>) -> Arc<Slot> {
        self.budget.take(payload.len());
        let budget = Some(self.budget.clone());
        let passed = self.passed.fetch_add(1, Ordering::AcqRel);
        let in_hand = passed.saturating_sub(self.opened.load(Ordering::Acquire));
        let crowded = self.crowded.load(Ordering::Relaxed) && !passed.is_multiple_of(PROBE_EVERY);
        if crowded || in_hand < IN_HAND || *lock(&self.waiting) >= AHEAD_EVENTS {
            return Slot::with(payload, State::Fresh, budget);
        }
        let d = self.decode_one(&payload);
        *lock(&self.waiting) += d.events.len();
        Slot::with(payload, State::Decoded(d), budget)
    }

    /// Decodes in-memory `payload` whole, noting whether the machine is busy (see
    /// `cpu_share.rs`).
    pub fn decode_one(&self, payload: &[u8]) -> Decoded {
        let span = Span::start();
        let mut events = lock(&self.spare).pop().unwrap_or_default();
        let bad = decode_whole(payload, &mut lock(&self.columns), &mut events);
        if let Some(c) = span.crowded() {
            self.crowded.store(c, Ordering::Relaxed);
        }
        let (body, layout) = untag(payload);
        let tid = crate::decode::payload::header(body, layout).unwrap_or(0);
        Decoded { events, bad, tid }
    }

    /// Gives an event buffer back for the next payload.
    pub fn recycle(&self, mut events: PackedEvents) {
        events.clear();
        lock(&self.spare).push(events);
    }

    /// Makes [`Ahead::decode`] return (the replay is over).
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Release);
        let _held = lock(&self.waiting);
        self.changed.notify_all();
    }

    /// Decodes the payloads of `slots` that the replay has not opened, in order, keeping at
    /// most [`AHEAD_EVENTS`] events waiting, until all are done or [`Ahead::stop`].
    pub fn decode(&self, slots: &[Arc<Slot>]) {
        let mut next = 0;
        while next < slots.len() {
            {
                let mut w = lock(&self.waiting);
                while *w >= AHEAD_EVENTS && !self.stop.load(Ordering::Acquire) {
                    w = self.changed.wait(w).unwrap_or_else(|e| e.into_inner());
                }
            }
            if self.stop.load(Ordering::Acquire) {
                return;
            }
            if self.crowded.load(Ordering::Relaxed) && slots[next].fresh() {
                std::thread::sleep(BUSY_NAP);
            }
            self.decode_at(&slots[next]);
            next += 1;
        }
    }

    /// For the reader thread while it waits for room in the budget: decodes the first payload
    /// of `slots[*next..]` the replay has not opened, if not too many events wait already;
    /// false when there was nothing to do.
    pub fn decode_one_more(&self, slots: &[Arc<Slot>], next: &mut usize) -> bool {
        if *lock(&self.waiting) >= AHEAD_WHILE_WAITING {
            return false;
        }
        let probe = self.probes.fetch_add(1, Ordering::Relaxed).is_multiple_of(PROBE_EVERY);
        if self.crowded.load(Ordering::Relaxed) && !probe {
            return false;
        }
        while let Some(slot) = slots.get(*next) {
            *next += 1;
            if self.decode_at(slot) {
                return true;
            }
        }
        false
    }

    /// Decodes `slot` ahead unless the replay opened it; true if it did.
    fn decode_at(&self, slot: &Slot) -> bool {
        if !slot.claim() {
            return false;
        }
        let Some(payload) = slot.payload() else { return false };
        let d = self.decode_one(&payload);
        let n = d.events.len();
        // Counted before the replay can take them.
        *lock(&self.waiting) += n;
        if let Err(d) = slot.fill(d) {
            self.taken_back(n);
            self.recycle(d.events);
        }
        true
    }
}

/// Decodes in-memory payload `d` whole into `out`; true when it is malformed part-way.
fn decode_whole(d: &[u8], columns: &mut ColumnDecoder, out: &mut PackedEvents) -> bool {
    match untag(d) {
        (d, COLUMNS) => columns.decode(d, |e| out.push(&e)).is_err(),
        (d, _) => crate::decode::rows::decode_all(d, out),
    }
}

/// Stops an [`Ahead`] when dropped, also when the replay panics (the reader thread would
/// otherwise wait for ever).
pub struct StopAhead(pub Arc<Ahead>);

impl Drop for StopAhead {
    fn drop(&mut self) {
        self.0.stop();
        self.0.budget.stop();
    }
}
