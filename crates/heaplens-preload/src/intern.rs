//! Stack interning: every distinct call stack becomes one node id of a global trie of return
//! addresses (outermost frame at the root), so an event carries one small integer instead of
//! its frames. New nodes are written to the trace as Stacks records. A per-thread cache of trie
//! edges makes the frames a capture unwinds (see `unwind::Walker`) cost no lock once seen.

use std::collections::HashMap;
use std::hash::BuildHasherDefault;
use std::sync::Mutex;

use heaplens_trace::StackNode;

pub(crate) type FxMap<K, V> = HashMap<K, V, BuildHasherDefault<rustc_hash::FxHasher>>;

/// The global trie and the Stacks payload of nodes not yet written.
pub struct Trie {
    children: FxMap<(u32, u64), u32>,
    next_id: u32,
    pending: Vec<u8>,
    pending_first: u32,
    /// Nodes created so far.
    pub nodes: u64,
}

/// The process-wide trie; taken only on a per-thread cache miss.
pub static TRIE: Mutex<Option<Trie>> = Mutex::new(None);

impl Trie {
    /// An empty trie (node 0, the empty stack, is implicit).
    pub fn new() -> Self {
        Self { children: FxMap::default(), next_id: 1, pending: Vec::new(), pending_first: 1, nodes: 0 }
    }

    /// The node for stack `parent` extended by the caller frame `addr`, created if new.
    pub fn child(&mut self, parent: u32, addr: u64) -> u32 {
        if let Some(&c) = self.children.get(&(parent, addr)) {
            return c;
        }
        let child = self.next_id;
        self.next_id += 1;
        self.nodes += 1;
        if self.pending.is_empty() {
            self.pending_first = child;
            StackNode::begin(&mut self.pending, child);
        }
        StackNode::push(&mut self.pending, child, parent, addr);
        self.children.insert((parent, addr), child);
        child
    }

    /// Interns `frames` (innermost first) and returns the leaf's id.
    pub fn intern(&mut self, frames: &[u64]) -> u32 {
        frames.iter().rev().fold(0, |id, &addr| self.child(id, addr))
    }

    /// Takes the Stacks payload of the nodes created since the last call (empty if none).
    pub fn take_pending(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.pending)
    }
}

impl Default for Trie {
    fn default() -> Self {
        Self::new()
    }
}

/// Slots a cache starts with (256 KiB) and may grow to (2 MiB), as powers of two.
const MIN_BITS: u32 = 14;
const MAX_BITS: u32 = 17;
/// Slots per set: one 64-byte cache line, so a lookup touches one line.
const WAYS: usize = 4;

#[derive(Clone, Copy, Default)]
struct Slot {
    addr: u64,
    parent: u32,
    child: u32,
}

/// A thread's cache of trie edges, (parent, return address) → child, so that interning the
/// few frames a capture had to unwind takes no lock once they have been seen. Four-way set
/// associative, a set per cache line; it doubles (up to 2^17 slots) while it keeps missing
/// more than one lookup in 32: a compiler's tens of thousands of call paths thrash a small
/// cache, a loop's few do not.
pub struct NodeCache {
    sets: Box<[[Slot; WAYS]]>,
    bits: u32,
    lookups: u64,
    misses: u64,
}

impl NodeCache {
    /// An empty cache (256 KiB).
    pub fn new() -> Self {
        Self { sets: Self::empty(MIN_BITS), bits: MIN_BITS, lookups: 0, misses: 0 }
    }

    fn empty(bits: u32) -> Box<[[Slot; WAYS]]> {
        vec![[Slot::default(); WAYS]; (1 << bits) / WAYS].into_boxed_slice()
    }

    /// Forgets every entry (after fork, when the trie starts over).
    pub fn clear(&mut self) {
        self.sets.fill([Slot::default(); WAYS]);
    }

    #[inline(always)]
    fn set(&self, parent: u32, addr: u64) -> usize {
        let h = (addr ^ u64::from(parent).wrapping_mul(0x9e37_79b9_7f4a_7c15)).wrapping_mul(0xff51_afd7_ed55_8ccd);
        (h >> (64 - self.bits + WAYS.trailing_zeros())) as usize
    }

    /// Puts an edge first in its set, pushing out the set's oldest.
    #[inline(always)]
    fn insert(&mut self, s: Slot) {
        let i = self.set(s.parent, s.addr);
        let set = &mut self.sets[i];
        set.copy_within(0..WAYS - 1, 1);
        set[0] = s;
    }

    /// The child of `parent` for caller frame `addr`, from the cache or else from the trie.
    #[inline]
    pub fn child(&mut self, parent: u32, addr: u64) -> u32 {
        self.lookups += 1;
        let set = &self.sets[self.set(parent, addr)];
        if let Some(s) = set.iter().find(|s| s.addr == addr && s.parent == parent && s.child != 0) {
            return s.child;
        }
        let child = match TRIE.lock() {
            Ok(mut t) => t.get_or_insert_with(Trie::new).child(parent, addr),
            Err(_) => return 0,
        };
        self.insert(Slot { addr, parent, child });
        self.misses += 1;
        if self.misses >= (1u64 << self.bits) {
            self.maybe_grow();
        }
        child
    }

    /// Doubles the cache when the last `2^bits` misses came faster than one lookup in 32.
    #[cold]
    fn maybe_grow(&mut self) {
        let thrashing = self.misses * 32 > self.lookups;
        (self.misses, self.lookups) = (0, 0);
        if !thrashing || self.bits >= MAX_BITS {
            return;
        }
        self.bits += 1;
        let old = std::mem::replace(&mut self.sets, Self::empty(self.bits));
        // Oldest first, so each set keeps its most recent edges in front.
        for set in old.iter() {
            for s in set.iter().rev().filter(|s| s.child != 0) {
                self.insert(*s);
            }
        }
    }
}

impl Default for NodeCache {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shared_prefixes_share_nodes() {
        let mut t = Trie::new();
        let a = t.intern(&[0x30, 0x20, 0x10]);
        let b = t.intern(&[0x31, 0x20, 0x10]);
        assert_eq!(t.intern(&[0x30, 0x20, 0x10]), a);
        assert_ne!(a, b);
        assert_eq!(t.nodes, 4);
        let nodes = StackNode::decode_all(&t.take_pending()).unwrap();
        assert_eq!(nodes.len(), 4);
        assert_eq!((nodes[0].parent, nodes[0].addr), (0, 0x10));
        assert_eq!(nodes[3], StackNode { id: b, parent: 2, addr: 0x31 });
        assert!(t.take_pending().is_empty());
    }
}
