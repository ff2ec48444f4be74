//! mprof's direct allocation table (gprof's flat profile): bytes per function that called the
//! allocator itself.

use rustc_hash::FxHashMap as HashMap;

use super::{count, pct, Inputs};
use crate::model::{ByClass, DirectRow, DirectTable};

#[derive(Default, Clone, Copy)]
struct Acc {
    bytes: [f64; 4],
    kept: [f64; 4],
    calls: f64,
}

impl Acc {
    fn row(&self, function: String, module: Option<String>, all_bytes: u64, all_kept: u64) -> DirectRow {
        let by_class = self.bytes.map(count);
        let kept_by_class = self.kept.map(count);
        let bytes = count(self.bytes.iter().sum());
        let kept_bytes = count(self.kept.iter().sum());
        DirectRow {
            function,
            module,
            bytes,
            percent: pct(bytes, all_bytes),
            bytes_by_class: ByClass::from_array(by_class),
            percent_by_class: ByClass::from_array(by_class.map(|b| pct(b, all_bytes))),
            kept_bytes,
            kept_by_class: ByClass::from_array(kept_by_class),
            kept_percent_by_class: ByClass::from_array(kept_by_class.map(|b| pct(b, all_kept))),
            calls: count(self.calls),
        }
    }
}

/// Builds the table from the innermost frame of each allocation path (stacks with no frames
/// count under `<unknown>`). Rows are sorted by bytes, then calls, descending.
pub fn direct(inp: Inputs<'_>) -> DirectTable {
    let mut by_fn: HashMap<Option<u32>, Acc> = HashMap::default();
    let mut total = Acc::default();
    for (i, s) in inp.replay.stacks.iter().enumerate() {
        if s.allocs == 0.0 {
            continue;
        }
        let f = inp.paths.get(i).first().map(|&site| inp.frames.function_of(site));
        let a = by_fn.entry(f).or_default();
        for acc in [a, &mut total] {
            for c in 0..4 {
                acc.bytes[c] += s.bytes_by_class[c];
                acc.kept[c] += s.kept_by_class[c];
            }
            acc.calls += s.allocs;
        }
    }
    let all_bytes = count(total.bytes.iter().sum());
    let all_kept = count(total.kept.iter().sum());
    let mut rows: Vec<DirectRow> = by_fn
        .into_iter()
        .map(|(f, a)| match f {
            Some(f) => {
                let info = &inp.frames.functions[f as usize];
                a.row(info.name.clone(), info.module.clone(), all_bytes, all_kept)
            }
            None => a.row("<unknown>".into(), None, all_bytes, all_kept),
        })
        .collect();
    rows.sort_by(|a, b| b.bytes.cmp(&a.bytes).then(b.calls.cmp(&a.calls)).then_with(|| a.function.cmp(&b.function)));
    DirectTable { rows, total: total.row("<TOTAL>".into(), None, all_bytes, all_kept) }
}
