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

use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::Path;
use std::process::Command;

use common::*;
use heaplens_trace::{BlockKind, BlockWriter, Codec, TraceReader};

/// The address space `heaplens report` may use on a damaged trace of a few hundred KiB.
const AS_LIMIT: u64 = 1 << 30;

/// Mutated traces tried per source trace.
const CASES: usize = 300;

/// A small deterministic generator (xorshift64*), so failures repeat.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// Every block of a trace, decompressed.
fn blocks(path: &Path) -> Vec<(BlockKind, Vec<u8>)> {
    let mut r = TraceReader::open(path).expect("open trace");
    let mut v = Vec::new();
    while let Some(b) = r.next_block().expect("read block") {
        v.push(b);
    }
    v
}

/// Writes blocks as a trace, each stored raw with a correct checksum.
fn write(path: &Path, blocks: &[(BlockKind, Vec<u8>)]) {
    let mut w = BlockWriter::new(Vec::new()).unwrap();
    for (k, p) in blocks {
        w.write_block_as(*k, p, Codec::Raw).unwrap();
    }
    std::fs::write(path, w.get_mut()).unwrap();
}

/// One random mutation of one payload.
fn mutate(rng: &mut Rng, p: &mut Vec<u8>) {
    let at = |rng: &mut Rng, p: &Vec<u8>| rng.below(p.len().max(1));
    match rng.below(7) {
        0 if !p.is_empty() => {
            let i = at(rng, p);
            p[i] ^= 1 << rng.below(8);
        }
        1 => {
            let i = rng.below(p.len() + 1);
            p.insert(i, rng.next() as u8);
        }
        2 if !p.is_empty() => {
            let i = at(rng, p);
            p.remove(i);
        }
        3 => {
            // A huge varint (up to 2^63) where one was.
            let i = rng.below(p.len() + 1);
            let big = [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f];
            let n = 3 + rng.below(6);
            p.splice(i..(i + 1).min(p.len()), big[9 - n..].iter().copied());
        }
        4 => {
            let n = rng.below(p.len() + 1);
            p.truncate(n);
        }
        5 if !p.is_empty() => {
            let i = at(rng, p);
            p[i] = rng.next() as u8;
        }
        _ => {
            let n = rng.below(32);
            let i = rng.below(p.len() + 1);
            let junk: Vec<u8> = (0..n).map(|_| rng.next() as u8).collect();
            p.splice(i..i, junk);
        }
    }
}

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
        for _ in 0..1 + rng.below(3) {
            match rng.below(10) {
                0 if b.len() > 1 => {
                    let i = rng.below(b.len());
                    b.remove(i);
                }
                1 => {
                    let i = rng.below(b.len());
                    let copy = b[i].clone();
                    b.insert(rng.below(b.len() + 1), copy);
                }
                2 | 3 => {
                    // The symbol tables are the largest structured payloads: damage them often.
                    let syms: Vec<usize> = (0..b.len())
                        .filter(|&i| matches!(b[i].0, BlockKind::Symbols | BlockKind::SymbolsIndex))
                        .collect();
                    let i = if syms.is_empty() { rng.below(b.len()) } else { syms[rng.below(syms.len())] };
                    mutate(&mut rng, &mut b[i].1);
                }
                _ => {
                    let i = rng.below(b.len());
                    mutate(&mut rng, &mut b[i].1);
                }
            }
        }
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
    let exe = compile_c(&dir, "widgets.c", &[]);
    let path = dir.join("widgets.hltrace");
    run_traced(&dir, &path, &exe, &["2000"]).ok("heaplens run");
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
