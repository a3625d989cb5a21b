//! The control protocol: one request per line in plain words, one JSON reply per line.
//!
//! ```text
//! > route add 10.0.0.0/8 via 198.18.1.1
//! < {"ok":true,"result":{"applied":2}}
//! > rout add
//! < {"ok":false,"error":"unknown command `rout`","fix":"use one of: help, ping, show, ..."}
//! ```
//!
//! Words because a person types them (with `wirespeed ctl` or `nc -U`), JSON replies because a
//! program reads them. A result that is a table has the form `{"columns":[...],"rows":[[...]]}`
//! (every cell a string) so that one printer shows every `show` command. Everything a client sends
//! is hostile: [`parse`] takes bytes, refuses non-UTF-8, unknown words and bad values with an error
//! that names the word and lists what is accepted, and never panics.
//!
//! One exception to "a line is a request": a load (`route load BYTES NAME`, `acl load ...`) is
//! followed by the file's BYTES bytes ([`Upload`]), because the client reads the file, not the
//! switch.

use std::net::IpAddr;
use std::sync::Arc;

use serde_json::{Value, json};
use wirespeed_dataplane::command::{
    AppCommand, FlowEdit, FlowRule, GroupEdit, GroupRule, Injection, Neighbour, TransactionStep,
};
use wirespeed_dataplane::table::classifier::FlowMatch;
use wirespeed_dataplane::table::fib::{Ipv4Prefix, Ipv6Prefix};
use wirespeed_packet::wire::EthernetAddress;

/// Longest request line accepted, in bytes.
pub const MAX_LINE: usize = 64 * 1024;

/// Every command, as `help` lists it: usage and meaning.
pub const COMMANDS: &[(&str, &str)] = &[
    ("help", "this list"),
    (
        "reload",
        "read the configuration file again and apply what can change at run time (routes, \
         neighbours, ACL rules, flows, MAC age), as SIGHUP does; lists each change and each key \
         that needs a restart",
    ),
    (
        "ping",
        "ask every worker to answer; shows each one's reply time",
    ),
    (
        "show ports",
        "every port of every worker with its packet counters",
    ),
    (
        "show counters",
        "every counter of every worker, and the totals",
    ),
    (
        "show workers",
        "one line per worker: iterations, packets, sleeps, commands",
    ),
    ("show routes", "the app's routes (router)"),
    ("show macs", "the app's MAC table (bridge)"),
    ("show neighbours", "the app's neighbour table (router)"),
    ("show flows", "the app's flow rules (openflow)"),
    (
        "show groups",
        "the app's groups with their buckets, counters and duration (openflow)",
    ),
    (
        "show openflow",
        "the OpenFlow agent's connections: peer, active or passive, state, role, messages \
         received, sent and refused, flow mods",
    ),
    ("route show", "the same as `show routes`"),
    ("route add PREFIX via ADDRESS", "add or replace one route"),
    ("route del PREFIX", "remove the route of exactly PREFIX"),
    (
        "route load FILE",
        "replace every route with the file's (one `PREFIX via ADDRESS` per line), built off the \
         workers; ctl reads FILE and sends it (`route load BYTES NAME`, then its BYTES bytes)",
    ),
    ("neighbour show", "the same as `show neighbours`"),
    (
        "neighbour add ADDRESS MAC PORT",
        "add or replace a neighbour entry",
    ),
    ("neighbour del ADDRESS", "remove a neighbour entry"),
    ("mac show", "the same as `show macs`"),
    ("mac flush", "forget every learned MAC address"),
    ("flow show", "the same as `show flows`"),
    (
        "flow add [priority=N] [table=N] [goto=N] [idle_timeout=S] [hard_timeout=S] FIELD=VALUE... actions=ACTION[,ACTION...]",
        "add a flow rule; fields: in_port, eth_src, eth_dst, eth_type, vlan, ip_proto, ip_src, \
         ip_dst, l4_src, l4_dst; actions: output:PORT, flood, drop, set_field:FIELD=VALUE, \
         push_vlan:VID, pop_vlan, dec_ttl, group:N",
    ),
    (
        "flow del [priority=N] [table=N] FIELD=VALUE...",
        "remove the flow with exactly this priority and match",
    ),
    ("group show", "the same as `show groups`"),
    (
        "group add id=N type=all|select|indirect bucket=[weight:N,]ACTION[,ACTION...]...",
        "add a group (openflow): each bucket=... one bucket, its actions those of a flow \
         (group:N chains to another group); a flow sends to it with actions=group:N",
    ),
    (
        "group mod id=N type=... bucket=...",
        "replace the type and buckets of group N; its counters stay",
    ),
    (
        "group del [id=N]",
        "remove group N (every group without id=), and the flows that send to it",
    ),
    (
        "acl load FILE",
        "replace the ACL (bridge, router) with the file's rules (one `permit|deny FIELD=VALUE...` \
         per line; fields: src, dst, proto, src_port, dst_port); ctl reads FILE and sends it \
         (`acl load BYTES NAME`, then its BYTES bytes)",
    ),
];

/// The first words the protocol knows.
const FIRST_WORDS: &str = "help, ping, show, route, neighbour, mac, flow, group, acl";
const SHOW_WORDS: &str =
    "ports, counters, workers, routes, macs, neighbours, flows, groups, openflow";

/// What `show` can show.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Show {
    Ports,
    Counters,
    Workers,
    Routes,
    Macs,
    Neighbours,
    Flows,
    Groups,
    /// The OpenFlow agent's connections.
    OpenFlow,
}

/// A route's prefix, either family.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Prefix {
    V4(Ipv4Prefix),
    V6(Ipv6Prefix),
}

/// A parsed request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Request {
    Help,
    Ping,
    Show(Show),
    RouteAdd {
        prefix: Prefix,
        via: IpAddr,
    },
    RouteDel(Prefix),
    RouteLoad(Upload),
    NeighbourAdd(Neighbour),
    NeighbourDel(IpAddr),
    MacFlush,
    FlowAdd(FlowRule),
    FlowDel(FlowRule),
    /// `group add`, `group mod`, `group del`; the OpenFlow agent's GROUP_MODs.
    GroupEdit(GroupEdit),
    AclLoad(Upload),
    Reload,
    /// A frame to send through a worker: the OpenFlow agent's PACKET_OUT (no request line
    /// makes it).
    PacketOut(Injection),
    /// Flow changes applied in order, each on its own: the OpenFlow agent's FLOW_MODs
    /// between barriers (no request line makes it). The response's `refused` lists
    /// `[index, why]` of the ones refused.
    FlowEdits(Arc<[FlowEdit]>),
    /// One part of a transaction: the OpenFlow agent's bundle commits (no request line makes
    /// it). The response as [`Request::FlowEdits`]'s; a refused edit means the workers undid
    /// the whole transaction.
    FlowTransaction {
        edits: Arc<[FlowEdit]>,
        step: TransactionStep,
    },
    /// One page of a flow table's slots, as `show flows` shows its flows: the agent's flow
    /// statistics (no request line makes it).
    FlowPage {
        table: u8,
        start: u32,
    },
    /// The one flow of a strict selection, as a page of at most one row (no request line
    /// makes it).
    FlowFind {
        table: u8,
        priority: u16,
        matcher: FlowMatch,
    },
}

/// A file sent by the client after its request line (`route load BYTES NAME`, then exactly
/// BYTES bytes): the client reads the file with its user's rights, so the switch (root) never
/// opens a path a client names. `name` only names the file in messages (`routes.txt:3: ...`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Upload {
    pub name: String,
    pub bytes: u64,
}

impl Request {
    /// How many bytes of content follow the request line.
    pub fn body_len(&self) -> u64 {
        match self {
            Request::RouteLoad(upload) | Request::AclLoad(upload) => upload.bytes,
            _ => 0,
        }
    }

    /// The app command this request becomes as it is, for the requests that need no work on the
    /// control thread first.
    pub fn app_command(&self) -> Option<AppCommand> {
        Some(match self {
            Request::Show(Show::Routes) => AppCommand::ShowRoutes,
            Request::Show(Show::Macs) => AppCommand::ShowMacs,
            Request::Show(Show::Neighbours) => AppCommand::ShowNeighbours,
            Request::Show(Show::Flows) => AppCommand::ShowFlows,
            Request::Show(Show::Groups) => AppCommand::ShowGroups,
            Request::GroupEdit(edit) => AppCommand::GroupEdit(edit.clone()),
            Request::RouteAdd {
                prefix: Prefix::V4(prefix),
                via: IpAddr::V4(via),
            } => AppCommand::RouteAddV4 {
                prefix: *prefix,
                via: *via,
            },
            Request::RouteAdd {
                prefix: Prefix::V6(prefix),
                via: IpAddr::V6(via),
            } => AppCommand::RouteAddV6 {
                prefix: *prefix,
                via: *via,
            },
            Request::RouteDel(Prefix::V4(prefix)) => AppCommand::RouteRemoveV4(*prefix),
            Request::RouteDel(Prefix::V6(prefix)) => AppCommand::RouteRemoveV6(*prefix),
            Request::NeighbourAdd(neighbour) => AppCommand::NeighbourAdd(neighbour.clone()),
            Request::NeighbourDel(addr) => AppCommand::NeighbourRemove(*addr),
            Request::MacFlush => AppCommand::MacFlush,
            Request::FlowAdd(rule) => AppCommand::FlowAdd(rule.clone()),
            Request::FlowDel(rule) => AppCommand::FlowRemove(rule.clone()),
            Request::FlowEdits(edits) => AppCommand::FlowEdits(Arc::clone(edits)),
            Request::FlowTransaction { edits, step } => AppCommand::FlowTransaction {
                edits: Arc::clone(edits),
                step: *step,
            },
            &Request::FlowPage { table, start } => AppCommand::FlowPage { table, start },
            &Request::FlowFind {
                table,
                priority,
                matcher,
            } => AppCommand::FlowFind {
                table,
                priority,
                matcher,
            },
            _ => return None,
        })
    }
}

/// A request that could not be understood: what is wrong and how to write it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{error} (fix: {fix})")]
pub struct ProtocolError {
    pub error: String,
    pub fix: String,
}

impl ProtocolError {
    pub fn new(error: impl Into<String>, fix: impl Into<String>) -> Self {
        ProtocolError {
            error: error.into(),
            fix: fix.into(),
        }
    }
}

/// A reply, one JSON line.
#[derive(Clone, Debug, PartialEq)]
pub enum Response {
    Ok(Value),
    Error { error: String, fix: String },
}

impl Response {
    pub fn error(error: impl Into<String>, fix: impl Into<String>) -> Response {
        Response::Error {
            error: error.into(),
            fix: fix.into(),
        }
    }

    /// The reply as one line of JSON, with its newline.
    pub fn to_line(&self) -> String {
        let value = match self {
            Response::Ok(result) => json!({ "ok": true, "result": result }),
            Response::Error { error, fix } => json!({ "ok": false, "error": error, "fix": fix }),
        };
        let mut line = value.to_string();
        line.push('\n');
        line
    }
}

impl From<ProtocolError> for Response {
    fn from(error: ProtocolError) -> Response {
        Response::Error {
            error: error.error,
            fix: error.fix,
        }
    }
}

/// A table result: `{"columns": [...], "rows": [[...], ...]}`.
pub fn table(columns: &[&str], rows: Vec<Vec<String>>) -> Value {
    json!({ "columns": columns, "rows": rows })
}

/// The `help` result.
pub fn help() -> Value {
    table(
        &["command", "meaning"],
        COMMANDS
            .iter()
            .map(|(usage, meaning)| vec![usage.to_string(), meaning.to_string()])
            .collect(),
    )
}

/// What a [`LineSplitter`] found in the bytes it was fed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LineEvent {
    /// A complete line, without its `\n` (and without a `\r` before it).
    Line(Vec<u8>),
    /// A line grew past the limit: it is discarded up to its newline and yields no `Line`.
    TooLong,
}

/// Cuts a byte stream into request lines of at most `max` bytes, holding no more than that.
pub struct LineSplitter {
    line: Vec<u8>,
    max: usize,
    discarding: bool,
}

impl LineSplitter {
    pub fn new(max: usize) -> LineSplitter {
        LineSplitter {
            line: Vec::new(),
            max,
            discarding: false,
        }
    }

    /// Appends `bytes`; what they complete goes to `out`.
    pub fn feed(&mut self, bytes: &[u8], out: &mut Vec<LineEvent>) {
        out.extend(bytes.iter().filter_map(|&byte| self.push(byte)));
    }

    /// Appends `bytes` up to the first event: returns how many bytes it took and the event.
    /// What follows a request line may be its content, not lines (see [`Upload`]).
    pub fn feed_line(&mut self, bytes: &[u8]) -> (usize, Option<LineEvent>) {
        for (index, &byte) in bytes.iter().enumerate() {
            if let Some(event) = self.push(byte) {
                return (index + 1, Some(event));
            }
        }
        (bytes.len(), None)
    }

    fn push(&mut self, byte: u8) -> Option<LineEvent> {
        if self.discarding {
            self.discarding = byte != b'\n';
        } else if byte == b'\n' {
            if self.line.last() == Some(&b'\r') {
                self.line.pop();
            }
            return Some(LineEvent::Line(std::mem::take(&mut self.line)));
        } else if self.line.len() >= self.max {
            self.line = Vec::new();
            self.discarding = true;
            return Some(LineEvent::TooLong);
        } else {
            self.line.push(byte);
        }
        None
    }

    /// Whether part of a line is buffered (or being discarded).
    pub fn in_line(&self) -> bool {
        self.discarding || !self.line.is_empty()
    }
}

/// The reply to a line longer than `max` bytes.
pub fn too_long(max: usize) -> Response {
    Response::error(
        format!("request longer than {max} bytes; the rest of the line was discarded"),
        "send one command per line; load large tables from a file (`route load FILE`)",
    )
}

/// A word as it is quoted in an error: at most 40 characters, control characters escaped.
fn quote(word: &str) -> String {
    let short: String = word.chars().take(40).collect();
    let escaped: String = short.chars().flat_map(char::escape_default).collect();
    if short.len() < word.len() {
        format!("`{escaped}...`")
    } else {
        format!("`{escaped}`")
    }
}

fn usage_of(first: &str) -> String {
    let usages: Vec<&str> = COMMANDS
        .iter()
        .map(|(usage, _)| *usage)
        .filter(|usage| usage.split(' ').next() == Some(first))
        .collect();
    format!("write {}", usages.join(" | "))
}

/// Parses one request line (without its newline).
pub fn parse(line: &[u8]) -> Result<Request, ProtocolError> {
    let Ok(text) = std::str::from_utf8(line) else {
        return Err(ProtocolError::new(
            "the request is not UTF-8 text",
            "send one command per line as plain text; `help` lists them",
        ));
    };
    let words: Vec<&str> = text.split_whitespace().collect();
    let Some((&first, rest)) = words.split_first() else {
        return Err(ProtocolError::new(
            "empty request",
            "send one command per line; `help` lists them",
        ));
    };
    let exact = |request: Request, len: usize| {
        if rest.len() == len {
            Ok(request)
        } else {
            Err(ProtocolError::new(
                format!("`{first}` takes {len} more word(s), got {}", rest.len()),
                usage_of(first),
            ))
        }
    };
    match first {
        "help" => exact(Request::Help, 0),
        "ping" => exact(Request::Ping, 0),
        "reload" => exact(Request::Reload, 0),
        "show" => {
            let show = match rest.first().copied() {
                Some("ports") => Show::Ports,
                Some("counters") => Show::Counters,
                Some("workers") => Show::Workers,
                Some("routes") => Show::Routes,
                Some("macs") => Show::Macs,
                Some("neighbours" | "neighbors") => Show::Neighbours,
                Some("flows") => Show::Flows,
                Some("groups") => Show::Groups,
                Some("openflow") => Show::OpenFlow,
                Some(other) => {
                    return Err(ProtocolError::new(
                        format!("cannot show {}", quote(other)),
                        format!("show one of: {SHOW_WORDS}"),
                    ));
                }
                None => {
                    return Err(ProtocolError::new(
                        "show what?",
                        format!("show one of: {SHOW_WORDS}"),
                    ));
                }
            };
            exact(Request::Show(show), 1)
        }
        "route" | "neighbour" | "neighbor" | "mac" | "flow" | "group" if rest == ["show"] => {
            Ok(Request::Show(match first {
                "route" => Show::Routes,
                "mac" => Show::Macs,
                "flow" => Show::Flows,
                "group" => Show::Groups,
                _ => Show::Neighbours,
            }))
        }
        "route" => parse_route(rest),
        "neighbour" | "neighbor" => parse_neighbour(rest),
        "mac" => match rest {
            ["flush"] => Ok(Request::MacFlush),
            _ => Err(ProtocolError::new("unknown `mac` command", usage_of("mac"))),
        },
        "flow" => match rest.split_first() {
            Some((&"add", fields)) => Ok(Request::FlowAdd(parse_flow(fields, true)?)),
            Some((&("del" | "remove"), fields)) => Ok(Request::FlowDel(parse_flow(fields, false)?)),
            _ => Err(ProtocolError::new(
                "unknown `flow` command",
                usage_of("flow"),
            )),
        },
        "group" => match rest.split_first() {
            Some((&"add", words)) => Ok(Request::GroupEdit(GroupEdit::Add(parse_group(words)?))),
            Some((&"mod", words)) => Ok(Request::GroupEdit(GroupEdit::Modify(parse_group(words)?))),
            Some((&("del" | "remove"), [])) => Ok(Request::GroupEdit(GroupEdit::RemoveAll)),
            Some((&("del" | "remove"), [word])) => match word.strip_prefix("id=").map(str::parse) {
                Some(Ok(id)) => Ok(Request::GroupEdit(GroupEdit::Remove(id))),
                _ => Err(ProtocolError::new(
                    format!("{} is not id=N", quote(word)),
                    usage_of("group"),
                )),
            },
            _ => Err(ProtocolError::new(
                "unknown `group` command",
                usage_of("group"),
            )),
        },
        "acl" => match rest {
            ["load", upload @ ..] => Ok(Request::AclLoad(parse_upload("acl", upload)?)),
            _ => Err(ProtocolError::new("unknown `acl` command", usage_of("acl"))),
        },
        other => Err(ProtocolError::new(
            format!("unknown command {}", quote(other)),
            format!("use one of: {FIRST_WORDS}; `help` lists every command"),
        )),
    }
}

fn parse_route(rest: &[&str]) -> Result<Request, ProtocolError> {
    match rest {
        ["add", prefix, "via", via] => {
            let prefix = parse_prefix(prefix)?;
            let via = parse_addr(via)?;
            if matches!(
                (prefix, via),
                (Prefix::V4(_), IpAddr::V6(_)) | (Prefix::V6(_), IpAddr::V4(_))
            ) {
                return Err(ProtocolError::new(
                    "the prefix and the next hop are of different IP versions",
                    "route an IPv4 prefix via an IPv4 address, an IPv6 prefix via an IPv6 address",
                ));
            }
            Ok(Request::RouteAdd { prefix, via })
        }
        ["del" | "remove", prefix] => Ok(Request::RouteDel(parse_prefix(prefix)?)),
        ["load", upload @ ..] => Ok(Request::RouteLoad(parse_upload("route", upload)?)),
        _ => Err(ProtocolError::new(
            "malformed `route` command",
            usage_of("route"),
        )),
    }
}

/// `BYTES NAME...` of `route load` and `acl load`: the content's size, then the file's name
/// (the rest of the line).
fn parse_upload(first: &str, words: &[&str]) -> Result<Upload, ProtocolError> {
    match words {
        [bytes, name @ ..] if !name.is_empty() => Ok(Upload {
            name: name.join(" "),
            bytes: bytes.parse().map_err(|_| {
                ProtocolError::new(
                    format!("{} is not a size in bytes", quote(bytes)),
                    format!("write `{first} load BYTES NAME` and then the file's BYTES bytes"),
                )
            })?,
        }),
        _ => Err(ProtocolError::new(
            format!(
                "`{first} load` takes the file's size and name, then its content; the switch \
                 does not open files a client names"
            ),
            format!(
                "use `wirespeed ctl {first} load FILE`, which reads FILE and sends it; on the \
                 socket, write `{first} load BYTES NAME` and then the file's BYTES bytes"
            ),
        )),
    }
}

fn parse_neighbour(rest: &[&str]) -> Result<Request, ProtocolError> {
    match rest {
        ["add", addr, mac, port] => Ok(Request::NeighbourAdd(Neighbour {
            addr: parse_addr(addr)?,
            mac: parse_mac(mac)?,
            port: port.to_string(),
        })),
        ["del" | "remove", addr] => Ok(Request::NeighbourDel(parse_addr(addr)?)),
        _ => Err(ProtocolError::new(
            "malformed `neighbour` command",
            usage_of("neighbour"),
        )),
    }
}

/// An IPv4 or IPv6 prefix `ADDRESS/LENGTH`; the address must be the network's (no host bits
/// set), so a route is for the prefix that was written.
pub fn parse_prefix(word: &str) -> Result<Prefix, ProtocolError> {
    let bad = || {
        ProtocolError::new(
            format!("{} is not a prefix", quote(word)),
            "write ADDRESS/LENGTH, e.g. 10.0.0.0/8 or 2001:db8::/32",
        )
    };
    let (addr, len) = word.split_once('/').ok_or_else(bad)?;
    let addr: IpAddr = addr.parse().map_err(|_| bad())?;
    let len: u8 = len.parse().map_err(|_| bad())?;
    let length = |error| ProtocolError::new(format!("{}: {error}", quote(word)), "fix the length");
    // The prefix, and its network address when `addr` differs from it (host bits set).
    let (prefix, network, max) = match addr {
        IpAddr::V4(bits) => {
            let prefix = Ipv4Prefix::new(bits.to_bits(), len).map_err(length)?;
            let differs = prefix.addr() != bits.to_bits();
            (Prefix::V4(prefix), differs.then(|| prefix.to_string()), 32)
        }
        IpAddr::V6(bits) => {
            let prefix = Ipv6Prefix::new(bits.to_bits(), len).map_err(length)?;
            let differs = prefix.addr() != bits.to_bits();
            (Prefix::V6(prefix), differs.then(|| prefix.to_string()), 128)
        }
    };
    // `10.0.0.1/8` is a typo for the network or for a host route: say both.
    match network {
        None => Ok(prefix),
        Some(network) => Err(ProtocolError::new(
            format!("{} has host bits set", quote(word)),
            format!("write the network, {network}, or the host route, {addr}/{max}"),
        )),
    }
}

/// An IPv4 or IPv6 address.
pub fn parse_addr(word: &str) -> Result<IpAddr, ProtocolError> {
    word.parse().map_err(|_| {
        ProtocolError::new(
            format!("{} is not an IP address", quote(word)),
            "write e.g. 198.18.1.1 or 2001:db8::1",
        )
    })
}

/// A MAC address `aa:bb:cc:dd:ee:ff`.
pub fn parse_mac(word: &str) -> Result<[u8; 6], ProtocolError> {
    word.parse::<EthernetAddress>()
        .map(|mac| mac.0)
        .map_err(|_| {
            ProtocolError::new(
                format!("{} is not a MAC address", quote(word)),
                "write six hex bytes separated by colons, e.g. 02:00:00:00:00:01",
            )
        })
}

/// `id=N`, `type=KIND` and `bucket=...` words (one per bucket, its actions apart by commas).
fn parse_group(words: &[&str]) -> Result<GroupRule, ProtocolError> {
    let (mut id, mut kind) = (None, None);
    let mut buckets = Vec::new();
    for word in words {
        match word.split_once('=') {
            Some(("id", value)) if id.is_none() => {
                id = Some(value.parse().map_err(|_| {
                    ProtocolError::new(
                        format!("group id {} is not a number", quote(value)),
                        "use id=0..4294967040",
                    )
                })?);
            }
            Some(("type", value)) if kind.is_none() => kind = Some(value.to_string()),
            Some(("bucket", value)) => buckets.push(
                value
                    .split(',')
                    .filter(|a| !a.is_empty())
                    .map(str::to_string)
                    .collect(),
            ),
            _ => {
                return Err(ProtocolError::new(
                    format!("{} is not id=, type= (once each) or bucket=", quote(word)),
                    usage_of("group"),
                ));
            }
        }
    }
    match (id, kind) {
        (Some(id), Some(kind)) => Ok(GroupRule { id, kind, buckets }),
        _ => Err(ProtocolError::new(
            "a group needs id= and type=",
            usage_of("group"),
        )),
    }
}

/// `FIELD=VALUE` words; `priority=N` and (when `actions` is true, required) `actions=A,B`.
fn parse_flow(words: &[&str], actions: bool) -> Result<FlowRule, ProtocolError> {
    let mut rule = FlowRule {
        priority: 0,
        fields: Vec::new(),
        actions: Vec::new(),
    };
    let (mut seen_priority, mut seen_actions) = (false, false);
    for word in words {
        let Some((name, value)) = word
            .split_once('=')
            .filter(|(n, v)| !n.is_empty() && !v.is_empty())
        else {
            return Err(ProtocolError::new(
                format!("{} is not FIELD=VALUE", quote(word)),
                usage_of("flow"),
            ));
        };
        let again = match name {
            "priority" => std::mem::replace(&mut seen_priority, true),
            "actions" => std::mem::replace(&mut seen_actions, true),
            _ => false,
        };
        if again {
            return Err(ProtocolError::new(
                format!("{name} is given twice ({})", quote(word)),
                format!("give {name}= once; for a second one add a second flow"),
            ));
        }
        match name {
            "priority" => {
                rule.priority = value.parse().map_err(|_| {
                    ProtocolError::new(
                        format!("priority {} is not a number", quote(value)),
                        "use priority=0..65535",
                    )
                })?;
            }
            "actions" if actions => {
                rule.actions = value.split(',').map(str::to_string).collect();
            }
            _ => rule.fields.push((name.to_string(), value.to_string())),
        }
    }
    if actions && rule.actions.is_empty() {
        return Err(ProtocolError::new(
            "a flow needs actions",
            "add actions=ACTION[,ACTION...], e.g. actions=output:p1 or actions=drop",
        ));
    }
    Ok(rule)
}

#[cfg(test)]
#[path = "protocol_tests.rs"]
mod tests;
