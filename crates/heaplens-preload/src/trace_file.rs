//! The trace's file descriptor, kept out of the program's way and checked before every write.
//!
//! Daemons close every descriptor they did not open (`for fd in 3..limit: close(fd)`), and
//! programs `dup2` their own files onto numbers they think are free. A monitor that went on
//! writing to its old number wrote its blocks into the program's data file. So the descriptor
//! sits high (near the soft limit, where a program's own `open` does not reach, since the kernel
//! hands out the lowest free number), and before each write its identity (device and inode) is
//! compared with the trace's: when the program closed or replaced it, the trace is opened again
//! by its path, checked to be the same file, and the monitor says so once on stderr. Nothing is
//! ever written to a descriptor that is not the trace.
//!
//! Left open: a program that closes the descriptor and has another of its own land on that very
//! number in the microseconds between the check and the write.

use std::ffi::CString;
use std::io::{self, Write};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// The trace file, written through a raw descriptor that is verified before each write.
pub struct TraceFile {
    fd: i32,
    dev: u64,
    ino: u64,
    path: PathBuf,
    /// Whether the program's interference was reported already.
    said: bool,
}

/// The lowest number to move the trace's descriptor to: high, under the soft limit.
fn high_floor() -> i32 {
    // SAFETY: `rlimit` is plain integers; getrlimit fills it.
    let mut r: libc::rlimit = unsafe { std::mem::zeroed() };
    // SAFETY: valid pointer.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) } != 0 {
        return 3;
    }
    let soft = r.rlim_cur.min(1 << 20) as i32;
    // A quarter of the way down from the limit: far above the numbers programs get, and leaves
    // room for the few descriptors of forked children's traces.
    (soft - soft / 4).clamp(3, 1 << 16)
}

/// Moves `fd` to a high number (close-on-exec), closing the original; keeps `fd` when no high
/// number is free.
fn move_high(fd: i32) -> i32 {
    // SAFETY: plain descriptor calls on a descriptor we own.
    unsafe {
        let high = libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, high_floor());
        if high < 0 {
            return fd;
        }
        libc::close(fd);
        high
    }
}

/// The device and inode of `fd`, or `None` when it is not open.
fn identity(fd: i32) -> Option<(u64, u64)> {
    // SAFETY: `stat` is plain integers; fstat fills it.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: valid pointer.
    if unsafe { libc::fstat(fd, &mut st) } != 0 {
        return None;
    }
    Some((st.st_dev, st.st_ino))
}

impl TraceFile {
    /// Creates the trace at `path` (failing if it exists), close-on-exec, mode 0644.
    ///
    /// # Errors
    /// The error of `open(2)`; `AlreadyExists` when the path is taken.
    pub fn create_new(path: &Path) -> io::Result<TraceFile> {
        let c = CString::new(path.as_os_str().as_bytes()).map_err(|_| io::Error::other("NUL in the trace path"))?;
        // SAFETY: a NUL-terminated path.
        let fd = unsafe {
            libc::open(
                c.as_ptr(),
                libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_CLOEXEC,
                0o644 as libc::c_uint,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        let fd = move_high(fd);
        let Some((dev, ino)) = identity(fd) else {
            // SAFETY: our own descriptor.
            unsafe { libc::close(fd) };
            return Err(io::Error::last_os_error());
        };
        Ok(TraceFile { fd, dev, ino, path: path.to_path_buf(), said: false })
    }

    /// Opens an existing `path` that is not a regular file (`/dev/null`, a FIFO) for writing,
    /// without creating or truncating it; a FIFO without a reader fails (`ENXIO`) rather than
    /// hold the program up.
    ///
    /// # Errors
    /// The error of `open(2)`.
    pub fn open_in_place(path: &Path) -> io::Result<TraceFile> {
        let c = CString::new(path.as_os_str().as_bytes()).map_err(|_| io::Error::other("NUL in the trace path"))?;
        // SAFETY: a NUL-terminated path; no O_CREAT, so no mode.
        let fd = unsafe { libc::open(c.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC | libc::O_NONBLOCK) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: our own descriptor; writes block as they would on any trace.
        unsafe { libc::fcntl(fd, libc::F_SETFL, libc::fcntl(fd, libc::F_GETFL) & !libc::O_NONBLOCK) };
        let fd = move_high(fd);
        let Some((dev, ino)) = identity(fd) else {
            // SAFETY: our own descriptor.
            unsafe { libc::close(fd) };
            return Err(io::Error::last_os_error());
        };
        Ok(TraceFile { fd, dev, ino, path: path.to_path_buf(), said: false })
    }

    /// Makes sure the descriptor is still the trace: if the program closed or replaced it,
    /// opens the trace again by its path (appending), provided it is still the same file.
    fn ensure_ours(&mut self) -> io::Result<()> {
        if identity(self.fd) == Some((self.dev, self.ino)) {
            return Ok(());
        }
        // The number is the program's now (or nobody's): never close or touch it.
        let c =
            CString::new(self.path.as_os_str().as_bytes()).map_err(|_| io::Error::other("NUL in the trace path"))?;
        // SAFETY: a NUL-terminated path.
        let fd = unsafe { libc::open(c.as_ptr(), libc::O_WRONLY | libc::O_APPEND | libc::O_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::other(format!(
                "the program closed the trace's descriptor and it cannot be opened again: {}",
                io::Error::last_os_error()
            )));
        }
        let fd = move_high(fd);
        if identity(fd) != Some((self.dev, self.ino)) {
            // SAFETY: our own descriptor.
            unsafe { libc::close(fd) };
            return Err(io::Error::other("the program closed the trace's descriptor and the trace was replaced"));
        }
        self.fd = fd;
        if !self.said {
            self.said = true;
            eprintln!("heaplens: the program closed or replaced the trace's descriptor; the trace was opened again");
        }
        Ok(())
    }

    /// The current descriptor (for tests).
    pub fn raw_fd(&self) -> i32 {
        self.fd
    }
}

impl Drop for TraceFile {
    /// Closes the descriptor if it is still the trace's (a forked child drops its copy).
    fn drop(&mut self) {
        if identity(self.fd) == Some((self.dev, self.ino)) {
            // SAFETY: verified to be our descriptor.
            unsafe { libc::close(self.fd) };
        }
    }
}

impl Write for TraceFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.ensure_ours()?;
        loop {
            // SAFETY: `buf` is valid for its length; the descriptor was just verified.
            let n = unsafe { libc::write(self.fd, buf.as_ptr().cast(), buf.len()) };
            if n >= 0 {
                return Ok(n as usize);
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp(name: &str) -> PathBuf {
        let p = std::env::temp_dir().join(format!("heaplens-trace-file-{}-{name}", std::process::id()));
        let _ = std::fs::remove_file(&p);
        p
    }

    /// A descriptor closed behind the monitor's back and taken by another file: the writes go
    /// to the trace (opened again), and the other file is untouched.
    #[test]
    fn a_replaced_descriptor_is_never_written_and_the_trace_reopens() {
        let (trace, other) = (temp("trace"), temp("other"));
        let mut t = TraceFile::create_new(&trace).unwrap();
        assert!(t.raw_fd() >= 3);
        t.write_all(b"first ").unwrap();
        let fd = t.raw_fd();
        // SAFETY: test: plays a program taking the number over.
        unsafe {
            let c = CString::new(other.as_os_str().as_bytes()).unwrap();
            let o = libc::open(c.as_ptr(), libc::O_WRONLY | libc::O_CREAT, 0o644);
            assert!(o >= 0);
            assert_eq!(libc::dup2(o, fd), fd);
            libc::close(o);
        }
        t.write_all(b"second").unwrap();
        assert_eq!(std::fs::read(&trace).unwrap(), b"first second");
        assert_eq!(std::fs::read(&other).unwrap(), b"");
        // Closed outright: opened again too.
        // SAFETY: test.
        unsafe { libc::close(t.raw_fd()) };
        t.write_all(b"!").unwrap();
        assert_eq!(std::fs::read(&trace).unwrap(), b"first second!");
        // Replaced on disk: refused, nothing written anywhere.
        std::fs::remove_file(&trace).unwrap();
        std::fs::write(&trace, b"new").unwrap();
        // SAFETY: test.
        unsafe { libc::close(t.raw_fd()) };
        assert!(t.write_all(b"x").is_err());
        assert_eq!(std::fs::read(&trace).unwrap(), b"new");
        let _ = std::fs::remove_file(&trace);
        let _ = std::fs::remove_file(&other);
        drop(t);
        // SAFETY: test: the number the other file was put on.
        unsafe { libc::close(fd) };
    }
}
