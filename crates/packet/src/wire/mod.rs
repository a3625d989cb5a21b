//! Zero-copy views of protocol headers, one file per protocol.
//!
//! Every protocol follows the same shape, so that a reader who knows one knows them all:
//!
//! * a private `field` module naming the byte ranges of the header;
//! * `Packet<T: AsRef<[u8]>>`, a view over a borrowed (or owned) buffer. `new_unchecked` wraps
//!   any buffer; `new_checked` validates every length the header announces **once**, after which
//!   no accessor can panic. Getters read fields in network byte order; setters exist where
//!   `T: AsMut<[u8]>` and write in place, which is how stages rewrite packets without copies;
//! * `Repr`, the header as plain values, with `parse` (from a checked view), `buffer_len` (bytes
//!   the header takes) and `emit` (write it into a view). The payload is the caller's business.
//!
//! Unknown protocol numbers are data ([`ethernet::EtherType::Unknown`], [`IpProtocol::Unknown`]),
//! not errors: a forwarder has to carry what it does not understand.

pub mod arp;
pub mod ethernet;
pub mod icmpv4;
pub mod icmpv6;
pub mod ipv4;
pub mod ipv6;
pub mod tcp;
pub mod udp;
pub mod vlan;

pub use ethernet::{EtherType, EthernetAddress};

/// Why a buffer is not a valid header of the protocol asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, thiserror::Error)]
pub enum Error {
    /// The buffer is shorter than the header or than a length the header announces.
    #[error("truncated: the buffer is shorter than the header or a length field says")]
    Truncated,
    /// A field has a value the protocol forbids (a wrong version, a header length below the
    /// minimum, a length field smaller than the header).
    #[error("malformed: a header field has a value the protocol forbids")]
    Malformed,
    /// A checksum does not match the data it covers.
    #[error("checksum mismatch")]
    Checksum,
    /// Valid, but a variant this module does not represent (e.g. ARP for a non-Ethernet link).
    #[error("unsupported: a valid header this module does not represent")]
    Unsupported,
    /// An IPv6 extension header chain longer than [`ipv6::MAX_EXTENSION_HEADERS`].
    #[error("IPv6 extension header chain too long")]
    ChainTooLong,
}

/// Result of the wire views.
pub type Result<T> = core::result::Result<T, Error>;

/// The IPv4 protocol / IPv6 next-header number space.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum IpProtocol {
    /// IPv6 hop-by-hop options (0).
    HopByHop,
    Icmp,
    Igmp,
    Tcp,
    Udp,
    /// IPv6 routing header (43).
    Ipv6Route,
    /// IPv6 fragment header (44).
    Ipv6Frag,
    Icmpv6,
    /// IPv6 "no next header" (59).
    Ipv6NoNext,
    /// IPv6 destination options (60).
    Ipv6Opts,
    Unknown(u8),
}

impl From<u8> for IpProtocol {
    fn from(value: u8) -> Self {
        match value {
            0 => IpProtocol::HopByHop,
            1 => IpProtocol::Icmp,
            2 => IpProtocol::Igmp,
            6 => IpProtocol::Tcp,
            17 => IpProtocol::Udp,
            43 => IpProtocol::Ipv6Route,
            44 => IpProtocol::Ipv6Frag,
            58 => IpProtocol::Icmpv6,
            59 => IpProtocol::Ipv6NoNext,
            60 => IpProtocol::Ipv6Opts,
            other => IpProtocol::Unknown(other),
        }
    }
}

impl From<IpProtocol> for u8 {
    fn from(value: IpProtocol) -> Self {
        match value {
            IpProtocol::HopByHop => 0,
            IpProtocol::Icmp => 1,
            IpProtocol::Igmp => 2,
            IpProtocol::Tcp => 6,
            IpProtocol::Udp => 17,
            IpProtocol::Ipv6Route => 43,
            IpProtocol::Ipv6Frag => 44,
            IpProtocol::Icmpv6 => 58,
            IpProtocol::Ipv6NoNext => 59,
            IpProtocol::Ipv6Opts => 60,
            IpProtocol::Unknown(other) => other,
        }
    }
}

/// Byte ranges of header fields.
pub(crate) type Field = core::ops::Range<usize>;

/// Reads a big-endian `u16` at `at`. Panics when out of bounds: callers use it only on ranges a
/// `check_len` has validated (or on `new_unchecked` views, whose contract says so).
#[inline(always)]
pub(crate) fn read_u16(data: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([data[at], data[at + 1]])
}

#[inline(always)]
pub(crate) fn write_u16(data: &mut [u8], at: usize, value: u16) {
    data[at..at + 2].copy_from_slice(&value.to_be_bytes());
}

#[inline(always)]
pub(crate) fn read_u32(data: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([data[at], data[at + 1], data[at + 2], data[at + 3]])
}

#[inline(always)]
pub(crate) fn write_u32(data: &mut [u8], at: usize, value: u32) {
    data[at..at + 4].copy_from_slice(&value.to_be_bytes());
}

#[cfg(test)]
mod tests {
    use super::IpProtocol;

    #[test]
    fn ip_protocol_numbers_round_trip() {
        for n in 0..=255u8 {
            assert_eq!(u8::from(IpProtocol::from(n)), n);
        }
        assert_eq!(IpProtocol::from(17), IpProtocol::Udp);
        assert_eq!(IpProtocol::from(200), IpProtocol::Unknown(200));
    }
}
