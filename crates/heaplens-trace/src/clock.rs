//! Event timestamps and how to turn them into nanoseconds.
//!
//! Reading the clock is a measurable part of the monitor's cost per event, so when the kernel
//! itself keeps time with the TSC (its clocksource is `tsc`: invariant and synchronized across
//! cores) the monitor stamps events with raw TSC ticks and writes Clock blocks pairing a tick
//! count with `CLOCK_MONOTONIC`. Readers map ticks to nanoseconds with the straight line through
//! the first and last pairs, which keeps the order of events exactly.

use crate::record::Malformed;
use crate::varint::{put, Cursor};

/// TSC ticks per unit of a [`TimeSource::Tsc`] timestamp (a power of two): 13 ns at 2.45 GHz,
/// at most 16 ns on a counter of 2 GHz or more. The low bits are noise that the time deltas,
/// the costliest column of a trace, paid for: each bit dropped saved 0.13-0.15 bytes per event
/// (units of 4 ticks before; see EXPERIMENTS.md). Events whose order across threads matters (an
/// allocation and its release by another thread, a release and another thread's reuse of the
/// address) are more than a unit apart: a pointer handed between threads, or a block moved from
/// one thread's cache to another's through the arena, takes longer. Readers need not know it:
/// Clock blocks pair timestamps in the same unit with nanoseconds.
pub const TSC_UNIT: u64 = 32;

/// `CLOCK_MONOTONIC` now, nanoseconds: the clock events' times map to and Exit records use.
pub fn monotonic_now_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: a valid timespec to write.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// What event timestamps count.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum TimeSource {
    /// `CLOCK_MONOTONIC` nanoseconds.
    #[default]
    MonotonicNs,
    /// Time-stamp counter ticks, in units of [`TSC_UNIT`] ticks (traces of monitors before
    /// that unit count single ticks); Clock blocks relate them to `CLOCK_MONOTONIC`.
    Tsc,
}

impl TimeSource {
    /// The byte stored in the Process record.
    pub fn to_u8(self) -> u8 {
        match self {
            Self::MonotonicNs => 0,
            Self::Tsc => 1,
        }
    }

    /// Decodes the Process record's byte (unknown values read as nanoseconds).
    pub fn from_u8(b: u8) -> Self {
        if b == 1 {
            Self::Tsc
        } else {
            Self::MonotonicNs
        }
    }
}

/// One Clock block: the same instant on both clocks. Payload: `ticks mono_ns`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClockSync {
    /// Event-clock reading.
    pub ticks: u64,
    /// `CLOCK_MONOTONIC` nanoseconds.
    pub mono_ns: u64,
}

impl ClockSync {
    /// Serializes the record.
    pub fn encode(&self) -> Vec<u8> {
        let mut o = Vec::new();
        put(&mut o, self.ticks);
        put(&mut o, self.mono_ns);
        o
    }

    /// Parses a payload.
    ///
    /// # Errors
    /// [`Malformed`] if the payload is short.
    pub fn decode(p: &[u8]) -> Result<Self, Malformed> {
        let e = Malformed("clock");
        let mut c = Cursor::new(p);
        Ok(Self { ticks: c.var().ok_or(e)?, mono_ns: c.var().ok_or(e)? })
    }
}

/// Maps event timestamps to `CLOCK_MONOTONIC` nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TimeMap {
    ticks0: u64,
    ns0: u64,
    ns_per_tick: f64,
}

impl Default for TimeMap {
    fn default() -> Self {
        Self { ticks0: 0, ns0: 0, ns_per_tick: 1.0 }
    }
}

/// `ns` nanoseconds in the units of a trace whose events count `source`: as they are for
/// `CLOCK_MONOTONIC` timestamps, scaled for TSC ticks by the rate between the earliest and the
/// latest Clock pairs (`first`, `last`); `None` for ticks until two distinct pairs are known.
pub fn ns_in_units(source: TimeSource, first: Option<ClockSync>, last: Option<ClockSync>, ns: u64) -> Option<u64> {
    match (source, first, last) {
        (TimeSource::MonotonicNs, ..) => Some(ns),
        (TimeSource::Tsc, Some(f), Some(l)) if l.ticks > f.ticks && l.mono_ns > f.mono_ns => {
            Some((ns as f64 * (l.ticks - f.ticks) as f64 / (l.mono_ns - f.mono_ns) as f64) as u64)
        }
        _ => None,
    }
}

impl TimeMap {
    /// The map for a trace whose events count `source`, given its Clock pairs in any order.
    /// With fewer than two distinct pairs the rate cannot be measured and 1 ns per tick is
    /// assumed (only a process killed within its first milliseconds leaves that).
    pub fn new(source: TimeSource, syncs: &[ClockSync]) -> Self {
        if source == TimeSource::MonotonicNs || syncs.is_empty() {
            return Self::default();
        }
        let first = syncs.iter().min_by_key(|s| s.ticks).copied().unwrap_or(ClockSync { ticks: 0, mono_ns: 0 });
        let last = syncs.iter().max_by_key(|s| s.ticks).copied().unwrap_or(first);
        let ns_per_tick = if last.ticks > first.ticks && last.mono_ns > first.mono_ns {
            (last.mono_ns - first.mono_ns) as f64 / (last.ticks - first.ticks) as f64
        } else {
            1.0
        };
        Self { ticks0: first.ticks, ns0: first.mono_ns, ns_per_tick }
    }

    /// Nanoseconds that `units` of event time span (a TSC tick is [`TSC_UNIT`] raw ticks; a
    /// `CLOCK_MONOTONIC` unit is 1 ns), rounded to the nearest.
    pub fn span_ns(&self, units: u64) -> u64 {
        (units as f64 * self.ns_per_tick).round() as u64
    }

    /// `CLOCK_MONOTONIC` nanoseconds of event timestamp `ts` (never decreasing in `ts`).
    #[inline]
    pub fn to_ns(&self, ts: u64) -> u64 {
        // Ticks within 2^63 of the first sync point: the difference fits an i64, whose
        // conversion to f64 is one instruction (i128's is a library call, 8% of a map's time).
        let d = (ts as i64).wrapping_sub(self.ticks0 as i64) as f64 * self.ns_per_tick;
        // Through i64 too, for the same reason (the f64 -> u64 conversion is a sequence): the
        // sum is below 2^63 ns, 292 years of uptime.
        let ns = self.ns0 as i64 as f64 + d;
        if ns > 0.0 {
            ns as i64 as u64
        } else {
            0
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_ticks_linearly_and_monotonically() {
        let syncs = [ClockSync { ticks: 3_000, mono_ns: 1_000 }, ClockSync { ticks: 303_000, mono_ns: 101_000 }];
        let m = TimeMap::new(TimeSource::Tsc, &syncs);
        assert_eq!(m.to_ns(3_000), 1_000);
        assert_eq!(m.to_ns(153_000), 51_000);
        assert_eq!(m.to_ns(303_000), 101_000);
        let mut prev = 0;
        for t in (0..400_000).step_by(7) {
            let ns = m.to_ns(t);
            assert!(ns >= prev);
            prev = ns;
        }
        assert_eq!(TimeMap::new(TimeSource::MonotonicNs, &syncs).to_ns(42), 42);
        assert_eq!(ClockSync::decode(&syncs[1].encode()).unwrap(), syncs[1]);
    }
}
