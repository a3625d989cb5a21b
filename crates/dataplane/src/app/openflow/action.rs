//! OpenFlow actions and how each rewrites a packet in place.
//!
//! Rewrites work on the frame as the parse stage described it (`Meta`'s offsets) and keep every
//! checksum right without summing a header again: an IPv4 address change updates the IPv4 header
//! checksum and the TCP/UDP checksum (whose pseudo-header covers the addresses) with RFC 1624's
//! incremental update; an IPv6 address change updates the TCP/UDP/ICMPv6 checksum the same way; a port change updates the TCP/UDP checksum. A UDP checksum of 0 (none,
//! over IPv4) stays 0. VLAN push and pop move the 12 bytes of MAC addresses and the packet's
//! start inside the frame's headroom, so nothing after the tag is copied.
//!
//! Each action also knows what it does to the *flow key* ([`Action::apply_to_key`]): the slow
//! path matches later tables against the rewritten key, as OpenFlow's apply-actions require.

use std::net::{Ipv4Addr, Ipv6Addr};

use wirespeed_packet::checksum::{update_u32, update_word};
use wirespeed_packet::flow_key::FlowKey;
use wirespeed_packet::wire::EthernetAddress;
use wirespeed_packet::{Desc, DropReason, MAX_VLAN_TAGS, Meta};

const ETHERTYPE_IPV4: u16 = 0x0800;
const ETHERTYPE_IPV6: u16 = 0x86dd;
const TPID_8021Q: u16 = 0x8100;
const TPID_8021AD: u16 = 0x88a8;
const PROTO_TCP: u8 = 6;
const PROTO_UDP: u8 = 17;
const PROTO_ICMPV6: u8 = 58;

/// A field a set-field action rewrites.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SetField {
    EthSrc(EthernetAddress),
    EthDst(EthernetAddress),
    /// IPv4 packets only (others are left alone).
    Ipv4Src(Ipv4Addr),
    Ipv4Dst(Ipv4Addr),
    /// IPv6 packets only.
    Ipv6Src(Ipv6Addr),
    Ipv6Dst(Ipv6Addr),
    /// TCP/UDP packets only.
    L4Src(u16),
    L4Dst(u16),
    /// The outer tag's VLAN id (PCP and DEI kept); untagged packets are left alone.
    VlanVid(u16),
}

/// One action of an apply-actions instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Send to this port (a copy when more output actions follow).
    Output(u16),
    /// Send to every port but the ingress port.
    Flood,
    /// Send to every port, the ingress port included (OpenFlow's ALL).
    All,
    /// Send back out of the port the packet arrived on (OpenFlow's IN_PORT), whichever it
    /// was: one flow for every port.
    InPort,
    /// Discard the packet: every action of the pipeline is dropped and the pipeline ends.
    Drop,
    /// Send a copy to the OpenFlow controller (a PACKET_IN), at most this many bytes of it
    /// (`0xffff`, OFPCML_NO_BUFFER: all of it); as the last action, the packet goes nowhere
    /// else.
    Controller(u16),
    SetField(SetField),
    /// Push an outer VLAN tag with this id (PCP 0): TPID 0x8100 on an untagged frame, 0x88a8
    /// over an existing tag. A tag beyond [`MAX_VLAN_TAGS`] is refused
    /// ([`DropReason::VlanTooDeep`]).
    PushVlan(u16),
    /// Pop the outer VLAN tag (untagged frames are left alone). Tables after a pop see the
    /// packet as untagged (the flow key does not carry an inner tag).
    PopVlan,
    /// Decrement the IPv4 TTL / IPv6 hop limit; a packet that would leave with 0 is dropped
    /// ([`DropReason::TtlExpired`]).
    DecTtl,
    /// Send to group N ([`super::group`]): copies for an `all` group's buckets, one bucket
    /// of a select or indirect group. The tables after it see the packet as it was: the
    /// buckets act on the group's own packets (OpenFlow 1.3 §5.6).
    Group(u32),
}

impl Action {
    /// Whether the action sends the packet somewhere.
    pub fn is_output(&self) -> bool {
        matches!(
            self,
            Action::Output(_)
                | Action::Flood
                | Action::All
                | Action::InPort
                | Action::Controller(_)
                | Action::Group(_)
        )
    }

    /// What the action does to the flow key the next tables match on. `consulted` receives
    /// the fields whose value decided what happened (for megaflows).
    pub fn apply_to_key(&self, key: &mut FlowKey, consulted: &mut FlowKey) {
        match *self {
            Action::SetField(field) => match field {
                SetField::EthSrc(mac) => key.src_mac = mac,
                SetField::EthDst(mac) => key.dst_mac = mac,
                SetField::Ipv4Src(addr) | SetField::Ipv4Dst(addr) => {
                    consulted.ethertype = u16::MAX;
                    if key.ethertype == ETHERTYPE_IPV4 {
                        if let SetField::Ipv4Src(_) = field {
                            key.ip_src = FlowKey::map_ipv4(addr);
                        } else {
                            key.ip_dst = FlowKey::map_ipv4(addr);
                        }
                    }
                }
                SetField::Ipv6Src(addr) | SetField::Ipv6Dst(addr) => {
                    consulted.ethertype = u16::MAX;
                    if key.ethertype == ETHERTYPE_IPV6 {
                        if let SetField::Ipv6Src(_) = field {
                            key.ip_src = addr.octets();
                        } else {
                            key.ip_dst = addr.octets();
                        }
                    }
                }
                SetField::L4Src(port) | SetField::L4Dst(port) => {
                    consulted.ethertype = u16::MAX;
                    consulted.ip_proto = u8::MAX;
                    consulted.flags = u8::MAX;
                    let ip = key.ethertype == ETHERTYPE_IPV4 || key.ethertype == ETHERTYPE_IPV6;
                    let l4 = key.ip_proto == PROTO_TCP || key.ip_proto == PROTO_UDP;
                    if ip && l4 && key.flags & FlowKey::FLAG_LATER_FRAGMENT == 0 {
                        if let SetField::L4Src(_) = field {
                            key.l4_src = port;
                        } else {
                            key.l4_dst = port;
                        }
                    }
                }
                SetField::VlanVid(vid) => {
                    consulted.flags = u8::MAX;
                    if key.flags & FlowKey::FLAG_VLAN != 0 {
                        key.vlan = (key.vlan & FlowKey::VLAN_PCP) | (vid & FlowKey::VLAN_VID);
                    }
                }
            },
            Action::PushVlan(vid) => {
                key.vlan = vid & FlowKey::VLAN_VID;
                key.flags |= FlowKey::FLAG_VLAN;
            }
            Action::PopVlan => {
                key.vlan = 0;
                key.flags &= !FlowKey::FLAG_VLAN;
            }
            Action::Output(_)
            | Action::Flood
            | Action::All
            | Action::InPort
            | Action::Drop
            | Action::DecTtl
            | Action::Controller(_)
            | Action::Group(_) => {}
        }
    }
}

/// The packet's bytes inside its frame.
fn packet<'a>(frame: &'a mut [u8], desc: &Desc) -> Option<&'a mut [u8]> {
    let start = usize::from(desc.offset);
    frame.get_mut(start..start + usize::from(desc.len))
}

fn read16(bytes: &[u8], at: usize) -> Option<u16> {
    let pair = bytes.get(at..at + 2)?;
    Some(u16::from_be_bytes([pair[0], pair[1]]))
}

fn write16(bytes: &mut [u8], at: usize, value: u16) -> Option<()> {
    bytes
        .get_mut(at..at + 2)?
        .copy_from_slice(&value.to_be_bytes());
    Some(())
}

/// Where the TCP/UDP checksum of the packet is, when it has a TCP/UDP header.
fn l4_checksum_at(meta: &Meta) -> Option<(usize, bool)> {
    if meta.l4_offset == 0 || meta.flags & Meta::FLAG_PARSED == 0 {
        return None;
    }
    let l4 = usize::from(meta.l4_offset);
    match meta.ip_proto {
        PROTO_TCP => Some((l4 + 16, false)),
        PROTO_UDP => Some((l4 + 6, true)),
        _ => None,
    }
}

/// Where the checksum covering the IPv6 pseudo-header is: TCP, UDP or ICMPv6.
fn ipv6_upper_checksum_at(meta: &Meta) -> Option<(usize, bool)> {
    if meta.ip_proto == PROTO_ICMPV6 && meta.l4_offset != 0 {
        return Some((usize::from(meta.l4_offset) + 2, false));
    }
    l4_checksum_at(meta)
}

/// Applies a rewriting action to the packet `desc` describes inside `frame` (the whole frame),
/// keeping `desc` and `meta` in step. Output actions are not rewrites and do nothing here.
pub fn rewrite(
    action: &Action,
    frame: &mut [u8],
    desc: &mut Desc,
    meta: &mut Meta,
) -> Result<(), DropReason> {
    match *action {
        Action::SetField(field) => {
            // Fields the parse stage placed are inside the packet; a miss here means the
            // metadata does not describe this packet, which is left as it is.
            let _ = set_field(field, frame, desc, meta);
            Ok(())
        }
        Action::PushVlan(vid) => push_vlan(vid, frame, desc, meta),
        Action::PopVlan => {
            pop_vlan(frame, desc, meta);
            Ok(())
        }
        Action::DecTtl => dec_ttl(frame, desc, meta),
        Action::Output(_)
        | Action::Flood
        | Action::All
        | Action::InPort
        | Action::Drop
        | Action::Controller(_)
        | Action::Group(_) => Ok(()),
    }
}

fn set_field(field: SetField, frame: &mut [u8], desc: &Desc, meta: &mut Meta) -> Option<()> {
    let bytes = packet(frame, desc)?;
    match field {
        SetField::EthDst(mac) => bytes.get_mut(0..6)?.copy_from_slice(&mac.0),
        SetField::EthSrc(mac) => bytes.get_mut(6..12)?.copy_from_slice(&mac.0),
        SetField::Ipv4Src(addr) | SetField::Ipv4Dst(addr) => {
            if meta.flags & Meta::FLAG_IPV4 == 0 {
                return Some(());
            }
            let l3 = usize::from(meta.l3_offset);
            let at = l3
                + if let SetField::Ipv4Src(_) = field {
                    12
                } else {
                    16
                };
            let old_bytes = bytes.get(at..at + 4)?;
            let old = u32::from_be_bytes([old_bytes[0], old_bytes[1], old_bytes[2], old_bytes[3]]);
            let new = u32::from(addr);
            let l4 = l4_checksum_at(meta);
            let header_sum = read16(bytes, l3 + 10)?;
            write16(bytes, l3 + 10, update_u32(header_sum, old, new))?;
            bytes.get_mut(at..at + 4)?.copy_from_slice(&addr.octets());
            if let Some((sum_at, udp)) = l4 {
                update_l4(bytes, sum_at, udp, |sum| update_u32(sum, old, new))?;
            }
        }
        SetField::Ipv6Src(addr) | SetField::Ipv6Dst(addr) => {
            if meta.flags & Meta::FLAG_IPV6 == 0 {
                return Some(());
            }
            let at = usize::from(meta.l3_offset)
                + if let SetField::Ipv6Src(_) = field {
                    8
                } else {
                    24
                };
            let mut old = [0u8; 16];
            old.copy_from_slice(bytes.get(at..at + 16)?);
            let new = addr.octets();
            if let Some((sum_at, udp)) = ipv6_upper_checksum_at(meta) {
                update_l4(bytes, sum_at, udp, |mut sum| {
                    for (o, n) in old.chunks_exact(2).zip(new.chunks_exact(2)) {
                        let o = u16::from_be_bytes([o[0], o[1]]);
                        let n = u16::from_be_bytes([n[0], n[1]]);
                        sum = update_word(sum, o, n);
                    }
                    sum
                })?;
            }
            bytes.get_mut(at..at + 16)?.copy_from_slice(&new);
        }
        SetField::L4Src(port) | SetField::L4Dst(port) => {
            let Some((sum_at, udp)) = l4_checksum_at(meta) else {
                return Some(());
            };
            let at =
                usize::from(meta.l4_offset) + if let SetField::L4Src(_) = field { 0 } else { 2 };
            let old = read16(bytes, at)?;
            update_l4(bytes, sum_at, udp, |sum| update_word(sum, old, port))?;
            write16(bytes, at, port)?;
        }
        SetField::VlanVid(vid) => {
            if meta.vlan_depth == 0 {
                return Some(());
            }
            let tci = (read16(bytes, 14)? & 0xf000) | (vid & 0x0fff);
            write16(bytes, 14, tci)?;
            meta.vlan[0] = tci;
        }
    }
    Some(())
}

/// Updates a TCP/UDP checksum at `at`; a zero UDP checksum means "none" and stays zero, and a
/// computed zero is sent as 0xffff (RFC 768).
fn update_l4(bytes: &mut [u8], at: usize, udp: bool, update: impl Fn(u16) -> u16) -> Option<()> {
    let sum = read16(bytes, at)?;
    if udp && sum == 0 {
        return Some(());
    }
    let mut new = update(sum);
    if udp && new == 0 {
        new = 0xffff;
    }
    write16(bytes, at, new)
}

/// Moves the offsets of `meta` (relative to the packet's first byte) by `delta` bytes.
fn shift_offsets(meta: &mut Meta, delta: i32) {
    for offset in [
        &mut meta.l3_offset,
        &mut meta.l4_offset,
        &mut meta.payload_offset,
    ] {
        if *offset != 0 {
            *offset = (i32::from(*offset) + delta).clamp(0, i32::from(u16::MAX)) as u16;
        }
    }
}

fn push_vlan(
    vid: u16,
    frame: &mut [u8],
    desc: &mut Desc,
    meta: &mut Meta,
) -> Result<(), DropReason> {
    if usize::from(meta.vlan_depth) >= meta.vlan.len() {
        return Err(DropReason::VlanTooDeep);
    }
    let start = usize::from(desc.offset);
    let len = usize::from(desc.len);
    if start < 4 || len < 12 || start + len > frame.len() || desc.len > u16::MAX - 4 {
        // No headroom in front of the packet (ports always leave some): it cannot grow.
        return Err(DropReason::Oversize);
    }
    let tpid = if meta.vlan_depth == 0 {
        TPID_8021Q
    } else {
        TPID_8021AD
    };
    let tci = vid & 0x0fff;
    let new_start = start - 4;
    frame.copy_within(start..start + 12, new_start);
    frame[new_start + 12..new_start + 14].copy_from_slice(&tpid.to_be_bytes());
    frame[new_start + 14..new_start + 16].copy_from_slice(&tci.to_be_bytes());
    desc.offset -= 4;
    desc.len += 4;
    shift_offsets(meta, 4);
    meta.vlan.copy_within(..MAX_VLAN_TAGS - 1, 1);
    meta.vlan[0] = tci;
    meta.vlan_depth += 1;
    Ok(())
}

fn pop_vlan(frame: &mut [u8], desc: &mut Desc, meta: &mut Meta) {
    let start = usize::from(desc.offset);
    let len = usize::from(desc.len);
    if meta.vlan_depth == 0 || len < 18 || start + len > frame.len() {
        return;
    }
    frame.copy_within(start..start + 12, start + 4);
    desc.offset += 4;
    desc.len -= 4;
    shift_offsets(meta, -4);
    meta.vlan.copy_within(1.., 0);
    if let Some(last) = meta.vlan.last_mut() {
        *last = 0;
    }
    meta.vlan_depth -= 1;
}

fn dec_ttl(frame: &mut [u8], desc: &Desc, meta: &Meta) -> Result<(), DropReason> {
    let Some(bytes) = packet(frame, desc) else {
        return Ok(());
    };
    let l3 = usize::from(meta.l3_offset);
    if meta.flags & Meta::FLAG_IPV4 != 0 {
        let (Some(&ttl), Some(&protocol)) = (bytes.get(l3 + 8), bytes.get(l3 + 9)) else {
            return Ok(());
        };
        if ttl <= 1 {
            return Err(DropReason::TtlExpired);
        }
        let Some(sum) = read16(bytes, l3 + 10) else {
            return Ok(());
        };
        let old = u16::from_be_bytes([ttl, protocol]);
        let new = u16::from_be_bytes([ttl - 1, protocol]);
        bytes[l3 + 8] = ttl - 1;
        let _ = write16(bytes, l3 + 10, update_word(sum, old, new));
    } else if meta.flags & Meta::FLAG_IPV6 != 0 {
        let Some(hop_limit) = bytes.get_mut(l3 + 7) else {
            return Ok(());
        };
        if *hop_limit <= 1 {
            return Err(DropReason::TtlExpired);
        }
        *hop_limit -= 1;
    }
    Ok(())
}
