//! What the OpenFlow app's test files share: addresses, the app's test configuration, a rig
//! around it and its counters.
#![allow(dead_code)] // each test file uses its own part of this module

use std::net::Ipv4Addr;
use std::time::Instant;

use wirespeed_dataplane::app::openflow::{OpenFlow, OpenFlowConfig};
use wirespeed_dataplane::command::{
    AppCommand, AppReply, COMMAND_EVERY, Command, ControlEnd, ReplyBody, Table,
};
use wirespeed_packet::DropReason;
use wirespeed_packet::wire::EthernetAddress;
use wirespeed_testkit::frames::FrameBuilder;
use wirespeed_testkit::rig::Rig;

pub const A: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
pub const B: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
pub const NEW_MAC: EthernetAddress = EthernetAddress([0x02, 0xaa, 0xbb, 0xcc, 0xdd, 0xee]);

pub fn config(ports: u16) -> OpenFlowConfig {
    OpenFlowConfig {
        ports,
        cache_insert_one_in: 1,
        tsc_hz: Some(1000),
        ..OpenFlowConfig::default()
    }
}

pub fn rig(app: OpenFlow, ports: usize) -> Rig {
    Rig::new(Box::new(app), ports, 32)
}

pub fn counter(rig: &Rig, name: &str) -> u64 {
    rig.app_counters()
        .into_iter()
        .find(|(n, _)| *n == name)
        .map_or(0, |(_, v)| v)
}

pub fn base() -> FrameBuilder {
    FrameBuilder::ipv4_udp().frame_len(60)
}

pub fn drops(rig: &Rig, reason: DropReason) -> u64 {
    rig.worker.counters().drops[reason as usize]
}

/// Sends `command` to the rig's worker and runs it until the answer comes back.
pub fn call(rig: &mut Rig, control: &mut ControlEnd, command: AppCommand) -> AppReply {
    let id = control.send(Command::App(command)).unwrap();
    for _ in 0..4 * COMMAND_EVERY {
        rig.worker.poll_once();
        if let Ok(body) = control.wait(id, Instant::now()) {
            match body {
                ReplyBody::App { reply, .. } => return reply,
                other => panic!("unexpected reply {other:?}"),
            }
        }
    }
    panic!("the worker did not answer");
}

pub fn refused(reply: AppReply) -> String {
    match reply {
        AppReply::Refused(why) => why,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

pub fn table(reply: AppReply) -> Table {
    match reply {
        AppReply::Table(table) => table,
        other => panic!("expected a table, got {other:?}"),
    }
}
