//! The OpenFlow app's record of each packet while tracing ([`OpenFlow::set_trace`]): which
//! tier answered, what the slow path did, where the packet went.

use std::fmt;

use wirespeed_packet::Meta;

use super::OpenFlow;
use crate::app::trace::{Arrival, Disposition, TraceRing};
use crate::stage::flow_cache::Looked;

/// What the slow path did for one packet; its `Display` is the trace line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SlowPath {
    /// Not needed: the fast path answered (or the packet was dropped before).
    Skipped,
    /// Missed, then found under a megaflow an earlier packet of the same batch installed.
    Relooked,
    /// The tables decided; their result was installed as a megaflow.
    Installed,
    /// The tables decided; the megaflow table was full, so the next such packet comes here too.
    Refused,
}

impl fmt::Display for SlowPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SlowPath::Skipped => "-",
            SlowPath::Relooked => "megaflow of an earlier packet of the batch",
            SlowPath::Installed => "slow path, megaflow installed",
            SlowPath::Refused => "slow path, megaflow table full",
        })
    }
}

/// One packet as the OpenFlow app decided it; its `Display` is a trace line, e.g. `port 0 len
/// 60 10.0.0.2 -> 10.1.0.2 | cache miss -> classifier miss | slow path, megaflow installed |
/// out port 1`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OpenFlowTrace {
    /// The batch's TSC.
    pub now: u64,
    pub arrival: Arrival,
    pub lookup: Looked,
    pub slow_path: SlowPath,
    /// A table missed (the miss action decided).
    pub table_miss: bool,
    pub disposition: Disposition,
}

impl fmt::Display for OpenFlowTrace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.arrival)?;
        if self.lookup != Looked::Skipped {
            write!(f, " | {}", self.lookup)?;
        }
        if self.slow_path != SlowPath::Skipped {
            write!(f, " | {}", self.slow_path)?;
        }
        if self.table_miss {
            f.write_str(" | table miss")?;
        }
        write!(f, " | {}", self.disposition)
    }
}

/// Tracing.
impl OpenFlow {
    /// Whether a batch whose every live packet the exact-match cache answers is decided packet
    /// by packet, without the groups of packets with equal keys, while the batches come
    /// without trains of one flow and the cache missed nothing in the batch before (on by
    /// default; see `has_trains`). Off, every batch takes the groups: for tests that hold the
    /// two ways to the same output and counts.
    pub fn set_whole_batch_hits(&mut self, on: bool) {
        self.whole_batch_hits = on;
    }

    /// Keeps the decisions of the last `records` packets (0: tracing off, the default). Between
    /// batches.
    pub fn set_trace(&mut self, records: usize) {
        let blank = OpenFlowTrace {
            now: 0,
            arrival: Arrival::default(),
            lookup: Looked::Skipped,
            slow_path: SlowPath::Skipped,
            table_miss: false,
            disposition: Disposition::Held,
        };
        self.trace = TraceRing::new(records, blank);
    }

    /// The traced packets, oldest first.
    pub fn packet_trace(&self) -> Vec<OpenFlowTrace> {
        self.trace.records()
    }
}

/// Keeps the record of one packet (`looked`: what the lookup stage found for it).
pub(super) fn push_record(
    trace: &mut TraceRing<OpenFlowTrace>,
    now: u64,
    arrival: Option<Arrival>,
    looked: Option<Looked>,
    slow_path: SlowPath,
    table_miss: bool,
    meta: &Meta,
) {
    trace.push(OpenFlowTrace {
        now,
        arrival: arrival.unwrap_or_default(),
        lookup: looked.unwrap_or(Looked::Skipped),
        slow_path,
        table_miss,
        disposition: Disposition::of(meta),
    });
}
