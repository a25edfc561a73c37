//! Little-endian encoding helpers. Nothing host-endian reaches the disk: every multi-byte
//! integer goes through these functions.

use crate::width::len_u32;

/// Append-only encoder.
#[derive(Default)]
pub(crate) struct Enc {
    pub buf: Vec<u8>,
}

impl Enc {
    pub(crate) fn with_capacity(n: usize) -> Enc {
        Enc {
            buf: Vec::with_capacity(n),
        }
    }
    pub(crate) fn u8(&mut self, v: u8) {
        self.buf.push(v);
    }
    pub(crate) fn u16(&mut self, v: u16) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    pub(crate) fn u32(&mut self, v: u32) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    pub(crate) fn u64(&mut self, v: u64) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    pub(crate) fn i64(&mut self, v: i64) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    pub(crate) fn bytes(&mut self, v: &[u8]) {
        self.buf.extend_from_slice(v);
    }
    /// A `u32` length followed by the bytes.
    pub(crate) fn lp(&mut self, v: &[u8]) {
        self.u32(len_u32(v.len()));
        self.bytes(v);
    }
}

/// Bounds-checked decoder: every read returns `Err` instead of panicking on short input.
pub(crate) struct Dec<'a> {
    buf: &'a [u8],
    pos: usize,
}

pub(crate) type DecResult<T> = Result<T, String>;

impl<'a> Dec<'a> {
    pub(crate) fn new(buf: &'a [u8]) -> Dec<'a> {
        Dec { buf, pos: 0 }
    }
    pub(crate) fn pos(&self) -> usize {
        self.pos
    }
    pub(crate) fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }
    pub(crate) fn take(&mut self, n: usize) -> DecResult<&'a [u8]> {
        if self.remaining() < n {
            return Err(format!(
                "truncated: need {n} bytes at offset {}, have {}",
                self.pos,
                self.remaining()
            ));
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }
    fn arr<const N: usize>(&mut self) -> DecResult<[u8; N]> {
        let s = self.take(N)?;
        let mut a = [0u8; N];
        a.copy_from_slice(s);
        Ok(a)
    }
    pub(crate) fn u8(&mut self) -> DecResult<u8> {
        Ok(self.arr::<1>()?[0])
    }
    pub(crate) fn u16(&mut self) -> DecResult<u16> {
        Ok(u16::from_le_bytes(self.arr()?))
    }
    pub(crate) fn u32(&mut self) -> DecResult<u32> {
        Ok(u32::from_le_bytes(self.arr()?))
    }
    pub(crate) fn u64(&mut self) -> DecResult<u64> {
        Ok(u64::from_le_bytes(self.arr()?))
    }
    pub(crate) fn i64(&mut self) -> DecResult<i64> {
        Ok(i64::from_le_bytes(self.arr()?))
    }
    pub(crate) fn lp(&mut self) -> DecResult<&'a [u8]> {
        let n = self.u32()? as usize;
        self.take(n)
    }
}
