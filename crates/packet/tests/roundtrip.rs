//! Property tests: for every protocol, a `Repr` emitted into a buffer parses back to the same
//! `Repr`, through a `new_checked` view. This is what makes the generator's frames and the
//! parser's reading of them agree.

use std::net::{Ipv4Addr, Ipv6Addr};

use proptest::prelude::*;
use wirespeed_packet::wire::{
    EtherType, EthernetAddress, IpProtocol, arp, ethernet, icmpv4, icmpv6, ipv4, ipv6, tcp, udp,
    vlan,
};

fn ethertype() -> impl Strategy<Value = EtherType> {
    any::<u16>().prop_map(EtherType::from)
}

fn protocol() -> impl Strategy<Value = IpProtocol> {
    any::<u8>().prop_map(IpProtocol::from)
}

proptest! {
    #[test]
    fn ethernet_round_trips(src in any::<[u8; 6]>(), dst in any::<[u8; 6]>(), ethertype in ethertype()) {
        let repr = ethernet::Repr { src_addr: EthernetAddress(src), dst_addr: EthernetAddress(dst), ethertype };
        let mut bytes = vec![0u8; repr.buffer_len()];
        repr.emit(&mut ethernet::Packet::new_unchecked(&mut bytes[..]));
        let packet = ethernet::Packet::new_checked(&bytes[..]).unwrap();
        prop_assert_eq!(ethernet::Repr::parse(&packet).unwrap(), repr);
    }

    #[test]
    fn vlan_round_trips(pcp in 0u8..8, dei in any::<bool>(), vid in 0u16..4096, ethertype in ethertype()) {
        let repr = vlan::Repr { pcp, dei, vid, ethertype };
        let mut bytes = vec![0u8; repr.buffer_len()];
        repr.emit(&mut vlan::Packet::new_unchecked(&mut bytes[..]));
        let packet = vlan::Packet::new_checked(&bytes[..]).unwrap();
        prop_assert_eq!(vlan::Repr::parse(&packet).unwrap(), repr);
    }

    #[test]
    fn arp_round_trips(op in any::<u16>(), sha in any::<[u8; 6]>(), spa in any::<u32>(), tha in any::<[u8; 6]>(), tpa in any::<u32>()) {
        let repr = arp::Repr {
            operation: arp::Operation::from(op),
            source_hardware_addr: EthernetAddress(sha),
            source_protocol_addr: Ipv4Addr::from(spa),
            target_hardware_addr: EthernetAddress(tha),
            target_protocol_addr: Ipv4Addr::from(tpa),
        };
        let mut bytes = vec![0u8; repr.buffer_len()];
        repr.emit(&mut arp::Packet::new_unchecked(&mut bytes[..]));
        let packet = arp::Packet::new_checked(&bytes[..]).unwrap();
        prop_assert_eq!(arp::Repr::parse(&packet).unwrap(), repr);
    }

    #[test]
    fn ipv4_round_trips(
        src in any::<u32>(), dst in any::<u32>(), protocol in protocol(), payload_len in 0u16..1500,
        ttl in any::<u8>(), dscp in 0u8..64, ecn in 0u8..4, ident in any::<u16>(),
        dont_frag in any::<bool>(), more_frags in any::<bool>(), frag_units in 0u16..0x2000,
    ) {
        let repr = ipv4::Repr {
            src_addr: Ipv4Addr::from(src), dst_addr: Ipv4Addr::from(dst), protocol, payload_len,
            ttl, dscp, ecn, ident, dont_frag, more_frags, frag_offset: frag_units * 8,
        };
        let mut bytes = vec![0u8; repr.buffer_len() + usize::from(payload_len)];
        repr.emit(&mut ipv4::Packet::new_unchecked(&mut bytes[..]));
        let packet = ipv4::Packet::new_checked(&bytes[..]).unwrap();
        prop_assert!(packet.verify_checksum());
        prop_assert_eq!(ipv4::Repr::parse(&packet).unwrap(), repr);
    }

    #[test]
    fn ipv6_round_trips(
        src in any::<u128>(), dst in any::<u128>(), next_header in protocol(), payload_len in 0u16..1500,
        hop_limit in any::<u8>(), traffic_class in any::<u8>(), flow_label in 0u32..0x10_0000,
    ) {
        let repr = ipv6::Repr {
            src_addr: Ipv6Addr::from(src), dst_addr: Ipv6Addr::from(dst), next_header, payload_len,
            hop_limit, traffic_class, flow_label,
        };
        let mut bytes = vec![0u8; repr.buffer_len() + usize::from(payload_len)];
        repr.emit(&mut ipv6::Packet::new_unchecked(&mut bytes[..]));
        let packet = ipv6::Packet::new_checked(&bytes[..]).unwrap();
        prop_assert_eq!(ipv6::Repr::parse(&packet).unwrap(), repr);
    }

    #[test]
    fn ipv6_extension_headers_round_trip(
        next_header in protocol(), units in 1usize..=32, frag_units in 0u16..0x2000,
        more_frags in any::<bool>(), ident in any::<u32>(),
    ) {
        let options = ipv6::OptionsRepr { next_header, header_len: units * 8 };
        let mut bytes = vec![0u8; options.buffer_len()];
        options.emit(&mut ipv6::ExtHeader::new_unchecked(&mut bytes[..]));
        let header = ipv6::ExtHeader::new_checked(&bytes[..]).unwrap();
        prop_assert_eq!(ipv6::OptionsRepr::parse(&header).unwrap(), options);

        let fragment = ipv6::FragmentRepr { next_header, frag_offset: frag_units * 8, more_frags, ident };
        let mut bytes = vec![0u8; fragment.buffer_len()];
        fragment.emit(&mut ipv6::FragmentHeader::new_unchecked(&mut bytes[..]));
        let header = ipv6::FragmentHeader::new_checked(&bytes[..]).unwrap();
        prop_assert_eq!(ipv6::FragmentRepr::parse(&header).unwrap(), fragment);
    }

    #[test]
    fn udp_round_trips_with_valid_checksums(
        src_port in any::<u16>(), dst_port in any::<u16>(), payload in proptest::collection::vec(any::<u8>(), 0..300),
        v4 in any::<(u32, u32)>(), v6 in any::<(u128, u128)>(),
    ) {
        let repr = udp::Repr { src_port, dst_port, payload_len: payload.len() as u16 };
        let mut bytes = vec![0u8; repr.buffer_len() + payload.len()];
        let mut packet = udp::Packet::new_unchecked(&mut bytes[..]);
        repr.emit(&mut packet);
        packet.payload_mut().copy_from_slice(&payload);
        let (s4, d4) = (Ipv4Addr::from(v4.0), Ipv4Addr::from(v4.1));
        packet.fill_checksum_v4(s4, d4);
        let packet = udp::Packet::new_checked(&bytes[..]).unwrap();
        prop_assert!(packet.verify_checksum_v4(s4, d4));
        prop_assert_eq!(udp::Repr::parse(&packet).unwrap(), repr);
        prop_assert_eq!(packet.payload(), &payload[..]);

        let (s6, d6) = (Ipv6Addr::from(v6.0), Ipv6Addr::from(v6.1));
        let mut packet = udp::Packet::new_checked(&mut bytes[..]).unwrap();
        packet.fill_checksum_v6(s6, d6);
        prop_assert!(packet.verify_checksum_v6(s6, d6));
    }

    #[test]
    fn tcp_round_trips_with_valid_checksums(
        src_port in any::<u16>(), dst_port in any::<u16>(), seq_number in any::<u32>(), ack_number in any::<u32>(),
        flags in 0u16..0x200, window_len in any::<u16>(), urgent_at in any::<u16>(),
        max_seg_size in any::<Option<u16>>(), window_scale in any::<Option<u8>>(), sack_permitted in any::<bool>(),
        payload in proptest::collection::vec(any::<u8>(), 0..100), addrs in any::<(u32, u32)>(),
    ) {
        let repr = tcp::Repr {
            src_port, dst_port, seq_number, ack_number, flags, window_len, urgent_at,
            max_seg_size, window_scale, sack_permitted,
        };
        let header_len = repr.buffer_len();
        let mut bytes = vec![0u8; header_len + payload.len()];
        let mut packet = tcp::Packet::new_unchecked(&mut bytes[..]);
        repr.emit(&mut packet);
        packet.payload_mut().copy_from_slice(&payload);
        let (src, dst) = (Ipv4Addr::from(addrs.0), Ipv4Addr::from(addrs.1));
        packet.fill_checksum_v4(src, dst);
        let packet = tcp::Packet::new_checked(&bytes[..]).unwrap();
        prop_assert_eq!(usize::from(packet.header_len()), header_len);
        prop_assert!(packet.verify_checksum_v4(src, dst));
        prop_assert_eq!(tcp::Repr::parse(&packet).unwrap(), repr);
    }

    #[test]
    fn icmp_round_trips_with_valid_checksums(
        message in any::<u8>(), code in any::<u8>(), rest in any::<u32>(),
        data in proptest::collection::vec(any::<u8>(), 0..100), addrs in any::<(u128, u128)>(),
    ) {
        let repr = icmpv4::Repr { message: icmpv4::Message::from(message), code, rest_of_header: rest };
        let mut bytes = vec![0u8; repr.buffer_len() + data.len()];
        let mut packet = icmpv4::Packet::new_unchecked(&mut bytes[..]);
        repr.emit(&mut packet);
        packet.data_mut().copy_from_slice(&data);
        packet.fill_checksum();
        let packet = icmpv4::Packet::new_checked(&bytes[..]).unwrap();
        prop_assert!(packet.verify_checksum());
        prop_assert_eq!(icmpv4::Repr::parse(&packet).unwrap(), repr);

        let repr = icmpv6::Repr { message: icmpv6::Message::from(message), code, rest_of_header: rest };
        let (src, dst) = (Ipv6Addr::from(addrs.0), Ipv6Addr::from(addrs.1));
        let mut packet = icmpv6::Packet::new_unchecked(&mut bytes[..]);
        repr.emit(&mut packet);
        packet.fill_checksum(src, dst);
        let packet = icmpv6::Packet::new_checked(&bytes[..]).unwrap();
        prop_assert!(packet.verify_checksum(src, dst));
        prop_assert_eq!(icmpv6::Repr::parse(&packet).unwrap(), repr);
    }
}
