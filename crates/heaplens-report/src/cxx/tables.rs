//! mtrace++'s tables from the counts of [`super::counts`]: each counted stack is symbolized,
//! its member functions found ([`super::names`]) and its levels derived
//! ([`super::scenario`]); then every table is a sum over `(stack, entry point, size)`.

use std::collections::BTreeMap;

use heaplens_interpret::load::StackTable;
use heaplens_interpret::paths::{is_library_frame, resolve_named, FunctionId, Naming};
use heaplens_interpret::symbolize::Symbolizer;
use rustc_hash::FxHashMap as HashMap;

use super::counts::CxxCounts;
use super::model::{ClassRow, CountBytes, CxxTables, DepthRow, DepthTable, EntryRow, PathRow, ScenarioRow, SizeRow};
use super::names::{member, IsClass, Member};
use super::scenario::{levels, Levels, Scenario};
use crate::tables::{count, pct};

/// Weighted allocations and bytes, summed before rounding.
#[derive(Debug, Clone, Copy, Default)]
struct Acc {
    count: f64,
    bytes: f64,
}

impl Acc {
    fn add(&mut self, count: f64, size: u64) {
        self.count += count;
        self.bytes += count * size as f64;
    }

    fn out(self) -> CountBytes {
        CountBytes { count: count(self.count), bytes: count(self.bytes) }
    }
}

type ByScenario = [Acc; 7];

fn scenario_map(a: &ByScenario) -> BTreeMap<Scenario, CountBytes> {
    Scenario::ALL.iter().filter(|s| a[s.index()].count > 0.0).map(|&s| (s, a[s.index()].out())).collect()
}

fn total(a: &ByScenario) -> Acc {
    a.iter().fold(Acc::default(), |t, x| Acc { count: t.count + x.count, bytes: t.bytes + x.bytes })
}

/// Builds the tables. `stacks` is the trace's call-stack trie, `sym` symbolizes its return
/// addresses, `naming` says whether template arguments are kept (by default a class template's
/// instantiations are one class, `Pool<…>`) and `is_class` tells classes from namespaces (from
/// the program's DWARF).
pub fn tables(
    counts: &CxxCounts,
    stacks: &StackTable,
    sym: &mut dyn Symbolizer,
    naming: Naming,
    is_class: IsClass<'_>,
) -> CxxTables {
    let mut ids: Vec<u32> = counts.counts.keys().map(|k| k.0).collect();
    ids.sort_unstable();
    ids.dedup();
    // The tables name member functions without lines; classes keep the naming's arguments.
    let naming = Naming { by_line: false, ..naming };
    let (frames, paths) = resolve_named(stacks, &ids, sym, false, naming);
    let mut members: HashMap<FunctionId, Option<Member>> = HashMap::default();
    let mut levels_of: HashMap<u32, Levels> = HashMap::default();
    for (i, &id) in ids.iter().enumerate() {
        let path: Vec<FunctionId> = paths.get(i).iter().map(|&s| frames.function_of(s)).collect();
        for &f in &path {
            members.entry(f).or_insert_with(|| {
                let (name, module) = (frames.base_name(f), frames.functions[f as usize].module.as_deref());
                if is_library_frame(name, module) || frames.in_library_source(f) {
                    None
                } else {
                    member(name, is_class)
                }
            });
        }
        let path: Vec<Option<&Member>> = path.iter().map(|f| members[f].as_ref()).collect();
        levels_of.insert(id, levels(&path));
    }

    let (mut first, mut lowest) = (ByScenario::default(), ByScenario::default());
    let mut classes: HashMap<&str, ByScenario> = HashMap::default();
    let mut sizes: BTreeMap<u64, ByScenario> = BTreeMap::new();
    let mut dact: HashMap<(&[Member], &str, u64), Acc> = HashMap::default();
    let mut depths: HashMap<Option<&str>, Vec<f64>> = HashMap::default();
    let mut entries: HashMap<Option<&str>, BTreeMap<&str, Acc>> = HashMap::default();
    let (mut all, mut in_classes) = (Acc::default(), 0.0);
    for (&(stack, entry, size), &n) in &counts.counts {
        let l = &levels_of[&stack];
        all.add(n, size);
        first[l.first.index()].add(n, size);
        lowest[l.lowest.index()].add(n, size);
        sizes.entry(size).or_default()[l.lowest.index()].add(n, size);
        dact.entry((&l.chain, entry, size)).or_default().add(n, size);
        entries.entry(l.class()).or_default().entry(entry).or_default().add(n, size);
        if let Some(c) = l.class() {
            in_classes += n;
            classes.entry(c).or_default()[l.lowest.index()].add(n, size);
        }
        let keys = if l.class().is_some() { &[None, l.class()][..] } else { &[None][..] };
        for &key in keys {
            let d = depths.entry(key).or_default();
            if d.len() <= l.chain.len() {
                d.resize(l.chain.len() + 1, 0.0);
            }
            d[l.chain.len()] += n;
        }
    }

    let scenarios = Scenario::ALL
        .iter()
        .map(|&s| {
            let (f, lo) = (first[s.index()].out(), lowest[s.index()].out());
            let n = count(all.count);
            ScenarioRow { scenario: s, first: f, first_pct: pct(f.count, n), lowest: lo, lowest_pct: pct(lo.count, n) }
        })
        .collect();
    let mut classes: Vec<ClassRow> = classes
        .into_iter()
        .map(|(c, a)| ClassRow { class: c.to_string(), total: total(&a).out(), by_scenario: scenario_map(&a) })
        .collect();
    classes.sort_by(|a, b| b.total.bytes.cmp(&a.total.bytes).then_with(|| a.class.cmp(&b.class)));
    let sizes = sizes
        .into_iter()
        .map(|(size, a)| SizeRow { size, total: total(&a).out(), by_scenario: scenario_map(&a) })
        .collect();
    let mut paths: Vec<PathRow> = dact
        .into_iter()
        .map(|((chain, entry, size), a)| PathRow {
            path: chain.iter().map(|m| format!("{}::{}", m.class, m.name)).collect(),
            entry: entry.to_string(),
            size,
            count: a.out().count,
            bytes: a.out().bytes,
        })
        .collect();
    paths.sort_by(|a, b| {
        b.bytes
            .cmp(&a.bytes)
            .then_with(|| a.path.cmp(&b.path))
            .then_with(|| a.entry.cmp(&b.entry))
            .then(a.size.cmp(&b.size))
    });
    let depth_row = |class: Option<&str>, d: &[f64]| DepthRow {
        class: class.map(str::to_string),
        max: d.iter().rposition(|&n| n > 0.0).unwrap_or(0),
        allocations: d.iter().map(|&n| count(n)).collect(),
    };
    let overall = depth_row(None, depths.get(&None).map_or(&[][..], |d| d.as_slice()));
    let mut depth_classes: Vec<DepthRow> =
        depths.iter().filter_map(|(c, d)| c.map(|c| depth_row(Some(c), d))).collect();
    depth_classes.sort_by(|a, b| b.max.cmp(&a.max).then_with(|| a.class.cmp(&b.class)));
    let mut entry_points: Vec<EntryRow> = entries
        .into_iter()
        .map(|(class, by)| {
            let t = by.values().fold(Acc::default(), |t, x| Acc { count: t.count + x.count, bytes: t.bytes + x.bytes });
            EntryRow {
                class: class.map(str::to_string),
                total: t.out(),
                by_entry: by.into_iter().map(|(e, a)| (e.to_string(), a.out())).collect(),
            }
        })
        .collect();
    entry_points.sort_by(|a, b| b.total.bytes.cmp(&a.total.bytes).then_with(|| a.class.cmp(&b.class)));
    CxxTables {
        allocations: count(all.count),
        bytes: count(all.bytes),
        in_classes: count(in_classes),
        scenarios,
        classes,
        sizes,
        paths,
        depth: DepthTable { overall, classes: depth_classes },
        entry_points,
    }
}
