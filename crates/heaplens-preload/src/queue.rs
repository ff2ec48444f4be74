//! What the program's threads hand to the writer: filled event buffers (and a pool of empty
//! ones to fill next) and non-event blocks (thread names, module changes). The threads only
//! queue here; the writer (`output.rs`) takes from here, and decides when a thread must write
//! out the backlog itself ([`crate::output::handed_over`]).

use std::sync::{Condvar, Mutex};

use heaplens_trace::{BlockKind, ModuleRecord, ThreadName};

use crate::procinfo;

/// Filled thread buffers: (buffer, bytes used, whose stacks are commands to resolve).
pub type Queue = Vec<(Box<[u8]>, usize, bool)>;
/// The filled buffers, in the order they were handed over.
pub static QUEUE: Mutex<Queue> = Mutex::new(Vec::new());
/// Wakes the writer when buffers pile up.
pub static WAKE: Condvar = Condvar::new();
/// Empty buffers, for the threads to fill next.
pub static POOL: Mutex<Vec<Box<[u8]>>> = Mutex::new(Vec::new());
/// Non-event blocks waiting to be written (modules, thread names).
pub static EXTRA: Mutex<Vec<(BlockKind, Vec<u8>)>> = Mutex::new(Vec::new());

/// Buffers queued from which the writer is woken at once rather than at its next round.
const WAKE_AT: usize = 4;

/// An empty event buffer: one of the pool, or a new one of `bytes`.
pub fn take_buffer(bytes: usize) -> Box<[u8]> {
    POOL.lock().ok().and_then(|mut p| p.pop()).unwrap_or_else(|| vec![0u8; bytes].into_boxed_slice())
}

/// Queues `len` bytes of `buf` (one Events payload, whose stacks are commands when
/// `deferred`, see `resolve.rs`) for writing; returns the buffers queued now.
pub fn submit(buf: Box<[u8]>, len: usize, deferred: bool) -> usize {
    let Ok(mut q) = QUEUE.lock() else { return 0 };
    q.push((buf, len, deferred));
    let backlog = q.len();
    drop(q);
    if backlog >= WAKE_AT {
        WAKE.notify_one();
    }
    backlog
}

/// Queues a non-event block.
pub fn extra(kind: BlockKind, payload: Vec<u8>) {
    if let Ok(mut e) = EXTRA.lock() {
        e.push((kind, payload));
    }
}

/// Queues the name of thread `tid`, when it can be read (a thread in its last destructors may
/// be gone from /proc already: an empty name would undo the one written before).
pub fn thread_name(tid: u32) {
    let name = procinfo::thread_name(tid);
    if !name.is_empty() {
        named(tid, name);
    }
}

/// Queues `name` as thread `tid`'s.
pub fn named(tid: u32, name: String) {
    extra(BlockKind::ThreadName, ThreadName { tid, name }.encode());
}

/// Queues module changes.
pub fn module_changes(changes: &[ModuleRecord]) {
    if !changes.is_empty() {
        extra(BlockKind::Modules, ModuleRecord::encode_all(changes));
    }
}
