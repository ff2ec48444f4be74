//! Every view survives a damaged trace in bounded time and memory (issue 28, items 4 and 5):
//! `report` (text, JSON, `--cxx`, `--lifetimes`), `map` (PNG and SVG), `timeline`, `view` and
//! every export format, `diff` (text, JSON), the differential flame graph (`export --base`),
//! `check` and one screen of `live`, each run under a data limit of 512 MiB (`RLIMIT_DATA`: the heap and
//! every private writable mapping, where an address-space limit would count the threads'
//! stacks and malloc's arena reservations) and killed after 30 s. Each must end with exit 0, or
//! a non-zero exit and a `heaplens: error:` line (or `check`'s verdict, exit 1, or its refusal
//! of a damaged trace, exit 2); never a panic,
//! a signal or the watchdog.
//!
//! The named cases are those the issue found: one `malloc` of 2^50 (or 2^44) bytes, an event
//! naming stack 2^28 - 1, one stack varint edited in a recorded trace, a FIFO as the trace and
//! as a module the trace names; and blocks scattered 4 GiB apart (a bitmap each, before) and
//! stack nodes 2^20 ids apart (the trie sized by the last id, before), and LZ4 blocks declaring
//! 200 MiB over ten bytes (each zeroed 200 MiB, before). Then [`MUTATIONS`] mutated traces of `widgets 200`, their
//! blocks rewritten raw with their checksums recomputed so the damage reaches the decoders.

mod common;

use std::ffi::{OsStr, OsString};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::damage::{damage_blocks, trace_blocks, write_raw, Rng};
use common::*;
use heaplens_trace::{BlockKind, EventDecoder, EventEncoder, ModuleRecord, Op, Segment, StackNode};

/// The memory a command may take on a trace under 1 MB.
const DATA_LIMIT: u64 = 512 << 20;

/// The time a command may take on a trace under 1 MB.
const TIME_LIMIT: Duration = Duration::from_secs(30);

/// Mutated traces the fuzz test tries, each through every command (20): about a minute in a
/// debug build on two busy processors.
const MUTATIONS: usize = 120;

/// A stack id far past any trie node (the largest the loader accepts as a node).
const WILD_STACK: u32 = (1 << 28) - 1;

/// Every command that reads a trace, with its arguments for `trace`, writing into `out`.
fn commands(trace: &Path, out: &Path) -> Vec<(String, Vec<OsString>)> {
    let t = trace.as_os_str();
    let o = |name: &str| out.join(name).into_os_string();
    let mut v: Vec<(String, Vec<OsString>)> = vec![
        ("report".into(), vec!["report".into(), t.into()]),
        ("report --format json".into(), vec!["report".into(), t.into(), "--format".into(), "json".into()]),
        ("report --cxx".into(), vec!["report".into(), t.into(), "--cxx".into()]),
        ("report --lifetimes".into(), vec!["report".into(), t.into(), "--lifetimes".into()]),
        ("map png".into(), vec!["map".into(), t.into(), "-o".into(), o("map.png")]),
        ("map svg".into(), vec!["map".into(), t.into(), "-o".into(), o("map.svg")]),
        ("timeline".into(), vec!["timeline".into(), t.into(), "-o".into(), o("timeline.png")]),
        ("view".into(), vec!["view".into(), t.into(), "-o".into(), o("view.html")]),
    ];
    for f in ["collapsed", "flamegraph", "pprof-text", "pprof", "firefox", "heaptrack", "parquet"] {
        v.push((
            format!("export {f}"),
            vec!["export".into(), t.into(), "--format".into(), f.into(), "-o".into(), o(&format!("export.{f}"))],
        ));
    }
    // The commands that read two traces, or judge one: the damaged trace against itself.
    v.push(("diff".into(), vec!["diff".into(), t.into(), t.into()]));
    v.push(("diff --format json".into(), vec!["diff".into(), t.into(), t.into(), "--format".into(), "json".into()]));
    v.push((
        "export --base".into(),
        vec![
            "export".into(),
            t.into(),
            "--base".into(),
            t.into(),
            "--format".into(),
            "flamegraph".into(),
            "-o".into(),
            o("diff.svg"),
        ],
    ));
    v.push(("live".into(), vec!["live".into(), t.into(), "--plain".into(), "--frames".into(), "1".into()]));
    v.push((
        "check".into(),
        vec![
            "check".into(),
            t.into(),
            "--max-peak".into(),
            "1MiB".into(),
            "--max-allocations".into(),
            "150".into(),
            "--no-leaks".into(),
        ],
    ));
    v
}

/// How one command ended.
struct Ended {
    what: String,
    status: std::process::ExitStatus,
    stderr: String,
    took: Duration,
}

impl Ended {
    /// Whether the command did its job: exit 0, or for `heaplens check` exit 1, its verdict
    /// that a budget is broken (each on its line of stdout), or exit 2 refusing a damaged
    /// trace (budgets checked on part of a run prove nothing), not another error.
    fn completed(&self) -> bool {
        let check = self.what.contains("heaplens check");
        self.status.success()
            || (check && self.status.code() == Some(1))
            || (check && self.status.code() == Some(2) && self.stderr.contains("the trace is damaged or incomplete"))
    }

    /// Panics unless the command ended well: exit 0, or a non-zero exit with an error line;
    /// no panic, no signal.
    fn assert_sound(&self) {
        let show = || format!("{}: {} after {:?}\n{}", self.what, describe(&self.status), self.took, self.stderr);
        assert!(self.status.signal().is_none(), "died by a signal (out of memory?): {}", show());
        assert!(!self.stderr.contains("panicked at"), "panicked: {}", show());
        if !self.completed() {
            assert!(self.stderr.lines().any(|l| l.starts_with("heaplens: error:")), "no error line: {}", show());
        }
    }
}

/// Runs `heaplens args` in `dir` under [`DATA_LIMIT`], killing it after `limit`.
fn bounded(dir: &Path, what: &str, args: &[OsString], limit: Duration) -> Ended {
    let mut cmd = Command::new(heaplens_exe());
    cmd.args(args).current_dir(dir).stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::piped());
    // SAFETY: setrlimit is async-signal-safe.
    unsafe {
        cmd.pre_exec(|| {
            let data = libc::rlimit { rlim_cur: DATA_LIMIT, rlim_max: DATA_LIMIT };
            libc::setrlimit(libc::RLIMIT_DATA, &data);
            let core = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
            libc::setrlimit(libc::RLIMIT_CORE, &core);
            Ok(())
        });
    }
    let start = Instant::now();
    let out = wait_within(cmd.spawn().expect("start heaplens"), what, limit);
    Ended { what: what.to_string(), status: out.status, stderr: out.stderr, took: start.elapsed() }
}

/// Runs the commands whose names start with one of `only` (all for an empty `only`) on
/// `trace`, each bounded; returns how each ended, having checked it ended well.
fn run_views(dir: &WorkDir, trace: &Path, what: &str, only: &[&str], limit: Duration) -> Vec<Ended> {
    let out = dir.join("out");
    std::fs::create_dir_all(&out).unwrap();
    commands(trace, &out)
        .into_iter()
        .filter(|(name, _)| only.is_empty() || only.iter().any(|o| name.starts_with(o)))
        .map(|(name, args)| {
            let e = bounded(
                &dir.path,
                &format!("{what}: heaplens {name} (trace kept at {})", trace.display()),
                &args,
                limit,
            );
            e.assert_sound();
            e
        })
        .collect()
}

/// A trace of one thread's events, as rows: each `(op, addr, size, stack)`, 5 ns apart.
fn rows(events: &[(Op, u64, u64, u32)]) -> Vec<u8> {
    let mut buf = vec![0u8; 64 * (events.len() + 1)];
    let mut pos = 0;
    let mut enc = EventEncoder::default();
    enc.begin(&mut buf, &mut pos, 1234);
    for (i, &(op, addr, size, stack)) in events.iter().enumerate() {
        let ts = 5 * (i as u64 + 1);
        match op.class() {
            heaplens_trace::OpClass::Dealloc => enc.dealloc(&mut buf, &mut pos, op, ts, addr),
            _ => enc.alloc(&mut buf, &mut pos, op, ts, addr, size, heaplens_trace::event::glibc_usable(size), stack),
        }
    }
    buf.truncate(pos);
    buf
}

/// A trace holding a small block, released, and one `malloc` of `size` bytes left live.
fn one_malloc(dir: &WorkDir, name: &str, size: u64, stack: u32) -> PathBuf {
    let path = dir.join(name);
    let events = rows(&[
        (Op::Malloc, 0x1000_0000, 64, stack),
        (Op::Free, 0x1000_0000, 0, 0),
        (Op::Malloc, 0x1000_0000, size, stack),
    ]);
    write_raw(&path, &[(BlockKind::Events, events)]);
    assert!(std::fs::metadata(&path).unwrap().len() < 100, "a trace of a few dozen bytes");
    path
}

#[test]
fn a_malloc_of_2e50_or_2e44_bytes_is_drawn_in_bounded_time_and_memory() {
    let dir = WorkDir::new("views-huge-block");
    for shift in [50, 44] {
        let trace = one_malloc(&dir, &format!("malloc-2e{shift}.hltrace"), 1 << shift, 0);
        let ended = run_views(&dir, &trace, &format!("malloc of 2^{shift} bytes"), &[], TIME_LIMIT);
        for e in ended
            .iter()
            .filter(|e| e.what.contains(" map ") || e.what.contains("timeline") || e.what.contains(" view "))
        {
            assert!(e.completed(), "{} draws the block: {}", e.what, e.stderr);
            assert!(e.took < Duration::from_secs(10), "{} took {:?}", e.what, e.took);
        }
    }
}

#[test]
fn an_event_naming_stack_2e28_minus_1_takes_memory_by_what_the_file_holds() {
    let dir = WorkDir::new("views-wild-stack");
    let trace = one_malloc(&dir, "wild-stack.hltrace", 64, WILD_STACK);
    for e in run_views(&dir, &trace, "stack 2^28-1", &[], TIME_LIMIT) {
        assert!(e.completed(), "{}: {}", e.what, e.stderr);
    }
    // The report and the map say the stack is damaged.
    let out = heaplens(&dir, &[OsStr::new("report"), trace.as_os_str()]).ok("report");
    assert!(out.stdout.contains("1 stacks missing outer frames"), "{}", out.stdout);
    assert!(out.stderr.contains("warning") && out.stderr.contains("1 stacks missing outer frames"), "{}", out.stderr);
    let png = dir.join("map.png");
    let out = heaplens(&dir, &[OsStr::new("map"), trace.as_os_str(), OsStr::new("-o"), png.as_os_str()]).ok("map");
    assert!(
        out.stderr.contains("warning") && out.stderr.contains("1 stack ids the trace never defined"),
        "{}",
        out.stderr
    );
}

#[test]
fn a_block_at_the_last_address_is_no_free_slot() {
    let dir = WorkDir::new("views-last-address");
    // 2^64 - 1 is the live maps' mark of a free slot: a trace may still name it.
    let events = rows(&[
        (Op::Malloc, u64::MAX, 64, 0),
        (Op::Malloc, 0x1000_0000, 32, 0),
        (Op::Free, u64::MAX, 0, 0),
        (Op::Malloc, u64::MAX, 16, 0),
    ]);
    let trace = dir.join("last-address.hltrace");
    write_raw(&trace, &[(BlockKind::Events, events)]);
    for e in run_views(&dir, &trace, "a block at 2^64 - 1", &[], TIME_LIMIT) {
        assert!(e.completed(), "{}: {}", e.what, e.stderr);
    }
}

#[test]
fn stack_nodes_each_1m_past_the_last_take_memory_by_the_nodes_present() {
    let dir = WorkDir::new("views-trie-gaps");
    // 255 Stacks blocks of one node each, 2^20 ids apart: a trace of 7 KB.
    let mut blocks: Vec<(BlockKind, Vec<u8>)> = (1..256u32)
        .map(|k| {
            let mut p = Vec::new();
            StackNode::begin(&mut p, k << 20);
            StackNode::push(&mut p, k << 20, 0, 0x40_1000 + u64::from(k));
            (BlockKind::Stacks, p)
        })
        .collect();
    blocks.push((BlockKind::Events, rows(&[(Op::Malloc, 0x1000_0000, 64, 255 << 20)])));
    let trace = dir.join("trie-gaps.hltrace");
    write_raw(&trace, &blocks);
    for e in run_views(&dir, &trace, "stack nodes 2^20 apart", &[], TIME_LIMIT) {
        assert!(e.completed(), "{}: {}", e.what, e.stderr);
    }
}

#[test]
fn thousands_of_stacks_up_one_deep_chain_are_drawn_in_bounded_time_and_memory() {
    let dir = WorkDir::new("views-deep-chain");
    // One chain of 40,000 frames; 2,000 allocations and as many CPU samples at stacks 20
    // frames apart up it, each left live (its innermost 1,024 frames differ from every other's):
    // 2 million distinct frames of flame graph or profile. With 4,000 such stacks, `view` took
    // 8 GB and 50 s before (two 800 MB SVGs), and `export firefox` 550 MB; now the debug build
    // these tests run took 22.5 s for `view` of those 4,000, too near the 30 s limit on a
    // loaded machine.
    const CHAIN: u32 = 40_000;
    let mut nodes = Vec::new();
    StackNode::begin(&mut nodes, 1);
    for id in 1..=CHAIN {
        StackNode::push(&mut nodes, id, id - 1, 0x40_1000 + u64::from(id) * 16);
    }
    let stacks: Vec<u32> = (0..2000).map(|i| CHAIN - 20 * i).collect();
    let events: Vec<(Op, u64, u64, u32)> =
        stacks.iter().enumerate().map(|(i, &s)| (Op::Malloc, 0x1000_0000 + 64 * i as u64, 48, s)).collect();
    let samples = heaplens_trace::record::SampleRecord {
        tid: 1234,
        period_ns: 1_000_000,
        samples: stacks
            .iter()
            .enumerate()
            .map(|(i, &stack)| heaplens_trace::record::Sample { ts: 1000 * (i as u64 + 1), stack, weight: 1 })
            .collect(),
    };
    let trace = dir.join("deep-chain.hltrace");
    write_raw(
        &trace,
        &[(BlockKind::Stacks, nodes), (BlockKind::Events, rows(&events)), (BlockKind::Samples, samples.encode())],
    );
    assert!(std::fs::metadata(&trace).unwrap().len() < 1 << 20);
    let ended = run_views(&dir, &trace, "2,000 stacks up one chain", &[], TIME_LIMIT);
    for e in &ended {
        assert!(e.completed(), "{}: {}", e.what, e.stderr);
    }
    // The flame graphs draw at most 50,000 frames, the rest standing as one frame per parent.
    let svg = std::fs::read_to_string(dir.join("out").join("export.flamegraph")).unwrap();
    assert!(svg.len() < 30 << 20, "a flame graph of {} bytes", svg.len());
    assert!(svg.contains("[narrower frames left out]") && svg.contains("left out: at most 50000 are drawn"));
    let page = std::fs::metadata(dir.join("out").join("view.html")).unwrap().len();
    assert!(page < 100 << 20, "a page of {page} bytes");
    let firefox = ended.iter().find(|e| e.what.contains("export firefox")).unwrap();
    assert!(firefox.stderr.contains("came after the profile's stacks held 1000000 frames"), "{}", firefox.stderr);
}

#[test]
fn one_stack_varint_edited_in_a_recorded_trace_takes_memory_by_what_the_file_holds() {
    let dir = WorkDir::new("views-edited-stack");
    let exe = compile_c(&dir, "widgets.c", &[]);
    let source = dir.join("rows.hltrace");
    // Rows, so that an event's stack is a varint of its own to edit.
    run_traced_env(&dir, &source, &[("HEAPLENS_COLUMNS", "0")], &exe, &["2000"]).ok("widgets under heaplens");
    let mut blocks: Vec<(BlockKind, Vec<u8>)> = trace_blocks(&source)
        .into_iter()
        .filter(|(k, _)| !matches!(k, BlockKind::Symbols | BlockKind::SymbolsIndex))
        .collect();
    let (_, payload) = blocks.iter_mut().find(|(k, _)| *k == BlockKind::Events).expect("an Events block of rows");
    let dec = EventDecoder::new(payload).expect("rows");
    let tid = dec.tid();
    let mut events: Vec<_> = dec.map(|e| e.expect("an intact event")).collect();
    let e = events.iter_mut().find(|e| e.op == Op::Malloc && e.stack != 0).expect("a malloc with a stack");
    e.stack = WILD_STACK;
    let mut buf = vec![0u8; 64 * (events.len() + 1)];
    let (mut pos, mut enc) = (0, EventEncoder::default());
    enc.begin(&mut buf, &mut pos, tid);
    for e in &events {
        enc.event(&mut buf, &mut pos, e);
    }
    buf.truncate(pos);
    *payload = buf;
    let trace = dir.join("edited.hltrace");
    write_raw(&trace, &blocks);
    for e in run_views(&dir, &trace, "one stack id edited", &[], TIME_LIMIT) {
        assert!(e.completed(), "{}: {}", e.what, e.stderr);
    }
}

#[test]
fn blocks_scattered_4_gib_apart_cost_no_bitmap_each() {
    let dir = WorkDir::new("views-scattered");
    // 100,000 blocks of 16 bytes, each 4 GiB above the one before: a 900 KB trace.
    let events: Vec<(Op, u64, u64, u32)> = (0..100_000u64).map(|i| (Op::Malloc, (i + 1) << 32, 16, 0)).collect();
    let trace = dir.join("scattered.hltrace");
    write_raw(&trace, &[(BlockKind::Events, rows(&events))]);
    assert!(std::fs::metadata(&trace).unwrap().len() < 1 << 20);
    for e in run_views(&dir, &trace, "blocks 4 GiB apart", &["map", "timeline", "view"], TIME_LIMIT) {
        assert!(e.completed(), "{}: {}", e.what, e.stderr);
        assert!(e.took < Duration::from_secs(10), "{} took {:?}", e.what, e.took);
    }
}

#[test]
fn lz4_blocks_claiming_200_mib_over_ten_bytes_are_damage_not_work() {
    let dir = WorkDir::new("views-lz4-claims");
    // 200 Events blocks, each ten stored bytes declaring a raw length of 200 MiB (header as in
    // `heaplens_trace::block`: kind, codec 1 = LZ4, reserved, stored and raw length, CRC-32).
    let stored = [0u8; 10];
    let mut bytes = heaplens_trace::block::file_header().to_vec();
    for _ in 0..200 {
        bytes.extend([BlockKind::Events as u8, 1, 0, 0]);
        bytes.extend((stored.len() as u32).to_le_bytes());
        bytes.extend((200u32 << 20).to_le_bytes());
        bytes.extend(crc32fast::hash(&stored).to_le_bytes());
        bytes.extend(stored);
    }
    let trace = dir.join("lz4-claims.hltrace");
    std::fs::write(&trace, bytes).unwrap();
    for e in run_views(&dir, &trace, "LZ4 blocks claiming 200 MiB", &["report", "map", "export collapsed"], TIME_LIMIT)
    {
        assert!(e.took < Duration::from_secs(10), "{} took {:?}", e.what, e.took);
    }
}

/// A zstd bomb: a widgets trace with 12 Events blocks after its own, each 64 MiB of zeros
/// compressed to 2 KiB (a ratio of about 30,000; the monitor's blocks compress 1 to 20 times).
/// Decoding them took the report over 30 s (and with 256 MiB blocks, 3 GiB of work from a file
/// of a few hundred KiB): each is damage, counted and skipped, and the widgets' own events are
/// reported as recorded.
#[test]
fn zstd_blocks_of_a_bombs_ratio_are_damage_not_work() {
    let dir = WorkDir::new("views-zstd-bomb");
    let exe = compile_c(&dir, "widgets.c", &[]);
    let source = dir.join("source.hltrace");
    let t = truth(&run_traced(&dir, &source, &exe, &["200"]).ok("widgets").stdout, "widgets");
    let zeros = vec![0u8; 64 << 20];
    let mut w = heaplens_trace::BlockWriter::new(Vec::new()).unwrap();
    for (kind, payload) in trace_blocks(&source) {
        w.write_block_as(kind, &payload, heaplens_trace::Codec::Raw).unwrap();
    }
    for _ in 0..12 {
        w.write_block_as(BlockKind::Events, &zeros, heaplens_trace::Codec::Zstd).unwrap();
    }
    let trace = dir.join("zstd-bomb.hltrace");
    std::fs::write(&trace, w.get_mut()).unwrap();
    let size = std::fs::metadata(&trace).unwrap().len();
    assert!(size < 1 << 20, "a bomb under 1 MB: {size} bytes");
    run_views(&dir, &trace, "zstd bomb", &["report", "map", "timeline", "export collapsed"], TIME_LIMIT);
    let v = report(&dir, &trace);
    assert_eq!(u(&v, "trace/corrupt_blocks"), 12, "each bomb block is damage");
    assert_eq!(u(&v, "summary/allocations"), num(&t, "made"), "the widgets' own events are all there");
}

/// Makes a FIFO at `path`.
fn fifo(path: &Path) {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid C string.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo {}", path.display());
}

#[test]
fn a_fifo_named_as_the_trace_is_refused_at_once() {
    let dir = WorkDir::new("views-fifo-trace");
    let trace = dir.join("fifo.hltrace");
    fifo(&trace);
    for e in run_views(&dir, &trace, "a FIFO as the trace", &[], Duration::from_secs(10)) {
        assert!(!e.completed(), "{} refuses it", e.what);
        assert_one_line_error(&Out { status: e.status, stdout: String::new(), stderr: e.stderr.clone() }, &e.what);
        assert!(e.stderr.contains("not a regular file"), "{}: {}", e.what, e.stderr);
    }
}

#[test]
fn a_module_path_naming_a_fifo_is_never_opened() {
    let dir = WorkDir::new("views-fifo-module");
    let module = dir.join("libfifo.so");
    fifo(&module);
    let modules = ModuleRecord::encode_all(&[ModuleRecord {
        ts: 0,
        loaded: true,
        base: 0x40_0000,
        path: module.to_path_buf(),
        build_id: Vec::new(),
        segments: vec![Segment { vaddr: 0, memsz: 0x10_0000, flags: 5 }],
    }]);
    let mut stacks = Vec::new();
    StackNode::begin(&mut stacks, 1);
    StackNode::push(&mut stacks, 1, 0, 0x40_1234);
    let events =
        rows(&[(Op::Malloc, 0x1000_0000, 100, 1), (Op::Free, 0x1000_0000, 0, 0), (Op::Malloc, 0x1000_0040, 64, 1)]);
    let trace = dir.join("fifo-module.hltrace");
    write_raw(&trace, &[(BlockKind::Modules, modules), (BlockKind::Stacks, stacks), (BlockKind::Events, events)]);
    for e in run_views(&dir, &trace, "a module that is a FIFO", &[], Duration::from_secs(10)) {
        assert!(e.completed(), "{}: {}", e.what, e.stderr);
    }
}

/// The fuzz test: [`MUTATIONS`] damaged versions of a trace of `widgets 200` through every
/// command. The symbols embedded by `heaplens run` are appended intact after the damage (the
/// report's own fuzz test damages them), so that no command spends its time on DWARF.
#[test]
fn mutated_traces_never_hang_or_break_any_view() {
    use heaplens_interpret::symbolize::embedded;
    let dir = WorkDir::new("views-fuzz");
    let (_, source) = traced_widgets(&dir, &["200"]);
    let table = embedded::read_table(&source).expect("symbols embedded").expect("symbols intact");
    let source: Vec<(BlockKind, Vec<u8>)> = trace_blocks(&source)
        .into_iter()
        .filter(|(k, _)| !matches!(k, BlockKind::Symbols | BlockKind::SymbolsIndex))
        .collect();
    let mut rng = Rng(0x5eed_0028);
    let path = dir.join("damaged.hltrace");
    let (started, mut refused, mut runs) = (Instant::now(), 0, 0);
    for case in 0..MUTATIONS {
        let mut b = source.clone();
        // The events carry the sizes, addresses and stack ids the views size by.
        damage_blocks(&mut rng, &mut b, &|k| matches!(k, BlockKind::Events | BlockKind::EventColumns), 4);
        write_raw(&path, &b);
        embedded::append(&path, &table).unwrap();
        if rng.below(8) == 0 {
            // The file cut short as well.
            let len = std::fs::metadata(&path).unwrap().len();
            let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
            f.set_len(rng.below(len as usize) as u64).unwrap();
        }
        let ended = run_views(&dir, &path, &format!("case {case}"), &[], TIME_LIMIT);
        runs += ended.len();
        refused += ended.iter().filter(|e| !e.completed()).count();
    }
    eprintln!("{MUTATIONS} mutated traces, {runs} runs ({refused} refused) in {:?}", started.elapsed());
}
