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
    /// Database page fault stalls of the window so far, all instances together.
    pub page_fault_stalls: u64,
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

/// Receives each sample of the measured window, and the status of every other phase.
pub trait LiveView: Sync {
    fn sample(&self, sample: &LiveSample);
    /// A phase outside the measured window's samples (warm-up, an auto-tune step, a checksum
    /// pass, a backup, log generation and replay, init): called often (every poll, every few
    /// MB); a plain view keeps one line per sample interval, and every `milestone`.
    fn status(&self, _status: &PhaseStatus) {}
    /// The measured window begins: each instance's live counters (a scraper of `--metrics-listen`
    /// reads them when it asks, not once per sample) and the thresholds it is judged against.
    fn window_started(&self, _window: &LiveWindow) {}
    /// The measured window is over: what the instances do after it is not the test's.
    fn window_ended(&self) {}
}

/// What a live view is told when the measured window begins ([`LiveView::window_started`]).
pub struct LiveWindow {
    /// The instances' live counters, in the job's order.
    pub instances: Vec<std::sync::Arc<jetproof_io::meter::InstanceStats>>,
    /// The thresholds of the verdict.
    pub limits: jetproof_results::verdict::Limits,
    /// The transactional IOPS target of all instances together, when the test is paced.
    pub target_iops: Option<f64>,
    /// The window's length.
    pub duration_s: f64,
}

/// Where a phase outside the measured window stands (`docs/report.md`, "Live view").
#[derive(Clone, Debug, PartialEq)]
pub struct PhaseStatus {
    /// "warm-up", "auto-tune step 3", "checksum", "backup", "log generation", "replay", ...
    pub phase: String,
    /// Seconds since the phase began.
    pub elapsed_s: f64,
    /// Seconds left by the phase's own rate, when it can be told.
    pub eta_s: Option<f64>,
    /// The phase's figures in words ("42.0% (1.1 of 2.6 GiB), 325.3 MB/s").
    pub detail: String,
    /// A step's result (an auto-tune trial's figures, a phase's end): a plain view prints it
    /// even when a line was printed within the sample interval.
    pub milestone: bool,
}

impl PhaseStatus {
    /// One plain line: phase, elapsed, ETA, figures.
    pub fn line(&self) -> String {
        let eta = self
            .eta_s
            .map(|e| format!(", ETA {e:.0} s"))
            .unwrap_or_default();
        format!(
            "{} {:.1} s{eta}: {}",
            self.phase, self.elapsed_s, self.detail
        )
    }
}

/// A fraction done in words with the ETA from the rate so far: "42.0% (1.10 of 2.60 GiB),
/// 325.3 MB/s" and the seconds left, or None before anything is done. The amounts are in the
/// job's binary units (MiB below a GiB), the rate in MB/s of 10^6 bytes as `result.json` and
/// the reports give it (`mb_per_sec`), so that screen and paper agree.
pub fn bytes_detail(done: u64, total: u64, elapsed_s: f64) -> (String, Option<f64>) {
    const GIB: f64 = 1024.0 * 1024.0 * 1024.0;
    const MIB: f64 = 1024.0 * 1024.0;
    let percent = if total == 0 {
        0.0
    } else {
        done as f64 * 100.0 / total as f64
    };
    let rate = if elapsed_s > 0.0 {
        done as f64 / elapsed_s
    } else {
        0.0
    };
    let eta = (rate > 0.0).then(|| total.saturating_sub(done) as f64 / rate);
    let (unit, name) = if total as f64 >= GIB {
        (GIB, "GiB")
    } else {
        (MIB, "MiB")
    };
    (
        format!(
            "{percent:.1}% ({:.2} of {:.2} {name}), {:.1} MB/s",
            done as f64 / unit,
            total as f64 / unit,
            rate / 1e6
        ),
        eta,
    )
}

/// Byte progress (init's phases, a checksum pass) told to a live view as [`PhaseStatus`].
pub struct BytesStatus<'a> {
    view: &'a dyn LiveView,
    state: std::sync::Mutex<BytesState>,
}

struct BytesState {
    phase: String,
    started: std::time::Instant,
    total: u64,
    done: u64,
    /// When the view was last told: progress is told at most every [`BYTES_TELL_EVERY`] (init
    /// advances every 64 records, a checksum every read), milestones always.
    told: Option<std::time::Instant>,
}

/// How often byte progress is told to the view at most (a terminal redraws at this pace; a pipe
/// keeps one line per sample interval of what it is told).
const BYTES_TELL_EVERY: std::time::Duration = std::time::Duration::from_millis(50);

impl<'a> BytesStatus<'a> {
    pub fn new(view: &'a dyn LiveView, phase: &str) -> BytesStatus<'a> {
        BytesStatus {
            view,
            state: std::sync::Mutex::new(BytesState {
                phase: phase.to_string(),
                started: std::time::Instant::now(),
                total: 0,
                done: 0,
                told: None,
            }),
        }
    }

    fn tell(&self, change: impl FnOnce(&mut BytesState), milestone: bool) {
        let status = {
            let Ok(mut state) = self.state.lock() else {
                return;
            };
            change(&mut state);
            let now = std::time::Instant::now();
            if !milestone
                && state
                    .told
                    .is_some_and(|at| now.duration_since(at) < BYTES_TELL_EVERY)
            {
                return;
            }
            state.told = Some(now);
            let elapsed_s = state.started.elapsed().as_secs_f64();
            let (detail, eta_s) = bytes_detail(state.done, state.total, elapsed_s);
            PhaseStatus {
                phase: state.phase.clone(),
                elapsed_s,
                eta_s,
                detail,
                milestone,
            }
        };
        self.view.status(&status);
    }
}

impl crate::init::Progress for BytesStatus<'_> {
    fn phase(&self, name: &str, total_bytes: u64) {
        // The phase that ends is told as it ended (a short one may not have been told since
        // it began).
        let had_phase = self.state.lock().is_ok_and(|s| s.total > 0);
        if had_phase {
            self.tell(|_| {}, true);
        }
        self.tell(
            |s| {
                s.phase = format!("init: {name}");
                s.started = std::time::Instant::now();
                s.total = total_bytes;
                s.done = 0;
            },
            true,
        );
    }

    fn advance(&self, done_bytes: u64) {
        self.tell(|s| s.done = done_bytes, false);
    }

    fn finish(&self) {
        self.tell(|s| s.done = s.done.max(s.total), true);
    }
}

impl crate::checksum::Progress for BytesStatus<'_> {
    fn start(&self, total_bytes: u64) {
        self.tell(
            |s| {
                s.started = std::time::Instant::now();
                s.total = total_bytes;
                s.done = 0;
            },
            true,
        );
    }

    fn advance(&self, bytes: u64) {
        self.tell(|s| s.done = s.done.saturating_add(bytes), false);
    }

    fn finish(&self) {
        self.tell(|_| {}, true);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Default)]
    struct Seen(std::sync::Mutex<Vec<PhaseStatus>>);

    impl LiveView for Seen {
        fn sample(&self, _: &LiveSample) {}
        fn status(&self, status: &PhaseStatus) {
            self.0.lock().expect("lock").push(status.clone());
        }
    }

    #[test]
    fn byte_progress_tells_percent_and_an_eta_once_something_is_done() {
        let seen = Seen::default();
        let status = BytesStatus::new(&seen, "checksum");
        crate::checksum::Progress::start(&status, 4 << 30);
        std::thread::sleep(BYTES_TELL_EVERY + std::time::Duration::from_millis(10));
        crate::checksum::Progress::advance(&status, 1 << 30);
        // Progress within BYTES_TELL_EVERY of the last is counted, not told.
        crate::checksum::Progress::advance(&status, 1 << 29);
        crate::checksum::Progress::finish(&status);
        let seen = seen.0.lock().expect("lock");
        // The finish tells all that was counted.
        assert!(
            seen[2].detail.starts_with("37.5% (1.50 of 4.00 GiB)"),
            "{:?}",
            seen[2]
        );
        assert_eq!(seen.len(), 3, "{seen:?}");
        assert!(
            seen[0].milestone && seen[0].eta_s.is_none(),
            "{:?}",
            seen[0]
        );
        assert!(
            seen[1].detail.starts_with("25.0% (1.00 of 4.00 GiB)"),
            "{:?}",
            seen[1]
        );
        // A quarter done: the ETA is three times the time it took.
        let eta = seen[1].eta_s.expect("eta");
        assert!(
            (eta / seen[1].elapsed_s - 3.0).abs() < 0.01,
            "{:?}",
            seen[1]
        );
        assert!(
            seen[1].line().starts_with("checksum "),
            "{}",
            seen[1].line()
        );
        assert!(seen[1].line().contains(", ETA "), "{}", seen[1].line());
        assert!(
            bytes_detail(3 << 19, 1 << 21, 1.0)
                .0
                .starts_with("75.0% (1.50 of 2.00 MiB), 1.6 MB/s")
        );
    }
}
