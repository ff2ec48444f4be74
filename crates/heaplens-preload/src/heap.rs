//! The monitor's own heap, in memory it maps itself.
//!
//! The monitor used to allocate through glibc's `__libc_malloc`, from the program's own main
//! arena. That changed how the program's allocator behaves: glibc files freed chunks in an
//! unsorted list, which a program that reallocates one size takes from one at a time, but a
//! request of another size (any of the monitor's) sorts the whole list into bins first. On the
//! widgets benchmark under `--sample-rate`, where the monitor allocates on the program's thread,
//! that sorting was 8% of the run. Here the monitor never touches the program's arenas.
//!
//! Small blocks (up to 32 KiB) come in power-of-two size classes from 1 MiB mappings, with a
//! free list per class; larger ones are mappings of their own, grown with `mremap`. One spin
//! lock guards the small classes: the monitor allocates rarely once it runs (buffers are
//! reused), and nothing under the lock can re-enter it. A fork holds the lock across
//! ([`lock_for_fork`]), so the child's heap is consistent.

use std::alloc::{GlobalAlloc, Layout};
use std::cell::UnsafeCell;
use std::ptr::null_mut;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// Size classes of small blocks: 16 B to 32 KiB.
const CLASSES: usize = 12;
const MIN_SMALL: usize = 16;
const MAX_SMALL: usize = MIN_SMALL << (CLASSES - 1);
/// Bytes mapped at a time for small blocks.
const CHUNK: usize = 1 << 20;
const PAGE: usize = 4096;

struct Small {
    /// Freed blocks per class, linked through their first word.
    free: [*mut u8; CLASSES],
    /// The unused rest of the current chunk.
    bump: usize,
    end: usize,
    /// Recently freed large mappings (address, length), kept for reuse: the writer thread
    /// allocates and frees the same large buffers for every batch it writes, and a new mapping
    /// costs two system calls and a page fault per page.
    spare: [(usize, usize); SPARE],
}

/// Large mappings kept for reuse, and the largest kept.
const SPARE: usize = 8;
const MAX_SPARE: usize = 4 << 20;

struct Locked(UnsafeCell<Small>);
// SAFETY: only reached under LOCK.
unsafe impl Sync for Locked {}

static LOCK: AtomicBool = AtomicBool::new(false);
static SMALL: Locked =
    Locked(UnsafeCell::new(Small { free: [null_mut(); CLASSES], bump: 0, end: 0, spare: [(0, 0); SPARE] }));

fn lock() {
    let mut spin = 0u32;
    while LOCK.swap(true, Ordering::Acquire) {
        spin += 1;
        if spin > 100 {
            std::thread::yield_now();
        }
        std::hint::spin_loop();
    }
}

fn unlock() {
    LOCK.store(false, Ordering::Release);
}

/// Takes the heap's lock before `fork`, so that no other thread holds it when the process is
/// copied. Nothing may allocate until [`unlock_after_fork`].
pub fn lock_for_fork() {
    lock();
}

/// Releases the lock taken by [`lock_for_fork`], in the parent and in the child.
pub fn unlock_after_fork() {
    unlock();
}

/// The class of a small block of `size` bytes aligned to `align` (both at most `MAX_SMALL`).
fn class(size: usize, align: usize) -> usize {
    (size.max(align).max(MIN_SMALL).next_power_of_two().trailing_zeros() - MIN_SMALL.trailing_zeros()) as usize
}

fn is_small(l: &Layout) -> bool {
    l.size() <= MAX_SMALL && l.align() <= PAGE
}

fn pages(n: usize) -> usize {
    n.div_ceil(PAGE) * PAGE
}

/// Fresh zeroed memory from the kernel, or null.
unsafe fn map_fresh(len: usize) -> *mut u8 {
    let p =
        libc::mmap(null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1, 0);
    if p == libc::MAP_FAILED {
        null_mut()
    } else {
        p.cast()
    }
}

/// Bytes set aside at start-up for when the kernel refuses the monitor memory.
const RESERVE: usize = 16 << 20;
/// The reserve's unused part: next free byte and end (0 when there is none).
static RESERVE_NEXT: AtomicUsize = AtomicUsize::new(0);
static RESERVE_END: AtomicUsize = AtomicUsize::new(0);

/// Sets memory aside (address space only, no pages until used) so that the monitor never has to
/// abort the program when memory runs out: a failing Rust allocation aborts the process, so
/// when the kernel refuses a mapping (the program exhausted `ulimit -v`, say), the monitor stops
/// recording and finishes its work in the reserve. Call once at start-up.
pub fn set_reserve_aside() {
    // SAFETY: a fresh private mapping.
    let p = unsafe {
        libc::mmap(
            null_mut(),
            RESERVE,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if p != libc::MAP_FAILED {
        RESERVE_END.store(p as usize + RESERVE, Ordering::Relaxed);
        RESERVE_NEXT.store(p as usize, Ordering::Release);
    }
}

/// Fresh zeroed memory: from the kernel, else (recording then stops) from the reserve, else
/// null.
unsafe fn map(len: usize) -> *mut u8 {
    let p = map_fresh(len);
    if !p.is_null() {
        return p;
    }
    crate::disable("out of memory: the monitor cannot get memory for its buffers");
    let mut at = RESERVE_NEXT.load(Ordering::Acquire);
    loop {
        if at == 0 || at + len > RESERVE_END.load(Ordering::Relaxed) {
            return null_mut();
        }
        match RESERVE_NEXT.compare_exchange_weak(at, at + pages(len), Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => return at as *mut u8,
            Err(now) => at = now,
        }
    }
}

unsafe fn small_alloc(c: usize) -> *mut u8 {
    let size = MIN_SMALL << c;
    lock();
    // SAFETY: under the lock.
    let s = &mut *SMALL.0.get();
    let p = if !s.free[c].is_null() {
        let p = s.free[c];
        s.free[c] = *(p as *mut *mut u8);
        p
    } else {
        // Blocks are aligned to their size (up to a page): alignment requests fold into the
        // class.
        let mut at = s.bump.next_multiple_of(size.min(PAGE));
        if at + size > s.end {
            let chunk = map(CHUNK) as usize;
            if chunk == 0 {
                unlock();
                return null_mut();
            }
            (s.bump, s.end) = (chunk, chunk + CHUNK);
            at = chunk;
        }
        s.bump = at + size;
        at as *mut u8
    };
    unlock();
    p
}

unsafe fn small_free(p: *mut u8, c: usize) {
    lock();
    // SAFETY: under the lock.
    let s = &mut *SMALL.0.get();
    *(p as *mut *mut u8) = s.free[c];
    s.free[c] = p;
    unlock();
}

/// A spare mapping of exactly `len` bytes, or null.
unsafe fn take_spare(len: usize) -> *mut u8 {
    lock();
    // SAFETY: under the lock.
    let s = &mut *SMALL.0.get();
    let found = s.spare.iter_mut().find(|e| e.1 == len).map(|e| std::mem::take(e).0);
    unlock();
    found.unwrap_or(0) as *mut u8
}

/// Unmaps `len` bytes at `p`, or keeps them as a spare.
unsafe fn large_free(p: *mut u8, len: usize) {
    if len <= MAX_SPARE {
        lock();
        // SAFETY: under the lock.
        let s = &mut *SMALL.0.get();
        let kept = s.spare.iter_mut().find(|e| e.1 == 0).map(|e| *e = (p as usize, len)).is_some();
        unlock();
        if kept {
            return;
        }
    }
    libc::munmap(p.cast(), len);
}

/// A large block: a spare mapping (cleared when `zeroed`) or a fresh one, zero already.
unsafe fn large_alloc(l: Layout, zeroed: bool) -> *mut u8 {
    let len = pages(l.size());
    if l.align() <= PAGE {
        let p = take_spare(len);
        if p.is_null() {
            return map(len);
        }
        if zeroed {
            std::ptr::write_bytes(p, 0, l.size());
        }
        return p;
    }
    // Over-aligned: map more and cut the ends off.
    let raw = map(len + l.align()) as usize;
    if raw == 0 {
        return null_mut();
    }
    let start = raw.next_multiple_of(l.align());
    if start > raw {
        libc::munmap(raw as *mut libc::c_void, start - raw);
    }
    let tail = raw + len + l.align() - (start + len);
    if tail > 0 {
        libc::munmap((start + len) as *mut libc::c_void, tail);
    }
    start as *mut u8
}

/// `GlobalAlloc` over the monitor's own mappings (see the module's documentation).
pub struct MonitorHeap;

unsafe impl GlobalAlloc for MonitorHeap {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        if is_small(&l) {
            small_alloc(class(l.size(), l.align()))
        } else {
            large_alloc(l, false)
        }
    }

    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        if !is_small(&l) {
            return large_alloc(l, true);
        }
        let p = self.alloc(l);
        if !p.is_null() {
            std::ptr::write_bytes(p, 0, l.size());
        }
        p
    }

    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        if is_small(&l) {
            small_free(p, class(l.size(), l.align()));
        } else {
            large_free(p, pages(l.size()));
        }
    }

    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        let new = Layout::from_size_align_unchecked(n, l.align());
        match (is_small(&l), is_small(&new)) {
            (true, true) if class(l.size(), l.align()) == class(n, l.align()) => p,
            (false, false) if l.align() <= PAGE => {
                let (old_len, new_len) = (pages(l.size()), pages(n));
                if old_len == new_len {
                    return p;
                }
                let q = libc::mremap(p.cast(), old_len, new_len, libc::MREMAP_MAYMOVE);
                if q != libc::MAP_FAILED {
                    return q.cast();
                }
                // Out of memory (or a block of the reserve): copy, through the reserve if need be.
                let q = self.alloc(new);
                if !q.is_null() {
                    std::ptr::copy_nonoverlapping(p, q, l.size().min(n));
                    self.dealloc(p, l);
                }
                q
            }
            _ => {
                let q = self.alloc(new);
                if !q.is_null() {
                    std::ptr::copy_nonoverlapping(p, q, l.size().min(n));
                    self.dealloc(p, l);
                }
                q
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_hold_their_blocks() {
        assert_eq!(class(1, 1), 0);
        assert_eq!(class(16, 8), 0);
        assert_eq!(class(17, 8), 1);
        assert_eq!(class(8, 64), 2);
        assert_eq!(class(MAX_SMALL, 16), CLASSES - 1);
    }

    /// Blocks of every size and alignment are aligned, writable, distinct while live, reused
    /// once freed, and keep their contents through realloc.
    #[test]
    fn blocks_are_aligned_disjoint_and_kept_through_realloc() {
        let h = MonitorHeap;
        let mut live = Vec::new();
        for (i, size) in [1usize, 15, 16, 17, 100, 4096, 5000, 32768, 32769, 100_000, 3 << 20].into_iter().enumerate() {
            for align in [1usize, 8, 16, 64, 4096, 8192] {
                let l = Layout::from_size_align(size, align).unwrap();
                // SAFETY: a valid layout; the block is written within its size.
                unsafe {
                    let p = h.alloc(l);
                    assert!(!p.is_null());
                    assert_eq!(p as usize % align, 0, "size {size} align {align}");
                    std::ptr::write_bytes(p, i as u8, size);
                    live.push((p, l, i as u8));
                }
            }
        }
        let mut spans: Vec<(usize, usize)> =
            live.iter().map(|&(p, l, _)| (p as usize, p as usize + l.size())).collect();
        spans.sort();
        assert!(spans.windows(2).all(|w| w[0].1 <= w[1].0), "overlapping blocks");
        for &(p, l, v) in &live {
            // SAFETY: live blocks of these layouts, written above.
            unsafe {
                assert!(std::slice::from_raw_parts(p, l.size()).iter().all(|&b| b == v));
                let q = h.realloc(p, l, l.size() * 3 + 1);
                assert!(!q.is_null());
                assert!(std::slice::from_raw_parts(q, l.size()).iter().all(|&b| b == v), "realloc lost bytes");
                let g = Layout::from_size_align(l.size() * 3 + 1, l.align()).unwrap();
                let z = h.realloc(q, g, 1);
                assert_eq!(*z, v);
                h.dealloc(z, Layout::from_size_align(1, l.align()).unwrap());
            }
        }
        // SAFETY: valid layouts; a freed small block comes back first.
        unsafe {
            let l = Layout::from_size_align(40, 8).unwrap();
            let a = h.alloc(l);
            h.dealloc(a, l);
            assert_eq!(h.alloc(l), a);
            let z = Layout::from_size_align(40, 8).unwrap();
            let b = h.alloc_zeroed(z);
            assert!(std::slice::from_raw_parts(b, 40).iter().all(|&x| x == 0));
            // A large block is kept for reuse when freed, and zeroed when reused so.
            let big = Layout::from_size_align(200_000, 8).unwrap();
            let c = h.alloc(big);
            std::ptr::write_bytes(c, 7, big.size());
            h.dealloc(c, big);
            let d = h.alloc_zeroed(big);
            assert!(std::slice::from_raw_parts(d, big.size()).iter().all(|&x| x == 0));
            h.dealloc(d, big);
        }
    }
}
