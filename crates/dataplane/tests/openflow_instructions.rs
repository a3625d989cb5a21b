//! The OpenFlow app's match fields beyond addresses and ports (VLAN priority, ICMP type and
//! code, ARP operation and addresses, MAC and IP addresses under any mask, metadata) and its
//! instructions beyond apply-actions (the action set's write-actions and clear-actions,
//! write-metadata), bytes in and bytes out: each field matches and does not match, the action
//! set runs in the specification's order when the pipeline ends. Every scenario ends with the
//! pool whole.

use std::net::Ipv4Addr;

use wirespeed_dataplane::app::openflow::{Action, FlowEntry, FlowError, OpenFlow, SetField};
use wirespeed_dataplane::table::classifier::FlowMatch;
use wirespeed_packet::wire::EthernetAddress;
use wirespeed_testkit::frames::{DST_MAC, FrameBuilder, L4, SRC_MAC, arp_request};

mod openflow_common;
use openflow_common::*;

/// An app of three tables whose only flows are `flows` (table, entry), on two ports.
fn app(flows: Vec<(u8, FlowEntry)>) -> OpenFlow {
    let mut app = OpenFlow::new(config(2));
    for (table, entry) in flows {
        app.add_flow(table, entry).unwrap();
    }
    app
}

/// Which of `frames`, sent on port 0, leave by port 1 (the rest are dropped: no flow).
fn forwarded(matcher: FlowMatch, frames: &[Vec<u8>]) -> Vec<bool> {
    let app = app(vec![(
        0,
        FlowEntry::new(10, matcher, vec![Action::Output(1)]),
    )]);
    let mut r = rig(app, 2);
    let mut verdicts = Vec::new();
    for frame in frames {
        let out = r.exchange(0, std::slice::from_ref(frame));
        assert!(out[0].is_empty());
        match out[1].as_slice() {
            [] => verdicts.push(false),
            [sent] => {
                assert_eq!(sent, frame, "forwarded unchanged");
                verdicts.push(true);
            }
            more => panic!("{} frames out of one", more.len()),
        }
    }
    assert!(r.finish().holds());
    verdicts
}

/// A tagged frame whose outer tag has id `vid` and priority `pcp`.
fn tagged(vid: u16, pcp: u8) -> Vec<u8> {
    let mut frame = base().vlan(vid).build();
    frame[14] |= pcp << 5;
    frame
}

fn echo() -> FrameBuilder {
    base().with_l4(L4::Echo {
        ident: 7,
        seq_no: 1,
    })
}

#[test]
fn vlan_priority_matches_alone_or_with_the_id() {
    let frames = [tagged(10, 5), tagged(10, 3), tagged(11, 5), base().build()];
    assert_eq!(
        forwarded(FlowMatch::any().vlan_pcp(5), &frames),
        [true, false, true, false]
    );
    assert_eq!(
        forwarded(FlowMatch::any().vlan(10).vlan_pcp(5), &frames),
        [true, false, false, false]
    );
    // The id alone still matches whatever the priority.
    assert_eq!(
        forwarded(FlowMatch::any().vlan(10), &frames),
        [true, true, false, false]
    );
}

#[test]
fn icmp_type_and_code_match_their_byte_of_the_key() {
    // An echo request is type 8 code 0 (ICMPv4), 128 code 0 (ICMPv6).
    let v4 = echo().build();
    let v6 = FrameBuilder::ipv6_udp()
        .with_l4(L4::Echo {
            ident: 7,
            seq_no: 1,
        })
        .build();
    let udp = base().build();
    let icmp = FlowMatch::any().ethertype(0x0800).ip_proto(1);
    assert_eq!(
        forwarded(icmp.icmp_type(8), &[v4.clone(), udp.clone()]),
        [true, false]
    );
    assert_eq!(
        forwarded(icmp.icmp_type(0), std::slice::from_ref(&v4)),
        [false]
    );
    assert_eq!(
        forwarded(icmp.icmp_type(8).icmp_code(0), std::slice::from_ref(&v4)),
        [true]
    );
    assert_eq!(
        forwarded(icmp.icmp_code(1), std::slice::from_ref(&v4)),
        [false]
    );
    let icmpv6 = FlowMatch::any().ethertype(0x86dd).ip_proto(58);
    assert_eq!(
        forwarded(icmpv6.icmp_type(128), &[v6.clone(), v4]),
        [true, false]
    );
    assert_eq!(forwarded(icmpv6.icmp_type(129), &[v6]), [false]);
}

#[test]
fn arp_operation_and_addresses_match() {
    let sender = Ipv4Addr::new(10, 0, 0, 1);
    let request = arp_request(SRC_MAC, sender, Ipv4Addr::new(10, 0, 0, 2));
    let other = arp_request(SRC_MAC, sender, Ipv4Addr::new(10, 0, 1, 2));
    let ip = base().build();
    let all = Ipv4Addr::BROADCAST;
    let frames = [request.clone(), other.clone(), ip];
    assert_eq!(
        forwarded(FlowMatch::any().arp_op(1), &frames),
        [true, true, false]
    );
    assert_eq!(forwarded(FlowMatch::any().arp_op(2), &frames), [false; 3]);
    assert_eq!(
        forwarded(
            FlowMatch::any().arp_tpa(Ipv4Addr::new(10, 0, 0, 2), all),
            &frames
        ),
        [true, false, false]
    );
    assert_eq!(
        forwarded(FlowMatch::any().arp_spa(sender, all).arp_op(1), &frames),
        [true, true, false]
    );
    // A mask with holes: the third byte is not looked at.
    let holes = Ipv4Addr::new(255, 255, 0, 255);
    assert_eq!(
        forwarded(
            FlowMatch::any().arp_tpa(Ipv4Addr::new(10, 0, 9, 2), holes),
            &frames
        ),
        [true, true, false]
    );
}

#[test]
fn mac_and_ip_addresses_match_under_any_mask() {
    let group = EthernetAddress([0x01, 0, 0x5e, 0, 0, 1]);
    let unicast = base().build();
    let multicast = base().macs(SRC_MAC, group).build();
    let group_bit = EthernetAddress([1, 0, 0, 0, 0, 0]);
    assert_eq!(
        forwarded(
            FlowMatch::any().eth_dst_masked(group_bit, group_bit),
            &[unicast.clone(), multicast.clone()]
        ),
        [false, true]
    );
    let oui = EthernetAddress([0xff, 0xff, 0xff, 0, 0, 0]);
    assert_eq!(
        forwarded(
            FlowMatch::any().eth_dst_masked(DST_MAC, oui),
            &[unicast.clone(), multicast]
        ),
        [true, false]
    );
    // 10.0.0.2 and 10.0.0.1 differ in the last bit: an even-host mask takes only .2.
    let even = Ipv4Addr::new(0, 0, 0, 1);
    let to_a = base()
        .with_l3(wirespeed_testkit::frames::L3::Ipv4 { src: B, dst: A })
        .build();
    assert_eq!(
        forwarded(
            FlowMatch::any().ipv4_dst_masked(Ipv4Addr::new(0, 0, 0, 0), even),
            &[unicast, to_a]
        ),
        [true, false]
    );
}

#[test]
fn the_action_set_runs_in_the_specs_order_when_the_pipeline_ends() {
    // Written out of order in two tables: output, set-field and dec-TTL in table 0, the push
    // in table 1; they run push, dec-TTL, set-field, output.
    let mut first = FlowEntry::new(10, FlowMatch::any().in_port(0), vec![]).goto(1);
    first.write_actions = vec![
        Action::Output(1),
        Action::SetField(SetField::EthDst(NEW_MAC)),
        Action::DecTtl,
    ];
    let mut second = FlowEntry::new(10, FlowMatch::any(), vec![]);
    second.write_actions = vec![Action::PushVlan(10)];
    let mut r = rig(app(vec![(0, first), (1, second)]), 2);
    let out = r.exchange(0, &[base().build()]);
    // The frame as it came, with the tag after the MACs.
    let mut expected = base().macs(SRC_MAC, NEW_MAC).ttl(63).build();
    expected.splice(12..12, [0x81, 0x00, 0x00, 10]);
    assert_eq!(out[1], [expected.clone()]);
    // Again from the flow cache, the same bytes.
    let out = r.exchange(0, &[base().build()]);
    assert_eq!(out[1], [expected]);
    assert!(r.finish().holds());
}

#[test]
fn apply_actions_act_at_once_and_the_set_only_at_the_end() {
    // Table 0 writes an output to port 0 and rewrites the destination in the set; table 1
    // matches the original destination (the set has not run) and replaces the output.
    let mut first = FlowEntry::new(10, FlowMatch::any().in_port(0), vec![]).goto(1);
    first.write_actions = vec![
        Action::Output(0),
        Action::SetField(SetField::EthDst(NEW_MAC)),
    ];
    let mut second = FlowEntry::new(10, FlowMatch::any().eth_dst(DST_MAC), vec![]);
    second.write_actions = vec![Action::Output(1)];
    let mut r = rig(app(vec![(0, first.clone()), (1, second)]), 2);
    let out = r.exchange(0, &[base().build()]);
    assert!(out[0].is_empty());
    assert_eq!(out[1], [base().macs(SRC_MAC, NEW_MAC).build()]);
    assert!(r.finish().holds());
    // An apply-actions rewrite is seen by table 1, which then misses: no action set runs.
    first.actions = vec![Action::SetField(SetField::EthDst(NEW_MAC))];
    let mut second = FlowEntry::new(10, FlowMatch::any().eth_dst(DST_MAC), vec![]);
    second.write_actions = vec![Action::Output(1)];
    let mut r = rig(app(vec![(0, first), (1, second)]), 2);
    let out = r.exchange(0, &[base().build()]);
    assert!(out[0].is_empty() && out[1].is_empty());
    assert!(r.finish().holds());
}

#[test]
fn clear_actions_empties_the_set_before_the_entry_writes() {
    let mut first = FlowEntry::new(10, FlowMatch::any().in_port(0), vec![]).goto(1);
    first.write_actions = vec![Action::Output(1), Action::DecTtl];
    // Table 1 clears (the dec-TTL goes) and writes its own output.
    let mut second = FlowEntry::new(10, FlowMatch::any(), vec![]);
    second.clear_actions = true;
    second.write_actions = vec![Action::Output(1)];
    let mut r = rig(app(vec![(0, first.clone()), (1, second)]), 2);
    let out = r.exchange(0, &[base().build()]);
    assert_eq!(out[1], [base().build()]);
    assert!(r.finish().holds());
    // Cleared and nothing written: the packet goes nowhere.
    let mut second = FlowEntry::new(10, FlowMatch::any(), vec![]);
    second.clear_actions = true;
    let mut r = rig(app(vec![(0, first), (1, second)]), 2);
    let out = r.exchange(0, &[base().build()]);
    assert!(out[0].is_empty() && out[1].is_empty());
    assert!(r.finish().holds());
}

#[test]
fn metadata_written_in_one_table_is_matched_in_a_later_one() {
    // Port 0 writes 0x12 into the low byte, port 1 writes 0x34; table 1 sends the first to
    // port 1 and the second to port 0, keeping the other bits as table 0 found them (0).
    let mut by_port = Vec::new();
    for (port, value) in [(0u16, 0x12u64), (1, 0x34)] {
        let mut entry = FlowEntry::new(10, FlowMatch::any().in_port(port), vec![]).goto(1);
        entry.write_metadata = Some((value | 0xff00, 0xff));
        by_port.push((0, entry));
    }
    by_port.push((
        1,
        FlowEntry::new(
            10,
            FlowMatch::any().metadata(0x12, 0xffff),
            vec![Action::Output(1)],
        ),
    ));
    by_port.push((
        1,
        FlowEntry::new(
            10,
            FlowMatch::any().metadata(0x34, 0xff),
            vec![Action::Output(0)],
        ),
    ));
    let mut r = rig(app(by_port), 2);
    let frame = base().build();
    let out = r.exchange(0, std::slice::from_ref(&frame));
    assert_eq!(
        (out[0].len(), out[1].as_slice()),
        (0, [frame.clone()].as_slice())
    );
    let out = r.exchange(1, std::slice::from_ref(&frame));
    assert_eq!((out[0].as_slice(), out[1].len()), ([frame].as_slice(), 0));
    assert!(r.finish().holds());
}

#[test]
fn a_write_actions_with_two_of_a_kind_is_refused() {
    let mut app = OpenFlow::new(config(2));
    let mut entry = FlowEntry::new(1, FlowMatch::any(), vec![]);
    entry.write_actions = vec![Action::Output(0), Action::Flood];
    assert_eq!(
        app.add_flow(0, entry.clone()),
        Err(FlowError::DuplicateInSet {
            action: Action::Flood
        })
    );
    entry.write_actions = vec![Action::Output(5)];
    assert!(matches!(
        app.add_flow(0, entry),
        Err(FlowError::BadPort { port: 5, .. })
    ));
}
