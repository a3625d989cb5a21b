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
use std::sync::atomic::{AtomicU32, Ordering};

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

/// `bytes` of fresh zeroed memory, readable and writable, mapped privately with `flags` added.
/// The caller owns the mapping and unmaps it with `munmap(pointer, bytes)`.
fn map_anonymous(bytes: usize, flags: libc::c_int) -> std::io::Result<NonNull<libc::c_void>> {
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

/// Fresh zeroed memory, readable and writable, that starts on a 2 MiB boundary and is advised
/// huge pages over whole huge pages (its length rounded up to 2 MiB, so that even a region
/// smaller than one is backed by one): an anonymous mapping up to two huge pages larger than
/// asked, unmapped on drop. Where THP is off the region works the same in 4 KiB pages.
pub struct HugeRegion {
    start: NonNull<u8>,
    bytes: usize,
    /// The whole mapping, for `munmap`.
    mapping: NonNull<libc::c_void>,
    mapping_bytes: usize,
}

// SAFETY: the region owns its mapping (no other pointer to it exists but those its owner
// derives from `start`), so it may move to, or be shared with, another thread.
unsafe impl Send for HugeRegion {}
// SAFETY: as above; a shared `HugeRegion` hands out only its address.
unsafe impl Sync for HugeRegion {}

impl HugeRegion {
    /// A region of `bytes` bytes. With `populate`, every page is faulted in now (so that no
    /// later access faults: the frame pool, whose pages the data plane and the kernel touch);
    /// without, the mapping is `MAP_NORESERVE` and takes memory only as it is touched (a table
    /// reserved for its largest size).
    pub fn new(bytes: usize, populate: bool) -> std::io::Result<Self> {
        let too_large =
            || std::io::Error::other(format!("{bytes} bytes do not fit the address space"));
        let advised = bytes
            .checked_next_multiple_of(HUGE_PAGE)
            .ok_or_else(too_large)?;
        let mapping_bytes = advised.checked_add(HUGE_PAGE).ok_or_else(too_large)?;
        let flags = if populate { 0 } else { libc::MAP_NORESERVE };
        let mapping = map_anonymous(mapping_bytes, flags)?;
        // At most 2 MiB past the mapping's page-aligned start, so `start + advised` is inside it.
        let start = (mapping.as_ptr() as usize).next_multiple_of(HUGE_PAGE);
        advise_range(start, advised);
        let Some(start) = NonNull::new(start as *mut u8) else {
            unreachable!("a boundary at or after a non-null mapping is not null");
        };
        if populate {
            for page in (0..bytes).step_by(4096) {
                // SAFETY: `page < bytes`, inside the mapping (see above), which is writable and
                // owned by this region alone; the write of a zero over zeroed memory changes
                // nothing but faults the page in, after the advice, so in a huge page.
                unsafe { start.as_ptr().add(page).write_volatile(0) };
            }
        }
        Ok(Self {
            start,
            bytes,
            mapping,
            mapping_bytes,
        })
    }

    /// The first byte, on a 2 MiB boundary.
    pub fn start(&self) -> NonNull<u8> {
        self.start
    }

    /// The bytes asked for.
    pub fn len(&self) -> usize {
        self.bytes
    }

    pub fn is_empty(&self) -> bool {
        self.bytes == 0
    }
}

impl Drop for HugeRegion {
    fn drop(&mut self) {
        // SAFETY: `mapping` and `mapping_bytes` are exactly what `mmap` returned and was asked
        // for, unmapped once here; the owner's borrows of the region end before it drops.
        unsafe { libc::munmap(self.mapping.as_ptr(), self.mapping_bytes) };
    }
}

/// A table that grows, whose address space, enough for the most entries it may ever hold, is
/// reserved once when it is made: it never moves. Growing it copies nothing and takes only the
/// pages grown into; and the whole reservation is advised huge pages, which it keeps. (A `Vec`
/// that grows is moved by `realloc`, and at its new address, aligned differently, the kernel
/// splits the huge pages back into 4 KiB ones: the IPv6 trie's nodes were all in small pages.)
/// The reservation takes no memory until touched (`MAP_NORESERVE`: not counted against the
/// overcommit limit either), so it may be far larger than the table is expected to get.
pub struct ReservedTable<T: Copy> {
    region: HugeRegion,
    len: usize,
    capacity: usize,
    _entries: std::marker::PhantomData<T>,
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
        let region = HugeRegion::new(bytes, false).ok()?;
        Some(Self {
            region,
            len: 0,
            capacity,
            _entries: std::marker::PhantomData,
        })
    }

    /// The first entry: the region's start, on a 2 MiB boundary (aligned for any `T`).
    fn entries(&self) -> *mut T {
        self.region.start().as_ptr().cast()
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
            unsafe { self.entries().add(i).write(value) };
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
        unsafe { std::slice::from_raw_parts(self.entries(), self.len) }
    }
}

impl<T: Copy> std::ops::DerefMut for ReservedTable<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        // SAFETY: as in `deref`, and `&mut self` makes the borrow exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.entries(), self.len) }
    }
}

/// The first `len` 32-bit words of a file descriptor's memory, mapped shared (a BPF array
/// made with `BPF_F_MMAPABLE`): what is written here, the descriptor's other users (an XDP
/// program) read at once. They read while this side writes, so every access is atomic, and a
/// word is written only when it changes. Unmapped on drop; the descriptor may be closed
/// before (the mapping keeps the memory).
pub struct SharedWords {
    words: NonNull<AtomicU32>,
    len: usize,
}

// SAFETY: the mapping is owned by this value and only reached through atomics.
unsafe impl Send for SharedWords {}
// SAFETY: as above: shared access is atomic.
unsafe impl Sync for SharedWords {}

impl SharedWords {
    /// Maps the first `len` words of `fd`, which must be at least that long.
    pub fn map(fd: std::os::fd::BorrowedFd<'_>, len: usize) -> std::io::Result<Self> {
        use std::os::fd::AsRawFd;
        let bytes = len
            .checked_mul(4)
            .filter(|&bytes| bytes > 0)
            .ok_or_else(|| std::io::Error::other("a shared mapping of no words"))?;
        // SAFETY: a shared mapping at an address of the kernel's choosing touches no existing
        // memory; the kernel checks the length against the descriptor's; the result is checked
        // before use.
        let mapping = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                bytes,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if mapping == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        let words = NonNull::new(mapping.cast::<AtomicU32>())
            .ok_or_else(|| std::io::Error::other("mmap returned null"))?;
        Ok(SharedWords { words, len })
    }

    /// An unlinked temporary file of `len` zero words, for a mapping where no BPF array is at
    /// hand (the tests of the code that writes one).
    pub fn scratch(len: usize) -> std::io::Result<std::fs::File> {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let name = format!(
            "wirespeed-scratch-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let path = std::env::temp_dir().join(name);
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)?;
        std::fs::remove_file(&path)?;
        file.set_len(len as u64 * 4)?;
        Ok(file)
    }

    /// The words.
    pub fn words(&self) -> &[AtomicU32] {
        // SAFETY: `len` words are mapped for as long as `self` lives, page-aligned, and an
        // `AtomicU32` has the layout of a `u32`.
        unsafe { std::slice::from_raw_parts(self.words.as_ptr(), self.len) }
    }

    /// Writes `values` from word `first` on (as far as the mapping goes), each word only where
    /// it differs.
    pub fn write(&self, first: usize, values: &[u32]) {
        let words = self.words().get(first..).unwrap_or_default();
        for (word, &value) in words.iter().zip(values) {
            if word.load(Ordering::Relaxed) != value {
                word.store(value, Ordering::Release);
            }
        }
    }
}

impl Drop for SharedWords {
    fn drop(&mut self) {
        // SAFETY: exactly the mapping `map` made.
        unsafe { libc::munmap(self.words.as_ptr().cast(), self.len * 4) };
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
    fn a_huge_region_starts_on_a_huge_page_and_holds_what_is_written() {
        for (bytes, populate) in [(100, true), (3 << 20, true), (5 << 20, false), (0, false)] {
            let region = HugeRegion::new(bytes, populate).expect("map");
            assert_eq!(region.start().as_ptr() as usize % HUGE_PAGE, 0);
            assert_eq!(region.len(), bytes);
            if bytes > 0 {
                // SAFETY: the region's `bytes` bytes are readable and writable, owned here.
                let memory =
                    unsafe { std::slice::from_raw_parts_mut(region.start().as_ptr(), bytes) };
                assert!(memory.iter().all(|&b| b == 0));
                memory[bytes - 1] = 7;
                assert_eq!(memory[bytes - 1], 7);
            }
        }
        assert!(HugeRegion::new(usize::MAX - 100, false).is_err());
    }

    #[test]
    fn shared_words_are_the_descriptors_memory() {
        let file = SharedWords::scratch(1024).expect("scratch file");
        let words = SharedWords::map(std::os::fd::AsFd::as_fd(&file), 1024).expect("map");
        words.write(1020, &[1, 2, 3, 4, 5, 6]);
        assert_eq!(words.words()[1023].load(Ordering::Relaxed), 4);
        let again = SharedWords::map(std::os::fd::AsFd::as_fd(&file), 1024).expect("map");
        assert_eq!(again.words()[1020].load(Ordering::Relaxed), 1);
        assert!(SharedWords::map(std::os::fd::AsFd::as_fd(&file), 0).is_err());
    }

    #[test]
    fn a_reservation_that_cannot_be_made_is_none() {
        assert!(ReservedTable::<u64>::new(usize::MAX / 4).is_none());
        assert!(ReservedTable::<()>::new(10).is_none());
    }
}
