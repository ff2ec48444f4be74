//! Following a trace while it is written (`heaplens live`): each [`Follow::advance`] reads only
//! the blocks appended since the last one, and replays their events into a [`View`] through
//! the same pairing as [`crate::view::replay`], keeping the live blocks, the merge's state and
//! the trace read so far (process, modules, stack trie, threads) from call to call.
//!
//! A block still being written at the end of the file is left for the next call, which reads
//! it again from its start. Threads' blocks reach the file in no set order, so the events are
//! merged by time with the streaming merger ([`Merger::push`]), and replayed up to a window
//! behind the newest time the file vouches for, all of them once the trace is sealed. That
//! time is the newest block's first event's, or the newest Clock record's: the monitor's writer
//! writes one every 50 ms, and every thread's events within its 10 ms sweep, so an idle
//! program's last events are shown within the window. A block older than what was replayed anyway
//! makes the follower start over from the start of the file ([`Step::Restarted`]): the view's
//! numbers are then those of a replay of the whole trace, never a mix.

use std::collections::HashMap;
use std::io::{BufReader, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use heaplens_trace::{ClockSync, Event, TraceReader};

use crate::decode::ahead::{Ahead, Slot};
use crate::live::LiveBlocks;
use crate::load::{LoadError, Sink, Trace};
use crate::merge::{Consumer, Merger, WINDOW_NS};
use crate::progress::Progress;
use crate::view::{Block, Lifetimes, View};

/// A trace not written to for this long has no writer any more (a live monitor's writer adds a
/// Clock record every 50 ms): a program killed, or a trace copied from elsewhere. Its events
/// are then all replayed, as if it were sealed (if it grows again after all, with older events,
/// the follower starts over as for any block out of order).
const SETTLED: std::time::Duration = std::time::Duration::from_secs(2);

/// What an [`Follow::advance`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// The view got the events up to where the replay stands now.
    Advanced,
    /// A block broke the time order the replay had assumed: the follower starts over from the
    /// start of the file, and the caller must give the next [`Follow::advance`] a fresh view.
    Restarted,
}

/// A trace followed while it is written.
pub struct Follow {
    path: PathBuf,
    /// Where the next block starts (0: the file header is not read yet).
    offset: u64,
    trace: Trace,
    syncs: Vec<ClockSync>,
    merger: Merger<'static>,
    /// Stream of each thread id, and thread id of each stream (in order of first block).
    streams: HashMap<u32, u32>,
    tids: Vec<u32>,
    live: LiveBlocks<Block>,
    /// The largest (timestamp, stream) replayed, and whether anything was.
    max_key: (u64, u32),
    replayed: bool,
    /// The newest time the file vouches for (a payload's first event, a Clock record), in the
    /// trace's units.
    newest: u64,
    /// Bytes of the file read so far, over every call.
    read: u64,
    /// Times the replay started over.
    restarts: u64,
    /// The file, kept open once it opened: a trace renamed while followed (`heaplens attach`
    /// moves its staged trace over the name `-o` gave when recording ends) is read on to its
    /// end.
    file: Option<std::fs::File>,
}

impl Follow {
    /// Follows the trace at `path` (which need not exist yet).
    pub fn new(path: &Path) -> Follow {
        Follow {
            path: path.to_path_buf(),
            offset: 0,
            trace: Trace { path: path.to_path_buf(), ..Trace::default() },
            syncs: Vec::new(),
            merger: Merger::streaming(Arc::new(Ahead::default())),
            streams: HashMap::new(),
            tids: Vec::new(),
            live: LiveBlocks::default(),
            max_key: (0, 0),
            replayed: false,
            newest: 0,
            read: 0,
            restarts: 0,
            file: None,
        }
    }

    /// The trace as read so far (its events aside). Its health counts the blocks read and the
    /// damage met; `truncated_at` is where a block still being written starts.
    pub fn trace(&self) -> &Trace {
        &self.trace
    }

    /// Bytes of the file read so far, over every call (a block cut short is read again in
    /// full by the call that finds it complete).
    pub fn bytes_read(&self) -> u64 {
        self.read
    }

    /// Times the replay started over from the start of the file ([`Step::Restarted`]).
    pub fn restarts(&self) -> u64 {
        self.restarts
    }

    /// The blocks live where the replay stands (in no particular order).
    pub fn live(&self) -> impl Iterator<Item = &Block> {
        self.live.values()
    }

    /// Reads the blocks appended since the last call and replays their events into `view`,
    /// which must be the view every earlier call got since the last [`Step::Restarted`].
    ///
    /// # Errors
    /// [`LoadError`] when the file cannot be read or is not (yet) a heaplens trace, and
    /// [`LoadError::NoEvents`] for a trace recorded with `--aggregate`; the next call tries
    /// again.
    pub fn advance(&mut self, view: &mut dyn View) -> Result<Step, LoadError> {
        let in_order = self.read()?;
        if self.trace.aggregate.is_some() {
            return Err(LoadError::NoEvents { path: self.path.clone() });
        }
        if !in_order {
            let (read, restarts, file) = (self.read, self.restarts + 1, self.file.take());
            *self = Follow { read, restarts, file, ..Follow::new(&self.path) };
            return Ok(Step::Restarted);
        }
        // Even a single thread's events wait for the window: another thread's first block may
        // still come with older events (a restart costs reading the whole file again).
        let all = self.trace.health.end_seen || self.settled();
        let horizon = if all { u64::MAX } else { self.newest.saturating_sub(self.window()) };
        let bar = Progress::bytes(false, 0, "");
        let mut l = Lifetimes::new(view, self.trace.clock, self.tids.clone(), &bar, None);
        l.live = std::mem::take(&mut self.live);
        let mut tracked = Tracked { inner: l, max_key: self.max_key, replayed: self.replayed };
        self.merger.run(&mut tracked, horizon);
        self.live = std::mem::take(&mut tracked.inner.live);
        (self.max_key, self.replayed) = (tracked.max_key, tracked.replayed);
        self.trace.health.malformed_blocks = self.merger.malformed();
        Ok(Step::Advanced)
    }

    /// Whether the file has not been written to for [`SETTLED`] (by its modification time), so
    /// that no more events are coming: all of them are replayed, the trace sealed or not.
    pub fn settled(&self) -> bool {
        self.metadata().and_then(|m| m.modified()).ok().and_then(|t| t.elapsed().ok()).is_some_and(|age| age >= SETTLED)
    }

    /// The followed file's metadata: the open file's (wherever it was renamed to), else the
    /// path's.
    pub fn metadata(&self) -> std::io::Result<std::fs::Metadata> {
        match &self.file {
            Some(f) => f.metadata(),
            None => std::fs::metadata(&self.path),
        }
    }

    /// [`WINDOW_NS`] in the trace's time units (TSC ticks are scaled by the clock records).
    fn window(&self) -> u64 {
        let source = self.trace.process.as_ref().map(|p| p.time_source).unwrap_or_default();
        let first = self.syncs.iter().min_by_key(|c| c.ticks).copied();
        let last = self.syncs.iter().max_by_key(|c| c.ticks).copied();
        heaplens_trace::clock::ns_in_units(source, first, last, WINDOW_NS).unwrap_or(WINDOW_NS)
    }

    /// Reads the blocks appended since the last call into the trace and the merger.
    /// Returns whether every block came no older than what was replayed.
    fn read(&mut self) -> Result<bool, LoadError> {
        let io = |reason| LoadError::Io { path: self.path.clone(), reason };
        if self.file.is_none() {
            self.file = Some(heaplens_trace::open_regular(&self.path).map_err(io)?);
        }
        let mut file = self.file.as_ref().expect("opened above");
        let mut reader = if self.offset == 0 {
            file.seek(SeekFrom::Start(0)).map_err(io)?;
            TraceReader::new(BufReader::new(file))
                .map_err(|reason| LoadError::Open { path: self.path.clone(), reason })?
        } else {
            file.seek(SeekFrom::Start(self.offset)).map_err(io)?;
            TraceReader::at_block(BufReader::new(file), self.offset)
        };
        let mut sink = Feed {
            merger: &mut self.merger,
            streams: &mut self.streams,
            tids: &mut self.tids,
            max_key: self.max_key,
            replayed: self.replayed,
            newest: &mut self.newest,
            in_order: true,
        };
        self.trace.read_more(&mut reader, None, &mut sink, &mut self.syncs).map_err(io)?;
        let in_order = sink.in_order;
        let st = reader.status();
        let h = &mut self.trace.health;
        h.blocks += st.blocks;
        h.corrupt_blocks += st.corrupt_blocks;
        h.truncated_at = st.truncated_at;
        // A block still being written is read again, whole, next time.
        let end = st.truncated_at.unwrap_or(st.offset);
        self.read += end.saturating_sub(self.offset);
        self.offset = end;
        Ok(in_order)
    }
}

/// Hands each Events payload read to the streaming merger.
struct Feed<'a> {
    merger: &'a mut Merger<'static>,
    streams: &'a mut HashMap<u32, u32>,
    tids: &'a mut Vec<u32>,
    max_key: (u64, u32),
    replayed: bool,
    newest: &'a mut u64,
    /// No block came older than what was replayed.
    in_order: bool,
}

impl Sink for Feed<'_> {
    fn clock(&mut self, c: ClockSync) {
        *self.newest = (*self.newest).max(c.ticks);
    }

    fn events(&mut self, _t: &mut Trace, tid: u32, payload: Vec<u8>, _offset: u64) {
        if let Some(ts) = crate::decode::payload::first_ts(&payload) {
            *self.newest = (*self.newest).max(ts);
        }
        let n = self.streams.len() as u32;
        let i = *self.streams.entry(tid).or_insert(n);
        if i == n {
            self.tids.push(tid);
        }
        self.in_order &= self.merger.push(i, Slot::new(payload), self.max_key, self.replayed);
    }
}

/// The pairing of [`crate::view::replay`], noting the largest (timestamp, stream) replayed
/// (what a block arriving later must not be older than).
struct Tracked<'v> {
    inner: Lifetimes<'v>,
    max_key: (u64, u32),
    replayed: bool,
}

impl Consumer for Tracked<'_> {
    fn begin_run(&mut self, stream: u32, first_ts: u64) -> u64 {
        self.inner.begin_run(stream, first_ts)
    }

    fn event(&mut self, e: &Event, last: &mut u64) {
        self.inner.event(e, last);
    }

    /// A run's latest event is its largest key (the report's replay notes it the same way).
    fn end_run(&mut self, stream: u32, last: u64, events: u64, last_ts: u64, max_ts: u64) {
        if events > 0 {
            self.max_key = self.max_key.max((max_ts, stream));
            self.replayed = true;
        }
        self.inner.end_run(stream, last, events, last_ts, max_ts);
    }
}
