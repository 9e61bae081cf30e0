//! Marks and excursions (issue 37): what happened during a failure-mode test and how long the
//! latencies stayed out of bounds.
//!
//! A **mark** is an event the operator recorded while the test ran (`jetproof mark RESULTS_DIR
//! "controller A pulled"`): its wall-clock time and label. An **excursion** is a run of
//! consecutive sample intervals in which one instance's interval average of one judged class
//! (`db_read` against `thresholds.db_read_avg_ms`, `log_write` against
//! `thresholds.log_write_avg_ms`) was above the threshold. [`find`] turns the per-interval
//! averages into excursions; each names the mark that preceded its start and the time from that
//! mark to the return within bounds (the end of the excursion's last interval).

use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

/// The control file of a running workload test in its results directory: created empty when
/// the measured window starts, one JSON object per line appended by `jetproof mark`
/// (`{"at": RFC 3339, "unix_ms": N, "label": "..."}`), read by the test at every sample
/// interval. It stays in the directory after the test (the marks are also in `result.json`).
pub const MARKS_FILE: &str = "marks.jsonl";

/// One line of [`MARKS_FILE`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MarkLine {
    pub at: String,
    pub unix_ms: u64,
    pub label: String,
}

/// Why a mark could not be recorded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MarkError {
    #[error(
        "RESULTS_DIR {0}: no workload test is measuring there (no {MARKS_FILE}); give the --out directory of a running performance or stress test, after its warm-up"
    )]
    NotRunning(std::path::PathBuf),
    #[error(
        "RESULTS_DIR {0}: the test there has finished (result.json is written); marks are recorded while a test runs"
    )]
    Finished(std::path::PathBuf),
    #[error(
        "LABEL: is empty or holds a control character (a newline, a tab); give one line of text"
    )]
    Label,
    #[error("RESULTS_DIR {path}: cannot append to {MARKS_FILE}: {source}")]
    Io {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// Appends a mark of `label` at the current wall-clock time to `dir`'s [`MARKS_FILE`]
/// (`jetproof mark`). Refuses a directory without a running test's control file: the file is
/// opened for appending only, never created, so nothing jetproof did not make is written.
pub fn append_mark(dir: &Path, label: &str) -> Result<MarkLine, MarkError> {
    if label.trim().is_empty() || label.chars().any(char::is_control) {
        return Err(MarkError::Label);
    }
    let path = dir.join(MARKS_FILE);
    if dir.join("result.json").exists() {
        return Err(MarkError::Finished(dir.to_path_buf()));
    }
    let meta = std::fs::symlink_metadata(&path);
    if !meta.as_ref().is_ok_and(|m| m.file_type().is_file()) {
        return Err(MarkError::NotRunning(dir.to_path_buf()));
    }
    let now = SystemTime::now();
    let line = MarkLine {
        at: crate::clock::rfc3339_millis(now),
        unix_ms: now
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0),
        label: label.to_owned(),
    };
    let mut text = serde_json::to_string(&line).unwrap_or_default();
    text.push('\n');
    let io = |source| MarkError::Io {
        path: dir.to_path_buf(),
        source,
    };
    // Never through a symbolic link swapped in after the look above (O_NOFOLLOW).
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&path)
        .map_err(io)?;
    // One write of the whole line: appends of lines this short do not interleave.
    file.write_all(text.as_bytes()).map_err(io)?;
    Ok(line)
}

/// The marks in a [`MARKS_FILE`] text, timed against the window's start; lines that do not
/// parse (a half-written last line) are skipped.
pub fn parse_marks(text: &str, window_start: SystemTime) -> Vec<Mark> {
    let start_ms = window_start
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64() * 1000.0)
        .unwrap_or(0.0);
    text.lines()
        .filter(|l| l.ends_with('}'))
        .filter_map(|l| serde_json::from_str::<MarkLine>(l).ok())
        .map(|m| Mark {
            elapsed_s: (m.unix_ms as f64 - start_ms) / 1000.0,
            at: m.at,
            label: m.label,
        })
        .collect()
}

/// An event recorded while the test ran.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Mark {
    /// Wall-clock time the `jetproof mark` command recorded it (RFC 3339, UTC).
    pub at: String,
    /// Seconds from the start of the measured window to `at` (negative before it).
    pub elapsed_s: f64,
    pub label: String,
}

/// One judged figure of one sample interval: an instance's interval average of a class.
#[derive(Clone, Debug, PartialEq)]
pub struct IntervalFigure {
    /// End of the interval, seconds from the window's start.
    pub end_s: f64,
    /// Length of the interval in seconds.
    pub interval_s: f64,
    pub instance: String,
    /// The class key (`db_read`, `log_write`).
    pub class: String,
    pub value_ms: f64,
    pub threshold_ms: f64,
}

/// A run of consecutive intervals above a threshold.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Excursion {
    pub instance: String,
    /// The class key (`db_read`, `log_write`).
    pub class: String,
    /// The threshold broken (the class's interval-average limit), ms.
    pub threshold_ms: f64,
    /// Start of the first interval above, seconds from the window's start.
    pub start_s: f64,
    /// End of the last interval above (the return within bounds, unless `recovered` is false:
    /// then the end of the window).
    pub end_s: f64,
    pub duration_s: f64,
    /// How many sample intervals it spans.
    pub intervals: u32,
    /// The highest interval average of the excursion, ms.
    pub peak_ms: f64,
    /// False when the window ended with the class still above the threshold.
    pub recovered: bool,
    /// The label of the last mark before the end of the excursion's first interval (none: no
    /// mark preceded it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mark: Option<String>,
    /// Seconds from that mark to the return within bounds (`end_s - mark.elapsed_s`), when the
    /// excursion recovered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mark_to_recovery_s: Option<f64>,
}

impl Excursion {
    /// One line for reasons and logs: "db1 db_read above 20 ms from 3.0 s to 6.0 s (3.0 s, peak
    /// 55.1 ms, after mark \"controller A pulled\")".
    pub fn describe(&self) -> String {
        let mut text = format!(
            "{} {} above {} ms from {:.1} s to {:.1} s of the window ({:.1} s over {} interval{}, peak {:.2} ms",
            self.instance,
            self.class,
            self.threshold_ms,
            self.start_s,
            self.end_s,
            self.duration_s,
            self.intervals,
            if self.intervals == 1 { "" } else { "s" },
            self.peak_ms
        );
        if !self.recovered {
            text.push_str(", still above when the window ended");
        }
        if let Some(mark) = &self.mark {
            text.push_str(&format!(", after mark {mark:?}"));
            if let Some(s) = self.mark_to_recovery_s {
                text.push_str(&format!(", back within bounds {s:.1} s after it"));
            }
        }
        text.push(')');
        text
    }
}

/// The excursions in `figures` (in interval order per instance and class; the window ended at
/// `window_end_s`), with the mark before each. Figures of one (instance, class) must come in
/// time order. An interval without a figure for a class (no I/O of it completed) neither starts
/// nor ends an excursion: a stalled path completes nothing, and that is no return within
/// bounds; the excursion ends where the first later interval whose average is within bounds
/// begins (its `intervals` counts the intervals above).
pub fn find(figures: &[IntervalFigure], marks: &[Mark], window_end_s: f64) -> Vec<Excursion> {
    let mut keys: Vec<(&str, &str)> = figures
        .iter()
        .map(|f| (f.instance.as_str(), f.class.as_str()))
        .collect();
    keys.sort();
    keys.dedup();
    // Each excursion with the end of its first interval: a mark inside that interval (the
    // event that started it, recorded a moment after the interval began) precedes it too.
    let mut found: Vec<(Excursion, f64)> = Vec::new();
    for (instance, class) in keys {
        let series: Vec<&IntervalFigure> = figures
            .iter()
            .filter(|f| f.instance == instance && f.class == class)
            .collect();
        let mut open: Option<(Excursion, f64)> = None;
        for figure in series {
            let start = figure.end_s - figure.interval_s;
            if figure.value_ms > figure.threshold_ms {
                let (e, _) = open.get_or_insert_with(|| {
                    (
                        Excursion {
                            instance: instance.to_owned(),
                            class: class.to_owned(),
                            threshold_ms: figure.threshold_ms,
                            start_s: start.max(0.0),
                            end_s: figure.end_s,
                            duration_s: 0.0,
                            intervals: 0,
                            peak_ms: 0.0,
                            recovered: true,
                            mark: None,
                            mark_to_recovery_s: None,
                        },
                        figure.end_s,
                    )
                });
                e.end_s = figure.end_s;
                e.intervals += 1;
                e.peak_ms = e.peak_ms.max(figure.value_ms);
            } else if let Some((mut e, first_end)) = open.take() {
                // Intervals that completed nothing of the class between the last one above and
                // this one were no return within bounds: the excursion lasts until this began.
                e.end_s = e.end_s.max(start);
                found.push((e, first_end));
            }
        }
        if let Some((mut e, first_end)) = open {
            // Still above in the window's last interval: it never came back within bounds.
            e.recovered = false;
            e.end_s = e.end_s.max(window_end_s);
            found.push((e, first_end));
        }
    }
    let mut found: Vec<Excursion> = found
        .into_iter()
        .map(|(mut e, first_end)| {
            e.duration_s = e.end_s - e.start_s;
            let before = marks
                .iter()
                .filter(|m| m.elapsed_s <= first_end + 1e-9)
                .max_by(|a, b| a.elapsed_s.total_cmp(&b.elapsed_s));
            if let Some(mark) = before {
                e.mark = Some(mark.label.clone());
                e.mark_to_recovery_s = e.recovered.then_some(e.end_s - mark.elapsed_s);
            }
            e
        })
        .collect();
    found.sort_by(|a, b| {
        a.start_s
            .total_cmp(&b.start_s)
            .then_with(|| a.instance.cmp(&b.instance))
            .then_with(|| a.class.cmp(&b.class))
    });
    found
}

/// The failure-mode verdict's reasons: every excursion longer than `max_s` (or not recovered),
/// and more excursions than `max_count`.
pub fn reasons(excursions: &[Excursion], max_s: f64, max_count: Option<u32>) -> Vec<String> {
    let mut reasons = Vec::new();
    for e in excursions {
        if !e.recovered {
            reasons.push(format!(
                "excursion did not return within bounds before the window ended (thresholds.max_excursion = {max_s} s): {}",
                e.describe()
            ));
        } else if e.duration_s > max_s + 1e-9 {
            reasons.push(format!(
                "excursion lasted longer than thresholds.max_excursion = {max_s} s: {}",
                e.describe()
            ));
        }
    }
    if let Some(count) = max_count
        && excursions.len() > count as usize
    {
        reasons.push(format!(
            "{} excursions, more than thresholds.max_excursions = {count}",
            excursions.len()
        ));
    }
    reasons
}

#[cfg(test)]
mod tests {
    use super::*;

    fn series(values: &[f64], threshold: f64) -> Vec<IntervalFigure> {
        values
            .iter()
            .enumerate()
            .map(|(i, v)| IntervalFigure {
                end_s: (i + 1) as f64,
                interval_s: 1.0,
                instance: "db1".into(),
                class: "db_read".into(),
                value_ms: *v,
                threshold_ms: threshold,
            })
            .collect()
    }

    fn mark(elapsed_s: f64, label: &str) -> Mark {
        Mark {
            at: String::new(),
            elapsed_s,
            label: label.into(),
        }
    }

    #[test]
    fn runs_of_intervals_above_become_excursions_with_the_mark_before() {
        let figures = series(&[1.0, 30.0, 50.0, 2.0, 2.0, 25.0, 40.0], 20.0);
        // "pull" inside the first interval above (1-2 s) precedes it.
        let marks = [mark(1.5, "pull"), mark(4.2, "rebuild")];
        let found = find(&figures, &marks, 7.0);
        assert_eq!(found.len(), 2, "{found:?}");
        let first = &found[0];
        assert_eq!((first.start_s, first.end_s, first.intervals), (1.0, 3.0, 2));
        assert_eq!(first.duration_s, 2.0);
        assert_eq!(first.peak_ms, 50.0);
        assert!(first.recovered);
        assert_eq!(first.mark.as_deref(), Some("pull"));
        assert_eq!(first.mark_to_recovery_s, Some(1.5));
        let second = &found[1];
        assert_eq!((second.start_s, second.end_s), (5.0, 7.0));
        assert!(!second.recovered, "above in the last interval");
        assert_eq!(second.mark.as_deref(), Some("rebuild"));
        assert_eq!(second.mark_to_recovery_s, None);
        let r = reasons(&found, 10.0, None);
        assert_eq!(r.len(), 1, "{r:?}");
        assert!(
            r[0].contains("did not return") && r[0].contains("rebuild"),
            "{r:?}"
        );
        assert!(reasons(&found[..1], 2.0, None).is_empty(), "2 s within 2 s");
        let long = reasons(&found[..1], 1.5, None);
        assert!(long[0].contains("longer than") && long[0].contains("db1 db_read"));
        assert_eq!(reasons(&found[..1], 10.0, Some(0)).len(), 1);
    }

    #[test]
    fn no_excursion_without_an_interval_above_and_no_mark_after_the_start() {
        assert!(find(&series(&[1.0, 20.0, 3.0], 20.0), &[], 3.0).is_empty());
        // An interval without I/O of the class (missing from the figures) does not end it.
        let mut gap = series(&[30.0, 40.0, 30.0, 1.0], 20.0);
        gap.remove(1);
        let found = find(&gap, &[], 4.0);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(
            (found[0].start_s, found[0].end_s, found[0].intervals),
            (0.0, 3.0, 2)
        );
        // Nor do such intervals after the last one above: it lasts until the path is back.
        let mut tail = series(&[1.0, 30.0, 40.0, 30.0, 1.0], 20.0);
        tail.remove(3);
        let found = find(&tail, &[], 5.0);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(
            (found[0].start_s, found[0].end_s, found[0].intervals),
            (1.0, 4.0, 2)
        );
        assert_eq!(found[0].duration_s, 3.0);
        let found = find(&series(&[30.0, 1.0], 20.0), &[mark(1.5, "late")], 2.0);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].mark, None, "the mark came after the start");
    }
}
