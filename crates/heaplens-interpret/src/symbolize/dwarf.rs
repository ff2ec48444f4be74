//! The DWARF of a separate debug file, loaded with only the sections that frames are made of.
//!
//! `addr2line`'s loader inflates every DWARF section up front; in a distribution's debug file
//! they are compressed, and the location lists (libc's: 1.4 MB of 10) only describe variables.

use std::borrow::Cow;
use std::cell::OnceCell;
use std::path::{Path, PathBuf};

use addr2line::gimli::{self, EndianSlice, RunTimeEndian, SectionId};
use addr2line::{Context, FrameIter, Loader, LookupResult};
use object::{Object, ObjectSection};

use super::mapped::Mapped;
use super::qualify::Qualifier;
use super::Frame;

type Reader = EndianSlice<'static, RunTimeEndian>;

/// A debug file's DWARF.
pub struct DebugDwarf {
    // Declared first, so dropped first: its slices point into `inflated` and `map`.
    ctx: Context<Reader>,
    /// The same through `addr2line`'s loader, for the addresses that need split DWARF (which
    /// only the loader finds).
    full: OnceCell<Option<Loader>>,
    path: PathBuf,
    /// Scopes of the units whose functions DWARF names only briefly.
    qualifier: Qualifier,
    /// Kept for `ctx`: the inflated sections and the file.
    _inflated: Vec<Vec<u8>>,
    _map: Mapped,
}

impl DebugDwarf {
    /// Loads the DWARF of `path`; `None` when the file cannot be read or parsed.
    pub fn load(path: &Path) -> Option<Self> {
        let map = Mapped::new(&heaplens_trace::open_regular(path).ok()?)?;
        // SAFETY: the bytes stay mapped as long as `map`, which `DebugDwarf` keeps, and the
        // slices made from them never leave it (`push_frames` copies what it returns).
        let bytes: &'static [u8] = unsafe { std::slice::from_raw_parts(map.bytes().as_ptr(), map.bytes().len()) };
        let obj = object::File::parse(bytes).ok()?;
        let endian = if obj.is_little_endian() { RunTimeEndian::Little } else { RunTimeEndian::Big };
        let mut inflated = Vec::new();
        let mut dwarf = gimli::Dwarf::load(|id| -> object::Result<Reader> {
            let data: &'static [u8] = match (id, obj.section_by_name(id.name())) {
                // Variables' locations and the preprocessor's macros: no frame needs them.
                (
                    SectionId::DebugLoc | SectionId::DebugLocLists | SectionId::DebugMacinfo | SectionId::DebugMacro,
                    _,
                )
                | (_, None) => &[],
                (_, Some(s)) => match s.uncompressed_data()? {
                    Cow::Borrowed(b) => b,
                    Cow::Owned(v) => {
                        // SAFETY: a vector's buffer does not move when the vector does, and
                        // `inflated` lives as long as the mapping (see above).
                        let b = unsafe { std::slice::from_raw_parts(v.as_ptr(), v.len()) };
                        inflated.push(v);
                        b
                    }
                },
            };
            Ok(EndianSlice::new(data, endian))
        })
        .ok()?;
        dwarf.populate_abbreviations_cache(gimli::AbbreviationsCacheStrategy::Duplicates);
        let ctx = Context::from_dwarf(dwarf).ok()?;
        Some(Self {
            ctx,
            full: OnceCell::new(),
            path: path.to_path_buf(),
            qualifier: Qualifier::default(),
            _inflated: inflated,
            _map: map,
        })
    }

    /// Appends the frames of file-relative address `probe` as `addr2line`'s loader would find
    /// them, as copies of `unknown`; returns [`push_all`]'s answer.
    pub fn push_frames(&self, probe: u64, unknown: &Frame, out: &mut Vec<Frame>) -> bool {
        let qualify = |die| self.qualified(probe, die);
        match self.ctx.find_frames(probe) {
            LookupResult::Output(Ok(f)) => push_all(f, unknown, out, &qualify),
            LookupResult::Output(Err(_)) => false,
            LookupResult::Load { .. } => match self.full.get_or_init(|| Loader::new(&self.path).ok()) {
                Some(full) => full.find_frames(probe).map(|f| push_all(f, unknown, out, &qualify)).unwrap_or(false),
                None => false,
            },
        }
    }

    /// The qualified name of the C++ function whose entry is at `die` in the unit holding
    /// `probe` (see [`Qualifier::qualified`]).
    pub fn qualified(&self, probe: u64, die: gimli::UnitOffset) -> Option<String> {
        let unit = self.ctx.find_dwarf_and_unit(probe).skip_all_loads()?;
        self.qualifier.qualified(unit, die)
    }
}

/// Appends the frames `frames` yields, named and placed, as copies of `unknown`. Returns
/// whether the last (outermost) was named by a linkage name (mangled, so qualified): GCC gives
/// some C++ functions only their short `DW_AT_name` (`_M_create<…>`, `operator()` of a lambda),
/// which the symbol table's name then replaces. Such a short name of a C++ frame is qualified
/// by `qualify` (given the frame's entry) where it can be: an inlined frame has no symbol.
pub fn push_all<R: gimli::Reader<Offset = usize>>(
    mut frames: FrameIter<'_, R>,
    unknown: &Frame,
    out: &mut Vec<Frame>,
    qualify: &dyn Fn(gimli::UnitOffset) -> Option<String>,
) -> bool {
    let mut linkage = false;
    while let Ok(Some(f)) = frames.next() {
        let raw = f.function.as_ref().and_then(|n| n.raw_name().ok());
        linkage = raw.as_deref().is_some_and(super::demangle::is_mangled);
        let short = raw.is_some() && !linkage;
        let qualified = f.dw_die_offset.filter(|_| short).and_then(qualify);
        let function = qualified.or_else(|| raw.map(|n| public_name(&super::demangle::demangle(&n)).to_string()));
        let (file, line) = match f.location {
            Some(l) => (l.file.map(str::to_string), l.line),
            None => (None, None),
        };
        out.push(Frame { function, file, line, ..unknown.clone() });
    }
    linkage
}

/// The name a C library function is known by, for the internal names glibc's debug
/// information gives it: `__GI_name` is the hidden alias of `name` (`libc_hidden_def`), and
/// `_IO_new_name` the current version of `_IO_name` (`_IO_new_file_overflow` is exported as
/// `_IO_file_overflow`).
pub fn public_name(name: &str) -> std::borrow::Cow<'_, str> {
    if let Some(rest) = name.strip_prefix("__GI_").filter(|r| !r.is_empty()) {
        return public_name(rest).into_owned().into();
    }
    match name.strip_prefix("_IO_new_") {
        Some(rest) if !rest.is_empty() => format!("_IO_{rest}").into(),
        _ => name.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::public_name;

    #[test]
    fn glibc_internal_names_become_public() {
        assert_eq!(public_name("__GI__IO_file_doallocate"), "_IO_file_doallocate");
        assert_eq!(public_name("_IO_new_file_overflow"), "_IO_file_overflow");
        assert_eq!(public_name("__GI__IO_new_file_xsputn"), "_IO_file_xsputn");
        assert_eq!(public_name("__GI___libc_malloc"), "__libc_malloc");
        assert_eq!(public_name("make_widget"), "make_widget");
        assert_eq!(public_name("__GI_"), "__GI_");
    }
}
