//! Joining a *tail* replay to the replay of what came before it, so that the two halves of a
//! trace can be replayed at the same time on two processors and still give exactly the
//! counters of one replay from the start.
//!
//! The trace is cut at a timestamp `T`: the head replay takes every event before the cut, the
//! tail replay (`Counts<u64, true>`) every event from it, starting with an empty live set. All
//! its counters then add up with the head's, except for what depends on the blocks live at
//! the cut, which the tail does not know. It notes those, and [`Counts::absorb`] settles them
//! in order once the head is done:
//!
//! - a release of an address the tail has not seen allocated is *pending*: it releases a
//!   block of the head (then its stack, bin and size are the head's) or nothing (unmatched);
//! - a release that is its thread's first event in the tail is temporary (heaptrack's
//!   definition: the thread's next event after allocating an address releases it) when the
//!   head's last event of that thread allocated the same address, whichever block it is;
//! - the peak: between two pending releases the tail's own live bytes rise and fall, and the
//!   whole trace's are those plus the bytes live at the cut minus the pending releases before.
//!   A stretch can only hold the peak if its highest point is above those of all stretches
//!   before it (the pending releases only take bytes away, and the first time counts), so the
//!   tail notes its own running peak whenever it rose since the last pending release, and the
//!   join tells which of those, if any, beat the head's peak;
//! - an allocation at an address still live from the head (its release was never seen) is an
//!   overwrite in the replay from the start, which the tail cannot tell from a fresh block.
//!   It notes every address it allocated ([`Touched`], one bit per 16 bytes), and when a head
//!   block turns out to share one, the join gives up ([`Counts::absorb`] returns false) and the
//!   caller replays from the start. With every release recorded, that never happens.
//!
//! Only exact counts are joined (sampled traces weight events with floating point, whose sums
//! depend on their order).

use super::{Counter, Counts, StackAcc};
use crate::replay::IdMap;

/// The `last allocated address` a tail replay starts each thread with: its last event is in
/// the head, unknown yet. Addresses of user space never have bit 63 set, so it matches no
/// release, and the thread's index is kept in the low bits for the join.
pub(crate) fn unknown_last(t: u32) -> u64 {
    1 << 63 | u64::from(t)
}

/// A new highest point of the tail's own live bytes, reached before pending release
/// `before` (or after the last, when `before` is their number).
#[derive(Debug, Clone, Copy)]
struct Peak {
    before: usize,
    bytes: u64,
    objects: u64,
    ts: u64,
}

/// A release the tail could not match: the address, and the releasing thread's last allocated
/// address or [`unknown_last`] of it, with [`TOUCHED`] set when the tail had allocated at this
/// address before (joined with a head block, an overwrite).
#[derive(Debug, Clone, Copy)]
struct Pending {
    addr: u64,
    last: u64,
}

/// The flag in [`Pending::last`]: bit 62, set in no address of user space nor [`unknown_last`].
const TOUCHED: u64 = 1 << 62;

/// What a tail replay notes for the join.
#[derive(Default)]
pub(crate) struct TailLog {
    pending: Vec<Pending>,
    /// The stretches between pending releases whose highest point is higher than all before
    /// (only those can hold the peak: the pending releases only take bytes away).
    peaks: Vec<Peak>,
    /// The tail's highest live bytes when the last of `peaks` was noted.
    noted: u64,
    /// Blocks of the tail released by a thread's first event in it: (`unknown_last` of the
    /// thread, address, stack slot in the tail).
    first_releases: Vec<(u64, u64, u32)>,
    pub(super) touched: Touched,
}

/// Every address allocated so far, as one bit per 16-byte granule of each 4 KiB page.
/// Allocators hand out neighbouring addresses close in time, so the last page is kept at hand.
#[derive(Default)]
pub(crate) struct Touched {
    index: IdMap<u64, u32>,
    pages: Vec<[u64; 4]>,
    /// The last page looked up and its index (`u64::MAX`: none yet).
    last: Option<(u64, usize)>,
}

impl Touched {
    #[inline(always)]
    fn bit(addr: u64) -> (usize, u64) {
        let g = (addr >> 4) as usize & 255;
        (g >> 6, 1u64 << (g & 63))
    }

    /// Notes an allocation at `addr`.
    #[inline(always)]
    pub fn insert(&mut self, addr: u64) {
        let page = addr >> 12;
        let i = match self.last {
            Some((p, i)) if p == page => i,
            _ => self.page_slot(page),
        };
        let (w, b) = Self::bit(addr);
        self.pages[i][w] |= b;
    }

    #[cold]
    #[inline(never)]
    fn page_slot(&mut self, page: u64) -> usize {
        let n = self.pages.len() as u32;
        let i = *self.index.entry(page).or_insert(n) as usize;
        if i == self.pages.len() {
            self.pages.push([0; 4]);
        }
        self.last = Some((page, i));
        i
    }

    /// Whether an allocation at `addr` (or another address of its granule) was noted.
    pub fn contains(&self, addr: u64) -> bool {
        let Some(&i) = self.index.get(&(addr >> 12)) else { return false };
        let (w, b) = Self::bit(addr);
        self.pages[i as usize][w] & b != 0
    }
}

impl TailLog {
    /// A block of the tail released by the first event of a thread (`last` being
    /// [`unknown_last`] of it).
    #[cold]
    #[inline(never)]
    pub(super) fn first_release(&mut self, last: u64, addr: u64, slot: u32) {
        self.first_releases.push((last, addr, slot));
    }
}

impl<C: Counter, const TAIL: bool> Counts<C, TAIL> {
    /// A release of `addr` that a tail replay cannot match; `last` as in [`Counts::event`].
    #[cold]
    #[inline(never)]
    pub(super) fn pending(&mut self, addr: u64, last: u64) {
        self.note_peak();
        let touched = if self.tail.touched.contains(addr) { TOUCHED } else { 0 };
        self.tail.pending.push(Pending { addr, last: last | touched });
    }

    /// Notes the tail's highest point if it rose since the last pending release.
    fn note_peak(&mut self) {
        let bytes = as_u64(self.peak_bytes);
        if bytes > self.tail.noted {
            self.tail.noted = bytes;
            let p = Peak { before: self.tail.pending.len(), bytes, objects: as_u64(self.peak_objects), ts: self.peak_ts };
            self.tail.peaks.push(p);
        }
    }
}

/// A counter of an exact replay as an integer (tail replays are only joined when exact).
fn as_u64<C: Counter>(c: C) -> u64 {
    c.f() as u64
}

impl Counts<u64, false> {
    /// Joins `tail`, the replay of every event after those replayed here, into these counters,
    /// which then are those of one replay of all the events. Returns false, leaving these
    /// counters unusable, when the tail allocated at an address that was still live here
    /// (see the module documentation): the events must then be replayed from the start.
    pub(crate) fn absorb(&mut self, tail: Counts<u64, true>) -> bool {
        let mut tail = tail;
        tail.note_peak();
        let log = std::mem::take(&mut tail.tail);
        // In use at the cut, and what the pending releases took off it so far.
        let (at_cut_bytes, at_cut_objects) = (self.cur_bytes, self.cur_objects);
        let (mut gone_bytes, mut gone_objects) = (0u64, 0u64);
        let mut peak = (self.peak_bytes, self.peak_objects, self.peak_ts);
        let mut peaks = log.peaks.iter().peekable();
        for (i, p) in log.pending.iter().chain([&Pending { addr: 0, last: 0 }]).enumerate() {
            while let Some(c) = peaks.next_if(|c| c.before == i) {
                let bytes = at_cut_bytes + c.bytes - gone_bytes;
                if bytes > peak.0 {
                    peak = (bytes, at_cut_objects + c.objects - gone_objects, c.ts);
                }
            }
            if i == log.pending.len() {
                break;
            }
            match self.live.remove(p.addr) {
                Some((size, slot)) => {
                    if p.last & TOUCHED != 0 {
                        return false;
                    }
                    let first = p.last >> 63 == 1;
                    let temporary = first && self.last_alloc.get(p.last as u32 as usize) == Some(&p.addr);
                    self.release(size, slot, 1, temporary);
                    gone_bytes += size;
                    gone_objects += 1;
                }
                None => self.unmatched_frees += 1,
            }
        }
        // A block live here that the tail allocated over: an overwrite the tail did not see.
        let mut overwritten = false;
        self.live.for_each_addr(|addr| overwritten |= log.touched.contains(addr));
        if overwritten {
            return false;
        }
        (self.peak_bytes, self.peak_objects, self.peak_ts) = peak;
        for &(last, addr, slot) in &log.first_releases {
            if self.last_alloc.get(last as u32 as usize) == Some(&addr) {
                tail.stacks[slot as usize].temporary += 1;
            }
        }
        self.add(tail);
        true
    }

    /// Adds the counters of `tail` that simply add up.
    fn add(&mut self, tail: Counts<u64, true>) {
        for (acc, &stack) in tail.stacks.iter().zip(&tail.stack_ids) {
            let slot = self.slot(stack) as usize;
            let s: &mut StackAcc<u64> = &mut self.stacks[slot];
            s.allocs += acc.allocs;
            s.frees += acc.frees;
            s.temporary += acc.temporary;
            for c in 0..4 {
                s.bytes_by_class[c] += acc.bytes_by_class[c];
                s.freed_by_class[c] += acc.freed_by_class[c];
            }
        }
        let add_all = |to: &mut [u64], from: &[u64]| to.iter_mut().zip(from).for_each(|(a, b)| *a += b);
        add_all(&mut self.calls_by_op, &tail.calls_by_op);
        add_all(&mut self.frees_by_op, &tail.frees_by_op);
        add_all(&mut self.bin_allocs, &tail.bin_allocs);
        add_all(&mut self.bin_frees, &tail.bin_frees);
        self.big_bytes += tail.big_bytes;
        self.big_freed += tail.big_freed;
        self.failed += tail.failed;
        self.overwritten += tail.overwritten;
        self.unmatched_frees += tail.unmatched_frees;
        self.null_frees += tail.null_frees;
        self.events += tail.events;
        self.malformed += tail.malformed;
        self.cur_bytes += tail.cur_bytes;
        self.cur_objects += tail.cur_objects;
        for (t, &seen) in tail.seen.iter().enumerate() {
            if seen && !self.seen.get(t).copied().unwrap_or(false) {
                if t >= self.seen.len() {
                    self.seen.resize(t + 1, false);
                    self.last_alloc.resize(t + 1, 0);
                }
                self.seen[t] = true;
                self.threads += 1;
            }
        }
        if let Some(first) = tail.first_ts {
            self.first_ts.get_or_insert(first);
            self.last_ts = tail.last_ts;
            self.max_key = self.max_key.max(tail.max_key);
        }
    }
}
