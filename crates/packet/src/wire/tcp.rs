//! TCP segment headers (RFC 9293), with the data offset and the options a forwarder or a
//! traffic generator cares about (MSS, window scale, SACK permitted).
//!
//! [`Packet::new_checked`] validates the data offset against the buffer; the payload is the rest
//! of the buffer, so view exactly the IP payload. The checksum covers a pseudo-header and is
//! filled and verified with the addresses passed in.

use std::net::{Ipv4Addr, Ipv6Addr};

use super::{Error, Result, read_u16, read_u32, write_u16, write_u32};
use crate::checksum;

mod field {
    pub(super) const SRC_PORT: usize = 0;
    pub(super) const DST_PORT: usize = 2;
    pub(super) const SEQ_NUM: usize = 4;
    pub(super) const ACK_NUM: usize = 8;
    pub(super) const FLAGS: usize = 12;
    pub(super) const WINDOW: usize = 14;
    pub(super) const CHECKSUM: usize = 16;
    pub(super) const URGENT: usize = 18;
}

/// Length of a TCP header without options.
pub const HEADER_LEN: usize = 20;
/// Length of the longest TCP header (data offset 15).
pub const MAX_HEADER_LEN: usize = 60;

const PROTOCOL: u8 = 6;

/// TCP flag bits as [`Packet::flags`] returns them.
pub mod flags {
    pub const FIN: u16 = 0x001;
    pub const SYN: u16 = 0x002;
    pub const RST: u16 = 0x004;
    pub const PSH: u16 = 0x008;
    pub const ACK: u16 = 0x010;
    pub const URG: u16 = 0x020;
    pub const ECE: u16 = 0x040;
    pub const CWR: u16 = 0x080;
    /// ECN nonce (historic, RFC 3540).
    pub const NS: u16 = 0x100;
    /// Every flag bit.
    pub const ALL: u16 = 0x1ff;
}

/// One TCP option.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TcpOption<'a> {
    EndOfList,
    NoOperation,
    MaxSegmentSize(u16),
    WindowScale(u8),
    SackPermitted,
    /// Any other option: its kind and data (without kind and length bytes).
    Unknown {
        kind: u8,
        data: &'a [u8],
    },
}

/// Iterates over TCP options; yields [`Error::Malformed`] once (and then stops) when an option
/// overruns the bytes or has an impossible length.
#[derive(Clone, Debug)]
pub struct OptionIter<'a> {
    rest: &'a [u8],
}

impl<'a> OptionIter<'a> {
    pub fn new(options: &'a [u8]) -> OptionIter<'a> {
        OptionIter { rest: options }
    }
}

impl<'a> Iterator for OptionIter<'a> {
    type Item = Result<TcpOption<'a>>;

    fn next(&mut self) -> Option<Self::Item> {
        let (&kind, after_kind) = self.rest.split_first()?;
        match kind {
            0 => {
                self.rest = &[];
                return Some(Ok(TcpOption::EndOfList));
            }
            1 => {
                self.rest = after_kind;
                return Some(Ok(TcpOption::NoOperation));
            }
            _ => {}
        }
        let len = match after_kind.first() {
            Some(&len) if len >= 2 && usize::from(len) <= self.rest.len() => usize::from(len),
            _ => {
                self.rest = &[];
                return Some(Err(Error::Malformed));
            }
        };
        let data = &self.rest[2..len];
        self.rest = &self.rest[len..];
        let option = match (kind, data) {
            (2, &[hi, lo]) => TcpOption::MaxSegmentSize(u16::from_be_bytes([hi, lo])),
            (3, &[shift]) => TcpOption::WindowScale(shift),
            (4, &[]) => TcpOption::SackPermitted,
            (2..=4, _) => return Some(Err(Error::Malformed)),
            _ => TcpOption::Unknown { kind, data },
        };
        Some(Ok(option))
    }
}

/// A view of a TCP segment.
#[derive(Debug, Clone)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wraps a buffer without checks; accessors panic if the data offset is wrong.
    pub const fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }

    pub fn new_checked(buffer: T) -> Result<Packet<T>> {
        let packet = Self::new_unchecked(buffer);
        packet.check_len()?;
        Ok(packet)
    }

    /// [`Error::Truncated`] when the buffer is shorter than 20 bytes or the data offset,
    /// [`Error::Malformed`] when the data offset is below 5.
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

    pub fn seq_number(&self) -> u32 {
        read_u32(self.buffer.as_ref(), field::SEQ_NUM)
    }

    pub fn ack_number(&self) -> u32 {
        read_u32(self.buffer.as_ref(), field::ACK_NUM)
    }

    /// Header length in bytes (data offset * 4).
    pub fn header_len(&self) -> u8 {
        (self.buffer.as_ref()[field::FLAGS] >> 4) * 4
    }

    /// The nine flag bits ([`flags`]).
    pub fn flags(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::FLAGS) & flags::ALL
    }

    pub fn syn(&self) -> bool {
        self.flags() & flags::SYN != 0
    }

    pub fn ack(&self) -> bool {
        self.flags() & flags::ACK != 0
    }

    pub fn fin(&self) -> bool {
        self.flags() & flags::FIN != 0
    }

    pub fn rst(&self) -> bool {
        self.flags() & flags::RST != 0
    }

    pub fn window_len(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::WINDOW)
    }

    pub fn checksum(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::CHECKSUM)
    }

    pub fn urgent_at(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::URGENT)
    }

    /// The option bytes between the fixed header and the data offset.
    pub fn options(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..usize::from(self.header_len())]
    }

    pub fn option_iter(&self) -> OptionIter<'_> {
        OptionIter::new(self.options())
    }

    /// Everything after the header.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[usize::from(self.header_len())..]
    }

    pub fn verify_checksum_v4(&self, src: Ipv4Addr, dst: Ipv4Addr) -> bool {
        checksum::verify_transport_v4(src, dst, PROTOCOL, self.buffer.as_ref())
    }

    pub fn verify_checksum_v6(&self, src: Ipv6Addr, dst: Ipv6Addr) -> bool {
        checksum::verify_transport_v6(src, dst, PROTOCOL, self.buffer.as_ref())
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    pub fn set_src_port(&mut self, port: u16) {
        write_u16(self.buffer.as_mut(), field::SRC_PORT, port);
    }

    pub fn set_dst_port(&mut self, port: u16) {
        write_u16(self.buffer.as_mut(), field::DST_PORT, port);
    }

    pub fn set_seq_number(&mut self, value: u32) {
        write_u32(self.buffer.as_mut(), field::SEQ_NUM, value);
    }

    pub fn set_ack_number(&mut self, value: u32) {
        write_u32(self.buffer.as_mut(), field::ACK_NUM, value);
    }

    /// Sets the data offset from a header length in bytes (a multiple of 4, 20..=60).
    pub fn set_header_len(&mut self, len: u8) {
        let b = &mut self.buffer.as_mut()[field::FLAGS];
        *b = (*b & 0x0f) | ((len / 4) << 4);
    }

    /// Sets the nine flag bits, keeping the data offset.
    pub fn set_flags(&mut self, value: u16) {
        let raw = read_u16(self.buffer.as_ref(), field::FLAGS);
        let raw = (raw & 0xf000) | (value & flags::ALL);
        write_u16(self.buffer.as_mut(), field::FLAGS, raw);
    }

    pub fn set_window_len(&mut self, value: u16) {
        write_u16(self.buffer.as_mut(), field::WINDOW, value);
    }

    pub fn set_checksum(&mut self, value: u16) {
        write_u16(self.buffer.as_mut(), field::CHECKSUM, value);
    }

    pub fn set_urgent_at(&mut self, value: u16) {
        write_u16(self.buffer.as_mut(), field::URGENT, value);
    }

    pub fn options_mut(&mut self) -> &mut [u8] {
        let end = usize::from(self.header_len());
        &mut self.buffer.as_mut()[HEADER_LEN..end]
    }

    pub fn payload_mut(&mut self) -> &mut [u8] {
        let start = usize::from(self.header_len());
        &mut self.buffer.as_mut()[start..]
    }

    /// Checksum over pseudo-header, header and the whole buffer as payload.
    pub fn fill_checksum_v4(&mut self, src: Ipv4Addr, dst: Ipv4Addr) {
        self.set_checksum(0);
        let sum = checksum::transport_v4(src, dst, PROTOCOL, self.buffer.as_ref());
        self.set_checksum(sum);
    }

    pub fn fill_checksum_v6(&mut self, src: Ipv6Addr, dst: Ipv6Addr) {
        self.set_checksum(0);
        let sum = checksum::transport_v6(src, dst, PROTOCOL, self.buffer.as_ref());
        self.set_checksum(sum);
    }
}

/// A TCP header as values, with the options a generator sets; others are skipped by
/// [`Repr::parse`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Repr {
    pub src_port: u16,
    pub dst_port: u16,
    pub seq_number: u32,
    pub ack_number: u32,
    /// [`flags`] bits.
    pub flags: u16,
    pub window_len: u16,
    pub urgent_at: u16,
    pub max_seg_size: Option<u16>,
    pub window_scale: Option<u8>,
    pub sack_permitted: bool,
}

impl Repr {
    /// Values of a checked segment; [`Error::Malformed`] for malformed options.
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<Repr> {
        packet.check_len()?;
        let mut repr = Repr {
            src_port: packet.src_port(),
            dst_port: packet.dst_port(),
            seq_number: packet.seq_number(),
            ack_number: packet.ack_number(),
            flags: packet.flags(),
            window_len: packet.window_len(),
            urgent_at: packet.urgent_at(),
            max_seg_size: None,
            window_scale: None,
            sack_permitted: false,
        };
        for option in packet.option_iter() {
            match option? {
                TcpOption::MaxSegmentSize(mss) => repr.max_seg_size = Some(mss),
                TcpOption::WindowScale(shift) => repr.window_scale = Some(shift),
                TcpOption::SackPermitted => repr.sack_permitted = true,
                TcpOption::EndOfList | TcpOption::NoOperation | TcpOption::Unknown { .. } => {}
            }
        }
        Ok(repr)
    }

    fn options_len(&self) -> usize {
        let mut len = 0;
        if self.max_seg_size.is_some() {
            len += 4;
        }
        if self.window_scale.is_some() {
            len += 3;
        }
        if self.sack_permitted {
            len += 2;
        }
        len
    }

    /// Header length with options, padded to a multiple of 4.
    pub fn buffer_len(&self) -> usize {
        HEADER_LEN + self.options_len().div_ceil(4) * 4
    }

    /// Writes the header and options with a zero checksum; fill it once the payload is in
    /// place. The buffer must hold at least [`Repr::buffer_len`] bytes.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        packet.set_src_port(self.src_port);
        packet.set_dst_port(self.dst_port);
        packet.set_seq_number(self.seq_number);
        packet.set_ack_number(self.ack_number);
        let header_len = self.buffer_len();
        packet.set_header_len(header_len as u8);
        packet.set_flags(self.flags);
        packet.set_window_len(self.window_len);
        packet.set_checksum(0);
        packet.set_urgent_at(self.urgent_at);
        let options = packet.options_mut();
        // The tail is End of Option List (zero) padding.
        options.fill(0);
        let mut at = 0;
        if let Some(mss) = self.max_seg_size {
            let [hi, lo] = mss.to_be_bytes();
            options[at..at + 4].copy_from_slice(&[2, 4, hi, lo]);
            at += 4;
        }
        if let Some(shift) = self.window_scale {
            options[at..at + 3].copy_from_slice(&[3, 3, shift]);
            at += 3;
        }
        if self.sack_permitted {
            options[at..at + 2].copy_from_slice(&[4, 2]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SRC: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 1);
    const DST: Ipv4Addr = Ipv4Addr::new(198, 51, 100, 7);

    /// A SYN from 192.0.2.1:49152 to 198.51.100.7:80 with MSS 1460, window scale 7 and SACK
    /// permitted (padded with three EOL bytes); its checksum, 0x5bed, was computed independently of this crate.
    const SYN: [u8; 32] = [
        0xc0, 0x00, 0x00, 0x50, // ports
        0x12, 0x34, 0x56, 0x78, // seq
        0x00, 0x00, 0x00, 0x00, // ack
        0x80, 0x02, 0xfa, 0xf0, // offset 8, SYN, window 64240
        0x00, 0x00, 0x00, 0x00, // checksum (filled in below), urgent
        0x02, 0x04, 0x05, 0xb4, // MSS 1460
        0x03, 0x03, 0x07, // window scale 7
        0x04, 0x02, // SACK permitted
        0x00, 0x00, 0x00, // EOL padding
    ];

    fn syn() -> Repr {
        Repr {
            src_port: 49152,
            dst_port: 80,
            seq_number: 0x1234_5678,
            ack_number: 0,
            flags: flags::SYN,
            window_len: 64240,
            urgent_at: 0,
            max_seg_size: Some(1460),
            window_scale: Some(7),
            sack_permitted: true,
        }
    }

    #[test]
    fn decodes_fixture() {
        let packet = Packet::new_checked(&SYN[..]).unwrap();
        assert_eq!(packet.header_len(), 32);
        assert!(packet.syn() && !packet.ack() && !packet.fin() && !packet.rst());
        assert_eq!(packet.options().len(), 12);
        assert!(packet.payload().is_empty());
        assert_eq!(Repr::parse(&packet).unwrap(), syn());
    }

    #[test]
    fn emits_fixture_and_checksum_verifies() {
        let repr = syn();
        assert_eq!(repr.buffer_len(), 32);
        let mut bytes = [0xeeu8; 32];
        let mut packet = Packet::new_unchecked(&mut bytes[..]);
        repr.emit(&mut packet);
        assert_eq!(packet.into_inner(), &SYN[..]);
        let mut packet = Packet::new_unchecked(&mut bytes[..]);
        packet.fill_checksum_v4(SRC, DST);
        assert_eq!(packet.checksum(), 0x5bed);
        assert!(packet.verify_checksum_v4(SRC, DST));
        assert!(!packet.verify_checksum_v4(DST, DST));
    }

    #[test]
    fn length_and_option_errors() {
        assert_eq!(
            Packet::new_checked(&SYN[..19]).unwrap_err(),
            Error::Truncated
        );
        assert_eq!(
            Packet::new_checked(&SYN[..31]).unwrap_err(),
            Error::Truncated
        );
        let mut bytes = SYN;
        bytes[12] = 0x40; // data offset 4
        assert_eq!(
            Packet::new_checked(&bytes[..]).unwrap_err(),
            Error::Malformed
        );
        let mut bytes = SYN;
        bytes[21] = 40; // MSS option length beyond the options
        let packet = Packet::new_checked(&bytes[..]).unwrap();
        assert_eq!(Repr::parse(&packet).unwrap_err(), Error::Malformed);
    }
}
