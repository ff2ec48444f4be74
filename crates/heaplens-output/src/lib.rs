//! heaplens-output: the files heaplens writes appear whole or not at all, and never land on
//! what heaplens reads.
//!
//! A trace comes from anywhere and an output path from a user's typing: `-o` may name the
//! trace itself, the program being profiled, `/dev/null` or a full device. So every command
//! that writes goes through [`Output`]:
//!
//! - an output that is one of the command's inputs (the same device and inode, through a hard
//!   link or a symbolic link too) is refused before anything is written;
//! - a regular file (or a name not taken yet) is written to a temporary file with an
//!   unguessable name in the same directory, renamed over the name only by [`Output::commit`]:
//!   a failure leaves the previous file as it was and no temporary file behind (dropped, the
//!   temporary file is removed); a process killed midway leaves the previous file too, and a
//!   `.heaplens-*.tmp` beside it;
//! - a path that exists and is not a regular file (a character device such as `/dev/null`, a
//!   FIFO) is opened for writing as it is: never created, truncated, removed or renamed over;
//! - a path that names one of heaplens' own descriptors (`-`, `/dev/stdout`, `/dev/stderr`,
//!   `/dev/fd/N`, `/proc/self/fd/N`, or a link to one) is written through that descriptor,
//!   as a shell's `>` or `>>` opened it: a file it names is neither truncated nor replaced, and
//!   the link is left alone; another process's (`/proc/PID/fd/N`) is opened anew, appending
//!   where that process appends, never truncated;
//! - a symbolic link is followed to the end of its chain, whether that exists or not (as a
//!   shell's `>` follows it), and a loop of links is refused.
//!
//! ```no_run
//! use std::io::Write;
//! let out = heaplens_output::Output::create("flame.svg".as_ref(), &["app.hltrace".as_ref()])?;
//! out.file()?.write_all(b"<svg/>")?;
//! out.commit()?;
//! # Ok::<(), std::io::Error>(())
//! ```

#![warn(missing_docs)]

use std::fs::{File, Permissions};
use std::io;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use tempfile::NamedTempFile;

/// An output being written: see the crate's documentation.
#[derive(Debug)]
pub struct Output {
    path: PathBuf,
    target: Target,
}

#[derive(Debug)]
enum Target {
    /// Written beside `path`, renamed over it by `commit`.
    Replace(NamedTempFile),
    /// Not a regular file: written where it is.
    InPlace(File),
}

impl Output {
    /// Starts writing `path`, refusing it when it is one of `inputs`.
    ///
    /// A symbolic link to a regular file has its target replaced, not the link.
    ///
    /// # Errors
    /// `InvalidInput` (with a message naming the input) when `path` is one of `inputs`; the
    /// error of creating the temporary file in `path`'s directory, or of opening a
    /// non-regular `path` for writing.
    pub fn create(path: &Path, inputs: &[&Path]) -> io::Result<Output> {
        refuse_inputs(path, inputs)?;
        match descriptor(path) {
            Some(Descriptor::Own(fd)) => {
                // SAFETY: `fd` is open in this process (checked by `descriptor`) and only
                // borrowed to be duplicated.
                let f = unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) }.try_clone_to_owned()?;
                return Ok(Output { path: path.to_path_buf(), target: Target::InPlace(File::from(f)) });
            }
            Some(Descriptor::Closed(fd)) => {
                return Err(io::Error::new(io::ErrorKind::NotFound, format!("descriptor {fd} is not open")));
            }
            Some(Descriptor::Foreign { path: p, append }) => {
                // Another process's descriptor: opened anew, never truncated, appended to as
                // that process appends.
                let f = std::fs::OpenOptions::new().write(true).append(append).open(&p)?;
                return Ok(Output { path: path.to_path_buf(), target: Target::InPlace(f) });
            }
            None => {}
        }
        match std::fs::metadata(path) {
            Ok(m) if !m.is_file() && !m.is_dir() => {
                let f = std::fs::OpenOptions::new().write(true).open(path)?;
                Ok(Output { path: path.to_path_buf(), target: Target::InPlace(f) })
            }
            Ok(m) if m.is_dir() => Err(io::Error::new(io::ErrorKind::IsADirectory, "it is a directory")),
            existing => {
                // A link's target is what the user means, also one not there yet (as a
                // shell's `>` creates it); renaming over the link would turn it into a file of
                // its own.
                let real = link_target(path)?;
                // A replaced file keeps its mode; a new one gets the usual 0666 less the umask
                // (tempfile's own 0600 would hide outputs from their readers).
                let mode = existing.as_ref().map(|m| m.mode() & 0o777).unwrap_or(0o666);
                let dir = match real.parent() {
                    Some(d) if !d.as_os_str().is_empty() => d,
                    _ => Path::new("."),
                };
                if !dir.is_dir() {
                    let why = format!("the directory {} does not exist", dir.display());
                    return Err(io::Error::new(io::ErrorKind::NotFound, why));
                }
                let tmp = tempfile::Builder::new()
                    .prefix(".heaplens-")
                    .suffix(".tmp")
                    .permissions(Permissions::from_mode(mode))
                    .tempfile_in(dir)?;
                if let Ok(m) = &existing {
                    // A replaced file keeps its owner where heaplens may give it (root writing
                    // over another user's file must not take it from them).
                    let _ = std::os::unix::fs::fchown(tmp.as_file(), Some(m.uid()), Some(m.gid()));
                }
                Ok(Output { path: real, target: Target::Replace(tmp) })
            }
        }
    }

    /// A handle on the file being written (a second descriptor of it, so that a writer may own
    /// it while this `Output` waits to be committed).
    ///
    /// # Errors
    /// The error of duplicating the descriptor.
    pub fn file(&self) -> io::Result<File> {
        match &self.target {
            Target::Replace(t) => t.as_file().try_clone(),
            Target::InPlace(f) => f.try_clone(),
        }
    }

    /// The path the output ends up at (a symbolic link's target).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Puts the finished output in place: renames the temporary file over the path (a
    /// non-regular file was written in place, and needs nothing). Flush any buffered writer
    /// of [`Output::file`] first.
    ///
    /// # Errors
    /// The error of the rename; the temporary file is then removed.
    pub fn commit(self) -> io::Result<()> {
        match self.target {
            Target::Replace(t) => t.persist(&self.path).map(|_| ()).map_err(|e| e.error),
            Target::InPlace(_) => Ok(()),
        }
    }
}

/// What a descriptor path names (see [`descriptor`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Descriptor {
    /// A descriptor of this process, open.
    Own(std::os::fd::RawFd),
    /// A descriptor of this process that is not open.
    Closed(std::os::fd::RawFd),
    /// Another process's descriptor, `/proc/PID/fd/N`: `path` reopens its file, `append` when
    /// that process opened it for appending (`>>`).
    Foreign {
        /// The `/proc` path to open.
        path: PathBuf,
        /// Its open flags have `O_APPEND`.
        append: bool,
    },
}

/// The descriptor `path` names, through any chain of symbolic links: `-` (the standard
/// output), `/dev/fd/N`, `/proc/self/fd/N`, `/proc/thread-self/fd/N` and `/proc/PID/fd/N` with
/// this process's PID are its own (`/dev/stdout` is a link to `/proc/self/fd/1`); another
/// PID's is foreign. `None` for any other path.
///
/// Such a path names an open file description, not a file: writing a new file and renaming
/// it over the path would replace the link (or, followed, the file a shell opened for `>>`).
pub fn descriptor(path: &Path) -> Option<Descriptor> {
    if path == Path::new("-") {
        return Some(Descriptor::Own(1));
    }
    let mut p = std::path::absolute(path).ok()?;
    for _ in 0..40 {
        match descriptor_name(&p) {
            Some((None, fd)) => {
                // SAFETY: F_GETFD only asks whether the descriptor is open.
                let open = unsafe { libc::fcntl(fd, libc::F_GETFD) } != -1;
                return Some(if open { Descriptor::Own(fd) } else { Descriptor::Closed(fd) });
            }
            Some((Some(pid), fd)) => {
                let info = std::fs::read_to_string(format!("/proc/{pid}/fdinfo/{fd}")).unwrap_or_default();
                let flags = info.lines().find_map(|l| l.strip_prefix("flags:")).map(str::trim).unwrap_or("0");
                let append = u32::from_str_radix(flags, 8).is_ok_and(|f| f & libc::O_APPEND as u32 != 0);
                return Some(Descriptor::Foreign { path: p, append });
            }
            None => {}
        }
        let next = std::fs::read_link(&p).ok()?;
        p = match p.parent() {
            Some(dir) => dir.join(next),
            None => next,
        };
    }
    None
}

/// The descriptor of this process that `path` names (see [`descriptor`]), when it is open.
pub fn own_descriptor(path: &Path) -> Option<std::os::fd::RawFd> {
    match descriptor(path) {
        Some(Descriptor::Own(fd)) => Some(fd),
        _ => None,
    }
}

/// `(None, N)` when `p` is spelled as one of this process's descriptor paths, `(Some(PID), N)`
/// for another process's.
fn descriptor_name(p: &Path) -> Option<(Option<u32>, std::os::fd::RawFd)> {
    use std::path::Component::Normal;
    let parts: Vec<_> = p.components().filter_map(|c| if let Normal(s) = c { s.to_str() } else { None }).collect();
    let me = std::process::id();
    let (who, n) = match parts.as_slice() {
        ["dev", "fd", n] => (None, n),
        ["proc", "self" | "thread-self", "fd", n] | ["proc", "self", "task", _, "fd", n] => (None, n),
        ["proc", pid, "fd", n] | ["proc", pid, "task", _, "fd", n] => {
            let pid: u32 = pid.parse().ok()?;
            ((pid != me).then_some(pid), n)
        }
        _ => return None,
    };
    let n = n.parse().ok().filter(|n: &std::os::fd::RawFd| *n >= 0)?;
    Some((who, n))
}

/// Where writing `path` should land: the file itself, or for a symbolic link the end of its
/// chain, whether it exists or not (as a shell's `>` follows it).
///
/// A link that another user planted in a sticky world-writable directory (`/tmp`) is not
/// followed, as the kernel refuses with `fs.protected_symlinks` (which heaplens, resolving the
/// chain itself, would otherwise bypass): root writing through `/tmp/out.svg` must not
/// overwrite the file another user pointed it at.
///
/// # Errors
/// A chain of links that loops (more than 40); a link the rule above refuses
/// (PermissionDenied).
pub fn link_target(path: &Path) -> io::Result<PathBuf> {
    let mut p = path.to_path_buf();
    for _ in 0..40 {
        match std::fs::read_link(&p) {
            Ok(next) => {
                refuse_planted_link(&p)?;
                p = match p.parent() {
                    Some(dir) => dir.join(next),
                    None => next,
                }
            }
            // Not a link (or not there): here it is.
            Err(_) => return Ok(std::fs::canonicalize(&p).unwrap_or(p)),
        }
    }
    Err(io::Error::new(io::ErrorKind::InvalidInput, "too many levels of symbolic links"))
}

/// The kernel's `fs.protected_symlinks` rule for the link at `link`: in a sticky
/// world-writable directory, a link is followed only by its owner, or when its owner owns the
/// directory.
fn refuse_planted_link(link: &Path) -> io::Result<()> {
    let dir = match link.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let (Ok(l), Ok(d)) = (std::fs::symlink_metadata(link), std::fs::metadata(dir)) else { return Ok(()) };
    let sticky_shared = d.mode() & 0o1002 == 0o1002;
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    if sticky_shared && l.uid() != me && l.uid() != d.uid() {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "{} is a symbolic link another user made in a shared directory: not followed (as fs.protected_symlinks does)",
                link.display()
            ),
        ));
    }
    Ok(())
}

/// Creates the empty request file `path` (a snapshot or detach request beside a trace) without
/// following a link: a link planted there by another user (the trace's directory may be
/// theirs) must not make heaplens create or empty the file it points at. A regular file
/// already there is a request still pending, and is kept.
///
/// # Errors
/// The file cannot be created, or something other than a regular file is in its place.
pub fn create_request(path: &Path) -> io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    match std::fs::OpenOptions::new().write(true).create_new(true).custom_flags(libc::O_NOFOLLOW).mode(0o644).open(path)
    {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            if std::fs::symlink_metadata(path)?.file_type().is_file() {
                Ok(())
            } else {
                Err(io::Error::new(io::ErrorKind::AlreadyExists, "something other than a request file is there"))
            }
        }
        Err(e) => Err(e),
    }
}

/// Makes the directory `dir` (and its parents) for an output of several files, refusing it
/// when it is one of `inputs`. Write each file in it with [`Output`].
///
/// # Errors
/// `InvalidInput` when `dir` is one of `inputs`; the error of `create_dir_all`.
pub fn create_dir(dir: &Path, inputs: &[&Path]) -> io::Result<()> {
    refuse_inputs(dir, inputs)?;
    let refuse = |what: &str| {
        let why = format!("{what}, and this output is a directory of several files: give a directory's name");
        Err(io::Error::new(io::ErrorKind::InvalidInput, why))
    };
    if descriptor(dir).is_some() {
        return refuse("it is a stream");
    }
    if std::fs::metadata(dir).is_ok_and(|m| !m.is_dir()) {
        return refuse("a file is there");
    }
    std::fs::create_dir_all(dir)
}

/// Refuses an output that is one of the inputs: the same device and inode, so that a hard
/// link or a symbolic link to an input is refused too. A path that does not exist yet is no
/// input.
///
/// # Errors
/// `InvalidInput`, saying which input it is.
pub fn refuse_inputs(out: &Path, inputs: &[&Path]) -> io::Result<()> {
    let Ok(o) = std::fs::metadata(out) else { return Ok(()) };
    for input in inputs {
        if is_same(&o, input) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("it is the input {} (same file); write the output elsewhere", input.display()),
            ));
        }
    }
    Ok(())
}

/// Whether `input` is the file whose metadata is `m` (false when `input` cannot be read).
fn is_same(m: &std::fs::Metadata, input: &Path) -> bool {
    std::fs::metadata(input).is_ok_and(|i| i.dev() == m.dev() && i.ino() == m.ino())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn replaces_whole_or_not_at_all() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("out.txt");
        std::fs::write(&p, b"old").unwrap();
        let out = Output::create(&p, &[]).unwrap();
        out.file().unwrap().write_all(b"half").unwrap();
        drop(out);
        assert_eq!(std::fs::read(&p).unwrap(), b"old");
        let out = Output::create(&p, &[]).unwrap();
        out.file().unwrap().write_all(b"new").unwrap();
        out.commit().unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"new");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1, "a temporary file was left");
    }

    #[test]
    fn refuses_inputs_through_links() {
        let dir = tempfile::tempdir().unwrap();
        let input = dir.path().join("in");
        std::fs::write(&input, b"trace").unwrap();
        let hard = dir.path().join("hard");
        std::fs::hard_link(&input, &hard).unwrap();
        let soft = dir.path().join("soft");
        std::os::unix::fs::symlink(&input, &soft).unwrap();
        for p in [&input, &hard, &soft] {
            let e = Output::create(p, &[&input]).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        }
        assert_eq!(std::fs::read(&input).unwrap(), b"trace");
    }

    #[test]
    fn descriptor_paths_write_through_the_descriptor() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("log.txt");
        std::fs::write(&log, b"before\n").unwrap();
        let f = std::fs::OpenOptions::new().append(true).open(&log).unwrap();
        let fd = std::os::fd::AsRawFd::as_raw_fd(&f);
        let link = dir.path().join("mystdout");
        std::os::unix::fs::symlink(format!("/proc/self/fd/{fd}"), &link).unwrap();
        for p in [PathBuf::from(format!("/dev/fd/{fd}")), link.clone()] {
            assert_eq!(own_descriptor(&p), Some(fd), "{}", p.display());
            let out = Output::create(&p, &[]).unwrap();
            out.file().unwrap().write_all(b"x\n").unwrap();
            out.commit().unwrap();
        }
        assert_eq!(std::fs::read(&log).unwrap(), b"before\nx\nx\n");
        assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink());
        assert_eq!(own_descriptor(Path::new("/dev/fd/987654")), None);
        assert_eq!(own_descriptor(&log), None);
        assert_eq!(own_descriptor(Path::new("/proc/1/fd/1")), None);
        assert_eq!(own_descriptor(Path::new("-")), Some(1));
    }

    #[test]
    fn a_link_another_user_planted_in_a_shared_directory_is_not_followed() {
        use std::os::unix::ffi::OsStrExt;
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o1777)).unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, b"precious").unwrap();
        let planted = dir.path().join("out.svg");
        std::os::unix::fs::symlink(&victim, &planted).unwrap();
        let request = dir.path().join("t.hltrace.detach");
        std::os::unix::fs::symlink(&victim, &request).unwrap();
        // A request file is never made through a link, whoever made it.
        assert!(create_request(&request).is_err());
        assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            return; // Only root can give the link to another user.
        }
        let c = std::ffi::CString::new(planted.as_os_str().as_bytes()).unwrap();
        // SAFETY: a valid path; 65534 is nobody.
        assert_eq!(unsafe { libc::lchown(c.as_ptr(), 65534, 65534) }, 0);
        let e = Output::create(&planted, &[]).err().expect("a planted link is refused");
        assert_eq!(e.kind(), io::ErrorKind::PermissionDenied, "{e}");
        assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
        // In a directory that is not shared, the same link is followed (as the kernel does).
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let out = Output::create(&planted, &[]).unwrap();
        out.file().unwrap().write_all(b"picture").unwrap();
        out.commit().unwrap();
        assert_eq!(std::fs::read(&victim).unwrap(), b"picture");
    }

    #[test]
    fn another_processs_descriptor_is_appended_to_and_links_are_followed() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("log.txt");
        std::fs::write(&log, b"before\n").unwrap();
        // A shell appending to the log, as `sleep 30 >> log.txt` leaves it.
        let mut sleeper = std::process::Command::new("sleep")
            .arg("30")
            .stdout(std::fs::OpenOptions::new().append(true).open(&log).unwrap())
            .spawn()
            .unwrap();
        let foreign = PathBuf::from(format!("/proc/{}/fd/1", sleeper.id()));
        assert!(matches!(descriptor(&foreign), Some(Descriptor::Foreign { append: true, .. })));
        let out = Output::create(&foreign, &[]).unwrap();
        out.file().unwrap().write_all(b"x\n").unwrap();
        out.commit().unwrap();
        let _ = sleeper.kill();
        let _ = sleeper.wait();
        assert_eq!(std::fs::read(&log).unwrap(), b"before\nx\n");
        // A link to a file not there yet creates that file, the link stays.
        let dangling = dir.path().join("dangling");
        std::os::unix::fs::symlink(dir.path().join("new.txt"), &dangling).unwrap();
        let out = Output::create(&dangling, &[]).unwrap();
        out.file().unwrap().write_all(b"new").unwrap();
        out.commit().unwrap();
        assert!(std::fs::symlink_metadata(&dangling).unwrap().file_type().is_symlink());
        assert_eq!(std::fs::read(dir.path().join("new.txt")).unwrap(), b"new");
        // A loop of links is refused, the links left alone; so is a descriptor not open.
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        std::os::unix::fs::symlink(&b, &a).unwrap();
        std::os::unix::fs::symlink(&a, &b).unwrap();
        assert!(Output::create(&a, &[]).is_err());
        assert!(std::fs::symlink_metadata(&a).unwrap().file_type().is_symlink());
        assert_eq!(Output::create(Path::new("/dev/fd/987654"), &[]).unwrap_err().kind(), io::ErrorKind::NotFound);
        assert!(create_dir(Path::new("/dev/stdout"), &[]).is_err());
    }

    #[test]
    fn a_replaced_file_keeps_its_owner_and_a_missing_directory_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let theirs = dir.path().join("theirs.txt");
        std::fs::write(&theirs, b"old").unwrap();
        // As root (the tests' user in CI), the file is another user's: it stays theirs.
        // SAFETY: geteuid has no preconditions.
        let root = unsafe { libc::geteuid() } == 0;
        if root {
            std::os::unix::fs::chown(&theirs, Some(65534), Some(65534)).unwrap();
        }
        let out = Output::create(&theirs, &[]).unwrap();
        out.file().unwrap().write_all(b"new").unwrap();
        out.commit().unwrap();
        let m = std::fs::metadata(&theirs).unwrap();
        assert_eq!(std::fs::read(&theirs).unwrap(), b"new");
        if root {
            assert_eq!((m.uid(), m.gid()), (65534, 65534));
        }
        let missing = dir.path().join("nodir").join("x.svg");
        let e = Output::create(&missing, &[]).unwrap_err();
        assert!(e.to_string().contains("nodir does not exist") && !e.to_string().contains(".heaplens-"), "{e}");
        // A directory output onto a file is said to be one.
        let e = create_dir(&theirs, &[]).unwrap_err();
        assert!(e.to_string().starts_with("a file is there, and this output is a directory"), "{e}");
        let e = create_dir(Path::new("/dev/stdout"), &[]).unwrap_err();
        assert!(e.to_string().starts_with("it is a stream, and this output is a directory"), "{e}");
    }

    #[test]
    fn devices_are_written_in_place() {
        let out = Output::create(Path::new("/dev/null"), &[]).unwrap();
        out.file().unwrap().write_all(b"x").unwrap();
        out.commit().unwrap();
        let m = std::fs::symlink_metadata("/dev/null").unwrap();
        assert!(std::os::unix::fs::FileTypeExt::is_char_device(&m.file_type()));
    }
}
