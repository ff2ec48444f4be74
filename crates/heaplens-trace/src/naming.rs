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

/// The files that `template` (one `%p`) names for some pid, with that pid: the traces that
/// the processes of one run wrote when each filled in its own pid. Empty when `template` holds
/// no `%p` or more than one.
pub fn filled_by_pid(template: &Path) -> Vec<(PathBuf, u32)> {
    let t = template.as_os_str().as_bytes();
    let Some(at) = t.windows(2).position(|w| w == b"%p") else { return Vec::new() };
    let (before, after) = (&t[..at], &t[at + 2..]);
    if has_pid(OsStr::from_bytes(after)) {
        return Vec::new();
    }
    let Some(dir) = Path::new(OsStr::from_bytes(before)).parent() else { return Vec::new() };
    let Ok(rd) = std::fs::read_dir(if dir.as_os_str().is_empty() { Path::new(".") } else { dir }) else {
        return Vec::new();
    };
    let mut out: Vec<(PathBuf, u32)> = rd
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let path = dir.join(e.file_name());
            let b = path.as_os_str().as_bytes();
            let mid = b.strip_prefix(before)?.strip_suffix(after)?;
            let pid =
                std::str::from_utf8(mid).ok().filter(|m| !m.is_empty() && m.bytes().all(|c| c.is_ascii_digit()))?;
            Some((path.clone(), pid.parse().ok()?))
        })
        .collect();
    out.sort();
    out
}

/// `path` with `.suffix` appended to its last component (`TRACE.PID` for a child's trace),
/// byte for byte.
pub fn with_suffix(path: &Path, suffix: impl std::fmt::Display) -> PathBuf {
    let mut p = path.as_os_str().to_owned();
    p.push(format!(".{suffix}"));
    PathBuf::from(p)
}

/// The traces written beside `trace` by the processes a run forked or exec'd under
/// `--follow-children`: `TRACE.PID` (and `TRACE.PID.N` when a pid wrote more than one, as a
/// forked child that then execs does), sorted by name. Only the names are checked: whether such
/// a file belongs to `trace`'s process tree is for its Process record to say.
pub fn child_traces(trace: &Path) -> Vec<PathBuf> {
    let Some(name) = trace.file_name() else { return Vec::new() };
    let given = trace.parent().unwrap_or(Path::new(""));
    let dir = if given.as_os_str().is_empty() { Path::new(".") } else { given };
    let mut prefix = name.as_bytes().to_vec();
    prefix.push(b'.');
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .filter(|e| {
                    let n = e.file_name();
                    n.as_bytes().strip_prefix(prefix.as_slice()).is_some_and(|rest| {
                        rest.split(|&b| b == b'.').all(|p| !p.is_empty() && p.iter().all(u8::is_ascii_digit))
                    })
                })
                .map(|e| given.join(e.file_name()))
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
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
