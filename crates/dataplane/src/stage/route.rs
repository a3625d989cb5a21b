//! The route stage: validates every IPv4/IPv6 packet a router may forward, looks the whole
//! batch up in the FIBs at once, and picks the next hop (an ECMP member by flow hash).
//!
//! Counters: [`RouteCounters`]. Dispositions, per packet, in a caller-owned array of [`Next`]:
//! deliver locally (the destination is one of the router's addresses), forward to a neighbour
//! (an address on a port, still to be resolved), or send an ICMP error (no route: the packet is
//! marked [`DropReason::NoRoute`]; TTL/hop limit exhausted: [`DropReason::TtlExpired`]). Packets
//! that must not be forwarded are dropped here with their reason: IPv4 header checksum wrong
//! ([`DropReason::BadIpv4Checksum`]), IPv4 options refused by policy
//! ([`DropReason::Ipv4Options`]), a source that names no single host
//! ([`DropReason::MartianSource`]), a destination that names none or a frame that came to a
//! group MAC ([`DropReason::NoRoute`] without an ICMP error: a router forwards unicast only),
//! neither IPv4 nor IPv6 ([`DropReason::NoOutput`]).
//!
//! One batch function, [`Route::process`], in three passes: checks, collecting the destinations
//! of each family into a dense array; one `lookup_batch` per family, so the FIB misses of the
//! whole batch overlap (the DIR-24-8 lookup is two dependent reads at most, the IPv6 trie walks
//! its levels in lockstep); then the decision per packet. The TTL is checked after the lookup,
//! because a packet for the router itself may arrive with TTL 1.
//!
//! The FIB maps a prefix to a [`NextHop`] id; ids index this stage's hop table ([`Hop`]): the
//! router itself, a connected subnet on a port (the neighbour is the destination itself), or a
//! gateway on a port. ECMP groups list hop ids. Control-path changes (routes added, removed, the
//! tables rebuilt) happen between batches through the methods below.

use std::collections::HashMap;
use std::net::{Ipv4Addr, Ipv6Addr};

use wirespeed_packet::checksum;
use wirespeed_packet::{Batch, DropReason, FramePool, MAX_BATCH, Meta};

use crate::stage::icmp_error::IcmpKind;
use crate::table::adjacency::Adjacencies;
use crate::table::fib::{
    EcmpGroups, Fib4, Fib6, FibError, FibKind, Ipv4Prefix, Ipv6Prefix, NextHop,
};
use crate::table::neighbour::NeighbourKey;

/// Where a FIB entry sends a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Hop {
    /// One of the router's own addresses.
    Local,
    /// A subnet connected to this port: the destination is the neighbour.
    Connected(u16),
    /// A gateway on a port.
    Gateway(NeighbourKey),
}

/// The route stage's decision for one packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Next {
    /// Decided before this stage, or dropped by it: nothing more to do.
    Skip,
    /// For the router itself.
    Local,
    /// To be sent to `neighbour`; `hop`: the gateway hop whose adjacency may hold the rewrite
    /// ([`Adjacencies`]), `None` for a destination on a connected subnet (the neighbour is the
    /// destination itself, found in the neighbour table).
    Forward {
        neighbour: NeighbourKey,
        hop: Option<u32>,
    },
    /// Dropped; an ICMP error of this kind is due to the source.
    Error(IcmpKind),
}

/// The trace format of a decision: `local`, `forward <addr> port <n>`, `icmp <kind>`, `-`.
impl std::fmt::Display for Next {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Next::Skip => f.write_str("-"),
            Next::Local => f.write_str("local"),
            Next::Forward { neighbour, .. } => {
                write!(f, "forward {} port {}", neighbour.addr(), neighbour.port())
            }
            Next::Error(IcmpKind::TimeExceeded) => f.write_str("icmp time-exceeded"),
            Next::Error(IcmpKind::NoRoute) => f.write_str("icmp unreachable"),
        }
    }
}

/// What to do with IPv4 packets that carry options.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum OptionsPolicy {
    /// Drop them ([`DropReason::Ipv4Options`]), as most backbone routers do.
    #[default]
    Drop,
    /// Forward them like any other packet (options are not processed).
    Forward,
}

/// What the stage decided.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RouteCounters {
    /// IPv4 packets looked up.
    pub ipv4: u64,
    /// IPv6 packets looked up.
    pub ipv6: u64,
    pub local: u64,
    pub no_route: u64,
    /// Never routed, no ICMP error either: a destination that names no single host (the same
    /// ranges as martian sources), or a frame sent to a group MAC (RFC 1812 §5.3.4).
    pub not_routable: u64,
    pub ttl_expired: u64,
    pub bad_checksum: u64,
    pub martian: u64,
    pub options: u64,
}

/// FIBs, ECMP groups, the hop table and its adjacencies, and the batch pass over them.
pub struct Route {
    fib4: Fib4,
    fib6: Fib6,
    ecmp: EcmpGroups,
    hops: Vec<Hop>,
    /// Indexed like `hops`; grown and reset with it, read and refreshed by the neighbour stage.
    adjacencies: Adjacencies,
    hop_ids: HashMap<Hop, u32>,
    groups: HashMap<Vec<u32>, NextHop>,
    options: OptionsPolicy,
    counters: RouteCounters,
    scratch: Box<Scratch>,
}

/// Per-batch arrays, allocated once.
struct Scratch {
    addrs4: [u32; MAX_BATCH],
    at4: [u16; MAX_BATCH],
    ttl4: [u8; MAX_BATCH],
    found4: [Option<NextHop>; MAX_BATCH],
    addrs6: [u128; MAX_BATCH],
    at6: [u16; MAX_BATCH],
    ttl6: [u8; MAX_BATCH],
    found6: [Option<NextHop>; MAX_BATCH],
}

/// IPv4 sources that name no single host: 0/8, 127/8, 224/4 (multicast), 240/4 (reserved and
/// limited broadcast).
#[inline]
pub fn martian_v4(src: u32) -> bool {
    let top = src >> 24;
    top == 0 || top == 127 || top >= 224
}

/// IPv6 sources a router must not forward: unspecified, loopback, multicast, IPv4-mapped, and
/// link-local (valid only on its own link, RFC 4291 §2.5.6).
#[inline]
pub fn martian_v6(src: u128) -> bool {
    src <= 1 || src >> 120 == 0xff || src >> 32 == 0xffff || src >> 118 == 0xfe80 >> 6
}

/// Whether a 20-byte IPv4 header (no options) carries a valid checksum: the ones' complement
/// sum of its 16-bit words is 0xffff, which is to say, since 2^16 is 1 modulo 0xffff, that the
/// plain sum of its five 32-bit words (in a `u64`, no carry lost) is a nonzero multiple of
/// 0xffff. [`checksum::is_valid`] folds the sum for any length; this one is a division by a
/// constant (a multiply) with no loop and no fold, for every packet.
#[inline(always)]
pub(crate) fn header_checksum_is_valid(header: &[u8; 20]) -> bool {
    let word = |at: usize| {
        u64::from(u32::from_ne_bytes([
            header[at],
            header[at + 1],
            header[at + 2],
            header[at + 3],
        ]))
    };
    // Byte order does not matter to a ones' complement sum (RFC 1071 §2(B)): swapping the
    // bytes of every word multiplies the sum by 256 modulo 0xffff, which keeps it a multiple.
    let sum = word(0) + word(4) + word(8) + word(12) + word(16);
    sum != 0 && sum % 0xffff == 0
}

impl Route {
    /// Empty tables of `fib` (`[router] fib`); IPv4 options handled by `options`.
    pub fn new(options: OptionsPolicy, fib: FibKind) -> Self {
        Route {
            fib4: Fib4::new(fib),
            fib6: Fib6::new(fib),
            ecmp: EcmpGroups::new(),
            hops: Vec::new(),
            adjacencies: Adjacencies::new(),
            hop_ids: HashMap::new(),
            groups: HashMap::new(),
            options,
            counters: RouteCounters::default(),
            scratch: Box::new(Scratch {
                addrs4: [0; MAX_BATCH],
                at4: [0; MAX_BATCH],
                ttl4: [0; MAX_BATCH],
                found4: [None; MAX_BATCH],
                addrs6: [0; MAX_BATCH],
                at6: [0; MAX_BATCH],
                ttl6: [0; MAX_BATCH],
                found6: [None; MAX_BATCH],
            }),
        }
    }

    pub fn counters(&self) -> RouteCounters {
        self.counters
    }

    pub fn fib_v4(&self) -> &Fib4 {
        &self.fib4
    }

    pub fn fib_v6(&self) -> &Fib6 {
        &self.fib6
    }

    /// The adjacencies of the hops, for the fused forwarding loop to apply.
    pub fn adjacencies(&self) -> &Adjacencies {
        &self.adjacencies
    }

    /// The adjacencies of the hops, for the neighbour stage to apply and refresh.
    pub fn adjacencies_mut(&mut self) -> &mut Adjacencies {
        &mut self.adjacencies
    }

    /// The hop a next-hop id names.
    pub fn hop(&self, id: u32) -> Option<Hop> {
        self.hops.get(id as usize).copied()
    }

    /// The [`NextHop`] for a set of hops: the hop itself, or an ECMP group of them (one group per
    /// distinct member list). Control path.
    pub fn next_hop(&mut self, hops: &[Hop]) -> Result<NextHop, FibError> {
        let mut ids = Vec::with_capacity(hops.len());
        for hop in hops {
            let id = match self.hop_ids.get(hop) {
                Some(&id) => id,
                None => {
                    let id = self.hops.len() as u32;
                    NextHop::hop(id).ok_or(FibError::EcmpGroupsFull {
                        count: self.hops.len(),
                        max: NextHop::MAX_ID,
                    })?;
                    self.hops.push(*hop);
                    self.adjacencies.grow(self.hops.len());
                    self.hop_ids.insert(*hop, id);
                    id
                }
            };
            ids.push(id);
        }
        match ids.as_slice() {
            [] => Err(FibError::EcmpMembers {
                members: 0,
                max: EcmpGroups::MAX_MEMBERS,
            }),
            [one] => NextHop::hop(*one).ok_or(FibError::EcmpGroupsFull {
                count: self.hops.len(),
                max: NextHop::MAX_ID,
            }),
            _ => {
                if let Some(&group) = self.groups.get(&ids) {
                    return Ok(group);
                }
                let group = self.ecmp.insert(&ids)?;
                self.groups.insert(ids, group);
                Ok(group)
            }
        }
    }

    /// Whether a decision may read `Meta::flow_hash`: only ECMP picks a member by it (a group,
    /// once made, counts until the routes are replaced).
    pub fn uses_flow_hash(&self) -> bool {
        !self.groups.is_empty()
    }

    /// Adds or replaces an IPv4 route.
    pub fn insert_v4(&mut self, prefix: Ipv4Prefix, hops: &[Hop]) -> Result<(), FibError> {
        let next_hop = self.next_hop(hops)?;
        self.fib4.insert(prefix, next_hop).map(|_| ())
    }

    /// Adds or replaces an IPv6 route.
    pub fn insert_v6(&mut self, prefix: Ipv6Prefix, hops: &[Hop]) -> Result<(), FibError> {
        let next_hop = self.next_hop(hops)?;
        self.fib6.insert(prefix, next_hop).map(|_| ())
    }

    /// Deletes an IPv4 route; whether it existed.
    pub fn remove_v4(&mut self, prefix: Ipv4Prefix) -> bool {
        self.fib4.remove(prefix).is_some()
    }

    /// Deletes an IPv6 route; whether it existed.
    pub fn remove_v6(&mut self, prefix: Ipv6Prefix) -> bool {
        self.fib6.remove(prefix).is_some()
    }

    /// Replaces both FIBs by tables built in one pass from `v4` and `v6` (a later duplicate
    /// prefix wins). Nothing changes when a build fails.
    pub fn replace(
        &mut self,
        v4: impl IntoIterator<Item = (Ipv4Prefix, NextHop)>,
        v6: impl IntoIterator<Item = (Ipv6Prefix, NextHop)>,
    ) -> Result<(), FibError> {
        let fib4 = Fib4::from_routes(self.fib4.kind(), v4)?;
        let fib6 = Fib6::from_routes(self.fib6.kind(), v6)?;
        self.fib4 = fib4;
        self.fib6 = fib6;
        Ok(())
    }

    /// Takes over FIBs built elsewhere (a route load built off the worker) whose next hop *i*
    /// is `hops[i]`: the hop table becomes `hops` and the ECMP groups are dropped. Returns the
    /// FIBs it replaced, to be freed by the caller's caller, off the worker. Control path.
    pub fn adopt(&mut self, fib4: Fib4, fib6: Fib6, hops: Vec<Hop>) -> (Fib4, Fib6) {
        self.hop_ids = hops
            .iter()
            .enumerate()
            .map(|(id, hop)| (*hop, id as u32))
            .collect();
        self.hops = hops;
        self.adjacencies.reset(self.hops.len());
        self.ecmp = EcmpGroups::new();
        self.groups.clear();
        let old4 = std::mem::replace(&mut self.fib4, fib4);
        let old6 = std::mem::replace(&mut self.fib6, fib6);
        (old4, old6)
    }

    /// Starts loading the FIB entry of every IPv4 packet of `batch`, to be called as soon as the
    /// batch is parsed: the lookups in [`Route::process`] come after the other stages' passes,
    /// which then run while the entries arrive from memory (at a million routes nearly every
    /// lookup misses the caches).
    pub fn prefetch(&self, pool: &FramePool, batch: &Batch) {
        for (desc, meta) in batch.descs().iter().zip(batch.meta()) {
            if meta.flags & Meta::FLAG_IPV4 == 0 || meta.drop.is_some() {
                continue;
            }
            let at = usize::from(desc.offset) + usize::from(meta.l3_offset) + 16;
            if let Some(dst) = pool
                .frame(desc.frame)
                .get(at..)
                .and_then(<[u8]>::first_chunk)
            {
                self.fib4.prefetch(u32::from_be_bytes(*dst));
            }
        }
    }

    /// Decides every undecided IP packet of `batch` into `next` (see the module documentation).
    pub fn process(&mut self, pool: &FramePool, batch: &mut Batch, next: &mut [Next]) {
        let Route {
            fib4,
            fib6,
            ecmp,
            hops,
            options,
            counters,
            scratch,
            ..
        } = self;
        let s = &mut **scratch;
        let (descs, metas) = batch.split_mut();
        let (mut n4, mut n6) = (0usize, 0usize);
        for (i, ((desc, meta), next)) in descs
            .iter()
            .zip(metas.iter_mut())
            .zip(next.iter_mut())
            .enumerate()
        {
            *next = Next::Skip;
            if meta.drop.is_some() || meta.out_port != Meta::NO_PORT {
                continue;
            }
            let start = usize::from(desc.offset) + usize::from(meta.l3_offset);
            let end = usize::from(desc.offset) + usize::from(desc.len);
            let ip = pool.frame(desc.frame).get(start..end).unwrap_or_default();
            if meta.flags & Meta::FLAG_IPV4 != 0 {
                let Some(h) = ip.first_chunk::<20>() else {
                    meta.drop = Some(DropReason::Truncated);
                    continue;
                };
                let header_len = usize::from(h[0] & 0x0f) * 4;
                if header_len > 20 && *options == OptionsPolicy::Drop {
                    counters.options += 1;
                    meta.drop = Some(DropReason::Ipv4Options);
                    continue;
                }
                let valid = if header_len == 20 {
                    header_checksum_is_valid(h)
                } else {
                    ip.get(..header_len).is_some_and(checksum::is_valid)
                };
                if !valid {
                    counters.bad_checksum += 1;
                    meta.drop = Some(DropReason::BadIpv4Checksum);
                    continue;
                }
                if martian_v4(u32::from_be_bytes([h[12], h[13], h[14], h[15]])) {
                    counters.martian += 1;
                    meta.drop = Some(DropReason::MartianSource);
                    continue;
                }
                let dst = u32::from_be_bytes([h[16], h[17], h[18], h[19]]);
                if martian_v4(dst) || meta.flags & Meta::FLAG_GROUP_DST != 0 {
                    counters.not_routable += 1;
                    meta.drop = Some(DropReason::NoRoute);
                    continue;
                }
                if let (Some(addr), Some(at), Some(ttl)) =
                    (s.addrs4.get_mut(n4), s.at4.get_mut(n4), s.ttl4.get_mut(n4))
                {
                    *addr = dst;
                    *at = i as u16;
                    *ttl = h[8];
                    n4 += 1;
                }
            } else if meta.flags & Meta::FLAG_IPV6 != 0 {
                let Some(h) = ip.first_chunk::<40>() else {
                    meta.drop = Some(DropReason::Truncated);
                    continue;
                };
                let mut src = [0u8; 16];
                src.copy_from_slice(&h[8..24]);
                if martian_v6(u128::from_be_bytes(src)) {
                    counters.martian += 1;
                    meta.drop = Some(DropReason::MartianSource);
                    continue;
                }
                let mut dst = [0u8; 16];
                dst.copy_from_slice(&h[24..40]);
                let dst = u128::from_be_bytes(dst);
                if martian_v6(dst) || meta.flags & Meta::FLAG_GROUP_DST != 0 {
                    counters.not_routable += 1;
                    meta.drop = Some(DropReason::NoRoute);
                    continue;
                }
                if let (Some(addr), Some(at), Some(ttl)) =
                    (s.addrs6.get_mut(n6), s.at6.get_mut(n6), s.ttl6.get_mut(n6))
                {
                    *addr = dst;
                    *at = i as u16;
                    *ttl = h[7];
                    n6 += 1;
                }
            } else {
                meta.drop = Some(DropReason::NoOutput);
            }
        }
        counters.ipv4 += n4 as u64;
        counters.ipv6 += n6 as u64;

        fib4.lookup_batch(&s.addrs4[..n4], &mut s.found4[..n4]);
        fib6.lookup_batch(&s.addrs6[..n6], &mut s.found6[..n6]);

        let v4 = (0..n4).map(|k| {
            let dst = s.addrs4[k];
            (s.at4[k], s.ttl4[k], s.found4[k], move |port| {
                NeighbourKey::v4(Ipv4Addr::from_bits(dst), port)
            })
        });
        for (at, ttl, found, key) in v4 {
            decide(ecmp, hops, counters, metas, next, at, ttl, found, key);
        }
        let v6 = (0..n6).map(|k| {
            let dst = s.addrs6[k];
            (s.at6[k], s.ttl6[k], s.found6[k], move |port| {
                NeighbourKey::v6(Ipv6Addr::from_bits(dst), port)
            })
        });
        for (at, ttl, found, key) in v6 {
            decide(ecmp, hops, counters, metas, next, at, ttl, found, key);
        }
    }
}

/// The decision for the packet at `at` whose lookup gave `found`.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn decide(
    ecmp: &EcmpGroups,
    hops: &[Hop],
    counters: &mut RouteCounters,
    metas: &mut [Meta],
    next: &mut [Next],
    at: u16,
    ttl: u8,
    found: Option<NextHop>,
    neighbour: impl FnOnce(u16) -> NeighbourKey,
) {
    let (Some(meta), Some(next)) = (
        metas.get_mut(usize::from(at)),
        next.get_mut(usize::from(at)),
    ) else {
        return;
    };
    let hop = found
        .and_then(|nh| ecmp.resolve(nh, meta.flow_hash))
        .and_then(|id| Some((id, *hops.get(id as usize)?)));
    let Some((id, hop)) = hop else {
        counters.no_route += 1;
        meta.drop = Some(DropReason::NoRoute);
        *next = Next::Error(IcmpKind::NoRoute);
        return;
    };
    if hop == Hop::Local {
        counters.local += 1;
        *next = Next::Local;
        return;
    }
    if ttl <= 1 {
        counters.ttl_expired += 1;
        meta.drop = Some(DropReason::TtlExpired);
        *next = Next::Error(IcmpKind::TimeExceeded);
        return;
    }
    *next = match hop {
        Hop::Gateway(key) => Next::Forward {
            neighbour: key,
            hop: Some(id),
        },
        Hop::Connected(port) => Next::Forward {
            neighbour: neighbour(port),
            hop: None,
        },
        Hop::Local => return,
    };
}

/// An IPv4 header (UDP, TTL 64, 10.0.0.2 -> 192.0.2.5) with its checksum left 0, for the tests
/// of this stage's and the fast path's short header arithmetic.
#[cfg(test)]
pub(crate) const TEST_HEADER: [u8; 20] = [
    0x45, 0, 0, 46, 0x12, 0x34, 0x40, 0, 64, 17, 0, 0, 10, 0, 0, 2, 192, 0, 2, 5,
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_short_header_checksum_agrees_with_the_general_one() {
        let mut header = TEST_HEADER;
        let sum = checksum::internet_checksum(&header);
        header[10..12].copy_from_slice(&sum.to_be_bytes());
        assert!(header_checksum_is_valid(&header));
        for byte in 0..20 {
            for bit in 0..8 {
                let mut bad = header;
                bad[byte] ^= 1 << bit;
                assert_eq!(
                    header_checksum_is_valid(&bad),
                    checksum::is_valid(&bad),
                    "byte {byte} bit {bit}"
                );
            }
        }
        for filled in [[0xff; 20], [0; 20]] {
            assert_eq!(
                header_checksum_is_valid(&filled),
                checksum::is_valid(&filled)
            );
        }
        // Random headers, as they come and with their checksum filled in.
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..100_000 {
            let mut random = [0u8; 20];
            for byte in &mut random {
                state = state
                    .wrapping_mul(6_364_136_223_846_793_005)
                    .wrapping_add(1);
                *byte = (state >> 56) as u8;
            }
            assert_eq!(
                header_checksum_is_valid(&random),
                checksum::is_valid(&random)
            );
            random[10..12].copy_from_slice(&[0, 0]);
            let sum = checksum::internet_checksum(&random);
            random[10..12].copy_from_slice(&sum.to_be_bytes());
            assert!(header_checksum_is_valid(&random), "{random:?}");
        }
    }

    #[test]
    fn martians() {
        for bad in [
            "0.1.2.3",
            "127.0.0.1",
            "224.0.0.5",
            "255.255.255.255",
            "240.0.0.1",
        ] {
            assert!(
                martian_v4(bad.parse::<Ipv4Addr>().unwrap().to_bits()),
                "{bad}"
            );
        }
        for good in ["1.0.0.1", "10.0.0.1", "223.255.255.254"] {
            assert!(
                !martian_v4(good.parse::<Ipv4Addr>().unwrap().to_bits()),
                "{good}"
            );
        }
        // Every first octet, against the ranges as the documentation names them.
        for top in 0..=255u32 {
            let named = top == 0 || top == 127 || top >= 224;
            assert_eq!(martian_v4(top << 24 | 0x00ff_ff01), named, "{top}");
        }
        for bad in [
            "::",
            "::1",
            "ff02::1",
            "::ffff:10.0.0.1",
            "fe80::1",
            "febf::1",
        ] {
            assert!(
                martian_v6(bad.parse::<Ipv6Addr>().unwrap().to_bits()),
                "{bad}"
            );
        }
        for good in ["2001:db8::1", "fc00::1", "fec0::1", "::2"] {
            assert!(
                !martian_v6(good.parse::<Ipv6Addr>().unwrap().to_bits()),
                "{good}"
            );
        }
    }

    #[test]
    fn next_hops_are_shared_and_groups_deduplicated() {
        let mut route = Route::new(OptionsPolicy::Drop, FibKind::default());
        let a = Hop::Connected(1);
        let b = Hop::Gateway(NeighbourKey::v4(Ipv4Addr::new(10, 0, 0, 9), 2));
        let one = route.next_hop(&[a]).unwrap();
        assert_eq!(route.next_hop(&[a]).unwrap(), one);
        let group = route.next_hop(&[a, b]).unwrap();
        assert!(group.is_ecmp());
        assert_eq!(route.next_hop(&[a, b]).unwrap(), group);
        assert_eq!(route.hop(one.id()), Some(a));
        assert!(route.next_hop(&[]).is_err());
    }

    #[test]
    fn a_decision_fits_in_28_bytes() {
        // Written and read once per packet by three stages: keep it small.
        assert!(
            std::mem::size_of::<Next>() <= 28,
            "{}",
            std::mem::size_of::<Next>()
        );
    }

    #[test]
    fn decisions_trace() {
        let key = NeighbourKey::v4(Ipv4Addr::new(10, 1, 0, 2), 1);
        let forward = Next::Forward {
            neighbour: key,
            hop: Some(3),
        };
        assert_eq!(forward.to_string(), "forward 10.1.0.2 port 1");
        assert_eq!(Next::Local.to_string(), "local");
        assert_eq!(
            Next::Error(IcmpKind::TimeExceeded).to_string(),
            "icmp time-exceeded"
        );
    }
}
