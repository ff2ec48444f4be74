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

/// A program that keeps every processor busy gets its events written as rows, and then no
/// symbols are embedded (symbolizing would take the program's time): the report symbolizes
/// from the module files, and names the same functions.
#[test]
fn busy_programs_leave_the_symbols_to_the_report() {
    let dir = WorkDir::new("embedded-symbols-rows");
    let so = compile(&dir, "gcc", "plugin.c", "libplugin.so", &["-O2", "-g", "-fPIC", "-shared"]);
    let exe = compile_c(&dir, "dlopen_main.c", &["-ldl"]);
    let args = [so.to_str().unwrap(), "1000", "10"];
    let (rows, columns) = (dir.join("rows.hltrace"), dir.join("columns.hltrace"));
    run_traced_env(&dir, &rows, &[("HEAPLENS_COLUMNS", "0")], &exe, &args).ok("heaplens run (rows)");
    run_traced_env(&dir, &columns, &[("HEAPLENS_COLUMNS", "1")], &exe, &args).ok("heaplens run (columns)");
    let kinds = |t: &std::path::Path| blocks(&std::fs::read(t).unwrap()).iter().map(|b| b.kind).collect::<Vec<_>>();
    let (symbols, events, event_columns) = (11, 4, 10);
    assert!(kinds(&rows).contains(&events) && !kinds(&rows).contains(&symbols), "{:?}", kinds(&rows));
    assert!(kinds(&columns).contains(&event_columns) && kinds(&columns).contains(&symbols), "{:?}", kinds(&columns));
    let (from_files, embedded) = (report(&dir, &rows), report(&dir, &columns));
    assert!(
        direct_functions(&from_files).iter().any(|f| f == "plugin_alloc"),
        "{:#?}",
        arr(&from_files, "direct/rows")
    );
    assert_eq!(direct_functions(&from_files), direct_functions(&embedded));
}
