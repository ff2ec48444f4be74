//! An ELF symbol table searched by address, that names an address only when a symbol covers
//! it.
//!
//! A stripped library keeps `.dynsym`, its exported functions, and none of its static ones. The
//! nearest symbol at or before an address inside a static function is then an unrelated
//! exported neighbour (sqlite3's allocator wrapper came out as the 18-byte `sqlite3ApiExit`,
//! 0xd4 bytes before it): a confident wrong name. `st_size` says where a function ends, so an
//! address past its end gets no name, and the frame shows `module+offset`, as heaptrack does.

use object::{Object, ObjectSymbol};

/// One function (or data) symbol: start address, size in bytes (0 when the file gives none),
/// raw (mangled, possibly versioned) name.
struct Entry {
    address: u64,
    size: u64,
    local: bool,
    name: Box<str>,
}

/// The defined text and data symbols of one object file, by address. Built from `.symtab`
/// when the file has one, else from `.dynsym`.
#[derive(Default)]
pub struct SymbolTable {
    entries: Vec<Entry>,
}

impl SymbolTable {
    /// Reads the symbol table of a parsed object file; empty when it has none.
    pub fn read<'d>(obj: &object::File<'d>) -> Self {
        let mut entries = collect(obj.symbols());
        if entries.is_empty() {
            entries = collect(obj.dynamic_symbols());
        }
        Self::sorted(entries)
    }

    /// The entries of the file's procedure linkage table, each named `function@plt` (see
    /// `plt.rs`); empty when it has none.
    pub fn plt<'d>(obj: &object::File<'d>) -> Self {
        let entries = super::plt::entries(obj)
            .into_iter()
            .map(|(address, size, name)| Entry { address, size, local: true, name: name.into() })
            .collect::<Vec<_>>();
        Self::sorted(entries)
    }

    fn sorted(mut entries: Vec<Entry>) -> Self {
        // Of the names at one address, prefer one with a size (it can be checked), then the
        // public one (`__libc_start_main`, not a local alias), then one without a symbol
        // version (`@GLIBC_2.2.5`).
        entries.sort_unstable_by(|a, b| {
            let key = |e: &Entry| (e.address, e.size == 0, e.local, e.name.contains('@'));
            key(a).cmp(&key(b)).then_with(|| a.name.cmp(&b.name))
        });
        entries.dedup_by_key(|e| e.address);
        Self { entries }
    }

    /// The symbol covering `probe` (an address in the file's own address space): its raw name
    /// and start address. A sized symbol covers `[address, address + size)`; an unsized one
    /// (hand-written assembly) covers up to the next symbol, as nothing better is known. `None`
    /// when no symbol covers `probe`.
    pub fn find(&self, probe: u64) -> Option<(&str, u64)> {
        let i = self.entries.partition_point(|e| e.address <= probe).checked_sub(1)?;
        let e = &self.entries[i];
        let covers = e.size == 0 || probe - e.address < e.size;
        covers.then_some((&*e.name, e.address))
    }

    /// How many symbols the table holds.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the table holds no symbol.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

fn collect<'d, S: ObjectSymbol<'d>>(symbols: impl Iterator<Item = S>) -> Vec<Entry> {
    symbols
        .filter(|s| s.is_definition() && matches!(s.kind(), object::SymbolKind::Text | object::SymbolKind::Data))
        .filter_map(|s| {
            let name = s.name().ok().filter(|n| !n.is_empty())?;
            Some(Entry { address: s.address(), size: s.size(), local: !s.is_global(), name: name.into() })
        })
        .collect()
}
