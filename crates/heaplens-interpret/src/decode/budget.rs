//! How much of the trace a report holds at once: the reader thread stops reading while the
//! payloads it passed on and the replay has not released add up to [`PAYLOAD_BUDGET`] bytes,
//! so the report's memory follows its live set and its distinct stacks, not the trace's length
//! (a trace of 10^9 events decompresses to several GiB of payloads).
//!
//! The replay, for its part, replays further than its window (see `analyze.rs`) when the
//! reader waits, so that the two never wait for each other.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};

/// Bytes of decompressed event payloads held at once before the reader waits for the replay,
/// by default: 128 MiB, several times the replay's window of 200 ms of trace time on the
/// benchmark's busiest traces (the 2-thread churn's 200 ms are about 35 MiB of payloads).
pub const PAYLOAD_BUDGET: usize = 128 << 20;

/// Payload bytes held, shared by the reader thread (which adds) and the replay (which
/// releases).
pub struct Budget {
    held: Mutex<usize>,
    room: Condvar,
    limit: usize,
    /// The reader thread is waiting for room.
    waiting: AtomicBool,
    /// Nobody will release any more (the replay ended): the reader stops waiting.
    stopped: AtomicBool,
}

impl Default for Budget {
    fn default() -> Self {
        Self::new(PAYLOAD_BUDGET)
    }
}

fn lock(m: &Mutex<usize>) -> MutexGuard<'_, usize> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Budget {
    /// A budget of `limit` bytes.
    pub fn new(limit: usize) -> Self {
        Budget {
            held: Mutex::new(0),
            room: Condvar::new(),
            limit,
            waiting: AtomicBool::new(false),
            stopped: AtomicBool::new(false),
        }
    }

    /// For the reader thread: waits until the payloads held fit in the budget, then counts
    /// `bytes` more. (A payload larger than the whole budget still goes through once the rest
    /// is released.)
    pub fn take(&self, bytes: usize) {
        let mut held = lock(&self.held);
        while *held > 0 && *held + bytes > self.limit && !self.stopped.load(Ordering::Acquire) {
            self.waiting.store(true, Ordering::Release);
            held = self.room.wait(held).unwrap_or_else(|e| e.into_inner());
        }
        self.waiting.store(false, Ordering::Release);
        *held += bytes;
    }

    /// Whether `bytes` more fit now (or nobody releases any more).
    pub fn fits(&self, bytes: usize) -> bool {
        let held = *lock(&self.held);
        held == 0 || held + bytes <= self.limit || self.stopped.load(Ordering::Acquire)
    }

    /// Waits until some bytes are given back, or `timeout` passed; says it waits meanwhile.
    pub fn wait_for_room(&self, timeout: std::time::Duration) {
        let held = lock(&self.held);
        if self.stopped.load(Ordering::Acquire) {
            return;
        }
        self.waiting.store(true, Ordering::Release);
        let _ = self.room.wait_timeout(held, timeout);
        self.waiting.store(false, Ordering::Release);
    }

    /// Gives back `bytes` taken before.
    pub fn give(&self, bytes: usize) {
        let mut held = lock(&self.held);
        *held = held.saturating_sub(bytes);
        self.room.notify_all();
    }

    /// Whether the reader thread waits for the replay to release payloads.
    pub fn reader_waits(&self) -> bool {
        self.waiting.load(Ordering::Acquire)
    }

    /// Payload bytes held now.
    pub fn held(&self) -> usize {
        *lock(&self.held)
    }

    /// The budget in bytes.
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// Lets the reader go on without waiting (the replay is over, or gave up streaming).
    pub fn stop(&self) {
        self.stopped.store(true, Ordering::Release);
        let _held = lock(&self.held);
        self.room.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Duration;

    #[test]
    fn the_reader_waits_for_room_and_goes_on_when_released() {
        let b = Arc::new(Budget::new(100));
        b.take(60);
        b.take(40);
        let r = b.clone();
        let reader = std::thread::spawn(move || r.take(10));
        while !b.reader_waits() {
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(b.held(), 100);
        b.give(60);
        reader.join().unwrap();
        assert_eq!(b.held(), 50);
        assert!(!b.reader_waits());
    }

    #[test]
    fn a_payload_larger_than_the_budget_goes_through_alone_and_stop_ends_waiting() {
        let b = Arc::new(Budget::new(100));
        b.take(500);
        let r = b.clone();
        let reader = std::thread::spawn(move || r.take(1));
        while !b.reader_waits() {
            std::thread::sleep(Duration::from_millis(1));
        }
        b.stop();
        reader.join().unwrap();
        assert_eq!(b.held(), 501);
    }
}
