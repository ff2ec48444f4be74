//! Short names: a demangled C++ or Rust name with its template and generic arguments elided,
//! `std::vector<…>::_M_realloc_insert<…>(long*, long const&)` for
//! `void std::vector<long, std::allocator<long> >::_M_realloc_insert<long const&>(long*, long
//! const&)`. Tables read better, and a function's instantiations add up to one row. Parameter
//! lists stay (they tell overloads and constructors apart), and so does Rust's qualified self
//! type, `<alloc::vec::Vec<…> as core::ops::drop::Drop>::drop`.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};

/// Names elided where that stays unambiguous: built from the whole names a view shows, it
/// gives each name elided ([`elide_generics`]) unless another of them would then read the
/// same (`fill<int>` and `fill<long>` stay whole; one name in two modules is one name).
#[derive(Debug, Default)]
pub struct Unambiguous {
    /// Per elided name, how many distinct whole names read as it.
    readers: HashMap<String, usize>,
}

impl Unambiguous {
    /// The elided forms of `names` (whole names, repeats allowed).
    pub fn of<'a>(names: impl IntoIterator<Item = &'a str>) -> Self {
        let whole: HashSet<&str> = names.into_iter().collect();
        let mut readers: HashMap<String, usize> = HashMap::new();
        for name in whole {
            *readers.entry(elide_generics(name).into_owned()).or_default() += 1;
        }
        Unambiguous { readers }
    }

    /// `name` elided, or whole when another name would read the same.
    pub fn show<'a>(&self, name: &'a str) -> Cow<'a, str> {
        let short = elide_generics(name);
        if self.readers.get(short.as_ref()).copied().unwrap_or(0) > 1 {
            Cow::Borrowed(name)
        } else {
            short
        }
    }
}

/// What a `<` opened.
#[derive(Clone, Copy, PartialEq)]
enum Bracket {
    /// Template or generic arguments: left out.
    Arguments,
    /// Rust's `<Type as Trait>` at the start of a path: kept.
    QualifiedSelf,
}

/// `name` with the arguments of its templates and generics replaced by `…`, and a C++
/// template function's return type (`void `, before its qualified name) dropped; unchanged
/// when it has none.
pub fn elide_generics(name: &str) -> Cow<'_, str> {
    // Non-ASCII names (rare; the loop below copies bytes) are left whole.
    if !name.contains('<') || !name.is_ascii() {
        return Cow::Borrowed(name);
    }
    let mut out = String::with_capacity(name.len());
    let mut stack: Vec<Bracket> = Vec::new();
    let hidden = |s: &[Bracket]| s.contains(&Bracket::Arguments);
    let bytes = name.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let rest = &name[i..];
        // `operator<`, `operator<<=`, `operator->`: symbols, not brackets.
        if rest.starts_with("operator") && (i == 0 || !is_ident(bytes[i - 1])) {
            let sym_end = rest[8..].find(|c: char| !"<>=-!+*/%^&|~".contains(c)).map_or(rest.len(), |e| e + 8);
            if !hidden(&stack) {
                out.push_str(&rest[..sym_end]);
            }
            i += sym_end;
            continue;
        }
        let c = bytes[i];
        match c {
            b'<' => {
                // `<T as Trait>` opens a Rust path (at the start, after `as ` or `(`, or nested);
                // after a name or `::` (a turbofish) come arguments.
                let prev = name[..i].chars().last();
                let path_start = matches!(prev, None | Some('(' | ' ' | '<'));
                let after_name = prev.is_some_and(|p| p.is_ascii_alphanumeric() || p == '_' || p == ':');
                if !path_start && !after_name && !hidden(&stack) {
                    // Not a bracket: an odd symbol's own character (`a<<b`, `x><y`).
                    out.push('<');
                    i += 1;
                    continue;
                }
                let kind = if path_start && !hidden(&stack) { Bracket::QualifiedSelf } else { Bracket::Arguments };
                if !hidden(&stack) {
                    out.push_str(if kind == Bracket::Arguments { "<…" } else { "<" });
                }
                stack.push(kind);
            }
            b'>' if !stack.is_empty() => {
                stack.pop();
                if !hidden(&stack) {
                    out.push('>');
                }
            }
            _ => {
                if !hidden(&stack) {
                    out.push(c as char);
                }
            }
        }
        i += 1;
    }
    Cow::Owned(strip_return_type(out))
}

fn is_ident(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// `unsigned long std::f<…>(int)` is `std::f<…>(int)`, and `std::shared_ptr<…>
/// std::make_shared<…>()` is `std::make_shared<…>()`: the last space outside brackets before
/// the parameter list ends a template function's return type (the return type may be
/// qualified itself). A conversion operator's type (`operator unsigned long()`) is no return
/// type; a name without a parameter list is left whole.
fn strip_return_type(s: String) -> String {
    let mut depth = 0i32;
    let mut cut = None;
    for (i, c) in s.char_indices() {
        match c {
            '<' | '[' | '{' => depth += 1,
            '>' | ']' | '}' => depth -= 1,
            // The parameters; or `operator new(unsigned long)`, `operator unsigned long()`,
            // after which no space ends a return type.
            '(' | 'o'
                if depth == 0
                    && (c == '(' || s[i..].starts_with("operator") && (i == 0 || !is_ident(s.as_bytes()[i - 1]))) =>
            {
                return match cut {
                    Some(at) => s[at..].to_string(),
                    None => s,
                };
            }
            ' ' if depth == 0 => cut = Some(i + 1),
            _ => {}
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::elide_generics as e;

    #[test]
    fn cxx_templates() {
        assert_eq!(
            e("void std::vector<long, std::allocator<long> >::_M_realloc_insert<long const&>(__gnu_cxx::__normal_iterator<long*, std::vector<long, std::allocator<long> > >, long const&)"),
            "std::vector<…>::_M_realloc_insert<…>(__gnu_cxx::__normal_iterator<…>, long const&)"
        );
        assert_eq!(e("Pool<int>::Pool(Pool<int> const&)"), "Pool<…>::Pool(Pool<…> const&)");
        assert_eq!(e("Buffer::operator<(Buffer const&) const"), "Buffer::operator<(Buffer const&) const");
        assert_eq!(e("Buf<int>::operator<<(int)"), "Buf<…>::operator<<(int)");
        assert_eq!(e("Buf<int>::operator->() const"), "Buf<…>::operator->() const");
        assert_eq!(e("std::function<void (int)>::operator()(int) const"), "std::function<…>::operator()(int) const");
        assert_eq!(e("make_block()"), "make_block()");
        assert_eq!(e("operator new(unsigned long)"), "operator new(unsigned long)");
        assert_eq!(
            e("std::shared_ptr<std::array<char, 200ul> > std::make_shared<std::array<char, 200ul>>()"),
            "std::make_shared<…>()"
        );
        assert_eq!(e("Foo<int>::operator unsigned long() const"), "Foo<…>::operator unsigned long() const");
        assert_eq!(e("</script><script>alert(1)</script>"), "</script><script>alert(1)</script>");
    }

    #[test]
    fn rust_generics() {
        assert_eq!(
            e("<alloc::vec::Vec<T,A> as core::ops::drop::Drop>::drop"),
            "<alloc::vec::Vec<…> as core::ops::drop::Drop>::drop"
        );
        assert_eq!(e("alloc::raw_vec::RawVec<T,A>::grow_one"), "alloc::raw_vec::RawVec<…>::grow_one");
        assert_eq!(e("core::ptr::drop_in_place<boxes::Node>"), "core::ptr::drop_in_place<…>");
        assert_eq!(
            e("<u8 as <[_]>::to_vec_in::ConvertVec>::to_vec::<alloc::alloc::Global>"),
            "<u8 as <[_]>::to_vec_in::ConvertVec>::to_vec::<…>"
        );
    }
}
