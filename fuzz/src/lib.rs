//! What the fuzz targets share: a reader that hands out one byte per `read`, so that a target
//! can check that a streaming parser gives the same answer however its input is cut up.
#![deny(unsafe_code)]

use std::io::Read;

/// A reader over `0` that returns one byte per `read` call, the least a `Read` may return:
/// every record, line and UTF-8 sequence straddles a read boundary.
pub struct OneByte<'a>(pub &'a [u8]);

impl Read for OneByte<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match (self.0.split_first(), buf.first_mut()) {
            (Some((&byte, rest)), Some(slot)) => {
                *slot = byte;
                self.0 = rest;
                Ok(1)
            }
            _ => Ok(0),
        }
    }
}

/// How many lines a line-based parser may number in `data`: one more than its newlines.
pub fn line_count(data: &[u8]) -> usize {
    data.iter().filter(|&&byte| byte == b'\n').count() + 1
}
