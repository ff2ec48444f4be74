//! A cheaper pass than the replay, for views that only sum over events: every event of the
//! trace in file order (each thread's in its own order, the threads interleaved as their blocks
//! lie in the file), decoded as the file is read, with no merge across threads and no pairing
//! of releases with allocations. A picture's first pass (address ranges, bytes per stack, the
//! time span) needs no more.

use std::path::Path;

use heaplens_trace::Event;

use crate::decode::{Cursor, CursorPool};
use crate::load::{LoadError, Sink, Trace};
use crate::progress::Progress;

/// Calls `f` with every event of the trace at `path`, and returns the rest of the trace as
/// read. Timestamps are the trace's own units: [`Trace::clock`] turns them into nanoseconds
/// (it is known only once the file is read, and it keeps their order).
///
/// # Errors
/// [`LoadError`] when the file cannot be read or is not a heaplens trace, and
/// [`LoadError::NoEvents`] for a trace recorded with `--aggregate`.
pub fn scan(path: &Path, f: &mut dyn FnMut(&Event), progress: bool) -> Result<Trace, LoadError> {
    let size = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
    let bar = Progress::bytes(progress, size, "scanning trace");
    let mut sink = Scan { f, pool: CursorPool::default(), malformed: 0 };
    let mut t = Trace::load_into(path, Some(&bar), &mut sink)?;
    bar.finish();
    if t.aggregate.is_some() {
        return Err(LoadError::NoEvents { path: path.into() });
    }
    t.health.malformed_blocks += sink.malformed;
    Ok(t)
}

struct Scan<'f> {
    f: &'f mut dyn FnMut(&Event),
    pool: CursorPool,
    malformed: u64,
}

impl Sink for Scan<'_> {
    fn events(&mut self, _t: &mut Trace, _tid: u32, payload: Vec<u8>, _offset: u64) {
        let mut c = Cursor::open(&payload, &mut self.pool);
        while let Some(e) = c.next_event() {
            (self.f)(&e);
        }
        if c.close(&mut self.pool) {
            self.malformed += 1;
        }
    }
}
