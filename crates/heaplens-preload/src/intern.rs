//! Stack interning: every distinct call stack becomes one node id of a global trie of return
//! addresses (outermost frame at the root), so an event carries one small integer instead of
//! its frames. New nodes are written to the trace as Stacks records. A per-thread cache of trie
//! edges makes the frames a capture unwinds (see `unwind::Walker`) cost no lock once seen.

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

const CACHE_SLOTS: usize = 16384;

#[derive(Clone, Copy, Default)]
struct Slot {
    addr: u64,
    parent: u32,
    child: u32,
}

/// A thread's direct-mapped cache of trie edges, (parent, return address) → child, so that
/// interning the few frames a capture had to unwind takes no lock once they have been seen.
pub struct NodeCache {
    slots: Box<[Slot]>,
}

impl NodeCache {
    /// An empty cache (256 KiB).
    pub fn new() -> Self {
        Self { slots: vec![Slot::default(); CACHE_SLOTS].into_boxed_slice() }
    }

    /// Forgets every entry (after fork, when the trie starts over).
    pub fn clear(&mut self) {
        self.slots.fill(Slot::default());
    }

    /// The child of `parent` for caller frame `addr`, from the cache or else from the trie.
    #[inline]
    pub fn child(&mut self, parent: u32, addr: u64) -> u32 {
        let h = (addr ^ u64::from(parent).wrapping_mul(0x9e37_79b9_7f4a_7c15)).wrapping_mul(0xff51_afd7_ed55_8ccd);
        let slot = &mut self.slots[(h >> 50) as usize & (CACHE_SLOTS - 1)];
        if slot.child != 0 && slot.addr == addr && slot.parent == parent {
            return slot.child;
        }
        let child = match TRIE.lock() {
            Ok(mut t) => t.get_or_insert_with(Trie::new).child(parent, addr),
            Err(_) => return 0,
        };
        *slot = Slot { addr, parent, child };
        child
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
