//! The time axis of a picture: which column of `width` an event's time falls in.

/// `[t0, t1]` (`CLOCK_MONOTONIC` ns) over `width` columns.
#[derive(Debug, Clone, Copy)]
pub struct TimeColumns {
    /// The window's start, nanoseconds.
    pub t0: u64,
    /// The window's end, nanoseconds.
    pub t1: u64,
    /// Columns per nanosecond as a 64.64 fixed-point number: an integer multiply per event,
    /// where a float division (or a float-to-integer conversion) is a chain of them.
    per_ns: u128,
}

impl TimeColumns {
    /// `width` columns over `[t0, t1]` (a window of 0 ns counts as 1).
    pub fn new(width: usize, (t0, t1): (u64, u64)) -> TimeColumns {
        TimeColumns { t0, t1, per_ns: ((width as u128) << 64) / u128::from(t1.saturating_sub(t0).max(1)) }
    }

    /// The column of `ts`, `None` outside the window. The rate is rounded down, so `t1` is
    /// column `width` or the one before, and a time on a boundary may fall in the column before.
    #[inline(always)]
    pub fn of(&self, ts: u64) -> Option<usize> {
        if ts < self.t0 || ts > self.t1 {
            return None;
        }
        Some(((u128::from(ts - self.t0) * self.per_ns) >> 64) as usize)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_fall_in_their_columns() {
        let c = TimeColumns::new(10, (100, 200));
        let cols: Vec<Option<usize>> = [99, 100, 109, 111, 155, 199, 201].iter().map(|&t| c.of(t)).collect();
        assert_eq!(cols, [None, Some(0), Some(0), Some(1), Some(5), Some(9), None]);
        // The rate is rounded down: a time on a boundary may land in the column before it.
        assert_eq!((c.of(110), c.of(200)), (Some(0), Some(9)));
        let whole = TimeColumns::new(1 << 10, (0, 1 << 20));
        assert_eq!((whole.of(1 << 10), whole.of(1 << 20)), (Some(1), Some(1 << 10)), "exact rates are exact");
    }
}
