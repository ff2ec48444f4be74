//! The layout of events decoded ahead of the replay (see `predecode.rs`): a few 64-bit words
//! an event, written by one thread and read back in order by the other, so that its size is
//! what both pay for (memory traffic between the cores). A release takes 16 bytes, an
//! allocation 24, a reallocation 32; the usable size, which the report does not use, is left
//! out.
//!
//! ```text
//! head  := addr (48 bits) | op << 48 | WIDE << 56
//! event := head ts [size | stack << 32] [old_addr]     (allocations: size, reallocations: both)
//!        | head(WIDE) ts addr size stack old_addr       (an address or a size too wide)
//! ```

use heaplens_trace::{Event, Op, OpClass};

const ADDR_MASK: u64 = (1 << 48) - 1;
const OP_SHIFT: u32 = 48;
/// Set in the head of an event stored with every field in a word of its own.
const WIDE: u64 = 1 << 56;

/// The events of one payload, packed.
#[derive(Default)]
pub struct PackedEvents {
    words: Vec<u64>,
    events: usize,
}

impl PackedEvents {
    /// Empties it, keeping its memory.
    pub fn clear(&mut self) {
        self.words.clear();
        self.events = 0;
    }

    /// Events held.
    pub fn len(&self) -> usize {
        self.events
    }

    /// Whether it holds no events.
    pub fn is_empty(&self) -> bool {
        self.events == 0
    }

    /// Appends `e` (its thread id and usable size are not kept).
    #[inline(always)]
    pub fn push(&mut self, e: &Event) {
        self.events += 1;
        let class = e.op.class();
        let op = (e.op as u64) << OP_SHIFT;
        if e.addr > ADDR_MASK || e.size > u64::from(u32::MAX) {
            self.words.extend_from_slice(&[op | WIDE, e.ts, e.addr, e.size, e.stack.into(), e.old_addr]);
            return;
        }
        let head = e.addr | op;
        match class {
            OpClass::Dealloc => self.words.extend_from_slice(&[head, e.ts]),
            OpClass::Alloc => self.words.extend_from_slice(&[head, e.ts, e.size | u64::from(e.stack) << 32]),
            OpClass::Realloc => {
                self.words.extend_from_slice(&[head, e.ts, e.size | u64::from(e.stack) << 32, e.old_addr])
            }
        }
    }

    /// The event at word `*pos` of thread `tid`, moving `*pos` past it; `None` at the end.
    #[inline(always)]
    pub fn read(&self, pos: &mut usize, tid: u32) -> Option<Event> {
        let w = &self.words[(*pos).min(self.words.len())..];
        let (&head, &ts) = (w.first()?, w.get(1)?);
        let op = Op::from_u8((head >> OP_SHIFT) as u8)?;
        let mut e = Event { ts, tid, op, addr: head & ADDR_MASK, old_addr: 0, size: 0, usable: 0, stack: 0 };
        if head & WIDE != 0 {
            let f = w.get(2..6)?;
            (e.addr, e.size, e.stack, e.old_addr) = (f[0], f[1], f[2] as u32, f[3]);
            *pos += 6;
            return Some(e);
        }
        match op.class() {
            OpClass::Dealloc => *pos += 2,
            class => {
                let ss = *w.get(2)?;
                (e.size, e.stack) = (ss & u64::from(u32::MAX), (ss >> 32) as u32);
                if class == OpClass::Realloc {
                    e.old_addr = *w.get(3)?;
                    *pos += 4;
                } else {
                    *pos += 3;
                }
            }
        }
        Some(e)
    }

    /// Where the words are, for prefetching.
    #[inline(always)]
    pub fn as_ptr(&self) -> *const u64 {
        self.words.as_ptr()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_every_shape() {
        let ev = |op, addr, old_addr, size, stack| Event { ts: 7, tid: 3, op, addr, old_addr, size, usable: 0, stack };
        let events = [
            ev(Op::Malloc, 0x5555_0000_1000, 0, 24, 9),
            ev(Op::Free, 0x5555_0000_1000, 0, 0, 0),
            ev(Op::Realloc, 0x7fff_0000_2000, 0x5555_0000_1000, 1 << 20, u32::MAX),
            ev(Op::Malloc, 0, 0, 1 << 40, 1),
            ev(Op::Calloc, u64::MAX - 15, 0, 0, 2),
            ev(Op::Realloc, 0x10, 0xffff_ffff_ffff_0000, 5, 6),
            ev(Op::Free, 1 << 50, 0, 0, 0),
        ];
        let mut p = PackedEvents::default();
        for e in &events {
            p.push(e);
        }
        assert_eq!(p.len(), events.len());
        let mut pos = 0;
        let got: Vec<Event> = std::iter::from_fn(|| p.read(&mut pos, 3)).collect();
        assert_eq!(got, events);
    }
}
