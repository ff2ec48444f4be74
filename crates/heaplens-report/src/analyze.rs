//! The pipeline: replay the events, symbolize the stacks that allocated, build the tables.
//!
//! [`analyze_file`] overlaps the stages on four threads: one reads and decompresses the file
//! (holding at most the payload budget, and decoding payloads ahead while it waits), the
//! calling thread replays events as they arrive (`heaplens_interpret::merge`), a third opens
//! module files and symbolizes the stack trie (`symbolize/cached.rs`) unless `heaplens run`
//! embedded the symbols in the trace (`symbolize/embedded.rs`), and a fourth makes the live
//! map's memory ahead (`replay/chunk.rs`).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::Arc;

use heaplens_trace::{ClockSync, ModuleRecord, ProcessRecord, StackNode, TimeSource};

use crate::model::Report;
use crate::replay::chunk::{ChunkSource, StopGuard};
use crate::replay::split::Split;
use crate::replay::{Replay, State};
use crate::tables::{bins, callgraph, direct, leaks, summary, Inputs};
use heaplens_interpret::decode::ahead::{Ahead, Slot, StopAhead};
use heaplens_interpret::load::{LoadError, Sink, Trace};
use heaplens_interpret::merge::ondisk::BlockAt;
use heaplens_interpret::merge::{Merger, WINDOW_NS};
use heaplens_interpret::paths::{resolve_attributed, Attribution, Naming};
use heaplens_interpret::progress::{Progress, Timing};
use heaplens_interpret::symbolize::cached::{symbolize_all, CachedSymbolizer, SymMsg, SymProgress};
use heaplens_interpret::symbolize::Symbolizer;

/// Choices that change the numbers of the report (not just its rendering).
#[derive(Debug, Clone)]
pub struct Options {
    /// Frames kept per leak-table path (mprof: 5).
    pub leak_depth: usize,
    /// Tell call sites within a function apart in the leak table.
    pub call_sites: bool,
    /// Show progress bars on stderr (only drawn when it is a terminal).
    pub progress: bool,
    /// Add the lifetime table ([`crate::lifetimes`]; a second pass over the trace).
    pub lifetimes: bool,
    /// Add mtrace++'s C++ tables ([`crate::cxx`]; a second pass over the trace, shared with
    /// the lifetimes').
    pub cxx: bool,
    /// How functions are named: by source line, with generics in full
    /// ([`heaplens_interpret::paths::Naming`]).
    pub naming: Naming,
    /// Which frame of a path is charged with its allocation
    /// ([`heaplens_interpret::paths::Attribution`]): by default the program's own innermost
    /// frame, past the runtime's and the standard library's.
    pub attribution: Attribution,
    /// Bytes of decompressed event payloads [`analyze_file`] holds at once (default 128 MiB):
    /// the reader waits for the replay beyond it, so memory does not grow with the trace.
    pub payload_budget: usize,
    /// Add the per-function and per-path [`crate::model::Profile`] that `heaplens diff`
    /// compares, with the bytes each held at the peak (a second pass over the events; paths of
    /// `leak_depth` frames).
    pub profile: bool,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            leak_depth: 5,
            call_sites: false,
            progress: false,
            lifetimes: false,
            cxx: false,
            naming: Naming::default(),
            attribution: Attribution::own_code(Vec::new()),
            payload_budget: heaplens_interpret::decode::budget::PAYLOAD_BUDGET,
            profile: false,
        }
    }
}

/// Analyses a loaded trace with the given symbolizer.
pub fn analyze(trace: &Trace, sym: &mut dyn Symbolizer, opts: &Options) -> Report {
    let r = match &trace.aggregate {
        Some(a) => crate::replay::aggregated::replay(a, &trace.clock),
        None => crate::replay::from_file::replay_trace(trace),
    };
    report(trace, &r, sym, opts, Second::default())
}

/// The profiled program's types by size, from its executable's DWARF when it is still here.
fn program_types(trace: &Trace) -> std::collections::BTreeMap<u64, std::collections::BTreeSet<String>> {
    match &trace.process {
        Some(p) if Path::new(&p.exe).is_file() => {
            heaplens_interpret::symbolize::types::types_by_size(Path::new(&p.exe))
        }
        _ => Default::default(),
    }
}

/// What the second pass over the events counted, when it was asked for.
#[derive(Default)]
struct Second<'a> {
    lifetimes: Option<&'a crate::lifetimes::Lifetimes>,
    cxx: Option<&'a crate::cxx::counts::CxxCounts>,
    peak: Option<&'a crate::peak::PeakByStack>,
}

/// The C++ tables, telling classes from namespaces by the executable's DWARF.
fn cxx_tables(
    trace: &Trace,
    counts: &crate::cxx::counts::CxxCounts,
    sym: &mut dyn Symbolizer,
    naming: Naming,
) -> crate::cxx::model::CxxTables {
    let scopes = match &trace.process {
        Some(p) if Path::new(&p.exe).is_file() => heaplens_interpret::symbolize::scopes::scopes(Path::new(&p.exe)),
        _ => Default::default(),
    };
    crate::cxx::tables::tables(counts, &trace.stacks, sym, naming, &|q| scopes.is_class(q))
}

/// Builds the report from the replay's counters.
fn report(trace: &Trace, r: &Replay, sym: &mut dyn Symbolizer, opts: &Options, second: Second<'_>) -> Report {
    let ids: Vec<u32> = r.stacks.iter().map(|s| s.stack).collect();
    let (frames, paths) = resolve_attributed(&trace.stacks, &ids, sym, opts.progress, opts.naming, &opts.attribution);
    let replaced = trace.end.is_some_and(|e| e.exec);
    let inp = Inputs { replay: r, frames: &frames, paths: &paths, replaced };
    let mut info = summary::trace_info(trace, r, paths.incomplete);
    info.symbol_warnings = sym.warnings();
    let suppressions = leaks::suppressions(inp, opts.attribution.suppressions.list());
    let mut summary = summary::summary(trace, r);
    // Suppressed blocks move out of the leaks; what the trace says was live stays exact.
    summary.suppressed_objects = suppressions.iter().map(|s| s.blocks).sum::<u64>().min(summary.leaked_objects);
    summary.suppressed_bytes = suppressions.iter().map(|s| s.bytes).sum::<u64>().min(summary.leaked_bytes);
    summary.leaked_objects -= summary.suppressed_objects;
    summary.leaked_bytes -= summary.suppressed_bytes;
    let profile = opts.profile.then(|| {
        // A run that recorded every event and never held a byte has its peak known: none.
        let none = heaplens_interpret::idmap::IdMap::default();
        let every_event = info.sample_rate == 0 && !info.aggregated;
        let at_peak = second.peak.and_then(|p| p.at_peak.as_ref());
        let at_peak = at_peak.or((every_event && summary.peak_bytes == 0).then_some(&none));
        crate::tables::profile::profile(inp, at_peak, opts.leak_depth)
    });
    Report {
        trace: info,
        process: summary::process_info(trace),
        summary,
        leaks: leaks::leaks(inp, opts.leak_depth, opts.call_sites, false),
        suppressed_leaks: leaks::leaks(inp, opts.leak_depth, opts.call_sites, true),
        suppressions,
        bins: bins::bins(&r.bins, &program_types(trace)),
        direct: direct::direct(inp),
        call_graph: callgraph::call_graph(inp),
        lifetimes: second.lifetimes.map(|l| crate::tables::lifetimes::lifetimes(inp, &l.stacks)),
        cxx: second.cxx.map(|c| cxx_tables(trace, c, sym, opts.naming)),
        profile,
    }
}

/// Loads the trace at `path` and analyses it, symbolizing from the module files the trace
/// names (they must still be on this machine for names to resolve). Gives the same report as
/// [`Trace::load`] followed by [`analyze`] with an [`crate::ElfSymbolizer`], faster.
///
/// # Errors
/// [`LoadError`] when the file cannot be read or is not a heaplens trace.
pub fn analyze_file(path: &Path, opts: &Options) -> Result<Report, LoadError> {
    let timing = Timing::start();
    let tm = |stage: &str| timing.mark(stage);
    let size = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
    let bar = Progress::bytes(opts.progress, size, "reading trace");
    let sym_progress = Arc::new(SymProgress::default());
    // Set by the reader thread once every block is sent on to the replay.
    let file_read = Arc::new(AtomicBool::new(false));
    let (trace, replay, results) = std::thread::scope(|scope| {
        let (ev_tx, ev_rx) = mpsc::channel();
        let (sym_tx, sym_rx) = mpsc::channel();
        let p = sym_progress.clone();
        let symbolizer = std::thread::Builder::new()
            .name("heaplens-symbols".into())
            .spawn_scoped(scope, move || match heaplens_interpret::symbolize::embedded::read(path) {
                // Symbolized while the program ran: nothing to do but let the reader go on.
                Some(Ok(r)) => {
                    sym_rx.into_iter().for_each(drop);
                    (r, false)
                }
                // Damaged: symbolized from the module files, as if they were not there.
                Some(Err(_)) => (symbolize_all(sym_rx, p), true),
                None => (symbolize_all(sym_rx, p), false),
            })
            .expect("cannot start a thread");
        let bar = &bar;
        let chunks = Arc::new(ChunkSource::default());
        let c = chunks.clone();
        let filler = std::thread::Builder::new()
            .name("heaplens-chunks".into())
            .spawn_scoped(scope, move || c.fill())
            .expect("cannot start a thread");
        let stop_chunks = StopGuard(chunks.clone());
        let ahead = Arc::new(Ahead::with_budget(opts.payload_budget));
        let read = file_read.clone();
        let stop_ahead = StopAhead(ahead.clone());
        let a = ahead.clone();
        let loader = std::thread::Builder::new()
            .name("heaplens-reader".into())
            .spawn_scoped(scope, move || {
                let mut sink = PipeSink {
                    ev_tx,
                    sym_tx: Some(sym_tx),
                    slots: Vec::new(),
                    ahead: &a,
                    blocks: Vec::new(),
                    decoded_to: 0,
                };
                let t = Trace::load_into(path, Some(bar), &mut sink);
                read.store(true, Ordering::Release);
                // The symbols can be finished now.
                sink.sym_tx = None;
                tm("file read");
                let blocks = std::mem::take(&mut sink.blocks);
                let _ = sink.ev_tx.send(Msg::Done(Box::new(t.map(|t| (t, blocks)))));
                a.decode(&sink.slots);
            })
            .expect("cannot start a thread");
        let (streamed, trace) = stream_replay(ev_rx, file_read.clone(), chunks.clone(), ahead);
        let mut how = "aggregated";
        let replayed = trace.and_then(|(t, blocks)| {
            let r = match &t.aggregate {
                Some(a) => crate::replay::aggregated::replay(a, &t.clock),
                None => match streamed.finish(&t) {
                    Some((r, split)) => {
                        how = if split == Split::Joined { "streamed, the rest on two threads" } else { "streamed" };
                        r
                    }
                    None => {
                        how = "from the file again, after the streaming replay gave up";
                        crate::replay::from_file::replay(path, &t, &blocks)?
                    }
                },
            };
            Ok((t, r))
        });
        tm(&format!("replay done ({how})"));
        drop(stop_ahead);
        drop(stop_chunks);
        filler.join().expect("the chunk thread panicked");
        loader.join().expect("the reader thread panicked");
        bar.finish();
        if opts.progress {
            // Symbols usually are ready before the replay; when not, show how far they are.
            let mut sbar = None;
            while !symbolizer.is_finished() {
                if sym_progress.started.load(Ordering::Acquire) {
                    let total = sym_progress.total.load(Ordering::Relaxed);
                    let b = sbar.get_or_insert_with(|| Progress::items(total > 1000, total, "symbolizing"));
                    b.set(sym_progress.done.load(Ordering::Relaxed));
                }
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            if let Some(b) = sbar {
                b.finish();
            }
        }
        let results = symbolizer.join().expect("the symbolizer thread panicked");
        tm("symbols done");
        replayed.map(|(t, r)| (t, r, results))
    })?;
    let (results, damaged_symbols) = results;
    let mut sym = CachedSymbolizer::new(results);
    // The lifetimes and the C++ tables need events in time order: one more pass, shared.
    let events = trace.aggregate.is_none();
    let mut lifetimes = (opts.lifetimes && events).then(crate::lifetimes::Lifetimes::default);
    let mut cxx = (opts.cxx && events).then(|| crate::cxx::counts::CxxCounts::new(trace.sample_rate()));
    // A sampled trace's live bytes are samples, not the peak's bytes: no peak per stack there.
    let sampled = trace.sample_rate() > 0;
    let mut peak = (opts.profile && events && !sampled)
        .then(|| crate::peak::PeakByStack::new(crate::tables::count(replay.peak_bytes)));
    if lifetimes.is_some() || cxx.is_some() || peak.is_some() {
        let mut views = (&mut lifetimes, (&mut cxx, &mut peak));
        heaplens_interpret::view::replay_with_progress(path, &mut views, opts.progress)?;
        tm("second pass done");
    }
    let second = Second { lifetimes: lifetimes.as_ref(), cxx: cxx.as_ref(), peak: peak.as_ref() };
    let mut r = report(&trace, &replay, &mut sym, opts, second);
    if damaged_symbols {
        r.trace.malformed_blocks += 1;
        r.trace.symbol_warnings.insert(0, DAMAGED_SYMBOLS.into());
    }
    tm("tables done");
    Ok(r)
}

/// The warning for a trace whose embedded Symbols block passed its checksum but does not
/// decode (a string, frame or module index past its tables).
pub const DAMAGED_SYMBOLS: &str =
    "the symbols embedded in the trace are damaged: symbolized from the module files instead";

/// What the reader thread sends to the replay.
enum Msg {
    Process(u64, TimeSource, u32),
    Clock(ClockSync),
    /// A thread's payload, and the timestamp of its first event.
    Events(u32, Option<u64>, Arc<Slot>),
    /// The payloads passed on fill the budget: the reader waits until the replay releases some.
    Full,
    /// The whole file is read, and where its Events blocks are.
    Done(Box<Result<(Trace, Vec<BlockAt>), LoadError>>),
}

struct PipeSink<'a> {
    ahead: &'a Ahead,
    ev_tx: Sender<Msg>,
    sym_tx: Option<Sender<SymMsg>>,
    /// Every payload sent, for decoding them ahead once the file is read.
    slots: Vec<Arc<Slot>>,
    /// Where they are in the file, for replaying from it again (`ondisk.rs`).
    blocks: Vec<BlockAt>,
    /// `slots[..decoded_to]` were considered for decoding ahead while the budget was full.
    decoded_to: usize,
}

impl Sink for PipeSink<'_> {
    fn events(&mut self, _t: &mut Trace, tid: u32, payload: Vec<u8>, offset: u64) {
        let at = BlockAt::new(tid, offset, &payload);
        self.blocks.push(at);
        let first = at.first_ts;
        let budget = &self.ahead.budget;
        if !budget.fits(payload.len()) {
            let _ = self.ev_tx.send(Msg::Full);
            // Meanwhile, do some of the replay's work: decode payloads it has not reached.
            while !budget.fits(payload.len()) {
                if !self.ahead.decode_one_more(&self.slots, &mut self.decoded_to) {
                    budget.wait_for_room(std::time::Duration::from_millis(1));
                }
            }
        }
        let slot = self.ahead.pass(payload);
        self.slots.push(slot.clone());
        let _ = self.ev_tx.send(Msg::Events(tid, first, slot));
    }
    fn process(&mut self, p: &ProcessRecord) {
        let _ = self.ev_tx.send(Msg::Process(p.sample_rate, p.time_source, p.pid));
    }
    fn clock(&mut self, c: ClockSync) {
        let _ = self.ev_tx.send(Msg::Clock(c));
    }
    fn modules(&mut self, m: &[ModuleRecord]) {
        if let Some(tx) = &self.sym_tx {
            let _ = tx.send(SymMsg::Modules(m.to_vec()));
        }
    }
    fn stacks(&mut self, n: &[StackNode]) {
        if let Some(tx) = &self.sym_tx {
            let _ = tx.send(SymMsg::Addrs(n.iter().map(|n| n.addr).collect()));
        }
    }
}

/// The replay as the reader thread delivers the blocks.
///
/// While the only thread seen is the process's main thread, every event is replayed as soon
/// as it arrives, and the payloads are kept: a block of another thread may yet come with
/// older events, and then the replay starts again from the first event, once. From then on, or
/// once another thread shows up in order, events are replayed up to [`WINDOW_NS`] behind the
/// newest block, and payloads are released as they are replayed, so a block that still breaks
/// the merge order ends the streaming replay: the trace is replayed from the file again once read,
/// one block per thread at a time (`replay/from_file.rs`; as is one whose halves could not be
/// joined, see `split.rs`).
struct Streamed {
    merger: Merger<'static>,
    state: Option<State>,
    /// False once a block arrived that the streaming replay had assumed could not.
    in_order: bool,
    /// Only the main thread seen so far, and the replay never started again.
    alone: bool,
    chunks: Arc<ChunkSource>,
}

impl Streamed {
    /// Finishes the replay once the whole trace is read; `None` when the trace must be replayed
    /// again from the start.
    fn finish(mut self, t: &Trace) -> Option<(Replay, Split)> {
        let rate = t.sample_rate();
        let mut st = match self.state.take() {
            Some(st) if self.in_order && st.sample_rate() == rate => st,
            _ => return None,
        };
        self.merger.interrupt_on(None);
        let split = st.replay_rest(&mut self.merger, Some(&self.chunks));
        match split {
            Split::Joined => {}
            Split::Declined => st.run(&mut self.merger, u64::MAX),
            Split::Failed => return None,
        }
        st.add_malformed(self.merger.malformed());
        Some((st.finish(&t.clock), split))
    }

    /// Another thread than the main one showed up: from now on, replay a window behind and
    /// release payloads.
    fn not_alone(&mut self) {
        self.alone = false;
        self.merger.keep_payloads(false);
    }

    /// A block broke the order: replay again from the start while the payloads are all kept,
    /// else give up streaming, and what was kept for it.
    fn out_of_order(&mut self) {
        match self.state.as_mut() {
            Some(st) if self.alone => {
                *st = State::with_chunks(st.sample_rate(), &self.chunks);
                self.merger.rewind();
                self.not_alone();
            }
            _ => self.give_up(),
        }
    }

    /// Ends the streaming replay: the trace is replayed from the file once read (`ondisk.rs`).
    /// Releases every payload, so that the reader does not wait for room any more.
    fn give_up(&mut self) {
        self.in_order = false;
        self.state = None;
        self.merger.release_all();
        self.merger = Merger::streaming(self.merger.ahead());
    }
}

fn stream_replay(
    rx: Receiver<Msg>,
    read: Arc<AtomicBool>,
    chunks: Arc<ChunkSource>,
    ahead: Arc<Ahead>,
) -> (Streamed, Result<(Trace, Vec<BlockAt>), LoadError>) {
    let mut s = Streamed { merger: Merger::streaming(ahead), state: None, in_order: true, alone: true, chunks };
    s.merger.interrupt_on(Some(read.clone()));
    s.merger.keep_payloads(true);
    let mut pid = None;
    let mut done = None;
    let mut index: HashMap<u32, u32> = HashMap::new();
    let mut source = TimeSource::MonotonicNs;
    let (mut first_sync, mut last_sync): (Option<ClockSync>, Option<ClockSync>) = (None, None);
    let mut newest = 0u64;
    let budget = s.merger.ahead().budget.clone();
    let mut pending = None;
    while done.is_none() {
        // Not a plain `recv`: the reader may be waiting for the replay to release payloads.
        let msg = match pending.take().map_or_else(|| rx.recv_timeout(std::time::Duration::from_millis(20)), Ok) {
            Ok(msg) => msg,
            Err(mpsc::RecvTimeoutError::Timeout) => Msg::Full,
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        };
        let mut next = Some(msg);
        while let Some(msg) = next.take() {
            match msg {
                Msg::Done(t) => done = Some(*t),
                // The reader waits (or soon will) for room: see below.
                Msg::Full => {}
                Msg::Process(rate, src, p) => {
                    source = src;
                    pid = Some(p);
                    match &s.state {
                        None => s.state = Some(State::with_chunks(rate, &s.chunks)),
                        Some(st) => s.in_order &= st.sample_rate() == rate,
                    }
                }
                Msg::Clock(c) => {
                    if first_sync.is_none_or(|f| c.ticks < f.ticks) {
                        first_sync = Some(c);
                    }
                    if last_sync.is_none_or(|l| c.ticks > l.ticks) {
                        last_sync = Some(c);
                    }
                }
                Msg::Events(tid, first, payload) => {
                    let n = index.len() as u32;
                    let i = *index.entry(tid).or_insert(n);
                    if let Some(ts) = first {
                        newest = newest.max(ts);
                    }
                    let (max_key, replayed) =
                        s.state.as_ref().map_or(((0, 0), false), |st| (st.max_key(), st.replayed()));
                    if !s.in_order {
                        // Replayed again from the file later (`ondisk.rs`): hold nothing.
                        payload.release();
                    } else if !s.merger.push(i, payload, max_key, replayed) {
                        s.out_of_order();
                    }
                    if s.alone && pid != Some(tid) {
                        s.not_alone();
                    }
                }
            }
            // Once the whole file is read, take every payload in before replaying further, so
            // that the rest of the replay can be split in two (`split.rs`).
            next = match () {
                _ if done.is_some() => None,
                _ if read.load(Ordering::Acquire) => rx.recv().ok(),
                _ => rx.try_recv().ok(),
            };
        }
        if !s.in_order || done.is_some() {
            continue;
        }
        if s.alone && budget.held() > budget.limit() / 2 {
            // Kept for a replay from the start, the payloads would fill the budget: replay
            // a window behind from now on, as with several threads.
            s.not_alone();
        }
        if s.state.is_none() && budget.reader_waits() {
            // No Process block (a damaged trace) before the budget is full: nothing can be
            // replayed before the file is read.
            s.give_up();
            continue;
        }
        let Some(st) = s.state.as_mut() else { continue };
        if s.alone {
            st.run(&mut s.merger, u64::MAX);
            continue;
        }
        // Events up to a window behind the newest block: a thread's block, even a new thread's
        // first, is written within the monitor's sweep period of its first event, so nothing
        // older can come any more.
        let window = heaplens_trace::clock::ns_in_units(source, first_sync, last_sync, WINDOW_NS);
        let horizon = window.map(|w| newest.saturating_sub(w));
        if let Some(h) = horizon {
            st.run(&mut s.merger, h);
        }
        if budget.reader_waits() {
            // Blocks that came while replaying are taken in first: they may move the window.
            if let Ok(msg) = rx.try_recv() {
                pending = Some(msg);
                continue;
            }
            // The window holds more than the budget: narrow it to the newest block, and to
            // nothing if that is not enough (a block older than that then ends the streaming
            // replay, and the trace is replayed from the file, see `ondisk.rs`).
            st.run(&mut s.merger, newest);
            if budget.reader_waits() {
                st.run(&mut s.merger, u64::MAX);
            }
        }
    }
    let t = done.unwrap_or_else(|| {
        Err(LoadError::Io { path: PathBuf::new(), reason: std::io::Error::other("the reader thread stopped") })
    });
    (s, t)
}
