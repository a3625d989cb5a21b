//! The router over memory ports, byte for byte: forwarding (MACs, TTL / hop limit, checksum),
//! longest-prefix match, ECMP, ARP and NDP (answers, resolution, hold queues), ICMP errors and
//! their rate limit, the drop reasons, hostile ARP/NDP frames, and pool conservation after
//! every scenario. The pipeline held to itself (skipped passes, the fused fast path) is in
//! `router_pipeline.rs`; both share `router_common`.
//!
//! Topology: three ports with hosts and gateways behind them.
//!
//! | port | router MAC | router addresses           | neighbours (static)                     |
//! |------|------------|----------------------------|-----------------------------------------|
//! | 0    | 02::a0     | 10.0.0.1/24, 2001:db8::1/64 | host 10.0.0.2 / 2001:db8::2 (02::b0)   |
//! | 1    | 02::a1     | 10.1.0.1/24, 2001:db8:1::1/64 | G1 10.1.0.2 / 2001:db8:1::2 (02::c1) |
//! | 2    | 02::a2     | 10.2.0.1/24, 2001:db8:2::1/64 | G2 10.2.0.2 / 2001:db8:2::2 (02::c2) |

use std::net::IpAddr;

use proptest::prelude::*;
use wirespeed_dataplane::app::router::{OptionsPolicy, Prefix, Router, RouterConfig};
use wirespeed_dataplane::table::fib::FibKind;
use wirespeed_packet::DropReason;
use wirespeed_packet::checksum;
use wirespeed_packet::wire::{
    EtherType, EthernetAddress, IpProtocol, arp, ethernet, icmpv4, icmpv6, ipv4, ipv6,
};
use wirespeed_testkit::frames::{FrameBuilder, L3, L4, arp_request};

mod router_common;
use router_common::*;

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
fn poptrie_forwards_byte_for_byte_as_dir24() {
    // `[router] fib = "trie"`: the same frames out of the same ports, every route kind hit
    // (default, /24, /25 inside it, connected, ECMP, IPv6 /48 and default, TTL expiry).
    let mut frames: Vec<Vec<u8>> = ["8.8.8.8", "192.0.2.5", "192.0.2.200", "10.2.0.2"]
        .iter()
        .map(|dst| udp4(dst, 64, 7))
        .collect();
    frames.extend((0..16).map(|flow| udp4("198.51.100.9", 64, 10_000 + flow)));
    frames.push(udp4("8.8.4.4", 1, 9));
    frames.push(udp6("2001:db8:100::77", 64));
    frames.push(udp6("2001:db8:5555::1", 64));
    let run = |fib| {
        let mut rig = rig_with(RouterConfig { fib, ..config() });
        let out = rig.exchange(0, &frames);
        finish(rig);
        out
    };
    let table = run(FibKind::Dir24);
    assert_eq!(table.iter().map(Vec::len).sum::<usize>(), frames.len());
    assert_eq!(run(FibKind::Trie), table);
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
