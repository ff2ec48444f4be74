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
    alpha: f32,
    antialias: bool,
    cushion: Cushion,
    pixels: Vec<Sums>,
    /// Per row, `width + 1` differences of the sums of whole columns.
    runs: Vec<Sums>,
    /// Without antialiasing: the last colour drawn in each pixel.
    last: Vec<Option<Rgb>>,
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
            alpha,
            antialias,
            cushion,
            pixels: if antialias { vec![Sums::default(); n] } else { Vec::new() },
            runs: if antialias { vec![Sums::default(); (width + 1) * height] } else { Vec::new() },
            last: if antialias { Vec::new() } else { vec![None; n] },
        }
    }

    /// Draws the rectangle `[x0, x1) x [y0, y1)` (pixel units, y up) in `rgb`.
    pub fn rect(&mut self, x0: f64, x1: f64, y0: f64, y1: f64, rgb: Rgb) {
        let (w, h) = (self.width as f64, self.height as f64);
        let (cx0, cx1) = (x0.max(0.0), x1.min(w));
        let (cy0, cy1) = (y0.max(0.0), y1.min(h));
        if cx1 <= cx0 || cy1 <= cy0 {
            return;
        }
        if !self.antialias {
            return self.naive(cx0, cx1, cy0, cy1, y0, y1, rgb);
        }
        let first_col = cx0.floor() as usize;
        let last_col = ((cx1.ceil() as usize).max(first_col + 1) - 1).min(self.width - 1);
        let first_row = cy0.floor() as usize;
        let last_row = ((cy1.ceil() as usize).max(first_row + 1) - 1).min(self.height - 1);
        for row in first_row..=last_row {
            let (lo, hi) = (cy0.max(row as f64), cy1.min(row as f64 + 1.0));
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
            self.add(row, first_col, (first_col as f64 + 1.0 - cx0) as f32 * fy, shaded);
            self.add(row, last_col, (cx1 - last_col as f64) as f32 * fy, shaded);
            if last_col > first_col + 1 {
                let s = self.sums(fy, shaded);
                let base = row * (self.width + 1);
                self.runs[base + first_col + 1].add(&s, 1.0);
                self.runs[base + last_col].add(&s, -1.0);
            }
        }
    }

    fn sums(&self, f: f32, rgb: Rgb) -> Sums {
        let weight = f.powf(self.alpha);
        Sums { weight, rgb: [weight * rgb[0], weight * rgb[1], weight * rgb[2]], cover: f }
    }

    fn add(&mut self, row: usize, col: usize, f: f32, rgb: Rgb) {
        if f <= 0.0 {
            return;
        }
        let s = self.sums(f, rgb);
        self.pixels[row * self.width + col].add(&s, 1.0);
    }

    #[allow(clippy::too_many_arguments)]
    fn naive(&mut self, cx0: f64, cx1: f64, cy0: f64, cy1: f64, y0: f64, y1: f64, rgb: Rgb) {
        // Pixels whose centres the rectangle covers.
        let cols = (cx0 - 0.5).ceil().max(0.0) as usize..((cx1 - 0.5).ceil().max(0.0) as usize).min(self.width);
        let rows = (cy0 - 0.5).ceil().max(0.0) as usize..((cy1 - 0.5).ceil().max(0.0) as usize).min(self.height);
        for row in rows {
            let l = self.cushion.at(((row as f64 + 0.5 - y0) / (y1 - y0)) as f32);
            for col in cols.clone() {
                self.last[row * self.width + col] = Some([rgb[0] * l, rgb[1] * l, rgb[2] * l]);
            }
        }
    }

    /// The picture, rows top (highest addresses) first, as bytes.
    pub fn finish(mut self) -> Vec<[u8; 3]> {
        let mut out = Vec::with_capacity(self.width * self.height);
        if !self.antialias {
            for row in (0..self.height).rev() {
                for col in 0..self.width {
                    out.push(crate::color::to_u8(self.last[row * self.width + col].unwrap_or(BACKGROUND)));
                }
            }
            return out;
        }
        for row in 0..self.height {
            let mut run = Sums::default();
            for col in 0..self.width {
                run.add(&self.runs[row * (self.width + 1) + col], 1.0);
                self.pixels[row * self.width + col].add(&run, 1.0);
            }
        }
        for row in (0..self.height).rev() {
            for col in 0..self.width {
                out.push(crate::color::to_u8(self.resolve(&self.pixels[row * self.width + col])));
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
        let b = (1.0 - s.cover.min(1.0)).max(0.0).powf(self.alpha);
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
