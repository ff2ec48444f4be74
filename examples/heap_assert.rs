//! Heap assertions in a Rust test, as `heaplens_api::stats` documents them: `names(100)` makes
//! one allocation per name and one for the vector, and the test holds it to that. Built with
//! `--cfg grow`, `names` also keeps a copy of each name, twice the allocations, and the test
//! fails. It passes (or fails) the same under `heaplens run` (the monitor counts) as without it
//! (the `Counting` allocator counts), and prints what it measured:
//! `heap_assert: source=... blocks=... bytes=...`.
//!
//! rustc --edition 2021 --test -O --extern heaplens_api=libheaplens_api.rlib heap_assert.rs
//! ./heap_assert --test-threads=1 --nocapture

// Built with `--cfg no_counting`, only the monitor can count (from the first `stats`).
#[cfg(not(no_counting))]
#[global_allocator]
static ALLOC: heaplens_api::Counting = heaplens_api::Counting::system();

/// `n` names, each its own String.
#[inline(never)]
fn names(n: usize) -> Vec<String> {
    let mut v = Vec::with_capacity(n);
    for i in 0..n {
        let name = format!("widget number {i:>6}");
        #[cfg(grow)]
        std::hint::black_box(name.clone());
        v.push(name);
    }
    v
}

#[test]
fn names_allocate_once_per_name_and_once_for_the_vector() {
    // libtest runs the test on a thread of its own, and its main thread allocates a few blocks
    // as it starts waiting for the test: let it settle, as the counters are the process's.
    std::thread::sleep(std::time::Duration::from_millis(50));
    let before = heaplens_api::stats();
    let v = std::hint::black_box(names(100));
    let after = heaplens_api::stats();
    let blocks = after.total_blocks - before.total_blocks;
    let bytes = after.total_bytes - before.total_bytes;
    let live = after.curr_blocks - before.curr_blocks;
    println!("\nheap_assert: source={:?} blocks={blocks} bytes={bytes} live={live}", after.source);
    assert_ne!(after.source, heaplens_api::Source::None, "nobody counts: install heaplens_api::Counting");
    assert!(blocks <= 101, "names(100) made {blocks} allocations, at most 101 expected");
    drop(v);
}
