//! Quantities as people read them, shared by the views.

/// `n` bytes as `1.5 MiB` (binary units, one decimal; plain bytes below 1 KiB).
pub fn human_bytes(n: u64) -> String {
    human_bytes_to(n, 1)
}

/// `n` bytes in binary units with `decimals` decimals (`1.95 MiB` with 2), plain bytes below
/// 1 KiB.
pub fn human_bytes_to(n: u64, decimals: usize) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1024.0 && u < UNITS.len() - 1 {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{n} B")
    } else {
        format!("{v:.decimals$} {}", UNITS[u])
    }
}
