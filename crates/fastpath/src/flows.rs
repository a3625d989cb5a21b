//! The openflow app's hand on the kernel's flow cache ([`FlowMirror`]): `flows` (flow key ->
//! what to do, an LRU hash map), `flow_generation` (which entries are current) and
//! `flow_counts` (packets and bytes per stored result, read through mmap).
//!
//! An install is one `bpf(2)` call on the worker's thread, made when the app's exact-match cache
//! takes a flow (at most once per flow and table generation, never per packet). A table change
//! is one call too: the generation goes up and every entry is stale at once, before the
//! change's `ctl` reply; stale entries are overwritten or age out of the LRU map. Reading the
//! counts is a read of shared memory.

use std::fmt;
use std::os::fd::AsFd;
use std::sync::atomic::Ordering;

use aya::maps::{Array, HashMap, MapData};
use wirespeed_dataplane::app::openflow::kernel::{FlowSync, KernelDecision};
use wirespeed_packet::flow_key::FlowKey as SyncedKey;
use wirespeed_packet::memory::SharedWords;

use crate::FastPathError;
use crate::maps::{self, FlowEntry, FlowKey};

/// 32-bit words of one result's counts in `flow_counts` (packets, then bytes, each a u64).
const WORDS_PER_RESULT: usize = 4;

/// EtherTypes and protocols of the keys the program builds (plain IPv4 or IPv6 with UDP or
/// TCP, untagged): other keys are never looked up there.
const ETHERTYPE_IPV4: u16 = 0x0800;
const ETHERTYPE_IPV6: u16 = 0x86dd;
const PROTO_TCP: u8 = 6;
const PROTO_UDP: u8 = 17;

/// See the module documentation.
pub struct FlowMirror {
    flows: HashMap<MapData, FlowKey, FlowEntry>,
    generation_map: Array<MapData, u32>,
    generation: u32,
    counts: SharedWords,
    /// Results `flow_counts` has room for.
    results: u32,
    /// Ports on the fast path (slots 0..ports); an output elsewhere stays in user space.
    ports: usize,
    refused: u64,
}

impl fmt::Debug for FlowMirror {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FlowMirror")
            .field("generation", &self.generation)
            .field("refused", &self.refused)
            .finish_non_exhaustive()
    }
}

impl FlowMirror {
    pub(crate) fn new(
        flows: HashMap<MapData, FlowKey, FlowEntry>,
        generation_map: Array<MapData, u32>,
        counts: &MapData,
        results: u32,
        ports: usize,
    ) -> Result<FlowMirror, FastPathError> {
        let words = results as usize * WORDS_PER_RESULT;
        let counts = SharedWords::map(counts.fd().as_fd(), words).map_err(|source| {
            FastPathError::Mapping {
                map: "flow_counts",
                source,
            }
        })?;
        let generation = generation_map.get(&0, 0).unwrap_or(0);
        Ok(FlowMirror {
            flows,
            generation_map,
            generation,
            counts,
            results,
            ports,
            refused: 0,
        })
    }

    /// The u64 at words `at` and `at + 1` (low word first), which the kernel adds to
    /// atomically: read high, low, high again until the high word held still, so a carry
    /// between the two reads is never seen half done.
    fn read_u64(&self, at: usize) -> u64 {
        let words = self.counts.words();
        let (Some(low), Some(high)) = (words.get(at), words.get(at + 1)) else {
            return 0;
        };
        loop {
            let before = high.load(Ordering::Acquire);
            let value = low.load(Ordering::Acquire);
            if high.load(Ordering::Acquire) == before {
                return u64::from(before) << 32 | u64::from(value);
            }
        }
    }
}

impl FlowSync for FlowMirror {
    fn install(&mut self, key: &SyncedKey, result: u32, decision: &KernelDecision) {
        let plain = key.flags == 0
            && key.vlan == 0
            && matches!(key.ethertype, ETHERTYPE_IPV4 | ETHERTYPE_IPV6)
            && matches!(key.ip_proto, PROTO_TCP | PROTO_UDP);
        if !plain {
            return;
        }
        if result >= self.results || usize::from(decision.out_port) >= self.ports {
            self.refused += 1;
            return;
        }
        let mut entry = FlowEntry {
            generation: self.generation,
            result,
            out_slot: decision.out_port,
            ..FlowEntry::default()
        };
        if let Some(mac) = decision.eth_dst {
            entry.ops |= maps::FLOW_SET_DST;
            entry.dst = mac;
        }
        if let Some(mac) = decision.eth_src {
            entry.ops |= maps::FLOW_SET_SRC;
            entry.src = mac;
        }
        if decision.dec_ttl {
            entry.ops |= maps::FLOW_DEC_TTL;
        }
        if self.flows.insert(FlowKey(*key), entry, 0).is_err() {
            self.refused += 1;
        }
    }

    fn invalidate(&mut self) {
        self.generation = self.generation.wrapping_add(1);
        if self.generation_map.set(0, self.generation, 0).is_err() {
            // The entries cannot be made stale at once: remove them one by one, so that no
            // frame is forwarded by a decision of the old tables.
            let keys: Vec<FlowKey> = self.flows.keys().filter_map(Result::ok).collect();
            for key in keys {
                let _ = self.flows.remove(&key);
            }
        }
    }

    fn counts(&self, result: u32) -> (u64, u64) {
        let at = result as usize * WORDS_PER_RESULT;
        (self.read_u64(at), self.read_u64(at + 2))
    }

    fn refused(&self) -> u64 {
        self.refused
    }
}
