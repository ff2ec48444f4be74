//! `heaplens view`: one self-contained HTML page (no network access; it opens from disk) with
//! the memory map drawn in the browser at every zoom from the blocks themselves, a context view
//! beside it, the occupancy bar and the heap over time on the same time axis with a shared
//! cursor, and what the caller adds (the report's tables, flame graphs).
//!
//! The blocks travel as gzipped little-endian columns (see [`collect::Blocks::to_bytes`]),
//! base64 in the page, inflated by the browser's `DecompressionStream`; `view.js` draws them
//! with the same bias-weighted antialiasing as [`crate::canvas`], so detail returns as one
//! zooms in and no block is lost however far out.
//!
//! A trace's names are chosen by whoever wrote the program, so the page trusts none of them
//! (see [`html`]): its data (the map's description, the blocks, the report's text, the flame
//! graphs) is in the page once, as JSON in `<script type="application/json" id="data">` with
//! `<`, `>`, `&`, U+2028 and U+2029 escaped, and `view.js` shows it as text, never as markup.
//! The template is filled in one pass over its own placeholders. The Content-Security-Policy
//! runs only the page's own script and style, named by their SHA-256 (no `'unsafe-inline'`).
//! The flame graphs are inferno's SVG documents, each in an iframe from a `data:` address with
//! `sandbox="allow-scripts"`: their script (zoom, search) runs in an opaque origin of its own,
//! which cannot reach the page, and inferno escapes the names in them. Such a frame runs under
//! the page's policy, so the policy also names each flame graph's script, style and `onload`
//! handler by hash (`'unsafe-hashes'`, which lets a handler with exactly that text run).

pub mod collect;

use std::io::Write;
use std::path::Path;

use base64::Engine;
use serde_json::json;

use crate::axis::AddressAxis;
use crate::color::{hex, PALETTE};
use crate::compose::name_label;
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
    /// Blocks of the window: more than on the page when past its most (the largest by area
    /// are drawn, see `collect.rs`).
    pub blocks_in_window: u64,
}

/// Why there is no page, besides [`MapError`].
#[derive(Debug, thiserror::Error)]
pub enum PageError {
    /// As for the map.
    #[error(transparent)]
    Map(#[from] MapError),
}

/// Builds the page for the trace at `path`: `o.window` (time and addresses), `o.top` call
/// sites coloured (by bytes allocated), `o.depth` frames a site, at most `max_blocks` blocks
/// (past it, those of the largest area: usable bytes times lifetime).
///
/// # Errors
/// [`PageError::Map`] as [`crate::map_file`].
pub fn page_file(path: &Path, o: &MapOptions, max_blocks: usize, extras: &Extras) -> Result<Page, PageError> {
    Ok(page_data(path, o, max_blocks)?.into_page(extras))
}

/// The page's own data, before what other views add: its map description, its blocks (gzipped
/// and base64) and their counts. [`page_file`] in two steps, so that a caller can make the
/// [`Extras`] meanwhile.
pub struct PageData {
    meta: serde_json::Value,
    packed: String,
    blocks: usize,
    in_window: u64,
}

impl PageData {
    /// The page, with `extras`.
    pub fn into_page(self, extras: &Extras) -> Page {
        Page { html: html(&self.meta, &self.packed, extras), blocks: self.blocks, blocks_in_window: self.in_window }
    }
}

/// [`page_file`]'s data, without the extras.
///
/// # Errors
/// As [`page_file`].
pub fn page_data(path: &Path, o: &MapOptions, max_blocks: usize) -> Result<PageData, PageError> {
    let (layout, trace, index) = crate::first_pass(path, o, false).map_err(MapError::from)?;
    let first_ts = layout.first_ts.ok_or(MapError::Empty)?;
    if layout.blocks == 0 {
        return Err(MapError::Empty.into());
    }
    let t0 = first_ts + o.window.from_ns.unwrap_or(0);
    let t1 = o.window.to_ns.map_or(layout.last_ts, |t| first_ts + t).max(t0 + 1);
    // The address axis in units of 1000 rows for the whole height.
    let axis = AddressAxis::new(layout.granules.ranges(), 1000.0, 12.0);
    let s = sites::sites(path, &trace, &layout.bytes_by_stack, (o.depth, &o.skip), o.top.min(PALETTE.len()));

    let mut blocks = collect::Blocks::new((t0, t1), o.window.addresses, layout.last_ts, max_blocks);
    let mut tl = timeline::Timeline::new(&s.of_stack, s.top.len(), SERIES_COLUMNS, (t0, t1), Half::Whole);
    let trace =
        crate::second_pass(path, trace, index, &mut (&mut blocks, &mut tl), o.progress).map_err(MapError::from)?;

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
        "title": trace.process.as_ref().map_or_else(|| path.display().to_string(), |p| p.exe.to_string_lossy().into_owned()),
        "span_ns": (t1 - t0) as f64,
        "offset_ns": (t0 - first_ts) as f64,
        "blocks": blocks.alloc_ns.len(),
        // Past `max_blocks`, the largest by area (see `collect.rs`).
        "blocks_in_window": blocks.in_window,
        "segments": axis.segments.iter().map(|g| json!({"lo": g.lo as f64, "hi": g.hi as f64, "y0": g.y0, "y1": g.y1})).collect::<Vec<_>>(),
        "stacks": stacks,
        // `short`: as the picture's legend shows it (the innermost frame kept, parameters cut).
        "sites": s.top.iter().enumerate().map(|(k, (l, b))| json!({"label": l, "short": name_label(l), "bytes": b, "color": hex(PALETTE[k])})).collect::<Vec<_>>(),
        "threads": thread_names,
        "series": columns.iter().map(|c| c.iter().map(|&b| b.max(0)).collect::<Vec<_>>()).collect::<Vec<_>>(),
        "peak": [tl.peak.0.max(0), (tl.peak.1 - t0) as i64],
    });

    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(&blocks.to_bytes()).expect("gzip to memory");
    let packed = base64::engine::general_purpose::STANDARD.encode(gz.finish().expect("gzip to memory"));
    Ok(PageData { meta, packed, blocks: blocks.alloc_ns.len(), in_window: blocks.in_window })
}

/// The page around its data: `meta` (the map's description), `packed` (the blocks, base64)
/// and `extras`, all of them in one JSON element, the page's only data; its script puts what
/// it shows into the document as text. Names from the trace are never markup, and no step after
/// the template's own fills them in sees them.
pub fn html(meta: &serde_json::Value, packed: &str, extras: &Extras) -> String {
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    let data = json!({
        "meta": meta,
        "blocks": packed,
        "report": extras.report_text,
        "flames": extras.flame_graphs.iter().map(|(title, svg)| json!({"title": title, "svg": b64(svg)})).collect::<Vec<_>>(),
    });
    let (script, style) = (include_str!("view.js"), include_str!("view.css"));
    let data = script_json(&data);
    // A `data:` document in an iframe runs under the page's policy, so the flame graphs'
    // scripts are named in it too (they are still confined to their sandboxed frames).
    let (mut scripts, mut styles) = (vec![sha256_source(script)], vec![sha256_source(style)]);
    for (_, svg) in &extras.flame_graphs {
        let (s, t) = svg_sources(svg);
        scripts.extend(s);
        styles.extend(t);
    }
    let sources = |mut v: Vec<String>| {
        v.sort();
        v.dedup();
        v.iter().map(|s| format!("'{s}'")).collect::<Vec<_>>().join(" ")
    };
    let (script_sources, style_sources) = (sources(scripts), sources(styles));
    fill(include_str!("view.html"), |name| match name {
        "SCRIPT" => script,
        "STYLE" => style,
        "SCRIPT_SOURCES" => &script_sources,
        "STYLE_SOURCES" => &style_sources,
        "DATA" => &data,
        _ => panic!("view.html has an unknown placeholder {{{{{name}}}}}"),
    })
}

/// `template` with each `{{NAME}}` in it replaced by `value(NAME)`, in one pass over the
/// template alone: a value is never searched for placeholders, whatever text it holds.
fn fill<'a>(template: &str, value: impl Fn(&str) -> &'a str) -> String {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(open) = rest.find("{{") {
        let close = rest[open..].find("}}").map(|c| open + c).expect("view.html: a placeholder left open");
        out.push_str(&rest[..open]);
        out.push_str(value(&rest[open + 2..close]));
        rest = &rest[close + 2..];
    }
    out.push_str(rest);
    out
}

/// JSON for the inside of a `<script type="application/json">`: `<`, `>` and `&` as `\u`
/// escapes, so that no `</script>` or `<!--` in a name can end or change the element, and
/// U+2028/U+2029 too, which older JavaScript takes for line ends. (They can only be in strings,
/// where the escapes mean the same characters.)
fn script_json(v: &serde_json::Value) -> String {
    let s = v.to_string();
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

/// The policy's sources that let an inferno flame graph's own script and style work: the hash
/// of each `<script>` element's text (its CDATA sections joined) and of each `<style>`
/// element's, and for the root's `onload` handler `'unsafe-hashes'` and the handler's hash.
/// Scripts first, then styles. What is not in that form gets no hash and is refused: the graph
/// is still drawn, without its zoom and search or its fonts.
fn svg_sources(svg: &str) -> (Vec<String>, Vec<String>) {
    let mut scripts: Vec<String> = element_texts(svg, "script").iter().map(|t| sha256_source(t)).collect();
    let styles = element_texts(svg, "style").iter().map(|t| sha256_source(t)).collect();
    let root = svg.find("<svg").map(|at| &svg[at..]).and_then(|r| r.split_once('>')).map(|(tag, _)| tag);
    if let Some(handler) = root.and_then(|tag| tag.split_once(" onload=\"")).and_then(|(_, v)| v.split_once('"')) {
        if !handler.0.contains('&') {
            scripts.push("unsafe-hashes".to_string());
            scripts.push(sha256_source(handler.0));
        }
    }
    (scripts, styles)
}

/// The text of each `<tag>` element of an SVG document that is CDATA sections or plain text
/// with no markup or entities (what the policy hashes is the text as the browser reads it).
fn element_texts(svg: &str, tag: &str) -> Vec<String> {
    let (open_tag, close_tag) = (format!("<{tag}"), format!("</{tag}>"));
    let mut out = Vec::new();
    let mut rest = svg;
    while let Some(at) = rest.find(&open_tag) {
        let Some(open) = rest[at..].find('>').map(|o| at + o + 1) else { break };
        let Some(close) = rest[open..].find(&close_tag).map(|c| open + c) else { break };
        let body = &rest[open..close];
        let mut text = String::new();
        let mut sections = body.trim();
        while let Some((section, after)) = sections.strip_prefix("<![CDATA[").and_then(|b| b.split_once("]]>")) {
            text.push_str(section);
            sections = after.trim_start();
        }
        if text.is_empty() && !body.contains(['<', '&']) {
            text.push_str(body);
        }
        if sections.is_empty() || text == body {
            out.push(text);
        }
        rest = &rest[close..];
    }
    out
}

/// A Content-Security-Policy source for an inline script or style: `sha256-` and its hash.
fn sha256_source(text: &str) -> String {
    use sha2::Digest;
    format!("sha256-{}", base64::engine::general_purpose::STANDARD.encode(sha2::Sha256::digest(text.as_bytes())))
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOSTILE: &str = "{{DATA}}{{SCRIPT}}</script><script>window.pwned=1</script><!--<script>\u{2028}&amp;<img src=x onerror=alert(1)>";

    fn page() -> String {
        let meta = json!({"title": HOSTILE, "threads": [HOSTILE], "stacks": [{"frames": [HOSTILE], "site": 0}]});
        html(
            &meta,
            "AAAA",
            &Extras { report_text: HOSTILE.into(), flame_graphs: vec![(HOSTILE.into(), "<svg/>".into())] },
        )
    }

    #[test]
    fn the_data_is_one_element_of_escaped_json() {
        let html = page();
        let open = r#"<script id="data" type="application/json">"#;
        assert_eq!(html.matches(open).count(), 1);
        // The data element and the page's own script, nothing more, and the script once.
        assert_eq!(html.matches("<script").count(), 2, "{html}");
        assert_eq!(html.matches("</script>").count(), 2, "{html}");
        assert_eq!(html.matches("function blueToRed").count(), 1, "a placeholder in the data was filled");
        let data = &html[html.find(open).unwrap() + open.len()..];
        let data = &data[..data.find("</script>").unwrap()];
        for raw in ['<', '>', '&', '\u{2028}'] {
            assert!(!data.contains(raw), "{raw:?} unescaped in the data");
        }
        let v: serde_json::Value = serde_json::from_str(data).unwrap();
        assert_eq!(v["meta"]["title"], HOSTILE);
        assert_eq!(v["meta"]["threads"][0], HOSTILE);
        assert_eq!(v["report"], HOSTILE);
        assert_eq!(v["flames"][0]["title"], HOSTILE);
        // Nothing of a name is in the page outside the data.
        let outside = html.replace(data, "");
        for part in ["pwned", "onerror", "<!--", "{{"] {
            assert!(!outside.contains(part), "{part} outside the data");
        }
    }

    #[test]
    fn the_policy_runs_only_the_pages_own_script() {
        let html = page();
        let csp = html.split("Content-Security-Policy\" content=\"").nth(1).unwrap();
        let csp = &csp[..csp.find('"').unwrap()];
        let script_src = csp.split(';').map(str::trim).find(|d| d.starts_with("script-src")).unwrap();
        assert!(!csp.contains("unsafe-inline") && !csp.contains("unsafe-eval"), "{csp}");
        let code = include_str!("view.js");
        assert_eq!(script_src, format!("script-src '{}'", sha256_source(code)), "no flame graph scripts");
        assert!(html.contains(&format!("<script>{code}</script>")), "the hash is of the script as inlined");
    }

    #[test]
    fn a_flame_graphs_own_script_is_named_by_its_hash() {
        let svg = r#"<?xml version="1.0"?><svg onload="init(evt)" x="1"><style type="text/css">text { x: 1 }</style><script type="text/ecmascript"><![CDATA[var a = 1;]]><![CDATA[function init(evt) {}]]></script><text>&lt;script&gt;</text></svg>"#;
        let (scripts, styles) = svg_sources(svg);
        let expected = ["var a = 1;function init(evt) {}", "init(evt)", "text { x: 1 }"].map(sha256_source);
        assert_eq!(scripts, [expected[0].clone(), "unsafe-hashes".into(), expected[1].clone()]);
        assert_eq!(styles, [expected[2].clone()]);
        // Markup beside CDATA (not inferno's form) gets no hash: that script does not run.
        assert_eq!(svg_sources("<svg><script><![CDATA[a()]]><x/></script></svg>"), (vec![], vec![]));
        let html =
            html(&json!({}), "", &Extras { report_text: String::new(), flame_graphs: vec![("f".into(), svg.into())] });
        assert!(expected.iter().all(|h| html.contains(&format!("'{h}'"))));
    }

    #[test]
    fn fill_leaves_the_values_alone() {
        let out = fill("a{{X}}b{{Y}}c", |n| if n == "X" { "{{Y}}" } else { "y" });
        assert_eq!(out, "a{{Y}}byc");
    }
}
