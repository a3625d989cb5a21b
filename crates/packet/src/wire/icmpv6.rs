//! ICMPv6 messages (RFC 4443, RFC 4861 for neighbour discovery types): type, code, checksum
//! and a 4-byte message-specific word, then the message body.
//!
//! Unlike ICMPv4 the checksum covers the IPv6 pseudo-header (RFC 4443 §2.3), so it is filled
//! and verified with the addresses passed in.

use std::net::Ipv6Addr;

use super::{Error, Result, read_u16, read_u32, write_u16, write_u32};
use crate::checksum;

mod field {
    pub(super) const TYPE: usize = 0;
    pub(super) const CODE: usize = 1;
    pub(super) const CHECKSUM: usize = 2;
    pub(super) const REST: usize = 4;
}

/// Length of the ICMPv6 header (type, code, checksum, message-specific word).
pub const HEADER_LEN: usize = 8;

const NEXT_HEADER: u8 = 58;

/// ICMPv6 message types.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Message {
    DstUnreachable,
    PacketTooBig,
    TimeExceeded,
    ParamProblem,
    EchoRequest,
    EchoReply,
    RouterSolicit,
    RouterAdvert,
    NeighborSolicit,
    NeighborAdvert,
    Redirect,
    Unknown(u8),
}

impl From<u8> for Message {
    fn from(value: u8) -> Self {
        match value {
            1 => Message::DstUnreachable,
            2 => Message::PacketTooBig,
            3 => Message::TimeExceeded,
            4 => Message::ParamProblem,
            128 => Message::EchoRequest,
            129 => Message::EchoReply,
            133 => Message::RouterSolicit,
            134 => Message::RouterAdvert,
            135 => Message::NeighborSolicit,
            136 => Message::NeighborAdvert,
            137 => Message::Redirect,
            other => Message::Unknown(other),
        }
    }
}

impl From<Message> for u8 {
    fn from(value: Message) -> Self {
        match value {
            Message::DstUnreachable => 1,
            Message::PacketTooBig => 2,
            Message::TimeExceeded => 3,
            Message::ParamProblem => 4,
            Message::EchoRequest => 128,
            Message::EchoReply => 129,
            Message::RouterSolicit => 133,
            Message::RouterAdvert => 134,
            Message::NeighborSolicit => 135,
            Message::NeighborAdvert => 136,
            Message::Redirect => 137,
            Message::Unknown(other) => other,
        }
    }
}

impl Message {
    /// Error messages (types 0..=127) as opposed to informational ones.
    pub fn is_error(self) -> bool {
        u8::from(self) < 128
    }
}

/// A view of an ICMPv6 message.
#[derive(Debug, Clone)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wraps a buffer without checks; accessors panic if it is shorter than [`HEADER_LEN`].
    pub const fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }

    pub fn new_checked(buffer: T) -> Result<Packet<T>> {
        let packet = Self::new_unchecked(buffer);
        packet.check_len()?;
        Ok(packet)
    }

    pub fn check_len(&self) -> Result<()> {
        if self.buffer.as_ref().len() < HEADER_LEN {
            Err(Error::Truncated)
        } else {
            Ok(())
        }
    }

    pub fn into_inner(self) -> T {
        self.buffer
    }

    pub fn msg_type(&self) -> Message {
        Message::from(self.buffer.as_ref()[field::TYPE])
    }

    pub fn msg_code(&self) -> u8 {
        self.buffer.as_ref()[field::CODE]
    }

    pub fn checksum(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::CHECKSUM)
    }

    /// The message-specific word (echo identifier and sequence, MTU, pointer, flags).
    pub fn rest_of_header(&self) -> u32 {
        read_u32(self.buffer.as_ref(), field::REST)
    }

    pub fn echo_ident(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::REST)
    }

    pub fn echo_seq_no(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::REST + 2)
    }

    pub fn data(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..]
    }

    pub fn verify_checksum(&self, src: Ipv6Addr, dst: Ipv6Addr) -> bool {
        checksum::verify_transport_v6(src, dst, NEXT_HEADER, self.buffer.as_ref())
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    pub fn set_msg_type(&mut self, message: Message) {
        self.buffer.as_mut()[field::TYPE] = message.into();
    }

    pub fn set_msg_code(&mut self, code: u8) {
        self.buffer.as_mut()[field::CODE] = code;
    }

    pub fn set_checksum(&mut self, value: u16) {
        write_u16(self.buffer.as_mut(), field::CHECKSUM, value);
    }

    pub fn set_rest_of_header(&mut self, value: u32) {
        write_u32(self.buffer.as_mut(), field::REST, value);
    }

    pub fn data_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[HEADER_LEN..]
    }

    /// Computes the checksum over the pseudo-header and the whole buffer and writes it.
    pub fn fill_checksum(&mut self, src: Ipv6Addr, dst: Ipv6Addr) {
        self.set_checksum(0);
        let sum = checksum::transport_v6(src, dst, NEXT_HEADER, self.buffer.as_ref());
        self.set_checksum(sum);
    }
}

/// An ICMPv6 header as values; the body is the caller's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Repr {
    pub message: Message,
    pub code: u8,
    /// Message-specific word: `ident << 16 | seq_no` for echo messages.
    pub rest_of_header: u32,
}

impl Repr {
    /// An echo request with the given identifier and sequence number.
    pub fn echo_request(ident: u16, seq_no: u16) -> Repr {
        Repr {
            message: Message::EchoRequest,
            code: 0,
            rest_of_header: (u32::from(ident) << 16) | u32::from(seq_no),
        }
    }

    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<Repr> {
        packet.check_len()?;
        Ok(Repr {
            message: packet.msg_type(),
            code: packet.msg_code(),
            rest_of_header: packet.rest_of_header(),
        })
    }

    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the header with a zero checksum; fill it once the body is in place.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        packet.set_msg_type(self.message);
        packet.set_msg_code(self.code);
        packet.set_checksum(0);
        packet.set_rest_of_header(self.rest_of_header);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An echo request fe80::1 -> fe80::2, identifier 0x1234, sequence 1, data "abcd";
    /// checksum (with pseudo-header) worked out independently of this crate.
    const ECHO: [u8; 12] = [
        0x80, 0x00, 0xab, 0xb8, 0x12, 0x34, 0x00, 0x01, b'a', b'b', b'c', b'd',
    ];

    fn addrs() -> (Ipv6Addr, Ipv6Addr) {
        ("fe80::1".parse().unwrap(), "fe80::2".parse().unwrap())
    }

    #[test]
    fn decodes_fixture() {
        let (src, dst) = addrs();
        let packet = Packet::new_checked(&ECHO[..]).unwrap();
        assert_eq!(packet.msg_type(), Message::EchoRequest);
        assert!(!packet.msg_type().is_error());
        assert_eq!((packet.echo_ident(), packet.echo_seq_no()), (0x1234, 1));
        assert!(packet.verify_checksum(src, dst));
        assert!(!packet.verify_checksum(dst, dst));
        assert_eq!(Repr::parse(&packet).unwrap(), Repr::echo_request(0x1234, 1));
    }

    #[test]
    fn emits_fixture() {
        let (src, dst) = addrs();
        let mut bytes = [0u8; 12];
        let mut packet = Packet::new_unchecked(&mut bytes[..]);
        Repr::echo_request(0x1234, 1).emit(&mut packet);
        packet.data_mut().copy_from_slice(b"abcd");
        packet.fill_checksum(src, dst);
        assert_eq!(bytes, ECHO);
    }

    #[test]
    fn short_is_truncated() {
        assert_eq!(
            Packet::new_checked(&ECHO[..7]).unwrap_err(),
            Error::Truncated
        );
        assert!(Message::from(1).is_error());
    }
}
