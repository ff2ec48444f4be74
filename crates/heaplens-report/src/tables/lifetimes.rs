//! The lifetime table: [`crate::lifetimes`] per call site (the function that called the
//! allocator, as in the direct allocation table).

use rustc_hash::FxHashMap as HashMap;

use super::Inputs;
use crate::lifetimes::{bucket_floor, StackLifetimes, BUCKETS};
use crate::model::LifetimeRow;

/// One row per function that called the allocator, most short-lived blocks first.
pub fn lifetimes(
    inp: Inputs<'_>,
    by_stack: &heaplens_interpret::idmap::IdMap<u32, StackLifetimes>,
) -> Vec<LifetimeRow> {
    let mut by_fn: HashMap<Option<u32>, StackLifetimes> = HashMap::default();
    for (i, s) in inp.replay.stacks.iter().enumerate() {
        let Some(l) = by_stack.get(&s.stack) else { continue };
        let f = inp.paths.get(i).first().map(|&site| inp.frames.function_of(site));
        by_fn.entry(f).or_default().add(l);
    }
    let mut rows: Vec<LifetimeRow> = by_fn
        .into_iter()
        .map(|(f, l)| {
            let (function, module) = match f {
                Some(f) => {
                    let info = &inp.frames.functions[f as usize];
                    (info.name.clone(), info.module.clone())
                }
                None => ("<unknown>".into(), None),
            };
            let (ns_buckets, steps_buckets) = (l.ns.dense(), l.steps.dense());
            let (ns, steps) = (median(&ns_buckets, l.freed), median(&steps_buckets, l.freed));
            LifetimeRow {
                function,
                module,
                freed: l.freed,
                short_lived: l.short_lived,
                median_ns: ns.0,
                median_ns_high: ns.1.min(l.max_ns),
                max_ns: l.max_ns,
                median_steps: steps.0,
                median_steps_high: steps.1,
                live_at_exit: l.live_at_exit,
                ns_buckets,
                steps_buckets,
            }
        })
        .collect();
    rows.sort_by(|a, b| {
        b.short_lived.cmp(&a.short_lived).then(b.freed.cmp(&a.freed)).then_with(|| a.function.cmp(&b.function))
    });
    rows
}

/// The bounds of the bucket holding the median of `n` values (`(0, 0)` for none).
fn median(h: &[u64], n: u64) -> (u64, u64) {
    let mut seen = 0;
    for (k, &c) in h.iter().enumerate() {
        seen += c;
        if n > 0 && seen * 2 >= n {
            let high = if k + 1 < BUCKETS { bucket_floor(k + 1) - 1 } else { u64::MAX };
            return (bucket_floor(k), high.max(bucket_floor(k)));
        }
    }
    (0, 0)
}
