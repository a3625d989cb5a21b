//! A checked reader over a message's bytes and a writer that appends to one.
//!
//! Every read either yields the field or the error the caller named for "too short here"
//! (`BAD_MATCH/BAD_LEN` inside a match, `BAD_ACTION/BAD_LEN` inside an action, ...), so a
//! truncated message turns into the spec's error at the place it was cut, never a panic.

use crate::OfError;

/// Reads big-endian fields from the front of a byte slice.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Reader<'a> {
    bytes: &'a [u8],
    short: OfError,
}

impl<'a> Reader<'a> {
    /// A reader over `bytes` that answers `short` when a read runs past their end.
    pub fn new(bytes: &'a [u8], short: OfError) -> Self {
        Reader { bytes, short }
    }

    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    pub fn remaining(&self) -> usize {
        self.bytes.len()
    }

    /// The next `len` bytes.
    pub fn take(&mut self, len: usize) -> Result<&'a [u8], OfError> {
        if len > self.bytes.len() {
            return Err(self.short);
        }
        let (head, rest) = self.bytes.split_at(len);
        self.bytes = rest;
        Ok(head)
    }

    /// The next `len` bytes as a reader of their own, answering `short` within them.
    pub fn sub(&mut self, len: usize, short: OfError) -> Result<Reader<'a>, OfError> {
        Ok(Reader::new(self.take(len)?, short))
    }

    /// Everything left.
    pub fn rest(&mut self) -> &'a [u8] {
        std::mem::take(&mut self.bytes)
    }

    pub fn skip(&mut self, len: usize) -> Result<(), OfError> {
        self.take(len).map(|_| ())
    }

    pub fn array<const N: usize>(&mut self) -> Result<[u8; N], OfError> {
        let mut out = [0; N];
        out.copy_from_slice(self.take(N)?);
        Ok(out)
    }

    pub fn u8(&mut self) -> Result<u8, OfError> {
        Ok(self.array::<1>()?[0])
    }

    pub fn u16(&mut self) -> Result<u16, OfError> {
        Ok(u16::from_be_bytes(self.array()?))
    }

    pub fn u32(&mut self) -> Result<u32, OfError> {
        Ok(u32::from_be_bytes(self.array()?))
    }

    pub fn u64(&mut self) -> Result<u64, OfError> {
        Ok(u64::from_be_bytes(self.array()?))
    }

    /// A NUL-terminated string field of `len` bytes: up to its first NUL and at most
    /// `len - 1` bytes (the last byte is the terminator), cut before any byte that is not
    /// UTF-8, so that emitting it gives the same field back.
    pub fn string(&mut self, len: usize) -> Result<String, OfError> {
        let raw = self.take(len)?;
        let end = raw
            .iter()
            .position(|&b| b == 0)
            .unwrap_or(raw.len())
            .min(len.saturating_sub(1));
        let text = match std::str::from_utf8(&raw[..end]) {
            Ok(text) => text,
            Err(error) => std::str::from_utf8(&raw[..error.valid_up_to()]).unwrap_or_default(),
        };
        Ok(text.to_string())
    }
}

/// Appends big-endian fields to a message being built.
pub(crate) trait Writer {
    fn u8(&mut self, value: u8);
    fn u16(&mut self, value: u16);
    fn u32(&mut self, value: u32);
    fn u64(&mut self, value: u64);
    fn zeros(&mut self, len: usize);
    /// `text` in a NUL-padded field of `len` bytes (cut to leave one NUL at the end).
    fn string(&mut self, text: &str, len: usize);
    /// Writes `value` as a u16 at `at` (a length known only once the body is written).
    fn patch_u16(&mut self, at: usize, value: u16);
    /// Pads with zeros to a multiple of 8 bytes counted from `start`.
    fn pad8(&mut self, start: usize);
}

impl Writer for Vec<u8> {
    fn u8(&mut self, value: u8) {
        self.push(value);
    }
    fn u16(&mut self, value: u16) {
        self.extend_from_slice(&value.to_be_bytes());
    }
    fn u32(&mut self, value: u32) {
        self.extend_from_slice(&value.to_be_bytes());
    }
    fn u64(&mut self, value: u64) {
        self.extend_from_slice(&value.to_be_bytes());
    }
    fn zeros(&mut self, len: usize) {
        self.resize(self.len() + len, 0);
    }
    fn string(&mut self, text: &str, len: usize) {
        let mut used = text.len().min(len.saturating_sub(1));
        while !text.is_char_boundary(used) {
            used -= 1;
        }
        let used = text[..used].find('\0').unwrap_or(used);
        self.extend_from_slice(&text.as_bytes()[..used]);
        self.zeros(len - used);
    }
    fn patch_u16(&mut self, at: usize, value: u16) {
        self[at..at + 2].copy_from_slice(&value.to_be_bytes());
    }
    fn pad8(&mut self, start: usize) {
        let len = self.len() - start;
        self.zeros(len.next_multiple_of(8) - len);
    }
}

/// Length of a TLV written from `start` to the end of `out`, as its u16 length field; saturates
/// (a message over 64 KiB cannot be sent anyway and `Message::emit` refuses it).
pub(crate) fn len_since(out: &[u8], start: usize) -> u16 {
    u16::try_from(out.len() - start).unwrap_or(u16::MAX)
}
