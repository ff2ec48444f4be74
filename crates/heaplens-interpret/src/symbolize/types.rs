//! The program's own types by size, from its DWARF: what mprof's allocation bin table shows
//! beside a size (`widget` for the 204-byte bin of the paper's example).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use addr2line::gimli::{self, AttributeValue};

use super::units::Reader;

/// Named struct, class and union types of the module at `path` (and typedefs naming one), by
/// byte size; empty when it has no DWARF. Declarations (no size) are left out.
pub fn types_by_size(path: &Path) -> BTreeMap<u64, BTreeSet<String>> {
    let mut out = BTreeMap::new();
    super::units::for_each_unit(path, |dwarf, unit| collect(dwarf, unit, &mut out));
    out
}

/// A type entry: its tag, name, size and the type it names (typedefs).
struct Entry {
    tag: gimli::DwTag,
    name: Option<String>,
    size: Option<u64>,
    target: Option<gimli::UnitOffset>,
}

fn collect(
    dwarf: &gimli::Dwarf<Reader<'_>>,
    unit: &gimli::Unit<Reader<'_>>,
    out: &mut BTreeMap<u64, BTreeSet<String>>,
) {
    use gimli::{DW_TAG_class_type, DW_TAG_structure_type, DW_TAG_typedef, DW_TAG_union_type};
    let aggregate = |t: gimli::DwTag| t == DW_TAG_structure_type || t == DW_TAG_class_type || t == DW_TAG_union_type;
    let mut entries: BTreeMap<gimli::UnitOffset, Entry> = BTreeMap::new();
    let mut cursor = unit.entries();
    while let Ok(Some((_, e))) = cursor.next_dfs() {
        let tag = e.tag();
        if !aggregate(tag) && tag != DW_TAG_typedef {
            continue;
        }
        let name = match e.attr_value(gimli::DW_AT_name) {
            Ok(Some(v)) => dwarf.attr_string(unit, v).ok().map(|s| s.to_string_lossy().into_owned()),
            _ => None,
        };
        let size = match e.attr_value(gimli::DW_AT_byte_size) {
            Ok(Some(v)) => v.udata_value(),
            _ => None,
        };
        let target = match e.attr_value(gimli::DW_AT_type) {
            Ok(Some(AttributeValue::UnitRef(o))) => Some(o),
            _ => None,
        };
        entries.insert(e.offset(), Entry { tag, name, size, target });
    }
    for e in entries.values() {
        let Some(name) = &e.name else { continue };
        let size = if aggregate(e.tag) {
            e.size
        } else {
            // A typedef of an aggregate (`typedef struct { ... } widget;`) names it.
            e.target.and_then(|t| entries.get(&t)).filter(|t| aggregate(t.tag)).and_then(|t| t.size)
        };
        if let Some(size) = size.filter(|&s| s > 0) {
            out.entry(size).or_default().insert(name.clone());
        }
    }
}
