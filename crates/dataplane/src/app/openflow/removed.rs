//! Flows a worker removed by timeout that asked for a FLOW_REMOVED (SEND_FLOW_REM), on their
//! way to the OpenFlow agent.
//!
//! Flows expire on the worker, between batches (`OpenFlow::expire`); the agent runs on a
//! control thread. Between them is one bounded single-producer single-consumer ring per worker,
//! like the frames for the controller ([`super::packet_in`]). The removed entry itself travels
//! (its action list is freed on the control thread, not the worker); a full ring drops the
//! report and counts it (`openflow.flow_removed_dropped`). Every worker keeps its own copy of
//! each flow, so the agent reports a flow once every worker's copy has gone.

use std::time::Duration;

use rtrb::{Consumer, Producer, RingBuffer};

use super::FlowEntry;

/// Reports one worker's ring holds: expirations come in bursts only when a controller set
/// many flows' timeouts alike.
pub const RING_CAPACITY: usize = 1024;

/// Which timeout removed a flow (OpenFlow 1.3 `ofp_flow_removed_reason`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Timeout {
    Idle,
    Hard,
}

impl Timeout {
    /// The wire value: OFPRR_IDLE_TIMEOUT or OFPRR_HARD_TIMEOUT.
    pub fn code(self) -> u8 {
        match self {
            Timeout::Idle => 0,
            Timeout::Hard => 1,
        }
    }
}

/// A flow one worker removed by timeout.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Expired {
    pub table: u8,
    pub entry: FlowEntry,
    pub timeout: Timeout,
    /// This worker's counts of the flow.
    pub packets: u64,
    pub bytes: u64,
    /// From its first batch to its removal.
    pub age: Duration,
}

/// The worker's end of a ring.
pub type Sender = Producer<Expired>;
/// The agent's end of a ring.
pub type Receiver = Consumer<Expired>;

/// A ring's two ends: the worker's, given to its app with
/// [`OpenFlow::set_flow_removed`](super::OpenFlow::set_flow_removed), and the agent's.
pub fn ring() -> (Sender, Receiver) {
    RingBuffer::new(RING_CAPACITY)
}
