//! CPU-time samples in attach mode (`heaplens attach --cpu`): the threads already running when
//! the monitor attaches get their samplers from the attaching thread ("adopted"), on each
//! thread's own CPU-time clock, which Linux names by thread id; threads created later start
//! theirs as under `heaplens run` (`pthread_create` is hooked through the GOT). SIGPROF alone
//! is taken over in the monitor's signal table ([`crate::crash`]).
//!
//! Detaching stops every timer, waits until no sample is being taken or still pending (a
//! signal of a deleted timer may already be queued), lets the writer write the last samples,
//! then gives SIGPROF back to the program's own disposition. Nothing stays armed.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::MutexGuard;
use std::time::{Duration, Instant};

use super::{arm, make, place_of, retire, Sampler, CREATE, GENERATION, HZ, IN_HANDLER, SAMPLERS};
use crate::{crash, procinfo};

/// How long a detach waits for samples still pending or being taken before it gives SIGPROF
/// back to the program.
const SETTLE: Duration = Duration::from_millis(500);

/// Starts sampling every thread of the process at `hz` samples per CPU second, with glibc's
/// `sigaction` at `real_sigaction` (0: looked up). False (nothing started, SIGPROF left to the
/// program) when SIGPROF could not be taken over.
pub fn start(hz: u32, real_sigaction: usize) -> bool {
    if hz == 0 {
        return false;
    }
    GENERATION.fetch_add(1, Ordering::AcqRel);
    if !crash::take_over_sigprof_alone(super::on_signal, real_sigaction) {
        return false;
    }
    if !super::enable(hz) {
        crash::release_sigprof();
        return false;
    }
    adopt_running();
    true
}

/// Gives every thread running now (but this monitor's, which are not started yet) a sampler.
fn adopt_running() {
    let pid = std::process::id();
    let main_stack = procinfo::main_stack();
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else { return };
    for tid in tasks.flatten().filter_map(|t| t.file_name().to_str()?.parse::<u32>().ok()) {
        let Ok(_one) = CREATE.lock() else { return };
        if place_of(tid).is_some() {
            continue; // started its own meanwhile
        }
        let stack = if tid == pid { main_stack.clone() } else { 0..0 };
        if let Some(s) = make(tid, thread_clock(tid), stack, true) {
            arm(s);
        }
    }
}

/// How often, at most, [`reap_ended`] looks for adopted threads that ended.
const REAP_EVERY_NS: u64 = 200_000_000;

/// An adopted thread has no exit hook (the monitor ran no code on it): the writer calls this
/// on each round, and at most every [`REAP_EVERY_NS`] it retires the samplers of adopted
/// threads that ended, so that their timers and places in [`SAMPLERS`] do not stay until the
/// detach (a server that ends a thread per connection would fill them). Call holding
/// [`CREATE`] (`_held`).
pub(super) fn reap_ended(_held: &MutexGuard<'_, ()>) {
    static LAST: AtomicU64 = AtomicU64::new(0);
    let now = procinfo::now_ns();
    if now.saturating_sub(LAST.load(Ordering::Relaxed)) < REAP_EVERY_NS {
        return;
    }
    LAST.store(now, Ordering::Relaxed);
    let pid = std::process::id() as libc::pid_t;
    for place in &SAMPLERS {
        let p = place.load(Ordering::Acquire);
        if p == 0 {
            continue;
        }
        // SAFETY: in place; samplers are freed only under CREATE, which the caller holds.
        let s = unsafe { &*(p as *const Sampler) };
        if s.adopted && !s.ended.load(Ordering::Acquire) && !alive(pid, s.tid) {
            retire(s.tid);
        }
    }
}

/// Whether thread `tid` of process `pid` is still there (signal 0 checks without sending).
fn alive(pid: libc::pid_t, tid: u32) -> bool {
    // SAFETY: tgkill with signal 0 sends nothing.
    let r = unsafe { libc::syscall(libc::SYS_tgkill, pid, tid as libc::pid_t, 0) };
    r == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
}

/// The CPU-time clock of thread `tid` of this process (what `pthread_getcpuclockid` returns:
/// Linux's `MAKE_THREAD_CPUCLOCK(tid, CPUCLOCK_SCHED)`).
fn thread_clock(tid: u32) -> libc::clockid_t {
    ((!(tid as libc::clockid_t)) << 3) | 6
}

/// Stops every timer, waits (up to [`SETTLE`]) until no sample is being taken or pending, and
/// marks every sampler ended, for the writer to write its last samples and free it. Returns
/// whether the samples settled (then SIGPROF can go back to the program).
pub fn stop() -> bool {
    let Ok(_one) = CREATE.lock() else { return false };
    for place in &SAMPLERS {
        let p = place.load(Ordering::Acquire);
        if p == 0 {
            continue;
        }
        // SAFETY: in place while CREATE is held (the writer frees samplers only under it).
        let s = unsafe { &*(p as *const Sampler) };
        // An ended sampler's timer is deleted already (its id may be the program's now).
        if !s.ended.load(Ordering::Acquire) {
            // SAFETY: the sampler's own timer, not deleted yet.
            unsafe { libc::timer_delete(s.timer) };
        }
    }
    let start = Instant::now();
    let settled = loop {
        if IN_HANDLER.load(Ordering::Acquire) == 0 && !sigprof_pending() {
            break true;
        }
        if start.elapsed() > SETTLE {
            break false;
        }
        std::thread::sleep(Duration::from_millis(1));
    };
    for place in &SAMPLERS {
        let p = place.load(Ordering::Acquire);
        if p != 0 {
            // SAFETY: as above.
            unsafe { (*(p as *const Sampler)).ended.store(true, Ordering::Release) };
        }
    }
    settled
}

/// After the last samples were written ([`stop`], then the writer's last round): sampling
/// off, SIGPROF given back to the program's own disposition when the samples `settled` (else
/// the monitor's handler stays, passing every SIGPROF but its own timers' to the program's).
pub fn finish(settled: bool) {
    HZ.store(0, Ordering::Release);
    if settled {
        crash::release_sigprof();
    }
}

/// In a child forked while attached: no timer came with the fork; forget the parent's
/// samplers and give SIGPROF back to the program.
pub fn stop_in_child() {
    if !super::enabled() {
        return;
    }
    HZ.store(0, Ordering::Release);
    super::forget_all();
    crash::release_sigprof();
}

/// Whether a SIGPROF is pending for the process or one of its threads (`/proc`'s `ShdPnd` and
/// `SigPnd` masks).
fn sigprof_pending() -> bool {
    let bit = 1u64 << (libc::SIGPROF - 1);
    let pending = |status: &str, key: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
            .is_some_and(|m| m & bit != 0)
    };
    if std::fs::read_to_string("/proc/self/status").is_ok_and(|s| pending(&s, "ShdPnd:")) {
        return true;
    }
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else { return false };
    tasks.flatten().any(|t| std::fs::read_to_string(t.path().join("status")).is_ok_and(|s| pending(&s, "SigPnd:")))
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_thread_clock_is_linuxs() {
        // pthread_getcpuclockid of the calling thread names the same clock.
        let mut clock: libc::clockid_t = 0;
        // SAFETY: this thread's handle and a place for the answer.
        assert_eq!(unsafe { libc::pthread_getcpuclockid(libc::pthread_self(), &mut clock) }, 0);
        assert_eq!(super::thread_clock(crate::procinfo::gettid()), clock);
    }
}
