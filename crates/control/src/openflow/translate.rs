//! Between OpenFlow 1.3 and the openflow app's rules: a FLOW_MOD's match and instructions
//! become the fields and actions of a [`FlowRule`], the form `wirespeed ctl flow add` sends,
//! and a flow entry the app shows becomes an `ofp_flow_stats` again.
//!
//! What the app cannot do is refused here with the error the specification names, before
//! anything reaches a worker: a match field the flow key does not carry (IP DSCP) is
//! BAD_MATCH/BAD_FIELD, a VLAN id mask other than exact or "any tag" BAD_MATCH/BAD_MASK, an
//! ARP operation above 255 BAD_MATCH/BAD_VALUE, an output to a reserved port it has no path for
//! BAD_ACTION/BAD_OUT_PORT, the meter instruction BAD_INSTRUCTION/UNSUP_INST. Masks on MAC and
//! IP addresses and metadata may have any bits (the classifier masks bit by bit). Write-actions,
//! clear-actions and write-metadata become the rule's `write:ACTION`, `clear_actions` and
//! `write_metadata:VALUE/MASK`. Everything it lets through is then checked again by the app's
//! own rule reader (`fields::flow_rule`), as any `ctl` rule is.
//!
//! OpenFlow port numbers are the app's port indices plus one (port 0 is not a valid OpenFlow
//! port).

use std::net::{Ipv4Addr, Ipv6Addr};

use wirespeed_dataplane::app::openflow::packet_in::PacketIn as PacketInRecord;
use wirespeed_dataplane::app::openflow::{
    Action as AppAction, FlowEntry, MAX_FLOW_ACTIONS, SetField,
};
use wirespeed_dataplane::command::FlowRule;
use wirespeed_openflow::action::{group, port};
use wirespeed_openflow::message::{NO_BUFFER, PacketIn, flow_flags};
use wirespeed_openflow::oxm::{ETH_TYPE_ARP, ETH_TYPE_IPV4, OFPVID_NONE, OFPVID_PRESENT};
use wirespeed_openflow::{Action, Instruction, Match, OfError, Oxm};
use wirespeed_packet::flow_key::FlowKey;

/// The switch's ports by OpenFlow number: `names[n - 1]` is port `n`.
#[derive(Clone, Debug)]
pub struct Ports {
    pub names: Vec<String>,
}

impl Ports {
    /// The name of OpenFlow port `number`, if the switch has it.
    pub fn name(&self, number: u32) -> Option<&str> {
        let index = usize::try_from(number.checked_sub(1)?).ok()?;
        self.names.get(index).map(String::as_str)
    }

    /// The OpenFlow number of the port at `index`.
    pub fn number(index: u16) -> u32 {
        u32::from(index) + 1
    }

    /// The app's index of the port called `name`.
    pub fn index(&self, name: &str) -> Option<u16> {
        let at = self.names.iter().position(|n| n == name)?;
        u16::try_from(at).ok()
    }
}

fn mac_text(mac: &[u8; 6]) -> String {
    mac.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// An address and its mask, any bits, as the rule language reads it (`ADDR/MASK`).
fn masked_text<T: std::fmt::Display>(addr: T, mask: Option<T>) -> String {
    match mask {
        None => addr.to_string(),
        Some(mask) => format!("{addr}/{mask}"),
    }
}

/// A 64-bit value and its mask (metadata), as the rule language reads it.
fn masked_u64_text(value: u64, mask: Option<u64>) -> String {
    match mask {
        None | Some(u64::MAX) => format!("{value:#x}"),
        Some(mask) => format!("{value:#x}/{mask:#x}"),
    }
}

/// A match as the fields of a flow rule.
pub fn match_fields(matcher: &Match, ports: &Ports) -> Result<Vec<(String, String)>, OfError> {
    let mut fields = Vec::new();
    let mut push = |name: &str, value: String| fields.push((name.to_string(), value));
    for field in &matcher.fields {
        match *field {
            Oxm::InPort(number) => {
                let name = ports.name(number).ok_or(OfError::BAD_MATCH_VALUE)?;
                push("in_port", name.to_string());
            }
            Oxm::Metadata(value, mask) => push("metadata", masked_u64_text(value, mask)),
            Oxm::EthSrc(mac, mask) | Oxm::EthDst(mac, mask) => {
                let name = if matches!(field, Oxm::EthSrc(..)) {
                    "eth_src"
                } else {
                    "eth_dst"
                };
                let mask = mask.filter(|m| *m != [0xff; 6]);
                push(
                    name,
                    masked_text(mac_text(&mac), mask.map(|m| mac_text(&m))),
                );
            }
            Oxm::EthType(ethertype) => push("eth_type", format!("0x{ethertype:04x}")),
            Oxm::VlanVid(vid, mask) => match (vid, mask) {
                (OFPVID_NONE, None) => push("vlan", "none".into()),
                (_, None | Some(0x1fff)) => push("vlan", (vid & 0x0fff).to_string()),
                // §7.2.3.8: present under a mask of present is any tagged frame.
                (OFPVID_PRESENT, Some(OFPVID_PRESENT)) => push("vlan", "any".into()),
                _ => return Err(OfError::BAD_MATCH_MASK),
            },
            Oxm::VlanPcp(pcp) => push("vlan_pcp", pcp.to_string()),
            Oxm::IpProto(proto) => push("ip_proto", proto.to_string()),
            Oxm::Ipv4Src(a, m) => push("ip_src", masked_text(a, m)),
            Oxm::Ipv4Dst(a, m) => push("ip_dst", masked_text(a, m)),
            Oxm::Ipv6Src(a, m) => push("ip_src", masked_text(a, m)),
            Oxm::Ipv6Dst(a, m) => push("ip_dst", masked_text(a, m)),
            Oxm::TcpSrc(p) | Oxm::UdpSrc(p) => push("l4_src", p.to_string()),
            Oxm::TcpDst(p) | Oxm::UdpDst(p) => push("l4_dst", p.to_string()),
            Oxm::Icmpv4Type(t) | Oxm::Icmpv6Type(t) => push("icmp_type", t.to_string()),
            Oxm::Icmpv4Code(c) | Oxm::Icmpv6Code(c) => push("icmp_code", c.to_string()),
            // The flow key keeps the operation's low byte (where IP keeps the protocol).
            Oxm::ArpOp(op) => {
                let op = u8::try_from(op).map_err(|_| OfError::BAD_MATCH_VALUE)?;
                push("arp_op", op.to_string());
            }
            Oxm::ArpSpa(a, m) => push("arp_spa", masked_text(a, m)),
            Oxm::ArpTpa(a, m) => push("arp_tpa", masked_text(a, m)),
            Oxm::IpDscp(dscp) => push("ip_dscp", dscp.to_string()),
            Oxm::IpEcn(ecn) => push("ip_ecn", ecn.to_string()),
        }
    }
    Ok(fields)
}

/// An apply-actions list as the actions of a flow rule (`drop` for none).
pub fn action_texts(actions: &[Action], ports: &Ports) -> Result<Vec<String>, OfError> {
    let mut out = Vec::new();
    let mut iter = actions.iter().peekable();
    while let Some(action) = iter.next() {
        let text = match *action {
            Action::Output {
                port: port::FLOOD, ..
            } => "flood".to_string(),
            Action::Output {
                port: port::ALL, ..
            } => "all".to_string(),
            Action::Output {
                port: port::IN_PORT,
                ..
            } => "in_port".to_string(),
            Action::Output {
                port: port::CONTROLLER,
                max_len,
            } => format!("controller:{max_len}"),
            Action::Output { port: number, .. } => {
                let name = ports.name(number).ok_or(OfError::BAD_ACTION_OUT_PORT)?;
                format!("output:{name}")
            }
            Action::PushVlan(0x8100) => {
                // OpenFlow pushes a tag, then sets its id; the app does both in one action.
                let vid = match iter.peek() {
                    Some(Action::SetField(Oxm::VlanVid(vid, None))) => {
                        let vid = *vid & 0x0fff;
                        iter.next();
                        vid
                    }
                    _ => 0,
                };
                format!("push_vlan:{vid}")
            }
            Action::PushVlan(_) => return Err(OfError::BAD_ACTION_ARGUMENT),
            Action::PopVlan => "pop_vlan".into(),
            Action::DecNwTtl => "dec_ttl".into(),
            Action::SetField(field) => format!("set_field:{}", set_field_text(field)?),
            Action::SetNwTtl(_) => return Err(OfError::BAD_ACTION_TYPE),
            // Whether it exists is the app's to say (`no group`: BAD_OUT_GROUP).
            Action::Group(id) if id <= group::MAX => format!("group:{id}"),
            Action::Group(_) => return Err(OfError::BAD_ACTION_OUT_GROUP),
        };
        out.push(text);
    }
    if out.len() > MAX_FLOW_ACTIONS {
        return Err(OfError::BAD_ACTION_TOO_MANY);
    }
    if out.is_empty() {
        out.push("drop".into());
    }
    Ok(out)
}

fn set_field_text(field: Oxm) -> Result<String, OfError> {
    Ok(match field {
        Oxm::EthSrc(mac, None) => format!("eth_src={}", mac_text(&mac)),
        Oxm::EthDst(mac, None) => format!("eth_dst={}", mac_text(&mac)),
        Oxm::Ipv4Src(a, None) => format!("ip_src={a}"),
        Oxm::Ipv4Dst(a, None) => format!("ip_dst={a}"),
        Oxm::Ipv6Src(a, None) => format!("ip_src={a}"),
        Oxm::Ipv6Dst(a, None) => format!("ip_dst={a}"),
        Oxm::TcpSrc(p) | Oxm::UdpSrc(p) => format!("l4_src={p}"),
        Oxm::TcpDst(p) | Oxm::UdpDst(p) => format!("l4_dst={p}"),
        Oxm::VlanVid(vid, None) if vid & OFPVID_PRESENT != 0 => {
            format!("vlan_vid={}", vid & 0x0fff)
        }
        _ => return Err(OfError::BAD_ACTION_SET_TYPE),
    })
}

/// What a FLOW_MOD's instructions ask, in the app's terms.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Instructions {
    /// Apply-actions, then `clear_actions`, `write:ACTION`s and `write_metadata:V/M`, as the
    /// rule language writes those instructions.
    pub actions: Vec<String>,
    pub goto: Option<u8>,
}

/// Apply-actions, clear-actions, write-actions, write-metadata and goto-table; the meter
/// instruction is refused (BAD_INSTRUCTION/UNSUP_INST). A goto must go to a later, existing
/// table (BAD_INSTRUCTION/BAD_TABLE_ID). A write-actions with two actions of one kind is
/// refused by the app (BAD_ACTION/BAD_ARGUMENT) as the set holds one of each.
pub fn instructions(
    list: &[Instruction],
    table: u8,
    tables: u8,
    ports: &Ports,
) -> Result<Instructions, OfError> {
    let (mut apply, mut clear, mut write, mut metadata) = (Vec::new(), false, Vec::new(), None);
    let mut goto = None;
    for instruction in list {
        match instruction {
            Instruction::ApplyActions(actions) => {
                apply = action_texts(actions, ports)?;
                apply.retain(|a| a != "drop");
            }
            Instruction::ClearActions => clear = true,
            Instruction::WriteActions(actions) => {
                write = action_texts(&last_of_each_kind(actions), ports)?;
                write.retain(|a| a != "drop");
            }
            Instruction::WriteMetadata { metadata: v, mask } => {
                metadata = Some(masked_u64_text(*v, Some(*mask)));
            }
            Instruction::GotoTable(next) => {
                if *next <= table || *next >= tables {
                    return Err(OfError::BAD_INSTRUCTION_TABLE_ID);
                }
                goto = Some(*next);
            }
            Instruction::Meter(_) => return Err(OfError::BAD_INSTRUCTION_UNSUPPORTED),
        }
    }
    let mut actions = apply;
    if clear {
        actions.push("clear_actions".into());
    }
    actions.extend(write.into_iter().map(|a| format!("write:{a}")));
    actions.extend(metadata.map(|m| format!("write_metadata:{m}")));
    if actions.is_empty() && goto.is_none() {
        actions.push("drop".into());
    }
    Ok(Instructions { actions, goto })
}

/// A write-actions list as it merges into the action set (OpenFlow 1.3 §5.9: an action
/// replaces the set's action of its type, a set-field the one of its field): the last action of
/// each kind, in their order. The app's rule language refuses two of a kind instead, so that
/// nothing written there is silently lost.
fn last_of_each_kind(actions: &[Action]) -> Vec<Action> {
    let kind = |action: &Action| match action {
        Action::SetField(field) => (std::mem::discriminant(action), field.field()),
        _ => (std::mem::discriminant(action), 0),
    };
    let mut kept: Vec<Action> = Vec::new();
    for action in actions.iter().rev() {
        if !kept.iter().any(|k| kind(k) == kind(action)) {
            kept.push(*action);
        }
    }
    kept.reverse();
    kept
}

/// The flow rule of a flow entry: `fields` (the match) plus its table, goto, timeouts, cookie
/// and the FLOW_MOD `flags` the app acts on.
pub fn flow_rule(
    table: u8,
    priority: u16,
    fields: Vec<(String, String)>,
    instructions: Instructions,
    timeouts: (u16, u16),
    cookie: u64,
    flags: u16,
) -> FlowRule {
    let mut fields = fields;
    fields.push(("table".into(), table.to_string()));
    if let Some(goto) = instructions.goto {
        fields.push(("goto".into(), goto.to_string()));
    }
    if timeouts.0 > 0 {
        fields.push(("idle_timeout".into(), timeouts.0.to_string()));
    }
    if timeouts.1 > 0 {
        fields.push(("hard_timeout".into(), timeouts.1.to_string()));
    }
    if cookie != 0 {
        fields.push(("cookie".into(), cookie.to_string()));
    }
    // The flags the app acts on: SEND_FLOW_REM (kept with the flow), CHECK_OVERLAP (the add
    // is refused when a flow of its priority overlaps it).
    let named = [
        (flow_flags::SEND_FLOW_REM, "send_flow_rem"),
        (flow_flags::CHECK_OVERLAP, "check_overlap"),
    ];
    let set: Vec<&str> = named
        .iter()
        .filter(|&&(bit, _)| flags & bit != 0)
        .map(|&(_, name)| name)
        .collect();
    if !set.is_empty() {
        fields.push(("flags".into(), set.join("+")));
    }
    FlowRule {
        priority,
        fields,
        actions: instructions.actions,
    }
}

/// The PACKET_IN of a frame a worker sent for the controller: no buffer on the switch, the
/// match its in_port (OFPP_CONTROLLER for a frame the controller itself sent through the
/// tables). OpenFlow 1.3 §7.4.1 wants the pipeline fields here; in_port is the one the
/// switch has.
pub fn packet_in(record: &PacketInRecord) -> PacketIn {
    let in_port = if usize::from(record.in_port) < usize::from(u16::MAX) {
        Ports::number(record.in_port)
    } else {
        port::CONTROLLER
    };
    PacketIn {
        buffer_id: NO_BUFFER,
        total_len: record.total_len,
        reason: record.origin.reason.code(),
        table_id: record.origin.table,
        cookie: record.origin.cookie,
        // The context fields (§7.4.1): the port, and the metadata when it is not zero.
        matcher: Match::new(
            std::iter::once(Oxm::InPort(in_port))
                .chain(
                    (record.origin.metadata != 0)
                        .then_some(Oxm::Metadata(record.origin.metadata, None)),
                )
                .collect(),
        ),
        data: record.frame().to_vec(),
    }
}

/// A flow entry's match as OXM fields, prerequisites first.
pub fn entry_match(entry: &FlowEntry) -> Match {
    let (key, mask) = (entry.matcher.key(), entry.matcher.mask());
    let mut fields = Vec::new();
    if mask.in_port != 0 {
        fields.push(Oxm::InPort(Ports::number(u16::from(key.in_port))));
    }
    match entry.matcher.metadata_match() {
        (_, 0) => {}
        (value, u64::MAX) => fields.push(Oxm::Metadata(value, None)),
        (value, m) => fields.push(Oxm::Metadata(value, Some(m))),
    }
    let mac_mask = |m: [u8; 6]| (m != [0xff; 6]).then_some(m);
    if mask.dst_mac.0 != [0; 6] {
        fields.push(Oxm::EthDst(key.dst_mac.0, mac_mask(mask.dst_mac.0)));
    }
    if mask.src_mac.0 != [0; 6] {
        fields.push(Oxm::EthSrc(key.src_mac.0, mac_mask(mask.src_mac.0)));
    }
    let arp = key.ethertype == ETH_TYPE_ARP;
    let ipv4 = key.ethertype == ETH_TYPE_IPV4 || arp;
    if mask.ethertype != 0 {
        fields.push(Oxm::EthType(key.ethertype));
    }
    if mask.flags & FlowKey::FLAG_VLAN != 0 {
        let vid = key.vlan & FlowKey::VLAN_VID;
        fields.push(match (key.flags & FlowKey::FLAG_VLAN != 0, mask.vlan) {
            (false, _) => Oxm::VlanVid(OFPVID_NONE, None),
            (true, m) if m & FlowKey::VLAN_VID != 0 => Oxm::VlanVid(OFPVID_PRESENT | vid, None),
            (true, _) => Oxm::VlanVid(OFPVID_PRESENT, Some(OFPVID_PRESENT)),
        });
        if mask.vlan & FlowKey::VLAN_PCP != 0 {
            fields.push(Oxm::VlanPcp((key.vlan >> FlowKey::VLAN_PCP_SHIFT) as u8));
        }
    }
    if mask.ip_tos & FlowKey::TOS_DSCP != 0 {
        fields.push(Oxm::IpDscp(key.ip_tos >> 2));
    }
    if mask.ip_tos & FlowKey::TOS_ECN != 0 {
        fields.push(Oxm::IpEcn(key.ip_tos & FlowKey::TOS_ECN));
    }
    if mask.ip_proto != 0 {
        fields.push(if arp {
            Oxm::ArpOp(u16::from(key.ip_proto))
        } else {
            Oxm::IpProto(key.ip_proto)
        });
    }
    for (addr, addr_mask, src) in [
        (key.ip_src, mask.ip_src, true),
        (key.ip_dst, mask.ip_dst, false),
    ] {
        if addr_mask == [0; 16] {
            continue;
        }
        let (value, m) = (u128::from_be_bytes(addr), u128::from_be_bytes(addr_mask));
        let field = if ipv4 {
            let (a, m) = (Ipv4Addr::from(value as u32), Ipv4Addr::from(m as u32));
            let m = (m != Ipv4Addr::BROADCAST).then_some(m);
            match (arp, src) {
                (true, true) => Oxm::ArpSpa(a, m),
                (true, false) => Oxm::ArpTpa(a, m),
                (false, true) => Oxm::Ipv4Src(a, m),
                (false, false) => Oxm::Ipv4Dst(a, m),
            }
        } else {
            let (a, m) = (Ipv6Addr::from(value), Ipv6Addr::from(m));
            let m = (u128::from(m) != u128::MAX).then_some(m);
            if src {
                Oxm::Ipv6Src(a, m)
            } else {
                Oxm::Ipv6Dst(a, m)
            }
        };
        fields.push(field);
    }
    let tcp = key.ip_proto == 6;
    let icmp = match key.ip_proto {
        _ if arp || mask.ip_proto == 0 => None,
        1 => Some((
            Oxm::Icmpv4Type as fn(u8) -> Oxm,
            Oxm::Icmpv4Code as fn(u8) -> Oxm,
        )),
        58 => Some((
            Oxm::Icmpv6Type as fn(u8) -> Oxm,
            Oxm::Icmpv6Code as fn(u8) -> Oxm,
        )),
        _ => None,
    };
    if let Some((icmp_type, icmp_code)) = icmp {
        // The parser keeps `type << 8 | code` in the source port field.
        if mask.l4_src & 0xff00 != 0 {
            fields.push(icmp_type((key.l4_src >> 8) as u8));
        }
        if mask.l4_src & 0x00ff != 0 {
            fields.push(icmp_code(key.l4_src as u8));
        }
    } else if mask.l4_src != 0 {
        fields.push(if tcp {
            Oxm::TcpSrc(key.l4_src)
        } else {
            Oxm::UdpSrc(key.l4_src)
        });
    }
    if mask.l4_dst != 0 {
        fields.push(if tcp {
            Oxm::TcpDst(key.l4_dst)
        } else {
            Oxm::UdpDst(key.l4_dst)
        });
    }
    Match::new(fields)
}

/// A flow entry's instructions as OpenFlow's, in their order of execution (§5.9).
pub fn entry_instructions(entry: &FlowEntry) -> Vec<Instruction> {
    let mut out = Vec::new();
    let actions = of_actions(&entry.actions, entry);
    if !actions.is_empty() {
        out.push(Instruction::ApplyActions(actions));
    }
    if entry.clear_actions {
        out.push(Instruction::ClearActions);
    }
    if !entry.write_actions.is_empty() {
        out.push(Instruction::WriteActions(of_actions(
            &entry.write_actions,
            entry,
        )));
    }
    if let Some((metadata, mask)) = entry.write_metadata {
        out.push(Instruction::WriteMetadata { metadata, mask });
    }
    if let Some(goto) = entry.goto {
        out.push(Instruction::GotoTable(goto));
    }
    out
}

/// The app's actions of `entry` (its apply or write list) as OpenFlow actions.
fn of_actions(list: &[AppAction], entry: &FlowEntry) -> Vec<Action> {
    let mut actions = Vec::new();
    for action in list {
        match *action {
            AppAction::Output(index) => actions.push(Action::output(Ports::number(index))),
            AppAction::Flood => actions.push(Action::output(port::FLOOD)),
            AppAction::All => actions.push(Action::output(port::ALL)),
            AppAction::InPort => actions.push(Action::output(port::IN_PORT)),
            AppAction::Controller(max_len) => actions.push(Action::Output {
                port: port::CONTROLLER,
                max_len,
            }),
            AppAction::Drop => {}
            AppAction::PushVlan(vid) => {
                actions.push(Action::PushVlan(0x8100));
                actions.push(Action::SetField(Oxm::VlanVid(OFPVID_PRESENT | vid, None)));
            }
            AppAction::PopVlan => actions.push(Action::PopVlan),
            AppAction::DecTtl => actions.push(Action::DecNwTtl),
            AppAction::Group(id) => actions.push(Action::Group(id)),
            AppAction::SetField(field) => actions.push(Action::SetField(match field {
                SetField::EthSrc(mac) => Oxm::EthSrc(mac.0, None),
                SetField::EthDst(mac) => Oxm::EthDst(mac.0, None),
                SetField::Ipv4Src(a) => Oxm::Ipv4Src(a, None),
                SetField::Ipv4Dst(a) => Oxm::Ipv4Dst(a, None),
                SetField::Ipv6Src(a) => Oxm::Ipv6Src(a, None),
                SetField::Ipv6Dst(a) => Oxm::Ipv6Dst(a, None),
                SetField::L4Src(p) if entry.matcher.key().ip_proto == 17 => Oxm::UdpSrc(p),
                SetField::L4Src(p) => Oxm::TcpSrc(p),
                SetField::L4Dst(p) if entry.matcher.key().ip_proto == 17 => Oxm::UdpDst(p),
                SetField::L4Dst(p) => Oxm::TcpDst(p),
                SetField::VlanVid(vid) => Oxm::VlanVid(OFPVID_PRESENT | vid, None),
            })),
        }
    }
    actions
}

#[cfg(test)]
mod tests {
    use wirespeed_dataplane::app::fields;

    use super::*;

    fn ports() -> Ports {
        Ports {
            names: vec!["p0".into(), "p1".into()],
        }
    }

    fn index(name: &str) -> Option<u16> {
        ports().index(name)
    }

    /// A FLOW_MOD's match and apply-actions, through the app's own rule reader and back.
    fn through_the_app(matcher: Match, actions: Vec<Action>) -> (Match, Vec<Instruction>) {
        through_the_app_with(matcher, vec![Instruction::ApplyActions(actions)])
    }

    /// A FLOW_MOD's match and instructions, through the app's own rule reader and back (as a
    /// flow statistics reply has them: through the text `show flows` prints, too).
    fn through_the_app_with(matcher: Match, list: Vec<Instruction>) -> (Match, Vec<Instruction>) {
        let ports = ports();
        let fields = match_fields(&matcher, &ports).unwrap();
        let list = instructions(&list, 0, 2, &ports).unwrap();
        let rule = flow_rule(0, 7, fields, list, (0, 0), 0, 0);
        let parsed = fields::flow_rule(&rule, &index).unwrap();
        let name = |p: u16| ports.names[usize::from(p)].clone();
        let text = FlowRule {
            priority: 7,
            fields: fields::match_text(&parsed.entry.matcher, &name)
                .split(',')
                .filter_map(|f| f.split_once('='))
                .map(|(n, v)| (n.to_string(), v.to_string()))
                .chain(
                    parsed
                        .entry
                        .goto
                        .map(|g| ("goto".to_string(), g.to_string())),
                )
                .collect(),
            actions: fields::entry_actions_text(&parsed.entry, &name)
                .split(',')
                .map(str::to_string)
                .collect(),
        };
        let shown = fields::flow_rule(&text, &index).unwrap();
        assert_eq!(shown.entry, parsed.entry, "{text:?}");
        (
            entry_match(&parsed.entry),
            entry_instructions(&parsed.entry),
        )
    }

    #[test]
    fn new_fields_masks_and_instructions_come_back_as_they_went() {
        let tagged = Match::new(vec![
            Oxm::Metadata(0x1200, Some(0xff00)),
            Oxm::EthDst([1, 0, 0, 0, 0, 0], Some([1, 0, 0, 0, 0, 0])),
            Oxm::EthSrc([2, 0, 0, 0, 0, 0], Some([0xff, 0xff, 0xff, 0, 0, 0])),
            Oxm::EthType(ETH_TYPE_IPV4),
            Oxm::VlanVid(OFPVID_PRESENT | 10, None),
            Oxm::VlanPcp(5),
            Oxm::IpDscp(46),
            Oxm::IpEcn(1),
            Oxm::IpProto(1),
            Oxm::Ipv4Src([10, 0, 0, 1].into(), Some([255, 0, 0, 255].into())),
            Oxm::Icmpv4Type(8),
            Oxm::Icmpv4Code(0),
        ]);
        let list = vec![
            Instruction::ApplyActions(vec![Action::DecNwTtl]),
            Instruction::ClearActions,
            Instruction::WriteActions(vec![
                Action::SetField(Oxm::EthDst([2, 0, 0, 0, 0, 9], None)),
                Action::output(2),
            ]),
            Instruction::WriteMetadata {
                metadata: 0x5,
                mask: 0xf,
            },
            Instruction::GotoTable(1),
        ];
        let (matcher, instructions) = through_the_app_with(tagged.clone(), list.clone());
        assert_eq!(matcher, tagged);
        assert_eq!(instructions, list);
        // A priority without an id is "any tag" and the priority, as ovs-ofctl sends it.
        let any_tag = Match::new(vec![
            Oxm::VlanVid(OFPVID_PRESENT, Some(OFPVID_PRESENT)),
            Oxm::VlanPcp(3),
            Oxm::EthType(0x86dd),
            Oxm::IpProto(58),
            Oxm::Icmpv6Type(135),
        ]);
        let (matcher, _) = through_the_app_with(any_tag, vec![]);
        assert_eq!(
            matcher.fields,
            [
                Oxm::EthType(0x86dd),
                Oxm::VlanVid(OFPVID_PRESENT, Some(OFPVID_PRESENT)),
                Oxm::VlanPcp(3),
                Oxm::IpProto(58),
                Oxm::Icmpv6Type(135),
            ]
        );
        let arp = Match::new(vec![
            Oxm::EthType(0x0806),
            Oxm::ArpOp(2),
            Oxm::ArpSpa([10, 0, 0, 1].into(), None),
            Oxm::ArpTpa([10, 0, 0, 0].into(), Some([255, 255, 0, 0].into())),
        ]);
        let write = vec![Instruction::WriteActions(vec![Action::output(port::FLOOD)])];
        let (matcher, instructions) = through_the_app_with(arp.clone(), write.clone());
        assert_eq!((matcher, instructions), (arp, write));
    }

    #[test]
    fn matches_and_actions_come_back_as_they_went() {
        let v6 = Match::new(vec![
            Oxm::InPort(2),
            Oxm::EthType(0x86dd),
            Oxm::IpProto(17),
            Oxm::Ipv6Dst(
                "2001:db8::".parse().unwrap(),
                Some("ffff:ffff::".parse().unwrap()),
            ),
            Oxm::UdpDst(53),
        ]);
        let actions = vec![
            Action::PushVlan(0x8100),
            Action::SetField(Oxm::VlanVid(OFPVID_PRESENT | 10, None)),
            Action::SetField(Oxm::UdpDst(5353)),
            Action::output(port::IN_PORT),
            Action::DecNwTtl,
            Action::output(port::ALL),
            Action::output(1),
        ];
        let (matcher, instructions) = through_the_app(v6.clone(), actions.clone());
        assert_eq!(matcher, v6);
        assert_eq!(instructions, vec![Instruction::ApplyActions(actions)]);
        let untagged = Match::new(vec![
            Oxm::EthSrc([2, 0, 0, 0, 0, 1], None),
            Oxm::EthType(ETH_TYPE_IPV4),
            Oxm::VlanVid(OFPVID_NONE, None),
            Oxm::Ipv4Src([10, 0, 0, 0].into(), Some([255, 0, 0, 0].into())),
        ]);
        let (matcher, instructions) = through_the_app(untagged, vec![Action::output(port::FLOOD)]);
        assert!(matcher.fields.contains(&Oxm::VlanVid(OFPVID_NONE, None)));
        assert!(matcher.fields.contains(&Oxm::Ipv4Src(
            [10, 0, 0, 0].into(),
            Some([255, 0, 0, 0].into())
        )));
        assert_eq!(
            instructions,
            vec![Instruction::ApplyActions(vec![Action::output(port::FLOOD)])]
        );
    }

    #[test]
    fn refusals_name_the_specs_error() {
        let ports = ports();
        // The key keeps an ARP operation's low byte.
        let op = Match::new(vec![Oxm::EthType(ETH_TYPE_ARP), Oxm::ArpOp(0x101)]);
        assert_eq!(match_fields(&op, &ports), Err(OfError::BAD_MATCH_VALUE));
        // A VLAN id mask other than exact or "any tag".
        let vid_mask = Match::new(vec![Oxm::VlanVid(OFPVID_PRESENT | 8, Some(0x1ff8))]);
        assert_eq!(
            match_fields(&vid_mask, &ports),
            Err(OfError::BAD_MATCH_MASK)
        );
        assert_eq!(
            match_fields(&Match::new(vec![Oxm::InPort(3)]), &ports),
            Err(OfError::BAD_MATCH_VALUE)
        );
        for (action, error) in [
            (Action::output(port::LOCAL), OfError::BAD_ACTION_OUT_PORT),
            (Action::PushVlan(0x88a8), OfError::BAD_ACTION_ARGUMENT),
            (Action::SetNwTtl(3), OfError::BAD_ACTION_TYPE),
            (Action::Group(group::ALL), OfError::BAD_ACTION_OUT_GROUP),
            (
                Action::SetField(Oxm::IpProto(6)),
                OfError::BAD_ACTION_SET_TYPE,
            ),
        ] {
            assert_eq!(action_texts(&[action], &ports), Err(error), "{action:?}");
        }
        assert_eq!(
            action_texts(&[Action::DecNwTtl; 17], &ports),
            Err(OfError::BAD_ACTION_TOO_MANY)
        );
        let goto_back = [Instruction::GotoTable(0)];
        assert_eq!(
            instructions(&goto_back, 1, 2, &ports),
            Err(OfError::BAD_INSTRUCTION_TABLE_ID)
        );
        assert_eq!(
            instructions(&[Instruction::Meter(1)], 0, 2, &ports),
            Err(OfError::BAD_INSTRUCTION_UNSUPPORTED)
        );
        // Two of a kind in write-actions: the later one replaces the earlier (§5.9).
        let twice = [Instruction::WriteActions(vec![
            Action::output(1),
            Action::SetField(Oxm::EthDst([2; 6], None)),
            Action::output(2),
        ])];
        assert_eq!(
            instructions(&twice, 0, 2, &ports).unwrap().actions,
            [
                "write:set_field:eth_dst=02:02:02:02:02:02",
                "write:output:p1"
            ]
        );
        // No instructions: a drop.
        assert_eq!(instructions(&[], 0, 2, &ports).unwrap().actions, ["drop"]);
    }
}
