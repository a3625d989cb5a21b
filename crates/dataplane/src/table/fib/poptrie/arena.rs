//! Contiguous blocks of 1..=64 entries in one array that never moves: the children of a Poptrie
//! node, or its leaves.
//!
//! A Poptrie node finds a child or a leaf by adding a popcount to one base index, so a node's
//! children (and its leaves) must sit side by side. Blocks are handed out from the end of a
//! [`ReservedTable`] (reserved once, so it keeps its huge pages and never moves under a lookup)
//! and, once freed, kept on a free list per size and handed out again at that size: a subtree
//! rebuilt for an update mostly needs the block sizes it had before. The limit counts entries
//! in use; the reservation is twice the limit so that a removal, which never needs more entries
//! than it frees, still finds room when the free lists are fragmented.

use wirespeed_packet::memory::ReservedTable;

/// The most entries one block holds (a node's 64 slots).
pub(super) const MAX_BLOCK: usize = 64;

/// A block of entries: its first index and its length.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Block {
    pub(super) base: u32,
    pub(super) len: u8,
}

/// An array of blocks of `T` with free lists per block size.
pub(super) struct Arena<T: Copy> {
    table: ReservedTable<T>,
    /// `free[n]`: the first indices of free blocks of `n` entries.
    free: Vec<Vec<u32>>,
    in_use: usize,
    limit: u32,
}

impl<T: Copy + Default> Arena<T> {
    /// An empty arena that holds at most `limit` entries in use (fewer when the system will not
    /// reserve twice that many: the limit halves until a reservation holds).
    pub(super) fn new(limit: u32) -> Self {
        let mut limit = limit;
        loop {
            match ReservedTable::new(2 * limit as usize + MAX_BLOCK) {
                Some(table) => {
                    return Arena {
                        table,
                        free: vec![Vec::new(); MAX_BLOCK + 1],
                        in_use: 0,
                        limit,
                    };
                }
                None if limit > 0 => limit /= 2,
                None => {
                    panic!("cannot reserve a lookup array of {MAX_BLOCK} entries: out of memory")
                }
            }
        }
    }

    /// A block of `len` (1..=64) entries, each `T::default()`; `None` when the block would take
    /// the entries in use past the limit plus `headroom` (entries about to be released; `None`:
    /// no limit), or when the reservation is full.
    pub(super) fn alloc(&mut self, len: usize, headroom: Option<usize>) -> Option<Block> {
        let over = headroom.is_some_and(|extra| self.in_use + len > self.limit as usize + extra);
        if over || len == 0 || len > MAX_BLOCK {
            return None;
        }
        let base = match self.free.get_mut(len).and_then(Vec::pop) {
            Some(base) => {
                let start = base as usize;
                self.table
                    .get_mut(start..start + len)
                    .unwrap_or_default()
                    .fill(T::default());
                base
            }
            None => {
                let base = u32::try_from(self.table.len()).ok()?;
                if !self.table.grow(len, T::default()) {
                    return None;
                }
                base
            }
        };
        self.in_use += len;
        Some(Block {
            base,
            len: len as u8,
        })
    }

    /// Returns `block` for reuse.
    pub(super) fn release(&mut self, block: Block) {
        if let Some(list) = self.free.get_mut(usize::from(block.len)) {
            list.push(block.base);
            self.in_use -= usize::from(block.len);
        }
    }

    /// The entries of `block`.
    pub(super) fn block_mut(&mut self, block: Block) -> &mut [T] {
        let start = block.base as usize;
        self.table
            .get_mut(start..start + usize::from(block.len))
            .unwrap_or_default()
    }

    /// Every entry ever handed out (what lookups may read), in use or free.
    pub(super) fn entries(&self) -> &[T] {
        &self.table
    }

    /// Entries in blocks handed out and not released.
    pub(super) fn in_use(&self) -> usize {
        self.in_use
    }

    /// The most entries in use the arena allows.
    pub(super) fn limit(&self) -> u32 {
        self.limit
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_are_reused_by_size_and_the_limit_holds() {
        let mut arena = Arena::<u32>::new(100);
        let a = arena.alloc(64, Some(0)).unwrap();
        let b = arena.alloc(30, Some(0)).unwrap();
        assert_eq!((a.base, b.base), (0, 64));
        assert_eq!(arena.alloc(7, Some(0)), None, "past the limit");
        arena.block_mut(b).fill(9);
        arena.release(b);
        assert_eq!(arena.in_use(), 64);
        let c = arena.alloc(30, Some(0)).unwrap();
        assert_eq!(c.base, 64, "same size, same block");
        assert!(
            arena.block_mut(c).iter().all(|&x| x == 0),
            "handed out cleared"
        );
        let d = arena.alloc(7, None).unwrap();
        assert_eq!(d.base, 94, "past the limit when not enforced");
        assert_eq!(arena.entries().len(), 101);
        assert_eq!(arena.alloc(0, None), None);
        assert_eq!(arena.alloc(65, None), None);
    }
}
