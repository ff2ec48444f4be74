//! Reading a trace file into memory: the process, module and stack records decoded, the event
//! payloads kept compact (a few bytes an event) and merged across threads on demand.

use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use heaplens_trace::record::SampleRecord;
use heaplens_trace::{
    AggregateRecord, BlockKind, ClockSync, EndRecord, ExitRecord, ModuleRecord, ProcessRecord, ReadError, StackNode,
    ThreadName, TimeMap, TraceReader,
};

pub use crate::merge::MergedEvents;
use crate::progress::Progress;

/// Why a trace could not be loaded at all. Damage after the file header is not an error: it is
/// recorded in [`Health`] and the trace is analysed as far as it reads.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The file could not be opened, is not a heaplens trace, or has another version.
    // The reason is part of the message and deliberately not a `source`: error chains printed
    // with `{:#}` would repeat it.
    #[error("cannot read trace {path}: {reason}")]
    Open {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        reason: ReadError,
    },
    /// The trace was recorded with `--aggregate`: it has counters, and no events for a view
    /// that needs them.
    #[error("trace {path} was recorded with --aggregate: it has counters only, and no events to replay")]
    NoEvents {
        /// The file.
        path: PathBuf,
    },
    /// An I/O error while reading blocks.
    #[error("error reading trace {path}: {reason}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        reason: std::io::Error,
    },
}

/// How complete and intact the trace is.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Health {
    /// Blocks read.
    pub blocks: u64,
    /// Blocks skipped because their checksum or compression was bad.
    pub corrupt_blocks: u64,
    /// Byte offset of the incomplete block the file ends in, if it does.
    pub truncated_at: Option<u64>,
    /// Blocks whose checksum was good but whose records did not decode (counted once each;
    /// records before the damage are kept).
    pub malformed_blocks: u64,
    /// Whether the monitor's End block (clean shutdown) was seen.
    pub end_seen: bool,
}

/// How precisely the events' times were kept. The monitor rounds the times of the events no
/// other thread's can fall among (a single-threaded program's, say) to coarser units, marked per
/// EventColumns payload (trace format 4, [`heaplens_trace::columns::time_shift`]); row payloads
/// and older traces keep every time exact.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TimePrecision {
    /// Events whose times were rounded (in payloads with a time shift above 0).
    pub coarse_events: u64,
    /// The largest time shift met: those times are multiples of `2^max_shift` event time
    /// units (see [`heaplens_trace::TimeMap::span_ns`]); 0 when every time is exact.
    pub max_shift: u32,
}

impl TimePrecision {
    /// Counts EventColumns payload `p` (untagged).
    fn note(&mut self, p: &[u8]) {
        let shift = heaplens_trace::columns::time_shift(p).unwrap_or(0);
        if shift > 0 {
            self.coarse_events += heaplens_trace::columns::event_count(p).unwrap_or(0) as u64;
            self.max_shift = self.max_shift.max(shift);
        }
    }
}

/// The call-stack trie: node `id` is the stack of its parent extended by one return address.
/// Indexed by node id; node 0 is the empty stack.
#[derive(Debug, Clone, Default)]
pub struct StackTable {
    parent: Vec<u32>,
    addr: Vec<u64>,
    /// Nodes defined (ids given a definition at least once).
    defined: usize,
}

/// Largest stack node id accepted (2^28 nodes, 3 GiB of tables): guards the dense tables
/// indexed by id against a wild id.
pub const MAX_STACK_ID: u32 = 1 << 28;

/// How far past twice the nodes defined so far a new id may go. The monitor writes nodes in
/// the order it numbers them, so only damage skips ahead; the gap bounds the tables by the nodes
/// present (1M slots, 12 MiB, plus two slots a node) instead of by a number read from the file.
/// Twice the nodes, not the highest id: 255 nodes each 1M past the one before sized the table
/// by 2^28 ids (3 GiB) from a trace of 7 KB.
pub const MAX_ID_GAP: usize = 1 << 20;

/// Frames of a stack the views read at most: its innermost 1024 (what the monitor records by
/// default). A trace is outside input, and a chain of 100,000 nodes with thousands of
/// allocations on its deep end would make every path that long: memory and time by the
/// square of the file. A deeper stack counts as incomplete, as one whose outer frames were
/// lost. Views of many stacks read fewer ([`depth_for`]).
pub const MAX_DEPTH: usize = 1024;

/// Frames a view of many stacks reads at least ([`depth_for`]).
pub const MIN_DEPTH: usize = 256;

/// Frames all of a view's paths may hold together before each is read less deep: 60,000
/// stacks 1,000 frames deep (a 376 KB trace) took the report 645 MB and a flame graph 1.17 GB
/// read 1,024 deep.
pub const FRAME_BUDGET: usize = 8 << 20;

/// How deep a view of `stacks` stacks reads each: [`MAX_DEPTH`], or less (down to
/// [`MIN_DEPTH`]) so that all of them hold at most [`FRAME_BUDGET`] frames.
pub fn depth_for(stacks: usize) -> usize {
    (FRAME_BUDGET / stacks.max(1)).clamp(MIN_DEPTH, MAX_DEPTH)
}

/// Marks a node id whose definition was never read (a truncated or damaged trace).
const UNDEFINED: u32 = u32::MAX;

impl StackTable {
    /// Adds (or redefines) a node.
    ///
    /// Returns false (the node is dropped) for an id past [`MAX_STACK_ID`] or more than
    /// [`MAX_ID_GAP`] past twice the nodes defined: the table grows with the nodes present.
    pub fn insert(&mut self, n: StackNode) -> bool {
        // The monitor numbers nodes in the order it writes them: an id far past the nodes seen
        // so far is damage, and would size the table by a number read from the file.
        if n.id > MAX_STACK_ID || n.id as usize > 2 * self.defined + MAX_ID_GAP {
            return false;
        }
        let i = n.id as usize;
        if i >= self.parent.len() {
            self.parent.resize(i + 1, UNDEFINED);
            self.addr.resize(i + 1, 0);
        }
        if self.parent[i] == UNDEFINED {
            self.defined += 1;
        }
        self.parent[i] = n.parent;
        self.addr[i] = n.addr;
        true
    }

    /// Number of node slots (highest defined id + 1).
    pub fn len(&self) -> usize {
        self.parent.len()
    }

    /// True when no node is defined.
    pub fn is_empty(&self) -> bool {
        self.parent.len() <= 1
    }

    /// `(parent, return address)` of node `id`, or `None` for node 0 and undefined nodes.
    pub fn get(&self, id: u32) -> Option<(u32, u64)> {
        let i = id as usize;
        if id == 0 || i >= self.parent.len() || self.parent[i] == UNDEFINED {
            return None;
        }
        Some((self.parent[i], self.addr[i]))
    }

    /// Walks stack `id` from the innermost frame (the direct caller of the allocator) out to
    /// the root, yielding `(node, return address)`, at most [`MAX_DEPTH`] of them. The walk
    /// stops early at an undefined node, and ends: at most [`MAX_DEPTH`] steps, whatever
    /// loops a damaged trace's parents make.
    pub fn walk(&self, id: u32) -> impl Iterator<Item = (u32, u64)> + '_ {
        self.walk_within(id, MAX_DEPTH)
    }

    /// As [`StackTable::walk`], at most `depth` frames.
    pub fn walk_within(&self, id: u32, depth: usize) -> impl Iterator<Item = (u32, u64)> + '_ {
        let mut cur = id;
        std::iter::from_fn(move || {
            let (parent, addr) = self.get(cur)?;
            let node = cur;
            cur = parent;
            Some((node, addr))
        })
        .take(depth)
    }

    /// True when the walk from `id` reaches the root within [`MAX_DEPTH`] frames without
    /// meeting an undefined node.
    pub fn is_complete(&self, id: u32) -> bool {
        self.is_complete_within(id, MAX_DEPTH)
    }

    /// As [`StackTable::is_complete`], within `depth` frames.
    pub fn is_complete_within(&self, id: u32, depth: usize) -> bool {
        let mut cur = id;
        for _ in 0..=depth {
            if cur == 0 {
                return true;
            }
            match self.get(cur) {
                Some((p, _)) => cur = p,
                None => return false,
            }
        }
        false
    }
}

/// A whole trace, decoded except for its events, which stay in their compact per-thread
/// payloads and are merged by timestamp when replayed.
#[derive(Debug, Default)]
pub struct Trace {
    /// The file it came from (empty for in-memory traces).
    pub path: PathBuf,
    /// Who was profiled; `None` if the Process block was lost.
    pub process: Option<ProcessRecord>,
    /// Module loads and unloads in file order.
    pub modules: Vec<ModuleRecord>,
    /// The call-stack trie.
    pub stacks: StackTable,
    /// Thread names in file order.
    pub thread_names: Vec<ThreadName>,
    /// How the process ended, appended by `heaplens run`.
    pub exit: Option<ExitRecord>,
    /// The monitor's shutdown counters, when it shut down cleanly.
    pub end: Option<EndRecord>,
    /// Damage and completeness. Events payloads damaged part-way are found when the events are
    /// replayed ([`crate::replay::Replay::malformed_blocks`]).
    pub health: Health,
    /// How precisely its event times were kept.
    pub times: TimePrecision,
    /// Turns event timestamps (nanoseconds or TSC ticks) into `CLOCK_MONOTONIC` nanoseconds.
    pub clock: TimeMap,
    /// The last counters snapshot of a trace recorded in aggregated mode (`heaplens run
    /// --aggregate`), which has no events.
    pub aggregate: Option<AggregateRecord>,
    /// CPU-time samples (`heaplens run --cpu`), one record per thread and writer sweep, in
    /// file order; timestamps in the trace's units ([`Trace::clock`] converts them).
    pub samples: Vec<SampleRecord>,
    /// Event payloads grouped by thread, each thread's in file order (= time order), threads
    /// in order of first appearance.
    pub threads: Vec<(u32, Vec<Vec<u8>>)>,
}

/// Receives what [`Trace::read_blocks`] decodes, as it goes.
pub trait Sink {
    /// An Events payload with a thread id, from the block at byte `offset` of the file.
    fn events(&mut self, t: &mut Trace, tid: u32, payload: Vec<u8>, offset: u64);
    /// The Process record.
    fn process(&mut self, _p: &ProcessRecord) {}
    /// A Clock record.
    fn clock(&mut self, _c: ClockSync) {}
    /// Module records.
    fn modules(&mut self, _m: &[ModuleRecord]) {}
    /// Stack nodes.
    fn stacks(&mut self, _n: &[StackNode]) {}
}

/// Files payloads under their thread, in the trace itself.
#[derive(Default)]
struct KeepEvents {
    index: HashMap<u32, usize>,
}

impl Sink for KeepEvents {
    fn events(&mut self, t: &mut Trace, tid: u32, payload: Vec<u8>, _offset: u64) {
        let i = *self.index.entry(tid).or_insert_with(|| {
            t.threads.push((tid, Vec::new()));
            t.threads.len() - 1
        });
        t.threads[i].1.push(payload);
    }
}

impl Trace {
    /// Loads the trace at `path`, showing a progress bar on stderr when `progress` is true and
    /// stderr is a terminal.
    ///
    /// # Errors
    /// [`LoadError`] when the file cannot be opened or is not a heaplens trace.
    pub fn load(path: &Path, progress: bool) -> Result<Trace, LoadError> {
        let bar = Progress::bytes(progress, std::fs::metadata(path).map(|m| m.len()).unwrap_or(0), "reading trace");
        let t = Self::load_into(path, Some(&bar), &mut KeepEvents::default())?;
        bar.finish();
        Ok(t)
    }

    /// Loads the trace at `path`, handing its parts to `sink` as they are read.
    pub fn load_into(path: &Path, bar: Option<&Progress>, sink: &mut dyn Sink) -> Result<Trace, LoadError> {
        let reader = TraceReader::open(path).map_err(|reason| LoadError::Open { path: path.into(), reason })?;
        let mut t =
            Self::read_blocks(reader, bar, sink).map_err(|reason| LoadError::Io { path: path.into(), reason })?;
        t.path = path.into();
        Ok(t)
    }

    /// Loads a trace from any reader (for tests and pipes).
    ///
    /// # Errors
    /// [`LoadError`] when the input is not a heaplens trace or cannot be read.
    pub fn from_reader<R: Read>(input: R) -> Result<Trace, LoadError> {
        let reader = TraceReader::new(input).map_err(|reason| LoadError::Open { path: PathBuf::new(), reason })?;
        Self::read_blocks(reader, None, &mut KeepEvents::default())
            .map_err(|reason| LoadError::Io { path: PathBuf::new(), reason })
    }

    fn read_blocks<R: Read>(
        mut reader: TraceReader<R>,
        bar: Option<&Progress>,
        sink: &mut dyn Sink,
    ) -> std::io::Result<Trace> {
        let mut t = Trace::default();
        let mut syncs = Vec::new();
        t.read_more(&mut reader, bar, sink, &mut syncs)?;
        let st = reader.status();
        t.health.blocks = st.blocks;
        t.health.corrupt_blocks = st.corrupt_blocks;
        t.health.truncated_at = st.truncated_at;
        Ok(t)
    }

    /// Reads the blocks `reader` has left into this trace (appending to what earlier calls
    /// read: a trace followed while it is written, see [`crate::follow`]), handing its parts
    /// to `sink`; the Clock records go to `syncs` too, and [`Trace::clock`] is made from all of
    /// them. The reader's status (blocks, damage, where it stopped) is left to the caller.
    ///
    /// # Errors
    /// I/O errors other than an early end of file.
    pub fn read_more<R: Read>(
        &mut self,
        reader: &mut TraceReader<R>,
        bar: Option<&Progress>,
        sink: &mut dyn Sink,
        syncs: &mut Vec<ClockSync>,
    ) -> std::io::Result<()> {
        let t = self;
        while let Some((kind, payload)) = reader.next_block()? {
            if let Some(bar) = bar {
                bar.set(reader.status().offset);
            }
            let ok = match kind {
                BlockKind::Process => match ProcessRecord::decode(&payload) {
                    Ok(p) => {
                        sink.process(&p);
                        t.process = Some(p);
                        true
                    }
                    Err(_) => false,
                },
                BlockKind::Modules => match ModuleRecord::decode_all(&payload) {
                    Ok(m) => {
                        sink.modules(&m);
                        t.modules.extend(m);
                        true
                    }
                    Err(_) => false,
                },
                BlockKind::Stacks => match StackNode::decode_all(&payload) {
                    Ok(nodes) => {
                        sink.stacks(&nodes);
                        let mut ok = true;
                        for n in nodes {
                            ok &= t.stacks.insert(n);
                        }
                        ok
                    }
                    Err(_) => false,
                },
                BlockKind::ThreadName => ThreadName::decode(&payload).map(|n| t.thread_names.push(n)).is_ok(),
                BlockKind::Exit => ExitRecord::decode(&payload).map(|e| t.exit = Some(e)).is_ok(),
                BlockKind::End => {
                    t.health.end_seen = true;
                    EndRecord::decode(&payload).map(|e| t.end = Some(e)).is_ok()
                }
                BlockKind::Events | BlockKind::EventColumns => {
                    let layout = if kind == BlockKind::Events {
                        crate::decode::payload::ROWS
                    } else {
                        crate::decode::payload::COLUMNS
                    };
                    match crate::decode::payload::header(&payload, layout) {
                        Some(tid) => {
                            if layout == crate::decode::payload::COLUMNS {
                                t.times.note(&payload);
                            }
                            let at = reader.status().last_block;
                            sink.events(t, tid, crate::decode::payload::tagged(payload, layout), at);
                            true
                        }
                        None => false,
                    }
                }
                BlockKind::Clock => match ClockSync::decode(&payload) {
                    Ok(c) => {
                        sink.clock(c);
                        syncs.push(c);
                        true
                    }
                    Err(_) => false,
                },
                BlockKind::Aggregate => AggregateRecord::decode(&payload).map(|a| t.aggregate = Some(a)).is_ok(),
                // Read apart, from the end of the file (`symbolize::embedded`).
                BlockKind::Symbols | BlockKind::SymbolsIndex => true,
                BlockKind::Samples => SampleRecord::decode(&payload).map(|s| t.samples.push(s)).is_ok(),
            };
            if !ok {
                t.health.malformed_blocks += 1;
            }
        }
        let source = t.process.as_ref().map(|p| p.time_source).unwrap_or_default();
        t.clock = TimeMap::new(source, syncs);
        Ok(())
    }

    /// Thread ids that have events, in order of first appearance in the file.
    pub fn thread_ids(&self) -> impl Iterator<Item = u32> + '_ {
        self.threads.iter().map(|(tid, _)| *tid)
    }

    /// The sampling rate of the trace (0: every allocation was recorded).
    pub fn sample_rate(&self) -> u64 {
        self.process.as_ref().map_or(0, |p| p.sample_rate)
    }

    /// The event payloads per thread (in-memory layout, see `decode/payload.rs`), each
    /// thread's in file order, threads in order of their first block: what
    /// [`crate::merge::Merger::borrowed`] merges.
    pub fn payloads(&self) -> &[(u32, Vec<Vec<u8>>)] {
        &self.threads
    }

    /// All events of all threads merged by timestamp, with timestamps in `CLOCK_MONOTONIC`
    /// nanoseconds. Ties keep file order of the threads' first blocks; each thread's own order
    /// is always kept.
    pub fn events(&self) -> MergedEvents<'_> {
        MergedEvents::new(&self.threads, self.clock)
    }
}
