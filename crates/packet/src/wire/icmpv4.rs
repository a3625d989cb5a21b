//! ICMPv4 messages (RFC 792): type, code, checksum and the 4-byte "rest of header" (identifier
//! and sequence number for echo, unused or a pointer for errors), then data.
//!
//! The checksum covers the whole message and no pseudo-header; it is filled after the caller
//! has written the data.

use super::{Error, Result, read_u16, read_u32, write_u16, write_u32};
use crate::checksum;

mod field {
    pub(super) const TYPE: usize = 0;
    pub(super) const CODE: usize = 1;
    pub(super) const CHECKSUM: usize = 2;
    pub(super) const REST: usize = 4;
}

/// Length of the ICMP header (type, code, checksum, rest of header).
pub const HEADER_LEN: usize = 8;

/// ICMPv4 message types.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Message {
    EchoReply,
    DstUnreachable,
    Redirect,
    EchoRequest,
    TimeExceeded,
    ParamProblem,
    Unknown(u8),
}

impl From<u8> for Message {
    fn from(value: u8) -> Self {
        match value {
            0 => Message::EchoReply,
            3 => Message::DstUnreachable,
            5 => Message::Redirect,
            8 => Message::EchoRequest,
            11 => Message::TimeExceeded,
            12 => Message::ParamProblem,
            other => Message::Unknown(other),
        }
    }
}

impl From<Message> for u8 {
    fn from(value: Message) -> Self {
        match value {
            Message::EchoReply => 0,
            Message::DstUnreachable => 3,
            Message::Redirect => 5,
            Message::EchoRequest => 8,
            Message::TimeExceeded => 11,
            Message::ParamProblem => 12,
            Message::Unknown(other) => other,
        }
    }
}

/// A view of an ICMPv4 message.
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

    /// The 4-byte rest of header as one number.
    pub fn rest_of_header(&self) -> u32 {
        read_u32(self.buffer.as_ref(), field::REST)
    }

    /// Echo identifier (first half of the rest of header).
    pub fn echo_ident(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::REST)
    }

    /// Echo sequence number (second half of the rest of header).
    pub fn echo_seq_no(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::REST + 2)
    }

    pub fn data(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..]
    }

    pub fn verify_checksum(&self) -> bool {
        checksum::is_valid(self.buffer.as_ref())
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

    /// Computes the checksum over the whole buffer and writes it.
    pub fn fill_checksum(&mut self) {
        self.set_checksum(0);
        let sum = checksum::internet_checksum(self.buffer.as_ref());
        self.set_checksum(sum);
    }
}

/// An ICMPv4 header as values; the data is the caller's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Repr {
    pub message: Message,
    pub code: u8,
    /// Rest of header: `ident << 16 | seq_no` for echo messages.
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

    /// Writes the header with a zero checksum; fill it once the data is in place.
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

    /// An echo request, identifier 0x1234, sequence 1, data "abcd"; checksum worked out
    /// independently of this crate.
    const ECHO: [u8; 12] = [
        0x08, 0x00, 0x21, 0x04, 0x12, 0x34, 0x00, 0x01, b'a', b'b', b'c', b'd',
    ];

    #[test]
    fn decodes_fixture() {
        let packet = Packet::new_checked(&ECHO[..]).unwrap();
        assert_eq!(packet.msg_type(), Message::EchoRequest);
        assert_eq!((packet.echo_ident(), packet.echo_seq_no()), (0x1234, 1));
        assert_eq!(packet.data(), b"abcd");
        assert!(packet.verify_checksum());
        assert_eq!(Repr::parse(&packet).unwrap(), Repr::echo_request(0x1234, 1));
    }

    #[test]
    fn emits_fixture() {
        let mut bytes = [0u8; 12];
        let mut packet = Packet::new_unchecked(&mut bytes[..]);
        Repr::echo_request(0x1234, 1).emit(&mut packet);
        packet.data_mut().copy_from_slice(b"abcd");
        packet.fill_checksum();
        assert_eq!(bytes, ECHO);
    }

    #[test]
    fn short_is_truncated_and_unknown_types_are_data() {
        assert_eq!(
            Packet::new_checked(&ECHO[..7]).unwrap_err(),
            Error::Truncated
        );
        assert_eq!(Message::from(42), Message::Unknown(42));
        assert_eq!(u8::from(Message::from(11)), 11);
    }
}
