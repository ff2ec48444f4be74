//! Where a module's functions begin, from its unwind table, for frames no symbol names. A
//! stripped program (Debian's `python3.11`) names only its exported functions; a frame in one
//! of its static functions was `module+offset` of its own return address, so one function's
//! allocations or CPU samples were spread over a row per call site or sampled address. The
//! compiler gives every function a Frame Description Entry in `.eh_frame` whose initial
//! location and address range bound it (System V x86_64 psABI, "Unwind Table"; LSB Core,
//! "Exception Frames"), and a stripped file keeps that section, as unwinding needs it. Such a
//! frame is then `module+offset` of the start of its FDE: one row per function.

use addr2line::gimli::{self, BaseAddresses, CieOrFde, EhFrame, UnwindSection};
use object::{Object, ObjectSection};

/// The `[start, end)` address ranges (in the file's own address space) of a module's FDEs,
/// sorted by start.
#[derive(Default)]
pub struct FunctionBounds {
    ranges: Vec<(u64, u64)>,
}

impl FunctionBounds {
    /// Reads the FDEs of `obj`'s `.eh_frame`; empty when it has none or it does not parse (an
    /// entry that does not parse ends the reading, keeping the ranges read so far).
    pub fn read(obj: &object::File<'_>) -> Self {
        let Some(section) = obj.section_by_name(".eh_frame") else { return Self::default() };
        let Ok(data) = section.data() else { return Self::default() };
        let endian = if obj.is_little_endian() { gimli::RunTimeEndian::Little } else { gimli::RunTimeEndian::Big };
        let eh_frame = EhFrame::new(data, endian);
        let mut bases = BaseAddresses::default().set_eh_frame(section.address());
        if let Some(text) = obj.section_by_name(".text") {
            bases = bases.set_text(text.address());
        }
        if let Some(got) = obj.section_by_name(".got") {
            bases = bases.set_got(got.address());
        }
        let mut ranges = Vec::new();
        let mut entries = eh_frame.entries(&bases);
        while let Ok(Some(entry)) = entries.next() {
            let CieOrFde::Fde(partial) = entry else { continue };
            if let Ok(fde) = partial.parse(EhFrame::cie_from_offset) {
                let start = fde.initial_address();
                if fde.len() > 0 {
                    ranges.push((start, start.saturating_add(fde.len())));
                }
            }
        }
        ranges.sort_unstable();
        Self { ranges }
    }

    /// The start of the function holding `probe`: the FDE that starts last at or before it,
    /// when that one reaches past it.
    pub fn start_of(&self, probe: u64) -> Option<u64> {
        let i = self.ranges.partition_point(|r| r.0 <= probe).checked_sub(1)?;
        let (start, end) = self.ranges[i];
        (probe < end).then_some(start)
    }
}
