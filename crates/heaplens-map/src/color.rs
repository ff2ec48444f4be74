//! Colours: a categorical palette for functions and threads, and the blue (low) to red (high)
//! scale of the paper's metric views.

/// An RGB colour, components 0..=1.
pub type Rgb = [f32; 3];

/// Ten well-separated colours (Tableau 10), for the top functions or threads.
pub const PALETTE: [Rgb; 10] = [
    [0.306, 0.475, 0.655],
    [0.949, 0.557, 0.169],
    [0.882, 0.341, 0.349],
    [0.463, 0.718, 0.698],
    [0.349, 0.631, 0.310],
    [0.929, 0.788, 0.282],
    [0.690, 0.478, 0.631],
    [1.000, 0.616, 0.655],
    [0.612, 0.459, 0.373],
    [0.729, 0.690, 0.675],
];

/// The colour of everything outside the top entries.
pub const OTHER: Rgb = [0.62, 0.62, 0.62];

/// The background of the map: white, as the paper's figures.
pub const BACKGROUND: Rgb = [1.0, 1.0, 1.0];

/// The paper's metric scale: blue at 0, through cyan, green and yellow, to red at 1.
pub fn blue_to_red(v: f32) -> Rgb {
    const STOPS: [Rgb; 5] =
        [[0.19, 0.21, 0.80], [0.10, 0.65, 0.85], [0.30, 0.75, 0.30], [0.95, 0.80, 0.15], [0.85, 0.12, 0.10]];
    let v = if v.is_finite() { v.clamp(0.0, 1.0) } else { 0.0 };
    let x = v * (STOPS.len() - 1) as f32;
    let i = (x as usize).min(STOPS.len() - 2);
    let t = x - i as f32;
    let (a, b) = (STOPS[i], STOPS[i + 1]);
    [a[0] + (b[0] - a[0]) * t, a[1] + (b[1] - a[1]) * t, a[2] + (b[2] - a[2]) * t]
}

/// `#rrggbb`.
pub fn hex(c: Rgb) -> String {
    let [r, g, b] = to_u8(c);
    format!("#{r:02x}{g:02x}{b:02x}")
}

/// Components as bytes.
pub fn to_u8(c: Rgb) -> [u8; 3] {
    c.map(|x| (x.clamp(0.0, 1.0) * 255.0 + 0.5) as u8)
}
