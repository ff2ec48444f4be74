//! The map's pixels, accumulated block by block with the bias-weighted antialiasing of Moreta &
//! Telea (their equation 1):
//!
//! ```text
//! C = (Σ f_i^α c_i + B c_B) / (F + B),   F = Σ f_i^α,   B = (1 - Σ f_i)^α
//! ```
//!
//! where `f_i` is the fraction of the pixel block `i` covers, `c_i` its colour (shaded by its
//! cushion), `c_B` the background and `α > 0` the bias: below 1 it lifts thin and isolated
//! blocks out of the background, so sub-pixel blocks stay visible (at 1 it is plain coverage
//! antialiasing). The paper averages attribute values before colouring; heaplens averages
//! colours, which is the same for the metric scales and keeps categorical colours (functions,
//! threads) from blending into unrelated ones.
//!
//! Memory is set by the pixels, not the blocks: five sums per pixel, plus five per pixel of
//! running sums for the columns a block covers whole (added at its first full column and taken
//! off after its last, so a block lasting the whole run costs its height, not its width).
//! Pixels are stored a column after another: blocks come in time order, so the pixels being
//! drawn lie in a few columns, which then fit in the processor's cache.

use crate::color::{Rgb, BACKGROUND};
use crate::cushion::Cushion;

/// Sums of one pixel: `F`, the weighted colour and `Σ f`.
#[derive(Debug, Clone, Copy, Default)]
struct Sums {
    weight: f32,
    rgb: [f32; 3],
    cover: f32,
}

impl Sums {
    fn add(&mut self, o: &Sums, sign: f32) {
        self.weight += sign * o.weight;
        self.cover += sign * o.cover;
        for k in 0..3 {
            self.rgb[k] += sign * o.rgb[k];
        }
    }
}

/// A `width` x `height` canvas; row 0 is the bottom (lowest addresses).
pub struct Canvas {
    width: usize,
    height: usize,
    antialias: bool,
    cushion: Cushion,
    /// Column-major: pixel `(col, row)` at `col * height + row`.
    pixels: Vec<Sums>,
    /// Per row, `width + 1` differences of the sums of whole columns (column-major too).
    runs: Vec<Sums>,
    /// Without antialiasing: the last colour drawn in each pixel (column-major).
    last: Vec<Option<Rgb>>,
    /// `f^alpha` (see [`Power`]).
    power: Power,
    /// The cushion's luminance at a block's middle.
    middle: f32,
}

/// `f^alpha` for `f` in `[0, 1]`, interpolated in a table indexed by the float's exponent and
/// first 7 bits of mantissa (exact at those points, a relative error under 1e-4 between),
/// since every pixel a block touches takes one and `powf` was a tenth of the map's time.
struct Power {
    table: Vec<f32>,
    alpha: f32,
}

impl Power {
    const SHIFT: u32 = 16;

    fn new(alpha: f32) -> Power {
        // Exponents up to 127 (f below 2), and the end of the last range.
        let n = (128usize << 7) + 1;
        let table = (0..n).map(|i| f32::from_bits((i as u32) << Self::SHIFT).powf(alpha)).collect();
        Power { table, alpha }
    }

    #[inline(always)]
    fn of(&self, f: f32) -> f32 {
        let bits = f.to_bits();
        let i = (bits >> Self::SHIFT) as usize;
        match (self.table.get(i), self.table.get(i + 1)) {
            (Some(&a), Some(&b)) => a + (b - a) * ((bits & 0xffff) as f32 * (1.0 / 65536.0)),
            _ => f.powf(self.alpha),
        }
    }
}

/// `x as usize` for `0 <= x < 2^63`, through `i64`: one instruction, where `f64` to `usize`
/// is a sequence with a branch (without AVX-512); a block's drawing takes several.
#[inline(always)]
fn trunc(x: f64) -> usize {
    x as i64 as usize
}

/// `i as f64` for `i < 2^63`, through `i64` (see [`trunc`]).
#[inline(always)]
fn float(i: usize) -> f64 {
    i as i64 as f64
}

/// The ceiling of `x >= 0`.
#[inline(always)]
fn ceil(x: f64) -> usize {
    let t = trunc(x);
    t + usize::from(float(t) < x)
}

impl Canvas {
    /// An empty canvas. `alpha` is the bias of equation 1; without `antialias` a block paints
    /// the pixels whose centres it covers and nothing else (last writer wins), as naive drawing
    /// does, for comparison.
    pub fn new(width: usize, height: usize, alpha: f32, antialias: bool, cushion: Cushion) -> Canvas {
        let n = width * height;
        Canvas {
            width,
            height,
            antialias,
            cushion,
            pixels: if antialias { vec![Sums::default(); n] } else { Vec::new() },
            runs: if antialias { vec![Sums::default(); (width + 1) * height] } else { Vec::new() },
            last: if antialias { Vec::new() } else { vec![None; n] },
            power: Power::new(if antialias { alpha } else { 1.0 }),
            middle: cushion.at(0.5),
        }
    }

    /// Draws the rectangle `[x0, x1) x [y0, y1)` (pixel units, y up) in `rgb`.
    pub fn rect(&mut self, x0: f64, x1: f64, y0: f64, y1: f64, rgb: Rgb) {
        let (w, h) = (float(self.width), float(self.height));
        let (cx0, cx1) = (x0.max(0.0), x1.min(w));
        let (cy0, cy1) = (y0.max(0.0), y1.min(h));
        if cx1 <= cx0 || cy1 <= cy0 {
            return;
        }
        if !self.antialias {
            return self.naive(cx0, cx1, cy0, cy1, y0, y1, rgb);
        }
        // Truncation is floor for these non-negative values (and, unlike `floor`, not a call
        // into libm without SSE4.1).
        let first_col = trunc(cx0);
        let last_col = (ceil(cx1).max(first_col + 1) - 1).min(self.width - 1);
        let first_row = trunc(cy0);
        let last_row = (ceil(cy1).max(first_row + 1) - 1).min(self.height - 1);
        if first_row == last_row && first_col == last_col && cy0 == y0 && cy1 == y1 {
            // Most blocks of a long run lie inside one pixel: the loop's arithmetic for one row
            // and one column, with the cushion at the block's middle.
            let shaded = rgb.map(|c| c * self.middle);
            return self.add(first_row, first_col, (cx1 - cx0) as f32 * (cy1 - cy0) as f32, shaded);
        }
        for row in first_row..=last_row {
            let (lo, hi) = (cy0.max(float(row)), cy1.min(float(row) + 1.0));
            if hi <= lo {
                continue;
            }
            let fy = (hi - lo) as f32;
            // The cushion across the block's height, taken at the middle of this row's part.
            let l = self.cushion.at((((lo + hi) / 2.0 - y0) / (y1 - y0)) as f32);
            let shaded = [rgb[0] * l, rgb[1] * l, rgb[2] * l];
            if first_col == last_col {
                self.add(row, first_col, (cx1 - cx0) as f32 * fy, shaded);
                continue;
            }
            self.add(row, first_col, (float(first_col) + 1.0 - cx0) as f32 * fy, shaded);
            self.add(row, last_col, (cx1 - float(last_col)) as f32 * fy, shaded);
            if last_col > first_col + 1 {
                let s = self.sums(fy, shaded);
                let h = self.height;
                self.runs[(first_col + 1) * h + row].add(&s, 1.0);
                self.runs[last_col * h + row].add(&s, -1.0);
            }
        }
    }

    fn sums(&self, f: f32, rgb: Rgb) -> Sums {
        let weight = self.power.of(f);
        Sums { weight, rgb: [weight * rgb[0], weight * rgb[1], weight * rgb[2]], cover: f }
    }

    fn add(&mut self, row: usize, col: usize, f: f32, rgb: Rgb) {
        if f <= 0.0 {
            return;
        }
        let s = self.sums(f, rgb);
        self.pixels[col * self.height + row].add(&s, 1.0);
    }

    #[allow(clippy::too_many_arguments)]
    fn naive(&mut self, cx0: f64, cx1: f64, cy0: f64, cy1: f64, y0: f64, y1: f64, rgb: Rgb) {
        // Pixels whose centres the rectangle covers.
        let cols = (cx0 - 0.5).ceil().max(0.0) as usize..((cx1 - 0.5).ceil().max(0.0) as usize).min(self.width);
        let rows = (cy0 - 0.5).ceil().max(0.0) as usize..((cy1 - 0.5).ceil().max(0.0) as usize).min(self.height);
        for row in rows {
            let l = self.cushion.at(((row as f64 + 0.5 - y0) / (y1 - y0)) as f32);
            for col in cols.clone() {
                self.last[col * self.height + row] = Some([rgb[0] * l, rgb[1] * l, rgb[2] * l]);
            }
        }
    }

    /// Adds the blocks drawn on `other`, a canvas of the same size and options (the sums add
    /// up; without antialiasing, `other`'s blocks are taken as drawn last).
    pub fn join(&mut self, other: Canvas) {
        for (p, o) in self.pixels.iter_mut().zip(&other.pixels) {
            p.add(o, 1.0);
        }
        for (r, o) in self.runs.iter_mut().zip(&other.runs) {
            r.add(o, 1.0);
        }
        for (l, o) in self.last.iter_mut().zip(other.last) {
            if o.is_some() {
                *l = o;
            }
        }
    }

    /// The picture, rows top (highest addresses) first, as bytes.
    pub fn finish(self) -> Vec<[u8; 3]> {
        let mut out = Vec::with_capacity(self.width * self.height);
        if !self.antialias {
            for row in (0..self.height).rev() {
                for col in 0..self.width {
                    out.push(crate::color::to_u8(self.last[col * self.height + row].unwrap_or(BACKGROUND)));
                }
            }
            return out;
        }
        // Column by column, as the sums lie: each pixel's own sums plus the running sums of
        // the blocks covering its column whole, resolved and written to its place in the rows.
        let (w, h) = (self.width, self.height);
        out.resize(w * h, [0; 3]);
        let mut run = vec![Sums::default(); h];
        for col in 0..w {
            let (pixels, runs) = (&self.pixels[col * h..(col + 1) * h], &self.runs[col * h..(col + 1) * h]);
            for (row, ((r, d), p)) in run.iter_mut().zip(runs).zip(pixels).enumerate() {
                r.add(d, 1.0);
                let mut s = *p;
                s.add(r, 1.0);
                out[(h - 1 - row) * w + col] = crate::color::to_u8(self.resolve(&s));
            }
        }
        out
    }

    /// Equation 1 for one pixel.
    fn resolve(&self, s: &Sums) -> Rgb {
        // Running sums cancel to a little rounding noise where no block lies.
        if s.weight <= 1e-6 {
            return BACKGROUND;
        }
        let b = self.power.of((1.0 - s.cover.min(1.0)).max(0.0));
        let total = s.weight + b;
        [0, 1, 2].map(|k| (s.rgb[k] + b * BACKGROUND[k]) / total)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RED: Rgb = [1.0, 0.0, 0.0];

    #[test]
    fn a_sub_pixel_block_shows_with_antialiasing_and_not_without() {
        // A thousandth of a pixel: a tenth of its colour with a bias of 0.3, none at 1.
        let mut aa = Canvas::new(4, 4, 0.3, true, Cushion::None);
        aa.rect(1.2, 1.25, 2.1, 2.12, RED);
        let px = aa.finish();
        let p = px[4 + 1]; // row 2 from the bottom is the second from the top
        assert!(p[1] <= 230, "the block tints its pixel: {p:?}");
        assert_eq!(px.iter().filter(|p| **p != [255, 255, 255]).count(), 1);
        let mut plain = Canvas::new(4, 4, 1.0, true, Cushion::None);
        plain.rect(1.2, 1.25, 2.1, 2.12, RED);
        assert!(plain.finish()[4 + 1][1] >= 254, "plain coverage antialiasing loses it");

        let mut naive = Canvas::new(4, 4, 0.3, false, Cushion::None);
        naive.rect(1.2, 1.25, 2.1, 2.12, RED);
        assert!(naive.finish().iter().all(|p| *p == [255, 255, 255]));
    }

    #[test]
    fn the_power_table_is_powf_within_a_ten_thousandth() {
        for alpha in [0.1f32, 0.3, 0.7, 1.0] {
            let p = Power::new(alpha);
            for k in 1..100_000 {
                let f = (k as f32 / 100_000.0).powi(3);
                let (got, want) = (p.of(f), f.powf(alpha));
                assert!((got - want).abs() <= want * 1e-4, "{f}^{alpha}: {got} for {want}");
            }
        }
    }

    #[test]
    fn two_canvases_joined_are_one_canvas_with_both_blocks() {
        let blocks = [(0.5, 7.5, 0.2, 0.3, RED), (2.0, 9.0, 0.0, 1.0, [0.0, 0.0, 1.0]), (3.2, 3.3, 0.5, 0.6, RED)];
        let mut one = Canvas::new(10, 1, 0.3, true, Cushion::Plateau);
        let (mut a, mut b) =
            (Canvas::new(10, 1, 0.3, true, Cushion::Plateau), Canvas::new(10, 1, 0.3, true, Cushion::Plateau));
        for (i, &(x0, x1, y0, y1, c)) in blocks.iter().enumerate() {
            one.rect(x0, x1, y0, y1, c);
            if i == 1 { &mut b } else { &mut a }.rect(x0, x1, y0, y1, c);
        }
        a.join(b);
        assert_eq!(a.finish(), one.finish());
    }

    #[test]
    fn whole_columns_come_from_the_running_sums() {
        let mut c = Canvas::new(10, 1, 1.0, true, Cushion::None);
        c.rect(0.0, 10.0, 0.0, 1.0, RED);
        assert!(c.finish().iter().all(|p| *p == [255, 0, 0]));
        let mut c = Canvas::new(10, 1, 1.0, true, Cushion::None);
        c.rect(2.5, 7.5, 0.0, 0.5, RED);
        let px = c.finish();
        assert_eq!(px[0], [255, 255, 255]);
        assert_eq!(px[2], [255, 191, 191], "a quarter pixel: three quarters background");
        assert_eq!(px[4], [255, 128, 128], "half covered");
        assert_eq!(px[8], [255, 255, 255]);
    }
}
