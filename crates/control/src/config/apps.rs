//! Validation of the apps' sections (ACL, OpenFlow, bridge, router) into their
//! configurations, each error naming the place and the fix.

use toml::Spanned;
use wirespeed_dataplane::app::fields;
use wirespeed_dataplane::app::openflow::Action;
use wirespeed_dataplane::app::openflow::group::GroupTable;
use wirespeed_dataplane::command::{AclAction, AclRule, FlowRule, GroupRule};
use wirespeed_packet::wire::EthernetAddress;

use super::raw::{RawAcl, RawBridge, RawFib, RawGroup, RawOpenFlow, RawRouter};
use super::{
    AclConfig, AppConfig, ConfigError, FibKind, Locator, OpenFlowConfig, OpenFlowMiss, PortConfig,
    PortVlan, RouterConfig, RouterInterface, RouterNeighbour, RouterRoute,
};
use crate::openflow::{self, AgentConfig, FailMode};

pub(super) fn acl_config(at: &Locator<'_>, raw: Spanned<RawAcl>) -> Result<AclConfig, ConfigError> {
    let action = |text: &Spanned<String>, key: &str| match text.get_ref().as_str() {
        "permit" => Ok(AclAction::Permit),
        "deny" => Ok(AclAction::Deny),
        other => Err(at.error(
            text.span(),
            key,
            &format!("{other:?} is not an ACL action"),
            "write \"permit\" or \"deny\"",
        )),
    };
    let raw = raw.into_inner();
    let default = match &raw.default {
        Some(text) => action(text, "acl.default")?,
        None => AclAction::Permit,
    };
    let mut rules = Vec::new();
    for (i, rule) in raw.rule.iter().enumerate() {
        let key = format!("acl.rule[{i}]");
        let span = rule.span();
        let rule = rule.get_ref();
        let named = [
            ("src", &rule.src),
            ("dst", &rule.dst),
            ("proto", &rule.proto),
            ("src_port", &rule.src_port),
            ("dst_port", &rule.dst_port),
        ];
        let mut typed = AclRule {
            action: action(&rule.action, &format!("{key}.action"))?,
            fields: Vec::new(),
        };
        for (name, value) in named {
            let Some(value) = value else { continue };
            typed
                .fields
                .push((name.to_string(), value.get_ref().text()));
            if let Err(error) = fields::acl_rule(&typed) {
                return Err(at.error(
                    value.span(),
                    &format!("{key}.{name}"),
                    &error.problem,
                    &format!("write {}", error.accepted),
                ));
            }
        }
        if rules.len() >= crate::tables::MAX_ACL_RULES {
            return Err(at.error(
                span,
                &key,
                "too many ACL rules",
                "merge rules, or load them with `ctl acl load`",
            ));
        }
        rules.push(typed);
    }
    Ok(AclConfig { default, rules })
}

/// Largest exact-match cache or megaflow table the OpenFlow app may ask for.
pub(super) const MAX_OPENFLOW_CACHE: usize = 1 << 22;

pub(super) fn openflow_app(
    at: &Locator<'_>,
    raw: Option<Spanned<RawOpenFlow>>,
    ports: &[PortConfig],
    port_index: PortIndex<'_>,
) -> Result<AppConfig, ConfigError> {
    let Some(raw) = raw else {
        return Err(at.error(
            0..0,
            "openflow",
            "the openflow app needs an [openflow] table",
            "add [openflow] and [[openflow.flow]] tables; see docs/configuration.md",
        ));
    };
    let raw = raw.into_inner();
    let tables = match &raw.tables {
        Some(t) if *t.get_ref() == 0 => {
            return Err(at.error(
                t.span(),
                "openflow.tables",
                "must be 1 to 255",
                "4 tables suit most pipelines",
            ));
        }
        Some(t) => *t.get_ref(),
        None => 4,
    };
    let sized = |value: &Option<Spanned<usize>>, key: &str, default: usize, max: usize| match value
    {
        Some(v) if *v.get_ref() > max => Err(at.error(
            v.span(),
            key,
            &format!("must be at most {max}"),
            &format!("{default} is the default"),
        )),
        Some(v) => Ok(*v.get_ref()),
        None => Ok(default),
    };
    let flows_per_table = sized(
        &raw.flows_per_table,
        "openflow.flows_per_table",
        65_536,
        1 << 20,
    )?;
    let cache_entries = sized(
        &raw.cache_entries,
        "openflow.cache_entries",
        8192,
        MAX_OPENFLOW_CACHE,
    )?;
    let megaflows = sized(
        &raw.megaflows,
        "openflow.megaflows",
        16_384,
        MAX_OPENFLOW_CACHE,
    )?;
    let miss = match &raw.miss {
        None => OpenFlowMiss::Drop,
        Some(text) => match text.get_ref().as_str() {
            "drop" => OpenFlowMiss::Drop,
            "flood" => OpenFlowMiss::Flood,
            other => match other.strip_prefix("output:") {
                Some(name) => {
                    let name = Spanned::new(text.span(), name.to_string());
                    OpenFlowMiss::Output(port_index(&name, "openflow.miss")?)
                }
                None => {
                    return Err(at.error(
                        text.span(),
                        "openflow.miss",
                        &format!("{other:?} is not a miss action"),
                        "write \"drop\", \"flood\" or \"output:PORT\"",
                    ));
                }
            },
        },
    };
    let port = |name: &str| {
        ports
            .iter()
            .position(|p| p.name == name)
            .and_then(|i| u16::try_from(i).ok())
    };
    let (groups, group_table) = openflow_groups(at, &raw.group, ports.len(), &port)?;
    let mut flows = Vec::new();
    for (i, flow) in raw.flow.iter().enumerate() {
        let key = format!("openflow.flow[{i}]");
        let span = flow.span();
        let flow = flow.get_ref();
        let table = flow.table.as_ref().map_or(0, |t| *t.get_ref());
        if table >= tables {
            return Err(at.error(
                flow.table.as_ref().map_or(span.clone(), Spanned::span),
                &format!("{key}.table"),
                &format!("table {table} does not exist (the app has {tables})"),
                "use a table below openflow.tables, or raise openflow.tables",
            ));
        }
        if let Some(goto) = &flow.goto
            && (*goto.get_ref() <= table || *goto.get_ref() >= tables)
        {
            return Err(at.error(
                goto.span(),
                &format!("{key}.goto"),
                &format!("goto {} from table {table}", goto.get_ref()),
                "a flow may only go to a later table that exists",
            ));
        }
        let mut rule = FlowRule {
            priority: flow.priority.as_ref().map_or(0, |p| *p.get_ref()),
            fields: vec![("table".into(), table.to_string())],
            actions: Vec::new(),
        };
        if let Some(goto) = &flow.goto {
            rule.fields
                .push(("goto".into(), goto.get_ref().to_string()));
        }
        for (name, value) in [
            ("idle_timeout", &flow.idle_timeout),
            ("hard_timeout", &flow.hard_timeout),
        ] {
            if let Some(value) = value {
                rule.fields.push((name.into(), value.get_ref().to_string()));
            }
        }
        if let Some(cookie) = &flow.cookie {
            rule.fields
                .push(("cookie".into(), cookie.get_ref().to_string()));
        }
        if let Some(matches) = &flow.matches {
            for word in matches.get_ref().split(',').map(str::trim) {
                if word.is_empty() || word == "*" {
                    continue;
                }
                let Some((name, value)) = word.split_once('=') else {
                    return Err(at.error(
                        matches.span(),
                        &format!("{key}.match"),
                        &format!("{word:?} is not FIELD=VALUE"),
                        &format!(
                            "write e.g. \"in_port=p0,ip_dst=10.0.0.0/8\"; fields: {}",
                            fields::FLOW_FIELDS
                        ),
                    ));
                };
                rule.fields.push((name.trim().into(), value.trim().into()));
            }
        }
        rule.actions = flow
            .actions
            .get_ref()
            .split(',')
            .map(|a| a.trim().to_string())
            .filter(|a| !a.is_empty())
            .collect();
        if rule.actions.is_empty() {
            return Err(at.error(
                flow.actions.span(),
                &format!("{key}.actions"),
                "a flow needs actions",
                "write e.g. actions = \"output:p1\" or actions = \"drop\"",
            ));
        }
        let missing_group = fields::flow_rule(&rule, &port).ok().and_then(|parsed| {
            parsed
                .entry
                .actions
                .iter()
                .find_map(|action| match *action {
                    Action::Group(id) if group_table.get(id).is_none() => Some(id),
                    _ => None,
                })
        });
        if let Some(id) = missing_group {
            return Err(at.error(
                flow.actions.span(),
                &format!("{key}.actions"),
                &format!("group:{id}: no [[openflow.group]] has id = {id}"),
                "add the group (see docs/configuration.md), or send to one that exists",
            ));
        }
        if let Err(error) = fields::flow_rule(&rule, &port) {
            let (span, part) = if error.place.starts_with("action") {
                (flow.actions.span(), "actions")
            } else {
                (flow.matches.as_ref().map_or(span, Spanned::span), "match")
            };
            let names: Vec<&str> = ports.iter().map(|p| p.name.as_str()).collect();
            return Err(at.error(
                span,
                &format!("{key}.{part}"),
                &format!("{}: {}", error.place, error.problem),
                &format!("write {} (ports: {})", error.accepted, names.join(", ")),
            ));
        }
        flows.push(rule);
    }
    let agent = openflow_agent(at, &raw)?;
    Ok(AppConfig::OpenFlow(OpenFlowConfig {
        tables,
        miss,
        flows_per_table,
        cache_entries,
        megaflows,
        groups,
        flows,
        agent,
    }))
}

/// `[[openflow.group]]`: each group's rule, checked by putting it into a group table of the
/// app's in order, as the switch will (so a chain to a later group, a loop or a bucket's port
/// the switch lacks is refused here); the table, to check the flows' `group:N` against.
fn openflow_groups(
    at: &Locator<'_>,
    raw: &[Spanned<RawGroup>],
    ports: usize,
    port: &dyn Fn(&str) -> Option<u16>,
) -> Result<(Vec<GroupRule>, GroupTable), ConfigError> {
    let mut table = GroupTable::new(usize::MAX);
    let mut rules = Vec::new();
    for (i, group) in raw.iter().enumerate() {
        let key = format!("openflow.group[{i}]");
        let group = group.get_ref();
        let rule = GroupRule {
            id: *group.id.get_ref(),
            kind: group.kind.get_ref().clone(),
            buckets: group
                .buckets
                .iter()
                .map(|b| {
                    b.get_ref()
                        .split(',')
                        .map(|a| a.trim().to_string())
                        .collect()
                })
                .collect(),
        };
        let spec = fields::group_rule(&rule, port).map_err(|error| {
            let (span, part) = match error.place.strip_prefix("bucket ") {
                Some(rest) => {
                    let index: usize = rest
                        .split(' ')
                        .next()
                        .and_then(|n| n.parse().ok())
                        .unwrap_or(0);
                    let span = group
                        .buckets
                        .get(index)
                        .map_or(group.kind.span(), Spanned::span);
                    (span, format!("buckets[{index}]"))
                }
                None => (group.kind.span(), "type".to_string()),
            };
            at.error(
                span,
                &format!("{key}.{part}"),
                &format!("{}: {}", error.place, error.problem),
                &format!("write {}", error.accepted),
            )
        })?;
        let check = |action: &Action| match *action {
            Action::Output(p) if usize::from(p) >= ports => {
                Err(format!("output to port {p}: the switch has {ports} ports"))
            }
            _ => Ok(()),
        };
        table.insert(spec, false, 0, check).map_err(|error| {
            at.error(
                group.id.span(),
                &key,
                &error.to_string(),
                "groups go in order: a bucket's group:N names a group above it",
            )
        })?;
        rules.push(rule);
    }
    Ok((rules, table))
}

/// The agent's keys of `[openflow]`, checked; `None` when none is given.
fn openflow_agent(at: &Locator<'_>, raw: &RawOpenFlow) -> Result<Option<AgentConfig>, ConfigError> {
    if raw.listen.is_none()
        && raw.controllers.is_none()
        && raw.datapath_id.is_none()
        && raw.fail_mode.is_none()
    {
        return Ok(None);
    }
    let mut agent = AgentConfig::default();
    if let Some(listen) = &raw.listen {
        agent.listen = openflow::parse_listen(listen.get_ref()).ok_or_else(|| {
            at.error(
                listen.span(),
                "openflow.listen",
                &format!("{:?} is not a passive OpenFlow target", listen.get_ref()),
                "write \"ptcp:PORT\" (on 127.0.0.1), \"ptcp:PORT:ADDR\" or \"none\"",
            )
        })?;
    }
    if let Some(controllers) = &raw.controllers {
        for (i, target) in controllers.get_ref().iter().enumerate() {
            let addr = openflow::parse_controller(target.get_ref()).ok_or_else(|| {
                at.error(
                    target.span(),
                    &format!("openflow.controllers[{i}]"),
                    &format!(
                        "{:?} is not an OpenFlow controller target",
                        target.get_ref()
                    ),
                    "write \"tcp:ADDR:PORT\" with an IP address (\"tcp:[ADDR]:PORT\" for IPv6)",
                )
            })?;
            agent.controllers.push(addr);
        }
    }
    if let Some(id) = &raw.datapath_id {
        let text = id.get_ref().text();
        let parsed = match text.strip_prefix("0x") {
            Some(hex) => u64::from_str_radix(hex, 16).ok(),
            None => text.parse().ok(),
        };
        agent.datapath_id = parsed.ok_or_else(|| {
            at.error(
                id.span(),
                "openflow.datapath_id",
                &format!("{text:?} is not a 64-bit datapath id"),
                "write a number, e.g. datapath_id = \"0x0000000000000001\" or 1",
            )
        })?;
    }
    if let Some(mode) = &raw.fail_mode {
        agent.fail_mode = match mode.get_ref().as_str() {
            "secure" => FailMode::Secure,
            "standalone" => FailMode::Standalone,
            other => {
                return Err(at.error(
                    mode.span(),
                    "openflow.fail_mode",
                    &format!("{other:?} is not a fail mode"),
                    "write fail_mode = \"secure\" (without a controller the switch keeps its \
                     flows and drops what they send to it) or \"standalone\" (it also switches \
                     those frames as a learning switch)",
                ));
            }
        };
    }
    Ok(Some(agent))
}

/// Largest MAC table a bridge may ask for (the table's own limit).
pub(super) const MAX_MACS: usize = 1 << 20;

/// Resolves a port name at a key to its index, or an error naming the place.
type PortIndex<'a> = &'a dyn Fn(&Spanned<String>, &str) -> Result<usize, ConfigError>;

pub(super) fn bridge_app(
    at: &Locator<'_>,
    raw: Option<Spanned<RawBridge>>,
    ports: &[PortConfig],
    port_index: PortIndex<'_>,
) -> Result<AppConfig, ConfigError> {
    let raw = raw.map(Spanned::into_inner);
    let mut roles: Vec<(usize, PortVlan)> =
        (0..ports.len()).map(|i| (i, PortVlan::Access(1))).collect();
    let (mut mac_capacity, mut age_seconds) = (8192, 300.0);
    let vlan_ok = |id: u16| (1..=4094).contains(&id);
    if let Some(raw) = raw {
        if let Some(c) = &raw.mac_capacity {
            if !(1..=MAX_MACS).contains(c.get_ref()) {
                return Err(at.error(
                    c.span(),
                    "bridge.mac_capacity",
                    "must be 1 to 1048576",
                    "8192 is a good start",
                ));
            }
            mac_capacity = *c.get_ref();
        }
        if let Some(a) = &raw.age_seconds {
            if !(a.get_ref().is_finite() && *a.get_ref() > 0.0) {
                return Err(at.error(
                    a.span(),
                    "bridge.age_seconds",
                    "must be a positive number of seconds",
                    "300 is the 802.1Q default",
                ));
            }
            age_seconds = *a.get_ref();
        }
        for (i, port) in raw.port.iter().enumerate() {
            let key = format!("bridge.port[{i}]");
            let port = port.get_ref();
            let index = port_index(&port.name, &key)?;
            let role = match (&port.access, &port.trunk, &port.native) {
                (Some(access), None, None) if vlan_ok(*access.get_ref()) => {
                    PortVlan::Access(*access.get_ref())
                }
                (Some(access), None, None) => {
                    return Err(at.error(
                        access.span(),
                        &format!("{key}.access"),
                        "a VLAN id is 1 to 4094",
                        "use a VLAN id in range",
                    ));
                }
                (None, Some(trunk), native) => {
                    if let Some(bad) = trunk.get_ref().iter().find(|&&id| !vlan_ok(id)) {
                        return Err(at.error(
                            trunk.span(),
                            &format!("{key}.trunk"),
                            &format!("VLAN id {bad} is not in 1 to 4094"),
                            "list VLAN ids in range",
                        ));
                    }
                    if let Some(native) = native
                        && !vlan_ok(*native.get_ref())
                    {
                        return Err(at.error(
                            native.span(),
                            &format!("{key}.native"),
                            "a VLAN id is 1 to 4094",
                            "use a VLAN id in range",
                        ));
                    }
                    PortVlan::Trunk {
                        allowed: trunk.get_ref().clone(),
                        native: native.as_ref().map(|n| *n.get_ref()),
                    }
                }
                _ => {
                    return Err(at.error(
                        port.name.span(),
                        &key,
                        "a bridge port has either `access = VLAN` or `trunk = [VLANs]` (with an optional `native = VLAN`)",
                        "give the port exactly one of access or trunk",
                    ));
                }
            };
            roles[index] = (index, role);
        }
    }
    if ports.len() < 2 {
        return Err(at.error(
            0..0,
            "port",
            "a bridge needs at least two ports",
            "define two or more [[port]] tables",
        ));
    }
    Ok(AppConfig::Bridge {
        ports: roles,
        mac_capacity,
        age_seconds,
    })
}

/// `addr/len`, e.g. `198.18.0.254/24` or `2001:2::/48`.
pub(super) fn parse_prefix(
    at: &Locator<'_>,
    text: &Spanned<String>,
    key: &str,
) -> Result<(std::net::IpAddr, u8), ConfigError> {
    let bad = || {
        at.error(
            text.span(),
            key,
            &format!(
                "{:?} is not an address with a prefix length",
                text.get_ref()
            ),
            "write it like 198.18.0.254/24 or 2001:2::1/64",
        )
    };
    let (addr, len) = text.get_ref().split_once('/').ok_or_else(bad)?;
    let addr: std::net::IpAddr = addr.parse().map_err(|_| bad())?;
    let len: u8 = len.parse().map_err(|_| bad())?;
    if len > if addr.is_ipv4() { 32 } else { 128 } {
        return Err(bad());
    }
    Ok((addr, len))
}

pub(super) fn parse_address(
    at: &Locator<'_>,
    text: &Spanned<String>,
    key: &str,
) -> Result<std::net::IpAddr, ConfigError> {
    text.get_ref().parse().map_err(|_| {
        at.error(
            text.span(),
            key,
            &format!("{:?} is not an IPv4 or IPv6 address", text.get_ref()),
            "write it like 198.18.1.1 or 2001:2:0:1::1",
        )
    })
}

pub(super) fn parse_mac(
    at: &Locator<'_>,
    text: &Spanned<String>,
    key: &str,
) -> Result<[u8; 6], ConfigError> {
    text.get_ref()
        .parse::<EthernetAddress>()
        .map(|mac| mac.0)
        .map_err(|_| {
            at.error(
                text.span(),
                key,
                &format!("{:?} is not a MAC address", text.get_ref()),
                "write it like 02:57:53:00:01:01",
            )
        })
}

pub(super) fn router_app(
    at: &Locator<'_>,
    raw: Option<Spanned<RawRouter>>,
    port_index: PortIndex<'_>,
) -> Result<AppConfig, ConfigError> {
    let Some(raw) = raw else {
        return Err(at.error(
            0..0,
            "router",
            "the router app needs a [router] table with interfaces",
            "add [[router.interface]] tables with port and addresses",
        ));
    };
    let raw = raw.into_inner();
    let mut interfaces = Vec::new();
    for (i, interface) in raw.interface.iter().enumerate() {
        let key = format!("router.interface[{i}]");
        let interface = interface.get_ref();
        let port = port_index(&interface.port, &format!("{key}.port"))?;
        let mac = match &interface.mac {
            Some(mac) => Some(parse_mac(at, mac, &format!("{key}.mac"))?),
            None => None,
        };
        let addresses = interface
            .addresses
            .get_ref()
            .iter()
            .map(|a| parse_prefix(at, a, &format!("{key}.addresses")))
            .collect::<Result<Vec<_>, _>>()?;
        interfaces.push(RouterInterface {
            port,
            mac,
            addresses,
        });
    }
    if interfaces.is_empty() {
        return Err(at.error(
            0..0,
            "router.interface",
            "a router needs at least one interface",
            "add [[router.interface]] with port and addresses",
        ));
    }
    let mut routes: Vec<RouterRoute> = Vec::new();
    for (i, route) in raw.route.iter().enumerate() {
        let key = format!("router.route[{i}]");
        let route = route.get_ref();
        let prefix = parse_prefix(at, &route.prefix, &format!("{key}.prefix"))?;
        // A route means what it says: its network address as written (the control protocol's
        // rule, so `ctl route add` and route files agree), its prefix routed once.
        if let Err(error) = crate::protocol::parse_prefix(route.prefix.get_ref()) {
            return Err(at.error(
                route.prefix.span(),
                &format!("{key}.prefix"),
                &error.error,
                &error.fix,
            ));
        }
        if let Some(first) = routes.iter().position(|r| r.prefix == prefix) {
            return Err(at.error(
                route.prefix.span(),
                &format!("{key}.prefix"),
                &format!(
                    "{} is routed twice: router.route[{first}] routes it already",
                    route.prefix.get_ref()
                ),
                "keep one route per prefix; for several gateways (ECMP) list them in one \
                 route's via",
            ));
        }
        let via = route
            .via
            .get_ref()
            .iter()
            .map(|v| parse_address(at, v, &format!("{key}.via")))
            .collect::<Result<Vec<_>, _>>()?;
        if via.is_empty() || via.iter().any(|v| v.is_ipv4() != prefix.0.is_ipv4()) {
            return Err(at.error(
                route.via.span(),
                &format!("{key}.via"),
                "a route needs one or more gateways of the prefix's address family",
                "list gateways like via = [\"198.18.1.1\"]",
            ));
        }
        let own = interfaces
            .iter()
            .enumerate()
            .find_map(|(index, interface)| {
                let gateway = via
                    .iter()
                    .find(|&&v| interface.addresses.iter().any(|&(addr, _)| addr == v))?;
                Some((index, gateway))
            });
        if let Some((index, &gateway)) = own {
            let (message, fix) = crate::tables::own_gateway(gateway);
            return Err(at.error(
                route.via.span(),
                &format!("{key}.via"),
                &format!("{message} (router.interface[{index}])"),
                fix,
            ));
        }
        routes.push(RouterRoute { prefix, via });
    }
    let mut neighbours = Vec::new();
    for (i, neighbour) in raw.neighbour.iter().enumerate() {
        let key = format!("router.neighbour[{i}]");
        let neighbour = neighbour.get_ref();
        neighbours.push(RouterNeighbour {
            port: port_index(&neighbour.port, &format!("{key}.port"))?,
            address: parse_address(at, &neighbour.address, &format!("{key}.address"))?,
            mac: parse_mac(at, &neighbour.mac, &format!("{key}.mac"))?,
        });
    }
    Ok(AppConfig::Router(RouterConfig {
        interfaces,
        routes,
        neighbours,
        neighbour_capacity: raw.neighbour_capacity.map_or(4096, |c| *c.get_ref()),
        icmp_rate: raw.icmp_rate.map_or(1000, |r| *r.get_ref()),
        forward_ipv4_options: raw.forward_ipv4_options.unwrap_or(false),
        fib: match raw.fib {
            Some(RawFib::Trie) => FibKind::Trie,
            Some(RawFib::Dir24) => FibKind::Dir24,
            Some(RawFib::Auto) | None => FibKind::Auto,
        },
    }))
}

#[cfg(test)]
mod tests {
    use super::super::{ConfigError, parse};

    /// A router with one interface (198.18.0.254/24, 2001:2::fe/64) and `routes`.
    fn router(routes: &str) -> Result<super::super::Config, ConfigError> {
        parse(
            "router.toml",
            &format!(
                "[switch]\napp = \"router\"\n\n[[port]]\nname = \"p0\"\nbackend = \"pcap\"\n\
                 rx = \"in.pcap\"\n\n[[router.interface]]\nport = \"p0\"\n\
                 addresses = [\"198.18.0.254/24\", \"2001:2::fe/64\"]\n{routes}"
            ),
        )
    }

    fn route(prefix: &str, via: &str) -> String {
        format!("\n[[router.route]]\nprefix = \"{prefix}\"\nvia = [{via}]\n")
    }

    #[test]
    fn fib_is_auto_unless_set_and_a_bad_word_is_refused_naming_the_words() {
        use super::super::{AppConfig, FibKind};
        let fib = |config: super::super::Config| match config.app {
            AppConfig::Router(router) => router.fib,
            _ => unreachable!("a router"),
        };
        assert_eq!(fib(router("").unwrap()), FibKind::Auto);
        assert_eq!(
            fib(router("[router]\nfib = \"auto\"").unwrap()),
            FibKind::Auto
        );
        assert_eq!(
            fib(router("[router]\nfib = \"dir24\"").unwrap()),
            FibKind::Dir24
        );
        assert_eq!(
            fib(router("[router]\nfib = \"trie\"").unwrap()),
            FibKind::Trie
        );
        let error = router("[router]\nfib = \"poptrie\"").unwrap_err();
        assert_eq!(error.key, "router.fib");
        assert!(error.line > 0, "{error}");
        assert!(
            ["auto", "dir24", "trie"]
                .iter()
                .all(|word| error.message.contains(word)),
            "{error}"
        );
    }

    #[test]
    fn config_routes_mean_what_they_say() {
        let good = route("10.0.0.0/8", "\"198.18.0.1\"") + &route("10.0.0.0/16", "\"198.18.0.2\"");
        router(&good).unwrap();

        let error = router(&route("10.0.0.1/8", "\"198.18.0.1\"")).unwrap_err();
        assert_eq!(error.key, "router.route[0].prefix");
        assert_eq!(error.message, "`10.0.0.1/8` has host bits set");
        assert_eq!(
            error.fix,
            "write the network, 10.0.0.0/8, or the host route, 10.0.0.1/32"
        );

        let twice = good.clone() + &route("10.0.0.0/8", "\"198.18.0.3\"");
        let error = router(&twice).unwrap_err();
        assert_eq!(error.key, "router.route[2].prefix");
        assert_eq!(
            error.message,
            "10.0.0.0/8 is routed twice: router.route[0] routes it already"
        );
        assert!(error.fix.contains("ECMP"), "{error}");
        assert_eq!(error.line, 22, "{error}");

        let error = router(&route("2001:db8::/32", "\"2001:2::1\", \"2001:2::fe\"")).unwrap_err();
        assert_eq!(error.key, "router.route[0].via");
        assert_eq!(
            error.message,
            "gateway 2001:2::fe is an address of the router itself (router.interface[0])"
        );
        assert!(error.fix.contains("neighbouring router"), "{error}");
    }
}
