//! Symbols resolved while the program runs, and embedded in its trace.
//!
//! `heaplens run` follows the trace as the monitor writes it and symbolizes every return
//! address of the stack trie as its nodes arrive ([`symbolize_while_written`]), on the
//! processor the program leaves idle, as heaptrack's interpreter does. Once the program has
//! ended it appends the table ([`append`]). A report then reads it first ([`read`]) and
//! symbolizes nothing: the report costs less, and it is the same on a machine without the
//! program's files or their debug info, or after they were rebuilt.

use std::fs::{File, OpenOptions};
use std::io::{self, BufReader, Seek, SeekFrom};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

use heaplens_trace::symbols::INDEX_BLOCK_LEN;
use heaplens_trace::{
    BlockKind, BlockWriter, Codec, Malformed, ModuleRecord, ProcessRecord, StackNode, SymbolTable, TraceReader,
    FILE_HEADER_LEN, MAGIC,
};

use super::cached::{symbolize_all, SymMsg, SymProgress, SymResults};

/// How often the file is looked at for new blocks while the program runs.
const POLL: Duration = Duration::from_millis(20);

/// [`symbolize_while_written`] on a thread of its own ("heaplens-symbols"), for as long as the
/// program writes its trace: started with [`OnTheSide::start`], told the program ended and
/// waited for with [`OnTheSide::finish`].
pub struct OnTheSide {
    ended: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<Option<SymbolTable>>>,
}

impl OnTheSide {
    /// Starts symbolizing the trace at `path` of process `pid` as it is written (no thread,
    /// and no table in the end, if none can be started).
    pub fn start(path: &Path, pid: u32) -> Self {
        let ended = Arc::new(AtomicBool::new(false));
        let (path, flag) = (path.to_path_buf(), ended.clone());
        let thread = std::thread::Builder::new()
            .name("heaplens-symbols".into())
            .spawn(move || symbolize_while_written(&path, pid, &flag))
            .ok();
        OnTheSide { ended, thread }
    }

    /// The program ended and the monitor wrote everything: reads the trace to its end and
    /// returns the table (`None` as [`symbolize_while_written`] says, or if the thread died).
    pub fn finish(self) -> Option<SymbolTable> {
        self.ended.store(true, Ordering::Release);
        let thread = self.thread?;
        thread.thread().unpark();
        thread.join().ok().flatten()
    }
}

/// Symbolizes the return addresses of the trace at `path` of process `pid` while it is being
/// written, until `ended` is set (the program has ended and the monitor written everything)
/// and the file is read to its end. `None` when no trace appeared or it has no stacks, or as
/// soon as the monitor wrote events as rows, which it does when the program's busy threads
/// outnumber the processors: symbolizing would then take the program's time (on the 8-thread
/// churn benchmark, 47 ms on a 0.2-second program), so the report does it. Between looks at
/// the file the thread parks: unpark it after setting `ended`.
pub fn symbolize_while_written(path: &Path, pid: u32, ended: &AtomicBool) -> Option<SymbolTable> {
    idle_priority();
    let (tx, rx) = mpsc::channel();
    let progress = Arc::new(SymProgress::default());
    let p = progress.clone();
    let worker = std::thread::Builder::new()
        .name("heaplens-symbols".into())
        .spawn(move || {
            idle_priority();
            symbolize_all(rx, p)
        })
        .ok()?;
    // The process lives while it is symbolized: a module deleted since it was mapped (an
    // executable replaced by an upgrade) is still open to it.
    let _ = tx.send(SymMsg::LiveProcess(pid));
    let mut file: Option<File> = None;
    let mut seen = Seen { offset: FILE_HEADER_LEN as u64, stacks: false, rows: false, held: Some(Vec::new()) };
    loop {
        // Read before looking at the file: a pass that starts after the end sees everything.
        let last = ended.load(Ordering::Acquire);
        if file.is_none() {
            file = open_trace(path, pid);
        }
        if let Some(f) = file.as_mut() {
            let _ = follow(f, &tx, &mut seen);
        }
        if seen.rows {
            // More busy threads than processors: leave the symbols to the report, and
            // drop what is queued (finishing it took the 8-thread churn program 75 ms of
            // processor time it had no spare of).
            progress.cancel.store(true, Ordering::Relaxed);
            drop(tx);
            let _ = worker.join();
            return None;
        }
        if last {
            // No events block at all (aggregated mode, or a program that never allocated).
            for msg in seen.held.take().unwrap_or_default() {
                let _ = tx.send(msg);
            }
            break;
        }
        // The caller unparks this thread once the program has ended.
        std::thread::park_timeout(POLL);
    }
    drop(tx);
    let results = worker.join().ok()?;
    seen.stacks.then(|| results.to_table())
}

/// How far the trace has been read, and what it held.
struct Seen {
    /// Where the next block starts.
    offset: u64,
    /// A Stacks block was read.
    stacks: bool,
    /// An events block in rows: the program's busy threads outnumbered the processors.
    rows: bool,
    /// What was read before the first events block, which tells whether to symbolize at all
    /// (`None` once it came in columns).
    held: Option<Vec<SymMsg>>,
}

impl Seen {
    /// Passes `msg` on to the symbolizer, or holds it until the first events block.
    fn send(&mut self, tx: &mpsc::Sender<SymMsg>, msg: SymMsg) {
        match &mut self.held {
            Some(h) => h.push(msg),
            None => {
                let _ = tx.send(msg);
            }
        }
    }
}

/// Runs the calling thread only on a processor that has nothing else to run (`SCHED_IDLE`):
/// symbolizing must not take the time of the program or of the monitor's writer thread.
fn idle_priority() {
    let p = libc::sched_param { sched_priority: 0 };
    // SAFETY: sets the calling thread's scheduling policy; a failure leaves it as it was.
    unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &p) };
}

/// The trace at `path`, once its file header and Process block are there and say it is the
/// trace of process `pid` (not a file left from before).
fn open_trace(path: &Path, pid: u32) -> Option<File> {
    let mut f = heaplens_trace::open_regular(path).ok()?;
    let mut h = [0u8; FILE_HEADER_LEN];
    io::Read::read_exact(&mut f, &mut h).ok()?;
    if h[..MAGIC.len()] != MAGIC[..] {
        return None;
    }
    let mut r = TraceReader::at_block(BufReader::new(&mut f), FILE_HEADER_LEN as u64);
    match r.next_block().ok()?? {
        (BlockKind::Process, p) if ProcessRecord::decode(&p).is_ok_and(|p| p.pid == pid) => Some(f),
        _ => None,
    }
}

/// Sends the module records and return addresses of the complete blocks from `seen.offset` on,
/// and moves it past them (an incomplete block is read again next time).
fn follow(f: &mut File, tx: &mpsc::Sender<SymMsg>, seen: &mut Seen) -> io::Result<()> {
    f.seek(SeekFrom::Start(seen.offset))?;
    let mut r = TraceReader::at_block(BufReader::with_capacity(1 << 16, &mut *f), seen.offset);
    while let Some((kind, payload)) = r.next_block_of(|k| matches!(k, BlockKind::Modules | BlockKind::Stacks))? {
        match kind {
            BlockKind::Modules => {
                if let Ok(m) = ModuleRecord::decode_all(&payload) {
                    seen.send(tx, SymMsg::Modules(m));
                }
            }
            BlockKind::Stacks => {
                if let Ok(nodes) = StackNode::decode_all(&payload) {
                    seen.stacks = true;
                    seen.send(tx, SymMsg::Addrs(nodes.iter().map(|n| n.addr).collect()));
                }
            }
            BlockKind::Events => seen.rows = true,
            BlockKind::EventColumns => {
                for msg in seen.held.take().unwrap_or_default() {
                    let _ = tx.send(msg);
                }
            }
            _ => {}
        }
        seen.offset = r.status().offset;
    }
    Ok(())
}

/// Appends `table` to the finished trace at `path`: a Symbols block, then the index block
/// that ends the file.
///
/// # Errors
/// When the file cannot be opened or written.
pub fn append(path: &Path, table: &SymbolTable) -> io::Result<()> {
    let f = OpenOptions::new().append(true).open(path)?;
    let at = f.metadata()?.len();
    let mut w = BlockWriter::append(f, at);
    w.write_block(BlockKind::Symbols, &table.encode())?;
    w.write_block_as(BlockKind::SymbolsIndex, &at.to_le_bytes(), Codec::Raw)?;
    Ok(())
}

/// The symbols embedded in the trace at `path`, if `heaplens run` appended them: `None`
/// when there are none, `Some(Err)` when their block is there but damaged (its checksum
/// matched, its contents do not decode).
pub fn read(path: &Path) -> Option<Result<SymResults, Malformed>> {
    read_table(path).map(|t| t.map(SymResults::from_table))
}

/// The [`SymbolTable`] embedded in the trace at `path`, if any (see [`read`]).
pub fn read_table(path: &Path) -> Option<Result<SymbolTable, Malformed>> {
    let mut f = heaplens_trace::open_regular(path).ok()?;
    let len = f.metadata().ok()?.len();
    let index_at = len.checked_sub(INDEX_BLOCK_LEN as u64).filter(|&o| o >= FILE_HEADER_LEN as u64)?;
    let block_at = |f: &mut File, at: u64, kind: BlockKind| -> Option<Vec<u8>> {
        f.seek(SeekFrom::Start(at)).ok()?;
        let (k, payload) = TraceReader::at_block(BufReader::new(&mut *f), at).next_block().ok()??;
        (k == kind).then_some(payload)
    };
    let index = block_at(&mut f, index_at, BlockKind::SymbolsIndex)?;
    let at = u64::from_le_bytes(index.get(..8)?.try_into().ok()?);
    let payload = block_at(&mut f, at.min(index_at), BlockKind::Symbols)?;
    Some(SymbolTable::decode(&payload))
}
