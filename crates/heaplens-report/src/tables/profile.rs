//! The profile a diff compares (`heaplens diff`): per function (attributed as the direct table
//! attributes) and per call path (the innermost frames of the attributed path, as the leak
//! table groups them), four numbers each: bytes allocated, allocations, bytes in use at the
//! peak and bytes leaked (live at exit, suppressions apart). Keys are symbolized names only, never addresses or modules, so
//! that two builds of one program (moved code, another file name, ASLR) match.

use rustc_hash::FxHashMap as HashMap;

use super::{count, Inputs};
use crate::model::{Metrics, Profile, ProfileRow};
use heaplens_interpret::idmap::IdMap;

#[derive(Default, Clone, Copy)]
struct Acc {
    bytes: f64,
    calls: f64,
    peak: f64,
    leaked: f64,
    temporary: f64,
}

impl Acc {
    fn metrics(self) -> Metrics {
        Metrics {
            bytes: count(self.bytes),
            calls: count(self.calls),
            peak_bytes: count(self.peak),
            leaked_bytes: count(self.leaked),
            temporary: count(self.temporary),
        }
    }
}

/// The profile: `at_peak` gives the bytes each stack id held at the peak (`None`: not known,
/// the peak columns are 0 and `peak_known` false); paths keep the innermost `depth` frames.
/// Rows are sorted by key.
pub fn profile(inp: Inputs<'_>, at_peak: Option<&IdMap<u32, u64>>, depth: usize) -> Profile {
    let depth = depth.max(1);
    let mut functions: HashMap<String, Acc> = HashMap::default();
    let mut paths: HashMap<Vec<String>, Acc> = HashMap::default();
    for (i, s) in inp.replay.stacks.iter().enumerate() {
        let peak = at_peak.and_then(|m| m.get(&s.stack)).copied().unwrap_or(0) as f64;
        if s.allocs == 0.0 && peak == 0.0 {
            continue;
        }
        // Blocks a suppression covers are not leaks, as in the summary and the leak table.
        let leaked = if inp.suppressed(i) { 0.0 } else { s.kept_bytes };
        let add = |a: &mut Acc| {
            a.bytes += s.bytes;
            a.calls += s.allocs;
            a.peak += peak;
            a.leaked += leaked;
            a.temporary += s.temporary;
        };
        let path = inp.paths.get(i);
        let name = |site: &u32| inp.frames.name(inp.frames.function_of(*site)).to_string();
        let function = path.first().map_or_else(|| "<unknown>".to_string(), name);
        add(functions.entry(function).or_default());
        let mut key: Vec<String> = path.iter().take(depth).map(name).collect();
        key.reverse();
        if key.is_empty() {
            key.push("<unknown>".into());
        }
        add(paths.entry(key).or_default());
    }
    let mut functions: Vec<ProfileRow> =
        functions.into_iter().map(|(f, a)| ProfileRow { key: vec![f], metrics: a.metrics() }).collect();
    let mut paths: Vec<ProfileRow> =
        paths.into_iter().map(|(k, a)| ProfileRow { key: k, metrics: a.metrics() }).collect();
    functions.sort_by(|a, b| a.key.cmp(&b.key));
    paths.sort_by(|a, b| a.key.cmp(&b.key));
    Profile { functions, paths, peak_known: at_peak.is_some(), depth }
}
