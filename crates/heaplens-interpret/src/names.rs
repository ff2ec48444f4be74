//! Names from a trace made safe for each kind of output, and cut to a width.
//!
//! Function, file, module and thread names and the command line are chosen by whoever wrote
//! the profiled program: a symbol can hold any byte but NUL (`__asm__` labels, `objcopy
//! --redefine-sym`), a thread name any 15 bytes. Left as they are, ESC and BEL drive the terminal
//! that shows a report, a newline splits a record of a line-based format, and XML 1.0 forbids
//! most C0 controls even as character references, so one makes an SVG unreadable. Every view
//! passes the names it writes through the function of its output's family here, so that the
//! views agree without importing each other. JSON keeps names as they are (serde escapes
//! them); the SVG writers escape markup after this.
//!
//! A character that must go is written as a visible escape in Rust's spelling (`\x1b`,
//! `\u{202e}`) rather than dropped or replaced by U+FFFD, so that two names differing only
//! there stay two names and the user can see what the program named.
//!
//! Labels of fixed width are cut by characters ([`keep_end`]), never at a byte index, which
//! would split a multi-byte character such as the `…` of elided generic arguments.

use std::borrow::Cow;
use std::fmt::Write;

/// Characters that end or break a line, or that no reader shows: C0 controls (tab, LF and CR
/// included), DEL, C1 controls (NEL included), and the line and paragraph separators some
/// readers take for line ends.
fn breaks_line(c: char) -> bool {
    c.is_control() || c == '\u{2028}' || c == '\u{2029}'
}

/// What a terminal also acts on: bidirectional embeddings, overrides and isolates, and the
/// marks, which reorder what follows them on screen (a name could show as another).
fn reorders(c: char) -> bool {
    matches!(c, '\u{200e}' | '\u{200f}' | '\u{061c}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// `s` with every character `bad` picks written as a visible escape; borrowed when none is.
fn escape(s: &str, bad: impl Fn(char) -> bool) -> Cow<'_, str> {
    let Some(first) = s.find(&bad) else { return Cow::Borrowed(s) };
    let mut out = String::with_capacity(s.len() + 8);
    out.push_str(&s[..first]);
    for c in s[first..].chars() {
        if !bad(c) {
            out.push(c);
        } else if let Some(e) = match c {
            '\n' => Some("\\n"),
            '\r' => Some("\\r"),
            '\t' => Some("\\t"),
            _ => None,
        } {
            out.push_str(e);
        } else if (c as u32) < 0x100 {
            let _ = write!(out, "\\x{:02x}", c as u32);
        } else {
            let _ = write!(out, "\\u{{{:x}}}", c as u32);
        }
    }
    Cow::Owned(out)
}

/// A name for a line-based file format read by tools (folded stacks, pprof's text):
/// nothing in it ends the line or hides from a reader. Field separators of the format itself
/// (`;` between folded frames) remain the format's to handle.
pub fn for_line(s: &str) -> Cow<'_, str> {
    escape(s, breaks_line)
}

/// A name for a terminal: what [`for_line`] escapes, and the bidirectional controls that
/// would reorder the line on screen, so a trace cannot move the cursor, retitle the window,
/// ring the bell or disguise one name as another.
pub fn for_terminal(s: &str) -> Cow<'_, str> {
    escape(s, |c| breaks_line(c) || reorders(c))
}

/// A name for XML text or an attribute value (SVG pictures and flame graphs): what
/// [`for_terminal`] escapes, which covers every control character XML 1.0 forbids, and the
/// noncharacters U+FFFE and U+FFFF it forbids too. Markup (`&`, `<`, `>`, quotes) is left to
/// the XML writer, which escapes it.
pub fn for_xml(s: &str) -> Cow<'_, str> {
    escape(s, |c| breaks_line(c) || reorders(c) || c == '\u{fffe}' || c == '\u{ffff}')
}

/// `s` cut to at most `max` characters by keeping its end (the innermost part of a qualified
/// name) behind `...` (without it below 4); whole when it fits. Counts characters, not bytes.
pub fn keep_end(s: &str, max: usize) -> Cow<'_, str> {
    const MARK: &str = "...";
    let n = s.chars().count();
    if n <= max {
        return Cow::Borrowed(s);
    }
    let mark = if max > MARK.len() { MARK } else { "" };
    let keep = max - mark.len();
    let start = s.char_indices().nth(n - keep).map_or(s.len(), |(i, _)| i);
    Cow::Owned(format!("{mark}{}", &s[start..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_become_visible_escapes() {
        assert_eq!(for_terminal("ctl\x01\x1b[31m\x07name"), "ctl\\x01\\x1b[31m\\x07name");
        assert_eq!(for_line("a\nb;c 7\r\t"), "a\\nb;c 7\\r\\t");
        assert_eq!(for_line("del\x7f c1\u{85}\u{9b}"), "del\\x7f c1\\x85\\x9b");
        assert_eq!(for_line("ls\u{2028}"), "ls\\u{2028}");
        assert_eq!(for_terminal("bidi\u{202e}right\u{2066}"), "bidi\\u{202e}right\\u{2066}");
        assert_eq!(for_line("bidi\u{202e}"), "bidi\u{202e}", "a file line keeps what only a screen acts on");
        assert_eq!(for_xml("x\u{fffe}\u{ffff}\x1b"), "x\\u{fffe}\\u{ffff}\\x1b");
    }

    #[test]
    fn clean_names_are_borrowed_untouched() {
        for s in ["std::vector<int>::push_back(int const&)", "alloc::vec::Vec<…>::push", "日本語", ""] {
            assert!(matches!(for_terminal(s), Cow::Borrowed(b) if b == s));
            assert!(matches!(for_xml(s), Cow::Borrowed(b) if b == s));
        }
    }

    #[test]
    fn labels_are_cut_by_characters() {
        // The cut of a byte-indexed slice would fall inside the three-byte `…` here.
        let name = "alloc::raw_vec::RawVec<…>::grow_one::h0123456789abcdef_x";
        for max in 4..name.chars().count() + 2 {
            let cut = keep_end(name, max);
            assert!(cut.chars().count() <= max, "{max}: {cut}");
            if max < name.chars().count() {
                assert!(cut.starts_with("...") && name.ends_with(&cut[3..]), "{max}: {cut}");
            } else {
                assert_eq!(cut, name);
            }
        }
        assert_eq!(keep_end("ab…cd…ef", 5), "...ef");
        assert_eq!(keep_end("ab…cd…ef", 6), "...…ef");
        assert_eq!(keep_end("ééééé", 5), "ééééé");
        assert_eq!(keep_end("éééééé", 5), "...éé");
        assert_eq!(keep_end("abcd", 3), "bcd");
    }
}
