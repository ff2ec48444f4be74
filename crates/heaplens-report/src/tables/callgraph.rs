//! mprof's allocation call graph in gprof's layout. Functions on allocation paths are nodes,
//! caller->callee pairs are edges; each strongly connected component with more than one
//! function, or a function that calls itself, is merged into one `<cycle N>` entry (mprof and
//! gprof do the same), which makes the graph acyclic. Along one path each entry then occurs in
//! a single run of frames, so every allocation counts at most once toward an entry and an edge.

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

use petgraph::algo::tarjan_scc;
use petgraph::graph::{DiGraph, NodeIndex};

use super::{count, pct, Inputs};
use crate::model::{ByClass, CallGraphEdge, CallGraphEntry};
use heaplens_interpret::paths::FunctionId;

#[derive(Default, Clone, Copy)]
struct NodeAcc {
    self_by_class: [f64; 4],
    inclusive: f64,
    calls: f64,
    recursive: f64,
}

#[derive(Default, Clone, Copy)]
struct EdgeAcc {
    by_class: [f64; 4],
    self_bytes: f64,
    calls: f64,
}

/// Builds the call graph. Entries are sorted by inclusive bytes (descending), then name; an
/// entry's `index` is its position. Cycles are numbered in that order.
pub fn call_graph(inp: Inputs<'_>) -> Vec<CallGraphEntry> {
    let stacks = &inp.replay.stacks;
    // Function sequences, outermost first, for stacks that allocated.
    let seqs: Vec<(usize, Vec<FunctionId>)> = stacks
        .iter()
        .enumerate()
        .filter(|(i, s)| s.allocs > 0.0 && !inp.paths.get(*i).is_empty())
        .map(|(i, _)| (i, inp.paths.get(i).iter().rev().map(|&s| inp.frames.function_of(s)).collect()))
        .collect();

    // The function-level graph and its strongly connected components.
    let mut g: DiGraph<FunctionId, ()> = DiGraph::new();
    let mut node_of: HashMap<FunctionId, NodeIndex> = HashMap::default();
    let mut edges: HashSet<(FunctionId, FunctionId)> = HashSet::default();
    for (_, seq) in &seqs {
        for &f in seq {
            node_of.entry(f).or_insert_with(|| g.add_node(f));
        }
        for w in seq.windows(2) {
            if edges.insert((w[0], w[1])) {
                g.add_edge(node_of[&w[0]], node_of[&w[1]], ());
            }
        }
    }
    // tarjan_scc recurses once per node of a chain, and a trace's chains are as long as
    // strangers make them (stacks of innermost frames that overlap): a stack of its own, sized
    // by the nodes (reserved, touched only as deep as the recursion goes).
    let stack = (1 << 20) + g.node_count() * 1024;
    let sccs = std::thread::scope(|s| {
        std::thread::Builder::new()
            .name("call-graph".into())
            .stack_size(stack)
            .spawn_scoped(s, || tarjan_scc(&g))
            .map(|t| t.join().expect("the call graph's components"))
    })
    .unwrap_or_else(|_| tarjan_scc(&g));
    let mut comp_of: HashMap<FunctionId, usize> = HashMap::with_capacity_and_hasher(node_of.len(), Default::default());
    for (c, members) in sccs.iter().enumerate() {
        for &n in members {
            comp_of.insert(g[n], c);
        }
    }
    let is_cycle: Vec<bool> = sccs.iter().map(|m| m.len() > 1 || edges.contains(&(g[m[0]], g[m[0]]))).collect();

    // Accumulate per component and per component edge.
    let mut nodes = vec![NodeAcc::default(); sccs.len()];
    let mut cedges: HashMap<(usize, usize), EdgeAcc> = HashMap::default();
    let mut runs: Vec<(usize, u64)> = Vec::new();
    for (i, seq) in &seqs {
        let s = &stacks[*i];
        runs.clear();
        for &f in seq {
            let c = comp_of[&f];
            match runs.last_mut() {
                Some((last, n)) if *last == c => *n += 1,
                _ => runs.push((c, 1)),
            }
        }
        for &(c, n) in &runs {
            let a = &mut nodes[c];
            a.inclusive += s.bytes;
            a.calls += s.allocs;
            a.recursive += s.allocs * (n - 1) as f64;
        }
        let inner = runs.last().expect("non-empty path").0;
        for (k, v) in nodes[inner].self_by_class.iter_mut().zip(s.bytes_by_class) {
            *k += v;
        }
        for (k, w) in runs.windows(2).enumerate() {
            let e = cedges.entry((w[0].0, w[1].0)).or_default();
            for (k, v) in e.by_class.iter_mut().zip(s.bytes_by_class) {
                *k += v;
            }
            e.calls += s.allocs;
            if k + 2 == runs.len() {
                e.self_bytes += s.bytes;
            }
        }
    }

    // Names, order, indices.
    let fname = |n: NodeIndex| inp.frames.name(g[n]).to_string();
    let mut members: Vec<Vec<String>> = sccs.iter().map(|m| m.iter().map(|&n| fname(n)).collect()).collect();
    for m in &mut members {
        m.sort();
    }
    let mut order: Vec<usize> = (0..sccs.len()).collect();
    // Ties (a caller whose every byte goes through one callee) put callers first: tarjan_scc
    // returns components in reverse topological order, so a higher component index is nearer
    // the root.
    order.sort_by(|&a, &b| {
        nodes[b].inclusive.total_cmp(&nodes[a].inclusive).then(b.cmp(&a)).then_with(|| members[a].cmp(&members[b]))
    });
    let mut index_of = vec![0usize; sccs.len()];
    let mut names = vec![String::new(); sccs.len()];
    let mut cycles = 0;
    for (idx, &c) in order.iter().enumerate() {
        index_of[c] = idx;
        names[c] = if is_cycle[c] {
            cycles += 1;
            format!("<cycle {cycles}>")
        } else {
            members[c][0].clone()
        };
    }

    let mut callers: Vec<Vec<CallGraphEdge>> = vec![Vec::new(); sccs.len()];
    let mut callees: Vec<Vec<CallGraphEdge>> = vec![Vec::new(); sccs.len()];
    for (&(a, b), e) in &cedges {
        let edge = |other: usize, total_calls: f64| CallGraphEdge {
            name: names[other].clone(),
            index: index_of[other],
            bytes: count(e.by_class.iter().sum()),
            self_bytes: count(e.self_bytes),
            bytes_by_class: ByClass::from_array(e.by_class.map(count)),
            calls: count(e.calls),
            total_calls: count(total_calls),
        };
        callers[b].push(edge(a, nodes[b].calls));
        callees[a].push(edge(b, nodes[b].calls));
    }
    let by_bytes = |x: &CallGraphEdge, y: &CallGraphEdge| y.bytes.cmp(&x.bytes).then(x.index.cmp(&y.index));
    let total = count(inp.replay.bytes_allocated);
    order
        .iter()
        .map(|&c| {
            let n = &nodes[c];
            let mut up = std::mem::take(&mut callers[c]);
            let mut down = std::mem::take(&mut callees[c]);
            up.sort_by(by_bytes);
            down.sort_by(by_bytes);
            let module =
                if sccs[c].len() == 1 { inp.frames.functions[g[sccs[c][0]] as usize].module.clone() } else { None };
            CallGraphEntry {
                index: index_of[c],
                name: names[c].clone(),
                module,
                members: std::mem::take(&mut members[c]),
                is_cycle: is_cycle[c],
                self_bytes: count(n.self_by_class.iter().sum()),
                self_by_class: ByClass::from_array(n.self_by_class.map(count)),
                inclusive_bytes: count(n.inclusive),
                inclusive_percent: pct(count(n.inclusive), total),
                calls: count(n.calls),
                recursive_calls: count(n.recursive),
                callers: up,
                callees: down,
            }
        })
        .collect()
}
