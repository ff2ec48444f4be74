//! Memory for the live map's slots, and a thread that makes it ahead of the replay.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex};

/// A slot of the live map.
pub(crate) type Cell = u32;

/// Cells of a chunk: one huge page.
pub(crate) const CHUNK_CELLS: usize = HUGE / std::mem::size_of::<Cell>();

/// Zeroed memory for slots, mapped directly and populated in one go: faulting it in a page at
/// a time (twice, as reading a fresh page maps the zero page first) costs more than the replay.
/// A chunk is one aligned huge page when the kernel has them to spare, which also spares the
/// replay a TLB miss per page of slots.
pub(crate) struct Chunk {
    ptr: *mut Cell,
    len: usize,
}

/// The size of a transparent huge page on x86_64 and aarch64 (with 4 KiB pages).
const HUGE: usize = 2 << 20;

// SAFETY: a chunk owns its mapping, as a `Box<[Cell]>` owns its memory.
unsafe impl Send for Chunk {}

impl Chunk {
    /// [`CHUNK_CELLS`] zeroed cells.
    pub fn new() -> Self {
        let len = CHUNK_CELLS;
        let bytes = len * std::mem::size_of::<Cell>();
        let fail = || std::alloc::handle_alloc_error(std::alloc::Layout::array::<Cell>(len).expect("small layout"));
        // Over-allocated by a huge page, to cut an aligned range out of it.
        let map = bytes + HUGE;
        // SAFETY: an anonymous private mapping of our own; checked for failure below.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            fail();
        }
        let head = (HUGE - p as usize % HUGE) % HUGE;
        // SAFETY: unmapping the parts of our own mapping outside the aligned range, then advice
        // on that range; failures of the advice only cost speed.
        let p = unsafe {
            if head > 0 {
                libc::munmap(p, head);
            }
            let tail = map - head - bytes;
            let p = p.cast::<u8>().add(head);
            if tail > 0 {
                libc::munmap(p.add(bytes).cast(), tail);
            }
            libc::madvise(p.cast(), bytes, libc::MADV_HUGEPAGE);
            const MADV_POPULATE_WRITE: libc::c_int = 23;
            libc::madvise(p.cast(), bytes, MADV_POPULATE_WRITE);
            p
        };
        Self { ptr: p.cast(), len }
    }
}

impl std::ops::Deref for Chunk {
    type Target = [Cell];
    fn deref(&self) -> &[Cell] {
        // SAFETY: the mapping holds `len` zero-initialized Cells for the chunk's lifetime.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

impl std::ops::DerefMut for Chunk {
    fn deref_mut(&mut self) -> &mut [Cell] {
        // SAFETY: as in `deref`, and `&mut self` is unique.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}

impl Drop for Chunk {
    fn drop(&mut self) {
        // SAFETY: unmaps the mapping made in `new`, exactly once.
        unsafe { libc::munmap(self.ptr.cast(), self.len * std::mem::size_of::<Cell>()) };
    }
}

/// Chunks made ahead by another thread ([`ChunkSource::fill`]): the kernel takes longer to zero
/// a chunk's memory than the replay takes to fill it, and the second processor is mostly idle
/// once the trace is read.
#[derive(Default)]
pub(crate) struct ChunkSource {
    ready: Mutex<Vec<Chunk>>,
    wake: Condvar,
    stop: AtomicBool,
}

/// Chunks kept ready: one, as a second was zeroed for nothing at the end of most replays (2 MiB,
/// about 1 ms of the kernel's time on a VM).
const AHEAD: usize = 1;

impl ChunkSource {
    /// A zeroed chunk: one made ahead if there is one, else made now.
    pub fn take(&self) -> Chunk {
        let ready = self.ready.lock().ok().and_then(|mut r| r.pop());
        self.wake.notify_one();
        ready.unwrap_or_else(Chunk::new)
    }

    /// Keeps [`AHEAD`] chunks ready until [`ChunkSource::stop`].
    pub fn fill(&self) {
        let Ok(mut ready) = self.ready.lock() else { return };
        while !self.stop.load(Ordering::Acquire) {
            if ready.len() < AHEAD {
                drop(ready);
                let c = Chunk::new();
                let Ok(r) = self.ready.lock() else { return };
                ready = r;
                ready.push(c);
            } else {
                let Ok(r) = self.wake.wait(ready) else { return };
                ready = r;
            }
        }
    }

    /// Ends [`ChunkSource::fill`].
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Release);
        // Under the lock, so that `fill` is either waiting or about to look at the flag.
        let _held = self.ready.lock();
        self.wake.notify_all();
    }
}

/// Stops a [`ChunkSource`]'s filling when dropped, also when the replay panics (the filling
/// thread would otherwise wait for ever).
pub(crate) struct StopGuard(pub std::sync::Arc<ChunkSource>);

impl Drop for StopGuard {
    fn drop(&mut self) {
        self.0.stop();
    }
}
