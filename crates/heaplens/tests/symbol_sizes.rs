//! A wrong name is worse than none: in a stripped library, whose `.dynsym` keeps only the
//! exported functions, a return address inside a static function is not named after the
//! exported function before it; the frame is `module+offset`, as heaptrack shows it. With the
//! full symbol table the static function has its own name.

mod common;

use std::path::PathBuf;
use std::process::Command;

use common::*;
use serde_json::Value;

/// A library whose allocating function is static and sits right after a tiny exported one
/// (`-fno-toplevel-reorder` keeps the order of the source).
const LIBRARY: &str = r#"
#include <stdlib.h>
#include <string.h>

void *neighbour_make(int n);

int tiny_export(int x) { return x * 3 + 1; }

__attribute__((noinline)) static void *hidden_alloc(size_t n) {
    char *p = malloc(n);
    if (p) memset(p, 0x5a, n);
    return p;
}

void *neighbour_make(int n) {
    void *last = 0;
    for (int i = 0; i < n; i++) {
        void *p = hidden_alloc(100);
        free(last);
        last = p;
    }
    return last;
}
"#;

const PROGRAM: &str = r#"
#include <stdio.h>
#include <stdlib.h>
void *neighbour_make(int n);
int main(void) {
    void *p = neighbour_make(1000);
    printf("neighbour: made=1000 bytes=100000\n");
    free(p);
    return 0;
}
"#;

/// Builds the library (stripped to `.dynsym` when `strip`), the program linked to it, runs it
/// under heaplens and returns the report.
fn report_with(dir: &WorkDir, strip: bool) -> Value {
    std::fs::write(dir.join("neighbour.c"), LIBRARY).unwrap();
    std::fs::write(dir.join("main.c"), PROGRAM).unwrap();
    let lib = dir.join("libneighbour.so");
    let gcc = |args: &[&str]| {
        let mut cmd = Command::new("gcc");
        cmd.args(args);
        let o = run_cmd(cmd, &dir.path);
        assert!(o.status.success(), "gcc {args:?}\n{}", o.show());
    };
    gcc(&["-O2", "-fPIC", "-shared", "-fno-toplevel-reorder", "-o", "libneighbour.so", "neighbour.c"]);
    if strip {
        let mut cmd = Command::new("strip");
        cmd.arg("--strip-all").arg(&lib);
        run_cmd(cmd, &dir.path).ok("strip");
    }
    gcc(&["-O2", "-o", "main", "main.c", "-L.", "-lneighbour", "-Wl,-rpath,$ORIGIN"]);
    let trace = dir.join("n.hltrace");
    let exe: PathBuf = dir.join("main");
    let out = run_traced(dir, &trace, &exe, &[] as &[&str]).ok("main under heaplens");
    assert!(out.stdout.contains("made=1000"), "{}", out.show());
    report(dir, &trace)
}

/// The direct rows of the library's module: `(function, calls, bytes)`.
fn library_rows(v: &Value) -> Vec<(String, u64, u64)> {
    arr(v, "direct/rows")
        .iter()
        .filter(|r| r["module"].as_str().is_some_and(|m| m.contains("libneighbour")))
        .map(|r| (r["function"].as_str().unwrap_or("").to_string(), u(r, "calls"), u(r, "bytes")))
        .collect()
}

#[test]
fn stripped_library_static_function_is_module_offset() {
    let dir = WorkDir::new("symsize-stripped");
    let v = report_with(&dir, true);
    let rows = library_rows(&v);
    assert_eq!(rows.len(), 1, "one allocating site in the library: {rows:?}");
    let (name, calls, bytes) = &rows[0];
    assert!(name.starts_with("libneighbour.so+0x"), "the static allocator is named {name}, not module+offset");
    assert_eq!((*calls, *bytes), (1000, 100_000));
    let names = all_names(&v);
    assert!(!names.iter().any(|n| n == "tiny_export"), "the exported neighbour was named: {names:?}");
    // Its caller is exported and covers its own return address: it keeps its name.
    assert!(graph_entry(&v, "neighbour_make").is_some(), "neighbour_make is named: {names:?}");
}

#[test]
fn unstripped_library_names_the_static_function() {
    let dir = WorkDir::new("symsize-full");
    let v = report_with(&dir, false);
    let rows = library_rows(&v);
    assert_eq!(rows, vec![("hidden_alloc".to_string(), 1000, 100_000)]);
}
