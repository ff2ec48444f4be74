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
//!   FIFO) is opened for writing as it is: never created, truncated, removed or renamed over.
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
        match std::fs::metadata(path) {
            Ok(m) if !m.is_file() && !m.is_dir() => {
                let f = std::fs::OpenOptions::new().write(true).open(path)?;
                Ok(Output { path: path.to_path_buf(), target: Target::InPlace(f) })
            }
            Ok(m) if m.is_dir() => Err(io::Error::new(io::ErrorKind::IsADirectory, "it is a directory")),
            existing => {
                // A link's target is what the user means; renaming over the link would turn it
                // into a file of its own.
                let real = match existing {
                    Ok(_) => std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf()),
                    Err(_) => path.to_path_buf(),
                };
                // A replaced file keeps its mode; a new one gets the usual 0666 less the umask
                // (tempfile's own 0600 would hide outputs from their readers).
                let mode = existing.map(|m| m.mode() & 0o777).unwrap_or(0o666);
                let dir = match real.parent() {
                    Some(d) if !d.as_os_str().is_empty() => d,
                    _ => Path::new("."),
                };
                let tmp = tempfile::Builder::new()
                    .prefix(".heaplens-")
                    .suffix(".tmp")
                    .permissions(Permissions::from_mode(mode))
                    .tempfile_in(dir)?;
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

/// Makes the directory `dir` (and its parents) for an output of several files, refusing it
/// when it is one of `inputs`. Write each file in it with [`Output`].
///
/// # Errors
/// `InvalidInput` when `dir` is one of `inputs`; the error of `create_dir_all`.
pub fn create_dir(dir: &Path, inputs: &[&Path]) -> io::Result<()> {
    refuse_inputs(dir, inputs)?;
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
    fn devices_are_written_in_place() {
        let out = Output::create(Path::new("/dev/null"), &[]).unwrap();
        out.file().unwrap().write_all(b"x").unwrap();
        out.commit().unwrap();
        let m = std::fs::symlink_metadata("/dev/null").unwrap();
        assert!(std::os::unix::fs::FileTypeExt::is_char_device(&m.file_type()));
    }
}
