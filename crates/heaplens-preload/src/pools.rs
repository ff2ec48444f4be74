//! The pools and arenas a program reports itself through `include/heaplens.h` (or the
//! `heaplens-api` crate): each pool gets a frame of its own (see
//! [`heaplens_trace::event::POOL_FRAMES`]), described to the trace as a module named after
//! the pool, and the addresses of its live blocks, so that a reset can release them all.
//!
//! Pools are few and their calls are the program's own choice, so one lock serves them all.

use std::collections::HashSet;
use std::sync::Mutex;

use heaplens_trace::event::{POOL_FRAMES, POOL_MODULE_PREFIX};
use heaplens_trace::record::Segment;
use heaplens_trace::ModuleRecord;

use crate::intern::FxMap;

/// Bytes of address space each pool's frame stands on.
const FRAME_SPAN: u64 = 16;

/// Most pools with a frame of their own; later ones share the last.
const MAX_POOLS: u64 = 1 << 20;

struct Pool {
    /// Its frame's return address.
    frame: u64,
    /// Live blocks (addresses without the tag).
    live: HashSet<u64, std::hash::BuildHasherDefault<rustc_hash::FxHasher>>,
}

#[derive(Default)]
struct Pools {
    by_handle: FxMap<u64, Pool>,
    next: u64,
}

static POOLS: Mutex<Option<Pools>> = Mutex::new(None);

fn with<R>(f: impl FnOnce(&mut Pools) -> R) -> Option<R> {
    let mut g = POOLS.lock().ok()?;
    Some(f(g.get_or_insert_with(Pools::default)))
}

/// The module record that names the pool whose frame is `frame`.
fn module(frame: u64, name: &str) -> ModuleRecord {
    ModuleRecord {
        ts: crate::procinfo::now_ns(),
        loaded: true,
        base: frame - FRAME_SPAN / 2,
        path: format!("{POOL_MODULE_PREFIX}{name}").into(),
        build_id: Vec::new(),
        segments: vec![Segment { vaddr: 0, memsz: FRAME_SPAN, flags: 1 }],
    }
}

impl Pools {
    /// The pool of `handle`, made (and described to the trace) on first use.
    fn get(&mut self, handle: u64) -> &mut Pool {
        if !self.by_handle.contains_key(&handle) {
            let i = self.next.min(MAX_POOLS - 1);
            self.next += 1;
            let frame = POOL_FRAMES + i * FRAME_SPAN + FRAME_SPAN / 2;
            crate::queue::module_changes(&[module(frame, &format!("{handle:#x}"))]);
            self.by_handle.insert(handle, Pool { frame, live: HashSet::default() });
        }
        self.by_handle.get_mut(&handle).expect("just inserted")
    }
}

/// A block `addr` of the pool `handle` was allocated: returns the pool's frame.
pub fn allocated(handle: u64, addr: u64) -> Option<u64> {
    with(|p| {
        let pool = p.get(handle);
        pool.live.insert(addr);
        pool.frame
    })
}

/// The block `addr` of pool `handle` was released.
pub fn released(handle: u64, addr: u64) {
    with(|p| p.get(handle).live.remove(&addr));
}

/// Names pool `handle` (a later name replaces an earlier one in every view).
pub fn name(handle: u64, name: &str) {
    with(|p| {
        let frame = p.get(handle).frame;
        crate::queue::module_changes(&[module(frame, name)]);
    });
}

/// Pool `handle` was reset: its live blocks, which are released with it.
pub fn reset(handle: u64) -> Vec<u64> {
    with(|p| p.get(handle).live.drain().collect()).unwrap_or_default()
}
