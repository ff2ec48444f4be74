//! What a demangled C++ function name says about its role: the class it is a member of, and
//! whether it is a constructor, a copy or move constructor, an assignment operator, a type
//! conversion or another member function (mtrace++'s invocation cases, its section 2.1).
//!
//! Names are as `cpp_demangle` prints them (`ns::C<int>::C(ns::C<int> const&)`,
//! `C::operator char*() const`). A name without a parameter list (C, Rust) is no member.

/// The role of a member function in mtrace++'s classification.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Role {
    /// `C::C(...)`, except the two below.
    Constructor,
    /// `C::C(C const&)`, `C::C(C&)` and the move constructor `C::C(C&&)`.
    CopyConstructor,
    /// `C::operator=(...)`, copy or move.
    Assignment,
    /// `C::operator T()`: a conversion to another type.
    Conversion,
    /// Any other member function, destructors and other operators included.
    MemberFunction,
}

/// A member function: its class, its name within the class and its role.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Member {
    /// The qualified class name (`ns::Buffer`, `Pool<int>`).
    pub class: String,
    /// The member's name (`Buffer`, `operator=`, `operator char*`, `push`).
    pub name: String,
    /// Its role.
    pub role: Role,
}

/// Whether a qualifier names a class (`Some(true)`), a namespace (`Some(false)`) or is not
/// known (`None`), as the program's debug information says
/// ([`heaplens_interpret::symbolize::scopes`]).
pub type IsClass<'a> = &'a dyn Fn(&str) -> Option<bool>;

/// The member function `name` is, or `None` for a free function (or a name that is not C++).
/// A qualifier that `is_class` knows as a namespace makes a free function; one it does not
/// know is taken for a class.
pub fn member(name: &str, is_class: IsClass<'_>) -> Option<Member> {
    let name = strip_clone_suffix(name);
    let open = param_list_start(name)?;
    let params = &name[open + 1..name.rfind(')')?];
    let parts = split_qualified(strip_return_type(&name[..open]));
    let (last, scope) = parts.split_last()?;
    if scope.is_empty() || scope.iter().any(|s| s.starts_with('{')) || last.starts_with('{') {
        return None; // a free function, or a lambda's call operator
    }
    let class = scope.join("::");
    let class_base = without_template_args(scope.last()?);
    let member = last.to_string();
    let role = if without_template_args(last) == class_base {
        if is_copy_param(params, &class) {
            Role::CopyConstructor
        } else {
            Role::Constructor
        }
    } else if member == "operator=" {
        Role::Assignment
    } else if is_conversion(&member) {
        Role::Conversion
    } else {
        Role::MemberFunction
    };
    let known = is_class(&class);
    // Constructors and conversions exist only in classes; the rest is a member only if the
    // qualifier is not a namespace.
    if known == Some(false) && matches!(role, Role::MemberFunction | Role::Assignment) {
        return None;
    }
    Some(Member { class, name: member, role })
}

/// `f(int) [clone .constprop.0]` is `f(int)`.
fn strip_clone_suffix(name: &str) -> &str {
    match name.find(" [clone") {
        Some(i) => &name[..i],
        None => name,
    }
}

/// The byte offset of the `(` opening the parameter list: the group matching the last `)`.
fn param_list_start(name: &str) -> Option<usize> {
    let close = name.rfind(')')?;
    let mut depth = 0i32;
    for (i, c) in name[..=close].char_indices().rev() {
        match c {
            ')' => depth += 1,
            '(' => {
                depth -= 1;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => {}
        }
    }
    None
}

/// Where `operator` begins the last component of a qualified name, if it does.
fn operator_at(q: &str) -> Option<usize> {
    let mut from = 0;
    while let Some(i) = q[from..].find("operator") {
        let i = from + i;
        let starts_component = i == 0 || q[..i].ends_with("::") || q[..i].ends_with(' ');
        let next = q[i + 8..].chars().next();
        let ends_word = next.is_none_or(|c| !(c.is_alphanumeric() || c == '_'));
        if starts_component && ends_word {
            return Some(i);
        }
        from = i + 8;
    }
    None
}

/// `void ns::f<int>` is `ns::f<int>`: the return type a template function's name carries.
fn strip_return_type(q: &str) -> &str {
    let end = operator_at(q).unwrap_or(q.len());
    let mut depth = 0i32;
    let mut cut = 0;
    for (i, c) in q[..end].char_indices() {
        match c {
            '<' | '(' | '[' | '{' => depth += 1,
            '>' | ')' | ']' | '}' => depth -= 1,
            ' ' if depth == 0 => cut = i + 1,
            _ => {}
        }
    }
    &q[cut..]
}

/// `a::b<c::d>::operator<` is `["a", "b<c::d>", "operator<"]`.
fn split_qualified(q: &str) -> Vec<&str> {
    let op = operator_at(q);
    let mut parts = Vec::new();
    let mut depth = 0i32;
    let mut start = 0;
    let bytes = q.as_bytes();
    let mut i = 0;
    while i < q.len() {
        if Some(i) == op {
            break;
        }
        match bytes[i] {
            b'<' | b'(' | b'[' | b'{' => depth += 1,
            b'>' | b')' | b']' | b'}' => depth -= 1,
            b':' if depth == 0 && bytes.get(i + 1) == Some(&b':') => {
                parts.push(&q[start..i]);
                start = i + 2;
                i += 1;
            }
            _ => {}
        }
        i += 1;
    }
    parts.push(&q[start..]);
    parts
}

/// `Pool<int>` is `Pool`.
fn without_template_args(s: &str) -> &str {
    match s.find('<') {
        Some(i) if !s.starts_with("operator") => &s[..i],
        _ => s,
    }
}

/// A constructor's single parameter is a reference to its own class.
fn is_copy_param(params: &str, class: &str) -> bool {
    let p: String = params.chars().filter(|c| !c.is_whitespace()).collect();
    let class: String = class.chars().filter(|c| !c.is_whitespace()).collect();
    let rest = p.strip_prefix(class.as_str()).or_else(|| p.strip_prefix("const")?.strip_prefix(class.as_str()));
    matches!(rest, Some("&" | "&&" | "const&" | "const&&"))
}

/// `operator char*`, `operator bool`, `operator std::string`: not `operator new`, `operator+`.
fn is_conversion(member: &str) -> bool {
    let Some(rest) = member.strip_prefix("operator ") else { return false };
    !(rest.starts_with("new") || rest.starts_with("delete") || rest.starts_with("\"\""))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn role(name: &str) -> Option<(String, Role)> {
        member(name, &|_| None).map(|m| (m.class, m.role))
    }

    #[test]
    fn roles_from_names() {
        let r = |c: &str, role| Some((c.to_string(), role));
        assert_eq!(role("Buffer::Buffer(unsigned long)"), r("Buffer", Role::Constructor));
        assert_eq!(role("Buffer::Buffer(Buffer const&)"), r("Buffer", Role::CopyConstructor));
        assert_eq!(role("ns::Pool<int>::Pool(ns::Pool<int>&&)"), r("ns::Pool<int>", Role::CopyConstructor));
        assert_eq!(role("Buffer::operator=(Buffer const&)"), r("Buffer", Role::Assignment));
        assert_eq!(role("Buffer::operator char*() const"), r("Buffer", Role::Conversion));
        assert_eq!(role("Buffer::operator std::string() const"), r("Buffer", Role::Conversion));
        assert_eq!(role("Buffer::operator<(Buffer const&) const"), r("Buffer", Role::MemberFunction));
        assert_eq!(role("Buffer::operator()(int)"), r("Buffer", Role::MemberFunction));
        assert_eq!(role("Buffer::~Buffer()"), r("Buffer", Role::MemberFunction));
        assert_eq!(role("Registry::make() [clone .constprop.0]"), r("Registry", Role::MemberFunction));
        assert_eq!(
            role("void std::vector<long, std::allocator<long> >::_M_realloc_insert<long const&>(long*, long const&)"),
            r("std::vector<long, std::allocator<long> >", Role::MemberFunction)
        );
        assert_eq!(role("(anonymous namespace)::Pool::Pool()"), r("(anonymous namespace)::Pool", Role::Constructor));
        assert_eq!(role("main"), None);
        assert_eq!(role("make_block()"), None);
        assert_eq!(role("int twice<int>(int)"), None);
        assert_eq!(role("Outer::run()::{lambda(int)#1}::operator()(int) const"), None);
        assert_eq!(role("alloc::vec::Vec<T>::push"), None);
    }

    #[test]
    fn namespaces_are_not_classes() {
        let ns = |q: &str| (q == "util").then_some(false);
        assert_eq!(member("util::helper(int)", &ns), None);
        assert!(member("util2::helper(int)", &ns).is_some());
    }
}
