//! `heaplens export`: every format read back by the tool that reads it, on the widgets example
//! and on a multi-threaded C++ program, with the same numbers `heaplens report` prints.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

use common::*;
use serde_json::Value;

/// `heaplens export TRACE --format F -o OUT [--metric M]`, which must succeed.
fn export(dir: &WorkDir, trace: &Path, format: &str, metric: Option<&str>, out: &str) -> std::path::PathBuf {
    let path = dir.join(out);
    let mut args = vec!["export".to_string(), trace.display().to_string(), "--format".into(), format.into()];
    args.extend(["-o".into(), path.display().to_string()]);
    if let Some(m) = metric {
        args.extend(["--metric".into(), m.into()]);
    }
    heaplens(dir, &args).ok(&format!("heaplens export --format {format}"));
    path
}

/// The sum of the counts of a folded-stacks file, and its heaviest line's stack.
fn folded(path: &Path) -> (u64, String) {
    let text = std::fs::read_to_string(path).unwrap();
    let mut total = 0;
    let mut top = (0, String::new());
    for line in text.lines() {
        let (stack, n) = line.rsplit_once(' ').expect("`stack count`");
        let n: u64 = n.parse().expect("a count");
        total += n;
        if n > top.0 {
            top = (n, stack.to_string());
        }
    }
    (total, top.1)
}

/// The top direct allocator of the report (by bytes).
/// Bytes or objects live at exit: the report's leaks and its suppressed blocks (the runtime's
/// buffers), which exports do not tell apart.
fn live(report: &Value, what: &str) -> u64 {
    u(report, &format!("summary/leaked_{what}")) + u(report, &format!("summary/suppressed_{what}"))
}

fn top_direct(report: &Value) -> String {
    let rows = arr(report, "direct/rows");
    let best = rows.iter().max_by_key(|r| u(r, "bytes")).expect("a direct allocator");
    at(best, "function").as_str().unwrap().to_string()
}

/// `google-pprof --text --show_bytes [flag] PROGRAM PROFILE`: the total and the first row's
/// function.
fn pprof_text(dir: &WorkDir, program: &Path, profile: &Path, flag: &str) -> (u64, String) {
    let mut cmd = Command::new("google-pprof");
    cmd.args(["--text", "--show_bytes", flag]).arg(program).arg(profile);
    let out = run_cmd(cmd, &dir.path).ok("google-pprof (apt-get install google-perftools)");
    let mut lines = out.stdout.lines();
    let total = lines.next().and_then(|l| l.strip_prefix("Total: ")).expect("a Total line");
    let total: u64 = total.split(' ').next().unwrap().parse().unwrap();
    // `flat flat% sum% cum cum% function`, the function possibly with spaces and `(inline)`.
    let row = lines.next().expect("a row");
    let function = row.split_whitespace().skip(5).collect::<Vec<_>>().join(" ");
    (total, function.trim_end_matches(" (inline)").to_string())
}

/// A C++ name as pprof shows it: without template arguments and parameters
/// (`std::vector<int>::push_back(int const&)` is `std::vector::push_back`).
fn pprof_name(name: &str) -> String {
    let mut out = String::new();
    let mut depth = 0;
    for c in name.chars() {
        match c {
            '<' => depth += 1,
            '>' => depth -= 1,
            '(' if depth == 0 => break,
            c if depth == 0 => out.push(c),
            _ => {}
        }
    }
    out.trim().to_string()
}

/// Every check of the formats on one recorded program.
fn check_all(dir: &WorkDir, program: &Path, trace: &Path) {
    let r = report(dir, trace);
    let want = [
        ("alloc-bytes", u(&r, "summary/bytes_allocated")),
        ("alloc-count", u(&r, "summary/allocations")),
        ("inuse-bytes", u(&r, "summary/peak_bytes")),
        ("leaked-bytes", live(&r, "bytes")),
        ("leaked-count", live(&r, "objects")),
    ];
    // The exports keep whole stacks, as do the other tools reading them: their top function is
    // the report's by innermost frame.
    let raw = report_with(dir, trace, &["--raw-frames"]);
    let top = top_direct(&raw);
    // The top allocator as the graphs name it (whole where another instantiation would read
    // alike elided).
    let mut top_frame = top.clone();
    for (metric, total) in want {
        let out = export(dir, trace, "collapsed", Some(metric), &format!("{metric}.folded"));
        let (sum, heaviest) = folded(&out);
        assert_eq!(sum, total, "collapsed --metric {metric} sums to the report's figure");
        if metric == "alloc-bytes" {
            // The graph elides generic arguments only where no other function then reads alike.
            let last = heaviest.rsplit(';').next().unwrap_or("");
            assert!(
                last == top || heaplens_interpret::elide::elide_generics(last) == top,
                "the heaviest stack ends in the top allocator {top}: {heaviest}"
            );
            top_frame = last.to_string();
        }
    }

    // The SVG parses as XML (Python's parser) and names the top allocating function.
    let svg = export(dir, trace, "flamegraph", None, "flame.svg");
    let mut py = Command::new("python3");
    py.args(["-c", "import sys, xml.etree.ElementTree as E; r = E.parse(sys.argv[1]).getroot(); print(r.tag)"])
        .arg(&svg);
    let o = run_cmd(py, &dir.path).ok("the flame graph parses as XML");
    assert!(o.stdout.trim().ends_with("svg"), "{}", o.stdout);
    let text = std::fs::read_to_string(&svg).unwrap();
    let escaped = top_frame.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;");
    assert!(text.contains(&escaped), "the flame graph names {top_frame}");
    // The icicle graph is the same graph drawn top down: the same frames, inverted.
    let icicle = std::fs::read_to_string(export(dir, trace, "icicle", None, "icicle.svg")).unwrap();
    assert!(icicle.contains(&escaped) && icicle.contains("inverted = true"), "the icicle graph");
    assert!(!text.contains("inverted = true"), "the flame graph grows upwards");

    // pprof's own reader: in-use at exit, bytes allocated, and the same top allocator.
    let heap = export(dir, trace, "pprof-text", None, "out.heap");
    let (inuse, _) = pprof_text(dir, program, &heap, "--inuse_space");
    assert_eq!(inuse, live(&r, "bytes"), "pprof's in-use total is the bytes live at exit");
    let (alloc, first) = pprof_text(dir, program, &heap, "--alloc_space");
    assert_eq!(alloc, u(&r, "summary/bytes_allocated"), "pprof's allocated total");
    assert_eq!(first, pprof_name(&top), "pprof's top allocating function is the report's");
    let (objects, _) = pprof_text(dir, program, &heap, "--alloc_objects");
    assert_eq!(objects, u(&r, "summary/allocations"), "pprof's allocated objects");

    // profile.proto through Go's pprof: the samples' sums, and its top function.
    let pb = export(dir, trace, "pprof", None, "out.pb.gz");
    let sums = go_pprof_sums(dir, &pb);
    assert_eq!(sums[0], u(&r, "summary/allocations"), "alloc_objects");
    assert_eq!(sums[1], u(&r, "summary/bytes_allocated"), "alloc_space");
    assert_eq!(sums[2], live(&r, "objects"), "inuse_objects (live at exit)");
    assert_eq!(sums[3], live(&r, "bytes"), "inuse_space (live at exit)");
    let top_go = go_pprof_top(dir, &pb);
    // --metric picks the value pprof shows first.
    for (metric, shown) in
        [("leaked-bytes", "inuse_space"), ("alloc-count", "alloc_objects"), ("alloc-bytes", "alloc_space")]
    {
        let pb = export(dir, trace, "pprof", Some(metric), &format!("{metric}.pb.gz"));
        let mut cmd = Command::new("go");
        cmd.args(["tool", "pprof", "-top"]).arg(&pb);
        let out = run_cmd(cmd, &dir.path).ok("go tool pprof -top");
        assert!(out.stdout.lines().any(|l| l == format!("Type: {shown}")), "{metric}: {}", out.stdout);
    }
    check_heaptrack(dir, &export(dir, trace, "heaptrack", None, "out.heaptrack.zst"), &r);
    check_parquet(dir, &export(dir, trace, "parquet", None, "parquet"), &r, &top);
    let firefox = export(dir, trace, "firefox", None, "firefox.json");
    check_firefox(dir, &firefox, &r);
    assert_eq!(pprof_name(&top_go), pprof_name(&top), "go tool pprof's top function is the report's");
}

/// heaptrack_print reads the file: its calls to allocation functions, and the sums of its
/// flame graph stacks for allocations, peak and leaked cost, are the report's allocations,
/// peak bytes and bytes live at exit.
fn check_heaptrack(dir: &WorkDir, file: &Path, r: &Value) {
    let mut cmd = Command::new("heaptrack_print");
    cmd.arg("-f").arg(file);
    let out = run_cmd(cmd, &dir.path).ok("heaptrack_print");
    let calls = out.stdout.lines().find_map(|l| l.strip_prefix("calls to allocation functions: ")).expect("calls");
    let calls: u64 = calls.split(' ').next().unwrap().parse().unwrap();
    assert_eq!(calls, u(r, "summary/allocations"), "heaptrack_print's calls to allocation functions");
    let costs = [
        ("allocations", u(r, "summary/allocations")),
        ("peak", u(r, "summary/peak_bytes")),
        ("leaked", live(r, "bytes")),
    ];
    for (cost, want) in costs {
        let stacks = dir.join(format!("heaptrack-{cost}.txt"));
        let mut cmd = Command::new("heaptrack_print");
        cmd.arg("-f").arg(file).arg("-F").arg(&stacks).args(["--flamegraph-cost-type", cost]);
        run_cmd(cmd, &dir.path).ok("heaptrack_print -F");
        let text = std::fs::read_to_string(&stacks).unwrap();
        let sum: u64 = text.lines().filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok()).sum();
        assert_eq!(sum, want, "heaptrack_print's {cost} cost");
    }
}

/// DuckDB reads the Parquet tables: successful allocations and reallocations count the
/// report's allocations and sum to its bytes allocated, releases of recorded blocks (plain and
/// by a moving realloc) count its deallocations, and the three tables joined name the top
/// allocating function.
fn check_parquet(dir: &WorkDir, out: &Path, r: &Value, top: &str) {
    let script = "import duckdb, sys\n\
d = sys.argv[1]\n\
c = duckdb.connect()\n\
ok = \"kind in ('allocation', 'reallocation') and address <> 0\"\n\
n, b = c.execute(f\"select count(*), sum(size) from '{d}/events.parquet' where {ok}\").fetchone()\n\
f = c.execute(f\"select count(*) from '{d}/events.parquet' where stack_id is not null and (kind = 'deallocation' or (kind = 'reallocation' and old_address is not null))\").fetchone()[0]\n\
t = c.execute(f\"select f.function from '{d}/events.parquet' e join '{d}/stacks.parquet' s on e.stack_id = s.stack_id and s.depth = 0 join '{d}/frames.parquet' f on s.frame_index = f.frame_index where {ok} group by 1 order by sum(e.size) desc limit 1\").fetchone()[0]\n\
print(n, b, f)\n\
print(t)";
    let mut py = Command::new("python3");
    py.args(["-c", script]).arg(out);
    let o = run_cmd(py, &dir.path).ok("DuckDB over the Parquet export (pip install duckdb)");
    let mut lines = o.stdout.lines();
    let v: Vec<u64> = lines.next().unwrap().split_whitespace().map(|x| x.parse().unwrap()).collect();
    assert_eq!(v[0], u(r, "summary/allocations"), "DuckDB's count of allocations");
    assert_eq!(v[1], u(r, "summary/bytes_allocated"), "DuckDB's sum of bytes allocated");
    // The report's deallocations also count the blocks whose release was never seen
    // (overwritten by a later allocation), which have no row.
    let overwritten = u(r, "summary/overwritten_allocations");
    assert_eq!(v[2] + overwritten, u(r, "summary/deallocations"), "DuckDB's releases of recorded blocks");
    // The tables keep full names; the report elides template arguments.
    let duck_top = heaplens_interpret::elide::elide_generics(lines.next().unwrap()).into_owned();
    assert_eq!(duck_top, top, "DuckDB's top allocating function");
}

/// The Firefox profile parses as JSON (Python's parser), its positive allocation weights count
/// the allocations and sum to the bytes allocated, and all weights sum to the bytes live at exit
/// (deallocations are negative); the memory track ends at the same figure.
fn check_firefox(dir: &WorkDir, path: &Path, r: &Value) {
    let script = "import json, sys\n\
d = json.load(open(sys.argv[1]))\n\
w = [x for t in d['threads'] if t.get('nativeAllocations') for x in t['nativeAllocations']['weight']]\n\
c = sum(sum(k['samples']['count']) for k in d['counters'])\n\
print(sum(1 for x in w if x > 0), sum(x for x in w if x > 0), sum(w), int(c))";
    let mut py = Command::new("python3");
    py.args(["-c", script]).arg(path);
    let out = run_cmd(py, &dir.path).ok("the Firefox profile parses as JSON");
    let v: Vec<i64> = out.stdout.split_whitespace().map(|x| x.parse().unwrap()).collect();
    let leaked = live(r, "bytes") as i64;
    assert_eq!(v[0], u(r, "summary/allocations") as i64, "allocation samples");
    assert_eq!(v[1], u(r, "summary/bytes_allocated") as i64, "allocated bytes");
    assert_eq!(v[2], leaked, "allocations minus deallocations");
    assert_eq!(v[3], leaked, "the memory track's last value");
}

/// `go tool pprof -raw`: the sums of the four sample values over every sample.
fn go_pprof_sums(dir: &WorkDir, pb: &Path) -> [u64; 4] {
    let mut cmd = Command::new("go");
    cmd.args(["tool", "pprof", "-raw"]).arg(pb);
    let out = run_cmd(cmd, &dir.path).ok("go tool pprof -raw (apt-get install golang-go)");
    let mut sums = [0u64; 4];
    let mut in_samples = false;
    for line in out.stdout.lines() {
        if line.starts_with("Samples:") {
            in_samples = true;
        } else if line.starts_with("Locations") {
            break;
        } else if in_samples {
            if let Some((values, _)) = line.split_once(':') {
                let v: Vec<u64> = values.split_whitespace().filter_map(|x| x.parse().ok()).collect();
                if v.len() == 4 {
                    for (s, x) in sums.iter_mut().zip(v) {
                        *s += x;
                    }
                }
            }
        }
    }
    sums
}

/// `go tool pprof -top -sample_index=alloc_space`: the first function listed.
fn go_pprof_top(dir: &WorkDir, pb: &Path) -> String {
    let mut cmd = Command::new("go");
    cmd.args(["tool", "pprof", "-top", "-sample_index=alloc_space"]).arg(pb);
    let out = run_cmd(cmd, &dir.path).ok("go tool pprof -top");
    let mut lines = out.stdout.lines().skip_while(|l| !l.trim_start().starts_with("flat"));
    let row = lines.nth(1).expect("a row");
    row.split_whitespace().skip(5).collect::<Vec<_>>().join(" ")
}

#[test]
fn widgets_exports_read_back_with_the_reports_numbers() {
    let dir = WorkDir::new("export-widgets");
    let (exe, trace) = traced_widgets(&dir, &["3000"]);
    check_all(&dir, &exe, &trace);
}

#[test]
fn multi_threaded_cxx_exports_read_back_with_the_reports_numbers() {
    let dir = WorkDir::new("export-churn");
    let (exe, trace) = traced_churn(&dir, &["4", "20000"]);
    assert!(u(&report(&dir, &trace), "summary/threads") >= 4);
    check_all(&dir, &exe, &trace);
}

#[test]
fn bad_input_gets_one_error_line() {
    let dir = WorkDir::new("export-errors");
    let o = heaplens(&dir, &["export", "/nonexistent.hltrace", "--format", "collapsed", "-o", "x"]);
    assert_eq!(o.status.code(), Some(2), "{}", o.show());
    assert_one_line_error(&o, "a missing trace");
    let exe = compile_c(&dir, "widgets.c", &[]);
    let trace = dir.join("w.hltrace");
    run_traced(&dir, &trace, &exe, &["100"]).ok("widgets");
    let o = heaplens(&dir, &["export", trace.to_str().unwrap(), "--format", "collapsed", "-o", "/nonexistent/dir/x"]);
    assert_eq!(o.status.code(), Some(2), "{}", o.show());
    assert_one_line_error(&o, "an unwritable output");
    assert!(o.stderr.contains("cannot write"), "{}", o.stderr);
}

/// A damaged trace exports what it holds, with a warning naming the damage.
#[test]
fn a_damaged_trace_exports_what_it_holds_with_a_warning() {
    let dir = WorkDir::new("export-damaged");
    let trace = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/damaged/events-huge-varint.hltrace");
    for format in ["collapsed", "pprof", "heaptrack", "firefox"] {
        let out = dir.join(format!("out.{format}"));
        let o = heaplens(&dir, &["export", trace.to_str().unwrap(), "--format", format, "-o", out.to_str().unwrap()]);
        assert!(o.status.success(), "{format}: {}", o.show());
        assert!(o.stderr.contains("warning") && o.stderr.contains("damaged"), "{format}: {}", o.stderr);
        assert!(std::fs::metadata(&out).unwrap().len() > 0, "{format}: something written");
    }
    // The 197 events decoded before the damage: folded counts sum to their allocations.
    let folded_out = export(&dir, &trace, "collapsed", Some("alloc-count"), "count.folded");
    assert_eq!(folded(&folded_out).0, 197);
}

/// A reallocation is one `reallocation` row (old and new address, the new size), not a release
/// and an allocation: `examples/lifetimes.c` moves every 50th of its 5000 blocks with realloc.
#[test]
fn reallocations_are_one_parquet_row_each() {
    let dir = WorkDir::new("export-parquet-realloc");
    let exe = compile_c(&dir, "lifetimes.c", &[]);
    let trace = dir.join("lifetimes.hltrace");
    run_traced(&dir, &trace, &exe, &[] as &[&str]).ok("lifetimes under heaplens");
    let r = report(&dir, &trace);
    let out = export(&dir, &trace, "parquet", None, "parquet");
    check_parquet(&dir, &out, &r, &top_direct(&r));
    let script = "import duckdb, sys\n\
rows = duckdb.connect().execute(f\"select count(*), min(size), max(size), count(old_address) from '{sys.argv[1]}/events.parquet' where kind = 'reallocation'\").fetchone()\n\
print(*rows)";
    let mut py = Command::new("python3");
    py.args(["-c", script]).arg(&out);
    let o = run_cmd(py, &dir.path).ok("DuckDB");
    let v: Vec<u64> = o.stdout.split_whitespace().map(|x| x.parse().unwrap()).collect();
    assert_eq!(
        v,
        vec![100, 100_000, 100_000 + 4950, 100],
        "one row per realloc, sizes 100000 + j, each with its old address"
    );
}

/// The fleet query over a data set at `ds`, by DuckDB (`python3 -c`) or pyspark: one line
/// `host<TAB>program<TAB>pid<TAB>allocations<TAB>bytes` per partition, then
/// `function<TAB>bytes` per innermost frame over every trace (the README's query).
const FLEET_DUCKDB: &str = "import duckdb, sys\n\
d = sys.argv[1]\n\
c = duckdb.connect()\n\
t = lambda n: f\"read_parquet('{d}/{n}/**/*.parquet', hive_partitioning = true)\"\n\
ok = \"e.kind <> 'deallocation' and e.address <> 0\"\n\
for r in c.execute(f\"select host, program, pid, count(*), sum(size) from {t('events')} e where {ok} group by all\").fetchall(): print('P', *r, sep='\\t')\n\
for r in c.execute(f\"select f.function, sum(e.size) from {t('events')} e join {t('stacks')} s using (host, program, pid, stack_id) join {t('frames')} f using (host, program, pid, frame_index) where s.depth = 0 and {ok} group by 1\").fetchall(): print('F', *r, sep='\\t')";

const FLEET_SPARK: &str = "import sys\n\
from pyspark.sql import SparkSession\n\
d = sys.argv[1]\n\
s = SparkSession.builder.master('local[1]').config('spark.ui.enabled', 'false').config('spark.driver.host', '127.0.0.1').config('spark.driver.bindAddress', '127.0.0.1').getOrCreate()\n\
s.sparkContext.setLogLevel('ERROR')\n\
for n in ('events', 'stacks', 'frames'): s.read.parquet(f'{d}/{n}').createOrReplaceTempView(n)\n\
ok = \"e.kind <> 'deallocation' and e.address <> 0\"\n\
on = lambda a, b: f'{a}.host = {b}.host and {a}.program = {b}.program and {a}.pid = {b}.pid'\n\
for r in s.sql(f'select host, program, pid, count(*), cast(sum(size) as bigint) from events e where {ok} group by 1, 2, 3').collect(): print('P', *r, sep='\\t')\n\
for r in s.sql(f\"select f.function, cast(sum(e.size) as bigint) from events e join stacks s on {on('e', 's')} and e.stack_id = s.stack_id join frames f on {on('s', 'f')} and s.frame_index = f.frame_index where s.depth = 0 and {ok} group by 1\").collect(): print('F', *r, sep='\\t')\n\
s.stop()";

/// Partitions (host, program, pid, allocations, bytes) and bytes by function (names elided as
/// the report elides them) from a fleet query's output.
type Fleet = (BTreeSet<(String, String, u64, u64, u64)>, BTreeMap<String, u64>);

fn fleet(out: &str) -> Fleet {
    let (mut parts, mut functions) = (BTreeSet::new(), BTreeMap::new());
    for line in out.lines() {
        let f: Vec<&str> = line.split('\t').collect();
        let n = |i: usize| f[i].parse::<u64>().unwrap();
        match f[0] {
            "P" => {
                parts.insert((f[1].into(), f[2].into(), n(3), n(4), n(5)));
            }
            "F" => {
                let name = heaplens_interpret::elide::elide_generics(f[1]).into_owned();
                *functions.entry(name).or_default() += n(2);
            }
            _ => {}
        }
    }
    (parts, functions)
}

/// Traces of several processes, as if from several machines, exported into one data set: DuckDB
/// (and Spark) query it as one table whose partitions are each trace's report, and whose top
/// allocating functions over the fleet are the sums of each report's (by innermost frame).
#[test]
fn a_fleet_of_traces_is_one_parquet_data_set() {
    let dir = WorkDir::new("export-fleet");
    let widgets = compile_c(&dir, "widgets.c", &[]);
    // A program named by a stranger: a path, `..`, Hive's `=` and `%`, a control character.
    let hostile = dir.join("w=..%2F:\u{1}x");
    std::fs::copy(&widgets, &hostile).unwrap();
    let churn = compile(&dir, "g++", "../bench/workloads/churn.cpp", "churn", &["-O2", "-g", "-pthread"]);
    let runs: [(&Path, &[&str], Option<&str>); 4] = [
        (&widgets, &["200"], Some("alpha")),
        (&widgets, &["500"], Some("beta")),
        // No --host: the machine that exports.
        (&churn, &["2", "3000"], None),
        (&hostile, &["300"], Some("beta/../gamma")),
    ];
    let ds = dir.join("fleet");
    let mut want: Fleet = Default::default();
    for (i, (exe, args, host)) in runs.iter().enumerate() {
        let trace = dir.join(format!("t{i}.hltrace"));
        run_traced(&dir, &trace, exe, args).ok("a traced program");
        let mut cmd = vec!["export", trace.to_str().unwrap(), "--format", "parquet", "--dataset", ds.to_str().unwrap()];
        if let Some(h) = host {
            cmd.extend(["--host", h]);
        }
        heaplens(&dir, &cmd).ok("heaplens export --dataset");
        let r = report(&dir, &trace);
        let program = exe.file_name().unwrap().to_str().unwrap().to_string();
        if i == 0 {
            // Exported again, the trace replaces its partition whole: a second file there (as
            // if from an older export) goes with it, and no row is counted twice.
            let part = ds.join(format!("events/host=alpha/program=widgets/pid={}", u(&r, "process/pid")));
            std::fs::copy(part.join("part-0.parquet"), part.join("part-1.parquet")).unwrap();
            heaplens(&dir, &cmd).ok("heaplens export --dataset, again");
            assert!(!part.join("part-1.parquet").exists(), "the old partition is replaced whole");
        }
        let this_machine = || std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap().trim().to_string();
        want.0.insert((
            host.map_or_else(this_machine, str::to_string),
            program,
            u(&r, "process/pid"),
            u(&r, "summary/allocations"),
            u(&r, "summary/bytes_allocated"),
        ));
        for row in arr(&report_with(&dir, &trace, &["--raw-frames"]), "direct/rows") {
            *want.1.entry(at(row, "function").as_str().unwrap().to_string()).or_default() += u(row, "bytes");
        }
    }
    // --dataset is Parquet's, and --host is --dataset's: one line each, nothing written.
    let (t0, other) = (dir.join("t0.hltrace"), dir.join("other"));
    let (t0, other, ds_s) = (t0.to_str().unwrap(), other.to_str().unwrap(), ds.to_str().unwrap());
    for bad in [["--format", "collapsed", "--dataset", ds_s], ["--format", "parquet", "-o", other]] {
        let mut args = vec!["export", t0];
        args.extend(bad);
        args.extend(["--host", "h"]);
        let o = heaplens(&dir, &args);
        assert_eq!(o.status.code(), Some(2), "{}", o.show());
        assert_one_line_error(&o, "a misplaced --dataset or --host");
    }
    assert!(!dir.join("other").exists());
    // The partitions were written beside the tables and nothing else is left there.
    let names: BTreeSet<String> =
        std::fs::read_dir(&ds).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    assert_eq!(names, ["events", "frames", "stacks"].map(String::from).into(), "the data set's top level");

    let mut py = Command::new("python3");
    py.args(["-c", FLEET_DUCKDB]).arg(&ds);
    let duck = fleet(&run_cmd(py, &dir.path).ok("DuckDB over the data set (pip install duckdb)").stdout);
    assert_eq!(duck.0, want.0, "DuckDB's partitions (host, program, pid) and their totals are the reports'");
    // The report's raw frames pass over an allocator entry point that the tables keep (the
    // loader's `calloc` of a thread's DTV, under 1% here): the top functions are compared.
    let total: u64 = want.0.iter().map(|p| p.4).sum();
    assert_eq!(duck.1.values().sum::<u64>(), total, "DuckDB's bytes over the fleet are the reports' sum");
    let top = |m: &BTreeMap<String, u64>| -> BTreeMap<String, u64> {
        m.iter().filter(|(_, &b)| b * 100 >= total).map(|(f, &b)| (f.clone(), b)).collect()
    };
    assert!(top(&want.1).len() >= 4 && top(&want.1).contains_key("make_widget"), "{:?}", want.1);
    assert_eq!(top(&duck.1), top(&want.1), "DuckDB's top functions over the fleet are the reports' sums");

    let mut py = Command::new("python3");
    py.args(["-c", FLEET_SPARK]).arg(&ds).env("SPARK_LOCAL_IP", "127.0.0.1");
    let spark = fleet(&run_cmd(py, &dir.path).ok("Spark over the data set (pip install pyspark; Java 17)").stdout);
    assert_eq!(spark, duck, "Spark reads the data set as DuckDB does");
}

#[test]
fn a_flame_graph_of_nothing_is_a_picture_that_says_so() {
    let dir = WorkDir::new("export-nothing");
    // diff_grow frees everything (its stdio buffer is the runtime's, suppressed, but a leak
    // graph draws every block live at exit: use a program that prints nothing).
    let source = "#include <stdlib.h>\nint main(void) { for (int i = 0; i < 10; i++) free(malloc(100)); return 0; }\n";
    let exe = compile_source(&dir, "gcc", "clean.c", source, "clean", &["-O0", "-g"]);
    let trace = dir.join("clean.hltrace");
    run_traced(&dir, &trace, &exe, &[] as &[&str]).ok("clean");
    for format in ["flamegraph", "icicle"] {
        let svg = export(&dir, &trace, format, Some("leaked-bytes"), &format!("{format}.svg"));
        let text = std::fs::read_to_string(&svg).unwrap();
        assert!(text.starts_with("<?xml") && text.trim_end().ends_with("</svg>"), "{text}");
        assert!(text.contains("Bytes leaked") && text.contains("nothing to draw"), "{text}");
    }
    let folded = export(&dir, &trace, "collapsed", Some("leaked-bytes"), "leaks.folded");
    assert_eq!(std::fs::read_to_string(folded).unwrap(), "", "no stack leaked");
}
