//! Reports: the data model a benchmark run fills, and its renderings — JSON with a versioned
//! schema for machines, CSV for spreadsheets, and one self-contained HTML page with SVG plots
//! for people.
//!
//! Raumer et al. (seed 002) ask that a result be reproducible by someone else, so a report
//! carries the whole setup beside the numbers: command line, configuration, the commands that
//! set up the DuT, versions, kernel, CPU model and frequency, XDP mode, core pinning and the
//! tester's calibration without a DuT. The results keep every trial the searches ran.
//!
//! Change [`SCHEMA_VERSION`] whenever a field changes meaning or disappears; adding a field
//! with a default does not need a new version.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::bench::wakeups::Wakeups;
use crate::generator::pacing::PacingAccuracy;
use crate::rfc2544::{
    BackToBackResult, LossRateResult, MlrResult, RecoveryResult, ResetResult, Spread,
    ThroughputResult, Trial, line_rate,
};
use crate::stats::{LatencySummary, SequenceCounts};
use crate::trial::CounterCheck;

pub mod compare;
pub mod csv;
pub mod html;
pub mod json;
pub mod svg;

/// Version of the JSON layout of [`Report`]. 2: latency histograms are HdrHistogram
/// encodings (`histogram`), no longer lists of buckets (`buckets`).
pub const SCHEMA_VERSION: u32 = 2;

/// One benchmark run, everything needed to read and to reproduce it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Report {
    pub schema_version: u32,
    pub title: String,
    pub setup: Setup,
    pub calibration: Option<Calibration>,
    /// One entry per frame size, in increasing size.
    pub results: Vec<FrameSizeResult>,
    /// What the reader must know that the numbers do not say (an interrupted run, a failed
    /// trial).
    #[serde(default)]
    pub notes: Vec<String>,
    /// What the RX port offers for timestamps, what was used and why, and the clocks'
    /// measured resolution and read cost (the summary is in `setup.timestamp_source` and
    /// `setup.timestamp_resolution_ns`).
    #[serde(default)]
    pub timestamps: Option<crate::timestamp::TimestampProbe>,
}

/// How the run was made.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Setup {
    /// When the run started (RFC 3339).
    pub started: String,
    /// The tester's command line, one argument per entry.
    pub command_line: Vec<String>,
    /// The configuration as given (the text of the config file).
    pub config: String,
    pub dut: DutSetup,
    /// Software versions: wirespeed's and anything else that matters, name -> version.
    pub versions: BTreeMap<String, String>,
    /// `uname -r` and friends.
    pub kernel: String,
    pub cpu_model: String,
    /// Nominal CPU frequency, MHz.
    pub cpu_mhz: f64,
    /// TSC frequency the tester calibrated, Hz.
    pub tsc_hz: u64,
    /// Port backend and XDP mode in use ("afxdp native copy", "afpacket", ...).
    pub xdp_mode: String,
    /// Which thread runs on which core.
    pub core_pinning: Vec<CorePin>,
    /// Link speed the line-rate curve is drawn for, bit/s.
    pub link_bits_per_second: f64,
    /// Where latency timestamps come from ("TSC", "kernel software", "NIC hardware").
    pub timestamp_source: String,
    /// Resolution of those timestamps, nanoseconds.
    pub timestamp_resolution_ns: f64,
    /// Traffic pattern and flows ("CBR, 1 flow", "Poisson, 256 flows").
    pub traffic: String,
    /// Which receiver measured which trials (the AF_XDP probe receiver or the XDP probe
    /// counter).
    #[serde(default)]
    pub receiver: String,
    /// How the NDR was searched: the search, its trials and resolution, and how a rate's trials
    /// decide it (one trial, or a vote: [`crate::rfc2544::vote`]).
    #[serde(default)]
    pub search: String,
    /// How late the DuT's core woke a real-time thread before the searches, where the DuT ran
    /// on this machine ([`crate::bench::wakeups`]): the machine's limit on zero-loss rates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dut_core_wakeups: Option<Wakeups>,
}

/// The DuT and how it was configured.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DutSetup {
    pub name: String,
    pub version: String,
    /// Where it ran and how the tester reached it ([`crate::dut::location`]): this machine's
    /// lab, an external device on the tester's interfaces, or a host over ssh.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub host: String,
    /// Every command run to set it up, in order.
    pub commands: Vec<String>,
    /// What the DuT printed by the time it stopped, when it is a program (wirespeed's final
    /// tables: packets, drops by reason, cycles per packet), so the report says where it lost
    /// frames; empty for the kernel's DuTs.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub output: String,
}

/// One thread's core.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CorePin {
    pub thread: String,
    pub core: u32,
}

/// The tester measured without a DuT (ports looped back).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Calibration {
    /// The highest rate the tester sends and receives without loss, frames/s, per frame size.
    pub throughput: Vec<(u32, f64)>,
    /// Latency of the bare path (subtractable from the DuT's).
    pub latency: LatencySummary,
    pub pacing: Option<PacingAccuracy>,
    /// The bare path's latency per frame size (`latency` is the smallest size's).
    #[serde(default)]
    pub latency_by_size: Vec<(u32, LatencySummary)>,
}

impl Calibration {
    /// The tester's own maximum rate at `frame_size`, frames/s.
    pub fn max_rate(&self, frame_size: u32) -> Option<f64> {
        self.throughput
            .iter()
            .find(|(size, _)| *size == frame_size)
            .map(|&(_, rate)| rate)
    }

    /// The latency floor subtracted from a DuT's latency at `frame_size`: the bare path's
    /// median there (the typical cost of the tester's own path), nanoseconds.
    pub fn floor_ns(&self, frame_size: u32) -> Option<u64> {
        self.latency_by_size
            .iter()
            .find(|(size, _)| *size == frame_size)
            .map(|(_, summary)| summary.p50_ns)
            .or((self.latency.count > 0).then_some(self.latency.p50_ns))
    }
}

/// Who held a result down, from the calibration.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Limit {
    /// The NDR is below [`TESTER_SHARE`] of what the tester does without a DuT.
    DutLimited,
    /// The DuT forwarded (nearly) everything the tester can offer: its real limit is higher.
    TesterLimited,
}

/// Share of the tester's own maximum at or above which a result is tester-limited.
pub const TESTER_SHARE: f64 = 0.95;

impl Limit {
    /// Classifies an NDR against the tester's maximum at the same frame size.
    pub fn of(ndr: f64, tester_max: f64) -> Limit {
        if ndr >= TESTER_SHARE * tester_max {
            Limit::TesterLimited
        } else {
            Limit::DutLimited
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            Limit::DutLimited => "DuT-limited",
            Limit::TesterLimited => "tester-limited",
        }
    }
}

/// Latency measured at one offered load.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LatencyAtLoad {
    /// Offered load, frames/s.
    pub rate: f64,
    pub summary: LatencySummary,
}

/// Everything measured at one frame size.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FrameSizeResult {
    /// Frame size with FCS, bytes (RFC 2544 counting).
    pub frame_size: u32,
    pub throughput: Option<ThroughputResult>,
    pub mlrsearch: Option<MlrResult>,
    pub loss_rate: Option<LossRateResult>,
    pub back_to_back: Option<BackToBackResult>,
    pub recovery: Option<RecoveryResult>,
    /// RFC 2544 §26.6 reset, when asked for and the DuT can be reset.
    #[serde(default)]
    pub reset: Option<ResetResult>,
    pub latency: Vec<LatencyAtLoad>,
    pub sequence: Option<SequenceCounts>,
    pub pacing: Option<PacingAccuracy>,
    /// Whether the DuT or the tester was the limit (needs a calibration).
    #[serde(default)]
    pub limit: Option<Limit>,
    /// The tester's own counts against the kernel's interface counters in the trial at the
    /// NDR (the last latency trial), or in the last trial when no latency was measured.
    #[serde(default)]
    pub counters: Option<CounterCheck>,
    /// The largest relative disagreement of a single trial (tx or rx side).
    #[serde(default)]
    pub counters_max_error: Option<f64>,
    /// The traffic of this result ("CBR, 1 flow"), when a run measures several kinds.
    #[serde(default)]
    pub traffic: String,
    /// The NDR of each throughput search when the search ran more than once in a row, for
    /// repeatability.
    #[serde(default)]
    pub ndr_runs: Vec<f64>,
    /// Every trial of each search after the first (the first's are in `throughput` or
    /// `mlrsearch`), one list per search: what moved between two searches in a row.
    #[serde(default)]
    pub later_searches: Vec<Vec<Trial>>,
}

impl FrameSizeResult {
    /// The trials of every search: the first (binary or MLRsearch), then those that measured
    /// its repeatability.
    pub fn searches(&self) -> impl Iterator<Item = &[Trial]> {
        let first = self
            .throughput
            .as_ref()
            .map(|t| t.trials.as_slice())
            .or(self.mlrsearch.as_ref().map(|m| m.trials.as_slice()));
        first
            .into_iter()
            .chain(self.later_searches.iter().map(Vec::as_slice))
    }

    /// The no-drop rate, frames/s: from the binary search, else MLRsearch's first target.
    pub fn ndr(&self) -> Option<f64> {
        self.throughput.as_ref().and_then(|t| t.ndr).or_else(|| {
            self.mlrsearch
                .as_ref()
                .and_then(|m| m.targets.first())
                .and_then(|t| t.lower)
        })
    }

    /// How far apart the repeated searches' NDRs are: (max - min) / mean, as a ratio; `None`
    /// unless at least two searches found an NDR.
    pub fn ndr_difference(&self) -> Option<f64> {
        if self.ndr_runs.len() < 2 {
            return None;
        }
        let spread = Spread::of(&self.ndr_runs);
        (spread.mean > 0.0).then(|| (spread.max - spread.min) / spread.mean)
    }

    /// The result's name in tables and plot legends: frame size, and the traffic when known.
    pub fn label(&self) -> String {
        if self.traffic.is_empty() {
            format!("{} B", self.frame_size)
        } else {
            format!("{} B, {}", self.frame_size, self.traffic)
        }
    }

    /// MLRsearch's second target (the PDR), frames/s.
    pub fn pdr(&self) -> Option<f64> {
        self.mlrsearch
            .as_ref()
            .and_then(|m| m.targets.get(1))
            .and_then(|t| t.lower)
    }
}

/// Bits per second on the wire for `frames_per_second` frames of `frame_size` bytes
/// (preamble and gap included, the inverse of [`line_rate`]).
pub fn wire_bits_per_second(frames_per_second: f64, frame_size: u32) -> f64 {
    frames_per_second * (frame_size as f64 + 20.0) * 8.0
}

impl Report {
    /// An empty report of the current schema.
    pub fn new(title: impl Into<String>, setup: Setup) -> Report {
        Report {
            schema_version: SCHEMA_VERSION,
            title: title.into(),
            setup,
            calibration: None,
            results: Vec::new(),
            notes: Vec::new(),
            timestamps: None,
        }
    }

    /// The line rate for `frame_size` at the configured link speed, frames/s.
    pub fn line_rate(&self, frame_size: u32) -> f64 {
        line_rate(self.setup.link_bits_per_second, frame_size)
    }
}
