//! Facts about the process and the calling thread, read without the monitor's locks.

use std::ops::Range;

/// `CLOCK_MONOTONIC` now, in nanoseconds (vDSO, no system call).
#[inline(always)]
pub fn now_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: valid pointer to a timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Wall-clock time now, nanoseconds since the Unix epoch.
pub fn unix_ns() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0)
}

/// The kernel thread id of the calling thread.
pub fn gettid() -> u32 {
    // SAFETY: no preconditions.
    unsafe { libc::gettid() as u32 }
}

/// The executable's path (`/proc/self/exe`).
pub fn exe_path() -> String {
    std::fs::read_link("/proc/self/exe").map(|p| p.to_string_lossy().into_owned()).unwrap_or_default()
}

/// The command line (`/proc/self/cmdline`), argv\[0\] first.
pub fn argv() -> Vec<String> {
    std::fs::read("/proc/self/cmdline")
        .map(|b| b.split(|&c| c == 0).filter(|s| !s.is_empty()).map(|s| String::from_utf8_lossy(s).into_owned()).collect())
        .unwrap_or_default()
}

/// The calling thread's name.
pub fn thread_name(tid: u32) -> String {
    std::fs::read_to_string(format!("/proc/self/task/{tid}/comm")).map(|s| s.trim_end().to_string()).unwrap_or_default()
}

/// The calling thread's stack as an address range (empty when it cannot be found).
pub fn thread_stack() -> Range<u64> {
    // SAFETY: pthread_getattr_np fills the attr we own and destroy.
    unsafe {
        let mut attr: libc::pthread_attr_t = std::mem::zeroed();
        if libc::pthread_getattr_np(libc::pthread_self(), &mut attr) != 0 {
            return 0..0;
        }
        let mut addr: *mut libc::c_void = std::ptr::null_mut();
        let mut size: usize = 0;
        let ok = libc::pthread_attr_getstack(&attr, &mut addr, &mut size) == 0;
        libc::pthread_attr_destroy(&mut attr);
        if !ok {
            return 0..0;
        }
        addr as u64..addr as u64 + size as u64
    }
}
