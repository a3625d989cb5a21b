//! RFC 2544 §26.4 back-to-back frames, with the refinements of RFC 9004: the longest burst
//! at the maximum rate that the DuT forwards without losing a frame, which measures its
//! buffering.
//!
//! One search is a binary search over burst lengths between `min_burst` and `max_burst`; the
//! answer is the longest burst measured without loss. RFC 2544 repeats the search (50 times)
//! and reports the average; we report the whole spread. RFC 9004 adds that the result only
//! means something when the DuT's throughput is below the maximum rate (otherwise any burst
//! passes and only `max_burst` is learned — flagged as `unbounded`), and turns the burst into
//! time: the implied buffer time is burst / max rate, and since the DuT forwards at its
//! throughput T while the burst arrives at rate R, it only had to hold burst × (1 - T/R) frames;
//! the corrected buffer time is that, at rate R.

use serde::{Deserialize, Serialize};

use super::{Load, Spread, Trial, TrialOutcome, TrialSpec, run};

/// How to measure.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BackToBackConfig {
    /// The burst's rate, frames per second (the line rate).
    pub rate: f64,
    /// Shortest burst to try.
    pub min_burst: u64,
    /// Longest burst to try (RFC 9004: long enough to last at least 2 s is prudent).
    pub max_burst: u64,
    /// Stop when pass and fail are at most this many frames apart.
    pub resolution: u64,
    /// How many independent searches (RFC 2544: 50).
    pub repeats: u32,
    /// The DuT's throughput from the throughput test, frames per second, for the corrected
    /// buffer time; `None` when unknown.
    pub throughput: Option<f64>,
}

impl Default for BackToBackConfig {
    fn default() -> Self {
        Self {
            rate: 14_880_952.0,
            min_burst: 1,
            max_burst: 30_000_000,
            resolution: 100,
            repeats: 50,
            throughput: None,
        }
    }
}

/// What the test found.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct BackToBackResult {
    /// The longest loss-free burst of each search (0 when even `min_burst` lost frames).
    pub bursts: Vec<u64>,
    /// Spread of `bursts`, frames.
    pub burst: Spread,
    /// True when `max_burst` passed in some search: the DuT keeps up at this rate and has no
    /// measurable buffer limit here.
    pub unbounded: bool,
    /// Mean burst / rate, seconds.
    pub implied_buffer_seconds: f64,
    /// Implied buffer time × (1 - throughput / rate), seconds, when the throughput is known.
    pub corrected_buffer_seconds: Option<f64>,
    /// Every burst trial; `phase` is the index of the search.
    pub trials: Vec<Trial>,
}

/// Runs the test; see the module documentation.
pub fn back_to_back(
    config: &BackToBackConfig,
    mut trial: impl FnMut(TrialSpec) -> TrialOutcome,
) -> BackToBackResult {
    let mut result = BackToBackResult::default();
    let rate = config.rate;
    let min = config.min_burst.max(1);
    let max = config.max_burst.max(min);
    let resolution = config.resolution.max(1);
    for search in 0..config.repeats.max(1) {
        let mut passes = |frames: u64, trials: &mut Vec<Trial>| {
            run(&mut trial, trials, Load::Burst { frames, rate }, search).lost() == 0
        };
        let longest = if passes(max, &mut result.trials) {
            result.unbounded = true;
            max
        } else if !passes(min, &mut result.trials) {
            0
        } else {
            let (mut low, mut high) = (min, max);
            while high - low > resolution {
                let middle = low + (high - low) / 2;
                if passes(middle, &mut result.trials) {
                    low = middle;
                } else {
                    high = middle;
                }
            }
            low
        };
        result.bursts.push(longest);
    }
    let bursts: Vec<f64> = result.bursts.iter().map(|&b| b as f64).collect();
    result.burst = Spread::of(&bursts);
    if rate > 0.0 {
        result.implied_buffer_seconds = result.burst.mean / rate;
        result.corrected_buffer_seconds = config
            .throughput
            .map(|t| result.implied_buffer_seconds * (1.0 - (t / rate).clamp(0.0, 1.0)));
    }
    result
}
