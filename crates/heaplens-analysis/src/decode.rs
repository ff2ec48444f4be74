//! A fast decoder for Events payloads, equivalent to [`heaplens_trace::EventDecoder`] (same
//! events, and a malformed record ends the payload at the same place) but resumable: its state
//! is a position and two previous values, so a stream can hold it while its payloads are owned
//! elsewhere and keep growing.

use heaplens_trace::varint::unzigzag;
use heaplens_trace::{Event, Op, OpClass};

/// Reads an unsigned LEB128 varint at `*pos` exactly as `heaplens_trace::varint::Cursor::var`
/// does (at most 10 bytes; bits past 64 are dropped); `None` at the end of `d` or for an
/// over-long varint.
#[inline(always)]
pub(crate) fn var(d: &[u8], pos: &mut usize) -> Option<u64> {
    let b = *d.get(*pos)?;
    *pos += 1;
    if b < 0x80 {
        return Some(u64::from(b));
    }
    var_slow(d, pos, u64::from(b & 0x7f))
}

#[inline(never)]
fn var_slow(d: &[u8], pos: &mut usize, first: u64) -> Option<u64> {
    let mut v = first;
    let mut shift = 7u32;
    loop {
        let b = *d.get(*pos)?;
        *pos += 1;
        if shift >= 64 {
            return None;
        }
        v |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Some(v);
        }
        shift += 7;
    }
}

/// Where decoding of one payload stands.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct DecodeState {
    pub pos: usize,
    pub prev_ts: u64,
    pub prev_addr: u64,
}

/// The thread id of a payload and the position of its first event; `None` when it lacks one.
pub(crate) fn header(d: &[u8]) -> Option<(u32, DecodeState)> {
    let mut pos = 0;
    let tid = var(d, &mut pos)? as u32;
    Some((tid, DecodeState { pos, prev_ts: 0, prev_addr: 0 }))
}

/// The timestamp of the first event of a payload (when it decodes).
pub(crate) fn first_ts(d: &[u8]) -> Option<u64> {
    let (_, mut s) = header(d)?;
    s.pos += 1; // op byte
    var(d, &mut s.pos)
}

/// Decodes the event at `s.pos` (which must be before the end of `d`); `None` when it is
/// malformed, after which the rest of the payload is to be skipped.
#[inline(always)]
pub(crate) fn next_event(d: &[u8], s: &mut DecodeState, tid: u32) -> Option<Event> {
    let op = Op::from_u8(*d.get(s.pos)?)?;
    s.pos += 1;
    let ts = s.prev_ts.wrapping_add(var(d, &mut s.pos)?);
    let addr = s.prev_addr.wrapping_add(unzigzag(var(d, &mut s.pos)?) as u64);
    s.prev_ts = ts;
    if addr != 0 {
        s.prev_addr = addr;
    }
    let mut ev = Event { ts, tid, op, addr, old_addr: 0, size: 0, usable: 0, stack: 0 };
    match op.class() {
        OpClass::Dealloc => {}
        class => {
            if class == OpClass::Realloc {
                ev.old_addr = addr.wrapping_add(unzigzag(var(d, &mut s.pos)?) as u64);
            }
            ev.size = var(d, &mut s.pos)?;
            ev.usable = ev.size.wrapping_add(unzigzag(var(d, &mut s.pos)?) as u64);
            ev.stack = u32::try_from(var(d, &mut s.pos)?).ok()?;
        }
    }
    Some(ev)
}

#[cfg(test)]
mod tests {
    use super::*;
    use heaplens_trace::{EventDecoder, EventEncoder};

    #[test]
    fn matches_the_reference_decoder() {
        let mut buf = vec![0u8; 1 << 16];
        let mut pos = 0;
        let mut enc = EventEncoder::default();
        enc.begin(&mut buf, &mut pos, 4321);
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for i in 0..1000u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let addr = if i % 17 == 0 { 0 } else { 0x5555_0000_0000 + (x % (1 << 30)) * 16 };
            match i % 3 {
                0 => enc.alloc(&mut buf, &mut pos, Op::Malloc, i * 7, addr, x % 5000, x % 5000 + 8, (x >> 40) as u32),
                1 => enc.realloc(&mut buf, &mut pos, Op::Realloc, i * 7, addr ^ 0x40, addr, x >> 3, x >> 3, 3),
                _ => enc.dealloc(&mut buf, &mut pos, Op::Free, i * 7 + (x >> 60), addr),
            }
        }
        let data = &buf[..pos];
        for cut in [data.len(), data.len() - 1, data.len() / 2, 3] {
            let d = &data[..cut];
            let want: Vec<_> = EventDecoder::new(d).unwrap().collect();
            let (tid, mut s) = header(d).unwrap();
            let mut got = Vec::new();
            while s.pos < d.len() {
                match next_event(d, &mut s, tid) {
                    Some(e) => got.push(Ok(e)),
                    None => {
                        got.push(Err(heaplens_trace::record::Malformed("event")));
                        break;
                    }
                }
            }
            assert_eq!(got, want, "cut at {cut}");
        }
    }
}
