//! The capture writer: classic pcap, nanosecond timestamps (magic 0xa1b23c4d), link type
//! Ethernet, snapshot length [`MAX_RECORD`], little-endian.
//!
//! Classic pcap rather than pcapng because every tool reads it and a record costs one 16-byte
//! header. Records go through a `BufWriter`, so writing a frame is a copy, not a system call.
//! A failed write leaves the file in an unknown state, so the writer then refuses everything
//! with [`PcapError::WriterBroken`] instead of writing records after a hole.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

use super::error::PcapError;
use super::{LINKTYPE_ETHERNET, MAX_RECORD};

/// Nanosecond-resolution pcap magic.
const PCAP_NANOS: u32 = 0xa1b2_3c4d;

/// Writes records to a classic pcap file.
pub struct PcapWriter<W: Write> {
    inner: W,
    file: String,
    broken: bool,
    records: u64,
}

impl PcapWriter<BufWriter<File>> {
    /// Creates (or truncates) the capture at `path` and writes its header.
    pub fn create(path: &Path) -> Result<Self, PcapError> {
        let file = File::create(path).map_err(|source| PcapError::Create {
            path: path.to_path_buf(),
            source,
        })?;
        Self::new(
            BufWriter::with_capacity(64 * 1024, file),
            path.display().to_string(),
        )
    }
}

impl<W: Write> PcapWriter<W> {
    /// Writes the file header to `inner`; `file` names the destination in error messages.
    pub fn new(inner: W, file: impl Into<String>) -> Result<Self, PcapError> {
        let mut writer = Self {
            inner,
            file: file.into(),
            broken: false,
            records: 0,
        };
        let mut header = [0u8; 24];
        header[0..4].copy_from_slice(&PCAP_NANOS.to_le_bytes());
        header[4..6].copy_from_slice(&2u16.to_le_bytes());
        header[6..8].copy_from_slice(&4u16.to_le_bytes());
        // thiszone and sigfigs stay zero.
        header[16..20].copy_from_slice(&MAX_RECORD.to_le_bytes());
        header[20..24].copy_from_slice(&(LINKTYPE_ETHERNET as u32).to_le_bytes());
        writer.write_all(&header)?;
        Ok(writer)
    }

    /// Appends one record: `data` captured at `time_ns` (nanoseconds since the Unix epoch), of
    /// `original_len` bytes on the wire (at least `data.len()`; pass `data.len()` for a whole
    /// frame).
    pub fn write_record(
        &mut self,
        time_ns: u64,
        data: &[u8],
        original_len: u32,
    ) -> Result<(), PcapError> {
        if self.broken {
            return Err(PcapError::WriterBroken {
                file: self.file.clone(),
            });
        }
        let captured_len = match u32::try_from(data.len()) {
            Ok(len) if len <= MAX_RECORD => len,
            _ => {
                return Err(PcapError::WriteTooLong {
                    file: self.file.clone(),
                    len: data.len(),
                    limit: MAX_RECORD,
                });
            }
        };
        let Ok(seconds) = u32::try_from(time_ns / 1_000_000_000) else {
            return Err(PcapError::WriteTime {
                file: self.file.clone(),
                time_ns,
            });
        };
        let nanos = (time_ns % 1_000_000_000) as u32;
        let mut header = [0u8; 16];
        header[0..4].copy_from_slice(&seconds.to_le_bytes());
        header[4..8].copy_from_slice(&nanos.to_le_bytes());
        header[8..12].copy_from_slice(&captured_len.to_le_bytes());
        header[12..16].copy_from_slice(&original_len.max(captured_len).to_le_bytes());
        self.write_all(&header)?;
        self.write_all(data)?;
        self.records += 1;
        Ok(())
    }

    /// Pushes buffered records to the file.
    pub fn flush(&mut self) -> Result<(), PcapError> {
        if self.broken {
            return Err(PcapError::WriterBroken {
                file: self.file.clone(),
            });
        }
        let result = self.inner.flush();
        self.check(result)
    }

    /// Records written so far.
    pub fn records(&self) -> u64 {
        self.records
    }

    /// The name used in error messages.
    pub fn file(&self) -> &str {
        &self.file
    }

    /// Flushes and hands back the destination (e.g. the `Vec<u8>` a test wrote into).
    pub fn into_inner(mut self) -> Result<W, PcapError> {
        self.flush()?;
        Ok(self.inner)
    }

    fn write_all(&mut self, bytes: &[u8]) -> Result<(), PcapError> {
        let result = self.inner.write_all(bytes);
        self.check(result)
    }

    fn check(&mut self, result: std::io::Result<()>) -> Result<(), PcapError> {
        result.map_err(|source| {
            self.broken = true;
            PcapError::Write {
                file: self.file.clone(),
                source,
            }
        })
    }
}
