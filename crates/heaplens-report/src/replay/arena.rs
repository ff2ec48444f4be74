//! Pages of the live map, of one size, in chunks of zeroed memory.

use std::sync::Arc;

use crate::replay::chunk::{Cell, Chunk, ChunkSource, CHUNK_CELLS};

/// Pages of `STRIDE` cells each, by index; a freed page is all zeros again when it is handed
/// out. (A constant stride, as finding a page divides by the pages of a chunk.)
pub(crate) struct Arena<const STRIDE: usize> {
    chunks: Vec<Chunk>,
    /// Live blocks per page.
    pub counts: Vec<u32>,
    /// Pages free for reuse, all zero.
    spare: Vec<u32>,
}

impl<const STRIDE: usize> Arena<STRIDE> {
    const PER_CHUNK: usize = CHUNK_CELLS / STRIDE;

    pub fn new() -> Self {
        Self { chunks: Vec::new(), counts: Vec::new(), spare: Vec::new() }
    }

    /// A zeroed page, from `source` when a new chunk is needed and there is one.
    pub fn alloc(&mut self, source: Option<&Arc<ChunkSource>>) -> u32 {
        if let Some(i) = self.spare.pop() {
            return i;
        }
        let i = self.counts.len();
        if i.is_multiple_of(Self::PER_CHUNK) {
            self.chunks.push(source.map_or_else(Chunk::new, |s| s.take()));
        }
        self.counts.push(0);
        i as u32
    }

    /// Returns page `i`, which the caller left all zero.
    pub fn free(&mut self, i: u32) {
        self.spare.push(i);
    }

    /// Frees page `i` if it holds no block (then it is all zero); whether it did.
    pub fn free_if_empty(&mut self, i: u32) -> bool {
        let empty = self.counts[i as usize] == 0;
        if empty {
            self.free(i);
        }
        empty
    }

    /// Pages handed out and not freed.
    pub fn in_use(&self) -> usize {
        self.counts.len() - self.spare.len()
    }

    /// Page `i`, which [`Arena::alloc`] handed out. (Its chunk and place in it are computed in
    /// 32 bits, and checked once: this runs twice per replayed event.)
    #[inline(always)]
    pub fn page(&self, i: u32) -> &[Cell] {
        let (chunk, at) = Self::place(i);
        &self.chunks[chunk][at..at + STRIDE]
    }

    #[inline(always)]
    pub fn page_mut(&mut self, i: u32) -> &mut [Cell] {
        let (chunk, at) = Self::place(i);
        &mut self.chunks[chunk][at..at + STRIDE]
    }

    /// The chunk of page `i` and the cell its page starts at.
    #[inline(always)]
    fn place(i: u32) -> (usize, usize) {
        const { assert!(CHUNK_CELLS / STRIDE <= u32::MAX as usize) };
        let per = Self::PER_CHUNK as u32;
        ((i / per) as usize, (i % per) as usize * STRIDE)
    }
}
