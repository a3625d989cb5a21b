//! ARP (RFC 826) for Ethernet and IPv4, the only combination a forwarder meets on its ports.
//!
//! The view reads the generic hardware/protocol type and length fields, but the address
//! accessors use the fixed Ethernet/IPv4 offsets; [`Repr::parse`] refuses any other combination
//! with [`Error::Unsupported`], so a packet that passed it has the layout the accessors assume.

use std::net::Ipv4Addr;

use super::{Error, EtherType, EthernetAddress, Field, Result, read_u16, write_u16};

/// ARP hardware type of Ethernet.
pub const HARDWARE_ETHERNET: u16 = 1;

mod field {
    use super::Field;
    pub(super) const HTYPE: usize = 0;
    pub(super) const PTYPE: usize = 2;
    pub(super) const HLEN: usize = 4;
    pub(super) const PLEN: usize = 5;
    pub(super) const OPER: usize = 6;
    pub(super) const SHA: Field = 8..14;
    pub(super) const SPA: Field = 14..18;
    pub(super) const THA: Field = 18..24;
    pub(super) const TPA: Field = 24..28;
}

/// Length of an Ethernet/IPv4 ARP packet.
pub const PACKET_LEN: usize = field::TPA.end;

/// ARP operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Operation {
    Request,
    Reply,
    Unknown(u16),
}

impl From<u16> for Operation {
    fn from(value: u16) -> Self {
        match value {
            1 => Operation::Request,
            2 => Operation::Reply,
            other => Operation::Unknown(other),
        }
    }
}

impl From<Operation> for u16 {
    fn from(value: Operation) -> Self {
        match value {
            Operation::Request => 1,
            Operation::Reply => 2,
            Operation::Unknown(other) => other,
        }
    }
}

/// A view of an Ethernet/IPv4 ARP packet.
#[derive(Debug, Clone)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wraps a buffer without checks; accessors panic if it is shorter than [`PACKET_LEN`].
    pub const fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }

    /// Wraps a buffer after checking it holds an Ethernet/IPv4-sized ARP packet.
    pub fn new_checked(buffer: T) -> Result<Packet<T>> {
        let packet = Self::new_unchecked(buffer);
        packet.check_len()?;
        Ok(packet)
    }

    pub fn check_len(&self) -> Result<()> {
        if self.buffer.as_ref().len() < PACKET_LEN {
            Err(Error::Truncated)
        } else {
            Ok(())
        }
    }

    pub fn into_inner(self) -> T {
        self.buffer
    }

    pub fn hardware_type(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::HTYPE)
    }

    pub fn protocol_type(&self) -> EtherType {
        EtherType::from(read_u16(self.buffer.as_ref(), field::PTYPE))
    }

    pub fn hardware_len(&self) -> u8 {
        self.buffer.as_ref()[field::HLEN]
    }

    pub fn protocol_len(&self) -> u8 {
        self.buffer.as_ref()[field::PLEN]
    }

    pub fn operation(&self) -> Operation {
        Operation::from(read_u16(self.buffer.as_ref(), field::OPER))
    }

    /// Whether the type and length fields say Ethernet/IPv4, the layout the accessors assume.
    pub fn is_ethernet_ipv4(&self) -> bool {
        self.hardware_type() == HARDWARE_ETHERNET
            && self.protocol_type() == EtherType::Ipv4
            && self.hardware_len() == 6
            && self.protocol_len() == 4
    }

    pub fn source_hardware_addr(&self) -> EthernetAddress {
        let mut addr = [0u8; 6];
        addr.copy_from_slice(&self.buffer.as_ref()[field::SHA]);
        EthernetAddress(addr)
    }

    pub fn source_protocol_addr(&self) -> Ipv4Addr {
        let b = &self.buffer.as_ref()[field::SPA];
        Ipv4Addr::new(b[0], b[1], b[2], b[3])
    }

    pub fn target_hardware_addr(&self) -> EthernetAddress {
        let mut addr = [0u8; 6];
        addr.copy_from_slice(&self.buffer.as_ref()[field::THA]);
        EthernetAddress(addr)
    }

    pub fn target_protocol_addr(&self) -> Ipv4Addr {
        let b = &self.buffer.as_ref()[field::TPA];
        Ipv4Addr::new(b[0], b[1], b[2], b[3])
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    pub fn set_hardware_type(&mut self, value: u16) {
        write_u16(self.buffer.as_mut(), field::HTYPE, value);
    }

    pub fn set_protocol_type(&mut self, value: EtherType) {
        write_u16(self.buffer.as_mut(), field::PTYPE, value.into());
    }

    pub fn set_hardware_len(&mut self, value: u8) {
        self.buffer.as_mut()[field::HLEN] = value;
    }

    pub fn set_protocol_len(&mut self, value: u8) {
        self.buffer.as_mut()[field::PLEN] = value;
    }

    pub fn set_operation(&mut self, value: Operation) {
        write_u16(self.buffer.as_mut(), field::OPER, value.into());
    }

    pub fn set_source_hardware_addr(&mut self, addr: EthernetAddress) {
        self.buffer.as_mut()[field::SHA].copy_from_slice(&addr.0);
    }

    pub fn set_source_protocol_addr(&mut self, addr: Ipv4Addr) {
        self.buffer.as_mut()[field::SPA].copy_from_slice(&addr.octets());
    }

    pub fn set_target_hardware_addr(&mut self, addr: EthernetAddress) {
        self.buffer.as_mut()[field::THA].copy_from_slice(&addr.0);
    }

    pub fn set_target_protocol_addr(&mut self, addr: Ipv4Addr) {
        self.buffer.as_mut()[field::TPA].copy_from_slice(&addr.octets());
    }
}

/// An Ethernet/IPv4 ARP packet as values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Repr {
    pub operation: Operation,
    pub source_hardware_addr: EthernetAddress,
    pub source_protocol_addr: Ipv4Addr,
    pub target_hardware_addr: EthernetAddress,
    pub target_protocol_addr: Ipv4Addr,
}

impl Repr {
    /// Values of an Ethernet/IPv4 ARP packet; [`Error::Unsupported`] for other combinations.
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<Repr> {
        packet.check_len()?;
        if !packet.is_ethernet_ipv4() {
            return Err(Error::Unsupported);
        }
        Ok(Repr {
            operation: packet.operation(),
            source_hardware_addr: packet.source_hardware_addr(),
            source_protocol_addr: packet.source_protocol_addr(),
            target_hardware_addr: packet.target_hardware_addr(),
            target_protocol_addr: packet.target_protocol_addr(),
        })
    }

    pub const fn buffer_len(&self) -> usize {
        PACKET_LEN
    }

    /// Writes the packet; the buffer must hold at least [`PACKET_LEN`] bytes.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        packet.set_hardware_type(HARDWARE_ETHERNET);
        packet.set_protocol_type(EtherType::Ipv4);
        packet.set_hardware_len(6);
        packet.set_protocol_len(4);
        packet.set_operation(self.operation);
        packet.set_source_hardware_addr(self.source_hardware_addr);
        packet.set_source_protocol_addr(self.source_protocol_addr);
        packet.set_target_hardware_addr(self.target_hardware_addr);
        packet.set_target_protocol_addr(self.target_protocol_addr);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// "Who has 192.168.1.1? Tell 192.168.1.100", as a host sends it.
    const REQUEST: [u8; 28] = [
        0x00, 0x01, // Ethernet
        0x08, 0x00, // IPv4
        0x06, 0x04, // lengths
        0x00, 0x01, // request
        0x52, 0x54, 0x00, 0x12, 0x34, 0x56, // sender MAC
        0xc0, 0xa8, 0x01, 0x64, // 192.168.1.100
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, // target MAC unknown
        0xc0, 0xa8, 0x01, 0x01, // 192.168.1.1
    ];

    fn request() -> Repr {
        Repr {
            operation: Operation::Request,
            source_hardware_addr: EthernetAddress([0x52, 0x54, 0x00, 0x12, 0x34, 0x56]),
            source_protocol_addr: Ipv4Addr::new(192, 168, 1, 100),
            target_hardware_addr: EthernetAddress([0; 6]),
            target_protocol_addr: Ipv4Addr::new(192, 168, 1, 1),
        }
    }

    #[test]
    fn decodes_fixture() {
        let packet = Packet::new_checked(&REQUEST[..]).unwrap();
        assert!(packet.is_ethernet_ipv4());
        assert_eq!(Repr::parse(&packet).unwrap(), request());
    }

    #[test]
    fn emits_fixture() {
        let mut bytes = [0xaau8; 28];
        request().emit(&mut Packet::new_unchecked(&mut bytes[..]));
        assert_eq!(bytes, REQUEST);
    }

    #[test]
    fn other_hardware_is_unsupported_and_short_is_truncated() {
        let mut bytes = REQUEST;
        bytes[1] = 6; // IEEE 802 hardware type
        let packet = Packet::new_checked(&bytes[..]).unwrap();
        assert_eq!(Repr::parse(&packet).unwrap_err(), Error::Unsupported);
        assert_eq!(
            Packet::new_checked(&REQUEST[..27]).unwrap_err(),
            Error::Truncated
        );
    }
}
