//! IEEE 802.1Q / 802.1ad VLAN tags.
//!
//! In a frame a tag is the TPID (0x8100 for 802.1Q, 0x88a8 for an 802.1ad service tag) in the
//! place of the EtherType, followed by the tag control information (TCI: priority, drop
//! eligibility, VLAN id) and the EtherType of what follows. The TPID is read by whoever holds the
//! outer header ([`super::ethernet::Packet::ethertype`] or the previous tag's
//! [`Packet::ethertype`], see [`super::EtherType::is_vlan_tag`]); this view starts at the TCI,
//! so stacked tags are walked by viewing each tag's payload as the next tag.

use super::{Error, EtherType, Result, read_u16, write_u16};

mod field {
    pub(super) const TCI: usize = 0;
    pub(super) const ETHERTYPE: usize = 2;
    pub(super) const PAYLOAD: usize = 4;
}

/// Bytes a tag adds to a frame (TPID + TCI); also the length of this view's header (TCI +
/// EtherType).
pub const HEADER_LEN: usize = field::PAYLOAD;

/// The largest VLAN id; 0 means "priority tag, no VLAN" and 4095 is reserved.
pub const MAX_VID: u16 = 0x0fff;

/// A view of one VLAN tag, starting at its TCI.
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

    /// The whole tag control information.
    pub fn tci(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::TCI)
    }

    /// Priority code point (802.1p), 0..=7.
    pub fn pcp(&self) -> u8 {
        (self.tci() >> 13) as u8
    }

    /// Drop eligible indicator.
    pub fn dei(&self) -> bool {
        self.tci() & 0x1000 != 0
    }

    /// VLAN identifier, 0..=4095.
    pub fn vid(&self) -> u16 {
        self.tci() & MAX_VID
    }

    /// EtherType of what follows the tag (another tag when stacked).
    pub fn ethertype(&self) -> EtherType {
        EtherType::from(read_u16(self.buffer.as_ref(), field::ETHERTYPE))
    }

    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[field::PAYLOAD..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    pub fn set_tci(&mut self, tci: u16) {
        write_u16(self.buffer.as_mut(), field::TCI, tci);
    }

    pub fn set_pcp(&mut self, pcp: u8) {
        let tci = (self.tci() & 0x1fff) | (u16::from(pcp & 0x07) << 13);
        self.set_tci(tci);
    }

    pub fn set_dei(&mut self, dei: bool) {
        let tci = (self.tci() & !0x1000) | if dei { 0x1000 } else { 0 };
        self.set_tci(tci);
    }

    pub fn set_vid(&mut self, vid: u16) {
        let tci = (self.tci() & !MAX_VID) | (vid & MAX_VID);
        self.set_tci(tci);
    }

    pub fn set_ethertype(&mut self, ethertype: EtherType) {
        write_u16(self.buffer.as_mut(), field::ETHERTYPE, ethertype.into());
    }

    pub fn payload_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::PAYLOAD..]
    }
}

/// One VLAN tag as values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Repr {
    pub pcp: u8,
    pub dei: bool,
    pub vid: u16,
    /// EtherType of what follows the tag.
    pub ethertype: EtherType,
}

impl Repr {
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<Repr> {
        packet.check_len()?;
        Ok(Repr {
            pcp: packet.pcp(),
            dei: packet.dei(),
            vid: packet.vid(),
            ethertype: packet.ethertype(),
        })
    }

    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// The TCI these values make (out-of-range `pcp`/`vid` bits are masked off).
    pub fn tci(&self) -> u16 {
        (u16::from(self.pcp & 0x07) << 13)
            | if self.dei { 0x1000 } else { 0 }
            | (self.vid & MAX_VID)
    }

    /// Writes the tag; the buffer must hold at least [`HEADER_LEN`] bytes.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        packet.set_tci(self.tci());
        packet.set_ethertype(self.ethertype);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Tag body after TPID 0x8100: PCP 5, DEI 0, VID 100; inner EtherType IPv4.
    const TAG: [u8; 6] = [0xa0, 0x64, 0x08, 0x00, 0x45, 0x00];

    #[test]
    fn decodes_fixture() {
        let tag = Packet::new_checked(&TAG[..]).unwrap();
        assert_eq!(tag.pcp(), 5);
        assert!(!tag.dei());
        assert_eq!(tag.vid(), 100);
        assert_eq!(tag.ethertype(), EtherType::Ipv4);
        assert_eq!(tag.payload(), &[0x45, 0x00]);
    }

    #[test]
    fn emits_fixture_and_setters_keep_other_bits() {
        let repr = Repr {
            pcp: 5,
            dei: false,
            vid: 100,
            ethertype: EtherType::Ipv4,
        };
        let mut bytes = [0u8; 4];
        repr.emit(&mut Packet::new_unchecked(&mut bytes[..]));
        assert_eq!(bytes, TAG[..4]);
        let mut tag = Packet::new_unchecked(&mut bytes[..]);
        tag.set_dei(true);
        tag.set_vid(4000);
        assert_eq!((tag.pcp(), tag.dei(), tag.vid()), (5, true, 4000));
        tag.set_pcp(1);
        assert_eq!((tag.pcp(), tag.dei(), tag.vid()), (1, true, 4000));
    }

    #[test]
    fn short_buffer_is_truncated() {
        assert_eq!(
            Packet::new_checked(&TAG[..3]).unwrap_err(),
            Error::Truncated
        );
    }
}
