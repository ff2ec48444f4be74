//! Call sites, for the pictures' colours: a stack's site is the program's own innermost frames
//! (`--depth` of them, skipping the standard and C libraries), so that the blocks a wrapper
//! such as `make_widget` allocates for two callers get the callers' colours.

use std::path::Path;

use heaplens_interpret::idmap::IdMap;
use heaplens_interpret::load::Trace;
use heaplens_interpret::paths::{is_library_frame, resolve};
use heaplens_interpret::symbolize::{ElfSymbolizer, Frame, Symbolizer};
use heaplens_trace::ModuleRecord;
use regex::Regex;
use rustc_hash::FxHashMap as HashMap;

/// The top call sites by weight, and which stacks belong to them.
pub struct Sites {
    /// Site label (`caller > allocator`) and weight, heaviest first.
    pub top: Vec<(String, f64)>,
    /// Index into `top` of each stack of a top site.
    pub of_stack: IdMap<u32, usize>,
}

/// Groups the stacks of `weights` (stack id to a weight: bytes allocated, bytes x time) by call
/// site, the innermost `depth` frames of the program's own code past those whose function
/// matches one of `skip`, and keeps the `top` heaviest sites. Symbolizes from the trace's
/// embedded symbols, or from the module files.
pub fn sites(
    path: &Path,
    trace: &Trace,
    weights: &IdMap<u32, f64>,
    (depth, skip): (usize, &[Regex]),
    top: usize,
) -> Sites {
    let (mut sym, _) = heaplens_interpret::symbolize::for_trace(path, trace);
    sites_with(trace, sym.as_mut(), weights, (depth, skip), top)
}

/// [`sites`] with the symbolizer `sym`.
fn sites_with(
    trace: &Trace,
    sym: &mut dyn Symbolizer,
    weights: &IdMap<u32, f64>,
    (depth, skip): (usize, &[Regex]),
    top: usize,
) -> Sites {
    let ids: Vec<u32> = weights.keys().copied().collect();
    // A site is named by the program's own frames: the libraries' are not symbolized (the C
    // library's debug info alone is megabytes to inflate), unless a stack has no other.
    let (frames, paths) = resolve(&trace.stacks, &ids, &mut OwnFrames::new(&trace.modules, sym), false);
    let own = |i: usize| -> Vec<&str> {
        paths
            .get(i)
            .iter()
            .map(|&s| frames.function_of(s))
            .filter(|&f| {
                !is_library_frame(frames.name(f), frames.functions[f as usize].module.as_deref())
                    && !frames.in_library_source(f)
            })
            .filter(|&f| !skip.iter().any(|re| re.is_match(frames.name(f))))
            .take(depth.max(1))
            .map(|f| frames.name(f))
            .collect()
    };
    let libraries_only: Vec<u32> = (0..ids.len()).filter(|&i| own(i).is_empty()).map(|i| ids[i]).collect();
    let (all_frames, all_paths) = resolve(&trace.stacks, &libraries_only, sym, false);
    let mut site_of: Vec<String> = Vec::with_capacity(ids.len());
    let mut k = 0;
    for i in 0..ids.len() {
        let own = own(i);
        site_of.push(if own.is_empty() {
            k += 1;
            all_paths
                .get(k - 1)
                .first()
                .map_or("<unknown>".to_string(), |&s| all_frames.name(all_frames.function_of(s)).to_string())
        } else {
            own.iter().rev().copied().collect::<Vec<_>>().join(" > ")
        });
    }
    let mut weight: HashMap<&str, f64> = HashMap::default();
    for (i, id) in ids.iter().enumerate() {
        *weight.entry(site_of[i].as_str()).or_default() += weights[id];
    }
    let mut ranked: Vec<(&str, f64)> = weight.into_iter().collect();
    ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(b.0)));
    ranked.truncate(top);
    let mut of_stack = IdMap::default();
    for (i, id) in ids.iter().enumerate() {
        if let Some(k) = ranked.iter().position(|(s, _)| *s == site_of[i]) {
            of_stack.insert(*id, k);
        }
    }
    Sites { top: ranked.into_iter().map(|(s, w)| (s.to_string(), w)).collect(), of_stack }
}

/// A symbolizer that leaves the frames of the standard and C libraries unnamed (their module
/// and offset only) and hands the others to `inner`.
struct OwnFrames<'a> {
    inner: &'a mut dyn Symbolizer,
    /// Finds an address's module (it opens no file for that).
    modules: ElfSymbolizer,
    /// Per loaded module, in `modules`' order: its basename and load bias when a library.
    libraries: Vec<Option<(String, u64)>>,
}

impl<'a> OwnFrames<'a> {
    fn new(records: &[ModuleRecord], inner: &'a mut dyn Symbolizer) -> Self {
        let libraries = records
            .iter()
            .filter(|m| m.loaded)
            .map(|m| {
                let name = m.path.file_name().unwrap_or(m.path.as_os_str()).to_string_lossy();
                is_library_frame("", Some(&name)).then(|| (name.into_owned(), m.base))
            })
            .collect();
        OwnFrames { inner, modules: ElfSymbolizer::new(records), libraries }
    }
}

impl Symbolizer for OwnFrames<'_> {
    fn symbolize(&mut self, ret_addr: u64, out: &mut Vec<Frame>) {
        match self.modules.module_of_return(ret_addr).and_then(|i| self.libraries[i].as_ref()) {
            Some((library, base)) => out.push(Frame {
                module: Some(library.clone()),
                module_offset: ret_addr.wrapping_sub(*base),
                ..Frame::default()
            }),
            None => self.inner.symbolize(ret_addr, out),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use heaplens_interpret::symbolize::MapSymbolizer;
    use heaplens_trace::{Segment, StackNode};

    /// Counts the addresses it is asked for.
    struct Asked<'a>(&'a mut MapSymbolizer, Vec<u64>);

    impl Symbolizer for Asked<'_> {
        fn symbolize(&mut self, ret_addr: u64, out: &mut Vec<Frame>) {
            self.1.push(ret_addr);
            self.0.symbolize(ret_addr, out);
        }
    }

    #[test]
    fn library_frames_are_symbolized_only_for_stacks_without_the_programs_own() {
        let mut t = Trace::default();
        let module = |path: &str, base: u64| ModuleRecord {
            ts: 0,
            loaded: true,
            base,
            path: path.into(),
            build_id: Vec::new(),
            segments: vec![Segment { vaddr: 0, memsz: 0x1000, flags: 5 }],
        };
        t.modules = vec![module("/usr/bin/app", 0x1000), module("/lib/x86_64-linux-gnu/libc.so.6", 0x7000)];
        // Stack 2: app's `work` called from libc's `start_thread`; stack 4: libc's own
        // `_IO_file_doallocate` from `fopen`.
        for (id, parent, addr) in [(1, 0, 0x7010), (2, 1, 0x1010), (3, 0, 0x7110), (4, 3, 0x7210)] {
            t.stacks.insert(StackNode { id, parent, addr });
        }
        let mut names = MapSymbolizer::new();
        names.add(0x7010, "start_thread").add(0x1010, "work").add(0x7110, "fopen").add(0x7210, "_IO_file_doallocate");
        let mut asked = Asked(&mut names, Vec::new());
        let weights: IdMap<u32, f64> = [(2, 100.0), (4, 10.0)].into_iter().collect();
        let s = sites_with(&t, &mut asked, &weights, (2, &[]), 8);
        let labels: Vec<&str> = s.top.iter().map(|(l, _)| l.as_str()).collect();
        assert_eq!(labels, ["work", "_IO_file_doallocate"]);
        assert_eq!((s.of_stack[&2], s.of_stack[&4]), (0, 1));
        asked.1.sort_unstable();
        assert_eq!(asked.1, [0x1010, 0x7110, 0x7210], "start_thread is never symbolized");
    }
}
