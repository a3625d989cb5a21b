//! Run-time commands change what each app does with the packets of the next batch: routes,
//! neighbours and FIB loads on the router, MAC flush on the bridge, flows on the OpenFlow app,
//! ACL loads in front of the bridge and the router. Every command goes through the worker's
//! command channel, as `wirespeed ctl` sends it; every effect is checked byte for byte on the
//! frames that come out, and the pool is conserved after each scenario.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;

use wirespeed_dataplane::app::bridge::{Bridge, BridgeConfig, BridgePort};
use wirespeed_dataplane::app::openflow::{OpenFlow, OpenFlowConfig};
use wirespeed_dataplane::app::router::{
    Gateway, Interface, Prefix, Router, RouterConfig, StaticNeighbour, StaticRoute,
};
use wirespeed_dataplane::app::{App, TableFill};
use wirespeed_dataplane::command::{
    AclAction, AclRule, AppCommand, AppReply, ControlEnd, FlowEdit, FlowRule, Neighbour, Retired,
    Routes, Table, TransactionStep, UNDO_MORE,
};
use wirespeed_dataplane::stage::acl::AclConfig;
use wirespeed_dataplane::stage::vlan::VlanMode;
use wirespeed_dataplane::table::fib::{Fib4, Fib6, FibKind, Ipv4Prefix, Ipv6Prefix, NextHop};
use wirespeed_packet::DropReason;
use wirespeed_packet::wire::{EthernetAddress, ipv4};
use wirespeed_testkit::frames::{FrameBuilder, L3, L4, arp_request};
use wirespeed_testkit::rig::Rig;

mod openflow_common;
use openflow_common::{call, refused, table};

const fn mac(last: u8) -> EthernetAddress {
    EthernetAddress([0x02, 0, 0, 0, 0, last])
}

const ROUTER: [EthernetAddress; 3] = [mac(0xa0), mac(0xa1), mac(0xa2)];
const HOST: EthernetAddress = mac(0xb0);
const G1: EthernetAddress = mac(0xc1);
const G2: EthernetAddress = mac(0xc2);

fn done(reply: AppReply) {
    assert!(
        matches!(reply, AppReply::Done | AppReply::Retired(_)),
        "{reply:?}"
    );
}

fn has_row(table: &Table, cells: &[&str]) -> bool {
    table
        .rows
        .iter()
        .any(|row| cells.iter().all(|cell| row.iter().any(|c| c == cell)))
}

fn drops(rig: &Rig, reason: DropReason) -> u64 {
    rig.worker.counters().drops[reason as usize]
}

fn finish(rig: Rig) {
    let conservation = rig.finish();
    assert!(conservation.holds(), "{conservation:?}");
}

fn v4(text: &str) -> Ipv4Addr {
    text.parse().unwrap()
}

fn router_config() -> RouterConfig {
    let interface = |port: u16| Interface {
        port,
        mac: ROUTER[port as usize],
        ipv4: vec![(Ipv4Addr::new(10, port as u8, 0, 1), 24)],
        ipv6: vec![(Ipv6Addr::new(0x2001, 0xdb8, port, 0, 0, 0, 0, 1), 64)],
    };
    let neighbour = |port: u16, addr: &str, mac: EthernetAddress| StaticNeighbour {
        port,
        addr: addr.parse().unwrap(),
        mac,
    };
    RouterConfig {
        interfaces: (0..3).map(interface).collect(),
        neighbours: vec![
            neighbour(1, "10.1.0.2", G1),
            neighbour(2, "10.2.0.2", G2),
            neighbour(2, "2001:db8:2::2", G2),
        ],
        ..RouterConfig::default()
    }
}

fn router_rig(config: RouterConfig) -> (Rig, ControlEnd) {
    let mut rig = Rig::new(Box::new(Router::new(config).unwrap()), 3, 32);
    let control = rig.commands();
    (rig, control)
}

/// A UDP frame from the host on port 0 to `dst`, destination port `dst_port`.
fn udp4(dst: &str, dst_port: u16) -> Vec<u8> {
    FrameBuilder::ipv4_udp()
        .with_l3(L3::Ipv4 {
            src: v4("10.0.0.2"),
            dst: v4(dst),
        })
        .with_l4(L4::Udp {
            src_port: 4000,
            dst_port,
        })
        .macs(HOST, ROUTER[0])
        .ttl(64)
        .payload_len(18)
        .build()
}

fn udp6(dst: &str) -> Vec<u8> {
    FrameBuilder::ipv6_udp()
        .with_l3(L3::Ipv6 {
            src: "2001:db8::2".parse().unwrap(),
            dst: dst.parse().unwrap(),
        })
        .macs(HOST, ROUTER[0])
        .ttl(64)
        .payload_len(10)
        .build()
}

/// `frame` as the router sends it to `next` from `out`: MACs rewritten, TTL minus one,
/// header checksum recomputed from scratch.
fn forwarded4(frame: &[u8], out: EthernetAddress, next: EthernetAddress) -> Vec<u8> {
    let mut expected = frame.to_vec();
    expected[..6].copy_from_slice(&next.0);
    expected[6..12].copy_from_slice(&out.0);
    let mut ip = ipv4::Packet::new_checked(&mut expected[14..]).unwrap();
    let ttl = ip.ttl();
    ip.set_ttl(ttl - 1);
    ip.fill_checksum();
    expected
}

fn forwarded6(frame: &[u8], out: EthernetAddress, next: EthernetAddress) -> Vec<u8> {
    let mut expected = frame.to_vec();
    expected[..6].copy_from_slice(&next.0);
    expected[6..12].copy_from_slice(&out.0);
    expected[14 + 7] -= 1;
    expected
}

fn prefix4(addr: &str, len: u8) -> Ipv4Prefix {
    Ipv4Prefix::new(v4(addr).to_bits(), len).unwrap()
}

#[test]
fn route_add_forwards_the_next_batch_and_route_del_stops_it() {
    let (mut rig, mut control) = router_rig(router_config());
    let frame = udp4("198.51.100.7", 53);
    let out = rig.exchange(0, std::slice::from_ref(&frame));
    assert!(out[1].is_empty() && out[2].is_empty());
    assert_eq!(drops(&rig, DropReason::NoRoute), 1);

    let add = AppCommand::RouteAddV4 {
        prefix: prefix4("198.51.100.0", 24),
        via: v4("10.2.0.2"),
    };
    done(call(&mut rig, &mut control, add));
    let out = rig.exchange(0, std::slice::from_ref(&frame));
    assert_eq!(out[2], [forwarded4(&frame, ROUTER[2], G2)]);
    let routes = table(call(&mut rig, &mut control, AppCommand::ShowRoutes));
    assert_eq!(routes.columns, ["prefix", "via", "port"]);
    assert!(
        has_row(&routes, &["198.51.100.0/24", "10.2.0.2", "p2"]),
        "{routes:?}"
    );
    assert!(
        has_row(&routes, &["10.0.0.0/24", "connected", "p0"]),
        "{routes:?}"
    );
    assert!(has_row(&routes, &["10.0.0.1/32", "local"]), "{routes:?}");

    let del = AppCommand::RouteRemoveV4(prefix4("198.51.100.0", 24));
    done(call(&mut rig, &mut control, del.clone()));
    let out = rig.exchange(0, std::slice::from_ref(&frame));
    assert!(out[1].is_empty() && out[2].is_empty());
    assert_eq!(drops(&rig, DropReason::NoRoute), 2);
    let why = refused(call(&mut rig, &mut control, del));
    assert!(
        why.contains("no route for exactly 198.51.100.0/24"),
        "{why}"
    );

    let unreachable = AppCommand::RouteAddV4 {
        prefix: prefix4("198.51.100.0", 24),
        via: v4("172.16.0.1"),
    };
    let why = refused(call(&mut rig, &mut control, unreachable));
    assert!(
        why.contains("172.16.0.1") && why.contains("subnet"),
        "{why}"
    );
    let v6 = AppCommand::RouteAddV6 {
        prefix: Ipv6Prefix::new("2001:db8:100::".parse::<Ipv6Addr>().unwrap().to_bits(), 48)
            .unwrap(),
        via: "2001:db8:2::2".parse().unwrap(),
    };
    done(call(&mut rig, &mut control, v6));
    let frame6 = udp6("2001:db8:100::5");
    let out = rig.exchange(0, std::slice::from_ref(&frame6));
    assert_eq!(out[2], [forwarded6(&frame6, ROUTER[2], G2)]);
    finish(rig);
}

/// FIBs as the control thread builds them from a route file: next hop *i* is gateway *i*.
fn loaded(
    v4_routes: &[(&str, u8, u32)],
    v6_routes: &[(&str, u8, u32)],
    gateways: &[&str],
) -> Routes {
    let fib4 = Fib4::from_routes(
        FibKind::Dir24,
        v4_routes
            .iter()
            .map(|&(a, len, hop)| (prefix4(a, len), NextHop::hop(hop).unwrap())),
    )
    .unwrap();
    let fib6 = Fib6::from_routes(
        FibKind::Dir24,
        v6_routes.iter().map(|&(a, len, hop)| {
            let addr: Ipv6Addr = a.parse().unwrap();
            (
                Ipv6Prefix::new(addr.to_bits(), len).unwrap(),
                NextHop::hop(hop).unwrap(),
            )
        }),
    )
    .unwrap();
    Routes {
        v4: Arc::new(fib4),
        v6: Arc::new(fib6),
        gateways: gateways
            .iter()
            .map(|g| g.parse::<IpAddr>().unwrap())
            .collect(),
    }
}

#[test]
fn a_loaded_fib_replaces_the_static_routes_and_keeps_the_interfaces() {
    let mut config = router_config();
    config.routes = vec![wirespeed_dataplane::app::router::StaticRoute {
        prefix: wirespeed_dataplane::app::router::Prefix::new(IpAddr::V4(v4("0.0.0.0")), 0)
            .unwrap(),
        via: vec![wirespeed_dataplane::app::router::Gateway::new(IpAddr::V4(
            v4("10.2.0.2"),
        ))],
    }];
    let (mut rig, mut control) = router_rig(config);
    let default = udp4("8.8.8.8", 53);
    let out = rig.exchange(0, std::slice::from_ref(&default));
    assert_eq!(out[2].len(), 1, "the configured default route");

    // Gateways of both families share one id space: 0 and 1 are IPv4, 2 is IPv6.
    let routes = loaded(
        &[
            ("100.64.0.0", 10, 0),
            ("100.64.2.0", 24, 1),
            ("10.0.0.0", 24, 0),
        ],
        &[("2001:db8:100::", 48, 2)],
        &["10.1.0.2", "10.2.0.2", "2001:db8:2::2"],
    );
    let reply = call(&mut rig, &mut control, AppCommand::ReplaceFib(routes));
    match reply {
        AppReply::Retired(Retired::Fib(old)) => {
            assert_eq!(
                old.v4.len(),
                7,
                "the replaced FIB: default, 3 connected, 3 local"
            );
        }
        other => panic!("{other:?}"),
    }
    let to_g1 = udp4("100.64.1.1", 53);
    let to_g2 = udp4("100.64.2.9", 53);
    let connected = udp4("10.2.0.2", 53);
    let v6 = udp6("2001:db8:100::1");
    let out = rig.exchange(
        0,
        &[to_g1.clone(), to_g2.clone(), connected.clone(), v6.clone()],
    );
    assert_eq!(out[1], [forwarded4(&to_g1, ROUTER[1], G1)]);
    assert_eq!(
        out[2],
        [
            forwarded4(&to_g2, ROUTER[2], G2),
            forwarded4(&connected, ROUTER[2], G2),
            forwarded6(&v6, ROUTER[2], G2),
        ]
    );
    // The old default route is gone; the file's 10.0.0.0/24 won over the connected subnet,
    // but the router's own address is still local.
    let out = rig.exchange(0, std::slice::from_ref(&default));
    assert!(out[1].is_empty() && out[2].is_empty());
    assert_eq!(out[0].len(), 1, "an ICMP unreachable back to the host");
    assert_eq!(drops(&rig, DropReason::NoRoute), 1);
    let shown = table(call(&mut rig, &mut control, AppCommand::ShowRoutes));
    assert!(
        has_row(&shown, &["10.0.0.0/24", "10.1.0.2", "p1"]),
        "{shown:?}"
    );
    assert!(has_row(&shown, &["10.0.0.1/32", "local"]), "{shown:?}");
    assert!(
        has_row(&shown, &["10.2.0.0/24", "connected", "p2"]),
        "{shown:?}"
    );
    assert!(
        has_row(&shown, &["2001:db8:1::/64", "connected", "p1"]),
        "{shown:?}"
    );

    // A gateway outside every subnet refuses the whole load; the FIB in use stays.
    let bad = loaded(&[("192.0.2.0", 24, 0)], &[], &["172.16.0.1"]);
    let why = refused(call(&mut rig, &mut control, AppCommand::ReplaceFib(bad)));
    assert!(why.contains("172.16.0.1"), "{why}");
    let out = rig.exchange(0, std::slice::from_ref(&to_g1));
    assert_eq!(out[1].len(), 1);
    // A FIB someone else still holds is refused (a worker must own what it completes).
    let shared = loaded(&[], &[], &[]);
    let kept = Arc::clone(&shared.v4);
    let why = refused(call(&mut rig, &mut control, AppCommand::ReplaceFib(shared)));
    assert!(why.contains("own copy"), "{why}");
    drop(kept);
    finish(rig);
}

#[test]
fn neighbours_are_added_removed_and_shown() {
    let mut config = router_config();
    config.neighbours.clear();
    let (mut rig, mut control) = router_rig(config);
    done(call(
        &mut rig,
        &mut control,
        AppCommand::RouteAddV4 {
            prefix: prefix4("203.0.113.0", 24),
            via: v4("10.1.0.9"),
        },
    ));
    // Unknown neighbour: the packet waits and the router asks (an ARP request on port 1).
    let frame = udp4("203.0.113.5", 53);
    let out = rig.exchange(0, std::slice::from_ref(&frame));
    assert_eq!(out[1].len(), 1, "one ARP request");
    assert_eq!(&out[1][0][12..14], &[0x08, 0x06]);

    let add = AppCommand::NeighbourAdd(Neighbour {
        addr: v4("10.1.0.9").into(),
        mac: [2, 0, 0, 0, 0, 0x99],
        port: "p1".into(),
    });
    done(call(&mut rig, &mut control, add));
    // The waiting packet leaves with the next batch, then new ones go straight through.
    let out = rig.exchange(0, std::slice::from_ref(&frame));
    let expected = forwarded4(&frame, ROUTER[1], mac(0x99));
    assert_eq!(out[1], [expected.clone(), expected]);
    let shown = table(call(&mut rig, &mut control, AppCommand::ShowNeighbours));
    assert!(
        has_row(&shown, &["10.1.0.9", "02:00:00:00:00:99", "p1", "static"]),
        "{shown:?}"
    );

    let bad_port = AppCommand::NeighbourAdd(Neighbour {
        addr: v4("10.1.0.8").into(),
        mac: [2, 0, 0, 0, 0, 0x98],
        port: "p7".into(),
    });
    let why = refused(call(&mut rig, &mut control, bad_port));
    assert!(why.contains("p7") && why.contains("p0, p1, p2"), "{why}");

    done(call(
        &mut rig,
        &mut control,
        AppCommand::NeighbourRemove(v4("10.1.0.9").into()),
    ));
    let out = rig.exchange(0, std::slice::from_ref(&frame));
    assert_eq!(out[1].len(), 1, "asked again");
    assert_eq!(&out[1][0][12..14], &[0x08, 0x06]);
    // Removing it while a packet waits frees that packet with the next batch.
    done(call(
        &mut rig,
        &mut control,
        AppCommand::NeighbourRemove(v4("10.1.0.9").into()),
    ));
    rig.exchange(0, &[]);
    let why = refused(call(
        &mut rig,
        &mut control,
        AppCommand::NeighbourRemove(v4("10.1.0.9").into()),
    ));
    assert!(why.contains("no neighbour"), "{why}");
    finish(rig);
}

/// The rewrite a gateway's packets get is kept per route next hop (an adjacency) but must follow
/// the neighbour table: a new MAC for the gateway, given by `neighbour add` or learned from the
/// wire, is used from the very next packet, and a gateway deleted while routes point at it gets
/// its packets held and asked for again, never sent to the old MAC.
#[test]
fn gateway_rewrites_follow_their_neighbour_through_changes_and_removal() {
    let (mut rig, mut control) = router_rig(router_config());
    done(call(
        &mut rig,
        &mut control,
        AppCommand::RouteAddV4 {
            prefix: prefix4("203.0.113.0", 24),
            via: v4("10.1.0.2"),
        },
    ));
    let frames = [udp4("203.0.113.5", 53), udp4("203.0.113.6", 54)];
    let to = |next: EthernetAddress| -> Vec<Vec<u8>> {
        frames
            .iter()
            .map(|frame| forwarded4(frame, ROUTER[1], next))
            .collect()
    };
    let out = rig.exchange(0, &frames);
    assert_eq!(out[1], to(G1), "the configured MAC");

    // `neighbour add` over the static entry: a new MAC from the next packet on.
    let add = |mac: EthernetAddress| {
        AppCommand::NeighbourAdd(Neighbour {
            addr: v4("10.1.0.2").into(),
            mac: mac.0,
            port: "p1".into(),
        })
    };
    done(call(&mut rig, &mut control, add(mac(0x77))));
    let out = rig.exchange(0, &frames);
    assert_eq!(out[1], to(mac(0x77)), "the changed static MAC");

    // Deleted while the route points at it: the packet waits and the router asks.
    done(call(
        &mut rig,
        &mut control,
        AppCommand::NeighbourRemove(v4("10.1.0.2").into()),
    ));
    let out = rig.exchange(0, &frames[..1]);
    let request = arp_request(ROUTER[1], v4("10.1.0.1"), v4("10.1.0.2"));
    assert_eq!(out[1].len(), 1, "only the ARP request, the packet held");
    assert_eq!(out[1][0][..6], EthernetAddress::BROADCAST.0);
    assert_eq!(out[1][0][12..42], request[12..42], "who-has 10.1.0.2");

    // The gateway asks for the router's address from a new MAC: it is learned, the packet that
    // waited leaves with that MAC (after the router's ARP reply), and so do the next ones.
    let learned = mac(0x88);
    let out = rig.exchange(1, &[arp_request(learned, v4("10.1.0.2"), v4("10.1.0.1"))]);
    assert_eq!(out[1].len(), 2, "{:?}", out[1]);
    assert_eq!(&out[1][0][12..14], &[0x08, 0x06], "the ARP reply");
    assert_eq!(out[1][1], to(learned)[0], "the held packet");
    let out = rig.exchange(0, &frames);
    assert_eq!(out[1], to(learned), "the learned MAC");

    // A learned neighbour that moves to another MAC is followed too.
    let moved = mac(0x99);
    let out = rig.exchange(1, &[arp_request(moved, v4("10.1.0.2"), v4("10.1.0.1"))]);
    assert_eq!(out[1].len(), 1, "the ARP reply");
    let out = rig.exchange(0, &frames);
    assert_eq!(out[1], to(moved), "the new learned MAC");
    assert_eq!(drops(&rig, DropReason::NoNeighbour), 0);
    finish(rig);
}

/// A route load replaces the hop table, so a hop id may name another gateway afterwards: no
/// rewrite cached under the old table may survive it.
#[test]
fn a_loaded_fib_forgets_the_rewrites_of_the_hop_table_it_replaced() {
    let (mut rig, mut control) = router_rig(router_config());
    done(call(
        &mut rig,
        &mut control,
        AppCommand::RouteAddV4 {
            prefix: prefix4("192.0.2.0", 24),
            via: v4("10.1.0.2"),
        },
    ));
    let frame = udp4("192.0.2.7", 53);
    let out = rig.exchange(0, std::slice::from_ref(&frame));
    assert_eq!(out[1], [forwarded4(&frame, ROUTER[1], G1)]);
    // Hop ids 0..=3 were the router itself and the three connected subnets, 4 the gateway G1;
    // in the loaded table id 4 is G2.
    let gateways = ["10.2.0.9", "10.2.0.8", "10.2.0.7", "10.2.0.6", "10.2.0.2"];
    let routes = loaded(&[("192.0.2.0", 24, 4)], &[], &gateways);
    done(call(&mut rig, &mut control, AppCommand::ReplaceFib(routes)));
    let out = rig.exchange(0, std::slice::from_ref(&frame));
    assert!(out[1].is_empty(), "{:?}", out[1]);
    assert_eq!(out[2], [forwarded4(&frame, ROUTER[2], G2)]);
    finish(rig);
}

fn acl_rule(action: AclAction, fields: &[(&str, &str)]) -> AclRule {
    AclRule {
        action,
        fields: fields
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect(),
    }
}

#[test]
fn a_loaded_acl_drops_only_the_matching_flow_in_front_of_the_router() {
    let mut config = router_config();
    config.routes = vec![wirespeed_dataplane::app::router::StaticRoute {
        prefix: wirespeed_dataplane::app::router::Prefix::new(IpAddr::V4(v4("0.0.0.0")), 0)
            .unwrap(),
        via: vec![wirespeed_dataplane::app::router::Gateway::new(IpAddr::V4(
            v4("10.2.0.2"),
        ))],
    }];
    let (mut rig, mut control) = router_rig(config);
    let dns = udp4("198.18.5.5", 53);
    let other = udp4("198.18.5.5", 1500);
    let out = rig.exchange(0, &[dns.clone(), other.clone()]);
    assert_eq!(out[2].len(), 2, "no ACL yet");

    let rules: Arc<[AclRule]> = Arc::from(vec![acl_rule(
        AclAction::Deny,
        &[
            ("proto", "udp"),
            ("dst", "198.18.0.0/16"),
            ("dst_port", "53"),
        ],
    )]);
    match call(
        &mut rig,
        &mut control,
        AppCommand::ReplaceAcl(Arc::clone(&rules)),
    ) {
        AppReply::Retired(Retired::Acl(back)) => assert!(Arc::ptr_eq(&back, &rules)),
        other => panic!("{other:?}"),
    }
    let out = rig.exchange(0, &[dns.clone(), other.clone()]);
    assert_eq!(out[2], [forwarded4(&other, ROUTER[2], G2)]);
    assert_eq!(drops(&rig, DropReason::AclDenied), 1);

    let bad: Arc<[AclRule]> = Arc::from(vec![
        acl_rule(AclAction::Permit, &[]),
        acl_rule(AclAction::Deny, &[("dst_port", "many")]),
    ]);
    let why = refused(call(&mut rig, &mut control, AppCommand::ReplaceAcl(bad)));
    assert!(why.contains("rule 1 field dst_port"), "{why}");
    // The refused load changed nothing.
    let out = rig.exchange(0, &[dns.clone(), other.clone()]);
    assert_eq!(out[2].len(), 1);
    // An empty ACL permits everything again.
    done(call(
        &mut rig,
        &mut control,
        AppCommand::ReplaceAcl(Arc::from(Vec::new())),
    ));
    let out = rig.exchange(0, &[dns, other]);
    assert_eq!(out[2].len(), 2);
    finish(rig);
}

fn bridge_rig(acl: Option<AclConfig>) -> (Rig, ControlEnd) {
    let ports = (0..3)
        .map(|port| BridgePort {
            port,
            mode: VlanMode::Access(10),
        })
        .collect();
    let mut bridge = Bridge::new(BridgeConfig {
        ports,
        ..BridgeConfig::default()
    })
    .unwrap();
    if let Some(acl) = acl {
        bridge = bridge.with_acl(&acl);
    }
    let mut rig = Rig::new(Box::new(bridge), 3, 32);
    let control = rig.commands();
    (rig, control)
}

fn ethernet(src: EthernetAddress, dst: EthernetAddress, dst_port: u16) -> Vec<u8> {
    FrameBuilder::ipv4_udp()
        .with_l4(L4::Udp {
            src_port: 4000,
            dst_port,
        })
        .macs(src, dst)
        .build()
}

#[test]
fn mac_flush_makes_the_bridge_flood_again_and_show_macs_lists_the_table() {
    let (mut rig, mut control) = bridge_rig(None);
    let (a, b) = (mac(1), mac(2));
    let a_to_b = ethernet(a, b, 7);
    let out = rig.exchange(0, std::slice::from_ref(&a_to_b));
    assert_eq!((out[1].len(), out[2].len()), (1, 1), "unknown: flooded");
    let b_to_a = ethernet(b, a, 7);
    let out = rig.exchange(1, std::slice::from_ref(&b_to_a));
    assert_eq!(out[0], [b_to_a]);
    let out = rig.exchange(0, std::slice::from_ref(&a_to_b));
    assert_eq!(out[1], std::slice::from_ref(&a_to_b));
    assert!(out[2].is_empty(), "learned: unicast");

    let macs = table(call(&mut rig, &mut control, AppCommand::ShowMacs));
    assert_eq!(macs.columns, ["vlan", "mac", "port", "age s"]);
    assert_eq!(macs.rows.len(), 2);
    assert_eq!(macs.rows[0][..3], ["10", "02:00:00:00:00:01", "p0"]);
    assert_eq!(macs.rows[1][..3], ["10", "02:00:00:00:00:02", "p1"]);
    let age: f64 = macs.rows[0][3].parse().unwrap();
    assert!((0.0..5.0).contains(&age), "{age}");

    done(call(&mut rig, &mut control, AppCommand::MacFlush));
    assert!(
        table(call(&mut rig, &mut control, AppCommand::ShowMacs))
            .rows
            .is_empty()
    );
    let out = rig.exchange(0, std::slice::from_ref(&a_to_b));
    assert_eq!(
        (out[1].len(), out[2].len()),
        (1, 1),
        "flushed: flooded again"
    );
    // The bridge has no routes.
    assert!(matches!(
        call(&mut rig, &mut control, AppCommand::ShowRoutes),
        AppReply::Unsupported
    ));
    finish(rig);
}

#[test]
fn the_bridge_acl_from_config_and_from_a_load() {
    let deny_dns = wirespeed_dataplane::app::fields::acl_rules(&[acl_rule(
        AclAction::Deny,
        &[("proto", "udp"), ("dst_port", "53")],
    )])
    .unwrap();
    let (mut rig, mut control) = bridge_rig(Some(AclConfig {
        rules: deny_dns,
        ..AclConfig::default()
    }));
    let (a, b) = (mac(1), mac(2));
    let dns = ethernet(a, b, 53);
    let web = ethernet(a, b, 80);
    let out = rig.exchange(0, &[dns.clone(), web.clone()]);
    assert_eq!(out[1], std::slice::from_ref(&web));
    assert_eq!(out[2], std::slice::from_ref(&web));
    assert_eq!(drops(&rig, DropReason::AclDenied), 1);
    // A denied packet is not learned either: only `a` came through.
    let macs = table(call(&mut rig, &mut control, AppCommand::ShowMacs));
    assert_eq!(macs.rows.len(), 1);

    let rules: Arc<[AclRule]> = Arc::from(vec![acl_rule(
        AclAction::Deny,
        &[("proto", "udp"), ("dst_port", "80-90")],
    )]);
    done(call(&mut rig, &mut control, AppCommand::ReplaceAcl(rules)));
    let out = rig.exchange(0, &[dns.clone(), web]);
    assert_eq!(out[1], std::slice::from_ref(&dns));
    assert_eq!(drops(&rig, DropReason::AclDenied), 2);
    finish(rig);
}

fn flow(priority: u16, fields: &[(&str, &str)], actions: &[&str]) -> FlowRule {
    FlowRule {
        priority,
        fields: fields
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect(),
        actions: actions.iter().map(|a| a.to_string()).collect(),
    }
}

/// The openflow app over three ports, and its command channel.
fn openflow_rig() -> (Rig, ControlEnd) {
    let app = OpenFlow::new(OpenFlowConfig {
        ports: 3,
        ..OpenFlowConfig::default()
    });
    let mut rig = Rig::new(Box::new(app), 3, 32);
    let control = rig.commands();
    (rig, control)
}

#[test]
fn flows_added_and_removed_at_run_time_decide_the_next_batch() {
    let (mut rig, mut control) = openflow_rig();
    let frame = udp4("10.9.0.1", 53);
    let out = rig.exchange(0, std::slice::from_ref(&frame));
    assert!(out.iter().all(Vec::is_empty));
    assert_eq!(drops(&rig, DropReason::TableMiss), 1);

    let rule = flow(
        10,
        &[("in_port", "p0"), ("ip_dst", "10.0.0.0/8")],
        &["set_field:eth_dst=02:00:00:00:00:77", "output:p2"],
    );
    done(call(
        &mut rig,
        &mut control,
        AppCommand::FlowAdd(rule.clone()),
    ));
    let mut expected = frame.clone();
    expected[..6].copy_from_slice(&mac(0x77).0);
    for _ in 0..3 {
        // The first packet takes the slow path, the next ones the fast path.
        let out = rig.exchange(0, std::slice::from_ref(&frame));
        assert_eq!(out[2], std::slice::from_ref(&expected));
    }
    // A more specific flow added later wins at once: the fast path was flushed.
    let more = flow(
        20,
        &[
            ("eth_type", "0x0800"),
            ("ip_proto", "udp"),
            ("l4_dst", "53"),
        ],
        &["output:p1"],
    );
    done(call(
        &mut rig,
        &mut control,
        AppCommand::FlowAdd(more.clone()),
    ));
    let out = rig.exchange(0, std::slice::from_ref(&frame));
    assert_eq!(out[1], std::slice::from_ref(&frame));

    let shown = table(call(&mut rig, &mut control, AppCommand::ShowFlows));
    assert_eq!(
        shown.columns[..4],
        ["table", "priority", "match", "actions"]
    );
    assert_eq!(
        shown.rows[1][..4],
        [
            "0",
            "10",
            "in_port=p0,eth_type=0x0800,ip_dst=10.0.0.0/8",
            "set_field:eth_dst=02:00:00:00:00:77,output:p2"
        ]
    );
    assert_eq!(shown.rows[1][7], "3", "packets of the first flow");
    let stats = shown.rows.last().unwrap();
    assert_eq!(stats[0], "cache");
    assert!(stats[2].contains("slow_path=3"), "{stats:?}");

    done(call(&mut rig, &mut control, AppCommand::FlowRemove(more)));
    let out = rig.exchange(0, std::slice::from_ref(&frame));
    assert_eq!(out[2], [expected]);
    done(call(
        &mut rig,
        &mut control,
        AppCommand::FlowRemove(rule.clone()),
    ));
    let out = rig.exchange(0, std::slice::from_ref(&frame));
    assert!(out.iter().all(Vec::is_empty));
    assert_eq!(drops(&rig, DropReason::TableMiss), 2);
    let why = refused(call(&mut rig, &mut control, AppCommand::FlowRemove(rule)));
    assert!(why.contains("no flow"), "{why}");

    let bad = flow(1, &[("ip_dts", "10.0.0.0/8")], &["output:p1"]);
    let why = refused(call(&mut rig, &mut control, AppCommand::FlowAdd(bad)));
    assert!(
        why.contains("field ip_dts") && why.contains("ip_dst"),
        "{why}"
    );
    let bad = flow(1, &[], &["output:p9"]);
    let why = refused(call(&mut rig, &mut control, AppCommand::FlowAdd(bad)));
    assert!(why.contains("output:p9"), "{why}");
    let bad = flow(1, &[("table", "9")], &["drop"]);
    let why = refused(call(&mut rig, &mut control, AppCommand::FlowAdd(bad)));
    assert!(why.contains("table 9"), "{why}");
    finish(rig);
}

/// OpenFlow's modify keeps a flow's counters (§6.4); an add of the same flow, or a modify with
/// RESET_COUNTS (which the agent sends as an add), restarts them.
#[test]
fn a_modified_flow_keeps_its_counters_and_a_replaced_one_restarts_them() {
    let (mut rig, mut control) = openflow_rig();
    let frame = udp4("10.9.0.1", 53);
    let to = |port: &str| flow(10, &[("ip_dst", "10.0.0.0/8")], &[port]);
    done(call(
        &mut rig,
        &mut control,
        AppCommand::FlowAdd(to("output:p2")),
    ));
    for _ in 0..3 {
        rig.exchange(0, std::slice::from_ref(&frame));
    }
    let mut edit = |rig: &mut Rig, edit: FlowEdit| {
        let edits: Arc<[FlowEdit]> = Arc::from(vec![edit]);
        let reply = call(rig, &mut control, AppCommand::FlowEdits(edits));
        assert!(
            matches!(&reply, AppReply::Edits(r) if r == &[None]),
            "{reply:?}"
        );
        let shown = table(call(rig, &mut control, AppCommand::ShowFlows));
        (shown.rows[0][3].clone(), shown.rows[0][7].clone())
    };
    assert_eq!(
        edit(&mut rig, FlowEdit::Modify(to("output:p1"))),
        ("output:p1".to_string(), "3".to_string())
    );
    let out = rig.exchange(0, std::slice::from_ref(&frame));
    assert_eq!(out[1], std::slice::from_ref(&frame));
    assert_eq!(
        edit(&mut rig, FlowEdit::Add(to("output:p2"))),
        ("output:p2".to_string(), "0".to_string())
    );
    finish(rig);
}

/// A transaction (the OpenFlow agent's bundle commit) applies part by part and, when an edit
/// of any part is refused, leaves the tables as they were before its first part: replaced
/// flows come back with their counters, added ones go. An abort undoes the parts too.
#[test]
fn a_flow_transaction_applies_whole_or_not_at_all() {
    let (mut rig, mut control) = openflow_rig();
    let frame = udp4("10.9.0.1", 53);
    let to_p2 = flow(10, &[("ip_dst", "10.0.0.0/8")], &["output:p2"]);
    done(call(&mut rig, &mut control, AppCommand::FlowAdd(to_p2)));
    let out = rig.exchange(0, std::slice::from_ref(&frame));
    assert_eq!(out[2], std::slice::from_ref(&frame));
    let part = |rig: &mut Rig, control: &mut ControlEnd, edits: Vec<FlowRule>, step| {
        let edits: Arc<[FlowEdit]> = edits.into_iter().map(FlowEdit::Add).collect();
        match call(rig, control, AppCommand::FlowTransaction { edits, step }) {
            AppReply::Edits(results) => results,
            other => panic!("expected per-edit results, got {other:?}"),
        }
    };
    let to_p1 = flow(10, &[("ip_dst", "10.0.0.0/8")], &["output:p1"]);
    let dns = flow(
        20,
        &[
            ("eth_type", "0x0800"),
            ("ip_proto", "udp"),
            ("l4_dst", "53"),
        ],
        &["drop"],
    );
    let other = flow(5, &[("ip_dst", "192.0.2.0/24")], &["output:p1"]);
    let bad = flow(5, &[], &["output:p9"]);

    // The first part replaces the flow: packets between parts see it.
    assert_eq!(
        part(
            &mut rig,
            &mut control,
            vec![to_p1.clone()],
            TransactionStep::Part
        ),
        [None]
    );
    let out = rig.exchange(0, std::slice::from_ref(&frame));
    assert_eq!(out[1], std::slice::from_ref(&frame));
    // A refusal in the last part undoes it; the abort that follows, the first part.
    let results = part(
        &mut rig,
        &mut control,
        vec![dns.clone(), bad, other.clone()],
        TransactionStep::Last,
    );
    assert_eq!(results[0], None);
    assert!(results[1].as_deref().unwrap().contains("p9"), "{results:?}");
    assert_eq!(results[2], None);
    let out = rig.exchange(0, std::slice::from_ref(&frame));
    assert_eq!(out[1], std::slice::from_ref(&frame), "the first part stays");
    assert_eq!(
        part(&mut rig, &mut control, Vec::new(), TransactionStep::Abort),
        []
    );
    let out = rig.exchange(0, std::slice::from_ref(&frame));
    assert_eq!(out[2], std::slice::from_ref(&frame), "the old flow is back");
    let shown = table(call(&mut rig, &mut control, AppCommand::ShowFlows));
    assert_eq!(shown.rows.len(), 2, "one flow and the cache row: {shown:?}");
    assert_eq!(shown.rows[0][3], "output:p2");
    assert_eq!(shown.rows[0][7], "2", "its packets kept");

    // An abort undoes the parts applied.
    assert_eq!(
        part(
            &mut rig,
            &mut control,
            vec![dns.clone()],
            TransactionStep::Part
        ),
        [None]
    );
    assert_eq!(
        part(&mut rig, &mut control, Vec::new(), TransactionStep::Abort),
        []
    );
    let out = rig.exchange(0, std::slice::from_ref(&frame));
    assert_eq!(out[2], std::slice::from_ref(&frame));

    // Parts that all apply stay.
    assert_eq!(
        part(
            &mut rig,
            &mut control,
            vec![to_p1, other],
            TransactionStep::Part
        ),
        [None, None]
    );
    assert_eq!(
        part(&mut rig, &mut control, vec![dns], TransactionStep::Last),
        [None]
    );
    let out = rig.exchange(0, std::slice::from_ref(&frame));
    assert!(out.iter().all(Vec::is_empty), "the DNS flow drops it");
    let shown = table(call(&mut rig, &mut control, AppCommand::ShowFlows));
    assert_eq!(
        shown.rows.len(),
        4,
        "three flows and the cache row: {shown:?}"
    );

    // An abort undoes a bounded number of edits a command, and says when more are left.
    let hosts = |from: usize| -> Vec<FlowRule> {
        (from..from + 700)
            .map(|i| {
                let dst = format!("172.16.{}.{}", i / 256, i % 256);
                flow(1, &[("ip_dst", dst.as_str())], &["output:p1"])
            })
            .collect()
    };
    for from in [0, 700] {
        let results = part(&mut rig, &mut control, hosts(from), TransactionStep::Part);
        assert!(results.iter().all(Option::is_none));
    }
    let more = part(&mut rig, &mut control, Vec::new(), TransactionStep::Abort);
    assert_eq!(more, [Some(UNDO_MORE.to_string())]);
    assert_eq!(
        part(&mut rig, &mut control, Vec::new(), TransactionStep::Abort),
        []
    );
    let shown = table(call(&mut rig, &mut control, AppCommand::ShowFlows));
    assert_eq!(shown.rows.len(), 4, "the same three flows: {shown:?}");
    finish(rig);
}

/// A reloaded configuration's route: one command sets a route of either family to one gateway
/// or several (ECMP), in place.
#[test]
fn a_route_set_from_a_reload_spreads_over_its_gateways_then_follows_one() {
    let (mut rig, mut control) = router_rig(router_config());
    let set = |via: &[&str]| {
        AppCommand::RouteSet(StaticRoute {
            prefix: Prefix::new("198.51.100.0".parse().unwrap(), 24).unwrap(),
            via: via
                .iter()
                .map(|v| Gateway::new(v.parse().unwrap()))
                .collect(),
        })
    };
    // Flows that differ in their source port spread over both gateways.
    let frames: Vec<Vec<u8>> = (0..64)
        .map(|port| {
            let mut frame = udp4("198.51.100.7", 53);
            frame[34..36].copy_from_slice(&(4000u16 + port).to_be_bytes());
            frame
        })
        .collect();
    done(call(&mut rig, &mut control, set(&["10.1.0.2", "10.2.0.2"])));
    let out = rig.exchange(0, &frames);
    assert_eq!(out[1].len() + out[2].len(), frames.len());
    assert!(
        !out[1].is_empty() && !out[2].is_empty(),
        "ECMP used one gateway"
    );
    done(call(&mut rig, &mut control, set(&["10.2.0.2"])));
    let out = rig.exchange(0, &frames);
    assert_eq!((out[1].len(), out[2].len()), (0, frames.len()));
    finish(rig);
}

/// A reloaded `age_seconds` applies to the entries already learned; a bad one is refused.
#[test]
fn the_mac_age_changes_at_run_time() {
    let (mut rig, mut control) = bridge_rig(None);
    let (a, b) = (mac(1), mac(2));
    rig.exchange(1, &[ethernet(b, a, 7)]);
    let out = rig.exchange(0, &[ethernet(a, b, 7)]);
    assert_eq!((out[1].len(), out[2].len()), (1, 0), "learned: unicast");
    let why = refused(call(&mut rig, &mut control, AppCommand::SetMacAge(0.0)));
    assert!(why.contains("age"), "{why}");
    // A nanosecond: b is forgotten by the next batch.
    done(call(&mut rig, &mut control, AppCommand::SetMacAge(1e-9)));
    let out = rig.exchange(0, &[ethernet(a, b, 7)]);
    assert_eq!((out[1].len(), out[2].len()), (1, 1), "aged: flooded");
    finish(rig);
}

/// What the metrics show of the apps' tables: entries against capacity.
#[test]
fn apps_report_their_table_fills() {
    let fill = |app: &dyn App, table: &str| -> TableFill {
        let mut fills = Vec::new();
        app.tables(&mut fills);
        *fills
            .iter()
            .find(|f| f.table == table)
            .unwrap_or_else(|| panic!("no {table} in {fills:?}"))
    };
    let router = Router::new(router_config()).unwrap();
    let neighbours = fill(&router, "neighbours");
    assert_eq!((neighbours.entries, neighbours.capacity), (3, Some(4096)));
    // Each interface's connected and local route.
    assert_eq!(fill(&router, "routes_v4").entries, 6);
    assert_eq!(fill(&router, "routes_v6").entries, 6);
    assert!(fill(&router, "routes_v4_tbl8_groups").capacity.is_some());
    let openflow = OpenFlow::new(OpenFlowConfig {
        ports: 3,
        ..OpenFlowConfig::default()
    });
    let flows = fill(&openflow, "flows");
    assert_eq!(flows.entries, 0);
    assert!(flows.capacity.unwrap() > 0);
    assert!(fill(&openflow, "flow_cache").capacity.unwrap() > 0);
}
