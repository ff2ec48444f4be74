//! LEB128 unsigned varints and zigzag signed varints, the integer encoding of every record.

/// Most bytes a `u64` varint takes.
pub const MAX_LEN: usize = 10;

/// Appends `v` as an unsigned LEB128 varint (1 to 10 bytes).
#[inline(always)]
pub fn put(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Writes `v` as a varint into `buf` at `*pos`, advancing `*pos`. `buf` must have
/// [`MAX_LEN`] bytes free at `*pos`; this never allocates (the monitor's hot path uses it).
#[inline(always)]
pub fn put_at(buf: &mut [u8], pos: &mut usize, mut v: u64) {
    let mut p = *pos;
    while v >= 0x80 {
        buf[p] = (v as u8) | 0x80;
        v >>= 7;
        p += 1;
    }
    buf[p] = v as u8;
    *pos = p + 1;
}

/// Maps a signed delta to an unsigned one so that small magnitudes stay short.
#[inline(always)]
pub fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

/// Inverse of [`zigzag`].
#[inline(always)]
pub fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

/// Reads an unsigned LEB128 varint from `d` at `*pos` and moves `*pos` past it. `None` at the
/// end of input or for a varint longer than 64 bits (then `*pos` is left inside it).
#[inline(always)]
pub fn read_var(d: &[u8], pos: &mut usize) -> Option<u64> {
    if let Some(bytes) = d.get(*pos..*pos + 8) {
        // One byte is the common case of most columns, and in a column a predictable branch.
        if bytes[0] < 0x80 {
            *pos += 1;
            return Some(u64::from(bytes[0]));
        }
        // Two bytes: the next most common, also a predictable branch in a column of them.
        if bytes[1] < 0x80 {
            *pos += 2;
            return Some(u64::from(bytes[0] & 0x7f) | u64::from(bytes[1]) << 7);
        }
        // Up to 8 bytes without a branch per byte: find the terminating byte (high bit clear),
        // keep the bytes up to it and squeeze out the continuation bits.
        let w = u64::from_le_bytes(bytes.try_into().expect("8 bytes"));
        let stops = !w & 0x8080_8080_8080_8080;
        if stops != 0 {
            let bits = stops.trailing_zeros() + 1;
            *pos += (bits / 8) as usize;
            return Some(squeeze(low_bits(w, bits)));
        }
    }
    read_var_slow(d, pos)
}

/// The lowest `bits` (1..=64) bits of `w`.
#[inline(always)]
fn low_bits(w: u64, bits: u32) -> u64 {
    if bits == 64 {
        w
    } else {
        w & ((1u64 << bits) - 1)
    }
}

/// Squeezes the continuation bits out of up to 8 varint bytes (little-endian in `x`, bytes past
/// the varint already cleared): their value.
#[inline(always)]
pub fn squeeze(x: u64) -> u64 {
    let x = x & 0x7f7f_7f7f_7f7f_7f7f;
    let x = (x & 0x007f_007f_007f_007f) | ((x >> 1) & 0x3f80_3f80_3f80_3f80);
    let x = (x & 0x0000_3fff_0000_3fff) | ((x >> 2) & 0x0fff_c000_0fff_c000);
    (x & 0x0000_0000_0fff_ffff) | ((x >> 4) & 0x00ff_ffff_f000_0000)
}

/// Byte by byte: near the end of the input and for varints longer than 8 bytes.
#[inline(never)]
fn read_var_slow(d: &[u8], pos: &mut usize) -> Option<u64> {
    let mut v = 0u64;
    let mut shift = 0u32;
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

/// A cursor over a byte slice that reads varints; every read fails with `None` at the end of
/// input instead of panicking, so corrupt payloads are reported, not crashed on.
#[derive(Debug, Clone)]
pub struct Cursor<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    /// A cursor at the start of `data`.
    #[inline]
    pub fn new(data: &'a [u8]) -> Self {
        Self { data, pos: 0 }
    }

    /// True when every byte has been read.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.pos >= self.data.len()
    }

    /// Reads one byte.
    #[inline]
    pub fn u8(&mut self) -> Option<u8> {
        let b = *self.data.get(self.pos)?;
        self.pos += 1;
        Some(b)
    }

    /// Reads an unsigned varint.
    #[inline]
    pub fn var(&mut self) -> Option<u64> {
        read_var(self.data, &mut self.pos)
    }

    /// Reads a zigzag-encoded signed varint.
    #[inline]
    pub fn svar(&mut self) -> Option<i64> {
        self.var().map(unzigzag)
    }

    /// Reads a varint length followed by that many bytes.
    pub fn bytes(&mut self) -> Option<&'a [u8]> {
        let n = usize::try_from(self.var()?).ok()?;
        let end = self.pos.checked_add(n)?;
        let s = self.data.get(self.pos..end)?;
        self.pos = end;
        Some(s)
    }

    /// Reads a length-prefixed string, replacing invalid UTF-8.
    pub fn string(&mut self) -> Option<String> {
        self.bytes().map(|b| String::from_utf8_lossy(b).into_owned())
    }
}

/// Appends a length-prefixed byte string.
pub fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    put(out, b.len() as u64);
    out.extend_from_slice(b);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_edges() {
        let vals = [0u64, 1, 127, 128, 300, u32::MAX as u64, u64::MAX];
        let mut out = Vec::new();
        for v in vals {
            put(&mut out, v);
        }
        let mut c = Cursor::new(&out);
        for v in vals {
            assert_eq!(c.var(), Some(v));
        }
        assert!(c.is_empty());
        assert_eq!(c.var(), None);
        for v in [0i64, -1, 1, i64::MIN, i64::MAX, -4096] {
            assert_eq!(unzigzag(zigzag(v)), v);
        }
    }

    #[test]
    fn varints_of_every_length_near_the_end_of_input() {
        let mut vals = vec![0u64, 1, 127, 128, 255, 300, 16383, 16384, u64::MAX, u64::MAX >> 1];
        for shift in 0..64 {
            vals.push(1 << shift);
            vals.push((1 << shift) - 1);
            vals.push((1u64 << shift) | 0x5555_5555_5555_5555 >> (63 - shift));
        }
        let mut buf = Vec::new();
        for &v in &vals {
            put(&mut buf, v);
        }
        for pad in 0..12 {
            let mut d = buf.clone();
            d.extend(std::iter::repeat_n(0xffu8, pad));
            let (mut pos, mut slow) = (0, 0);
            for &v in &vals {
                assert_eq!(read_var(&d, &mut pos), Some(v));
                assert_eq!(read_var_slow(&d, &mut slow), Some(v));
            }
            assert_eq!(pos, buf.len());
            // Trailing 0xff bytes: an unterminated varint.
            assert_eq!(read_var(&d, &mut pos), None);
        }
    }

    #[test]
    fn put_at_matches_put() {
        let mut a = Vec::new();
        let mut b = [0u8; 32];
        let mut pos = 0;
        for v in [5u64, 1 << 40, 77777] {
            put(&mut a, v);
            put_at(&mut b, &mut pos, v);
        }
        assert_eq!(&b[..pos], &a[..]);
    }
}
