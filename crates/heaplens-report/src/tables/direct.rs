//! mprof's direct allocation table (gprof's flat profile): bytes per function that called the
//! allocator itself.

use rustc_hash::FxHashMap as HashMap;

use super::{count, pct, Inputs};
use crate::model::{ByClass, DirectRow, DirectTable};

#[derive(Default, Clone)]
struct Acc {
    bytes: [f64; 4],
    kept: [f64; 4],
    calls: f64,
    /// Bytes by the library function they came through (`None`: called the allocator itself).
    via: HashMap<Option<u32>, f64>,
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
            via: None,
            via_others: 0,
        }
    }

    /// The library function most bytes came through, if any did.
    fn top_via(&self) -> Option<u32> {
        self.via.iter().max_by(|a, b| a.1.total_cmp(b.1).then(b.0.cmp(a.0))).and_then(|(&f, _)| f)
    }
}

/// Builds the table from the innermost frame of each allocation path, as attributed
/// ([`heaplens_interpret::paths::Attribution`]; stacks with no frames count under
/// `<unknown>`), each row with the library function most of its bytes came through. Rows are sorted by bytes, then calls, descending.
pub fn direct(inp: Inputs<'_>) -> DirectTable {
    let mut by_fn: HashMap<Option<u32>, Acc> = HashMap::default();
    let mut total = Acc::default();
    for (i, s) in inp.replay.stacks.iter().enumerate() {
        if s.allocs == 0.0 {
            continue;
        }
        let f = inp.paths.get(i).first().map(|&site| inp.frames.function_of(site));
        let a = by_fn.entry(f).or_default();
        let via = inp.paths.via(i).map(|site| inp.frames.function_of(site));
        *a.via.entry(via).or_default() += s.bytes_by_class.iter().sum::<f64>();
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
                let mut row = a.row(info.name.clone(), info.module.clone(), all_bytes, all_kept);
                row.via = a.top_via().map(|v| inp.frames.name(v).to_string());
                let through = a.via.keys().filter(|v| v.is_some()).count() as u64;
                row.via_others = through.saturating_sub(1);
                row
            }
            None => a.row("<unknown>".into(), None, all_bytes, all_kept),
        })
        .collect();
    rows.sort_by(|a, b| b.bytes.cmp(&a.bytes).then(b.calls.cmp(&a.calls)).then_with(|| a.function.cmp(&b.function)));
    DirectTable { rows, total: total.row("<TOTAL>".into(), None, all_bytes, all_kept) }
}
