//! Deferred stack interning. The thread that records an allocation does not intern its stack:
//! each trie edge is a random access into a table far larger than the core's cache, and on
//! gcc's `cc1` three such dependent misses per allocation were a third of the monitor's cost.
//! Instead the event ends with a *stack command* that says how the thread's walker changed its
//! chain (see [`crate::unwind::Capture`]) and carries the return addresses it unwound. The writer
//! thread replays each thread's commands on a mirror of that thread's chains of trie nodes,
//! interns the new frames into the trie, which in this mode only it touches, and writes the
//! final event with the leaf's node id. On a machine with a spare core that work runs there.
//!
//! A thread buffer's payload is an Events payload (see `heaplens_trace::event`) whose
//! allocation and reallocation records end in a command instead of a stack id:
//!
//! ```text
//! command := head:varint [entry:u8] n:varint ret:u64le{n} [leaf:u64le]
//! head    := keep << 5 | leaf << 4 | stored << 3 | hit << 2 | from_archive << 1 | saved_archive
//! ```
//!
//! `leaf` (present when its bit is set) is one more frame below the captured stack, outside
//! the walker's chains: a pool's frame (see `heaplens_trace::event::POOL_FRAMES`).
//!
//! `entry` (present when `hit` or `stored` is set) is the recent stack the capture repeated or
//! kept (see `unwind/recent.rs`).
//!
//! Commands of one thread must be replayed in the order they were made, so buffers are
//! converted under the trie's lock in queue order (a thread's buffers enter the queue in order).

use heaplens_trace::event::{OP_BITS, USABLE_GLIBC};
use heaplens_trace::record::Malformed;
use heaplens_trace::varint::{put, put_at, read_var};
use heaplens_trace::{Op, OpClass};

use crate::intern::{FxMap, Trie};
use crate::unwind::{Capture, RECENT};

/// Most bytes the command for a stack of `frames` new frames (and a leaf) takes.
pub const fn command_len(frames: usize) -> usize {
    29 + 8 * frames
}

const SAVED_ARCHIVE: u64 = 1;
const FROM_ARCHIVE: u64 = 2;
const HIT: u64 = 4;
const STORED: u64 = 8;
const LEAF: u64 = 16;
const KEEP_SHIFT: u32 = 5;

/// Appends the command for capture `c`, whose new frames (outermost first) are `frames`, at
/// `*pos`; `buf` needs [`command_len`] bytes free there.
#[inline(always)]
pub fn put_command(buf: &mut [u8], pos: &mut usize, c: &Capture, frames: &[u64]) {
    put_command_leaf(buf, pos, c, frames, None);
}

/// [`put_command`], with one more frame `leaf` below the captured stack.
#[inline(always)]
pub fn put_command_leaf(buf: &mut [u8], pos: &mut usize, c: &Capture, frames: &[u64], leaf: Option<u64>) {
    let flag = |on: bool, bit: u64| if on { bit } else { 0 };
    let head = (c.keep as u64) << KEEP_SHIFT
        | flag(leaf.is_some(), LEAF)
        | flag(c.stored.is_some(), STORED)
        | flag(c.hit.is_some(), HIT)
        | flag(c.from_archive, FROM_ARCHIVE)
        | flag(c.saved_archive, SAVED_ARCHIVE);
    put_at(buf, pos, head);
    if let Some(e) = c.hit.or(c.stored) {
        buf[*pos] = e;
        *pos += 1;
    }
    put_at(buf, pos, frames.len() as u64);
    let out = &mut buf[*pos..*pos + 8 * frames.len()];
    for (dst, r) in out.chunks_exact_mut(8).zip(frames) {
        dst.copy_from_slice(&r.to_le_bytes());
    }
    *pos += 8 * frames.len();
    if let Some(leaf) = leaf {
        buf[*pos..*pos + 8].copy_from_slice(&leaf.to_le_bytes());
        *pos += 8;
    }
}

/// A thread's chains as its walker holds them, as trie nodes: `cur[i]` is the node of the
/// previous stack's frames `0..=i`, outermost first.
#[derive(Default)]
struct Mirror {
    cur: Vec<u32>,
    archive: Vec<u32>,
    /// The recent stacks' nodes, by entry (see `unwind/recent.rs`).
    recent: Vec<Vec<u32>>,
    /// The last edge interned at each depth, (parent, return address, child): a loop that
    /// allocates from a few places keeps finding its edges here instead of in the trie's map.
    memo: Vec<(u32, u64, u32)>,
}

impl Mirror {
    /// Replays one command (`entry` < [`RECENT`] when the head names one); returns the new
    /// stack's leaf node.
    fn apply(&mut self, trie: &mut Trie, head: u64, entry: usize, frames: &[u8]) -> u32 {
        let keep = usize::try_from(head >> KEEP_SHIFT).unwrap_or(usize::MAX);
        if head & SAVED_ARCHIVE != 0 {
            self.archive.clone_from(&self.cur);
        }
        if head & (HIT | STORED) != 0 && self.recent.is_empty() {
            self.recent.resize(RECENT, Vec::new());
        }
        if head & HIT != 0 {
            self.cur.clone_from(&self.recent[entry]);
            return self.cur.last().copied().unwrap_or(0);
        }
        if head & FROM_ARCHIVE != 0 {
            let keep = keep.min(self.archive.len());
            self.cur.clear();
            self.cur.extend_from_slice(&self.archive[..keep]);
        } else {
            self.cur.truncate(keep);
        }
        let mut id = self.cur.last().copied().unwrap_or(0);
        for r in frames.chunks_exact(8) {
            let addr = u64::from_le_bytes(r.try_into().unwrap_or_default());
            let depth = self.cur.len();
            if depth >= self.memo.len() {
                self.memo.resize(depth + 1, (0, 0, 0));
            }
            let m = &mut self.memo[depth];
            id = if m.2 != 0 && m.0 == id && m.1 == addr {
                m.2
            } else {
                let child = trie.child(id, addr);
                *m = (id, addr, child);
                child
            };
            self.cur.push(id);
        }
        if head & STORED != 0 {
            self.recent[entry].clone_from(&self.cur);
        }
        id
    }
}

/// The writer's mirrors. Locked only while holding [`crate::intern::TRIE`] (lock order: trie,
/// then mirrors), so fork, which takes the trie's lock, never finds it held.
pub static MIRRORS: std::sync::Mutex<Option<Mirrors>> = std::sync::Mutex::new(None);

/// Every thread's mirror, by thread id. A thread id the kernel reuses for a new thread is
/// harmless: a new walker keeps nothing from before its first capture.
#[derive(Default)]
pub struct Mirrors {
    threads: FxMap<u32, Mirror>,
}

impl Mirrors {
    /// Converts one thread buffer's payload `raw` into an Events payload appended to `out`,
    /// interning new stacks into `trie`.
    ///
    /// # Errors
    /// [`Malformed`] if `raw` is not a payload the monitor wrote (events up to the bad one are
    /// kept in `out`).
    pub fn convert(&mut self, trie: &mut Trie, raw: &[u8], out: &mut Vec<u8>) -> Result<(), Malformed> {
        let bad = Malformed("thread buffer");
        let mut pos = 0;
        let tid = read_var(raw, &mut pos).ok_or(bad)?;
        put(out, tid);
        let mirror = self.threads.entry(tid as u32).or_default();
        // Copies `count` varints unchanged.
        let copy = |pos: &mut usize, out: &mut Vec<u8>, count: usize| -> Result<(), Malformed> {
            let start = *pos;
            let mut left = count;
            while left > 0 {
                let b = *raw.get(*pos).ok_or(bad)?;
                *pos += 1;
                left -= usize::from(b < 0x80);
            }
            out.extend_from_slice(&raw[start..*pos]);
            Ok(())
        };
        while pos < raw.len() {
            let head = raw[pos];
            let op = Op::from_u8(head & OP_BITS).ok_or(bad)?;
            out.push(head);
            pos += 1;
            // dts daddr, then: size [usable] | old size [usable] | nothing.
            let slack = usize::from(head & USABLE_GLIBC == 0);
            let fields = match op.class() {
                OpClass::Alloc => 3 + slack,
                OpClass::Realloc => 4 + slack,
                OpClass::Dealloc => 2,
            };
            copy(&mut pos, out, fields)?;
            if op.class() == OpClass::Dealloc {
                continue;
            }
            let head = read_var(raw, &mut pos).ok_or(bad)?;
            let entry = if head & (HIT | STORED) != 0 {
                let e = usize::from(*raw.get(pos).ok_or(bad)?);
                pos += 1;
                if e >= RECENT {
                    return Err(bad);
                }
                e
            } else {
                0
            };
            let n = usize::try_from(read_var(raw, &mut pos).ok_or(bad)?).map_err(|_| bad)?;
            let end = n.checked_mul(8).and_then(|l| pos.checked_add(l)).filter(|&e| e <= raw.len()).ok_or(bad)?;
            let mut node = mirror.apply(trie, head, entry, &raw[pos..end]);
            pos = end;
            if head & LEAF != 0 {
                let leaf = raw.get(pos..pos + 8).ok_or(bad)?;
                node = trie.child(node, u64::from_le_bytes(leaf.try_into().map_err(|_| bad)?));
                pos += 8;
            }
            put(out, node.into());
        }
        Ok(())
    }

    /// Forgets every thread (after fork, with the trie).
    pub fn clear(&mut self) {
        self.threads.clear();
    }
}

#[cfg(test)]
mod tests {
    use heaplens_trace::{EventDecoder, EventEncoder, StackNode};

    use super::*;

    fn cmd(keep: usize, from_archive: bool, saved_archive: bool, frames: &[u64]) -> (Capture, Vec<u64>) {
        let c = Capture {
            keep,
            from_archive,
            saved_archive,
            hit: None,
            stored: None,
            depth: keep + frames.len(),
            unwound: frames.len(),
            unknown_code: false,
        };
        (c, frames.to_vec())
    }

    /// The stacks (outermost first) that node ids stand for.
    fn paths(trie: &mut Trie) -> FxMap<u32, Vec<u64>> {
        let mut m: FxMap<u32, Vec<u64>> = FxMap::default();
        m.insert(0, vec![]);
        for n in StackNode::decode_all(&trie.take_pending()).unwrap() {
            let mut p = m[&n.parent].clone();
            p.push(n.addr);
            m.insert(n.id, p);
        }
        m
    }

    #[test]
    fn replays_previous_stack_and_archive() {
        let mut buf = vec![0u8; 4096];
        let mut pos = 0;
        let mut e = EventEncoder::default();
        e.begin(&mut buf, &mut pos, 7);
        let cmds = [
            cmd(0, false, false, &[1, 2, 3, 4]), // 1 2 3 4
            cmd(2, false, false, &[5]),          // 1 2 5
            cmd(1, false, true, &[6, 7]),        // archive := 1 2 5; 1 6 7
            cmd(3, true, false, &[8]),           // 1 2 5 8
            cmd(0, false, false, &[]),           // empty stack
        ];
        for (i, (c, f)) in cmds.iter().enumerate() {
            e.alloc_unterminated(&mut buf, &mut pos, Op::Malloc, i as u64, 0x1000 + i as u64 * 16, 16, 24);
            put_command(&mut buf, &mut pos, c, f);
            e.dealloc(&mut buf, &mut pos, Op::Free, i as u64, 0x1000 + i as u64 * 16);
        }
        let mut trie = Trie::new();
        let mut out = Vec::new();
        Mirrors::default().convert(&mut trie, &buf[..pos], &mut out).unwrap();
        let paths = paths(&mut trie);
        let events: Vec<_> = EventDecoder::new(&out).unwrap().map(Result::unwrap).collect();
        assert_eq!(events.len(), 10);
        let stacks: Vec<Vec<u64>> = events.iter().step_by(2).map(|e| paths[&e.stack].clone()).collect();
        assert_eq!(stacks, vec![vec![1, 2, 3, 4], vec![1, 2, 5], vec![1, 6, 7], vec![1, 2, 5, 8], vec![]]);
        assert_eq!((events[2].addr, events[2].size, events[2].usable), (0x1010, 16, 24));
        assert_eq!(events[9].op, Op::Free);
    }

    #[test]
    fn replays_recent_stacks() {
        let mut buf = vec![0u8; 4096];
        let mut pos = 0;
        let mut e = EventEncoder::default();
        e.begin(&mut buf, &mut pos, 7);
        let with = |(c, f): (Capture, Vec<u64>), hit: Option<u8>, stored: Option<u8>| (Capture { hit, stored, ..c }, f);
        let cmds = [
            with(cmd(0, false, false, &[1, 2, 3]), None, Some(0)), // 1 2 3, kept as entry 0
            with(cmd(1, false, false, &[4]), None, Some(5)),       // 1 4, kept as entry 5
            with(cmd(3, false, false, &[]), Some(0), None),        // entry 0 again: 1 2 3
            cmd(2, false, false, &[6]),                            // from it: 1 2 6
            with(cmd(2, false, false, &[]), Some(5), None),        // entry 5: 1 4
            cmd(2, false, false, &[7]),                            // from it: 1 4 7
        ];
        for (i, (c, f)) in cmds.iter().enumerate() {
            e.alloc_unterminated(&mut buf, &mut pos, Op::Malloc, i as u64, 0x1000 + i as u64 * 16, 16, 24);
            put_command(&mut buf, &mut pos, c, f);
        }
        let mut trie = Trie::new();
        let mut out = Vec::new();
        Mirrors::default().convert(&mut trie, &buf[..pos], &mut out).unwrap();
        let paths = paths(&mut trie);
        let stacks: Vec<Vec<u64>> =
            EventDecoder::new(&out).unwrap().map(|e| paths[&e.unwrap().stack].clone()).collect();
        assert_eq!(stacks, vec![vec![1, 2, 3], vec![1, 4], vec![1, 2, 3], vec![1, 2, 6], vec![1, 4], vec![1, 4, 7]]);
        // An entry past the last is refused.
        let mut bad = buf[..pos].to_vec();
        let mut p = bad.len();
        bad.resize(p + 64, 0);
        e.alloc_unterminated(&mut bad, &mut p, Op::Malloc, 9, 0x2000, 16, 24);
        let (c, f) = with(cmd(1, false, false, &[]), Some(16), None);
        put_command(&mut bad, &mut p, &c, &f);
        assert!(Mirrors::default().convert(&mut Trie::new(), &bad[..p], &mut Vec::new()).is_err());
    }

    #[test]
    fn rejects_a_cut_command() {
        let mut buf = vec![0u8; 256];
        let mut pos = 0;
        let mut e = EventEncoder::default();
        e.begin(&mut buf, &mut pos, 1);
        e.alloc_unterminated(&mut buf, &mut pos, Op::Malloc, 1, 0x10, 8, 8);
        let (c, f) = cmd(0, false, false, &[1, 2]);
        put_command(&mut buf, &mut pos, &c, &f);
        let mut out = Vec::new();
        assert!(Mirrors::default().convert(&mut Trie::new(), &buf[..pos - 3], &mut out).is_err());
    }
}
