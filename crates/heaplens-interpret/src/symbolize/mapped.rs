//! Module and debug files mapped into memory: parsing a symbol table through reads costs a
//! system call per name.

use std::fs::File;
use std::os::fd::AsRawFd;

/// A file mapped read-only.
pub struct Mapped {
    ptr: *mut libc::c_void,
    len: usize,
}

impl Mapped {
    /// Maps `file`; `None` when it cannot be mapped (or is empty).
    pub fn new(file: &File) -> Option<Self> {
        let len = usize::try_from(file.metadata().ok()?.len()).ok()?;
        if len == 0 {
            return None;
        }
        // SAFETY: a private read-only mapping of a file we opened; checked for failure. The
        // mapping outlives the descriptor, which may be closed right away.
        let ptr =
            unsafe { libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ, libc::MAP_PRIVATE, file.as_raw_fd(), 0) };
        (ptr != libc::MAP_FAILED).then_some(Self { ptr, len })
    }

    /// The file's bytes.
    pub fn bytes(&self) -> &[u8] {
        // SAFETY: the mapping holds `len` readable bytes until `drop`. (A file truncated under
        // the mapping would fault, as with any mapped reader: module files are not rewritten in
        // place by package managers, which replace them.)
        unsafe { std::slice::from_raw_parts(self.ptr.cast::<u8>(), self.len) }
    }
}

impl Drop for Mapped {
    fn drop(&mut self) {
        // SAFETY: unmaps the mapping made in `open`, exactly once.
        unsafe { libc::munmap(self.ptr, self.len) };
    }
}
