//! Packet traces of the router and the OpenFlow app over memory ports: each scenario's trace
//! lines asserted exactly (ARP answered, a forward with its rewrite, a packet held then
//! released, TTL expiry with its ICMP error, a local ping, a flow's cache miss then hit), and
//! the proof that tracing changes nothing on the wire: the same frames through a traced and an
//! untraced app give byte-identical output.
//!
//! The rig owns its app, so each test keeps a second handle on it through [`Shared`] to read
//! the trace between exchanges.
//!
//! Topology of the router: port 0 is 10.0.0.1/24 (02::a0), port 1 is 10.1.0.1/24 (02::a1) with
//! the static neighbour 10.1.0.2 (02::c1); 192.0.2.0/24 goes via 10.1.0.2, 203.0.113.0/24 via
//! 10.1.0.9, which is not known until it answers.

use std::net::{Ipv4Addr, Ipv6Addr};
use std::sync::{Arc, Mutex, MutexGuard};

use proptest::prelude::*;
use wirespeed_dataplane::app::openflow::{Action, FlowEntry, OpenFlow, OpenFlowConfig};
use wirespeed_dataplane::app::router::{
    Gateway, Interface, Prefix, Router, RouterConfig, StaticNeighbour, StaticRoute,
};
use wirespeed_dataplane::app::{App, CommandContext, Context};
use wirespeed_dataplane::command::{AppCommand, AppReply};
use wirespeed_dataplane::table::classifier::FlowMatch;
use wirespeed_packet::wire::{EtherType, EthernetAddress, arp, ethernet};
use wirespeed_packet::{Batch, FramePool};
use wirespeed_testkit::frames::{FrameBuilder, L3, L4, arb_frame, arp_request};
use wirespeed_testkit::rig::Rig;

/// An app the rig runs while the test keeps a handle on it.
struct Shared<A>(Arc<Mutex<A>>);

impl<A> Shared<A> {
    fn app(&self) -> MutexGuard<'_, A> {
        self.0.lock().unwrap()
    }
}

impl<A: App> App for Shared<A> {
    fn name(&self) -> &'static str {
        self.app().name()
    }

    fn process(&mut self, ctx: &mut Context<'_>, batch: &mut Batch) {
        self.app().process(ctx, batch);
    }

    fn counters(&self, out: &mut Vec<(&'static str, u64)>) {
        self.app().counters(out);
    }

    fn release_all(&mut self, pool: &mut FramePool) {
        self.app().release_all(pool);
    }

    fn command(&mut self, command: AppCommand, ctx: &CommandContext<'_>) -> AppReply {
        self.app().command(command, ctx)
    }
}

/// A rig over `app` with `ports` ports, and the test's handle on the app.
fn shared_rig<A: App + 'static>(app: A, ports: usize) -> (Rig, Shared<A>) {
    let app = Arc::new(Mutex::new(app));
    let rig = Rig::new(Box::new(Shared(Arc::clone(&app))), ports, 32);
    (rig, Shared(app))
}

const fn mac(last: u8) -> EthernetAddress {
    EthernetAddress([0x02, 0, 0, 0, 0, last])
}

const ROUTER: [EthernetAddress; 2] = [mac(0xa0), mac(0xa1)];
const HOST_MAC: EthernetAddress = mac(0xb0);
const G1_MAC: EthernetAddress = mac(0xc1);
const LATE_MAC: EthernetAddress = mac(0xd9);

fn v4(s: &str) -> Ipv4Addr {
    s.parse().unwrap()
}

fn router() -> Router {
    let interface = |port: u16| Interface {
        port,
        mac: ROUTER[usize::from(port)],
        ipv4: vec![(Ipv4Addr::new(10, port as u8, 0, 1), 24)],
        ipv6: vec![(Ipv6Addr::new(0x2001, 0xdb8, port, 0, 0, 0, 0, 1), 64)],
    };
    let route = |prefix: &str, len: u8, via: &str| StaticRoute {
        prefix: Prefix::new(prefix.parse().unwrap(), len).unwrap(),
        via: vec![Gateway::new(via.parse().unwrap())],
    };
    Router::new(RouterConfig {
        interfaces: (0..2).map(interface).collect(),
        routes: vec![
            route("192.0.2.0", 24, "10.1.0.2"),
            route("203.0.113.0", 24, "10.1.0.9"),
        ],
        neighbours: vec![StaticNeighbour {
            port: 1,
            addr: "10.1.0.2".parse().unwrap(),
            mac: G1_MAC,
        }],
        ..RouterConfig::default()
    })
    .unwrap()
}

/// A 60-byte UDP frame from the host on port 0 to `dst`.
fn udp4(dst: &str, ttl: u8) -> Vec<u8> {
    FrameBuilder::ipv4_udp()
        .with_l3(L3::Ipv4 {
            src: v4("10.0.0.2"),
            dst: v4(dst),
        })
        .macs(HOST_MAC, ROUTER[0])
        .ttl(ttl)
        .payload_len(18)
        .build()
}

/// A 60-byte echo request from the host to the router's address on port 0.
fn ping() -> Vec<u8> {
    FrameBuilder::ipv4_udp()
        .with_l3(L3::Ipv4 {
            src: v4("10.0.0.2"),
            dst: v4("10.0.0.1"),
        })
        .with_l4(L4::Echo {
            ident: 7,
            seq_no: 1,
        })
        .macs(HOST_MAC, ROUTER[0])
        .payload_len(18)
        .build()
}

/// 10.1.0.9's ARP reply to the router's request, padded to 60 bytes.
fn late_reply() -> Vec<u8> {
    let mut frame = vec![0u8; 60];
    ethernet::Repr {
        src_addr: LATE_MAC,
        dst_addr: ROUTER[1],
        ethertype: EtherType::Arp,
    }
    .emit(&mut ethernet::Packet::new_unchecked(&mut frame[..]));
    arp::Repr {
        operation: arp::Operation::Reply,
        source_hardware_addr: LATE_MAC,
        source_protocol_addr: v4("10.1.0.9"),
        target_hardware_addr: ROUTER[1],
        target_protocol_addr: v4("10.1.0.1"),
    }
    .emit(&mut arp::Packet::new_unchecked(&mut frame[14..]));
    frame
}

/// The trace lines recorded since `seen` of them were read; advances `seen`.
fn new_lines(lines: Vec<String>, seen: &mut usize) -> Vec<String> {
    let fresh = lines.get(*seen..).unwrap_or_default().to_vec();
    *seen = lines.len();
    fresh
}

fn router_lines(app: &Shared<Router>, seen: &mut usize) -> Vec<String> {
    let lines = app.app().trace().iter().map(ToString::to_string).collect();
    new_lines(lines, seen)
}

#[test]
fn the_router_traces_every_stage_of_every_packet() {
    let (mut rig, app) = shared_rig(router(), 2);
    app.app().set_trace(64);
    let mut seen = 0;

    let out = rig.exchange(0, &[arp_request(HOST_MAC, v4("10.0.0.2"), v4("10.0.0.1"))]);
    assert_eq!(out[0].len(), 1, "the ARP reply");
    assert_eq!(
        router_lines(&app, &mut seen),
        [
            "port 0 len 60 arp 10.0.0.2 -> 10.0.0.1 | arp reply 10.0.0.1 is-at 02:00:00:00:00:a0 \
          | out port 0"
        ]
    );

    let out = rig.exchange(0, &[udp4("192.0.2.5", 64)]);
    assert_eq!(out[1].len(), 1, "forwarded");
    assert_eq!(
        router_lines(&app, &mut seen),
        [
            "port 0 len 60 10.0.0.2 -> 192.0.2.5 | route forward 10.1.0.2 port 1 \
          | neighbour rewrite 02:00:00:00:00:c1 | out port 1"
        ]
    );

    // Two packets wait for 10.1.0.9; only the first asks for it.
    let out = rig.exchange(0, &[udp4("203.0.113.5", 64), udp4("203.0.113.6", 64)]);
    assert_eq!(out[1].len(), 1, "one ARP request, both packets held");
    assert_eq!(
        router_lines(&app, &mut seen),
        [
            "port 0 len 60 10.0.0.2 -> 203.0.113.5 | route forward 10.1.0.9 port 1 \
             | neighbour held for 10.1.0.9 (1 waiting), request sent | held",
            "port 0 len 60 10.0.0.2 -> 203.0.113.6 | route forward 10.1.0.9 port 1 \
             | neighbour held for 10.1.0.9 (2 waiting) | held",
        ]
    );
    let out = rig.exchange(1, &[late_reply()]);
    assert_eq!(out[1].len(), 2, "both released");
    assert_eq!(
        router_lines(&app, &mut seen),
        [
            "port 1 len 60 arp 10.1.0.9 -> 10.1.0.1 | arp learned 10.1.0.9 at 02:00:00:00:00:d9, \
          released 2 | dropped (consumed)"
        ]
    );

    let out = rig.exchange(0, &[udp4("192.0.2.5", 1)]);
    assert_eq!(out[0].len(), 1, "the ICMP error");
    assert_eq!(
        router_lines(&app, &mut seen),
        [
            "port 0 len 60 10.0.0.2 -> 192.0.2.5 | route icmp time-exceeded \
          | icmp time-exceeded to 10.0.0.2 | dropped (ttl_expired)"
        ]
    );

    let out = rig.exchange(0, &[ping(), udp4("198.51.100.1", 64)]);
    assert_eq!(out[0].len(), 2, "the echo reply and the unreachable error");
    assert_eq!(
        router_lines(&app, &mut seen),
        [
            "port 0 len 60 10.0.0.2 -> 10.0.0.1 | route local | local echo reply | out port 0",
            "port 0 len 60 10.0.0.2 -> 198.51.100.1 | route icmp unreachable \
             | icmp unreachable to 10.0.0.2 | dropped (no_route)",
        ]
    );

    // Hostile input is traced too: what could be read, and why it was dropped.
    let mut tagged = udp4("192.0.2.5", 64);
    tagged.splice(12..12, [0x81, 0x00, 0x00, 0x05]);
    rig.exchange(0, &[vec![0xff; 13], tagged]);
    assert_eq!(
        router_lines(&app, &mut seen),
        [
            "port 0 len 13 ethertype 0x0000 | dropped (truncated)",
            "port 0 len 64 10.0.0.2 -> 192.0.2.5 | dropped (vlan_filtered)",
        ]
    );
    drop(app);
    assert!(rig.finish().holds());
}

#[test]
fn the_trace_ring_keeps_only_the_last_records() {
    let (mut rig, app) = shared_rig(router(), 2);
    app.app().set_trace(2);
    rig.exchange(0, &[udp4("192.0.2.1", 64), udp4("192.0.2.2", 64)]);
    rig.exchange(0, &[udp4("192.0.2.3", 64)]);
    let lines: Vec<String> = app.app().trace().iter().map(ToString::to_string).collect();
    assert_eq!(lines.len(), 2);
    assert!(lines[0].contains("-> 192.0.2.2 "), "{lines:?}");
    assert!(lines[1].contains("-> 192.0.2.3 "), "{lines:?}");
    // Switched off, nothing more is kept.
    app.app().set_trace(0);
    rig.exchange(0, &[udp4("192.0.2.4", 64)]);
    assert!(app.app().trace().is_empty());
    drop(app);
    assert!(rig.finish().holds());
}

fn openflow() -> OpenFlow {
    let mut app = OpenFlow::new(OpenFlowConfig {
        ports: 2,
        cache_insert_one_in: 1,
        tsc_hz: Some(1_000_000_000),
        ..OpenFlowConfig::default()
    });
    app.add_flow(
        0,
        FlowEntry::new(10, FlowMatch::any().in_port(0), vec![Action::Output(1)]),
    )
    .unwrap();
    app
}

fn openflow_lines(app: &Shared<OpenFlow>, seen: &mut usize) -> Vec<String> {
    let lines = app
        .app()
        .packet_trace()
        .iter()
        .map(ToString::to_string)
        .collect();
    new_lines(lines, seen)
}

#[test]
fn openflow_traces_a_cache_miss_then_hits() {
    let (mut rig, app) = shared_rig(openflow(), 2);
    app.app().set_trace(16);
    let mut seen = 0;
    let frame = FrameBuilder::ipv4_udp().frame_len(60).build();
    const FLOW: &str = "port 0 len 60 10.0.0.1 -> 10.0.0.2";

    // The second packet of the batch missed too, then found the first one's megaflow.
    let out = rig.exchange(0, &[frame.clone(), frame.clone()]);
    assert_eq!(out[1].len(), 2);
    assert_eq!(
        openflow_lines(&app, &mut seen),
        [
            format!(
                "{FLOW} | cache miss -> classifier miss | slow path, megaflow installed \
                 | out port 1"
            ),
            format!(
                "{FLOW} | cache miss -> classifier miss \
                 | megaflow of an earlier packet of the batch | out port 1"
            ),
        ]
    );
    // That re-lookup put the flow into the cache.
    let out = rig.exchange(0, std::slice::from_ref(&frame));
    assert_eq!(out[1].len(), 1);
    assert_eq!(
        openflow_lines(&app, &mut seen),
        [format!("{FLOW} | cache hit | out port 1")]
    );

    // Port 1 has no flow: a table miss.
    let out = rig.exchange(1, std::slice::from_ref(&frame));
    assert!(out.iter().all(Vec::is_empty));
    assert_eq!(
        openflow_lines(&app, &mut seen),
        [
            "port 1 len 60 10.0.0.1 -> 10.0.0.2 | cache miss -> classifier miss \
          | slow path, megaflow installed | table miss | dropped (table_miss)"
        ]
    );
    // Its megaflow answers the next one, and the answer is cached.
    rig.exchange(1, std::slice::from_ref(&frame));
    assert_eq!(
        openflow_lines(&app, &mut seen),
        [
            "port 1 len 60 10.0.0.1 -> 10.0.0.2 | cache miss -> classifier hit, cached \
          | table miss | dropped (table_miss)"
        ]
    );
    drop(app);
    assert!(rig.finish().holds());
}

/// The router scenarios above as (port, frames) exchanges.
fn router_exchanges() -> Vec<(usize, Vec<Vec<u8>>)> {
    vec![
        (
            0,
            vec![arp_request(HOST_MAC, v4("10.0.0.2"), v4("10.0.0.1"))],
        ),
        (0, vec![udp4("192.0.2.5", 64), udp4("192.0.2.6", 2)]),
        (0, vec![udp4("203.0.113.5", 64), udp4("203.0.113.6", 64)]),
        (1, vec![late_reply()]),
        (
            0,
            vec![udp4("192.0.2.5", 1), ping(), udp4("198.51.100.1", 64)],
        ),
        (0, vec![vec![0xff; 13], udp4("10.0.0.1", 64)]),
    ]
}

/// What every port put out after each exchange, with tracing of `records` packets.
fn outputs<A: App + 'static>(
    app: A,
    ports: usize,
    exchanges: &[(usize, Vec<Vec<u8>>)],
) -> Vec<Vec<Vec<Vec<u8>>>> {
    let mut rig = Rig::new(Box::new(app), ports, 32);
    let out = exchanges
        .iter()
        .map(|(port, frames)| rig.exchange(*port, frames))
        .collect();
    assert!(rig.finish().holds());
    out
}

#[test]
fn tracing_the_router_changes_no_byte_on_the_wire() {
    let exchanges = router_exchanges();
    let plain = outputs(router(), 2, &exchanges);
    let mut traced = router();
    traced.set_trace(8);
    assert_eq!(outputs(traced, 2, &exchanges), plain);
    assert!(plain.iter().flatten().any(|port| !port.is_empty()));
}

#[test]
fn tracing_openflow_changes_no_byte_on_the_wire() {
    let frame = FrameBuilder::ipv4_udp().frame_len(60).build();
    let exchanges = vec![
        (0, vec![frame.clone(), frame.clone()]),
        (0, vec![frame.clone()]),
        (1, vec![frame.clone(), vec![0; 9]]),
    ];
    let plain = outputs(openflow(), 2, &exchanges);
    let mut traced = openflow();
    traced.set_trace(8);
    assert_eq!(outputs(traced, 2, &exchanges), plain);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// Whatever arrives, traced and untraced routers and OpenFlow apps send the same bytes.
    #[test]
    fn tracing_never_changes_output(
        frames in proptest::collection::vec((0usize..2, arb_frame()), 1..24),
    ) {
        let exchanges: Vec<(usize, Vec<Vec<u8>>)> =
            frames.into_iter().map(|(port, frame)| (port, vec![frame])).collect();
        let mut traced = router();
        traced.set_trace(4);
        prop_assert_eq!(outputs(traced, 2, &exchanges), outputs(router(), 2, &exchanges));
        let mut traced = openflow();
        traced.set_trace(4);
        prop_assert_eq!(outputs(traced, 2, &exchanges), outputs(openflow(), 2, &exchanges));
    }
}
