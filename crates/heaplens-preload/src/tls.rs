//! The per-thread slot (see `csrc/tls.c`) and the re-entrancy guard built on it.

use std::ffi::c_void;

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
}

extern "C" {
    fn hl_tls() -> *mut Tls;
}

/// This thread's slot. Never allocates, never fails.
#[inline(always)]
pub fn slot() -> &'static mut Tls {
    // SAFETY: initial-exec TLS is valid for the thread's whole life, and only this thread
    // touches its own slot.
    unsafe { &mut *hl_tls() }
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
