//! The OpenFlow app and its controller: frames a CONTROLLER action sends reach the agent's
//! ring byte for byte (with reason, table, cookie, in_port, cut to max_len), a full ring drops
//! and counts per reason, and frames the control plane injects (PACKET_OUT) leave by ports or
//! go through the pipeline. Every scenario ends with the pool whole.

use std::time::Instant;

use wirespeed_dataplane::app::openflow::packet_in::{self, Reason};
use wirespeed_dataplane::app::openflow::{Action, FlowEntry, OpenFlow};
use wirespeed_dataplane::command::{COMMAND_EVERY, Command, Injection, Output, ReplyBody};
use wirespeed_dataplane::table::classifier::FlowMatch;
use wirespeed_packet::DropReason;
use wirespeed_testkit::rig::Rig;

mod openflow_common;
use openflow_common::*;

/// The classic table-miss flow entry: priority 0, match everything, to the controller.
fn table_miss() -> FlowEntry {
    FlowEntry::new(0, FlowMatch::any(), vec![Action::Controller(u16::MAX)])
}

#[test]
fn table_miss_and_controller_action_reach_the_ring_with_their_origin() {
    let mut app = OpenFlow::new(config(3));
    app.add_flow(0, table_miss()).unwrap();
    let mut entry = FlowEntry::new(
        10,
        FlowMatch::any().in_port(1),
        vec![Action::Output(2), Action::Controller(20)],
    );
    entry.cookie = 0xc0ffee;
    app.add_flow(0, entry).unwrap();
    let (producer, mut consumer) = packet_in::ring();
    app.set_packet_in(producer);
    let mut rig = rig(app, 3);
    let frame = base().frame_len(100).build();
    // A miss: to the controller whole, nowhere else, counted as consumed.
    let out = rig.exchange(0, std::slice::from_ref(&frame));
    assert!(out.iter().all(Vec::is_empty));
    assert_eq!(drops(&rig, DropReason::Consumed), 1);
    let record = consumer.pop().unwrap();
    assert_eq!(record.origin.reason, Reason::NoMatch);
    assert_eq!((record.origin.table, record.origin.cookie), (0, 0));
    assert_eq!(record.in_port, 0);
    assert_eq!(record.total_len, 100);
    assert_eq!(record.frame(), frame.as_slice());
    // A flow's CONTROLLER action after an output: forwarded, and 20 bytes to the controller.
    let out = rig.exchange(1, std::slice::from_ref(&frame));
    assert_eq!(out[2], vec![frame.clone()]);
    let record = consumer.pop().unwrap();
    assert_eq!(record.origin.reason, Reason::Action);
    assert_eq!(record.origin.cookie, 0xc0ffee);
    assert_eq!((record.in_port, record.total_len), (1, 100));
    assert_eq!(record.frame(), &frame[..20]);
    assert_eq!(counter(&rig, "openflow.packet_in"), 2);
    assert!(consumer.pop().is_none());
    assert!(rig.finish().holds());
}

#[test]
fn a_full_ring_drops_and_counts_per_reason_and_no_ring_drops_all() {
    let mut app = OpenFlow::new(config(2));
    app.add_flow(0, table_miss()).unwrap();
    let (producer, mut consumer) = packet_in::ring();
    app.set_packet_in(producer);
    let mut full = rig(app, 2);
    let frame = base().build();
    // Each record is its header and its frame.
    let fits = packet_in::RING_BYTES / (packet_in::RECORD_HEADER + frame.len());
    let frames = vec![frame; fits + 10];
    for chunk in frames.chunks(32) {
        full.exchange(0, chunk);
    }
    assert_eq!(counter(&full, "openflow.packet_in"), fits as u64);
    assert_eq!(counter(&full, "openflow.packet_in_dropped_no_match"), 10);
    assert_eq!(counter(&full, "openflow.packet_in_dropped_action"), 0);
    assert_eq!(std::iter::from_fn(|| consumer.pop()).count(), fits);
    assert!(full.finish().holds());

    // Without an agent's ring every frame for the controller is lost, and counted.
    let mut app = OpenFlow::new(config(2));
    app.add_flow(
        0,
        FlowEntry::new(5, FlowMatch::any(), vec![Action::Controller(64)]),
    )
    .unwrap();
    let mut alone = rig(app, 2);
    alone.exchange(0, &[base().build()]);
    assert_eq!(counter(&alone, "openflow.packet_in_dropped_action"), 1);
    assert!(alone.finish().holds());
}

fn inject(rig: &mut Rig, injection: Injection) -> usize {
    let mut control = rig.commands();
    let id = control.send(Command::Inject(injection.clone())).unwrap();
    // Commands are served every COMMAND_EVERY iterations.
    for _ in 0..COMMAND_EVERY {
        rig.worker.poll_once();
    }
    match control.wait(id, Instant::now()).unwrap() {
        ReplyBody::Injected {
            injection: back,
            sent,
        } => {
            assert_eq!(back, injection);
            sent
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn injected_frames_leave_by_port_flood_all_in_port_and_through_the_pipeline() {
    let mut app = OpenFlow::new(config(3));
    app.add_flow(
        0,
        FlowEntry::new(10, FlowMatch::any().in_port(2), vec![Action::Output(0)]),
    )
    .unwrap();
    let mut rig = rig(app, 3);
    let frame = base().frame_len(90).build();
    let injection = |in_port, outputs| Injection {
        in_port,
        frame: frame.clone(),
        outputs,
    };
    let outputs = |rig: &mut Rig| -> Vec<usize> { (0..3).map(|p| rig.receive(p).len()).collect() };
    assert_eq!(inject(&mut rig, injection(None, vec![Output::Port(1)])), 1);
    let out: Vec<Vec<Vec<u8>>> = (0..3).map(|p| rig.receive(p)).collect();
    assert_eq!(out[1], vec![frame.clone()]);
    assert!(out[0].is_empty() && out[2].is_empty());
    assert_eq!(inject(&mut rig, injection(Some(0), vec![Output::Flood])), 2);
    assert_eq!(outputs(&mut rig), [0, 1, 1]);
    assert_eq!(inject(&mut rig, injection(Some(0), vec![Output::All])), 3);
    assert_eq!(outputs(&mut rig), [1, 1, 1]);
    assert_eq!(
        inject(&mut rig, injection(Some(2), vec![Output::InPort])),
        1
    );
    assert_eq!(outputs(&mut rig), [0, 0, 1]);
    // Through the tables as if received on port 2: its flow sends it out of port 0.
    assert_eq!(
        inject(&mut rig, injection(Some(2), vec![Output::Pipeline])),
        1
    );
    assert_eq!(rig.receive(0), vec![frame.clone()]);
    // A port the switch does not have goes nowhere.
    assert_eq!(inject(&mut rig, injection(None, vec![Output::Port(7)])), 0);
    assert_eq!(outputs(&mut rig), [0, 0, 0]);
    assert!(rig.finish().holds());
}

#[test]
fn a_packet_in_carries_the_metadata_earlier_tables_wrote() {
    let mut app = OpenFlow::new(wirespeed_dataplane::app::openflow::OpenFlowConfig {
        tables: 2,
        ..config(2)
    });
    let mut first = FlowEntry::new(10, FlowMatch::any(), vec![]).goto(1);
    first.write_metadata = Some((0x42, 0xff));
    app.add_flow(0, first).unwrap();
    app.add_flow(
        1,
        FlowEntry::new(5, FlowMatch::any(), vec![Action::Controller(u16::MAX)]),
    )
    .unwrap();
    let (producer, mut consumer) = packet_in::ring();
    app.set_packet_in(producer);
    let mut rig = rig(app, 2);
    let frame = base().build();
    // The slow path's walk, then the flow cache's answer: the same origin.
    for _ in 0..2 {
        rig.exchange(0, std::slice::from_ref(&frame));
        let record = consumer.pop().unwrap();
        assert_eq!((record.origin.table, record.origin.metadata), (1, 0x42));
        assert_eq!(record.frame(), frame.as_slice());
    }
    assert!(rig.finish().holds());
}
