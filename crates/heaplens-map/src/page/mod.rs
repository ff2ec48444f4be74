//! `heaplens view`: one self-contained HTML page (no network access; it opens from disk) with
//! the memory map drawn in the browser at every zoom from the blocks themselves, a context view
//! beside it, the occupancy bar and the heap over time on the same time axis with a shared
//! cursor, and what the caller adds (the report's tables, flame graphs).
//!
//! The blocks travel as gzipped little-endian columns (see [`collect::Blocks::to_bytes`]),
//! base64 in the page, inflated by the browser's `DecompressionStream`; `view.js` draws them
//! with the same bias-weighted antialiasing as [`crate::canvas`], so detail returns as one
//! zooms in and no block is lost however far out.

pub mod collect;

use std::io::Write;
use std::path::Path;

use base64::Engine;
use serde_json::json;

use crate::axis::AddressAxis;
use crate::color::{hex, PALETTE};
use crate::{sites, timeline, MapError, MapOptions};
use heaplens_interpret::split::Half;

/// Columns of the precomputed occupancy and heap-over-time series.
const SERIES_COLUMNS: usize = 2000;

/// What the caller puts on the page besides the map.
#[derive(Debug, Clone, Default)]
pub struct Extras {
    /// Preformatted text: the report's summary and tables.
    pub report_text: String,
    /// Flame graphs: a title and a self-contained SVG each.
    pub flame_graphs: Vec<(String, String)>,
}

/// A written page.
pub struct Page {
    /// The HTML.
    pub html: String,
    /// Blocks on the page.
    pub blocks: usize,
}

/// Why there is no page, besides [`MapError`].
#[derive(Debug, thiserror::Error)]
pub enum PageError {
    /// As for the map.
    #[error(transparent)]
    Map(#[from] MapError),
    /// More blocks than the page takes.
    #[error("the window holds more than {0} blocks, more than a page stays responsive with: draw part of it (--from/--to, --addresses) or use `heaplens map`")]
    TooManyBlocks(usize),
}

/// Builds the page for the trace at `path`: `o.window` (time and addresses), `o.top` call
/// sites coloured (by bytes allocated), `o.depth` frames a site, at most `max_blocks` blocks.
///
/// # Errors
/// [`PageError::Map`] as [`crate::map_file`]; [`PageError::TooManyBlocks`] past `max_blocks`.
pub fn page_file(path: &Path, o: &MapOptions, max_blocks: usize, extras: &Extras) -> Result<Page, PageError> {
    let (layout, trace, index) = crate::first_pass(path, o, false).map_err(MapError::from)?;
    let first_ts = layout.first_ts.ok_or(MapError::Empty)?;
    if layout.blocks == 0 {
        return Err(MapError::Empty.into());
    }
    if layout.blocks as usize > max_blocks {
        return Err(PageError::TooManyBlocks(max_blocks));
    }
    let t0 = first_ts + o.window.from_ns.unwrap_or(0);
    let t1 = o.window.to_ns.map_or(layout.last_ts, |t| first_ts + t).max(t0 + 1);
    // The address axis in units of 1000 rows for the whole height.
    let axis = AddressAxis::new(layout.granules.ranges(), 1000.0, 12.0);
    let s = sites::sites(path, &trace, &layout.bytes_by_stack, o.depth, o.top.min(PALETTE.len()));

    let mut blocks = collect::Blocks::new((t0, t1), o.window.addresses, layout.last_ts, max_blocks);
    let mut tl = timeline::Timeline::new(&s.of_stack, s.top.len(), SERIES_COLUMNS, (t0, t1), Half::Whole);
    let trace =
        crate::second_pass(path, trace, index, &mut (&mut blocks, &mut tl), o.progress).map_err(MapError::from)?;
    if blocks.overflow {
        return Err(PageError::TooManyBlocks(max_blocks));
    }

    // Each stack's frames (innermost first, at most 24) and site.
    let (mut sym, _) = heaplens_interpret::symbolize::for_trace(path, &trace);
    let (frames, paths) = heaplens_interpret::paths::resolve(&trace.stacks, &blocks.stacks, sym.as_mut(), false);
    let stacks: Vec<serde_json::Value> = (0..blocks.stacks.len())
        .map(|i| {
            let names: Vec<&str> =
                paths.get(i).iter().take(24).map(|&site| frames.sites[site as usize].label.as_str()).collect();
            let site = s.of_stack.get(&blocks.stacks[i]).map_or(-1, |&k| k as i64);
            json!({ "frames": names, "site": site })
        })
        .collect();
    let thread_names: Vec<String> = blocks
        .threads
        .iter()
        .map(|tid| match trace.thread_names.iter().rfind(|n| n.tid == *tid) {
            Some(n) => format!("{tid} ({})", n.name),
            None => tid.to_string(),
        })
        .collect();
    let tl = tl.finish();
    let columns = &tl.columns;
    let meta = json!({
        "title": trace.process.as_ref().map_or_else(|| path.display().to_string(), |p| p.exe.clone()),
        "span_ns": (t1 - t0) as f64,
        "offset_ns": (t0 - first_ts) as f64,
        "blocks": blocks.alloc_ns.len(),
        "segments": axis.segments.iter().map(|g| json!({"lo": g.lo as f64, "hi": g.hi as f64, "y0": g.y0, "y1": g.y1})).collect::<Vec<_>>(),
        "stacks": stacks,
        "sites": s.top.iter().enumerate().map(|(k, (l, b))| json!({"label": l, "bytes": b, "color": hex(PALETTE[k])})).collect::<Vec<_>>(),
        "threads": thread_names,
        "series": columns.iter().map(|c| c.iter().map(|&b| b.max(0)).collect::<Vec<_>>()).collect::<Vec<_>>(),
        "peak": [tl.peak.0.max(0), (tl.peak.1 - t0) as i64],
    });

    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(&blocks.to_bytes()).expect("gzip to memory");
    let packed = base64::engine::general_purpose::STANDARD.encode(gz.finish().expect("gzip to memory"));
    let flames: String = extras
        .flame_graphs
        .iter()
        .enumerate()
        .map(|(i, (title, _))| {
            format!(
                r#"<button class="tab{}" data-tab="flame{i}">{}</button>"#,
                if i == 0 { " on" } else { "" },
                escape(title)
            )
        })
        .collect::<String>()
        + &extras
            .flame_graphs
            .iter()
            .enumerate()
            .map(|(i, (_, svg))| {
                // An SVG document of its own (its script and ids stay apart from the page's).
                format!(
                    r#"<iframe id="flame{i}" class="flame{}" sandbox="allow-scripts" src="data:image/svg+xml;base64,{}"></iframe>"#,
                    if i == 0 { " on" } else { "" },
                    base64::engine::general_purpose::STANDARD.encode(svg)
                )
            })
            .collect::<String>();
    // The code and style first, the data last: data may hold anything.
    let html = include_str!("view.html")
        .replace("{{STYLE}}", include_str!("view.css"))
        .replace("{{SCRIPT}}", include_str!("view.js"))
        .replace("{{TITLE}}", &escape(meta["title"].as_str().unwrap_or("trace")))
        .replace("{{FLAMES}}", &flames)
        .replace("{{REPORT}}", &escape(&extras.report_text))
        .replacen("{{BLOCKS}}", &packed, 1)
        .replacen("{{META}}", &meta.to_string().replace("</", "<\\/"), 1);
    Ok(Page { html, blocks: blocks.alloc_ns.len() })
}

/// Text for HTML content and attribute values.
fn escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}
