//! Bytes and times as people read them.

pub use heaplens_interpret::units::human_bytes;

/// `12.5 ms`.
pub fn human_ns(ns: u64) -> String {
    match ns {
        0 => "0".into(),
        n if n < 1_000 => format!("{n} ns"),
        n if n < 1_000_000 => format!("{:.1} us", n as f64 / 1e3),
        n if n < 1_000_000_000 => format!("{:.1} ms", n as f64 / 1e6),
        n => format!("{:.2} s", n as f64 / 1e9),
    }
}
