//! The ends of the process and of its main thread: `exec` writes the trace out first (the new
//! image would drop every buffer), and a main thread that leaves with `pthread_exit` leaves the
//! process to end with its last thread, which the monitor's writer thread must not be.
//!
//! The interposed functions are in `csrc/lifetime.c`; the stubs here export their names (rustc
//! exports only Rust's symbols from a cdylib) and jump there with every register and the stack
//! as the caller left them, so variadic calls (`execl`) and the forced unwinding of
//! `pthread_exit` pass through untouched.

use crate::{output, procinfo, tls};

extern "C" {
    fn hl_execve();
    fn hl_execv();
    fn hl_execvp();
    fn hl_execvpe();
    fn hl_fexecve();
    fn hl_execveat();
    fn hl_execl();
    fn hl_execlp();
    fn hl_execle();
    fn hl_pthread_exit();
}

/// Exports `$name` as a jump to the C definition `$to`.
macro_rules! jump_to_c {
    ($($name:ident => $to:ident),* $(,)?) => {$(
        #[allow(clippy::missing_safety_doc)]
        #[unsafe(naked)]
        #[no_mangle]
        pub unsafe extern "C" fn $name() {
            std::arch::naked_asm!("jmp {to}", to = sym $to)
        }
    )*};
}

jump_to_c!(
    execve => hl_execve,
    execv => hl_execv,
    execvp => hl_execvp,
    execvpe => hl_execvpe,
    fexecve => hl_fexecve,
    execveat => hl_execveat,
    execl => hl_execl,
    execlp => hl_execlp,
    execle => hl_execle,
    pthread_exit => hl_pthread_exit,
);

/// Called before every `exec`: writes out everything recorded and an End block, so the trace is
/// complete if the new image replaces this one. If the exec fails, recording goes on and the
/// End block written at exit supersedes this one. Nothing in a `vfork` child (the parent's
/// memory).
#[no_mangle]
pub extern "C" fn heaplens_before_exec() {
    if !crate::trace_open() || !crate::own_process() {
        return;
    }
    let Some(_g) = tls::Guard::enter() else { return };
    let _ = std::panic::catch_unwind(|| output::checkpoint(output::Checkpoint::Exec));
}

/// The real `name` (NUL-terminated) for the C stubs when the monitor was attached to a running
/// process (see `crate::attach`); null when preloaded, where they use `RTLD_NEXT`.
///
/// # Safety
/// `name` is a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn heaplens_attached_real(name: *const std::ffi::c_char) -> *mut std::ffi::c_void {
    #[cfg(not(feature = "cpu_monitor"))]
    if !name.is_null() {
        let Some(_g) = tls::Guard::enter() else { return std::ptr::null_mut() };
        return crate::attach::real_for_c(std::ffi::CStr::from_ptr(name)) as *mut std::ffi::c_void;
    }
    let _ = name;
    std::ptr::null_mut()
}

/// Called when the main thread calls `pthread_exit`.
#[no_mangle]
pub extern "C" fn heaplens_main_thread_exit() {
    procinfo::main_thread_exited();
}
