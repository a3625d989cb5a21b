//! IPv4 headers (RFC 791), options included.
//!
//! [`Packet::new_checked`] validates the header length (IHL) and the total length against the
//! buffer, so [`Packet::options`] and [`Packet::payload`] can slice without panicking. Bytes past
//! the total length (Ethernet padding of short frames) are not part of the payload. The header
//! checksum is not checked by the view (a forwarder that does not route never needs it):
//! [`Packet::verify_checksum`] and [`Repr::parse`] do.

use std::net::Ipv4Addr;

use super::{Error, Field, IpProtocol, Result, read_u16, write_u16};
use crate::checksum;

mod field {
    use super::Field;
    pub(super) const VER_IHL: usize = 0;
    pub(super) const DSCP_ECN: usize = 1;
    pub(super) const LENGTH: usize = 2;
    pub(super) const IDENT: usize = 4;
    pub(super) const FLG_OFF: usize = 6;
    pub(super) const TTL: usize = 8;
    pub(super) const PROTOCOL: usize = 9;
    pub(super) const CHECKSUM: usize = 10;
    pub(super) const SRC_ADDR: Field = 12..16;
    pub(super) const DST_ADDR: Field = 16..20;
}

/// Length of an IPv4 header without options.
pub const HEADER_LEN: usize = field::DST_ADDR.end;
/// Length of the longest IPv4 header (IHL 15).
pub const MAX_HEADER_LEN: usize = 60;

const FLAG_DONT_FRAG: u16 = 0x4000;
const FLAG_MORE_FRAGS: u16 = 0x2000;
const OFFSET_MASK: u16 = 0x1fff;

/// A view of an IPv4 packet.
#[derive(Debug, Clone)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wraps a buffer without checks; accessors panic if the lengths it announces are wrong.
    pub const fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }

    /// Wraps a buffer after checking the header length and total length against it.
    pub fn new_checked(buffer: T) -> Result<Packet<T>> {
        let packet = Self::new_unchecked(buffer);
        packet.check_len()?;
        Ok(packet)
    }

    /// [`Error::Truncated`] when the buffer is shorter than 20 bytes, the IHL or the total
    /// length; [`Error::Malformed`] when the IHL is below 5 or the total length below the IHL.
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN {
            return Err(Error::Truncated);
        }
        let header_len = usize::from(self.header_len());
        if header_len < HEADER_LEN {
            return Err(Error::Malformed);
        }
        if header_len > len {
            return Err(Error::Truncated);
        }
        let total_len = usize::from(self.total_len());
        if total_len < header_len {
            return Err(Error::Malformed);
        }
        if total_len > len {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    pub fn into_inner(self) -> T {
        self.buffer
    }

    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[field::VER_IHL] >> 4
    }

    /// Header length in bytes (IHL * 4).
    pub fn header_len(&self) -> u8 {
        (self.buffer.as_ref()[field::VER_IHL] & 0x0f) * 4
    }

    pub fn dscp(&self) -> u8 {
        self.buffer.as_ref()[field::DSCP_ECN] >> 2
    }

    pub fn ecn(&self) -> u8 {
        self.buffer.as_ref()[field::DSCP_ECN] & 0x03
    }

    /// Header plus payload, in bytes.
    pub fn total_len(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::LENGTH)
    }

    pub fn ident(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::IDENT)
    }

    pub fn dont_frag(&self) -> bool {
        read_u16(self.buffer.as_ref(), field::FLG_OFF) & FLAG_DONT_FRAG != 0
    }

    pub fn more_frags(&self) -> bool {
        read_u16(self.buffer.as_ref(), field::FLG_OFF) & FLAG_MORE_FRAGS != 0
    }

    /// Fragment offset in bytes (the field counts 8-byte units).
    pub fn frag_offset(&self) -> u16 {
        (read_u16(self.buffer.as_ref(), field::FLG_OFF) & OFFSET_MASK) << 3
    }

    /// Whether this is a fragment (more follow, or not the first).
    pub fn is_fragment(&self) -> bool {
        read_u16(self.buffer.as_ref(), field::FLG_OFF) & (FLAG_MORE_FRAGS | OFFSET_MASK) != 0
    }

    pub fn ttl(&self) -> u8 {
        self.buffer.as_ref()[field::TTL]
    }

    pub fn protocol(&self) -> IpProtocol {
        IpProtocol::from(self.buffer.as_ref()[field::PROTOCOL])
    }

    pub fn checksum(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::CHECKSUM)
    }

    pub fn src_addr(&self) -> Ipv4Addr {
        let b = &self.buffer.as_ref()[field::SRC_ADDR];
        Ipv4Addr::new(b[0], b[1], b[2], b[3])
    }

    pub fn dst_addr(&self) -> Ipv4Addr {
        let b = &self.buffer.as_ref()[field::DST_ADDR];
        Ipv4Addr::new(b[0], b[1], b[2], b[3])
    }

    /// Whether the header checksum is right.
    pub fn verify_checksum(&self) -> bool {
        checksum::is_valid(&self.buffer.as_ref()[..usize::from(self.header_len())])
    }

    /// The options bytes (empty when IHL is 5).
    pub fn options(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..usize::from(self.header_len())]
    }

    /// The payload, up to the total length (trailing padding excluded).
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[usize::from(self.header_len())..usize::from(self.total_len())]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    pub fn set_version(&mut self, version: u8) {
        let b = &mut self.buffer.as_mut()[field::VER_IHL];
        *b = (*b & 0x0f) | (version << 4);
    }

    /// Sets the IHL from a length in bytes (a multiple of 4, 20..=60).
    pub fn set_header_len(&mut self, len: u8) {
        let b = &mut self.buffer.as_mut()[field::VER_IHL];
        *b = (*b & 0xf0) | ((len / 4) & 0x0f);
    }

    pub fn set_dscp(&mut self, dscp: u8) {
        let b = &mut self.buffer.as_mut()[field::DSCP_ECN];
        *b = (*b & 0x03) | (dscp << 2);
    }

    pub fn set_ecn(&mut self, ecn: u8) {
        let b = &mut self.buffer.as_mut()[field::DSCP_ECN];
        *b = (*b & !0x03) | (ecn & 0x03);
    }

    pub fn set_total_len(&mut self, len: u16) {
        write_u16(self.buffer.as_mut(), field::LENGTH, len);
    }

    pub fn set_ident(&mut self, ident: u16) {
        write_u16(self.buffer.as_mut(), field::IDENT, ident);
    }

    fn set_flag_bits(&mut self, mask: u16, value: u16) {
        let raw = read_u16(self.buffer.as_ref(), field::FLG_OFF);
        write_u16(
            self.buffer.as_mut(),
            field::FLG_OFF,
            (raw & !mask) | (value & mask),
        );
    }

    pub fn set_dont_frag(&mut self, value: bool) {
        self.set_flag_bits(FLAG_DONT_FRAG, if value { FLAG_DONT_FRAG } else { 0 });
    }

    pub fn set_more_frags(&mut self, value: bool) {
        self.set_flag_bits(FLAG_MORE_FRAGS, if value { FLAG_MORE_FRAGS } else { 0 });
    }

    /// Sets the fragment offset from bytes (a multiple of 8).
    pub fn set_frag_offset(&mut self, bytes: u16) {
        self.set_flag_bits(OFFSET_MASK, bytes >> 3);
    }

    pub fn set_ttl(&mut self, ttl: u8) {
        self.buffer.as_mut()[field::TTL] = ttl;
    }

    pub fn set_protocol(&mut self, protocol: IpProtocol) {
        self.buffer.as_mut()[field::PROTOCOL] = protocol.into();
    }

    pub fn set_checksum(&mut self, value: u16) {
        write_u16(self.buffer.as_mut(), field::CHECKSUM, value);
    }

    pub fn set_src_addr(&mut self, addr: Ipv4Addr) {
        self.buffer.as_mut()[field::SRC_ADDR].copy_from_slice(&addr.octets());
    }

    pub fn set_dst_addr(&mut self, addr: Ipv4Addr) {
        self.buffer.as_mut()[field::DST_ADDR].copy_from_slice(&addr.octets());
    }

    /// Computes the header checksum over the header (options included) and writes it.
    pub fn fill_checksum(&mut self) {
        self.set_checksum(0);
        let header_len = usize::from(self.header_len());
        let sum = checksum::internet_checksum(&self.buffer.as_ref()[..header_len]);
        self.set_checksum(sum);
    }

    /// Decrements the TTL and updates the checksum incrementally (RFC 1624); returns the new
    /// TTL. A TTL of 0 is left alone (the caller drops such packets before forwarding).
    pub fn decrement_ttl(&mut self) -> u8 {
        let ttl = self.ttl();
        if ttl == 0 {
            return 0;
        }
        // TTL shares its 16-bit word with the protocol number.
        let protocol = self.buffer.as_ref()[field::PROTOCOL];
        let old = u16::from_be_bytes([ttl, protocol]);
        let new = u16::from_be_bytes([ttl - 1, protocol]);
        let sum = checksum::update_word(self.checksum(), old, new);
        self.set_ttl(ttl - 1);
        self.set_checksum(sum);
        ttl - 1
    }

    /// Rewrites the source address and updates the checksum incrementally (RFC 1624).
    pub fn rewrite_src_addr(&mut self, addr: Ipv4Addr) {
        let sum = checksum::update_u32(self.checksum(), self.src_addr().into(), addr.into());
        self.set_src_addr(addr);
        self.set_checksum(sum);
    }

    /// Rewrites the destination address and updates the checksum incrementally (RFC 1624).
    pub fn rewrite_dst_addr(&mut self, addr: Ipv4Addr) {
        let sum = checksum::update_u32(self.checksum(), self.dst_addr().into(), addr.into());
        self.set_dst_addr(addr);
        self.set_checksum(sum);
    }

    pub fn options_mut(&mut self) -> &mut [u8] {
        let header_len = usize::from(self.header_len());
        &mut self.buffer.as_mut()[HEADER_LEN..header_len]
    }

    pub fn payload_mut(&mut self) -> &mut [u8] {
        let range = usize::from(self.header_len())..usize::from(self.total_len());
        &mut self.buffer.as_mut()[range]
    }
}

/// An IPv4 header as values. Options are skipped by [`Repr::parse`] and never emitted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Repr {
    pub src_addr: Ipv4Addr,
    pub dst_addr: Ipv4Addr,
    pub protocol: IpProtocol,
    /// Bytes after the header (total length minus header length).
    pub payload_len: u16,
    pub ttl: u8,
    pub dscp: u8,
    pub ecn: u8,
    pub ident: u16,
    pub dont_frag: bool,
    pub more_frags: bool,
    /// Fragment offset in bytes (a multiple of 8).
    pub frag_offset: u16,
}

impl Repr {
    /// Values of a checked packet: [`Error::Malformed`] for a version other than 4,
    /// [`Error::Checksum`] for a wrong header checksum.
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<Repr> {
        packet.check_len()?;
        if packet.version() != 4 {
            return Err(Error::Malformed);
        }
        if !packet.verify_checksum() {
            return Err(Error::Checksum);
        }
        Ok(Repr {
            src_addr: packet.src_addr(),
            dst_addr: packet.dst_addr(),
            protocol: packet.protocol(),
            payload_len: packet.total_len() - u16::from(packet.header_len()),
            ttl: packet.ttl(),
            dscp: packet.dscp(),
            ecn: packet.ecn(),
            ident: packet.ident(),
            dont_frag: packet.dont_frag(),
            more_frags: packet.more_frags(),
            frag_offset: packet.frag_offset(),
        })
    }

    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes a 20-byte header with its checksum; the buffer must hold at least
    /// [`HEADER_LEN`] bytes. `payload_len` must leave the total length within 65535.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        packet.set_version(4);
        packet.set_header_len(HEADER_LEN as u8);
        packet.set_dscp(self.dscp);
        packet.set_ecn(self.ecn);
        packet.set_total_len((HEADER_LEN as u16).saturating_add(self.payload_len));
        packet.set_ident(self.ident);
        packet.set_flag_bits(0xffff, 0);
        packet.set_dont_frag(self.dont_frag);
        packet.set_more_frags(self.more_frags);
        packet.set_frag_offset(self.frag_offset);
        packet.set_ttl(self.ttl);
        packet.set_protocol(self.protocol);
        packet.set_src_addr(self.src_addr);
        packet.set_dst_addr(self.dst_addr);
        packet.fill_checksum();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 115-byte UDP datagram's IPv4 header, 192.168.0.1 -> 192.168.0.199, DF, TTL 64,
    /// checksum b861 (the worked example often used for the IPv4 checksum).
    const HEADER: [u8; 20] = [
        0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0xb8, 0x61, 0xc0, 0xa8, 0x00,
        0x01, 0xc0, 0xa8, 0x00, 0xc7,
    ];

    fn packet_bytes() -> Vec<u8> {
        let mut bytes = HEADER.to_vec();
        bytes.resize(0x73, 0x5a);
        bytes
    }

    fn repr() -> Repr {
        Repr {
            src_addr: Ipv4Addr::new(192, 168, 0, 1),
            dst_addr: Ipv4Addr::new(192, 168, 0, 199),
            protocol: IpProtocol::Udp,
            payload_len: 0x73 - 20,
            ttl: 64,
            dscp: 0,
            ecn: 0,
            ident: 0,
            dont_frag: true,
            more_frags: false,
            frag_offset: 0,
        }
    }

    #[test]
    fn decodes_fixture() {
        let bytes = packet_bytes();
        let packet = Packet::new_checked(&bytes[..]).unwrap();
        assert_eq!(packet.version(), 4);
        assert_eq!(packet.header_len(), 20);
        assert_eq!(packet.total_len(), 0x73);
        assert!(packet.dont_frag() && !packet.more_frags() && !packet.is_fragment());
        assert_eq!(packet.checksum(), 0xb861);
        assert!(packet.verify_checksum());
        assert_eq!(packet.payload().len(), 0x73 - 20);
        assert!(packet.options().is_empty());
        assert_eq!(Repr::parse(&packet).unwrap(), repr());
    }

    #[test]
    fn emits_fixture() {
        let mut bytes = [0xffu8; 20];
        repr().emit(&mut Packet::new_unchecked(&mut bytes[..]));
        assert_eq!(bytes, HEADER);
    }

    #[test]
    fn options_and_trailing_padding() {
        // IHL 6 (one 4-byte option: NOP NOP NOP EOL), total length 28, 4 bytes of padding.
        let mut bytes = [0u8; 32];
        let mut packet = Packet::new_unchecked(&mut bytes[..]);
        packet.set_version(4);
        packet.set_header_len(24);
        packet.set_total_len(28);
        packet.options_mut().copy_from_slice(&[1, 1, 1, 0]);
        packet.payload_mut().copy_from_slice(&[9, 8, 7, 6]);
        packet.fill_checksum();
        let packet = Packet::new_checked(&bytes[..]).unwrap();
        assert_eq!(packet.options(), &[1, 1, 1, 0]);
        assert_eq!(packet.payload(), &[9, 8, 7, 6]);
        assert!(packet.verify_checksum());
        assert_eq!(Repr::parse(&packet).unwrap().payload_len, 4);
    }

    #[test]
    fn length_errors() {
        let bytes = packet_bytes();
        assert_eq!(
            Packet::new_checked(&bytes[..19]).unwrap_err(),
            Error::Truncated
        );
        // Total length beyond the buffer.
        assert_eq!(
            Packet::new_checked(&bytes[..0x72]).unwrap_err(),
            Error::Truncated
        );
        let mut bad = bytes.clone();
        bad[0] = 0x44; // IHL 4
        assert_eq!(Packet::new_checked(&bad[..]).unwrap_err(), Error::Malformed);
        let mut bad = bytes.clone();
        bad[2] = 0;
        bad[3] = 19; // total length below the header
        assert_eq!(Packet::new_checked(&bad[..]).unwrap_err(), Error::Malformed);
        let mut bad = bytes;
        bad[0] = 0x65; // version 6
        let packet = Packet::new_checked(&bad[..]).unwrap();
        assert_eq!(Repr::parse(&packet).unwrap_err(), Error::Malformed);
    }

    #[test]
    fn decrement_ttl_keeps_checksum_valid() {
        let mut bytes = packet_bytes();
        let mut packet = Packet::new_checked(&mut bytes[..]).unwrap();
        for expected in (0..64).rev() {
            assert_eq!(packet.decrement_ttl(), expected);
            assert!(packet.verify_checksum());
        }
        assert_eq!(packet.decrement_ttl(), 0);
        packet.rewrite_dst_addr(Ipv4Addr::new(10, 1, 2, 3));
        packet.rewrite_src_addr(Ipv4Addr::new(172, 16, 254, 1));
        assert!(packet.verify_checksum());
        assert_eq!(packet.dst_addr(), Ipv4Addr::new(10, 1, 2, 3));
    }

    #[test]
    fn fragment_fields() {
        let mut bytes = packet_bytes();
        let mut packet = Packet::new_unchecked(&mut bytes[..]);
        packet.set_dont_frag(false);
        packet.set_more_frags(true);
        packet.set_frag_offset(1480);
        assert!(packet.more_frags() && !packet.dont_frag() && packet.is_fragment());
        assert_eq!(packet.frag_offset(), 1480);
    }
}
