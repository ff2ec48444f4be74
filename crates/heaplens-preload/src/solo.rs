//! Coarser times for the events no other thread's can fall among.
//!
//! Timestamps order the events of different threads when the replay merges them, and a free
//! and another thread's reuse of the address can be tens of nanoseconds apart: so events keep
//! their times to [`heaplens_trace::TSC_UNIT`] ticks (13 ns here). But the time deltas are the
//! largest column of every trace (0.44-0.52 bytes per event), and most programs record from
//! one thread at a time: a single-threaded program, or a worker while the main thread waits
//! for it. The writer keeps the times of such events to [`SHIFT_TSC`] more bits (units of 1,024
//! ticks, about 0.4 µs), which the replay shows only in lifetimes under a microsecond.
//!
//! When it may: [`take`] takes every queued buffer at once. If they all hold events of one
//! thread `T`, the earliest stamped at `a`, rounding them down to units of `2^s` is safe when no
//! other thread has an event stamped in `[floor(a), now]`, and none stamped earlier than `now`
//! still to come:
//!
//! * events in buffers taken before: each thread's last take is remembered ([`Takes`]; a take's
//!   time is later than every stamp in it), and the latest take of another thread must be
//!   before `floor(a)`;
//! * events still in another thread's buffer, or being stamped right now: every other
//!   registered thread is looked at through its state's lock without waiting (one barrier for
//!   all, [`OwnerLock::peek_all`]); it must be outside its hooks with an empty buffer. Events
//!   are stamped inside that lock (`record.rs`), so its next stamp comes after the lock is let
//!   go, after `now`. A thread that is starting waits
//!   for the registry's lock, held throughout; one that is exiting hands its buffer over under
//!   that lock too (`thread.rs`).
//!
//! Then every other thread's event `u` is before `floor(a)` or after `now`, both sides of each
//! of `T`'s events `e` (`a <= e < now`) and of its rounded time; and where `u` itself was
//! rounded (in another take, by the same rule), `floor(u) <= u < floor(a) <= floor(e)` or the
//! other way round. Rounding keeps each thread's own order, so the merged order of the trace is
//! the order in which things happened, as with exact times.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use crate::owner_lock::OwnerLock;
use crate::queue::{self, Queue};
use crate::{procinfo, thread};

/// Extra bits of TSC timestamps (in units of `TSC_UNIT`, 32 ticks) dropped: units of 1,024
/// ticks.
pub const SHIFT_TSC: u32 = 5;
/// The same for `CLOCK_MONOTONIC` timestamps (nanoseconds): units of 512 ns.
pub const SHIFT_NS: u32 = 9;

/// The two latest takes of buffers, by thread: `(thread id, event clock when taken)`, the
/// latest first, of two different threads. Enough to know the latest take of any thread but
/// one. Times only grow: takes happen under the queue's lock, and read the clock inside it.
struct Takes([(u32, u64); 2]);

impl Takes {
    fn note(&mut self, tid: u32, now: u64) {
        if self.0[0].0 != tid {
            self.0[1] = self.0[0];
        }
        self.0[0] = (tid, now);
    }

    /// The latest take of a thread other than `tid` (0: none).
    fn latest_but(&self, tid: u32) -> u64 {
        if self.0[0].0 != tid {
            self.0[0].1
        } else {
            self.0[1].1
        }
    }
}

static TAKES: Mutex<Takes> = Mutex::new(Takes([(0, 0); 2]));

/// Every event keeps its exact time (`HEAPLENS_EXACT_TIMES=1`, for measuring what coarser
/// times change).
static EXACT: AtomicBool = AtomicBool::new(false);

/// Keeps every event's exact time (`true`), or lets [`take`] round where it may.
pub fn set_exact(exact: bool) {
    EXACT.store(exact, Ordering::Relaxed);
}

/// Takes every queued buffer, and the time shift their events may be rounded by (0: exact).
pub fn take() -> (Queue, u32) {
    let registry = thread::REGISTRY.lock();
    let Ok(mut q) = queue::QUEUE.lock() else { return (Vec::new(), 0) };
    let buffers = std::mem::take(&mut *q);
    let now = procinfo::now_ticks_ordered();
    let Ok(mut takes) = TAKES.lock() else { return (buffers, 0) };
    let tids: Vec<u32> =
        buffers.iter().map(|(b, len, _)| heaplens_trace::event::tid(&b[..*len]).unwrap_or(0)).collect();
    for &tid in &tids {
        takes.note(tid, now);
    }
    let Some(&t) = tids.first().filter(|_| !EXACT.load(Ordering::Relaxed)) else { return (buffers, 0) };
    if tids.iter().any(|&u| u != t) {
        return (buffers, 0);
    }
    let shift = if procinfo::tsc() { SHIFT_TSC } else { SHIFT_NS };
    let Some(a) = heaplens_trace::event::first_ts(&buffers[0].0[..buffers[0].1]) else { return (buffers, 0) };
    if takes.latest_but(t) >= a >> shift << shift {
        return (buffers, 0);
    }
    let Ok(registry) = registry else { return (buffers, 0) };
    // SAFETY: registered states stay alive while registered, and the registry's lock is held.
    let others: Vec<&thread::ThreadState> =
        registry.iter().map(|&p| unsafe { &*(p as *const thread::ThreadState) }).filter(|s| s.tid != t).collect();
    let locks: Vec<&OwnerLock> = others.iter().map(|s| s.lock()).collect();
    let quiet = OwnerLock::peek_all(&locks, |taken| {
        // SAFETY: each state read is one whose lock is taken (its owner outside its hooks).
        taken.iter().zip(&others).all(|(&ok, s)| ok && !s.has_events())
    });
    (buffers, if quiet { shift } else { 0 })
}
