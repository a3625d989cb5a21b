//! MLRsearch: several loss-ratio targets (NDR at 0 %, PDR at e.g. 0.5 %) found in one pass,
//! with short trials while the answer is still far away and full-length trials only at the end.
//!
//! This follows the ideas of draft-ietf-bmwg-mlrsearch as FD.io CSIT uses them, in our own
//! shape:
//!
//! * The search runs in phases. Phase 0 uses `initial_seconds` trials and a wide relative
//!   width goal; each later phase lengthens the trials geometrically and halves the width, so
//!   the last phase uses `final_seconds` trials and `final_width`.
//! * Within a phase, only measurements of that phase count. Each rate is judged per target by
//!   the [`Vote`] of its trials in the phase (one trial decides under [`Vote::SINGLE_TRIAL`]; a
//!   rate whose vote is still open is measured again before anything else). The vote's
//!   duration sum is for the final trial length; shorter phases scale it down with their trials,
//!   so every phase asks a rate for the same number of trials. For each target, the upper bound
//!   is the lowest rate that failed its vote, the lower bound the highest rate below it that
//!   passed (a pass above a fail is distrusted, which keeps a noisy DuT from pulling the answer
//!   up). One trial informs every target at once.
//! * A target is done for the phase when both bounds exist and are within the width goal, or
//!   when its lower bound is the maximum rate, or its upper bound the minimum rate. Otherwise the
//!   next rate is, in order of preference: the bound the previous phase found (re-validated at
//!   the longer duration), the forwarding rate of the first failed trial at the maximum rate
//!   (the maximum receive rate is a good first guess for the capacity), the middle of the
//!   interval, or — when only one bound exists — a step away from it that doubles each time
//!   (external search).
//!
//! The result per target is the final phase's lower bound (the conservative answer: with a vote,
//! the highest rate whose trials mostly stayed within the target, see [`super::vote`]) and its
//! upper bound, with every trial tagged with its phase; the lower bounds are then measured
//! `repeats` more times at the final duration for the spread.

use serde::{Deserialize, Serialize};

use super::vote::{Tally, Verdict, Vote};
use super::{Load, Repeated, Trial, TrialOutcome, TrialSpec, repeat, run};

/// One loss-ratio target.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MlrTarget {
    /// A name for the report ("NDR", "PDR").
    pub name: String,
    /// Largest loss ratio that passes (0.0 for NDR, 0.005 for a 0.5 % PDR).
    pub loss_ratio: f64,
}

/// How to search.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MlrConfig {
    /// Highest rate to offer, frames per second.
    pub max_rate: f64,
    /// Lowest rate worth measuring, frames per second.
    pub min_rate: f64,
    /// The targets, e.g. NDR and PDR.
    pub targets: Vec<MlrTarget>,
    /// Trial length of the first phase.
    pub initial_seconds: f64,
    /// Trial length of the last phase.
    pub final_seconds: f64,
    /// Phases between the first and the last (0: the first phase is the last).
    pub intermediate_phases: u32,
    /// Relative width goal of the last phase: (upper - lower) / upper.
    pub final_width: f64,
    /// How the trials at one rate decide whether it passes a target (its duration sum is for
    /// `final_seconds` trials).
    pub vote: Vote,
    /// How many times to measure each final lower bound again for the spread.
    pub repeats: u32,
    /// Safety stop: never run more search trials than this.
    pub max_trials: u32,
}

impl Default for MlrConfig {
    fn default() -> Self {
        Self {
            max_rate: 14_880_952.0,
            min_rate: 10_000.0,
            targets: vec![
                MlrTarget {
                    name: "NDR".into(),
                    loss_ratio: 0.0,
                },
                MlrTarget {
                    name: "PDR".into(),
                    loss_ratio: 0.005,
                },
            ],
            initial_seconds: 1.0,
            final_seconds: 30.0,
            intermediate_phases: 2,
            final_width: 0.005,
            vote: Vote::SINGLE_TRIAL,
            repeats: 3,
            max_trials: 100,
        }
    }
}

/// What the search found for one target.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TargetResult {
    pub name: String,
    pub loss_ratio: f64,
    /// Highest rate of the last phase within the target (the answer), frames per second.
    pub lower: Option<f64>,
    /// Lowest rate of the last phase above the target.
    pub upper: Option<f64>,
    /// The lower bound measured again `repeats` times.
    pub repeated: Option<Repeated>,
}

/// What the search found.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct MlrResult {
    pub targets: Vec<TargetResult>,
    /// Trial length of each phase, seconds.
    pub phase_seconds: Vec<f64>,
    /// True when `max_trials` stopped the search early.
    pub truncated: bool,
    /// Every trial in order; `phase` is the search phase, repeats have phase `phases`.
    pub trials: Vec<Trial>,
}

/// One measurement of the current phase.
#[derive(Clone, Copy, Debug)]
struct Point {
    rate: f64,
    loss_ratio: f64,
    seconds: f64,
}

fn same_rate(a: f64, b: f64) -> bool {
    (a - b).abs() <= b.abs() * 1e-9
}

/// The vote of the trials at `rate` for one target.
fn verdict(points: &[Point], rate: f64, target: f64, vote: &Vote) -> Verdict {
    let mut tally = Tally::default();
    for point in points.iter().filter(|p| same_rate(p.rate, rate)) {
        tally.add(point.seconds, point.loss_ratio <= target);
    }
    tally.verdict(vote)
}

/// Bounds for one target from the current phase's points.
fn bounds(points: &[Point], target: f64, vote: &Vote) -> (Option<f64>, Option<f64>) {
    let decided = |wanted: Verdict| {
        points
            .iter()
            .map(|p| p.rate)
            .filter(move |&rate| verdict(points, rate, target, vote) == wanted)
    };
    let upper = decided(Verdict::UpperBound).min_by(f64::total_cmp);
    let lower = decided(Verdict::LowerBound)
        .filter(|&rate| upper.is_none_or(|u| rate < u))
        .max_by(f64::total_cmp);
    (lower, upper)
}

/// Per target, per phase: how far the next external step goes (relative), doubling each step.
#[derive(Clone, Copy, Debug)]
struct Steps {
    up: f64,
    down: f64,
}

struct Search<'a> {
    config: &'a MlrConfig,
    max_rate: f64,
    min_rate: f64,
    /// The rate a failing trial at the maximum rate forwarded, once known.
    max_receive_rate: Option<f64>,
}

impl Search<'_> {
    fn measured(points: &[Point], rate: f64) -> bool {
        points.iter().any(|p| same_rate(p.rate, rate))
    }

    /// The next rate for `target` in this phase, or `None` when the target is done.
    fn next_rate(
        &self,
        points: &[Point],
        target: f64,
        vote: &Vote,
        width: f64,
        hint: (Option<f64>, Option<f64>),
        steps: &mut Steps,
    ) -> Option<f64> {
        // A rate whose vote is open gets its next trial first.
        if let Some(point) = points
            .iter()
            .find(|p| verdict(points, p.rate, target, vote) == Verdict::Undecided)
        {
            return Some(point.rate);
        }
        let fresh = |rate: f64| {
            (rate >= self.min_rate && rate <= self.max_rate && !Self::measured(points, rate))
                .then_some(rate)
        };
        match bounds(points, target, vote) {
            // No point yet: start at the previous phase's answer (its lower bound, else its
            // upper bound), or at the top.
            (None, None) => Some(
                hint.0
                    .and_then(fresh)
                    .or(hint.1.and_then(fresh))
                    .unwrap_or(self.max_rate),
            ),
            (Some(lower), None) => {
                if lower >= self.max_rate {
                    return None;
                }
                if let Some(rate) = hint.1.filter(|&h| h > lower).and_then(fresh) {
                    return Some(rate);
                }
                // From a lower bound of 0 no relative step leads anywhere: try the top.
                let rate = if lower > 0.0 {
                    (lower * (1.0 + steps.up)).min(self.max_rate)
                } else {
                    self.max_rate
                };
                steps.up *= 2.0;
                Some(rate)
            }
            (None, Some(upper)) => {
                if upper <= self.min_rate {
                    return None;
                }
                if let Some(rate) = hint.0.filter(|&h| h < upper).and_then(fresh) {
                    return Some(rate);
                }
                if let Some(rate) = self.max_receive_rate.filter(|&r| r < upper).and_then(fresh) {
                    return Some(rate);
                }
                let rate = (upper * (1.0 - steps.down)).max(self.min_rate);
                steps.down = (steps.down * 2.0).min(0.5);
                Some(rate)
            }
            (Some(lower), Some(upper)) => {
                if upper - lower <= width * upper {
                    None
                } else {
                    Some(lower + (upper - lower) / 2.0)
                }
            }
        }
    }
}

/// Runs the search; see the module documentation.
pub fn mlrsearch(
    config: &MlrConfig,
    mut trial: impl FnMut(TrialSpec) -> TrialOutcome,
) -> MlrResult {
    let max_rate = config.max_rate.max(0.0);
    let mut search = Search {
        config,
        max_rate,
        min_rate: config.min_rate.clamp(0.0, max_rate),
        max_receive_rate: None,
    };
    let phases = config.intermediate_phases + 1;
    let mut result = MlrResult::default();
    let targets = config.targets.len();
    let mut hints: Vec<(Option<f64>, Option<f64>)> = vec![(None, None); targets];
    let mut count = 0u32;
    let final_width = config.final_width.clamp(1e-9, 1.0);
    for phase in 0..phases {
        let exponent = if phases > 1 {
            phase as f64 / (phases - 1) as f64
        } else {
            1.0
        };
        let initial = config.initial_seconds.max(f64::MIN_POSITIVE);
        let seconds = initial * (config.final_seconds.max(initial) / initial).powf(exponent);
        let width = (final_width * f64::powi(2.0, (phases - 1 - phase) as i32)).min(0.5);
        result.phase_seconds.push(seconds);
        let final_seconds = config.final_seconds.max(initial);
        let vote = Vote {
            duration_sum: config.vote.duration_sum * seconds / final_seconds,
            ..config.vote
        };
        let mut points: Vec<Point> = Vec::new();
        let mut steps = vec![
            Steps {
                up: width,
                down: width,
            };
            targets
        ];
        'phase: loop {
            let mut next = None;
            for (index, target) in search.config.targets.iter().enumerate() {
                if let Some(rate) = search.next_rate(
                    &points,
                    target.loss_ratio,
                    &vote,
                    width,
                    hints[index],
                    &mut steps[index],
                ) {
                    next = Some(rate);
                    break;
                }
            }
            let Some(rate) = next else { break 'phase };
            if count >= config.max_trials {
                result.truncated = true;
                break 'phase;
            }
            count += 1;
            let outcome = run(
                &mut trial,
                &mut result.trials,
                Load::Rate { rate, seconds },
                phase,
            );
            if rate >= max_rate && search.max_receive_rate.is_none() && outcome.lost() > 0 {
                search.max_receive_rate = Some(outcome.received_rate());
            }
            points.push(Point {
                rate,
                loss_ratio: outcome.loss_ratio(),
                seconds,
            });
        }
        for (index, target) in config.targets.iter().enumerate() {
            hints[index] = bounds(&points, target.loss_ratio, &vote);
        }
        if result.truncated {
            break;
        }
    }
    let final_seconds = result.phase_seconds.last().copied().unwrap_or(0.0);
    for (index, target) in config.targets.iter().enumerate() {
        let (lower, upper) = hints[index];
        let repeated = lower.filter(|_| config.repeats > 0).map(|rate| {
            repeat(
                &mut trial,
                &mut result.trials,
                rate,
                final_seconds,
                config.repeats,
                target.loss_ratio,
                phases,
            )
        });
        result.targets.push(TargetResult {
            name: target.name.clone(),
            loss_ratio: target.loss_ratio,
            lower,
            upper,
            repeated,
        });
    }
    result
}
