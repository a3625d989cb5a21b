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
//! **Interruption.** When `stop` is set, the running trial ends early and every later trial
//! returns at once as a failure without sending; the frame size in progress keeps only its real
//! trials and loses its answer, a note says so, and the report is still complete up to there.
//!
//! Every trial's counts are checked against the kernel's interface counters; the report keeps
//! the check of the trial at the NDR and the worst disagreement of any trial. (Overloaded search
//! trials can disagree by more: the kernel drops some of what the AF_XDP TX ring took when the
//! DuT's ring is full, and the tester counts those as sent and lost.)

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use wirespeed_lab::Testbed;

use crate::bench::placement::{Placed, Plan, check_threads, place_kernel, place_napi};
use crate::dut::probe::verify;
use crate::dut::{Dut, Wiring};
use crate::generator::pacing::Pattern;
use crate::generator::{Template, TemplateConfig};
use crate::report::{Calibration, CorePin, FrameSizeResult, LatencyAtLoad, Limit, Report, Setup};
use crate::rfc2544::{
    Load, MlrConfig, MlrTarget, ThroughputConfig, TrialOutcome, TrialSpec, line_rate, mlrsearch,
    throughput,
};
use crate::trial::{CounterCheck, LabTrial, TrialConfig, TrialPorts, run_in_lab};

/// Which throughput search to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SearchKind {
    /// RFC 2544 binary search.
    Binary,
    /// MLRsearch: NDR and PDR (0.5 %) in one pass.
    Mlr,
}

/// The search's resolution.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Resolution {
    /// Frames per second.
    Absolute(f64),
    /// A share of the starting (maximum) rate.
    Relative(f64),
}

impl Resolution {
    /// In frames per second, for a search starting at `max_rate`.
    pub fn at(self, max_rate: f64) -> f64 {
        match self {
            Resolution::Absolute(fps) => fps,
            Resolution::Relative(share) => share * max_rate,
        }
    }
}

/// What to run.
#[derive(Clone, Debug, PartialEq)]
pub struct SuiteConfig {
    /// Frame sizes with FCS, bytes.
    pub frame_sizes: Vec<u16>,
    pub search: SearchKind,
    pub trial_seconds: f64,
    /// Length of each calibration trial.
    pub calibration_seconds: f64,
    pub loss_tolerance: f64,
    pub resolution: Resolution,
    pub pattern: Pattern,
    pub flows: u32,
    /// Loads for latency, percent of the NDR (latency at the NDR is always measured, last).
    pub latency_loads: Vec<f64>,
    /// Repeats of the final rate for a spread.
    pub repeats: u32,
    pub plan: Plan,
    /// The reference link the line rate is computed for.
    pub link_bits_per_second: f64,
}

impl Default for SuiteConfig {
    fn default() -> Self {
        Self {
            frame_sizes: vec![64, 128, 256, 512, 1024, 1280, 1518],
            search: SearchKind::Binary,
            trial_seconds: 10.0,
            calibration_seconds: 1.0,
            loss_tolerance: 0.0,
            resolution: Resolution::Relative(0.02),
            pattern: Pattern::Cbr,
            flows: 1,
            latency_loads: vec![10.0, 50.0, 90.0],
            repeats: 0,
            plan: Plan::default(),
            link_bits_per_second: 10e9,
        }
    }
}

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
        SearchKind::Binary => (1.0 / share).log2().ceil() as usize + 1,
        SearchKind::Mlr => 2 * ((1.0 / share).log2().ceil() as usize + 1),
    };
    config.frame_sizes.len()
        * (2 + search + config.repeats as usize + config.latency_loads.len() + 1)
}

/// Runs the whole suite on `lab` against `dut` and returns the report, also when stopped
/// (partial, with a note). `setup` comes with what only the caller knows (command line,
/// configuration, versions); the rest is filled in here.
pub fn run(
    lab: &Testbed,
    dut: &mut dyn Dut,
    config: &SuiteConfig,
    setup: Setup,
    stop: &AtomicBool,
    progress: &mut dyn FnMut(&Progress),
) -> Report {
    let mut report = Report::new(format!("{}, RFC 2544", dut.name()), setup);
    report.setup.link_bits_per_second = config.link_bits_per_second;
    report.setup.traffic = format!(
        "{}, {} flow(s), UDP/IPv4, every frame carries a probe",
        match config.pattern {
            Pattern::Cbr => "CBR".to_string(),
            Pattern::Poisson { seed } => format!("Poisson (seed {seed})"),
            Pattern::Burst { size, .. } => format!("bursts of {size}"),
        },
        config.flows
    );
    report.setup.timestamp_source = "TSC (TX and RX in the tester process)".into();
    report.setup.tsc_hz = wirespeed_packet::cpu::tsc_hz();
    report.setup.timestamp_resolution_ns = 1e9 / report.setup.tsc_hz.max(1) as f64;
    let mut tracker = Tracker {
        started: Instant::now(),
        done: 0,
        total: estimate_trials(config),
        report: progress,
    };
    let Some(wiring) = Wiring::of(lab) else {
        report
            .notes
            .push("the lab has fewer than two pairs; nothing was measured".into());
        return report;
    };
    let mut pins: Vec<Placed> = Vec::new();
    let mut commands: Vec<String> = lab.commands().to_vec();
    if let Some(pair) = &lab.calibration {
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
            "no calibration pair in the lab: results are not marked DuT- or tester-limited".into(),
        );
    }
    let logged = dut.commands().len();
    if !stop.load(Ordering::Relaxed) {
        match prepare(dut, &wiring, config, &mut pins, &mut commands) {
            Ok(()) => {
                for &size in &config.frame_sizes {
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                    let result = frame_size(
                        &wiring,
                        &*dut,
                        size,
                        config,
                        report.calibration.as_ref(),
                        stop,
                        &mut tracker,
                        &mut report.notes,
                        &mut pins,
                    );
                    if !result.1.is_empty() {
                        report.setup.xdp_mode = format!("tester ports: AF_XDP ({})", result.1);
                    }
                    report.results.push(result.0);
                }
            }
            Err(error) => report.notes.push(error),
        }
    }
    if let Err(error) = dut.teardown() {
        report.notes.push(error.to_string());
    }
    if stop.load(Ordering::Relaxed) {
        report.notes.push(
            "interrupted (Ctrl-C): the run stopped early; results cover the frame sizes finished"
                .into(),
        );
    }
    report.setup.dut.name = dut.name();
    report.setup.dut.commands = dut.commands().get(logged..).unwrap_or_default().to_vec();
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
    pins.extend(place_kernel(wiring, &config.plan, commands).map_err(|e| e.to_string())?);
    if let Some(pid) = dut.pid() {
        pins.extend(
            check_threads(pid, dut.worker_prefix(), config.plan.dut_cpu)
                .map_err(|e| e.to_string())?,
        );
    }
    Ok(())
}

fn trial_config(config: &SuiteConfig, rate: f64, seconds: f64) -> TrialConfig {
    TrialConfig {
        rate,
        seconds,
        pattern: config.pattern,
        ..TrialConfig::default()
    }
}

fn describe(what: &str, size: u16, trial: &LabTrial) -> String {
    let m = &trial.measurement;
    format!(
        "{size} B {what}: offered {:.3} Mpps, received {:.3} Mpps, loss {:.4} %, p50 {:.1} µs",
        m.outcome.sent as f64 / m.outcome.seconds.max(1e-9) / 1e6,
        m.outcome.received_rate() / 1e6,
        100.0 * m.outcome.loss_ratio(),
        m.latency.p50_ns as f64 / 1e3
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
        place_napi(
            &lab.tester_ns,
            &pair.receiver_if,
            config.plan.receiver_cpu,
            commands,
        )
        .map_err(|error| error.to_string())?,
    );
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
            &trial_config(config, line, config.calibration_seconds),
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
            &trial_config(config, max * 0.1, config.calibration_seconds),
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

/// What the trials of one frame size gathered beside the search's own record.
#[derive(Default)]
struct Gathered {
    counters: CounterCheck,
    max_error: f64,
    last: Option<LabTrial>,
    mode: String,
    interrupted: bool,
    failures: Vec<String>,
}

#[allow(clippy::too_many_arguments)]
fn frame_size(
    wiring: &Wiring,
    dut: &dyn Dut,
    size: u16,
    config: &SuiteConfig,
    calibration: Option<&Calibration>,
    stop: &AtomicBool,
    tracker: &mut Tracker,
    notes: &mut Vec<String>,
    pins: &mut Vec<Placed>,
) -> (FrameSizeResult, String) {
    let mut result = FrameSizeResult {
        frame_size: size as u32,
        ..FrameSizeResult::default()
    };
    let template = match Template::new(&TemplateConfig {
        frame_size: size,
        src_mac: wiring.ingress.tester_mac,
        dst_mac: dut.destination_mac(wiring),
        src_ip: wiring.ingress.tester_ipv4.into(),
        flows: config.flows,
        ..TemplateConfig::default()
    }) {
        Ok(template) => template,
        Err(error) => {
            notes.push(format!("{size} B: {error}"));
            return (result, String::new());
        }
    };
    let line = line_rate(config.link_bits_per_second, size as u32);
    let tester_max = calibration.and_then(|c| c.max_rate(size as u32));
    let max_rate = tester_max.unwrap_or(line).min(line);
    let ports = TrialPorts::through_dut(wiring);
    let mut gathered = Gathered::default();
    let mut trial = |spec: TrialSpec, what: &str, gathered: &mut Gathered| -> TrialOutcome {
        // A stopped run sends nothing more; the search sees failures and ends quickly.
        let failed = TrialOutcome {
            sent: 1,
            received: 0,
            seconds: 0.0,
            last_loss: None,
        };
        let Load::Rate { rate, seconds } = spec.load else {
            return failed;
        };
        if stop.load(Ordering::Relaxed) {
            gathered.interrupted = true;
            return failed;
        }
        match run_in_lab(
            &ports,
            &template,
            &trial_config(config, rate, seconds),
            config.plan.generator_cpu,
            stop,
        ) {
            Ok(lab_trial) => {
                tracker.trial(describe(what, size, &lab_trial));
                if lab_trial.measurement.interrupted {
                    gathered.interrupted = true;
                    return failed;
                }
                gathered.counters.add(&lab_trial.counters);
                gathered.max_error = gathered
                    .max_error
                    .max(lab_trial.counters.tx_error())
                    .max(lab_trial.counters.rx_error());
                gathered.mode = lab_trial.mode.clone();
                let outcome = lab_trial.measurement.outcome;
                if pins.iter().all(|p| p.thread != lab_trial.generator.thread) {
                    pins.push(lab_trial.generator.clone());
                }
                gathered.last = Some(lab_trial);
                outcome
            }
            Err(error) => {
                tracker.trial(format!("{size} B {what}: FAILED: {error}"));
                gathered.failures.push(error);
                failed
            }
        }
    };
    let resolution = config.resolution.at(max_rate);
    match config.search {
        SearchKind::Binary => {
            let search = ThroughputConfig {
                max_rate,
                min_rate: (max_rate * 0.01).max(1.0),
                trial_seconds: config.trial_seconds,
                loss_tolerance: config.loss_tolerance,
                resolution,
                repeats: config.repeats,
                max_trials: 40,
            };
            let mut found = throughput(&search, |spec| trial(spec, "search", &mut gathered));
            if gathered.interrupted {
                found.trials.retain(|t| t.outcome.seconds > 0.0);
                found.ndr = None;
                found.repeated = None;
            }
            result.throughput = Some(found);
        }
        SearchKind::Mlr => {
            let search = MlrConfig {
                max_rate,
                min_rate: (max_rate * 0.01).max(1.0),
                targets: vec![
                    MlrTarget {
                        name: "NDR".into(),
                        loss_ratio: config.loss_tolerance,
                    },
                    MlrTarget {
                        name: "PDR".into(),
                        loss_ratio: config.loss_tolerance.max(0.005),
                    },
                ],
                initial_seconds: (config.trial_seconds / 4.0).max(0.1),
                final_seconds: config.trial_seconds,
                intermediate_phases: 1,
                final_width: (resolution / max_rate).clamp(1e-4, 0.5),
                repeats: config.repeats,
                max_trials: 60,
            };
            let mut found = mlrsearch(&search, |spec| trial(spec, "mlrsearch", &mut gathered));
            if gathered.interrupted {
                found.trials.retain(|t| t.outcome.seconds > 0.0);
                for target in &mut found.targets {
                    target.lower = None;
                    target.repeated = None;
                }
            }
            result.mlrsearch = Some(found);
        }
    }
    if let Some(ndr) = result.ndr() {
        let mut loads: Vec<f64> = config
            .latency_loads
            .iter()
            .map(|percent| ndr * percent / 100.0)
            .filter(|rate| *rate > 0.0 && *rate < ndr)
            .collect();
        loads.push(ndr);
        for rate in loads {
            let spec = TrialSpec {
                load: Load::Rate {
                    rate,
                    seconds: config.trial_seconds,
                },
            };
            let what = format!("latency at {:.0} % of NDR", 100.0 * rate / ndr);
            gathered.last = None;
            trial(spec, &what, &mut gathered);
            if gathered.interrupted {
                break;
            }
            if let Some(last) = &gathered.last {
                result.latency.push(LatencyAtLoad {
                    rate,
                    summary: last.measurement.latency.clone(),
                });
            }
        }
        if let Some(last) = &gathered.last {
            result.sequence = Some(last.measurement.sequence);
            result.pacing = Some(last.measurement.pacing);
            result.counters = Some(last.counters);
        }
        result.limit = tester_max.map(|max| Limit::of(ndr, max));
    }
    if gathered.counters.transmitted > 0 {
        result.counters_max_error = Some(gathered.max_error);
    }
    for failure in gathered.failures.iter().take(3) {
        notes.push(format!("{size} B: a trial failed: {failure}"));
    }
    if gathered.interrupted {
        notes.push(format!(
            "{size} B: interrupted; the trials run are kept, the search has no answer"
        ));
    }
    (result, gathered.mode)
}
