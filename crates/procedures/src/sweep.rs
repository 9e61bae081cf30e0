//! `jetproof sweep`: the same databases run again and again with only the thread count (and,
//! with `--set`, other job settings) changed, as the HP EVA8000 study measures storage
//! (`docs/sweep.md`). Here: parsing the thread list and the settings, checking every point's job
//! before any I/O, the order of the points (a plain sweep, or `--find-max`'s grow-then-bisect
//! search with each decision and its reason) and each point's figures read from its own
//! `result.json`; the document, `sweep.json`, and its rendering (`sweep.md`, `sweep.html`) are
//! `jetproof_results::sweep`'s, re-exported here. Running one point is the caller's
//! (the command runs a performance test into the point's own results folder), so the search is
//! tested against any model of the storage.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use jetproof_io::hist::LatencyHistogram;
use jetproof_job::{Job, Threads};
pub use jetproof_results::sweep::{
    ClassFigures, Curve, Decision, MaxFound, Point, SWEEP_VERSION, SetSpec, SweepDoc, ThreadList,
    charts, compare_html, compare_markdown, curves, html, markdown,
};

use jetproof_storage::{BadInput, bad};

/// The most points one `--threads` may list or span.
pub const MAX_THREAD_POINTS: usize = 256;

/// The largest thread count a sweep accepts (the host's own limits are checked per point).
pub const MAX_THREADS: u32 = 4096;

/// `--threads`: a list `1,2,4,8`, a range `2..32` (step 1) or `2..32:2` (both ends included
/// when the step lands on the end), or one count.
pub fn parse_threads(text: &str) -> Result<ThreadList, String> {
    let usage = "give a list like 1,2,4,8 or a range like 2..32:2 (from..to:step)";
    let count = |t: &str| -> Result<u32, String> {
        let t = t.trim();
        match t.parse::<u32>() {
            Ok(0) => Err(format!(
                "`{text}`: a point needs at least 1 thread; {usage}"
            )),
            Ok(n) if n > MAX_THREADS => Err(format!(
                "`{text}`: {n} threads per database is more than {MAX_THREADS}; {usage}"
            )),
            Ok(n) => Ok(n),
            Err(_) => Err(format!("`{text}`: `{t}` is not a thread count; {usage}")),
        }
    };
    let mut values = Vec::new();
    if let Some((from, rest)) = text.split_once("..") {
        let (to, step) = match rest.split_once(':') {
            Some((to, step)) => (to, count(step)?),
            None => (rest, 1),
        };
        let (from, to) = (count(from)?, count(to)?);
        if to < from {
            return Err(format!("`{text}`: the range ends below its start; {usage}"));
        }
        let points = (to - from) / step + 1;
        if points as usize > MAX_THREAD_POINTS {
            return Err(format!(
                "`{text}`: {points} points; a sweep takes at most {MAX_THREAD_POINTS} (a larger step, or --find-max over a wide range, needs fewer)"
            ));
        }
        let mut n = from;
        while n <= to {
            values.push(n);
            n += step;
        }
    } else {
        for part in text.split(',') {
            values.push(count(part)?);
        }
        if values.len() > MAX_THREAD_POINTS {
            return Err(format!(
                "`{text}`: {} points; a sweep takes at most {MAX_THREAD_POINTS}",
                values.len()
            ));
        }
    }
    values.sort_unstable();
    values.dedup();
    let step = values.windows(2).map(|w| w[1] - w[0]).min().unwrap_or(1);
    Ok(ThreadList { values, step })
}

/// Parses `KEY=V1,V2,...` (the syntax only; [`apply_setting`] checks the key and the values).
pub fn parse_set(text: &str) -> Result<SetSpec, String> {
    let usage = "give KEY=V1,V2,... with KEY a job key like workload.lazy_commit_percent";
    let Some((key, values)) = text.split_once('=') else {
        return Err(format!("`{text}`: no `=`; {usage}"));
    };
    let key = key.trim();
    if key.is_empty() || !key.contains('.') {
        return Err(format!(
            "`{text}`: `{key}` is not a job key (table.key); {usage}"
        ));
    }
    let values: Vec<String> = values.split(',').map(|v| v.trim().to_string()).collect();
    if values.iter().any(|v| v.is_empty()) {
        return Err(format!("`{text}`: an empty value; {usage}"));
    }
    let mut seen = values.clone();
    seen.sort();
    seen.dedup();
    if seen.len() != values.len() {
        return Err(format!("`{text}`: a value is given twice"));
    }
    Ok(SetSpec {
        key: key.to_string(),
        values,
    })
}

/// Keys a sweep does not vary: the thread count is `--threads`, and these would make another
/// set of databases (a sweep runs on the same ones).
const FIXED_KEYS: [&str; 9] = [
    "workload.threads",
    "storage.data_dir",
    "storage.databases",
    "storage.db_size",
    "storage.page_size",
    "storage.table_density",
    "storage.instance",
    "storage.allow_devices",
    "workload.record_size",
];

/// `job` with `key` set to `value` (a number, a boolean or text, as in the job file), validated.
/// Bad input names the key: one that the job file does not have, a value the key does not take,
/// or a key a sweep cannot vary.
pub fn apply_setting(job: &Job, key: &str, value: &str) -> Result<Job, BadInput> {
    let field = format!("--set {key}");
    if FIXED_KEYS.contains(&key) {
        return Err(bad(
            field,
            if key == "workload.threads" {
                "the thread count is what --threads sweeps; give it there".to_string()
            } else {
                "a sweep runs every point on the same databases, and this key would make others; run a sweep per set of databases and compare them (jetproof sweep --compare A B)".to_string()
            },
        ));
    }
    let mut tree = serde_json::to_value(job).map_err(|e| bad(&field, e.to_string()))?;
    let parts: Vec<&str> = key.split('.').collect();
    let mut node = &mut tree;
    for (i, part) in parts.iter().enumerate() {
        let Some(object) = node.as_object_mut() else {
            return Err(bad(&field, format!("`{key}` is not a key of the job file")));
        };
        let Some(next) = object.get_mut(*part) else {
            return Err(bad(
                &field,
                format!(
                    "`{key}` is not a key of the job file (no `{}`); keys are written table.key, as in the job file (docs/workload.md)",
                    parts[..=i].join(".")
                ),
            ));
        };
        node = next;
    }
    if node.is_object() || node.is_array() {
        return Err(bad(
            &field,
            format!("`{key}` is a table, not a value; give one of its keys"),
        ));
    }
    // A number or a boolean as such, anything else as text (like `std` or `8KiB`).
    *node = serde_json::from_str::<serde_json::Value>(value)
        .ok()
        .filter(|v| v.is_number() || v.is_boolean() || v.is_string())
        .unwrap_or_else(|| serde_json::Value::String(value.to_string()));
    let changed: Job = serde_json::from_value(tree)
        .map_err(|e| bad(&field, format!("`{value}` is not a value of this key: {e}")))?;
    changed
        .validate()
        .map_err(|e| bad(&field, format!("`{value}`: {e}")))?;
    Ok(changed)
}

/// One series of a sweep: the job with one combination of the `--set` values.
#[derive(Clone, Debug)]
pub struct SeriesPlan {
    /// `key=value, key=value`, or `threads` for a sweep of the thread count alone.
    pub label: String,
    pub settings: BTreeMap<String, String>,
    pub job: Job,
}

/// The series of `sets` (every combination of their values, in order) over `base`; each job is
/// validated and must keep `base`'s databases.
pub fn plan_series(base: &Job, sets: &[SetSpec]) -> Result<Vec<SeriesPlan>, BadInput> {
    let mut series = vec![SeriesPlan {
        label: String::new(),
        settings: BTreeMap::new(),
        job: base.clone(),
    }];
    let mut keys = Vec::new();
    for set in sets {
        if keys.contains(&set.key) {
            return Err(bad(
                format!("--set {}", set.key),
                "given twice; give its values once, separated by commas",
            ));
        }
        keys.push(set.key.clone());
        let mut next = Vec::new();
        for s in &series {
            for value in &set.values {
                let job = apply_setting(&s.job, &set.key, value)?;
                let mut settings = s.settings.clone();
                settings.insert(set.key.clone(), value.clone());
                let mut label = s.label.clone();
                if !label.is_empty() {
                    label.push_str(", ");
                }
                let _ = write!(label, "{}={value}", set.key);
                next.push(SeriesPlan {
                    label,
                    settings,
                    job,
                });
            }
        }
        series = next;
    }
    for s in &mut series {
        if s.label.is_empty() {
            s.label = "threads".into();
        }
        if s.job.instances() != base.instances()
            || s.job.db_size() != base.db_size()
            || s.job.storage.page_size != base.storage.page_size
        {
            return Err(bad(
                format!("--set ({})", s.label),
                "changes the databases (their paths, count, size or page size); a sweep runs on one set of databases",
            ));
        }
    }
    let mut dirs: Vec<String> = series.iter().map(|s| series_dir(s, 1)).collect();
    dirs.sort();
    dirs.dedup();
    if dirs.len() != series.len() {
        return Err(bad(
            "--set",
            "two values name the same results folder once characters other than letters, digits, `.`, `_`, `-` and `=` are replaced; give values that differ in those",
        ));
    }
    Ok(series)
}

/// `job` with `threads` sessions per database.
pub fn with_threads(job: &Job, threads: u32) -> Job {
    let mut job = job.clone();
    job.workload.threads = Threads::Fixed(threads);
    job
}

/// The results folder of a point, relative to the sweep's: `threads-8`, or
/// `workload.lazy_commit_percent=50+threads-8`.
pub fn series_dir(series: &SeriesPlan, threads: u32) -> String {
    let mut name = String::new();
    for (key, value) in &series.settings {
        let _ = write!(name, "{key}={value}+");
    }
    let _ = write!(name, "threads-{threads}");
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._-=+".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// The figures of a point from its `result.json` (as JSON: read by the documented keys, so the
/// sweep does not depend on the Rust types behind them).
pub fn point_from_result(
    result: &serde_json::Value,
    series: &SeriesPlan,
    threads: u32,
    dir: &str,
) -> Point {
    let mut histograms: BTreeMap<String, (LatencyHistogram, f64)> = BTreeMap::new();
    let mut storage_error = false;
    for instance in result["instances"].as_array().into_iter().flatten() {
        let Some(object) = instance.as_object() else {
            continue;
        };
        storage_error |= object.contains_key("error");
        for (class, figures) in object {
            // `histogram.latency` (the class's latency record beside its count and bytes), or
            // the latency record itself.
            let Some(histogram) = figures
                .get("histogram")
                .map(|h| h.get("latency").unwrap_or(h))
            else {
                continue;
            };
            let Ok(histogram) = serde_json::from_value::<LatencyHistogram>(histogram.clone())
            else {
                continue;
            };
            let entry = histograms.entry(class.clone()).or_default();
            entry.0.merge(&histogram);
            entry.1 += figures["ops_per_sec"].as_f64().unwrap_or(0.0);
        }
    }
    let classes = histograms
        .into_iter()
        .map(|(class, (h, ops_per_sec))| {
            (
                class,
                ClassFigures {
                    count: h.count,
                    ops_per_sec,
                    avg_ms: h.mean_ns() / 1e6,
                    p99_ms: h.value_at_quantile_ns(0.99) as f64 / 1e6,
                },
            )
        })
        .collect();
    Point {
        series: series.label.clone(),
        settings: series.settings.clone(),
        threads,
        dir: dir.to_string(),
        achieved_iops: result["achieved_iops"].as_f64().unwrap_or(0.0),
        target_iops: result["target_iops"].as_f64(),
        classes,
        verdict: result["verdict"].as_str().unwrap_or("fail").to_string(),
        reasons: result["reasons"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|r| r.as_str().map(str::to_string))
            .collect(),
        interrupted: result["interrupted"].as_bool().unwrap_or(false),
        storage_error,
        resumed: false,
    }
}

/// A new `sweep.json` for `base` swept over `threads` and `sets` (state `running`).
pub fn new_doc(base: &Job, threads: &ThreadList, sets: &[SetSpec], find_max: bool) -> SweepDoc {
    let now = jetproof_results::now_rfc3339();
    SweepDoc {
        sweep_version: SWEEP_VERSION,
        tool_version: env!("CARGO_PKG_VERSION").to_string(),
        started: now.clone(),
        updated: now,
        job: base.to_toml(),
        threads: threads.clone(),
        sets: sets.to_vec(),
        find_max,
        db_read_avg_ms: base.thresholds.db_read_avg_ms,
        log_write_avg_ms: base.thresholds.log_write_avg_ms,
        points: Vec::new(),
        decisions: Vec::new(),
        max: Vec::new(),
        state: "running".into(),
    }
}

/// What running one point gave.
pub enum PointRun {
    /// The point ran (or was stopped: `Point::interrupted`) and wrote its `result.json`.
    Ran(Point),
    /// A stop was asked for before the point started.
    NotStarted,
}

/// How a sweep ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ending {
    Complete,
    Interrupted,
    StorageError(String),
}

/// Runs the sweep's points in order (every thread count of every series, or `--find-max`'s
/// search), reusing `finished` points (by folder name, from a previous run into the same
/// `--out`), telling every point and decision through `say`, and handing the document to
/// `save` after each point so that an interrupted or crashed sweep keeps what it finished.
pub fn execute<E>(
    series: &[SeriesPlan],
    doc: &mut SweepDoc,
    finished: &BTreeMap<String, Point>,
    run_point: &mut dyn FnMut(&SeriesPlan, u32, &str) -> Result<PointRun, E>,
    say: &mut dyn FnMut(&str),
    save: &mut dyn FnMut(&SweepDoc) -> Result<(), E>,
) -> Result<Ending, E> {
    doc.points.clear();
    doc.decisions.clear();
    doc.max.clear();
    let candidates = doc.threads.values.clone();
    let mut runner = Runner {
        doc,
        finished,
        run_point,
        say,
        save,
    };
    for s in series {
        let ending = if runner.doc.find_max {
            runner.find_max(s, &candidates)?
        } else {
            let mut ending = Ending::Complete;
            for &threads in &candidates {
                match runner.point(s, threads)? {
                    Step::Point(_) => {}
                    Step::Stop(e) => {
                        ending = e;
                        break;
                    }
                }
            }
            ending
        };
        if ending != Ending::Complete {
            runner.doc.state = match &ending {
                Ending::Interrupted => "interrupted".into(),
                _ => "storage-error".into(),
            };
            runner.doc.updated = jetproof_results::now_rfc3339();
            (runner.save)(runner.doc)?;
            return Ok(ending);
        }
    }
    runner.doc.state = "complete".into();
    runner.doc.updated = jetproof_results::now_rfc3339();
    (runner.save)(runner.doc)?;
    Ok(Ending::Complete)
}

enum Step {
    Point(Point),
    Stop(Ending),
}

struct Runner<'a, E> {
    doc: &'a mut SweepDoc,
    finished: &'a BTreeMap<String, Point>,
    run_point: &'a mut dyn FnMut(&SeriesPlan, u32, &str) -> Result<PointRun, E>,
    say: &'a mut dyn FnMut(&str),
    save: &'a mut dyn FnMut(&SweepDoc) -> Result<(), E>,
}

impl<E> Runner<'_, E> {
    fn point(&mut self, series: &SeriesPlan, threads: u32) -> Result<Step, E> {
        let dir = series_dir(series, threads);
        let prefix = if series.settings.is_empty() {
            String::new()
        } else {
            format!("[{}] ", series.label)
        };
        if let Some(done) = self.doc.points.iter().find(|p| p.dir == dir) {
            return Ok(Step::Point(done.clone()));
        }
        let point = if let Some(done) = self.finished.get(&dir) {
            let mut point = done.clone();
            point.resumed = true;
            (self.say)(&format!(
                "{prefix}{}: finished before, kept (resumed; {dir}/result.json)",
                point.summary()
            ));
            point
        } else {
            match (self.run_point)(series, threads, &dir)? {
                PointRun::NotStarted => return Ok(Step::Stop(Ending::Interrupted)),
                PointRun::Ran(point) => {
                    (self.say)(&format!("{prefix}{}", point.summary()));
                    for reason in &point.reasons {
                        (self.say)(&format!("  {reason}"));
                    }
                    point
                }
            }
        };
        self.doc.points.push(point.clone());
        self.doc.updated = jetproof_results::now_rfc3339();
        if point.interrupted {
            return Ok(Step::Stop(Ending::Interrupted));
        }
        if point.storage_error {
            return Ok(Step::Stop(Ending::StorageError(format!(
                "a storage error stopped an instance at {} thread(s); see {dir}/test.log",
                point.threads
            ))));
        }
        (self.save)(self.doc)?;
        Ok(Step::Point(point))
    }

    fn decide(
        &mut self,
        series: &SeriesPlan,
        threads: Option<u32>,
        decision: String,
        reason: String,
    ) {
        let prefix = if series.settings.is_empty() {
            String::new()
        } else {
            format!("[{}] ", series.label)
        };
        (self.say)(&format!("{prefix}find-max: {decision} ({reason})"));
        self.doc.decisions.push(Decision {
            series: series.label.clone(),
            threads,
            decision,
            reason,
        });
    }

    /// Why a point passed or failed, in a few words.
    fn why(&self, point: &Point) -> String {
        if point.passed() {
            let mut parts = Vec::new();
            if let Some(c) = point.class("db_read") {
                parts.push(format!(
                    "db read avg {:.2} ms <= {} ms",
                    c.avg_ms, self.doc.db_read_avg_ms
                ));
            }
            if let Some(c) = point.class("log_write") {
                parts.push(format!(
                    "log write avg {:.2} ms <= {} ms",
                    c.avg_ms, self.doc.log_write_avg_ms
                ));
            }
            if parts.is_empty() {
                "every threshold met".into()
            } else {
                format!("passed: {}", parts.join(", "))
            }
        } else {
            format!("failed: {}", point.reasons.join("; "))
        }
    }

    /// The largest passing count: grow (indices 0, 1, 3, 7, ...: the counts double on a range
    /// from 1) until a point fails, then bisect between the last pass and the first fail.
    fn find_max(&mut self, series: &SeriesPlan, candidates: &[u32]) -> Result<Ending, E> {
        let n = candidates.len();
        let run_before = self.doc.points.len();
        let mut pass: Option<(usize, Point)> = None;
        let mut fail: Option<usize> = None;
        let mut i = 0;
        // Grow.
        while i < n {
            let point = match self.point(series, candidates[i])? {
                Step::Point(p) => p,
                Step::Stop(e) => return Ok(e),
            };
            let why = self.why(&point);
            if point.passed() {
                pass = Some((i, point));
                if i + 1 == n {
                    self.decide(
                        series,
                        Some(candidates[i]),
                        format!(
                            "{} passes and is the top of --threads: stop growing",
                            candidates[i]
                        ),
                        why,
                    );
                    break;
                }
                let next = (2 * i + 1).min(n - 1);
                self.decide(
                    series,
                    Some(candidates[i]),
                    format!("{} passes: grow to {}", candidates[i], candidates[next]),
                    why,
                );
                i = next;
            } else {
                fail = Some(i);
                match &pass {
                    None => self.decide(
                        series,
                        Some(candidates[i]),
                        format!(
                            "{} fails, the smallest count of --threads: none passes",
                            candidates[i]
                        ),
                        why,
                    ),
                    Some((p, _)) => self.decide(
                        series,
                        Some(candidates[i]),
                        format!(
                            "{} fails: bisect between {} (passes) and {} (fails)",
                            candidates[i], candidates[*p], candidates[i]
                        ),
                        why,
                    ),
                }
                break;
            }
        }
        // Bisect.
        while let (Some((p, _)), Some(f)) = (&pass, fail) {
            let p = *p;
            if f - p <= 1 {
                break;
            }
            let m = (p + f) / 2;
            let point = match self.point(series, candidates[m])? {
                Step::Point(point) => point,
                Step::Stop(e) => return Ok(e),
            };
            let why = self.why(&point);
            if point.passed() {
                self.decide(
                    series,
                    Some(candidates[m]),
                    format!(
                        "{} passes: the answer is between {} and {}",
                        candidates[m], candidates[m], candidates[f]
                    ),
                    why,
                );
                pass = Some((m, point));
            } else {
                self.decide(
                    series,
                    Some(candidates[m]),
                    format!(
                        "{} fails: the answer is between {} and {}",
                        candidates[m], candidates[p], candidates[m]
                    ),
                    why,
                );
                fail = Some(m);
            }
        }
        let found = MaxFound {
            series: series.label.clone(),
            threads: pass.as_ref().map(|(i, _)| candidates[*i]),
            achieved_iops: pass.as_ref().map(|(_, p)| p.achieved_iops),
            first_failing: fail.map(|f| candidates[f]),
            points: self.doc.points.len() - run_before,
            step: self.doc.threads.step,
        };
        let answer = match (&found.threads, &found.first_failing) {
            (Some(t), Some(f)) => format!(
                "largest passing: {t} thread(s), {:.1} IOPS ({f} fails)",
                found.achieved_iops.unwrap_or(0.0)
            ),
            (Some(t), None) => format!(
                "largest passing: at least {t} thread(s), {:.1} IOPS (the top of --threads passed; widen it to look further)",
                found.achieved_iops.unwrap_or(0.0)
            ),
            (None, _) => "no thread count of --threads passes".to_string(),
        };
        self.decide(
            series,
            None,
            answer,
            format!("{} point(s) run", found.points),
        );
        self.doc.max.push(found);
        Ok(Ending::Complete)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thread_lists_and_ranges() {
        assert_eq!(parse_threads("1,2,4,8").expect("list").values, [1, 2, 4, 8]);
        assert_eq!(parse_threads("1,2,4,8").expect("list").step, 1);
        let range = parse_threads("2..32:2").expect("range");
        assert_eq!(range.values.len(), 16);
        assert_eq!((range.values[0], range.values[15], range.step), (2, 32, 2));
        assert_eq!(parse_threads("3..10:3").expect("range").values, [3, 6, 9]);
        assert_eq!(parse_threads("8,4,4").expect("list").values, [4, 8]);
        assert_eq!(parse_threads("5").expect("one").values, [5]);
        for bad in [
            "",
            "0,1",
            "a",
            "1..",
            "8..2",
            "1..4:0",
            "1,,2",
            "1..100000",
            "-1",
        ] {
            assert!(parse_threads(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn settings_are_checked_and_name_the_key() {
        let job = Job::default();
        let changed = apply_setting(&job, "workload.lazy_commit_percent", "50").expect("set");
        assert_eq!(changed.workload.lazy_commit_percent, 50);
        let engine = apply_setting(&job, "storage.io_engine", "io_uring").expect("set");
        assert_eq!(engine.storage.io_engine.name(), "io_uring");
        for (key, value) in [
            ("workload.no_such_key", "1"),
            ("nosuch.table", "1"),
            ("workload.lazy_commit_percent", "many"),
            ("storage.io_engine", "floppy"),
            ("workload.threads", "4"),
            ("storage.db_size", "1GiB"),
            ("workload", "1"),
        ] {
            let error = apply_setting(&job, key, value).expect_err(key).to_string();
            assert!(error.contains(key), "{key}={value}: {error}");
        }
        assert!(parse_set("workload.lazy_commit_percent").is_err());
        assert!(parse_set("x=1").is_err());
        assert!(parse_set("a.b=1,,2").is_err());
        assert!(parse_set("a.b=1,1").is_err());
        let series = plan_series(
            &job,
            &[
                parse_set("workload.lazy_commit_percent=50,90").expect("set"),
                parse_set("storage.io_engine=std,io_uring").expect("set"),
            ],
        )
        .expect("series");
        assert_eq!(series.len(), 4);
        assert_eq!(
            series[3].label,
            "workload.lazy_commit_percent=90, storage.io_engine=io_uring"
        );
        assert_eq!(
            series_dir(&series[0], 8),
            "storage.io_engine=std+workload.lazy_commit_percent=50+threads-8"
        );
    }

    /// A storage model whose verdict passes up to `max` threads: find-max must find it exactly,
    /// with the points the search needs (about 2 log2 of the range).
    #[test]
    fn find_max_grows_then_bisects_to_the_exact_answer() {
        for (range, max) in [
            ("1..64", 23u32),
            ("1..64", 1),
            ("1..64", 64),
            ("2..40:2", 30),
            ("1..64", 0),
        ] {
            let threads = parse_threads(range).expect("range");
            let job = Job::default();
            let series = plan_series(&job, &[]).expect("series");
            let mut doc = new_doc(&job, &threads, &[], true);
            let mut runs = Vec::new();
            let mut run = |s: &SeriesPlan, t: u32, dir: &str| -> Result<PointRun, ()> {
                runs.push(t);
                let pass = t <= max;
                Ok(PointRun::Ran(Point {
                    series: s.label.clone(),
                    settings: BTreeMap::new(),
                    threads: t,
                    dir: dir.into(),
                    achieved_iops: f64::from(t) * 100.0,
                    target_iops: None,
                    classes: BTreeMap::new(),
                    verdict: if pass { "pass" } else { "fail" }.into(),
                    reasons: if pass {
                        vec![]
                    } else {
                        vec!["too slow".into()]
                    },
                    interrupted: false,
                    storage_error: false,
                    resumed: false,
                }))
            };
            let ending = execute(
                &series,
                &mut doc,
                &BTreeMap::new(),
                &mut run,
                &mut |_| {},
                &mut |_| Ok(()),
            )
            .expect("sweep");
            assert_eq!(ending, Ending::Complete);
            let found = &doc.max[0];
            let expected = threads.values.iter().copied().filter(|&t| t <= max).max();
            assert_eq!(found.threads, expected, "{range} max {max}: runs {runs:?}");
            assert!(runs.len() <= 14, "{range} max {max}: runs {runs:?}");
            assert_eq!(doc.decisions.len(), runs.len() + 1, "{:?}", doc.decisions);
        }
    }

    /// `--find-max` on the deterministic storage model: every read takes 2 ms per read in flight
    /// (`FaultConfig::read_latency_per_queued_read`), and the database read average may be at
    /// most 11 ms. N sessions, each blocked in one read at a time, see about N x 2 ms: 5 threads
    /// (about 10 ms) pass and 6 (about 12 ms) fail. The search over 1..12 must land within one
    /// step of 5.
    #[test]
    fn find_max_finds_the_known_answer_on_a_latency_model() {
        use std::sync::atomic::AtomicBool;
        use std::time::Duration;

        use jetproof_engine::{Database, DatabaseOptions};
        use jetproof_io::IoBackend;
        use jetproof_io::fault::{FaultBackend, FaultConfig};
        use jetproof_results::{OutDir, TestKind, TestLog};
        use jetproof_workload::keys::MailKey;

        use crate::performance::{RunOptions, performance};

        let dir = tempfile::tempdir().expect("tempdir");
        let text = format!(
            "[storage]\ndata_dir = \"{}\"\ndatabases = 1\ndb_size = \"8MiB\"\npage_size = \"8KiB\"\ndirect_io = false\n\
             [simulation]\nmailboxes = 10\n\
             [workload]\nrecord_size = \"1KiB\"\nthreads = 1\nbackground_maintenance = false\n\
             [cache]\nmin_size = \"256KiB\"\nmax_size = \"512KiB\"\n\
             [run]\nduration = \"2s\"\nsample_interval = \"250ms\"\n\
             [thresholds]\ndb_read_avg_ms = 11\ndb_read_max_ms = 10000\nlog_write_avg_ms = 10000\n\
             log_write_max_ms = 10000\npage_fault_stalls_per_sec = 1000000\n",
            dir.path().join("data").display()
        );
        let job = Job::parse(&text, "test job").expect("job");
        let backend = FaultBackend::new(FaultConfig {
            sync_dir_required: false,
            ..FaultConfig::default()
        });
        for instance in job.instances() {
            if let Some(parent) = instance.database_path.parent() {
                backend.create_dir_all(parent).expect("mkdir");
            }
            let database = Database::create(
                backend.as_ref(),
                &instance.database_path,
                DatabaseOptions {
                    page_size: 8192,
                    initial_size_bytes: 8 << 20,
                    cache_min_bytes: 256 << 10,
                    cache_max_bytes: 1 << 20,
                    ..DatabaseOptions::default()
                },
            )
            .expect("create");
            for mailbox in 0..10 {
                for item in 0..400 {
                    database
                        .insert(&MailKey::new(mailbox, item).encode(), &[7u8; 1000])
                        .expect("insert");
                }
            }
            database.close().expect("close");
        }
        backend.configure(|c| c.read_latency_per_queued_read = Duration::from_millis(2));
        let threads = parse_threads("1..12").expect("range");
        let series = plan_series(&job, &[]).expect("series");
        let mut doc = new_doc(&job, &threads, &[], true);
        let stop = AtomicBool::new(false);
        let mut run = |s: &SeriesPlan, t: u32, name: &str| -> Result<PointRun, String> {
            let out = OutDir::prepare(
                Some(&dir.path().join("sw").join(name)),
                TestKind::Performance,
            )
            .map_err(|e| e.to_string())?;
            let log = TestLog::create(&out.file("test.log"), false).map_err(|e| e.to_string())?;
            let options = RunOptions {
                backend: backend.clone(),
                stop: &stop,
                seed: 19,
                start_at: None,
                live: None,
            };
            performance(&with_threads(&s.job, t), false, &out, &log, &options)
                .map_err(|e| e.to_string())?;
            let json: serde_json::Value = serde_json::from_str(
                &jetproof_results::read_result_json(&out.file("result.json"))
                    .map_err(|e| e.to_string())?,
            )
            .map_err(|e| e.to_string())?;
            Ok(PointRun::Ran(point_from_result(&json, s, t, name)))
        };
        let mut said = Vec::new();
        let ending = execute(
            &series,
            &mut doc,
            &BTreeMap::new(),
            &mut run,
            &mut |line| said.push(line.to_string()),
            &mut |_| Ok(()),
        )
        .expect("sweep");
        let log = said.join("\n");
        assert_eq!(ending, Ending::Complete, "{log}");
        let found = doc.max[0].threads.expect("a passing count");
        assert!(
            found.abs_diff(5) <= 1,
            "found {found}, expected 5 within one step:\n{log}"
        );
        // Grow (1, 2, 4, 8) then bisect (6, then 5 or 7): no more points than that.
        assert!(doc.points.len() <= 7, "{log}");
        // Every decision names its reason: the observed average against the threshold.
        assert!(
            doc.decisions
                .iter()
                .filter(|d| d.threads.is_some())
                .all(|d| d.reason.contains("db read avg")
                    || d.reason.contains("Database read")
                    || d.reason.contains("database read")
                    || d.reason.contains("failed")),
            "{:?}",
            doc.decisions
        );
        // The model behaves as designed: the read latency grows with the thread count.
        let read = |t: u32| {
            doc.points
                .iter()
                .find(|p| p.threads == t)
                .and_then(|p| p.classes.get("db_read"))
                .map(|c| c.avg_ms)
        };
        if let (Some(one), Some(four)) = (read(1), read(4)) {
            assert!(
                four > 2.5 * one,
                "1 thread {one} ms, 4 threads {four} ms\n{log}"
            );
        }
        eprintln!("{log}");
    }
}
