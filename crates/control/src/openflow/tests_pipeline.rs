//! FLOW_MODs between barriers go to the workers as one run, each refusal with its own xid;
//! flow statistics and selections read the table page by page, whatever its size.

use std::io::Write;

use wirespeed_dataplane::command::FLOW_PAGE_SLOTS;
use wirespeed_openflow::action::{group, port};
use wirespeed_openflow::message::FlowModCommand;
use wirespeed_openflow::multipart::{
    FlowStatsRequest, MORE, MultipartRequest, ReplyBody, RequestBody,
};
use wirespeed_openflow::oxm::ETH_TYPE_IPV4;
use wirespeed_openflow::{Action, Match, Message, OfError, Oxm};

use super::AgentConfig;
use super::connection::Timers;
use super::tests::{Peer, flow_mod, ipv4_dst, start_sized};

fn listening() -> AgentConfig {
    AgentConfig {
        listen: Some("127.0.0.1:0".parse().unwrap()),
        ..AgentConfig::default()
    }
}

/// An add of the /32 flow to host `i` of 10.0.0.0/16, output to port 2.
fn add_host(i: usize) -> Message {
    let dst = [10, 0, (i / 256) as u8, (i % 256) as u8];
    flow_mod(
        FlowModCommand::Add,
        10,
        vec![Oxm::EthType(ETH_TYPE_IPV4), Oxm::Ipv4Dst(dst.into(), None)],
        vec![Action::output(2)],
    )
}

#[test]
fn a_run_of_flow_mods_is_one_command_and_each_refusal_names_its_xid() {
    // Two flows a table: the app itself refuses a third.
    let (agent, handler, _, _) = start_sized(Timers::default(), listening(), 2);
    let mut peer = Peer::hello(agent.local_addr().unwrap());
    let add = |a: u8, out: u32| {
        flow_mod(
            FlowModCommand::Add,
            10,
            ipv4_dst(a),
            vec![Action::output(out)],
        )
    };
    // All in one write, so the agent finds them together: A, B to a port the switch has not
    // (refused before the run), C, D (a third flow: the app refuses it in the run), E (A
    // again with another action: it replaces A, so it fits), then a barrier.
    let messages = [add(1, 2), add(2, 9), add(3, 2), add(4, 2), add(1, 3)];
    let mut bytes = Vec::new();
    let mut xids = Vec::new();
    for (i, message) in messages.iter().enumerate() {
        xids.push(1000 + i as u32);
        bytes.extend(message.encode(1000 + i as u32).unwrap());
    }
    bytes.extend(Message::BarrierRequest.encode(2000).unwrap());
    peer.stream().write_all(&bytes).unwrap();
    let mut replies = Vec::new();
    loop {
        let (header, reply) = peer.receive();
        if reply == Message::BarrierReply {
            assert_eq!(header.xid, 2000);
            break;
        }
        let Message::Error { error, data } = reply else {
            panic!("{reply:?}");
        };
        // The ERROR carries the start of the refused message itself.
        assert_eq!(
            data[..],
            messages[(header.xid - 1000) as usize]
                .encode(header.xid)
                .unwrap()[..data.len()]
        );
        replies.push((header.xid, error));
    }
    replies.sort_by_key(|&(xid, _)| xid);
    assert_eq!(
        replies,
        [
            (xids[1], OfError::BAD_ACTION_OUT_PORT),
            (xids[3], OfError::FLOW_MOD_TABLE_FULL)
        ]
    );
    // The run (A, C, D, E) reached the app as one command, before the barrier was answered.
    assert_eq!(*handler.runs.lock().unwrap(), [4]);
    let mut flows: Vec<_> = peer
        .flows()
        .into_iter()
        .map(|f| (f.matcher, f.instructions))
        .collect();
    flows.sort_by_key(|(m, _)| format!("{m:?}"));
    let actions = |out: u32| {
        vec![wirespeed_openflow::Instruction::ApplyActions(vec![
            Action::output(out),
        ])]
    };
    assert_eq!(
        flows,
        [
            (Match::new(ipv4_dst(1)), actions(3)),
            (Match::new(ipv4_dst(3)), actions(2))
        ]
    );
}

#[test]
fn statistics_and_deletes_see_every_flow_of_a_table_of_several_pages() {
    // Two pages: hosts 2048.. in slots 0.., the page boundary at host 6144 (10.0.24.0).
    let flows = FLOW_PAGE_SLOTS as usize + 500;
    let first = 2048;
    let (agent, handler, _, _) = start_sized(Timers::default(), listening(), flows + 10);
    let mut peer = Peer::hello(agent.local_addr().unwrap());
    // A loaded machine may take seconds over a page in a debug build.
    peer.stream()
        .set_read_timeout(Some(std::time::Duration::from_secs(60)))
        .unwrap();
    let mut bytes = Vec::new();
    for i in 0..flows {
        bytes.extend(add_host(first + i).encode(i as u32).unwrap());
    }
    peer.stream().write_all(&bytes).unwrap();
    assert_eq!(peer.ask(&Message::BarrierRequest), [Message::BarrierReply]);
    // Runs of at most RUN_MAX adds, however many were waiting.
    let runs = handler.runs.lock().unwrap().clone();
    assert_eq!(runs.iter().sum::<usize>(), flows);
    assert!(
        runs.iter().all(|&run| run <= super::connection::RUN_MAX),
        "{runs:?}"
    );
    // A FLOW reply in parts, every part but the last with MORE, every flow once.
    let request = |matcher: Match| FlowStatsRequest {
        table_id: 0xff,
        out_port: port::ANY,
        out_group: group::ANY,
        cookie: 0,
        cookie_mask: 0,
        matcher,
    };
    let dump = Message::MultipartRequest(MultipartRequest {
        flags: 0,
        body: RequestBody::Flow(request(Match::default())),
    });
    let parts = peer.ask(&dump);
    let mut seen = Vec::new();
    for (i, part) in parts.iter().enumerate() {
        let Message::MultipartReply(reply) = part else {
            panic!("{part:?}");
        };
        assert_eq!(reply.flags == MORE, i + 1 < parts.len());
        let ReplyBody::Flow(entries) = &reply.body else {
            panic!("{reply:?}");
        };
        seen.extend(entries.iter().map(|e| e.matcher.clone()));
    }
    seen.sort_by_key(|m| format!("{m:?}"));
    seen.dedup();
    assert_eq!(seen.len(), flows);
    // AGGREGATE counts them all; a non-strict delete takes exactly the flows it covers.
    let aggregate = |peer: &mut Peer, matcher: Match| {
        let replies = peer.ask(&Message::MultipartRequest(MultipartRequest {
            flags: 0,
            body: RequestBody::Aggregate(request(matcher)),
        }));
        let [Message::MultipartReply(reply)] = replies.as_slice() else {
            panic!("{replies:?}");
        };
        let ReplyBody::Aggregate { flow_count, .. } = reply.body else {
            panic!("{reply:?}");
        };
        flow_count as usize
    };
    assert_eq!(aggregate(&mut peer, Match::default()), flows);
    // 10.0.16.0/20 covers hosts 4096..8191: the end of the first page and the second.
    let block = vec![
        Oxm::EthType(ETH_TYPE_IPV4),
        Oxm::Ipv4Dst([10, 0, 16, 0].into(), Some([255, 255, 240, 0].into())),
    ];
    let covered = first + flows - 4096;
    assert_eq!(aggregate(&mut peer, Match::new(block.clone())), covered);
    let Message::FlowMod(mut delete) = flow_mod(FlowModCommand::Delete, 0, block.clone(), vec![])
    else {
        unreachable!()
    };
    delete.table_id = 0xff;
    assert_eq!(peer.ask(&Message::FlowMod(delete)), vec![]);
    assert_eq!(aggregate(&mut peer, Match::new(block)), 0);
    assert_eq!(aggregate(&mut peer, Match::default()), flows - covered);
}

#[test]
fn an_add_that_checks_overlap_is_refused_where_a_flow_of_its_priority_overlaps() {
    let (agent, ..) = start_sized(Timers::default(), listening(), 16);
    let mut peer = Peer::hello(agent.local_addr().unwrap());
    let add = |priority: u16, dst: [u8; 4], len: u32, check: bool| {
        let mask = u32::MAX << (32 - len);
        let fields = vec![
            Oxm::EthType(ETH_TYPE_IPV4),
            Oxm::Ipv4Dst(dst.into(), Some(mask.into())),
        ];
        let Message::FlowMod(mut m) = flow_mod(
            FlowModCommand::Add,
            priority,
            fields,
            vec![Action::output(2)],
        ) else {
            unreachable!()
        };
        if check {
            m.flags |= wirespeed_openflow::message::flow_flags::CHECK_OVERLAP;
        }
        Message::FlowMod(m)
    };
    let refused = |replies: Vec<Message>| match replies.as_slice() {
        [] => None,
        [Message::Error { error, .. }] => Some(*error),
        other => panic!("{other:?}"),
    };
    assert_eq!(refused(peer.ask(&add(10, [10, 1, 0, 0], 16, false))), None);
    // Inside it, the same priority: refused; the identical match too.
    assert_eq!(
        refused(peer.ask(&add(10, [10, 1, 2, 0], 24, true))),
        Some(OfError::FLOW_MOD_OVERLAP)
    );
    assert_eq!(
        refused(peer.ask(&add(10, [10, 1, 0, 0], 16, true))),
        Some(OfError::FLOW_MOD_OVERLAP)
    );
    // Another priority, or no packet in common: added. Without the flag, added too.
    assert_eq!(refused(peer.ask(&add(11, [10, 1, 2, 0], 24, true))), None);
    assert_eq!(refused(peer.ask(&add(10, [10, 2, 0, 0], 16, true))), None);
    assert_eq!(refused(peer.ask(&add(10, [10, 1, 3, 0], 24, false))), None);
    assert_eq!(peer.flows().len(), 4);
}
