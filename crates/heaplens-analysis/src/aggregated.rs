//! Traces recorded in aggregated mode (`heaplens run --aggregate`) carry counters instead of
//! events: this turns their last Aggregate record into the same [`Replay`] the event replay
//! produces, so every table is built the same way. What counters cannot give is left at zero
//! (temporary allocations, peak objects, thread count).

use heaplens_trace::{AggregateRecord, OpClass, TimeMap};

use crate::replay::{Bins, Replay, StackStats};

/// The replay equivalent of an Aggregate record; timestamps go through `clock`.
pub fn replay(a: &AggregateRecord, clock: &TimeMap) -> Replay {
    let mut r = Replay { calls_by_op: vec![0; 256], frees_by_op: vec![0; 256], ..Default::default() };
    for &(op, n) in &a.calls {
        match heaplens_trace::Op::from_u8(op).map(|o| o.class()) {
            Some(OpClass::Dealloc) => r.frees_by_op[op as usize] += n,
            Some(_) => r.calls_by_op[op as usize] += n,
            None => {}
        }
    }
    let mut bins = Bins::default();
    for s in &a.sizes {
        let i = (s.size as usize).min(bins.allocs.len() - 1);
        bins.allocs[i] += s.allocs;
        bins.bytes[i] += s.bytes;
        bins.frees[i] += s.frees;
        bins.freed_bytes[i] += s.freed_bytes;
    }
    for s in &a.stacks {
        let mut kept_by_class = [0u64; 4];
        for k in 0..4 {
            kept_by_class[k] = s.class_bytes[k].saturating_sub(s.class_freed[k]);
        }
        r.allocations += s.allocs;
        r.deallocations += s.frees;
        r.bytes_allocated += s.bytes;
        if s.allocs == 0 {
            continue;
        }
        r.stacks.push(StackStats {
            stack: s.stack,
            allocs: s.allocs,
            bytes: s.bytes,
            bytes_by_class: s.class_bytes,
            frees: s.frees,
            kept: s.allocs.saturating_sub(s.frees),
            kept_bytes: s.bytes.saturating_sub(s.freed_bytes),
            kept_by_class,
            temporary: 0,
        });
    }
    let total_calls: u64 = r.calls_by_op.iter().sum();
    r.failed_allocations = total_calls.saturating_sub(r.allocations);
    r.leaked_objects = r.allocations - r.deallocations.min(r.allocations);
    r.leaked_bytes = a.in_use_bytes;
    r.unmatched_frees = a.unmatched_frees;
    r.peak_bytes = a.peak_bytes;
    r.peak_ts = if a.peak_ts == 0 { 0 } else { clock.to_ns(a.peak_ts) };
    r.last_ts = Some(clock.to_ns(a.ts));
    r.bins = bins;
    r
}
