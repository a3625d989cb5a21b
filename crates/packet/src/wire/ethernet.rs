//! Ethernet II frames (IEEE 802.3 with an EtherType): destination, source, EtherType, payload.
//!
//! The frame check sequence is not part of the view: NICs and the kernel strip it before a frame
//! reaches a port, and add it on transmit.

use core::fmt;

use super::{Error, Field, Result, read_u16, write_u16};

/// A 48-bit IEEE MAC address (transparent over its 6 bytes, so it can sit in `repr(C)` keys).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(transparent)]
pub struct EthernetAddress(pub [u8; 6]);

impl EthernetAddress {
    /// `ff:ff:ff:ff:ff:ff`.
    pub const BROADCAST: EthernetAddress = EthernetAddress([0xff; 6]);

    /// The address in the first 6 bytes of `bytes`; `None` when there are fewer.
    pub fn from_bytes(bytes: &[u8]) -> Option<EthernetAddress> {
        let six: [u8; 6] = bytes.get(..6)?.try_into().ok()?;
        Some(EthernetAddress(six))
    }

    pub fn as_bytes(&self) -> &[u8; 6] {
        &self.0
    }

    pub fn is_broadcast(&self) -> bool {
        *self == Self::BROADCAST
    }

    /// Group address (I/G bit set): multicast, including broadcast.
    pub fn is_multicast(&self) -> bool {
        self.0[0] & 0x01 != 0
    }

    pub fn is_unicast(&self) -> bool {
        !self.is_multicast()
    }

    /// Locally administered (U/L bit set).
    pub fn is_local(&self) -> bool {
        self.0[0] & 0x02 != 0
    }
}

/// The text of a MAC address is not six colon-separated bytes of one or two hex digits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("not a MAC address: write six hex bytes separated by colons, e.g. 02:00:00:00:00:01")]
pub struct ParseMacError;

impl core::str::FromStr for EthernetAddress {
    type Err = ParseMacError;

    /// Parses `aa:bb:cc:dd:ee:ff` (the form `Display` writes); nothing else is accepted.
    fn from_str(text: &str) -> core::result::Result<Self, ParseMacError> {
        let mut mac = [0u8; 6];
        let mut parts = text.split(':');
        for byte in &mut mac {
            let part = parts.next().ok_or(ParseMacError)?;
            if part.is_empty() || part.len() > 2 || !part.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(ParseMacError);
            }
            *byte = u8::from_str_radix(part, 16).map_err(|_| ParseMacError)?;
        }
        if parts.next().is_some() {
            return Err(ParseMacError);
        }
        Ok(EthernetAddress(mac))
    }
}

impl fmt::Display for EthernetAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.0;
        write!(
            f,
            "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            b[0], b[1], b[2], b[3], b[4], b[5]
        )
    }
}

/// The EtherType field (values >= 0x0600). Unknown values are carried, not rejected.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum EtherType {
    Ipv4,
    Arp,
    Ipv6,
    /// IEEE 802.1Q customer VLAN tag (TPID 0x8100).
    Vlan,
    /// IEEE 802.1ad service VLAN tag, "QinQ" (TPID 0x88a8).
    QinQ,
    Unknown(u16),
}

impl EtherType {
    /// Whether this value announces a VLAN tag (802.1Q or 802.1ad) rather than a payload.
    pub fn is_vlan_tag(self) -> bool {
        matches!(self, EtherType::Vlan | EtherType::QinQ)
    }
}

impl From<u16> for EtherType {
    fn from(value: u16) -> Self {
        match value {
            0x0800 => EtherType::Ipv4,
            0x0806 => EtherType::Arp,
            0x86dd => EtherType::Ipv6,
            0x8100 => EtherType::Vlan,
            0x88a8 => EtherType::QinQ,
            other => EtherType::Unknown(other),
        }
    }
}

impl From<EtherType> for u16 {
    fn from(value: EtherType) -> Self {
        match value {
            EtherType::Ipv4 => 0x0800,
            EtherType::Arp => 0x0806,
            EtherType::Ipv6 => 0x86dd,
            EtherType::Vlan => 0x8100,
            EtherType::QinQ => 0x88a8,
            EtherType::Unknown(other) => other,
        }
    }
}

mod field {
    use super::Field;
    pub(super) const DESTINATION: Field = 0..6;
    pub(super) const SOURCE: Field = 6..12;
    pub(super) const ETHERTYPE: usize = 12;
    pub(super) const PAYLOAD: usize = 14;
}

/// Length of an Ethernet II header.
pub const HEADER_LEN: usize = field::PAYLOAD;

/// A view of an Ethernet II frame.
#[derive(Debug, Clone)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wraps a buffer without checks; accessors panic if it is shorter than [`HEADER_LEN`].
    pub const fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }

    /// Wraps a buffer after checking it holds a whole header.
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

    pub fn dst_addr(&self) -> EthernetAddress {
        let mut addr = [0u8; 6];
        addr.copy_from_slice(&self.buffer.as_ref()[field::DESTINATION]);
        EthernetAddress(addr)
    }

    pub fn src_addr(&self) -> EthernetAddress {
        let mut addr = [0u8; 6];
        addr.copy_from_slice(&self.buffer.as_ref()[field::SOURCE]);
        EthernetAddress(addr)
    }

    pub fn ethertype(&self) -> EtherType {
        EtherType::from(read_u16(self.buffer.as_ref(), field::ETHERTYPE))
    }

    /// Everything after the header (VLAN tags included, if any).
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[field::PAYLOAD..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    pub fn set_dst_addr(&mut self, addr: EthernetAddress) {
        self.buffer.as_mut()[field::DESTINATION].copy_from_slice(&addr.0);
    }

    pub fn set_src_addr(&mut self, addr: EthernetAddress) {
        self.buffer.as_mut()[field::SOURCE].copy_from_slice(&addr.0);
    }

    pub fn set_ethertype(&mut self, ethertype: EtherType) {
        write_u16(self.buffer.as_mut(), field::ETHERTYPE, ethertype.into());
    }

    pub fn payload_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::PAYLOAD..]
    }
}

/// An Ethernet II header as values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Repr {
    pub src_addr: EthernetAddress,
    pub dst_addr: EthernetAddress,
    pub ethertype: EtherType,
}

impl Repr {
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<Repr> {
        packet.check_len()?;
        Ok(Repr {
            src_addr: packet.src_addr(),
            dst_addr: packet.dst_addr(),
            ethertype: packet.ethertype(),
        })
    }

    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the header; the buffer must hold at least [`HEADER_LEN`] bytes.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        packet.set_dst_addr(self.dst_addr);
        packet.set_src_addr(self.src_addr);
        packet.set_ethertype(self.ethertype);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FRAME: [u8; 18] = [
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // destination: broadcast
        0x02, 0x00, 0x00, 0x00, 0x00, 0x01, // source
        0x08, 0x06, // ARP
        0xde, 0xad, 0xbe, 0xef,
    ];

    #[test]
    fn decodes_fixture() {
        let packet = Packet::new_checked(&FRAME[..]).unwrap();
        assert!(packet.dst_addr().is_broadcast());
        assert!(packet.dst_addr().is_multicast());
        assert_eq!(packet.src_addr(), EthernetAddress([2, 0, 0, 0, 0, 1]));
        assert!(packet.src_addr().is_unicast() && packet.src_addr().is_local());
        assert_eq!(packet.ethertype(), EtherType::Arp);
        assert_eq!(packet.payload(), &[0xde, 0xad, 0xbe, 0xef]);
        assert_eq!(packet.src_addr().to_string(), "02:00:00:00:00:01");
    }

    #[test]
    fn emits_fixture() {
        let repr = Repr::parse(&Packet::new_checked(&FRAME[..]).unwrap()).unwrap();
        let mut bytes = [0u8; 18];
        bytes[14..].copy_from_slice(&[0xde, 0xad, 0xbe, 0xef]);
        repr.emit(&mut Packet::new_unchecked(&mut bytes[..]));
        assert_eq!(bytes, FRAME);
    }

    #[test]
    fn short_buffer_is_truncated() {
        assert_eq!(
            Packet::new_checked(&FRAME[..13]).unwrap_err(),
            Error::Truncated
        );
    }

    #[test]
    fn unknown_ethertype_is_data() {
        assert_eq!(EtherType::from(0x88cc), EtherType::Unknown(0x88cc));
        assert_eq!(u16::from(EtherType::from(0x88cc)), 0x88cc);
        assert!(EtherType::from(0x88a8).is_vlan_tag());
    }

    #[test]
    fn mac_text_round_trips_and_nothing_else_parses() {
        let mac: EthernetAddress = "02:57:53:0:1:fe".parse().unwrap();
        assert_eq!(mac, EthernetAddress([0x02, 0x57, 0x53, 0, 1, 0xfe]));
        assert_eq!(mac.to_string().parse::<EthernetAddress>(), Ok(mac));
        for bad in [
            "",
            "zz",
            "02:57:53:00:01",
            "02:57:53:00:01:fe:00",
            "+2:57:53:00:01:fe",
            "002:57:53:00:01:fe",
        ] {
            assert_eq!(
                bad.parse::<EthernetAddress>(),
                Err(ParseMacError),
                "{bad:?}"
            );
        }
    }
}
