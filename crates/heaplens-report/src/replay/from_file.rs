//! Replays that do not stream: a trace loaded whole, and the way back when the streaming
//! replay of `analyze.rs` gives up (a block older than what it replayed, or halves it could
//! not join): the trace replayed from its file again, one block per thread in memory
//! (`heaplens_interpret::merge::ondisk`).

use std::path::Path;

use heaplens_interpret::merge::ondisk::{BlockAt, DiskBlocks};
use heaplens_interpret::merge::Merger;
use heaplens_interpret::{LoadError, Trace};

use super::split::Split;
use super::{Replay, State};

/// Replays every event of trace `t`, loaded whole, weighting them by its sampling rate.
pub fn replay_trace(t: &Trace) -> Replay {
    let mut st = State::new(t.sample_rate());
    let mut m = Merger::borrowed(t.payloads());
    match st.replay_rest(&mut m, None) {
        Split::Joined => {}
        Split::Declined => st.run(&mut m, u64::MAX),
        Split::Failed => {
            st = State::new(t.sample_rate());
            m.rewind();
            st.run(&mut m, u64::MAX);
        }
    }
    st.add_malformed(m.malformed());
    st.finish(&t.clock)
}

/// Replays the events of the trace at `path` whose Events blocks are `blocks` (in file
/// order), with `t` the rest of the trace as the first pass read it.
///
/// # Errors
/// [`LoadError::Io`] when the file cannot be opened again.
pub(crate) fn replay(path: &Path, t: &Trace, blocks: &[BlockAt]) -> Result<Replay, LoadError> {
    let file = heaplens_trace::open_regular(path).map_err(|reason| LoadError::Io { path: path.into(), reason })?;
    let (mut m, _tids) = Merger::on_disk(std::sync::Arc::new(DiskBlocks::new(file)), blocks);
    let mut st = State::new(t.sample_rate());
    st.run(&mut m, u64::MAX);
    st.add_malformed(m.malformed());
    Ok(st.finish(&t.clock))
}
