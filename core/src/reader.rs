//! One bounds-checked cursor over a prefix of a file. Every read returns `Result`; a read
//! that runs past the prefix says how much more is needed ([`Error::Incomplete`]), one that
//! runs past the end of the file is final ([`Error::Truncated`]).

use crate::error::{Error, Result};

pub(crate) struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
    file_len: u64,
}

impl<'a> Cursor<'a> {
    /// A cursor over `buf`, the first `buf.len()` bytes of a file of `file_len` bytes.
    pub fn new(buf: &'a [u8], file_len: u64) -> Self {
        // A prefix longer than the file makes no sense: treat the file as what we hold.
        let file_len = file_len.max(buf.len() as u64);
        Cursor { buf, pos: 0, file_len }
    }

    pub fn pos(&self) -> u64 {
        self.pos as u64
    }

    pub fn file_len(&self) -> u64 {
        self.file_len
    }

    /// Bytes of the *file* left after the cursor (the prefix may hold fewer).
    pub fn file_remaining(&self) -> u64 {
        self.file_len - self.pos as u64
    }

    fn short(&self, n: u64, what: &'static str) -> Error {
        let offset = self.pos as u64;
        let needed = offset.saturating_add(n);
        if needed > self.file_len {
            Error::Truncated { offset, what, needed, file_len: self.file_len }
        } else {
            Error::Incomplete { offset, what, needed, have: self.buf.len() as u64 }
        }
    }

    /// The next `n` bytes, borrowed.
    pub fn bytes(&mut self, n: u64, what: &'static str) -> Result<&'a [u8]> {
        let end = usize::try_from(n)
            .ok()
            .and_then(|n| self.pos.checked_add(n))
            .filter(|&end| end <= self.buf.len())
            .ok_or_else(|| self.short(n, what))?;
        let s = &self.buf[self.pos..end];
        self.pos = end;
        Ok(s)
    }

    pub fn array<const N: usize>(&mut self, what: &'static str) -> Result<[u8; N]> {
        let s = self.bytes(N as u64, what)?;
        let mut a = [0u8; N];
        a.copy_from_slice(s);
        Ok(a)
    }

    pub fn u8(&mut self, what: &'static str) -> Result<u8> {
        Ok(self.array::<1>(what)?[0])
    }
    pub fn u16(&mut self, what: &'static str) -> Result<u16> {
        Ok(u16::from_le_bytes(self.array(what)?))
    }
    pub fn u32(&mut self, what: &'static str) -> Result<u32> {
        Ok(u32::from_le_bytes(self.array(what)?))
    }
    pub fn u64(&mut self, what: &'static str) -> Result<u64> {
        Ok(u64::from_le_bytes(self.array(what)?))
    }

    /// Moves forward `n` bytes without looking at them.
    pub fn skip(&mut self, n: u64, what: &'static str) -> Result<()> {
        self.bytes(n, what).map(|_| ())
    }

    /// The bytes from `start` (an earlier position) to the cursor.
    pub fn since(&self, start: u64) -> &'a [u8] {
        // `start` always comes from `pos()` of this cursor, so it is in range.
        let start = usize::try_from(start).unwrap_or(self.pos).min(self.pos);
        &self.buf[start..self.pos]
    }
}
