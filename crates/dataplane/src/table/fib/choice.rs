//! The router's FIBs as configured (`[router] fib`): [`Fib4`] and [`Fib6`] hold either
//! structure behind the one interface the router uses, so the router's code is the same for
//! both and a route load builds whichever the configuration names.
//!
//! One key picks the structures ([`FibKind`]): `"dir24"` is DIR-24-8 for IPv4 and the 16-8-8
//! trie for IPv6 (the uncompressed tables: one or a few reads, tens to hundreds of MiB);
//! `"trie"` is Poptrie for both (a few MiB); `"auto"`, the default, is what measured fastest for
//! each family: DIR-24-8 for IPv4, Poptrie for IPv6. Each call matches on the variant: a branch
//! that always goes the same way, once per batch on the data plane's path.

use super::{FibError, Ipv4Fib, Ipv4Prefix, Ipv4Trie, Ipv6Fib, Ipv6Prefix, Ipv6Trie, NextHop};

/// Which lookup structures a router's FIBs use.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum FibKind {
    /// The fastest measured for each family (docs/benchmarks.md, issue 21; session
    /// twenty-three's alternating runs): DIR-24-8 for IPv4 (1.36-1.42x the cross-connect's cost
    /// at 1M routes in the router bench, Poptrie 1.44-1.49x), Poptrie for IPv6 (1.82-1.92x at 200k routes in 20 MiB, the 16-8-8 trie
    /// 2.3x in 176 MiB).
    #[default]
    Auto,
    /// DIR-24-8 (IPv4) and the 16-8-8 trie (IPv6).
    Dir24,
    /// Poptrie for both families: 12.7 and 20.5 MiB where the others take 80 (IPv4, 1M routes)
    /// and 176 MiB (IPv6, 200k routes).
    Trie,
}

/// Defines a FIB enum over the family's uncompressed table and its Poptrie, with the methods
/// both have, each a match that calls the variant's own.
macro_rules! fib_choice {
    ($(#[$doc:meta])* $name:ident, $addr:ty, $prefix:ty, $table:ident, $trie:ident,
     $auto:path, $usage:literal, $table_usage:expr) => {
        $(#[$doc])*
        // The variants differ by a few hundred bytes of control-path state (Poptrie's route
        // sets and id map); a router holds one table per family and moves it once, when a
        // build off the worker is swapped in, and a box would add a read to every lookup.
        #[allow(clippy::large_enum_variant)]
        pub enum $name {
            /// The uncompressed table ([`FibKind::Dir24`]).
            Table($table),
            /// Poptrie ([`FibKind::Trie`]).
            Trie($trie),
        }

        impl $name {
            /// The structure `kind` names for this family: [`FibKind::Dir24`] or
            /// [`FibKind::Trie`].
            pub fn resolve(kind: FibKind) -> FibKind {
                match kind {
                    FibKind::Auto => $auto,
                    kind => kind,
                }
            }

            /// An empty table of `kind`.
            pub fn new(kind: FibKind) -> Self {
                match Self::resolve(kind) {
                    FibKind::Trie => Self::Trie($trie::new()),
                    _ => Self::Table($table::new()),
                }
            }

            /// A table of `kind` built in one pass from `routes` (a later duplicate wins).
            pub fn from_routes(
                kind: FibKind,
                routes: impl IntoIterator<Item = ($prefix, NextHop)>,
            ) -> Result<Self, FibError> {
                Ok(match Self::resolve(kind) {
                    FibKind::Trie => Self::Trie($trie::from_routes(routes)?),
                    _ => Self::Table($table::from_routes(routes)?),
                })
            }

            /// Which structure this is.
            pub fn kind(&self) -> FibKind {
                match self {
                    Self::Table(_) => FibKind::Dir24,
                    Self::Trie(_) => FibKind::Trie,
                }
            }

            /// Adds or replaces a route; returns the next hop it replaced.
            pub fn insert(
                &mut self,
                prefix: $prefix,
                hop: NextHop,
            ) -> Result<Option<NextHop>, FibError> {
                match self {
                    Self::Table(fib) => fib.insert(prefix, hop),
                    Self::Trie(fib) => fib.insert(prefix, hop),
                }
            }

            /// Deletes the route for exactly `prefix`; returns its next hop.
            pub fn remove(&mut self, prefix: $prefix) -> Option<NextHop> {
                match self {
                    Self::Table(fib) => fib.remove(prefix),
                    Self::Trie(fib) => fib.remove(prefix),
                }
            }

            /// The next hop of exactly `prefix`.
            pub fn route(&self, prefix: $prefix) -> Option<NextHop> {
                match self {
                    Self::Table(fib) => fib.route(prefix),
                    Self::Trie(fib) => fib.route(prefix),
                }
            }

            /// Every route, shortest prefixes first.
            pub fn routes(&self) -> Box<dyn Iterator<Item = ($prefix, NextHop)> + '_> {
                match self {
                    Self::Table(fib) => Box::new(fib.routes()),
                    Self::Trie(fib) => Box::new(fib.routes()),
                }
            }

            /// Number of routes.
            pub fn len(&self) -> usize {
                match self {
                    Self::Table(fib) => fib.len(),
                    Self::Trie(fib) => fib.len(),
                }
            }

            /// Whether the table holds no route.
            pub fn is_empty(&self) -> bool {
                self.len() == 0
            }

            /// The next hop for destination `addr`.
            #[inline]
            pub fn lookup(&self, addr: $addr) -> Option<NextHop> {
                match self {
                    Self::Table(fib) => fib.lookup(addr),
                    Self::Trie(fib) => fib.lookup(addr),
                }
            }

            /// Looks up `addrs[i]` into `out[i]` for `i < min(addrs.len(), out.len())`.
            #[inline]
            pub fn lookup_batch(&self, addrs: &[$addr], out: &mut [Option<NextHop>]) {
                match self {
                    Self::Table(fib) => fib.lookup_batch(addrs, out),
                    Self::Trie(fib) => fib.lookup_batch(addrs, out),
                }
            }

            /// Bytes of the arrays lookups read.
            pub fn memory_bytes(&self) -> usize {
                match self {
                    Self::Table(fib) => fib.memory_bytes(),
                    Self::Trie(fib) => fib.memory_bytes(),
                }
            }

            /// Bytes of the route set kept for the control plane.
            pub fn rib_memory_bytes(&self) -> usize {
                match self {
                    Self::Table(fib) => fib.rib_memory_bytes(),
                    Self::Trie(fib) => fib.rib_memory_bytes(),
                }
            }

            /// What limits the table's size, for the metrics: its name, the units in use and
            /// the most there may be (tbl8 groups or trie nodes).
            pub fn usage(&self) -> (&'static str, usize, usize) {
                match self {
                    Self::Table(fib) => $table_usage(fib),
                    Self::Trie(fib) => (
                        concat!($usage, "_poptrie_nodes"),
                        fib.nodes_in_use(),
                        fib.node_limit() as usize,
                    ),
                }
            }
        }
    };
}

fib_choice!(
    /// The router's IPv4 FIB: DIR-24-8 or Poptrie.
    Fib4,
    u32,
    Ipv4Prefix,
    Ipv4Fib,
    Ipv4Trie,
    FibKind::Dir24,
    "routes_v4",
    |fib: &Ipv4Fib| (
        "routes_v4_tbl8_groups",
        fib.tbl8_groups_in_use(),
        fib.tbl8_limit() as usize
    )
);

fib_choice!(
    /// The router's IPv6 FIB: the 16-8-8 trie or Poptrie.
    Fib6,
    u128,
    Ipv6Prefix,
    Ipv6Fib,
    Ipv6Trie,
    FibKind::Trie,
    "routes_v6",
    |fib: &Ipv6Fib| ("routes_v6_nodes", fib.nodes_in_use(), fib.node_limit() as usize)
);

impl Fib4 {
    /// The hop id of the route for `addr` when it names one next hop (see
    /// [`Ipv4Fib::lookup_hop`]).
    #[inline]
    pub fn lookup_hop(&self, addr: u32) -> Option<u32> {
        match self {
            Self::Table(fib) => fib.lookup_hop(addr),
            Self::Trie(fib) => fib.lookup_hop(addr),
        }
    }

    /// Starts bringing the first entry a lookup of `addr` reads into the cache.
    #[inline]
    pub fn prefetch(&self, addr: u32) {
        match self {
            Self::Table(fib) => fib.prefetch(addr),
            Self::Trie(fib) => fib.prefetch(addr),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_is_dir24_for_ipv4_and_poptrie_for_ipv6() {
        assert_eq!(Fib4::new(FibKind::Auto).kind(), FibKind::Dir24);
        assert_eq!(Fib6::new(FibKind::Auto).kind(), FibKind::Trie);
        let routes = [(
            Ipv6Prefix::new(0x2001_0db8 << 96, 32).unwrap(),
            NextHop::hop(1).unwrap(),
        )];
        assert!(matches!(
            Fib6::from_routes(FibKind::Auto, routes).unwrap(),
            Fib6::Trie(_)
        ));
        assert_eq!(FibKind::default(), FibKind::Auto);
    }

    #[test]
    fn both_kinds_answer_alike_and_say_what_they_are() {
        let hop = NextHop::hop(3).unwrap();
        for kind in [FibKind::Dir24, FibKind::Trie] {
            let mut v4 = Fib4::new(kind);
            v4.insert(Ipv4Prefix::new(0x0a00_0000, 8).unwrap(), hop)
                .unwrap();
            assert_eq!(v4.kind(), kind);
            assert_eq!(v4.lookup(0x0a01_0203), Some(hop));
            assert_eq!(v4.lookup_hop(0x0a01_0203), Some(3));
            let mut out = [None; 2];
            v4.lookup_batch(&[0x0a00_0001, 0x0b00_0001], &mut out);
            assert_eq!(out, [Some(hop), None]);
            let v6 = Fib6::from_routes(
                kind,
                [(Ipv6Prefix::new(0x2001_0db8 << 96, 32).unwrap(), hop)],
            )
            .unwrap();
            assert_eq!(v6.lookup((0x2001_0db8 << 96) | 1), Some(hop));
            assert_eq!(v6.routes().count(), 1);
            assert!(v6.usage().0.starts_with("routes_v6_"));
        }
    }
}
