//! The parse stage: one pass over the batch fills every packet's metadata and flow key.
//!
//! Malformed frames are not errors of the stage: each gets a [`DropReason`] in its metadata and
//! the worker counts and recycles it. The per-reason counts therefore live in the worker, not
//! here; this stage counts only what it parsed.

use wirespeed_packet::flow_key::FlowKey;
use wirespeed_packet::parse::parse;
use wirespeed_packet::{Batch, DropReason, FramePool};

/// Counters of the parse stage.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ParseCounters {
    /// Packets parsed successfully.
    pub parsed: u64,
    /// Packets marked for drop (the reason is counted by the worker).
    pub malformed: u64,
}

/// Fills `Meta` and `FlowKey` for every packet of a batch.
#[derive(Debug, Default)]
pub struct Parse {
    counters: ParseCounters,
}

impl Parse {
    pub fn new() -> Self {
        Self::default()
    }

    /// Parses every packet of `batch`; `keys[i]` receives packet i's flow key.
    pub fn process(&mut self, pool: &FramePool, batch: &mut Batch, keys: &mut [FlowKey]) {
        let (descs, metas) = batch.split_mut();
        for ((desc, meta), key) in descs.iter().zip(metas.iter_mut()).zip(keys.iter_mut()) {
            let frame = pool.frame(desc.frame);
            let start = desc.offset as usize;
            let Some(bytes) = frame.get(start..start + desc.len as usize) else {
                // A descriptor that points outside its frame is a backend bug or a hostile
                // length; either way the packet cannot be trusted.
                meta.drop = Some(DropReason::Oversize);
                self.counters.malformed += 1;
                continue;
            };
            match parse(bytes, desc.port, meta, key) {
                Ok(()) => self.counters.parsed += 1,
                Err(reason) => {
                    meta.drop = Some(reason);
                    self.counters.malformed += 1;
                }
            }
        }
    }

    pub fn counters(&self) -> ParseCounters {
        self.counters
    }
}
