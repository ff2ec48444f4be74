//! Names for the entries of a module's procedure linkage table: `clock_gettime@plt`, as
//! `objdump -d` and `perf` name them. No symbol covers a PLT entry, so a CPU-time sample there
//! took the name of the nearest symbol before it (`_init`, which ends where `.plt` begins).
//!
//! An x86_64 PLT entry jumps through a GOT slot (`jmp *disp32(%rip)`, `ff 25`, after an
//! `endbr64` and a `bnd` prefix in IBT-enabled `.plt.sec` entries), and the dynamic relocation
//! of that slot (`R_X86_64_JUMP_SLOT` for `.plt`/`.plt.sec`, `R_X86_64_GLOB_DAT` for `.plt.got`)
//! names the function: the System V x86_64 psABI, "Procedure Linkage Table". `.plt`'s first
//! entry jumps to the resolver through a slot with no relocation and gets no name.

use std::collections::HashMap;

use object::{Object, ObjectSection, ObjectSymbol, ObjectSymbolTable, RelocationTarget};

/// Sections holding PLT entries.
const SECTIONS: [&str; 3] = [".plt", ".plt.sec", ".plt.got"];
/// Entry size when the section header gives none or an unlikely one (16 bytes in `.plt` and
/// `.plt.sec`).
const DEFAULT_ENTRY: u64 = 16;

/// `(address, size in bytes, name@plt)` of every PLT entry of `obj` whose GOT slot a dynamic
/// relocation names; empty for other architectures and for files without those sections.
pub(super) fn entries(obj: &object::File<'_>) -> Vec<(u64, u64, String)> {
    if obj.architecture() != object::Architecture::X86_64 {
        return Vec::new();
    }
    let Some(dynsym) = obj.dynamic_symbol_table() else { return Vec::new() };
    let mut slots = HashMap::new();
    for (offset, reloc) in obj.dynamic_relocations().into_iter().flatten() {
        if let RelocationTarget::Symbol(i) = reloc.target() {
            if let Some(name) = dynsym.symbol_by_index(i).ok().and_then(|s| s.name().ok()).filter(|n| !n.is_empty()) {
                slots.insert(offset, name);
            }
        }
    }
    let mut out = Vec::new();
    for section in obj.sections().filter(|s| s.name().is_ok_and(|n| SECTIONS.contains(&n))) {
        let Ok(code) = section.data() else { continue };
        // x86_64 entries take 8 or 16 bytes; any other size (a file's header is outside input)
        // is taken as 16 rather than as one entry per byte.
        let size = match section_entry_size(obj, &section) {
            n @ 8..=64 => n,
            _ => DEFAULT_ENTRY,
        };
        let start = section.address();
        for (i, entry) in code.chunks(size as usize).enumerate() {
            let at = start.wrapping_add(i as u64 * size);
            if let Some(name) = got_slot(entry, at).and_then(|slot| slots.get(&slot)) {
                out.push((at, entry.len() as u64, format!("{name}@plt")));
            }
        }
    }
    out
}

/// The GOT slot an entry at address `at` jumps through: the target of its first
/// `jmp *disp32(%rip)`.
fn got_slot(entry: &[u8], at: u64) -> Option<u64> {
    let i = entry.windows(2).position(|w| w == [0xff, 0x25])?;
    let disp = i32::from_le_bytes(entry.get(i + 2..i + 6)?.try_into().ok()?);
    // The displacement counts from the end of the 6-byte instruction.
    Some(at.wrapping_add((i + 6) as u64).wrapping_add_signed(i64::from(disp)))
}

/// The section header's `sh_entsize` (0 when the file gives none).
fn section_entry_size(obj: &object::File<'_>, section: &object::Section<'_, '_>) -> u64 {
    use object::read::elf::SectionHeader;
    match obj {
        object::File::Elf64(f) => {
            f.elf_section_table().section(section.index()).map(|h| h.sh_entsize(f.endian())).unwrap_or(0)
        }
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_jump_through_the_got_names_its_slot() {
        // `jmp *0x2fca(%rip)` at 0x1030: the slot is 0x1036 + 0x2fca.
        let entry = [0xff, 0x25, 0xca, 0x2f, 0x00, 0x00, 0x68, 0, 0, 0, 0, 0xe9, 0xe0, 0xff, 0xff, 0xff];
        assert_eq!(super::got_slot(&entry, 0x1030), Some(0x4000));
        // endbr64; bnd jmp *-0x10(%rip) at 0x2000: the slot is 0x200b - 0x10.
        let sec = [0xf3, 0x0f, 0x1e, 0xfa, 0xf2, 0xff, 0x25, 0xf0, 0xff, 0xff, 0xff, 0x0f, 0x1f, 0x44, 0, 0];
        assert_eq!(super::got_slot(&sec, 0x2000), Some(0x1ffb));
        assert_eq!(super::got_slot(&[0x90; 16], 0x1000), None);
        assert_eq!(super::got_slot(&[0xff, 0x25, 1], 0x1000), None);
    }
}
