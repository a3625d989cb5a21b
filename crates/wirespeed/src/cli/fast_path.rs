//! Whether a switch gets the XDP fast path (`[switch] fast_path`), and the one line per port
//! that says which path is in force and why.
//!
//! The fast path needs every port on AF_XDP (the program hands what it does not forward to
//! the port's socket) and an app whose decisions the kernel can apply: the cross-connect
//! without emulated work, the bridge without an ACL, the router without an ACL on one worker
//! (its neighbours are learned per worker; the kernel has one table), and the openflow app on
//! one worker (its flow cache and stored results are per worker; the kernel has one of each). Under `"auto"` anything else, and a
//! kernel or interface that refuses the program, leaves the switch on the user-space path
//! with the reason printed; under `"xdp"` it is an error.

use std::sync::Arc;

use anyhow::{Result, bail};
use wirespeed_control::config::{AppConfig, BackendConfig, Config, FastPathMode, PortVlan};
use wirespeed_control::dispatch::{FastPathView, KernelFrames};
use wirespeed_fastpath::{BridgeVlan, Capacity, FastPath, PortPlan, PortSpec, ToUser};
use wirespeed_io::afxdp::interface_driver;

use super::build::xdp_mode_of;

/// Routes the kernel's IPv6 table takes (an LPM trie, allocated as it fills): room for a full
/// Internet table several times over. The IPv4 table (DIR-24-8 arrays) takes any number of
/// routes up to /24 and 32 768 /24s holding longer ones. A load beyond either keeps the
/// router on the user-space path (`route.fast_path_refused`).
const ROUTE_CAPACITY: u32 = 1 << 22;

/// The fast path a switch got, if any, and what each port does.
pub struct FastPathChoice {
    pub fast_path: Option<Arc<FastPath>>,
    /// One line per port: "port p0: fast path xdp (xconnect to p1)" or why not.
    pub lines: Vec<String>,
}

/// Sets up the fast path `config` asks for (see the module documentation).
pub fn choose(config: &Config) -> Result<FastPathChoice> {
    let off = |why: String| FastPathChoice {
        fast_path: None,
        lines: config
            .ports
            .iter()
            .map(|port| format!("port {}: user-space path ({why})", port.name))
            .collect(),
    };
    if config.switch.fast_path == FastPathMode::Off {
        return Ok(off("fast_path = \"off\"".into()));
    }
    let specs = match specs(config) {
        Ok(specs) => specs,
        Err(why) if config.switch.fast_path == FastPathMode::Xdp => {
            bail!("fast_path = \"xdp\" cannot be had: {why}; fix that or set fast_path = \"auto\"")
        }
        Err(why) => return Ok(off(format!("no XDP fast path: {why}"))),
    };
    let capacity = Capacity {
        macs: match &config.app {
            AppConfig::Bridge { mac_capacity, .. } => *mac_capacity as u32,
            _ => 1,
        },
        routes: match &config.app {
            AppConfig::Router(_) => ROUTE_CAPACITY,
            _ => 1,
        },
        flows: match &config.app {
            AppConfig::OpenFlow(openflow) => openflow.cache_entries as u32,
            _ => 1,
        },
        flow_results: match &config.app {
            AppConfig::OpenFlow(openflow) => openflow.megaflows as u32,
            _ => 1,
        },
    };
    match FastPath::attach(&specs, capacity) {
        Ok(fast_path) => {
            let lines = specs
                .iter()
                .enumerate()
                .map(|(slot, spec)| {
                    let attachment = fast_path.attachment(slot);
                    let mode = attachment.map_or("?", |a| a.mode());
                    let what = match &spec.plan {
                        PortPlan::Xconnect { peer } => {
                            format!("every frame to {}", config.ports[usize::from(*peer)].name)
                        }
                        PortPlan::Bridge(_) => "known unicast; learning, flooding and \
                                                other VLAN cases in user space"
                            .to_string(),
                        PortPlan::Router => "IP through resolved gateways; ARP, NDP, \
                                             the router's own traffic, TTL expiry, unresolved \
                                             neighbours and the rest in user space"
                            .to_string(),
                        PortPlan::OpenFlow => "UDP and TCP flows of the flow cache whose \
                                               actions the kernel can apply (one output or a \
                                               drop, after MAC, IP and port rewrites, a TTL \
                                               decrement, a VLAN push, pop or id); misses, other \
                                               actions and other frames in user space"
                            .to_string(),
                        PortPlan::User => "no peer: every frame to user space".to_string(),
                    };
                    let fallback = attachment
                        .and_then(|a| a.fallback())
                        .map_or(String::new(), |why| format!("; {why}"));
                    format!(
                        "port {}: fast path xdp ({mode}{fallback}): {what}",
                        spec.name
                    )
                })
                .collect();
            Ok(FastPathChoice {
                fast_path: Some(Arc::new(fast_path)),
                lines,
            })
        }
        Err(error) if config.switch.fast_path == FastPathMode::Xdp => {
            Err(anyhow::Error::new(error).context("fast_path = \"xdp\""))
        }
        Err(error) => Ok(off(format!(
            "the XDP fast path was refused: {error}; set fast_path = \"off\" to silence this"
        ))),
    }
}

/// What the kernel does with each port's frames, or why the switch cannot have the fast path.
fn specs(config: &Config) -> Result<Vec<PortSpec>, String> {
    let mut specs = Vec::new();
    for port in &config.ports {
        let BackendConfig::AfXdp {
            interface,
            xdp_mode,
            ..
        } = &port.backend
        else {
            return Err(format!(
                "port {} is not on AF_XDP (the fast path hands the frames it does not forward \
                 to the port's AF_XDP socket)",
                port.name
            ));
        };
        if config.switch.fast_path == FastPathMode::Auto
            && interface_driver(interface).is_ok_and(|driver| driver == "veth")
        {
            return Err(format!(
                "port {} is a veth, whose peer drops redirected frames unless it runs NAPI (an \
                 XDP program or GRO on its side), which the switch cannot check; write \
                 fast_path = \"xdp\" where the peers do",
                port.name
            ));
        }
        specs.push(PortSpec {
            name: port.name.clone(),
            interface: interface.clone(),
            plan: PortPlan::User,
            mode: xdp_mode_of(*xdp_mode),
        });
    }
    match &config.app {
        AppConfig::Xconnect { pairs } => {
            if config.task.spin_cycles > 0 || config.task.walk_bytes > 0 {
                return Err("the [task]'s emulated work runs in user space".into());
            }
            for &(a, b) in pairs {
                specs[a].plan = PortPlan::Xconnect { peer: b as u16 };
                specs[b].plan = PortPlan::Xconnect { peer: a as u16 };
            }
        }
        AppConfig::Bridge { ports, .. } => {
            if config.acl.is_some() {
                return Err("the bridge has an [acl], which only user space applies".into());
            }
            for (index, role) in ports {
                specs[*index].plan = PortPlan::Bridge(match role {
                    PortVlan::Access(vlan) => BridgeVlan::Access(*vlan),
                    PortVlan::Trunk { allowed, native } => BridgeVlan::Trunk {
                        allowed: allowed.clone(),
                        native: *native,
                    },
                });
            }
        }
        AppConfig::Router(_) => {
            if config.acl.is_some() {
                return Err("the router has an [acl], which only user space applies".into());
            }
            if config.switch.workers > 1 {
                return Err(format!(
                    "the router runs on {} workers, each learning its own neighbours, and the \
                     kernel has one table; set workers = 1",
                    config.switch.workers
                ));
            }
            for spec in &mut specs {
                spec.plan = PortPlan::Router;
            }
        }
        AppConfig::OpenFlow(_) => {
            if config.switch.workers > 1 {
                return Err(format!(
                    "the openflow app runs on {} workers, each with its own flow cache, and the \
                     kernel has one; set workers = 1",
                    config.switch.workers
                ));
            }
            for spec in &mut specs {
                spec.plan = PortPlan::OpenFlow;
            }
        }
    }
    Ok(specs)
}

/// The fast path as the control socket shows it (`show counters`, `show ports`): also where
/// the switch runs without one, to say why.
pub struct View {
    fast_path: Option<Arc<FastPath>>,
    /// Port name -> the path in force and why (the lines `wirespeed switch` prints).
    paths: Vec<(String, String)>,
}

impl View {
    pub fn new(choice: &FastPathChoice, ports: &[String]) -> View {
        let paths = ports
            .iter()
            .zip(&choice.lines)
            .map(|(port, line)| {
                let prefix = format!("port {port}: ");
                (
                    port.clone(),
                    line.strip_prefix(&prefix).unwrap_or(line).to_string(),
                )
            })
            .collect();
        View {
            fast_path: choice.fast_path.clone(),
            paths,
        }
    }
}

impl FastPathView for View {
    fn frames(&self) -> Option<KernelFrames> {
        let fast_path = self.fast_path.as_ref()?;
        Some(
            fast_path
                .counters()
                .iter()
                .fold(KernelFrames::default(), |frames, port| KernelFrames {
                    forwarded: frames.forwarded + port.rx_forwarded.packets,
                    sent: frames.sent + port.tx_forwarded.packets,
                    dropped: frames.dropped + port.dropped.packets,
                }),
        )
    }

    fn counters(&self) -> Vec<(String, u64)> {
        let Some(fast_path) = &self.fast_path else {
            return Vec::new();
        };
        let ports = fast_path.counters();
        let to_user = ToUser::ALL.iter().map(|&reason| {
            let total = ports.iter().map(|port| port.to_user(reason)).sum();
            (format!("to_user.{}", reason.name()), total)
        });
        // A gauge among the counters (1 once the kernel forwards by the router's routes), so
        // that a script or the tester can wait for a loaded table to reach the kernel.
        let ready = fast_path
            .routes_ready()
            .map(|ready| ("routes_ready".to_string(), u64::from(ready)));
        to_user.chain(ready).collect()
    }

    fn path(&self, port: &str) -> String {
        self.paths
            .iter()
            .find(|(name, _)| name == port)
            .map_or_else(|| "user space".to_string(), |(_, path)| path.clone())
    }
}
