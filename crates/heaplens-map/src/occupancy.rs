//! The occupancy bar under the map (Moreta & Telea, section 4.1.3): bytes in use over time,
//! blue (low) to red (the peak), with the stretches where nothing happened drawn as plateau
//! cushions (their Figure 5c), so bursts of activity stand out as flat colour between them.

use crate::color::{blue_to_red, to_u8};
use crate::cushion::Cushion;

/// Bytes in use and events, per column of the map.
pub struct Occupancy {
    /// Highest bytes in use seen in each column (`None`: no event there).
    high: Vec<Option<u64>>,
    /// Bytes in use now.
    live: u64,
}

/// No-activity stretches narrower than this many columns are not cushioned.
const MIN_QUIET: usize = 3;

impl Occupancy {
    /// `width` columns, nothing in use.
    pub fn new(width: usize) -> Occupancy {
        Occupancy { high: vec![None; width], live: 0 }
    }

    /// Bytes in use changed by `delta` at column `col` (`None`: outside the window, where only
    /// the running total changes).
    pub fn event(&mut self, col: Option<usize>, delta: i64) {
        self.live = self.live.saturating_add_signed(delta);
        if let Some(c) = col.filter(|&c| c < self.high.len()) {
            let h = self.high[c].get_or_insert(0);
            *h = (*h).max(self.live);
        }
    }

    /// Bytes in use at the start of the window (before any drawn event).
    pub fn start(&mut self) {
        if let Some(first) = self.high.first_mut() {
            first.get_or_insert(self.live);
        }
    }

    /// The peak of the columns, bytes.
    pub fn peak(&self) -> u64 {
        self.high.iter().flatten().copied().max().unwrap_or(0)
    }

    /// The bar, `height` rows of the map's width, rows top first.
    pub fn render(&self, height: usize) -> Vec<[u8; 3]> {
        let w = self.high.len();
        let peak = self.peak().max(1) as f32;
        // A quiet column keeps the bytes in use of the last column with events.
        let mut level = vec![0u64; w];
        let mut last = 0;
        for (c, h) in self.high.iter().enumerate() {
            last = h.unwrap_or(last);
            level[c] = last;
        }
        // Luminance per column: 1 where events happened, a plateau cushion across each quiet run.
        let mut lum = vec![1.0f32; w];
        let mut c = 0;
        while c < w {
            if self.high[c].is_some() {
                c += 1;
                continue;
            }
            let start = c;
            while c < w && self.high[c].is_none() {
                c += 1;
            }
            if c - start >= MIN_QUIET {
                for (i, l) in lum[start..c].iter_mut().enumerate() {
                    *l = Cushion::Plateau.at((i as f32 + 0.5) / (c - start) as f32) * 0.85;
                }
            }
        }
        let row: Vec<[u8; 3]> =
            (0..w).map(|c| to_u8(blue_to_red(level[c] as f32 / peak).map(|x| x * lum[c]))).collect();
        (0..height).flat_map(|_| row.iter().copied()).collect()
    }
}
