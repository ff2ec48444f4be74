//! Debug information found where distributions put it, and attribution by source line:
//! `heaplens report --lines` on the widgets program, built with its DWARF in the binary and
//! split into a separate file named by `.gnu_debuglink`.

mod common;

use std::process::Command;

use common::*;
use serde_json::Value;

/// The 1-based line of `examples/widgets.c` holding `needle`, after the line holding `after`.
fn line_of(after: &str, needle: &str) -> usize {
    let src = std::fs::read_to_string(examples_dir().join("widgets.c")).expect("widgets.c");
    let start = src.lines().position(|l| l.contains(after)).expect("anchor line");
    start + 1 + src.lines().skip(start).position(|l| l.contains(needle)).expect("needle line")
}

fn report_lines(dir: &WorkDir, exe: &std::path::Path) -> (Value, u64) {
    let trace = dir.join("w.hltrace");
    let out = run_traced(dir, &trace, exe, &["7"]).ok("heaplens run");
    let made = num(&truth(&out.stdout, "widgets"), "made");
    let args = ["report".as_ref(), trace.as_os_str(), "--lines".as_ref(), "--format".as_ref(), "json".as_ref()];
    let out = heaplens(dir, &args).ok("heaplens report --lines");
    (serde_json::from_str(&out.stdout).expect("report JSON"), made)
}

fn check_lines(v: &Value, made: u64) {
    let malloc_line = line_of("widget *make_widget(void)", "malloc(sizeof(widget))");
    let direct = format!("make_widget@widgets.c:{malloc_line}");
    let rows = direct_rows(v, &direct);
    assert_eq!(
        rows.len(),
        1,
        "no direct row {direct}: {:?}",
        arr(v, "direct/rows").iter().map(|r| &r["function"]).collect::<Vec<_>>()
    );
    assert_eq!(rows[0]["calls"].as_u64(), Some(made), "{direct}");
    // The red widgets' line in make_red_widget is the caller of the leaked blocks.
    let red_line = line_of("make_red_widget(void)", "make_widget()");
    let red = format!("make_red_widget@widgets.c:{red_line}");
    assert!(graph_entry(v, &red).is_some(), "no call graph entry {red}");
    let leak = &arr(v, "leaks")[0];
    assert!(leak_path(leak).contains(&red), "leak path {:?} lacks {red}", leak_path(leak));
}

#[test]
fn report_by_source_line() {
    let dir = WorkDir::new("lines");
    let exe = compile_c(&dir, "widgets.c", &[]);
    let (v, made) = report_lines(&dir, &exe);
    check_lines(&v, made);
}

#[test]
fn separate_debug_file_through_debuglink() {
    let dir = WorkDir::new("debuglink");
    let exe = compile_c(&dir, "widgets.c", &[]);
    let debug = dir.join("widgets.debug");
    let run = |args: &[&std::ffi::OsStr]| {
        let mut c = Command::new(args[0]);
        c.args(&args[1..]);
        run_cmd(c, &dir.path).ok("objcopy/strip")
    };
    run(&["objcopy".as_ref(), "--only-keep-debug".as_ref(), exe.as_os_str(), debug.as_os_str()]);
    run(&["strip".as_ref(), "--strip-debug".as_ref(), exe.as_os_str()]);
    let link = format!("--add-gnu-debuglink={}", debug.display());
    run(&["objcopy".as_ref(), link.as_ref(), exe.as_os_str()]);
    let sections = run(&["readelf".as_ref(), "-S".as_ref(), exe.as_os_str()]).stdout;
    assert!(
        !sections.contains(".debug_info") && sections.contains(".gnu_debuglink"),
        "the binary kept its DWARF\n{sections}"
    );
    // Lines can only come from the separate file.
    let (v, made) = report_lines(&dir, &exe);
    check_lines(&v, made);
}

/// A sampled trace is symbolized when reported, from the module files: a program rebuilt since
/// the run (another build id) or removed is named as such, and its frames are left as
/// `module+0xOFFSET` rather than given the new binary's names.
#[test]
fn a_module_changed_or_gone_since_the_run_is_named() {
    let dir = WorkDir::new("module-changed");
    let exe = compile_c(&dir, "widgets.c", &[]);
    let trace = dir.join("w.hltrace");
    let args = [
        "run".as_ref(),
        "--sample-rate".as_ref(),
        "1".as_ref(),
        "-o".as_ref(),
        trace.as_os_str(),
        "--".as_ref(),
        exe.as_os_str(),
        "50".as_ref(),
    ];
    heaplens(&dir, &args).ok("heaplens run --sample-rate 1");
    let warnings = |v: &Value| -> Vec<String> {
        arr(v, "trace/symbol_warnings").iter().map(|w| w.as_str().unwrap_or_default().to_string()).collect()
    };
    let v = report(&dir, &trace);
    assert!(direct_rows(&v, "make_widget").len() == 1, "symbolized while the binary is unchanged");

    // Rebuilt at -O0: a different build id.
    compile(&dir, "gcc", "widgets.c", "widgets", &["-O0", "-g"]);
    let v = report(&dir, &trace);
    let w = warnings(&v);
    assert!(w.iter().any(|w| w.contains("changed since the run")), "{w:?}");
    assert!(all_names(&v).iter().all(|n| !n.contains("make_")), "names from the rebuilt binary: {:?}", all_names(&v));
    assert!(arr(&v, "direct/rows").iter().any(|r| r["function"].as_str().is_some_and(|f| f.starts_with("widgets+0x"))));

    std::fs::remove_file(&exe).unwrap();
    let v = report(&dir, &trace);
    let w = warnings(&v);
    assert!(w.iter().any(|w| w.contains("is gone since the run")), "{w:?}");
    assert!(arr(&v, "direct/rows").iter().any(|r| r["function"].as_str().is_some_and(|f| f.starts_with("widgets+0x"))));
}
