//! mprof's memory leak table: blocks live at exit, grouped by the last few frames of their
//! allocation path.

use rustc_hash::FxHashMap as HashMap;

use super::{count, pct, Inputs};
use crate::model::{LeakRow, SuppressionRow};
use heaplens_interpret::suppress::{Origin, Suppression};

/// Groups live-at-exit blocks by the innermost `depth` frames of their path (functions, or
/// call sites when `call_sites` is set): those no suppression covers, or with `suppressed`
/// those one does. Rows are sorted by bytes, then blocks, descending; percentages are of the
/// rows' own total.
pub fn leaks(inp: Inputs<'_>, depth: usize, call_sites: bool, suppressed: bool) -> Vec<LeakRow> {
    let depth = depth.max(1);
    // Key: frame ids innermost first (site ids, or function ids). Value: (blocks, bytes, cut).
    let mut groups: HashMap<Vec<u32>, (f64, f64, bool)> = HashMap::default();
    let mut key = Vec::with_capacity(depth);
    for (i, s) in inp.replay.stacks.iter().enumerate() {
        if s.kept == 0.0 || inp.suppressed(i) != suppressed {
            continue;
        }
        let path = inp.paths.get(i);
        key.clear();
        key.extend(path.iter().take(depth).map(|&site| if call_sites { site } else { inp.frames.function_of(site) }));
        let g = groups.entry(key.clone()).or_default();
        g.0 += s.kept;
        g.1 += s.kept_bytes;
        g.2 |= path.len() > depth;
    }
    let total = count(groups.values().map(|g| g.1).sum());
    let mut rows: Vec<LeakRow> = groups
        .into_iter()
        .map(|(k, (allocs, bytes, cut))| (k, count(allocs), count(bytes), cut))
        .map(|(k, allocs, bytes, cut)| LeakRow {
            path: k
                .iter()
                .rev()
                .map(|&id| {
                    if call_sites {
                        inp.frames.sites[id as usize].label.clone()
                    } else {
                        inp.frames.name(id).to_string()
                    }
                })
                .collect(),
            cut,
            allocs,
            bytes,
            percent: pct(bytes, total),
        })
        .collect();
    rows.sort_by(|a, b| b.bytes.cmp(&a.bytes).then(b.allocs.cmp(&a.allocs)).then_with(|| a.path.cmp(&b.path)));
    rows
}

/// The row of the blocks an exec replaced (all those live at the end).
const EXEC: &str = "exec";

/// The blocks and bytes live at exit each suppression covers, most bytes first; suppressions
/// that covered nothing are left out. After an exec, one row ([`EXEC`]) holds them all.
pub fn suppressions(inp: Inputs<'_>, list: &[Suppression]) -> Vec<SuppressionRow> {
    if inp.replaced {
        let live = inp.replay.stacks.iter().filter(|s| s.kept > 0.0);
        let (blocks, bytes) = live.fold((0.0, 0.0), |(n, b), s| (n + s.kept, b + s.kept_bytes));
        return (blocks > 0.0)
            .then(|| SuppressionRow {
                pattern: EXEC.into(),
                origin: "runtime",
                what: "the heap an exec replaced",
                blocks: count(blocks),
                bytes: count(bytes),
            })
            .into_iter()
            .collect();
    }
    let mut by = vec![(0.0f64, 0.0f64); list.len()];
    for (i, s) in inp.replay.stacks.iter().enumerate() {
        if let Some(k) = inp.paths.suppression(i).filter(|_| s.kept > 0.0) {
            by[k].0 += s.kept;
            by[k].1 += s.kept_bytes;
        }
    }
    let mut rows: Vec<SuppressionRow> = list
        .iter()
        .zip(by)
        .filter(|(_, (blocks, _))| *blocks > 0.0)
        .map(|(s, (blocks, bytes))| SuppressionRow {
            pattern: s.pattern.clone(),
            origin: match s.origin {
                Origin::Runtime => "runtime",
                Origin::User => "user",
            },
            what: s.what,
            blocks: count(blocks),
            bytes: count(bytes),
        })
        .collect();
    rows.sort_by(|a, b| b.bytes.cmp(&a.bytes).then_with(|| a.pattern.cmp(&b.pattern)));
    rows
}
