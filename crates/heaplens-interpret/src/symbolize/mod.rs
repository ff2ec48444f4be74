//! Symbolization: from a return address in the profiled process to the function frames it
//! stands for (several when calls were inlined).

mod bounds;
pub mod cached;
mod demangle;
mod dwarf;
mod elf;
pub mod embedded;
mod mapped;
mod plt;
mod qualify;
pub mod scopes;
pub mod symtab;
pub mod types;
mod units;
mod vdso;

use std::collections::HashMap;

pub use elf::ElfSymbolizer;

/// One function frame of a return address (the type the trace's embedded symbols hold).
pub use heaplens_trace::SymbolFrame as Frame;

/// Maps return addresses to frames.
pub trait Symbolizer {
    /// Appends the frames of return address `ret_addr` to `out`, innermost (most deeply
    /// inlined) first, the function that really holds the return address last. `ret_addr` is
    /// the address recorded on the stack; implementations look up `ret_addr - 1` so that a call
    /// at the end of a function or inlined range is attributed to the caller's call line.
    /// Always appends at least one frame (with `function: None` when nothing is known).
    fn symbolize(&mut self, ret_addr: u64, out: &mut Vec<Frame>);

    /// Problems met so far that cost names (a module file missing or rebuilt since the run),
    /// one line each.
    fn warnings(&self) -> Vec<String> {
        Vec::new()
    }
}

/// The symbolizer for the trace at `path` (`trace` as loaded from it): the symbols `heaplens
/// run` embedded in it when they are there and intact, else the module files it names (which
/// must still be on this machine for names to resolve). The second value is true when
/// embedded symbols were there but damaged.
pub fn for_trace(path: &std::path::Path, trace: &crate::Trace) -> (Box<dyn Symbolizer>, bool) {
    match embedded::read(path) {
        Some(Ok(r)) => (Box::new(cached::CachedSymbolizer::new(r)), false),
        damaged => (Box::new(ElfSymbolizer::new(&trace.modules)), damaged.is_some()),
    }
}

/// A symbolizer from a fixed table, for tests and synthetic traces: each return address maps
/// to a list of function names (innermost first); unknown addresses give an unnamed frame.
#[derive(Debug, Clone, Default)]
pub struct MapSymbolizer {
    table: HashMap<u64, Vec<Frame>>,
}

impl MapSymbolizer {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }

    /// Maps `ret_addr` to one frame named `function`.
    pub fn add(&mut self, ret_addr: u64, function: &str) -> &mut Self {
        self.add_frames(ret_addr, vec![Frame { function: Some(function.into()), ..Frame::default() }])
    }

    /// Maps `ret_addr` to explicit frames, innermost first.
    pub fn add_frames(&mut self, ret_addr: u64, frames: Vec<Frame>) -> &mut Self {
        self.table.insert(ret_addr, frames);
        self
    }
}

impl Symbolizer for MapSymbolizer {
    fn symbolize(&mut self, ret_addr: u64, out: &mut Vec<Frame>) {
        match self.table.get(&ret_addr) {
            Some(f) if !f.is_empty() => out.extend(f.iter().cloned()),
            _ => out.push(Frame { module_offset: ret_addr, ..Frame::default() }),
        }
    }
}
