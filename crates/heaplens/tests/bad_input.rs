//! Bad input gets a one-line error and a non-zero exit, never a panic; a damaged trace still
//! reports everything that was recorded intact.

mod common;

use std::path::Path;

use common::*;
use serde_json::Value;

#[test]
fn missing_program() {
    let dir = WorkDir::new("missing-program");
    let trace = dir.join("x.hltrace");
    let out = heaplens(&dir, &["run", "-o", trace.to_str().unwrap(), "--", "/nonexistent/program"]);
    assert_one_line_error(&out, "heaplens run -- /nonexistent/program");
    assert!(out.stderr.contains("/nonexistent/program"), "the error names the program\n{}", out.show());
    // The status a shell gives: 127 for a program not found, 126 for one that cannot run.
    assert_eq!(out.status.code(), Some(127), "{}", out.show());
    let text = dir.join("not-a-program.txt");
    std::fs::write(&text, "just text\n").unwrap();
    let out = heaplens(&dir, &["run", "-q", "-o", trace.to_str().unwrap(), "--", text.to_str().unwrap()]);
    assert_one_line_error(&out, "heaplens run -- a file that is no program");
    assert_eq!(out.status.code(), Some(126), "{}", out.show());
}

#[test]
fn unwritable_output_path() {
    let dir = WorkDir::new("unwritable");
    let exe = compile_c(&dir, "endings.c", &[]);
    let out = heaplens(&dir, &["run", "-o", "/proc/nope/x.hltrace", "--", exe.to_str().unwrap(), "exit", "0"]);
    assert!(!out.status.success(), "run -o /proc/nope/x.hltrace succeeded\n{}", out.show());
    assert_no_panic(&out, "heaplens run -o /proc/nope/x.hltrace");
    let lines: Vec<&str> = out.stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "expected one line on stderr\n{}", out.show());
    assert!(lines[0].starts_with("heaplens: error:"), "{}", out.show());
    assert!(lines[0].contains("/proc/nope/x.hltrace"), "the error names the path\n{}", out.show());
}

#[test]
fn aggregate_refuses_sampling() {
    // Aggregated counters promise exact peak and leaks; a sample cannot keep that promise.
    let dir = WorkDir::new("aggregate-sampled");
    let out = heaplens(&dir, &["run", "--aggregate", "--sample-rate", "4KiB", "--", "true"]);
    assert!(!out.status.success(), "--aggregate --sample-rate was accepted\n{}", out.show());
    assert_no_panic(&out, "heaplens run --aggregate --sample-rate 4KiB");
    assert!(out.stderr.contains("--aggregate") && out.stderr.contains("--sample-rate"), "{}", out.show());
}

#[test]
fn not_a_trace() {
    let dir = WorkDir::new("not-a-trace");
    let f = dir.join("notes.txt");
    std::fs::write(&f, "this is not a heaplens trace\n".repeat(100)).unwrap();
    for fmt in ["text", "json"] {
        let out = heaplens(&dir, &["report", f.to_str().unwrap(), "--format", fmt]);
        assert_one_line_error(&out, "heaplens report notes.txt");
    }
    let out = heaplens(&dir, &["report", dir.join("absent.hltrace").to_str().unwrap()]);
    assert_one_line_error(&out, "heaplens report absent.hltrace");
}

/// Records widgets and returns (dir, trace bytes, full report).
fn widgets_trace(name: &str, n: &str) -> (WorkDir, Vec<u8>, Value) {
    let dir = WorkDir::new(name);
    let exe = compile_c(&dir, "widgets.c", &[]);
    let trace = dir.join("full.hltrace");
    run_traced(&dir, &trace, &exe, &[n]).ok("heaplens run widgets");
    let full = report(&dir, &trace);
    let bytes = std::fs::read(&trace).unwrap();
    (dir, bytes, full)
}

#[test]
fn truncated_trace_still_reports() {
    let (dir, bytes, full) = widgets_trace("truncated", "200000");
    let bl = blocks(&bytes);
    assert!(bl.iter().filter(|b| matches!(b.kind, 4 | 10)).count() >= 2, "expected several event blocks: {bl:?}");
    let half = dir.join("half.hltrace");
    std::fs::write(&half, &bytes[..common::damage::cut_inside_a_block(&bytes, bytes.len() / 2)]).unwrap();
    let v = report(&dir, &half);
    assert_eq!(at(&v, "trace/truncated"), &Value::Bool(true), "trace/truncated");
    assert_eq!(at(&v, "trace/complete"), &Value::Bool(false), "trace/complete");
    let (a, fa) = (u(&v, "summary/allocations"), u(&full, "summary/allocations"));
    assert!(a > 0 && a < fa, "half a trace has some but not all allocations: {a} of {fa}");
    assert_eq!(u(&v, "summary/allocations") - u(&v, "summary/deallocations"), u(&v, "summary/leaked_objects"));
    // The file header alone is an empty but valid trace.
    let header = dir.join("header.hltrace");
    std::fs::write(&header, &bytes[..16]).unwrap();
    let out = heaplens(&dir, &["report", header.to_str().unwrap(), "--format", "json"]);
    assert_no_panic(&out, "heaplens report header.hltrace");
}

#[test]
fn corrupt_block_is_skipped() {
    let (dir, mut bytes, full) = widgets_trace("corrupt", "200000");
    let bl = blocks(&bytes);
    // Blocks follow the writer's timing (a sweep every 10 ms), and widgets allocates first and
    // frees after: pick a block among those that hold allocations, which are then lost.
    let events: Vec<_> = bl.iter().filter(|b| matches!(b.kind, 4 | 10) && allocations_in(&bytes, b) > 0).collect();
    assert!(events.len() >= 2, "expected several event blocks with allocations: {bl:?}");
    // Flip a byte in the payload of one of them: its checksum no longer matches.
    let BlockAt { offset: off, len, .. } = *events[events.len() / 2];
    bytes[off + 16 + (len - 16) / 2] ^= 0x55;
    let bad = dir.join("bad.hltrace");
    std::fs::write(&bad, &bytes).unwrap();
    let v = report(&dir, Path::new(&bad));
    assert_eq!(u(&v, "trace/corrupt_blocks"), 1, "trace/corrupt_blocks");
    let (a, fa) = (u(&v, "summary/allocations"), u(&full, "summary/allocations"));
    assert!(a > 0 && a < fa, "a trace with one bad block keeps the others: {a} of {fa}");
}

/// Successful allocations in the Events block `b` of trace `bytes`.
fn allocations_in(bytes: &[u8], b: &BlockAt) -> usize {
    use heaplens_trace::{BlockKind, ColumnDecoder, Event, EventDecoder, OpClass, TraceReader};
    let mut r = TraceReader::at_block(&bytes[b.offset..], b.offset as u64);
    let Ok(Some((kind, payload))) = r.next_block() else { return 0 };
    let mut events: Vec<Event> = Vec::new();
    match kind {
        BlockKind::Events => events.extend(EventDecoder::new(&payload).expect("rows").flatten()),
        BlockKind::EventColumns => {
            let _ = ColumnDecoder::default().decode(&payload, |e| events.push(e));
        }
        _ => {}
    }
    events.iter().filter(|e| e.addr != 0 && e.op.class() != OpClass::Dealloc).count()
}

/// The command `heaplens run` suggests at the end works when pasted: heaplens by its path
/// when `heaplens` on PATH is not this executable (a fresh build is not installed).
#[test]
fn run_suggests_a_command_that_works() {
    let dir = WorkDir::new("suggest");
    let (_exe, trace) = traced_widgets(&dir, &["100"]);
    let again = dir.join("again.hltrace");
    let mut cmd = std::process::Command::new(heaplens_exe());
    cmd.env("PATH", "/usr/bin:/bin").arg("run").arg("-o").arg(&again).arg("--").arg(dir.join("widgets"));
    let out = run_cmd(cmd, &dir.path).ok("heaplens run");
    let line = out.stderr.lines().find(|l| l.contains("see it with: ")).unwrap_or_else(|| panic!("{}", out.stderr));
    let suggested = line.split("see it with: ").nth(1).unwrap();
    let program = suggested.split(" report ").next().unwrap();
    assert_ne!(program, "heaplens", "heaplens is not on PATH here: {line}");
    let mut report = std::process::Command::new(dir.path.join(program));
    report.arg("report").arg(&again);
    run_cmd(report, &dir.path).ok("the suggested command");
    assert!(trace.exists());
}
