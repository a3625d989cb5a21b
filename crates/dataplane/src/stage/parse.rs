//! The parse stage: one pass over the batch fills every packet's metadata and flow key.
//!
//! Malformed frames are not errors of the stage: each gets a [`DropReason`] in its metadata and
//! the worker counts and recycles it. The per-reason counts therefore live in the worker, not
//! here; this stage counts only what it parsed.

use wirespeed_packet::flow_key::FlowKey;
use wirespeed_packet::parse::{parse_batch, parse_batch_unhashed};
use wirespeed_packet::{Batch, FramePool};

/// Counters of the parse stage.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ParseCounters {
    /// Packets parsed successfully.
    pub parsed: u64,
    /// Packets marked for drop (the reason is counted by the worker).
    pub malformed: u64,
}

/// Fills `Meta` and `FlowKey` for every packet of a batch.
#[derive(Debug)]
pub struct Parse {
    counters: ParseCounters,
    /// Whether `Meta::flow_hash` is computed.
    flow_hash: bool,
}

impl Default for Parse {
    fn default() -> Self {
        Self::new()
    }
}

impl Parse {
    /// A parse that also hashes every flow key into `Meta::flow_hash` (caches, ACLs, ECMP).
    pub fn new() -> Self {
        Parse {
            counters: ParseCounters::default(),
            flow_hash: true,
        }
    }

    /// A parse for pipelines in which no stage reads `Meta::flow_hash` (left 0): the CRC32C
    /// of the 56-byte key is a quarter of the parse's instructions.
    pub fn without_flow_hash() -> Self {
        Parse {
            flow_hash: false,
            ..Parse::new()
        }
    }

    /// Switches the flow hash on or off from the next batch: apps whose need for it changes at
    /// run time (an ACL loaded, ECMP routes added) call this between batches.
    pub fn set_flow_hash(&mut self, on: bool) {
        self.flow_hash = on;
    }

    /// Parses every packet of `batch`; `keys[i]` receives packet i's flow key. The loop itself
    /// is [`parse_batch`], which picks the copy of the parser compiled for this CPU once per
    /// batch.
    pub fn process(&mut self, pool: &FramePool, batch: &mut Batch, keys: &mut [FlowKey]) {
        let packets = batch.len().min(keys.len());
        let malformed = if self.flow_hash {
            parse_batch(pool, batch, keys)
        } else {
            parse_batch_unhashed(pool, batch, keys)
        };
        self.counters.parsed += (packets - malformed) as u64;
        self.counters.malformed += malformed as u64;
    }

    pub fn counters(&self) -> ParseCounters {
        self.counters
    }
}
