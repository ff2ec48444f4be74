//! The sampler's fast path in the entry stubs themselves (`heaplens run --sample-rate`).
//!
//! While sampling, nearly every call goes unrecorded: an allocation only counts its bytes down
//! in the thread's slot, a deallocation of an unrecorded block only finds its filter bucket
//! empty (see [`crate::sampling`]). Done in the stub, such a call is a dozen instructions and a
//! tail jump into the real allocator: no frame, no saved registers, the real function returns
//! straight to the program. Everything else (sampling off, a sample, a filter hit, a real
//! function not resolved yet, a size that does not fit) falls through to the Rust hook, which
//! decides again from scratch: the stub writes nothing before it commits to the fast path.
//!
//! Scratch registers are rax, r10 and r11 (never arguments); r8 and r9 are set for the hook as
//! in every entry stub.
//!
//! What the stubs read of the monitor lives in [`HOT`] (a program that touches a lot of memory
//! between two calls evicts the monitor's data from the first-level cache): the flag, the
//! thread slot's offset and the real `malloc`, `free`, `calloc` and `realloc` in its first
//! cache line, the rarer functions in the second. The slot is then reached fs-relative, as C
//! code reaches an initial-exec thread-local; the offset used to come through `@GOTTPOFF`, a
//! third line to miss (no difference measured on sampled widgets, 1.012x and 1.010x over 31
//! rounds, but one load fewer). (Using each real function's pointer as the armed flag instead
//! saves instructions but measured slower, 1.057x against 1.023x on sampled widgets.)

use std::sync::atomic::{AtomicIsize, AtomicU64, AtomicUsize, Ordering};

/// Copies of what the stubs read, set by [`arm`] once everything is resolved.
#[repr(C, align(64))]
pub(crate) struct Hot {
    /// Non-zero when the stubs may take the fast path: the sample rate.
    pub armed: AtomicU64,
    /// The thread's slot's offset from the thread pointer (`crate::tls`): read here, in the
    /// line the stub loads anyway, instead of from the GOT, a third line a call could miss.
    pub tls_offset: AtomicIsize,
    pub malloc: AtomicUsize,
    pub free: AtomicUsize,
    pub calloc: AtomicUsize,
    pub realloc: AtomicUsize,
    pub memalign: AtomicUsize,
    pub aligned_alloc: AtomicUsize,
    pub posix_memalign: AtomicUsize,
    pub valloc: AtomicUsize,
    pub pvalloc: AtomicUsize,
}

pub(crate) static HOT: Hot = Hot {
    armed: AtomicU64::new(0),
    tls_offset: AtomicIsize::new(0),
    malloc: AtomicUsize::new(0),
    free: AtomicUsize::new(0),
    calloc: AtomicUsize::new(0),
    realloc: AtomicUsize::new(0),
    memalign: AtomicUsize::new(0),
    aligned_alloc: AtomicUsize::new(0),
    posix_memalign: AtomicUsize::new(0),
    valloc: AtomicUsize::new(0),
    pvalloc: AtomicUsize::new(0),
};

/// Lets the stubs take the fast path while sampling. Call once the real functions and the
/// sample rate are set; a stub that finds a field zero takes the slow path.
pub fn arm() {
    use crate::real;
    let rate = crate::sampling::rate();
    let tls_offset = crate::tls::offset();
    if rate == 0 || tls_offset == 0 {
        return;
    }
    HOT.tls_offset.store(tls_offset, Ordering::Relaxed);
    let copy = |to: &AtomicUsize, from: &AtomicUsize| to.store(from.load(Ordering::Acquire), Ordering::Relaxed);
    copy(&HOT.malloc, &real::malloc);
    copy(&HOT.free, &real::free);
    copy(&HOT.calloc, &real::calloc);
    copy(&HOT.memalign, &real::memalign);
    copy(&HOT.aligned_alloc, &real::aligned_alloc);
    copy(&HOT.posix_memalign, &real::posix_memalign);
    copy(&HOT.valloc, &real::valloc);
    copy(&HOT.pvalloc, &real::pvalloc);
    copy(&HOT.realloc, &real::realloc);
    HOT.armed.store(rate, Ordering::Release);
}

/// Jumps to `2f` (the slow path) unless the stubs are armed. Needs the operands `hot` and
/// `armed`; clobbers r10.
macro_rules! armed {
    () => {
        "mov r10, qword ptr [rip + {hot} + {armed}]\ntest r10, r10\njz 2f"
    };
}

/// Jumps to `2f` when the block in rdi may be a recorded one: `sampling::bucket` (the top 16 bits
/// of `(addr >> 4) * k`), then bit `b % 8` of byte `b / 8` of `sampling::OCCUPIED`. Needs the
/// operands `k` and `occupied`; clobbers rax, r10, r11.
macro_rules! occupied_test {
    () => {
        "mov rax, rdi\nshr rax, 4\nmovabs r11, {k}\nimul rax, r11\nshr rax, 48\nmov r11, rax\nshr r11, 3\n\
         lea r10, [rip + {occupied}]\nmovzx r10d, byte ptr [r10 + r11]\nand eax, 7\nbt r10d, eax\njc 2f"
    };
}

/// Counts the bytes in register `$size` down: this thread's slot offset from the thread pointer
/// (initial-exec TLS, `csrc/tls.c`, copied into [`HOT`]) in r10, its bytes left after this call
/// in r11, and a jump to `2f` when that crosses zero (the call is sampled). Writes nothing:
/// [`commit`] does. Needs the operands `hot`, `tls` and `left`.
macro_rules! count_down {
    ($size:literal) => {
        concat!(
            "mov r10, qword ptr [rip + {hot} + {tls}]\nmov r11, qword ptr fs:[r10 + {left}]\nsub r11, ",
            $size,
            "\ntest r11, r11\njle 2f"
        )
    };
}

/// The real function (operand `real`, an offset in [`HOT`]) in rax, or a jump to `2f` when it
/// is not known.
macro_rules! real_or_slow {
    () => {
        "mov rax, qword ptr [rip + {hot} + {real}]\ntest rax, rax\njz 2f"
    };
}

/// Stores the count [`count_down`] left in r11: the call is not sampled.
macro_rules! commit {
    () => {
        "mov qword ptr fs:[r10 + {left}], r11"
    };
}

/// The slow path at `2:`: the caller's frame in r8 and r9, as every entry stub leaves it, and on
/// to the Rust hook (operand `imp`).
macro_rules! to_hook {
    () => {
        "2:\nlea r8, [rsp + 8]\nmov r9, rbp\njmp {imp}"
    };
}

/// Assembles a stub body from instructions (the snippets above) with the operands they use:
/// `hot`, `armed`, `real` (the offset of [`Hot`] field `$real`) and `imp` always, `left` for
/// stubs that count bytes down (`count`), `k` and `occupied` for stubs that test the filter
/// (`filter`).
macro_rules! stub_asm {
    ($real:ident, $imp:path, count, [$($insn:expr),* $(,)?]) => {
        crate::fastpath::stub_asm!(@ $real, $imp, [$($insn),*], left = const crate::tls::SAMPLE_LEFT_OFFSET,
            tls = const std::mem::offset_of!(crate::fastpath::Hot, tls_offset))
    };
    ($real:ident, $imp:path, filter, [$($insn:expr),* $(,)?]) => {
        crate::fastpath::stub_asm!(@ $real, $imp, [$($insn),*],
            k = const 0x9e37_79b9_7f4a_7c15u64, occupied = sym crate::sampling::OCCUPIED)
    };
    ($real:ident, $imp:path, count filter, [$($insn:expr),* $(,)?]) => {
        crate::fastpath::stub_asm!(@ $real, $imp, [$($insn),*], left = const crate::tls::SAMPLE_LEFT_OFFSET,
            tls = const std::mem::offset_of!(crate::fastpath::Hot, tls_offset), k = const 0x9e37_79b9_7f4a_7c15u64, occupied = sym crate::sampling::OCCUPIED)
    };
    (@ $real:ident, $imp:path, [$($insn:expr),*], $($operands:tt)*) => {
        std::arch::naked_asm!(
            $($insn,)*
            hot = sym crate::fastpath::HOT,
            armed = const std::mem::offset_of!(crate::fastpath::Hot, armed),
            real = const std::mem::offset_of!(crate::fastpath::Hot, $real),
            imp = sym $imp,
            $($operands)*
        )
    };
}

/// The body of an allocating entry stub: `$size` puts the requested bytes in rax (or jumps to
/// `2f`), `$real` names the real function's pointer in [`HOT`], `$imp` the Rust hook.
macro_rules! sampled_alloc_stub {
    ($size:literal, $real:ident, $imp:path) => {
        crate::fastpath::stub_asm! { $real, $imp, count, [
            crate::fastpath::armed!(),
            $size,
            crate::fastpath::count_down!("rax"),
            crate::fastpath::real_or_slow!(),
            crate::fastpath::commit!(),
            "jmp rax",
            crate::fastpath::to_hook!(),
        ] }
    };
}

/// The body of a deallocating entry stub: a non-null block whose filter bucket is not occupied
/// goes to the real `free` (all the C++ `operator delete`s of libstdc++ only call `free`). Its
/// hook takes the arguments as they came (no caller frame: deallocations record no stack).
macro_rules! sampled_free_stub {
    ($imp:path) => {
        crate::fastpath::stub_asm! { free, $imp, filter, [
            crate::fastpath::armed!(),
            "test rdi, rdi",
            "jz 2f",
            crate::fastpath::occupied_test!(),
            crate::fastpath::real_or_slow!(),
            "jmp rax",
            "2:",
            "jmp {imp}",
        ] }
    };
}

/// The body of the plain `operator new` / `new[]` stubs: with the bytes counted down, the block
/// comes from the real `malloc` (of at least one byte, as libstdc++'s operators do). That call
/// returns here, so this stub has a frame, described to unwinders by its CFI. When `malloc`
/// fails, the Rust hook takes over (it runs the real operator: new_handler, `bad_alloc`).
macro_rules! sampled_new_stub {
    ($imp:path) => {
        crate::fastpath::stub_asm! { malloc, $imp, count, [
            ".cfi_startproc",
            crate::fastpath::armed!(),
            crate::fastpath::count_down!("rdi"),
            crate::fastpath::real_or_slow!(),
            crate::fastpath::commit!(),
            // Keeps the size for the slow path, and aligns the stack for the call.
            "push rdi",
            ".cfi_adjust_cfa_offset 8",
            "cmp rdi, 1",
            "adc rdi, 0",
            "call rax",
            "pop rdi",
            ".cfi_adjust_cfa_offset -8",
            "test rax, rax",
            "jz 2f",
            "ret",
            crate::fastpath::to_hook!(),
            ".cfi_endproc",
        ] }
    };
}

/// The body of the `realloc` stub: a block that is not recorded (null, or its filter bucket not
/// occupied) resized to a size that the count-down does not sample goes to the real `realloc`.
macro_rules! sampled_realloc_stub {
    ($imp:path) => {
        crate::fastpath::stub_asm! { realloc, $imp, count filter, [
            crate::fastpath::armed!(),
            "test rdi, rdi",
            "jz 3f",
            crate::fastpath::occupied_test!(),
            "3:",
            crate::fastpath::count_down!("rsi"),
            crate::fastpath::real_or_slow!(),
            crate::fastpath::commit!(),
            "jmp rax",
            crate::fastpath::to_hook!(),
        ] }
    };
}

pub(crate) use {
    armed, commit, count_down, occupied_test, real_or_slow, sampled_alloc_stub, sampled_free_stub, sampled_new_stub,
    sampled_realloc_stub, stub_asm, to_hook,
};
