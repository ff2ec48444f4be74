//! glibc's `__libc_*` entry points, which bypass the `malloc` symbol this library interposes:
//! where the program's calls go before `dlsym` has found the real functions (the monitor's
//! own heap is [`crate::heap`]).

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

/// Fallbacks used before `dlsym` has found the next allocator (dlsym itself may calloc).
pub mod fallback {
    pub use super::{__libc_calloc as calloc, __libc_free as free, __libc_malloc as malloc};
    pub use super::{__libc_memalign as memalign, __libc_realloc as realloc};
}
