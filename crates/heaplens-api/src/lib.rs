//! Report a Rust program's own allocators to heaplens: the calls of `include/heaplens.h`
//! ([`alloc`], [`free`], [`pool_name`], [`pool_reset`]) and [`Tracked`], a [`GlobalAlloc`]
//! wrapper that reports every block of the allocator it wraps; and assert on the heap in tests
//! with [`stats`] (the monitor's counters under heaplens, [`Counting`]'s without).
//!
//! Under `heaplens run` each block is recorded with its call stack, its pool as the innermost
//! frame (`[pool] NAME`), so the pool shows in every report, export and picture as an
//! allocator of its own. Without heaplens a call costs an atomic load and a predictable branch:
//! the monitor's entry point is looked up once with `dlsym`, and this crate links nothing.
//!
//! ```no_run
//! use heaplens_api::Tracked;
//!
//! // An allocator that does not call malloc (heaplens sees malloc's blocks already).
//! # use std::alloc::{GlobalAlloc, Layout};
//! # struct MyAllocator;
//! # unsafe impl GlobalAlloc for MyAllocator {
//! #     unsafe fn alloc(&self, _: Layout) -> *mut u8 { std::ptr::null_mut() }
//! #     unsafe fn dealloc(&self, _: *mut u8, _: Layout) {}
//! # }
//! #[global_allocator]
//! static GLOBAL: Tracked<MyAllocator> = Tracked::new(MyAllocator, c"my allocator");
//! ```
//!
//! An arena (`bumpalo::Bump`, say) reports its blocks and its resets itself:
//!
//! ```no_run
//! # let arena = 0u8; let p = [0u8; 64];
//! heaplens_api::pool_name(&arena, c"parser arena");
//! heaplens_api::alloc(&arena, p.as_ptr(), 64);
//! heaplens_api::pool_reset(&arena);
//! ```

#![warn(missing_docs)]

mod stats;
pub use stats::{stats, Counting, HeapStats, Source};

use std::alloc::{GlobalAlloc, Layout};
use std::ffi::{c_char, c_int, c_void, CStr};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// The kinds of call of the monitor's entry point `heaplens_pool_v1` (as in `heaplens.h`).
const ALLOC: c_int = 1;
const FREE: c_int = 2;
const NAME: c_int = 3;
const RESET: c_int = 4;

type Entry = unsafe extern "C" fn(c_int, *const c_void, *const c_void, usize);

extern "C" {
    fn dlsym(handle: *mut c_void, symbol: *const c_char) -> *mut c_void;
}

/// 0: not looked up yet; 1: heaplens is absent; else the entry point.
static ENTRY: AtomicUsize = AtomicUsize::new(0);

#[inline]
fn entry() -> Option<Entry> {
    let mut e = ENTRY.load(Ordering::Acquire);
    if e == 0 {
        e = look_up();
    }
    // SAFETY: any value but 0 and 1 is the address `dlsym` gave for `heaplens_pool_v1`, whose
    // signature is `Entry`.
    (e != 1).then(|| unsafe { std::mem::transmute::<usize, Entry>(e) })
}

#[cold]
fn look_up() -> usize {
    // SAFETY: RTLD_DEFAULT (a null handle in glibc) and a NUL-terminated name.
    let f = unsafe { dlsym(std::ptr::null_mut(), c"heaplens_pool_v1".as_ptr()) } as usize;
    let e = if f == 0 { 1 } else { f };
    ENTRY.store(e, Ordering::Release);
    e
}

#[inline]
fn call(kind: c_int, pool: *const c_void, ptr: *const c_void, size: usize) {
    if let Some(f) = entry() {
        // SAFETY: the monitor's entry point takes any values; it reads `ptr` as a C string
        // only for NAME, where it is one.
        unsafe { f(kind, pool, ptr, size) };
    }
}

/// Whether the program runs under `heaplens run` (its entry point is there).
pub fn is_recording() -> bool {
    entry().is_some()
}

/// A block of `size` bytes at `ptr` was allocated from `pool` (any value that identifies the
/// pool: a reference to it, say).
#[inline]
pub fn alloc<P: ?Sized>(pool: &P, ptr: *const u8, size: usize) {
    call(ALLOC, pool as *const P as *const c_void, ptr.cast(), size);
}

/// The block at `ptr` of `pool` was released.
#[inline]
pub fn free<P: ?Sized>(pool: &P, ptr: *const u8) {
    call(FREE, pool as *const P as *const c_void, ptr.cast(), 0);
}

/// Names `pool` in every view; a later name replaces an earlier one.
pub fn pool_name<P: ?Sized>(pool: &P, name: &CStr) {
    call(NAME, pool as *const P as *const c_void, name.as_ptr().cast(), 0);
}

/// Every block of `pool` still live was released at once (an arena reset or dropped).
pub fn pool_reset<P: ?Sized>(pool: &P) {
    call(RESET, pool as *const P as *const c_void, std::ptr::null(), 0);
}

/// A [`GlobalAlloc`] that reports every block of the allocator `A` it wraps to heaplens, as a
/// pool named `name`. Wrap an allocator that does not call `malloc` (heaplens records those
/// calls already, and would count their blocks twice).
pub struct Tracked<A> {
    inner: A,
    name: &'static CStr,
    named: AtomicBool,
}

impl<A> Tracked<A> {
    /// Wraps `inner`, reporting its blocks as the pool `name`.
    pub const fn new(inner: A, name: &'static CStr) -> Self {
        Tracked { inner, name, named: AtomicBool::new(false) }
    }

    /// The wrapped allocator.
    pub fn inner(&self) -> &A {
        &self.inner
    }

    #[inline]
    fn allocated(&self, p: *mut u8, size: usize) {
        if p.is_null() {
            return;
        }
        if !self.named.load(Ordering::Relaxed) && !self.named.swap(true, Ordering::Relaxed) {
            pool_name(self, self.name);
        }
        alloc(self, p, size);
    }
}

// SAFETY: every call is `A`'s, with the same arguments and results; the reports only read them.
unsafe impl<A: GlobalAlloc> GlobalAlloc for Tracked<A> {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = self.inner.alloc(layout);
        self.allocated(p, layout.size());
        p
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = self.inner.alloc_zeroed(layout);
        self.allocated(p, layout.size());
        p
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        free(self, ptr);
        self.inner.dealloc(ptr, layout);
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = self.inner.realloc(ptr, layout, new_size);
        if !p.is_null() {
            free(self, ptr);
            self.allocated(p, new_size);
        }
        p
    }
}
