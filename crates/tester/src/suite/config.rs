//! What a suite run is asked to do: which tests, which traffic, which search and resolution,
//! and every other choice of [`SuiteConfig`].

use crate::bench::placement::Plan;
use crate::dut::IpVersion;
use crate::generator::pacing::Pattern;
use crate::rfc2544::Vote;
use crate::trial::{DEFAULT_SAMPLE_EVERY, FlowOrder, ReceiverKind, SenderKind};

/// Which RFC 2544 tests a run makes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tests {
    /// The NDR search (also run when latency or recovery need the NDR).
    pub throughput: bool,
    pub latency: bool,
    /// Frame loss rate.
    pub loss: bool,
    pub back_to_back: bool,
    pub recovery: bool,
    /// RFC 2544 §26.6 reset (of the DuTs the tester can reset).
    pub reset: bool,
}

impl Default for Tests {
    fn default() -> Self {
        Self {
            throughput: true,
            latency: true,
            loss: false,
            back_to_back: false,
            recovery: false,
            reset: false,
        }
    }
}

/// Names [`Tests::parse`] knows.
pub const TEST_NAMES: [&str; 6] = [
    "throughput",
    "latency",
    "loss",
    "back-to-back",
    "recovery",
    "reset",
];

impl Tests {
    /// No test at all.
    pub const NONE: Tests = Tests {
        throughput: false,
        latency: false,
        loss: false,
        back_to_back: false,
        recovery: false,
        reset: false,
    };

    /// Every test.
    pub const ALL: Tests = Tests {
        throughput: true,
        latency: true,
        loss: true,
        back_to_back: true,
        recovery: true,
        reset: true,
    };

    /// Parses a comma-separated list of [`TEST_NAMES`], or `all`.
    pub fn parse(list: &str) -> Result<Tests, String> {
        let mut tests = Tests::NONE;
        for name in list.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            match name {
                "all" => tests = Tests::ALL,
                "throughput" => tests.throughput = true,
                "latency" => tests.latency = true,
                "loss" => tests.loss = true,
                "back-to-back" => tests.back_to_back = true,
                "recovery" => tests.recovery = true,
                "reset" => tests.reset = true,
                other => {
                    return Err(format!(
                        "unknown test {other:?}; use {} or all",
                        TEST_NAMES.join(", ")
                    ));
                }
            }
        }
        if tests == Tests::NONE {
            return Err(format!("name at least one test: {}", TEST_NAMES.join(", ")));
        }
        Ok(tests)
    }

    /// Whether the NDR search runs: asked for, or needed by latency, recovery or reset.
    pub fn searches(&self) -> bool {
        self.throughput || self.latency || self.recovery || self.reset
    }
}

/// One kind of traffic a run measures with.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Traffic {
    pub pattern: Pattern,
    pub flows: u32,
    pub flow_order: FlowOrder,
}

impl Traffic {
    /// "CBR, 1 flow", "Poisson (seed 1), 256 random flows".
    pub fn label(&self) -> String {
        let pattern = match self.pattern {
            Pattern::Cbr => "CBR".to_string(),
            Pattern::Poisson { seed } => format!("Poisson (seed {seed})"),
            Pattern::Burst { size, inner_rate } if inner_rate.is_finite() => {
                format!("bursts of {size} at {:.3} Mpps", inner_rate / 1e6)
            }
            Pattern::Burst { size, .. } => format!("bursts of {size}"),
        };
        let order = match self.flow_order {
            FlowOrder::Random { .. } if self.flows > 1 => "random ",
            _ => "",
        };
        let plural = if self.flows == 1 { "" } else { "s" };
        format!("{pattern}, {} {order}flow{plural}", self.flows)
    }
}

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
    /// A share of the answer: the search stops when the lowest failing rate is within this
    /// share of it above the NDR.
    Relative(f64),
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
    /// Offered rates (frames/s) to measure latency at instead of at the NDR and its loads: the
    /// same load in every run, for comparing receivers or builds. The search then runs only
    /// for the throughput or recovery test. Empty: at the NDR and `latency_loads`.
    pub latency_rates: Vec<f64>,
    /// Repeats of the final rate for a spread.
    pub repeats: u32,
    pub plan: Plan,
    /// The reference link the line rate is computed for.
    pub link_bits_per_second: f64,
    /// Which tests to run.
    pub tests: Tests,
    /// How flows take turns in `pattern`/`flows` traffic.
    pub flow_order: FlowOrder,
    /// Kinds of traffic to run everything with, in order; empty for the one kind given by
    /// `pattern`, `flows` and `flow_order`.
    pub traffic: Vec<Traffic>,
    /// Frame loss rate: step between loads, percent of the starting rate (RFC 2544: ≤ 10).
    pub loss_step_percent: f64,
    /// Back-to-back: the longest burst tried lasts this long at the starting rate.
    pub burst_max_seconds: f64,
    /// Back-to-back searches and recovery trials per frame size, for a spread.
    pub test_repeats: u32,
    /// System recovery: seconds of overload, then seconds at the reduced rate.
    pub overload_seconds: f64,
    pub recovery_seconds: f64,
    /// Reset: seconds of each trial (long enough for the DuT to come back), and when in it the
    /// DuT is reset.
    pub reset_seconds: f64,
    pub reset_after_seconds: f64,
    /// Throughput searches in a row per frame size (2 for a repeatability check).
    pub ndr_runs: u32,
    /// Measure the tester on its looped-back pair and stop: no DuT is set up.
    pub calibrate_only: bool,
    /// How the trials at one rate decide whether it passes, in both searches
    /// ([`crate::rfc2544::vote`]; its duration sum is for `trial_seconds` trials).
    pub vote: Vote,
    /// After each trial's last departure, the longest wait for frames still inside the DuT
    /// (the trial stops waiting once everything it sent has arrived). One second: with the
    /// lab's 8192-frame egress queues and the tester's receive as the slower end, frames of
    /// an overloaded trial still arrived more than 0.1 s after the last departure (measured:
    /// 672 of 127 521 frames of a 0.64 Mpps trial counted lost at 0.1 s, none at 1 s).
    pub drain_seconds: f64,
    /// How the throughput searches' trials (and the calibration's line-rate trial, so that
    /// "tester-limited" compares like with like) receive; the loss-rate, back-to-back and
    /// recovery tests always use the probe receiver, which they need.
    pub receiver: ReceiverKind,
    /// How the throughput searches' trials and the calibration's limit send, where they can
    /// (a steady rate counted by the probe counter, [`crate::trial::live::can_send`]); every
    /// other trial sends over AF_XDP.
    pub sender: SenderKind,
    /// How the latency trials (at the NDR and the latency loads) and the calibration's floor
    /// receive: [`ReceiverKind::Sampled`] or [`ReceiverKind::Probe`] (a counter alone measures
    /// no latency).
    pub latency_receiver: ReceiverKind,
    /// The frames' IP version.
    pub ip: IpVersion,
    /// Keep the DuT core for the DuT while the run lasts ([`crate::bench::shield::CoreShield`]):
    /// other processes, this one's unpinned threads, the kernel threads that may move and the
    /// unbound workqueues lose it and get it back after. Off by default: two benchmarks running
    /// side by side would narrow each other.
    pub shield_dut_core: bool,
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
            latency_rates: Vec::new(),
            repeats: 0,
            plan: Plan::default(),
            link_bits_per_second: 10e9,
            tests: Tests::default(),
            flow_order: FlowOrder::RoundRobin,
            traffic: Vec::new(),
            loss_step_percent: 10.0,
            burst_max_seconds: 0.5,
            test_repeats: 3,
            overload_seconds: 10.0,
            recovery_seconds: 10.0,
            reset_seconds: 10.0,
            reset_after_seconds: 2.0,
            ndr_runs: 1,
            calibrate_only: false,
            vote: Vote::SINGLE_TRIAL,
            drain_seconds: 1.0,
            receiver: ReceiverKind::Count,
            sender: SenderKind::Afxdp,
            shield_dut_core: false,
            ip: IpVersion::V4,
            latency_receiver: ReceiverKind::Sampled {
                every: DEFAULT_SAMPLE_EVERY,
            },
        }
    }
}

impl SuiteConfig {
    /// Whether the NDR search runs: asked for, or needed by recovery or by latency at loads
    /// relative to the NDR.
    pub fn searches(&self) -> bool {
        self.tests.searches()
            && (self.tests.throughput
                || self.tests.recovery
                || self.tests.reset
                || self.latency_rates.is_empty())
    }

    /// The kinds of traffic this run measures with.
    pub fn kinds(&self) -> Vec<Traffic> {
        if self.traffic.is_empty() {
            vec![Traffic {
                pattern: self.pattern,
                flows: self.flows,
                flow_order: self.flow_order,
            }]
        } else {
            self.traffic.clone()
        }
    }

    /// How the NDR is searched, in words, for the report.
    pub fn search_summary(&self) -> String {
        let search = match self.search {
            SearchKind::Binary => "binary search",
            SearchKind::Mlr => "MLRsearch",
        };
        let resolution = match self.resolution {
            Resolution::Absolute(fps) => format!("{fps} frames/s"),
            Resolution::Relative(share) => format!("{} % of the NDR", 100.0 * share),
        };
        format!(
            "{search}, {} s trials, resolution {resolution}, loss tolerance {}; {}",
            self.trial_seconds,
            self.loss_tolerance,
            self.vote.describe(self.trial_seconds)
        )
    }

    /// This configuration with one kind of traffic.
    pub(super) fn with(&self, traffic: Traffic) -> SuiteConfig {
        SuiteConfig {
            pattern: traffic.pattern,
            flows: traffic.flows,
            flow_order: traffic.flow_order,
            traffic: Vec::new(),
            ..self.clone()
        }
    }
}
