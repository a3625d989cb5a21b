//! The fused IP forwarding loop (DPDK l3fwd, VPP's ip4-lookup + ip4-rewrite): for the common
//! packet, every step the router takes on it — validate, look up, decrement the TTL (with the
//! incremental checksum) or the hop limit, write the pre-built rewrite, choose the port —
//! straight from the frame's fixed offsets, with no parse and no per-stage decision written
//! and read back.
//!
//! A packet qualifies when the stage passes would forward it through a current adjacency
//! ([`Adjacencies`]) and nothing else: untagged Ethernet to a unicast MAC; IPv4 with a 20-byte
//! header, not a fragment, UDP or TCP with consistent lengths (exactly the frames the packet
//! parser's own fast path accepts, so the parse could not have dropped it), a good header
//! checksum and TTL above 1; or IPv6 with no extension header, UDP or TCP with consistent
//! lengths ([`plain_ipv6_transport`], held to the parser by a test) and a hop limit above 1;
//! neither address a martian; a route to a single gateway (no ECMP pick) whose adjacency is
//! current. Everything else is left untouched, its `Meta` still empty, for the stage passes,
//! which skip the packets decided here (their `out_port` is set): so ARP and NDP, ICMP errors,
//! local delivery, holds and every drop reason behave exactly as without this loop, and the
//! order of the batch is kept.
//!
//! Only one thing could tell the two paths apart: the discovery stage, which runs before the
//! route stage, may learn a neighbour from an ARP or ICMPv6 packet of the batch and so change
//! the rewrite of packets ahead of it in the batch. A batch that holds a frame discovery may
//! act on (an ARP frame, an IPv6 packet whose next header is neither TCP nor UDP) is therefore
//! left whole to the stages ("declined"), before anything is written.
//!
//! Three short passes over the batch rather than one. [`FastPath::prefetch`], which the router
//! runs first thing, starts loading the tbl24 entry of every IPv4 destination in one tight loop
//! (a batch without IP stops there); [`FastPath::process`] then checks every packet (no
//! table read), during which those entries arrive, and then looks up, rewrites and sends the
//! packets that passed. The IPv6 candidates are looked up together, after the IPv4 ones, by
//! the trie's batched walk ([`Ipv6Fib::lookup_batch`]: one level of every destination before
//! the next, so the misses of a level overlap), then rewritten. The checks hand the forwarding a small record per packet
//! (`Candidate`: the destination, the TTL and checksum bytes to write), so the pass after the
//! lookups, whose instructions cannot hide their misses, reads nothing of the packet again. At
//! a million routes nearly every lookup misses the caches and the TLB, and this order hid the
//! misses best of those measured (docs/benchmarks.md, "Apps"): prefetching within the check
//! pass instead saves 22 instructions per packet but read 1.60–1.64x the cross-connect against
//! 1.52–1.58x, one fused check-and-forward pass behind the prefetches 1.74–1.77x against
//! 1.57–1.65x; in round four, the checks prefetching and run before the housekeeping (21
//! instructions fewer) 1.72x against 1.55x, and the lookups split in two loops with the tbl8
//! slot prefetched between them (7 more) 1.56x against 1.53x, medians of interleaved runs at
//! load 4–6. The checks come before any write so that a declined batch reaches the stages
//! untouched.
//!
//! Counters: [`FastPathCounters`]. One batch function, [`FastPath::process`], after
//! [`FastPath::prefetch`]; no trace format: a traced router leaves every packet to the stages so
//! their trace lines stay complete.

use wirespeed_packet::parse::{PlainIpv4, plain_ipv4_transport, plain_ipv6_transport};
use wirespeed_packet::{Batch, Desc, FramePool, MAX_BATCH, Meta};

use crate::stage::route::{header_checksum_is_valid, martian_v4, martian_v6};
use crate::table::adjacency::{Adjacencies, Adjacency};
use crate::table::fib::{Fib4, Fib6, NextHop};

const ETHERTYPE_ARP: [u8; 2] = [0x08, 0x06];
const PROTO_TCP: u8 = 6;
const PROTO_UDP: u8 = 17;

/// What the loop did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FastPathCounters {
    /// IPv4 packets forwarded by the loop. The router also counts them where the stages would
    /// have (looked up by the route stage, forwarded by the neighbour stage).
    pub forwarded_ipv4: u64,
    /// IPv6 packets forwarded by the loop (counted by the router as the IPv4 ones).
    pub forwarded_ipv6: u64,
    /// Batches with IP frames left whole to the stages because a frame of theirs may teach
    /// the neighbour table.
    pub declined: u64,
}

impl FastPathCounters {
    /// Packets of either family forwarded by the loop.
    pub fn forwarded(&self) -> u64 {
        self.forwarded_ipv4 + self.forwarded_ipv6
    }
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
#[derive(Debug)]
pub struct FastPath {
    counters: FastPathCounters,
    /// Per packet of the batch, what its checks found. Written by the first pass, read by the
    /// second.
    candidates: [Candidate; MAX_BATCH],
    /// The IPv6 packets that passed the checks, in batch order, for the lookups of all of
    /// them at once.
    ipv6: Ipv6Candidates,
}

/// The IPv6 candidates of a batch as the trie's batched lookup takes them: their
/// destinations in one array, what the lookups found in another.
#[derive(Debug)]
struct Ipv6Candidates {
    len: usize,
    /// The candidate's position in the batch.
    at: [u8; MAX_BATCH],
    dst: [u128; MAX_BATCH],
    /// The hop limit as forwarding writes it, one less.
    hop_limit: [u8; MAX_BATCH],
    found: [Option<NextHop>; MAX_BATCH],
}

const _: () = assert!(MAX_BATCH <= 256, "batch positions are kept as u8");

impl Ipv6Candidates {
    /// Adds the packet at batch position `at`, which passed the checks.
    #[inline(always)]
    fn push(&mut self, at: usize, dst: u128, hop_limit: u8) {
        let n = self.len;
        if let (Some(slot_at), Some(slot_dst), Some(slot_hop_limit)) = (
            self.at.get_mut(n),
            self.dst.get_mut(n),
            self.hop_limit.get_mut(n),
        ) {
            (*slot_at, *slot_dst, *slot_hop_limit) = (at as u8, dst, hop_limit);
            self.len += 1;
        }
    }

    /// Looks the candidates up in `fib6` all at once, then forwards each whose route names one
    /// gateway with an adjacency current under `generation` (the IPv4 pass's `forward`, for
    /// the whole list); returns how many it forwarded.
    fn forward(
        &mut self,
        pool: &mut FramePool,
        descs: &[Desc],
        metas: &mut [Meta],
        fib6: &Fib6,
        adjacencies: &Adjacencies,
        generation: u64,
    ) -> usize {
        let n = self.len;
        fib6.lookup_batch(&self.dst[..n], &mut self.found[..n]);
        let mut forwarded = 0;
        for ((&at, &found), &hop_limit) in self.at[..n]
            .iter()
            .zip(&self.found[..n])
            .zip(&self.hop_limit[..n])
        {
            let at = usize::from(at);
            let (Some(desc), Some(meta)) = (descs.get(at), metas.get_mut(at)) else {
                continue;
            };
            if meta.drop.is_some() || meta.out_port != Meta::NO_PORT {
                continue;
            }
            let adjacency = found
                .filter(|hop| !hop.is_ecmp())
                .and_then(|hop| adjacencies.current(hop.id(), generation));
            if let Some(adjacency) = adjacency {
                let sent = rewrite::<22>(pool, desc, meta, adjacency, |h| h[21] = hop_limit);
                forwarded += usize::from(sent);
            }
        }
        forwarded
    }
}

/// What the checks hand the forwarding pass for one packet: as little as it needs, so that it
/// reads nothing of the packet again.
#[derive(Clone, Copy, Debug, Default)]
struct Candidate {
    /// The IPv4 destination of a packet that passed every check; 0 for one left to the stages
    /// (0.0.0.0 is a martian, never forwarded).
    dst: u32,
    /// The header's bytes 8..12 (TTL, protocol, checksum) as forwarding writes them: the TTL
    /// one less and the checksum to match ([`ttl_decremented`]).
    ttl_to_checksum: [u8; 4],
}

impl Default for FastPath {
    fn default() -> Self {
        Self::new()
    }
}

/// What the checks made of one packet.
enum Check {
    /// It passed them all; its route and adjacency decide.
    Candidate(Candidate),
    /// An IPv6 packet that passed them all: its destination and its hop limit less one.
    Ipv6Candidate(u128, u8),
    /// For the stages.
    Leave,
    /// Discovery may learn from it: the whole batch is for the stages.
    Decline,
}

impl FastPath {
    pub fn new() -> Self {
        FastPath {
            counters: FastPathCounters::default(),
            candidates: [Candidate::default(); MAX_BATCH],
            ipv6: Ipv6Candidates {
                len: 0,
                at: [0; MAX_BATCH],
                dst: [0; MAX_BATCH],
                hop_limit: [0; MAX_BATCH],
                found: [None; MAX_BATCH],
            },
        }
    }

    pub fn counters(&self) -> FastPathCounters {
        self.counters
    }

    /// Starts loading the tbl24 entry of every IPv4 packet's destination, as early as the router
    /// can: [`FastPath::process`] reads them after its checks. Returns whether the batch holds
    /// an IPv4 or IPv6 frame at all; if not, the loop has nothing to do and is not run. (The
    /// IPv6 trie's levels depend on each other: its lookups overlap their misses in the
    /// batched walk instead.)
    pub fn prefetch(pool: &FramePool, batch: &Batch, fib: &Fib4) -> bool {
        let mut any = false;
        for desc in batch.descs() {
            let at = usize::from(desc.offset);
            let Some(h) = pool
                .frame(desc.frame)
                .get(at..)
                .and_then(<[u8]>::first_chunk::<34>)
            else {
                continue;
            };
            match [h[12], h[13]] {
                [0x08, 0x00] => {
                    fib.prefetch(u32::from_be_bytes([h[30], h[31], h[32], h[33]]));
                    any = true;
                }
                [0x86, 0xdd] => any = true,
                _ => {}
            }
        }
        any
    }

    /// Forwards every packet of `batch` that qualifies (see the module documentation) by the
    /// routes of `fib4` and `fib6` and the adjacencies current under the neighbour table's
    /// `generation`, and says whether any packet is left for the stages.
    pub fn process(
        &mut self,
        pool: &mut FramePool,
        batch: &mut Batch,
        (fib4, fib6): (&Fib4, &Fib6),
        adjacencies: &Adjacencies,
        generation: u64,
    ) -> Coverage {
        let (descs, metas) = batch.split_mut();
        let v6 = &mut self.ipv6;
        v6.len = 0;
        for (at, (desc, candidate)) in descs.iter().zip(&mut self.candidates).enumerate() {
            candidate.dst = 0;
            let Some(packet) = packet(pool, desc) else {
                continue;
            };
            match check(packet) {
                Check::Candidate(found) => *candidate = found,
                Check::Ipv6Candidate(dst, hop_limit) => v6.push(at, dst, hop_limit),
                Check::Leave => {}
                Check::Decline => {
                    self.counters.declined += 1;
                    return Coverage::Part;
                }
            }
        }
        let mut forwarded = 0;
        for ((desc, meta), candidate) in descs.iter().zip(metas.iter_mut()).zip(&self.candidates) {
            if candidate.dst != 0 {
                let sent = forward(pool, desc, meta, candidate, fib4, adjacencies, generation);
                forwarded += usize::from(sent);
            }
        }
        self.counters.forwarded_ipv4 += forwarded as u64;
        let forwarded_ipv6 = if self.ipv6.len > 0 {
            self.ipv6
                .forward(pool, descs, metas, fib6, adjacencies, generation)
        } else {
            0
        };
        self.counters.forwarded_ipv6 += forwarded_ipv6 as u64;
        if forwarded + forwarded_ipv6 == descs.len() {
            Coverage::All
        } else {
            Coverage::Part
        }
    }
}

/// The bytes of the packet `desc` describes; `None` when the descriptor points outside its
/// frame (the parse drops such a packet).
#[inline(always)]
fn packet<'a>(pool: &'a FramePool, desc: &Desc) -> Option<&'a [u8]> {
    let start = usize::from(desc.offset);
    pool.frame(desc.frame)
        .get(start..start + usize::from(desc.len))
}

/// Every check of a packet that needs no table: is it a plain IPv4 transport packet (the
/// packet parser's own fast-path test, [`plain_ipv4_transport`], so the parse could not have
/// dropped it) to a unicast MAC, with a good header checksum, TTL above 1 and no martian
/// address (then what forwarding it takes), the same for IPv6 ([`check_ipv6`]), or one
/// discovery may learn from?
#[inline(always)]
fn check(packet: &[u8]) -> Check {
    let Some(PlainIpv4 { head, .. }) = plain_ipv4_transport(packet) else {
        return check_ipv6(packet);
    };
    let Some(ip) = head[14..].first_chunk::<20>() else {
        return Check::Leave;
    };
    let src = u32::from_be_bytes([ip[12], ip[13], ip[14], ip[15]]);
    let dst = u32::from_be_bytes([ip[16], ip[17], ip[18], ip[19]]);
    // Tests that branch (`||`), not one combined value (`&`, with a 64-bit checksum sum and a
    // branch-free martian test): the latter, 8 instructions fewer, was slower at 100k and 1M
    // routes (docs/benchmarks.md, "Apps", round four).
    let leave = !header_checksum_is_valid(ip)
        || ip[8] <= 1
        || martian_v4(src)
        || martian_v4(dst)
        || head[0] & 0x01 != 0;
    if !leave {
        Check::Candidate(Candidate {
            dst,
            ttl_to_checksum: ttl_decremented([ip[8], ip[9], ip[10], ip[11]]),
        })
    } else {
        Check::Leave
    }
}

/// The checks of a packet that is not plain IPv4: is it a plain IPv6 transport packet
/// ([`plain_ipv6_transport`], what the parse takes without a drop reason) to a unicast MAC,
/// with a hop limit above 1 and no martian address (no checksum in IPv6's header), or one
/// discovery may learn from?
#[inline(always)]
fn check_ipv6(packet: &[u8]) -> Check {
    let Some(head) = plain_ipv6_transport(packet) else {
        return if discovery_may_learn(packet) {
            Check::Decline
        } else {
            Check::Leave
        };
    };
    let (Some(src), Some(dst)) = (
        head[22..].first_chunk::<16>(),
        head[38..].first_chunk::<16>(),
    ) else {
        return Check::Leave;
    };
    let (src, dst) = (u128::from_be_bytes(*src), u128::from_be_bytes(*dst));
    let hop_limit = head[21];
    if head[0] & 0x01 != 0 || hop_limit <= 1 || martian_v6(src) || martian_v6(dst) {
        return Check::Leave;
    }
    Check::Ipv6Candidate(dst, hop_limit - 1)
}

/// Whether the packet, not a plain IPv4 transport one, is a frame the discovery stage may
/// learn a neighbour from: ARP, or IPv6 whose next header is neither TCP nor UDP (ICMPv6,
/// directly or behind extension headers). A frame too short to tell is taken for ARP when its
/// EtherType says so (the parse decides what it is).
fn discovery_may_learn(packet: &[u8]) -> bool {
    match packet.get(12..21) {
        Some([0x08, 0x06, ..]) => true,
        Some([0x86, 0xdd, .., next]) => *next != PROTO_TCP && *next != PROTO_UDP,
        Some(_) => false,
        None => packet.get(12..14) == Some(&ETHERTYPE_ARP[..]),
    }
}

/// Forwards the packet whose checks passed, as `candidate` says, if its route names one gateway
/// whose adjacency is current; otherwise writes nothing and returns `false`.
#[inline(always)]
fn forward(
    pool: &mut FramePool,
    desc: &Desc,
    meta: &mut Meta,
    candidate: &Candidate,
    fib: &Fib4,
    adjacencies: &Adjacencies,
    generation: u64,
) -> bool {
    if meta.drop.is_some() || meta.out_port != Meta::NO_PORT {
        return false;
    }
    let Some(hop) = fib.lookup_hop(candidate.dst) else {
        return false;
    };
    let Some(adjacency) = adjacencies.current(hop, generation) else {
        return false;
    };
    rewrite::<34>(pool, desc, meta, adjacency, |h| {
        h[22..26].copy_from_slice(&candidate.ttl_to_checksum);
    })
}

/// Sends the packet `desc` through `adjacency`: its MACs rewritten, what `finish` writes into
/// its first `N` bytes (the TTL or hop limit: bytes the checks read within the packet's
/// length), out of the adjacency's port. `false`, nothing written, for a packet shorter than
/// `N` bytes, which the checks do not let through.
#[inline(always)]
fn rewrite<const N: usize>(
    pool: &mut FramePool,
    desc: &Desc,
    meta: &mut Meta,
    adjacency: &Adjacency,
    finish: impl FnOnce(&mut [u8; N]),
) -> bool {
    let Some(h) = pool
        .frame_mut(desc.frame)
        .get_mut(usize::from(desc.offset)..)
        .and_then(<[u8]>::first_chunk_mut::<N>)
    else {
        return false;
    };
    h[..6].copy_from_slice(&adjacency.dst.0);
    h[6..12].copy_from_slice(&adjacency.src.0);
    finish(h);
    meta.out_port = adjacency.port;
    true
}

/// The bytes 8..12 of an IPv4 header (TTL, protocol, checksum; `field`) after one is taken from
/// its TTL, which is above 1, and the checksum updated to match. RFC 1624's eqn. 3
/// (`HC' = ~(~HC + ~m + m')`, what
/// [`wirespeed_packet::wire::ipv4::Packet::decrement_ttl`] computes) reduces for this one
/// change, the high byte of a word down by one, to adding 0x0100 with an end-around carry
/// (Linux's `ip_decrease_ttl`): the same two bytes for every checksum (a test holds the two to
/// that), in a handful of instructions instead of three folded sums.
///
/// Computed by the checks, from the bytes they read, and written by the forwarding as it is: a
/// frame a broken port handed over twice in one batch gets the same bytes twice.
#[inline(always)]
fn ttl_decremented(field: [u8; 4]) -> [u8; 4] {
    let [ttl, protocol, high, low] = field;
    let sum = u32::from(u16::from_be_bytes([high, low])) + 0x0100;
    let [high, low] = ((sum + u32::from(sum >= 0xffff)) as u16).to_be_bytes();
    // Saturating only so that no input can make this panic: the checks passed TTL 2 and up.
    [ttl.saturating_sub(1), protocol, high, low]
}

#[cfg(test)]
mod tests {
    use super::*;
    use wirespeed_packet::wire::ipv4;

    #[test]
    fn the_short_ttl_update_writes_what_rfc_1624_gives_for_every_checksum() {
        let mut header = crate::stage::route::TEST_HEADER;
        for ttl in [2, 3, 64, 128, 255] {
            for protocol in [0, 6, 17, 255] {
                for checksum in 0..=u16::MAX {
                    header[8] = ttl;
                    header[9] = protocol;
                    header[10..12].copy_from_slice(&checksum.to_be_bytes());
                    let mut reference = header;
                    ipv4::Packet::new_unchecked(&mut reference[..]).decrement_ttl();
                    let field = [header[8], header[9], header[10], header[11]];
                    header[8..12].copy_from_slice(&ttl_decremented(field));
                    assert_eq!(
                        header, reference,
                        "ttl {ttl} protocol {protocol} {checksum:#x}"
                    );
                }
            }
        }
    }
}
