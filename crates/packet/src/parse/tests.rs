use super::*;

/// A 60-byte unicast IPv4/UDP frame written out by hand: 02:..:02 <- 02:..:01,
/// 10.0.0.1:1234 -> 10.0.0.2:53, 4 bytes of payload, then 14 bytes of Ethernet padding.
fn ipv4_udp() -> Vec<u8> {
    let mut frame = vec![
        0x02, 0, 0, 0, 0, 0x02, 0x02, 0, 0, 0, 0, 0x01, 0x08, 0x00, // Ethernet
        0x45, 0x00, 0x00, 0x20, 0x00, 0x01, 0x00, 0x00, 0x40, 0x11, 0x00, 0x00, // IPv4
        10, 0, 0, 1, 10, 0, 0, 2, //
        0x04, 0xd2, 0x00, 0x35, 0x00, 0x0c, 0x00, 0x00, // UDP
        b'p', b'i', b'n', b'g',
    ];
    frame.resize(60, 0);
    frame
}

fn run(frame: &[u8]) -> (Result<(), DropReason>, Meta, FlowKey) {
    let mut meta = Meta::EMPTY;
    let mut key = FlowKey::EMPTY;
    let result = parse(frame, 3, &mut meta, &mut key);
    (result, meta, key)
}

#[test]
fn ipv4_udp_with_padding() {
    let (result, meta, key) = run(&ipv4_udp());
    assert_eq!(result, Ok(()));
    assert_eq!(meta.ethertype, 0x0800);
    assert_eq!(
        (meta.l3_offset, meta.l4_offset, meta.payload_offset),
        (14, 34, 42)
    );
    assert_eq!(meta.ip_proto, 17);
    assert_eq!(meta.flags, Meta::FLAG_IPV4 | Meta::FLAG_PARSED);
    assert_eq!(meta.flow_hash, key.hash());
    assert_eq!(key.in_port, 3);
    assert_eq!((key.l4_src, key.l4_dst), (1234, 53));
    assert_eq!(key.ipv4_src(), Some(std::net::Ipv4Addr::new(10, 0, 0, 1)));
    assert_eq!(key.ipv4_dst(), Some(std::net::Ipv4Addr::new(10, 0, 0, 2)));
    assert_eq!(key.src_mac.0, [2, 0, 0, 0, 0, 1]);
    assert_eq!(key.flags, 0);
}

#[test]
fn the_tos_byte_and_the_traffic_class_are_in_the_key() {
    // IPv4: the fast parse (plain frame) and the general one (behind a tag) alike.
    let mut plain = ipv4_udp();
    plain[15] = 46 << 2 | 1;
    let (_, _, key) = run(&plain);
    assert_eq!(key.ip_tos, 0xb9);
    let mut tagged = plain[..12].to_vec();
    tagged.extend_from_slice(&[0x81, 0x00, 0x00, 0x14]);
    tagged.extend_from_slice(&plain[12..]);
    let (result, _, key) = run(&tagged);
    assert_eq!((result, key.ip_tos), (Ok(()), 0xb9));
    // IPv6: the 8 bits after the version.
    let mut v6 = vec![0x02, 0, 0, 0, 0, 0x02, 0x02, 0, 0, 0, 0, 0x01, 0x86, 0xdd];
    v6.extend_from_slice(&[0x6b, 0x90, 0, 0, 0, 8, 17, 64]);
    v6.extend_from_slice(&[0; 32]);
    v6.extend_from_slice(&[0x04, 0xd2, 0x00, 0x35, 0x00, 0x08, 0x00, 0x00]);
    let (result, _, key) = run(&v6);
    assert_eq!((result, key.ip_tos), (Ok(()), 0xb9));
    // A frame from no port.
    let mut meta = Meta::EMPTY;
    let mut key = FlowKey::EMPTY;
    parse(&plain, Meta::NO_PORT, &mut meta, &mut key).unwrap();
    assert_eq!(key.in_port, FlowKey::NO_PORT);
}

#[test]
fn a_service_and_a_customer_tag_are_read() {
    let plain = ipv4_udp();
    let mut tagged = plain[..12].to_vec();
    // The outer tag: priority 1, DEI set, id 10.
    tagged.extend_from_slice(&[0x88, 0xa8, 0x30, 0x0a, 0x81, 0x00, 0x00, 0x14]);
    tagged.extend_from_slice(&plain[12..]);
    let (result, meta, key) = run(&tagged);
    assert_eq!(result, Ok(()));
    assert_eq!(meta.vlan_depth, 2);
    assert_eq!(meta.vlan[..2], [0x300a, 0x0014]);
    // The key has the outer tag's priority and id, not its DEI.
    assert_eq!((key.vlan, key.flags), (1 << 13 | 10, FlowKey::FLAG_VLAN));
    assert_eq!(key.vlan & FlowKey::VLAN_VID, 10);
    assert_eq!(key.vlan >> FlowKey::VLAN_PCP_SHIFT, 1);
    assert_eq!((meta.l3_offset, meta.l4_offset), (22, 42));
}

/// `ipv4_udp` as IEEE 802.3: the type field becomes the length of an LLC PDU that starts with
/// `llc` and goes on with the IPv4 packet; the 14 bytes of padding stay behind it.
fn ieee_802_3(llc: &[u8]) -> Vec<u8> {
    let plain = ipv4_udp();
    let ip = &plain[14..46];
    let mut frame = plain[..12].to_vec();
    frame.extend_from_slice(&((llc.len() + ip.len()) as u16).to_be_bytes());
    frame.extend_from_slice(llc);
    frame.extend_from_slice(ip);
    frame.extend_from_slice(&[0; 14]);
    frame
}

#[test]
fn rfc_1042_snap_carries_an_ethertype_and_other_llc_is_l2_only() {
    let snap = ieee_802_3(&[0xaa, 0xaa, 0x03, 0, 0, 0, 0x08, 0x00]);
    let (result, meta, key) = run(&snap);
    assert_eq!(result, Ok(()));
    assert_eq!((meta.ethertype, key.ethertype), (0x0800, 0x0800));
    assert_eq!((meta.l3_offset, meta.l4_offset), (22, 42));
    assert_eq!((key.ip_proto, key.l4_src, key.l4_dst), (17, 1234, 53));

    // Spanning tree's LLC (DSAP/SSAP 0x42) and a vendor's SNAP OUI carry no EtherType.
    for llc in [
        &[0x42, 0x42, 0x03][..],
        &[0xaa, 0xaa, 0x03, 0x00, 0x00, 0x0c, 0x20, 0x00],
    ] {
        let (result, meta, key) = run(&ieee_802_3(llc));
        assert_eq!(result, Ok(()));
        assert_eq!(
            (meta.ethertype, key.ethertype),
            (ETHERTYPE_NONE, ETHERTYPE_NONE)
        );
        assert_eq!((meta.l3_offset, meta.l4_offset, key.ip_proto), (14, 0, 0));
    }

    // The IPv4 packet is read inside the PDU's length only: the rest is padding.
    let mut short = snap.clone();
    short[12..14].copy_from_slice(&30u16.to_be_bytes());
    assert_eq!(run(&short).0, Err(DropReason::BadIpv4Length));
    // A length beyond the frame is a truncated frame.
    let mut long = snap;
    long[12..14].copy_from_slice(&1500u16.to_be_bytes());
    assert_eq!(run(&long).0, Err(DropReason::Truncated));
}

/// `ipv4_udp` with `options` (a multiple of 4 bytes) in its header.
fn with_ipv4_options(options: &[u8]) -> Vec<u8> {
    let plain = ipv4_udp();
    let mut frame = plain[..34].to_vec();
    frame.extend_from_slice(options);
    frame.extend_from_slice(&plain[34..46]);
    frame[14] = 0x45 + (options.len() / 4) as u8;
    let total = (32 + options.len()) as u16;
    frame[16..18].copy_from_slice(&total.to_be_bytes());
    frame.resize(frame.len().max(60), 0);
    frame
}

#[test]
fn ipv4_option_lengths_are_checked() {
    for valid in [
        &[1, 1, 1, 0][..],                        // No Operation, End of Option List
        &[148, 4, 0, 0],                          // Router Alert
        &[0, 0xff, 0xff, 0xff],                   // garbage after the end is padding
        &[7, 7, 4, 0, 0, 0, 0, 0],                // Record Route, one slot
        &[1, 1, 0x44, 4, 5, 0, 0, 0, 0, 0, 0, 0], // Timestamp after two No Operations
    ] {
        let (result, meta, key) = run(&with_ipv4_options(valid));
        assert_eq!(result, Ok(()), "{valid:?}");
        assert_eq!(usize::from(meta.l4_offset), 34 + valid.len());
        assert_eq!(key.l4_dst, 53);
    }
    for invalid in [
        &[148, 0, 0, 0][..], // a length below 2 would never move on
        &[148, 1, 0, 0],
        &[148, 5, 0, 0],           // beyond the header
        &[1, 1, 1, 148],           // a type without its length byte
        &[7, 3, 4, 1, 9, 0, 0, 0], // a length of 0 after two options
        &[148, 3, 0, 0],           // Router Alert without its whole value
        &[7, 2, 0, 0],             // Record Route without its pointer
        &[25, 4, 0, 0],            // Quick-Start needs 8 bytes
    ] {
        assert_eq!(
            run(&with_ipv4_options(invalid)).0,
            Err(DropReason::BadIpv4Header),
            "{invalid:?}"
        );
    }
}

#[test]
fn ipv4_malformations() {
    let frame = ipv4_udp();
    assert_eq!(run(&frame[..13]).0, Err(DropReason::Truncated));
    assert_eq!(run(&frame[..33]).0, Err(DropReason::Truncated));
    let mut bad = frame.clone();
    bad[14] = 0x44; // IHL 4
    assert_eq!(run(&bad).0, Err(DropReason::BadIpv4Header));
    let mut bad = frame.clone();
    bad[14] = 0x55; // version 5
    assert_eq!(run(&bad).0, Err(DropReason::BadIpv4Header));
    let mut bad = frame.clone();
    bad[16] = 0x01; // total length 288, beyond the frame
    assert_eq!(run(&bad).0, Err(DropReason::BadIpv4Length));
    let mut bad = frame.clone();
    bad[17] = 19; // total length below the header
    assert_eq!(run(&bad).0, Err(DropReason::BadIpv4Length));
    let mut bad = frame.clone();
    bad[38] = 0;
    bad[39] = 7; // UDP length 7
    assert_eq!(run(&bad).0, Err(DropReason::BadL4Header));
    // Total length 28 leaves no room for the UDP payload the UDP length claims.
    let mut bad = frame;
    bad[17] = 28;
    assert_eq!(run(&bad).0, Err(DropReason::BadL4Header));
}

#[test]
fn non_first_fragment_has_no_ports() {
    let mut frame = ipv4_udp();
    frame[20] = 0x00;
    frame[21] = 0xb9; // offset 185 * 8 = 1480
    let (result, meta, key) = run(&frame);
    assert_eq!(result, Ok(()));
    assert_ne!(meta.flags & Meta::FLAG_FRAGMENT, 0);
    assert_eq!((meta.l4_offset, meta.payload_offset), (0, 34));
    assert_eq!((key.l4_src, key.l4_dst), (0, 0));
    assert_eq!(
        key.flags,
        FlowKey::FLAG_FRAGMENT | FlowKey::FLAG_LATER_FRAGMENT
    );
    // A first fragment (MF set, offset 0) keeps its ports.
    let mut frame = ipv4_udp();
    frame[20] = 0x20;
    let (_, meta, key) = run(&frame);
    assert_ne!(meta.flags & Meta::FLAG_FRAGMENT, 0);
    assert_eq!((key.l4_src, key.l4_dst), (1234, 53));
    assert_eq!(key.flags, FlowKey::FLAG_FRAGMENT);
}

#[test]
fn a_first_fragment_is_not_held_to_the_whole_datagrams_lengths() {
    // UDP: the length (3000) is the datagram's, longer than this fragment.
    let mut frame = ipv4_udp();
    frame[20] = 0x20; // MF, offset 0
    frame[38..40].copy_from_slice(&3000u16.to_be_bytes());
    let (result, meta, key) = run(&frame);
    assert_eq!(result, Ok(()));
    assert_eq!((key.l4_src, key.l4_dst), (1234, 53));
    assert_eq!(meta.payload_offset, 42);
    // The same length without MF is a bad header.
    frame[20] = 0x00;
    assert_eq!(run(&frame).0, Err(DropReason::BadL4Header));
    // TCP: a first fragment with only 8 bytes of the TCP header.
    let mut frame = ipv4_udp();
    frame[23] = 6;
    frame[20] = 0x20;
    frame[16..18].copy_from_slice(&28u16.to_be_bytes()); // 20 + 8
    let (result, _, key) = run(&frame);
    assert_eq!(result, Ok(()));
    assert_eq!((key.l4_src, key.l4_dst), (1234, 53));
    // Fewer than the four bytes of ports is still too short.
    frame[16..18].copy_from_slice(&23u16.to_be_bytes());
    assert_eq!(run(&frame).0, Err(DropReason::BadL4Header));
    // IPv6: a Fragment header (offset 0, M set) before UDP of a longer datagram.
    let mut frame = vec![0x02, 0, 0, 0, 0, 0x02, 0x02, 0, 0, 0, 0, 0x01, 0x86, 0xdd];
    frame.extend_from_slice(&[0x60, 0, 0, 0, 0, 20, 44, 64]);
    frame.extend_from_slice(&[0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
    frame.extend_from_slice(&[0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
    frame.extend_from_slice(&[17, 0, 0x00, 0x01, 0, 0, 0, 7]); // Fragment: M, offset 0
    frame.extend_from_slice(&[0x04, 0xd2, 0x00, 0x35, 0x0b, 0xb8, 0, 0]); // UDP, length 3000
    frame.extend_from_slice(b"ping");
    let (result, meta, key) = run(&frame);
    assert_eq!(result, Ok(()));
    assert_ne!(meta.flags & Meta::FLAG_FRAGMENT, 0);
    assert_eq!((key.l4_src, key.l4_dst), (1234, 53));
}

#[test]
fn arp_and_unknown_ethertypes() {
    let mut frame = vec![0xff; 6];
    frame.extend_from_slice(&[0x02, 0, 0, 0, 0, 0x01, 0x08, 0x06]);
    frame.extend_from_slice(&[0, 1, 8, 0, 6, 4, 0, 1, 2, 0, 0, 0, 0, 1, 10, 0, 0, 1]);
    frame.extend_from_slice(&[0, 0, 0, 0, 0, 0, 10, 0, 0, 2]);
    let (result, meta, key) = run(&frame);
    assert_eq!(result, Ok(()));
    assert_eq!(meta.flags, Meta::FLAG_GROUP_DST | Meta::FLAG_PARSED);
    assert_eq!(key.ip_proto, 1);
    assert_eq!(key.ipv4_dst(), Some(std::net::Ipv4Addr::new(10, 0, 0, 2)));
    assert_eq!(run(&frame[..40]).0, Err(DropReason::Truncated));

    let mut lldp = vec![0x01, 0x80, 0xc2, 0, 0, 0x0e, 2, 0, 0, 0, 0, 1, 0x88, 0xcc];
    lldp.extend_from_slice(&[0u8; 46]);
    let (result, meta, key) = run(&lldp);
    assert_eq!(result, Ok(()));
    assert_eq!(
        (meta.ethertype, meta.l3_offset, meta.l4_offset),
        (0x88cc, 14, 0)
    );
    assert_eq!(key.ethertype, 0x88cc);
    assert_eq!(key.ip_src, [0; 16]);
}

/// A batch of the hand-written frame, a truncated one, a VLAN-tagged one and a descriptor
/// that points past its frame: `parse_batch` marks exactly the bad ones, both copies of
/// the parser agree with `parse` packet for packet, and the unhashed parse differs from
/// them only in the zero hash.
#[test]
fn parse_batch_matches_parse_packet_for_packet() {
    use crate::batch::Desc;
    let mut pool = FramePool::new(8, 2048).unwrap();
    let plain = ipv4_udp();
    let mut tagged = plain[..12].to_vec();
    tagged.extend_from_slice(&[0x81, 0x00, 0x00, 0x2a]);
    tagged.extend_from_slice(&plain[12..]);
    let frames = [plain.clone(), plain[..20].to_vec(), tagged];
    let mut batch = Batch::new(8);
    for (port, bytes) in frames.iter().enumerate() {
        let frame = pool.alloc().unwrap();
        pool.frame_mut(frame)[100..100 + bytes.len()].copy_from_slice(bytes);
        batch.push(Desc {
            frame,
            offset: 100,
            len: bytes.len() as u16,
            port: port as u16,
            queue: 0,
        });
    }
    let frame = pool.alloc().unwrap();
    batch.push(Desc {
        frame,
        offset: 2000,
        len: 60,
        port: 0,
        queue: 0,
    });

    let mut chosen = (batch.clone(), [FlowKey::EMPTY; 4]);
    assert_eq!(parse_batch(&pool, &mut chosen.0, &mut chosen.1), 2);
    let mut copies = vec![chosen];
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("sse4.2") {
        let mut sse42 = (batch.clone(), [FlowKey::EMPTY; 4]);
        // SAFETY: SSE4.2 was detected just above.
        let malformed = unsafe { parse_batch_sse42(&pool, &mut sse42.0, &mut sse42.1) };
        assert_eq!(malformed, 2);
        copies.push(sse42);
    }
    let mut portable = (batch.clone(), [FlowKey::EMPTY; 4]);
    assert_eq!(
        parse_batch_with::<Portable>(&pool, &mut portable.0, &mut portable.1),
        2
    );
    copies.push(portable);

    for (parsed, keys) in &copies {
        for (i, bytes) in frames.iter().enumerate() {
            let mut meta = Meta::EMPTY;
            let mut key = FlowKey::EMPTY;
            let result = parse(bytes, i as u16, &mut meta, &mut key);
            meta.drop = result.err();
            assert_eq!(parsed.meta()[i], meta, "packet {i}");
            assert_eq!(keys[i], key, "packet {i}");
        }
        assert_eq!(parsed.meta()[1].drop, Some(DropReason::Truncated));
        assert_eq!(parsed.meta()[2].vlan_depth, 1);
        assert_eq!(parsed.meta()[3].drop, Some(DropReason::Oversize));
    }

    // Without the hash: the same keys and metadata, with a zero hash.
    let (hashed, hashed_keys) = &copies[0];
    let (mut unhashed, mut unhashed_keys) = (batch.clone(), [FlowKey::EMPTY; 4]);
    assert_eq!(
        parse_batch_unhashed(&pool, &mut unhashed, &mut unhashed_keys),
        2
    );
    assert_eq!(&unhashed_keys, hashed_keys);
    for (with, without) in hashed.meta().iter().zip(unhashed.meta()) {
        assert_eq!(without.flow_hash, 0);
        assert_eq!(
            Meta {
                flow_hash: with.flow_hash,
                ..*without
            },
            *with
        );
    }
    assert_ne!(hashed.meta()[0].flow_hash, 0);
}

/// Runs the fast path with the general parser behind it, and the general parser alone, on
/// the same frame from the same starting metadata: both must leave the same result, `Meta`
/// and `FlowKey`.
fn fast_and_general_agree(frame: &[u8]) -> Result<(), proptest::test_runner::TestCaseError> {
    let start = Meta {
        rx_time: 99,
        out_port: 4,
        ..Meta::EMPTY
    };
    let (mut meta_a, mut key_a) = (start, FlowKey::EMPTY);
    let (mut meta_b, mut key_b) = (start, FlowKey::EMPTY);
    let a = parse_with::<Portable>(frame, 5, &mut meta_a, &mut key_a);
    let b = parse_general::<Portable>(frame, 5, &mut meta_b, &mut key_b);
    proptest::prop_assert_eq!(a, b);
    proptest::prop_assert_eq!(meta_a, meta_b);
    proptest::prop_assert_eq!(key_a, key_b);
    Ok(())
}

/// An IPv4 frame of the kind the fast path takes: TCP (with `tcp`) or UDP, 60 to 80 bytes.
fn fast_path_frame(tcp: bool, extra: usize) -> Vec<u8> {
    let mut frame = ipv4_udp();
    if tcp {
        frame.truncate(34);
        frame[23] = PROTO_TCP;
        frame.extend_from_slice(&[0x04, 0xd2, 0x00, 0x50, 0, 0, 0, 1, 0, 0, 0, 0, 0x50, 0x10]);
        frame.extend_from_slice(&[0xff, 0xff, 0, 0, 0, 0]);
    }
    frame.resize(60 + extra, 0);
    let total_len = (frame.len() - 14) as u16;
    frame[16..18].copy_from_slice(&total_len.to_be_bytes());
    if !tcp {
        frame[38..40].copy_from_slice(&(total_len - 20).to_be_bytes());
    }
    frame
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(3000))]

    /// Frames the fast path takes or almost takes: every header byte it reads perturbed
    /// one to four at a time (including to the values its checks hinge on), then cut.
    #[test]
    fn fast_path_gives_what_the_general_parser_gives(
        tcp in proptest::prelude::any::<bool>(),
        extra in 0usize..20,
        flips in proptest::collection::vec(
            (0usize..60, proptest::prop_oneof![
                proptest::prelude::any::<u8>(),
                proptest::prelude::Just(0u8),
                proptest::prelude::Just(0x45u8),
                proptest::prelude::Just(0x46u8),
                proptest::prelude::Just(0x50u8),
                proptest::prelude::Just(0x20u8),
                proptest::prelude::Just(0x40u8),
                proptest::prelude::Just(20u8),
                proptest::prelude::Just(28u8),
                proptest::prelude::Just(0x08u8),
                proptest::prelude::Just(0x81u8),
                proptest::prelude::Just(PROTO_TCP),
                proptest::prelude::Just(PROTO_UDP),
            ]),
            0..4,
        ),
        cut in proptest::prelude::any::<proptest::sample::Index>(),
    ) {
        let mut frame = fast_path_frame(tcp, extra);
        fast_and_general_agree(&frame)?;
        for (at, value) in flips {
            if let Some(byte) = frame.get_mut(at) {
                *byte = value;
            }
        }
        fast_and_general_agree(&frame)?;
        fast_and_general_agree(&frame[..cut.index(frame.len() + 1)])?;
    }

    #[test]
    fn fast_path_agrees_on_random_bytes(
        frame in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..128),
        ipv4 in proptest::prelude::any::<bool>(),
    ) {
        let mut frame = frame;
        if ipv4 && frame.len() >= 15 {
            frame[12..15].copy_from_slice(&[0x08, 0x00, 0x45]);
        }
        fast_and_general_agree(&frame)?;
    }
}

#[test]
fn fast_path_takes_the_common_frames() {
    for tcp in [false, true] {
        let frame = fast_path_frame(tcp, 6);
        let (mut meta, mut key) = (Meta::EMPTY, FlowKey::EMPTY);
        assert!(parse_ipv4_fast::<Portable>(&frame, 1, &mut meta, &mut key));
        let expected_payload = if tcp { 54 } else { 42 };
        assert_eq!(meta.payload_offset, expected_payload);
        assert_eq!(key.l4_src, 1234);
        assert!(fast_and_general_agree(&frame).is_ok());
    }
    // A group destination sets the flag on the fast path too.
    let mut frame = fast_path_frame(false, 0);
    frame[0] = 0x01;
    let (mut meta, mut key) = (Meta::EMPTY, FlowKey::EMPTY);
    assert!(parse_ipv4_fast::<Portable>(&frame, 1, &mut meta, &mut key));
    assert_ne!(meta.flags & Meta::FLAG_GROUP_DST, 0);
}

/// An IPv6 frame from the parser's view: the general parser takes it as plain IPv6
/// UDP/TCP (untagged, no drop, the transport header right behind the fixed header).
fn parses_as_plain_ipv6_transport(frame: &[u8]) -> bool {
    let (mut meta, mut key) = (Meta::EMPTY, FlowKey::EMPTY);
    parse_general::<Portable>(frame, 0, &mut meta, &mut key).is_ok()
        && meta.flags & Meta::FLAG_IPV6 != 0
        && meta.vlan_depth == 0
        && meta.l4_offset == 54
        && (meta.ip_proto == PROTO_UDP || meta.ip_proto == PROTO_TCP)
}

/// An IPv6 frame of the kind `plain_ipv6_transport` takes: TCP (with `tcp`) or UDP with
/// `extra` bytes of payload, then `padding` bytes of Ethernet padding.
fn plain_ipv6_frame(tcp: bool, extra: usize, padding: usize) -> Vec<u8> {
    let mut frame = vec![0x02, 0, 0, 0, 0, 0x02, 0x02, 0, 0, 0, 0, 0x01, 0x86, 0xdd];
    frame.extend_from_slice(&[0x60, 0, 0, 0, 0, 0, 0, 64]);
    frame.extend((0..32).map(|i| 0x20 + i as u8));
    if tcp {
        frame[20] = PROTO_TCP;
        frame.extend_from_slice(&[0x04, 0xd2, 0x00, 0x50, 0, 0, 0, 1, 0, 0, 0, 0, 0x50, 0x10]);
        frame.extend_from_slice(&[0xff, 0xff, 0, 0, 0, 0]);
    } else {
        frame[20] = PROTO_UDP;
        frame.extend_from_slice(&[0x04, 0xd2, 0x00, 0x35, 0, 0, 0, 0]);
    }
    frame.resize(frame.len() + extra, 0x61);
    let segment = (frame.len() - 54) as u16;
    frame[18..20].copy_from_slice(&segment.to_be_bytes());
    if !tcp {
        frame[58..60].copy_from_slice(&segment.to_be_bytes());
    }
    frame.resize(frame.len() + padding, 0);
    frame
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(3000))]

    /// `plain_ipv6_transport` takes exactly the frames the general parser takes as plain
    /// IPv6 UDP/TCP: every header byte it reads perturbed one to four at a time (also to
    /// the values its checks hinge on), then cut.
    #[test]
    fn plain_ipv6_is_what_the_general_parser_takes_as_plain_ipv6(
        tcp in proptest::prelude::any::<bool>(),
        extra in 0usize..12,
        padding in 0usize..8,
        flips in proptest::collection::vec(
            (proptest::prop_oneof![12usize..22, 54usize..80], proptest::prop_oneof![
                proptest::prelude::any::<u8>(),
                proptest::prelude::Just(0u8),
                proptest::prelude::Just(0x60u8),
                proptest::prelude::Just(0x50u8),
                proptest::prelude::Just(0x40u8),
                proptest::prelude::Just(8u8),
                proptest::prelude::Just(20u8),
                proptest::prelude::Just(0x86u8),
                proptest::prelude::Just(0xddu8),
                proptest::prelude::Just(PROTO_TCP),
                proptest::prelude::Just(PROTO_UDP),
                proptest::prelude::Just(PROTO_ICMPV6),
            ]),
            0..4,
        ),
        cut in proptest::prelude::any::<proptest::sample::Index>(),
    ) {
        let mut frame = plain_ipv6_frame(tcp, extra, padding);
        proptest::prop_assert!(plain_ipv6_transport(&frame).is_some());
        proptest::prop_assert!(parses_as_plain_ipv6_transport(&frame));
        for (at, value) in flips {
            if let Some(byte) = frame.get_mut(at) {
                *byte = value;
            }
        }
        for frame in [&frame[..], &frame[..cut.index(frame.len() + 1)]] {
            proptest::prop_assert_eq!(
                plain_ipv6_transport(frame).is_some(),
                parses_as_plain_ipv6_transport(frame),
                "{:02x?}", frame
            );
        }
    }
}

#[test]
fn oversize_frame_is_refused() {
    let frame = vec![0u8; usize::from(u16::MAX) + 1];
    assert_eq!(run(&frame).0, Err(DropReason::Oversize));
}
