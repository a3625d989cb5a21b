//! Property tests: both IPv4 FIBs, DIR-24-8 and Poptrie, answer every lookup exactly as a plain
//! binary-trie LPM (`prefix-trie`) over the same routes, after any sequence of inserts and
//! removes, and a bulk build from the final route set gives the same answers and holds the same
//! memory (tbl8 groups; nodes and leaves: updates leak nothing).
//!
//! Prefixes are drawn around a few shared bases so that they overlap, repeat and nest; /0 and /32
//! are drawn on purpose. Probes are random addresses plus the edges of every prefix (first, last,
//! and one beyond each), where an off-by-one in range expansion would show.

use std::collections::HashSet;

use prefix_trie::PrefixMap;
use proptest::prelude::*;
use wirespeed_dataplane::table::fib::{Ipv4Fib, Ipv4Prefix, Ipv4Trie, NextHop};

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

/// What the properties ask of an IPv4 FIB.
trait Fib: Sized {
    fn empty() -> Self;
    fn build(routes: impl IntoIterator<Item = (Ipv4Prefix, NextHop)>) -> Self;
    fn add(&mut self, prefix: Ipv4Prefix, hop: NextHop) -> Option<NextHop>;
    fn delete(&mut self, prefix: Ipv4Prefix) -> Option<NextHop>;
    fn find(&self, addr: u32) -> Option<NextHop>;
    fn find_hop(&self, addr: u32) -> Option<u32>;
    fn find_batch(&self, addrs: &[u32], out: &mut [Option<NextHop>]);
    fn all_routes(&self) -> Vec<(Ipv4Prefix, NextHop)>;
    fn count(&self) -> usize;
    /// The blocks of memory the table holds for its routes.
    fn usage(&self) -> usize;
    /// What [`Fib::usage`] must be for the route set of `reference`, where that is known.
    fn usage_needed(reference: &PrefixMap<(u32, u8), u32>) -> Option<usize>;
}

macro_rules! fib {
    ($table:ty, $usage:expr, $needed:expr) => {
        impl Fib for $table {
            fn empty() -> Self {
                <$table>::new()
            }
            fn build(routes: impl IntoIterator<Item = (Ipv4Prefix, NextHop)>) -> Self {
                <$table>::from_routes(routes).unwrap()
            }
            fn add(&mut self, prefix: Ipv4Prefix, hop: NextHop) -> Option<NextHop> {
                self.insert(prefix, hop).unwrap()
            }
            fn delete(&mut self, prefix: Ipv4Prefix) -> Option<NextHop> {
                self.remove(prefix)
            }
            fn find(&self, addr: u32) -> Option<NextHop> {
                self.lookup(addr)
            }
            fn find_hop(&self, addr: u32) -> Option<u32> {
                self.lookup_hop(addr)
            }
            fn find_batch(&self, addrs: &[u32], out: &mut [Option<NextHop>]) {
                self.lookup_batch(addrs, out)
            }
            fn all_routes(&self) -> Vec<(Ipv4Prefix, NextHop)> {
                self.routes().collect()
            }
            fn count(&self) -> usize {
                self.len()
            }
            fn usage(&self) -> usize {
                $usage(self)
            }
            fn usage_needed(reference: &PrefixMap<(u32, u8), u32>) -> Option<usize> {
                $needed(reference)
            }
        }
    };
}

fib!(Ipv4Fib, Ipv4Fib::tbl8_groups_in_use, |reference| Some(
    long_slash24s(reference)
));
fib!(
    Ipv4Trie,
    |trie: &Ipv4Trie| trie.nodes_in_use() + trie.leaves_in_use(),
    |_| None
);

fn check<F: Fib>(
    fib: &F,
    reference: &PrefixMap<(u32, u8), u32>,
    probes: &[u32],
) -> Result<(), TestCaseError> {
    let mut batch = vec![None; probes.len()];
    fib.find_batch(probes, &mut batch);
    for (&addr, &batched) in probes.iter().zip(&batch) {
        let expected = reference_lookup(reference, addr);
        prop_assert_eq!(fib.find(addr), expected, "lookup {:#010x}", addr);
        prop_assert_eq!(batched, expected, "lookup_batch {:#010x}", addr);
        prop_assert_eq!(
            fib.find_hop(addr),
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

fn agrees_after_inserts_and_removes<F: Fib>(
    prefixes: &[(u32, u8)],
    ops: &[Op],
    random: &[u32],
) -> Result<(), TestCaseError> {
    let mut fib = F::empty();
    let mut reference: PrefixMap<(u32, u8), u32> = PrefixMap::new();
    for op in ops {
        match *op {
            Op::Insert(i, h) => {
                let (addr, len) = prefixes[i % prefixes.len()];
                let p = Ipv4Prefix::new(addr, len).unwrap();
                let previous = fib.add(p, NextHop::hop(h).unwrap());
                let expected = reference.insert((p.addr(), len), h);
                prop_assert_eq!(previous.map(NextHop::id), expected);
            }
            Op::Remove(i) => {
                let (addr, len) = prefixes[i % prefixes.len()];
                let p = Ipv4Prefix::new(addr, len).unwrap();
                let removed = fib.delete(p).map(NextHop::id);
                prop_assert_eq!(removed, reference.remove(&(p.addr(), len)));
            }
        }
    }
    let probes = probes(prefixes, random);
    check(&fib, &reference, &probes)?;
    prop_assert_eq!(fib.count(), reference.len());
    if let Some(needed) = F::usage_needed(&reference) {
        prop_assert_eq!(
            fib.usage(),
            needed,
            "groups freed with their last long prefix"
        );
    }

    let built = F::build(reference.iter().map(|((a, l), &h)| route(a, l, h)));
    check(&built, &reference, &probes)?;
    prop_assert_eq!(
        built.usage(),
        fib.usage(),
        "updates hold what a build holds"
    );
    let mut routes = fib.all_routes();
    let mut built_routes = built.all_routes();
    routes.sort_by_key(|r| r.0);
    built_routes.sort_by_key(|r| r.0);
    prop_assert_eq!(routes, built_routes);
    Ok(())
}

fn bulk_build_agrees<F: Fib>(
    routes: &[((u32, u8), u32)],
    random: &[u32],
) -> Result<(), TestCaseError> {
    let mut reference: PrefixMap<(u32, u8), u32> = PrefixMap::new();
    for &((addr, len), h) in routes {
        reference.insert((addr & mask(len), len), h); // later duplicates win
    }
    let fib = F::build(routes.iter().map(|&((a, l), h)| route(a, l, h)));
    let prefixes: Vec<(u32, u8)> = routes.iter().map(|r| r.0).collect();
    check(&fib, &reference, &probes(&prefixes, random))?;
    prop_assert_eq!(fib.count(), reference.len());
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    #[test]
    fn agrees_with_reference_after_inserts_and_removes(
        (prefixes, ops) in ops(),
        random in prop::collection::vec(any::<u32>(), 64),
    ) {
        agrees_after_inserts_and_removes::<Ipv4Fib>(&prefixes, &ops, &random)?;
    }

    #[test]
    fn bulk_build_with_duplicates_agrees_with_reference(
        routes in prop::collection::vec((prefix(), 0u32..1000), 0..200),
        random in prop::collection::vec(any::<u32>(), 64),
    ) {
        bulk_build_agrees::<Ipv4Fib>(&routes, &random)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn poptrie_agrees_with_reference_after_inserts_and_removes(
        (prefixes, ops) in ops(),
        random in prop::collection::vec(any::<u32>(), 64),
    ) {
        agrees_after_inserts_and_removes::<Ipv4Trie>(&prefixes, &ops, &random)?;
    }

    #[test]
    fn poptrie_bulk_build_with_duplicates_agrees_with_reference(
        routes in prop::collection::vec((prefix(), 0u32..1000), 0..200),
        random in prop::collection::vec(any::<u32>(), 64),
    ) {
        bulk_build_agrees::<Ipv4Trie>(&routes, &random)?;
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
    lookup_hop_single_hops_only::<Ipv4Fib>();
    lookup_hop_single_hops_only::<Ipv4Trie>();
}

fn lookup_hop_single_hops_only<F: Fib>() {
    let mut fib = F::empty();
    let group = NextHop::ecmp(3).unwrap();
    fib.add(
        Ipv4Prefix::new(0x0a00_0000, 8).unwrap(),
        NextHop::hop(7).unwrap(),
    );
    fib.add(Ipv4Prefix::new(0x0a01_0000, 16).unwrap(), group);
    fib.add(Ipv4Prefix::new(0x0a02_0080, 25).unwrap(), group);
    assert_eq!(fib.find_hop(0x0a00_0001), Some(7));
    assert_eq!(fib.find(0x0a01_0001), Some(group));
    assert_eq!(fib.find_hop(0x0a01_0001), None, "an ECMP group");
    assert_eq!(
        fib.find_hop(0x0a02_0081),
        None,
        "an ECMP group in a tbl8 group"
    );
    assert_eq!(
        fib.find_hop(0x0a02_0001),
        Some(7),
        "beside it in the tbl8 group"
    );
    assert_eq!(fib.find_hop(0x0b00_0001), None, "no route");
}
