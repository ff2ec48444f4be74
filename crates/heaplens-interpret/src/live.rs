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
    /// Makes the block `make` builds live at `addr`: the block that was live there, if any,
    /// and the new one where it now lies. The block is built once its place is found, straight
    /// into it, and a view is handed that place: a block built first and copied into the slab
    /// waited on the stack through the hash lookup and was read back in 16-byte moves from
    /// narrower stores, which stalled store forwarding (a third of the allocation's time in the
    /// map's replay).
    #[inline]
    pub fn insert_with(&mut self, addr: u64, make: impl FnOnce() -> B) -> (Option<B>, &B) {
        let (old, i) = match self.index.entry(addr) {
            std::collections::hash_map::Entry::Occupied(e) => {
                let i = *e.get() as usize;
                (Some(self.slab[i]), i)
            }
            std::collections::hash_map::Entry::Vacant(e) => match self.free.pop() {
                Some(i) => {
                    e.insert(i);
                    (None, i as usize)
                }
                None => {
                    e.insert(self.slab.len() as u32);
                    self.slab.push(make());
                    return (None, &self.slab[self.slab.len() - 1]);
                }
            },
        };
        self.slab[i] = make();
        (old, &self.slab[i])
    }

    /// [`LiveBlocks::insert_with`] a block built already.
    pub fn insert(&mut self, addr: u64, b: B) -> (Option<B>, &B) {
        self.insert_with(addr, || b)
    }

    /// Ends the block live at `addr`, if any: where it lay (kept until the next insert).
    #[inline]
    pub fn remove(&mut self, addr: u64) -> Option<&B> {
        let i = self.index.remove(&addr)?;
        self.free.push(i);
        Some(&self.slab[i as usize])
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
        assert_eq!(l.insert(0x10, (0x10, 1)), (None, &(0x10, 1)));
        assert_eq!(l.insert(0x20, (0x20, 2)), (None, &(0x20, 2)));
        assert_eq!(l.insert(0x10, (0x10, 3)), (Some((0x10, 1)), &(0x10, 3)), "overwritten");
        assert_eq!(l.remove(0x20), Some(&(0x20, 2)));
        assert_eq!(l.remove(0x20), None);
        assert!(l.contains(0x10) && !l.contains(0x20));
        assert_eq!(l.insert(0x30, (0x30, 4)), (None, &(0x30, 4)));
        assert_eq!(l.slab.len(), 2, "the released place is reused");
        let mut v: Vec<(u64, u64)> = l.values().copied().collect();
        v.sort_unstable();
        assert_eq!(v, [(0x10, 3), (0x30, 4)]);
        assert_eq!(l.len(), 2);
    }
}
