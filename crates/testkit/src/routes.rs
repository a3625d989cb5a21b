//! Deterministic route tables and destinations for FIB tests and benchmarks.
//!
//! A FIB's speed and size depend on the prefix-length mix and on how prefixes nest, so the
//! generators follow the shape of a BGP table rather than drawing uniform prefixes:
//!
//! * IPv4 ([`ipv4_prefixes`]): ~60 % /24, then /22, /23, /20, /21, /19, /18, /16, /17, under 1 %
//!   shorter than /16 and 1.5 % longer than /24 (the DFZ has ~0.3 % longer than /24; more here so
//!   the second level of DIR-24-8 is exercised). A third of the prefixes longer than /16 are
//!   more-specifics of an earlier shorter prefix (deaggregation), the rest lie anywhere in 1/8 ..
//!   223/8 except 10/8 and 127/8.
//! * IPv6 ([`ipv6_prefixes`]): ~52 % /48, 15 % /32, 9 % each /40 and /44, 4 % each /36 and /29,
//!   a little /42, /45, /56, /60, /64 and /128. Allocations (/29, /32) lie in the RIR blocks
//!   (2001::/16, 2400::/12, 2600::/12, 2800::/12, 2a00::/12, 2c00::/12); everything longer is
//!   assigned inside an allocation, numbered from the bottom of it as registries and LIRs do
//!   (the assignment number is drawn with a bias towards small values), so assignments cluster.
//!
//! Everything comes from one seed through a SplitMix64 generator ([`Rng`]): the same arguments
//! give the same table on every machine, and no dependency is needed.

use std::collections::HashSet;

/// SplitMix64 (Steele, Lea, Flood 2014): tiny, fast and good enough for test data.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator seeded with `seed`.
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// The next 32 random bits.
    pub fn next_u32(&mut self) -> u32 {
        (self.next_u64() >> 32) as u32
    }

    /// The next 128 random bits.
    pub fn next_u128(&mut self) -> u128 {
        (u128::from(self.next_u64()) << 64) | u128::from(self.next_u64())
    }

    /// A value in `0..n` (`0` when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// A value drawn from `choices` (value, weight) in proportion to the weights.
    fn weighted(&mut self, choices: &[(u8, u32)]) -> u8 {
        let total: u64 = choices.iter().map(|&(_, w)| u64::from(w)).sum();
        let mut pick = self.below(total);
        for &(value, weight) in choices {
            if pick < u64::from(weight) {
                return value;
            }
            pick -= u64::from(weight);
        }
        choices.last().map_or(0, |&(value, _)| value)
    }

    /// A value below `2^bits` with a bias towards small values: the bit width itself is drawn
    /// uniformly first.
    fn low_biased(&mut self, bits: u32) -> u128 {
        let width = self.below(u64::from(bits) + 1) as u32;
        if width == 0 {
            0
        } else {
            self.next_u128() >> (128 - width)
        }
    }
}

/// IPv4 prefix lengths and their weight per 10 000 routes.
pub const IPV4_LENGTH_MIX: [(u8, u32); 25] = [
    (8, 1),
    (9, 1),
    (10, 2),
    (11, 4),
    (12, 8),
    (13, 12),
    (14, 18),
    (15, 20),
    (16, 130),
    (17, 80),
    (18, 150),
    (19, 300),
    (20, 500),
    (21, 500),
    (22, 1100),
    (23, 1000),
    (24, 6024),
    (25, 25),
    (26, 25),
    (27, 20),
    (28, 20),
    (29, 20),
    (30, 20),
    (31, 5),
    (32, 15),
];

/// IPv6 prefix lengths and their weight per 1 000 routes.
pub const IPV6_LENGTH_MIX: [(u8, u32); 12] = [
    (29, 40),
    (32, 150),
    (36, 40),
    (40, 90),
    (42, 20),
    (44, 90),
    (45, 10),
    (48, 520),
    (56, 15),
    (60, 5),
    (64, 10),
    (128, 10),
];

fn mask4(len: u8) -> u32 {
    if len == 0 {
        0
    } else {
        u32::MAX << (32 - u32::from(len))
    }
}

fn mask6(len: u8) -> u128 {
    if len == 0 {
        0
    } else {
        u128::MAX << (128 - u32::from(len))
    }
}

/// `count` distinct IPv4 prefixes (network address in host order, length) in the BGP-like mix
/// of [`IPV4_LENGTH_MIX`]. Lengths whose space runs out (there are only so many /8s) are redrawn,
/// so `count` may be anything up to a few million.
pub fn ipv4_prefixes(count: usize, seed: u64) -> Vec<(u32, u8)> {
    let mut rng = Rng::new(seed);
    let mut seen = HashSet::with_capacity(count);
    let mut out = Vec::with_capacity(count);
    let mut parents: Vec<(u32, u8)> = Vec::new();
    while out.len() < count {
        let len = rng.weighted(&IPV4_LENGTH_MIX);
        let addr = match parents.get(rng.below(parents.len() as u64) as usize) {
            Some(&(parent, parent_len)) if len > 16 && parent_len < len && rng.below(3) == 0 => {
                parent | (rng.next_u32() & !mask4(parent_len))
            }
            _ => loop {
                let addr = rng.next_u32();
                let first = addr >> 24;
                if (1..=223).contains(&first) && first != 10 && first != 127 {
                    break addr;
                }
            },
        } & mask4(len);
        if seen.insert((addr, len)) {
            out.push((addr, len));
            if len <= 20 {
                parents.push((addr, len));
            }
        }
    }
    out
}

/// The IPv6 RIR blocks allocations are drawn from: (top 16 bits, length).
const RIR_BLOCKS: [(u128, u8); 6] = [
    (0x2001, 16),
    (0x2400, 12),
    (0x2600, 12),
    (0x2800, 12),
    (0x2a00, 12),
    (0x2c00, 12),
];

/// `count` distinct IPv6 prefixes (network address in host order, length) in the BGP-like mix
/// of [`IPV6_LENGTH_MIX`]: allocations (/32 and shorter) inside the RIR blocks, every longer
/// prefix inside an allocation.
pub fn ipv6_prefixes(count: usize, seed: u64) -> Vec<(u128, u8)> {
    let mut rng = Rng::new(seed);
    let allocation_weight: u32 = IPV6_LENGTH_MIX
        .iter()
        .filter(|&&(len, _)| len <= 32)
        .map(|&(_, w)| w)
        .sum();
    let total_weight: u32 = IPV6_LENGTH_MIX.iter().map(|&(_, w)| w).sum();
    let allocations_wanted = (count * allocation_weight as usize)
        .div_ceil(total_weight as usize)
        .min(count);
    let short: Vec<(u8, u32)> = IPV6_LENGTH_MIX
        .iter()
        .copied()
        .filter(|&(l, _)| l <= 32)
        .collect();
    let long: Vec<(u8, u32)> = IPV6_LENGTH_MIX
        .iter()
        .copied()
        .filter(|&(l, _)| l > 32)
        .collect();

    let mut seen = HashSet::with_capacity(count);
    let mut out = Vec::with_capacity(count);
    while out.len() < allocations_wanted {
        let len = rng.weighted(&short);
        let block = RIR_BLOCKS[rng.below(RIR_BLOCKS.len() as u64) as usize];
        let addr = ((block.0 << 112) | (rng.next_u128() & !mask6(block.1))) & mask6(len);
        if seen.insert((addr, len)) {
            out.push((addr, len));
        }
    }
    let allocations = out.len();
    while out.len() < count {
        let len = rng.weighted(&long);
        let (parent, parent_len) = out[rng.below(allocations as u64) as usize];
        let free_bits = u32::from(len - parent_len);
        let number = rng.low_biased(free_bits);
        let host = if len == 128 { rng.low_biased(16) } else { 0 };
        let addr = parent | (number << (128 - u32::from(len))) | host;
        if seen.insert((addr, len)) {
            out.push((addr, len));
        }
    }
    out
}

/// `count` destinations spread over `prefixes`: each inside a prefix chosen uniformly, with
/// random host bits (the longest match may be a more-specific prefix inside it). Empty when
/// `prefixes` is.
pub fn ipv4_destinations(prefixes: &[(u32, u8)], count: usize, seed: u64) -> Vec<u32> {
    let mut rng = Rng::new(seed);
    if prefixes.is_empty() {
        return Vec::new();
    }
    (0..count)
        .map(|_| {
            let (addr, len) = prefixes[rng.below(prefixes.len() as u64) as usize];
            addr | (rng.next_u32() & !mask4(len))
        })
        .collect()
}

/// `count` destinations spread over `prefixes`, as [`ipv4_destinations`].
pub fn ipv6_destinations(prefixes: &[(u128, u8)], count: usize, seed: u64) -> Vec<u128> {
    let mut rng = Rng::new(seed);
    if prefixes.is_empty() {
        return Vec::new();
    }
    (0..count)
        .map(|_| {
            let (addr, len) = prefixes[rng.below(prefixes.len() as u64) as usize];
            addr | (rng.next_u128() & !mask6(len))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn share(prefixes: &[(impl Copy, u8)], pick: impl Fn(u8) -> bool) -> f64 {
        prefixes.iter().filter(|p| pick(p.1)).count() as f64 / prefixes.len() as f64
    }

    #[test]
    fn ipv4_mix_is_bgp_like_unique_and_deterministic() {
        let prefixes = ipv4_prefixes(100_000, 7);
        assert_eq!(prefixes.len(), 100_000);
        assert_eq!(
            prefixes.iter().collect::<HashSet<_>>().len(),
            prefixes.len(),
            "unique"
        );
        assert_eq!(prefixes, ipv4_prefixes(100_000, 7), "same seed, same table");
        assert_ne!(prefixes, ipv4_prefixes(100_000, 8));
        assert!(
            prefixes.iter().all(|&(a, l)| a & !mask4(l) == 0 && l <= 32),
            "host bits clear"
        );
        let slash24 = share(&prefixes, |l| l == 24);
        assert!((0.57..0.63).contains(&slash24), "/24 share {slash24}");
        let long = share(&prefixes, |l| l > 24);
        assert!((0.01..0.02).contains(&long), "longer than /24: {long}");
        assert!(share(&prefixes, |l| l < 16) > 0.003);
        assert!(
            prefixes
                .iter()
                .all(|&(a, _)| a >> 24 != 10 && a >> 24 != 127 && a != 0)
        );
    }

    #[test]
    fn ipv6_mix_is_clustered_unique_and_deterministic() {
        let prefixes = ipv6_prefixes(50_000, 3);
        assert_eq!(prefixes.len(), 50_000);
        assert_eq!(
            prefixes.iter().collect::<HashSet<_>>().len(),
            prefixes.len(),
            "unique"
        );
        assert_eq!(prefixes, ipv6_prefixes(50_000, 3));
        assert!(prefixes.iter().all(|&(a, l)| a & !mask6(l) == 0));
        let slash48 = share(&prefixes, |l| l == 48);
        assert!((0.49..0.55).contains(&slash48), "/48 share {slash48}");
        assert!(share(&prefixes, |l| l == 128) > 0.005);
        let allocations: HashSet<(u128, u8)> =
            prefixes.iter().copied().filter(|p| p.1 <= 32).collect();
        let inside = |a: u128| {
            [29, 32]
                .iter()
                .any(|&l| allocations.contains(&(a & mask6(l), l)))
        };
        assert!(
            prefixes
                .iter()
                .filter(|p| p.1 > 32)
                .all(|&(a, _)| inside(a)),
            "every assignment lies inside an allocation"
        );
        assert!(
            prefixes.iter().all(|&(a, _)| a >> 125 == 1),
            "all inside 2000::/3"
        );
    }

    #[test]
    fn destinations_fall_inside_their_prefixes() {
        let v4 = ipv4_prefixes(1000, 1);
        let d4 = ipv4_destinations(&v4, 5000, 2);
        assert_eq!(d4.len(), 5000);
        assert!(
            d4.iter()
                .all(|&d| v4.iter().any(|&(a, l)| d & mask4(l) == a))
        );
        assert_eq!(d4, ipv4_destinations(&v4, 5000, 2));
        let v6 = ipv6_prefixes(1000, 1);
        let d6 = ipv6_destinations(&v6, 5000, 2);
        assert!(
            d6.iter()
                .all(|&d| v6.iter().any(|&(a, l)| d & mask6(l) == a))
        );
        assert!(ipv4_destinations(&[], 10, 0).is_empty());
        let mut rng = Rng::new(0);
        assert!((0..1000).all(|_| rng.below(10) < 10));
        assert_eq!(rng.below(0), 0);
    }
}
