//! The longest-prefix-match tables `wirespeed bench fib --against` compares, behind one small
//! trait, and the routes and destinations they are given.
//!
//! Every table gets the same routes (next hops as small ids) and the same destinations, and
//! answers with hop ids ([`MISS`] for no route), so one table's answers can be checked against
//! another's lookup by lookup. IPv6 destinations are 16 bytes in network order, as in a packet:
//! DPDK reads them so, wirespeed's tries turn them into `u128` as the router does.
//!
//! A wirespeed FIB joins the comparison (and its agreement test) with one line in
//! [`ipv4_tables`] or [`ipv6_tables`], provided it has the API the existing ones share:
//! `from_routes`, `lookup`, `lookup_batch` and `memory_bytes`.

use std::fs;
use std::net::IpAddr;
use std::path::Path;

use anyhow::{Context, Result, bail, ensure};
use wirespeed_dataplane::table::fib::{
    Ipv4Fib, Ipv4Prefix, Ipv4Trie, Ipv6Fib, Ipv6Prefix, Ipv6Trie, LOOKUP_STEP, NextHop,
};
pub use wirespeed_dpdk_lpm::MISS;
use wirespeed_dpdk_lpm::{Eal, Lpm, Lpm6, MAX_HOP};
use wirespeed_testkit::routes::{
    Rng, ipv4_destinations, ipv4_prefixes, ipv6_destinations, ipv6_prefixes,
};

/// A table under comparison, built from [`Routes`], answering hop ids for addresses `A`.
pub trait LpmTable<A> {
    /// One lookup per address, in a plain loop (`hops[i]` for `addrs[i]`).
    fn lookup_each(&self, addrs: &[A], hops: &mut [u32]);
    /// The table's batched lookup, one worker batch ([`LOOKUP_STEP`]) of addresses per call.
    fn lookup_bulk(&self, addrs: &[A], hops: &mut [u32]);
    /// Bytes of the arrays lookups read.
    fn memory_bytes(&self) -> usize;
    /// Bytes the table took in all (lookup arrays and its route set), where it can tell.
    fn heap_bytes(&self) -> Option<usize> {
        None
    }
}

/// Routes as (network address in host order, prefix length, next-hop id), no prefix twice.
pub type Routes<A> = Vec<(A, u8, u32)>;

/// A table built for addresses `A`.
pub type Built<A> = Result<Box<dyn LpmTable<A>>>;

/// How to build one table under comparison.
pub struct Candidate<A, R> {
    /// Its name in the results.
    pub name: &'static str,
    /// Builds it from the routes.
    pub build: fn(&Eal, &Routes<R>) -> Built<A>,
}

fn hop(id: u32) -> Result<NextHop> {
    NextHop::hop(id).with_context(|| format!("next hop {id} exceeds {}", NextHop::MAX_ID))
}

/// Makes a wirespeed FIB type a [`Candidate`]: `$fib` must have `from_routes`, `lookup`,
/// `lookup_batch` and `memory_bytes` as `Ipv4Fib` (`ipv4`) or `Ipv6Fib` (`ipv6`) has them.
macro_rules! wirespeed_fib {
    ($name:literal, $fib:ty, ipv4) => {{
        /// The FIB, wrapped where an impl of the trait may live (a block's own type).
        struct Fib($fib);
        impl LpmTable<u32> for Fib {
            fn lookup_each(&self, addrs: &[u32], hops: &mut [u32]) {
                for (hop, &addr) in hops.iter_mut().zip(addrs) {
                    *hop = self.0.lookup(addr).map_or(MISS, NextHop::id);
                }
            }
            fn lookup_bulk(&self, addrs: &[u32], hops: &mut [u32]) {
                let mut found = [None; LOOKUP_STEP];
                for (addrs, hops) in addrs.chunks(LOOKUP_STEP).zip(hops.chunks_mut(LOOKUP_STEP)) {
                    self.0.lookup_batch(addrs, &mut found);
                    for (hop, found) in hops.iter_mut().zip(&found) {
                        *hop = found.map_or(MISS, NextHop::id);
                    }
                }
            }
            fn memory_bytes(&self) -> usize {
                self.0.memory_bytes()
            }
        }
        Candidate::<u32, u32> {
            name: $name,
            build: |_, routes| {
                let routes = routes
                    .iter()
                    .map(|&(addr, len, id)| Ok((Ipv4Prefix::new(addr, len)?, hop(id)?)))
                    .collect::<Result<Vec<_>>>()?;
                Ok(Box::new(Fib(<$fib>::from_routes(routes)?)))
            },
        }
    }};
    ($name:literal, $fib:ty, ipv6) => {{
        /// The FIB, wrapped where an impl of the trait may live (a block's own type).
        struct Fib($fib);
        impl LpmTable<[u8; 16]> for Fib {
            fn lookup_each(&self, addrs: &[[u8; 16]], hops: &mut [u32]) {
                for (hop, addr) in hops.iter_mut().zip(addrs) {
                    *hop = self
                        .0
                        .lookup(u128::from_be_bytes(*addr))
                        .map_or(MISS, NextHop::id);
                }
            }
            fn lookup_bulk(&self, addrs: &[[u8; 16]], hops: &mut [u32]) {
                let mut host = [0u128; LOOKUP_STEP];
                let mut found = [None; LOOKUP_STEP];
                for (addrs, hops) in addrs.chunks(LOOKUP_STEP).zip(hops.chunks_mut(LOOKUP_STEP)) {
                    for (host, addr) in host.iter_mut().zip(addrs) {
                        *host = u128::from_be_bytes(*addr);
                    }
                    self.0.lookup_batch(&host[..addrs.len()], &mut found);
                    for (hop, found) in hops.iter_mut().zip(&found) {
                        *hop = found.map_or(MISS, NextHop::id);
                    }
                }
            }
            fn memory_bytes(&self) -> usize {
                self.0.memory_bytes()
            }
        }
        Candidate::<[u8; 16], u128> {
            name: $name,
            build: |_, routes| {
                let routes = routes
                    .iter()
                    .map(|&(addr, len, id)| Ok((Ipv6Prefix::new(addr, len)?, hop(id)?)))
                    .collect::<Result<Vec<_>>>()?;
                Ok(Box::new(Fib(<$fib>::from_routes(routes)?)))
            },
        }
    }};
}

impl LpmTable<u32> for Lpm {
    fn lookup_each(&self, addrs: &[u32], hops: &mut [u32]) {
        Lpm::lookup_each(self, addrs, hops);
    }
    fn lookup_bulk(&self, addrs: &[u32], hops: &mut [u32]) {
        Lpm::lookup_bulk(self, addrs, hops);
    }
    fn memory_bytes(&self) -> usize {
        Lpm::memory_bytes(self)
    }
    fn heap_bytes(&self) -> Option<usize> {
        Some(Lpm::heap_bytes(self))
    }
}

impl LpmTable<[u8; 16]> for Lpm6 {
    fn lookup_each(&self, addrs: &[[u8; 16]], hops: &mut [u32]) {
        Lpm6::lookup_each(self, addrs, hops);
    }
    fn lookup_bulk(&self, addrs: &[[u8; 16]], hops: &mut [u32]) {
        Lpm6::lookup_bulk(self, addrs, hops);
    }
    fn memory_bytes(&self) -> usize {
        Lpm6::memory_bytes(self)
    }
    fn heap_bytes(&self) -> Option<usize> {
        Some(Lpm6::heap_bytes(self))
    }
}

/// The DPDK reference for IPv4.
pub const RTE_LPM: &str = "rte_lpm";
/// The DPDK reference for IPv6.
pub const RTE_LPM6: &str = "rte_lpm6";

/// The IPv4 tables compared: wirespeed's FIBs (one line each), then DPDK's.
pub fn ipv4_tables() -> Vec<Candidate<u32, u32>> {
    vec![
        wirespeed_fib!("dir-24-8", Ipv4Fib, ipv4),
        wirespeed_fib!("poptrie", Ipv4Trie, ipv4),
        Candidate {
            name: RTE_LPM,
            build: |eal, routes| Ok(Box::new(Lpm::new(eal, routes)?)),
        },
    ]
}

/// The IPv6 tables compared: wirespeed's FIBs (one line each), then DPDK's.
pub fn ipv6_tables() -> Vec<Candidate<[u8; 16], u128>> {
    vec![
        wirespeed_fib!("trie-16-8", Ipv6Fib, ipv6),
        wirespeed_fib!("poptrie", Ipv6Trie, ipv6),
        Candidate {
            name: RTE_LPM6,
            build: |eal, routes| Ok(Box::new(Lpm6::new(eal, routes)?)),
        },
    ]
}

/// The largest next-hop id every table can carry (DPDK's rte_lpm6 has the fewest bits).
fn hop_limit() -> u32 {
    MAX_HOP.min(NextHop::MAX_ID)
}

/// How the generated tables' routes get their next hops (`--next-hops`).
///
/// A router's FIB has as many next hops as the router has neighbours it forwards to: a handful
/// for an edge router with a few upstreams, tens to a few hundred for one at an exchange
/// point, never one per route. How many there are matters to a compressed trie: Poptrie stores
/// a run of equal leaves once (`leafvec`), and neighbouring prefixes with the same next hop
/// make longer runs. [`NextHops::Distinct`] is the worst case and stays reachable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NextHops {
    /// Route *i* gets next hop *i* (modulo the largest id every table carries, 2^21): one
    /// next hop per route, nothing for leaf compression to merge.
    Distinct,
    /// Each route gets one of this many next hops, drawn uniformly and independently of its
    /// neighbours: the least compressible assignment with that many (in real tables a
    /// prefix's neighbours and more-specifics often share its next hop, which compresses
    /// further).
    Drawn(u32),
}

impl NextHops {
    /// The default of `--next-hops`: 64, a router with tens of BGP neighbours.
    pub const DEFAULT: NextHops = NextHops::Drawn(64);
}

impl std::str::FromStr for NextHops {
    type Err = String;
    fn from_str(text: &str) -> Result<Self, String> {
        if text == "distinct" {
            return Ok(NextHops::Distinct);
        }
        match text.parse::<u32>() {
            Ok(n) if (1..=hop_limit()).contains(&n) => Ok(NextHops::Drawn(n)),
            _ => Err(format!(
                "expected `distinct` or a count of next hops from 1 to {}, found {text:?}",
                hop_limit()
            )),
        }
    }
}

impl std::fmt::Display for NextHops {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NextHops::Distinct => f.write_str("distinct"),
            NextHops::Drawn(n) => write!(f, "{n}"),
        }
    }
}

/// `prefixes` with next hops assigned as `hops` says (drawn from `seed`).
fn with_hops<A>(prefixes: Vec<(A, u8)>, hops: NextHops, seed: u64) -> Routes<A> {
    let limit = hop_limit() as usize + 1;
    let mut rng = Rng::new(seed ^ 0x6e65_7874_686f_7073);
    prefixes
        .into_iter()
        .enumerate()
        .map(|(i, (addr, len))| {
            let id = match hops {
                NextHops::Distinct => (i % limit) as u32,
                NextHops::Drawn(n) => rng.below(u64::from(n)) as u32,
            };
            (addr, len, id)
        })
        .collect()
}

/// `count` BGP-like IPv4 routes (the testkit's generator), next hops assigned as `hops` says.
pub fn generated_ipv4(count: usize, seed: u64, hops: NextHops) -> Routes<u32> {
    with_hops(ipv4_prefixes(count, seed), hops, seed)
}

/// `count` BGP-like IPv6 routes (the testkit's generator), next hops assigned as `hops` says.
pub fn generated_ipv6(count: usize, seed: u64, hops: NextHops) -> Routes<u128> {
    with_hops(ipv6_prefixes(count, seed), hops, seed)
}

/// The routes of a real table: one `PREFIX NEXTHOP` per line (`#` starts a comment), IPv4 and
/// IPv6 mixed. Next hops are any token (an address, an AS, a name): each distinct one gets the
/// next id. A prefix seen again replaces its earlier next hop; host bits are cleared. Default
/// routes (`/0`) are left out: DPDK's tables cannot hold one (a router answers a miss with it).
///
/// From a RIPE RIS or RouteViews dump (MRT): `bgpdump -m rib.bz2 | awk -F'|' '{print $6, $9}'`
/// (fields 6 and 9 of `bgpdump -m` are the prefix and the next hop).
pub fn routes_file(path: &Path) -> Result<(Routes<u32>, Routes<u128>)> {
    let text = fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let mut hops = std::collections::HashMap::new();
    let mut v4 = std::collections::HashMap::new();
    let mut v6 = std::collections::HashMap::new();
    let mut order4 = Vec::new();
    let mut order6 = Vec::new();
    for (number, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let where_ = || format!("{}:{}", path.display(), number + 1);
        let mut fields = line.split_whitespace();
        let (Some(prefix), Some(next_hop), None) = (fields.next(), fields.next(), fields.next())
        else {
            bail!("{}: expected `PREFIX NEXTHOP`, found {line:?}", where_());
        };
        let (addr, len) = prefix
            .split_once('/')
            .with_context(|| format!("{}: {prefix:?} has no /length", where_()))?;
        let addr: IpAddr = addr
            .parse()
            .with_context(|| format!("{}: {addr:?} is not an address", where_()))?;
        let len: u8 = len
            .parse()
            .with_context(|| format!("{}: {len:?} is not a prefix length", where_()))?;
        if len == 0 {
            continue;
        }
        let count = hops.len() as u32;
        let id = *hops.entry(next_hop.to_owned()).or_insert(count);
        ensure!(
            id <= hop_limit(),
            "{}: more than {} distinct next hops",
            where_(),
            hop_limit() + 1
        );
        match addr {
            IpAddr::V4(addr) => {
                ensure!(len <= 32, "{}: /{len} is longer than 32", where_());
                let addr = addr.to_bits() & u32::MAX.checked_shl(32 - u32::from(len)).unwrap_or(0);
                if v4.insert((addr, len), id).is_none() {
                    order4.push((addr, len));
                }
            }
            IpAddr::V6(addr) => {
                ensure!(len <= 128, "{}: /{len} is longer than 128", where_());
                let addr =
                    addr.to_bits() & u128::MAX.checked_shl(128 - u32::from(len)).unwrap_or(0);
                if v6.insert((addr, len), id).is_none() {
                    order6.push((addr, len));
                }
            }
        }
    }
    let v4 = order4
        .into_iter()
        .map(|(a, l)| (a, l, v4[&(a, l)]))
        .collect();
    let v6 = order6
        .into_iter()
        .map(|(a, l)| (a, l, v6[&(a, l)]))
        .collect();
    Ok((v4, v6))
}

/// Which destinations a trace holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum TraceKind {
    /// Uniform over the address space (IPv6: over 2000::/3, the global unicast space).
    Random,
    /// Inside the routed prefixes, each prefix equally likely, random host bits.
    Routed,
}

/// `count` IPv4 destinations of `kind` (host order).
pub fn ipv4_trace(kind: TraceKind, routes: &Routes<u32>, count: usize, seed: u64) -> Vec<u32> {
    match kind {
        TraceKind::Random => {
            let mut rng = Rng::new(seed);
            (0..count).map(|_| rng.next_u32()).collect()
        }
        TraceKind::Routed => {
            let prefixes: Vec<(u32, u8)> = routes.iter().map(|&(a, l, _)| (a, l)).collect();
            ipv4_destinations(&prefixes, count, seed)
        }
    }
}

/// `count` IPv6 destinations of `kind` (network order).
pub fn ipv6_trace(
    kind: TraceKind,
    routes: &Routes<u128>,
    count: usize,
    seed: u64,
) -> Vec<[u8; 16]> {
    let host: Vec<u128> = match kind {
        TraceKind::Random => {
            let mut rng = Rng::new(seed);
            (0..count)
                .map(|_| (rng.next_u128() >> 3) | (1 << 125))
                .collect()
        }
        TraceKind::Routed => {
            let prefixes: Vec<(u128, u8)> = routes.iter().map(|&(a, l, _)| (a, l)).collect();
            ipv6_destinations(&prefixes, count, seed)
        }
    };
    host.into_iter().map(u128::to_be_bytes).collect()
}
