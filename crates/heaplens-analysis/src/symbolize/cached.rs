//! Symbolizing in the background while the events are replayed: a thread receives the module
//! records and the stack nodes as the trace is read, opens the module files that stacks lead
//! into as soon as they appear, and once the trace is read symbolizes every return address of
//! the trie with an [`ElfSymbolizer`] over all module records. The report then asks a
//! [`CachedSymbolizer`] for the addresses it needs, which answers exactly as that
//! `ElfSymbolizer` would have, warnings included.

use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::Receiver;
use std::sync::Arc;

use heaplens_trace::ModuleRecord;

use super::elf::FileCache;
use super::{ElfSymbolizer, Frame, Symbolizer};
use crate::replay::IdMap;

/// What the loader passes on.
pub(crate) enum SymMsg {
    /// Module records, in file order.
    Modules(Vec<ModuleRecord>),
    /// Return addresses of new stack nodes.
    Addrs(Vec<u64>),
}

/// How far the background symbolization is: (addresses done, addresses in all).
#[derive(Default)]
pub(crate) struct SymProgress {
    pub done: AtomicU64,
    pub total: AtomicU64,
    pub started: std::sync::atomic::AtomicBool,
}

/// Frames of every return address, and the module each lies in.
pub(crate) struct SymResults {
    frames: IdMap<u64, (u32, u32, Option<usize>)>,
    arena: Vec<Frame>,
    warnings: Vec<Option<String>>,
}

/// Runs the background symbolization until `rx` closes (the trace is read).
pub(crate) fn symbolize_all(rx: Receiver<SymMsg>, progress: Arc<SymProgress>) -> SymResults {
    let cache = Rc::new(FileCache::default());
    let mut records = Vec::new();
    let mut addrs = Vec::new();
    let mut current: Option<ElfSymbolizer> = None;
    for msg in rx {
        match msg {
            SymMsg::Modules(m) => {
                records.extend(m);
                current = None;
            }
            SymMsg::Addrs(a) => {
                let sym = current.get_or_insert_with(|| ElfSymbolizer::with_cache(&records, cache.clone()));
                for &x in &a {
                    sym.warm(x);
                }
                addrs.extend(a);
            }
        }
    }
    drop(current);
    // In address order, as `paths::resolve` does, so each module's debug info is read in one
    // sweep.
    addrs.sort_unstable();
    addrs.dedup();
    progress.total.store(addrs.len() as u64, Ordering::Relaxed);
    progress.started.store(true, Ordering::Release);
    let mut sym = ElfSymbolizer::with_cache(&records, cache);
    let mut frames = IdMap::default();
    frames.reserve(addrs.len());
    let mut arena = Vec::new();
    for &a in &addrs {
        let start = arena.len() as u32;
        sym.symbolize(a, &mut arena);
        frames.insert(a, (start, arena.len() as u32 - start, sym.module_of_return(a)));
        progress.done.fetch_add(1, Ordering::Relaxed);
    }
    SymResults { frames, arena, warnings: sym.module_warnings() }
}

/// Answers from [`SymResults`].
pub(crate) struct CachedSymbolizer {
    r: SymResults,
    used: Vec<bool>,
}

impl CachedSymbolizer {
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
                if let Some(m) = module {
                    self.used[m] = true;
                }
            }
            None => out.push(Frame::default()),
        }
    }

    fn warnings(&self) -> Vec<String> {
        self.r.warnings.iter().zip(&self.used).filter(|(_, &u)| u).filter_map(|(w, _)| w.clone()).collect()
    }
}
