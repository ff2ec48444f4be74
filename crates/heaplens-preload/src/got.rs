//! Hooks by relocation (attach mode, see [`crate::attach`]): a monitor loaded into a running
//! process with `dlopen` is in no scope the program's calls are resolved in, so it rewrites the
//! GOT entries through which every loaded module calls the allocation functions, as heaptrack's
//! injected library does. For each module `dl_iterate_phdr` reports, the dynamic section gives
//! the relocation tables (`DT_JMPREL` for PLT calls, `DT_RELA` for `-fno-plt` calls and
//! address-taken functions); each `R_X86_64_JUMP_SLOT` or `R_X86_64_GLOB_DAT` relocation of a
//! hooked name has its slot set to the hook, the slot's page made writable for the moment when
//! it lies in the module's RELRO segment. Every slot's previous value is kept, and
//! [`restore`] puts them back (in modules still loaded) when the monitor detaches.
//!
//! Writes are single aligned 8-byte stores: a thread calling through a slot meanwhile takes
//! either the old or the new function. Everything here runs inside `dl_iterate_phdr`, so a
//! module cannot be unloaded while its slots are written; the monitor's own memory comes from
//! its own heap, never from the program's allocator.

use std::ffi::{c_int, c_void, CStr};
use std::sync::Mutex;

/// A function to hook: its symbol name and the hook's address.
pub type Target = (&'static CStr, usize);

/// One rewritten slot.
struct Slot {
    /// The module, as (load bias, address of its dynamic section).
    module: (usize, usize),
    addr: usize,
    original: usize,
    hook: usize,
    /// Inside the module's RELRO segment (read-only once relocated).
    relro: bool,
}

/// Slots rewritten, and the modules already handled (as in [`Slot::module`]).
struct Patched {
    slots: Vec<Slot>,
    modules: Vec<(usize, usize)>,
}

static PATCHED: Mutex<Patched> = Mutex::new(Patched { slots: Vec::new(), modules: Vec::new() });

/// The loader's count of modules loaded so far when [`patch`] last ran.
static LAST_ADDS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(u64::MAX);

const PT_DYNAMIC: u32 = 2;
const PT_GNU_RELRO: u32 = 0x6474_e552;
const DT_NULL: i64 = 0;
const DT_PLTRELSZ: i64 = 2;
const DT_STRTAB: i64 = 5;
const DT_SYMTAB: i64 = 6;
const DT_RELA: i64 = 7;
const DT_RELASZ: i64 = 8;
const DT_JMPREL: i64 = 23;
const R_X86_64_GLOB_DAT: u64 = 6;
const R_X86_64_JUMP_SLOT: u64 = 7;
/// Size of an `Elf64_Rela` and of an `Elf64_Sym`.
const RELA_SIZE: usize = 24;
const SYM_SIZE: usize = 24;

struct Walk<'a> {
    targets: &'a [Target],
    /// The monitor's own load bias: its slots are never rewritten.
    own_base: usize,
    done: &'a mut Patched,
    restore: bool,
}

/// Rewrites the slots of every module not handled yet. Cheap when no module was loaded since
/// the last call (one `dl_iterate_phdr` step).
pub fn patch(targets: &[Target], own_base: usize) {
    let adds = crate::modules::loader_adds();
    if LAST_ADDS.swap(adds, std::sync::atomic::Ordering::AcqRel) == adds {
        return;
    }
    let Ok(mut done) = PATCHED.lock() else { return };
    let mut w = Walk { targets, own_base, done: &mut done, restore: false };
    // SAFETY: the callback reads the loader's structures during the call only.
    unsafe { libc::dl_iterate_phdr(Some(callback), (&mut w as *mut Walk).cast()) };
}

/// Puts back every rewritten slot of the modules still loaded (a slot that no longer holds
/// the hook, rewritten since by someone else, is left alone) and forgets them all.
pub fn restore() {
    let Ok(mut done) = PATCHED.lock() else { return };
    let mut w = Walk { targets: &[], own_base: 0, done: &mut done, restore: true };
    // SAFETY: as in `patch`.
    unsafe { libc::dl_iterate_phdr(Some(callback), (&mut w as *mut Walk).cast()) };
    done.slots.clear();
    done.modules.clear();
    LAST_ADDS.store(u64::MAX, std::sync::atomic::Ordering::Release);
}

unsafe extern "C" fn callback(info: *mut libc::dl_phdr_info, _: usize, data: *mut c_void) -> c_int {
    let w = &mut *(data as *mut Walk);
    let info = &*info;
    let base = info.dlpi_addr as usize;
    let phdrs = std::slice::from_raw_parts(info.dlpi_phdr, info.dlpi_phnum as usize);
    let Some(dynamic) = phdrs.iter().find(|p| p.p_type == PT_DYNAMIC) else { return 0 };
    let dyn_addr = base + dynamic.p_vaddr as usize;
    let key = (base, dyn_addr);
    if w.restore {
        for s in w.done.slots.iter().filter(|s| s.module == key) {
            if read(s.addr) == s.hook {
                write(s.addr, s.original, s.relro);
            }
        }
        return 0;
    }
    if base == w.own_base || w.done.modules.contains(&key) {
        return 0;
    }
    w.done.modules.push(key);
    // The pages the loader made read-only: it rounds both ends of the segment down (the last,
    // partial page stays writable, and must stay so).
    let page = page_size();
    let relro = phdrs
        .iter()
        .find(|p| p.p_type == PT_GNU_RELRO)
        .map(|p| {
            let start = base + p.p_vaddr as usize;
            (start & !(page - 1))..((start + p.p_memsz as usize) & !(page - 1))
        })
        .unwrap_or(0..0);
    // The loader relocates the dynamic section's addresses in place (but not the vDSO's).
    let fix = |p: usize| if p < base { p + base } else { p };
    let (mut symtab, mut strtab, mut jmprel, mut pltrelsz, mut rela, mut relasz) = (0, 0, 0, 0, 0, 0);
    let mut d = dyn_addr as *const [i64; 2];
    loop {
        let [tag, val] = *d;
        match tag {
            DT_NULL => break,
            DT_SYMTAB => symtab = fix(val as usize),
            DT_STRTAB => strtab = fix(val as usize),
            DT_JMPREL => jmprel = fix(val as usize),
            DT_PLTRELSZ => pltrelsz = val as usize,
            DT_RELA => rela = fix(val as usize),
            DT_RELASZ => relasz = val as usize,
            _ => {}
        }
        d = d.add(1);
    }
    if symtab == 0 || strtab == 0 {
        return 0;
    }
    for (table, size) in [(jmprel, pltrelsz), (rela, relasz)] {
        if table == 0 {
            continue;
        }
        for i in 0..size / RELA_SIZE {
            let r = (table + i * RELA_SIZE) as *const u64;
            let (offset, info) = (*r, *r.add(1));
            let kind = info & 0xffff_ffff;
            if kind != R_X86_64_JUMP_SLOT && kind != R_X86_64_GLOB_DAT {
                continue;
            }
            let sym = (symtab + (info >> 32) as usize * SYM_SIZE) as *const u32;
            let name = CStr::from_ptr((strtab + *sym as usize) as *const libc::c_char);
            let Some(&(_, hook)) = w.targets.iter().find(|(n, _)| *n == name) else { continue };
            let addr = base + offset as usize;
            let original = read(addr);
            if original == hook {
                continue;
            }
            let in_relro = relro.contains(&addr);
            write(addr, hook, in_relro);
            w.done.slots.push(Slot { module: key, addr, original, hook, relro: in_relro });
        }
    }
    0
}

unsafe fn read(addr: usize) -> usize {
    std::ptr::read_volatile(addr as *const usize)
}

/// Stores `value` at the slot `addr`, its page made writable around the store when it lies in
/// a RELRO segment.
unsafe fn write(addr: usize, value: usize, relro: bool) {
    let page = addr & !(page_size() - 1);
    if relro && libc::mprotect(page as *mut c_void, page_size(), libc::PROT_READ | libc::PROT_WRITE) != 0 {
        return;
    }
    std::ptr::write_volatile(addr as *mut usize, value);
    if relro {
        libc::mprotect(page as *mut c_void, page_size(), libc::PROT_READ);
    }
}

fn page_size() -> usize {
    // SAFETY: no preconditions.
    unsafe { libc::sysconf(libc::_SC_PAGESIZE) as usize }
}
