//! Bundles (ONF extension 230), as `ovs-ofctl --bundle` uses them: messages checked when
//! added, nothing applied before the commit, and a commit applied whole or not at all, also
//! when it takes several parts.

use std::io::Write;

use wirespeed_openflow::bundle::{control, flags};
use wirespeed_openflow::message::FlowModCommand;
use wirespeed_openflow::{Action, BundleAdd, BundleControl, Message, OfError};

use super::connection::{RUN_MAX, Timers};
use super::tests::{Peer, flow_mod, ipv4_dst, start_sized};
use super::{Agent, AgentConfig};

const BOTH: u16 = flags::ATOMIC | flags::ORDERED;

fn agent(flows_per_table: usize) -> (Agent, Peer) {
    let config = AgentConfig {
        listen: Some("127.0.0.1:0".parse().unwrap()),
        ..AgentConfig::default()
    };
    let (agent, ..) = start_sized(Timers::default(), config, flows_per_table);
    let peer = Peer::hello(agent.local_addr().unwrap());
    (agent, peer)
}

fn add(a: u8, out: u32) -> Message {
    flow_mod(
        FlowModCommand::Add,
        10,
        ipv4_dst(a),
        vec![Action::output(out)],
    )
}

fn ctl(bundle_id: u32, kind: u16) -> Message {
    Message::BundleControl(BundleControl {
        bundle_id,
        kind,
        flags: BOTH,
        properties: Vec::new(),
    })
}

/// Writes `inner` into bundle `bundle_id` as ovs-ofctl does: the same xid inside and out.
fn bundled(peer: &mut Peer, bundle_id: u32, inner: &Message, xid: u32) {
    let add = Message::BundleAdd(BundleAdd {
        bundle_id,
        flags: BOTH,
        message: inner.encode(xid).unwrap(),
    });
    peer.stream().write_all(&add.encode(xid).unwrap()).unwrap();
}

/// The ERRORs among `replies`, with the xids they name.
fn errors(peer: &mut Peer, replies: usize) -> Vec<(u32, OfError)> {
    (0..replies)
        .map(|_| match peer.receive() {
            (header, Message::Error { error, .. }) => (header.xid, error),
            other => panic!("{other:?}"),
        })
        .collect()
}

/// Every flow's match and instructions, in a fixed order.
fn outputs(peer: &mut Peer) -> Vec<String> {
    let mut flows: Vec<_> = peer
        .flows()
        .into_iter()
        .map(|f| format!("{:?} {:?}", f.matcher, f.instructions))
        .collect();
    flows.sort();
    flows
}

/// The error of the one ERROR among `replies`.
fn refused(replies: &[Message]) -> OfError {
    match replies {
        [Message::Error { error, .. }] => *error,
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_bundle_applies_at_its_commit_and_refuses_bad_messages_when_added() {
    let (_agent, mut peer) = agent(3);
    assert_eq!(
        peer.ask(&ctl(1, control::OPEN_REQUEST)),
        [ctl(1, control::OPEN_REPLY)]
    );
    let open_again = peer.ask(&ctl(1, control::OPEN_REQUEST));
    assert_eq!(refused(&open_again), OfError::BUNDLE_EXIST);
    // Two good adds; one to a port the switch has not; a barrier (only FLOW_MODs are taken);
    // an add whose inner xid is not the outer one.
    bundled(&mut peer, 1, &add(1, 2), 5001);
    bundled(&mut peer, 1, &add(2, 2), 5002);
    bundled(&mut peer, 1, &add(3, 9), 5003);
    bundled(&mut peer, 1, &Message::BarrierRequest, 5004);
    let mut stray = BundleAdd {
        bundle_id: 1,
        flags: BOTH,
        message: add(4, 2).encode(7).unwrap(),
    };
    peer.stream()
        .write_all(&Message::BundleAdd(stray.clone()).encode(5005).unwrap())
        .unwrap();
    assert_eq!(
        errors(&mut peer, 3),
        [
            (5003, OfError::BAD_ACTION_OUT_PORT),
            (5004, OfError::BUNDLE_MSG_UNSUP),
            (5005, OfError::BUNDLE_MSG_BAD_XID)
        ]
    );
    // Nothing applies before the commit.
    assert!(peer.flows().is_empty());
    assert!(peer.ask(&ctl(1, control::COMMIT_REQUEST)) == [ctl(1, control::COMMIT_REPLY)]);
    assert_eq!(outputs(&mut peer).len(), 2);
    let committed = refused(&peer.ask(&ctl(1, control::COMMIT_REQUEST)));
    assert_eq!(committed, OfError::BUNDLE_BAD_ID);

    // A closed bundle takes no more; a discarded one is gone.
    assert_eq!(
        peer.ask(&ctl(2, control::OPEN_REQUEST)),
        [ctl(2, control::OPEN_REPLY)]
    );
    bundled(&mut peer, 2, &add(3, 2), 5010);
    assert_eq!(
        peer.ask(&ctl(2, control::CLOSE_REQUEST)),
        [ctl(2, control::CLOSE_REPLY)]
    );
    stray.bundle_id = 2;
    stray.message = add(4, 2).encode(5011).unwrap();
    peer.stream()
        .write_all(&Message::BundleAdd(stray).encode(5011).unwrap())
        .unwrap();
    assert_eq!(errors(&mut peer, 1), [(5011, OfError::BUNDLE_CLOSED)]);
    assert_eq!(
        peer.ask(&ctl(2, control::DISCARD_REQUEST)),
        [ctl(2, control::DISCARD_REPLY)]
    );
    assert_eq!(outputs(&mut peer).len(), 2);

    // A bundle filled as master is not committed by a slave.
    bundled(&mut peer, 3, &add(3, 2), 5020);
    let slave = Message::RoleRequest(wirespeed_openflow::message::Role {
        role: wirespeed_openflow::message::role::SLAVE,
        generation_id: 1,
    });
    assert_eq!(peer.ask(&slave).len(), 1);
    let commit = peer.ask(&ctl(3, control::COMMIT_REQUEST));
    assert_eq!(refused(&commit), OfError::BAD_REQUEST_IS_SLAVE);
    assert_eq!(outputs(&mut peer).len(), 2);
}

#[test]
fn a_commit_the_table_cannot_take_changes_nothing_even_over_several_parts() {
    // Room for the two flows and one more.
    let (_agent, mut peer) = agent(3);
    for (xid, a) in [(1, 1), (2, 2)] {
        bundled(&mut peer, 7, &add(a, 2), xid);
    }
    assert!(peer.ask(&ctl(7, control::COMMIT_REQUEST)) == [ctl(7, control::COMMIT_REPLY)]);
    let before = outputs(&mut peer);
    // Replace the first flow, then add two new ones: the second of them does not fit.
    bundled(&mut peer, 8, &add(1, 3), 11);
    bundled(&mut peer, 8, &add(3, 2), 12);
    bundled(&mut peer, 8, &add(4, 2), 13);
    let replies = peer.ask(&ctl(8, control::COMMIT_REQUEST));
    assert_eq!(
        errors_of(&replies),
        [OfError::FLOW_MOD_TABLE_FULL, OfError::BUNDLE_MSG_FAILED]
    );
    assert_eq!(outputs(&mut peer), before, "the replaced flow is back");

    // More adds than one part holds, the last one too many: the parts before are undone.
    let (_agent, mut peer) = agent(RUN_MAX + 10);
    for i in 0..RUN_MAX + 11 {
        let dst = [10, (i / 256) as u8, (i % 256) as u8, 0];
        let host = flow_mod(
            FlowModCommand::Add,
            10,
            vec![
                wirespeed_openflow::Oxm::EthType(wirespeed_openflow::oxm::ETH_TYPE_IPV4),
                wirespeed_openflow::Oxm::Ipv4Dst(dst.into(), None),
            ],
            vec![Action::output(2)],
        );
        bundled(&mut peer, 9, &host, 100 + i as u32);
    }
    let replies = peer.ask(&ctl(9, control::COMMIT_REQUEST));
    assert_eq!(replies.len(), 2, "{replies:?}");
    assert!(peer.flows().is_empty());
}

/// The output port of each flow, by the second byte of its IPv4 destination, in order.
fn ports_by_host(peer: &mut Peer) -> Vec<(u8, u32)> {
    let mut flows: Vec<(u8, u32)> = peer
        .flows()
        .into_iter()
        .map(|f| {
            let host = f
                .matcher
                .fields
                .iter()
                .find_map(|field| match field {
                    wirespeed_openflow::Oxm::Ipv4Dst(addr, _) => Some(addr.octets()[1]),
                    _ => None,
                })
                .unwrap();
            let out = match f.instructions.as_slice() {
                [wirespeed_openflow::Instruction::ApplyActions(actions)] => match actions[..] {
                    [Action::Output { port, .. }] => port,
                    _ => panic!("{actions:?}"),
                },
                other => panic!("{other:?}"),
            };
            (host, out)
        })
        .collect();
    flows.sort_unstable();
    flows
}

#[test]
fn deletes_and_modifies_in_a_bundle_act_on_the_tables_the_messages_before_them_left() {
    let (_agent, mut peer) = agent(4);
    for (xid, a) in [(1, 1), (2, 2), (3, 3)] {
        bundled(&mut peer, 1, &add(a, 2), xid);
    }
    assert!(peer.ask(&ctl(1, control::COMMIT_REQUEST)) == [ctl(1, control::COMMIT_REPLY)]);
    assert_eq!(ports_by_host(&mut peer), [(1, 2), (2, 2), (3, 2)]);

    // `ovs-ofctl --bundle replace-flows` sends strict deletes, strict modifies and adds: here
    // with a delete of a flow the same bundle added, and a modify of one it added.
    let strict_delete = flow_mod(FlowModCommand::DeleteStrict, 10, ipv4_dst(1), vec![]);
    let modify = flow_mod(
        FlowModCommand::Modify,
        0,
        ipv4_dst(2),
        vec![Action::output(3)],
    );
    let delete = flow_mod(FlowModCommand::Delete, 0, ipv4_dst(4), vec![]);
    let modify_strict = flow_mod(
        FlowModCommand::ModifyStrict,
        10,
        ipv4_dst(5),
        vec![Action::output(1)],
    );
    for (xid, message) in [
        (10, strict_delete),
        (11, modify),
        (12, add(4, 2)),
        (13, delete),
        (14, add(5, 2)),
        (15, modify_strict),
    ] {
        bundled(&mut peer, 2, &message, xid);
    }
    assert!(peer.flows().len() == 3, "nothing applies before the commit");
    assert!(peer.ask(&ctl(2, control::COMMIT_REQUEST)) == [ctl(2, control::COMMIT_REPLY)]);
    assert_eq!(ports_by_host(&mut peer), [(2, 3), (3, 2), (5, 1)]);

    // A delete, then more adds than the table holds: the commit fails, and the deleted flow
    // is back as it was.
    let before = ports_by_host(&mut peer);
    let strict_delete = flow_mod(FlowModCommand::DeleteStrict, 10, ipv4_dst(3), vec![]);
    bundled(&mut peer, 3, &strict_delete, 20);
    for (xid, a) in [(21, 6), (22, 7), (23, 8)] {
        bundled(&mut peer, 3, &add(a, 2), xid);
    }
    let replies = peer.ask(&ctl(3, control::COMMIT_REQUEST));
    assert_eq!(
        errors_of(&replies),
        [OfError::FLOW_MOD_TABLE_FULL, OfError::BUNDLE_MSG_FAILED]
    );
    assert_eq!(ports_by_host(&mut peer), before);

    // A modify or delete the switch cannot take is refused when it is added.
    let bad_table = match flow_mod(FlowModCommand::Delete, 0, ipv4_dst(3), vec![]) {
        Message::FlowMod(mut m) => {
            m.table_id = 9;
            Message::FlowMod(m)
        }
        other => other,
    };
    bundled(&mut peer, 4, &bad_table, 30);
    let bad_port = flow_mod(
        FlowModCommand::Modify,
        0,
        ipv4_dst(3),
        vec![Action::output(9)],
    );
    bundled(&mut peer, 4, &bad_port, 31);
    assert_eq!(
        errors(&mut peer, 2),
        [
            (30, OfError::FLOW_MOD_BAD_TABLE_ID),
            (31, OfError::BAD_ACTION_OUT_PORT)
        ]
    );
}

/// The errors of `replies`, every one an ERROR.
fn errors_of(replies: &[Message]) -> Vec<OfError> {
    replies
        .iter()
        .map(|reply| match reply {
            Message::Error { error, .. } => *error,
            other => panic!("{other:?}"),
        })
        .collect()
}
