//! mprof's producer/consumer example (the paper's Figure 1): 10000 widgets of 204 bytes, 5019
//! red ones kept through main > make_red_widget > make_widget, 4981 blue ones freed through
//! main > make_blue_widget > make_widget. Every number of the paper's Figures 2-5 is checked.

mod common;

use common::{free, malloc, Ev, TraceBuilder};
use heaplens_interpret::{MapSymbolizer, Trace};
use heaplens_report::render_text::{render, TextOptions};
use heaplens_report::{analyze, Options, Report};

const START: u64 = 1_000_000_000;
const N: u64 = 10_000;
const RED: u64 = 5019;
const SIZE: u64 = 204;

/// Stack trie: _start > __libc_start_main > __libc_start_call_main > main > make_red_widget >
/// make_widget (node 6), and main > make_blue_widget > make_widget (node 8).
const NODES: &[(u32, u32, u64)] = &[
    (1, 0, 0x7f00_0000_0010), // in _start
    (2, 1, 0x7f00_0000_0020), // in __libc_start_main_impl
    (3, 2, 0x7f00_0000_0030), // in __libc_start_call_main
    (4, 3, 0x5555_0000_1040), // in main, call make_red_widget
    (5, 4, 0x5555_0000_1110), // in make_red_widget
    (6, 5, 0x5555_0000_1210), // in make_widget, call malloc
    (7, 3, 0x5555_0000_1050), // in main, call make_blue_widget
    (8, 7, 0x5555_0000_1310), // in make_blue_widget
    (9, 8, 0x5555_0000_1210), // in make_widget (same return address)
];

fn symbolizer() -> MapSymbolizer {
    let mut s = MapSymbolizer::new();
    s.add(0x7f00_0000_0010, "_start")
        .add(0x7f00_0000_0020, "__libc_start_main_impl")
        .add(0x7f00_0000_0030, "__libc_start_call_main")
        .add(0x5555_0000_1040, "main")
        .add(0x5555_0000_1050, "main")
        .add(0x5555_0000_1110, "make_red_widget")
        .add(0x5555_0000_1310, "make_blue_widget")
        .add(0x5555_0000_1210, "make_widget");
    s
}

/// Widget `i` is red for exactly 5019 of the 10000 (5019 is prime to 10000, so `i * 5019 mod
/// 10000` runs over every residue once).
fn is_red(i: u64) -> bool {
    (i * RED) % N < RED
}

fn widgets_trace() -> Vec<u8> {
    let mut evs = Vec::new();
    let mut ts = START + 1000;
    for i in 0..N {
        let stack = if is_red(i) { 6 } else { 9 };
        evs.push(malloc(ts, 0x5555_1000_0000 + i * 256, SIZE, stack));
        ts += 10;
    }
    for i in (0..N).filter(|&i| !is_red(i)) {
        evs.push(free(ts, 0x5555_1000_0000 + i * 256));
        ts += 10;
    }
    let mut b = TraceBuilder::new(START);
    // Events first, stack nodes after them: definitions may come late.
    b.events(77, &evs, 3000);
    b.stacks(NODES);
    b.finish(ts + 1000)
}

fn report(bytes: &[u8], opts: &Options) -> Report {
    let trace = Trace::from_reader(bytes).unwrap();
    analyze(&trace, &mut symbolizer(), opts)
}

#[test]
fn summary_numbers() {
    let r = report(&widgets_trace(), &Options::default());
    let s = &r.summary;
    assert_eq!(s.calls_by_kind.get("malloc"), Some(&N));
    assert_eq!(s.frees_by_kind.get("free"), Some(&(N - RED)));
    assert_eq!(s.allocations, N);
    assert_eq!(s.deallocations, N - RED);
    assert_eq!(s.unmatched_frees, 0);
    assert_eq!(s.failed_allocations, 0);
    assert_eq!(s.bytes_allocated, N * SIZE);
    assert_eq!(s.peak_bytes, N * SIZE);
    // The peak is reached by the last allocation, at START + 1000 + 9999 * 10.
    assert_eq!(s.peak_time_ns, 1000 + (N - 1) * 10);
    assert_eq!(s.leaked_objects, RED);
    assert_eq!(s.leaked_bytes, RED * SIZE);
    assert_eq!(s.allocations - s.deallocations, s.leaked_objects);
    // Widget 9999 is red, so no blue widget is freed right after its allocation.
    assert!(is_red(N - 1));
    assert_eq!(s.temporary_allocations, 0);
    assert_eq!(s.threads, 1);
    let last_ts = 1000 + (2 * N - RED) * 10 + 1000;
    assert_eq!(s.runtime_ns, last_ts + 5, "exit record's end time");
    assert!(r.trace.complete && !r.trace.truncated);
    assert_eq!(r.trace.corrupt_blocks, 0);
    assert_eq!(r.process.pid, Some(4242));
    assert_eq!(r.process.exit_code, Some(0));
    assert_eq!(r.process.argv, ["widgets", "--fast"]);
}

#[test]
fn memory_leak_table() {
    let r = report(&widgets_trace(), &Options::default());
    assert_eq!(r.leaks.len(), 1);
    let l = &r.leaks[0];
    assert_eq!(l.path, ["main", "make_red_widget", "make_widget"]);
    assert!(!l.cut);
    assert_eq!((l.allocs, l.bytes), (5019, 1_023_876));
    assert_eq!(l.percent, 100.0);

    // Two frames: the path is cut.
    let r = report(&widgets_trace(), &Options { leak_depth: 2, ..Options::default() });
    assert_eq!(r.leaks[0].path, ["make_red_widget", "make_widget"]);
    assert!(r.leaks[0].cut);
}

#[test]
fn allocation_bin_table() {
    let r = report(&widgets_trace(), &Options::default());
    let rows = &r.bins.rows;
    assert_eq!(rows.len(), 2);
    let b = &rows[0];
    assert_eq!(b.size, Some(204));
    assert_eq!((b.allocs, b.bytes, b.frees, b.kept_bytes), (10_000, 2_040_000, 4981, 1_023_876));
    assert_eq!((b.bytes_percent, b.kept_percent), (100.0, 100.0));
    let big = &rows[1];
    assert_eq!((big.size, big.allocs, big.bytes, big.frees, big.kept_bytes), (None, 0, 0, 0, 0));
    let t = &r.bins.total;
    assert_eq!((t.allocs, t.bytes, t.frees, t.kept_bytes), (10_000, 2_040_000, 4981, 1_023_876));
}

#[test]
fn direct_allocation_table() {
    let r = report(&widgets_trace(), &Options::default());
    assert_eq!(r.direct.rows.len(), 1);
    for row in [&r.direct.total, &r.direct.rows[0]] {
        assert_eq!(row.bytes, 2_040_000);
        assert_eq!(row.bytes_by_class.to_array(), [0, 2_040_000, 0, 0]);
        assert_eq!(row.kept_bytes, 1_023_876);
        assert_eq!(row.kept_by_class.to_array(), [0, 1_023_876, 0, 0]);
        assert_eq!(row.calls, 10_000);
        assert_eq!(row.percent_by_class.m, 100.0);
        assert_eq!(row.kept_percent_by_class.m, 100.0);
    }
    assert_eq!(r.direct.total.function, "<TOTAL>");
    assert_eq!(r.direct.rows[0].function, "make_widget");
}

#[test]
fn allocation_call_graph() {
    let r = report(&widgets_trace(), &Options::default());
    let g = &r.call_graph;
    let names: Vec<&str> = g.iter().map(|e| e.name.as_str()).collect();
    // mprof's Figure 5 order: main [0], make_widget [1], make_red_widget [2], make_blue_widget [3].
    assert_eq!(names, ["main", "make_widget", "make_red_widget", "make_blue_widget"]);
    assert!(g.iter().enumerate().all(|(i, e)| e.index == i && !e.is_cycle));

    let main = &g[0];
    assert_eq!((main.self_bytes, main.inclusive_bytes, main.calls), (0, 2_040_000, 10_000));
    assert_eq!(main.inclusive_percent, 100.0);
    assert!(main.callers.is_empty());
    let callees: Vec<(&str, u64, u64, u64)> =
        main.callees.iter().map(|c| (c.name.as_str(), c.bytes, c.calls, c.total_calls)).collect();
    assert_eq!(callees, [("make_red_widget", 1_023_876, 5019, 5019), ("make_blue_widget", 1_016_124, 4981, 4981)]);

    let mw = &g[1];
    assert_eq!((mw.self_bytes, mw.inclusive_bytes, mw.calls), (2_040_000, 2_040_000, 10_000));
    assert_eq!(mw.self_by_class.m, 2_040_000);
    let callers: Vec<(&str, usize, u64, u64, u64, u64)> =
        mw.callers.iter().map(|c| (c.name.as_str(), c.index, c.bytes, c.self_bytes, c.calls, c.total_calls)).collect();
    assert_eq!(
        callers,
        [
            ("make_red_widget", 2, 1_023_876, 1_023_876, 5019, 10_000),
            ("make_blue_widget", 3, 1_016_124, 1_016_124, 4981, 10_000)
        ]
    );
    assert!(mw.callees.is_empty());

    let red = &g[2];
    assert_eq!((red.self_bytes, red.inclusive_bytes, red.calls), (0, 1_023_876, 5019));
    assert!((red.inclusive_percent - 50.19).abs() < 1e-9);
    assert_eq!(red.callers[0].name, "main");
    assert_eq!((red.callers[0].calls, red.callers[0].total_calls), (5019, 5019));
    assert_eq!(
        (red.callees[0].name.as_str(), red.callees[0].calls, red.callees[0].total_calls),
        ("make_widget", 5019, 10_000)
    );
    assert!((g[3].inclusive_percent - 49.81).abs() < 1e-9);
}

#[test]
fn call_sites_tell_frames_apart() {
    use heaplens_interpret::Frame;
    let mut sym = symbolizer();
    let site = |f: &str, line| Frame {
        function: Some(f.into()),
        file: Some("/src/widgets.c".into()),
        line: Some(line),
        ..Frame::default()
    };
    sym.add_frames(0x5555_0000_1210, vec![site("make_widget", 42)]);
    sym.add_frames(0x5555_0000_1040, vec![site("main", 71)]);
    sym.add_frames(0x5555_0000_1110, vec![site("make_red_widget", 55)]);
    let trace = Trace::from_reader(&widgets_trace()[..]).unwrap();
    let r = analyze(&trace, &mut sym, &Options { call_sites: true, ..Options::default() });
    assert_eq!(r.leaks[0].path, ["main@widgets.c:71", "make_red_widget@widgets.c:55", "make_widget@widgets.c:42"]);
}

#[test]
fn json_has_the_documented_keys() {
    let r = report(&widgets_trace(), &Options::default());
    let v = serde_json::to_value(&r).unwrap();
    for k in ["trace", "process", "summary", "leaks", "bins", "direct", "call_graph"] {
        assert!(v.get(k).is_some(), "{k}");
    }
    for k in ["path", "truncated", "corrupt_blocks", "complete"] {
        assert!(v["trace"].get(k).is_some(), "trace.{k}");
    }
    for k in ["pid", "exe", "argv", "exit_code", "exit_signal"] {
        assert!(v["process"].get(k).is_some(), "process.{k}");
    }
    for k in [
        "calls_by_kind",
        "frees_by_kind",
        "allocations",
        "deallocations",
        "unmatched_frees",
        "failed_allocations",
        "bytes_allocated",
        "peak_bytes",
        "peak_time_ns",
        "leaked_bytes",
        "leaked_objects",
        "temporary_allocations",
        "runtime_ns",
        "threads",
    ] {
        assert!(v["summary"].get(k).is_some(), "summary.{k}");
    }
    assert_eq!(v["summary"]["calls_by_kind"]["malloc"], 10_000);
    assert_eq!(v["leaks"][0]["path"], serde_json::json!(["main", "make_red_widget", "make_widget"]));
    assert_eq!(v["bins"]["rows"][1]["size"], serde_json::Value::Null);
    assert_eq!(v["bins"]["total"]["kept_bytes"], 1_023_876);
    assert_eq!(v["direct"]["rows"][0]["bytes_by_class"]["m"], 2_040_000);
    assert_eq!(v["direct"]["total"]["calls"], 10_000);
    let e = &v["call_graph"][1];
    for k in [
        "index",
        "name",
        "members",
        "is_cycle",
        "self_bytes",
        "inclusive_bytes",
        "inclusive_percent",
        "calls",
        "callers",
        "callees",
    ] {
        assert!(e.get(k).is_some(), "call_graph.{k}");
    }
    for k in ["name", "index", "bytes", "calls", "total_calls"] {
        assert!(e["callers"][0].get(k).is_some(), "callers.{k}");
    }
}

#[test]
fn text_report_shows_the_tables() {
    let r = report(&widgets_trace(), &Options::default());
    let text = render(&r, &TextOptions::default());
    println!("{text}");
    assert!(text.contains("main > make_red_widget > make_widget"), "{text}");
    assert!(text.contains("1023876 (100)"), "{text}");
    assert!(text.contains("<TOTAL>"));
    assert!(text.contains("make_widget [1]"));
    let leak_line = text.lines().find(|l| l.contains("main > make_red_widget")).unwrap();
    assert!(leak_line.trim_start().starts_with("5019"), "{leak_line}");
}

#[test]
fn threads_merge_by_time() {
    // Thread 1 allocates, thread 2 frees it later; their blocks are written in the other order.
    let t1 = [malloc(START + 10, 0x1000, 64, 6), malloc(START + 30, 0x2000, 64, 6)];
    let t2 = [free(START + 20, 0x1000), free(START + 40, 0x2000)];
    let mut b = TraceBuilder::new(START);
    b.events(2, &t2, 10).events(1, &t1, 10).stacks(NODES);
    let r = report(&b.finish(START + 100), &Options::default());
    let s = &r.summary;
    assert_eq!((s.allocations, s.deallocations, s.unmatched_frees, s.leaked_objects), (2, 2, 0, 0));
    assert_eq!((s.peak_bytes, s.peak_time_ns), (64, 10));
    assert_eq!(s.threads, 2);
}

#[test]
fn truncated_trace_reports_what_it_has() {
    let full = widgets_trace();
    let cut = &full[..full.len() - 7];
    let trace = Trace::from_reader(cut).unwrap();
    let r = analyze(&trace, &mut symbolizer(), &Options::default());
    assert!(r.trace.truncated);
    assert_eq!(r.summary.allocations, N);
    assert_eq!(r.summary.allocations - r.summary.deallocations, r.summary.leaked_objects);
    // Without the stack definitions the paths are unknown, but the numbers stand.
    let no_stacks = &full[..full.len() / 2];
    let r = analyze(&Trace::from_reader(no_stacks).unwrap(), &mut symbolizer(), &Options::default());
    assert!(r.trace.truncated && !r.trace.complete);
    assert!(r.summary.allocations > 0);
    assert_eq!(r.summary.allocations - r.summary.deallocations, r.summary.leaked_objects);
    assert!(r.direct.rows.iter().all(|d| d.function == "<unknown>"));
}

#[test]
fn not_a_trace_is_an_error() {
    let e = Trace::from_reader(&b"definitely not a trace"[..]).unwrap_err();
    assert!(e.to_string().contains("not a heaplens trace"), "{e}");
    let e = Trace::load("/nonexistent/x.hltrace".as_ref(), false).unwrap_err();
    assert!(e.to_string().contains("/nonexistent/x.hltrace"), "{e}");
}

#[test]
fn realloc_and_unmatched_frees_keep_the_invariant() {
    use heaplens_trace::Op;
    let evs = [
        malloc(START + 1, 0x100, 10, 6),
        Ev::Realloc { op: Op::Realloc, ts: START + 2, old: 0x100, addr: 0x200, size: 3000, stack: 6 },
        Ev::Realloc { op: Op::Realloc, ts: START + 3, old: 0xdead, addr: 0x300, size: 40, stack: 9 },
        free(START + 4, 0xbeef),
        Ev::Alloc { op: Op::New, ts: START + 5, addr: 0, size: 1 << 40, stack: 6 },
        Ev::Free { op: Op::Delete, ts: START + 6, addr: 0x300 },
    ];
    let mut b = TraceBuilder::new(START);
    b.events(1, &evs, 100).stacks(NODES);
    let r = report(&b.finish(START + 10), &Options::default());
    let s = &r.summary;
    assert_eq!(s.allocations, 3);
    assert_eq!(s.deallocations, 2);
    assert_eq!(s.unmatched_frees, 2);
    assert_eq!(s.failed_allocations, 1);
    assert_eq!((s.leaked_objects, s.leaked_bytes), (1, 3000));
    assert_eq!(s.calls_by_kind.get("realloc"), Some(&2));
    assert_eq!(s.calls_by_kind.get("operator new"), Some(&1));
    assert_eq!(s.frees_by_kind.get("operator delete"), Some(&1));
    assert_eq!(r.direct.rows[0].kept_by_class.x, 3000);
    assert_eq!(r.bins.rows.last().unwrap().kept_bytes, 3000);
}
