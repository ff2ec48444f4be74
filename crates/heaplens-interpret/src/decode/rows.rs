//! A fast decoder for row payloads (Events blocks), equivalent to
//! [`heaplens_trace::EventDecoder`]: the same events, and a malformed record ends the payload at
//! the same place.

use std::mem::MaybeUninit;
use std::ptr::addr_of_mut;

use heaplens_trace::event::{addr_delta, glibc_usable, OP_BITS, USABLE_GLIBC};
use heaplens_trace::varint::{read_var as var, squeeze, unzigzag};
use heaplens_trace::{Event, Op, OpClass};

/// Where decoding of one payload stands.
#[derive(Debug, Clone, Copy, Default)]
pub struct DecodeState {
    /// Byte offset of the next event.
    pub pos: usize,
    /// The previous event's timestamp (times are deltas).
    pub prev_ts: u64,
    /// The previous event's address (addresses are deltas).
    pub prev_addr: u64,
}

/// The thread id of a payload and the position of its first event; `None` when it lacks one.
pub fn header(d: &[u8]) -> Option<(u32, DecodeState)> {
    let mut pos = 0;
    let tid = var(d, &mut pos)? as u32;
    Some((tid, DecodeState { pos, prev_ts: 0, prev_addr: 0 }))
}

/// Where a whole decoded payload goes.
pub trait Push {
    /// Adds the next event.
    fn push_event(&mut self, e: Event);
}

impl Push for Vec<Event> {
    #[inline(always)]
    fn push_event(&mut self, e: Event) {
        self.push(e);
    }
}

/// Decodes a whole row payload into `out`; true when it is malformed part-way.
pub fn decode_all<P: Push>(d: &[u8], out: &mut P) -> bool {
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "bmi2")]
    unsafe fn with_pext<P: Push>(d: &[u8], out: &mut P) -> bool {
        decode_all_with::<true, P>(d, out)
    }
    #[cfg(target_arch = "x86_64")]
    if fast_pext() {
        // SAFETY: the processor has BMI2.
        return unsafe { with_pext(d, out) };
    }
    decode_all_with::<false, P>(d, out)
}

/// Decodes the events of row payload `d` from `s` on into `out` (cleared first), at most
/// `max` of them; true when it met a malformed record (the rest of the payload is then to be
/// skipped). Done when `s.pos` reaches the end of `d`.
pub fn decode_some(d: &[u8], s: &mut DecodeState, tid: u32, out: &mut Vec<Event>, max: usize) -> bool {
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "bmi2")]
    unsafe fn with_pext(d: &[u8], s: &mut DecodeState, tid: u32, out: &mut Vec<Event>, max: usize) -> bool {
        decode_some_with::<true>(d, s, tid, out, max)
    }
    out.clear();
    #[cfg(target_arch = "x86_64")]
    if fast_pext() {
        // SAFETY: the processor has BMI2.
        return unsafe { with_pext(d, s, tid, out, max) };
    }
    decode_some_with::<false>(d, s, tid, out, max)
}

#[inline(always)]
fn decode_some_with<const PEXT: bool>(
    d: &[u8],
    s: &mut DecodeState,
    tid: u32,
    out: &mut Vec<Event>,
    max: usize,
) -> bool {
    out.reserve(max);
    while s.pos < d.len() && out.len() < max {
        let len = out.len();
        // SAFETY: the capacity for `max` events is reserved above and `len < max`.
        let slot = unsafe { &mut *out.as_mut_ptr().add(len).cast::<MaybeUninit<Event>>() };
        if next_event_fast::<PEXT>(d, s, tid, slot).is_some() {
            // SAFETY: `next_event_fast` wrote every field of the slot.
            unsafe { out.set_len(len + 1) };
            continue;
        }
        match next_event_slow(d, s, tid) {
            Some(e) => out.push(e),
            None => return true,
        }
    }
    false
}

#[inline(always)]
fn decode_all_with<const PEXT: bool, P: Push>(d: &[u8], out: &mut P) -> bool {
    let Some((tid, mut s)) = header(d) else { return true };
    while s.pos < d.len() {
        match next_event::<PEXT>(d, &mut s, tid) {
            Some(e) => out.push_event(e),
            None => return true,
        }
    }
    false
}

/// The value of a varint of `len` (1..=8) bytes at the start of `w`. With `PEXT` (for callers
/// compiled with BMI2) one instruction squeezes out the continuation bits.
#[inline(always)]
fn extract<const PEXT: bool>(w: u64, len: usize) -> u64 {
    let keep = if len == 8 { u64::MAX } else { (1u64 << (8 * len)) - 1 };
    #[cfg(target_arch = "x86_64")]
    if PEXT {
        // SAFETY: `PEXT` is only set in code compiled for BMI2 (see `fast_pext`).
        return unsafe { std::arch::x86_64::_pext_u64(w, keep & 0x7f7f_7f7f_7f7f_7f7f) };
    }
    squeeze(w & keep)
}

/// Whether this processor has a fast `pext` (BMI2; AMD before Zen 3 has it in microcode,
/// slower than the plain squeeze).
pub fn fast_pext() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        static FAST: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        *FAST.get_or_init(|| {
            if !std::is_x86_feature_detected!("bmi2") {
                return false;
            }
            let (v, f) = (std::arch::x86_64::__cpuid(0), std::arch::x86_64::__cpuid(1));
            let amd = (v.ebx, v.edx, v.ecx) == (0x6874_7541, 0x6974_6e65, 0x444d_4163); // "AuthenticAMD"
            let family = ((f.eax >> 8) & 0xf) + if (f.eax >> 8) & 0xf == 0xf { (f.eax >> 20) & 0xff } else { 0 };
            !amd || family >= 0x19
        })
    }
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// Decodes the event at `s.pos` (which must be before the end of `d`); `None` when it is
/// malformed, after which the rest of the payload is to be skipped.
#[inline(always)]
pub fn next_event<const PEXT: bool>(d: &[u8], s: &mut DecodeState, tid: u32) -> Option<Event> {
    let mut e = MaybeUninit::uninit();
    if next_event_fast::<PEXT>(d, s, tid, &mut e).is_some() {
        // SAFETY: `next_event_fast` wrote every field.
        return Some(unsafe { e.assume_init() });
    }
    next_event_slow(d, s, tid)
}

/// The common case in one go: an event whose fields all end within 16 bytes, none longer than
/// 8 bytes, with at least 8 more bytes after them. The ends of all fields come from one mask
/// of the bytes' high bits, so the fields decode independently instead of one after the
/// other. `None` leaves everything else (and every malformed record) to the exact slow path;
/// `Some` when every field of `out` is written.
///
/// The fields are stored one by one straight into `out` (in a batch buffer): an event built
/// on the stack and copied over was read back in 16-byte moves from narrower stores, which
/// stalled store forwarding for half of this function's time.
#[inline(always)]
fn next_event_fast<const PEXT: bool>(
    d: &[u8],
    s: &mut DecodeState,
    tid: u32,
    out: &mut MaybeUninit<Event>,
) -> Option<()> {
    let win: &[u8; 24] = d.get(s.pos..s.pos + 24)?.try_into().ok()?;
    let head = win[0];
    let op = Op::from_u8(head & OP_BITS)?;
    let lo = u64::from_le_bytes(win[..8].try_into().expect("8 bytes"));
    let hi = u64::from_le_bytes(win[8..16].try_into().expect("8 bytes"));
    // Bit i set: byte i ends a field (its high bit is clear). Byte 0 is the op byte.
    let gather = |w: u64| ((!w & 0x8080_8080_8080_8080) >> 7).wrapping_mul(0x0102_0408_1020_4080) >> 56;
    let mut ends = (gather(lo) | (gather(hi) << 8)) & !1;
    let mut start = 1usize;
    let mut field = || -> Option<u64> {
        if ends == 0 {
            return None;
        }
        let end = ends.trailing_zeros() as usize;
        ends &= ends - 1;
        let len = end + 1 - start;
        if len > 8 {
            return None;
        }
        let w = u64::from_le_bytes(win[start..start + 8].try_into().expect("8 bytes"));
        start = end + 1;
        Some(extract::<PEXT>(w, len))
    };
    let dts = field()?;
    let daddr = field()?;
    let class = op.class();
    let (mut old, mut size, mut usable, mut stack) = (0, 0, 0, 0);
    if class != OpClass::Dealloc {
        if class == OpClass::Realloc {
            old = field()?;
        }
        size = field()?;
        usable =
            if head & USABLE_GLIBC != 0 { glibc_usable(size) } else { size.wrapping_add(unzigzag(field()?) as u64) };
        stack = u32::try_from(field()?).ok()?;
    }
    let ts = s.prev_ts.wrapping_add(dts);
    let addr = s.prev_addr.wrapping_add(addr_delta(daddr, head));
    let old_addr = if class == OpClass::Realloc { addr.wrapping_add(unzigzag(old) as u64) } else { 0 };
    s.pos += start;
    s.prev_ts = ts;
    if addr != 0 {
        s.prev_addr = addr;
    }
    let p = out.as_mut_ptr();
    // SAFETY: `p` points to `out`, valid for writes; every field is written.
    unsafe {
        addr_of_mut!((*p).ts).write(ts);
        addr_of_mut!((*p).tid).write(tid);
        addr_of_mut!((*p).op).write(op);
        addr_of_mut!((*p).addr).write(addr);
        addr_of_mut!((*p).old_addr).write(old_addr);
        addr_of_mut!((*p).size).write(size);
        addr_of_mut!((*p).usable).write(usable);
        addr_of_mut!((*p).stack).write(stack);
    }
    Some(())
}

#[inline(never)]
fn next_event_slow(d: &[u8], s: &mut DecodeState, tid: u32) -> Option<Event> {
    let head = *d.get(s.pos)?;
    let op = Op::from_u8(head & OP_BITS)?;
    s.pos += 1;
    let ts = s.prev_ts.wrapping_add(var(d, &mut s.pos)?);
    let addr = s.prev_addr.wrapping_add(addr_delta(var(d, &mut s.pos)?, head));
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
            ev.usable = if head & USABLE_GLIBC != 0 {
                glibc_usable(ev.size)
            } else {
                ev.size.wrapping_add(unzigzag(var(d, &mut s.pos)?) as u64)
            };
            ev.stack = u32::try_from(var(d, &mut s.pos)?).ok()?;
        }
    }
    Some(ev)
}

#[cfg(test)]
mod tests {
    use super::*;
    use heaplens_trace::{EventDecoder, EventEncoder};

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "bmi2")]
    unsafe fn decode_pext(d: &[u8], s: &mut DecodeState, tid: u32) -> Option<Event> {
        next_event::<true>(d, s, tid)
    }
    #[cfg(not(target_arch = "x86_64"))]
    unsafe fn decode_pext(d: &[u8], s: &mut DecodeState, tid: u32) -> Option<Event> {
        next_event::<false>(d, s, tid)
    }

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
                0 if i % 2 == 0 => {
                    let size = x % 5000;
                    let usable = glibc_usable(size);
                    enc.alloc(&mut buf, &mut pos, Op::Malloc, i * 7, addr | (x >> 63), size, usable, (x >> 40) as u32)
                }
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
            let mut s2 = s;
            let mut got2 = Vec::new();
            while s2.pos < d.len() && fast_pext() {
                // SAFETY: fast_pext() says BMI2 is there.
                match unsafe { decode_pext(d, &mut s2, tid) } {
                    Some(e) => got2.push(Ok(e)),
                    None => {
                        got2.push(Err(heaplens_trace::record::Malformed("event")));
                        break;
                    }
                }
            }
            if fast_pext() {
                assert_eq!(got2, want, "pext, cut at {cut}");
            }
            while s.pos < d.len() {
                match next_event::<false>(d, &mut s, tid) {
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

    #[test]
    fn batches_decode_the_same_events() {
        let mut buf = vec![0u8; 1 << 16];
        let (mut pos, mut enc) = (0, EventEncoder::default());
        enc.begin(&mut buf, &mut pos, 77);
        for i in 0..600u64 {
            let addr = 0x7f00_0000_0000 + (i % 13) * 48;
            match i % 4 {
                0 => enc.alloc(&mut buf, &mut pos, Op::New, i * 3, addr, 24, glibc_usable(24), i as u32),
                1 => enc.alloc(&mut buf, &mut pos, Op::Malloc, i * 3, addr, i << 20, (i << 20) + 4096, 5),
                2 => enc.realloc(&mut buf, &mut pos, Op::Realloc, i * 3, addr + 16, addr, 100, 104, 2),
                _ => enc.dealloc(&mut buf, &mut pos, Op::Delete, i * 3, addr),
            }
        }
        let d = &buf[..pos];
        let want: Vec<Event> = EventDecoder::new(d).unwrap().map(Result::unwrap).collect();
        let (tid, mut s) = header(d).unwrap();
        let (mut got, mut batch) = (Vec::new(), Vec::new());
        while s.pos < d.len() {
            assert!(!decode_some(d, &mut s, tid, &mut batch, 7));
            assert!(batch.len() <= 7);
            got.extend_from_slice(&batch);
        }
        assert_eq!(got, want);
    }
}
