//! Call sites, for the pictures' colours: a stack's site is the program's own innermost frames
//! (`--depth` of them, skipping the standard and C libraries), so that the blocks a wrapper
//! such as `make_widget` allocates for two callers get the callers' colours.

use std::path::Path;

use heaplens_interpret::idmap::IdMap;
use heaplens_interpret::load::Trace;
use heaplens_interpret::paths::{is_library_frame, resolve};
use rustc_hash::FxHashMap as HashMap;

/// The top call sites by weight, and which stacks belong to them.
pub struct Sites {
    /// Site label (`caller > allocator`) and weight, heaviest first.
    pub top: Vec<(String, f64)>,
    /// Index into `top` of each stack of a top site.
    pub of_stack: IdMap<u32, usize>,
}

/// Groups the stacks of `weights` (stack id to a weight: bytes allocated, bytes x time) by call
/// site and keeps the `top` heaviest sites. Symbolizes from the trace's embedded symbols, or
/// from the module files.
pub fn sites(path: &Path, trace: &Trace, weights: &IdMap<u32, f64>, depth: usize, top: usize) -> Sites {
    let ids: Vec<u32> = weights.keys().copied().collect();
    let (mut sym, _) = heaplens_interpret::symbolize::for_trace(path, trace);
    let (frames, paths) = resolve(&trace.stacks, &ids, sym.as_mut(), false);
    let mut site_of: Vec<String> = Vec::with_capacity(ids.len());
    for i in 0..ids.len() {
        let own: Vec<&str> = paths
            .get(i)
            .iter()
            .map(|&s| frames.function_of(s))
            .filter(|&f| !is_library_frame(frames.name(f), frames.functions[f as usize].module.as_deref()))
            .take(depth.max(1))
            .map(|f| frames.name(f))
            .collect();
        site_of.push(if own.is_empty() {
            paths.get(i).first().map_or("<unknown>".to_string(), |&s| frames.name(frames.function_of(s)).to_string())
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
