//! Blocks live at exit that are not leaks: the runtime's one-time allocations, never freed by
//! design (stdio buffers, a thread's TLS and DTV, libstdc++'s emergency exception pool, locale,
//! NSS and dlerror buffers, Rust's runtime and stdout), and the user's suppressions in
//! LeakSanitizer's file format (`leak:PATTERN` lines).
//!
//! A runtime pattern names a function of the library part of a path (the frames inner to the
//! program's own code, which [`crate::paths::Attribution`] passes over): `printf` allocating its
//! buffer for `main` is the runtime's, `main` calling `malloc` itself is not. A user pattern
//! matches any frame's function, module or source file, as LeakSanitizer's do: `*` matches any run of
//! characters, a leading `^` or trailing `$` anchors the match, else it may match anywhere
//! (see LLVM's `sanitizer_common/sanitizer_suppressions.cpp`, `TemplateMatch`).

/// Where a suppression comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// Built in: a runtime's allocation never freed by design.
    Runtime,
    /// From a suppressions file.
    User,
}

/// One suppression.
#[derive(Debug, Clone)]
pub struct Suppression {
    /// The pattern as written (`_IO_file_doallocate`, `leak:` stripped from a file's).
    pub pattern: String,
    /// What the runtime allocates there (`stdio buffer`), for built-in ones.
    pub what: &'static str,
    /// Where it comes from.
    pub origin: Origin,
}

/// The runtime's one-time allocations: `(pattern, what)`; `*` at the end matches a prefix.
const RUNTIME: &[(&str, &str)] = &[
    ("_IO_file_doallocate", "stdio buffer"),
    ("allocate_dtv", "thread DTV"),
    ("_dl_allocate_tls*", "thread TLS"),
    ("_dl_resize_dtv", "thread DTV"),
    ("__tls_get_addr", "thread TLS"),
    ("update_get_addr", "thread TLS"),
    ("(anonymous namespace)::pool::pool*", "libstdc++ emergency exception pool"),
    ("__cxa_get_globals*", "libstdc++ exception globals"),
    ("_dlerror_run", "dlerror buffer"),
    ("dlerror*", "dlerror buffer"),
    ("__dlerror", "dlerror buffer"),
    ("setlocale", "locale data"),
    ("_nl_*", "locale data"),
    ("new_composite_name", "locale data"),
    ("read_alias_file", "locale data"),
    ("extend_alias_table", "locale data"),
    ("__nss_*", "NSS module data"),
    ("nss_*", "NSS module data"),
    ("getpw*", "passwd lookup buffer"),
    ("getgr*", "group lookup buffer"),
    ("__resolv_conf_*", "resolver configuration"),
    ("__resolv_context_get*", "resolver configuration"),
    ("get_locked_global", "resolver configuration"),
    ("resolv_conf_array_add", "resolver configuration"),
    ("__check_pf", "network interface cache"),
    ("__tzfile_read", "time zone data"),
    ("tzset_internal", "time zone data"),
    ("std::rt::lang_start_internal", "Rust runtime"),
    ("std::rt::init", "Rust runtime"),
    ("std::thread::current*", "Rust thread handle"),
    ("std::sys::pal::unix::stack_overflow::*", "Rust stack overflow guard"),
    ("std::io::stdio::*", "Rust stdio buffer"),
];

/// The suppressions a report applies: the runtime's, then the user's.
#[derive(Debug, Clone)]
pub struct Suppressions {
    list: Vec<Suppression>,
    /// User patterns compiled, in `list` order after the runtime's.
    user: Vec<Template>,
}

impl Default for Suppressions {
    /// The runtime's suppressions alone.
    fn default() -> Self {
        let list = RUNTIME
            .iter()
            .map(|&(pattern, what)| Suppression { pattern: pattern.to_string(), what, origin: Origin::Runtime })
            .collect();
        Self { list, user: Vec::new() }
    }
}

impl Suppressions {
    /// No suppression at all: every block live at exit is a leak.
    pub fn none() -> Self {
        Self { list: Vec::new(), user: Vec::new() }
    }

    /// Adds the `leak:` lines of a LeakSanitizer suppressions file (`text`). Blank lines and
    /// `#` comments are skipped, as are other sanitizers' kinds (`race:`, `thread:`).
    ///
    /// # Errors
    /// The 1-based line number and a message for a line that is not `KIND:PATTERN` or whose
    /// pattern is empty.
    pub fn add_lsan(&mut self, text: &str) -> Result<(), String> {
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let Some((kind, pattern)) = line.split_once(':') else {
                return Err(format!("line {}: expected leak:PATTERN, got {line:?}", n + 1));
            };
            if kind.trim() != "leak" {
                continue;
            }
            let pattern = pattern.trim();
            if pattern.is_empty() {
                return Err(format!("line {}: empty pattern", n + 1));
            }
            self.user.push(Template::new(pattern));
            self.list.push(Suppression { pattern: pattern.to_string(), what: "", origin: Origin::User });
        }
        Ok(())
    }

    /// All suppressions, by index.
    pub fn list(&self) -> &[Suppression] {
        &self.list
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    fn runtime_count(&self) -> usize {
        self.list.len() - self.user.len()
    }

    /// The first runtime suppression naming function `name`.
    pub fn runtime_match(&self, name: &str) -> Option<usize> {
        self.list[..self.runtime_count()].iter().position(|s| match s.pattern.strip_suffix('*') {
            Some(prefix) => name.starts_with(prefix),
            None => name == s.pattern,
        })
    }

    /// The first user suppression matching function `name`, module `module` or source file
    /// `file`.
    pub fn user_match(&self, name: &str, module: Option<&str>, file: Option<&str>) -> Option<usize> {
        let base = self.runtime_count();
        let any = |t: &Template| t.matches(name) || [module, file].iter().flatten().any(|x| t.matches(x));
        self.user.iter().position(any).map(|i| base + i)
    }
}

/// A LeakSanitizer pattern: `*` wildcards, optional `^` and `$` anchors.
#[derive(Debug, Clone)]
struct Template {
    parts: Vec<String>,
    start: bool,
    end: bool,
}

impl Template {
    fn new(p: &str) -> Self {
        let start = p.starts_with('^');
        let p = p.strip_prefix('^').unwrap_or(p);
        let end = p.ends_with('$') && !p.ends_with("\\$");
        let p = if end { &p[..p.len() - 1] } else { p };
        Self { parts: p.split('*').map(str::to_string).collect(), start, end }
    }

    fn matches(&self, s: &str) -> bool {
        let n = self.parts.len();
        let mut rest = s;
        for (i, part) in self.parts.iter().enumerate() {
            let (first, last) = (i == 0, i == n - 1);
            if last && self.end {
                // The last part must end the string, after what came before it.
                if !rest.ends_with(part.as_str()) || (first && self.start && rest != part) {
                    return false;
                }
                return true;
            }
            if first && self.start {
                match rest.strip_prefix(part.as_str()) {
                    Some(r) => rest = r,
                    None => return false,
                }
                continue;
            }
            match rest.find(part.as_str()) {
                Some(at) => rest = &rest[at + part.len()..],
                None => return false,
            }
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lsan_templates() {
        let t = |p: &str, s: &str| Template::new(p).matches(s);
        assert!(t("make_leak", "make_leak"));
        assert!(t("leak", "make_leak_now"));
        assert!(t("^make", "make_leak"));
        assert!(!t("^leak", "make_leak"));
        assert!(t("leak$", "make_leak"));
        assert!(!t("make$", "make_leak"));
        assert!(t("^make_leak$", "make_leak"));
        assert!(!t("^make_leak$", "make_leak2"));
        assert!(t("std::*::push_back", "std::vector<…>::push_back"));
        assert!(!t("std::*::push_back", "std::vector<…>::insert"));
        assert!(t("lib*.so", "libfoo.so.1"));
    }

    #[test]
    fn files_and_matches() {
        let mut s = Suppressions::default();
        s.add_lsan("# ours\n\nleak:make_leak\nrace:ignored\nleak:libthird*.so\nleak:parser.c$\n").unwrap();
        let user: Vec<&str> =
            s.list().iter().filter(|x| x.origin == Origin::User).map(|x| x.pattern.as_str()).collect();
        assert_eq!(user, ["make_leak", "libthird*.so", "parser.c$"]);
        assert_eq!(s.runtime_match("_IO_file_doallocate").map(|i| s.list()[i].what), Some("stdio buffer"));
        assert_eq!(s.runtime_match("_nl_intern_locale_data").map(|i| s.list()[i].what), Some("locale data"));
        assert_eq!(s.runtime_match("main"), None);
        assert_eq!(s.user_match("make_leak", None, None).map(|i| s.list()[i].pattern.as_str()), Some("make_leak"));
        assert_eq!(
            s.user_match("f", Some("libthird.so.2"), None).map(|i| s.list()[i].pattern.as_str()),
            Some("libthird*.so")
        );
        assert_eq!(s.user_match("f", Some("libc.so.6"), None), None);
        // A source file, as LeakSanitizer matches it.
        let by_file =
            s.user_match("parse", Some("app"), Some("/src/app/parser.c")).map(|i| s.list()[i].pattern.as_str());
        assert_eq!(by_file, Some("parser.c$"));
        assert_eq!(s.user_match("parse", Some("app"), Some("/src/app/parser.cc")), None);
        assert!(s.add_lsan("nonsense").is_err());
        assert!(s.add_lsan("leak:").is_err());
    }
}
