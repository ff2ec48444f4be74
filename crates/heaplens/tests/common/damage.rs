//! Damage for the tests of damaged traces: a trace's blocks decompressed, written back raw
//! with correct checksums (so that a mutation reaches the decoders, not the checksum test),
//! and the mutations of one payload, drawn from a fixed seed so that a failure repeats.

use std::path::Path;

use heaplens_trace::{BlockKind, BlockWriter, Codec, TraceReader};

/// A small deterministic generator (xorshift64*), so failures repeat.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// Every block of a trace, decompressed.
pub fn trace_blocks(path: &Path) -> Vec<(BlockKind, Vec<u8>)> {
    let mut r = TraceReader::open(path).expect("open trace");
    let mut v = Vec::new();
    while let Some(b) = r.next_block().expect("read block") {
        v.push(b);
    }
    v
}

/// Writes blocks as a trace, each stored raw with a correct checksum.
pub fn write_raw(path: &Path, blocks: &[(BlockKind, Vec<u8>)]) {
    let mut w = BlockWriter::new(Vec::new()).unwrap();
    for (k, p) in blocks {
        w.write_block_as(*k, p, Codec::Raw).unwrap();
    }
    std::fs::write(path, w.get_mut()).unwrap();
}

/// One random mutation of one payload.
pub fn mutate(rng: &mut Rng, p: &mut Vec<u8>) {
    let at = |rng: &mut Rng, p: &Vec<u8>| rng.below(p.len().max(1));
    match rng.below(7) {
        0 if !p.is_empty() => {
            let i = at(rng, p);
            p[i] ^= 1 << rng.below(8);
        }
        1 => {
            let i = rng.below(p.len() + 1);
            p.insert(i, rng.next() as u8);
        }
        2 if !p.is_empty() => {
            let i = at(rng, p);
            p.remove(i);
        }
        3 => {
            // A huge varint (up to 2^63) where one was.
            let i = rng.below(p.len() + 1);
            let big = [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f];
            let n = 3 + rng.below(6);
            p.splice(i..(i + 1).min(p.len()), big[9 - n..].iter().copied());
        }
        4 => {
            let n = rng.below(p.len() + 1);
            p.truncate(n);
        }
        5 if !p.is_empty() => {
            let i = at(rng, p);
            p[i] = rng.next() as u8;
        }
        _ => {
            let n = rng.below(32);
            let i = rng.below(p.len() + 1);
            let junk: Vec<u8> = (0..n).map(|_| rng.next() as u8).collect();
            p.splice(i..i, junk);
        }
    }
}

/// One to three random changes to the blocks of a trace: a block dropped or duplicated, or a
/// payload mutated ([`mutate`]); in `favour` of ten draws the payload is one of a kind
/// `favoured` picks, when there is one.
pub fn damage_blocks(
    rng: &mut Rng,
    b: &mut Vec<(BlockKind, Vec<u8>)>,
    favoured: &dyn Fn(BlockKind) -> bool,
    favour: usize,
) {
    for _ in 0..1 + rng.below(3) {
        match rng.below(10) {
            0 if b.len() > 1 => {
                let i = rng.below(b.len());
                b.remove(i);
            }
            1 => {
                let i = rng.below(b.len());
                let copy = b[i].clone();
                b.insert(rng.below(b.len() + 1), copy);
            }
            n if (2..2 + favour).contains(&n) => {
                let picks: Vec<usize> = (0..b.len()).filter(|&i| favoured(b[i].0)).collect();
                let i = if picks.is_empty() { rng.below(b.len()) } else { picks[rng.below(picks.len())] };
                mutate(rng, &mut b[i].1);
            }
            _ => {
                let i = rng.below(b.len());
                mutate(rng, &mut b[i].1);
            }
        }
    }
}

/// How many of a trace's `bytes` to keep so that the file ends inside the block that spans
/// byte `near`: halfway through it. A cut that falls between two blocks reads as a run that
/// ended early (no End block), not as a truncated trace, and where the blocks fall moves with
/// the trace's sizes.
pub fn cut_inside_a_block(bytes: &[u8], near: usize) -> usize {
    let b = super::blocks(bytes).into_iter().find(|b| b.offset + b.len > near);
    let b = b.unwrap_or_else(|| panic!("no block spans byte {near} of {}", bytes.len()));
    b.offset + b.len / 2
}
