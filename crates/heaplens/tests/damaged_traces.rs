//! A reader that survives any file: real traces (widgets and the C++ example under `heaplens
//! run`) with their block payloads mutated (bit flips, bytes inserted, removed and overwritten,
//! varints made huge, payloads cut, blocks duplicated and dropped) and the checksums recomputed,
//! so the damage reaches every block decoder. `heaplens report` (text and JSON) must then never
//! panic or die by a signal, must end with a report or a one-line error, and must stay within
//! an address-space limit of 1 GiB (memory follows the bytes present, never a number read from
//! the file). The cases are drawn from a fixed seed, so a failure repeats; the damaged file is
//! kept in the test's directory. The regression cases of issue 20 (a Stacks block declaring
//! node 2^28-1, damaged Symbols with a valid checksum, an altered varint in Events, random
//! blocks) run first.

mod common;

use std::ffi::OsStr;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::Path;
use std::process::Command;

use common::damage::{damage_blocks, trace_blocks as blocks, write_raw as write, Rng};
use common::*;
use heaplens_trace::{BlockKind, BlockWriter, Codec, TraceReader};

/// The address space `heaplens report` may use on a damaged trace of a few hundred KiB.
const AS_LIMIT: u64 = 1 << 30;

/// Mutated traces tried per source trace.
const CASES: usize = 300;

/// Runs `heaplens report` on `trace` under the address-space limit; panics if it panicked, died
/// by a signal or printed something other than a report or one error line.
fn check(dir: &WorkDir, trace: &Path, what: &str) {
    for json in [false, true] {
        let mut cmd = Command::new(heaplens_exe());
        cmd.arg("report").arg(trace).args(["--top", "0"]);
        if json {
            cmd.args(["--format", "json"]);
        }
        // SAFETY: setrlimit is async-signal-safe.
        unsafe {
            cmd.pre_exec(|| {
                let r = libc::rlimit { rlim_cur: AS_LIMIT, rlim_max: AS_LIMIT };
                libc::setrlimit(libc::RLIMIT_AS, &r);
                Ok(())
            });
        }
        let out = run_cmd(cmd, &dir.path);
        let kept = || format!("{what} (json: {json}; damaged trace kept at {})\n{}", trace.display(), out.show());
        assert!(out.status.signal().is_none(), "report died by a signal (out of memory?): {}", kept());
        assert_no_panic(&out, &kept());
        match out.status.code() {
            Some(0) => {
                if json {
                    let v: Result<serde_json::Value, _> = serde_json::from_str(&out.stdout);
                    assert!(v.is_ok(), "invalid JSON: {}", kept());
                }
            }
            Some(2) => assert_one_line_error(&out, &kept()),
            _ => panic!("unexpected exit: {}", kept()),
        }
    }
}

/// Records `program` under heaplens (symbols embedded) and returns its blocks.
fn recorded(dir: &WorkDir, exe: &Path, args: &[&str]) -> Vec<(BlockKind, Vec<u8>)> {
    let trace = dir.join("source.hltrace");
    run_traced(dir, &trace, exe, args).ok("heaplens run");
    check(dir, &trace, "the undamaged trace");
    blocks(&trace)
}

fn fuzz(dir: &WorkDir, source: &[(BlockKind, Vec<u8>)], seed: u64) {
    let mut rng = Rng(seed);
    let path = dir.join("damaged.hltrace");
    for case in 0..CASES {
        let mut b = source.to_vec();
        // The symbol tables are the largest structured payloads: damage them often.
        damage_blocks(&mut rng, &mut b, &|k| matches!(k, BlockKind::Symbols | BlockKind::SymbolsIndex), 2);
        write(&path, &b);
        check(dir, &path, &format!("seed {seed:#x} case {case}"));
    }
}

#[test]
fn damaged_widgets_traces_never_break_the_report() {
    let dir = WorkDir::new("damaged-widgets");
    let exe = compile_c(&dir, "widgets.c", &[]);
    let source = recorded(&dir, &exe, &["2000"]);
    fuzz(&dir, &source, 0x5eed_0001);
}

#[test]
fn damaged_cxx_traces_never_break_the_report() {
    let dir = WorkDir::new("damaged-cxx");
    let exe = compile(&dir, "g++", "cxx_new.cpp", "cxx_new", &["-O2", "-g"]);
    let source = recorded(&dir, &exe, &[]);
    fuzz(&dir, &source, 0x5eed_0002);
}

/// The cases issue 20 found, built by hand.
#[test]
fn known_damaged_traces_are_reported_in_bounded_memory() {
    let dir = WorkDir::new("damaged-known");
    let exe = compile_c(&dir, "widgets.c", &[]);
    let source = recorded(&dir, &exe, &["2000"]);
    let path = dir.join("known.hltrace");
    // A Stacks block declaring node 2^28 - 1 (varints: id, parent, address).
    let mut b = source.clone();
    let mut huge = Vec::new();
    let id = (1u32 << 28) - 1;
    heaplens_trace::StackNode::begin(&mut huge, id);
    heaplens_trace::StackNode::push(&mut huge, id, 0, 0x401000);
    b.insert(1, (BlockKind::Stacks, huge));
    write(&path, &b);
    check(&dir, &path, "Stacks block declaring node 2^28-1");
    // Every Symbols payload damaged in its middle, checksum valid.
    let mut b = source.clone();
    let mut found = false;
    for (k, p) in b.iter_mut() {
        if matches!(k, BlockKind::Symbols | BlockKind::SymbolsIndex) && p.len() > 8 {
            found = true;
            let n = p.len();
            for x in &mut p[n / 3..n / 2] {
                *x = 0xff;
            }
        }
    }
    assert!(found, "the trace has embedded symbols");
    write(&path, &b);
    check(&dir, &path, "damaged Symbols");
    // One varint in each Events payload made huge.
    let mut b = source.clone();
    for (k, p) in b.iter_mut() {
        if matches!(k, BlockKind::Events | BlockKind::EventColumns) && p.len() > 12 {
            let i = p.len() / 2;
            p.splice(i..i + 1, [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f]);
        }
    }
    write(&path, &b);
    check(&dir, &path, "huge varint in Events");
    // 501 bytes of random blocks after a valid header.
    let mut rng = Rng(501);
    let mut w = BlockWriter::new(Vec::new()).unwrap();
    let kinds = [BlockKind::Process, BlockKind::Stacks, BlockKind::Events, BlockKind::Modules, BlockKind::End];
    let mut total = 0;
    while total < 501 {
        let p: Vec<u8> = (0..rng.below(60)).map(|_| rng.next() as u8).collect();
        total += p.len() + 16;
        w.write_block_as(kinds[rng.below(kinds.len())], &p, Codec::Raw).unwrap();
    }
    std::fs::write(&path, w.get_mut()).unwrap();
    check(&dir, &path, "random blocks");
}

/// Item 12 of issue 20: a Symbols block whose checksum matches but whose contents index past
/// its tables (a frame's module past the module warnings made the symbolizer panic). The report
/// says the block is damaged, symbolizes from the module files instead, and its numbers are
/// those of the undamaged trace.
#[test]
fn a_damaged_symbols_block_is_reported_and_skipped() {
    use heaplens_interpret::symbolize::embedded;
    let dir = WorkDir::new("damaged-symbols");
    let (_, path) = traced_widgets(&dir, &["2000"]);
    let good = report(&dir, &path);
    let mut table = embedded::read_table(&path).expect("symbols embedded").expect("symbols intact");
    assert!(!table.entries.is_empty());
    for e in &mut table.entries {
        e.module = Some(table.module_warnings.len() as u32 + 7);
    }
    // The Symbols block starts where the index (the last 8 bytes) says: write the damaged
    // table there instead, with valid checksums.
    let bytes = std::fs::read(&path).unwrap();
    let symbols_at = u64::from_le_bytes(bytes[bytes.len() - 8..].try_into().unwrap());
    std::fs::write(&path, &bytes[..symbols_at as usize]).unwrap();
    embedded::append(&path, &table).unwrap();
    assert!(embedded::read_table(&path).expect("a Symbols block").is_err(), "the damage is seen");
    check(&dir, &path, "Symbols block with module indices past its warnings");
    let bad = report(&dir, &path);
    assert_eq!(u(&bad, "trace/malformed_blocks"), 1);
    let warnings = arr(&bad, "trace/symbol_warnings");
    assert!(warnings.iter().any(|w| w.as_str().unwrap_or("").contains("damaged")), "{warnings:?}");
    for key in ["summary", "leaks", "bins", "direct", "call_graph"] {
        assert_eq!(at(&bad, key), at(&good, key), "{key} as in the undamaged trace");
    }
}

/// The corpus of damaged traces checked in (`tests/data/damaged/`, made by `regenerate_corpus`
/// from a trace of `widgets 200`), with what `heaplens report` must make of each: an error
/// line naming the problem, or a report with these counts and this health.
const CORPUS: &[(&str, Want)] = &[
    ("empty.hltrace", Want::Error("not a heaplens trace (bad magic)")),
    ("header-only.hltrace", Want::Report { events: 0, truncated: false, corrupt: 0, malformed: 0, allocations: 0 }),
    ("version-1.hltrace", Want::Error("unsupported trace version 1")),
    // widgets 200 writes one Events block: cut, or its checksum broken, it is lost whole.
    ("truncated.hltrace", Want::Report { events: 0, truncated: true, corrupt: 0, malformed: 0, allocations: 0 }),
    ("bad-checksum.hltrace", Want::Report { events: 0, truncated: false, corrupt: 1, malformed: 0, allocations: 0 }),
    (
        "stack-node-2e28.hltrace",
        Want::Report { events: 306, truncated: false, corrupt: 0, malformed: 1, allocations: 200 },
    ),
    (
        "symbols-bad-module.hltrace",
        Want::Report { events: 306, truncated: false, corrupt: 0, malformed: 1, allocations: 200 },
    ),
    (
        "symbols-index-past-eof.hltrace",
        Want::Report { events: 306, truncated: false, corrupt: 0, malformed: 0, allocations: 200 },
    ),
    // The events before the huge varint are kept.
    (
        "events-huge-varint.hltrace",
        Want::Report { events: 197, truncated: false, corrupt: 0, malformed: 1, allocations: 197 },
    ),
    // Random bytes: two of them happen to start events of the replacement allocators' and the
    // pools' op bytes (18-31, 45-57) before each payload turns out malformed.
    ("random-blocks.hltrace", Want::Report { events: 2, truncated: false, corrupt: 0, malformed: 11, allocations: 2 }),
    (
        "unknown-kind.hltrace",
        Want::Report { events: 306, truncated: false, corrupt: 0, malformed: 0, allocations: 200 },
    ),
];

/// What a corpus trace must give (compared through its `Debug` form, hence no field reads).
#[derive(Debug)]
#[allow(dead_code)]
enum Want {
    /// Exit status 2 with one error line containing this.
    Error(&'static str),
    /// A report with these figures (`trace/events`, `trace/truncated`, `trace/corrupt_blocks`,
    /// `trace/malformed_blocks`, `summary/allocations`).
    Report { events: u64, truncated: bool, corrupt: u64, malformed: u64, allocations: u64 },
}

fn corpus_dir() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/damaged")
}

/// What `heaplens report --format json` makes of `trace`, as a [`Want`] to compare.
fn outcome(dir: &WorkDir, trace: &Path) -> String {
    check(dir, trace, &trace.display().to_string());
    let out = heaplens(dir, &[OsStr::new("report"), trace.as_os_str(), OsStr::new("--format"), OsStr::new("json")]);
    if out.status.code() == Some(2) {
        return format!("Error({:?})", out.stderr.trim());
    }
    let v: serde_json::Value = serde_json::from_str(&out.stdout).expect("JSON");
    format!(
        "Report {{ events: {}, truncated: {}, corrupt: {}, malformed: {}, allocations: {} }}",
        u(&v, "trace/events"),
        at(&v, "trace/truncated").as_bool().unwrap(),
        u(&v, "trace/corrupt_blocks"),
        u(&v, "trace/malformed_blocks"),
        u(&v, "summary/allocations")
    )
}

#[test]
fn the_corpus_of_damaged_traces_reports_as_expected() {
    let dir = WorkDir::new("damaged-corpus");
    for (name, want) in CORPUS {
        let path = corpus_dir().join(name);
        let got = outcome(&dir, &path);
        let ok = match want {
            Want::Error(needle) => got.starts_with("Error(") && got.contains(needle),
            w => got == format!("{w:?}"),
        };
        assert!(ok, "{name}: got {got}, want {want:?}");
    }
}

/// A Process record that says `--cpu-only` over a trace of allocations and no CPU samples (the
/// fuzz test met one): the report falls back to the memory report, in the format asked for.
#[test]
fn a_trace_claiming_cpu_only_without_samples_gets_the_memory_report_as_asked() {
    let dir = WorkDir::new("damaged-cpu-only");
    let (_, source) = traced_widgets(&dir, &["200"]);
    let mut b = blocks(&source);
    let (_, process) = b.iter_mut().find(|(k, _)| *k == BlockKind::Process).expect("a Process block");
    let mut p = heaplens_trace::ProcessRecord::decode(process).expect("Process record");
    p.cpu_only = true;
    *process = p.encode();
    let trace = dir.join("claims-cpu-only.hltrace");
    write(&trace, &b);
    let (got, want) = (report(&dir, &trace), report(&dir, &source));
    assert_eq!(got["summary"], want["summary"], "the memory report of the same events");
    assert_eq!(got["summary"]["allocations"].as_u64(), Some(200), "widgets 200: {}", got["summary"]);
    let text = heaplens(&dir, &[OsStr::new("report"), trace.as_os_str(), OsStr::new("--leaks")]).ok("report --leaks");
    assert!(text.stdout.contains("make_red_widget") && !text.stdout.contains("SUMMARY"), "{}", text.stdout);
    assert_eq!(text.stderr.matches("warning").count(), 0, "an intact trace: {}", text.stderr);
}

/// Writes the corpus (run by hand: `cargo test -p heaplens --test damaged_traces
/// regenerate_corpus -- --ignored`), printing each file's outcome for [`CORPUS`].
#[test]
#[ignore]
fn regenerate_corpus() {
    use heaplens_interpret::symbolize::embedded;
    let dir = WorkDir::new("damaged-corpus-gen");
    let exe = compile_c(&dir, "widgets.c", &[]);
    let trace = dir.join("source.hltrace");
    run_traced(&dir, &trace, &exe, &["200"]).ok("heaplens run");
    let table = embedded::read_table(&trace).expect("symbols").expect("intact");
    // Blocks stored raw move, so the source leaves its symbols out (they are appended anew).
    let source: Vec<_> = blocks(&trace)
        .into_iter()
        .filter(|(k, _)| !matches!(k, BlockKind::Symbols | BlockKind::SymbolsIndex))
        .collect();
    let out = corpus_dir();
    std::fs::create_dir_all(&out).unwrap();
    let path = |name: &str| out.join(name);
    let bytes_of = |b: &[(BlockKind, Vec<u8>)]| {
        let p = dir.join("tmp.hltrace");
        write(&p, b);
        std::fs::read(p).unwrap()
    };
    let whole = bytes_of(&source);
    std::fs::write(path("empty.hltrace"), b"").unwrap();
    std::fs::write(path("header-only.hltrace"), &whole[..16]).unwrap();
    let mut v1 = whole.clone();
    v1[8..12].copy_from_slice(&1u32.to_le_bytes());
    std::fs::write(path("version-1.hltrace"), &v1).unwrap();
    // Cut inside the last Events block, and one byte of the first Events block's payload
    // flipped (its checksum then fails): block boundaries from the reader.
    let mut r = TraceReader::new(&whole[..]).unwrap();
    let mut events_at = Vec::new();
    while let Some((k, _)) = r.next_block().unwrap() {
        if matches!(k, BlockKind::Events | BlockKind::EventColumns) {
            events_at.push((r.status().last_block, r.status().offset));
        }
    }
    let (last_start, last_end) = *events_at.last().expect("events");
    std::fs::write(path("truncated.hltrace"), &whole[..((last_start + last_end) / 2) as usize]).unwrap();
    let mut flipped = whole.clone();
    let (first_start, first_end) = events_at[0];
    flipped[((first_start + 16 + first_end) / 2) as usize] ^= 0x10;
    std::fs::write(path("bad-checksum.hltrace"), &flipped).unwrap();
    let mut b = source.clone();
    let mut huge = Vec::new();
    let id = (1u32 << 28) - 1;
    heaplens_trace::StackNode::begin(&mut huge, id);
    heaplens_trace::StackNode::push(&mut huge, id, 0, 0x401000);
    b.insert(1, (BlockKind::Stacks, huge));
    write(&path("stack-node-2e28.hltrace"), &b);
    write(&path("symbols-bad-module.hltrace"), &source);
    let mut bad = table.clone();
    for e in &mut bad.entries {
        e.module = Some(bad.module_warnings.len() as u32 + 7);
    }
    embedded::append(&path("symbols-bad-module.hltrace"), &bad).unwrap();
    let mut b = source.clone();
    b.push((BlockKind::SymbolsIndex, (1u64 << 40).to_le_bytes().to_vec()));
    write(&path("symbols-index-past-eof.hltrace"), &b);
    let mut b = source.clone();
    for (k, p) in b.iter_mut() {
        if matches!(k, BlockKind::Events | BlockKind::EventColumns) && p.len() > 12 {
            let i = p.len() / 2;
            p.splice(i..i + 1, [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f]);
        }
    }
    write(&path("events-huge-varint.hltrace"), &b);
    let mut rng = Rng(501);
    let mut w = BlockWriter::new(Vec::new()).unwrap();
    let kinds = [BlockKind::Process, BlockKind::Stacks, BlockKind::Events, BlockKind::Modules, BlockKind::End];
    let mut total = 0;
    while total < 501 {
        let p: Vec<u8> = (0..rng.below(60)).map(|_| rng.next() as u8).collect();
        total += p.len() + 16;
        w.write_block_as(kinds[rng.below(kinds.len())], &p, Codec::Raw).unwrap();
    }
    std::fs::write(path("random-blocks.hltrace"), w.get_mut()).unwrap();
    // A block of kind 200 (a newer writer's) after the Process block: header fields as in
    // `heaplens_trace::block` (kind, codec, reserved, stored and raw length, CRC-32).
    let payload = b"from a newer writer";
    let mut unknown = vec![200u8, 0, 0, 0];
    unknown.extend((payload.len() as u32).to_le_bytes());
    unknown.extend((payload.len() as u32).to_le_bytes());
    unknown.extend(crc32fast::hash(payload).to_le_bytes());
    unknown.extend(payload);
    let mut r = TraceReader::new(&whole[..]).unwrap();
    r.next_block().unwrap();
    let cut = r.status().offset as usize;
    let mut with = whole[..cut].to_vec();
    with.extend(unknown);
    with.extend(&whole[cut..]);
    std::fs::write(path("unknown-kind.hltrace"), with).unwrap();
    for (name, _) in CORPUS {
        println!("(\"{name}\", {}),", outcome(&dir, &out.join(name)));
    }
}

/// A trace whose blocks stop at a hole of zeros (a sparse file, a region a crash left
/// unwritten): zeros where a block should start are no block, and nothing reads on through
/// the hole block by empty block. 8 GiB of hole, which reading on would take minutes.
#[test]
fn a_hole_of_zeros_ends_the_trace_at_once() {
    let dir = WorkDir::new("damaged-hole");
    let (_, trace) = traced_widgets(&dir, &["100"]);
    let holed = dir.join("holed.hltrace");
    std::fs::copy(&trace, &holed).unwrap();
    let len = std::fs::metadata(&holed).unwrap().len();
    std::fs::File::options().write(true).open(&holed).unwrap().set_len(len + (8 << 30)).unwrap();
    let out = heaplens(&dir, &["report".as_ref(), holed.as_os_str(), "--format".as_ref(), "json".as_ref()]);
    let v: serde_json::Value = serde_json::from_str(&out.ok("report of the holed trace").stdout).unwrap();
    assert_eq!(u(&v, "summary/allocations"), 100, "every block before the hole: {v}");
    assert_eq!(at(&v, "trace/truncated_at").as_u64(), Some(len), "cut where the hole starts");
}

/// Numbers a damaged trace makes as large as they go (an aggregated trace's counters at
/// 2^64 - 1, CPU samples of the largest period and weight; `tests/data/overflow/`, made by
/// mutating real traces): every sum saturates, no command overflows.
#[test]
fn counters_at_their_largest_overflow_nothing() {
    let dir = WorkDir::new("damaged-overflow");
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/overflow");
    for name in ["aggregate-counters-max.hltrace", "cpu-weight-max.hltrace"] {
        let t = data.join(name);
        let t = t.to_str().unwrap();
        let out = dir.join("out");
        let out = out.to_str().unwrap();
        for cmd in [
            vec!["report", t],
            vec!["report", t, "--cpu", "--format", "json"],
            vec!["check", t, "--max-peak", "1GiB"],
            vec!["diff", t, t],
            vec!["export", t, "--format", "pprof", "-o", out],
            vec!["export", t, "--format", "collapsed", "--metric", "cpu", "-o", out],
            vec!["timeline", t, "-o", &format!("{out}.svg")],
        ] {
            let o = heaplens(&dir, &cmd);
            assert_no_panic(&o, &format!("{cmd:?}"));
            assert!(o.status.code().is_some_and(|c| c <= 2), "{cmd:?}: {}", o.show());
        }
    }
}
