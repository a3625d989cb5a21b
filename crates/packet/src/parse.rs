//! The per-packet parser of the hot path: one pass over a frame fills its [`Meta`] and
//! [`FlowKey`], or says why the frame must be dropped.
//!
//! It reads Ethernet, up to two VLAN tags (802.1Q or 802.1ad, stacked), then IPv4 (options
//! skipped), IPv6 (extension headers skipped, at most [`ipv6::MAX_EXTENSION_HEADERS`]) or ARP,
//! and for IP the TCP/UDP ports or the ICMP/ICMPv6 type and code. Other EtherTypes are valid
//! frames: only the L2 part of the key is filled. Non-first fragments have no L4 header; they
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

const PROTO_ICMP: u8 = 1;
const PROTO_TCP: u8 = 6;
const PROTO_UDP: u8 = 17;
const PROTO_ICMPV6: u8 = 58;

/// VLAN tags the parser accepts; one more is [`DropReason::VlanTooDeep`].
pub const MAX_VLAN_TAGS: usize = 2;

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
        in_port,
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
        in_port,
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
        key.vlan = meta.vlan[0] & 0x0fff;
        key.flags |= FlowKey::FLAG_VLAN;
    }
    meta.ethertype = ethertype;
    key.ethertype = ethertype;
    // `offset` <= frame.len() <= u16::MAX here and below: every offset fits.
    meta.l3_offset = offset as u16;

    let l3 = frame.get(offset..).unwrap_or_default();
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
    meta.flags |= Meta::FLAG_IPV4;
    key.ip_src = map_ipv4([h[12], h[13], h[14], h[15]]);
    key.ip_dst = map_ipv4([h[16], h[17], h[18], h[19]]);
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
mod tests {
    use super::*;

    /// A 60-byte unicast IPv4/UDP frame written out by hand: 02:..:02 <- 02:..:01,
    /// 10.0.0.1:1234 -> 10.0.0.2:53, 4 bytes of payload, then 14 bytes of Ethernet padding.
    fn ipv4_udp() -> Vec<u8> {
        let mut frame = vec![
            0x02, 0, 0, 0, 0, 0x02, 0x02, 0, 0, 0, 0, 0x01, 0x08, 0x00, // Ethernet
            0x45, 0x00, 0x00, 0x20, 0x00, 0x01, 0x00, 0x00, 0x40, 0x11, 0x00, 0x00, // IPv4
            10, 0, 0, 1, 10, 0, 0, 2, //
            0x04, 0xd2, 0x00, 0x35, 0x00, 0x0c, 0x00, 0x00, // UDP
            b'p', b'i', b'n', b'g',
        ];
        frame.resize(60, 0);
        frame
    }

    fn run(frame: &[u8]) -> (Result<(), DropReason>, Meta, FlowKey) {
        let mut meta = Meta::EMPTY;
        let mut key = FlowKey::EMPTY;
        let result = parse(frame, 3, &mut meta, &mut key);
        (result, meta, key)
    }

    #[test]
    fn ipv4_udp_with_padding() {
        let (result, meta, key) = run(&ipv4_udp());
        assert_eq!(result, Ok(()));
        assert_eq!(meta.ethertype, 0x0800);
        assert_eq!(
            (meta.l3_offset, meta.l4_offset, meta.payload_offset),
            (14, 34, 42)
        );
        assert_eq!(meta.ip_proto, 17);
        assert_eq!(meta.flags, Meta::FLAG_IPV4 | Meta::FLAG_PARSED);
        assert_eq!(meta.flow_hash, key.hash());
        assert_eq!(key.in_port, 3);
        assert_eq!((key.l4_src, key.l4_dst), (1234, 53));
        assert_eq!(key.ipv4_src(), Some(std::net::Ipv4Addr::new(10, 0, 0, 1)));
        assert_eq!(key.ipv4_dst(), Some(std::net::Ipv4Addr::new(10, 0, 0, 2)));
        assert_eq!(key.src_mac.0, [2, 0, 0, 0, 0, 1]);
        assert_eq!(key.flags, 0);
    }

    #[test]
    fn two_tags_are_read_and_a_third_is_too_deep() {
        let plain = ipv4_udp();
        let mut tagged = plain[..12].to_vec();
        tagged.extend_from_slice(&[0x88, 0xa8, 0x20, 0x0a, 0x81, 0x00, 0x00, 0x14]);
        tagged.extend_from_slice(&plain[12..]);
        let (result, meta, key) = run(&tagged);
        assert_eq!(result, Ok(()));
        assert_eq!(meta.vlan_depth, 2);
        assert_eq!(meta.vlan, [0x200a, 0x0014]);
        assert_eq!((key.vlan, key.flags), (10, FlowKey::FLAG_VLAN));
        assert_eq!((meta.l3_offset, meta.l4_offset), (22, 42));

        let mut deep = plain[..12].to_vec();
        for _ in 0..3 {
            deep.extend_from_slice(&[0x81, 0x00, 0x00, 0x01]);
        }
        deep.extend_from_slice(&plain[12..]);
        assert_eq!(run(&deep).0, Err(DropReason::VlanTooDeep));
    }

    #[test]
    fn ipv4_malformations() {
        let frame = ipv4_udp();
        assert_eq!(run(&frame[..13]).0, Err(DropReason::Truncated));
        assert_eq!(run(&frame[..33]).0, Err(DropReason::Truncated));
        let mut bad = frame.clone();
        bad[14] = 0x44; // IHL 4
        assert_eq!(run(&bad).0, Err(DropReason::BadIpv4Header));
        let mut bad = frame.clone();
        bad[14] = 0x55; // version 5
        assert_eq!(run(&bad).0, Err(DropReason::BadIpv4Header));
        let mut bad = frame.clone();
        bad[16] = 0x01; // total length 288, beyond the frame
        assert_eq!(run(&bad).0, Err(DropReason::BadIpv4Length));
        let mut bad = frame.clone();
        bad[17] = 19; // total length below the header
        assert_eq!(run(&bad).0, Err(DropReason::BadIpv4Length));
        let mut bad = frame.clone();
        bad[38] = 0;
        bad[39] = 7; // UDP length 7
        assert_eq!(run(&bad).0, Err(DropReason::BadL4Header));
        // Total length 28 leaves no room for the UDP payload the UDP length claims.
        let mut bad = frame;
        bad[17] = 28;
        assert_eq!(run(&bad).0, Err(DropReason::BadL4Header));
    }

    #[test]
    fn non_first_fragment_has_no_ports() {
        let mut frame = ipv4_udp();
        frame[20] = 0x00;
        frame[21] = 0xb9; // offset 185 * 8 = 1480
        let (result, meta, key) = run(&frame);
        assert_eq!(result, Ok(()));
        assert_ne!(meta.flags & Meta::FLAG_FRAGMENT, 0);
        assert_eq!((meta.l4_offset, meta.payload_offset), (0, 34));
        assert_eq!((key.l4_src, key.l4_dst), (0, 0));
        assert_eq!(
            key.flags,
            FlowKey::FLAG_FRAGMENT | FlowKey::FLAG_LATER_FRAGMENT
        );
        // A first fragment (MF set, offset 0) keeps its ports.
        let mut frame = ipv4_udp();
        frame[20] = 0x20;
        let (_, meta, key) = run(&frame);
        assert_ne!(meta.flags & Meta::FLAG_FRAGMENT, 0);
        assert_eq!((key.l4_src, key.l4_dst), (1234, 53));
        assert_eq!(key.flags, FlowKey::FLAG_FRAGMENT);
    }

    #[test]
    fn a_first_fragment_is_not_held_to_the_whole_datagrams_lengths() {
        // UDP: the length (3000) is the datagram's, longer than this fragment.
        let mut frame = ipv4_udp();
        frame[20] = 0x20; // MF, offset 0
        frame[38..40].copy_from_slice(&3000u16.to_be_bytes());
        let (result, meta, key) = run(&frame);
        assert_eq!(result, Ok(()));
        assert_eq!((key.l4_src, key.l4_dst), (1234, 53));
        assert_eq!(meta.payload_offset, 42);
        // The same length without MF is a bad header.
        frame[20] = 0x00;
        assert_eq!(run(&frame).0, Err(DropReason::BadL4Header));
        // TCP: a first fragment with only 8 bytes of the TCP header.
        let mut frame = ipv4_udp();
        frame[23] = 6;
        frame[20] = 0x20;
        frame[16..18].copy_from_slice(&28u16.to_be_bytes()); // 20 + 8
        let (result, _, key) = run(&frame);
        assert_eq!(result, Ok(()));
        assert_eq!((key.l4_src, key.l4_dst), (1234, 53));
        // Fewer than the four bytes of ports is still too short.
        frame[16..18].copy_from_slice(&23u16.to_be_bytes());
        assert_eq!(run(&frame).0, Err(DropReason::BadL4Header));
        // IPv6: a Fragment header (offset 0, M set) before UDP of a longer datagram.
        let mut frame = vec![0x02, 0, 0, 0, 0, 0x02, 0x02, 0, 0, 0, 0, 0x01, 0x86, 0xdd];
        frame.extend_from_slice(&[0x60, 0, 0, 0, 0, 20, 44, 64]);
        frame.extend_from_slice(&[0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
        frame.extend_from_slice(&[0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
        frame.extend_from_slice(&[17, 0, 0x00, 0x01, 0, 0, 0, 7]); // Fragment: M, offset 0
        frame.extend_from_slice(&[0x04, 0xd2, 0x00, 0x35, 0x0b, 0xb8, 0, 0]); // UDP, length 3000
        frame.extend_from_slice(b"ping");
        let (result, meta, key) = run(&frame);
        assert_eq!(result, Ok(()));
        assert_ne!(meta.flags & Meta::FLAG_FRAGMENT, 0);
        assert_eq!((key.l4_src, key.l4_dst), (1234, 53));
    }

    #[test]
    fn arp_and_unknown_ethertypes() {
        let mut frame = vec![0xff; 6];
        frame.extend_from_slice(&[0x02, 0, 0, 0, 0, 0x01, 0x08, 0x06]);
        frame.extend_from_slice(&[0, 1, 8, 0, 6, 4, 0, 1, 2, 0, 0, 0, 0, 1, 10, 0, 0, 1]);
        frame.extend_from_slice(&[0, 0, 0, 0, 0, 0, 10, 0, 0, 2]);
        let (result, meta, key) = run(&frame);
        assert_eq!(result, Ok(()));
        assert_eq!(meta.flags, Meta::FLAG_GROUP_DST | Meta::FLAG_PARSED);
        assert_eq!(key.ip_proto, 1);
        assert_eq!(key.ipv4_dst(), Some(std::net::Ipv4Addr::new(10, 0, 0, 2)));
        assert_eq!(run(&frame[..40]).0, Err(DropReason::Truncated));

        let mut lldp = vec![0x01, 0x80, 0xc2, 0, 0, 0x0e, 2, 0, 0, 0, 0, 1, 0x88, 0xcc];
        lldp.extend_from_slice(&[0u8; 46]);
        let (result, meta, key) = run(&lldp);
        assert_eq!(result, Ok(()));
        assert_eq!(
            (meta.ethertype, meta.l3_offset, meta.l4_offset),
            (0x88cc, 14, 0)
        );
        assert_eq!(key.ethertype, 0x88cc);
        assert_eq!(key.ip_src, [0; 16]);
    }

    /// A batch of the hand-written frame, a truncated one, a VLAN-tagged one and a descriptor
    /// that points past its frame: `parse_batch` marks exactly the bad ones, both copies of
    /// the parser agree with `parse` packet for packet, and the unhashed parse differs from
    /// them only in the zero hash.
    #[test]
    fn parse_batch_matches_parse_packet_for_packet() {
        use crate::batch::Desc;
        let mut pool = FramePool::new(8, 2048).unwrap();
        let plain = ipv4_udp();
        let mut tagged = plain[..12].to_vec();
        tagged.extend_from_slice(&[0x81, 0x00, 0x00, 0x2a]);
        tagged.extend_from_slice(&plain[12..]);
        let frames = [plain.clone(), plain[..20].to_vec(), tagged];
        let mut batch = Batch::new(8);
        for (port, bytes) in frames.iter().enumerate() {
            let frame = pool.alloc().unwrap();
            pool.frame_mut(frame)[100..100 + bytes.len()].copy_from_slice(bytes);
            batch.push(Desc {
                frame,
                offset: 100,
                len: bytes.len() as u16,
                port: port as u16,
                queue: 0,
            });
        }
        let frame = pool.alloc().unwrap();
        batch.push(Desc {
            frame,
            offset: 2000,
            len: 60,
            port: 0,
            queue: 0,
        });

        let mut chosen = (batch.clone(), [FlowKey::EMPTY; 4]);
        assert_eq!(parse_batch(&pool, &mut chosen.0, &mut chosen.1), 2);
        let mut copies = vec![chosen];
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("sse4.2") {
            let mut sse42 = (batch.clone(), [FlowKey::EMPTY; 4]);
            // SAFETY: SSE4.2 was detected just above.
            let malformed = unsafe { parse_batch_sse42(&pool, &mut sse42.0, &mut sse42.1) };
            assert_eq!(malformed, 2);
            copies.push(sse42);
        }
        let mut portable = (batch.clone(), [FlowKey::EMPTY; 4]);
        assert_eq!(
            parse_batch_with::<Portable>(&pool, &mut portable.0, &mut portable.1),
            2
        );
        copies.push(portable);

        for (parsed, keys) in &copies {
            for (i, bytes) in frames.iter().enumerate() {
                let mut meta = Meta::EMPTY;
                let mut key = FlowKey::EMPTY;
                let result = parse(bytes, i as u16, &mut meta, &mut key);
                meta.drop = result.err();
                assert_eq!(parsed.meta()[i], meta, "packet {i}");
                assert_eq!(keys[i], key, "packet {i}");
            }
            assert_eq!(parsed.meta()[1].drop, Some(DropReason::Truncated));
            assert_eq!(parsed.meta()[2].vlan_depth, 1);
            assert_eq!(parsed.meta()[3].drop, Some(DropReason::Oversize));
        }

        // Without the hash: the same keys and metadata, with a zero hash.
        let (hashed, hashed_keys) = &copies[0];
        let (mut unhashed, mut unhashed_keys) = (batch.clone(), [FlowKey::EMPTY; 4]);
        assert_eq!(
            parse_batch_unhashed(&pool, &mut unhashed, &mut unhashed_keys),
            2
        );
        assert_eq!(&unhashed_keys, hashed_keys);
        for (with, without) in hashed.meta().iter().zip(unhashed.meta()) {
            assert_eq!(without.flow_hash, 0);
            assert_eq!(
                Meta {
                    flow_hash: with.flow_hash,
                    ..*without
                },
                *with
            );
        }
        assert_ne!(hashed.meta()[0].flow_hash, 0);
    }

    /// Runs the fast path with the general parser behind it, and the general parser alone, on
    /// the same frame from the same starting metadata: both must leave the same result, `Meta`
    /// and `FlowKey`.
    fn fast_and_general_agree(frame: &[u8]) -> Result<(), proptest::test_runner::TestCaseError> {
        let start = Meta {
            rx_time: 99,
            out_port: 4,
            ..Meta::EMPTY
        };
        let (mut meta_a, mut key_a) = (start, FlowKey::EMPTY);
        let (mut meta_b, mut key_b) = (start, FlowKey::EMPTY);
        let a = parse_with::<Portable>(frame, 5, &mut meta_a, &mut key_a);
        let b = parse_general::<Portable>(frame, 5, &mut meta_b, &mut key_b);
        proptest::prop_assert_eq!(a, b);
        proptest::prop_assert_eq!(meta_a, meta_b);
        proptest::prop_assert_eq!(key_a, key_b);
        Ok(())
    }

    /// An IPv4 frame of the kind the fast path takes: TCP (with `tcp`) or UDP, 60 to 80 bytes.
    fn fast_path_frame(tcp: bool, extra: usize) -> Vec<u8> {
        let mut frame = ipv4_udp();
        if tcp {
            frame.truncate(34);
            frame[23] = PROTO_TCP;
            frame.extend_from_slice(&[0x04, 0xd2, 0x00, 0x50, 0, 0, 0, 1, 0, 0, 0, 0, 0x50, 0x10]);
            frame.extend_from_slice(&[0xff, 0xff, 0, 0, 0, 0]);
        }
        frame.resize(60 + extra, 0);
        let total_len = (frame.len() - 14) as u16;
        frame[16..18].copy_from_slice(&total_len.to_be_bytes());
        if !tcp {
            frame[38..40].copy_from_slice(&(total_len - 20).to_be_bytes());
        }
        frame
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(3000))]

        /// Frames the fast path takes or almost takes: every header byte it reads perturbed
        /// one to four at a time (including to the values its checks hinge on), then cut.
        #[test]
        fn fast_path_gives_what_the_general_parser_gives(
            tcp in proptest::prelude::any::<bool>(),
            extra in 0usize..20,
            flips in proptest::collection::vec(
                (0usize..60, proptest::prop_oneof![
                    proptest::prelude::any::<u8>(),
                    proptest::prelude::Just(0u8),
                    proptest::prelude::Just(0x45u8),
                    proptest::prelude::Just(0x46u8),
                    proptest::prelude::Just(0x50u8),
                    proptest::prelude::Just(0x20u8),
                    proptest::prelude::Just(0x40u8),
                    proptest::prelude::Just(20u8),
                    proptest::prelude::Just(28u8),
                    proptest::prelude::Just(0x08u8),
                    proptest::prelude::Just(0x81u8),
                    proptest::prelude::Just(PROTO_TCP),
                    proptest::prelude::Just(PROTO_UDP),
                ]),
                0..4,
            ),
            cut in proptest::prelude::any::<proptest::sample::Index>(),
        ) {
            let mut frame = fast_path_frame(tcp, extra);
            fast_and_general_agree(&frame)?;
            for (at, value) in flips {
                if let Some(byte) = frame.get_mut(at) {
                    *byte = value;
                }
            }
            fast_and_general_agree(&frame)?;
            fast_and_general_agree(&frame[..cut.index(frame.len() + 1)])?;
        }

        #[test]
        fn fast_path_agrees_on_random_bytes(
            frame in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..128),
            ipv4 in proptest::prelude::any::<bool>(),
        ) {
            let mut frame = frame;
            if ipv4 && frame.len() >= 15 {
                frame[12..15].copy_from_slice(&[0x08, 0x00, 0x45]);
            }
            fast_and_general_agree(&frame)?;
        }
    }

    #[test]
    fn fast_path_takes_the_common_frames() {
        for tcp in [false, true] {
            let frame = fast_path_frame(tcp, 6);
            let (mut meta, mut key) = (Meta::EMPTY, FlowKey::EMPTY);
            assert!(parse_ipv4_fast::<Portable>(&frame, 1, &mut meta, &mut key));
            let expected_payload = if tcp { 54 } else { 42 };
            assert_eq!(meta.payload_offset, expected_payload);
            assert_eq!(key.l4_src, 1234);
            assert!(fast_and_general_agree(&frame).is_ok());
        }
        // A group destination sets the flag on the fast path too.
        let mut frame = fast_path_frame(false, 0);
        frame[0] = 0x01;
        let (mut meta, mut key) = (Meta::EMPTY, FlowKey::EMPTY);
        assert!(parse_ipv4_fast::<Portable>(&frame, 1, &mut meta, &mut key));
        assert_ne!(meta.flags & Meta::FLAG_GROUP_DST, 0);
    }

    /// An IPv6 frame from the parser's view: the general parser takes it as plain IPv6
    /// UDP/TCP (untagged, no drop, the transport header right behind the fixed header).
    fn parses_as_plain_ipv6_transport(frame: &[u8]) -> bool {
        let (mut meta, mut key) = (Meta::EMPTY, FlowKey::EMPTY);
        parse_general::<Portable>(frame, 0, &mut meta, &mut key).is_ok()
            && meta.flags & Meta::FLAG_IPV6 != 0
            && meta.vlan_depth == 0
            && meta.l4_offset == 54
            && (meta.ip_proto == PROTO_UDP || meta.ip_proto == PROTO_TCP)
    }

    /// An IPv6 frame of the kind `plain_ipv6_transport` takes: TCP (with `tcp`) or UDP with
    /// `extra` bytes of payload, then `padding` bytes of Ethernet padding.
    fn plain_ipv6_frame(tcp: bool, extra: usize, padding: usize) -> Vec<u8> {
        let mut frame = vec![0x02, 0, 0, 0, 0, 0x02, 0x02, 0, 0, 0, 0, 0x01, 0x86, 0xdd];
        frame.extend_from_slice(&[0x60, 0, 0, 0, 0, 0, 0, 64]);
        frame.extend((0..32).map(|i| 0x20 + i as u8));
        if tcp {
            frame[20] = PROTO_TCP;
            frame.extend_from_slice(&[0x04, 0xd2, 0x00, 0x50, 0, 0, 0, 1, 0, 0, 0, 0, 0x50, 0x10]);
            frame.extend_from_slice(&[0xff, 0xff, 0, 0, 0, 0]);
        } else {
            frame[20] = PROTO_UDP;
            frame.extend_from_slice(&[0x04, 0xd2, 0x00, 0x35, 0, 0, 0, 0]);
        }
        frame.resize(frame.len() + extra, 0x61);
        let segment = (frame.len() - 54) as u16;
        frame[18..20].copy_from_slice(&segment.to_be_bytes());
        if !tcp {
            frame[58..60].copy_from_slice(&segment.to_be_bytes());
        }
        frame.resize(frame.len() + padding, 0);
        frame
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(3000))]

        /// `plain_ipv6_transport` takes exactly the frames the general parser takes as plain
        /// IPv6 UDP/TCP: every header byte it reads perturbed one to four at a time (also to
        /// the values its checks hinge on), then cut.
        #[test]
        fn plain_ipv6_is_what_the_general_parser_takes_as_plain_ipv6(
            tcp in proptest::prelude::any::<bool>(),
            extra in 0usize..12,
            padding in 0usize..8,
            flips in proptest::collection::vec(
                (proptest::prop_oneof![12usize..22, 54usize..80], proptest::prop_oneof![
                    proptest::prelude::any::<u8>(),
                    proptest::prelude::Just(0u8),
                    proptest::prelude::Just(0x60u8),
                    proptest::prelude::Just(0x50u8),
                    proptest::prelude::Just(0x40u8),
                    proptest::prelude::Just(8u8),
                    proptest::prelude::Just(20u8),
                    proptest::prelude::Just(0x86u8),
                    proptest::prelude::Just(0xddu8),
                    proptest::prelude::Just(PROTO_TCP),
                    proptest::prelude::Just(PROTO_UDP),
                    proptest::prelude::Just(PROTO_ICMPV6),
                ]),
                0..4,
            ),
            cut in proptest::prelude::any::<proptest::sample::Index>(),
        ) {
            let mut frame = plain_ipv6_frame(tcp, extra, padding);
            proptest::prop_assert!(plain_ipv6_transport(&frame).is_some());
            proptest::prop_assert!(parses_as_plain_ipv6_transport(&frame));
            for (at, value) in flips {
                if let Some(byte) = frame.get_mut(at) {
                    *byte = value;
                }
            }
            for frame in [&frame[..], &frame[..cut.index(frame.len() + 1)]] {
                proptest::prop_assert_eq!(
                    plain_ipv6_transport(frame).is_some(),
                    parses_as_plain_ipv6_transport(frame),
                    "{:02x?}", frame
                );
            }
        }
    }

    #[test]
    fn oversize_frame_is_refused() {
        let frame = vec![0u8; usize::from(u16::MAX) + 1];
        assert_eq!(run(&frame).0, Err(DropReason::Oversize));
    }
}
