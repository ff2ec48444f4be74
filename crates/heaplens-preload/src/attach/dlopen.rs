//! `dlopen` and `dlmopen` hooked through the GOT (attach mode): a library loaded while
//! attached has its GOT slots hooked before `dlopen` returns to its caller, so its first calls
//! are recorded (the writer's 10 ms look at the loader's counter would miss them).
//!
//! The loader takes the caller of `dlopen` from its return address: the namespace the library
//! goes into, the caller's `RUNPATH` for a bare name, `$ORIGIN`, and the new library's loader
//! (which `dlsym(RTLD_NEXT)` searches from). A hook that simply called the real `dlopen` would
//! make the monitor that caller, and change which library a program gets. So the hook (a naked
//! stub) calls it with a return address inside the caller's own module: a `ret` instruction
//! there, the caller's own epilogue's if it can (found once per call site by [`ret_for`]),
//! which returns in turn to the stub, one word further up the stub's own frame. The caller's stack is never touched. When no such
//! instruction is found the stub jumps to the real function as a tail call (the caller then
//! returns straight to the program, and the writer hooks the library in its next round).
//!
//! Constructors of the new library run inside `dlopen`, before the stub gets control back:
//! what they allocate through their own GOT is not recorded (calls through the C library's
//! hooked slots are).

use std::ffi::c_void;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use super::targets::{global_real, own_base};

/// The real `dlopen` and `dlmopen` (0 until [`resolve`]: the stubs then never run, as nothing
/// is hooked).
static REAL_DLOPEN: AtomicUsize = AtomicUsize::new(0);
static REAL_DLMOPEN: AtomicUsize = AtomicUsize::new(0);

/// Finds the real functions the stubs call. Call before hooking.
pub fn resolve() {
    REAL_DLOPEN.store(global_real(c"dlopen"), Ordering::Release);
    REAL_DLMOPEN.store(global_real(c"dlmopen"), Ordering::Release);
}

/// A stub calling the real function at `$real` (arguments in rdi, rsi, rdx) through a `ret`
/// in its caller's module, then [`after_dlopen`]. The stack at the real function's entry is
/// aligned as after a `call`: `[ret in the caller's module][continuation][padding]`, then the
/// stub's frame (saved rbp, the caller's return address).
macro_rules! dlopen_stub {
    ($name:ident, $real:ident) => {
        #[allow(clippy::missing_safety_doc)]
        #[unsafe(naked)]
        #[no_mangle]
        pub unsafe extern "C" fn $name() {
            std::arch::naked_asm!(
                // Unwinding rules, so that a stack taken inside the real function (a library
                // constructor's allocation) goes on past the stub to the program's caller.
                ".cfi_startproc",
                "push rbp",
                ".cfi_def_cfa_offset 16",
                ".cfi_offset rbp, -16",
                "mov rbp, rsp",
                ".cfi_def_cfa_register rbp",
                "push rdi",
                "push rsi",
                "push rdx",
                "sub rsp, 8",
                "mov rdi, [rbp + 8]",
                "call {gadget}",
                "mov r11, rax",
                "add rsp, 8",
                "pop rdx",
                "pop rsi",
                "pop rdi",
                "mov rax, [rip + {real}]",
                "test r11, r11",
                "jz 2f",
                "sub rsp, 8",
                "lea r10, [rip + 3f]",
                "push r10",
                "push r11",
                "jmp rax",
                "3:",
                "add rsp, 8",
                "push rax",
                "sub rsp, 8",
                "call {after}",
                "add rsp, 8",
                "pop rax",
                ".cfi_remember_state",
                "pop rbp",
                ".cfi_def_cfa rsp, 8",
                "ret",
                ".cfi_restore_state",
                // No `ret` in the caller's module: a tail call, the caller untouched.
                "2:",
                "pop rbp",
                ".cfi_def_cfa rsp, 8",
                "jmp rax",
                ".cfi_endproc",
                gadget = sym heaplens_ret_gadget,
                real = sym $real,
                after = sym after_dlopen,
            )
        }
    };
}

dlopen_stub!(heaplens_hook_dlopen, REAL_DLOPEN);
dlopen_stub!(heaplens_hook_dlmopen, REAL_DLMOPEN);

/// A `ret` instruction in the module holding `caller` (the address `dlopen` was called from),
/// for the stubs; 0 when none is known or the module cannot be found.
extern "C" fn heaplens_ret_gadget(caller: usize) -> usize {
    let Some(_g) = crate::tls::Guard::enter() else { return 0 };
    std::panic::catch_unwind(|| ret_for(caller)).unwrap_or(0)
}

/// How far past the call the `ret` of the caller's own epilogue is looked for, in bytes.
const NEAR: usize = 4096;

/// A `ret` for the call returning to `caller`, cached per call site: the first of a function
/// epilogue (after `pop rbp`, `pop rbx`, `pop r12`..`pop r15` or `leave`) within [`NEAR`]
/// bytes after `caller`, most likely the caller's own, so that a stack taken inside `dlopen`
/// names the caller's function there and unwinds on (at an epilogue's `ret` the return address
/// is on top of the stack, as the stub's continuation is); else such a `ret` anywhere in an
/// executable segment of the caller's module, else any `ret` byte there. 0 when there is none.
fn ret_for(caller: usize) -> usize {
    static FOUND: Mutex<Vec<(usize, usize)>> = Mutex::new(Vec::new());
    let base = super::targets::module_base(caller);
    if base == 0 || base == own_base() {
        return 0;
    }
    if let Some(g) = FOUND.lock().ok().and_then(|f| f.iter().find(|e| e.0 == caller).map(|e| e.1)) {
        return g;
    }
    let found = scan_module(base, caller);
    if let Ok(mut f) = FOUND.lock() {
        f.push((caller, found));
    }
    found
}

/// Where in `code` an epilogue's `ret` is (see [`ret_for`]).
fn epilogue_ret(code: &[u8]) -> Option<usize> {
    let pops = |w: &[u8]| matches!(w[1], 0x5d | 0x5b | 0xc9) || (w[0] == 0x41 && (0x5c..=0x5f).contains(&w[1]));
    code.windows(3).position(|w| w[2] == 0xc3 && pops(w)).map(|i| i + 2)
}

/// Scans the executable segments of the loaded module at `base` (see [`ret_for`]).
fn scan_module(base: usize, caller: usize) -> usize {
    struct Find {
        base: usize,
        caller: usize,
        found: usize,
    }
    unsafe extern "C" fn each(info: *mut libc::dl_phdr_info, _: usize, data: *mut c_void) -> i32 {
        let f = &mut *(data as *mut Find);
        let info = &*info;
        if info.dlpi_addr as usize != f.base && !(info.dlpi_addr == 0 && is_main(info, f.base)) {
            return 0;
        }
        let phdrs = std::slice::from_raw_parts(info.dlpi_phdr, info.dlpi_phnum as usize);
        let segments = phdrs.iter().filter(|p| p.p_type == libc::PT_LOAD && p.p_flags & libc::PF_X != 0);
        // Mapped and readable (code) as long as the module is loaded, which dl_iterate_phdr's
        // lock ensures.
        let code: Vec<(usize, &[u8])> = segments
            .map(|p| {
                let start = info.dlpi_addr as usize + p.p_vaddr as usize;
                (start, std::slice::from_raw_parts(start as *const u8, p.p_filesz as usize))
            })
            .collect();
        let near = code.iter().find_map(|&(start, c)| {
            let from = f.caller.checked_sub(start).filter(|&o| o < c.len())?;
            epilogue_ret(&c[from..c.len().min(from + NEAR)]).map(|i| f.caller + i)
        });
        let anywhere = || code.iter().find_map(|&(start, c)| epilogue_ret(c).map(|i| start + i));
        let any = || code.iter().find_map(|&(start, c)| c.iter().position(|&b| b == 0xc3).map(|i| start + i));
        f.found = near.or_else(anywhere).or_else(any).unwrap_or(0);
        1
    }
    let mut f = Find { base, caller, found: 0 };
    // SAFETY: the callback reads the loader's structures during the call only.
    unsafe { libc::dl_iterate_phdr(Some(each), (&mut f as *mut Find).cast()) };
    f.found
}

/// Whether the module of `info` (a non-PIE executable: load bias 0) is the one `dladdr` named
/// by `base` (its first segment's address).
///
/// # Safety
/// `info` is from `dl_iterate_phdr`.
unsafe fn is_main(info: &libc::dl_phdr_info, base: usize) -> bool {
    let phdrs = std::slice::from_raw_parts(info.dlpi_phdr, info.dlpi_phnum as usize);
    phdrs.iter().any(|p| p.p_type == libc::PT_LOAD && p.p_vaddr as usize == base)
}

#[cfg(test)]
mod tests {
    #[test]
    fn an_epilogue_ret_is_found_after_its_pops() {
        // mov; pop rbx; pop rbp; ret  /  a lone c3 inside an immediate first.
        let code = [0xb8, 0xc3, 0, 0, 0, 0x5b, 0x5d, 0xc3, 0x41, 0x5f, 0xc3];
        assert_eq!(super::epilogue_ret(&code), Some(7));
        assert_eq!(super::epilogue_ret(&code[8..]), Some(2));
        assert_eq!(super::epilogue_ret(&[0x90, 0x90, 0xc3]), None);
    }
}

/// After the real `dlopen` returned: hooks the modules it loaded, before the program gets the
/// handle (nothing when the monitor is detached meanwhile, or the thread is inside it).
extern "C" fn after_dlopen() {
    if !crate::active() {
        return;
    }
    let Some(_g) = crate::tls::Guard::enter() else { return };
    let _ = std::panic::catch_unwind(super::hook_new_modules);
}
