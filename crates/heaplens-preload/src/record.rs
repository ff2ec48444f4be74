//! Turning one intercepted call into one event: stack capture, encoding (the writer interns). Runs with
//! the guard held; a panic here disables the monitor instead of crossing into the program.

use std::ffi::c_void;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};

use heaplens_trace::Op;

use crate::thread::ThreadState;
use crate::{aggregate, modules, output, procinfo, sampling, thread, tls};

pub use crate::unwind::Caller;

/// Captures the caller's stack and interns it at once (the aggregated mode's counters are
/// keyed by node), with `leaf` below it; returns its trie node.
#[inline(always)]
fn stack_id(t: &mut ThreadState, caller: &Caller, leaf: Option<u64>) -> u32 {
    let c = t.capture(caller);
    t.intern_leaf(&c, leaf)
}

/// Capture counters, summed over threads and printed at exit when `HEAPLENS_STATS=1`.
#[derive(Debug, Default, Clone, Copy)]
pub struct Stats {
    /// Stacks captured.
    pub captures: u64,
    /// Frames unwound (the rest came from the previous stack).
    pub unwound: u64,
    /// Captures that repeated a recent stack exactly (see `unwind/recent.rs`).
    pub repeats: u64,
    /// Frames in all captured stacks.
    pub depth: u64,
    /// Unwind-rule lookups that hit framehop's cache.
    pub rule_hits: u64,
    /// Lookups that found their slot empty: the first unwind through a return address.
    pub rule_misses: u64,
    /// Lookups whose slot held another address's rule (the DWARF CFI was parsed again).
    pub rule_conflicts: u64,
    /// With `HEAPLENS_CHECK_UNWIND=1`: captures also unwound whole by a second walker...
    pub checked: u64,
    /// ...and of those, the ones whose two stacks differed (the incremental walk was wrong).
    pub check_failures: u64,
}

static TOTAL: std::sync::Mutex<Stats> = std::sync::Mutex::new(Stats {
    captures: 0,
    unwound: 0,
    repeats: 0,
    depth: 0,
    rule_hits: 0,
    rule_misses: 0,
    rule_conflicts: 0,
    checked: 0,
    check_failures: 0,
});

/// Adds a thread's counters to the process total.
pub fn add_stats(s: &Stats) {
    if let Ok(mut t) = TOTAL.lock() {
        t.captures += s.captures;
        t.unwound += s.unwound;
        t.repeats += s.repeats;
        t.depth += s.depth;
        t.rule_hits += s.rule_hits;
        t.rule_misses += s.rule_misses;
        t.rule_conflicts += s.rule_conflicts;
        t.checked += s.checked;
        t.check_failures += s.check_failures;
    }
}

/// Prints the process total on stderr (for tuning the monitor).
pub fn print_stats() {
    if let Ok(t) = TOTAL.lock() {
        let per = |v: u64| v as f64 / t.captures.max(1) as f64;
        eprintln!(
            "heaplens: {} stacks captured, {:.2} frames deep on average, {:.2} frames unwound per capture, {:.1}% repeated a recent stack",
            t.captures,
            per(t.depth),
            per(t.unwound),
            100.0 * per(t.repeats)
        );
        eprintln!(
            "heaplens: unwind rules: {} cache hits, {} first lookups, {} conflict misses",
            t.rule_hits, t.rule_misses, t.rule_conflicts
        );
        if crate::config().check_unwind {
            eprintln!("heaplens: unwind check: {} stacks also unwound whole, {} differed", t.checked, t.check_failures);
        }
        // The exiting thread's processor time, program and monitor together: for single-threaded
        // programs the cost the program's own thread bore, without the writer thread's.
        // SAFETY: `rusage` is plain integers, for which all zeros is a valid value.
        let mut u: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: fills `u`.
        if unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut u) } == 0 {
            let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
            eprintln!("heaplens: exiting thread's CPU time {:.3} s", secs(u.ru_utime) + secs(u.ru_stime));
        }
    }
}

static LAST_ADDS: AtomicU64 = AtomicU64::new(0);

/// The walk stopped in unknown code: if the loader has mapped something since we last looked
/// (a dlopen), refresh the module map. Returns whether anything changed.
#[cold]
pub fn modules_changed() -> bool {
    unsafe extern "C" fn adds(info: *mut libc::dl_phdr_info, _: usize, out: *mut c_void) -> i32 {
        *(out as *mut u64) = (*info).dlpi_adds;
        1
    }
    let mut now = 0u64;
    // SAFETY: the callback writes one u64 we own.
    unsafe { libc::dl_iterate_phdr(Some(adds), (&mut now as *mut u64).cast()) };
    if LAST_ADDS.swap(now, Ordering::AcqRel) == now {
        return false;
    }
    let changes = modules::refresh(procinfo::now_ns());
    output::module_changes(&changes);
    !changes.is_empty()
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
        t.push_with_stack(&caller, leaf, |b, pos, e| {
            let ts = procinfo::now_ticks();
            e.alloc_unterminated(b, pos, op, ts, p as u64, size as u64, usable as u64)
        });
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
        t.push_with_stack(&caller, None, |b, pos, e| {
            let ts = procinfo::now_ticks();
            e.realloc_unterminated(b, pos, op, ts, old as u64, p as u64, size as u64, usable as u64)
        });
        if sampling::enabled() {
            output::sampled();
        }
    });
}

/// Records the release of `p` (before the real deallocation runs, so the event precedes any
/// reuse of the address). While sampling, only releases of recorded blocks (that
/// `sampling::skip_free` let through) come here.
#[inline(always)]
pub fn dealloc(op: Op, p: *mut c_void) {
    guarded(|| {
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
        let ts = procinfo::now_ticks();
        t.push(|b, pos, e| e.dealloc(b, pos, op, ts, p as u64));
    });
}
