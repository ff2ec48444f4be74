//! `heaplens view`: the page checked in a real browser (Debian's headless Chromium, driven by
//! Selenium from PyPI through `tests/browser/view_page.py`): it draws, a hovered block's
//! tooltip names the function that allocated it and its size, and the page asks the network
//! for nothing. The screenshots are kept beside the page for a person to look at.

mod common;

use common::*;

#[test]
fn the_page_draws_and_names_a_hovered_block_without_network() {
    let dir = WorkDir::new("view-page");
    let exe = compile_c(&dir, "widgets.c", &[]);
    let trace = dir.join("w.hltrace");
    let out = run_traced(&dir, &trace, &exe, &["2000"]).ok("widgets under heaplens");
    let t = truth(&out.stdout, "widgets");
    let (made, size) = (num(&t, "made"), num(&t, "size"));
    let page = dir.join("view.html");
    let o = heaplens(&dir, &["view", trace.to_str().unwrap(), "-o", page.to_str().unwrap()]).ok("heaplens view");
    assert!(o.stderr.contains(&format!("wrote {made} blocks")), "{}", o.stderr);
    let html = std::fs::read_to_string(&page).unwrap();
    for external in ["src=\"http", "href=\"http", "url(http", "import "] {
        assert!(!html.contains(external), "the page loads nothing from outside itself ({external})");
    }

    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/browser/view_page.py");
    let shot = dir.join("view.png");
    let mut py = std::process::Command::new("python3");
    py.arg(&script).arg(&page).arg(&shot).arg("make_red_widget");
    let r = run_cmd(py, &dir.path)
        .ok("Chromium through Selenium (apt install chromium chromium-driver; pip install selenium)");
    let found = |key: &str| -> String {
        r.stdout
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{key}=")))
            .unwrap_or_else(|| panic!("no {key} in\n{}", r.stdout))
            .to_string()
    };
    assert_eq!(found("ready").split_whitespace().next(), Some("true"));
    assert_eq!(found("blocks"), made.to_string(), "every widget is on the page");
    let tooltip = found("tooltip");
    assert!(
        tooltip.contains("make_red_widget") && tooltip.contains(&format!("{size} B requested")),
        "tooltip: {tooltip}"
    );
    assert!(tooltip.contains("live at exit"), "a red widget is never freed: {tooltip}");
    assert_eq!(found("network"), "[]", "the page made network requests");
    assert_eq!(found("errors"), "[]", "the page logged errors");
    let png = std::fs::metadata(&shot).map(|m| m.len()).unwrap_or(0);
    assert!(png > 20_000, "a screenshot of a drawn page ({png} bytes)");
}
