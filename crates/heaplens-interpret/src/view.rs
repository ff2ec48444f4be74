//! The replay every view reads: one pass over a trace's events in time order across threads,
//! each deallocation paired with the allocation it ends.
//!
//! A view (an export, a picture, a table) implements [`View`] and is driven by [`replay`]:
//!
//! ```no_run
//! use heaplens_interpret::view::{replay, Block, Release, View};
//!
//! /// Bytes live per thread that allocated them.
//! #[derive(Default)]
//! struct Lifetimes { total_ns: u64, blocks: u64 }
//!
//! impl View for Lifetimes {
//!     fn deallocation(&mut self, release: &Release, block: &Block) {
//!         self.total_ns += release.ts - block.ts;
//!         self.blocks += 1;
//!     }
//! }
//!
//! let mut v = Lifetimes::default();
//! let trace = replay("app.hltrace".as_ref(), &mut v)?;
//! println!("{} blocks lived {} ns on average", v.blocks, v.total_ns / v.blocks.max(1));
//! # Ok::<(), heaplens_interpret::LoadError>(())
//! ```
//!
//! Several views share one pass as a tuple (`(&mut a, &mut b)` is a view). The pass holds one
//! payload per thread and the live blocks, whatever the trace's length: it reads the file once
//! to find each thread's blocks and once more to merge them, reading each thread's next block
//! when its events are reached (`ondisk.rs`). The call-stack trie, the module map and what is
//! needed to symbolize come with the returned [`Trace`]; [`crate::paths`] and
//! [`crate::symbolize`] symbolize a stack on demand.

use std::path::Path;
use std::sync::Arc;

use heaplens_trace::{Event, Op, OpClass, TimeMap};

use crate::live::LiveBlocks;
use crate::load::{LoadError, Sink, Trace};
use crate::merge::ondisk::{BlockAt, DiskBlocks};
use crate::merge::{Consumer, Merger};
use crate::progress::Progress;

/// The largest size a [`Block`] has (1 TiB): a larger one is a number from a damaged trace (no
/// allocator hands out more), and summed over the blocks of a view it would overflow the
/// counters of the views (bytes in use, totals per stack), so it is taken as this.
pub const MAX_BLOCK_SIZE: u64 = 1 << 40;

/// An allocated block, as its allocation made it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Block {
    /// When it was allocated, `CLOCK_MONOTONIC` nanoseconds.
    pub ts: u64,
    /// The allocating thread's id.
    pub tid: u32,
    /// Its address (0 for a failed allocation).
    pub addr: u64,
    /// Bytes requested (at most [`MAX_BLOCK_SIZE`]).
    pub size: u64,
    /// Bytes usable (the allocator's size for the block, at least `size`, at most
    /// [`MAX_BLOCK_SIZE`]).
    pub usable: u64,
    /// The entry point that allocated it (`malloc`, `operator new[]`, `realloc`...).
    pub op: Op,
    /// Its allocation stack: a node of the trie in [`Trace::stacks`].
    pub stack: u32,
}

/// A deallocation (or the release of a reallocation's old block).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Release {
    /// When, `CLOCK_MONOTONIC` nanoseconds.
    pub ts: u64,
    /// The releasing thread's id.
    pub tid: u32,
    /// The address released.
    pub addr: u64,
    /// The entry point (`free`, `operator delete`, or the `realloc` that moved the block).
    pub op: Op,
}

/// A consumer of the replay. Every method has an empty default: a view implements what it
/// needs. Events come in time order across threads (ties in the order of the threads' first
/// blocks in the file); a reallocation comes as the release of its old block (even when the
/// block grew in place) followed by the allocation of the new one, both with the realloc's op.
/// In a trace recorded with `--sample-rate`, these are the sampled events (see
/// [`Trace::sample_rate`] for weighting them).
pub trait View {
    /// A block was allocated.
    fn allocation(&mut self, _block: &Block) {}
    /// `release` ended `block`; its lifetime is `release.ts - block.ts` nanoseconds.
    fn deallocation(&mut self, _release: &Release, _block: &Block) {}
    /// An allocation returned NULL (`attempt.addr` is 0).
    fn failed_allocation(&mut self, _attempt: &Block) {}
    /// A release of an address that was not live (allocated before recording started, or
    /// `free(NULL)` when `addr` is 0).
    fn unmatched(&mut self, _release: &Release) {}
    /// An allocation returned an address still live: the block there was released unseen.
    fn overwritten(&mut self, _block: &Block) {}
    /// The end of the trace, with the blocks still live (in no particular order).
    fn end(&mut self, _live: &mut dyn Iterator<Item = &Block>) {}
}

impl<V: View + ?Sized> View for &mut V {
    fn allocation(&mut self, b: &Block) {
        (**self).allocation(b)
    }
    fn deallocation(&mut self, r: &Release, b: &Block) {
        (**self).deallocation(r, b)
    }
    fn failed_allocation(&mut self, b: &Block) {
        (**self).failed_allocation(b)
    }
    fn unmatched(&mut self, r: &Release) {
        (**self).unmatched(r)
    }
    fn overwritten(&mut self, b: &Block) {
        (**self).overwritten(b)
    }
    fn end(&mut self, live: &mut dyn Iterator<Item = &Block>) {
        (**self).end(live)
    }
}

/// A view that may be absent: `None` ignores the replay.
impl<V: View> View for Option<V> {
    fn allocation(&mut self, b: &Block) {
        if let Some(v) = self {
            v.allocation(b)
        }
    }
    fn deallocation(&mut self, r: &Release, b: &Block) {
        if let Some(v) = self {
            v.deallocation(r, b)
        }
    }
    fn failed_allocation(&mut self, b: &Block) {
        if let Some(v) = self {
            v.failed_allocation(b)
        }
    }
    fn unmatched(&mut self, r: &Release) {
        if let Some(v) = self {
            v.unmatched(r)
        }
    }
    fn overwritten(&mut self, b: &Block) {
        if let Some(v) = self {
            v.overwritten(b)
        }
    }
    fn end(&mut self, live: &mut dyn Iterator<Item = &Block>) {
        if let Some(v) = self {
            v.end(live)
        }
    }
}

impl<A: View, B: View> View for (A, B) {
    fn allocation(&mut self, b: &Block) {
        self.0.allocation(b);
        self.1.allocation(b);
    }
    fn deallocation(&mut self, r: &Release, b: &Block) {
        self.0.deallocation(r, b);
        self.1.deallocation(r, b);
    }
    fn failed_allocation(&mut self, b: &Block) {
        self.0.failed_allocation(b);
        self.1.failed_allocation(b);
    }
    fn unmatched(&mut self, r: &Release) {
        self.0.unmatched(r);
        self.1.unmatched(r);
    }
    fn overwritten(&mut self, b: &Block) {
        self.0.overwritten(b);
        self.1.overwritten(b);
    }
    fn end(&mut self, live: &mut dyn Iterator<Item = &Block>) {
        let blocks: Vec<Block> = live.copied().collect();
        self.0.end(&mut blocks.iter());
        self.1.end(&mut blocks.iter());
    }
}

/// Replays the events of the trace at `path` into `view`, and returns the rest of the trace
/// (process, modules, stack trie, health) as read; its health counts the Events payloads that
/// were damaged part-way (their events before the damage were replayed).
///
/// # Errors
/// [`LoadError`] when the file cannot be read or is not a heaplens trace, and
/// [`LoadError::NoEvents`] for a trace recorded with `--aggregate`, which has counters only.
pub fn replay(path: &Path, view: &mut dyn View) -> Result<Trace, LoadError> {
    replay_with_progress(path, view, false)
}

/// [`replay`], with progress bars on stderr for both passes over the file when `progress` is
/// true and stderr is a terminal.
///
/// # Errors
/// As [`replay`].
pub fn replay_with_progress(path: &Path, view: &mut dyn View, progress: bool) -> Result<Trace, LoadError> {
    let (t, index) = index(path, progress)?;
    replay_indexed(path, t, &index, view, progress)
}

/// The replay's first pass alone: the trace at `path` as read (everything but its events) and
/// where its Events blocks lie, for one replay or more after it ([`replay_indexed`],
/// [`crate::split::replay_split`]), with a progress bar on stderr when `progress` is true and
/// stderr is a terminal.
///
/// # Errors
/// As [`replay`].
pub fn index(path: &Path, progress: bool) -> Result<(Trace, EventIndex), LoadError> {
    let size = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
    let mut index = Index::default();
    let bar = Progress::bytes(progress, size, "indexing trace");
    let t = Trace::load_into(path, Some(&bar), &mut index)?;
    bar.finish();
    if t.aggregate.is_some() {
        return Err(LoadError::NoEvents { path: path.into() });
    }
    Ok((t, EventIndex { blocks: index.blocks }))
}

/// Where a trace's Events blocks lie, found by a pass that read the whole file anyway
/// ([`crate::scan::scan_indexed`]), so that a replay after it reads the file once, not twice.
#[derive(Debug, Default, Clone)]
pub struct EventIndex {
    pub(crate) blocks: Vec<BlockAt>,
}

impl EventIndex {
    /// The timestamp of the trace's first event, in the trace's units ([`Trace::clock`] turns
    /// it into nanoseconds); `None` without events.
    pub fn first_ts(&self) -> Option<u64> {
        self.blocks.iter().filter_map(|b| b.first_ts).min()
    }
}

/// The replay's second half: `trace` as a first pass read it and `index` its Events blocks.
/// Returns `trace` with the Events payloads that were damaged part-way added to its health.
///
/// # Errors
/// [`LoadError::Io`] when the file cannot be opened again.
pub fn replay_indexed(
    path: &Path,
    mut t: Trace,
    index: &EventIndex,
    view: &mut dyn View,
    progress: bool,
) -> Result<Trace, LoadError> {
    let size = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
    let file = heaplens_trace::open_regular(path).map_err(|reason| LoadError::Io { path: path.into(), reason })?;
    let disk = Arc::new(DiskBlocks::new(file));
    let (mut m, tids) = Merger::on_disk(disk.clone(), &index.blocks);
    let bar = Progress::bytes(progress, size, "replaying");
    let mut l = Lifetimes::new(view, t.clock, tids, &bar, Some(&disk));
    m.run(&mut l, u64::MAX);
    bar.finish();
    // Events payloads that stopped decoding part-way are damage the first pass cannot see.
    t.health.malformed_blocks += m.malformed();
    let mut live = l.live.values();
    l.view.end(&mut live);
    Ok(t)
}

/// Notes where the Events blocks are, keeping none of them.
#[derive(Default)]
struct Index {
    blocks: Vec<BlockAt>,
}

impl Sink for Index {
    fn events(&mut self, _t: &mut Trace, tid: u32, payload: Vec<u8>, offset: u64) {
        self.blocks.push(BlockAt::new(tid, offset, &payload));
    }
}

/// Pairs releases with the allocations they end, for a [`View`].
pub(crate) struct Lifetimes<'v> {
    pub(crate) view: &'v mut dyn View,
    clock: TimeMap,
    /// Thread id per stream.
    tids: Vec<u32>,
    pub(crate) live: LiveBlocks<Block>,
    /// Runs replayed, and where the bar shows how far into the file they are.
    runs: u64,
    bar: &'v Progress,
    /// The file the blocks are read from, for the bar (none: payloads in memory).
    disk: Option<&'v DiskBlocks>,
    /// In the later half of a split replay (`crate::split`), the releases of non-zero
    /// addresses not live here, in order: the earlier half may hold their blocks.
    pub(crate) deferred: Option<Vec<Release>>,
}

impl<'v> Lifetimes<'v> {
    pub(crate) fn new(
        view: &'v mut dyn View,
        clock: TimeMap,
        tids: Vec<u32>,
        bar: &'v Progress,
        disk: Option<&'v DiskBlocks>,
    ) -> Self {
        Lifetimes { view, clock, tids, live: LiveBlocks::default(), runs: 0, bar, disk, deferred: None }
    }

    fn block(&self, e: &Event, tid: u32) -> Block {
        Lifetimes::block_of(self.clock, e, tid)
    }

    #[inline(always)]
    fn block_of(clock: TimeMap, e: &Event, tid: u32) -> Block {
        Block {
            ts: clock.to_ns(e.ts),
            tid,
            addr: e.addr,
            size: e.size.min(MAX_BLOCK_SIZE),
            usable: e.usable.max(e.size).min(MAX_BLOCK_SIZE),
            op: e.op,
            stack: e.stack,
        }
    }

    fn release(&mut self, e: &Event, tid: u32, addr: u64) {
        let r = Release { ts: self.clock.to_ns(e.ts), tid, addr, op: e.op };
        match (addr != 0).then(|| self.live.remove(addr)).flatten() {
            Some(b) => self.view.deallocation(&r, b),
            None => {
                if let Some(d) = self.deferred.as_mut().filter(|_| addr != 0) {
                    d.push(r);
                }
                self.view.unmatched(&r)
            }
        }
    }

    fn allocate(&mut self, e: &Event, tid: u32) {
        if e.addr == 0 {
            return self.view.failed_allocation(&self.block(e, tid));
        }
        let clock = self.clock;
        let (old, b) = self.live.insert_with(e.addr, || Lifetimes::block_of(clock, e, tid));
        if let Some(old) = old {
            self.view.overwritten(&old);
        }
        self.view.allocation(b);
    }
}

impl Consumer for Lifetimes<'_> {
    /// The stream's thread id is what its events carry from one to the next.
    fn begin_run(&mut self, stream: u32, _first_ts: u64) -> u64 {
        u64::from(self.tids[stream as usize])
    }

    fn event(&mut self, e: &Event, tid: &mut u64) {
        let tid = *tid as u32;
        match e.op.class() {
            OpClass::Alloc => self.allocate(e, tid),
            OpClass::Dealloc => self.release(e, tid, e.addr),
            OpClass::Realloc => {
                if e.addr != 0 || e.size == 0 {
                    // realloc(NULL, n) only allocates; realloc(p, 0) only releases.
                    if e.old_addr != 0 {
                        self.release(e, tid, e.old_addr);
                    }
                    if e.addr != 0 {
                        self.allocate(e, tid);
                    }
                } else {
                    // Failed: the old block stays.
                    let b = self.block(e, tid);
                    self.view.failed_allocation(&b);
                }
            }
        }
    }

    fn end_run(&mut self, _stream: u32, _last: u64, _events: u64, _last_ts: u64, _max_ts: u64) {
        self.runs += 1;
        if self.runs.is_multiple_of(4096) {
            if let Some(d) = self.disk {
                self.bar.set(d.reached());
            }
        }
    }
}
