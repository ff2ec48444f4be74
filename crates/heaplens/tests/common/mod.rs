//! Shared helpers of the integration tests: compile the programs in `examples/`, run them bare
//! and under `heaplens run`, read `heaplens report --format json`, and parse the truth each
//! example prints about itself (`name: key=value key=value ...`).
//!
//! Every test works in its own fresh directory under the system temp dir, which is removed when
//! the test passes and kept (its path printed) when it fails.

#![allow(dead_code)]

pub mod damage;

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::io::Read;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use serde_json::Value;

/// How long any one command may take before the test gives up on it.
pub const TIMEOUT: Duration = Duration::from_secs(180);

/// The `heaplens` binary under test.
pub fn heaplens_exe() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_heaplens"))
}

/// The repository's `examples/` folder.
pub fn examples_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples")
}

/// A fresh directory for one test; removed on drop unless the test is panicking.
pub struct WorkDir {
    pub path: PathBuf,
}

impl WorkDir {
    pub fn new(name: &str) -> WorkDir {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let path = std::env::temp_dir().join(format!("heaplens-test-{}-{}-{}", std::process::id(), n, name));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).expect("create test dir");
        check_preload_built();
        WorkDir { path }
    }

    pub fn join(&self, p: impl AsRef<Path>) -> PathBuf {
        self.path.join(p)
    }
}

impl Drop for WorkDir {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("test files kept in {}", self.path.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

/// `heaplens run` needs the monitor next to its own executable.
fn check_preload_built() {
    // The monitor is a cdylib, not a dependency of this crate, so `cargo test` alone would use
    // whatever (possibly stale) copy sits next to the binary: bring it up to date once.
    static BUILT: std::sync::Once = std::sync::Once::new();
    BUILT.call_once(|| {
        let profile = if heaplens_exe().parent().is_some_and(|d| d.ends_with("release")) { "release" } else { "dev" };
        let status = Command::new(env!("CARGO"))
            .args(["build", "--quiet", "-p", "heaplens-preload", "--profile", profile])
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .status();
        assert!(status.is_ok_and(|s| s.success()), "building the monitor (cargo build -p heaplens-preload) failed");
    });
    let so = heaplens_exe().with_file_name("libheaplens_preload.so");
    assert!(so.exists(), "{} is missing: build the workspace first (cargo build --workspace)", so.display());
}

/// Output of a finished command.
#[derive(Debug)]
pub struct Out {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

impl Out {
    /// Asserts a zero exit status, showing the output otherwise.
    pub fn ok(self, what: &str) -> Out {
        assert!(self.status.success(), "{what} failed: {}\n{}", describe(&self.status), self.show());
        self
    }

    pub fn show(&self) -> String {
        format!("--- stdout:\n{}--- stderr:\n{}", tail(&self.stdout), tail(&self.stderr))
    }

    /// stderr without heaplens's own lines ("heaplens: ...").
    pub fn program_stderr(&self) -> String {
        self.stderr.lines().filter(|l| !l.starts_with("heaplens:")).map(|l| format!("{l}\n")).collect()
    }
}

fn tail(s: &str) -> String {
    let n = s.len();
    if n > 6000 {
        let mut i = n - 6000;
        while !s.is_char_boundary(i) {
            i += 1;
        }
        format!("[... {i} bytes ...]\n{}", &s[i..])
    } else {
        s.to_string()
    }
}

/// "exit 3", "signal 11" and so on.
pub fn describe(s: &ExitStatus) -> String {
    match (s.code(), s.signal()) {
        (Some(c), _) => format!("exit {c}"),
        (_, Some(sig)) => format!("signal {sig}"),
        _ => format!("{s:?}"),
    }
}

/// Gives every command no core dumps (a test kills programs with SIGSEGV and SIGABRT) and a
/// working directory, then runs it to the end with a timeout.
pub fn run_cmd(mut cmd: Command, cwd: &Path) -> Out {
    cmd.current_dir(cwd).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    no_core_dumps(&mut cmd);
    let desc = format!("{cmd:?}");
    let child = cmd.spawn().unwrap_or_else(|e| panic!("cannot start {desc}: {e}"));
    wait_with_timeout(child, &desc)
}

pub fn no_core_dumps(cmd: &mut Command) {
    unsafe {
        cmd.pre_exec(|| {
            let lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
            libc::setrlimit(libc::RLIMIT_CORE, &lim);
            Ok(())
        });
    }
}

/// Collects a child's piped stdout and stderr and waits for it, killing it after [`TIMEOUT`].
pub fn wait_with_timeout(child: Child, desc: &str) -> Out {
    wait_within(child, desc, TIMEOUT)
}

/// [`wait_with_timeout`], killing the child after `limit`.
pub fn wait_within(mut child: Child, desc: &str, limit: Duration) -> Out {
    let mut so = child.stdout.take();
    let mut se = child.stderr.take();
    let t1 = std::thread::spawn(move || {
        let mut b = Vec::new();
        if let Some(s) = so.as_mut() {
            let _ = s.read_to_end(&mut b);
        }
        b
    });
    let t2 = std::thread::spawn(move || {
        let mut b = Vec::new();
        if let Some(s) = se.as_mut() {
            let _ = s.read_to_end(&mut b);
        }
        b
    });
    let start = Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait().expect("wait") {
            break st;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{desc} did not finish within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let stdout = String::from_utf8_lossy(&t1.join().unwrap()).into_owned();
    let stderr = String::from_utf8_lossy(&t2.join().unwrap()).into_owned();
    Out { status, stdout, stderr }
}

/// Runs `program args` without heaplens.
pub fn run_bare<S: AsRef<OsStr>>(dir: &WorkDir, program: impl AsRef<OsStr>, args: &[S]) -> Out {
    let mut cmd = Command::new(program);
    cmd.args(args);
    run_cmd(cmd, &dir.path)
}

/// Like [`run_bare`] with extra environment variables.
pub fn run_bare_env<S: AsRef<OsStr>>(
    dir: &WorkDir,
    env: &[(&str, &str)],
    program: impl AsRef<OsStr>,
    args: &[S],
) -> Out {
    let mut cmd = Command::new(program);
    cmd.args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    run_cmd(cmd, &dir.path)
}

/// `heaplens ARGS...` in the test's directory.
pub fn heaplens<S: AsRef<OsStr>>(dir: &WorkDir, args: &[S]) -> Out {
    let mut cmd = Command::new(heaplens_exe());
    cmd.args(args);
    run_cmd(cmd, &dir.path)
}

/// `heaplens run -o TRACE -- program args`, with extra environment variables.
pub fn run_traced_env<S: AsRef<OsStr>>(
    dir: &WorkDir,
    trace: &Path,
    env: &[(&str, &str)],
    program: impl AsRef<OsStr>,
    args: &[S],
) -> Out {
    let mut cmd = Command::new(heaplens_exe());
    cmd.arg("run").arg("-o").arg(trace).arg("--").arg(program).args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = run_cmd(cmd, &dir.path);
    assert_no_panic(&out, "heaplens run");
    out
}

/// `heaplens run -o TRACE -- program args`.
pub fn run_traced<S: AsRef<OsStr>>(dir: &WorkDir, trace: &Path, program: impl AsRef<OsStr>, args: &[S]) -> Out {
    run_traced_env(dir, trace, &[], program, args)
}

/// Asserts that heaplens did not panic.
pub fn assert_no_panic(out: &Out, what: &str) {
    assert!(
        !out.stderr.contains("panicked") && !out.stderr.contains("RUST_BACKTRACE"),
        "{what} panicked\n{}",
        out.show()
    );
}

/// Asserts the stderr of a failed heaplens command is one line, "heaplens: error: ...".
pub fn assert_one_line_error(out: &Out, what: &str) {
    assert!(!out.status.success(), "{what} should fail but succeeded\n{}", out.show());
    assert_no_panic(out, what);
    let lines: Vec<&str> = out.stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "{what}: expected one line on stderr\n{}", out.show());
    assert!(lines[0].starts_with("heaplens: error:"), "{what}: expected 'heaplens: error: ...'\n{}", out.show());
}

/// `heaplens report TRACE --format json --top 0`, parsed.
pub fn report(dir: &WorkDir, trace: &Path) -> Value {
    report_with(dir, trace, &[])
}

/// `heaplens report TRACE --format json --top 0` with `extra` options (`--raw-frames`).
pub fn report_with(dir: &WorkDir, trace: &Path, extra: &[&str]) -> Value {
    let mut args: Vec<&OsStr> = vec![OsStr::new("report"), trace.as_os_str()];
    args.extend(["--format", "json", "--top", "0"].iter().chain(extra).map(OsStr::new));
    let out = heaplens(dir, &args);
    assert_no_panic(&out, "heaplens report");
    let out = out.ok("heaplens report --format json");
    serde_json::from_str(&out.stdout)
        .unwrap_or_else(|e| panic!("heaplens report printed invalid JSON ({e}):\n{}", tail(&out.stdout)))
}

// ---------------------------------------------------------------------------------------------
// Compiling the examples.

/// Compiles `examples/SRC` with `compiler` and `flags` into `dir/out`; returns the binary.
pub fn compile(dir: &WorkDir, compiler: &str, src: &str, out: &str, flags: &[&str]) -> PathBuf {
    let exe = dir.join(out);
    let mut cmd = Command::new(compiler);
    cmd.args(flags).arg("-o").arg(&exe).arg(examples_dir().join(src));
    let o = run_cmd(cmd, &dir.path);
    assert!(o.status.success(), "compiling {src} failed\n{}", o.show());
    exe
}

/// Writes `source` to `dir/file` and compiles it as [`compile`] does; returns the binary.
pub fn compile_source(dir: &WorkDir, compiler: &str, file: &str, source: &str, out: &str, flags: &[&str]) -> PathBuf {
    let src = dir.join(file);
    std::fs::write(&src, source).unwrap();
    // An absolute path joined to the examples' directory stays itself.
    compile(dir, compiler, src.to_str().unwrap(), out, flags)
}

/// The flags most examples use: optimized, no frame pointers (so heaplens must unwind with
/// DWARF CFI), with debug info.
pub const C_FLAGS: &[&str] = &["-O2", "-fomit-frame-pointer", "-g"];

/// The widgets example (`examples/widgets.c`) compiled in `dir` and run under `heaplens run`
/// with `args` (its widget count): the binary and the trace, `widgets.hltrace`.
pub fn traced_widgets(dir: &WorkDir, args: &[&str]) -> (PathBuf, PathBuf) {
    let exe = compile_c(dir, "widgets.c", &[]);
    let trace = dir.join("widgets.hltrace");
    run_traced(dir, &trace, &exe, args).ok("widgets under heaplens");
    (exe, trace)
}

/// `examples/NAME.c` (`src`) built, run under heaplens with `args` into `NAME.hltrace`: the trace
/// and the truth line the program prints (`NAME: key=value ...`).
pub fn traced_example(dir: &WorkDir, src: &str, args: &[&str]) -> (PathBuf, BTreeMap<String, String>) {
    let exe = compile_c(dir, src, &[]);
    let name = src.trim_end_matches(".c");
    let trace = dir.join(&format!("{name}.hltrace"));
    let out = run_traced(dir, &trace, &exe, args).ok(&format!("{name} under heaplens"));
    (trace, truth(&out.stdout, name))
}

/// `examples/diff_grow.c` built as `name` with `flags`, run under heaplens: the trace and the
/// program's truth.
pub fn traced_grow(dir: &WorkDir, name: &str, flags: &[&str]) -> (PathBuf, BTreeMap<String, String>) {
    let mut all = C_FLAGS.to_vec();
    all.extend_from_slice(flags);
    let exe = compile(dir, "gcc", "diff_grow.c", name, &all);
    let trace = dir.join(format!("{name}.hltrace"));
    let out = run_traced(dir, &trace, &exe, &[] as &[&str]).ok("diff_grow under heaplens");
    (trace, truth(&out.stdout, "diff_grow"))
}

/// The benchmark's C++ churn (`bench/workloads/churn.cpp`) compiled in `dir` and run under
/// `heaplens run` with `args` (threads, allocations): the binary and the trace,
/// `churn.hltrace`.
pub fn traced_churn(dir: &WorkDir, args: &[&str]) -> (PathBuf, PathBuf) {
    let exe = compile(dir, "g++", "../bench/workloads/churn.cpp", "churn", &["-O2", "-g", "-pthread"]);
    let trace = dir.join("churn.hltrace");
    run_traced(dir, &trace, &exe, args).ok("churn under heaplens");
    (exe, trace)
}

/// Compiles the Rust example `examples/SRC` with rustc (`-O -g`, edition 2021) into `dir/out`;
/// returns the binary.
pub fn compile_rust(dir: &WorkDir, src: &str, out: &str) -> PathBuf {
    let exe = dir.join(out);
    let mut rustc = Command::new("rustc");
    rustc.args(["-O", "-g", "--edition", "2021", "-o"]).arg(&exe).arg(examples_dir().join(src));
    let built = run_cmd(rustc, &dir.path);
    assert!(built.status.success(), "rustc {src} failed\n{}", built.show());
    exe
}

/// Compiles the heaplens-api crate into `dir/libheaplens_api.rlib` and a Rust example that uses
/// it, `examples/SRC`, into `dir/out` with `extra` rustc flags (`--test`, `--cfg x`).
pub fn compile_rust_with_api(dir: &WorkDir, src: &str, out: &str, extra: &[&str]) -> PathBuf {
    let rlib = dir.join("libheaplens_api.rlib");
    if !rlib.is_file() {
        let api = examples_dir().join("../crates/heaplens-api/src/lib.rs");
        let mut lib = Command::new("rustc");
        lib.args(["--crate-type", "rlib", "--crate-name", "heaplens_api", "--edition", "2021", "-O", "--out-dir"]);
        lib.arg(&dir.path).arg(&api);
        let built = run_cmd(lib, &dir.path);
        assert!(built.status.success(), "rustc heaplens-api failed\n{}", built.show());
    }
    let exe = dir.join(out);
    let mut rustc = Command::new("rustc");
    rustc.args(["-O", "-g", "--edition", "2021", "--extern"]).arg(format!("heaplens_api={}", rlib.display()));
    rustc.args(extra).arg("-o").arg(&exe).arg(examples_dir().join(src));
    let built = run_cmd(rustc, &dir.path);
    assert!(built.status.success(), "rustc {src} failed\n{}", built.show());
    exe
}

/// Compiles a C example with [`C_FLAGS`] plus `extra`.
pub fn compile_c(dir: &WorkDir, src: &str, extra: &[&str]) -> PathBuf {
    let mut flags: Vec<&str> = C_FLAGS.to_vec();
    flags.extend_from_slice(extra);
    let out = src.trim_end_matches(".c");
    compile(dir, "gcc", src, out, &flags)
}

// ---------------------------------------------------------------------------------------------
// The truth the examples print.

/// Parses the first stdout line that starts with `prefix:` into its `key=value` pairs.
pub fn truth(stdout: &str, prefix: &str) -> BTreeMap<String, String> {
    truths(stdout, prefix)
        .into_iter()
        .next()
        .unwrap_or_else(|| panic!("no '{prefix}:' line in the program's output:\n{stdout}"))
}

/// Every stdout line that starts with `prefix:`, parsed into `key=value` pairs.
pub fn truths(stdout: &str, prefix: &str) -> Vec<BTreeMap<String, String>> {
    let tag = format!("{prefix}:");
    stdout
        .lines()
        .filter_map(|l| l.strip_prefix(&tag))
        .map(|rest| {
            rest.split_whitespace()
                .filter_map(|kv| kv.split_once('='))
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        })
        .collect()
}

/// A numeric field of a truth line.
pub fn num(t: &BTreeMap<String, String>, key: &str) -> u64 {
    t.get(key)
        .unwrap_or_else(|| panic!("truth line has no {key}: {t:?}"))
        .parse()
        .unwrap_or_else(|_| panic!("truth {key} is not a number: {t:?}"))
}

/// A truth line without the fields that differ from run to run (pids, paths).
pub fn stable(mut t: BTreeMap<String, String>) -> BTreeMap<String, String> {
    for k in ["pid", "child"] {
        t.remove(k);
    }
    t
}

// ---------------------------------------------------------------------------------------------
// Reading the JSON report.

/// The value at a '/'-separated path ("summary/allocations"), panicking with the path when
/// it is missing.
pub fn at<'a>(v: &'a Value, path: &str) -> &'a Value {
    let mut cur = v;
    for part in path.split('/') {
        cur = match cur {
            Value::Object(m) => m.get(part),
            Value::Array(a) => part.parse::<usize>().ok().and_then(|i| a.get(i)),
            _ => None,
        }
        .unwrap_or_else(|| panic!("report has no {path} (stuck at {part})"));
    }
    cur
}

/// An unsigned number at `path`.
pub fn u(v: &Value, path: &str) -> u64 {
    let x = at(v, path);
    x.as_u64().unwrap_or_else(|| panic!("{path} is not an unsigned integer: {x}"))
}

/// A number field of a JSON object, 0 when it is missing (as in a count of a kind never seen).
pub fn u_or0(v: &Value, key: &str) -> u64 {
    v.get(key).and_then(Value::as_u64).unwrap_or(0)
}

/// An array at `path`.
pub fn arr<'a>(v: &'a Value, path: &str) -> &'a Vec<Value> {
    at(v, path).as_array().unwrap_or_else(|| panic!("{path} is not an array"))
}

/// The allocation bin table row for `size` bytes (`None` size = the >1024 bin).
pub fn bin_row(v: &Value, size: u64) -> Option<&Value> {
    arr(v, "bins/rows").iter().find(|r| r.get("size").and_then(Value::as_u64) == Some(size))
}

/// Direct allocation table rows of a function.
pub fn direct_rows<'a>(v: &'a Value, function: &str) -> Vec<&'a Value> {
    arr(v, "direct/rows").iter().filter(|r| r["function"].as_str() == Some(function)).collect()
}

/// The call graph entry of a function (not a cycle).
pub fn graph_entry<'a>(v: &'a Value, name: &str) -> Option<&'a Value> {
    arr(v, "call_graph").iter().find(|e| e["name"].as_str() == Some(name))
}

/// A leak path as a list of function names.
pub fn leak_path(row: &Value) -> Vec<String> {
    row["path"]
        .as_array()
        .unwrap_or_else(|| panic!("leak row without a path: {row}"))
        .iter()
        .map(|f| f.as_str().unwrap_or("").to_string())
        .collect()
}

/// Every function name the report mentions: direct rows, call graph entries and members.
pub fn all_names(v: &Value) -> Vec<String> {
    let mut names = Vec::new();
    for r in arr(v, "direct/rows") {
        if let Some(s) = r["function"].as_str() {
            names.push(s.to_string());
        }
    }
    for e in arr(v, "call_graph") {
        if let Some(s) = e["name"].as_str() {
            names.push(s.to_string());
        }
        if let Some(ms) = e["members"].as_array() {
            names.extend(ms.iter().filter_map(|m| m.as_str().map(str::to_string)));
        }
    }
    names
}

/// True when `name` looks like a symbol rather than a raw address or a placeholder.
pub fn is_symbol(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && !name.starts_with("0x")
        && !name.contains("+0x")
        && name != "??"
}

/// Checks the relations every report must satisfy, whatever the program:
/// allocations - deallocations == blocks live at exit (leaked + suppressed); the allocation bin
/// table's total row agrees with the summary; so does the direct allocation table's; the leak
/// table, shown in full, adds up to the leaked objects and bytes, and the suppressed paths to
/// the suppressed ones; the peak lies between what was live at exit and what was allocated.
pub fn assert_consistent(v: &Value) {
    let allocs = u(v, "summary/allocations");
    let deallocs = u(v, "summary/deallocations");
    let (suppressed_objects, suppressed_bytes) = (u(v, "summary/suppressed_objects"), u(v, "summary/suppressed_bytes"));
    let (mut sa, mut sb) = (0, 0);
    for r in arr(v, "suppressed_leaks") {
        sa += u(r, "allocs");
        sb += u(r, "bytes");
    }
    assert_eq!((sa, sb), (suppressed_objects, suppressed_bytes), "suppressed paths do not add up");
    let leaked_objects = u(v, "summary/leaked_objects") + suppressed_objects;
    let leaked_bytes = u(v, "summary/leaked_bytes") + suppressed_bytes;
    let bytes = u(v, "summary/bytes_allocated");
    let peak = u(v, "summary/peak_bytes");
    assert_eq!(
        allocs.checked_sub(deallocs),
        Some(leaked_objects),
        "allocations {allocs} - deallocations {deallocs} != leaked objects {leaked_objects}"
    );
    assert!(leaked_bytes <= peak, "leaked bytes {leaked_bytes} > peak {peak}");
    assert!(peak <= bytes, "peak {peak} > bytes allocated {bytes}");

    assert_eq!(u(v, "bins/total/allocs"), allocs, "bin table total allocs != summary allocations");
    assert_eq!(u(v, "bins/total/bytes"), bytes, "bin table total bytes != summary bytes_allocated");
    assert_eq!(u(v, "bins/total/frees"), deallocs, "bin table total frees != summary deallocations");
    assert_eq!(u(v, "bins/total/kept_bytes"), leaked_bytes, "bin table total kept != leaked bytes");
    let (mut ra, mut rb) = (0, 0);
    for r in arr(v, "bins/rows") {
        ra += u(r, "allocs");
        rb += u(r, "bytes");
    }
    assert_eq!((ra, rb), (allocs, bytes), "bin rows do not add up to the summary");

    assert_eq!(u(v, "direct/total/bytes"), bytes, "direct table total bytes != bytes allocated");
    assert_eq!(u(v, "direct/total/kept_bytes"), leaked_bytes, "direct table total kept != leaked");

    let (mut la, mut lb) = (0, 0);
    for r in arr(v, "leaks") {
        la += u(r, "allocs");
        lb += u(r, "bytes");
    }
    assert_eq!(
        (la + sa, lb + sb),
        (leaked_objects, leaked_bytes),
        "leak table and suppressed paths do not add up to the blocks live at exit"
    );

    let mut calls = 0;
    for (_, n) in at(v, "summary/calls_by_kind").as_object().expect("calls_by_kind object") {
        calls += n.as_u64().expect("count");
    }
    let failed = u(v, "summary/failed_allocations");
    assert!(
        calls >= allocs + failed,
        "calls_by_kind adds up to {calls}, fewer than {allocs} allocations + {failed} failed"
    );
}

/// One complete block of a trace file, as its header states it.
#[derive(Debug, Clone, Copy)]
pub struct BlockAt {
    /// Offset of its header in the file.
    pub offset: usize,
    pub kind: u8,
    pub codec: u8,
    /// Header and stored bytes.
    pub len: usize,
}

/// Every complete block after the 16-byte file header (a cut last block is left out).
pub fn blocks(b: &[u8]) -> Vec<BlockAt> {
    use heaplens_trace::block::BlockHeader;
    use heaplens_trace::{BLOCK_HEADER_LEN, FILE_HEADER_LEN};
    assert_eq!(&b[..8], heaplens_trace::MAGIC, "trace magic");
    let mut out = Vec::new();
    let mut offset = FILE_HEADER_LEN;
    while let Some(h) = b.get(offset..offset + BLOCK_HEADER_LEN) {
        let h = BlockHeader::from_bytes(h.try_into().unwrap());
        let len = BLOCK_HEADER_LEN + h.stored_len as usize;
        if offset + len > b.len() {
            break;
        }
        out.push(BlockAt { offset, kind: h.kind, codec: h.codec, len });
        offset += len;
    }
    out
}

/// Opens `heaplens view`'s `page` in Chromium through `tests/browser/view_page.py`, hovering a
/// block `function` allocated and keeping a screenshot at `shot`: what the script found, by
/// key (each a JSON value or plain text, as the script prints it).
pub fn browse(dir: &WorkDir, page: &Path, shot: &Path, function: &str) -> impl Fn(&str) -> String {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/browser/view_page.py");
    let mut py = std::process::Command::new("python3");
    py.arg(&script).arg(page).arg(shot).arg(function);
    let r = run_cmd(py, &dir.path)
        .ok("Chromium through Selenium (apt install chromium chromium-driver; pip install selenium)");
    move |key: &str| -> String {
        r.stdout
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{key}=")))
            .unwrap_or_else(|| panic!("no {key} in\n{}", r.stdout))
            .to_string()
    }
}
