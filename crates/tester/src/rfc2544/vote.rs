//! Load classification by a trial-time-weighted vote, after draft-ietf-bmwg-mlrsearch (its
//! goal exceed ratio and goal duration sum, as FD.io CSIT uses them for its NDR).
//!
//! RFC 2544 lets one trial decide a load: one lost frame and the load fails. On a DuT that
//! shares its cores the outcome of a trial near the boundary is a coin toss (trials a few
//! percent below the highest clean load lose a few frames now and then), so a search that
//! believes every trial lands wherever its first unlucky toss sent it, and two searches in a
//! row disagree. A vote asks a load for more than one trial and decides by the share of trial
//! time that failed:
//!
//! * The trials at a load add up their seconds, split into passing and failing time (a trial
//!   fails when it lost more than the loss tolerance, the draft's goal loss ratio).
//! * The **duration sum** `D` is how much trial time a load is asked for; the sum that counts is
//!   `max(D, time measured so far)`, so with `D` at most one trial's length every trial decides
//!   alone.
//! * The load is an **upper bound** (fails) once its failing time is more than `exceed_ratio`
//!   of that sum, whatever the missing trials would show; a **lower bound** (passes) once its
//!   failing time plus the time still missing is at most `exceed_ratio` of it, even if every
//!   missing trial failed; otherwise it is **undecided** and the search runs another trial at it.
//!
//! With `exceed_ratio` 0.5 a load passes when at least half of its trial time passed: a
//! majority vote that stops as soon as the majority is certain (CSIT's NDR: 0.5 with 1-second
//! trials). With `exceed_ratio` 0 one failing trial fails the load (RFC 2544), and
//! `exceed_ratio` `r / (r + 1)` with `D` of `r + 1` trials is the old rule "retry a failed
//! trial up to `r` times; the load fails only when every attempt lost" (one passing trial makes
//! the failing time plus the missing time `r` trials of `r + 1`).
//!
//! The answer of a search that votes is still a load that was measured, but its meaning
//! changes with the ratio: the highest load whose trials *mostly* stayed within the loss
//! tolerance (more than `1 - exceed_ratio` of their time), not "no loss in any trial". Every
//! trial, failed or not, stays in the result for the report.

use serde::{Deserialize, Serialize};

/// How a load is judged from its trials; see the module documentation.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Vote {
    /// Largest share of a load's trial time that may fail for the load to pass, 0 ≤ r < 1.
    pub exceed_ratio: f64,
    /// Trial time a load is asked for, seconds (the draft's goal duration sum).
    pub duration_sum: f64,
}

impl Vote {
    /// RFC 2544: one trial per load, and any loss beyond the tolerance fails it.
    pub const SINGLE_TRIAL: Vote = Vote {
        exceed_ratio: 0.0,
        duration_sum: 0.0,
    };

    /// A majority of `trials` trials of `trial_seconds` each (ties pass, as in the draft).
    pub fn majority(trials: u32, trial_seconds: f64) -> Vote {
        Vote {
            exceed_ratio: 0.5,
            duration_sum: trials as f64 * trial_seconds,
        }
    }

    /// Judges a load from the seconds of its trials that passed and that failed.
    pub fn classify(&self, passing_seconds: f64, failing_seconds: f64) -> Verdict {
        let sum = self.duration_sum.max(passing_seconds + failing_seconds);
        // Trial lengths are sums of decimal fractions: a vote that lands exactly on the limit
        // (two of four trials) must not be tipped by rounding.
        let limit = sum * self.exceed_ratio + sum * 1e-9;
        if failing_seconds > limit {
            Verdict::UpperBound
        } else if sum - passing_seconds <= limit {
            Verdict::LowerBound
        } else {
            Verdict::Undecided
        }
    }

    /// The most trials of `trial_seconds` one load can need before it is decided.
    pub fn max_trials_per_load(&self, trial_seconds: f64) -> u32 {
        if trial_seconds <= 0.0 {
            return 1;
        }
        ((self.duration_sum / trial_seconds - 1e-9).ceil() as u32).max(1)
    }

    /// The rule in words, for `trial_seconds` trials (the reports state it).
    pub fn describe(&self, trial_seconds: f64) -> String {
        let (passing, failing) = self.unanimous_trials(trial_seconds);
        let most = self.max_trials_per_load(trial_seconds);
        if most == 1 {
            return "one trial per rate decides (RFC 2544)".into();
        }
        format!(
            "exceed ratio {}, duration sum {} s: a rate passes when at most {} % of its trial \
             time lost frames, after {passing} to {most} trials, and fails after {failing} to \
             {most}",
            self.exceed_ratio,
            // To the millisecond: nine 0.2-second trials are 1.8 s, not 1.8000000000000003.
            (self.duration_sum * 1e3).round() / 1e3,
            100.0 * self.exceed_ratio
        )
    }

    /// Trials of `trial_seconds` one load takes when they all agree: (all passing, all
    /// failing). The search estimates its length from them.
    pub fn unanimous_trials(&self, trial_seconds: f64) -> (u32, u32) {
        let count = |passing: bool| {
            let mut tally = Tally::default();
            for trials in 1..=self.max_trials_per_load(trial_seconds) {
                tally.add(trial_seconds, passing);
                if tally.verdict(self) != Verdict::Undecided {
                    return trials;
                }
            }
            self.max_trials_per_load(trial_seconds)
        };
        (count(true), count(false))
    }
}

impl Default for Vote {
    fn default() -> Self {
        Vote::SINGLE_TRIAL
    }
}

/// What a load's trials so far say about it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Enough of its trial time passed: the answer is at least this load.
    LowerBound,
    /// Too much of its trial time failed: the answer is below this load.
    UpperBound,
    /// Another trial at this load is needed.
    Undecided,
}

/// The trial time measured at one load, passing and failing.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Tally {
    pub passing_seconds: f64,
    pub failing_seconds: f64,
}

impl Tally {
    /// Counts one trial of `seconds`.
    pub fn add(&mut self, seconds: f64, passed: bool) {
        if passed {
            self.passing_seconds += seconds;
        } else {
            self.failing_seconds += seconds;
        }
    }

    /// The load's verdict under `vote`.
    pub fn verdict(&self, vote: &Vote) -> Verdict {
        vote.classify(self.passing_seconds, self.failing_seconds)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds trials of one second (true: passed) and returns the verdict after each.
    fn verdicts(vote: Vote, trials: &[bool]) -> Vec<Verdict> {
        let mut tally = Tally::default();
        trials
            .iter()
            .map(|&passed| {
                tally.add(1.0, passed);
                tally.verdict(&vote)
            })
            .collect()
    }

    use Verdict::{LowerBound as Lower, Undecided as Open, UpperBound as Upper};

    #[test]
    fn a_single_trial_decides_under_rfc_2544() {
        assert_eq!(verdicts(Vote::SINGLE_TRIAL, &[true]), [Lower]);
        assert_eq!(verdicts(Vote::SINGLE_TRIAL, &[false]), [Upper]);
        // A duration sum shorter than one trial changes nothing.
        let short = Vote {
            exceed_ratio: 0.5,
            duration_sum: 0.5,
        };
        assert_eq!(verdicts(short, &[false]), [Upper]);
        assert_eq!(verdicts(short, &[true]), [Lower]);
    }

    #[test]
    fn a_majority_of_three_stops_once_it_is_certain() {
        let vote = Vote::majority(3, 1.0);
        assert_eq!(verdicts(vote, &[true, true]), [Open, Lower]);
        assert_eq!(verdicts(vote, &[false, false]), [Open, Upper]);
        assert_eq!(verdicts(vote, &[true, false, true]), [Open, Open, Lower]);
        assert_eq!(verdicts(vote, &[false, true, false]), [Open, Open, Upper]);
        assert_eq!(vote.unanimous_trials(1.0), (2, 2));
        assert_eq!(vote.max_trials_per_load(1.0), 3);
        assert_eq!(
            vote.describe(1.0),
            "exceed ratio 0.5, duration sum 3 s: a rate passes when at most 50 % of its trial \
             time lost frames, after 2 to 3 trials, and fails after 2 to 3"
        );
        assert_eq!(
            Vote::SINGLE_TRIAL.describe(1.0),
            "one trial per rate decides (RFC 2544)"
        );
    }

    #[test]
    fn a_tie_passes_as_the_draft_has_it() {
        let vote = Vote::majority(4, 1.0);
        assert_eq!(
            verdicts(vote, &[false, true, false, true]),
            [Open, Open, Open, Lower]
        );
        assert_eq!(verdicts(vote, &[false, false, false]), [Open, Open, Upper]);
        // Tenths of a second add up with rounding; the tie still passes.
        let mut tally = Tally::default();
        for passed in [true, false, true, false] {
            tally.add(0.1, passed);
        }
        assert_eq!(tally.verdict(&Vote::majority(4, 0.1)), Lower);
    }

    #[test]
    fn retries_are_a_vote_with_a_high_exceed_ratio() {
        // "Run a failed trial again up to 3 times; fail only when all 4 lost."
        let retries = Vote {
            exceed_ratio: 0.75,
            duration_sum: 4.0,
        };
        assert_eq!(verdicts(retries, &[true]), [Lower]);
        assert_eq!(
            verdicts(retries, &[false, false, true]),
            [Open, Open, Lower]
        );
        assert_eq!(
            verdicts(retries, &[false, false, false, false]),
            [Open, Open, Open, Upper]
        );
        assert_eq!(retries.unanimous_trials(1.0), (1, 4));
    }

    #[test]
    fn a_load_is_always_decided_by_its_duration_sum() {
        for exceed_ratio in [0.0, 0.2, 0.5, 0.75, 0.9] {
            for duration_sum in [1.0, 3.0, 5.0, 21.0] {
                let vote = Vote {
                    exceed_ratio,
                    duration_sum,
                };
                for pattern in 0u32..64 {
                    let trials: Vec<bool> = (0..duration_sum as u32)
                        .map(|i| (pattern >> (i % 6)) & 1 == 1)
                        .collect();
                    let last = *verdicts(vote, &trials).last().unwrap();
                    assert_ne!(last, Open, "{vote:?} {trials:?}");
                }
            }
        }
    }
}
