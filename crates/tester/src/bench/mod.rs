//! The forwarding benchmark: several DuTs measured side by side in one lab, one core each, with
//! the same placement of every thread (see [`placement`]).
//!
//! A trial sets one DuT up, proves with a probe that it forwards, applies and reads back the
//! placement, then blasts 64-byte frames from `t0` as fast as the generator can for N seconds
//! and counts what arrives on `t1`: the received rate is the DuT's forwarding rate. Trials are
//! interleaved (A B C A B C ...) so that a slow drift of the machine (another job, thermal state)
//! spreads over every DuT instead of biasing one; each (DuT, flow count) gets the median and the
//! range of its runs.
//!
//! **Who was the limit.** veth pushes back: when `d0`'s ring (256 frames) is full, `t0`'s queue
//! stops and the generator's AF_XDP transmissions wait. A DuT that cannot keep up therefore
//! mostly *slows the generator down* rather than losing frames, so low loss alone does not mean
//! the generator was the limit. Each run also measures the generator with no DuT at all (`d0`'s
//! NAPI thread, on the DuT core, drops the frames in its stack); the generator's ceiling at a flow
//! count is the highest rate it offered in any trial at that count (a DuT that drops in XDP takes
//! frames faster than that stack does). A result is *generator-limited* when the DuT lost under
//! 1 % of what it was offered and was offered at least 90 % of the ceiling; *DuT
//! (backpressure)* when it lost under 1 % but held the generator below that; *DuT (drops)* when
//! it lost 1 % or more. Frames the tester's own RX socket dropped are counted apart, and so are
//! the frames the DuT forwarded but `t1`'s full ring refused (`d1`'s `tx_dropped`, read in a
//! local DuT's namespace): with the receive on the DuT core (the default placement) the tester's
//! own receive can be what fills, and a result where it refused 1 % or more of what was offered
//! is *tester's receive*, a lower bound for the DuT, never *DuT (drops)* (measured against
//! xdp-tools: the Linux bridge forwarded 0.75 Mpps and `t1` took half of it).
//!
//! **Generators.** [`Generator::Afxdp`] sends over an AF_XDP socket on `t0` (copy mode: an skb
//! per frame) and receives on one on `t1`, in one thread. [`Generator::XdpLive`] sends from
//! inside the kernel (see [`crate::generator::live`]) and counts arrivals with the XDP counting
//! sink on `t1`. Two things change with it besides the sender's speed: `t1`'s NAPI (on the
//! receiver core, by default the DuT core) only counts and drops instead of copying every frame
//! into the tester's UMEM, so a DuT keeps more of its core; and veth does not push back on
//! frames sent by `ndo_xdp_xmit`: when `d0`'s ring is full they are dropped (counted in `t0`'s
//! `tx_dropped`), so a DuT that cannot keep up shows as *DuT (drops)* rather than as
//! backpressure, as behind a real NIC. [`Generator::XdpTools`] hands both ends to xdp-tools
//! (`xdp-trafficgen udp` on `t0`, `xdp-bench drop` on `t1`, see
//! [`crate::generator::xdp_tools`]): the same trials with a sender and a counter that share no
//! code with the tester, to check the tester's figures against.

pub mod generators;
pub mod placement;
pub mod shield;
pub mod sweep;
pub mod wakeups;

use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use wirespeed_io::Port;

use crate::dut::probe::{TesterPorts, verify};
use crate::dut::{Dut, IpVersion, Wiring};
use crate::generator::live::{self, LiveConfig};
use crate::generator::xdp_tools;
use crate::generator::{BlastConfig, BlastResult, Template, TemplateConfig, blast, prefill};
use placement::{Placed, Plan, place_kernel, place_process, place_this_thread};
use wirespeed_io::afxdp::{MAX_LIVE_BATCH, XdpMode, XdpSink};

/// The name under which the generator's ceiling trials are recorded.
pub const CEILING: &str = "generator-ceiling";

/// What to run.
#[derive(Clone, Debug)]
pub struct ForwardingConfig {
    /// Flow counts (UDP source ports) to measure each DuT with.
    pub flows: Vec<u32>,
    /// Trials per (DuT, flow count).
    pub runs: usize,
    /// Length of one trial.
    pub seconds: f64,
    /// Frame size including FCS.
    pub frame_size: u16,
    /// Generator TX batch.
    pub batch: usize,
    pub plan: Plan,
    /// Whether each run measures the generator's ceiling too.
    pub ceiling: bool,
    /// What sends and counts.
    pub generator: Generator,
    /// Frames per second to offer, evenly spaced; `None` for as fast as the generator sends.
    pub offered_pps: Option<f64>,
    /// Destinations the frames spread over (a router DuT with a large table), all of `ip`'s
    /// version; empty for the lab's one destination.
    pub destinations: Vec<IpAddr>,
    /// The frames' IP version.
    pub ip: IpVersion,
}

/// The tester's sender and receiver for the forwarding trials (see the module documentation).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Generator {
    /// AF_XDP sockets on `t0` and `t1`, one thread.
    #[default]
    Afxdp,
    /// The in-kernel live-frame sender on `t0`, the XDP counting sink on `t1`.
    XdpLive,
    /// xdp-tools' `xdp-trafficgen udp` on `t0` and `xdp-bench drop` on `t1`: the independent
    /// check.
    XdpTools,
}

impl Generator {
    pub fn name(self) -> &'static str {
        match self {
            Generator::Afxdp => "afxdp",
            Generator::XdpLive => "xdp-live",
            Generator::XdpTools => "xdp-tools",
        }
    }
}

impl Default for ForwardingConfig {
    fn default() -> Self {
        Self {
            flows: vec![1, 256],
            runs: 3,
            seconds: 5.0,
            frame_size: 64,
            batch: 64,
            plan: Plan::default(),
            ceiling: true,
            generator: Generator::default(),
            offered_pps: None,
            destinations: Vec::new(),
            ip: IpVersion::V4,
        }
    }
}

/// Counts of one trial.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Measurement {
    /// Frames the generator's TX port took.
    pub sent: u64,
    /// Frames the TX ring refused (the generator waited on the kernel).
    pub refused: u64,
    /// Frames that arrived on `t1`.
    pub received: u64,
    /// Seconds of sending.
    pub seconds: f64,
    /// Frames the kernel dropped on their way into the tester's receive socket on `t1` (its RX
    /// ring full or no free frame): losses of the tester, not of the DuT.
    pub tester_dropped: u64,
    /// Frames the DuT transmitted into `d1` that `t1`'s full ring refused (read in a local
    /// DuT's namespace; 0 elsewhere): forwarded by the DuT, lost at the tester's receive.
    pub receive_refused: u64,
}

impl Measurement {
    pub fn offered_pps(&self) -> f64 {
        rate(self.sent, self.seconds)
    }

    pub fn received_pps(&self) -> f64 {
        rate(self.received, self.seconds)
    }

    /// Share of what was offered that the DuT forwarded and the tester's receive refused.
    pub fn receive_refused_share(&self) -> f64 {
        if self.sent == 0 {
            return 0.0;
        }
        self.receive_refused as f64 / self.sent as f64
    }

    /// Share of what was offered that did not arrive (never negative: the lab kernels' own
    /// frames arriving on `t1` are counted too and can exceed the loss by a few).
    pub fn loss(&self) -> f64 {
        if self.sent == 0 {
            return 0.0;
        }
        (1.0 - self.received as f64 / self.sent as f64).max(0.0)
    }
}

fn rate(count: u64, seconds: f64) -> f64 {
    if seconds > 0.0 {
        count as f64 / seconds
    } else {
        0.0
    }
}

impl From<BlastResult> for Measurement {
    fn from(result: BlastResult) -> Self {
        Self {
            sent: result.sent,
            refused: result.refused,
            received: result.received,
            seconds: result.seconds,
            tester_dropped: 0,
            receive_refused: 0,
        }
    }
}

/// One trial as it happened.
#[derive(Clone, Debug)]
pub struct TrialRecord {
    pub dut: String,
    pub flows: u32,
    /// 0-based run index.
    pub run: usize,
    /// The counts, or why the trial failed (naming the DuT and the step).
    pub outcome: Result<Measurement, String>,
    /// Every thread placed for the trial, as read back.
    pub placement: Vec<Placed>,
    /// Commands the trial ran (DuT setup and teardown, placement).
    pub commands: Vec<String>,
}

/// Runs every DuT `config.runs` times for every flow count, interleaved, and returns every
/// trial. Stops early (after tearing the current DuT down) when `stop` is set. `progress` is
/// told about each trial as it ends.
pub fn run_forwarding(
    wiring: &Wiring,
    duts: &mut [Box<dyn Dut>],
    config: &ForwardingConfig,
    stop: &AtomicBool,
    progress: &mut dyn FnMut(&TrialRecord),
) -> Vec<TrialRecord> {
    let mut records = Vec::new();
    for run in 0..config.runs {
        for &flows in &config.flows {
            if config.ceiling {
                if stop.load(Ordering::Relaxed) {
                    return records;
                }
                let record = interrupted(ceiling_trial(wiring, config, flows, run, stop), stop);
                progress(&record);
                records.push(record);
            }
            for dut in duts.iter_mut() {
                if stop.load(Ordering::Relaxed) {
                    return records;
                }
                let record =
                    interrupted(trial(dut.as_mut(), wiring, config, flows, run, stop), stop);
                progress(&record);
                records.push(record);
            }
        }
    }
    records
}

/// A trial during which `stop` was set was cut short: its counts are not a result.
fn interrupted(mut record: TrialRecord, stop: &AtomicBool) -> TrialRecord {
    if stop.load(Ordering::Relaxed) && record.outcome.is_ok() {
        record.outcome = Err(format!(
            "{}: interrupted before the trial ended",
            record.dut
        ));
    }
    record
}

/// One trial of one DuT: setup, verify, place, measure, teardown (always).
pub fn trial(
    dut: &mut dyn Dut,
    wiring: &Wiring,
    config: &ForwardingConfig,
    flows: u32,
    run: usize,
    stop: &AtomicBool,
) -> TrialRecord {
    let logged = dut.commands().len();
    let mut placement = Vec::new();
    let mut commands = Vec::new();
    let outcome = measure_dut(
        dut,
        wiring,
        config,
        flows,
        stop,
        &mut placement,
        &mut commands,
    );
    let torn = dut.teardown().map_err(|error| error.to_string());
    let mut all = dut.commands().get(logged..).unwrap_or_default().to_vec();
    all.extend(commands);
    TrialRecord {
        dut: dut.name(),
        flows,
        run,
        outcome: outcome.and_then(|m| torn.map(|()| m)),
        placement,
        commands: all,
    }
}

fn measure_dut(
    dut: &mut dyn Dut,
    wiring: &Wiring,
    config: &ForwardingConfig,
    flows: u32,
    stop: &AtomicBool,
    placement: &mut Vec<Placed>,
    commands: &mut Vec<String>,
) -> Result<Measurement, String> {
    dut.setup(wiring).map_err(|error| error.to_string())?;
    verify(dut, wiring, 1, Duration::from_secs(10)).map_err(|error| error.to_string())?;
    let plan = &config.plan;
    placement.extend(place_kernel(wiring, plan, commands).map_err(|e| e.to_string())?);
    if let Some(pid) = dut.pid() {
        placement.extend(
            place_process(pid, dut.worker_prefix(), plan.dut_cpu, plan.nice, commands)
                .map_err(|e| e.to_string())?,
        );
    }
    let template = template(wiring, dut.destination_mac(wiring), config, flows)?;
    let refused_before = receive_refused(wiring)?;
    let (mut measurement, generator) = generate(wiring, &template, config, LINGER, stop, commands)?;
    measurement.receive_refused = receive_refused(wiring)?.saturating_sub(refused_before);
    placement.extend(generator);
    dut.check().map_err(|error| error.to_string())?;
    Ok(measurement)
}

/// Frames `d1` could not hand to `t1` because `t1`'s ring was full, so far: `d1`'s
/// `tx_dropped`. A veth counts there both the frames it sent as skbs that the peer's ring
/// refused (the stack's, AF_PACKET's, copy-mode AF_XDP's) and those redirected to it in XDP that
/// the peer refused (the `tx_queue_*_xdp_xmit_errors` of `ethtool -S`, which are the same
/// frames again and must not be added). 0 where the DuT's namespace is not this machine's.
fn receive_refused(wiring: &Wiring) -> Result<u64, String> {
    if !matches!(wiring.dut_host, Some(crate::dut::Host::Local)) {
        return Ok(0);
    }
    let (ns, d1) = (&wiring.dut_ns, &wiring.egress.dut_if);
    Ok(crate::trial::InterfaceCounters::read(ns, d1)?.tx_dropped)
}

fn ceiling_trial(
    wiring: &Wiring,
    config: &ForwardingConfig,
    flows: u32,
    run: usize,
    stop: &AtomicBool,
) -> TrialRecord {
    let mut placement = Vec::new();
    let mut commands = Vec::new();
    let outcome = place_kernel(wiring, &config.plan, &mut commands)
        .map_err(|error| error.to_string())
        .and_then(|placed| {
            placement.extend(placed);
            let template = template(wiring, wiring.egress.tester_mac, config, flows)?;
            let (measurement, generator) =
                generate(wiring, &template, config, LINGER, stop, &mut commands)?;
            placement.extend(generator);
            Ok(measurement)
        });
    TrialRecord {
        dut: CEILING.into(),
        flows,
        run,
        outcome,
        placement,
        commands,
    }
}

fn template(
    wiring: &Wiring,
    dst_mac: [u8; 6],
    config: &ForwardingConfig,
    flows: u32,
) -> Result<Template, String> {
    let (src_ip, dst_ip) = config.ip.addresses(wiring);
    Template::new(&TemplateConfig {
        frame_size: config.frame_size,
        src_mac: wiring.ingress.tester_mac,
        dst_mac,
        src_ip,
        dst_ip,
        flows,
        ..TemplateConfig::default()
    })
    .and_then(|template| match config.destinations.as_slice() {
        [] => Ok(template),
        spread => template.with_spread(spread),
    })
    .map_err(|error| error.to_string())
}

/// How long the forwarding trials keep counting arrivals after the generator stops (frames
/// still inside the DuT).
const LINGER: Duration = Duration::from_millis(200);

/// Blasts `template` from `t0` and counts on `t1` while it sends and for `linger` after, in a
/// thread pinned to the generator core that opened its ports in the tester namespace; returns
/// the counts and the sending threads as placed (with xdp-tools, the program's, whose command
/// lines go to `commands`).
pub(crate) fn generate(
    wiring: &Wiring,
    template: &Template,
    config: &ForwardingConfig,
    linger: Duration,
    stop: &AtomicBool,
    commands: &mut Vec<String>,
) -> Result<(Measurement, Vec<Placed>), String> {
    let blast_config = BlastConfig {
        batch: config.batch,
        rate_pps: config.offered_pps,
        duration: Duration::from_secs_f64(config.seconds),
        linger,
        ..BlastConfig::default()
    };
    let cpu = config.plan.generator_cpu;
    if config.generator == Generator::XdpTools {
        return send_xdp_tools(wiring, template, config, linger, stop, commands);
    }
    std::thread::scope(|scope| {
        scope
            .spawn(|| -> Result<(Measurement, Vec<Placed>), String> {
                wirespeed_io::thread::pin_to_core(cpu)
                    .map_err(|error| format!("pinning the generator to CPU {cpu}: {error}"))?;
                let placed = place_this_thread("generator", config.plan.nice)
                    .map_err(|error| error.to_string())?;
                if placed.cpus != cpu.to_string() {
                    return Err(format!(
                        "the generator should run on CPU {cpu} but may run on {}",
                        placed.cpus
                    ));
                }
                if config.generator == Generator::XdpLive {
                    let measurement = send_live(wiring, template, config, linger, stop)?;
                    return Ok((measurement, vec![placed]));
                }
                let mut ports = TesterPorts::open(wiring, 16384)?;
                prefill(&mut ports.pool, template);
                let TesterPorts { t0, t1, pool, .. } = &mut ports;
                let before = t1.stats().rx_dropped;
                let result = blast(t0, Some(t1), pool, template, &blast_config, stop);
                let measurement = Measurement {
                    tester_dropped: t1.stats().rx_dropped.saturating_sub(before),
                    ..result.into()
                };
                ports.release_all();
                Ok((measurement, vec![placed]))
            })
            .join()
            .map_err(|_| "the generator thread panicked".to_string())?
    })
}

/// [`Generator::XdpLive`]'s trial, in the calling (placed) thread: sends from `t0` inside the
/// kernel and counts on `t1` with the XDP sink, while sending and for `linger` after.
fn send_live(
    wiring: &Wiring,
    template: &Template,
    config: &ForwardingConfig,
    linger: Duration,
    stop: &AtomicBool,
) -> Result<Measurement, String> {
    // The kernel resolves the redirect's target in the sending thread's namespace.
    let _tester_ns = wirespeed_lab::enter(&wiring.tester_ns)
        .map_err(|error| format!("entering {}: {error}", wiring.tester_ns))?;
    let live_config = LiveConfig {
        batch: (config.batch as u32).clamp(1, MAX_LIVE_BATCH),
        rate_pps: config.offered_pps,
        duration: Duration::from_secs_f64(config.seconds),
        ..LiveConfig::default()
    };
    let generator =
        live::open(&wiring.ingress.tester_if, template, &live_config).map_err(|e| e.to_string())?;
    let sink = XdpSink::attach(&wiring.egress.tester_if, XdpMode::Auto)
        .map_err(|error| error.to_string())?;
    let counted = || {
        sink.counts()
            .map(|counts| counts.packets)
            .map_err(|error| format!("reading the XDP sink on {}: {error}", sink.interface()))
    };
    let before = counted()?;
    let result = live::send(&generator, &live_config, stop).map_err(|e| e.to_string())?;
    std::thread::sleep(linger);
    Ok(Measurement {
        received: counted()? - before,
        ..result.into()
    })
}

/// [`Generator::XdpTools`]'s trial: xdp-tools' frames to the template's MACs, with its flow
/// count and size (at least xdp-trafficgen's smallest, IPv6, frame), its sender placed as the
/// plan says.
fn send_xdp_tools(
    wiring: &Wiring,
    template: &Template,
    config: &ForwardingConfig,
    linger: Duration,
    stop: &AtomicBool,
    commands: &mut Vec<String>,
) -> Result<(Measurement, Vec<Placed>), String> {
    if template.destinations() > 1 {
        return Err("xdp-trafficgen sends to one destination address; drop --routes".into());
    }
    let dir = xdp_tools::find()?;
    let frame = template.bytes();
    let mac = |at: usize| -> [u8; 6] {
        let mut mac = [0; 6];
        mac.copy_from_slice(&frame[at..at + 6]);
        mac
    };
    let (IpAddr::V6(src_ip), IpAddr::V6(dst_ip)) = IpVersion::V6.addresses(wiring) else {
        return Err("the lab's IPv6 addresses are not IPv6".into());
    };
    let frame_size = (template.len() + 4).max(usize::from(xdp_tools::SMALLEST_FRAME));
    let run = xdp_tools::Run {
        namespace: &wiring.tester_ns,
        sender: &wiring.ingress.tester_if,
        receiver: &wiring.egress.tester_if,
        dst_mac: mac(0),
        src_mac: mac(6),
        src_ip,
        dst_ip,
        flows: template.flows(),
        frame_size: u16::try_from(frame_size).map_err(|_| "frame too long".to_string())?,
        cpu: config.plan.generator_cpu,
        seconds: config.seconds,
        linger,
    };
    let mut placed = Vec::new();
    let mut placing = Vec::new();
    let outcome = xdp_tools::run(&dir, &run, stop, &mut |pid| {
        placed = place_process(
            pid,
            "xdp-trafficgen",
            config.plan.generator_cpu,
            config.plan.nice,
            &mut placing,
        )
        .map_err(|error| error.to_string())?;
        Ok(())
    })?;
    commands.extend(outcome.commands);
    commands.extend(placing);
    Ok((outcome.result.into(), placed))
}

/// The result of one DuT at one flow count over all its runs.
#[derive(Clone, Debug, PartialEq)]
pub struct Summary {
    pub dut: String,
    pub flows: u32,
    /// Successful trials.
    pub trials: usize,
    pub median_pps: f64,
    pub min_pps: f64,
    pub max_pps: f64,
    pub offered_median_pps: f64,
    pub loss_median: f64,
    /// Median share of what was offered that the tester's receive refused after the DuT
    /// forwarded it ([`Measurement::receive_refused`]).
    pub receive_refused_median: f64,
    pub limit: Limit,
    /// Why trials failed.
    pub errors: Vec<String>,
}

/// What held a result down.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Limit {
    /// The DuT forwarded (almost) all it was offered, and it was offered near the generator's
    /// ceiling.
    Generator,
    /// The DuT lost 1 % or more.
    DutDrops,
    /// The DuT lost under 1 % but pushed the generator well below its ceiling.
    DutBackpressure,
    /// The DuT forwarded under 1 % of what it was offered: a broken setup to diagnose (its
    /// output and commands are in the results), not a rate to compare.
    Broken,
    /// The tester's receive refused 1 % or more of what was offered after the DuT forwarded
    /// it (`t1`'s ring full): the rate is a lower bound for the DuT.
    TesterReceive,
    /// No trial succeeded.
    Failed,
    /// The generator's own ceiling trial (no DuT).
    Ceiling,
}

impl Limit {
    pub fn label(self) -> &'static str {
        match self {
            Limit::Generator => "generator",
            Limit::DutDrops => "DuT (drops)",
            Limit::DutBackpressure => "DuT (backpressure)",
            Limit::Broken => "broken setup (< 1 % forwarded)",
            Limit::TesterReceive => "tester's receive (t1's ring full; the DuT forwarded more)",
            Limit::Failed => "failed",
            Limit::Ceiling => "-",
        }
    }
}

/// The median of `values` (the mean of the middle two for an even count); 0 for none.
pub fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len();
    match n {
        0 => 0.0,
        _ if n % 2 == 1 => sorted[n / 2],
        _ => (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0,
    }
}

/// Loss under which a DuT forwarded everything it was given.
pub const LOSS_THRESHOLD: f64 = 0.01;
/// Loss from which a DuT is taken to be broken rather than slow ([`Limit::Broken`]).
pub const BROKEN_LOSS: f64 = 0.99;
/// Share of the generator's ceiling above which the generator is taken to be the limit.
pub const CEILING_SHARE: f64 = 0.9;

/// Summaries per (DuT, flow count), in the order the records first name them.
pub fn summarize(records: &[TrialRecord]) -> Vec<Summary> {
    let mut keys: Vec<(String, u32)> = Vec::new();
    for record in records {
        let key = (record.dut.clone(), record.flows);
        if !keys.contains(&key) {
            keys.push(key);
        }
    }
    let mut summaries: Vec<Summary> = keys
        .into_iter()
        .map(|(dut, flows)| {
            let of_key = records.iter().filter(|r| r.dut == dut && r.flows == flows);
            let ok: Vec<Measurement> = of_key
                .clone()
                .filter_map(|r| r.outcome.clone().ok())
                .collect();
            let errors = of_key.filter_map(|r| r.outcome.clone().err()).collect();
            let received: Vec<f64> = ok.iter().map(Measurement::received_pps).collect();
            let offered: Vec<f64> = ok.iter().map(Measurement::offered_pps).collect();
            let loss: Vec<f64> = ok.iter().map(Measurement::loss).collect();
            let refused: Vec<f64> = ok.iter().map(Measurement::receive_refused_share).collect();
            Summary {
                // Known once every ceiling is; see below.
                limit: Limit::Failed,
                trials: ok.len(),
                median_pps: median(&received),
                min_pps: if received.is_empty() {
                    0.0
                } else {
                    received.iter().copied().fold(f64::INFINITY, f64::min)
                },
                max_pps: received.iter().copied().fold(0.0, f64::max),
                offered_median_pps: median(&offered),
                loss_median: median(&loss),
                receive_refused_median: median(&refused),
                errors,
                dut,
                flows,
            }
        })
        .collect();
    let ceilings: Vec<(u32, f64)> = summaries
        .iter()
        .filter(|s| s.trials > 0)
        .map(|s| (s.flows, s.offered_median_pps))
        .collect();
    for summary in &mut summaries {
        if summary.trials == 0 {
            continue;
        }
        if summary.dut == CEILING {
            summary.limit = Limit::Ceiling;
            continue;
        }
        let ceiling = ceilings
            .iter()
            .filter(|(flows, _)| *flows == summary.flows)
            .map(|&(_, pps)| pps)
            .fold(0.0, f64::max);
        summary.limit = if summary.loss_median >= BROKEN_LOSS {
            Limit::Broken
        } else if summary.receive_refused_median >= LOSS_THRESHOLD {
            Limit::TesterReceive
        } else if summary.loss_median >= LOSS_THRESHOLD {
            Limit::DutDrops
        } else if summary.offered_median_pps >= CEILING_SHARE * ceiling {
            Limit::Generator
        } else {
            Limit::DutBackpressure
        };
    }
    summaries
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(dut: &str, flows: u32, sent: u64, received: u64) -> TrialRecord {
        TrialRecord {
            dut: dut.into(),
            flows,
            run: 0,
            outcome: Ok(Measurement {
                sent,
                refused: 0,
                received,
                seconds: 1.0,
                tester_dropped: 0,
                receive_refused: 0,
            }),
            placement: Vec::new(),
            commands: Vec::new(),
        }
    }

    #[test]
    fn medians_of_odd_and_even_counts() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert_eq!(median(&[]), 0.0);
    }

    #[test]
    fn limits_follow_loss_and_the_generator_ceiling() {
        let mut records = vec![
            record(CEILING, 1, 1_000_000, 0),
            // Forwards all it gets at the generator's full rate: the generator is the limit.
            record("fast", 1, 980_000, 979_000),
            // Forwards all it gets but held the generator to half: the DuT pushed back.
            record("slow", 1, 500_000, 499_900),
            // Loses a fifth.
            record("lossy", 1, 1_000_000, 800_000),
            // Forwards next to nothing: a setup to diagnose, not a rate.
            record("nearly-nothing", 1, 1_000_000, 800),
            // Loses half, all of it refused by the tester's receive after the DuT forwarded it.
            TrialRecord {
                outcome: Ok(Measurement {
                    receive_refused: 500_000,
                    ..record("", 1, 1_000_000, 500_000).outcome.unwrap()
                }),
                ..record("receive-bound", 1, 0, 0)
            },
            record("fast", 1, 990_000, 990_000),
            record("fast", 1, 970_000, 960_000),
        ];
        records.push(TrialRecord {
            outcome: Err("DuT broken did not forward".into()),
            ..record("broken", 1, 0, 0)
        });
        let summaries = summarize(&records);
        let find = |name: &str| summaries.iter().find(|s| s.dut == name).unwrap();
        assert_eq!(find(CEILING).limit, Limit::Ceiling);
        let fast = find("fast");
        assert_eq!(fast.limit, Limit::Generator);
        assert_eq!(fast.trials, 3);
        assert_eq!(fast.median_pps, 979_000.0);
        assert_eq!((fast.min_pps, fast.max_pps), (960_000.0, 990_000.0));
        assert_eq!(find("slow").limit, Limit::DutBackpressure);
        assert_eq!(find("lossy").limit, Limit::DutDrops);
        assert_eq!(find("nearly-nothing").limit, Limit::Broken);
        assert_eq!(find("receive-bound").limit, Limit::TesterReceive);
        let broken = find("broken");
        assert_eq!(broken.limit, Limit::Failed);
        assert_eq!(
            broken.errors,
            vec!["DuT broken did not forward".to_string()]
        );
        assert_eq!(broken.min_pps, 0.0);
    }
}
