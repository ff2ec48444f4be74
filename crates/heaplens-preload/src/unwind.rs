//! Call-stack capture: DWARF CFI unwinding (framehop) from the unwind tables the loader already
//! mapped, so programs built without frame pointers (most distribution binaries) still give
//! whole stacks. Unwind rules are cached per thread by framehop; the set of modules is an
//! immutable snapshot swapped atomically when a dlopen/dlclose changes it, so the hot path
//! takes no lock.

use std::arch::asm;
use std::ops::Range;
use std::sync::atomic::{AtomicPtr, Ordering};

use framehop::x86_64::{CacheX86_64, UnwindRegsX86_64, UnwinderX86_64};
use framehop::{ExplicitModuleSectionInfo, FrameAddress, MustNotAllocateDuringUnwind, Unwinder};
use heaplens_trace::Segment;

mod recent;
pub use recent::RECENT;
use recent::{Recent, RECENT_DEPTH};

/// Per-thread unwind-rule cache (allocation-free during unwinding).
pub type Cache = CacheX86_64<MustNotAllocateDuringUnwind>;

/// An immutable view of the module set: the unwinder and the ranges it covers.
struct Snapshot {
    unwinder: UnwinderX86_64<Vec<u8>, MustNotAllocateDuringUnwind>,
    /// Sorted by start.
    ranges: Vec<Range<u64>>,
}

impl Snapshot {
    /// True when some known module maps `addr`.
    fn covers(&self, addr: u64) -> bool {
        let i = self.ranges.partition_point(|r| r.start <= addr);
        i > 0 && self.ranges[i - 1].contains(&addr)
    }
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
    ranges.sort_by_key(|r| r.start);
    CURRENT.store(Box::into_raw(Box::new(Snapshot { unwinder: u, ranges })), Ordering::Release);
}

/// A call chain as a capture left it, outermost frame first. `slot[i]` is the stack address
/// that held return address `ret[i]` (on x86_64 always the unwound frame's CFA - 8), and
/// `node[i]` the trie node of the path from the root to frame `i`.
struct Chain {
    ret: Box<[u64]>,
    slot: Box<[u64]>,
    node: Box<[u32]>,
    len: usize,
    /// False when the chain is not known to its root (cut at the depth cap, or stopped in code
    /// of a module not yet known): nothing may be matched against it.
    whole: bool,
}

impl Chain {
    fn new(n: usize) -> Self {
        Self {
            ret: vec![0; n].into_boxed_slice(),
            slot: vec![0; n].into_boxed_slice(),
            node: vec![0; n].into_boxed_slice(),
            len: 0,
            whole: false,
        }
    }

    /// Moves cursor `k` (frames `0..k` still ahead, innermost last) past frames inside `slot`,
    /// and tells whether frame `k - 1` then is `(slot, ret)`.
    #[inline(always)]
    fn meets(&self, k: &mut usize, slot: u64, ret: u64) -> bool {
        if *k > 0 && self.slot[*k - 1] < slot {
            // Usually the chains meet within a few frames: step. Recursion unwinding by many
            // frames at once: search.
            let mut j = *k - 1;
            let near = j.saturating_sub(4);
            while j > near && self.slot[j - 1] < slot {
                j -= 1;
            }
            if j == near && j > 0 && self.slot[j - 1] < slot {
                j = self.slot[..j - 1].partition_point(|&s| s >= slot);
            }
            *k = j;
        }
        *k > 0 && self.slot[*k - 1] == slot && self.ret[*k - 1] == ret
    }

    /// True when every frame outside frame `m` is still in place: its return address still
    /// sits in its slot. A caller that returned and was called again from another site would
    /// have overwritten at least one of them. `[lo, hi)` is readable stack.
    #[inline]
    fn outer_intact(&self, m: usize, lo: u64, hi: u64) -> bool {
        intact(&self.slot[..m], &self.ret[..m], lo, hi)
    }

    /// Makes frames `0..n` those of `other` (their nodes are copied by [`Walker::intern`],
    /// the only reader of nodes).
    fn copy_prefix(&mut self, other: &Chain, n: usize) {
        self.ret[..n].copy_from_slice(&other.ret[..n]);
        self.slot[..n].copy_from_slice(&other.slot[..n]);
    }
}

/// True when every return address `ret[i]` still sits in its stack slot `slot[i]` (slots from
/// a chain, highest first). `[lo, hi)` is readable stack.
#[inline(always)]
fn intact(slot: &[u64], ret: &[u64], lo: u64, hi: u64) -> bool {
    let (Some(&highest), Some(&lowest)) = (slot.first(), slot.last()) else { return true };
    if lowest < lo || highest > hi - 8 {
        return false;
    }
    // Four frames a step, their differences or-ed together without a branch each: a deep
    // stack's outer frames are all checked on nearly every capture (the loop that stopped at the
    // first difference was 60% of the capture on 190-frame stacks).
    // SAFETY: every slot lies within [lo, hi), checked above, and is 8-aligned (it came from a
    // CFA, which the x86_64 ABI keeps 16-aligned at calls).
    let at = |s: u64| unsafe { std::ptr::read(s as *const u64) };
    let (slots4, slots_rest) = slot.split_at(slot.len() & !3);
    let (rets4, rets_rest) = ret[..slot.len()].split_at(slot.len() & !3);
    for (s, r) in slots4.chunks_exact(4).zip(rets4.chunks_exact(4)) {
        let d = (at(s[0]) ^ r[0]) | (at(s[1]) ^ r[1]) | (at(s[2]) ^ r[2]) | (at(s[3]) ^ r[3]);
        if d != 0 {
            return false;
        }
    }
    slots_rest.iter().zip(rets_rest).all(|(&s, &r)| at(s) == r)
}

/// A capture that throws away at least this many frames of the previous stack archives it.
const ARCHIVE_MIN_DISCARD: usize = 8;

/// Where a thread's recent stacks were, so the next capture can stop unwinding where the
/// stacks meet again (mprof saw 60-75% of a call chain unchanged between allocations).
///
/// Two chains are kept: the previous stack, and an archive of the deepest stack a capture
/// recently cut back. The archive is what recursion needs: a program that allocates at depth
/// 250, then 100, then 200 meets depth 200's frames in the archive instead of unwinding 100
/// frames again. Either chain is trusted only after checking that every outer frame's return
/// address is still in its slot; an archive that fails the check is dropped.
///
/// A one-entry memo per depth maps (parent node, return address) to the child node, so
/// frames unwound again at the same depth are interned without a hash lookup.
pub struct Walker {
    /// framehop's unwind-rule cache.
    cache: Box<Cache>,
    cur: Chain,
    archive: Chain,
    new_ret: Box<[u64]>,
    new_slot: Box<[u64]>,
    memo_ret: Box<[u64]>,
    memo_parent: Box<[u32]>,
    memo_node: Box<[u32]>,
    /// The last distinct stacks, for captures that repeat one.
    recent: Recent,
    /// Whether captures may stop where they meet a recent stack (off: unwind everything, for
    /// checking that both give the same stacks).
    pub incremental: bool,
}

/// What one capture found, and how it changed the walker's chains: the new stack is the first
/// `keep` frames of the previous stack (or of the archive, when `from_archive`; or the whole
/// stack of recent entry `hit`), then the frames [`Walker::new_frames`] lists. `saved_archive`
/// says the previous stack, whole, became the archive before that; `stored`, that the new
/// stack then became recent entry `stored`. The writer's mirror of the chains
/// ([`crate::resolve`]) replays exactly this.
#[derive(Debug, Clone, Copy)]
pub struct Capture {
    /// Frames kept from the previous stack or the archive.
    pub keep: usize,
    /// The kept frames came from the archive.
    pub from_archive: bool,
    /// The previous stack was copied to the archive first.
    pub saved_archive: bool,
    /// The stack is that of this recent entry (`keep` is its depth; no new frames).
    pub hit: Option<u8>,
    /// The new stack was kept as this recent entry.
    pub stored: Option<u8>,
    /// Frames in the stack.
    pub depth: usize,
    /// Frames that had to be unwound (the rest were matched to a recent stack).
    pub unwound: usize,
    /// The walk stopped in code no known module covers: refresh modules and capture again.
    pub unknown_code: bool,
}

impl Walker {
    /// A walker for stacks of at most `max_frames` frames.
    pub fn new(max_frames: usize) -> Self {
        let n = max_frames.max(1);
        Self {
            cache: Box::default(),
            cur: Chain::new(n),
            archive: Chain::new(n),
            new_ret: vec![0; n].into_boxed_slice(),
            new_slot: vec![0; n].into_boxed_slice(),
            memo_ret: vec![0; n].into_boxed_slice(),
            memo_parent: vec![0; n].into_boxed_slice(),
            memo_node: vec![0; n].into_boxed_slice(),
            recent: Recent::new(),
            incremental: true,
        }
    }

    /// framehop's counters of unwind-rule cache hits and misses.
    pub fn rule_cache_stats(&self) -> framehop::CacheStats {
        self.cache.stats()
    }

    /// Forgets the recent stacks and the memo (their trie nodes are gone after fork).
    pub fn forget(&mut self) {
        self.cur.len = 0;
        self.cur.whole = false;
        self.archive.len = 0;
        self.archive.whole = false;
        self.memo_node.fill(0);
        self.recent.forget();
    }

    /// Captures the stack of the program's call into the allocator, from `caller`'s frame
    /// outwards, into the walker's current chain; the capture says how the chain changed.
    /// Stack reads are confined to `[sp, stack.end)`, and to nothing when `sp` is outside
    /// `stack` (a signal or coroutine stack with unknown bounds, where reading could fault).
    #[inline(never)]
    pub fn capture(&mut self, stack: &Range<u64>, caller: &Caller) -> Capture {
        let snap = CURRENT.load(Ordering::Acquire);
        let sp: u64;
        // SAFETY: reads one register, touches no memory.
        unsafe { asm!("mov {sp}, rsp", sp = out(reg) sp, options(nomem, nostack, preserves_flags)) };
        let hi = if stack.contains(&sp) { stack.end } else { sp };
        let readable = |addr: u64| addr >= sp && addr.checked_add(8).is_some_and(|e| e <= hi) && addr.is_multiple_of(8);
        let first_slot = caller.cfa.wrapping_sub(8);
        if snap.is_null() || !readable(first_slot) {
            self.cur.len = 0;
            self.cur.whole = false;
            return Capture {
                keep: 0,
                from_archive: false,
                saved_archive: false,
                hit: None,
                stored: None,
                depth: 0,
                unwound: 0,
                unknown_code: false,
            };
        }
        // SAFETY: snapshots are never freed.
        let snap = unsafe { &*snap };
        let mut read = |addr: u64| {
            if readable(addr) {
                // SAFETY: within this thread's live stack.
                Ok(unsafe { std::ptr::read(addr as *const u64) })
            } else {
                Err(())
            }
        };
        // SAFETY: checked readable above.
        let mut ret = unsafe { std::ptr::read(first_slot as *const u64) };
        let recent = self.incremental && self.recent.active();
        if recent {
            let found = self.recent.find(first_slot, ret, sp, hi);
            self.recent.account(found.is_some());
            if let Some(e) = found {
                return self.repeat(e);
            }
        }
        let mut slot = first_slot;
        let mut regs = UnwindRegsX86_64::new(ret, caller.cfa, caller.bp);
        let mut n = 0;
        // Cursors into the recent stacks, from their inner ends; slots grow towards the root.
        let mut k = if self.cur.whole && self.incremental { self.cur.len } else { 0 };
        let mut a = if self.archive.whole && self.incremental { self.archive.len } else { 0 };
        // The archive is only consulted for frames deeper than the current chain's innermost
        // one: from there outwards the current chain is the more recent record of those
        // depths, and skipping the archive saves searching it on most captures.
        let cur_inner = if k > 0 { self.cur.slot[k - 1] } else { u64::MAX };
        // (matched in the archive, index of the matched frame)
        let mut matched = None;
        let cap = self.new_ret.len();
        loop {
            if self.cur.meets(&mut k, slot, ret) && self.cur.outer_intact(k - 1, sp, hi) {
                matched = Some((false, k - 1));
                break;
            }
            if slot >= cur_inner {
                a = 0;
            }
            if self.archive.meets(&mut a, slot, ret) {
                if self.archive.outer_intact(a - 1, sp, hi) {
                    matched = Some((true, a - 1));
                    break;
                }
                // Stale: that part of the stack was reused; never pay for checking it again.
                self.archive.len = 0;
                a = 0;
            }
            self.new_ret[n] = ret;
            self.new_slot[n] = slot;
            n += 1;
            if n == cap {
                break;
            }
            let Some(addr) = FrameAddress::from_return_address(ret) else { break };
            match snap.unwinder.unwind_frame(addr, &mut regs, &mut self.cache, &mut read) {
                Ok(Some(r)) => {
                    ret = r;
                    slot = regs.sp().wrapping_sub(8);
                }
                Ok(None) | Err(_) => break,
            }
        }
        // A walk that did not meet a recent stack may have run into a library loaded since
        // the module list was read (framehop then guesses with frame pointers, or stops).
        let unknown_code = matched.is_none() && self.new_ret[..n].iter().any(|&a| !snap.covers(a));
        // The new stack: the matched chain's outer part up to the match, then the unwound
        // frames, outermost first.
        let (from_archive, keep) = matched.map_or((false, 0), |(arch, m)| (arch, m + 1));
        let (keep, whole) =
            if keep + n > self.cur.ret.len() { (0, false) } else { (keep, matched.is_some() || n < cap) };
        let from_archive = from_archive && keep > 0;
        let mut saved_archive = false;
        if from_archive {
            self.cur.copy_prefix(&self.archive, keep);
        } else if self.cur.whole && self.cur.len >= keep + ARCHIVE_MIN_DISCARD && self.cur.len > self.archive.len {
            saved_archive = true;
            // Deep frames about to be overwritten: keep them for when the program comes back.
            let len = self.cur.len;
            self.archive.copy_prefix(&self.cur, len);
            self.archive.len = len;
            self.archive.whole = true;
        }
        let take = n.min(self.cur.ret.len() - keep);
        for i in 0..take {
            self.cur.ret[keep + i] = self.new_ret[n - 1 - i];
            self.cur.slot[keep + i] = self.new_slot[n - 1 - i];
        }
        self.cur.len = keep + take;
        // A walk that stopped in unknown code ends differently once the module is known.
        self.cur.whole = whole && !unknown_code;
        let stored = (recent && self.cur.whole && (1..=RECENT_DEPTH).contains(&self.cur.len))
            .then(|| self.recent.store(&self.cur) as u8);
        Capture { keep, from_archive, saved_archive, hit: None, stored, depth: self.cur.len, unwound: n, unknown_code }
    }

    /// The capture of a stack that is recent entry `e`'s: it becomes the current chain (the
    /// previous one first archived if the archive would have kept it).
    #[inline(always)]
    fn repeat(&mut self, e: usize) -> Capture {
        let saved_archive = self.cur.whole && self.cur.len > RECENT_DEPTH && self.cur.len > self.archive.len;
        if saved_archive {
            let len = self.cur.len;
            self.archive.copy_prefix(&self.cur, len);
            self.archive.len = len;
            self.archive.whole = true;
        }
        let len = self.recent.load(e, &mut self.cur);
        self.cur.len = len;
        self.cur.whole = true;
        Capture {
            keep: len,
            from_archive: false,
            saved_archive,
            hit: Some(e as u8),
            stored: None,
            depth: len,
            unwound: 0,
            unknown_code: false,
        }
    }

    /// The stack the last capture recorded, outermost frame first (return addresses).
    pub fn stack(&self) -> &[u64] {
        &self.cur.ret[..self.cur.len]
    }

    /// The frames a capture added below its kept prefix, outermost first: what a
    /// [`crate::resolve`] command carries for the writer to intern.
    #[inline(always)]
    pub fn new_frames(&self, c: &Capture) -> &[u64] {
        &self.cur.ret[c.keep..c.depth]
    }

    /// Interns the stack `c` captured on this thread (for the aggregated mode, whose counters
    /// need the node at once), through `intern`: (parent node, return address) → child node,
    /// 0 on failure. Returns the leaf's node. Every capture of the thread must go through here
    /// for the kept prefixes' nodes to be known.
    #[inline]
    pub fn intern(&mut self, c: &Capture, mut intern: impl FnMut(u32, u64) -> u32) -> u32 {
        if c.saved_archive {
            // The previous stack's nodes are still in place: only frames from `keep` on change.
            let len = self.archive.len;
            self.archive.node[..len].copy_from_slice(&self.cur.node[..len]);
        }
        if let Some(e) = c.hit {
            let nodes = self.recent.nodes_mut(usize::from(e));
            self.cur.node[..c.depth].copy_from_slice(nodes);
            return if c.depth > 0 { self.cur.node[c.depth - 1] } else { 0 };
        }
        if c.from_archive {
            self.cur.node[..c.keep].copy_from_slice(&self.archive.node[..c.keep]);
        }
        let mut id = if c.keep > 0 { self.cur.node[c.keep - 1] } else { 0 };
        for j in c.keep..c.depth {
            let r = self.cur.ret[j];
            id = if self.memo_node[j] != 0 && self.memo_ret[j] == r && self.memo_parent[j] == id {
                self.memo_node[j]
            } else {
                let child = intern(id, r);
                (self.memo_ret[j], self.memo_parent[j], self.memo_node[j]) = (r, id, child);
                child
            };
            self.cur.node[j] = id;
        }
        if let Some(e) = c.stored {
            self.recent.nodes_mut(usize::from(e)).copy_from_slice(&self.cur.node[..c.depth]);
        }
        id
    }
}

/// Where the program's frame is when it calls into the allocator: captured by the naked entry
/// stubs in `hooks` before any monitor code runs.
#[derive(Debug, Clone, Copy)]
pub struct Caller {
    /// The caller's stack pointer after the call returns (its frame's CFA); the return address
    /// into the caller sits just below it.
    pub cfa: u64,
    /// The caller's frame pointer register at the call.
    pub bp: u64,
}

/// Unwinds the stack of code interrupted at `ip` with stack pointer `sp` and frame pointer
/// `bp` (a CPU-time sample, from its signal's context) into `out`, innermost first: `ip + 1`
/// (so that symbolizers, which look up a return address minus one, find `ip` itself), then the
/// return addresses. Reads only `[sp, stack.end)` (nothing when `sp` is outside `stack`) and
/// allocates nothing, so it may run in a signal handler. Returns the frames written.
pub fn sample(cache: &mut Cache, stack: &Range<u64>, ip: u64, sp: u64, bp: u64, out: &mut [u64]) -> usize {
    let snap = CURRENT.load(Ordering::Acquire);
    if out.is_empty() || snap.is_null() || ip == 0 {
        return 0;
    }
    // SAFETY: snapshots are never freed.
    let snap = unsafe { &*snap };
    let hi = if stack.contains(&sp) { stack.end } else { sp };
    let mut read = |addr: u64| {
        if addr >= sp && addr.checked_add(8).is_some_and(|e| e <= hi) && addr.is_multiple_of(8) {
            // SAFETY: within the interrupted thread's live stack.
            Ok(unsafe { std::ptr::read(addr as *const u64) })
        } else {
            Err(())
        }
    };
    let mut regs = UnwindRegsX86_64::new(ip, sp, bp);
    out[0] = ip.wrapping_add(1);
    let mut n = 1;
    let mut addr = FrameAddress::from_instruction_pointer(ip);
    while n < out.len() {
        match snap.unwinder.unwind_frame(addr, &mut regs, cache, &mut read) {
            Ok(Some(r)) => {
                out[n] = r;
                n += 1;
                match FrameAddress::from_return_address(r) {
                    Some(a) => addr = a,
                    None => break,
                }
            }
            Ok(None) | Err(_) => break,
        }
    }
    n
}
