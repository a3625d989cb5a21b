//! The learning stage: records which port every source MAC (per VLAN) was seen on.
//!
//! Learning is its own stage, before forwarding and blind to destinations (VPP's `l2_learn`
//! beside `l2_fwd`): what it learns from a batch is already known when the forwarding stage
//! looks up that batch's destinations. It works in two passes: hash every source key and
//! prefetch its buckets, then learn them all, so the bucket loads of a batch overlap.
//!
//! A group (multicast or broadcast) or all-zero source address is never a station: such frames
//! are dropped as [`DropReason::MartianSource`] (as the Linux bridge drops them), never learned.
//! A full table refuses new sources ([`LearnCounters::refused`]); the frames themselves still
//! go on to forwarding, so a host that could not be learned is flooded to, never cut off.
//!
//! Each batch also sweeps [`SWEEP_PER_BATCH`] buckets of the table for aged entries, so the
//! table's live count follows the configured age without a timer thread.

use std::fmt;

use wirespeed_packet::flow_key::FlowKey;
use wirespeed_packet::{Batch, DropReason, MAX_BATCH};

use crate::stage::vlan::BatchVlans;
use crate::table::mac::{Learned, MacHash, MacKey, MacTable};

/// Buckets of the MAC table swept for aged entries per batch. 2 lines of 64 bytes are noise
/// next to a batch, and at 30 k batches/s a table of 32 k buckets is swept in about half a
/// second.
pub const SWEEP_PER_BATCH: usize = 2;

/// Counters of the learning stage.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LearnCounters {
    /// New entries (including sources that had aged out and came back).
    pub learned: u64,
    /// Sources seen again on the port they were learned on.
    pub refreshed: u64,
    /// Sources that appeared on another port of the same VLAN.
    pub moved: u64,
    /// New sources the table had no room for.
    pub refused: u64,
    /// Group or all-zero sources, dropped.
    pub invalid_source: u64,
}

/// What the stage did with one packet's source; its `Display` is the stage's trace line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Learning {
    /// Dropped by an earlier stage.
    Skipped,
    Learned(Learned),
    InvalidSource,
}

impl fmt::Display for Learning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Learning::Learned(Learned::New) => write!(f, "learned"),
            Learning::Learned(Learned::Refreshed) => write!(f, "refreshed"),
            Learning::Learned(Learned::Moved { from }) => write!(f, "moved from port {from}"),
            Learning::Learned(Learned::Refused) => write!(f, "refused: table full"),
            Learning::InvalidSource => write!(f, "group or zero source"),
            Learning::Skipped => write!(f, "-"),
        }
    }
}

/// Learns the sources of a batch into a [`MacTable`].
#[derive(Debug)]
pub struct Learn {
    keys: [MacKey; MAX_BATCH],
    hashes: [MacHash; MAX_BATCH],
    /// What `process::<true>` did with each packet of the last batch.
    trace: [Learning; MAX_BATCH],
    counters: LearnCounters,
}

impl Default for Learn {
    fn default() -> Self {
        Self::new()
    }
}

impl Learn {
    pub fn new() -> Self {
        Learn {
            keys: [MacKey::new(0, Default::default()); MAX_BATCH],
            hashes: [MacHash::default(); MAX_BATCH],
            trace: [Learning::Skipped; MAX_BATCH],
            counters: LearnCounters::default(),
        }
    }

    pub fn counters(&self) -> LearnCounters {
        self.counters
    }

    /// The outcomes of the last batch processed with tracing on, packet by packet.
    pub fn trace(&self, len: usize) -> &[Learning] {
        self.trace.get(..len).unwrap_or(&self.trace)
    }

    /// Learns the source of every packet of `batch` not yet dropped: `keys[i]` is its flow key,
    /// `vlans[i]` its VLAN (from the VLAN stage); `now` is the batch's TSC. With `TRACE`, each
    /// outcome is kept for [`Learn::trace`].
    pub fn process<const TRACE: bool>(
        &mut self,
        table: &mut MacTable,
        batch: &mut Batch,
        keys: &[FlowKey],
        vlans: &BatchVlans,
        now: u64,
    ) {
        let metas = batch.meta_mut();
        // 1. Hash every source and prefetch its buckets.
        for (i, (meta, key)) in metas.iter_mut().zip(keys).enumerate() {
            if TRACE {
                self.trace[i] = Learning::Skipped;
            }
            if meta.drop.is_some() {
                continue;
            }
            let src = key.src_mac;
            if src.is_multicast() || src.0 == [0; 6] {
                meta.drop = Some(DropReason::MartianSource);
                self.counters.invalid_source += 1;
                if TRACE {
                    self.trace[i] = Learning::InvalidSource;
                }
                continue;
            }
            let mac_key = MacKey::new(vlans[i], src);
            let hash = table.hash(mac_key);
            table.prefetch(hash);
            self.keys[i] = mac_key;
            self.hashes[i] = hash;
        }
        table.sweep(now, SWEEP_PER_BATCH);
        // 2. Learn.
        for (i, (meta, key)) in metas.iter().zip(keys).enumerate() {
            if meta.drop.is_some() {
                continue;
            }
            let learned = table.learn(self.keys[i], self.hashes[i], u16::from(key.in_port), now);
            match learned {
                Learned::New => self.counters.learned += 1,
                Learned::Refreshed => self.counters.refreshed += 1,
                Learned::Moved { .. } => self.counters.moved += 1,
                Learned::Refused => self.counters.refused += 1,
            }
            if TRACE {
                self.trace[i] = Learning::Learned(learned);
            }
        }
    }
}
