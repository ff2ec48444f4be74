//! Decoding the in-memory event payloads (`payload.rs`) as they are replayed: rows
//! (`rows.rs`), columns (the trace crate's column decoder), or the events the reader thread
//! decoded ahead (`ahead.rs`, `packed.rs`). The reader's payload budget is in `budget.rs`.

use std::sync::Arc;

use heaplens_trace::{ColumnDecoder, Event};

pub mod ahead;
pub mod budget;
mod cpu_share;
pub mod packed;
pub mod payload;
pub mod rows;

use self::ahead::{Ahead, Decoded};
use self::packed::PackedEvents;
use self::payload::{untag, COLUMNS};

/// An in-memory payload being decoded an event at a time. Column payloads are decoded as they
/// are consumed, so their events are never materialized; row payloads (older traces, and
/// programs whose busy threads outnumbered the processors) are decoded whole; payloads the
/// reader thread decoded ahead are read back from their packed events.
pub enum Cursor {
    /// A row payload decoded whole.
    Rows {
        /// Its events.
        events: Vec<Event>,
        /// The next one to return.
        next: usize,
        /// It was malformed part-way.
        bad: bool,
    },
    /// A shared row payload decoded [`ROW_BATCH`] events at a time: decoded whole, a payload's
    /// events (56 bytes each) would be written out of the cache and read back in.
    RowBatches(Box<RowBatches>),
    /// A column payload, decoded an event at a time.
    Columns(Box<ColumnDecoder>),
    /// Decoded ahead by another thread (see [`crate::decode::ahead`]).
    Packed {
        /// The events.
        events: PackedEvents,
        /// The next one to return.
        next: usize,
        /// The payload was malformed part-way.
        bad: bool,
        /// Its thread id.
        tid: u32,
    },
}

/// Events of a row payload decoded at a time (14 KiB: they stay in the first-level cache).
pub const ROW_BATCH: usize = 256;

/// Where the decoding of a shared row payload stands.
pub struct RowBatches {
    /// `None` once the cursor is closed (the payload may then be released).
    payload: Option<Arc<Vec<u8>>>,
    state: crate::decode::rows::DecodeState,
    tid: u32,
    events: Vec<Event>,
    next: usize,
    bad: bool,
}

impl RowBatches {
    /// Decodes the next batch; false at the end of the payload (or at a malformed record).
    #[cold]
    #[inline(never)]
    fn refill(&mut self) -> bool {
        self.next = 0;
        let Some(p) = &self.payload else { return false };
        let d = untag(p).0;
        if self.bad || self.state.pos >= d.len() {
            self.events.clear();
            return false;
        }
        self.bad = crate::decode::rows::decode_some(d, &mut self.state, self.tid, &mut self.events, ROW_BATCH);
        !self.events.is_empty()
    }
}

/// Buffers of closed cursors, for the next ones.
#[derive(Default)]
pub struct CursorPool {
    rows: Vec<Vec<Event>>,
    // Boxed: a decoder moves between the pool and the cursors without being copied.
    #[allow(clippy::vec_box)]
    columns: Vec<Box<ColumnDecoder>>,
    #[allow(clippy::vec_box)]
    batches: Vec<Box<RowBatches>>,
    /// Where the buffers of events decoded ahead go back to.
    pub ahead: Option<Arc<Ahead>>,
    /// Keep shared payloads once replayed (see [`crate::merge::Merger::keep_payloads`]).
    pub keep_all: bool,
}

impl Cursor {
    /// Starts decoding in-memory payload `d`.
    pub fn open(d: &[u8], pool: &mut CursorPool) -> Self {
        match untag(d) {
            (d, COLUMNS) => {
                let mut dec = pool.columns.pop().unwrap_or_default();
                // A bad header leaves no events and the decoder failed.
                let _ = dec.start(d);
                Cursor::Columns(dec)
            }
            (d, _) => {
                let mut events = pool.rows.pop().unwrap_or_default();
                events.clear();
                let bad = crate::decode::rows::decode_all(d, &mut events);
                Cursor::Rows { events, next: 0, bad }
            }
        }
    }

    /// Starts decoding shared in-memory payload `p`; row payloads a batch at a time.
    pub fn open_shared(p: Arc<Vec<u8>>, pool: &mut CursorPool) -> Self {
        let (d, layout) = untag(&p);
        if layout == COLUMNS {
            return Self::open(&p, pool);
        }
        let Some((tid, state)) = crate::decode::rows::header(d) else {
            return Self::open(&p, pool);
        };
        let mut b = pool.batches.pop().unwrap_or_else(|| {
            Box::new(RowBatches {
                payload: None,
                state,
                tid,
                events: Vec::with_capacity(ROW_BATCH),
                next: 0,
                bad: false,
            })
        });
        (b.payload, b.state, b.tid, b.next, b.bad) = (Some(p), state, tid, 0, false);
        b.events.clear();
        Cursor::RowBatches(b)
    }

    /// Replays the events of a payload decoded ahead.
    pub fn packed(decoded: Decoded) -> Self {
        Cursor::Packed { events: decoded.events, next: 0, bad: decoded.bad, tid: decoded.tid }
    }

    /// The next event; `None` at the end of the payload or at a malformed record. (Events
    /// decoded ahead have no usable size.)
    #[inline(always)]
    pub fn next_event(&mut self) -> Option<Event> {
        match self {
            Cursor::Columns(dec) => dec.next_event(),
            Cursor::Packed { events, next, tid, .. } => {
                #[cfg(target_arch = "x86_64")]
                // SAFETY: prefetching is a hint; it never faults, even past the end.
                unsafe {
                    use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
                    _mm_prefetch::<_MM_HINT_T0>(events.as_ptr().wrapping_add(*next + 64).cast());
                }
                events.read(next, *tid)
            }
            Cursor::Rows { events, next, .. } => {
                let e = events.get(*next)?;
                *next += 1;
                Some(*e)
            }
            Cursor::RowBatches(b) => {
                if b.next == b.events.len() && !b.refill() {
                    return None;
                }
                let e = b.events[b.next];
                b.next += 1;
                Some(e)
            }
        }
    }

    /// Gives the buffers back to `pool`; true when the payload was malformed part-way (the
    /// events before the fault were returned).
    pub fn close(self, pool: &mut CursorPool) -> bool {
        match self {
            Cursor::Columns(dec) => {
                let bad = dec.failed();
                pool.columns.push(dec);
                bad
            }
            Cursor::Rows { events, bad, .. } => {
                pool.rows.push(events);
                bad
            }
            Cursor::RowBatches(mut b) => {
                let bad = b.bad;
                // The payload goes (it may be released); the buffers stay.
                b.payload = None;
                pool.batches.push(b);
                bad
            }
            Cursor::Packed { events, bad, .. } => {
                if let Some(a) = &pool.ahead {
                    a.recycle(events);
                }
                bad
            }
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::payload::{first_ts, header, tagged, COLUMNS, ROWS};
    use super::*;
    use heaplens_trace::{ColumnEncoder, EventDecoder, EventEncoder, Op};

    /// A row payload of thread 4321 with `n` events: allocations, reallocations, releases.
    pub fn rows(n: u64) -> Vec<u8> {
        let mut buf = vec![0u8; 1 << 16];
        let (mut pos, mut enc) = (0, EventEncoder::default());
        enc.begin(&mut buf, &mut pos, 4321);
        for i in 0..n {
            let addr = 0x5555_0000_0000 + (i % 7) * 64;
            match i % 3 {
                0 => enc.alloc(&mut buf, &mut pos, Op::Malloc, 100 + i * 7, addr, 40, 56, (i % 5) as u32),
                1 => enc.realloc(&mut buf, &mut pos, Op::Realloc, 100 + i * 7, addr + 64, addr, 80, 88, 2),
                _ => enc.dealloc(&mut buf, &mut pos, Op::Free, 100 + i * 7, addr - 64),
            }
        }
        buf.truncate(pos);
        buf
    }

    fn decode_all(d: &[u8], out: &mut Vec<Event>) -> bool {
        let mut pool = CursorPool::default();
        let mut c = Cursor::open(d, &mut pool);
        while let Some(e) = c.next_event() {
            out.push(e);
        }
        c.close(&mut pool)
    }

    #[test]
    fn both_layouts_decode_to_the_same_events() {
        let r = rows(500);
        let want: Vec<Event> = EventDecoder::new(&r).unwrap().map(Result::unwrap).collect();
        let mut c = Vec::new();
        ColumnEncoder::default().encode(&r, &mut c).unwrap();
        for (payload, layout) in [(r.clone(), ROWS), (c, COLUMNS)] {
            assert_eq!(header(&payload, layout), Some(4321));
            let d = tagged(payload, layout);
            assert_eq!(first_ts(&d), Some(100));
            let mut got = Vec::new();
            assert!(!decode_all(&d, &mut got));
            assert_eq!(got, want, "layout {layout}");
        }
    }

    #[test]
    fn damage_keeps_the_events_before_it() {
        let r = rows(500);
        let want: Vec<Event> = EventDecoder::new(&r).unwrap().map(Result::unwrap).collect();
        let mut got = Vec::new();
        assert!(decode_all(&tagged(r[..r.len() - 2].to_vec(), ROWS), &mut got));
        assert_eq!(got[..], want[..want.len() - 1]);
        let mut c = Vec::new();
        ColumnEncoder::default().encode(&rows(0), &mut c).unwrap();
        assert!(first_ts(&tagged(c, COLUMNS)).is_none());
    }
}

#[cfg(test)]
mod ahead_tests {
    use super::ahead::{Ahead, Slot};
    use super::payload::{tagged, COLUMNS, ROWS};
    use super::tests::rows;
    use super::{Cursor, CursorPool};
    use heaplens_trace::{ColumnEncoder, Event};

    fn drain(mut c: Cursor) -> Vec<Event> {
        let out = std::iter::from_fn(|| c.next_event()).map(|e| Event { usable: 0, ..e }).collect();
        assert!(!c.close(&mut CursorPool::default()));
        out
    }

    #[test]
    fn decoded_ahead_or_not_the_events_are_the_same() {
        let r = rows(600);
        let mut c = Vec::new();
        ColumnEncoder::default().encode(&r, &mut c).unwrap();
        for payload in [tagged(r, ROWS), tagged(c, COLUMNS)] {
            let want = drain(Cursor::open(&payload, &mut CursorPool::default()));
            let ahead = Ahead::default();
            let slots = [Slot::new(payload.clone()), Slot::new(payload.clone()), Slot::new(payload.clone())];
            // The replay reaches the second slot while the reader is decoding it: it decodes
            // the payload itself, and the reader's events are dropped.
            assert!(slots[1].claim());
            assert!(slots[1].open(Some(&ahead)).is_none());
            assert!(slots[1].fill(ahead.decode_one(&slots[1].payload().unwrap())).is_err());
            ahead.decode(&slots);
            assert_eq!(ahead.waiting(), 2 * 600);
            for s in [&slots[0], &slots[2]] {
                let d = s.open(Some(&ahead)).expect("decoded ahead");
                assert_eq!(drain(Cursor::packed(d)), want);
            }
            assert_eq!(ahead.waiting(), 0);
            // Opened again (a replay from the start): decoded by the replay.
            assert!(slots[0].open(Some(&ahead)).is_none());
        }
    }
}
