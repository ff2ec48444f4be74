//! Streaming reader: yields decoded block payloads one at a time, so a trace larger than
//! memory can be reduced block by block.

use std::fs::File;
use std::io::{self, BufReader, Read};
use std::path::Path;

use crate::block::{
    BlockHeader, BlockKind, Codec, BLOCK_HEADER_LEN, FILE_HEADER_LEN, MAGIC, MAX_BLOCK_LEN, OLDEST_READABLE, VERSION,
};

/// Spare capacity, in bytes, of every payload [`TraceReader::next_block`] returns: a consumer
/// that keeps payloads may append a few bytes of its own (the analysis tags each with its
/// layout) without the vector being copied whole into a larger allocation (on sqlite3's trace
/// that copy was 2.4% of the report's processor time in `memmove`; 1.1% remains, elsewhere).
pub const PAYLOAD_SPARE: usize = 8;

/// Why a trace could not be opened at all.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The file could not be opened or read.
    #[error("{0}")]
    Io(#[from] io::Error),
    /// The file does not start with the heaplens magic.
    #[error("not a heaplens trace (bad magic)")]
    NotATrace,
    /// The file is a heaplens trace of a version this build cannot read.
    #[error("unsupported trace version {0} (this heaplens reads versions {OLDEST_READABLE} to {VERSION})")]
    UnsupportedVersion(u32),
}

/// How reading ended, or where it stands. Damage after the header is not an error: everything
/// before it is still returned, and the status says what was lost.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReadStatus {
    /// Blocks returned.
    pub blocks: u64,
    /// Blocks whose checksum or payload failed and were skipped.
    pub corrupt_blocks: u64,
    /// Set when the file ended inside a block (a killed process, a partial copy): the byte
    /// offset where the incomplete block starts.
    pub truncated_at: Option<u64>,
    /// Bytes read so far.
    pub offset: u64,
    /// The byte offset of the last block returned (for reading it again with
    /// [`TraceReader::at_block`]).
    pub last_block: u64,
}

/// Reads the blocks of a trace in file order.
pub struct TraceReader<R: Read> {
    input: R,
    status: ReadStatus,
    done: bool,
    stored: Vec<u8>,
    /// One decompression context for every block (creating one costs more than a small block).
    zstd: Option<zstd::bulk::Decompressor<'static>>,
}

impl TraceReader<BufReader<File>> {
    /// Opens the trace at `path` and checks its header.
    ///
    /// # Errors
    /// [`ReadError::Io`] when the file cannot be read, [`ReadError::NotATrace`] when it is not a
    /// heaplens trace, [`ReadError::UnsupportedVersion`] for another format version.
    pub fn open(path: &Path) -> Result<Self, ReadError> {
        Self::new(BufReader::with_capacity(1 << 20, open_regular(path)?))
    }
}

/// The Process record of the trace at `path`, from its first block (where the monitor writes
/// it) without reading further: enough to name a trace's program or link it to its parent.
/// `None` when the file is not a readable trace or its first block is not a Process record.
pub fn process_of(path: &Path) -> Option<crate::ProcessRecord> {
    match TraceReader::open(path).ok()?.next_block() {
        Ok(Some((crate::BlockKind::Process, p))) => crate::ProcessRecord::decode(&p).ok(),
        _ => None,
    }
}

/// Opens `path` for reading if it is a regular file, else fails with "not a regular file".
///
/// A trace names module files, and a user may name anything as a trace: a FIFO would block
/// the open (or the first read) until someone writes to it, a character device such as
/// `/dev/zero` never ends. The file is opened with `O_NONBLOCK`, which never waits, and its
/// type checked on the open descriptor, so nothing swapped in between a `stat` and the open
/// is read either. A regular file ignores `O_NONBLOCK`.
///
/// # Errors
/// The open's error, or [`std::io::ErrorKind::InvalidInput`] for anything but a regular file.
pub fn open_regular(path: impl AsRef<Path>) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(path)?;
    if !file.metadata()?.is_file() {
        return Err(std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a regular file"));
    }
    Ok(file)
}

impl<R: Read> TraceReader<R> {
    /// Wraps a reader positioned at the start of a trace and checks its header.
    ///
    /// # Errors
    /// As [`TraceReader::open`].
    pub fn new(mut input: R) -> Result<Self, ReadError> {
        let mut h = [0u8; FILE_HEADER_LEN];
        let got = read_full(&mut input, &mut h)?;
        if got < 8 || &h[..8] != MAGIC {
            return Err(ReadError::NotATrace);
        }
        if got < FILE_HEADER_LEN {
            return Err(ReadError::NotATrace);
        }
        let version = u32::from_le_bytes([h[8], h[9], h[10], h[11]]);
        if !(OLDEST_READABLE..=VERSION).contains(&version) {
            return Err(ReadError::UnsupportedVersion(version));
        }
        let status = ReadStatus { offset: FILE_HEADER_LEN as u64, ..Default::default() };
        Ok(Self { input, status, done: false, stored: Vec::new(), zstd: None })
    }

    /// What has been read so far, and whether the file was damaged.
    pub fn status(&self) -> ReadStatus {
        self.status
    }

    /// The next block as (kind, decoded payload, with [`PAYLOAD_SPARE`] bytes of spare
    /// capacity); `None` at the end of the file or at the first
    /// incomplete block. Blocks of unknown kind and corrupt blocks are skipped (and counted).
    ///
    /// # Errors
    /// Only I/O errors other than an early end of file.
    pub fn next_block(&mut self) -> io::Result<Option<(BlockKind, Vec<u8>)>> {
        self.next_block_of(|_| true)
    }

    /// A reader of blocks from the current position of `input`, a block boundary `offset` bytes
    /// into a trace (the file header is not read again).
    pub fn at_block(input: R, offset: u64) -> Self {
        let status = ReadStatus { offset, ..Default::default() };
        Self { input, status, done: false, stored: Vec::new(), zstd: None }
    }

    /// As [`TraceReader::next_block`], but the payloads of blocks of kinds `want` refuses are
    /// neither checked nor decoded (they come back empty).
    ///
    /// # Errors
    /// As [`TraceReader::next_block`].
    pub fn next_block_of(&mut self, want: impl Fn(BlockKind) -> bool) -> io::Result<Option<(BlockKind, Vec<u8>)>> {
        while !self.done {
            let start = self.status.offset;
            let mut hb = [0u8; BLOCK_HEADER_LEN];
            let got = read_full(&mut self.input, &mut hb)?;
            if got == 0 {
                self.done = true;
                break;
            }
            if got < BLOCK_HEADER_LEN {
                return Ok(self.truncated(start));
            }
            let h = BlockHeader::from_bytes(&hb);
            // A length no writer produces, or kind 0, which none writes: zeros where a block
            // should start (a sparse file, a region a crash left unwritten) would otherwise
            // read as empty blocks, billions of them. The rest of the file cannot be framed.
            if h.stored_len > MAX_BLOCK_LEN || h.raw_len > MAX_BLOCK_LEN || h.kind == 0 {
                self.status.corrupt_blocks += 1;
                return Ok(self.truncated(start));
            }
            if read_stored(&mut self.input, &mut self.stored, h.stored_len as usize)? < h.stored_len as usize {
                return Ok(self.truncated(start));
            }
            self.status.offset = start + (BLOCK_HEADER_LEN + self.stored.len()) as u64;
            if let Some(kind) = BlockKind::from_u8(h.kind).filter(|&k| !want(k)) {
                self.status.blocks += 1;
                return Ok(Some((kind, Vec::new())));
            }
            if crc32fast::hash(&self.stored) != h.crc {
                self.status.corrupt_blocks += 1;
                continue;
            }
            let payload = self.decode(h.codec, h.raw_len as usize);
            let Some(payload) = payload else {
                self.status.corrupt_blocks += 1;
                continue;
            };
            let Some(kind) = BlockKind::from_u8(h.kind) else { continue };
            self.status.blocks += 1;
            self.status.last_block = start;
            return Ok(Some((kind, payload)));
        }
        Ok(None)
    }

    /// The payload of the block just read (`self.stored`), decoded from `codec` into a vector of
    /// [`PAYLOAD_SPARE`] bytes of spare capacity; `None` when it does not decode to `raw_len`
    /// bytes (raw payloads are taken as stored).
    fn decode(&mut self, codec: u8, raw_len: usize) -> Option<Vec<u8>> {
        // The raw length is a number read from the file: reserve only what the stored bytes can
        // decode to (a damaged header declaring 256 MiB over ten bytes made the LZ4 path zero
        // 256 MiB, and every path reserve it).
        let capacity = match codec {
            c if c == Codec::Raw as u8 => self.stored.len(),
            c if c == Codec::Lz4 as u8 && raw_len > LZ4_MAX_RATIO * self.stored.len() + 64 => return None,
            c if c == Codec::Zstd as u8 && raw_len > ZSTD_MAX_RATIO * self.stored.len() + ZSTD_SLACK => return None,
            c if c == Codec::Zstd as u8 => match zstd::zstd_safe::get_frame_content_size(&self.stored) {
                Ok(Some(n)) if n != raw_len as u64 => return None,
                Err(_) => return None,
                _ => raw_len,
            },
            _ => raw_len,
        };
        let mut out = Vec::with_capacity(capacity + PAYLOAD_SPARE);
        match codec {
            c if c == Codec::Raw as u8 => out.extend_from_slice(&self.stored),
            c if c == Codec::Lz4 as u8 => {
                out.resize(raw_len, 0);
                lz4_flex::block::decompress_into(&self.stored, &mut out).ok().filter(|&n| n == raw_len)?;
            }
            c if c == Codec::Zstd as u8 => {
                if self.zstd.is_none() {
                    self.zstd = zstd::bulk::Decompressor::new().ok();
                }
                let z = self.zstd.as_mut()?;
                z.decompress_to_buffer(&self.stored, &mut out).ok().filter(|&n| n == raw_len)?;
            }
            _ => return None,
        }
        Some(out)
    }

    fn truncated(&mut self, at: u64) -> Option<(BlockKind, Vec<u8>)> {
        self.status.truncated_at = Some(at);
        self.done = true;
        None
    }
}

/// The most bytes an LZ4 block decodes to per byte stored: a match's length takes one more
/// byte per 255.
const LZ4_MAX_RATIO: usize = 255;

/// The most bytes a Zstandard block may decode to per byte stored, plus [`ZSTD_SLACK`]. Zstandard
/// itself has no such bound (256 MiB of zeros is a frame of 8 KiB): a trace under 1 MB would
/// decode to tens of GiB, minutes of work for every view (a zstd bomb). The monitor's blocks
/// compress 1 to 7 times (symbols, stacks, events of real programs) and 16 times at most (one
/// `malloc`/`free` pair in a loop, the most repetitive events there are), so a block past
/// LZ4's own bound is damage, counted and skipped; a file then decodes to at most about 256
/// times its size.
const ZSTD_MAX_RATIO: usize = 256;

/// What a small Zstandard block may decode to beyond [`ZSTD_MAX_RATIO`] times its bytes: its
/// frame header alone is a dozen bytes.
const ZSTD_SLACK: usize = 4096;

/// Bytes a block's payload is read in at most at a time.
const READ_STEP: usize = 1 << 20;

/// Reads `len` bytes into `stored` (emptied first), or as many as the input has; returns how
/// many. The buffer grows a step of at most [`READ_STEP`] bytes at a time, as the bytes
/// arrive, not to the length at once: a length read from a damaged header, or from bytes that
/// are no header (the end of a trace without embedded symbols, read as a symbols index), can
/// say up to 256 MiB that the file does not have. A block the writer made (under a step) is
/// then one read call, where `read_to_end` made a dozen, from 32 bytes up (the map's replay
/// reads each block with a `pread` of its own, so each was a system call).
fn read_stored<R: Read>(r: &mut R, stored: &mut Vec<u8>, len: usize) -> io::Result<usize> {
    stored.clear();
    while stored.len() < len {
        let (at, want) = (stored.len(), (len - stored.len()).min(READ_STEP));
        stored.resize(at + want, 0);
        let got = read_full(r, &mut stored[at..])?;
        stored.truncate(at + got);
        if got < want {
            break; // the input ended
        }
    }
    Ok(stored.len())
}

/// Reads until `buf` is full or the input ends; returns the bytes read.
fn read_full<R: Read>(r: &mut R, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::writer::BlockWriter;

    fn sample() -> Vec<u8> {
        let mut w = BlockWriter::new(Vec::new()).unwrap();
        w.write_block(BlockKind::ThreadName, b"short").unwrap();
        w.write_block(BlockKind::Stacks, &vec![7u8; 5000]).unwrap();
        w.write_block(BlockKind::End, b"x").unwrap();
        std::mem::take(w.get_mut())
    }

    #[test]
    fn every_codec_round_trips() {
        let payload: Vec<u8> = (0..10_000u32).flat_map(|i| (i % 251).to_le_bytes()).collect();
        for codec in [Codec::Raw, Codec::Lz4, Codec::Zstd] {
            let mut w = BlockWriter::new(Vec::new()).unwrap();
            w.codec = codec;
            w.write_block(BlockKind::Stacks, &payload).unwrap();
            let bytes = std::mem::take(w.get_mut());
            let mut r = TraceReader::new(&bytes[..]).unwrap();
            let (kind, got) = r.next_block().unwrap().expect("a block");
            assert_eq!((kind, &got), (BlockKind::Stacks, &payload), "{codec:?}");
            assert!(got.capacity() - got.len() >= PAYLOAD_SPARE, "{codec:?}: {} spare", got.capacity() - got.len());
        }
    }

    #[test]
    fn a_payload_longer_than_a_read_step_is_read_whole_or_reported_truncated() {
        let payload: Vec<u8> = (0..READ_STEP * 5 / 2).map(|i| (i * 7 % 253) as u8).collect();
        let mut w = BlockWriter::new(Vec::new()).unwrap();
        w.codec = Codec::Raw;
        w.write_block(BlockKind::Stacks, &payload).unwrap();
        let bytes = std::mem::take(w.get_mut());
        let mut r = TraceReader::new(&bytes[..]).unwrap();
        assert_eq!(r.next_block().unwrap(), Some((BlockKind::Stacks, payload)));
        for cut in
            [bytes.len() - 1, FILE_HEADER_LEN + BLOCK_HEADER_LEN + READ_STEP, FILE_HEADER_LEN + BLOCK_HEADER_LEN + 1]
        {
            let mut r = TraceReader::new(&bytes[..cut]).unwrap();
            assert_eq!(r.next_block().unwrap(), None, "cut at {cut}");
            assert_eq!(r.status().truncated_at, Some(FILE_HEADER_LEN as u64), "cut at {cut}");
        }
    }

    #[test]
    fn a_payload_of_the_wrong_length_is_corrupt() {
        // A block whose header promises more bytes than its payload decodes to.
        let payload = vec![5u8; 3000];
        for codec in [Codec::Lz4, Codec::Zstd] {
            let mut w = BlockWriter::new(Vec::new()).unwrap();
            w.codec = codec;
            w.write_block(BlockKind::Stacks, &payload).unwrap();
            let mut bytes = std::mem::take(w.get_mut());
            // The header's raw_len field, 8 bytes into the first block.
            let at = FILE_HEADER_LEN + 8;
            bytes[at..at + 4].copy_from_slice(&3001u32.to_le_bytes());
            let mut r = TraceReader::new(&bytes[..]).unwrap();
            assert_eq!(r.next_block().unwrap(), None, "{codec:?}");
            assert_eq!(r.status().corrupt_blocks, 1, "{codec:?}");
        }
    }

    #[test]
    fn a_zstd_block_past_the_ratio_is_corrupt() {
        let mut w = BlockWriter::new(Vec::new()).unwrap();
        // 4 MiB of zeros: a frame of a few hundred bytes, a ratio in the thousands.
        w.write_block_as(BlockKind::Events, &vec![0u8; 4 << 20], Codec::Zstd).unwrap();
        // Events as repetitive as the monitor writes (one malloc/free pair in a loop: only the
        // time deltas vary, a few bits an event) are far under the bound.
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let loop_like: Vec<u8> = (0..1u32 << 16)
            .flat_map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                [1, 16, 0x20 | (x % 4) as u8, 0x20]
            })
            .collect();
        w.write_block_as(BlockKind::Events, &loop_like, Codec::Zstd).unwrap();
        let bytes = std::mem::take(w.get_mut());
        let mut r = TraceReader::new(&bytes[..]).unwrap();
        let (kind, payload) = r.next_block().unwrap().expect("the second block");
        assert_eq!((kind, payload), (BlockKind::Events, loop_like));
        assert_eq!(r.status().corrupt_blocks, 1, "the bomb is damage");
    }

    #[test]
    fn refuses_other_versions_by_number() {
        let mut bytes = sample();
        bytes[8..12].copy_from_slice(&1u32.to_le_bytes());
        match TraceReader::new(&bytes[..]) {
            Err(e @ ReadError::UnsupportedVersion(1)) => {
                assert_eq!(e.to_string(), "unsupported trace version 1 (this heaplens reads versions 2 to 5)")
            }
            other => panic!("version 1 read as {:?}", other.map(|_| ())),
        }
    }

    #[test]
    fn reads_back_every_block() {
        let bytes = sample();
        let mut r = TraceReader::new(&bytes[..]).unwrap();
        let mut kinds = Vec::new();
        while let Some((k, p)) = r.next_block().unwrap() {
            if k == BlockKind::Stacks {
                assert_eq!(p, vec![7u8; 5000]);
            }
            kinds.push(k);
        }
        assert_eq!(kinds, [BlockKind::ThreadName, BlockKind::Stacks, BlockKind::End]);
        assert_eq!(r.status().truncated_at, None);
        assert_eq!(r.status().offset, bytes.len() as u64);
    }

    #[test]
    fn truncation_keeps_complete_blocks() {
        let bytes = sample();
        // Block ends, from reading the whole file once.
        let mut ends = Vec::new();
        let mut r = TraceReader::new(&bytes[..]).unwrap();
        while r.next_block().unwrap().is_some() {
            ends.push(r.status().offset as usize);
        }
        for cut in FILE_HEADER_LEN..bytes.len() {
            let mut r = TraceReader::new(&bytes[..cut]).unwrap();
            let mut n = 0;
            while r.next_block().unwrap().is_some() {
                n += 1;
            }
            let whole = ends.iter().filter(|&&e| e <= cut).count();
            assert_eq!(n, whole, "cut at {cut}");
            let at_boundary = cut == FILE_HEADER_LEN || ends.contains(&cut);
            assert_eq!(r.status().truncated_at.is_none(), at_boundary, "cut at {cut}");
        }
    }

    #[test]
    fn corrupt_block_is_skipped() {
        let mut bytes = sample();
        bytes[FILE_HEADER_LEN + BLOCK_HEADER_LEN] ^= 0xff; // first payload byte
        let mut r = TraceReader::new(&bytes[..]).unwrap();
        let mut n = 0;
        while r.next_block().unwrap().is_some() {
            n += 1;
        }
        assert_eq!(n, 2);
        assert_eq!(r.status().corrupt_blocks, 1);
    }

    #[test]
    fn rejects_other_files() {
        assert!(matches!(TraceReader::new(&b"hello world, not a trace"[..]), Err(ReadError::NotATrace)));
        assert!(matches!(TraceReader::new(&b""[..]), Err(ReadError::NotATrace)));
    }
}
