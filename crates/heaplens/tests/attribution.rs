//! Attribution to the program's own code: every allocation is charged to the innermost frame
//! of the program, past the C and C++ runtimes and Rust's standard library, with the library
//! function it came through; `--skip` passes over the program's own wrappers, `--raw-frames`
//! charges the innermost frame. Truth programs print what each of their functions allocates.

mod common;

use common::*;
use serde_json::Value;

/// `(fn, allocs, bytes, through a library function)` from the `own:` lines a truth program
/// prints (`direct=1`: it calls the allocator itself).
fn own_truth(stdout: &str) -> Vec<(String, u64, u64, bool)> {
    truths(stdout, "own")
        .into_iter()
        .filter(|t| t.contains_key("fn"))
        .map(|t| (t["fn"].clone(), num(&t, "allocs"), num(&t, "bytes"), !t.contains_key("direct")))
        .collect()
}

/// The direct row whose function name starts with `name` (C++ names carry their parameters).
fn row<'a>(v: &'a Value, name: &str) -> &'a Value {
    let rows = arr(v, "direct/rows");
    let found: Vec<&Value> =
        rows.iter().filter(|r| r["function"].as_str().is_some_and(|f| f.starts_with(name))).collect();
    assert_eq!(
        found.len(),
        1,
        "one direct row for {name}; rows: {:?}",
        rows.iter().map(|r| (&r["function"], &r["bytes"])).collect::<Vec<_>>()
    );
    found[0]
}

fn check_truth(v: &Value, truth: &[(String, u64, u64, bool)]) {
    assert!(truth.len() >= 5, "the program printed its truth: {truth:?}");
    for (f, allocs, bytes, through_library) in truth {
        let r = row(v, f);
        assert_eq!((u(r, "calls"), u(r, "bytes")), (*allocs, *bytes), "{f}: {r}");
        if *through_library {
            assert!(r["via"].is_string(), "{f} says which library function it came through: {r}");
        }
    }
}

#[test]
fn cxx_containers_are_charged_to_the_programs_functions() {
    let dir = WorkDir::new("attr-cxx");
    // Unoptimized: every library function a frame of its own, named by its linkage name or,
    // for some of libstdc++'s templates (std::function's _M_create), by the symbol table.
    let exe = compile(&dir, "g++", "own_code.cpp", "own_code0", &["-O0", "-g"]);
    let trace = dir.join("own0.hltrace");
    let out = run_traced(&dir, &trace, &exe, &[] as &[&str]).ok("own_code -O0 under heaplens");
    check_truth(&report_with(&dir, &trace, &[]), &own_truth(&out.stdout));
    // Optimized: library functions inlined into the program's, some with short names only
    // (`_M_create<…>`), known by their source file.
    let exe = compile(&dir, "g++", "own_code.cpp", "own_code", &["-O2", "-g"]);
    let trace = dir.join("own.hltrace");
    let out = run_traced(&dir, &trace, &exe, &[] as &[&str]).ok("own_code under heaplens");
    let v = report_with(&dir, &trace, &[]);
    check_truth(&v, &own_truth(&out.stdout));
    let via = row(&v, "build_map")["via"].as_str().unwrap().to_string();
    assert!(via.starts_with("std::map<"), "build_map came through std::map, not {via}");
    // No row names the standard library's internals.
    for r in arr(&v, "direct/rows") {
        let f = r["function"].as_str().unwrap();
        assert!(!f.starts_with("std::") && !f.contains("_M_") && !f.starts_with("_ZSt"), "library row {f}");
    }
    // --raw-frames charges the innermost frame: the library's.
    let raw = report_with(&dir, &trace, &["--raw-frames"]);
    let names: Vec<&str> = arr(&raw, "direct/rows").iter().filter_map(|r| r["function"].as_str()).collect();
    assert!(names.iter().any(|f| f.contains("_M_")), "raw frames name libstdc++'s internals: {names:?}");
    assert!(!names.iter().any(|f| f.starts_with("build_map")), "raw frames: {names:?}");
}

#[test]
fn rust_collections_are_charged_to_the_programs_functions() {
    let dir = WorkDir::new("attr-rust");
    let exe = compile_rust(&dir, "own_code.rs", "own_code");
    let trace = dir.join("own.hltrace");
    let out = run_traced(&dir, &trace, &exe, &[] as &[&str]).ok("own_code under heaplens");
    // The program counts through its own global allocator: a wrapper of its own to skip.
    let v = report_with(&dir, &trace, &["--skip", "^<own_code::Counting"]);
    check_truth(&v, &own_truth(&out.stdout));
    for r in arr(&v, "direct/rows") {
        let f = r["function"].as_str().unwrap();
        assert!(!f.starts_with("alloc::") && !f.starts_with("hashbrown::") && !f.starts_with("<alloc::"), "{f}");
    }
    // The leak of main's last frame is not cut to alloc:: frames: every leak path names main.
    for l in arr(&v, "leaks") {
        let path = leak_path(l);
        assert!(!path.last().is_some_and(|f| f.starts_with("alloc::")), "leak path ends in alloc: {path:?}");
    }
}

#[test]
fn skip_passes_over_the_programs_own_wrapper() {
    let dir = WorkDir::new("attr-skip");
    let exe = compile_c(&dir, "xmalloc.c", &[]);
    let trace = dir.join("x.hltrace");
    run_traced(&dir, &trace, &exe, &[] as &[&str]).ok("xmalloc under heaplens");
    let v = report_with(&dir, &trace, &[]);
    assert_eq!((u(row(&v, "xmalloc"), "calls"), u(row(&v, "xmalloc"), "bytes")), (8, 500));
    let check = |v: &Value| {
        assert_eq!((u(row(v, "load_config"), "calls"), u(row(v, "load_config"), "bytes")), (3, 300));
        assert_eq!((u(row(v, "parse_lines"), "calls"), u(row(v, "parse_lines"), "bytes")), (5, 200));
        assert_eq!(row(v, "load_config")["via"], "xmalloc");
        assert!(direct_rows(v, "xmalloc").is_empty());
    };
    check(&report_with(&dir, &trace, &["--skip", "^xmalloc$"]));
    // Built as C++, its functions print with their parameters: the same pattern skips
    // `xmalloc(unsigned long)`.
    let cxx = compile(&dir, "g++", "xmalloc.c", "xmalloc_cxx", &["-x", "c++", "-O2", "-g"]);
    let cxx_trace = dir.join("x-cxx.hltrace");
    run_traced(&dir, &cxx_trace, &cxx, &[] as &[&str]).ok("xmalloc (C++) under heaplens");
    let v = report_with(&dir, &cxx_trace, &["--skip", "^xmalloc$"]);
    assert!(direct_rows(&v, "xmalloc(unsigned long)").is_empty(), "{:#}", at(&v, "direct"));
    assert_eq!(u(row(&v, "load_config(void**)"), "bytes"), 300, "{:#}", at(&v, "direct"));
    assert_eq!(u(row(&v, "parse_lines(void**)"), "bytes"), 200, "{:#}", at(&v, "direct"));
    let file = dir.join("skip.txt");
    std::fs::write(&file, "# our wrappers\n\n^xmalloc$\n").unwrap();
    check(&report_with(&dir, &trace, &["--skip-file", file.to_str().unwrap()]));
    // A pattern that is not a regular expression is one clear error.
    let bad = heaplens(&dir, &["report", trace.to_str().unwrap(), "--skip", "(unclosed"]);
    assert!(!bad.status.success());
    // The pictures name their call sites past the same wrappers: the timeline's holders at the
    // peak (all blocks are held to the end), 300 bytes by load_config and 200 by parse_lines.
    let t = trace.to_str().unwrap();
    let png = dir.join("t.png");
    let holders = |extra: &[&str]| -> Vec<String> {
        let mut args = vec!["timeline", t, "-o", png.to_str().unwrap()];
        args.extend_from_slice(extra);
        let out = heaplens(&dir, &args).ok("heaplens timeline");
        out.stderr
            .lines()
            .filter(|l| l.contains(" 300 ") || l.contains(" 200 "))
            .map(|l| l.trim().to_string())
            .collect()
    };
    let raw = holders(&[]);
    assert_eq!(raw.len(), 2, "{raw:?}");
    assert!(raw.iter().all(|l| l.ends_with("> xmalloc")), "{raw:?}");
    let past = holders(&["--skip", "^xmalloc$"]);
    assert!(past.iter().any(|l| l.ends_with("300  main > load_config")), "{past:?}");
    assert!(past.iter().any(|l| l.ends_with("200  main > parse_lines")), "{past:?}");
}

#[test]
fn churn_is_charged_to_churn_cpp() {
    let dir = WorkDir::new("attr-churn");
    let (_exe, trace) = traced_churn(&dir, &["1", "20000"]);
    let v = report_with(&dir, &trace, &[]);
    let top = &arr(&v, "direct/rows")[0];
    assert_eq!(top["module"], "churn", "the top row is a function of churn.cpp: {top}");
    assert!(u(top, "bytes") * 10 >= u(&v, "direct/total/bytes") * 9, "{top}");
}

#[test]
fn runtime_buffers_are_not_leaks() {
    let dir = WorkDir::new("attr-suppress");
    let exe = compile_c(&dir, "runtime_buffers.c", &["-pthread"]);
    let trace = dir.join("rb.hltrace");
    // stdout is a pipe here: stdio allocates its buffer, never freed by design.
    let out = run_traced(&dir, &trace, &exe, &[] as &[&str]).ok("runtime_buffers under heaplens");
    let t = truth(&out.stdout, "runtime_buffers");
    let v = report_with(&dir, &trace, &[]);
    assert_consistent(&v);
    let leaked = (u(&v, "summary/leaked_objects"), u(&v, "summary/leaked_bytes"));
    assert_eq!(leaked, (num(&t, "leaked_objects"), num(&t, "leaked_bytes")), "{:#}", at(&v, "summary"));
    let rows = arr(&v, "suppressions");
    let stdio = rows.iter().find(|r| r["pattern"] == "_IO_file_doallocate").expect("the stdio buffer is suppressed");
    assert_eq!((stdio["origin"].as_str(), u(stdio, "blocks")), (Some("runtime"), 1));
    assert!(u(stdio, "bytes") >= 1024, "{stdio}");
    let paths: Vec<Vec<String>> = arr(&v, "leaks").iter().map(leak_path).collect();
    assert_eq!(paths, vec![vec!["main".to_string(), "make_leak".to_string()]]);
    // The lookups' row came through several C library functions: it names the one most
    // bytes came through and counts the others.
    let lookups = direct_rows(&v, "lookups");
    assert!(lookups.len() == 1 && lookups[0]["via"].is_string() && u(lookups[0], "via_others") >= 4, "{lookups:?}");
    // The C library's lookups each keep a buffer, named for what it is.
    // getaddrinfo may find no interface to answer on a machine without a network.
    assert!(num(&t, "lookups") >= 4, "the lookups answered: {t:?}");
    let what: Vec<&str> = rows.iter().filter_map(|r| r["what"].as_str()).collect();
    for kept in ["dlerror buffer", "passwd lookup buffer", "group lookup buffer", "locale data", "time zone data"] {
        assert!(what.contains(&kept), "{kept} not among {what:?}");
    }

    // A suppressions file moves the program's leak out too, and says what matched.
    let file = dir.join("lsan.supp");
    std::fs::write(&file, "# known\nleak:^make_leak$\n").unwrap();
    let s = report_with(&dir, &trace, &["--suppressions", file.to_str().unwrap()]);
    assert_consistent(&s);
    assert_eq!((u(&s, "summary/leaked_objects"), u(&s, "summary/leaked_bytes")), (0, 0));
    let user = arr(&s, "suppressions").iter().find(|r| r["origin"] == "user").expect("the user's suppression");
    assert_eq!((user["pattern"].as_str(), u(user, "blocks"), u(user, "bytes")), (Some("^make_leak$"), 3, 192));
    let text = heaplens(&dir, &["report", trace.to_str().unwrap(), "--suppressions", file.to_str().unwrap()]);
    let text = text.ok("text report").stdout;
    assert!(text.contains("user:^make_leak$"), "{text}");
    assert!(text.contains("no leaks: only suppressed blocks"), "{text}");
    // --leaks alone leaves the suppressed blocks out.
    let only = heaplens(&dir, &["report", trace.to_str().unwrap(), "--leaks"]).ok("--leaks").stdout;
    assert!(!only.contains("SUPPRESSED") && only.contains("make_leak"), "{only}");
    // A source file's name, as LeakSanitizer matches it.
    std::fs::write(&file, "leak:runtime_buffers.c\n").unwrap();
    let s = report_with(&dir, &trace, &["--suppressions", file.to_str().unwrap()]);
    assert_eq!((u(&s, "summary/leaked_objects"), u(&s, "summary/leaked_bytes")), (0, 0), "{:#}", at(&s, "summary"));
    let user = arr(&s, "suppressions").iter().find(|r| r["origin"] == "user").expect("the user's suppression");
    assert_eq!((u(user, "blocks"), u(user, "bytes")), (3, 192), "{user}");
}

#[test]
fn c_functions_named_like_itanium_codes_keep_their_names() {
    let dir = WorkDir::new("c-short-names");
    // `i`, `d`, `v`, `St`, `Sa`, `Dn` are also the Itanium ABI's codes for int, double, void,
    // std::, std::allocator and std::nullptr_t: a demangler given them returns those.
    let src = dir.join("names.c");
    let mut c = String::from("#include <stdlib.h>\nvoid *keep[8];\n");
    let names = ["i", "d", "v", "St", "Sa", "Dn"];
    for (k, n) in names.iter().enumerate() {
        c.push_str(&format!("__attribute__((noinline)) void {n}(void) {{ keep[{k}] = malloc({}); }}\n", 10 * (k + 1)));
    }
    c.push_str("int main(void) {\n");
    for n in names {
        c.push_str(&format!("  {n}();\n"));
    }
    c.push_str("  return 0;\n}\n");
    std::fs::write(&src, c).unwrap();
    for (flags, what) in [(&["-O1", "-g"][..], "with DWARF"), (&["-O1"][..], "symbol table only")] {
        let exe = compile(&dir, "gcc", src.to_str().unwrap(), "names", flags);
        let trace = dir.join("names.hltrace");
        run_traced(&dir, &trace, &exe, &[] as &[&str]).ok("names");
        let v = report(&dir, &trace);
        for (k, n) in names.iter().enumerate() {
            let r = row(&v, n);
            assert_eq!(at(r, "function"), *n, "{what}: {r}");
            assert_eq!(u(r, "bytes"), 10 * (k as u64 + 1), "{what}: {r}");
        }
    }
}

#[test]
fn inlined_functions_named_briefly_by_dwarf_keep_their_scopes() {
    let dir = WorkDir::new("inlined-scopes");
    // -O2 inlines two methods named `make` (of classes in an anonymous namespace) and two
    // lambdas' `operator()`: DWARF names them only by their short name, and no symbol names an
    // inlined frame. Each is its own row with its own bytes, not one `make` or `operator()`.
    let exe = compile(&dir, "g++", "inlined_scopes.cpp", "inlined_scopes", &["-O2", "-g"]);
    let trace = dir.join("scopes.hltrace");
    let out = run_traced(&dir, &trace, &exe, &[] as &[&str]).ok("inlined_scopes under heaplens");
    let t = truth(&out.stdout, "inlined_scopes");
    let v = report_with(&dir, &trace, &[]);
    let bytes = |name: &str| {
        let rows = direct_rows(&v, name);
        assert_eq!(rows.len(), 1, "one row of {name}: {:#}", at(&v, "direct"));
        u(rows[0], "bytes")
    };
    assert_eq!(bytes("(anonymous namespace)::Parser::make"), num(&t, "parser"));
    assert_eq!(bytes("(anonymous namespace)::Renderer::make"), num(&t, "renderer"));
    assert_eq!(bytes("parse()::{lambda}::operator()"), num(&t, "parse_lambda"));
    assert_eq!(bytes("render()::{lambda}::operator()"), num(&t, "render_lambda"));
    assert!(direct_rows(&v, "make").is_empty() && direct_rows(&v, "operator()").is_empty(), "{:#}", at(&v, "direct"));
}

#[test]
fn an_executable_deleted_while_it_runs_is_symbolized() {
    let dir = WorkDir::new("deleted-exe");
    // Its file removed (an upgrade replacing a server's binary): symbolized while it runs,
    // through the process (`/proc/PID/exe`), so the report names its function afterwards.
    let exe = compile_c(&dir, "deleted_exe.c", &[]);
    let trace = dir.join("deleted.hltrace");
    let out = run_traced(&dir, &trace, &exe, &[] as &[&str]).ok("deleted_exe under heaplens");
    let t = truth(&out.stdout, "deleted_exe");
    assert!(!exe.exists(), "the program removed itself");
    let v = report_with(&dir, &trace, &[]);
    let rows = direct_rows(&v, "allocate_after_removal");
    assert_eq!(rows.len(), 1, "{:#}", at(&v, "direct"));
    assert_eq!((u(rows[0], "calls"), u(rows[0], "bytes")), (num(&t, "allocs"), num(&t, "bytes")));
}

#[test]
fn a_std_thread_starts_at_the_programs_own_function() {
    let dir = WorkDir::new("std-thread-root");
    // std::thread runs its function through libstdc++'s trampoline (unnamed where libstdc++
    // has no symbols for it): a runtime root, cut as start_thread is, not the call graph's top.
    let source = "#include <thread>\n#include <cstdlib>\nvoid *volatile sink;\n\
         __attribute__((noinline)) void worker(int n) { for (int i = 0; i < n; i++) sink = malloc(100); }\n\
         int main() { std::thread a(worker, 10), b(worker, 20); a.join(); b.join(); return 0; }\n";
    let exe = compile_source(&dir, "g++", "thr.cpp", source, "thr", &["-O2", "-g", "-pthread"]);
    let trace = dir.join("thr.hltrace");
    run_traced(&dir, &trace, &exe, &[] as &[&str]).ok("std::thread program");
    let v = report_with(&dir, &trace, &[]);
    let graph = arr(&v, "call_graph");
    let worker = graph.iter().find(|e| e["name"] == "worker(int)").unwrap_or_else(|| panic!("{graph:#?}"));
    assert_eq!(u(worker, "inclusive_bytes"), 3000, "{worker}");
    for e in graph {
        let name = e["name"].as_str().unwrap_or("");
        assert!(!name.starts_with("libstdc++") && !name.contains("execute_native_thread_routine"), "{e}");
    }
}
