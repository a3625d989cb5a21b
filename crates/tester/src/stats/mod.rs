//! Statistics the sink keeps per trial: latency histograms, sequence tracking, and running
//! moments (mean and variance without storing the samples).
//!
//! * [`histogram`]: an HDR histogram of latencies and the summary the report shows.
//! * [`sequence`]: loss, reordering and duplicates per flow from sequence numbers, in bounded
//!   memory.

use serde::{Deserialize, Serialize};

pub mod histogram;
pub mod sequence;

pub use histogram::{LatencyBucket, LatencyHistogram, LatencySummary};
pub use sequence::{Arrival, SequenceCounts, SequenceTable, SequenceTracker, WINDOW};

/// Count, mean and variance of a stream of numbers, updated one at a time (Welford's method,
/// which stays accurate where summing squares would cancel).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Moments {
    count: u64,
    mean: f64,
    /// Sum of squared differences from the running mean.
    squares: f64,
}

impl Moments {
    /// Adds one value.
    #[inline]
    pub fn add(&mut self, value: f64) {
        self.count += 1;
        let delta = value - self.mean;
        self.mean += delta / self.count as f64;
        self.squares += delta * (value - self.mean);
    }

    /// How many values were added.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// Their mean (0 for none).
    pub fn mean(&self) -> f64 {
        self.mean
    }

    /// Their sample variance (divided by count - 1; 0 for fewer than two values).
    pub fn variance(&self) -> f64 {
        if self.count < 2 {
            0.0
        } else {
            self.squares / (self.count - 1) as f64
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn moments_match_the_two_pass_formulas() {
        let values = [1e9 + 4.0, 1e9 + 7.0, 1e9 + 13.0, 1e9 + 16.0];
        let mut moments = Moments::default();
        for v in values {
            moments.add(v);
        }
        assert_eq!(moments.count(), 4);
        assert_eq!(moments.mean(), 1e9 + 10.0);
        // Differences -6, -3, 3, 6: squares 90, over 3.
        assert!((moments.variance() - 30.0).abs() < 1e-6);
        assert_eq!(Moments::default().variance(), 0.0);
    }
}
