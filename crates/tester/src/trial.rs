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
//! rate and never passes ([`Departure`]). The port never holds more than the tolerance's worth
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
//! ([`SequenceTable`]). Frames without a probe (the lab kernels' neighbour discovery) are
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
use wirespeed_io::afxdp::{ProbeFilter, ProbeSampling, XdpMode, XdpProbeCounter};
use wirespeed_io::{Port, QueueId};
use wirespeed_packet::cpu::{rdtsc, tsc_hz};
use wirespeed_packet::{Batch, Desc, FramePool, HEADROOM, MAX_BATCH};

use crate::bench::placement::{Placed, place_this_thread};
use crate::dut::probe::{RECEIVER_RING, TesterPorts, TesterSender};
use crate::generator::pacing::{PacingAccuracy, PacingError, Pattern, Rng, Schedule};
use crate::generator::probe::{
    self, PROBE_LEN, Probe, ProbeError, ProbeWriter, SEQUENCE_AT, TIMESTAMP_AT,
};
use crate::generator::{Template, prefill};
use crate::rfc2544::{Departure, TrialOutcome};
use crate::stats::{LatencyHistogram, LatencySummary, SequenceCounts, SequenceTable};

/// Departures recorded per trial for the pacing figure (8 MiB of timestamps); a longer trial's
/// gap statistics cover its first this many frames, its achieved rate all of them.
pub const MAX_RECORDED_DEPARTURES: usize = 1 << 20;

/// Share of the trial length the sender may run late before the rest counts as not sent, plus
/// [`LATE_GRACE`] seconds (a thread preempted for a few milliseconds catches up rather than
/// losing frames; the lateness shows in the pacing figure).
pub const LATE_SHARE: f64 = 0.05;
/// See [`LATE_SHARE`].
pub const LATE_GRACE: f64 = 0.05;

/// How late a frame may leave the tester's port and still count as offered at the trial's
/// rate ([`Departure`]): this share of the trial's length, between [`TOLERANCE_MIN`] and
/// [`TOLERANCE_MAX`]. At 0.2 % a trial whose every frame left at the limit still departed
/// within 0.2 % of its rate; the floor keeps a short trial from failing on the microseconds a
/// kick takes, the ceiling keeps a long one from hiding a DuT's pushback in the tester's queue.
pub const TOLERANCE_SHARE: f64 = 0.002;
/// See [`TOLERANCE_SHARE`].
pub const TOLERANCE_MIN: Duration = Duration::from_micros(100);
/// See [`TOLERANCE_SHARE`].
pub const TOLERANCE_MAX: Duration = Duration::from_millis(1);

/// The departure tolerance of a trial `seconds` long ([`TOLERANCE_SHARE`]).
pub fn departure_tolerance(seconds: f64) -> Duration {
    Duration::from_secs_f64((seconds * TOLERANCE_SHARE).max(0.0))
        .clamp(TOLERANCE_MIN, TOLERANCE_MAX)
}

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
}

/// One probe in this many is timestamped by [`ReceiverKind::Sampled`] unless told otherwise:
/// at the 0.4–0.6 Mpps the lab's DuTs reach, several thousand samples a second, a small
/// share of the socket receive that held latency trials down.
pub const DEFAULT_SAMPLE_EVERY: u32 = 64;

impl ReceiverKind {
    /// Parses `probe`, `count` or `sampled` (one in [`DEFAULT_SAMPLE_EVERY`]).
    pub fn parse(name: &str) -> Result<ReceiverKind, String> {
        match name {
            "probe" => Ok(ReceiverKind::Probe),
            "count" => Ok(ReceiverKind::Count),
            "sampled" => Ok(ReceiverKind::Sampled {
                every: DEFAULT_SAMPLE_EVERY,
            }),
            other => Err(format!(
                "unknown receiver {other:?}; use count, probe or sampled"
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

/// The receiving half of a trial, as the sender sees it.
trait Receive {
    /// Takes what has arrived; called whenever no frame is due.
    fn receive(&mut self, pool: &mut FramePool, template: &Template);
    /// After sending: waits a little for more and takes it.
    fn wait(&mut self, pool: &mut FramePool, template: &Template);
    /// This trial's probes taken so far (duplicates included).
    fn fresh(&self) -> u64;
    /// The TSC when the last of them was taken (0 for none).
    fn last_fresh(&self) -> u64;
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

/// The frames a trial handed to its TX port and has not yet seen leave it, with the times
/// they were due and ready (due, or handed out when that was later): how late the trial's
/// frames left the tester ([`Departure`]).
///
/// A frame has left when the port says so ([`Port::tx_departed`]): for copy-mode AF_XDP, when
/// the kernel has consumed its TX descriptor, which it does only once it has handed the frame
/// to the veth. Completions would come too late: the kernel completes a frame when its last
/// holder frees it, after the DuT's own queues (a shaper's 4 ms). The count is read with the
/// TSC read just before, so a frame seen waiting was still in the port at that time: every
/// lag here is a lower bound, and a generator kept off its core while frames leave is never
/// blamed for it.
///
/// Why frames wait there at all: veth stops the sender's queue while its peer's ring is full,
/// and a copy-mode frame is an skb charged to the sending socket (and holding a completion
/// slot) until it is freed; with the default send buffer a DuT that queued a few hundred (a
/// shaper's queue) made the kernel refuse the next frame (the tester's sender now has a
/// buffer that only the completion ring bounds, [`crate::dut::probe`]). A refused frame stays
/// in the TX ring and leaves at the DuT's pace.
///
/// The tracker also bounds the frames in the port to what may wait there within the
/// tolerance ([`InFlight::room`]): a deeper queue would only hold what the DuT pushes back.
struct InFlight {
    /// Due and ready times of the frames in the port, by frame index modulo the capacity.
    due: Box<[u64]>,
    ready: Box<[u64]>,
    mask: u64,
    /// Frames handed to the port (taken by `tx`).
    handed: u64,
    /// Of them, frames seen to have left.
    departed: u64,
    /// The port's departure count before the trial.
    base: u64,
    /// Cycles a frame may leave after it was due (or ready) and still count.
    tolerance: u64,
    /// Frames allowed in the port at once.
    limit: u64,
    sent_late: u64,
    /// Frames handed out late since the last one handed out in time.
    late_streak: u64,
    held_back: u64,
    /// Frames before this index were already counted as held back.
    held_until: u64,
    /// Longest wait past a due time seen, cycles.
    lag: u64,
    /// Lower bound of the last frame's departure: its hand-out, or the latest time a frame
    /// was seen still in the port.
    last_departure: u64,
}

impl InFlight {
    /// A tracker for a trial at up to `rate` frames/s with `tolerance_cycles` of tolerance,
    /// handing out batches of up to `batch` frames to `port`.
    fn new(port: &dyn Port, rate: f64, tolerance_cycles: u64, hz: u64, batch: usize) -> Self {
        let within = (rate * tolerance_cycles as f64 / hz as f64).ceil();
        let limit = (within as u64).clamp(2 * batch as u64, 1 << 20);
        let capacity = limit.next_power_of_two();
        InFlight {
            due: vec![0; capacity as usize].into_boxed_slice(),
            ready: vec![0; capacity as usize].into_boxed_slice(),
            mask: capacity - 1,
            handed: 0,
            departed: 0,
            base: port.tx_departed(),
            tolerance: tolerance_cycles,
            limit,
            sent_late: 0,
            late_streak: 0,
            held_back: 0,
            held_until: 0,
            lag: 0,
            last_departure: 0,
        }
    }

    /// Frames the port may take now without more than [`InFlight::limit`] in it.
    fn room(&self) -> usize {
        self.limit.saturating_sub(self.handed - self.departed) as usize
    }

    /// Records frames the port took at `stamped`, due at `due`.
    fn handed(&mut self, due: &[u64], stamped: u64) {
        for &due in due {
            let slot = (self.handed & self.mask) as usize;
            self.due[slot] = due;
            self.ready[slot] = due.max(stamped);
            self.handed += 1;
            if stamped.saturating_sub(due) > self.tolerance {
                self.sent_late += 1;
                self.late_streak += 1;
            } else {
                self.late_streak = 0;
            }
        }
        if let Some(&first) = due.first() {
            self.lag = self.lag.max(stamped.saturating_sub(first));
            self.last_departure = self.last_departure.max(stamped);
        }
    }

    /// Reads the port's departures and counts the frames seen waiting too long.
    fn observe(&mut self, port: &dyn Port) {
        let now = rdtsc();
        let departed = port.tx_departed().saturating_sub(self.base);
        self.departed = self.departed.max(departed.min(self.handed));
        if self.departed == self.handed {
            return;
        }
        self.last_departure = self.last_departure.max(now);
        let oldest = self.departed;
        self.lag = self
            .lag
            .max(now.saturating_sub(self.due[(oldest & self.mask) as usize]));
        let waited_too_long = |index: u64| {
            self.ready[(index & self.mask) as usize].saturating_add(self.tolerance) < now
        };
        if !waited_too_long(oldest) {
            return;
        }
        // Ready times only grow with the index: the frames that waited too long are a prefix.
        let (mut low, mut high) = (oldest + 1, self.handed);
        while low < high {
            let middle = low + (high - low) / 2;
            if waited_too_long(middle) {
                low = middle + 1;
            } else {
                high = middle;
            }
        }
        let from = oldest.max(self.held_until);
        self.held_back += low.saturating_sub(from);
        self.held_until = self.held_until.max(low);
    }

    /// The trial's departure figures, for a trial at `rate` that started at `start`.
    fn departure(&self, rate: f64, start: u64, hz: u64) -> Departure {
        let seconds =
            self.last_departure.saturating_sub(start) as f64 / hz as f64 + 1.0 / rate.max(1e-9);
        Departure {
            scheduled_rate: rate,
            departed_rate: if self.departed > 0 {
                self.departed as f64 / seconds
            } else {
                0.0
            },
            lag_seconds: self.lag as f64 / hz as f64,
            tolerance_seconds: self.tolerance as f64 / hz as f64,
            sent_late: self.sent_late,
            held_back: self.held_back,
            behind: self.late_streak,
        }
    }
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

/// The receiving half of a trial with an AF_XDP socket: every frame parsed.
struct Sink<'a> {
    rx: &'a mut dyn Port,
    table: SequenceTable,
    histogram: LatencyHistogram,
    arrived: u64,
    foreign: u64,
    stale: u64,
    /// Probes of this trial that arrived (duplicates included), and the TSC of the last one.
    fresh: u64,
    last_fresh: u64,
    ns_per_cycle: f64,
    trial_start: u64,
    incoming: Batch,
    /// Bytes of a frame to rewrite from the template at least (headers and probe).
    restore_from: usize,
}

impl<'a> Sink<'a> {
    /// A sink for probes of `template`'s frames (written by `writer`) stamped at or after
    /// `trial_start`, received on `rx`.
    fn new(
        rx: &'a mut dyn Port,
        template: &Template,
        writer: &ProbeWriter,
        trial_start: u64,
    ) -> Sink<'a> {
        Sink {
            rx,
            table: SequenceTable::new(template.flows()),
            histogram: LatencyHistogram::new(),
            arrived: 0,
            foreign: 0,
            stale: 0,
            fresh: 0,
            last_fresh: 0,
            ns_per_cycle: 1e9 / tsc_hz() as f64,
            trial_start,
            incoming: Batch::new(MAX_BATCH),
            restore_from: writer.offset() + PROBE_LEN,
        }
    }
}

impl Receive for Sink<'_> {
    #[inline]
    fn receive(&mut self, pool: &mut FramePool, template: &Template) {
        while self.rx.rx(0, pool, &mut self.incoming) > 0 {
            let now = rdtsc();
            for desc in self.incoming.descs() {
                self.arrived += 1;
                let start = desc.offset as usize;
                let frame = pool
                    .frame(desc.frame)
                    .get(start..start + desc.len as usize)
                    .unwrap_or_default();
                match probe::read(frame) {
                    Ok(probe) if probe.timestamp >= self.trial_start && probe.timestamp <= now => {
                        let cycles = now - probe.timestamp;
                        self.histogram
                            .record((cycles as f64 * self.ns_per_cycle) as u64);
                        self.table.record(probe.flow.into(), probe.sequence.into());
                        self.fresh += 1;
                        self.last_fresh = now;
                    }
                    Ok(_) => self.stale += 1,
                    Err(_) => self.foreign += 1,
                }
                // The arrival overwrote up to `len` bytes (a router's MACs and TTL, a kernel's
                // own frame): put the template back before the frame is sent again.
                let restore = (desc.len as usize)
                    .max(self.restore_from)
                    .min(template.len());
                let head = HEADROOM as usize;
                if let (Some(area), Some(bytes)) = (
                    pool.frame_mut(desc.frame).get_mut(head..head + restore),
                    template.bytes().get(..restore),
                ) {
                    area.copy_from_slice(bytes);
                }
                pool.release(desc.frame);
            }
            self.incoming.clear();
        }
        self.rx.poll(pool);
    }

    fn wait(&mut self, pool: &mut FramePool, template: &Template) {
        self.receive(pool, template);
        std::hint::spin_loop();
    }

    fn fresh(&self) -> u64 {
        self.fresh
    }

    fn last_fresh(&self) -> u64 {
        self.last_fresh
    }
}

/// The receiving half of a trial with the probe counter: nothing to do while sending; while
/// lingering, one read of the counter every [`COUNTER_POLL`].
struct Counting<'a> {
    counter: &'a XdpProbeCounter,
    /// The count before the trial.
    before: u64,
    /// This trial's probes at the last read, and the TSC of the read that last saw more.
    fresh: u64,
    last_fresh: u64,
    reads: u64,
    /// The first failed read (which ends the linger).
    error: Option<std::io::Error>,
}

/// How often a lingering counted trial reads its counter: a read is a system call, and the
/// receiving interface's NAPI poll, which does the counting, may share the tester's core, so
/// the reads must not spin; the drain time is known to this much.
pub const COUNTER_POLL: Duration = Duration::from_micros(100);

impl Receive for Counting<'_> {
    fn receive(&mut self, _pool: &mut FramePool, _template: &Template) {}

    fn wait(&mut self, _pool: &mut FramePool, _template: &Template) {
        if self.reads > 0 {
            std::thread::sleep(COUNTER_POLL);
        }
        self.reads += 1;
        match self.counter.probes() {
            Ok(counts) => {
                let fresh = counts.packets.saturating_sub(self.before);
                if fresh > self.fresh {
                    self.fresh = fresh;
                    self.last_fresh = rdtsc();
                }
            }
            Err(error) => {
                self.error.get_or_insert(error);
                // Nothing more can be learnt: end the linger.
                self.fresh = u64::MAX;
            }
        }
    }

    fn fresh(&self) -> u64 {
        self.fresh
    }

    fn last_fresh(&self) -> u64 {
        self.last_fresh
    }
}

/// The receiving half of a sampled trial: the counter for the count (the linger waits for it),
/// the socket's samples, parsed as the probe receiver parses every frame, for latency.
struct Sampling<'a, 'b> {
    counting: Counting<'a>,
    samples: Sink<'b>,
}

/// Longest a sampled trial waits, after its count is complete, for samples still on their way
/// to the socket: [`COUNTER_POLL`] times this.
const SETTLE_POLLS: u32 = 1000;

impl Sampling<'_, '_> {
    /// Takes the samples still on their way once the count is complete (the kernel counts a
    /// probe, then redirects it), until one [`COUNTER_POLL`] brings none (or
    /// [`SETTLE_POLLS`] did not suffice).
    fn settle(&mut self, pool: &mut FramePool, template: &Template) {
        for _ in 0..SETTLE_POLLS {
            let before = self.samples.arrived;
            std::thread::sleep(COUNTER_POLL);
            self.samples.receive(pool, template);
            if self.samples.arrived == before {
                break;
            }
        }
    }
}

impl Receive for Sampling<'_, '_> {
    fn receive(&mut self, pool: &mut FramePool, template: &Template) {
        self.samples.receive(pool, template);
    }

    fn wait(&mut self, pool: &mut FramePool, template: &Template) {
        self.samples.receive(pool, template);
        self.counting.wait(pool, template);
    }

    fn fresh(&self) -> u64 {
        self.counting.fresh()
    }

    fn last_fresh(&self) -> u64 {
        self.counting.last_fresh()
    }
}

/// Packet counters of one interface as the kernel keeps them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct InterfaceCounters {
    pub rx_packets: u64,
    pub tx_packets: u64,
    /// Packets the interface took to send and dropped (a veth: the peer's ring was full).
    #[serde(default)]
    pub tx_dropped: u64,
}

impl InterfaceCounters {
    /// Reads `interface`'s counters in namespace `ns` (`ip -s -j link show`).
    pub fn read(ns: &str, interface: &str) -> Result<InterfaceCounters, String> {
        let text = wirespeed_lab::run("ip", &["-n", ns, "-s", "-j", "link", "show", interface])
            .map_err(|error| format!("reading the counters of {interface}: {error}"))?;
        parse_counters(&text).ok_or_else(|| {
            format!("reading the counters of {interface}: no stats64 in `ip -s -j` output")
        })
    }
}

/// The first link's rx and tx packet counts from `ip -s -j link show` output.
pub fn parse_counters(json: &str) -> Option<InterfaceCounters> {
    let value: serde_json::Value = serde_json::from_str(json).ok()?;
    let stats = value.get(0)?.get("stats64")?;
    Some(InterfaceCounters {
        rx_packets: stats.get("rx")?.get("packets")?.as_u64()?,
        tx_packets: stats.get("tx")?.get("packets")?.as_u64()?,
        tx_dropped: stats.get("tx")?.get("dropped")?.as_u64()?,
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
                    ReceiverKind::Probe => socket_trial(ports, template, config, stop, None)?,
                    ReceiverKind::Count => counted_trial(ports, template, config, stop)?,
                    ReceiverKind::Sampled { every } => {
                        let counter = attach_counter(ports, template, Some(every))?;
                        socket_trial(ports, template, config, stop, Some(&counter))?
                    }
                };
                let (measurement, mode) = (trial.measurement, trial.mode);
                let ((tx_before, rx_before), (tx_after, rx_after)) = (trial.before, trial.after);
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
    let counter = attach_counter(ports, template, None)?;
    let mut sender = TesterSender::open(&ports.namespace, &ports.sender_if, 16384)?;
    let mode = sender.t0.info().mode.clone();
    bracketed(ports, mode, || {
        let TesterSender { t0, pool, .. } = &mut sender;
        let result = run_counted(t0, None, &counter, pool, template, config, stop);
        sender.release_all();
        result
    })
}

/// The probe counter for `template`'s probes on the receiving interface of `ports` (attached
/// in its namespace), sampling one probe in `every` when given.
fn attach_counter(
    ports: &TrialPorts,
    template: &Template,
    every: Option<u32>,
) -> Result<XdpProbeCounter, String> {
    let writer = ProbeWriter::new(template).map_err(|error| error.to_string())?;
    let filter = probe_filter(&writer);
    let _inside = wirespeed_lab::enter(&ports.namespace)
        .map_err(|error| format!("entering {}: {error}", ports.namespace))?;
    match every {
        None => XdpProbeCounter::attach(&ports.receiver_if, XdpMode::Auto, &filter),
        Some(every) => XdpProbeCounter::attach_sampling(
            &ports.receiver_if,
            XdpMode::Auto,
            &filter,
            &probe_sampling(&writer, every),
        ),
    }
    .map_err(|error| error.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generator::TemplateConfig;
    use wirespeed_io::memory::{LinkConfig, link};
    use wirespeed_io::wrap::{FaultConfig, Faulty};

    fn template(frame_size: u16, flows: u32) -> Template {
        Template::new(&TemplateConfig {
            frame_size,
            flows,
            ..TemplateConfig::default()
        })
        .unwrap()
    }

    #[test]
    fn a_clean_link_delivers_every_offered_frame_paced_with_latency_and_sequence() {
        let template = template(64, 7);
        let mut pool = FramePool::new(16384, 2048).unwrap();
        let (mut a, mut b) = link(
            "wst-a",
            "wst-b",
            &LinkConfig {
                ring_size: 4096,
                ..LinkConfig::default()
            },
        );
        // A low rate, so that even an unoptimised test build on a busy machine keeps up. The
        // linger is only an upper bound: once every frame is back the trial stops waiting.
        let config = TrialConfig {
            rate: 20_000.0,
            seconds: 0.1,
            linger: Duration::from_secs(60),
            ..TrialConfig::default()
        };
        let m = up_to_three_tries(
            || {
                let started = std::time::Instant::now();
                let m = run(
                    &mut a,
                    &mut b,
                    &mut pool,
                    &template,
                    &config,
                    &AtomicBool::new(false),
                )
                .unwrap();
                assert!(
                    started.elapsed() < Duration::from_secs(30),
                    "waited out the linger"
                );
                m
            },
            |m| m.unsent == 0,
        );
        assert!(m.drain_seconds < 30.0, "{}", m.drain_seconds);
        assert_eq!(m.receiver_dropped, 0);
        assert_eq!(m.outcome.sent, 2_000);
        assert_eq!(m.transmitted + m.refused + m.unsent, 2_000);
        // The memory link never refuses: everything left and came back, in order.
        assert_eq!((m.refused, m.unsent), (0, 0));
        assert_eq!(m.outcome.received, 2_000);
        assert_eq!(m.arrived, 2_000);
        assert_eq!(
            m.sequence.lost + m.sequence.reordered + m.sequence.duplicates,
            0
        );
        assert_eq!(m.latency.count, 2_000);
        assert!(!m.interrupted);
        // Paced, not blasted (sending 2000 frames at once takes well under 5 ms): no frame leaves
        // before it is due, so only a sender preempted for a long time at the start could make
        // the span much shorter than the 0.1 s asked for.
        assert!(m.outcome.seconds >= 0.05, "{}", m.outcome.seconds);
        assert!(m.pacing.gap_mean_ns >= 25_000.0, "{:?}", m.pacing);
        assert_eq!(pool.free_count(), pool.total());
    }

    #[test]
    fn drops_and_duplicates_on_the_way_are_counted_as_such() {
        let template = template(128, 3);
        let mut pool = FramePool::new(16384, 2048).unwrap();
        let config = TrialConfig {
            rate: 100_000.0,
            seconds: 0.1,
            pattern: Pattern::Poisson { seed: 1 },
            linger: Duration::from_millis(10),
            ..TrialConfig::default()
        };
        // Frames left unsent would count as lost beside the faults; each try gets a fresh
        // faulty link, so its fault counts are its own.
        let (m, b) = up_to_three_tries(
            || {
                let (mut a, b) = memory_pair(4096);
                let mut b = Faulty::new(
                    b,
                    FaultConfig {
                        seed: 3,
                        drop: 0.05,
                        duplicate: 0.01,
                        ..FaultConfig::default()
                    },
                );
                let m = run(
                    &mut a,
                    &mut b,
                    &mut pool,
                    &template,
                    &config,
                    &AtomicBool::new(false),
                )
                .unwrap();
                (m, b)
            },
            |(m, _)| m.unsent == 0,
        );
        let faults = b.fault_stats();
        assert_eq!((m.refused, m.unsent), (0, 0));
        assert_eq!(m.outcome.sent, 10_000);
        assert_eq!(m.sequence.lost, faults.dropped);
        assert_eq!(m.sequence.duplicates, faults.duplicated);
        assert_eq!(m.outcome.lost(), faults.dropped);
        assert_eq!(m.arrived, 10_000 - faults.dropped + faults.duplicated);
        assert!(faults.dropped > 0 && faults.duplicated > 0);
        assert_eq!(b.frames_held(), 0);
        assert_eq!(pool.free_count(), pool.total());
    }

    #[test]
    fn a_stopped_trial_is_marked_and_bad_parameters_are_refused() {
        let template = template(64, 1);
        let mut pool = FramePool::new(16384, 2048).unwrap();
        let (mut a, mut b) = link("wst-a", "wst-b", &LinkConfig::default());
        let stop = AtomicBool::new(true);
        let config = TrialConfig {
            rate: 10_000.0,
            seconds: 5.0,
            linger: Duration::ZERO,
            ..TrialConfig::default()
        };
        let m = run(&mut a, &mut b, &mut pool, &template, &config, &stop).unwrap();
        assert!(m.interrupted);
        assert!(m.unsent > 49_000, "{}", m.unsent);
        let bad_rate = TrialConfig {
            rate: 0.0,
            ..config.clone()
        };
        let calm = AtomicBool::new(false);
        assert!(matches!(
            run(&mut a, &mut b, &mut pool, &template, &bad_rate, &calm),
            Err(TrialError::Pacing(_))
        ));
        let tagged = Template::new(&TemplateConfig {
            vlan: Some(3),
            ..TemplateConfig::default()
        })
        .unwrap();
        assert!(matches!(
            run(&mut a, &mut b, &mut pool, &tagged, &config, &calm),
            Err(TrialError::Probe(_))
        ));
    }

    /// Runs `attempt` until `sent_all` holds of its result, three times at most, and returns
    /// the last result. A sender preempted past the trial's deadline by a busy machine (the
    /// other tests run in parallel, unoptimised) leaves frames unsent, as it should; a working
    /// sender sends all in one of three tries, a broken one in none.
    fn up_to_three_tries<T>(mut attempt: impl FnMut() -> T, sent_all: impl Fn(&T) -> bool) -> T {
        for _ in 1..3 {
            let result = attempt();
            if sent_all(&result) {
                return result;
            }
        }
        attempt()
    }

    fn memory_pair(
        ring_size: usize,
    ) -> (
        wirespeed_io::memory::MemoryPort,
        wirespeed_io::memory::MemoryPort,
    ) {
        link(
            "wst-a",
            "wst-b",
            &LinkConfig {
                ring_size,
                ..LinkConfig::default()
            },
        )
    }

    /// A port whose frames leave at most at `rate` frames/s: what the tester's AF_XDP port
    /// becomes behind a DuT that pushes back (the kernel leaves a frame in the TX ring while
    /// the socket's send buffer is held downstream). Frames wait in an unbounded queue here, so
    /// every one of them arrives in the end.
    struct PushedBack<P> {
        inner: P,
        rate: f64,
        started: Option<std::time::Instant>,
        left: u64,
        waiting: std::collections::VecDeque<Desc>,
    }

    impl<P: Port> PushedBack<P> {
        fn new(inner: P, rate: f64) -> Self {
            PushedBack {
                inner,
                rate,
                started: None,
                left: 0,
                waiting: std::collections::VecDeque::new(),
            }
        }
    }

    impl<P: Port> Port for PushedBack<P> {
        fn info(&self) -> &wirespeed_io::PortInfo {
            self.inner.info()
        }

        fn rx(&mut self, queue: QueueId, pool: &mut FramePool, batch: &mut Batch) -> usize {
            self.inner.rx(queue, pool, batch)
        }

        fn tx(&mut self, _queue: QueueId, pool: &mut FramePool, batch: &mut Batch) -> usize {
            self.started.get_or_insert_with(std::time::Instant::now);
            let taken = batch.len();
            self.waiting.extend(batch.descs().iter().copied());
            batch.clear();
            self.poll(pool);
            taken
        }

        fn poll(&mut self, pool: &mut FramePool) {
            let Some(started) = self.started else {
                return;
            };
            let due = (started.elapsed().as_secs_f64() * self.rate) as u64;
            let mut batch = Batch::new(MAX_BATCH);
            while self.left < due && !self.waiting.is_empty() && batch.room() > 0 {
                batch.push(self.waiting.pop_front().unwrap());
                self.left += 1;
            }
            self.inner.tx(0, pool, &mut batch);
            for desc in batch.descs() {
                pool.release(desc.frame);
            }
        }

        fn tx_departed(&self) -> u64 {
            self.left
        }

        fn frames_held(&self) -> usize {
            self.waiting.len() + self.inner.frames_held()
        }

        fn release_all(&mut self, pool: &mut FramePool) {
            for desc in self.waiting.drain(..) {
                pool.release(desc.frame);
            }
            self.inner.release_all(pool);
        }

        fn stats(&self) -> wirespeed_io::PortStats {
            self.inner.stats()
        }
    }

    /// Issue 16: behind a DuT that pushes back, every frame of an excessive rate still arrives
    /// (it waited in the tester's port), and the trial must not pass. Below the DuT's rate the
    /// frames leave on time and the departed rate is the scheduled one.
    #[test]
    fn frames_a_dut_pushes_back_into_the_tester_count_lost_at_the_rate() {
        let template = template(64, 4);
        let mut pool = FramePool::new(16384, 2048).unwrap();
        let (a, mut b) = memory_pair(16384);
        let mut a = PushedBack::new(a, 20_000.0);
        let config = |rate: f64| TrialConfig {
            rate,
            seconds: 0.2,
            linger: Duration::from_secs(5),
            ..TrialConfig::default()
        };
        let stop = AtomicBool::new(false);
        let over = run(
            &mut a,
            &mut b,
            &mut pool,
            &template,
            &config(40_000.0),
            &stop,
        )
        .unwrap();
        let departure = over
            .outcome
            .departure
            .expect("a steady trial measures departures");
        assert!(
            departure.lag_seconds > departure.tolerance_seconds,
            "{departure:?}"
        );
        assert!(departure.held_back > 1000, "{departure:?}");
        assert!(
            departure.departed_rate < 0.7 * departure.scheduled_rate,
            "{departure:?}"
        );
        assert!(over.outcome.loss_ratio() > 0.25, "{:?}", over.outcome);
        // Nothing waits deeper than the tolerance allows: the excess was refused.
        assert!(over.refused > 0, "{over:?}");
        assert_eq!(pool.free_count(), pool.total());

        let mut a = PushedBack::new(a.inner, 20_000.0);
        let under = up_to_three_tries(
            || {
                run(
                    &mut a,
                    &mut b,
                    &mut pool,
                    &template,
                    &config(5_000.0),
                    &stop,
                )
                .unwrap()
            },
            |m| m.outcome.departure.is_some_and(|d| d.sent_late == 0),
        );
        let departure = under.outcome.departure.unwrap();
        assert!(departure.on_schedule(), "{departure:?}");
        assert_eq!(under.outcome.lost(), 0, "{:?}", under.outcome);
        assert!(
            (departure.departed_rate / departure.scheduled_rate - 1.0).abs() < 0.005,
            "{departure:?}"
        );
    }

    #[test]
    fn a_burst_offers_exactly_its_frames_and_random_flows_number_their_own() {
        let template = template(64, 16);
        let mut pool = FramePool::new(16384, 2048).unwrap();
        let (mut a, mut b) = memory_pair(4096);
        let config = TrialConfig {
            rate: 50_000.0,
            seconds: 0.5,
            frames: Some(777),
            flow_order: FlowOrder::Random { seed: 9 },
            linger: Duration::from_millis(10),
            ..TrialConfig::default()
        };
        let m = run(
            &mut a,
            &mut b,
            &mut pool,
            &template,
            &config,
            &AtomicBool::new(false),
        )
        .unwrap();
        assert_eq!(m.outcome.sent, 777);
        assert_eq!(m.outcome.received, 777);
        // Every flow's own numbering is gapless, so nothing counts as lost or reordered.
        assert_eq!(m.sequence.lost + m.sequence.reordered, 0);
        // 777 frames at 50 kpps take about 15.5 ms, not the 0.5 s allowed.
        assert!(m.outcome.seconds < 0.1, "{}", m.outcome.seconds);
        assert_eq!(m.outcome.last_loss, None);
        assert_eq!(pool.free_count(), pool.total());
    }

    #[test]
    fn a_two_phase_trial_changes_rate_and_says_when_the_last_loss_was_due() {
        let template = template(64, 4);
        let mut pool = FramePool::new(16384, 2048).unwrap();
        let (mut a, mut b) = memory_pair(4096);
        let config = TrialConfig {
            rate: 40_000.0,
            seconds: 0.05,
            then: Some(Phase {
                rate: 10_000.0,
                seconds: 0.05,
            }),
            linger: Duration::from_millis(10),
            ..TrialConfig::default()
        };
        let calm = AtomicBool::new(false);
        let m = run(&mut a, &mut b, &mut pool, &template, &config, &calm).unwrap();
        // 2000 frames in the first 50 ms, 500 in the next.
        assert_eq!(m.outcome.sent, 2_500);
        assert_eq!(m.transmitted + m.unsent, 2_500, "{m:?}");
        assert_eq!(m.outcome.received, m.transmitted);
        if m.unsent == 0 {
            assert_eq!(m.outcome.last_loss, None);
            assert!(m.outcome.seconds >= 0.06, "{}", m.outcome.seconds);
        } else {
            // A test thread starved past the deadline by a busy machine: the frames it never
            // sent are lost, and the last of them was due at the very end.
            assert_eq!(
                m.outcome.last_loss,
                Some(due_seconds(2_499, 2_000, 40e3, 10e3))
            );
        }
        // Drops all along: the last one is due near the end of the second phase.
        let (mut a, b) = memory_pair(4096);
        let mut lossy = Faulty::new(
            b,
            FaultConfig {
                seed: 5,
                drop: 0.05,
                ..FaultConfig::default()
            },
        );
        let m = run(&mut a, &mut lossy, &mut pool, &template, &config, &calm).unwrap();
        let faults = lossy.fault_stats();
        assert_eq!(m.outcome.lost(), faults.dropped + m.unsent);
        let at = m.outcome.last_loss.expect("a last loss");
        assert!((0.08..=0.1).contains(&at), "{at}");
        assert_eq!(pool.free_count(), pool.total());
    }

    /// A port that, asked for room, has at most the next of `rooms` (taken in turn) and records
    /// how many frames `tx` was handed: a sender that asks first hands it none it would refuse.
    struct Narrow<P> {
        inner: P,
        rooms: Vec<usize>,
        asked: usize,
        handed: u64,
    }

    impl<P: Port> Narrow<P> {
        fn new(inner: P, rooms: &[usize]) -> Self {
            Narrow {
                inner,
                rooms: rooms.to_vec(),
                asked: 0,
                handed: 0,
            }
        }
    }

    impl<P: Port> Port for Narrow<P> {
        fn info(&self) -> &wirespeed_io::PortInfo {
            self.inner.info()
        }

        fn rx(&mut self, queue: QueueId, pool: &mut FramePool, batch: &mut Batch) -> usize {
            self.inner.rx(queue, pool, batch)
        }

        fn tx(&mut self, queue: QueueId, pool: &mut FramePool, batch: &mut Batch) -> usize {
            self.handed += batch.len() as u64;
            self.inner.tx(queue, pool, batch)
        }

        fn tx_room(&mut self, queue: QueueId, pool: &mut FramePool, want: usize) -> usize {
            let most = self.rooms[self.asked % self.rooms.len()];
            self.asked += 1;
            self.inner.tx_room(queue, pool, want.min(most))
        }

        fn tx_departed(&self) -> u64 {
            self.inner.tx_departed()
        }

        fn frames_held(&self) -> usize {
            self.inner.frames_held()
        }

        fn release_all(&mut self, pool: &mut FramePool) {
            self.inner.release_all(pool);
        }

        fn stats(&self) -> wirespeed_io::PortStats {
            self.inner.stats()
        }
    }

    /// The probes of every frame waiting on `port`, in order; the frames go back to `pool`.
    fn probes_waiting(port: &mut dyn Port, pool: &mut FramePool) -> Vec<Probe> {
        let mut probes = Vec::new();
        let mut batch = Batch::new(MAX_BATCH);
        while port.rx(0, pool, &mut batch) > 0 {
            for desc in batch.descs() {
                let start = desc.offset as usize;
                let frame = &pool.frame(desc.frame)[start..start + desc.len as usize];
                probes.push(probe::read(frame).expect("a probe"));
                pool.release(desc.frame);
            }
            batch.clear();
        }
        probes
    }

    /// Runs `config` out of `a` (the sending end of a link whose other end nobody reads during
    /// the trial) with at most `rooms` of room in turn ([`Narrow`]), receiving on a port that
    /// gets nothing; retries twice when a busy machine starved the sender (frames left unsent,
    /// or fewer or more than `transmitted` sent because a preemption merged two bursts).
    /// Returns the measurement, the frames `tx` was handed, and the probes that left, in order.
    fn run_into_a_ring_nobody_reads(
        ring_size: usize,
        rooms: &[usize],
        transmitted: u64,
        template: &Template,
        config: &TrialConfig,
        pool: &mut FramePool,
    ) -> (TrialMeasurement, u64, Vec<Probe>) {
        up_to_three_tries(
            || {
                let (a, mut b) = memory_pair(ring_size);
                let (_, mut elsewhere) = memory_pair(16);
                let mut a = Narrow::new(a, rooms);
                let m = run(
                    &mut a,
                    &mut elsewhere,
                    pool,
                    template,
                    config,
                    &AtomicBool::new(false),
                )
                .unwrap();
                let left = probes_waiting(&mut b, pool);
                (m, a.handed, left)
            },
            |(m, _, _)| m.unsent == 0 && m.transmitted == transmitted,
        )
    }

    #[test]
    fn a_full_tx_ring_refuses_the_due_frames_without_their_being_prepared() {
        let flows = 7;
        let template = template(64, flows);
        let mut pool = FramePool::new(16384, 2048).unwrap();
        let config = TrialConfig {
            rate: 20_000.0,
            seconds: 0.1,
            linger: Duration::from_millis(1),
            ..TrialConfig::default()
        };
        // The ring holds 100 frames: the first 100 due leave, the other 1900 find it full.
        let (m, handed, left) =
            run_into_a_ring_nobody_reads(100, &[usize::MAX], 100, &template, &config, &mut pool);
        assert_eq!(m.outcome.sent, 2_000);
        assert_eq!((m.transmitted, m.refused, m.unsent), (100, 1_900, 0));
        assert_eq!(handed, 100, "a refused frame was stamped and handed to tx");
        assert_eq!(m.outcome.received, 0);
        // Only the frames that left are departures: the first 100 due, 5 ms of the trial (a
        // departure per due frame would span all 100 ms).
        assert!(m.outcome.seconds < 0.05, "{}", m.outcome.seconds);
        // Frames 0..100, numbered round robin: frame n is sequence n / 7 of flow n % 7.
        let numbers: Vec<(u16, u32)> = left.iter().map(|p| (p.flow, p.sequence)).collect();
        let expected: Vec<(u16, u32)> = (0..100u32)
            .map(|n| ((n % flows) as u16, n / flows))
            .collect();
        assert_eq!(numbers, expected);
        assert_eq!(pool.free_count(), pool.total());
    }

    #[test]
    fn refused_frames_use_up_their_flow_and_sequence_numbers() {
        let flows = 16;
        let seed = 11;
        let template = template(64, flows);
        let mut pool = FramePool::new(16384, 2048).unwrap();
        // Six bursts of 100 frames due at once, 50 ms apart. Asked for room, the port has 3,
        // then none, in turn: of each burst the first batch (32) sends 3 and refuses 29, and
        // the full ring then refuses the 68 still due in one go.
        let config = TrialConfig {
            rate: 2_000.0,
            seconds: 0.3,
            pattern: Pattern::Burst {
                size: 100,
                inner_rate: 1e12,
            },
            flow_order: FlowOrder::Random { seed },
            linger: Duration::from_millis(1),
            ..TrialConfig::default()
        };
        let (m, handed, left) =
            run_into_a_ring_nobody_reads(4096, &[3, 0], 18, &template, &config, &mut pool);
        assert_eq!(m.outcome.sent, 600);
        assert_eq!((m.transmitted, m.refused, m.unsent), (18, 582, 0));
        assert_eq!(handed, 18, "a refused frame was stamped and handed to tx");
        // The first three frames of each burst left, with the flow drawn for them and their
        // flow's next sequence number as if every frame before them had been sent.
        let mut rng = Rng::new(seed);
        let mut next = vec![0u32; flows as usize];
        let mut expected = Vec::new();
        for index in 0..600 {
            let flow = (rng.next_u64() % u64::from(flows)) as usize;
            if index % 100 < 3 {
                expected.push((flow as u16, next[flow]));
            }
            next[flow] += 1;
        }
        let numbers: Vec<(u16, u32)> = left.iter().map(|p| (p.flow, p.sequence)).collect();
        assert_eq!(numbers, expected);
        assert_eq!(pool.free_count(), pool.total());
    }

    #[test]
    fn receivers_parse_by_name() {
        assert_eq!(ReceiverKind::parse("count"), Ok(ReceiverKind::Count));
        assert_eq!(ReceiverKind::parse("probe"), Ok(ReceiverKind::Probe));
        assert_eq!(
            ReceiverKind::parse("sampled"),
            Ok(ReceiverKind::Sampled {
                every: DEFAULT_SAMPLE_EVERY
            })
        );
        assert!(ReceiverKind::parse("Count").is_err());
        assert!(ReceiverKind::parse("").is_err());
    }

    #[test]
    fn the_counter_looks_where_the_writer_writes() {
        let template = template(64, 1);
        let writer = ProbeWriter::new(&template).unwrap();
        let mut frame = template.frame(0);
        let probe = Probe {
            flow: 0,
            sequence: 0,
            timestamp: 0x0102_0304_0506_0708,
        };
        assert!(writer.write(&mut frame, &probe));
        let filter = probe_filter(&writer);
        let at = |offset: u16| offset as usize;
        assert_eq!(
            frame[at(filter.signature_at)..at(filter.signature_at) + 4],
            probe::SIGNATURE
        );
        let stamp = &frame[at(filter.timestamp_at)..at(filter.timestamp_at) + 8];
        assert_eq!(
            u64::from_be_bytes(stamp.try_into().unwrap()),
            probe.timestamp
        );
        let probe = Probe {
            sequence: 0x0a0b_0c0d,
            ..probe
        };
        assert!(writer.write(&mut frame, &probe));
        let sampling = probe_sampling(&writer, 64);
        assert_eq!(sampling.every, 64);
        let sequence = &frame[at(sampling.sequence_at)..at(sampling.sequence_at) + 4];
        assert_eq!(
            u32::from_be_bytes(sequence.try_into().unwrap()),
            probe.sequence
        );
    }

    #[test]
    fn due_times_follow_the_first_rate_then_the_second() {
        assert_eq!(due_seconds(0, 100, 1000.0, 10.0), 0.0);
        assert_eq!(due_seconds(50, 100, 1000.0, 10.0), 0.05);
        assert_eq!(due_seconds(100, 100, 1000.0, 10.0), 0.1);
        assert!((due_seconds(105, 100, 1000.0, 10.0) - 0.6).abs() < 1e-12);
        assert_eq!(due_seconds(105, 100, 1000.0, 0.0), 0.105);
    }

    #[test]
    fn counters_parse_from_ip_json_and_agreement_is_relative() {
        let json = r#"[{"ifname":"wst-t0","stats64":{"rx":{"bytes":1,"packets":12,"dropped":0},"tx":{"bytes":2,"packets":3456,"dropped":78}}}]"#;
        assert_eq!(
            parse_counters(json),
            Some(InterfaceCounters {
                rx_packets: 12,
                tx_packets: 3456,
                tx_dropped: 78
            })
        );
        assert_eq!(parse_counters("[]"), None);
        assert_eq!(parse_counters("not json"), None);
        let check = CounterCheck {
            transmitted: 100_000,
            kernel_tx: 100_050,
            arrived: 99_000,
            kernel_rx: 99_000,
            socket_dropped: 0,
        };
        assert!((check.tx_error() - 0.0005).abs() < 1e-12);
        assert!(check.agrees_within(0.001));
        assert!(!check.agrees_within(0.0001));
        // Frames the interface took and the tester's socket had no room for: counted by the
        // kernel on both sides of the check, so the tester's count plus them must match.
        let overrun = CounterCheck {
            kernel_rx: 99_672,
            socket_dropped: 672,
            ..check
        };
        assert_eq!(overrun.rx_error(), 0.0);
        let unexplained = CounterCheck {
            socket_dropped: 0,
            ..overrun
        };
        assert!(!unexplained.agrees_within(0.001));
        assert_eq!(CounterCheck::default().tx_error(), 0.0);
    }
}
