//! The first pass: what the picture's axes and colours need before a block is drawn (the time
//! span, the addresses the blocks touch, the bytes per stack for the top functions, the
//! threads), for the blocks inside the window asked for.

use heaplens_interpret::idmap::IdMap;
use heaplens_interpret::load::{LoadError, Trace};
use heaplens_interpret::split::{replay_split, Joinable};
use heaplens_interpret::view::{Block, EventIndex, Release, View, MAX_BLOCK_SIZE};
use heaplens_trace::{Event, OpClass};
use rustc_hash::FxHashSet as HashSet;

use crate::axis::GRANULE_SHIFT;
use crate::granules::Granules;

/// The part of the run and of the address space drawn (`None`: all of it).
#[derive(Debug, Clone, Copy, Default)]
pub struct Window {
    /// From this time, nanoseconds since the first event.
    pub from_ns: Option<u64>,
    /// To this time, nanoseconds since the first event.
    pub to_ns: Option<u64>,
    /// Addresses `[lo, hi)`.
    pub addresses: Option<(u64, u64)>,
}

/// What the first pass found.
#[derive(Default)]
pub struct Layout {
    window: Window,
    /// The first event's time, `CLOCK_MONOTONIC` ns.
    pub first_ts: Option<u64>,
    /// The last event's time.
    pub last_ts: u64,
    /// Occupied granules (addresses `>> GRANULE_SHIFT`) of the blocks in the window.
    pub granules: Granules,
    /// The same per size class ([`crate::bins::SIZE_CLASSES`]), when asked for.
    pub granules_by_class: Vec<Granules>,
    /// Bytes allocated per stack, by blocks in the window.
    pub bytes_by_stack: IdMap<u32, f64>,
    /// Bytes held over time per stack (bytes x nanoseconds alive within the window).
    pub byte_ns_by_stack: IdMap<u32, f64>,
    /// Threads in order of their first allocation.
    pub threads: Vec<u32>,
    /// Blocks in the window.
    pub blocks: u64,
    thread_seen: HashSet<u32>,
    /// The granule [`Layout::note`] marked last.
    last_granule: u64,
    /// Bytes per stack below [`DENSE_STACKS`], by index, when `dense` (the scan's: a vector
    /// costs less than a map per block).
    dense_bytes: Vec<u64>,
    /// The unrequested and usable bytes of the block with the largest waste share ((0, 0):
    /// none yet).
    waste_of: (u64, u64),
    dense: bool,
}

/// Stacks counted in [`Layout::dense_bytes`]; the trie's node ids are dense, so this is the
/// first million nodes.
const DENSE_STACKS: u32 = 1 << 20;

impl Layout {
    /// A first pass over the blocks in `window`; `by_class` notes the granules of each size
    /// class too.
    pub fn new(window: Window, by_class: bool) -> Layout {
        let classes = if by_class { crate::bins::SIZE_CLASSES.len() } else { 0 };
        Layout {
            window,
            granules_by_class: vec![Granules::default(); classes],
            last_granule: u64::MAX,
            ..Layout::default()
        }
    }

    /// [`Layout::new`] for a replay whose first event is at `first_ts` (`CLOCK_MONOTONIC` ns),
    /// known before it starts: the later half of a split replay ([`Joinable`]) measures its
    /// window from there, not from its own first event.
    pub fn starting(window: Window, by_class: bool, first_ts: Option<u64>) -> Layout {
        Layout { first_ts, ..Layout::new(window, by_class) }
    }

    fn seen(&mut self, ts: u64) {
        self.first_ts.get_or_insert(ts);
        self.last_ts = self.last_ts.max(ts);
    }

    /// Whether a block alive over `[from, to)` (ns since the first event) overlaps the window.
    fn in_window(&self, b: &Block, from: u64, to: u64) -> bool {
        let w = &self.window;
        w.from_ns.is_none_or(|f| to >= f)
            && w.to_ns.is_none_or(|t| from <= t)
            && w.addresses.is_none_or(|(lo, hi)| b.addr < hi && b.addr.saturating_add(b.usable.max(1)) > lo)
    }

    fn block(&mut self, b: &Block, end_ts: u64) {
        let t0 = self.first_ts.unwrap_or(b.ts);
        if b.addr == 0 || !self.in_window(b, b.ts.saturating_sub(t0), end_ts.saturating_sub(t0)) {
            return;
        }
        self.note(b.addr, b.usable, b.size, b.stack);
        let (from, to) = (
            self.window.from_ns.map_or(b.ts, |f| b.ts.max(t0 + f)),
            self.window.to_ns.map_or(end_ts, |t| end_ts.min(t0 + t)),
        );
        *self.byte_ns_by_stack.entry(b.stack).or_default() += b.size as f64 * to.saturating_sub(from) as f64;
    }

    /// Counts a block of the window: its granules (clipped to the window's addresses), its
    /// stack's bytes, its waste. Both first passes (replay and scan) come here.
    #[inline(always)]
    fn note(&mut self, addr: u64, usable: u64, size: u64, stack: u32) {
        let end = addr.saturating_add(usable.max(1));
        let (lo, hi) = match self.window.addresses {
            Some((wlo, whi)) if addr >= whi || end <= wlo => return,
            Some((wlo, whi)) => (addr.max(wlo), end.min(whi)),
            None => (addr, end),
        };
        self.blocks += 1;
        let first = lo >> GRANULE_SHIFT;
        let last = (hi - 1) >> GRANULE_SHIFT;
        // Consecutive blocks mostly share a granule.
        if first != last || first != self.last_granule {
            self.granules.insert_span(first, last);
            self.last_granule = last;
        }
        if !self.granules_by_class.is_empty() {
            if let Some(c) = self.granules_by_class.get_mut(crate::bins::size_class(usable)) {
                c.insert_span(first, last);
            }
        }
        if self.dense && stack < DENSE_STACKS {
            let i = stack as usize;
            if i >= self.dense_bytes.len() {
                self.dense_bytes.resize((i + 1).next_power_of_two(), 0);
            }
            self.dense_bytes[i] += size;
        } else {
            *self.bytes_by_stack.entry(stack).or_default() += size as f64;
        }
        if usable > size && more_waste((usable - size, usable), self.waste_of) {
            self.waste_of = (usable - size, usable);
        }
    }
}

impl Layout {
    /// Adds what `m` counted (of the same window, in another part of the trace): the scan's
    /// two threads and a split replay's two halves are summed here.
    fn add(&mut self, m: Layout) {
        self.granules.extend(m.granules);
        for (c, g) in self.granules_by_class.iter_mut().zip(m.granules_by_class) {
            c.extend(g);
        }
        if self.dense_bytes.len() < m.dense_bytes.len() {
            self.dense_bytes.resize(m.dense_bytes.len(), 0);
        }
        for (a, b) in self.dense_bytes.iter_mut().zip(m.dense_bytes) {
            *a += b;
        }
        for (stack, b) in m.bytes_by_stack {
            *self.bytes_by_stack.entry(stack).or_default() += b;
        }
        for (stack, b) in m.byte_ns_by_stack {
            *self.byte_ns_by_stack.entry(stack).or_default() += b;
        }
        for tid in m.threads {
            if self.thread_seen.insert(tid) {
                self.threads.push(tid);
            }
        }
        if more_waste(m.waste_of, self.waste_of) {
            self.waste_of = m.waste_of;
        }
        self.blocks += m.blocks;
        self.first_ts = self.first_ts.into_iter().chain(m.first_ts).min();
        self.last_ts = self.last_ts.max(m.last_ts);
    }

    /// The largest share of a block's usable bytes left unrequested.
    pub fn max_waste(&self) -> f64 {
        let (w, u) = self.waste_of;
        if u == 0 {
            0.0
        } else {
            w as f64 / u as f64
        }
    }
}

/// Whether the waste share `w.0 / w.1` (unrequested over usable bytes) is above `than`'s,
/// compared in integers: a block's costs a multiplication, not a division.
fn more_waste(w: (u64, u64), than: (u64, u64)) -> bool {
    u128::from(w.0) * u128::from(than.1.max(1)) > u128::from(than.0) * u128::from(w.1)
}

/// What one thread of the scan found (see [`Layout::scan`]).
struct Scanned {
    layout: Layout,
    /// The earliest and latest timestamps, in the trace's units.
    lo: u64,
    hi: u64,
    /// The first allocation of each thread, in the trace's units.
    first_alloc: IdMap<u32, u64>,
    /// The thread of the last allocation (a payload's events are one thread's, in order).
    last_tid: u32,
}

impl Scanned {
    fn new(window: Window, by_class: bool) -> Scanned {
        let mut layout = Layout::new(window, by_class);
        layout.dense = true;
        Scanned { layout, lo: u64::MAX, hi: 0, first_alloc: IdMap::default(), last_tid: u32::MAX }
    }
}

impl heaplens_interpret::scan::Scanner for Scanned {
    #[inline(always)]
    fn event(&mut self, e: &Event) {
        self.lo = self.lo.min(e.ts);
        self.hi = self.hi.max(e.ts);
        if e.addr == 0 || !matches!(e.op.class(), OpClass::Alloc | OpClass::Realloc) {
            return;
        }
        // As the replay's blocks are (`MAX_BLOCK_SIZE`): the byte sums stay in range.
        self.layout.note(e.addr, e.usable.min(MAX_BLOCK_SIZE), e.size.min(MAX_BLOCK_SIZE), e.stack);
        if e.tid != self.last_tid {
            self.last_tid = e.tid;
            let first = self.first_alloc.entry(e.tid).or_insert(e.ts);
            *first = (*first).min(e.ts);
        }
    }
}

impl Scanned {
    /// Adds what `o` found.
    fn absorb(&mut self, o: Scanned) {
        self.layout.add(o.layout);
        self.lo = self.lo.min(o.lo);
        self.hi = self.hi.max(o.hi);
        for (tid, ts) in o.first_alloc {
            let first = self.first_alloc.entry(tid).or_insert(ts);
            *first = (*first).min(ts);
        }
    }
}

impl Layout {
    /// The first pass without a time window: only allocations matter (each block's granules,
    /// bytes per stack, thread, waste) and the time span, so the trace is scanned
    /// ([`heaplens_interpret::scan::scan_split`], on two processors) rather than replayed.
    /// Timestamps are converted once the file is read.
    pub fn scan(
        path: &std::path::Path,
        window: Window,
        by_class: bool,
        progress: bool,
    ) -> Result<(Layout, Trace, EventIndex), LoadError> {
        debug_assert!(window.from_ns.is_none() && window.to_ns.is_none());
        let states = [Scanned::new(window, by_class), Scanned::new(window, by_class)];
        let (trace, index, [mut s, other]) = heaplens_interpret::scan::scan_split(path, states, progress)?;
        s.absorb(other);
        let mut l = s.layout;
        for (stack, b) in std::mem::take(&mut l.dense_bytes).into_iter().enumerate().filter(|(_, b)| *b > 0) {
            *l.bytes_by_stack.entry(stack as u32).or_default() += b as f64;
        }
        l.dense = false;
        // Threads in order of their first allocation in time (the file interleaves them).
        let mut threads: Vec<(u64, u32)> = s.first_alloc.iter().map(|(&tid, &ts)| (ts, tid)).collect();
        threads.sort_unstable();
        l.threads = threads.into_iter().map(|(_, tid)| tid).collect();
        if s.hi >= s.lo {
            l.first_ts = Some(trace.clock.to_ns(s.lo));
            l.last_ts = trace.clock.to_ns(s.hi);
        }
        l.run_to_the_end(&trace);
        Ok((l, trace, index))
    }

    /// The first pass as a replay, for a time window (a block belongs to one by its lifetime)
    /// or for bytes held over time: two halves at once ([`replay_split`], when the Events
    /// payloads hold `min_bytes`), both from [`Layout::starting`]. The trace's health leaves
    /// the payloads damaged part-way to the second pass to count, as [`Layout::scan`]'s does.
    pub fn replay(
        path: &std::path::Path,
        window: Window,
        by_class: bool,
        progress: bool,
        min_bytes: usize,
    ) -> Result<(Layout, Trace, EventIndex), LoadError> {
        let (trace, index) = heaplens_interpret::view::index(path, progress)?;
        let first_ts = index.first_ts().map(|t| trace.clock.to_ns(t));
        let damaged = trace.health.malformed_blocks;
        let make = |_| Layout::starting(window, by_class, first_ts);
        let (mut trace, mut layout, _) = replay_split(path, trace, &index, make, progress, min_bytes)?;
        trace.health.malformed_blocks = damaged;
        layout.run_to_the_end(&trace);
        Ok((layout, trace, index))
    }

    /// Extends the run past its last event to the end of recording (the monitor's End block),
    /// so that the pictures draw the heap as the last event left it (a run whose last
    /// allocation is its peak showed that peak one pixel wide, at the edge). At most as far
    /// again as the events span (or 1 ms): an End block's time is outside input, and the
    /// events should not shrink to a sliver of the picture.
    fn run_to_the_end(&mut self, trace: &Trace) {
        let (Some(first), Some(end)) = (self.first_ts, trace.end) else { return };
        let span = self.last_ts.saturating_sub(first).max(1_000_000);
        self.last_ts = self.last_ts.max(end.end_mono_ns.min(self.last_ts.saturating_add(span)));
    }
}

impl View for Layout {
    fn allocation(&mut self, b: &Block) {
        self.seen(b.ts);
        if self.thread_seen.insert(b.tid) {
            self.threads.push(b.tid);
        }
    }

    fn deallocation(&mut self, r: &Release, b: &Block) {
        self.seen(r.ts);
        self.block(b, r.ts);
    }

    fn unmatched(&mut self, r: &Release) {
        self.seen(r.ts);
    }

    fn end(&mut self, live: &mut dyn Iterator<Item = &Block>) {
        let end = self.last_ts;
        for b in live {
            self.block(b, end);
        }
    }
}

/// A replay's first pass in two halves at once ([`heaplens_interpret::split`]): the later half
/// counts its own blocks, and the blocks live at the cut that it released are counted at the
/// join, where their allocation is known. Both halves start from [`Layout::starting`].
impl Joinable for Layout {
    fn join(&mut self, later: Layout, releases: &[(Release, Option<Block>)]) {
        self.add(later);
        for (r, b) in releases {
            if let Some(b) = b {
                self.block(b, r.ts);
            }
        }
    }
}
