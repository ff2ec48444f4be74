//! `analyze_file` reads, replays and symbolizes on several threads, replaying events before the
//! whole trace is read and holding at most its payload budget of them; whatever order the
//! blocks come in, and however small the budget, its report must equal that of the plain
//! load-then-analyse path (which holds the whole trace and merges it unbounded).

mod common;

use common::{free, malloc, Ev, TraceBuilder};
use heaplens_interpret::view::{Block, Release, View};
use heaplens_interpret::{ElfSymbolizer, Trace};
use heaplens_report::{analyze, analyze_file, Options};

const START: u64 = 1_000_000_000;
const MAIN: u32 = 4242; // the pid in TraceBuilder's Process record

const NODES: &[(u32, u32, u64)] = &[(1, 0, 0x10), (2, 1, 0x20), (3, 2, 0x30), (4, 1, 0x40)];

fn check(name: &str, bytes: Vec<u8>) {
    let path = std::env::temp_dir().join(format!("heaplens-pipeline-{}-{name}.hltrace", std::process::id()));
    std::fs::write(&path, bytes).unwrap();
    let opts = Options::default();
    let trace = Trace::load(&path, false).unwrap();
    let plain = analyze(&trace, &mut ElfSymbolizer::new(&trace.modules), &opts);
    // The default budget holds these traces whole; 4 KiB holds one or two payloads, so the
    // replay narrows its window and may have to replay from the file again (`ondisk.rs`).
    for budget in [opts.payload_budget, 64 << 10, 4 << 10] {
        let fast = analyze_file(&path, &Options { payload_budget: budget, ..opts.clone() }).unwrap();
        let (a, b) = (serde_json::to_value(&fast).unwrap(), serde_json::to_value(&plain).unwrap());
        assert_eq!(a, b, "{name}, budget {budget}");
        assert!(fast.summary.allocations > 0, "{name}");
    }
    // The public replay merges the threads one block per thread at a time: the same order.
    let mut seq = Seq::default();
    heaplens_interpret::view::replay(&path, &mut seq).unwrap();
    let want: Vec<(u64, u32, u64)> = trace.events().map(|e| (e.ts, e.tid, e.addr)).collect();
    assert_eq!(seq.0.len(), want.len(), "{name}");
    if let Some(i) = (0..want.len()).find(|&i| seq.0[i] != want[i]) {
        panic!(
            "{name}: event {i} differs from the unbounded merge's: {:?} against {:?}",
            &seq.0[i..i + 3],
            &want[i..i + 3]
        );
    }
    std::fs::remove_file(&path).unwrap();
}

/// Every event a view sees, as (time, thread, address).
#[derive(Default)]
struct Seq(Vec<(u64, u32, u64)>);

impl View for Seq {
    fn allocation(&mut self, b: &Block) {
        self.0.push((b.ts, b.tid, b.addr));
    }
    fn deallocation(&mut self, r: &Release, _b: &Block) {
        self.0.push((r.ts, r.tid, r.addr));
    }
    fn unmatched(&mut self, r: &Release) {
        self.0.push((r.ts, r.tid, r.addr));
    }
    fn failed_allocation(&mut self, b: &Block) {
        self.0.push((b.ts, b.tid, b.addr));
    }
}

/// A thread allocating every `step` ns from `from` for `n` events, freeing every other block
/// right away and every third one of another thread's blocks (`other`, same layout).
fn thread(base: u64, other: u64, from: u64, step: u64, n: u64, stack: u32) -> Vec<Ev> {
    let mut evs = Vec::new();
    for i in 0..n {
        let ts = from + i * step;
        evs.push(malloc(ts, base + (i % 5000) * 64, 8 + i % 300, stack));
        if i % 2 == 1 {
            evs.push(free(ts + 1, base + (i % 5000) * 64));
        }
        if i % 3 == 0 && i > 10 {
            evs.push(free(ts + 2, other + ((i - 10) % 5000) * 64));
        }
    }
    evs
}

#[test]
fn main_thread_alone() {
    let evs = thread(0x10_0000, 0x90_0000, START, 1000, 20_000, 3);
    let mut b = TraceBuilder::new(START);
    b.stacks(NODES).events(MAIN, &evs, 500);
    check("alone", b.finish(START + 10_000_000_000));
}

#[test]
fn a_late_thread_restarts_the_replay() {
    // The main thread's blocks cover two seconds; another thread's block, written last, has
    // events from the first second.
    let main = thread(0x10_0000, 0x20_0000, START, 100_000, 20_000, 3);
    let late = thread(0x20_0000, 0x10_0000, START + 50_000, 200_000, 3_000, 4);
    let mut b = TraceBuilder::new(START);
    b.stacks(NODES).events(MAIN, &main, 700).events(77, &late, 10_000);
    check("late", b.finish(START + 10_000_000_000));
}

#[test]
fn interleaved_threads_in_any_order() {
    // Three threads over four seconds, blocks written in rounds but each round's blocks in a
    // different order, and one thread's blocks a whole second late.
    let t: Vec<Vec<Ev>> = (0..3u64)
        .map(|k| {
            thread(
                0x100_0000 * (k + 1),
                0x100_0000 * ((k + 1) % 3 + 1),
                START + k * 7,
                40_000 + k * 1000,
                60_000,
                3 + (k % 2) as u32,
            )
        })
        .collect();
    let chunks: Vec<Vec<&[Ev]>> = t.iter().map(|evs| evs.chunks(2000).collect()).collect();
    let mut b = TraceBuilder::new(START);
    b.stacks(NODES);
    let rounds = chunks.iter().map(Vec::len).max().unwrap();
    for r in 0..rounds + 30 {
        for k in [r % 3, (r + 1) % 3, (r + 2) % 3] {
            // Thread 2's blocks lag 30 rounds (about a second) behind.
            let idx = if k == 2 { r.checked_sub(30) } else { Some(r) };
            if let Some(c) = idx.and_then(|i| chunks[k].get(i)) {
                let tid = if k == 0 { MAIN } else { 100 + k as u32 };
                b.events(tid, c, usize::MAX);
            }
        }
    }
    check("interleaved", b.finish(START + 10_000_000_000));
}
