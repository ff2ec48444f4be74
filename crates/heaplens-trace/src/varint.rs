//! LEB128 unsigned varints and zigzag signed varints, the integer encoding of every record.

/// Most bytes a `u64` varint takes.
pub const MAX_LEN: usize = 10;

/// Appends `v` as an unsigned LEB128 varint (1 to 10 bytes).
#[inline]
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
pub fn read_var(d: &[u8], pos: &mut usize) -> Option<u64> {
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
    pub fn new(data: &'a [u8]) -> Self {
        Self { data, pos: 0 }
    }

    /// True when every byte has been read.
    pub fn is_empty(&self) -> bool {
        self.pos >= self.data.len()
    }

    /// Reads one byte.
    pub fn u8(&mut self) -> Option<u8> {
        let b = *self.data.get(self.pos)?;
        self.pos += 1;
        Some(b)
    }

    /// Reads an unsigned varint.
    pub fn var(&mut self) -> Option<u64> {
        read_var(self.data, &mut self.pos)
    }

    /// Reads a zigzag-encoded signed varint.
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
