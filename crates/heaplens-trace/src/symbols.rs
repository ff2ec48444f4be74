//! The symbols `heaplens run` resolves while the program runs and appends to its trace (a
//! [`crate::BlockKind::Symbols`] block), as heaptrack's interpreter does: a report then needs
//! neither the module files nor their debug info, and is the same on any machine.
//!
//! Payload (integers are LEB128 varints, strings length-prefixed UTF-8; a string reference is
//! 1 + its index in the string table, 0 for none):
//!
//! ```text
//! payload := strings(n, string*) warnings(n, ref*) entries(n, entry*)
//! entry   := addr - previous entry's addr (entries in address order)
//!            module + 1 (0: none) frames(n, frame*)
//! frame   := function-ref file-ref line + 1 (0: none) module-ref module_offset
//!            symbol_offset + 1 (0: none)
//! ```
//!
//! The block is followed by a [`crate::BlockKind::SymbolsIndex`] block, always the file's last
//! ([`INDEX_BLOCK_LEN`] bytes, stored raw), whose payload is the symbols block's offset as 8
//! little-endian bytes: a report reads it first, from the end, to know before reading the
//! events whether it has to symbolize.

use std::collections::HashMap;

use crate::record::Malformed;
use crate::varint::{put, put_bytes, Cursor};

/// One function frame of a return address (several when calls were inlined), as a
/// symbolizer gave it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SymbolFrame {
    /// Demangled function name; `None` when neither debug info nor a symbol table knew it.
    pub function: Option<String>,
    /// Source file of the call (full path as recorded in the debug info).
    pub file: Option<String>,
    /// Source line of the call.
    pub line: Option<u32>,
    /// Basename of the module (executable or shared object) the address lies in.
    pub module: Option<String>,
    /// Return address minus the module's load bias (the file-relative address); 0 without a
    /// module.
    pub module_offset: u64,
    /// Return address minus the start of the enclosing symbol, when a symbol table gave it, or
    /// else of the enclosing function by the module's unwind table (`function` then is `None`)
    /// (set on the outermost, non-inlined frame only).
    pub symbol_offset: Option<u64>,
}

impl SymbolFrame {
    /// Where in its module the function of this frame begins: `module_offset - symbol_offset`,
    /// else (no symbol offset, or one past the module offset, which only a damaged trace
    /// holds) `module_offset`. Frames no symbol names are grouped by it (`module+0xSTART`).
    pub fn function_offset(&self) -> u64 {
        self.symbol_offset.and_then(|o| self.module_offset.checked_sub(o)).unwrap_or(self.module_offset)
    }
}

/// The frames of one return address.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SymbolEntry {
    /// The return address, as recorded in the stack trie.
    pub addr: u64,
    /// Index of the module record (in file order) the address lies in.
    pub module: Option<u32>,
    /// Innermost (most deeply inlined) frame first.
    pub frames: Vec<SymbolFrame>,
}

/// Every return address of a trace's stack trie with its frames, and what went wrong reading
/// each module's symbols.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SymbolTable {
    /// Per module record (in file order): the warning its files gave, if any.
    pub module_warnings: Vec<Option<String>>,
    /// One entry per return address, in address order.
    pub entries: Vec<SymbolEntry>,
}

/// Total length of the [`crate::BlockKind::SymbolsIndex`] block: header and 8 payload bytes.
pub const INDEX_BLOCK_LEN: usize = crate::BLOCK_HEADER_LEN + 8;

impl SymbolTable {
    /// Serializes the table.
    pub fn encode(&self) -> Vec<u8> {
        /// Interned strings, numbered from 1 in order of first use.
        #[derive(Default)]
        struct Strings<'a>(HashMap<&'a str, u64>, Vec<&'a str>);
        impl<'a> Strings<'a> {
            fn r(&mut self, s: &'a Option<String>) -> u64 {
                s.as_deref().map_or(0, |s| {
                    *self.0.entry(s).or_insert_with(|| {
                        self.1.push(s);
                        self.1.len() as u64
                    })
                })
            }
        }
        let mut st = Strings::default();
        let mut body = Vec::new();
        put(&mut body, self.module_warnings.len() as u64);
        for w in &self.module_warnings {
            put(&mut body, st.r(w));
        }
        put(&mut body, self.entries.len() as u64);
        let mut prev = 0u64;
        for e in &self.entries {
            put(&mut body, e.addr.wrapping_sub(prev));
            prev = e.addr;
            put(&mut body, e.module.map_or(0, |m| u64::from(m) + 1));
            put(&mut body, e.frames.len() as u64);
            for f in &e.frames {
                put(&mut body, st.r(&f.function));
                put(&mut body, st.r(&f.file));
                put(&mut body, f.line.map_or(0, |l| u64::from(l) + 1));
                put(&mut body, st.r(&f.module));
                put(&mut body, f.module_offset);
                put(&mut body, f.symbol_offset.map_or(0, |o| o.wrapping_add(1)));
            }
        }
        let order = st.1;
        let mut out = Vec::with_capacity(body.len() + order.iter().map(|s| s.len() + 2).sum::<usize>());
        put(&mut out, order.len() as u64);
        for s in &order {
            put_bytes(&mut out, s.as_bytes());
        }
        out.extend_from_slice(&body);
        out
    }

    /// Parses a payload.
    ///
    /// # Errors
    /// [`Malformed`] if it is cut short, or refers to a string or a module warning it lacks.
    pub fn decode(p: &[u8]) -> Result<Self, Malformed> {
        let e = Malformed("symbols");
        let mut c = Cursor::new(p);
        let n = c.var().ok_or(e)?;
        let mut strings = Vec::new();
        for _ in 0..n {
            strings.push(c.string().ok_or(e)?);
        }
        let s = |c: &mut Cursor| -> Result<Option<String>, Malformed> {
            match c.var().ok_or(e)? {
                0 => Ok(None),
                i => strings.get(i as usize - 1).cloned().map(Some).ok_or(e),
            }
        };
        let mut t = SymbolTable::default();
        for _ in 0..c.var().ok_or(e)? {
            t.module_warnings.push(s(&mut c)?);
        }
        let mut prev = 0u64;
        for _ in 0..c.var().ok_or(e)? {
            let addr = prev.wrapping_add(c.var().ok_or(e)?);
            prev = addr;
            let module = match c.var().ok_or(e)?.checked_sub(1) {
                // A module is an index into the warnings, which the report marks as used.
                Some(m) if m >= t.module_warnings.len() as u64 => return Err(e),
                m => m.map(|m| m as u32),
            };
            let mut frames = Vec::new();
            for _ in 0..c.var().ok_or(e)? {
                frames.push(SymbolFrame {
                    function: s(&mut c)?,
                    file: s(&mut c)?,
                    line: c.var().ok_or(e)?.checked_sub(1).map(|l| l as u32),
                    module: s(&mut c)?,
                    module_offset: c.var().ok_or(e)?,
                    symbol_offset: c.var().ok_or(e)?.checked_sub(1),
                });
            }
            t.entries.push(SymbolEntry { addr, module, frames });
        }
        Ok(t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips() {
        let f = |name: &str, line| SymbolFrame {
            function: Some(name.into()),
            file: Some("/src/a.c".into()),
            line: Some(line),
            module: Some("a.out".into()),
            module_offset: 0x1234,
            symbol_offset: Some(0),
        };
        let t = SymbolTable {
            module_warnings: vec![None, Some("libx.so: rebuilt since the run".into())],
            entries: vec![
                SymbolEntry { addr: 0x10, module: Some(0), frames: vec![f("inlined", 7), f("outer", 9)] },
                SymbolEntry { addr: 0x7fff_0000_1000, module: None, frames: vec![SymbolFrame::default()] },
                SymbolEntry {
                    addr: u64::MAX,
                    module: Some(1),
                    frames: vec![SymbolFrame { symbol_offset: Some(u64::MAX - 1), ..f("x", 0) }],
                },
            ],
        };
        let enc = t.encode();
        assert_eq!(SymbolTable::decode(&enc), Ok(t));
        // "outer", "inlined" and the file, module names: each string once.
        assert_eq!(enc.windows(8).filter(|w| w == b"/src/a.c").count(), 1);
        for cut in 0..enc.len() {
            assert!(SymbolTable::decode(&enc[..cut]).is_err(), "cut at {cut}");
        }
    }

    #[test]
    fn a_module_index_past_the_warnings_is_malformed() {
        let t = SymbolTable {
            module_warnings: vec![None],
            entries: vec![SymbolEntry { addr: 0x10, module: Some(3), frames: vec![SymbolFrame::default()] }],
        };
        assert!(SymbolTable::decode(&t.encode()).is_err());
        let ok = SymbolTable { entries: vec![SymbolEntry { module: Some(0), ..t.entries[0].clone() }], ..t };
        assert_eq!(SymbolTable::decode(&ok.encode()).unwrap(), ok);
    }
}
