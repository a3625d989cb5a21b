//! The FIBs at BGP scale: a 1M-route IPv4 table in the realistic mix fits the memory budget
//! (lookup arrays at most 100 MiB) and, like a 200k-route IPv6 table, answers destinations spread
//! over all its routes exactly as the reference LPM (`prefix-trie`) does. Build and lookup speed
//! are measured by `benches/fib.rs`, not here.

use prefix_trie::PrefixMap;
use wirespeed_dataplane::table::fib::{Ipv4Fib, Ipv4Prefix, Ipv6Fib, Ipv6Prefix, NextHop};
use wirespeed_testkit::routes;

const MIB: usize = 1 << 20;

#[test]
fn a_million_ipv4_routes_fit_in_100_mib_and_match_the_reference() {
    let prefixes = routes::ipv4_prefixes(1_000_000, 1);
    let hop = |i: usize| NextHop::hop(i as u32 % 4096).unwrap();
    let fib = Ipv4Fib::from_routes(
        prefixes
            .iter()
            .enumerate()
            .map(|(i, &(a, l))| (Ipv4Prefix::new(a, l).unwrap(), hop(i))),
    )
    .unwrap();
    assert_eq!(fib.len(), 1_000_000);
    assert!(
        fib.memory_bytes() <= 100 * MIB,
        "{} MiB",
        fib.memory_bytes() / MIB
    );

    let mut reference = PrefixMap::<(u32, u8), usize>::new();
    for (i, &p) in prefixes.iter().enumerate() {
        reference.insert(p, i);
    }
    let destinations = routes::ipv4_destinations(&prefixes, 20_000, 2);
    let mut out = vec![None; destinations.len()];
    fib.lookup_batch(&destinations, &mut out);
    for (&addr, &found) in destinations.iter().zip(&out) {
        let expected = reference.get_lpm(&(addr, 32)).map(|(_, &i)| hop(i));
        assert_eq!(found, expected, "{addr:#010x}");
    }
}

#[test]
fn two_hundred_thousand_ipv6_routes_match_the_reference() {
    let prefixes = routes::ipv6_prefixes(200_000, 1);
    let hop = |i: usize| NextHop::hop(i as u32 % 4096).unwrap();
    let fib = Ipv6Fib::from_routes(
        prefixes
            .iter()
            .enumerate()
            .map(|(i, &(a, l))| (Ipv6Prefix::new(a, l).unwrap(), hop(i))),
    )
    .unwrap();
    assert_eq!(fib.len(), 200_000);

    let mut reference = PrefixMap::<(u128, u8), usize>::new();
    for (i, &p) in prefixes.iter().enumerate() {
        reference.insert(p, i);
    }
    let destinations = routes::ipv6_destinations(&prefixes, 20_000, 2);
    let mut out = vec![None; destinations.len()];
    fib.lookup_batch(&destinations, &mut out);
    for (&addr, &found) in destinations.iter().zip(&out) {
        let expected = reference.get_lpm(&(addr, 128)).map(|(_, &i)| hop(i));
        assert_eq!(found, expected, "{addr:#x}");
    }
}
