//! The entry points of the replacement allocators a program may link directly: mimalloc's
//! `mi_*`, jemalloc's `*allocx` and tcmalloc's `tc_*`. Their `malloc` and `free` (when they
//! replace glibc's) go through the standard hooks; these catch the calls a program makes to
//! their own names, which would otherwise be invisible, and record them under those names.
//! Without the allocator in the process nothing calls them. Each takes the block's usable size
//! from its own allocator (`mi_usable_size`, `sallocx`, `tc_malloc_size`), never from glibc.
//!
//! When such an allocator's `malloc` calls its own `mi_malloc` through the PLT, the call lands
//! here with the guard already held and is passed on unrecorded: one event per program call.

use super::*;

// Every `imp` takes four argument registers before the caller's frame (r8, r9: see `entry!`),
// whatever its entry point's own arity.

macro_rules! family_alloc {
    ($abi:literal $name:ident, $op:expr, usable $usable:ident($($extra:expr)?), |$a0:ident, $a1:ident, $a2:ident : $t2:ty| ($($arg:expr),*) size = $size:expr) => {
        entry!($abi $name);
        #[allow(non_snake_case)]
        mod $name {
            use super::*;
            #[allow(unused_variables, clippy::unnecessary_cast)]
            pub unsafe extern $abi fn imp($a0: usize, $a1: usize, $a2: $t2, _a3: usize, cfa: u64, bp: u64) -> P {
                if sampling::skip($size) {
                    return call::$name($($arg),*);
                }
                let Some(_g) = enter() else { return call::$name($($arg),*) };
                let p = call::$name($($arg),*);
                record::alloc_usable(Caller { cfa, bp }, $op, p, $size, None, |p| unsafe { call::$usable(p $(, $extra)?) });
                p
            }
        }
    };
}

macro_rules! family_realloc {
    ($name:ident, $op:expr, usable $usable:ident($($extra:expr)?), |$old:ident, $n:ident, $a2:ident : $t2:ty| ($($arg:expr),*)) => {
        entry!("C" $name);
        #[allow(non_snake_case)]
        mod $name {
            use super::*;
            #[allow(unused_variables)]
            pub unsafe extern "C" fn imp($old: P, $n: usize, $a2: $t2, _a3: usize, cfa: u64, bp: u64) -> P {
                let Some(_g) = enter() else { return call::$name($($arg),*) };
                let p = call::$name($($arg),*);
                record::realloc_usable(Caller { cfa, bp }, $op, $old, p, $n, |p| unsafe { call::$usable(p $(, $extra)?) });
                p
            }
        }
    };
}

macro_rules! family_free {
    ($name:ident, $op:expr, |$p:ident : P $(, $a:ident : $t:ty)*|) => {
        entry!("C" $name);
        #[allow(non_snake_case)]
        mod $name {
            use super::*;
            pub unsafe extern "C" fn imp($p: P $(, $a: $t)*) {
                // As `free`: a sampled trace has no use for null releases, nor for releases of
                // blocks it did not record.
                if if $p.is_null() { sampling::enabled() } else { sampling::skip_free($p as u64) } {
                    return call::$name($p $(, $a)*);
                }
                let Some(_g) = enter() else { return call::$name($p $(, $a)*) };
                if $p.is_null() {
                    record::null_free($op);
                } else {
                    record::dealloc($op, $p);
                }
                call::$name($p $(, $a)*)
            }
        }
    };
}

family_alloc!("C" mi_malloc, Op::MiMalloc, usable mi_usable_size(), |n, _b, _c: usize| (n) size = n);
family_alloc!("C" mi_calloc, Op::MiCalloc, usable mi_usable_size(), |n, m, _c: usize| (n, m) size = n.checked_mul(m).unwrap_or(0));
family_alloc!("C" mi_zalloc, Op::MiZalloc, usable mi_usable_size(), |n, _b, _c: usize| (n) size = n);
family_alloc!("C" mi_malloc_aligned, Op::MiMallocAligned, usable mi_usable_size(), |n, a, _c: usize| (n, a) size = n);
family_realloc!(mi_realloc, Op::MiRealloc, usable mi_usable_size(), |old, n, _c: usize| (old, n));

// `mi_reallocf` is `mi_realloc` that releases the block when it fails: recorded as one.
entry!("C" mi_reallocf);
mod mi_reallocf {
    use super::*;
    pub unsafe extern "C" fn imp(old: P, n: usize, _c: usize, _a3: usize, cfa: u64, bp: u64) -> P {
        let Some(_g) = enter() else { return call::mi_reallocf(old, n) };
        let p = call::mi_reallocf(old, n);
        if p.is_null() && n != 0 {
            if !old.is_null() {
                record::dealloc(Op::MiFree, old);
            }
            return p;
        }
        record::realloc_usable(Caller { cfa, bp }, Op::MiRealloc, old, p, n, |p| unsafe { call::mi_usable_size(p) });
        p
    }
}
family_free!(mi_free, Op::MiFree, |p: P|);
family_free!(mi_free_size, Op::MiFreeSize, |p: P, n: usize|);

family_alloc!("C" mallocx, Op::Mallocx, usable sallocx(0), |n, flags, _c: usize| (n, flags as i32) size = n);
family_realloc!(rallocx, Op::Rallocx, usable sallocx(0), |old, n, flags: i32| (old, n, flags));
family_free!(dallocx, Op::Dallocx, |p: P, flags: i32|);
family_free!(sdallocx, Op::Sdallocx, |p: P, n: usize, flags: i32|);

family_alloc!("C" tc_malloc, Op::TcMalloc, usable tc_malloc_size(), |n, _b, _c: usize| (n) size = n);
family_alloc!("C" tc_calloc, Op::TcCalloc, usable tc_malloc_size(), |n, m, _c: usize| (n, m) size = n.checked_mul(m).unwrap_or(0));
family_alloc!("C" tc_memalign, Op::TcMemalign, usable tc_malloc_size(), |a, n, _c: usize| (a, n) size = n);
family_alloc!("C-unwind" tc_new, Op::TcNew, usable tc_malloc_size(), |n, _b, _c: usize| (n) size = n);
family_alloc!("C-unwind" tc_newarray, Op::TcNewArray, usable tc_malloc_size(), |n, _b, _c: usize| (n) size = n);
family_realloc!(tc_realloc, Op::TcRealloc, usable tc_malloc_size(), |old, n, _c: usize| (old, n));
family_free!(tc_free, Op::TcFree, |p: P|);
family_free!(tc_free_sized, Op::TcFreeSized, |p: P, n: usize|);
family_free!(tc_delete, Op::TcDelete, |p: P|);
family_free!(tc_deletearray, Op::TcDeleteArray, |p: P|);
