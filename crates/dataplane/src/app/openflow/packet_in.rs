//! Frames a worker sends to the OpenFlow controller (PACKET_IN), on their way to the agent.
//!
//! A worker must neither block nor allocate for a packet, and the agent runs on a control
//! thread: between them is one bounded single-producer single-consumer ring of bytes per
//! worker (`rtrb`, as the command channel), preallocated with [`RING_BYTES`]. The worker writes
//! a record, a fixed header and the frame (at most the action's `max_len` bytes; all of it for
//! `OFPCML_NO_BUFFER`, a jumbo frame too), as one chunk that the agent sees whole or not at
//! all; when the ring has no room, or no agent took its end, the frame is dropped and counted
//! per reason (`openflow.packet_in_dropped_no_match`, `openflow.packet_in_dropped_action` in
//! `ctl show counters`). Records take the room their frames need, so a ring holds thousands
//! of short frames and still dozens of jumbo ones. The agent pops the records and turns them
//! into PACKET_IN messages: no buffering on the switch (buffer_id is OFP_NO_BUFFER).

use rtrb::{Consumer, Producer, RingBuffer};

/// Bytes of one worker's ring: 512 KiB, room for a burst of new flows while the agent's thread
/// sleeps between two turns (5 ms when idle): about 6 500 records of 64-byte frames, 340 of
/// 1518-byte ones, 56 of 9018-byte ones.
pub const RING_BYTES: usize = 512 << 10;

/// Bytes of a record's header: reason, table, in_port, total_len, len, cookie, metadata.
pub const RECORD_HEADER: usize = 24;

/// Why a frame goes to the controller (OpenFlow 1.3 `ofp_packet_in_reason`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Reason {
    /// A table-miss flow entry (priority 0, matches everything) sent it: `OFPR_NO_MATCH`.
    #[default]
    NoMatch,
    /// Any other flow entry's CONTROLLER action: `OFPR_ACTION`.
    Action,
}

impl Reason {
    /// The wire value.
    pub fn code(self) -> u8 {
        match self {
            Reason::NoMatch => 0,
            Reason::Action => 1,
        }
    }
}

/// Where a CONTROLLER action came from: what its PACKET_IN says besides the frame.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Origin {
    pub reason: Reason,
    pub table: u8,
    pub cookie: u64,
    /// The pipeline's metadata when the flow matched (what earlier tables wrote): a context
    /// field the PACKET_IN's match carries when it is not zero (OpenFlow 1.3 §7.4.1).
    pub metadata: u64,
}

/// One frame for the controller, as the agent receives it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PacketIn {
    pub origin: Origin,
    /// The app's index of the port the frame arrived on.
    pub in_port: u16,
    /// The frame's length when it was sent (before any cut to `max_len`).
    pub total_len: u16,
    /// The frame's bytes as kept.
    pub data: Vec<u8>,
}

impl PacketIn {
    /// The frame's bytes as kept.
    pub fn frame(&self) -> &[u8] {
        &self.data
    }
}

/// The worker's end of a ring.
pub struct Sender(Producer<u8>);

/// The agent's end of a ring.
pub struct Receiver(Consumer<u8>);

/// A ring's two ends: the worker's, given to its app with
/// [`OpenFlow::set_packet_in`](super::OpenFlow::set_packet_in), and the agent's.
pub fn ring() -> (Sender, Receiver) {
    let (producer, consumer) = RingBuffer::new(RING_BYTES);
    (Sender(producer), Receiver(consumer))
}

/// Copies `bytes` into the two parts of a ring chunk, in order.
fn fill(first: &mut [u8], second: &mut [u8], bytes: &[&[u8]]) {
    let mut parts = first.iter_mut().chain(second.iter_mut());
    for (slot, byte) in (&mut parts).zip(bytes.iter().flat_map(|b| b.iter())) {
        *slot = *byte;
    }
}

/// Copies `frame` (at most `max_len` bytes) into the ring as one record; `false` when the ring
/// has no room for it or its reader has gone. Nothing is allocated: the record is written into
/// the ring's own preallocated bytes.
pub fn send(ring: &mut Sender, origin: Origin, in_port: u16, frame: &[u8], max_len: u16) -> bool {
    if ring.0.is_abandoned() {
        return false;
    }
    let len = frame.len().min(usize::from(max_len));
    let total_len = u16::try_from(frame.len()).unwrap_or(u16::MAX);
    let mut header = [0u8; RECORD_HEADER];
    header[0] = origin.reason.code();
    header[1] = origin.table;
    header[2..4].copy_from_slice(&in_port.to_le_bytes());
    header[4..6].copy_from_slice(&total_len.to_le_bytes());
    header[6..8].copy_from_slice(&(len as u16).to_le_bytes());
    header[8..16].copy_from_slice(&origin.cookie.to_le_bytes());
    header[16..24].copy_from_slice(&origin.metadata.to_le_bytes());
    let Ok(mut chunk) = ring.0.write_chunk(RECORD_HEADER + len) else {
        return false;
    };
    let (first, second) = chunk.as_mut_slices();
    fill(first, second, &[&header, &frame[..len]]);
    chunk.commit_all();
    true
}

impl Receiver {
    /// The next record, whole, or `None` when the ring holds none.
    pub fn pop(&mut self) -> Option<PacketIn> {
        let mut header = [0u8; RECORD_HEADER];
        {
            let chunk = self.0.read_chunk(RECORD_HEADER).ok()?;
            let (first, second) = chunk.as_slices();
            for (slot, byte) in header.iter_mut().zip(first.iter().chain(second)) {
                *slot = *byte;
            }
            // Not committed: the header is read again with its frame below.
        }
        let u16_at = |at: usize| u16::from_le_bytes([header[at], header[at + 1]]);
        let len = usize::from(u16_at(6));
        // The worker commits a record whole, so its frame is there once its header is.
        let chunk = self.0.read_chunk(RECORD_HEADER + len).ok()?;
        let (first, second) = chunk.as_slices();
        let data: Vec<u8> = first
            .iter()
            .chain(second)
            .skip(RECORD_HEADER)
            .copied()
            .collect();
        chunk.commit_all();
        let u64_at = |at: usize| {
            let mut bytes = [0u8; 8];
            bytes.copy_from_slice(&header[at..at + 8]);
            u64::from_le_bytes(bytes)
        };
        Some(PacketIn {
            origin: Origin {
                reason: if header[0] == Reason::Action.code() {
                    Reason::Action
                } else {
                    Reason::NoMatch
                },
                table: header[1],
                cookie: u64_at(8),
                metadata: u64_at(16),
            },
            in_port: u16_at(2),
            total_len: u16_at(4),
            data,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_of_any_size_come_out_whole_and_in_order_across_the_ring_end() {
        let (mut worker, mut agent) = ring();
        let origin = Origin {
            reason: Reason::Action,
            table: 3,
            cookie: 0x0102_0304_0506_0708,
            metadata: 0x1122_3344_5566_7788,
        };
        // Frames of 60 to 9018 bytes, over the ring's end several times.
        let mut sent = 0usize;
        for round in 0..1000usize {
            let len = [60, 1514, 9018, 333][round % 4];
            let frame: Vec<u8> = (0..len).map(|i| (i + round) as u8).collect();
            assert!(send(&mut worker, origin, round as u16, &frame, u16::MAX));
            let got = agent.pop().unwrap();
            assert_eq!(got.origin, origin);
            assert_eq!((got.in_port, got.total_len), (round as u16, len as u16));
            assert_eq!(got.data, frame);
            sent += RECORD_HEADER + len;
        }
        assert!(sent > 4 * RING_BYTES);
        assert!(agent.pop().is_none());
        // max_len cuts, total_len still says how long it was.
        assert!(send(&mut worker, origin, 0, &[7; 100], 20));
        let cut = agent.pop().unwrap();
        assert_eq!((cut.data.len(), cut.total_len), (20, 100));
    }

    #[test]
    fn a_full_ring_refuses_a_record_and_takes_it_again_once_read() {
        let (mut worker, mut agent) = ring();
        let frame = [1u8; 9018];
        let fits = RING_BYTES / (RECORD_HEADER + frame.len());
        for _ in 0..fits {
            assert!(send(&mut worker, Origin::default(), 0, &frame, u16::MAX));
        }
        assert!(!send(&mut worker, Origin::default(), 0, &frame, u16::MAX));
        assert_eq!(agent.pop().unwrap().data.len(), frame.len());
        assert!(send(&mut worker, Origin::default(), 0, &frame, u16::MAX));
        drop(agent);
        assert!(!send(&mut worker, Origin::default(), 0, &[1; 60], u16::MAX));
    }
}
