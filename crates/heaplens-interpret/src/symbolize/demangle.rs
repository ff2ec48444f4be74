//! Demangling, with GNU `c++filt` behind the Rust demanglers for the C++ names they give up
//! on: cpp_demangle (0.4 and 0.5) refuses some `std::make_shared` instantiations, whose return
//! type holds an `enable_if` expression (`_ZSt11make_sharedI...EDpOT0_`), and a raw mangled
//! name in a table names nothing a person can read.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Mutex;

/// `name` demangled (C++ or Rust), or as it is when it is not mangled or no demangler reads it.
/// Only names with a mangling prefix are demangled (`_Z`, Rust's `_R`): cpp_demangle reads a
/// bare `a` or `b` (C functions) as the types `signed char` and `bool`.
pub fn demangle(name: &str) -> Cow<'_, str> {
    if !is_mangled(name) {
        return Cow::Borrowed(name);
    }
    let d = addr2line::demangle_auto(Cow::Borrowed(name), None);
    if d != name || !name.starts_with("_Z") {
        return d;
    }
    match cxxfilt(name) {
        Some(s) => Cow::Owned(s),
        None => d,
    }
}

/// `name` has a mangling prefix (C++'s `_Z`, Apple's `__Z`, Rust's v0 `_R`).
pub fn is_mangled(name: &str) -> bool {
    name.starts_with("_Z") || name.starts_with("_R") || name.starts_with("__Z")
}

/// `c++filt NAME`, remembered per name; `None` when c++filt is missing or leaves it as it is.
fn cxxfilt(name: &str) -> Option<String> {
    static SEEN: Mutex<Option<HashMap<String, Option<String>>>> = Mutex::new(None);
    // A name from a binary is outside input: only a mangled name's characters reach the
    // command line (no option, no space), and names of absurd length are left alone.
    if name.len() > 4096 || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'.' || b == b'$') {
        return None;
    }
    if let Some(known) = SEEN.lock().ok()?.get_or_insert_with(HashMap::new).get(name) {
        return known.clone();
    }
    let out = std::process::Command::new("c++filt")
        .arg(name)
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.trim_end().to_string())
        .filter(|s| !s.is_empty() && s != name && !s.contains('\n'));
    SEEN.lock().ok()?.get_or_insert_with(HashMap::new).insert(name.to_string(), out.clone());
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn make_shared_is_demangled() {
        let raw = "_ZSt11make_sharedISt5arrayIcLm200EEJEESt10shared_ptrINSt9enable_ifIXntsrSt8is_arrayIT_E5valueES5_E4typeEEDpOT0_";
        if std::process::Command::new("c++filt").arg("--version").output().is_err() {
            eprintln!("SKIPPED: no c++filt");
            return;
        }
        let d = super::demangle(raw);
        assert!(d.contains("std::make_shared<std::array<char, 200ul>"), "{d}");
        assert_eq!(super::demangle("_ZN3app4makeEid"), "app::make(int, double)");
        assert_eq!(super::demangle("plain_c"), "plain_c");
        assert_eq!(super::demangle("a"), "a");
        assert_eq!(super::demangle("b"), "b");
        assert_eq!(super::demangle("_Z-rf"), "_Z-rf");
    }
}
