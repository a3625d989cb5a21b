//! A steady trial sent by the kernel ([`SenderKind::XdpLive`]): the template's frames, each
//! with this trial's probe, sent by the in-kernel live generator paced frame by frame
//! ([`LivePacing`]), and counted on the receiving interface by the probe counter.
//!
//! Why: the AF_XDP sender offers about 0.6–1 Mpps on this machine's veths; a DuT forwarding
//! faster (the kernel's XDP redirect, wirespeed's XDP fast path) was measured at the tester's
//! limit, not its own. The live generator sends several Mpps, and paced in the kernel one
//! system call sends the whole trial at the rate asked (see `wirespeed_io`'s `live_pacing`).
//!
//! What differs from the AF_XDP sender, and how the figures stay honest:
//! * Every frame carries the same probe: flow 0, sequence 0, and the trial's start as its TX
//!   timestamp, so the counter counts this trial's frames and not a late one of the trial
//!   before ([`XdpProbeCounter::set_floor`]). There is no per-frame sequence. With
//!   [`ReceiverKind::Stamped`] the program writes the kernel's clock into each frame's TX
//!   timestamp as it leaves instead, the floor is that clock at the trial's start, and the
//!   counter bins every probe's latency on arrival: latency at rates no socket could time.
//! * Nothing waits in the tester: a frame the DuT's ring refuses is dropped by the sending veth
//!   at once (the interface's `tx_dropped`, which [`super::run_in_lab`] reports as refused),
//!   so no DuT can push the load back into the tester and have a slower rate credited.
//! * A generator that ran late (off its core for a while) does not catch up in a burst: the
//!   program starts its schedule again from the late frame ([`catch_up`]). It counts those
//!   frames (`sent_late`), the largest lateness, the run of late frames at the end (`behind`)
//!   and the frames the lost time left unsent at the deadline (`not_sent`): the same
//!   [`Departure`] the AF_XDP sender reports, so a trial the generator could not offer never
//!   passes, unless the DuT lost more of what it was sent than the lateness explains.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use wirespeed_io::afxdp::{
    GAP_FRACTION_BITS, LivePacing, MAX_LIVE_FRAME, MAX_PACING_GAP, MAX_PACING_GAPS,
    XdpLiveGenerator, XdpProbeCounter, kernel_clock_ns, latency_bucket_bounds,
};
use wirespeed_packet::cpu::{rdtsc, tsc_hz};

use super::receive::COUNTER_POLL;
use super::{
    FlowOrder, LATE_GRACE, LATE_SHARE, ReceiverKind, TrialConfig, TrialMeasurement, check,
    departure_tolerance, probe_filter,
};
use crate::generator::Template;
use crate::generator::live::{live_flows, send_paced};
use crate::generator::pacing::{PacingAccuracy, Pattern, Schedule};
use crate::generator::probe::{Probe, ProbeWriter};
use crate::rfc2544::{Departure, TrialOutcome};
use crate::stats::histogram::{LatencyHistogram, LatencySummary};

/// Frames per kernel batch when paced. A batch has a fixed cost (measured on this VM, paced
/// at line rate on the looped pair, load 3–4: 8 frames per batch gave the generator 1.0–1.1
/// Mpps, 32 gave 2.9, 64 1.4–2.7, 256 1.9), and the kernel flushes the redirected frames of a
/// batch every 16 anyway, so bursts stay at 16 frames whatever the batch.
pub const PACED_BATCH: u32 = 32;

/// The longest the generator spins in one run of a [`ReceiverKind::Stamped`] trial (its
/// pacing yields, [`LivePacing::yielding`]). The tester's receive, whose arrivals the counter
/// times, runs on the generator's core, and without kernel preemption only between the
/// generator's runs: spinning whole gaps, a frame's arrival waited for the next frame's due
/// time (p50 745 µs at 1 384 frames/s, one gap, through the XDP redirect).
pub const STAMPED_SPIN: Duration = Duration::from_micros(5);

/// Frames per kernel batch of a [`ReceiverKind::Stamped`] trial at `rate`: the fewest that
/// still keep up, twice over, and at most [`PACED_BATCH`]. Every frame of a batch leaves only
/// when the kernel flushes (every 16 frames or at the batch's end), and the tester's receive,
/// on the generator's core, runs only between batches (no kernel preemption), so a stamped
/// frame waits for its batch: at 0.084 Mpps a 32-frame batch put up to 380 µs into every
/// latency. From the figures above, a batch costs about 6.5 µs and a frame 0.14 µs, so a batch
/// of B frames keeps up with a rate R while B / R >= 6.5 µs + B × 0.14 µs.
pub fn stamped_batch(rate: f64) -> u32 {
    const BATCH_NS: f64 = 6_500.0;
    const FRAME_NS: f64 = 140.0;
    let gap_ns = 1e9 / rate.max(1.0);
    if gap_ns <= FRAME_NS {
        return PACED_BATCH;
    }
    (2.0 * BATCH_NS / (gap_ns - FRAME_NS))
        .ceil()
        .clamp(1.0, f64::from(PACED_BATCH)) as u32
}

/// Whether the live sender can run this trial: a steady rate (not a burst or two phases) of at
/// least [`MIN_RATE`], whose frames the counter counts (no per-frame probe, so no sequence; a
/// latency only stamped in the kernel), of frames that fit a page ([`MAX_LIVE_FRAME`]: jumbo
/// frames go over AF_XDP).
pub fn can_send(config: &TrialConfig, template: &Template) -> bool {
    config.frames.is_none()
        && config.then.is_none()
        && matches!(config.receiver, ReceiverKind::Count | ReceiverKind::Stamped)
        && config.rate >= MIN_RATE
        && template.len() <= MAX_LIVE_FRAME
}

/// The lowest rate the live sender paces (frames per second): its gaps, a Poisson pattern's
/// longest among them, stay within the program's [`MAX_PACING_GAP`].
pub const MIN_RATE: f64 = 1000.0;

/// Sends `config.rate × config.seconds` frames of `template` out of `target` (an interface of
/// the calling thread's namespace; the thread should be pinned) and counts them with
/// `counter`. See the module documentation.
pub fn run_live(
    target: &str,
    counter: &XdpProbeCounter,
    template: &Template,
    config: &TrialConfig,
    stop: &AtomicBool,
) -> Result<TrialMeasurement, String> {
    if !can_send(config, template) {
        return Err(
            "the in-kernel sender offers a steady rate of at least 1000 frames/s counted by the \
             probe counter, of frames up to 3072 bytes; bursts, two-phase trials, lower rates, \
             jumbo frames and per-frame probes need the AF_XDP sender"
                .into(),
        );
    }
    let writer = check(template, config).map_err(|error| error.to_string())?;
    let offered = (config.rate * config.seconds).round().max(1.0);
    if offered > f64::from(u32::MAX) {
        return Err(format!(
            "{offered} frames do not fit one in-kernel send (at most {}); shorten the trial",
            u32::MAX
        ));
    }
    let offered = offered as u64;
    let tolerance = departure_tolerance(config.seconds);
    let stamped = config.receiver == ReceiverKind::Stamped;
    let mut pacing = pacing(config, catch_up(config.rate, tolerance).as_nanos() as u64)?;
    if stamped {
        pacing = pacing.yielding(STAMPED_SPIN.as_nanos() as u64);
    }
    let flows = live_flows(
        template,
        matches!(config.flow_order, FlowOrder::Random { .. }),
    )
    .map_err(|error| error.to_string())?;
    let timestamp_at = probe_filter(&writer).timestamp_at.into();
    let mut generator = match stamped {
        true => XdpLiveGenerator::paced_stamped(
            target,
            template.bytes(),
            &flows,
            stamped_batch(config.rate),
            &pacing,
            timestamp_at,
        ),
        false => XdpLiveGenerator::paced(target, template.bytes(), &flows, PACED_BATCH, &pacing),
    }
    .map_err(|error| error.to_string())?;
    let reading = |error: std::io::Error| {
        format!(
            "reading the probe counter on {}: {error}",
            counter.interface()
        )
    };
    let trial_start = rdtsc();
    stamp(&mut generator, &writer, trial_start)?;
    // Stamped frames carry the kernel's clock, so their floor is that clock now.
    let floor = match stamped {
        true => kernel_clock_ns(),
        false => trial_start,
    };
    counter.set_floor(floor).map_err(reading)?;
    let before = counter.counts().map_err(reading)?;
    // The schedule starts with the first frame, after the kernel's set-up of the call; a
    // frame whose turn comes after the deadline the AF_XDP sender keeps is not sent.
    let deadline = Duration::from_secs_f64(config.seconds * (1.0 + LATE_SHARE) + LATE_GRACE);
    let paced =
        send_paced(&generator, config.rate, offered as u32, deadline).map_err(|e| e.to_string())?;
    let (pace, interrupted) = (paced.pace, paced.interrupted);
    let sending_ended = rdtsc();
    // Until every frame has arrived (or the linger ends), one read every COUNTER_POLL.
    let hz = tsc_hz();
    let linger_end = sending_ended + (config.linger.as_secs_f64() * hz as f64) as u64;
    let (mut fresh, mut last_fresh) = (0, sending_ended);
    while !interrupted && fresh < offered && rdtsc() < linger_end {
        std::thread::sleep(COUNTER_POLL);
        let now = counter
            .probes()
            .map_err(reading)?
            .packets
            .saturating_sub(before.probes.packets);
        if now > fresh {
            (fresh, last_fresh) = (now, rdtsc());
        }
    }
    let after = counter.counts().map_err(reading)?;
    let latency = match counter.latencies() {
        Some(buckets) => histogram(&buckets.map_err(reading)?).summary(),
        None => LatencySummary::default(),
    };
    let (seconds, sent) = (paced.seconds, paced.sent);
    let departed_rate = sent as f64 / seconds;
    let counted = after.probes.packets.saturating_sub(before.probes.packets);
    Ok(TrialMeasurement {
        outcome: TrialOutcome {
            sent: offered,
            // A duplicate counts twice: capped so that loss is never negative.
            received: counted.min(offered),
            seconds,
            last_loss: None,
            departure: Some(Departure {
                scheduled_rate: config.rate,
                departed_rate,
                lag_seconds: pace.max_lateness_ns as f64 / 1e9,
                tolerance_seconds: tolerance.as_secs_f64(),
                sent_late: pace.late,
                held_back: 0,
                behind: pace.behind,
                not_sent: Some(offered - sent),
            }),
            // The counter sees only what the receiving ring let through: the ring's refusals
            // are read around the trial ([`super::lab::run_in_lab`]).
            receiver_refused: 0,
        },
        transmitted: sent,
        unsent: offered - sent,
        arrived: after.frames().saturating_sub(before.frames()),
        stale: after.stale.packets.saturating_sub(before.stale.packets),
        foreign: after.foreign.packets.saturating_sub(before.foreign.packets),
        drain_seconds: last_fresh.saturating_sub(sending_ended) as f64 / hz as f64,
        receiver: match stamped {
            true => ReceiverKind::Stamped,
            false => ReceiverKind::Count,
        },
        sender: super::SenderKind::XdpLive,
        latency,
        pacing: PacingAccuracy {
            asked_rate: config.rate,
            achieved_rate: departed_rate,
            lateness_max_ns: pace.max_lateness_ns as f64,
            ..PacingAccuracy::default()
        },
        interrupted: interrupted || stop.load(Ordering::Relaxed),
        ..TrialMeasurement::default()
    })
}

/// How late a frame may be before the program starts the schedule again from it
/// ([`LivePacing::tolerance_ns`]): the time of [`CATCH_UP_FRAMES`] at `rate`, at least 10 µs
/// and at most the departure `tolerance`. A longer catch-up is a burst that a DuT's 256-frame
/// ring need not absorb.
fn catch_up(rate: f64, tolerance: Duration) -> Duration {
    Duration::from_secs_f64(CATCH_UP_FRAMES / rate).clamp(Duration::from_micros(10), tolerance)
}

/// The most frames a late generator sends back to back to catch up (a quarter of a veth's
/// ring).
pub const CATCH_UP_FRAMES: f64 = 64.0;

/// The gaps of the trial's pattern: one for a constant rate; for the others a cycle of
/// [`MAX_PACING_GAPS`] drawn from the same schedule the AF_XDP sender follows (a burst pattern
/// only when its bursts divide the cycle).
fn pacing(config: &TrialConfig, tolerance_ns: u64) -> Result<LivePacing, String> {
    let gaps = match config.pattern {
        Pattern::Cbr => return Ok(LivePacing::constant(config.rate, tolerance_ns)),
        Pattern::Burst { size, .. }
            if !(size.is_power_of_two() && size as usize <= MAX_PACING_GAPS) =>
        {
            return Err(format!(
                "the in-kernel sender cycles through {MAX_PACING_GAPS} gaps: a burst pattern needs \
                 a power-of-two burst size up to that (got {size}), or the AF_XDP sender"
            ));
        }
        _ => MAX_PACING_GAPS,
    };
    // Ticks of 2^-16 ns, the program's own resolution: the gaps keep their fractions.
    let hz = 1_000_000_000 << GAP_FRACTION_BITS;
    let mut schedule =
        Schedule::new(config.pattern, config.rate, hz, 0).map_err(|e| e.to_string())?;
    let mut last = schedule.next().unwrap_or(0);
    let mut seconds = Vec::with_capacity(gaps);
    for _ in 0..gaps {
        let next = schedule.next().unwrap_or(last);
        // A Poisson gap beyond the program's longest wait (once in 10^43 at MIN_RATE) is cut.
        let gap = next.saturating_sub(last) as f64 / hz as f64;
        seconds.push(gap.min(MAX_PACING_GAP.as_secs_f64()));
        last = next;
    }
    Ok(LivePacing::from_gaps(seconds, tolerance_ns))
}

/// The counter's latency buckets as a histogram: each bucket's probes at its middle (a bucket
/// is at most 1/32 of its value wide, [`latency_bucket_bounds`]).
fn histogram(buckets: &[u64]) -> LatencyHistogram {
    let mut histogram = LatencyHistogram::new();
    for (index, &count) in buckets.iter().enumerate().filter(|(_, count)| **count > 0) {
        let (low, high) = latency_bucket_bounds(index as u32);
        histogram.record_n(low + (high - low) / 2, count);
    }
    histogram
}

/// Writes the trial's probe into the generator's frame: flow 0, sequence 0, stamped with the
/// trial's start.
fn stamp(
    generator: &mut XdpLiveGenerator,
    writer: &ProbeWriter,
    trial_start: u64,
) -> Result<(), String> {
    let mut frame = generator.frame().to_vec();
    writer.write(
        &mut frame,
        &Probe {
            flow: 0,
            sequence: 0,
            timestamp: trial_start,
        },
    );
    let at = writer.offset();
    generator
        .write_payload(at, &frame[at..])
        .map_err(|error| error.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stamped_trials_batches_shrink_with_its_rate_and_still_keep_up() {
        assert_eq!(stamped_batch(84_000.0), 2);
        assert_eq!(stamped_batch(1e6), 16);
        assert_eq!(stamped_batch(5e6), PACED_BATCH);
        assert_eq!(stamped_batch(1e9), PACED_BATCH);
        assert_eq!(stamped_batch(1000.0), 1);
        for rate in [1e3, 1e4, 1e5, 5e5, 1e6, 2e6, 3e6] {
            let batch = f64::from(stamped_batch(rate));
            let (needed, cost) = (batch / rate, 6.5e-6 + batch * 0.14e-6);
            assert!(needed >= cost || batch == f64::from(PACED_BATCH), "{rate}");
        }
    }

    #[test]
    fn the_counters_buckets_become_a_histogram_at_their_middles() {
        let mut buckets = vec![0u64; wirespeed_io::afxdp::LATENCY_BUCKETS as usize];
        buckets[20] = 3;
        let index = wirespeed_io::afxdp::latency_bucket(21_800);
        buckets[index as usize] = 1;
        let histogram = histogram(&buckets);
        assert_eq!(histogram.count(), 4);
        let summary = histogram.summary();
        assert_eq!(summary.min_ns, 20);
        let (low, high) = latency_bucket_bounds(index);
        assert!((low..=high).contains(&summary.max_ns), "{}", summary.max_ns);
    }
}
