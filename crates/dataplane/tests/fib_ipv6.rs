//! Property tests: the IPv6 multibit-trie FIB answers every lookup exactly as a plain binary-trie
//! LPM (`prefix-trie`) over the same routes, after any sequence of inserts and removes; it holds
//! exactly the trie nodes the remaining routes need (so removes free them); and a bulk build from
//! the final route set gives the same answers.
//!
//! Prefixes are drawn around a few shared bases so that they overlap, repeat and nest; /0 and /128
//! are drawn on purpose. Probes are random addresses plus the edges of every prefix.

use std::collections::HashSet;

use prefix_trie::PrefixMap;
use proptest::prelude::*;
use wirespeed_dataplane::table::fib::{Ipv6Fib, Ipv6Prefix, NextHop};

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

fn check(
    fib: &Ipv6Fib,
    reference: &PrefixMap<(u128, u8), u32>,
    probes: &[u128],
) -> Result<(), TestCaseError> {
    let mut batch = vec![None; probes.len()];
    fib.lookup_batch(probes, &mut batch);
    for (&addr, &batched) in probes.iter().zip(&batch) {
        let expected = reference
            .get_lpm(&(addr, 128))
            .and_then(|(_, &h)| NextHop::hop(h));
        prop_assert_eq!(fib.lookup(addr), expected, "lookup {:#x}", addr);
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

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn agrees_with_reference_after_inserts_and_removes(
        (prefixes, ops) in ops(),
        random in prop::collection::vec(any::<u128>(), 64),
    ) {
        let mut fib = Ipv6Fib::new();
        let mut reference: PrefixMap<(u128, u8), u32> = PrefixMap::new();
        for op in &ops {
            match *op {
                Op::Insert(i, h) => {
                    let (addr, len) = prefixes[i % prefixes.len()];
                    let (p, hop) = route(addr, len, h);
                    let previous = fib.insert(p, hop).unwrap();
                    prop_assert_eq!(previous.map(NextHop::id), reference.insert((p.addr(), len), h));
                }
                Op::Remove(i) => {
                    let (addr, len) = prefixes[i % prefixes.len()];
                    let p = Ipv6Prefix::new(addr, len).unwrap();
                    let removed = fib.remove(p).map(NextHop::id);
                    prop_assert_eq!(removed, reference.remove(&(p.addr(), len)));
                }
            }
        }
        let probes = probes(&prefixes, &random);
        check(&fib, &reference, &probes)?;
        prop_assert_eq!(fib.len(), reference.len());
        prop_assert_eq!(fib.nodes_in_use(), nodes_needed(&reference), "nodes freed with their last prefix");

        let built = Ipv6Fib::from_routes(reference.iter().map(|((a, l), &h)| route(a, l, h))).unwrap();
        check(&built, &reference, &probes)?;
        prop_assert_eq!(built.nodes_in_use(), fib.nodes_in_use());
    }

    #[test]
    fn bulk_build_with_duplicates_agrees_with_reference(
        routes in prop::collection::vec((prefix(), 0u32..1000), 0..200),
        random in prop::collection::vec(any::<u128>(), 64),
    ) {
        let mut reference: PrefixMap<(u128, u8), u32> = PrefixMap::new();
        for &((addr, len), h) in &routes {
            reference.insert((addr & mask(len), len), h); // later duplicates win
        }
        let fib = Ipv6Fib::from_routes(routes.iter().map(|&((a, l), h)| route(a, l, h))).unwrap();
        let prefixes: Vec<(u128, u8)> = routes.iter().map(|r| r.0).collect();
        check(&fib, &reference, &probes(&prefixes, &random))?;
        prop_assert_eq!(fib.len(), reference.len());
    }
}
