//! The replay's live set: the blocks allocated and not yet released, by address. Every
//! allocation inserts one and nearly every release removes one, so this is the pairing's cost:
//! the hash table holds an address and an index (16 bytes a slot, where a whole [`Block`] made
//! slots of 56), and the blocks sit in a slab whose freed places are reused last-freed first,
//! so that a new block lands where a block was just released, in the cache.

use crate::idmap::IdMap;
use crate::view::Block;

/// Live blocks by address.
#[derive(Default)]
pub struct LiveBlocks {
    index: IdMap<u64, u32>,
    slab: Vec<Block>,
    free: Vec<u32>,
}

impl LiveBlocks {
    /// Makes `b` live at `b.addr`; the block that was live there, if any.
    #[inline]
    pub fn insert(&mut self, b: Block) -> Option<Block> {
        match self.index.entry(b.addr) {
            std::collections::hash_map::Entry::Occupied(e) => {
                Some(std::mem::replace(&mut self.slab[*e.get() as usize], b))
            }
            std::collections::hash_map::Entry::Vacant(e) => {
                let i = match self.free.pop() {
                    Some(i) => {
                        self.slab[i as usize] = b;
                        i
                    }
                    None => {
                        self.slab.push(b);
                        (self.slab.len() - 1) as u32
                    }
                };
                e.insert(i);
                None
            }
        }
    }

    /// Ends the block live at `addr`, if any.
    #[inline]
    pub fn remove(&mut self, addr: u64) -> Option<Block> {
        let i = self.index.remove(&addr)?;
        self.free.push(i);
        Some(self.slab[i as usize])
    }

    /// Whether a block is live at `addr`.
    pub fn contains(&self, addr: u64) -> bool {
        self.index.contains_key(&addr)
    }

    /// The live blocks, in no particular order.
    pub fn values(&self) -> impl Iterator<Item = &Block> + '_ {
        self.index.values().map(|&i| &self.slab[i as usize])
    }

    /// Live blocks.
    pub fn len(&self) -> usize {
        self.index.len()
    }

    /// Whether none is live.
    pub fn is_empty(&self) -> bool {
        self.index.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use heaplens_trace::Op;

    fn block(addr: u64, ts: u64) -> Block {
        Block { ts, tid: 1, addr, size: 16, usable: 24, op: Op::Malloc, stack: 3 }
    }

    #[test]
    fn blocks_live_until_removed_and_places_are_reused() {
        let mut l = LiveBlocks::default();
        assert_eq!(l.insert(block(0x10, 1)), None);
        assert_eq!(l.insert(block(0x20, 2)), None);
        assert_eq!(l.insert(block(0x10, 3)), Some(block(0x10, 1)), "overwritten");
        assert_eq!(l.remove(0x20), Some(block(0x20, 2)));
        assert_eq!(l.remove(0x20), None);
        assert!(l.contains(0x10) && !l.contains(0x20));
        assert_eq!(l.insert(block(0x30, 4)), None);
        assert_eq!(l.slab.len(), 2, "the released place is reused");
        let mut v: Vec<Block> = l.values().copied().collect();
        v.sort_by_key(|b| b.addr);
        assert_eq!(v, [block(0x10, 3), block(0x30, 4)]);
        assert_eq!(l.len(), 2);
    }
}
