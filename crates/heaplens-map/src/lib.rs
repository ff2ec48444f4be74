//! heaplens map: the memory map of Moreta & Telea, "Visualizing Dynamic Memory Allocations"
//! (reference 003): time on x, address on y, one rectangle per block from its allocation to its
//! release (or to the end of the trace, for a block live at exit).
//!
//! Two passes over the trace: the first ([`layout`], a scan of the events on two processors,
//! or a replay for a time window) finds the time span, the address ranges the blocks touch
//! (for the compacted axis, [`axis`]) and the bytes per stack (for the top functions'
//! colours); the second ([`draw`], a replay of [`heaplens_interpret::view`]) draws each block
//! into a [`canvas::Canvas`] of bias-weighted antialiasing sums with shaded [`cushion`]s, and
//! follows the bytes in use for the [`occupancy`] bar. The second replays the two halves of a
//! large trace at once ([`heaplens_interpret::split`]) into two canvases that add up. Memory is
//! set by the pixels and the live blocks, not by the trace. The result is a
//! [`scene::Scene`], written as PNG or SVG.

#![warn(missing_docs)]

pub mod axis;
pub mod bins;
pub mod canvas;
pub mod color;
mod compose;
pub mod cushion;
pub mod draw;
pub mod granules;
pub mod layout;
pub mod occupancy;
pub mod page;
pub mod scene;
pub mod sites;
pub mod time_columns;
pub mod timeline;
pub mod units;

use std::path::Path;

use heaplens_interpret::idmap::{IdMap, IdTable};
use heaplens_interpret::load::{LoadError, Trace};
use heaplens_interpret::split::{replay_split, Half, Ran};
use heaplens_interpret::view::{replay_indexed, EventIndex, View};

use crate::axis::AddressAxis;
pub use crate::bins::{Align, Bins};
use crate::canvas::Canvas;
use crate::color::{Rgb, PALETTE};
pub use crate::cushion::Cushion;
pub use crate::draw::ColorBy;
use crate::draw::{Binning, Painter, Palette, ViewCanvas};
use crate::layout::Layout;
pub use crate::layout::Window;

/// How to draw the map.
#[derive(Debug, Clone)]
pub struct MapOptions {
    /// Columns of the map itself (the picture adds margins, the bar and the legend).
    pub width: usize,
    /// Rows of the map itself.
    pub height: usize,
    /// The bias of the antialiasing (equation 1), `> 0`; lower shows thin blocks more.
    pub alpha: f32,
    /// Antialias (the default); without, a block paints only the pixels whose centres it
    /// covers, and sub-pixel blocks vanish.
    pub antialias: bool,
    /// The blocks' luminance profile.
    pub cushion: Cushion,
    /// What colour shows.
    pub color_by: ColorBy,
    /// Call sites (or threads) given a colour of their own; the rest are grey.
    pub top: usize,
    /// Frames of the program's own code (skipping the standard and C libraries) that name a
    /// call site for [`ColorBy::Function`]: 2 is the allocating function and its caller.
    pub depth: usize,
    /// Frames also passed over when naming a call site (the program's own allocation wrappers,
    /// `heaplens map --skip`), matched against function names.
    pub skip: Vec<regex::Regex>,
    /// The part drawn.
    pub window: Window,
    /// One view, or one per size class or arena.
    pub bins: Bins,
    /// How several views are laid out.
    pub align: Align,
    /// Progress bars on stderr.
    pub progress: bool,
    /// Events payload bytes from which the drawing pass replays the two halves of the trace
    /// at once, on two processors, when no time window is asked for (see
    /// [`heaplens_interpret::split`]); `usize::MAX`: never.
    pub split_min_bytes: usize,
}

impl Default for MapOptions {
    fn default() -> Self {
        MapOptions {
            width: 1200,
            height: 640,
            alpha: 0.3,
            antialias: true,
            cushion: Cushion::Plateau,
            color_by: ColorBy::Function,
            top: 8,
            depth: 2,
            skip: Vec::new(),
            window: Window::default(),
            bins: Bins::None,
            align: Align::Time,
            progress: false,
            split_min_bytes: heaplens_interpret::split::MIN_BYTES,
        }
    }
}

/// Why there is no map.
#[derive(Debug, thiserror::Error)]
pub enum MapError {
    /// The trace could not be read, or has no events (an `--aggregate` recording).
    #[error(transparent)]
    Load(#[from] LoadError),
    /// No block lies in the window asked for.
    #[error("no block was allocated in the part of the trace asked for")]
    Empty,
}

/// One legend entry: a colour and what it stands for.
#[derive(Debug, Clone)]
pub struct LegendEntry {
    /// The colour.
    pub rgb: Rgb,
    /// What it stands for.
    pub label: String,
    /// Bytes allocated by the blocks of this colour.
    pub bytes: u64,
}

/// A drawn map: the picture, and what a caller may want to say about it.
pub struct Map {
    /// The picture.
    pub scene: scene::Scene,
    /// Where the map itself sits in the picture: `(left, top, width, height)` (with several
    /// views, the box around them all).
    pub area: (usize, usize, usize, usize),
    /// The colours of [`ColorBy::Function`] and [`ColorBy::Thread`] (empty for the scales).
    pub legend: Vec<LegendEntry>,
    /// Blocks drawn.
    pub blocks: u64,
    /// Views drawn (1 unless split by `bins`).
    pub views: usize,
    /// The window drawn, `CLOCK_MONOTONIC` ns.
    pub span: (u64, u64),
    /// The trace's first event.
    pub first_ts: u64,
    /// The compacted address axis.
    pub axis: AddressAxis,
    /// The most bytes in use in a column of the occupancy bar.
    pub peak_bytes: u64,
    /// What was wrong with the trace (truncated, damaged blocks); empty when it read whole.
    pub damage: Vec<String>,
    /// Whether the blocks were drawn in two halves of the trace at once
    /// ([`MapOptions::split_min_bytes`]).
    pub halves: bool,
}

/// Draws the map of the trace at `path`.
///
/// # Errors
/// [`MapError::Load`] for an unreadable file, a file that is not a trace, or a trace recorded
/// with `--aggregate` (no events to draw); [`MapError::Empty`] when no block is in the window.
pub fn map_file(path: &Path, o: &MapOptions) -> Result<Map, MapError> {
    let timing = heaplens_interpret::progress::Timing::start();
    let (layout, trace, index) = first_pass(path, o, o.bins == Bins::Size)?;
    timing.mark("first pass");
    let first_ts = layout.first_ts.ok_or(MapError::Empty)?;
    if layout.blocks == 0 {
        return Err(MapError::Empty);
    }
    let t0 = first_ts + o.window.from_ns.unwrap_or(0);
    let t1 = o.window.to_ns.map_or(layout.last_ts, |t| first_ts + t).max(t0 + 1);
    let axis = AddressAxis::new(layout.granules.ranges(), o.height as f64, 12.0);
    let (palette, legend) = palette(path, &trace, &layout, o);
    timing.mark("palette");

    // The views: their labels and granules, then their sizes.
    let (labels, granules, binning): (Vec<Option<String>>, Vec<_>, Binning) = match o.bins {
        Bins::None => (vec![None], vec![layout.granules.ranges()], Binning::One),
        Bins::Size => {
            let mut of_class = vec![None; bins::SIZE_CLASSES.len()];
            let (mut labels, mut granules) = (Vec::new(), Vec::new());
            for (k, g) in layout.granules_by_class.iter().enumerate().filter(|(_, g)| !g.is_empty()) {
                of_class[k] = Some(labels.len());
                labels.push(Some(bins::size_label(k)));
                granules.push(g.ranges());
            }
            (labels, granules, Binning::Size(of_class))
        }
        Bins::Arena => {
            let labels = axis.segments.iter().map(|s| Some(axis::range_label(s.lo, s.hi))).collect();
            let granules = axis
                .segments
                .iter()
                .map(|s| layout.granules.ranges_in(s.lo >> axis::GRANULE_SHIFT, s.hi >> axis::GRANULE_SHIFT))
                .collect();
            (labels, granules, Binning::Arena(axis.clone()))
        }
    };
    let n = labels.len();
    let (vw, vh) = match (n, o.align) {
        (1, _) => (o.width, o.height),
        (_, Align::Time) => (o.width, ((o.height.saturating_sub((n - 1) * compose::VIEW_GAP)) / n).max(24)),
        (_, Align::Address) => (((o.width.saturating_sub((n - 1) * compose::VIEW_GAP)) / n).max(24), o.height),
    };
    let bar_width = if n > 1 && o.align == Align::Address { n * vw + (n - 1) * compose::VIEW_GAP } else { vw };
    let painter = |half: Half| {
        let views: Vec<ViewCanvas> = granules
            .iter()
            .map(|g| ViewCanvas {
                canvas: Canvas::new(vw, vh, o.alpha, o.antialias, o.cushion),
                axis: AddressAxis::new(g.clone(), vh as f64, 12.0),
                occupancy: occupancy::Occupancy::new(vw),
            })
            .collect();
        Painter::new(half, views, binning.clone(), vw, bar_width, &palette, o.color_by, (t0, t1), layout.last_ts)
    };
    // Two halves of the replay drawn at once, on two processors.
    let (trace, painter, ran) = replay_split(path, trace, &index, painter, o.progress, o.split_min_bytes)?;
    let halves = ran != Ran::Whole;
    timing.mark("drawing pass");
    let peak_bytes = painter.occupancy.peak();
    let bar = painter.occupancy.render(compose::BAR_ROWS);
    let parts: Vec<compose::ViewPart> = painter
        .views
        .into_iter()
        .zip(labels)
        .map(|(v, label)| compose::ViewPart {
            label,
            bar: if n > 1 { Some(v.occupancy.render(compose::VIEW_BAR_ROWS)) } else { None },
            pixels: v.canvas.finish(),
            axis: v.axis,
        })
        .collect();
    let title = format!(
        "heaplens map: {}",
        trace.process.as_ref().map_or_else(|| path.display().to_string(), |p| p.exe.to_string_lossy().into_owned())
    );
    let (scene, area) = compose::compose(&compose::Parts {
        title: &title,
        view_size: (vw, vh),
        views: &parts,
        align: o.align,
        bar,
        bar_width,
        span_ns: (t0 - first_ts, t1 - first_ts),
        peak_bytes,
        legend: &legend,
        color_by: o.color_by,
    });
    let damage = damage(&trace, &layout.bytes_by_stack);
    timing.mark("composed");
    Ok(Map {
        scene,
        area,
        legend,
        blocks: layout.blocks,
        views: n,
        span: (t0, t1),
        first_ts,
        axis,
        peak_bytes,
        damage,
        halves,
    })
}

/// The first pass: a scan when no time window is asked for (only allocations and the span
/// matter), else a replay in two halves at once ([`Layout::replay`]). Either notes where the
/// events lie, so the second pass reads the file once more instead of twice.
fn first_pass(path: &Path, o: &MapOptions, by_class: bool) -> Result<(Layout, Trace, EventIndex), LoadError> {
    if o.window.from_ns.is_none() && o.window.to_ns.is_none() {
        return Layout::scan(path, o.window, by_class, o.progress);
    }
    Layout::replay(path, o.window, by_class, o.progress, o.split_min_bytes)
}

/// The second pass into `view`, after [`first_pass`].
fn second_pass(
    path: &Path,
    trace: Trace,
    index: EventIndex,
    view: &mut dyn View,
    progress: bool,
) -> Result<Trace, LoadError> {
    replay_indexed(path, trace, &index, view, progress)
}

/// A drawn timeline.
pub struct TimelinePicture {
    /// The picture.
    pub scene: scene::Scene,
    /// Where the chart sits in the picture: `(left, top, width, height)`.
    pub area: (usize, usize, usize, usize),
    /// The highest bytes in use and when, ns since the first event.
    pub peak: (u64, u64),
    /// The holders at the peak: call site (`None`: the rest) and bytes, most first.
    pub at_peak: Vec<(Option<String>, u64)>,
    /// What was wrong with the trace; empty when it read whole.
    pub damage: Vec<String>,
}

/// Draws bytes in use over time for the trace at `path`, stacked by the `o.top` call sites
/// holding the most bytes over time (bytes x nanoseconds). Uses `width`, `height`, `top`,
/// `depth`, `window` (its time part) and `progress` of `o`.
///
/// # Errors
/// As [`map_file`].
pub fn timeline_file(path: &Path, o: &MapOptions) -> Result<TimelinePicture, MapError> {
    let window = Window { addresses: None, ..o.window };
    let (layout, trace, index) = Layout::replay(path, window, false, o.progress, o.split_min_bytes)?;
    let first_ts = layout.first_ts.ok_or(MapError::Empty)?;
    if layout.blocks == 0 {
        return Err(MapError::Empty);
    }
    let t0 = first_ts + o.window.from_ns.unwrap_or(0);
    let t1 = o.window.to_ns.map_or(layout.last_ts, |t| first_ts + t).max(t0 + 1);
    // Ranked by bytes allocated, as `heaplens map` and the page rank them (the map's cheaper
    // first pass has no lifetimes), so that a call site has one colour in every picture.
    let s = sites::sites(path, &trace, &layout.bytes_by_stack, (o.depth, &o.skip), o.top.min(PALETTE.len()));
    let make = |half| timeline::Timeline::new(&s.of_stack, s.top.len(), o.width, (t0, t1), half);
    let (trace, tl, _) = replay_split(path, trace, &index, make, o.progress, o.split_min_bytes)?;
    let tl = tl.finish();
    let labels: Vec<String> = s.top.iter().map(|(l, _)| l.clone()).collect();
    let peak_col = (((tl.peak.1 - t0) as f64 / (t1 - t0) as f64 * o.width as f64) as usize).min(o.width - 1);
    let title = format!(
        "heaplens timeline: {}",
        trace.process.as_ref().map_or_else(|| path.display().to_string(), |p| p.exe.to_string_lossy().into_owned())
    );
    let (scene, area) = compose::compose_timeline(&compose::TimelineParts {
        title: &title,
        width: o.width,
        height: o.height,
        columns: &tl.columns,
        labels: &labels,
        peak: (tl.peak.0, peak_col, tl.peak.1 - first_ts),
        at_peak: &tl.at_peak,
        span_ns: (t0 - first_ts, t1 - first_ts),
    });
    let mut at_peak: Vec<(Option<String>, u64)> =
        tl.at_peak.iter().enumerate().map(|(k, &b)| (labels.get(k).cloned(), b.max(0) as u64)).collect();
    at_peak.sort_by_key(|r| std::cmp::Reverse(r.1));
    Ok(TimelinePicture {
        scene,
        area,
        peak: (tl.peak.0.max(0) as u64, tl.peak.1 - first_ts),
        at_peak,
        damage: damage(&trace, &layout.byte_ns_by_stack),
    })
}

/// What was wrong with the trace, as warnings; `stacks` are the stack ids the blocks named.
fn damage(trace: &Trace, stacks: &IdMap<u32, f64>) -> Vec<String> {
    let h = &trace.health;
    let mut damage = Vec::new();
    if let Some(at) = h.truncated_at {
        damage.push(format!("the trace is truncated at byte {at}"));
    }
    if h.corrupt_blocks + h.malformed_blocks > 0 {
        damage.push(format!("{} damaged blocks skipped", h.corrupt_blocks + h.malformed_blocks));
    }
    let undefined = stacks.keys().filter(|&&id| id != 0 && trace.stacks.get(id).is_none()).count();
    if undefined > 0 {
        damage.push(format!("{undefined} stack ids the trace never defined, drawn as unknown"));
    }
    damage
}

/// The colours of the stacks (top call sites) and threads, and the legend.
fn palette(path: &Path, trace: &Trace, layout: &Layout, o: &MapOptions) -> (Palette, Vec<LegendEntry>) {
    let mut p = Palette {
        stacks: IdTable::new(0),
        colors: Vec::new(),
        threads: IdMap::default(),
        max_waste: layout.max_waste(),
    };
    let mut legend = Vec::new();
    let top = o.top.min(PALETTE.len());
    match o.color_by {
        ColorBy::Function => {
            let s = sites::sites(path, trace, &layout.bytes_by_stack, (o.depth, &o.skip), top);
            for (k, (label, bytes)) in s.top.iter().enumerate() {
                legend.push(LegendEntry { rgb: PALETTE[k], label: label.clone(), bytes: *bytes as u64 });
            }
            p.colors = PALETTE[..s.top.len()].to_vec();
            for (&stack, &k) in s.of_stack.iter() {
                p.stacks.set(stack, k as u8 + 1);
            }
        }
        ColorBy::Thread => {
            for (k, tid) in layout.threads.iter().take(top).enumerate() {
                p.threads.insert(*tid, PALETTE[k]);
                let name = trace.thread_names.iter().rfind(|n| n.tid == *tid).map(|n| format!(" ({})", n.name));
                let name = name.unwrap_or_default();
                legend.push(LegendEntry { rgb: PALETTE[k], label: format!("thread {tid}{name}"), bytes: 0 });
            }
        }
        _ => {}
    }
    (p, legend)
}
