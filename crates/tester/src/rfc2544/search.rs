//! RFC 2544 §26.1 throughput: the highest offered rate at which the DuT loses no frames (or no
//! more than the loss the user tolerates), found by binary search.
//!
//! The first trial offers the maximum rate (the line rate, or what the tester can do): a DuT
//! that keeps up there needs no search. Otherwise the interval between the highest rate that
//! passed and the lowest that failed is halved until it is narrower than the resolution. The
//! answer is always a rate that was measured and passed, never an interpolation; when nothing
//! passes down to the minimum rate there is no answer (`ndr: None`). The final rate is then
//! measured `repeats` more times so the report gives a spread.
//!
//! **Retries.** On a DuT that shares its cores (a VM, a laptop, the namespace lab) a trial far
//! below the capacity can lose a few frames to one scheduling stall, and a single such trial
//! sends the binary search down for good: two searches in a row then disagree by tens of
//! percent. With `retries` > 0 a trial that loses more than the tolerance is run again at the
//! same rate, up to `retries` more times, and the rate fails only when every one of its trials
//! lost. A DuT that loses in a fraction *p* of its trials at a rate it can carry then fails that
//! rate with probability *p*^(retries + 1) instead of *p*; a rate above the capacity still fails
//! every time, so retries never carry the answer above what the DuT forwards without loss. The
//! answer stays a zero-loss (within the tolerance) rate: a rate that passed, measured; every
//! failed attempt is kept in `trials` for the report.

use serde::{Deserialize, Serialize};

use super::{Load, Repeated, Trial, TrialOutcome, TrialSpec, repeat, run};

/// How to search.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ThroughputConfig {
    /// Highest rate to offer, frames per second (usually the line rate).
    pub max_rate: f64,
    /// Lowest rate worth measuring, frames per second.
    pub min_rate: f64,
    /// Length of each trial (RFC 2544 asks for 60 s).
    pub trial_seconds: f64,
    /// Largest loss ratio that still counts as "no drop" (0.0 for RFC 2544).
    pub loss_tolerance: f64,
    /// Stop when the interval between pass and fail is at most this many frames per second.
    pub resolution: f64,
    /// How many times to measure the final rate again for the spread (0 for none).
    pub repeats: u32,
    /// Times a failed trial is run again at the same rate before the rate counts as failed
    /// (0 for RFC 2544's one trial per rate).
    pub retries: u32,
    /// Safety stop: never run more search trials (retries included) than this.
    pub max_trials: u32,
}

impl Default for ThroughputConfig {
    fn default() -> Self {
        Self {
            max_rate: 14_880_952.0,
            min_rate: 1_000.0,
            trial_seconds: 60.0,
            loss_tolerance: 0.0,
            resolution: 10_000.0,
            repeats: 3,
            retries: 0,
            max_trials: 64,
        }
    }
}

/// What the search found.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ThroughputResult {
    /// The highest rate measured without (intolerable) loss, frames per second.
    pub ndr: Option<f64>,
    /// The lowest rate measured with loss above the tolerance, if any.
    pub lowest_failing: Option<f64>,
    /// The final rate measured again `repeats` times.
    pub repeated: Option<Repeated>,
    /// True when `max_trials` stopped the search before it reached the resolution.
    pub truncated: bool,
    /// Every trial, in order (search trials phase 0, repeats phase 1).
    pub trials: Vec<Trial>,
}

/// Runs the binary search; see the module documentation.
pub fn throughput(
    config: &ThroughputConfig,
    mut trial: impl FnMut(TrialSpec) -> TrialOutcome,
) -> ThroughputResult {
    let mut result = ThroughputResult::default();
    let max_rate = config.max_rate.max(0.0);
    let min_rate = config.min_rate.clamp(0.0, max_rate);
    let resolution = config.resolution.max(f64::EPSILON * max_rate);
    let seconds = config.trial_seconds;
    let passes = |outcome: TrialOutcome| outcome.loss_ratio() <= config.loss_tolerance;
    let mut count = 0;
    // Whether `rate` passes in one of its first trial and retries (each one counted).
    let mut measure = |rate: f64, trials: &mut Vec<Trial>, count: &mut u32| {
        for _ in 0..=config.retries {
            *count += 1;
            if passes(run(&mut trial, trials, Load::Rate { rate, seconds }, 0)) {
                return true;
            }
            if *count >= config.max_trials {
                break;
            }
        }
        false
    };

    // The highest rate known to pass, the lowest known to fail.
    let mut low = min_rate;
    let mut high = max_rate;
    if measure(max_rate, &mut result.trials, &mut count) {
        result.ndr = Some(max_rate);
    } else {
        result.lowest_failing = Some(max_rate);
        while high - low > resolution {
            if count >= config.max_trials {
                result.truncated = true;
                break;
            }
            let middle = low + (high - low) / 2.0;
            if measure(middle, &mut result.trials, &mut count) {
                low = middle;
                result.ndr = Some(middle);
            } else {
                high = middle;
                result.lowest_failing = Some(middle);
            }
        }
        // The lower end was only assumed to pass: check it before reporting it.
        if result.ndr.is_none() && !result.truncated && min_rate > 0.0 && min_rate < high {
            if measure(min_rate, &mut result.trials, &mut count) {
                result.ndr = Some(min_rate);
            } else {
                result.lowest_failing = Some(min_rate);
            }
        }
    }
    if let Some(ndr) = result.ndr
        && config.repeats > 0
    {
        result.repeated = Some(repeat(
            &mut trial,
            &mut result.trials,
            ndr,
            seconds,
            config.repeats,
            config.loss_tolerance,
            1,
        ));
    }
    result
}
