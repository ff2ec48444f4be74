//! `heaplens view`: the HTML page of `heaplens-map`, with what the other views give it (the
//! report's text and the exports' flame graphs): the CLI is where views meet.

use std::io::{self, IsTerminal};

use anyhow::Context;
use heaplens_map::page::{page_file, Extras};
use std::io::Write;

use crate::picture::{options, write_to};
use crate::ViewArgs;

/// Runs `heaplens view`; a failed page leaves no file behind (and an earlier one as it was).
pub fn execute(a: &ViewArgs) -> anyhow::Result<()> {
    let page = write_to(&a.output, &a.trace, |mut file| {
        let page = build(a)?;
        file.write_all(page.html.as_bytes()).with_context(|| format!("cannot write {}", a.output.display()))?;
        Ok(page)
    })?;
    eprintln!(
        "heaplens: wrote {} blocks to {} (open it in a browser; it needs no network)",
        page.blocks,
        a.output.display()
    );
    Ok(())
}

fn build(a: &ViewArgs) -> anyhow::Result<heaplens_map::page::Page> {
    let progress = io::stderr().is_terminal();
    let report = heaplens_report::analyze_file(&a.trace, &heaplens_report::Options { progress, ..Default::default() })?;
    let text = heaplens_report::render_text::render(&report, &Default::default());
    let mut flame_graphs = Vec::new();
    let dir = std::env::temp_dir().join(format!("heaplens-view-{}", std::process::id()));
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    for (title, metric) in [
        ("bytes allocated", heaplens_export::Metric::AllocBytes),
        ("in use at the peak", heaplens_export::Metric::InuseBytes),
        ("leaked", heaplens_export::Metric::LeakedBytes),
    ] {
        let svg = dir.join("flame.svg");
        let opts = heaplens_export::Options { format: heaplens_export::Format::Flamegraph, metric, progress: false };
        if heaplens_export::export(&a.trace, &svg, &opts).is_ok() {
            if let Ok(s) = std::fs::read_to_string(&svg) {
                flame_graphs.push((title.to_string(), s));
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    let opts = options(&a.sites, &a.time, a.addresses);
    Ok(page_file(&a.trace, &opts, a.max_blocks, &Extras { report_text: text, flame_graphs })?)
}
