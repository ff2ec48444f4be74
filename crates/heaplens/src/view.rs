//! `heaplens view`: the HTML page of `heaplens-map`, with what the other views give it (the
//! report's text and the exports' flame graphs): the CLI is where views meet.

use anyhow::Context;
use heaplens_map::page::{page_data, Extras};
use std::io::Write;

use crate::picture::{options, write_to};
use crate::ViewArgs;

/// Runs `heaplens view`; a failed page leaves no file behind (and an earlier one as it was).
pub fn execute(a: &ViewArgs) -> anyhow::Result<()> {
    let page = write_to(&a.output, &a.trace, &a.sites, |mut file| {
        let page = build(a)?;
        file.write_all(page.html.as_bytes()).with_context(|| format!("cannot write {}", a.output.display()))?;
        Ok(page)
    })?;
    if page.blocks_in_window > page.blocks as u64 {
        eprintln!(
            "heaplens: the window holds {} blocks, more than --max-blocks {}: the page draws the {} largest \
             by bytes times lifetime (the bars below the map count them all; `heaplens map` draws every one)",
            page.blocks_in_window, a.max_blocks, page.blocks
        );
    }
    eprintln!(
        "heaplens: wrote {} blocks to {} (open it in a browser; it needs no network)",
        page.blocks,
        a.output.display()
    );
    Ok(())
}

fn build(a: &ViewArgs) -> anyhow::Result<heaplens_map::page::Page> {
    let opts = options(&a.sites, &a.time, a.addresses)?;
    // The page's two passes, then the report and the flame graphs: one after the other, so
    // that what each holds at its highest does not add up. Side by side they took a 946 KB
    // trace of 145,000 stacks to 724 MB (525 MB so) for a page made a third sooner on the
    // churn and widgets (1.0 s against 1.5 s).
    let data = page_data(&a.trace, &opts, a.max_blocks as usize)?;
    let extras = extras(a)?;
    Ok(data.into_page(&extras))
}

/// The report's text and the flame graphs, for the page.
fn extras(a: &ViewArgs) -> anyhow::Result<Extras> {
    // The page's report charges allocations as its call sites are named: past `--skip`. No
    // progress bar: the page's own passes show theirs meanwhile, on the same terminal.
    let attribution = heaplens_interpret::paths::Attribution::own_code(a.sites.skip.patterns()?);
    let opts = heaplens_report::Options { progress: false, attribution, ..Default::default() };
    let report = heaplens_report::analyze_file(&a.trace, &opts)?;
    let text = heaplens_report::render_text::render(&report, &Default::default());
    // Its tables are in the text now: not held through the flame graphs.
    drop(report);
    // In memory: a file in the shared temporary directory is a name another user can plant
    // first (a symlink there once made root overwrite a file of its choosing). The three from
    // one replay of the trace (two for the bytes at the peak).
    use heaplens_export::Metric::{AllocBytes, InuseBytes, LeakedBytes};
    let titles = ["bytes allocated", "in use at the peak", "leaked"];
    let svgs = heaplens_export::export_metrics(
        &a.trace,
        heaplens_export::Format::Icicle,
        &[AllocBytes, InuseBytes, LeakedBytes],
    )
    .unwrap_or_default();
    let flame_graphs = titles
        .iter()
        .zip(svgs)
        .filter_map(|(title, svg)| Some((title.to_string(), String::from_utf8(svg).ok()?)))
        .collect();
    Ok(Extras { report_text: text, flame_graphs })
}
