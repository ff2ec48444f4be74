//! A Zstandard compression context whose memory comes from Rust's global allocator.
//!
//! zstd's own contexts allocate with C `malloc`. Inside a profiled program that is the
//! program's heap (the monitor's global allocator is a private heap, `heaplens-preload`'s
//! `heap.rs`): its first compressed block put 36 KiB of zstd state between the program's
//! first two blocks. Through zstd's custom-allocator hooks (its "advanced" API, RFC 8878's
//! reference implementation) the state lives wherever the crate's global allocator puts it.

use std::alloc::{alloc, dealloc, Layout};
use std::ffi::{c_void, CStr};
use std::io;
use std::ptr::{null_mut, NonNull};

use zstd_sys as sys;

/// Bytes in front of each block handed to zstd: its total size, for `dealloc`'s layout (also
/// the alignment given, which is all zstd asks for).
const HEADER: usize = 16;

/// zstd's allocation hook: `size` bytes from the global allocator, or null.
unsafe extern "C" fn zalloc(_: *mut c_void, size: usize) -> *mut c_void {
    let Some(layout) = size.checked_add(HEADER).and_then(|t| Layout::from_size_align(t, HEADER).ok()) else {
        return null_mut();
    };
    // SAFETY: the layout has a non-zero size.
    let base = unsafe { alloc(layout) };
    if base.is_null() {
        return null_mut();
    }
    // SAFETY: the block holds at least HEADER bytes, 16-aligned.
    unsafe {
        base.cast::<usize>().write(layout.size());
        base.add(HEADER).cast()
    }
}

/// zstd's release hook, for blocks from [`zalloc`].
unsafe extern "C" fn zfree(_: *mut c_void, p: *mut c_void) {
    if p.is_null() {
        return;
    }
    // SAFETY: `p` came from `zalloc`, which stored the block's size in front of it.
    unsafe {
        let base = p.cast::<u8>().sub(HEADER);
        let size = base.cast::<usize>().read();
        dealloc(base, Layout::from_size_align_unchecked(size, HEADER));
    }
}

/// A compression context at a fixed level (one-shot frames, as `zstd::bulk` makes).
pub(crate) struct Compressor(NonNull<sys::ZSTD_CCtx>);

// SAFETY: a context is used by one thread at a time (`&mut self`); zstd keeps no thread state.
unsafe impl Send for Compressor {}

impl Compressor {
    /// A context compressing at `level`.
    ///
    /// # Errors
    /// When zstd cannot allocate its state or refuses the level.
    pub fn new(level: i32) -> io::Result<Self> {
        let mem = sys::ZSTD_customMem { customAlloc: Some(zalloc), customFree: Some(zfree), opaque: null_mut() };
        // SAFETY: both hooks follow zstd's contract (null on failure, free of null is a no-op).
        let ctx = NonNull::new(unsafe { sys::ZSTD_createCCtx_advanced(mem) })
            .map(Self)
            .ok_or_else(|| io::Error::other("cannot create a zstd context"))?;
        // SAFETY: a live context.
        check(unsafe {
            sys::ZSTD_CCtx_setParameter(ctx.0.as_ptr(), sys::ZSTD_cParameter::ZSTD_c_compressionLevel, level)
        })?;
        Ok(ctx)
    }

    /// Compresses `src` into one frame at the start of `dst`; returns its length.
    ///
    /// # Errors
    /// When `dst` is too small (give it `zstd_safe::compress_bound(src.len())`).
    pub fn compress(&mut self, src: &[u8], dst: &mut [u8]) -> io::Result<usize> {
        // SAFETY: a live context, and buffers valid for their lengths.
        check(unsafe {
            sys::ZSTD_compress2(self.0.as_ptr(), dst.as_mut_ptr().cast(), dst.len(), src.as_ptr().cast(), src.len())
        })
    }
}

impl Drop for Compressor {
    fn drop(&mut self) {
        // SAFETY: created by ZSTD_createCCtx_advanced, freed once (it frees through `zfree`).
        unsafe { sys::ZSTD_freeCCtx(self.0.as_ptr()) };
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
    }
}
