//! Poptrie's compressed nodes and the arrays that hold them: how a subtree is built from the
//! routes under it, released, and walked.
//!
//! A node covers six address bits (64 slots). `vector` bit *v* says slot *v* holds a child; its
//! children sit side by side from `children`, so the child of slot *v* is
//! `children + popcount(vector & bits 0..=v) - 1`. The other slots are leaves, compressed: a
//! run of slots with the same next hop (children skipped) is stored once, `leafvec` marks the
//! slot where each run starts, and slot *v*'s leaf is
//! `leaves + popcount(leafvec & bits 0..=v) - 1`. A node is 24 bytes however sparse it is, against 256 entries (1 KiB) for a node of the
//! 16-8-8 trie (`fib/ipv6.rs`); that, and the leaf compression, is what keeps a full table in a
//! few MiB.

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
    /// A direct entry without a subtree: no children, no leaves, and the entry (a next hop or
    /// zero) in place of the leaves' index, which [`Node::next`] answers for every slot.
    pub(super) const fn value(entry: u32) -> Node {
        Node {
            vector: 0,
            leafvec: 0,
            leaves: entry,
            children: 0,
        }
    }

    /// Starts bringing this node into the cache: both lines it may lie on. Nodes are 24 bytes
    /// side by side, so one in four crosses a 64-byte line (at offsets 48 and 56 of a line),
    /// and a prefetch of its start alone left the second line to miss when the lookup read
    /// it, unoverlapped: 32-byte nodes would never cross, but would take a third more memory.
    #[inline(always)]
    pub(super) fn prefetch(&self) {
        prefetch(self);
        prefetch(&self.children);
    }

    /// Whether this node has children or leaves (a direct entry with a subtree under it),
    /// rather than being a [`Node::value`].
    pub(super) fn has_subtree(&self) -> bool {
        self.vector | self.leafvec != 0
    }

    /// Where slot `slot` (0..64) leads, as a lookup's state: `NODE` and the child's index, or
    /// `LEAF` and the leaf's index, or (a [`Node::value`]) the entry itself. One popcount over
    /// the slots up to and including `slot`, and no branch: a batch of lookups takes children
    /// and leaves in any mix without mispredicting.
    #[inline(always)]
    pub(super) fn next(&self, slot: usize) -> u32 {
        let through = (2u64 << slot).wrapping_sub(1);
        let child = self.vector >> slot & 1 != 0;
        let (bits, base) = if child {
            (self.vector, NODE | self.children)
        } else {
            (self.leafvec, LEAF | self.leaves)
        };
        let found = base
            .wrapping_add((bits & through).count_ones())
            .wrapping_sub(1);
        // A built node always has a child or a leaf: only a value has neither.
        if self.has_subtree() {
            found
        } else {
            self.leaves
        }
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

/// A route as a subtree build reads it: address, length, table entry (next hop bits).
pub(super) type Route<A> = (A, u8, u32);

/// The node and leaf arrays.
pub(super) struct Store {
    pub(super) nodes: Arena<Node>,
    pub(super) leaves: Arena<u32>,
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

        let mut node = Node {
            vector,
            ..Node::default()
        };
        let mut run = [0u32; 64];
        let mut runs = 0;
        let mut previous = None;
        for (slot, &value) in values.iter().enumerate() {
            if vector >> slot & 1 == 0 && previous != Some(value) {
                node.leafvec |= 1 << slot;
                if let Some(leaf) = run.get_mut(runs) {
                    *leaf = value;
                }
                runs += 1;
                previous = Some(value);
            }
        }
        if runs > 0 {
            let block = self.leaves.alloc(runs, headroom.map(|h| h.leaves))?;
            made.leaves.push(block);
            self.leaves
                .block_mut(block)
                .copy_from_slice(run.get(..runs).unwrap_or_default());
            node.leaves = block.base;
        }

        let children = vector.count_ones() as usize;
        if children > 0 {
            let block = self.nodes.alloc(children, headroom.map(|h| h.nodes))?;
            made.nodes.push(block);
            node.children = block.base;
            let slot_of = |route: &Route<A>| route.0.bits(offset, STRIDE);
            for (i, group) in deeper.chunk_by(|a, b| slot_of(a) == slot_of(b)).enumerate() {
                let inherited = group
                    .first()
                    .and_then(|route| values.get(slot_of(route)))
                    .copied()
                    .unwrap_or(default);
                let child = self.build(group, offset + STRIDE, inherited, headroom, made)?;
                if let Some(slot) = self.nodes.block_mut(block).get_mut(i) {
                    *slot = child;
                }
            }
        }
        Some(node)
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

    /// Releases the blocks of `node`'s leaves and children, and theirs (a [`Node::value`] has
    /// none).
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
        assert_eq!(Node::value(VALID | 7).next(0), VALID | 7);
        assert_eq!(Node::value(VALID | 7).next(63), VALID | 7);
        assert_eq!(Node::value(0).next(5), 0, "no route");
    }
}
