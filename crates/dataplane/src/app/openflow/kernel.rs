//! The openflow app's copy in the kernel: the flows of its exact-match cache whose answer the
//! XDP fast path can carry out (crates/fastpath, issue 17's split of seed 004's pipeline).
//!
//! User space stays the owner of every table. When its exact-match cache takes a flow, the app
//! hands the flow's key and its stored result's decision to a [`FlowSync`] (the fast path's
//! `FlowMirror`), if the kernel can apply it: a single output, after at most new MAC addresses
//! and a TTL decrement. Everything else (copies, flood, drops, IP and port rewrites, VLAN
//! tags, a table miss) stays on the user-space path, where it is counted by reason. When the
//! tables change, the app's flush of its caches also makes every kernel entry stale at once
//! ([`FlowSync::invalidate`], a generation as the user-space cache has), before the change's
//! `ctl` reply. The kernel counts packets and bytes per stored result; the app adds what is
//! new since it last looked to the result's counts before it folds them into the flows
//! ([`KernelCopy::pull`]), so flow statistics and idle timeouts see both paths. A kernel hit's
//! time of use is the time of that reading (the app reads at least every tenth of a second
//! while a flow has a timeout).

use std::fmt;

use wirespeed_packet::cpu::rdtsc;
use wirespeed_packet::flow_key::FlowKey;

use super::action::{Action, SetField};
use super::table::{Hot, Plan, Resolved};

/// What the kernel does with a flow's frames.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KernelDecision {
    /// The output port.
    pub out_port: u16,
    pub eth_src: Option<[u8; 6]>,
    pub eth_dst: Option<[u8; 6]>,
    /// The TTL or hop limit goes down by one (a frame that would leave with 0 goes to user
    /// space, which drops and counts it).
    pub dec_ttl: bool,
}

impl KernelDecision {
    /// The decision for a stored result, when the kernel can apply all of it: a single output
    /// (the plan's, or the last action after MAC rewrites and TTL decrements), and no table
    /// miss (whose counters user space keeps).
    pub(crate) fn of(hot: &Hot, resolved: &Resolved) -> Option<KernelDecision> {
        if hot.miss {
            return None;
        }
        match hot.plan {
            Plan::Output(port) => Some(KernelDecision {
                out_port: port,
                ..KernelDecision::default()
            }),
            Plan::Discard(_) => None,
            Plan::Actions => {
                let (Action::Output(port), rewrites) = resolved.actions.split_last()? else {
                    return None;
                };
                let mut decision = KernelDecision {
                    out_port: *port,
                    ..KernelDecision::default()
                };
                for action in rewrites {
                    match *action {
                        Action::SetField(SetField::EthSrc(mac)) => decision.eth_src = Some(mac.0),
                        Action::SetField(SetField::EthDst(mac)) => decision.eth_dst = Some(mac.0),
                        // Twice is not once: the kernel decrements once.
                        Action::DecTtl if !decision.dec_ttl => decision.dec_ttl = true,
                        _ => return None,
                    }
                }
                Some(decision)
            }
        }
    }
}

/// The kernel's copy of the cache, as the app drives it.
pub trait FlowSync: Send + fmt::Debug {
    /// The cache took `key`, whose stored result `result` is decided by `decision`. Keys the
    /// kernel never builds (a tagged frame's, ARP's, a fragment's) may be skipped.
    fn install(&mut self, key: &FlowKey, result: u32, decision: &KernelDecision);

    /// The tables changed: every entry installed so far is stale from now on.
    fn invalidate(&mut self);

    /// Packets and bytes the kernel forwarded for stored result `result` since it was loaded
    /// (counts only grow).
    fn counts(&self, result: u32) -> (u64, u64);

    /// Entries the kernel refused.
    fn refused(&self) -> u64;
}

/// The app's side of the copy: the sync and what of each stored result's kernel counts it has
/// already counted.
#[derive(Debug)]
pub(crate) struct KernelCopy {
    sync: Box<dyn FlowSync>,
    /// Per stored result: the kernel's (packets, bytes) when last read.
    seen: Vec<(u64, u64)>,
}

impl KernelCopy {
    /// A copy through `sync` for an app that stores at most `results` results (its megaflows),
    /// all counted from the start, so the slow path never grows anything.
    pub fn new(mut sync: Box<dyn FlowSync>, results: usize) -> KernelCopy {
        // Whatever the kernel's copy held belonged to other tables.
        sync.invalidate();
        KernelCopy {
            sync,
            seen: vec![(0, 0); results],
        }
    }

    /// Result `slot` is stored anew: its kernel counts so far belong to an earlier result.
    pub fn stored(&mut self, slot: usize) {
        let counts = self.sync.counts(slot as u32);
        if let Some(seen) = self.seen.get_mut(slot) {
            *seen = counts;
        }
    }

    /// The cache took `key` for result `slot`.
    pub fn cached(&mut self, key: &FlowKey, slot: u32, hot: &Hot, resolved: &Resolved) {
        if let Some(decision) = KernelDecision::of(hot, resolved) {
            self.sync.install(key, slot, &decision);
        }
    }

    /// The tables changed.
    pub fn invalidate(&mut self) {
        self.sync.invalidate();
    }

    /// Adds to each stored result's counts (`hot`, the stored results in order) what the
    /// kernel forwarded for it since the last reading.
    pub fn pull(&mut self, hot: &mut [Hot]) {
        let now = rdtsc();
        for (slot, (hot, seen)) in hot.iter_mut().zip(&mut self.seen).enumerate() {
            let (packets, bytes) = self.sync.counts(slot as u32);
            if packets > seen.0 {
                hot.count(packets - seen.0, bytes.saturating_sub(seen.1), now);
                *seen = (packets, bytes);
            }
        }
    }

    pub fn refused(&self) -> u64 {
        self.sync.refused()
    }
}
