//! The hot-path parser against hostile and valid input: it never panics, it reads every frame
//! the builders make exactly as they describe it, and it names the right drop reason for each
//! kind of malformation.

use proptest::prelude::*;
use wirespeed_packet::wire::ipv6;
use wirespeed_packet::{DropReason, FlowKey, MAX_VLAN_TAGS, Meta, parse};
use wirespeed_testkit::frames::{FrameBuilder, L3, L4, arb_frame, arb_frame_builder};

fn run(frame: &[u8]) -> (Result<(), DropReason>, Meta, FlowKey) {
    let mut meta = Meta::EMPTY;
    let mut key = FlowKey::EMPTY;
    let result = parse(frame, 7, &mut meta, &mut key);
    (result, meta, key)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn never_panics_on_random_bytes(frame in proptest::collection::vec(any::<u8>(), 0..256)) {
        let _ = run(&frame);
    }

    #[test]
    fn never_panics_on_mutated_valid_frames(
        mut frame in arb_frame(),
        flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
        cut in any::<prop::sample::Index>(),
    ) {
        for (at, value) in flips {
            let i = at.index(frame.len());
            frame[i] = value;
        }
        let (result, meta, key) = run(&frame);
        if result.is_ok() {
            prop_assert_eq!(meta.flow_hash, key.hash());
            prop_assert!(usize::from(meta.l4_offset) <= frame.len());
            prop_assert!(usize::from(meta.payload_offset) <= frame.len());
        }
        let short = &frame[..cut.index(frame.len() + 1)];
        let _ = run(short);
    }

    #[test]
    fn valid_frames_parse_as_built(builder in arb_frame_builder()) {
        let frame = builder.build();
        let (result, meta, key) = run(&frame);
        prop_assert_eq!(result, Ok(()));
        prop_assert_ne!(meta.flags & Meta::FLAG_PARSED, 0);
        prop_assert_eq!(meta.flow_hash, key.hash());
        prop_assert_eq!(key.in_port, 7);
        prop_assert_eq!(key.src_mac, builder.src_mac);
        prop_assert_eq!(key.dst_mac, builder.dst_mac);
        prop_assert_eq!(meta.flags & Meta::FLAG_GROUP_DST != 0, builder.dst_mac.is_multicast());
        prop_assert_eq!(usize::from(meta.vlan_depth), builder.vlans.len());
        for (tci, vid) in meta.vlan.iter().zip(&builder.vlans) {
            prop_assert_eq!(tci & 0x0fff, *vid);
        }
        if let Some(&outer) = builder.vlans.first() {
            prop_assert_eq!(key.vlan, outer);
        }
        prop_assert_eq!(usize::from(meta.l3_offset), builder.l2_len());
        match builder.l3 {
            L3::Ipv4 { src, dst } => {
                prop_assert_eq!(meta.ethertype, 0x0800);
                prop_assert_eq!(key.ipv4_src(), Some(src));
                prop_assert_eq!(key.ipv4_dst(), Some(dst));
                prop_assert_eq!(usize::from(meta.l4_offset), builder.l2_len() + 20);
            }
            L3::Ipv6 { src, dst } => {
                prop_assert_eq!(meta.ethertype, 0x86dd);
                prop_assert_eq!(key.ip_src, src.octets());
                prop_assert_eq!(key.ip_dst, dst.octets());
                prop_assert_eq!(
                    usize::from(meta.l4_offset),
                    builder.l2_len() + 40 + 8 * builder.extension_headers
                );
            }
        }
        let (l4_src, l4_dst, proto, l4_len) = match (builder.l4, builder.l3) {
            (L4::Udp { src_port, dst_port }, _) => (src_port, dst_port, 17, 8),
            (L4::Tcp { src_port, dst_port }, _) => (src_port, dst_port, 6, 20),
            (L4::Echo { .. }, L3::Ipv4 { .. }) => (8 << 8, 0, 1, 8),
            (L4::Echo { .. }, L3::Ipv6 { .. }) => (128 << 8, 0, 58, 8),
        };
        prop_assert_eq!((key.l4_src, key.l4_dst), (l4_src, l4_dst));
        prop_assert_eq!((key.ip_proto, meta.ip_proto), (proto, proto));
        prop_assert_eq!(meta.payload_offset, meta.l4_offset + l4_len);
        prop_assert_eq!(usize::from(meta.payload_offset), builder.headers_len());
    }

    #[test]
    fn every_cut_into_the_headers_is_refused(builder in arb_frame_builder(), cut in any::<prop::sample::Index>()) {
        let frame = builder.build();
        let cut = cut.index(builder.headers_len());
        prop_assert!(run(&frame[..cut]).0.is_err());
    }
}

#[test]
fn trailing_padding_is_not_payload() {
    // 18 bytes of UDP payload in a 60-byte frame, then 40 bytes of padding appended.
    let mut frame = FrameBuilder::ipv4_udp().frame_len(60).build();
    frame.extend_from_slice(&[0xee; 40]);
    let (result, meta, _) = run(&frame);
    assert_eq!(result, Ok(()));
    assert_eq!(meta.payload_offset, 42);
}

#[test]
fn truncation_is_classified_by_layer() {
    let frame = FrameBuilder::ipv4_udp().frame_len(60).build();
    for cut in 0..14 {
        assert_eq!(
            run(&frame[..cut]).0,
            Err(DropReason::Truncated),
            "cut {cut}"
        );
    }
    for cut in 14..34 {
        assert_eq!(
            run(&frame[..cut]).0,
            Err(DropReason::Truncated),
            "cut {cut}"
        );
    }
    // Header complete, total length (46) beyond what is left.
    for cut in 34..60 {
        assert_eq!(
            run(&frame[..cut]).0,
            Err(DropReason::BadIpv4Length),
            "cut {cut}"
        );
    }
    let v6 = FrameBuilder::ipv6_udp().frame_len(70).build();
    assert_eq!(run(&v6[..53]).0, Err(DropReason::Truncated));
    assert_eq!(run(&v6[..69]).0, Err(DropReason::BadIpv6Header));
    // A 5-byte segment announced by a correct IP header cannot hold a UDP header.
    let mut bad = FrameBuilder::ipv4_udp().frame_len(60).build();
    bad[17] = 25;
    assert_eq!(run(&bad).0, Err(DropReason::BadL4Header));
}

#[test]
fn bad_ihl_and_version() {
    for (byte, reason) in [
        (0x40, DropReason::BadIpv4Header),
        (0x44, DropReason::BadIpv4Header),
        (0x65, DropReason::BadIpv4Header),
        // IHL 15 (60 bytes) beyond the total length of 46.
        (0x4f, DropReason::BadIpv4Length),
    ] {
        let mut frame = FrameBuilder::ipv4_udp().frame_len(60).build();
        frame[14] = byte;
        assert_eq!(run(&frame).0, Err(reason), "first byte {byte:#x}");
    }
    let mut v6 = FrameBuilder::ipv6_udp().frame_len(70).build();
    v6[14] = 0x40;
    assert_eq!(run(&v6).0, Err(DropReason::BadIpv6Header));
}

#[test]
fn vlan_stacks_up_to_the_bound_are_read_and_one_more_is_too_deep() {
    let stack = |depth: u16| (1..=depth).fold(FrameBuilder::ipv4_udp(), |b, vid| b.vlan(vid));
    let bound = MAX_VLAN_TAGS as u16;
    for depth in 1..=bound {
        let (result, meta, key) = run(&stack(depth).build());
        assert_eq!(result, Ok(()), "{depth} tags");
        assert_eq!(usize::from(meta.vlan_depth), usize::from(depth));
        assert_eq!(
            &meta.vlan[..usize::from(depth)],
            &(1..=depth).collect::<Vec<_>>()[..]
        );
        assert_eq!((key.vlan, key.ethertype), (1, 0x0800), "{depth} tags");
        assert_eq!(meta.l3_offset, 14 + 4 * depth);
        assert_eq!((key.ip_proto, key.l4_dst), (17, 1025));
    }
    assert_eq!(
        run(&stack(bound + 1).build()).0,
        Err(DropReason::VlanTooDeep)
    );
}

#[test]
fn ipv6_extension_chain_is_bounded() {
    let max = ipv6::MAX_EXTENSION_HEADERS;
    let ok = FrameBuilder::ipv6_udp().extension_headers(max).build();
    let (result, meta, _) = run(&ok);
    assert_eq!(result, Ok(()));
    assert_eq!(meta.ip_proto, 17);
    let too_long = FrameBuilder::ipv6_udp().extension_headers(max + 1).build();
    assert_eq!(run(&too_long).0, Err(DropReason::BadIpv6Header));
}

#[test]
fn fragments_are_flagged() {
    let later = FrameBuilder::ipv4_udp()
        .fragment(1480, false)
        .frame_len(60)
        .build();
    let (result, meta, key) = run(&later);
    assert_eq!(result, Ok(()));
    assert_ne!(meta.flags & Meta::FLAG_FRAGMENT, 0);
    assert_eq!((key.l4_src, key.l4_dst, meta.l4_offset), (0, 0, 0));
    let first = FrameBuilder::ipv4_udp()
        .fragment(0, true)
        .frame_len(60)
        .build();
    let (_, meta, key) = run(&first);
    assert_ne!(meta.flags & Meta::FLAG_FRAGMENT, 0);
    assert_eq!((key.l4_src, key.l4_dst), (1024, 1025));
    let whole = FrameBuilder::ipv4_udp().frame_len(60).build();
    assert_eq!(run(&whole).1.flags & Meta::FLAG_FRAGMENT, 0);
}

#[test]
fn equal_flows_hash_equal_and_ports_matter() {
    let a = run(&FrameBuilder::ipv4_udp().frame_len(60).build());
    let b = run(&FrameBuilder::ipv4_udp().frame_len(200).build());
    assert_eq!(a.2, b.2);
    assert_eq!(a.1.flow_hash, b.1.flow_hash);
    let other = FrameBuilder::ipv4_udp().with_l4(L4::Udp {
        src_port: 1024,
        dst_port: 1026,
    });
    assert_ne!(run(&other.frame_len(60).build()).1.flow_hash, a.1.flow_hash);
}
