//! `heaplens view`: the page checked in a real browser (Debian's headless Chromium, driven by
//! Selenium from PyPI through `tests/browser/view_page.py`): it draws, a hovered block's
//! tooltip names the function that allocated it and its size, and the page asks the network
//! for nothing. The screenshots are kept beside the page for a person to look at.

mod common;

use common::*;
use std::path::{Path, PathBuf};

/// The trace of 2000 widgets, with how many were made and their size.
fn widgets_2000(dir: &WorkDir) -> (PathBuf, u64, u64) {
    let (trace, t) = traced_example(dir, "widgets.c", &["2000"]);
    (trace, num(&t, "made"), num(&t, "size"))
}

#[test]
fn the_page_draws_and_names_a_hovered_block_without_network() {
    let dir = WorkDir::new("view-page");
    let (trace, made, size) = widgets_2000(&dir);
    let page = dir.join("view.html");
    let o = heaplens(&dir, &["view", trace.to_str().unwrap(), "-o", page.to_str().unwrap()]).ok("heaplens view");
    assert!(o.stderr.contains(&format!("wrote {made} blocks")), "{}", o.stderr);
    let html = std::fs::read_to_string(&page).unwrap();
    for external in ["src=\"http", "href=\"http", "url(http", "import "] {
        assert!(!html.contains(external), "the page loads nothing from outside itself ({external})");
    }

    let shot = dir.join("view.png");
    let found = browse(&dir, &page, &shot, "make_red_widget");
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

/// Past `--max-blocks`, the page keeps the blocks of the largest bytes times lifetime (it once
/// refused the trace, after building the report and flame graphs): the red widgets, never
/// freed, are among them; the page and the CLI say how many of how many it draws.
#[test]
fn past_max_blocks_the_page_draws_the_largest() {
    let dir = WorkDir::new("view-max-blocks");
    let (trace, made, _) = widgets_2000(&dir);
    let page = dir.join("view.html");
    let o = heaplens(&dir, &["view", trace.to_str().unwrap(), "-o", page.to_str().unwrap(), "--max-blocks", "300"])
        .ok("heaplens view --max-blocks 300");
    assert!(o.stderr.contains(&format!("holds {made} blocks, more than --max-blocks 300")), "{}", o.stderr);
    let found = browse(&dir, &page, &dir.join("largest.png"), "make_red_widget");
    assert_eq!(found("errors"), "[]", "the page logged errors");
    let drawn: u64 = found("blocks").parse().unwrap();
    assert!((1..=300).contains(&drawn), "{drawn} blocks drawn");
    assert!(o.stderr.contains(&format!("wrote {drawn} blocks")), "{}", o.stderr);
    assert!(found("stats").contains(&format!("{drawn} of {made} blocks")), "{}", found("stats"));
    assert!(found("tooltip").contains("live at exit"), "a leaked red widget is drawn: {}", found("tooltip"));
}

/// `heaplens view` used to write its flame graphs to `$TMPDIR/heaplens-view-<pid>/flame.svg`
/// and take that directory if it was already there: another user could plant it as a symlink
/// and have root overwrite a file of their choosing. The page now uses no temporary file at all.
#[test]
/// (The flame graphs are counted by the base64 of their first bytes, `<?xml version="`.)
fn view_uses_no_temporary_files() {
    let dir = WorkDir::new("view-no-tmp");
    let (_, trace) = traced_widgets(&dir, &["50"]);
    let flame_graphs = |page: &Path| std::fs::read_to_string(page).unwrap().matches("PD94bWwgdmVyc2lvbj0i").count();

    // An empty TMPDIR stays empty; one that does not exist is not made; one that is a file is
    // no obstacle: the page still has its three flame graphs.
    let empty = dir.join("tmp-empty");
    std::fs::create_dir(&empty).unwrap();
    let absent = dir.join("tmp-absent");
    let file = dir.join("tmp-file");
    std::fs::write(&file, "not a directory").unwrap();
    for (k, tmp) in [&empty, &absent, &file].into_iter().enumerate() {
        let page = dir.join(format!("view{k}.html"));
        let mut cmd = std::process::Command::new(heaplens_exe());
        cmd.arg("view").arg(&trace).arg("-o").arg(&page).env("TMPDIR", tmp);
        run_cmd(cmd, &dir.path).ok(&format!("heaplens view with TMPDIR={}", tmp.display()));
        assert_eq!(flame_graphs(&page), 3, "the page with TMPDIR={} has its flame graphs", tmp.display());
    }
    assert_eq!(std::fs::read_dir(&empty).unwrap().count(), 0, "heaplens view left files in TMPDIR");
    assert!(!absent.exists(), "heaplens view made TMPDIR");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "not a directory");

    // The old name planted as a symlink to a directory of the attacker's: nothing lands there.
    // (`exec` keeps the shell's pid, so the planted name is the one heaplens would have used.)
    let tmp = dir.join("tmp-planted");
    let victim = dir.join("victim");
    std::fs::create_dir_all(&tmp).unwrap();
    std::fs::create_dir_all(&victim).unwrap();
    let page = dir.join("planted.html");
    let mut cmd = std::process::Command::new("sh");
    cmd.arg("-c")
        .arg(r#"ln -s "$1" "$TMPDIR/heaplens-view-$$" && exec "$2" view "$3" -o "$4""#)
        .arg("sh")
        .arg(&victim)
        .arg(heaplens_exe())
        .arg(&trace)
        .arg(&page)
        .env("TMPDIR", &tmp);
    run_cmd(cmd, &dir.path).ok("heaplens view beside a planted symlink");
    let planted: Vec<_> = std::fs::read_dir(&victim).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert!(planted.is_empty(), "heaplens view wrote through a planted symlink: {planted:?}");
    assert_eq!(std::fs::read_dir(&tmp).unwrap().count(), 1, "only the planted symlink is in TMPDIR");
    assert_eq!(flame_graphs(&page), 3);
}

/// Names chosen to attack the page (`examples/hostile_page.c`): functions named `{{META}}` (the
/// old template's placeholder) and like markup, a thread named `<!--<script>`, arguments that
/// close a script element, all run from a directory named like an image with a handler. In
/// Chromium no injected script runs, no script is refused (nothing was injected to refuse), the
/// map draws, and the names show as text.
#[test]
fn hostile_names_are_text_on_the_page() {
    let dir = WorkDir::new("view-hostile");
    let exe = compile(&dir, "gcc", "hostile_page.c", "hostile_page", &["-O1", "-fno-omit-frame-pointer", "-pthread"]);
    let cwd = dir.join("<img src=data:,x onerror=window.pwned=2>");
    std::fs::create_dir(&cwd).unwrap();
    let prog = cwd.join("hostile_page");
    std::fs::rename(&exe, &prog).unwrap();
    let trace = dir.join("h.hltrace");
    let mut cmd = std::process::Command::new(heaplens_exe());
    cmd.arg("run").arg("-o").arg(&trace).arg("--").arg("./hostile_page");
    cmd.args(["{{META}}", "</script><script>window.pwned=1</script>"]);
    let out = run_cmd(cmd, &cwd).ok("hostile_page under heaplens");
    assert!(out.stdout.contains("hostile_page: args=2"), "{}", out.show());
    let page = dir.join("view.html");
    heaplens(&dir, &["view", trace.to_str().unwrap(), "-o", page.to_str().unwrap()]).ok("heaplens view");

    let html = std::fs::read_to_string(&page).unwrap();
    assert_eq!(html.matches(r#"<script id="data" type="application/json">"#).count(), 1, "one data element");
    let csp = html.split("Content-Security-Policy\" content=\"").nth(1).expect("a policy");
    let csp = &csp[..csp.find('"').unwrap()];
    assert!(!csp.contains("unsafe-inline"), "the policy lets inline scripts run: {csp}");
    for name in ["onerror", "<!--<script>", "window.pwned"] {
        let outside: String = html.split(r#"<script id="data""#).next().unwrap().to_string();
        assert!(!outside.contains(name), "{name} in the page's markup before its data");
    }

    let found = browse(&dir, &page, &dir.join("hostile.png"), "onerror=alert(1)");
    assert_eq!(found("ready").split_whitespace().next(), Some("true"), "the page drew");
    assert_eq!(found("pwned"), "null", "an injected script ran");
    assert_eq!(found("violations"), "[]", "markup from the trace reached the page");
    let blocks: usize = found("blocks").parse().unwrap();
    assert!(blocks >= 32, "the 32 blocks of the two hostile functions are on the map: {blocks}");
    assert!(found("title").contains("<img src=data:,x onerror=window.pwned=2>/hostile_page"), "{}", found("title"));
    let legend = found("legend");
    assert!(legend.contains("{{META}}") && legend.contains("<img src=x onerror=alert(1)>"), "legend: {legend}");
    let report = found("report");
    assert!(report.contains("</script><script>window.pwned=1</script>") && report.contains("{{META}}"), "{report}");
    let tooltip = found("tooltip");
    assert!(
        tooltip.contains("(<!--<script>)") && tooltip.contains("<img src=x onerror=alert(1)>"),
        "tooltip: {tooltip}"
    );
    assert_eq!(found("flame_script"), "function", "the flame graph's own script runs");
    assert_eq!(found("errors"), "[]", "the page logged errors");
}

/// `heaplens_export::export_to`, which the page's flame graphs come from, writes what `export`
/// writes to a file, and refuses the formats that are not one stream.
#[test]
fn export_into_memory_is_the_file_export() {
    use heaplens_export::{export, export_to, Format, Metric, Options};
    let dir = WorkDir::new("export-to");
    let (_, trace) = traced_widgets(&dir, &["50"]);
    for format in [Format::Collapsed, Format::Flamegraph, Format::PprofText] {
        let opts = Options { format, metric: Metric::InuseBytes, progress: false };
        let file = dir.join("out");
        export(&trace, &file, &opts).unwrap();
        let mut mem = Vec::new();
        let done = export_to(&trace, &mut mem, &opts).unwrap();
        assert!(done.stacks > 0 && !mem.is_empty(), "{format:?}");
        // inferno picks its colours at random: they are left out of the comparison.
        let uncoloured = |b: Vec<u8>| {
            let s = String::from_utf8(b).unwrap();
            let mut parts = s.split("fill=\"rgb(");
            let head = parts.next().unwrap_or_default().to_string();
            head + &parts.map(|p| p.split_once(")\"").map_or(p, |(_, rest)| rest)).collect::<String>()
        };
        assert!(uncoloured(mem) == uncoloured(std::fs::read(&file).unwrap()), "{format:?} differs");
    }
    let opts = Options { format: Format::Heaptrack, metric: Metric::AllocBytes, progress: false };
    assert!(export_to(&trace, &mut Vec::new(), &opts).is_err());
}

/// `heaplens_export::export_metrics`, from which the page's three flame graphs come in one
/// replay (two with the bytes at the peak), writes for each metric what `export_to` writes.
#[test]
fn several_metrics_from_one_replay_are_each_metrics_export() {
    use heaplens_export::{export_metrics, export_to, Format, Metric, Options};
    let dir = WorkDir::new("export-metrics");
    let (_, trace) = traced_widgets(&dir, &["300"]);
    let metrics = [Metric::AllocBytes, Metric::InuseBytes, Metric::LeakedBytes, Metric::AllocCount];
    let together = export_metrics(&trace, Format::Collapsed, &metrics).unwrap();
    assert_eq!(together.len(), metrics.len());
    for (metric, got) in metrics.into_iter().zip(together) {
        let mut alone = Vec::new();
        export_to(&trace, &mut alone, &Options { format: Format::Collapsed, metric, progress: false }).unwrap();
        assert!(!alone.is_empty(), "{metric:?}");
        assert_eq!(String::from_utf8(got).unwrap(), String::from_utf8(alone).unwrap(), "{metric:?}");
    }
    assert!(export_metrics(&trace, Format::Pprof, &[Metric::AllocBytes]).is_err());
    assert!(export_metrics(&trace, Format::Collapsed, &[Metric::CpuSamples]).is_err());
}

/// A block of 5 GiB (`examples/huge_block.c`) keeps its size on the page: the tooltip of its
/// block says 5 GiB requested (sizes went to the page as 32 bits, cut to 4 GiB).
#[test]
fn a_block_of_5_gib_keeps_its_size_on_the_page() {
    let dir = WorkDir::new("view-huge");
    let (trace, t) = traced_example(&dir, "huge_block.c", &[]);
    let size = num(&t, "size");
    let page = dir.join("view.html");
    heaplens(&dir, &["view", trace.to_str().unwrap(), "-o", page.to_str().unwrap()]).ok("heaplens view");
    let found = browse(&dir, &page, &dir.join("huge.png"), "allocate_five_gib");
    assert_eq!(found("ready").split_whitespace().next(), Some("true"), "the page drew");
    let tooltip = found("tooltip");
    assert_eq!(size, 5 << 30);
    assert!(tooltip.contains("allocate_five_gib") && tooltip.contains("5.0 GiB requested"), "tooltip: {tooltip}");
    assert_eq!(found("errors"), "[]", "the page logged errors");
}
