//! Writing blocks.

use std::io::{self, Write};

use crate::block::{file_header, BlockHeader, BlockKind, Codec};

/// Zstandard level: 1 is the fastest, and on event streams within a few percent of level 3.
const ZSTD_LEVEL: i32 = 1;

/// Frames payloads into checksummed blocks on any [`Write`]. Each [`BlockWriter::write_block`]
/// issues the header and body in a single `write_all`, so a reader never sees a header without
/// its body unless the process died inside that call.
pub struct BlockWriter<W: Write> {
    out: W,
    scratch: Vec<u8>,
    /// Payloads at least this long are compressed (shorter ones are stored raw).
    pub compress_from: usize,
    /// How payloads are compressed ([`Codec::Zstd`] by default: event streams shrink to about
    /// half of what LZ4 gives, at a cost the writer thread, not the program, pays).
    pub codec: Codec,
    zstd: Option<crate::zstd_ctx::Compressor>,
    bytes_written: u64,
}

impl<W: Write> BlockWriter<W> {
    /// Starts a new trace: writes the file header to `out`.
    ///
    /// # Errors
    /// Any I/O error from `out`.
    pub fn new(mut out: W) -> io::Result<Self> {
        out.write_all(&file_header())?;
        Ok(Self::append(out, crate::FILE_HEADER_LEN as u64))
    }

    /// Continues an existing trace (for example `heaplens run` appending the exit record):
    /// writes no file header. `already` is the size of what is there, for [`Self::bytes_written`].
    pub fn append(out: W, already: u64) -> Self {
        Self { out, scratch: Vec::new(), compress_from: 256, codec: Codec::Zstd, zstd: None, bytes_written: already }
    }

    /// Writes one block of `kind` holding `payload`.
    ///
    /// # Errors
    /// Any I/O error from the underlying writer; payloads over 4 GiB are rejected as
    /// `InvalidInput`.
    pub fn write_block(&mut self, kind: BlockKind, payload: &[u8]) -> io::Result<()> {
        self.write_block_as(kind, payload, self.codec)
    }

    /// Writes one block of `kind` holding `payload`, compressed with `codec` (payloads under
    /// the writer's threshold are stored raw whatever the codec).
    ///
    /// # Errors
    /// As [`BlockWriter::write_block`].
    pub fn write_block_as(&mut self, kind: BlockKind, payload: &[u8], codec: Codec) -> io::Result<()> {
        let raw_len = u32::try_from(payload.len())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "block over 4 GiB"))?;
        self.scratch.clear();
        self.scratch.extend_from_slice(&[0u8; crate::BLOCK_HEADER_LEN]);
        let codec = if payload.len() < self.compress_from { Codec::Raw } else { codec };
        match codec {
            Codec::Raw => self.scratch.extend_from_slice(payload),
            Codec::Lz4 => {
                let bound = lz4_flex::block::get_maximum_output_size(payload.len());
                self.scratch.resize(crate::BLOCK_HEADER_LEN + bound, 0);
                let n = lz4_flex::block::compress_into(payload, &mut self.scratch[crate::BLOCK_HEADER_LEN..])
                    .map_err(|e| io::Error::other(e.to_string()))?;
                self.scratch.truncate(crate::BLOCK_HEADER_LEN + n);
            }
            Codec::Zstd => {
                if self.zstd.is_none() {
                    self.zstd = Some(crate::zstd_ctx::Compressor::new(ZSTD_LEVEL)?);
                }
                let bound = zstd::zstd_safe::compress_bound(payload.len());
                self.scratch.resize(crate::BLOCK_HEADER_LEN + bound, 0);
                let z = self.zstd.as_mut().ok_or_else(|| io::Error::other("no zstd context"))?;
                let n = z.compress(payload, &mut self.scratch[crate::BLOCK_HEADER_LEN..])?;
                self.scratch.truncate(crate::BLOCK_HEADER_LEN + n);
            }
        }
        let body = &self.scratch[crate::BLOCK_HEADER_LEN..];
        let header = BlockHeader {
            kind: kind as u8,
            codec: codec as u8,
            stored_len: body.len() as u32,
            raw_len,
            crc: crc32fast::hash(body),
        };
        self.scratch[..crate::BLOCK_HEADER_LEN].copy_from_slice(&header.to_bytes());
        self.out.write_all(&self.scratch)?;
        self.bytes_written += self.scratch.len() as u64;
        Ok(())
    }

    /// Bytes in the trace so far, header included.
    pub fn bytes_written(&self) -> u64 {
        self.bytes_written
    }

    /// Flushes the underlying writer.
    ///
    /// # Errors
    /// Any I/O error from the underlying writer.
    pub fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }

    /// The underlying writer.
    pub fn get_mut(&mut self) -> &mut W {
        &mut self.out
    }
}
