//! The real allocation functions: the next definitions after this library in the loader's
//! search order (glibc's, or a replacement allocator the program links), found with
//! `dlsym(RTLD_NEXT)`. Until they are found (and while `dlsym` itself allocates), calls go to
//! glibc's `__libc_*` entry points.
//!
//! The C functions are looked up at start-up, the C++ operators on their first call. A C
//! program has no operator to find, and a failed `dlsym` makes glibc allocate its error message
//! (which names this library's path) from the program's own heap: the program's blocks then
//! sat at other addresses than without heaplens, by an amount that depended on where heaplens
//! was installed, and the sampled widgets program ran 1.00x or 1.05x its bare time depending on
//! the length of that path (15 interleaved rounds each). When the program calls an operator,
//! the library that defines it is loaded (or the program defines it itself, and then its own
//! comes first and this library's is never called).

use std::ffi::c_void;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::sysalloc::fallback;

type P = *mut c_void;

/// A thread's start routine.
pub type ThreadStart = extern "C" fn(P) -> P;

macro_rules! real_fns {
    ($( $name:ident = $sym:literal $(($late:ident))? : fn($($arg:ident : $ty:ty),*) -> $ret:ty, abi $abi:literal, else $fb:expr; )*) => {
        $(
            #[allow(non_upper_case_globals)]
            pub(crate) static $name: AtomicUsize = AtomicUsize::new(0);
        )*

        /// Looks up the real C functions (the C++ operators wait for their first call).
        pub fn resolve_all() {
            $(
                if !real_fns!(@late $($late)?) && $name.load(Ordering::Relaxed) == 0 {
                    // SAFETY: RTLD_NEXT lookups of a NUL-terminated name.
                    let p = unsafe { libc::dlsym(lookup(), concat!($sym, "\0").as_ptr().cast()) };
                    $name.store(p as usize, Ordering::Release);
                }
            )*
        }

        /// Replaces every real function found with what `fix` returns for its name
        /// (NUL-terminated) and address; 0 leaves the `__libc_*` fallback to serve.
        pub fn fix_each(fix: impl Fn(&'static str, usize) -> usize) {
            $(
                let a = $name.load(Ordering::Acquire);
                if a != 0 {
                    $name.store(fix(concat!($sym, "\0"), a), Ordering::Release);
                }
            )*
        }

        /// Calls into the real functions, one per interposed entry point.
        pub mod call {
            use super::*;
            $(
                #[inline(always)]
                #[allow(clippy::missing_safety_doc)]
                pub unsafe extern $abi fn $name($($arg: $ty),*) -> $ret {
                    let mut p = super::$name.load(Ordering::Acquire);
                    if p == 0 && real_fns!(@late $($late)?) {
                        p = super::resolve_late(&super::$name, concat!($sym, "\0"));
                    }
                    if p == 0 {
                        return $fb;
                    }
                    let f: unsafe extern $abi fn($($ty),*) -> $ret = std::mem::transmute(p);
                    f($($arg),*)
                }
            )*
        }
    };
    (@late late) => { true };
    (@late) => { false };
}

/// Where the real functions are looked up: `RTLD_NEXT` for a preloaded monitor, the global
/// scope (`RTLD_DEFAULT`) for one loaded by `heaplens attach`, which is in no scope the program
/// searches (see [`use_global_scope`]).
static GLOBAL_SCOPE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Looks the real functions up in the program's global scope from now on: for a monitor
/// loaded with `dlopen(RTLD_LOCAL)`, whose own definitions the program never sees.
pub fn use_global_scope() {
    GLOBAL_SCOPE.store(true, Ordering::Release);
}

fn lookup() -> *mut c_void {
    if GLOBAL_SCOPE.load(Ordering::Acquire) {
        libc::RTLD_DEFAULT
    } else {
        libc::RTLD_NEXT
    }
}

/// Looks up `sym` (NUL-terminated) on its first call; 0 when no library after this one
/// defines it (then it is looked up again next time: a library may be loaded later).
#[cold]
unsafe fn resolve_late(slot: &AtomicUsize, sym: &str) -> usize {
    let p = libc::dlsym(lookup(), sym.as_ptr().cast()) as usize;
    slot.store(p, Ordering::Release);
    p
}

real_fns! {
    malloc = "malloc": fn(n: usize) -> P, abi "C", else fallback::malloc(n);
    calloc = "calloc": fn(n: usize, m: usize) -> P, abi "C", else fallback::calloc(n, m);
    realloc = "realloc": fn(p: P, n: usize) -> P, abi "C", else fallback::realloc(p, n);
    free = "free": fn(p: P) -> (), abi "C", else fallback::free(p);
    memalign = "memalign": fn(a: usize, n: usize) -> P, abi "C", else fallback::memalign(a, n);
    posix_memalign = "posix_memalign": fn(out: *mut P, a: usize, n: usize) -> i32, abi "C", else posix_memalign_fallback(out, a, n);
    aligned_alloc = "aligned_alloc": fn(a: usize, n: usize) -> P, abi "C", else fallback::memalign(a, n);
    valloc = "valloc": fn(n: usize) -> P, abi "C", else fallback::memalign(page_size(), n);
    pvalloc = "pvalloc": fn(n: usize) -> P, abi "C", else fallback::memalign(page_size(), n.next_multiple_of(page_size()));
    new = "_Znwm" (late): fn(n: usize) -> P, abi "C-unwind", else fallback::malloc(n);
    new_array = "_Znam" (late): fn(n: usize) -> P, abi "C-unwind", else fallback::malloc(n);
    new_nothrow = "_ZnwmRKSt9nothrow_t" (late): fn(n: usize, t: P) -> P, abi "C-unwind", else fallback::malloc(n);
    new_array_nothrow = "_ZnamRKSt9nothrow_t" (late): fn(n: usize, t: P) -> P, abi "C-unwind", else fallback::malloc(n);
    new_aligned = "_ZnwmSt11align_val_t" (late): fn(n: usize, a: usize) -> P, abi "C-unwind", else fallback::memalign(a, n);
    new_array_aligned = "_ZnamSt11align_val_t" (late): fn(n: usize, a: usize) -> P, abi "C-unwind", else fallback::memalign(a, n);
    new_aligned_nothrow = "_ZnwmSt11align_val_tRKSt9nothrow_t" (late): fn(n: usize, a: usize, t: P) -> P, abi "C-unwind", else fallback::memalign(a, n);
    new_array_aligned_nothrow = "_ZnamSt11align_val_tRKSt9nothrow_t" (late): fn(n: usize, a: usize, t: P) -> P, abi "C-unwind", else fallback::memalign(a, n);
    delete = "_ZdlPv" (late): fn(p: P) -> (), abi "C", else fallback::free(p);
    delete_array = "_ZdaPv" (late): fn(p: P) -> (), abi "C", else fallback::free(p);
    delete_sized = "_ZdlPvm" (late): fn(p: P, n: usize) -> (), abi "C", else fallback::free(p);
    delete_array_sized = "_ZdaPvm" (late): fn(p: P, n: usize) -> (), abi "C", else fallback::free(p);
    delete_aligned = "_ZdlPvSt11align_val_t" (late): fn(p: P, a: usize) -> (), abi "C", else fallback::free(p);
    delete_array_aligned = "_ZdaPvSt11align_val_t" (late): fn(p: P, a: usize) -> (), abi "C", else fallback::free(p);
    delete_sized_aligned = "_ZdlPvmSt11align_val_t" (late): fn(p: P, n: usize, a: usize) -> (), abi "C", else fallback::free(p);
    delete_array_sized_aligned = "_ZdaPvmSt11align_val_t" (late): fn(p: P, n: usize, a: usize) -> (), abi "C", else fallback::free(p);
    delete_nothrow = "_ZdlPvRKSt9nothrow_t" (late): fn(p: P, t: P) -> (), abi "C", else fallback::free(p);
    delete_array_nothrow = "_ZdaPvRKSt9nothrow_t" (late): fn(p: P, t: P) -> (), abi "C", else fallback::free(p);
    delete_aligned_nothrow = "_ZdlPvSt11align_val_tRKSt9nothrow_t" (late): fn(p: P, a: usize, t: P) -> (), abi "C", else fallback::free(p);
    delete_array_aligned_nothrow = "_ZdaPvSt11align_val_tRKSt9nothrow_t" (late): fn(p: P, a: usize, t: P) -> (), abi "C", else fallback::free(p);
    exit_ = "_exit": fn(status: i32) -> (), abi "C", else { libc::syscall(libc::SYS_exit_group, status as libc::c_long); };
    pthread_create = "pthread_create": fn(t: *mut libc::pthread_t, a: *const libc::pthread_attr_t, f: ThreadStart, arg: P) -> i32, abi "C", else libc::EAGAIN;
    // Replacement allocators' own entry points (see `replacements.rs`): found when a program
    // that links the allocator first calls one. Without the allocator nothing calls them.
    mi_malloc = "mi_malloc" (late): fn(n: usize) -> P, abi "C", else std::ptr::null_mut();
    mi_calloc = "mi_calloc" (late): fn(n: usize, m: usize) -> P, abi "C", else std::ptr::null_mut();
    mi_zalloc = "mi_zalloc" (late): fn(n: usize) -> P, abi "C", else std::ptr::null_mut();
    mi_malloc_aligned = "mi_malloc_aligned" (late): fn(n: usize, a: usize) -> P, abi "C", else std::ptr::null_mut();
    mi_realloc = "mi_realloc" (late): fn(p: P, n: usize) -> P, abi "C", else std::ptr::null_mut();
    mi_reallocf = "mi_reallocf" (late): fn(p: P, n: usize) -> P, abi "C", else std::ptr::null_mut();
    mi_free = "mi_free" (late): fn(p: P) -> (), abi "C", else not_loaded(p);
    mi_free_size = "mi_free_size" (late): fn(p: P, n: usize) -> (), abi "C", else not_loaded(p);
    mi_usable_size = "mi_usable_size" (late): fn(p: P) -> usize, abi "C", else 0;
    mallocx = "mallocx" (late): fn(n: usize, flags: i32) -> P, abi "C", else std::ptr::null_mut();
    rallocx = "rallocx" (late): fn(p: P, n: usize, flags: i32) -> P, abi "C", else std::ptr::null_mut();
    dallocx = "dallocx" (late): fn(p: P, flags: i32) -> (), abi "C", else not_loaded(p);
    sdallocx = "sdallocx" (late): fn(p: P, n: usize, flags: i32) -> (), abi "C", else not_loaded(p);
    sallocx = "sallocx" (late): fn(p: P, flags: i32) -> usize, abi "C", else 0;
    tc_malloc = "tc_malloc" (late): fn(n: usize) -> P, abi "C", else std::ptr::null_mut();
    tc_calloc = "tc_calloc" (late): fn(n: usize, m: usize) -> P, abi "C", else std::ptr::null_mut();
    tc_memalign = "tc_memalign" (late): fn(a: usize, n: usize) -> P, abi "C", else std::ptr::null_mut();
    tc_new = "tc_new" (late): fn(n: usize) -> P, abi "C-unwind", else std::ptr::null_mut();
    tc_newarray = "tc_newarray" (late): fn(n: usize) -> P, abi "C-unwind", else std::ptr::null_mut();
    tc_realloc = "tc_realloc" (late): fn(p: P, n: usize) -> P, abi "C", else std::ptr::null_mut();
    tc_free = "tc_free" (late): fn(p: P) -> (), abi "C", else not_loaded(p);
    tc_free_sized = "tc_free_sized" (late): fn(p: P, n: usize) -> (), abi "C", else not_loaded(p);
    tc_delete = "tc_delete" (late): fn(p: P) -> (), abi "C", else not_loaded(p);
    tc_deletearray = "tc_deletearray" (late): fn(p: P) -> (), abi "C", else not_loaded(p);
    tc_malloc_size = "tc_malloc_size" (late): fn(p: P) -> usize, abi "C", else 0;
}

fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    unsafe { libc::sysconf(libc::_SC_PAGESIZE) as usize }
}

unsafe fn posix_memalign_fallback(out: *mut P, a: usize, n: usize) -> i32 {
    if !a.is_power_of_two() || !a.is_multiple_of(std::mem::size_of::<P>()) {
        return libc::EINVAL;
    }
    let p = fallback::memalign(a, n);
    if p.is_null() {
        return libc::ENOMEM;
    }
    *out = p;
    0
}

/// A replacement allocator's release called while the allocator is not loaded: it allocated
/// nothing, so there is nothing to release.
fn not_loaded(_p: P) {}
