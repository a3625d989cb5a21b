//! Fuzz target for everything that reads wire bytes: the hot-path parser and every
//! `new_checked` view. The property is the one the data plane depends on: no input panics,
//! and whatever a checked view accepts, its accessors can read without panicking. And the
//! router's fused loop, which skips the parser, takes a frame only where the parser takes it
//! as plain IPv4 or IPv6 transport.
#![no_main]

use libfuzzer_sys::fuzz_target;
use wirespeed_packet::parse::{plain_ipv4_transport, plain_ipv6_transport};
use wirespeed_packet::wire::{
    IpProtocol, arp, ethernet, icmpv4, icmpv6, ipv4, ipv6, tcp, udp, vlan,
};
use wirespeed_packet::{FlowKey, Meta, parse};

fuzz_target!(|data: &[u8]| {
    let mut meta = Meta::EMPTY;
    let mut key = FlowKey::EMPTY;
    let parsed = parse(data, 1, &mut meta, &mut key).is_ok();
    if parsed {
        assert_eq!(meta.flow_hash, key.hash());
        assert!(usize::from(meta.payload_offset) <= data.len());
    }
    let plain = parsed && meta.vlan_depth == 0 && (meta.ip_proto == 6 || meta.ip_proto == 17);
    if plain_ipv4_transport(data).is_some() {
        assert!(plain && meta.flags & Meta::FLAG_IPV4 != 0 && meta.l4_offset == 34);
    }
    if plain_ipv6_transport(data).is_some() {
        assert!(plain && meta.flags & Meta::FLAG_IPV6 != 0 && meta.l4_offset == 54);
    }

    if let Ok(p) = ethernet::Packet::new_checked(data) {
        let _ = ethernet::Repr::parse(&p);
        let _ = (p.dst_addr().is_multicast(), p.payload().len());
    }
    if let Ok(p) = vlan::Packet::new_checked(data) {
        let _ = vlan::Repr::parse(&p);
        let _ = p.payload().len();
    }
    if let Ok(p) = arp::Packet::new_checked(data) {
        let _ = arp::Repr::parse(&p);
        let _ = (p.source_protocol_addr(), p.target_hardware_addr());
    }
    if let Ok(p) = ipv4::Packet::new_checked(data) {
        let _ = ipv4::Repr::parse(&p);
        let _ = (p.options().len(), p.payload().len(), p.verify_checksum());
    }
    if let Ok(p) = ipv6::Packet::new_checked(data) {
        let _ = ipv6::Repr::parse(&p);
        let _ = ipv6::walk_extension_headers(p.payload(), p.next_header());
    }
    if let Some((&first, rest)) = data.split_first() {
        let _ = ipv6::walk_extension_headers(rest, IpProtocol::from(first));
    }
    if let Ok(h) = ipv6::ExtHeader::new_checked(data) {
        let _ = (ipv6::OptionsRepr::parse(&h), h.data().len());
    }
    if let Ok(h) = ipv6::FragmentHeader::new_checked(data) {
        let _ = ipv6::FragmentRepr::parse(&h);
    }
    if let Ok(p) = udp::Packet::new_checked(data) {
        let _ = udp::Repr::parse(&p);
        let _ = p.payload().len();
        let _ = p.verify_checksum_v4([1, 2, 3, 4].into(), [5, 6, 7, 8].into());
    }
    if let Ok(p) = tcp::Packet::new_checked(data) {
        let _ = tcp::Repr::parse(&p);
        let _ = p.option_iter().count();
        let _ = p.payload().len();
    }
    if let Ok(p) = icmpv4::Packet::new_checked(data) {
        let _ = (icmpv4::Repr::parse(&p), p.verify_checksum(), p.data().len());
    }
    if let Ok(p) = icmpv6::Packet::new_checked(data) {
        let _ = (icmpv6::Repr::parse(&p), p.data().len());
    }
});
