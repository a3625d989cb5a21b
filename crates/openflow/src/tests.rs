//! Byte fixtures checked against the layouts of the OpenFlow 1.3.5 specification, the error
//! each defect must give, and round trips: whatever we encode decodes to itself, and whatever
//! decodes encodes to the same bytes.

use std::net::{Ipv4Addr, Ipv6Addr};

use proptest::prelude::*;

use crate::action::{Action, Instruction, port};
use crate::message::{
    AsyncConfig, Bucket, FlowMod, FlowModCommand, GroupMod, GroupModCommand, GroupType, NO_BUFFER,
    PacketIn, PacketOut, PortDesc, Role, SwitchConfig,
};
use crate::multipart::{
    Desc, FlowStats, FlowStatsRequest, GroupDesc, GroupFeatures, GroupStats, MultipartReply,
    MultipartRequest, PortStats, ReplyBody, RequestBody, TableFeatureProperty, TableFeatures,
    property,
};
use crate::oxm::{ETH_TYPE_IPV4, Match, OFPVID_PRESENT, Oxm};
use crate::{Message, OfError};

fn decode(bytes: &[u8]) -> Result<Message, OfError> {
    Message::decode(bytes).map(|(_, m)| m).map_err(|e| e.error)
}

fn round_trip(message: &Message) {
    let bytes = message.encode(7).expect("fits");
    let (header, back) = Message::decode(&bytes).unwrap_or_else(|e| panic!("{message:?}: {e:?}"));
    assert_eq!(header.xid, 7);
    assert_eq!(&back, message);
    assert_eq!(back.encode(7).expect("fits"), bytes);
}

/// The FLOW_MOD of `ovs-ofctl -O OpenFlow13 add-flow br 'priority=100,ip,nw_dst=10.0.0.0/8,
/// actions=output:2'`, laid out by hand from the spec's `ofp_flow_mod`, `ofp_match`,
/// `ofp_instruction_actions` and `ofp_action_output` (the lab tests drive the real ovs-ofctl).
const OVS_ADD_FLOW: &[u8] = &[
    0x04, 0x0e, 0x00, 0x60, 0x00, 0x00, 0x00, 0x02, // header: v4, FLOW_MOD, 96 bytes
    0, 0, 0, 0, 0, 0, 0, 0, // cookie
    0, 0, 0, 0, 0, 0, 0, 0, // cookie mask
    0x00, 0x00, 0x00, 0x00, // table 0, ADD, idle 0
    0x00, 0x00, 0x00, 0x64, // hard 0, priority 100
    0xff, 0xff, 0xff, 0xff, // buffer id: none
    0xff, 0xff, 0xff, 0xff, // out port: any
    0xff, 0xff, 0xff, 0xff, // out group: any
    0x00, 0x00, 0x00, 0x00, // flags, pad
    0x00, 0x01, 0x00, 0x16, // match: OXM, 22 bytes
    0x80, 0x00, 0x0a, 0x02, 0x08, 0x00, // eth_type=0x0800
    0x80, 0x00, 0x19, 0x08, 10, 0, 0, 0, 255, 0, 0, 0, // ipv4_dst/mask
    0x00, 0x00, // match padding to 24
    0x00, 0x04, 0x00, 0x18, 0x00, 0x00, 0x00, 0x00, // apply-actions, 24 bytes
    0x00, 0x00, 0x00, 0x10, 0x00, 0x00, 0x00, 0x02, // output, 16 bytes, port 2
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, // max_len 0, pad
];

#[test]
fn ovs_flow_mod_fixture() {
    let Message::FlowMod(flow) = decode(OVS_ADD_FLOW).unwrap() else {
        panic!("not a flow mod");
    };
    assert_eq!(flow.priority, 100);
    assert_eq!(flow.command, FlowModCommand::Add);
    assert_eq!(flow.buffer_id, NO_BUFFER);
    assert_eq!(
        flow.matcher.fields,
        vec![
            Oxm::EthType(ETH_TYPE_IPV4),
            Oxm::Ipv4Dst(
                Ipv4Addr::new(10, 0, 0, 0),
                Some(Ipv4Addr::new(255, 0, 0, 0))
            ),
        ]
    );
    assert_eq!(
        flow.instructions,
        vec![Instruction::ApplyActions(vec![Action::output(2)])]
    );
    assert_eq!(Message::FlowMod(flow).encode(2).unwrap(), OVS_ADD_FLOW);
}

#[test]
fn fixed_sizes_match_the_spec() {
    let len = |m: Message| m.encode(0).unwrap().len();
    assert_eq!(len(Message::FeaturesRequest), 8);
    assert_eq!(
        len(Message::FeaturesReply(crate::message::Features {
            datapath_id: 1,
            n_buffers: 0,
            n_tables: 4,
            auxiliary_id: 0,
            capabilities: 0,
        })),
        32
    );
    assert_eq!(
        len(Message::SetConfig(SwitchConfig {
            flags: 0,
            miss_send_len: 128
        })),
        12
    );
    assert_eq!(
        len(Message::RoleRequest(Role {
            role: 2,
            generation_id: 1
        })),
        24
    );
    assert_eq!(
        len(Message::PortStatus {
            reason: 0,
            port: PortDesc::default()
        }),
        80
    );
    // ofp_async_config: header and six 32-bit masks.
    assert_eq!(len(Message::SetAsync(AsyncConfig::default())), 32);
    assert_eq!(len(Message::GetAsyncRequest), 8);
    let multipart = |body| len(Message::MultipartReply(MultipartReply { flags: 0, body }));
    assert_eq!(multipart(ReplyBody::Desc(Desc::default())), 16 + 1056);
    assert_eq!(
        multipart(ReplyBody::PortStats(vec![PortStats::default()])),
        16 + 112
    );
    assert_eq!(
        multipart(ReplyBody::Aggregate {
            packet_count: 0,
            byte_count: 0,
            flow_count: 0
        }),
        16 + 24
    );
    // ofp_group_features: two bitmaps and two arrays of four 32-bit words.
    let features = GroupFeatures {
        types: 7,
        capabilities: 0,
        max_groups: [0; 4],
        actions: [0; 4],
    };
    assert_eq!(multipart(ReplyBody::GroupFeatures(features)), 16 + 40);
    // Empty match: 4 bytes padded to 8; flow mod 56 bytes with it.
    assert_eq!(
        len(Message::FlowMod(flow_mod(Match::default(), vec![]))),
        56
    );
}

/// HELLO with a bitmap for versions 1 and 4, as OvS sends it.
#[test]
fn hello_bitmap() {
    let bytes = [4, 0, 0, 16, 0, 0, 0, 1, 0, 1, 0, 8, 0, 0, 0, 0x12];
    assert_eq!(
        decode(&bytes),
        Ok(Message::Hello {
            bitmap: Some(vec![0x12])
        })
    );
    // A HELLO of another version is still read (negotiation decides), other messages not.
    assert!(decode(&[1, 0, 0, 8, 0, 0, 0, 1]).is_ok());
    assert_eq!(
        decode(&[1, 5, 0, 8, 0, 0, 0, 1]),
        Err(OfError::BAD_REQUEST_VERSION)
    );
}

#[test]
fn header_errors() {
    assert_eq!(
        decode(&[4, 5, 0, 9, 0, 0, 0, 1]),
        Err(OfError::BAD_REQUEST_LEN)
    );
    assert_eq!(
        decode(&[4, 5, 0, 12, 0, 0, 0, 1, 0, 0, 0, 0]),
        Err(OfError::BAD_REQUEST_LEN)
    );
    assert_eq!(
        decode(&[4, 99, 0, 8, 0, 0, 0, 1]),
        Err(OfError::BAD_REQUEST_TYPE)
    );
    assert_eq!(decode(&[4, 5, 0]), Err(OfError::BAD_REQUEST_LEN));
    let err = Message::decode(&[4, 99, 0, 8, 0, 0, 0, 42]).unwrap_err();
    assert_eq!(err.xid, 42);
}

fn flow_mod(matcher: Match, instructions: Vec<Instruction>) -> FlowMod {
    FlowMod {
        cookie: 0,
        cookie_mask: 0,
        table_id: 0,
        command: FlowModCommand::Add,
        idle_timeout: 0,
        hard_timeout: 0,
        priority: 1,
        buffer_id: NO_BUFFER,
        out_port: port::ANY,
        out_group: crate::action::group::ANY,
        flags: 0,
        matcher,
        instructions,
    }
}

/// The bytes of a flow mod with `fields` as its match, whatever they say.
fn flow_mod_bytes(fields: &[u8]) -> Vec<u8> {
    let mut bytes = Message::FlowMod(flow_mod(Match::default(), vec![]))
        .encode(1)
        .unwrap();
    bytes.truncate(48);
    let len = 4 + fields.len();
    bytes.extend_from_slice(&[0, 1, 0, len as u8]);
    bytes.extend_from_slice(fields);
    bytes.resize(48 + len.next_multiple_of(8), 0);
    let total = bytes.len() as u16;
    bytes[2..4].copy_from_slice(&total.to_be_bytes());
    bytes
}

#[test]
fn match_errors_are_the_specs() {
    let ipv4_dst = [0x80, 0x00, 0x18, 0x04, 10, 0, 0, 1];
    assert_eq!(
        decode(&flow_mod_bytes(&ipv4_dst)),
        Err(OfError::BAD_MATCH_PREREQ)
    );
    let eth_type = [0x80, 0x00, 0x0a, 0x02, 0x08, 0x00];
    let twice = [eth_type, eth_type].concat();
    assert_eq!(
        decode(&flow_mod_bytes(&twice)),
        Err(OfError::BAD_MATCH_DUP_FIELD)
    );
    // mpls_label (34) is not ours.
    let mpls = [0x80, 0x00, 34 << 1, 0x04, 0, 0, 0, 1];
    assert_eq!(
        decode(&flow_mod_bytes(&mpls)),
        Err(OfError::BAD_MATCH_FIELD)
    );
    // eth_type may not be masked.
    let masked = [0x80, 0x00, 0x0b, 0x04, 0x08, 0x00, 0xff, 0xff];
    assert_eq!(
        decode(&flow_mod_bytes(&masked)),
        Err(OfError::BAD_MATCH_MASK)
    );
    // eth_type with 3 bytes.
    let long = [0x80, 0x00, 0x0a, 0x03, 0x08, 0x00, 0x00];
    assert_eq!(decode(&flow_mod_bytes(&long)), Err(OfError::BAD_MATCH_LEN));
    // Value bits outside the mask.
    let wild = [
        eth_type.as_slice(),
        &[0x80, 0x00, 0x19, 0x08, 10, 0, 0, 1, 255, 0, 0, 0],
    ]
    .concat();
    assert_eq!(
        decode(&flow_mod_bytes(&wild)),
        Err(OfError::BAD_MATCH_WILDCARDS)
    );
    let pcp = [
        0x80, 0x00, 0x0c, 0x02, 0x10, 0x05, 0x80, 0x00, 0x0e, 0x01, 9,
    ];
    assert_eq!(decode(&flow_mod_bytes(&pcp)), Err(OfError::BAD_MATCH_VALUE));
    // A field header cut short.
    assert_eq!(
        decode(&flow_mod_bytes(&[0x80, 0x00, 0x0a])),
        Err(OfError::BAD_MATCH_LEN)
    );
    // Standard (OF 1.1) match type.
    let mut standard = flow_mod_bytes(&[]);
    standard[49] = 0;
    assert_eq!(decode(&standard), Err(OfError::BAD_MATCH_TYPE));
}

#[test]
fn instruction_and_action_errors_are_the_specs() {
    let with = |instructions: &[u8]| {
        let mut bytes = flow_mod_bytes(&[]);
        bytes.extend_from_slice(instructions);
        let total = bytes.len() as u16;
        bytes[2..4].copy_from_slice(&total.to_be_bytes());
        decode(&bytes)
    };
    assert_eq!(
        with(&[0, 9, 0, 8, 0, 0, 0, 0]),
        Err(OfError::BAD_INSTRUCTION_UNKNOWN)
    );
    assert_eq!(with(&[0, 1, 0, 6, 1, 0]), Err(OfError::BAD_INSTRUCTION_LEN));
    assert_eq!(
        with(&[0, 1, 0, 16, 1, 0, 0, 0]),
        Err(OfError::BAD_INSTRUCTION_LEN)
    );
    let apply = |action: &[u8]| {
        let mut i = vec![0, 4, 0, (8 + action.len()) as u8, 0, 0, 0, 0];
        i.extend_from_slice(action);
        with(&i)
    };
    // Output to ANY, unknown action (copy TTL out, 11), output of 8 bytes, bad push-VLAN TPID.
    let any = [0, 0, 0, 16, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 0];
    assert_eq!(apply(&any), Err(OfError::BAD_ACTION_OUT_PORT));
    assert_eq!(
        apply(&[0, 11, 0, 8, 0, 0, 0, 0]),
        Err(OfError::BAD_ACTION_TYPE)
    );
    assert_eq!(
        apply(&[0, 0, 0, 8, 0, 0, 0, 1]),
        Err(OfError::BAD_ACTION_LEN)
    );
    assert_eq!(
        apply(&[0, 17, 0, 8, 0x08, 0x00, 0, 0]),
        Err(OfError::BAD_ACTION_ARGUMENT)
    );
    // Set-field of mpls_label, of eth_type with a mask.
    let set = |oxm: &[u8]| {
        let mut a = vec![0, 25, 0, (4 + oxm.len()).next_multiple_of(8) as u8];
        a.extend_from_slice(oxm);
        a.resize((4 + oxm.len()).next_multiple_of(8), 0);
        apply(&a)
    };
    assert_eq!(
        set(&[0x80, 0x00, 34 << 1, 4, 0, 0, 0, 1]),
        Err(OfError::BAD_ACTION_SET_TYPE)
    );
    assert_eq!(
        set(&[
            0x80, 0x00, 0x07, 12, 1, 2, 3, 4, 5, 6, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff
        ]),
        Err(OfError::BAD_ACTION_SET_ARGUMENT)
    );
}

#[test]
fn flow_mod_errors_are_the_specs() {
    let mut bytes = flow_mod_bytes(&[]);
    bytes[25] = 9;
    assert_eq!(decode(&bytes), Err(OfError::FLOW_MOD_BAD_COMMAND));
    let mut bytes = flow_mod_bytes(&[]);
    bytes[24] = 0xff;
    assert_eq!(decode(&bytes), Err(OfError::FLOW_MOD_BAD_TABLE_ID));
    let mut bytes = flow_mod_bytes(&[]);
    bytes[53 - 8] = 0x40;
    assert_eq!(decode(&bytes), Err(OfError::FLOW_MOD_BAD_FLAGS));
}

#[test]
fn every_truncation_is_refused_with_an_error() {
    let messages = sample_messages();
    for message in &messages {
        let bytes = message.encode(3).unwrap();
        for cut in HEADER_CUTS..bytes.len() {
            let mut short = bytes[..cut].to_vec();
            short[2..4].copy_from_slice(&(cut as u16).to_be_bytes());
            // Decoding may succeed (a cut at an element boundary) but must not panic.
            let _ = Message::decode(&short);
        }
    }
}

const HEADER_CUTS: usize = 8;

fn sample_messages() -> Vec<Message> {
    let matcher = Match::new(vec![
        Oxm::InPort(1),
        Oxm::EthType(ETH_TYPE_IPV4),
        Oxm::IpProto(6),
        Oxm::TcpDst(80),
    ]);
    vec![
        Message::FlowMod(flow_mod(
            matcher.clone(),
            vec![
                Instruction::ApplyActions(vec![
                    Action::PushVlan(0x8100),
                    Action::SetField(Oxm::VlanVid(OFPVID_PRESENT | 10, None)),
                    Action::output(2),
                ]),
                Instruction::GotoTable(1),
            ],
        )),
        Message::PacketOut(PacketOut {
            buffer_id: NO_BUFFER,
            in_port: port::CONTROLLER,
            actions: vec![Action::output(1)],
            data: vec![0xab; 60],
        }),
        Message::GroupMod(GroupMod {
            command: GroupModCommand::Add,
            group_type: GroupType::All,
            group_id: 1,
            buckets: vec![Bucket {
                weight: 0,
                watch_port: port::ANY,
                watch_group: crate::action::group::ANY,
                actions: vec![Action::output(1), Action::output(2)],
            }],
        }),
        Message::MultipartReply(MultipartReply {
            flags: 0,
            body: ReplyBody::Flow(vec![FlowStats {
                table_id: 0,
                duration_sec: 1,
                duration_nsec: 2,
                priority: 3,
                idle_timeout: 4,
                hard_timeout: 5,
                flags: 0,
                cookie: 6,
                packet_count: 7,
                byte_count: 8,
                matcher,
                instructions: vec![Instruction::ApplyActions(vec![Action::output(1)])],
            }]),
        }),
        Message::MultipartReply(MultipartReply {
            flags: 0,
            body: ReplyBody::TableFeatures(vec![TableFeatures {
                table_id: 0,
                name: "t0".into(),
                metadata_match: 0,
                metadata_write: 0,
                config: 0,
                max_entries: 100,
                properties: vec![
                    TableFeatureProperty::types(property::INSTRUCTIONS, &[1, 4]),
                    TableFeatureProperty::next_tables(property::NEXT_TABLES, &[1, 2, 3]),
                    TableFeatureProperty::fields(property::MATCH, &[(0, false, 4)]),
                ],
            }]),
        }),
        Message::MultipartRequest(MultipartRequest {
            flags: 0,
            body: RequestBody::GroupFeatures,
        }),
        Message::MultipartReply(MultipartReply {
            flags: 0,
            body: ReplyBody::GroupFeatures(GroupFeatures {
                types: 7,
                capabilities: 5,
                max_groups: [1024, 1024, 1024, 0],
                actions: [1, 2, 3, 0],
            }),
        }),
        Message::MultipartReply(MultipartReply {
            flags: 0,
            body: ReplyBody::Group(vec![GroupStats {
                group_id: 1,
                ref_count: 2,
                packet_count: 3,
                byte_count: 4,
                duration_sec: 5,
                duration_nsec: 6,
                buckets: vec![(7, 8), (9, 10)],
            }]),
        }),
        Message::MultipartReply(MultipartReply {
            flags: 0,
            body: ReplyBody::GroupDesc(vec![GroupDesc {
                group_type: GroupType::Select,
                group_id: 2,
                buckets: vec![Bucket {
                    weight: 3,
                    watch_port: port::ANY,
                    watch_group: crate::action::group::ANY,
                    actions: vec![Action::output(1)],
                }],
            }]),
        }),
        Message::Hello {
            bitmap: Some(vec![0x10]),
        },
        Message::GetAsyncRequest,
        Message::SetAsync(AsyncConfig {
            packet_in: [1, 2],
            port_status: [3, 4],
            flow_removed: [5, 0xffff_ffff],
        }),
        Message::GetAsyncReply(AsyncConfig::default()),
    ]
}

/// The BUNDLE_ADD_MESSAGE `ovs-ofctl -O OpenFlow13 --bundle add-flow` sends for
/// [`OVS_ADD_FLOW`] in bundle 0 (ONF extension 230), laid out by hand from `ofp_bundle_add_msg`.
fn ovs_bundle_add() -> Vec<u8> {
    let mut bytes = vec![
        0x04, 0x04, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x02, // header: v4, EXPERIMENTER, length below
        0x4f, 0x4e, 0x46, 0x00, // experimenter: ONF
        0x00, 0x00, 0x08, 0xfd, // exp_type 2301: BUNDLE_ADD_MESSAGE
        0x00, 0x00, 0x00, 0x00, // bundle id 0
        0x00, 0x00, 0x00, 0x03, // pad, flags ATOMIC | ORDERED
    ];
    bytes.extend_from_slice(OVS_ADD_FLOW);
    let len = bytes.len() as u16;
    bytes[2..4].copy_from_slice(&len.to_be_bytes());
    bytes
}

#[test]
fn onf_bundles_decode_as_ovs_sends_them_and_errors_name_the_experimenter() {
    let Message::BundleAdd(add) = decode(&ovs_bundle_add()).unwrap() else {
        panic!("not a bundle add");
    };
    assert_eq!((add.bundle_id, add.flags), (0, 3));
    assert_eq!(add.message, OVS_ADD_FLOW);
    assert_eq!(Message::BundleAdd(add).encode(2).unwrap(), ovs_bundle_add());
    // An inner message longer than what carries it, or shorter than a header.
    let mut bad = ovs_bundle_add();
    bad[26..28].copy_from_slice(&0x0100u16.to_be_bytes());
    assert_eq!(decode(&bad), Err(OfError::BUNDLE_MSG_BAD_LEN));
    bad[26..28].copy_from_slice(&4u16.to_be_bytes());
    assert_eq!(decode(&bad), Err(OfError::BUNDLE_MSG_BAD_LEN));
    // Another experimenter, another ONF message.
    let mut other = ovs_bundle_add();
    other[8] = 0;
    assert_eq!(decode(&other), Err(OfError::BAD_REQUEST_EXPERIMENTER));
    let mut other = ovs_bundle_add();
    other[15] = 0xff;
    assert_eq!(decode(&other), Err(OfError::BAD_REQUEST_EXP_TYPE));

    let open = crate::BundleControl {
        bundle_id: 9,
        kind: crate::bundle::control::OPEN_REQUEST,
        flags: crate::bundle::flags::ATOMIC,
        properties: Vec::new(),
    };
    round_trip(&Message::BundleControl(open.clone()));
    assert_eq!(open.reply().kind, crate::bundle::control::OPEN_REPLY);
    // An experimenter error: type 0xffff, exp_type, then the ONF's id before the data.
    let error = Message::Error {
        error: OfError::BUNDLE_MSG_FAILED,
        data: vec![1, 2, 3],
    };
    let bytes = error.encode(5).unwrap();
    assert_eq!(
        bytes[8..19],
        [0xff, 0xff, 0x09, 0x09, 0x4f, 0x4e, 0x46, 0x00, 1, 2, 3]
    );
    round_trip(&error);
    assert_eq!(
        OfError::BUNDLE_MSG_FAILED.to_string(),
        "ONF_BUNDLE_FAILED/MSG_FAILED"
    );
}

#[test]
fn samples_round_trip() {
    for message in sample_messages() {
        round_trip(&message);
    }
}

fn mac() -> impl Strategy<Value = [u8; 6]> {
    any::<[u8; 6]>()
}

fn masked_mac() -> impl Strategy<Value = ([u8; 6], Option<[u8; 6]>)> {
    (mac(), proptest::option::of(mac()))
        .prop_map(|(v, m)| (m.map_or(v, |m| std::array::from_fn(|i| v[i] & m[i])), m))
}

fn masked_v4() -> impl Strategy<Value = (Ipv4Addr, Option<Ipv4Addr>)> {
    (any::<u32>(), proptest::option::of(any::<u32>())).prop_map(|(v, m)| {
        (
            Ipv4Addr::from(m.map_or(v, |m| v & m)),
            m.map(Ipv4Addr::from),
        )
    })
}

fn masked_v6() -> impl Strategy<Value = (Ipv6Addr, Option<Ipv6Addr>)> {
    (any::<u128>(), proptest::option::of(any::<u128>())).prop_map(|(v, m)| {
        (
            Ipv6Addr::from(m.map_or(v, |m| v & m)),
            m.map(Ipv6Addr::from),
        )
    })
}

/// A valid match: layer 2 fields, then one of the layer 3/4 shapes with its prerequisites.
fn matches() -> impl Strategy<Value = Match> {
    let l2 = (
        proptest::option::of(1u32..0xffff_ff00),
        proptest::option::of(
            (any::<u64>(), proptest::option::of(any::<u64>()))
                .prop_map(|(v, m)| (m.map_or(v, |m| v & m), m)),
        ),
        proptest::option::of(masked_mac()),
        proptest::option::of(masked_mac()),
        proptest::option::of((0u16..4096, 0u8..8)),
    );
    let l3 = prop_oneof![
        Just(vec![]),
        (
            masked_v4(),
            masked_v4(),
            (0u8..64, 0u8..4),
            any::<(u16, u16)>(),
            0u8..3
        )
            .prop_map(|(s, d, (dscp, ecn), (sp, dp), l4)| {
                let mut f = vec![
                    Oxm::EthType(ETH_TYPE_IPV4),
                    Oxm::IpDscp(dscp),
                    Oxm::IpEcn(ecn),
                    Oxm::Ipv4Src(s.0, s.1),
                    Oxm::Ipv4Dst(d.0, d.1),
                ];
                match l4 {
                    0 => f.extend([Oxm::IpProto(6), Oxm::TcpSrc(sp), Oxm::TcpDst(dp)]),
                    1 => f.extend([Oxm::IpProto(17), Oxm::UdpSrc(sp), Oxm::UdpDst(dp)]),
                    _ => f.extend([
                        Oxm::IpProto(1),
                        Oxm::Icmpv4Type(sp as u8),
                        Oxm::Icmpv4Code(dp as u8),
                    ]),
                }
                f
            }),
        (masked_v6(), masked_v6(), any::<(u8, u8)>()).prop_map(|(s, d, (t, c))| vec![
            Oxm::EthType(0x86dd),
            Oxm::Ipv6Src(s.0, s.1),
            Oxm::Ipv6Dst(d.0, d.1),
            Oxm::IpProto(58),
            Oxm::Icmpv6Type(t),
            Oxm::Icmpv6Code(c),
        ]),
        (any::<u16>(), masked_v4(), masked_v4()).prop_map(|(op, s, t)| vec![
            Oxm::EthType(0x0806),
            Oxm::ArpOp(op),
            Oxm::ArpSpa(s.0, s.1),
            Oxm::ArpTpa(t.0, t.1),
        ]),
    ];
    (l2, l3).prop_map(|((in_port, metadata, src, dst, vlan), l3)| {
        let mut fields = Vec::new();
        fields.extend(in_port.map(Oxm::InPort));
        fields.extend(metadata.map(|(v, m)| Oxm::Metadata(v, m)));
        fields.extend(src.map(|(v, m)| Oxm::EthSrc(v, m)));
        fields.extend(dst.map(|(v, m)| Oxm::EthDst(v, m)));
        if let Some((vid, pcp)) = vlan {
            fields.push(Oxm::VlanVid(OFPVID_PRESENT | vid, None));
            fields.push(Oxm::VlanPcp(pcp));
        }
        fields.extend(l3);
        Match::new(fields)
    })
}

fn actions() -> impl Strategy<Value = Vec<Action>> {
    let action = prop_oneof![
        (1u32..0xffff_ff00, any::<u16>())
            .prop_map(|(port, max_len)| Action::Output { port, max_len }),
        prop_oneof![
            Just(port::IN_PORT),
            Just(port::FLOOD),
            Just(port::ALL),
            Just(port::CONTROLLER),
            Just(port::TABLE)
        ]
        .prop_map(Action::output),
        mac().prop_map(|m| Action::SetField(Oxm::EthDst(m, None))),
        any::<u32>().prop_map(|a| Action::SetField(Oxm::Ipv4Src(Ipv4Addr::from(a), None))),
        any::<u128>().prop_map(|a| Action::SetField(Oxm::Ipv6Dst(Ipv6Addr::from(a), None))),
        (0u16..4096).prop_map(|v| Action::SetField(Oxm::VlanVid(OFPVID_PRESENT | v, None))),
        any::<u16>().prop_map(|p| Action::SetField(Oxm::TcpDst(p))),
        prop_oneof![Just(0x8100u16), Just(0x88a8)].prop_map(Action::PushVlan),
        Just(Action::PopVlan),
        Just(Action::DecNwTtl),
        any::<u8>().prop_map(Action::SetNwTtl),
        (0u32..=0xffff_ff00).prop_map(Action::Group),
    ];
    proptest::collection::vec(action, 0..6)
}

fn instructions() -> impl Strategy<Value = Vec<Instruction>> {
    (
        proptest::option::of(actions()),
        proptest::option::of(actions()),
        any::<bool>(),
        proptest::option::of(any::<(u64, u64)>()),
        proptest::option::of(0u8..0xff),
    )
        .prop_map(|(apply, write, clear, metadata, goto)| {
            let mut out = Vec::new();
            out.extend(apply.map(Instruction::ApplyActions));
            if clear {
                out.push(Instruction::ClearActions);
            }
            out.extend(write.map(Instruction::WriteActions));
            out.extend(
                metadata.map(|(metadata, mask)| Instruction::WriteMetadata { metadata, mask }),
            );
            out.extend(goto.map(Instruction::GotoTable));
            out
        })
}

fn flow_mods() -> impl Strategy<Value = FlowMod> {
    (
        matches(),
        instructions(),
        any::<(u64, u64, u16, u16, u16)>(),
        (0u8..0xff, 0u8..5, 0u16..32),
    )
        .prop_map(
            |(
                matcher,
                instructions,
                (cookie, cookie_mask, idle, hard, priority),
                (table, command, flags),
            )| {
                let command = [
                    FlowModCommand::Add,
                    FlowModCommand::Modify,
                    FlowModCommand::ModifyStrict,
                    FlowModCommand::Delete,
                    FlowModCommand::DeleteStrict,
                ][usize::from(command)];
                FlowMod {
                    cookie,
                    cookie_mask,
                    table_id: table,
                    command,
                    idle_timeout: idle,
                    hard_timeout: hard,
                    priority,
                    buffer_id: NO_BUFFER,
                    out_port: port::ANY,
                    out_group: crate::action::group::ANY,
                    flags,
                    matcher,
                    instructions,
                }
            },
        )
}

proptest! {
    #[test]
    fn flow_mods_round_trip(flow in flow_mods()) {
        round_trip(&Message::FlowMod(flow));
    }

    #[test]
    fn packet_ins_and_flow_stats_round_trip(
        matcher in matches(),
        instructions in instructions(),
        data in proptest::collection::vec(any::<u8>(), 0..200),
        counts in any::<(u64, u64, u32, u32)>(),
    ) {
        round_trip(&Message::PacketIn(PacketIn {
            buffer_id: NO_BUFFER,
            total_len: data.len() as u16,
            reason: 0,
            table_id: 1,
            cookie: counts.0,
            matcher: matcher.clone(),
            data: data.clone(),
        }));
        round_trip(&Message::MultipartRequest(MultipartRequest {
            flags: 0,
            body: RequestBody::Flow(FlowStatsRequest {
                table_id: 0xff,
                out_port: port::ANY,
                out_group: crate::action::group::ANY,
                cookie: counts.0,
                cookie_mask: counts.1,
                matcher: matcher.clone(),
            }),
        }));
        round_trip(&Message::MultipartReply(MultipartReply {
            flags: 1,
            body: ReplyBody::Flow(vec![FlowStats {
                table_id: 2,
                duration_sec: counts.2,
                duration_nsec: counts.3,
                priority: 9,
                idle_timeout: 1,
                hard_timeout: 2,
                flags: 1,
                cookie: counts.0,
                packet_count: counts.1,
                byte_count: counts.0,
                matcher,
                instructions,
            }]),
        }));
    }

    /// Whatever bytes come in, decoding answers without panicking, and what it accepts
    /// encodes back to the same bytes.
    #[test]
    fn arbitrary_bytes_never_panic(kind in 0u8..30, body in proptest::collection::vec(any::<u8>(), 0..300)) {
        let mut bytes = vec![4, kind, 0, 0, 0, 0, 0, 9];
        bytes.extend_from_slice(&body);
        let len = bytes.len() as u16;
        bytes[2..4].copy_from_slice(&len.to_be_bytes());
        if let Ok((_, message)) = Message::decode(&bytes)
            && !matches!(message, Message::Hello { .. })
        {
            // Padding bytes need not be zero on the way in; compare what they frame.
            let again = message.encode(9).unwrap();
            prop_assert_eq!(Message::decode(&again).unwrap().1, message);
        }
    }
}

/// Found by the fuzz target: a name that is not UTF-8 (or fills its field without a NUL) is
/// read up to what can be written back the same.
#[test]
fn strings_that_are_not_utf8_round_trip() {
    let mut bytes = Message::PortStatus {
        reason: 0,
        port: PortDesc::default(),
    }
    .encode(1)
    .unwrap();
    // ofp_port's name: header 8, reason and pad 8, port_no, pad, hw_addr, pad: 16.
    for (at, byte) in [(32, 0x61), (33, 0xff), (34, 0x62)] {
        bytes[at] = byte;
    }
    let (_, message) = Message::decode(&bytes).unwrap();
    let Message::PortStatus { port, .. } = &message else {
        unreachable!()
    };
    assert_eq!(port.name, "a");
    round_trip(&message);
    bytes[32..48].fill(b'x');
    let (_, message) = Message::decode(&bytes).unwrap();
    round_trip(&message);
}
