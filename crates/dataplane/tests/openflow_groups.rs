//! The OpenFlow app's groups, packets in and out byte for byte: an `all` group copies to
//! every bucket (each with its own rewrites), a select group spreads flows over its buckets by
//! weight and keeps each flow on one, an indirect group and a chain of groups forward as one
//! bucket says, a group before other actions acts on a copy; group and bucket counters; flows
//! that name a missing group are refused, and removing a group removes its flows.

use std::collections::HashMap;

use wirespeed_dataplane::app::openflow::group::{BucketSpec, GroupKind, GroupSpec};
use wirespeed_dataplane::app::openflow::{Action, FlowEntry, OpenFlow, SetField};
use wirespeed_dataplane::command::{AppCommand, AppReply, FlowRule, GroupEdit, GroupRule};
use wirespeed_dataplane::table::classifier::FlowMatch;
use wirespeed_packet::MAX_BATCH;
use wirespeed_testkit::frames::{L4, SRC_MAC};

mod openflow_common;
use openflow_common::*;

fn group(id: u32, kind: GroupKind, buckets: &[(u16, Vec<Action>)]) -> GroupSpec {
    GroupSpec {
        id,
        kind,
        buckets: buckets
            .iter()
            .map(|(weight, actions)| BucketSpec {
                weight: *weight,
                actions: actions.clone(),
            })
            .collect(),
    }
}

fn to_group(app: &mut OpenFlow, id: u32) {
    app.add_flow(
        0,
        FlowEntry::new(1, FlowMatch::any(), vec![Action::Group(id)]),
    )
    .unwrap();
}

#[test]
fn an_all_group_sends_every_bucket_its_own_copy() {
    let mut app = OpenFlow::new(config(4));
    app.add_group(group(
        1,
        GroupKind::All,
        &[
            (0, vec![Action::Output(1)]),
            (
                0,
                vec![
                    Action::SetField(SetField::EthDst(NEW_MAC)),
                    Action::Output(2),
                ],
            ),
            (0, vec![Action::PushVlan(7), Action::Output(3)]),
        ],
    ))
    .unwrap();
    to_group(&mut app, 1);
    let mut rig = rig(app, 4);
    let frame = base().build();
    let input = vec![frame.clone(); 10];
    let out = rig.exchange(0, &input);
    assert!(out[0].is_empty());
    assert_eq!(out[1], input);
    assert_eq!(out[2], vec![base().macs(SRC_MAC, NEW_MAC).build(); 10]);
    // The tag is pushed on the copy the last bucket took, not on the others.
    let mut tagged = frame.clone();
    tagged.splice(12..12, [0x81, 0x00, 0x00, 0x07]);
    assert_eq!(out[3], vec![tagged; 10]);
    assert_eq!(counter(&rig, "openflow.copies"), 20);
    assert!(rig.finish().holds());
}

#[test]
fn a_select_group_spreads_flows_by_weight_and_keeps_each_on_one_bucket() {
    let mut app = OpenFlow::new(config(4));
    app.add_group(group(
        1,
        GroupKind::Select,
        &[
            (1, vec![Action::Output(1)]),
            (0, vec![Action::Output(2)]),
            (3, vec![Action::Output(3)]),
        ],
    ))
    .unwrap();
    to_group(&mut app, 1);
    let mut rig = rig(app, 4);
    let flow = |port: u16| {
        base()
            .with_l4(L4::Udp {
                src_port: port,
                dst_port: 53,
            })
            .build()
    };
    let mut bucket_of: HashMap<u16, usize> = HashMap::new();
    for round in 0..3 {
        for first in (0..400u16).step_by(20) {
            let frames: Vec<Vec<u8>> = (first..first + 20).map(|p| flow(1000 + p)).collect();
            let out = rig.exchange(0, &frames);
            for (port, sent) in out.iter().enumerate() {
                for frame in sent {
                    let at = frames.iter().position(|f| f == frame).unwrap();
                    let src = first + at as u16;
                    let before = bucket_of.insert(src, port);
                    assert!(
                        before.is_none_or(|b| b == port),
                        "flow {src} moved from {before:?} to {port} in round {round}"
                    );
                }
            }
        }
    }
    assert_eq!(bucket_of.len(), 400);
    let on = |port: usize| bucket_of.values().filter(|&&p| p == port).count();
    assert_eq!(on(0) + on(2), 0, "weight 0 and the ingress take nothing");
    assert!((60..140).contains(&on(1)), "weight 1: {}", on(1));
    assert!((260..340).contains(&on(3)), "weight 3: {}", on(3));
    assert!(rig.finish().holds());
}

#[test]
fn indirect_groups_chains_and_a_group_before_an_output_forward_byte_for_byte() {
    let mut app = OpenFlow::new(config(4));
    app.add_group(group(
        2,
        GroupKind::Indirect,
        &[(0, vec![Action::DecTtl, Action::Output(2)])],
    ))
    .unwrap();
    app.add_group(group(
        1,
        GroupKind::All,
        &[
            (0, vec![Action::Output(1)]),
            (
                0,
                vec![
                    Action::SetField(SetField::EthSrc(NEW_MAC)),
                    Action::Group(2),
                ],
            ),
        ],
    ))
    .unwrap();
    // The group acts on a copy: the output after it sends the packet as it was.
    app.add_flow(
        0,
        FlowEntry::new(
            1,
            FlowMatch::any(),
            vec![Action::Group(1), Action::Output(3)],
        ),
    )
    .unwrap();
    let mut rig = rig(app, 4);
    let frame = base().ttl(9).build();
    let out = rig.exchange(0, std::slice::from_ref(&frame));
    assert_eq!(out[1], vec![frame.clone()]);
    assert_eq!(
        out[2],
        vec![
            base()
                .ttl(8)
                .macs(NEW_MAC, wirespeed_testkit::frames::DST_MAC)
                .build()
        ]
    );
    assert_eq!(out[3], vec![frame]);
    assert!(rig.finish().holds());
}

fn rule(id: u32, kind: &str, buckets: &[&[&str]]) -> GroupRule {
    GroupRule {
        id,
        kind: kind.into(),
        buckets: buckets
            .iter()
            .map(|b| b.iter().map(|a| a.to_string()).collect())
            .collect(),
    }
}

fn flow_to(group: &str) -> FlowRule {
    FlowRule {
        priority: 1,
        fields: vec![("flags".into(), "send_flow_rem".into())],
        actions: vec![format!("group:{group}")],
    }
}

/// Through the worker's command channel, as `wirespeed ctl group ...` and the OpenFlow agent
/// send them: adds with their refusals, `show groups` with the counts, a modify that keeps
/// the group's counts, and deletes that take the group's flows with them.
#[test]
fn group_commands_count_show_modify_and_remove_groups_with_their_flows() {
    let app = OpenFlow::new(config(3));
    let mut rig = rig(app, 3);
    let mut control = rig.commands();
    let mut call = |rig: &mut _, command| call(rig, &mut control, command);
    let why = refused(call(&mut rig, AppCommand::FlowAdd(flow_to("1"))));
    assert!(why.contains("no group 1"), "{why}");
    let all = rule(1, "all", &[&["output:1"], &["output:2"]]);
    assert!(matches!(
        call(&mut rig, AppCommand::GroupEdit(GroupEdit::Add(all.clone()))),
        AppReply::Done
    ));
    let why = refused(call(&mut rig, AppCommand::GroupEdit(GroupEdit::Add(all))));
    assert!(why.contains("exists"), "{why}");
    let bad = rule(2, "select", &[&["weight:1", "output:p9"]]);
    let why = refused(call(&mut rig, AppCommand::GroupEdit(GroupEdit::Add(bad))));
    assert!(
        why.contains("bucket 0") && why.contains("output:p9"),
        "{why}"
    );
    let bad = rule(2, "fast_failover", &[]);
    let why = refused(call(&mut rig, AppCommand::GroupEdit(GroupEdit::Add(bad))));
    assert!(why.contains("not a group type"), "{why}");
    assert!(matches!(
        call(&mut rig, AppCommand::FlowAdd(flow_to("1"))),
        AppReply::Done
    ));
    let small = base().build();
    let large = base().payload_len(300).build();
    for _ in 0..5 {
        let out = rig.exchange(0, &[small.clone(), large.clone()]);
        assert_eq!(out[1], [small.clone(), large.clone()]);
        assert_eq!(out[2], [small.clone(), large.clone()]);
    }
    let bytes = (5 * (small.len() + large.len())).to_string();
    let shown = table(call(&mut rig, AppCommand::ShowGroups));
    assert_eq!(
        shown.columns,
        [
            "group",
            "type",
            "buckets",
            "packets",
            "bytes",
            "duration",
            "bucket_counts"
        ]
    );
    let row = &shown.rows[0];
    assert_eq!(
        row[..5],
        ["1", "all", "output:p1 output:p2", "10", bytes.as_str()]
    );
    assert_eq!(row[6], format!("10/{bytes} 10/{bytes}"));
    // A modify keeps the group's counts; the new buckets count from zero.
    let select = rule(
        1,
        "select",
        &[&["weight:0", "output:1"], &["weight:5", "output:2"]],
    );
    assert!(matches!(
        call(&mut rig, AppCommand::GroupEdit(GroupEdit::Modify(select))),
        AppReply::Done
    ));
    let out = rig.exchange(0, std::slice::from_ref(&small));
    assert!(out[1].is_empty());
    assert_eq!(out[2], std::slice::from_ref(&small));
    let row = table(call(&mut rig, AppCommand::ShowGroups)).rows[0].clone();
    assert_eq!(
        row[1..4],
        ["select", "weight:0,output:p1 weight:5,output:p2", "11"]
    );
    assert_eq!(row[6], format!("0/0 1/{}", small.len()));
    // Removing the group removes the flow that sent to it: packets now miss.
    assert!(matches!(
        call(&mut rig, AppCommand::GroupEdit(GroupEdit::Remove(1))),
        AppReply::Done
    ));
    assert!(table(call(&mut rig, AppCommand::ShowFlows)).rows.len() == 1);
    let out = rig.exchange(0, std::slice::from_ref(&small));
    assert!(out.iter().all(Vec::is_empty));
    let why = refused(call(&mut rig, AppCommand::GroupEdit(GroupEdit::Remove(1))));
    assert!(why.contains("no group 1"), "{why}");
    assert!(rig.finish().holds());
}

/// A chain of `all` groups that would copy one packet 32 x 32 times makes at most a batch of
/// copies, counts the rest, and leaves the pool whole.
#[test]
fn a_fan_out_of_all_groups_is_bounded_by_the_batch_of_copies() {
    let mut app = OpenFlow::new(config(2));
    let wide = |action: Action| vec![(0, vec![action]); 32];
    app.add_group(group(2, GroupKind::All, &wide(Action::Output(1))))
        .unwrap();
    app.add_group(group(1, GroupKind::All, &wide(Action::Group(2))))
        .unwrap();
    to_group(&mut app, 1);
    let mut rig = rig(app, 2);
    let frame = base().build();
    let out = rig.exchange(0, std::slice::from_ref(&frame));
    assert!(out[1].len() <= MAX_BATCH + 1, "{}", out[1].len());
    assert!(out[1].len() > 32, "{}", out[1].len());
    assert!(out[1].iter().all(|f| *f == frame));
    assert!(counter(&rig, "openflow.emit_overflow") > 0);
    assert!(rig.finish().holds());
}

/// A group in a flow's action set forwards instead of the set's output (OpenFlow 1.3 §5.10),
/// and removing the group removes the flow.
#[test]
fn a_group_in_the_action_set_replaces_its_output() {
    let mut app = OpenFlow::new(config(4));
    app.add_group(group(
        1,
        GroupKind::All,
        &[(0, vec![Action::Output(1)]), (0, vec![Action::Output(3)])],
    ))
    .unwrap();
    let mut entry = FlowEntry::new(1, FlowMatch::any(), vec![]);
    entry.write_actions = vec![Action::Output(2), Action::Group(1)];
    app.add_flow(0, entry).unwrap();
    assert_eq!(app.flows().len(), 1);
    let mut rig = rig(app, 4);
    let mut control = rig.commands();
    let frame = base().build();
    let out = rig.exchange(0, std::slice::from_ref(&frame));
    assert_eq!(out[1], std::slice::from_ref(&frame));
    assert!(out[2].is_empty());
    assert_eq!(out[3], std::slice::from_ref(&frame));
    let removed = call(
        &mut rig,
        &mut control,
        AppCommand::GroupEdit(GroupEdit::Remove(1)),
    );
    assert!(matches!(removed, AppReply::Done), "{removed:?}");
    assert_eq!(
        table(call(&mut rig, &mut control, AppCommand::ShowFlows))
            .rows
            .len(),
        1,
        "only the cache row"
    );
    assert!(rig.finish().holds());
}
