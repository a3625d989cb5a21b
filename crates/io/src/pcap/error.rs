//! What can go wrong with a capture file, said so that the person holding the file can act on it.
//!
//! Every reading error carries the file name and the byte offset of the field at fault; the
//! message ends with what to do. [`Problem`] is the typed list of ways a file can be malformed,
//! so tests (and callers) can match on the exact fault instead of parsing text.

use std::fmt;
use std::io;
use std::path::PathBuf;

/// An error opening, reading or writing a capture file.
#[derive(Debug, thiserror::Error)]
pub enum PcapError {
    #[error("cannot open capture {path}: {source}; check the path and its permissions")]
    Open {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error(
        "cannot create capture {path}: {source}; check that the directory exists and is writable"
    )]
    Create {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error(
        "{file}: read failed at byte offset {offset}: {source}; check the device or file system \
         the capture is on"
    )]
    Read {
        file: String,
        offset: u64,
        #[source]
        source: io::Error,
    },
    #[error(
        "{file}: the file ends at byte offset {ends_at}, in the middle of the {what} that starts at \
         byte offset {starts_at}; the capture was cut short (still being written, or a full disk): \
         keep the whole records with `editcap -r FILE OUT 1-N` or capture again"
    )]
    Truncated {
        file: String,
        what: &'static str,
        starts_at: u64,
        ends_at: u64,
    },
    #[error("{file}: byte offset {offset}: {problem}; {hint}", hint = problem.hint())]
    Corrupt {
        file: String,
        offset: u64,
        problem: Problem,
    },
    #[error(
        "{file}: byte offset {offset}: link type {link_type} ({name}); a pcap port carries only \
         Ethernet frames (link type 1): capture on an Ethernet interface, or convert with \
         `editcap -T ether` if the frames really are Ethernet",
        name = link_type_name(*link_type)
    )]
    LinkType {
        file: String,
        offset: u64,
        link_type: u16,
    },
    #[error("{file}: reading stopped after the error at byte offset {offset}; reopen the file")]
    Stopped { file: String, offset: u64 },
    #[error("{file}: write failed: {source}; check free space and permissions where it is written")]
    Write {
        file: String,
        #[source]
        source: io::Error,
    },
    #[error(
        "{file}: a record of {len} bytes is longer than the snapshot length {limit}; \
         a frame that long is a bug in whatever built it"
    )]
    WriteTooLong {
        file: String,
        len: usize,
        limit: u32,
    },
    #[error(
        "{file}: timestamp {time_ns} ns is beyond what classic pcap can hold (2106-02-07); \
         pass real-time timestamps"
    )]
    WriteTime { file: String, time_ns: u64 },
    #[error("{file}: an earlier write failed, so this writer is closed; see the first error")]
    WriterBroken { file: String },
}

impl PcapError {
    /// The byte offset a reading error points at, if it has one.
    pub fn offset(&self) -> Option<u64> {
        match self {
            PcapError::Read { offset, .. }
            | PcapError::Corrupt { offset, .. }
            | PcapError::LinkType { offset, .. }
            | PcapError::Stopped { offset, .. } => Some(*offset),
            PcapError::Truncated { ends_at, .. } => Some(*ends_at),
            _ => None,
        }
    }
}

/// How a capture file is malformed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Problem {
    /// The first four bytes are neither a pcap magic nor a pcapng section header.
    BadMagic(u32),
    /// A pcapng section header whose byte-order magic is not 0x1a2b3c4d in either order.
    BadByteOrderMagic(u32),
    /// A version this reader does not know (pcap 2.x and pcapng 1.x are read).
    Version { major: u16, minor: u16 },
    /// A record or packet block announcing more captured bytes than [`super::MAX_RECORD`].
    RecordTooLong { len: u32, limit: u32 },
    /// A pcapng block total length that is not a multiple of 4.
    BlockLengthUnaligned(u32),
    /// A pcapng block total length too small for the block's type.
    BlockTooShort { len: u32, min: u32 },
    /// A pcapng block whose trailing length differs from its leading length.
    TrailerMismatch { leading: u32, trailing: u32 },
    /// A packet block whose captured length does not fit in the block.
    CapturedBeyondBlock { captured: u32, block_len: u32 },
    /// A packet block naming an interface the section has not described.
    UnknownInterface { id: u32, known: usize },
    /// More interface descriptions in one section than the reader keeps.
    TooManyInterfaces(usize),
    /// An interface description longer than the reader parses.
    HeaderBlockTooLong { len: u32, limit: u32 },
    /// An option whose length runs past the end of its block.
    OptionOverrun { code: u16, len: u16 },
}

impl Problem {
    /// What to do about it.
    pub fn hint(&self) -> &'static str {
        match self {
            Problem::BadMagic(_) => {
                "this is not a pcap or pcapng capture; convert other formats with \
                 `editcap -F pcap IN OUT`"
            }
            Problem::Version { .. } => "rewrite the capture with `editcap -F pcap IN OUT`",
            _ => {
                "the capture is corrupt from here on; `editcap -r IN OUT 1-N` keeps the records \
                 before it, or capture again"
            }
        }
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Problem::BadMagic(magic) => write!(f, "bad magic number {magic:#010x}"),
            Problem::BadByteOrderMagic(magic) => write!(
                f,
                "section header with byte-order magic {magic:#010x} (expected 0x1a2b3c4d)"
            ),
            Problem::Version { major, minor } => {
                write!(f, "unsupported format version {major}.{minor}")
            }
            Problem::RecordTooLong { len, limit } => write!(
                f,
                "record of {len} captured bytes is longer than the limit of {limit} bytes"
            ),
            Problem::BlockLengthUnaligned(len) => {
                write!(f, "block length {len} is not a multiple of 4")
            }
            Problem::BlockTooShort { len, min } => write!(
                f,
                "block length {len} is shorter than the {min} bytes this block type needs"
            ),
            Problem::TrailerMismatch { leading, trailing } => write!(
                f,
                "block's trailing length {trailing} differs from its leading length {leading}"
            ),
            Problem::CapturedBeyondBlock {
                captured,
                block_len,
            } => write!(
                f,
                "captured length {captured} does not fit in a block of {block_len} bytes"
            ),
            Problem::UnknownInterface { id, known } => write!(
                f,
                "packet on interface {id}, but the section describes only {known} interface(s)"
            ),
            Problem::TooManyInterfaces(limit) => {
                write!(f, "more than {limit} interface descriptions in one section")
            }
            Problem::HeaderBlockTooLong { len, limit } => write!(
                f,
                "interface description of {len} bytes is longer than the limit of {limit}"
            ),
            Problem::OptionOverrun { code, len } => write!(
                f,
                "option {code} of length {len} runs past the end of its block"
            ),
        }
    }
}

/// A name for the common link types, for error messages.
pub fn link_type_name(link_type: u16) -> &'static str {
    match link_type {
        0 => "BSD loopback",
        1 => "Ethernet",
        101 => "raw IP",
        105 => "IEEE 802.11",
        113 => "Linux cooked capture",
        127 => "802.11 radiotap",
        228 => "raw IPv4",
        229 => "raw IPv6",
        276 => "Linux cooked capture v2",
        _ => "not Ethernet",
    }
}
