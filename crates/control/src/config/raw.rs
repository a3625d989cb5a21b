//! The configuration file as TOML reads it, before validation: every value kept with its span,
//! so that an error can name the line and the key.

use std::path::PathBuf;

use serde::Deserialize;
use toml::Spanned;

use super::{FastPathMode, IdleMode, Realtime, XdpMode};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawConfig {
    pub(super) switch: Spanned<RawSwitch>,
    #[serde(default)]
    pub(super) port: Vec<Spanned<RawPort>>,
    pub(super) xconnect: Option<Spanned<RawXconnect>>,
    pub(super) bridge: Option<Spanned<RawBridge>>,
    pub(super) router: Option<Spanned<RawRouter>>,
    pub(super) openflow: Option<Spanned<RawOpenFlow>>,
    pub(super) acl: Option<Spanned<RawAcl>>,
    pub(super) task: Option<Spanned<RawTask>>,
    pub(super) metrics: Option<Spanned<RawMetrics>>,
}

/// A TOML value given as text or as a number (`dst_port = 53` or `dst_port = "1000-2000"`).
#[derive(Deserialize)]
#[serde(untagged)]
pub(super) enum RawText {
    Text(String),
    Number(i64),
}

impl RawText {
    pub(super) fn text(&self) -> String {
        match self {
            RawText::Text(text) => text.clone(),
            RawText::Number(n) => n.to_string(),
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawAcl {
    pub(super) default: Option<Spanned<String>>,
    #[serde(default)]
    pub(super) rule: Vec<Spanned<RawAclRule>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawAclRule {
    pub(super) action: Spanned<String>,
    pub(super) src: Option<Spanned<RawText>>,
    pub(super) dst: Option<Spanned<RawText>>,
    pub(super) proto: Option<Spanned<RawText>>,
    pub(super) src_port: Option<Spanned<RawText>>,
    pub(super) dst_port: Option<Spanned<RawText>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawOpenFlow {
    pub(super) tables: Option<Spanned<u8>>,
    pub(super) miss: Option<Spanned<String>>,
    pub(super) flows_per_table: Option<Spanned<usize>>,
    pub(super) cache_entries: Option<Spanned<usize>>,
    pub(super) megaflows: Option<Spanned<usize>>,
    #[serde(default)]
    pub(super) group: Vec<Spanned<RawGroup>>,
    #[serde(default)]
    pub(super) flow: Vec<Spanned<RawFlow>>,
    /// The OpenFlow agent's keys (any of them turns the agent on).
    pub(super) listen: Option<Spanned<String>>,
    pub(super) controllers: Option<Spanned<Vec<Spanned<String>>>>,
    pub(super) datapath_id: Option<Spanned<RawText>>,
    pub(super) fail_mode: Option<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawGroup {
    pub(super) id: Spanned<u32>,
    #[serde(rename = "type")]
    pub(super) kind: Spanned<String>,
    #[serde(default)]
    pub(super) buckets: Vec<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawFlow {
    pub(super) table: Option<Spanned<u8>>,
    pub(super) priority: Option<Spanned<u16>>,
    #[serde(rename = "match")]
    pub(super) matches: Option<Spanned<String>>,
    pub(super) actions: Spanned<String>,
    pub(super) goto: Option<Spanned<u8>>,
    pub(super) idle_timeout: Option<Spanned<u16>>,
    pub(super) hard_timeout: Option<Spanned<u16>>,
    pub(super) cookie: Option<Spanned<u64>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawRouter {
    pub(super) neighbour_capacity: Option<Spanned<usize>>,
    pub(super) icmp_rate: Option<Spanned<u32>>,
    pub(super) forward_ipv4_options: Option<bool>,
    pub(super) fib: Option<RawFib>,
    #[serde(default)]
    pub(super) interface: Vec<Spanned<RawRouterInterface>>,
    #[serde(default)]
    pub(super) route: Vec<Spanned<RawRouterRoute>>,
    #[serde(default)]
    pub(super) neighbour: Vec<Spanned<RawRouterNeighbour>>,
}

/// `[router] fib`: the words for the FIB structures (`FibKind`).
#[derive(Deserialize, Clone, Copy)]
#[serde(rename_all = "lowercase")]
pub(super) enum RawFib {
    Auto,
    Dir24,
    Trie,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawRouterInterface {
    pub(super) port: Spanned<String>,
    pub(super) mac: Option<Spanned<String>>,
    pub(super) addresses: Spanned<Vec<Spanned<String>>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawRouterRoute {
    pub(super) prefix: Spanned<String>,
    pub(super) via: Spanned<Vec<Spanned<String>>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawRouterNeighbour {
    pub(super) port: Spanned<String>,
    pub(super) address: Spanned<String>,
    pub(super) mac: Spanned<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawBridge {
    pub(super) mac_capacity: Option<Spanned<usize>>,
    pub(super) age_seconds: Option<Spanned<f64>>,
    #[serde(default)]
    pub(super) port: Vec<Spanned<RawBridgePort>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawBridgePort {
    pub(super) name: Spanned<String>,
    pub(super) access: Option<Spanned<u16>>,
    pub(super) trunk: Option<Spanned<Vec<u16>>>,
    pub(super) native: Option<Spanned<u16>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSwitch {
    pub(super) app: Spanned<String>,
    pub(super) workers: Option<Spanned<usize>>,
    pub(super) cores: Option<Spanned<Vec<usize>>>,
    pub(super) batch: Option<Spanned<usize>>,
    pub(super) frames: Option<Spanned<u32>>,
    pub(super) frame_size: Option<Spanned<u32>>,
    pub(super) idle: Option<IdleMode>,
    pub(super) drain_us: Option<Spanned<u32>>,
    pub(super) realtime: Option<Realtime>,
    pub(super) fast_path: Option<FastPathMode>,
    pub(super) control_socket: Option<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawPort {
    pub(super) name: Spanned<String>,
    pub(super) backend: Spanned<String>,
    pub(super) interface: Option<Spanned<String>>,
    pub(super) queues: Option<Spanned<Vec<u16>>>,
    pub(super) zero_copy: Option<Spanned<bool>>,
    pub(super) xdp_mode: Option<Spanned<XdpMode>>,
    pub(super) rx_tpacket: Option<Spanned<String>>,
    pub(super) rx_ring: Option<Spanned<u32>>,
    pub(super) tx_ring: Option<Spanned<u32>>,
    pub(super) fill_ring: Option<Spanned<u32>>,
    pub(super) completion_ring: Option<Spanned<u32>>,
    pub(super) rx: Option<Spanned<PathBuf>>,
    pub(super) tx: Option<Spanned<PathBuf>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawXconnect {
    pub(super) pairs: Spanned<Vec<Spanned<Vec<Spanned<String>>>>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawMetrics {
    pub(super) listen: Spanned<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTask {
    pub(super) spin_cycles: Option<Spanned<u32>>,
    pub(super) walk_bytes: Option<Spanned<u64>>,
}
