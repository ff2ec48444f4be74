//! A Rust program whose global allocator is its own (a bump allocator over a static buffer,
//! which never calls malloc), wrapped in `heaplens_api::Tracked`, and with a scratch arena
//! that reports its blocks and resets through `heaplens_api`. Built against the heaplens-api
//! crate (crates/heaplens/tests/rust_pools.rs builds it with rustc). Prints what it did as
//! `rustpools: key=value ...`.

use std::alloc::{GlobalAlloc, Layout};
use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicUsize, Ordering};

use heaplens_api::Tracked;

const HEAP_BYTES: usize = 64 << 20;

#[repr(align(4096))]
struct Heap(UnsafeCell<[u8; HEAP_BYTES]>);
// SAFETY: blocks are handed out once each, by an atomic bump.
unsafe impl Sync for Heap {}
static HEAP: Heap = Heap(UnsafeCell::new([0; HEAP_BYTES]));

/// Hands out blocks from `HEAP` in order and never takes them back.
struct Bump {
    next: AtomicUsize,
}

unsafe impl GlobalAlloc for Bump {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let base = HEAP.0.get() as usize;
        let mut cur = self.next.load(Ordering::Relaxed);
        loop {
            let start = (base + cur).next_multiple_of(layout.align()) - base;
            let end = start + layout.size();
            if end > HEAP_BYTES {
                return std::ptr::null_mut();
            }
            match self.next.compare_exchange_weak(cur, end, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => return (base + start) as *mut u8,
                Err(now) => cur = now,
            }
        }
    }

    unsafe fn dealloc(&self, _ptr: *mut u8, _layout: Layout) {}
}

#[global_allocator]
static GLOBAL: Tracked<Bump> = Tracked::new(Bump { next: AtomicUsize::new(0) }, c"bump");

#[inline(never)]
fn make_boxes(n: usize) -> Vec<Box<[u8; 300]>> {
    (0..n).map(|i| Box::new([i as u8; 300])).collect()
}

#[inline(never)]
fn leak_site(n: usize) {
    for i in 0..n {
        std::hint::black_box(Box::leak(Box::new([i as u8; 1000])));
    }
}

/// An arena of the program's own: blocks carved from one buffer, all released at a reset.
struct Scratch {
    buf: Vec<u8>,
    used: usize,
}

impl Scratch {
    #[inline(never)]
    fn alloc(&mut self, n: usize) -> *mut u8 {
        let p = self.buf[self.used..].as_mut_ptr();
        self.used += n;
        heaplens_api::alloc(self, p, n);
        p
    }

    fn reset(&mut self) {
        self.used = 0;
        heaplens_api::pool_reset(self);
    }
}

fn main() {
    let n: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(2000);
    let kept = n / 10;
    let boxes = make_boxes(n);
    let keep: Vec<Box<[u8; 300]>> = boxes.into_iter().take(kept).collect();
    std::mem::forget(keep);
    leak_site(7);

    let mut scratch = Scratch { buf: vec![0; 1 << 16], used: 0 };
    heaplens_api::pool_name(&scratch, c"scratch");
    for _ in 0..10 {
        for _ in 0..100 {
            std::hint::black_box(scratch.alloc(64));
        }
        scratch.reset();
    }
    println!(
        "rustpools: boxes={n} kept={kept} leaked=7 leaked_bytes=7000 scratch_blocks=1000 scratch_bytes=64000 recording={}",
        heaplens_api::is_recording()
    );
}
