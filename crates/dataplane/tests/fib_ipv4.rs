//! Property tests: the DIR-24-8 IPv4 FIB answers every lookup exactly as a plain binary-trie LPM
//! (`prefix-trie`) over the same routes, after any sequence of inserts and removes, and a bulk
//! build from the final route set gives the same answers and the same tbl8 usage.
//!
//! Prefixes are drawn around a few shared bases so that they overlap, repeat and nest; /0 and /32
//! are drawn on purpose. Probes are random addresses plus the edges of every prefix (first, last,
//! and one beyond each), where an off-by-one in range expansion would show.

use std::collections::HashSet;

use prefix_trie::PrefixMap;
use proptest::prelude::*;
use wirespeed_dataplane::table::fib::{Ipv4Fib, Ipv4Prefix, NextHop};

const BASES: [u32; 4] = [0x0a00_0000, 0x0a01_0200, 0xc0a8_0000, 0xffff_ff00];

fn prefix() -> impl Strategy<Value = (u32, u8)> {
    // Short prefixes rewrite up to 2^24 entries each (slow in a debug build): few of them.
    let len = prop_oneof![1 => Just(0u8), 3 => Just(32u8), 2 => 0u8..=32, 24 => 16u8..=32];
    let addr = prop_oneof![
        any::<u32>(),
        (0..BASES.len(), any::<u16>()).prop_map(|(k, noise)| BASES[k] ^ u32::from(noise & 0x3ff)),
    ];
    (addr, len)
}

#[derive(Debug, Clone)]
enum Op {
    Insert(usize, u32),
    Remove(usize),
}

fn ops() -> impl Strategy<Value = (Vec<(u32, u8)>, Vec<Op>)> {
    let prefixes = prop::collection::vec(prefix(), 1..48);
    let op = prop_oneof![
        3 => (any::<usize>(), 0u32..1000).prop_map(|(i, h)| Op::Insert(i, h)),
        1 => any::<usize>().prop_map(Op::Remove),
    ];
    (prefixes, prop::collection::vec(op, 1..100))
}

fn mask(len: u8) -> u32 {
    if len == 0 { 0 } else { u32::MAX << (32 - len) }
}

fn reference_lookup(reference: &PrefixMap<(u32, u8), u32>, addr: u32) -> Option<NextHop> {
    reference
        .get_lpm(&(addr, 32))
        .and_then(|(_, &h)| NextHop::hop(h))
}

fn probes(prefixes: &[(u32, u8)], random: &[u32]) -> Vec<u32> {
    let mut out = random.to_vec();
    out.extend([0, 1, u32::MAX, u32::MAX - 1]);
    for &(addr, len) in prefixes {
        let first = addr & mask(len);
        let last = first | !mask(len);
        out.extend([
            first,
            last,
            first.wrapping_sub(1),
            last.wrapping_add(1),
            first | 0x80,
        ]);
    }
    out
}

fn check(
    fib: &Ipv4Fib,
    reference: &PrefixMap<(u32, u8), u32>,
    probes: &[u32],
) -> Result<(), TestCaseError> {
    let mut batch = vec![None; probes.len()];
    fib.lookup_batch(probes, &mut batch);
    for (&addr, &batched) in probes.iter().zip(&batch) {
        let expected = reference_lookup(reference, addr);
        prop_assert_eq!(fib.lookup(addr), expected, "lookup {:#010x}", addr);
        prop_assert_eq!(batched, expected, "lookup_batch {:#010x}", addr);
        prop_assert_eq!(
            fib.lookup_hop(addr),
            expected.map(NextHop::id),
            "lookup_hop {:#010x}",
            addr
        );
    }
    Ok(())
}

fn long_slash24s(reference: &PrefixMap<(u32, u8), u32>) -> usize {
    reference
        .iter()
        .filter(|((_, len), _)| *len > 24)
        .map(|((a, _), _)| a >> 8)
        .collect::<HashSet<_>>()
        .len()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    #[test]
    fn agrees_with_reference_after_inserts_and_removes(
        (prefixes, ops) in ops(),
        random in prop::collection::vec(any::<u32>(), 64),
    ) {
        let mut fib = Ipv4Fib::new();
        let mut reference: PrefixMap<(u32, u8), u32> = PrefixMap::new();
        for op in &ops {
            match *op {
                Op::Insert(i, h) => {
                    let (addr, len) = prefixes[i % prefixes.len()];
                    let p = Ipv4Prefix::new(addr, len).unwrap();
                    let previous = fib.insert(p, NextHop::hop(h).unwrap()).unwrap();
                    let expected = reference.insert((p.addr(), len), h);
                    prop_assert_eq!(previous.map(NextHop::id), expected);
                }
                Op::Remove(i) => {
                    let (addr, len) = prefixes[i % prefixes.len()];
                    let p = Ipv4Prefix::new(addr, len).unwrap();
                    let removed = fib.remove(p).map(NextHop::id);
                    prop_assert_eq!(removed, reference.remove(&(p.addr(), len)));
                }
            }
        }
        let probes = probes(&prefixes, &random);
        check(&fib, &reference, &probes)?;
        prop_assert_eq!(fib.len(), reference.len());
        prop_assert_eq!(fib.tbl8_groups_in_use(), long_slash24s(&reference), "groups freed with their last long prefix");

        let built = Ipv4Fib::from_routes(
            reference.iter().map(|((a, l), &h)| route(a, l, h)),
        ).unwrap();
        check(&built, &reference, &probes)?;
        prop_assert_eq!(built.tbl8_groups_in_use(), fib.tbl8_groups_in_use());
        let mut routes: Vec<_> = fib.routes().collect();
        let mut built_routes: Vec<_> = built.routes().collect();
        routes.sort_by_key(|r| r.0);
        built_routes.sort_by_key(|r| r.0);
        prop_assert_eq!(routes, built_routes);
    }

    #[test]
    fn bulk_build_with_duplicates_agrees_with_reference(
        routes in prop::collection::vec((prefix(), 0u32..1000), 0..200),
        random in prop::collection::vec(any::<u32>(), 64),
    ) {
        let mut reference: PrefixMap<(u32, u8), u32> = PrefixMap::new();
        for &((addr, len), h) in &routes {
            reference.insert((addr & mask(len), len), h); // later duplicates win
        }
        let fib = Ipv4Fib::from_routes(
            routes.iter().map(|&((a, l), h)| route(a, l, h)),
        ).unwrap();
        let prefixes: Vec<(u32, u8)> = routes.iter().map(|r| r.0).collect();
        check(&fib, &reference, &probes(&prefixes, &random))?;
        prop_assert_eq!(fib.len(), reference.len());
    }
}

fn route(addr: u32, len: u8, hop: u32) -> (Ipv4Prefix, NextHop) {
    (
        Ipv4Prefix::new(addr, len).unwrap(),
        NextHop::hop(hop).unwrap(),
    )
}

#[test]
fn lookup_hop_answers_single_hops_only() {
    let mut fib = Ipv4Fib::new();
    let group = NextHop::ecmp(3).unwrap();
    fib.insert(
        Ipv4Prefix::new(0x0a00_0000, 8).unwrap(),
        NextHop::hop(7).unwrap(),
    )
    .unwrap();
    fib.insert(Ipv4Prefix::new(0x0a01_0000, 16).unwrap(), group)
        .unwrap();
    fib.insert(Ipv4Prefix::new(0x0a02_0080, 25).unwrap(), group)
        .unwrap();
    assert_eq!(fib.lookup_hop(0x0a00_0001), Some(7));
    assert_eq!(fib.lookup(0x0a01_0001), Some(group));
    assert_eq!(fib.lookup_hop(0x0a01_0001), None, "an ECMP group");
    assert_eq!(
        fib.lookup_hop(0x0a02_0081),
        None,
        "an ECMP group in a tbl8 group"
    );
    assert_eq!(
        fib.lookup_hop(0x0a02_0001),
        Some(7),
        "beside it in the tbl8 group"
    );
    assert_eq!(fib.lookup_hop(0x0b00_0001), None, "no route");
}
