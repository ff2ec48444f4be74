//! Sampled traces: every recorded allocation of `s` bytes stands for `1 / p(s)` allocations
//! and `s / p(s)` bytes, `p(s) = 1 - exp(-s / rate)`, in every number of the report; counts
//! are summed before they are rounded.

mod common;

use common::{free, malloc, TraceBuilder};
use heaplens_interpret::{MapSymbolizer, Trace};
use heaplens_report::render_text::{render, TextOptions};
use heaplens_report::{analyze, Options, Report};

const START: u64 = 1_000_000_000;
const RATE: u64 = 1000;

/// Same trie as the widgets test: node 6 is main > make_red_widget > make_widget, node 9 is
/// main > make_blue_widget > make_widget.
const NODES: &[(u32, u32, u64)] = &[
    (1, 0, 0x10),
    (2, 1, 0x20),
    (3, 2, 0x30),
    (4, 3, 0x1040),
    (5, 4, 0x1110),
    (6, 5, 0x1210),
    (7, 3, 0x1050),
    (8, 7, 0x1310),
    (9, 8, 0x1210),
];

fn symbolizer() -> MapSymbolizer {
    let mut s = MapSymbolizer::new();
    s.add(0x10, "_start")
        .add(0x20, "__libc_start_main_impl")
        .add(0x30, "__libc_start_call_main")
        .add(0x1040, "main")
        .add(0x1050, "main")
        .add(0x1110, "make_red_widget")
        .add(0x1310, "make_blue_widget")
        .add(0x1210, "make_widget");
    s
}

/// Weight of a recorded block of `size` bytes.
fn w(size: u64) -> f64 {
    1.0 / (1.0 - (-(size as f64) / RATE as f64).exp())
}

fn r(x: f64) -> u64 {
    x.round() as u64
}

/// Ten 500-byte blocks from the red path (four freed), three 2000-byte blocks from the blue
/// path (one freed).
fn report() -> Report {
    let mut evs = Vec::new();
    let mut ts = START + 100;
    for i in 0..10 {
        evs.push(malloc(ts, 0x5555_0000_0000 + i * 1024, 500, 6));
        ts += 10;
    }
    for i in 0..3 {
        evs.push(malloc(ts, 0x5555_1000_0000 + i * 4096, 2000, 9));
        ts += 10;
    }
    for i in 0..4 {
        evs.push(free(ts, 0x5555_0000_0000 + i * 1024));
        ts += 10;
    }
    evs.push(free(ts, 0x5555_1000_0000));
    let mut b = TraceBuilder::sampled(START, RATE);
    b.events(7, &evs, 5).stacks(NODES);
    let trace = Trace::from_reader(&b.finish(ts + 100)[..]).unwrap();
    analyze(&trace, &mut symbolizer(), &Options::default())
}

#[test]
fn summary_is_scaled_by_the_sampling_weights() {
    let (a, b) = (w(500), w(2000));
    let rep = report();
    let s = &rep.summary;
    assert_eq!(s.sample_rate, RATE);
    assert_eq!(rep.trace.sample_rate, RATE);
    assert_eq!(rep.trace.events, 18, "recorded events are not scaled");
    assert_eq!(s.allocations, r(10.0 * a + 3.0 * b));
    assert_eq!(s.allocations, 29);
    assert_eq!(s.calls_by_kind.get("malloc"), Some(&29));
    assert_eq!(s.deallocations, r(4.0 * a + b));
    assert_eq!(s.frees_by_kind.get("free"), Some(&r(4.0 * a + b)));
    assert_eq!(s.bytes_allocated, r(5000.0 * a + 6000.0 * b));
    assert_eq!(s.peak_bytes, s.bytes_allocated);
    assert_eq!(s.peak_objects, 29);
    assert_eq!(s.leaked_objects, r(6.0 * a + 2.0 * b));
    assert_eq!(s.leaked_bytes, r(3000.0 * a + 4000.0 * b));
    assert_eq!(s.unmatched_frees, 0);
    assert_eq!(s.temporary_allocations, 0);
}

#[test]
fn tables_are_scaled_and_rounded_per_row() {
    let (a, b) = (w(500), w(2000));
    let rep = report();

    let rows: Vec<(Vec<String>, u64, u64)> = rep.leaks.iter().map(|l| (l.path.clone(), l.allocs, l.bytes)).collect();
    assert_eq!(
        rows,
        [
            (vec!["main".into(), "make_red_widget".into(), "make_widget".into()], r(6.0 * a), r(3000.0 * a)),
            (vec!["main".into(), "make_blue_widget".into(), "make_widget".into()], r(2.0 * b), r(4000.0 * b)),
        ]
    );

    let bin = rep.bins.rows.iter().find(|x| x.size == Some(500)).unwrap();
    assert_eq!(
        (bin.allocs, bin.bytes, bin.frees, bin.kept_bytes),
        (r(10.0 * a), r(5000.0 * a), r(4.0 * a), r(3000.0 * a))
    );
    let big = rep.bins.rows.last().unwrap();
    assert_eq!((big.allocs, big.bytes, big.frees, big.kept_bytes), (r(3.0 * b), r(6000.0 * b), r(b), r(4000.0 * b)));
    assert_eq!(rep.bins.total.bytes, r(5000.0 * a + 6000.0 * b));

    let d = &rep.direct.rows[0];
    assert_eq!(d.function, "make_widget");
    assert_eq!(d.calls, r(10.0 * a + 3.0 * b));
    assert_eq!(d.bytes, r(5000.0 * a + 6000.0 * b));
    assert_eq!(d.bytes_by_class.to_array(), [0, 0, r(5000.0 * a + 6000.0 * b), 0]);
    assert_eq!(d.kept_bytes, r(3000.0 * a + 4000.0 * b));

    let g = &rep.call_graph;
    let main = g.iter().find(|e| e.name == "main").unwrap();
    assert_eq!((main.calls, main.inclusive_bytes), (r(10.0 * a + 3.0 * b), r(5000.0 * a + 6000.0 * b)));
    let red = g.iter().find(|e| e.name == "make_red_widget").unwrap();
    assert_eq!((red.calls, red.inclusive_bytes), (r(10.0 * a), r(5000.0 * a)));
    assert_eq!((red.callees[0].calls, red.callees[0].total_calls), (r(10.0 * a), r(10.0 * a + 3.0 * b)));
}

#[test]
fn reports_say_they_are_estimates() {
    let rep = report();
    let v = serde_json::to_value(&rep).unwrap();
    assert_eq!(v["summary"]["sample_rate"], RATE);
    assert_eq!(v["trace"]["sample_rate"], RATE);
    let text = render(&rep, &TextOptions::default());
    assert!(text.contains("sampled"), "{text}");
    assert_eq!(
        text.matches("(estimates: the trace sampled one allocation per 1000 B on average)").count(),
        4,
        "{text}"
    );
}

#[test]
fn unsampled_reports_say_nothing_of_it() {
    let mut b = TraceBuilder::new(START);
    b.events(7, &[malloc(START + 1, 0x1000, 500, 6)], 5).stacks(NODES);
    let trace = Trace::from_reader(&b.finish(START + 100)[..]).unwrap();
    let rep = analyze(&trace, &mut symbolizer(), &Options::default());
    assert_eq!(rep.summary.sample_rate, 0);
    assert_eq!(rep.summary.allocations, 1);
    assert!(!render(&rep, &TextOptions::default()).contains("estimate"));
}
