//! The little-endian cursor both codecs read and write with.
//!
//! [`Reader`] never indexes past its buffer: every read is bounds-checked
//! and a short buffer is a [`Short`] (how many bytes the read needed, how
//! many there are, both counted from the start of the buffer), which each
//! codec turns into its own `Truncated` error. [`Put`] appends
//! little-endian integers to a sink: a growable `Vec<u8>` (the handshake) or
//! a caller's fixed buffer ([`SliceWriter`], the credit codec, which never
//! allocates).

/// A read ran past the end of the buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Short {
    /// Bytes the read needed, from the start of the buffer.
    pub(crate) need: usize,
    /// Bytes the buffer has.
    pub(crate) have: usize,
}

/// Reads little-endian fields front to back.
pub(crate) struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    /// A reader at the start of `buf`.
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        Self { buf, pos: 0 }
    }

    /// Bytes consumed so far.
    pub(crate) fn pos(&self) -> usize {
        self.pos
    }

    /// Bytes not consumed yet.
    pub(crate) fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    /// Checks that `n` more bytes are present, without consuming them.
    pub(crate) fn need(&self, n: usize) -> Result<(), Short> {
        if n <= self.remaining() {
            Ok(())
        } else {
            Err(Short {
                need: self.pos.saturating_add(n),
                have: self.buf.len(),
            })
        }
    }

    /// The next `n` bytes.
    pub(crate) fn take(&mut self, n: usize) -> Result<&'a [u8], Short> {
        self.need(n)?;
        let (head, _) = self.buf[self.pos..].split_at(n);
        self.pos += n;
        Ok(head)
    }

    /// The next `N` bytes as an array.
    pub(crate) fn array<const N: usize>(&mut self) -> Result<[u8; N], Short> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N)?);
        Ok(a)
    }

    pub(crate) fn u8(&mut self) -> Result<u8, Short> {
        Ok(self.array::<1>()?[0])
    }
    pub(crate) fn u16(&mut self) -> Result<u16, Short> {
        self.array().map(u16::from_le_bytes)
    }
    pub(crate) fn u32(&mut self) -> Result<u32, Short> {
        self.array().map(u32::from_le_bytes)
    }
    pub(crate) fn u64(&mut self) -> Result<u64, Short> {
        self.array().map(u64::from_le_bytes)
    }
    pub(crate) fn u128(&mut self) -> Result<u128, Short> {
        self.array().map(u128::from_le_bytes)
    }
}

/// A sink of little-endian fields.
pub(crate) trait Put {
    /// Appends raw bytes.
    fn put(&mut self, b: &[u8]);

    fn put_u16(&mut self, v: u16) {
        self.put(&v.to_le_bytes());
    }
    fn put_u32(&mut self, v: u32) {
        self.put(&v.to_le_bytes());
    }
    fn put_u64(&mut self, v: u64) {
        self.put(&v.to_le_bytes());
    }
    fn put_u128(&mut self, v: u128) {
        self.put(&v.to_le_bytes());
    }
}

#[cfg(feature = "alloc")]
impl Put for alloc::vec::Vec<u8> {
    fn put(&mut self, b: &[u8]) {
        self.extend_from_slice(b);
    }
}

/// Writes into a caller's buffer. A write that does not fit is dropped
/// and remembered ([`SliceWriter::overflowed`]) rather than a panic; the
/// credit codec sizes the buffer first, so it never happens there.
pub(crate) struct SliceWriter<'a> {
    buf: &'a mut [u8],
    at: usize,
    overflowed: bool,
}

impl<'a> SliceWriter<'a> {
    /// A writer at the start of `buf`.
    pub(crate) fn new(buf: &'a mut [u8]) -> Self {
        Self {
            buf,
            at: 0,
            overflowed: false,
        }
    }

    /// Bytes written.
    pub(crate) fn written(&self) -> usize {
        self.at
    }

    /// Whether a write did not fit.
    pub(crate) fn overflowed(&self) -> bool {
        self.overflowed
    }
}

impl Put for SliceWriter<'_> {
    fn put(&mut self, b: &[u8]) {
        match self
            .buf
            .get_mut(self.at..)
            .and_then(|r| r.get_mut(..b.len()))
        {
            Some(dst) => {
                dst.copy_from_slice(b);
                self.at += b.len();
            }
            None => self.overflowed = true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_are_little_endian_and_bounded() {
        let b = [1u8, 2, 3, 4, 5, 6, 7];
        let mut r = Reader::new(&b);
        assert_eq!(r.u16(), Ok(0x0201));
        assert_eq!(r.u32(), Ok(0x0605_0403));
        assert_eq!(r.pos(), 6);
        assert_eq!(r.u16(), Err(Short { need: 8, have: 7 }));
        // A failed read consumes nothing.
        assert_eq!(r.u8(), Ok(7));
        assert_eq!(r.remaining(), 0);
        assert_eq!(
            r.take(usize::MAX),
            Err(Short {
                need: usize::MAX,
                have: 7
            })
        );
        assert_eq!(r.need(0), Ok(()));
    }

    #[test]
    fn slice_writer_never_writes_past_its_buffer() {
        let mut b = [0u8; 5];
        let mut w = SliceWriter::new(&mut b);
        w.put_u32(0x0403_0201);
        assert!(!w.overflowed());
        w.put_u16(0xffff);
        assert!(w.overflowed());
        assert_eq!(w.written(), 4);
        w.put(&[9]);
        assert_eq!(w.written(), 5);
        assert_eq!(b, [1, 2, 3, 4, 9]);
    }
}
