//! The module map: which executables and shared objects are mapped where. It feeds two
//! consumers: the trace (Modules records, so addresses can be symbolized after the process is
//! gone) and the unwinder (each module's in-memory `.eh_frame_hdr` / `.eh_frame`).
//!
//! `dl_iterate_phdr` takes the loader's lock, and the loader calls malloc while holding it, so
//! it is never called while one of this library's locks is held: collect first, lock after.

use std::collections::HashSet;
use std::ffi::{c_int, c_void, CStr, OsStr};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use heaplens_trace::{ModuleRecord, Segment};

use crate::unwind;

/// One mapped module as `dl_iterate_phdr` reports it, plus its unwind data when it was new.
pub struct Found {
    /// What goes into the trace.
    pub record: ModuleRecord,
    /// Process address range covered by the module's loadable segments.
    pub avma: std::ops::Range<u64>,
    /// Unwind sections copied out of memory (only for modules not known before).
    pub unwind: Option<unwind::ModuleUnwind>,
}

/// Modules known so far, keyed by (load bias, path).
static KNOWN: Mutex<Vec<Known>> = Mutex::new(Vec::new());

struct Known {
    record: ModuleRecord,
    avma: std::ops::Range<u64>,
    unwind: Option<unwind::ModuleUnwind>,
}

struct Collect {
    skip: HashSet<(u64, PathBuf)>,
    found: Vec<Found>,
    present: HashSet<(u64, PathBuf)>,
    exe: PathBuf,
}

/// The loader's count of modules loaded since the process started (`dlpi_adds`, one
/// `dl_iterate_phdr` step): it changes when a module is mapped.
pub fn loader_adds() -> u64 {
    unsafe extern "C" fn first(info: *mut libc::dl_phdr_info, _: usize, out: *mut libc::c_void) -> libc::c_int {
        *(out as *mut u64) = (*info).dlpi_adds;
        1
    }
    let mut n = 0u64;
    // SAFETY: the callback writes one u64 we own.
    unsafe { libc::dl_iterate_phdr(Some(first), (&mut n as *mut u64).cast()) };
    n
}

/// Re-reads the module list and returns what changed since the last call (loads, then
/// unloads), updating the unwinder when anything did. `ts` stamps the records.
pub fn refresh(ts: u64) -> Vec<ModuleRecord> {
    let skip =
        KNOWN.lock().map(|k| k.iter().map(|m| (m.record.base, m.record.path.clone())).collect()).unwrap_or_default();
    let mut c = Collect { skip, found: Vec::new(), present: HashSet::new(), exe: crate::procinfo::exe_path() };
    // SAFETY: the callback only reads the loader's structures for the duration of the call.
    unsafe { libc::dl_iterate_phdr(Some(callback), (&mut c as *mut Collect).cast()) };
    let Ok(mut known) = KNOWN.lock() else { return Vec::new() };
    let mut changes = Vec::new();
    for f in c.found {
        let mut rec = f.record.clone();
        rec.ts = ts;
        changes.push(rec);
        known.push(Known { record: f.record, avma: f.avma, unwind: f.unwind });
    }
    known.retain(|k| {
        let keep = c.present.contains(&(k.record.base, k.record.path.clone()));
        if !keep {
            let rec = ModuleRecord {
                ts,
                loaded: false,
                base: k.record.base,
                path: k.record.path.clone(),
                ..Default::default()
            };
            changes.push(rec);
        }
        keep
    });
    if !changes.is_empty() {
        unwind::publish(known.iter().filter_map(|k| k.unwind.clone().map(|u| (k.avma.clone(), k.record.base, u))));
    }
    changes
}

/// Every known module, as load records (for a trace started after fork).
pub fn snapshot() -> Vec<ModuleRecord> {
    KNOWN.lock().map(|k| k.iter().map(|m| m.record.clone()).collect()).unwrap_or_default()
}

/// The module's path as the loader names it, its bytes as they are (the executable's is
/// empty there: `exe`).
unsafe fn module_path(info: &libc::dl_phdr_info, exe: &Path) -> PathBuf {
    let name = if info.dlpi_name.is_null() { &[][..] } else { CStr::from_ptr(info.dlpi_name).to_bytes() };
    if name.is_empty() {
        exe.to_path_buf()
    } else {
        PathBuf::from(OsStr::from_bytes(name))
    }
}

unsafe extern "C" fn callback(info: *mut libc::dl_phdr_info, _size: usize, data: *mut c_void) -> c_int {
    let c = &mut *(data as *mut Collect);
    let info = &*info;
    let path = module_path(info, &c.exe);
    let key = (info.dlpi_addr, path.clone());
    let known = c.skip.contains(&key);
    c.present.insert(key);
    if known {
        return 0;
    }
    let phdrs = std::slice::from_raw_parts(info.dlpi_phdr, usize::from(info.dlpi_phnum));
    let bias = info.dlpi_addr;
    let mut segments = Vec::new();
    let mut build_id = Vec::new();
    let mut eh_hdr = None;
    for ph in phdrs {
        match ph.p_type {
            libc::PT_LOAD => segments.push(Segment { vaddr: ph.p_vaddr, memsz: ph.p_memsz, flags: ph.p_flags }),
            libc::PT_GNU_EH_FRAME => eh_hdr = Some((ph.p_vaddr, ph.p_memsz)),
            libc::PT_NOTE if build_id.is_empty() => {
                build_id = find_build_id(bias + ph.p_vaddr, ph.p_memsz, ph.p_align.max(4));
            }
            _ => {}
        }
    }
    if segments.is_empty() {
        return 0;
    }
    let lo = segments.iter().map(|s| bias + s.vaddr).min().unwrap_or(0);
    let hi = segments.iter().map(|s| bias + s.vaddr + s.memsz).max().unwrap_or(0);
    let unwind = eh_hdr.and_then(|(v, len)| unwind::ModuleUnwind::from_memory(bias, v, len, &segments));
    let record = ModuleRecord { ts: 0, loaded: true, base: bias, path, build_id, segments };
    c.found.push(Found { record, avma: lo..hi, unwind });
    0
}

/// Reads the GNU build id out of a mapped `PT_NOTE` segment.
unsafe fn find_build_id(addr: u64, len: u64, align: u64) -> Vec<u8> {
    let mut p = addr;
    let end = addr + len;
    let up = |v: u64| (v + align - 1) & !(align - 1);
    while p + 12 <= end {
        let namesz = u64::from(*(p as *const u32));
        let descsz = u64::from(*((p + 4) as *const u32));
        let ty = *((p + 8) as *const u32);
        let name = p + 12;
        let desc = up(name + namesz);
        let next = up(desc + descsz);
        if next > end || next <= p {
            break;
        }
        if ty == 3 && namesz == 4 && std::slice::from_raw_parts(name as *const u8, 4) == b"GNU\0" {
            return std::slice::from_raw_parts(desc as *const u8, descsz as usize).to_vec();
        }
        p = next;
    }
    Vec::new()
}
