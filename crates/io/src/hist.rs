//! Latency histograms that can be stored, merged exactly and summarised.
//!
//! Recording happens in [`crate::meter`] into HdrHistogram (2 significant digits: every value is
//! kept in a bucket no wider than 1/128 of its value, so any percentile is off by less than 1%).
//! This module defines what leaves the process: [`LatencyHistogram`], a sparse list of
//! `(bucket, count)` pairs where `bucket` is the *lowest value* (in nanoseconds) HdrHistogram maps
//! to that bucket, plus exact count, sum, minimum and maximum.
//!
//! Invariants, and why they make merging exact:
//! * every histogram uses the same bucket layout ([`SIGNIFICANT_DIGITS`]), so a bucket key means
//!   the same range of values in every process on every host;
//! * `buckets` is sorted by key, keys are unique and counts are non-zero;
//! * `count` equals the sum of the bucket counts.
//!
//! Merging two histograms is then adding counts key by key (and adding sums, taking min/max):
//! the result is bit for bit the histogram of the union of the two sets of values, which is what
//! the aggregation of many servers needs (percentiles merge; they are never averaged).
//! Subtracting an earlier snapshot of the same recorder gives the histogram of one interval.

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use crate::meter::ClassSnapshot;

/// HdrHistogram precision: 2 significant digits, i.e. relative bucket width ≤ 1/128 < 1%.
pub const SIGNIFICANT_DIGITS: u8 = 2;

/// Values are clamped to this (about 18 minutes in ns) so that a wild clock cannot blow up the
/// bucket array; no storage I/O that takes longer is worth distinguishing.
pub const MAX_TRACKABLE_NS: u64 = 1 << 40;

pub(crate) fn new_hdr() -> Histogram<u64> {
    match Histogram::new_with_bounds(1, MAX_TRACKABLE_NS, SIGNIFICANT_DIGITS) {
        Ok(h) => h,
        Err(e) => panic!("histogram with {SIGNIFICANT_DIGITS} significant digits: {e}"),
    }
}

/// The bucket layout every [`LatencyHistogram`] of this build uses. `result.json` states it once
/// (`histogram_layout`) so that a reader can tell whether two results' buckets mean the same
/// ranges of values, which exact merging needs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HistogramLayout {
    /// `hdr-log-linear`: HdrHistogram's buckets, keyed by the lowest value each holds.
    pub kind: String,
    pub significant_digits: u8,
    /// The smallest and largest value a bucket can hold, in nanoseconds (values are clamped).
    pub lowest_ns: u64,
    pub highest_ns: u64,
}

impl HistogramLayout {
    /// The layout of this build's histograms.
    pub fn current() -> HistogramLayout {
        HistogramLayout {
            kind: "hdr-log-linear".into(),
            significant_digits: SIGNIFICANT_DIGITS,
            lowest_ns: 1,
            highest_ns: MAX_TRACKABLE_NS,
        }
    }
}

/// A latency distribution in nanoseconds, in the exact-merge form described in the module header.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LatencyHistogram {
    /// Number of recorded values.
    pub count: u64,
    /// Exact sum of the recorded values, for an exact average. Written as a decimal string:
    /// JSON readers (and serde's buffered paths such as `flatten`) do not carry 128-bit numbers.
    #[serde(with = "u128_as_string")]
    pub sum_ns: u128,
    /// Exact smallest value (0 when empty).
    pub min_ns: u64,
    /// Exact largest value (0 when empty). After [`LatencyHistogram::delta_since`] this is the
    /// top of the highest non-empty bucket (within 1%), since a cumulative maximum says nothing
    /// about one interval.
    pub max_ns: u64,
    /// `[lowest value of the bucket in ns, count]`, sorted by bucket, counts non-zero.
    pub buckets: Vec<[u64; 2]>,
}

impl LatencyHistogram {
    pub fn new() -> LatencyHistogram {
        LatencyHistogram::default()
    }

    /// Builds the sparse form from an HdrHistogram with our layout, plus the exact sum, min and
    /// max kept beside it.
    pub(crate) fn from_hdr(hdr: &Histogram<u64>, sum_ns: u128, min_ns: u64, max_ns: u64) -> Self {
        let mut buckets = Vec::new();
        for v in hdr.iter_recorded() {
            let key = hdr.lowest_equivalent(v.value_iterated_to());
            buckets.push([key, v.count_at_value()]);
        }
        LatencyHistogram {
            count: hdr.len(),
            sum_ns,
            min_ns,
            max_ns,
            buckets,
        }
    }

    /// Builds a histogram from raw values; for tests and for tools that have the values.
    pub fn from_values(values: impl IntoIterator<Item = u64>) -> LatencyHistogram {
        let mut hdr = new_hdr();
        let (mut sum, mut min, mut max) = (0u128, u64::MAX, 0u64);
        for v in values {
            let v = v.clamp(1, MAX_TRACKABLE_NS);
            hdr.saturating_record(v);
            sum += u128::from(v);
            min = min.min(v);
            max = max.max(v);
        }
        if hdr.is_empty() {
            return LatencyHistogram::default();
        }
        LatencyHistogram::from_hdr(&hdr, sum, min, max)
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Adds `other` into `self`: afterwards `self` is the histogram of the union.
    pub fn merge(&mut self, other: &LatencyHistogram) {
        if other.count == 0 {
            return;
        }
        if self.count == 0 {
            *self = other.clone();
            return;
        }
        let mut merged = Vec::with_capacity(self.buckets.len().max(other.buckets.len()));
        let (mut a, mut b) = (
            self.buckets.iter().peekable(),
            other.buckets.iter().peekable(),
        );
        loop {
            match (a.peek(), b.peek()) {
                (Some(x), Some(y)) if x[0] == y[0] => {
                    merged.push([x[0], x[1].saturating_add(y[1])]);
                    a.next();
                    b.next();
                }
                (Some(x), Some(y)) if x[0] < y[0] => {
                    merged.push(**x);
                    a.next();
                }
                (Some(_), Some(y)) => {
                    merged.push(**y);
                    b.next();
                }
                (Some(x), None) => {
                    merged.push(**x);
                    a.next();
                }
                (None, Some(y)) => {
                    merged.push(**y);
                    b.next();
                }
                (None, None) => break,
            }
        }
        self.buckets = merged;
        // Saturating, as the counts above: histograms merged from result.json files read back
        // (aggregate) may be damaged; wrong figures then, never a panic.
        self.count = self.count.saturating_add(other.count);
        self.sum_ns = self.sum_ns.saturating_add(other.sum_ns);
        self.min_ns = self.min_ns.min(other.min_ns);
        self.max_ns = self.max_ns.max(other.max_ns);
    }

    /// The histogram of what was recorded after `earlier`, a snapshot of the same recorder.
    /// Min and max are taken from the bucket bounds (≤ 1% off), see [`LatencyHistogram::max_ns`].
    pub fn delta_since(&self, earlier: &LatencyHistogram) -> LatencyHistogram {
        let mut buckets = Vec::new();
        let mut old = earlier.buckets.iter().peekable();
        for &[key, count] in &self.buckets {
            while old.peek().is_some_and(|o| o[0] < key) {
                old.next();
            }
            let before = match old.peek() {
                Some(o) if o[0] == key => o[1],
                _ => 0,
            };
            let diff = count.saturating_sub(before);
            if diff > 0 {
                buckets.push([key, diff]);
            }
        }
        let count = buckets.iter().map(|b| b[1]).sum();
        let layout = new_hdr();
        let min_ns = buckets.first().map_or(0, |b| b[0].max(self.min_ns));
        let max_ns = buckets
            .last()
            .map_or(0, |b| layout.highest_equivalent(b[0]).min(self.max_ns));
        LatencyHistogram {
            count,
            sum_ns: self.sum_ns.saturating_sub(earlier.sum_ns),
            min_ns,
            max_ns,
            buckets,
        }
    }

    /// Exact mean in nanoseconds (0 when empty).
    pub fn mean_ns(&self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            self.sum_ns as f64 / self.count as f64
        }
    }

    /// The value at quantile `q` (0..=1), nearest-rank: the smallest recorded value such that at
    /// least `q` of all values are at or below it, reported as the top of its bucket (so never
    /// under the true value, and over it by less than 1%), clamped to the exact min and max.
    pub fn value_at_quantile_ns(&self, q: f64) -> u64 {
        if self.count == 0 {
            return 0;
        }
        let q = q.clamp(0.0, 1.0);
        let rank = ((q * self.count as f64).ceil() as u64).clamp(1, self.count);
        let layout = new_hdr();
        let mut seen = 0;
        for &[key, count] in &self.buckets {
            // Saturating: a histogram read back from a damaged result.json may hold counts
            // whose sum overflows; its figures are then wrong, never a panic (issue 34's fuzzer).
            seen = u64::saturating_add(seen, count);
            if seen >= rank {
                return layout
                    .highest_equivalent(key)
                    .clamp(self.min_ns, self.max_ns.max(self.min_ns));
            }
        }
        self.max_ns
    }

    /// The figures reports show, over an interval of `interval_s` seconds (for ops/s).
    pub fn summary(&self, bytes: u64, interval_s: f64) -> ClassSummary {
        let ms = |ns: u64| ns as f64 / 1e6;
        let layout = new_hdr();
        let quantiles = [0.50, 0.95, 0.99, 0.999];
        // One pass over the buckets for all quantiles.
        let mut values = [0u64; 4];
        if self.count > 0 {
            let mut seen = 0;
            let mut next = 0;
            for &[key, count] in &self.buckets {
                seen = u64::saturating_add(seen, count);
                while next < quantiles.len() {
                    let rank =
                        ((quantiles[next] * self.count as f64).ceil() as u64).clamp(1, self.count);
                    if seen < rank {
                        break;
                    }
                    values[next] = layout
                        .highest_equivalent(key)
                        .clamp(self.min_ns, self.max_ns.max(self.min_ns));
                    next += 1;
                }
            }
        }
        ClassSummary {
            count: self.count,
            bytes,
            ops_per_sec: if interval_s > 0.0 {
                self.count as f64 / interval_s
            } else {
                0.0
            },
            avg_bytes: if self.count > 0 {
                bytes as f64 / self.count as f64
            } else {
                0.0
            },
            avg_latency_ms: self.mean_ns() / 1e6,
            p50_ms: ms(values[0]),
            p95_ms: ms(values[1]),
            p99_ms: ms(values[2]),
            p999_ms: ms(values[3]),
            max_ms: ms(self.max_ns),
            ..ClassSummary::default()
        }
    }

    /// Checks the invariants of the module header; for data read back from `result.json`.
    pub fn is_consistent(&self) -> bool {
        let sorted = self.buckets.windows(2).all(|w| w[0][0] < w[1][0]);
        let non_zero = self.buckets.iter().all(|b| b[1] > 0);
        let total = self
            .buckets
            .iter()
            .try_fold(0u64, |sum, b| sum.checked_add(b[1]));
        sorted && non_zero && total == Some(self.count)
    }
}

/// The figures of one I/O class, under the names of `docs/results.md`: the one per-class struct
/// of the whole product (an instance's classes in `result.json`, the aggregate's totals, the
/// probe's reads and writes). The fields after `max_ms` are filled by the results crate (the
/// interval maximum, the corrected latencies, the histogram for exact merging); the probe
/// writes only the latency figures ([`ClassSummary::serialize_latency_figures`]).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ClassSummary {
    pub count: u64,
    #[serde(default)]
    pub bytes: u64,
    pub ops_per_sec: f64,
    pub avg_bytes: f64,
    pub avg_latency_ms: f64,
    pub p50_ms: f64,
    pub p95_ms: f64,
    pub p99_ms: f64,
    pub p999_ms: f64,
    pub max_ms: f64,
    /// The largest per-sample-interval average: what Jetstress judges the maximum on.
    pub max_interval_avg_ms: Option<f64>,
    /// For paced workloads: average and p99 latency measured from each I/O's intended start
    /// (coordinated omission corrected), so a stalled device is not hidden.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub intended_avg_latency_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub intended_p99_ms: Option<f64>,
    /// The full latency record in exact-merge form, so results of instances and hosts can be
    /// combined into true percentiles (never averages of percentiles).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub histogram: Option<ClassSnapshot>,
}

impl ClassSummary {
    /// The figures of one class from a snapshot (or an interval's delta) covering `seconds`,
    /// with the histogram kept for exact merging. None if no I/O of the class occurred.
    pub fn from_snapshot(snapshot: &ClassSnapshot, seconds: f64) -> Option<ClassSummary> {
        if snapshot.count == 0 {
            return None;
        }
        let mut summary = snapshot.summary(seconds.max(1e-9));
        let intended = snapshot
            .intended_latency
            .as_ref()
            .filter(|h| !h.is_empty())
            .map(|h| h.summary(snapshot.bytes, seconds.max(1e-9)));
        summary.bytes = snapshot.bytes;
        summary.intended_avg_latency_ms = intended.as_ref().map(|i| i.avg_latency_ms);
        summary.intended_p99_ms = intended.as_ref().map(|i| i.p99_ms);
        summary.histogram = Some(snapshot.clone());
        Some(summary)
    }

    /// Serialises only the latency figures (`count`, `ops_per_sec`, `avg_bytes`,
    /// `avg_latency_ms`, `p50_ms` … `max_ms`), as `jetproof probe --json` has always written
    /// its reads and writes (`serialize_with`; reading back fills the rest with defaults).
    pub fn serialize_latency_figures<S: serde::Serializer>(
        summary: &ClassSummary,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut out = serializer.serialize_struct("ClassSummary", 9)?;
        out.serialize_field("count", &summary.count)?;
        out.serialize_field("ops_per_sec", &summary.ops_per_sec)?;
        out.serialize_field("avg_bytes", &summary.avg_bytes)?;
        out.serialize_field("avg_latency_ms", &summary.avg_latency_ms)?;
        out.serialize_field("p50_ms", &summary.p50_ms)?;
        out.serialize_field("p95_ms", &summary.p95_ms)?;
        out.serialize_field("p99_ms", &summary.p99_ms)?;
        out.serialize_field("p999_ms", &summary.p999_ms)?;
        out.serialize_field("max_ms", &summary.max_ms)?;
        out.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Found by the fuzzer (seed 1796228569607073045, input 1132): bucket counts read back from a
    /// damaged result.json that overflow u64 made the quantiles and the consistency check panic.
    #[test]
    fn counts_that_overflow_are_inconsistent_and_never_panic() {
        let h = LatencyHistogram {
            count: 2,
            sum_ns: 10,
            min_ns: 1,
            max_ns: 1_000,
            buckets: vec![[1, u64::MAX], [1_000, u64::MAX]],
        };
        assert!(!h.is_consistent());
        assert!(h.value_at_quantile_ns(0.99) >= h.min_ns);
        let _ = h.summary(0, 1.0);
        let mut merged = h.clone();
        merged.merge(&h);
        assert_eq!(merged.buckets[0][1], u64::MAX);
    }
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    fn seed() -> u64 {
        jetproof_test_support::seed_or_clock(7)
    }

    /// Latencies spread over µs to seconds, log-uniform, as storage latencies are.
    fn random_latencies(rng: &mut StdRng, n: usize) -> Vec<u64> {
        (0..n)
            .map(|_| {
                let exp: f64 = rng.random_range(3.0..9.5);
                10f64.powf(exp) as u64
            })
            .collect()
    }

    fn exact_quantile(sorted: &[u64], q: f64) -> u64 {
        let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
        sorted[rank - 1]
    }

    #[test]
    fn percentiles_within_one_percent_of_exact() {
        let seed = seed();
        let mut rng = StdRng::seed_from_u64(seed);
        for round in 0..20 {
            let n = rng.random_range(1..20_000);
            let mut values = random_latencies(&mut rng, n);
            let h = LatencyHistogram::from_values(values.iter().copied());
            values.sort_unstable();
            assert!(h.is_consistent(), "seed {seed} round {round}");
            assert_eq!(h.count, n as u64, "seed {seed}");
            assert_eq!(h.max_ns, *values.last().expect("non-empty"), "seed {seed}");
            assert_eq!(h.min_ns, values[0], "seed {seed}");
            let exact_mean = values.iter().map(|&v| v as f64).sum::<f64>() / n as f64;
            assert!(
                (h.mean_ns() - exact_mean).abs() <= exact_mean * 1e-9,
                "seed {seed}"
            );
            for q in [0.0, 0.25, 0.5, 0.9, 0.95, 0.99, 0.999, 1.0] {
                let exact = exact_quantile(&values, q) as f64;
                let got = h.value_at_quantile_ns(q) as f64;
                assert!(
                    got >= exact && got <= exact * 1.01,
                    "seed {seed} round {round} q {q}: histogram {got} vs exact {exact}"
                );
            }
            let s = h.summary(0, 1.0);
            assert_eq!(
                s.p99_ms,
                h.value_at_quantile_ns(0.99) as f64 / 1e6,
                "seed {seed}"
            );
            assert_eq!(
                s.p50_ms,
                h.value_at_quantile_ns(0.5) as f64 / 1e6,
                "seed {seed}"
            );
        }
    }

    #[test]
    fn merge_equals_histogram_of_union() {
        let seed = seed();
        let mut rng = StdRng::seed_from_u64(seed);
        for _ in 0..20 {
            let parts: Vec<Vec<u64>> = (0..rng.random_range(1..6))
                .map(|_| {
                    let n = rng.random_range(0..3000);
                    random_latencies(&mut rng, n)
                })
                .collect();
            let mut merged = LatencyHistogram::new();
            for p in &parts {
                merged.merge(&LatencyHistogram::from_values(p.iter().copied()));
            }
            let union = LatencyHistogram::from_values(parts.iter().flatten().copied());
            assert_eq!(merged, union, "seed {seed}");
            // And it survives JSON unchanged (result.json carries it).
            let json = serde_json::to_string(&merged).expect("serialise");
            let back: LatencyHistogram = serde_json::from_str(&json).expect("parse");
            assert_eq!(back, union, "seed {seed}");
        }
    }

    #[test]
    fn delta_is_the_later_values() {
        let seed = seed();
        let mut rng = StdRng::seed_from_u64(seed);
        let first = random_latencies(&mut rng, 2000);
        let second = random_latencies(&mut rng, 3000);
        let before = LatencyHistogram::from_values(first.iter().copied());
        let after = LatencyHistogram::from_values(first.iter().chain(&second).copied());
        let delta = after.delta_since(&before);
        let only_second = LatencyHistogram::from_values(second.iter().copied());
        assert_eq!(delta.buckets, only_second.buckets, "seed {seed}");
        assert_eq!(delta.count, 3000);
        assert_eq!(delta.sum_ns, only_second.sum_ns, "seed {seed}");
        let max = *second.iter().max().expect("non-empty") as f64;
        assert!(
            (delta.max_ns as f64) >= max * 0.99 && (delta.max_ns as f64) <= max * 1.01,
            "seed {seed}"
        );
    }

    #[test]
    fn empty_summary_is_zero() {
        let s = LatencyHistogram::new().summary(0, 10.0);
        assert_eq!(s, ClassSummary::default());
    }
}

/// Serde for a `u128` as a decimal string (see [`LatencyHistogram::sum_ns`]).
mod u128_as_string {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(value: &u128, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&value.to_string())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<u128, D::Error> {
        let text = String::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}
