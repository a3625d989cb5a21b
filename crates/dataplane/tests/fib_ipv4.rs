//! Property tests (`fib_common`'s) for both IPv4 FIBs, DIR-24-8 and Poptrie: every lookup as a
//! plain binary-trie LPM answers after any sequence of inserts and removes, and what a bulk
//! build holds (tbl8 groups: exactly one per /24 with longer prefixes; nodes and leaves).
//!
//! Prefixes are drawn around a few shared bases so that they overlap, repeat and nest; /0 and /32
//! are drawn on purpose.

use std::collections::HashSet;

use proptest::prelude::*;
use wirespeed_dataplane::table::fib::{Ipv4Fib, Ipv4Prefix, Ipv4Trie, NextHop};

#[macro_use]
mod fib_common;
use fib_common::{Fib, Reference, agrees_after_inserts_and_removes, bulk_build_agrees, ops};

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

fib!(
    Ipv4Fib,
    u32,
    Ipv4Fib::tbl8_groups_in_use,
    |reference| Some(long_slash24s(reference)),
    lookup_hop
);
fib!(
    Ipv4Trie,
    u32,
    |trie: &Ipv4Trie| trie.nodes_in_use() + trie.leaves_in_use(),
    |_| None,
    lookup_hop
);

/// The tbl8 groups a route set needs: one per /24 that holds a longer prefix.
fn long_slash24s(reference: &Reference<u32>) -> usize {
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
        (prefixes, ops) in ops(prefix(), 100),
        random in prop::collection::vec(any::<u32>(), 64),
    ) {
        agrees_after_inserts_and_removes::<_, Ipv4Fib>(&prefixes, &ops, &random)?;
    }

    #[test]
    fn bulk_build_with_duplicates_agrees_with_reference(
        routes in prop::collection::vec((prefix(), 0u32..1000), 0..200),
        random in prop::collection::vec(any::<u32>(), 64),
    ) {
        bulk_build_agrees::<_, Ipv4Fib>(&routes, &random)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn poptrie_agrees_with_reference_after_inserts_and_removes(
        (prefixes, ops) in ops(prefix(), 100),
        random in prop::collection::vec(any::<u32>(), 64),
    ) {
        agrees_after_inserts_and_removes::<_, Ipv4Trie>(&prefixes, &ops, &random)?;
    }

    #[test]
    fn poptrie_bulk_build_with_duplicates_agrees_with_reference(
        routes in prop::collection::vec((prefix(), 0u32..1000), 0..200),
        random in prop::collection::vec(any::<u32>(), 64),
    ) {
        bulk_build_agrees::<_, Ipv4Trie>(&routes, &random)?;
    }
}

#[test]
fn lookup_hop_answers_single_hops_only() {
    lookup_hop_single_hops_only::<Ipv4Fib>();
    lookup_hop_single_hops_only::<Ipv4Trie>();
}

fn lookup_hop_single_hops_only<F: Fib<u32>>() {
    let mut fib = F::empty();
    let group = NextHop::ecmp(3).unwrap();
    fib.add(
        Ipv4Prefix::new(0x0a00_0000, 8).unwrap(),
        NextHop::hop(7).unwrap(),
    );
    fib.add(Ipv4Prefix::new(0x0a01_0000, 16).unwrap(), group);
    fib.add(Ipv4Prefix::new(0x0a02_0080, 25).unwrap(), group);
    assert_eq!(fib.find_hop(0x0a00_0001).unwrap(), Some(7));
    assert_eq!(fib.find(0x0a01_0001), Some(group));
    assert_eq!(fib.find_hop(0x0a01_0001).unwrap(), None, "an ECMP group");
    assert_eq!(
        fib.find_hop(0x0a02_0081).unwrap(),
        None,
        "an ECMP group in a tbl8 group"
    );
    assert_eq!(
        fib.find_hop(0x0a02_0001).unwrap(),
        Some(7),
        "beside it in the tbl8 group"
    );
    assert_eq!(fib.find_hop(0x0b00_0001).unwrap(), None, "no route");
}
