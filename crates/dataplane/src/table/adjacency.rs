//! Adjacencies: per next hop of the FIB, the rewrite its packets need, built once and applied
//! to every packet (VPP's ip4-lookup -> ip4-rewrite, DPDK l3fwd's next-hop table).
//!
//! The FIB's [`crate::table::fib::NextHop`] ids index the route stage's hop table; this table is
//! indexed the same way. For a gateway hop whose neighbour is resolved it holds the Ethernet
//! addresses to write (the neighbour's MAC, the egress port's) and the port, so the neighbour
//! stage rewrites a packet without probing the neighbour table.
//!
//! The neighbour table stays the source of truth. An adjacency is stamped with the
//! [`NeighbourTable::generation`](crate::table::neighbour::NeighbourTable::generation) it was
//! read under and is used only while the generation is unchanged; any change of a resolved
//! neighbour (learned, changed MAC, made static, removed, aged out) advances it, and each
//! adjacency is rebuilt from the table by the next packet that needs it (one probe, as before
//! adjacencies existed). No list of dependents to maintain, and the cost of a change is bounded
//! by the hops in use, paid on the packets, never as a stall on the control path. Hops that are
//! not gateways (a connected subnet: the neighbour is each packet's own destination; the router
//! itself) never get an adjacency and always take the neighbour table's path.
//!
//! Entries are added as the hop table grows and all reset when it is replaced, on the control
//! path; the data path only reads and refreshes them, and never allocates.

use wirespeed_packet::wire::EthernetAddress;

/// A resolved next hop's rewrite.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Adjacency {
    /// The neighbour's MAC: the packet's new destination.
    pub dst: EthernetAddress,
    /// The egress port's MAC: the packet's new source.
    pub src: EthernetAddress,
    /// The egress port.
    pub port: u16,
    /// The neighbour-table generation the rewrite was read under; 0 (stale) is one the
    /// neighbour table never has.
    generation: u64,
}

impl Adjacency {
    const STALE: Adjacency = Adjacency {
        dst: EthernetAddress([0; 6]),
        src: EthernetAddress([0; 6]),
        port: 0,
        generation: 0,
    };
}

/// Hop id -> adjacency. See the module documentation.
#[derive(Debug, Default)]
pub struct Adjacencies {
    entries: Vec<Adjacency>,
}

impl Adjacencies {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }

    /// Makes room for hop ids `0..hops`, new ones stale. Control path.
    pub fn grow(&mut self, hops: usize) {
        if hops > self.entries.len() {
            self.entries.resize(hops, Adjacency::STALE);
        }
    }

    /// Forgets every rewrite and sizes the table for `hops` hop ids: the hop table was replaced
    /// and an id may now name another hop. Control path.
    pub fn reset(&mut self, hops: usize) {
        self.entries.clear();
        self.entries.resize(hops, Adjacency::STALE);
    }

    /// The rewrite of hop `hop`, if it was read under the neighbour table's current
    /// `generation`.
    #[inline(always)]
    pub fn current(&self, hop: u32, generation: u64) -> Option<&Adjacency> {
        self.entries
            .get(hop as usize)
            .filter(|entry| entry.generation == generation)
    }

    /// Records what the neighbour table answered under `generation` for hop `hop`: its packets
    /// go out of `port` from `src` to `dst`. Ignored for an id beyond the hop table.
    pub fn refresh(
        &mut self,
        hop: u32,
        generation: u64,
        dst: EthernetAddress,
        src: EthernetAddress,
        port: u16,
    ) {
        if let Some(entry) = self.entries.get_mut(hop as usize) {
            *entry = Adjacency {
                dst,
                src,
                port,
                generation,
            };
        }
    }

    /// Hop ids the table has room for.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the table has room for no hop.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DST: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 0xc1]);
    const SRC: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 0xa1]);

    #[test]
    fn an_adjacency_holds_only_under_its_generation() {
        let mut table = Adjacencies::new();
        table.grow(4);
        assert_eq!(table.current(2, 1), None, "new entries are stale");
        table.refresh(2, 7, DST, SRC, 1);
        let adjacency = table.current(2, 7).copied().unwrap();
        assert_eq!(
            (adjacency.dst, adjacency.src, adjacency.port),
            (DST, SRC, 1)
        );
        assert_eq!(table.current(2, 8), None, "the neighbour table changed");
        assert_eq!(table.current(3, 7), None, "other hops untouched");
        table.refresh(9, 7, DST, SRC, 1);
        assert_eq!(table.current(9, 7), None, "beyond the hop table: ignored");
        table.grow(2);
        assert_eq!(table.len(), 4, "never shrinks by growing");
        table.reset(3);
        assert_eq!(table.current(2, 7), None, "reset forgets");
        assert_eq!(table.len(), 3);
    }
}
