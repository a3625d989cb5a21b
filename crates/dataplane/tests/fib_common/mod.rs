//! What the FIB property tests of both families share (`fib_ipv4.rs`, `fib_ipv6.rs`): the
//! properties themselves, generic over the address family ([`Family`]) and the table ([`Fib`]),
//! checked against a plain binary-trie LPM (`prefix-trie`).
//!
//! After any sequence of inserts and removes every lookup (single, batched, and `lookup_hop`
//! where the table has it) answers as the reference does; a bulk build from the final route
//! set gives the same answers, the same routes and holds the same memory (updates leak
//! nothing); where the memory a route set needs is known, the table holds exactly that. Probes
//! are random addresses plus the edges of every prefix (first, last, one beyond each, and one
//! inside), where an off-by-one in range expansion would show.

use std::fmt::{Debug, LowerHex};

use prefix_trie::PrefixMap;
use proptest::prelude::*;
use wirespeed_dataplane::table::fib::{Ipv4Prefix, Ipv6Prefix, NextHop};

/// The reference: prefixes (network address, length) to hop ids.
pub type Reference<A> = PrefixMap<(A, u8), u32>;

/// An address family as the properties need it.
pub trait Family: Copy + Ord + Debug + LowerHex + 'static {
    /// The family's prefix type.
    type Prefix: Copy + Ord + Debug;
    /// Address bits.
    const BITS: u8;
    /// The lowest, second lowest, highest and second highest addresses.
    const ENDS: [Self; 4];
    /// A bit well inside any prefix of a generated table (a probe inside, not at an edge).
    const INSIDE: Self;
    fn mask(len: u8) -> Self;
    fn or(self, other: Self) -> Self;
    fn not(self) -> Self;
    fn and(self, other: Self) -> Self;
    fn step(self, up: bool) -> Self;
    fn prefix(addr: Self, len: u8) -> Self::Prefix;
    fn addr_of(prefix: Self::Prefix) -> Self;
}

macro_rules! family {
    ($addr:ty, $prefix:ty, $inside:expr) => {
        impl Family for $addr {
            type Prefix = $prefix;
            const BITS: u8 = <$addr>::BITS as u8;
            const ENDS: [Self; 4] = [0, 1, <$addr>::MAX, <$addr>::MAX - 1];
            const INSIDE: Self = $inside;
            fn mask(len: u8) -> Self {
                <$addr>::MAX
                    .checked_shl(u32::from(<Self as Family>::BITS - len))
                    .unwrap_or(0)
            }
            fn or(self, other: Self) -> Self {
                self | other
            }
            fn not(self) -> Self {
                !self
            }
            fn and(self, other: Self) -> Self {
                self & other
            }
            fn step(self, up: bool) -> Self {
                if up {
                    self.wrapping_add(1)
                } else {
                    self.wrapping_sub(1)
                }
            }
            fn prefix(addr: Self, len: u8) -> $prefix {
                <$prefix>::new(addr, len).unwrap()
            }
            fn addr_of(prefix: $prefix) -> Self {
                prefix.addr()
            }
        }
    };
}

family!(u32, Ipv4Prefix, 0x80);
family!(u128, Ipv6Prefix, 1 << 70);

/// What the properties ask of a FIB of family `A`.
pub trait Fib<A: Family>: Sized {
    fn empty() -> Self;
    fn build(routes: impl IntoIterator<Item = (A::Prefix, NextHop)>) -> Self;
    fn add(&mut self, prefix: A::Prefix, hop: NextHop) -> Option<NextHop>;
    fn delete(&mut self, prefix: A::Prefix) -> Option<NextHop>;
    fn find(&self, addr: A) -> Option<NextHop>;
    /// `lookup_hop`, `None` for a table that has none.
    fn find_hop(&self, addr: A) -> Option<Option<u32>>;
    fn find_batch(&self, addrs: &[A], out: &mut [Option<NextHop>]);
    fn all_routes(&self) -> Vec<(A::Prefix, NextHop)>;
    fn count(&self) -> usize;
    /// The blocks of memory the table holds for its routes.
    fn usage(&self) -> usize;
    /// What [`Fib::usage`] must be for the route set of `reference`, where that is known.
    fn usage_needed(reference: &Reference<A>) -> Option<usize>;
}

/// Implements [`Fib`] for `$table` of family `$addr`: `$usage` is what it holds, `$needed`
/// what it must hold; `lookup_hop` where it has one.
macro_rules! fib {
    ($table:ty, $addr:ty, $usage:expr, $needed:expr $(, $hop:ident)?) => {
        impl $crate::fib_common::Fib<$addr> for $table {
            fn empty() -> Self {
                <$table>::new()
            }
            fn build(routes: impl IntoIterator<Item = (<$addr as $crate::fib_common::Family>::Prefix, NextHop)>) -> Self {
                <$table>::from_routes(routes).unwrap()
            }
            fn add(&mut self, prefix: <$addr as $crate::fib_common::Family>::Prefix, hop: NextHop) -> Option<NextHop> {
                self.insert(prefix, hop).unwrap()
            }
            fn delete(&mut self, prefix: <$addr as $crate::fib_common::Family>::Prefix) -> Option<NextHop> {
                self.remove(prefix)
            }
            fn find(&self, addr: $addr) -> Option<NextHop> {
                self.lookup(addr)
            }
            #[allow(unused_variables)]
            fn find_hop(&self, addr: $addr) -> Option<Option<u32>> {
                None $(.or(Some(self.$hop(addr))))?
            }
            fn find_batch(&self, addrs: &[$addr], out: &mut [Option<NextHop>]) {
                self.lookup_batch(addrs, out)
            }
            fn all_routes(&self) -> Vec<(<$addr as $crate::fib_common::Family>::Prefix, NextHop)> {
                self.routes().collect()
            }
            fn count(&self) -> usize {
                self.len()
            }
            fn usage(&self) -> usize {
                $usage(self)
            }
            fn usage_needed(reference: &$crate::fib_common::Reference<$addr>) -> Option<usize> {
                $needed(reference)
            }
        }
    };
}

#[derive(Debug, Clone)]
pub enum Op {
    Insert(usize, u32),
    Remove(usize),
}

/// Up to 47 prefixes drawn by `prefix` and up to `most` operations on them.
pub fn ops<A: Family>(
    prefix: impl Strategy<Value = (A, u8)>,
    most: usize,
) -> impl Strategy<Value = (Vec<(A, u8)>, Vec<Op>)> {
    let prefixes = prop::collection::vec(prefix, 1..48);
    let op = prop_oneof![
        3 => (any::<usize>(), 0u32..1000).prop_map(|(i, h)| Op::Insert(i, h)),
        1 => any::<usize>().prop_map(Op::Remove),
    ];
    (prefixes, prop::collection::vec(op, 1..most))
}

pub fn route<A: Family>(addr: A, len: u8, hop: u32) -> (A::Prefix, NextHop) {
    (A::prefix(addr, len), NextHop::hop(hop).unwrap())
}

fn probes<A: Family>(prefixes: &[(A, u8)], random: &[A]) -> Vec<A> {
    let mut out = random.to_vec();
    out.extend(A::ENDS);
    for &(addr, len) in prefixes {
        let first = addr.and(A::mask(len));
        let last = first.or(A::mask(len).not());
        out.extend([
            first,
            last,
            first.step(false),
            last.step(true),
            first.or(A::INSIDE),
        ]);
    }
    out
}

fn check<A: Family, F: Fib<A>>(
    fib: &F,
    reference: &Reference<A>,
    probes: &[A],
) -> Result<(), TestCaseError>
where
    (A, u8): prefix_trie::Prefix,
{
    let mut batch = vec![None; probes.len()];
    fib.find_batch(probes, &mut batch);
    for (&addr, &batched) in probes.iter().zip(&batch) {
        let expected = reference
            .get_lpm(&(addr, A::BITS))
            .and_then(|(_, &h)| NextHop::hop(h));
        prop_assert_eq!(fib.find(addr), expected, "lookup {:#x}", addr);
        prop_assert_eq!(batched, expected, "lookup_batch {:#x}", addr);
        if let Some(hop) = fib.find_hop(addr) {
            prop_assert_eq!(hop, expected.map(NextHop::id), "lookup_hop {:#x}", addr);
        }
    }
    Ok(())
}

pub fn agrees_after_inserts_and_removes<A: Family, F: Fib<A>>(
    prefixes: &[(A, u8)],
    ops: &[Op],
    random: &[A],
) -> Result<(), TestCaseError>
where
    (A, u8): prefix_trie::Prefix,
{
    let mut fib = F::empty();
    let mut reference: Reference<A> = PrefixMap::new();
    for op in ops {
        match *op {
            Op::Insert(i, h) => {
                let (addr, len) = prefixes[i % prefixes.len()];
                let (p, hop) = route(addr, len, h);
                let previous = fib.add(p, hop);
                let expected = reference.insert((A::addr_of(p), len), h);
                prop_assert_eq!(previous.map(NextHop::id), expected);
            }
            Op::Remove(i) => {
                let (addr, len) = prefixes[i % prefixes.len()];
                let p = A::prefix(addr, len);
                let removed = fib.delete(p).map(NextHop::id);
                prop_assert_eq!(removed, reference.remove(&(A::addr_of(p), len)));
            }
        }
    }
    let probes = probes(prefixes, random);
    check(&fib, &reference, &probes)?;
    prop_assert_eq!(fib.count(), reference.len());
    if let Some(needed) = F::usage_needed(&reference) {
        prop_assert_eq!(fib.usage(), needed, "memory freed with its last prefix");
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

pub fn bulk_build_agrees<A: Family, F: Fib<A>>(
    routes: &[((A, u8), u32)],
    random: &[A],
) -> Result<(), TestCaseError>
where
    (A, u8): prefix_trie::Prefix,
{
    let mut reference: Reference<A> = PrefixMap::new();
    for &((addr, len), h) in routes {
        reference.insert((addr.and(A::mask(len)), len), h); // later duplicates win
    }
    let fib = F::build(routes.iter().map(|&((a, l), h)| route(a, l, h)));
    let prefixes: Vec<(A, u8)> = routes.iter().map(|r| r.0).collect();
    check(&fib, &reference, &probes(&prefixes, random))?;
    prop_assert_eq!(fib.count(), reference.len());
    Ok(())
}
