//! Capture files: a streaming reader (pcap and pcapng), a nanosecond pcap writer, and
//! [`PcapPort`], a port that receives from one capture and transmits into another.
//!
//! The formats are small enough to write here rather than pull in a dependency: classic pcap is a
//! 24-byte file header and a 16-byte header per record; pcapng (draft-ietf-opsawg-pcapng) is a
//! sequence of self-delimiting blocks. Both are read through a `BufReader` one record at a time
//! into a buffer the caller owns, so a multi-gigabyte capture costs no more memory than one frame.
//!
//! A capture file is untrusted input. Every length is checked against the block that holds it and
//! against [`MAX_RECORD`] before it is used; nothing is allocated from a length read from the
//! file except the one bounded scratch buffer an interface description is parsed from. Every
//! problem is a [`PcapError`] naming the file, the byte offset and what to do about it.

#![deny(unsafe_code)]

mod error;
mod port;
mod reader;
mod writer;

pub use error::{PcapError, Problem, link_type_name};
pub(crate) use port::now_ns;
pub use port::{PCAP_PORT_MTU, PcapPort};
pub use reader::{FileFormat, PcapReader, Record};
pub use writer::PcapWriter;

/// The largest record (captured bytes) the reader accepts and the snapshot length the writer
/// declares: 256 KiB, the largest snapshot length libpcap and Wireshark use. A record announcing
/// more is treated as corruption, so a hostile length can never make the reader skip or buffer
/// gigabytes.
pub const MAX_RECORD: u32 = 262_144;

/// Link type of Ethernet frames (LINKTYPE_ETHERNET), the only one a [`PcapPort`] carries.
pub const LINKTYPE_ETHERNET: u16 = 1;
