//! A cheaper pass than the replay, for views that only sum over events: every event of the
//! trace in file order (each thread's in its own order, the threads interleaved as their blocks
//! lie in the file), decoded as the file is read, with no merge across threads and no pairing
//! of releases with allocations. A picture's first pass (address ranges, bytes per stack, the
//! time span) needs no more.

use std::path::Path;

use heaplens_trace::Event;

use crate::decode::{Cursor, CursorPool};
use crate::load::{LoadError, Sink, Trace};
use crate::merge::ondisk::BlockAt;
use crate::progress::Progress;
use crate::view::EventIndex;

/// What a scan sums its events into ([`scan_split`]). Implementations mark `event`
/// `#[inline(always)]`: it is then compiled into the decoding loop, and the event's fields stay
/// in registers. Called per event through a closure, it was not inlined, and a map's first pass
/// took 1.56 times the drawing replay's decoding instead of 1.10 (a profile of 10^8 events).
pub trait Scanner {
    /// Adds one event.
    fn event(&mut self, e: &Event);
}

/// Any closure over events is a scanner.
impl<F: FnMut(&Event) + ?Sized> Scanner for F {
    #[inline(always)]
    fn event(&mut self, e: &Event) {
        self(e)
    }
}

/// Calls `f` with every event of the trace at `path`, and returns the rest of the trace as
/// read. Timestamps are the trace's own units: [`Trace::clock`] turns them into nanoseconds
/// (it is known only once the file is read, and it keeps their order).
///
/// # Errors
/// [`LoadError`] when the file cannot be read or is not a heaplens trace, and
/// [`LoadError::NoEvents`] for a trace recorded with `--aggregate`.
pub fn scan(path: &Path, f: &mut dyn FnMut(&Event), progress: bool) -> Result<Trace, LoadError> {
    let (mut t, malformed, _) = scan_into(path, f, progress)?;
    t.health.malformed_blocks += malformed;
    Ok(t)
}

/// [`scan`], and where the Events blocks lie, for a replay after it
/// ([`crate::view::replay_indexed`]) that then reads the file once instead of twice. The
/// trace's health leaves out the damaged payloads: the replay counts them.
///
/// # Errors
/// As [`scan`].
pub fn scan_indexed(path: &Path, f: &mut dyn FnMut(&Event), progress: bool) -> Result<(Trace, EventIndex), LoadError> {
    let (t, _, blocks) = scan_into(path, f, progress)?;
    Ok((t, EventIndex { blocks }))
}

fn scan_into(path: &Path, f: &mut dyn FnMut(&Event), progress: bool) -> Result<(Trace, u64, Vec<BlockAt>), LoadError> {
    let size = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
    let bar = Progress::bytes(progress, size, "scanning trace");
    let mut sink = Scan { f, pool: CursorPool::default(), malformed: 0, blocks: Vec::new(), to: None };
    let t = Trace::load_into(path, Some(&bar), &mut sink)?;
    bar.finish();
    if t.aggregate.is_some() {
        return Err(LoadError::NoEvents { path: path.into() });
    }
    Ok((t, sink.malformed, sink.blocks))
}

/// [`scan_indexed`] on two processors: this thread reads the file and a second decodes
/// payloads whenever it is free, this thread the others. Each event goes to the scanner of the
/// thread that decoded it (`states[0]` here, `states[1]` there), so a view that sums over
/// events gets two partial sums to add up; a payload's events stay together and in order, but
/// payloads reach the two states in no set order.
///
/// # Errors
/// As [`scan`].
pub fn scan_split<S: Scanner + Send>(
    path: &Path,
    states: [S; 2],
    progress: bool,
) -> Result<(Trace, EventIndex, [S; 2]), LoadError> {
    let size = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
    let bar = Progress::bytes(progress, size, "scanning trace");
    let [mut mine, theirs] = states;
    let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<u8>>(4);
    let (loaded, theirs) = std::thread::scope(|scope| {
        let worker = std::thread::Builder::new()
            .name("heaplens-scan".into())
            .spawn_scoped(scope, move || {
                let mut st = theirs;
                let mut pool = CursorPool::default();
                for payload in rx {
                    decode(&payload, &mut pool, &mut st);
                }
                st
            })
            .expect("cannot start a thread");
        let mut sink =
            Scan { f: &mut mine, pool: CursorPool::default(), malformed: 0, blocks: Vec::new(), to: Some(tx) };
        let loaded = Trace::load_into(path, Some(&bar), &mut sink);
        sink.to = None;
        let (malformed, blocks) = (sink.malformed, sink.blocks);
        (loaded.map(|t| (t, malformed, blocks)), worker.join().expect("the scan's thread panicked"))
    });
    bar.finish();
    let (t, _, blocks) = loaded?;
    if t.aggregate.is_some() {
        return Err(LoadError::NoEvents { path: path.into() });
    }
    Ok((t, EventIndex { blocks }, [mine, theirs]))
}

/// Gives `f` the events of `payload`; whether it was malformed. Row payloads (the layout of a
/// busy program's trace) decode straight into `f`, without a vector of events between.
fn decode<S: Scanner + ?Sized>(payload: &[u8], pool: &mut CursorPool, f: &mut S) -> bool {
    struct Each<'f, S: ?Sized>(&'f mut S);
    impl<S: Scanner + ?Sized> crate::decode::rows::Push for Each<'_, S> {
        #[inline(always)]
        fn push_event(&mut self, e: Event) {
            self.0.event(&e)
        }
    }
    match crate::decode::payload::untag(payload) {
        (d, crate::decode::payload::ROWS) => crate::decode::rows::decode_all(d, &mut Each(f)),
        _ => {
            let mut c = Cursor::open(payload, pool);
            while let Some(e) = c.next_event() {
                f.event(&e);
            }
            c.close(pool)
        }
    }
}

struct Scan<'f, F: Scanner + ?Sized> {
    f: &'f mut F,
    pool: CursorPool,
    malformed: u64,
    blocks: Vec<BlockAt>,
    /// Another thread decoding payloads when it is free ([`scan_split`]).
    to: Option<std::sync::mpsc::SyncSender<Vec<u8>>>,
}

impl<F: Scanner + ?Sized> Sink for Scan<'_, F> {
    fn events(&mut self, _t: &mut Trace, tid: u32, payload: Vec<u8>, offset: u64) {
        self.blocks.push(BlockAt::new(tid, offset, &payload));
        let payload = match &self.to {
            Some(to) => match to.try_send(payload) {
                Ok(()) => return,
                Err(std::sync::mpsc::TrySendError::Full(p) | std::sync::mpsc::TrySendError::Disconnected(p)) => p,
            },
            None => payload,
        };
        if decode(&payload, &mut self.pool, self.f) {
            self.malformed += 1;
        }
    }
}
