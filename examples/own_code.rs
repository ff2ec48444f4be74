//! Truth program for attribution in Rust: each function of its own allocates through one type
//! of the standard library (Vec, String, HashMap, Box, Arc) and prints the allocations and
//! bytes it made, counted by a global allocator that forwards to the system's (run the report
//! with `--skip '^<own_code::Counting'` so that this wrapper is passed over like malloc).
use std::alloc::{GlobalAlloc, Layout, System};
use std::collections::HashMap;
use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

struct Counting;
static CALLS: AtomicU64 = AtomicU64::new(0);
static BYTES: AtomicU64 = AtomicU64::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        CALLS.fetch_add(1, Relaxed);
        BYTES.fetch_add(layout.size() as u64, Relaxed);
        System.alloc(layout)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout)
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Runs `f` and prints the allocations and bytes it made as `own: fn=NAME allocs=N bytes=B`.
fn measure<T>(name: &str, f: impl FnOnce() -> T) -> T {
    let (c, b) = (CALLS.load(Relaxed), BYTES.load(Relaxed));
    let r = f();
    let (c, b) = (CALLS.load(Relaxed) - c, BYTES.load(Relaxed) - b);
    println!("own: fn={name} allocs={c} bytes={b}");
    r
}

#[inline(never)]
fn fill_vec() -> Vec<u64> {
    let mut v = Vec::with_capacity(500);
    for i in 0..500 {
        v.push(i);
    }
    v
}

#[inline(never)]
fn make_text() -> String {
    let mut s = String::new();
    for i in 0..200 {
        s.push_str(&i.to_string());
    }
    s
}

#[inline(never)]
fn build_index() -> HashMap<u64, u64> {
    let mut m = HashMap::with_capacity(100);
    for i in 0..100 {
        m.insert(i, i * 2);
    }
    m
}

#[inline(never)]
fn boxed() -> Box<[u8; 300]> {
    Box::new([7; 300])
}

#[inline(never)]
fn shared() -> Arc<[u64; 32]> {
    Arc::new([1; 32])
}

fn main() {
    let v = measure("own_code::fill_vec", fill_vec);
    let s = measure("own_code::make_text", make_text);
    let m = measure("own_code::build_index", build_index);
    let b = measure("own_code::boxed", boxed);
    let a = measure("own_code::shared", shared);
    black_box((&v, &s, &m, &b, &a));
    println!("own: done={}", v.len() + s.len() + m.len() + b.len() + a.len());
}
