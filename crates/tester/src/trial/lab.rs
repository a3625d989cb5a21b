//! A trial in the lab: the generator's thread pinned and placed, the tester's AF_XDP ports
//! opened in the tester namespace, and the kernel's interface counters read around the trial
//! as a third-party check of the tester's own counts.

use std::sync::atomic::AtomicBool;

use serde::{Deserialize, Serialize};
use wirespeed_io::Port;
use wirespeed_io::afxdp::{XdpMode, XdpProbeCounter};

use super::{
    DEFAULT_SAMPLE_EVERY, ReceiverKind, SenderKind, TrialConfig, TrialMeasurement, live,
    probe_filter, probe_sampling, run, run_counted,
};
use crate::bench::placement::{Placed, place_this_thread};
use crate::dut::probe::{RECEIVER_RING, TesterPorts, TesterSender};
use crate::generator::Template;
use crate::generator::probe::ProbeWriter;

/// Packet counters of one interface as the kernel keeps them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct InterfaceCounters {
    pub rx_packets: u64,
    pub tx_packets: u64,
    /// Packets the interface took to send and dropped (a veth: the peer's ring was full).
    #[serde(default)]
    pub tx_dropped: u64,
    /// Packets that reached the interface and were dropped before anything on it saw them (a
    /// veth: its own ring was full when the peer sent).
    #[serde(default)]
    pub rx_dropped: u64,
}

impl InterfaceCounters {
    /// Reads `interface`'s counters in namespace `ns` (`ip -s -j link show`).
    pub fn read(ns: &str, interface: &str) -> Result<InterfaceCounters, String> {
        let text = wirespeed_lab::ip_in(ns, &["-s", "-j", "link", "show", interface])
            .map_err(|error| format!("reading the counters of {interface}: {error}"))?;
        parse_counters(&text).ok_or_else(|| {
            format!("reading the counters of {interface}: no stats64 in `ip -s -j` output")
        })
    }
}

/// The first link's packet and drop counts from `ip -s -j link show` output.
pub fn parse_counters(json: &str) -> Option<InterfaceCounters> {
    let value: serde_json::Value = serde_json::from_str(json).ok()?;
    let stats = value.get(0)?.get("stats64")?;
    Some(InterfaceCounters {
        rx_packets: stats.get("rx")?.get("packets")?.as_u64()?,
        tx_packets: stats.get("tx")?.get("packets")?.as_u64()?,
        tx_dropped: stats.get("tx")?.get("dropped")?.as_u64()?,
        rx_dropped: stats.get("rx")?.get("dropped")?.as_u64()?,
    })
}

/// The tester's counts beside the kernel's for one trial (or the sum of several).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CounterCheck {
    /// Frames the tester's TX port took.
    pub transmitted: u64,
    /// Packets the kernel counted out of the sending interface meanwhile.
    pub kernel_tx: u64,
    /// Frames the tester's RX port received (all of them, probes or not).
    pub arrived: u64,
    /// Packets the kernel counted into the receiving interface meanwhile.
    pub kernel_rx: u64,
    /// Frames the receiving interface took that the tester's socket then had no room for
    /// (the kernel's `XDP_STATISTICS`): the interface counted them, the tester did not receive
    /// them. A trial that outruns the tester's receive has some; the check adds them to
    /// `arrived`, and the trial counts them as lost.
    #[serde(default)]
    pub socket_dropped: u64,
}

impl CounterCheck {
    /// |kernel - tester| / tester on the sending side (0 when both are 0).
    pub fn tx_error(&self) -> f64 {
        relative_error(self.kernel_tx, self.transmitted)
    }

    /// |kernel - tester| / tester on the receiving side, the tester's socket drops counted with
    /// what it received.
    pub fn rx_error(&self) -> f64 {
        relative_error(self.kernel_rx, self.arrived + self.socket_dropped)
    }

    /// Whether both sides agree within `share` (0.001 for the 0.1 % the tester promises).
    pub fn agrees_within(&self, share: f64) -> bool {
        self.tx_error() <= share && self.rx_error() <= share
    }

    /// Adds another trial's counts.
    pub fn add(&mut self, other: &CounterCheck) {
        self.transmitted += other.transmitted;
        self.kernel_tx += other.kernel_tx;
        self.arrived += other.arrived;
        self.kernel_rx += other.kernel_rx;
        self.socket_dropped += other.socket_dropped;
    }
}

fn relative_error(kernel: u64, tester: u64) -> f64 {
    match (kernel, tester) {
        (0, 0) => 0.0,
        (_, 0) => f64::INFINITY,
        _ => kernel.abs_diff(tester) as f64 / tester as f64,
    }
}

/// Where a lab trial sends and receives: two interfaces of one namespace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TrialPorts {
    pub namespace: String,
    pub sender_if: String,
    pub receiver_if: String,
}

impl TrialPorts {
    /// `t0` -> DuT -> `t1`.
    pub fn through_dut(wiring: &crate::dut::Wiring) -> TrialPorts {
        TrialPorts {
            namespace: wiring.tester_ns.clone(),
            sender_if: wiring.ingress.tester_if.clone(),
            receiver_if: wiring.egress.tester_if.clone(),
        }
    }

    /// The looped-back calibration pair `c0` -> `c1`.
    pub fn looped(namespace: &str, pair: &wirespeed_lab::CalibrationPair) -> TrialPorts {
        TrialPorts {
            namespace: namespace.into(),
            sender_if: pair.sender_if.clone(),
            receiver_if: pair.receiver_if.clone(),
        }
    }
}

/// A trial as run in the lab.
#[derive(Clone, Debug, PartialEq)]
pub struct LabTrial {
    pub measurement: TrialMeasurement,
    pub counters: CounterCheck,
    /// The generator thread as read back.
    pub generator: Placed,
    /// The tester ports' mode ("native, copy").
    pub mode: String,
}

/// Runs one trial from `ports.sender_if` to `ports.receiver_if` over AF_XDP in a thread pinned
/// to `cpu` whose sockets are opened in the ports' namespace, and reads the kernel's counters
/// around it.
pub fn run_in_lab(
    ports: &TrialPorts,
    template: &Template,
    config: &TrialConfig,
    cpu: usize,
    stop: &AtomicBool,
) -> Result<LabTrial, String> {
    std::thread::scope(|scope| {
        scope
            .spawn(|| -> Result<LabTrial, String> {
                wirespeed_io::thread::pin_to_core(cpu)
                    .map_err(|error| format!("pinning the generator to CPU {cpu}: {error}"))?;
                let generator = place_this_thread("generator", config.generator_nice)
                    .map_err(|error| error.to_string())?;
                let trial = match config.receiver {
                    _ if config.sender == SenderKind::XdpLive
                        && live::can_send(config, template) =>
                    {
                        live_trial(ports, template, config, stop)?
                    }
                    ReceiverKind::Probe => socket_trial(ports, template, config, stop, None)?,
                    ReceiverKind::Count => counted_trial(ports, template, config, stop)?,
                    ReceiverKind::Sampled { .. } => {
                        let counter = attach_counter(ports, template, config.receiver)?;
                        socket_trial(ports, template, config, stop, Some(&counter))?
                    }
                    // No stamps without the live sender: a socket timestamps samples instead.
                    ReceiverKind::Stamped => {
                        let counter = attach_counter(
                            ports,
                            template,
                            ReceiverKind::Sampled {
                                every: DEFAULT_SAMPLE_EVERY,
                            },
                        )?;
                        socket_trial(ports, template, config, stop, Some(&counter))?
                    }
                };
                let (mut measurement, mode) = (trial.measurement, trial.mode);
                let ((tx_before, rx_before), (tx_after, rx_after)) = (trial.before, trial.after);
                if measurement.sender == SenderKind::XdpLive {
                    // What the DuT's ring refused, the sending veth dropped at once.
                    measurement.refused = tx_after.tx_dropped.saturating_sub(tx_before.tx_dropped);
                    measurement.transmitted =
                        measurement.transmitted.saturating_sub(measurement.refused);
                }
                // What the DuT forwarded and the receiving veth's ring had no room for, or the
                // socket behind it: the larger, as the two may count the same frame, and
                // without the samples a sampling socket missed (the counter counted those, and
                // the interface may count them too).
                measurement.outcome.receiver_refused = rx_after
                    .rx_dropped
                    .saturating_sub(rx_before.rx_dropped)
                    .saturating_sub(measurement.samples_dropped)
                    .max(measurement.receiver_dropped);
                Ok(LabTrial {
                    counters: CounterCheck {
                        transmitted: measurement.transmitted,
                        kernel_tx: tx_after.tx_packets.saturating_sub(tx_before.tx_packets),
                        arrived: measurement.arrived,
                        kernel_rx: rx_after.rx_packets.saturating_sub(rx_before.rx_packets),
                        socket_dropped: measurement.receiver_dropped,
                    },
                    measurement,
                    generator,
                    mode,
                })
            })
            .join()
            .map_err(|_| "the generator thread panicked".to_string())?
    })
}

/// A lab trial's measurement, the sending port's mode, and the (sender, receiver) interface
/// counters before and after it.
struct Bracketed {
    measurement: TrialMeasurement,
    mode: String,
    before: (InterfaceCounters, InterfaceCounters),
    after: (InterfaceCounters, InterfaceCounters),
}

/// The (sender, receiver) interface counters of `ports`.
fn read_counters(ports: &TrialPorts) -> Result<(InterfaceCounters, InterfaceCounters), String> {
    Ok((
        InterfaceCounters::read(&ports.namespace, &ports.sender_if)?,
        InterfaceCounters::read(&ports.namespace, &ports.receiver_if)?,
    ))
}

/// AF_XDP sockets on both interfaces. Without `counter` ([`ReceiverKind::Probe`]) the receiving
/// socket takes every frame, [`run`]; with a sampling `counter` ([`ReceiverKind::Sampled`]) it
/// is opened on the counter's program and takes the samples, [`run_counted`] with samples.
fn socket_trial(
    ports: &TrialPorts,
    template: &Template,
    config: &TrialConfig,
    stop: &AtomicBool,
    counter: Option<&XdpProbeCounter>,
) -> Result<Bracketed, String> {
    let (ns, sender) = (&ports.namespace, &ports.sender_if);
    let mut tester = match counter {
        None => TesterPorts::open_interfaces(ns, sender, &ports.receiver_if, 16384, RECEIVER_RING),
        Some(counter) => {
            let sockets = counter
                .sample_sockets()
                .ok_or("the probe counter samples nothing")?;
            TesterPorts::open_sampled(ns, sender, sockets, 16384, RECEIVER_RING)
        }
    }?;
    let mode = tester.t0.info().mode.clone();
    bracketed(ports, mode, || {
        let TesterPorts { t0, t1, pool, .. } = &mut tester;
        let result = match counter {
            None => run(t0, t1, pool, template, config, stop).map_err(|error| error.to_string()),
            Some(counter) => run_counted(t0, Some(t1), counter, pool, template, config, stop),
        };
        tester.release_all();
        result
    })
}

/// Runs `trial` (which returns its ports' frames to the pool) between two readings of the
/// interface counters of `ports`.
fn bracketed(
    ports: &TrialPorts,
    mode: String,
    trial: impl FnOnce() -> Result<TrialMeasurement, String>,
) -> Result<Bracketed, String> {
    let before = read_counters(ports)?;
    let measurement = trial()?;
    Ok(Bracketed {
        measurement,
        mode,
        before,
        after: read_counters(ports)?,
    })
}

/// [`ReceiverKind::Count`]: an AF_XDP socket on the sending interface and the probe counter on
/// the receiving one, [`run_counted`].
fn counted_trial(
    ports: &TrialPorts,
    template: &Template,
    config: &TrialConfig,
    stop: &AtomicBool,
) -> Result<Bracketed, String> {
    let counter = attach_counter(ports, template, ReceiverKind::Count)?;
    let mut sender = TesterSender::open(&ports.namespace, &ports.sender_if, 16384)?;
    let mode = sender.t0.info().mode.clone();
    bracketed(ports, mode, || {
        let TesterSender { t0, pool, .. } = &mut sender;
        let result = run_counted(t0, None, &counter, pool, template, config, stop);
        sender.release_all();
        result
    })
}

/// [`SenderKind::XdpLive`]: the kernel sends from the sending interface, paced, and the probe
/// counter counts on the receiving one ([`live::run_live`], in the ports' namespace).
fn live_trial(
    ports: &TrialPorts,
    template: &Template,
    config: &TrialConfig,
    stop: &AtomicBool,
) -> Result<Bracketed, String> {
    // `live::can_send` admits only the counting and the stamped receivers.
    let counter = attach_counter(ports, template, config.receiver)?;
    // The kernel resolves the generator's target in the sending thread's namespace.
    let _inside = wirespeed_lab::enter(&ports.namespace)
        .map_err(|error| format!("entering {}: {error}", ports.namespace))?;
    bracketed(ports, "in-kernel live frames".into(), || {
        live::run_live(&ports.sender_if, &counter, template, config, stop)
    })
}

/// The probe counter for `template`'s probes on the receiving interface of `ports` (attached
/// in its namespace) as `receiver` needs it: sampling one probe in `every` for
/// [`ReceiverKind::Sampled`], binning every probe's latency for [`ReceiverKind::Stamped`],
/// counting only otherwise.
fn attach_counter(
    ports: &TrialPorts,
    template: &Template,
    receiver: ReceiverKind,
) -> Result<XdpProbeCounter, String> {
    let writer = ProbeWriter::new(template).map_err(|error| error.to_string())?;
    let filter = probe_filter(&writer);
    let _inside = wirespeed_lab::enter(&ports.namespace)
        .map_err(|error| format!("entering {}: {error}", ports.namespace))?;
    let interface = &ports.receiver_if;
    match receiver {
        ReceiverKind::Sampled { every } => XdpProbeCounter::attach_sampling(
            interface,
            XdpMode::Auto,
            &filter,
            &probe_sampling(&writer, every),
        ),
        ReceiverKind::Stamped => XdpProbeCounter::attach_binning(interface, XdpMode::Auto, &filter),
        ReceiverKind::Count | ReceiverKind::Probe => {
            XdpProbeCounter::attach(interface, XdpMode::Auto, &filter)
        }
    }
    .map_err(|error| error.to_string())
}
