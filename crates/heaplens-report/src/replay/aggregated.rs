//! Traces recorded in aggregated mode (`heaplens run --aggregate`) carry counters instead of
//! events: this turns their last Aggregate record into the same [`Replay`] the event replay
//! produces, so every table is built the same way. What counters cannot give is left at zero
//! (temporary allocations, peak objects, thread count).

use heaplens_trace::{AggregateRecord, OpClass, TimeMap};

use crate::replay::{Bins, Replay, StackStats};

/// The replay equivalent of an Aggregate record; timestamps go through `clock`.
pub fn replay(a: &AggregateRecord, clock: &TimeMap) -> Replay {
    let mut r = Replay { calls_by_op: vec![0.0; 256], frees_by_op: vec![0.0; 256], ..Default::default() };
    for &(op, n) in &a.calls {
        let n = n as f64;
        match heaplens_trace::Op::from_u8(op).map(|o| o.class()) {
            Some(OpClass::Dealloc) => r.frees_by_op[op as usize] += n,
            Some(_) => r.calls_by_op[op as usize] += n,
            None => {}
        }
    }
    let mut bins = Bins::default();
    for s in &a.sizes {
        let i = (s.size as usize).min(bins.allocs.len() - 1);
        bins.allocs[i] += s.allocs as f64;
        bins.bytes[i] += s.bytes as f64;
        bins.frees[i] += s.frees as f64;
        bins.freed_bytes[i] += s.freed_bytes as f64;
    }
    for s in &a.stacks {
        let kept_by_class: [f64; 4] = std::array::from_fn(|k| s.class_bytes[k].saturating_sub(s.class_freed[k]) as f64);
        r.allocations += s.allocs as f64;
        r.deallocations += s.frees as f64;
        r.bytes_allocated += s.bytes as f64;
        if s.allocs == 0 {
            continue;
        }
        r.stacks.push(StackStats {
            stack: s.stack,
            allocs: s.allocs as f64,
            bytes: s.bytes as f64,
            bytes_by_class: s.class_bytes.map(|b| b as f64),
            frees: s.frees as f64,
            kept: s.allocs.saturating_sub(s.frees) as f64,
            kept_bytes: s.bytes.saturating_sub(s.freed_bytes) as f64,
            kept_by_class,
            temporary: 0.0,
        });
    }
    let total_calls: f64 = r.calls_by_op.iter().sum();
    r.failed_allocations = (total_calls - r.allocations).max(0.0);
    r.leaked_objects = r.allocations - r.deallocations.min(r.allocations);
    r.leaked_bytes = a.in_use_bytes as f64;
    r.unmatched_frees = a.unmatched_frees as f64;
    r.peak_bytes = a.peak_bytes as f64;
    r.peak_ts = if a.peak_ts == 0 { 0 } else { clock.to_ns(a.peak_ts) };
    r.last_ts = Some(clock.to_ns(a.ts));
    r.bins = bins;
    r
}
