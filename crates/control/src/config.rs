//! The `wirespeed switch` configuration file.
//!
//! ```toml
//! [switch]
//! app = "xconnect"      # the pipeline to run
//! workers = 1           # worker threads, one per core
//! cores = [1]           # optional: pin worker i to cores[i]
//! batch = 32            # packets per batch, 1..=256
//! frames = 16384        # frames in each worker's pool
//! frame_size = 2048     # 2048 or 4096
//! idle = "adaptive"     # "busy": spin; "adaptive": sleep in poll(2) after empty polls
//! drain_us = 50         # longest a packet waits in a TX batch under load
//! realtime = "auto"     # SCHED_FIFO for workers (above the kernel's NAPI threads): true,
//!                       # false, or "auto" (FIFO for workers whose ports are all AF_XDP or
//!                       # AF_PACKET)
//! control_socket = "/run/wirespeed/switch.sock"  # default: /run/wirespeed/<config stem>.sock;
//!                       # "" runs without one
//!
//! [[port]]
//! name = "p0"
//! backend = "afxdp"     # afxdp | afpacket | pcap
//! interface = "ws-d0"
//!
//! [[port]]
//! name = "p1"
//! backend = "pcap"
//! rx = "in.pcap"        # read frames from this capture
//! tx = "out.pcap"       # write transmitted frames here
//!
//! [xconnect]
//! pairs = [["p0", "p1"]]  # each pair forwards both ways
//!
//! [task]                # optional emulated per-packet work (seed 001)
//! spin_cycles = 0
//! walk_bytes = 0
//!
//! [acl]                 # optional, bridge and router: filters IP packets after parse
//! default = "permit"    # what no rule matches gets
//! [[acl.rule]]          # in order, the first match decides
//! action = "deny"
//! proto = "udp"
//! src = "198.18.0.0/16"
//! dst_port = "1000-2000"
//!
//! [openflow]            # app = "openflow"
//! tables = 2
//! miss = "drop"         # drop | flood | output:PORT
//! [[openflow.flow]]
//! table = 0
//! priority = 10
//! match = "in_port=p0,ip_dst=10.0.0.0/8"
//! actions = "set_field:eth_dst=02:00:00:00:00:01,output:p1"
//! ```
//!
//! ACL rules and flows are written with the same field and action names as `wirespeed ctl`
//! and ACL files use; `wirespeed_dataplane::app::fields` reads all of them, here too, so a
//! config that loads is one the switch accepts.
//!
//! Parsing is two steps: serde reads the text into raw structs whose values carry their byte
//! spans, then [`validate`] checks meaning (names exist, ranges, backend-specific keys) and builds
//! [`Config`]. Both steps report a [`ConfigError`] with file, line, column and key.

use std::collections::HashSet;
use std::ops::Range;
use std::path::PathBuf;

use serde::Deserialize;
use toml::Spanned;
use wirespeed_dataplane::app::fields;
use wirespeed_dataplane::command::{AclAction, AclRule, FlowRule};
use wirespeed_io::afpacket::RxRingKind;
use wirespeed_packet::wire::EthernetAddress;

/// A configuration error: where it is, what is wrong, how to fix it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}:{line}:{column}: `{key}`: {message}\n    {excerpt}\n  fix: {fix}")]
pub struct ConfigError {
    pub file: String,
    pub line: usize,
    pub column: usize,
    /// Dotted path of the key, e.g. `port[1].backend` (empty for syntax errors between keys).
    pub key: String,
    pub message: String,
    pub fix: String,
    /// The offending line of the file.
    pub excerpt: String,
}

/// A validated configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    pub switch: SwitchConfig,
    pub ports: Vec<PortConfig>,
    pub app: AppConfig,
    pub task: TaskConfig,
    /// The ACL in front of the bridge or router, if configured.
    pub acl: Option<AclConfig>,
}

/// An ACL: rules in order (first match wins) and the default action.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AclConfig {
    pub default: AclAction,
    /// Checked: every rule converts with `fields::acl_rules`.
    pub rules: Vec<AclRule>,
}

/// The OpenFlow app's tables, caches and flows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenFlowConfig {
    pub tables: u8,
    pub miss: OpenFlowMiss,
    pub flows_per_table: usize,
    pub cache_entries: usize,
    pub megaflows: usize,
    /// Checked against the ports: every flow converts with `fields::flow_rule` (its table,
    /// goto and timeouts are fields of the rule).
    pub flows: Vec<FlowRule>,
}

/// What a packet no flow of a table matches gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpenFlowMiss {
    Drop,
    Flood,
    /// Sent to this port (an index into [`Config::ports`]).
    Output(usize),
}

/// Worker settings.
#[derive(Debug, Clone, PartialEq)]
pub struct SwitchConfig {
    pub workers: usize,
    /// Core of worker i, if pinned.
    pub cores: Vec<usize>,
    pub batch: usize,
    pub frames: u32,
    pub frame_size: u32,
    pub idle: IdleMode,
    pub drain_us: u32,
    pub realtime: Realtime,
    /// Where the control socket listens; `None` when disabled (`control_socket = ""`).
    pub control_socket: Option<PathBuf>,
}

/// What a worker does when its queues are empty.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum IdleMode {
    /// Spin on the rings: lowest latency, burns the core even when idle.
    Busy,
    /// Spin briefly, then sleep in poll(2) until a port has frames.
    Adaptive,
}

/// Whether workers run at SCHED_FIFO priority 1, above the kernel's NAPI threads.
///
/// Which is right depends on who does the kernel's share of the work (docs/benchmarks.md,
/// "Kernel I/O"): an AF_XDP worker on the core of its ingress NAPI thread collapses under
/// overload at normal priority (the thread's slices overflow the ring while the worker spins),
/// and drains the ring first at FIFO; an AF_PACKET worker needs the kernel's softirq time on its
/// own core and forwards less at FIFO. `Auto` applies that rule per worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Realtime {
    /// FIFO for a worker whose ports are all AF_XDP or AF_PACKET; normal priority for the
    /// others (capture file ports).
    Auto,
    /// FIFO for every worker (an error when the process may not).
    On,
    /// Normal priority for every worker.
    Off,
}

impl<'de> Deserialize<'de> for Realtime {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Flag(bool),
            Word(String),
        }
        match Raw::deserialize(deserializer)? {
            Raw::Flag(true) => Ok(Realtime::On),
            Raw::Flag(false) => Ok(Realtime::Off),
            Raw::Word(word) if word == "auto" => Ok(Realtime::Auto),
            Raw::Word(word) => Err(serde::de::Error::custom(format!(
                "realtime = \"{word}\" is not a choice: write true, false or \"auto\""
            ))),
        }
    }
}

/// One port.
#[derive(Debug, Clone, PartialEq)]
pub struct PortConfig {
    pub name: String,
    pub backend: BackendConfig,
}

/// Backend-specific port settings.
#[derive(Debug, Clone, PartialEq)]
pub enum BackendConfig {
    AfXdp {
        interface: String,
        /// Queues to open; all of the device's when `None`.
        queues: Option<Vec<u16>>,
        zero_copy: bool,
        xdp_mode: XdpMode,
        /// Ring sizes asked for; the backend's defaults where `None`.
        rings: RingSizes,
    },
    AfPacket {
        interface: String,
        /// The RX ring's layout (`rx_tpacket = "v3"`, the default, or `"v2"`).
        rx_tpacket: RxRingKind,
        /// Slots of the TX ring (`tx_ring`, a power of two from 64 to 65536); the backend's
        /// default (1024) where `None`.
        tx_ring: Option<u32>,
    },
    Pcap {
        rx: Option<PathBuf>,
        tx: Option<PathBuf>,
    },
}

/// Sizes of an AF_XDP socket's four rings, each a power of two from 64 to 65536 when set
/// (`None`: the backend's default). Larger rings absorb longer stalls of the other side (the
/// kernel's NAPI thread filling RX, the peer draining TX) at the cost of frames held and
/// latency under overload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RingSizes {
    pub rx: Option<u32>,
    pub tx: Option<u32>,
    pub fill: Option<u32>,
    pub completion: Option<u32>,
}

/// How the XDP program is attached.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum XdpMode {
    /// Native where the driver has it, generic otherwise.
    Auto,
    Native,
    Generic,
}

/// The configured pipeline; port references are indexes into [`Config::ports`].
#[derive(Debug, Clone, PartialEq)]
pub enum AppConfig {
    /// Static port pairs, each forwarding both ways.
    Xconnect { pairs: Vec<(usize, usize)> },
    /// A learning bridge over every port; each port's VLAN role (ports not listed in
    /// `[[bridge.port]]` are access ports of VLAN 1).
    Bridge {
        ports: Vec<(usize, PortVlan)>,
        mac_capacity: usize,
        age_seconds: f64,
    },
    /// An IPv4/IPv6 router.
    Router(RouterConfig),
    /// An OpenFlow match-action pipeline.
    OpenFlow(OpenFlowConfig),
}

/// The router's interfaces, static routes and neighbours.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouterConfig {
    pub interfaces: Vec<RouterInterface>,
    pub routes: Vec<RouterRoute>,
    pub neighbours: Vec<RouterNeighbour>,
    pub neighbour_capacity: usize,
    /// ICMP errors per second (0: none).
    pub icmp_rate: u32,
    /// Forward IPv4 packets with options (default: drop them).
    pub forward_ipv4_options: bool,
}

/// One routed port: its addresses (each gives a connected route) and optionally a MAC other
/// than the port's own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouterInterface {
    pub port: usize,
    pub mac: Option<[u8; 6]>,
    pub addresses: Vec<(std::net::IpAddr, u8)>,
}

/// A static route; several gateways make an ECMP route.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouterRoute {
    pub prefix: (std::net::IpAddr, u8),
    pub via: Vec<std::net::IpAddr>,
}

/// A static neighbour (no ARP/NDP needed for it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouterNeighbour {
    pub port: usize,
    pub address: std::net::IpAddr,
    pub mac: [u8; 6],
}

/// A bridge port's VLAN role.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PortVlan {
    /// Untagged frames of this VLAN.
    Access(u16),
    /// Tagged frames of the allowed VLANs; untagged ones belong to `native` if set.
    Trunk {
        allowed: Vec<u16>,
        native: Option<u16>,
    },
}

/// Emulated per-packet work (seed 001's method to measure c_IO).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TaskConfig {
    pub spin_cycles: u32,
    pub walk_bytes: u64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    switch: Spanned<RawSwitch>,
    #[serde(default)]
    port: Vec<Spanned<RawPort>>,
    xconnect: Option<Spanned<RawXconnect>>,
    bridge: Option<Spanned<RawBridge>>,
    router: Option<Spanned<RawRouter>>,
    openflow: Option<Spanned<RawOpenFlow>>,
    acl: Option<Spanned<RawAcl>>,
    task: Option<Spanned<RawTask>>,
}

/// A TOML value given as text or as a number (`dst_port = 53` or `dst_port = "1000-2000"`).
#[derive(Deserialize)]
#[serde(untagged)]
enum RawText {
    Text(String),
    Number(i64),
}

impl RawText {
    fn text(&self) -> String {
        match self {
            RawText::Text(text) => text.clone(),
            RawText::Number(n) => n.to_string(),
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAcl {
    default: Option<Spanned<String>>,
    #[serde(default)]
    rule: Vec<Spanned<RawAclRule>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAclRule {
    action: Spanned<String>,
    src: Option<Spanned<RawText>>,
    dst: Option<Spanned<RawText>>,
    proto: Option<Spanned<RawText>>,
    src_port: Option<Spanned<RawText>>,
    dst_port: Option<Spanned<RawText>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawOpenFlow {
    tables: Option<Spanned<u8>>,
    miss: Option<Spanned<String>>,
    flows_per_table: Option<Spanned<usize>>,
    cache_entries: Option<Spanned<usize>>,
    megaflows: Option<Spanned<usize>>,
    #[serde(default)]
    flow: Vec<Spanned<RawFlow>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFlow {
    table: Option<Spanned<u8>>,
    priority: Option<Spanned<u16>>,
    #[serde(rename = "match")]
    matches: Option<Spanned<String>>,
    actions: Spanned<String>,
    goto: Option<Spanned<u8>>,
    idle_timeout: Option<Spanned<u16>>,
    hard_timeout: Option<Spanned<u16>>,
    cookie: Option<Spanned<u64>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRouter {
    neighbour_capacity: Option<Spanned<usize>>,
    icmp_rate: Option<Spanned<u32>>,
    forward_ipv4_options: Option<bool>,
    #[serde(default)]
    interface: Vec<Spanned<RawRouterInterface>>,
    #[serde(default)]
    route: Vec<Spanned<RawRouterRoute>>,
    #[serde(default)]
    neighbour: Vec<Spanned<RawRouterNeighbour>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRouterInterface {
    port: Spanned<String>,
    mac: Option<Spanned<String>>,
    addresses: Spanned<Vec<Spanned<String>>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRouterRoute {
    prefix: Spanned<String>,
    via: Spanned<Vec<Spanned<String>>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRouterNeighbour {
    port: Spanned<String>,
    address: Spanned<String>,
    mac: Spanned<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawBridge {
    mac_capacity: Option<Spanned<usize>>,
    age_seconds: Option<Spanned<f64>>,
    #[serde(default)]
    port: Vec<Spanned<RawBridgePort>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawBridgePort {
    name: Spanned<String>,
    access: Option<Spanned<u16>>,
    trunk: Option<Spanned<Vec<u16>>>,
    native: Option<Spanned<u16>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSwitch {
    app: Spanned<String>,
    workers: Option<Spanned<usize>>,
    cores: Option<Spanned<Vec<usize>>>,
    batch: Option<Spanned<usize>>,
    frames: Option<Spanned<u32>>,
    frame_size: Option<Spanned<u32>>,
    idle: Option<IdleMode>,
    drain_us: Option<Spanned<u32>>,
    realtime: Option<Realtime>,
    control_socket: Option<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPort {
    name: Spanned<String>,
    backend: Spanned<String>,
    interface: Option<Spanned<String>>,
    queues: Option<Spanned<Vec<u16>>>,
    zero_copy: Option<Spanned<bool>>,
    xdp_mode: Option<Spanned<XdpMode>>,
    rx_tpacket: Option<Spanned<String>>,
    rx_ring: Option<Spanned<u32>>,
    tx_ring: Option<Spanned<u32>>,
    fill_ring: Option<Spanned<u32>>,
    completion_ring: Option<Spanned<u32>>,
    rx: Option<Spanned<PathBuf>>,
    tx: Option<Spanned<PathBuf>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawXconnect {
    pairs: Spanned<Vec<Spanned<Vec<Spanned<String>>>>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTask {
    spin_cycles: Option<Spanned<u32>>,
    walk_bytes: Option<Spanned<u64>>,
}

/// Largest configuration file accepted; a config is a few KiB, anything this large is a mistake.
pub const MAX_CONFIG_BYTES: usize = 1 << 20;

/// Longest path a Unix socket address holds (`sun_path` is 108 bytes with its NUL).
pub const MAX_SOCKET_PATH: usize = 107;

/// The control socket of a switch started with the configuration file `file` when the file does
/// not say: `/run/wirespeed/<file stem>.sock`.
pub fn default_control_socket(file: &str) -> PathBuf {
    let stem = std::path::Path::new(file)
        .file_stem()
        .map_or_else(|| "wirespeed".into(), |s| s.to_string_lossy().into_owned());
    PathBuf::from(format!("/run/wirespeed/{stem}.sock"))
}

/// Reads and validates the configuration file at `path`.
pub fn load(path: &std::path::Path) -> Result<Config, ConfigError> {
    let file = path.display().to_string();
    let unreadable = |message: String| ConfigError {
        file: file.clone(),
        line: 0,
        column: 0,
        key: String::new(),
        message,
        fix: "check the path given with --config".into(),
        excerpt: String::new(),
    };
    let metadata = std::fs::metadata(path).map_err(|e| unreadable(format!("cannot read: {e}")))?;
    if metadata.len() > MAX_CONFIG_BYTES as u64 {
        return Err(unreadable(format!(
            "{} bytes is larger than a config can be",
            metadata.len()
        )));
    }
    let text =
        std::fs::read_to_string(path).map_err(|e| unreadable(format!("cannot read: {e}")))?;
    parse(&file, &text)
}

/// Parses and validates configuration `text`; `file` names it in errors.
pub fn parse(file: &str, text: &str) -> Result<Config, ConfigError> {
    let at = Locator { file, text };
    if text.len() > MAX_CONFIG_BYTES {
        return Err(at.error(
            0..0,
            "",
            "the file is larger than 1 MiB",
            "a config is a few KiB",
        ));
    }
    let raw: RawConfig = toml::from_str(text).map_err(|error| {
        let span = error.span().unwrap_or(0..0);
        let key = at.key_at(span.start);
        let fix = if error.message().contains("unknown field") {
            "remove or rename the key; the accepted keys are listed in the message".to_string()
        } else if error.message().contains("missing field") {
            "add the key; see docs/configuration.md".to_string()
        } else {
            "correct the value or syntax at this place; see docs/configuration.md".to_string()
        };
        at.error(span, &key, error.message(), &fix)
    })?;
    validate(&at, raw)
}

struct Locator<'a> {
    file: &'a str,
    text: &'a str,
}

impl Locator<'_> {
    fn error(&self, span: Range<usize>, key: &str, message: &str, fix: &str) -> ConfigError {
        let start = span.start.min(self.text.len());
        let before = &self.text[..self.text.floor_char_boundary(start)];
        let line = before.matches('\n').count() + 1;
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        let column = before[line_start..].chars().count() + 1;
        let excerpt = self.text[line_start..]
            .lines()
            .next()
            .unwrap_or("")
            .trim_end()
            .to_string();
        ConfigError {
            file: self.file.to_string(),
            line,
            column,
            key: key.to_string(),
            message: message.to_string(),
            fix: fix.to_string(),
            excerpt,
        }
    }

    /// Best-effort dotted key at byte `offset`: the enclosing `[table]` / `[[array]]` header
    /// (with the array index) and the key of the line.
    fn key_at(&self, offset: usize) -> String {
        let offset = self.text.floor_char_boundary(offset.min(self.text.len()));
        let mut table = String::new();
        let mut counts: std::collections::HashMap<String, usize> = Default::default();
        let mut line_start = 0;
        for line in self.text[..offset].split_inclusive('\n') {
            let trimmed = line.trim();
            if let Some(name) = trimmed
                .strip_prefix("[[")
                .and_then(|t| t.split("]]").next())
            {
                let count = counts.entry(name.trim().to_string()).or_insert(0);
                table = format!("{}[{}]", name.trim(), *count);
                *count += 1;
            } else if let Some(name) = trimmed.strip_prefix('[').and_then(|t| t.split(']').next()) {
                table = name.trim().to_string();
            }
            line_start += line.len();
        }
        let current = self.text[self.text.floor_char_boundary(line_start.min(offset))..]
            .lines()
            .next()
            .unwrap_or("");
        let full_line = self.text[..offset]
            .rsplit('\n')
            .next()
            .unwrap_or("")
            .to_string()
            + current;
        let key = full_line
            .split('=')
            .next()
            .filter(|_| full_line.contains('='))
            .unwrap_or("");
        match (table.is_empty(), key.trim().is_empty()) {
            (_, true) => table,
            (true, false) => key.trim().to_string(),
            (false, false) => format!("{table}.{}", key.trim()),
        }
    }
}

fn validate(at: &Locator<'_>, raw: RawConfig) -> Result<Config, ConfigError> {
    let switch = raw.switch.into_inner();
    let workers = switch.workers.as_ref().map_or(1, |w| *w.get_ref());
    if let Some(w) = &switch.workers
        && !(1..=64).contains(w.get_ref())
    {
        return Err(at.error(
            w.span(),
            "switch.workers",
            "must be 1 to 64",
            "one worker per core",
        ));
    }
    let cores = match &switch.cores {
        Some(cores) if cores.get_ref().len() != workers => {
            return Err(at.error(
                cores.span(),
                "switch.cores",
                &format!(
                    "lists {} cores for {workers} workers",
                    cores.get_ref().len()
                ),
                "give exactly one core per worker, or leave `cores` out",
            ));
        }
        Some(cores) => cores.get_ref().clone(),
        None => Vec::new(),
    };
    let batch = switch.batch.as_ref().map_or(32, |b| *b.get_ref());
    if let Some(b) = &switch.batch
        && !(1..=256).contains(b.get_ref())
    {
        return Err(at.error(
            b.span(),
            "switch.batch",
            "must be 1 to 256",
            "32 is a good start",
        ));
    }
    let frame_size = switch.frame_size.as_ref().map_or(2048, |f| *f.get_ref());
    if let Some(f) = &switch.frame_size
        && ![2048, 4096].contains(f.get_ref())
    {
        return Err(at.error(
            f.span(),
            "switch.frame_size",
            "must be 2048 or 4096",
            "use 2048",
        ));
    }
    let frames = switch.frames.as_ref().map_or(16384, |f| *f.get_ref());
    if let Some(f) = &switch.frames
        && !(64..=1 << 22).contains(f.get_ref())
    {
        return Err(at.error(
            f.span(),
            "switch.frames",
            "must be 64 to 4194304",
            "16384 frames per worker cover the AF_XDP rings of a few ports",
        ));
    }
    let drain_us = switch.drain_us.as_ref().map_or(50, |d| *d.get_ref());
    if let Some(d) = &switch.drain_us
        && *d.get_ref() > 10_000
    {
        return Err(at.error(
            d.span(),
            "switch.drain_us",
            "must be at most 10000",
            "use 50",
        ));
    }

    let control_socket = match &switch.control_socket {
        None => Some(default_control_socket(at.file)),
        Some(path) if path.get_ref().is_empty() => None,
        Some(path) if path.get_ref().len() > MAX_SOCKET_PATH => {
            return Err(at.error(
                path.span(),
                "switch.control_socket",
                &format!(
                    "a Unix socket path is at most {MAX_SOCKET_PATH} bytes, this one has {}",
                    path.get_ref().len()
                ),
                "use a shorter path, e.g. /run/wirespeed/<name>.sock",
            ));
        }
        Some(path) => Some(PathBuf::from(path.get_ref())),
    };

    let mut ports = Vec::new();
    let mut names = HashSet::new();
    for (index, port) in raw.port.into_iter().enumerate() {
        let key = |k: &str| format!("port[{index}].{k}");
        let port = port.into_inner();
        let name = port.name.get_ref().clone();
        if name.is_empty()
            || name.len() > 32
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            return Err(at.error(
                port.name.span(),
                &key("name"),
                "port names are 1 to 32 characters of letters, digits, '-' and '_'",
                "rename the port",
            ));
        }
        if !names.insert(name.clone()) {
            return Err(at.error(
                port.name.span(),
                &key("name"),
                &format!("a port named {name:?} is already defined"),
                "give every [[port]] its own name",
            ));
        }
        let only = |present: bool, span: Range<usize>, field: &str, backends: &str| {
            if present {
                Err(at.error(
                    span,
                    &key(field),
                    &format!("`{field}` applies only to {backends} ports"),
                    &format!("remove `{field}` from this port"),
                ))
            } else {
                Ok(())
            }
        };
        let span_of = |s: Option<Range<usize>>| s.unwrap_or(0..0);
        // Keys only AF_XDP ports take, with their places, for the other backends to refuse
        // (`tx_ring` is AF_PACKET's too).
        let afxdp_only = [
            port.queues.as_ref().map(|q| (q.span(), "queues")),
            port.zero_copy.as_ref().map(|z| (z.span(), "zero_copy")),
            port.xdp_mode.as_ref().map(|x| (x.span(), "xdp_mode")),
            port.rx_ring.as_ref().map(|r| (r.span(), "rx_ring")),
            port.fill_ring.as_ref().map(|r| (r.span(), "fill_ring")),
            port.completion_ring
                .as_ref()
                .map(|r| (r.span(), "completion_ring")),
        ];
        let ring = |size: &Option<Spanned<u32>>, field: &str| -> Result<Option<u32>, ConfigError> {
            match size {
                Some(size)
                    if !size.get_ref().is_power_of_two()
                        || !(64..=65536).contains(size.get_ref()) =>
                {
                    Err(at.error(
                        size.span(),
                        &key(field),
                        "a ring size is a power of two from 64 to 65536",
                        "use e.g. 2048 (the default) or 4096",
                    ))
                }
                size => Ok(size.as_ref().map(|s| *s.get_ref())),
            }
        };
        let backend = match port.backend.get_ref().as_str() {
            "afxdp" | "afpacket" => {
                let Some(interface) = &port.interface else {
                    return Err(at.error(
                        port.backend.span(),
                        &key("interface"),
                        "this backend needs `interface`",
                        "add interface = \"<network interface name>\"",
                    ));
                };
                only(
                    port.rx.is_some(),
                    span_of(port.rx.as_ref().map(|r| r.span())),
                    "rx",
                    "pcap",
                )?;
                only(
                    port.tx.is_some(),
                    span_of(port.tx.as_ref().map(|t| t.span())),
                    "tx",
                    "pcap",
                )?;
                let interface = interface.get_ref().clone();
                if port.backend.get_ref() == "afxdp" {
                    only(
                        port.rx_tpacket.is_some(),
                        span_of(port.rx_tpacket.as_ref().map(|r| r.span())),
                        "rx_tpacket",
                        "afpacket",
                    )?;
                    BackendConfig::AfXdp {
                        interface,
                        queues: port.queues.map(Spanned::into_inner),
                        zero_copy: port.zero_copy.is_some_and(|z| *z.get_ref()),
                        xdp_mode: port.xdp_mode.map_or(XdpMode::Auto, Spanned::into_inner),
                        rings: RingSizes {
                            rx: ring(&port.rx_ring, "rx_ring")?,
                            tx: ring(&port.tx_ring, "tx_ring")?,
                            fill: ring(&port.fill_ring, "fill_ring")?,
                            completion: ring(&port.completion_ring, "completion_ring")?,
                        },
                    }
                } else {
                    for (span, field) in afxdp_only.iter().flatten() {
                        only(true, span.clone(), field, "afxdp")?;
                    }
                    let rx_tpacket = match &port.rx_tpacket {
                        None => RxRingKind::default(),
                        Some(kind) => kind.get_ref().parse().map_err(|problem: String| {
                            at.error(
                                kind.span(),
                                &key("rx_tpacket"),
                                &problem,
                                "write rx_tpacket = \"v3\" or rx_tpacket = \"v2\"",
                            )
                        })?,
                    };
                    BackendConfig::AfPacket {
                        interface,
                        rx_tpacket,
                        tx_ring: ring(&port.tx_ring, "tx_ring")?,
                    }
                }
            }
            "pcap" => {
                let interface = port.interface.as_ref().map(|i| (i.span(), "interface"));
                let rx_tpacket = port.rx_tpacket.as_ref().map(|r| (r.span(), "rx_tpacket"));
                let tx_ring = port.tx_ring.as_ref().map(|r| (r.span(), "tx_ring"));
                for (span, field) in afxdp_only
                    .iter()
                    .flatten()
                    .chain(&interface)
                    .chain(&rx_tpacket)
                    .chain(&tx_ring)
                {
                    only(true, span.clone(), field, "afxdp or afpacket")?;
                }
                if port.rx.is_none() && port.tx.is_none() {
                    return Err(at.error(
                        port.backend.span(),
                        &key("backend"),
                        "a pcap port needs `rx` (a capture to read), `tx` (a capture to write) or both",
                        "add rx = \"in.pcap\" and/or tx = \"out.pcap\"",
                    ));
                }
                BackendConfig::Pcap {
                    rx: port.rx.map(Spanned::into_inner),
                    tx: port.tx.map(Spanned::into_inner),
                }
            }
            other => {
                return Err(at.error(
                    port.backend.span(),
                    &key("backend"),
                    &format!("unknown backend {other:?}"),
                    "use \"afxdp\", \"afpacket\" or \"pcap\"",
                ));
            }
        };
        ports.push(PortConfig { name, backend });
    }
    let port_index = |name: &Spanned<String>, key: &str| {
        ports
            .iter()
            .position(|p| &p.name == name.get_ref())
            .ok_or_else(|| {
                let known: Vec<&str> = ports.iter().map(|p| p.name.as_str()).collect();
                at.error(
                    name.span(),
                    key,
                    &format!(
                        "no port is named {:?} (ports: {})",
                        name.get_ref(),
                        known.join(", ")
                    ),
                    "define a [[port]] with that name or use one of the names listed",
                )
            })
    };

    let app = match switch.app.get_ref().as_str() {
        "xconnect" => {
            let Some(xconnect) = raw.xconnect else {
                return Err(at.error(
                    switch.app.span(),
                    "switch.app",
                    "the xconnect app needs an [xconnect] table",
                    "add [xconnect] with pairs = [[\"<port>\", \"<port>\"]]",
                ));
            };
            let xconnect = xconnect.into_inner();
            let mut pairs = Vec::new();
            let mut used = HashSet::new();
            for (i, pair) in xconnect.pairs.get_ref().iter().enumerate() {
                let key = format!("xconnect.pairs[{i}]");
                let [a, b] = pair.get_ref().as_slice() else {
                    return Err(at.error(
                        pair.span(),
                        &key,
                        "a pair has exactly two port names",
                        "write the pair as [\"a\", \"b\"]",
                    ));
                };
                let (ia, ib) = (port_index(a, &key)?, port_index(b, &key)?);
                if ia == ib {
                    return Err(at.error(
                        pair.span(),
                        &key,
                        "a port cannot be paired with itself",
                        "pair two different ports",
                    ));
                }
                for (index, name) in [(ia, a), (ib, b)] {
                    if !used.insert(index) {
                        return Err(at.error(
                            name.span(),
                            &key,
                            &format!("port {:?} is already in another pair", name.get_ref()),
                            "each port belongs to at most one pair",
                        ));
                    }
                }
                pairs.push((ia, ib));
            }
            if pairs.is_empty() {
                return Err(at.error(
                    xconnect.pairs.span(),
                    "xconnect.pairs",
                    "no pairs: nothing would be forwarded",
                    "add at least one pair of port names",
                ));
            }
            AppConfig::Xconnect { pairs }
        }
        "bridge" => bridge_app(at, raw.bridge, &ports, &port_index)?,
        "router" => router_app(at, raw.router, &port_index)?,
        "openflow" => openflow_app(at, raw.openflow, &ports, &port_index)?,
        other => {
            return Err(at.error(
                switch.app.span(),
                "switch.app",
                &format!("unknown app {other:?}"),
                "use \"xconnect\", \"bridge\", \"router\" or \"openflow\"",
            ));
        }
    };
    let acl = match raw.acl {
        Some(acl) if matches!(app, AppConfig::Bridge { .. } | AppConfig::Router(_)) => {
            Some(acl_config(at, acl)?)
        }
        Some(acl) => {
            return Err(at.error(
                acl.span(),
                "acl",
                "only the bridge and router apps have an ACL stage",
                "remove [acl], or express the filter as [[openflow.flow]] entries with drop",
            ));
        }
        None => None,
    };

    let task = raw
        .task
        .map(Spanned::into_inner)
        .map_or(TaskConfig::default(), |t| TaskConfig {
            spin_cycles: t.spin_cycles.map_or(0, Spanned::into_inner),
            walk_bytes: t.walk_bytes.map_or(0, Spanned::into_inner),
        });
    Ok(Config {
        switch: SwitchConfig {
            workers,
            cores,
            batch,
            frames,
            frame_size,
            idle: switch.idle.unwrap_or(IdleMode::Adaptive),
            drain_us,
            realtime: switch.realtime.unwrap_or(Realtime::Auto),
            control_socket,
        },
        ports,
        app,
        task,
        acl,
    })
}

fn acl_config(at: &Locator<'_>, raw: Spanned<RawAcl>) -> Result<AclConfig, ConfigError> {
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
const MAX_OPENFLOW_CACHE: usize = 1 << 22;

fn openflow_app(
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
    Ok(AppConfig::OpenFlow(OpenFlowConfig {
        tables,
        miss,
        flows_per_table,
        cache_entries,
        megaflows,
        flows,
    }))
}

/// Largest MAC table a bridge may ask for (the table's own limit).
const MAX_MACS: usize = 1 << 20;

/// Resolves a port name at a key to its index, or an error naming the place.
type PortIndex<'a> = &'a dyn Fn(&Spanned<String>, &str) -> Result<usize, ConfigError>;

fn bridge_app(
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
fn parse_prefix(
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

fn parse_address(
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

fn parse_mac(at: &Locator<'_>, text: &Spanned<String>, key: &str) -> Result<[u8; 6], ConfigError> {
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

fn router_app(
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
    let mut routes = Vec::new();
    for (i, route) in raw.route.iter().enumerate() {
        let key = format!("router.route[{i}]");
        let route = route.get_ref();
        let prefix = parse_prefix(at, &route.prefix, &format!("{key}.prefix"))?;
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
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
[switch]
app = "xconnect"
batch = 64

[[port]]
name = "in"
backend = "pcap"
rx = "in.pcap"

[[port]]
name = "out"
backend = "pcap"
tx = "out.pcap"

[[port]]
name = "wire"
backend = "afxdp"
interface = "ws-d0"
queues = [0, 1]

[xconnect]
pairs = [["in", "out"]]
"#;

    #[test]
    fn a_good_config_is_read_with_defaults() {
        let config = parse("good.toml", GOOD).unwrap();
        assert_eq!(config.switch.batch, 64);
        assert_eq!(config.switch.workers, 1);
        assert_eq!(config.switch.idle, IdleMode::Adaptive);
        assert_eq!(config.ports.len(), 3);
        assert_eq!(
            config.switch.control_socket,
            Some(PathBuf::from("/run/wirespeed/good.sock"))
        );
        assert_eq!(
            config.app,
            AppConfig::Xconnect {
                pairs: vec![(0, 1)]
            }
        );
        assert_eq!(
            config.ports[2].backend,
            BackendConfig::AfXdp {
                interface: "ws-d0".into(),
                queues: Some(vec![0, 1]),
                zero_copy: false,
                xdp_mode: XdpMode::Auto,
                rings: RingSizes::default(),
            }
        );
    }

    #[test]
    fn afxdp_ring_sizes_are_read_and_checked() {
        let sized = GOOD.replace(
            "queues = [0, 1]",
            "queues = [0, 1]\ntx_ring = 8192\ncompletion_ring = 8192\nfill_ring = 4096",
        );
        let config = parse("good.toml", &sized).unwrap();
        let BackendConfig::AfXdp { rings, .. } = config.ports[2].backend else {
            panic!("an AF_XDP port");
        };
        assert_eq!(
            rings,
            RingSizes {
                rx: None,
                tx: Some(8192),
                fill: Some(4096),
                completion: Some(8192),
            }
        );
        for bad in ["3000", "32", "131072"] {
            let error = error_of(&GOOD.replace("queues = [0, 1]", &format!("rx_ring = {bad}")));
            assert_eq!(error.key, "port[2].rx_ring", "{bad}");
            assert!(error.message.contains("power of two"), "{error}");
        }
        // Only AF_XDP ports have these rings.
        let error = error_of(&GOOD.replace("rx = \"in.pcap\"", "rx = \"in.pcap\"\ntx_ring = 4096"));
        assert_eq!(error.key, "port[0].tx_ring");
    }

    #[test]
    fn the_control_socket_can_be_moved_or_disabled() {
        let moved = GOOD.replace("batch = 64", "control_socket = \"/tmp/s.sock\"");
        let config = parse("good.toml", &moved).unwrap();
        assert_eq!(
            config.switch.control_socket,
            Some(PathBuf::from("/tmp/s.sock"))
        );
        let off = GOOD.replace("batch = 64", "control_socket = \"\"");
        assert_eq!(
            parse("good.toml", &off).unwrap().switch.control_socket,
            None
        );
        let long = GOOD.replace(
            "batch = 64",
            &format!("control_socket = \"/{}\"", "x".repeat(200)),
        );
        let error = error_of(&long);
        assert_eq!(error.key, "switch.control_socket");
        assert!(error.message.contains("107"), "{error}");
    }

    fn error_of(text: &str) -> ConfigError {
        parse("bad.toml", text).unwrap_err()
    }

    #[test]
    fn realtime_is_auto_unless_set_and_a_bad_word_is_refused() {
        assert_eq!(
            parse("good.toml", GOOD).unwrap().switch.realtime,
            Realtime::Auto
        );
        for (text, expected) in [
            ("true", Realtime::On),
            ("false", Realtime::Off),
            ("\"auto\"", Realtime::Auto),
        ] {
            let config = GOOD.replace("batch = 64", &format!("realtime = {text}"));
            assert_eq!(
                parse("good.toml", &config).unwrap().switch.realtime,
                expected
            );
        }
        let error = error_of(&GOOD.replace("batch = 64", "realtime = \"always\""));
        assert_eq!(error.key, "switch.realtime");
        assert!(error.message.contains("true, false or \"auto\""), "{error}");
    }

    #[test]
    fn an_unknown_port_in_a_pair_names_line_key_and_fix() {
        let error = error_of(&GOOD.replace(r#"["in", "out"]"#, r#"["in", "nope"]"#));
        assert_eq!(error.line, 23);
        assert_eq!(error.key, "xconnect.pairs[0]");
        assert!(error.message.contains("\"nope\""), "{error}");
        assert!(error.message.contains("in, out, wire"), "{error}");
        assert!(error.to_string().starts_with("bad.toml:23:"));
    }

    #[test]
    fn a_misspelt_key_is_refused_with_its_place() {
        let error = error_of(&GOOD.replace("batch = 64", "bacth = 64"));
        assert_eq!((error.line, error.column), (4, 1));
        assert_eq!(error.key, "switch.bacth");
        assert!(error.message.contains("unknown field"), "{error}");
    }

    #[test]
    fn a_wrong_type_and_a_range_are_refused() {
        let error = error_of(&GOOD.replace("batch = 64", "batch = \"many\""));
        assert_eq!(error.line, 4);
        assert_eq!(error.key, "switch.batch");
        let error = error_of(&GOOD.replace("batch = 64", "batch = 1000"));
        assert_eq!(error.key, "switch.batch");
        assert!(error.message.contains("1 to 256"));
    }

    #[test]
    fn backend_specific_keys_are_checked() {
        let error =
            error_of(&GOOD.replace("rx = \"in.pcap\"", "rx = \"in.pcap\"\ninterface = \"eth0\""));
        assert_eq!(error.key, "port[0].interface");
        assert_eq!(error.line, 10);
        let error = error_of(&GOOD.replace("interface = \"ws-d0\"\n", ""));
        assert_eq!(error.key, "port[2].interface");
        let error = error_of(&GOOD.replace("backend = \"afxdp\"", "backend = \"dpdk\""));
        assert!(error.message.contains("unknown backend \"dpdk\""));
        let error = error_of(&GOOD.replace("queues = [0, 1]", "rx_tpacket = \"v2\""));
        assert_eq!(error.key, "port[2].rx_tpacket");
        assert!(
            error.message.contains("applies only to afpacket"),
            "{error}"
        );
    }

    /// GOOD with its third port (the AF_XDP one) turned into an AF_PACKET port with `keys`.
    fn with_afpacket_port(keys: &str) -> String {
        GOOD.replace(
            "backend = \"afxdp\"\ninterface = \"ws-d0\"\nqueues = [0, 1]",
            &format!("backend = \"afpacket\"\ninterface = \"ws-d0\"{keys}"),
        )
    }

    #[test]
    fn an_afpacket_port_takes_its_rx_tpacket_version() {
        let afpacket = with_afpacket_port("");
        let config = parse("good.toml", &afpacket).unwrap();
        assert_eq!(
            config.ports[2].backend,
            BackendConfig::AfPacket {
                interface: "ws-d0".into(),
                rx_tpacket: RxRingKind::Blocks,
                tx_ring: None,
            }
        );
        let slots = afpacket.replace(
            "interface = \"ws-d0\"",
            "interface = \"ws-d0\"\nrx_tpacket = \"v2\"",
        );
        let config = parse("good.toml", &slots).unwrap();
        assert_eq!(
            config.ports[2].backend,
            BackendConfig::AfPacket {
                interface: "ws-d0".into(),
                rx_tpacket: RxRingKind::Slots,
                tx_ring: None,
            }
        );
        let error = error_of(&slots.replace("\"v2\"", "\"v4\""));
        assert_eq!(error.key, "port[2].rx_tpacket");
        assert_eq!(error.line, 20);
        assert!(error.message.contains("\"v4\""), "{error}");
        assert!(error.fix.contains("rx_tpacket = \"v3\""), "{error}");
    }

    #[test]
    fn an_afpacket_port_takes_its_tx_ring_size() {
        let afpacket = with_afpacket_port("\ntx_ring = 8192");
        let config = parse("good.toml", &afpacket).unwrap();
        assert_eq!(
            config.ports[2].backend,
            BackendConfig::AfPacket {
                interface: "ws-d0".into(),
                rx_tpacket: RxRingKind::Blocks,
                tx_ring: Some(8192),
            }
        );
        let error = error_of(&afpacket.replace("8192", "1000"));
        assert_eq!(error.key, "port[2].tx_ring");
        assert!(error.message.contains("power of two"), "{error}");
    }

    #[test]
    fn duplicates_and_self_pairs_are_refused() {
        let error = error_of(&GOOD.replace("name = \"out\"", "name = \"in\""));
        assert!(error.message.contains("already defined"), "{error}");
        let error = error_of(&GOOD.replace(r#"["in", "out"]"#, r#"["in", "in"]"#));
        assert!(error.message.contains("itself"), "{error}");
        let error = error_of(&GOOD.replace(r#"["in", "out"]"#, r#"["in", "out"], ["wire", "in"]"#));
        assert!(error.message.contains("already in another pair"), "{error}");
    }

    #[test]
    fn a_bridge_with_access_and_trunk_ports() {
        let text = GOOD.replace("app = \"xconnect\"", "app = \"bridge\"")
            + "\n[bridge]\nmac_capacity = 1000\n\n[[bridge.port]]\nname = \"in\"\naccess = 10\n\n\
               [[bridge.port]]\nname = \"wire\"\ntrunk = [10, 20]\nnative = 1\n";
        let config = parse("bridge.toml", &text).unwrap();
        assert_eq!(
            config.app,
            AppConfig::Bridge {
                ports: vec![
                    (0, PortVlan::Access(10)),
                    (1, PortVlan::Access(1)),
                    (
                        2,
                        PortVlan::Trunk {
                            allowed: vec![10, 20],
                            native: Some(1)
                        }
                    ),
                ],
                mac_capacity: 1000,
                age_seconds: 300.0,
            }
        );
        let bad = text.replace("access = 10", "access = 5000");
        let error = parse("bridge.toml", &bad).unwrap_err();
        assert_eq!(error.key, "bridge.port[0].access");
        let both = text.replace("access = 10", "access = 10\ntrunk = [3]");
        assert!(
            parse("bridge.toml", &both)
                .unwrap_err()
                .message
                .contains("either")
        );
        let unknown = text.replace("name = \"wire\"\ntrunk", "name = \"nope\"\ntrunk");
        assert!(
            parse("bridge.toml", &unknown)
                .unwrap_err()
                .message
                .contains("no port is named")
        );
    }

    #[test]
    fn a_router_with_interfaces_routes_and_neighbours() {
        let text = GOOD.replace("app = \"xconnect\"", "app = \"router\"")
            + "\n[router]\nicmp_rate = 10\n\n[[router.interface]]\nport = \"in\"\naddresses = [\"198.18.0.254/24\", \"2001:2::fe/64\"]\n\n\
               [[router.interface]]\nport = \"wire\"\nmac = \"02:00:00:00:00:09\"\naddresses = [\"198.18.1.254/24\"]\n\n\
               [[router.route]]\nprefix = \"198.19.0.0/16\"\nvia = [\"198.18.1.1\", \"198.18.1.2\"]\n\n\
               [[router.neighbour]]\nport = \"wire\"\naddress = \"198.18.1.1\"\nmac = \"02:57:53:00:01:01\"\n";
        let config = parse("router.toml", &text).unwrap();
        let AppConfig::Router(router) = config.app else {
            panic!("not a router")
        };
        assert_eq!(router.interfaces.len(), 2);
        assert_eq!(router.interfaces[1].port, 2);
        assert_eq!(router.interfaces[1].mac, Some([2, 0, 0, 0, 0, 9]));
        assert_eq!(router.routes[0].via.len(), 2);
        assert_eq!(router.neighbours[0].mac, [2, 0x57, 0x53, 0, 1, 1]);
        assert_eq!(router.icmp_rate, 10);
        let bad = text.replace("198.19.0.0/16", "198.19.0.0/33");
        let error = parse("router.toml", &bad).unwrap_err();
        assert_eq!(error.key, "router.route[0].prefix");
        let bad = text.replace("02:57:53:00:01:01", "zz");
        assert_eq!(
            parse("router.toml", &bad).unwrap_err().key,
            "router.neighbour[0].mac"
        );
        let bad = text.replace(
            "via = [\"198.18.1.1\", \"198.18.1.2\"]",
            "via = [\"2001:2::1\"]",
        );
        assert!(
            parse("router.toml", &bad)
                .unwrap_err()
                .message
                .contains("address family")
        );
    }

    #[test]
    fn an_acl_in_front_of_the_bridge_names_the_bad_field_and_its_line() {
        let text = GOOD.replace("app = \"xconnect\"", "app = \"bridge\"")
            + "\n[acl]\ndefault = \"deny\"\n\n[[acl.rule]]\naction = \"permit\"\nproto = \"udp\"\n\
               src = \"198.18.0.0/16\"\ndst_port = \"1000-2000\"\n\n[[acl.rule]]\naction = \"permit\"\n\
               dst_port = 53\n";
        let config = parse("acl.toml", &text).unwrap();
        let acl = config.acl.unwrap();
        assert_eq!(acl.default, AclAction::Deny);
        assert_eq!(acl.rules.len(), 2);
        assert_eq!(
            acl.rules[0].fields,
            [
                ("src".to_string(), "198.18.0.0/16".to_string()),
                ("proto".into(), "udp".into()),
                ("dst_port".into(), "1000-2000".into())
            ]
        );
        assert_eq!(acl.rules[1].fields, [("dst_port".into(), "53".into())]);
        let bad = text.replace("1000-2000", "2000-1000");
        let error = parse("acl.toml", &bad).unwrap_err();
        assert_eq!(error.key, "acl.rule[0].dst_port");
        assert_eq!(
            error.line,
            text.lines().position(|l| l.contains("1000-2000")).unwrap() + 1
        );
        assert!(error.fix.contains("src (or ip_src)"), "{error}");
        let bad = text.replace("action = \"permit\"\nproto", "action = \"allow\"\nproto");
        assert_eq!(
            parse("acl.toml", &bad).unwrap_err().key,
            "acl.rule[0].action"
        );
        let bad = text.replace("proto = ", "colour = ");
        assert!(
            parse("acl.toml", &bad)
                .unwrap_err()
                .message
                .contains("colour")
        );
        let xconnect = GOOD.to_string() + "\n[acl]\ndefault = \"deny\"\n";
        let error = parse("acl.toml", &xconnect).unwrap_err();
        assert!(error.message.contains("bridge and router"), "{error}");
    }

    #[test]
    fn an_openflow_app_with_flows_and_errors_that_name_the_flow() {
        let text = GOOD.replace("app = \"xconnect\"", "app = \"openflow\"")
            + "\n[openflow]\ntables = 2\nmiss = \"output:out\"\ncache_entries = 1024\n\n\
               [[openflow.flow]]\npriority = 10\nmatch = \"in_port=in, ip_dst=10.0.0.0/8\"\n\
               actions = \"set_field:eth_dst=02:00:00:00:00:01,output:wire\"\ngoto = 1\n\n\
               [[openflow.flow]]\ntable = 1\nactions = \"output:out\"\nidle_timeout = 30\n";
        let config = parse("of.toml", &text).unwrap();
        let AppConfig::OpenFlow(openflow) = config.app else {
            panic!("not openflow")
        };
        assert_eq!(openflow.tables, 2);
        assert_eq!(openflow.miss, OpenFlowMiss::Output(1));
        assert_eq!(openflow.cache_entries, 1024);
        assert_eq!(openflow.flows.len(), 2);
        let port = |name: &str| {
            ["in", "out", "wire"]
                .iter()
                .position(|p| *p == name)
                .map(|i| i as u16)
        };
        let first = fields::flow_rule(&openflow.flows[0], &port).unwrap();
        assert_eq!(
            (first.table, first.entry.goto, first.entry.priority),
            (0, Some(1), 10)
        );
        let second = fields::flow_rule(&openflow.flows[1], &port).unwrap();
        assert_eq!((second.table, second.entry.idle_timeout), (1, 30));

        let line_of = |needle: &str| text.lines().position(|l| l.contains(needle)).unwrap() + 1;
        let bad = text.replace("ip_dst=10", "ip_dts=10");
        let error = parse("of.toml", &bad).unwrap_err();
        assert_eq!(
            (error.key.as_str(), error.line),
            ("openflow.flow[0].match", line_of("ip_dst=10"))
        );
        assert!(
            error.message.contains("ip_dts") && error.fix.contains("ip_dst"),
            "{error}"
        );
        let bad = text.replace("output:wire", "output:nowhere");
        let error = parse("of.toml", &bad).unwrap_err();
        assert_eq!(error.key, "openflow.flow[0].actions");
        assert!(error.message.contains("output:nowhere"), "{error}");
        let bad = text.replace("goto = 1", "goto = 2");
        assert_eq!(
            parse("of.toml", &bad).unwrap_err().key,
            "openflow.flow[0].goto"
        );
        let bad = text.replace("table = 1", "table = 5");
        assert_eq!(
            parse("of.toml", &bad).unwrap_err().key,
            "openflow.flow[1].table"
        );
        let bad = text.replace("miss = \"output:out\"", "miss = \"output:gone\"");
        assert!(parse("of.toml", &bad).unwrap_err().message.contains("gone"));
        let bad = text.replace("idle_timeout = 30", "idle_time = 30");
        assert!(
            parse("of.toml", &bad)
                .unwrap_err()
                .message
                .contains("idle_time")
        );
    }

    #[test]
    fn syntax_errors_have_a_line() {
        let error = error_of("[switch]\napp = \"xconnect\"\nbatch = [1,\n");
        assert_eq!(error.line, 3, "{error}");
        let error = error_of("");
        assert!(error.message.contains("missing field `switch`"), "{error}");
    }

    proptest::proptest! {
        #[test]
        fn arbitrary_text_never_panics(text in "\\PC{0,400}") {
            let _ = parse("fuzz.toml", &text);
        }

        #[test]
        fn mutated_good_config_never_panics(cut in 0usize..400, byte in proptest::prelude::any::<u8>()) {
            let mut bytes = GOOD.as_bytes().to_vec();
            let at = cut % bytes.len();
            bytes[at] = byte;
            if let Ok(text) = String::from_utf8(bytes) {
                let _ = parse("fuzz.toml", &text);
            }
        }
    }
}
