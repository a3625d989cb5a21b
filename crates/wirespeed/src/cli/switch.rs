//! `wirespeed switch --config FILE`: run the configured app until Ctrl-C.
//!
//! Everything is checked and opened before any worker starts: a config error, a missing
//! interface or a queue the device does not have stops the command with nothing running.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use clap::Args;
use wirespeed_control::config::{BackendConfig, Realtime};
use wirespeed_control::dispatch::{COMMAND_TIMEOUT, Dispatcher};
use wirespeed_control::openflow::connection::Timers;
use wirespeed_control::openflow::{Agent, Rings, SwitchInfo};
use wirespeed_control::reload::Reloader;
use wirespeed_control::socket::{ControlSocket, Limits, SocketError};
use wirespeed_dataplane::command;
use wirespeed_dataplane::worker::{Conservation, StatsCell, Worker, WorkerSnapshot};
use wirespeed_fastpath::FastPath;
use wirespeed_io::Backend;

use super::{build, metrics, numbers, privileges, reload, stats};

#[derive(Args)]
pub struct SwitchArgs {
    /// The configuration file (TOML; see docs/configuration.md).
    #[arg(long)]
    config: PathBuf,
    /// Print a line of rates every this many seconds (0.1..=86400).
    #[arg(long, value_parser = numbers::real(0.1, numbers::SECONDS.1))]
    stats_interval: Option<f64>,
    /// Serve Prometheus metrics at http://ADDR:PORT/metrics (e.g. 127.0.0.1:9417), instead of
    /// where `[metrics] listen` says; see docs/operations.md for the metrics.
    #[arg(long, value_name = "ADDR:PORT")]
    metrics: Option<std::net::SocketAddr>,
}

/// Moves this thread, and so every thread it starts but the workers (which pin themselves), off
/// the workers' cores when others remain: the control socket, the OpenFlow agent, the metrics
/// server and reloads then never take a worker's core, or that of the kernel thread feeding it.
/// On a kernel without preemption a real-time thread waits while another is in a system call on
/// its core: traced beside the XDP fast path, the switch's control thread held the core of
/// `d0`'s NAPI thread for up to 1.9 ms, longer than its 256-frame ring lasts at 0.3 Mpps. As
/// DPDK's and VPP's main threads, these threads run elsewhere; with no other core they stay.
fn keep_off_worker_cores(workers: &[usize]) {
    let Ok(allowed) = wirespeed_io::thread::allowed_cores() else {
        return;
    };
    let others: Vec<usize> = allowed
        .iter()
        .copied()
        .filter(|core| !workers.contains(core))
        .collect();
    if others.is_empty() || others.len() == allowed.len() {
        return;
    }
    match wirespeed_io::thread::set_thread_affinity(0, &others) {
        Ok(()) => println!(
            "control threads: core(s) {}, off the workers'",
            wirespeed_io::thread::cpu_list(&others)
        ),
        Err(error) => println!("control threads: left on every core ({error})"),
    }
}

pub fn run(args: SwitchArgs) -> Result<()> {
    let hangups = reload::Hangups::catch()?;
    let config = wirespeed_control::config::load(&args.config).map_err(anyhow::Error::msg)?;
    privileges::check(&config)?;
    keep_off_worker_cores(&config.switch.cores);
    // Building can take a while (4194304 frames are 8 GiB to map and touch, a walk of GiBs
    // to link), so say what it does. Until the workers run, Ctrl-C (or SIGTERM) ends the
    // process at once, and the kernel detaches what was attached (BPF links close with their
    // descriptors) and frees the memory. A handler, not the default action: a switch started
    // in the background by a script inherits SIGINT ignored, and was then deaf to it until its
    // workers ran.
    let starting = Arc::new(AtomicBool::new(true));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register_conditional_shutdown(signal, 130, Arc::clone(&starting))
            .context("installing the start-up signal handler")?;
    }
    println!("{}", starting_line(&config));
    let build::Built {
        mut workers,
        fast_path,
        rings,
    } = build::workers(&config)?;
    let kept = privileges::Kept::for_switch(fast_path.fast_path.is_some());
    // Dropped after the workers stop: the socket file goes away with the switch.
    let (_control, dispatcher) = match &config.switch.control_socket {
        Some(path) => {
            let (socket, dispatcher) = control_socket(
                path,
                kept,
                &mut workers,
                &config.app,
                Reloader::new(args.config.clone(), config.clone()),
                super::fast_path::View::new(
                    &fast_path,
                    &config
                        .ports
                        .iter()
                        .map(|port| port.name.clone())
                        .collect::<Vec<_>>(),
                ),
            )?;
            (Some(socket), Some(dispatcher))
        }
        None => (None, None),
    };
    // Stopped (dropped) before the control socket closes.
    let _openflow = openflow_agent(&config, dispatcher.as_ref(), kept, rings)?;
    let _reload = reload::OnHangup::start(hangups, dispatcher, kept)?;
    for worker in &workers {
        for port in worker.ports() {
            let info = port.info();
            println!(
                "port {} ({}): {}",
                info.name,
                info.backend.name(),
                info.mode
            );
        }
    }
    for line in &fast_path.lines {
        println!("{line}");
    }
    let placement = Placement {
        cores: config.switch.cores.clone(),
        realtime: workers
            .iter()
            .map(|worker| priority(config.switch.realtime, worker))
            .collect(),
    };
    for (worker, priority) in workers.iter_mut().zip(&placement.realtime) {
        if matches!(priority, Priority::Fifo | Priority::AutoFifo) {
            worker.sleep_at_first_empty_poll();
        }
    }
    for (index, priority) in placement.realtime.iter().enumerate() {
        let core = placement
            .cores
            .get(index)
            .map_or("any core".to_string(), |core| format!("core {core}"));
        println!("worker {index}: {core}, {}", priority.describe());
    }
    let stop = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(signal, Arc::clone(&stop))
            .context("installing signal handler")?;
    }
    // From here Ctrl-C asks the workers to stop (the flag above) instead of ending at once.
    starting.store(false, Ordering::SeqCst);
    println!("{}", kept.describe());
    println!("forwarding with {} worker(s); Ctrl-C stops", workers.len());
    let interval = args.stats_interval.map(Duration::from_secs_f64);
    let cells: Vec<Arc<StatsCell>> = workers.iter().map(|_| Arc::default()).collect();
    // Stopped (its thread joined) when it drops, after the workers.
    let _metrics = match args.metrics.or(config.metrics) {
        Some(addr) => {
            let source = metrics::Source {
                cells: cells.clone(),
                fast_path: fast_path.fast_path.clone(),
            };
            let server = metrics::MetricsServer::start(addr, source, kept)?;
            println!("metrics at http://{addr}/metrics");
            Some(server)
        }
        None => None,
    };
    let (snapshots, conservation, faults) = run_workers(
        workers,
        cells,
        &placement,
        kept,
        &stop,
        interval,
        fast_path.fast_path.as_deref(),
    )?;
    println!("\n{}", stats::final_tables(&snapshots));
    if let Some(fast_path) = &fast_path.fast_path {
        println!("{}", stats::fast_path_table(fast_path));
    }
    print!("{}", conservation_report(&conservation)?);
    // A capture that could not be written (or read to its end) is a failed run, not a
    // finished one.
    anyhow::ensure!(faults.is_empty(), "stopped early: {}", faults.join("; "));
    Ok(())
}

/// "starting N worker(s), each with a pool of F frames of S B (M MiB)[ and a walk over W
/// MiB]; Ctrl-C stops".
fn starting_line(config: &wirespeed_control::config::Config) -> String {
    let switch = &config.switch;
    let mib = |bytes: u64| bytes.div_ceil(1 << 20);
    let walk = match config.task.walk_bytes {
        0 => String::new(),
        bytes => format!(" and a walk over {} MiB", mib(bytes)),
    };
    format!(
        "starting {} worker(s), each with a pool of {} frames of {} B ({} MiB){walk}; Ctrl-C \
         stops",
        switch.workers,
        switch.frames,
        switch.frame_size,
        mib(u64::from(switch.frames) * u64::from(switch.frame_size)),
    )
}

/// Gives every worker a command channel and serves them on the control socket at `path`, from
/// a thread that holds only the capabilities `kept`; the dispatcher is returned too, for
/// SIGHUP's reloads.
fn control_socket(
    path: &std::path::Path,
    kept: privileges::Kept,
    workers: &mut [Worker],
    app: &wirespeed_control::config::AppConfig,
    reloader: Reloader,
    fast_path: super::fast_path::View,
) -> Result<(ControlSocket, Arc<Dispatcher>)> {
    let ends = workers
        .iter_mut()
        .map(|worker| {
            let (control, end) = command::channel(command::RING_CAPACITY);
            worker.attach_commands(end);
            control
        })
        .collect();
    let dispatcher = Arc::new(
        Dispatcher::new(ends, COMMAND_TIMEOUT)
            .with_fast_path(Box::new(fast_path))
            .with_app(app)
            .with_reloader(reloader),
    );
    let owned = path.to_path_buf();
    let socket = ControlSocket::bind_then(path, Limits::default(), dispatcher.clone(), move || {
        kept.drop_the_rest().map_err(|error| SocketError::Setup {
            path: owned,
            message: error.to_string(),
            fix: error.fix().into(),
        })
    })
    .map_err(|e| anyhow::anyhow!("{e}\n  fix: {}", e.fix()))?;
    println!(
        "control socket {} (`wirespeed ctl --socket {} help`)",
        path.display(),
        path.display()
    );
    Ok((socket, dispatcher))
}

/// Starts the OpenFlow agent when `[openflow]` configures one. It reaches the app through the
/// control socket's dispatcher, as `wirespeed ctl` does, so it needs the socket.
fn openflow_agent(
    config: &wirespeed_control::config::Config,
    dispatcher: Option<&Arc<Dispatcher>>,
    kept: privileges::Kept,
    rings: Rings,
) -> Result<Option<Agent>> {
    let wirespeed_control::config::AppConfig::OpenFlow(openflow) = &config.app else {
        return Ok(None);
    };
    let Some(agent) = &openflow.agent else {
        return Ok(None);
    };
    let Some(dispatcher) = dispatcher else {
        anyhow::bail!(
            "[openflow] configures an OpenFlow agent, which reaches the app through the control \
             socket\n  fix: remove control_socket = \"\" from [switch] or the agent's keys from \
             [openflow]"
        );
    };
    let info = SwitchInfo {
        handler: dispatcher.clone(),
        ports: config.ports.iter().map(|port| port.name.clone()).collect(),
        interfaces: config
            .ports
            .iter()
            .map(|port| match &port.backend {
                BackendConfig::AfXdp { interface, .. }
                | BackendConfig::AfPacket { interface, .. } => Some(interface.clone()),
                BackendConfig::Pcap { .. } => None,
            })
            .collect(),
        tables: openflow.tables,
        flows_per_table: u32::try_from(openflow.flows_per_table).unwrap_or(u32::MAX),
        rings,
    };
    let setup = move || {
        kept.drop_the_rest()
            .map_err(|e| std::io::Error::other(e.to_string()))
    };
    let started = Agent::start(agent.clone(), info, Timers::default(), setup)?;
    dispatcher.set_openflow(started.view());
    let listen = started
        .local_addr()
        .map_or("nowhere".to_string(), |addr| addr.to_string());
    let controllers: Vec<String> = agent.controllers.iter().map(ToString::to_string).collect();
    println!(
        "openflow agent: datapath {:#018x}, listening on {listen}, controllers: [{}]",
        agent.datapath_id,
        controllers.join(", ")
    );
    Ok(Some(started))
}

/// Where worker threads run.
#[derive(Clone, Debug, Default)]
pub struct Placement {
    /// Core of worker i, if pinned.
    pub cores: Vec<usize>,
    /// The scheduling of worker i (normal priority where missing).
    pub realtime: Vec<Priority>,
}

/// A worker's scheduling priority and why it was chosen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Priority {
    /// SCHED_FIFO 1 because the config says so: failing to get it is an error.
    Fifo,
    /// SCHED_FIFO 1 chosen by `realtime = "auto"` (every port an AF_XDP or AF_PACKET socket):
    /// failing to get it is reported and the worker runs at normal priority.
    AutoFifo,
    /// Normal priority because the config says so.
    Normal,
    /// Normal priority chosen by `realtime = "auto"` (a capture file port, which never waits
    /// for the kernel).
    AutoNormal,
}

impl Priority {
    fn describe(self) -> &'static str {
        match self {
            Priority::Fifo => "SCHED_FIFO 1 (realtime = true; sleeps at the first empty poll)",
            Priority::AutoFifo => {
                "SCHED_FIFO 1 (realtime = \"auto\": socket ports; the worker drains its rings \
                 before the kernel's NAPI thread on the same core refills them, and sleeps \
                 at the first empty poll)"
            }
            Priority::Normal => "normal priority (realtime = false)",
            Priority::AutoNormal => {
                "normal priority (realtime = \"auto\": a capture file port, which a worker at \
                 FIFO would read without ever yielding the core)"
            }
        }
    }
}

/// The priority `setting` gives `worker`.
fn priority(setting: Realtime, worker: &Worker) -> Priority {
    match setting {
        Realtime::On => Priority::Fifo,
        Realtime::Off => Priority::Normal,
        Realtime::Auto => {
            // Measured in the lab with the ingress NAPI thread on the worker's core, under
            // overload: at normal priority an AF_XDP worker forwards 0.007 Mpps, at FIFO
            // 0.33-0.45; an AF_PACKET worker 0.012 and 0.20-0.23 (docs/benchmarks.md).
            let ports = worker.ports();
            let all_sockets = !ports.is_empty()
                && ports
                    .iter()
                    .all(|port| matches!(port.info().backend, Backend::AfXdp | Backend::AfPacket));
            if all_sockets {
                Priority::AutoFifo
            } else {
                Priority::AutoNormal
            }
        }
    }
}

/// Runs every worker on its own thread until `stop`, printing a rate line every `interval`
/// (frames the fast path forwarded included); returns each worker's last counters, its pool
/// conservation, and what stopped a port early ([`Worker::faults`]). Worker *i* publishes its
/// snapshot into `cells[i]` (which the metrics endpoint reads too). Each worker, once placed,
/// and the calling thread, once the workers started, keep only the capabilities `kept`.
pub fn run_workers(
    workers: Vec<Worker>,
    cells: Vec<Arc<StatsCell>>,
    placement: &Placement,
    kept: privileges::Kept,
    stop: &Arc<AtomicBool>,
    interval: Option<Duration>,
    fast_path: Option<&FastPath>,
) -> Result<(Vec<WorkerSnapshot>, Vec<Conservation>, Vec<String>)> {
    anyhow::ensure!(cells.len() == workers.len(), "one stats cell per worker");
    let mut handles = Vec::new();
    for (index, mut worker) in workers.into_iter().enumerate() {
        let (cell, stop) = (Arc::clone(&cells[index]), Arc::clone(stop));
        let core = placement.cores.get(index).copied();
        let priority = placement
            .realtime
            .get(index)
            .copied()
            .unwrap_or(Priority::Normal);
        let handle = std::thread::Builder::new()
            .name(format!("worker-{index}"))
            .spawn(move || -> Result<(Conservation, Vec<String>)> {
                if let Some(core) = core {
                    wirespeed_io::thread::pin_to_core(core)
                        .with_context(|| format!("pinning worker {index} to core {core}"))?;
                }
                match priority {
                    Priority::Fifo => {
                        wirespeed_io::thread::set_fifo_priority(1).with_context(|| {
                            format!(
                                "SCHED_FIFO for worker {index} (needs CAP_SYS_NICE or an \
                                 RLIMIT_RTPRIO of 1)"
                            )
                        })?
                    }
                    Priority::AutoFifo => {
                        if let Err(error) = wirespeed_io::thread::set_fifo_priority(1) {
                            eprintln!(
                                "worker {index}: SCHED_FIFO refused ({error}); running at \
                                 normal priority (grant CAP_SYS_NICE, or set realtime = false)"
                            );
                        }
                    }
                    Priority::Normal | Priority::AutoNormal => {}
                }
                kept.drop_the_rest()
                    .map_err(|error| error.in_thread(format_args!("worker {index}")))?;
                worker.run(&stop, &cell);
                let conservation = worker.shutdown();
                worker.publish(&cell, true);
                Ok((conservation, worker.faults()))
            })
            .context("starting a worker thread")?;
        handles.push(handle);
    }
    // A main thread that could not drop its capabilities stops the workers it started.
    let dropped = kept
        .drop_the_rest()
        .map_err(|error| error.in_thread("the main thread"));
    if dropped.is_err() {
        stop.store(true, Ordering::Relaxed);
    }
    let snapshot = |cells: &[Arc<StatsCell>]| -> Vec<WorkerSnapshot> {
        cells
            .iter()
            .map(|c| c.lock().map(|s| s.clone()).unwrap_or_default())
            .collect()
    };
    let mut before = stats::Totals::default();
    let mut last = Instant::now();
    // Faults already said: a port whose interface was deleted is said once, when it happens.
    let mut said: Vec<String> = Vec::new();
    while !stop.load(Ordering::Relaxed) && !handles.iter().all(|h| h.is_finished()) {
        std::thread::sleep(Duration::from_millis(50));
        for fault in snapshot(&cells).into_iter().flat_map(|s| s.faults) {
            if !said.contains(&fault) {
                eprintln!("{fault}");
                said.push(fault);
            }
        }
        if let Some(interval) = interval
            && last.elapsed() >= interval
        {
            let now = stats::totals(&snapshot(&cells), fast_path);
            println!(
                "{}",
                stats::interval_line(&now, &before, last.elapsed().as_secs_f64())
            );
            (before, last) = (now, Instant::now());
        }
    }
    stop.store(true, Ordering::Relaxed);
    let mut conservation = Vec::new();
    let mut faults = Vec::new();
    for handle in handles {
        let (pool, worker_faults) = handle
            .join()
            .map_err(|_| anyhow::anyhow!("a worker thread panicked"))??;
        conservation.push(pool);
        faults.extend(worker_faults);
    }
    dropped?;
    Ok((snapshot(&cells), conservation, faults))
}

/// The pool check of every worker, one line each; an error if a frame was lost.
pub fn conservation_report(conservation: &[Conservation]) -> Result<String> {
    let mut out = String::new();
    for (index, c) in conservation.iter().enumerate() {
        out.push_str(&format!(
            "worker {index} pool: {} of {} frames free, {} missing, {} double releases{}\n",
            c.free,
            c.total,
            c.missing,
            c.double_releases,
            if c.holds() {
                " (conservation holds)"
            } else {
                ""
            }
        ));
    }
    anyhow::ensure!(
        conservation.iter().all(Conservation::holds),
        "{out}frames were leaked or double-freed"
    );
    Ok(out)
}
