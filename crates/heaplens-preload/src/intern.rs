//! Stack interning: every distinct call stack becomes one node id of a global trie of return
//! addresses (outermost frame at the root), so an event carries one small integer instead of
//! its frames. New nodes are written to the trace as Stacks records. A per-thread cache keyed by
//! a hash of the whole stack makes repeated stacks (the common case: mprof saw most stacks
//! repeat) cost no lock at all.

use std::collections::HashMap;
use std::hash::BuildHasherDefault;
use std::sync::Mutex;

use heaplens_trace::StackNode;

type FxMap<K, V> = HashMap<K, V, BuildHasherDefault<rustc_hash::FxHasher>>;

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

    /// Interns `frames` (innermost first) and returns the leaf's id.
    pub fn intern(&mut self, frames: &[u64]) -> u32 {
        let mut id = 0u32;
        for &addr in frames.iter().rev() {
            id = match self.children.get(&(id, addr)) {
                Some(&child) => child,
                None => {
                    let child = self.next_id;
                    self.next_id += 1;
                    self.nodes += 1;
                    if self.pending.is_empty() {
                        self.pending_first = child;
                        StackNode::begin(&mut self.pending, child);
                    }
                    StackNode::push(&mut self.pending, child, id, addr);
                    self.children.insert((id, addr), child);
                    child
                }
            };
        }
        id
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

const CACHE_SLOTS: usize = 4096;

#[derive(Clone, Copy, Default)]
struct Slot {
    hash: u64,
    depth: u32,
    id: u32,
}

/// A thread's direct-mapped cache from stack hash to node id.
pub struct StackCache {
    slots: Box<[Slot]>,
}

impl StackCache {
    /// An empty cache (64 KiB).
    pub fn new() -> Self {
        Self { slots: vec![Slot::default(); CACHE_SLOTS].into_boxed_slice() }
    }

    /// Forgets every entry (after fork, when the trie starts over).
    pub fn clear(&mut self) {
        self.slots.fill(Slot::default());
    }

    /// The node id of `frames` (innermost first), from the cache or else from the trie.
    #[inline]
    pub fn intern(&mut self, frames: &[u64]) -> u32 {
        if frames.is_empty() {
            return 0;
        }
        let hash = hash_frames(frames);
        let slot = &mut self.slots[(hash as usize) & (CACHE_SLOTS - 1)];
        if slot.hash == hash && slot.depth == frames.len() as u32 && slot.id != 0 {
            return slot.id;
        }
        let id = match TRIE.lock() {
            Ok(mut t) => t.get_or_insert_with(Trie::new).intern(frames),
            Err(_) => return 0,
        };
        *slot = Slot { hash, depth: frames.len() as u32, id };
        id
    }
}

impl Default for StackCache {
    fn default() -> Self {
        Self::new()
    }
}

/// A 64-bit hash of the frames (a multiply-rotate mix; collisions between distinct stacks of
/// the same depth are negligible at 2^-64 per pair).
#[inline]
fn hash_frames(frames: &[u64]) -> u64 {
    let mut h: u64 = 0x9e37_79b9_7f4a_7c15;
    for &f in frames {
        h = (h ^ f).wrapping_mul(0xff51_afd7_ed55_8ccd).rotate_left(29);
    }
    h ^ (h >> 32)
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
