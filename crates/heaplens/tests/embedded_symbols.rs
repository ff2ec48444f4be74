//! `heaplens run` symbolizes the stacks while the program runs and appends the symbols to the
//! trace: a report then gives the same names as symbolizing from the module files would, and
//! still gives them once those files are gone.

mod common;

use common::*;
use serde_json::Value;

/// The report without the trace's own path.
fn without_path(mut v: Value) -> Value {
    v["trace"]["path"] = Value::Null;
    v
}

/// Functions of the direct allocation table.
fn direct_functions(v: &Value) -> Vec<String> {
    arr(v, "direct/rows").iter().filter_map(|r| r["function"].as_str().map(String::from)).collect()
}

#[test]
fn symbols_travel_with_the_trace() {
    let dir = WorkDir::new("embedded-symbols");
    let so = compile(&dir, "gcc", "plugin.c", "libplugin.so", &["-O2", "-g", "-fPIC", "-shared"]);
    let exe = compile_c(&dir, "dlopen_main.c", &["-ldl"]);
    let trace = dir.join("plugin.hltrace");
    run_traced(&dir, &trace, &exe, &[so.to_str().unwrap(), "1000", "10"]).ok("heaplens run");

    // The same trace without the symbols: cut where the index block says they start.
    let bytes = std::fs::read(&trace).unwrap();
    let at = u64::from_le_bytes(bytes[bytes.len() - 8..].try_into().unwrap()) as usize;
    assert!(at > 0 && at < bytes.len(), "the trace ends with a symbols index");
    let bare = dir.join("plugin-no-symbols.hltrace");
    std::fs::write(&bare, &bytes[..at]).unwrap();

    let embedded = without_path(report(&dir, &trace));
    let resolved_now = without_path(report(&dir, &bare));
    assert_eq!(embedded, resolved_now, "embedded symbols differ from symbolizing at report time");
    assert!(direct_functions(&embedded).iter().any(|f| f == "plugin_alloc"), "{:#?}", arr(&embedded, "direct/rows"));

    // Without the program's files, only the embedded symbols still name its functions.
    std::fs::remove_file(&so).unwrap();
    std::fs::remove_file(&exe).unwrap();
    assert_eq!(without_path(report(&dir, &trace)), embedded, "the report needed the module files");
    let lost = report(&dir, &bare);
    assert!(!direct_functions(&lost).iter().any(|f| f == "plugin_alloc"), "plugin_alloc named without its file");
    assert!(!arr(&lost, "trace/symbol_warnings").is_empty(), "no warning about the missing files");
}
