//! The route set (RIB) kept beside each lookup table: one hash map per prefix length.
//!
//! The lookup tables are leaf-pushed (a short prefix is copied into every slot it covers), so they
//! cannot tell what a removed route was hiding. The RIB answers that in at most one probe per
//! length ([`Rib::covering`]), and it is the source of truth a table is rebuilt from. Per-length
//! maps rather than a binary trie: O(1) insert/remove, about 13 bytes per route, and the bulk build
//! can walk the routes length by length, shortest first. The maps use a multiply-fold hash (keys
//! are prefixes, not attacker-chosen strings, and SipHash would double the build time).

use core::hash::{BuildHasherDefault, Hash, Hasher};
use std::collections::HashMap;

use super::NextHop;

/// Address bits of one family: `u32` for IPv4, `u128` for IPv6.
pub trait AddrBits: Copy + Eq + Hash {
    /// Address width in bits.
    const BITS: u8;
    /// `self` with everything after the first `len` bits cleared.
    fn masked(self, len: u8) -> Self;
}

impl AddrBits for u32 {
    const BITS: u8 = 32;
    fn masked(self, len: u8) -> Self {
        self & super::prefix::mask4(len)
    }
}

impl AddrBits for u128 {
    const BITS: u8 = 128;
    fn masked(self, len: u8) -> Self {
        self & super::prefix::mask6(len)
    }
}

/// Multiply-fold hasher for integer keys.
#[derive(Default, Clone, Copy)]
pub(super) struct FoldHasher(u64);

const K: u64 = 0x9e37_79b9_7f4a_7c15;

impl FoldHasher {
    #[inline]
    fn mix(&mut self, word: u64) {
        let product = u128::from(self.0 ^ word) * u128::from(K);
        self.0 = (product as u64) ^ ((product >> 64) as u64);
    }
}

impl Hasher for FoldHasher {
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.mix(u64::from_le_bytes(word));
        }
    }
    fn write_u32(&mut self, n: u32) {
        self.mix(u64::from(n));
    }
    fn write_u64(&mut self, n: u64) {
        self.mix(n);
    }
    fn write_u128(&mut self, n: u128) {
        self.mix(n as u64);
        self.mix((n >> 64) as u64);
    }
    fn finish(&self) -> u64 {
        // One more round so that the high bits (the map's control bytes) depend on every input bit.
        let product = u128::from(self.0) * u128::from(K);
        (product as u64) ^ ((product >> 64) as u64)
    }
}

type Map<A> = HashMap<A, NextHop, BuildHasherDefault<FoldHasher>>;

/// Prefix -> next hop, one map per length.
#[derive(Clone)]
pub(super) struct Rib<A> {
    by_len: Vec<Map<A>>,
    routes: usize,
}

impl<A: AddrBits> Rib<A> {
    pub(super) fn new() -> Self {
        Rib {
            by_len: (0..=A::BITS).map(|_| Map::default()).collect(),
            routes: 0,
        }
    }

    /// Makes room for `extra[len]` more routes of each length.
    pub(super) fn reserve(&mut self, extra: &[usize]) {
        for (map, &n) in self.by_len.iter_mut().zip(extra) {
            map.reserve(n);
        }
    }

    /// Stores `addr/len -> hop` (`addr` already masked); returns the next hop it replaced.
    pub(super) fn insert(&mut self, addr: A, len: u8, hop: NextHop) -> Option<NextHop> {
        let previous = self.by_len.get_mut(usize::from(len))?.insert(addr, hop);
        if previous.is_none() {
            self.routes += 1;
        }
        previous
    }

    /// Deletes `addr/len`; returns its next hop.
    pub(super) fn remove(&mut self, addr: A, len: u8) -> Option<NextHop> {
        let removed = self.by_len.get_mut(usize::from(len))?.remove(&addr);
        if removed.is_some() {
            self.routes -= 1;
        }
        removed
    }

    /// The next hop of exactly `addr/len`.
    pub(super) fn route(&self, addr: A, len: u8) -> Option<NextHop> {
        self.by_len.get(usize::from(len))?.get(&addr).copied()
    }

    /// The longest route strictly shorter than `len` that contains `addr`: (its length, next hop).
    pub(super) fn covering(&self, addr: A, len: u8) -> Option<(u8, NextHop)> {
        (0..len).rev().find_map(|l| {
            let map = self.by_len.get(usize::from(l))?;
            if map.is_empty() {
                return None;
            }
            map.get(&addr.masked(l)).map(|&hop| (l, hop))
        })
    }

    /// The routes of length `len`.
    pub(super) fn of_len(&self, len: u8) -> impl Iterator<Item = (A, NextHop)> + '_ {
        self.by_len
            .get(usize::from(len))
            .into_iter()
            .flatten()
            .map(|(&a, &h)| (a, h))
    }

    /// Every route: (address, length, next hop), shortest first.
    pub(super) fn iter(&self) -> impl Iterator<Item = (A, u8, NextHop)> + '_ {
        (0..=A::BITS).flat_map(move |len| self.of_len(len).map(move |(a, h)| (a, len, h)))
    }

    /// Number of routes.
    pub(super) fn len(&self) -> usize {
        self.routes
    }

    /// Bytes held by the maps (slots plus one control byte per slot).
    pub(super) fn memory_bytes(&self) -> usize {
        let slot = size_of::<(A, NextHop)>() + 1;
        self.by_len.iter().map(|m| m.capacity() * slot).sum()
    }
}
