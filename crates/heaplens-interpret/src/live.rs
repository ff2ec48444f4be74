//! The replay's live set: the blocks allocated and not yet released, by address. Every
//! allocation inserts one and nearly every release removes one, so this is the pairing's cost:
//! the hash table holds an address and an index (16 bytes a slot, where a whole
//! [`crate::view::Block`] made slots of 56), and the blocks sit in a slab whose freed places
//! are reused last-freed first, so that a new block lands where a block was just released, in
//! the cache.

use crate::idmap::IdMap;

/// Live blocks (of type `B`) by address.
pub struct LiveBlocks<B> {
    index: IdMap<u64, u32>,
    slab: Vec<B>,
    free: Vec<u32>,
}

impl<B> Default for LiveBlocks<B> {
    fn default() -> Self {
        LiveBlocks { index: IdMap::default(), slab: Vec::new(), free: Vec::new() }
    }
}

impl<B: Copy> LiveBlocks<B> {
    /// Makes `b` live at `addr`; the block that was live there, if any.
    #[inline]
    pub fn insert(&mut self, addr: u64, b: B) -> Option<B> {
        match self.index.entry(addr) {
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
    pub fn remove(&mut self, addr: u64) -> Option<B> {
        let i = self.index.remove(&addr)?;
        self.free.push(i);
        Some(self.slab[i as usize])
    }

    /// Whether a block is live at `addr`.
    pub fn contains(&self, addr: u64) -> bool {
        self.index.contains_key(&addr)
    }

    /// The live blocks, in no particular order.
    pub fn values(&self) -> impl Iterator<Item = &B> + '_ {
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

    #[test]
    fn blocks_live_until_removed_and_places_are_reused() {
        // (address, allocation time)
        let mut l = LiveBlocks::default();
        assert_eq!(l.insert(0x10, (0x10, 1)), None);
        assert_eq!(l.insert(0x20, (0x20, 2)), None);
        assert_eq!(l.insert(0x10, (0x10, 3)), Some((0x10, 1)), "overwritten");
        assert_eq!(l.remove(0x20), Some((0x20, 2)));
        assert_eq!(l.remove(0x20), None);
        assert!(l.contains(0x10) && !l.contains(0x20));
        assert_eq!(l.insert(0x30, (0x30, 4)), None);
        assert_eq!(l.slab.len(), 2, "the released place is reused");
        let mut v: Vec<(u64, u64)> = l.values().copied().collect();
        v.sort_unstable();
        assert_eq!(v, [(0x10, 3), (0x30, 4)]);
        assert_eq!(l.len(), 2);
    }
}
