//! The interposed entry points. Each one calls the real function and, unless the calling thread
//! is already inside the monitor (or recording is off), records one event. Allocation events are
//! recorded after the real call returns, deallocation events before it runs.

use std::ffi::c_void;

use heaplens_trace::Op;

use crate::real::call;
use crate::record::{self, Caller};
use crate::sampling;
use crate::tls::Guard;

type P = *mut c_void;

/// The guard, when this call should be recorded.
#[inline(always)]
fn enter() -> Option<Guard> {
    if crate::allocations_active() {
        Guard::enter()
    } else {
        crate::note_unrecorded();
        None
    }
}

/// Exports `$name` as a naked entry stub that records where its caller's frame is (the
/// caller's stack pointer after return in r8, its frame pointer in r9, both free argument
/// registers in every hooked signature) and jumps to `$name::imp`. The stack walk then starts at
/// the program's frame instead of unwinding the monitor's own frames first. Given one of the
/// `crate::fastpath` stub macros (and its arguments), the stub also takes the sampler's fast
/// path itself.
// The CPU-only monitor (`cpu_monitor`, libheaplens_preload_cpu.so) exports no allocation entry
// point: `entry!` makes nothing there, and the hooks behind it stay unused.
#[cfg(feature = "cpu_monitor")]
macro_rules! entry {
    ($($t:tt)*) => {};
}

#[cfg(not(feature = "cpu_monitor"))]
macro_rules! entry {
    ($abi:literal $name:ident) => {
        #[allow(clippy::missing_safety_doc)]
        #[unsafe(naked)]
        #[no_mangle]
        pub unsafe extern $abi fn $name() {
            std::arch::naked_asm!("lea r8, [rsp + 8]", "mov r9, rbp", "jmp {imp}", imp = sym $name::imp)
        }
    };
    ($abi:literal $name:ident, $stub:ident $(, $arg:tt)*) => {
        #[allow(clippy::missing_safety_doc)]
        #[unsafe(naked)]
        #[no_mangle]
        pub unsafe extern $abi fn $name() {
            crate::fastpath::$stub!($($arg,)* $name::imp)
        }
    };
}

macro_rules! alloc_hook {
    ($abi:literal $name:ident => $real:ident, $op:expr, |$a0:ident : $t0:ty| size = $size:expr $(, fast $fast:literal)?) => {
        alloc_hook!(@ $abi $name => $real, $op, ($a0: $t0, _p1: usize, _p2: usize), ($a0), $size $(, $fast)?);
    };
    ($abi:literal $name:ident => $real:ident, $op:expr, |$a0:ident : $t0:ty, $a1:ident : $t1:ty| size = $size:expr $(, fast $fast:literal)?) => {
        alloc_hook!(@ $abi $name => $real, $op, ($a0: $t0, $a1: $t1, _p2: usize), ($a0, $a1), $size $(, $fast)?);
    };
    ($abi:literal $name:ident => $real:ident, $op:expr, |$a0:ident : $t0:ty, $a1:ident : $t1:ty, $a2:ident : $t2:ty| size = $size:expr) => {
        alloc_hook!(@ $abi $name => $real, $op, ($a0: $t0, $a1: $t1, $a2: $t2), ($a0, $a1, $a2), $size);
    };
    (@ $abi:literal $name:ident => $real:ident, $op:expr, ($($p:ident : $pt:ty),*), ($($a:ident),*), $size:expr $(, $fast:literal)?) => {
        entry!($abi $name $(, sampled_alloc_stub, $fast, $real)?);
        #[allow(non_snake_case)]
        mod $name {
            use super::*;
            pub unsafe extern $abi fn imp($($p: $pt,)* _p3: usize, cfa: u64, bp: u64) -> P {
                if sampling::skip($size) {
                    // The C++ operators allocate through hooked functions: keep those calls
                    // out of the count.
                    let _g = if $abi == "C-unwind" { enter() } else { None };
                    return call::$real($($a),*);
                }
                let Some(_g) = enter() else { return call::$real($($a),*) };
                let p = call::$real($($a),*);
                record::alloc(Caller { cfa, bp }, $op, p, $size);
                p
            }
        }
    };
}

/// Stands in for `std::nothrow` (an empty tag the operators never read).
static NOTHROW: u8 = 0;

/// The throwing `operator new`s try the nothrow form under the guard. Only when that fails is
/// the throwing form called, without the guard, so the `bad_alloc` it throws (and the exception
/// object the C++ runtime mallocs for it) is the program's own, recorded as usual, and the
/// exception unwinds through this frame (hence the "C-unwind" ABI).
macro_rules! throwing_new_hook {
    ($name:ident => $real:ident via $nothrow:ident, $op:expr, |$n:ident : usize $(, $a:ident : $t:ty)*|) => {
        entry!("C-unwind" $name);
        #[allow(non_snake_case)]
        mod $name {
            use super::*;
            #[allow(unused_variables)]
            pub unsafe extern "C-unwind" fn imp($n: usize, p1: usize, p2: usize, p3: usize, cfa: u64, bp: u64) -> P {
                $(let $a: $t = p1;)*
                if sampling::skip($n) {
                    let g = enter();
                    let p = call::$nothrow($n $(, $a)*, std::ptr::addr_of!(NOTHROW) as P);
                    drop(g);
                    if !p.is_null() {
                        return p;
                    }
                    return call::$real($n $(, $a)*);
                }
                {
                    let Some(_g) = enter() else { return call::$real($n $(, $a)*) };
                    let p = call::$nothrow($n $(, $a)*, std::ptr::addr_of!(NOTHROW) as P);
                    if !p.is_null() {
                        record::alloc(Caller { cfa, bp }, $op, p, $n);
                        return p;
                    }
                }
                call::$real($n $(, $a)*)
            }
        }
    };
}

/// Deallocation hooks. While recording, the C++ `operator delete`s release the block with the
/// real `free` directly: that is all libstdc++'s do, and it saves a trip through the C++ runtime
/// and back into the `free` hook on every delete.
macro_rules! dealloc_hook {
    ($name:ident => $real:ident, $op:expr, |$p:ident : P $(, $a:ident : $t:ty)*|) => {
        entry!("C" $name, sampled_free_stub);
        #[allow(non_snake_case)]
        mod $name {
            use super::*;
            pub unsafe extern "C" fn imp($p: P $(, $a: $t)*) {
                if $p.is_null() {
                    // Counted as a null free; a sample has no use for them.
                    if !sampling::enabled() {
                        if let Some(_g) = enter() {
                            record::null_free($op);
                        }
                    }
                    return call::$real($p $(, $a)*);
                }
                if sampling::skip_free($p as u64) {
                    return call::free($p);
                }
                let Some(_g) = enter() else { return call::$real($p $(, $a)*) };
                record::dealloc($op, $p);
                call::free($p)
            }
        }
    };
}

/// The plain `operator new` and `new[]` (throwing and nothrow). While recording they get the
/// block from the real `malloc` directly, as libstdc++'s do (after turning a 0-byte request into
/// 1), saving a trip through the C++ runtime and back into the `malloc` hook. Only when that
/// fails is the real operator called, without the guard: it runs the program's new_handler
/// loop and throws `bad_alloc` (whose exception object is then the program's own, recorded as
/// usual) through this frame, hence the "C-unwind" ABI. The aligned forms keep to the real
/// operators ([`throwing_new_hook`]).
macro_rules! new_hook {
    ($name:ident => $real:ident, $op:expr, |$n:ident : usize $(, $t:ident : P)?| $(, $stub:ident)?) => {
        entry!("C-unwind" $name $(, $stub)?);
        #[allow(non_snake_case)]
        mod $name {
            use super::*;
            #[allow(unused_variables)]
            pub unsafe extern "C-unwind" fn imp($n: usize, p1: usize, p2: usize, p3: usize, cfa: u64, bp: u64) -> P {
                $(let $t = p1 as P;)?
                if sampling::skip($n) {
                    let p = call::malloc($n.max(1));
                    if !p.is_null() {
                        return p;
                    }
                    return call::$real($n $(, $t)?);
                }
                {
                    let Some(_g) = enter() else { return call::$real($n $(, $t)?) };
                    let p = call::malloc($n.max(1));
                    if !p.is_null() {
                        record::alloc(Caller { cfa, bp }, $op, p, $n);
                        return p;
                    }
                }
                // If the new_handler frees enough for a retry to succeed, that block is
                // recorded by the malloc hook the real operator calls.
                call::$real($n $(, $t)?)
            }
        }
    };
}

alloc_hook!("C" malloc => malloc, Op::Malloc, |n: usize| size = n, fast "mov rax, rdi");
alloc_hook!("C" memalign => memalign, Op::Memalign, |a: usize, n: usize| size = n, fast "mov rax, rsi");
alloc_hook!("C" aligned_alloc => aligned_alloc, Op::AlignedAlloc, |a: usize, n: usize| size = n, fast "mov rax, rsi");
alloc_hook!("C" valloc => valloc, Op::Valloc, |n: usize| size = n, fast "mov rax, rdi");
alloc_hook!("C" pvalloc => pvalloc, Op::Pvalloc, |n: usize| size = n, fast "mov rax, rdi");
new_hook!(_Znwm => new, Op::New, |n: usize|, sampled_new_stub);
new_hook!(_Znam => new_array, Op::NewArray, |n: usize|, sampled_new_stub);
new_hook!(_ZnwmRKSt9nothrow_t => new_nothrow, Op::NewNothrow, |n: usize, t: P|);
new_hook!(_ZnamRKSt9nothrow_t => new_array_nothrow, Op::NewArrayNothrow, |n: usize, t: P|);
throwing_new_hook!(_ZnwmSt11align_val_t => new_aligned via new_aligned_nothrow, Op::NewAligned, |n: usize, a: usize|);
throwing_new_hook!(_ZnamSt11align_val_t => new_array_aligned via new_array_aligned_nothrow, Op::NewArrayAligned, |n: usize, a: usize|);
alloc_hook!("C-unwind" _ZnwmSt11align_val_tRKSt9nothrow_t => new_aligned_nothrow, Op::NewAlignedNothrow, |n: usize, a: usize, t: P| size = n);
alloc_hook!("C-unwind" _ZnamSt11align_val_tRKSt9nothrow_t => new_array_aligned_nothrow, Op::NewArrayAlignedNothrow, |n: usize, a: usize, t: P| size = n);

// The overflow check leaves an overflowing n * m to the slow path, which records size 0.
entry!("C" calloc, sampled_alloc_stub, "mov rax, rdi\nimul rax, rsi\njo 2f", calloc);
mod calloc {
    use super::*;
    /// `calloc`: the recorded size is `n * m` (0 when that overflows, and then the call fails).
    pub unsafe extern "C" fn imp(n: usize, m: usize, _p2: usize, _p3: usize, cfa: u64, bp: u64) -> P {
        if sampling::skip(n.checked_mul(m).unwrap_or(0)) {
            return call::calloc(n, m);
        }
        let Some(_g) = enter() else { return call::calloc(n, m) };
        let p = call::calloc(n, m);
        record::alloc(Caller { cfa, bp }, Op::Calloc, p, n.checked_mul(m).unwrap_or(0));
        p
    }
}

entry!("C" posix_memalign, sampled_alloc_stub, "mov rax, rdx", posix_memalign);
mod posix_memalign {
    use super::*;
    /// `posix_memalign`: recorded only when it succeeds (it reports failure by return value).
    pub unsafe extern "C" fn imp(out: *mut P, a: usize, n: usize, _p3: usize, cfa: u64, bp: u64) -> i32 {
        if sampling::skip(n) {
            return call::posix_memalign(out, a, n);
        }
        let Some(_g) = enter() else { return call::posix_memalign(out, a, n) };
        let r = call::posix_memalign(out, a, n);
        record::alloc(Caller { cfa, bp }, Op::PosixMemalign, if r == 0 { *out } else { std::ptr::null_mut() }, n);
        r
    }
}

entry!("C" realloc, sampled_realloc_stub);
mod realloc {
    use super::*;
    /// `realloc`: one event holding both the released and the returned block.
    pub unsafe extern "C" fn imp(old: P, n: usize, _p2: usize, _p3: usize, cfa: u64, bp: u64) -> P {
        let Some(_g) = enter() else { return call::realloc(old, n) };
        let p = call::realloc(old, n);
        record::realloc(Caller { cfa, bp }, Op::Realloc, old, p, n);
        p
    }
}

entry!("C" reallocarray);
mod reallocarray {
    use super::*;
    /// `reallocarray`: `realloc(old, n * m)` that fails with ENOMEM on overflow (as glibc's).
    pub unsafe extern "C" fn imp(old: P, n: usize, m: usize, _p3: usize, cfa: u64, bp: u64) -> P {
        let Some(total) = n.checked_mul(m) else {
            *libc::__errno_location() = libc::ENOMEM;
            return std::ptr::null_mut();
        };
        let Some(_g) = enter() else { return call::realloc(old, total) };
        let p = call::realloc(old, total);
        record::realloc(Caller { cfa, bp }, Op::ReallocArray, old, p, total);
        p
    }
}

dealloc_hook!(free => free, Op::Free, |p: P|);
dealloc_hook!(_ZdlPv => delete, Op::Delete, |p: P|);
dealloc_hook!(_ZdaPv => delete_array, Op::DeleteArray, |p: P|);
dealloc_hook!(_ZdlPvm => delete_sized, Op::DeleteSized, |p: P, n: usize|);
dealloc_hook!(_ZdaPvm => delete_array_sized, Op::DeleteArraySized, |p: P, n: usize|);
dealloc_hook!(_ZdlPvSt11align_val_t => delete_aligned, Op::DeleteAligned, |p: P, a: usize|);
dealloc_hook!(_ZdaPvSt11align_val_t => delete_array_aligned, Op::DeleteArrayAligned, |p: P, a: usize|);
dealloc_hook!(_ZdlPvmSt11align_val_t => delete_sized_aligned, Op::DeleteSizedAligned, |p: P, n: usize, a: usize|);
dealloc_hook!(_ZdaPvmSt11align_val_t => delete_array_sized_aligned, Op::DeleteArraySizedAligned, |p: P, n: usize, a: usize|);
dealloc_hook!(_ZdlPvRKSt9nothrow_t => delete_nothrow, Op::DeleteNothrow, |p: P, t: P|);
dealloc_hook!(_ZdaPvRKSt9nothrow_t => delete_array_nothrow, Op::DeleteArrayNothrow, |p: P, t: P|);
dealloc_hook!(_ZdlPvSt11align_val_tRKSt9nothrow_t => delete_aligned_nothrow, Op::DeleteAlignedNothrow, |p: P, a: usize, t: P|);
dealloc_hook!(_ZdaPvSt11align_val_tRKSt9nothrow_t => delete_array_aligned_nothrow, Op::DeleteArrayAlignedNothrow, |p: P, a: usize, t: P|);

/// `_exit` skips atexit and destructors: write the trace out first.
#[allow(clippy::missing_safety_doc)]
#[no_mangle]
pub unsafe extern "C" fn _exit(status: i32) -> ! {
    // In a vfork child (after a failed exec, say) this is the parent's memory: `shutdown`
    // leaves it alone.
    crate::shutdown();
    call::exit_(status);
    libc::syscall(libc::SYS_exit_group, status as libc::c_long);
    unreachable!()
}

/// `_Exit` is `_exit` by another name.
#[allow(clippy::missing_safety_doc)]
#[no_mangle]
pub unsafe extern "C" fn _Exit(status: i32) -> ! {
    _exit(status)
}

mod pool_api;
mod replacements;
mod threads;
