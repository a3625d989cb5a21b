//! SET_ASYNC and GET_ASYNC (§7.3.10): each connection's masks, by role, decide which
//! PACKET_IN and FLOW_REMOVED reasons it is sent; the defaults are the specification's.

use wirespeed_dataplane::app::openflow::packet_in::{self, Origin, Reason};
use wirespeed_openflow::message::{AsyncConfig, flow_flags, role};
use wirespeed_openflow::{Action, Message};

use super::connection::Timers;
use super::tests::{Peer, flow_mod, ipv4_dst, removed_flow, role, start_listening};
use wirespeed_openflow::message::FlowModCommand;

/// The reason of the PACKET_IN `peer` receives next.
fn packet_in_reason(peer: &mut Peer) -> u8 {
    match peer.receive().1 {
        Message::PacketIn(packet_in) => packet_in.reason,
        other => panic!("{other:?}"),
    }
}

/// Nothing waits for `peer` before the reply to an echo.
fn nothing_for(peer: &mut Peer) {
    assert_eq!(
        peer.ask(&Message::EchoRequest(vec![9])),
        vec![Message::EchoReply(vec![9])]
    );
}

#[test]
fn masks_start_as_the_spec_says_and_are_set_and_read_back() {
    let (agent, ..) = start_listening(Timers::default());
    let mut peer = Peer::hello(agent.local_addr().unwrap());
    let defaults = AsyncConfig {
        packet_in: [0b011, 0],
        port_status: [0b111, 0b111],
        flow_removed: [0b1111, 0],
    };
    assert_eq!(
        peer.ask(&Message::GetAsyncRequest),
        vec![Message::GetAsyncReply(defaults)]
    );
    let mine = AsyncConfig {
        packet_in: [0b010, 0b001],
        port_status: [0b100, 0],
        flow_removed: [0, 0b0100],
    };
    // SET_ASYNC has no reply; a slave may send it too (it changes no switch state).
    role(&mut peer, role::SLAVE);
    assert_eq!(peer.ask(&Message::SetAsync(mine)), vec![]);
    assert_eq!(
        peer.ask(&Message::GetAsyncRequest),
        vec![Message::GetAsyncReply(mine)]
    );
}

#[test]
fn packet_ins_go_by_each_connections_mask_for_its_role() {
    let (agent, _, mut worker, _) = start_listening(Timers::default());
    let addr = agent.local_addr().unwrap();
    let (mut witness, mut actions_only, mut slave) =
        (Peer::hello(addr), Peer::hello(addr), Peer::hello(addr));
    // Equal, but only the ACTION reason; a slave that asks for table misses.
    let only = |packet_in| AsyncConfig {
        packet_in,
        ..AsyncConfig::default()
    };
    assert_eq!(
        actions_only.ask(&Message::SetAsync(only([0b010, 0]))),
        vec![]
    );
    assert_eq!(slave.ask(&Message::SetAsync(only([0, 0b001]))), vec![]);
    role(&mut slave, role::SLAVE);
    let frame: Vec<u8> = (0..64).collect();
    let action = Origin {
        reason: Reason::Action,
        table: 0,
        cookie: 1,
        ..Origin::default()
    };
    assert!(packet_in::send(
        &mut worker,
        Origin::default(),
        0,
        &frame,
        u16::MAX
    ));
    assert!(packet_in::send(&mut worker, action, 0, &frame, u16::MAX));
    // The defaults give the witness both, in order; both were sent in the turn that took
    // them from the ring, so whatever the others got is before their echo's reply.
    assert_eq!(packet_in_reason(&mut witness), 0);
    assert_eq!(packet_in_reason(&mut witness), 1);
    assert_eq!(packet_in_reason(&mut actions_only), 1);
    nothing_for(&mut actions_only);
    assert_eq!(packet_in_reason(&mut slave), 0);
    nothing_for(&mut slave);
}

#[test]
fn flow_removed_goes_by_reason_and_role() {
    let (agent, ..) = start_listening(Timers::default());
    let addr = agent.local_addr().unwrap();
    let (mut deleter, mut no_deletes, mut slave) =
        (Peer::hello(addr), Peer::hello(addr), Peer::hello(addr));
    // Every reason but DELETE (bit 2); a slave that asks for DELETE.
    let removed = |flow_removed| AsyncConfig {
        flow_removed,
        ..AsyncConfig::default()
    };
    assert_eq!(
        no_deletes.ask(&Message::SetAsync(removed([0b1011, 0]))),
        vec![]
    );
    assert_eq!(slave.ask(&Message::SetAsync(removed([0, 0b0100]))), vec![]);
    role(&mut slave, role::SLAVE);
    let Message::FlowMod(mut add) =
        flow_mod(FlowModCommand::Add, 5, ipv4_dst(1), vec![Action::output(2)])
    else {
        unreachable!()
    };
    add.flags = flow_flags::SEND_FLOW_REM;
    assert_eq!(deleter.ask(&Message::FlowMod(add)), vec![]);
    let delete = flow_mod(FlowModCommand::Delete, 0, vec![], vec![]);
    let expected = removed_flow(0, 2, 0);
    assert_eq!(deleter.ask(&delete), std::slice::from_ref(&expected));
    // The others' copies leave after the deleter's turn: the slave's is the proof that the
    // turn is over.
    assert_eq!(slave.receive().1, expected);
    nothing_for(&mut no_deletes);
}
