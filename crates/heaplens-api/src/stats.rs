//! Heap assertions in tests (dhat-rs's testing mode, without changing the allocator under
//! heaplens): [`stats`] gives the program's heap counters now. Under `heaplens run` the monitor
//! answers, counting every `malloc` of the process (C libraries' too); without heaplens,
//! [`Counting`], a [`GlobalAlloc`] wrapper installed as the global allocator, counts the Rust
//! program's own allocations. Either way a test takes [`stats`] before and after the code it
//! checks and compares the difference:
//!
//! ```no_run
//! #[global_allocator]
//! static ALLOC: heaplens_api::Counting = heaplens_api::Counting::system();
//!
//! fn names(n: usize) -> Vec<String> {
//!     (0..n).map(|i| format!("name {i}")).collect()
//! }
//!
//! #[test]
//! fn names_allocate_once_per_name_and_once_for_the_vector() {
//!     let before = heaplens_api::stats();
//!     let v = names(100);
//!     let made = heaplens_api::stats().total_blocks - before.total_blocks;
//!     assert!(made <= 101, "{made} allocations");
//!     drop(v);
//! }
//! ```
//!
//! The counters are the process's: run such tests one at a time (`cargo test --
//! --test-threads=1`), or other tests' allocations count too. Under heaplens the monitor keeps
//! its counters from the first allocation through [`Counting`] (or the first call of [`stats`],
//! without it); a sampled run (`--sample-rate`) cannot count exactly, and [`Counting`] answers.

use std::alloc::{GlobalAlloc, Layout, System};
use std::ffi::{c_char, c_void};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

/// The heap's counters at one moment. Bytes are requested sizes; "blocks" are allocations.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HeapStats {
    /// Blocks allocated since counting began.
    pub total_blocks: u64,
    /// Bytes allocated since counting began.
    pub total_bytes: u64,
    /// Blocks live now.
    pub curr_blocks: u64,
    /// Bytes live now.
    pub curr_bytes: u64,
    /// Blocks live when `max_bytes` was reached.
    pub max_blocks: u64,
    /// The most bytes live at once.
    pub max_bytes: u64,
    /// Who counted.
    pub source: Source,
}

/// Who answered [`stats`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Source {
    /// Nobody: no heaplens and no [`Counting`] allocator; every number is 0.
    #[default]
    None,
    /// The heaplens monitor: every allocation of the process.
    Monitor,
    /// The [`Counting`] global allocator: the Rust program's allocations.
    Counting,
}

type StatsEntry = unsafe extern "C" fn(*mut u64, usize) -> i32;

extern "C" {
    fn dlsym(handle: *mut c_void, symbol: *const c_char) -> *mut c_void;
}

/// 0: not looked up yet; 1: no monitor; else `heaplens_heap_stats_v1`.
static ENTRY: AtomicUsize = AtomicUsize::new(0);

fn entry() -> Option<StatsEntry> {
    let mut e = ENTRY.load(Ordering::Acquire);
    if e == 0 {
        // SAFETY: RTLD_DEFAULT (a null handle in glibc) and a NUL-terminated name.
        let f = unsafe { dlsym(std::ptr::null_mut(), c"heaplens_heap_stats_v1".as_ptr()) } as usize;
        e = if f == 0 { 1 } else { f };
        ENTRY.store(e, Ordering::Release);
    }
    // SAFETY: any value but 0 and 1 is the address dlsym gave for `heaplens_heap_stats_v1`,
    // whose signature is `StatsEntry`.
    (e != 1).then(|| unsafe { std::mem::transmute::<usize, StatsEntry>(e) })
}

/// The monitor's counters, turning them on if they were off; `None` without a monitor that
/// can count.
fn from_monitor() -> Option<[u64; 6]> {
    let f = entry()?;
    let mut v = [0u64; 6];
    // SAFETY: room for the 6 values asked for.
    (unsafe { f(v.as_mut_ptr(), v.len()) } >= 0).then_some(v)
}

/// [total blocks, total bytes, live blocks, live bytes, peak blocks, peak bytes] of [`Counting`].
static COUNTS: [AtomicU64; 6] = [const { AtomicU64::new(0) }; 6];
/// A [`Counting`] allocator allocated.
static COUNTING: AtomicBool = AtomicBool::new(false);

/// The program's heap counters now: the monitor's under `heaplens run`, else those of the
/// [`Counting`] global allocator, else zeros ([`Source::None`]).
pub fn stats() -> HeapStats {
    let (v, source) = match from_monitor() {
        Some(v) => (v, Source::Monitor),
        None if COUNTING.load(Ordering::Acquire) => {
            (COUNTS.each_ref().map(|c| c.load(Ordering::Relaxed)), Source::Counting)
        }
        None => ([0; 6], Source::None),
    };
    HeapStats {
        total_blocks: v[0],
        total_bytes: v[1],
        curr_blocks: v[2],
        curr_bytes: v[3],
        max_blocks: v[4],
        max_bytes: v[5],
        source,
    }
}

/// A [`GlobalAlloc`] that counts the blocks of the allocator it wraps (the system's, by
/// default) for [`stats`]: a few atomic additions a call. Under heaplens it also turns the
/// monitor's counters on at its first allocation, so that they cover the whole run.
pub struct Counting<A = System> {
    inner: A,
}

impl Counting<System> {
    /// Counts the system allocator's blocks.
    pub const fn system() -> Self {
        Counting { inner: System }
    }
}

impl<A> Counting<A> {
    /// Counts `inner`'s blocks.
    pub const fn new(inner: A) -> Self {
        Counting { inner }
    }

    #[inline]
    fn allocated(size: usize) {
        let size = size as u64;
        COUNTS[0].fetch_add(1, Ordering::Relaxed);
        COUNTS[1].fetch_add(size, Ordering::Relaxed);
        let blocks = COUNTS[2].fetch_add(1, Ordering::Relaxed) + 1;
        let bytes = COUNTS[3].fetch_add(size, Ordering::Relaxed) + size;
        if bytes > COUNTS[5].load(Ordering::Relaxed) && COUNTS[5].fetch_max(bytes, Ordering::Relaxed) < bytes {
            COUNTS[4].store(blocks, Ordering::Relaxed);
        }
    }

    #[inline]
    fn released(size: usize) {
        COUNTS[2].fetch_sub(1, Ordering::Relaxed);
        COUNTS[3].fetch_sub(size as u64, Ordering::Relaxed);
    }

    #[inline]
    fn first() {
        if !COUNTING.load(Ordering::Relaxed) && !COUNTING.swap(true, Ordering::AcqRel) {
            // The monitor counts from here (its lookup and call allocate nothing through us).
            let _ = from_monitor();
        }
    }
}

// SAFETY: every call is `A`'s, with the same arguments and results; the counters only read them.
unsafe impl<A: GlobalAlloc> GlobalAlloc for Counting<A> {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        Self::first();
        let p = self.inner.alloc(layout);
        if !p.is_null() {
            Self::allocated(layout.size());
        }
        p
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        Self::first();
        let p = self.inner.alloc_zeroed(layout);
        if !p.is_null() {
            Self::allocated(layout.size());
        }
        p
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        Self::released(layout.size());
        self.inner.dealloc(ptr, layout);
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = self.inner.realloc(ptr, layout, new_size);
        if !p.is_null() {
            Self::released(layout.size());
            Self::allocated(new_size);
        }
        p
    }
}
