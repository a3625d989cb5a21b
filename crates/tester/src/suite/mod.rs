//! The RFC 2544 suite in the lab: calibrate the tester on its looped-back pair, set the DuT up,
//! and for each frame size search the NDR and measure latency at chosen loads, with real
//! trials ([`crate::trial::run_in_lab`]) behind the pure searches of [`crate::rfc2544`].
//!
//! **Calibration.** Per frame size the tester offers the line rate of the reference link to its
//! own looped-back veth pair; what arrives per second is the most it can send and receive (its
//! limit), and the DuT's searches start there (offering more than the tester can make measures
//! nothing). A second trial at 10 % of that limit gives the bare path's latency, the floor that
//! is subtracted from the DuT's. A DuT whose NDR reaches [`crate::report::TESTER_SHARE`] of the tester's limit
//! is marked tester-limited (its own limit is higher than this tester can show), otherwise
//! DuT-limited.
//!
//! **The other tests.** After the search and latency, the run can measure the frame loss rate
//! (from the starting rate down in steps until two trials lose nothing), back-to-back (bursts at
//! the starting rate; several searches for a spread, the buffer time from the NDR) and system
//! recovery (110 % of the NDR, then half that, repeated for a spread) and reset (the NDR offered
//! while the DuT is reset by [`Dut::reset`] from a thread beside the trial; a DuT the tester
//! cannot reset gets a note instead, and one that was reset has its new threads placed again),
//! each through the same trials ([`crate::trial`] offers bursts and two-phase loads). Bursts are always sent at even
//! spacing (back-to-back frames have no pattern); everything else uses the run's pattern. The
//! starting rate is the lower of the line rate and the tester's own limit: offering more than
//! the tester can make measures the tester.
//!
//! **Traffic kinds.** A run can repeat everything per kind of traffic ([`Traffic`]: CBR or
//! Poisson, one flow or many, in turn or drawn at random) as seed 002 §4 asks; each result names
//! its kind. **Repeatability.** With `ndr_runs` > 1 the throughput search runs that many times
//! in a row and the result keeps every NDR (the goal: two in a row within ±3 %).
//!
//! **Interruption.** When `stop` is set, the running trial ends early and every later trial
//! returns at once as a failure without sending; the frame size in progress keeps only its real
//! trials and loses its answer, a note says so, and the report is still complete up to there.
//!
//! **Receivers.** The throughput searches' trials and the calibration's line-rate trial receive
//! with `config.receiver` (by default the XDP probe counter, which costs the tester next to
//! nothing, so the tester's limit and a DuT's NDR are not held down by the tester's own
//! receive; both use the same receiver, so "tester-limited" still compares like with like).
//! The latency trials (at the NDR and the latency loads) and the calibration's floor, which is
//! subtracted from them, receive with `config.latency_receiver` (by default the counter
//! sampling one probe in 64 to a socket, so the latency at the NDR is not the tester's own
//! receive queue). The frame loss rate, back-to-back, recovery and reset tests always receive with
//! the AF_XDP probe receiver: they need every frame's sequence number
//! ([`crate::trial::ReceiverKind`]).
//!
//! Every trial's counts are checked against the kernel's interface counters; the report keeps
//! the check of the trial at the NDR and the worst disagreement of any trial. (Overloaded search
//! trials can disagree by more: the kernel drops some of what the AF_XDP TX ring took when the
//! DuT's ring is full, and the tester counts those as sent and lost.)

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use wirespeed_lab::Testbed;

use crate::bench::generators::{CpuTime, cpu_time};
use crate::bench::placement::{
    Placed, check_threads, make_kernel_dut_realtime, make_receiver_realtime, place_kernel,
    place_napi_niced,
};
use crate::bench::shield::CoreShield;
use crate::bench::wakeups;
use crate::dut::probe::verify;
use crate::dut::{Dut, Host, Wiring};
use crate::generator::pacing::Pattern;
use crate::generator::{Template, TemplateConfig};
use crate::report::{Calibration, CorePin, FrameSizeResult, LatencyAtLoad, Limit, Report, Setup};
use crate::rfc2544::{
    BackToBackConfig, Load, LossRateConfig, MlrConfig, MlrTarget, RecoveryConfig, ResetConfig,
    ThroughputConfig, TrialOutcome, TrialSpec, back_to_back, line_rate, loss_rate, mlrsearch,
    recovery, reset, throughput,
};
use crate::timestamp::TimestampProbe;
use crate::trial::{
    CounterCheck, LabTrial, Phase, ReceiverKind, SenderKind, TrialConfig, TrialMeasurement,
    TrialPorts, run_in_lab,
};

mod config;
mod frame_size;

pub use config::{Resolution, SearchKind, SuiteConfig, TEST_NAMES, Tests, Traffic};
use frame_size::frame_size;

/// A progress line with what is known of the time left.
#[derive(Clone, Debug, PartialEq)]
pub struct Progress {
    /// Trials done so far and the estimate of the total.
    pub done: usize,
    pub total: usize,
    pub elapsed: Duration,
    /// Estimated time left.
    pub eta: Duration,
    /// What the last trial was and what it measured.
    pub line: String,
}

/// Counts trials and estimates the time left from the mean time per trial so far.
struct Tracker<'a> {
    started: Instant,
    done: usize,
    total: usize,
    report: &'a mut dyn FnMut(&Progress),
}

impl Tracker<'_> {
    fn trial(&mut self, line: String) {
        self.done += 1;
        self.total = self.total.max(self.done);
        let elapsed = self.started.elapsed();
        let per_trial = elapsed.as_secs_f64() / self.done as f64;
        let eta = Duration::from_secs_f64(per_trial * (self.total - self.done) as f64);
        (self.report)(&Progress {
            done: self.done,
            total: self.total,
            elapsed,
            eta,
            line,
        });
    }
}

/// Estimated number of trials for a run of `config` (calibration included).
pub fn estimate_trials(config: &SuiteConfig) -> usize {
    let share = match config.resolution {
        Resolution::Relative(share) => share,
        // Unknown until calibrated; assume 1 % of the start.
        Resolution::Absolute(_) => 0.01,
    }
    .clamp(1e-6, 1.0);
    let search = match config.search {
        // About half the rates pass and half fail, each after its vote's trials.
        SearchKind::Binary => {
            let steps = (1.0 / share).log2().ceil() as usize + 1;
            let (passing, failing) = config.vote.unanimous_trials(config.trial_seconds);
            (steps * (passing + failing) as usize).div_ceil(2)
        }
        SearchKind::Mlr => 2 * ((1.0 / share).log2().ceil() as usize + 1),
    };
    if config.calibrate_only {
        return 2 * config.frame_sizes.len();
    }
    let tests = config.tests;
    let searches = if config.searches() {
        config.ndr_runs.max(1) as usize * (search + config.repeats as usize)
    } else {
        0
    };
    let latency = if !tests.latency {
        0
    } else if config.latency_rates.is_empty() {
        config.latency_loads.len() + 1
    } else {
        config.latency_rates.len()
    };
    // Loss: until two clean trials, guess half the steps. Back-to-back: about 8 bursts a search.
    let loss = if tests.loss {
        (50.0 / config.loss_step_percent.clamp(0.1, 100.0)).ceil() as usize + 2
    } else {
        0
    };
    let repeats = config.test_repeats.max(1) as usize;
    let bursts = if tests.back_to_back { 8 * repeats } else { 0 };
    let recoveries = if tests.recovery { repeats } else { 0 };
    let resets = if tests.reset { repeats } else { 0 };
    config.frame_sizes.len()
        * (2 + config.kinds().len() * (searches + latency + loss + bursts + recoveries + resets))
}

/// Which receiver a run of `config` uses for which trials, as its report says.
pub fn receivers(config: &SuiteConfig) -> String {
    let live = config.sender == SenderKind::XdpLive
        && matches!(config.receiver, ReceiverKind::Count | ReceiverKind::Stamped);
    format!(
        "throughput searches and the calibration's limit: {}, sent by {}; latency (at the NDR, \
         at the loads, the calibration's floor): {}; loss rate, back-to-back, recovery: {}; \
         these sent by the AF_XDP sender",
        config.receiver.label(),
        if live {
            "the in-kernel live-frames sender (xdp-live, paced per frame in the kernel)"
        } else {
            "the AF_XDP sender"
        },
        config.latency_receiver.label(),
        ReceiverKind::Probe.label()
    )
}

/// Runs the whole suite against `dut`, wired as `wiring` says, and returns the report, also
/// when stopped (partial, with a note). `lab` is the testbed the wiring is in, whose
/// calibration pair measures the tester first; `None` for an external DuT, wired to the
/// tester's own interfaces. `setup` comes with what only the caller knows (command line,
/// configuration, versions); the rest is filled in here.
pub fn run(
    wiring: &Wiring,
    lab: Option<&Testbed>,
    dut: &mut dyn Dut,
    config: &SuiteConfig,
    setup: Setup,
    stop: &AtomicBool,
    progress: &mut dyn FnMut(&Progress),
) -> Report {
    let mut report = Report::new(format!("{}, RFC 2544", dut.name()), setup);
    report.setup.link_bits_per_second = config.link_bits_per_second;
    let kinds = config.kinds();
    report.setup.traffic = format!(
        "{}; UDP/IPv{}, every frame carries a probe",
        kinds
            .iter()
            .map(Traffic::label)
            .collect::<Vec<_>>()
            .join("; "),
        config.ip.number()
    );
    report.setup.receiver = receivers(config);
    report.setup.search = config.search_summary();
    report.setup.timestamp_source = "TSC (TX and RX in the tester process)".into();
    report.setup.tsc_hz = wirespeed_packet::cpu::tsc_hz();
    report.setup.timestamp_resolution_ns = 1e9 / report.setup.tsc_hz.max(1) as f64;
    let mut tracker = Tracker {
        started: Instant::now(),
        done: 0,
        total: estimate_trials(config),
        report: progress,
    };
    let timestamps = TimestampProbe::run(&wiring.tester_ns, &wiring.egress.tester_if, true);
    report.setup.timestamp_source = format!("{}: {}", timestamps.used, timestamps.reason);
    if let Some(resolution) = timestamps.resolution_ns().filter(|r| r.is_finite()) {
        // To 0.01 ns: the measurement is no finer than that.
        report.setup.timestamp_resolution_ns = (resolution * 100.0).round() / 100.0;
    }
    report.timestamps = Some(timestamps);
    let mut pins: Vec<Placed> = Vec::new();
    let mut commands: Vec<String> = lab.map(|lab| lab.commands().to_vec()).unwrap_or_default();
    // Asked for: the DuT core for the DuT alone while the run lasts, where the DuT runs on
    // this machine (dropped, and everything moved put back, when this function returns).
    let shield = (config.shield_dut_core && matches!(wiring.dut_host, Some(Host::Local)))
        .then(|| CoreShield::raise(&config.plan))
        .flatten();
    if config.shield_dut_core {
        commands.push(shield.as_ref().map_or_else(
            || "# --shield-dut-core: nothing to move off the DuT core".to_owned(),
            |shield| shield.summary().to_owned(),
        ));
    }
    if matches!(wiring.dut_host, Some(Host::Local)) && !stop.load(Ordering::Relaxed) {
        probe_dut_core(config, &mut report);
    }
    let stolen = |cpu| cpu_time(cpu, CpuTime::Steal);
    let steal_before = [config.plan.dut_cpu, config.plan.generator_cpu].map(stolen);
    if let Some((lab, pair)) = lab.and_then(|lab| Some((lab, lab.calibration.as_ref()?))) {
        match calibrate(
            lab,
            pair,
            config,
            stop,
            &mut tracker,
            &mut pins,
            &mut commands,
        ) {
            Ok(calibration) => report.calibration = Some(calibration),
            Err(error) => report.notes.push(format!("calibration failed: {error}")),
        }
    } else {
        report.notes.push(
            "no calibration pair (no lab, or one without it): results are not marked DuT- or \
             tester-limited"
                .into(),
        );
    }
    let logged = dut.commands().len();
    if config.calibrate_only {
        report.title = "tester calibration (looped-back veth, no DuT)".into();
        report
            .notes
            .push("calibration only: no DuT was set up or measured".into());
    } else if !stop.load(Ordering::Relaxed) {
        match prepare(dut, wiring, config, &mut pins, &mut commands) {
            Ok(()) => {
                for &size in &config.frame_sizes {
                    for kind in &kinds {
                        if stop.load(Ordering::Relaxed) {
                            break;
                        }
                        let mut result = frame_size(
                            wiring,
                            &mut *dut,
                            size,
                            &config.with(*kind),
                            report.calibration.as_ref(),
                            stop,
                            &mut tracker,
                            &mut report.notes,
                            &mut pins,
                            &mut commands,
                        );
                        if !result.1.is_empty() {
                            report.setup.xdp_mode = format!("tester ports: AF_XDP ({})", result.1);
                        }
                        if kinds.len() > 1 {
                            result.0.traffic = kind.label();
                        }
                        report.results.push(result.0);
                    }
                }
            }
            Err(error) => report.notes.push(error),
        }
    }
    if !config.calibrate_only
        && let Err(error) = dut.teardown()
    {
        report.notes.push(error.to_string());
    }
    let steal_after = [config.plan.dut_cpu, config.plan.generator_cpu].map(stolen);
    if let ([Some(dut_before), Some(generator_before)], [Some(dut), Some(generator)]) =
        (steal_before, steal_after)
    {
        let (dut, generator) = (
            dut.saturating_sub(dut_before),
            generator.saturating_sub(generator_before),
        );
        if dut + generator > 0 {
            report.notes.push(steal_note(dut, generator));
        }
    }
    if stop.load(Ordering::Relaxed) {
        report.notes.push(
            "interrupted (Ctrl-C): the run stopped early; results cover the frame sizes finished"
                .into(),
        );
    }
    report.setup.dut.name = dut.name();
    report.setup.dut.host = crate::dut::location(wiring, &dut.host());
    // What exactly ran (software, port types, rule counts, a shaper's rate), after the version
    // the caller found.
    let description = dut.description();
    if description != report.setup.dut.name {
        report.setup.dut.version = format!("{}; {description}", report.setup.dut.version);
    }
    report.setup.dut.commands = dut.commands().get(logged..).unwrap_or_default().to_vec();
    report.setup.dut.output = dut.output().unwrap_or_default().to_owned();
    report.setup.config.push_str(&format!(
        "\n# lab and placement commands\n{}",
        commands.join("\n")
    ));
    let mut seen = Vec::new();
    for placed in pins {
        if seen.contains(&placed.thread) {
            continue;
        }
        seen.push(placed.thread.clone());
        report.setup.core_pinning.push(CorePin {
            core: placed.cpus.parse().unwrap_or(u32::MAX),
            thread: placed.thread,
        });
    }
    report
}

/// Sets the DuT up, proves it forwards, and places its threads.
fn prepare(
    dut: &mut dyn Dut,
    wiring: &Wiring,
    config: &SuiteConfig,
    pins: &mut Vec<Placed>,
    commands: &mut Vec<String>,
) -> Result<(), String> {
    dut.setup(wiring).map_err(|error| error.to_string())?;
    verify(dut, wiring, 4, Duration::from_secs(10)).map_err(|error| error.to_string())?;
    place(dut, wiring, config, pins, commands)
}

/// Places the DuT's threads and the tester's receive thread.
fn place(
    dut: &dyn Dut,
    wiring: &Wiring,
    config: &SuiteConfig,
    pins: &mut Vec<Placed>,
    commands: &mut Vec<String>,
) -> Result<(), String> {
    pins.extend(place_kernel(wiring, &config.plan, commands).map_err(|e| e.to_string())?);
    if let Some(pid) = dut.pid() {
        pins.extend(
            check_threads(pid, dut.worker_prefix(), config.plan.dut_cpu)
                .map_err(|e| e.to_string())?,
        );
    }
    if dut.forwards_in_ingress_napi() {
        make_kernel_dut_realtime(wiring, &config.plan, commands).map_err(|e| e.to_string())?;
    }
    make_receiver_realtime(&wiring.egress.tester_if, &config.plan, commands)
        .map_err(|e| e.to_string())?;
    Ok(())
}

fn trial_config(config: &SuiteConfig, rate: f64, seconds: f64) -> TrialConfig {
    TrialConfig {
        rate,
        seconds,
        pattern: config.pattern,
        flow_order: config.flow_order,
        linger: Duration::from_secs_f64(config.drain_seconds.max(0.0)),
        generator_nice: config.plan.nice,
        sender: config.sender,
        ..TrialConfig::default()
    }
}

/// The trial that offers `load`.
pub fn load_config(config: &SuiteConfig, load: Load) -> TrialConfig {
    match load {
        Load::Rate { rate, seconds } => trial_config(config, rate, seconds),
        Load::Burst { frames, rate } => TrialConfig {
            frames: Some(frames),
            pattern: Pattern::Cbr,
            ..trial_config(config, rate, (frames as f64 / rate.max(1.0)).max(1e-3))
        },
        Load::Step {
            first_rate,
            first_seconds,
            then_rate,
            then_seconds,
        } => TrialConfig {
            then: Some(Phase {
                rate: then_rate,
                seconds: then_seconds,
            }),
            ..trial_config(config, first_rate, first_seconds)
        },
    }
}

/// A note when a latency trial's sender could not offer its load: the latency trials send over
/// AF_XDP (they need a timestamp in every probe), which offers about 1 Mpps here, and an NDR
/// the in-kernel sender found can be far above that. The figure is then the latency at what
/// the sender did offer, and the report says so.
fn unoffered_latency_load(size: u16, rate: f64, m: &TrialMeasurement) -> Option<String> {
    let unoffered = m.refused + m.unsent;
    (unoffered * 100 > m.outcome.sent).then(|| {
        format!(
            "{size} B: latency at {:.3} Mpps was measured at less: the {} sender could not \
             offer {:.1} % of the frames (its TX ring refused them or their time passed), so \
             the figure is the latency at about {:.3} Mpps",
            rate / 1e6,
            m.sender.name(),
            100.0 * unoffered as f64 / m.outcome.sent.max(1) as f64,
            m.transmitted as f64 / m.outcome.seconds.max(1e-9) / 1e6,
        )
    })
}

fn describe(what: &str, size: u16, trial: &LabTrial) -> String {
    let m = &trial.measurement;
    let counted = m.receiver != ReceiverKind::Probe;
    let departed = m.outcome.departure.map_or(String::new(), |d| {
        let mut line = format!(
            ", departed {:.4} Mpps (lag {:.2} ms",
            d.departed_rate / 1e6,
            d.lag_seconds * 1e3
        );
        if d.held_back > 0 {
            line += &format!(
                ", {} held back past {:.1} ms",
                d.held_back,
                d.tolerance_seconds * 1e3
            );
        }
        if d.behind > 0 {
            line += &format!(", the generator {} frames behind at the end", d.behind);
        }
        line + ")"
    });
    let refused = match m.sender {
        SenderKind::Afxdp => "refused by the tester's TX ring",
        SenderKind::XdpLive => "refused by the DuT's ring",
    };
    let sent = format!(
        "{size} B {what}: {} offered {:.4} Mpps{departed}, {} {:.3} Mpps, loss {:.4} % ({} lost: \
         {} {refused}, {} not sent in time, {} refused by the tester's receive",
        m.sender.name(),
        m.outcome.sent as f64 / m.outcome.seconds.max(1e-9) / 1e6,
        if counted { "counted" } else { "received" },
        m.outcome.received_rate() / 1e6,
        100.0 * m.outcome.loss_ratio(),
        m.outcome.lost(),
        m.refused,
        m.unsent,
        m.outcome.receiver_refused,
    );
    let drain = m.drain_seconds * 1e3;
    if let ReceiverKind::Sampled { every } = m.receiver {
        return format!(
            "{sent}), p50 {:.1} µs of {} samples (1 in {every}; {} dropped by their socket), \
             last count {drain:.1} ms after sending",
            m.latency.p50_ns as f64 / 1e3,
            m.latency.count,
            m.samples_dropped,
        );
    }
    if m.receiver == ReceiverKind::Stamped {
        return format!(
            "{sent}), p50 {:.1} µs of {} probes stamped in the kernel, last count {drain:.1} ms \
             after sending",
            m.latency.p50_ns as f64 / 1e3,
            m.latency.count,
        );
    }
    if counted {
        return format!("{sent}), last count {drain:.1} ms after sending");
    }
    format!(
        "{sent}, {} dropped by its RX socket), p50 {:.1} µs, last arrival {drain:.1} ms after \
         sending",
        m.receiver_dropped,
        m.latency.p50_ns as f64 / 1e3,
    )
}

fn calibrate(
    lab: &Testbed,
    pair: &wirespeed_lab::CalibrationPair,
    config: &SuiteConfig,
    stop: &AtomicBool,
    tracker: &mut Tracker,
    pins: &mut Vec<Placed>,
    commands: &mut Vec<String>,
) -> Result<Calibration, String> {
    pins.extend(
        place_napi_niced(
            &lab.tester_ns,
            &pair.receiver_if,
            config.plan.receiver_cpu,
            config.plan.nice,
            commands,
        )
        .map_err(|error| error.to_string())?,
    );
    make_receiver_realtime(&pair.receiver_if, &config.plan, commands)
        .map_err(|error| error.to_string())?;
    let ports = TrialPorts::looped(&lab.tester_ns, pair);
    let mut calibration = Calibration::default();
    for &size in &config.frame_sizes {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let template = Template::new(&TemplateConfig {
            frame_size: size,
            src_mac: pair.sender_mac,
            dst_mac: pair.receiver_mac,
            flows: config.flows,
            ..TemplateConfig::default()
        })
        .map_err(|error| error.to_string())?;
        let line = line_rate(config.link_bits_per_second, size as u32);
        let cpu = config.plan.generator_cpu;
        let full = run_in_lab(
            &ports,
            &template,
            &TrialConfig {
                receiver: config.receiver,
                ..trial_config(config, line, config.calibration_seconds)
            },
            cpu,
            stop,
        )?;
        tracker.trial(describe("calibration at line rate", size, &full));
        let max = full.measurement.outcome.received_rate();
        if max <= 0.0 {
            return Err(format!(
                "the tester received nothing on its own looped-back pair at {size} B"
            ));
        }
        calibration.throughput.push((size as u32, max));
        let floor = run_in_lab(
            &ports,
            &template,
            &TrialConfig {
                receiver: config.latency_receiver,
                ..trial_config(config, max * 0.1, config.calibration_seconds)
            },
            cpu,
            stop,
        )?;
        tracker.trial(describe("calibration floor at 10 %", size, &floor));
        if calibration.latency.count == 0 {
            calibration.latency = floor.measurement.latency.clone();
            calibration.pacing = Some(floor.measurement.pacing);
        }
        calibration
            .latency_by_size
            .push((size as u32, floor.measurement.latency));
    }
    Ok(calibration)
}

/// Measures how late the DuT's core wakes a real-time thread ([`wakeups::probe`], one second)
/// into the report's setup, with a note when a stop seen would overflow a veth DuT's ring within
/// the rates searched.
fn probe_dut_core(config: &SuiteConfig, report: &mut Report) {
    let interval = Duration::from_micros(200);
    match wakeups::probe(config.plan.dut_cpu, Duration::from_secs(1), interval) {
        Ok(found) => {
            if found.max_us >= 300.0 {
                report.notes.push(format!(
                    "before the searches the DuT's core woke a real-time thread up to {:.2} ms \
                     late ({:.1} times a second at least 0.3 ms late): a stop that long \
                     overflows a veth DuT's 256-frame ring above {:.3} Mpps, so zero-loss \
                     rates above that may be this machine's limit rather than the DuT's",
                    found.max_us / 1000.0,
                    found.late_300us_per_second,
                    found.ring_bound(wakeups::VETH_RING_FRAMES) / 1e6
                ));
            }
            report.setup.dut_core_wakeups = Some(found);
        }
        Err(error) => report.notes.push(format!(
            "the DuT core's wake-up latency was not measured: {error}"
        )),
    }
}

/// The note for a run during which the hypervisor ran other work while the DuT's and the
/// generator's virtual CPUs wanted to run (/proc/stat steal, clock ticks of 10 ms). Neither the
/// DuT nor the tester can see such a stop, and `d0`'s 256-frame ring overflows when the DuT's
/// core stops for 256 frame times (0.26 ms at 1 Mpps): traced on the development VM, a DuT core
/// kept for the DuT ([`CoreShield`]) still missed its scheduler tick for 5–20 ms a few times a
/// minute, and such a stop in a trial fails it whatever the DuT can do.
fn steal_note(dut_ticks: u64, generator_ticks: u64) -> String {
    format!(
        "the hypervisor took the DuT's core for {} ms and the generator's for {} ms during \
         this run (steal in /proc/stat, counted in 10-ms ticks): each stop of the DuT's core \
         longer than its ingress ring's frames take to arrive (256 frames: 0.26 ms at 1 Mpps) \
         loses frames at any rate, so zero-loss rates on this machine may be the machine's \
         limit rather than the DuT's",
        dut_ticks * 10,
        generator_ticks * 10
    )
}

#[cfg(test)]
mod tests;
