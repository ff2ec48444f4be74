//! The stacks a thread allocated from recently, for captures that repeat one exactly.
//!
//! Matching against the previous stack only (mprof's observation) leaves programs that cycle
//! through a few call paths unwinding again and again: sqlite3 inserting rows allocates from
//! four to eight places in turn and unwound 5.35 of 15.4 frames per capture, Python's eval loop
//! 2.9 of 17.5. Both repeat one of their last 16 distinct stacks on more than 99% of captures
//! (the same share as the widgets program; 45% for the C++ churn, 18% for gcc's cc1). So the
//! walker keeps the last [`RECENT`] distinct stacks of at most [`RECENT_DEPTH`] frames, keyed by
//! their innermost frame (its slot and return address). A capture whose first frame is a key,
//! and whose entry's outer frames all still hold their return addresses in their slots (the same
//! check as for the previous stack), is that stack, without unwinding a frame.
//!
//! Storing a stack copies it, which costs about what unwinding two frames does. Where fewer
//! than three captures in four repeat a recent stack, that does not pay (the C++ churn
//! benchmark, 45% repeats, took 1.5 times as long with the cache on): the cache then turns
//! itself off, and looks again on one capture in [`PROBE_EVERY`].

use super::{intact, Chain};

/// Entries: distinct stacks kept.
pub const RECENT: usize = 16;
/// The deepest stack an entry holds.
pub const RECENT_DEPTH: usize = 64;
/// Captures per decision on whether the cache still pays, while on.
const WINDOW: u32 = 4096;
/// While off, one capture in this many still uses the cache, to notice repeats coming back
/// (a probe finds the entries out of the processor's cache: one in 32 made the 8-thread churn
/// 2% slower)...
const PROBE_EVERY: u32 = 256;
/// ...and this many probes decide whether it comes back on.
const PROBES: u32 = 64;

/// The recent stacks: entry `e`'s frames are `ret/slot[e * RECENT_DEPTH..][..len[e]]`,
/// outermost first, like a [`Chain`]'s.
pub(super) struct Recent {
    /// Innermost frame of each entry (slot 0: empty entry).
    key_ret: [u64; RECENT],
    key_slot: [u64; RECENT],
    len: [usize; RECENT],
    /// The entry the next new stack replaces (first in, first out).
    next: usize,
    ret: Box<[u64]>,
    slot: Box<[u64]>,
    /// Trie nodes, when the thread interns its own stacks.
    node: Box<[u32]>,
    /// Whether every capture uses the cache (else one in [`PROBE_EVERY`]).
    on: bool,
    /// Captures that used the cache in this window, and how many of them hit.
    tried: u32,
    hits: u32,
    /// Captures since the last probe, while off.
    skipped: u32,
}

impl Recent {
    pub fn new() -> Self {
        Self {
            key_ret: [0; RECENT],
            key_slot: [0; RECENT],
            len: [0; RECENT],
            next: 0,
            ret: vec![0; RECENT * RECENT_DEPTH].into_boxed_slice(),
            slot: vec![0; RECENT * RECENT_DEPTH].into_boxed_slice(),
            node: vec![0; RECENT * RECENT_DEPTH].into_boxed_slice(),
            on: true,
            tried: 0,
            hits: 0,
            skipped: 0,
        }
    }

    /// Empties every entry (their trie nodes are gone, or were another interner's).
    pub fn forget(&mut self) {
        // No stack slot is at address 0, so no capture matches an empty entry.
        self.key_ret = [0; RECENT];
        self.key_slot = [0; RECENT];
        self.len = [0; RECENT];
    }

    /// Whether this capture looks up (and on a miss, stores) its stack.
    #[inline(always)]
    pub fn active(&mut self) -> bool {
        if self.on {
            return true;
        }
        self.skipped += 1;
        if self.skipped < PROBE_EVERY {
            return false;
        }
        self.skipped = 0;
        true
    }

    /// Counts an active capture; every [`WINDOW`] of them (or [`PROBES`] while off) decides
    /// whether the cache is on: three hits in four.
    #[inline(always)]
    pub fn account(&mut self, hit: bool) {
        self.tried += 1;
        self.hits += u32::from(hit);
        if self.tried == if self.on { WINDOW } else { PROBES } {
            self.on = self.hits * 4 >= self.tried * 3;
            (self.tried, self.hits) = (0, 0);
        }
    }

    /// The entry whose stack the program's stack is now: its innermost frame is `(slot, ret)`
    /// and every outer frame still holds its return address (`[lo, hi)` is readable stack).
    /// Several entries may share an innermost frame: the widgets program calls `malloc` from
    /// one place in `make_widget`, which it reaches from two callers in turn.
    #[inline(always)]
    pub fn find(&self, slot: u64, ret: u64, lo: u64, hi: u64) -> Option<usize> {
        let mut keys = 0u32;
        for e in 0..RECENT {
            keys |= u32::from(self.key_ret[e] == ret && self.key_slot[e] == slot) << e;
        }
        while keys != 0 {
            let e = keys.trailing_zeros() as usize;
            keys &= keys - 1;
            // The innermost frame is the key; the others must still be in place.
            let (outer, base) = (self.len[e] - 1, e * RECENT_DEPTH);
            if intact(&self.slot[base..base + outer], &self.ret[base..base + outer], lo, hi) {
                return Some(e);
            }
        }
        None
    }

    /// Makes `chain`'s first `len` frames those of entry `e`.
    pub fn load(&self, e: usize, chain: &mut Chain) -> usize {
        let (len, base) = (self.len[e], e * RECENT_DEPTH);
        chain.ret[..len].copy_from_slice(&self.ret[base..base + len]);
        chain.slot[..len].copy_from_slice(&self.slot[base..base + len]);
        len
    }

    /// Keeps `chain` (whole, `1..=RECENT_DEPTH` frames, and the stack of no entry since the
    /// lookup missed) in place of the oldest entry; returns the entry.
    pub fn store(&mut self, chain: &Chain) -> usize {
        let len = chain.len;
        let e = self.next;
        self.next = (e + 1) % RECENT;
        let base = e * RECENT_DEPTH;
        self.ret[base..base + len].copy_from_slice(&chain.ret[..len]);
        self.slot[base..base + len].copy_from_slice(&chain.slot[..len]);
        (self.key_ret[e], self.key_slot[e], self.len[e]) = (chain.ret[len - 1], chain.slot[len - 1], len);
        e
    }

    /// The trie nodes of entry `e`'s frames.
    pub fn nodes_mut(&mut self, e: usize) -> &mut [u32] {
        let base = e * RECENT_DEPTH;
        &mut self.node[base..base + self.len[e]]
    }
}
