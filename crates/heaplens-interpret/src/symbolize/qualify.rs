//! Qualified names for C++ functions that DWARF names only by their short name. GCC gives a
//! function with internal linkage no `DW_AT_linkage_name` (a method of a class in an anonymous
//! namespace, a lambda's `operator()`, a static function): inlined, such a frame has no symbol
//! either, so `addr2line` names it `make` or `operator()`, and two different functions of one
//! name read (and are counted) as one. Here the function's declaration is found (through
//! `DW_AT_abstract_origin` and `DW_AT_specification`) and its enclosing scopes are read from the
//! unit's tree: `(anonymous namespace)::Parser::make`, `parse()::{lambda}::operator()`.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

use addr2line::gimli::{self, AttributeValue, UnitOffset, UnitRef};

/// The enclosing scopes looked for at most, and the origin links followed at most: a damaged
/// file's loops end there.
const MAX_LINKS: usize = 16;

/// Parents of the entries of the units asked about, by unit (its header's offset): built once
/// per unit, on the first name it is asked for.
#[derive(Default)]
pub struct Qualifier {
    parents: RefCell<HashMap<usize, Rc<HashMap<usize, usize>>>>,
}

impl Qualifier {
    /// The qualified name of the function whose entry (a subprogram, or an inlined
    /// subroutine) is at `die` in `unit`; `None` when the unit is not C++, the entry cannot be
    /// read, or the function has no enclosing scope (a plain global function: its short name
    /// is whole).
    pub fn qualified<R: gimli::Reader<Offset = usize>>(&self, unit: UnitRef<'_, R>, die: UnitOffset) -> Option<String> {
        if !is_cxx(unit) {
            return None;
        }
        let decl = declaration(unit, die)?;
        let name = string(unit, &unit.entry(decl).ok()?, gimli::DW_AT_name)?;
        let parents = self.parents(unit)?;
        let mut scopes = Vec::new();
        let mut at = parents.get(&decl.0).copied();
        while let Some(p) = at {
            if scopes.len() >= MAX_LINKS {
                return None;
            }
            let e = unit.entry(UnitOffset(p)).ok()?;
            let named = string(unit, &e, gimli::DW_AT_name);
            match e.tag() {
                gimli::DW_TAG_namespace => scopes.push(named.unwrap_or_else(|| "(anonymous namespace)".into())),
                gimli::DW_TAG_structure_type | gimli::DW_TAG_class_type | gimli::DW_TAG_union_type => {
                    // A lambda's closure type has no name.
                    scopes.push(named.unwrap_or_else(|| "{lambda}".into()))
                }
                gimli::DW_TAG_subprogram => {
                    // The function a lambda (or a local class) is defined in, whole: its
                    // scopes are in its name.
                    scopes.push(function_name(unit, UnitOffset(p)).or(named)?);
                    break;
                }
                gimli::DW_TAG_compile_unit | gimli::DW_TAG_partial_unit => break,
                _ => {}
            }
            at = parents.get(&p).copied();
        }
        if scopes.is_empty() {
            return None;
        }
        scopes.reverse();
        Some(format!("{}::{name}", scopes.join("::")))
    }

    /// The parent of each entry of `unit`, by offset.
    fn parents<R: gimli::Reader<Offset = usize>>(&self, unit: UnitRef<'_, R>) -> Option<Rc<HashMap<usize, usize>>> {
        let key = unit.header.offset().as_debug_info_offset().map_or(usize::MAX, |o| o.0);
        if let Some(p) = self.parents.borrow().get(&key) {
            return Some(p.clone());
        }
        let mut parents = HashMap::new();
        let mut path: Vec<usize> = Vec::new();
        let mut entries = unit.entries();
        let mut depth = 0isize;
        while let Ok(Some((delta, e))) = entries.next_dfs() {
            depth += delta;
            let depth = usize::try_from(depth).ok()?;
            path.truncate(depth);
            if let Some(&p) = path.last() {
                parents.insert(e.offset().0, p);
            }
            path.push(e.offset().0);
        }
        let parents = Rc::new(parents);
        self.parents.borrow_mut().insert(key, parents.clone());
        Some(parents)
    }
}

/// Whether `unit` is C++ (by its root's `DW_AT_language`).
fn is_cxx<R: gimli::Reader<Offset = usize>>(unit: UnitRef<'_, R>) -> bool {
    let mut entries = unit.entries();
    let Ok(Some((_, root))) = entries.next_dfs() else { return false };
    matches!(
        root.attr_value(gimli::DW_AT_language),
        Ok(Some(AttributeValue::Language(
            gimli::DW_LANG_C_plus_plus
                | gimli::DW_LANG_C_plus_plus_03
                | gimli::DW_LANG_C_plus_plus_11
                | gimli::DW_LANG_C_plus_plus_14
        )))
    )
}

/// The entry `e` takes its name from: its abstract origin, or the declaration it specifies.
fn origin<R: gimli::Reader<Offset = usize>>(e: &gimli::DebuggingInformationEntry<'_, '_, R>) -> Option<UnitOffset> {
    [gimli::DW_AT_abstract_origin, gimli::DW_AT_specification].into_iter().find_map(|a| match e.attr_value(a) {
        Ok(Some(AttributeValue::UnitRef(o))) => Some(o),
        _ => None,
    })
}

/// The entry that declares the function at `die`: its abstract origin's, its specification's.
fn declaration<R: gimli::Reader<Offset = usize>>(unit: UnitRef<'_, R>, die: UnitOffset) -> Option<UnitOffset> {
    let mut at = die;
    for _ in 0..MAX_LINKS {
        match origin(&unit.entry(at).ok()?) {
            Some(o) => at = o,
            None => return Some(at),
        }
    }
    None
}

/// A subprogram's name as the frames show it: its linkage name demangled (found on it, its
/// origin or its specification), else its short name.
fn function_name<R: gimli::Reader<Offset = usize>>(unit: UnitRef<'_, R>, die: UnitOffset) -> Option<String> {
    let mut at = die;
    for _ in 0..MAX_LINKS {
        let e = unit.entry(at).ok()?;
        for a in [gimli::DW_AT_linkage_name, gimli::DW_AT_MIPS_linkage_name] {
            if let Some(n) = string(unit, &e, a) {
                return Some(super::demangle::demangle(&n).into_owned());
            }
        }
        match origin(&e) {
            Some(o) => at = o,
            None => return string(unit, &e, gimli::DW_AT_name),
        }
    }
    None
}

/// The string value of attribute `a` of `e`.
fn string<R: gimli::Reader<Offset = usize>>(
    unit: UnitRef<'_, R>,
    e: &gimli::DebuggingInformationEntry<'_, '_, R>,
    a: gimli::DwAt,
) -> Option<String> {
    let v = e.attr_value(a).ok()??;
    let s = unit.attr_string(v).ok()?;
    Some(s.to_string_lossy().ok()?.into_owned())
}
