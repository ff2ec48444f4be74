//! Real programs nobody here wrote: Python, Perl, SQLite, gcc and git run under heaplens with
//! the same output and exit status as without it, and give reports that add up and name
//! functions from the program's own binary and from its libraries.
//!
//! A program missing from the machine fails its test (`.ci/run` installs them all).

mod common;

use std::path::{Path, PathBuf};

use common::*;
use serde_json::Value;

fn tool(name: &str) -> PathBuf {
    for d in ["/usr/bin", "/bin", "/usr/local/bin"] {
        let p = Path::new(d).join(name);
        if p.exists() {
            return p;
        }
    }
    panic!("{name} is not installed (bash .ci/run installs it)");
}

/// Runs a program bare and under heaplens, checks stdout, the program's stderr and the exit
/// status agree, and returns the report after checking it is self-consistent.
fn same_both_ways(dir: &WorkDir, env: &[(&str, &str)], program: &Path, args: &[&str]) -> (Out, Value) {
    let bare = run_bare_env(dir, env, program, args);
    let trace = dir.join("real.hltrace");
    let out = run_traced_env(dir, &trace, env, program, args);
    assert_eq!(describe(&out.status), describe(&bare.status), "exit status differs\n{}", out.show());
    assert_eq!(out.stdout, bare.stdout, "stdout differs under heaplens");
    assert_eq!(out.program_stderr(), bare.program_stderr(), "stderr differs under heaplens");
    let v = report(dir, &trace);
    assert_consistent(&v);
    assert_eq!(at(&v, "trace/truncated"), &Value::Bool(false));
    assert_eq!(u(&v, "trace/corrupt_blocks"), 0);
    (out, v)
}

/// Direct table rows whose module path contains `module`, with a symbol for a name.
fn symbolized_in<'a>(v: &'a Value, module: &str) -> Vec<&'a str> {
    arr(v, "direct/rows")
        .iter()
        .filter(|r| r["module"].as_str().is_some_and(|m| m.contains(module)))
        .filter_map(|r| r["function"].as_str())
        .filter(|f| is_symbol(f))
        .collect()
}

/// The C library's own allocating functions are named (in the report by innermost frame: by
/// default they are passed over for the program's functions that called them).
fn assert_libc_symbolized(dir: &WorkDir, trace: &str) {
    let trace = dir.join(trace);
    let v = report_with(dir, &trace, &["--raw-frames"]);
    let v = &v;
    let libc = symbolized_in(v, "libc.so");
    assert!(
        !libc.is_empty(),
        "no direct allocation symbolized in libc; direct rows: {:#?}",
        arr(v, "direct/rows").iter().take(30).collect::<Vec<_>>()
    );
}

#[test]
fn python_json_round_trip() {
    let dir = WorkDir::new("python");
    let script = r#"
import json, sys
data = [{"id": i, "name": "item%d" % i, "tags": ["t%d" % (i % 7), "x" * (i % 13)],
         "nested": {"v": [i, i * 2, i * 3]}} for i in range(3000)]
text = json.dumps(data, sort_keys=True)
back = json.loads(text)
assert back == data
print(len(text), sum(d["id"] for d in back), len(back))
sys.exit(0)
"#;
    let py = tool("python3");
    let (out, v) = same_both_ways(&dir, &[("PYTHONMALLOC", "malloc")], &py, &["-c", script]);
    assert!(out.stdout.trim().ends_with("4498500 3000"), "python printed {}", out.stdout);
    let allocs = u(&v, "summary/allocations");
    assert!(allocs > 1000, "python made only {allocs} allocations with PYTHONMALLOC=malloc");
    assert!(u(&v, "summary/calls_by_kind/realloc") > 0, "python reallocs");
    let names = all_names(&v);
    let own: Vec<&String> = names.iter().filter(|n| n.starts_with("Py") || n.starts_with("_Py")).collect();
    assert!(!own.is_empty(), "no Py*/_Py* function from the python binary in the report");
    assert!(!symbolized_in(&v, "python3").is_empty(), "no direct allocation symbolized in the python binary");
    assert_libc_symbolized(&dir, "real.hltrace");
}

#[test]
fn perl_one_liner() {
    let dir = WorkDir::new("perl");
    let perl = tool("perl");
    let prog = r#"my %h; for my $i (1..20000) { $h{"k$i"} = [$i, "v" x ($i % 50)] } my $s = 0; $s += $_->[0] for values %h; my @k = sort keys %h; print scalar(@k), " $s $k[0] $k[-1]\n";"#;
    let (out, v) = same_both_ways(&dir, &[], &perl, &["-e", prog]);
    assert_eq!(out.stdout, "20000 200010000 k1 k9999\n");
    assert!(u(&v, "summary/allocations") > 20000, "perl allocations");
    let names = all_names(&v);
    assert!(names.iter().any(|n| n.starts_with("Perl_")), "no Perl_* function from the perl binary in the report");
    assert_libc_symbolized(&dir, "real.hltrace");
}

#[test]
fn sqlite3_in_memory() {
    let dir = WorkDir::new("sqlite");
    let sqlite = tool("sqlite3");
    let sql = "CREATE TABLE t(a INTEGER PRIMARY KEY, b TEXT);\
               WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c WHERE x<5000) \
               INSERT INTO t SELECT x, printf('row-%05d', x) FROM c;\
               CREATE INDEX tb ON t(b);\
               SELECT count(*), sum(a), max(b) FROM t WHERE b LIKE 'row-%';";
    let (out, v) = same_both_ways(&dir, &[], &sqlite, &[":memory:", sql]);
    assert_eq!(out.stdout, "5000|12502500|row-05000\n");
    assert!(u(&v, "summary/allocations") > 100);
    // The sqlite3 shell is stripped; libsqlite3's exported functions have names.
    let names = all_names(&v);
    assert!(names.iter().any(|n| n.starts_with("sqlite3")), "no sqlite3* function from libsqlite3 in the report");
    // Its allocator wrapper is static: module+offset, never the exported function before it
    // (`sqlite3ApiExit`, 18 bytes long, 0xd4 bytes before the call).
    let top = &arr(&v, "direct/rows")[0];
    let top_name = top["function"].as_str().unwrap_or("");
    assert!(
        top_name.starts_with("libsqlite3.so") || top_name.starts_with("sqlite3Mem"),
        "top direct row of sqlite3 is {top_name}, an exported neighbour of its allocator"
    );
    assert_libc_symbolized(&dir, "real.hltrace");
}

#[test]
fn sqlite3_error_exit_status() {
    let dir = WorkDir::new("sqlite-error");
    let sqlite = tool("sqlite3");
    let (out, _v) = same_both_ways(&dir, &[], &sqlite, &[":memory:", "SELECT * FROM missing_table;"]);
    assert!(!out.status.success(), "sqlite3 fails on a missing table");
}

#[test]
fn gcc_compiles_a_file() {
    let dir = WorkDir::new("gcc");
    let gcc = tool("gcc");
    let src = examples_dir().join("widgets.c");
    let src = src.to_str().unwrap();
    let bare_obj = dir.join("bare.o");
    let traced_obj = dir.join("traced.o");
    let bare = run_bare(&dir, &gcc, &["-O2", "-c", src, "-o", bare_obj.to_str().unwrap()]).ok("gcc");
    let trace = dir.join("gcc.hltrace");
    let out =
        run_traced(&dir, &trace, &gcc, &["-O2", "-c", src, "-o", traced_obj.to_str().unwrap()]).ok("heaplens run gcc");
    assert_eq!(out.stdout, bare.stdout);
    assert_eq!(
        std::fs::read(&bare_obj).unwrap(),
        std::fs::read(&traced_obj).unwrap(),
        "gcc produced a different object file under heaplens"
    );
    let v = report(&dir, &trace);
    assert_consistent(&v);
    assert!(u(&v, "summary/allocations") > 100, "gcc driver allocations");
    assert!(at(&v, "process/exe").as_str().unwrap_or("").contains("gcc"), "profiled the driver");
    assert_libc_symbolized(&dir, "gcc.hltrace");

    // A compile error: same diagnostics, same exit status.
    let bad = dir.join("bad.c");
    std::fs::write(&bad, "int main(void) { return undeclared; }\n").unwrap();
    let (out, _) = same_both_ways(&dir, &[], &gcc, &["-c", bad.to_str().unwrap(), "-o", "/dev/null"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stderr.contains("undeclared"), "{}", out.show());
}

#[test]
fn git_commit_and_log() {
    let dir = WorkDir::new("git");
    let git = tool("git");
    let home = dir.join("home");
    std::fs::create_dir_all(&home).unwrap();
    let repo = dir.join("repo");
    let repo_s = repo.to_str().unwrap().to_string();
    let env: Vec<(&str, &str)> = vec![
        ("HOME", home.to_str().unwrap()),
        ("GIT_CONFIG_NOSYSTEM", "1"),
        ("GIT_AUTHOR_NAME", "A U Thor"),
        ("GIT_AUTHOR_EMAIL", "author@example.invalid"),
        ("GIT_AUTHOR_DATE", "2020-01-01T00:00:00Z"),
        ("GIT_COMMITTER_NAME", "C O Mitter"),
        ("GIT_COMMITTER_EMAIL", "committer@example.invalid"),
        ("GIT_COMMITTER_DATE", "2020-01-01T00:00:00Z"),
    ];
    run_bare_env(&dir, &env, &git, &["init", "-q", "-b", "main", &repo_s]).ok("git init");
    for i in 0..20 {
        std::fs::write(repo.join(format!("f{i}.txt")), format!("file {i}\n").repeat(i + 1)).unwrap();
    }
    run_bare_env(&dir, &env, &git, &["-C", &repo_s, "add", "."]).ok("git add");
    run_bare_env(&dir, &env, &git, &["-C", &repo_s, "commit", "-q", "-m", "first"]).ok("git commit");

    let (out, v) = same_both_ways(&dir, &env, &git, &["-C", &repo_s, "log", "--stat", "--format=%H %an %s"]);
    assert!(out.stdout.contains("A U Thor first"), "git log printed {}", out.stdout);
    assert!(u(&v, "summary/allocations") > 100, "git allocations");
    assert_libc_symbolized(&dir, "real.hltrace");

    let (out, _) = same_both_ways(&dir, &env, &git, &["--version"]);
    assert!(out.stdout.starts_with("git version"));
    let (out, _) = same_both_ways(&dir, &env, &git, &["-C", &repo_s, "cat-file", "-t", "nonexistent"]);
    assert!(!out.status.success(), "git cat-file of a missing object fails");
}

#[test]
fn stdin_passes_through() {
    let dir = WorkDir::new("stdin");
    let sqlite = tool("sqlite3");
    let sql = "CREATE TABLE t(x);\nINSERT INTO t VALUES (1),(2),(3);\nSELECT sum(x) FROM t;\n";
    let trace = dir.join("stdin.hltrace");
    let mut cmd = std::process::Command::new(heaplens_exe());
    cmd.arg("run").arg("-o").arg(&trace).arg("--").arg(&sqlite);
    cmd.current_dir(&dir.path)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().expect("start heaplens run sqlite3");
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(sql.as_bytes()).unwrap();
    }
    let out = wait_with_timeout(child, "heaplens run sqlite3 < sql").ok("heaplens run sqlite3");
    assert_eq!(out.stdout, "6\n", "sqlite3 read its SQL from stdin\n{}", out.show());
    let v = report(&dir, &trace);
    assert_consistent(&v);
}
