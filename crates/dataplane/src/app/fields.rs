//! The one place where match fields and actions written as text (`ip_dst=10.0.0.0/8`,
//! `output:p1`, `deny proto=udp dst_port=53`) become the pipeline's typed rules, and where those
//! rules become text again for `show`.
//!
//! The TOML configuration, the control socket (`wirespeed ctl flow add ...`), route/ACL files
//! and the apps' run-time commands all carry rules as strings ([`FlowRule`], [`AclRule`]); they
//! all convert them here, so a field accepted in one place is accepted everywhere and every
//! refusal reads the same: the field (or the rule's index), what is wrong, what is accepted.
//! Everything here is control path: it allocates freely and never runs per packet.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::ops::RangeInclusive;

use wirespeed_packet::flow_key::FlowKey;
use wirespeed_packet::wire::{EtherType, EthernetAddress, IpProtocol};

use crate::app::openflow::group::{BucketSpec, GroupKind, GroupSpec};
use crate::app::openflow::{Action, FlowEntry, SetField};
use crate::command::{self, FlowRule, GroupRule};
use crate::stage::acl::{self, IpPrefix};
use crate::table::classifier::FlowMatch;

/// Match fields of a flow rule.
pub const FLOW_FIELDS: &str = "in_port, eth_src, eth_dst (a MAC address, or MAC/MASK), \
     eth_type, vlan (an id, `none` or `any`), vlan_pcp (0..7), ip_proto, ip_dscp (0..63), ip_ecn \
     (0..3), ip_src, ip_dst (an address, address/prefix or address/mask, IPv4 or IPv6), l4_src, l4_dst, icmp_type, icmp_code \
     (with ip_proto=icmp or icmpv6), arp_op (1..255), arp_spa, arp_tpa (an IPv4 address, \
     prefix or mask), metadata (VALUE or VALUE/MASK, as earlier tables wrote it)";
/// Instructions written as fields of a flow rule.
pub const FLOW_INSTRUCTIONS: &str = "table, goto, idle_timeout, hard_timeout, cookie, flags \
     (send_flow_rem, check_overlap, both joined by +, or -)";
/// Actions of a flow rule.
pub const FLOW_ACTIONS: &str = "output:PORT, flood, drop, set_field:FIELD=VALUE (eth_src, \
     eth_dst, ip_src, ip_dst, l4_src, l4_dst, vlan_vid), push_vlan:VID, pop_vlan, dec_ttl, \
     controller[:MAX_LEN] (a PACKET_IN to the OpenFlow controller), group:ID; instructions among them: \
     clear_actions (empties the action set), write:ACTION (into the action set, which runs \
     when the pipeline ends; one action of each kind), write_metadata:VALUE[/MASK] (for \
     later tables' metadata match)";
/// How a group rule is written.
pub const GROUP_FORM: &str = "id=N (0..=0xffffff00), type=all|select|indirect, one or more \
     bucket=[weight:N,]ACTION,ACTION... with the actions of a flow but drop";
/// Match fields of an ACL rule.
pub const ACL_FIELDS: &str = "src (or ip_src), dst (or ip_dst): address or prefix; proto (or \
     ip_proto): tcp, udp, icmp, icmpv6 or a number; src_port (or l4_src), dst_port (or l4_dst): \
     a port or a range such as 1000-2000";

/// Why a rule written as text was refused: the field (or action) and how to write it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{place}: {problem}; accepted: {accepted}")]
pub struct FieldError {
    /// `field ip_dst`, `action output:p9`, `rule 3 field dst_port`.
    pub place: String,
    pub problem: String,
    pub accepted: String,
}

impl FieldError {
    fn new(place: impl Into<String>, problem: impl Into<String>, accepted: &str) -> Self {
        FieldError {
            place: place.into(),
            problem: problem.into(),
            accepted: accepted.to_string(),
        }
    }

    /// The same error about rule `index` (0-based) of a list.
    pub fn in_rule(mut self, index: usize) -> Self {
        self.place = format!("rule {index} {}", self.place);
        self
    }
}

/// An address or prefix, either family: `10.0.0.0/8`, `192.0.2.1`, `2001:db8::/32`.
pub fn parse_prefix(text: &str) -> Option<(IpAddr, u8)> {
    let (addr, len) = match text.split_once('/') {
        Some((addr, len)) => (addr.parse::<IpAddr>().ok()?, Some(len.parse::<u8>().ok()?)),
        None => (text.parse::<IpAddr>().ok()?, None),
    };
    let max = if addr.is_ipv4() { 32 } else { 128 };
    let len = len.unwrap_or(max);
    (len <= max).then_some((addr, len))
}

/// An address with a prefix length or a mask of its family (`10.0.0.0/8`, `10.0.0.1`,
/// `10.0.0.1/255.0.255.0`, `2001:db8::/32`): the address and the mask as an address.
pub fn parse_masked(text: &str) -> Option<(IpAddr, IpAddr)> {
    if let Some((addr, mask)) = text.split_once('/')
        && let (Ok(addr), Ok(mask)) = (addr.parse::<IpAddr>(), mask.parse::<IpAddr>())
    {
        return (addr.is_ipv4() == mask.is_ipv4()).then_some((addr, mask));
    }
    let (addr, len) = parse_prefix(text)?;
    let mask = match addr {
        IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::from_bits(
            u32::MAX.checked_shl(32 - u32::from(len)).unwrap_or(0),
        )),
        IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::from_bits(
            u128::MAX.checked_shl(128 - u32::from(len)).unwrap_or(0),
        )),
    };
    Some((addr, mask))
}

/// A MAC address, or `MAC/MASK`: the address and its mask (all ones without one).
fn parse_masked_mac(text: &str) -> Option<(EthernetAddress, EthernetAddress)> {
    match text.split_once('/') {
        Some((addr, mask)) => Some((mac(addr)?, mac(mask)?)),
        None => Some((mac(text)?, EthernetAddress([0xff; 6]))),
    }
}

/// `VALUE` or `VALUE/MASK` of 64 bits (metadata): the value and its mask.
fn parse_masked_u64(text: &str) -> Option<(u64, u64)> {
    match text.split_once('/') {
        Some((value, mask)) => Some((number(value)?, number(mask)?)),
        None => Some((number(text)?, u64::MAX)),
    }
}

/// An IP protocol by name or number.
pub fn parse_protocol(text: &str) -> Option<u8> {
    match text {
        "tcp" => Some(6),
        "udp" => Some(17),
        "icmp" => Some(1),
        "icmpv6" | "icmp6" => Some(58),
        _ => text.parse().ok(),
    }
}

/// A port `N` or a range `N-M` (N <= M).
pub fn parse_port_range(text: &str) -> Option<RangeInclusive<u16>> {
    let (low, high) = match text.split_once('-') {
        Some((low, high)) => (low.parse().ok()?, high.parse().ok()?),
        None => {
            let port = text.parse().ok()?;
            (port, port)
        }
    };
    (low <= high).then_some(low..=high)
}

fn number<T: std::str::FromStr>(text: &str) -> Option<T> {
    match text.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16)
            .ok()
            .and_then(|v| v.to_string().parse().ok()),
        None => text.parse().ok(),
    }
}

/// The name a field is known by whatever alias was written (`ip_src` is `src`), so a field
/// given twice under two names is still found.
fn acl_field(name: &str) -> &str {
    match name {
        "ip_src" => "src",
        "ip_dst" => "dst",
        "ip_proto" | "protocol" => "proto",
        "l4_src" => "src_port",
        "l4_dst" => "dst_port",
        other => other,
    }
}

/// The name of a flow field whatever alias was written (`nw_dst` is `ip_dst`).
fn flow_field(name: &str) -> &str {
    match name {
        "dl_src" => "eth_src",
        "dl_dst" => "eth_dst",
        "dl_type" => "eth_type",
        "vlan_vid" | "dl_vlan" => "vlan",
        "nw_proto" | "proto" => "ip_proto",
        "nw_src" => "ip_src",
        "nw_dst" => "ip_dst",
        "tp_src" => "l4_src",
        "tp_dst" => "l4_dst",
        "goto_table" => "goto",
        "dl_vlan_pcp" => "vlan_pcp",
        "nw_tos_dscp" | "dscp" => "ip_dscp",
        "nw_ecn" | "ecn" => "ip_ecn",
        "icmpv4_type" | "icmpv6_type" => "icmp_type",
        "icmpv4_code" | "icmpv6_code" => "icmp_code",
        other => other,
    }
}

/// Refuses a field given twice (under any of its names): a rule holds one value per field, so
/// the second would silently replace the first and the rule would not say what was written.
fn each_once(
    fields: &[(String, String)],
    canonical: fn(&str) -> &str,
    accepted: &str,
) -> Result<(), FieldError> {
    let mut seen: HashMap<&str, (&str, &str)> = HashMap::new();
    for (name, value) in fields {
        if let Some((first, first_value)) = seen.insert(canonical(name), (name, value)) {
            return Err(FieldError::new(
                format!("field {name}"),
                format!(
                    "is given twice ({first}={first_value}, then {name}={value}); a rule holds \
                     one value per field"
                ),
                accepted,
            ));
        }
    }
    Ok(())
}

const ONE_VALUE_ACL: &str = "each field once; for a second value write a second rule (the \
     first rule that matches decides)";
const ONE_VALUE_FLOW: &str = "each field once; for a second value add a second flow";

/// The protocols whose packets have ports in the flow key.
fn has_ports(protocol: u8) -> bool {
    matches!(
        IpProtocol::from(protocol),
        IpProtocol::Tcp | IpProtocol::Udp
    )
}

/// Whether `protocol` never occurs in packets of the family (ICMP is IPv4's, ICMPv6 IPv6's).
fn wrong_icmp(protocol: u8, ipv4: bool) -> bool {
    matches!(
        (IpProtocol::from(protocol), ipv4),
        (IpProtocol::Icmp, false) | (IpProtocol::Icmpv6, true)
    )
}

fn family(ipv4: bool) -> &'static str {
    if ipv4 { "IPv4" } else { "IPv6" }
}

/// Converts an ACL rule written as fields into the ACL stage's rule.
///
/// A rule must be able to match: each field is given once, both addresses are of one family,
/// ports go with `proto=tcp`, `proto=udp` or no protocol (then they match TCP and UDP), and
/// `icmp`/`icmpv6` go with their own family's addresses.
pub fn acl_rule(rule: &command::AclRule) -> Result<acl::AclRule, FieldError> {
    each_once(&rule.fields, acl_field, ONE_VALUE_ACL)?;
    let action = match rule.action {
        command::AclAction::Permit => acl::AclAction::Permit,
        command::AclAction::Deny => acl::AclAction::Deny,
    };
    let mut out = acl::AclRule::any(action);
    // The first address given and its family; the first port field given.
    let mut address: Option<(&str, &str, bool)> = None;
    let mut port_field: Option<&str> = None;
    for (name, value) in &rule.fields {
        let place = || format!("field {name}");
        let bad =
            |what: &str| FieldError::new(place(), format!("{value:?} is not {what}"), ACL_FIELDS);
        match acl_field(name) {
            "src" | "dst" => {
                let (addr, len) = parse_prefix(value).ok_or_else(|| bad("an address or prefix"))?;
                if let Some((first, first_value, ipv4)) = address
                    && ipv4 != addr.is_ipv4()
                {
                    return Err(FieldError::new(
                        place(),
                        format!(
                            "{value} is {} but {first}={first_value} is {}; the rule could \
                             never match",
                            family(addr.is_ipv4()),
                            family(ipv4)
                        ),
                        "addresses of one family in a rule; write one rule per family",
                    ));
                }
                address = Some((name, value, addr.is_ipv4()));
                let prefix = match addr {
                    IpAddr::V4(a) => IpPrefix::v4(a, len),
                    IpAddr::V6(a) => IpPrefix::v6(a, len),
                };
                if acl_field(name) == "src" {
                    out.src = prefix;
                } else {
                    out.dst = prefix;
                }
            }
            "proto" => {
                out.protocol = Some(parse_protocol(value).ok_or_else(|| bad("a protocol"))?);
            }
            "src_port" => {
                out.src_ports = parse_port_range(value).ok_or_else(|| bad("a port or range"))?;
                port_field = port_field.or(Some(name));
            }
            "dst_port" => {
                out.dst_ports = parse_port_range(value).ok_or_else(|| bad("a port or range"))?;
                port_field = port_field.or(Some(name));
            }
            _ => {
                return Err(FieldError::new(place(), "is not an ACL field", ACL_FIELDS));
            }
        }
    }
    let Some(protocol) = out.protocol else {
        return Ok(out);
    };
    let proto_name = rule
        .fields
        .iter()
        .find(|(name, _)| acl_field(name) == "proto")
        .map_or("proto", |(name, _)| name.as_str());
    if let Some(port) = port_field
        && !has_ports(protocol)
    {
        return Err(FieldError::new(
            format!("field {port}"),
            format!("protocol {protocol} has no ports; the rule could never match"),
            "ports with proto=tcp or proto=udp, or without proto (then they match TCP and UDP)",
        ));
    }
    if let Some((first, first_value, ipv4)) = address
        && wrong_icmp(protocol, ipv4)
    {
        return Err(FieldError::new(
            format!("field {proto_name}"),
            format!(
                "protocol {protocol} is not carried by {} packets ({first}={first_value}); the \
                 rule could never match",
                family(ipv4)
            ),
            "proto=icmp with IPv4 addresses, proto=icmpv6 with IPv6 addresses",
        ));
    }
    Ok(out)
}

/// Converts a whole ACL; an error names the rule's index.
pub fn acl_rules(rules: &[command::AclRule]) -> Result<Vec<acl::AclRule>, FieldError> {
    rules
        .iter()
        .enumerate()
        .map(|(index, rule)| acl_rule(rule).map_err(|e| e.in_rule(index)))
        .collect()
}

/// A flow rule as the OpenFlow app takes it: the table it goes in and the entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParsedFlow {
    pub table: u8,
    pub entry: FlowEntry,
    /// Refuse the add when a flow of the same priority overlaps it (OpenFlow's CHECK_OVERLAP,
    /// `flags=check_overlap`); a flag of the add, not kept with the flow.
    pub check_overlap: bool,
}

fn mac(text: &str) -> Option<EthernetAddress> {
    text.parse().ok()
}

/// Adds one match field to `matcher`.
fn match_field(
    matcher: FlowMatch,
    name: &str,
    value: &str,
    port: &dyn Fn(&str) -> Option<u16>,
) -> Result<FlowMatch, FieldError> {
    let bad = |what: &str| {
        FieldError::new(
            format!("field {name}"),
            format!("{value:?} is not {what}"),
            FLOW_FIELDS,
        )
    };
    Ok(match name {
        "in_port" => matcher.in_port(port(value).ok_or_else(|| bad("a port of the switch"))?),
        "eth_src" | "dl_src" | "eth_dst" | "dl_dst" => {
            let (addr, mask) = parse_masked_mac(value).ok_or_else(|| {
                bad("a MAC address or MAC/MASK (e.g. 01:00:00:00:00:00/01:00:00:00:00:00)")
            })?;
            if name.ends_with("src") {
                matcher.eth_src_masked(addr, mask)
            } else {
                matcher.eth_dst_masked(addr, mask)
            }
        }
        "eth_type" | "dl_type" => {
            matcher.ethertype(number(value).ok_or_else(|| bad("an EtherType (e.g. 0x0800)"))?)
        }
        "vlan" | "vlan_vid" | "dl_vlan" => match value {
            "none" => matcher.untagged(),
            "any" => matcher.tagged(),
            _ => {
                let vid: u16 = number(value)
                    .filter(|v| (1..4095).contains(v))
                    .ok_or_else(|| bad("a VLAN id 1..4094, `none` or `any`"))?;
                matcher.vlan(vid)
            }
        },
        "ip_proto" | "nw_proto" | "proto" => {
            matcher.ip_proto(parse_protocol(value).ok_or_else(|| bad("a protocol"))?)
        }
        "ip_src" | "nw_src" | "ip_dst" | "nw_dst" => {
            let (addr, mask) = parse_masked(value)
                .ok_or_else(|| bad("an address, address/prefix or address/mask"))?;
            let src = name.ends_with("src");
            match (addr, mask, src) {
                (IpAddr::V4(a), IpAddr::V4(m), true) => matcher.ipv4_src_masked(a, m),
                (IpAddr::V4(a), IpAddr::V4(m), false) => matcher.ipv4_dst_masked(a, m),
                (IpAddr::V6(a), IpAddr::V6(m), true) => matcher.ipv6_src_masked(a, m),
                (IpAddr::V6(a), IpAddr::V6(m), false) => matcher.ipv6_dst_masked(a, m),
                _ => return Err(bad("an address with a mask of its own family")),
            }
        }
        "arp_spa" | "arp_tpa" => match parse_masked(value) {
            Some((IpAddr::V4(a), IpAddr::V4(m))) if name == "arp_spa" => matcher.arp_spa(a, m),
            Some((IpAddr::V4(a), IpAddr::V4(m))) => matcher.arp_tpa(a, m),
            _ => return Err(bad("an IPv4 address, address/prefix or address/mask")),
        },
        "arp_op" => matcher.arp_op(
            number(value)
                .filter(|&op: &u8| op > 0)
                .ok_or_else(|| bad("an ARP operation 1..255 (1 request, 2 reply)"))?,
        ),
        "ip_dscp" | "nw_tos_dscp" | "dscp" => matcher.ip_dscp(
            number(value)
                .filter(|&dscp: &u8| dscp < 64)
                .ok_or_else(|| bad("a DSCP 0..63 (e.g. 46, expedited forwarding)"))?,
        ),
        "ip_ecn" | "nw_ecn" | "ecn" => matcher.ip_ecn(
            number(value)
                .filter(|&ecn: &u8| ecn < 4)
                .ok_or_else(|| bad("an ECN codepoint 0..3"))?,
        ),
        "vlan_pcp" | "dl_vlan_pcp" => matcher.vlan_pcp(
            number(value)
                .filter(|&pcp: &u8| pcp < 8)
                .ok_or_else(|| bad("a VLAN priority 0..7"))?,
        ),
        "icmp_type" | "icmpv4_type" | "icmpv6_type" => {
            matcher.icmp_type(number(value).ok_or_else(|| bad("an ICMP type 0..255"))?)
        }
        "icmp_code" | "icmpv4_code" | "icmpv6_code" => {
            matcher.icmp_code(number(value).ok_or_else(|| bad("an ICMP code 0..255"))?)
        }
        "metadata" => {
            let (value, mask) = parse_masked_u64(value)
                .ok_or_else(|| bad("a 64-bit VALUE or VALUE/MASK (e.g. 0x10/0xff)"))?;
            matcher.metadata(value, mask)
        }
        "l4_src" | "tp_src" => matcher.l4_src(number(value).ok_or_else(|| bad("a port"))?),
        "l4_dst" | "tp_dst" => matcher.l4_dst(number(value).ok_or_else(|| bad("a port"))?),
        _ => {
            return Err(FieldError::new(
                format!("field {name}"),
                "is not a match field or instruction",
                &format!("{FLOW_FIELDS}; instructions: {FLOW_INSTRUCTIONS}"),
            ));
        }
    })
}

/// Parses one action of a flow rule (`output:p1`, `set_field:eth_dst=02:00:00:00:00:01`,
/// ...), as [`flow_rule`] does: the OpenFlow agent's PACKET_OUT rewrites a frame with it.
pub fn flow_action(text: &str, port: &dyn Fn(&str) -> Option<u16>) -> Result<Action, FieldError> {
    action(text, port)
}

/// Parses one action (`output:p1`, `set_field:eth_dst=02:00:00:00:00:01`, ...).
fn action(text: &str, port: &dyn Fn(&str) -> Option<u16>) -> Result<Action, FieldError> {
    let bad = |problem: &str| FieldError::new(format!("action {text}"), problem, FLOW_ACTIONS);
    let (word, argument) = match text.split_once(':') {
        Some((word, argument)) => (word, Some(argument)),
        None => (text, None),
    };
    Ok(match (word, argument) {
        ("output", Some(name)) => {
            Action::Output(port(name).ok_or_else(|| bad("names no port of the switch"))?)
        }
        ("flood", None) => Action::Flood,
        ("all", None) => Action::All,
        ("in_port", None) => Action::InPort,
        ("drop", None) => Action::Drop,
        ("controller", None) => Action::Controller(u16::MAX),
        ("controller", Some(max_len)) => Action::Controller(
            number(max_len).ok_or_else(|| bad("needs the bytes to send, 0..65535"))?,
        ),
        ("group", Some(id)) => {
            Action::Group(number(id).ok_or_else(|| bad("needs a group number"))?)
        }
        ("pop_vlan", None) => Action::PopVlan,
        ("dec_ttl", None) => Action::DecTtl,
        ("push_vlan", Some(vid)) => Action::PushVlan(
            number(vid)
                .filter(|v| (1..4095).contains(v))
                .ok_or_else(|| bad("needs a VLAN id 1..4094"))?,
        ),
        ("set_field", Some(assignment)) => {
            let (field, value) = assignment
                .split_once('=')
                .ok_or_else(|| bad("is not set_field:FIELD=VALUE"))?;
            let value_error = || bad(&format!("{value:?} is not a value for {field}"));
            Action::SetField(match field {
                "eth_src" => SetField::EthSrc(mac(value).ok_or_else(value_error)?),
                "eth_dst" => SetField::EthDst(mac(value).ok_or_else(value_error)?),
                "ip_src" | "ip_dst" => {
                    let addr: IpAddr = value.parse().map_err(|_| value_error())?;
                    match (addr, field == "ip_src") {
                        (IpAddr::V4(a), true) => SetField::Ipv4Src(a),
                        (IpAddr::V4(a), false) => SetField::Ipv4Dst(a),
                        (IpAddr::V6(a), true) => SetField::Ipv6Src(a),
                        (IpAddr::V6(a), false) => SetField::Ipv6Dst(a),
                    }
                }
                "l4_src" => SetField::L4Src(number(value).ok_or_else(value_error)?),
                "l4_dst" => SetField::L4Dst(number(value).ok_or_else(value_error)?),
                "vlan_vid" => SetField::VlanVid(
                    number(value)
                        .filter(|v| (1..4095).contains(v))
                        .ok_or_else(value_error)?,
                ),
                _ => return Err(bad(&format!("cannot set field {field}"))),
            })
        }
        _ => return Err(bad("is not an action (or lacks its argument)")),
    })
}

/// Refuses fields that could never match together or that another field would silently
/// rewrite, as OpenFlow refuses an OXM field whose prerequisites are absent or inconsistent
/// (OpenFlow 1.3.5 section 7.2.3.6, `OFPBMC_BAD_PREREQ`). `fields` have converted one by one
/// already; this looks at them together and returns what they say of the packets.
fn prerequisites(fields: &[(String, String)]) -> Result<Stated, FieldError> {
    let given = |field: &str| {
        fields
            .iter()
            .find(|(name, _)| flow_field(name) == field)
            .map(|(name, value)| (name.as_str(), value.as_str()))
    };
    let refuse = |(name, value): (&str, &str), problem: String, accepted: &str| {
        Err(FieldError::new(
            format!("field {name}"),
            format!("{name}={value} {problem}"),
            accepted,
        ))
    };
    let eth_type = given("eth_type");
    let ethertype = eth_type
        .and_then(|(_, value)| number::<u16>(value))
        .map(EtherType::from);
    if let (Some(pcp), Some(vlan @ (_, "none"))) = (given("vlan_pcp"), given("vlan")) {
        return refuse(
            pcp,
            format!(
                "is a tag's priority, but {}=none matches untagged frames only",
                vlan.0
            ),
            "vlan_pcp with a VLAN id or without vlan (it implies a tag)",
        );
    }
    let arp = ["arp_op", "arp_spa", "arp_tpa"].into_iter().find_map(given);
    if let Some(arp) = arp {
        if let (Some(field), Some(ethertype)) = (eth_type, ethertype)
            && ethertype != EtherType::Arp
        {
            return refuse(
                field,
                format!("is not ARP's EtherType, which {}={} matches", arp.0, arp.1),
                "eth_type=0x0806 with ARP fields, or no eth_type (they imply it)",
            );
        }
        if let Some(ip) = ["ip_proto", "ip_src", "ip_dst"].into_iter().find_map(given) {
            return refuse(
                ip,
                format!("is an IP field, but {}={} matches ARP frames", arp.0, arp.1),
                "ARP fields (arp_op, arp_spa, arp_tpa) or IP fields in a flow, not both",
            );
        }
    }
    if let (Some(field), Some(ethertype)) = (eth_type, ethertype)
        && ethertype.is_vlan_tag()
    {
        return refuse(
            field,
            "is a VLAN tag's, but eth_type is the EtherType after the tags; the rule could \
             never match"
                .into(),
            "vlan=VID or vlan=none to match the tag, eth_type for what follows it (e.g. 0x0800)",
        );
    }
    // The first address given and its family (true: IPv4).
    let mut address: Option<((&str, &str), bool)> = None;
    for field in [given("ip_src"), given("ip_dst")].into_iter().flatten() {
        let Some((addr, _)) = parse_masked(field.1) else {
            continue;
        };
        match address {
            Some(((name, value), ipv4)) if ipv4 != addr.is_ipv4() => {
                return refuse(
                    field,
                    format!(
                        "is {} but {name}={value} is {}; the rule could never match",
                        family(addr.is_ipv4()),
                        family(ipv4)
                    ),
                    "addresses of one family in a flow; add one flow per family",
                );
            }
            Some(_) => {}
            None => address = Some((field, addr.is_ipv4())),
        }
    }
    let ip_ethertype = |ipv4: bool| {
        if ipv4 {
            EtherType::Ipv4
        } else {
            EtherType::Ipv6
        }
    };
    if let (Some(field), Some(ethertype), Some(((name, value), ipv4))) =
        (eth_type, ethertype, address)
        && ethertype != ip_ethertype(ipv4)
    {
        return refuse(
            field,
            format!(
                "is not the EtherType of {} packets, which {name}={value} matches; the rule \
                 could never match",
                family(ipv4)
            ),
            "eth_type=0x0800 with IPv4 addresses, eth_type=0x86dd with IPv6 ones, or no \
             eth_type (an address implies it)",
        );
    }
    // The packets' family as the rule states it: an address, or the EtherType.
    let ipv4 = address.map(|(_, ipv4)| ipv4).or(match ethertype {
        Some(EtherType::Ipv4) => Some(true),
        Some(EtherType::Ipv6) => Some(false),
        _ => None,
    });
    for field in [given("ip_dscp"), given("ip_ecn")].into_iter().flatten() {
        if ipv4.is_none() {
            return refuse(
                field,
                "needs IP packets: DSCP and ECN are in the IP header".into(),
                "add eth_type=0x0800 (IPv4) or eth_type=0x86dd (IPv6), or an ip_src/ip_dst \
                 (which implies it)",
            );
        }
    }
    let ip_proto = given("ip_proto");
    let protocol = ip_proto.and_then(|(_, value)| parse_protocol(value));
    if let Some(field) = ip_proto {
        let Some(ipv4) = ipv4 else {
            return refuse(
                field,
                "needs IP packets; without an IP EtherType it would also match other frames \
                 (ARP's operation shares the field)"
                    .into(),
                "add eth_type=0x0800 (IPv4) or eth_type=0x86dd (IPv6), or an ip_src/ip_dst \
                 (which implies it)",
            );
        };
        if protocol.is_some_and(|protocol| wrong_icmp(protocol, ipv4)) {
            return refuse(
                field,
                format!(
                    "is not carried by {} packets; the rule could never match",
                    family(ipv4)
                ),
                "ip_proto=icmp with IPv4, ip_proto=icmpv6 with IPv6",
            );
        }
    }
    for field in [given("icmp_type"), given("icmp_code")]
        .into_iter()
        .flatten()
    {
        let icmp = match ipv4 {
            Some(true) => 1,
            _ => 58,
        };
        if protocol != Some(icmp) {
            return refuse(
                field,
                "needs ip_proto=icmp (IPv4) or ip_proto=icmpv6 (IPv6)".into(),
                "add ip_proto=icmp with eth_type=0x0800, or ip_proto=icmpv6 with \
                 eth_type=0x86dd",
            );
        }
    }
    for field in [given("l4_src"), given("l4_dst")].into_iter().flatten() {
        match protocol {
            None => {
                return refuse(
                    field,
                    "needs ip_proto=tcp or ip_proto=udp: ports are TCP's and UDP's".into(),
                    "add ip_proto=tcp or ip_proto=udp (with eth_type or an address)",
                );
            }
            Some(protocol) if !has_ports(protocol) => {
                return refuse(
                    field,
                    format!("cannot match: protocol {protocol} has no ports"),
                    "l4_src and l4_dst with ip_proto=tcp or ip_proto=udp",
                );
            }
            Some(_) => {}
        }
    }
    Ok(Stated { ipv4, protocol })
}

/// What a match says of the packets it takes, for the actions' prerequisites.
struct Stated {
    /// IPv4 (true) or IPv6 (false) packets; `None`: not said.
    ipv4: Option<bool>,
    /// The IP protocol matched.
    protocol: Option<u8>,
}

/// Refuses an action that could never act on the packets the match takes, as OpenFlow refuses
/// a set-field whose field's prerequisites the match lacks (`OFPBAC_MATCH_INCONSISTENT`): an IP
/// address of the family the match states, ports where it states TCP or UDP.
fn action_prerequisites(text: &str, action: &Action, stated: &Stated) -> Result<(), FieldError> {
    let refuse = |problem: String, accepted: &str| {
        Err(FieldError::new(format!("action {text}"), problem, accepted))
    };
    match action {
        Action::SetField(
            field @ (SetField::Ipv4Src(_)
            | SetField::Ipv4Dst(_)
            | SetField::Ipv6Src(_)
            | SetField::Ipv6Dst(_)),
        ) => {
            let ipv4 = matches!(field, SetField::Ipv4Src(_) | SetField::Ipv4Dst(_));
            if stated.ipv4 != Some(ipv4) {
                return refuse(
                    format!(
                        "sets an {} address, but the match does not take only {} packets",
                        family(ipv4),
                        family(ipv4)
                    ),
                    &format!(
                        "match eth_type={} (or an {} ip_src/ip_dst) to set an {} address",
                        if ipv4 { "0x0800" } else { "0x86dd" },
                        family(ipv4),
                        family(ipv4)
                    ),
                );
            }
        }
        Action::SetField(SetField::L4Src(_) | SetField::L4Dst(_))
            if !stated.protocol.is_some_and(has_ports) =>
        {
            return refuse(
                "sets a port, but the match does not take only TCP or UDP packets".into(),
                "match ip_proto=tcp or ip_proto=udp to set a port",
            );
        }
        _ => {}
    }
    Ok(())
}

/// Converts a flow rule written as fields and actions; `port` resolves port names (a number is
/// taken as a port index too).
///
/// The rule must say what it matches, once. Refused, so that nothing is silently rewritten or
/// never matches:
/// * a field or instruction given twice (under any of its names);
/// * `ip_src` and `ip_dst` of different families, or with an `eth_type` of the other family
///   (an address implies its family's `eth_type`);
/// * `ip_proto` without an IP `eth_type` or address, `icmp` with IPv6, `icmpv6` with IPv4;
/// * `l4_src`/`l4_dst` without `ip_proto=tcp` or `udp`;
/// * `eth_type` of a VLAN tag (0x8100, 0x88a8): it is the EtherType after the tags;
/// * `set_field` of an IP address without a match of that family, of a port without
///   `ip_proto=tcp` or `udp`.
pub fn flow_rule(
    rule: &FlowRule,
    port: &dyn Fn(&str) -> Option<u16>,
) -> Result<ParsedFlow, FieldError> {
    each_once(&rule.fields, flow_field, ONE_VALUE_FLOW)?;
    let port = |name: &str| port(name).or_else(|| name.parse().ok());
    let mut matcher = FlowMatch::any();
    let mut table = 0u8;
    let mut goto = None;
    let (mut idle, mut hard, mut cookie) = (0u16, 0u16, 0u64);
    let (mut send_flow_removed, mut check_overlap) = (false, false);
    for (name, value) in &rule.fields {
        let instruction = |what: &str| {
            FieldError::new(
                format!("field {name}"),
                format!("{value:?} is not {what}"),
                FLOW_INSTRUCTIONS,
            )
        };
        match name.as_str() {
            "table" => table = number(value).ok_or_else(|| instruction("a table number"))?,
            "goto" | "goto_table" => {
                goto = Some(number(value).ok_or_else(|| instruction("a table number"))?)
            }
            "idle_timeout" => {
                idle = number(value).ok_or_else(|| instruction("seconds (0..65535)"))?
            }
            "hard_timeout" => {
                hard = number(value).ok_or_else(|| instruction("seconds (0..65535)"))?
            }
            "cookie" => cookie = number(value).ok_or_else(|| instruction("a number"))?,
            "flags" if value == "-" => {}
            "flags" => {
                for flag in value.split('+') {
                    match flag {
                        "send_flow_rem" => send_flow_removed = true,
                        "check_overlap" => check_overlap = true,
                        _ => {
                            return Err(instruction(
                                "send_flow_rem, check_overlap, both joined by +, or -",
                            ));
                        }
                    }
                }
            }
            _ => matcher = match_field(matcher, name, value, &port)?,
        }
    }
    let stated = prerequisites(&rule.fields)?;
    let mut actions = Vec::new();
    let (mut clear_actions, mut write_actions, mut write_metadata) = (false, Vec::new(), None);
    for text in &rule.actions {
        if text == "clear_actions" {
            clear_actions = true;
        } else if let Some(value) = text.strip_prefix("write_metadata:") {
            write_metadata = Some(parse_masked_u64(value).ok_or_else(|| {
                FieldError::new(
                    format!("action {text}"),
                    format!("{value:?} is not a 64-bit VALUE or VALUE/MASK"),
                    FLOW_ACTIONS,
                )
            })?);
        } else if let Some(written) = text.strip_prefix("write:") {
            let parsed = action(written, &port)?;
            if parsed == Action::Drop {
                return Err(FieldError::new(
                    format!("action {text}"),
                    "an action set holds no drop",
                    "clear_actions to empty the action set",
                ));
            }
            action_prerequisites(text, &parsed, &stated)?;
            write_actions.push(parsed);
        } else {
            let parsed = action(text, &port)?;
            action_prerequisites(text, &parsed, &stated)?;
            actions.push(parsed);
        }
    }
    let mut entry = FlowEntry::new(rule.priority, matcher, actions)
        .idle_timeout(idle)
        .hard_timeout(hard);
    entry.clear_actions = clear_actions;
    entry.write_actions = write_actions;
    entry.write_metadata = write_metadata;
    entry.goto = goto;
    entry.cookie = cookie;
    entry.send_flow_removed = send_flow_removed;
    Ok(ParsedFlow {
        table,
        entry,
        check_overlap,
    })
}

/// Converts a group rule: its type, and each bucket's weight (`weight:N` first, 1 when not
/// given) and actions, read as a flow's are (`port` resolves port names). A bucket's `drop`
/// is refused: a bucket without an output drops already.
pub fn group_rule(
    rule: &GroupRule,
    port: &dyn Fn(&str) -> Option<u16>,
) -> Result<GroupSpec, FieldError> {
    let port = |name: &str| port(name).or_else(|| name.parse().ok());
    let kind = GroupKind::parse(&rule.kind).ok_or_else(|| {
        FieldError::new(
            "field type",
            format!("{:?} is not a group type", rule.kind),
            GROUP_FORM,
        )
    })?;
    let mut buckets = Vec::with_capacity(rule.buckets.len());
    for (index, words) in rule.buckets.iter().enumerate() {
        let place = format!("bucket {index}");
        let mut weight = 1;
        let mut actions = Vec::new();
        for (at, text) in words.iter().enumerate() {
            if let Some(value) = text.strip_prefix("weight:").filter(|_| at == 0) {
                weight = number(value).ok_or_else(|| {
                    FieldError::new(
                        &place,
                        format!("weight {value:?} is not 0..65535"),
                        GROUP_FORM,
                    )
                })?;
                continue;
            }
            let parsed = action(text, &port).map_err(|mut e| {
                e.place = format!("{place} {}", e.place);
                e
            })?;
            if parsed == Action::Drop {
                return Err(FieldError::new(
                    format!("{place} action drop"),
                    "is not a bucket action",
                    "a bucket without an output drops: leave its actions empty",
                ));
            }
            actions.push(parsed);
        }
        buckets.push(BucketSpec { weight, actions });
    }
    Ok(GroupSpec {
        id: rule.id,
        kind,
        buckets,
    })
}

/// A bucket as [`group_rule`] reads it: `weight:N,` (select groups) then its actions.
pub fn bucket_text(
    kind: GroupKind,
    weight: u16,
    actions: &[Action],
    port: &dyn Fn(u16) -> String,
) -> String {
    let actions = if actions.is_empty() {
        String::new()
    } else {
        actions_text(actions, port)
    };
    match (kind, actions.is_empty()) {
        (GroupKind::Select, true) => format!("weight:{weight}"),
        (GroupKind::Select, false) => format!("weight:{weight},{actions}"),
        _ => actions,
    }
}

fn prefix_len(mask: &[u8; 16]) -> u32 {
    u128::from_be_bytes(*mask).leading_ones()
}

fn address_text(addr: &[u8; 16], mask: &[u8; 16], ipv4: bool) -> String {
    let len = prefix_len(mask);
    if u128::from_be_bytes(*mask).count_ones() != len {
        // Not a prefix: the mask as an address.
        return if ipv4 {
            let [.., a, b, c, d] = *addr;
            let [.., m0, m1, m2, m3] = *mask;
            format!(
                "{}/{}",
                Ipv4Addr::new(a, b, c, d),
                Ipv4Addr::new(m0, m1, m2, m3)
            )
        } else {
            format!("{}/{}", Ipv6Addr::from(*addr), Ipv6Addr::from(*mask))
        };
    }
    if ipv4 {
        let [.., a, b, c, d] = *addr;
        let len = len.saturating_sub(96);
        let addr = Ipv4Addr::new(a, b, c, d);
        if len == 32 {
            addr.to_string()
        } else {
            format!("{addr}/{len}")
        }
    } else {
        let addr = Ipv6Addr::from(*addr);
        if len == 128 {
            addr.to_string()
        } else {
            format!("{addr}/{len}")
        }
    }
}

/// A match as text in the form [`flow_rule`] reads (`in_port=p0,ip_dst=10.0.0.0/8`; `*` for
/// everything); `port` names port indices.
pub fn match_text(matcher: &FlowMatch, port: &dyn Fn(u16) -> String) -> String {
    let (key, mask) = (matcher.key(), matcher.mask());
    let mut parts: Vec<String> = Vec::new();
    if mask.in_port != 0 {
        parts.push(format!("in_port={}", port(u16::from(key.in_port))));
    }
    for (name, addr, addr_mask) in [
        ("eth_src", key.src_mac, mask.src_mac),
        ("eth_dst", key.dst_mac, mask.dst_mac),
    ] {
        match addr_mask.0 {
            [0, 0, 0, 0, 0, 0] => {}
            [0xff, 0xff, 0xff, 0xff, 0xff, 0xff] => parts.push(format!("{name}={addr}")),
            _ => parts.push(format!("{name}={addr}/{addr_mask}")),
        }
    }
    // ARP keeps its operation and addresses where IP keeps the protocol and addresses.
    let arp = mask.ethertype != 0 && key.ethertype == 0x0806;
    let ipv4 = key.ethertype == 0x0800 || arp;
    if mask.ethertype != 0 {
        parts.push(format!("eth_type=0x{:04x}", key.ethertype));
    }
    if mask.flags & FlowKey::FLAG_VLAN != 0 {
        if key.flags & FlowKey::FLAG_VLAN == 0 {
            parts.push("vlan=none".into());
        } else if mask.vlan & FlowKey::VLAN_VID != 0 {
            parts.push(format!("vlan={}", key.vlan & FlowKey::VLAN_VID));
        } else if mask.vlan & FlowKey::VLAN_PCP == 0 {
            // Tagged, any tag (a priority alone implies the tag).
            parts.push("vlan=any".into());
        }
        if mask.vlan & FlowKey::VLAN_PCP != 0 {
            parts.push(format!("vlan_pcp={}", key.vlan >> FlowKey::VLAN_PCP_SHIFT));
        }
    }
    let (ip_proto, ip_src, ip_dst) = if arp {
        ("arp_op", "arp_spa", "arp_tpa")
    } else {
        ("ip_proto", "ip_src", "ip_dst")
    };
    if mask.ip_tos & FlowKey::TOS_DSCP != 0 {
        parts.push(format!("ip_dscp={}", key.ip_tos >> 2));
    }
    if mask.ip_tos & FlowKey::TOS_ECN != 0 {
        parts.push(format!("ip_ecn={}", key.ip_tos & FlowKey::TOS_ECN));
    }
    if mask.ip_proto != 0 {
        parts.push(format!("{ip_proto}={}", key.ip_proto));
    }
    if mask.ip_src != [0; 16] {
        parts.push(format!(
            "{ip_src}={}",
            address_text(&key.ip_src, &mask.ip_src, ipv4)
        ));
    }
    if mask.ip_dst != [0; 16] {
        parts.push(format!(
            "{ip_dst}={}",
            address_text(&key.ip_dst, &mask.ip_dst, ipv4)
        ));
    }
    let icmp = matches!(key.ip_proto, 1 | 58) && mask.ip_proto != 0 && !arp;
    if icmp {
        if mask.l4_src & 0xff00 != 0 {
            parts.push(format!("icmp_type={}", key.l4_src >> 8));
        }
        if mask.l4_src & 0x00ff != 0 {
            parts.push(format!("icmp_code={}", key.l4_src & 0xff));
        }
    } else if mask.l4_src != 0 {
        parts.push(format!("l4_src={}", key.l4_src));
    }
    if mask.l4_dst != 0 {
        parts.push(format!("l4_dst={}", key.l4_dst));
    }
    match matcher.metadata_match() {
        (_, 0) => {}
        (value, u64::MAX) => parts.push(format!("metadata={value:#x}")),
        (value, mask) => parts.push(format!("metadata={value:#x}/{mask:#x}")),
    }
    if parts.is_empty() {
        "*".into()
    } else {
        parts.join(",")
    }
}

/// A flow entry's actions and the instructions written among them (clear_actions,
/// write:ACTION, write_metadata) as text in the form [`flow_rule`] reads.
pub fn entry_actions_text(entry: &FlowEntry, port: &dyn Fn(u16) -> String) -> String {
    let mut parts = Vec::new();
    if !entry.actions.is_empty() {
        parts.push(actions_text(&entry.actions, port));
    }
    if entry.clear_actions {
        parts.push("clear_actions".into());
    }
    for action in &entry.write_actions {
        parts.push(format!(
            "write:{}",
            actions_text(std::slice::from_ref(action), port)
        ));
    }
    match entry.write_metadata {
        None => {}
        Some((value, u64::MAX)) => parts.push(format!("write_metadata:{value:#x}")),
        Some((value, mask)) => parts.push(format!("write_metadata:{value:#x}/{mask:#x}")),
    }
    if parts.is_empty() {
        "drop".into()
    } else {
        parts.join(",")
    }
}

/// Actions as text in the form [`flow_rule`] reads.
pub fn actions_text(actions: &[Action], port: &dyn Fn(u16) -> String) -> String {
    let mut out = String::new();
    for (i, action) in actions.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        let _ = match action {
            Action::Output(p) => write!(out, "output:{}", port(*p)),
            Action::Flood => write!(out, "flood"),
            Action::All => write!(out, "all"),
            Action::InPort => write!(out, "in_port"),
            Action::Drop => write!(out, "drop"),
            Action::Controller(u16::MAX) => write!(out, "controller"),
            Action::Controller(max_len) => write!(out, "controller:{max_len}"),
            Action::PushVlan(vid) => write!(out, "push_vlan:{vid}"),
            Action::PopVlan => write!(out, "pop_vlan"),
            Action::DecTtl => write!(out, "dec_ttl"),
            Action::Group(id) => write!(out, "group:{id}"),
            Action::SetField(field) => match field {
                SetField::EthSrc(m) => write!(out, "set_field:eth_src={m}"),
                SetField::EthDst(m) => write!(out, "set_field:eth_dst={m}"),
                SetField::Ipv4Src(a) => write!(out, "set_field:ip_src={a}"),
                SetField::Ipv4Dst(a) => write!(out, "set_field:ip_dst={a}"),
                SetField::Ipv6Src(a) => write!(out, "set_field:ip_src={a}"),
                SetField::Ipv6Dst(a) => write!(out, "set_field:ip_dst={a}"),
                SetField::L4Src(p) => write!(out, "set_field:l4_src={p}"),
                SetField::L4Dst(p) => write!(out, "set_field:l4_dst={p}"),
                SetField::VlanVid(v) => write!(out, "set_field:vlan_vid={v}"),
            },
        };
    }
    if out.is_empty() {
        out.push_str("drop");
    }
    out
}

#[cfg(test)]
mod tests;
