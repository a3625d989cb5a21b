//! Run-time commands reach a worker between batches while packets flow: a FIB built off the
//! worker replaces the one in use, the next batches follow it, no packet is lost, and the
//! replaced FIB comes back to the sender to be freed there.

use std::net::Ipv4Addr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use wirespeed_dataplane::app::{App, CommandContext, Context};
use wirespeed_dataplane::command::{AppCommand, AppReply, Command, ReplyBody, Retired, Routes};
use wirespeed_dataplane::stage::Parse;
use wirespeed_dataplane::table::fib::{Fib4, Fib6, FibKind, Ipv4Prefix, NextHop};
use wirespeed_packet::{Batch, DropReason};
use wirespeed_testkit::frames::{FrameBuilder, L3};
use wirespeed_testkit::rig::Rig;

/// Sends each IPv4 packet out of the port whose index is the next-hop id of its destination.
struct Steer {
    parse: Parse,
    routes: Routes,
}

impl App for Steer {
    fn name(&self) -> &'static str {
        "steer"
    }

    fn process(&mut self, ctx: &mut Context<'_>, batch: &mut Batch) {
        self.parse.process(ctx.pool, batch, ctx.keys);
        let (_, metas) = batch.split_mut();
        for (meta, key) in metas.iter_mut().zip(ctx.keys.iter()) {
            let hop = key
                .ipv4_dst()
                .and_then(|dst| self.routes.v4.lookup(dst.to_bits()));
            match hop {
                Some(hop) if meta.drop.is_none() => meta.out_port = hop.id() as u16,
                _ => meta.drop = Some(DropReason::NoOutput),
            }
        }
    }

    fn counters(&self, _out: &mut Vec<(&'static str, u64)>) {}

    fn command(&mut self, command: AppCommand, ctx: &CommandContext<'_>) -> AppReply {
        match command {
            AppCommand::ReplaceFib(routes) => {
                AppReply::Retired(Retired::Fib(std::mem::replace(&mut self.routes, routes)))
            }
            AppCommand::NeighbourAdd(neighbour) => match ctx.port_index(&neighbour.port) {
                Some(_) => AppReply::Done,
                None => AppReply::Refused(format!("no port named {}", neighbour.port)),
            },
            _ => AppReply::Unsupported,
        }
    }
}

/// Every address of 10.0.0.0/8 goes out of port `port`.
fn routes_to(port: u32) -> Routes {
    let prefix = Ipv4Prefix::new(Ipv4Addr::new(10, 0, 0, 0).to_bits(), 8).unwrap();
    let fib = Fib4::from_routes(FibKind::Dir24, [(prefix, NextHop::hop(port).unwrap())]).unwrap();
    Routes {
        v4: Arc::new(fib),
        v6: Arc::new(Fib6::new(FibKind::Dir24)),
        gateways: Arc::from(vec![Ipv4Addr::new(198, 18, 0, 1).into(); 3]),
    }
}

fn frames(count: u32, first: u32) -> Vec<Vec<u8>> {
    (first..first + count)
        .map(|i| {
            FrameBuilder::ipv4_udp()
                .with_l3(L3::Ipv4 {
                    src: Ipv4Addr::new(192, 0, 2, 1),
                    dst: Ipv4Addr::from_bits(0x0a00_0000 | i),
                })
                .build()
        })
        .collect()
}

#[test]
fn a_fib_is_replaced_between_batches_while_packets_flow() {
    let first = routes_to(1);
    let original = Arc::clone(&first.v4);
    let app = Steer {
        parse: Parse::new(),
        routes: first,
    };
    let mut rig = Rig::new(Box::new(app), 3, 32);
    let mut control = rig.commands();

    let mut sent = 0u32;
    let mut on_port = [0usize; 3];
    let mut pending = None;
    let mut replaced_after = None;
    let mut retired = None;
    // Traffic in rounds of 40 frames; the command is sent in round 10 and answered by the
    // worker between two batches of some later round.
    for round in 0..40 {
        if round == 10 {
            let command = Command::App(AppCommand::ReplaceFib(routes_to(2)));
            pending = Some(control.send(command).unwrap());
        }
        rig.send(0, &frames(40, sent));
        sent += 40;
        for _ in 0..20 {
            rig.worker.poll_once();
        }
        for (port, count) in on_port.iter_mut().enumerate() {
            *count += rig.receive(port).len();
        }
        if let Some(id) = pending
            && let Ok(body) = control.wait(id, Instant::now())
        {
            pending = None;
            replaced_after = Some(sent);
            retired = Some(body);
        }
    }
    rig.settle();
    for (port, count) in on_port.iter_mut().enumerate() {
        *count += rig.receive(port).len();
    }

    // Every packet left, before the swap by port 1, after it by port 2.
    let replaced_after = replaced_after.expect("the worker answered the command");
    assert_eq!(on_port[0], 0);
    assert_eq!(on_port[1] + on_port[2], sent as usize);
    assert!(on_port[1] >= 400, "frames before the command: {on_port:?}");
    assert!(
        on_port[2] >= (sent - replaced_after) as usize && on_port[2] > 0,
        "{on_port:?}"
    );
    assert_eq!(rig.worker.counters().dropped(), 0);
    assert!(rig.worker.counters().commands >= 1);

    // The replaced FIB came back: the worker holds no reference to it any more.
    match retired {
        Some(ReplyBody::App {
            app: "steer",
            reply: AppReply::Retired(Retired::Fib(old)),
        }) => {
            assert!(Arc::ptr_eq(&old.v4, &original));
            drop(old);
            assert_eq!(Arc::strong_count(&original), 1);
        }
        other => panic!("unexpected reply {other:?}"),
    }
    assert!(rig.finish().holds());
}

#[test]
fn generic_commands_are_answered_by_the_worker() {
    let app = Steer {
        parse: Parse::new(),
        routes: routes_to(1),
    };
    let mut rig = Rig::new(Box::new(app), 2, 32);
    let mut control = rig.commands();
    rig.send(0, &frames(10, 0));
    let ping = control.send(Command::Ping).unwrap();
    let snapshot = control.send(Command::Snapshot).unwrap();
    let unsupported = control.send(Command::App(AppCommand::MacFlush)).unwrap();
    let refused = control
        .send(Command::App(AppCommand::NeighbourAdd(
            wirespeed_dataplane::command::Neighbour {
                addr: Ipv4Addr::new(198, 18, 0, 1).into(),
                mac: [2, 0, 0, 0, 0, 1],
                port: "p9".into(),
            },
        )))
        .unwrap();
    // Commands are served every 64 iterations.
    for _ in 0..64 {
        rig.worker.poll_once();
    }
    let deadline = Instant::now() + Duration::from_millis(10);
    assert!(matches!(
        control.wait(ping, deadline),
        Ok(ReplyBody::Pong { iterations: 64 })
    ));
    match control.wait(snapshot, deadline) {
        Ok(ReplyBody::Snapshot(snapshot)) => {
            assert_eq!(snapshot.counters.rx_packets, 10);
            assert_eq!(snapshot.ports.len(), 2);
            assert_eq!(snapshot.ports[1].1.tx_packets, 10);
        }
        other => panic!("unexpected reply {other:?}"),
    }
    assert!(matches!(
        control.wait(unsupported, deadline),
        Ok(ReplyBody::App {
            reply: AppReply::Unsupported,
            ..
        })
    ));
    match control.wait(refused, deadline) {
        Ok(ReplyBody::App {
            reply: AppReply::Refused(why),
            ..
        }) => assert!(why.contains("p9"), "{why}"),
        other => panic!("unexpected reply {other:?}"),
    }
    assert_eq!(rig.worker.counters().commands, 4);
    rig.receive(1);
    assert!(rig.finish().holds());
}
