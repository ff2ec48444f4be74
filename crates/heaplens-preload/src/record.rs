//! Turning one intercepted call into one event: stack capture, encoding (the writer interns). Runs with
//! the guard held; a panic here disables the monitor instead of crossing into the program.

use std::ffi::c_void;
use std::panic::{catch_unwind, AssertUnwindSafe};

use heaplens_trace::Op;

use crate::thread::ThreadState;
use crate::{aggregate, heap_stats, output, procinfo, sampling, thread, tls};

pub use crate::unwind::Caller;

/// Captures the caller's stack and interns it at once (the aggregated mode's counters are
/// keyed by node), with `leaf` below it; returns its trie node.
#[inline(always)]
fn stack_id(t: &mut ThreadState, caller: &Caller, leaf: Option<u64>) -> u32 {
    let c = t.capture(caller);
    t.intern_leaf(&c, leaf)
}

#[inline(always)]
fn guarded(f: impl FnOnce()) {
    if catch_unwind(AssertUnwindSafe(f)).is_err() {
        crate::disable("internal error while recording");
    }
}

/// Records an allocation through `op` that returned `p` (null when it failed) for `size` bytes.
/// While sampling, only calls that `sampling::skip` let through come here.
///
/// # Safety
/// `p` is null or a block the allocator just returned.
#[inline(always)]
pub unsafe fn alloc(caller: Caller, op: Op, p: *mut c_void, size: usize) {
    alloc_usable(caller, op, p, size, None, |p| unsafe { libc::malloc_usable_size(p) })
}

/// [`alloc`] of a block whose usable size `usable` gives (the allocator's own function, for
/// a replacement allocator's entry points), its stack ending in the frame `leaf` when given
/// (a pool's).
///
/// # Safety
/// As [`alloc`]; `usable` is safe to call on `p`.
#[inline(always)]
pub unsafe fn alloc_usable(
    caller: Caller,
    op: Op,
    p: *mut c_void,
    size: usize,
    leaf: Option<u64>,
    usable: impl FnOnce(*mut c_void) -> usize,
) {
    // While sampling, the hook let this call through `sampling::skip`: it is a sample.
    if sampling::enabled() {
        if p.is_null() {
            return;
        }
        sampling::rearm(tls::slot());
        sampling::insert(p as u64);
    }
    guarded(|| {
        if heap_stats::enabled() && !p.is_null() && op != Op::PoolAlloc {
            heap_stats::allocated(p as u64, size as u64);
        }
        let Some(t) = thread::current() else { return };
        let usable = if p.is_null() { 0 } else { usable(p) };
        if aggregate::enabled() {
            let stack = if p.is_null() { 0 } else { stack_id(t, &caller, leaf) };
            t.counters(|c| {
                aggregate::call(c, op);
                if !p.is_null() {
                    aggregate::allocated(c, p as u64, size as u64, stack);
                }
            });
            return;
        }
        let queued = t.push_with_stack(&caller, leaf, |b, pos, e| {
            let ts = procinfo::now_ticks();
            e.alloc_unterminated(b, pos, op, ts, p as u64, size as u64, usable as u64)
        });
        output::handed_over(queued);
        if sampling::enabled() {
            output::sampled();
        }
    });
}

/// Records a reallocation of `old` to `p` for `size` bytes.
///
/// # Safety
/// `p` is null or a block the allocator just returned.
#[inline(always)]
pub unsafe fn realloc(caller: Caller, op: Op, old: *mut c_void, p: *mut c_void, size: usize) {
    realloc_usable(caller, op, old, p, size, |p| unsafe { libc::malloc_usable_size(p) })
}

/// [`realloc`] with the usable size from `usable` (see [`alloc_usable`]).
///
/// # Safety
/// As [`realloc`]; `usable` is safe to call on `p`.
#[inline(always)]
pub unsafe fn realloc_usable(
    caller: Caller,
    op: Op,
    old: *mut c_void,
    p: *mut c_void,
    size: usize,
    usable: impl FnOnce(*mut c_void) -> usize,
) {
    let (old, p, size) = if sampling::enabled() {
        if p.is_null() && size != 0 {
            return; // failed: the old block is untouched
        }
        let old_recorded = !old.is_null() && sampling::remove(old as u64);
        let new_recorded = !p.is_null() && sampling::take(tls::slot(), size);
        if new_recorded {
            sampling::insert(p as u64);
        }
        match (old_recorded, new_recorded) {
            (false, false) => return,
            // Only the release of a recorded block: shaped like realloc(old, 0).
            (true, false) => (old, std::ptr::null_mut(), 0),
            // Only a new recorded block: shaped like realloc(NULL, size).
            (false, true) => (std::ptr::null_mut(), p, size),
            (true, true) => (old, p, size),
        }
    } else {
        (old, p, size)
    };
    guarded(|| {
        if heap_stats::enabled() {
            // A failed reallocation (null for a non-zero size) leaves the old block allocated.
            let failed = p.is_null() && size != 0;
            if !old.is_null() && !failed {
                heap_stats::released(old as u64);
            }
            if !p.is_null() {
                heap_stats::allocated(p as u64, size as u64);
            }
        }
        let Some(t) = thread::current() else { return };
        let usable = if p.is_null() { 0 } else { usable(p) };
        if aggregate::enabled() {
            let failed = p.is_null() && size != 0;
            let stack = if p.is_null() { 0 } else { stack_id(t, &caller, None) };
            t.counters(|c| {
                aggregate::call(c, op);
                if !failed && !old.is_null() {
                    aggregate::released(c, old as u64);
                }
                if !p.is_null() {
                    aggregate::allocated(c, p as u64, size as u64, stack);
                }
            });
            return;
        }
        let queued = t.push_with_stack(&caller, None, |b, pos, e| {
            let ts = procinfo::now_ticks();
            e.realloc_unterminated(b, pos, op, ts, old as u64, p as u64, size as u64, usable as u64)
        });
        output::handed_over(queued);
        if sampling::enabled() {
            output::sampled();
        }
    });
}

/// Counts the release of a null pointer through `op` (the aggregated mode counts it as a call
/// of `op`; a recording counts it per thread, see [`thread::null_frees`]).
#[inline(always)]
pub fn null_free(op: Op) {
    if aggregate::enabled() {
        return dealloc(op, std::ptr::null_mut());
    }
    if let Some(t) = thread::current() {
        t.count_null_free();
    }
}

/// Records the release of `p` (before the real deallocation runs, so the event precedes any
/// reuse of the address). While sampling, only releases of recorded blocks (that
/// `sampling::skip_free` let through) come here.
#[inline(always)]
pub fn dealloc(op: Op, p: *mut c_void) {
    guarded(|| {
        if heap_stats::enabled() && !p.is_null() && op != Op::PoolFree {
            heap_stats::released(p as u64);
        }
        let Some(t) = thread::current() else { return };
        if aggregate::enabled() {
            t.counters(|c| {
                aggregate::call(c, op);
                if !p.is_null() {
                    aggregate::released(c, p as u64);
                }
            });
            return;
        }
        // Stamped inside the state's lock, like allocations: `solo.rs` counts on every stamp
        // of a thread outside its hooks being in its buffer.
        output::handed_over(t.push(|b, pos, e| e.dealloc(b, pos, op, procinfo::now_ticks_ordered(), p as u64)));
    });
}
