//! GROUP_MOD against a real openflow app: adds, modifies and deletes with the specification's
//! errors, the statistics and descriptions, the out_group filter of flow requests, and the
//! flows a group's delete removes with it (FLOW_REMOVED, reason GROUP_DELETE).

use wirespeed_openflow::action::{group, port};
use wirespeed_openflow::message::{
    Bucket, FlowModCommand, GroupMod, GroupModCommand, GroupType, flow_flags, role,
};
use wirespeed_openflow::multipart::{
    FlowStatsRequest, GroupDesc, MultipartRequest, ReplyBody, RequestBody,
};
use wirespeed_openflow::{Action, Instruction, Match, Message, OfError};

use super::connection::Timers;
use super::tests::{Peer, flow_mod, ipv4_dst, removed_flow, role, start_listening};

fn bucket(weight: u16, actions: Vec<Action>) -> Bucket {
    Bucket {
        weight,
        watch_port: port::ANY,
        watch_group: group::ANY,
        actions,
    }
}

fn group_mod(
    command: GroupModCommand,
    group_type: GroupType,
    group_id: u32,
    buckets: Vec<Bucket>,
) -> Message {
    Message::GroupMod(GroupMod {
        command,
        group_type,
        group_id,
        buckets,
    })
}

fn add(group_type: GroupType, id: u32, buckets: Vec<Bucket>) -> Message {
    group_mod(GroupModCommand::Add, group_type, id, buckets)
}

fn error_of(peer: &mut Peer, message: &Message) -> OfError {
    let replies = peer.ask(message);
    let [Message::Error { error, .. }] = replies.as_slice() else {
        panic!("{replies:?}");
    };
    *error
}

fn multipart(peer: &mut Peer, body: RequestBody) -> ReplyBody {
    let replies = peer.ask(&Message::MultipartRequest(MultipartRequest {
        flags: 0,
        body,
    }));
    let [Message::MultipartReply(reply)] = replies.as_slice() else {
        panic!("{replies:?}");
    };
    reply.body.clone()
}

#[test]
fn group_mods_are_refused_with_the_specs_errors() {
    let (agent, ..) = start_listening(Timers::default());
    let addr = agent.local_addr().unwrap();
    let mut peer = Peer::hello(addr);
    let out = |p: u32| vec![bucket(0, vec![Action::output(p)])];
    assert_eq!(peer.ask(&add(GroupType::All, 1, out(2))), vec![]);
    let cases = [
        (add(GroupType::All, 1, out(2)), OfError::GROUP_MOD_EXISTS),
        (
            add(GroupType::All, group::ALL, out(2)),
            OfError::GROUP_MOD_INVALID,
        ),
        (
            add(GroupType::FastFailover, 2, out(2)),
            OfError::GROUP_MOD_BAD_TYPE,
        ),
        (
            group_mod(GroupModCommand::Modify, GroupType::All, 7, out(2)),
            OfError::GROUP_MOD_UNKNOWN_GROUP,
        ),
        (
            add(GroupType::Indirect, 2, [out(2), out(3)].concat()),
            OfError::GROUP_MOD_BAD_BUCKET,
        ),
        (
            add(
                GroupType::All,
                2,
                vec![bucket(0, vec![Action::output(2)]); 33],
            ),
            OfError::GROUP_MOD_OUT_OF_BUCKETS,
        ),
        (add(GroupType::All, 2, out(9)), OfError::BAD_ACTION_OUT_PORT),
        (
            add(
                GroupType::All,
                2,
                vec![Bucket {
                    watch_port: 1,
                    ..bucket(0, vec![])
                }],
            ),
            OfError::GROUP_MOD_BAD_WATCH,
        ),
        (
            add(GroupType::All, 2, vec![bucket(0, vec![Action::Group(9)])]),
            OfError::BAD_ACTION_OUT_GROUP,
        ),
        // 1 -> 1 is a loop.
        (
            group_mod(
                GroupModCommand::Modify,
                GroupType::All,
                1,
                vec![bucket(0, vec![Action::Group(1)])],
            ),
            OfError::GROUP_MOD_LOOP,
        ),
        (
            flow_mod(FlowModCommand::Add, 1, vec![], vec![Action::Group(5)]),
            OfError::BAD_ACTION_OUT_GROUP,
        ),
    ];
    for (message, error) in cases {
        assert_eq!(error_of(&mut peer, &message), error, "{message:?}");
    }
    // A chain 2 -> 1 is fine; group 1 is then in use.
    let to_one = vec![bucket(0, vec![Action::Group(1)])];
    assert_eq!(peer.ask(&add(GroupType::Indirect, 2, to_one)), vec![]);
    let delete = |id| group_mod(GroupModCommand::Delete, GroupType::All, id, vec![]);
    assert_eq!(
        error_of(&mut peer, &delete(1)),
        OfError::GROUP_MOD_CHAINED_GROUP
    );
    // Deleting a group that is not there is no error.
    assert_eq!(peer.ask(&delete(77)), vec![]);
    // A slave's GROUP_MOD is refused.
    let mut slave = Peer::hello(addr);
    role(&mut slave, role::SLAVE);
    assert_eq!(
        error_of(&mut slave, &delete(group::ALL)),
        OfError::BAD_REQUEST_IS_SLAVE
    );
    assert_eq!(peer.ask(&delete(group::ALL)), vec![]);
    assert_eq!(
        multipart(&mut peer, RequestBody::GroupDesc),
        ReplyBody::GroupDesc(vec![])
    );
}

#[test]
fn groups_are_described_counted_and_deleted_with_their_flows() {
    let (agent, ..) = start_listening(Timers::default());
    let addr = agent.local_addr().unwrap();
    let (mut peer, mut other) = (Peer::hello(addr), Peer::hello(addr));
    let buckets = vec![
        bucket(1, vec![Action::output(2)]),
        bucket(3, vec![Action::DecNwTtl, Action::output(3)]),
    ];
    assert_eq!(
        peer.ask(&add(GroupType::Select, 1, buckets.clone())),
        vec![]
    );
    let desc = GroupDesc {
        group_type: GroupType::Select,
        group_id: 1,
        buckets,
    };
    assert_eq!(
        multipart(&mut peer, RequestBody::GroupDesc),
        ReplyBody::GroupDesc(vec![desc.clone()])
    );
    // A modify to an all group: its description follows.
    let all = vec![bucket(0, vec![Action::output(1)])];
    let modify = group_mod(GroupModCommand::Modify, GroupType::All, 1, all.clone());
    assert_eq!(peer.ask(&modify), vec![]);
    let ReplyBody::GroupDesc(descs) = multipart(&mut peer, RequestBody::GroupDesc) else {
        panic!()
    };
    assert_eq!(
        (descs[0].group_type, &descs[0].buckets),
        (GroupType::All, &all)
    );
    // Two flows send to the group, one does not.
    let Message::FlowMod(mut to_group) =
        flow_mod(FlowModCommand::Add, 5, ipv4_dst(1), vec![Action::Group(1)])
    else {
        unreachable!()
    };
    to_group.flags = flow_flags::SEND_FLOW_REM;
    assert_eq!(peer.ask(&Message::FlowMod(to_group)), vec![]);
    let second = flow_mod(FlowModCommand::Add, 5, ipv4_dst(2), vec![Action::Group(1)]);
    assert_eq!(peer.ask(&second), vec![]);
    let plain = flow_mod(FlowModCommand::Add, 5, ipv4_dst(3), vec![Action::output(2)]);
    assert_eq!(peer.ask(&plain), vec![]);
    let ReplyBody::Group(stats) = multipart(&mut peer, RequestBody::Group(group::ALL)) else {
        panic!()
    };
    assert_eq!(stats.len(), 1);
    assert_eq!(
        (stats[0].group_id, stats[0].ref_count, stats[0].packet_count),
        (1, 2, 0)
    );
    assert_eq!(stats[0].buckets, [(0, 0)]);
    // The out_group filter selects the two.
    let by_group = RequestBody::Flow(FlowStatsRequest {
        table_id: 0xff,
        out_port: port::ANY,
        out_group: 1,
        cookie: 0,
        cookie_mask: 0,
        matcher: Match::default(),
    });
    let ReplyBody::Flow(flows) = multipart(&mut peer, by_group) else {
        panic!()
    };
    assert_eq!(flows.len(), 2);
    assert!(
        flows
            .iter()
            .all(|f| f.instructions == [Instruction::ApplyActions(vec![Action::Group(1)])])
    );
    let ReplyBody::GroupFeatures(features) = multipart(&mut peer, RequestBody::GroupFeatures)
    else {
        panic!()
    };
    assert_eq!(features.types, 0b111);
    // Deleting the group removes both flows; the one that asked is reported, reason
    // GROUP_DELETE, to every controller.
    let delete = group_mod(GroupModCommand::Delete, GroupType::All, 1, vec![]);
    let replies = peer.ask(&delete);
    let expected = removed_flow(0, 3, 0);
    assert_eq!(replies, std::slice::from_ref(&expected));
    assert_eq!(other.receive().1, expected);
    assert_eq!(peer.flows().len(), 1);
    assert_eq!(
        multipart(&mut peer, RequestBody::Group(group::ALL)),
        ReplyBody::Group(vec![])
    );
}
