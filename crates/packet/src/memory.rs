//! Advice to the kernel about large lookup tables that the data plane reads at random.
//!
//! A table of tens of MiB read at random addresses (the IPv4 FIB's 64 MiB tbl24, the IPv6
//! trie's nodes) misses the TLB on almost every read when it is mapped with 4 KiB pages: 16 384
//! pages for tbl24, far more than the TLB holds, and under nested paging each miss is a
//! two-dimensional page walk. Backed by 2 MiB transparent huge pages the same table is 32
//! entries. The kernel here gives huge pages only to ranges that ask for them (THP "madvise"
//! mode), so a table of fixed size asks with [`advise_huge_pages`] right after its allocation,
//! before its pages are first touched; a table that grows is a [`ReservedTable`], which never
//! moves and so keeps them.

use std::ptr::NonNull;

/// The transparent huge page size on x86_64.
const HUGE_PAGE: usize = 2 << 20;

/// Asks the kernel to back the 2 MiB-aligned part of `table`'s memory with transparent huge
/// pages from its next page fault on. Returns whether the kernel took the advice (false for a
/// table smaller than a huge page, or where THP is disabled); the table works the same either
/// way, only faster with it.
pub fn advise_huge_pages<T>(table: &[T]) -> bool {
    advise_range(table.as_ptr() as usize, size_of_val(table))
}

/// [`advise_huge_pages`] for the `bytes` bytes from address `start`, which the caller owns.
fn advise_range(start: usize, bytes: usize) -> bool {
    let first = start.next_multiple_of(HUGE_PAGE);
    let last = (start + bytes) / HUGE_PAGE * HUGE_PAGE;
    if last <= first {
        return false;
    }
    // SAFETY: MADV_HUGEPAGE only marks the range as eligible for transparent huge pages; it
    // changes neither the contents, the mapping nor the protection of the memory, so every
    // reference into it stays valid. `first..last` lies inside the caller's memory (its bounds
    // rounded inward to 2 MiB boundaries, so page-aligned as madvise requires).
    let result = unsafe {
        libc::madvise(
            first as *mut libc::c_void,
            last - first,
            libc::MADV_HUGEPAGE,
        )
    };
    result == 0
}

/// `bytes` of fresh zeroed memory, readable and writable, mapped privately with `flags` added
/// (`MAP_POPULATE` to fault it in now, `MAP_NORESERVE` to count it only when touched). The
/// caller owns the mapping and unmaps it with `munmap(pointer, bytes)`.
pub fn map_anonymous(bytes: usize, flags: libc::c_int) -> std::io::Result<NonNull<libc::c_void>> {
    // SAFETY: an anonymous private mapping at an address of the kernel's choosing touches no
    // existing memory; the result is checked before use.
    let mapping = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            bytes,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | flags,
            -1,
            0,
        )
    };
    if mapping == libc::MAP_FAILED {
        return Err(std::io::Error::last_os_error());
    }
    NonNull::new(mapping).ok_or_else(|| std::io::Error::other("mmap returned null"))
}

/// A table that grows, whose address space, enough for the most entries it may ever hold, is
/// reserved once when it is made: it never moves. Growing it copies nothing and takes only the
/// pages grown into; and the whole reservation is advised huge pages, which it keeps. (A `Vec`
/// that grows is moved by `realloc`, and at its new address, aligned differently, the kernel
/// splits the huge pages back into 4 KiB ones: the IPv6 trie's nodes were all in small pages.)
/// The reservation takes no memory until touched (`MAP_NORESERVE`: not counted against the
/// overcommit limit either), so it may be far larger than the table is expected to get.
pub struct ReservedTable<T: Copy> {
    /// The first entry: the reservation's first 2 MiB boundary, so that huge pages cover the
    /// table from its start.
    entries: NonNull<T>,
    len: usize,
    capacity: usize,
    /// The whole mapping, for `munmap`.
    mapping: *mut libc::c_void,
    mapping_bytes: usize,
}

// SAFETY: the table owns its memory as a `Vec<T>` does (no other pointer to the mapping
// exists), so it may move to, or be shared with, another thread when `T` may.
unsafe impl<T: Copy + Send> Send for ReservedTable<T> {}
// SAFETY: as above; `&ReservedTable<T>` hands out only `&[T]`.
unsafe impl<T: Copy + Sync> Sync for ReservedTable<T> {}

impl<T: Copy> ReservedTable<T> {
    /// An empty table that may grow to `capacity` entries; `None` when the address space cannot
    /// be reserved (or `T` takes no memory).
    pub fn new(capacity: usize) -> Option<Self> {
        let bytes = capacity.checked_mul(size_of::<T>())?;
        if size_of::<T>() == 0 {
            return None;
        }
        // One huge page more, so that the table can start on a 2 MiB boundary.
        let mapping_bytes = bytes.checked_add(HUGE_PAGE)?;
        let mapping = map_anonymous(mapping_bytes, libc::MAP_NORESERVE)
            .ok()?
            .as_ptr();
        let start = (mapping as usize).next_multiple_of(HUGE_PAGE);
        advise_range(start, bytes);
        // `start` is inside the mapping (at most 2 MiB past its page-aligned start), nonzero,
        // and aligned for any `T` (2 MiB is a multiple of every alignment up to a page).
        let entries = NonNull::new(start as *mut T)?;
        Some(Self {
            entries,
            len: 0,
            capacity,
            mapping,
            mapping_bytes,
        })
    }

    /// Appends `count` copies of `value`; false, and nothing appended, when that would pass the
    /// capacity.
    pub fn grow(&mut self, count: usize, value: T) -> bool {
        let Some(len) = self.len.checked_add(count).filter(|&l| l <= self.capacity) else {
            return false;
        };
        for i in self.len..len {
            // SAFETY: `i < len <= capacity`, so the entry lies inside the reservation, which is
            // readable and writable memory this table alone owns; `write` does not read the
            // (zero-filled) old contents, so it is sound for any `T`.
            unsafe { self.entries.as_ptr().add(i).write(value) };
        }
        self.len = len;
        true
    }

    /// Entries the table may hold.
    pub fn capacity(&self) -> usize {
        self.capacity
    }
}

impl<T: Copy> std::ops::Deref for ReservedTable<T> {
    type Target = [T];

    fn deref(&self) -> &[T] {
        // SAFETY: the first `len` entries were written by `grow`, lie inside the reservation,
        // and are borrowed no longer than `self`.
        unsafe { std::slice::from_raw_parts(self.entries.as_ptr(), self.len) }
    }
}

impl<T: Copy> std::ops::DerefMut for ReservedTable<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        // SAFETY: as in `deref`, and `&mut self` makes the borrow exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.entries.as_ptr(), self.len) }
    }
}

impl<T: Copy> Drop for ReservedTable<T> {
    fn drop(&mut self) {
        // SAFETY: `mapping` and `mapping_bytes` are exactly what `mmap` returned and was asked
        // for, unmapped once here; no reference into the table outlives it.
        unsafe { libc::munmap(self.mapping, self.mapping_bytes) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_tables_are_left_alone_and_large_ones_keep_their_contents() {
        assert!(!advise_huge_pages(&[0u32; 16]));
        let mut table = vec![0u32; 4 << 20];
        // Where THP is compiled out the advice is refused; the contents stay either way.
        let _ = advise_huge_pages(&table);
        table[12345] = 7;
        assert_eq!(table.iter().map(|&x| u64::from(x)).sum::<u64>(), 7);
    }

    #[test]
    fn a_reserved_table_grows_in_place_up_to_its_capacity() {
        // 1 GiB of address space, of which a few MiB are touched.
        let mut table = ReservedTable::<u32>::new(1 << 28).expect("reserve");
        assert_eq!((table.len(), table.capacity()), (0, 1 << 28));
        assert!(table.grow(1000, 5));
        let start = table.as_ptr();
        assert_eq!(start as usize % HUGE_PAGE, 0);
        table[999] = 6;
        assert!(table.grow(3 << 20, 9));
        assert_eq!(table.as_ptr(), start, "the table moved");
        assert_eq!(table.len(), 1000 + (3 << 20));
        assert_eq!(
            (table[0], table[999], table[1000], table[table.len() - 1]),
            (5, 6, 9, 9)
        );
        assert!(!table.grow(1 << 28, 0), "past the capacity");
        assert_eq!(table.len(), 1000 + (3 << 20));
        let mut small = ReservedTable::<u16>::new(1000).expect("reserve");
        assert!(small.grow(999, 1));
        assert!(!small.grow(2, 2));
        assert!(small.grow(1, 3));
        assert!(!small.grow(1, 4));
        assert_eq!((small.len(), small[998], small[999]), (1000, 1, 3));
        let mut none = ReservedTable::<u32>::new(0).expect("an empty reservation");
        assert!(!none.grow(1, 1));
        assert!(none.grow(0, 1));
        assert!(none.is_empty());
    }

    #[test]
    fn a_reservation_that_cannot_be_made_is_none() {
        assert!(ReservedTable::<u64>::new(usize::MAX / 4).is_none());
        assert!(ReservedTable::<()>::new(10).is_none());
    }
}
