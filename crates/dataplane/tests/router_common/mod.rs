//! What the router's test files share: the three-port topology (see `router.rs`), its
//! configuration, a rig around it, and frames from and to its hosts and gateways.
#![allow(dead_code)] // each test file uses its own part of this module

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use wirespeed_dataplane::app::router::{
    Gateway, Interface, Prefix, Router, RouterConfig, StaticNeighbour, StaticRoute,
};
use wirespeed_packet::DropReason;
use wirespeed_packet::checksum;
use wirespeed_packet::wire::{
    EtherType, EthernetAddress, IpProtocol, arp, ethernet, icmpv4, icmpv6, ipv4, ipv6,
};
use wirespeed_testkit::frames::{FrameBuilder, L3, L4};
use wirespeed_testkit::rig::Rig;

pub const fn mac(last: u8) -> EthernetAddress {
    EthernetAddress([0x02, 0, 0, 0, 0, last])
}

pub const ROUTER: [EthernetAddress; 3] = [mac(0xa0), mac(0xa1), mac(0xa2)];
pub const HOST_MAC: EthernetAddress = mac(0xb0);
pub const G1_MAC: EthernetAddress = mac(0xc1);
pub const G2_MAC: EthernetAddress = mac(0xc2);

pub fn v4(s: &str) -> Ipv4Addr {
    s.parse().unwrap()
}

pub fn v6(s: &str) -> Ipv6Addr {
    s.parse().unwrap()
}

pub fn route(prefix: &str, len: u8, via: &[&str]) -> StaticRoute {
    StaticRoute {
        prefix: Prefix::new(prefix.parse().unwrap(), len).unwrap(),
        via: via
            .iter()
            .map(|g| Gateway::new(g.parse::<IpAddr>().unwrap()))
            .collect(),
    }
}

pub fn config() -> RouterConfig {
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

pub fn rig_with(config: RouterConfig) -> Rig {
    Rig::new(Box::new(Router::new(config).unwrap()), 3, 32)
}

pub fn rig() -> Rig {
    rig_with(config())
}

pub fn finish(rig: Rig) {
    let conservation = rig.finish();
    assert!(conservation.holds(), "{conservation:?}");
}

pub fn drops(rig: &Rig, reason: DropReason) -> u64 {
    rig.worker.counters().drops[reason as usize]
}

pub fn counter(rig: &Rig, name: &str) -> u64 {
    rig.app_counters()
        .into_iter()
        .find(|(n, _)| *n == name)
        .unwrap_or_else(|| panic!("no counter {name}"))
        .1
}

/// An IPv4 frame from the host on port 0 to `dst`, to be finished by the caller.
pub fn from_host(dst: &str) -> FrameBuilder {
    FrameBuilder::ipv4_udp()
        .with_l3(L3::Ipv4 {
            src: v4("10.0.0.2"),
            dst: v4(dst),
        })
        .macs(HOST_MAC, ROUTER[0])
}

/// A UDP frame from the host on port 0 to `dst`.
pub fn udp4(dst: &str, ttl: u8, src_port: u16) -> Vec<u8> {
    from_host(dst)
        .with_l4(L4::Udp {
            src_port,
            dst_port: 53,
        })
        .ttl(ttl)
        .payload_len(18)
        .build()
}

pub fn udp6(dst: &str, hop_limit: u8) -> Vec<u8> {
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
pub fn forwarded4(frame: &[u8], out_mac: EthernetAddress, next_mac: EthernetAddress) -> Vec<u8> {
    let mut expected = frame.to_vec();
    expected[..6].copy_from_slice(&next_mac.0);
    expected[6..12].copy_from_slice(&out_mac.0);
    let mut ip = ipv4::Packet::new_checked(&mut expected[14..]).unwrap();
    let ttl = ip.ttl();
    ip.set_ttl(ttl - 1);
    ip.fill_checksum();
    expected
}

pub fn forwarded6(frame: &[u8], out_mac: EthernetAddress, next_mac: EthernetAddress) -> Vec<u8> {
    let mut expected = frame.to_vec();
    expected[..6].copy_from_slice(&next_mac.0);
    expected[6..12].copy_from_slice(&out_mac.0);
    expected[14 + 7] -= 1;
    expected
}

/// An ARP frame, padded to 60 bytes.
pub fn arp_frame(
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
pub struct Nd {
    pub eth_src: EthernetAddress,
    pub eth_dst: EthernetAddress,
    pub src: Ipv6Addr,
    pub dst: Ipv6Addr,
    pub kind: icmpv6::Message,
    pub flags: u32,
    pub target: Ipv6Addr,
    /// (option type, MAC)
    pub option: Option<(u8, EthernetAddress)>,
    pub hop_limit: u8,
}

pub fn nd_frame(nd: &Nd) -> Vec<u8> {
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
/// Checks an ICMPv4 error: addressed back to the host, quoting `original`'s IP header and
/// first 8 payload bytes, both checksums right by full recomputation.
pub fn assert_icmp4_error(error: &[u8], original: &[u8], kind: u8, code: u8) {
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
/// `frame` with four NOP options inserted in its IPv4 header.
pub fn with_options(frame: &[u8]) -> Vec<u8> {
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
pub fn echo_request(dst: &str) -> FrameBuilder {
    from_host(dst).with_l4(L4::Echo {
        ident: 7,
        seq_no: 1,
    })
}
