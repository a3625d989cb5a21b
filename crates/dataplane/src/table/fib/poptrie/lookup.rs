//! Poptrie's lookups, and the copies of them compiled for the CPU's `popcnt` instruction.
//!
//! A node finds its child or leaf with a population count. The workspace builds for the
//! baseline x86-64, which has no `popcnt`, so `count_ones` is a dozen instructions there; a
//! binary built with `-C target-cpu=native` would not run everywhere. So the walks are written
//! once (`#[inline(always)]`) and compiled twice: plain, and inside [`Popcnt::run`] (a function
//! compiled with `#[target_feature(enable = "popcnt")]`), where each `count_ones` is one
//! instruction. Whether the CPU has it is asked once, when the table is made, and the answer
//! kept in the table; a lookup only reads it (one predictable branch).
//!
//! Batched lookups walk a step of [`LOOKUP_STEP`] destinations level by level in lockstep, and
//! each pass starts bringing in what the next pass reads (the roots, then the node or the leaf
//! each destination's state names): the misses of a whole step
//! overlap, where a pass's own loads overlapped only as far as the reorder buffer reached.

use wirespeed_packet::cpu::prefetch_address;

use super::node::{Node, STRIDE};
use super::{INDEX, Key, LEAF, NODE, Poptrie};
use crate::table::fib::{LOOKUP_STEP, NextHop};

impl<A: Key> Poptrie<A> {
    /// The next hop for destination `addr` (host order, `to_bits` of the address): the direct
    /// entry (a root, where most lookups of a BGP-like table find their leaf inline), then one
    /// node per six bits down to the prefix, then its leaf.
    #[inline]
    pub fn lookup(&self, addr: A) -> Option<NextHop> {
        NextHop::from_entry(self.entry(addr))
    }

    /// The hop id of the route for `addr` when that route names one next hop, `None` when
    /// there is no route or it names an ECMP group (as `Ipv4Fib::lookup_hop`).
    #[inline]
    pub fn lookup_hop(&self, addr: A) -> Option<u32> {
        let entry = self.entry(addr);
        (entry & (super::VALID | super::ECMP) == super::VALID).then_some(entry & NextHop::MAX_ID)
    }

    /// Looks up `addrs[i]` into `out[i]` for `i < min(addrs.len(), out.len())`, in steps of
    /// [`LOOKUP_STEP`] destinations that walk the trie level by level in lockstep.
    #[inline]
    pub fn lookup_batch(&self, addrs: &[A], out: &mut [Option<NextHop>]) {
        match self.popcnt {
            Some(popcnt) => popcnt.run(
                #[inline(always)]
                || self.walk_batch(addrs, out),
            ),
            None => self.walk_batch(addrs, out),
        }
    }

    /// The leaf or direct entry that decides `addr`, with the CPU's `popcnt` where it has one.
    #[inline(always)]
    fn entry(&self, addr: A) -> u32 {
        match self.popcnt {
            Some(popcnt) => popcnt.run(
                #[inline(always)]
                || self.walk(addr),
            ),
            None => self.walk(addr),
        }
    }

    /// Starts bringing the direct entry of `addr` into the cache (as `Ipv4Fib::prefetch`).
    #[inline(always)]
    pub fn prefetch(&self, addr: A) {
        if let Some(entry) = self.direct.get(addr.bits(0, A::DIRECT)) {
            entry.prefetch();
        }
    }

    /// Whether this table's lookups use the CPU's `popcnt` instruction.
    pub fn uses_popcnt(&self) -> bool {
        self.popcnt.is_some()
    }

    /// Where `addr`'s root leads, as a lookup's state: the entry, or a node or a leaf to read.
    #[inline(always)]
    fn root_state(&self, addr: A) -> u32 {
        self.direct.get(addr.bits(0, A::DIRECT)).map_or(0, |root| {
            root.next(addr.bits(A::DIRECT, STRIDE), &self.store.hops.entries)
        })
    }

    /// The leaf or direct entry that decides `addr`.
    #[inline(always)]
    fn walk(&self, addr: A) -> u32 {
        let mut entry = self.root_state(addr);
        let nodes = self.store.nodes.entries();
        let mut offset = A::DIRECT + STRIDE;
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

    #[inline(always)]
    fn walk_batch(&self, addrs: &[A], out: &mut [Option<NextHop>]) {
        for (addrs, out) in addrs.chunks(LOOKUP_STEP).zip(out.chunks_mut(LOOKUP_STEP)) {
            self.step(addrs, out);
        }
    }

    /// Looks up one step of at most [`LOOKUP_STEP`] destinations: their roots, then level by
    /// level only those that go on, then the leaves of those that end in the leaf array.
    #[inline(always)]
    fn step(&self, addrs: &[A], out: &mut [Option<NextHop>]) {
        let nodes = self.store.nodes.entries();
        let leaves = self.store.leaves.entries();
        // Per destination: the entry found, or a node still to visit (NODE), or a leaf still
        // to read (LEAF).
        let mut state = [0u32; LOOKUP_STEP];
        // Most lookups end in their root: the passes after it go through these lists of the
        // destinations that go on, not through all of them.
        let mut walking = Lanes::default();
        for &addr in addrs {
            self.prefetch(addr);
        }
        for (lane, (state, &addr)) in state.iter_mut().zip(addrs).enumerate() {
            *state = self.root_state(addr);
            walking.push_if(lane, *state & NODE != 0);
            // Rarely taken where most lookups end in their root.
            if *state & (NODE | LEAF) != 0 {
                Self::prefetch_next(nodes, leaves, *state);
            }
        }
        let mut offset = A::DIRECT + STRIDE;
        let mut deeper = Lanes::default();
        while !walking.is_empty() && offset < A::BITS {
            deeper.clear();
            for &lane in walking.lanes() {
                let lane = usize::from(lane);
                let (Some(state), Some(addr)) = (state.get_mut(lane), addrs.get(lane)) else {
                    continue;
                };
                let node = nodes
                    .get((*state & INDEX) as usize)
                    .copied()
                    .unwrap_or_default();
                *state = node.next(addr.bits(offset, STRIDE));
                deeper.push_if(lane, *state & NODE != 0);
                Self::prefetch_next(nodes, leaves, *state);
            }
            std::mem::swap(&mut walking, &mut deeper);
            offset += STRIDE;
        }
        // The leaves were prefetched when their lookups named them: read now, in one pass
        // (rather than through a list of the lanes that named one, kept at every level).
        for (result, &state) in out.iter_mut().zip(&state) {
            let entry = if state & LEAF != 0 {
                leaves
                    .get((state & INDEX) as usize)
                    .copied()
                    .unwrap_or_default()
            } else {
                state
            };
            *result = NextHop::from_entry(entry);
        }
    }

    /// Starts bringing in what a lookup's `state` names, a node or a leaf, without a branch: a
    /// walk's next step is a node or a leaf in any mix, and a mispredicted branch per step cost
    /// more than the prefetch it chose. Both lines a node may lie on: nodes are 24 bytes side
    /// by side, so one in four crosses a 64-byte line, and a prefetch of its start alone left
    /// the second line to miss when the lookup read it (32-byte nodes would never cross, but
    /// would take a third more memory).
    #[inline(always)]
    fn prefetch_next(nodes: &[Node], leaves: &[u32], state: u32) {
        let index = (state & INDEX) as usize;
        let node = nodes.as_ptr().wrapping_add(index).cast::<u8>();
        let leaf = leaves.as_ptr().wrapping_add(index).cast::<u8>();
        let at = if state & NODE != 0 { node } else { leaf };
        prefetch_address(at);
        prefetch_address(at.wrapping_add(size_of::<Node>() - 1));
    }
}

/// Some of a step's destinations, by their index in it, in order: one byte each, so that a
/// step's lists are cleared and kept in a few lines of the stack.
#[derive(Default)]
struct Lanes {
    lane: [u8; LOOKUP_STEP],
    len: usize,
}

const _: () = assert!(LOOKUP_STEP <= 256, "a lane's index must fit in a byte");

impl Lanes {
    /// Adds `lane` when `yes`, without a branch: a batch's destinations go on or stop in any
    /// mix without mispredicting.
    #[inline(always)]
    fn push_if(&mut self, lane: usize, yes: bool) {
        if let Some(slot) = self.lane.get_mut(self.len) {
            *slot = lane as u8;
        }
        self.len += usize::from(yes);
    }

    fn clear(&mut self) {
        self.len = 0;
    }

    fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn lanes(&self) -> &[u8] {
        self.lane.get(..self.len).unwrap_or_default()
    }
}
