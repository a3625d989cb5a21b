//! Pacing schedules: when each frame should leave, in TSC cycles, for a given rate.
//!
//! A [`Schedule`] is an iterator of departure times; the sending loop waits for the next time
//! and sends, and the times it actually achieved go into the pacing-accuracy figure. Keeping
//! the schedule apart from the sending makes it a pure function of (pattern, rate, clock rate,
//! seed), so its statistics are tested exactly, with no timing involved.
//!
//! * CBR: frame *n* leaves at `start + n × period`, computed from *n* (not by adding gaps), so
//!   rounding never accumulates into drift.
//! * Poisson: exponentially distributed gaps with mean `period` (Raumer et al. recommend Poisson
//!   beside CBR because it approximates real traffic over short time scales); times are kept as
//!   `f64` cycles and rounded when handed out, so the mean rate is exact in the long run.
//! * Bursts: `size` frames spaced at `inner_rate` (the line rate, or `f64::INFINITY` for "all at
//!   once"), bursts starting every `size × period`, so the mean rate is still the asked rate and
//!   the gap between bursts is what remains of the period.
//!
//! The random numbers come from our own small generator, [`Rng`] (xoshiro256** seeded through
//! SplitMix64): the same seed gives the same schedule on every machine.

use serde::{Deserialize, Serialize};

/// A small, fast, seeded pseudo-random generator (xoshiro256**, Blackman and Vigna, 2018).
#[derive(Clone, Debug)]
pub struct Rng {
    state: [u64; 4],
}

impl Rng {
    /// A generator whose whole sequence is determined by `seed`.
    pub fn new(seed: u64) -> Rng {
        // SplitMix64 spreads any seed (even 0) over the 256 bits of state.
        let mut mix = seed;
        let mut next = || {
            mix = mix.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = mix;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        };
        Rng {
            state: [next(), next(), next(), next()],
        }
    }

    /// 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let [a, b, c, d] = self.state;
        let result = b.wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = b << 17;
        let c = c ^ a;
        let d = d ^ b;
        let b = b ^ c;
        let a = a ^ d;
        let c = c ^ t;
        let d = d.rotate_left(45);
        self.state = [a, b, c, d];
        result
    }

    /// A uniform number in [0, 1), 53 bits of precision.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// True with probability `p` (never for `p <= 0`, always for `p >= 1`).
    pub fn chance(&mut self, p: f64) -> bool {
        p > 0.0 && self.unit() < p
    }

    /// An exponentially distributed number with mean `mean`.
    pub fn exponential(&mut self, mean: f64) -> f64 {
        // 1 - unit() is in (0, 1], so the logarithm is finite.
        -(1.0 - self.unit()).ln() * mean
    }
}

/// How departures are spread in time.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Pattern {
    /// Constant bit rate: equal gaps.
    Cbr,
    /// Exponential gaps (a Poisson process), from `seed`.
    Poisson { seed: u64 },
    /// `size` frames at `inner_rate` frames per second, then a pause; see the module docs.
    Burst { size: u32, inner_rate: f64 },
}

/// Why a schedule cannot be made.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum PacingError {
    #[error("rate {0} frames/s is not a positive finite number; give a rate above 0")]
    Rate(f64),
    #[error("clock rate is 0 Hz; pass the TSC frequency (wirespeed_packet::cpu::tsc_hz)")]
    Clock,
    #[error("a burst needs at least one frame")]
    EmptyBurst,
    #[error(
        "bursts at {inner} frames/s cannot average {rate} frames/s; the inner rate must be at least the rate"
    )]
    InnerRate { inner: f64, rate: f64 },
}

/// An endless iterator of departure times, in TSC cycles.
#[derive(Clone, Debug)]
pub struct Schedule {
    pattern: Pattern,
    start: u64,
    /// Mean cycles between frames.
    period: f64,
    /// Cycles between frames inside a burst.
    inner_period: f64,
    /// Frames handed out so far.
    index: u64,
    /// Poisson: the next departure, cycles after `start`.
    next: f64,
    rng: Rng,
}

impl Schedule {
    /// A schedule of `rate` frames per second on a clock of `hz` cycles per second, whose
    /// first departure is at cycle `start`.
    pub fn new(pattern: Pattern, rate: f64, hz: u64, start: u64) -> Result<Schedule, PacingError> {
        if !(rate.is_finite() && rate > 0.0) {
            return Err(PacingError::Rate(rate));
        }
        if hz == 0 {
            return Err(PacingError::Clock);
        }
        let period = hz as f64 / rate;
        let mut inner_period = 0.0;
        let mut seed = 0;
        match pattern {
            Pattern::Cbr => {}
            Pattern::Poisson { seed: s } => seed = s,
            Pattern::Burst { size, inner_rate } => {
                if size == 0 {
                    return Err(PacingError::EmptyBurst);
                }
                if inner_rate.is_nan() || inner_rate < rate {
                    return Err(PacingError::InnerRate {
                        inner: inner_rate,
                        rate,
                    });
                }
                inner_period = hz as f64 / inner_rate;
            }
        }
        Ok(Schedule {
            pattern,
            start,
            period,
            inner_period,
            index: 0,
            next: 0.0,
            rng: Rng::new(seed),
        })
    }

    /// Mean cycles between departures.
    pub fn period(&self) -> f64 {
        self.period
    }
}

impl Iterator for Schedule {
    type Item = u64;

    #[inline]
    fn next(&mut self) -> Option<u64> {
        let n = self.index;
        self.index += 1;
        let offset = match self.pattern {
            Pattern::Cbr => n as f64 * self.period,
            Pattern::Poisson { .. } => {
                let at = self.next;
                self.next += self.rng.exponential(self.period);
                at
            }
            Pattern::Burst { size, .. } => {
                let size = size as u64;
                let (burst, within) = (n / size, n % size);
                burst as f64 * size as f64 * self.period + within as f64 * self.inner_period
            }
        };
        Some(self.start.wrapping_add(offset.round() as u64))
    }
}

/// How closely a sender followed its schedule: from the departure times it recorded.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PacingAccuracy {
    /// Rate asked for, frames per second.
    pub asked_rate: f64,
    /// Rate achieved: (departures - 1) / (last - first).
    pub achieved_rate: f64,
    /// Mean gap between departures, nanoseconds.
    pub gap_mean_ns: f64,
    /// Standard deviation of the gaps, nanoseconds.
    pub gap_stddev_ns: f64,
    /// Mean absolute difference between each departure and its scheduled time, nanoseconds
    /// (0 when no schedule was given).
    pub lateness_mean_ns: f64,
    /// Largest lateness, nanoseconds.
    pub lateness_max_ns: f64,
}

impl PacingAccuracy {
    /// Measures `departures` (cycles, in order) against `scheduled` (same length, or empty) on
    /// a clock of `hz`.
    pub fn measure(asked_rate: f64, hz: u64, departures: &[u64], scheduled: &[u64]) -> Self {
        let ns_per_cycle = if hz > 0 { 1e9 / hz as f64 } else { 0.0 };
        let mut gaps = crate::stats::Moments::default();
        for pair in departures.windows(2) {
            gaps.add(pair[1].wrapping_sub(pair[0]) as f64 * ns_per_cycle);
        }
        let mut lateness = crate::stats::Moments::default();
        let mut lateness_max: f64 = 0.0;
        for (&actual, &planned) in departures.iter().zip(scheduled) {
            let late = (actual as f64 - planned as f64).abs() * ns_per_cycle;
            lateness.add(late);
            lateness_max = lateness_max.max(late);
        }
        let span_ns = match (departures.first(), departures.last()) {
            (Some(&first), Some(&last)) => last.wrapping_sub(first) as f64 * ns_per_cycle,
            _ => 0.0,
        };
        PacingAccuracy {
            asked_rate,
            achieved_rate: if span_ns > 0.0 {
                (departures.len() - 1) as f64 * 1e9 / span_ns
            } else {
                0.0
            },
            gap_mean_ns: gaps.mean(),
            gap_stddev_ns: gaps.variance().sqrt(),
            lateness_mean_ns: lateness.mean(),
            lateness_max_ns: lateness_max,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::Moments;

    const HZ: u64 = 2_300_000_000;

    fn gap_moments(schedule: Schedule, count: usize) -> Moments {
        let times: Vec<u64> = schedule.take(count + 1).collect();
        let mut moments = Moments::default();
        for pair in times.windows(2) {
            moments.add((pair[1] - pair[0]) as f64);
        }
        moments
    }

    #[test]
    fn cbr_gaps_have_the_asked_mean_and_almost_no_variance() {
        // 1 Mpps on 2.3 GHz: 2300 cycles per frame, exactly.
        let schedule = Schedule::new(Pattern::Cbr, 1e6, HZ, 1000).unwrap();
        let moments = gap_moments(schedule.clone(), 1_000_000);
        assert_eq!(moments.mean(), 2300.0);
        assert_eq!(moments.variance(), 0.0);
        assert_eq!(schedule.clone().next(), Some(1000));
        // 3 Mpps: 766.67 cycles; gaps alternate 767/766/767 and the mean stays exact.
        let schedule = Schedule::new(Pattern::Cbr, 3e6, HZ, 0).unwrap();
        let moments = gap_moments(schedule.clone(), 999_999);
        assert!(
            (moments.mean() - HZ as f64 / 3e6).abs() < 1e-6,
            "{}",
            moments.mean()
        );
        assert!(moments.variance() < 0.25);
        // No drift: frame 3e6 leaves one second after frame 0.
        assert_eq!(schedule.clone().nth(3_000_000), Some(HZ));
    }

    #[test]
    fn poisson_gaps_are_exponential_with_the_asked_mean() {
        let schedule = Schedule::new(Pattern::Poisson { seed: 42 }, 1e6, HZ, 0).unwrap();
        let moments = gap_moments(schedule, 1_000_000);
        let mean = HZ as f64 / 1e6;
        // Exponential: variance = mean². Over 1e6 gaps the sample mean is within ~0.1 % (1 σ)
        // and the variance within ~0.5 %; allow 3 σ.
        assert!(
            (moments.mean() / mean - 1.0).abs() < 0.003,
            "{}",
            moments.mean()
        );
        assert!(
            (moments.variance() / (mean * mean) - 1.0).abs() < 0.015,
            "{}",
            moments.variance()
        );
        // The same seed gives the same schedule; another seed another one.
        let a: Vec<u64> = Schedule::new(Pattern::Poisson { seed: 7 }, 1e5, HZ, 0)
            .unwrap()
            .take(100)
            .collect();
        let b: Vec<u64> = Schedule::new(Pattern::Poisson { seed: 7 }, 1e5, HZ, 0)
            .unwrap()
            .take(100)
            .collect();
        let c: Vec<u64> = Schedule::new(Pattern::Poisson { seed: 8 }, 1e5, HZ, 0)
            .unwrap()
            .take(100)
            .collect();
        assert_eq!(a, b);
        assert_ne!(a, c);
    }

    #[test]
    fn bursts_keep_the_mean_rate_and_the_inner_spacing() {
        // 8 frames at 10 Mpps (230 cycles apart), averaging 1 Mpps: a burst every 18400 cycles.
        let pattern = Pattern::Burst {
            size: 8,
            inner_rate: 1e7,
        };
        let times: Vec<u64> = Schedule::new(pattern, 1e6, HZ, 0)
            .unwrap()
            .take(8001)
            .collect();
        assert_eq!(
            &times[..9],
            &[0, 230, 460, 690, 920, 1150, 1380, 1610, 18400]
        );
        assert_eq!(times[8000], 8000 * 2300);
        let mut moments = Moments::default();
        for pair in times.windows(2) {
            moments.add((pair[1] - pair[0]) as f64);
        }
        assert!((moments.mean() - 2300.0).abs() < 1e-9);
        // All at once: a burst's frames share one departure time.
        let all_at_once = Pattern::Burst {
            size: 4,
            inner_rate: f64::INFINITY,
        };
        let times: Vec<u64> = Schedule::new(all_at_once, 1e6, HZ, 0)
            .unwrap()
            .take(5)
            .collect();
        assert_eq!(times, [0, 0, 0, 0, 9200]);
    }

    #[test]
    fn impossible_schedules_are_refused() {
        assert_eq!(
            Schedule::new(Pattern::Cbr, 0.0, HZ, 0).unwrap_err(),
            PacingError::Rate(0.0)
        );
        assert!(Schedule::new(Pattern::Cbr, f64::NAN, HZ, 0).is_err());
        assert_eq!(
            Schedule::new(Pattern::Cbr, 1.0, 0, 0).unwrap_err(),
            PacingError::Clock
        );
        let empty = Pattern::Burst {
            size: 0,
            inner_rate: 1e9,
        };
        assert_eq!(
            Schedule::new(empty, 1.0, HZ, 0).unwrap_err(),
            PacingError::EmptyBurst
        );
        let slow = Pattern::Burst {
            size: 2,
            inner_rate: 10.0,
        };
        assert!(matches!(
            Schedule::new(slow, 100.0, HZ, 0),
            Err(PacingError::InnerRate { .. })
        ));
    }

    #[test]
    fn accuracy_compares_departures_with_the_schedule() {
        // 1 GHz clock: a cycle is a nanosecond. Asked 1 Mpps; the sender was 100 ns late once.
        let scheduled: Vec<u64> = Schedule::new(Pattern::Cbr, 1e6, 1_000_000_000, 0)
            .unwrap()
            .take(5)
            .collect();
        let departures = [0, 1000, 2100, 3000, 4000];
        let accuracy = PacingAccuracy::measure(1e6, 1_000_000_000, &departures, &scheduled);
        assert_eq!(accuracy.achieved_rate, 1e6);
        assert_eq!(accuracy.gap_mean_ns, 1000.0);
        assert!((accuracy.gap_stddev_ns - (20_000.0f64 / 3.0).sqrt()).abs() < 1e-9);
        assert_eq!(accuracy.lateness_mean_ns, 20.0);
        assert_eq!(accuracy.lateness_max_ns, 100.0);
        assert_eq!(
            PacingAccuracy::measure(1.0, 1, &[], &[]),
            PacingAccuracy {
                asked_rate: 1.0,
                ..PacingAccuracy::default()
            }
        );
    }
}
