//! One frame size of a run ([`frame_size`]): the throughput searches, latency at the NDR and
//! the chosen loads, then frame loss rate, back-to-back, recovery and reset, each through the
//! same trial closure, which repeats a trial the generator spoiled and gathers what the
//! report says beside the searches' own records ([`Gathered`]).

use super::*;

/// What the trials of one frame size gathered beside the search's own record.
#[derive(Default)]
struct Gathered {
    /// Trial runs repeated because the tester spoiled them ([`stalled`]).
    stall_repeats: u32,
    /// Rates of trials still spoiled by the tester after their repeats ([`stalled`]):
    /// counted as not passing, so an NDR below any of them is tester-limited.
    stalled_rates: Vec<f64>,
    /// Trials whose frames the DuT held back in the tester's port past the tolerance.
    held_back: u32,
    counters: CounterCheck,
    max_error: f64,
    last: Option<LabTrial>,
    mode: String,
    interrupted: bool,
    failures: Vec<String>,
    /// The receiver of the trials to come.
    receiver: ReceiverKind,
}

/// Times a trial the tester spoiled is run again at most
/// ([`TrialOutcome::spoiled_by_tester`]); the last run counts whatever it shows. On a shared
/// VM the generator's stalls of 2–12 ms (a busy process taking a scheduler tick on its core)
/// made searches against the reference DuT (`linux-router-tbf`, 6 ms of queue) miss its
/// capacity by up to 40 % (docs/benchmarks.md, "The tester").
pub(super) const STALL_REPEATS: u32 = 5;

/// Whether `trial` is a steady load (a burst is meant to be one) the tester spoiled.
pub(super) fn stalled(spec: &TrialSpec, trial: &TrialMeasurement) -> bool {
    matches!(spec.load, Load::Rate { .. }) && trial.outcome.spoiled_by_tester()
}

/// Why the tester spoiled a trial, for its line in the progress.
fn spoiled_by(trial: &TrialMeasurement) -> String {
    let refused = trial.outcome.receiver_refused;
    let late_ms = trial.pacing.lateness_max_ns / 1e6;
    match (
        refused,
        trial
            .outcome
            .departure
            .is_some_and(|d| d.sent_late > 0 || d.behind > 0),
    ) {
        (0, _) => format!("the generator stalled {late_ms:.1} ms"),
        (_, false) => format!("the tester's receive refused {refused} frames"),
        (_, true) => format!(
            "the generator stalled {late_ms:.1} ms and the tester's receive refused {refused} frames"
        ),
    }
}

#[allow(clippy::too_many_arguments)]
pub(super) fn frame_size(
    wiring: &Wiring,
    dut: &mut dyn Dut,
    size: u16,
    config: &SuiteConfig,
    calibration: Option<&Calibration>,
    stop: &AtomicBool,
    tracker: &mut Tracker,
    notes: &mut Vec<String>,
    pins: &mut Vec<Placed>,
    commands: &mut Vec<String>,
) -> (FrameSizeResult, String) {
    let mut result = FrameSizeResult {
        frame_size: size as u32,
        ..FrameSizeResult::default()
    };
    let (src_ip, dst_ip) = config.ip.addresses(wiring);
    let template = match Template::new(&TemplateConfig {
        frame_size: size,
        src_mac: wiring.ingress.tester_mac,
        dst_mac: dut.destination_mac(wiring),
        src_ip,
        dst_ip,
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
            ..TrialOutcome::default()
        };
        if stop.load(Ordering::Relaxed) {
            gathered.interrupted = true;
            return failed;
        }
        let mut stalls = 0;
        let run = loop {
            let run = run_in_lab(
                &ports,
                &template,
                &TrialConfig {
                    receiver: gathered.receiver,
                    ..load_config(config, spec.load)
                },
                config.plan.generator_cpu,
                stop,
            );
            match &run {
                Ok(lab_trial)
                    if stalls < STALL_REPEATS
                        && !lab_trial.measurement.interrupted
                        && stalled(&spec, &lab_trial.measurement) =>
                {
                    stalls += 1;
                    gathered.stall_repeats += 1;
                    tracker.trial(format!(
                        "{}: {}, repeated",
                        describe(what, size, lab_trial),
                        spoiled_by(&lab_trial.measurement)
                    ));
                }
                _ => break run,
            }
        };
        match run {
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
                if outcome.departure.is_some_and(|d| d.held_back > 0) {
                    gathered.held_back += 1;
                }
                if stalled(&spec, &lab_trial.measurement) {
                    gathered.stalled_rates.push(spec.load.rate());
                }
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
    // An absolute resolution in frames/s, or a relative one as a share of the answer.
    let (resolution, relative_resolution) = match config.resolution {
        Resolution::Absolute(fps) => (fps, 0.0),
        Resolution::Relative(share) => (0.0, share),
    };
    let runs = if config.searches() {
        config.ndr_runs.max(1)
    } else {
        0
    };
    gathered.receiver = config.receiver;
    for run in 0..runs {
        let what = if runs > 1 {
            format!("search {}/{runs}", run + 1)
        } else {
            "search".to_string()
        };
        let mut found = FrameSizeResult::default();
        match config.search {
            SearchKind::Binary => {
                let search = ThroughputConfig {
                    max_rate,
                    min_rate: search_floor(max_rate),
                    trial_seconds: config.trial_seconds,
                    loss_tolerance: config.loss_tolerance,
                    resolution,
                    relative_resolution,
                    repeats: config.repeats,
                    vote: config.vote,
                    max_trials: 40u32
                        .saturating_mul(config.vote.max_trials_per_load(config.trial_seconds)),
                };
                let mut found_search =
                    throughput(&search, |spec| trial(spec, &what, &mut gathered));
                if gathered.interrupted {
                    found_search.trials.retain(|t| t.outcome.seconds > 0.0);
                    found_search.ndr = None;
                    found_search.repeated = None;
                }
                found.throughput = Some(found_search);
            }
            SearchKind::Mlr => {
                let search = MlrConfig {
                    max_rate,
                    min_rate: search_floor(max_rate),
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
                    final_width: (resolution / max_rate)
                        .max(relative_resolution)
                        .clamp(1e-4, 0.5),
                    vote: config.vote,
                    repeats: config.repeats,
                    max_trials: 60u32
                        .saturating_mul(config.vote.max_trials_per_load(config.trial_seconds)),
                };
                let mut found_search = mlrsearch(&search, |spec| trial(spec, &what, &mut gathered));
                if gathered.interrupted {
                    found_search.trials.retain(|t| t.outcome.seconds > 0.0);
                    for target in &mut found_search.targets {
                        target.lower = None;
                        target.repeated = None;
                    }
                }
                found.mlrsearch = Some(found_search);
            }
        }
        if runs > 1
            && let Some(ndr) = found.ndr()
        {
            result.ndr_runs.push(ndr);
        }
        // The first search is the result; later ones only say how well it repeats.
        if run == 0 {
            result.throughput = found.throughput;
            result.mlrsearch = found.mlrsearch;
        } else if let Some(trials) = found.throughput.map(|t| t.trials) {
            result.later_searches.push(trials);
        } else if let Some(trials) = found.mlrsearch.map(|m| m.trials) {
            result.later_searches.push(trials);
        }
        if gathered.interrupted {
            break;
        }
    }
    gathered.receiver = config.latency_receiver;
    // The rates to measure latency at, and the NDR they are shares of (none for given rates).
    let latency_loads = if !config.tests.latency {
        None
    } else if !config.latency_rates.is_empty() {
        Some((config.latency_rates.clone(), None))
    } else {
        result.ndr().map(|ndr| {
            let mut loads: Vec<f64> = config
                .latency_loads
                .iter()
                .map(|percent| ndr * percent / 100.0)
                .filter(|rate| *rate > 0.0 && *rate < ndr)
                .collect();
            loads.push(ndr);
            (loads, Some(ndr))
        })
    };
    if let Some((loads, ndr)) = latency_loads {
        for rate in loads {
            let spec = TrialSpec {
                load: Load::Rate {
                    rate,
                    seconds: config.trial_seconds,
                },
            };
            let what = match ndr {
                Some(ndr) => format!("latency at {:.0} % of NDR", 100.0 * rate / ndr),
                None => format!("latency at {:.3} Mpps", rate / 1e6),
            };
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
                if let Some(note) = unoffered_latency_load(size, rate, &last.measurement) {
                    notes.push(note);
                }
            }
        }
        if let Some(last) = &gathered.last {
            // A sampled trial tracks no sequence.
            result.sequence = Some(last.measurement.sequence)
                .filter(|_| last.measurement.receiver == ReceiverKind::Probe);
            result.pacing = Some(last.measurement.pacing);
            result.counters = Some(last.counters);
        }
    }
    // The other tests need every frame's sequence number, which only the probe receiver sees.
    gathered.receiver = ReceiverKind::Probe;
    if let Some(ndr) = result.ndr() {
        result.limit = tester_max.map(|max| Limit::of(ndr, max));
        // A rate above the NDR that failed only while the generator could not offer it, or
        // whose loss the tester's receive refused, says nothing of the DuT: the NDR is a lower
        // bound, set by the tester on this machine.
        if gathered.stalled_rates.iter().any(|&rate| rate > ndr) {
            result.limit = Some(Limit::TesterLimited);
        }
    }
    let ndr = result.ndr();
    if runs > 0 && ndr.is_none() && !gathered.interrupted {
        notes.push(format!(
            "{size} B: no NDR: the DuT lost frames at every rate the search offered, down to \
             its lowest, {:.4} Mpps; a DuT that forwards this little is set up wrong or wired \
             wrong (its drop counters say where)",
            search_floor(max_rate) / 1e6
        ));
    }
    if config.tests.loss && !gathered.interrupted {
        let test = LossRateConfig {
            max_rate,
            step_percent: config.loss_step_percent,
            trial_seconds: config.trial_seconds,
            clean_trials_to_stop: 2,
        };
        result.loss_rate = Some(loss_rate(&test, |spec| {
            let what = format!("loss rate at {:.0} %", 100.0 * spec.load.rate() / max_rate);
            trial(spec, &what, &mut gathered)
        }));
    }
    if config.tests.back_to_back && !gathered.interrupted {
        let max_burst = (max_rate * config.burst_max_seconds).round().max(2.0) as u64;
        let test = BackToBackConfig {
            rate: max_rate,
            min_burst: 1,
            max_burst,
            // About 6 halvings per search: 2 % of the longest burst.
            resolution: (max_burst / 50).max(1),
            repeats: config.test_repeats.max(1),
            throughput: ndr,
        };
        result.back_to_back = Some(back_to_back(&test, |spec| {
            let frames = match spec.load {
                Load::Burst { frames, .. } => frames,
                _ => 0,
            };
            trial(
                spec,
                &format!("back-to-back burst of {frames}"),
                &mut gathered,
            )
        }));
    }
    if config.tests.recovery && !gathered.interrupted {
        match ndr {
            Some(ndr) => {
                let test = RecoveryConfig {
                    throughput: ndr,
                    max_rate,
                    overload_percent: 110.0,
                    overload_seconds: config.overload_seconds,
                    recovery_percent: 50.0,
                    recovery_seconds: config.recovery_seconds,
                    repeats: config.test_repeats.max(1),
                };
                result.recovery = Some(recovery(&test, |spec| {
                    trial(spec, "recovery (110 % then 50 %)", &mut gathered)
                }));
            }
            None => notes.push(format!(
                "{size} B: system recovery needs the NDR, and the search found none"
            )),
        }
    }
    if config.tests.reset && !gathered.interrupted {
        match (ndr, dut.reset_method()) {
            (_, None) => notes.push(format!(
                "{size} B: reset (RFC 2544 §26.6) not measured: the tester cannot reset {}",
                dut.name()
            )),
            (None, Some(_)) => notes.push(format!(
                "{size} B: reset needs the NDR, and the search found none"
            )),
            (Some(ndr), Some(method)) => {
                let test = ResetConfig {
                    throughput: ndr,
                    seconds: config.reset_seconds,
                    reset_after: config.reset_after_seconds,
                    repeats: config.test_repeats.max(1),
                };
                let mut failures = Vec::new();
                let found = reset(&test, method, |spec| {
                    // The reset runs beside the trial, `reset_after` seconds after it was
                    // asked for (a little less into the stream, which starts once the
                    // trial's ports are open). It makes new threads (a restarted program, a
                    // new NAPI thread for a link brought up again), which are placed at once
                    // as the first were: unplaced, a new NAPI thread shared the generator's
                    // core and the bridge came back at a third of its NDR.
                    std::thread::scope(|scope| {
                        let resetter = scope.spawn(|| {
                            std::thread::sleep(Duration::from_secs_f64(test.reset_after));
                            dut.reset(wiring).map_err(|error| error.to_string())?;
                            let mut log = Vec::new();
                            place(&*dut, wiring, config, &mut Vec::new(), &mut log)?;
                            Ok::<_, String>(log)
                        });
                        let outcome = trial(spec, "reset", &mut gathered);
                        match resetter.join() {
                            Ok(Ok(log)) => commands.extend(log),
                            Ok(Err(error)) => failures.push(error),
                            Err(_) => failures.push("the reset thread panicked".into()),
                        }
                        outcome
                    })
                });
                for failure in failures.iter().take(3) {
                    notes.push(format!("{size} B: a reset failed: {failure}"));
                }
                if failures.is_empty() {
                    result.reset = Some(found);
                }
            }
        }
    }
    if result.counters.is_none()
        && let Some(last) = &gathered.last
    {
        result.counters = Some(last.counters);
        // A counted trial tracks no sequence.
        result.sequence = Some(last.measurement.sequence)
            .filter(|_| last.measurement.receiver == ReceiverKind::Probe);
    }
    if gathered.counters.transmitted > 0 {
        result.counters_max_error = Some(gathered.max_error);
    }
    if gathered.stall_repeats > 0 {
        notes.push(format!(
            "{size} B: trials repeated because the generator ended behind its schedule, or \
             they lost no more frames than it sent late (past the departure tolerance) and \
             the tester's receive refused: {} (at most {STALL_REPEATS} times per trial)",
            gathered.stall_repeats
        ));
    }
    if !gathered.stalled_rates.is_empty() {
        let rates: Vec<String> = gathered
            .stalled_rates
            .iter()
            .map(|rate| format!("{:.4}", rate / 1e6))
            .collect();
        notes.push(format!(
            "{size} B: trials still spoiled by the tester after {STALL_REPEATS} repeats, \
             counted as not passing (the machine kept the generator or the tester's receive \
             off its core): {} at {} Mpps; an NDR below them is tester-limited",
            rates.len(),
            rates.join(", ")
        ));
    }
    if gathered.held_back > 0 {
        notes.push(format!(
            "{size} B: trials in which the DuT pushed frames back into the tester's port past \
             the departure tolerance (counted lost at that rate): {}",
            gathered.held_back
        ));
    }
    for failure in gathered.failures.iter().take(3) {
        notes.push(format!("{size} B: a trial failed: {failure}"));
    }
    if gathered.interrupted {
        notes.push(format!(
            "{size} B: interrupted; the trials run are kept, the test in progress has no answer"
        ));
    }
    (result, gathered.mode)
}

/// The lowest rate a search measures: the lowest the in-kernel sender paces (frames per
/// second), or the maximum when that is lower. A fraction of the maximum would leave a DuT
/// slower than it without an NDR: at 1 % of a 10-Gbit/s line rate (148.8 kframes/s, the floor
/// an external DuT's search had), a 50-Mbit/s router (104.2 kframes/s) had none.
pub(super) fn search_floor(max_rate: f64) -> f64 {
    crate::trial::live::MIN_RATE.min(max_rate)
}
