//! Hash maps keyed by addresses and ids.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// A fast hasher for addresses and ids (FxHash's multiply, with the high bits folded down so
/// that aligned keys spread over the table; keys are not adversarial).
#[derive(Default, Clone, Copy)]
pub struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0.rotate_left(26)
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0.wrapping_add(v)).wrapping_mul(0xf135_7aea_2e62_a9c5);
    }
    fn write_u32(&mut self, v: u32) {
        self.write_u64(u64::from(v));
    }
}

/// A `HashMap` keyed by addresses or ids.
pub type IdMap<K, V> = HashMap<K, V, BuildHasherDefault<IdHasher>>;

/// Ids a table keeps in its vector whatever the number of entries (4 MiB of `u32`).
const DENSE_MIN: usize = 1 << 20;

/// How far the vector may reach per entry set: ids are dense in a sound trace (the trie's
/// nodes are numbered in order), so a stack's id stays within a few times the stacks seen.
const DENSE_PER_ENTRY: usize = 16;

/// Values by an id a trace declares (a stack node's): a vector indexed by id, as the replays
/// want it, up to a bound that grows with the entries set, and a hash map past it. A damaged
/// trace naming stack 2^28 - 1 would otherwise size the vector by that number (a gigabyte)
/// instead of by what the file holds; a sound one keeps every id in the vector, and a lookup
/// past it is one compare more than a vector's.
#[derive(Debug, Clone)]
pub struct IdTable<V: Copy> {
    dense: Vec<V>,
    /// Entries whose id is at or past `dense.len()`.
    sparse: IdMap<u32, V>,
    /// Entries set.
    entries: usize,
    /// The value of ids never set.
    none: V,
}

impl<V: Copy + PartialEq> IdTable<V> {
    /// An empty table whose ids have the value `none` until set.
    pub fn new(none: V) -> Self {
        IdTable { dense: Vec::new(), sparse: IdMap::default(), entries: 0, none }
    }

    /// The value of `id` (`none` if never set).
    #[inline(always)]
    pub fn get(&self, id: u32) -> V {
        match self.dense.get(id as usize) {
            Some(&v) => v,
            None => self.get_sparse(id),
        }
    }

    #[cold]
    #[inline(never)]
    fn get_sparse(&self, id: u32) -> V {
        // Ids past the vector are mostly ones never set (a sound trace's other stacks): no hash.
        if self.sparse.is_empty() {
            return self.none;
        }
        self.sparse.get(&id).copied().unwrap_or(self.none)
    }

    /// Sets the value of `id`.
    pub fn set(&mut self, id: u32, v: V) {
        let i = id as usize;
        if i >= self.dense.len() {
            if self.get_sparse(id) == self.none {
                self.entries += 1;
            }
            let bound = DENSE_MIN.max(self.entries.saturating_mul(DENSE_PER_ENTRY));
            if i >= bound {
                self.sparse.insert(id, v);
                return;
            }
            self.grow(i + 1);
        } else if self.dense[i] == self.none {
            self.entries += 1;
        }
        self.dense[i] = v;
    }

    /// Grows the vector to at least `len` ids, taking over the map's entries it now covers.
    #[cold]
    fn grow(&mut self, len: usize) {
        let len = len.max(self.dense.len() * 2).min(DENSE_MIN.max(self.entries.saturating_mul(DENSE_PER_ENTRY)));
        self.dense.resize(len, self.none);
        if !self.sparse.is_empty() {
            let covered: Vec<u32> = self.sparse.keys().copied().filter(|&k| (k as usize) < len).collect();
            for k in covered {
                self.dense[k as usize] = self.sparse.remove(&k).unwrap_or(self.none);
            }
        }
    }

    /// The ids set, with their values, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (u32, V)> + '_ {
        let none = self.none;
        self.dense
            .iter()
            .enumerate()
            .filter(move |(_, &v)| v != none)
            .map(|(i, &v)| (i as u32, v))
            .chain(self.sparse.iter().map(|(&k, &v)| (k, v)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_table_sized_by_its_entries_not_its_ids() {
        let mut t = IdTable::new(u32::MAX);
        for id in [3, (1 << 28) - 1, 0, u32::MAX - 1, 1 << 20] {
            t.set(id, id / 2);
        }
        assert!(t.dense.len() <= DENSE_MIN, "{}", t.dense.len());
        for id in [3, (1 << 28) - 1, 0, u32::MAX - 1, 1 << 20] {
            assert_eq!(t.get(id), id / 2);
        }
        assert_eq!(t.get(4), u32::MAX);
        assert_eq!(t.get(1 << 27), u32::MAX);
        // Enough entries bring the map's ids into the vector.
        for id in 0..(1 << 17) {
            t.set(id, 7);
        }
        t.set((1 << 20) + 5, 7);
        assert_eq!(t.get(1 << 20), 1 << 19, "moved into the vector");
        assert!(t.sparse.len() == 2 && t.dense.len() > 1 << 20, "{} {}", t.sparse.len(), t.dense.len());
        let mut all: Vec<(u32, u32)> = t.iter().filter(|e| e.1 != 7).collect();
        all.sort_unstable();
        assert_eq!(all, vec![(1 << 20, 1 << 19), ((1 << 28) - 1, (1 << 27) - 1), (u32::MAX - 1, (u32::MAX - 1) / 2)]);
    }
}
