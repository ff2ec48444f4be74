//! What attach mode hooks, and the real functions behind the hooks: the relocation names whose
//! GOT slots get this library's entry points ([`targets`]), and the check that a real function
//! found in the program's global scope is a definition rather than a PLT entry
//! ([`real_definition`]).

use std::ffi::CStr;
use std::sync::OnceLock;

use crate::got;

/// The entry points hooked in every module, each by this library's export of the same name:
/// the allocation functions, the process's ends (`_exit`) and the exec family, which writes
/// the trace out before the new image replaces this one (see [`crate::lifetime`]).
const HOOKED: &[&CStr] = &[
    c"malloc",
    c"calloc",
    c"realloc",
    c"reallocarray",
    c"free",
    c"memalign",
    c"posix_memalign",
    c"aligned_alloc",
    c"valloc",
    c"pvalloc",
    c"_Znwm",
    c"_Znam",
    c"_ZnwmRKSt9nothrow_t",
    c"_ZnamRKSt9nothrow_t",
    c"_ZnwmSt11align_val_t",
    c"_ZnamSt11align_val_t",
    c"_ZnwmSt11align_val_tRKSt9nothrow_t",
    c"_ZnamSt11align_val_tRKSt9nothrow_t",
    c"_ZdlPv",
    c"_ZdaPv",
    c"_ZdlPvm",
    c"_ZdaPvm",
    c"_ZdlPvSt11align_val_t",
    c"_ZdaPvSt11align_val_t",
    c"_ZdlPvmSt11align_val_t",
    c"_ZdaPvmSt11align_val_t",
    c"_ZdlPvRKSt9nothrow_t",
    c"_ZdaPvRKSt9nothrow_t",
    c"_ZdlPvSt11align_val_tRKSt9nothrow_t",
    c"_ZdaPvSt11align_val_tRKSt9nothrow_t",
    c"_exit",
    c"_Exit",
    c"execve",
    c"execv",
    c"execvp",
    c"execvpe",
    c"fexecve",
    c"execveat",
    c"execl",
    c"execlp",
    c"execle",
];

/// Hooked under another name than the function's: this library must not export `dlopen`
/// itself (preloaded by `heaplens run`, it would interpose the program's).
const RENAMED: &[(&CStr, &CStr)] = &[(c"dlopen", c"heaplens_hook_dlopen"), (c"dlmopen", c"heaplens_hook_dlmopen")];

/// Hooked too while CPU time is sampled: a new thread starts its sampler
/// ([`crate::hooks`]' `pthread_create`), and the program's own SIGPROF disposition is kept in
/// the monitor's signal table ([`crate::crash`]) so that the timers' signals never reach it.
const CPU_HOOKED: &[&CStr] = &[c"pthread_create", c"sigaction", c"signal"];

/// The GOT targets (relocation name, hook address), with the CPU sampler's when `cpu`. The
/// hooks are looked up in this library's own handle: the library's code reaches its exported
/// names through its GOT like any module, where the loader put the global scope's definitions
/// (glibc's).
pub fn targets(cpu: bool) -> &'static [got::Target] {
    static PLAIN: OnceLock<Vec<got::Target>> = OnceLock::new();
    static WITH_CPU: OnceLock<Vec<got::Target>> = OnceLock::new();
    let make = |cpu: bool| {
        let Some(me) = crate::own_path().and_then(|p| std::ffi::CString::new(p).ok()) else { return Vec::new() };
        // SAFETY: a NUL-terminated path; RTLD_NOLOAD only finds this library, already loaded
        // (the extra reference is never dropped: the library stays loaded anyway).
        let handle = unsafe { libc::dlopen(me.as_ptr(), libc::RTLD_NOW | libc::RTLD_NOLOAD) };
        if handle.is_null() {
            return Vec::new();
        }
        let extra: &[&CStr] = if cpu { CPU_HOOKED } else { &[] };
        HOOKED
            .iter()
            .chain(extra)
            .map(|&n| (n, n))
            .chain(RENAMED.iter().copied())
            // SAFETY: a handle from dlopen and NUL-terminated names.
            .map(|(name, export)| (name, unsafe { libc::dlsym(handle, export.as_ptr()) } as usize))
            .filter(|&(_, hook)| hook != 0)
            .collect()
    };
    if cpu {
        WITH_CPU.get_or_init(|| make(true))
    } else {
        PLAIN.get_or_init(|| make(false))
    }
}

/// `addr`, found for the real `name` in the global scope, if a function
/// starts there outside this library; else the C library's own `name`, else 0. A non-PIE
/// program that takes a function's address exports its PLT entry under the function's name,
/// and the global lookup finds that: a jump through the program's GOT slot, which the hooks
/// now hold (every call would loop into them).
pub fn real_definition(name: &CStr, addr: usize) -> usize {
    let own = own_base();
    let starts_function = |a: usize| {
        if a == 0 || module_base(a) == own {
            return false;
        }
        // SAFETY: `dladdr` only reads the loader's tables and fills `info`; a symbol starts at
        // `a`, so its first bytes are mapped code.
        unsafe {
            let mut info: libc::Dl_info = std::mem::zeroed();
            libc::dladdr(a as *const libc::c_void, &mut info) != 0
                && info.dli_saddr as usize == a
                && !jumps_through_memory(a as *const u8)
        }
    };
    if starts_function(addr) {
        return addr;
    }
    // SAFETY: RTLD_NOLOAD only finds the C library, loaded already; NUL-terminated names.
    let libc_own = unsafe {
        let libc = libc::dlopen(c"libc.so.6".as_ptr(), libc::RTLD_NOW | libc::RTLD_NOLOAD);
        if libc.is_null() {
            0
        } else {
            libc::dlsym(libc, name.as_ptr().cast()) as usize
        }
    };
    if starts_function(libc_own) {
        libc_own
    } else {
        0
    }
}

/// The real `name` as attach mode calls it: the global scope's definition, checked by
/// [`real_definition`]; 0 when there is none.
pub fn global_real(name: &CStr) -> usize {
    // SAFETY: a NUL-terminated name; RTLD_DEFAULT searches the program's global scope first.
    let found = unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) } as usize;
    real_definition(name, found)
}

/// Whether the code at `p` is a PLT entry: `jmp *slot(%rip)` (`ff 25`), after an `endbr64`
/// and a `bnd` prefix if present. (The loader's `dladdr` names an undefined symbol by its
/// canonical PLT entry.)
///
/// # Safety
/// `p` points to at least 7 bytes of mapped code.
unsafe fn jumps_through_memory(p: *const u8) -> bool {
    let mut at = p;
    if std::slice::from_raw_parts(at, 4) == [0xf3, 0x0f, 0x1e, 0xfa] {
        at = at.add(4);
    }
    if *at == 0xf2 {
        at = at.add(1);
    }
    std::slice::from_raw_parts(at, 2) == [0xff, 0x25]
}

/// This library's load address (its own GOT entries are never rewritten).
pub fn own_base() -> usize {
    module_base(own_base as *const () as usize)
}

/// The load address of the module holding `addr`, 0 when none does.
pub fn module_base(addr: usize) -> usize {
    // SAFETY: `dladdr` only reads the loader's tables and fills `info`.
    unsafe {
        let mut info: libc::Dl_info = std::mem::zeroed();
        if libc::dladdr(addr as *const libc::c_void, &mut info) == 0 {
            return 0;
        }
        info.dli_fbase as usize
    }
}
