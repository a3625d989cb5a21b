//! The in-kernel generator: a [`Template`]'s frames sent by
//! [`XdpLiveGenerator`](wirespeed_io::afxdp::XdpLiveGenerator) (`BPF_PROG_TEST_RUN` with live
//! frames), as fast as the kernel runs them or paced, from one thread issuing one system call
//! per call of K frames.
//!
//! The frames are the template's, byte for byte: the program writes each frame's headers
//! ([`Template::head_len`] bytes) from the template's own frame of that pattern (flow, and
//! destination where frames spread over destinations), so every checksum is the template's
//! (valid for IPv4 and IPv6), the program does no arithmetic, and nothing a receiver wrote into
//! a recycled page (a router's TTL decrement and MAC rewrite) stays in the next frame.
//!
//! Each system call has a fixed cost besides its frames: measured on this kernel (6.18, 2-vCPU
//! VM), about 27 ms per call whether it sends 64 frames or 16,384. The kernel sets up and tears
//! down a page pool per call, and the thread is off the CPU for most of that time, which points
//! at a wait such as an RCU grace period in the tear-down (not confirmed). Calls of 16,384
//! frames made the generator 8x slower than calls sized as below. So
//! calls here are sized in *time*: each sends what the generator does in `call_seconds`
//! (measured from the calls before it; the first sends `FIRST_CALL` frames), and the last is
//! trimmed to the time left.
//!
//! At a set rate the program itself paces (`XdpLiveGenerator::paced`: it waits in the kernel
//! until each frame is due), so one call sends the whole run, evenly spaced, and a frame whose
//! turn comes after the deadline is not sent ([`send_paced`]); calls sized in time are for the
//! unpaced generator. What the interface transmitted and dropped is in its counters (see the io
//! module's documentation); "sent" here counts the frames run, a call interrupted by a signal
//! not at all.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use wirespeed_io::afxdp::{
    LiveError, LiveFlowOrder, LiveFlows, LivePaceCounts, LivePacing, XdpLiveGenerator,
};
use wirespeed_packet::cpu::{rdtsc, tsc_hz};

use super::{BlastResult, Template};

/// Frames of the first call, before the generator's speed is known.
pub const FIRST_CALL: u32 = 65536;

/// How to send.
#[derive(Clone, Debug)]
pub struct LiveConfig {
    /// How long one system call should send for (see the module documentation).
    pub call_seconds: f64,
    /// Frames per kernel batch (flushed to the device together), 1..=256.
    pub batch: u32,
    /// Frames per second to offer; `None` for as fast as the kernel runs them.
    pub rate_pps: Option<f64>,
    /// How long to send.
    pub duration: Duration,
    /// Draw each frame's flow at random instead of in turn.
    pub random_flows: bool,
}

impl Default for LiveConfig {
    fn default() -> Self {
        Self {
            call_seconds: 0.25,
            batch: 64,
            rate_pps: None,
            duration: Duration::from_secs(1),
            random_flows: false,
        }
    }
}

/// The heads the live generator writes for `template`: one per frame pattern (flows, or flows
/// times destinations), each the pattern's headers as the template builds them.
pub fn live_flows(template: &Template, random: bool) -> Result<LiveFlows, LiveError> {
    let patterns = template.patterns();
    if patterns > wirespeed_io::afxdp::MAX_LIVE_FLOWS as u64 {
        return Err(LiveError::Flows {
            flows: patterns as usize,
            frame: template.len(),
        });
    }
    let head_len = template.head_len();
    let mut frame = vec![0u8; template.len()];
    let heads = (0..patterns as u32)
        .map(|pattern| {
            template.write(&mut frame, pattern);
            frame[..head_len].to_vec()
        })
        .collect();
    Ok(LiveFlows {
        heads,
        order: if random {
            LiveFlowOrder::Random
        } else {
            LiveFlowOrder::RoundRobin
        },
    })
}

/// Loads the generator for `template` out of interface `target` (of the calling thread's
/// namespace, which must be the thread that sends).
/// paced when `config` sets a rate.
pub fn open(
    target: &str,
    template: &Template,
    config: &LiveConfig,
) -> Result<XdpLiveGenerator, LiveError> {
    let flows = live_flows(template, config.random_flows)?;
    match config.rate_pps {
        None => XdpLiveGenerator::new(target, template.bytes(), &flows, config.batch),
        Some(rate) => {
            let pacing = LivePacing::constant(rate, LATE_TOLERANCE.as_nanos() as u64);
            XdpLiveGenerator::paced(target, template.bytes(), &flows, config.batch, &pacing)
        }
    }
}

/// How late a paced frame may be handed out before it counts as late (the tester's trials use
/// their departure tolerance instead).
pub const LATE_TOLERANCE: Duration = Duration::from_millis(1);

/// What one paced call did ([`send_paced`]).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PacedSend {
    /// Frames run and handed to the target (the pace counts hold those not sent).
    pub sent: u64,
    /// From the first frame to one period after the last, seconds.
    pub seconds: f64,
    pub pace: LivePaceCounts,
    /// A signal ended the call early: the counts are those of the frames it ran.
    pub interrupted: bool,
}

/// Sends `frames` frames with a paced `generator` at `rate` in one call, the first as soon as
/// the call runs; a frame whose turn comes more than `deadline` after the first is not sent.
pub fn send_paced(
    generator: &XdpLiveGenerator,
    rate: f64,
    frames: u32,
    deadline: Duration,
) -> Result<PacedSend, LiveError> {
    generator.start_pacing_frames(0, deadline.as_nanos() as u64, frames)?;
    let interrupted = match generator.send(generator.runs(frames)) {
        Ok(()) => false,
        Err(LiveError::Interrupted) => true,
        Err(error) => return Err(error),
    };
    let pace = generator.pace_counts()?;
    // The frames handed out on time or late (not unsent), up to a signal or the last run.
    let sent = pace.handled.saturating_sub(pace.unsent);
    Ok(PacedSend {
        sent,
        seconds: pace.last_ns.saturating_sub(pace.start_ns) as f64 / 1e9 + 1.0 / rate,
        pace,
        interrupted,
    })
}

/// Sends until the duration is over or `stop` is set; `received` is left for the caller's
/// receiver to fill.
pub fn send(
    generator: &XdpLiveGenerator,
    config: &LiveConfig,
    stop: &AtomicBool,
) -> Result<BlastResult, LiveError> {
    if let Some(rate) = config.rate_pps {
        return send_at(generator, rate, config.duration, stop);
    }
    let hz = tsc_hz() as f64;
    let duration = config.duration.as_secs_f64();
    let mut result = BlastResult::default();
    let start = rdtsc();
    let mut last = start;
    while !stop.load(Ordering::Relaxed) {
        let elapsed = last.wrapping_sub(start) as f64 / hz;
        // What the generator sends in call_seconds at the speed it has shown so far.
        let seconds = config.call_seconds.min(duration - elapsed);
        let frames = if result.sent == 0 {
            FIRST_CALL as f64
        } else {
            result.sent as f64 / elapsed * seconds
        };
        if frames < 1.0 || rdtsc().wrapping_sub(start) as f64 / hz >= duration {
            break;
        }
        let frames = frames.min(u32::MAX as f64) as u32;
        match generator.send(frames) {
            Ok(()) => result.sent += frames as u64,
            Err(LiveError::Interrupted) => break,
            Err(error) => return Err(error),
        }
        last = rdtsc();
    }
    result.seconds = last.wrapping_sub(start) as f64 / hz;
    Ok(result)
}

/// [`send`] at a set rate: paced calls of up to `u32::MAX` frames (one, for any run shorter
/// than an hour at a Mpps); each frame whose turn came after its call's deadline (5 % past its
/// length) counts as not sent.
fn send_at(
    generator: &XdpLiveGenerator,
    rate: f64,
    duration: Duration,
    stop: &AtomicBool,
) -> Result<BlastResult, LiveError> {
    let mut left = (rate * duration.as_secs_f64()).round().max(1.0) as u64;
    let mut result = BlastResult::default();
    while left > 0 && !stop.load(Ordering::Relaxed) {
        let frames = left.min(u64::from(u32::MAX)) as u32;
        let deadline = Duration::from_secs_f64(f64::from(frames) / rate * 1.05);
        let paced = send_paced(generator, rate, frames, deadline)?;
        result.sent += paced.sent;
        result.seconds += paced.seconds;
        if paced.interrupted {
            break;
        }
        left -= u64::from(frames);
    }
    Ok(result)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generator::TemplateConfig;
    use std::net::{IpAddr, Ipv4Addr};

    /// Flow 0's frame with a pattern's fields put in is that pattern's frame: the fields are
    /// all that differ, so the live generator sends the template's frames byte for byte.
    fn check(config: &TemplateConfig) {
        check_template(&Template::new(config).unwrap(), config.flows as usize);
    }

    fn check_template(template: &Template, patterns: usize) {
        let flows = live_flows(template, false).unwrap();
        assert_eq!(flows.heads.len(), patterns);
        let mut want = vec![0u8; template.len()];
        for (flow, head) in flows.heads.iter().enumerate() {
            let mut frame = template.bytes().to_vec();
            frame[..head.len()].copy_from_slice(head);
            template.write(&mut want, flow as u32);
            assert_eq!(frame, want, "flow {flow}");
        }
    }

    #[test]
    fn the_heads_make_every_flow_of_ipv4_ipv6_and_tagged_templates() {
        check(&TemplateConfig {
            flows: 256,
            ..TemplateConfig::default()
        });
        check(&TemplateConfig {
            frame_size: 128,
            flows: 300,
            src_ip: IpAddr::from([0x2001, 2, 0, 0, 0, 0, 0, 1]),
            dst_ip: IpAddr::from([0x2001, 2, 0, 1, 0, 0, 0, 1]),
            ..TemplateConfig::default()
        });
        check(&TemplateConfig {
            flows: 7,
            vlan: Some(10),
            ..TemplateConfig::default()
        });
    }

    #[test]
    fn destinations_and_flows_make_every_pattern_of_a_spread_template() {
        // 4 flows over 6 destinations repeat after 12 frames; with one flow, the destinations.
        let destinations: Vec<_> = (1..=6u8).map(|d| [10, 0, d, 1].into()).collect();
        for (flows, patterns) in [(4, 12), (1, 6)] {
            let spread = Template::new(&TemplateConfig {
                flows,
                ..TemplateConfig::default()
            })
            .unwrap()
            .with_destinations(destinations.clone())
            .unwrap();
            assert_eq!(spread.patterns(), patterns);
            check_template(&spread, patterns as usize);
        }
    }

    #[test]
    fn one_flow_needs_no_table_and_impossible_flows_are_refused() {
        // One flow still has its head written: a receiver may have changed the page.
        let one = Template::new(&TemplateConfig::default()).unwrap();
        assert_eq!(
            live_flows(&one, false).unwrap().heads,
            [one.bytes()[..42].to_vec()]
        );
        let too_spread = Template::new(&TemplateConfig {
            flows: 3,
            ..TemplateConfig::default()
        })
        .unwrap()
        .with_destinations((0..65536u32).map(Ipv4Addr::from).collect())
        .unwrap();
        assert!(matches!(
            live_flows(&too_spread, false),
            Err(LiveError::Flows { flows: 196_608, .. })
        ));
        let many = Template::new(&TemplateConfig {
            flows: 70_000,
            ..TemplateConfig::default()
        })
        .unwrap();
        assert!(matches!(
            live_flows(&many, true),
            Err(LiveError::Flows { flows: 70_000, .. })
        ));
    }
}
