//! The lock on a thread's recording state: taken on every event by the thread that owns the
//! state, and only rarely by another (the writer's sweep, exit, fork).
//!
//! An ordinary spin lock costs its owner an atomic exchange per event (6 ns here, a tenth of
//! the monitor's cost per event on the C++ churn benchmark). This is an asymmetric Dekker lock
//! instead: the owner announces itself with a plain store and checks for a thief with a plain
//! load, with no fence between them; a thief announces itself and then runs `membarrier`
//! (`MEMBARRIER_CMD_PRIVATE_EXPEDITED`), which makes every running thread of the process
//! execute a full barrier. Either the owner sees the thief, or the thief sees the owner, as with
//! fences on both sides. Where `membarrier` is not available (old kernels, seccomp), the owner
//! pays a full fence instead. (A seccomp filter that kills the process on `membarrier`, rather
//! than refusing it, kills it at the writer's first sweep: such sandboxes cannot be profiled.)

use std::sync::atomic::{compiler_fence, fence, AtomicBool, Ordering};

/// Whether `membarrier` stands in for the owner's fence (see [`init`]).
static ASYMMETRIC: AtomicBool = AtomicBool::new(false);

const MEMBARRIER_CMD_PRIVATE_EXPEDITED: libc::c_long = 1 << 3;
const MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED: libc::c_long = 1 << 4;

/// Registers the process for expedited membarriers. Call at start-up and in a forked child,
/// before any thread's state is locked.
pub fn init() {
    // SAFETY: a system call with integer arguments only.
    let ok = unsafe { libc::syscall(libc::SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) } == 0;
    ASYMMETRIC.store(ok, Ordering::Release);
}

/// The owner's side of the barrier: free with `membarrier`, a full fence without.
#[inline(always)]
fn owner_fence() {
    if ASYMMETRIC.load(Ordering::Relaxed) {
        compiler_fence(Ordering::SeqCst);
    } else {
        fence(Ordering::SeqCst);
    }
}

/// The thief's side: a barrier on every running thread of the process.
fn thief_fence() {
    fence(Ordering::SeqCst);
    if ASYMMETRIC.load(Ordering::Acquire) {
        // SAFETY: a system call with integer arguments only.
        let r = unsafe { libc::syscall(libc::SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) };
        if r != 0 {
            // Registered, so only a seccomp filter the program installed since can refuse it.
            // Owners fence from now on; one may be inside already, its store not yet visible:
            // give store buffers (nanoseconds) and that critical section (microseconds) ample
            // time before looking at its flag.
            ASYMMETRIC.store(false, Ordering::SeqCst);
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
    }
}

/// A lock with one owner thread (fast, [`OwnerLock::enter`]) and occasional thieves
/// ([`OwnerLock::steal`]).
#[derive(Default)]
pub struct OwnerLock {
    /// The owner is inside.
    busy: AtomicBool,
    /// A thief holds the lock, or is taking it; also excludes thieves from each other.
    thief: AtomicBool,
}

impl OwnerLock {
    /// Takes the lock on the owner's thread; waits while a thief holds it.
    #[inline(always)]
    pub fn enter(&self) {
        self.busy.store(true, Ordering::Relaxed);
        owner_fence();
        if self.thief.load(Ordering::Acquire) {
            self.enter_slow();
        }
    }

    #[cold]
    fn enter_slow(&self) {
        loop {
            self.busy.store(false, Ordering::Release);
            let mut spin = 0u32;
            while self.thief.load(Ordering::Acquire) {
                spin += 1;
                if spin > 100 {
                    std::thread::yield_now();
                }
                std::hint::spin_loop();
            }
            self.busy.store(true, Ordering::Relaxed);
            fence(Ordering::SeqCst);
            if !self.thief.load(Ordering::Acquire) {
                return;
            }
        }
    }

    /// Releases the lock the owner took.
    #[inline(always)]
    pub fn leave(&self) {
        self.busy.store(false, Ordering::Release);
    }

    /// Takes the lock from another thread (or from the owner outside [`OwnerLock::enter`]).
    /// Gives up after a bounded wait, returning false: a thread that left a hook by `longjmp`
    /// from a signal handler may never leave, and exit must not hang on it.
    pub fn steal(&self) -> bool {
        let mut won = false;
        for spin in 0..100_000u32 {
            if self.thief.compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire).is_ok() {
                won = true;
                break;
            }
            if spin > 100 {
                std::thread::yield_now();
            }
        }
        if !won {
            return false;
        }
        thief_fence();
        for spin in 0..100_000u32 {
            if !self.busy.load(Ordering::Acquire) {
                return true;
            }
            if spin > 100 {
                std::thread::yield_now();
            }
        }
        self.thief.store(false, Ordering::Release);
        false
    }

    /// Looks into several owners' states from another thread without waiting: takes each of
    /// `locks` that no other thief holds and whose owner is outside [`OwnerLock::enter`] (one
    /// barrier serves them all), calls `f` with which were taken, in order, and lets them go.
    /// An owner that enters meanwhile waits until then.
    pub fn peek_all<R>(locks: &[&OwnerLock], f: impl FnOnce(&[bool]) -> R) -> R {
        let won: Vec<bool> = locks
            .iter()
            .map(|l| l.thief.compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire).is_ok())
            .collect();
        if won.iter().any(|&w| w) {
            thief_fence();
        }
        let taken: Vec<bool> = locks.iter().zip(&won).map(|(l, &w)| w && !l.busy.load(Ordering::Acquire)).collect();
        let r = f(&taken);
        for (l, &w) in locks.iter().zip(&won) {
            if w {
                l.thief.store(false, Ordering::Release);
            }
        }
        r
    }

    /// Releases a lock taken with [`OwnerLock::steal`].
    pub fn unsteal(&self) {
        self.thief.store(false, Ordering::Release);
    }

    /// In a forked child: nobody holds the lock (the other threads are gone).
    pub fn reset(&self) {
        self.busy.store(false, Ordering::Release);
        self.thief.store(false, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::UnsafeCell;

    struct Shared {
        lock: OwnerLock,
        count: UnsafeCell<u64>,
    }
    // SAFETY: `count` is only touched under `lock`, which is what the test checks.
    unsafe impl Sync for Shared {}

    /// Owner and thief both do non-atomic read-modify-writes under the lock: any moment both
    /// hold it loses an update, and the total comes out wrong.
    fn no_lost_updates() {
        let shared = Shared { lock: OwnerLock::default(), count: UnsafeCell::new(0) };
        let s = &shared;
        let (finished, steals) = (AtomicBool::new(false), std::sync::atomic::AtomicU64::new(0));
        let owned = std::thread::scope(|scope| {
            scope.spawn(|| {
                while !finished.load(Ordering::Acquire) {
                    if s.lock.steal() {
                        // SAFETY: under the lock.
                        unsafe { *s.count.get() += 1 << 32 };
                        s.lock.unsteal();
                        steals.fetch_add(1, Ordering::Relaxed);
                        // A thief that steals again at once leaves the owner only the instant
                        // between two thefts: on two busy processors the owner's million
                        // entries then took minutes (a CI run waited on it). Real thieves (the
                        // writer's sweeps) come every few milliseconds.
                        std::thread::yield_now();
                        for _ in 0..1000 {
                            std::hint::spin_loop();
                        }
                    }
                }
            });
            // Until the thief got in often enough, and at least a million times.
            let mut n = 0u64;
            while n < 1_000_000 || steals.load(Ordering::Relaxed) < 500 {
                s.lock.enter();
                // SAFETY: under the lock.
                unsafe { *s.count.get() += 1 };
                s.lock.leave();
                n += 1;
            }
            finished.store(true, Ordering::Release);
            n
        });
        let stolen = steals.load(Ordering::Relaxed);
        assert_eq!(shared.count.into_inner(), owned + (stolen << 32), "{owned} entries, {stolen} thefts");
    }

    #[test]
    fn owner_and_thief_exclude_each_other() {
        init();
        no_lost_updates();
        // And with full fences, as without membarrier.
        ASYMMETRIC.store(false, Ordering::Release);
        no_lost_updates();
        init();
    }
}
