//! Allocation and deallocation events, and their compact encoding.
//!
//! An Events block payload is `tid event*`, all events from one thread in the order they
//! happened. Each event starts with its head byte (the [`Op`] and two flags) and the time since
//! the previous event of the block, in the trace's [`crate::TimeSource`] units (the first is
//! relative to 0). Addresses are zigzag deltas against the previous event's address, because
//! consecutive allocations of a thread sit close together:
//!
//! ```text
//! allocation   := head dts daddr size [usable - size] stack
//! reallocation := head dts daddr (old_addr - addr) size [usable - size] stack
//! deallocation := head dts daddr
//! head         := op | USABLE_GLIBC (0x40) | ADDR_UNALIGNED (0x80)
//! ```
//!
//! The flags make the rows a fifth smaller for what the allocator itself determines (trace format
//! 2; measured on the 8-thread C++ churn benchmark's rows, the compressor then takes 15% less
//! time): with [`ADDR_UNALIGNED`] clear, the address delta is a multiple of 16 (every glibc
//! block is 16-aligned) and stored divided by 16; with [`USABLE_GLIBC`] set, the usable size is
//! [`glibc_usable`] of the requested size and the slack field is left out.
//!
//! A failed allocation has address 0; `realloc(p, 0)` that frees `p` has address 0 and size 0.

use crate::varint::{put_at, unzigzag, zigzag, Cursor};

/// Most bytes one encoded event takes.
pub const MAX_EVENT_LEN: usize = 64;

/// The bits of a row's head byte that hold its [`Op`].
pub const OP_BITS: u8 = 0x3f;
/// Head flag: the usable size is [`glibc_usable`] of the size, and the row has no slack field.
pub const USABLE_GLIBC: u8 = 0x40;
/// Head flag: the address delta is stored as is; clear, it is a multiple of 16 stored divided
/// by 16.
pub const ADDR_UNALIGNED: u8 = 0x80;

/// The usable size glibc's malloc gives a request of `size` bytes: its chunk (the request plus
/// the 8-byte size field, rounded up to 16 bytes, at least 32; `request2size` in glibc's
/// malloc.c) minus that size field. Wraps for sizes no allocation can have.
#[inline(always)]
pub fn glibc_usable(size: u64) -> u64 {
    (size.wrapping_add(23) & !15).max(32).wrapping_sub(8)
}

/// The thread id of an Events payload (`None`: cut short, or not a thread id).
pub fn tid(rows: &[u8]) -> Option<u32> {
    u32::try_from(crate::varint::read_var(rows, &mut 0)?).ok()
}

/// The timestamp of an Events payload's first event (`None`: no event).
pub fn first_ts(rows: &[u8]) -> Option<u64> {
    let mut p = 0;
    crate::varint::read_var(rows, &mut p)?;
    rows.get(p)?;
    crate::varint::read_var(rows, &mut (p + 1))
}

/// The zigzag code and head flag of an address delta (see [`ADDR_UNALIGNED`]).
#[inline(always)]
fn addr_code(delta: u64) -> (u64, u8) {
    let d = delta as i64;
    if d & 15 == 0 {
        (zigzag(d >> 4), 0)
    } else {
        (zigzag(d), ADDR_UNALIGNED)
    }
}

/// The address delta of a zigzag code under `head`'s flags.
#[inline(always)]
pub fn addr_delta(code: u64, head: u8) -> u64 {
    let d = unzigzag(code);
    (if head & ADDR_UNALIGNED != 0 { d } else { d.wrapping_shl(4) }) as u64
}

/// Set in the address of a block of a program's own pool ([`Op::PoolAlloc`]): pool blocks
/// often lie inside a block the program got from `malloc` (the arena's memory), and the tag
/// keeps the two apart wherever blocks are matched by address. User-space addresses on x86-64
/// (below 2^56 even with five-level paging) never have it, and it is low enough for the column
/// format's address deltas (which hold 62 bits and a sign).
pub const POOL_TAG: u64 = 1 << 60;

/// Return addresses from here on are not code: each stands for a pool of the program's
/// (`include/heaplens.h`), as the innermost frame of its blocks' stacks, so that every view
/// names the pool as it names a function. The monitor describes each as a module of its own
/// whose path is [`POOL_MODULE_PREFIX`] and the pool's name (see
/// `heaplens_interpret::symbolize`).
pub const POOL_FRAMES: u64 = 0xffff_fe00_0000_0000;

/// The start of a pool's module path (`[pool] name`).
pub const POOL_MODULE_PREFIX: &str = "[pool] ";

macro_rules! ops {
    ($($(#[$doc:meta])* $name:ident = $val:expr, $class:ident, $label:expr;)*) => {
        /// The entry point an event came through, so that `new` can be told from `malloc`
        /// and `delete[]` from `free`. On the wire it is one byte (`op as u8`); in memory it
        /// takes a word, so that an [`Event`] has no padding: LLVM copied the seven padding
        /// bytes of a one-byte op with two overlapping 4-byte moves, and reading them back
        /// stalled store forwarding in the analysis's replay loop (the 2- and 8-thread churn
        /// reports took 0.97-0.98 of their time with a word, 21 interleaved rounds).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[repr(u64)]
        pub enum Op { $($(#[$doc])* $name = $val,)* }

        impl Op {
            /// Decodes an op byte.
            #[inline(always)]
            pub fn from_u8(b: u8) -> Option<Op> {
                // A table, not a match: decoders call this once per event.
                static TABLE: [Option<Op>; 256] = {
                    let mut t = [None; 256];
                    $(t[$val] = Some(Op::$name);)*
                    t
                };
                TABLE[b as usize]
            }
            /// Which shape of record this op has.
            #[inline]
            pub fn class(self) -> OpClass {
                match self { $(Op::$name => OpClass::$class,)* }
            }
            /// The C or C++ spelling of the entry point.
            pub fn label(self) -> &'static str {
                match self { $(Op::$name => $label,)* }
            }
            /// Every op, in byte order.
            pub const ALL: &'static [Op] = &[$(Op::$name,)*];
        }
    };
}

ops! {
    /// `malloc`
    Malloc = 1, Alloc, "malloc";
    /// `calloc`
    Calloc = 2, Alloc, "calloc";
    /// `realloc`
    Realloc = 3, Realloc, "realloc";
    /// `reallocarray`
    ReallocArray = 4, Realloc, "reallocarray";
    /// `memalign`
    Memalign = 5, Alloc, "memalign";
    /// `posix_memalign`
    PosixMemalign = 6, Alloc, "posix_memalign";
    /// `aligned_alloc`
    AlignedAlloc = 7, Alloc, "aligned_alloc";
    /// `valloc`
    Valloc = 8, Alloc, "valloc";
    /// `pvalloc`
    Pvalloc = 9, Alloc, "pvalloc";
    /// `operator new(size_t)`
    New = 10, Alloc, "operator new";
    /// `operator new[](size_t)`
    NewArray = 11, Alloc, "operator new[]";
    /// `operator new(size_t, nothrow_t)`
    NewNothrow = 12, Alloc, "operator new(nothrow)";
    /// `operator new[](size_t, nothrow_t)`
    NewArrayNothrow = 13, Alloc, "operator new[](nothrow)";
    /// `operator new(size_t, align_val_t)`
    NewAligned = 14, Alloc, "operator new(align)";
    /// `operator new[](size_t, align_val_t)`
    NewArrayAligned = 15, Alloc, "operator new[](align)";
    /// `operator new(size_t, align_val_t, nothrow_t)`
    NewAlignedNothrow = 16, Alloc, "operator new(align, nothrow)";
    /// `operator new[](size_t, align_val_t, nothrow_t)`
    NewArrayAlignedNothrow = 17, Alloc, "operator new[](align, nothrow)";
    // Allocations and reallocations take the bytes below 32, releases those from 32 on: the
    // column format tells a release by its op byte alone.
    /// mimalloc's `mi_malloc`
    MiMalloc = 18, Alloc, "mi_malloc";
    /// mimalloc's `mi_calloc`
    MiCalloc = 19, Alloc, "mi_calloc";
    /// mimalloc's `mi_zalloc`
    MiZalloc = 20, Alloc, "mi_zalloc";
    /// mimalloc's `mi_malloc_aligned`
    MiMallocAligned = 21, Alloc, "mi_malloc_aligned";
    /// jemalloc's `mallocx`
    Mallocx = 22, Alloc, "mallocx";
    /// tcmalloc's `tc_malloc`
    TcMalloc = 23, Alloc, "tc_malloc";
    /// tcmalloc's `tc_calloc`
    TcCalloc = 24, Alloc, "tc_calloc";
    /// tcmalloc's `tc_memalign`
    TcMemalign = 25, Alloc, "tc_memalign";
    /// tcmalloc's `tc_new`
    TcNew = 26, Alloc, "tc_new";
    /// tcmalloc's `tc_newarray`
    TcNewArray = 27, Alloc, "tc_newarray";
    /// mimalloc's `mi_realloc`
    MiRealloc = 28, Realloc, "mi_realloc";
    /// A block of a program's own pool or arena (`heaplens_alloc` of `include/heaplens.h`);
    /// its address carries [`POOL_TAG`].
    PoolAlloc = 29, Alloc, "heaplens_alloc";
    /// jemalloc's `rallocx`
    Rallocx = 30, Realloc, "rallocx";
    /// tcmalloc's `tc_realloc`
    TcRealloc = 31, Realloc, "tc_realloc";
    /// `free`
    Free = 32, Dealloc, "free";
    /// `operator delete(void*)`
    Delete = 33, Dealloc, "operator delete";
    /// `operator delete[](void*)`
    DeleteArray = 34, Dealloc, "operator delete[]";
    /// `operator delete(void*, size_t)`
    DeleteSized = 35, Dealloc, "operator delete(sized)";
    /// `operator delete[](void*, size_t)`
    DeleteArraySized = 36, Dealloc, "operator delete[](sized)";
    /// `operator delete(void*, align_val_t)`
    DeleteAligned = 37, Dealloc, "operator delete(align)";
    /// `operator delete[](void*, align_val_t)`
    DeleteArrayAligned = 38, Dealloc, "operator delete[](align)";
    /// `operator delete(void*, size_t, align_val_t)`
    DeleteSizedAligned = 39, Dealloc, "operator delete(sized, align)";
    /// `operator delete[](void*, size_t, align_val_t)`
    DeleteArraySizedAligned = 40, Dealloc, "operator delete[](sized, align)";
    /// `operator delete(void*, nothrow_t)`
    DeleteNothrow = 41, Dealloc, "operator delete(nothrow)";
    /// `operator delete[](void*, nothrow_t)`
    DeleteArrayNothrow = 42, Dealloc, "operator delete[](nothrow)";
    /// `operator delete(void*, align_val_t, nothrow_t)`
    DeleteAlignedNothrow = 43, Dealloc, "operator delete(align, nothrow)";
    /// `operator delete[](void*, align_val_t, nothrow_t)`
    DeleteArrayAlignedNothrow = 44, Dealloc, "operator delete[](align, nothrow)";
    /// mimalloc's `mi_free`
    MiFree = 48, Dealloc, "mi_free";
    /// mimalloc's `mi_free_size`
    MiFreeSize = 49, Dealloc, "mi_free_size";
    /// jemalloc's `dallocx`
    Dallocx = 50, Dealloc, "dallocx";
    /// jemalloc's `sdallocx`
    Sdallocx = 51, Dealloc, "sdallocx";
    /// tcmalloc's `tc_free`
    TcFree = 52, Dealloc, "tc_free";
    /// tcmalloc's `tc_free_sized`
    TcFreeSized = 53, Dealloc, "tc_free_sized";
    /// tcmalloc's `tc_delete`
    TcDelete = 54, Dealloc, "tc_delete";
    /// tcmalloc's `tc_deletearray`
    TcDeleteArray = 55, Dealloc, "tc_deletearray";
    /// A pool block's release (`heaplens_free`).
    PoolFree = 56, Dealloc, "heaplens_free";
    /// A pool block released with all of its pool's (`heaplens_pool_reset`).
    PoolReset = 57, Dealloc, "heaplens_pool_reset";
}

/// The three record shapes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpClass {
    /// Returns a new block.
    Alloc,
    /// Moves a block: frees `old_addr` (when the move succeeded) and returns `addr`.
    Realloc,
    /// Releases a block.
    Dealloc,
}

impl Op {
    /// True for the C++ operators (`new`, `delete` and their variants).
    pub fn is_cxx(self) -> bool {
        matches!(self as u8, 10..=17 | 33..=44)
    }
}

/// One decoded event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Event {
    /// When it happened, in the trace's [`crate::TimeSource`] units (taken after an allocation
    /// returned, before a deallocation ran, so that an address's free always precedes its
    /// reuse); [`crate::TimeMap`] turns them into nanoseconds.
    pub ts: u64,
    /// Kernel thread id.
    pub tid: u32,
    /// Entry point.
    pub op: Op,
    /// Block returned (allocations) or released (deallocations); 0 when an allocation failed.
    pub addr: u64,
    /// The block a reallocation moved from; 0 for other ops and for `realloc(NULL, n)`.
    pub old_addr: u64,
    /// Requested bytes (for `calloc`, `n * size`); 0 for deallocations.
    pub size: u64,
    /// Usable bytes of the returned block (`malloc_usable_size`); 0 for deallocations.
    pub usable: u64,
    /// Call-stack trie node of the allocation site; 0 for deallocations.
    pub stack: u32,
}

/// Encodes one thread's events into a caller-provided buffer without allocating; the monitor's
/// hot path owns one per thread buffer.
#[derive(Debug, Clone, Copy, Default)]
pub struct EventEncoder {
    prev_ts: u64,
    prev_addr: u64,
}

impl EventEncoder {
    /// Writes the Events payload header (`tid`) at `*pos`; call once per block.
    #[inline]
    pub fn begin(&mut self, buf: &mut [u8], pos: &mut usize, tid: u32) {
        *self = Self::default();
        put_at(buf, pos, tid.into());
    }

    /// Writes the head byte (`op` with `flags` and the address's), the time and the address.
    #[inline(always)]
    fn head(&mut self, buf: &mut [u8], pos: &mut usize, op: Op, flags: u8, ts: u64, addr: u64) {
        let (code, unaligned) = addr_code(addr.wrapping_sub(self.prev_addr));
        buf[*pos] = op as u8 | flags | unaligned;
        *pos += 1;
        put_at(buf, pos, ts.wrapping_sub(self.prev_ts));
        put_at(buf, pos, code);
        self.prev_ts = ts;
        if addr != 0 {
            self.prev_addr = addr;
        }
    }

    /// [`USABLE_GLIBC`] when `usable` is glibc's for `size`, else 0.
    #[inline(always)]
    fn usable_flag(size: u64, usable: u64) -> u8 {
        if usable == glibc_usable(size) {
            USABLE_GLIBC
        } else {
            0
        }
    }

    /// The size, then the slack unless `flag` (from [`Self::usable_flag`]) says glibc's.
    #[inline(always)]
    fn sizes(buf: &mut [u8], pos: &mut usize, size: u64, usable: u64, flag: u8) {
        put_at(buf, pos, size);
        if flag == 0 {
            put_at(buf, pos, zigzag(usable.wrapping_sub(size) as i64));
        }
    }

    /// Encodes an allocation; `buf` needs [`MAX_EVENT_LEN`] bytes free at `*pos`.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    pub fn alloc(
        &mut self,
        buf: &mut [u8],
        pos: &mut usize,
        op: Op,
        ts: u64,
        addr: u64,
        size: u64,
        usable: u64,
        stack: u32,
    ) {
        self.alloc_unterminated(buf, pos, op, ts, addr, size, usable);
        put_at(buf, pos, stack.into());
    }

    /// Encodes an allocation up to, not including, its final field, the stack: the monitor's
    /// threads leave the stack for the writer thread to intern and append.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    pub fn alloc_unterminated(
        &mut self,
        buf: &mut [u8],
        pos: &mut usize,
        op: Op,
        ts: u64,
        addr: u64,
        size: u64,
        usable: u64,
    ) {
        let flag = Self::usable_flag(size, usable);
        self.head(buf, pos, op, flag, ts, addr);
        Self::sizes(buf, pos, size, usable, flag);
    }

    /// Encodes a reallocation; `buf` needs [`MAX_EVENT_LEN`] bytes free at `*pos`.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    pub fn realloc(
        &mut self,
        buf: &mut [u8],
        pos: &mut usize,
        op: Op,
        ts: u64,
        old: u64,
        addr: u64,
        size: u64,
        usable: u64,
        stack: u32,
    ) {
        self.realloc_unterminated(buf, pos, op, ts, old, addr, size, usable);
        put_at(buf, pos, stack.into());
    }

    /// Encodes a reallocation up to, not including, its final field, the stack (see
    /// [`EventEncoder::alloc_unterminated`]).
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    pub fn realloc_unterminated(
        &mut self,
        buf: &mut [u8],
        pos: &mut usize,
        op: Op,
        ts: u64,
        old: u64,
        addr: u64,
        size: u64,
        usable: u64,
    ) {
        let flag = Self::usable_flag(size, usable);
        self.head(buf, pos, op, flag, ts, addr);
        put_at(buf, pos, zigzag(old.wrapping_sub(addr) as i64));
        Self::sizes(buf, pos, size, usable, flag);
    }

    /// Encodes a decoded event again, whatever its shape; `buf` needs [`MAX_EVENT_LEN`] bytes
    /// free at `*pos`.
    #[inline]
    pub fn event(&mut self, buf: &mut [u8], pos: &mut usize, e: &Event) {
        match e.op.class() {
            OpClass::Alloc => self.alloc(buf, pos, e.op, e.ts, e.addr, e.size, e.usable, e.stack),
            OpClass::Realloc => self.realloc(buf, pos, e.op, e.ts, e.old_addr, e.addr, e.size, e.usable, e.stack),
            OpClass::Dealloc => self.dealloc(buf, pos, e.op, e.ts, e.addr),
        }
    }

    /// Encodes a deallocation; `buf` needs [`MAX_EVENT_LEN`] bytes free at `*pos`.
    #[inline(always)]
    pub fn dealloc(&mut self, buf: &mut [u8], pos: &mut usize, op: Op, ts: u64, addr: u64) {
        self.head(buf, pos, op, 0, ts, addr);
    }
}

/// Iterates the events of one Events payload. Yields `Err` once, then stops, when the payload is
/// malformed (an unknown op or a short record).
pub struct EventDecoder<'a> {
    c: Cursor<'a>,
    tid: u32,
    prev_ts: u64,
    prev_addr: u64,
    failed: bool,
}

impl<'a> EventDecoder<'a> {
    /// Starts decoding `payload`.
    ///
    /// # Errors
    /// [`crate::record::Malformed`] if the payload lacks its thread id.
    pub fn new(payload: &'a [u8]) -> Result<Self, crate::record::Malformed> {
        let mut c = Cursor::new(payload);
        let tid = c.var().ok_or(crate::record::Malformed("events"))? as u32;
        Ok(Self { c, tid, prev_ts: 0, prev_addr: 0, failed: false })
    }

    /// The thread these events belong to.
    pub fn tid(&self) -> u32 {
        self.tid
    }

    #[inline(always)]
    fn next_event(&mut self) -> Option<Event> {
        let head = self.c.u8()?;
        let op = Op::from_u8(head & OP_BITS)?;
        let ts = self.prev_ts.wrapping_add(self.c.var()?);
        let addr = self.prev_addr.wrapping_add(addr_delta(self.c.var()?, head));
        self.prev_ts = ts;
        if addr != 0 {
            self.prev_addr = addr;
        }
        let mut ev = Event { ts, tid: self.tid, op, addr, old_addr: 0, size: 0, usable: 0, stack: 0 };
        match op.class() {
            OpClass::Dealloc => {}
            class => {
                if class == OpClass::Realloc {
                    ev.old_addr = addr.wrapping_add(self.c.svar()? as u64);
                }
                ev.size = self.c.var()?;
                ev.usable = if head & USABLE_GLIBC != 0 {
                    glibc_usable(ev.size)
                } else {
                    ev.size.wrapping_add(self.c.svar()? as u64)
                };
                ev.stack = u32::try_from(self.c.var()?).ok()?;
            }
        }
        Some(ev)
    }
}

impl Iterator for EventDecoder<'_> {
    type Item = Result<Event, crate::record::Malformed>;

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.c.is_empty() {
            return None;
        }
        match self.next_event() {
            Some(e) => Some(Ok(e)),
            None => {
                self.failed = true;
                Some(Err(crate::record::Malformed("event")))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn glibc_usable_is_malloc_usable_size() {
        // malloc_usable_size of glibc 2.36 on x86_64 for these requests.
        let seen = [
            (0, 24),
            (1, 24),
            (24, 24),
            (25, 40),
            (40, 40),
            (41, 56),
            (100, 104),
            (1000, 1000),
            (4096, 4104),
            (100000, 100008),
        ];
        for (size, usable) in seen {
            assert_eq!(glibc_usable(size), usable, "size {size}");
        }
    }

    #[test]
    fn head_flags_shorten_rows_and_round_trip() {
        let mut enc = EventEncoder::default();
        let (mut buf, mut pos) = ([0u8; 256], 0);
        enc.begin(&mut buf, &mut pos, 1);
        let start = pos;
        // 16-aligned delta of 4096 (256 after division: two bytes zigzagged) and glibc's usable.
        enc.alloc(&mut buf, &mut pos, Op::Malloc, 5, 0x1000, 100, 104, 3);
        assert_eq!(buf[start], Op::Malloc as u8 | USABLE_GLIBC);
        assert_eq!(pos - start, 1 + 1 + 2 + 1 + 1);
        let next = pos;
        // An odd delta, and a usable size that is not glibc's.
        enc.alloc(&mut buf, &mut pos, Op::Malloc, 6, 0x1008, 100, 112, 3);
        assert_eq!(buf[next], Op::Malloc as u8 | ADDR_UNALIGNED);
        assert_eq!(pos - next, 1 + 1 + 1 + 1 + 1 + 1);
        enc.dealloc(&mut buf, &mut pos, Op::Free, 7, 0x1000);
        enc.realloc(&mut buf, &mut pos, Op::Realloc, 8, 0x1008, 0x7fff_0000_0003, 1 << 20, (1 << 20) + 4080, 4);
        let evs: Vec<Event> = EventDecoder::new(&buf[..pos]).unwrap().map(Result::unwrap).collect();
        let got: Vec<_> = evs.iter().map(|e| (e.op, e.ts, e.addr, e.old_addr, e.size, e.usable)).collect();
        assert_eq!(
            got,
            [
                (Op::Malloc, 5, 0x1000, 0, 100, 104),
                (Op::Malloc, 6, 0x1008, 0, 100, 112),
                (Op::Free, 7, 0x1000, 0, 0, 0),
                (Op::Realloc, 8, 0x7fff_0000_0003, 0x1008, 1 << 20, (1 << 20) + 4080),
            ]
        );
    }

    #[test]
    fn events_round_trip() {
        let mut buf = [0u8; 1024];
        let mut pos = 0;
        let mut enc = EventEncoder::default();
        enc.begin(&mut buf, &mut pos, 42);
        enc.alloc(&mut buf, &mut pos, Op::Malloc, 1000, 0x5555_0000_1000, 204, 216, 7);
        enc.realloc(&mut buf, &mut pos, Op::Realloc, 1500, 0x5555_0000_1000, 0x5555_0000_0100, 300, 312, 9);
        enc.dealloc(&mut buf, &mut pos, Op::Delete, 1600, 0x5555_0000_0100);
        enc.alloc(&mut buf, &mut pos, Op::Calloc, 1700, 0, 1 << 50, 0, 3);
        let evs: Vec<Event> = EventDecoder::new(&buf[..pos]).unwrap().map(Result::unwrap).collect();
        assert_eq!(evs.len(), 4);
        assert_eq!(
            evs[0],
            Event {
                ts: 1000,
                tid: 42,
                op: Op::Malloc,
                addr: 0x5555_0000_1000,
                old_addr: 0,
                size: 204,
                usable: 216,
                stack: 7
            }
        );
        assert_eq!(
            (evs[1].old_addr, evs[1].addr, evs[1].size, evs[1].usable, evs[1].stack),
            (0x5555_0000_1000, 0x5555_0000_0100, 300, 312, 9)
        );
        assert_eq!((evs[2].op, evs[2].ts, evs[2].addr), (Op::Delete, 1600, 0x5555_0000_0100));
        assert_eq!((evs[3].addr, evs[3].size, evs[3].usable), (0, 1 << 50, 0));
    }

    #[test]
    fn truncated_payload_is_an_error_not_a_panic() {
        let mut buf = [0u8; 128];
        let mut pos = 0;
        let mut enc = EventEncoder::default();
        enc.begin(&mut buf, &mut pos, 1);
        enc.alloc(&mut buf, &mut pos, Op::Malloc, 5, 0x1000, 10, 24, 1);
        let r: Vec<_> = EventDecoder::new(&buf[..pos - 1]).unwrap().collect();
        assert_eq!(r.len(), 1);
        assert!(r[0].is_err());
    }

    #[test]
    fn op_bytes_round_trip() {
        for &op in Op::ALL {
            assert_eq!(Op::from_u8(op as u8), Some(op));
            assert_eq!(op as u8 >= Op::Free as u8, op.class() == OpClass::Dealloc, "{op:?}: see `ops!`");
        }
        assert!(Op::New.is_cxx() && !Op::Malloc.is_cxx() && Op::DeleteArray.is_cxx());
    }
}
