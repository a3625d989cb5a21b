//! The router over memory ports, byte for byte: forwarding (MACs, TTL / hop limit, checksum),
//! longest-prefix match, ECMP, ARP and NDP (answers, resolution, hold queues), ICMP errors and
//! their rate limit, the drop reasons, hostile ARP/NDP frames, and pool conservation after
//! every scenario.
//!
//! Topology: three ports with hosts and gateways behind them.
//!
//! | port | router MAC | router addresses           | neighbours (static)                     |
//! |------|------------|----------------------------|-----------------------------------------|
//! | 0    | 02::a0     | 10.0.0.1/24, 2001:db8::1/64 | host 10.0.0.2 / 2001:db8::2 (02::b0)   |
//! | 1    | 02::a1     | 10.1.0.1/24, 2001:db8:1::1/64 | G1 10.1.0.2 / 2001:db8:1::2 (02::c1) |
//! | 2    | 02::a2     | 10.2.0.1/24, 2001:db8:2::1/64 | G2 10.2.0.2 / 2001:db8:2::2 (02::c2) |

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use proptest::prelude::*;
use wirespeed_dataplane::app::router::{
    Gateway, Interface, OptionsPolicy, Prefix, Router, RouterConfig, StaticNeighbour, StaticRoute,
};
use wirespeed_packet::DropReason;
use wirespeed_packet::checksum;
use wirespeed_packet::wire::{
    EtherType, EthernetAddress, IpProtocol, arp, ethernet, icmpv4, icmpv6, ipv4, ipv6,
};
use wirespeed_testkit::frames::{FrameBuilder, L3, L4, arp_request};
use wirespeed_testkit::rig::Rig;

const fn mac(last: u8) -> EthernetAddress {
    EthernetAddress([0x02, 0, 0, 0, 0, last])
}

const ROUTER: [EthernetAddress; 3] = [mac(0xa0), mac(0xa1), mac(0xa2)];
const HOST_MAC: EthernetAddress = mac(0xb0);
const G1_MAC: EthernetAddress = mac(0xc1);
const G2_MAC: EthernetAddress = mac(0xc2);

fn v4(s: &str) -> Ipv4Addr {
    s.parse().unwrap()
}

fn v6(s: &str) -> Ipv6Addr {
    s.parse().unwrap()
}

fn route(prefix: &str, len: u8, via: &[&str]) -> StaticRoute {
    StaticRoute {
        prefix: Prefix::new(prefix.parse().unwrap(), len).unwrap(),
        via: via
            .iter()
            .map(|g| Gateway::new(g.parse::<IpAddr>().unwrap()))
            .collect(),
    }
}

fn config() -> RouterConfig {
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
        routes: vec![
            route("0.0.0.0", 0, &["10.2.0.2"]),
            route("192.0.2.0", 24, &["10.1.0.2"]),
            route("192.0.2.128", 25, &["10.2.0.2"]),
            route("198.51.100.0", 24, &["10.1.0.2", "10.2.0.2"]),
            route("203.0.113.0", 24, &["10.1.0.9"]),
            route("::", 0, &["2001:db8:1::2"]),
            route("2001:db8:100::", 48, &["2001:db8:2::2"]),
            route("2001:db8:200::", 48, &["2001:db8:1::9"]),
        ],
        neighbours: vec![
            neighbour(0, "10.0.0.2", HOST_MAC),
            neighbour(1, "10.1.0.2", G1_MAC),
            neighbour(2, "10.2.0.2", G2_MAC),
            neighbour(0, "2001:db8::2", HOST_MAC),
            neighbour(1, "2001:db8:1::2", G1_MAC),
            neighbour(2, "2001:db8:2::2", G2_MAC),
        ],
        ..RouterConfig::default()
    }
}

fn rig_with(config: RouterConfig) -> Rig {
    Rig::new(Box::new(Router::new(config).unwrap()), 3, 32)
}

fn rig() -> Rig {
    rig_with(config())
}

fn finish(rig: Rig) {
    let conservation = rig.finish();
    assert!(conservation.holds(), "{conservation:?}");
}

fn drops(rig: &Rig, reason: DropReason) -> u64 {
    rig.worker.counters().drops[reason as usize]
}

fn counter(rig: &Rig, name: &str) -> u64 {
    rig.app_counters()
        .into_iter()
        .find(|(n, _)| *n == name)
        .unwrap_or_else(|| panic!("no counter {name}"))
        .1
}

/// An IPv4 frame from the host on port 0 to `dst`, to be finished by the caller.
fn from_host(dst: &str) -> FrameBuilder {
    FrameBuilder::ipv4_udp()
        .with_l3(L3::Ipv4 {
            src: v4("10.0.0.2"),
            dst: v4(dst),
        })
        .macs(HOST_MAC, ROUTER[0])
}

/// A UDP frame from the host on port 0 to `dst`.
fn udp4(dst: &str, ttl: u8, src_port: u16) -> Vec<u8> {
    from_host(dst)
        .with_l4(L4::Udp {
            src_port,
            dst_port: 53,
        })
        .ttl(ttl)
        .payload_len(18)
        .build()
}

fn udp6(dst: &str, hop_limit: u8) -> Vec<u8> {
    FrameBuilder::ipv6_udp()
        .with_l3(L3::Ipv6 {
            src: v6("2001:db8::2"),
            dst: v6(dst),
        })
        .macs(HOST_MAC, ROUTER[0])
        .ttl(hop_limit)
        .payload_len(10)
        .build()
}

/// What a router must make of an IPv4 `frame` sent to `next_mac` from `out_mac`: MACs
/// rewritten, TTL minus one, header checksum recomputed from scratch.
fn forwarded4(frame: &[u8], out_mac: EthernetAddress, next_mac: EthernetAddress) -> Vec<u8> {
    let mut expected = frame.to_vec();
    expected[..6].copy_from_slice(&next_mac.0);
    expected[6..12].copy_from_slice(&out_mac.0);
    let mut ip = ipv4::Packet::new_checked(&mut expected[14..]).unwrap();
    let ttl = ip.ttl();
    ip.set_ttl(ttl - 1);
    ip.fill_checksum();
    expected
}

fn forwarded6(frame: &[u8], out_mac: EthernetAddress, next_mac: EthernetAddress) -> Vec<u8> {
    let mut expected = frame.to_vec();
    expected[..6].copy_from_slice(&next_mac.0);
    expected[6..12].copy_from_slice(&out_mac.0);
    expected[14 + 7] -= 1;
    expected
}

#[test]
fn forwards_ipv4_rewriting_macs_and_ttl_with_a_correct_checksum() {
    let mut rig = rig();
    let frame = udp4("8.8.8.8", 64, 1000);
    let out = rig.exchange(0, std::slice::from_ref(&frame));
    assert!(out[0].is_empty() && out[1].is_empty());
    assert_eq!(out[2], [forwarded4(&frame, ROUTER[2], G2_MAC)]);
    let ip = ipv4::Packet::new_checked(&out[2][0][14..]).unwrap();
    assert_eq!(ip.ttl(), 63);
    assert!(checksum::is_valid(&out[2][0][14..34]), "full recomputation");
    assert_eq!(counter(&rig, "neighbour.forwarded"), 1);
    finish(rig);
}

#[test]
fn forwards_ipv6_decrementing_the_hop_limit() {
    let mut rig = rig();
    let frame = udp6("2001:db8:100::77", 2);
    let out = rig.exchange(0, std::slice::from_ref(&frame));
    assert_eq!(out[2], [forwarded6(&frame, ROUTER[2], G2_MAC)]);
    assert_eq!(out[2][0][14 + 7], 1);
    let default = udp6("2001:db8:5555::1", 64);
    let out = rig.exchange(0, std::slice::from_ref(&default));
    assert_eq!(out[1], [forwarded6(&default, ROUTER[1], G1_MAC)]);
    finish(rig);
}

#[test]
fn longest_prefix_wins_among_overlapping_routes() {
    let mut rig = rig();
    let cases = [
        ("8.8.8.8", 2, G2_MAC),     // default
        ("192.0.2.5", 1, G1_MAC),   // /24
        ("192.0.2.200", 2, G2_MAC), // /25 inside the /24
        ("192.0.2.127", 1, G1_MAC), // just below the /25
        ("10.1.0.2", 1, G1_MAC),    // connected subnet, the neighbour itself
        ("10.2.0.2", 2, G2_MAC),
    ];
    for (dst, port, next_mac) in cases {
        let frame = udp4(dst, 64, 7);
        let out = rig.exchange(0, std::slice::from_ref(&frame));
        for (p, frames) in out.iter().enumerate() {
            if p == port {
                assert_eq!(
                    *frames,
                    [forwarded4(&frame, ROUTER[port], next_mac)],
                    "{dst}"
                );
            } else {
                assert!(frames.is_empty(), "{dst} also left by port {p}");
            }
        }
    }
    finish(rig);
}

#[test]
fn ecmp_spreads_flows_and_keeps_each_on_one_member() {
    let mut rig = rig();
    let flows: Vec<u16> = (0..200).map(|i| 10_000 + i).collect();
    let mut member = std::collections::HashMap::new();
    for round in 0..3 {
        for &flow in &flows {
            let frame = udp4("198.51.100.9", 64, flow);
            let out = rig.exchange(0, std::slice::from_ref(&frame));
            let port = if out[1].len() == 1 {
                assert_eq!(out[1][0], forwarded4(&frame, ROUTER[1], G1_MAC));
                1
            } else {
                assert_eq!(out[2], [forwarded4(&frame, ROUTER[2], G2_MAC)]);
                2
            };
            let first = *member.entry(flow).or_insert(port);
            assert_eq!(first, port, "flow {flow} moved in round {round}");
        }
    }
    let on_one = member.values().filter(|&&p| p == 1).count();
    assert!((60..=140).contains(&on_one), "{on_one} of 200 flows on G1");
    finish(rig);
}

/// An ARP frame, padded to 60 bytes.
fn arp_frame(
    operation: arp::Operation,
    eth_dst: EthernetAddress,
    sender: (EthernetAddress, Ipv4Addr),
    target: (EthernetAddress, Ipv4Addr),
) -> Vec<u8> {
    let mut frame = vec![0u8; 60];
    ethernet::Repr {
        src_addr: sender.0,
        dst_addr: eth_dst,
        ethertype: EtherType::Arp,
    }
    .emit(&mut ethernet::Packet::new_unchecked(&mut frame[..]));
    arp::Repr {
        operation,
        source_hardware_addr: sender.0,
        source_protocol_addr: sender.1,
        target_hardware_addr: target.0,
        target_protocol_addr: target.1,
    }
    .emit(&mut arp::Packet::new_unchecked(&mut frame[14..]));
    frame
}

#[test]
fn answers_arp_for_its_address_and_learns_the_asker() {
    let mut config = config();
    config.neighbours.retain(|n| n.port != 0);
    let mut rig = rig_with(config);
    let asker = mac(0xd0);
    let request = arp_request(asker, v4("10.0.0.7"), v4("10.0.0.1"));
    let out = rig.exchange(0, &[request]);
    let expected = arp_frame(
        arp::Operation::Reply,
        asker,
        (ROUTER[0], v4("10.0.0.1")),
        (asker, v4("10.0.0.7")),
    );
    assert_eq!(out[0], [expected]);
    assert!(out[1].is_empty() && out[2].is_empty());
    assert_eq!(counter(&rig, "arp.replied"), 1);
    // The asker was learned: traffic to it goes out at once.
    let frame = FrameBuilder::ipv4_udp()
        .with_l3(L3::Ipv4 {
            src: v4("10.1.0.2"),
            dst: v4("10.0.0.7"),
        })
        .macs(G1_MAC, ROUTER[1])
        .build();
    let out = rig.exchange(1, std::slice::from_ref(&frame));
    assert_eq!(out[0], [forwarded4(&frame, ROUTER[0], asker)]);
    // Requests for other addresses are consumed silently: from a known neighbour they refresh
    // its entry, from a stranger they teach nothing.
    let refresh = arp_request(asker, v4("10.0.0.7"), v4("10.0.0.99"));
    let stranger = arp_request(mac(0xd1), v4("10.0.0.8"), v4("10.0.0.99"));
    let out = rig.exchange(0, &[refresh, stranger]);
    assert!(out.iter().all(Vec::is_empty));
    assert_eq!(counter(&rig, "arp.learned"), 2);
    assert_eq!(counter(&rig, "arp.ignored"), 1);
    assert_eq!(drops(&rig, DropReason::Consumed), 2);
    assert_eq!(
        counter(&rig, "neighbour.entries"),
        5,
        "the stranger was not added"
    );
    finish(rig);
}

#[test]
fn resolves_an_unknown_next_hop_holding_the_packet() {
    let mut rig = rig();
    let frame = udp4("203.0.113.5", 64, 1);
    let out = rig.exchange(0, std::slice::from_ref(&frame));
    let request = arp_frame(
        arp::Operation::Request,
        EthernetAddress::BROADCAST,
        (ROUTER[1], v4("10.1.0.1")),
        (EthernetAddress([0; 6]), v4("10.1.0.9")),
    );
    assert_eq!(out[1], [request], "one ARP request, the packet held");
    assert!(out[0].is_empty() && out[2].is_empty());
    assert_eq!(counter(&rig, "neighbour.waiting"), 1);
    let peer = mac(0xd9);
    let reply = arp_frame(
        arp::Operation::Reply,
        ROUTER[1],
        (peer, v4("10.1.0.9")),
        (ROUTER[1], v4("10.1.0.1")),
    );
    let out = rig.exchange(1, &[reply]);
    assert_eq!(out[1], [forwarded4(&frame, ROUTER[1], peer)]);
    assert_eq!(counter(&rig, "arp.learned"), 1);
    assert_eq!(counter(&rig, "neighbour.waiting"), 0);
    // From now on, no more holding.
    let next = udp4("203.0.113.6", 9, 2);
    let out = rig.exchange(0, std::slice::from_ref(&next));
    assert_eq!(out[1], [forwarded4(&next, ROUTER[1], peer)]);
    finish(rig);
}

#[test]
fn hold_queue_is_bounded_and_the_rest_dropped_no_neighbour() {
    let mut rig = rig();
    let frames: Vec<Vec<u8>> = (0..6).map(|i| udp4("203.0.113.5", 64, 100 + i)).collect();
    let out = rig.exchange(0, &frames);
    assert_eq!(out[1].len(), 1, "one ARP request for six packets");
    assert_eq!(drops(&rig, DropReason::NoNeighbour), 2);
    assert_eq!(counter(&rig, "neighbour.held"), 4);
    let peer = mac(0xd9);
    let reply = arp_frame(
        arp::Operation::Reply,
        ROUTER[1],
        (peer, v4("10.1.0.9")),
        (ROUTER[1], v4("10.1.0.1")),
    );
    let out = rig.exchange(1, &[reply]);
    let expected: Vec<Vec<u8>> = frames[..4]
        .iter()
        .map(|f| forwarded4(f, ROUTER[1], peer))
        .collect();
    assert_eq!(out[1], expected, "the first four, in order");
    finish(rig);
}

#[test]
fn held_packets_are_released_at_shutdown() {
    let mut rig = rig();
    let out = rig.exchange(
        0,
        &[udp4("203.0.113.5", 64, 1), udp6("2001:db8:200::1", 64)],
    );
    assert_eq!(
        out[1].len(),
        2,
        "an ARP request and a neighbour solicitation"
    );
    assert_eq!(counter(&rig, "neighbour.waiting"), 2);
    finish(rig);
}

struct Nd {
    eth_src: EthernetAddress,
    eth_dst: EthernetAddress,
    src: Ipv6Addr,
    dst: Ipv6Addr,
    kind: icmpv6::Message,
    flags: u32,
    target: Ipv6Addr,
    /// (option type, MAC)
    option: Option<(u8, EthernetAddress)>,
    hop_limit: u8,
}

fn nd_frame(nd: &Nd) -> Vec<u8> {
    let body = 24 + if nd.option.is_some() { 8 } else { 0 };
    let mut frame = vec![0u8; 14 + 40 + body];
    ethernet::Repr {
        src_addr: nd.eth_src,
        dst_addr: nd.eth_dst,
        ethertype: EtherType::Ipv6,
    }
    .emit(&mut ethernet::Packet::new_unchecked(&mut frame[..]));
    ipv6::Repr {
        src_addr: nd.src,
        dst_addr: nd.dst,
        next_header: IpProtocol::Icmpv6,
        payload_len: body as u16,
        hop_limit: nd.hop_limit,
        traffic_class: 0,
        flow_label: 0,
    }
    .emit(&mut ipv6::Packet::new_unchecked(&mut frame[14..]));
    let icmp = &mut frame[54..];
    icmp[8..24].copy_from_slice(&nd.target.octets());
    if let Some((kind, mac)) = nd.option {
        icmp[24] = kind;
        icmp[25] = 1;
        icmp[26..32].copy_from_slice(&mac.0);
    }
    let mut view = icmpv6::Packet::new_unchecked(icmp);
    icmpv6::Repr {
        message: nd.kind,
        code: 0,
        rest_of_header: nd.flags,
    }
    .emit(&mut view);
    view.fill_checksum(nd.src, nd.dst);
    frame
}

#[test]
fn answers_neighbour_solicitations_for_its_address() {
    let mut rig = rig();
    let asker = mac(0xd0);
    let solicit = nd_frame(&Nd {
        eth_src: asker,
        eth_dst: EthernetAddress([0x33, 0x33, 0xff, 0, 0, 1]),
        src: v6("2001:db8::7"),
        dst: v6("ff02::1:ff00:1"),
        kind: icmpv6::Message::NeighborSolicit,
        flags: 0,
        target: v6("2001:db8::1"),
        option: Some((1, asker)),
        hop_limit: 255,
    });
    let out = rig.exchange(0, &[solicit]);
    let advert = nd_frame(&Nd {
        eth_src: ROUTER[0],
        eth_dst: asker,
        src: v6("2001:db8::1"),
        dst: v6("2001:db8::7"),
        kind: icmpv6::Message::NeighborAdvert,
        flags: 0xe000_0000, // router, solicited, override
        target: v6("2001:db8::1"),
        option: Some((2, ROUTER[0])),
        hop_limit: 255,
    });
    assert_eq!(out[0], [advert]);
    let ip = ipv6::Packet::new_checked(&out[0][0][14..]).unwrap();
    let icmp = icmpv6::Packet::new_checked(ip.payload()).unwrap();
    assert!(icmp.verify_checksum(ip.src_addr(), ip.dst_addr()));
    assert_eq!(counter(&rig, "nd.replied"), 1);
    assert_eq!(
        counter(&rig, "nd.learned"),
        1,
        "the asker is a neighbour now"
    );
    finish(rig);
}

#[test]
fn resolves_an_ipv6_next_hop_with_ndp() {
    let mut rig = rig();
    let frame = udp6("2001:db8:200::1", 64);
    let out = rig.exchange(0, std::slice::from_ref(&frame));
    let solicit = nd_frame(&Nd {
        eth_src: ROUTER[1],
        eth_dst: EthernetAddress([0x33, 0x33, 0xff, 0, 0, 9]),
        src: v6("2001:db8:1::1"),
        dst: v6("ff02::1:ff00:9"),
        kind: icmpv6::Message::NeighborSolicit,
        flags: 0,
        target: v6("2001:db8:1::9"),
        option: Some((1, ROUTER[1])),
        hop_limit: 255,
    });
    assert_eq!(out[1], [solicit]);
    let peer = mac(0xd9);
    let advert = nd_frame(&Nd {
        eth_src: peer,
        eth_dst: ROUTER[1],
        src: v6("2001:db8:1::9"),
        dst: v6("2001:db8:1::1"),
        kind: icmpv6::Message::NeighborAdvert,
        flags: 0x6000_0000,
        target: v6("2001:db8:1::9"),
        option: Some((2, peer)),
        hop_limit: 255,
    });
    let out = rig.exchange(1, &[advert]);
    assert_eq!(out[1], [forwarded6(&frame, ROUTER[1], peer)]);
    assert_eq!(counter(&rig, "nd.learned"), 1);
    finish(rig);
}

#[test]
fn neighbours_are_listed() {
    let router = Router::new(config()).unwrap();
    let mut listed: Vec<(u16, IpAddr)> = router
        .neighbours()
        .map(|n| (n.key.port(), n.key.addr()))
        .collect();
    listed.sort();
    assert_eq!(listed.len(), 6);
    assert_eq!(listed[0], (0, IpAddr::V4(v4("10.0.0.2"))));
}

/// Checks an ICMPv4 error: addressed back to the host, quoting `original`'s IP header and
/// first 8 payload bytes, both checksums right by full recomputation.
fn assert_icmp4_error(error: &[u8], original: &[u8], kind: u8, code: u8) {
    assert_eq!(&error[..6], &HOST_MAC.0);
    assert_eq!(&error[6..12], &ROUTER[0].0);
    let ip = ipv4::Packet::new_checked(&error[14..]).unwrap();
    assert!(checksum::is_valid(&error[14..34]));
    assert_eq!(ip.src_addr(), v4("10.0.0.1"));
    assert_eq!(ip.dst_addr(), v4("10.0.0.2"));
    assert_eq!(ip.protocol(), IpProtocol::Icmp);
    let icmp_bytes = ip.payload();
    assert!(checksum::is_valid(icmp_bytes), "ICMP checksum");
    let icmp = icmpv4::Packet::new_checked(icmp_bytes).unwrap();
    assert_eq!((u8::from(icmp.msg_type()), icmp.msg_code()), (kind, code));
    assert_eq!(icmp.rest_of_header(), 0);
    assert_eq!(
        icmp.data(),
        &original[14..14 + 28],
        "header + 8 bytes quoted"
    );
    assert_eq!(error.len(), 14 + 20 + 8 + 28);
}

#[test]
fn ttl_one_gets_time_exceeded_quoting_the_header() {
    let mut rig = rig();
    let frame = udp4("8.8.8.8", 1, 5);
    let out = rig.exchange(0, std::slice::from_ref(&frame));
    assert!(out[1].is_empty() && out[2].is_empty());
    assert_eq!(out[0].len(), 1);
    assert_icmp4_error(&out[0][0], &frame, 11, 0);
    assert_eq!(drops(&rig, DropReason::TtlExpired), 1);
    // TTL 0 too; TTL 2 is forwarded with TTL 1.
    let out = rig.exchange(0, &[udp4("8.8.8.8", 0, 5), udp4("8.8.8.8", 2, 5)]);
    assert_eq!(out[0].len(), 1);
    assert_eq!(out[2].len(), 1);
    assert_eq!(drops(&rig, DropReason::TtlExpired), 2);
    finish(rig);
}

#[test]
fn hop_limit_one_gets_icmpv6_time_exceeded() {
    let mut rig = rig();
    let frame = udp6("2001:db8:100::1", 1);
    let out = rig.exchange(0, std::slice::from_ref(&frame));
    assert_eq!(out[0].len(), 1);
    let error = &out[0][0];
    assert_eq!(&error[..6], &HOST_MAC.0);
    let ip = ipv6::Packet::new_checked(&error[14..]).unwrap();
    assert_eq!(ip.src_addr(), v6("2001:db8::1"));
    assert_eq!(ip.dst_addr(), v6("2001:db8::2"));
    assert_eq!(ip.next_header(), IpProtocol::Icmpv6);
    let icmp = icmpv6::Packet::new_checked(ip.payload()).unwrap();
    assert_eq!(icmp.msg_type(), icmpv6::Message::TimeExceeded);
    assert!(icmp.verify_checksum(ip.src_addr(), ip.dst_addr()));
    assert_eq!(
        icmp.data(),
        &frame[14..],
        "the whole packet fits, so it is quoted"
    );
    assert_eq!(drops(&rig, DropReason::TtlExpired), 1);
    finish(rig);
}

#[test]
fn no_route_gets_destination_unreachable() {
    let mut config = config();
    config
        .routes
        .retain(|r| r.prefix != Prefix::new("0.0.0.0".parse().unwrap(), 0).unwrap());
    let mut rig = rig_with(config);
    let frame = udp4("100.64.0.1", 64, 5);
    let out = rig.exchange(0, std::slice::from_ref(&frame));
    assert_eq!(out[0].len(), 1);
    assert_icmp4_error(&out[0][0], &frame, 3, 0);
    assert_eq!(drops(&rig, DropReason::NoRoute), 1);
    // No error about an error, nor about a packet to a broadcast address.
    let mut error_about = out[0][0].clone();
    error_about[..6].copy_from_slice(&ROUTER[0].0);
    error_about[6..12].copy_from_slice(&HOST_MAC.0);
    {
        let mut ip = ipv4::Packet::new_checked(&mut error_about[14..]).unwrap();
        ip.set_src_addr(v4("10.0.0.2"));
        ip.set_dst_addr(v4("100.64.0.2"));
        ip.fill_checksum();
    }
    let out = rig.exchange(0, &[error_about]);
    assert!(out.iter().all(Vec::is_empty));
    assert_eq!(drops(&rig, DropReason::NoRoute), 2);
    assert_eq!(counter(&rig, "icmp.suppressed"), 1);
    finish(rig);
}

#[test]
fn rate_limit_caps_icmp_errors() {
    let mut config = config();
    config.icmp_rate = 1;
    config.icmp_burst = 5;
    let mut rig = rig_with(config);
    let frames: Vec<Vec<u8>> = (0..20).map(|i| udp4("8.8.8.8", 1, i)).collect();
    let out = rig.exchange(0, &frames);
    assert_eq!(out[0].len(), 5);
    assert_eq!(counter(&rig, "icmp.time_exceeded"), 5);
    assert_eq!(counter(&rig, "icmp.rate_limited"), 15);
    assert_eq!(drops(&rig, DropReason::TtlExpired), 20);
    finish(rig);
}

#[test]
fn drops_bad_checksums_martians_and_options_with_reasons() {
    let mut rig = rig();
    let mut bad = udp4("8.8.8.8", 64, 1);
    bad[24] ^= 0x55; // checksum byte
    let martian = FrameBuilder::ipv4_udp()
        .with_l3(L3::Ipv4 {
            src: v4("127.0.0.1"),
            dst: v4("8.8.8.8"),
        })
        .macs(HOST_MAC, ROUTER[0])
        .build();
    let martian6 = FrameBuilder::ipv6_udp()
        .with_l3(L3::Ipv6 {
            src: v6("ff02::1"),
            dst: v6("2001:db8:100::1"),
        })
        .macs(HOST_MAC, ROUTER[0])
        .build();
    let tagged = FrameBuilder::ipv4_udp()
        .vlan(5)
        .macs(HOST_MAC, ROUTER[0])
        .build();
    let options = with_options(&udp4("8.8.8.8", 64, 1));
    let broadcast = FrameBuilder::ipv4_udp()
        .with_l3(L3::Ipv4 {
            src: v4("10.0.0.2"),
            dst: v4("255.255.255.255"),
        })
        .macs(HOST_MAC, EthernetAddress::BROADCAST)
        .build();
    let mut to_group_mac = udp4("8.8.8.8", 64, 1);
    to_group_mac[..6].copy_from_slice(&[0x01, 0, 0x5e, 0, 0, 1]);
    let out = rig.exchange(
        0,
        &[
            bad,
            martian,
            martian6,
            tagged,
            options.clone(),
            broadcast,
            to_group_mac,
        ],
    );
    assert!(
        out.iter().all(Vec::is_empty),
        "no ICMP error for any of them"
    );
    assert_eq!(drops(&rig, DropReason::NoRoute), 2);
    assert_eq!(counter(&rig, "route.not_routable"), 2);
    assert_eq!(drops(&rig, DropReason::BadIpv4Checksum), 1);
    assert_eq!(drops(&rig, DropReason::MartianSource), 2);
    assert_eq!(drops(&rig, DropReason::VlanFiltered), 1);
    assert_eq!(drops(&rig, DropReason::Ipv4Options), 1);
    finish(rig);

    let mut config = config();
    config.ipv4_options = OptionsPolicy::Forward;
    let mut rig = rig_with(config);
    let out = rig.exchange(0, std::slice::from_ref(&options));
    assert_eq!(out[2], [forwarded4(&options, ROUTER[2], G2_MAC)]);
    finish(rig);
}

/// `frame` with four NOP options inserted in its IPv4 header.
fn with_options(frame: &[u8]) -> Vec<u8> {
    let mut out = frame[..34].to_vec();
    out.extend_from_slice(&[1, 1, 1, 1]);
    out.extend_from_slice(&frame[34..]);
    let mut ip = ipv4::Packet::new_unchecked(&mut out[14..]);
    ip.set_header_len(24);
    let total = ip.total_len();
    ip.set_total_len(total + 4);
    ip.fill_checksum();
    out
}

/// An echo request from the host on port 0 to `dst`, to be finished by the caller.
fn echo_request(dst: &str) -> FrameBuilder {
    from_host(dst).with_l4(L4::Echo {
        ident: 7,
        seq_no: 1,
    })
}

#[test]
fn answers_pings_to_its_address_and_consumes_other_local_traffic() {
    let mut rig = rig();
    let ping = echo_request("10.2.0.1").ttl(1).payload_len(12).build();
    let out = rig.exchange(0, std::slice::from_ref(&ping));
    assert_eq!(out[0].len(), 1);
    let reply = &out[0][0];
    assert_eq!(&reply[..6], &HOST_MAC.0);
    assert_eq!(&reply[6..12], &ROUTER[0].0);
    let ip = ipv4::Packet::new_checked(&reply[14..]).unwrap();
    assert!(ip.verify_checksum());
    assert_eq!(
        (ip.src_addr(), ip.dst_addr()),
        (v4("10.2.0.1"), v4("10.0.0.2"))
    );
    let icmp = icmpv4::Packet::new_checked(ip.payload()).unwrap();
    assert_eq!(icmp.msg_type(), icmpv4::Message::EchoReply);
    assert!(icmp.verify_checksum());
    assert_eq!(icmp.data(), &ping[14 + 28..]);
    let ping6 = FrameBuilder::ipv6_udp()
        .with_l3(L3::Ipv6 {
            src: v6("2001:db8::2"),
            dst: v6("2001:db8::1"),
        })
        .with_l4(L4::Echo {
            ident: 7,
            seq_no: 2,
        })
        .macs(HOST_MAC, ROUTER[0])
        .build();
    let out = rig.exchange(0, &[ping6, udp4("10.1.0.1", 64, 9)]);
    assert_eq!(out[0].len(), 1);
    let ip = ipv6::Packet::new_checked(&out[0][0][14..]).unwrap();
    let icmp = icmpv6::Packet::new_checked(ip.payload()).unwrap();
    assert_eq!(icmp.msg_type(), icmpv6::Message::EchoReply);
    assert!(icmp.verify_checksum(ip.src_addr(), ip.dst_addr()));
    assert_eq!(counter(&rig, "local.echo_replies"), 2);
    assert_eq!(counter(&rig, "local.unhandled"), 1);
    finish(rig);
}

#[test]
fn malformed_arp_and_ndp_are_counted() {
    let mut rig = rig();
    let asker = mac(0xd0);
    let mut short = arp_request(asker, v4("10.0.0.7"), v4("10.0.0.1"));
    short.truncate(30);
    let mut bad_op = arp_request(asker, v4("10.0.0.7"), v4("10.0.0.1"));
    bad_op[21] = 9;
    let mut group_sender = arp_request(asker, v4("10.0.0.7"), v4("10.0.0.1"));
    group_sender[22] = 0x01;
    let solicit = |hop_limit: u8| Nd {
        eth_src: asker,
        eth_dst: EthernetAddress([0x33, 0x33, 0xff, 0, 0, 1]),
        src: v6("2001:db8::7"),
        dst: v6("ff02::1:ff00:1"),
        kind: icmpv6::Message::NeighborSolicit,
        flags: 0,
        target: v6("2001:db8::1"),
        option: Some((1, asker)),
        hop_limit,
    };
    let wrong_hop_limit = nd_frame(&solicit(64));
    let mut bad_checksum = nd_frame(&solicit(255));
    bad_checksum[60] ^= 1;
    let mut zero_option = nd_frame(&solicit(255));
    zero_option[14 + 40 + 25] = 0;
    let out = rig.exchange(
        0,
        &[
            short,
            bad_op,
            group_sender,
            wrong_hop_limit,
            bad_checksum,
            zero_option,
        ],
    );
    assert!(out.iter().all(Vec::is_empty), "{out:?}");
    assert_eq!(
        drops(&rig, DropReason::Truncated),
        1,
        "the short one, by the parser"
    );
    assert_eq!(counter(&rig, "arp.malformed"), 2);
    assert_eq!(counter(&rig, "nd.malformed"), 3);
    assert_eq!(
        counter(&rig, "arp.replied") + counter(&rig, "nd.replied"),
        0
    );
    finish(rig);
}

/// Valid ARP and NDP frames the router reacts to.
fn discovery_seeds() -> Vec<Vec<u8>> {
    let asker = mac(0xd0);
    vec![
        arp_request(asker, v4("10.0.0.7"), v4("10.0.0.1")),
        arp_frame(
            arp::Operation::Reply,
            ROUTER[0],
            (asker, v4("10.0.0.9")),
            (ROUTER[0], v4("10.0.0.1")),
        ),
        nd_frame(&Nd {
            eth_src: asker,
            eth_dst: EthernetAddress([0x33, 0x33, 0xff, 0, 0, 1]),
            src: v6("2001:db8::7"),
            dst: v6("ff02::1:ff00:1"),
            kind: icmpv6::Message::NeighborSolicit,
            flags: 0,
            target: v6("2001:db8::1"),
            option: Some((1, asker)),
            hop_limit: 255,
        }),
        nd_frame(&Nd {
            eth_src: asker,
            eth_dst: ROUTER[0],
            src: v6("2001:db8::9"),
            dst: v6("2001:db8::1"),
            kind: icmpv6::Message::NeighborAdvert,
            flags: 0x6000_0000,
            target: v6("2001:db8::9"),
            option: Some((2, asker)),
            hop_limit: 255,
        }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Mutated ARP/NDP frames (bytes flipped, frames cut or extended) never panic the router,
    /// anything it sends is ARP, IPv6, or IPv4 with a valid header checksum, and every frame of
    /// the pool comes back.
    #[test]
    fn mutated_discovery_frames_never_panic(
        mutations in proptest::collection::vec(
            (0usize..4, proptest::collection::vec((0usize..96, any::<u8>()), 1..6), 0usize..100),
            1..16,
        )
    ) {
        let seeds = discovery_seeds();
        let frames: Vec<Vec<u8>> = mutations
            .iter()
            .map(|(seed, flips, len)| {
                let mut frame = seeds[*seed].clone();
                for &(at, value) in flips {
                    if let Some(byte) = frame.get_mut(at) {
                        *byte = value;
                    }
                }
                frame.resize(*len.max(&1), 0);
                frame
            })
            .collect();
        let mut rig = rig();
        let out = rig.exchange(0, &frames);
        for frame in out.iter().flatten() {
            let eth = ethernet::Packet::new_checked(&frame[..]).unwrap();
            match eth.ethertype() {
                EtherType::Arp | EtherType::Ipv6 => {}
                // A mutation that made the frame IPv4 may be routed: then its header is valid.
                EtherType::Ipv4 => {
                    let ip = ipv4::Packet::new_checked(eth.payload()).unwrap();
                    prop_assert!(ip.verify_checksum());
                }
                other => prop_assert!(false, "router sent {:?}", other),
            }
        }
        let conservation = rig.finish();
        prop_assert!(conservation.holds(), "{:?}", conservation);
    }
}

#[test]
fn unanswered_and_aged_neighbours_are_forgotten_and_their_packets_freed() {
    let mut config = config();
    config.neighbour_capacity = 16;
    config.resolve_retry = std::time::Duration::from_micros(1);
    config.resolve_attempts = 1;
    config.neighbour_aging = std::time::Duration::from_micros(1);
    let mut rig = rig_with(config);
    let out = rig.exchange(0, &[udp4("203.0.113.5", 64, 1)]);
    assert_eq!(out[1].len(), 1, "the ARP request");
    let asker = arp_request(mac(0xd0), v4("10.0.0.7"), v4("10.0.0.1"));
    let out = rig.exchange(0, &[asker]);
    assert_eq!(out[0].len(), 1, "the ARP reply; 10.0.0.7 learned");
    std::thread::sleep(std::time::Duration::from_millis(2));
    // Each batch sweeps a few slots; a handful of batches visit all 16.
    for _ in 0..4 {
        rig.exchange(0, &[udp4("0.0.0.1", 64, 1)]);
    }
    assert_eq!(counter(&rig, "neighbour.hold_expired"), 1);
    assert_eq!(counter(&rig, "neighbour.waiting"), 0);
    assert_eq!(
        counter(&rig, "neighbour.aged"),
        2,
        "the unanswered and the learned"
    );
    assert_eq!(
        counter(&rig, "neighbour.entries"),
        6,
        "the static ones stay"
    );
    // The next packet starts over.
    let out = rig.exchange(0, &[udp4("203.0.113.5", 64, 1)]);
    assert_eq!(out[1].len(), 1, "a new ARP request");
    finish(rig);
}

#[test]
fn routes_change_between_batches_and_bad_ones_are_refused() {
    use wirespeed_dataplane::app::router::RouterError;
    use wirespeed_dataplane::stage::route::Hop;
    use wirespeed_dataplane::table::neighbour::NeighbourKey;

    let mut router = Router::new(config()).unwrap();
    let hop = |router: &Router, addr: &str| {
        let next_hop = router.routes().fib_v4().lookup(v4(addr).to_bits())?;
        router.routes().hop(next_hop.id())
    };
    let g1 = Hop::Gateway(NeighbourKey::v4(v4("10.1.0.2"), 1));
    let g2 = Hop::Gateway(NeighbourKey::v4(v4("10.2.0.2"), 2));
    assert_eq!(hop(&router, "100.64.1.1"), Some(g2), "default");
    assert_eq!(hop(&router, "10.0.0.1"), Some(Hop::Local));
    assert_eq!(hop(&router, "10.0.0.9"), Some(Hop::Connected(0)));
    router
        .add_route(&route("100.64.0.0", 10, &["10.1.0.2"]))
        .unwrap();
    assert_eq!(hop(&router, "100.64.1.1"), Some(g1));
    assert!(router.remove_route(Prefix::new("100.64.0.0".parse().unwrap(), 10).unwrap()));
    assert_eq!(hop(&router, "100.64.1.1"), Some(g2));
    assert!(!router.remove_route(Prefix::new("100.64.0.0".parse().unwrap(), 10).unwrap()));

    assert!(matches!(
        router.add_route(&route("100.64.0.0", 10, &["172.16.0.1"])),
        Err(RouterError::GatewayUnreachable { .. })
    ));
    assert!(matches!(
        router.add_route(&route("100.64.0.0", 10, &["2001:db8:1::2"])),
        Err(RouterError::FamilyMismatch { .. })
    ));
    assert!(matches!(
        router.add_route(&route("100.64.0.0", 10, &[])),
        Err(RouterError::NoGateway { .. })
    ));
    let mut on_missing_port = route("100.64.0.0", 10, &["10.1.0.2"]);
    on_missing_port.via[0].port = Some(7);
    assert_eq!(
        router.add_route(&on_missing_port),
        Err(RouterError::UnknownPort { port: 7 })
    );
    assert_eq!(
        hop(&router, "100.64.1.1"),
        Some(g2),
        "unchanged by the failures"
    );
    let message = RouterError::GatewayUnreachable {
        prefix: "100.64.0.0/10".into(),
        gateway: "172.16.0.1".parse().unwrap(),
    }
    .to_string();
    assert!(message.contains("give its port"), "{message}");
}

/// What every port put out after each exchange through a router built from `config()`,
/// traced (every stage's pass over every batch) or not (passes no packet needs are skipped).
fn outputs_of(traced: bool, exchanges: &[(usize, Vec<Vec<u8>>)]) -> Vec<Vec<Vec<Vec<u8>>>> {
    let mut router = Router::new(config()).unwrap();
    if traced {
        router.set_trace(64);
    }
    let mut rig = Rig::new(Box::new(router), 3, 32);
    let out = exchanges
        .iter()
        .map(|(port, frames)| rig.exchange(*port, frames))
        .collect();
    finish(rig);
    out
}

#[test]
fn skipped_passes_change_nothing_in_batches_mixing_forwarded_packets_and_exceptions() {
    let plain = |n: u16| udp4("192.0.2.5", 64, n);
    let mut bad_checksum = udp4("192.0.2.6", 64, 9);
    bad_checksum[14 + 10] ^= 0x5a;
    let ping = echo_request("10.0.0.1").payload_len(18).build();
    let arp = arp_request(HOST_MAC, v4("10.0.0.2"), v4("10.0.0.1"));
    let mixed = vec![
        plain(1),
        udp4("192.0.2.7", 1, 2),
        plain(3),
        bad_checksum,
        with_options(&plain(4)),
        plain(5),
        udp4("203.0.113.5", 64, 6),
        arp.clone(),
        plain(7),
        ping.clone(),
        udp6("2001:db8:100::5", 64),
        udp6("2001:db8:100::6", 1),
        plain(8),
        udp4("255.255.255.255", 64, 10),
    ];
    let forwarded: Vec<Vec<u8>> = (1..=4).map(plain).collect();
    let exchanges = vec![
        (0, forwarded.clone()),
        (0, mixed),
        (0, forwarded.clone()),
        (0, vec![plain(1), arp, plain(2)]),
        (0, vec![plain(1), ping, plain(2)]),
        (0, vec![plain(1), udp4("192.0.2.9", 1, 2), plain(2)]),
    ];
    let skipping = outputs_of(false, &exchanges);
    assert_eq!(skipping, outputs_of(true, &exchanges));
    // And the forwarded ones are right, in order, with exceptions among them or not.
    let expected: Vec<Vec<u8>> = forwarded
        .iter()
        .map(|f| forwarded4(f, ROUTER[1], G1_MAC))
        .collect();
    assert_eq!(skipping[0][1], expected);
    assert_eq!(skipping[2][1], expected);
    let among: Vec<Vec<u8>> = [1, 3, 5, 7, 8]
        .map(|n| forwarded4(&plain(n), ROUTER[1], G1_MAC))
        .to_vec();
    let is_arp = |frame: &&Vec<u8>| frame[12..14] == [0x08, 0x06];
    let (requests, routed): (Vec<&Vec<u8>>, Vec<&Vec<u8>>) =
        skipping[1][1].iter().partition(is_arp);
    assert_eq!(routed, among.iter().collect::<Vec<_>>());
    // Every exception did what it does: the ARP request for 10.1.0.9 on port 1; back on port 0
    // the ARP reply, the echo reply, and time-exceeded for the IPv4 and the IPv6 packet (the
    // bad checksum, the options and the broadcast destination are dropped silently); the IPv6
    // packet to G2 on port 2.
    assert_eq!(requests.len(), 1);
    assert_eq!(skipping[1][0].len(), 4);
    assert_eq!(skipping[1][0].iter().filter(is_arp).count(), 1);
    assert_eq!(
        skipping[1][2],
        [forwarded6(&udp6("2001:db8:100::5", 64), ROUTER[2], G2_MAC)]
    );
}

/// What a router put out, port by port after each exchange, and what it counted.
#[derive(Debug, PartialEq)]
struct Observed {
    outputs: Vec<Vec<Vec<Vec<u8>>>>,
    drops: Vec<u64>,
    /// The app's counters but the fast path's own.
    counters: Vec<(&'static str, u64)>,
}

/// What the fused loop counted: packets forwarded (all, IPv6), batches declined.
#[derive(Debug, Clone, Copy)]
struct Fast {
    forwarded: u64,
    forwarded_ipv6: u64,
    declined: u64,
}

/// Runs `exchanges` through a router built from `config` with the fused forwarding loop on or
/// off; returns what it did and what the loop counted.
fn observe(
    config: RouterConfig,
    fast_path: bool,
    exchanges: &[(usize, Vec<Vec<u8>>)],
) -> (Observed, Fast) {
    let mut router = Router::new(config).unwrap();
    router.set_fast_path(fast_path);
    let mut rig = Rig::new(Box::new(router), 3, 32);
    let outputs = exchanges
        .iter()
        .map(|(port, frames)| rig.exchange(*port, frames))
        .collect();
    let (fast, counters): (Vec<_>, Vec<_>) = rig
        .app_counters()
        .into_iter()
        .partition(|(name, _)| name.starts_with("fast_path."));
    let fast = |name: &str| fast.iter().find(|(n, _)| *n == name).map_or(0, |c| c.1);
    let loop_counts = Fast {
        forwarded: fast("fast_path.forwarded"),
        forwarded_ipv6: fast("fast_path.forwarded_ipv6"),
        declined: fast("fast_path.declined"),
    };
    let observed = Observed {
        outputs,
        drops: rig.worker.counters().drops.to_vec(),
        counters,
    };
    finish(rig);
    (observed, loop_counts)
}

/// `config()` without the default routes, so that a destination can have no route, and with
/// an IPv6 prefix over two gateways (ECMP).
fn config_without_default() -> RouterConfig {
    let mut config = config();
    let defaults = [
        Prefix::new("0.0.0.0".parse().unwrap(), 0).unwrap(),
        Prefix::new("::".parse().unwrap(), 0).unwrap(),
    ];
    config.routes.retain(|r| !defaults.contains(&r.prefix));
    config.routes.push(route(
        "2001:db8:300::",
        48,
        &["2001:db8:1::2", "2001:db8:2::2"],
    ));
    config
}

/// A UDP frame from the host on port 0 to `dst` with the source address `src`.
fn udp6_from(src: &str, dst: &str, hop_limit: u8, n: u8) -> Vec<u8> {
    FrameBuilder::ipv6_udp()
        .with_l3(L3::Ipv6 {
            src: v6(src),
            dst: v6(dst),
        })
        .with_l4(L4::Udp {
            src_port: 1000 + u16::from(n),
            dst_port: 53,
        })
        .macs(HOST_MAC, ROUTER[0])
        .ttl(hop_limit)
        .payload_len(10)
        .build()
}

/// A TCP frame from the host on port 0 to `dst`.
fn tcp6(dst: &str, hop_limit: u8) -> Vec<u8> {
    FrameBuilder::ipv6_udp()
        .with_l3(L3::Ipv6 {
            src: v6("2001:db8::2"),
            dst: v6(dst),
        })
        .with_l4(L4::Tcp {
            src_port: 4000,
            dst_port: 80,
        })
        .macs(HOST_MAC, ROUTER[0])
        .ttl(hop_limit)
        .build()
}

/// A TCP frame from the host on port 0 to `dst`.
fn tcp4(dst: &str, ttl: u8) -> Vec<u8> {
    from_host(dst)
        .with_l4(L4::Tcp {
            src_port: 4000,
            dst_port: 80,
        })
        .ttl(ttl)
        .build()
}

/// One frame of a kind the fused loop forwards (`kind` 0, 1, 23 and 24: [`FAST_KINDS`]) or
/// must leave to the stages (every other kind), `n` varying it.
fn frame_of_kind(kind: u8, n: u8) -> Vec<u8> {
    let plain = || udp4(&format!("192.0.2.{}", n % 128), 64, u16::from(n));
    let to = |dst: &str| udp4(dst, 64, u16::from(n));
    match kind {
        0 => plain(),
        1 => tcp4(&format!("192.0.2.{}", 128 + n % 128), 2 + n % 62),
        2 => udp4("192.0.2.9", 1 - n % 2, 1),
        3 => {
            let mut bad = plain();
            bad[24] ^= n | 1;
            bad
        }
        4 => with_options(&plain()),
        5 => to(&format!("100.64.0.{n}")),
        6 => to(&format!("203.0.113.{n}")),
        7 => arp_request(HOST_MAC, v4("10.0.0.2"), v4("10.0.0.1")),
        8 => echo_request("10.0.0.1").payload_len(18).build(),
        9 => udp6("2001:db8:100::5", 64 - n % 64),
        10 => from_host("192.0.2.5").vlan(u16::from(n) + 1).build(),
        11 => plain()[..usize::from(n % 42)].to_vec(),
        12 => {
            let mut cut = plain();
            cut.truncate(14 + 20 + 4);
            cut
        }
        13 => FrameBuilder::ipv4_udp()
            .with_l3(L3::Ipv4 {
                src: v4("127.0.0.1"),
                dst: v4("192.0.2.5"),
            })
            .macs(HOST_MAC, ROUTER[0])
            .build(),
        14 => to("255.255.255.255"),
        15 => {
            let mut group = plain();
            group[0] = 0x01;
            group
        }
        16 => to(&format!("198.51.100.{n}")),
        17 => to("10.1.0.2"),
        18 => from_host("192.0.2.5")
            .fragment(u16::from(n) * 8, n.is_multiple_of(2))
            .build(),
        19 => echo_request("192.0.2.5").payload_len(18).build(),
        20 => to("10.2.0.1"),
        // An answer from 10.1.0.9 (the unresolved gateway of 203.0.113.0/24), at a MAC that
        // changes with `n`: the neighbour table learns or relearns it.
        21 => arp_frame(
            arp::Operation::Reply,
            ROUTER[1],
            (mac(0xe0 | (n % 4)), v4("10.1.0.9")),
            (ROUTER[1], v4("10.1.0.1")),
        ),
        22 => {
            let mut flipped = plain();
            let at = usize::from(n) % flipped.len();
            flipped[at] ^= 0x80;
            flipped
        }
        // IPv6 through G2 (2001:db8:100::/48 on port 2): UDP and TCP, hop limits 2 to 64.
        23 => udp6_from(
            "2001:db8::2",
            &format!("2001:db8:100::{n:x}"),
            2 + n % 63,
            n,
        ),
        24 => tcp6(&format!("2001:db8:100:{n:x}::1"), 64),
        25 => udp6_from("2001:db8::2", "2001:db8:100::5", n % 2, n),
        // Via the unresolved gateway 2001:db8:1::9: held while NDP resolves it.
        26 => udp6_from("2001:db8::2", &format!("2001:db8:200::{n:x}"), 64, n),
        27 => udp6_from("fe80::2", "2001:db8:100::5", 64, n),
        28 => udp6_from("2001:db8::2", "ff02::1", 64, n),
        29 => {
            let mut group = udp6_from("2001:db8::2", "2001:db8:100::5", 64, n);
            group[..6].copy_from_slice(&[0x33, 0x33, 0, 0, 0, 1]);
            group
        }
        // The router's own address, a connected host nobody resolved, no route, ECMP.
        30 => udp6_from("2001:db8::2", "2001:db8::1", 64, n),
        31 => udp6_from(
            "2001:db8::2",
            &format!("2001:db8:2::{:x}", 0x100 + u16::from(n)),
            64,
            n,
        ),
        32 => udp6_from("2001:db8::2", &format!("2001:db8:999::{n:x}"), 64, n),
        33 => udp6_from("2001:db8::2", &format!("2001:db8:300::{n:x}"), 64, n),
        // A payload length past the frame's end; a header cut short.
        34 => {
            let mut long = udp6_from("2001:db8::2", "2001:db8:100::5", 64, n);
            long[18..20].copy_from_slice(&(100 + u16::from(n)).to_be_bytes());
            long
        }
        35 => {
            udp6_from("2001:db8::2", "2001:db8:100::5", 64, n)[..40 + usize::from(n % 20)].to_vec()
        }
        // Behind a hop-by-hop header: not plain, and discovery may learn from it.
        36 => FrameBuilder::ipv6_udp()
            .with_l3(L3::Ipv6 {
                src: v6("2001:db8::2"),
                dst: v6("2001:db8:100::5"),
            })
            .macs(HOST_MAC, ROUTER[0])
            .extension_headers(1)
            .build(),
        _ => {
            let mut flipped = udp6_from("2001:db8::2", "2001:db8:100::5", 64, n);
            let at = usize::from(n) % flipped.len();
            flipped[at] ^= 0x80;
            flipped
        }
    }
}

/// The kinds of [`frame_of_kind`].
const KINDS: u8 = 38;

/// The kinds the fused loop forwards.
const FAST_KINDS: [u8; 4] = [0, 1, 23, 24];

/// Whether `kind` is a batch-wide exception: a frame discovery may learn from, so that the
/// loop leaves its whole batch to the stages.
fn declines(kind: u8) -> bool {
    matches!(kind, 7 | 21 | 36)
}

#[test]
fn the_fast_path_gives_the_stage_passes_output_byte_for_byte_among_every_exception() {
    let fast = |n: u8| frame_of_kind(n % 2, n);
    // A batch of fast packets with every exception between two of them.
    let exceptions: Vec<u8> = (2..KINDS)
        .filter(|&kind| !declines(kind) && !FAST_KINDS.contains(&kind))
        .collect();
    let mixed: Vec<Vec<u8>> = exceptions[..16]
        .iter()
        .flat_map(|&kind| [fast(kind), frame_of_kind(kind, kind)])
        .collect();
    let mixed_rest: Vec<Vec<u8>> = exceptions[16..]
        .iter()
        .flat_map(|&kind| [fast(kind), frame_of_kind(kind, kind + 1)])
        .collect();
    let fast6 = |n: u8| frame_of_kind(FAST_KINDS[2 + usize::from(n % 2)], n);
    let only_fast6: Vec<Vec<u8>> = (0..32).map(fast6).collect();
    let both: Vec<Vec<u8>> = (0..32)
        .map(|n| frame_of_kind(FAST_KINDS[usize::from(n % 4)], n))
        .collect();
    let only_fast: Vec<Vec<u8>> = (0..32).map(fast).collect();
    let via_g9 = |n: u8| frame_of_kind(6, n);
    // After any change of the neighbour table the first batch for a gateway takes the stages,
    // which rebuild its adjacency; the loop forwards by it from the next batch on.
    let exchanges = vec![
        (0, only_fast.clone()),
        (0, only_fast.clone()),
        (0, mixed),
        (0, mixed_rest),
        // Discovery learns in the middle of a batch: an ARP request for the router; then
        // 10.1.0.9's answer (its waiting packets leave), later a new MAC for it between
        // packets for it.
        (0, vec![fast(1), frame_of_kind(7, 0), fast(2)]),
        (1, vec![frame_of_kind(21, 0)]),
        (0, (0..8).map(via_g9).collect()),
        (0, (0..8).map(via_g9).collect()),
        (
            1,
            vec![via_g9(1), via_g9(2), frame_of_kind(21, 1), via_g9(3)],
        ),
        (0, (0..8).map(via_g9).collect()),
        (0, (0..8).map(via_g9).collect()),
        (0, only_fast.clone()),
        (0, only_fast6.clone()),
        (0, both.clone()),
        // The frame behind a hop-by-hop header declines its batch.
        (0, vec![fast6(1), frame_of_kind(36, 0), fast6(2)]),
    ];
    let (fused, loop_counts) = observe(config_without_default(), true, &exchanges);
    let (stages, none) = observe(config_without_default(), false, &exchanges);
    assert_eq!(none.forwarded, 0, "the loop is off");
    let Fast {
        forwarded,
        forwarded_ipv6,
        declined,
    } = loop_counts;
    assert!(
        forwarded_ipv6 >= 16,
        "the loop forwarded {forwarded_ipv6} IPv6 packets"
    );
    // The IPv4 batches through current adjacencies, and the batch of both families; the first
    // IPv6 batch may build G2's IPv6 adjacency in the stages.
    assert!(
        forwarded >= 32 + 8 + 8 + 8 + 32,
        "the loop forwarded {forwarded}"
    );
    assert_eq!(
        declined, 3,
        "the two batches with an ARP frame, the one with an IPv6 extension header"
    );
    assert_eq!(fused, stages);
    // And what it forwarded is right: MACs, TTL, checksum, port, order.
    let expected = |frames: &[Vec<u8>]| -> [Vec<Vec<u8>>; 2] {
        let to = |port: usize, mac| {
            frames
                .iter()
                .filter(|f| (f[30..34] == [192, 0, 2, f[33]]) && (f[33] >= 128) == (port == 2))
                .map(|f| forwarded4(f, ROUTER[port], mac))
                .collect()
        };
        [to(1, G1_MAC), to(2, G2_MAC)]
    };
    let [g1, g2] = expected(&only_fast);
    assert_eq!(fused.outputs[1][1], g1);
    assert_eq!(fused.outputs[1][2], g2);
    let relearned: Vec<Vec<u8>> = (0..8)
        .map(|n| forwarded4(&via_g9(n), ROUTER[1], mac(0xe1)))
        .collect();
    assert_eq!(fused.outputs[10][1], relearned);
    // IPv6 alone and among IPv4: MACs and hop limit, out of port 2 to G2, in order.
    let via_g2 = |frames: &[Vec<u8>]| -> Vec<Vec<u8>> {
        frames
            .iter()
            .filter(|f| f[12..14] == [0x86, 0xdd])
            .map(|f| forwarded6(f, ROUTER[2], G2_MAC))
            .collect()
    };
    assert_eq!(fused.outputs[12][2], via_g2(&only_fast6));
    let [g1, _] = expected(&both);
    assert_eq!(fused.outputs[13][1], g1);
    let on_port_2: Vec<Vec<u8>> = both
        .iter()
        .filter_map(|f| match [f[12], f[13]] {
            [0x86, 0xdd] => Some(forwarded6(f, ROUTER[2], G2_MAC)),
            _ if f[33] >= 128 => Some(forwarded4(f, ROUTER[2], G2_MAC)),
            _ => None,
        })
        .collect();
    assert_eq!(fused.outputs[13][2], on_port_2);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// Random batches of fast-path packets and exceptions, arriving on random ports, give the
    /// same bytes in the same order and the same counters with the fused loop as without.
    #[test]
    fn random_mixes_give_the_same_output_with_and_without_the_fast_path(
        batches in proptest::collection::vec(
            (0usize..3, proptest::collection::vec((0..KINDS + 8, any::<u8>()), 1..33)),
            1..6,
        )
    ) {
        // Kinds beyond KINDS stand for more fast packets, the common case.
        let exchanges: Vec<(usize, Vec<Vec<u8>>)> = batches
            .iter()
            .map(|(port, frames)| {
                let frames = frames
                    .iter()
                    .map(|&(kind, n)| {
                        let kind = if kind < KINDS { kind } else { FAST_KINDS[usize::from(kind % 4)] };
                        frame_of_kind(kind, n)
                    })
                    .collect();
                (*port, frames)
            })
            .collect();
        let (fused, _) = observe(config_without_default(), true, &exchanges);
        let (stages, _) = observe(config_without_default(), false, &exchanges);
        prop_assert_eq!(fused, stages);
    }
}
