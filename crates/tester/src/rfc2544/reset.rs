//! RFC 2544 §26.6 reset: offer the DuT its throughput in one continuous stream, reset it while
//! the stream runs, and measure how long it forwarded nothing.
//!
//! RFC 2544 asks for the time between the last frame received before the reset and the first
//! one after it. RFC 6201, which updates §26.6, names that the timestamp method and makes the
//! frame-loss method its alternative: at a rate the DuT forwards without loss, every frame lost
//! in the trial was lost to the reset, so the reset time is the frames lost over the offered
//! rate. That is what is measured here, because it needs only the counts every trial has. A DuT
//! that lost every frame from the reset to the end of the trial had not come back
//! ([`ResetResult::unrecovered`]): such a trial is run again twice as long, up to
//! [`LONGEST`] times the configured length (a DuT restarting on a loaded machine takes longer
//! to come back, and the tester gives it the time instead of reporting a bound); only a DuT
//! still down at the end of the longest gets a lower bound. (A frame lost late in a trial
//! says nothing alone: a DuT at its NDR may lose one in any trial.)
//!
//! The reset itself (a process restarted, a link taken down and up) is the caller's: the `trial`
//! closure resets the DuT `reset_after` seconds into the trial it runs, so this function stays a
//! pure function of the outcomes, as every test in this module.

use serde::{Deserialize, Serialize};

use super::{Load, Spread, Trial, TrialOutcome, TrialSpec, run};

/// How to measure.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ResetConfig {
    /// The DuT's throughput from the throughput test, frames per second: the rate offered.
    pub throughput: f64,
    /// Length of each trial, seconds: long enough for the DuT to come back after the reset.
    pub seconds: f64,
    /// When in each trial the DuT is reset, seconds after its start.
    pub reset_after: f64,
    /// How many times to run the trial.
    pub repeats: u32,
}

/// What the test found.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ResetResult {
    /// How the DuT was reset (e.g. "link down and up of its ingress interface").
    pub method: String,
    /// The offered rate, frames per second.
    pub rate: f64,
    /// When in each trial the reset was started, seconds.
    pub reset_after: f64,
    /// Reset time of each trial, seconds: frames lost over the offered rate (RFC 6201's
    /// frame-loss method).
    pub times: Vec<f64>,
    /// Spread of the reset times, seconds.
    pub time: Spread,
    /// True when some trial lost every frame from the reset to its end even at [`LONGEST`]
    /// times the configured length: the DuT had not come back, and its time is a lower bound
    /// (give longer trials).
    pub unrecovered: bool,
    /// True when the generator fell behind its schedule in some trial (a loaded machine): the
    /// frames it still owed count as lost, so that trial's time is too long.
    #[serde(default)]
    pub generator_behind: bool,
    pub trials: Vec<Trial>,
}

/// How much the frames lost may fall short of the time from the reset to the end of a trial,
/// seconds, and the DuT still count as never having come back.
const END_MARGIN: f64 = 0.05;

/// A trial whose DuT had not come back is run again twice as long, up to this many times the
/// configured length.
pub const LONGEST: f64 = 4.0;

/// Runs the test; see the module documentation.
pub fn reset(
    config: &ResetConfig,
    method: &str,
    mut trial: impl FnMut(TrialSpec) -> TrialOutcome,
) -> ResetResult {
    let mut result = ResetResult {
        method: method.into(),
        rate: config.throughput,
        reset_after: config.reset_after,
        ..ResetResult::default()
    };
    // One rate in two phases split at the reset, not a steady `Load::Rate`: the suite runs a
    // steady trial its generator spoiled again, and the run again would not see the reset
    // (measured: ovs "reset" in 0.000 s after such a repeat).
    let load = |seconds: f64| Load::Step {
        first_rate: config.throughput,
        first_seconds: config.reset_after,
        then_rate: config.throughput,
        then_seconds: (seconds - config.reset_after).max(0.0),
    };
    for index in 0..config.repeats.max(1) {
        let mut seconds = config.seconds;
        loop {
            let outcome = run(&mut trial, &mut result.trials, load(seconds), index);
            // Frames that did not arrive: one that left the tester late (the DuT pushed back
            // while it was down) but arrived was forwarded.
            let time = outcome.missing() as f64 / config.throughput.max(f64::MIN_POSITIVE);
            let down_to_the_end = time >= seconds - config.reset_after - END_MARGIN;
            if down_to_the_end && seconds * 2.0 <= config.seconds * LONGEST {
                seconds *= 2.0;
                continue;
            }
            result.unrecovered |= down_to_the_end;
            if outcome.departure.is_some_and(|d| d.behind > 0) {
                result.generator_behind = true;
            }
            result.times.push(time);
            break;
        }
    }
    result.time = Spread::of(&result.times);
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A DuT at its throughput that forwards nothing for `outage` seconds from `at`.
    fn dut(outage: f64, at: f64) -> impl FnMut(TrialSpec) -> TrialOutcome {
        move |spec| {
            let Load::Step {
                first_rate: rate,
                first_seconds,
                then_rate,
                then_seconds,
            } = spec.load
            else {
                panic!("one rate in two phases")
            };
            assert_eq!((rate, first_seconds), (then_rate, at));
            let seconds = first_seconds + then_seconds;
            let sent = (rate * seconds) as u64;
            let lost = (rate * outage.min(seconds - at)) as u64;
            TrialOutcome {
                sent,
                received: sent - lost,
                seconds,
                last_loss: None,
                departure: None,
                receiver_refused: 0,
            }
        }
    }

    fn config() -> ResetConfig {
        ResetConfig {
            throughput: 100_000.0,
            seconds: 10.0,
            reset_after: 2.0,
            repeats: 3,
        }
    }

    #[test]
    fn the_reset_time_is_the_frames_lost_over_the_offered_rate() {
        let result = reset(&config(), "restart", dut(1.5, 2.0));
        assert_eq!(result.method, "restart");
        assert_eq!(result.times, [1.5, 1.5, 1.5]);
        assert_eq!(result.time.median, 1.5);
        assert_eq!(result.trials.len(), 3);
        assert!(!result.unrecovered);
        // A reset that lost nothing took no measurable time.
        assert_eq!(reset(&config(), "flap", dut(0.0, 2.0)).time.max, 0.0);
    }

    #[test]
    fn a_dut_still_down_at_the_end_of_the_trial_gets_longer_trials_then_a_lower_bound() {
        // Back after 12 s: the 10-s trial ends too soon, the 20-s one measures it.
        let result = reset(&config(), "restart", dut(12.0, 2.0));
        assert!(!result.unrecovered);
        assert_eq!(result.times, [12.0, 12.0, 12.0]);
        assert_eq!(result.trials.len(), 6);
        // Never back: 10, 20 and 40 s, then a bound.
        let result = reset(&config(), "restart", dut(300.0, 2.0));
        assert!(result.unrecovered);
        assert_eq!(result.time.median, 38.0);
        assert_eq!(result.trials.len(), 9);
    }
}
