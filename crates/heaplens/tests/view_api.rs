//! The public replay API (`heaplens_interpret::view`) driven by a consumer of its own over a
//! real program whose blocks' lifetimes are known (`examples/lifetimes.c`).

mod common;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ffi::OsStr;

use common::*;
use heaplens_interpret::view::{replay, Block, Release, View};
use heaplens_trace::Op;

/// Steps of `examples/lifetimes.c` and what happened to its blocks, from the replay alone.
#[derive(Default)]
struct Steps {
    /// The next step's number: step j allocates 100 + j bytes.
    next: u64,
    /// Live program blocks by address: (block number, step of its allocation).
    born: HashMap<u64, (u64, u64)>,
    /// Block number -> steps it lived, for blocks freed by `free`.
    lifetimes: BTreeMap<u64, u64>,
    /// Blocks released by their realloc, with the steps they lived.
    moved: BTreeMap<u64, u64>,
    /// Program blocks live at the end.
    live: BTreeSet<u64>,
    /// Releases that ended before their allocation, or on another thread.
    bad_times: u64,
    threads: BTreeSet<u32>,
}

impl View for Steps {
    fn allocation(&mut self, b: &Block) {
        assert!(b.usable >= b.size, "{b:?}");
        self.threads.insert(b.tid);
        if b.op == Op::Malloc && b.size == 100 + self.next {
            self.born.insert(b.addr, (self.next, self.next));
            self.next += 1;
        } else if b.op == Op::Realloc && self.next > 0 && b.size == 100_000 + self.next - 1 {
            self.born.insert(b.addr, (self.next - 1, self.next - 1));
        }
    }

    fn deallocation(&mut self, r: &Release, b: &Block) {
        if r.ts < b.ts || r.tid != b.tid {
            self.bad_times += 1;
        }
        let Some((j, at)) = self.born.remove(&b.addr) else { return };
        let lived = self.next - 1 - at;
        match r.op {
            Op::Realloc => self.moved.insert(j, lived),
            _ => self.lifetimes.insert(j, lived),
        };
    }

    fn end(&mut self, live: &mut dyn Iterator<Item = &Block>) {
        for b in live {
            if let Some(&(j, _)) = self.born.get(&b.addr) {
                self.live.insert(j);
            }
        }
    }
}

#[test]
fn every_blocks_lifetime_in_a_program_that_frees_after_known_steps() {
    let dir = WorkDir::new("view-api");
    let (trace, t) = traced_example(&dir, "lifetimes.c", &[]);
    let n = num(&t, "steps");

    let mut v = Steps::default();
    let t = replay(&trace, &mut v).expect("the trace replays");
    assert_eq!(v.next, n, "every step's allocation seen, in order");
    assert_eq!(v.bad_times, 0);
    assert_eq!(v.threads.len(), 1);
    assert!(t.stacks.len() > 1, "the stack trie comes with the trace");

    let freed = |j: u64| !j.is_multiple_of(17) && j + j % 13 < n;
    let want_lifetimes: BTreeMap<u64, u64> = (0..n).filter(|&j| freed(j)).map(|j| (j, j % 13)).collect();
    assert_eq!(v.lifetimes.len(), want_lifetimes.len());
    assert_eq!(v.lifetimes, want_lifetimes);
    let want_moved: BTreeMap<u64, u64> = (0..n).filter(|j| j % 50 == 0).map(|j| (j, 0)).collect();
    assert_eq!(v.moved, want_moved);
    let want_live: BTreeSet<u64> = (0..n).filter(|&j| !freed(j)).collect();
    assert_eq!(v.live, want_live);
}

#[test]
fn two_views_share_one_pass_and_an_aggregated_trace_says_it_has_no_events() {
    let dir = WorkDir::new("view-api-two");
    let prog = compile_c(&dir, "lifetimes.c", &[]);
    let trace = dir.join("lifetimes.hltrace");
    run_traced(&dir, &trace, &prog, &[] as &[&str]).ok("lifetimes under heaplens");
    let (mut a, mut b) = (Steps::default(), Steps::default());
    replay(&trace, &mut (&mut a, &mut b)).expect("the trace replays");
    assert_eq!((a.next, &a.lifetimes, &a.live), (b.next, &b.lifetimes, &b.live));
    assert!(a.next > 0);

    let agg = dir.join("aggregated.hltrace");
    let o = heaplens(
        &dir,
        &[
            OsStr::new("run"),
            OsStr::new("--aggregate"),
            OsStr::new("-o"),
            agg.as_os_str(),
            OsStr::new("--"),
            prog.as_os_str(),
        ],
    );
    assert!(o.status.success(), "{}", o.show());
    let err = replay(&agg, &mut Steps::default()).expect_err("no events").to_string();
    assert!(err.contains("--aggregate") && err.contains("no events"), "{err}");
}

/// `heaplens report --lifetimes` (issue 18, item 3) on the same program: the lifetimes of
/// `main`'s blocks in steps, against the program's sequence replayed here (a realloc releases
/// its old block before it allocates the new one, and counts as one allocation).
#[test]
fn the_lifetime_table_counts_steps_as_the_program_made_them() {
    let dir = WorkDir::new("lifetime-table");
    let (trace, t) = traced_example(&dir, "lifetimes.c", &[]);
    let n = num(&t, "steps");

    // The program, step by step: (allocations made so far) when each live block was allocated.
    let bucket = |v: u64| (64 - v.leading_zeros()) as usize;
    let (mut made, mut at, mut buckets, mut short) = (0u64, HashMap::new(), vec![0u64; 65], 0u64);
    let mut release = |at: &mut HashMap<u64, u64>, made: u64, j: u64| {
        let steps = made - (at.remove(&j).unwrap() + 1);
        buckets[bucket(steps)] += 1;
        short += u64::from(steps == 0);
    };
    for i in 0..n {
        at.insert(i, made);
        made += 1;
        if i % 50 == 0 {
            release(&mut at, made, i);
            at.insert(i, made);
            made += 1;
        }
        for j in i.saturating_sub(12)..=i {
            if j + j % 13 == i && j % 17 != 0 {
                release(&mut at, made, j);
            }
        }
    }
    let live = at.len() as u64;
    while buckets.last() == Some(&0) {
        buckets.pop();
    }

    // By innermost frame: the C library's stdio buffer, which printf allocates for main, is not
    // main's own block here.
    let args = ["report", trace.to_str().unwrap(), "--lifetimes", "--raw-frames", "--format", "json", "--top", "0"];
    let o = heaplens(&dir, &args).ok("heaplens report --lifetimes");
    let v: serde_json::Value = serde_json::from_str(&o.stdout).unwrap();
    let rows = arr(&v, "lifetimes");
    let main = rows.iter().find(|r| at_str(r, "function") == "main").expect("a row for main");
    let freed = n + n / 50 - live;
    assert_eq!(u(main, "freed"), freed, "blocks freed (realloc'd ones count twice)");
    assert_eq!(u(main, "short_lived"), short, "released before the next allocation");
    assert_eq!(u(main, "live_at_exit"), live);
    let got: Vec<u64> = arr(main, "steps_buckets").iter().map(|x| x.as_u64().unwrap()).collect();
    assert_eq!(got, buckets, "lifetimes in steps, by power of two");
    let ns: u64 = arr(main, "ns_buckets").iter().map(|x| x.as_u64().unwrap()).sum();
    assert_eq!(ns, freed, "every release has a lifetime in ns");
    // The text table names it too.
    let t = heaplens(&dir, &["report", trace.to_str().unwrap(), "--lifetimes"]).ok("text");
    assert!(
        t.stdout.contains("LIFETIMES") && t.stdout.lines().any(|l| l.trim_end().ends_with(" main")),
        "{}",
        t.stdout
    );
}

fn at_str<'a>(v: &'a serde_json::Value, key: &str) -> &'a str {
    v.get(key).and_then(|x| x.as_str()).unwrap_or("")
}

/// The lifetime table's three views: the call site with the most short-lived blocks, the one
/// whose freed blocks live longest, and the one whose blocks are never freed, each first in its
/// view (examples/lifetime_sites.c).
#[test]
fn the_lifetime_table_ranks_short_long_and_never_freed() {
    let dir = WorkDir::new("lifetime-sites");
    let prog = compile_c(&dir, "lifetime_sites.c", &[]);
    let trace = dir.join("sites.hltrace");
    let out = run_traced(&dir, &trace, &prog, &[] as &[&str]).ok("lifetime_sites under heaplens");
    let t = truth(&out.stdout, "lifetime_sites");
    let (long, temp, leak) = (num(&t, "long"), num(&t, "temp"), num(&t, "leak"));

    // By innermost frame: the C library's stdio buffer, which printf allocates for main, is not
    // main's own block here.
    let args = ["report", trace.to_str().unwrap(), "--lifetimes", "--raw-frames", "--format", "json", "--top", "0"];
    let v: serde_json::Value = serde_json::from_str(&heaplens(&dir, &args).ok("json").stdout).unwrap();
    let row = |f: &str| arr(&v, "lifetimes").iter().find(|r| at_str(r, "function") == f).cloned().expect(f);
    let (l, tmp, lk) = (row("long_site"), row("temp_site"), row("leak_site"));
    assert_eq!((u(&tmp, "freed"), u(&tmp, "short_lived")), (temp, temp), "temp_site");
    assert_eq!((u(&l, "freed"), u(&l, "short_lived"), u(&l, "live_at_exit")), (long, 0, 0), "long_site");
    // Each long block lives temp + 0..long-1 steps: 100..109, the bucket from 64.
    assert_eq!(u(&l, "median_steps"), 64, "long_site's median in steps");
    assert_eq!(u(&l, "median_steps_high"), 127, "the median's bucket is 64..=127");
    assert!(u(&l, "median_ns") >= 16_000_000, "long_site's blocks outlive the 20 ms sleep: {l}");
    assert_eq!((u(&lk, "freed"), u(&lk, "live_at_exit")), (0, leak), "leak_site");

    let text = heaplens(&dir, &["report", trace.to_str().unwrap(), "--lifetimes"]).ok("text").stdout;
    let first_after = |title: &str| -> String {
        let mut lines = text.lines().skip_while(|l| !l.contains(title)).skip(2);
        lines.next().unwrap_or_default().split_whitespace().last().unwrap_or_default().to_string()
    };
    assert_eq!(first_after("most short-lived"), "temp_site", "{text}");
    assert_eq!(first_after("longest-lived"), "long_site", "{text}");
    assert_eq!(first_after("live at exit (never freed"), "leak_site", "{text}");
}

/// A view on a thread of its own (`threaded::replay_threaded`) sees what the plain replay
/// gives: the same calls in the same order.
#[test]
fn a_threaded_view_sees_the_same_replay() {
    #[derive(Default, PartialEq, Debug)]
    struct Calls {
        order: u64,
        allocations: u64,
        releases: u64,
        lifetime_ns: u64,
        live: u64,
    }
    impl View for Calls {
        fn allocation(&mut self, b: &Block) {
            self.allocations += 1;
            self.order = self.order.wrapping_mul(31).wrapping_add(b.addr);
        }
        fn deallocation(&mut self, r: &Release, b: &Block) {
            self.releases += 1;
            self.lifetime_ns += r.ts - b.ts;
            self.order = self.order.wrapping_mul(31).wrapping_add(r.addr ^ 1);
        }
        fn end(&mut self, live: &mut dyn Iterator<Item = &Block>) {
            self.live = live.count() as u64;
        }
    }
    let dir = WorkDir::new("threaded-view");
    let prog = compile_c(&dir, "widgets.c", &[]);
    let trace = dir.join("w.hltrace");
    let out = run_traced(&dir, &trace, &prog, &["20000"]).ok("widgets under heaplens");
    let t = truth(&out.stdout, "widgets");
    let (mut plain, mut threaded) = (Calls::default(), Calls::default());
    replay(&trace, &mut plain).unwrap();
    heaplens_interpret::threaded::replay_threaded(&trace, &mut threaded, false).unwrap();
    assert_eq!(plain.allocations, num(&t, "made"));
    assert_eq!(plain.live, num(&t, "red"));
    assert_eq!(threaded, plain);
}

#[test]
fn a_replay_split_in_two_halves_pairs_every_block_as_one_replay() {
    use heaplens_interpret::split::{replay_split, Half, Joinable, Ran};

    /// Order-free sums over the calls: counts, lifetimes, and a sum of hashes of every
    /// (address, allocation time, release time).
    #[derive(Default, PartialEq, Debug)]
    struct Sums {
        allocations: u64,
        releases: u64,
        lifetime_ns: u64,
        pairs: u64,
        unmatched: u64,
        live: u64,
        live_bytes: u64,
        /// Blocks allocated before the cut and released after it.
        joined: u64,
    }
    fn pair(r: &Release, b: &Block) -> u64 {
        (b.addr ^ b.ts.rotate_left(21) ^ r.ts.rotate_left(42)).wrapping_mul(0x9e37_79b9_7f4a_7c15)
    }
    impl View for Sums {
        fn allocation(&mut self, _b: &Block) {
            self.allocations += 1;
        }
        fn deallocation(&mut self, r: &Release, b: &Block) {
            self.releases += 1;
            self.lifetime_ns += r.ts - b.ts;
            self.pairs = self.pairs.wrapping_add(pair(r, b));
        }
        fn unmatched(&mut self, _r: &Release) {
            self.unmatched += 1;
        }
        fn end(&mut self, live: &mut dyn Iterator<Item = &Block>) {
            for b in live {
                self.live += 1;
                self.live_bytes += b.size;
            }
        }
    }
    impl Joinable for Sums {
        fn join(&mut self, later: Self, releases: &[(Release, Option<Block>)]) {
            self.allocations += later.allocations;
            self.releases += later.releases;
            self.lifetime_ns += later.lifetime_ns;
            self.pairs = self.pairs.wrapping_add(later.pairs);
            self.unmatched += later.unmatched;
            for (r, b) in releases {
                if let Some(b) = b {
                    self.deallocation(r, b);
                    self.unmatched -= 1;
                    self.joined += 1;
                }
            }
        }
    }

    let dir = WorkDir::new("split-view");
    let prog = compile_c(&dir, "widgets.c", &[]);
    let trace = dir.join("w.hltrace");
    let out = run_traced(&dir, &trace, &prog, &["300000"]).ok("widgets under heaplens");
    let t = truth(&out.stdout, "widgets");
    let mut plain = Sums::default();
    replay(&trace, &mut plain).unwrap();
    let (tr, index) = heaplens_interpret::scan::scan_indexed(&trace, &mut |_| {}, false).unwrap();
    let (_, split, ran) = replay_split(&trace, tr, &index, |_: Half| Sums::default(), false, 0).unwrap();
    assert!(matches!(ran, Ran::Split(_)), "{ran:?}");
    assert_eq!(plain.allocations, num(&t, "made"));
    assert_eq!(plain.live, num(&t, "red"));
    assert_eq!(plain.releases + plain.live, plain.allocations, "{plain:?}");
    assert!(split.joined > 100, "blocks live across the cut: {split:?}");
    assert_eq!(Sums { joined: 0, ..split }, plain);
}
