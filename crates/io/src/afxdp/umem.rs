//! The UMEM: a worker's [`FramePool`] region as the kernel knows it, shared by all its sockets.
//!
//! The pool already is the memory AF_XDP needs (page-aligned, fixed-size frames, frame *i* at
//! UMEM address `i * frame_size`), so nothing is allocated here. The kernel object is created
//! by `setsockopt(XDP_UMEM_REG)` on the first socket a worker opens; every later socket of the
//! worker binds with `XDP_SHARED_UMEM` naming a live socket of that registration, with its own
//! fill and completion rings (kernel ≥ 5.10 for a different interface or queue). A frame received
//! on one port is then transmitted on another by passing its address on: no copy in user space.
//!
//! The kernel's UMEM is reference-counted by the sockets using it, so this handle owns no kernel
//! resource: it remembers the region's geometry and which bound sockets can be named in
//! `sxdp_shared_umem_fd`. When the last socket closes, the kernel drops the registration, and the
//! next socket registers the region again.
//!
//! Drop order the worker must keep: **ports first, then the pool** (the [`Umem`] handle can go at
//! any time). The kernel pins the region's pages while registered, so dropping the pool early is
//! not a memory-safety bug, but frames still in the kernel's rings would never come back to it.
//! While a frame sits in a fill or TX ring the kernel may write or read it at any time, so the
//! worker must not touch frames a port holds ([`crate::Port::frames_held`] counts them).

use std::os::fd::RawFd;
use std::sync::{Arc, Mutex, MutexGuard};

use wirespeed_packet::FramePool;
use wirespeed_packet::batch::HEADROOM;
use wirespeed_packet::pool::PAGE_FRAME_SIZE;

/// Bytes the kernel itself leaves in front of a received packet, inside the UMEM headroom's
/// chunk (`XDP_PACKET_HEADROOM`). In both copy and zero-copy mode it places a packet at
/// `chunk start + umem headroom + XDP_PACKET_HEADROOM` (the buffer pool sets `data_hard_start`
/// after the UMEM headroom and `data` 256 bytes later, and copy mode copies into that `data`).
pub const XDP_PACKET_HEADROOM: u32 = 256;

/// A worker's frame region registered (or to be registered) as an AF_XDP UMEM. Cloning it is
/// cheap; every port of the worker holds a clone.
#[derive(Clone, Debug)]
pub struct Umem {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    addr: u64,
    len: u64,
    frame_size: u32,
    frame_count: u32,
    /// Bound sockets of the current registration, any of which a new socket can share.
    sockets: Mutex<Vec<RawFd>>,
}

impl Umem {
    /// The UMEM view of `pool`. Nothing is registered until the first socket is opened.
    pub fn new(pool: &FramePool) -> Self {
        Self {
            shared: Arc::new(Shared {
                addr: pool.region_ptr() as u64,
                len: pool.region_len() as u64,
                frame_size: pool.frame_size(),
                frame_count: pool.total(),
                sockets: Mutex::new(Vec::new()),
            }),
        }
    }

    /// Whether `pool` is the pool this UMEM was made from.
    pub fn is_of(&self, pool: &FramePool) -> bool {
        self.shared.addr == pool.region_ptr() as u64 && self.shared.len == pool.region_len() as u64
    }

    /// Bytes per frame (the UMEM chunk size).
    pub fn frame_size(&self) -> u32 {
        self.shared.frame_size
    }

    /// Bytes per UMEM chunk: the frame size, or a page for frames larger than one (AF_XDP
    /// chunks are at most a page). A jumbo frame then crosses AF_XDP as several descriptors
    /// (multi-buffer, `XDP_USE_SG`): received into the first chunk of several pool frames and
    /// gathered into the first, sent from consecutive chunks of its one frame.
    pub fn chunk_size(&self) -> u32 {
        self.shared.frame_size.min(PAGE_FRAME_SIZE)
    }

    /// Whether frames cross AF_XDP in several chunks ([`Umem::chunk_size`]).
    pub fn is_multi_buffer(&self) -> bool {
        self.shared.frame_size > PAGE_FRAME_SIZE
    }

    /// Frames in the region.
    pub fn frame_count(&self) -> u32 {
        self.shared.frame_count
    }

    /// The UMEM headroom to register so that received packets start at [`HEADROOM`] in their
    /// frame: what the kernel adds itself ([`XDP_PACKET_HEADROOM`]) is subtracted.
    pub fn headroom() -> u32 {
        (HEADROOM as u32).saturating_sub(XDP_PACKET_HEADROOM)
    }

    /// The `xdp_umem_reg` that registers the region.
    pub(crate) fn registration(&self) -> libc::xdp_umem_reg {
        libc::xdp_umem_reg {
            addr: self.shared.addr,
            len: self.shared.len,
            chunk_size: self.chunk_size(),
            headroom: Self::headroom(),
            flags: 0,
            tx_metadata_len: 0,
        }
    }

    /// Locks the list of bound sockets for an open or a close (control path only).
    pub(crate) fn sockets(&self) -> MutexGuard<'_, Vec<RawFd>> {
        // A panic while the lock was held cannot leave the list inconsistent (each change is one
        // push or retain), so a poisoned lock is used as is.
        self.shared
            .sockets
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}
