//! heaptrack's interpreted data format (the `heaptrack.*.zst` files `heaptrack_print` and
//! `heaptrack_gui` read), as `heaptrack_interpret` writes it and
//! `src/analyze/accumulatedtracedata.cpp` of heaptrack parses it: one record per line, numbers
//! in hexadecimal, every index defined by an earlier line.
//!
//! ```text
//! v <heaptrack version> <file version 2>
//! X <command line>
//! s <string>                      string n (from 1): module, function and file names
//! i <ip> <module> [<function> [<file> <line>]]   instruction pointer n (from 1)
//! t <ip index> <parent trace>     trace node n (from 1; 0 is the root)
//! a <size> <trace>                allocation info n (from 0): a size at a trace
//! + <allocation info>             an allocation
//! - <allocation info>             the release of a block allocated with that info
//! c <milliseconds since start>    the time of the records that follow
//! ```
//!
//! A reallocation is written as heaptrack records one: the release of the old block, then an
//! allocation. Strings and the command line are written through `names::for_terminal`:
//! heaptrack has no escaping of its own, a newline would end the record, and heaptrack_print
//! shows them on the terminal as they are.

use std::collections::HashMap;
use std::io::{self, Write};

use heaplens_interpret::names::for_terminal;
use heaplens_interpret::symbolize::{Frame, Symbolizer};
use heaplens_interpret::view::{Block, Release, View};
use heaplens_interpret::Trace;

/// heaptrack's version the header claims (1.5.0) and the file format version written.
const HEAPTRACK_VERSION: u32 = 0x010500;
const FILE_VERSION: u32 = 2;

/// Writes the records as the replay goes.
pub struct Heaptrack<'t, W: Write> {
    out: W,
    trace: &'t Trace,
    sym: Box<dyn Symbolizer>,
    strings: HashMap<String, u64>,
    ips: HashMap<u64, u64>,
    /// Trie node -> trace index.
    traces: HashMap<u32, u64>,
    /// (size, trace index) -> allocation info index.
    infos: HashMap<(u64, u64), u64>,
    start_ns: u64,
    last_ms: u64,
    frames: Vec<Frame>,
    /// The first write error, reported by [`Heaptrack::finish`].
    error: Option<io::Error>,
    /// Allocations written.
    pub allocations: u64,
    /// Bytes they requested.
    pub bytes: u64,
}

impl<'t, W: Write> Heaptrack<'t, W> {
    /// A writer of trace `t`'s records to `out`, symbolizing with `sym`; writes the header.
    pub fn new(mut out: W, t: &'t Trace, sym: Box<dyn Symbolizer>) -> io::Result<Self> {
        writeln!(out, "v {HEAPTRACK_VERSION:x} {FILE_VERSION:x}")?;
        if let Some(p) = &t.process {
            let cmdline = if p.argv.is_empty() { p.exe.to_string_lossy().into_owned() } else { p.argv.join(" ") };
            writeln!(out, "X {}", for_terminal(&cmdline))?;
        }
        let start_ns = t.process.as_ref().map_or(0, |p| p.start_mono_ns);
        Ok(Heaptrack {
            out,
            trace: t,
            sym,
            strings: HashMap::new(),
            ips: HashMap::new(),
            traces: HashMap::new(),
            infos: HashMap::new(),
            start_ns,
            last_ms: 0,
            frames: Vec::new(),
            error: None,
            allocations: 0,
            bytes: 0,
        })
    }

    /// Allocation stacks written (trace nodes with an allocation info).
    pub fn stacks(&self) -> usize {
        self.infos.values().len().min(self.traces.len())
    }

    /// Ends the file (a last timestamp) and gives the writer back, or the first write error.
    pub fn finish(mut self, end_ns: u64) -> io::Result<(W, Vec<String>)> {
        self.time(end_ns);
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        let warnings = self.sym.warnings();
        Ok((self.out, warnings))
    }

    fn line(&mut self, args: std::fmt::Arguments<'_>) {
        if self.error.is_none() {
            if let Err(e) = self.out.write_fmt(args).and_then(|()| self.out.write_all(b"\n")) {
                self.error = Some(e);
            }
        }
    }

    fn string(&mut self, s: &str) -> u64 {
        if let Some(&i) = self.strings.get(s) {
            return i;
        }
        let i = self.strings.len() as u64 + 1;
        // A string runs to the end of its line (file version 2), and heaptrack_print shows it
        // on the terminal as it is.
        let clean = for_terminal(s);
        self.line(format_args!("s {clean}"));
        self.strings.insert(s.to_string(), i);
        i
    }

    fn ip(&mut self, addr: u64) -> u64 {
        if let Some(&i) = self.ips.get(&addr) {
            return i;
        }
        self.frames.clear();
        self.sym.symbolize(addr, &mut self.frames);
        // The function that holds the address is the last frame (inlined ones come first).
        let f = self.frames.last().cloned().unwrap_or_default();
        let module = self.string(f.module.as_deref().unwrap_or("??"));
        let mut rec = format!("i {addr:x} {module:x}");
        if let Some(name) = &f.function {
            let function = self.string(name);
            rec.push_str(&format!(" {function:x}"));
            if let (Some(file), Some(line)) = (&f.file, f.line) {
                let file = self.string(file);
                rec.push_str(&format!(" {file:x} {line:x}"));
            }
        }
        self.line(format_args!("{rec}"));
        let i = self.ips.len() as u64 + 1;
        self.ips.insert(addr, i);
        i
    }

    /// The trace index of trie node `id`, writing the nodes from the root to it first.
    fn trace_index(&mut self, id: u32) -> u64 {
        if let Some(&i) = self.traces.get(&id) {
            return i;
        }
        let path: Vec<(u32, u64)> = self.trace.stacks.walk(id).collect();
        let mut parent = 0;
        for &(node, addr) in path.iter().rev() {
            if let Some(&i) = self.traces.get(&node) {
                parent = i;
                continue;
            }
            let ip = self.ip(addr);
            self.line(format_args!("t {ip:x} {parent:x}"));
            parent = self.traces.len() as u64 + 1;
            self.traces.insert(node, parent);
        }
        parent
    }

    fn info(&mut self, size: u64, stack: u32) -> u64 {
        let trace = self.trace_index(stack);
        if let Some(&i) = self.infos.get(&(size, trace)) {
            return i;
        }
        let i = self.infos.len() as u64;
        self.line(format_args!("a {size:x} {trace:x}"));
        self.infos.insert((size, trace), i);
        i
    }

    fn time(&mut self, ts: u64) {
        let ms = ts.saturating_sub(self.start_ns) / 1_000_000;
        if ms > self.last_ms {
            self.last_ms = ms;
            self.line(format_args!("c {ms:x}"));
        }
    }
}

impl<W: Write> View for Heaptrack<'_, W> {
    fn allocation(&mut self, b: &Block) {
        self.time(b.ts);
        let info = self.info(b.size, b.stack);
        self.line(format_args!("+ {info:x}"));
        self.allocations += 1;
        self.bytes += b.size;
    }

    fn deallocation(&mut self, r: &Release, b: &Block) {
        self.time(r.ts);
        let info = self.info(b.size, b.stack);
        self.line(format_args!("- {info:x}"));
    }

    fn overwritten(&mut self, b: &Block) {
        // heaptrack would have seen the release: write it where it is noticed.
        let info = self.info(b.size, b.stack);
        self.line(format_args!("- {info:x}"));
    }
}
