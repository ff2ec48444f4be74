//! The heaplens trace format (`.hltrace`).
//!
//! A trace is an 16-byte file header followed by self-delimiting, checksummed blocks, so that a
//! process killed mid-run leaves a file that reads back up to its last complete block:
//!
//! ```text
//! file   := header block*
//! header := "HLTRACE\0" (8 bytes) version:u32le flags:u32le
//! block  := kind:u8 codec:u8 reserved:u16le stored_len:u32le raw_len:u32le crc32:u32le
//!           stored_bytes[stored_len]          (crc32 is CRC-32/ISO-HDLC of stored_bytes)
//! ```
//!
//! A block's payload (after decompression when `codec` is [`Codec::Lz4`] or [`Codec::Zstd`]) is
//! one of the [`BlockKind`]s; its layout is documented on [`record`], [`event`] (rows) and
//! [`columns`]. Nothing in this crate knows about hooks,
//! unwinding or symbols: it only moves records to and from bytes.

pub mod aggregate;
pub mod block;
pub mod clock;
pub mod columns;
pub mod event;
pub mod naming;
pub mod reader;
pub mod record;
pub mod snapshot;
pub mod symbols;
pub mod varint;
pub mod writer;
mod zstd_ctx;

pub use aggregate::{AggregateRecord, SizeCounters, StackCounters};
pub use block::{BlockKind, Codec, BLOCK_HEADER_LEN, FILE_HEADER_LEN, MAGIC, OLDEST_READABLE, VERSION};
pub use clock::{monotonic_now_ns, ClockSync, TimeMap, TimeSource, TSC_UNIT};
pub use columns::{ColumnDecoder, ColumnEncoder};
pub use event::{Event, EventDecoder, EventEncoder, Op, OpClass};
pub use reader::{open_regular, process_of, ReadError, ReadStatus, TraceReader, PAYLOAD_SPARE};
pub use record::{EndRecord, ExitRecord, Malformed, ModuleRecord, ProcessRecord, Segment, StackNode, ThreadName};
pub use snapshot::{
    detach_request_path, snapshot_request_path, ATTACH_BUSY, ATTACH_FAILED, ATTACH_NO_TRACE, ATTACH_OK,
};
pub use symbols::{SymbolEntry, SymbolFrame, SymbolTable};
pub use writer::BlockWriter;
