//! RFC 2544 tests as pure functions: each test asks a `trial` closure to offer a load and
//! decides what to offer next from the counts that come back.
//!
//! A search never touches a port, a clock or a DuT. It is handed `trial: impl FnMut(TrialSpec)
//! -> TrialOutcome` (the generator and sink behind it are someone else's job) and a config, and
//! returns a result that carries every trial it ran, so the report can show how the answer was
//! reached and a reader can check it. That makes every search a deterministic function of the
//! outcomes it is fed, unit-tested here against simulated DuTs with known capacity and noise.
//!
//! * [`search`]: RFC 2544 §26.1 throughput, a binary search for the no-drop rate (NDR).
//! * [`mlrsearch`]: NDR and PDR in one pass, short trials first and full-length trials last
//!   (the ideas of draft-ietf-bmwg-mlrsearch as FD.io CSIT uses them).
//! * [`loss_rate`]: RFC 2544 §26.3 frame loss rate, from 100 % down in 10 % steps.
//! * [`back_to_back`]: RFC 2544 §26.4 with RFC 9004's refinements: the longest loss-free burst.
//! * [`recovery`]: RFC 2544 §26.5 system recovery: 110 % overload, then 50 %.
//! * [`reset`]: RFC 2544 §26.6 reset: the throughput offered while the DuT is reset.
//! * [`vote`]: whether a load passes, from one trial (RFC 2544) or a trial-time-weighted vote
//!   of several (MLRsearch's exceed ratio), for the two searches.
//!
//! Repeated measurements are summarised as a [`Spread`] (min, median, max), never one number.

use serde::{Deserialize, Serialize};

pub mod back_to_back;
pub mod loss_rate;
pub mod mlrsearch;
pub mod recovery;
pub mod reset;
pub mod search;
pub mod vote;

pub use back_to_back::{BackToBackConfig, BackToBackResult, back_to_back};
pub use loss_rate::{LossRateConfig, LossRatePoint, LossRateResult, loss_rate};
pub use mlrsearch::{MlrConfig, MlrResult, MlrTarget, TargetResult, mlrsearch};
pub use recovery::{RecoveryConfig, RecoveryResult, recovery};
pub use reset::{ResetConfig, ResetResult, reset};
pub use search::{ThroughputConfig, ThroughputResult, throughput};
pub use vote::{Tally, Verdict, Vote};

/// What one trial offers to the DuT.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Load {
    /// A steady stream of `rate` frames per second for `seconds`.
    Rate { rate: f64, seconds: f64 },
    /// `frames` frames back to back at `rate` frames per second (usually the line rate).
    Burst { frames: u64, rate: f64 },
    /// `first_rate` for `first_seconds`, then without a pause `then_rate` for `then_seconds`
    /// (the system recovery test). The trial reports when the last lost frame was sent.
    Step {
        first_rate: f64,
        first_seconds: f64,
        then_rate: f64,
        then_seconds: f64,
    },
}

impl Load {
    /// The rate asked for at the start of the trial, in frames per second.
    pub fn rate(&self) -> f64 {
        match *self {
            Load::Rate { rate, .. } | Load::Burst { rate, .. } => rate,
            Load::Step { first_rate, .. } => first_rate,
        }
    }
}

/// One trial as a search asks for it.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct TrialSpec {
    pub load: Load,
}

/// What a trial measured. `received` may exceed `sent` when the DuT duplicates frames; that
/// counts as no loss (duplicates are the sink's business, see `stats::sequence`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TrialOutcome {
    /// Frames the tester transmitted.
    pub sent: u64,
    /// Frames the sink counted as arrived.
    pub received: u64,
    /// Seconds from the first to the last transmission.
    pub seconds: f64,
    /// Seconds from the start of the trial to the departure of the last frame that was lost,
    /// when the trial tracks it (needed by [`recovery`]); `None` when nothing was lost or the
    /// trial does not know.
    #[serde(default)]
    pub last_loss: Option<f64>,
    /// When the frames left the tester's port, for a trial that measures it (a steady rate
    /// over real ports); `None` otherwise.
    #[serde(default)]
    pub departure: Option<Departure>,
    /// Frames the DuT delivered that the tester's receiving side refused before counting them:
    /// its interface's ring was full (a veth's `rx_dropped`) or its socket had no room. The
    /// DuT forwarded them; the tester could not take them ([`TrialOutcome::spoiled_by_tester`]).
    #[serde(default)]
    pub receiver_refused: u64,
}

/// When a steady trial's frames left the tester's port, against their schedule.
///
/// A frame counts as offered at the trial's rate only when it left the port within
/// `tolerance_seconds` of its due time. A DuT that pushes back (a veth whose peer's ring is
/// full stops the tester's queue, a shaper holds frames) otherwise makes the frames of an
/// excessive rate wait in the tester's own queues and leave at the DuT's pace, every one of
/// them arriving before the trial's wait ends: zero loss at a rate that was never offered
/// (issue 16: a search found 109 kframes/s through a 104 kframes/s shaper). So the frames that
/// waited longer in the port are counted lost at this rate ([`Departure::held_back`]), and so
/// are those the generator itself still owed at the end ([`Departure::behind`]): the trial
/// could not offer its rate, and never passes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Departure {
    /// The rate the schedule asked for, frames/s.
    pub scheduled_rate: f64,
    /// Frames that left the port per second, from the first frame's due time to the last
    /// frame's departure (one schedule period added, so that on-time departures give the
    /// scheduled rate).
    pub departed_rate: f64,
    /// The longest any frame was seen to wait past its due time before it left the port,
    /// seconds (a lower bound: a frame is seen waiting when the port's completions have not
    /// reached it).
    pub lag_seconds: f64,
    /// How late a frame may leave and still count as offered at the rate, seconds.
    pub tolerance_seconds: f64,
    /// Frames the generator handed to the port more than the tolerance after their due time
    /// (it was off its core), anywhere in the trial.
    pub sent_late: u64,
    /// Frames handed to the port in time that left it more than the tolerance later: the DuT
    /// (or the path to it) did not take them at this rate. Counted lost.
    pub held_back: u64,
    /// Frames at the end of the trial that the generator handed out more than the tolerance
    /// late, with no frame after them on time again: the trial ended behind its schedule.
    /// Counted lost.
    pub behind: u64,
    /// For a sender that never queues (the in-kernel one): the frames it did not send at all,
    /// their turn having come after the deadline (it owed them: the rate was not offered). The
    /// rest of what did not arrive was sent and lost on the way, so when that exceeds what the
    /// generator's lateness explains, the DuT failed at this rate whatever the generator
    /// managed ([`TrialOutcome::spoiled_by_tester`]). `None` for a sender whose refusals may
    /// be the DuT's pushback (AF_XDP).
    #[serde(default)]
    pub not_sent: Option<u64>,
}

/// How far the departed rate may fall short of the scheduled one in a trial that left on
/// schedule ([`Departure::on_schedule`]).
pub const DEPARTED_RATE_SHARE: f64 = 0.005;

impl Departure {
    /// Whether the frames left as scheduled: none held back, none still owed at the end, and
    /// the departed rate within [`DEPARTED_RATE_SHARE`] of the scheduled one (frames the
    /// tester refused or never sent did not depart). A trial that did not is marked in the
    /// report (`trials.csv`).
    pub fn on_schedule(&self) -> bool {
        self.held_back == 0
            && self.behind == 0
            && (self.departed_rate - self.scheduled_rate).abs()
                <= DEPARTED_RATE_SHARE * self.scheduled_rate
    }
}

impl TrialOutcome {
    /// Frames that did not count at this rate: those that did not arrive, plus those that left
    /// the tester too late ([`Departure`]); a late frame may also be missing, so at most `sent`.
    pub fn lost(&self) -> u64 {
        let late = self.departure.map_or(0, |d| d.held_back + d.behind);
        self.missing().saturating_add(late).min(self.sent)
    }

    /// Whether the tester, not the DuT, may have decided this trial. Its generator: it ended
    /// behind its schedule (the rate was not offered), or the trial lost no more frames than
    /// the generator handed out late ([`Departure::sent_late`]): a paced sender that was off
    /// its core sends what fell due meanwhile as one burst, and a DuT with a short queue loses
    /// or pushes back up to that burst at any rate. Its receiver: the loss is no more than
    /// what the tester's receiving side refused ([`TrialOutcome::receiver_refused`]), frames
    /// the DuT did forward. A loss larger than both together is the DuT's own. Such a trial is
    /// run again; one that stays so does not pass, and an NDR below it is tester-limited. A
    /// trial whose sender never queues and whose DuT lost more of the frames it was sent than
    /// the lateness and the receiver explain failed at this rate, however late the generator
    /// was ([`Departure::not_sent`]).
    pub fn spoiled_by_tester(&self) -> bool {
        let lost = self.lost();
        let (late, owed, not_sent) = self.departure.map_or((0, false, None), |d| {
            let owed = d.behind > 0 || d.not_sent.is_some_and(|not_sent| not_sent > 0);
            (d.sent_late, owed, d.not_sent)
        });
        let explained = lost > 0 && lost <= late.saturating_add(self.receiver_refused);
        // Frames sent and lost beyond any burst the lateness made and beyond what the
        // receiver refused: the DuT's own failure.
        let dut_failed = not_sent.is_some_and(|not_sent| {
            self.missing()
                .saturating_sub(not_sent)
                .saturating_sub(self.receiver_refused)
                > late
        });
        (owed || explained) && !dut_failed
    }

    /// Frames that did not arrive (never negative).
    pub fn missing(&self) -> u64 {
        self.sent.saturating_sub(self.received)
    }

    /// Share of the sent frames that did not arrive, 0.0..=1.0; 0.0 when nothing was sent.
    pub fn loss_ratio(&self) -> f64 {
        if self.sent == 0 {
            0.0
        } else {
            self.lost() as f64 / self.sent as f64
        }
    }

    /// Frames per second the tester achieved (sent over the trial time).
    pub fn sent_rate(&self) -> f64 {
        if self.seconds > 0.0 {
            self.sent as f64 / self.seconds
        } else {
            0.0
        }
    }

    /// Frames per second that arrived (the DuT's forwarding rate in this trial).
    pub fn received_rate(&self) -> f64 {
        if self.seconds > 0.0 {
            self.received as f64 / self.seconds
        } else {
            0.0
        }
    }
}

/// A trial as it is kept for the report: what was asked, what came back, and which step of
/// the test it belonged to.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Trial {
    pub spec: TrialSpec,
    pub outcome: TrialOutcome,
    /// The search's phase or step (MLRsearch phase, repeat index, ...); 0 when it has none.
    pub phase: u32,
}

/// Runs one trial and records it.
pub(crate) fn run(
    trial: &mut impl FnMut(TrialSpec) -> TrialOutcome,
    trials: &mut Vec<Trial>,
    load: Load,
    phase: u32,
) -> TrialOutcome {
    let spec = TrialSpec { load };
    let outcome = trial(spec);
    trials.push(Trial {
        spec,
        outcome,
        phase,
    });
    outcome
}

/// The spread of repeated measurements of one quantity.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Spread {
    pub count: u32,
    pub min: f64,
    pub median: f64,
    pub mean: f64,
    pub max: f64,
}

impl Spread {
    /// Summarises `values` (NaNs are ignored); all zero for no values.
    pub fn of(values: &[f64]) -> Spread {
        let mut sorted: Vec<f64> = values.iter().copied().filter(|v| !v.is_nan()).collect();
        sorted.sort_by(f64::total_cmp);
        let count = sorted.len();
        let (Some(&min), Some(&max)) = (sorted.first(), sorted.last()) else {
            return Spread::default();
        };
        let middle = count / 2;
        let median = if count % 2 == 1 {
            sorted[middle]
        } else {
            (sorted[middle - 1] + sorted[middle]) / 2.0
        };
        Spread {
            count: count as u32,
            min,
            median,
            mean: sorted.iter().sum::<f64>() / count as f64,
            max,
        }
    }
}

/// The final measurement at one rate repeated `repeats` times: how much the DuT forwarded and
/// lost each time.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Repeated {
    /// The offered rate, frames per second.
    pub rate: f64,
    /// Received frames per second, per repeat.
    pub received_rate: Spread,
    /// Loss ratio, per repeat.
    pub loss_ratio: Spread,
    /// How many repeats stayed within the loss tolerance.
    pub passed: u32,
}

/// Repeats a `seconds`-long trial at `rate` `repeats` times (tagging them `phase`).
pub(crate) fn repeat(
    trial: &mut impl FnMut(TrialSpec) -> TrialOutcome,
    trials: &mut Vec<Trial>,
    rate: f64,
    seconds: f64,
    repeats: u32,
    tolerance: f64,
    phase: u32,
) -> Repeated {
    let mut received = Vec::with_capacity(repeats as usize);
    let mut loss = Vec::with_capacity(repeats as usize);
    let mut passed = 0;
    for _ in 0..repeats {
        let outcome = run(trial, trials, Load::Rate { rate, seconds }, phase);
        received.push(outcome.received_rate());
        loss.push(outcome.loss_ratio());
        if outcome.loss_ratio() <= tolerance {
            passed += 1;
        }
    }
    Repeated {
        rate,
        received_rate: Spread::of(&received),
        loss_ratio: Spread::of(&loss),
        passed,
    }
}

/// Frames per second a link of `bits_per_second` carries at most with `frame_bytes`-byte
/// frames (FCS included): every frame also costs 8 bytes of preamble and 12 of gap.
pub fn line_rate(bits_per_second: f64, frame_bytes: u32) -> f64 {
    bits_per_second / ((frame_bytes as f64 + 20.0) * 8.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spread_has_min_median_mean_max() {
        let spread = Spread::of(&[3.0, 1.0, 2.0, f64::NAN, 10.0]);
        assert_eq!(spread.count, 4);
        assert_eq!(spread.min, 1.0);
        assert_eq!(spread.median, 2.5);
        assert_eq!(spread.mean, 4.0);
        assert_eq!(spread.max, 10.0);
        assert_eq!(Spread::of(&[7.0]).median, 7.0);
        assert_eq!(Spread::of(&[]), Spread::default());
    }

    #[test]
    fn line_rate_of_10ge_at_64_bytes_is_14_88_mpps() {
        assert!((line_rate(10e9, 64) - 14_880_952.38).abs() < 0.01);
    }

    #[test]
    fn loss_ratio_never_goes_negative() {
        let duplicated = TrialOutcome {
            sent: 10,
            received: 12,
            seconds: 1.0,
            ..TrialOutcome::default()
        };
        assert_eq!(duplicated.loss_ratio(), 0.0);
        assert_eq!(TrialOutcome::default().loss_ratio(), 0.0);
    }

    /// The rule of issue 16: a trial whose frames left late never passes, whatever arrived.
    #[test]
    fn frames_that_left_late_count_lost_at_the_rate() {
        let on_time = Departure {
            scheduled_rate: 1000.0,
            departed_rate: 1000.0,
            tolerance_seconds: 0.001,
            sent_late: 30,
            ..Departure::default()
        };
        let all_arrived = TrialOutcome {
            sent: 1000,
            received: 1000,
            seconds: 1.0,
            departure: Some(on_time),
            ..TrialOutcome::default()
        };
        // Late in the middle and caught up: every frame was offered within the trial.
        assert!(on_time.on_schedule());
        assert_eq!(all_arrived.lost(), 0);
        let held = TrialOutcome {
            departure: Some(Departure {
                held_back: 5,
                ..on_time
            }),
            ..all_arrived
        };
        assert!(!held.departure.unwrap().on_schedule());
        assert_eq!((held.missing(), held.lost()), (0, 5));
        assert_eq!(held.loss_ratio(), 0.005);
        let behind = TrialOutcome {
            received: 990,
            departure: Some(Departure {
                behind: 20,
                held_back: 995,
                ..on_time
            }),
            ..all_arrived
        };
        assert_eq!((behind.missing(), behind.lost()), (10, 1000));
    }
}
