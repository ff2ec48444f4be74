//! Which qualifiers of a C++ program's function names are classes and which are namespaces,
//! from its DWARF: `util::parse(char const*)` is a free function when `util` is a namespace,
//! and a static member when it is a class. The C++ tables of the report need the difference;
//! the demangled name alone does not give it.

use std::collections::HashSet;
use std::path::Path;

use addr2line::gimli;

use super::units::Reader;

/// The qualified names (`ns::Outer::Inner`, `(anonymous namespace)::Pool`, `Pool<int>`) of the
/// classes, structs and unions and of the namespaces a module's DWARF declares.
#[derive(Debug, Default, Clone)]
pub struct Scopes {
    /// Classes, structs and unions.
    pub classes: HashSet<String>,
    /// Namespaces.
    pub namespaces: HashSet<String>,
}

impl Scopes {
    /// `Some(true)` for a class, `Some(false)` for a namespace, `None` when the module does
    /// not say.
    pub fn is_class(&self, qualified: &str) -> Option<bool> {
        if self.classes.contains(qualified) {
            Some(true)
        } else if self.namespaces.contains(qualified) {
            Some(false)
        } else {
            None
        }
    }
}

/// The scopes of the module at `path`; empty when it has no DWARF.
pub fn scopes(path: &Path) -> Scopes {
    let mut out = Scopes::default();
    super::units::for_each_unit(path, |dwarf, unit| collect(dwarf, unit, &mut out));
    out
}

/// An entry enclosing others, as a scope of function names.
enum Enclosing {
    /// The compilation unit: names inside it are unqualified.
    Unit,
    /// A class or namespace, by its qualified name.
    Scope(String),
    /// Anything else (a function's body): what it declares is no scope of a function name.
    Opaque,
}

fn collect(dwarf: &gimli::Dwarf<Reader<'_>>, unit: &gimli::Unit<Reader<'_>>, out: &mut Scopes) {
    use gimli::{DW_TAG_class_type, DW_TAG_compile_unit, DW_TAG_namespace, DW_TAG_structure_type, DW_TAG_union_type};
    let mut path: Vec<(isize, Enclosing)> = Vec::new();
    let mut depth = 0isize;
    let mut cursor = unit.entries();
    while let Ok(Some((delta, e))) = cursor.next_dfs() {
        depth += delta;
        while path.last().is_some_and(|(d, _)| *d >= depth) {
            path.pop();
        }
        let tag = e.tag();
        let class = tag == DW_TAG_class_type || tag == DW_TAG_structure_type || tag == DW_TAG_union_type;
        let namespace = tag == DW_TAG_namespace;
        let name = match e.attr_value(gimli::DW_AT_name) {
            Ok(Some(v)) => dwarf.attr_string(unit, v).ok().map(|s| s.to_string_lossy().into_owned()),
            _ if namespace => Some("(anonymous namespace)".to_string()),
            _ => None,
        };
        let outer = match path.last() {
            None | Some((_, Enclosing::Unit)) => Some(None),
            Some((_, Enclosing::Scope(q))) => Some(Some(q.as_str())),
            Some((_, Enclosing::Opaque)) => None,
        };
        let this = match (class || namespace, name, outer) {
            _ if tag == DW_TAG_compile_unit => Enclosing::Unit,
            (true, Some(n), Some(outer)) => {
                let q = match outer {
                    Some(o) => format!("{o}::{n}"),
                    None => n,
                };
                if class {
                    out.classes.insert(q.clone());
                } else {
                    out.namespaces.insert(q.clone());
                }
                Enclosing::Scope(q)
            }
            _ => Enclosing::Opaque,
        };
        if e.has_children() {
            path.push((depth, this));
        }
    }
}
