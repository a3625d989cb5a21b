//! IPv6 headers (RFC 8200) and a bounded walk over their extension headers.
//!
//! [`Packet::new_checked`] validates the payload length against the buffer; bytes past it
//! (Ethernet padding) are not payload. Jumbograms (payload length 0 with a hop-by-hop jumbo
//! option) are not supported: a forwarder of Ethernet frames never sees them.
//!
//! [`walk_extension_headers`] skips hop-by-hop, routing, fragment and destination options
//! headers to find the upper-layer protocol. It stops after [`MAX_EXTENSION_HEADERS`] headers so
//! that a hostile chain costs a bounded amount of work ([`Error::ChainTooLong`]).

use std::net::Ipv6Addr;

use super::{Error, Field, IpProtocol, Result, read_u16, read_u32, write_u16, write_u32};

mod field {
    use super::Field;
    pub(super) const VER_TC_FLOW: usize = 0;
    pub(super) const LENGTH: usize = 4;
    pub(super) const NEXT_HEADER: usize = 6;
    pub(super) const HOP_LIMIT: usize = 7;
    pub(super) const SRC_ADDR: Field = 8..24;
    pub(super) const DST_ADDR: Field = 24..40;
}

/// Length of the fixed IPv6 header.
pub const HEADER_LEN: usize = field::DST_ADDR.end;

/// Extension headers [`walk_extension_headers`] skips before giving up. Real traffic carries
/// zero to three; eight leaves room for unusual but legitimate chains.
pub const MAX_EXTENSION_HEADERS: usize = 8;

/// A view of an IPv6 packet.
#[derive(Debug, Clone)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wraps a buffer without checks; accessors panic if the lengths it announces are wrong.
    pub const fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }

    /// Wraps a buffer after checking it holds the fixed header and the announced payload.
    pub fn new_checked(buffer: T) -> Result<Packet<T>> {
        let packet = Self::new_unchecked(buffer);
        packet.check_len()?;
        Ok(packet)
    }

    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN || HEADER_LEN + usize::from(self.payload_len()) > len {
            Err(Error::Truncated)
        } else {
            Ok(())
        }
    }

    pub fn into_inner(self) -> T {
        self.buffer
    }

    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[field::VER_TC_FLOW] >> 4
    }

    pub fn traffic_class(&self) -> u8 {
        (read_u16(self.buffer.as_ref(), field::VER_TC_FLOW) >> 4) as u8
    }

    pub fn flow_label(&self) -> u32 {
        read_u32(self.buffer.as_ref(), field::VER_TC_FLOW) & 0x000f_ffff
    }

    /// Bytes after the fixed header (extension headers included).
    pub fn payload_len(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::LENGTH)
    }

    pub fn next_header(&self) -> IpProtocol {
        IpProtocol::from(self.buffer.as_ref()[field::NEXT_HEADER])
    }

    pub fn hop_limit(&self) -> u8 {
        self.buffer.as_ref()[field::HOP_LIMIT]
    }

    pub fn src_addr(&self) -> Ipv6Addr {
        let mut b = [0u8; 16];
        b.copy_from_slice(&self.buffer.as_ref()[field::SRC_ADDR]);
        Ipv6Addr::from(b)
    }

    pub fn dst_addr(&self) -> Ipv6Addr {
        let mut b = [0u8; 16];
        b.copy_from_slice(&self.buffer.as_ref()[field::DST_ADDR]);
        Ipv6Addr::from(b)
    }

    /// The payload (extension headers and upper layer), up to the payload length.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..HEADER_LEN + usize::from(self.payload_len())]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    pub fn set_version(&mut self, version: u8) {
        let b = &mut self.buffer.as_mut()[field::VER_TC_FLOW];
        *b = (*b & 0x0f) | (version << 4);
    }

    pub fn set_traffic_class(&mut self, class: u8) {
        let raw = read_u16(self.buffer.as_ref(), field::VER_TC_FLOW);
        let raw = (raw & 0xf00f) | (u16::from(class) << 4);
        write_u16(self.buffer.as_mut(), field::VER_TC_FLOW, raw);
    }

    /// Sets the 20-bit flow label (higher bits are ignored).
    pub fn set_flow_label(&mut self, label: u32) {
        let raw = read_u32(self.buffer.as_ref(), field::VER_TC_FLOW);
        let raw = (raw & 0xfff0_0000) | (label & 0x000f_ffff);
        write_u32(self.buffer.as_mut(), field::VER_TC_FLOW, raw);
    }

    pub fn set_payload_len(&mut self, len: u16) {
        write_u16(self.buffer.as_mut(), field::LENGTH, len);
    }

    pub fn set_next_header(&mut self, next_header: IpProtocol) {
        self.buffer.as_mut()[field::NEXT_HEADER] = next_header.into();
    }

    pub fn set_hop_limit(&mut self, hop_limit: u8) {
        self.buffer.as_mut()[field::HOP_LIMIT] = hop_limit;
    }

    pub fn set_src_addr(&mut self, addr: Ipv6Addr) {
        self.buffer.as_mut()[field::SRC_ADDR].copy_from_slice(&addr.octets());
    }

    pub fn set_dst_addr(&mut self, addr: Ipv6Addr) {
        self.buffer.as_mut()[field::DST_ADDR].copy_from_slice(&addr.octets());
    }

    pub fn payload_mut(&mut self) -> &mut [u8] {
        let end = HEADER_LEN + usize::from(self.payload_len());
        &mut self.buffer.as_mut()[HEADER_LEN..end]
    }
}

/// The fixed IPv6 header as values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Repr {
    pub src_addr: Ipv6Addr,
    pub dst_addr: Ipv6Addr,
    /// The header that follows: an extension header or the upper layer.
    pub next_header: IpProtocol,
    pub payload_len: u16,
    pub hop_limit: u8,
    pub traffic_class: u8,
    /// 20 bits.
    pub flow_label: u32,
}

impl Repr {
    /// Values of a checked packet; [`Error::Malformed`] for a version other than 6.
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<Repr> {
        packet.check_len()?;
        if packet.version() != 6 {
            return Err(Error::Malformed);
        }
        Ok(Repr {
            src_addr: packet.src_addr(),
            dst_addr: packet.dst_addr(),
            next_header: packet.next_header(),
            payload_len: packet.payload_len(),
            hop_limit: packet.hop_limit(),
            traffic_class: packet.traffic_class(),
            flow_label: packet.flow_label(),
        })
    }

    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the fixed header; the buffer must hold at least [`HEADER_LEN`] bytes.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        packet.set_version(6);
        packet.set_traffic_class(self.traffic_class);
        packet.set_flow_label(self.flow_label);
        packet.set_payload_len(self.payload_len);
        packet.set_next_header(self.next_header);
        packet.set_hop_limit(self.hop_limit);
        packet.set_src_addr(self.src_addr);
        packet.set_dst_addr(self.dst_addr);
    }
}

/// Whether `protocol` is an extension header [`walk_extension_headers`] skips.
pub fn is_extension_header(protocol: IpProtocol) -> bool {
    matches!(
        protocol,
        IpProtocol::HopByHop | IpProtocol::Ipv6Route | IpProtocol::Ipv6Frag | IpProtocol::Ipv6Opts
    )
}

/// A view of a hop-by-hop, routing or destination options header: next header, length in
/// 8-byte units not counting the first 8, and the options/routing data.
#[derive(Debug, Clone)]
pub struct ExtHeader<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> ExtHeader<T> {
    pub const fn new_unchecked(buffer: T) -> ExtHeader<T> {
        ExtHeader { buffer }
    }

    /// Wraps a buffer after checking it holds the whole header its length field announces.
    pub fn new_checked(buffer: T) -> Result<ExtHeader<T>> {
        let header = Self::new_unchecked(buffer);
        let len = header.buffer.as_ref().len();
        if len < 8 || header.header_len() > len {
            return Err(Error::Truncated);
        }
        Ok(header)
    }

    pub fn next_header(&self) -> IpProtocol {
        IpProtocol::from(self.buffer.as_ref()[0])
    }

    /// Length of the whole header in bytes.
    pub fn header_len(&self) -> usize {
        (usize::from(self.buffer.as_ref()[1]) + 1) * 8
    }

    /// The option (or routing) bytes after next header and length.
    pub fn data(&self) -> &[u8] {
        &self.buffer.as_ref()[2..self.header_len()]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> ExtHeader<T> {
    pub fn set_next_header(&mut self, next_header: IpProtocol) {
        self.buffer.as_mut()[0] = next_header.into();
    }

    /// Sets the length field from a length in bytes (a multiple of 8, 8..=2048).
    pub fn set_header_len(&mut self, bytes: usize) {
        self.buffer.as_mut()[1] = (bytes / 8).saturating_sub(1) as u8;
    }

    pub fn data_mut(&mut self) -> &mut [u8] {
        let end = self.header_len();
        &mut self.buffer.as_mut()[2..end]
    }
}

/// A hop-by-hop or destination options header as values: its length and the next header. The
/// options are emitted as one PadN option (RFC 8200 §4.2), which every node skips.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct OptionsRepr {
    pub next_header: IpProtocol,
    /// Length of the whole header in bytes: a multiple of 8, 8..=2048.
    pub header_len: usize,
}

impl OptionsRepr {
    pub fn parse<T: AsRef<[u8]>>(header: &ExtHeader<T>) -> Result<OptionsRepr> {
        let len = header.buffer.as_ref().len();
        if len < 8 || header.header_len() > len {
            return Err(Error::Truncated);
        }
        Ok(OptionsRepr {
            next_header: header.next_header(),
            header_len: header.header_len(),
        })
    }

    pub const fn buffer_len(&self) -> usize {
        self.header_len
    }

    /// Writes the header; the buffer must hold [`OptionsRepr::buffer_len`] bytes.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, header: &mut ExtHeader<T>) {
        header.set_next_header(self.next_header);
        header.set_header_len(self.header_len);
        let data = header.data_mut();
        // PadN: option type 1, then the number of zero bytes that follow.
        data.fill(0);
        data[0] = 1;
        data[1] = (data.len() - 2) as u8;
    }
}

/// A view of an IPv6 fragment header (8 bytes).
#[derive(Debug, Clone)]
pub struct FragmentHeader<T: AsRef<[u8]>> {
    buffer: T,
}

/// Length of a fragment header.
pub const FRAGMENT_HEADER_LEN: usize = 8;

impl<T: AsRef<[u8]>> FragmentHeader<T> {
    pub const fn new_unchecked(buffer: T) -> FragmentHeader<T> {
        FragmentHeader { buffer }
    }

    pub fn new_checked(buffer: T) -> Result<FragmentHeader<T>> {
        if buffer.as_ref().len() < FRAGMENT_HEADER_LEN {
            return Err(Error::Truncated);
        }
        Ok(Self::new_unchecked(buffer))
    }

    pub fn next_header(&self) -> IpProtocol {
        IpProtocol::from(self.buffer.as_ref()[0])
    }

    /// Fragment offset in bytes.
    pub fn frag_offset(&self) -> u16 {
        read_u16(self.buffer.as_ref(), 2) & 0xfff8
    }

    pub fn more_frags(&self) -> bool {
        read_u16(self.buffer.as_ref(), 2) & 0x0001 != 0
    }

    pub fn ident(&self) -> u32 {
        read_u32(self.buffer.as_ref(), 4)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> FragmentHeader<T> {
    pub fn set_next_header(&mut self, next_header: IpProtocol) {
        let b = self.buffer.as_mut();
        b[0] = next_header.into();
        b[1] = 0;
    }

    /// Sets the offset (bytes, a multiple of 8) and the M flag.
    pub fn set_frag_offset_and_more(&mut self, offset: u16, more: bool) {
        write_u16(self.buffer.as_mut(), 2, (offset & 0xfff8) | u16::from(more));
    }

    pub fn set_ident(&mut self, ident: u32) {
        write_u32(self.buffer.as_mut(), 4, ident);
    }
}

/// A fragment header as values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FragmentRepr {
    pub next_header: IpProtocol,
    /// Offset in bytes, a multiple of 8.
    pub frag_offset: u16,
    pub more_frags: bool,
    pub ident: u32,
}

impl FragmentRepr {
    pub fn parse<T: AsRef<[u8]>>(header: &FragmentHeader<T>) -> Result<FragmentRepr> {
        if header.buffer.as_ref().len() < FRAGMENT_HEADER_LEN {
            return Err(Error::Truncated);
        }
        Ok(FragmentRepr {
            next_header: header.next_header(),
            frag_offset: header.frag_offset(),
            more_frags: header.more_frags(),
            ident: header.ident(),
        })
    }

    pub const fn buffer_len(&self) -> usize {
        FRAGMENT_HEADER_LEN
    }

    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, header: &mut FragmentHeader<T>) {
        header.set_next_header(self.next_header);
        header.set_frag_offset_and_more(self.frag_offset, self.more_frags);
        header.set_ident(self.ident);
    }
}

/// Where the upper layer starts, found by [`walk_extension_headers`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UpperLayer {
    /// The upper-layer protocol (not an extension header; may be `Ipv6NoNext` or unknown).
    pub protocol: IpProtocol,
    /// Offset of the upper-layer header from the start of the IPv6 payload.
    pub offset: usize,
    /// Extension headers skipped.
    pub extension_headers: u8,
    /// Fragment offset in bytes and the M flag, when a fragment header was seen.
    pub fragment: Option<(u16, bool)>,
}

/// Skips the extension headers at the start of an IPv6 `payload` whose first header is `first`.
/// [`Error::Truncated`] when a header overruns the payload, [`Error::ChainTooLong`] after
/// [`MAX_EXTENSION_HEADERS`] headers. Never reads outside `payload`.
pub fn walk_extension_headers(payload: &[u8], first: IpProtocol) -> Result<UpperLayer> {
    let mut protocol = first;
    let mut offset = 0usize;
    let mut fragment = None;
    let mut count = 0u8;
    while is_extension_header(protocol) {
        if usize::from(count) == MAX_EXTENSION_HEADERS {
            return Err(Error::ChainTooLong);
        }
        let rest = payload.get(offset..).ok_or(Error::Truncated)?;
        let (next, len) = match protocol {
            IpProtocol::Ipv6Frag => {
                let header = FragmentHeader::new_checked(rest)?;
                fragment = Some((header.frag_offset(), header.more_frags()));
                if header.frag_offset() != 0 {
                    // A later fragment: only data follows (RFC 8200 4.5), whatever its Next
                    // Header names (the first header of the fragmentable part, which is in the
                    // first fragment). Walking on would read data as headers.
                    return Ok(UpperLayer {
                        protocol: header.next_header(),
                        offset: offset + FRAGMENT_HEADER_LEN,
                        extension_headers: count + 1,
                        fragment,
                    });
                }
                (header.next_header(), FRAGMENT_HEADER_LEN)
            }
            _ => {
                let header = ExtHeader::new_checked(rest)?;
                (header.next_header(), header.header_len())
            }
        };
        protocol = next;
        offset += len;
        count += 1;
    }
    Ok(UpperLayer {
        protocol,
        offset,
        extension_headers: count,
        fragment,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_later_fragment_ends_the_walk_at_its_fragment_header() {
        // Fragment header (next: Destination Options, offset 8, more), then data that would
        // read as a header claiming 255 more 8-byte units.
        let mut payload = vec![60, 0, 0x00, 0x41, 0, 0, 0, 1];
        payload.extend_from_slice(&[17, 0xff, 1, 2, 3, 4, 5, 6]);
        let upper = walk_extension_headers(&payload, IpProtocol::Ipv6Frag).unwrap();
        assert_eq!(upper.protocol, IpProtocol::from(60));
        assert_eq!(upper.offset, 8);
        assert_eq!(upper.fragment, Some((64, true)));
        // The first fragment's chain goes on past it.
        payload[3] = 0x01;
        payload[9] = 0;
        let upper = walk_extension_headers(&payload, IpProtocol::Ipv6Frag).unwrap();
        assert_eq!(upper.protocol, IpProtocol::Udp);
        assert_eq!(upper.offset, 16);
    }

    /// fe80::1 -> ff02::1, next header UDP, 8-byte payload, hop limit 255, class 0xb8,
    /// flow label 0x12345.
    const HEADER: [u8; 40] = [
        0x6b, 0x81, 0x23, 0x45, 0x00, 0x08, 0x11, 0xff, //
        0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01, //
        0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01,
    ];

    fn repr() -> Repr {
        Repr {
            src_addr: "fe80::1".parse().unwrap(),
            dst_addr: "ff02::1".parse().unwrap(),
            next_header: IpProtocol::Udp,
            payload_len: 8,
            hop_limit: 255,
            traffic_class: 0xb8,
            flow_label: 0x12345,
        }
    }

    #[test]
    fn decodes_fixture() {
        let mut bytes = HEADER.to_vec();
        bytes.extend_from_slice(&[1, 2, 3, 4, 5, 6, 7, 8, 0xee, 0xee]);
        let packet = Packet::new_checked(&bytes[..]).unwrap();
        assert_eq!(packet.version(), 6);
        assert_eq!(packet.payload(), &[1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(Repr::parse(&packet).unwrap(), repr());
    }

    #[test]
    fn emits_fixture() {
        let mut bytes = [0xffu8; 40];
        repr().emit(&mut Packet::new_unchecked(&mut bytes[..]));
        assert_eq!(bytes, HEADER);
    }

    #[test]
    fn payload_beyond_buffer_is_truncated() {
        let mut bytes = HEADER.to_vec();
        bytes.extend_from_slice(&[0; 7]);
        assert_eq!(
            Packet::new_checked(&bytes[..]).unwrap_err(),
            Error::Truncated
        );
    }

    #[test]
    fn walks_hop_by_hop_fragment_and_destination_options() {
        let payload = [
            // hop-by-hop, next = fragment, 8 bytes, PadN 4
            44, 0, 1, 4, 0, 0, 0, 0, //
            // fragment, next = destination options, offset 1480, M = 1, ident 7
            60, 0, 0x05, 0xc9, 0, 0, 0, 7, //
            // destination options, next = TCP, 16 bytes
            6, 1, 1, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, //
            // TCP would start here
            0xab,
        ];
        // A later fragment (offset 1480): the walk ends at the Fragment header, whose Next
        // Header names the fragmentable part's first header; what follows is data.
        let upper = walk_extension_headers(&payload, IpProtocol::HopByHop).unwrap();
        assert_eq!(upper.protocol, IpProtocol::Ipv6Opts);
        assert_eq!(upper.offset, 16);
        assert_eq!(upper.extension_headers, 2);
        assert_eq!(upper.fragment, Some((1480, true)));
        let fragment = FragmentRepr::parse(&FragmentHeader::new_checked(&payload[8..]).unwrap());
        assert_eq!(fragment.unwrap().ident, 7);
        assert_eq!(
            walk_extension_headers(&payload[..15], IpProtocol::HopByHop).unwrap_err(),
            Error::Truncated
        );
        // The first fragment (offset 0): the walk goes on through the options to TCP.
        let mut first = payload;
        first[10] = 0;
        first[11] = 1;
        let upper = walk_extension_headers(&first, IpProtocol::HopByHop).unwrap();
        assert_eq!(upper.protocol, IpProtocol::Tcp);
        assert_eq!(upper.offset, 32);
        assert_eq!(upper.extension_headers, 3);
        assert_eq!(upper.fragment, Some((0, true)));
        assert_eq!(
            walk_extension_headers(&first[..31], IpProtocol::HopByHop).unwrap_err(),
            Error::Truncated
        );
    }

    #[test]
    fn overlong_chain_is_refused() {
        let mut payload = Vec::new();
        for _ in 0..MAX_EXTENSION_HEADERS {
            payload.extend_from_slice(&[60, 0, 1, 4, 0, 0, 0, 0]);
        }
        payload.extend_from_slice(&[17, 0, 1, 4, 0, 0, 0, 0]);
        assert_eq!(
            walk_extension_headers(&payload, IpProtocol::Ipv6Opts).unwrap_err(),
            Error::ChainTooLong
        );
        // One fewer is fine.
        let upper = walk_extension_headers(&payload[8..], IpProtocol::Ipv6Opts).unwrap();
        assert_eq!(upper.protocol, IpProtocol::Udp);
        assert_eq!(usize::from(upper.extension_headers), MAX_EXTENSION_HEADERS);
    }

    #[test]
    fn options_repr_round_trips() {
        let repr = OptionsRepr {
            next_header: IpProtocol::Udp,
            header_len: 24,
        };
        let mut bytes = [0xffu8; 24];
        repr.emit(&mut ExtHeader::new_unchecked(&mut bytes[..]));
        assert_eq!(&bytes[..4], &[17, 2, 1, 20]);
        let header = ExtHeader::new_checked(&bytes[..]).unwrap();
        assert_eq!(OptionsRepr::parse(&header).unwrap(), repr);
    }
}
