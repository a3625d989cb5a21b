//! The four single-producer/single-consumer rings an AF_XDP socket shares with the kernel.
//!
//! Each ring is a `mmap` of the socket at a fixed page offset (`XDP_PGOFF_*`): a producer index,
//! a consumer index, a flags word and an array of `size` (a power of two) descriptors, at the
//! byte offsets `getsockopt(XDP_MMAP_OFFSETS)` reports. Indices are free-running `u32`s; a slot
//! is `index & (size - 1)`.
//!
//! Who owns which index (if_xdp.h, kernel `net/xdp/xsk_queue.h`):
//! * fill and TX rings: user space produces (writes descriptors, then publishes `producer`), the
//!   kernel consumes;
//! * RX and completion rings: the kernel produces, user space consumes.
//!
//! Both sides keep private copies of the other side's index and read the shared one only when
//! the private copy says the ring is full (producer) or empty (consumer), as Snabb's and libxdp's
//! rings do: the shared index is a cache line the other CPU writes, so reading it on every call
//! would cost a cache miss each time. Ordering follows the kernel's contract: the index of the
//! other side is read with Acquire (its descriptors are visible after that load), our own index
//! is published with Release (our descriptor writes are visible before it).

use std::os::fd::{AsRawFd, BorrowedFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};

/// One mapped ring region; unmapped when dropped.
struct Mapping {
    ptr: NonNull<u8>,
    len: usize,
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: `ptr`/`len` are exactly what mmap returned in `Ring::map`, and every pointer
        // derived from them lives in the `Ring` that owns this mapping and is dropped with it.
        unsafe {
            libc::munmap(self.ptr.as_ptr().cast(), self.len);
        }
    }
}

/// The shared part of a ring as mapped: index and flag words and the descriptor array.
struct Ring<T> {
    producer: NonNull<AtomicU32>,
    consumer: NonNull<AtomicU32>,
    flags: NonNull<AtomicU32>,
    descs: NonNull<T>,
    mask: u32,
    size: u32,
    // Declared last: the pointers above point into it.
    _mapping: Mapping,
}

// SAFETY: the ring's memory is owned by this value (the mapping) and shared only with the
// kernel, which synchronises through the atomic indices; moving the value to another thread
// moves the sole user-space owner.
unsafe impl<T: Send> Send for Ring<T> {}

impl<T> Ring<T> {
    /// Maps `size` descriptors of ring `pgoff` of socket `fd` laid out as `offsets` says.
    fn map(
        fd: BorrowedFd<'_>,
        pgoff: u64,
        size: u32,
        offsets: &libc::xdp_ring_offset,
    ) -> std::io::Result<Self> {
        let len = offsets.desc as usize + size as usize * std::mem::size_of::<T>();
        // SAFETY: mapping a socket's ring with the length and page offset the kernel defines for
        // it; the kernel checks both against the ring it allocated, and the result is checked
        // against MAP_FAILED before use.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                fd.as_raw_fd(),
                pgoff as libc::off_t,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        let base = NonNull::new(ptr.cast::<u8>())
            .ok_or_else(|| std::io::Error::other("mmap returned null"))?;
        let mapping = Mapping { ptr: base, len };
        let at = |offset: u64| {
            // SAFETY: the kernel reports offsets inside the ring it mapped (producer, consumer and
            // flags words before `desc`, the descriptor array from `desc` to `len`), so the sum
            // stays inside the mapping and is non-null.
            unsafe { base.add(offset as usize) }
        };
        Ok(Self {
            producer: at(offsets.producer).cast(),
            consumer: at(offsets.consumer).cast(),
            flags: at(offsets.flags).cast(),
            descs: at(offsets.desc).cast(),
            mask: size - 1,
            size,
            _mapping: mapping,
        })
    }

    #[inline]
    fn producer(&self) -> &AtomicU32 {
        // SAFETY: points at an aligned u32 in the mapping owned by `self`; the kernel accesses
        // it only atomically (smp_load_acquire / smp_store_release).
        unsafe { self.producer.as_ref() }
    }

    #[inline]
    fn consumer(&self) -> &AtomicU32 {
        // SAFETY: as for `producer`.
        unsafe { self.consumer.as_ref() }
    }

    #[inline]
    fn needs_wakeup(&self) -> bool {
        // SAFETY: as for `producer`; the kernel sets and clears the flag with plain stores, and
        // a stale read only delays or adds one wakeup.
        let flags = unsafe { self.flags.as_ref() };
        flags.load(Ordering::Relaxed) & libc::XDP_RING_NEED_WAKEUP != 0
    }

    #[inline]
    fn slot(&self, index: u32) -> *mut T {
        // SAFETY: `index & mask < size`, and the mapping holds `size` descriptors from `descs`.
        unsafe { self.descs.as_ptr().add((index & self.mask) as usize) }
    }
}

/// A ring user space produces into: the fill ring (frame addresses) and the TX ring.
pub(crate) struct ProducerRing<T> {
    ring: Ring<T>,
    /// Our producer index; published to the kernel by [`ProducerRing::submit`].
    cached_producer: u32,
    /// The kernel's consumer index as last read.
    cached_consumer: u32,
}

impl<T: Copy> ProducerRing<T> {
    /// Maps a ring this side produces into. See [`Ring::map`].
    pub(crate) fn map(
        fd: BorrowedFd<'_>,
        pgoff: u64,
        size: u32,
        offsets: &libc::xdp_ring_offset,
    ) -> std::io::Result<Self> {
        let ring = Ring::map(fd, pgoff, size, offsets)?;
        let cached_producer = ring.producer().load(Ordering::Relaxed);
        let cached_consumer = ring.consumer().load(Ordering::Acquire);
        Ok(Self {
            ring,
            cached_producer,
            cached_consumer,
        })
    }

    /// Free slots, at most `want`; reads the kernel's consumer index only when the cached one
    /// leaves fewer than `want` free.
    #[inline]
    pub(crate) fn free(&mut self, want: u32) -> u32 {
        let mut free = self.ring.size - self.cached_producer.wrapping_sub(self.cached_consumer);
        if free < want {
            self.cached_consumer = self.ring.consumer().load(Ordering::Acquire);
            free = self.ring.size - self.cached_producer.wrapping_sub(self.cached_consumer);
        }
        free.min(want)
    }

    /// Writes descriptor `i` of the next batch (0-based, `i` below what [`ProducerRing::free`]
    /// granted); the kernel sees it after [`ProducerRing::submit`].
    #[inline]
    pub(crate) fn write(&mut self, i: u32, value: T) {
        let slot = self.ring.slot(self.cached_producer.wrapping_add(i));
        // SAFETY: the slot is inside the ring and, being between the kernel's consumer index and
        // our unpublished producer index, is not read by the kernel until `submit`.
        unsafe { slot.write(value) }
    }

    /// Publishes `n` written descriptors to the kernel.
    #[inline]
    pub(crate) fn submit(&mut self, n: u32) {
        self.cached_producer = self.cached_producer.wrapping_add(n);
        self.ring
            .producer()
            .store(self.cached_producer, Ordering::Release);
    }

    /// Descriptors published and not yet consumed by the kernel (reads the shared index).
    #[inline]
    pub(crate) fn pending(&mut self) -> u32 {
        self.cached_consumer = self.ring.consumer().load(Ordering::Acquire);
        self.cached_producer.wrapping_sub(self.cached_consumer)
    }

    /// Descriptors published and not yet consumed by the kernel, read without touching the
    /// cached index (a reader that must not take `&mut`).
    #[inline]
    pub(crate) fn in_ring(&self) -> u32 {
        self.cached_producer
            .wrapping_sub(self.ring.consumer().load(Ordering::Acquire))
    }

    /// Whether the kernel asked to be woken up (`XDP_RING_NEED_WAKEUP`).
    #[inline]
    pub(crate) fn needs_wakeup(&self) -> bool {
        self.ring.needs_wakeup()
    }
}

/// A ring the kernel produces into: the RX ring and the completion ring.
pub(crate) struct ConsumerRing<T> {
    ring: Ring<T>,
    /// The kernel's producer index as last read.
    cached_producer: u32,
    /// Our consumer index; published to the kernel by [`ConsumerRing::release`].
    cached_consumer: u32,
}

impl<T: Copy> ConsumerRing<T> {
    /// Maps a ring this side consumes from. See [`Ring::map`].
    pub(crate) fn map(
        fd: BorrowedFd<'_>,
        pgoff: u64,
        size: u32,
        offsets: &libc::xdp_ring_offset,
    ) -> std::io::Result<Self> {
        let ring = Ring::map(fd, pgoff, size, offsets)?;
        let cached_consumer = ring.consumer().load(Ordering::Relaxed);
        let cached_producer = ring.producer().load(Ordering::Acquire);
        Ok(Self {
            ring,
            cached_producer,
            cached_consumer,
        })
    }

    /// Descriptors ready to read, at most `want`; reads the kernel's producer index only when
    /// the cached one says the ring is empty.
    #[inline]
    pub(crate) fn available(&mut self, want: u32) -> u32 {
        let mut available = self.cached_producer.wrapping_sub(self.cached_consumer);
        if available == 0 {
            self.cached_producer = self.ring.producer().load(Ordering::Acquire);
            available = self.cached_producer.wrapping_sub(self.cached_consumer);
        }
        available.min(want)
    }

    /// Descriptor `i` of the ready batch (0-based, `i` below what
    /// [`ConsumerRing::available`] granted).
    #[inline]
    pub(crate) fn read(&self, i: u32) -> T {
        let slot = self.ring.slot(self.cached_consumer.wrapping_add(i));
        // SAFETY: the slot is inside the ring, between our consumer index and the producer index
        // read with Acquire, so the kernel finished writing it and will not touch it again until
        // we release it.
        unsafe { slot.read() }
    }

    /// Hands `n` read descriptors' slots back to the kernel.
    #[inline]
    pub(crate) fn release(&mut self, n: u32) {
        self.cached_consumer = self.cached_consumer.wrapping_add(n);
        self.ring
            .consumer()
            .store(self.cached_consumer, Ordering::Release);
    }
}
