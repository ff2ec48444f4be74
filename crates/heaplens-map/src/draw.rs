//! The second pass: every block drawn as it ends (or at the end of the trace, for the blocks
//! still live), and the bytes in use followed for the occupancy bar.

use heaplens_interpret::idmap::{IdMap, IdTable};
use heaplens_interpret::split::{Half, Joinable};
use heaplens_interpret::view::{Block, Release, View};

use crate::axis::AddressAxis;
use crate::canvas::Canvas;
use crate::color::{blue_to_red, Rgb, OTHER};
use crate::occupancy::Occupancy;
use crate::time_columns::TimeColumns;

/// What a block's colour shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColorBy {
    /// The call site that allocated it (the top ones by bytes, the rest grey).
    Function,
    /// The allocating thread.
    Thread,
    /// Its size class: log2 of its usable size, 16 bytes (blue) to 1 MiB and more (red).
    Size,
    /// Usable minus requested bytes, as a share of the usable size: blue none, red the most.
    Waste,
    /// Its lifetime on a log scale, 1 µs (blue) to the whole run (red; live at exit too).
    Lifetime,
}

/// Colours fixed by the first pass.
pub struct Palette {
    /// Per stack id ([`ColorBy::Function`]): an index into [`Palette::colors`] plus one, 0 for
    /// [`OTHER`]. Dense (the trie's node ids are), since every block drawn looks its stack up.
    pub stacks: IdTable<u8>,
    /// The colours `stacks` refers to.
    pub colors: Vec<Rgb>,
    /// Per thread ([`ColorBy::Thread`]).
    pub threads: IdMap<u32, Rgb>,
    /// The largest waste share, for [`ColorBy::Waste`].
    pub max_waste: f64,
}

/// Which view a block is drawn in.
#[derive(Clone)]
pub enum Binning {
    /// One view.
    One,
    /// By size class: the view of each class of [`crate::bins::SIZE_CLASSES`] (`None`: none).
    Size(Vec<Option<usize>>),
    /// By segment of this axis (the whole trace's).
    Arena(AddressAxis),
}

impl Binning {
    fn view(&self, b: &Block) -> Option<usize> {
        match self {
            Binning::One => Some(0),
            Binning::Size(views) => views[crate::bins::size_class(b.usable)],
            Binning::Arena(axis) => axis.segment(b.addr),
        }
    }
}

/// One view: its canvas, its address axis, its bytes in use.
pub struct ViewCanvas {
    /// The pixels.
    pub canvas: Canvas,
    /// Its address axis.
    pub axis: AddressAxis,
    /// Its bytes in use.
    pub occupancy: Occupancy,
}

/// Draws the blocks of the replay onto the views' canvases.
pub struct Painter<'a> {
    /// The views.
    pub views: Vec<ViewCanvas>,
    /// Bytes in use in all the views, under the picture.
    pub occupancy: Occupancy,
    binning: Binning,
    palette: &'a Palette,
    color_by: ColorBy,
    /// The window, `CLOCK_MONOTONIC` ns, and the columns of events in it.
    time: TimeColumns,
    /// Columns per nanosecond, for the blocks' edges.
    cols_per_ns: f64,
    /// The trace's last event, where live blocks end.
    end_ts: u64,
    started: bool,
    /// Columns of the bar per column of a view.
    bar_scale: f64,
    /// The colour of the stack drawn last.
    last_color: (u32, Rgb),
    /// Per view, the segment of its axis drawn in last ([`AddressAxis::rows_hinted`]).
    hints: Vec<usize>,
}

impl<'a> Painter<'a> {
    /// A painter for the window `[t0, t1]` on `views` (`width` columns of time each), the
    /// whole picture's bytes in use followed over `bar_width` columns, for `half` of a replay
    /// (see [`heaplens_interpret::split`]).
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        half: Half,
        views: Vec<ViewCanvas>,
        binning: Binning,
        width: usize,
        bar_width: usize,
        palette: &'a Palette,
        color_by: ColorBy,
        (t0, t1): (u64, u64),
        end_ts: u64,
    ) -> Painter<'a> {
        let span = (t1.saturating_sub(t0)).max(1);
        Painter {
            hints: vec![0; views.len()],
            views,
            occupancy: Occupancy::new(bar_width),
            binning,
            bar_scale: bar_width as f64 / width as f64,
            palette,
            color_by,
            time: TimeColumns::new(width, (t0, t1)),
            cols_per_ns: width as f64 / span as f64,
            end_ts,
            // A later half's bar starts at the cut, not at the window's start.
            started: half == Half::Later,
            last_color: (u32::MAX, OTHER),
        }
    }

    /// Marks a release of a block allocated before this replay (see [`Occupancy::mark`]).
    fn released_unseen(&mut self, r: &Release) {
        let col = self.col(r.ts);
        let bar = col.map(|c| (c as f64 * self.bar_scale) as usize);
        self.occupancy.mark();
        self.occupancy.event(bar, 0);
        if self.views.len() > 1 {
            for v in &mut self.views {
                v.occupancy.mark_tentative(col);
            }
        }
    }

    fn x(&self, ts: u64) -> f64 {
        // Through i64: one conversion instruction (see `canvas::trunc`).
        ts.wrapping_sub(self.time.t0) as i64 as f64 * self.cols_per_ns
    }

    /// The column of `ts` in a view, `None` outside the window.
    #[inline]
    fn col(&mut self, ts: u64) -> Option<usize> {
        let col = self.time.of(ts)?;
        if !self.started {
            self.started = true;
            self.occupancy.start();
            for v in &mut self.views {
                v.occupancy.start();
            }
        }
        Some(col)
    }

    #[inline]
    fn occupied(&mut self, b: &Block, ts: u64, delta: i64) {
        let col = self.col(ts);
        // A single view's bar is the picture's.
        if self.views.len() == 1 {
            return self.occupancy.event(col, delta);
        }
        self.occupancy.event(col.map(|c| (c as f64 * self.bar_scale) as usize), delta);
        {
            if let Some(v) = self.binning.view(b) {
                self.views[v].occupancy.event(col, delta);
            }
        }
    }

    fn color(&mut self, b: &Block, lifetime: Option<u64>) -> Rgb {
        match self.color_by {
            ColorBy::Function => {
                // Blocks of one stack come in runs.
                if self.last_color.0 != b.stack {
                    let k = self.palette.stacks.get(b.stack) as usize;
                    self.last_color = (b.stack, if k == 0 { OTHER } else { self.palette.colors[k - 1] });
                }
                self.last_color.1
            }
            ColorBy::Thread => self.palette.threads.get(&b.tid).copied().unwrap_or(OTHER),
            ColorBy::Size => blue_to_red(((b.usable.max(1) as f32).log2() - 4.0) / 16.0),
            ColorBy::Waste => {
                let share = b.usable.saturating_sub(b.size) as f64 / b.usable.max(1) as f64;
                blue_to_red((share / self.palette.max_waste.max(1e-9)) as f32)
            }
            ColorBy::Lifetime => {
                let span = (self.end_ts.saturating_sub(self.time.t0)).max(10_000) as f64;
                let v = match lifetime {
                    Some(ns) => ((ns.max(1) as f64).log10() - 3.0) / (span.log10() - 3.0),
                    None => 1.0,
                };
                blue_to_red(v as f32)
            }
        }
    }

    fn draw(&mut self, b: &Block, end: u64, lifetime: Option<u64>) {
        if b.addr == 0 || end < self.time.t0 || b.ts > self.time.t1 {
            return;
        }
        let Some(v) = self.binning.view(b) else { return };
        let Some((y0, y1)) = self.views[v].axis.rows_hinted(b.addr, b.usable, &mut self.hints[v]) else { return };
        let rgb = self.color(b, lifetime);
        let x0 = self.x(b.ts);
        let x1 = self.x(end).max(x0 + MIN_DRAWN_NS * self.cols_per_ns);
        self.views[v].canvas.rect(x0, x1, y0, y1, rgb);
    }
}

/// How long a block lasts on the map at least, in nanoseconds. A block released at the time of
/// its allocation (within one unit of the trace's clock: 13 ns where threads record at once,
/// about 0.4 µs where one records alone) would cover nothing, and a run of them (a buffer
/// allocated and freed in a loop) vanish from the map however many they are; drawn this long,
/// the bias of the antialiasing keeps them visible as the paper means it to.
const MIN_DRAWN_NS: f64 = 10.0;

impl View for Painter<'_> {
    fn allocation(&mut self, b: &Block) {
        if b.addr != 0 {
            self.occupied(b, b.ts, b.size as i64);
        }
    }

    fn deallocation(&mut self, r: &Release, b: &Block) {
        self.draw(b, r.ts, Some(r.ts.saturating_sub(b.ts)));
        self.occupied(b, r.ts, -(b.size as i64));
    }

    fn unmatched(&mut self, r: &Release) {
        if r.addr != 0 {
            self.released_unseen(r);
        }
    }

    fn overwritten(&mut self, b: &Block) {
        // Its release was not seen: it leaves the bytes in use, at no column.
        self.occupancy.event(None, -(b.size as i64));
        if self.views.len() > 1 {
            if let Some(v) = self.binning.view(b) {
                self.views[v].occupancy.event(None, -(b.size as i64));
            }
        }
    }

    fn end(&mut self, live: &mut dyn Iterator<Item = &Block>) {
        let end = self.end_ts;
        for b in live {
            self.draw(b, end, None);
        }
    }
}

impl Joinable for Painter<'_> {
    fn join(&mut self, later: Self, releases: &[(Release, Option<Block>)]) {
        let size = |b: &Option<Block>| b.map(|b| b.size);
        let sizes: Vec<Option<u64>> = releases.iter().map(|(_, b)| size(b)).collect();
        self.occupancy.join(later.occupancy, &sizes);
        let several = self.views.len() > 1;
        for (k, (v, lv)) in self.views.iter_mut().zip(later.views).enumerate() {
            v.canvas.join(lv.canvas);
            if several {
                let in_view = |b: &Option<Block>| b.filter(|b| self.binning.view(b) == Some(k));
                let sizes: Vec<Option<u64>> = releases.iter().map(|(_, b)| size(&in_view(b))).collect();
                v.occupancy.join(lv.occupancy, &sizes);
            }
        }
        for (r, b) in releases {
            if let Some(b) = b {
                self.draw(b, r.ts, Some(r.ts.saturating_sub(b.ts)));
            }
        }
    }
}
