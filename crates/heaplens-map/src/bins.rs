//! Correlated views (Moreta & Telea, their Figures 8 and 9): one map per size class or per
//! arena, laid out one above the other on a shared time axis, or side by side on their
//! address axes.

/// How blocks are split into views.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bins {
    /// One map of every block.
    None,
    /// A view per size class of usable bytes (glibc serves each from bins of its own).
    Size,
    /// A view per address range: the main heap, each thread arena, each `mmap`'d chunk.
    Arena,
}

/// How the views are laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Align {
    /// One above the other, sharing the time axis.
    Time,
    /// Side by side, each on its own address axis.
    Address,
}

/// Size classes of usable bytes: glibc's tcache and small bins (up to 1 KiB, by powers of
/// two), its large bins up to the `mmap` threshold (128 KiB by default), and `mmap`'d chunks.
pub const SIZE_CLASSES: [(u64, u64); 8] =
    [(0, 32), (33, 64), (65, 128), (129, 256), (257, 512), (513, 1024), (1025, 128 << 10), ((128 << 10) + 1, u64::MAX)];

/// The size class of a block of `usable` bytes.
pub fn size_class(usable: u64) -> usize {
    SIZE_CLASSES.iter().position(|&(_, hi)| usable <= hi).unwrap_or(SIZE_CLASSES.len() - 1)
}

/// A size class's label.
pub fn size_label(k: usize) -> String {
    let (lo, hi) = SIZE_CLASSES[k];
    let b = crate::units::human_bytes;
    if hi == u64::MAX {
        format!("usable > {}", b(lo - 1))
    } else {
        format!("usable {}-{}", b(lo), b(hi))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes() {
        assert_eq!(size_class(24), 0);
        assert_eq!(size_class(40), 1);
        assert_eq!(size_class(1032), 6);
        assert_eq!(size_class(1 << 20), 7);
        assert_eq!(size_label(1), "usable 33 B-64 B");
    }
}
