//! The call graph with recursion: mprof's Figure 7 case (F calls G calls F calls G allocating)
//! must credit each allocation once to the merged cycle, not twice.

mod common;

use common::{malloc, TraceBuilder};
use heaplens_interpret::{MapSymbolizer, Trace};
use heaplens_report::{analyze, Options, Report};

const START: u64 = 5_000;

/// main(0x30) > f(0x81) > g(0x91) > f(0x82) > g(0x92) > malloc(10)      node 5, once
/// main(0x30) > f(0x81) > h(0xa1) > malloc(100)                          node 6, twice
/// main(0x31) > r(0xb1) > r(0xb2) > r(0xb3) > malloc(1000)               node 10, once
/// main(0x32) > g(0x93) > malloc(7)                                      node 12, once
fn trace() -> Vec<u8> {
    let nodes = [
        (1, 0, 0x30),
        (2, 1, 0x81),
        (3, 2, 0x91),
        (4, 3, 0x82),
        (5, 4, 0x92),
        (6, 2, 0xa1),
        (7, 0, 0x31),
        (8, 7, 0xb1),
        (9, 8, 0xb2),
        (10, 9, 0xb3),
        (11, 0, 0x32),
        (12, 11, 0x93),
    ];
    let evs = [
        malloc(START + 1, 0x1000, 10, 5),
        malloc(START + 2, 0x2000, 100, 6),
        malloc(START + 3, 0x3000, 100, 6),
        malloc(START + 4, 0x4000, 1000, 10),
        malloc(START + 5, 0x5000, 7, 12),
    ];
    let mut b = TraceBuilder::new(START);
    b.stacks(&nodes).events(1, &evs, 100);
    b.finish(START + 10)
}

fn report() -> Report {
    let mut s = MapSymbolizer::new();
    for a in [0x30, 0x31, 0x32] {
        s.add(a, "main");
    }
    s.add(0x81, "f").add(0x82, "f").add(0x91, "g").add(0x92, "g").add(0x93, "g").add(0xa1, "h");
    s.add(0xb1, "r").add(0xb2, "r").add(0xb3, "r");
    analyze(&Trace::from_reader(&trace()[..]).unwrap(), &mut s, &Options::default())
}

#[test]
fn mutual_recursion_is_one_cycle_entry_counted_once() {
    let r = report();
    let g = &r.call_graph;
    let total = 10 + 200 + 1000 + 7;
    assert_eq!(r.summary.bytes_allocated, total);
    let main = &g[0];
    assert_eq!((main.name.as_str(), main.inclusive_bytes, main.calls, main.self_bytes), ("main", total, 5, 0));

    let fg = g.iter().find(|e| e.members == ["f", "g"]).expect("f and g merged");
    assert!(fg.is_cycle);
    assert!(fg.name.starts_with("<cycle "), "{}", fg.name);
    // 10 (through f>g>f>g, once, not twice) + 200 (f>h) + 7 (g directly from main).
    assert_eq!(fg.inclusive_bytes, 217);
    assert_eq!(fg.self_bytes, 17);
    assert_eq!(fg.calls, 4);
    assert_eq!(fg.recursive_calls, 3, "f>g>f>g is one entry into the cycle and three recursive frames");
    assert!((fg.inclusive_percent - 217.0 * 100.0 / total as f64).abs() < 1e-9);
    // Edges inside the cycle are not shown; main is its only caller, h its only callee.
    let callers: Vec<(&str, u64, u64, u64, u64)> =
        fg.callers.iter().map(|c| (c.name.as_str(), c.bytes, c.self_bytes, c.calls, c.total_calls)).collect();
    assert_eq!(callers, [("main", 217, 17, 4, 4)]);
    let callees: Vec<(&str, u64, u64, u64)> =
        fg.callees.iter().map(|c| (c.name.as_str(), c.bytes, c.calls, c.total_calls)).collect();
    assert_eq!(callees, [("h", 200, 2, 2)]);
    // main lists the cycle as a callee under its cycle name.
    assert!(main.callees.iter().any(|c| c.name == fg.name && c.index == fg.index && c.bytes == 217));

    let h = g.iter().find(|e| e.name == "h").unwrap();
    assert_eq!((h.self_bytes, h.inclusive_bytes, h.calls, h.is_cycle), (200, 200, 2, false));
    assert_eq!(h.callers[0].name, fg.name);
}

#[test]
fn self_recursion_is_a_cycle_of_one() {
    let r = report();
    let rr = r.call_graph.iter().find(|e| e.members == ["r"]).unwrap();
    assert!(rr.is_cycle);
    assert_eq!(rr.name, "<cycle 1>", "the largest cycle is numbered first");
    assert_eq!((rr.self_bytes, rr.inclusive_bytes, rr.calls, rr.recursive_calls), (1000, 1000, 1, 2));
    assert_eq!(rr.callers.len(), 1);
    assert!(rr.callees.is_empty());
    // Indices follow inclusive bytes.
    let incl: Vec<u64> = r.call_graph.iter().map(|e| e.inclusive_bytes).collect();
    assert!(incl.windows(2).all(|w| w[0] >= w[1]), "{incl:?}");
    assert_eq!(r.call_graph.iter().filter(|e| e.is_cycle).count(), 2);
}

#[test]
fn leak_and_direct_tables_keep_real_frames_in_recursion() {
    let r = report();
    // Leaks are per path, recursion included: depth 5 keeps main > f > g > f > g.
    let l = r.leaks.iter().find(|l| l.bytes == 10).unwrap();
    assert_eq!(l.path, ["main", "f", "g", "f", "g"]);
    assert!(!l.cut);
    let direct: Vec<(&str, u64, u64)> = r.direct.rows.iter().map(|d| (d.function.as_str(), d.bytes, d.calls)).collect();
    assert_eq!(direct, [("r", 1000, 1), ("h", 200, 2), ("g", 17, 2)]);
    assert_eq!(r.direct.total.bytes_by_class.to_array(), [17, 200, 1000, 0]);
}
