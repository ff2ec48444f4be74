//! Call-stack capture: DWARF CFI unwinding (framehop) from the unwind tables the loader already
//! mapped, so programs built without frame pointers (most distribution binaries) still give
//! whole stacks. Unwind rules are cached per thread by framehop; the set of modules is an
//! immutable snapshot swapped atomically when a dlopen/dlclose changes it, so the hot path
//! takes no lock.

use std::arch::asm;
use std::ops::Range;
use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering};

use framehop::x86_64::{CacheX86_64, UnwindRegsX86_64, UnwinderX86_64};
use framehop::{ExplicitModuleSectionInfo, MustNotAllocateDuringUnwind, Unwinder};
use heaplens_trace::Segment;

/// Per-thread unwind-rule cache (allocation-free during unwinding).
pub type Cache = CacheX86_64<MustNotAllocateDuringUnwind>;

/// An immutable view of the module set: the unwinder and the ranges it covers.
struct Snapshot {
    unwinder: UnwinderX86_64<Vec<u8>, MustNotAllocateDuringUnwind>,
    ranges: Vec<Range<u64>>,
}

/// A module's unwind data, copied out of its mapping (so a later dlclose cannot pull it away
/// from an unwinder snapshot another thread still reads).
#[derive(Clone)]
pub struct ModuleUnwind {
    eh_frame_hdr: Vec<u8>,
    eh_frame: Vec<u8>,
    eh_frame_hdr_svma: Range<u64>,
    eh_frame_svma: Range<u64>,
    text_svma: Option<Range<u64>>,
}

/// The current snapshot; replaced, never freed (a thread may still be unwinding with an old
/// one, and dlopen/dlclose are rare).
static CURRENT: AtomicPtr<Snapshot> = AtomicPtr::new(std::ptr::null_mut());
static OWN_LO: AtomicU64 = AtomicU64::new(0);
static OWN_HI: AtomicU64 = AtomicU64::new(0);

impl ModuleUnwind {
    /// Copies `.eh_frame_hdr` (at `bias + hdr_vaddr`, `hdr_len` bytes) and the `.eh_frame` it
    /// points to out of memory. `None` when the header is not one this reader understands.
    ///
    /// # Safety
    /// The module must be mapped (call from a `dl_iterate_phdr` callback).
    pub unsafe fn from_memory(bias: u64, hdr_vaddr: u64, hdr_len: u64, segments: &[Segment]) -> Option<Self> {
        let hdr_avma = bias + hdr_vaddr;
        let hdr = std::slice::from_raw_parts(hdr_avma as *const u8, hdr_len as usize);
        if hdr.len() < 8 || hdr[0] != 1 {
            return None;
        }
        // eh_frame_ptr, encoded per the .eh_frame_hdr format (LSB 5.0, "eh_frame_hdr").
        let field = hdr_avma + 4;
        let eh_avma = match hdr[1] {
            0x1b => field.wrapping_add(i64::from(i32::from_le_bytes(hdr[4..8].try_into().ok()?)) as u64),
            0x03 => bias + u64::from(u32::from_le_bytes(hdr[4..8].try_into().ok()?)),
            0x3b => hdr_avma.wrapping_add(i64::from(i32::from_le_bytes(hdr[4..8].try_into().ok()?)) as u64),
            0x00 | 0x04 if hdr.len() >= 12 => bias + u64::from_le_bytes(hdr[4..12].try_into().ok()?),
            _ => return None,
        };
        let seg = segments.iter().find(|s| eh_avma >= bias + s.vaddr && eh_avma < bias + s.vaddr + s.memsz)?;
        let limit = bias + seg.vaddr + seg.memsz;
        let eh_len = eh_frame_len(eh_avma, limit);
        let text_svma = segments.iter().find(|s| s.flags & 1 != 0).map(|s| s.vaddr..s.vaddr + s.memsz);
        Some(Self {
            eh_frame_hdr: hdr.to_vec(),
            eh_frame: std::slice::from_raw_parts(eh_avma as *const u8, eh_len as usize).to_vec(),
            eh_frame_hdr_svma: hdr_vaddr..hdr_vaddr + hdr_len,
            eh_frame_svma: (eh_avma - bias)..(eh_avma - bias + eh_len),
            text_svma,
        })
    }
}

/// Length of the `.eh_frame` at `start`: CIE/FDE records up to the zero terminator, never past
/// `limit` (the end of the segment holding it).
unsafe fn eh_frame_len(start: u64, limit: u64) -> u64 {
    let mut p = start;
    while p + 4 <= limit {
        let len = u64::from(std::ptr::read_unaligned(p as *const u32));
        if len == 0 {
            return p + 4 - start;
        }
        let next = if len == 0xffff_ffff {
            if p + 12 > limit {
                break;
            }
            p + 12 + std::ptr::read_unaligned((p + 4) as *const u64)
        } else {
            p + 4 + len
        };
        if next > limit || next <= p {
            break;
        }
        p = next;
    }
    p.min(limit) - start
}

/// Installs a new snapshot built from `modules` = (process range, load bias, unwind data).
pub fn publish(modules: impl Iterator<Item = (Range<u64>, u64, ModuleUnwind)>) {
    let mut u = UnwinderX86_64::new();
    let mut ranges = Vec::new();
    for (avma, bias, m) in modules {
        ranges.push(avma.clone());
        let info = ExplicitModuleSectionInfo {
            base_svma: 0,
            text_svma: m.text_svma,
            eh_frame_svma: Some(m.eh_frame_svma),
            eh_frame: Some(m.eh_frame),
            eh_frame_hdr_svma: Some(m.eh_frame_hdr_svma),
            eh_frame_hdr: Some(m.eh_frame_hdr),
            ..Default::default()
        };
        u.add_module(framehop::Module::new(String::new(), avma, bias, info));
    }
    CURRENT.store(Box::into_raw(Box::new(Snapshot { unwinder: u, ranges })), Ordering::Release);
}

/// Marks `range` as this library's own code: frames there are the monitor's, not the program's.
pub fn set_own_range(range: Range<u64>) {
    OWN_LO.store(range.start, Ordering::Relaxed);
    OWN_HI.store(range.end, Ordering::Relaxed);
}

/// Fills `out` with the calling thread's return addresses, innermost first, starting at the
/// first frame outside this library (the program's call to the allocation function). Stack
/// reads are confined to `[sp, stack.end)`, and to nothing when `sp` is outside `stack` (a
/// signal or coroutine stack whose bounds are unknown: reading past them could fault).
/// Returns the number of frames written, and whether the walk stopped in code no known module
/// covers (a library loaded since the last refresh: refresh and capture again).
#[inline(never)]
pub fn capture(out: &mut [u64], cache: &mut Cache, stack: &Range<u64>) -> (usize, bool) {
    let snap = CURRENT.load(Ordering::Acquire);
    if snap.is_null() || out.is_empty() {
        return (0, false);
    }
    // SAFETY: snapshots are never freed.
    let snap = unsafe { &*snap };
    let unwinder = &snap.unwinder;
    let (ip, sp, bp): (u64, u64, u64);
    // SAFETY: reads three registers, touches no memory.
    unsafe {
        asm!("lea {ip}, [rip]", "mov {sp}, rsp", "mov {bp}, rbp", ip = out(reg) ip, sp = out(reg) sp, bp = out(reg) bp, options(nomem, nostack, preserves_flags));
    }
    let hi = if stack.contains(&sp) { stack.end } else { sp };
    let mut read = |addr: u64| {
        if addr >= sp && addr.checked_add(8).is_some_and(|e| e <= hi) && addr % 8 == 0 {
            // SAFETY: within this thread's live stack.
            Ok(unsafe { std::ptr::read(addr as *const u64) })
        } else {
            Err(())
        }
    };
    let (own_lo, own_hi) = (OWN_LO.load(Ordering::Relaxed), OWN_HI.load(Ordering::Relaxed));
    let mut it = unwinder.iter_frames(ip, UnwindRegsX86_64::new(ip, sp, bp), cache, &mut read);
    let mut n = 0;
    let mut in_monitor = true;
    let mut failed = false;
    loop {
        let frame = match it.next() {
            Ok(Some(f)) => f,
            Ok(None) => break,
            Err(_) => {
                failed = true;
                break;
            }
        };
        let a = frame.address();
        if in_monitor {
            if a >= own_lo && a < own_hi {
                continue;
            }
            in_monitor = false;
        }
        out[n] = a;
        n += 1;
        if n == out.len() {
            break;
        }
    }
    let unknown = failed && n > 0 && !snap.ranges.iter().any(|r| r.contains(&out[n - 1]));
    (n, unknown)
}
