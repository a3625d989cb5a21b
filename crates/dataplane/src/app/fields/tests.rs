//! Rules as text in, typed rules or the exact refusal out.

use super::*;

fn fields(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(n, v)| (n.to_string(), v.to_string()))
        .collect()
}

fn ports(name: &str) -> Option<u16> {
    match name {
        "p0" => Some(0),
        "p1" => Some(1),
        _ => None,
    }
}

#[test]
fn acl_fields_become_a_typed_rule() {
    let rule = command::AclRule {
        action: command::AclAction::Deny,
        fields: fields(&[
            ("proto", "udp"),
            ("src", "2001:db8:1::/48"),
            ("dst_port", "1000-2000"),
            ("ip_dst", "2001:db8::1"),
        ]),
    };
    let typed = acl_rule(&rule).unwrap();
    let mut expected = acl::AclRule::any(acl::AclAction::Deny);
    expected.protocol = Some(17);
    expected.src = IpPrefix::v6("2001:db8:1::".parse().unwrap(), 48);
    expected.dst_ports = 1000..=2000;
    expected.dst = IpPrefix::v6("2001:db8::1".parse().unwrap(), 128);
    assert_eq!(typed, expected);
}

#[test]
fn acl_errors_name_the_rule_and_field() {
    let good = command::AclRule {
        action: command::AclAction::Permit,
        fields: vec![],
    };
    let bad = command::AclRule {
        action: command::AclAction::Deny,
        fields: fields(&[("dst_port", "2000-1000")]),
    };
    let e = acl_rules(&[good.clone(), bad]).unwrap_err();
    assert_eq!(e.place, "rule 1 field dst_port");
    assert!(e.to_string().contains("a port or range"), "{e}");
    let unknown = command::AclRule {
        action: command::AclAction::Deny,
        fields: fields(&[("colour", "red")]),
    };
    let e = acl_rules(&[good, unknown]).unwrap_err();
    assert!(e.to_string().contains("not an ACL field"), "{e}");
    assert!(e.accepted.contains("dst_port"), "{e}");
    for value in ["10.0.0.0/33", "x", "::/129", ""] {
        assert!(parse_prefix(value).is_none(), "{value}");
    }
}

#[test]
fn a_flow_rule_round_trips_through_text() {
    let rule = FlowRule {
        priority: 7,
        fields: fields(&[
            ("table", "1"),
            ("in_port", "p0"),
            ("ip_dst", "10.0.0.0/8"),
            ("ip_proto", "udp"),
            ("l4_dst", "53"),
            ("vlan", "none"),
            ("goto", "2"),
            ("idle_timeout", "30"),
        ]),
        actions: vec![
            "set_field:eth_dst=02:00:00:00:00:09".into(),
            "dec_ttl".into(),
            "push_vlan:100".into(),
            "output:p1".into(),
        ],
    };
    let parsed = flow_rule(&rule, &ports).unwrap();
    assert_eq!(parsed.table, 1);
    assert_eq!(parsed.entry.goto, Some(2));
    assert_eq!(parsed.entry.idle_timeout, 30);
    let expected = FlowMatch::any()
        .in_port(0)
        .ipv4_dst(Ipv4Addr::new(10, 0, 0, 0), 8)
        .ip_proto(17)
        .l4_dst(53)
        .untagged();
    assert_eq!(parsed.entry.matcher, expected);
    let name = |p: u16| format!("p{p}");
    assert_eq!(
        match_text(&parsed.entry.matcher, &name),
        "in_port=p0,eth_type=0x0800,vlan=none,ip_proto=17,ip_dst=10.0.0.0/8,l4_dst=53"
    );
    assert_eq!(
        actions_text(&parsed.entry.actions, &name),
        "set_field:eth_dst=02:00:00:00:00:09,dec_ttl,push_vlan:100,output:p1"
    );
}

#[test]
fn new_fields_masks_and_instructions_round_trip_through_text() {
    let name = |p: u16| format!("p{p}");
    let round_trip = |pairs: &[(&str, &str)], actions: &[&str], text: &str, actions_out: &str| {
        let rule = FlowRule {
            priority: 3,
            fields: fields(pairs),
            actions: actions.iter().map(|a| a.to_string()).collect(),
        };
        let parsed = flow_rule(&rule, &ports).unwrap();
        assert_eq!(match_text(&parsed.entry.matcher, &name), text);
        assert_eq!(entry_actions_text(&parsed.entry, &name), actions_out);
        parsed.entry
    };
    let entry = round_trip(
        &[
            ("dl_vlan_pcp", "5"),
            ("eth_dst", "01:00:00:00:00:00/01:00:00:00:00:00"),
            ("metadata", "0x10/0xff"),
        ],
        &[
            "dec_ttl",
            "clear_actions",
            "write:set_field:eth_src=02:00:00:00:00:09",
            "write:output:p1",
            "write_metadata:0x2/0xf",
        ],
        "eth_dst=01:00:00:00:00:00/01:00:00:00:00:00,vlan_pcp=5,metadata=0x10/0xff",
        "dec_ttl,clear_actions,write:set_field:eth_src=02:00:00:00:00:09,write:output:p1,\
         write_metadata:0x2/0xf",
    );
    assert_eq!(
        entry.matcher,
        FlowMatch::any()
            .vlan_pcp(5)
            .eth_dst_masked(
                EthernetAddress([1, 0, 0, 0, 0, 0]),
                EthernetAddress([1, 0, 0, 0, 0, 0])
            )
            .metadata(0x10, 0xff)
    );
    assert_eq!(entry.actions, [Action::DecTtl]);
    assert!(entry.clear_actions);
    assert_eq!(entry.write_actions[1], Action::Output(1));
    assert_eq!(entry.write_metadata, Some((2, 0xf)));
    round_trip(
        &[
            ("eth_type", "0x0800"),
            ("ip_proto", "icmp"),
            ("icmpv4_type", "8"),
            ("icmp_code", "0"),
        ],
        &["write:output:p0"],
        "eth_type=0x0800,ip_proto=1,icmp_type=8,icmp_code=0",
        "write:output:p0",
    );
    round_trip(
        &[
            ("arp_op", "1"),
            ("arp_tpa", "10.0.0.0/24"),
            ("arp_spa", "10.0.0.1/255.0.0.255"),
        ],
        &["flood"],
        "eth_type=0x0806,arp_op=1,arp_spa=10.0.0.1/255.0.0.255,arp_tpa=10.0.0.0/24",
        "flood",
    );
    round_trip(
        &[("ip_dst", "2001:db8::1/ffff::ffff"), ("vlan", "any")],
        &[],
        "eth_type=0x86dd,vlan=any,ip_dst=2001::1/ffff::ffff",
        "drop",
    );
    // DSCP and ECN: two parts of the key's TOS byte, each matched on its own bits.
    let entry = round_trip(
        &[("eth_type", "0x0800"), ("ip_dscp", "46")],
        &["output:p1"],
        "eth_type=0x0800,ip_dscp=46",
        "output:p1",
    );
    let tos = |tos: u8| FlowKey {
        ethertype: 0x0800,
        ip_tos: tos,
        ..FlowKey::EMPTY
    };
    assert!(entry.matcher.matches(&tos(46 << 2)));
    assert!(entry.matcher.matches(&tos(46 << 2 | 3)), "ECN is not DSCP");
    assert!(!entry.matcher.matches(&tos(0)));
    let entry = round_trip(
        &[("ip_src", "2001:db8::1"), ("nw_ecn", "3"), ("dscp", "10")],
        &[],
        "eth_type=0x86dd,ip_dscp=10,ip_ecn=3,ip_src=2001:db8::1",
        "drop",
    );
    assert_eq!(entry.matcher.mask().ip_tos, 0xff);
}

/// The refusal of a flow rule of `pairs` and `actions`.
fn flow_error(pairs: &[(&str, &str)], actions: &[&str]) -> FieldError {
    let rule = FlowRule {
        priority: 0,
        fields: fields(pairs),
        actions: actions.iter().map(|a| a.to_string()).collect(),
    };
    flow_rule(&rule, &ports).unwrap_err()
}

#[test]
fn new_fields_and_instructions_refuse_what_could_never_work() {
    let error = flow_error;
    let e = error(&[("vlan_pcp", "8")], &[]);
    assert!(e.problem.contains("0..7"), "{e}");
    let e = error(&[("vlan", "none"), ("vlan_pcp", "1")], &[]);
    assert_eq!(e.place, "field vlan_pcp");
    let e = error(&[("icmp_type", "8")], &[]);
    assert!(e.accepted.contains("ip_proto=icmp"), "{e}");
    let e = error(&[("ip_dscp", "46")], &[]);
    assert!(e.problem.contains("IP packets"), "{e}");
    let e = error(&[("eth_type", "0x0800"), ("ip_dscp", "64")], &[]);
    assert!(e.problem.contains("0..63"), "{e}");
    let e = error(&[("eth_type", "0x0800"), ("ip_ecn", "4")], &[]);
    assert!(e.problem.contains("0..3"), "{e}");
    let e = error(
        &[
            ("eth_type", "0x86dd"),
            ("ip_proto", "icmpv6"),
            ("icmp_type", "1"),
            ("icmpv6_type", "1"),
        ],
        &[],
    );
    assert_eq!(e.place, "field icmpv6_type");
    let e = error(
        &[
            ("ip_proto", "tcp"),
            ("eth_type", "0x0800"),
            ("icmp_type", "3"),
        ],
        &[],
    );
    assert!(e.problem.contains("icmp"), "{e}");
    let e = error(&[("arp_op", "0")], &[]);
    assert!(e.problem.contains("1..255"), "{e}");
    let e = error(&[("arp_op", "256")], &[]);
    assert!(e.problem.contains("1..255"), "{e}");
    let e = error(&[("arp_op", "1"), ("eth_type", "0x0800")], &[]);
    assert_eq!(e.place, "field eth_type");
    let e = error(&[("arp_tpa", "10.0.0.1"), ("ip_src", "10.0.0.2")], &[]);
    assert!(e.accepted.contains("not both"), "{e}");
    let e = error(&[("arp_spa", "2001:db8::1")], &[]);
    assert!(e.problem.contains("IPv4"), "{e}");
    let e = error(&[("ip_src", "10.0.0.1/ffff::")], &[]);
    assert!(e.problem.contains("address/mask"), "{e}");
    let e = error(&[("eth_src", "02:00:00:00:00:01/ff")], &[]);
    assert!(e.problem.contains("MAC/MASK"), "{e}");
    let e = error(&[("metadata", "0x1/x")], &[]);
    assert!(e.problem.contains("VALUE/MASK"), "{e}");
    let e = error(&[], &["write:drop"]);
    assert_eq!(e.place, "action write:drop");
    assert!(e.accepted.contains("clear_actions"), "{e}");
    let e = error(&[], &["write_metadata:zz"]);
    assert_eq!(e.place, "action write_metadata:zz");
    let e = error(&[], &["write:set_field:l4_dst=53"]);
    assert!(e.accepted.contains("ip_proto=tcp"), "{e}");
}

#[test]
fn flow_errors_name_the_field_or_action_and_list_what_is_accepted() {
    let error = flow_error;
    let e = error(&[("colour", "red")], &["drop"]);
    assert_eq!(e.place, "field colour");
    assert!(
        e.accepted.contains("ip_dst") && e.accepted.contains("goto"),
        "{e}"
    );
    let e = error(&[("in_port", "p9")], &["drop"]);
    assert!(e.problem.contains("port"), "{e}");
    let e = error(&[], &["output:p9"]);
    assert_eq!(e.place, "action output:p9");
    let e = error(&[], &["teleport"]);
    assert!(e.accepted.contains("set_field"), "{e}");
    let e = error(&[], &["set_field:colour=red"]);
    assert!(e.problem.contains("colour"), "{e}");
    let e = error(&[("vlan", "4095")], &["drop"]);
    assert!(e.problem.contains("VLAN"), "{e}");
    let e = error(&[("idle_timeout", "70000")], &["drop"]);
    assert!(e.place.contains("idle_timeout"), "{e}");
}

fn acl(pairs: &[(&str, &str)]) -> Result<acl::AclRule, FieldError> {
    acl_rule(&command::AclRule {
        action: command::AclAction::Deny,
        fields: fields(pairs),
    })
}

#[test]
fn an_acl_field_given_twice_is_refused_under_any_name() {
    let e = acl(&[("src", "10.0.0.0/8"), ("src", "192.0.2.0/24")]).unwrap_err();
    assert_eq!(e.place, "field src");
    assert_eq!(
        e.problem,
        "is given twice (src=10.0.0.0/8, then src=192.0.2.0/24); a rule holds one value \
         per field"
    );
    assert!(e.accepted.contains("second rule"), "{e}");
    let e = acl(&[("dst_port", "53"), ("proto", "udp"), ("l4_dst", "54")]).unwrap_err();
    assert_eq!(e.place, "field l4_dst");
    assert!(e.problem.contains("dst_port=53, then l4_dst=54"), "{e}");
    let e = acl(&[("ip_proto", "tcp"), ("protocol", "udp")]).unwrap_err();
    assert_eq!(e.place, "field protocol");
}

#[test]
fn acl_rules_that_could_never_match_are_refused() {
    let e = acl(&[("proto", "icmp"), ("dst_port", "53")]).unwrap_err();
    assert_eq!(
        (e.place.as_str(), e.problem.as_str()),
        (
            "field dst_port",
            "protocol 1 has no ports; the rule could never match"
        )
    );
    assert!(e.accepted.contains("proto=tcp or proto=udp"), "{e}");
    let e = acl(&[("src_port", "1-9"), ("proto", "47")]).unwrap_err();
    assert_eq!(e.place, "field src_port");
    let e = acl(&[("src", "10.0.0.0/8"), ("dst", "2001:db8::/32")]).unwrap_err();
    assert_eq!(e.place, "field dst");
    assert_eq!(
        e.problem,
        "2001:db8::/32 is IPv6 but src=10.0.0.0/8 is IPv4; the rule could never match"
    );
    let e = acl(&[("proto", "icmp"), ("dst", "2001:db8::/32")]).unwrap_err();
    assert_eq!(e.place, "field proto");
    assert!(e.problem.contains("not carried by IPv6"), "{e}");
    assert!(e.accepted.contains("proto=icmpv6 with IPv6"), "{e}");
    let e = acl(&[("ip_src", "10.0.0.0/8"), ("ip_proto", "icmpv6")]).unwrap_err();
    assert_eq!(e.place, "field ip_proto");
    // What can match still converts: ports without a protocol match TCP and UDP.
    let rule = acl(&[("dst_port", "53")]).unwrap();
    assert_eq!((rule.protocol, rule.dst_ports), (None, 53..=53));
    for good in [
        &[("proto", "tcp"), ("src_port", "1000-2000")][..],
        &[("proto", "icmpv6"), ("dst", "2001:db8::/32")],
        &[
            ("proto", "icmp"),
            ("src", "10.0.0.0/8"),
            ("dst", "192.0.2.1"),
        ],
        &[("proto", "47"), ("src", "2001:db8::1")],
    ] {
        assert!(acl(good).is_ok(), "{good:?}");
    }
}

fn flow(pairs: &[(&str, &str)]) -> Result<ParsedFlow, FieldError> {
    let rule = FlowRule {
        priority: 1,
        fields: fields(pairs),
        actions: vec!["drop".into()],
    };
    flow_rule(&rule, &ports)
}

#[test]
fn a_flow_field_or_instruction_given_twice_is_refused() {
    let e = flow(&[("in_port", "p0"), ("in_port", "p1")]).unwrap_err();
    assert_eq!(e.place, "field in_port");
    assert!(e.problem.contains("in_port=p0, then in_port=p1"), "{e}");
    assert!(e.accepted.contains("second flow"), "{e}");
    let e = flow(&[("ip_dst", "10.0.0.0/8"), ("nw_dst", "10.1.0.0/16")]).unwrap_err();
    assert_eq!(e.place, "field nw_dst");
    let e = flow(&[("vlan", "none"), ("dl_vlan", "100")]).unwrap_err();
    assert_eq!(e.place, "field dl_vlan");
    let e = flow(&[("table", "1"), ("table", "2")]).unwrap_err();
    assert_eq!(e.place, "field table");
    let e = flow(&[("goto", "2"), ("goto_table", "3")]).unwrap_err();
    assert_eq!(e.place, "field goto_table");
}

#[test]
fn flow_fields_without_their_prerequisites_are_refused() {
    let error = |pairs: &[(&str, &str)]| {
        let e = flow(pairs).unwrap_err();
        (e.place.clone(), e.problem.clone(), e.accepted.clone())
    };
    // Was: eth_type silently rewritten to 0x0800 by the address.
    let (place, problem, accepted) = error(&[("eth_type", "0x86dd"), ("ip_src", "10.0.0.0/8")]);
    assert_eq!(place, "field eth_type");
    assert_eq!(
        problem,
        "eth_type=0x86dd is not the EtherType of IPv4 packets, which ip_src=10.0.0.0/8 \
         matches; the rule could never match"
    );
    assert!(accepted.contains("eth_type=0x0800 with IPv4"), "{accepted}");
    let (place, problem, _) = error(&[("ip_src", "10.0.0.0/8"), ("ip_dst", "2001:db8::1")]);
    assert_eq!(place, "field ip_dst");
    assert!(
        problem.contains("is IPv6 but ip_src=10.0.0.0/8 is IPv4"),
        "{problem}"
    );
    let (place, problem, accepted) = error(&[("ip_proto", "udp")]);
    assert_eq!(place, "field ip_proto");
    assert!(problem.contains("needs IP packets"), "{problem}");
    assert!(accepted.contains("eth_type=0x0800"), "{accepted}");
    let (place, _, _) = error(&[("eth_type", "0x0806"), ("ip_proto", "1")]);
    assert_eq!(place, "field ip_proto");
    let (place, problem, _) = error(&[("ip_dst", "2001:db8::/32"), ("ip_proto", "icmp")]);
    assert_eq!(place, "field ip_proto");
    assert!(problem.contains("not carried by IPv6"), "{problem}");
    let (place, problem, _) = error(&[("eth_type", "0x0800"), ("l4_dst", "53")]);
    assert_eq!(place, "field l4_dst");
    assert!(
        problem.contains("needs ip_proto=tcp or ip_proto=udp"),
        "{problem}"
    );
    let (place, problem, _) = error(&[
        ("eth_type", "0x0800"),
        ("ip_proto", "icmp"),
        ("tp_src", "8"),
    ]);
    assert_eq!(place, "field tp_src");
    assert!(problem.contains("protocol 1 has no ports"), "{problem}");
    let (place, problem, accepted) = error(&[("vlan", "100"), ("eth_type", "0x8100")]);
    assert_eq!(place, "field eth_type");
    assert!(problem.contains("VLAN tag's"), "{problem}");
    assert!(accepted.contains("vlan=VID"), "{accepted}");
    // Consistent rules convert, with the EtherType an address implies.
    let parsed = flow(&[
        ("eth_type", "0x86dd"),
        ("ip_dst", "2001:db8::/32"),
        ("ip_proto", "icmpv6"),
    ])
    .unwrap();
    assert_eq!(parsed.entry.matcher.key().ethertype, 0x86dd);
    let parsed = flow(&[
        ("eth_type", "0x0800"),
        ("ip_proto", "udp"),
        ("l4_dst", "53"),
    ]);
    assert_eq!(
        parsed.unwrap().entry.matcher,
        FlowMatch::any().ethertype(0x0800).ip_proto(17).l4_dst(53)
    );
    assert!(flow(&[("vlan", "100"), ("eth_type", "0x0806")]).is_ok());
}

#[test]
fn a_set_field_needs_a_match_that_takes_its_packets() {
    let with = |pairs: &[(&str, &str)], action: &str| {
        let rule = FlowRule {
            priority: 1,
            fields: fields(pairs),
            actions: vec![action.into(), "output:p1".into()],
        };
        flow_rule(&rule, &ports)
    };
    let e = with(&[("in_port", "p0")], "set_field:ip_dst=10.0.0.1").unwrap_err();
    assert_eq!(e.place, "action set_field:ip_dst=10.0.0.1");
    assert_eq!(
        e.problem,
        "sets an IPv4 address, but the match does not take only IPv4 packets"
    );
    assert!(e.accepted.contains("eth_type=0x0800"), "{e}");
    let e = with(&[("ip_dst", "10.0.0.0/8")], "set_field:ip_src=2001:db8::1").unwrap_err();
    assert!(e.problem.contains("IPv6 address"), "{e}");
    let e = with(&[("eth_type", "0x0800")], "set_field:l4_dst=53").unwrap_err();
    assert_eq!(
        e.problem,
        "sets a port, but the match does not take only TCP or UDP packets"
    );
    let e = with(
        &[("eth_type", "0x86dd"), ("ip_proto", "icmpv6")],
        "set_field:l4_src=1",
    );
    assert!(e.is_err());
    assert!(with(&[("eth_type", "0x86dd")], "set_field:ip_dst=2001:db8::1").is_ok());
    assert!(
        with(
            &[("ip_dst", "10.0.0.0/8"), ("ip_proto", "udp")],
            "set_field:l4_dst=53"
        )
        .is_ok()
    );
    assert!(with(&[], "set_field:eth_dst=02:00:00:00:00:01").is_ok());
}

proptest::proptest! {
    /// Rules come from files and sockets: any text converts or is refused, never panics,
    /// and what converts prints back into text that converts to the same rule.
    #[test]
    fn any_text_converts_or_is_refused(
        pairs in proptest::collection::vec(
            ("(in_port|ip_src|ip_dst|src|dst|proto|ip_proto|l4_src|dst_port|vlan|vlan_pcp|eth_dst|eth_type|icmp_type|icmp_code|arp_op|arp_spa|arp_tpa|metadata|table|goto|[a-z_]{1,8})",
             "([0-9a-fx:./-]{0,20}|p[0-9]|none|any|udp|tcp|icmp|0x0806|[0-9]{1,6})"),
            0..6,
        ),
        actions in proptest::collection::vec(
            "((write:)?(output:p[0-9]|drop|flood|dec_ttl|pop_vlan|push_vlan:[0-9]{1,5}|set_field:(eth_dst|ip_src|l4_dst|vlan_vid)=[0-9a-f:.]{0,17})|clear_actions|write_metadata:[0-9a-fx/]{0,9}|[a-z_:=0-9]{0,12})",
            0..4,
        ),
    ) {
        let fields: Vec<(String, String)> = pairs;
        let _ = acl_rule(&command::AclRule {
            action: command::AclAction::Deny,
            fields: fields.clone(),
        });
        let rule = FlowRule { priority: 1, fields, actions };
        if let Ok(parsed) = flow_rule(&rule, &ports) {
            let name = |p: u16| format!("p{p}");
            let text = match_text(&parsed.entry.matcher, &name);
            let mut again = FlowRule {
                priority: 1,
                fields: vec![("table".into(), parsed.table.to_string())],
                actions: entry_actions_text(&parsed.entry, &name)
                    .split(',')
                    .map(str::to_string)
                    .collect(),
            };
            if text != "*" {
                for part in text.split(',') {
                    let (n, v) = part.split_once('=').unwrap();
                    again.fields.push((n.into(), v.into()));
                }
            }
            let reparsed = flow_rule(&again, &|n: &str| n.strip_prefix('p').and_then(|d| d.parse().ok()));
            let entry = reparsed.map(|p| p.entry);
            proptest::prop_assert_eq!(entry.as_ref().map(|e| e.matcher), Ok(parsed.entry.matcher));
            // No actions and a lone drop are one thing (written `drop`).
            let instructions = |e: &FlowEntry| {
                let actions = if e.actions == [Action::Drop] { Vec::new() } else { e.actions.clone() };
                (actions, e.clear_actions, e.write_actions.clone(), e.write_metadata)
            };
            proptest::prop_assert_eq!(entry.map(|e| instructions(&e)), Ok(instructions(&parsed.entry)));
        }
    }
}
