//! Replaying a trace from its file one block per thread at a time: the way back when the
//! streaming replay (see `analyze.rs`) meets a block older than what it replayed already, or
//! cannot join its two halves (see `split.rs`). The first pass noted where each thread's
//! Events blocks are; this one merges the threads by reading, for each, its next block only
//! when its events are reached. It holds one payload per thread, whatever the trace's length
//! and however unevenly its threads' blocks are spread over the file, at the cost of a second
//! pass over the file on one processor.

use std::fs::File;
use std::io::Read;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicU64, Ordering};

use heaplens_trace::{BlockKind, TraceReader};

use crate::decode::payload::{tagged, COLUMNS, ROWS};

/// Where an Events block starts in the file, its thread, and what a replay cut in two needs
/// to know of it without reading it again (see [`crate::merge::Merger::tail`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockAt {
    /// The thread id of the payload.
    pub tid: u32,
    /// The block's byte offset in the file.
    pub offset: u64,
    /// The timestamp of its first event, in the trace's units (`None`: it has none).
    pub first_ts: Option<u64>,
    /// The payload's size, bytes.
    pub len: usize,
}

impl BlockAt {
    /// The block at `offset` of thread `tid`, whose payload (tagged, as a [`crate::load::Sink`]
    /// is given it) is `payload`.
    pub fn new(tid: u32, offset: u64, payload: &[u8]) -> BlockAt {
        BlockAt { tid, offset, first_ts: crate::decode::payload::first_ts(payload), len: payload.len() }
    }
}

/// The trace file, read block by block at known offsets.
pub struct DiskBlocks {
    file: File,
    /// The end of the last block read (for a progress bar).
    reached: AtomicU64,
}

/// `Read` over a file from a position, without moving a shared file position.
struct ReadAt<'a> {
    file: &'a File,
    pos: u64,
}

impl Read for ReadAt<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.file.read_at(buf, self.pos)?;
        self.pos += n as u64;
        Ok(n)
    }
}

impl DiskBlocks {
    /// Blocks read from `file`, a trace.
    pub fn new(file: File) -> Self {
        DiskBlocks { file, reached: AtomicU64::new(0) }
    }

    /// How far into the file blocks were read (the end of the furthest), bytes.
    pub fn reached(&self) -> u64 {
        self.reached.load(Ordering::Relaxed)
    }

    /// The Events payload of the block at `offset` (tagged with its layout, see
    /// `decode.rs`); `None` when there is no intact Events block there any more (the file
    /// changed since it was first read).
    pub fn payload(&self, offset: u64) -> Option<Vec<u8>> {
        let mut r = TraceReader::at_block(ReadAt { file: &self.file, pos: offset }, offset);
        let (kind, payload) = r.next_block().ok()??;
        if r.status().last_block != offset {
            return None;
        }
        self.reached.fetch_max(r.status().offset, Ordering::Relaxed);
        match kind {
            BlockKind::Events => Some(tagged(payload, ROWS)),
            BlockKind::EventColumns => Some(tagged(payload, COLUMNS)),
            _ => None,
        }
    }
}
