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
    // The report and the flame graphs (three replays) beside the page's own two passes, on
    // another thread: they share nothing until the page is put together.
    std::thread::scope(|scope| {
        let extras = std::thread::Builder::new()
            .name("heaplens-extras".into())
            .spawn_scoped(scope, || extras(a))
            .context("cannot start a thread")?;
        let data = page_data(&a.trace, &opts, a.max_blocks as usize);
        let extras = extras.join().map_err(|_| anyhow::anyhow!("the report for the page panicked"))??;
        Ok(data?.into_page(&extras))
    })
}

/// The report's text and the flame graphs, for the page.
fn extras(a: &ViewArgs) -> anyhow::Result<Extras> {
    // The page's report charges allocations as its call sites are named: past `--skip`. No
    // progress bar: the page's own passes show theirs meanwhile, on the same terminal.
    let attribution = heaplens_interpret::paths::Attribution::own_code(a.sites.skip.patterns()?);
    let opts = heaplens_report::Options { progress: false, attribution, ..Default::default() };
    let report = heaplens_report::analyze_file(&a.trace, &opts)?;
    let text = heaplens_report::render_text::render(&report, &Default::default());
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
