//! The `wirespeed switch` configuration file.
//!
//! ```toml
//! [switch]
//! app = "xconnect"      # the pipeline to run
//! workers = 1           # worker threads, one per core
//! cores = [1]           # optional: pin worker i to cores[i]
//! batch = 32            # packets per batch, 1..=256
//! frames = 16384        # frames in each worker's pool
//! frame_size = 2048     # 2048, 4096, 8192 or 16384 (jumbo frames)
//! idle = "adaptive"     # "busy": spin; "adaptive": sleep in poll(2) after empty polls
//! drain_us = 50         # longest a packet waits in a TX batch under load
//! realtime = "auto"     # SCHED_FIFO for workers (above the kernel's NAPI threads): true,
//!                       # false, or "auto" (FIFO for workers whose ports are all AF_XDP or
//!                       # AF_PACKET)
//! fast_path = "auto"   # the XDP fast path (the kernel forwards what user space decided):
//!                       # "xdp" (required: the switch refuses to start without it), "off", or
//!                       # "auto" (on where every port is AF_XDP, the app has one and the
//!                       # kernel takes the program; otherwise the user-space path, saying why)
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
//! [metrics]             # optional: the Prometheus endpoint (docs/operations.md)
//! listen = "127.0.0.1:9417"
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
//! listen = "ptcp:6653"  # OpenFlow 1.3 agent (optional): listener, on 127.0.0.1 unless
//! controllers = []      # ptcp:PORT:ADDR says; controllers "tcp:ADDR:PORT"; datapath_id;
//! fail_mode = "secure"  # any of these keys turns the agent on (docs/openflow.md)
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
use wirespeed_dataplane::command::{AclAction, AclRule, FlowRule};
pub use wirespeed_dataplane::table::fib::FibKind;
use wirespeed_io::afpacket::RxRingKind;

mod apps;
mod raw;

use apps::{acl_config, bridge_app, openflow_app, router_app};
use raw::RawConfig;

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
    /// Where the Prometheus endpoint listens (`[metrics] listen`), if anywhere.
    pub metrics: Option<std::net::SocketAddr>,
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
    /// Checked: every group converts with `fields::group_rule` and goes into a group table
    /// in this order (a group chains only to one before it).
    pub groups: Vec<wirespeed_dataplane::command::GroupRule>,
    /// Checked against the ports: every flow converts with `fields::flow_rule` (its table,
    /// goto and timeouts are fields of the rule).
    pub flows: Vec<FlowRule>,
    /// The OpenFlow 1.3 agent, when any of its keys (`listen`, `controllers`, `datapath_id`,
    /// `fail_mode`) is given.
    pub agent: Option<crate::openflow::AgentConfig>,
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
    pub fast_path: FastPathMode,
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

/// Whether the XDP fast path forwards in the kernel what user space has decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FastPathMode {
    /// On where it can be (every port AF_XDP, an app with a fast path, a kernel that takes the
    /// program); otherwise the user-space path, and `wirespeed switch` says why.
    Auto,
    /// Required: a switch that cannot have it refuses to start, saying why.
    Xdp,
    /// Every frame goes through user space.
    Off,
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
    /// The FIBs' lookup structures: DIR-24-8 and the 16-8-8 trie (default), or Poptrie.
    pub fib: FibKind,
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
    let bytes = std::fs::read(path).map_err(|e| unreadable(format!("cannot read: {e}")))?;
    match String::from_utf8(bytes) {
        Ok(text) => parse(&file, &text),
        Err(error) => Err(not_utf8(&file, error.as_bytes(), error.utf8_error())),
    }
}

/// The error for a file that is not UTF-8 (TOML is): placed at the first bad byte, so an
/// editor can go there, with the line up to it as the excerpt.
fn not_utf8(file: &str, bytes: &[u8], error: std::str::Utf8Error) -> ConfigError {
    let valid = error.valid_up_to();
    // The bytes before `valid` are UTF-8 by the definition of `valid_up_to`.
    let text = String::from_utf8_lossy(&bytes[..valid]);
    let at = Locator::new(file, &text);
    let bad = bytes.get(valid).copied().unwrap_or_default();
    at.error(
        valid..valid,
        &at.key_at(valid),
        &format!("byte 0x{bad:02x} here is not UTF-8, and a TOML file is UTF-8"),
        "save the file as UTF-8 (e.g. `iconv -f latin1 -t utf-8 FILE`), or remove the byte",
    )
}

/// Parses and validates configuration `text`; `file` names it in errors.
pub fn parse(file: &str, text: &str) -> Result<Config, ConfigError> {
    let mut at = Locator::new(file, text);
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
    // What the app lacks (its table, enough ports) has no place of its own in the file: the
    // line that chose the app is where to look.
    at.anchor = Some(raw.switch.get_ref().app.span());
    validate(&at, raw)
}

/// Turns byte spans into file, line, column and excerpt.
struct Locator<'a> {
    file: &'a str,
    text: &'a str,
    /// Where an error about something missing (built with the empty span `0..0`) points:
    /// otherwise it would name line 1, which has nothing to do with it.
    anchor: Option<Range<usize>>,
}

impl<'a> Locator<'a> {
    fn new(file: &'a str, text: &'a str) -> Locator<'a> {
        Locator {
            file,
            text,
            anchor: None,
        }
    }

    fn error(&self, span: Range<usize>, key: &str, message: &str, fix: &str) -> ConfigError {
        let span = match &self.anchor {
            Some(anchor) if span == (0..0) => anchor.clone(),
            _ => span,
        };
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
        Some(cores) => {
            check_cores(at, cores)?;
            cores.get_ref().clone()
        }
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
        && ![2048, 4096, 8192, 16384].contains(f.get_ref())
    {
        return Err(at.error(
            f.span(),
            "switch.frame_size",
            "must be 2048, 4096, 8192 or 16384",
            "use 2048 for MTUs up to 1500, 16384 for jumbo frames (MTU 9000)",
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
    // Every capture file the ports name so far: path, key, written (tx) or read (rx).
    let mut captures: Vec<(PathBuf, String, bool)> = Vec::new();
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
        // A flow key holds the ingress port's index in one byte.
        if index >= wirespeed_packet::FlowKey::MAX_PORTS {
            return Err(at.error(
                port.name.span(),
                &key("name"),
                &format!(
                    "a switch has at most {} ports",
                    wirespeed_packet::FlowKey::MAX_PORTS
                ),
                "split the ports between two switches",
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
                // A file written by one port and read or written by another (or by the same)
                // would lose frames: the output halved, or the input overwritten.
                for (field, path, written) in [("rx", &port.rx, false), ("tx", &port.tx, true)] {
                    let Some(path) = path else { continue };
                    if let Some((_, other, _)) = captures.iter().find(|(seen, _, seen_written)| {
                        (written || *seen_written) && same_file(seen, path.get_ref())
                    }) {
                        return Err(at.error(
                            path.span(),
                            &key(field),
                            &format!(
                                "{} is also {other}: a capture written by one port cannot be \
                                 read or written by another",
                                path.get_ref().display()
                            ),
                            "give every port's tx a file of its own, and no port's rx",
                        ));
                    }
                    captures.push((path.get_ref().clone(), key(field), written));
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
    let metrics = match &raw.metrics {
        None => None,
        Some(metrics) => {
            let listen = &metrics.get_ref().listen;
            Some(listen.get_ref().parse().map_err(|_| {
                at.error(
                    listen.span(),
                    "metrics.listen",
                    &format!("{:?} is not an address and port", listen.get_ref()),
                    "write ADDRESS:PORT, e.g. \"127.0.0.1:9417\" ([::1]:9417 for IPv6)",
                )
            })?)
        }
    };
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
            fast_path: switch.fast_path.unwrap_or(FastPathMode::Auto),
            control_socket,
        },
        ports,
        app,
        task,
        acl,
        metrics,
    })
}

/// Refuses a core this process may not run on (beyond the machine, or outside its `taskset` or
/// cpuset): the worker would fail to pin itself only after the switch said it was forwarding.
fn check_cores(at: &Locator<'_>, cores: &Spanned<Vec<usize>>) -> Result<(), ConfigError> {
    let allowed = wirespeed_io::thread::allowed_cores().map_err(|e| {
        at.error(
            cores.span(),
            "switch.cores",
            &format!("cannot read which cores this process may use: {e}"),
            "leave `cores` out",
        )
    })?;
    match cores.get_ref().iter().find(|core| !allowed.contains(core)) {
        Some(core) => Err(at.error(
            cores.span(),
            "switch.cores",
            &format!(
                "core {core} is not one this process may run on (it may use {})",
                wirespeed_io::thread::cpu_list(&allowed)
            ),
            "pick cores from that list (`taskset -cp $$` shows them), or leave `cores` out",
        )),
        None => Ok(()),
    }
}

/// Whether `a` and `b` name the same file: the same path, or, where both exist, the same
/// inode (a link, `./x` and `x`, a symbolic link).
pub fn same_file(a: &std::path::Path, b: &std::path::Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    if a == b {
        return true;
    }
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}

#[cfg(test)]
mod tests;
