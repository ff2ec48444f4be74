//! Whether a thread gets a processor to itself: the work it does for another thread only pays
//! when it runs beside that thread, not in its place (a machine whose other processors are
//! busy with other programs).

use std::time::{Duration, Instant};

/// Intervals shorter than this say nothing (scheduler ticks are a few milliseconds).
const MIN_SPAN: Duration = Duration::from_micros(500);

/// The share of the wall time a thread ran, over a span of its work.
pub struct Span {
    wall: Instant,
    cpu: Duration,
}

/// The calling thread's processor time.
fn thread_cpu() -> Duration {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid out-pointer; the clock exists on every Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

impl Span {
    /// Starts a span of the calling thread's work.
    pub fn start() -> Self {
        Span { wall: Instant::now(), cpu: thread_cpu() }
    }

    /// Ends the span on the same thread: `Some(true)` when the thread ran less than three
    /// quarters of it (it waited for a processor), `None` when it was too short to tell.
    pub fn crowded(self) -> Option<bool> {
        let wall = self.wall.elapsed();
        let cpu = thread_cpu().saturating_sub(self.cpu);
        (wall >= MIN_SPAN).then(|| cpu * 4 < wall * 3)
    }
}
