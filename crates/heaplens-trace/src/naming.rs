//! Trace file names, handled as the bytes the OS gives: a path need not be UTF-8, and a name
//! that went through a lossy conversion would be another file.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

/// `template` with every `%p` replaced by `pid` (`heaplens run -o trace.%p.hltrace`), byte
/// for byte: the other bytes pass through unchanged, UTF-8 or not.
pub fn fill_pid(template: &OsStr, pid: &str) -> PathBuf {
    let (t, mut out) = (template.as_bytes(), Vec::with_capacity(template.len() + 8));
    let mut i = 0;
    while i < t.len() {
        if t[i..].starts_with(b"%p") {
            out.extend_from_slice(pid.as_bytes());
            i += 2;
        } else {
            out.push(t[i]);
            i += 1;
        }
    }
    PathBuf::from(OsString::from_vec(out))
}

/// Whether `template` holds `%p`.
pub fn has_pid(template: &OsStr) -> bool {
    template.as_bytes().windows(2).any(|w| w == b"%p")
}

/// `path` with `.suffix` appended to its last component (`TRACE.PID` for a child's trace),
/// byte for byte.
pub fn with_suffix(path: &Path, suffix: impl std::fmt::Display) -> PathBuf {
    let mut p = path.as_os_str().to_owned();
    p.push(format!(".{suffix}"));
    PathBuf::from(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_pass_through() {
        let t = OsStr::from_bytes(b"/tmp/\xff/t%p\xfe.hltrace");
        assert_eq!(fill_pid(t, "42").as_os_str().as_bytes(), b"/tmp/\xff/t42\xfe.hltrace");
        assert!(has_pid(t));
        assert!(!has_pid(OsStr::from_bytes(b"t\xff%")));
        assert_eq!(with_suffix(Path::new(OsStr::from_bytes(b"t\xff")), 7).as_os_str().as_bytes(), b"t\xff.7");
    }
}
