//! One trial over real ports: offer a paced load on one port, receive on another, and measure
//! loss, reordering, duplicates, latency and pacing accuracy; in the lab, also check the counts
//! against the kernel's interface counters.
//!
//! **Sending.** Departure times come from a [`Schedule`] (CBR or Poisson) in TSC cycles. The
//! loop reads the TSC, takes every frame already due (at most one batch), asks the port how
//! many of them its TX ring has room for ([`Port::tx_room`]), stamps that many with their flow
//! and a probe (flow, per-flow sequence number, TX timestamp = the TSC just before the batch is
//! handed to the port) and transmits them; the others are refused without being prepared (at
//! line rate that is most of them). When the ring has no room at all, every frame due by then
//! is refused at once and the loop yields its core: the kernel thread that drains the ring (in
//! the RFC 2544 suite, the NAPI thread of the tester's receive) may share it, and a sender
//! spinning there held its own limit down to about half. When nothing is due it reaps TX
//! completions and receives, and offers its core (`sched_yield`) before a gap of more than 5 µs
//! and at least every 20 µs: a spinning sender kept that same NAPI thread waiting for the
//! scheduler's tick, which put up to 4 ms into every latency percentile above the median. A frame the TX ring refuses is not retried: it was offered on
//! time and did not leave, so it counts as lost, like a frame the tester had no buffer for or
//! never got to send before the deadline (5 % + 50 ms past the trial's length). The offered count is
//! therefore exactly `rate × seconds` and anything that held the load back, the DuT's
//! backpressure or the tester itself, shows up as loss; the calibration (the same trial with no
//! DuT) says which it was.
//!
//! **Departures.** Taking a frame into the TX ring is not sending it. Behind a DuT that pushes
//! back (veth stops the sender's queue while its peer's ring is full; a copy-mode frame stays
//! charged to the tester's socket, and holds a completion slot, until the DuT frees it, so a
//! shaper's queue can use up either, and the kernel leaves the next frames in the ring), the
//! frames of an excessive rate waited in the tester's own queue, left at the DuT's pace and all
//! arrived before the trial's wait ended: zero loss at a rate never offered (issue 16). So the sender watches when its frames leave the port
//! ([`Port::tx_departed`]) against their due times: a frame that left more than the
//! departure tolerance ([`departure_tolerance`]) after it was due and handed out was held
//! back by the DuT and counts lost at this rate; the generator's own lateness is counted
//! apart, and a trial that ended with the generator behind its schedule did not offer its
//! rate and never passes ([`Departure`](crate::rfc2544::Departure)). The port never holds more than the tolerance's worth
//! of frames: a deeper queue could only hide pushback, so the excess is refused (lost) at once.
//! Every steady trial reports its scheduled rate, its departed rate and its lag.
//!
//! **Loads.** Besides a steady rate, a trial can offer an exact number of frames (a burst, for
//! back-to-back) and can change its rate once without a pause ([`Phase`], for system recovery:
//! the second phase's schedule starts where the first one's time ends). Flows take turns
//! (round robin) or are drawn at random per frame from a seeded [`Rng`] ([`FlowOrder`]); each
//! flow numbers its own frames either way. A two-phase trial also reports when the last frame
//! that did not arrive was due to leave, from its flow and sequence number; that mapping needs
//! the round-robin order, so two-phase trials always use it.
//!
//! **Receiving.** Every arrival is timestamped from the TSC once per received batch, in the same
//! process and clock as the TX stamp, so latency needs no clock synchronisation. Every frame
//! carries a probe (the probe format fits the 18-byte payload of a 64-byte IPv4 frame), so every
//! frame counts for latency (an HDR histogram) and for sequence tracking
//! ([`SequenceTable`](crate::stats::SequenceTable)). Frames without a probe (the lab kernels' neighbour discovery) are
//! counted as foreign; probes stamped before this trial started (late frames of the previous
//! one) as stale. Frames come back to the pool rewritten to the template, so the sender only
//! stamps the fields that change.
//!
//! **Counting instead ([`ReceiverKind::Count`], [`run_counted`]).** A throughput trial only
//! needs to know how many of its frames came back, and the receive above costs the tester's
//! core about as much as sending. So the receiving interface can instead carry an
//! [`XdpProbeCounter`]: it counts in the kernel the frames with this template's probe signature
//! whose TX timestamp is not below the trial's start, and the trial reads it before and after
//! (and, while lingering, every [`COUNTER_POLL`] until it reaches what was transmitted). Loss is
//! sent minus counted; there is no sequence and no latency, and the measurement says so
//! ([`TrialMeasurement::receiver`]). The sender is the same either way.
//!
//! **Sampling ([`ReceiverKind::Sampled`], [`run_counted`] with samples).** A latency trial at the
//! rates the counter finds would again be held down by a receive that parses every frame: the
//! DuT's egress queue fills behind the tester, and the latency measured is the tester's queue. So
//! the counter can also hand one probe in N (by sequence number, N a power of two) to an AF_XDP
//! socket on the same interface; the trial counts as without samples (loss = sent - counted) and
//! timestamps the samples as the socket receive above does, same clock and code. There is no
//! sequence tracking of the frames not sampled, and the samples' own gaps are not a loss figure.
//!
//! **Third-party check.** [`run_in_lab`] reads the interface counters of the sending and the
//! receiving interface (`ip -s -j link`, i.e. /sys/class/net/*/statistics of their namespace)
//! before and after and reports them beside the tester's own counts ([`CounterCheck`]). On the
//! receiving side the interface also counts frames the tester's socket then had no room for
//! (a trial faster than the tester's receive); the kernel reports those too (`XDP_STATISTICS`),
//! and the check adds them to what the tester received.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use wirespeed_io::afxdp::{ProbeFilter, ProbeSampling, XdpProbeCounter};
use wirespeed_io::{Port, QueueId};
use wirespeed_packet::cpu::{rdtsc, tsc_hz};
use wirespeed_packet::{Batch, Desc, FramePool, HEADROOM, MAX_BATCH};

use crate::generator::pacing::{PacingAccuracy, PacingError, Pattern, Rng, Schedule};
use crate::generator::probe::{self, Probe, ProbeError, ProbeWriter, SEQUENCE_AT, TIMESTAMP_AT};
use crate::generator::{Template, prefill};
use crate::rfc2544::TrialOutcome;
use crate::stats::{LatencySummary, SequenceCounts};

mod departures;
mod lab;
pub mod live;
mod receive;

use departures::InFlight;
pub use departures::{TOLERANCE_MAX, TOLERANCE_MIN, TOLERANCE_SHARE, departure_tolerance};
pub use lab::{CounterCheck, InterfaceCounters, LabTrial, TrialPorts, parse_counters, run_in_lab};
pub use receive::COUNTER_POLL;
use receive::{Counting, Receive, Sampling, Sink};

/// Departures recorded per trial for the pacing figure (8 MiB of timestamps); a longer trial's
/// gap statistics cover its first this many frames, its achieved rate all of them.
pub const MAX_RECORDED_DEPARTURES: usize = 1 << 20;

/// Share of the trial length the sender may run late before the rest counts as not sent, plus
/// [`LATE_GRACE`] seconds (a thread preempted for a few milliseconds catches up rather than
/// losing frames; the lateness shows in the pacing figure).
pub const LATE_SHARE: f64 = 0.05;
/// See [`LATE_SHARE`].
pub const LATE_GRACE: f64 = 0.05;

/// How to run one trial.
#[derive(Clone, Debug, PartialEq)]
pub struct TrialConfig {
    /// Offered rate, frames per second.
    pub rate: f64,
    /// Length of the trial, seconds.
    pub seconds: f64,
    pub pattern: Pattern,
    /// Largest number of due frames handed to the port at once.
    pub batch: usize,
    /// After the last departure, the longest to keep receiving for frames still inside the
    /// DuT (RFC 2544 §23 waits 2 s). Receiving stops earlier once as many of this trial's
    /// probes have arrived as the TX port took, so a trial without loss does not wait.
    pub linger: Duration,
    /// TX queue to send on (the RX port is read on queue 0).
    pub queue: QueueId,
    /// Offer exactly this many frames (a burst) instead of `rate × seconds`; `seconds` is then
    /// only the time allowed for them.
    pub frames: Option<u64>,
    /// A second phase right after the first (the system recovery test).
    pub then: Option<Phase>,
    /// Which flow each frame belongs to.
    pub flow_order: FlowOrder,
    /// Nice value of the generator thread in a lab trial, `None` to leave it alone. A
    /// generator that other jobs preempt sends what fell due meanwhile in one burst when it
    /// runs again, and that burst, not the DuT, overflows the rings.
    pub generator_nice: Option<i32>,
    /// How a lab trial receives ([`run_in_lab`]).
    pub receiver: ReceiverKind,
    /// How a lab trial sends, where it can ([`live::can_send`]); the AF_XDP sender otherwise.
    pub sender: SenderKind,
}

impl Default for TrialConfig {
    fn default() -> Self {
        Self {
            rate: 100_000.0,
            seconds: 1.0,
            pattern: Pattern::Cbr,
            batch: 32,
            linger: Duration::from_millis(100),
            queue: 0,
            frames: None,
            then: None,
            flow_order: FlowOrder::RoundRobin,
            generator_nice: None,
            receiver: ReceiverKind::Probe,
            sender: SenderKind::Afxdp,
        }
    }
}

/// How a trial sends.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SenderKind {
    /// The tester's AF_XDP socket, paced in user space and timestamped per frame: every load
    /// (steady, bursts, two phases) and every receiver, up to about 1 Mpps on the lab's veths.
    #[default]
    Afxdp,
    /// The kernel's live-frames generator, paced in the kernel ([`live`]): several Mpps, a
    /// steady rate counted by the probe counter only.
    XdpLive,
}

impl SenderKind {
    /// Parses `afxdp` or `xdp-live`.
    pub fn parse(name: &str) -> Result<SenderKind, String> {
        match name {
            "afxdp" => Ok(SenderKind::Afxdp),
            "xdp-live" => Ok(SenderKind::XdpLive),
            other => Err(format!("unknown sender {other:?}; use xdp-live or afxdp")),
        }
    }

    /// The name the command line and the report use.
    pub fn name(self) -> &'static str {
        match self {
            SenderKind::Afxdp => "afxdp",
            SenderKind::XdpLive => "xdp-live",
        }
    }
}

/// How a trial receives.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReceiverKind {
    /// An AF_XDP socket: every frame is copied, parsed and timestamped, for loss, sequence
    /// (loss per flow, reordering, duplicates) and latency.
    #[default]
    Probe,
    /// An XDP program counts this trial's probes in the kernel ([`XdpProbeCounter`]): loss
    /// only, no sequence and no latency, at next to no cost to the tester's core.
    Count,
    /// The probe counter counts every probe as [`ReceiverKind::Count`] does (loss) and hands
    /// one in `every` (a power of two; those whose sequence number is a multiple of it) to an
    /// AF_XDP socket, whose probes are timestamped into the latency histogram as the probe
    /// receiver's are ([`run_counted`] with samples): latency from a sample, no sequence, and
    /// the tester's core parses 1/`every` of the frames.
    Sampled { every: u32 },
    /// The in-kernel sender stamps every frame with the kernel's clock as it leaves, and the
    /// probe counter counts every probe (loss, as [`ReceiverKind::Count`]) and bins its latency
    /// with the same clock as it arrives ([`XdpProbeCounter::attach_binning`]): every frame's
    /// latency, at any rate the kernel sends, no socket and no sequence. Only for trials the
    /// live sender can send ([`live::can_send`]); the others fall back to
    /// [`ReceiverKind::Sampled`] (one in [`DEFAULT_SAMPLE_EVERY`]), and say so in their
    /// measurement's `receiver`.
    Stamped,
}

/// One probe in this many is timestamped by [`ReceiverKind::Sampled`] unless told otherwise:
/// at the 0.4–0.6 Mpps the lab's DuTs reach, several thousand samples a second, a small
/// share of the socket receive that held latency trials down.
pub const DEFAULT_SAMPLE_EVERY: u32 = 64;

impl ReceiverKind {
    /// Parses `probe`, `count`, `sampled` (one in [`DEFAULT_SAMPLE_EVERY`]) or `stamped`.
    pub fn parse(name: &str) -> Result<ReceiverKind, String> {
        match name {
            "probe" => Ok(ReceiverKind::Probe),
            "count" => Ok(ReceiverKind::Count),
            "sampled" => Ok(ReceiverKind::Sampled {
                every: DEFAULT_SAMPLE_EVERY,
            }),
            "stamped" => Ok(ReceiverKind::Stamped),
            other => Err(format!(
                "unknown receiver {other:?}; use count, probe, sampled or stamped"
            )),
        }
    }

    /// How a report names it.
    pub fn label(self) -> String {
        match self {
            ReceiverKind::Probe => {
                "AF_XDP probe receiver (every frame parsed: loss, sequence, latency)".into()
            }
            ReceiverKind::Count => {
                "XDP probe counter (this trial's probes counted in the kernel: loss only)".into()
            }
            ReceiverKind::Sampled { every } => format!(
                "XDP probe counter sampling 1 in {every} probes to an AF_XDP socket (every probe \
                 counted: loss; the samples timestamped: latency; no sequence)"
            ),
            ReceiverKind::Stamped => "XDP probe counter binning every probe's latency in the \
                 kernel, stamped by the in-kernel sender as it left (every probe counted and \
                 timed; no sequence)"
                .into(),
        }
    }
}

/// The second phase of a trial: `rate` frames per second for `seconds`, in the same pattern.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Phase {
    pub rate: f64,
    pub seconds: f64,
}

/// How frames are spread over the template's flows.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum FlowOrder {
    /// Frame *n* belongs to flow *n mod flows*.
    #[default]
    RoundRobin,
    /// Each frame's flow is drawn uniformly from a generator seeded with `seed`.
    Random { seed: u64 },
}

/// Departure times of a one- or two-phase trial.
struct Departures {
    first: Schedule,
    first_frames: u64,
    then: Option<Schedule>,
    given: u64,
}

impl Departures {
    fn next(&mut self) -> Option<u64> {
        self.given += 1;
        match &mut self.then {
            Some(then) if self.given > self.first_frames => then.next(),
            _ => self.first.next(),
        }
    }
}

/// Seconds after the start at which frame `index` of a trial was due: `first_frames` at
/// `first_rate`, then the rest at `then_rate` (the mean times, exact for CBR).
pub fn due_seconds(index: u64, first_frames: u64, first_rate: f64, then_rate: f64) -> f64 {
    if index < first_frames || then_rate <= 0.0 {
        index as f64 / first_rate
    } else {
        first_frames as f64 / first_rate + (index - first_frames) as f64 / then_rate
    }
}

/// Why a trial could not run.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TrialError {
    #[error("trial: {0}")]
    Probe(#[from] ProbeError),
    #[error("trial: {0}")]
    Pacing(#[from] PacingError),
    #[error("trial: {0} flows do not fit the probe's 16-bit flow id; use at most 65536")]
    Flows(u32),
    #[error("trial: length {0} s is not a positive number of seconds")]
    Seconds(f64),
}

/// What one trial measured.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TrialMeasurement {
    /// `sent` is the offered count (`rate × seconds`), `received` the distinct probes that came
    /// back.
    pub outcome: TrialOutcome,
    /// Frames the TX port took.
    pub transmitted: u64,
    /// Frames the TX ring (or an empty pool) refused when they were due.
    pub refused: u64,
    /// Frames never tried because the deadline passed (or the trial was stopped).
    pub unsent: u64,
    /// Every frame that arrived on the RX port.
    pub arrived: u64,
    /// Arrivals without a probe.
    pub foreign: u64,
    /// Probes stamped before this trial started.
    pub stale: u64,
    /// Seconds from the end of sending to the arrival of this trial's last probe (0 when
    /// nothing arrived after sending ended): how long the DuT held frames back.
    #[serde(default)]
    pub drain_seconds: f64,
    /// Frames the receiving port's backend dropped during the trial (for AF_XDP the kernel's
    /// `XDP_STATISTICS`: RX ring full, fill ring empty, dropped): lost in the tester, not in
    /// the DuT.
    #[serde(default)]
    pub receiver_dropped: u64,
    /// Which receiver measured: with [`ReceiverKind::Count`], `sequence` and `latency` are
    /// empty and `received` counts this trial's probes, duplicates included; with
    /// [`ReceiverKind::Sampled`] too, but `latency` holds the samples.
    #[serde(default)]
    pub receiver: ReceiverKind,
    /// With [`ReceiverKind::Sampled`]: samples the socket had no room for (the kernel's
    /// `XDP_STATISTICS`). They were counted, so they are not lost; the histogram lacks them.
    #[serde(default)]
    pub samples_dropped: u64,
    /// Which sender sent.
    #[serde(default)]
    pub sender: SenderKind,
    pub sequence: SequenceCounts,
    pub latency: LatencySummary,
    pub pacing: PacingAccuracy,
    /// True when `stop` ended the trial early: its counts are not a result.
    pub interrupted: bool,
}

/// Sends `config.rate × config.seconds` frames of `template` out of `tx`, paced, and receives on
/// `rx`; both ports use `pool`. See the module documentation.
pub fn run(
    tx: &mut dyn Port,
    rx: &mut dyn Port,
    pool: &mut FramePool,
    template: &Template,
    config: &TrialConfig,
    stop: &AtomicBool,
) -> Result<TrialMeasurement, TrialError> {
    let writer = check(template, config)?;
    let receiver_dropped_before = rx.stats().rx_dropped;
    let mut sink = Sink::new(rx, template, &writer, rdtsc());
    let sent = send(tx, pool, template, &writer, config, stop, &mut sink)?;
    let mut measurement = sent.measurement;
    measurement.sequence = sink.table.total(&sent.per_flow);
    let flows = template.flows() as u64;
    // Round robin: frame `index` is sequence `index / flows` of flow `index % flows`.
    let last_loss = config.then.and_then(|then| {
        if sent.tried < sent.offered {
            // Frames never tried are lost, and the last of them was due last.
            return Some(due_seconds(
                sent.offered - 1,
                sent.first_frames,
                config.rate,
                then.rate,
            ));
        }
        let last = (0..flows)
            .filter_map(|flow| {
                let count = sent.per_flow.get(flow as usize).copied().unwrap_or(0);
                let sequence = sink.table.flow(flow as u32)?.last_missing(count)?;
                Some(sequence * flows + flow)
            })
            .max()?;
        Some(due_seconds(last, sent.first_frames, config.rate, then.rate))
    });
    measurement.latency = sink.histogram.summary();
    measurement.arrived = sink.arrived;
    measurement.foreign = sink.foreign;
    measurement.stale = sink.stale;
    measurement.receiver_dropped = sink
        .rx
        .stats()
        .rx_dropped
        .saturating_sub(receiver_dropped_before);
    measurement.outcome.receiver_refused = measurement.receiver_dropped;
    measurement.outcome.received = measurement.sequence.received;
    measurement.outcome.last_loss = last_loss;
    Ok(measurement)
}

/// Sends as [`run`] does and counts what arrives with `counter`, an [`XdpProbeCounter`] on the
/// receiving interface for probes where `template`'s frames carry them ([`probe_filter`]):
/// `received` is the count of this trial's probes, and there is no sequence. The counter's
/// floor is set to this trial's start first, so late frames of an earlier trial count as stale.
///
/// Without `samples` there is no latency either ([`ReceiverKind::Count`]). With `samples`
/// ([`ReceiverKind::Sampled`]), `counter` was attached with
/// [`XdpProbeCounter::attach_sampling`] (where [`probe_sampling`] says) and `samples` is a
/// socket opened on its [`XdpProbeCounter::sample_sockets`] with the same `pool` as `tx`: each
/// sample is timestamped into the latency histogram as [`run`] does it. The samples' own gaps
/// are not a loss figure (one is missing when the socket had no room,
/// [`TrialMeasurement::samples_dropped`]).
pub fn run_counted(
    tx: &mut dyn Port,
    samples: Option<&mut dyn Port>,
    counter: &XdpProbeCounter,
    pool: &mut FramePool,
    template: &Template,
    config: &TrialConfig,
    stop: &AtomicBool,
) -> Result<TrialMeasurement, String> {
    let writer = check(template, config).map_err(|error| error.to_string())?;
    let reading = |error: std::io::Error| {
        format!(
            "reading the probe counter on {}: {error}",
            counter.interface()
        )
    };
    let receiver = match (&samples, counter.sampling()) {
        (None, _) => ReceiverKind::Count,
        (Some(_), Some(sampling)) => ReceiverKind::Sampled {
            every: sampling.every,
        },
        (Some(_), None) => {
            return Err(format!(
                "the probe counter on {} samples nothing: attach it with attach_sampling",
                counter.interface()
            ));
        }
    };
    let trial_start = rdtsc();
    counter.set_floor(trial_start).map_err(reading)?;
    let before = counter.counts().map_err(reading)?;
    let mut counting = Counting {
        counter,
        before: before.probes.packets,
        fresh: 0,
        last_fresh: 0,
        reads: 0,
        error: None,
    };
    let (sent, sampled) = match samples {
        None => (
            send(tx, pool, template, &writer, config, stop, &mut counting),
            None,
        ),
        Some(rx) => {
            let dropped_before = rx.stats().rx_dropped;
            let mut sampling = Sampling {
                counting,
                samples: Sink::new(rx, template, &writer, trial_start),
            };
            let sent = send(tx, pool, template, &writer, config, stop, &mut sampling);
            sampling.settle(pool, template);
            let Sampling {
                counting: counted,
                samples: sink,
            } = sampling;
            counting = counted;
            let dropped = sink.rx.stats().rx_dropped.saturating_sub(dropped_before);
            (sent, Some((sink.histogram.summary(), dropped)))
        }
    };
    let sent = sent.map_err(|error| error.to_string())?;
    if let Some(error) = counting.error {
        return Err(reading(error));
    }
    let after = counter.counts().map_err(reading)?;
    let mut measurement = sent.measurement;
    let counted = after.probes.packets.saturating_sub(before.probes.packets);
    measurement.receiver = receiver;
    measurement.arrived = after.frames().saturating_sub(before.frames());
    measurement.stale = after.stale.packets.saturating_sub(before.stale.packets);
    measurement.foreign = after.foreign.packets.saturating_sub(before.foreign.packets);
    // A duplicate counts twice: the received count is capped at what was offered, so loss is
    // never negative.
    measurement.outcome.received = counted.min(measurement.outcome.sent);
    if let Some((latency, dropped)) = sampled {
        measurement.latency = latency;
        measurement.samples_dropped = dropped;
    }
    Ok(measurement)
}

/// Where the counter finds the probes in frames of the template `writer` writes.
pub fn probe_filter(writer: &ProbeWriter) -> ProbeFilter {
    let at = writer.offset();
    ProbeFilter {
        signature: probe::SIGNATURE,
        signature_at: at as u16,
        timestamp_at: (at + TIMESTAMP_AT) as u16,
    }
}

/// Where a sampling counter finds the sequence number in frames of the template `writer`
/// writes, and one probe of each flow in `every` chosen by it.
pub fn probe_sampling(writer: &ProbeWriter, every: u32) -> ProbeSampling {
    ProbeSampling {
        sequence_at: (writer.offset() + SEQUENCE_AT) as u16,
        every,
    }
}

/// The template's probe writer, once `template` and `config` are shown to make a trial.
fn check(template: &Template, config: &TrialConfig) -> Result<ProbeWriter, TrialError> {
    let writer = ProbeWriter::new(template)?;
    let flows = template.flows();
    if flows > u16::MAX as u32 + 1 {
        return Err(TrialError::Flows(flows));
    }
    for seconds in [Some(config.seconds), config.then.map(|t| t.seconds)]
        .into_iter()
        .flatten()
    {
        if !(seconds.is_finite() && seconds > 0.0) {
            return Err(TrialError::Seconds(seconds));
        }
    }
    let hz = tsc_hz();
    // Validate the rates before anything is sent.
    Schedule::new(config.pattern, config.rate, hz, 0)?;
    if let Some(then) = config.then {
        Schedule::new(config.pattern, then.rate, hz, 0)?;
    }
    Ok(writer)
}

/// What the sending half of a trial leaves for the receiving half's figures.
struct Sent {
    /// Sending's counts, pacing, drain time and outcome (`received` and `last_loss` still to
    /// fill in).
    measurement: TrialMeasurement,
    offered: u64,
    first_frames: u64,
    /// Frames handed out (sent or refused).
    tried: u64,
    /// Sequence numbers used per flow.
    per_flow: Vec<u64>,
}

/// The sending half of [`run`]: paces the frames out, lets `receiver` take arrivals between
/// batches, and lingers until it has as many fresh probes as were transmitted (or the linger
/// ends).
fn send(
    tx: &mut dyn Port,
    pool: &mut FramePool,
    template: &Template,
    writer: &ProbeWriter,
    config: &TrialConfig,
    stop: &AtomicBool,
    receiver: &mut dyn Receive,
) -> Result<Sent, TrialError> {
    let hz = tsc_hz();
    let flows = template.flows();
    prefill(pool, template);
    let first_frames = config
        .frames
        .unwrap_or_else(|| (config.rate * config.seconds).round() as u64)
        .max(1);
    let then_frames = config
        .then
        .map_or(0, |t| (t.rate * t.seconds).round() as u64);
    let offered = first_frames + then_frames;
    let total_seconds = config.seconds + config.then.map_or(0.0, |t| t.seconds);
    // The first departure 1 ms from now, after the set-up above has settled.
    let start = rdtsc() + hz / 1000;
    let then_start = start + (first_frames as f64 / config.rate * hz as f64) as u64;
    let mut schedule = Departures {
        first: Schedule::new(config.pattern, config.rate, hz, start)?,
        first_frames,
        then: match config.then {
            Some(then) => Some(Schedule::new(config.pattern, then.rate, hz, then_start)?),
            None => None,
        },
        given: 0,
    };
    let deadline = start + ((total_seconds * (1.0 + LATE_SHARE) + LATE_GRACE) * hz as f64) as u64;
    // A two-phase trial keeps turns (see the module documentation).
    let order = match config.then {
        Some(_) => FlowOrder::RoundRobin,
        None => config.flow_order,
    };
    let mut numbering = Numbering::new(order, flows);
    // Only a steady rate is judged on its departures: a burst is meant to leave faster than
    // the DuT takes it, and a two-phase trial overloads on purpose.
    let steady = config.frames.is_none() && config.then.is_none();
    let tolerance = departure_tolerance(total_seconds);
    let fastest = config.rate.max(config.then.map_or(0.0, |t| t.rate));
    let mut in_flight = InFlight::new(
        tx,
        fastest,
        (tolerance.as_secs_f64() * hz as f64) as u64,
        hz,
        config.batch.clamp(1, MAX_BATCH),
    );
    let record = (offered as usize).min(MAX_RECORDED_DEPARTURES);
    let mut departures = Vec::with_capacity(record);
    let mut scheduled = Vec::with_capacity(record);
    let batch_size = config.batch.clamp(1, MAX_BATCH);
    let mut batch = Batch::new(batch_size);
    let mut ids = [0u32; MAX_BATCH];
    let mut due_times = [0u64; MAX_BATCH];
    let len = template.len() as u16;
    let mut handed_out = 0u64;
    let mut measurement = TrialMeasurement::default();
    let mut due = schedule.next().unwrap_or(start);
    // When the sender offers its core (see below): when the next departure is more than 5 µs
    // away, and at least every 20 µs for loads whose gaps are shorter. A `sched_yield` with
    // nothing else to run costs well under a microsecond.
    let yield_gap = hz / 200_000;
    let yield_every = hz / 50_000;
    let mut last_yield = 0u64;
    let (mut first, mut last) = (None, 0u64);
    let mut iterations = 0u64;
    while handed_out < offered {
        iterations += 1;
        if iterations.is_multiple_of(1024) && stop.load(Ordering::Relaxed) {
            measurement.interrupted = true;
            break;
        }
        let now = rdtsc();
        if now >= deadline {
            break;
        }
        if due > now {
            tx.poll(pool);
            in_flight.observe(tx);
            receiver.receive(pool, template);
            // The core is shared with the receive's NAPI thread (the RFC 2544 placement puts
            // it on the generator's core): a sender that spun here kept it off the CPU until
            // the scheduler's tick, and arrivals waited up to 4 ms in the ring (the floor's p99
            // was 3.4 ms). So the core is offered whenever nothing is due for a while, and at
            // least every `yield_every` (docs/benchmarks.md, "The tester").
            if due - now > yield_gap || now.saturating_sub(last_yield) > yield_every {
                std::thread::yield_now();
                last_yield = now;
            }
            continue;
        }
        // Every frame already due, up to one batch.
        let want = batch_size.min((offered - handed_out) as usize);
        let mut count = 0;
        while count < want && due <= now {
            due_times[count] = due;
            due = schedule.next().unwrap_or(u64::MAX);
            count += 1;
        }
        // Only the frames the TX ring has room for, and the port may hold within the
        // departure tolerance, are prepared; the others, and a frame with no free buffer, are
        // refused, each still using up its number.
        let room = tx
            .tx_room(config.queue, pool, count)
            .min(count)
            .min(in_flight.room());
        if room == 0 {
            // The ring is full (the tester, or the DuT behind it, is over its limit): every
            // frame due by now is refused unprepared, and the core goes to whatever drains the
            // ring. Where the tester's receiving NAPI thread shares the generator's core (the
            // RFC 2544 suite's placement), spinning here took the CPU that thread needed to
            // take the frames the ring waits on: 0.63 Mpps alone against 1.14 when yielding
            // (docs/benchmarks.md, "The tester: generator, pacing, timestamps").
            let mut refused = count as u64;
            while due <= now && handed_out + refused < offered {
                due = schedule.next().unwrap_or(u64::MAX);
                refused += 1;
            }
            numbering.skip(handed_out, refused);
            handed_out += refused;
            measurement.refused += refused;
            tx.poll(pool);
            in_flight.observe(tx);
            receiver.receive(pool, template);
            std::thread::yield_now();
            continue;
        }
        let got = pool.alloc_bulk(&mut ids[..room]);
        let stamped = rdtsc();
        for (offset, &id) in ids[..got].iter().enumerate() {
            let (flow, sequence) = numbering.number(handed_out + offset as u64);
            let probe = Probe {
                flow: flow as u16,
                sequence,
                timestamp: stamped,
            };
            if let Some(frame) = pool.frame_mut(id).get_mut(HEADROOM as usize..) {
                template.stamp(frame, flow);
                writer.write(frame, &probe);
            }
            batch.push(Desc {
                frame: id,
                offset: HEADROOM,
                len,
                port: 0,
                queue: config.queue,
            });
        }
        numbering.skip(handed_out + got as u64, (count - got) as u64);
        handed_out += count as u64;
        let taken = tx.tx(config.queue, pool, &mut batch);
        measurement.transmitted += taken as u64;
        measurement.refused += (count - taken) as u64;
        for desc in batch.descs() {
            pool.release(desc.frame);
        }
        batch.clear();
        in_flight.handed(&due_times[..taken], stamped);
        if taken > 0 {
            first.get_or_insert(stamped);
            last = stamped;
            for &planned in &due_times[..taken] {
                if departures.len() < record {
                    departures.push(stamped);
                    scheduled.push(planned);
                }
            }
        }
        tx.poll(pool);
        in_flight.observe(tx);
        receiver.receive(pool, template);
    }
    let tried = handed_out;
    measurement.unsent = offered.saturating_sub(tried);
    let sending_ended = rdtsc();
    let linger_end = sending_ended + (config.linger.as_secs_f64() * hz as f64) as u64;
    // Until every frame has arrived and left the port (a frame the DuT pushed back can leave
    // after the last one arrived).
    while rdtsc() < linger_end
        && (receiver.fresh() < measurement.transmitted || in_flight.departed < in_flight.handed)
    {
        tx.poll(pool);
        in_flight.observe(tx);
        receiver.wait(pool, template);
    }
    // What the port holds now arrived within the wait as far as the tester can tell: a
    // sender taken off its core across the deadline (a loaded machine) would otherwise count
    // frames that were waiting in its own ring as lost by the DuT.
    receiver.receive(pool, template);
    if stop.load(Ordering::Relaxed) {
        measurement.interrupted = true;
    }
    let per_flow = numbering.per_flow(tried);
    let mut pacing = PacingAccuracy::measure(config.rate, hz, &departures, &scheduled);
    let seconds = match first {
        Some(first) if last > first => (last - first) as f64 / hz as f64,
        _ => 0.0,
    };
    if measurement.transmitted > 1 && seconds > 0.0 {
        pacing.achieved_rate = (measurement.transmitted - 1) as f64 / seconds;
    }
    measurement.pacing = pacing;
    measurement.drain_seconds =
        receiver.last_fresh().saturating_sub(sending_ended) as f64 / hz as f64;
    measurement.outcome = TrialOutcome {
        sent: offered,
        received: 0,
        seconds: if seconds > 0.0 {
            seconds
        } else {
            config.seconds
        },
        last_loss: None,
        departure: steady.then(|| in_flight.departure(config.rate, start, hz)),
        receiver_refused: 0,
    };
    Ok(Sent {
        measurement,
        offered,
        first_frames,
        tried,
        per_flow,
    })
}

/// Which flow each frame of a trial belongs to and its sequence number in that flow
/// ([`FlowOrder`]). A frame refused or never sent still takes its number, so the receiver sees
/// the gap as loss.
struct Numbering {
    flows: u64,
    /// Random order: the generator the flows are drawn from, and each flow's next number.
    random: Option<(Rng, Vec<u32>)>,
}

impl Numbering {
    fn new(order: FlowOrder, flows: u32) -> Numbering {
        Numbering {
            flows: u64::from(flows.max(1)),
            random: match order {
                FlowOrder::RoundRobin => None,
                FlowOrder::Random { seed } => Some((Rng::new(seed), vec![0; flows as usize])),
            },
        }
    }

    /// Flow and sequence number of frame `index` (in order: random order draws a flow per
    /// call).
    #[inline]
    fn number(&mut self, index: u64) -> (u32, u32) {
        match &mut self.random {
            Some((rng, next)) => {
                let flow = (rng.next_u64() % self.flows) as u32;
                let slot = next.get_mut(flow as usize);
                let sequence = slot.as_deref().copied().unwrap_or(0);
                if let Some(slot) = slot {
                    *slot = slot.wrapping_add(1);
                }
                (flow, sequence)
            }
            None => ((index % self.flows) as u32, (index / self.flows) as u32),
        }
    }

    /// Uses up the numbers of `count` frames from `first` on that will not be sent. Round
    /// robin derives numbers from the index and needs nothing; random order draws their flows.
    fn skip(&mut self, first: u64, count: u64) {
        if self.random.is_some() {
            for index in first..first + count {
                self.number(index);
            }
        }
    }

    /// Numbers used per flow once `tried` frames were numbered.
    fn per_flow(&self, tried: u64) -> Vec<u64> {
        match &self.random {
            Some((_, next)) => next.iter().map(|&n| u64::from(n)).collect(),
            None => (0..self.flows)
                .map(|flow| tried / self.flows + u64::from(flow < tried % self.flows))
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests;
