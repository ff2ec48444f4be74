//! The aggregated (long-run) mode's record: per-stack and per-size counters kept inside the
//! process instead of one event per call, as mprof did and as memray's aggregated mode does. A
//! trace then grows with the number of distinct call stacks, not with the number of
//! allocations, while leaks (blocks live now) and the peak stay exact.
//!
//! Payload of an Aggregate block (all varints):
//! ```text
//! ts peak_bytes peak_ts in_use_bytes unmatched_frees
//! ncalls (op count)*
//! nsizes (size allocs bytes frees freed_bytes)*          size 1025 stands for "> 1024"
//! nstacks (stack allocs bytes frees freed_bytes (class_bytes class_freed){4})*
//! ```
//! Each Aggregate block holds the totals since the start of the process; the last one wins.

use crate::record::Malformed;
use crate::varint::{put, Cursor};

/// The bin that stands for every size above 1024 bytes (mprof's "> 1024").
pub const LARGE_BIN: u64 = 1025;

/// Counters of one allocation size (exact sizes 0..=1024, then [`LARGE_BIN`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SizeCounters {
    /// The size in bytes, or [`LARGE_BIN`].
    pub size: u64,
    /// Allocations.
    pub allocs: u64,
    /// Bytes allocated.
    pub bytes: u64,
    /// Deallocations of blocks of this size.
    pub frees: u64,
    /// Bytes deallocated.
    pub freed_bytes: u64,
}

/// Counters of one allocating call stack. Size classes are mprof's: s 0-32, m 33-256,
/// l 257-2048, x above 2048 bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StackCounters {
    /// Trie node of the allocating stack.
    pub stack: u32,
    /// Allocations.
    pub allocs: u64,
    /// Bytes allocated.
    pub bytes: u64,
    /// Deallocations of blocks allocated here.
    pub frees: u64,
    /// Bytes of those.
    pub freed_bytes: u64,
    /// Bytes allocated per size class (s, m, l, x).
    pub class_bytes: [u64; 4],
    /// Bytes deallocated per size class.
    pub class_freed: [u64; 4],
}

/// One snapshot of the aggregated counters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AggregateRecord {
    /// When the snapshot was taken (event-clock units, like event timestamps).
    pub ts: u64,
    /// Most bytes in use at any moment so far.
    pub peak_bytes: u64,
    /// When that peak was reached (event-clock units).
    pub peak_ts: u64,
    /// Bytes in use at the snapshot.
    pub in_use_bytes: u64,
    /// Deallocations of blocks the monitor never saw allocated.
    pub unmatched_frees: u64,
    /// Calls per entry point (op byte, count), failed allocations included.
    pub calls: Vec<(u8, u64)>,
    /// Per-size counters, sizes that occurred.
    pub sizes: Vec<SizeCounters>,
    /// Per-stack counters, stacks that allocated.
    pub stacks: Vec<StackCounters>,
}

/// mprof's size class of a block: 0 = s (0-32), 1 = m (33-256), 2 = l (257-2048), 3 = x.
pub fn size_class(size: u64) -> usize {
    match size {
        0..=32 => 0,
        33..=256 => 1,
        257..=2048 => 2,
        _ => 3,
    }
}

impl AggregateRecord {
    /// Serializes the record.
    pub fn encode(&self) -> Vec<u8> {
        let mut o = Vec::new();
        for v in [self.ts, self.peak_bytes, self.peak_ts, self.in_use_bytes, self.unmatched_frees] {
            put(&mut o, v);
        }
        put(&mut o, self.calls.len() as u64);
        for &(op, n) in &self.calls {
            put(&mut o, op.into());
            put(&mut o, n);
        }
        put(&mut o, self.sizes.len() as u64);
        for s in &self.sizes {
            for v in [s.size, s.allocs, s.bytes, s.frees, s.freed_bytes] {
                put(&mut o, v);
            }
        }
        put(&mut o, self.stacks.len() as u64);
        for s in &self.stacks {
            for v in [s.stack.into(), s.allocs, s.bytes, s.frees, s.freed_bytes] {
                put(&mut o, v);
            }
            for c in 0..4 {
                put(&mut o, s.class_bytes[c]);
                put(&mut o, s.class_freed[c]);
            }
        }
        o
    }

    /// Parses a payload.
    ///
    /// # Errors
    /// [`Malformed`] if the payload is short.
    pub fn decode(p: &[u8]) -> Result<Self, Malformed> {
        let e = Malformed("aggregate");
        let mut c = Cursor::new(p);
        let mut r = AggregateRecord {
            ts: c.var().ok_or(e)?,
            peak_bytes: c.var().ok_or(e)?,
            peak_ts: c.var().ok_or(e)?,
            in_use_bytes: c.var().ok_or(e)?,
            unmatched_frees: c.var().ok_or(e)?,
            ..Default::default()
        };
        for _ in 0..c.var().ok_or(e)? {
            r.calls.push((c.var().ok_or(e)? as u8, c.var().ok_or(e)?));
        }
        for _ in 0..c.var().ok_or(e)? {
            let mut v = [0u64; 5];
            for x in &mut v {
                *x = c.var().ok_or(e)?;
            }
            r.sizes.push(SizeCounters { size: v[0], allocs: v[1], bytes: v[2], frees: v[3], freed_bytes: v[4] });
        }
        for _ in 0..c.var().ok_or(e)? {
            let mut v = [0u64; 5];
            for x in &mut v {
                *x = c.var().ok_or(e)?;
            }
            let mut s = StackCounters {
                stack: u32::try_from(v[0]).map_err(|_| e)?,
                allocs: v[1],
                bytes: v[2],
                frees: v[3],
                freed_bytes: v[4],
                ..Default::default()
            };
            for k in 0..4 {
                s.class_bytes[k] = c.var().ok_or(e)?;
                s.class_freed[k] = c.var().ok_or(e)?;
            }
            r.stacks.push(s);
        }
        Ok(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips() {
        let r = AggregateRecord {
            ts: 9,
            peak_bytes: 2040000,
            peak_ts: 5,
            in_use_bytes: 1023876,
            unmatched_frees: 1,
            calls: vec![(1, 10000)],
            sizes: vec![SizeCounters { size: 204, allocs: 10000, bytes: 2040000, frees: 4981, freed_bytes: 1016124 }],
            stacks: vec![StackCounters {
                stack: 7,
                allocs: 5019,
                bytes: 1023876,
                class_bytes: [0, 1023876, 0, 0],
                ..Default::default()
            }],
        };
        assert_eq!(AggregateRecord::decode(&r.encode()).unwrap(), r);
        assert_eq!((size_class(32), size_class(33), size_class(2048), size_class(2049)), (0, 1, 2, 3));
    }
}
