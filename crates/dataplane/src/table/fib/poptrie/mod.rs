//! Poptrie (Asai and Ohara, "Poptrie: A Compressed Trie with Population Count for Fast and
//! Scalable Software IP Routing Table Lookup", SIGCOMM 2015): the FIB as a 64-ary trie of
//! compressed nodes, [`Ipv4Trie`] and [`Ipv6Trie`], beside DIR-24-8 and the 16-8-8 trie.
//!
//! The first [`Key::DIRECT`] (18) bits of the destination index a direct-pointing array of
//! 2^18 roots ([`node::Root`], 48 bytes, 12 MiB in huge pages): an entry is a next hop or
//! empty ([`node::Root::value`]), or the root of a subtree of nodes, each covering six more
//! bits. A node finds its child or its leaf with one popcount, so a lookup is one read per
//! level, and a whole table takes a few MiB where DIR-24-8 takes 64 MiB at least. The paper's
//! direct array holds 4-byte indices to root nodes, and every node keeps its leaves in a leaf
//! array. Here the roots sit in the direct array and hold their leaves themselves, as one- or
//! two-byte ids of the table's few distinct next hops: at 1M BGP-like IPv4 routes nearly every
//! /18 has a subtree and most lookups end in it, so a lookup is one read of a root (two
//! adjacent lines where it crosses one) where it was the index, the root and the leaf.
//! Batched lookups walk a step of [`LOOKUP_STEP`](super::LOOKUP_STEP) destinations level by
//! level, the levels below the roots only for the destinations that go on, each pass
//! prefetching what the next reads ([`lookup`]); `count_ones` is the CPU's `popcnt` where it
//! has one, chosen when the table is made.
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
//! Measured on the shared 2-vCPU VM (`wirespeed bench fib --against rte_lpm,rte_lpm6`, and the
//! router bench; docs/benchmarks/journal.md, "Session twenty"): at 1M IPv4 routes with next
//! hops drawn from 64, 12.7 MiB of lookup arrays (DIR-24-8 79.2 MiB); with the leaves in the
//! roots, single lookups went from 0.6-0.8x rte_lpm's to 0.85-0.97x in the same harness, and the
//! router at 1M routes from 2.0x the cross-connect to 1.5x (DIR-24-8 1.4-1.5x), as its early
//! prefetch now brings in all a lookup reads; batched lookups are 0.93-0.95x rte_lpm's. rte_lpm
//! and DIR-24-8 also need one read per lookup, and this VM's cache reads a 12 MiB table only
//! about 1.6x as fast as their 64 MiB, so DIR-24-8 stays the router's IPv4 table by default;
//! for IPv6, where Poptrie's batched lookups are 2.0-2.3x rte_lpm6's and about 1.6x the 16-8-8
//! trie's (session twenty-three), Poptrie is (`[router] fib = "auto"`, the default).
//!
//! What a table takes: the direct array (12 MiB) whatever the routes, the nodes below the roots
//! (17 600 at 1M IPv4 routes, 0.4 MiB) and the leaves that are not inline (four bytes each):
//! those of the nodes, and of roots with more than 24 runs (12 with two-byte ids) or whose
//! entries found no id (a table whose routes name more than 65 536 distinct next hops). With
//! one next hop per route (`bench fib --next-hops distinct`) nearly every leaf is in the leaf
//! array again, 19.4 MiB at 1M routes. At 200k IPv6 routes: the direct array, 271 000 nodes (6.2
//! MiB) and their leaves.

mod arena;
mod lookup;
mod node;

use std::collections::BTreeSet;

use arena::Arena;
use node::{Headroom, Hops, Made, Root, Route, Store};
use wirespeed_packet::cpu::Popcnt;
use wirespeed_packet::memory::ReservedTable;

use super::prefix::{Ipv4Prefix, Ipv6Prefix};
use super::rib::{AddrBits, Rib};
use super::{ECMP, FibError, NextHop, VALID};

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
        // Most fields lie in the high half (a walk's offset is the same for a whole pass, so
        // the branch is predicted): 64-bit shifts there, where a u128 shift by a variable
        // amount is five instructions.
        if offset + width <= 64 {
            let high = (self >> 64) as u64;
            return ((high << offset) >> (64 - u32::from(width))) as usize;
        }
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

/// The direct-pointing array: `len` roots, all [`Root::value`]`(0)` (no route), reserved like
/// the arenas, so that it sits in huge pages (12 MiB read at random by every lookup).
fn direct_array(len: usize) -> ReservedTable<Root> {
    let mut direct = ReservedTable::new(len)
        .unwrap_or_else(|| panic!("cannot reserve a lookup array of {len} roots: out of memory"));
    direct.grow(len, Root::value(0));
    direct
}

/// IPv4 longest-prefix-match table (Poptrie, 18-bit direct pointing) with its route set.
pub type Ipv4Trie = Poptrie<u32>;
/// IPv6 longest-prefix-match table (Poptrie, 18-bit direct pointing) with its route set.
pub type Ipv6Trie = Poptrie<u128>;

/// A Poptrie FIB for the family of `A` ([`Ipv4Trie`], [`Ipv6Trie`]).
pub struct Poptrie<A: Key> {
    /// 2^[`Key::DIRECT`] entries: a subtree's root, or a [`Root::value`] (a next hop or zero).
    direct: ReservedTable<Root>,
    /// Per direct entry, the length of the longest route of /18 or shorter that covers it (0
    /// for none): which entries a short prefix decides (control path only).
    lengths: Box<[u8]>,
    store: Store,
    rib: Rib<A>,
    /// The prefixes longer than [`Key::DIRECT`], ordered, so that the routes of one subtree are
    /// one range of it.
    long: BTreeSet<(A, u8)>,
    /// Whether lookups run the copy compiled for `popcnt`: asked of the CPU once, here.
    popcnt: Option<Popcnt>,
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
            direct: direct_array(1 << A::DIRECT),
            lengths: vec![0; 1 << A::DIRECT].into_boxed_slice(),
            store: Store {
                nodes: Arena::new(nodes),
                leaves: Arena::new(leaves),
                hops: Hops::default(),
            },
            rib: Rib::new(),
            long: BTreeSet::new(),
            popcnt: Popcnt::detect(),
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
                .fill(Root::value(entry));
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
            // Before this, the entry is the value of its longest short route.
            *slot = store
                .build_root(
                    group,
                    slot.next(0, &[]),
                    Some(Headroom::default()),
                    &mut made,
                )
                .ok_or(FibError::TrieNodesExhausted {
                    limit: store.nodes.limit(),
                })?;
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
        let old = self.direct.get(index).copied().unwrap_or_default();
        let (start, last) = A::block(index);
        let routes: Vec<Route<A>> = if long_changed || old.has_subtree() {
            self.long
                .range((start, 0)..=(last, u8::MAX))
                .filter_map(|&(a, l)| self.rib.route(a, l).map(|hop| (a, l, hop.bits())))
                .collect()
        } else {
            Vec::new()
        };
        let headroom = held.then(|| self.store.size(&old.blocks()));
        let new = if routes.is_empty() {
            Root::value(inherited)
        } else {
            let mut made = Made::default();
            match self
                .store
                .build_root(&routes, inherited, headroom, &mut made)
            {
                Some(root) => root,
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
        self.store.release(old.blocks());
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

    /// Bytes of the arrays lookups read: the direct array, every node and leaf handed out, and
    /// the entries inline leaves name.
    pub fn memory_bytes(&self) -> usize {
        size_of_val(&*self.direct)
            + size_of_val(self.store.nodes.entries())
            + size_of_val(self.store.leaves.entries())
            + size_of_val(self.store.hops.entries.as_slice())
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
