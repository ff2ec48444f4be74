//! Block framing: the file header and the 16-byte header in front of every block.

/// The first 8 bytes of every trace.
pub const MAGIC: &[u8; 8] = b"HLTRACE\0";
/// The format version this crate writes. Version 2 flags glibc's usable sizes and 16-aligned
/// address deltas in event rows ([`crate::event`]); version 3 codes the slack of EventColumns
/// payloads against glibc's usable size ([`crate::columns`]), so that readers of version 2
/// refuse its traces by number rather than misread their usable sizes; version 4 lets an
/// EventColumns payload keep its timestamps to a coarser unit (its mark's time shift), which
/// readers of version 3 would ignore and so misread every time; version 5 lets an allocation's
/// address delta in EventColumns payloads be from the previous allocation of its size class
/// (the mark's `CLASS_ENDS` flag), which readers of version 4 would misread.
pub const VERSION: u32 = 5;
/// The oldest format version this crate reads (its EventColumns payloads carry no format mark).
pub const OLDEST_READABLE: u32 = 2;
/// Bytes in the file header: magic, version, flags.
pub const FILE_HEADER_LEN: usize = 16;
/// Bytes in a block header: kind, codec, reserved, stored length, raw length, crc32.
pub const BLOCK_HEADER_LEN: usize = 16;
/// Largest raw payload a reader accepts (guards against allocating for a corrupt length).
pub const MAX_BLOCK_LEN: u32 = 256 << 20;

/// What a block holds. The payload layouts are documented in [`crate::record`] and
/// [`crate::event`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum BlockKind {
    /// One [`crate::ProcessRecord`]: who was profiled and when.
    Process = 1,
    /// [`crate::ModuleRecord`]s: modules mapped since the last such block.
    Modules = 2,
    /// [`crate::StackNode`]s: new nodes of the call-stack trie.
    Stacks = 3,
    /// Allocation and deallocation [`crate::Event`]s of one thread, as rows ([`crate::event`]).
    Events = 4,
    /// A [`crate::ThreadName`].
    ThreadName = 5,
    /// The [`crate::ExitRecord`] appended by `heaplens run` once the program has ended.
    Exit = 6,
    /// Written by the monitor when it shut down cleanly; its absence means the process died
    /// without running its exit path (SIGKILL, `_exit` from a signal handler, a crash).
    End = 7,
    /// A [`crate::ClockSync`]: relates event timestamps to `CLOCK_MONOTONIC`.
    Clock = 8,
    /// An [`crate::AggregateRecord`]: counters of the aggregated (long-run) mode.
    Aggregate = 9,
    /// The same as [`BlockKind::Events`] stored field by field ([`crate::columns`]): what the
    /// monitor writes.
    EventColumns = 10,
    /// A [`crate::SymbolTable`] appended by `heaplens run`: the trace's return addresses,
    /// symbolized while the program ran.
    Symbols = 11,
    /// The offset of the [`BlockKind::Symbols`] block, as the file's last block (see
    /// [`crate::symbols`]).
    SymbolsIndex = 12,
    /// A [`crate::record::SampleRecord`]: CPU-time samples of one thread (`heaplens run --cpu`).
    Samples = 13,
}

impl BlockKind {
    /// Decodes a kind byte; `None` for kinds this version does not know (readers skip them).
    pub fn from_u8(b: u8) -> Option<Self> {
        Some(match b {
            1 => Self::Process,
            2 => Self::Modules,
            3 => Self::Stacks,
            4 => Self::Events,
            5 => Self::ThreadName,
            6 => Self::Exit,
            7 => Self::End,
            8 => Self::Clock,
            9 => Self::Aggregate,
            10 => Self::EventColumns,
            11 => Self::Symbols,
            12 => Self::SymbolsIndex,
            13 => Self::Samples,
            _ => return None,
        })
    }
}

/// How a block's payload is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Codec {
    /// Stored as is.
    Raw = 0,
    /// LZ4 block format (lz4_flex), without a size prefix: `raw_len` in the header gives it.
    Lz4 = 1,
    /// A Zstandard frame (RFC 8878).
    Zstd = 2,
}

/// A decoded block header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockHeader {
    /// The kind byte (unknown kinds are kept so readers can skip them).
    pub kind: u8,
    /// The codec byte.
    pub codec: u8,
    /// Bytes stored after the header.
    pub stored_len: u32,
    /// Bytes of the payload once decoded.
    pub raw_len: u32,
    /// CRC-32 of the stored bytes.
    pub crc: u32,
}

impl BlockHeader {
    /// Serializes the header into its 16 bytes.
    pub fn to_bytes(&self) -> [u8; BLOCK_HEADER_LEN] {
        let mut b = [0u8; BLOCK_HEADER_LEN];
        b[0] = self.kind;
        b[1] = self.codec;
        b[4..8].copy_from_slice(&self.stored_len.to_le_bytes());
        b[8..12].copy_from_slice(&self.raw_len.to_le_bytes());
        b[12..16].copy_from_slice(&self.crc.to_le_bytes());
        b
    }

    /// Parses 16 header bytes.
    pub fn from_bytes(b: &[u8; BLOCK_HEADER_LEN]) -> Self {
        let u32_at = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        Self { kind: b[0], codec: b[1], stored_len: u32_at(4), raw_len: u32_at(8), crc: u32_at(12) }
    }
}

/// The 16-byte file header for this version.
pub fn file_header() -> [u8; FILE_HEADER_LEN] {
    let mut h = [0u8; FILE_HEADER_LEN];
    h[..8].copy_from_slice(MAGIC);
    h[8..12].copy_from_slice(&VERSION.to_le_bytes());
    h
}
