//! pprof's profile.proto (github.com/google/pprof, `proto/profile.proto`), gzipped, as `go
//! tool pprof`, pprof.me and Grafana Pyroscope read it: the four sample types of a heap
//! profile (`alloc_objects`/count, `alloc_space`/bytes, `inuse_objects`/count,
//! `inuse_space`/bytes, in-use meaning live at the end of the trace), one sample per
//! (allocation stack, thread) with a numeric `thread` label, a location per return address
//! with its frames (inlined ones first, as the format wants: the last line is the caller the
//! others were inlined into), and a mapping per module with its build id.
//!
//! Or, for the CPU samples of `heaplens run --cpu` ([`write_cpu`]), a CPU profile as Go's
//! runtime writes one: sample types `samples`/count and `cpu`/nanoseconds, period type
//! `cpu`/nanoseconds with the sampling period, one sample per (stack, thread) with the same
//! `thread` label, locations, functions and mappings built as the heap profile's.

#[allow(missing_docs, clippy::all)]
mod profile;

use std::collections::{BTreeMap, HashMap};
use std::io::{self, Write};
use std::path::Path;

use flate2::write::GzEncoder;
use flate2::Compression;
use heaplens_interpret::cpu::CpuSamples;
use heaplens_interpret::paths::{resolve_samples, Naming};
use heaplens_interpret::symbolize::{for_trace, Frame, Symbolizer};
use heaplens_interpret::Trace;
use prost::Message;

use self::profile::{Function, Label, Line, Location, Mapping, Profile, Sample, ValueType};
use crate::pprof_text::live_modules;
use crate::totals::StackTotals;
use crate::Exported;

/// Interned strings: index 0 is "", as the format requires.
#[derive(Default)]
struct Strings {
    table: Vec<String>,
    index: HashMap<String, i64>,
}

impl Strings {
    fn id(&mut self, s: &str) -> i64 {
        if self.table.is_empty() {
            self.table.push(String::new());
            self.index.insert(String::new(), 0);
        }
        if let Some(&i) = self.index.get(s) {
            return i;
        }
        let i = self.table.len() as i64;
        self.table.push(s.to_string());
        self.index.insert(s.to_string(), i);
        i
    }
}

/// A profile under construction: its strings, its mappings (the modules) and its locations
/// and functions, each address symbolized once.
struct Builder {
    s: Strings,
    p: Profile,
    /// The mappings' address ranges and ids.
    ranges: Vec<(u64, u64, u64)>,
    sym: Box<dyn Symbolizer>,
    /// The string id of the `thread` label's key.
    thread: i64,
    /// Location id per return address, and its number of frames (inlined ones included).
    locations: HashMap<u64, (u64, usize)>,
    functions: HashMap<(String, String), u64>,
    frames: Vec<Frame>,
    /// Frames of a stack read ([`heaplens_interpret::load::depth_for`] the profile's stacks).
    depth: usize,
}

impl Builder {
    /// A profile of trace `t` (at `path`) with the sample types `sample_type` (type, unit),
    /// the period type `period_type` and the default sample type `default`: its start time,
    /// duration and mappings.
    fn new(path: &Path, t: &Trace, sample_type: &[(&str, &str)], period_type: (&str, &str), default: &str) -> Builder {
        let mut s = Strings::default();
        let value_type = |s: &mut Strings, (ty, unit): (&str, &str)| ValueType { r#type: s.id(ty), unit: s.id(unit) };
        let mut p = Profile {
            sample_type: sample_type.iter().map(|&v| value_type(&mut s, v)).collect(),
            period_type: Some(value_type(&mut s, period_type)),
            default_sample_type: s.id(default),
            ..Profile::default()
        };
        if let Some(proc) = &t.process {
            p.time_nanos = proc.start_unix_ns as i64;
        }
        if let Some(end) = t.exit.as_ref().map(|e| e.end_mono_ns).or(t.end.as_ref().map(|e| e.end_mono_ns)) {
            let start = t.process.as_ref().map_or(end, |p| p.start_mono_ns);
            p.duration_nanos = end.saturating_sub(start) as i64;
        }

        // Mappings: the modules, the executable first (the main binary, as pprof expects).
        let modules = live_modules(&t.modules);
        let exe = t.process.as_ref().map(|p| p.exe.as_path());
        let mut order: Vec<&heaplens_trace::ModuleRecord> = modules.clone();
        order.sort_by_key(|m| Some(m.path.as_path()) != exe);
        let mut ranges = Vec::new();
        for m in order {
            let lo = m.segments.iter().map(|g| g.vaddr).min().unwrap_or(0);
            let hi = m.segments.iter().map(|g| g.vaddr + g.memsz).max().unwrap_or(0);
            let id = p.mapping.len() as u64 + 1;
            let build_id: String = m.build_id.iter().map(|b| format!("{b:02x}")).collect();
            p.mapping.push(Mapping {
                id,
                memory_start: m.base + lo,
                memory_limit: m.base + hi,
                file_offset: lo,
                filename: s.id(&m.path.to_string_lossy()),
                build_id: s.id(&build_id),
                has_functions: true,
                has_filenames: true,
                has_line_numbers: true,
                has_inline_frames: true,
            });
            ranges.push((m.base + lo, m.base + hi, id));
        }
        let (sym, _damaged) = for_trace(path, t);
        let thread = s.id("thread");
        let (locations, functions, frames) = (HashMap::new(), HashMap::new(), Vec::new());
        Builder { s, p, ranges, sym, thread, locations, functions, frames, depth: heaplens_interpret::load::MAX_DEPTH }
    }

    /// The location of return address `addr` (symbolized the first time it is met), and its
    /// number of frames.
    fn location(&mut self, addr: u64) -> (u64, usize) {
        if let Some(&l) = self.locations.get(&addr) {
            return l;
        }
        self.frames.clear();
        self.sym.symbolize(addr, &mut self.frames);
        let (s, p, functions) = (&mut self.s, &mut self.p, &mut self.functions);
        let lines: Vec<Line> = self
            .frames
            .iter()
            .map(|f| {
                let name = f.function.clone().unwrap_or_else(|| format!("0x{addr:x}"));
                let file = f.file.clone().unwrap_or_default();
                let next = functions.len() as u64 + 1;
                let function_id = *functions.entry((name.clone(), file.clone())).or_insert_with(|| {
                    p.function.push(Function {
                        id: next,
                        name: s.id(&name),
                        system_name: s.id(&name),
                        filename: s.id(&file),
                        start_line: 0,
                    });
                    next
                });
                Line { function_id, line: f.line.map_or(0, i64::from), column: 0 }
            })
            .collect();
        let id = self.p.location.len() as u64 + 1;
        let mapping_id = self.ranges.iter().find(|&&(lo, hi, _)| (lo..hi).contains(&addr)).map_or(0, |&(.., id)| id);
        let n = lines.len().max(1);
        // The call instruction, not the return address after it (for a CPU sample's innermost
        // address, which the monitor records as the interrupted instruction plus one, the
        // instruction itself).
        self.p.location.push(Location { id, mapping_id, address: addr - 1, line: lines, is_folded: false });
        self.locations.insert(addr, (id, n));
        (id, n)
    }

    /// Adds a sample of trie node `stack` on thread `tid` with `value`; when `frames` is given,
    /// only the innermost return addresses that hold those first frames of the stack (an
    /// address whose inlined frames are cut partway stays).
    fn sample(&mut self, t: &Trace, stack: u32, tid: u32, value: Vec<i64>, frames: Option<usize>) {
        let mut location_id = Vec::new();
        let mut seen = 0;
        for (_, addr) in t.stacks.walk_within(stack, self.depth) {
            if frames.is_some_and(|k| seen >= k && !location_id.is_empty()) {
                break;
            }
            let (id, n) = self.location(addr);
            location_id.push(id);
            seen += n;
        }
        let label = vec![Label { key: self.thread, num: i64::from(tid), ..Label::default() }];
        self.p.sample.push(Sample { location_id, value, label });
    }

    /// Writes the profile, gzipped, and hands over the symbolizer's warnings.
    fn finish(mut self, w: &mut dyn Write, done: &mut Exported) -> io::Result<()> {
        done.warnings.extend(self.sym.warnings());
        self.p.string_table = std::mem::take(&mut self.s.table);
        let mut gz = GzEncoder::new(w, Compression::default());
        gz.write_all(&self.p.encode_to_vec())?;
        gz.finish()?;
        Ok(())
    }
}

/// Writes the heap profile of `stacks` (by stack and thread) of the trace at `path`. Every
/// sample carries all four of pprof's heap values; `metric` picks the one pprof shows first
/// (`default_sample_type`): `alloc_objects`, `alloc_space`, or for the blocks live at exit
/// (pprof's "in use" at the end of a heap profile) `inuse_objects` and `inuse_space`. The
/// bytes in use at the peak have no pprof value: `alloc_space` then.
pub fn write(
    w: &mut dyn Write,
    path: &Path,
    t: &Trace,
    stacks: &[((u32, u32), StackTotals)],
    metric: crate::Metric,
    done: &mut Exported,
) -> io::Result<()> {
    use crate::Metric;
    let default = match metric {
        Metric::AllocCount => "alloc_objects",
        Metric::LeakedCount => "inuse_objects",
        Metric::LeakedBytes => "inuse_space",
        Metric::AllocBytes | Metric::InuseBytes | Metric::CpuSamples => "alloc_space",
    };
    let mut b = Builder::new(
        path,
        t,
        &[("alloc_objects", "count"), ("alloc_space", "bytes"), ("inuse_objects", "count"), ("inuse_space", "bytes")],
        ("space", "bytes"),
        default,
    );
    if let Some(proc) = &t.process {
        b.p.period = proc.sample_rate as i64;
    }
    b.depth = heaplens_interpret::load::depth_for(stacks.len());
    for &((stack, tid), totals) in stacks {
        if totals.allocs == 0 && totals.leaked == 0 {
            continue;
        }
        let value = vec![totals.allocs as i64, totals.bytes as i64, totals.leaked as i64, totals.leaked_bytes as i64];
        b.sample(t, stack, tid, value, None);
        done.stacks += 1;
        done.total += totals.bytes;
    }
    b.finish(w, done)
}

/// Writes the CPU profile of `samples` (of trace `t`, at `path`): per (stack, thread), its
/// samples and the CPU nanoseconds they stand for. A stack keeps the frames
/// [`resolve_samples`] keeps (its outer end is cut as the report's: the runtime's frames
/// outside `main` or a thread's start routine), whole addresses at a time.
/// `done.total` counts samples.
pub fn write_cpu(
    w: &mut dyn Write,
    path: &Path,
    t: &Trace,
    samples: &CpuSamples,
    progress: bool,
    done: &mut Exported,
) -> io::Result<()> {
    let mut b = Builder::new(path, t, &[("samples", "count"), ("cpu", "nanoseconds")], ("cpu", "nanoseconds"), "cpu");
    b.p.period = samples.period_ns as i64;
    // How many frames of each stack the report's paths keep.
    let ids: Vec<u32> = samples.by_stack().iter().map(|&(s, _, _)| s).collect();
    let (_, paths) = resolve_samples(&t.stacks, &ids, b.sym.as_mut(), progress, Naming::default());
    let mut by_thread: BTreeMap<(u32, u32), (u64, u64)> = BTreeMap::new();
    for th in &samples.threads {
        for s in &th.samples {
            let e = by_thread.entry((s.stack, th.tid)).or_default();
            e.0 += 1;
            e.1 = e.1.saturating_add(s.cpu_ns);
        }
    }
    for (&(stack, tid), &(n, ns)) in &by_thread {
        let kept = ids.binary_search(&stack).map_or(usize::MAX, |i| paths.get(i).len());
        b.sample(t, stack, tid, vec![n as i64, ns as i64], Some(kept));
        done.total += n;
    }
    done.stacks = ids.len();
    b.finish(w, done)
}
