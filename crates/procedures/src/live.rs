//! What a workload test tells a live view once per sample interval of the measured window
//! (`docs/report.md`, "Live view"): the phase, elapsed time and length, the interval's
//! transactional IOPS against the target, the worst instance's read and log-write latency
//! (average and p99) against the thresholds, the page fault stalls, and whether the verdict is
//! still pass on what has been measured so far.

/// One sample interval, as a live view shows it.
#[derive(Clone, Debug, PartialEq)]
pub struct LiveSample {
    pub phase: &'static str,
    pub elapsed_s: f64,
    pub duration_s: f64,
    pub transactional_iops: f64,
    pub target_iops: Option<f64>,
    /// The worst instance's figures over the interval.
    pub read_avg_ms: f64,
    pub read_p99_ms: f64,
    pub log_avg_ms: f64,
    pub log_p99_ms: f64,
    pub read_limit_ms: f64,
    pub log_limit_ms: f64,
    pub stalls_per_sec: f64,
    /// The verdict's latency rules on what was measured so far: every instance's average up to
    /// now within the average thresholds, no interval average above the maxima. (The target is
    /// judged on the whole window, at the end.)
    pub passing: bool,
}

impl LiveSample {
    /// One plain line (what a pipe or a file gets).
    pub fn line(&self) -> String {
        let eta = (self.duration_s - self.elapsed_s).max(0.0);
        let target = self
            .target_iops
            .map(|t| format!(" (target {t:.0})"))
            .unwrap_or_default();
        format!(
            "{} {:.1}/{:.1} s, ETA {:.0} s: {:.0} transactional IOPS{target}; DB reads avg {:.3} ms p99 {:.3} ms (limit {}); log writes avg {:.3} ms p99 {:.3} ms (limit {}); stalls {:.1}/s; verdict so far: {}",
            self.phase,
            self.elapsed_s,
            self.duration_s,
            eta,
            self.transactional_iops,
            self.read_avg_ms,
            self.read_p99_ms,
            self.read_limit_ms,
            self.log_avg_ms,
            self.log_p99_ms,
            self.log_limit_ms,
            self.stalls_per_sec,
            if self.passing { "pass" } else { "FAIL" }
        )
    }
}

impl LiveSample {
    /// The same in about 80 columns, the verdict first (a terminal's redrawn status): IOPS
    /// (/target), then average/p99 in ms of database reads and log writes.
    pub fn short(&self) -> String {
        let target = self
            .target_iops
            .map(|t| format!("/{t:.0}"))
            .unwrap_or_default();
        format!(
            "{} | {} {:.1}/{:.1} s | {:.0}{target} IOPS | read {:.2}/{:.2} ms | log {:.2}/{:.2} ms | stalls {:.1}/s",
            if self.passing { "pass" } else { "FAIL" },
            self.phase,
            self.elapsed_s,
            self.duration_s,
            self.transactional_iops,
            self.read_avg_ms,
            self.read_p99_ms,
            self.log_avg_ms,
            self.log_p99_ms,
            self.stalls_per_sec
        )
    }
}

/// Receives each sample of the measured window.
pub trait LiveView: Sync {
    fn sample(&self, sample: &LiveSample);
}
