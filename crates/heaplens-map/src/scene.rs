//! A picture as a list of bitmaps, rectangles and labels, written as PNG (labels drawn with the
//! public-domain 8x8 glyphs of `font8x8`) or as SVG (bitmaps embedded as PNG, labels as text).

use std::io::Write;

use base64::Engine;
use heaplens_interpret::names::for_xml;

/// One thing drawn, in pixel coordinates from the top left.
#[derive(Debug, Clone)]
pub enum Item {
    /// A bitmap, rows top first.
    Bitmap {
        /// Left.
        x: usize,
        /// Top.
        y: usize,
        /// Width.
        w: usize,
        /// Height.
        h: usize,
        /// `w * h` pixels.
        pixels: Vec<[u8; 3]>,
    },
    /// A filled rectangle.
    Rect {
        /// Left.
        x: usize,
        /// Top.
        y: usize,
        /// Width.
        w: usize,
        /// Height.
        h: usize,
        /// Colour.
        rgb: [u8; 3],
    },
    /// A line of text, its top left at `(x, y)`, 8 pixels high per `scale`.
    Text {
        /// Left.
        x: usize,
        /// Top.
        y: usize,
        /// 1 for 8-pixel glyphs, 2 for 16.
        scale: usize,
        /// Colour.
        rgb: [u8; 3],
        /// The text, one 8-pixel glyph a character: ASCII, Latin-1, Greek and `…` drawn, other
        /// characters as `?`, control characters as their escapes (`\x1b`).
        text: String,
    },
}

/// A picture.
#[derive(Debug, Clone, Default)]
pub struct Scene {
    /// Width, pixels.
    pub width: usize,
    /// Height, pixels.
    pub height: usize,
    /// Drawn in order.
    pub items: Vec<Item>,
}

impl Scene {
    /// The picture's pixels, rows top first, on white.
    pub fn rasterize(&self) -> Vec<[u8; 3]> {
        let mut px = vec![[255u8; 3]; self.width * self.height];
        let mut put = |x: usize, y: usize, c: [u8; 3]| {
            if x < self.width && y < self.height {
                px[y * self.width + x] = c;
            }
        };
        for item in &self.items {
            match item {
                Item::Bitmap { x, y, w, h, pixels } => {
                    for r in 0..*h {
                        for c in 0..*w {
                            put(x + c, y + r, pixels[r * w + c]);
                        }
                    }
                }
                Item::Rect { x, y, w, h, rgb } => {
                    for r in 0..*h {
                        for c in 0..*w {
                            put(x + c, y + r, *rgb);
                        }
                    }
                }
                Item::Text { x, y, scale, rgb, text } => {
                    for (i, ch) in for_xml(text).chars().enumerate() {
                        for (gy, bits) in glyph(ch).iter().enumerate() {
                            for gx in 0..8 {
                                if bits >> gx & 1 == 1 {
                                    for sy in 0..*scale {
                                        for sx in 0..*scale {
                                            put(x + (i * 8 + gx) * scale + sx, y + gy * scale + sy, *rgb);
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
        px
    }

    /// Writes the picture as PNG.
    ///
    /// # Errors
    /// The writer's.
    pub fn write_png(&self, out: impl Write) -> std::io::Result<()> {
        encode_png(out, self.width, self.height, &self.rasterize())
    }

    /// Writes the picture as SVG: bitmaps as embedded PNG images, rectangles and text as such.
    ///
    /// # Errors
    /// The writer's.
    pub fn write_svg(&self, mut out: impl Write) -> std::io::Result<()> {
        let (w, h) = (self.width, self.height);
        writeln!(out, r#"<?xml version="1.0" encoding="UTF-8"?>"#)?;
        writeln!(out, r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}">"#)?;
        writeln!(out, r#"<rect width="{w}" height="{h}" fill="white"/>"#)?;
        for item in &self.items {
            match item {
                Item::Bitmap { x, y, w, h, pixels } => {
                    let mut png = Vec::new();
                    encode_png(&mut png, *w, *h, pixels)?;
                    let data = base64::engine::general_purpose::STANDARD.encode(&png);
                    writeln!(
                        out,
                        r#"<image x="{x}" y="{y}" width="{w}" height="{h}" style="image-rendering:pixelated" href="data:image/png;base64,{data}"/>"#
                    )?;
                }
                Item::Rect { x, y, w, h, rgb: [r, g, b] } => {
                    writeln!(
                        out,
                        r##"<rect x="{x}" y="{y}" width="{w}" height="{h}" fill="#{r:02x}{g:02x}{b:02x}"/>"##
                    )?;
                }
                Item::Text { x, y, scale, rgb: [r, g, b], text } => {
                    let size = 8 * scale + scale;
                    let base = y + 7 * scale;
                    let text = for_xml(text).replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;");
                    writeln!(
                        out,
                        r##"<text x="{x}" y="{base}" font-family="monospace" font-size="{size}" fill="#{r:02x}{g:02x}{b:02x}" xml:space="preserve">{text}</text>"##
                    )?;
                }
            }
        }
        writeln!(out, "</svg>")
    }
}

/// Three dots in one cell: the `…` of elided generic arguments, which font8x8 lacks, drawn in
/// the width of one character so that a label is as wide as its characters say.
const ELLIPSIS: [u8; 8] = [0, 0, 0, 0, 0, 0xdb, 0xdb, 0];

/// The glyph of `ch` (bit `x` of row `y` set where ink is).
fn glyph(ch: char) -> [u8; 8] {
    use font8x8::UnicodeFonts;
    if ch == '…' {
        return ELLIPSIS;
    }
    [font8x8::BASIC_FONTS.get(ch), font8x8::LATIN_FONTS.get(ch), font8x8::GREEK_FONTS.get(ch)]
        .into_iter()
        .flatten()
        .next()
        .or_else(|| font8x8::BASIC_FONTS.get('?'))
        .unwrap_or([0; 8])
}

fn encode_png(out: impl Write, w: usize, h: usize, pixels: &[[u8; 3]]) -> std::io::Result<()> {
    let mut enc = png::Encoder::new(out, w as u32, h as u32);
    enc.set_color(png::ColorType::Rgb);
    enc.set_depth(png::BitDepth::Eight);
    let mut writer = enc.write_header().map_err(std::io::Error::other)?;
    let bytes: Vec<u8> = pixels.iter().flatten().copied().collect();
    writer.write_image_data(&bytes).map_err(std::io::Error::other)?;
    writer.finish().map_err(std::io::Error::other)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The columns with ink of `text` drawn alone.
    fn inked_columns(text: &str) -> Vec<usize> {
        let s = Scene {
            width: 200,
            height: 8,
            items: vec![Item::Text { x: 0, y: 0, scale: 1, rgb: [0; 3], text: text.into() }],
        };
        let px = s.rasterize();
        (0..200).filter(|&x| (0..8).any(|y| px[y * 200 + x] != [255; 3])).collect()
    }

    #[test]
    fn every_character_is_one_cell_wide() {
        // `…` and `µ` are one glyph each, so the label is as wide as its characters.
        for text in ["a…b", "aµb", "a?b"] {
            let cols = inked_columns(text);
            assert!(cols.iter().any(|&x| x >= 16) && cols.iter().all(|&x| x < 24), "{text}: {cols:?}");
            assert!(cols.iter().any(|&x| (8..16).contains(&x)), "{text}: the middle glyph has ink");
        }
    }

    #[test]
    fn control_characters_are_drawn_and_written_as_escapes() {
        let s = Scene {
            width: 200,
            height: 10,
            items: vec![Item::Text { x: 0, y: 0, scale: 1, rgb: [0; 3], text: "a\x1b<b>\u{fffe}".into() }],
        };
        let mut svg = Vec::new();
        s.write_svg(&mut svg).unwrap();
        let svg = String::from_utf8(svg).unwrap();
        assert!(svg.contains(">a\\x1b&lt;b&gt;\\u{fffe}</text>"), "{svg}");
        // Drawn as the 16 characters of the escaped text.
        let cols = inked_columns("a\x1b<b>\u{fffe}");
        assert!(cols.iter().any(|&x| x >= 15 * 8) && cols.iter().all(|&x| x < 16 * 8), "{cols:?}");
    }
}
