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
//! **Voting.** On a DuT that shares its cores (a VM, a laptop, the namespace lab) whether a
//! trial near the boundary loses a few frames is a matter of chance, and one unlucky trial
//! sends the binary search down for good (or one lucky one up): two searches in a row then
//! disagree by tens of percent. So a rate is judged by a [`Vote`] of its trials
//! ([`super::vote`], after draft-ietf-bmwg-mlrsearch's goal exceed ratio and duration sum): the
//! search runs trials at the rate until the vote passes or fails it. RFC 2544's one trial per
//! rate is [`Vote::SINGLE_TRIAL`]; CSIT's NDR is a trial-time-weighted majority
//! ([`Vote::majority`]). The answer is always a rate that was measured and passed its vote,
//! never an interpolation, and it means "the highest rate whose trials mostly stayed within the
//! loss tolerance" (more than `1 - exceed_ratio` of their time); only with an exceed ratio of 0
//! does it mean "no trial at it lost". Every trial, failed or not, is kept in `trials`.

use serde::{Deserialize, Serialize};

use super::vote::{Tally, Verdict, Vote};
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
    /// Or when it is at most this share of its upper end, the lowest failing rate (0 for
    /// none): a precision relative to the answer, the same for a DuT far below the maximum. A
    /// share of the maximum instead ended the search of a Linux router (NDR about 0.5 Mpps) at
    /// the interval 0.001..0.266 Mpps with 5 % of an 8.5-Mpps start, and reported 0.001.
    #[serde(default)]
    pub relative_resolution: f64,
    /// How many times to measure the final rate again for the spread (0 for none).
    pub repeats: u32,
    /// How the trials at one rate decide whether it passes ([`Vote::SINGLE_TRIAL`] for
    /// RFC 2544's one trial per rate).
    pub vote: Vote,
    /// Safety stop: never run more search trials (every vote's included) than this.
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
            relative_resolution: 0.0,
            repeats: 3,
            vote: Vote::SINGLE_TRIAL,
            max_trials: 64,
        }
    }
}

/// What the search found.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ThroughputResult {
    /// The highest rate whose vote passed, frames per second (with [`Vote::SINGLE_TRIAL`]: the
    /// highest rate measured without intolerable loss).
    pub ndr: Option<f64>,
    /// The lowest rate whose vote failed, if any.
    pub lowest_failing: Option<f64>,
    /// The final rate measured again `repeats` times.
    pub repeated: Option<Repeated>,
    /// True when `max_trials` stopped the search before it reached the resolution (a rate whose
    /// vote was still open then counts neither way).
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
    // Whether the interval low..high is still wider than the resolution asks.
    let wide = |low: f64, high: f64| high - low > resolution.max(config.relative_resolution * high);
    let seconds = config.trial_seconds;
    let passes = |outcome: TrialOutcome| outcome.loss_ratio() <= config.loss_tolerance;
    let mut count = 0;
    // Trials at `rate` until its vote is decided, or `Undecided` when the trial cap came first.
    let mut measure = |rate: f64, trials: &mut Vec<Trial>, count: &mut u32| {
        let mut tally = Tally::default();
        while *count < config.max_trials {
            *count += 1;
            let outcome = run(&mut trial, trials, Load::Rate { rate, seconds }, 0);
            tally.add(seconds, passes(outcome));
            let verdict = tally.verdict(&config.vote);
            if verdict != Verdict::Undecided {
                return verdict;
            }
        }
        Verdict::Undecided
    };

    // The highest rate known to pass, the lowest known to fail.
    let mut low = min_rate;
    let mut high = max_rate;
    match measure(max_rate, &mut result.trials, &mut count) {
        Verdict::LowerBound => result.ndr = Some(max_rate),
        Verdict::Undecided => result.truncated = true,
        Verdict::UpperBound => {
            result.lowest_failing = Some(max_rate);
            while wide(low, high) {
                let middle = low + (high - low) / 2.0;
                match measure(middle, &mut result.trials, &mut count) {
                    Verdict::LowerBound => {
                        low = middle;
                        result.ndr = Some(middle);
                    }
                    Verdict::UpperBound => {
                        high = middle;
                        result.lowest_failing = Some(middle);
                    }
                    Verdict::Undecided => {
                        result.truncated = true;
                        break;
                    }
                }
                if wide(low, high) && count >= config.max_trials {
                    result.truncated = true;
                    break;
                }
            }
            // The lower end was only assumed to pass: check it before reporting it.
            if result.ndr.is_none() && !result.truncated && min_rate > 0.0 && min_rate < high {
                match measure(min_rate, &mut result.trials, &mut count) {
                    Verdict::LowerBound => result.ndr = Some(min_rate),
                    Verdict::UpperBound => result.lowest_failing = Some(min_rate),
                    Verdict::Undecided => result.truncated = true,
                }
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
