//! The legacy pprof heap profile (gperftools' text format, as `google-pprof` reads it):
//!
//! ```text
//! heap profile: <in-use objects>: <in-use bytes> [<allocated objects>: <allocated bytes>] @ heapprofile
//! <in-use objects>: <in-use bytes> [<allocated objects>: <allocated bytes>] @ <addr> <addr> ...
//! ...
//!
//! MAPPED_LIBRARIES:
//! <start>-<end> <perms> <offset> 00:00 0 <path>        (as in /proc/PID/maps)
//! ```
//!
//! In-use is what was live at the end of the trace, as in a profile dumped at exit. Addresses
//! are innermost first; pprof takes the first as the allocation site and subtracts one from the
//! others (return addresses), so the first is written as its return address minus one.

use std::io::{self, Write};

use heaplens_interpret::names::for_line;
use heaplens_interpret::Trace;
use heaplens_trace::ModuleRecord;

use crate::totals::StackTotals;
use crate::Exported;

/// Writes the profile of `stacks` (those that allocated) of trace `t`.
pub fn write(w: &mut dyn Write, t: &Trace, stacks: &[(u32, StackTotals)], done: &mut Exported) -> io::Result<()> {
    let sum = |f: fn(&StackTotals) -> u64| stacks.iter().map(|(_, s)| f(s)).sum::<u64>();
    let (inuse_n, inuse_b, alloc_n, alloc_b) =
        (sum(|s| s.leaked), sum(|s| s.leaked_bytes), sum(|s| s.allocs), sum(|s| s.bytes));
    writeln!(w, "heap profile: {inuse_n:6}: {inuse_b:8} [{alloc_n:6}: {alloc_b:8}] @ heapprofile")?;
    // As deep as the other views read these many stacks.
    let depth = heaplens_interpret::load::depth_for(stacks.len());
    for (id, s) in stacks.iter().filter(|(_, s)| s.allocs > 0) {
        write!(w, "{:6}: {:8} [{:6}: {:8}] @", s.leaked, s.leaked_bytes, s.allocs, s.bytes)?;
        for (i, (_, addr)) in t.stacks.walk_within(*id, depth).enumerate() {
            write!(w, " 0x{:x}", if i == 0 { addr.saturating_sub(1) } else { addr })?;
        }
        writeln!(w)?;
        done.stacks += 1;
    }
    done.total = alloc_b;
    writeln!(w, "\nMAPPED_LIBRARIES:")?;
    for m in live_modules(&t.modules) {
        let offsets = file_offsets(&m.path);
        for seg in &m.segments {
            let start = (m.base + seg.vaddr) & !0xfff;
            let end = (m.base + seg.vaddr + seg.memsz + 0xfff) & !0xfff;
            let perms = format!(
                "{}{}{}p",
                if seg.flags & 4 != 0 { 'r' } else { '-' },
                if seg.flags & 2 != 0 { 'w' } else { '-' },
                if seg.flags & 1 != 0 { 'x' } else { '-' }
            );
            // pprof maps an address to `addr - start + offset` in the file, as /proc/PID/maps
            // gives it: the segment's file offset (p_offset) at the page the mapping starts.
            // Where the file cannot be read, the stated address stands in (the same for
            // binaries linked with offset = vaddr, as gcc's usually are; not for Rust's).
            let offset = match offsets.iter().find(|o| o.0 == seg.vaddr) {
                Some(&(vaddr, file)) => file.saturating_sub(vaddr & 0xfff),
                None => start - m.base,
            };
            // The path runs to the end of the line.
            writeln!(
                w,
                "{start:x}-{end:x} {perms} {offset:08x} 00:00 0          {}",
                for_line(&m.path.to_string_lossy())
            )?;
        }
    }
    Ok(())
}

/// `(p_vaddr, p_offset)` of each loadable segment of the ELF file at `path` (none when it
/// cannot be read or parsed: a module gone since the run, a FIFO planted in its place).
fn file_offsets(path: &std::path::Path) -> Vec<(u64, u64)> {
    use object::{Object, ObjectSegment};
    let Ok(mut f) = heaplens_trace::open_regular(path) else { return Vec::new() };
    let mut data = Vec::new();
    if std::io::Read::read_to_end(&mut f, &mut data).is_err() {
        return Vec::new();
    }
    let Ok(obj) = object::File::parse(&*data) else { return Vec::new() };
    obj.segments().map(|s| (s.address(), s.file_range().0)).collect()
}

/// The modules loaded at some point and not replaced by a later load at the same base: the
/// last record for each base wins.
pub fn live_modules(records: &[ModuleRecord]) -> Vec<&ModuleRecord> {
    let mut by_base: std::collections::BTreeMap<u64, &ModuleRecord> = Default::default();
    // Files only: the vDSO has no file for pprof to read.
    for m in records.iter().filter(|m| m.loaded && m.path.is_absolute()) {
        by_base.insert(m.base, m);
    }
    by_base.into_values().collect()
}
