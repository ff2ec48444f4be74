//! A process tree's call graph: the processes' graphs summed entry by entry. An entry is the
//! same in two processes when it is the same function of the same module, or a cycle of the
//! same functions; a function that is plain in one process and inside a cycle in another stays
//! two entries, since the cycle's counts cannot be split back into its members. Every
//! allocation still counts once toward an entry and an edge: each process counts its own, and
//! the processes' allocations are apart.

use std::collections::HashMap;

use crate::model::{ByClass, CallGraphEdge, CallGraphEntry, Report};

use super::{add_class, pct};

/// What makes two processes' entries one: (name, module) of a function, or a cycle's sorted
/// members.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Key {
    Function(String, Option<String>),
    Cycle(Vec<String>),
}

fn key(e: &CallGraphEntry) -> Key {
    if e.is_cycle {
        let mut members = e.members.clone();
        members.sort();
        Key::Cycle(members)
    } else {
        Key::Function(e.name.clone(), e.module.clone())
    }
}

/// Sums of one entry's edges toward another entry.
#[derive(Default)]
struct EdgeSum {
    bytes: u64,
    self_bytes: u64,
    by_class: ByClass<u64>,
    calls: u64,
}

struct EntrySum {
    first: CallGraphEntry,
    callers: HashMap<Key, EdgeSum>,
    callees: HashMap<Key, EdgeSum>,
}

fn add_edges(into: &mut HashMap<Key, EdgeSum>, edges: &[CallGraphEdge], keys: &[Key]) {
    for e in edges {
        // An index out of range would be a bug in the graph's builder; skip rather than panic.
        let Some(k) = keys.get(e.index) else { continue };
        let s = into.entry(k.clone()).or_default();
        s.bytes += e.bytes;
        s.self_bytes += e.self_bytes;
        add_class(&mut s.by_class, e.bytes_by_class);
        s.calls += e.calls;
    }
}

/// Sums the call graphs of `reports`, in the order and numbering of a single process's graph:
/// entries by inclusive bytes (descending) then name, `index` their position, cycles numbered
/// `<cycle N>` in that order; `inclusive_percent` over `total_bytes`, the tree's bytes
/// allocated.
pub fn merge(reports: &[Report], total_bytes: u64) -> Vec<CallGraphEntry> {
    let mut sums: HashMap<Key, EntrySum> = HashMap::new();
    for r in reports {
        let keys: Vec<Key> = r.call_graph.iter().map(key).collect();
        for (e, k) in r.call_graph.iter().zip(&keys) {
            let s = sums.entry(k.clone()).or_insert_with(|| EntrySum {
                first: CallGraphEntry {
                    self_bytes: 0,
                    self_by_class: ByClass::default(),
                    inclusive_bytes: 0,
                    calls: 0,
                    recursive_calls: 0,
                    callers: Vec::new(),
                    callees: Vec::new(),
                    ..e.clone()
                },
                callers: HashMap::new(),
                callees: HashMap::new(),
            });
            let f = &mut s.first;
            f.self_bytes += e.self_bytes;
            add_class(&mut f.self_by_class, e.self_by_class);
            f.inclusive_bytes += e.inclusive_bytes;
            f.calls += e.calls;
            f.recursive_calls += e.recursive_calls;
            add_edges(&mut s.callers, &e.callers, &keys);
            add_edges(&mut s.callees, &e.callees, &keys);
        }
    }
    let mut order: Vec<Key> = sums.keys().cloned().collect();
    order.sort_by(|a, b| {
        let (x, y) = (&sums[a].first, &sums[b].first);
        y.inclusive_bytes.cmp(&x.inclusive_bytes).then_with(|| x.name.cmp(&y.name)).then_with(|| a.cmp(b))
    });
    let mut cycles = 0;
    let mut names: HashMap<Key, (usize, String)> = HashMap::new();
    for (i, k) in order.iter().enumerate() {
        let name = match k {
            Key::Cycle(_) => {
                cycles += 1;
                format!("<cycle {cycles}>")
            }
            Key::Function(name, _) => name.clone(),
        };
        names.insert(k.clone(), (i, name));
    }
    let edges = |m: HashMap<Key, EdgeSum>, total_calls: &dyn Fn(&Key, &EdgeSum) -> u64| {
        let mut out: Vec<CallGraphEdge> = m
            .into_iter()
            .map(|(k, s)| CallGraphEdge {
                name: names[&k].1.clone(),
                index: names[&k].0,
                total_calls: total_calls(&k, &s),
                bytes: s.bytes,
                self_bytes: s.self_bytes,
                bytes_by_class: s.by_class,
                calls: s.calls,
            })
            .collect();
        out.sort_by(|x, y| y.bytes.cmp(&x.bytes).then(x.index.cmp(&y.index)));
        out
    };
    let calls_of: HashMap<Key, u64> = sums.iter().map(|(k, s)| (k.clone(), s.first.calls)).collect();
    order
        .iter()
        .map(|k| {
            let s = sums.remove(k).expect("every key in order is summed");
            let mut e = s.first;
            let own_calls = e.calls;
            (e.index, e.name) = names[k].clone();
            e.inclusive_percent = pct(e.inclusive_bytes, total_bytes);
            // gprof's called/total: a caller line counts the entry's calls, a callee line the
            // callee's.
            e.callers = edges(s.callers, &|_, _| own_calls);
            e.callees = edges(s.callees, &|k, _| calls_of[k]);
            e
        })
        .collect()
}
