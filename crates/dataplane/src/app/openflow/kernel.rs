//! The openflow app's copy in the kernel: the flows of its exact-match cache whose answer the
//! XDP fast path can carry out (crates/fastpath, issue 17's split of seed 004's pipeline).
//!
//! User space stays the owner of every table. When its exact-match cache takes a flow, the app
//! hands the flow's key and its stored result's decision to a [`FlowSync`] (the fast path's
//! `FlowMirror`), if the kernel can apply it: a single output or none (a drop), after new MAC
//! addresses, IPv4 or IPv6 addresses and TCP/UDP ports, a TTL decrement, and one 802.1Q tag
//! pushed, popped or given a new id. Everything else (copies, flood, frames for the
//! controller, groups, a second tag, a field set twice, a table miss) stays on the user-space path,
//! where it is counted by reason. When the tables change, the app's flush of its caches also
//! makes every kernel entry stale at once ([`FlowSync::invalidate`], a generation as the
//! user-space cache has), before the change's `ctl` reply. The kernel counts packets and bytes per
//! stored result; the app adds what is new since it last looked to the result's counts before
//! it folds them into the flows ([`KernelCopy::pull`]), so flow statistics and idle timeouts
//! see both paths. A kernel hit's time of use is the time of that reading (the app reads at
//! least every tenth of a second while a flow has a timeout).

use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};

use wirespeed_packet::cpu::rdtsc;
use wirespeed_packet::flow_key::FlowKey;

use super::action::{Action, SetField};
use super::table::{Hot, Plan, Resolved};

/// What becomes of the 802.1Q tag of a flow's frames.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum KernelTag {
    /// Left as it is: none, or the one the frame arrived with.
    #[default]
    Keep,
    /// An untagged frame gets a tag with this id (PCP 0).
    Push(u16),
    /// A tagged frame loses its tag.
    Pop,
    /// A tagged frame's tag gets this id; its PCP and DEI stay.
    SetVid(u16),
    /// A tagged frame's tag is popped and another pushed: its TCI becomes this id (PCP 0).
    Replace(u16),
}

/// What the kernel does with a flow's frames, which arrive untagged or with one 802.1Q tag
/// (the only ones it takes): the rewrites, in the order the fields lie in the frame (the
/// checksums come out the same in any order: one's complement addition is associative), then
/// the output.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KernelDecision {
    /// The output port; `None`: the frame is dropped (the flow has no output).
    pub out_port: Option<u16>,
    pub eth_src: Option<[u8; 6]>,
    pub eth_dst: Option<[u8; 6]>,
    /// New IPv4 addresses: IPv4 frames only (user space leaves other frames alone).
    pub ipv4_src: Option<Ipv4Addr>,
    pub ipv4_dst: Option<Ipv4Addr>,
    /// New IPv6 addresses: IPv6 frames only.
    pub ipv6_src: Option<Ipv6Addr>,
    pub ipv6_dst: Option<Ipv6Addr>,
    /// New TCP/UDP ports.
    pub l4_src: Option<u16>,
    pub l4_dst: Option<u16>,
    /// What becomes of the frame's 802.1Q tag.
    pub tag: KernelTag,
    /// The TTL or hop limit goes down by one (a frame that would leave with 0 goes to user
    /// space, which drops and counts it).
    pub dec_ttl: bool,
}

/// Sets `slot` to `value` if nothing set it before: a field set twice goes to user space,
/// since a checksum updated twice may come out as the other representation of zero.
fn once<T>(slot: &mut Option<T>, value: T) -> Option<()> {
    if slot.is_some() {
        return None;
    }
    *slot = Some(value);
    Some(())
}

/// The frame's tag while the actions run.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Tag {
    /// The one it arrived with, with a new id if one was set.
    Arrived(Option<u16>),
    Untagged,
    /// One pushed by an action, with this id.
    Pushed(u16),
}

impl KernelDecision {
    /// The decision for a stored result applied to a frame that arrives with a tag
    /// (`tagged`) or without one, when the kernel can apply all of it: a single output (the
    /// plan's, or the last action after the rewrites listed in [`KernelDecision`]'s fields)
    /// or none (a drop), and no table miss (whose counters user space keeps).
    pub(crate) fn of(hot: &Hot, resolved: &Resolved, tagged: bool) -> Option<KernelDecision> {
        if hot.miss {
            return None;
        }
        match hot.plan {
            Plan::Output(port) => Some(KernelDecision {
                out_port: Some(port),
                ..KernelDecision::default()
            }),
            // Not a miss: a flow that outputs nowhere (`no_output`).
            Plan::Discard(_) => Some(KernelDecision::default()),
            Plan::Actions => {
                let (Action::Output(port), rewrites) = resolved.actions.split_last()? else {
                    return None;
                };
                let mut decision = KernelDecision {
                    out_port: Some(*port),
                    ..KernelDecision::default()
                };
                let mut tag = if tagged {
                    Tag::Arrived(None)
                } else {
                    Tag::Untagged
                };
                for action in rewrites {
                    match *action {
                        Action::SetField(field) => match field {
                            SetField::EthSrc(mac) => decision.eth_src = Some(mac.0),
                            SetField::EthDst(mac) => decision.eth_dst = Some(mac.0),
                            SetField::Ipv4Src(addr) => once(&mut decision.ipv4_src, addr)?,
                            SetField::Ipv4Dst(addr) => once(&mut decision.ipv4_dst, addr)?,
                            SetField::Ipv6Src(addr) => once(&mut decision.ipv6_src, addr)?,
                            SetField::Ipv6Dst(addr) => once(&mut decision.ipv6_dst, addr)?,
                            SetField::L4Src(port) => once(&mut decision.l4_src, port)?,
                            SetField::L4Dst(port) => once(&mut decision.l4_dst, port)?,
                            // On an untagged frame it does nothing, as in user space.
                            SetField::VlanVid(vid) => match &mut tag {
                                Tag::Arrived(id) => *id = Some(vid & 0x0fff),
                                Tag::Pushed(id) => *id = vid & 0x0fff,
                                Tag::Untagged => {}
                            },
                        },
                        // A second tag would be an 802.1ad one: user space's.
                        Action::PushVlan(vid) if tag == Tag::Untagged => {
                            tag = Tag::Pushed(vid & 0x0fff)
                        }
                        Action::PopVlan => tag = Tag::Untagged,
                        // Twice is not once: the kernel decrements once.
                        Action::DecTtl if !decision.dec_ttl => decision.dec_ttl = true,
                        _ => return None,
                    }
                }
                decision.tag = match (tagged, tag) {
                    (_, Tag::Arrived(None)) | (false, Tag::Untagged) => KernelTag::Keep,
                    (_, Tag::Arrived(Some(vid))) => KernelTag::SetVid(vid),
                    (true, Tag::Untagged) => KernelTag::Pop,
                    (false, Tag::Pushed(vid)) => KernelTag::Push(vid),
                    (true, Tag::Pushed(vid)) => KernelTag::Replace(vid),
                };
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
        let tagged = key.flags & FlowKey::FLAG_VLAN != 0;
        if let Some(decision) = KernelDecision::of(hot, resolved, tagged) {
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

#[cfg(test)]
mod tests {
    use wirespeed_packet::DropReason;
    use wirespeed_packet::wire::EthernetAddress;

    use super::*;

    const MAC: [u8; 6] = [2, 0, 0, 0, 0, 9];

    /// The decision for a stored result of `actions` (as the slow path stores them: ending
    /// with the last output), not a miss, for an untagged frame.
    fn decide(actions: &[Action]) -> Option<KernelDecision> {
        decide_for(actions, false)
    }

    fn decide_for(actions: &[Action], tagged: bool) -> Option<KernelDecision> {
        let resolved = Resolved {
            actions: actions.to_vec(),
            ..Resolved::default()
        };
        let hot = Hot {
            plan: Plan::Actions,
            ..Hot::default()
        };
        KernelDecision::of(&hot, &resolved, tagged)
    }

    fn output(port: u16) -> KernelDecision {
        KernelDecision {
            out_port: Some(port),
            ..KernelDecision::default()
        }
    }

    #[test]
    fn a_plain_output_and_a_drop_are_the_plans() {
        let resolved = Resolved::default();
        let plan = |plan, miss| Hot {
            plan,
            miss,
            ..Hot::default()
        };
        assert_eq!(
            KernelDecision::of(&plan(Plan::Output(3), false), &resolved, false),
            Some(output(3))
        );
        let drop = KernelDecision::of(
            &plan(Plan::Discard(DropReason::NoOutput), false),
            &resolved,
            true,
        );
        assert_eq!(drop, Some(KernelDecision::default()));
        assert_eq!(drop.unwrap().out_port, None);
        // A miss's counters are user space's, whatever its plan.
        let miss = plan(Plan::Discard(DropReason::TableMiss), true);
        assert_eq!(KernelDecision::of(&miss, &resolved, false), None);
        assert_eq!(
            KernelDecision::of(&plan(Plan::Output(1), true), &resolved, false),
            None
        );
    }

    #[test]
    fn each_rewrite_becomes_its_field() {
        let v4 = Ipv4Addr::new(198, 18, 7, 1);
        let v6 = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 7);
        let cases = [
            (
                Action::SetField(SetField::EthSrc(EthernetAddress(MAC))),
                KernelDecision {
                    eth_src: Some(MAC),
                    ..output(1)
                },
            ),
            (
                Action::SetField(SetField::EthDst(EthernetAddress(MAC))),
                KernelDecision {
                    eth_dst: Some(MAC),
                    ..output(1)
                },
            ),
            (
                Action::SetField(SetField::Ipv4Src(v4)),
                KernelDecision {
                    ipv4_src: Some(v4),
                    ..output(1)
                },
            ),
            (
                Action::SetField(SetField::Ipv4Dst(v4)),
                KernelDecision {
                    ipv4_dst: Some(v4),
                    ..output(1)
                },
            ),
            (
                Action::SetField(SetField::Ipv6Src(v6)),
                KernelDecision {
                    ipv6_src: Some(v6),
                    ..output(1)
                },
            ),
            (
                Action::SetField(SetField::Ipv6Dst(v6)),
                KernelDecision {
                    ipv6_dst: Some(v6),
                    ..output(1)
                },
            ),
            (
                Action::SetField(SetField::L4Src(1234)),
                KernelDecision {
                    l4_src: Some(1234),
                    ..output(1)
                },
            ),
            (
                Action::SetField(SetField::L4Dst(80)),
                KernelDecision {
                    l4_dst: Some(80),
                    ..output(1)
                },
            ),
            (
                Action::PushVlan(0x1064),
                KernelDecision {
                    tag: KernelTag::Push(0x064),
                    ..output(1)
                },
            ),
            (
                Action::DecTtl,
                KernelDecision {
                    dec_ttl: true,
                    ..output(1)
                },
            ),
            // On the untagged frames the kernel takes these do nothing.
            (Action::PopVlan, output(1)),
            (Action::SetField(SetField::VlanVid(5)), output(1)),
        ];
        for (action, want) in cases {
            assert_eq!(
                decide(&[action, Action::Output(1)]),
                Some(want),
                "{action:?}"
            );
        }
    }

    #[test]
    fn the_tag_follows_pushes_pops_and_new_ids_in_order() {
        let push = Action::PushVlan(10);
        let pop = Action::PopVlan;
        let vid = Action::SetField(SetField::VlanVid(20));
        let out = Action::Output(2);
        let tag = |tag| Some(KernelDecision { tag, ..output(2) });
        let untagged = |actions: &[Action]| decide_for(actions, false);
        assert_eq!(untagged(&[push, vid, out]), tag(KernelTag::Push(20)));
        assert_eq!(untagged(&[vid, push, out]), tag(KernelTag::Push(10)));
        assert_eq!(untagged(&[push, pop, out]), tag(KernelTag::Keep));
        assert_eq!(untagged(&[pop, vid, out]), tag(KernelTag::Keep));
        let pushed_again = [push, pop, Action::PushVlan(30), out];
        assert_eq!(untagged(&pushed_again), tag(KernelTag::Push(30)));
        let tagged = |actions: &[Action]| decide_for(actions, true);
        assert_eq!(tagged(&[out]), tag(KernelTag::Keep));
        assert_eq!(tagged(&[pop, out]), tag(KernelTag::Pop));
        assert_eq!(tagged(&[vid, out]), tag(KernelTag::SetVid(20)));
        assert_eq!(tagged(&[pop, vid, out]), tag(KernelTag::Pop));
        assert_eq!(tagged(&[pop, push, out]), tag(KernelTag::Replace(10)));
        assert_eq!(tagged(&[pop, push, vid, out]), tag(KernelTag::Replace(20)));
        // Two tags at once: the outer one would be 802.1ad.
        assert_eq!(untagged(&[push, push, out]), None);
        assert_eq!(tagged(&[push, out]), None);
        assert_eq!(tagged(&[vid, push, pop, out]), None);
    }

    #[test]
    fn several_rewrites_combine_and_what_the_kernel_cannot_do_stays_in_user_space() {
        let v4 = Ipv4Addr::new(10, 0, 0, 1);
        let all = decide(&[
            Action::SetField(SetField::Ipv4Src(v4)),
            Action::SetField(SetField::L4Dst(53)),
            Action::DecTtl,
            Action::SetField(SetField::EthDst(EthernetAddress(MAC))),
            Action::PushVlan(7),
            Action::Output(4),
        ]);
        assert_eq!(
            all,
            Some(KernelDecision {
                ipv4_src: Some(v4),
                l4_dst: Some(53),
                dec_ttl: true,
                eth_dst: Some(MAC),
                tag: KernelTag::Push(7),
                ..output(4)
            })
        );
        // A MAC set twice: the last one counts, as in user space.
        let other = [9, 9, 9, 9, 9, 9];
        assert_eq!(
            decide(&[
                Action::SetField(SetField::EthSrc(EthernetAddress(MAC))),
                Action::SetField(SetField::EthSrc(EthernetAddress(other))),
                Action::Output(1),
            ]),
            Some(KernelDecision {
                eth_src: Some(other),
                ..output(1)
            })
        );
        let refused = [
            // A checksummed field set twice, a TTL decremented twice.
            vec![
                Action::SetField(SetField::Ipv4Dst(v4)),
                Action::SetField(SetField::Ipv4Dst(v4)),
                Action::Output(1),
            ],
            vec![
                Action::SetField(SetField::L4Src(1)),
                Action::SetField(SetField::L4Src(2)),
                Action::Output(1),
            ],
            vec![Action::DecTtl, Action::DecTtl, Action::Output(1)],
            // Copies, flood, the controller.
            vec![Action::Output(2), Action::Output(1)],
            vec![Action::Flood],
            vec![Action::SetField(SetField::L4Src(1)), Action::Flood],
            vec![Action::Controller(0xffff)],
            // A group, whose buckets user space runs, before an output or alone.
            vec![Action::Group(1), Action::Output(1)],
            vec![Action::DecTtl, Action::Group(1)],
        ];
        for actions in refused {
            assert_eq!(decide(&actions), None, "{actions:?}");
        }
    }
}
