//! RFC 2544 §26.5 system recovery: overload the DuT at 110 % of its throughput (or the maximum
//! rate, whichever is lower) for a while, then drop to 50 % of that rate, and measure how long
//! after the drop frames are still lost.
//!
//! The test needs one continuous trial with a rate change inside it ([`Load::Step`]) and a
//! trial that knows when the last lost frame was sent (the sink learns that from the sequence
//! numbers: a missing sequence number maps back to its departure time). The recovery time is
//! that departure time minus the moment of the drop, and 0 when the last loss came before the
//! drop. The trial is repeated for a spread.

use serde::{Deserialize, Serialize};

use super::{Load, Spread, Trial, TrialOutcome, TrialSpec, run};

/// How to measure.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RecoveryConfig {
    /// The DuT's throughput from the throughput test, frames per second.
    pub throughput: f64,
    /// The maximum rate of the link, frames per second.
    pub max_rate: f64,
    /// Overload in percent of the throughput (RFC 2544: 110).
    pub overload_percent: f64,
    /// How long to overload (RFC 2544: at least 60 s).
    pub overload_seconds: f64,
    /// The reduced rate in percent of the overload rate (RFC 2544: 50).
    pub recovery_percent: f64,
    /// How long to keep sending at the reduced rate.
    pub recovery_seconds: f64,
    /// How many times to run the trial.
    pub repeats: u32,
}

impl Default for RecoveryConfig {
    fn default() -> Self {
        Self {
            throughput: 1_000_000.0,
            max_rate: 14_880_952.0,
            overload_percent: 110.0,
            overload_seconds: 60.0,
            recovery_percent: 50.0,
            recovery_seconds: 30.0,
            repeats: 3,
        }
    }
}

/// What the test found.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RecoveryResult {
    pub overload_rate: f64,
    pub recovery_rate: f64,
    /// Recovery time of each trial, seconds; `None` for a trial that lost frames but could not
    /// say when (the sink did not track it). A time close to `recovery_seconds` means the DuT
    /// had not recovered when the trial ended.
    pub times: Vec<Option<f64>>,
    /// Spread of the known recovery times, seconds.
    pub time: Spread,
    /// True when the overload lost no frame in some trial: the DuT was not overloaded, and a
    /// recovery time of 0 means nothing there.
    pub not_overloaded: bool,
    pub trials: Vec<Trial>,
}

/// Runs the test; see the module documentation.
pub fn recovery(
    config: &RecoveryConfig,
    mut trial: impl FnMut(TrialSpec) -> TrialOutcome,
) -> RecoveryResult {
    let overload_rate = (config.throughput * config.overload_percent / 100.0).min(config.max_rate);
    let recovery_rate = overload_rate * config.recovery_percent / 100.0;
    let mut result = RecoveryResult {
        overload_rate,
        recovery_rate,
        ..RecoveryResult::default()
    };
    let load = Load::Step {
        first_rate: overload_rate,
        first_seconds: config.overload_seconds,
        then_rate: recovery_rate,
        then_seconds: config.recovery_seconds,
    };
    for index in 0..config.repeats.max(1) {
        let outcome = run(&mut trial, &mut result.trials, load, index);
        let time = match (outcome.lost(), outcome.last_loss) {
            (0, _) => {
                result.not_overloaded = true;
                Some(0.0)
            }
            (_, None) => None,
            (_, Some(at)) => Some((at - config.overload_seconds).max(0.0)),
        };
        result.times.push(time);
    }
    let known: Vec<f64> = result.times.iter().flatten().copied().collect();
    result.time = Spread::of(&known);
    result
}
