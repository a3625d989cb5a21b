//! Poptrie (Asai and Ohara, "Poptrie: A Compressed Trie with Population Count for Fast and
//! Scalable Software IP Routing Table Lookup", SIGCOMM 2015): the FIB as a 64-ary trie of
//! compressed nodes, [`Ipv4Trie`] and [`Ipv6Trie`], beside DIR-24-8 and the 16-8-8 trie.
//!
//! The first [`Key::DIRECT`] (18) bits of the destination index a direct-pointing array (2^18
//! entries, 1 MiB): an entry is a next hop, empty, or the root of a subtree of nodes
//! ([`node`]), each covering six more bits. A node finds its child or its leaf with one popcount,
//! so a lookup is one read per level, and a whole table takes a few MiB where DIR-24-8 takes
//! 64 MiB at least: most of it stays in the last-level cache. Batched lookups walk a step of
//! [`LOOKUP_STEP`] destinations level by level in lockstep, as the IPv6 trie does, so that the
//! misses of one level overlap; the leaves are read last, all together.
//!
//! Updates rebuild only the subtrees under the direct entries the changed prefix covers (one
//! for a prefix longer than /18; for a shorter one, those of its 2^(18-len) entries where it is
//! the longest route): the routes of a subtree are a range of the ordered set of prefixes longer
//! than /18 that the table keeps, and what it inherits is the longest covering route the route
//! set ([`Rib`]) knows. The new subtree is built into blocks that no lookup reads yet, the
//! direct entry is switched to it, then the old blocks are freed: lookups between batches see
//! the old subtree or the new one. Node and leaf arrays are [`arena::Arena`]s that never move.
//! A table built off the worker (`from_routes`) is moved to it whole, like the others.
//!
//! Measured on the shared 2-vCPU VM (`benches/fib.rs`, same run, load 4.5-8, so the figures are
//! noisy and the caches shared): at 1M IPv4 routes Poptrie takes 13.5 MiB of lookup arrays
//! (DIR-24-8 79.2 MiB) and 235 024 nodes; at 200k IPv6 routes 9.5 MiB (the 16-8-8 trie 176.3
//! MiB). Lookups were slower than DIR-24-8's, not faster: 15.7 M/s batched against 128 M/s at
//! 1M IPv4 routes, built with `-C target-cpu=x86-64-v2` (a `popcnt` instruction; the
//! workspace's baseline x86-64 build makes `count_ones` a dozen instructions). A profile puts
//! three quarters of the time on the node and leaf loads: each lookup is three dependent reads
//! (direct entry, node, leaf) against DIR-24-8's one, and on this VM the few MiB did not stay in
//! the last-level cache. So DIR-24-8 stays the router's table; this one is the choice where
//! memory counts (many tables, IPv6).

mod arena;
mod node;

use std::collections::BTreeSet;

use arena::Arena;
use node::{Headroom, Made, Route, STRIDE, Store};

use super::prefix::{Ipv4Prefix, Ipv6Prefix};
use super::rib::{AddrBits, Rib};
use super::{ECMP, FibError, LOOKUP_STEP, NextHop, VALID};

/// A direct entry, or a lookup's state, that names a node (bits 0..29 its index).
const NODE: u32 = 1 << 30;
/// A lookup's state that names a leaf (bits 0..29 its index).
const LEAF: u32 = 1 << 29;
const INDEX: u32 = LEAF - 1;

/// What Poptrie needs of an address family: its prefix type and bit fields of its addresses.
/// Implemented for `u32` (IPv4) and `u128` (IPv6); not meant to be implemented elsewhere.
pub trait Key: AddrBits + Ord + Send + Sync + 'static {
    /// The prefix type of the family.
    type Prefix: Copy;
    /// Bits the direct-pointing array resolves: 18, as in the paper's fastest variant, for
    /// both families (1 MiB; a /48 is then six reads below it, against seven with 16).
    const DIRECT: u8 = 18;
    /// `width` bits (at most 32) of the address from bit `offset` (0: the most significant),
    /// as an index; bits past the end of the address read as zero.
    fn bits(self, offset: u8, width: u8) -> usize;
    /// The first and the last address of direct block `index`.
    fn block(index: usize) -> (Self, Self);
    /// A prefix's network address and length.
    fn split(prefix: Self::Prefix) -> (Self, u8);
    /// The prefix `addr/len` (`addr` has no host bits).
    fn join(addr: Self, len: u8) -> Option<Self::Prefix>;
}

impl Key for u32 {
    type Prefix = Ipv4Prefix;
    #[inline(always)]
    fn bits(self, offset: u8, width: u8) -> usize {
        ((u64::from(self) << (32 + u32::from(offset))) >> (64 - u32::from(width))) as usize
    }
    fn block(index: usize) -> (Self, Self) {
        let first = (index as u32) << (32 - Self::DIRECT);
        (first, first | (u32::MAX >> Self::DIRECT))
    }
    fn split(prefix: Ipv4Prefix) -> (Self, u8) {
        (prefix.addr(), prefix.len())
    }
    fn join(addr: Self, len: u8) -> Option<Ipv4Prefix> {
        Ipv4Prefix::new(addr, len).ok()
    }
}

impl Key for u128 {
    type Prefix = Ipv6Prefix;
    #[inline(always)]
    fn bits(self, offset: u8, width: u8) -> usize {
        ((self << offset) >> (128 - u32::from(width))) as usize
    }
    fn block(index: usize) -> (Self, Self) {
        let first = (index as u128) << (128 - Self::DIRECT);
        (first, first | (u128::MAX >> Self::DIRECT))
    }
    fn split(prefix: Ipv6Prefix) -> (Self, u8) {
        (prefix.addr(), prefix.len())
    }
    fn join(addr: Self, len: u8) -> Option<Ipv6Prefix> {
        Ipv6Prefix::new(addr, len).ok()
    }
}

/// IPv4 longest-prefix-match table (Poptrie, 18-bit direct pointing) with its route set.
pub type Ipv4Trie = Poptrie<u32>;
/// IPv6 longest-prefix-match table (Poptrie, 18-bit direct pointing) with its route set.
pub type Ipv6Trie = Poptrie<u128>;

/// A Poptrie FIB for the family of `A` ([`Ipv4Trie`], [`Ipv6Trie`]).
pub struct Poptrie<A: Key> {
    /// 2^[`Key::DIRECT`] entries: a next hop, zero, or `NODE` and a subtree's root.
    direct: Box<[u32]>,
    /// Per direct entry, the length of the longest route of /18 or shorter that covers it (0
    /// for none): which entries a short prefix decides (control path only).
    lengths: Box<[u8]>,
    store: Store,
    rib: Rib<A>,
    /// The prefixes longer than [`Key::DIRECT`], ordered, so that the routes of one subtree are
    /// one range of it.
    long: BTreeSet<(A, u8)>,
}

impl<A: Key> Default for Poptrie<A> {
    fn default() -> Self {
        Self::new()
    }
}

impl<A: Key> Poptrie<A> {
    /// Default cap on nodes (96 MiB of them; a 1M-route IPv4 table takes about 150 000).
    pub const DEFAULT_NODE_LIMIT: u32 = 1 << 22;
    /// The most nodes (and leaves) an index can address, with the reservation's headroom.
    pub const MAX_NODE_LIMIT: u32 = 1 << 27;
    /// Leaves allowed per node of the limit (a node of a BGP table has two or three).
    const LEAVES_PER_NODE: u32 = 8;

    /// An empty table with the default node limit.
    pub fn new() -> Self {
        Self::with_node_limit(Self::DEFAULT_NODE_LIMIT)
    }

    /// An empty table that holds at most `nodes` nodes (capped at
    /// [`Poptrie::MAX_NODE_LIMIT`]) and eight leaves per node. The address space is reserved at
    /// once; it takes memory only as the table grows.
    pub fn with_node_limit(nodes: u32) -> Self {
        let nodes = nodes.min(Self::MAX_NODE_LIMIT);
        let leaves = nodes
            .saturating_mul(Self::LEAVES_PER_NODE)
            .min(Self::MAX_NODE_LIMIT);
        Poptrie {
            direct: vec![0; 1 << A::DIRECT].into_boxed_slice(),
            lengths: vec![0; 1 << A::DIRECT].into_boxed_slice(),
            store: Store {
                nodes: Arena::new(nodes),
                leaves: Arena::new(leaves),
            },
            rib: Rib::new(),
            long: BTreeSet::new(),
        }
    }

    /// Builds a table from `routes` in one pass (a later duplicate prefix wins): every subtree
    /// is built once, from its routes in order.
    pub fn from_routes(
        routes: impl IntoIterator<Item = (A::Prefix, NextHop)>,
    ) -> Result<Self, FibError> {
        Self::from_routes_with_node_limit(Self::DEFAULT_NODE_LIMIT, routes)
    }

    /// [`Poptrie::from_routes`] with a node limit.
    pub fn from_routes_with_node_limit(
        nodes: u32,
        routes: impl IntoIterator<Item = (A::Prefix, NextHop)>,
    ) -> Result<Self, FibError> {
        let mut trie = Self::with_node_limit(nodes);
        let routes: Vec<(A::Prefix, NextHop)> = routes.into_iter().collect();
        let mut per_len = vec![0usize; usize::from(A::BITS) + 1];
        for &(prefix, _) in &routes {
            if let Some(n) = per_len.get_mut(usize::from(A::split(prefix).1)) {
                *n += 1;
            }
        }
        trie.rib.reserve(&per_len);
        for (prefix, hop) in routes {
            let (addr, len) = A::split(prefix);
            trie.rib.insert(addr, len, hop);
        }
        let mut all: Vec<Route<A>> = trie
            .rib
            .iter()
            .map(|(addr, len, hop)| (addr, len, hop.bits()))
            .collect();
        all.sort_unstable_by_key(|&(addr, len, _)| (addr, len));
        // In this order a route comes after every route that contains it: written in order,
        // each direct entry ends with its longest match of /18 or shorter.
        let mut long = Vec::new();
        for (addr, len, entry) in all {
            if len > A::DIRECT {
                long.push((addr, len, entry));
                continue;
            }
            let first = addr.bits(0, A::DIRECT);
            let count = 1usize << (A::DIRECT - len);
            trie.direct
                .get_mut(first..first + count)
                .unwrap_or_default()
                .fill(entry);
            trie.lengths
                .get_mut(first..first + count)
                .unwrap_or_default()
                .fill(len);
        }
        let Poptrie { direct, store, .. } = &mut trie;
        let block_of = |route: &Route<A>| route.0.bits(0, A::DIRECT);
        for group in long.chunk_by(|a, b| block_of(a) == block_of(b)) {
            let Some(slot) = group.first().and_then(|r| direct.get_mut(block_of(r))) else {
                continue;
            };
            let mut made = Made::default();
            let root = store
                .build_root(
                    group,
                    A::DIRECT,
                    *slot,
                    Some(Headroom::default()),
                    &mut made,
                )
                .ok_or(FibError::TrieNodesExhausted {
                    limit: store.nodes.limit(),
                })?;
            *slot = NODE | root;
        }
        trie.long = long.iter().map(|&(addr, len, _)| (addr, len)).collect();
        Ok(trie)
    }

    /// Adds or replaces the route `prefix -> hop`; returns the next hop it replaced. Fails, and
    /// changes nothing, when the nodes or leaves it needs exceed the limit.
    pub fn insert(&mut self, prefix: A::Prefix, hop: NextHop) -> Result<Option<NextHop>, FibError> {
        let (addr, len) = A::split(prefix);
        let previous = self.rib.insert(addr, len, hop);
        let added = len > A::DIRECT && self.long.insert((addr, len));
        if let Err(error) = self.update(addr, len, true) {
            match previous {
                Some(previous) => self.rib.insert(addr, len, previous),
                None => self.rib.remove(addr, len),
            };
            if added {
                self.long.remove(&(addr, len));
            }
            // Back to the routes the rebuilt subtrees had: the blocks they took are free again,
            // so this needs no more than what they held before.
            let _ = self.update(addr, len, false);
            return Err(error);
        }
        Ok(previous)
    }

    /// Deletes the route for exactly `prefix`; returns its next hop. Destinations it covered fall
    /// back to the longest remaining route that covers them.
    pub fn remove(&mut self, prefix: A::Prefix) -> Option<NextHop> {
        let (addr, len) = A::split(prefix);
        let hop = self.rib.remove(addr, len)?;
        if len > A::DIRECT {
            self.long.remove(&(addr, len));
        }
        // A removal needs no more nodes or leaves than it frees, so it is not held to the
        // limit; the reservation's headroom (twice the limit) absorbs a fragmented free list.
        let _ = self.update(addr, len, false);
        Some(hop)
    }

    /// Rebuilds what the route set now says under the direct entries `addr/len` covers and
    /// where it is, or was, the longest route of /18 or shorter; `held`: to the node limit.
    fn update(&mut self, addr: A, len: u8, held: bool) -> Result<(), FibError> {
        if len > A::DIRECT {
            let index = addr.bits(0, A::DIRECT);
            let (start, _) = A::block(index);
            let inherited = self
                .rib
                .covering(start, A::DIRECT + 1)
                .map_or(0, |(_, hop)| hop.bits());
            return self.refresh(index, inherited, true, held);
        }
        // What the entries where `addr/len` is the longest short route inherit now: the route
        // itself, or (removed) the longest route shorter than it, the same for all of them.
        let (new_len, inherited) = match self.rib.route(addr, len) {
            Some(hop) => (len, hop.bits()),
            None => self
                .rib
                .covering(addr, len)
                .map_or((0, 0), |(l, hop)| (l, hop.bits())),
        };
        let first = addr.bits(0, A::DIRECT);
        for index in first..first + (1usize << (A::DIRECT - len)) {
            match self.lengths.get_mut(index) {
                Some(length) if *length <= len => *length = new_len,
                _ => continue,
            }
            self.refresh(index, inherited, false, held)?;
        }
        Ok(())
    }

    /// Rebuilds direct entry `index` from the route set, its slots no long route covers
    /// holding `inherited`: a new subtree, switched to, then the old one released. Without
    /// `long_changed` (no prefix longer than /18 came or went) an entry with no subtree has no
    /// long route under it and just takes `inherited`. When `held` to the limit, the new
    /// subtree may use what the old one frees.
    fn refresh(
        &mut self,
        index: usize,
        inherited: u32,
        long_changed: bool,
        held: bool,
    ) -> Result<(), FibError> {
        let old = self.direct.get(index).copied().unwrap_or(0);
        let (start, last) = A::block(index);
        let routes: Vec<Route<A>> = if long_changed || old & NODE != 0 {
            self.long
                .range((start, 0)..=(last, u8::MAX))
                .filter_map(|&(a, l)| self.rib.route(a, l).map(|hop| (a, l, hop.bits())))
                .collect()
        } else {
            Vec::new()
        };
        let headroom = held.then(|| {
            if old & NODE != 0 {
                self.store.size(old & INDEX)
            } else {
                Headroom::default()
            }
        });
        let new = if routes.is_empty() {
            inherited
        } else {
            let mut made = Made::default();
            match self
                .store
                .build_root(&routes, A::DIRECT, inherited, headroom, &mut made)
            {
                Some(root) => NODE | root,
                None => {
                    self.store.undo(made);
                    return Err(FibError::TrieNodesExhausted {
                        limit: self.store.nodes.limit(),
                    });
                }
            }
        };
        let Some(slot) = self.direct.get_mut(index) else {
            return Ok(());
        };
        let old = std::mem::replace(slot, new);
        if old & NODE != 0 {
            self.store.release_root(old & INDEX);
        }
        Ok(())
    }

    /// The next hop of exactly `prefix` (not a longest-prefix match).
    pub fn route(&self, prefix: A::Prefix) -> Option<NextHop> {
        let (addr, len) = A::split(prefix);
        self.rib.route(addr, len)
    }

    /// Every route, shortest prefixes first.
    pub fn routes(&self) -> impl Iterator<Item = (A::Prefix, NextHop)> + '_ {
        self.rib
            .iter()
            .filter_map(|(addr, len, hop)| A::join(addr, len).map(|p| (p, hop)))
    }

    /// Number of routes.
    pub fn len(&self) -> usize {
        self.rib.len()
    }

    /// Whether the table holds no route.
    pub fn is_empty(&self) -> bool {
        self.rib.len() == 0
    }

    /// The next hop for destination `addr` (host order, `to_bits` of the address): the direct
    /// entry, then one node per six bits down to the prefix, then its leaf.
    #[inline]
    pub fn lookup(&self, addr: A) -> Option<NextHop> {
        NextHop::from_entry(self.entry(addr))
    }

    /// The hop id of the route for `addr` when that route names one next hop, `None` when
    /// there is no route or it names an ECMP group (as `Ipv4Fib::lookup_hop`).
    #[inline(always)]
    pub fn lookup_hop(&self, addr: A) -> Option<u32> {
        let entry = self.entry(addr);
        (entry & (VALID | ECMP) == VALID).then_some(entry & NextHop::MAX_ID)
    }

    /// The leaf or direct entry that decides `addr`.
    #[inline(always)]
    fn entry(&self, addr: A) -> u32 {
        let mut entry = self
            .direct
            .get(addr.bits(0, A::DIRECT))
            .copied()
            .unwrap_or(0);
        let nodes = self.store.nodes.entries();
        let mut offset = A::DIRECT;
        while entry & NODE != 0 && offset < A::BITS {
            let node = nodes
                .get((entry & INDEX) as usize)
                .copied()
                .unwrap_or_default();
            entry = node.next(addr.bits(offset, STRIDE));
            offset += STRIDE;
        }
        if entry & LEAF != 0 {
            return self
                .store
                .leaves
                .entries()
                .get((entry & INDEX) as usize)
                .copied()
                .unwrap_or(0);
        }
        entry & !NODE
    }

    /// Starts bringing the direct entry of `addr` into the cache (as `Ipv4Fib::prefetch`).
    #[inline(always)]
    pub fn prefetch(&self, addr: A) {
        if let Some(entry) = self.direct.get(addr.bits(0, A::DIRECT)) {
            wirespeed_packet::cpu::prefetch(entry);
        }
    }

    /// Looks up `addrs[i]` into `out[i]` for `i < min(addrs.len(), out.len())`, in steps of
    /// [`LOOKUP_STEP`] destinations that walk the trie level by level in lockstep.
    pub fn lookup_batch(&self, addrs: &[A], out: &mut [Option<NextHop>]) {
        for (addrs, out) in addrs.chunks(LOOKUP_STEP).zip(out.chunks_mut(LOOKUP_STEP)) {
            self.lookup_step(addrs, out);
        }
    }

    #[inline(always)]
    fn lookup_step(&self, addrs: &[A], out: &mut [Option<NextHop>]) {
        let nodes = self.store.nodes.entries();
        let leaves = self.store.leaves.entries();
        // Per destination: a node still to visit (NODE), a leaf still to read (LEAF), or the
        // entry found.
        let mut state = [0u32; LOOKUP_STEP];
        let mut pending = 0;
        for (state, &addr) in state.iter_mut().zip(addrs) {
            *state = self
                .direct
                .get(addr.bits(0, A::DIRECT))
                .copied()
                .unwrap_or(0);
            pending |= *state;
        }
        let mut offset = A::DIRECT;
        while pending & NODE != 0 && offset < A::BITS {
            pending = 0;
            for (state, &addr) in state.iter_mut().zip(addrs) {
                // A destination already done reads node 0 (in the cache) and keeps its state:
                // the same instructions for every destination, no branch to mispredict.
                let walking = *state & NODE != 0;
                let index = if walking { *state & INDEX } else { 0 };
                let node = nodes.get(index as usize).copied().unwrap_or_default();
                let next = node.next(addr.bits(offset, STRIDE));
                *state = if walking { next } else { *state };
                pending |= *state;
            }
            offset += STRIDE;
        }
        for (result, &state) in out.iter_mut().zip(&state) {
            let entry = if state & LEAF != 0 {
                leaves.get((state & INDEX) as usize).copied().unwrap_or(0)
            } else {
                state & !NODE
            };
            *result = NextHop::from_entry(entry);
        }
    }

    /// Bytes of the arrays lookups read: the direct array and every node and leaf handed out.
    pub fn memory_bytes(&self) -> usize {
        size_of_val(&*self.direct)
            + size_of_val(self.store.nodes.entries())
            + size_of_val(self.store.leaves.entries())
    }

    /// Bytes of the route set and the ordered set of long prefixes kept for the control plane
    /// (the ordered set counted at its keys' size, without the B-tree's own overhead).
    pub fn rib_memory_bytes(&self) -> usize {
        self.rib.memory_bytes() + self.long.len() * size_of::<(A, u8)>()
    }

    /// Nodes in use.
    pub fn nodes_in_use(&self) -> usize {
        self.store.nodes.in_use()
    }

    /// Leaves in use.
    pub fn leaves_in_use(&self) -> usize {
        self.store.leaves.in_use()
    }

    /// The most nodes this table will hold.
    pub fn node_limit(&self) -> u32 {
        self.store.nodes.limit()
    }
}

#[cfg(test)]
mod tests;
