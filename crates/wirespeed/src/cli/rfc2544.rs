//! `wirespeed bench rfc2544`: the RFC 2544 tests of one DuT in the namespace lab (throughput and
//! latency by default; frame loss rate, back-to-back, system recovery and reset on request), with
//! the tester calibrated on its own looped-back pair first; writes report.json, results.csv,
//! latency.csv, trials.csv and report.html.
//!
//! ```sh
//! wirespeed bench rfc2544 --dut linux-bridge --frame-sizes 64,512,1518 --trial-seconds 5 --out reports/bridge
//! wirespeed bench rfc2544 --tests throughput,latency,loss,back-to-back,recovery \
//!     --pattern cbr,poisson --flows 1,256 --random-flows --frame-sizes 64 --out reports/all
//! wirespeed bench rfc2544 --tests throughput --ndr-runs 2 --frame-sizes 64 --out reports/repeat
//! wirespeed bench rfc2544 --dut linux-router --tests reset --pattern burst:32 --out reports/reset
//! wirespeed bench rfc2544 --calibrate-only --frame-sizes 64,1518 --out reports/calibration
//! ```
//!
//! The work is [`wirespeed_tester::suite`]'s; this module turns flags into its configuration,
//! prints progress lines with an ETA on stderr, and on Ctrl-C lets the running trial end early,
//! takes the DuT and the lab down and still writes the (partial) report. `wirespeed demo` runs
//! the same path with short settings.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use anyhow::{Context, Result, bail};
use clap::Args;
use wirespeed_lab::{Testbed, TestbedConfig};
use wirespeed_tester::bench::placement::{Plan, SessionShield};
use wirespeed_tester::bench::shield::CoreShield;
use wirespeed_tester::dut::Dut;
use wirespeed_tester::generator::pacing::Pattern;
use wirespeed_tester::report::{Report, Setup, csv, html, json, wire_bits_per_second};
use wirespeed_tester::rfc2544::Vote;
use wirespeed_tester::suite::{Progress, Resolution, SearchKind, SuiteConfig, Tests, Traffic};
use wirespeed_tester::trial::{DEFAULT_SAMPLE_EVERY, FlowOrder, ReceiverKind, SenderKind};

use super::bench::dut;
use super::numbers;
use super::site::{Site, SiteArgs};

#[derive(Args)]
pub struct Rfc2544Args {
    /// The device under test, by function and path: wirespeed-xconnect-afxdp (or -xdp,
    /// -afpacket, -afpacket-v2), wirespeed-bridge-, -router-, -openflow- with -xdp or -afxdp,
    /// linux-bridge, linux-router, linux-router-nft[:N], ovs, ovs-normal, ovs-afpacket,
    /// xdp-redirect, dpdk-testpmd, or linux-router-tbf[:MBIT] (the router shaped to MBIT
    /// Mbit/s: a reference of known capacity for checking the tester); or `external` (a device
    /// the tester does not configure, wired to `--tx` and `--rx`).
    #[arg(long, default_value = "wirespeed-xconnect-afxdp")]
    dut: String,
    /// Where the DuT is: the lab, external, or a host over ssh.
    #[command(flatten)]
    site: Box<SiteArgs>,
    /// Frame sizes with FCS, bytes (64..=9018; the lab's MTU is raised for frames above 1518).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "64,128,256,512,1024,1280,1518",
        value_parser = numbers::frame_size()
    )]
    frame_sizes: Vec<u16>,
    /// Throughput search: `binary` (RFC 2544) or `mlr` (MLRsearch, NDR and PDR).
    #[arg(long, default_value = "binary")]
    search: String,
    /// Seconds per trial (RFC 2544 asks for 60), 0.001..=86400.
    #[arg(long, default_value_t = 10.0, value_parser = numbers::seconds())]
    trial_seconds: f64,
    /// Seconds per calibration trial (0.001..=86400).
    #[arg(long, default_value_t = 1.0, value_parser = numbers::seconds())]
    calibration_seconds: f64,
    /// Largest loss ratio that still counts as no drop (0 for RFC 2544).
    #[arg(long, default_value_t = 0.0)]
    loss_tolerance: f64,
    /// How a rate's trials decide whether it passes, and how they receive.
    #[command(flatten)]
    rate_trials: RateTrialArgs,
    /// The links to the DuT.
    #[command(flatten)]
    link: LinkArgs,
    /// Search resolution: frames/s, or a percentage of the NDR (`2%`: the search stops when
    /// the lowest rate that failed is within 2% above the highest that passed).
    #[arg(long, default_value = "2%")]
    resolution: String,
    /// Departure patterns, comma-separated (every test runs with each): `cbr`, `poisson`, or
    /// `burst:SIZE[@MPPS]`, SIZE frames back to back (or spaced at MPPS within the burst, which
    /// must be at least every rate tried), the bursts spaced so that the mean is the rate.
    #[arg(long, default_value = "cbr")]
    pattern: String,
    /// Seed of the Poisson pattern (and of random flows).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Flows (UDP source ports), comma-separated counts in 1..=65536 (every test runs with
    /// each).
    #[arg(long, value_delimiter = ',', default_value = "1", value_parser = numbers::flows())]
    flows: Vec<u32>,
    /// Draw each frame's flow at random instead of in turn (for flow counts above 1).
    #[arg(long)]
    random_flows: bool,
    /// IP version of the frames: 4 or 6 (every router DuT is set up for both).
    #[arg(long, default_value = "4")]
    ip: super::bench::IpArg,
    /// The tests beyond throughput and latency, and NDR repeatability.
    #[command(flatten)]
    more: Box<MoreTests>,
    /// Loads for latency, percent of the NDR (0.001..=100), comma-separated (latency at the NDR
    /// is always measured); empty for none.
    #[arg(long, default_value = "10,50,90")]
    latency_loads: String,
    /// Repeats of the final rate, for a spread (0..=1000).
    #[arg(long, default_value_t = 0, value_parser = numbers::whole(0, u32::from(numbers::REPEATS.1)))]
    repeats: u32,
    /// Directory for the report files.
    #[arg(long, default_value = "reports/rfc2544")]
    out: PathBuf,
    /// Name prefix of the lab (at most 6 characters).
    #[arg(long, default_value = "wsr")]
    prefix: String,
    /// Core of the generator thread.
    #[arg(long, default_value_t = 0)]
    generator_cpu: usize,
    /// Core of the DuT.
    #[arg(long, default_value_t = 1)]
    dut_cpu: usize,
    /// Nice value of the generator thread and the NAPI threads of the DuT's ingress and the
    /// tester's receive (`off`: leave them alone). At -20 other jobs on a shared machine barely
    /// preempt them: a preempted generator sends in bursts, a preempted NAPI thread stalls the
    /// path, and either shows as DuT loss. The DuT's own threads keep their priority.
    #[arg(long, default_value = "-20", allow_hyphen_values = true, value_parser = numbers::nice_or_off())]
    nice: numbers::Nice,
    /// Core of the tester's receive NAPI thread (default: the generator's core). Not the DuT
    /// core: the lab's veths push back (see `wirespeed_lab::Testbed::backpressure`), so a DuT
    /// can only transmit as fast as this thread drains, and a DuT worker at SCHED_FIFO on the
    /// same core would starve the very thread its transmissions wait for (measured: NDR 0.08
    /// instead of 0.3 Mpps).
    #[arg(long)]
    receiver_cpu: Option<usize>,
    /// Keep the DuT core for the DuT while the run lasts, as `cset shield` does: other
    /// processes, this one's unpinned threads, the kernel threads that may move and the unbound
    /// workqueues leave it, and get it back after (the report's commands say what moved).
    /// Without kernel preemption a real-time NAPI thread waits behind whatever is inside the
    /// kernel on its core, and `d0`'s 256-frame ring overflows: for zero-loss rates on a machine
    /// that runs other work. Not for two benchmarks at once: each would narrow the other.
    #[arg(long)]
    shield_dut_core: bool,
}

/// The links to the DuT, as `bench rfc2544` and `bench compare` take them.
#[derive(Args)]
pub(super) struct LinkArgs {
    /// The speed of the links to the DuT, Gbit/s (0.001..=1000): the line rate (preamble and
    /// gap counted) every search starts from and never exceeds, and what the report's shares
    /// of the line rate are of. The lab's veths have no speed; give that of the link an
    /// external DuT sits behind (1 for gigabit Ethernet), and its searches start there.
    #[arg(long, value_name = "GBIT", default_value_t = 10.0, value_parser = numbers::real(0.001, 1000.0))]
    link_speed: f64,
}

impl LinkArgs {
    /// The links' speed in bits per second, the suite's `link_bits_per_second`.
    pub(super) fn bits_per_second(&self) -> f64 {
        self.link_speed * 1e9
    }
}

/// How the throughput searches judge a rate from its trials (MLRsearch's goal exceed ratio and
/// goal duration sum, [`wirespeed_tester::rfc2544::vote`]) and how their trials receive.
/// `bench rfc2544` and `bench compare` share them.
#[derive(Args)]
pub(super) struct RateTrialArgs {
    /// Largest share of a rate's trial time that may lose frames for the rate to pass: 0.5 is a
    /// majority vote (FD.io CSIT's NDR), 0 fails a rate on its first lossy trial (RFC 2544). The
    /// NDR is then the highest rate whose trials mostly lost nothing, not one where no trial
    /// did. (The old `--retries N` is `--exceed-ratio N/(N+1) --duration-sum` of N+1 trials.)
    #[arg(long, default_value_t = 0.5)]
    exceed_ratio: f64,
    /// Trial time, seconds, a rate is asked for before the vote must decide (it decides as
    /// soon as the missing trials could not change it); default nine trials' time. At most one
    /// trial's length: every trial decides alone.
    #[arg(long)]
    duration_sum: Option<f64>,
    /// How the throughput search's trials and the calibration's limit receive: `count` (an XDP
    /// program on the receiving interface counts this trial's probes in the kernel: loss
    /// only, at next to no cost to the tester's core) or `probe` (an AF_XDP socket parses
    /// every frame: loss, sequence and latency). Latency trials use `--latency-receiver`.
    #[arg(long, default_value = "count", value_parser = ReceiverKind::parse)]
    pub(super) receiver: ReceiverKind,
    /// How the throughput search's trials and the calibration's limit send: `xdp-live` (the
    /// kernel sends, paced frame by frame: several Mpps, so a fast DuT is not measured at the
    /// tester's limit; with `--receiver count` only) or `afxdp` (the tester's AF_XDP socket,
    /// about 1 Mpps on veths). Latency, loss-rate, back-to-back and recovery trials always
    /// send over AF_XDP: they need a probe in every frame.
    #[arg(long, default_value = "xdp-live", value_parser = SenderKind::parse)]
    pub(super) generator: SenderKind,
    /// How the latency trials (at the NDR and the latency loads) and the calibration's floor
    /// receive: `stamped` (the default with `--generator xdp-live`: the in-kernel sender
    /// stamps every frame with the kernel's clock as it leaves, and the XDP probe counter
    /// counts every probe and bins its latency in the kernel as it arrives: every frame timed,
    /// at any rate the kernel sends), `sampled` (the default with `--generator afxdp`: the
    /// counter hands one probe in `--sample-every` to an AF_XDP socket that timestamps it) or
    /// `probe` (every frame parsed and timestamped by the socket, on the tester's core). Loss
    /// rate, back-to-back and recovery always use `probe`: they need every sequence number.
    #[arg(long, value_parser = parse_latency_receiver)]
    latency_receiver: Option<ReceiverKind>,
    /// With `--latency-receiver sampled`: one probe in this many (a power of two) is
    /// timestamped, those whose per-flow sequence number is a multiple of it.
    #[arg(long, default_value_t = DEFAULT_SAMPLE_EVERY)]
    sample_every: u32,
}

impl RateTrialArgs {
    /// The latency trials' receiver, from `--latency-receiver` and `--sample-every`.
    pub(super) fn latency_receiver(&self) -> Result<ReceiverKind> {
        anyhow::ensure!(
            self.sample_every.is_power_of_two() && self.sample_every <= 1 << 31,
            "--sample-every is a power of two (1, 2, 4, ... 2^31)"
        );
        let sampled = ReceiverKind::Sampled {
            every: self.sample_every,
        };
        Ok(match (self.latency_receiver, self.generator) {
            (None, SenderKind::XdpLive) => ReceiverKind::Stamped,
            (None, SenderKind::Afxdp) | (Some(ReceiverKind::Sampled { .. }), _) => sampled,
            (Some(ReceiverKind::Stamped), SenderKind::Afxdp) => anyhow::bail!(
                "--latency-receiver stamped: the frames are stamped by the in-kernel sender; use \
                 --generator xdp-live, or --latency-receiver sampled"
            ),
            (Some(other), _) => other,
        })
    }

    pub(super) fn vote(&self, trial_seconds: f64) -> Result<Vote> {
        anyhow::ensure!(
            (0.0..1.0).contains(&self.exceed_ratio),
            "--exceed-ratio is a ratio in 0..1 (0.5 for a majority vote)"
        );
        let duration_sum = self.duration_sum.unwrap_or(9.0 * trial_seconds);
        anyhow::ensure!(
            (0.0..=100.0 * trial_seconds).contains(&duration_sum),
            "--duration-sum is 0 to 100 trials' time"
        );
        Ok(Vote {
            exceed_ratio: self.exceed_ratio,
            duration_sum,
        })
    }
}

/// `stamped`, `sampled` or `probe`: the receivers that measure latency (`--sample-every` sets
/// the sampled one's ratio).
fn parse_latency_receiver(name: &str) -> Result<ReceiverKind, String> {
    match ReceiverKind::parse(name)? {
        ReceiverKind::Count => {
            Err("a counter alone measures no latency; use stamped, sampled or probe".into())
        }
        kind => Ok(kind),
    }
}

/// Which tests and their settings (boxed in [`Rfc2544Args`] to keep the command small).
#[derive(Args)]
struct MoreTests {
    /// Tests to run, comma-separated: throughput, latency, loss, back-to-back, recovery,
    /// reset, or all. `reset` (RFC 2544 §26.6) offers the NDR while the DuT is reset: the
    /// wirespeed DuTs restart their process, the kernel DuTs (linux-bridge, the linux-routers,
    /// ovs) take their ingress link down and up; other DuTs get a note.
    #[arg(long, default_value = "throughput,latency")]
    tests: String,
    /// Frame loss rate: step between loads, percent of the starting rate (0.001..=100).
    #[arg(long, default_value_t = 10.0, value_parser = numbers::real(0.001, 100.0))]
    loss_step: f64,
    /// Back-to-back: the longest burst tried lasts this many seconds at the starting rate.
    #[arg(long, default_value_t = 0.5, value_parser = numbers::seconds())]
    burst_max_seconds: f64,
    /// Back-to-back searches, recovery and reset trials per frame size, for a spread
    /// (1..=1000).
    #[arg(long, default_value_t = 3, value_parser = numbers::repeats::<u32>())]
    test_repeats: u32,
    /// System recovery: seconds of overload at 110 % of the NDR.
    #[arg(long, default_value_t = 10.0, value_parser = numbers::seconds())]
    overload_seconds: f64,
    /// System recovery: seconds at the reduced rate after the overload.
    #[arg(long, default_value_t = 10.0, value_parser = numbers::seconds())]
    recovery_seconds: f64,
    /// Reset: seconds of each trial, long enough for the DuT to come back (a DuT still
    /// losing frames at the end is reported as a lower bound), 0.001..=86400.
    #[arg(long, default_value_t = 10.0, value_parser = numbers::seconds())]
    reset_seconds: f64,
    /// Reset: seconds into each trial at which the DuT is reset (less than --reset-seconds).
    #[arg(long, default_value_t = 2.0, value_parser = numbers::seconds())]
    reset_after: f64,
    /// Throughput searches in a row per frame size; 2 or more reports how well the NDR repeats
    /// (1..=1000).
    #[arg(long, default_value_t = 1, value_parser = numbers::repeats::<u32>())]
    ndr_runs: u32,
    /// After each trial, the longest wait in seconds for frames still inside the DuT (a trial
    /// stops waiting as soon as everything it sent has arrived; RFC 2544 §23 waits 2 s), 0..=60.
    #[arg(long, default_value_t = 1.0, value_parser = numbers::real(0.0, 60.0))]
    drain_seconds: f64,
    /// Offered rates for latency, Mpps (0.000001..=1000), comma-separated, instead of the NDR
    /// and `--latency-loads`: the same load in every run (e.g. to compare receivers). No search
    /// runs unless `--tests` asks for throughput or recovery.
    #[arg(long, value_delimiter = ',', value_parser = numbers::real(1e-6, 1000.0))]
    latency_rates: Vec<f64>,
    /// Only calibrate: measure the tester on its looped-back pair (its maximum rate, pacing
    /// and latency floor per frame size) without setting up a DuT.
    #[arg(long)]
    calibrate_only: bool,
}

/// Everything a run needs, from flags or from the demo.
pub struct Options {
    pub dut: String,
    pub site: Site,
    pub prefix: String,
    pub suite: SuiteConfig,
}

impl Rfc2544Args {
    fn options(&self) -> Result<Options> {
        let search = match self.search.as_str() {
            "binary" => SearchKind::Binary,
            "mlr" => SearchKind::Mlr,
            other => bail!("unknown search {other:?}; use binary or mlr"),
        };
        let patterns = self
            .pattern
            .split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .map(|p| parse_pattern(p, self.seed))
            .collect::<Result<Vec<_>>>()?;
        // The in-kernel sender cycles through a table of gaps: bursts must divide it.
        if self.rate_trials.generator == SenderKind::XdpLive
            && let Some(size) = patterns.iter().find_map(|p| match p {
                Pattern::Burst { size, .. }
                    if !(size.is_power_of_two()
                        && *size as usize <= wirespeed_io::afxdp::MAX_PACING_GAPS) =>
                {
                    Some(*size)
                }
                _ => None,
            })
        {
            bail!(
                "--pattern burst:{size}: the in-kernel sender (--generator xdp-live) sends \
                 bursts of a power of two up to {}; give such a size, or --generator afxdp",
                wirespeed_io::afxdp::MAX_PACING_GAPS
            );
        }
        let (Some(&pattern), Some(&flows)) = (patterns.first(), self.flows.first()) else {
            bail!("give at least one pattern and one flow count");
        };
        let flow_order = if self.random_flows {
            FlowOrder::Random { seed: self.seed }
        } else {
            FlowOrder::RoundRobin
        };
        let mut traffic = Vec::new();
        for &pattern in &patterns {
            for &flows in &self.flows {
                traffic.push(Traffic {
                    pattern,
                    flows,
                    flow_order,
                });
            }
        }
        let tests = Tests::parse(&self.more.tests).map_err(anyhow::Error::msg)?;
        let resolution = parse_resolution(&self.resolution)?;
        let latency_loads = self
            .latency_loads
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(|s| {
                numbers::real(0.001, 100.0)(s)
                    .map_err(|e| anyhow::anyhow!("--latency-loads {s:?}: {e}"))
            })
            .collect::<Result<Vec<_>>>()?;
        anyhow::ensure!(
            (0.0..1.0).contains(&self.loss_tolerance),
            "the loss tolerance is a ratio in 0..1 (0.005 for 0.5 %)"
        );
        anyhow::ensure!(!self.frame_sizes.is_empty(), "give at least one frame size");
        self.ip.check_frame_sizes(&self.frame_sizes)?;
        anyhow::ensure!(
            !tests.reset || self.more.reset_after < self.more.reset_seconds,
            "--reset-after {} must come before the end of the trial, --reset-seconds {}",
            self.more.reset_after,
            self.more.reset_seconds
        );
        let dut = super::bench::dut_names(std::slice::from_ref(&self.dut)).remove(0);
        Ok(Options {
            site: self.site.site(std::slice::from_ref(&dut))?,
            dut,
            prefix: self.prefix.clone(),
            suite: SuiteConfig {
                frame_sizes: self.frame_sizes.clone(),
                link_bits_per_second: self.link.bits_per_second(),
                search,
                trial_seconds: self.trial_seconds,
                calibration_seconds: self.calibration_seconds,
                loss_tolerance: self.loss_tolerance,
                resolution,
                pattern,
                flows,
                flow_order,
                traffic: if traffic.len() > 1 {
                    traffic
                } else {
                    Vec::new()
                },
                tests,
                loss_step_percent: self.more.loss_step,
                burst_max_seconds: self.more.burst_max_seconds,
                test_repeats: self.more.test_repeats,
                overload_seconds: self.more.overload_seconds,
                recovery_seconds: self.more.recovery_seconds,
                reset_seconds: self.more.reset_seconds,
                reset_after_seconds: self.more.reset_after,
                ndr_runs: self.more.ndr_runs,
                calibrate_only: self.more.calibrate_only,
                drain_seconds: self.more.drain_seconds,
                receiver: self.rate_trials.receiver,
                sender: self.rate_trials.generator,
                ip: self.ip.into(),
                latency_receiver: self.rate_trials.latency_receiver()?,
                vote: self.rate_trials.vote(self.trial_seconds)?,
                latency_loads,
                latency_rates: self
                    .more
                    .latency_rates
                    .iter()
                    .map(|mpps| mpps * 1e6)
                    .collect(),
                repeats: self.repeats,
                plan: Plan {
                    generator_cpu: self.generator_cpu,
                    dut_cpu: self.dut_cpu,
                    receiver_cpu: self.receiver_cpu.unwrap_or(self.generator_cpu),
                    nice: self.nice.0,
                },
                shield_dut_core: self.shield_dut_core,
            },
        })
    }
}

/// `cbr`, `poisson` (drawn from `seed`), `burst:SIZE` (back to back) or `burst:SIZE@MPPS`.
pub(super) fn parse_pattern(text: &str, seed: u64) -> Result<Pattern> {
    let fix = "use cbr, poisson, burst:SIZE or burst:SIZE@MPPS (e.g. burst:32@5)";
    match text.trim() {
        "cbr" => Ok(Pattern::Cbr),
        "poisson" => Ok(Pattern::Poisson { seed }),
        burst if burst.starts_with("burst:") => {
            let spec = &burst["burst:".len()..];
            let (size, inner) = match spec.split_once('@') {
                Some((size, mpps)) => (size, Some(mpps)),
                None => (spec, None),
            };
            let size = numbers::whole(1u32, 1 << 20)(size)
                .map_err(|e| anyhow::anyhow!("--pattern {burst}: the burst size: {e}; {fix}"))?;
            let inner_rate = match inner {
                Some(mpps) => {
                    numbers::real(1e-6, 1000.0)(mpps).map_err(|e| {
                        anyhow::anyhow!("--pattern {burst}: the rate within a burst, Mpps: {e}")
                    })? * 1e6
                }
                None => f64::INFINITY,
            };
            Ok(Pattern::Burst { size, inner_rate })
        }
        other => bail!("--pattern {other:?}: unknown pattern; {fix}"),
    }
}

/// The lab every suite run measures in: two tester <-> DuT pairs, the looped-back calibration
/// pair, and veths that push back ([`Testbed::backpressure`]) so a trial's loss is the DuT's
/// and not a NAPI thread of a shared core falling 256 frames behind. Their MTU holds the
/// largest of `frame_sizes` (9000 for jumbo frames of 9018 bytes).
pub(super) fn suite_lab(prefix: &str, frame_sizes: &[u16]) -> Result<Testbed> {
    let largest = frame_sizes.iter().copied().max().unwrap_or(64);
    let mut lab = Testbed::up(&TestbedConfig {
        prefix: prefix.to_owned(),
        pairs: 2,
        queues: 1,
        calibration: true,
        mtu: numbers::mtu_for_frame(largest),
    })?;
    lab.backpressure()?;
    Ok(lab)
}

/// `2%` or `10000`.
pub(super) fn parse_resolution(text: &str) -> Result<Resolution> {
    let text = text.trim();
    if let Some(percent) = text.strip_suffix('%') {
        let value: f64 = percent
            .trim()
            .parse()
            .with_context(|| format!("resolution {text:?} is not a percentage"))?;
        anyhow::ensure!(
            value > 0.0 && value < 100.0,
            "a resolution percentage is in (0, 100)"
        );
        Ok(Resolution::Relative(value / 100.0))
    } else {
        let value: f64 = text
            .parse()
            .with_context(|| format!("resolution {text:?} is neither frames/s nor a percentage"))?;
        anyhow::ensure!(value > 0.0, "the resolution must be positive");
        Ok(Resolution::Absolute(value))
    }
}

pub fn run(args: Rfc2544Args) -> Result<()> {
    let options = args.options()?;
    let stop = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(signal, Arc::clone(&stop))
            .context("installing the signal handler")?;
    }
    let config_text = format!("{:#?}", options.suite);
    let report = execute(&options, &config_text, &stop)?;
    println!("{}", summary_table(&report));
    for path in write(&report, &args.out)? {
        println!("wrote {}", path.display());
    }
    Ok(())
}

/// Builds the lab (with the calibration pair), runs the suite against the DuT, and takes
/// everything down again; the report is returned also after Ctrl-C. An external DuT is
/// measured on the tester's own interfaces, without a lab.
pub fn execute(options: &Options, config_text: &str, stop: &AtomicBool) -> Result<Report> {
    if options.prefix.len() > 6 {
        bail!(
            "prefix {:?} is longer than 6 characters: NAPI thread names (napi/<prefix>-d0-<id>) \
             must stay distinct within the kernel's 15 bytes",
            options.prefix
        );
    }
    let plan = options.suite.plan;
    if options.suite.shield_dut_core {
        CoreShield::check(&plan).map_err(|why| anyhow::anyhow!("--shield-dut-core: {why}"))?;
    }
    let _shield = SessionShield::new(plan.nice);
    let cores = wirespeed_io::thread::available_cores();
    if plan.generator_cpu.max(plan.dut_cpu).max(plan.receiver_cpu) >= cores {
        bail!("this machine has {cores} core(s); the placement {plan:?} needs more");
    }
    let mut progress = |p: &Progress| {
        eprintln!(
            "[{}/~{} {} elapsed, ETA {}] {}",
            p.done,
            p.total,
            clock(p.elapsed.as_secs()),
            clock(p.eta.as_secs()),
            p.line
        );
    };
    if let Some(external) = options.site.external() {
        if let Some(reason) = wirespeed_lab::unavailable_reason() {
            bail!("an RFC 2544 run sends through AF_XDP sockets, but {reason}");
        }
        let (mut device, wiring) = external?;
        let setup = setup(config_text, Some(device.as_ref()));
        let report = wirespeed_tester::suite::run(
            &wiring,
            None,
            device.as_mut(),
            &options.suite,
            setup,
            stop,
            &mut progress,
        );
        return Ok(report);
    }
    let binary =
        std::env::current_exe().context("finding this executable for the wirespeed DuTs")?;
    let mut device = options
        .site
        .place(dut(&options.dut, &binary, plan.dut_cpu)?)?;
    // Every argument was checked before the rights to build a lab are.
    if let Some(reason) = wirespeed_lab::unavailable_reason() {
        bail!("an RFC 2544 run builds a lab, but {reason}");
    }
    let lab = suite_lab(&options.prefix, &options.suite.frame_sizes)?;
    let wiring = options.site.wiring(&lab)?;
    // After the lab: a remote DuT's host may be reachable only through it.
    let setup = setup(config_text, Some(device.as_ref()));
    let report = wirespeed_tester::suite::run(
        &wiring,
        Some(&lab),
        device.as_mut(),
        &options.suite,
        setup,
        stop,
        &mut progress,
    );
    drop(device);
    lab.teardown().context("taking the lab down")?;
    Ok(report)
}

fn clock(seconds: u64) -> String {
    format!("{}:{:02}", seconds / 60, seconds % 60)
}

/// What only the command knows: when, the command line, versions, the machine; and the DuT's
/// version, asked where it runs, when there is one DuT.
pub(super) fn setup(config_text: &str, dut: Option<&dyn Dut>) -> Setup {
    let output = |program: &str, args: &[&str]| {
        wirespeed_lab::run(program, args)
            .map(|s| s.trim().to_string())
            .unwrap_or_else(|_| "unknown".into())
    };
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let field = |name: &str| {
        cpuinfo
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_once(':'))
            .map(|(_, v)| v.trim().to_string())
    };
    let mut versions = std::collections::BTreeMap::new();
    versions.insert("wirespeed".into(), env!("CARGO_PKG_VERSION").into());
    versions.insert("iproute2".into(), output("ip", &["-V"]));
    let mut setup = Setup {
        started: output("date", &["-u", "+%Y-%m-%dT%H:%M:%SZ"]),
        command_line: std::env::args().collect(),
        config: config_text.into(),
        versions,
        kernel: output("uname", &["-srvm"]),
        cpu_model: field("model name").unwrap_or_else(|| "unknown".into()),
        cpu_mhz: field("cpu MHz").and_then(|v| v.parse().ok()).unwrap_or(0.0),
        ..Setup::default()
    };
    setup.dut.version = match dut {
        Some(dut) if dut.name().starts_with("wirespeed") => {
            format!("wirespeed {}", env!("CARGO_PKG_VERSION"))
        }
        Some(dut) => dut
            .version()
            .unwrap_or_else(|| "unknown (not set up by the tester)".into()),
        None => String::new(),
    };
    setup
}

/// Writes report.json, results.csv, latency.csv, trials.csv and report.html into `dir`.
pub fn write(report: &Report, dir: &Path) -> Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let files = [
        ("report.json", json::to_json(report)),
        ("results.csv", csv::results_csv(report)),
        ("latency.csv", csv::latency_csv(report)),
        ("trials.csv", csv::trials_csv(report)),
        ("report.html", html::to_html(report)),
    ];
    let mut written = Vec::new();
    for (name, text) in files {
        let path = dir.join(name);
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
        written.push(path);
    }
    Ok(written)
}

/// The summary table: per frame size the NDR, who limited it, latency raw and minus the floor,
/// and the agreement with the kernel's counters.
pub fn summary_table(report: &Report) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{}", report.title);
    if !report.setup.search.is_empty() {
        let _ = writeln!(out, "search: {}", report.setup.search);
    }
    if let Some(calibration) = &report.calibration {
        let _ = writeln!(
            out,
            "tester alone (looped-back veth): {}",
            calibration
                .throughput
                .iter()
                .map(|(size, fps)| {
                    let floor = calibration.floor_ns(*size).unwrap_or(0) as f64 / 1e3;
                    format!("{size} B {:.3} Mpps, floor {floor:.1} µs", fps / 1e6)
                })
                .collect::<Vec<_>>()
                .join("; ")
        );
        if let Some(p) = &calibration.pacing {
            let _ = writeln!(
                out,
                "tester pacing at 10 % of its maximum: asked {:.4} Mpps, achieved {:.4} Mpps \
                 ({:+.3} %), gaps sd {:.1} ns, lateness mean {:.1} ns",
                p.asked_rate / 1e6,
                p.achieved_rate / 1e6,
                100.0 * (p.achieved_rate - p.asked_rate) / p.asked_rate.max(1e-9),
                p.gap_stddev_ns,
                p.lateness_mean_ns
            );
        }
    }
    if let Some(stamps) = &report.timestamps {
        let clocks: Vec<String> = stamps
            .clocks
            .iter()
            .map(|c| {
                format!(
                    "{} resolution {:.1} ns, read {:.1} ns",
                    c.name, c.resolution_ns, c.read_cost_ns
                )
            })
            .collect();
        let _ = writeln!(out, "timestamps: {}; {}", stamps.used, clocks.join("; "));
    }
    let _ = writeln!(
        out,
        "| frame | NDR Mpps | NDR Gbit/s | limit | p50 / p99 µs | at Mpps | samples | minus floor | counters vs kernel |"
    );
    let _ = writeln!(
        out,
        "| ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: |"
    );
    for result in &report.results {
        let ndr = result.ndr();
        // The last latency trial: at the NDR after a search, at the highest of
        // `--latency-rates` without one; the column after says which rate it was.
        let last = result.latency.last();
        let at = last.map(|l| &l.summary);
        let floor = report
            .calibration
            .as_ref()
            .and_then(|c| c.floor_ns(result.frame_size));
        let us = |v: u64| v as f64 / 1e3;
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            result.label(),
            ndr.map_or("-".into(), |n| format!("{:.3}", n / 1e6)),
            ndr.map_or("-".into(), |n| format!(
                "{:.3}",
                wire_bits_per_second(n, result.frame_size) / 1e9
            )),
            result.limit.map_or("-", |l| l.label()),
            at.map_or("-".into(), |s| format!(
                "{:.1} / {:.1}",
                us(s.p50_ns),
                us(s.p99_ns)
            )),
            last.map_or("-".into(), |l| format!("{:.3}", l.rate / 1e6)),
            at.map_or("-".into(), |s| s.count.to_string()),
            at.zip(floor).map_or("-".into(), |(s, f)| format!(
                "{:.1} / {:.1}",
                us(s.p50_ns.saturating_sub(f)),
                us(s.p99_ns.saturating_sub(f))
            )),
            result.counters.map_or("-".into(), |c| format!(
                "tx {:.3} %, rx {:.3} %",
                100.0 * c.tx_error(),
                100.0 * c.rx_error()
            )),
        );
    }
    for result in &report.results {
        let label = result.label();
        if let Some(difference) = result.ndr_difference() {
            let runs: Vec<String> = result
                .ndr_runs
                .iter()
                .map(|n| format!("{:.4}", n / 1e6))
                .collect();
            let _ = writeln!(
                out,
                "{label}: NDR of {} searches in a row: {} Mpps, {:.2} % apart",
                runs.len(),
                runs.join(", "),
                100.0 * difference
            );
        }
        if let Some(loss) = &result.loss_rate {
            let points: Vec<String> = loss
                .points
                .iter()
                .map(|p| format!("{:.0} %: {:.3} %", p.percent, 100.0 * p.loss_ratio))
                .collect();
            let _ = writeln!(out, "{label}: frame loss rate {}", points.join(", "));
        }
        if let Some(b2b) = &result.back_to_back {
            let _ = writeln!(
                out,
                "{label}: back-to-back burst min / median / max {:.0} / {:.0} / {:.0} frames{}, \
                 buffer {:.1} µs{}",
                b2b.burst.min,
                b2b.burst.median,
                b2b.burst.max,
                if b2b.unbounded { " (unbounded)" } else { "" },
                b2b.implied_buffer_seconds * 1e6,
                b2b.corrected_buffer_seconds
                    .map_or(String::new(), |c| format!(" (corrected {:.1} µs)", c * 1e6))
            );
        }
        if let Some(recovery) = &result.recovery {
            let _ = writeln!(
                out,
                "{label}: recovery after {:.3} Mpps overload: min / median / max {:.3} / {:.3} / {:.3} s over {} trials{}",
                recovery.overload_rate / 1e6,
                recovery.time.min,
                recovery.time.median,
                recovery.time.max,
                recovery.time.count,
                if recovery.not_overloaded {
                    " (not overloaded in some trial)"
                } else {
                    ""
                }
            );
        }
        if let Some(reset) = &result.reset {
            let _ = writeln!(
                out,
                "{label}: reset ({}) at {:.3} Mpps: min / median / max {:.3} / {:.3} / {:.3} s \
                 over {} trials{}",
                reset.method,
                reset.rate / 1e6,
                reset.time.min,
                reset.time.median,
                reset.time.max,
                reset.time.count,
                match (reset.unrecovered, reset.generator_behind) {
                    (true, _) =>
                        " (lost every frame from the reset to the end of a trial: a lower bound)",
                    (false, true) => {
                        " (the generator fell behind its schedule in a trial: its time is too long)"
                    }
                    _ => "",
                }
            );
        }
    }
    for note in &report.notes {
        let _ = writeln!(out, "note: {note}");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolutions_are_frames_per_second_or_percentages() {
        assert_eq!(parse_resolution("2%").unwrap(), Resolution::Relative(0.02));
        assert_eq!(
            parse_resolution("10000").unwrap(),
            Resolution::Absolute(10_000.0)
        );
        assert!(parse_resolution("0%").is_err());
        assert!(parse_resolution("fast").is_err());
        assert_eq!(clock(125), "2:05");
    }

    #[test]
    fn patterns_are_cbr_poisson_or_bursts_with_an_optional_inner_rate() {
        assert_eq!(parse_pattern("cbr", 3).unwrap(), Pattern::Cbr);
        assert_eq!(
            parse_pattern(" poisson", 3).unwrap(),
            Pattern::Poisson { seed: 3 }
        );
        assert_eq!(
            parse_pattern("burst:32", 3).unwrap(),
            Pattern::Burst {
                size: 32,
                inner_rate: f64::INFINITY
            }
        );
        assert_eq!(
            parse_pattern("burst:8@2.5", 3).unwrap(),
            Pattern::Burst {
                size: 8,
                inner_rate: 2.5e6
            }
        );
        for bad in [
            "burst:0",
            "burst:",
            "burst:8@0",
            "burst:8@x",
            "bursts",
            "CBR",
        ] {
            let error = parse_pattern(bad, 3).unwrap_err().to_string();
            assert!(error.contains("--pattern"), "{bad}: {error}");
        }
    }

    fn rate_trials(exceed_ratio: f64, duration_sum: Option<f64>) -> RateTrialArgs {
        RateTrialArgs {
            exceed_ratio,
            duration_sum,
            receiver: ReceiverKind::Count,
            generator: SenderKind::XdpLive,
            latency_receiver: None,
            sample_every: DEFAULT_SAMPLE_EVERY,
        }
    }

    #[test]
    fn latency_trials_are_stamped_in_the_kernel_when_it_sends_and_sampled_otherwise() {
        let mut args = rate_trials(0.5, None);
        assert_eq!(args.latency_receiver().unwrap(), ReceiverKind::Stamped);
        args.generator = SenderKind::Afxdp;
        assert_eq!(
            args.latency_receiver().unwrap(),
            ReceiverKind::Sampled {
                every: DEFAULT_SAMPLE_EVERY
            }
        );
        args.latency_receiver = Some(parse_latency_receiver("stamped").unwrap());
        let error = args.latency_receiver().unwrap_err().to_string();
        assert!(error.contains("--generator xdp-live"), "{error}");
    }

    #[test]
    fn latency_trials_sample_one_probe_in_a_power_of_two_or_receive_every_frame() {
        let mut args = rate_trials(0.5, None);
        args.latency_receiver = Some(parse_latency_receiver("sampled").unwrap());
        assert_eq!(
            args.latency_receiver().unwrap(),
            ReceiverKind::Sampled {
                every: DEFAULT_SAMPLE_EVERY
            }
        );
        args.sample_every = 48;
        assert!(args.latency_receiver().is_err());
        args.sample_every = 0;
        assert!(args.latency_receiver().is_err());
        assert!(parse_latency_receiver("count").is_err());
        args.latency_receiver = Some(parse_latency_receiver("probe").unwrap());
        args.sample_every = 1;
        assert_eq!(args.latency_receiver().unwrap(), ReceiverKind::Probe);
    }

    #[test]
    fn the_vote_defaults_to_a_majority_of_nine_trials_and_rejects_a_ratio_of_one() {
        let vote = |exceed_ratio: f64, duration_sum: Option<f64>| {
            rate_trials(exceed_ratio, duration_sum).vote(2.0)
        };
        assert_eq!(vote(0.5, None).unwrap(), Vote::majority(9, 2.0));
        assert_eq!(vote(0.0, Some(0.0)).unwrap().max_trials_per_load(2.0), 1);
        assert!(vote(1.0, None).is_err());
        assert!(vote(-0.1, None).is_err());
        assert!(vote(0.5, Some(201.0)).is_err());
    }
}
