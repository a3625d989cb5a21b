//! The frame pool: one region of fixed-size frames, allocated once, recycled forever.
//!
//! The region is an anonymous `mmap`, 2 MiB-aligned and in transparent huge pages
//! ([`HugeRegion`]), so that the AF_XDP backend can register it as its UMEM unchanged: a frame's
//! UMEM address is `frame_index * frame_size`. The pool keeps a stack of free frame indices
//! (ixy's design): allocation and release are a push or a pop, with no allocation after
//! [`FramePool::new`]. A bitmap of which frames are free catches a frame
//! released twice (a bug that would otherwise hand one frame to two owners); it is counted and the
//! second release is ignored, so conservation (`free + in use = total`) always holds.

use crate::batch::{Desc, HEADROOM};
use crate::memory::HugeRegion;

/// Index of a frame in its pool.
pub type FrameId = u32;

/// Smallest frame the pool accepts: a full Ethernet frame without FCS plus headroom.
pub const MIN_FRAME_SIZE: u32 = 2048;
/// Largest frame the pool accepts: a 9018-byte jumbo frame (9000 bytes of MTU, Ethernet
/// header, two VLAN tags) plus headroom fits, with room for the largest jumbo MTUs (9216).
pub const MAX_FRAME_SIZE: u32 = 16384;
/// Frames above this size are larger than a page, the largest chunk AF_XDP takes: a jumbo frame
/// crosses AF_XDP in several chunks of one pool frame.
pub const PAGE_FRAME_SIZE: u32 = 4096;

/// Bytes of Ethernet header and two VLAN tags a frame carries beyond its interface's MTU.
pub const L2_OVERHEAD: u32 = 22;

/// The smallest frame size the pool accepts that holds a packet as large as an interface with
/// this `mtu` may carry (its headroom, the MTU and [`L2_OVERHEAD`]); `None` when no frame size
/// is large enough.
pub fn frame_size_for_mtu(mtu: u32) -> Option<u32> {
    let needed = u32::from(HEADROOM)
        .checked_add(mtu)?
        .checked_add(L2_OVERHEAD)?;
    let size = needed.checked_next_power_of_two()?.max(MIN_FRAME_SIZE);
    (size <= MAX_FRAME_SIZE).then_some(size)
}

/// Why a pool could not be created.
#[derive(Debug, thiserror::Error)]
pub enum PoolError {
    #[error(
        "frame size {0} is not a power of two between {MIN_FRAME_SIZE} and {MAX_FRAME_SIZE}; \
         use 2048, 4096, 8192 or 16384 (jumbo frames)"
    )]
    FrameSize(u32),
    #[error("frame count must be between 1 and {max}, got {0}; lower `frames`", max = u32::MAX / 2)]
    FrameCount(u32),
    #[error(
        "mmap of {bytes} bytes for the frame pool failed: {errno}; lower `frames` or the frame size"
    )]
    Mmap { bytes: usize, errno: std::io::Error },
}

/// A region of `count` frames of `frame_size` bytes and the stack of the free ones.
pub struct FramePool {
    region: HugeRegion,
    frame_size: u32,
    frame_count: u32,
    /// Stack of free frame indices; its capacity is `frame_count`, so pushes never allocate.
    free: Vec<FrameId>,
    /// One bit per frame, set while the frame is on the free stack.
    is_free: Vec<u64>,
    double_releases: u64,
}

impl FramePool {
    /// Maps `frame_count` frames of `frame_size` bytes, all free.
    pub fn new(frame_count: u32, frame_size: u32) -> Result<Self, PoolError> {
        if !frame_size.is_power_of_two() || !(MIN_FRAME_SIZE..=MAX_FRAME_SIZE).contains(&frame_size)
        {
            return Err(PoolError::FrameSize(frame_size));
        }
        if frame_count == 0 || frame_count > u32::MAX / 2 {
            return Err(PoolError::FrameCount(frame_count));
        }
        let region_len = frame_count as usize * frame_size as usize;
        // In huge pages, as DPDK keeps its mbufs: a few hundred frames in flight span hundreds
        // of 4 KiB pages, more than the TLB holds (docs/benchmarks.md, "Foundation").
        let region = HugeRegion::new(region_len, true).map_err(|errno| PoolError::Mmap {
            bytes: region_len,
            errno,
        })?;
        // Lowest indices on top of the stack: a lightly loaded port touches few frames.
        let free: Vec<FrameId> = (0..frame_count).rev().collect();
        let mut is_free = vec![0u64; (frame_count as usize).div_ceil(64)];
        for id in 0..frame_count {
            is_free[id as usize / 64] |= 1 << (id % 64);
        }
        Ok(Self {
            region,
            frame_size,
            frame_count,
            free,
            is_free,
            double_releases: 0,
        })
    }

    /// Takes one free frame, or `None` when every frame is in use.
    #[inline]
    pub fn alloc(&mut self) -> Option<FrameId> {
        let id = self.free.pop()?;
        self.is_free[id as usize / 64] &= !(1 << (id % 64));
        Some(id)
    }

    /// A free frame holding a copy of `bytes` after the headroom, described as a packet of
    /// port 0 on `queue`: how apps that create or copy packets, generators, captures and tests
    /// put a frame they built into the pool. `None` when no frame is free or `bytes` do not fit
    /// after the headroom (then the pool is as it was).
    #[inline]
    pub fn alloc_copy(&mut self, bytes: &[u8], queue: u16) -> Option<Desc> {
        let start = HEADROOM as usize;
        let len = u16::try_from(bytes.len()).ok()?;
        if start + bytes.len() > self.frame_size as usize {
            return None;
        }
        let frame = self.alloc()?;
        self.frame_mut(frame)[start..start + bytes.len()].copy_from_slice(bytes);
        Some(Desc {
            frame,
            offset: HEADROOM,
            len,
            port: 0,
            queue,
        })
    }

    /// Fills `out` with free frames from the front; returns how many it filled.
    #[inline]
    pub fn alloc_bulk(&mut self, out: &mut [FrameId]) -> usize {
        let n = out.len().min(self.free.len());
        for slot in &mut out[..n] {
            // The length check above guarantees the pop succeeds.
            let id = self.free.pop().unwrap_or(0);
            self.is_free[id as usize / 64] &= !(1 << (id % 64));
            *slot = id;
        }
        n
    }

    /// Returns a frame to the pool. Releasing a frame that is already free, or an index outside
    /// the pool, is counted in [`FramePool::double_releases`] and otherwise ignored.
    #[inline]
    pub fn release(&mut self, id: FrameId) {
        if id >= self.frame_count {
            self.double_releases += 1;
            return;
        }
        let (word, bit) = (id as usize / 64, 1u64 << (id % 64));
        if self.is_free[word] & bit != 0 {
            self.double_releases += 1;
            return;
        }
        self.is_free[word] |= bit;
        self.free.push(id);
    }

    /// The whole frame `id` (all `frame_size` bytes). Out-of-range ids yield an empty slice.
    #[inline]
    pub fn frame(&self, id: FrameId) -> &[u8] {
        if id >= self.frame_count {
            return &[];
        }
        let start = id as usize * self.frame_size as usize;
        // SAFETY: `start + frame_size <= region_len` because `id < frame_count`, the mapping
        // lives as long as `self`, and the shared borrow of `self` excludes writers.
        unsafe {
            std::slice::from_raw_parts(
                self.region.start().as_ptr().add(start),
                self.frame_size as usize,
            )
        }
    }

    /// Copies `len` bytes at `from_offset` in frame `from` to `to_offset` in frame `to` (another
    /// frame), and says whether it did: nothing is copied when a range leaves its frame or the
    /// frames are one. An AF_XDP port gathers a jumbo frame's fragments into its first
    /// buffer's frame with it.
    pub fn copy_between(
        &mut self,
        from: FrameId,
        from_offset: usize,
        len: usize,
        to: FrameId,
        to_offset: usize,
    ) -> bool {
        let size = self.frame_size as usize;
        let fits = |offset: usize| offset.checked_add(len).is_some_and(|end| end <= size);
        if from == to
            || from >= self.frame_count
            || to >= self.frame_count
            || !fits(from_offset)
            || !fits(to_offset)
        {
            return false;
        }
        let base = self.region.start().as_ptr();
        // SAFETY: both ranges lie inside their frames (checked above), which lie inside the
        // region; the frames differ, so the ranges do not overlap; the exclusive borrow of
        // `self` makes these the only accesses to the region meanwhile.
        unsafe {
            std::ptr::copy_nonoverlapping(
                base.add(from as usize * size + from_offset),
                base.add(to as usize * size + to_offset),
                len,
            );
        }
        true
    }

    /// The whole frame `id`, writable. Out-of-range ids yield an empty slice.
    #[inline]
    pub fn frame_mut(&mut self, id: FrameId) -> &mut [u8] {
        if id >= self.frame_count {
            return &mut [];
        }
        let start = id as usize * self.frame_size as usize;
        // SAFETY: in bounds as in `frame`; the exclusive borrow of `self` makes this the only
        // reference into the region.
        unsafe {
            std::slice::from_raw_parts_mut(
                self.region.start().as_ptr().add(start),
                self.frame_size as usize,
            )
        }
    }

    /// Bytes per frame.
    pub fn frame_size(&self) -> u32 {
        self.frame_size
    }

    /// Frames in the pool, free or not.
    pub fn total(&self) -> u32 {
        self.frame_count
    }

    /// Frames on the free stack.
    pub fn free_count(&self) -> u32 {
        self.free.len() as u32
    }

    /// Frames handed out and not yet released.
    pub fn in_use(&self) -> u32 {
        self.frame_count - self.free_count()
    }

    /// Releases that were ignored because the frame was already free or out of range.
    pub fn double_releases(&self) -> u64 {
        self.double_releases
    }

    /// Start of the region, for registering it with the kernel (AF_XDP UMEM).
    pub fn region_ptr(&self) -> *mut u8 {
        self.region.start().as_ptr()
    }

    /// Length of the region in bytes.
    pub fn region_len(&self) -> usize {
        self.region.len()
    }

    /// The UMEM address of byte `offset` of frame `id`.
    #[inline]
    pub fn addr(&self, id: FrameId, offset: u16) -> u64 {
        id as u64 * self.frame_size as u64 + offset as u64
    }

    /// Splits a UMEM address into frame and offset; `None` for an address outside the region.
    #[inline]
    pub fn locate(&self, addr: u64) -> Option<(FrameId, u16)> {
        if addr >= self.region.len() as u64 {
            return None;
        }
        let size = self.frame_size as u64;
        Some(((addr / size) as FrameId, (addr % size) as u16))
    }
}

impl std::fmt::Debug for FramePool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FramePool")
            .field("frame_size", &self.frame_size)
            .field("total", &self.frame_count)
            .field("free", &self.free.len())
            .field("double_releases", &self.double_releases)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_frame_size_for_an_mtu_is_the_smallest_that_holds_it() {
        use super::frame_size_for_mtu;
        let sizes: Vec<_> = [68, 1500, 1770, 1771, 3818, 3819, 9000, 16106, 16107]
            .map(frame_size_for_mtu)
            .to_vec();
        assert_eq!(
            sizes,
            [2048, 2048, 2048, 4096, 4096, 8192, 16384, 16384]
                .map(Some)
                .into_iter()
                .chain([None])
                .collect::<Vec<_>>()
        );
    }

    #[test]
    fn alloc_copy_puts_the_bytes_after_the_headroom_or_leaves_the_pool_as_it_was() {
        let mut pool = FramePool::new(2, 2048).unwrap();
        let desc = pool.alloc_copy(&[1, 2, 3], 5).unwrap();
        assert_eq!(
            (desc.offset, desc.len, desc.port, desc.queue),
            (HEADROOM, 3, 0, 5)
        );
        let start = HEADROOM as usize;
        assert_eq!(&pool.frame(desc.frame)[start..start + 3], &[1, 2, 3]);
        let too_long = vec![0u8; 2048 - start + 1];
        assert_eq!(pool.alloc_copy(&too_long, 0), None);
        assert_eq!(pool.free_count(), 1, "a frame that does not fit takes none");
        assert!(pool.alloc_copy(&too_long[..2048 - start], 0).is_some());
        assert_eq!(pool.alloc_copy(&[1], 0), None, "the pool is empty");
    }
    use super::*;

    #[test]
    fn alloc_release_conserves_frames() {
        let mut pool = FramePool::new(64, 2048).unwrap();
        let mut ids = [0; 70];
        assert_eq!(pool.alloc_bulk(&mut ids), 64);
        assert_eq!(pool.alloc(), None);
        assert_eq!(pool.in_use(), 64);
        for &id in &ids[..64] {
            pool.release(id);
        }
        assert_eq!(pool.free_count(), 64);
        assert_eq!(pool.double_releases(), 0);
    }

    #[test]
    fn double_release_is_counted_not_duplicated() {
        let mut pool = FramePool::new(4, 2048).unwrap();
        let id = pool.alloc().unwrap();
        pool.release(id);
        pool.release(id);
        pool.release(99);
        assert_eq!(pool.free_count(), 4);
        assert_eq!(pool.double_releases(), 2);
    }

    #[test]
    fn frames_are_disjoint_and_page_aligned() {
        let mut pool = FramePool::new(8, 4096).unwrap();
        assert_eq!(pool.region_ptr() as usize % (2 << 20), 0);
        pool.frame_mut(1).fill(0xab);
        assert!(pool.frame(0).iter().all(|&b| b == 0));
        assert!(pool.frame(2).iter().all(|&b| b == 0));
        assert_eq!(pool.frame(1).len(), 4096);
        assert_eq!(pool.locate(pool.addr(3, 256)), Some((3, 256)));
        assert_eq!(pool.locate(8 * 4096), None);
        assert!(pool.frame(8).is_empty());
    }

    #[test]
    fn bad_geometry_is_refused() {
        assert!(matches!(
            FramePool::new(8, 3000),
            Err(PoolError::FrameSize(3000))
        ));
        assert!(matches!(
            FramePool::new(0, 2048),
            Err(PoolError::FrameCount(0))
        ));
    }
}
