//! Facts about the process and the calling thread, read without the monitor's locks.

use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};

static TSC: AtomicBool = AtomicBool::new(false);

/// Stamps events with the TSC from now on when the kernel keeps time with it (clocksource
/// `tsc`: invariant and synchronized across cores). Returns the source chosen.
pub fn choose_time_source() -> heaplens_trace::TimeSource {
    let src =
        std::fs::read_to_string("/sys/devices/system/clocksource/clocksource0/current_clocksource").unwrap_or_default();
    let tsc = src.trim() == "tsc";
    TSC.store(tsc, Ordering::Relaxed);
    if tsc {
        heaplens_trace::TimeSource::Tsc
    } else {
        heaplens_trace::TimeSource::MonotonicNs
    }
}

/// Whether events are stamped with the TSC (see [`choose_time_source`]).
pub fn tsc() -> bool {
    TSC.load(Ordering::Relaxed)
}

/// An event timestamp: TSC ticks (in units of [`heaplens_trace::TSC_UNIT`] ticks) or
/// `CLOCK_MONOTONIC` nanoseconds (see [`choose_time_source`]); about a third of the cost of
/// `clock_gettime`. For an allocation, stamped after the allocator returned and the stack was
/// captured: hundreds of instructions lie between the loads that found the block and `rdtsc`,
/// more than a processor runs ahead. Releases use [`now_ticks_ordered`].
#[inline(always)]
pub fn now_ticks() -> u64 {
    if TSC.load(Ordering::Relaxed) {
        // SAFETY: rdtsc has no preconditions on x86_64.
        unsafe { std::arch::x86_64::_rdtsc() >> heaplens_trace::TSC_UNIT.trailing_zeros() }
    } else {
        now_ns()
    }
}

/// [`now_ticks`] for a release, read only once the instructions before it have run. `rdtsc`
/// does not wait for them: a thread that takes a pointer from another and frees it at once
/// could read the clock before the load that gave it the pointer, ahead of the other thread's
/// stamp for the allocation (a ping-pong of blocks between two threads, `examples/turns.c`,
/// left up to 4% of its frees unmatched). `lfence` makes it wait; a process with one thread
/// needs no order between threads and saves it (10 ns a stamp on an AMD EPYC).
#[inline(always)]
pub fn now_ticks_ordered() -> u64 {
    if TSC.load(Ordering::Relaxed) && !single_threaded() {
        // SAFETY: lfence has no preconditions on x86_64.
        unsafe { std::arch::x86_64::_mm_lfence() };
    }
    now_ticks()
}

/// The same instant on the event clock and on `CLOCK_MONOTONIC`.
pub fn clock_sync() -> heaplens_trace::ClockSync {
    let ticks = now_ticks();
    heaplens_trace::ClockSync { ticks, mono_ns: now_ns() }
}

/// `CLOCK_MONOTONIC` now, in nanoseconds (vDSO, no system call).
#[inline(always)]
pub fn now_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

/// The calling thread's CPU time (user and system), nanoseconds.
pub fn thread_cpu_ns() -> u64 {
    clock_ns(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// `clock` now, in nanoseconds.
#[inline(always)]
fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: valid pointer to a timespec.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Wall-clock time now, nanoseconds since the Unix epoch.
pub fn unix_ns() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0)
}

/// True while glibc counts the process as single-threaded (`__libc_single_threaded`, glibc
/// 2.32+: it turns false for good when a second thread is created). False when the C library
/// does not say.
pub fn single_threaded() -> bool {
    static FLAG: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    let p = *FLAG.get_or_init(|| {
        // SAFETY: a lookup of a NUL-terminated name.
        unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"__libc_single_threaded".as_ptr()) as usize }
    });
    // SAFETY: glibc's `char __libc_single_threaded`, alive for the whole process.
    p != 0 && unsafe { std::ptr::read_volatile(p as *const u8) } != 0
}

/// The kernel thread id of the calling thread.
pub fn gettid() -> u32 {
    // SAFETY: no preconditions.
    unsafe { libc::gettid() as u32 }
}

/// The executable's path (`/proc/self/exe`).
pub fn exe_path() -> std::path::PathBuf {
    std::fs::read_link("/proc/self/exe").unwrap_or_default()
}

/// The command line (`/proc/self/cmdline`), argv\[0\] first.
pub fn argv() -> Vec<String> {
    std::fs::read("/proc/self/cmdline")
        .map(|b| {
            b.split(|&c| c == 0).filter(|s| !s.is_empty()).map(|s| String::from_utf8_lossy(s).into_owned()).collect()
        })
        .unwrap_or_default()
}

/// The thread's name. A name is any bytes but NUL (`pthread_setname_np`): one that is not
/// UTF-8 is kept with U+FFFD for its bad bytes rather than lost.
pub fn thread_name(tid: u32) -> String {
    let mut b = std::fs::read(format!("/proc/self/task/{tid}/comm")).unwrap_or_default();
    if b.last() == Some(&b'\n') {
        b.pop();
    }
    String::from_utf8_lossy(&b).into_owned()
}

/// The calling thread's stack as an address range: the mapping of `/proc/self/maps` that holds
/// the stack pointer (only its end matters: unwinding reads from the stack pointer upwards).
/// Empty when it cannot be found.
///
/// Read with raw `open`/`read` into a buffer on the stack, never `pthread_getattr_np`: that takes
/// the thread's lock and mallocs, and the program may be inside it when its first allocation
/// reaches the monitor (Rust's runtime start-up does exactly that).
///
/// When `/proc/self/maps` cannot be read (the program lowered its descriptor limit, or has no
/// `/proc`), the main thread's stack as found at start-up ([`note_main_stack`]) serves, and for
/// other threads the thread pointer: glibc puts a thread's control block and static TLS at the
/// top of its stack, above every frame.
pub fn thread_stack() -> Range<u64> {
    let marker = 0u8;
    let sp = std::ptr::addr_of!(marker) as u64;
    let found = stack_from_maps(sp);
    if !found.is_empty() {
        return found;
    }
    let main = MAIN_STACK.lock().map(|m| m.clone()).unwrap_or(0..0);
    // The main stack grows down past where it ended at start-up: only its end matters.
    if sp < main.end && main.end - sp < 1 << 32 {
        return sp.min(main.start)..main.end;
    }
    stack_below_thread_pointer(sp)
}

/// The calling thread's stack from `sp` up to its thread pointer (glibc puts a thread's
/// control block at the top of its stack); empty when they do not look like that (the main
/// thread's). Async-signal-safe.
pub fn stack_below_thread_pointer(sp: u64) -> Range<u64> {
    let tp: u64;
    // SAFETY: on x86_64 fs:0 holds the thread pointer itself.
    unsafe { std::arch::asm!("mov {}, fs:0", out(reg) tp, options(nostack, readonly, preserves_flags)) };
    if sp < tp && tp - sp < 1 << 32 {
        sp..tp
    } else {
        0..0
    }
}

/// The main thread's stack, found at start-up.
static MAIN_STACK: std::sync::Mutex<Range<u64>> = std::sync::Mutex::new(0..0);

/// The main thread's stack (the `[stack]` mapping of `/proc/self/maps`), from any thread;
/// empty when it cannot be read.
pub fn main_stack() -> Range<u64> {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap_or_default();
    let line = maps.lines().find(|l| l.ends_with("[stack]"));
    let range = line.and_then(|l| l.split_whitespace().next()).and_then(|r| r.split_once('-'));
    match range.map(|(a, b)| (u64::from_str_radix(a, 16), u64::from_str_radix(b, 16))) {
        Some((Ok(a), Ok(b))) => a..b,
        _ => 0..0,
    }
}

/// Notes the calling (main) thread's stack while `/proc/self/maps` can be read: at start-up.
pub fn note_main_stack() {
    let marker = 0u8;
    let found = stack_from_maps(std::ptr::addr_of!(marker) as u64);
    if let Ok(mut m) = MAIN_STACK.lock() {
        *m = found;
    }
}

/// The mapping of `/proc/self/maps` that holds `sp`; empty when it cannot be read.
fn stack_from_maps(sp: u64) -> Range<u64> {
    // SAFETY: plain system calls on a buffer we own.
    unsafe {
        let fd = libc::open(c"/proc/self/maps".as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return 0..0;
        }
        let mut buf = [0u8; 8192];
        let mut have = 0usize;
        let mut found = 0..0;
        'read: loop {
            let n = libc::read(fd, buf.as_mut_ptr().add(have).cast(), buf.len() - have);
            if n <= 0 {
                break;
            }
            have += n as usize;
            let mut start = 0;
            while let Some(nl) = buf[start..have].iter().position(|&c| c == b'\n') {
                if let Some(r) = parse_range(&buf[start..start + nl]) {
                    if r.contains(&sp) {
                        found = r;
                        break 'read;
                    }
                }
                start += nl + 1;
            }
            buf.copy_within(start..have, 0);
            have -= start;
            if have == buf.len() {
                break; // a line longer than the buffer: give up rather than misparse
            }
        }
        libc::close(fd);
        found
    }
}

/// Parses the `start-end` hex pair at the front of a `/proc/self/maps` line.
fn parse_range(line: &[u8]) -> Option<Range<u64>> {
    let end_of_range = line.iter().position(|&c| c == b' ')?;
    let range = std::str::from_utf8(&line[..end_of_range]).ok()?;
    let (a, b) = range.split_once('-')?;
    Some(u64::from_str_radix(a, 16).ok()?..u64::from_str_radix(b, 16).ok()?)
}

/// Whether the main thread left with `pthread_exit`.
static MAIN_EXITED: AtomicBool = AtomicBool::new(false);

/// Notes that the main thread left with `pthread_exit` (see `lifetime.rs`).
pub fn main_thread_exited() {
    MAIN_EXITED.store(true, Ordering::Release);
}

/// True when the main thread has left with `pthread_exit` and no thread of the process but the
/// caller is still running: the program's last thread has ended. Reads `/proc/self/task` (only
/// once the main thread has left).
pub fn only_monitor_left() -> bool {
    if !MAIN_EXITED.load(Ordering::Acquire) {
        return false;
    }
    let me = gettid();
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else { return false };
    for t in tasks.flatten() {
        let Some(tid) = t.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else { continue };
        if tid == me {
            continue;
        }
        // The main thread stays a zombie until the whole process ends: it does not count.
        let Ok(stat) = std::fs::read_to_string(t.path().join("stat")) else { continue };
        let state = stat.rsplit_once(") ").and_then(|(_, rest)| rest.chars().next());
        if !matches!(state, Some('Z' | 'X')) {
            return false;
        }
    }
    true
}

#[cfg(test)]
mod tests {
    #[test]
    fn finds_this_threads_stack() {
        let local = 0u64;
        let here = std::ptr::addr_of!(local) as u64;
        assert!(super::thread_stack().contains(&here));
        let other = std::thread::spawn(|| {
            let l = 0u64;
            (super::thread_stack(), std::ptr::addr_of!(l) as u64)
        })
        .join()
        .unwrap();
        assert!(other.0.contains(&other.1));
    }

    #[test]
    fn parses_maps_lines() {
        let r = super::parse_range(b"7ffd1000-7ffd3000 rw-p 00000000 00:00 0   [stack]").unwrap();
        assert_eq!(r, 0x7ffd1000..0x7ffd3000);
        assert!(super::parse_range(b"garbage").is_none());
    }
}
