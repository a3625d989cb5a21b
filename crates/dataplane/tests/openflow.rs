//! The OpenFlow app's actions, bytes in and bytes out: goto-table, set-field (checked against
//! frames built from scratch, so every checksum is compared with a full recomputation), VLAN push
//! and pop, output, flood, drop, table miss and the control errors. Every scenario ends with the
//! pool whole. The flow tables over time (counters, cache tiers, timeouts, removal, hostile and
//! random traffic) are in `openflow_flows.rs`.

use std::net::Ipv4Addr;

use wirespeed_dataplane::app::openflow::{
    Action, FlowEntry, FlowError, MissAction, OpenFlow, OpenFlowConfig, SetField,
};
use wirespeed_dataplane::table::classifier::FlowMatch;
use wirespeed_packet::wire::{ipv4, tcp, udp};
use wirespeed_packet::{DropReason, MAX_VLAN_TAGS};
use wirespeed_testkit::frames::{FrameBuilder, L3, L4};

mod openflow_common;
use openflow_common::*;

#[test]
fn output_forwards_unchanged_and_the_fast_path_takes_over() {
    let mut app = OpenFlow::new(config(2));
    app.add_flow(
        0,
        FlowEntry::new(10, FlowMatch::any().in_port(0), vec![Action::Output(1)]),
    )
    .unwrap();
    let mut rig = rig(app, 2);
    let frame = base().build();
    let input = vec![frame.clone(); 100];
    let out = rig.exchange(0, &input);
    assert_eq!(out[1], input);
    assert!(out[0].is_empty());
    // One packet walked the tables; the next was a megaflow hit (and went into the cache);
    // every later one hit the cache.
    assert_eq!(counter(&rig, "openflow.slow_path"), 1);
    assert_eq!(counter(&rig, "openflow.classifier_hits"), 1);
    assert_eq!(counter(&rig, "openflow.cache_hits"), 98);
    assert_eq!(counter(&rig, "openflow.megaflows"), 1);
    // Port 1 has no flow: a table miss, dropped with its reason.
    let out = rig.exchange(1, &[frame]);
    assert!(out[0].is_empty());
    assert_eq!(drops(&rig, DropReason::TableMiss), 1);
    assert_eq!(counter(&rig, "openflow.table_misses"), 1);
    assert!(rig.finish().holds());
}

#[test]
fn in_port_sends_back_where_the_packet_came_from_and_all_everywhere() {
    let mut app = OpenFlow::new(config(3));
    // One flow for every port: back out of the ingress port.
    app.add_flow(
        0,
        FlowEntry::new(10, FlowMatch::any().l4_dst(7), vec![Action::InPort]),
    )
    .unwrap();
    // ALL: every port, the ingress port too; a copy first, then the packet.
    app.add_flow(
        0,
        FlowEntry::new(
            10,
            FlowMatch::any().l4_dst(8),
            vec![
                Action::All,
                Action::SetField(SetField::EthDst(NEW_MAC)),
                Action::InPort,
            ],
        ),
    )
    .unwrap();
    let mut rig = rig(app, 3);
    let echo = base()
        .with_l4(L4::Udp {
            src_port: 1,
            dst_port: 7,
        })
        .build();
    for port in 0..3 {
        let out = rig.exchange(port, std::slice::from_ref(&echo));
        for (p, frames) in out.iter().enumerate() {
            let want = if p == port {
                vec![echo.clone()]
            } else {
                Vec::new()
            };
            assert_eq!(frames, &want, "from port {port}, out of port {p}");
        }
    }
    let all = base()
        .with_l4(L4::Udp {
            src_port: 1,
            dst_port: 8,
        })
        .build();
    let mut rewritten = all.clone();
    rewritten[..6].copy_from_slice(&NEW_MAC.0);
    let out = rig.exchange(1, std::slice::from_ref(&all));
    assert_eq!(out[0], std::slice::from_ref(&all));
    // The ingress port's two (in either order: the copy goes with the packets the worker
    // created).
    let mut back = out[1].clone();
    back.sort();
    let mut want = vec![all.clone(), rewritten];
    want.sort();
    assert_eq!(back, want);
    assert_eq!(out[2], [all]);
    assert!(rig.finish().holds());
}

#[test]
fn goto_table_matches_the_rewritten_key_and_set_field_keeps_checksums_right() {
    let mut app = OpenFlow::new(config(2));
    let new_src = Ipv4Addr::new(172, 16, 0, 9);
    let new_dst = Ipv4Addr::new(192, 0, 2, 77);
    app.add_flow(
        0,
        FlowEntry::new(
            10,
            FlowMatch::any().ipv4_dst(B, 32),
            vec![
                Action::SetField(SetField::EthDst(NEW_MAC)),
                Action::SetField(SetField::Ipv4Src(new_src)),
                Action::SetField(SetField::Ipv4Dst(new_dst)),
                Action::SetField(SetField::L4Src(4000)),
                Action::SetField(SetField::L4Dst(5353)),
                Action::DecTtl,
            ],
        )
        .goto(2),
    )
    .unwrap();
    // Table 2 sees the rewritten destination port and address.
    app.add_flow(
        2,
        FlowEntry::new(
            5,
            FlowMatch::any().ipv4_dst(new_dst, 32).l4_dst(5353),
            vec![Action::Output(1)],
        ),
    )
    .unwrap();
    let mut rig = rig(app, 2);
    for l4 in [
        L4::Udp {
            src_port: 1024,
            dst_port: 1025,
        },
        L4::Tcp {
            src_port: 1024,
            dst_port: 1025,
        },
    ] {
        let input = base().with_l4(l4).payload_len(33).build();
        let rewritten = match l4 {
            L4::Udp { .. } => L4::Udp {
                src_port: 4000,
                dst_port: 5353,
            },
            _ => L4::Tcp {
                src_port: 4000,
                dst_port: 5353,
            },
        };
        let expected = base()
            .with_l4(rewritten)
            .with_l3(L3::Ipv4 {
                src: new_src,
                dst: new_dst,
            })
            .macs(wirespeed_testkit::frames::SRC_MAC, NEW_MAC)
            .ttl(63)
            .payload_len(33)
            .build();
        let out = rig.exchange(0, &[input.clone(), input]);
        assert_eq!(out[1], vec![expected.clone(), expected.clone()]);
        // And explicitly: the checksums verify.
        let ip = ipv4::Packet::new_checked(&out[1][0][14..]).unwrap();
        assert!(ip.verify_checksum());
        match l4 {
            L4::Udp { .. } => assert!(
                udp::Packet::new_checked(ip.payload())
                    .unwrap()
                    .verify_checksum_v4(new_src, new_dst)
            ),
            _ => assert!(
                tcp::Packet::new_checked(ip.payload())
                    .unwrap()
                    .verify_checksum_v4(new_src, new_dst)
            ),
        }
    }
    assert!(rig.finish().holds());
}

#[test]
fn a_udp_packet_without_checksum_keeps_none() {
    let mut app = OpenFlow::new(config(2));
    app.add_flow(
        0,
        FlowEntry::new(
            1,
            FlowMatch::any(),
            vec![
                Action::SetField(SetField::Ipv4Src(B)),
                Action::SetField(SetField::L4Dst(9)),
                Action::Output(1),
            ],
        ),
    )
    .unwrap();
    let mut rig = rig(app, 2);
    let mut input = base().build();
    input[40] = 0;
    input[41] = 0;
    let out = rig.exchange(0, &[input]);
    let frame = &out[1][0];
    assert_eq!(&frame[40..42], &[0, 0]);
    assert_eq!(&frame[36..38], &9u16.to_be_bytes());
    assert!(
        ipv4::Packet::new_checked(&frame[14..])
            .unwrap()
            .verify_checksum()
    );
    assert!(rig.finish().holds());
}

#[test]
fn vlan_push_pop_and_set_vid_give_exact_bytes() {
    let mut app = OpenFlow::new(config(4));
    // Port 0: push 100 -> port 1. Port 1: pop -> port 0. Port 2: push 200 over the tag -> 3.
    // Port 3: set the outer VLAN id to 300 -> 2.
    app.add_flow(
        0,
        FlowEntry::new(
            1,
            FlowMatch::any().in_port(0),
            vec![Action::PushVlan(100), Action::Output(1)],
        ),
    )
    .unwrap();
    app.add_flow(
        0,
        FlowEntry::new(
            1,
            FlowMatch::any().in_port(1).vlan(100),
            vec![Action::PopVlan, Action::Output(0)],
        ),
    )
    .unwrap();
    app.add_flow(
        0,
        FlowEntry::new(
            1,
            FlowMatch::any().in_port(2),
            vec![Action::PushVlan(200), Action::Output(3)],
        ),
    )
    .unwrap();
    app.add_flow(
        0,
        FlowEntry::new(
            1,
            FlowMatch::any().in_port(3),
            vec![Action::SetField(SetField::VlanVid(300)), Action::Output(2)],
        ),
    )
    .unwrap();
    let mut rig = rig(app, 4);
    // The payload, not the frame length, stays fixed when a tag comes or goes.
    let fixed = || FrameBuilder::ipv4_udp().payload_len(18);
    let untagged = fixed().build();
    let tagged = fixed().vlan(100).build();
    let out = rig.exchange(0, std::slice::from_ref(&untagged));
    assert_eq!(out[1], vec![tagged.clone()]);
    let out = rig.exchange(1, std::slice::from_ref(&tagged));
    assert_eq!(out[0], vec![untagged.clone()]);
    let out = rig.exchange(2, std::slice::from_ref(&tagged));
    assert_eq!(out[3], vec![fixed().vlan(200).vlan(100).build()]);
    let out = rig.exchange(3, std::slice::from_ref(&tagged));
    assert_eq!(out[2], vec![fixed().vlan(300).build()]);
    // A third tag goes over the other two as a service tag (TPID 0x88a8) ...
    let double = fixed().vlan(5).vlan(6).build();
    let out = rig.exchange(2, std::slice::from_ref(&double));
    let mut triple = double[..12].to_vec();
    triple.extend_from_slice(&[0x88, 0xa8, 0, 200]);
    triple.extend_from_slice(&double[12..]);
    assert_eq!(out[3], vec![triple]);
    // ... and a tag beyond the parser's bound is refused.
    let full = (0..MAX_VLAN_TAGS as u16).fold(fixed(), |frame, vid| frame.vlan(vid + 1));
    let out = rig.exchange(2, &[full.build()]);
    assert!(out.iter().all(Vec::is_empty));
    assert_eq!(drops(&rig, DropReason::VlanTooDeep), 1);
    assert!(rig.finish().holds());
}

#[test]
fn flood_copies_to_every_port_but_the_ingress() {
    let mut app = OpenFlow::new(config(4));
    app.add_flow(0, FlowEntry::new(1, FlowMatch::any(), vec![Action::Flood]))
        .unwrap();
    let mut rig = rig(app, 4);
    let frame = base().build();
    let input = vec![frame.clone(); 40];
    let out = rig.exchange(2, &input);
    assert!(out[2].is_empty());
    for port in [0, 1, 3] {
        assert_eq!(out[port], input, "port {port}");
    }
    assert_eq!(counter(&rig, "openflow.copies"), 80);
    assert!(rig.finish().holds());
}

#[test]
fn outputs_between_rewrites_send_each_port_the_bytes_of_its_moment() {
    let mut app = OpenFlow::new(config(3));
    app.add_flow(
        0,
        FlowEntry::new(
            1,
            FlowMatch::any(),
            vec![
                Action::Output(1),
                Action::SetField(SetField::EthDst(NEW_MAC)),
                Action::Output(2),
                // Nothing after the last output matters.
                Action::SetField(SetField::EthSrc(NEW_MAC)),
            ],
        ),
    )
    .unwrap();
    let mut rig = rig(app, 3);
    let frame = base().build();
    let out = rig.exchange(0, std::slice::from_ref(&frame));
    assert_eq!(out[1], vec![frame.clone()]);
    assert_eq!(
        out[2],
        vec![
            base()
                .macs(wirespeed_testkit::frames::SRC_MAC, NEW_MAC)
                .build()
        ]
    );
    assert!(rig.finish().holds());
}

#[test]
fn drop_ttl_and_miss_actions() {
    let mut app = OpenFlow::new(OpenFlowConfig {
        miss: MissAction::Output(2),
        ..config(3)
    });
    app.add_flow(
        0,
        FlowEntry::new(
            5,
            FlowMatch::any().l4_dst(1025),
            vec![Action::Output(1), Action::Drop],
        ),
    )
    .unwrap();
    app.add_flow(
        0,
        FlowEntry::new(
            5,
            FlowMatch::any().l4_dst(7),
            vec![Action::DecTtl, Action::Output(1)],
        ),
    )
    .unwrap();
    let mut rig = rig(app, 3);
    let dropped = base().build();
    let expiring = base()
        .with_l4(L4::Udp {
            src_port: 1,
            dst_port: 7,
        })
        .ttl(1)
        .build();
    let missing = base()
        .with_l4(L4::Udp {
            src_port: 1,
            dst_port: 8,
        })
        .build();
    let out = rig.exchange(0, &[dropped, expiring, missing.clone()]);
    assert!(out[1].is_empty());
    assert_eq!(out[2], vec![missing]);
    assert_eq!(drops(&rig, DropReason::NoOutput), 1);
    assert_eq!(drops(&rig, DropReason::TtlExpired), 1);
    assert_eq!(counter(&rig, "openflow.table_misses"), 1);
    assert!(rig.finish().holds());
}

#[test]
fn control_errors_name_the_problem() {
    let mut app = OpenFlow::new(config(2));
    let entry = FlowEntry::new(1, FlowMatch::any(), vec![Action::Output(1)]);
    assert_eq!(
        app.add_flow(9, entry.clone()),
        Err(FlowError::NoSuchTable {
            table: 9,
            tables: 4
        })
    );
    assert_eq!(
        app.add_flow(1, entry.clone().goto(1)),
        Err(FlowError::BadGoto { table: 1, goto: 1 })
    );
    assert_eq!(
        app.add_flow(
            0,
            FlowEntry::new(1, FlowMatch::any(), vec![Action::Output(5)])
        ),
        Err(FlowError::BadPort { port: 5, ports: 2 })
    );
    let mut small = OpenFlow::new(OpenFlowConfig {
        flows_per_table: 1,
        ..config(2)
    });
    small.add_flow(0, entry.clone()).unwrap();
    // The same priority and match replaces; a new one does not fit.
    small.add_flow(0, entry.clone()).unwrap();
    assert!(matches!(
        small.add_flow(0, FlowEntry::new(2, FlowMatch::any(), vec![])),
        Err(FlowError::TableFull { .. })
    ));
    assert_eq!(small.flows().len(), 1);
    assert!(
        FlowError::TableFull {
            table: 0,
            capacity: 1
        }
        .to_string()
        .contains("flows_per_table")
    );
}
