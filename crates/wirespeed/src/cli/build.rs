//! Turning a validated configuration into workers with open ports.
//!
//! Every port of every worker is opened before any worker runs; the first failure drops what was
//! already opened (closing sockets, detaching programs) and is returned with the port's name.
//!
//! How workers share a port depends on its backend: AF_PACKET ports by fanout (worker *w* is
//! member *w*); AF_XDP ports by queues: the interface's XDP program is attached once, and worker
//! *w* of *W* opens every *W*-th selected queue starting at the *w*-th, receives from all of
//! them and transmits on the first, on its own pool and UMEM. pcap ports are one worker's.

use std::sync::Arc;

use anyhow::{Context, Result};
use wirespeed_fastpath::{FlowMirror, MacMirror, RouterMirror};

use super::fast_path::{self, FastPathChoice};
use std::net::IpAddr;
use wirespeed_control::config::PortVlan;
use wirespeed_control::config::XdpMode as XdpModeConfig;
use wirespeed_control::config::{AppConfig, BackendConfig, Config, PortConfig};
use wirespeed_dataplane::app::bridge::{Bridge, BridgeConfig, BridgePort};

use wirespeed_control::config::OpenFlowMiss;
use wirespeed_control::openflow::Rings;
use wirespeed_dataplane::app::openflow::{
    MissAction, OpenFlow, OpenFlowConfig, packet_in, removed,
};
use wirespeed_dataplane::app::router::{
    Gateway, Interface, OptionsPolicy, Prefix as RoutePrefix, Router, RouterConfig,
    StaticNeighbour, StaticRoute,
};
use wirespeed_dataplane::app::{App, Xconnect, fields};
use wirespeed_dataplane::command::AclAction as RuleAction;
use wirespeed_dataplane::stage::Task;
use wirespeed_dataplane::stage::acl::{AclAction, AclConfig};
use wirespeed_dataplane::stage::vlan::VlanMode;
use wirespeed_dataplane::worker::{Idle, Worker, WorkerConfig, WorkerPort};
use wirespeed_io::afpacket::{AfPacketConfig, AfPacketPort, RxRingKind};
use wirespeed_io::afxdp::{AfXdpConfig, AfXdpPort, QueueSelection, Umem, XdpAttachment, XdpMode};
use wirespeed_io::pcap::PcapPort;
use wirespeed_io::{Port, PortInfo, PortStats, QueueId};
use wirespeed_packet::cpu::{rdtsc, tsc_hz};
use wirespeed_packet::wire::EthernetAddress;
use wirespeed_packet::{Batch, FramePool};

/// The workers the configuration describes, and the XDP fast path they share, if any.
pub struct Built {
    pub workers: Vec<Worker>,
    pub fast_path: FastPathChoice,
    /// The OpenFlow agent's ends of each worker's rings (none without an agent).
    pub rings: Rings,
}

/// Builds the workers the configuration describes.
pub fn workers(config: &Config) -> Result<Built> {
    anyhow::ensure!(
        config.switch.workers == 1
            || config
                .ports
                .iter()
                .all(|p| !matches!(p.backend, BackendConfig::Pcap { .. })),
        "pcap ports cannot be shared by several workers; set workers = 1"
    );
    let worker_config = WorkerConfig {
        batch_size: config.switch.batch,
        drain_cycles: tsc_hz() / 1_000_000 * config.switch.drain_us as u64,
        idle: match config.switch.idle {
            wirespeed_control::config::IdleMode::Busy => Idle::Busy,
            wirespeed_control::config::IdleMode::Adaptive => WorkerConfig::default().idle,
        },
    };
    // The fast path's program, when the switch gets it, is every AF_XDP interface's program;
    // otherwise each gets the plain redirect into its sockets. Either way it is attached once
    // and the workers' ports share it by queues.
    let fast_path = fast_path::choose(config)?;
    let shares = config
        .ports
        .iter()
        .enumerate()
        .map(|(slot, port)| {
            let attached = fast_path
                .fast_path
                .as_ref()
                .and_then(|fast_path| fast_path.attachment(slot).cloned());
            afxdp_share(port, config.switch.workers, attached)
        })
        .collect::<Result<Vec<_>>>()?;
    let mut workers = Vec::new();
    let mut rings = Rings::default();
    for index in 0..config.switch.workers {
        let mut pool = FramePool::new(config.switch.frames, config.switch.frame_size)
            .with_context(|| format!("frame pool of worker {index}"))?;
        // One UMEM per worker, shared by all its AF_XDP ports: a frame received on one leaves
        // by another without a copy.
        let umem = Umem::new(&pool);
        let mut ports = Vec::new();
        for (port, share) in config.ports.iter().zip(&shares) {
            ports.push(open(config, port, share.as_ref(), index, &mut pool, &umem)?);
        }
        let macs: Vec<[u8; 6]> = ports.iter().map(|p| p.port.info().mac).collect();
        let mirror = match (&fast_path.fast_path, &config.app) {
            (Some(fast_path), AppConfig::Bridge { .. }) => Some(Mirror::Macs(
                fast_path
                    .mac_mirror()
                    .context("the fast path's MAC table")?,
            )),
            (Some(fast_path), AppConfig::Router(_)) => Some(Mirror::Routes(Box::new(
                fast_path
                    .router_mirror()
                    .context("the fast path's routing tables")?,
            ))),
            (Some(fast_path), AppConfig::OpenFlow(_)) => Some(Mirror::Flows(
                fast_path
                    .flow_mirror()
                    .context("the fast path's flow cache")?,
            )),
            _ => None,
        };
        let app = app(config, index as u64, &macs, mirror, &mut rings)?;
        workers.push(Worker::new(worker_config.clone(), pool, ports, app));
    }
    Ok(Built {
        workers,
        fast_path,
        rings,
    })
}

/// An AF_XDP interface as the workers share it: its XDP program, and the queues to serve.
struct AfXdpShare {
    attachment: Arc<XdpAttachment>,
    /// The selected queues, ascending; worker *w* of *W* serves those at positions *i* with
    /// *i* mod *W* = *w* (with every queue selected: queue *q* goes to worker *q* mod *W*).
    queues: Vec<QueueId>,
}

impl AfXdpShare {
    /// The queues worker `worker` of `workers` receives from; it transmits on the first.
    fn of_worker(&self, worker: usize, workers: usize) -> Vec<QueueId> {
        self.queues
            .iter()
            .enumerate()
            .filter(|(position, _)| position % workers == worker)
            .map(|(_, &queue)| queue)
            .collect()
    }
}

/// Attaches the XDP program of an AF_XDP port's interface and checks that every one of the
/// `workers` gets a queue of it; `None` for other backends.
///
/// A worker needs a queue of its own on every port, even to transmit only: the kernel binds one
/// UMEM per queue, and each worker has its own, so two workers cannot use one queue.
fn afxdp_share(
    port: &PortConfig,
    workers: usize,
    attached: Option<Arc<XdpAttachment>>,
) -> Result<Option<AfXdpShare>> {
    let BackendConfig::AfXdp {
        interface,
        queues,
        xdp_mode,
        ..
    } = &port.backend
    else {
        return Ok(None);
    };
    let attachment = match attached {
        Some(attachment) => attachment,
        None => Arc::new(
            XdpAttachment::attach(interface, xdp_mode_of(*xdp_mode))
                .with_context(|| format!("port {}", port.name))?,
        ),
    };
    let mut selected: Vec<QueueId> = match queues {
        Some(list) => list.clone(),
        None => (0..attachment.queues()).collect(),
    };
    selected.sort_unstable();
    selected.dedup();
    anyhow::ensure!(
        selected.len() >= workers,
        "port {}: {} AF_XDP queue(s) of {interface} for {workers} workers; every worker needs a \
         queue of its own on every AF_XDP port (to receive, and to transmit: two workers cannot \
         share a queue). Give the interface more queues (`ethtool -L {interface} combined \
         {workers}`) and select at least {workers} (or leave `queues` out), or set workers = {}",
        port.name,
        selected.len(),
        selected.len().max(1),
    );
    Ok(Some(AfXdpShare {
        attachment,
        queues: selected,
    }))
}

pub(super) fn xdp_mode_of(mode: XdpModeConfig) -> XdpMode {
    match mode {
        XdpModeConfig::Auto => XdpMode::Auto,
        XdpModeConfig::Native => XdpMode::Native,
        XdpModeConfig::Generic => XdpMode::Generic,
    }
}

/// The fast path's copy of an app's tables, which the app keeps equal to its own.
enum Mirror {
    Macs(MacMirror),
    Routes(Box<RouterMirror>),
    Flows(FlowMirror),
}

/// The configured app; `macs` are the opened ports' MAC addresses (the router's defaults);
/// `mirror` is the fast path's copy of its tables. An OpenFlow app with an agent gets rings to
/// it (frames for the controller, flows removed by timeout), whose other ends go to `rings`.
fn app(
    config: &Config,
    seed: u64,
    macs: &[[u8; 6]],
    mirror: Option<Mirror>,
    rings: &mut Rings,
) -> Result<Box<dyn App>> {
    let task = Task::new(
        config.task.spin_cycles as u64,
        config.task.walk_bytes,
        seed + 1,
    );
    Ok(match &config.app {
        AppConfig::Xconnect { pairs } => {
            let pairs: Vec<(u16, u16)> = pairs.iter().map(|&(a, b)| (a as u16, b as u16)).collect();
            Box::new(Xconnect::new(&pairs, Some(task)))
        }
        AppConfig::Bridge {
            ports,
            mac_capacity,
            age_seconds,
        } => {
            let ports = ports
                .iter()
                .map(|(index, role)| BridgePort {
                    port: *index as u16,
                    mode: match role {
                        PortVlan::Access(vlan) => VlanMode::Access(*vlan),
                        PortVlan::Trunk { allowed, native } => VlanMode::Trunk {
                            allowed: allowed.clone(),
                            native: *native,
                        },
                    },
                })
                .collect();
            let bridge = BridgeConfig {
                ports,
                mac_capacity: *mac_capacity,
                age_seconds: *age_seconds,
            };
            let mut bridge = Bridge::new(bridge).context("the [bridge] configuration")?;
            if let Some(Mirror::Macs(mirror)) = mirror {
                bridge.mirror_macs(Box::new(mirror), rdtsc());
            }
            match acl_config(config)? {
                Some(acl) => Box::new(bridge.with_acl(&acl)),
                None => Box::new(bridge),
            }
        }
        AppConfig::Router(router) => {
            let mut router = router_config(router, macs)?;
            router.acl = acl_config(config)?;
            let mut router = Router::new(router).context("the [router] configuration")?;
            if let Some(Mirror::Routes(mirror)) = mirror {
                router.mirror_routes(mirror);
            }
            Box::new(router)
        }
        AppConfig::OpenFlow(openflow) => {
            let mut app = openflow_app(config, openflow)?;
            if let Some(Mirror::Flows(mirror)) = mirror {
                app.mirror_flows(Box::new(mirror));
            }
            if openflow.agent.is_some() {
                let (sender, receiver) = packet_in::ring();
                app.set_packet_in(sender);
                rings.packet_ins.push(receiver);
                let (sender, receiver) = removed::ring();
                app.set_flow_removed(sender);
                rings.removed.push(receiver);
            }
            Box::new(app)
        }
    })
}

/// The ACL stage's configuration from the file's `[acl]`, if there is one.
fn acl_config(config: &Config) -> Result<Option<AclConfig>> {
    let Some(acl) = &config.acl else {
        return Ok(None);
    };
    let rules = fields::acl_rules(&acl.rules).context("the [acl] configuration")?;
    Ok(Some(AclConfig {
        rules,
        default: match acl.default {
            RuleAction::Permit => AclAction::Permit,
            RuleAction::Deny => AclAction::Deny,
        },
        ..AclConfig::default()
    }))
}

/// The OpenFlow app with the file's flows installed.
fn openflow_app(
    config: &Config,
    openflow: &wirespeed_control::config::OpenFlowConfig,
) -> Result<OpenFlow> {
    let mut app = OpenFlow::new(OpenFlowConfig {
        tables: openflow.tables,
        ports: config.ports.len() as u16,
        miss: match openflow.miss {
            OpenFlowMiss::Drop => MissAction::Drop,
            OpenFlowMiss::Flood => MissAction::Flood,
            OpenFlowMiss::Output(port) => MissAction::Output(port as u16),
        },
        flows_per_table: openflow.flows_per_table,
        cache_entries: openflow.cache_entries,
        megaflows: openflow.megaflows,
        ..OpenFlowConfig::default()
    });
    let port = |name: &str| {
        config
            .ports
            .iter()
            .position(|p| p.name == name)
            .and_then(|i| u16::try_from(i).ok())
    };
    for (i, rule) in openflow.groups.iter().enumerate() {
        let group =
            fields::group_rule(rule, &port).with_context(|| format!("openflow.group[{i}]"))?;
        app.add_group(group)
            .with_context(|| format!("openflow.group[{i}]"))?;
    }
    for (i, rule) in openflow.flows.iter().enumerate() {
        let flow = fields::flow_rule(rule, &port).with_context(|| format!("openflow.flow[{i}]"))?;
        app.add_flow(flow.table, flow.entry)
            .with_context(|| format!("openflow.flow[{i}]"))?;
    }
    Ok(app)
}

/// The dataplane's router configuration from the file's.
fn router_config(
    config: &wirespeed_control::config::RouterConfig,
    macs: &[[u8; 6]],
) -> Result<RouterConfig> {
    let mut interfaces = Vec::new();
    for interface in &config.interfaces {
        let (mut ipv4, mut ipv6) = (Vec::new(), Vec::new());
        for &(addr, len) in &interface.addresses {
            match addr {
                IpAddr::V4(v4) => ipv4.push((v4, len)),
                IpAddr::V6(v6) => ipv6.push((v6, len)),
            }
        }
        let mac = interface
            .mac
            .or_else(|| macs.get(interface.port).copied())
            .unwrap_or([0; 6]);
        interfaces.push(Interface {
            port: interface.port as u16,
            mac: EthernetAddress(mac),
            ipv4,
            ipv6,
        });
    }
    let mut routes = Vec::new();
    for route in &config.routes {
        let prefix = RoutePrefix::new(route.prefix.0, route.prefix.1)
            .with_context(|| format!("route {}/{}", route.prefix.0, route.prefix.1))?;
        routes.push(StaticRoute {
            prefix,
            via: route.via.iter().map(|&gw| Gateway::new(gw)).collect(),
        });
    }
    let neighbours = config
        .neighbours
        .iter()
        .map(|n| StaticNeighbour {
            port: n.port as u16,
            addr: n.address,
            mac: EthernetAddress(n.mac),
        })
        .collect();
    Ok(RouterConfig {
        interfaces,
        routes,
        neighbours,
        neighbour_capacity: config.neighbour_capacity,
        icmp_rate: config.icmp_rate,
        ipv4_options: if config.forward_ipv4_options {
            OptionsPolicy::Forward
        } else {
            OptionsPolicy::Drop
        },
        fib: config.fib,
        ..RouterConfig::default()
    })
}

/// A backend that drives a kernel network interface.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum KernelBackend {
    Afxdp,
    Afpacket,
}

/// Opens `port` for worker `worker`: the worker's share of the port's queues (for AF_XDP,
/// `share` is the interface's program and queues).
fn open(
    config: &Config,
    port: &PortConfig,
    share: Option<&AfXdpShare>,
    worker: usize,
    pool: &mut FramePool,
    umem: &Umem,
) -> Result<WorkerPort> {
    match (&port.backend, share) {
        (BackendConfig::Pcap { rx, tx }, _) => {
            let opened = PcapPort::open(&port.name, rx.as_deref(), tx.as_deref())
                .with_context(|| format!("port {}", port.name))?;
            let rx_queues = if rx.is_some() { vec![0] } else { vec![] };
            Ok(WorkerPort {
                port: Box::new(opened),
                rx_queues,
                tx_queue: 0,
            })
        }
        (
            BackendConfig::AfPacket {
                interface,
                rx_tpacket,
                tx_ring,
            },
            _,
        ) => {
            let workers = config.switch.workers;
            open_afpacket(
                &port.name,
                interface,
                (*rx_tpacket, *tx_ring),
                config.switch.frame_size,
                worker,
                workers,
            )
        }
        (
            BackendConfig::AfXdp {
                zero_copy, rings, ..
            },
            Some(share),
        ) => {
            let default = AfXdpConfig::default();
            let afxdp = AfXdpConfig {
                queues: QueueSelection::List(share.of_worker(worker, config.switch.workers)),
                zero_copy: *zero_copy,
                rx_size: rings.rx.unwrap_or(default.rx_size),
                tx_size: rings.tx.unwrap_or(default.tx_size),
                fill_size: rings.fill.unwrap_or(default.fill_size),
                completion_size: rings.completion.unwrap_or(default.completion_size),
                ..default
            };
            let opened = AfXdpPort::open_shared(&share.attachment, &afxdp, umem, pool)
                .with_context(|| format!("port {} (worker {worker})", port.name))?;
            Ok(afxdp_worker_port(opened, &port.name))
        }
        (BackendConfig::AfXdp { .. }, None) => Err(anyhow::anyhow!(
            "port {}: the AF_XDP interface was not attached before the workers were built",
            port.name
        )),
    }
}

/// Opens interface `interface` as port `name` with `backend` and the default settings, for
/// one worker whose frames live in `pool` (registered as `umem`).
pub fn open_interface(
    backend: KernelBackend,
    name: &str,
    interface: &str,
    pool: &mut FramePool,
    umem: &Umem,
) -> Result<WorkerPort> {
    match backend {
        KernelBackend::Afpacket => open_afpacket(
            name,
            interface,
            (RxRingKind::default(), None),
            pool.frame_size(),
            0,
            1,
        ),
        KernelBackend::Afxdp => open_afxdp(
            name,
            interface,
            &AfXdpConfig {
                zero_copy: false,
                ..AfXdpConfig::default()
            },
            pool,
            umem,
        ),
    }
}

/// AF_XDP: every selected queue of the interface, received from and sent on by one worker.
fn open_afxdp(
    name: &str,
    interface: &str,
    config: &AfXdpConfig,
    pool: &mut FramePool,
    umem: &Umem,
) -> Result<WorkerPort> {
    let opened =
        AfXdpPort::open(interface, config, umem, pool).with_context(|| format!("port {name}"))?;
    Ok(afxdp_worker_port(opened, name))
}

/// An opened AF_XDP port as its worker holds it: it receives from every queue it opened and
/// transmits on the first.
fn afxdp_worker_port(opened: AfXdpPort, name: &str) -> WorkerPort {
    let rx_queues: Vec<_> = opened.open_queues().collect();
    let tx_queue = rx_queues.first().copied().unwrap_or(0);
    WorkerPort {
        port: Box::new(Named::new(opened, name)),
        rx_queues,
        tx_queue,
    }
}

/// A port under the name the configuration gives it. AF_XDP ports are named after their
/// interface; the operator names them in the config (`p0`), and `wirespeed ctl` (`output:p0`,
/// `neighbour add ... p1`, `show ports`) must use the same names as every other backend.
/// Static dispatch to the port inside: nothing is added per batch but the call itself.
struct Named<P> {
    port: P,
    info: PortInfo,
}

impl<P: Port> Named<P> {
    fn new(port: P, name: &str) -> Self {
        let info = Self::new_info(&port, name);
        Named { port, info }
    }

    /// `port`'s info under `name`.
    fn new_info(port: &P, name: &str) -> PortInfo {
        PortInfo {
            name: name.to_string(),
            ..port.info().clone()
        }
    }
}

impl<P: Port> Port for Named<P> {
    fn info(&self) -> &PortInfo {
        &self.info
    }

    fn rx(&mut self, queue: QueueId, pool: &mut FramePool, batch: &mut Batch) -> usize {
        self.port.rx(queue, pool, batch)
    }

    fn tx(&mut self, queue: QueueId, pool: &mut FramePool, batch: &mut Batch) -> usize {
        self.port.tx(queue, pool, batch)
    }

    fn tx_room(&mut self, queue: QueueId, pool: &mut FramePool, want: usize) -> usize {
        self.port.tx_room(queue, pool, want)
    }

    fn poll(&mut self, pool: &mut FramePool) {
        self.port.poll(pool);
        // The port found its link changed (its interface gone, say): its info says so, and so
        // must this copy of it, which `ctl show ports` reads. One comparison per poll.
        if self.port.info().link_up != self.info.link_up {
            self.info = Self::new_info(&self.port, &self.info.name);
        }
    }

    fn tx_departed(&self) -> u64 {
        self.port.tx_departed()
    }

    /// Passed through: a worker would otherwise sleep while its AF_XDP port still holds frames
    /// for the kernel to transmit (copy mode takes at most 32 per kick).
    fn tx_backlog(&mut self) -> bool {
        self.port.tx_backlog()
    }

    fn rx_fd(&self, queue: QueueId) -> Option<std::os::fd::RawFd> {
        self.port.rx_fd(queue)
    }

    fn at_end(&self) -> bool {
        self.port.at_end()
    }

    fn fault(&self) -> Option<String> {
        self.port.fault()
    }

    fn descriptor_failed(&mut self, queue: QueueId) {
        self.port.descriptor_failed(queue)
    }

    fn frames_held(&self) -> usize {
        self.port.frames_held()
    }

    fn release_all(&mut self, pool: &mut FramePool) {
        self.port.release_all(pool);
    }

    fn stats(&self) -> PortStats {
        self.port.stats()
    }
}

/// AF_PACKET: one fanout member per worker; worker *w* owns member *w*.
/// Opens `worker`'s queue of an AF_PACKET port; `rings` is the RX ring's layout and the TX
/// ring's slots (the backend's default where `None`).
fn open_afpacket(
    name: &str,
    interface: &str,
    rings: (RxRingKind, Option<u32>),
    frame_size: u32,
    worker: usize,
    workers: usize,
) -> Result<WorkerPort> {
    let (worker, workers) = (worker as u16, workers as u16);
    let (rx_ring, tx_slots) = rings;
    let default = AfPacketConfig::default();
    let config = AfPacketConfig {
        rx_ring,
        tx_slots: tx_slots.unwrap_or(default.tx_slots),
        frame_size,
        queues: workers,
        promiscuous: true,
        ..default
    };
    let opened = AfPacketPort::open_queues(name, interface, &config, worker..worker + 1)
        .with_context(|| format!("port {name}"))?;
    Ok(WorkerPort {
        port: Box::new(opened),
        rx_queues: vec![worker],
        tx_queue: worker,
    })
}

#[cfg(test)]
mod tests {
    use wirespeed_dataplane::app::openflow::Action;
    use wirespeed_dataplane::app::openflow::group::GroupKind;

    use super::*;

    /// The file's groups are in the app before its flows, which send to them.
    #[test]
    fn the_files_groups_are_installed_before_its_flows() {
        let text = "[switch]\napp = \"openflow\"\n\n\
            [[port]]\nname = \"p0\"\nbackend = \"pcap\"\nrx = \"in.pcap\"\n\n\
            [[port]]\nname = \"p1\"\nbackend = \"pcap\"\ntx = \"out.pcap\"\n\n\
            [openflow]\ntables = 1\n\n\
            [[openflow.group]]\nid = 2\ntype = \"indirect\"\nbuckets = [\"output:p1\"]\n\n\
            [[openflow.group]]\nid = 1\ntype = \"all\"\nbuckets = [\"output:p1\", \"group:2\"]\n\n\
            [[openflow.flow]]\nactions = \"group:1\"\n";
        let config = wirespeed_control::config::parse("of.toml", text).unwrap();
        let AppConfig::OpenFlow(openflow) = &config.app else {
            panic!("not openflow")
        };
        let mut app = openflow_app(&config, openflow).unwrap();
        assert_eq!(app.groups().get(1).unwrap().kind, GroupKind::All);
        assert_eq!(app.groups().get(2).unwrap().buckets.len(), 1);
        assert_eq!(app.flows()[0].entry.actions, [Action::Group(1)]);
    }
}
