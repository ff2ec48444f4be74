//! The vDSO's symbols (`__vdso_clock_gettime`, `__vdso_gettimeofday`, ...). The kernel maps
//! this small shared object into every process, and it is no file on disk: its frames came out
//! as `linux-vdso.so.1+0xb47`, a row per address, where a program that reads the clock in a
//! loop spends most of its CPU time. A kernel maps the same image into all its processes, so
//! heaplens reads its own copy, and names the traced process's vDSO frames from it only when
//! the build ids agree (the trace may come from another kernel).

use object::Object;

use super::symtab::SymbolTable;

/// Most bytes an image may take (the x86_64 vDSO is two pages).
const MAX_LEN: u64 = 1 << 20;

/// This process's vDSO: its build id and symbol table; `None` when it has none or it cannot
/// be read.
pub(super) fn own() -> Option<(Vec<u8>, SymbolTable)> {
    let image = own_image()?;
    let obj = object::File::parse(&*image).ok()?;
    let id = obj.build_id().ok().flatten()?.to_vec();
    Some((id, SymbolTable::read(&obj)))
}

/// The bytes of this process's vDSO image, from its ELF header to the end of its section
/// headers (which the kernel maps with it). Read through `/proc/self/mem`, so that a header
/// that says more than is mapped gives an error, not a fault.
fn own_image() -> Option<Vec<u8>> {
    use std::os::unix::fs::FileExt;
    // SAFETY: reads an entry of the auxiliary vector; no memory is touched.
    let at = unsafe { libc::getauxval(libc::AT_SYSINFO_EHDR) };
    if at == 0 {
        return None;
    }
    let mem = std::fs::File::open("/proc/self/mem").ok()?;
    let mut header = [0u8; 64];
    mem.read_exact_at(&mut header, at).ok()?;
    // ELF64 header (System V gABI): e_shoff at 0x28 (8 bytes), e_shentsize at 0x3a and
    // e_shnum at 0x3c (2 bytes each), little-endian on x86_64.
    if &header[..5] != b"\x7fELF\x02" {
        return None;
    }
    let u16_at = |i: usize| u64::from(u16::from_le_bytes([header[i], header[i + 1]]));
    let shoff = u64::from_le_bytes(header[0x28..0x30].try_into().ok()?);
    let len = shoff.checked_add(u16_at(0x3a) * u16_at(0x3c))?.max(64);
    if len > MAX_LEN {
        return None;
    }
    let mut image = vec![0u8; usize::try_from(len).ok()?];
    mem.read_exact_at(&mut image, at).ok()?;
    Some(image)
}

/// Whether a module path names the vDSO as the dynamic loader lists it.
pub(super) fn is_vdso(path: &str) -> bool {
    path.starts_with("linux-vdso") || path == "[vdso]"
}

#[cfg(test)]
mod tests {
    #[test]
    fn this_process_vdso_names_clock_gettime() {
        let Some((id, table)) = super::own() else {
            eprintln!("no vDSO here: skipped");
            return;
        };
        assert!(!id.is_empty());
        assert!(!table.is_empty());
    }
}
