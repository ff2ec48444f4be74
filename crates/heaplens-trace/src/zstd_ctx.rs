//! A Zstandard compression context in one workspace taken from Rust's global allocator.
//!
//! zstd's own contexts allocate with C `malloc`. Inside a profiled program that is the
//! program's heap (the monitor's global allocator is a private heap, `heaplens-preload`'s
//! `heap.rs`): its first compressed block put 36 KiB of zstd state between the program's
//! first two blocks. A *static* context (zstd's advanced API) lives in a workspace given once,
//! sized for any input at the level, and never allocates again: zstd otherwise frees and
//! reallocates its workspace as payload sizes alternate, which glibc recycles but fresh
//! mappings do not (routed to the monitor's heap through zstd's allocation hooks, that was 90
//! more mappings and 26 thousand more page faults on gcc's cc1).

use std::ffi::CStr;
use std::io;
use std::ptr::NonNull;

use zstd_sys as sys;

/// A compression context at a fixed level (one-shot frames, as `zstd::bulk` makes).
pub(crate) struct Compressor {
    ctx: NonNull<sys::ZSTD_CCtx>,
    /// Where the context lives (8-byte aligned, as zstd requires); never moved or resized.
    _workspace: Box<[u64]>,
}

// SAFETY: a context is used by one thread at a time (`&mut self`); zstd keeps no thread state.
unsafe impl Send for Compressor {}

impl Compressor {
    /// A context compressing at `level`.
    ///
    /// # Errors
    /// When zstd refuses the workspace or the level.
    pub fn new(level: i32) -> io::Result<Self> {
        // SAFETY: a pure function of the level.
        let size = unsafe { sys::ZSTD_estimateCCtxSize(level) };
        let mut workspace = vec![0u64; size.div_ceil(8)].into_boxed_slice();
        // SAFETY: the workspace is 8-byte aligned, `size` bytes or more, and outlives the
        // context (both are dropped together, the context needing no free of its own).
        let ctx = NonNull::new(unsafe { sys::ZSTD_initStaticCCtx(workspace.as_mut_ptr().cast(), workspace.len() * 8) })
            .ok_or_else(|| io::Error::other("cannot create a zstd context"))?;
        // SAFETY: a live context.
        check(unsafe {
            sys::ZSTD_CCtx_setParameter(ctx.as_ptr(), sys::ZSTD_cParameter::ZSTD_c_compressionLevel, level)
        })?;
        Ok(Self { ctx, _workspace: workspace })
    }

    /// Compresses `src` into one frame at the start of `dst`; returns its length.
    ///
    /// # Errors
    /// When `dst` is too small (give it `zstd_safe::compress_bound(src.len())`).
    pub fn compress(&mut self, src: &[u8], dst: &mut [u8]) -> io::Result<usize> {
        // SAFETY: a live context, and buffers valid for their lengths.
        check(unsafe {
            sys::ZSTD_compress2(self.ctx.as_ptr(), dst.as_mut_ptr().cast(), dst.len(), src.as_ptr().cast(), src.len())
        })
    }
}

/// zstd's result code as a length, or its error as an `io::Error`.
fn check(code: usize) -> io::Result<usize> {
    // SAFETY: plain functions of a code; the name is a static NUL-terminated string.
    unsafe {
        if sys::ZSTD_isError(code) != 0 {
            let name = CStr::from_ptr(sys::ZSTD_getErrorName(code)).to_string_lossy();
            return Err(io::Error::other(format!("zstd: {name}")));
        }
    }
    Ok(code)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_decompress_to_the_input() {
        let src: Vec<u8> = (0..100_000u32).flat_map(|i| (i % 251).to_le_bytes()).collect();
        let mut c = Compressor::new(1).unwrap();
        let mut dst = vec![0u8; zstd::zstd_safe::compress_bound(src.len())];
        let n = c.compress(&src, &mut dst).unwrap();
        assert!(n < src.len() / 4, "{n}");
        assert_eq!(zstd::bulk::decompress(&dst[..n], src.len()).unwrap(), src);
        // The context is reused for the next frame, and a too-small buffer is an error.
        let m = c.compress(&src[..1000], &mut dst).unwrap();
        assert_eq!(zstd::bulk::decompress(&dst[..m], 1000).unwrap(), src[..1000]);
        assert!(c.compress(&src, &mut dst[..10]).is_err());
        // Sizes alternate as the monitor's blocks do, up to a payload far past the window.
        let big: Vec<u8> = (0..4u32 << 20).map(|i| (i.wrapping_mul(2654435761) >> 24) as u8 & 15).collect();
        let mut out = vec![0u8; zstd::zstd_safe::compress_bound(big.len())];
        for len in [big.len(), 300, 1 << 20, 5000, big.len()] {
            let n = c.compress(&big[..len], &mut out).unwrap();
            assert_eq!(zstd::bulk::decompress(&out[..n], len).unwrap(), big[..len]);
        }
    }
}
