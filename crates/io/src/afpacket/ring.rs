//! The rings a queue shares with the kernel: the RX ring, `TPACKET_V3` blocks or `TPACKET_V2`
//! slots ([`RxRingKind`]), and the `TPACKET_V2` TX ring (kernel
//! Documentation/networking/packet_mmap.rst).
//!
//! This is the only place that reads and writes memory the kernel writes too. Ownership is
//! handed back and forth by one status word: for V3 RX, `block_status` of each block (the kernel
//! sets `TP_STATUS_USER` when a block is ready; user space stores `TP_STATUS_KERNEL` with Release
//! ordering when it has consumed the block), for V2 RX the same per slot (`tp_status`), for TX,
//! `tp_status` of each slot (user space stores
//! `TP_STATUS_SEND_REQUEST` with Release after filling the slot; the kernel returns it to
//! `TP_STATUS_AVAILABLE` when the packet has left). Statuses are read with Acquire, so the
//! contents written before a status change are visible after it.
//!
//! The kernel's headers are trusted no further than the mapping: every offset and length read
//! from the ring is checked against the block before it is used. A block whose headers do not
//! add up is counted and given back, never followed out of bounds.

use std::sync::atomic::{AtomicU32, Ordering};

use super::RxRingKind;
use super::socket::Mapping;

/// Offset of `block_status` in a V3 block descriptor.
const BLOCK_HEADER: usize = std::mem::offset_of!(libc::tpacket_block_desc, hdr);
/// Size of the V3 per-packet header plus the `sockaddr_ll` the kernel writes after it.
const PACKET_HEADER: usize = libc::TPACKET3_HDRLEN;
/// Offset of the `sockaddr_ll` after a V3 packet header.
const PACKET_ADDRESS: usize = PACKET_HEADER - size_of::<libc::sockaddr_ll>();
/// Size of the V2 per-packet header plus the `sockaddr_ll` after it: where a received
/// packet's data may begin at the earliest.
const SLOT_HEADER: usize = libc::TPACKET2_HDRLEN;
/// Offset of the `sockaddr_ll` after a V2 packet header.
const SLOT_ADDRESS: usize = SLOT_HEADER - size_of::<libc::sockaddr_ll>();
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

/// The RX ring of a queue, in the layout its socket was configured with.
pub(crate) enum RxRing {
    Blocks(BlockRing),
    Slots(SlotRing),
}

impl RxRing {
    /// Wraps a mapped RX ring of `block_count` blocks of `block_size` bytes, laid out as `kind`;
    /// `frame_size` is the V2 slot size.
    pub(crate) fn new(
        kind: RxRingKind,
        map: Mapping,
        block_size: usize,
        block_count: usize,
        frame_size: usize,
    ) -> RxRing {
        match kind {
            RxRingKind::Blocks => RxRing::Blocks(BlockRing::new(map, block_size, block_count)),
            RxRingKind::Slots => {
                RxRing::Slots(SlotRing::new(map, block_size, block_count, frame_size))
            }
        }
    }

    /// The next received packet, left in the ring until [`RxRing::advance`].
    pub(crate) fn peek(&mut self) -> Option<RxPacket<'_>> {
        match self {
            RxRing::Blocks(ring) => ring.peek(),
            RxRing::Slots(ring) => ring.peek(),
        }
    }

    /// Consumes the packet [`RxRing::peek`] returned.
    pub(crate) fn advance(&mut self) {
        match self {
            RxRing::Blocks(ring) => ring.advance(),
            RxRing::Slots(ring) => ring.advance(),
        }
    }

    /// Blocks or slots given back early because their headers did not add up.
    pub(crate) fn corrupt(&self) -> u64 {
        match self {
            RxRing::Blocks(ring) => ring.corrupt_blocks,
            RxRing::Slots(ring) => ring.corrupt_slots,
        }
    }
}

/// A `TPACKET_V3` RX ring: `block_count` blocks of `block_size` bytes.
pub(crate) struct BlockRing {
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

impl BlockRing {
    /// Wraps a mapped RX ring; `map.len()` must be `block_size * block_count`.
    fn new(map: Mapping, block_size: usize, block_count: usize) -> BlockRing {
        debug_assert_eq!(map.len(), block_size * block_count);
        BlockRing {
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

    /// The next received packet, left in the ring until [`BlockRing::advance`].
    fn peek(&mut self) -> Option<RxPacket<'_>> {
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

    /// Consumes the packet [`BlockRing::peek`] returned; gives its block back if it was the last.
    fn advance(&mut self) {
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

/// Where the slots of a V2 ring lie: `slots_per_block` slots of `slot_size` bytes at the start
/// of each block of `block_size` bytes (a slot never straddles two blocks).
#[derive(Clone, Copy)]
struct SlotLayout {
    slot_size: usize,
    block_size: usize,
    slots_per_block: usize,
    slots: usize,
}

impl SlotLayout {
    fn new(slot_size: usize, block_size: usize, block_count: usize) -> SlotLayout {
        let slots_per_block = (block_size / slot_size).max(1);
        SlotLayout {
            slot_size,
            block_size,
            slots_per_block,
            slots: slots_per_block * block_count,
        }
    }

    /// Offset of slot `index` (< `slots`) in the mapping.
    fn offset(&self, index: usize) -> usize {
        (index / self.slots_per_block) * self.block_size
            + (index % self.slots_per_block) * self.slot_size
    }
}

/// A `TPACKET_V2` RX ring: one packet per slot of `frame_size` bytes, `block_size /
/// frame_size` slots per block. The kernel hands over each slot as soon as it has written it,
/// so a packet waits for no block to fill or time out: the latency of V2, for one status check
/// per packet instead of per block.
pub(crate) struct SlotRing {
    map: Mapping,
    layout: SlotLayout,
    /// The slot the worker reads next (the kernel fills them in the same order).
    head: usize,
    /// Slots given back early because their headers were inconsistent.
    pub corrupt_slots: u64,
}

impl SlotRing {
    /// Wraps a mapped RX ring; `map.len()` must be `block_size * block_count`.
    fn new(map: Mapping, block_size: usize, block_count: usize, slot_size: usize) -> SlotRing {
        debug_assert_eq!(map.len(), block_size * block_count);
        SlotRing {
            map,
            layout: SlotLayout::new(slot_size, block_size, block_count),
            head: 0,
            corrupt_slots: 0,
        }
    }

    fn slot(&self) -> *mut u8 {
        // SAFETY: `head < slots`, so the slot lies inside the mapping.
        unsafe { self.map.ptr().add(self.layout.offset(self.head)) }
    }

    fn status(&self) -> &AtomicU32 {
        // SAFETY: slots start at multiples of 16 inside the mapping; `tp_status` is their first
        // word; the mapping lives as long as `self`.
        unsafe { status_word(self.slot()) }
    }

    /// Gives the current slot back to the kernel and moves to the next.
    fn release_slot(&mut self) {
        self.status()
            .store(libc::TP_STATUS_KERNEL, Ordering::Release);
        self.head = (self.head + 1) % self.layout.slots;
    }

    /// The next received packet, left in the ring until [`SlotRing::advance`]. A slot whose
    /// header does not add up is counted and given back.
    fn peek(&mut self) -> Option<RxPacket<'_>> {
        // Each turn either returns or gives a slot back, so one lap of the ring is the bound.
        for _ in 0..=self.layout.slots {
            let status = self.status().load(Ordering::Acquire);
            if status & libc::TP_STATUS_USER == 0 {
                return None;
            }
            let slot = self.slot();
            // SAFETY: the slot is ours (TP_STATUS_USER, acquired above) and its headers lie
            // inside it (`SLOT_HEADER` <= the smallest slot, 2048 bytes); read_unaligned makes
            // no alignment assumption.
            let (header, address) = unsafe {
                (
                    slot.cast::<libc::tpacket2_hdr>().read_unaligned(),
                    slot.add(SLOT_ADDRESS)
                        .cast::<libc::sockaddr_ll>()
                        .read_unaligned(),
                )
            };
            let data = header.tp_mac as usize;
            let snaplen = header.tp_snaplen as usize;
            if data < SLOT_HEADER || data + snaplen > self.layout.slot_size {
                self.corrupt_slots += 1;
                self.release_slot();
                continue;
            }
            let vlan = (status & libc::TP_STATUS_VLAN_VALID != 0).then(|| {
                let tpid = if status & libc::TP_STATUS_VLAN_TPID_VALID != 0 {
                    header.tp_vlan_tpid
                } else {
                    0x8100
                };
                (tpid, header.tp_vlan_tci)
            });
            // SAFETY: `data + snaplen <= slot_size` was checked, so the bytes are inside the
            // slot; the slot stays ours until `release_slot`, which needs `&mut self` and so
            // cannot run while the slice is borrowed.
            let bytes = unsafe { std::slice::from_raw_parts(slot.add(data), snaplen) };
            return Some(RxPacket {
                data: bytes,
                wire_len: header.tp_len,
                vlan,
                outgoing: address.sll_pkttype == libc::PACKET_OUTGOING,
            });
        }
        None
    }

    /// Consumes the packet [`SlotRing::peek`] returned.
    fn advance(&mut self) {
        if self.status().load(Ordering::Relaxed) & libc::TP_STATUS_USER != 0 {
            self.release_slot();
        }
    }
}

/// A `TPACKET_V2` TX ring: `block_count` blocks of `block_size` bytes, cut into slots of
/// `slot_size` bytes.
pub(crate) struct TxRing {
    map: Mapping,
    layout: SlotLayout,
    /// The slot the worker fills next (the kernel sends in the same order).
    head: usize,
}

impl TxRing {
    /// Wraps a mapped TX ring; `map.len()` must be `block_size * block_count`.
    pub(crate) fn new(
        map: Mapping,
        slot_size: usize,
        block_size: usize,
        block_count: usize,
    ) -> TxRing {
        debug_assert_eq!(map.len(), block_size * block_count);
        TxRing {
            map,
            layout: SlotLayout::new(slot_size, block_size, block_count),
            head: 0,
        }
    }

    /// Largest frame a slot holds.
    pub(crate) fn capacity(&self) -> usize {
        self.layout.slot_size - TX_DATA
    }

    fn slot(&self, index: usize) -> *mut u8 {
        // SAFETY: `index < slots`, so the slot lies inside the mapping.
        unsafe { self.map.ptr().add(self.layout.offset(index)) }
    }

    /// The status word of slot `index` (< the ring's slots).
    fn status(&self, index: usize) -> &AtomicU32 {
        // SAFETY: slots start at multiples of 16 inside the mapping; tp_status is their first
        // word; the mapping lives as long as `self`.
        unsafe { status_word(self.slot(index)) }
    }

    /// Whether the slot at `index` is ours to fill: neither waiting to be sent nor being sent.
    fn is_free(&self, index: usize) -> bool {
        self.status(index).load(Ordering::Acquire)
            & (libc::TP_STATUS_SEND_REQUEST | libc::TP_STATUS_SENDING)
            == 0
    }

    /// How many frames [`TxRing::push`] would take now, at most `want`: `push` fills slots in
    /// ring order and stops at the first one the kernel still holds, so this counts the free
    /// slots from the next one on up to that. Reads at most `want` status words.
    pub(crate) fn free(&self, want: usize) -> usize {
        let want = want.min(self.layout.slots);
        (0..want)
            .find(|&step| !self.is_free((self.head + step) % self.layout.slots))
            .unwrap_or(want)
    }

    /// Copies `frame` into the next slot and marks it for sending; `false` (and nothing
    /// written) when that slot is still the kernel's or the frame does not fit.
    pub(crate) fn push(&mut self, frame: &[u8]) -> bool {
        if frame.len() > self.capacity() || !self.is_free(self.head) {
            return false;
        }
        let slot = self.slot(self.head);
        let status = self.status(self.head);
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
        self.head = (self.head + 1) % self.layout.slots;
        true
    }
}
