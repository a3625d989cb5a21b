//! OXM flow matches (OpenFlow 1.3.5 §7.2.3): `ofp_match` of type OFPMT_OXM, a list of
//! type-length-value fields in class OFPXMC_OPENFLOW_BASIC.
//!
//! Parsing checks what §7.2.3 asks of a switch and answers its error: the match type
//! (BAD_TYPE), every length (BAD_LEN), fields we do not know (BAD_FIELD), a mask on a field that
//! has none (BAD_MASK), a value with bits outside its mask (BAD_WILDCARDS), out-of-range values
//! (BAD_VALUE), a field twice (DUP_FIELD), and each field's prerequisites (§7.2.3.6, BAD_PREREQ:
//! `ipv4_src` needs `eth_type=0x0800` earlier in the list, TCP ports need `ip_proto=6`, ...).

use std::net::{Ipv4Addr, Ipv6Addr};

use crate::OfError;
use crate::bytes::{Reader, Writer, len_since};

const OFPMT_OXM: u16 = 1;
const OFPXMC_OPENFLOW_BASIC: u16 = 0x8000;

/// `vlan_vid`'s bit saying a tag is present (§7.2.3.8).
pub const OFPVID_PRESENT: u16 = 0x1000;
/// `vlan_vid` of a packet without a tag.
pub const OFPVID_NONE: u16 = 0x0000;

pub const ETH_TYPE_IPV4: u16 = 0x0800;
pub const ETH_TYPE_ARP: u16 = 0x0806;
pub const ETH_TYPE_IPV6: u16 = 0x86dd;

/// One match field; `Option` is the mask for the fields the spec lets be masked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Oxm {
    InPort(u32),
    /// The pipeline's metadata (written by write-metadata in earlier tables), maskable.
    Metadata(u64, Option<u64>),
    EthDst([u8; 6], Option<[u8; 6]>),
    EthSrc([u8; 6], Option<[u8; 6]>),
    EthType(u16),
    /// [`OFPVID_PRESENT`] | id, or [`OFPVID_NONE`]; masked `(PRESENT, PRESENT)` is "any tag".
    VlanVid(u16, Option<u16>),
    VlanPcp(u8),
    IpDscp(u8),
    IpEcn(u8),
    IpProto(u8),
    Ipv4Src(Ipv4Addr, Option<Ipv4Addr>),
    Ipv4Dst(Ipv4Addr, Option<Ipv4Addr>),
    TcpSrc(u16),
    TcpDst(u16),
    UdpSrc(u16),
    UdpDst(u16),
    Icmpv4Type(u8),
    Icmpv4Code(u8),
    ArpOp(u16),
    ArpSpa(Ipv4Addr, Option<Ipv4Addr>),
    ArpTpa(Ipv4Addr, Option<Ipv4Addr>),
    Ipv6Src(Ipv6Addr, Option<Ipv6Addr>),
    Ipv6Dst(Ipv6Addr, Option<Ipv6Addr>),
    Icmpv6Type(u8),
    Icmpv6Code(u8),
}

/// What must come before a field in the match (§7.2.3.6, table 12).
enum Prerequisite {
    None,
    EthType(&'static [u16]),
    IpProto(u8),
    VlanPresent,
}

impl Oxm {
    /// The OXM field number (`oxm_ofb_match_fields`).
    pub fn field(&self) -> u8 {
        match self {
            Oxm::InPort(_) => 0,
            Oxm::Metadata(..) => 2,
            Oxm::EthDst(..) => 3,
            Oxm::EthSrc(..) => 4,
            Oxm::EthType(_) => 5,
            Oxm::VlanVid(..) => 6,
            Oxm::VlanPcp(_) => 7,
            Oxm::IpDscp(_) => 8,
            Oxm::IpEcn(_) => 9,
            Oxm::IpProto(_) => 10,
            Oxm::Ipv4Src(..) => 11,
            Oxm::Ipv4Dst(..) => 12,
            Oxm::TcpSrc(_) => 13,
            Oxm::TcpDst(_) => 14,
            Oxm::UdpSrc(_) => 15,
            Oxm::UdpDst(_) => 16,
            Oxm::Icmpv4Type(_) => 19,
            Oxm::Icmpv4Code(_) => 20,
            Oxm::ArpOp(_) => 21,
            Oxm::ArpSpa(..) => 22,
            Oxm::ArpTpa(..) => 23,
            Oxm::Ipv6Src(..) => 26,
            Oxm::Ipv6Dst(..) => 27,
            Oxm::Icmpv6Type(_) => 29,
            Oxm::Icmpv6Code(_) => 30,
        }
    }

    fn prerequisite(&self) -> Prerequisite {
        const IP: &[u16] = &[ETH_TYPE_IPV4, ETH_TYPE_IPV6];
        match self {
            Oxm::InPort(_)
            | Oxm::Metadata(..)
            | Oxm::EthDst(..)
            | Oxm::EthSrc(..)
            | Oxm::EthType(_) => Prerequisite::None,
            Oxm::VlanVid(..) => Prerequisite::None,
            Oxm::VlanPcp(_) => Prerequisite::VlanPresent,
            Oxm::IpDscp(_) | Oxm::IpEcn(_) | Oxm::IpProto(_) => Prerequisite::EthType(IP),
            Oxm::Ipv4Src(..) | Oxm::Ipv4Dst(..) => Prerequisite::EthType(&[ETH_TYPE_IPV4]),
            Oxm::TcpSrc(_) | Oxm::TcpDst(_) => Prerequisite::IpProto(6),
            Oxm::UdpSrc(_) | Oxm::UdpDst(_) => Prerequisite::IpProto(17),
            Oxm::Icmpv4Type(_) | Oxm::Icmpv4Code(_) => Prerequisite::IpProto(1),
            Oxm::ArpOp(_) | Oxm::ArpSpa(..) | Oxm::ArpTpa(..) => {
                Prerequisite::EthType(&[ETH_TYPE_ARP])
            }
            Oxm::Ipv6Src(..) | Oxm::Ipv6Dst(..) => Prerequisite::EthType(&[ETH_TYPE_IPV6]),
            Oxm::Icmpv6Type(_) | Oxm::Icmpv6Code(_) => Prerequisite::IpProto(58),
        }
    }

    /// Parses one field whose header said `field`, `has_mask` and whose payload is `payload`.
    fn parse(field: u8, has_mask: bool, payload: &[u8]) -> Result<Oxm, OfError> {
        let mut r = Reader::new(payload, OfError::BAD_MATCH_LEN);
        let maskable = matches!(field, 2 | 3 | 4 | 6 | 11 | 12 | 22 | 23 | 26 | 27);
        let known = matches!(field, 0 | 2..=16 | 19..=23 | 26 | 27 | 29 | 30);
        if !known {
            return Err(OfError::BAD_MATCH_FIELD);
        }
        if has_mask && !maskable {
            return Err(OfError::BAD_MATCH_MASK);
        }
        let width = match field {
            0 | 11 | 12 | 22 | 23 => 4,
            2 => 8,
            3 | 4 => 6,
            5 | 6 | 13..=16 | 21 => 2,
            26 | 27 => 16,
            _ => 1,
        };
        if payload.len() != width * (1 + usize::from(has_mask)) {
            return Err(OfError::BAD_MATCH_LEN);
        }
        let v4 = |r: &mut Reader| -> Result<Ipv4Addr, OfError> { Ok(Ipv4Addr::from(r.u32()?)) };
        let v6 =
            |r: &mut Reader| -> Result<Ipv6Addr, OfError> { Ok(Ipv6Addr::from(r.array::<16>()?)) };
        let oxm = match field {
            0 => Oxm::InPort(r.u32()?),
            2 => {
                let value = r.u64()?;
                Oxm::Metadata(value, has_mask.then(|| r.u64()).transpose()?)
            }
            3 | 4 => {
                let value = r.array::<6>()?;
                let mask = has_mask.then(|| r.array::<6>()).transpose()?;
                if field == 3 {
                    Oxm::EthDst(value, mask)
                } else {
                    Oxm::EthSrc(value, mask)
                }
            }
            5 => Oxm::EthType(r.u16()?),
            6 => {
                let value = r.u16()?;
                let mask = has_mask.then(|| r.u16()).transpose()?;
                if value > (OFPVID_PRESENT | 0x0fff) || mask.is_some_and(|m| m > 0x1fff) {
                    return Err(OfError::BAD_MATCH_VALUE);
                }
                Oxm::VlanVid(value, mask)
            }
            7 => Oxm::VlanPcp(r.u8()?),
            8 => Oxm::IpDscp(r.u8()?),
            9 => Oxm::IpEcn(r.u8()?),
            10 => Oxm::IpProto(r.u8()?),
            11 | 12 | 22 | 23 => {
                let value = v4(&mut r)?;
                let mask = has_mask.then(|| v4(&mut r)).transpose()?;
                match field {
                    11 => Oxm::Ipv4Src(value, mask),
                    12 => Oxm::Ipv4Dst(value, mask),
                    22 => Oxm::ArpSpa(value, mask),
                    _ => Oxm::ArpTpa(value, mask),
                }
            }
            13 => Oxm::TcpSrc(r.u16()?),
            14 => Oxm::TcpDst(r.u16()?),
            15 => Oxm::UdpSrc(r.u16()?),
            16 => Oxm::UdpDst(r.u16()?),
            19 => Oxm::Icmpv4Type(r.u8()?),
            20 => Oxm::Icmpv4Code(r.u8()?),
            21 => Oxm::ArpOp(r.u16()?),
            26 | 27 => {
                let value = v6(&mut r)?;
                let mask = has_mask.then(|| v6(&mut r)).transpose()?;
                if field == 26 {
                    Oxm::Ipv6Src(value, mask)
                } else {
                    Oxm::Ipv6Dst(value, mask)
                }
            }
            29 => Oxm::Icmpv6Type(r.u8()?),
            _ => Oxm::Icmpv6Code(r.u8()?),
        };
        match oxm {
            Oxm::VlanPcp(pcp) if pcp > 7 => return Err(OfError::BAD_MATCH_VALUE),
            Oxm::IpDscp(dscp) if dscp > 63 => return Err(OfError::BAD_MATCH_VALUE),
            Oxm::IpEcn(ecn) if ecn > 3 => return Err(OfError::BAD_MATCH_VALUE),
            _ => {}
        }
        let (value, mask) = oxm.value_and_mask();
        if let Some(mask) = mask
            && value.iter().zip(&mask).any(|(v, m)| v & !m != 0)
        {
            return Err(OfError::BAD_MATCH_WILDCARDS);
        }
        Ok(oxm)
    }

    /// The field's value and mask as they go on the wire.
    fn value_and_mask(&self) -> (Vec<u8>, Option<Vec<u8>>) {
        fn pair<const N: usize>(v: [u8; N], m: Option<[u8; N]>) -> (Vec<u8>, Option<Vec<u8>>) {
            (v.to_vec(), m.map(|m| m.to_vec()))
        }
        match *self {
            Oxm::InPort(port) => pair(port.to_be_bytes(), None),
            Oxm::Metadata(v, m) => pair(v.to_be_bytes(), m.map(u64::to_be_bytes)),
            Oxm::EthDst(v, m) | Oxm::EthSrc(v, m) => pair(v, m),
            Oxm::EthType(v) | Oxm::ArpOp(v) => pair(v.to_be_bytes(), None),
            Oxm::TcpSrc(v) | Oxm::TcpDst(v) | Oxm::UdpSrc(v) | Oxm::UdpDst(v) => {
                pair(v.to_be_bytes(), None)
            }
            Oxm::VlanVid(v, m) => pair(v.to_be_bytes(), m.map(u16::to_be_bytes)),
            Oxm::VlanPcp(v)
            | Oxm::IpDscp(v)
            | Oxm::IpEcn(v)
            | Oxm::IpProto(v)
            | Oxm::Icmpv4Type(v)
            | Oxm::Icmpv4Code(v)
            | Oxm::Icmpv6Type(v)
            | Oxm::Icmpv6Code(v) => pair([v], None),
            Oxm::Ipv4Src(v, m) | Oxm::Ipv4Dst(v, m) | Oxm::ArpSpa(v, m) | Oxm::ArpTpa(v, m) => {
                pair(v.octets(), m.map(|m| m.octets()))
            }
            Oxm::Ipv6Src(v, m) | Oxm::Ipv6Dst(v, m) => pair(v.octets(), m.map(|m| m.octets())),
        }
    }

    /// Appends the field as one OXM TLV (also the payload of a set-field action).
    pub(crate) fn emit(&self, out: &mut Vec<u8>) {
        let (value, mask) = self.value_and_mask();
        let len = value.len() + mask.as_ref().map_or(0, Vec::len);
        out.u16(OFPXMC_OPENFLOW_BASIC);
        out.u8(self.field() << 1 | u8::from(mask.is_some()));
        out.u8(len as u8);
        out.extend_from_slice(&value);
        if let Some(mask) = mask {
            out.extend_from_slice(&mask);
        }
    }

    /// Reads one OXM TLV from the front of `r` (short reads answer `BAD_MATCH/BAD_LEN`).
    pub(crate) fn read(r: &mut Reader<'_>) -> Result<Oxm, OfError> {
        let class = r.u16()?;
        let field_and_mask = r.u8()?;
        let len = r.u8()?;
        let payload = r.take(usize::from(len))?;
        if class != OFPXMC_OPENFLOW_BASIC {
            return Err(OfError::BAD_MATCH_FIELD);
        }
        Oxm::parse(field_and_mask >> 1, field_and_mask & 1 != 0, payload)
    }

    /// Whether the field carries a mask.
    pub fn has_mask(&self) -> bool {
        self.value_and_mask().1.is_some()
    }

    /// Bytes of the TLV.
    pub(crate) fn wire_len(&self) -> usize {
        let (value, mask) = self.value_and_mask();
        4 + value.len() + mask.map_or(0, |m| m.len())
    }
}

/// An `ofp_match`: the fields in wire order. Empty matches every packet.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Match {
    pub fields: Vec<Oxm>,
}

impl Match {
    pub fn new(fields: Vec<Oxm>) -> Self {
        Match { fields }
    }

    /// Reads an `ofp_match` with its padding from the front of `r`.
    pub(crate) fn read(r: &mut Reader<'_>) -> Result<Match, OfError> {
        let kind = r.u16().map_err(|_| OfError::BAD_MATCH_LEN)?;
        let len = usize::from(r.u16().map_err(|_| OfError::BAD_MATCH_LEN)?);
        if kind != OFPMT_OXM {
            return Err(OfError::BAD_MATCH_TYPE);
        }
        if len < 4 {
            return Err(OfError::BAD_MATCH_LEN);
        }
        let mut body = Reader::new(
            r.take(len - 4).map_err(|_| OfError::BAD_MATCH_LEN)?,
            OfError::BAD_MATCH_LEN,
        );
        let padding = len.next_multiple_of(8) - len;
        r.skip(padding).map_err(|_| OfError::BAD_MATCH_LEN)?;
        let mut fields: Vec<Oxm> = Vec::new();
        while !body.is_empty() {
            let oxm = Oxm::read(&mut body)?;
            if fields.iter().any(|f| f.field() == oxm.field()) {
                return Err(OfError::BAD_MATCH_DUP_FIELD);
            }
            let met = match oxm.prerequisite() {
                Prerequisite::None => true,
                Prerequisite::EthType(types) => fields
                    .iter()
                    .any(|f| matches!(f, Oxm::EthType(t) if types.contains(t))),
                Prerequisite::IpProto(proto) => fields.contains(&Oxm::IpProto(proto)),
                Prerequisite::VlanPresent => fields.iter().any(|f| {
                    matches!(f, Oxm::VlanVid(v, m) if v & OFPVID_PRESENT != 0
                        && m.is_none_or(|m| m & OFPVID_PRESENT != 0))
                }),
            };
            if !met {
                return Err(OfError::BAD_MATCH_PREREQ);
            }
            fields.push(oxm);
        }
        Ok(Match { fields })
    }

    /// Appends the `ofp_match` with its padding.
    pub(crate) fn emit(&self, out: &mut Vec<u8>) {
        let start = out.len();
        out.u16(OFPMT_OXM);
        out.u16(0);
        for field in &self.fields {
            field.emit(out);
        }
        let len = len_since(out, start);
        out.patch_u16(start + 2, len);
        out.pad8(start);
    }
}
