//! Symbolizing in the background while the events are replayed: a thread receives the module
//! records and the stack nodes as the trace is read and symbolizes every return address of the
//! trie as it arrives, with an [`ElfSymbolizer`] over the module records read so far (checked
//! against all of them once the trace is read). The report then asks a [`CachedSymbolizer`]
//! for the addresses it needs, which answers exactly as an `ElfSymbolizer` over all module
//! records would have, warnings included.

use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::Receiver;
use std::sync::Arc;

use heaplens_trace::{ModuleRecord, SymbolEntry, SymbolTable};

use super::elf::FileCache;
use super::{ElfSymbolizer, Frame, Symbolizer};
use crate::idmap::IdMap;

/// What the loader passes on.
pub enum SymMsg {
    /// Module records, in file order.
    Modules(Vec<ModuleRecord>),
    /// Return addresses of new stack nodes.
    Addrs(Vec<u64>),
    /// The traced process is alive (symbolizing while it runs): a module file deleted since it
    /// was mapped is opened through the process ([`FileCache::set_live_process`]).
    LiveProcess(u32),
}

/// How far the background symbolization is: (addresses done, addresses in all).
#[derive(Default)]
pub struct SymProgress {
    /// Addresses symbolized.
    pub done: AtomicU64,
    /// Addresses to symbolize.
    pub total: AtomicU64,
    /// Symbolizing has begun (the modules are open).
    pub started: std::sync::atomic::AtomicBool,
    /// Set to make [`symbolize_all`] stop at the next address, its results unwanted.
    pub cancel: std::sync::atomic::AtomicBool,
}

/// Frames of every return address, and the module each lies in.
pub struct SymResults {
    frames: IdMap<u64, (u32, u32, Option<usize>)>,
    arena: Vec<Frame>,
    warnings: Vec<Option<String>>,
}

/// Runs the background symbolization until `rx` closes (the trace is read).
///
/// Addresses are symbolized as they arrive, with the module records read so far, so that the
/// costly part (inflating and parsing a module's DWARF) overlaps the reading and the replay.
/// Module records come before the stacks that use them, but a later record may still take over
/// an address range (a library loaded where another was unloaded): once every record is in,
/// each address is looked up again and symbolized anew if its module is not the same.
pub fn symbolize_all(rx: Receiver<SymMsg>, progress: Arc<SymProgress>) -> SymResults {
    let cache = Rc::new(FileCache::default());
    let mut records = Vec::new();
    let mut current: Option<ElfSymbolizer> = None;
    let mut frames: IdMap<u64, (u32, u32, Option<usize>)> = IdMap::default();
    let mut arena = Vec::new();
    let cancelled = || progress.cancel.load(Ordering::Relaxed);
    for msg in rx {
        if cancelled() {
            break;
        }
        match msg {
            SymMsg::LiveProcess(pid) => cache.set_live_process(pid),
            SymMsg::Modules(m) => {
                records.extend(m);
                current = None;
            }
            SymMsg::Addrs(mut a) => {
                let sym = current.get_or_insert_with(|| ElfSymbolizer::with_cache(&records, cache.clone()));
                // In address order, so each module's debug info is read in one sweep.
                a.sort_unstable();
                for &x in &a {
                    if cancelled() {
                        break;
                    }
                    if let std::collections::hash_map::Entry::Vacant(v) = frames.entry(x) {
                        v.insert(symbolize(sym, x, &mut arena));
                    }
                }
            }
        }
    }
    drop(current);
    if cancelled() {
        return SymResults { frames: IdMap::default(), arena, warnings: Vec::new() };
    }
    let mut sym = ElfSymbolizer::with_cache(&records, cache);
    let mut addrs: Vec<u64> = frames.keys().copied().collect();
    addrs.sort_unstable();
    progress.total.store(addrs.len() as u64, Ordering::Relaxed);
    progress.started.store(true, Ordering::Release);
    for &a in &addrs {
        // The module's files are opened (or their failure noted) as symbolizing it would.
        sym.warm(a);
        let module = sym.module_of_return(a);
        if frames[&a].2 != module {
            let f = symbolize(&mut sym, a, &mut arena);
            frames.insert(a, f);
        }
        progress.done.fetch_add(1, Ordering::Relaxed);
    }
    SymResults { frames, arena, warnings: sym.module_warnings() }
}

/// Appends the frames of `a` to `arena`: (first, count, module).
fn symbolize(sym: &mut ElfSymbolizer, a: u64, arena: &mut Vec<Frame>) -> (u32, u32, Option<usize>) {
    let start = arena.len() as u32;
    sym.symbolize(a, arena);
    (start, arena.len() as u32 - start, sym.module_of_return(a))
}

impl SymResults {
    /// The results as a table to embed in the trace, in address order.
    pub fn to_table(&self) -> SymbolTable {
        let mut entries: Vec<SymbolEntry> = self
            .frames
            .iter()
            .map(|(&addr, &(start, n, module))| SymbolEntry {
                addr,
                module: module.map(|m| m as u32),
                frames: self.arena[start as usize..(start + n) as usize].to_vec(),
            })
            .collect();
        entries.sort_unstable_by_key(|e| e.addr);
        SymbolTable { module_warnings: self.warnings.clone(), entries }
    }

    /// The results a table embedded in the trace holds.
    pub fn from_table(t: SymbolTable) -> Self {
        let mut frames = IdMap::default();
        let mut arena = Vec::new();
        for e in t.entries {
            let start = arena.len() as u32;
            arena.extend(e.frames);
            frames.insert(e.addr, (start, arena.len() as u32 - start, e.module.map(|m| m as usize)));
        }
        SymResults { frames, arena, warnings: t.module_warnings }
    }
}

/// Answers from [`SymResults`].
pub struct CachedSymbolizer {
    r: SymResults,
    used: Vec<bool>,
}

impl CachedSymbolizer {
    /// A symbolizer answering from `r`.
    pub fn new(r: SymResults) -> Self {
        let used = vec![false; r.warnings.len()];
        Self { r, used }
    }
}

impl Symbolizer for CachedSymbolizer {
    fn symbolize(&mut self, ret_addr: u64, out: &mut Vec<Frame>) {
        match self.r.frames.get(&ret_addr) {
            Some(&(start, n, module)) => {
                out.extend_from_slice(&self.r.arena[start as usize..(start + n) as usize]);
                if let Some(used) = module.and_then(|m| self.used.get_mut(m)) {
                    *used = true;
                }
            }
            None => out.push(Frame::default()),
        }
    }

    fn warnings(&self) -> Vec<String> {
        self.r.warnings.iter().zip(&self.used).filter(|(_, &u)| u).filter_map(|(w, _)| w.clone()).collect()
    }
}
