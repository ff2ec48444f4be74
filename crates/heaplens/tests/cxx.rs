//! `heaplens report --cxx`: mtrace++'s tables for a C++ program whose classes allocate in each
//! invocation scenario a known number of times with sizes of their own
//! (`examples/cxx_scenarios.cpp`, built -O2 -g), checked table by table against the truth the
//! program prints.

mod common;

use std::collections::BTreeMap;

use common::*;
use serde_json::Value;

/// The truth lines, and the `report --cxx --format json` of a traced run.
fn traced(dir: &WorkDir) -> (Vec<BTreeMap<String, String>>, Value, std::path::PathBuf) {
    let exe = compile(dir, "g++", "cxx_scenarios.cpp", "cxx_scenarios", &["-O2", "-g"]);
    let trace = dir.join("cxx.hltrace");
    let out = run_traced(dir, &trace, &exe, &[] as &[&str]).ok("heaplens run");
    let out_json = heaplens(
        dir,
        &[
            "report".as_ref(),
            trace.as_os_str(),
            "--cxx".as_ref(),
            "--format".as_ref(),
            "json".as_ref(),
            "--top".as_ref(),
            "0".as_ref(),
        ],
    );
    let out_json = out_json.ok("heaplens report --cxx --format json");
    let v: Value = serde_json::from_str(&out_json.stdout).expect("report JSON");
    (truths(&out.stdout, "cxx_scenarios"), v, trace)
}

fn cb(v: &Value) -> (u64, u64) {
    (v["count"].as_u64().unwrap(), v["bytes"].as_u64().unwrap())
}

/// The scenario row of the analysis by invocation scenario.
fn scenario<'a>(cxx: &'a Value, name: &str) -> &'a Value {
    cxx["scenarios"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["scenario"] == name)
        .unwrap_or_else(|| panic!("no scenario {name}"))
}

fn class<'a>(table: &'a Value, name: &str) -> Option<&'a Value> {
    table.as_array().unwrap().iter().find(|r| r["class"] == name)
}

#[test]
fn mtrace_tables_match_the_program() {
    let dir = WorkDir::new("cxx-tables");
    let (truths, v, _) = traced(&dir);
    let cxx = &v["cxx"];
    assert!(cxx.is_object(), "no cxx tables in the report");
    let total = u(&v, "summary/allocations");
    assert_eq!(cxx["allocations"].as_u64(), Some(total), "the tables count every allocation");
    assert_eq!(cxx["bytes"].as_u64(), Some(u(&v, "summary/bytes_allocated")));
    let by_name: BTreeMap<String, &BTreeMap<String, String>> =
        truths.iter().filter_map(|t| Some((t.get("scenario")?.clone(), t))).collect();
    let t = |s: &str| by_name[s];

    // Allocation paths (DACT): every scenario's path, entry point, size and count.
    let paths = cxx["paths"].as_array().unwrap();
    let find = |path: &[&str], entry: &str, size: u64| -> u64 {
        paths
            .iter()
            .filter(|r| r["entry"] == entry && r["size"] == size)
            .filter(|r| r["path"].as_array().unwrap().iter().map(|p| p.as_str().unwrap()).eq(path.iter().copied()))
            .map(|r| r["count"].as_u64().unwrap())
            .sum()
    };
    for s in
        ["constructor", "copy", "assignment", "conversion", "member_data", "member_function", "nested", "free_function"]
    {
        let t = t(s);
        let path_text = t["path"].replace("operator_", "operator ");
        let path: Vec<&str> = if path_text == "-" { vec![] } else { path_text.split('>').collect() };
        assert_eq!(find(&path, &t["entry"], num(t, "size")), num(t, "count"), "DACT row for {s}: {path:?}");
    }
    // std::vector's growth inside Registry::grow counts for Registry::grow.
    for size in [8, 16, 32, 64] {
        assert_eq!(find(&["Registry::grow"], "new", size), 1, "vector growth of {size} bytes in Registry::grow");
    }

    // Analysis by invocation scenario, both columns.
    let n = |s: &str| num(t(s), "count");
    let b = |s: &str| num(t(s), "bytes");
    let member_fn = (
        n("member_function") + n("vector_growth") + n("nested"),
        b("member_function") + b("vector_growth") + b("nested"),
    );
    let expect_lowest = [
        ("constructor", (n("constructor"), b("constructor"))),
        ("copy_constructor", (n("copy"), b("copy"))),
        ("assignment", (n("assignment"), b("assignment"))),
        ("conversion", (n("conversion"), b("conversion"))),
        ("member_data", (n("member_data"), b("member_data"))),
        ("member_function", member_fn),
    ];
    for (s, want) in expect_lowest {
        assert_eq!(cb(&scenario(cxx, s)["lowest"]), want, "lowest level, {s}");
    }
    // At the first level the member's constructor counts for its owner's constructor.
    let first_ctor = (n("constructor") + n("member_data"), b("constructor") + b("member_data"));
    assert_eq!(cb(&scenario(cxx, "constructor")["first"]), first_ctor, "first level, constructor");
    assert_eq!(cb(&scenario(cxx, "member_data")["first"]), (0, 0), "first level, member data");
    assert_eq!(cb(&scenario(cxx, "member_function")["first"]), member_fn, "first level, member function");
    let in_classes: u64 = [
        "constructor",
        "copy",
        "assignment",
        "conversion",
        "member_data",
        "member_function",
        "vector_growth",
        "nested",
    ]
    .iter()
    .map(|s| n(s))
    .sum();
    assert_eq!(cxx["in_classes"].as_u64(), Some(in_classes));
    assert_eq!(scenario(cxx, "others")["lowest"]["count"].as_u64(), Some(total - in_classes));
    let pct = scenario(cxx, "copy_constructor")["lowest_pct"].as_f64().unwrap();
    assert!((pct - n("copy") as f64 * 100.0 / total as f64).abs() < 1e-9, "copy constructor {pct}%");

    // Per class, by the lowest level: Buffer in five scenarios, Registry and Inner in one.
    let buffer = class(&cxx["classes"], "Buffer").expect("Buffer in the per-class table");
    for (s, key) in [
        ("constructor", "constructor"),
        ("copy_constructor", "copy"),
        ("assignment", "assignment"),
        ("conversion", "conversion"),
        ("member_data", "member_data"),
    ] {
        assert_eq!(cb(&buffer["by_scenario"][s]), (n(key), b(key)), "Buffer, {s}");
    }
    let registry = class(&cxx["classes"], "Registry").expect("Registry");
    assert_eq!(
        cb(&registry["total"]),
        (n("member_function") + n("vector_growth"), b("member_function") + b("vector_growth"))
    );
    assert_eq!(cb(&class(&cxx["classes"], "Inner").expect("Inner")["total"]), (n("nested"), b("nested")));
    assert!(
        class(&cxx["classes"], "Outer").is_none() && class(&cxx["classes"], "Owner").is_none(),
        "Outer and Owner allocate only through others"
    );
    let buffer_bytes: u64 =
        ["constructor", "copy", "assignment", "conversion", "member_data"].iter().map(|s| b(s)).sum();
    assert!(buffer_bytes > b("member_function") + b("vector_growth"));
    assert_eq!(cxx["classes"][0]["class"], "Buffer", "classes by bytes: Buffer's {buffer_bytes} first");

    // Object distribution: each scenario's size under its scenario.
    let sizes = cxx["sizes"].as_array().unwrap();
    for (s, scen) in [
        ("constructor", "constructor"),
        ("copy", "copy_constructor"),
        ("assignment", "assignment"),
        ("conversion", "conversion"),
        ("member_data", "member_data"),
        ("member_function", "member_function"),
        ("nested", "member_function"),
        ("free_function", "others"),
    ] {
        let size = num(t(s), "size");
        let row = sizes.iter().find(|r| r["size"] == size).unwrap_or_else(|| panic!("no size {size}"));
        assert_eq!(row["by_scenario"][scen]["count"].as_u64(), Some(n(s)), "size {size} under {scen}");
        assert_eq!(row["total"]["count"].as_u64(), Some(n(s)), "size {size} made only by {s}");
    }

    // Depth: two member functions at most (Owner::Owner -> Buffer::Buffer, Outer::run -> Inner::step).
    let depth = &cxx["depth"];
    assert_eq!(depth["overall"]["max"].as_u64(), Some(2));
    let by_depth: Vec<u64> =
        depth["overall"]["allocations"].as_array().unwrap().iter().map(|x| x.as_u64().unwrap()).collect();
    assert_eq!(by_depth[1], in_classes - n("member_data") - n("nested"), "depth 1");
    assert_eq!(by_depth[2], n("member_data") + n("nested"), "depth 2");
    assert_eq!(class(&depth["classes"], "Registry").unwrap()["max"].as_u64(), Some(1));
    assert_eq!(class(&depth["classes"], "Buffer").unwrap()["max"].as_u64(), Some(2));

    // New versus malloc.
    let entries = &cxx["entry_points"];
    let buffer = class(entries, "Buffer").unwrap();
    let news = n("constructor") + n("copy") + n("assignment") + n("member_data");
    assert_eq!(buffer["by_entry"]["new[]"]["count"].as_u64(), Some(news));
    assert_eq!(cb(&buffer["by_entry"]["malloc"]), (n("conversion"), b("conversion")));
    let registry = class(entries, "Registry").unwrap();
    assert_eq!(registry["by_entry"]["new"]["count"].as_u64(), Some(n("vector_growth")));
    assert_eq!(registry["by_entry"]["new[]"]["count"].as_u64(), Some(n("member_function")));
    let outside = entries.as_array().unwrap().iter().find(|r| r["class"].is_null()).expect("outside classes");
    assert_eq!(
        outside["by_entry"]["new"]["count"].as_u64(),
        Some(n("main")),
        "main's new Buffer/new Owner and reserves"
    );
    assert!(outside["by_entry"]["malloc"]["count"].as_u64().unwrap() >= n("free_function"));
}

#[test]
fn cxx_text_report() {
    let dir = WorkDir::new("cxx-text");
    let (_, _, trace) = traced(&dir);
    let out = heaplens(&dir, &["report".as_ref(), trace.as_os_str(), "--cxx".as_ref()]).ok("heaplens report --cxx");
    let text = &out.stdout;
    for title in [
        "ANALYSIS BY INVOCATION SCENARIO",
        "PER-CLASS TABLE",
        "OBJECT DISTRIBUTION",
        "DYNAMIC ALLOCATION CALL TREE",
        "DEPTH OF ALLOCATION TREE",
        "NEW VERSUS MALLOC",
    ] {
        assert!(text.contains(title), "no {title} in\n{text}");
    }
    assert!(!text.contains("MEMORY LEAK TABLE"), "--cxx alone shows the C++ tables only\n{text}");
    let line = text
        .lines()
        .find(|l| l.contains("new[]") && l.contains("Owner::Owner -> Buffer::Buffer"))
        .unwrap_or_else(|| panic!("no member-data path in\n{text}"));
    assert!(line.split_whitespace().any(|w| w == "7") && line.contains("1400"), "{line}");
}
