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
    let mut sink = Scan { f, pool: CursorPool::default(), malformed: 0, blocks: Vec::new() };
    let t = Trace::load_into(path, Some(&bar), &mut sink)?;
    bar.finish();
    if t.aggregate.is_some() {
        return Err(LoadError::NoEvents { path: path.into() });
    }
    Ok((t, sink.malformed, sink.blocks))
}

struct Scan<'f> {
    f: &'f mut dyn FnMut(&Event),
    pool: CursorPool,
    malformed: u64,
    blocks: Vec<BlockAt>,
}

impl Sink for Scan<'_> {
    fn events(&mut self, _t: &mut Trace, tid: u32, payload: Vec<u8>, offset: u64) {
        self.blocks.push(BlockAt { tid, offset });
        let mut c = Cursor::open(&payload, &mut self.pool);
        while let Some(e) = c.next_event() {
            (self.f)(&e);
        }
        if c.close(&mut self.pool) {
            self.malformed += 1;
        }
    }
}
