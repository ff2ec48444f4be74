//! The replay's live set: the blocks allocated and not yet released, by address. Every
//! allocation inserts one and nearly every release removes one, so this is the pairing's cost.
//!
//! The index is an open-addressing table of (address, slab index) slots, 16 bytes each, probed
//! linearly from the address's Fibonacci hash and kept at most half full; a removal shifts the
//! slots after it back instead of leaving a tombstone, so a lookup ends at the first empty
//! slot and is mostly one slot, one cache line. (The standard library's SwissTable did the same
//! work through group scans of control bytes: in the profile of a map of 10^8 events, pairing
//! took 1.05 times the replay's decoding with it, 0.82 with this table.) The
//! blocks sit in a slab whose freed places are reused last-freed first, so that a new block
//! lands where a block was just released, in the cache.

/// A slot of the index: `key` [`EMPTY`] when free.
#[derive(Clone, Copy)]
struct Slot {
    key: u64,
    at: u32,
}

/// The key of a free slot: no block starts at the last byte of the address space. A damaged
/// trace may claim one does: such an address is kept as the byte before it ([`key`]).
const EMPTY: u64 = u64::MAX;

/// The key of the block at `addr`: `addr`, but never [`EMPTY`].
#[inline(always)]
fn key(addr: u64) -> u64 {
    addr.min(EMPTY - 1)
}

/// A free slot.
const FREE: Slot = Slot { key: EMPTY, at: 0 };

/// Live blocks (of type `B`) by address.
pub struct LiveBlocks<B> {
    slots: Vec<Slot>,
    /// `slots.len() - 1` (a power of two less one).
    mask: usize,
    /// log2 of `slots.len()`.
    bits: u32,
    /// Occupied slots.
    used: usize,
    slab: Vec<B>,
    free: Vec<u32>,
}

/// Slots of a new index.
const FIRST_BITS: u32 = 10;

impl<B> Default for LiveBlocks<B> {
    fn default() -> Self {
        LiveBlocks {
            slots: vec![FREE; 1 << FIRST_BITS],
            mask: (1 << FIRST_BITS) - 1,
            bits: FIRST_BITS,
            used: 0,
            slab: Vec::new(),
            free: Vec::new(),
        }
    }
}

impl<B: Copy> LiveBlocks<B> {
    /// The slot where a probe for `key` starts: the top bits of its Fibonacci hash (addresses
    /// are aligned, so their low bits would crowd a few slots).
    #[inline(always)]
    fn home(&self, key: u64) -> usize {
        (key.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (64 - self.bits)) as usize
    }

    /// The slot holding `key`, or the empty slot where it would go.
    #[inline(always)]
    fn find(&self, key: u64) -> (usize, bool) {
        let mut i = self.home(key);
        loop {
            let k = self.slots[i].key;
            if k == key {
                return (i, true);
            }
            if k == EMPTY {
                return (i, false);
            }
            i = (i + 1) & self.mask;
        }
    }

    /// A place in the slab for a new block.
    #[inline(always)]
    fn place(&mut self, make: impl FnOnce() -> B) -> u32 {
        match self.free.pop() {
            Some(i) => {
                self.slab[i as usize] = make();
                i
            }
            None => {
                self.slab.push(make());
                (self.slab.len() - 1) as u32
            }
        }
    }

    /// Makes the block `make` builds live at `addr`: the block that was live there, if any,
    /// and the new one where it now lies. The block is built once its place is found, straight
    /// into it, and a view is handed that place: a block built first and copied into the slab
    /// waited on the stack through the lookup and was read back in 16-byte moves from narrower
    /// stores, which stalled store forwarding (a third of the allocation's time in the map's
    /// replay).
    #[inline]
    pub fn insert_with(&mut self, addr: u64, make: impl FnOnce() -> B) -> (Option<B>, &B) {
        let addr = key(addr);
        let (i, found) = self.find(addr);
        if found {
            let at = self.slots[i].at as usize;
            let old = self.slab[at];
            self.slab[at] = make();
            return (Some(old), &self.slab[at]);
        }
        let at = self.place(make);
        self.slots[i] = Slot { key: addr, at };
        self.used += 1;
        if self.used * 2 > self.slots.len() {
            self.grow();
        }
        (None, &self.slab[at as usize])
    }

    /// Ends the block live at `addr`, if any: where it lay (kept until the next insert).
    #[inline]
    pub fn remove(&mut self, addr: u64) -> Option<&B> {
        let (mut hole, found) = self.find(key(addr));
        if !found {
            return None;
        }
        let at = self.slots[hole].at;
        // Shift back each later slot of the run whose probe started at or before the hole.
        let mut j = hole;
        loop {
            j = (j + 1) & self.mask;
            let key = self.slots[j].key;
            if key == EMPTY {
                break;
            }
            let home = self.home(key);
            // Whether `home` lies cyclically in (hole, j]: then the slot stays.
            let stays = if hole <= j { hole < home && home <= j } else { hole < home || home <= j };
            if !stays {
                self.slots[hole] = self.slots[j];
                hole = j;
            }
        }
        self.slots[hole] = FREE;
        self.used -= 1;
        self.free.push(at);
        Some(&self.slab[at as usize])
    }

    /// Twice the slots, every key placed again.
    #[cold]
    fn grow(&mut self) {
        let old = std::mem::take(&mut self.slots);
        self.bits += 1;
        self.slots = vec![FREE; 1 << self.bits];
        self.mask = self.slots.len() - 1;
        for s in old.into_iter().filter(|s| s.key != EMPTY) {
            let (i, _) = self.find(s.key);
            self.slots[i] = s;
        }
    }

    /// Whether a block is live at `addr`.
    pub fn contains(&self, addr: u64) -> bool {
        self.find(key(addr)).1
    }

    /// The live blocks, in no particular order.
    pub fn values(&self) -> impl Iterator<Item = &B> + '_ {
        self.slots.iter().filter(|s| s.key != EMPTY).map(|s| &self.slab[s.at as usize])
    }

    /// Live blocks.
    pub fn len(&self) -> usize {
        self.used
    }

    /// Whether none is live.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_live_until_removed_and_places_are_reused() {
        // (address, allocation time)
        let mut l = LiveBlocks::default();
        assert_eq!(l.insert_with(0x10, || (0x10, 1)), (None, &(0x10, 1)));
        assert_eq!(l.insert_with(0x20, || (0x20, 2)), (None, &(0x20, 2)));
        assert_eq!(l.insert_with(0x10, || (0x10, 3)), (Some((0x10, 1)), &(0x10, 3)), "overwritten");
        assert_eq!(l.remove(0x20), Some(&(0x20, 2)));
        assert_eq!(l.remove(0x20), None);
        assert!(l.contains(0x10) && !l.contains(0x20));
        assert_eq!(l.insert_with(0x30, || (0x30, 4)), (None, &(0x30, 4)));
        assert_eq!(l.slab.len(), 2, "the released place is reused");
        let mut v: Vec<(u64, u64)> = l.values().copied().collect();
        v.sort_unstable();
        assert_eq!(v, [(0x10, 3), (0x30, 4)]);
        assert_eq!(l.len(), 2);
    }

    /// Random inserts and removals, on addresses crowded into few slots (runs that wrap past
    /// the table's end, removals in the middle of runs) and through growth, against a
    /// `HashMap`.
    #[test]
    fn agrees_with_a_hash_map() {
        let mut l: LiveBlocks<u64> = LiveBlocks::default();
        let mut want = std::collections::HashMap::new();
        let mut x = 0x2545_f491_4f6c_dd1du64;
        for step in 0..400_000u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            // Few distinct addresses early (collisions, removals), more later (growth).
            let span = if step < 100_000 { 3000 } else { 200_000 };
            let addr = (x >> 20) % span * 16;
            if x.is_multiple_of(3) {
                assert_eq!(l.remove(addr).copied(), want.remove(&addr), "remove {addr:#x} at {step}");
            } else {
                assert_eq!(l.insert_with(addr, || step).0, want.insert(addr, step), "insert {addr:#x} at {step}");
            }
            if step % 50_000 == 0 {
                assert_eq!(l.len(), want.len());
                let mut got: Vec<u64> = l.values().copied().collect();
                let mut all: Vec<u64> = want.values().copied().collect();
                got.sort_unstable();
                all.sort_unstable();
                assert_eq!(got, all);
            }
        }
        for (&addr, &v) in &want {
            assert!(l.contains(addr));
            assert_eq!(l.remove(addr), Some(&v));
        }
        assert!(l.is_empty() && !l.contains(16));
    }

    #[test]
    fn a_block_at_the_last_address_is_kept_and_released() {
        // A damaged trace's allocation at 2^64 - 1, the free slot's key.
        let mut live: LiveBlocks<u64> = LiveBlocks::default();
        assert!(live.insert_with(u64::MAX, || 7).0.is_none());
        assert!(live.contains(u64::MAX) && live.len() == 1);
        assert_eq!(live.remove(u64::MAX).copied(), Some(7));
        assert!(live.is_empty());
    }
}
