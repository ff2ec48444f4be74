//! Which threads are recording right now: those that handed the writer at least
//! [`BUSY_BYTES`] of events at once (a filled buffer, not a sweep's few events) within the last
//! [`WINDOW_NS`]. The writer encodes events as columns only while the busy threads do not
//! outnumber the processors (see [`crate::thread::columns_affordable`]): beyond, the threads
//! write out the backlog themselves, and the encoding would take their time.

/// How long a thread counts as busy after its last buffer, in nanoseconds: two of the writer's
/// sweeps (every partly filled buffer is flushed every 100 ms).
pub const WINDOW_NS: u64 = 200_000_000;

/// A hand-over at least this large marks its thread busy.
pub const BUSY_BYTES: usize = 32 << 10;

/// Threads seen recently, with when each was last seen (`CLOCK_MONOTONIC` nanoseconds).
#[derive(Default)]
pub struct Activity {
    recent: Vec<(u32, u64)>,
}

impl Activity {
    /// Notes that thread `tid` handed over `bytes` of events at `now`.
    pub fn saw(&mut self, tid: u32, bytes: usize, now: u64) {
        if bytes < BUSY_BYTES {
            return;
        }
        match self.recent.iter_mut().find(|(t, _)| *t == tid) {
            Some(e) => e.1 = now,
            None => self.recent.push((tid, now)),
        }
    }

    /// How many threads handed over events within the window before `now`.
    pub fn busy(&mut self, now: u64) -> usize {
        self.recent.retain(|&(_, seen)| now.saturating_sub(seen) < WINDOW_NS);
        self.recent.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threads_stop_counting_after_the_window() {
        let mut a = Activity::default();
        a.saw(1, BUSY_BYTES, 0);
        a.saw(2, BUSY_BYTES, 50_000_000);
        a.saw(1, BUSY_BYTES, 100_000_000);
        a.saw(3, 100, 100_000_000);
        assert_eq!(a.busy(150_000_000), 2);
        assert_eq!(a.busy(260_000_000), 1);
        assert_eq!(a.busy(400_000_000), 0);
    }
}
