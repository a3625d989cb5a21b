//! The per-packet parser of the hot path: one pass over a frame fills its [`Meta`] and
//! [`FlowKey`], or says why the frame must be dropped.
//!
//! It reads Ethernet II or IEEE 802.3 with LLC (and SNAP), up to [`MAX_VLAN_TAGS`] VLAN tags
//! (802.1Q or 802.1ad, stacked), then IPv4 (option lengths checked, options skipped), IPv6
//! (extension headers skipped, at most [`ipv6::MAX_EXTENSION_HEADERS`]) or ARP, and for IP the
//! TCP/UDP ports or the ICMP/ICMPv6 type and code. Other EtherTypes are valid frames: only the
//! L2 part of the key is filled. Non-first fragments have no L4 header; they
//! are marked and keep zero ports.
//!
//! Why it is written by hand instead of chaining the `wire` views' `new_checked`: the views
//! report *that* a header is bad, the data plane needs to know *which* counter to bump, and
//! this function runs for every packet. Every header is taken with `first_chunk`, so each
//! length is checked exactly once and every later field read is a constant index into an array
//! that cannot fail. There is no allocation and no panic on any input (property tests and the
//! `parse` fuzz target check that). IPv4 header checksums are not verified here; the router
//! does that, a bridge never needs to.
//!
//! The frames a forwarder sees most (untagged IPv4 without options, UDP or TCP) take a fast
//! path that checks everything on one fixed-size chunk first and then writes the key and the
//! metadata once; everything else, and every malformation, goes through the general parser,
//! which alone decides drop reasons. A property test holds the two to the same result. With
//! the batch parser ([`parse_batch`]) compiled for SSE4.2 and the hash inlined, this took the
//! cross-connect from 392 to 196 instructions per packet (callgrind, batch 32).

use crate::batch::{Batch, DropReason, Meta};
use crate::flow_key::FlowKey;
use crate::pool::FramePool;
use crate::wire::{EthernetAddress, IpProtocol, ipv6};

const _: () = assert!(Meta::FLAG_GROUP_DST == 1 << 2);

const ETHERTYPE_IPV4: u16 = 0x0800;
const ETHERTYPE_ARP: u16 = 0x0806;
const ETHERTYPE_IPV6: u16 = 0x86dd;
const TPID_8021Q: u16 = 0x8100;
const TPID_8021AD: u16 = 0x88a8;
/// Type field values below this are an IEEE 802.3 length, not an EtherType.
const ETHERTYPE_MIN: u16 = 0x0600;
/// An LLC PDU that runs to the end of the frame (a jumbo frame cannot give its length).
const ETHERTYPE_JUMBO_LLC: u16 = 0x8870;
/// The key's EtherType for an 802.3 frame whose LLC PDU carries no EtherType, the value Open
/// vSwitch uses (`FLOW_DL_TYPE_NONE`): below 0x0600, so no real EtherType matches it.
pub const ETHERTYPE_NONE: u16 = 0x05ff;

const PROTO_ICMP: u8 = 1;
const PROTO_TCP: u8 = 6;
const PROTO_UDP: u8 = 17;
const PROTO_ICMPV6: u8 = 58;

pub use crate::batch::MAX_VLAN_TAGS;

/// Parses `frame` (received on `in_port`) into `meta` and `key`.
///
/// On success every field of `meta` the parse owns is set (`ethertype`, `l3_offset`,
/// `l4_offset`, `payload_offset`, `vlan`, `vlan_depth`, `ip_proto`, `flow_hash`, `flags` with
/// [`Meta::FLAG_PARSED`]); `rx_time`, `out_port` and `drop` are left alone. `l3_offset` is where
/// the L2 header ends, for every EtherType. `l4_offset` is 0 for non-IP frames and non-first
/// fragments; `payload_offset` is 0 when the transport is not TCP/UDP/ICMP (for a non-first
/// fragment it is where the fragment's data starts). `key` is overwritten entirely.
///
/// On error the reason is returned and the fields learned so far stay in `meta` (without
/// `FLAG_PARSED`); the caller records the drop.
#[inline]
pub fn parse(
    frame: &[u8],
    in_port: u16,
    meta: &mut Meta,
    key: &mut FlowKey,
) -> Result<(), DropReason> {
    parse_with::<Dispatch>(frame, in_port, meta, key)
}

/// Parses every packet of `batch` (read from `pool`, received on `desc.port`) as [`parse`]
/// does, with `keys[i]` receiving packet i's flow key; a packet that fails gets its reason in
/// `meta.drop` (a descriptor pointing outside its frame: [`DropReason::Oversize`]). Only the
/// first `keys.len()` packets are parsed. Returns how many packets were marked for drop.
///
/// The parser is compiled twice, once for CPUs with SSE4.2 and once portable, and the copy is
/// chosen once per batch: in the SSE4.2 copy the flow-key hash is seven inlined `crc32`
/// instructions instead of a call through a run-time choice per packet.
pub fn parse_batch(pool: &FramePool, batch: &mut Batch, keys: &mut [FlowKey]) -> usize {
    #[cfg(target_arch = "x86_64")]
    if crate::flow_key::crc32c_uses_hardware() {
        // SAFETY: `crc32c_uses_hardware` is true only when SSE4.2 was detected on this CPU.
        return unsafe { parse_batch_sse42(pool, batch, keys) };
    }
    parse_batch_with::<Portable>(pool, batch, keys)
}

/// [`parse_batch`] without the flow hash: `meta.flow_hash` is set to 0. For pipelines in which
/// no stage reads the hash (the cross-connect, a bridge without ACL): the hash is a quarter of
/// the fast path's instructions, and a value nobody reads is not worth computing per packet.
pub fn parse_batch_unhashed(pool: &FramePool, batch: &mut Batch, keys: &mut [FlowKey]) -> usize {
    parse_batch_with::<NoHash>(pool, batch, keys)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse4.2")]
fn parse_batch_sse42(pool: &FramePool, batch: &mut Batch, keys: &mut [FlowKey]) -> usize {
    parse_batch_with::<Sse42>(pool, batch, keys)
}

#[inline(always)]
fn parse_batch_with<H: KeyHash>(
    pool: &FramePool,
    batch: &mut Batch,
    keys: &mut [FlowKey],
) -> usize {
    let (descs, metas) = batch.split_mut();
    let mut malformed = 0;
    for ((desc, meta), key) in descs.iter().zip(metas.iter_mut()).zip(keys.iter_mut()) {
        let frame = pool.frame(desc.frame);
        let start = usize::from(desc.offset);
        let Some(bytes) = frame.get(start..start + usize::from(desc.len)) else {
            // A descriptor that points outside its frame is a backend bug or a hostile
            // length; either way the packet cannot be trusted.
            meta.drop = Some(DropReason::Oversize);
            malformed += 1;
            continue;
        };
        if let Err(reason) = parse_with::<H>(bytes, desc.port, meta, key) {
            meta.drop = Some(reason);
            malformed += 1;
        }
    }
    malformed
}

/// How the parse computes the flow hash: fixed at compile time for each copy of the parser.
trait KeyHash {
    fn hash(key: &FlowKey) -> u32;
}

/// Whatever [`FlowKey::hash`] chooses, per call.
struct Dispatch;

impl KeyHash for Dispatch {
    #[inline(always)]
    fn hash(key: &FlowKey) -> u32 {
        key.hash()
    }
}

/// No hash at all (see [`parse_batch_unhashed`]).
struct NoHash;

impl KeyHash for NoHash {
    #[inline(always)]
    fn hash(_key: &FlowKey) -> u32 {
        0
    }
}

/// Software CRC32C.
struct Portable;

impl KeyHash for Portable {
    #[inline(always)]
    fn hash(key: &FlowKey) -> u32 {
        key.hash_portable()
    }
}

/// The SSE4.2 instruction. Named only inside [`parse_batch_sse42`], which runs only on CPUs
/// with SSE4.2 and lets the compiler inline the instruction.
#[cfg(target_arch = "x86_64")]
struct Sse42;

#[cfg(target_arch = "x86_64")]
impl KeyHash for Sse42 {
    #[inline(always)]
    fn hash(key: &FlowKey) -> u32 {
        // SAFETY: this type is used only by `parse_batch_sse42`, which is called only after
        // SSE4.2 was detected on this CPU.
        unsafe { key.hash_sse42() }
    }
}

#[inline(always)]
fn parse_with<H: KeyHash>(
    frame: &[u8],
    in_port: u16,
    meta: &mut Meta,
    key: &mut FlowKey,
) -> Result<(), DropReason> {
    if parse_ipv4_fast::<H>(frame, in_port, meta, key) {
        return Ok(());
    }
    parse_general::<H>(frame, in_port, meta, key)
}

/// A frame of the common case, which the fast paths take: see [`plain_ipv4_transport`].
#[derive(Clone, Copy, Debug)]
pub struct PlainIpv4<'a> {
    /// The frame's first 42 bytes: the Ethernet header, the 20-byte IPv4 header at 14 and the
    /// transport header's first 8 bytes at 34 (the ports, and for UDP its length).
    pub head: &'a [u8; 42],
    /// Where the transport payload starts: 42 after UDP, 34 plus the header length after TCP.
    pub payload_offset: u16,
}

/// Whether `frame` is the common case, in one definition for every fast path that skips the
/// general parser (this parser's own, the router's forwarding loop): untagged Ethernet, IPv4
/// with a 20-byte header and a total length that fits the frame, not a fragment, and UDP with
/// a length that fits the IP payload or TCP with a header that does. Such a frame parses
/// without a drop reason, into what [`parse_ipv4_fast`] writes. Anything else is `None`.
///
/// All the checks work on one fixed 42-byte chunk (54 for TCP), so there is one bounds check
/// and every field read is a constant index; no condition is tested that another implies.
#[inline(always)]
pub fn plain_ipv4_transport(frame: &[u8]) -> Option<PlainIpv4<'_>> {
    let h = frame.first_chunk::<42>()?;
    if frame.len() > usize::from(u16::MAX) || [h[12], h[13], h[14]] != [0x08, 0x00, 0x45] {
        return None;
    }
    let total_len = usize::from(u16::from_be_bytes([h[16], h[17]]));
    let fragment = u16::from_be_bytes([h[20], h[21]]) & 0x3fff;
    // The IP payload without Ethernet padding, as `parse_ipv4` cuts it. A total length under
    // 20 wraps it past any frame, so one comparison says that the total length both holds the
    // header and fits the frame.
    let segment = total_len.wrapping_sub(20);
    if segment > frame.len() - 34 || fragment != 0 {
        return None;
    }
    // A transport header that fits the segment also says that the segment holds one.
    let payload_offset = match h[23] {
        PROTO_UDP => {
            let length = usize::from(u16::from_be_bytes([h[38], h[39]]));
            if !(8..=segment).contains(&length) {
                return None;
            }
            42
        }
        PROTO_TCP => {
            let t = frame.first_chunk::<54>()?;
            let header_len = usize::from(t[46] >> 4) * 4;
            if !(20..=segment).contains(&header_len) {
                return None;
            }
            34 + header_len as u16
        }
        _ => return None,
    };
    Some(PlainIpv4 {
        head: h,
        payload_offset,
    })
}

/// Whether `frame` is the common IPv6 case, for the router's forwarding loop: untagged
/// Ethernet, IPv6 whose payload length fits the frame, no extension header, and UDP with a
/// length that fits the payload or TCP with a header that does. Such a frame parses without a
/// drop reason, as IPv6 with its transport header right after the fixed header (a test holds
/// the two definitions to each other). Returns the Ethernet and IPv6 headers, the first 54
/// bytes; anything else is `None`.
#[inline(always)]
pub fn plain_ipv6_transport(frame: &[u8]) -> Option<&[u8; 54]> {
    let h = frame.first_chunk::<54>()?;
    if frame.len() > usize::from(u16::MAX) || [h[12], h[13]] != [0x86, 0xdd] || h[14] >> 4 != 6 {
        return None;
    }
    // The IP payload without Ethernet padding, as `parse_ipv6` cuts it.
    let segment = usize::from(u16::from_be_bytes([h[18], h[19]]));
    let transport = frame.get(54..54 + segment)?;
    let fits = match h[20] {
        PROTO_UDP => transport.first_chunk::<8>().is_some_and(|udp| {
            (8..=segment).contains(&usize::from(u16::from_be_bytes([udp[4], udp[5]])))
        }),
        PROTO_TCP => transport
            .first_chunk::<20>()
            .is_some_and(|tcp| (20..=segment).contains(&(usize::from(tcp[12] >> 4) * 4))),
        _ => false,
    };
    fits.then_some(h)
}

/// The common case ([`plain_ipv4_transport`]) in one step: the checks first, then the key and
/// the metadata written once each. Anything else returns `false` with nothing written, and
/// [`parse_general`] decides, so the result is always the one `parse_general` would give (a
/// property test checks that on random and mutated frames).
#[inline(always)]
fn parse_ipv4_fast<H: KeyHash>(
    frame: &[u8],
    in_port: u16,
    meta: &mut Meta,
    key: &mut FlowKey,
) -> bool {
    let Some(PlainIpv4 {
        head: h,
        payload_offset,
    }) = plain_ipv4_transport(frame)
    else {
        return false;
    };
    let protocol = h[23];
    let fast = FlowKey {
        ip_src: map_ipv4([h[26], h[27], h[28], h[29]]),
        ip_dst: map_ipv4([h[30], h[31], h[32], h[33]]),
        dst_mac: EthernetAddress([h[0], h[1], h[2], h[3], h[4], h[5]]),
        src_mac: EthernetAddress([h[6], h[7], h[8], h[9], h[10], h[11]]),
        in_port: FlowKey::port_byte(in_port),
        ip_tos: h[15],
        vlan: 0,
        ethertype: ETHERTYPE_IPV4,
        l4_src: u16::from_be_bytes([h[34], h[35]]),
        l4_dst: u16::from_be_bytes([h[36], h[37]]),
        ip_proto: protocol,
        flags: 0,
    };
    // Hashed before it is stored, so the hash works on registers, not on memory just written.
    meta.flow_hash = H::hash(&fast);
    *key = fast;
    meta.ethertype = ETHERTYPE_IPV4;
    meta.l3_offset = 14;
    meta.l4_offset = 34;
    meta.payload_offset = payload_offset;
    meta.vlan = [0; MAX_VLAN_TAGS];
    meta.vlan_depth = 0;
    meta.ip_proto = protocol;
    // FLAG_GROUP_DST is bit 2: the group bit of the destination MAC moved there.
    meta.flags = Meta::FLAG_IPV4 | Meta::FLAG_PARSED | ((h[0] & 0x01) << 2);
    true
}

/// Every frame the fast path does not take: VLAN tags, IPv6, ARP, options, fragments, ICMP,
/// other EtherTypes, and every malformation with its drop reason.
fn parse_general<H: KeyHash>(
    frame: &[u8],
    in_port: u16,
    meta: &mut Meta,
    key: &mut FlowKey,
) -> Result<(), DropReason> {
    *key = FlowKey {
        in_port: FlowKey::port_byte(in_port),
        ..FlowKey::EMPTY
    };
    meta.flow_hash = 0;
    meta.ethertype = 0;
    meta.l3_offset = 0;
    meta.l4_offset = 0;
    meta.payload_offset = 0;
    meta.vlan = [0; MAX_VLAN_TAGS];
    meta.vlan_depth = 0;
    meta.ip_proto = 0;
    meta.flags = 0;

    // Offsets are stored as u16; a descriptor cannot describe a longer packet anyway.
    if frame.len() > usize::from(u16::MAX) {
        return Err(DropReason::Oversize);
    }
    let Some(eth) = frame.first_chunk::<14>() else {
        return Err(DropReason::Truncated);
    };
    key.dst_mac.0 = [eth[0], eth[1], eth[2], eth[3], eth[4], eth[5]];
    key.src_mac.0 = [eth[6], eth[7], eth[8], eth[9], eth[10], eth[11]];
    if eth[0] & 0x01 != 0 {
        meta.flags |= Meta::FLAG_GROUP_DST;
    }

    let mut ethertype = u16::from_be_bytes([eth[12], eth[13]]);
    let mut offset = 14usize;
    let mut depth = 0usize;
    while ethertype == TPID_8021Q || ethertype == TPID_8021AD {
        let Some(slot) = meta.vlan.get_mut(depth) else {
            return Err(DropReason::VlanTooDeep);
        };
        let Some(tag) = frame.get(offset..).and_then(<[u8]>::first_chunk::<4>) else {
            return Err(DropReason::Truncated);
        };
        *slot = u16::from_be_bytes([tag[0], tag[1]]);
        ethertype = u16::from_be_bytes([tag[2], tag[3]]);
        offset += 4;
        depth += 1;
    }
    meta.vlan_depth = depth as u8;
    if depth > 0 {
        key.vlan = meta.vlan[0] & (FlowKey::VLAN_PCP | FlowKey::VLAN_VID);
        key.flags |= FlowKey::FLAG_VLAN;
    }
    let mut l3 = frame.get(offset..).unwrap_or_default();
    if ethertype < ETHERTYPE_MIN || ethertype == ETHERTYPE_JUMBO_LLC {
        let length = if ethertype == ETHERTYPE_JUMBO_LLC {
            l3.len()
        } else {
            usize::from(ethertype)
        };
        let (llc_ethertype, header_len, pdu) = ieee_802_3(length, l3)?;
        ethertype = llc_ethertype;
        offset += header_len;
        l3 = pdu.get(header_len..).unwrap_or_default();
    }
    meta.ethertype = ethertype;
    key.ethertype = ethertype;
    // `offset` <= frame.len() <= u16::MAX here and below: every offset fits.
    meta.l3_offset = offset as u16;

    match ethertype {
        ETHERTYPE_IPV4 => parse_ipv4(l3, offset, meta, key)?,
        ETHERTYPE_IPV6 => parse_ipv6(l3, offset, meta, key)?,
        ETHERTYPE_ARP => parse_arp(l3, key)?,
        _ => {}
    }

    meta.flow_hash = H::hash(key);
    meta.flags |= Meta::FLAG_PARSED;
    Ok(())
}

/// An IEEE 802.3 frame: the type field is the length of the LLC PDU that follows (802.3
/// clause 3.2.6, values below 0x0600), and bytes after it are padding. An LLC header with SNAP
/// and OUI 0 (RFC 1042, IP over IEEE 802 networks) carries an EtherType: the frame is parsed on
/// as one, after the 8 bytes of LLC and SNAP, as Open vSwitch and Wireshark do. EtherType 0x8870
/// announces the same LLC PDU in a frame too long for a length field (jumbo LLC, as IS-IS uses). Any other LLC
/// PDU (spanning tree, other SNAP OUIs) keys as [`ETHERTYPE_NONE`] with its data left unread.
///
/// Returns the EtherType, the length of the LLC and SNAP headers in front of what the L3 parse
/// reads (0 when it reads nothing), and the PDU without the padding.
fn ieee_802_3(length: usize, rest: &[u8]) -> Result<(u16, usize, &[u8]), DropReason> {
    let Some(pdu) = rest.get(..length) else {
        return Err(DropReason::Truncated);
    };
    match pdu.first_chunk::<8>() {
        Some([0xaa, 0xaa, 0x03, 0, 0, 0, high, low]) => {
            Ok((u16::from_be_bytes([*high, *low]), 8, pdu))
        }
        _ => Ok((ETHERTYPE_NONE, 0, pdu)),
    }
}

fn parse_ipv4(
    ip: &[u8],
    l3_offset: usize,
    meta: &mut Meta,
    key: &mut FlowKey,
) -> Result<(), DropReason> {
    let Some(h) = ip.first_chunk::<20>() else {
        return Err(DropReason::Truncated);
    };
    let header_len = usize::from(h[0] & 0x0f) * 4;
    if h[0] >> 4 != 4 || header_len < 20 {
        return Err(DropReason::BadIpv4Header);
    }
    let total_len = usize::from(u16::from_be_bytes([h[2], h[3]]));
    // Bytes past the total length are Ethernet padding and ignored.
    if total_len < header_len || total_len > ip.len() {
        return Err(DropReason::BadIpv4Length);
    }
    let options = ip.get(20..header_len).unwrap_or_default();
    if !ipv4_options_are_valid(options) {
        return Err(DropReason::BadIpv4Header);
    }
    meta.flags |= Meta::FLAG_IPV4;
    key.ip_src = map_ipv4([h[12], h[13], h[14], h[15]]);
    key.ip_dst = map_ipv4([h[16], h[17], h[18], h[19]]);
    key.ip_tos = h[1];
    let protocol = h[9];
    key.ip_proto = protocol;
    meta.ip_proto = protocol;

    let l4_offset = l3_offset + header_len;
    let frag = u16::from_be_bytes([h[6], h[7]]);
    let frag_offset = frag & 0x1fff;
    if frag & 0x3fff != 0 {
        meta.flags |= Meta::FLAG_FRAGMENT;
        key.flags |= FlowKey::FLAG_FRAGMENT;
    }
    if frag_offset != 0 {
        key.flags |= FlowKey::FLAG_LATER_FRAGMENT;
        meta.payload_offset = l4_offset as u16;
        return Ok(());
    }
    let segment = ip.get(header_len..total_len).unwrap_or_default();
    // A first fragment (more fragments follow) holds the start of the datagram only.
    let first_fragment = frag & 0x2000 != 0;
    parse_l4(
        segment,
        l4_offset,
        protocol,
        PROTO_ICMP,
        first_fragment,
        meta,
        key,
    )
}

/// RFC 791 3.1: the options are single bytes (End of Option List 0, No Operation 1) and
/// entries of kind, length and data whose length counts the kind and length bytes and ends
/// inside the header. After End of Option List only padding follows. An option shorter than
/// its own fields ([`ipv4_option_min_len`]) is malformed too, as Wireshark finds it.
///
/// TCP options are not checked: they are the two ends' business, and a forwarder (Linux, Open
/// vSwitch) passes a segment whatever they hold.
fn ipv4_options_are_valid(mut options: &[u8]) -> bool {
    while let Some((&kind, rest)) = options.split_first() {
        match kind {
            0 => return true,
            1 => options = rest,
            _ => {
                let length = rest.first().map_or(0, |&length| usize::from(length));
                match options.get(length..) {
                    Some(after) if length >= ipv4_option_min_len(kind) => options = after,
                    _ => return false,
                }
            }
        }
    }
    true
}

/// The shortest valid length of an IPv4 option: its kind and length bytes plus the fields the
/// defining RFC gives it.
fn ipv4_option_min_len(kind: u8) -> usize {
    match kind {
        // Record Route, Loose and Strict Source Route (RFC 791): a pointer.
        7 | 131 | 137 => 3,
        // Timestamp (RFC 791): pointer, overflow and flags. Stream ID (RFC 791), MTU Probe and
        // Reply (RFC 1063), Router Alert (RFC 2113): two bytes of value.
        68 | 136 | 11 | 12 | 148 => 4,
        // Quick-Start (RFC 4782).
        25 => 8,
        // Traceroute (RFC 1393).
        82 => 12,
        _ => 2,
    }
}

fn parse_ipv6(
    ip: &[u8],
    l3_offset: usize,
    meta: &mut Meta,
    key: &mut FlowKey,
) -> Result<(), DropReason> {
    let Some(h) = ip.first_chunk::<40>() else {
        return Err(DropReason::Truncated);
    };
    if h[0] >> 4 != 6 {
        return Err(DropReason::BadIpv6Header);
    }
    let payload_len = usize::from(u16::from_be_bytes([h[4], h[5]]));
    let Some(payload) = ip.get(40..40 + payload_len) else {
        return Err(DropReason::BadIpv6Header);
    };
    meta.flags |= Meta::FLAG_IPV6;
    // The traffic class: the 8 bits after the version.
    key.ip_tos = (h[0] << 4) | (h[1] >> 4);
    if let (Some(src), Some(dst)) = (h.get(8..24), h.get(24..40)) {
        key.ip_src.copy_from_slice(src);
        key.ip_dst.copy_from_slice(dst);
    }

    let next_header = h[6];
    let upper = if ipv6::is_extension_header(IpProtocol::from(next_header)) {
        ipv6::walk_extension_headers(payload, IpProtocol::from(next_header))
            .map_err(|_| DropReason::BadIpv6Header)?
    } else {
        ipv6::UpperLayer {
            protocol: IpProtocol::from(next_header),
            offset: 0,
            extension_headers: 0,
            fragment: None,
        }
    };
    let protocol = u8::from(upper.protocol);
    key.ip_proto = protocol;
    meta.ip_proto = protocol;

    let l4_offset = l3_offset + 40 + upper.offset;
    if let Some((frag_offset, more)) = upper.fragment {
        if frag_offset != 0 || more {
            meta.flags |= Meta::FLAG_FRAGMENT;
            key.flags |= FlowKey::FLAG_FRAGMENT;
        }
        if frag_offset != 0 {
            key.flags |= FlowKey::FLAG_LATER_FRAGMENT;
            meta.payload_offset = l4_offset as u16;
            return Ok(());
        }
    }
    let segment = payload.get(upper.offset..).unwrap_or_default();
    let first_fragment = upper.fragment.is_some_and(|(_, more)| more);
    parse_l4(
        segment,
        l4_offset,
        protocol,
        PROTO_ICMPV6,
        first_fragment,
        meta,
        key,
    )
}

/// Reads the transport header at the start of `segment` (the IP payload, padding excluded).
/// `icmp` is the ICMP protocol number of the IP version at hand. In a `first_fragment` (more
/// fragments follow) the segment is only the datagram's start: the UDP length describes the
/// whole datagram (RFC 768, 791, 8200), and the TCP header may continue in the next fragment,
/// so neither is checked against the segment; the ports, in its first four bytes, still key
/// the flow.
fn parse_l4(
    segment: &[u8],
    l4_offset: usize,
    protocol: u8,
    icmp: u8,
    first_fragment: bool,
    meta: &mut Meta,
    key: &mut FlowKey,
) -> Result<(), DropReason> {
    meta.l4_offset = l4_offset as u16;
    match protocol {
        PROTO_TCP | PROTO_UDP if first_fragment => {
            let Some(h) = segment.first_chunk::<4>() else {
                return Err(DropReason::BadL4Header);
            };
            key.l4_src = u16::from_be_bytes([h[0], h[1]]);
            key.l4_dst = u16::from_be_bytes([h[2], h[3]]);
            let header_len = if protocol == PROTO_UDP {
                8
            } else {
                segment
                    .get(12)
                    .map_or(20, |byte| usize::from(byte >> 4) * 4)
            };
            meta.payload_offset = (l4_offset + header_len.min(segment.len())) as u16;
        }
        PROTO_TCP => {
            let Some(h) = segment.first_chunk::<20>() else {
                return Err(DropReason::BadL4Header);
            };
            let header_len = usize::from(h[12] >> 4) * 4;
            if header_len < 20 || header_len > segment.len() {
                return Err(DropReason::BadL4Header);
            }

            key.l4_src = u16::from_be_bytes([h[0], h[1]]);
            key.l4_dst = u16::from_be_bytes([h[2], h[3]]);
            meta.payload_offset = (l4_offset + header_len) as u16;
        }
        PROTO_UDP => {
            let Some(h) = segment.first_chunk::<8>() else {
                return Err(DropReason::BadL4Header);
            };
            let length = usize::from(u16::from_be_bytes([h[4], h[5]]));
            if length < 8 || length > segment.len() {
                return Err(DropReason::BadL4Header);
            }
            key.l4_src = u16::from_be_bytes([h[0], h[1]]);
            key.l4_dst = u16::from_be_bytes([h[2], h[3]]);
            meta.payload_offset = (l4_offset + 8) as u16;
        }
        p if p == icmp => {
            let Some(h) = segment.first_chunk::<8>() else {
                return Err(DropReason::BadL4Header);
            };
            key.l4_src = u16::from_be_bytes([h[0], h[1]]);
            meta.payload_offset = (l4_offset + 8) as u16;
        }
        _ => {}
    }
    Ok(())
}

/// Ethernet/IPv4 ARP fills the protocol addresses and the operation; other hardware/protocol
/// combinations are valid frames with an L2-only key.
fn parse_arp(arp: &[u8], key: &mut FlowKey) -> Result<(), DropReason> {
    let Some(fixed) = arp.first_chunk::<8>() else {
        return Err(DropReason::Truncated);
    };
    if fixed[..6] != [0x00, 0x01, 0x08, 0x00, 6, 4] {
        return Ok(());
    }
    let Some(a) = arp.first_chunk::<28>() else {
        return Err(DropReason::Truncated);
    };
    key.ip_proto = a[7];
    key.ip_src = map_ipv4([a[14], a[15], a[16], a[17]]);
    key.ip_dst = map_ipv4([a[24], a[25], a[26], a[27]]);
    Ok(())
}

#[inline(always)]
fn map_ipv4(octets: [u8; 4]) -> [u8; 16] {
    let [a, b, c, d] = octets;
    [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, a, b, c, d]
}

#[cfg(test)]
mod tests;
