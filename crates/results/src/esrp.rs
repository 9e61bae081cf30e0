//! The solution document (`jetproof esrp`, `docs/esrp.md`): an ESRP-Storage style report made
//! from a solution description, a plan, and every host's results of the test set (performance,
//! stress, backup, soft recovery). Results are combined with [`crate::aggregate`], test by test,
//! exactly as `jetproof aggregate` does; every table of the document is filled from those
//! aggregates and from the plan, never typed in.
//!
//! The document says on its first page whether the runs are a complete ESRP test set: each
//! requirement ([`Requirement`]) is checked against the results and listed as met or not, and
//! one not met marks the whole document "not a complete ESRP test set".

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::aggregate::{self, AggregateHost, AggregateResult, EsrpMetrics};
use crate::{TestKind, Verdict};

/// ESRP's durations and counts, the figures the requirements are judged by.
pub const PERFORMANCE_SECONDS: f64 = 2.0 * 3600.0;
pub const STRESS_SECONDS: f64 = 24.0 * 3600.0;
pub const RECOVERY_LOG_FILES: f64 = 500.0;
/// A window this much shorter than required still counts: hosts started with one `--start-at`
/// overlap within milliseconds, and the shared window is the overlap.
pub const WINDOW_TOLERANCE_SECONDS: f64 = 60.0;

/// The tests of ESRP's set, in the order the document reports them (defined at the crate's
/// root, so that `aggregate`, which orders its groups by it, need not import this file).
pub use crate::ESRP_TESTS as TESTS;

/// A table given in the solution file: column names and rows of cells.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Table {
    pub columns: Vec<String>,
    pub rows: Vec<Vec<String>>,
}

/// The solution file (`SOLUTION`, TOML): what the vendor describes and the results cannot say.
/// Two-column tables are lists of `[label, value]` pairs, printed in the order given.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct Solution {
    pub vendor: String,
    pub product: String,
    /// The document's title; unset: made from vendor, product and the plan.
    pub title: Option<String>,
    /// Exchange version the solution is for, as printed ("2010").
    pub exchange_version: Option<String>,
    pub overview: Option<String>,
    pub features: Vec<String>,
    pub description: Option<String>,
    pub customer_profile: Option<String>,
    pub storage_hardware: Vec<[String; 2]>,
    pub storage_software: Vec<[String; 2]>,
    pub database_disks: Vec<[String; 2]>,
    pub log_disks: Vec<[String; 2]>,
    pub replication: Vec<[String; 2]>,
    pub lun_layout: Option<Table>,
    /// The names of the servers tested (`--host-name` or hostnames): every one must have results.
    pub servers: Vec<String>,
    pub best_practices: Option<String>,
    pub conclusion: Option<String>,
    /// A `jetproof plan --json` file (relative to the solution file) ...
    pub plan_json: Option<PathBuf>,
    /// ... or the flags of `jetproof plan`, as a list (`["--mailboxes", "40800", ...]`).
    pub plan: Vec<String>,
    /// Written by `plan --write-solution`: the plan's figures as computed then (for the reader;
    /// the document computes the plan again from `plan`).
    pub plan_figures: Option<serde_json::Value>,
    /// Written by `plan --write-solution`: the test set to run (ESRP's).
    pub tests: Option<serde_json::Value>,
    /// Written by `plan --write-solution`: the durations and log count of a dry run.
    pub rehearsal: Option<serde_json::Value>,
    /// Written by `plan --write-solution`: the job every host runs (`docs/job.md`).
    pub job: Option<serde_json::Value>,
}

/// Why the results cannot be read at all (exit 2).
#[derive(Debug, thiserror::Error)]
pub enum EsrpError {
    #[error("{path}: {message}")]
    Results { path: PathBuf, message: String },
}

/// Every `result.json` two levels under RESULTS_DIR: `RESULTS_DIR/<host>/<test>/result.json`
/// (one folder per host) and the many-servers playbook's `RESULTS_DIR/<test>/<host>/` alike,
/// since results are told apart by the host and test they record, not by folder names.
/// Aggregates among them are skipped, as `jetproof aggregate` skips them. Sorted.
pub fn find(results_dir: &Path) -> Result<Vec<PathBuf>, EsrpError> {
    let refuse = |message: String| EsrpError::Results {
        path: results_dir.to_path_buf(),
        message,
    };
    let entries = std::fs::read_dir(results_dir)
        .map_err(|e| refuse(format!("cannot read the results directory: {e}")))?;
    let mut dirs: Vec<PathBuf> = entries
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    let mut found = Vec::new();
    for dir in dirs {
        found.extend(aggregate::find_results(std::slice::from_ref(&dir)).unwrap_or_default());
    }
    if found.is_empty() {
        return Err(refuse(
            "holds no results: give a directory with one folder per host, each holding its tests' results directories".into(),
        ));
    }
    Ok(found)
}

/// One test of the set across the hosts: the aggregate, or why there is none.
#[derive(Clone, Debug)]
pub struct TestSet {
    pub test: TestKind,
    /// Host folders that have a result of this test.
    pub hosts: Vec<String>,
    pub aggregate: Option<AggregateResult>,
    /// The aggregate refused the results (windows that do not overlap, a host given twice ...).
    pub error: Option<String>,
    /// The hosts' windows do not all overlap: each host's window, as the document says it.
    pub apart: Option<String>,
    /// Every host's own figures, combined or not: what per-server verdicts, checksums and log
    /// counts are judged by, so a test that ran is never reported "not run".
    pub per_host: Vec<AggregateHost>,
    /// The result files the document's appendix shows, by host folder.
    pub files: BTreeMap<String, PathBuf>,
}

/// Every test of the set as combined, the notes made on the way, and every host's name.
#[derive(Clone, Debug)]
pub struct Collected {
    pub sets: Vec<TestSet>,
    /// The data reduction figures of every result that carries them (init, checksum, a test's
    /// checksum pass), the newest per host and test.
    pub reductions: Vec<HostReduction>,
    /// What each result says was simulated, to check against the plan.
    pub shapes: Vec<HostShape>,
    pub notes: Vec<String>,
    pub hosts: Vec<String>,
}

/// One result's data reduction figures (`result.json` `data_reduction`), for the configuration
/// section.
#[derive(Clone, Debug, PartialEq)]
pub struct HostReduction {
    pub host: String,
    pub test: TestKind,
    pub figures: crate::reduction::DataReduction,
}

/// What one result says it simulated: checked against the plan ([`plan_mismatches`]).
#[derive(Clone, Debug, PartialEq)]
pub struct HostShape {
    pub host: String,
    pub test: TestKind,
    pub mailboxes: Option<u64>,
    pub databases: usize,
    /// `storage.db_size` as the job gave it (bytes), when it gave one.
    pub db_size_bytes: Option<u64>,
    pub copies: Option<u64>,
    /// `storage.page_size` in bytes.
    pub page_size_bytes: Option<u64>,
    /// The job's `run.rehearsal`: a dry run of the solution at its reduced scale.
    pub rehearsal: bool,
}

/// A size as jobs and plans write it ("8MiB", "1.5GB", "32768"): decimal and binary units.
pub fn parse_size(text: &str) -> Option<u64> {
    let text = text.trim();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: f64 = number.parse().ok()?;
    let factor: f64 = match unit.trim() {
        "" | "B" => 1.0,
        "KiB" => 1024.0,
        "MiB" => 1024.0 * 1024.0,
        "GiB" => 1024.0 * 1024.0 * 1024.0,
        "TiB" => 1024.0 * 1024.0 * 1024.0 * 1024.0,
        "KB" | "kB" => 1e3,
        "MB" => 1e6,
        "GB" => 1e9,
        "TB" => 1e12,
        _ => return None,
    };
    Some((number * factor).round() as u64)
}

/// What the document needs of a result before its test is merged: who, which test, and what it
/// simulated. Read with the instances skipped, so a first look at a thousand hosts'
/// files holds none of their histograms.
#[derive(Clone, Debug)]
struct Peek {
    path: PathBuf,
    host: String,
    test: TestKind,
    measured_start: Option<String>,
    shape: HostShape,
    reduction: Option<crate::reduction::DataReduction>,
}

fn peek_one(path: &Path) -> Result<Peek, aggregate::AggregateError> {
    #[derive(Deserialize)]
    struct Host {
        name: String,
    }
    #[derive(Deserialize, Default)]
    struct Parameters {
        #[serde(default)]
        simulation: serde_json::Value,
        #[serde(default)]
        storage: serde_json::Value,
        #[serde(default)]
        run: serde_json::Value,
    }
    #[derive(Deserialize)]
    struct Head {
        schema_version: u32,
        test: TestKind,
        host: Host,
        #[serde(default)]
        measured_start: Option<String>,
        #[serde(default)]
        parameters: Parameters,
        #[serde(default)]
        instances: Vec<serde::de::IgnoredAny>,
        #[serde(default)]
        data_reduction: Option<crate::reduction::DataReduction>,
    }
    let head = jetproof_io::input::open_regular(path, crate::MAX_RESULT_JSON_BYTES)
        .ok()
        .and_then(|f| serde_json::from_reader::<_, Head>(std::io::BufReader::new(f)).ok())
        .filter(|h| h.schema_version == crate::SCHEMA_VERSION);
    let Some(head) = head else {
        // Not a result of this schema: the full read says why, as `jetproof aggregate` does.
        let input = aggregate::load(&[path.to_path_buf()])?;
        let r = &input[0].result;
        return Ok(Peek {
            path: path.to_path_buf(),
            host: r.host.name.clone(),
            test: r.test,
            measured_start: r.measured_start.clone(),
            reduction: r.data_reduction.clone(),
            shape: shape(
                &r.host.name,
                r.test,
                r.parameters.job.get("simulation"),
                r.parameters.job.get("storage"),
                r.parameters.job.get("run"),
                r.instances.len(),
            ),
        });
    };
    Ok(Peek {
        path: path.to_path_buf(),
        shape: shape(
            &head.host.name,
            head.test,
            Some(&head.parameters.simulation),
            Some(&head.parameters.storage),
            Some(&head.parameters.run),
            head.instances.len(),
        ),
        host: head.host.name,
        test: head.test,
        measured_start: head.measured_start,
        reduction: head.data_reduction,
    })
}

/// [`peek_one`] of every file, on up to 16 threads, in the order given.
fn peek_all(paths: &[PathBuf]) -> Result<Vec<Peek>, aggregate::AggregateError> {
    let threads = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .clamp(1, 16);
    let chunk = paths.len().div_ceil(threads).max(1);
    let parts: Vec<Vec<Result<Peek, aggregate::AggregateError>>> = std::thread::scope(|scope| {
        let handles: Vec<_> = paths
            .chunks(chunk)
            .map(|part| scope.spawn(move || part.iter().map(|p| peek_one(p)).collect()))
            .collect();
        handles
            .into_iter()
            .map(|h| match h.join() {
                Ok(result) => result,
                Err(panic) => std::panic::resume_unwind(panic),
            })
            .collect()
    });
    parts.into_iter().flatten().collect()
}

fn shape(
    host: &str,
    test: TestKind,
    simulation: Option<&serde_json::Value>,
    storage: Option<&serde_json::Value>,
    run: Option<&serde_json::Value>,
    databases: usize,
) -> HostShape {
    let size = |v: Option<&serde_json::Value>| match v {
        Some(serde_json::Value::String(t)) => parse_size(t),
        Some(v) => v.as_u64(),
        None => None,
    };
    let sim = |key: &str| simulation.and_then(|v| v.get(key));
    let sto = |key: &str| storage.and_then(|v| v.get(key));
    HostShape {
        host: host.to_string(),
        test,
        mailboxes: sim("mailboxes").and_then(|v| v.as_u64()),
        databases,
        db_size_bytes: size(sto("db_size")),
        copies: sim("copies_per_database").and_then(|v| v.as_u64()),
        page_size_bytes: size(sto("page_size")),
        rehearsal: run
            .and_then(|r| r.get("rehearsal"))
            .and_then(serde_json::Value::as_bool)
            .unwrap_or(false),
    }
}

/// Where the results do not match the plan: mailboxes per server, databases per host, database
/// size, copies, page size; one line per figure, naming the servers and tests that differ.
pub fn plan_mismatches(plan: &serde_json::Value, shapes: &[HostShape]) -> Vec<String> {
    let inputs = plan.get("inputs");
    let plan_u64 = |v: Option<&serde_json::Value>| v.and_then(|v| v.as_u64());
    let page = inputs
        .and_then(|i| i.get("page_size"))
        .and_then(|v| v.as_str())
        .and_then(parse_size);
    type Get = fn(&HostShape) -> Option<u64>;
    let checks: [(&str, Option<u64>, Get, &str); 5] = [
        (
            "mailboxes per server",
            plan_u64(plan.get("mailboxes_per_server")),
            |h| h.mailboxes,
            "simulation.mailboxes",
        ),
        (
            "databases per host",
            plan_u64(inputs.and_then(|i| i.get("databases_per_server"))),
            |h| Some(h.databases as u64),
            "storage.databases",
        ),
        (
            "database size (bytes)",
            plan_u64(plan.get("test_database_size_bytes")),
            |h| h.db_size_bytes,
            "storage.db_size",
        ),
        (
            "copies per database",
            plan_u64(inputs.and_then(|i| i.get("copies_per_database"))),
            |h| h.copies,
            "simulation.copies_per_database",
        ),
        (
            "page size (bytes)",
            page,
            |h| h.page_size_bytes,
            "storage.page_size",
        ),
    ];
    let mut out = Vec::new();
    for (label, planned, get, key) in checks {
        let Some(planned) = planned else {
            continue;
        };
        // Found value -> the servers (and tests) that have it.
        let mut found: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for h in shapes {
            let value = get(h);
            if value == Some(planned) {
                continue;
            }
            let shown = value.map_or("not set".to_string(), |v| v.to_string());
            let who = format!("{} {}", h.host, h.test.name());
            found.entry(shown).or_default().push(who);
        }
        for (value, who) in found {
            out.push(format!(
                "{label}: the plan has {planned}, the results {value} ({}; the job's `{key}`)",
                who.join(", ")
            ));
        }
    }
    out
}

/// Each host's measured window as the document prints it ("h1 13:00:00–13:00:05"), when the
/// windows do not all overlap (the latest start is not before the earliest end).
fn windows_apart(hosts: &[AggregateHost]) -> Option<String> {
    let parsed: Vec<(std::time::SystemTime, std::time::SystemTime, &AggregateHost)> = hosts
        .iter()
        .filter_map(|h| {
            Some((
                crate::clock::parse_time(&h.measured_start).ok()?,
                crate::clock::parse_time(&h.measured_end).ok()?,
                h,
            ))
        })
        .collect();
    let latest = parsed.iter().map(|w| w.0).max()?;
    let earliest_end = parsed.iter().map(|w| w.1).min()?;
    if latest < earliest_end {
        return None;
    }
    let mut sorted = parsed;
    sorted.sort_by_key(|w| w.0);
    let day = |t: &str| t.get(..10).unwrap_or(t).to_string();
    let one_day = sorted
        .iter()
        .all(|w| day(&w.2.measured_start) == day(&sorted[0].2.measured_start));
    let time = |t: &str| {
        if one_day {
            t.get(11..19).unwrap_or(t).to_string()
        } else {
            t.get(..19).unwrap_or(t).replace('T', " ")
        }
    };
    let list: Vec<String> = sorted
        .iter()
        .map(|w| {
            format!(
                "{} {}–{}",
                w.2.name,
                time(&w.2.measured_start),
                time(&w.2.measured_end)
            )
        })
        .collect();
    Some(format!("windows do not overlap: {}", list.join(", ")))
}

/// Reads every result and combines them test by test, each host by the name its results record
/// (`--host-name` or its hostname). Two results of one test under one host name are refused, as
/// `jetproof aggregate` refuses them: they are either one server's run given twice or two
/// servers sharing a name (runs on one machine without `--host-name`), and merging them into
/// one server would judge a server that does not exist.
pub fn collect(paths: &[PathBuf]) -> Result<Collected, EsrpError> {
    let notes = Vec::new();
    let refused = |e: aggregate::AggregateError| EsrpError::Results {
        path: PathBuf::from("RESULTS_DIR"),
        message: e.to_string(),
    };
    // A first look at each file (its host, test, window start and what it simulated), so that
    // each test is then merged as it is read, one file at a time, as `jetproof aggregate` does.
    let peeks = peek_all(paths).map_err(refused)?;
    let mut by_test: BTreeMap<&'static str, BTreeMap<String, Peek>> = BTreeMap::new();
    let mut names = BTreeSet::new();
    let mut shapes = Vec::new();
    let mut reductions: BTreeMap<(String, &'static str), (Option<String>, HostReduction)> =
        BTreeMap::new();
    for peek in &peeks {
        let Some(figures) = &peek.reduction else {
            continue;
        };
        let slot = (peek.host.clone(), peek.test.name());
        if reductions
            .get(&slot)
            .is_some_and(|(kept, _)| *kept >= peek.measured_start)
        {
            continue;
        }
        let entry = HostReduction {
            host: peek.host.clone(),
            test: peek.test,
            figures: figures.clone(),
        };
        reductions.insert(slot, (peek.measured_start.clone(), entry));
    }
    for peek in peeks {
        let host = peek.host.clone();
        names.insert(host.clone());
        let slot = by_test.entry(peek.test.name()).or_default();
        if let Some(earlier) = slot.get(&host) {
            return Err(EsrpError::Results {
                path: peek.path.clone(),
                message: format!(
                    "host {host} given twice in the {} results (also {}); give each host once (runs sharing a machine: `--host-name`; a test run again: move the older result out of RESULTS_DIR)",
                    peek.test.name(),
                    earlier.path.display()
                ),
            });
        }
        slot.insert(host, peek);
    }
    let mut sets = Vec::new();
    for test in TESTS {
        let inputs = by_test.remove(test.name()).unwrap_or_default();
        let files: BTreeMap<String, PathBuf> = inputs
            .iter()
            .map(|(host, input)| (host.clone(), input.path.clone()))
            .collect();
        let hosts: Vec<String> = inputs.keys().cloned().collect();
        shapes.extend(inputs.values().map(|p| p.shape.clone()));
        let list: Vec<PathBuf> = files.values().cloned().collect();
        let (aggregate, error) = if list.is_empty() {
            (None, None)
        } else {
            match aggregate::aggregate_files(&list) {
                Ok(a) => (Some(a), None),
                Err(e) => (None, Some(e.to_string())),
            }
        };
        let per_host: Vec<AggregateHost> = match &aggregate {
            Some(a) => a.hosts.clone(),
            None => {
                let mut each = Vec::with_capacity(list.len());
                for path in &list {
                    let input = aggregate::load(std::slice::from_ref(path)).map_err(refused)?;
                    each.extend(input.iter().filter_map(|i| aggregate::host_summary(i).ok()));
                }
                each
            }
        };
        let apart = if aggregate.is_none() {
            windows_apart(&per_host)
        } else {
            None
        };
        sets.push(TestSet {
            test,
            hosts,
            aggregate,
            error,
            apart,
            per_host,
            files,
        });
    }
    Ok(Collected {
        sets,
        reductions: reductions.into_values().map(|(_, r)| r).collect(),
        shapes,
        notes,
        hosts: names.into_iter().collect(),
    })
}

/// One ESRP requirement, as checked against the results.
#[derive(Clone, Debug, PartialEq)]
pub struct Requirement {
    pub name: String,
    pub required: String,
    pub found: String,
    pub met: bool,
}

/// A host's checksum pass (after performance or stress): Some(clean) when there was one.
fn checksum_clean(host: &AggregateHost) -> Option<bool> {
    let c = host.totals.workload()?.checksum.as_ref()?;
    Some(c.pages_seen > 0 && c.pages_bad == 0 && c.pages_wrong_number == 0)
}

/// A number of the plan (an untyped JSON document, `jetproof plan --esrp`'s), 0 when absent.
fn number(value: Option<&serde_json::Value>) -> f64 {
    value.and_then(|v| v.as_f64()).unwrap_or(0.0)
}

fn hours(seconds: f64) -> String {
    if seconds >= 3600.0 {
        format!("{:.2} h", seconds / 3600.0)
    } else {
        format!("{seconds:.1} s")
    }
}

/// What the requirements look at in one test's results, per host.
#[derive(Clone, Debug, PartialEq)]
pub struct HostSummary {
    pub name: String,
    pub pass: bool,
    /// Some(clean) when a checksum pass followed the test.
    pub checksum: Option<bool>,
    /// The fewest log files any instance generated (soft recovery): what counts toward ESRP's 500,
    /// not what it replayed (which also holds files an earlier test left past its checkpoint).
    pub fewest_logs: Option<f64>,
    /// Transactional IOPS achieved (performance, stress).
    pub achieved_iops: Option<f64>,
}

/// What the requirements look at in one test's results.
#[derive(Clone, Debug, PartialEq)]
pub struct Summary {
    pub test: TestKind,
    /// Host folders with a result of this test.
    pub hosts: Vec<String>,
    /// The window every host measured in together (None when the results did not combine).
    pub window_seconds: Option<f64>,
    pub error: Option<String>,
    pub per_host: Vec<HostSummary>,
}

impl Summary {
    pub fn of(set: &TestSet) -> Summary {
        Summary {
            test: set.test,
            hosts: set.hosts.clone(),
            window_seconds: set.aggregate.as_ref().map(|a| a.window.seconds),
            error: set.apart.clone().or_else(|| set.error.clone()),
            per_host: set
                .per_host
                .iter()
                .map(|h| HostSummary {
                    name: h.name.clone(),
                    pass: h.verdict == Verdict::Pass,
                    checksum: checksum_clean(h),
                    fewest_logs: h
                        .instance_figures
                        .values()
                        .map(|f| f.logs_generated.unwrap_or(0) as f64)
                        .reduce(f64::min),
                    achieved_iops: h.achieved_iops,
                })
                .collect(),
        }
    }
}

/// A server's one verdict in the performance test: its own run passed (latency thresholds, no
/// errors) and it achieved the plan's target (or, without a plan, its run's own target, which
/// the run's verdict already holds). The heading of its table and the first page print this.
pub fn server_passes(host: &HostSummary, plan_target: Option<f64>) -> bool {
    host.pass && plan_target.is_none_or(|t| host.achieved_iops.is_some_and(|a| a >= t))
}

fn verdict_word(pass: bool) -> &'static str {
    if pass { "pass" } else { "FAIL" }
}

/// Checks every requirement of ESRP's test set against the tests' summaries. `all_hosts`: every
/// host folder with results; `expected_servers`: the plan's server count; `named_servers`: the
/// servers the solution file names.
pub fn requirements(
    sets: &[Summary],
    all_hosts: &[String],
    expected_servers: Option<u64>,
    named_servers: &[String],
    target_per_server: Option<f64>,
    has_plan: bool,
    mismatches: &[String],
) -> Vec<Requirement> {
    let mut out = Vec::new();
    every_host_ran(&mut out, sets, all_hosts, expected_servers, named_servers);
    durations(&mut out, sets);
    targets(&mut out, sets, target_per_server, has_plan, mismatches);
    recovery_and_passes(&mut out, sets, target_per_server, mismatches);
    out
}

/// Every host ran every test, and the servers are the plan's and the solution's.
fn every_host_ran(
    out: &mut Vec<Requirement>,
    sets: &[Summary],
    all_hosts: &[String],
    expected_servers: Option<u64>,
    named_servers: &[String],
) {
    let set = |test: TestKind| sets.iter().find(|s| s.test == test);
    // Every host ran every test.
    let mut missing = Vec::new();
    for test in TESTS {
        let hosts: BTreeSet<&String> = set(test)
            .map(|s| s.hosts.iter().collect())
            .unwrap_or_default();
        let absent: Vec<&str> = all_hosts
            .iter()
            .filter(|h| !hosts.contains(h))
            .map(String::as_str)
            .collect();
        if hosts.is_empty() {
            missing.push(format!("no {} test", test.name()));
        } else if !absent.is_empty() {
            missing.push(format!("{} missing on {}", test.name(), absent.join(", ")));
        }
    }
    for name in named_servers {
        if !all_hosts.contains(name) {
            missing.push(format!("server {name} has no results"));
        }
    }
    if let Some(count) = expected_servers
        && (all_hosts.len() as u64) < count
    {
        missing.push(format!(
            "{} server(s) tested, the plan has {count}",
            all_hosts.len()
        ));
    }
    out.push(Requirement {
        name: "Every test of the set on every server".into(),
        required: "performance, stress, backup and soft recovery on each server".into(),
        found: if missing.is_empty() {
            format!("{} server(s), each with all four tests", all_hosts.len())
        } else {
            missing.join("; ")
        },
        met: missing.is_empty(),
    });
}

/// Each test ran as long (or as many logs) as ESRP requires.
fn durations(out: &mut Vec<Requirement>, sets: &[Summary]) {
    let set = |test: TestKind| sets.iter().find(|s| s.test == test);
    for (test, required, label) in [
        (
            TestKind::Performance,
            PERFORMANCE_SECONDS,
            "Performance test",
        ),
        (TestKind::Stress, STRESS_SECONDS, "Stress test"),
    ] {
        let summary = set(test).filter(|s| !s.hosts.is_empty());
        let (found, met) = match summary {
            Some(Summary {
                window_seconds: Some(seconds),
                ..
            }) => (
                format!("{} measured together", hours(*seconds)),
                *seconds >= required - WINDOW_TOLERANCE_SECONDS,
            ),
            Some(Summary { error: Some(e), .. }) if e.starts_with("windows do not overlap") => {
                (e.clone(), false)
            }
            Some(Summary { error: Some(e), .. }) => (format!("results not combined: {e}"), false),
            _ => ("not run".into(), false),
        };
        out.push(Requirement {
            name: format!("{label} duration"),
            required: format!("at least {}", hours(required)),
            found,
            met,
        });
        let (found, met) = match summary.filter(|s| !s.per_host.is_empty()) {
            Some(s) => {
                let absent: Vec<&str> = s
                    .per_host
                    .iter()
                    .filter(|h| h.checksum.is_none())
                    .map(|h| h.name.as_str())
                    .collect();
                let damaged: Vec<&str> = s
                    .per_host
                    .iter()
                    .filter(|h| h.checksum == Some(false))
                    .map(|h| h.name.as_str())
                    .collect();
                let mut found = Vec::new();
                if !absent.is_empty() {
                    found.push(format!("no checksum pass on {}", absent.join(", ")));
                }
                if !damaged.is_empty() {
                    found.push(format!("damage found on {}", damaged.join(", ")));
                }
                if found.is_empty() {
                    (
                        format!(
                            "every page and log file verified on {} server(s), no damage",
                            s.per_host.len()
                        ),
                        true,
                    )
                } else {
                    (found.join("; "), false)
                }
            }
            None => ("no results".into(), false),
        };
        out.push(Requirement {
            name: format!("Checksum after the {} test", test.name()),
            required: "every page and log file verified, none damaged".into(),
            found,
            met,
        });
    }
}

/// The plan's target on every server, and the results match the plan.
fn targets(
    out: &mut Vec<Requirement>,
    sets: &[Summary],
    target_per_server: Option<f64>,
    has_plan: bool,
    mismatches: &[String],
) {
    let set = |test: TestKind| sets.iter().find(|s| s.test == test);
    if let Some(target) = target_per_server {
        let (found, met) = match set(TestKind::Performance).filter(|s| !s.per_host.is_empty()) {
            Some(_) if !mismatches.is_empty() => (
                "not judged: the results do not match the plan (see \"Results against the plan\")"
                    .to_string(),
                false,
            ),
            Some(s) => {
                let each: Vec<String> = s
                    .per_host
                    .iter()
                    .map(|h| {
                        format!(
                            "{} {:.3} ({})",
                            h.name,
                            h.achieved_iops.unwrap_or(0.0),
                            verdict_word(server_passes(h, Some(target)))
                        )
                    })
                    .collect();
                let short = s
                    .per_host
                    .iter()
                    .filter(|h| h.achieved_iops.is_none_or(|a| a < target))
                    .count();
                if short == 0 {
                    (format!("achieved: {}", each.join(", ")), true)
                } else {
                    (
                        format!(
                            "below the target on {short} server(s); achieved: {}",
                            each.join(", ")
                        ),
                        false,
                    )
                }
            }
            None => ("not run".into(), false),
        };
        out.push(Requirement {
            name: "The plan's target IOPS on every server".into(),
            required: format!("at least {target} transactional IOPS per server (performance test)"),
            found,
            met,
        });
    }
    if has_plan {
        out.push(Requirement {
            name: "The results match the plan".into(),
            required:
                "mailboxes, databases per host, database size, copies and page size as planned"
                    .into(),
            found: if mismatches.is_empty() {
                "every result as planned".into()
            } else {
                format!("does not match the plan: {}", mismatches.join("; "))
            },
            met: mismatches.is_empty(),
        });
    }
}

/// Soft recovery's replay, and every server passing every test.
fn recovery_and_passes(
    out: &mut Vec<Requirement>,
    sets: &[Summary],
    target_per_server: Option<f64>,
    mismatches: &[String],
) {
    let set = |test: TestKind| sets.iter().find(|s| s.test == test);
    let (found, met) = match set(TestKind::Recovery).filter(|s| !s.per_host.is_empty()) {
        Some(s) => {
            let fewest = s
                .per_host
                .iter()
                .map(|h| h.fewest_logs.unwrap_or(0.0))
                .fold(f64::INFINITY, f64::min);
            (
                format!(
                    "{fewest:.0} log files generated by the test per instance at the fewest (replayed files an earlier test left do not count)"
                ),
                fewest >= RECOVERY_LOG_FILES,
            )
        }
        _ => ("not run".into(), false),
    };
    out.push(Requirement {
        name: "Soft recovery".into(),
        required: format!("{RECOVERY_LOG_FILES:.0} log files per instance"),
        found,
        met,
    });

    let mut failing = Vec::new();
    for s in sets {
        for h in &s.per_host {
            // Performance: the server's one verdict, against the plan's target when the results
            // match the plan (otherwise the run's own).
            let target = target_per_server.filter(|_| mismatches.is_empty());
            let pass = if s.test == TestKind::Performance {
                server_passes(h, target)
            } else {
                h.pass
            };
            if !pass {
                failing.push(format!("{} failed {}", h.name, s.test.name()));
            }
        }
    }
    out.push(Requirement {
        name: "Every server passes every test".into(),
        required: "verdict pass on every server".into(),
        found: if failing.is_empty() {
            "every result passes".into()
        } else {
            failing.join("; ")
        },
        met: failing.is_empty(),
    });
}

/// The first page's mark of a rehearsal's document (`--verify` looks for it).
pub const REHEARSAL_MARK: &str = "**REHEARSAL, NOT AN ESRP TEST.**";

/// The requirement a rehearsal's results never meet.
pub const REHEARSAL_REQUIREMENT: &str = "Not a rehearsal";

/// Every result that ran as a rehearsal (`run.rehearsal`), as "host test", sorted.
pub fn rehearsals(shapes: &[HostShape]) -> Vec<String> {
    let mut found: Vec<String> = shapes
        .iter()
        .filter(|s| s.rehearsal)
        .map(|s| format!("{} {}", s.host, s.test.name()))
        .collect();
    found.sort();
    found.dedup();
    found
}

/// What the document is made from.
pub struct Inputs<'a> {
    pub solution: &'a Solution,
    /// `jetproof plan --json`'s object (or the plan of the solution's flags).
    pub plan: Option<&'a serde_json::Value>,
    /// Every host with results, by the name they record.
    pub hosts: &'a [String],
    pub sets: &'a [TestSet],
    pub notes: &'a [String],
    /// What each result simulated ([`Collected::shapes`]).
    pub shapes: &'a [HostShape],
    /// The data reduction figures the results carry ([`Collected::reductions`]).
    pub reductions: &'a [HostReduction],
}

/// The document and whether it is a complete test set.
pub struct Document {
    pub markdown: String,
    pub complete: bool,
    pub requirements: Vec<Requirement>,
}

/// What the database files held for an array that compresses and deduplicates (issue 33): the
/// job's setting and what init and checksum measured, per server and result, all databases of
/// the server together.
fn data_reduction_section(m: &mut String, reductions: &[HostReduction]) {
    let _ = writeln!(m, "\n### Data Reduction\n");
    if reductions.is_empty() {
        let _ = writeln!(
            m,
            "No result gives data reduction figures (init, checksum or a test's checksum pass of this version): what the database files held for an array that compresses and deduplicates is not stated."
        );
        return;
    }
    let _ = writeln!(
        m,
        "What the database files held, as jetproof measured them (zstd level 1 on a sample of blocks; every duplicate block counted on a share of the blocks chosen by content), all databases of a server together; the setting is the job's `workload.compression_ratio` and `workload.dedup_ratio` (1.0 and 1.0: incompressible, no block repeated).\n"
    );
    let _ = writeln!(
        m,
        "| Server | Measured by | Block | Compression set | Compression measured | Dedup ratio set | Duplicate blocks | Dedup ratio measured |\n|---|---|---:|---:|---:|---:|---:|---:|"
    );
    for r in reductions {
        let (set, all) = (&r.figures.setting, &r.figures.across_databases);
        let _ = writeln!(
            m,
            "| {} | {} | {} | {:.2} | {:.2} (±{:.1}%) | {:.2} | {:.2}% | {:.3} |",
            cell(&r.host),
            r.test.name(),
            crate::reduction::unit_label(set.dedup_unit_bytes),
            set.compression_ratio,
            all.compression_ratio,
            all.compression_ratio_ci95_percent,
            set.dedup_ratio,
            all.duplicate_share * 100.0,
            all.dedup_ratio
        );
    }
}

fn pairs(m: &mut String, title: &str, rows: &[[String; 2]]) {
    if rows.is_empty() {
        return;
    }
    let _ = writeln!(m, "\n### {title}\n\n| | |\n|---|---|");
    for [label, value] in rows {
        let _ = writeln!(m, "| {} | {} |", cell(label), cell(value));
    }
}

/// A table cell: pipes and line breaks would break the table.
fn cell(text: &str) -> String {
    text.replace('|', "/").replace('\n', " ")
}

/// Text as paragraphs: lines joined, blank lines between paragraphs kept (a line of the
/// document is a paragraph of the page).
fn text_block(m: &mut String, text: Option<&str>, otherwise: &str) {
    let text = text.unwrap_or(otherwise);
    for paragraph in text.split("\n\n") {
        let joined = paragraph.split_whitespace().collect::<Vec<_>>().join(" ");
        if !joined.is_empty() {
            let _ = writeln!(m, "\n{joined}");
        }
    }
}

fn bytes_gib(value: Option<&serde_json::Value>) -> String {
    let bytes = number(value);
    if bytes >= (1u64 << 40) as f64 {
        format!("{:.2} TiB", bytes / (1u64 << 40) as f64)
    } else {
        format!("{:.2} GiB", bytes / (1u64 << 30) as f64)
    }
}

/// The plan's IOPS per mailbox with its headroom as given ("0.13 + 20% headroom = 0.156
/// tested"; `jetproof_plan::iops_with_headroom_text` writes the same for the terminal), not the
/// product alone as if it were the profile.
fn headroom_text(
    base: Option<&serde_json::Value>,
    headroom_percent: Option<&serde_json::Value>,
    tested: Option<&serde_json::Value>,
) -> String {
    match headroom_percent.and_then(serde_json::Value::as_f64) {
        Some(h) if h != 0.0 => format!(
            "{} + {}% headroom = {} tested",
            whole(base),
            whole(headroom_percent),
            whole(tested)
        ),
        Some(_) => format!("{}, no headroom added", whole(tested)),
        None => whole(tested),
    }
}

fn whole(value: Option<&serde_json::Value>) -> String {
    match value {
        Some(v) if v.is_u64() || v.is_i64() => v.to_string(),
        Some(v) => v.as_f64().map_or("-".into(), |f| format!("{f}")),
        None => "-".into(),
    }
}

/// A server's log replication reads (copies > 1): the sum of its databases' rates, the
/// average of their average latencies, as the other rows of ESRP's table.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Replication {
    pub reads_per_sec: f64,
    pub avg_latency_ms: f64,
}

/// What a server's table adds to [`EsrpMetrics`].
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct ServerRow {
    replication: Replication,
}

impl ServerRow {
    fn of(h: &AggregateHost) -> ServerRow {
        let classes: Vec<&crate::ClassSummary> = h
            .instances
            .iter()
            .filter_map(|i| i.io.get("replication_read"))
            .collect();
        ServerRow {
            replication: Replication {
                // Not `sum()`: a float sum of nothing is -0.0, printed "-0.000".
                reads_per_sec: classes.iter().fold(0.0, |sum, c| sum + c.ops_per_sec),
                avg_latency_ms: mean(&classes.iter().map(|c| c.avg_latency_ms).collect::<Vec<_>>()),
            },
        }
    }
}

impl Replication {
    /// Across servers: rates summed, latencies the average of the servers'.
    fn across(rows: &[ServerRow]) -> Replication {
        Replication {
            reads_per_sec: rows.iter().map(|r| r.replication.reads_per_sec).sum(),
            avg_latency_ms: mean(
                &rows
                    .iter()
                    .map(|r| r.replication.avg_latency_ms)
                    .collect::<Vec<_>>(),
            ),
        }
    }
}

/// A host's summary for the requirements' verdicts.
fn host_summary(h: &AggregateHost) -> HostSummary {
    HostSummary {
        name: h.name.clone(),
        pass: h.verdict == Verdict::Pass,
        checksum: checksum_clean(h),
        fewest_logs: None,
        achieved_iops: h.achieved_iops,
    }
}

/// ESRP's per-server metrics table (its "Individual Server Metrics"), with the target and the
/// achieved transactional IOPS first and, with copies > 1, the log replication reads.
fn metrics_table(
    m: &mut String,
    e: &EsrpMetrics,
    target: Option<f64>,
    achieved: Option<f64>,
    replication: Option<Replication>,
) {
    let _ = writeln!(
        m,
        "| Transactional I/O | |\n|---|---:|\n| Target Transactional IOPS | {} |\n| Achieved Transactional IOPS | {} |",
        target.map_or("-".into(), |t| format!("{t:.3}")),
        achieved.map_or("-".into(), |a| format!("{a:.3}"))
    );
    let _ = writeln!(
        m,
        "| Database I/O | |\n| Database Disks Transfers/sec | {:.3} |\n| Database Disks Reads/sec | {:.3} |\n| Database Disks Writes/sec | {:.3} |\n| Average Database Disk Read Latency (ms) | {:.3} |\n| Average Database Disk Write Latency (ms) | {:.3} |\n| Transaction Log I/O | |\n| Log Disks Writes/sec | {:.3} |\n| Average Log Disk Write Latency (ms) | {:.3} |",
        e.database_transfers_per_sec,
        e.database_reads_per_sec,
        e.database_writes_per_sec,
        e.database_read_avg_latency_ms,
        e.database_write_avg_latency_ms,
        e.log_writes_per_sec,
        e.log_write_avg_latency_ms
    );
    if let Some(r) = replication {
        let _ = writeln!(
            m,
            "| Log Replication Reads/sec | {:.3} |\n| Average Log Replication Read Latency (ms) | {:.3} |",
            r.reads_per_sec, r.avg_latency_ms
        );
    }
}

/// The document as Markdown (the dialect `report.md` uses, so [`crate::html::markdown_to_html`]
/// renders it): the requirements judged first, then each section in the order ESRP prints
/// them, each written by a step of its own.
pub fn document(inputs: &Inputs<'_>) -> Document {
    let judged = Judged::of(inputs);
    let mut m = String::new();
    first_page(&mut m, inputs, &judged);
    solution_sections(&mut m, inputs, &judged.version, judged.mailboxes.as_deref());
    configuration_sections(&mut m, inputs);
    test_result_summary(&mut m, inputs.plan.is_some(), &judged);
    reliability(&mut m, inputs);
    performance_results(&mut m, inputs, &judged.mismatches, judged.target);
    backup_and_recovery(&mut m, inputs);
    conclusion(&mut m, inputs, judged.complete);
    Document {
        markdown: m,
        complete: judged.complete,
        requirements: judged.requirements,
    }
}

/// What the sections share, worked out once from the inputs before any is written.
struct Judged {
    /// The plan's target IOPS per server.
    target: Option<f64>,
    /// Where the results do not match the plan ([`plan_mismatches`]); none without a plan.
    mismatches: Vec<String>,
    /// The results that ran as a rehearsal ([`rehearsals`]).
    rehearsals: Vec<String>,
    /// Every requirement, [`REHEARSAL_REQUIREMENT`] last.
    requirements: Vec<Requirement>,
    /// Every requirement is met.
    complete: bool,
    /// The Exchange version: the solution's, else the plan's, else "(version not given)".
    version: String,
    /// The plan's mailboxes in total, printed.
    mailboxes: Option<String>,
}

impl Judged {
    /// The requirements judged against the results and the plan, the rehearsals found, and
    /// the version and mailboxes the title and the overview name.
    fn of(inputs: &Inputs<'_>) -> Judged {
        let s = inputs.solution;
        let plan = inputs.plan;
        let p = |key: &str| plan.and_then(|v| v.get(key));
        let pi = |key: &str| plan.and_then(|v| v.get("inputs")).and_then(|v| v.get(key));
        let all_hosts: Vec<String> = inputs.hosts.to_vec();
        let expected = pi("servers").and_then(|v| v.as_u64());
        let summaries: Vec<Summary> = inputs.sets.iter().map(Summary::of).collect();
        let target = p("target_iops_per_server").and_then(|v| v.as_f64());
        let mismatches = plan.map_or(Vec::new(), |p| plan_mismatches(p, inputs.shapes));
        let mut requirements = requirements(
            &summaries,
            &all_hosts,
            expected,
            &s.servers,
            target,
            plan.is_some(),
            &mismatches,
        );
        let rehearsals = rehearsals(inputs.shapes);
        requirements.push(Requirement {
            name: REHEARSAL_REQUIREMENT.into(),
            required: "no result ran as a rehearsal (the job's `run.rehearsal`)".into(),
            found: if rehearsals.is_empty() {
                "no result is a rehearsal".into()
            } else {
                format!("rehearsal results: {}", rehearsals.join(", "))
            },
            met: rehearsals.is_empty(),
        });
        let complete = requirements.iter().all(|r| r.met);
        let version = s
            .exchange_version
            .clone()
            .or_else(|| {
                p("exchange_version")
                    .and_then(|v| v.as_str())
                    .map(String::from)
            })
            .unwrap_or_else(|| "(version not given)".into());
        let mailboxes = pi("mailboxes").map(|v| whole(Some(v)));
        Judged {
            target,
            mismatches,
            rehearsals,
            requirements,
            complete,
            version,
            mailboxes,
        }
    }
}

/// The document's title: the solution's own, else vendor, product, Exchange version and
/// mailboxes (saying what is missing when vendor and product are not given).
fn title(s: &Solution, version: &str, mailboxes: Option<&str>) -> String {
    s.title.clone().unwrap_or_else(|| {
        let scale = mailboxes
            .map(|n| format!(" for {n} mailboxes"))
            .unwrap_or_default();
        // Vendor and product are added to the solution file by hand: a document made before
        // that says what is missing rather than printing an empty name.
        let who = [s.vendor.trim(), s.product.trim()]
            .into_iter()
            .filter(|w| !w.is_empty())
            .collect::<Vec<_>>()
            .join(" ");
        if who.is_empty() {
            format!(
                "Exchange {version} storage solution{scale} (vendor and product not given: `vendor` and `product` in the solution file)"
            )
        } else {
            format!("{who}: Exchange {version} storage solution{scale}")
        }
    })
}

/// The first page: the title, the rehearsal's mark, whether the set is complete (naming every
/// requirement not met), the plan's mismatches, and what made the document.
fn first_page(m: &mut String, inputs: &Inputs<'_>, judged: &Judged) {
    let rehearsals = &judged.rehearsals;
    let title = title(
        inputs.solution,
        &judged.version,
        judged.mailboxes.as_deref(),
    );
    let _ = writeln!(
        m,
        "# {}{}",
        cell(&title),
        if rehearsals.is_empty() {
            ""
        } else {
            " (REHEARSAL)"
        }
    );
    if !rehearsals.is_empty() {
        let _ = writeln!(
            m,
            "\n{REHEARSAL_MARK} These results are a dry run of the solution at its reduced scale (the solution's `rehearsal`: shorter tests, fewer log files), not an ESRP test: {}.",
            cell(&rehearsals.join(", "))
        );
    }
    if judged.complete {
        let _ = writeln!(
            m,
            "\n**Complete ESRP test set**: every requirement in \"ESRP requirements\" below is met by the results."
        );
    } else {
        let unmet: Vec<String> = judged
            .requirements
            .iter()
            .filter(|r| !r.met)
            .map(|r| format!("{} ({})", r.name, r.found))
            .collect();
        let _ = writeln!(
            m,
            "\n**NOT A COMPLETE ESRP TEST SET.** These results do not meet: {}. The figures below are what was measured; they are not an ESRP result.",
            cell(&unmet.join("; "))
        );
    }
    if !judged.mismatches.is_empty() {
        let _ = writeln!(
            m,
            "\n**DOES NOT MATCH THE PLAN.** {}. No server is judged against the plan's target.",
            cell(&judged.mismatches.join("; "))
        );
    }
    let _ = writeln!(
        m,
        "\nMade by jetproof {} from {} server(s)' results. jetproof is not Microsoft Jetstress, and this document is not a Microsoft ESRP submission.",
        crate::tool_version(),
        inputs.hosts.len()
    );
}

/// The tested deployment, the data reduction, the solution file's storage hardware, software,
/// disk and replication tables, and its best practices.
fn configuration_sections(m: &mut String, inputs: &Inputs<'_>) {
    let s = inputs.solution;
    tested_deployment(m, inputs);
    data_reduction_section(m, inputs.reductions);
    pairs(m, "Primary Storage Hardware", &s.storage_hardware);
    pairs(m, "Primary Storage Software", &s.storage_software);
    pairs(
        m,
        "Primary Storage Disk Configuration (Mailbox Store Disks)",
        &s.database_disks,
    );
    pairs(
        m,
        "Primary Storage Disk Configuration (Transaction Log Disks)",
        &s.log_disks,
    );
    pairs(m, "Replication Configuration", &s.replication);

    let _ = writeln!(m, "\n## Best Practices");
    text_block(
        m,
        s.best_practices.as_deref(),
        "The solution file gives no best practices.",
    );
}

/// The test result summary's opening: every requirement, met or not, and with a plan
/// (`has_plan`) whether the results were run as planned, naming each mismatch.
fn test_result_summary(m: &mut String, has_plan: bool, judged: &Judged) {
    let _ = writeln!(m, "\n## Test Result Summary");
    let _ = writeln!(
        m,
        "\n### ESRP requirements\n\n| Requirement | Required | Found | Met |\n|---|---|---|---|"
    );
    for r in &judged.requirements {
        let _ = writeln!(
            m,
            "| {} | {} | {} | {} |",
            cell(&r.name),
            cell(&r.required),
            cell(&r.found),
            if r.met { "yes" } else { "NO" }
        );
    }
    if has_plan {
        let _ = writeln!(m, "\n### Results against the plan\n");
        if judged.mismatches.is_empty() {
            let _ = writeln!(
                m,
                "Every result was run as planned: mailboxes per server, databases per host, database size, copies and page size."
            );
        } else {
            let _ = writeln!(
                m,
                "The results do not match the plan, so the document does not judge them against it:\n"
            );
            for line in &judged.mismatches {
                let _ = writeln!(m, "- {}", cell(line));
            }
        }
    }
}

/// The overview, the disclaimer, the solution's description and the customer profile.
fn solution_sections(m: &mut String, inputs: &Inputs<'_>, version: &str, mailboxes: Option<&str>) {
    let s = inputs.solution;
    let plan = inputs.plan;
    let p = |key: &str| plan.and_then(|v| v.get(key));
    let pi = |key: &str| plan.and_then(|v| v.get("inputs")).and_then(|v| v.get(key));
    let _ = writeln!(m, "\n## Overview");
    text_block(
        m,
        s.overview.as_deref(),
        &format!(
            "This document describes a storage solution of {} {} for Exchange {version}, tested with jetproof's performance, stress, backup and soft recovery tests on every server at once.",
            s.vendor, s.product
        ),
    );
    let _ = writeln!(m, "\n## Disclaimer");
    text_block(
        m,
        None,
        "The results are those of the runs listed in the appendix, on the hardware and software described here. They are not a guarantee of any other deployment's performance. Storage is not the only factor of an Exchange deployment's scalability: processor, memory, network and client behaviour are outside these tests.",
    );
    if !s.features.is_empty() {
        let _ = writeln!(m, "\n## Features\n");
        for feature in &s.features {
            let _ = writeln!(m, "- {}", cell(feature));
        }
    }
    let _ = writeln!(m, "\n## Solution Description");
    text_block(m, s.description.as_deref(), "");
    if let Some(t) = &s.lun_layout {
        let _ = writeln!(m, "\n### Storage layout\n");
        let _ = writeln!(
            m,
            "| {} |\n|{}",
            t.columns
                .iter()
                .map(|c| cell(c))
                .collect::<Vec<_>>()
                .join(" | "),
            "---|".repeat(t.columns.len().max(1))
        );
        for row in &t.rows {
            let _ = writeln!(
                m,
                "| {} |",
                row.iter().map(|c| cell(c)).collect::<Vec<_>>().join(" | ")
            );
        }
    }

    let _ = writeln!(m, "\n## Targeted Customer Profile\n");
    if plan.is_some() {
        let _ = writeln!(
            m,
            "- {} mailboxes on {} server(s)\n- {} IOPS per mailbox\n- {} mailbox size\n- {} copies of each database",
            mailboxes.unwrap_or_default(),
            whole(pi("servers")),
            headroom_text(
                p("iops_per_mailbox_base"),
                pi("headroom_percent"),
                p("iops_per_mailbox")
            ),
            bytes_gib(p("mailbox_quota_bytes")),
            whole(pi("copies_per_database"))
        );
    }
    text_block(m, s.customer_profile.as_deref(), "");
}

/// The tested deployment: the simulated Exchange configuration from the plan.
fn tested_deployment(m: &mut String, inputs: &Inputs<'_>) {
    let plan = inputs.plan;
    let p = |key: &str| plan.and_then(|v| v.get(key));
    let pi = |key: &str| plan.and_then(|v| v.get("inputs")).and_then(|v| v.get(key));
    let _ = writeln!(m, "\n## Tested Deployment");
    let _ = writeln!(m, "\n### Simulated Exchange Configuration\n");
    if plan.is_some() {
        let servers = number(pi("servers"));
        let dbs = number(pi("databases_per_server"));
        let total_test = number(p("test_database_size_bytes")) * servers * dbs;
        let rows: Vec<(&str, String)> = vec![
            (
                "Number of Exchange mailboxes simulated",
                whole(pi("mailboxes")),
            ),
            ("Number of servers", whole(pi("servers"))),
            (
                "Number of active mailboxes per server",
                whole(p("mailboxes_per_server")),
            ),
            (
                "Number of databases per host",
                whole(pi("databases_per_server")),
            ),
            (
                "Number of copies per database",
                whole(pi("copies_per_database")),
            ),
            (
                "Number of mailboxes per database",
                whole(p("mailboxes_per_database")),
            ),
            (
                "Simulated profile: I/Os per second per mailbox (IOPS, include headroom)",
                headroom_text(
                    p("iops_per_mailbox_base"),
                    pi("headroom_percent"),
                    p("iops_per_mailbox"),
                ),
            ),
            (
                "Target transactional IOPS per server",
                whole(p("target_iops_per_server")),
            ),
            (
                "Target transactional IOPS in total",
                whole(p("target_iops_total")),
            ),
            ("Database LU size", bytes_gib(p("database_volume_bytes"))),
            ("Log LU size", bytes_gib(p("log_volume_bytes"))),
            (
                "Total database size for performance testing",
                bytes_gib(Some(&serde_json::json!(total_test))),
            ),
            ("Disks needed for IOPS", whole(p("disks_needed_for_iops"))),
            (
                "Disks needed for capacity",
                whole(p("disks_needed_for_capacity")),
            ),
        ];
        let _ = writeln!(m, "| | |\n|---|---:|");
        for (label, value) in rows {
            let _ = writeln!(m, "| {label} | {value} |");
        }
    } else {
        let _ = writeln!(
            m,
            "No plan was given (`plan` or `plan_json` in the solution file): the simulated configuration is not stated."
        );
    }
}

/// Reliability: the stress test, per server.
fn reliability(m: &mut String, inputs: &Inputs<'_>) {
    let set = |test: TestKind| inputs.sets.iter().find(|x| x.test == test);
    let _ = writeln!(m, "\n### Reliability\n");
    match set(TestKind::Stress).filter(|x| !x.per_host.is_empty()) {
        Some(x) => {
            let failing: Vec<&str> = x
                .per_host
                .iter()
                .filter(|h| h.verdict == Verdict::Fail)
                .map(|h| h.name.as_str())
                .collect();
            let ran = match (&x.aggregate, x.apart.as_deref().or(x.error.as_deref())) {
                (Some(a), _) => format!(
                    "The stress test ran for {} on {} server(s) at once.",
                    hours(a.window.seconds),
                    a.hosts.len()
                ),
                (None, e) => format!(
                    "The stress test ran on {} server(s), not combined ({}).",
                    x.per_host.len(),
                    cell(e.unwrap_or(""))
                ),
            };
            let _ = writeln!(
                m,
                "{ran} {}",
                if failing.is_empty() {
                    "Every server passed: no latency threshold was exceeded and no I/O error occurred.".to_string()
                } else {
                    format!("These servers failed it: {}.", failing.join(", "))
                }
            );
            let _ = writeln!(
                m,
                "\n| Server | Stress verdict | Pages verified after the test | Bad pages | Wrong page-number pages |\n|---|---|---:|---:|---:|"
            );
            for h in &x.per_host {
                let c = h.totals.workload().and_then(|w| w.checksum.as_ref());
                let _ = writeln!(
                    m,
                    "| {} | {} | {} | {} | {} |",
                    cell(&h.name),
                    match h.verdict {
                        Verdict::Pass => "pass",
                        Verdict::Fail => "**fail**",
                    },
                    c.map_or("no checksum pass".into(), |c| c.pages_seen.to_string()),
                    c.map_or("-".into(), |c| c.pages_bad.to_string()),
                    c.map_or("-".into(), |c| c.pages_wrong_number.to_string())
                );
            }
        }
        None => {
            let _ = writeln!(m, "No stress test results: reliability is not shown.");
        }
    }
}

/// Storage performance results: per server and all together, judged by the target each server is judged by.
fn performance_results(
    m: &mut String,
    inputs: &Inputs<'_>,
    mismatches: &[String],
    target: Option<f64>,
) {
    let set = |test: TestKind| inputs.sets.iter().find(|x| x.test == test);
    let plan = inputs.plan;
    let p = |key: &str| plan.and_then(|v| v.get(key));
    // The target each server is judged by: the plan's when the results match it; no plan: the
    // run's own. Results that do not match the plan are not judged against it at all.
    let judged_target = |h: &AggregateHost| -> Option<f64> {
        match plan {
            Some(_) => target,
            None => h.target_iops,
        }
    };
    let _ = writeln!(m, "\n### Storage Performance Results");
    let performance = set(TestKind::Performance);
    let replication = performance.is_some_and(|x| {
        x.per_host.iter().any(|h| {
            h.instances
                .iter()
                .any(|i| i.io.contains_key("replication_read"))
        })
    });
    match performance.filter(|x| !x.per_host.is_empty()) {
        Some(x) => {
            match &x.aggregate {
                Some(a) => {
                    let _ = writeln!(
                        m,
                        "\nThe performance test ran for {} on {} server(s) at once; each server's figures are the sum of I/Os across its databases and the average latency across them, as ESRP prints them.",
                        hours(a.window.seconds),
                        a.hosts.len()
                    );
                }
                None => {
                    let _ = writeln!(
                        m,
                        "\nThe servers' results could not be combined ({}): each server's own figures follow, and there is no aggregate.",
                        cell(x.apart.as_deref().or(x.error.as_deref()).unwrap_or(""))
                    );
                }
            }
            let mut rows = Vec::new();
            for h in &x.per_host {
                let summary = host_summary(h);
                let target = judged_target(h);
                let judged = if mismatches.is_empty() {
                    format!(
                        "{}{}",
                        target.map_or("no target".into(), |t| format!("target {t} IOPS")),
                        if plan.is_some() {
                            " (the plan's)"
                        } else {
                            " (the run's)"
                        }
                    )
                } else {
                    "not judged: the results do not match the plan".into()
                };
                let verdict = if mismatches.is_empty() {
                    format!(", {}", verdict_word(server_passes(&summary, target)))
                } else {
                    String::new()
                };
                let _ = writeln!(
                    m,
                    "\n### Individual Server Metrics: {} ({judged}, achieved {:.3}{verdict})\n",
                    cell(&h.name),
                    h.achieved_iops.unwrap_or(0.0),
                );
                let row = ServerRow::of(h);
                metrics_table(
                    m,
                    &h.server,
                    target,
                    h.achieved_iops,
                    replication.then_some(row.replication),
                );
                rows.push(row);
            }
            let _ = writeln!(m, "\n### Aggregate Performance Across All Servers\n");
            match &x.aggregate {
                Some(a) => {
                    let total_target = match plan {
                        Some(_) => p("target_iops_total").and_then(|v| v.as_f64()),
                        None => a.target_iops,
                    };
                    let achieved = a.achieved_iops.unwrap_or(0.0);
                    let verdict = match total_target {
                        Some(t) if mismatches.is_empty() => format!(
                            "target {t} IOPS{}, achieved {achieved:.3} (the servers' sum): {}",
                            if plan.is_some() {
                                " (the plan's, all servers)"
                            } else {
                                " (the runs' sum)"
                            },
                            if achieved >= t {
                                "at or above the target"
                            } else {
                                "BELOW THE TARGET"
                            }
                        ),
                        Some(_) => format!(
                            "achieved {achieved:.3} (the servers' sum); not judged: the results do not match the plan"
                        ),
                        None => format!("achieved {achieved:.3} (the servers' sum), no target"),
                    };
                    let _ = writeln!(m, "{verdict}.\n");
                    let replicated = Replication::across(&rows);
                    metrics_table(
                        m,
                        &a.esrp,
                        total_target.filter(|_| mismatches.is_empty()),
                        a.achieved_iops,
                        replication.then_some(replicated),
                    );
                    let _ = writeln!(
                        m,
                        "\nRates are sums over the servers; latencies the average of the servers' averages, as ESRP prints them (`docs/many-servers.md`)."
                    );
                    for flag in &a.below_median {
                        let _ = writeln!(m, "\nBelow the other servers: {}", cell(flag));
                    }
                }
                None => {
                    let _ = writeln!(
                        m,
                        "Not combined: {}.",
                        cell(x.apart.as_deref().or(x.error.as_deref()).unwrap_or(""))
                    );
                }
            }
        }
        None => {
            let _ = writeln!(m, "\nNo performance test results.");
        }
    }
}

/// Database backup and soft recovery, per server and all together.
fn backup_and_recovery(m: &mut String, inputs: &Inputs<'_>) {
    let set = |test: TestKind| inputs.sets.iter().find(|x| x.test == test);
    let _ = writeln!(m, "\n### Database Backup and Recovery Performance");
    match set(TestKind::Backup).filter(|x| !x.per_host.is_empty()) {
        Some(x) => {
            let _ = writeln!(
                m,
                "\nDatabase Read-only Performance: every database read whole in 256 KiB reads, all at once. Each database's MB read per second is listed; a server's figure is their sum, and all servers' the sum of the servers' (per database × databases = per server).\n"
            );
            aggregate::backup_table(m, &x.per_host);
            if let Some(e) = x.apart.as_deref().or(x.error.as_deref()) {
                let _ = writeln!(m, "\nNot combined: {}.", cell(e));
            }
        }
        None => {
            let _ = writeln!(m, "\nNo backup test results.");
        }
    }
    match set(TestKind::Recovery).filter(|x| !x.per_host.is_empty()) {
        Some(x) => {
            let _ = writeln!(
                m,
                "\nTransaction Log Recovery/Replay Performance: the logs of every instance replayed at once. Logs generated are what the test itself wrote (ESRP's 500 per instance counts these); logs replayed also hold what was there before it (the generation open at attach, any an earlier test left past its checkpoint).\n\n| Server | Logs generated | Logs replayed | Average time to play one log file (sec) |\n|---|---:|---:|---:|"
            );
            let (mut all, mut logs, mut generated_all) = (Vec::new(), 0.0, 0.0);
            for h in &x.per_host {
                let per: Vec<f64> = h
                    .instance_figures
                    .values()
                    .filter_map(|f| f.seconds_per_log)
                    .collect();
                let replayed = h.totals.recovery().map_or(0.0, |t| t.logs_replayed as f64);
                let generated: f64 = h
                    .instance_figures
                    .values()
                    .map(|f| f.logs_generated.unwrap_or(0) as f64)
                    .sum();
                logs += replayed;
                generated_all += generated;
                let _ = writeln!(
                    m,
                    "| {} | {generated:.0} | {replayed:.0} | {:.3} |",
                    cell(&h.name),
                    mean(&per)
                );
                all.extend(per);
            }
            let _ = writeln!(
                m,
                "| **All servers** | {generated_all:.0} | {logs:.0} | {:.3} |",
                mean(&all)
            );
            if let Some(e) = x.apart.as_deref().or(x.error.as_deref()) {
                let _ = writeln!(m, "\nNot combined: {}.", cell(e));
            }
        }
        None => {
            let _ = writeln!(m, "\nNo soft recovery test results.");
        }
    }
    for x in inputs.sets {
        if let Some(e) = x.apart.as_ref().or(x.error.as_ref()) {
            let _ = writeln!(
                m,
                "\nThe {} results could not be combined: {}",
                x.test.name(),
                cell(e)
            );
        }
    }
}

/// The conclusion, the notes and the results each server's figures come from.
fn conclusion(m: &mut String, inputs: &Inputs<'_>, complete: bool) {
    let s = inputs.solution;
    let _ = writeln!(m, "\n## Conclusion");
    let conclusion = if complete {
        "The runs form a complete ESRP test set and every server passed every test.".to_string()
    } else {
        "The runs do not form a complete ESRP test set (see \"ESRP requirements\"): the figures above show what was measured and must not be read as an ESRP result.".to_string()
    };
    text_block(m, s.conclusion.as_deref(), &conclusion);
    if s.conclusion.is_some() {
        let _ = writeln!(m, "\n{conclusion}");
    }
    if !inputs.notes.is_empty() {
        let _ = writeln!(m, "\nNotes:\n");
        for note in inputs.notes {
            let _ = writeln!(m, "- {}", cell(note));
        }
    }

    let _ = writeln!(
        m,
        "\n## Appendix: test reports\n\nEvery server's report of every test, as `report.md` in its results directory."
    );
    for host in inputs.hosts {
        for x in inputs.sets {
            let Some(path) = x.files.get(host) else {
                continue;
            };
            let _ = writeln!(
                m,
                "\n## Appendix: {} — {} ({})",
                cell(host),
                x.test.name(),
                path.display()
            );
            let report = path.with_file_name("report.md");
            match jetproof_io::input::read_text(&report, crate::MAX_RESULT_JSON_BYTES) {
                Ok(text) => {
                    for line in text.lines() {
                        // Headings of the host's report sit under the appendix's.
                        let line = match line.trim_start().strip_prefix('#') {
                            Some(rest) => format!("### {}", rest.trim_start_matches('#').trim()),
                            None => line.to_string(),
                        };
                        let _ = writeln!(m, "{line}");
                    }
                }
                Err(e) => {
                    let _ = writeln!(m, "\n{}: {e}", report.display());
                }
            }
        }
    }
}

fn mean(values: &[f64]) -> f64 {
    crate::aggregate::mean(values.iter().copied())
}

/// The document as one self-contained page (no script, no request), as `report.html`.
pub fn html(document: &Document, title: &str) -> String {
    let banner = if document.complete {
        "<p class=\"verdict pass\" id=\"esrp-mark\">Complete ESRP test set</p>\n".to_string()
    } else {
        "<p class=\"verdict fail\" id=\"esrp-mark\">Not a complete ESRP test set</p>\n".to_string()
    };
    crate::html::page(
        title,
        &format!(
            "{banner}{}",
            crate::html::markdown_to_html(&document.markdown)
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(test: TestKind, seconds: f64, hosts: &[&str]) -> Summary {
        Summary {
            test,
            hosts: hosts.iter().map(|h| h.to_string()).collect(),
            window_seconds: Some(seconds),
            error: None,
            per_host: hosts
                .iter()
                .map(|h| HostSummary {
                    name: h.to_string(),
                    pass: true,
                    checksum: matches!(test, TestKind::Performance | TestKind::Stress)
                        .then_some(true),
                    fewest_logs: (test == TestKind::Recovery).then_some(500.0),
                    achieved_iops: Some(500.0),
                })
                .collect(),
        }
    }

    fn complete(hosts: &[&str]) -> Vec<Summary> {
        vec![
            summary(TestKind::Performance, 7200.0, hosts),
            summary(TestKind::Stress, 86_400.0, hosts),
            summary(TestKind::Backup, 300.0, hosts),
            summary(TestKind::Recovery, 60.0, hosts),
        ]
    }

    fn unmet(sets: &[Summary], hosts: &[&str], expected: Option<u64>) -> Vec<String> {
        let all: Vec<String> = hosts.iter().map(|h| h.to_string()).collect();
        requirements(sets, &all, expected, &[], Some(459.0), true, &[])
            .into_iter()
            .filter(|r| !r.met)
            .map(|r| format!("{}: {}", r.name, r.found))
            .collect()
    }

    #[test]
    fn a_complete_set_meets_every_requirement() {
        let hosts = ["a", "b"];
        assert_eq!(
            unmet(&complete(&hosts), &hosts, Some(2)),
            Vec::<String>::new()
        );
        // 59 s short of 24 h is within the tolerance for hosts started together.
        let mut sets = complete(&hosts);
        sets[1].window_seconds = Some(86_400.0 - 59.0);
        assert!(unmet(&sets, &hosts, Some(2)).is_empty());
    }

    #[test]
    fn each_missing_requirement_is_named_alone() {
        let hosts = ["a", "b"];
        type Breaker = fn(&mut Vec<Summary>);
        let cases: [(&str, Breaker); 9] = [
            ("target IOPS on every server: a 400.000 (FAIL)", |s| {
                s[0].per_host[0].achieved_iops = Some(400.0)
            }),
            ("Stress test duration: 10.0 s", |s| {
                s[1].window_seconds = Some(10.0)
            }),
            ("Performance test duration: 1.00 h", |s| {
                s[0].window_seconds = Some(3600.0)
            }),
            ("every server: backup missing on b", |s| {
                s[2].hosts.retain(|h| h != "b");
                s[2].per_host.retain(|h| h.name != "b");
            }),
            ("every server: no backup test", |s| {
                s[2].hosts.clear();
                s[2].per_host.clear();
            }),
            (
                "Checksum after the stress test: no checksum pass on a",
                |s| s[1].per_host[0].checksum = None,
            ),
            (
                "Checksum after the performance test: damage found on b",
                |s| s[0].per_host[1].checksum = Some(false),
            ),
            ("Soft recovery: 32 log files", |s| {
                s[3].per_host[1].fewest_logs = Some(32.0)
            }),
            ("passes every test: b failed stress", |s| {
                s[1].per_host[1].pass = false
            }),
        ];
        for (expect, breaker) in cases {
            let mut sets = complete(&hosts);
            breaker(&mut sets);
            let found = unmet(&sets, &hosts, Some(2));
            let words: Vec<&str> = expect.split(": ").collect();
            let hit = found.iter().any(|f| {
                f.to_lowercase().contains(&words[0].to_lowercase()) && f.contains(words[1])
            });
            // Removing a test's results also leaves its durations and checksums unmet, which
            // is right: only the named requirement must be among them, and nothing else for
            // the single-figure breakers.
            assert!(hit, "{expect}: {found:?}");
            if expect.starts_with("target IOPS") {
                // One verdict per server: below the plan's target fails the server, so it
                // fails "every server passes" too, and nothing else.
                assert_eq!(found.len(), 2, "{expect}: {found:?}");
                assert!(
                    found[1].contains("a failed performance"),
                    "{expect}: {found:?}"
                );
            } else if !expect.starts_with("every server") {
                assert_eq!(found.len(), 1, "{expect}: {found:?}");
            }
        }
        // Fewer servers than the plan has.
        let found = unmet(&complete(&hosts), &hosts, Some(16));
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(
            found[0].contains("2 server(s) tested, the plan has 16"),
            "{found:?}"
        );
    }

    #[test]
    fn results_unlike_the_plan_are_named_and_not_judged() {
        let plan = serde_json::json!({
            "inputs": {"databases_per_server": 20, "copies_per_database": 2, "page_size": "32KiB"},
            "mailboxes_per_server": 20000,
            "test_database_size_bytes": 8u64 << 20,
        });
        let shape = |host: &str, mailboxes: u64, databases: usize| HostShape {
            host: host.into(),
            test: TestKind::Performance,
            mailboxes: Some(mailboxes),
            databases,
            db_size_bytes: Some(8 << 20),
            copies: Some(2),
            page_size_bytes: Some(32768),
            rehearsal: false,
        };
        assert!(plan_mismatches(&plan, &[shape("a", 20000, 20)]).is_empty());
        let found = plan_mismatches(&plan, &[shape("a", 1000, 4), shape("b", 1000, 20)]);
        assert_eq!(
            found,
            vec![
                "mailboxes per server: the plan has 20000, the results 1000 (a performance, b performance; the job's `simulation.mailboxes`)".to_string(),
                "databases per host: the plan has 20, the results 4 (a performance; the job's `storage.databases`)".to_string(),
            ]
        );
        let hosts = ["a", "b"];
        let all: Vec<String> = hosts.iter().map(|h| h.to_string()).collect();
        let reqs = requirements(
            &complete(&hosts),
            &all,
            Some(2),
            &[],
            Some(459.0),
            true,
            &found,
        );
        let unmet: Vec<&Requirement> = reqs.iter().filter(|r| !r.met).collect();
        assert_eq!(unmet.len(), 2, "{unmet:?}");
        assert!(unmet[0].found.starts_with("not judged"), "{unmet:?}");
        assert!(
            unmet[1].found.starts_with("does not match the plan"),
            "{unmet:?}"
        );
        assert_eq!(parse_size("1.5GB"), Some(1_500_000_000));
        assert_eq!(parse_size("8MiB"), Some(8 << 20));
    }
}
