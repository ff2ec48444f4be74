//! Joining a *tail* replay to the replay of what came before it, so that the two halves of a
//! trace can be replayed at the same time on two processors and still give exactly the
//! counters of one replay from the start.
//!
//! The trace is cut at a timestamp `T`: the head replay takes every event before the cut, the
//! tail replay (`Counts<u64, true>`) every event from it, starting with an empty live set. All
//! its counters then add up with the head's, except for what depends on the blocks live at
//! the cut, which the tail does not know. It notes those, and [`Counts::absorb`] settles them
//! in order once the head is done ([`Join`], batch by batch while the tail still runs):
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

use super::{Counter, Counts};
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

/// Pending releases sent to the join at a time (few in tests, so that they take many batches).
const BATCH: usize = if cfg!(test) { 7 } else { 8192 };

/// Pending releases and the peaks noted among them, in order (see [`Join`]).
#[derive(Default)]
pub(crate) struct Batch {
    pending: Vec<Pending>,
    /// The stretches between pending releases whose highest point is higher than all before
    /// (only those can hold the peak: the pending releases only take bytes away).
    peaks: Vec<Peak>,
}

/// What a tail replay notes for the join.
#[derive(Default)]
pub(crate) struct TailLog {
    /// Not sent to the join yet.
    batch: Batch,
    /// Pending releases noted before `batch`.
    sent: usize,
    /// Where batches go as they fill (else they stay in `batch` for [`Counts::absorb`]).
    to_join: Option<std::sync::mpsc::Sender<Batch>>,
    /// The tail's highest live bytes when the last peak was noted.
    noted: u64,
    /// Blocks of the tail released by a thread's first event in it: (`unknown_last` of the
    /// thread, address, stack slot in the tail).
    first_releases: Vec<(u64, u64, u32)>,
    pub(super) touched: Touched,
}

/// Every address allocated so far, as one bit per 16-byte granule of each 4 KiB page.
/// Allocators hand out addresses of a few pages at a time, so the pages looked up recently are
/// kept at hand, in a direct-mapped table by page number (a hash map lookup for every change
/// of page was 3.7% of the C++ churn's report).
pub(crate) struct Touched {
    index: IdMap<u64, u32>,
    pages: Vec<[u64; 4]>,
    /// (page, its index) by page number modulo [`RECENT`]; `u64::MAX`: none.
    recent: Box<[(u64, u32); RECENT]>,
}

const RECENT: usize = 256;

impl Default for Touched {
    fn default() -> Self {
        Self { index: IdMap::default(), pages: Vec::new(), recent: Box::new([(u64::MAX, 0); RECENT]) }
    }
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
        let i = match self.recent[page as usize % RECENT] {
            (p, i) if p == page => i as usize,
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
        self.recent[page as usize % RECENT] = (page, i as u32);
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

    /// Sends what is noted so far to the join, if it takes batches.
    fn send(&mut self) {
        if let Some(tx) = &self.to_join {
            self.sent += self.batch.pending.len();
            // A join that hung up has failed already: nothing to keep.
            let _ = tx.send(std::mem::take(&mut self.batch));
        }
    }
}

impl Counts<u64, true> {
    /// Sends the pending releases to `join` in batches of [`BATCH`] as they come, so that they
    /// are settled while this replay goes on.
    pub(crate) fn send_pending(&mut self, join: std::sync::mpsc::Sender<Batch>) {
        self.tail.to_join = Some(join);
    }

    /// Sends the last pending releases, and stops sending.
    pub(crate) fn flush_pending(&mut self) {
        self.note_peak();
        self.tail.send();
        self.tail.to_join = None;
    }
}

impl<C: Counter, const TAIL: bool> Counts<C, TAIL> {
    /// A release of `addr` that a tail replay cannot match; `last` as in [`Counts::event`].
    #[cold]
    #[inline(never)]
    pub(super) fn pending(&mut self, addr: u64, last: u64) {
        self.note_peak();
        let touched = if self.tail.touched.contains(addr) { TOUCHED } else { 0 };
        self.tail.batch.pending.push(Pending { addr, last: last | touched });
        if self.tail.batch.pending.len() == BATCH {
            self.tail.send();
        }
    }

    /// Notes the tail's highest point if it rose since the last pending release.
    fn note_peak(&mut self) {
        let bytes = as_u64(self.peak_bytes);
        if bytes > self.tail.noted {
            self.tail.noted = bytes;
            let before = self.tail.sent + self.tail.batch.pending.len();
            let p = Peak { before, bytes, objects: as_u64(self.peak_objects), ts: self.peak_ts };
            self.tail.batch.peaks.push(p);
        }
    }
}

/// A counter of an exact replay as an integer (tail replays are only joined when exact).
fn as_u64<C: Counter>(c: C) -> u64 {
    c.f() as u64
}

/// Settling a tail's pending releases against the head's live blocks, in order, batch by batch
/// (while the tail replay may still go on).
pub(crate) struct Join {
    /// In use at the cut.
    at_cut: (u64, u64),
    /// What the pending releases settled so far took off it (bytes, blocks).
    gone: (u64, u64),
    /// The highest point so far: (bytes, blocks, timestamp).
    peak: (u64, u64, u64),
    /// Pending releases settled.
    index: usize,
    /// A pending release met a head block the tail had allocated over (see the module
    /// documentation): the halves cannot be joined.
    failed: bool,
}

impl Join {
    /// Starts joining a tail to `head`, which has replayed every event before the cut.
    pub(crate) fn new(head: &Counts<u64, false>) -> Self {
        Join {
            at_cut: (head.cur_bytes, head.cur_objects),
            gone: (0, 0),
            peak: (head.peak_bytes, head.peak_objects, head.peak_ts),
            index: 0,
            failed: false,
        }
    }

    fn consider(&mut self, c: &Peak) {
        let bytes = self.at_cut.0 + c.bytes - self.gone.0;
        if bytes > self.peak.0 {
            self.peak = (bytes, self.at_cut.1 + c.objects - self.gone.1, c.ts);
        }
    }

    /// Settles the next batch of pending releases against `head`'s live blocks.
    pub(crate) fn settle(&mut self, head: &mut Counts<u64, false>, batch: &Batch) {
        let mut peaks = batch.peaks.iter().peekable();
        for p in &batch.pending {
            if self.failed {
                return;
            }
            while let Some(c) = peaks.next_if(|c| c.before == self.index) {
                self.consider(c);
            }
            self.index += 1;
            match head.live.remove(p.addr) {
                Some((size, slot)) => {
                    if p.last & TOUCHED != 0 {
                        self.failed = true;
                        return;
                    }
                    let first = p.last >> 63 == 1;
                    let temporary = first && head.last_alloc.get(p.last as u32 as usize) == Some(&p.addr);
                    head.release(size, slot, 1, temporary);
                    self.gone.0 += size;
                    self.gone.1 += 1;
                }
                None => head.unmatched_frees += 1,
            }
        }
        for c in peaks {
            self.consider(c);
        }
    }
}

impl Counts<u64, false> {
    /// Joins `tail`, the replay of every event after those replayed here, into these counters,
    /// which then are those of one replay of all the events; `join` has settled the pending
    /// releases the tail sent so far. Returns false, leaving these counters unusable, when the
    /// tail allocated at an address that was still live here (see the module documentation):
    /// the events must then be replayed from the start.
    pub(crate) fn absorb(&mut self, tail: Counts<u64, true>, mut join: Join) -> bool {
        let mut tail = tail;
        tail.note_peak();
        let log = std::mem::take(&mut tail.tail);
        join.settle(self, &log.batch);
        if join.failed {
            return false;
        }
        // A block live here that the tail allocated over: an overwrite the tail did not see.
        let mut overwritten = false;
        self.live.for_each(|addr, _, _| overwritten |= log.touched.contains(addr));
        if overwritten {
            return false;
        }
        (self.peak_bytes, self.peak_objects, self.peak_ts) = join.peak;
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
            self.stacks[slot].add(acc);
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
