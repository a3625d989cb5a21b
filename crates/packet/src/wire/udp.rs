//! UDP datagrams (RFC 768; RFC 8200 §8.1 for the IPv6 checksum rules).
//!
//! [`Packet::new_checked`] validates the length field against the buffer. The checksum covers
//! a pseudo-header from the IP layer, so it is filled and verified with the addresses passed
//! in ([`Packet::fill_checksum_v4`], [`Packet::verify_checksum_v6`], ...), after the caller has
//! written the payload.

use std::net::{Ipv4Addr, Ipv6Addr};

use super::{Error, Result, read_u16, write_u16};
use crate::checksum;

mod field {
    pub(super) const SRC_PORT: usize = 0;
    pub(super) const DST_PORT: usize = 2;
    pub(super) const LENGTH: usize = 4;
    pub(super) const CHECKSUM: usize = 6;
}

/// Length of a UDP header.
pub const HEADER_LEN: usize = 8;

const PROTOCOL: u8 = 17;

/// A view of a UDP datagram.
#[derive(Debug, Clone)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wraps a buffer without checks; accessors panic if the length field is wrong.
    pub const fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }

    pub fn new_checked(buffer: T) -> Result<Packet<T>> {
        let packet = Self::new_unchecked(buffer);
        packet.check_len()?;
        Ok(packet)
    }

    /// [`Error::Truncated`] when the buffer is shorter than the header or the length field,
    /// [`Error::Malformed`] when the length field is below 8.
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN {
            return Err(Error::Truncated);
        }
        let field_len = usize::from(self.len());
        if field_len < HEADER_LEN {
            return Err(Error::Malformed);
        }
        if field_len > len {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    pub fn into_inner(self) -> T {
        self.buffer
    }

    pub fn src_port(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::SRC_PORT)
    }

    pub fn dst_port(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::DST_PORT)
    }

    /// The length field: header plus payload.
    #[allow(clippy::len_without_is_empty)]
    pub fn len(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::LENGTH)
    }

    pub fn checksum(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::CHECKSUM)
    }

    /// The payload, up to the length field.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..usize::from(self.len())]
    }

    fn datagram(&self) -> &[u8] {
        &self.buffer.as_ref()[..usize::from(self.len())]
    }

    /// Whether the checksum is right. Over IPv4 a zero checksum means "not computed" and
    /// passes.
    pub fn verify_checksum_v4(&self, src: Ipv4Addr, dst: Ipv4Addr) -> bool {
        self.checksum() == 0 || checksum::verify_transport_v4(src, dst, PROTOCOL, self.datagram())
    }

    /// Whether the checksum is right. Over IPv6 the checksum is mandatory: zero fails.
    pub fn verify_checksum_v6(&self, src: Ipv6Addr, dst: Ipv6Addr) -> bool {
        self.checksum() != 0 && checksum::verify_transport_v6(src, dst, PROTOCOL, self.datagram())
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    pub fn set_src_port(&mut self, port: u16) {
        write_u16(self.buffer.as_mut(), field::SRC_PORT, port);
    }

    pub fn set_dst_port(&mut self, port: u16) {
        write_u16(self.buffer.as_mut(), field::DST_PORT, port);
    }

    pub fn set_len(&mut self, len: u16) {
        write_u16(self.buffer.as_mut(), field::LENGTH, len);
    }

    pub fn set_checksum(&mut self, value: u16) {
        write_u16(self.buffer.as_mut(), field::CHECKSUM, value);
    }

    /// Computes the checksum over the pseudo-header, header and payload and writes it; a
    /// computed zero is sent as `0xffff` (RFC 768).
    pub fn fill_checksum_v4(&mut self, src: Ipv4Addr, dst: Ipv4Addr) {
        self.set_checksum(0);
        let sum = checksum::transport_v4(src, dst, PROTOCOL, self.datagram());
        self.set_checksum(if sum == 0 { 0xffff } else { sum });
    }

    /// As [`Packet::fill_checksum_v4`], with the IPv6 pseudo-header.
    pub fn fill_checksum_v6(&mut self, src: Ipv6Addr, dst: Ipv6Addr) {
        self.set_checksum(0);
        let sum = checksum::transport_v6(src, dst, PROTOCOL, self.datagram());
        self.set_checksum(if sum == 0 { 0xffff } else { sum });
    }

    pub fn payload_mut(&mut self) -> &mut [u8] {
        let end = usize::from(self.len());
        &mut self.buffer.as_mut()[HEADER_LEN..end]
    }
}

/// A UDP header as values; the payload is the caller's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Repr {
    pub src_port: u16,
    pub dst_port: u16,
    /// Bytes after the header.
    pub payload_len: u16,
}

impl Repr {
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<Repr> {
        packet.check_len()?;
        Ok(Repr {
            src_port: packet.src_port(),
            dst_port: packet.dst_port(),
            payload_len: packet.len() - HEADER_LEN as u16,
        })
    }

    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the header with a zero checksum; fill it once the payload is in place.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        packet.set_src_port(self.src_port);
        packet.set_dst_port(self.dst_port);
        packet.set_len(self.payload_len.saturating_add(HEADER_LEN as u16));
        packet.set_checksum(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SRC: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
    const DST: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);

    /// 10.0.0.1:1234 -> 10.0.0.2:53, payload "hello", checksum worked out by hand:
    /// pseudo 0a00+0001+0a00+0002+0011+000d, header 04d2+0035+000d, data 6865+6c6c+6f00
    /// sums to 0x15d06 -> 0x5d07, complement 0xa2f8.
    const DATAGRAM: [u8; 13] = [
        0x04, 0xd2, 0x00, 0x35, 0x00, 0x0d, 0xa2, 0xf8, b'h', b'e', b'l', b'l', b'o',
    ];

    #[test]
    fn decodes_fixture() {
        let packet = Packet::new_checked(&DATAGRAM[..]).unwrap();
        assert_eq!((packet.src_port(), packet.dst_port()), (1234, 53));
        assert_eq!(packet.len(), 13);
        assert_eq!(packet.payload(), b"hello");
        assert!(packet.verify_checksum_v4(SRC, DST));
        assert!(!packet.verify_checksum_v4(SRC, Ipv4Addr::new(10, 0, 0, 3)));
        assert_eq!(
            Repr::parse(&packet).unwrap(),
            Repr {
                src_port: 1234,
                dst_port: 53,
                payload_len: 5
            }
        );
    }

    #[test]
    fn emits_fixture() {
        let mut bytes = [0u8; 13];
        bytes[8..].copy_from_slice(b"hello");
        let mut packet = Packet::new_unchecked(&mut bytes[..]);
        Repr {
            src_port: 1234,
            dst_port: 53,
            payload_len: 5,
        }
        .emit(&mut packet);
        packet.fill_checksum_v4(SRC, DST);
        assert_eq!(bytes, DATAGRAM);
    }

    #[test]
    fn zero_checksum_rules() {
        let mut bytes = DATAGRAM;
        bytes[6] = 0;
        bytes[7] = 0;
        let packet = Packet::new_checked(&bytes[..]).unwrap();
        assert!(packet.verify_checksum_v4(SRC, DST));
        let v6 = Ipv6Addr::LOCALHOST;
        assert!(!packet.verify_checksum_v6(v6, v6));
        let mut packet = Packet::new_checked(&mut bytes[..]).unwrap();
        packet.fill_checksum_v6(v6, v6);
        assert!(packet.verify_checksum_v6(v6, v6));
    }

    #[test]
    fn length_errors() {
        assert_eq!(
            Packet::new_checked(&DATAGRAM[..7]).unwrap_err(),
            Error::Truncated
        );
        assert_eq!(
            Packet::new_checked(&DATAGRAM[..12]).unwrap_err(),
            Error::Truncated
        );
        let mut bytes = DATAGRAM;
        bytes[5] = 7;
        assert_eq!(
            Packet::new_checked(&bytes[..]).unwrap_err(),
            Error::Malformed
        );
    }
}
