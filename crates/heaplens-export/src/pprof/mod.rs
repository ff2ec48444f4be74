//! pprof's profile.proto (github.com/google/pprof, `proto/profile.proto`), gzipped, as `go
//! tool pprof`, pprof.me and Grafana Pyroscope read it: the four sample types of a heap
//! profile (`alloc_objects`/count, `alloc_space`/bytes, `inuse_objects`/count,
//! `inuse_space`/bytes, in-use meaning live at the end of the trace), one sample per
//! (allocation stack, thread) with a numeric `thread` label, a location per return address
//! with its frames (inlined ones first, as the format wants: the last line is the caller the
//! others were inlined into), and a mapping per module with its build id.

#[allow(missing_docs, clippy::all)]
mod profile;

use std::collections::HashMap;
use std::io::{self, Write};
use std::path::Path;

use flate2::write::GzEncoder;
use flate2::Compression;
use heaplens_interpret::symbolize::{for_trace, Frame};
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

/// Writes the profile of `stacks` (by stack and thread) of the trace at `path`.
pub fn write(
    w: &mut dyn Write,
    path: &Path,
    t: &Trace,
    stacks: &[((u32, u32), StackTotals)],
    done: &mut Exported,
) -> io::Result<()> {
    let mut s = Strings::default();
    let value_type = |s: &mut Strings, ty: &str, unit: &str| ValueType { r#type: s.id(ty), unit: s.id(unit) };
    let mut p = Profile {
        sample_type: vec![
            value_type(&mut s, "alloc_objects", "count"),
            value_type(&mut s, "alloc_space", "bytes"),
            value_type(&mut s, "inuse_objects", "count"),
            value_type(&mut s, "inuse_space", "bytes"),
        ],
        period_type: Some(value_type(&mut s, "space", "bytes")),
        default_sample_type: s.id("alloc_space"),
        ..Profile::default()
    };
    if let Some(proc) = &t.process {
        p.time_nanos = proc.start_unix_ns as i64;
        p.period = proc.sample_rate as i64;
    }
    if let Some(end) = t.exit.as_ref().map(|e| e.end_mono_ns).or(t.end.as_ref().map(|e| e.end_mono_ns)) {
        let start = t.process.as_ref().map_or(end, |p| p.start_mono_ns);
        p.duration_nanos = end.saturating_sub(start) as i64;
    }

    // Mappings: the modules, the executable first (the main binary, as pprof expects).
    let modules = live_modules(&t.modules);
    let exe = t.process.as_ref().map(|p| p.exe.as_str());
    let mut order: Vec<&heaplens_trace::ModuleRecord> = modules.clone();
    order.sort_by_key(|m| Some(m.path.as_str()) != exe);
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
            filename: s.id(&m.path),
            build_id: s.id(&build_id),
            has_functions: true,
            has_filenames: true,
            has_line_numbers: true,
            has_inline_frames: true,
        });
        ranges.push((m.base + lo, m.base + hi, id));
    }

    // Locations, one per return address, symbolized once.
    let (mut sym, _damaged) = for_trace(path, t);
    let mut locations: HashMap<u64, u64> = HashMap::new();
    let mut functions: HashMap<(String, String), u64> = HashMap::new();
    let mut frames: Vec<Frame> = Vec::new();
    let thread = s.id("thread");
    for &((stack, tid), totals) in stacks {
        if totals.allocs == 0 && totals.leaked == 0 {
            continue;
        }
        let mut location_id = Vec::new();
        for (_, addr) in t.stacks.walk(stack) {
            let id = match locations.get(&addr) {
                Some(&id) => id,
                None => {
                    frames.clear();
                    sym.symbolize(addr, &mut frames);
                    let lines = frames
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
                    let id = p.location.len() as u64 + 1;
                    let mapping_id =
                        ranges.iter().find(|&&(lo, hi, _)| (lo..hi).contains(&addr)).map_or(0, |&(.., id)| id);
                    // The call instruction, not the return address after it.
                    p.location.push(Location { id, mapping_id, address: addr - 1, line: lines, is_folded: false });
                    locations.insert(addr, id);
                    id
                }
            };
            location_id.push(id);
        }
        let value = vec![totals.allocs as i64, totals.bytes as i64, totals.leaked as i64, totals.leaked_bytes as i64];
        let label = vec![Label { key: thread, num: i64::from(tid), ..Label::default() }];
        p.sample.push(Sample { location_id, value, label });
        done.stacks += 1;
        done.total += totals.bytes;
    }
    done.warnings.extend(sym.warnings());
    p.string_table = std::mem::take(&mut s.table);
    let mut gz = GzEncoder::new(w, Compression::default());
    gz.write_all(&p.encode_to_vec())?;
    gz.finish()?;
    Ok(())
}
