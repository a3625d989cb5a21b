//! The fused IPv4 forwarding loop (DPDK l3fwd, VPP's ip4-lookup + ip4-rewrite): for the common
//! packet, every step the router takes on it — validate, look up, decrement the TTL with the
//! incremental checksum, write the pre-built rewrite, choose the port — in one pass over the
//! batch, straight from the frame's fixed offsets, with no parse and no per-stage decision
//! written and read back.
//!
//! A packet qualifies when the stage passes would forward it through a current adjacency
//! ([`Adjacencies`]) and nothing else: untagged Ethernet to a unicast MAC, IPv4 with a 20-byte
//! header, not a fragment, UDP or TCP with consistent lengths (exactly the frames the packet
//! parser's own fast path accepts, so the parse could not have dropped it), a good header
//! checksum, TTL above 1, neither address a martian, a route to a single gateway (no ECMP pick)
//! whose adjacency is current. Everything else is left untouched, its `Meta` still empty, for
//! the stage passes, which skip the packets decided here (their `out_port` is set): so ARP and
//! NDP, ICMP errors, local delivery, holds and every drop reason behave exactly as without this
//! loop, and the order of the batch is kept.
//!
//! Only one thing could tell the two paths apart: the discovery stage, which runs before the
//! route stage, may learn a neighbour from an ARP or ICMPv6 packet of the batch and so change
//! the rewrite of packets ahead of it in the batch. A batch that holds a frame discovery may
//! act on (an ARP frame, an IPv6 packet whose next header is neither TCP nor UDP) is therefore
//! left whole to the stages, before anything is written: the loop first looks at every frame's
//! EtherType, prefetching the tbl24 entry of each IPv4 destination on the way, then forwards.
//!
//! Counters: [`FastPathCounters`]. One batch function, [`FastPath::process`]; no trace format:
//! a traced router leaves every packet to the stages so their trace lines stay complete.

use wirespeed_packet::wire::ipv4;
use wirespeed_packet::{Batch, Desc, FramePool, Meta};

use crate::stage::route::{header_checksum_is_valid, martian_v4};
use crate::table::adjacency::Adjacencies;
use crate::table::fib::Ipv4Fib;

const ETHERTYPE_IPV4: [u8; 2] = [0x08, 0x00];
const ETHERTYPE_ARP: [u8; 2] = [0x08, 0x06];
const ETHERTYPE_IPV6: [u8; 2] = [0x86, 0xdd];
const PROTO_TCP: u8 = 6;
const PROTO_UDP: u8 = 17;

/// What the loop did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FastPathCounters {
    /// Packets forwarded by the loop. The router also counts them where the stages would have
    /// (looked up by the route stage, forwarded by the neighbour stage).
    pub forwarded: u64,
    /// Batches left whole to the stages because a frame of theirs may teach the neighbour
    /// table.
    pub declined: u64,
}

/// How much of a batch the loop decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Coverage {
    /// Every packet was forwarded: no stage has anything left to do.
    All,
    /// Some packets (perhaps none) were forwarded; the others are left for the stages.
    Part,
}

/// The fused loop. See the module documentation.
#[derive(Debug, Default)]
pub struct FastPath {
    counters: FastPathCounters,
}

impl FastPath {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn counters(&self) -> FastPathCounters {
        self.counters
    }

    /// Forwards every packet of `batch` that qualifies (see the module documentation) by the
    /// routes of `fib` and the adjacencies current under the neighbour table's `generation`,
    /// and says whether any packet is left for the stages.
    pub fn process(
        &mut self,
        pool: &mut FramePool,
        batch: &mut Batch,
        fib: &Ipv4Fib,
        adjacencies: &Adjacencies,
        generation: u64,
    ) -> Coverage {
        if !look_ahead(pool, batch, fib) {
            self.counters.declined += 1;
            return Coverage::Part;
        }
        let (descs, metas) = batch.split_mut();
        let mut forwarded = 0;
        for (desc, meta) in descs.iter().zip(metas.iter_mut()) {
            forwarded += usize::from(forward(pool, desc, meta, fib, adjacencies, generation));
        }
        self.counters.forwarded += forwarded as u64;
        if forwarded == descs.len() {
            Coverage::All
        } else {
            Coverage::Part
        }
    }
}

/// The bytes of the packet `desc` describes; empty when the descriptor points outside its
/// frame (the parse drops such a packet).
#[inline(always)]
fn packet<'a>(pool: &'a FramePool, desc: &Desc) -> &'a [u8] {
    let start = usize::from(desc.offset);
    pool.frame(desc.frame)
        .get(start..start + usize::from(desc.len))
        .unwrap_or_default()
}

/// One look at every frame of the batch before anything is written: `false` if a frame may
/// be one the discovery stage learns from; on the way, the tbl24 entry of every IPv4
/// destination starts to load, so the lookups of the forwarding pass find them in the cache.
#[inline(always)]
fn look_ahead(pool: &FramePool, batch: &Batch, fib: &Ipv4Fib) -> bool {
    for desc in batch.descs() {
        let packet = packet(pool, desc);
        let Some(h) = packet.first_chunk::<34>() else {
            // Too short for an IPv4 header; it may still be an ARP frame (the parse decides).
            if packet.get(12..14) == Some(&ETHERTYPE_ARP[..]) {
                return false;
            }
            continue;
        };
        match [h[12], h[13]] {
            ETHERTYPE_IPV4 => fib.prefetch(u32::from_be_bytes([h[30], h[31], h[32], h[33]])),
            ETHERTYPE_ARP => return false,
            // ICMPv6 (neighbour discovery) directly or behind extension headers.
            ETHERTYPE_IPV6 if h[20] != PROTO_TCP && h[20] != PROTO_UDP => return false,
            _ => {}
        }
    }
    true
}

/// Forwards one packet if it qualifies (see the module documentation); otherwise writes
/// nothing and returns `false`.
#[inline(always)]
fn forward(
    pool: &mut FramePool,
    desc: &Desc,
    meta: &mut Meta,
    fib: &Ipv4Fib,
    adjacencies: &Adjacencies,
    generation: u64,
) -> bool {
    if meta.drop.is_some() || meta.out_port != Meta::NO_PORT {
        return false;
    }
    let start = usize::from(desc.offset);
    let Some(packet) = pool
        .frame_mut(desc.frame)
        .get_mut(start..start + usize::from(desc.len))
    else {
        return false;
    };
    if !is_plain_ipv4_transport(packet) {
        return false;
    }
    let Some(h) = packet.first_chunk_mut::<34>() else {
        return false;
    };
    let Some(ip) = h.last_chunk::<20>() else {
        return false;
    };
    let src = u32::from_be_bytes([ip[12], ip[13], ip[14], ip[15]]);
    let dst = u32::from_be_bytes([ip[16], ip[17], ip[18], ip[19]]);
    if !header_checksum_is_valid(ip) || ip[8] <= 1 || martian_v4(src) || martian_v4(dst) {
        return false;
    }
    let Some(hop) = fib.lookup(dst).filter(|hop| !hop.is_ecmp()) else {
        return false;
    };
    let Some(adjacency) = adjacencies.current(hop.id(), generation) else {
        return false;
    };
    h[..6].copy_from_slice(&adjacency.dst.0);
    h[6..12].copy_from_slice(&adjacency.src.0);
    if let Some(ip) = h.last_chunk_mut::<20>() {
        ipv4::Packet::new_unchecked(&mut ip[..]).decrement_ttl();
    }
    meta.out_port = adjacency.port;
    true
}

/// Whether `frame` is one the packet parser's fast path accepts (its conditions, in the same
/// order), to a unicast MAC: untagged Ethernet, IPv4 with a 20-byte header and a total length
/// that fits the frame, not a fragment, and UDP with a length that fits the IP payload or TCP
/// with a header that does. The parser then fills the metadata without any drop reason, so a
/// packet forwarded here is one the stages would have parsed successfully.
#[inline(always)]
fn is_plain_ipv4_transport(frame: &[u8]) -> bool {
    let Some(h) = frame.first_chunk::<42>() else {
        return false;
    };
    if [h[12], h[13], h[14]] != [0x08, 0x00, 0x45] || h[0] & 0x01 != 0 {
        return false;
    }
    let total_len = usize::from(u16::from_be_bytes([h[16], h[17]]));
    let fragment = u16::from_be_bytes([h[20], h[21]]) & 0x3fff;
    if total_len > frame.len() - 14 || total_len < 20 || fragment != 0 {
        return false;
    }
    let segment = total_len - 20;
    match h[23] {
        PROTO_UDP => {
            let length = usize::from(u16::from_be_bytes([h[38], h[39]]));
            segment >= 8 && length >= 8 && length <= segment
        }
        PROTO_TCP => {
            let Some(t) = frame.first_chunk::<54>() else {
                return false;
            };
            let header_len = usize::from(t[46] >> 4) * 4;
            segment >= 20 && header_len >= 20 && header_len <= segment
        }
        _ => false,
    }
}
