//! mprof's allocation bin table: allocations by exact requested size up to 1024 bytes, one bin
//! above.

use std::collections::{BTreeMap, BTreeSet};

use super::{count, pct};
use crate::model::{BinRow, BinTable, BinTotal};
use crate::replay::{Bins, BIN_COUNT};

/// Builds the table: every size that was allocated, in increasing order, then the `> 1024` bin
/// (always present, as in mprof); `types` names the program's types by size.
pub fn bins(b: &Bins, types: &BTreeMap<u64, BTreeSet<String>>) -> BinTable {
    let kept = |i: usize| (b.bytes[i] - b.freed_bytes[i]).max(0.0);
    let total_bytes = count(b.bytes.iter().sum());
    let total_kept = count((0..BIN_COUNT).map(kept).sum());
    let row = |i: usize, size: Option<u64>| BinRow {
        size,
        allocs: count(b.allocs[i]),
        bytes: count(b.bytes[i]),
        bytes_percent: pct(count(b.bytes[i]), total_bytes),
        frees: count(b.frees[i]),
        kept_bytes: count(kept(i)),
        kept_percent: pct(count(kept(i)), total_kept),
        types: size.and_then(|s| types.get(&s)).map(|t| t.iter().cloned().collect()).unwrap_or_default(),
    };
    let mut rows: Vec<BinRow> =
        (0..BIN_COUNT - 1).filter(|&i| b.allocs[i] > 0.0 || b.frees[i] > 0.0).map(|i| row(i, Some(i as u64))).collect();
    rows.push(row(BIN_COUNT - 1, None));
    BinTable {
        rows,
        total: BinTotal {
            allocs: count(b.allocs.iter().sum()),
            bytes: total_bytes,
            frees: count(b.frees.iter().sum()),
            kept_bytes: total_kept,
        },
    }
}
