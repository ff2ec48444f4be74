//! A wrong name is worse than none: in a stripped library, whose `.dynsym` keeps only the
//! exported functions, a return address inside a static function is not named after the
//! exported function before it; the frame is `module+offset` of where the function starts
//! (by the unwind table), so its two call sites are one row. With the full symbol table the
//! static function has its own name.

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
    /* A second call site in the same function. */
    char *tag = malloc(8);
    if (tag && p) {
        memcpy(tag, p, 8);
        p[0] = tag[7];
    }
    free(tag);
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
    std::fs::copy(&lib, dir.join("libneighbour.full.so")).unwrap();
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

/// Where `nm` puts the function `name` in `lib`.
fn nm_address(dir: &WorkDir, lib: &str, name: &str) -> u64 {
    let mut cmd = Command::new("nm");
    cmd.arg(dir.join(lib));
    let out = run_cmd(cmd, &dir.path).ok("nm");
    let line = out.stdout.lines().find(|l| l.ends_with(&format!(" {name}"))).unwrap_or_else(|| panic!("nm: no {name}"));
    u64::from_str_radix(line.split_whitespace().next().unwrap(), 16).unwrap()
}

#[test]
fn stripped_library_static_function_is_module_offset() {
    let dir = WorkDir::new("symsize-stripped");
    let v = report_with(&dir, true);
    let rows = library_rows(&v);
    assert_eq!(rows.len(), 1, "one allocating function in the library, two call sites: {rows:?}");
    let (name, calls, bytes) = &rows[0];
    // Named by where the function starts: nm reads that from the copy not stripped.
    let start = nm_address(&dir, "libneighbour.full.so", "hidden_alloc");
    assert_eq!(name, &format!("libneighbour.so+0x{start:x}"), "the static allocator is named {name}");
    assert_eq!((*calls, *bytes), (2000, 108_000));
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
    assert_eq!(rows, vec![("hidden_alloc".to_string(), 2000, 108_000)]);
}
