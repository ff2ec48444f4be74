//! A trace as one partition of a Hive-partitioned data set, so that the traces of many
//! processes on many machines are queried as one table per kind of row:
//!
//! ```text
//! DIR/events/host=H/program=P/pid=N/part-0.parquet
//! DIR/stacks/host=H/program=P/pid=N/part-0.parquet
//! DIR/frames/host=H/program=P/pid=N/part-0.parquet
//! ```
//!
//! One sub-tree per table, because readers (DuckDB's `read_parquet('DIR/events/**/*.parquet',
//! hive_partitioning = true)`, Spark's `spark.read.parquet('DIR/events')`) expect every file
//! under a root to share a schema. `stack_id` and `frame_index` are per trace: joins match
//! host, program and pid too.

use std::ffi::OsString;
use std::io;
use std::path::{Path, PathBuf};

/// Where the partition of one trace goes: the values of its three partition columns, raw.
#[derive(Debug, Clone)]
pub struct Partition {
    /// The machine (`host=`).
    pub host: String,
    /// The executable's file name (`program=`).
    pub program: String,
    /// The process id (`pid=`).
    pub pid: u32,
}

impl Partition {
    /// The path of the partition under a table's root: `host=H/program=P/pid=N`.
    pub fn path(&self) -> PathBuf {
        let mut p = PathBuf::from(format!("host={}", escape(&self.host)));
        p.push(format!("program={}", escape(&self.program)));
        p.push(format!("pid={}", self.pid));
        p
    }
}

/// The longest escaped value kept whole: with its `program=` key it stays under NAME_MAX
/// (255 bytes), though escaping may triple a name that already was near it.
const MAX_ESCAPED: usize = 240;

/// A partition value as a path component that Hive, Spark and DuckDB read back as the value:
/// the characters Hive escapes (`FileUtils.escapePathName`: controls, `"#%'*/:=?\{[]^` and DEL)
/// percent-encoded. A program's name is chosen by whoever built it: with `/` encoded no value
/// can leave its directory, and `key=` before it means no component is ever `.` or `..`.
/// An empty value is `unknown`; an overlong one is cut (at a character) so that the file system
/// takes it.
pub fn escape(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        let hive = matches!(c, '\u{0}'..='\u{1f}' | '"' | '#' | '%' | '\'' | '*' | '/' | ':' | '=' | '?')
            || matches!(c, '\\' | '\u{7f}' | '{' | '[' | ']' | '^');
        let piece = if hive { format!("%{:02X}", c as u32) } else { c.to_string() };
        if out.len() + piece.len() > MAX_ESCAPED {
            break;
        }
        out.push_str(&piece);
    }
    if out.is_empty() {
        out.push_str("unknown");
    }
    out
}

/// The name of the machine this runs on (the kernel's), or `unknown`.
pub fn local_host() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "unknown".into())
}

/// Puts the directory `new` (a finished partition of one table) at `target`, replacing the
/// partition there: exchanged atomically where the file system can (readers see the old
/// partition or the new one, never neither), else the old one moved aside first. The old one
/// ends at `new`'s path, for the caller to remove.
///
/// A partition holding anything but Parquet files is someone else's directory: it is left as
/// it was, and that is an error.
pub fn replace(new: &Path, target: &Path) -> io::Result<()> {
    match std::fs::symlink_metadata(target) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            std::fs::create_dir_all(target.parent().expect("a partition has parents"))?;
            return std::fs::rename(new, target);
        }
        Err(e) => return Err(e),
        Ok(m) if !m.is_dir() => return Err(not_ours(target)),
        Ok(_) => {}
    }
    for entry in std::fs::read_dir(target)? {
        let entry = entry?;
        let parquet = Path::new(&entry.file_name()).extension().is_some_and(|e| e == "parquet");
        if !entry.file_type()?.is_file() || !parquet {
            return Err(not_ours(target));
        }
    }
    if exchange(new, target).is_ok() {
        return Ok(());
    }
    let mut aside = OsString::from(new.as_os_str());
    aside.push(".old");
    std::fs::rename(target, &aside)?;
    if let Err(e) = std::fs::rename(new, target) {
        // The old partition stays in the data set rather than go with the caller's temporary.
        let _ = std::fs::rename(&aside, target);
        return Err(e);
    }
    std::fs::rename(&aside, new)
}

fn not_ours(target: &Path) -> io::Error {
    io::Error::other(format!("{} holds files that are not Parquet: not replaced", target.display()))
}

/// `renameat2(RENAME_EXCHANGE)`: swaps two paths in one step.
fn exchange(a: &Path, b: &Path) -> io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let ca = std::ffi::CString::new(a.as_os_str().as_bytes())?;
    let cb = std::ffi::CString::new(b.as_os_str().as_bytes())?;
    // SAFETY: two NUL-terminated paths that live across the call.
    let r = unsafe { libc::renameat2(libc::AT_FDCWD, ca.as_ptr(), libc::AT_FDCWD, cb.as_ptr(), libc::RENAME_EXCHANGE) };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostile_values_stay_one_component() {
        assert_eq!(escape("../../etc"), "..%2F..%2Fetc");
        assert_eq!(escape(".."), "..");
        assert_eq!(escape("a=b\nc%"), "a%3Db%0Ac%25");
        assert_eq!(escape(""), "unknown");
        assert_eq!(escape("café"), "café");
        let long = "/".repeat(1000);
        assert!(escape(&long).len() <= MAX_ESCAPED);
        let p = Partition { host: "h/../x".into(), program: "..".into(), pid: 7 }.path();
        let parts: Vec<_> = p.components().map(|c| c.as_os_str().to_str().unwrap().to_string()).collect();
        assert_eq!(parts, ["host=h%2F..%2Fx", "program=..", "pid=7"]);
    }

    #[test]
    fn replaces_a_partition_whole_and_refuses_foreign_ones() {
        let d = tempfile::tempdir().unwrap();
        let target = d.path().join("t/host=a/pid=1");
        let new = d.path().join("new");
        std::fs::create_dir(&new).unwrap();
        std::fs::write(new.join("part-0.parquet"), b"one").unwrap();
        replace(&new, &target).unwrap();
        assert_eq!(std::fs::read(target.join("part-0.parquet")).unwrap(), b"one");
        std::fs::create_dir(&new).unwrap();
        std::fs::write(new.join("part-0.parquet"), b"two").unwrap();
        replace(&new, &target).unwrap();
        assert_eq!(std::fs::read(target.join("part-0.parquet")).unwrap(), b"two");
        assert_eq!(std::fs::read(new.join("part-0.parquet")).unwrap(), b"one", "the old one is handed back");
        std::fs::write(target.join("notes.txt"), b"mine").unwrap();
        assert!(replace(&new, &target).is_err());
        assert_eq!(std::fs::read(target.join("notes.txt")).unwrap(), b"mine");
    }
}
