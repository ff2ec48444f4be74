//! A program's own pools reported through `include/heaplens.h`: the arena of reference 004
//! (`examples/arena.c`) shows its exact bytes per call site with the pool as the innermost
//! frame, a reset releases the pool's blocks, exports carry the pools, and the program runs the
//! same with and without heaplens.

mod common;

use std::collections::BTreeSet;
use std::process::Command;

use common::*;

fn arena(dir: &WorkDir) -> std::path::PathBuf {
    let include = examples_dir().join("../include");
    let exe = compile(dir, "gcc", "arena.c", "arena", &["-O2", "-g", "-I", include.to_str().unwrap()]);
    exe
}

#[test]
fn the_arena_of_reference_004_reports_its_bytes_per_call_site() {
    let dir = WorkDir::new("pools-arena");
    let exe = arena(&dir);
    let bare = run_bare::<&str>(&dir, &exe, &[]).ok("bare run (no heaplens: the calls do nothing)");
    let trace = dir.join("a.hltrace");
    let out = run_traced::<&str>(&dir, &trace, &exe, &[]).ok("run under heaplens");
    assert_eq!(out.stdout, bare.stdout);
    let t = truth(&out.stdout, "arena");
    let v = report(&dir, &trace);

    let pool = |path: &[&str]| -> Vec<String> {
        path.iter().map(|s| s.to_string()).chain(["arena_alloc".into(), "[pool] main arena".into()]).collect()
    };
    let mut got: Vec<(Vec<String>, u64, u64)> = arr(&v, "leaks")
        .iter()
        .filter(|r| leak_path(r).last().is_some_and(|f| f.starts_with("[pool]")))
        .map(|r| (leak_path(r), u(r, "allocs"), u(r, "bytes")))
        .collect();
    got.sort();
    let mut want = vec![
        (pool(&["main", "a"]), num(&t, "a_blocks"), num(&t, "a_bytes")),
        (pool(&["main", "a", "b"]), num(&t, "a_b_blocks"), num(&t, "a_b_bytes")),
        (pool(&["main", "b"]), num(&t, "main_b_blocks"), num(&t, "main_b_bytes")),
    ];
    want.sort();
    assert_eq!(got, want, "the main arena's blocks by call site; the scratch arena's were all reset");

    let (scratch, resets) = (num(&t, "scratch_blocks"), num(&t, "resets"));
    assert_eq!(u(&v, "summary/calls_by_kind/heaplens_alloc"), want.iter().map(|w| w.1).sum::<u64>() + scratch);
    assert_eq!(u(&v, "summary/frees_by_kind/heaplens_pool_reset"), scratch, "{resets} resets released every block");
    // The pools are allocators of their own in the direct allocation table.
    let direct: BTreeSet<(String, u64)> = arr(&v, "direct/rows")
        .iter()
        .filter(|r| r["function"].as_str().is_some_and(|n| n.starts_with("[pool]")))
        .map(|r| (r["function"].as_str().unwrap().to_string(), u(r, "bytes")))
        .collect();
    let arena_bytes = num(&t, "a_bytes") + num(&t, "a_b_bytes") + num(&t, "main_b_bytes");
    assert_eq!(
        direct,
        BTreeSet::from([
            ("[pool] main arena".into(), arena_bytes),
            ("[pool] scratch".into(), num(&t, "scratch_bytes"))
        ])
    );

    // Folded stacks (what flame graphs and speedscope read) carry the pool frames.
    let folded = dir.join("a.folded");
    heaplens(&dir, &["export", "--format", "collapsed", trace.to_str().unwrap(), "-o", folded.to_str().unwrap()])
        .ok("export collapsed");
    let text = std::fs::read_to_string(&folded).unwrap();
    let line = |stack: &str| {
        text.lines().find_map(|l| l.strip_prefix(&format!("{stack} "))).map(|n| n.parse::<u64>().unwrap())
    };
    assert_eq!(line("main;b;arena_alloc;[pool] main arena"), Some(num(&t, "main_b_bytes")), "{text}");
    assert_eq!(line("main;arena_alloc;[pool] scratch"), Some(num(&t, "scratch_bytes")), "{text}");
}

#[test]
fn the_header_compiles_as_c_and_cxx_without_warnings() {
    let dir = WorkDir::new("pools-header");
    let src = dir.join("use.c");
    std::fs::write(
        &src,
        "#include \"heaplens.h\"\nstatic char pool[64];\nint main(void) {\n  heaplens_pool_name(pool, \"p\");\n  heaplens_alloc(pool, pool + 8, 16);\n  heaplens_free(pool, pool + 8);\n  heaplens_pool_reset(pool);\n  return 0;\n}\n",
    )
    .unwrap();
    let include = examples_dir().join("../include");
    for (cc, lang) in [("gcc", "c"), ("g++", "c++")] {
        let mut cmd = Command::new(cc);
        cmd.args(["-x", lang, "-Wall", "-Wextra", "-Werror", "-pedantic", "-O2", "-I"]).arg(&include);
        cmd.arg(&src).arg("-o").arg(dir.join(format!("use-{lang}")));
        let o = run_cmd(cmd, &dir.path);
        assert!(o.status.success(), "{cc}: {}", o.show());
        run_bare::<&str>(&dir, dir.join(format!("use-{lang}")), &[]).ok("runs without heaplens");
    }
}
