//! Turning a validated configuration into workers with open ports.
//!
//! Every port of every worker is opened before any worker runs; the first failure drops what was
//! already opened (closing sockets, detaching programs) and is returned with the port's name.

use anyhow::{Context, Result};
use wirespeed_control::config::XdpMode as XdpModeConfig;
use wirespeed_control::config::{AppConfig, BackendConfig, Config, PortConfig};
use wirespeed_dataplane::app::{App, Xconnect};
use wirespeed_dataplane::stage::Task;
use wirespeed_dataplane::worker::{Idle, Worker, WorkerConfig, WorkerPort};
use wirespeed_io::afpacket::{AfPacketConfig, AfPacketPort};
use wirespeed_io::afxdp::{AfXdpConfig, AfXdpPort, QueueSelection, Umem, XdpMode};
use wirespeed_io::pcap::PcapPort;
use wirespeed_packet::FramePool;
use wirespeed_packet::cpu::tsc_hz;

/// Builds the workers the configuration describes.
pub fn workers(config: &Config) -> Result<Vec<Worker>> {
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
    anyhow::ensure!(
        config.switch.workers == 1
            || config
                .ports
                .iter()
                .all(|p| !matches!(p.backend, BackendConfig::AfXdp { .. })),
        "AF_XDP ports serve one worker in this version (the XDP program of an interface is not \
         yet shared between workers); set workers = 1 or use afpacket ports"
    );
    let mut workers = Vec::new();
    for index in 0..config.switch.workers {
        let mut pool = FramePool::new(config.switch.frames, config.switch.frame_size)
            .with_context(|| format!("frame pool of worker {index}"))?;
        // One UMEM per worker, shared by all its AF_XDP ports: a frame received on one leaves
        // by another without a copy.
        let umem = Umem::new(&pool);
        let mut ports = Vec::new();
        for port in &config.ports {
            ports.push(open(config, port, index, &mut pool, &umem)?);
        }
        workers.push(Worker::new(
            worker_config.clone(),
            pool,
            ports,
            app(config, index as u64),
        ));
    }
    Ok(workers)
}

fn app(config: &Config, seed: u64) -> Box<dyn App> {
    let task = Task::new(
        config.task.spin_cycles as u64,
        config.task.walk_bytes,
        seed + 1,
    );
    match &config.app {
        AppConfig::Xconnect { pairs } => {
            let pairs: Vec<(u16, u16)> = pairs.iter().map(|&(a, b)| (a as u16, b as u16)).collect();
            Box::new(Xconnect::new(&pairs, Some(task)))
        }
    }
}

/// A backend that drives a kernel network interface.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum KernelBackend {
    Afxdp,
    Afpacket,
}

/// Opens `port` for worker `worker`: the worker's share of the port's queues.
fn open(
    config: &Config,
    port: &PortConfig,
    worker: usize,
    pool: &mut FramePool,
    umem: &Umem,
) -> Result<WorkerPort> {
    match &port.backend {
        BackendConfig::Pcap { rx, tx } => {
            let opened = PcapPort::open(&port.name, rx.as_deref(), tx.as_deref())
                .with_context(|| format!("port {}", port.name))?;
            let rx_queues = if rx.is_some() { vec![0] } else { vec![] };
            Ok(WorkerPort {
                port: Box::new(opened),
                rx_queues,
                tx_queue: 0,
            })
        }
        BackendConfig::AfPacket { interface } => {
            let workers = config.switch.workers;
            open_afpacket(
                &port.name,
                interface,
                config.switch.frame_size,
                worker,
                workers,
            )
        }
        BackendConfig::AfXdp {
            interface,
            queues,
            zero_copy,
            xdp_mode,
        } => {
            let afxdp = AfXdpConfig {
                queues: queues
                    .clone()
                    .map_or(QueueSelection::All, QueueSelection::List),
                zero_copy: *zero_copy,
                xdp_mode: match xdp_mode {
                    XdpModeConfig::Auto => XdpMode::Auto,
                    XdpModeConfig::Native => XdpMode::Native,
                    XdpModeConfig::Generic => XdpMode::Generic,
                },
                ..AfXdpConfig::default()
            };
            open_afxdp(&port.name, interface, &afxdp, pool, umem)
        }
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
        KernelBackend::Afpacket => open_afpacket(name, interface, pool.frame_size(), 0, 1),
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
    let rx_queues: Vec<_> = opened.open_queues().collect();
    let tx_queue = rx_queues.first().copied().unwrap_or(0);
    Ok(WorkerPort {
        port: Box::new(opened),
        rx_queues,
        tx_queue,
    })
}

/// AF_PACKET: one fanout member per worker; worker *w* owns member *w*.
fn open_afpacket(
    name: &str,
    interface: &str,
    frame_size: u32,
    worker: usize,
    workers: usize,
) -> Result<WorkerPort> {
    let (worker, workers) = (worker as u16, workers as u16);
    let config = AfPacketConfig {
        frame_size,
        queues: workers,
        promiscuous: true,
        ..AfPacketConfig::default()
    };
    let opened = AfPacketPort::open_queues(name, interface, &config, worker..worker + 1)
        .with_context(|| format!("port {name}"))?;
    Ok(WorkerPort {
        port: Box::new(opened),
        rx_queues: vec![worker],
        tx_queue: worker,
    })
}
