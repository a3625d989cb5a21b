//! RFC 2544 §26.3 frame loss rate: the loss ratio at 100 % of the maximum rate, then at 90 %,
//! 80 %, ... in steps of the configured granularity, until two successive trials lose nothing.
//!
//! RFC 2544 asks for steps of at most 10 %; finer steps are allowed and give a smoother curve
//! of loss against offered load for the report.

use serde::{Deserialize, Serialize};

use super::{Load, Trial, TrialOutcome, TrialSpec, run};

/// How to measure.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LossRateConfig {
    /// 100 % of the offered load, frames per second (usually the line rate).
    pub max_rate: f64,
    /// Step between loads, percent of `max_rate` (RFC 2544: 10 or less).
    pub step_percent: f64,
    /// Length of each trial.
    pub trial_seconds: f64,
    /// How many successive loss-free trials end the test (RFC 2544: two).
    pub clean_trials_to_stop: u32,
}

impl Default for LossRateConfig {
    fn default() -> Self {
        Self {
            max_rate: 14_880_952.0,
            step_percent: 10.0,
            trial_seconds: 60.0,
            clean_trials_to_stop: 2,
        }
    }
}

/// One load of the curve.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct LossRatePoint {
    /// Offered load in percent of `max_rate`.
    pub percent: f64,
    /// Offered load, frames per second.
    pub rate: f64,
    /// RFC 2544's frame loss rate: (sent - received) / sent, as a ratio.
    pub loss_ratio: f64,
}

/// The curve and the trials behind it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LossRateResult {
    /// From the highest load down.
    pub points: Vec<LossRatePoint>,
    /// True when the test stopped because enough successive trials lost nothing.
    pub reached_clean: bool,
    pub trials: Vec<Trial>,
}

/// Runs the test; see the module documentation.
pub fn loss_rate(
    config: &LossRateConfig,
    mut trial: impl FnMut(TrialSpec) -> TrialOutcome,
) -> LossRateResult {
    let mut result = LossRateResult::default();
    let step = config.step_percent.clamp(0.1, 100.0);
    let steps = (100.0 / step).floor() as u32;
    let mut clean = 0;
    for index in 0..steps {
        let percent = 100.0 - index as f64 * step;
        let rate = config.max_rate * percent / 100.0;
        let load = Load::Rate {
            rate,
            seconds: config.trial_seconds,
        };
        let outcome = run(&mut trial, &mut result.trials, load, index);
        result.points.push(LossRatePoint {
            percent,
            rate,
            loss_ratio: outcome.loss_ratio(),
        });
        if outcome.lost() == 0 {
            clean += 1;
            if clean >= config.clean_trials_to_stop.max(1) {
                result.reached_clean = true;
                break;
            }
        } else {
            clean = 0;
        }
    }
    result
}
