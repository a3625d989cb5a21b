//! The streaming capture reader: classic pcap (both byte orders, micro- and nanosecond magic)
//! and pcapng (draft-ietf-opsawg-pcapng: sections in either byte order, interface descriptions
//! with `if_tsresol`/`if_tsoffset`, enhanced, simple and obsolete packet blocks; every other block
//! is skipped).
//!
//! Why it is built this way: a capture can be far larger than memory and is untrusted, so the
//! reader holds one record at a time, copies its bytes straight into the caller's buffer (a frame
//! of the pool for [`super::PcapPort`]) and allocates nothing per record. Lengths are validated
//! against [`MAX_RECORD`] and against the enclosing block before anything is read or skipped, and
//! the reader counts every byte it consumes, so each error can name the exact byte offset.
//! Skipping (records too long for the caller's buffer, unknown blocks, options) streams through
//! `io::copy` into a sink and never buffers.
//!
//! A classic record longer than the file's snapshot length but within [`MAX_RECORD`] is read,
//! as Wireshark does: some writers declare a smaller snapshot length than they use.

use std::fs::File;
use std::io::{self, BufReader, Read};
use std::path::Path;

use super::MAX_RECORD;
use super::error::{PcapError, Problem};

/// Classic pcap magic, microsecond timestamps, as the writer's byte order stores it.
const PCAP_MICROS: u32 = 0xa1b2_c3d4;
/// Classic pcap magic, nanosecond timestamps.
const PCAP_NANOS: u32 = 0xa1b2_3c4d;
/// pcapng block types (section 4 of the draft); the section header's is a byte palindrome.
const SECTION_HEADER: u32 = 0x0a0d_0d0a;
const INTERFACE_DESCRIPTION: u32 = 1;
const OBSOLETE_PACKET: u32 = 2;
const SIMPLE_PACKET: u32 = 3;
const ENHANCED_PACKET: u32 = 6;
/// The section header's byte-order magic, as written in the writer's byte order.
const BYTE_ORDER_MAGIC: u32 = 0x1a2b_3c4d;
/// Interface options the reader understands.
const OPTION_END: u16 = 0;
const OPTION_TSRESOL: u16 = 9;
const OPTION_TSOFFSET: u16 = 14;
/// Interface descriptions kept per section; beyond this a file is treated as hostile.
const MAX_INTERFACES: usize = 4096;

/// Which of the two formats a file is in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileFormat {
    Pcap,
    PcapNg,
}

/// One record (packet) of a capture.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Record {
    /// Capture time in nanoseconds since the Unix epoch (0 for pcapng simple packet blocks,
    /// which carry none).
    pub time_ns: u64,
    /// Length of the packet on the wire.
    pub original_len: u32,
    /// Bytes of it the file holds.
    pub captured_len: u32,
    /// Link type of the interface it was captured on.
    pub link_type: u16,
    /// Interface index within its pcapng section (0 for classic pcap).
    pub interface: u32,
    /// Byte offset of the record header (pcapng: of the block) in the file.
    pub offset: u64,
    /// Whether the captured bytes are in `buf[..captured_len]`. `false` when the record is
    /// longer than the buffer: its bytes were skipped and the buffer is unspecified.
    pub in_buffer: bool,
}

/// Units of a pcapng timestamp: 10^-n or 2^-n seconds.
#[derive(Clone, Copy, Debug)]
enum Resolution {
    Decimal(u8),
    Binary(u8),
}

impl Resolution {
    /// Converts `ticks` of this resolution to nanoseconds, saturating at `u64::MAX`.
    fn to_ns(self, ticks: u64) -> u128 {
        let ticks = ticks as u128;
        match self {
            Resolution::Decimal(exponent) if exponent <= 9 => {
                ticks * 10u128.pow(9 - exponent as u32)
            }
            Resolution::Decimal(exponent) => match 10u128.checked_pow(exponent as u32 - 9) {
                Some(divisor) => ticks / divisor,
                None => 0,
            },
            Resolution::Binary(exponent) => (ticks * 1_000_000_000) >> exponent,
        }
    }
}

/// What a pcapng interface description says that the reader needs.
#[derive(Clone, Copy, Debug)]
struct Interface {
    link_type: u16,
    resolution: Resolution,
    /// `if_tsoffset`: seconds to add to every timestamp.
    offset_s: i64,
    /// Where its description block starts, for error messages.
    described_at: u64,
}

impl Interface {
    fn time_ns(&self, ticks: u64) -> u64 {
        let ns = self.resolution.to_ns(ticks) as i128 + self.offset_s as i128 * 1_000_000_000;
        ns.clamp(0, u64::MAX as i128) as u64
    }
}

/// The first bytes of a pcapng block, read and validated.
#[derive(Clone, Copy, Debug)]
struct BlockHeader {
    kind: u32,
    total_len: u32,
    start: u64,
    /// Byte order of the block (a section header sets it for its section).
    big_endian: bool,
}

/// Reads records from a capture one at a time.
pub struct PcapReader<R> {
    inner: R,
    file: String,
    /// Bytes consumed from `inner` so far: the offset of the next byte.
    offset: u64,
    format: FileFormat,
    big_endian: bool,
    /// Classic pcap: nanosecond timestamps, and the file's one link type.
    nanos: bool,
    link_type: u16,
    /// pcapng: the interfaces of the current section, by index.
    interfaces: Vec<Interface>,
    /// pcapng: a block header read ahead while looking for interface descriptions.
    peeked: Option<BlockHeader>,
    /// pcapng: where interface descriptions are parsed; at most `MAX_RECORD` bytes.
    scratch: Vec<u8>,
    /// Set after an error: the reader's position is no longer at a record boundary.
    failed_at: Option<u64>,
}

impl PcapReader<BufReader<File>> {
    /// Opens the capture at `path` and reads its header (pcapng: and the interface descriptions
    /// that precede the first packet).
    pub fn open(path: &Path) -> Result<Self, PcapError> {
        let file = File::open(path).map_err(|source| PcapError::Open {
            path: path.to_path_buf(),
            source,
        })?;
        Self::new(
            BufReader::with_capacity(64 * 1024, file),
            path.display().to_string(),
        )
    }
}

fn u16_of(bytes: [u8; 2], big_endian: bool) -> u16 {
    if big_endian {
        u16::from_be_bytes(bytes)
    } else {
        u16::from_le_bytes(bytes)
    }
}

fn u32_of(bytes: [u8; 4], big_endian: bool) -> u32 {
    if big_endian {
        u32::from_be_bytes(bytes)
    } else {
        u32::from_le_bytes(bytes)
    }
}

/// `N` bytes of `bytes` at `at`; `None` past the end.
fn array_at<const N: usize>(bytes: &[u8], at: usize) -> Option<[u8; N]> {
    bytes.get(at..at.checked_add(N)?)?.try_into().ok()
}

/// `N` bytes at `at` of a header array whose size the caller knows covers them.
fn field<const N: usize>(header: &[u8], at: usize) -> [u8; N] {
    array_at(header, at).unwrap_or([0; N])
}

fn padded4(len: u32) -> u64 {
    (len as u64 + 3) & !3
}

fn block_name(kind: u32) -> &'static str {
    match kind {
        SECTION_HEADER => "section header block",
        INTERFACE_DESCRIPTION => "interface description block",
        OBSOLETE_PACKET => "packet block",
        SIMPLE_PACKET => "simple packet block",
        ENHANCED_PACKET => "enhanced packet block",
        _ => "block",
    }
}

impl<R: Read> PcapReader<R> {
    /// Reads the file header from `inner`; `file` names the source in error messages.
    pub fn new(inner: R, file: impl Into<String>) -> Result<Self, PcapError> {
        let mut reader = Self {
            inner,
            file: file.into(),
            offset: 0,
            format: FileFormat::Pcap,
            big_endian: false,
            nanos: false,
            link_type: 0,
            interfaces: Vec::new(),
            peeked: None,
            scratch: Vec::new(),
            failed_at: None,
        };
        let mut magic = [0u8; 4];
        reader.read_exact(&mut magic, "file header", 0)?;
        let little = u32::from_le_bytes(magic);
        match little {
            SECTION_HEADER => {
                reader.format = FileFormat::PcapNg;
                let mut rest = [0u8; 4];
                reader.read_exact(&mut rest, block_name(SECTION_HEADER), 0)?;
                let head = [
                    magic[0], magic[1], magic[2], magic[3], rest[0], rest[1], rest[2], rest[3],
                ];
                let header = reader.finish_block_header(head, 0)?;
                reader.section(&header)?;
                reader.read_leading_interfaces()?;
            }
            _ => {
                let (big_endian, nanos) = match little {
                    PCAP_MICROS => (false, false),
                    PCAP_NANOS => (false, true),
                    _ if little == PCAP_MICROS.swap_bytes() => (true, false),
                    _ if little == PCAP_NANOS.swap_bytes() => (true, true),
                    _ => {
                        return Err(reader.corrupt(0, Problem::BadMagic(u32::from_be_bytes(magic))));
                    }
                };
                reader.big_endian = big_endian;
                reader.nanos = nanos;
                let mut header = [0u8; 20];
                reader.read_exact(&mut header, "file header", 0)?;
                let major = u16_of(field(&header, 0), big_endian);
                let minor = u16_of(field(&header, 2), big_endian);
                if major != 2 {
                    return Err(reader.corrupt(4, Problem::Version { major, minor }));
                }
                // The link type is the low 16 bits; the upper ones carry FCS information.
                reader.link_type = u32_of(field(&header, 16), big_endian) as u16;
            }
        }
        Ok(reader)
    }

    /// Reads the next record into `buf`. `Ok(None)` at the clean end of the file. After an
    /// error every further call fails with [`PcapError::Stopped`].
    pub fn next_record(&mut self, buf: &mut [u8]) -> Result<Option<Record>, PcapError> {
        if let Some(offset) = self.failed_at {
            return Err(PcapError::Stopped {
                file: self.file.clone(),
                offset,
            });
        }
        let result = match self.format {
            FileFormat::Pcap => self.next_pcap(buf),
            FileFormat::PcapNg => self.next_pcapng(buf),
        };
        if let Err(error) = &result {
            self.failed_at = Some(error.offset().unwrap_or(self.offset));
        }
        result
    }

    /// The file's format.
    pub fn format(&self) -> FileFormat {
        self.format
    }

    /// The name used in error messages.
    pub fn file(&self) -> &str {
        &self.file
    }

    /// Bytes consumed so far.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// The link types known so far, each with the byte offset that declares it: the file's one
    /// for classic pcap, the current section's interfaces for pcapng.
    pub fn link_types(&self) -> impl Iterator<Item = (u16, u64)> + '_ {
        let classic = (self.format == FileFormat::Pcap).then_some((self.link_type, 20));
        classic.into_iter().chain(
            self.interfaces
                .iter()
                .map(|interface| (interface.link_type, interface.described_at)),
        )
    }

    fn next_pcap(&mut self, buf: &mut [u8]) -> Result<Option<Record>, PcapError> {
        let start = self.offset;
        let mut header = [0u8; 16];
        match self.read_full(&mut header)? {
            0 => return Ok(None),
            16 => {}
            _ => return Err(self.truncated("record", start)),
        }
        let seconds = u32_of(field(&header, 0), self.big_endian) as u64;
        let fraction = u32_of(field(&header, 4), self.big_endian) as u64;
        let captured_len = u32_of(field(&header, 8), self.big_endian);
        let original_len = u32_of(field(&header, 12), self.big_endian);
        if captured_len > MAX_RECORD {
            return Err(self.corrupt(
                start + 8,
                Problem::RecordTooLong {
                    len: captured_len,
                    limit: MAX_RECORD,
                },
            ));
        }
        let fraction_ns = if self.nanos {
            fraction
        } else {
            fraction * 1000
        };
        let in_buffer = self.data(buf, captured_len, "record", start)?;
        Ok(Some(Record {
            time_ns: seconds * 1_000_000_000 + fraction_ns,
            original_len,
            captured_len,
            link_type: self.link_type,
            interface: 0,
            offset: start,
            in_buffer,
        }))
    }

    fn next_pcapng(&mut self, buf: &mut [u8]) -> Result<Option<Record>, PcapError> {
        loop {
            let header = match self.peeked.take() {
                Some(header) => header,
                None => match self.block_header()? {
                    Some(header) => header,
                    None => return Ok(None),
                },
            };
            match header.kind {
                SECTION_HEADER => {
                    self.section(&header)?;
                }
                INTERFACE_DESCRIPTION => self.interface(&header)?,
                ENHANCED_PACKET | OBSOLETE_PACKET | SIMPLE_PACKET => {
                    return self.packet(&header, buf).map(Some);
                }
                _ => self.finish_block(&header)?,
            }
        }
    }

    /// After a section header: reads the interface descriptions that follow it, so that
    /// [`PcapReader::link_types`] knows them before the first packet is read.
    fn read_leading_interfaces(&mut self) -> Result<(), PcapError> {
        loop {
            match self.block_header()? {
                Some(header) if header.kind == INTERFACE_DESCRIPTION => self.interface(&header)?,
                other => {
                    self.peeked = other;
                    return Ok(());
                }
            }
        }
    }

    /// Reads a block's type and length; `None` at the clean end of the file.
    fn block_header(&mut self) -> Result<Option<BlockHeader>, PcapError> {
        let start = self.offset;
        let mut head = [0u8; 8];
        match self.read_full(&mut head)? {
            0 => Ok(None),
            8 => self.finish_block_header(head, start).map(Some),
            _ => Err(self.truncated("block", start)),
        }
    }

    /// Interprets a block's first 8 bytes (reading a section header's byte-order magic too) and
    /// checks the length.
    fn finish_block_header(&mut self, head: [u8; 8], start: u64) -> Result<BlockHeader, PcapError> {
        let mut big_endian = self.big_endian;
        let kind_bytes: [u8; 4] = field(&head, 0);
        let is_section = u32::from_le_bytes(kind_bytes) == SECTION_HEADER;
        if is_section {
            let mut magic = [0u8; 4];
            self.read_exact(&mut magic, block_name(SECTION_HEADER), start)?;
            big_endian = match u32::from_le_bytes(magic) {
                BYTE_ORDER_MAGIC => false,
                value if value == BYTE_ORDER_MAGIC.swap_bytes() => true,
                _ => {
                    return Err(self.corrupt(
                        start + 8,
                        Problem::BadByteOrderMagic(u32::from_be_bytes(magic)),
                    ));
                }
            };
        }
        let kind = u32_of(kind_bytes, big_endian);
        let total_len = u32_of(field(&head, 4), big_endian);
        if !total_len.is_multiple_of(4) {
            return Err(self.corrupt(start + 4, Problem::BlockLengthUnaligned(total_len)));
        }
        let min = match kind {
            SECTION_HEADER => 28,
            INTERFACE_DESCRIPTION => 20,
            ENHANCED_PACKET | OBSOLETE_PACKET => 32,
            SIMPLE_PACKET => 16,
            _ => 12,
        };
        if total_len < min {
            return Err(self.corrupt(
                start + 4,
                Problem::BlockTooShort {
                    len: total_len,
                    min,
                },
            ));
        }
        Ok(BlockHeader {
            kind,
            total_len,
            start,
            big_endian,
        })
    }

    /// A section header (its byte-order magic already read): a new byte order, no interfaces.
    fn section(&mut self, header: &BlockHeader) -> Result<(), PcapError> {
        self.big_endian = header.big_endian;
        let mut version = [0u8; 4];
        self.read_exact(&mut version, block_name(header.kind), header.start)?;
        let major = u16_of(field(&version, 0), self.big_endian);
        let minor = u16_of(field(&version, 2), self.big_endian);
        if major != 1 {
            return Err(self.corrupt(header.start + 12, Problem::Version { major, minor }));
        }
        self.interfaces.clear();
        self.finish_block(header)
    }

    fn interface(&mut self, header: &BlockHeader) -> Result<(), PcapError> {
        let body_len = header.total_len - 12;
        if body_len > MAX_RECORD {
            return Err(self.corrupt(
                header.start + 4,
                Problem::HeaderBlockTooLong {
                    len: header.total_len,
                    limit: MAX_RECORD,
                },
            ));
        }
        if self.interfaces.len() >= MAX_INTERFACES {
            return Err(self.corrupt(header.start, Problem::TooManyInterfaces(MAX_INTERFACES)));
        }
        let mut body = std::mem::take(&mut self.scratch);
        body.clear();
        body.resize(body_len as usize, 0);
        let read = self.read_exact(&mut body, block_name(header.kind), header.start);
        let parsed = read.and_then(|()| self.parse_interface(header, &body));
        self.scratch = body;
        self.interfaces.push(parsed?);
        self.finish_block(header)
    }

    /// Parses an interface description's body (after the 8-byte block head).
    fn parse_interface(&self, header: &BlockHeader, body: &[u8]) -> Result<Interface, PcapError> {
        let big_endian = header.big_endian;
        let mut interface = Interface {
            link_type: array_at(body, 0).map_or(0, |bytes| u16_of(bytes, big_endian)),
            resolution: Resolution::Decimal(6),
            offset_s: 0,
            described_at: header.start,
        };
        let mut at = 8usize;
        while let (Some(code), Some(len)) = (array_at(body, at), array_at(body, at + 2)) {
            let code = u16_of(code, big_endian);
            let len = u16_of(len, big_endian);
            if code == OPTION_END {
                break;
            }
            let value_start = at + 4;
            let Some(value) = body.get(value_start..value_start + len as usize) else {
                return Err(self.corrupt(
                    header.start + 8 + at as u64,
                    Problem::OptionOverrun { code, len },
                ));
            };
            match (code, value) {
                (OPTION_TSRESOL, [resolution, ..]) => {
                    interface.resolution = if resolution & 0x80 == 0 {
                        Resolution::Decimal(*resolution)
                    } else {
                        Resolution::Binary(resolution & 0x7f)
                    };
                }
                (OPTION_TSOFFSET, _) => {
                    if let Some(bytes) = array_at::<8>(value, 0) {
                        interface.offset_s = if big_endian {
                            i64::from_be_bytes(bytes)
                        } else {
                            i64::from_le_bytes(bytes)
                        };
                    }
                }
                _ => {}
            }
            at = value_start + padded4(len as u32) as usize;
        }
        Ok(interface)
    }

    /// An enhanced, obsolete or simple packet block, its 8-byte head already read.
    fn packet(&mut self, header: &BlockHeader, buf: &mut [u8]) -> Result<Record, PcapError> {
        let name = block_name(header.kind);
        let big_endian = header.big_endian;
        let (interface_id, ticks, captured_len, original_len, fixed) = match header.kind {
            SIMPLE_PACKET => {
                let mut fixed = [0u8; 4];
                self.read_exact(&mut fixed, name, header.start)?;
                let original_len = u32_of(fixed, big_endian);
                (
                    0,
                    None,
                    original_len.min(header.total_len - 16),
                    original_len,
                    16,
                )
            }
            _ => {
                let mut fixed = [0u8; 20];
                self.read_exact(&mut fixed, name, header.start)?;
                let interface_id = if header.kind == ENHANCED_PACKET {
                    u32_of(field(&fixed, 0), big_endian)
                } else {
                    u16_of(field(&fixed, 0), big_endian) as u32
                };
                let high = u32_of(field(&fixed, 4), big_endian) as u64;
                let low = u32_of(field(&fixed, 8), big_endian) as u64;
                let captured_len = u32_of(field(&fixed, 12), big_endian);
                let original_len = u32_of(field(&fixed, 16), big_endian);
                (
                    interface_id,
                    Some(high << 32 | low),
                    captured_len,
                    original_len,
                    32,
                )
            }
        };
        // Where the length field at fault is: the simple block's original length, otherwise the
        // captured length after interface and timestamp.
        let length_at = header.start + if header.kind == SIMPLE_PACKET { 8 } else { 20 };
        if captured_len > MAX_RECORD {
            return Err(self.corrupt(
                length_at,
                Problem::RecordTooLong {
                    len: captured_len,
                    limit: MAX_RECORD,
                },
            ));
        }
        if fixed + padded4(captured_len) > header.total_len as u64 {
            return Err(self.corrupt(
                length_at,
                Problem::CapturedBeyondBlock {
                    captured: captured_len,
                    block_len: header.total_len,
                },
            ));
        }
        let Some(interface) = self.interfaces.get(interface_id as usize).copied() else {
            return Err(self.corrupt(
                header.start + 8,
                Problem::UnknownInterface {
                    id: interface_id,
                    known: self.interfaces.len(),
                },
            ));
        };
        let in_buffer = self.data(buf, captured_len, name, header.start)?;
        self.finish_block(header)?;
        Ok(Record {
            time_ns: ticks.map_or(0, |ticks| interface.time_ns(ticks)),
            original_len,
            captured_len,
            link_type: interface.link_type,
            interface: interface_id,
            offset: header.start,
            in_buffer,
        })
    }

    /// Skips what is left of a block's body and checks its trailing length.
    fn finish_block(&mut self, header: &BlockHeader) -> Result<(), PcapError> {
        let name = block_name(header.kind);
        let trailer_at = header.start + header.total_len as u64 - 4;
        self.skip(trailer_at.saturating_sub(self.offset), name, header.start)?;
        let mut trailer = [0u8; 4];
        self.read_exact(&mut trailer, name, header.start)?;
        let trailing = u32_of(trailer, header.big_endian);
        if trailing != header.total_len {
            return Err(self.corrupt(
                trailer_at,
                Problem::TrailerMismatch {
                    leading: header.total_len,
                    trailing,
                },
            ));
        }
        Ok(())
    }

    /// Reads `len` bytes of packet data into `buf`, or skips them when `buf` is too short.
    fn data(
        &mut self,
        buf: &mut [u8],
        len: u32,
        what: &'static str,
        starts_at: u64,
    ) -> Result<bool, PcapError> {
        match buf.get_mut(..len as usize) {
            Some(target) => self.read_exact(target, what, starts_at).map(|()| true),
            None => self.skip(len as u64, what, starts_at).map(|()| false),
        }
    }

    /// Reads until `buf` is full or the file ends; returns how many bytes it read.
    fn read_full(&mut self, buf: &mut [u8]) -> Result<usize, PcapError> {
        let mut filled = 0;
        while let Some(rest) = buf.get_mut(filled..).filter(|rest| !rest.is_empty()) {
            let wanted = rest.len();
            match self.inner.read(rest) {
                Ok(0) => break,
                Ok(n) => filled += n.min(wanted),
                Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
                Err(source) => {
                    return Err(PcapError::Read {
                        file: self.file.clone(),
                        offset: self.offset + filled as u64,
                        source,
                    });
                }
            }
        }
        self.offset += filled as u64;
        Ok(filled)
    }

    /// Fills `buf` or fails with [`PcapError::Truncated`] for the `what` starting at `starts_at`.
    fn read_exact(
        &mut self,
        buf: &mut [u8],
        what: &'static str,
        starts_at: u64,
    ) -> Result<(), PcapError> {
        if self.read_full(buf)? == buf.len() {
            Ok(())
        } else {
            Err(self.truncated(what, starts_at))
        }
    }

    /// Consumes `len` bytes without keeping them.
    fn skip(&mut self, len: u64, what: &'static str, starts_at: u64) -> Result<(), PcapError> {
        let copied =
            io::copy(&mut (&mut self.inner).take(len), &mut io::sink()).map_err(|source| {
                PcapError::Read {
                    file: self.file.clone(),
                    offset: self.offset,
                    source,
                }
            })?;
        self.offset += copied;
        if copied == len {
            Ok(())
        } else {
            Err(self.truncated(what, starts_at))
        }
    }

    fn truncated(&self, what: &'static str, starts_at: u64) -> PcapError {
        PcapError::Truncated {
            file: self.file.clone(),
            what,
            starts_at,
            ends_at: self.offset,
        }
    }

    fn corrupt(&self, offset: u64, problem: Problem) -> PcapError {
        PcapError::Corrupt {
            file: self.file.clone(),
            offset,
            problem,
        }
    }
}
