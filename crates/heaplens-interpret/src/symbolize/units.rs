//! The DWARF units of a module file, for the readers of its types and scopes (symbolization
//! itself goes through addr2line).

use std::borrow::Cow;
use std::path::Path;

use addr2line::gimli::{self, EndianSlice, RunTimeEndian};
use object::{Object, ObjectSection};

use super::mapped::Mapped;

/// How the DWARF sections are read: borrowed from the mapped file.
pub(crate) type Reader<'a> = EndianSlice<'a, RunTimeEndian>;

/// Calls `f` with every compilation unit of the module at `path`; nothing when the file cannot
/// be read or has no DWARF.
pub(crate) fn for_each_unit(path: &Path, mut f: impl FnMut(&gimli::Dwarf<Reader<'_>>, &gimli::Unit<Reader<'_>>)) {
    let Some(map) = heaplens_trace::open_regular(path).ok().and_then(|f| Mapped::new(&f)) else { return };
    let Ok(obj) = object::File::parse(map.bytes()) else { return };
    let endian = if obj.is_little_endian() { RunTimeEndian::Little } else { RunTimeEndian::Big };
    let load = |id: gimli::SectionId| -> Result<Cow<'_, [u8]>, object::Error> {
        match obj.section_by_name(id.name()) {
            Some(s) => s.uncompressed_data(),
            None => Ok(Cow::Borrowed(&[])),
        }
    };
    let Ok(sections) = gimli::DwarfSections::load(load) else { return };
    let dwarf = sections.borrow(|s| EndianSlice::new(s, endian));
    let mut units = dwarf.units();
    while let Ok(Some(header)) = units.next() {
        let Ok(unit) = dwarf.unit(header) else { continue };
        f(&dwarf, &unit);
    }
}
