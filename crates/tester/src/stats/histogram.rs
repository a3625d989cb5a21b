//! Latency per trial in an HDR histogram, and the summary every report shows: min, mean,
//! percentiles 25, 50, 75, 95, 99, 99.9, max, and the whole histogram.
//!
//! Raumer et al. (seed 002) show why an average alone misleads: software DuTs have long tails
//! and multimodal latencies, so the report keeps the percentiles and the histogram itself.
//! An HDR histogram records a value in constant time with no allocation (its buckets are
//! allocated once for the whole range) and keeps three significant digits everywhere from 1 ns
//! to 100 s, so the sink can record every probe on its hot path.

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// Largest latency recorded exactly, nanoseconds (100 s); larger values count as this.
pub const MAX_LATENCY_NS: u64 = 100_000_000_000;

/// Significant decimal digits kept for every value.
pub const SIGNIFICANT_DIGITS: u8 = 3;

/// The percentiles every summary reports.
pub const PERCENTILES: [f64; 6] = [25.0, 50.0, 75.0, 95.0, 99.0, 99.9];

/// The latencies of one trial, in nanoseconds.
#[derive(Clone, Debug)]
pub struct LatencyHistogram {
    histogram: Histogram<u64>,
}

impl Default for LatencyHistogram {
    fn default() -> Self {
        Self::new()
    }
}

impl LatencyHistogram {
    /// An empty histogram covering 1 ns..=100 s with three significant digits.
    pub fn new() -> Self {
        // The bounds are constants that hdrhistogram accepts (low >= 1, high >= 2 * low,
        // digits <= 5); `new_with_bounds` only fails for bounds outside that.
        let histogram = Histogram::new_with_bounds(1, MAX_LATENCY_NS, SIGNIFICANT_DIGITS)
            .unwrap_or_else(|_| unreachable!("constant histogram bounds are valid"));
        Self { histogram }
    }

    /// Records one latency; values beyond 100 s count as 100 s, 0 counts as 0.
    #[inline]
    pub fn record(&mut self, nanoseconds: u64) {
        self.histogram.saturating_record(nanoseconds);
    }

    /// Records `count` latencies of `nanoseconds` each (as [`LatencyHistogram::record`]).
    pub fn record_n(&mut self, nanoseconds: u64, count: u64) {
        self.histogram.saturating_record_n(nanoseconds, count);
    }

    /// Adds every value of `other` (for example the histograms of several sink threads).
    pub fn add(&mut self, other: &LatencyHistogram) {
        // Both have the same bounds, so adding cannot fail for lack of range.
        let _ = self.histogram.add(&other.histogram);
    }

    /// How many latencies were recorded.
    pub fn count(&self) -> u64 {
        self.histogram.len()
    }

    /// The latency at `percentile` (0..=100), nanoseconds: the highest value equivalent (within
    /// the precision) to the recorded value at that rank.
    pub fn percentile(&self, percentile: f64) -> u64 {
        self.histogram.value_at_percentile(percentile)
    }

    /// The summary for the report.
    pub fn summary(&self) -> LatencySummary {
        let h = &self.histogram;
        if h.is_empty() {
            return LatencySummary::default();
        }
        let [p25, p50, p75, p95, p99, p999] = PERCENTILES.map(|p| h.value_at_percentile(p));
        LatencySummary {
            count: h.len(),
            min_ns: h.min(),
            mean_ns: h.mean(),
            p25_ns: p25,
            p50_ns: p50,
            p75_ns: p75,
            p95_ns: p95,
            p99_ns: p99,
            p999_ns: p999,
            max_ns: h.max(),
            buckets: buckets(h),
        }
    }
}

/// The summary's buckets as HdrHistogram's compressed encoding and back: the buckets are the
/// recorded values of a histogram of this module's bounds, so recording each bucket's highest
/// value `count` times rebuilds that histogram exactly, and its recorded values are the
/// buckets again.
mod hdr_encoded {
    use base64::Engine;
    use base64::engine::general_purpose::STANDARD;
    use hdrhistogram::serialization::{Deserializer as HdrReader, Serializer, V2DeflateSerializer};
    use serde::de::Error;
    use serde::{Deserialize, Deserializer, Serializer as SerdeSerializer};

    use super::{LatencyBucket, LatencyHistogram, buckets};

    pub fn serialize<S: SerdeSerializer>(
        list: &[LatencyBucket],
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        let mut histogram = LatencyHistogram::new();
        for bucket in list {
            let _ = histogram
                .histogram
                .record_n(bucket.high_ns.min(super::MAX_LATENCY_NS), bucket.count);
        }
        let mut bytes = Vec::new();
        V2DeflateSerializer::new()
            .serialize(&histogram.histogram, &mut bytes)
            .map_err(|error| serde::ser::Error::custom(format!("{error:?}")))?;
        serializer.serialize_str(&STANDARD.encode(bytes))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Vec<LatencyBucket>, D::Error> {
        let text = String::deserialize(deserializer)?;
        let bytes = STANDARD
            .decode(text.as_bytes())
            .map_err(|error| D::Error::custom(format!("histogram: not base64: {error}")))?;
        let histogram: hdrhistogram::Histogram<u64> = HdrReader::new()
            .deserialize(&mut bytes.as_slice())
            .map_err(|error| {
                D::Error::custom(format!(
                    "histogram: not an HdrHistogram encoding: {error:?}"
                ))
            })?;
        Ok(buckets(&histogram))
    }
}

/// Every non-empty bucket of `h`, in increasing order.
fn buckets(h: &Histogram<u64>) -> Vec<LatencyBucket> {
    h.iter_recorded()
        .map(|v| LatencyBucket {
            low_ns: h.lowest_equivalent(v.value_iterated_to()),
            high_ns: h.highest_equivalent(v.value_iterated_to()),
            count: v.count_at_value(),
        })
        .collect()
}

/// One bucket of the histogram: `count` latencies between `low_ns` and `high_ns` (inclusive).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LatencyBucket {
    pub low_ns: u64,
    pub high_ns: u64,
    pub count: u64,
}

/// What the report shows of one trial's latencies, all in nanoseconds.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LatencySummary {
    pub count: u64,
    pub min_ns: u64,
    pub mean_ns: f64,
    pub p25_ns: u64,
    pub p50_ns: u64,
    pub p75_ns: u64,
    pub p95_ns: u64,
    pub p99_ns: u64,
    pub p999_ns: u64,
    pub max_ns: u64,
    /// Every non-empty bucket, in increasing order. In JSON: `histogram`, the histogram in
    /// HdrHistogram's own compressed encoding (V2, deflate, base64), which every HdrHistogram
    /// library reads (Java's `HistogramLogReader`, Python's `hdrh`); a list of buckets took
    /// megabytes per report.
    #[serde(rename = "histogram", with = "hdr_encoded")]
    pub buckets: Vec<LatencyBucket>,
}

impl LatencySummary {
    /// The percentiles in the order of [`PERCENTILES`].
    pub fn percentiles(&self) -> [u64; 6] {
        [
            self.p25_ns,
            self.p50_ns,
            self.p75_ns,
            self.p95_ns,
            self.p99_ns,
            self.p999_ns,
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generator::pacing::Rng;

    /// The value at `percentile` of a sorted array: the smallest value with at least that
    /// share of the values at or below it.
    fn reference(sorted: &[u64], percentile: f64) -> u64 {
        let rank = ((percentile / 100.0) * sorted.len() as f64).ceil().max(1.0) as usize;
        sorted[rank - 1]
    }

    /// The JSON form keeps every bucket, in HdrHistogram's encoding, a few hundred bytes where
    /// the list of buckets took tens of kilobytes; garbage in its place is an error.
    #[test]
    fn the_histogram_goes_to_json_encoded_and_comes_back_whole() {
        let mut rng = Rng::new(7);
        let mut histogram = LatencyHistogram::new();
        for _ in 0..50_000 {
            histogram.record(5_000 + rng.exponential(20_000.0) as u64);
        }
        histogram.record(MAX_LATENCY_NS * 2);
        let summary = histogram.summary();
        assert!(summary.buckets.len() > 500, "{}", summary.buckets.len());
        let json = serde_json::to_string(&summary).unwrap();
        let back: LatencySummary = serde_json::from_str(&json).unwrap();
        assert_eq!(back, summary);
        let listed = serde_json::to_string(&summary.buckets).unwrap();
        assert!(
            json.len() * 5 < listed.len(),
            "{} vs {}",
            json.len(),
            listed.len()
        );
        let empty = LatencySummary::default();
        let back: LatencySummary =
            serde_json::from_str(&serde_json::to_string(&empty).unwrap()).unwrap();
        assert_eq!(back, empty);
        for garbage in ["\"not base64!\"", "\"AAAA\"", "\"\"", "12"] {
            let text = json.replace(
                &json[json.find("\"histogram\":").unwrap() + 12..json.len() - 1],
                garbage,
            );
            assert!(
                serde_json::from_str::<LatencySummary>(&text).is_err(),
                "{text}"
            );
        }
    }

    #[test]
    fn percentiles_match_a_sorted_array_within_the_precision() {
        // A long-tailed, two-humped distribution like the ones in seed 002: most around 10 µs,
        // some around 40 µs, a tail to 2 ms.
        let mut rng = Rng::new(3);
        let mut values = Vec::new();
        let mut histogram = LatencyHistogram::new();
        for _ in 0..200_000 {
            let base = if rng.chance(0.2) { 40_000.0 } else { 10_000.0 };
            let value = (base
                + rng.exponential(2_000.0)
                + if rng.chance(0.001) {
                    rng.exponential(500_000.0)
                } else {
                    0.0
                }) as u64;
            values.push(value);
            histogram.record(value);
        }
        values.sort_unstable();
        let summary = histogram.summary();
        assert_eq!(summary.count, 200_000);
        for (p, got) in PERCENTILES.iter().zip(summary.percentiles()) {
            let want = reference(&values, *p);
            let error = got.abs_diff(want) as f64 / want as f64;
            assert!(error <= 0.001, "p{p}: got {got}, want {want}");
        }
        let mean = values.iter().sum::<u64>() as f64 / values.len() as f64;
        assert!((summary.mean_ns / mean - 1.0).abs() < 0.001);
        assert!(summary.min_ns.abs_diff(values[0]) as f64 <= values[0] as f64 * 0.001);
        let max = *values.last().unwrap();
        assert!(summary.max_ns.abs_diff(max) as f64 <= max as f64 * 0.001);
        // The buckets hold every value, in increasing order, each once.
        assert_eq!(
            summary.buckets.iter().map(|b| b.count).sum::<u64>(),
            200_000
        );
        assert!(
            summary
                .buckets
                .windows(2)
                .all(|w| w[0].high_ns < w[1].low_ns)
        );
    }

    #[test]
    fn huge_values_saturate_and_histograms_add() {
        let mut a = LatencyHistogram::new();
        a.record(u64::MAX);
        a.record(0);
        let mut b = LatencyHistogram::new();
        b.record(1_000);
        a.add(&b);
        assert_eq!(a.count(), 3);
        let summary = a.summary();
        assert_eq!(summary.min_ns, 0);
        assert!(summary.max_ns >= MAX_LATENCY_NS);
        assert_eq!(summary.p50_ns, 1_000);
        assert_eq!(LatencyHistogram::new().summary(), LatencySummary::default());
    }
}
