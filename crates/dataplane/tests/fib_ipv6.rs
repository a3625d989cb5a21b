//! Property tests: both IPv6 FIBs, the multibit trie and Poptrie, answer every lookup exactly as
//! a plain binary-trie LPM (`prefix-trie`) over the same routes, after any sequence of inserts
//! and removes; the multibit trie holds exactly the nodes the remaining routes need (so removes
//! free them), and each holds what a bulk build from the final route set holds, which gives the
//! same answers.
//!
//! Prefixes are drawn around a few shared bases so that they overlap, repeat and nest; /0 and /128
//! are drawn on purpose. Probes are random addresses plus the edges of every prefix.

use std::collections::HashSet;

use prefix_trie::PrefixMap;
use proptest::prelude::*;
use wirespeed_dataplane::table::fib::{Ipv6Fib, Ipv6Prefix, Ipv6Trie, NextHop};

const BASES: [u128; 4] = [
    0x2001_0db8 << 96,
    0x2001_0db8_0001_0002 << 64,
    0x2a00_1450_4001_0800 << 64,
    u128::MAX << 16,
];

fn prefix() -> impl Strategy<Value = (u128, u8)> {
    let len = prop_oneof![1 => Just(0u8), 2 => Just(128u8), 4 => 0u8..=128, 4 => 16u8..=64];
    let addr = prop_oneof![
        any::<u128>(),
        (0..BASES.len(), any::<u64>(), 0u32..128)
            .prop_map(|(k, noise, shift)| BASES[k] ^ (u128::from(noise) << shift)),
        (0..BASES.len(), any::<u16>()).prop_map(|(k, noise)| BASES[k] ^ u128::from(noise)),
    ];
    (addr, len)
}

#[derive(Debug, Clone)]
enum Op {
    Insert(usize, u32),
    Remove(usize),
}

fn ops() -> impl Strategy<Value = (Vec<(u128, u8)>, Vec<Op>)> {
    let prefixes = prop::collection::vec(prefix(), 1..48);
    let op = prop_oneof![
        3 => (any::<usize>(), 0u32..1000).prop_map(|(i, h)| Op::Insert(i, h)),
        1 => any::<usize>().prop_map(Op::Remove),
    ];
    (prefixes, prop::collection::vec(op, 1..160))
}

fn mask(len: u8) -> u128 {
    if len == 0 {
        0
    } else {
        u128::MAX << (128 - len)
    }
}

fn route(addr: u128, len: u8, hop: u32) -> (Ipv6Prefix, NextHop) {
    (
        Ipv6Prefix::new(addr, len).unwrap(),
        NextHop::hop(hop).unwrap(),
    )
}

fn probes(prefixes: &[(u128, u8)], random: &[u128]) -> Vec<u128> {
    let mut out = random.to_vec();
    out.extend([0, 1, u128::MAX, u128::MAX - 1]);
    for &(addr, len) in prefixes {
        let first = addr & mask(len);
        let last = first | !mask(len);
        out.extend([
            first,
            last,
            first.wrapping_sub(1),
            last.wrapping_add(1),
            first | 1 << 70,
        ]);
    }
    out
}

/// What the properties ask of an IPv6 FIB.
trait Fib: Sized {
    fn empty() -> Self;
    fn build(routes: impl IntoIterator<Item = (Ipv6Prefix, NextHop)>) -> Self;
    fn add(&mut self, prefix: Ipv6Prefix, hop: NextHop) -> Option<NextHop>;
    fn delete(&mut self, prefix: Ipv6Prefix) -> Option<NextHop>;
    fn find(&self, addr: u128) -> Option<NextHop>;
    fn find_batch(&self, addrs: &[u128], out: &mut [Option<NextHop>]);
    fn count(&self) -> usize;
    /// The blocks of memory the table holds for its routes.
    fn usage(&self) -> usize;
    /// What [`Fib::usage`] must be for the route set of `reference`, where that is known.
    fn usage_needed(reference: &PrefixMap<(u128, u8), u32>) -> Option<usize>;
}

macro_rules! fib {
    ($table:ty, $usage:expr, $needed:expr) => {
        impl Fib for $table {
            fn empty() -> Self {
                <$table>::new()
            }
            fn build(routes: impl IntoIterator<Item = (Ipv6Prefix, NextHop)>) -> Self {
                <$table>::from_routes(routes).unwrap()
            }
            fn add(&mut self, prefix: Ipv6Prefix, hop: NextHop) -> Option<NextHop> {
                self.insert(prefix, hop).unwrap()
            }
            fn delete(&mut self, prefix: Ipv6Prefix) -> Option<NextHop> {
                self.remove(prefix)
            }
            fn find(&self, addr: u128) -> Option<NextHop> {
                self.lookup(addr)
            }
            fn find_batch(&self, addrs: &[u128], out: &mut [Option<NextHop>]) {
                self.lookup_batch(addrs, out)
            }
            fn count(&self) -> usize {
                self.len()
            }
            fn usage(&self) -> usize {
                $usage(self)
            }
            fn usage_needed(reference: &PrefixMap<(u128, u8), u32>) -> Option<usize> {
                $needed(reference)
            }
        }
    };
}

fib!(Ipv6Fib, Ipv6Fib::nodes_in_use, |reference| Some(
    nodes_needed(reference)
));
fib!(
    Ipv6Trie,
    |trie: &Ipv6Trie| trie.nodes_in_use() + trie.leaves_in_use(),
    |_| None
);

fn check<F: Fib>(
    fib: &F,
    reference: &PrefixMap<(u128, u8), u32>,
    probes: &[u128],
) -> Result<(), TestCaseError> {
    let mut batch = vec![None; probes.len()];
    fib.find_batch(probes, &mut batch);
    for (&addr, &batched) in probes.iter().zip(&batch) {
        let expected = reference
            .get_lpm(&(addr, 128))
            .and_then(|(_, &h)| NextHop::hop(h));
        prop_assert_eq!(fib.find(addr), expected, "lookup {:#x}", addr);
        prop_assert_eq!(batched, expected, "lookup_batch {:#x}", addr);
    }
    Ok(())
}

/// The nodes a route set needs: one per (start bit, address above it) for each route that ends
/// below that start bit.
fn nodes_needed(reference: &PrefixMap<(u128, u8), u32>) -> usize {
    let mut nodes = HashSet::new();
    for ((addr, len), _) in reference.iter() {
        for start in (16u8..128).step_by(8).take_while(|&s| len > s) {
            nodes.insert((start, addr >> (128 - u32::from(start))));
        }
    }
    nodes.len()
}

fn agrees_after_inserts_and_removes<F: Fib>(
    prefixes: &[(u128, u8)],
    ops: &[Op],
    random: &[u128],
) -> Result<(), TestCaseError> {
    let mut fib = F::empty();
    let mut reference: PrefixMap<(u128, u8), u32> = PrefixMap::new();
    for op in ops {
        match *op {
            Op::Insert(i, h) => {
                let (addr, len) = prefixes[i % prefixes.len()];
                let (p, hop) = route(addr, len, h);
                let previous = fib.add(p, hop);
                prop_assert_eq!(
                    previous.map(NextHop::id),
                    reference.insert((p.addr(), len), h)
                );
            }
            Op::Remove(i) => {
                let (addr, len) = prefixes[i % prefixes.len()];
                let p = Ipv6Prefix::new(addr, len).unwrap();
                let removed = fib.delete(p).map(NextHop::id);
                prop_assert_eq!(removed, reference.remove(&(p.addr(), len)));
            }
        }
    }
    let probes = probes(prefixes, random);
    check(&fib, &reference, &probes)?;
    prop_assert_eq!(fib.count(), reference.len());
    if let Some(needed) = F::usage_needed(&reference) {
        prop_assert_eq!(fib.usage(), needed, "nodes freed with their last prefix");
    }

    let built = F::build(reference.iter().map(|((a, l), &h)| route(a, l, h)));
    check(&built, &reference, &probes)?;
    prop_assert_eq!(
        built.usage(),
        fib.usage(),
        "updates hold what a build holds"
    );
    Ok(())
}

fn bulk_build_agrees<F: Fib>(
    routes: &[((u128, u8), u32)],
    random: &[u128],
) -> Result<(), TestCaseError> {
    let mut reference: PrefixMap<(u128, u8), u32> = PrefixMap::new();
    for &((addr, len), h) in routes {
        reference.insert((addr & mask(len), len), h); // later duplicates win
    }
    let fib = F::build(routes.iter().map(|&((a, l), h)| route(a, l, h)));
    let prefixes: Vec<(u128, u8)> = routes.iter().map(|r| r.0).collect();
    check(&fib, &reference, &probes(&prefixes, random))?;
    prop_assert_eq!(fib.count(), reference.len());
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn agrees_with_reference_after_inserts_and_removes(
        (prefixes, ops) in ops(),
        random in prop::collection::vec(any::<u128>(), 64),
    ) {
        agrees_after_inserts_and_removes::<Ipv6Fib>(&prefixes, &ops, &random)?;
    }

    #[test]
    fn bulk_build_with_duplicates_agrees_with_reference(
        routes in prop::collection::vec((prefix(), 0u32..1000), 0..200),
        random in prop::collection::vec(any::<u128>(), 64),
    ) {
        bulk_build_agrees::<Ipv6Fib>(&routes, &random)?;
    }

    #[test]
    fn poptrie_agrees_with_reference_after_inserts_and_removes(
        (prefixes, ops) in ops(),
        random in prop::collection::vec(any::<u128>(), 64),
    ) {
        agrees_after_inserts_and_removes::<Ipv6Trie>(&prefixes, &ops, &random)?;
    }

    #[test]
    fn poptrie_bulk_build_with_duplicates_agrees_with_reference(
        routes in prop::collection::vec((prefix(), 0u32..1000), 0..200),
        random in prop::collection::vec(any::<u128>(), 64),
    ) {
        bulk_build_agrees::<Ipv6Trie>(&routes, &random)?;
    }
}
