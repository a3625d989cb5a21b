//! Advice to the kernel about large lookup tables that the data plane reads at random.
//!
//! A table of tens of MiB read at random addresses (the IPv4 FIB's 64 MiB tbl24, the IPv6
//! trie's nodes) misses the TLB on almost every read when it is mapped with 4 KiB pages: 16 384
//! pages for tbl24, far more than the TLB holds, and under nested paging each miss is a
//! two-dimensional page walk. Backed by 2 MiB transparent huge pages the same table is 32
//! entries. The kernel here gives huge pages only to ranges that ask for them (THP "madvise"
//! mode), so a table asks with [`advise_huge_pages`] right after its allocation, before its
//! pages are first touched.

/// The transparent huge page size on x86_64.
const HUGE_PAGE: usize = 2 << 20;

/// Asks the kernel to back the 2 MiB-aligned part of `table`'s memory with transparent huge
/// pages from its next page fault on. Returns whether the kernel took the advice (false for a
/// table smaller than a huge page, or where THP is disabled); the table works the same either
/// way, only faster with it.
pub fn advise_huge_pages<T>(table: &[T]) -> bool {
    let start = table.as_ptr() as usize;
    let end = start + size_of_val(table);
    let first = start.next_multiple_of(HUGE_PAGE);
    let last = end / HUGE_PAGE * HUGE_PAGE;
    if last <= first {
        return false;
    }
    // SAFETY: MADV_HUGEPAGE only marks the range as eligible for transparent huge pages; it
    // changes neither the contents, the mapping nor the protection of the memory, so every
    // reference into `table` stays valid. `first..last` lies inside `table` (its bounds rounded
    // inward to 2 MiB boundaries, so page-aligned as madvise requires).
    let result = unsafe {
        libc::madvise(
            first as *mut libc::c_void,
            last - first,
            libc::MADV_HUGEPAGE,
        )
    };
    result == 0
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
}
