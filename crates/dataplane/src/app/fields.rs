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

use crate::app::openflow::{Action, FlowEntry, SetField};
use crate::command::{self, FlowRule};
use crate::stage::acl::{self, IpPrefix};
use crate::table::classifier::FlowMatch;

/// Match fields of a flow rule.
pub const FLOW_FIELDS: &str = "in_port, eth_src, eth_dst, eth_type, vlan (an id or `none`), \
     ip_proto, ip_src, ip_dst (address or prefix, IPv4 or IPv6), l4_src, l4_dst";
/// Instructions written as fields of a flow rule.
pub const FLOW_INSTRUCTIONS: &str = "table, goto, idle_timeout, hard_timeout, cookie, flags \
     (send_flow_rem, check_overlap, both joined by +, or -)";
/// Actions of a flow rule.
pub const FLOW_ACTIONS: &str = "output:PORT, flood, drop, set_field:FIELD=VALUE (eth_src, \
     eth_dst, ip_src, ip_dst, l4_src, l4_dst, vlan_vid), push_vlan:VID, pop_vlan, dec_ttl, controller[:MAX_LEN] (a PACKET_IN to \
     the OpenFlow controller)";
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
        "eth_src" | "dl_src" => matcher.eth_src(mac(value).ok_or_else(|| bad("a MAC address"))?),
        "eth_dst" | "dl_dst" => matcher.eth_dst(mac(value).ok_or_else(|| bad("a MAC address"))?),
        "eth_type" | "dl_type" => {
            matcher.ethertype(number(value).ok_or_else(|| bad("an EtherType (e.g. 0x0800)"))?)
        }
        "vlan" | "vlan_vid" | "dl_vlan" => match value {
            "none" => matcher.untagged(),
            _ => {
                let vid: u16 = number(value)
                    .filter(|v| (1..4095).contains(v))
                    .ok_or_else(|| bad("a VLAN id 1..4094 or `none`"))?;
                matcher.vlan(vid)
            }
        },
        "ip_proto" | "nw_proto" | "proto" => {
            matcher.ip_proto(parse_protocol(value).ok_or_else(|| bad("a protocol"))?)
        }
        "ip_src" | "nw_src" | "ip_dst" | "nw_dst" => {
            let (addr, len) = parse_prefix(value).ok_or_else(|| bad("an address or prefix"))?;
            let src = name.ends_with("src");
            match (addr, src) {
                (IpAddr::V4(a), true) => matcher.ipv4_src(a, len),
                (IpAddr::V4(a), false) => matcher.ipv4_dst(a, len),
                (IpAddr::V6(a), true) => matcher.ipv6_src(a, len),
                (IpAddr::V6(a), false) => matcher.ipv6_dst(a, len),
            }
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
        ("drop", None) => Action::Drop,
        ("controller", None) => Action::Controller(u16::MAX),
        ("controller", Some(max_len)) => Action::Controller(
            number(max_len).ok_or_else(|| bad("needs the bytes to send, 0..65535"))?,
        ),
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
        let Some((addr, _)) = parse_prefix(field.1) else {
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
    let actions = rule
        .actions
        .iter()
        .map(|text| {
            let parsed = action(text, &port)?;
            action_prerequisites(text, &parsed, &stated)?;
            Ok(parsed)
        })
        .collect::<Result<Vec<_>, FieldError>>()?;
    let mut entry = FlowEntry::new(rule.priority, matcher, actions)
        .idle_timeout(idle)
        .hard_timeout(hard);
    entry.goto = goto;
    entry.cookie = cookie;
    entry.send_flow_removed = send_flow_removed;
    Ok(ParsedFlow {
        table,
        entry,
        check_overlap,
    })
}

fn prefix_len(mask: &[u8; 16]) -> u32 {
    u128::from_be_bytes(*mask).leading_ones()
}

fn address_text(addr: &[u8; 16], mask: &[u8; 16], ipv4: bool) -> String {
    let len = prefix_len(mask);
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
        parts.push(format!("in_port={}", port(key.in_port)));
    }
    if mask.src_mac.0 != [0; 6] {
        parts.push(format!("eth_src={}", key.src_mac));
    }
    if mask.dst_mac.0 != [0; 6] {
        parts.push(format!("eth_dst={}", key.dst_mac));
    }
    let ipv4 = key.ethertype == 0x0800;
    if mask.ethertype != 0 {
        parts.push(format!("eth_type=0x{:04x}", key.ethertype));
    }
    if mask.flags & FlowKey::FLAG_VLAN != 0 {
        if key.flags & FlowKey::FLAG_VLAN != 0 {
            parts.push(format!("vlan={}", key.vlan));
        } else {
            parts.push("vlan=none".into());
        }
    }
    if mask.ip_proto != 0 {
        parts.push(format!("ip_proto={}", key.ip_proto));
    }
    if mask.ip_src != [0; 16] {
        parts.push(format!(
            "ip_src={}",
            address_text(&key.ip_src, &mask.ip_src, ipv4)
        ));
    }
    if mask.ip_dst != [0; 16] {
        parts.push(format!(
            "ip_dst={}",
            address_text(&key.ip_dst, &mask.ip_dst, ipv4)
        ));
    }
    if mask.l4_src != 0 {
        parts.push(format!("l4_src={}", key.l4_src));
    }
    if mask.l4_dst != 0 {
        parts.push(format!("l4_dst={}", key.l4_dst));
    }
    if parts.is_empty() {
        "*".into()
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
            Action::Drop => write!(out, "drop"),
            Action::Controller(u16::MAX) => write!(out, "controller"),
            Action::Controller(max_len) => write!(out, "controller:{max_len}"),
            Action::PushVlan(vid) => write!(out, "push_vlan:{vid}"),
            Action::PopVlan => write!(out, "pop_vlan"),
            Action::DecTtl => write!(out, "dec_ttl"),
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
