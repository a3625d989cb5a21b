//! IPv6 FIB: a leaf-pushed multibit trie with a 16-bit first stride and 8-bit strides after it
//! (16-8-8-...-8, fifteen levels at most; DPDK's rte_lpm6 has the same shape with a 24-bit root).
//!
//! The first 16 bits of the destination index the root (65 536 entries); an entry is a next hop,
//! empty, or the number of a 256-entry child node that the next byte indexes. A lookup reads one
//! entry per level until it finds no child: a /48 route is found in five reads, a /32 in three.
//! Prefixes are leaf-pushed (a /44 is copied into the 16 slots it covers), so a lookup never
//! backtracks and never compares prefixes.
//!
//! Entry (u32): bit 31 valid next hop (bits 0..24 the [`NextHop`]), or bit 30 child (bits 0..30
//! the node number), or zero. The length of the prefix that wrote each entry is kept in a
//! separate byte array that only insert and remove read, so the arrays lookups walk stay at four
//! bytes per entry. A node exists exactly while some prefix longer than its parent's stride ends
//! below it; remove frees it when the last one goes (its entries are then all the same inherited
//! route and collapse into the parent entry). The route set ([`Rib`]) answers what a removed
//! prefix was hiding.
//!
//! Why this and not Poptrie: both lookups are a handful of dependent reads; this one is a plain
//! array walk whose insert and remove touch only the nodes under the prefix, where Poptrie's
//! compressed nodes (bitmaps plus popcount) must be rebuilt around every change. It pays in
//! memory, 1 KiB per node. Measured on the 2-vCPU VM (`cargo bench -p wirespeed-dataplane --bench
//! fib -- --warm-up-time 1 --measurement-time 3`) with `wirespeed_testkit::routes::ipv6_prefixes`
//! (BGP-like length mix, assignments inside allocations): 200 000 routes take 180 261 nodes,
//! 176 MiB of entries (plus 74 MiB route set and lengths), built in 0.2–0.5 s; batched lookups
//! of destinations spread over all routes run at ~11 M/s (8 M/s while the nodes were in 4 KiB
//! pages: the entries are now reserved up front and stay in huge pages), 10 000 routes at ~24
//! M/s. Most nodes hold one /48 each: that memory, and the DRAM misses it causes, is what a
//! compressed node wins back, at the price of rebuilding nodes on update: [`super::Ipv6Trie`]
//! (Poptrie) holds the same 200k routes in 20.5 MiB.

use super::prefix::Ipv6Prefix;
use super::rib::Rib;
use super::{FibError, LOOKUP_STEP, NextHop, reserve_blocks};
use wirespeed_packet::memory::ReservedTable;

const ROOT_LEN: usize = 1 << 16;
const NODE_LEN: usize = 256;
const CHILD: u32 = 1 << 30;
const CHILD_INDEX: u32 = CHILD - 1;
/// Levels below the root: 16 + 14 * 8 = 128 bits.
const NODE_LEVELS: usize = 14;

/// Where node `node`'s entries start in the entry array (the root takes the first 65 536).
const fn node_base(node: u32) -> usize {
    ROOT_LEN + node as usize * NODE_LEN
}

/// A node on the way down to a prefix: the parent slot that points at it, its number, and the
/// number of address bits consumed above it.
#[derive(Clone, Copy, Default)]
struct Step {
    parent_slot: usize,
    node: u32,
    start_bit: u8,
}

/// The entries a prefix covers, and the nodes passed to reach them.
struct Place {
    first: usize,
    count: usize,
    path: [Step; NODE_LEVELS],
    depth: usize,
}

/// The lookup arrays, apart from the route set.
struct Trie {
    /// The root's entries, then every node's: reserved for the node limit at creation, so
    /// that the nodes stay in huge pages as the trie grows (see [`ReservedTable`]).
    entries: ReservedTable<u32>,
    /// Prefix length that wrote each entry (control path only).
    lengths: Vec<u8>,
    free: Vec<u32>,
    limit: u32,
}

impl Trie {
    fn nodes_allocated(&self) -> usize {
        (self.entries.len() - ROOT_LEN) / NODE_LEN
    }

    fn nodes_available(&self) -> usize {
        self.free.len() + (self.limit as usize).saturating_sub(self.nodes_allocated())
    }

    fn entry(&self, slot: usize) -> u32 {
        self.entries.get(slot).copied().unwrap_or(0)
    }

    fn length(&self, slot: usize) -> u8 {
        self.lengths.get(slot).copied().unwrap_or(0)
    }

    fn set(&mut self, slot: usize, entry: u32, length: u8) {
        if let (Some(e), Some(l)) = (self.entries.get_mut(slot), self.lengths.get_mut(slot)) {
            *e = entry;
            *l = length;
        }
    }

    /// A new child node under `slot`, every entry a copy of the slot's route.
    fn split(&mut self, slot: usize) -> Result<u32, FibError> {
        let (entry, length) = (self.entry(slot), self.length(slot));
        let node = match self.free.pop() {
            Some(node) => {
                let base = node_base(node);
                self.entries
                    .get_mut(base..base + NODE_LEN)
                    .unwrap_or_default()
                    .fill(entry);
                self.lengths
                    .get_mut(base..base + NODE_LEN)
                    .unwrap_or_default()
                    .fill(length);
                node
            }
            None => {
                let node = self.nodes_allocated();
                if node >= self.limit as usize {
                    return Err(FibError::NodesExhausted { limit: self.limit });
                }
                if !self.entries.grow(NODE_LEN, entry) {
                    return Err(FibError::NodesExhausted { limit: self.limit });
                }
                if self.lengths.len() == self.lengths.capacity() {
                    // Grow by 1/8 (at least 256 nodes): amortised O(1), little slack to report.
                    let room = (self.lengths.capacity() / 8).max(256 * NODE_LEN);
                    let room = room.min((self.limit as usize - node) * NODE_LEN);
                    self.lengths.reserve_exact(room);
                }
                self.lengths.resize(self.lengths.len() + NODE_LEN, length);
                node as u32
            }
        };
        self.set(slot, CHILD | node, 0);
        Ok(node)
    }

    /// Walks down to the entries `addr/len` covers. Missing nodes are created when `create`
    /// (the caller has checked there are enough); otherwise a missing node means the prefix owns
    /// no entry and `None` is returned.
    fn place(&mut self, addr: u128, len: u8, create: bool) -> Result<Option<Place>, FibError> {
        let mut place = Place {
            first: 0,
            count: 0,
            path: [Step::default(); NODE_LEVELS],
            depth: 0,
        };
        let (mut base, mut start, mut width) = (0usize, 0u8, 16u8);
        loop {
            let end = start + width;
            let index = ((addr >> (128 - u32::from(end))) as usize) & ((1 << width) - 1);
            if len <= end {
                place.count = 1 << (end - len);
                place.first = base + (index & !(place.count - 1));
                return Ok(Some(place));
            }
            let slot = base + index;
            let entry = self.entry(slot);
            let node = if entry & CHILD != 0 {
                entry & CHILD_INDEX
            } else if create {
                self.split(slot)?
            } else {
                return Ok(None);
            };
            let Some(step) = place.path.get_mut(place.depth) else {
                return Ok(None);
            };
            *step = Step {
                parent_slot: slot,
                node,
                start_bit: end,
            };
            place.depth += 1;
            (base, start, width) = (node_base(node), end, 8);
        }
    }

    /// How many nodes inserting `addr/len` would create.
    fn missing_nodes(&self, addr: u128, len: u8) -> usize {
        let (mut base, mut end) = (0usize, 16u8);
        let mut index = (addr >> 112) as usize;
        while len > end {
            let entry = self.entry(base + index);
            if entry & CHILD == 0 {
                // One node for each further stride the prefix ends below.
                return usize::from(len - end).div_ceil(8);
            }
            base = node_base(entry & CHILD_INDEX);
            end += 8;
            index = ((addr >> (128 - u32::from(end))) as usize) & 0xff;
        }
        0
    }

    /// Visits `first..first + count` and, through child pointers, every entry below them:
    /// `erase` false writes `new` where the current prefix is not longer than `len`;
    /// `erase` true writes `new` (of length `new_len`) where the current prefix is exactly `len`.
    fn fill(&mut self, first: usize, count: usize, len: u8, new: u32, new_len: u8, erase: bool) {
        for slot in first..first + count {
            let entry = self.entry(slot);
            if entry & CHILD != 0 {
                self.fill(
                    node_base(entry & CHILD_INDEX),
                    NODE_LEN,
                    len,
                    new,
                    new_len,
                    erase,
                );
            } else if erase {
                if entry != 0 && self.length(slot) == len {
                    self.set(slot, new, new_len);
                }
            } else if self.length(slot) <= len {
                self.set(slot, new, len);
            }
        }
    }

    /// Frees the nodes of `path`, deepest first, that no longer hold a prefix of their own.
    fn collapse(&mut self, path: &[Step]) {
        for step in path.iter().rev() {
            let base = node_base(step.node);
            let entries = self.entries.get(base..base + NODE_LEN).unwrap_or_default();
            let lengths = self.lengths.get(base..base + NODE_LEN).unwrap_or_default();
            let own = entries.iter().any(|e| e & CHILD != 0)
                || lengths.iter().any(|&l| l > step.start_bit);
            if own {
                return;
            }
            let (entry, length) = (self.entry(base), self.length(base));
            self.set(step.parent_slot, entry, length);
            self.free.push(step.node);
        }
    }
}

/// IPv6 longest-prefix-match table (16-8-8-... multibit trie) with its route set.
pub struct Ipv6Fib {
    trie: Trie,
    rib: Rib<u128>,
}

impl Default for Ipv6Fib {
    fn default() -> Self {
        Self::new()
    }
}

impl Ipv6Fib {
    /// Default cap on trie nodes (1 GiB of nodes at most; they are allocated as needed).
    pub const DEFAULT_NODE_LIMIT: u32 = 1 << 20;
    /// The most nodes an entry can address.
    pub const MAX_NODE_LIMIT: u32 = CHILD;

    /// An empty table with the default node limit.
    pub fn new() -> Self {
        Self::with_node_limit(Self::DEFAULT_NODE_LIMIT)
    }

    /// An empty table that allocates at most `nodes` 256-entry nodes.
    ///
    /// The address space for that many nodes is reserved at once (it takes memory only as
    /// nodes are made; see `reserve_blocks` for a system that refuses so much).
    pub fn with_node_limit(nodes: u32) -> Self {
        let (entries, limit) = reserve_blocks(ROOT_LEN, NODE_LEN, nodes.min(Self::MAX_NODE_LIMIT));
        Ipv6Fib {
            trie: Trie {
                entries,
                lengths: vec![0; ROOT_LEN],
                free: Vec::new(),
                limit,
            },
            rib: Rib::new(),
        }
    }

    /// Builds a table from `routes` (a later duplicate prefix wins), shortest prefixes first so
    /// that every entry is written once per covering level.
    pub fn from_routes(
        routes: impl IntoIterator<Item = (Ipv6Prefix, NextHop)>,
    ) -> Result<Self, FibError> {
        Self::from_routes_with_node_limit(Self::DEFAULT_NODE_LIMIT, routes)
    }

    /// [`Ipv6Fib::from_routes`] with a node limit.
    pub fn from_routes_with_node_limit(
        nodes: u32,
        routes: impl IntoIterator<Item = (Ipv6Prefix, NextHop)>,
    ) -> Result<Self, FibError> {
        let mut fib = Self::with_node_limit(nodes);
        let routes: Vec<(Ipv6Prefix, NextHop)> = routes.into_iter().collect();
        let mut per_len = [0usize; 129];
        for (prefix, _) in &routes {
            if let Some(n) = per_len.get_mut(usize::from(prefix.len())) {
                *n += 1;
            }
        }
        fib.rib.reserve(&per_len);
        for (prefix, hop) in routes {
            fib.rib.insert(prefix.addr(), prefix.len(), hop);
        }
        let Ipv6Fib { trie, rib } = &mut fib;
        for len in 0..=128 {
            for (addr, hop) in rib.of_len(len) {
                Self::write(trie, addr, len, hop)?;
            }
        }
        Ok(fib)
    }

    fn write(trie: &mut Trie, addr: u128, len: u8, hop: NextHop) -> Result<(), FibError> {
        if trie.missing_nodes(addr, len) > trie.nodes_available() {
            return Err(FibError::NodesExhausted { limit: trie.limit });
        }
        if let Some(place) = trie.place(addr, len, true)? {
            trie.fill(place.first, place.count, len, hop.bits(), len, false);
        }
        Ok(())
    }

    /// Adds or replaces the route `prefix -> hop`; returns the next hop it replaced. Fails, and
    /// changes nothing, when the nodes it needs exceed the node limit.
    pub fn insert(
        &mut self,
        prefix: Ipv6Prefix,
        hop: NextHop,
    ) -> Result<Option<NextHop>, FibError> {
        Self::write(&mut self.trie, prefix.addr(), prefix.len(), hop)?;
        Ok(self.rib.insert(prefix.addr(), prefix.len(), hop))
    }

    /// Deletes the route for exactly `prefix`; returns its next hop. Destinations it covered fall
    /// back to the longest remaining route that covers them; nodes left without a prefix of their
    /// own are freed.
    pub fn remove(&mut self, prefix: Ipv6Prefix) -> Option<NextHop> {
        let (addr, len) = (prefix.addr(), prefix.len());
        let hop = self.rib.remove(addr, len)?;
        let (new, new_len) = self
            .rib
            .covering(addr, len)
            .map_or((0, 0), |(l, h)| (h.bits(), l));
        if let Ok(Some(place)) = self.trie.place(addr, len, false) {
            self.trie
                .fill(place.first, place.count, len, new, new_len, true);
            self.trie
                .collapse(place.path.get(..place.depth).unwrap_or_default());
        }
        Some(hop)
    }

    /// The next hop of exactly `prefix` (not a longest-prefix match).
    pub fn route(&self, prefix: Ipv6Prefix) -> Option<NextHop> {
        self.rib.route(prefix.addr(), prefix.len())
    }

    /// Every route, shortest prefixes first.
    pub fn routes(&self) -> impl Iterator<Item = (Ipv6Prefix, NextHop)> + '_ {
        self.rib
            .iter()
            .filter_map(|(addr, len, hop)| Ipv6Prefix::new(addr, len).ok().map(|p| (p, hop)))
    }

    /// Number of routes.
    pub fn len(&self) -> usize {
        self.rib.len()
    }

    /// Whether the table holds no route.
    pub fn is_empty(&self) -> bool {
        self.rib.len() == 0
    }

    /// The next hop for destination `addr` (host order, `Ipv6Addr::to_bits`): one read per
    /// level down to the prefix's stride.
    #[inline]
    pub fn lookup(&self, addr: u128) -> Option<NextHop> {
        let entries = &self.trie.entries[..];
        let mut entry = entries.get((addr >> 112) as usize).copied().unwrap_or(0);
        let mut shift = 112;
        while entry & CHILD != 0 && shift > 0 {
            shift -= 8;
            let slot = node_base(entry & CHILD_INDEX) + ((addr >> shift) as usize & 0xff);
            entry = entries.get(slot).copied().unwrap_or(0);
        }
        NextHop::from_entry(entry)
    }

    /// Looks up `addrs[i]` into `out[i]` for `i < min(addrs.len(), out.len())`, in steps of
    /// [`LOOKUP_STEP`] that walk the trie level by level in lockstep: the reads of one level are
    /// independent, so their cache misses overlap.
    pub fn lookup_batch(&self, addrs: &[u128], out: &mut [Option<NextHop>]) {
        for (addrs, out) in addrs.chunks(LOOKUP_STEP).zip(out.chunks_mut(LOOKUP_STEP)) {
            self.lookup_step(addrs, out);
        }
    }

    #[inline(always)]
    fn lookup_step(&self, addrs: &[u128], out: &mut [Option<NextHop>]) {
        let entries = &self.trie.entries[..];
        let mut slots = [0u32; LOOKUP_STEP];
        let mut pending = 0;
        for (slot, &addr) in slots.iter_mut().zip(addrs) {
            *slot = entries.get((addr >> 112) as usize).copied().unwrap_or(0);
            pending |= *slot;
        }
        let mut shift = 112;
        while pending & CHILD != 0 && shift > 0 {
            shift -= 8;
            pending = 0;
            for (slot, &addr) in slots.iter_mut().zip(addrs) {
                if *slot & CHILD != 0 {
                    let index = node_base(*slot & CHILD_INDEX) + ((addr >> shift) as usize & 0xff);
                    *slot = entries.get(index).copied().unwrap_or(0);
                    pending |= *slot;
                }
            }
        }
        for (result, &slot) in out.iter_mut().zip(&slots) {
            *result = NextHop::from_entry(slot);
        }
    }

    /// Bytes of the entry arrays lookups walk (root and nodes).
    pub fn memory_bytes(&self) -> usize {
        self.trie.entries.len() * size_of::<u32>()
    }

    /// Bytes kept for the control plane: the route set and the per-entry prefix lengths.
    pub fn rib_memory_bytes(&self) -> usize {
        self.rib.memory_bytes() + self.trie.lengths.capacity()
    }

    /// Trie nodes in use.
    pub fn nodes_in_use(&self) -> usize {
        self.trie.nodes_allocated() - self.trie.free.len()
    }

    /// The most nodes this table will allocate.
    pub fn node_limit(&self) -> u32 {
        self.trie.limit
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(addr: u128, len: u8) -> Ipv6Prefix {
        Ipv6Prefix::new(addr, len).unwrap()
    }
    fn hop(id: u32) -> NextHop {
        NextHop::hop(id).unwrap()
    }
    const DOC: u128 = 0x2001_0db8_0000_0000_0000_0000_0000_0000;

    #[test]
    fn overlapping_prefixes_default_and_host_routes() {
        let mut fib = Ipv6Fib::new();
        fib.insert(p(0, 0), hop(0)).unwrap();
        fib.insert(p(DOC, 32), hop(32)).unwrap();
        fib.insert(p(DOC | 0x0001_0000 << 80, 48), hop(48)).unwrap();
        fib.insert(p(DOC | 0x1234, 128), hop(128)).unwrap();
        fib.insert(p(u128::MAX, 128), hop(7)).unwrap();
        assert_eq!(fib.lookup(DOC | 0x1234), Some(hop(128)));
        assert_eq!(fib.lookup(DOC | 0x1235), Some(hop(32)));
        assert_eq!(fib.lookup(DOC | 0x0001_0000 << 80 | 5), Some(hop(48)));
        assert_eq!(fib.lookup(1), Some(hop(0)));
        assert_eq!(fib.lookup(u128::MAX), Some(hop(7)));
        assert_eq!(fib.lookup(u128::MAX - 1), Some(hop(0)));
        assert_eq!(fib.remove(p(DOC, 32)), Some(hop(32)));
        assert_eq!(fib.lookup(DOC | 0x1235), Some(hop(0)));
        assert_eq!(fib.lookup(DOC | 0x1234), Some(hop(128)));
        assert_eq!(fib.lookup(DOC | 0x0001_0000 << 80 | 5), Some(hop(48)));
        assert_eq!(fib.remove(p(0, 0)), Some(hop(0)));
        assert_eq!(fib.lookup(1), None);
        assert_eq!(fib.lookup(DOC | 0x1234), Some(hop(128)));
    }

    #[test]
    fn nodes_are_freed_with_their_last_prefix_and_reused() {
        let mut fib = Ipv6Fib::new();
        fib.insert(p(DOC, 32), hop(32)).unwrap();
        assert_eq!(
            fib.nodes_in_use(),
            2,
            "a /32 ends in the 24..32 node below the 16..24 one"
        );
        fib.insert(p(DOC | 0xff, 128), hop(128)).unwrap();
        assert_eq!(fib.nodes_in_use(), 14);
        fib.insert(p(DOC | 0xff00, 120), hop(120)).unwrap();
        assert_eq!(
            fib.nodes_in_use(),
            14,
            "shares every node but the last level"
        );
        assert_eq!(fib.lookup(DOC | 0xff), Some(hop(128)));
        assert_eq!(fib.remove(p(DOC | 0xff, 128)), Some(hop(128)));
        assert_eq!(fib.nodes_in_use(), 13);
        assert_eq!(fib.lookup(DOC | 0xff), Some(hop(32)));
        assert_eq!(fib.lookup(DOC | 0xff01), Some(hop(120)));
        fib.remove(p(DOC | 0xff00, 120)).unwrap();
        assert_eq!(fib.nodes_in_use(), 2);
        assert_eq!(fib.lookup(DOC | 0xff01), Some(hop(32)));
        let bytes = fib.memory_bytes();
        fib.insert(p(DOC | 1 << 64, 64), hop(64)).unwrap();
        assert_eq!(fib.memory_bytes(), bytes, "freed nodes reused");
        fib.remove(p(DOC, 32)).unwrap();
        fib.remove(p(DOC | 1 << 64, 64)).unwrap();
        assert_eq!(fib.nodes_in_use(), 0);
        assert!(fib.is_empty());
        assert_eq!(fib.lookup(DOC | 1 << 64), None);
    }

    #[test]
    fn the_largest_node_limit_reserves_what_the_system_allows_and_forwards() {
        // 1 TiB of address space is asked for; where it is refused the limit is halved until a
        // reservation holds. Either way the table works and grows in place.
        let mut fib = Ipv6Fib::with_node_limit(Ipv6Fib::MAX_NODE_LIMIT);
        assert!(fib.trie.limit > 0);
        let start = fib.trie.entries.as_ptr();
        for i in 0..300u128 {
            fib.insert(p(DOC | i << 64, 64), hop(i as u32 % 7)).unwrap();
        }
        assert_eq!(fib.trie.entries.as_ptr(), start, "the entries moved");
        for i in 0..300u128 {
            assert_eq!(fib.lookup(DOC | i << 64 | 9), Some(hop(i as u32 % 7)));
        }
        assert_eq!(
            fib.memory_bytes(),
            (ROOT_LEN + fib.nodes_in_use() * NODE_LEN) * 4
        );
    }

    #[test]
    fn node_exhaustion_is_an_error_and_changes_nothing() {
        let mut fib = Ipv6Fib::with_node_limit(4);
        fib.insert(p(DOC, 40), hop(1)).unwrap();
        assert_eq!(fib.nodes_in_use(), 3);
        let err = fib.insert(p(DOC, 56), hop(2));
        assert_eq!(err, Err(FibError::NodesExhausted { limit: 4 }));
        assert!(err.unwrap_err().to_string().contains("with_node_limit"));
        assert_eq!(fib.nodes_in_use(), 3);
        assert_eq!(fib.route(p(DOC, 56)), None);
        assert_eq!(fib.lookup(DOC), Some(hop(1)));
        fib.insert(p(DOC, 48), hop(3)).unwrap();
        assert_eq!(fib.lookup(DOC), Some(hop(3)));
        let many = [(p(DOC, 40), hop(1)), (p(DOC, 64), hop(1))];
        assert_eq!(
            Ipv6Fib::from_routes_with_node_limit(4, many).err(),
            Some(FibError::NodesExhausted { limit: 4 })
        );
    }

    #[test]
    fn batch_matches_single_lookups() {
        let mut fib = Ipv6Fib::new();
        fib.insert(p(DOC, 32), hop(1)).unwrap();
        fib.insert(p(DOC | 0xabcd << 80, 48), hop(2)).unwrap();
        fib.insert(p(DOC | 0xabcd << 80 | 9, 128), NextHop::ecmp(4).unwrap())
            .unwrap();
        let addrs: Vec<u128> = (0..70u128)
            .map(|i| match i % 3 {
                0 => DOC | 0xabcd << 80 | (i / 7),
                1 => DOC | i << 64,
                _ => i << 100,
            })
            .collect();
        let mut out = vec![None; addrs.len()];
        fib.lookup_batch(&addrs, &mut out);
        for (&addr, &result) in addrs.iter().zip(&out) {
            assert_eq!(result, fib.lookup(addr), "{addr:#x}");
        }
        assert_eq!(fib.lookup(DOC | 0xabcd << 80 | 9), NextHop::ecmp(4));
    }
}
