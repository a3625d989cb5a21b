//! The OpenFlow app's flow tables over time, driven directly with a chosen clock: per-flow
//! counters on every cache tier, trains and interleaved flows against the tables, idle and hard
//! timeouts, flow removal, a storm of distinct flows, traces, IPv6 rewrites and random flows and
//! frames. Every scenario ends with the pool whole.

use std::net::Ipv4Addr;

use proptest::prelude::*;
use wirespeed_dataplane::app::openflow::kernel::{FlowSync, KernelDecision};
use wirespeed_dataplane::app::openflow::{
    Action, FlowEntry, MissAction, OpenFlow, OpenFlowConfig, SetField, removed,
};
use wirespeed_dataplane::app::{App, Context};
use wirespeed_dataplane::table::classifier::FlowMatch;
use wirespeed_packet::flow_key::FlowKey;
use wirespeed_packet::{Batch, Desc, DropReason, FramePool, HEADROOM, MAX_BATCH};
use wirespeed_testkit::frames::{FrameBuilder, L3, L4, arb_frame};

mod openflow_common;
use openflow_common::*;

/// Drives the app directly with a chosen clock: frames in on `port`, returns (out_port, bytes)
/// of what left and the drop reasons; frames go back to the pool.
struct Direct {
    app: OpenFlow,
    pool: FramePool,
    batch: Batch,
    extra: Batch,
    keys: Vec<FlowKey>,
}

impl Direct {
    fn new(app: OpenFlow) -> Self {
        Self {
            app,
            pool: FramePool::new(256, 2048).unwrap(),
            batch: Batch::new(32),
            extra: Batch::new(MAX_BATCH),
            keys: vec![FlowKey::default(); 32],
        }
    }

    fn run(
        &mut self,
        now: u64,
        port: u16,
        frames: &[Vec<u8>],
    ) -> (Vec<(u16, Vec<u8>)>, Vec<DropReason>) {
        for frame in frames {
            let id = self.pool.alloc().unwrap();
            let at = usize::from(HEADROOM);
            self.pool.frame_mut(id)[at..at + frame.len()].copy_from_slice(frame);
            self.batch.push(Desc {
                frame: id,
                offset: HEADROOM,
                len: frame.len() as u16,
                port,
                queue: 0,
            });
        }
        let mut ctx = Context {
            pool: &mut self.pool,
            keys: &mut self.keys[..self.batch.len()],
            now,
            extra: &mut self.extra,
        };
        self.app.process(&mut ctx, &mut self.batch);
        let mut sent = Vec::new();
        let mut dropped = Vec::new();
        for batch in [&mut self.batch, &mut self.extra] {
            for (desc, meta) in batch.descs().iter().zip(batch.meta()) {
                let start = usize::from(desc.offset);
                match meta.drop {
                    Some(reason) => dropped.push(reason),
                    None => sent.push((
                        meta.out_port,
                        self.pool.frame(desc.frame)[start..start + usize::from(desc.len)].to_vec(),
                    )),
                }
                self.pool.release(desc.frame);
            }
            batch.clear();
        }
        (sent, dropped)
    }

    fn finish(self) {
        assert_eq!(self.pool.free_count(), self.pool.total());
        assert_eq!(self.pool.double_releases(), 0);
    }
}

#[test]
fn per_flow_counters_count_packets_and_bytes_on_every_tier() {
    let mut app = OpenFlow::new(config(2));
    app.add_flow(
        0,
        FlowEntry::new(1, FlowMatch::any().in_port(0), vec![]).goto(1),
    )
    .unwrap();
    app.add_flow(
        1,
        FlowEntry::new(1, FlowMatch::any(), vec![Action::Output(1)]),
    )
    .unwrap();
    let mut direct = Direct::new(app);
    let small = base().build();
    let large = base().payload_len(500).build();
    for _ in 0..10 {
        let (sent, dropped) = direct.run(1, 0, &[small.clone(), large.clone()]);
        assert_eq!(sent.len(), 2);
        assert!(dropped.is_empty());
    }
    let flows = direct.app.flows();
    assert_eq!(flows.len(), 2);
    let bytes = 10 * (small.len() + large.len()) as u64;
    for flow in &flows {
        assert_eq!((flow.packets, flow.bytes), (20, bytes), "{flow:?}");
    }
    let c = direct.app.counters();
    assert_eq!(c.cache_hits + c.classifier_hits + c.slow_path, 20);
    assert!(c.cache_hits >= 16, "{c:?}");
    direct.finish();
}

/// Trains of one flow are decided per group (one lookup, counters once, an output written to
/// every packet of the train): interleaved with other flows, malformed frames and table
/// misses, the same packets give the same bytes, ports, order, drops and per-flow counters as
/// through an app that walks its tables for every packet.
#[test]
fn trains_and_interleaved_flows_decide_like_the_tables_packet_for_packet() {
    let build = |fast: bool| {
        let mut app = OpenFlow::new(OpenFlowConfig {
            cache_insert_one_in: u32::from(fast),
            megaflows: if fast { 1024 } else { 0 },
            ..config(3)
        });
        let flow = |port: u16, actions: Vec<Action>| {
            FlowEntry::new(10, FlowMatch::any().l4_src(port), actions)
        };
        let rules = [
            flow(1, vec![Action::Output(1)]),
            flow(2, vec![Action::Output(2)]),
            // A rewrite, a copy to port 1, then the packet itself to port 2.
            flow(
                3,
                vec![
                    Action::SetField(SetField::EthDst(NEW_MAC)),
                    Action::Output(1),
                    Action::DecTtl,
                    Action::Output(2),
                ],
            ),
            flow(4, vec![Action::Drop]),
        ];
        for rule in rules {
            app.add_flow(0, rule).unwrap();
        }
        Direct::new(app)
    };
    let frame = |src_port: u16, payload: usize| {
        base()
            .with_l4(L4::Udp {
                src_port,
                dst_port: 9,
            })
            .payload_len(payload)
            .build()
    };
    // Flow 5 has no rule (a table miss); a truncated frame is dropped by the parse.
    let truncated = frame(1, 0)[..20].to_vec();
    let pattern: [(u16, usize); 16] = [
        (1, 20),
        (1, 21),
        (1, 22),
        (2, 20),
        (1, 23),
        (3, 20),
        (3, 30),
        (2, 21),
        (4, 20),
        (1, 24),
        (5, 20),
        (5, 20),
        (2, 22),
        (2, 22),
        (3, 40),
        (1, 25),
    ];
    let mut batches: Vec<Vec<Vec<u8>>> = Vec::new();
    for round in 0..6 {
        let mut frames: Vec<Vec<u8>> = pattern.iter().map(|&(f, len)| frame(f, len)).collect();
        // A malformed frame inside a train of flow 1, at a different place each round.
        frames.insert(1 + round, truncated.clone());
        batches.push(frames);
    }
    // One long train of one flow.
    batches.push((0..30).map(|i| frame(1, 20 + i)).collect());
    let mut fast = build(true);
    let mut slow = build(false);
    let mut forwarded = 0;
    for frames in &batches {
        let decided = fast.run(1, 0, frames);
        assert_eq!(decided, slow.run(1, 0, frames));
        forwarded += decided.0.len();
    }
    // The long train: every packet to port 1, unchanged, in the order it came.
    let train = batches.last().unwrap();
    let (sent, dropped) = fast.run(1, 0, train);
    let expected: Vec<(u16, Vec<u8>)> = train.iter().map(|f| (1, f.clone())).collect();
    assert_eq!((sent, dropped), (expected, vec![]));
    slow.run(1, 0, train);
    assert!(forwarded > 100, "{forwarded}");
    let counts = |direct: &mut Direct| {
        direct
            .app
            .flows()
            .into_iter()
            .map(|f| (f.entry.matcher, f.packets, f.bytes))
            .collect::<Vec<_>>()
    };
    assert_eq!(counts(&mut fast), counts(&mut slow));
    let (f, s) = (fast.app.counters(), slow.app.counters());
    assert_eq!(f.cache_hits + f.classifier_hits + f.slow_path, s.slow_path);
    assert_eq!((f.table_misses, f.copies), (s.table_misses, s.copies));
    assert!(f.cache_hits > f.slow_path * 4, "{f:?}");
    fast.finish();
    slow.finish();
}

#[test]
fn idle_and_hard_timeouts_remove_flows_and_their_cached_decisions() {
    // 1000 ticks per second.
    let mut app = OpenFlow::new(config(2));
    app.add_flow(
        0,
        FlowEntry::new(1, FlowMatch::any().l4_dst(1025), vec![Action::Output(1)]).idle_timeout(2),
    )
    .unwrap();
    // Only this one asks for a report when it goes.
    let mut reported =
        FlowEntry::new(1, FlowMatch::any().l4_dst(7), vec![Action::Output(1)]).hard_timeout(5);
    reported.send_flow_removed = true;
    app.add_flow(0, reported.clone()).unwrap();
    let (sender, mut reports) = removed::ring();
    app.set_flow_removed(sender);
    let mut direct = Direct::new(app);
    let idle = base().build();
    let hard = base()
        .with_l4(L4::Udp {
            src_port: 1,
            dst_port: 7,
        })
        .build();
    let both = [idle.clone(), hard.clone()];
    // t = 1 s: both forwarded (and cached).
    assert_eq!(direct.run(1000, 0, &both).0.len(), 2);
    // t = 2.5 s: the idle flow was used 1.5 s ago; it stays and is used again.
    assert_eq!(direct.run(2500, 0, &both).0.len(), 2);
    // t = 4.4 s: 1.9 s idle, still there (only the hard flow's packet is sent).
    assert_eq!(direct.run(4400, 0, std::slice::from_ref(&hard)).0.len(), 1);
    // t = 4.6 s: 2.1 s idle: removed, and its cached decision with it.
    let (sent, dropped) = direct.run(4600, 0, &both);
    assert_eq!(sent, vec![(1, hard.clone())]);
    assert_eq!(dropped, vec![DropReason::TableMiss]);
    assert_eq!(direct.app.counters().flows_expired, 1);
    // t = 5.9 s: the hard flow (installed at 1 s) lives 5 s.
    assert_eq!(direct.run(5900, 0, std::slice::from_ref(&hard)).0.len(), 1);
    let (sent, dropped) = direct.run(6000, 0, std::slice::from_ref(&hard));
    assert!(sent.is_empty());
    assert_eq!(dropped, vec![DropReason::TableMiss]);
    assert_eq!(direct.app.counters().flows_expired, 2);
    assert!(direct.app.flows().is_empty());
    // Five packets in the 5 s from its first batch to its removal.
    assert_eq!(
        reports.pop(),
        Ok(removed::Expired {
            table: 0,
            entry: reported,
            timeout: removed::Timeout::Hard,
            packets: 5,
            bytes: 5 * hard.len() as u64,
            age: std::time::Duration::from_secs(5),
        })
    );
    assert!(reports.pop().is_err());
    direct.finish();
}

#[test]
fn remove_flows_is_non_strict_and_invalidates_the_fast_path() {
    let mut app = OpenFlow::new(config(2));
    app.add_flow(
        0,
        FlowEntry::new(
            2,
            FlowMatch::any().in_port(0).l4_dst(1025),
            vec![Action::Output(1)],
        ),
    )
    .unwrap();
    app.add_flow(
        0,
        FlowEntry::new(1, FlowMatch::any().in_port(1), vec![Action::Output(0)]),
    )
    .unwrap();
    let mut direct = Direct::new(app);
    let frame = base().build();
    assert_eq!(direct.run(1, 0, &[frame.clone(), frame.clone()]).0.len(), 2);
    assert_eq!(direct.app.remove_flows(&FlowMatch::any().in_port(0)), 1);
    assert_eq!(direct.app.megaflows(), 0);
    let (sent, dropped) = direct.run(2, 0, std::slice::from_ref(&frame));
    assert!(sent.is_empty());
    assert_eq!(dropped, vec![DropReason::TableMiss]);
    assert_eq!(
        direct.run(3, 1, std::slice::from_ref(&frame)).0,
        vec![(0, frame)]
    );
    assert_eq!(direct.app.remove_flows(&FlowMatch::any()), 1);
    direct.finish();
}

#[test]
fn copies_stop_cleanly_when_the_pool_runs_dry() {
    let mut app = OpenFlow::new(config(64));
    app.add_flow(0, FlowEntry::new(1, FlowMatch::any(), vec![Action::Flood]))
        .unwrap();
    let mut direct = Direct::new(app);
    // 32 packets * 63 copies is far more than the 256 frames of the pool.
    let frames = vec![base().build(); 32];
    let (sent, _) = direct.run(1, 0, &frames);
    let c = direct.app.counters();
    assert!(c.pool_empty > 0 || c.emit_overflow > 0, "{c:?}");
    assert_eq!(sent.len() as u64, 32 + c.copies);
    direct.finish();
}

/// Every action that touches the frame, for the hostile-input tests.
fn busy_app() -> OpenFlow {
    let mut app = OpenFlow::new(config(3));
    app.add_flow(
        0,
        FlowEntry::new(
            3,
            FlowMatch::any().vlan(5),
            vec![
                Action::PopVlan,
                Action::PushVlan(7),
                Action::SetField(SetField::VlanVid(9)),
            ],
        )
        .goto(1),
    )
    .unwrap();
    app.add_flow(
        0,
        FlowEntry::new(
            1,
            FlowMatch::any(),
            vec![
                Action::SetField(SetField::Ipv4Src(A)),
                Action::SetField(SetField::L4Dst(99)),
                Action::SetField(SetField::EthSrc(NEW_MAC)),
                Action::DecTtl,
                Action::PushVlan(3),
            ],
        )
        .goto(1),
    )
    .unwrap();
    app.add_flow(
        1,
        FlowEntry::new(
            1,
            FlowMatch::any(),
            vec![Action::Output(1), Action::PopVlan, Action::Flood],
        ),
    )
    .unwrap();
    app
}

#[test]
fn malformed_frames_never_panic_and_the_pool_stays_whole() {
    let mut rig = rig(busy_app(), 3);
    let good = base().vlan(5).payload_len(20).build();
    let mut frames = Vec::new();
    for cut in 0..good.len() {
        frames.push(good[..cut].to_vec());
    }
    for i in 0..good.len() {
        for bits in [0x01, 0x80, 0xff] {
            let mut bad = good.clone();
            bad[i] ^= bits;
            frames.push(bad);
        }
    }
    frames.push(vec![0; 1514]);
    frames.push(vec![0xff; 1514]);
    for chunk in frames.chunks(32) {
        rig.exchange(0, chunk);
    }
    let counters = rig.worker.counters().clone();
    assert_eq!(counters.rx_packets, frames.len() as u64);
    assert!(rig.finish().holds());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn arbitrary_frames_through_every_action_keep_the_pool_whole(
        frames in proptest::collection::vec(arb_frame(), 1..40),
        flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 0..40),
    ) {
        let mut frames = frames;
        for (i, (at, bits)) in flips.into_iter().enumerate() {
            let count = frames.len();
            let frame = &mut frames[i % count];
            let len = frame.len();
            frame[at % len] ^= bits;
        }
        let mut rig = rig(busy_app(), 3);
        rig.exchange(0, &frames);
        let counters = rig.worker.counters().clone();
        prop_assert_eq!(counters.rx_packets, frames.len() as u64);
        prop_assert!(rig.finish().holds());
    }
}

/// A random flow for the fast-path-versus-slow-path property test.
/// An app built from `config` with the entries `tables[i]` in table `i`, driven directly.
fn direct_with(config: OpenFlowConfig, tables: &[&Vec<FlowEntry>]) -> Direct {
    let mut app = OpenFlow::new(config);
    for (table, entries) in (0u8..).zip(tables) {
        for entry in entries.iter() {
            app.add_flow(table, entry.clone()).unwrap();
        }
    }
    Direct::new(app)
}

/// Every flow's table, priority, packets and bytes.
fn flow_counts(direct: &mut Direct) -> Vec<(u8, u16, u64, u64)> {
    direct
        .app
        .flows()
        .into_iter()
        .map(|f| (f.table, f.entry.priority, f.packets, f.bytes))
        .collect()
}

fn arb_flow(table: u8) -> impl Strategy<Value = FlowEntry> {
    let action = prop_oneof![
        (1u16..4).prop_map(|p| Action::SetField(SetField::L4Dst(p))),
        (0u8..4).prop_map(|h| Action::SetField(SetField::Ipv4Src(Ipv4Addr::new(10, 0, 0, h)))),
        (5u16..7).prop_map(|v| Action::SetField(SetField::VlanVid(v))),
        Just(Action::PushVlan(5)),
        Just(Action::PopVlan),
        Just(Action::DecTtl),
        Just(Action::Flood),
        (0u16..3).prop_map(Action::Output),
    ];
    (
        0u16..4,
        any::<u8>(),
        (0u16..3, 0u8..4, 0u8..4, 1u16..4, 5u16..7, 24u8..=32),
        proptest::collection::vec(action, 0..4),
        proptest::option::of(0u8..4),
    )
        .prop_map(
            move |(priority, fields, (port, src, dst, l4, vid, len), actions, goto)| {
                let mut m = FlowMatch::any();
                if fields & 1 != 0 {
                    m = m.in_port(port);
                }
                if fields & 2 != 0 {
                    m = m.ipv4_src(Ipv4Addr::new(10, 0, 0, src), len);
                }
                if fields & 4 != 0 {
                    m = m.ipv4_dst(Ipv4Addr::new(10, 0, 1, dst), len);
                }
                if fields & 8 != 0 {
                    m = m.l4_dst(l4);
                }
                if fields & 16 != 0 {
                    m = m.vlan(vid);
                }
                if fields & 32 != 0 {
                    m = m.untagged();
                }
                let mut entry = FlowEntry::new(priority, m, actions);
                entry.goto = goto.filter(|&g| g < 4 && g > table);
                entry
            },
        )
}

fn arb_packet() -> impl Strategy<Value = (u16, Vec<u8>)> {
    (
        0u16..3,
        0u8..4,
        0u8..4,
        1u16..4,
        0u16..3,
        any::<bool>(),
        1u8..4,
    )
        .prop_map(|(port, src, dst, l4, vlan, tcp, ttl)| {
            let l4 = if tcp {
                L4::Tcp {
                    src_port: 9,
                    dst_port: l4,
                }
            } else {
                L4::Udp {
                    src_port: 9,
                    dst_port: l4,
                }
            };
            let mut builder = FrameBuilder::ipv4_udp()
                .with_l3(L3::Ipv4 {
                    src: Ipv4Addr::new(10, 0, 0, src),
                    dst: Ipv4Addr::new(10, 0, 1, dst),
                })
                .with_l4(l4)
                .ttl(ttl)
                .payload_len(10);
            if vlan > 0 {
                builder = builder.vlan(4 + vlan);
            }
            (port, builder.build())
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(100))]

    /// Megaflows and the exact-match cache change nothing but speed: the same packets through
    /// an app that walks its tables for every packet give the same bytes, ports, drops and
    /// per-flow counters.
    #[test]
    fn the_fast_path_decides_like_the_tables(
        flows in (
            proptest::collection::vec(arb_flow(0), 0..8),
            proptest::collection::vec(arb_flow(1), 0..6),
            proptest::collection::vec(arb_flow(2), 0..6),
            proptest::collection::vec(arb_flow(3), 0..4),
        ),
        packets in proptest::collection::vec(arb_packet(), 1..120),
        miss in prop_oneof![Just(MissAction::Drop), Just(MissAction::Flood)],
    ) {
        let (t0, t1, t2, t3) = &flows;
        let build = |fast: bool| {
            let config = OpenFlowConfig {
                miss,
                cache_insert_one_in: u32::from(fast),
                megaflows: if fast { 1024 } else { 0 },
                ..config(3)
            };
            direct_with(config, &[t0, t1, t2, t3])
        };
        let mut fast = build(true);
        let mut slow = build(false);
        for chunk in packets.chunks(24) {
            for port in 0..3u16 {
                let frames: Vec<Vec<u8>> =
                    chunk.iter().filter(|(p, _)| *p == port).map(|(_, f)| f.clone()).collect();
                if frames.is_empty() {
                    continue;
                }
                prop_assert_eq!(fast.run(1, port, &frames), slow.run(1, port, &frames));
            }
        }
        prop_assert_eq!(flow_counts(&mut fast), flow_counts(&mut slow));
        prop_assert_eq!(fast.app.counters().slow_path + fast.app.counters().cache_hits + fast.app.counters().classifier_hits,
            slow.app.counters().slow_path);
        fast.finish();
        slow.finish();
    }
}

#[test]
fn a_storm_of_distinct_flows_keeps_the_megaflow_table_bounded_and_forwards_everything() {
    let mut app = OpenFlow::new(OpenFlowConfig {
        megaflows: 64,
        cache_entries: 256,
        cache_insert_one_in: 100,
        ..config(2)
    });
    // The first rule looks at the source port, so every source port is its own megaflow.
    app.add_flow(
        0,
        FlowEntry::new(9, FlowMatch::any().l4_src(5), vec![Action::Output(0)]),
    )
    .unwrap();
    app.add_flow(
        0,
        FlowEntry::new(1, FlowMatch::any(), vec![Action::Output(1)]),
    )
    .unwrap();
    let mut direct = Direct::new(app);
    let long_lived = base().build();
    let mut forwarded = 0;
    for round in 0..200u16 {
        let mut frames: Vec<Vec<u8>> = (0..31u16)
            .map(|i| {
                base()
                    .with_l4(L4::Udp {
                        src_port: 1000 + round * 31 + i,
                        dst_port: 1025,
                    })
                    .build()
            })
            .collect();
        frames.push(long_lived.clone());
        let (sent, dropped) = direct.run(u64::from(round), 0, &frames);
        assert!(dropped.is_empty());
        assert!(sent.iter().all(|(port, _)| *port == 1));
        forwarded += sent.len();
        assert!(direct.app.megaflows() <= 64);
    }
    assert_eq!(forwarded, 200 * 32);
    let c = direct.app.counters();
    assert!(c.megaflow_flushes > 0 && c.megaflows_refused > 0, "{c:?}");
    direct.finish();
}

#[test]
fn a_trace_shows_each_table_and_the_result() {
    let mut app = OpenFlow::new(config(2));
    app.add_flow(
        0,
        FlowEntry::new(
            7,
            FlowMatch::any().in_port(0),
            vec![Action::SetField(SetField::L4Dst(53))],
        )
        .goto(3),
    )
    .unwrap();
    app.add_flow(
        3,
        FlowEntry::new(2, FlowMatch::any().l4_dst(53), vec![Action::Output(1)]),
    )
    .unwrap();
    let mut key = FlowKey {
        in_port: 0,
        ethertype: 0x0800,
        ip_proto: 17,
        l4_dst: 1025,
        ..FlowKey::EMPTY
    };
    assert_eq!(
        app.trace(&key).to_string(),
        "table 0: priority 7 -> [SetField(L4Dst(53))], goto 3\n\
         table 3: priority 2 -> [Output(1)]\n\
         result: [SetField(L4Dst(53)), Output(1)]"
    );
    key.in_port = 1;
    assert_eq!(
        app.trace(&key).to_string(),
        "table 0: miss -> Drop\nresult: drop"
    );
    key.in_port = 0;
    key.ip_proto = 1;
    assert_eq!(
        app.trace(&key).to_string(),
        "table 0: priority 7 -> [SetField(L4Dst(53))], goto 3\n\
         table 3: miss -> Drop\n\
         result: drop"
    );
}

#[test]
fn ipv6_address_rewrites_keep_udp_tcp_and_icmpv6_checksums_right() {
    use std::net::Ipv6Addr;
    let new_src = Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0xabcd, 1);
    let new_dst = Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0xabcd, 2);
    let mut app = OpenFlow::new(config(2));
    app.add_flow(
        0,
        FlowEntry::new(
            1,
            FlowMatch::any().ethertype(0x86dd),
            vec![
                Action::SetField(SetField::Ipv6Src(new_src)),
                Action::SetField(SetField::Ipv6Dst(new_dst)),
                // IPv4-only rewrites leave an IPv6 packet alone.
                Action::SetField(SetField::Ipv4Src(A)),
                Action::Output(1),
            ],
        ),
    )
    .unwrap();
    let mut rig = rig(app, 2);
    for l4 in [
        L4::Udp {
            src_port: 1,
            dst_port: 2,
        },
        L4::Tcp {
            src_port: 1,
            dst_port: 2,
        },
        L4::Echo {
            ident: 3,
            seq_no: 4,
        },
    ] {
        let input = FrameBuilder::ipv6_udp().with_l4(l4).payload_len(21).build();
        let expected = FrameBuilder::ipv6_udp()
            .with_l3(L3::Ipv6 {
                src: new_src,
                dst: new_dst,
            })
            .with_l4(l4)
            .payload_len(21)
            .build();
        let out = rig.exchange(0, &[input]);
        assert_eq!(out[1], vec![expected], "{l4:?}");
    }
    assert!(rig.finish().holds());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(100))]

    /// A batch the exact-match cache answers whole is decided packet by packet, without the
    /// groups of equal keys: the same packets, each batch sent three times (the cache learns
    /// them the first time; a batch after one with a miss takes the groups, the third is
    /// answered whole), give the same bytes, ports and drops, the same per-flow counters and
    /// the same app counters with that way on as with every batch taking the groups.
    #[test]
    fn batches_the_cache_answers_whole_decide_and_count_like_the_groups(
        flows in (
            proptest::collection::vec(arb_flow(0), 0..8),
            proptest::collection::vec(arb_flow(1), 0..6),
        ),
        packets in proptest::collection::vec(arb_packet(), 1..120),
        miss in prop_oneof![Just(MissAction::Drop), Just(MissAction::Flood), Just(MissAction::Output(1))],
    ) {
        let (t0, t1) = &flows;
        let build = |whole_batch_hits: bool| {
            let mut direct = direct_with(OpenFlowConfig { miss, ..config(3) }, &[t0, t1]);
            direct.app.set_whole_batch_hits(whole_batch_hits);
            direct
        };
        let mut whole = build(true);
        let mut groups = build(false);
        for chunk in packets.chunks(24) {
            for port in 0..3u16 {
                let mut frames: Vec<Vec<u8>> =
                    chunk.iter().filter(|(p, _)| *p == port).map(|(_, f)| f.clone()).collect();
                // Trains of one flow among the others.
                if let Some(first) = frames.first().cloned() {
                    frames.extend([first.clone(), first]);
                }
                for _ in 0..3 {
                    prop_assert_eq!(whole.run(1, port, &frames), groups.run(1, port, &frames));
                }
            }
        }
        prop_assert_eq!(flow_counts(&mut whole), flow_counts(&mut groups));
        prop_assert_eq!(whole.app.counters(), groups.app.counters());
        prop_assert!(whole.app.counters().cache_hits > 0);
        whole.finish();
        groups.finish();
    }
}

/// The kernel's copy as a test sees it: what was installed, how often it was made stale, and
/// counts the test says the kernel forwarded.
#[derive(Debug, Default)]
struct KernelSeen {
    installed: Vec<(FlowKey, u32, KernelDecision)>,
    invalidations: u32,
    counts: std::collections::HashMap<u32, (u64, u64)>,
}

#[derive(Debug, Clone, Default)]
struct FakeKernel(std::sync::Arc<std::sync::Mutex<KernelSeen>>);

impl FlowSync for FakeKernel {
    fn install(&mut self, key: &FlowKey, result: u32, decision: &KernelDecision) {
        let mut seen = self.0.lock().unwrap();
        seen.installed.push((*key, result, *decision));
    }

    fn invalidate(&mut self) {
        self.0.lock().unwrap().invalidations += 1;
    }

    fn counts(&self, result: u32) -> (u64, u64) {
        let seen = self.0.lock().unwrap();
        seen.counts.get(&result).copied().unwrap_or_default()
    }

    fn refused(&self) -> u64 {
        0
    }
}

/// With the XDP fast path, the flows the cache takes reach the kernel with the decision the
/// kernel can carry out (here MAC rewrites, a TTL decrement, one output), and nothing else
/// does (flood);
/// what the kernel forwarded is counted in the flows; a table change makes the kernel's copy
/// stale before it returns.
#[test]
fn the_kernels_copy_gets_the_cached_flows_it_can_apply_and_its_counts_reach_the_flows() {
    let mut app = OpenFlow::new(config(3));
    app.add_flow(
        0,
        FlowEntry::new(
            10,
            FlowMatch::any().in_port(0),
            vec![
                Action::SetField(SetField::EthDst(NEW_MAC)),
                Action::DecTtl,
                Action::Output(1),
            ],
        ),
    )
    .unwrap();
    app.add_flow(
        0,
        FlowEntry::new(10, FlowMatch::any().in_port(1), vec![Action::Flood]),
    )
    .unwrap();
    let kernel = FakeKernel::default();
    app.mirror_flows(Box::new(kernel.clone()));
    let mut direct = Direct::new(app);
    let frame = base().build();
    for _ in 0..3 {
        let (sent, _) = direct.run(1, 0, std::slice::from_ref(&frame));
        assert_eq!(sent.len(), 1);
        direct.run(1, 1, std::slice::from_ref(&frame));
    }
    {
        let seen = kernel.0.lock().unwrap();
        // The first packet of each flow took the slow path, the second a megaflow and went into
        // the cache: one entry, the rewriting flow's; flood stays in user space.
        assert_eq!(seen.installed.len(), 1, "{:?}", seen.installed);
        let (key, result, decision) = seen.installed[0];
        assert_eq!(key.in_port, 0);
        assert_eq!(
            decision,
            KernelDecision {
                out_port: Some(1),
                eth_dst: Some(NEW_MAC.0),
                dec_ttl: true,
                ..KernelDecision::default()
            }
        );
        drop(seen);
        kernel
            .0
            .lock()
            .unwrap()
            .counts
            .insert(result, (1000, 60_000));
    }
    let flows = direct.app.flows();
    let rewriting = flows
        .iter()
        .find(|f| f.entry.matcher == FlowMatch::any().in_port(0))
        .unwrap();
    let frame_len = frame.len() as u64;
    assert_eq!(
        (rewriting.packets, rewriting.bytes),
        (1003, 60_000 + 3 * frame_len)
    );
    // Read again: nothing new, nothing counted twice.
    let flows = direct.app.flows();
    assert!(flows.iter().any(|f| f.packets == 1003));
    let before = kernel.0.lock().unwrap().invalidations;
    direct
        .app
        .add_flow(
            0,
            FlowEntry::new(20, FlowMatch::any().in_port(2), vec![Action::Output(0)]),
        )
        .unwrap();
    assert_eq!(kernel.0.lock().unwrap().invalidations, before + 1);
    direct.finish();
}
