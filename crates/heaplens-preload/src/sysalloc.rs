//! The monitor's own heap: glibc's `__libc_*` entry points, which bypass the `malloc` symbol
//! that this library interposes, so the monitor never records (or recurses into) itself.

use std::alloc::{GlobalAlloc, Layout};
use std::ffi::c_void;

extern "C" {
    /// glibc's malloc, bypassing interposition.
    pub fn __libc_malloc(n: usize) -> *mut c_void;
    /// glibc's calloc, bypassing interposition.
    pub fn __libc_calloc(n: usize, m: usize) -> *mut c_void;
    /// glibc's realloc, bypassing interposition.
    pub fn __libc_realloc(p: *mut c_void, n: usize) -> *mut c_void;
    /// glibc's free, bypassing interposition.
    pub fn __libc_free(p: *mut c_void);
    /// glibc's memalign, bypassing interposition.
    pub fn __libc_memalign(align: usize, n: usize) -> *mut c_void;
}

/// `GlobalAlloc` over glibc's internal entry points (glibc has no `__libc_aligned_alloc`, so
/// over-aligned layouts use `__libc_memalign`).
pub struct LibcAlloc;

const MIN_ALIGN: usize = 16;

unsafe impl GlobalAlloc for LibcAlloc {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        if l.align() <= MIN_ALIGN {
            __libc_malloc(l.size()) as *mut u8
        } else {
            __libc_memalign(l.align(), l.size()) as *mut u8
        }
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        if l.align() <= MIN_ALIGN {
            __libc_calloc(1, l.size()) as *mut u8
        } else {
            let p = self.alloc(l);
            if !p.is_null() {
                std::ptr::write_bytes(p, 0, l.size());
            }
            p
        }
    }
    unsafe fn dealloc(&self, p: *mut u8, _l: Layout) {
        __libc_free(p as *mut c_void)
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        if l.align() <= MIN_ALIGN {
            __libc_realloc(p as *mut c_void, n) as *mut u8
        } else {
            let q = self.alloc(Layout::from_size_align_unchecked(n, l.align()));
            if !q.is_null() {
                std::ptr::copy_nonoverlapping(p, q, l.size().min(n));
                self.dealloc(p, l);
            }
            q
        }
    }
}

/// Fallbacks used before `dlsym` has found the next allocator (dlsym itself may calloc).
pub mod fallback {
    pub use super::{__libc_calloc as calloc, __libc_free as free, __libc_malloc as malloc};
    pub use super::{__libc_memalign as memalign, __libc_realloc as realloc};
}
