//! The picture around the map: title, address labels and the bands of cut gaps on the left,
//! the occupancy bar and the time axis below, the legend on the right.

use crate::axis::AddressAxis;
use crate::bins::Align;
use crate::color::{blue_to_red, to_u8};
use crate::draw::ColorBy;
use crate::scene::{Item, Scene};
use crate::units::{human_bytes, human_ns};
use crate::LegendEntry;
use heaplens_interpret::names::{for_xml, keep_end};

/// Rows of the occupancy bar.
pub const BAR_ROWS: usize = 18;

const LEFT: usize = 132;
const TOP: usize = 34;
const LEGEND_WIDTH: usize = 380;
const INK: [u8; 3] = [30, 30, 30];
const FAINT: [u8; 3] = [110, 110, 110];
const BAND: [u8; 3] = [225, 225, 225];

/// Rows between two views (room for the next view's label).
pub const VIEW_GAP: usize = 16;
/// Rows of a view's own occupancy bar.
pub const VIEW_BAR_ROWS: usize = 5;

/// One view of the map.
pub struct ViewPart {
    /// What it shows (a size class, an address range); `None` for the only view.
    pub label: Option<String>,
    /// Its pixels, rows top first.
    pub pixels: Vec<[u8; 3]>,
    /// Its address axis.
    pub axis: AddressAxis,
    /// Its own occupancy bar, with several views.
    pub bar: Option<Vec<[u8; 3]>>,
}

/// What the picture is made of.
pub struct Parts<'a> {
    pub title: &'a str,
    /// Each view's columns and rows.
    pub view_size: (usize, usize),
    pub views: &'a [ViewPart],
    pub align: Align,
    /// The whole picture's occupancy bar, `bar_width` columns.
    pub bar: Vec<[u8; 3]>,
    pub bar_width: usize,
    /// The window, ns since the first event.
    pub span_ns: (u64, u64),
    pub peak_bytes: u64,
    pub legend: &'a [LegendEntry],
    pub color_by: ColorBy,
}

fn text(x: usize, y: usize, s: impl Into<String>) -> Item {
    Item::Text { x, y, scale: 1, rgb: INK, text: s.into() }
}

/// Characters of a legend's label.
const LABEL_CHARS: usize = 44;

/// Pixels of `s` in 8-pixel glyphs: a glyph per character, whatever its bytes (`µs`, `…`).
fn width(s: &str) -> usize {
    s.chars().count() * 8
}

/// A name from the trace as a legend shows it: escaped first, so that the cut counts what is
/// drawn, its frames' parameter lists shortened to `(…)` when it is too long (a C++ signature
/// would otherwise fill the legend and the cut lose the function's name), then its end kept
/// (the innermost frame names the site). The page's legend shows the same (`page/mod.rs`).
pub(crate) fn name_label(s: &str) -> String {
    let s = for_xml(s);
    if s.chars().count() <= LABEL_CHARS {
        return s.into_owned();
    }
    keep_end(&short_params(&s), LABEL_CHARS).into_owned()
}

/// `s` with the contents of each call's parameter list (a `(` right after a name or a
/// template's `>`) replaced by `…`: `f(std::vector<…> const&, int)` becomes `f(…)`;
/// `(anonymous namespace)` stays.
fn short_params(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    // Depth inside a parameter list being shortened, and whether it held anything.
    let (mut depth, mut held) = (0usize, false);
    let mut prev = ' ';
    for c in s.chars() {
        if depth > 0 {
            match c {
                '(' => depth += 1,
                ')' => depth -= 1,
                _ => held |= !c.is_whitespace(),
            }
            if depth == 0 {
                out.push_str(if held { "…)" } else { ")" });
            }
        } else if c == '(' && (prev.is_alphanumeric() || prev == '_' || prev == '>') {
            (depth, held) = (1, false);
            out.push('(');
        } else {
            out.push(c);
        }
        prev = c;
    }
    out
}

/// How many intervals (at most `most`) the time axis `[from, to]` over `w` pixels can label
/// without its labels running together (a narrow picture gets fewer).
fn ticks_that_fit(w: usize, (from, to): (u64, u64), most: usize) -> usize {
    (1..=most.max(1))
        .rev()
        .find(|&n| {
            let widest = (0..=n).map(|k| width(&human_ns(from + (to - from) * k as u64 / n as u64))).max().unwrap_or(0);
            // Labels are centred on ticks w / n apart, but the end ones hang inwards whole:
            // next to them a centred label needs half its width more.
            w / n >= widest * 3 / 2 + 8
        })
        .unwrap_or(1)
}

/// The time axis under `[x, x + w)`: ticks and labels at `y`, at most `ticks` intervals.
fn time_axis(it: &mut Vec<Item>, x: usize, w: usize, y: usize, (from, to): (u64, u64), ticks: usize) {
    let ticks = ticks_that_fit(w, (from, to), ticks);
    for k in 0..=ticks {
        let tx = x + (w - 1) * k / ticks;
        it.push(Item::Rect { x: tx, y, w: 1, h: 5, rgb: INK });
        let label = human_ns(from + (to - from) * k as u64 / ticks as u64);
        let lx = tx.saturating_sub(if k == ticks {
            width(&label)
        } else if k == 0 {
            0
        } else {
            width(&label) / 2
        });
        it.push(text(lx, y + 8, label));
    }
}

/// The address labels of `axis` for a view whose rows `[top, top + h)` are on the picture, in
/// the left margin, and its cut gaps as bands across `[x, x + w)`.
fn address_axis(it: &mut Vec<Item>, axis: &AddressAxis, x: usize, w: usize, top: usize, h: usize, labels: bool) {
    let row = |y: f64| top + h - (y.round() as usize).min(h);
    for (i, seg) in axis.segments.iter().enumerate() {
        if labels {
            it.push(text(4, row(seg.y0).saturating_sub(9), format!("{:#x}", seg.lo)));
            if seg.y1 - seg.y0 >= 30.0 {
                it.push(Item::Text { x: 4, y: row(seg.y1) + 2, scale: 1, rgb: FAINT, text: format!("{:#x}", seg.hi) });
            }
        }
        if let Some(next) = axis.segments.get(i + 1) {
            let (band_top, bottom) = (row(next.y0), row(seg.y1));
            it.push(Item::Rect { x, y: band_top, w, h: bottom.saturating_sub(band_top).max(1), rgb: BAND });
            it.push(Item::Text {
                x: x + 4,
                y: band_top.saturating_sub(1),
                scale: 1,
                rgb: FAINT,
                text: format!("{} cut", human_bytes(next.lo - seg.hi)),
            });
        }
    }
}

/// The picture, and where the views sit in it (`left, top, width, height` of their box).
pub fn compose(p: &Parts<'_>) -> (Scene, (usize, usize, usize, usize)) {
    let (vw, vh) = p.view_size;
    let n = p.views.len();
    let label_h = if n > 1 { 12 } else { 0 };
    let vbar_h = if n > 1 { VIEW_BAR_ROWS + 3 } else { 0 };
    let (box_w, box_h) = match p.align {
        Align::Time => (vw, n * (label_h + vh + vbar_h) + (n - 1) * (VIEW_GAP - label_h.min(VIEW_GAP))),
        Align::Address => (p.bar_width, label_h + vh + vbar_h + if n > 1 { 10 } else { 0 }),
    };
    let bar_top = TOP + box_h + 6;
    let mut s = Scene {
        width: LEFT + box_w.max(p.bar_width) + 16 + LEGEND_WIDTH,
        height: bar_top + BAR_ROWS + 40,
        items: Vec::new(),
    };
    let it = &mut s.items;
    it.push(Item::Text { x: 8, y: 8, scale: 2, rgb: INK, text: for_xml(p.title).into_owned() });
    for (i, v) in p.views.iter().enumerate() {
        let (x, y) = match p.align {
            Align::Time => (LEFT, TOP + i * (label_h + vh + vbar_h + VIEW_GAP - label_h.min(VIEW_GAP))),
            Align::Address => (LEFT + i * (vw + VIEW_GAP), TOP),
        };
        if let Some(l) = &v.label {
            it.push(text(x, y, l.clone()));
        }
        let y = y + label_h;
        it.push(Item::Rect { x: x - 1, y: y - 1, w: vw + 2, h: vh + 2, rgb: FAINT });
        it.push(Item::Bitmap { x, y, w: vw, h: vh, pixels: v.pixels.clone() });
        address_axis(it, &v.axis, x, vw, y, vh, p.align == Align::Time || i == 0);
        if let Some(bar) = &v.bar {
            it.push(Item::Bitmap { x, y: y + vh + 2, w: vw, h: VIEW_BAR_ROWS, pixels: bar.clone() });
        }
        if p.align == Align::Address && n > 1 {
            let (from, to) = p.span_ns;
            it.push(Item::Text {
                x,
                y: y + vh + vbar_h,
                scale: 1,
                rgb: FAINT,
                text: format!("{}-{}", human_ns(from), human_ns(to)),
            });
        }
    }

    // Below: bytes in use, then the time axis (side by side, each view has its own).
    let bar_w = if p.align == Align::Address { p.bar_width } else { vw };
    if p.align == Align::Time || n == 1 {
        it.push(Item::Rect { x: LEFT - 1, y: bar_top - 1, w: bar_w + 2, h: BAR_ROWS + 2, rgb: FAINT });
        it.push(Item::Bitmap { x: LEFT, y: bar_top, w: bar_w, h: BAR_ROWS, pixels: p.bar.clone() });
        it.push(text(4, bar_top + 5, "bytes in use"));
        time_axis(it, LEFT, bar_w, bar_top + BAR_ROWS + 1, p.span_ns, 4);
    }
    let note = if n > 1 { "each view's bar: its bytes in use; " } else { "" };
    it.push(text(
        LEFT,
        bar_top + BAR_ROWS + 24,
        format!("{note}time since the first event; peak {} in use", human_bytes(p.peak_bytes)),
    ));

    // The legend.
    let lx = LEFT + box_w.max(bar_w) + 16;
    legend(it, lx, p.legend, p.color_by);
    (s, (LEFT, TOP, box_w, box_h))
}

fn legend(it: &mut Vec<Item>, lx: usize, entries: &[LegendEntry], color_by: ColorBy) {
    let what = match color_by {
        ColorBy::Function => "colour: call site (bytes allocated)",
        ColorBy::Thread => "colour: thread",
        ColorBy::Size => "colour: size class (usable bytes)",
        ColorBy::Waste => "colour: waste (usable - requested)",
        ColorBy::Lifetime => "colour: lifetime",
    };
    it.push(text(lx, TOP, what));
    let mut y = TOP + 16;
    for e in entries {
        it.push(Item::Rect { x: lx, y, w: 12, h: 12, rgb: to_u8(e.rgb) });
        it.push(text(lx + 18, y + 2, name_label(&e.label)));
        if e.bytes > 0 {
            it.push(Item::Text { x: lx + 18, y: y + 12, scale: 1, rgb: FAINT, text: human_bytes(e.bytes) });
            y += 10;
        }
        y += 18;
    }
    if matches!(color_by, ColorBy::Function | ColorBy::Thread) {
        it.push(Item::Rect { x: lx, y, w: 12, h: 12, rgb: to_u8(crate::color::OTHER) });
        it.push(text(lx + 18, y + 2, "the rest"));
    } else {
        for i in 0..200 {
            it.push(Item::Rect { x: lx + i, y, w: 1, h: 12, rgb: to_u8(blue_to_red(i as f32 / 199.0)) });
        }
        let (lo, hi) = match color_by {
            ColorBy::Size => ("16 B", "1 MiB+"),
            ColorBy::Waste => ("none", "most"),
            _ => ("1 us", "whole run"),
        };
        it.push(text(lx, y + 16, lo));
        it.push(text(lx + 200 - width(hi), y + 16, hi));
    }
}

/// What the timeline picture is made of.
pub struct TimelineParts<'a> {
    pub title: &'a str,
    pub width: usize,
    pub height: usize,
    /// Per column, bytes in use per site (the rest last).
    pub columns: &'a [Vec<i64>],
    /// The sites' labels, heaviest first.
    pub labels: &'a [String],
    /// The peak: bytes, its column, its time (ns since the first event), and its split.
    pub peak: (i64, usize, u64),
    pub at_peak: &'a [i64],
    pub span_ns: (u64, u64),
}

/// The timeline: stacked bytes in use over time, the peak marked, its holders in the legend.
pub fn compose_timeline(p: &TimelineParts<'_>) -> (Scene, (usize, usize, usize, usize)) {
    let (w, h) = (p.width, p.height);
    let peak = p.peak.0.max(1) as f64;
    let colour = |k: usize| to_u8(if k < p.labels.len() { crate::color::PALETTE[k] } else { crate::color::OTHER });
    let mut px = vec![[255u8; 3]; w * h];
    for (c, split) in p.columns.iter().enumerate().take(w) {
        let mut y = 0.0;
        for (k, &b) in split.iter().enumerate() {
            let top = y + b.max(0) as f64 / peak * (h as f64 - 1.0);
            for r in (y.round() as usize)..(top.round() as usize).min(h) {
                px[(h - 1 - r) * w + c] = colour(k);
            }
            y = top;
        }
    }
    for r in 0..h {
        px[r * w + p.peak.1.min(w - 1)] = INK;
    }
    let axis_top = TOP + h + 4;
    let mut s = Scene { width: LEFT + w + 16 + LEGEND_WIDTH, height: axis_top + 40, items: Vec::new() };
    let it = &mut s.items;
    it.push(Item::Text { x: 8, y: 8, scale: 2, rgb: INK, text: for_xml(p.title).into_owned() });
    it.push(Item::Rect { x: LEFT - 1, y: TOP - 1, w: w + 2, h: h + 2, rgb: FAINT });
    it.push(Item::Bitmap { x: LEFT, y: TOP, w, h, pixels: px });
    for k in 0..=4 {
        let y = TOP + h - 1 - (h - 1) * k / 4;
        it.push(Item::Rect { x: LEFT - 6, y, w: 5, h: 1, rgb: INK });
        let label = human_bytes(p.peak.0.max(0) as u64 * k as u64 / 4);
        it.push(text(LEFT - 8 - width(&label), y.saturating_sub(4), label));
    }
    let (from, to) = p.span_ns;
    let ticks = ticks_that_fit(w, (from, to), 4);
    for k in 0..=ticks {
        let x = LEFT + (w - 1) * k / ticks;
        it.push(Item::Rect { x, y: axis_top - 3, w: 1, h: 5, rgb: INK });
        let label = human_ns(from + (to - from) * k as u64 / ticks as u64);
        let lx = x.saturating_sub(if k == ticks {
            width(&label)
        } else if k == 0 {
            0
        } else {
            width(&label) / 2
        });
        it.push(text(lx, axis_top + 5, label));
    }
    it.push(text(LEFT, axis_top + 20, "time since the first event"));
    let peak_label = format!("peak {} at {}", human_bytes(p.peak.0.max(0) as u64), human_ns(p.peak.2));
    let px_x = LEFT + p.peak.1.min(w - 1);
    let lx =
        if px_x + 8 + width(&peak_label) < LEFT + w { px_x + 4 } else { px_x.saturating_sub(4 + width(&peak_label)) };
    it.push(Item::Text { x: lx, y: TOP + 4, scale: 1, rgb: INK, text: peak_label });

    let lx = LEFT + w + 16;
    it.push(text(lx, TOP, "bytes in use by call site, at the peak:"));
    let mut y = TOP + 16;
    let mut rows: Vec<(usize, i64)> = p.at_peak.iter().copied().enumerate().collect();
    rows.sort_by_key(|r| std::cmp::Reverse(r.1));
    for (k, b) in rows {
        let label = if k < p.labels.len() { name_label(&p.labels[k]) } else { "the rest".to_string() };
        it.push(Item::Rect { x: lx, y, w: 12, h: 12, rgb: colour(k) });
        it.push(text(lx + 18, y + 2, label));
        it.push(Item::Text { x: lx + 18, y: y + 12, scale: 1, rgb: FAINT, text: human_bytes(b.max(0) as u64) });
        y += 28;
    }
    (s, (LEFT, TOP, w, h))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The legend's texts of a timeline whose one site is named `label`.
    fn legend_texts(label: &str) -> Vec<String> {
        let labels = [label.to_string()];
        let columns = vec![vec![10, 0]; 8];
        let (scene, _) = compose_timeline(&TimelineParts {
            title: "t",
            width: 8,
            height: 8,
            columns: &columns,
            labels: &labels,
            peak: (10, 3, 1000),
            at_peak: &[10, 0],
            span_ns: (0, 2000),
        });
        scene
            .items
            .into_iter()
            .filter_map(|i| if let Item::Text { text, .. } = i { Some(text) } else { None })
            .collect()
    }

    #[test]
    fn legend_labels_are_cut_by_characters() {
        // Rust's elided names: the old byte cut (`len - 41`) fell inside a `…` of these.
        let name = "alloc::vec::Vec<…>::push > alloc::vec::Vec<…>::push_mut";
        for pad in 0..6 {
            let label = format!("{}{name}", "x".repeat(pad));
            let texts = legend_texts(&label);
            let shown = texts.iter().find(|t| t.starts_with("...")).unwrap_or_else(|| panic!("{texts:?}"));
            assert_eq!(shown.chars().count(), LABEL_CHARS, "{shown}");
            assert!(label.ends_with(&shown[3..]), "{shown}");
        }
        let texts = legend_texts("ctl\x01\x1b[31m\x07name");
        assert!(texts.iter().any(|t| t == "ctl\\x01\\x1b[31m\\x07name"), "{texts:?}");
    }

    #[test]
    fn long_signatures_keep_the_function_name() {
        let long = "make_red_widget > Registry::insert(std::vector<std::__cxx11::basic_string<…>, std::allocator<…> > const&, unsigned long)";
        assert_eq!(name_label(long), "make_red_widget > Registry::insert(…)");
        assert_eq!(
            short_params("f() > (anonymous namespace)::pool::pool()"),
            "f() > (anonymous namespace)::pool::pool()"
        );
        assert_eq!(short_params("g<…>(int, char) > h(x(y))"), "g<…>(…) > h(…)");
        assert_eq!(name_label("short(int)"), "short(int)");
    }

    #[test]
    fn label_widths_count_characters() {
        assert_eq!(width("12.5 µs"), 7 * 8);
        assert_eq!(width("Vec<…>"), 6 * 8);
    }
}
