//! The two rings a queue shares with the kernel: the `TPACKET_V3` RX ring and the `TPACKET_V2`
//! TX ring (kernel Documentation/networking/packet_mmap.rst).
//!
//! This is the only place that reads and writes memory the kernel writes too. Ownership is
//! handed back and forth by one status word: for RX, `block_status` of each block (the kernel
//! sets `TP_STATUS_USER` when a block is ready; user space stores `TP_STATUS_KERNEL` with Release
//! ordering when it has consumed the block), for TX, `tp_status` of each slot (user space stores
//! `TP_STATUS_SEND_REQUEST` with Release after filling the slot; the kernel returns it to
//! `TP_STATUS_AVAILABLE` when the packet has left). Statuses are read with Acquire, so the
//! contents written before a status change are visible after it.
//!
//! The kernel's headers are trusted no further than the mapping: every offset and length read
//! from the ring is checked against the block before it is used. A block whose headers do not
//! add up is counted and given back, never followed out of bounds.

use std::sync::atomic::{AtomicU32, Ordering};

use super::socket::Mapping;

/// Offset of `block_status` in a V3 block descriptor.
const BLOCK_HEADER: usize = std::mem::offset_of!(libc::tpacket_block_desc, hdr);
/// Size of the V3 per-packet header plus the `sockaddr_ll` the kernel writes after it.
const PACKET_HEADER: usize = libc::TPACKET3_HDRLEN;
/// Offset of the `sockaddr_ll` after a V3 packet header.
const PACKET_ADDRESS: usize = PACKET_HEADER - size_of::<libc::sockaddr_ll>();
/// Where a V2 TX slot's data begins (`TPACKET2_HDRLEN - sizeof(struct sockaddr_ll)`): the
/// kernel's fixed offset when `PACKET_TX_HAS_OFF` is not set.
const TX_DATA: usize = libc::TPACKET2_HDRLEN - size_of::<libc::sockaddr_ll>();

/// Status word at `ptr` as an atomic.
///
/// # Safety
/// `ptr` must be 4-byte aligned and inside a live ring mapping that outlives the returned
/// reference.
unsafe fn status_word<'a>(ptr: *mut u8) -> &'a AtomicU32 {
    // SAFETY: guaranteed by the caller; the kernel accesses the word with plain stores and
    // loads bracketed by memory barriers (smp_wmb/smp_rmb), which pair with our Release/Acquire.
    unsafe { AtomicU32::from_ptr(ptr.cast::<u32>()) }
}

/// A received packet, still in the ring.
pub(crate) struct RxPacket<'a> {
    /// The captured bytes (without a VLAN tag the kernel took out).
    pub data: &'a [u8],
    /// Length on the wire without the removed tag; more than `data.len()` if truncated.
    pub wire_len: u32,
    /// The VLAN tag the kernel removed: (TPID, TCI).
    pub vlan: Option<(u16, u16)>,
    /// The host sent this packet itself (`PACKET_OUTGOING`).
    pub outgoing: bool,
}

/// Where the next packet is, found without borrowing the ring.
#[derive(Clone, Copy)]
struct Located {
    data: usize,
    snaplen: usize,
    wire_len: u32,
    vlan: Option<(u16, u16)>,
    outgoing: bool,
}

/// A `TPACKET_V3` RX ring: `block_count` blocks of `block_size` bytes.
pub(crate) struct RxRing {
    map: Mapping,
    block_size: usize,
    block_count: usize,
    /// Block the worker reads next.
    block: usize,
    /// Packets in the current block (valid once it is opened).
    packets: u32,
    /// Packets of the current block consumed so far.
    consumed: u32,
    /// Offset of the next packet in the current block; 0 while the block is not opened.
    offset: usize,
    /// `tp_next_offset` of the packet last located.
    next_offset: usize,
    /// Blocks given back early because their headers were inconsistent.
    pub corrupt_blocks: u64,
}

impl RxRing {
    /// Wraps a mapped RX ring; `map.len()` must be `block_size * block_count`.
    pub(crate) fn new(map: Mapping, block_size: usize, block_count: usize) -> RxRing {
        debug_assert_eq!(map.len(), block_size * block_count);
        RxRing {
            map,
            block_size,
            block_count,
            block: 0,
            packets: 0,
            consumed: 0,
            offset: 0,
            next_offset: 0,
            corrupt_blocks: 0,
        }
    }

    fn block_base(&self) -> *mut u8 {
        // SAFETY: `block < block_count`, so the offset is inside the mapping.
        unsafe { self.map.ptr().add(self.block * self.block_size) }
    }

    fn block_status(&self) -> &AtomicU32 {
        // SAFETY: blocks are page aligned and `block_status` is the first u32 of the 8-aligned
        // header union, inside the block; the mapping lives as long as `self`.
        unsafe { status_word(self.block_base().add(BLOCK_HEADER)) }
    }

    /// Gives the current block back to the kernel and moves to the next.
    fn release_block(&mut self) {
        self.block_status()
            .store(libc::TP_STATUS_KERNEL, Ordering::Release);
        self.block = (self.block + 1) % self.block_count;
        self.packets = 0;
        self.consumed = 0;
        self.offset = 0;
        self.next_offset = 0;
    }

    /// Finds the next unconsumed packet, giving back blocks that are used up or corrupt.
    fn locate(&mut self) -> Option<Located> {
        // Each turn either returns or gives a block back, so one lap of the ring is the bound.
        for _ in 0..=self.block_count {
            if self.block_status().load(Ordering::Acquire) & libc::TP_STATUS_USER == 0 {
                return None;
            }
            let base = self.block_base();
            if self.offset == 0 {
                // SAFETY: the block is ours (TP_STATUS_USER, acquired above) and at least a
                // page long, so its header is initialised and in bounds; read_unaligned makes
                // no alignment assumption.
                let header = unsafe {
                    base.add(BLOCK_HEADER)
                        .cast::<libc::tpacket_hdr_v1>()
                        .read_unaligned()
                };
                self.packets = header.num_pkts;
                self.offset = header.offset_to_first_pkt as usize;
                if self.packets == 0 {
                    self.release_block();
                    continue;
                }
            }
            if self.consumed >= self.packets {
                self.release_block();
                continue;
            }
            let offset = self.offset;
            if offset < BLOCK_HEADER || offset + PACKET_HEADER > self.block_size {
                self.corrupt_blocks += 1;
                self.release_block();
                continue;
            }
            // SAFETY: `offset + PACKET_HEADER <= block_size` was checked, the block is ours, and
            // read_unaligned makes no alignment assumption.
            let (header, address) = unsafe {
                (
                    base.add(offset)
                        .cast::<libc::tpacket3_hdr>()
                        .read_unaligned(),
                    base.add(offset + PACKET_ADDRESS)
                        .cast::<libc::sockaddr_ll>()
                        .read_unaligned(),
                )
            };
            let data = offset + header.tp_mac as usize;
            let snaplen = header.tp_snaplen as usize;
            if (header.tp_mac as usize) < PACKET_HEADER || data + snaplen > self.block_size {
                self.corrupt_blocks += 1;
                self.release_block();
                continue;
            }
            self.next_offset = header.tp_next_offset as usize;
            let vlan = (header.tp_status & libc::TP_STATUS_VLAN_VALID != 0).then(|| {
                let tpid = if header.tp_status & libc::TP_STATUS_VLAN_TPID_VALID != 0 {
                    header.hv1.tp_vlan_tpid
                } else {
                    0x8100
                };
                (tpid, header.hv1.tp_vlan_tci as u16)
            });
            return Some(Located {
                data: self.block * self.block_size + data,
                snaplen,
                wire_len: header.tp_len,
                vlan,
                outgoing: address.sll_pkttype == libc::PACKET_OUTGOING,
            });
        }
        None
    }

    /// The next received packet, left in the ring until [`RxRing::advance`].
    pub(crate) fn peek(&mut self) -> Option<RxPacket<'_>> {
        let located = self.locate()?;
        // SAFETY: `locate` checked `data + snaplen` against the block, which is inside the
        // mapping; the block stays ours (the kernel does not write it) until `release_block`,
        // which needs `&mut self` and so cannot run while the slice is borrowed.
        let data = unsafe {
            std::slice::from_raw_parts(self.map.ptr().add(located.data), located.snaplen)
        };
        Some(RxPacket {
            data,
            wire_len: located.wire_len,
            vlan: located.vlan,
            outgoing: located.outgoing,
        })
    }

    /// Consumes the packet [`RxRing::peek`] returned; gives its block back if it was the last.
    pub(crate) fn advance(&mut self) {
        if self.offset == 0 {
            return;
        }
        self.consumed += 1;
        if self.consumed >= self.packets || self.next_offset == 0 {
            self.release_block();
        } else {
            self.offset += self.next_offset;
        }
    }
}

/// A `TPACKET_V2` TX ring of `slots` slots of `slot_size` bytes, `slots_per_block` per block.
pub(crate) struct TxRing {
    map: Mapping,
    slot_size: usize,
    block_size: usize,
    slots_per_block: usize,
    slots: usize,
    /// The slot the worker fills next (the kernel sends in the same order).
    head: usize,
}

impl TxRing {
    /// Wraps a mapped TX ring; `map.len()` must be `block_size * slots / slots_per_block`.
    pub(crate) fn new(map: Mapping, slot_size: usize, block_size: usize, slots: usize) -> TxRing {
        let slots_per_block = (block_size / slot_size).max(1);
        debug_assert_eq!(map.len(), block_size * (slots / slots_per_block));
        TxRing {
            map,
            slot_size,
            block_size,
            slots_per_block,
            slots,
            head: 0,
        }
    }

    /// Largest frame a slot holds.
    pub(crate) fn capacity(&self) -> usize {
        self.slot_size - TX_DATA
    }

    fn slot(&self, index: usize) -> *mut u8 {
        let offset = (index / self.slots_per_block) * self.block_size
            + (index % self.slots_per_block) * self.slot_size;
        // SAFETY: `index < slots`, so the slot lies inside the mapping.
        unsafe { self.map.ptr().add(offset) }
    }

    /// Copies `frame` into the next slot and marks it for sending; `false` (and nothing
    /// written) when that slot is still the kernel's or the frame does not fit.
    pub(crate) fn push(&mut self, frame: &[u8]) -> bool {
        if frame.len() > self.capacity() {
            return false;
        }
        let slot = self.slot(self.head);
        // SAFETY: slots start at multiples of 16 inside the mapping; tp_status is their first
        // word; the mapping lives as long as `self`.
        let status = unsafe { status_word(slot) };
        if status.load(Ordering::Acquire) & (libc::TP_STATUS_SEND_REQUEST | libc::TP_STATUS_SENDING)
            != 0
        {
            return false;
        }
        let len = frame.len() as u32;
        // SAFETY: the slot is ours (neither send-requested nor sending, acquired above); the
        // data fits (`len <= slot_size - TX_DATA`), and the length fields are inside the
        // 32-byte header; the Release store below publishes these writes to the kernel.
        unsafe {
            std::ptr::copy_nonoverlapping(frame.as_ptr(), slot.add(TX_DATA), frame.len());
            slot.add(std::mem::offset_of!(libc::tpacket2_hdr, tp_len))
                .cast::<u32>()
                .write_unaligned(len);
            slot.add(std::mem::offset_of!(libc::tpacket2_hdr, tp_snaplen))
                .cast::<u32>()
                .write_unaligned(len);
        }
        status.store(libc::TP_STATUS_SEND_REQUEST, Ordering::Release);
        self.head = (self.head + 1) % self.slots;
        true
    }
}
