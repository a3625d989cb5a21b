//! Poptrie's compressed nodes and the arrays that hold them: how a subtree is built from the
//! routes under it, released, and walked.
//!
//! A node covers six address bits (64 slots). `vector` bit *v* says slot *v* holds a child; its
//! children sit side by side from `children`, so the child of slot *v* is
//! `children + popcount(vector & bits 0..=v) - 1`. The other slots are leaves, compressed: a
//! run of slots with the same next hop (children skipped) is stored once, `leafvec` marks the
//! slot where each run starts, and slot *v*'s leaf is
//! `leaves + popcount(leafvec & bits 0..=v) - 1`. A node is 24 bytes however sparse it is,
//! against 256 entries (1 KiB) for a node of the 16-8-8 trie (`fib/ipv6.rs`); that, and the leaf
//! compression, is what keeps a full table in a few MiB. The root under a direct entry is a
//! [`Root`]: the same node with its leaves inside it, where up to [`INLINE_BYTES`] fit.

use std::collections::HashMap;

use wirespeed_packet::cpu::prefetch;

use super::arena::{Arena, Block};
use super::{Key, LEAF, NODE};

/// Address bits a node covers.
pub(super) const STRIDE: u8 = 6;

/// A compressed 64-ary node (Asai and Ohara, Poptrie, SIGCOMM 2015, §3.2-3.3).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub(super) struct Node {
    /// Bit *v*: slot *v* is a child.
    pub(super) vector: u64,
    /// Bit *v*: a run of equal leaves starts at slot *v*.
    pub(super) leafvec: u64,
    /// Index of the node's first leaf.
    pub(super) leaves: u32,
    /// Index of the node's first child.
    pub(super) children: u32,
}

impl Node {
    /// Where slot `slot` (0..64) leads, as a lookup's state: `NODE` and the child's index, or
    /// `LEAF` and the leaf's index. One popcount over the slots up to and including `slot`, and
    /// no branch: a batch of lookups takes children and leaves in any mix without
    /// mispredicting.
    #[inline(always)]
    pub(super) fn next(&self, slot: usize) -> u32 {
        let child = self.vector >> slot & 1 != 0;
        let (bits, base) = if child {
            (self.vector, NODE | self.children)
        } else {
            (self.leafvec, LEAF | self.leaves)
        };
        base.wrapping_add(rank(bits, slot))
    }

    fn child_block(&self) -> Option<Block> {
        let len = self.vector.count_ones() as u8;
        (len > 0).then_some(Block {
            base: self.children,
            len,
        })
    }

    fn leaf_block(&self) -> Option<Block> {
        let len = self.leafvec.count_ones() as u8;
        (len > 0).then_some(Block {
            base: self.leaves,
            len,
        })
    }
}

/// Bytes of a [`Root`]'s inline leaves: 24 one-byte ids of [`Hops`] (tables with up to 256
/// distinct entries, as most are), else 12 two-byte ids. A /18 block of a 1M-route BGP-like
/// IPv4 table has four or five routes on average, so about nine runs: with 64 next hops, 95 %
/// of the lookups of a routed trace find their leaf in the root, with 4096 still 63 %
/// (docs/benchmarks/journal.md, session twenty).
pub(super) const INLINE_BYTES: usize = 24;
/// [`Root::leaves`] of a root whose leaves are inline one-byte ids.
const INLINE_U8: u32 = u32::MAX;
/// [`Root::leaves`] of a root whose leaves are inline two-byte ids.
const INLINE_U16: u32 = u32::MAX - 1;

/// The root of a direct entry's subtree: a node with its leaves inside it, in 48 bytes.
///
/// A lookup of a BGP-like table mostly ends one level below the direct array (a /24 is 18 + 6
/// bits): reading the root and then its leaf in the leaf array was two dependent cache misses
/// where DIR-24-8 takes one. With the leaves inline it is one (two adjacent lines where a root
/// crosses one, prefetched together). A root whose runs do not fit, or name an entry [`Hops`]
/// has no id for, keeps them in the leaf array as a node does. 48 bytes rather than a whole
/// 64-byte line keep the direct array at 12 MiB (16 MiB would take a 1M-route table past the
/// 16 MiB the table must fit in), and were as fast where measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
pub(super) struct Root {
    /// Bit *v*: slot *v* is a child.
    pub(super) vector: u64,
    /// Bit *v*: a run of equal leaves starts at slot *v*.
    pub(super) leafvec: u64,
    /// Index of the first child.
    pub(super) children: u32,
    /// Where the leaves are: [`INLINE_U8`] or [`INLINE_U16`] (in `inline`), else the index of
    /// the first in the leaf array; in a [`Root::value`], the entry itself.
    leaves: u32,
    /// The runs' entries as ids of [`Hops`], in slot order, one or two bytes each (native
    /// byte order).
    inline: [u8; INLINE_BYTES],
}

impl Default for Root {
    fn default() -> Self {
        Root::value(0)
    }
}

impl Root {
    /// A direct entry without a subtree: no children, no leaves, and the table entry (a next
    /// hop, or zero: no route) in place of the leaves' index, which [`Root::next`] answers for
    /// every slot.
    pub(super) const fn value(entry: u32) -> Root {
        Root {
            vector: 0,
            leafvec: 0,
            children: 0,
            leaves: entry,
            inline: [0; INLINE_BYTES],
        }
    }

    /// Whether this root has children or leaves, rather than being a [`Root::value`].
    pub(super) fn has_subtree(&self) -> bool {
        self.vector | self.leafvec != 0
    }

    /// Where slot `slot` (0..64) leads, as a lookup's state ([`Node::next`]); an inline leaf
    /// is the entry itself, found in `hops` (a few hundred bytes, in the L1 cache).
    #[inline(always)]
    pub(super) fn next(&self, slot: usize, hops: &[u32]) -> u32 {
        if self.vector >> slot & 1 != 0 {
            return (NODE | self.children).wrapping_add(rank(self.vector, slot));
        }
        // Not a child, and no leaf either: a value (a root whose slots are all children
        // never gets here).
        if self.leafvec == 0 {
            return self.leaves;
        }
        let rank = rank(self.leafvec, slot) as usize;
        let id = match self.leaves {
            INLINE_U8 => self.inline.get(rank).copied().map(usize::from),
            INLINE_U16 => self
                .inline
                .get(2 * rank..2 * rank + 2)
                .map(|id| usize::from(u16::from_ne_bytes([id[0], id[1]]))),
            spilled => return (LEAF | spilled).wrapping_add(rank as u32),
        };
        id.and_then(|id| hops.get(id)).copied().unwrap_or_default()
    }

    /// Starts bringing this root into the cache: both lines it may lie on (one root in two
    /// crosses a 64-byte line).
    #[inline(always)]
    pub(super) fn prefetch(&self) {
        prefetch(self);
        prefetch(&self.inline[INLINE_BYTES - 1]);
    }

    /// The root as a node that names the blocks it holds in the arenas (inline leaves and a
    /// value hold none), for [`Store::size`] and [`Store::release`].
    pub(super) fn blocks(&self) -> Node {
        let spilled = self.leaves < INLINE_U16 && self.leafvec != 0;
        Node {
            vector: self.vector,
            leafvec: if spilled { self.leafvec } else { 0 },
            leaves: if spilled { self.leaves } else { 0 },
            children: self.children,
        }
    }
}

/// The entries inline leaves name, each stored once and named by a one- or two-byte id: a
/// table has a few hundred next hops, not millions. Ids are never reused, so a lookup between
/// updates always finds what its root meant; once all 65 536 are taken (a table whose routes
/// name that many distinct next hops over its life), new roots keep their leaves in the leaf
/// array.
#[derive(Default)]
pub(super) struct Hops {
    ids: HashMap<u32, u16>,
    /// Entry of each id.
    pub(super) entries: Vec<u32>,
}

impl Hops {
    /// The id of `entry`, given one if it has none; `None` when every id is taken.
    fn id(&mut self, entry: u32) -> Option<u16> {
        if let Some(&id) = self.ids.get(&entry) {
            return Some(id);
        }
        let id = u16::try_from(self.entries.len()).ok()?;
        self.entries.push(entry);
        self.ids.insert(entry, id);
        Some(id)
    }
}

/// A node's 64 slots laid out from the routes under it (sorted by address then length): the
/// entry of each, which are children, where the runs of equal leaves start, and the routes
/// that go further down.
struct Slots<A> {
    values: [u32; 64],
    vector: u64,
    leafvec: u64,
    run: [u32; 64],
    runs: usize,
    deeper: Vec<Route<A>>,
}

impl<A: Key> Slots<A> {
    fn lay_out(routes: &[Route<A>], offset: u8, default: u32) -> Self {
        // Sorted by address then length, a route comes after every route that contains it,
        // so writing them in order leaves each slot with its longest match.
        let mut values = [default; 64];
        let mut vector = 0u64;
        let mut deeper = Vec::new();
        for &(addr, len, entry) in routes {
            let slot = addr.bits(offset, STRIDE);
            if len <= offset + STRIDE {
                let count = 1usize << (offset + STRIDE - len);
                values
                    .get_mut(slot..slot + count)
                    .unwrap_or_default()
                    .fill(entry);
            } else {
                vector |= 1 << slot;
                deeper.push((addr, len, entry));
            }
        }
        let mut leafvec = 0u64;
        let mut run = [0u32; 64];
        let mut runs = 0;
        let mut previous = None;
        for (slot, &value) in values.iter().enumerate() {
            if vector >> slot & 1 == 0 && previous != Some(value) {
                leafvec |= 1 << slot;
                if let Some(leaf) = run.get_mut(runs) {
                    *leaf = value;
                }
                runs += 1;
                previous = Some(value);
            }
        }
        Slots {
            values,
            vector,
            leafvec,
            run,
            runs,
            deeper,
        }
    }

    /// The entry of each run of equal leaves, in slot order.
    fn runs(&self) -> &[u32] {
        self.run.get(..self.runs).unwrap_or_default()
    }
}

/// Which of the blocks `bits` marks (children, or runs of leaves) slot `slot` is in, from 0: one
/// popcount over the slots up to and including it.
#[inline(always)]
fn rank(bits: u64, slot: usize) -> u32 {
    let through = (2u64 << slot).wrapping_sub(1);
    (bits & through).count_ones().wrapping_sub(1)
}

/// A route as a subtree build reads it: address, length, table entry (next hop bits).
pub(super) type Route<A> = (A, u8, u32);

/// The root, node and leaf arrays, and the entries inline leaves name.
pub(super) struct Store {
    pub(super) nodes: Arena<Node>,
    pub(super) leaves: Arena<u32>,
    pub(super) hops: Hops,
}

/// Entries a build may take beyond the arenas' limits: those of the subtree it replaces, which
/// are released once it is in place. `None` where no limit applies.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Headroom {
    pub(super) nodes: usize,
    pub(super) leaves: usize,
}

/// Blocks handed out while a subtree was built: released again if the build fails.
#[derive(Default)]
pub(super) struct Made {
    nodes: Vec<Block>,
    leaves: Vec<Block>,
}

impl Store {
    /// Releases every block of `made` (a build that failed half-way).
    pub(super) fn undo(&mut self, made: Made) {
        for block in made.nodes {
            self.nodes.release(block);
        }
        for block in made.leaves {
            self.leaves.release(block);
        }
    }

    /// The node for `routes` (sorted by address then length, every one inside the node's block
    /// and longer than `offset`) at `offset`, its leaves and children written to blocks of their
    /// own. `default`: the entry of slots no route covers. `headroom`: how far past the arenas'
    /// limits it may go (see [`Arena::alloc`]). `None` when an arena is full; `made` then lists
    /// what to [`Store::undo`].
    pub(super) fn build<A: Key>(
        &mut self,
        routes: &[Route<A>],
        offset: u8,
        default: u32,
        headroom: Option<Headroom>,
        made: &mut Made,
    ) -> Option<Node> {
        let slots = Slots::lay_out(routes, offset, default);
        let leaves = self.spill(&slots, headroom, made)?;
        let children = self.build_children(&slots, offset, headroom, made)?;
        Some(Node {
            vector: slots.vector,
            leafvec: slots.leafvec,
            leaves,
            children,
        })
    }

    /// The root of a direct entry's subtree, as [`Store::build`] builds a node at
    /// [`Key::DIRECT`], its leaves inline where they fit (see [`Root`]).
    pub(super) fn build_root<A: Key>(
        &mut self,
        routes: &[Route<A>],
        default: u32,
        headroom: Option<Headroom>,
        made: &mut Made,
    ) -> Option<Root> {
        let slots = Slots::lay_out(routes, A::DIRECT, default);
        let mut root = Root {
            vector: slots.vector,
            leafvec: slots.leafvec,
            leaves: INLINE_U8,
            ..Root::default()
        };
        let ids: Option<Vec<u16>> = match slots.runs() {
            runs if runs.len() <= INLINE_BYTES => runs.iter().map(|&e| self.hops.id(e)).collect(),
            _ => None,
        };
        match ids {
            Some(ids) if ids.iter().all(|&id| id <= u16::from(u8::MAX)) => {
                for (byte, id) in root.inline.iter_mut().zip(ids) {
                    *byte = id as u8;
                }
            }
            Some(ids) if 2 * ids.len() <= INLINE_BYTES => {
                root.leaves = INLINE_U16;
                for (bytes, id) in root.inline.chunks_exact_mut(2).zip(ids) {
                    bytes.copy_from_slice(&id.to_ne_bytes());
                }
            }
            _ => root.leaves = self.spill(&slots, headroom, made)?,
        }
        root.children = self.build_children(&slots, A::DIRECT, headroom, made)?;
        Some(root)
    }

    /// Writes the runs of `slots` to a block of the leaf arena; its first index (0 for none).
    fn spill<A: Key>(
        &mut self,
        slots: &Slots<A>,
        headroom: Option<Headroom>,
        made: &mut Made,
    ) -> Option<u32> {
        let runs = slots.runs();
        if runs.is_empty() {
            return Some(0);
        }
        let block = self.leaves.alloc(runs.len(), headroom.map(|h| h.leaves))?;
        made.leaves.push(block);
        self.leaves.block_mut(block).copy_from_slice(runs);
        Some(block.base)
    }

    /// Builds the children of `slots` (at `offset`) into one block of the node arena; its first
    /// index (0 for none).
    fn build_children<A: Key>(
        &mut self,
        slots: &Slots<A>,
        offset: u8,
        headroom: Option<Headroom>,
        made: &mut Made,
    ) -> Option<u32> {
        let children = slots.vector.count_ones() as usize;
        if children == 0 {
            return Some(0);
        }
        let block = self.nodes.alloc(children, headroom.map(|h| h.nodes))?;
        made.nodes.push(block);
        let slot_of = |route: &Route<A>| route.0.bits(offset, STRIDE);
        for (i, group) in slots
            .deeper
            .chunk_by(|a, b| slot_of(a) == slot_of(b))
            .enumerate()
        {
            let inherited = group
                .first()
                .and_then(|route| slots.values.get(slot_of(route)))
                .copied()
                .unwrap_or_default();
            let child = self.build(group, offset + STRIDE, inherited, headroom, made)?;
            if let Some(slot) = self.nodes.block_mut(block).get_mut(i) {
                *slot = child;
            }
        }
        Some(block.base)
    }

    /// The nodes and leaves held by the blocks under `node` (not counting `node` itself).
    pub(super) fn size(&self, node: &Node) -> Headroom {
        let mut size = Headroom {
            nodes: 0,
            leaves: node.leafvec.count_ones() as usize,
        };
        let mut stack: Vec<u32> = node
            .child_block()
            .map(|b| (b.base..b.base + u32::from(b.len)).collect())
            .unwrap_or_default();
        while let Some(index) = stack.pop() {
            let Some(node) = self.nodes.entries().get(index as usize) else {
                continue;
            };
            size.nodes += 1;
            size.leaves += node.leafvec.count_ones() as usize;
            if let Some(block) = node.child_block() {
                stack.extend(block.base..block.base + u32::from(block.len));
            }
        }
        size
    }

    /// Releases the blocks of `node`'s leaves and children, and theirs.
    pub(super) fn release(&mut self, node: Node) {
        if let Some(block) = node.leaf_block() {
            self.leaves.release(block);
        }
        if let Some(block) = node.child_block() {
            for child in block.base..block.base + u32::from(block.len) {
                if let Some(&child) = self.nodes.entries().get(child as usize) {
                    self.release(child);
                }
            }
            self.nodes.release(block);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::fib::VALID;

    #[test]
    fn a_node_finds_children_and_compressed_leaves_by_popcount() {
        // Slots 3 and 63 are children; leaves: 0..3 = A, 4..10 = B, 10..63 = A.
        let node = Node {
            vector: 1 << 3 | 1 << 63,
            leafvec: 1 | 1 << 4 | 1 << 10,
            leaves: 100,
            children: 200,
        };
        assert_eq!(node.next(0), LEAF | 100);
        assert_eq!(node.next(2), LEAF | 100);
        assert_eq!(node.next(3), NODE | 200);
        assert_eq!(node.next(4), LEAF | 101);
        assert_eq!(node.next(9), LEAF | 101);
        assert_eq!(node.next(10), LEAF | 102);
        assert_eq!(node.next(62), LEAF | 102);
        assert_eq!(node.next(63), NODE | 201);
        assert_eq!(size_of::<Node>(), 24);
    }

    #[test]
    fn a_root_answers_inline_leaves_with_their_entries_and_spills_what_does_not_fit() {
        let mut store = Store {
            nodes: Arena::new(16),
            leaves: Arena::new(128),
            hops: Hops::default(),
        };
        let mut made = Made::default();
        // Under 10.0.0.0/18: 10.0.4.0/24 -> 7 and 10.0.9.128/25 -> 8, the rest 5.
        let a = |b: [u8; 4]| u32::from_be_bytes(b);
        let routes = [
            (a([10, 0, 4, 0]), 24, VALID | 7),
            (a([10, 0, 9, 128]), 25, VALID | 8),
        ];
        let root = store
            .build_root(&routes, VALID | 5, None, &mut made)
            .unwrap();
        let hops = &store.hops.entries;
        assert_eq!(root.next(0, hops), VALID | 5);
        assert_eq!(root.next(4, hops), VALID | 7);
        assert_eq!(root.next(5, hops), VALID | 5);
        assert_eq!(root.next(9, hops), NODE | root.children);
        assert_eq!(root.next(63, hops), VALID | 5);
        let under = store.size(&root.blocks());
        assert_eq!(
            (under.nodes, under.leaves),
            (1, 2),
            "the root's three runs inline, its child's two (5, 8) in the leaf array"
        );
        assert_eq!(size_of::<Root>(), 48);
        assert_eq!(align_of::<Root>(), 8);

        // 32 routes make 64 runs: more than fit, so they go to the leaf array.
        let many: Vec<Route<u32>> = (0..32u32)
            .map(|i| (a([10, 0, 2 * i as u8, 0]), 24, VALID | i))
            .collect();
        let root = store.build_root(&many, 0, None, &mut made).unwrap();
        assert_eq!(store.leaves.in_use(), 2 + 64);
        assert_eq!(root.next(0, &store.hops.entries) & LEAF, LEAF);
        assert_eq!(store.size(&root.blocks()).leaves, 64);
        store.release(root.blocks());
        assert_eq!(store.leaves.in_use(), 2);

        // Entries past the 256 one-byte ids: two-byte ids, up to 12 runs inline.
        for entry in 0..300 {
            store.hops.id(VALID | (1000 + entry));
        }
        let wide = [(a([10, 0, 4, 0]), 24, VALID | 1299)];
        let root = store
            .build_root(&wide, VALID | 1001, None, &mut made)
            .unwrap();
        assert_eq!(root.leaves, INLINE_U16);
        assert_eq!(root.next(3, &store.hops.entries), VALID | 1001);
        assert_eq!(root.next(4, &store.hops.entries), VALID | 1299);
        assert_eq!(root.next(5, &store.hops.entries), VALID | 1001);
        assert_eq!(store.leaves.in_use(), 2, "nothing spilled");
    }
}
