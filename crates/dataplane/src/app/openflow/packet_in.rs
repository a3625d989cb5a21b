//! Frames a worker sends to the OpenFlow controller (PACKET_IN), on their way to the agent.
//!
//! A worker must neither block nor allocate for a packet, and the agent runs on a control
//! thread: between them is one bounded single-producer single-consumer ring per worker (`rtrb`,
//! as the command channel), preallocated with [`RING_CAPACITY`] records of fixed size. The
//! worker copies the frame (at most the action's `max_len` bytes, and at most
//! [`PACKET_IN_BYTES`]) into the next free record; when the ring is full, or no agent took its
//! end, the frame is dropped and counted per reason (`openflow.packet_in_dropped_no_match`,
//! `openflow.packet_in_dropped_action` in `ctl show counters`). The agent pops the records and
//! turns them into PACKET_IN messages: no buffering on the switch (buffer_id is OFP_NO_BUFFER).

use rtrb::{Consumer, Producer, RingBuffer};

/// Bytes of a frame a record keeps: a full Ethernet frame of the usual 1500-byte MTU with two
/// VLAN tags and room to spare. A longer frame is cut here, and its PACKET_IN's `total_len`
/// still says how long it was.
pub const PACKET_IN_BYTES: usize = 2048;

/// Records one worker's ring holds: at 2 KiB each, 512 KiB per worker, enough for a burst of
/// new flows while the agent's thread sleeps between two turns (5 ms when idle).
pub const RING_CAPACITY: usize = 256;

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
}

/// One frame for the controller.
#[derive(Clone, Debug)]
pub struct PacketIn {
    pub origin: Origin,
    /// The app's index of the port the frame arrived on.
    pub in_port: u16,
    /// The frame's length when it was sent (before any cut).
    pub total_len: u16,
    /// Bytes of `data` in use.
    pub len: u16,
    pub data: [u8; PACKET_IN_BYTES],
}

impl PacketIn {
    /// The frame's bytes as kept.
    pub fn frame(&self) -> &[u8] {
        &self.data[..usize::from(self.len).min(PACKET_IN_BYTES)]
    }
}

/// The worker's end of a ring.
pub type Sender = Producer<PacketIn>;
/// The agent's end of a ring.
pub type Receiver = Consumer<PacketIn>;

/// A ring's two ends: the worker's, given to its app with
/// [`OpenFlow::set_packet_in`](super::OpenFlow::set_packet_in), and the agent's.
pub fn ring() -> (Sender, Receiver) {
    RingBuffer::new(RING_CAPACITY)
}

/// Copies `frame` (at most `max_len` bytes) into the next free record of `ring`; `false` when
/// the ring is full or its reader has gone.
pub fn send(ring: &mut Sender, origin: Origin, in_port: u16, frame: &[u8], max_len: u16) -> bool {
    if ring.is_abandoned() {
        return false;
    }
    let len = frame.len().min(usize::from(max_len)).min(PACKET_IN_BYTES);
    let mut record = PacketIn {
        origin,
        in_port,
        total_len: u16::try_from(frame.len()).unwrap_or(u16::MAX),
        len: len as u16,
        data: [0; PACKET_IN_BYTES],
    };
    record.data[..len].copy_from_slice(&frame[..len]);
    // Moved into the ring's own preallocated slot: nothing is allocated.
    ring.push(record).is_ok()
}
