//! Property tests (`fib_common`'s) for both IPv6 FIBs, the 16-8-8 trie and Poptrie: every
//! lookup as a plain binary-trie LPM answers after any sequence of inserts and removes, and what
//! a bulk build holds (the 16-8-8 trie: exactly the nodes the remaining routes need, so removes
//! free them; Poptrie's nodes and leaves).
//!
//! Prefixes are drawn around a few shared bases so that they overlap, repeat and nest; /0 and /128
//! are drawn on purpose.

use std::collections::HashSet;

use proptest::prelude::*;
use wirespeed_dataplane::table::fib::{Ipv6Fib, Ipv6Trie, NextHop};

#[macro_use]
mod fib_common;
use fib_common::{Reference, agrees_after_inserts_and_removes, bulk_build_agrees, ops};

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

fib!(Ipv6Fib, u128, Ipv6Fib::nodes_in_use, |reference| Some(
    nodes_needed(reference)
));
fib!(
    Ipv6Trie,
    u128,
    |trie: &Ipv6Trie| trie.nodes_in_use() + trie.leaves_in_use(),
    |_| None,
    lookup_hop
);

/// The nodes a route set needs: one per (start bit, address above it) for each route that ends
/// below that start bit.
fn nodes_needed(reference: &Reference<u128>) -> usize {
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
        (prefixes, ops) in ops(prefix(), 160),
        random in prop::collection::vec(any::<u128>(), 64),
    ) {
        agrees_after_inserts_and_removes::<_, Ipv6Fib>(&prefixes, &ops, &random)?;
    }

    #[test]
    fn bulk_build_with_duplicates_agrees_with_reference(
        routes in prop::collection::vec((prefix(), 0u32..1000), 0..200),
        random in prop::collection::vec(any::<u128>(), 64),
    ) {
        bulk_build_agrees::<_, Ipv6Fib>(&routes, &random)?;
    }

    #[test]
    fn poptrie_agrees_with_reference_after_inserts_and_removes(
        (prefixes, ops) in ops(prefix(), 160),
        random in prop::collection::vec(any::<u128>(), 64),
    ) {
        agrees_after_inserts_and_removes::<_, Ipv6Trie>(&prefixes, &ops, &random)?;
    }

    #[test]
    fn poptrie_bulk_build_with_duplicates_agrees_with_reference(
        routes in prop::collection::vec((prefix(), 0u32..1000), 0..200),
        random in prop::collection::vec(any::<u128>(), 64),
    ) {
        bulk_build_agrees::<_, Ipv6Trie>(&routes, &random)?;
    }
}
