//! The monitor's capture counters, summed over threads and printed at exit when
//! `HEAPLENS_STATS=1` (for tuning the monitor). Each thread counts in its own state and adds
//! its counts here when it ends.

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
