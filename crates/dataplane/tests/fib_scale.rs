//! The FIBs at BGP scale: a 1M-route IPv4 table in the realistic mix fits the memory budget
//! (lookup arrays at most 100 MiB for DIR-24-8, 16 MiB for Poptrie) and, like a 200k-route IPv6
//! table (at most 32 MiB for Poptrie), answers destinations spread over all its routes exactly as
//! the reference LPM (`prefix-trie`) does. Build and lookup speed are measured by
//! `benches/fib.rs`, not here.

use prefix_trie::PrefixMap;
use wirespeed_dataplane::table::fib::{
    Ipv4Fib, Ipv4Prefix, Ipv4Trie, Ipv6Fib, Ipv6Prefix, Ipv6Trie, NextHop,
};
use wirespeed_testkit::routes;

const MIB: usize = 1 << 20;

fn hop(i: usize) -> NextHop {
    NextHop::hop(i as u32 % 4096).unwrap()
}

/// A table, destinations spread over all its routes, and what the reference finds for them.
struct Scale<P, A> {
    table: Vec<(P, NextHop)>,
    destinations: Vec<A>,
    expected: Vec<Option<NextHop>>,
}

/// The 1M-route IPv4 table.
fn ipv4_table() -> Scale<Ipv4Prefix, u32> {
    let prefixes = routes::ipv4_prefixes(1_000_000, 1);
    let mut reference = PrefixMap::<(u32, u8), usize>::new();
    for (i, &p) in prefixes.iter().enumerate() {
        reference.insert(p, i);
    }
    let destinations = routes::ipv4_destinations(&prefixes, 20_000, 2);
    let expected = destinations
        .iter()
        .map(|&addr| reference.get_lpm(&(addr, 32)).map(|(_, &i)| hop(i)))
        .collect();
    let table = prefixes
        .iter()
        .enumerate()
        .map(|(i, &(a, l))| (Ipv4Prefix::new(a, l).unwrap(), hop(i)))
        .collect();
    Scale {
        table,
        destinations,
        expected,
    }
}

/// The 200k-route IPv6 table.
fn ipv6_table() -> Scale<Ipv6Prefix, u128> {
    let prefixes = routes::ipv6_prefixes(200_000, 1);
    let mut reference = PrefixMap::<(u128, u8), usize>::new();
    for (i, &p) in prefixes.iter().enumerate() {
        reference.insert(p, i);
    }
    let destinations = routes::ipv6_destinations(&prefixes, 20_000, 2);
    let expected = destinations
        .iter()
        .map(|&addr| reference.get_lpm(&(addr, 128)).map(|(_, &i)| hop(i)))
        .collect();
    let table = prefixes
        .iter()
        .enumerate()
        .map(|(i, &(a, l))| (Ipv6Prefix::new(a, l).unwrap(), hop(i)))
        .collect();
    Scale {
        table,
        destinations,
        expected,
    }
}

/// Asserts that the table's batched lookups of `destinations` give `expected`, and that its
/// lookup arrays take at most `budget` MiB.
fn check<A: Copy + std::fmt::Debug>(
    lookup_batch: impl Fn(&[A], &mut [Option<NextHop>]),
    memory_bytes: usize,
    budget: usize,
    destinations: &[A],
    expected: &[Option<NextHop>],
) {
    assert!(memory_bytes <= budget * MIB, "{} MiB", memory_bytes / MIB);
    let mut out = vec![None; destinations.len()];
    lookup_batch(destinations, &mut out);
    for ((addr, found), expected) in destinations.iter().zip(&out).zip(expected) {
        assert_eq!(found, expected, "{addr:x?}");
    }
}

#[test]
fn a_million_ipv4_routes_fit_in_100_mib_and_match_the_reference() {
    let Scale {
        table,
        destinations,
        expected,
    } = ipv4_table();
    let fib = Ipv4Fib::from_routes(table).unwrap();
    assert_eq!(fib.len(), 1_000_000);
    let batch = |a: &[u32], o: &mut [Option<NextHop>]| fib.lookup_batch(a, o);
    check(batch, fib.memory_bytes(), 100, &destinations, &expected);
}

#[test]
fn a_million_ipv4_routes_in_poptrie_fit_in_16_mib_and_match_the_reference() {
    let Scale {
        table,
        destinations,
        expected,
    } = ipv4_table();
    let fib = Ipv4Trie::from_routes(table).unwrap();
    assert_eq!(fib.len(), 1_000_000);
    let batch = |a: &[u32], o: &mut [Option<NextHop>]| fib.lookup_batch(a, o);
    check(batch, fib.memory_bytes(), 16, &destinations, &expected);
    for (&addr, &expected) in destinations.iter().zip(&expected).take(2000) {
        assert_eq!(fib.lookup(addr), expected, "{addr:#010x}");
    }
}

#[test]
fn two_hundred_thousand_ipv6_routes_match_the_reference() {
    let Scale {
        table,
        destinations,
        expected,
    } = ipv6_table();
    let fib = Ipv6Fib::from_routes(table).unwrap();
    assert_eq!(fib.len(), 200_000);
    let batch = |a: &[u128], o: &mut [Option<NextHop>]| fib.lookup_batch(a, o);
    check(
        batch,
        fib.memory_bytes(),
        usize::MAX / MIB,
        &destinations,
        &expected,
    );
}

#[test]
fn two_hundred_thousand_ipv6_routes_in_poptrie_fit_in_32_mib_and_match_the_reference() {
    let Scale {
        table,
        destinations,
        expected,
    } = ipv6_table();
    let fib = Ipv6Trie::from_routes(table).unwrap();
    assert_eq!(fib.len(), 200_000);
    let batch = |a: &[u128], o: &mut [Option<NextHop>]| fib.lookup_batch(a, o);
    check(batch, fib.memory_bytes(), 32, &destinations, &expected);
    for (&addr, &expected) in destinations.iter().zip(&expected).take(2000) {
        assert_eq!(fib.lookup(addr), expected, "{addr:#x}");
    }
}
