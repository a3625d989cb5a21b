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
use std::net::{Ipv4Addr, Ipv6Addr};
use std::os::fd::AsFd;
use std::sync::atomic::Ordering;

use aya::maps::{Array, HashMap, MapData};
use wirespeed_dataplane::app::openflow::kernel::{FlowSync, KernelDecision, KernelTag};
use wirespeed_packet::flow_key::FlowKey as SyncedKey;
use wirespeed_packet::memory::SharedWords;

use crate::FastPathError;
use crate::maps::{self, FlowEntry, FlowKey};

/// 32-bit words of one result's counts in `flow_counts` (packets, then bytes, each a u64).
const WORDS_PER_RESULT: usize = 4;

/// EtherTypes and protocols of the keys the program builds (plain IPv4 or IPv6 with UDP or
/// TCP, untagged or behind one 802.1Q tag): other keys are never looked up there.
const ETHERTYPE_IPV4: u16 = 0x0800;
const ETHERTYPE_IPV6: u16 = 0x86dd;
const PROTO_TCP: u8 = 6;
const PROTO_UDP: u8 = 17;

/// The `flows` value that carries out `decision` on the frames of an IPv4 flow (`ipv4`) or an
/// IPv6 one, apart from its generation and result. The other family's address rewrites do
/// nothing to them (as in user space) and are left out.
fn entry(decision: &KernelDecision, ipv4: bool) -> FlowEntry {
    let mut entry = FlowEntry {
        out_slot: decision.out_port.unwrap_or(0),
        dst: decision.eth_dst.unwrap_or_default(),
        src: decision.eth_src.unwrap_or_default(),
        l4_src: decision.l4_src.unwrap_or(0),
        l4_dst: decision.l4_dst.unwrap_or(0),
        ..FlowEntry::default()
    };
    let (tag_op, tci, keep) = match decision.tag {
        KernelTag::Keep => (0, 0, 0),
        KernelTag::Push(vid) => (maps::FLOW_PUSH_VLAN, vid, 0),
        KernelTag::Pop => (maps::FLOW_POP_VLAN, 0, 0),
        // The PCP and DEI bits stay.
        KernelTag::SetVid(vid) => (maps::FLOW_SET_TCI, vid, 0xf000),
        KernelTag::Replace(vid) => (maps::FLOW_SET_TCI, vid, 0),
    };
    entry.ops = tag_op;
    entry.vlan_tci = tci;
    entry.vlan_keep = keep;
    let (src, dst) = if ipv4 {
        let v4 = |addr: Option<Ipv4Addr>, field: &mut [u8; 16]| {
            addr.map(|addr| field[..4].copy_from_slice(&addr.octets()))
        };
        (
            v4(decision.ipv4_src, &mut entry.ip_src),
            v4(decision.ipv4_dst, &mut entry.ip_dst),
        )
    } else {
        let v6 =
            |addr: Option<Ipv6Addr>, field: &mut [u8; 16]| addr.map(|addr| *field = addr.octets());
        (
            v6(decision.ipv6_src, &mut entry.ip_src),
            v6(decision.ipv6_dst, &mut entry.ip_dst),
        )
    };
    let ops = [
        (decision.out_port.is_none(), maps::FLOW_DROP),
        (decision.eth_dst.is_some(), maps::FLOW_SET_DST),
        (decision.eth_src.is_some(), maps::FLOW_SET_SRC),
        (decision.dec_ttl, maps::FLOW_DEC_TTL),
        (src.is_some(), maps::FLOW_SET_IP_SRC),
        (dst.is_some(), maps::FLOW_SET_IP_DST),
        (decision.l4_src.is_some(), maps::FLOW_SET_L4_SRC),
        (decision.l4_dst.is_some(), maps::FLOW_SET_L4_DST),
    ];
    for (on, op) in ops {
        if on {
            entry.ops |= op;
        }
    }
    entry
}

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
        let untagged = key.flags == 0 && key.vlan == 0;
        let plain = (untagged || key.flags == SyncedKey::FLAG_VLAN)
            && matches!(key.ethertype, ETHERTYPE_IPV4 | ETHERTYPE_IPV6)
            && matches!(key.ip_proto, PROTO_TCP | PROTO_UDP);
        if !plain {
            return;
        }
        let mut entry = entry(decision, key.ethertype == ETHERTYPE_IPV4);
        if result >= self.results || usize::from(entry.out_slot) >= self.ports {
            self.refused += 1;
            return;
        }
        entry.generation = self.generation;
        entry.result = result;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_part_of_a_decision_is_its_op_and_field() {
        let output = KernelDecision {
            out_port: Some(3),
            ..KernelDecision::default()
        };
        let plain = entry(&output, true);
        assert_eq!((plain.ops, plain.out_slot), (0, 3));
        assert_eq!(entry(&KernelDecision::default(), true).ops, maps::FLOW_DROP);

        let v4 = Ipv4Addr::new(198, 18, 1, 2);
        let v6 = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 5);
        let decision = KernelDecision {
            eth_dst: Some([1; 6]),
            eth_src: Some([2; 6]),
            ipv4_src: Some(v4),
            ipv4_dst: Some(v4),
            ipv6_src: Some(v6),
            ipv6_dst: Some(v6),
            l4_src: Some(1000),
            l4_dst: Some(53),
            tag: KernelTag::Push(100),
            dec_ttl: true,
            ..output
        };
        let every = maps::FLOW_SET_DST
            | maps::FLOW_SET_SRC
            | maps::FLOW_DEC_TTL
            | maps::FLOW_SET_IP_SRC
            | maps::FLOW_SET_IP_DST
            | maps::FLOW_SET_L4_SRC
            | maps::FLOW_SET_L4_DST
            | maps::FLOW_PUSH_VLAN;
        let ipv4 = entry(&decision, true);
        assert_eq!(ipv4.ops, every);
        assert_eq!((ipv4.dst, ipv4.src), ([1; 6], [2; 6]));
        assert_eq!((ipv4.l4_src, ipv4.l4_dst, ipv4.vlan_tci), (1000, 53, 100));
        let mut want = [0; 16];
        want[..4].copy_from_slice(&v4.octets());
        assert_eq!((ipv4.ip_src, ipv4.ip_dst), (want, want));
        let ipv6 = entry(&decision, false);
        assert_eq!(ipv6.ops, every);
        assert_eq!((ipv6.ip_src, ipv6.ip_dst), (v6.octets(), v6.octets()));

        // A tagged frame's tag: popped, or its TCI rewritten keeping PCP and DEI or not.
        let tag = |tag| {
            let entry = entry(&KernelDecision { tag, ..output }, true);
            (entry.ops, entry.vlan_tci, entry.vlan_keep)
        };
        assert_eq!(tag(KernelTag::Keep), (0, 0, 0));
        assert_eq!(tag(KernelTag::Pop), (maps::FLOW_POP_VLAN, 0, 0));
        assert_eq!(tag(KernelTag::SetVid(5)), (maps::FLOW_SET_TCI, 5, 0xf000));
        assert_eq!(tag(KernelTag::Replace(6)), (maps::FLOW_SET_TCI, 6, 0));

        // The other family's addresses do nothing to a flow's frames.
        let only_v6 = KernelDecision {
            ipv6_dst: Some(v6),
            ..output
        };
        assert_eq!(entry(&only_v6, true).ops, 0);
        assert_eq!(entry(&only_v6, false).ops, maps::FLOW_SET_IP_DST);
        let only_v4 = KernelDecision {
            ipv4_src: Some(v4),
            ..output
        };
        assert_eq!(entry(&only_v4, false).ops, 0);
    }
}
