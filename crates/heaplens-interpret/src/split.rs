//! The replay on two processors: one view replays the events before a cut in time, a second
//! the events from it on, at once, and the two are joined. A view whose work adds up (a
//! picture's pixels) then costs half the time on two processors, where the one-thread replay
//! ([`crate::view::replay_indexed`], or [`crate::threaded`] for a view on a thread of its own)
//! leaves the replay itself on one.
//!
//! Pairing across the cut is what the join settles: a block allocated before the cut and
//! released after it is live at the end of the earlier half, and its release is `unmatched`
//! in the later one. The join pairs them, in the later half's order, and hands them to
//! [`Joinable::join`].

use std::path::Path;
use std::sync::Arc;

use crate::live::LiveBlocks;
use crate::load::{LoadError, Trace};
use crate::merge::ondisk::DiskBlocks;
use crate::merge::Merger;
use crate::progress::Progress;
use crate::view::{Block, EventIndex, Lifetimes, Release, View};

/// Payload bytes below which a second thread costs more than it saves (the default of
/// [`replay_split`]'s `min_bytes`).
pub const MIN_BYTES: usize = 4 << 20;

/// A view that can be replayed in two halves at once and joined.
pub trait Joinable: View + Send {
    /// Folds `later` (the view of the events from the cut on) into `self` (the view of the
    /// events before it). `releases` are `later`'s [`View::unmatched`] calls of non-zero
    /// addresses, in order, each with the block it released when that block was allocated
    /// before the cut (it was live there, and `self` has seen its allocation). After the join
    /// the joined view gets [`View::overwritten`] for the blocks live at the cut whose
    /// addresses the later half allocated again without releasing them, then [`View::end`].
    fn join(&mut self, later: Self, releases: &[(Release, Option<Block>)]);
}

/// Which part of the events a view made for [`replay_split`] replays.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Half {
    /// All of them (the replay was not split).
    Whole,
    /// Those before the cut.
    Earlier,
    /// Those from the cut on: the view starts with what was live at the cut unknown.
    Later,
}

/// How [`replay_split`] ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ran {
    /// In two halves, cut at this time (`CLOCK_MONOTONIC` ns).
    Split(u64),
    /// On one thread: too few events, payloads out of time order, or a damaged payload where
    /// the halves meet.
    Whole,
}

/// Replays the trace `trace` (as a first pass read it, its Events blocks in `index`) into a
/// view made by `make` (told which events it gets), in two halves on two threads when its
/// Events payloads hold at least `min_bytes` (see [`MIN_BYTES`]), and
/// returns the joined view (which has had [`View::end`]) and `trace` with the damaged payloads
/// added to its health. A view sees what the one-thread replay shows it except for the order
/// of the joined releases, and for blocks whose release was not recorded, which the join may
/// leave live to the end where the one-thread replay would call them overwritten.
///
/// # Errors
/// [`LoadError::Io`] when the file cannot be opened again.
pub fn replay_split<V: Joinable>(
    path: &Path,
    mut t: Trace,
    index: &EventIndex,
    make: impl Fn(Half) -> V + Sync,
    progress: bool,
    min_bytes: usize,
) -> Result<(Trace, V, Ran), LoadError> {
    let size = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
    let file = heaplens_trace::open_regular(path).map_err(|reason| LoadError::Io { path: path.into(), reason })?;
    let disk = Arc::new(DiskBlocks::new(file));
    let bar = Progress::bytes(progress, size, "replaying");
    let (mut m, tids) = Merger::on_disk(disk.clone(), &index.blocks);
    let starts = m.payload_starts();
    if let Some(cut) = cut(&starts, min_bytes) {
        if let Some(tail) = m.tail(cut, &starts) {
            if let Some((view, malformed)) = halves(&mut m, tail, cut, &make, (&tids, &t, &bar, &disk)) {
                bar.finish();
                t.health.malformed_blocks += malformed;
                let at = t.clock.to_ns(cut);
                return Ok((t, view, Ran::Split(at)));
            }
            // Start again, on one thread.
            let (again, _) = Merger::on_disk(disk.clone(), &index.blocks);
            m = again;
        }
    }
    let mut view = make(Half::Whole);
    let mut l = Lifetimes::new(&mut view, t.clock, tids, &bar, Some(&disk));
    m.run(&mut l, u64::MAX);
    bar.finish();
    t.health.malformed_blocks += m.malformed();
    let live = std::mem::take(&mut l.live);
    view.end(&mut live.values());
    Ok((t, view, Ran::Whole))
}

/// Where to cut: the first timestamp of the payload at which half of the payload bytes lie
/// before (`None`: fewer than `min_bytes`, or no timestamps).
fn cut(starts: &[Vec<(Option<u64>, usize)>], min_bytes: usize) -> Option<u64> {
    let mut all: Vec<(u64, usize)> = starts.iter().flatten().filter_map(|&(ts, len)| ts.map(|ts| (ts, len))).collect();
    let total: usize = all.iter().map(|&(_, len)| len).sum();
    if total < min_bytes.max(1) {
        return None;
    }
    all.sort_unstable();
    let mut behind = 0;
    all.into_iter()
        .find(|&(_, len)| {
            behind += len;
            behind * 2 >= total
        })
        .map(|(ts, _)| ts)
        .filter(|&ts| ts > 0)
}

/// Replays `m` up to `cut` into the first view here and `tail` from it into the second on
/// another thread, and joins them; `None` when the halves do not meet exactly (the tail must start
/// where the head stopped) or a payload is damaged (both halves may have counted it). Each
/// thread makes its own view with `make` (a picture's canvas is tens of megabytes to zero).
fn halves<V: Joinable>(
    m: &mut Merger<'_>,
    mut tail: Merger<'_>,
    cut: u64,
    make: &(impl Fn(Half) -> V + Sync),
    (tids, t, bar, disk): (&[u32], &Trace, &Progress, &DiskBlocks),
) -> Option<(V, u64)> {
    let starts = tail.heads();
    let clock = t.clock;
    let (mut head, head_live, (later, tail_live, deferred, tail_malformed)) = std::thread::scope(|scope| {
        let other = std::thread::Builder::new()
            .name("heaplens-later".into())
            .spawn_scoped(scope, move || {
                let mut later = make(Half::Later);
                let mut l = Lifetimes::new(&mut later, clock, tids.to_vec(), bar, Some(disk));
                l.deferred = Some(Vec::new());
                tail.run(&mut l, u64::MAX);
                let (live, deferred) = (std::mem::take(&mut l.live), l.deferred.take().unwrap_or_default());
                (later, live, deferred, tail.malformed())
            })
            .expect("cannot start a thread");
        let mut head = make(Half::Earlier);
        let mut l = Lifetimes::new(&mut head, clock, tids.to_vec(), bar, Some(disk));
        m.run(&mut l, cut - 1);
        let live = std::mem::take(&mut l.live);
        (head, live, other.join().expect("the later half's replay panicked"))
    });
    if m.heads() != starts || tail_malformed > 0 {
        return None;
    }
    let mut live: LiveBlocks<Block> = head_live;
    let releases: Vec<(Release, Option<Block>)> =
        deferred.into_iter().map(|r| (r, live.remove(r.addr).copied())).collect();
    head.join(later, &releases);
    // Blocks live at the cut whose address holds a later block now were released unseen.
    let (overwritten, live): (Vec<Block>, Vec<Block>) =
        live.values().copied().partition(|b| tail_live.contains(b.addr));
    for b in &overwritten {
        head.overwritten(b);
    }
    head.end(&mut live.iter().chain(tail_live.values()));
    Some((head, m.malformed()))
}
