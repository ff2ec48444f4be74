//! The replay and its view on two threads: the replay (reading, decoding, merging, pairing)
//! hands the view's calls over in batches, so a view with heavy work of its own (drawing a
//! picture) overlaps with it instead of adding to it.

use std::path::Path;
use std::sync::mpsc;

use crate::load::{LoadError, Trace};
use crate::view::{replay_with_progress, Block, Release, View};

/// Calls handed over at once.
const BATCH: usize = 4096;

/// A call of [`View`], as data.
enum Call {
    Allocation(Block),
    Deallocation(Release, Block),
    Failed(Block),
    Unmatched(Release),
    Overwritten(Block),
    End(Vec<Block>),
}

/// [`replay_with_progress`], with `view` run on a thread of its own. It sees the same calls
/// in the same order.
///
/// # Errors
/// As [`crate::view::replay`].
pub fn replay_threaded<V: View + Send>(path: &Path, view: &mut V, progress: bool) -> Result<Trace, LoadError> {
    run_threaded(view, |v| replay_with_progress(path, v, progress))
}

/// Runs `replay` (a replay into the view it is given) with `view` on a thread of its own.
///
/// # Errors
/// `replay`'s.
pub fn run_threaded<V: View + Send>(
    view: &mut V,
    replay: impl FnOnce(&mut dyn View) -> Result<Trace, LoadError>,
) -> Result<Trace, LoadError> {
    std::thread::scope(|s| {
        let (tx, rx) = mpsc::sync_channel::<Vec<Call>>(8);
        let worker = s.spawn(move || {
            for batch in rx {
                for call in batch {
                    match call {
                        Call::Allocation(b) => view.allocation(&b),
                        Call::Deallocation(r, b) => view.deallocation(&r, &b),
                        Call::Failed(b) => view.failed_allocation(&b),
                        Call::Unmatched(r) => view.unmatched(&r),
                        Call::Overwritten(b) => view.overwritten(&b),
                        Call::End(live) => view.end(&mut live.iter()),
                    }
                }
            }
        });
        let mut fwd = Forward { tx: Some(tx), batch: Vec::with_capacity(BATCH) };
        let result = replay(&mut fwd);
        fwd.flush();
        drop(fwd);
        worker.join().expect("the view's thread panicked");
        result
    })
}

/// The replay's side: batches the calls.
struct Forward {
    tx: Option<mpsc::SyncSender<Vec<Call>>>,
    batch: Vec<Call>,
}

impl Forward {
    fn push(&mut self, c: Call) {
        self.batch.push(c);
        if self.batch.len() >= BATCH {
            self.flush();
        }
    }

    fn flush(&mut self) {
        if self.batch.is_empty() {
            return;
        }
        let batch = std::mem::replace(&mut self.batch, Vec::with_capacity(BATCH));
        // The view's thread only stops by panicking; its panic is raised at the join.
        if let Some(tx) = &self.tx {
            if tx.send(batch).is_err() {
                self.tx = None;
            }
        }
    }
}

impl View for Forward {
    fn allocation(&mut self, b: &Block) {
        self.push(Call::Allocation(*b));
    }
    fn deallocation(&mut self, r: &Release, b: &Block) {
        self.push(Call::Deallocation(*r, *b));
    }
    fn failed_allocation(&mut self, b: &Block) {
        self.push(Call::Failed(*b));
    }
    fn unmatched(&mut self, r: &Release) {
        self.push(Call::Unmatched(*r));
    }
    fn overwritten(&mut self, b: &Block) {
        self.push(Call::Overwritten(*b));
    }
    fn end(&mut self, live: &mut dyn Iterator<Item = &Block>) {
        let live: Vec<Block> = live.copied().collect();
        self.push(Call::End(live));
    }
}
