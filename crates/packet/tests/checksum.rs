//! Property tests of the arithmetic the data plane relies on: RFC 1624 incremental checksum
//! updates agree with recomputing the checksum, and the hardware and software CRC32C agree.

use std::net::Ipv4Addr;

use proptest::prelude::*;
use wirespeed_packet::checksum;
use wirespeed_packet::flow_key::{crc32c, crc32c_hardware, crc32c_portable};
use wirespeed_packet::wire::ipv4;

/// A random IPv4 header (options included) with a valid checksum.
fn header() -> impl Strategy<Value = Vec<u8>> {
    (5u8..=15, proptest::collection::vec(any::<u8>(), 60)).prop_map(|(ihl, mut bytes)| {
        let len = usize::from(ihl) * 4;
        bytes.truncate(len);
        bytes[0] = 0x40 | ihl;
        bytes[2..4].copy_from_slice(&(len as u16).to_be_bytes());
        ipv4::Packet::new_unchecked(&mut bytes[..]).fill_checksum();
        bytes
    })
}

proptest! {
    #[test]
    fn ttl_change_matches_recomputation(mut bytes in header(), ttl in any::<u8>()) {
        let mut packet = ipv4::Packet::new_checked(&mut bytes[..]).unwrap();
        let before = packet.checksum();
        let old = u16::from_be_bytes([packet.ttl(), u8::from(packet.protocol())]);
        packet.set_ttl(ttl);
        let new = u16::from_be_bytes([ttl, u8::from(packet.protocol())]);
        let incremental = checksum::update_word(before, old, new);
        packet.fill_checksum();
        prop_assert_eq!(incremental, packet.checksum());
    }

    #[test]
    fn decrement_ttl_keeps_the_header_valid(mut bytes in header()) {
        let mut packet = ipv4::Packet::new_checked(&mut bytes[..]).unwrap();
        packet.decrement_ttl();
        prop_assert!(packet.verify_checksum());
        let after = packet.checksum();
        packet.fill_checksum();
        prop_assert_eq!(after, packet.checksum());
    }

    #[test]
    fn address_change_matches_recomputation(mut bytes in header(), src in any::<u32>(), dst in any::<u32>()) {
        let mut packet = ipv4::Packet::new_checked(&mut bytes[..]).unwrap();
        let before = packet.checksum();
        let old_src = u32::from(packet.src_addr());
        let sum = checksum::update_u32(before, old_src, src);
        packet.set_src_addr(Ipv4Addr::from(src));
        packet.fill_checksum();
        prop_assert_eq!(sum, packet.checksum());

        packet.rewrite_dst_addr(Ipv4Addr::from(dst));
        let after = packet.checksum();
        packet.fill_checksum();
        prop_assert_eq!(after, packet.checksum());
    }

    #[test]
    fn fast_sum_matches_word_by_word(data in proptest::collection::vec(any::<u8>(), 0..2000)) {
        let mut acc: u32 = 0;
        for pair in data.chunks(2) {
            acc += u32::from(u16::from_be_bytes([pair[0], pair.get(1).copied().unwrap_or(0)]));
            acc = (acc & 0xffff) + (acc >> 16);
        }
        prop_assert_eq!(checksum::partial(&data), acc as u16);
    }

    #[test]
    fn crc32c_hardware_equals_software(seed in any::<u32>(), data in proptest::collection::vec(any::<u8>(), 0..300)) {
        let portable = crc32c_portable(seed, &data);
        prop_assert_eq!(crc32c(seed, &data), portable);
        if let Some(hardware) = crc32c_hardware(seed, &data) {
            prop_assert_eq!(hardware, portable);
        }
    }
}

proptest! {
    #[test]
    fn flow_key_hash_is_crc32c_of_its_image(
        ip_src in any::<[u8; 16]>(), ip_dst in any::<[u8; 16]>(), macs in any::<([u8; 6], [u8; 6])>(),
        words in any::<[u16; 4]>(), bytes in any::<[u8; 4]>(),
    ) {
        use wirespeed_packet::FlowKey;
        use wirespeed_packet::wire::EthernetAddress;
        let key = FlowKey {
            ip_src, ip_dst, dst_mac: EthernetAddress(macs.0), src_mac: EthernetAddress(macs.1),
            in_port: bytes[0], ip_tos: bytes[1], vlan: words[0], ethertype: words[1],
            l4_src: words[2], l4_dst: words[3], ip_proto: bytes[2], flags: bytes[3],
        };
        prop_assert_eq!(key.hash(), crc32c_portable(0, &key.to_bytes()));
        prop_assert_eq!(key.hash(), crc32c(0, &key.to_bytes()));
        prop_assert_eq!(key.hash_portable(), crc32c_portable(0, &key.to_bytes()));
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("sse4.2") {
            // SAFETY: SSE4.2 was detected just above.
            prop_assert_eq!(unsafe { key.hash_sse42() }, crc32c_portable(0, &key.to_bytes()));
        }
    }
}
