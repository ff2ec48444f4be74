//! The per-thread slot (see `csrc/tls.c`) and the re-entrancy guard built on it.

use std::ffi::c_void;
use std::sync::atomic::{AtomicIsize, Ordering};

/// Mirrors `struct hl_tls` in `csrc/tls.c`.
#[repr(C)]
pub struct Tls {
    /// Non-zero while monitor code runs on this thread: allocations then pass straight through.
    pub guard: u32,
    /// Set after the thread's state was torn down at thread exit.
    pub dead: u32,
    /// The thread's `ThreadState`, null before its first event.
    pub thread: *mut c_void,
    /// Bytes until the next sampled allocation (see `sampling`).
    pub sample_left: i64,
    /// The sampler's random state, 0 until first used.
    pub rng: u64,
    /// The thread's CPU-time sampler (`crate::cpu`), null when it has none.
    pub cpu: *mut c_void,
    /// The sampling generation [`Tls::cpu`] belongs to: a pointer of an earlier one (a
    /// detached recording's, since freed) is not the thread's sampler.
    pub cpu_gen: u64,
}

/// Where `crate::fastpath` finds [`Tls::sample_left`].
pub(crate) const SAMPLE_LEFT_OFFSET: usize = 16;
const _: () = assert!(std::mem::offset_of!(Tls, sample_left) == SAMPLE_LEFT_OFFSET);

extern "C" {
    fn hl_tls() -> *mut Tls;
    fn hl_tls_offset() -> isize;
}

/// The slot's offset from the thread pointer, once known (0 before: then ask the C shim).
static OFFSET: AtomicIsize = AtomicIsize::new(0);

/// Learns the slot's offset from the thread pointer (the same for every thread with the
/// initial-exec model), so [`slot`] needs no call. Call once at start-up.
pub fn init_fast_path() {
    // SAFETY: no preconditions.
    OFFSET.store(unsafe { hl_tls_offset() }, Ordering::Relaxed);
}

/// The slot's offset from the thread pointer (0 until [`init_fast_path`]).
pub fn offset() -> isize {
    OFFSET.load(Ordering::Relaxed)
}

/// This thread's slot. Never allocates, never fails.
#[inline(always)]
pub fn slot() -> &'static mut Tls {
    let off = OFFSET.load(Ordering::Relaxed);
    // SAFETY: initial-exec TLS is valid for the thread's whole life, and only this thread
    // touches its own slot. On x86_64 fs:0 holds the thread pointer itself.
    unsafe {
        if off == 0 {
            return &mut *hl_tls();
        }
        let tp: usize;
        std::arch::asm!("mov {}, fs:0", out(reg) tp, options(nostack, readonly, preserves_flags));
        &mut *((tp as isize + off) as *mut Tls)
    }
}

/// Holds the guard for a scope; dropping it (also while a C++ exception unwinds through a
/// hook) lets the thread's allocations be recorded again.
pub struct Guard(());

impl Guard {
    /// Enters monitor code; `None` when the thread already is inside it (a nested call from
    /// the monitor itself, or a signal handler that interrupted a hook).
    #[inline(always)]
    pub fn enter() -> Option<Guard> {
        let s = slot();
        if s.guard != 0 {
            return None;
        }
        s.guard = 1;
        Some(Guard(()))
    }
}

impl Drop for Guard {
    #[inline(always)]
    fn drop(&mut self) {
        slot().guard = 0;
    }
}
