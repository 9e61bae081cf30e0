//! `jetproof aggregate`: one solution's results from many hosts (`docs/many-servers.md`).
//!
//! Input: one `result.json` per host, of the same test, schema version and histogram layout,
//! whose measured windows overlap. [`aggregate_files`] merges them as it reads them
//! ([`Aggregator`]): memory holds one parsed result per reading thread and each host's small
//! summary, not every host's histograms. Output: an [`AggregateResult`] (written as the aggregate's
//! `result.json`) and its Markdown report ([`markdown`]), with the reference reports' tables.
//!
//! Two kinds of "average" live here, on purpose, side by side:
//! * the **exact** figures: every class's histograms of every instance of every host merged
//!   bucket by bucket (`jetproof_io::hist`: the merge is the histogram of the union), so the
//!   aggregate's percentiles are those of one histogram of all I/Os, and its averages are
//!   I/O-weighted (exact sum of latencies ÷ exact count);
//! * **ESRP's** figures, which the reference reports print and users compare against: a server's
//!   latency is the plain average of its instances' averages, and "Aggregate Performance Across
//!   All Servers" is the plain average of the servers' averages; rates are sums. They are
//!   labelled "average of server averages" wherever they appear.
//!
//! Refusals (bad input, each naming the file): results of different tests, schema versions or
//! histogram layouts; a class without its histogram (nothing to merge exactly); a host given
//! twice; an aggregate given as a host; windows that do not all overlap.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use jetproof_io::meter::ClassSnapshot;
use serde::{Deserialize, Serialize};

use crate::checksum::ChecksumTotals;
use crate::{
    ClassSummary, HistogramLayout, SCHEMA_VERSION, TestKind, TestResult, Totals, Verdict, clock,
};

/// Why results cannot be aggregated: every case is bad input and names the file.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AggregateError {
    #[error("{}: {message}", path.display())]
    Refused { path: PathBuf, message: String },
}

fn refuse(path: &Path, message: impl Into<String>) -> AggregateError {
    AggregateError::Refused {
        path: path.to_path_buf(),
        message: message.into(),
    }
}

/// One host's result as read.
#[derive(Clone, Debug)]
pub struct HostInput {
    /// The `result.json` it came from.
    pub path: PathBuf,
    pub result: TestResult,
}

/// The `result.json` files named by `dirs`: a directory holding `result.json` is one host; a
/// directory without one stands for its subdirectories that hold one (sorted by name), or,
/// when none does, for the directories two levels down (`RESULTS/HOST/TEST/result.json`, the
/// layout the written job recommends, or the playbook's `RESULTS/TEST/HOST/`); aggregates among
/// them are skipped. A DIR naming none of these is refused. Results of several tests are told
/// apart by [`group_by_test`].
pub fn find_results(dirs: &[PathBuf]) -> Result<Vec<PathBuf>, AggregateError> {
    let mut found = Vec::new();
    for dir in dirs {
        let direct = dir.join("result.json");
        if direct.is_file() {
            found.push(direct);
            continue;
        }
        if !dir.is_dir() {
            return Err(refuse(
                dir,
                "not a results directory; give directories holding result.json (one per host) or their parent",
            ));
        }
        let subdirs = sorted_subdirs(dir)?;
        let mut inside: Vec<PathBuf> = subdirs
            .iter()
            .map(|d| d.join("result.json"))
            .filter(|p| p.is_file() && !is_aggregate_file(p))
            .collect();
        if inside.is_empty() && !subdirs.iter().any(|d| d.join("result.json").is_file()) {
            for sub in &subdirs {
                inside.extend(
                    sorted_subdirs(sub)?
                        .iter()
                        .map(|d| d.join("result.json"))
                        .filter(|p| p.is_file() && !is_aggregate_file(p)),
                );
            }
        }
        if inside.is_empty() {
            return Err(refuse(
                dir,
                "holds no result.json, nor do its subdirectories or theirs; give each host's results directory, or a directory laid out RESULTS/HOST/TEST/",
            ));
        }
        found.extend(inside);
    }
    Ok(found)
}

/// True when `dir` is laid out `RESULTS/HOST/TEST/` (or `RESULTS/TEST/HOST/`): no result.json
/// in it or in its subdirectories, so [`find_results`] looks two levels down, where results of
/// several tests are expected and told apart ([`group_by_test`]).
pub fn two_levels_down(dir: &Path) -> bool {
    dir.is_dir()
        && !dir.join("result.json").is_file()
        && sorted_subdirs(dir)
            .is_ok_and(|subs| !subs.iter().any(|d| d.join("result.json").is_file()))
}

fn sorted_subdirs(dir: &Path) -> Result<Vec<PathBuf>, AggregateError> {
    let entries = std::fs::read_dir(dir)
        .map_err(|e| refuse(dir, format!("cannot list the directory: {e}")))?;
    let mut dirs: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    Ok(dirs)
}

/// The files by the test their results record (in ESRP's order of tests, then any other),
/// each group in the order given. Reads each file's `test` only; a file that is not a result
/// is refused as [`load`] would refuse it.
pub fn group_by_test(paths: &[PathBuf]) -> Result<Vec<(TestKind, Vec<PathBuf>)>, AggregateError> {
    #[derive(Deserialize)]
    struct Peek {
        test: TestKind,
    }
    let mut groups: Vec<(TestKind, Vec<PathBuf>)> = Vec::new();
    for path in paths {
        let file = jetproof_io::input::open_regular(path, crate::MAX_RESULT_JSON_BYTES)
            .map_err(|e| refuse(path, e.to_string()))?;
        let peek: Peek = serde_json::from_reader(std::io::BufReader::new(file))
            .map_err(|e| refuse(path, format!("not a result.json: {e}")))?;
        match groups.iter_mut().find(|(t, _)| *t == peek.test) {
            Some((_, list)) => list.push(path.clone()),
            None => groups.push((peek.test, vec![path.clone()])),
        }
    }
    let order = |t: &TestKind| {
        crate::ESRP_TESTS
            .iter()
            .position(|x| x == t)
            .unwrap_or(crate::ESRP_TESTS.len())
    };
    groups.sort_by_key(|(t, _)| order(t));
    Ok(groups)
}

/// True when the file is an aggregate's own `result.json` (so a parent directory can hold the
/// hosts' results and their aggregate).
fn is_aggregate_file(path: &Path) -> bool {
    use std::io::Read;
    let Ok(file) = jetproof_io::input::open_regular(path, crate::MAX_RESULT_JSON_BYTES) else {
        return false;
    };
    let mut head = Vec::with_capacity(4096);
    file.take(4096).read_to_end(&mut head).is_ok()
        && String::from_utf8_lossy(&head).contains("\"aggregate\": true")
}

/// Reads every file, in parallel (a thousand hosts' results are a few hundred MB of JSON).
pub fn load(paths: &[PathBuf]) -> Result<Vec<HostInput>, AggregateError> {
    let threads = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .clamp(1, 16);
    let chunk = paths.len().div_ceil(threads).max(1);
    let loaded: Vec<Result<HostInput, AggregateError>> = std::thread::scope(|scope| {
        let handles: Vec<_> = paths
            .chunks(chunk)
            .map(|part| scope.spawn(move || part.iter().map(|p| load_one(p)).collect::<Vec<_>>()))
            .collect();
        handles
            .into_iter()
            .flat_map(|h| match h.join() {
                Ok(results) => results,
                Err(panic) => std::panic::resume_unwind(panic),
            })
            .collect()
    });
    loaded.into_iter().collect()
}

fn load_one(path: &Path) -> Result<HostInput, AggregateError> {
    let text = jetproof_io::input::read_bytes(path, crate::MAX_RESULT_JSON_BYTES)
        .map_err(|e| refuse(path, e.to_string()))?;
    let other_version = |version: u32| {
        refuse(
            path,
            format!(
                "schema version {version}, but this jetproof aggregates version {SCHEMA_VERSION}: \
                 results of different schema versions do not combine; rerun the test with one \
                 jetproof version on every host"
            ),
        )
    };
    // One pass in the common case; a document that does not fit is looked at again only to say
    // why (an aggregate, another version, or not a result at all).
    match serde_json::from_slice::<TestResult>(&text) {
        Ok(result) if result.schema_version != SCHEMA_VERSION => {
            Err(other_version(result.schema_version))
        }
        Ok(result) => Ok(HostInput {
            path: path.to_path_buf(),
            result,
        }),
        Err(error) => {
            #[derive(Deserialize)]
            struct Peek {
                schema_version: Option<u32>,
                aggregate: Option<bool>,
            }
            match serde_json::from_slice::<Peek>(&text) {
                Ok(peek) if peek.aggregate == Some(true) => Err(refuse(
                    path,
                    "is an aggregate already; give the hosts' own results directories",
                )),
                Ok(Peek {
                    schema_version: Some(version),
                    ..
                }) if version != SCHEMA_VERSION => Err(other_version(version)),
                Ok(_) => Err(refuse(
                    path,
                    format!("does not fit result.json's schema: {error}"),
                )),
                Err(error) => Err(refuse(path, format!("not JSON: {error}"))),
            }
        }
    }
}

/// ESRP's per-server table ("Individual Server Metrics") and its aggregate ("Aggregate
/// Performance Across All Servers"): rates are sums, latencies plain averages of the parts'
/// averages, as ESRP prints them.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct EsrpMetrics {
    pub database_transfers_per_sec: f64,
    pub database_reads_per_sec: f64,
    pub database_writes_per_sec: f64,
    pub database_read_avg_latency_ms: f64,
    pub database_write_avg_latency_ms: f64,
    pub log_writes_per_sec: f64,
    pub log_write_avg_latency_ms: f64,
}

/// One database instance as ESRP's tables see it: rates and average latencies.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct EsrpInstance {
    pub reads_per_sec: f64,
    pub read_avg_latency_ms: Option<f64>,
    pub writes_per_sec: f64,
    pub write_avg_latency_ms: Option<f64>,
    pub log_writes_per_sec: f64,
    pub log_write_avg_latency_ms: Option<f64>,
}

pub(crate) fn mean(values: impl Iterator<Item = f64>) -> f64 {
    let (sum, count) = values.fold((0.0, 0usize), |(s, n), v| (s + v, n + 1));
    if count == 0 { 0.0 } else { sum / count as f64 }
}

impl EsrpMetrics {
    /// A server's row from its instances: "the sum of I/Os across database and the average
    /// latency across all databases" (instances without a class are left out of its average).
    pub fn server(instances: &[EsrpInstance]) -> EsrpMetrics {
        let reads: f64 = instances.iter().map(|i| i.reads_per_sec).sum();
        let writes: f64 = instances.iter().map(|i| i.writes_per_sec).sum();
        EsrpMetrics {
            database_transfers_per_sec: reads + writes,
            database_reads_per_sec: reads,
            database_writes_per_sec: writes,
            database_read_avg_latency_ms: mean(
                instances.iter().filter_map(|i| i.read_avg_latency_ms),
            ),
            database_write_avg_latency_ms: mean(
                instances.iter().filter_map(|i| i.write_avg_latency_ms),
            ),
            log_writes_per_sec: instances.iter().map(|i| i.log_writes_per_sec).sum(),
            log_write_avg_latency_ms: mean(
                instances.iter().filter_map(|i| i.log_write_avg_latency_ms),
            ),
        }
    }

    /// "Aggregate Performance Across All Servers": "the sum of I/Os across all servers in the
    /// solution and the average latency across all servers in the solution" (the plain average
    /// of the servers' averages).
    pub fn across(servers: &[EsrpMetrics]) -> EsrpMetrics {
        EsrpMetrics {
            database_transfers_per_sec: servers.iter().map(|s| s.database_transfers_per_sec).sum(),
            database_reads_per_sec: servers.iter().map(|s| s.database_reads_per_sec).sum(),
            database_writes_per_sec: servers.iter().map(|s| s.database_writes_per_sec).sum(),
            database_read_avg_latency_ms: mean(
                servers.iter().map(|s| s.database_read_avg_latency_ms),
            ),
            database_write_avg_latency_ms: mean(
                servers.iter().map(|s| s.database_write_avg_latency_ms),
            ),
            log_writes_per_sec: servers.iter().map(|s| s.log_writes_per_sec).sum(),
            log_write_avg_latency_ms: mean(servers.iter().map(|s| s.log_write_avg_latency_ms)),
        }
    }
}

/// The window every host measured in.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SharedWindow {
    /// RFC 3339 UTC with milliseconds: the latest start and the earliest end.
    pub start: String,
    pub end: String,
    pub seconds: f64,
    /// The spread of the hosts' starts: latest − earliest, in milliseconds.
    pub start_spread_ms: f64,
}

/// One instance of one host in the aggregate: its classes' figures (their histograms stay in
/// the host's own `result.json`; the aggregate's `totals` hold the merged ones).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AggregateInstance {
    pub name: String,
    #[serde(flatten)]
    pub io: BTreeMap<String, ClassSummary>,
}

/// One host in the aggregate.
///
/// Its `totals` are typed by the aggregate's test, so it is read only as part of an
/// [`AggregateResult`] (whose `Deserialize` knows the test).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct AggregateHost {
    pub name: String,
    pub result_file: PathBuf,
    pub verdict: Verdict,
    pub reasons: Vec<String>,
    pub target_iops: Option<f64>,
    pub achieved_iops: Option<f64>,
    pub measured_start: String,
    pub measured_end: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requested_start: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_skew_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_at_start: Option<bool>,
    /// The host's job was a rehearsal (`run.rehearsal`): a dry run at reduced scale.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub rehearsal: bool,
    /// ESRP's "Individual Server Metrics" of this host.
    pub server: EsrpMetrics,
    pub instances: Vec<AggregateInstance>,
    /// The host's test-specific totals (backup MB/s, recovery seconds, checksum sums, …): its
    /// `result.json`'s `totals`, as they were.
    #[serde(skip_serializing_if = "Totals::is_none")]
    pub totals: Totals,
    /// Test-specific per-instance figures the report's tables need (backup MB/s per database,
    /// seconds per log), by instance name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub instance_figures: BTreeMap<String, HostInstanceFigures>,
}

impl AggregateHost {
    /// A backup test's MB/s: each database's as printed (two decimals), and the server's as
    /// the sum of those, so that per database × databases = per server on paper, as the
    /// reference reports' tables multiply out. (The host's own `totals.mb_per_sec`, all bytes
    /// over the whole backup's seconds, is lower when databases finish at different times.)
    pub fn backup_mb_per_sec(&self) -> (Vec<f64>, f64) {
        let per_database: Vec<f64> = self
            .instance_figures
            .values()
            .map(|f| round2(f.backup_mb_per_sec.unwrap_or(0.0)))
            .collect();
        let server = round2(per_database.iter().sum());
        (per_database, server)
    }
}

/// `value` as printed with two decimals.
pub fn round2(value: f64) -> f64 {
    (value * 100.0).round() / 100.0
}

/// The backup table of `report.md` and `esrp.md`: each database's MB read per second, their
/// average, and the server's figure as their sum; the solution's as the sum of the servers'.
pub fn backup_table(m: &mut String, hosts: &[AggregateHost]) {
    use std::fmt::Write as _;
    let _ = writeln!(
        m,
        "| Server | Databases | MB read/sec of each database | MB read/sec per database (average) | MB read/sec per server (sum of its databases) |\n|---|---:|---|---:|---:|"
    );
    let (mut databases, mut total) = (0usize, 0.0);
    for h in hosts {
        let (per, server) = h.backup_mb_per_sec();
        total += server;
        databases += per.len();
        let each: Vec<String> = per.iter().map(|v| format!("{v:.2}")).collect();
        let _ = writeln!(
            m,
            "| {} | {} | {} | {:.3} | {server:.2} |",
            h.name.replace('|', "/"),
            per.len(),
            each.join(" + "),
            server / per.len().max(1) as f64
        );
    }
    let total = round2(total);
    let _ = writeln!(
        m,
        "| **All servers** | {databases} | (the servers' sums) | {:.3} | {total:.2} |",
        total / databases.max(1) as f64
    );
}

/// The test-specific figures of one instance of a host that the aggregate's tables need.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct HostInstanceFigures {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backup_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backup_mb_per_sec: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backup_seconds: Option<f64>,
    /// Soft recovery: log files the test itself generated (what counts toward ESRP's 500).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logs_generated: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logs_replayed: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pages_bad: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pages_seen: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seconds: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seconds_per_log: Option<f64>,
}

impl HostInstanceFigures {
    fn is_empty(&self) -> bool {
        *self == HostInstanceFigures::default()
    }
}

/// The aggregate's `result.json`.
///
/// Reading one back types each host's `totals` by `test`, as [`TestResult`]'s `Deserialize` does.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct AggregateResult {
    pub schema_version: u32,
    pub tool_version: String,
    pub test: TestKind,
    pub aggregate: bool,
    /// Fail when any host fails.
    pub verdict: Verdict,
    /// One line per failing host, naming it, with its reasons.
    pub reasons: Vec<String>,
    pub failing_hosts: Vec<String>,
    pub window: SharedWindow,
    pub histogram_layout: Option<HistogramLayout>,
    /// Sums over the hosts (null when no host has one).
    pub target_iops: Option<f64>,
    pub achieved_iops: Option<f64>,
    pub hosts: Vec<AggregateHost>,
    /// Every I/O class over every instance of every host: counts and rates summed, histograms
    /// merged exactly (percentiles of all I/Os), I/O-weighted average latency and size.
    pub totals: BTreeMap<String, ClassSummary>,
    /// ESRP's "Aggregate Performance Across All Servers" (rates summed, latencies the average
    /// of the server averages).
    pub esrp: EsrpMetrics,
    /// For every class: the plain average of the servers' average latencies (each server's the
    /// average of its instances'), what ESRP prints, beside `totals.<class>.avg_latency_ms`.
    pub average_of_server_averages_ms: BTreeMap<String, f64>,
    /// Hosts more than 40 % below the median of the others (IOPS, or backup MB/s), each with
    /// its figure and the median: flagged, not failed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub below_median: Vec<String>,
}

/// `AggregateResult` as read, before its hosts' totals are typed by `test`.
#[derive(Deserialize)]
struct AggregateResultWire {
    schema_version: u32,
    tool_version: String,
    test: TestKind,
    aggregate: bool,
    verdict: Verdict,
    reasons: Vec<String>,
    failing_hosts: Vec<String>,
    window: SharedWindow,
    histogram_layout: Option<HistogramLayout>,
    target_iops: Option<f64>,
    achieved_iops: Option<f64>,
    hosts: Vec<AggregateHostWire>,
    totals: BTreeMap<String, ClassSummary>,
    esrp: EsrpMetrics,
    average_of_server_averages_ms: BTreeMap<String, f64>,
    #[serde(default)]
    below_median: Vec<String>,
}

/// `AggregateHost` as read: its totals not yet typed.
#[derive(Deserialize)]
struct AggregateHostWire {
    name: String,
    result_file: PathBuf,
    verdict: Verdict,
    reasons: Vec<String>,
    target_iops: Option<f64>,
    achieved_iops: Option<f64>,
    measured_start: String,
    measured_end: String,
    #[serde(default)]
    requested_start: Option<String>,
    #[serde(default)]
    start_skew_ms: Option<f64>,
    #[serde(default)]
    ready_at_start: Option<bool>,
    #[serde(default)]
    rehearsal: bool,
    server: EsrpMetrics,
    instances: Vec<AggregateInstance>,
    #[serde(default)]
    totals: serde_json::Map<String, serde_json::Value>,
    #[serde(default)]
    instance_figures: BTreeMap<String, HostInstanceFigures>,
}

impl<'de> Deserialize<'de> for AggregateResult {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        use serde::de::Error as _;
        let wire = AggregateResultWire::deserialize(deserializer)?;
        crate::check_schema_version(wire.schema_version).map_err(D::Error::custom)?;
        let test = wire.test;
        let hosts = wire
            .hosts
            .into_iter()
            .map(|h| {
                let totals = crate::typed_totals(test, h.totals)
                    .map_err(|e| D::Error::custom(format!("host {}: totals: {e}", h.name)))?;
                Ok(AggregateHost {
                    name: h.name,
                    result_file: h.result_file,
                    verdict: h.verdict,
                    reasons: h.reasons,
                    target_iops: h.target_iops,
                    achieved_iops: h.achieved_iops,
                    measured_start: h.measured_start,
                    measured_end: h.measured_end,
                    requested_start: h.requested_start,
                    start_skew_ms: h.start_skew_ms,
                    ready_at_start: h.ready_at_start,
                    rehearsal: h.rehearsal,
                    server: h.server,
                    instances: h.instances,
                    totals,
                    instance_figures: h.instance_figures,
                })
            })
            .collect::<Result<Vec<_>, D::Error>>()?;
        Ok(AggregateResult {
            schema_version: wire.schema_version,
            tool_version: wire.tool_version,
            test,
            aggregate: wire.aggregate,
            verdict: wire.verdict,
            reasons: wire.reasons,
            failing_hosts: wire.failing_hosts,
            window: wire.window,
            histogram_layout: wire.histogram_layout,
            target_iops: wire.target_iops,
            achieved_iops: wire.achieved_iops,
            hosts,
            totals: wire.totals,
            esrp: wire.esrp,
            average_of_server_averages_ms: wire.average_of_server_averages_ms,
            below_median: wire.below_median,
        })
    }
}

fn parse_time(
    input: &HostInput,
    key: &str,
    value: Option<&str>,
) -> Result<SystemTime, AggregateError> {
    let text = value.ok_or_else(|| {
        refuse(
            &input.path,
            format!("has no `{key}`: its measured window is unknown, so it cannot be lined up with the other hosts'"),
        )
    })?;
    clock::parse_time(text).map_err(|e| refuse(&input.path, format!("`{key}`: {e}")))
}

/// The ESRP view of an instance's classes.
fn esrp_instance(io: &BTreeMap<String, ClassSummary>) -> EsrpInstance {
    let rate = |k: &str| io.get(k).map_or(0.0, |c| c.ops_per_sec);
    let latency = |k: &str| io.get(k).map(|c| c.avg_latency_ms);
    EsrpInstance {
        reads_per_sec: rate("db_read"),
        read_avg_latency_ms: latency("db_read"),
        writes_per_sec: rate("db_write"),
        write_avg_latency_ms: latency("db_write"),
        log_writes_per_sec: rate("log_write"),
        log_write_avg_latency_ms: latency("log_write"),
    }
}

/// Per-instance figures the test-specific tables need.
fn instance_figures(result: &TestResult) -> BTreeMap<String, HostInstanceFigures> {
    let mut figures = BTreeMap::new();
    for instance in &result.instances {
        let mut picked = HostInstanceFigures::default();
        if let Some(b) = instance.figures.backup() {
            picked.backup_bytes = Some(b.backup.bytes);
            picked.backup_seconds = Some(b.backup.seconds);
            picked.backup_mb_per_sec = Some(b.backup.mb_per_sec);
        }
        if let Some(recovery) = instance.figures.recovery() {
            picked.logs_generated = recovery.logs_generated;
        }
        if let Some(replay) = instance.figures.recovery().and_then(|r| r.replay.as_ref()) {
            picked.logs_replayed = Some(replay.logs_replayed);
            picked.seconds_per_log = Some(replay.seconds_per_log);
            picked.seconds = Some(replay.seconds);
        }
        if let Some(c) = instance.figures.checksum() {
            picked.pages_seen = Some(c.file.pages_seen);
            picked.pages_bad = Some(c.file.pages_bad);
            picked.seconds = Some(c.file.seconds);
        }
        if !picked.is_empty() {
            figures.insert(instance.name.clone(), picked);
        }
    }
    figures
}

/// Combines the hosts' results, or refuses them (see the module header).
pub fn aggregate(inputs: &[HostInput]) -> Result<AggregateResult, AggregateError> {
    let mut merger = Aggregator::default();
    for input in inputs {
        merger.add(input)?;
    }
    merger.finish()
}

/// One host's summary as an aggregate holds it (its ESRP table, figures, totals), for a host
/// whose results are judged on their own (the document's per-server figures when the hosts'
/// windows do not overlap).
pub fn host_summary(input: &HostInput) -> Result<AggregateHost, AggregateError> {
    let mut merger = Aggregator::default();
    merger.add(input)?;
    merger
        .hosts
        .pop()
        .ok_or_else(|| refuse(&input.path, "no host summary"))
}

/// Reads and combines the files one at a time, so memory holds one parsed result per reading
/// thread and each host's small summary, never every host's histograms: a thousand hosts'
/// results (a few hundred MB of JSON) aggregate in tens of MB. The files are split into
/// contiguous runs, one per thread, each merged on its own and the runs then merged in order,
/// so the outcome is that of reading them one after the other.
pub fn aggregate_files(paths: &[PathBuf]) -> Result<AggregateResult, AggregateError> {
    let threads = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .clamp(1, 16);
    let chunk = paths.len().div_ceil(threads).max(1);
    let parts: Vec<Result<Aggregator, AggregateError>> = std::thread::scope(|scope| {
        let handles: Vec<_> = paths
            .chunks(chunk)
            .map(|part| {
                scope.spawn(move || {
                    let mut merger = Aggregator::default();
                    for path in part {
                        merger.add(&load_one(path)?)?;
                    }
                    Ok(merger)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| match h.join() {
                Ok(result) => result,
                Err(panic) => std::panic::resume_unwind(panic),
            })
            .collect()
    });
    let mut merger = Aggregator::default();
    for part in parts {
        merger.absorb(part?)?;
    }
    merger.finish()
}

/// What every host must share with the first one read.
#[derive(Clone, Debug)]
struct First {
    path: PathBuf,
    schema_version: u32,
    test: TestKind,
    layout: Option<HistogramLayout>,
}

/// The aggregate as it is built, one host at a time ([`Aggregator::add`]); runs built apart
/// join with [`Aggregator::absorb`]. Holds each host's summary (no histograms) and one merged
/// histogram per class.
#[derive(Debug, Default)]
pub struct Aggregator {
    first: Option<First>,
    names: BTreeMap<String, PathBuf>,
    windows: Vec<(SystemTime, SystemTime)>,
    hosts: Vec<AggregateHost>,
    merged: BTreeMap<String, ClassSnapshot>,
    rates: BTreeMap<String, f64>,
    interval_max: BTreeMap<String, f64>,
    server_averages: BTreeMap<String, Vec<f64>>,
    reasons: Vec<String>,
    failing_hosts: Vec<String>,
    target_iops: Option<f64>,
    achieved_iops: Option<f64>,
}

fn add_option(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a + b),
        (a, b) => a.or(b),
    }
}

impl Aggregator {
    /// Checks `path`'s shape (schema, test, layout) against the first host's.
    fn check_first(&mut self, other: &First) -> Result<(), AggregateError> {
        let Some(first) = &self.first else {
            self.first = Some(other.clone());
            return Ok(());
        };
        if other.schema_version != first.schema_version {
            return Err(refuse(
                &other.path,
                format!(
                    "schema version {}, but {} has {}: results of different schema versions do not combine",
                    other.schema_version,
                    first.path.display(),
                    first.schema_version
                ),
            ));
        }
        if other.test != first.test {
            return Err(refuse(
                &other.path,
                format!(
                    "is a {} result, but {} is a {} result: aggregate results of one test",
                    other.test.name(),
                    first.path.display(),
                    first.test.name()
                ),
            ));
        }
        if other.layout != first.layout {
            return Err(refuse(
                &other.path,
                format!(
                    "incompatible histogram layout {:?}, but {} has {:?}: their buckets do not merge exactly",
                    other.layout,
                    first.path.display(),
                    first.layout
                ),
            ));
        }
        Ok(())
    }

    fn check_name(&mut self, name: &str, path: &Path) -> Result<(), AggregateError> {
        if let Some(earlier) = self.names.get(name) {
            return Err(refuse(
                path,
                format!(
                    "host {name} given twice (also {}); give each host once (runs sharing a machine: `--host-name`)",
                    earlier.display()
                ),
            ));
        }
        self.names.insert(name.to_string(), path.to_path_buf());
        Ok(())
    }

    fn merge_class(&mut self, key: &str, snapshot: &ClassSnapshot) {
        match self.merged.get_mut(key) {
            Some(m) => m.merge(snapshot),
            None => {
                self.merged.insert(key.to_string(), snapshot.clone());
            }
        }
    }

    /// Adds one host's result (refusing it as the module header says).
    pub fn add(&mut self, input: &HostInput) -> Result<(), AggregateError> {
        let r = &input.result;
        self.check_first(&First {
            path: input.path.clone(),
            schema_version: r.schema_version,
            test: r.test,
            layout: r.histogram_layout.clone(),
        })?;
        if let Some((instance, class)) = r.instances.iter().find_map(|i| {
            i.io.iter()
                .find(|(_, c)| c.histogram.is_none())
                .map(|(k, _)| (i.name.as_str(), k.as_str()))
        }) {
            return Err(refuse(
                &input.path,
                format!(
                    "{instance} `{class}` has no histogram: its percentiles cannot be merged exactly"
                ),
            ));
        }
        self.check_name(&r.host.name, &input.path)?;
        let start = parse_time(input, "measured_start", r.measured_start.as_deref())?;
        let end = parse_time(input, "measured_end", r.measured_end.as_deref())?;
        self.windows.push((start, end));

        let mut instances = Vec::with_capacity(r.instances.len());
        let mut esrp = Vec::with_capacity(r.instances.len());
        let mut host_averages: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
        for instance in &r.instances {
            esrp.push(esrp_instance(&instance.io));
            let mut io = BTreeMap::new();
            for (key, class) in &instance.io {
                if let Some(h) = &class.histogram {
                    self.merge_class(key, h);
                }
                *self.rates.entry(key.clone()).or_default() += class.ops_per_sec;
                if let Some(m) = class.max_interval_avg_ms {
                    let slot = self.interval_max.entry(key.clone()).or_insert(m);
                    *slot = slot.max(m);
                }
                host_averages
                    .entry(key.as_str())
                    .or_default()
                    .push(class.avg_latency_ms);
                let mut figures = class.clone();
                figures.histogram = None;
                io.insert(key.clone(), figures);
            }
            instances.push(AggregateInstance {
                name: instance.name.clone(),
                io,
            });
        }
        for (key, averages) in host_averages {
            self.server_averages
                .entry(key.to_string())
                .or_default()
                .push(mean(averages.into_iter()));
        }
        if r.verdict == Verdict::Fail {
            self.failing_hosts.push(r.host.name.clone());
            self.reasons.push(format!(
                "host {} fails: {}",
                r.host.name,
                if r.reasons.is_empty() {
                    "(no reason given)".to_string()
                } else {
                    r.reasons.join("; ")
                }
            ));
        }
        self.target_iops = add_option(self.target_iops, r.target_iops);
        self.achieved_iops = add_option(self.achieved_iops, r.achieved_iops);
        self.hosts.push(AggregateHost {
            name: r.host.name.clone(),
            result_file: input.path.clone(),
            verdict: r.verdict,
            reasons: r.reasons.clone(),
            target_iops: r.target_iops,
            achieved_iops: r.achieved_iops,
            measured_start: r.measured_start.clone().unwrap_or_default(),
            measured_end: r.measured_end.clone().unwrap_or_default(),
            requested_start: r.requested_start.clone(),
            start_skew_ms: r.start_skew_ms,
            ready_at_start: r.ready_at_start,
            rehearsal: crate::report::is_rehearsal(r),
            server: EsrpMetrics::server(&esrp),
            instances,
            totals: r.totals.clone(),
            instance_figures: instance_figures(r),
        });
        Ok(())
    }

    /// Appends the hosts of `other` (read after this one's) as if added one by one.
    pub fn absorb(&mut self, other: Aggregator) -> Result<(), AggregateError> {
        let Some(first) = &other.first else {
            return Ok(());
        };
        self.check_first(first)?;
        for host in &other.hosts {
            self.check_name(&host.name, &host.result_file)?;
        }
        self.windows.extend(other.windows);
        self.hosts.extend(other.hosts);
        for (key, snapshot) in &other.merged {
            self.merge_class(key, snapshot);
        }
        for (key, rate) in other.rates {
            *self.rates.entry(key).or_default() += rate;
        }
        for (key, m) in other.interval_max {
            let slot = self.interval_max.entry(key).or_insert(m);
            *slot = slot.max(m);
        }
        for (key, averages) in other.server_averages {
            self.server_averages
                .entry(key)
                .or_default()
                .extend(averages);
        }
        self.reasons.extend(other.reasons);
        self.failing_hosts.extend(other.failing_hosts);
        self.target_iops = add_option(self.target_iops, other.target_iops);
        self.achieved_iops = add_option(self.achieved_iops, other.achieved_iops);
        Ok(())
    }

    /// The aggregate, or the refusal of windows that do not all overlap.
    pub fn finish(self) -> Result<AggregateResult, AggregateError> {
        let Some(first) = self.first else {
            return Err(refuse(Path::new("."), "no results to aggregate"));
        };
        let windows = &self.windows;
        // The shared window: the latest start to the earliest end. Empty: name the two hosts.
        let (latest, latest_at) = windows
            .iter()
            .enumerate()
            .map(|(i, w)| (w.0, i))
            .max()
            .unwrap_or((SystemTime::UNIX_EPOCH, 0));
        let (earliest_end, earliest_at) = windows
            .iter()
            .enumerate()
            .map(|(i, w)| (w.1, i))
            .min()
            .unwrap_or((SystemTime::UNIX_EPOCH, 0));
        let earliest_start = windows.iter().map(|w| w.0).min().unwrap_or(latest);
        if latest >= earliest_end {
            let (late, early) = (&self.hosts[latest_at], &self.hosts[earliest_at]);
            return Err(refuse(
                &late.result_file,
                format!(
                    "its window ({} to {}) does not overlap the window of {} ({} to {}): the hosts did not measure at the same time; run them with one --start-at",
                    late.measured_start,
                    late.measured_end,
                    early.result_file.display(),
                    early.measured_start,
                    early.measured_end,
                ),
            ));
        }
        let mut totals = BTreeMap::new();
        for (key, snapshot) in &self.merged {
            // The rate is the sum of the instances' rates, each over its own host's window (the
            // windows differ by milliseconds); everything else comes from the merged record.
            if let Some(mut class) = ClassSummary::from_snapshot(snapshot, 1.0) {
                class.ops_per_sec = self.rates.get(key).copied().unwrap_or(0.0);
                class.max_interval_avg_ms = self.interval_max.get(key).copied();
                totals.insert(key.clone(), class);
            }
        }
        let servers: Vec<EsrpMetrics> = self.hosts.iter().map(|h| h.server.clone()).collect();
        let below_median = below_median(first.test, &self.hosts);
        Ok(AggregateResult {
            schema_version: SCHEMA_VERSION,
            tool_version: crate::tool_version(),
            test: first.test,
            aggregate: true,
            verdict: if self.failing_hosts.is_empty() {
                Verdict::Pass
            } else {
                Verdict::Fail
            },
            reasons: self.reasons,
            failing_hosts: self.failing_hosts,
            window: SharedWindow {
                start: clock::rfc3339_millis(latest),
                end: clock::rfc3339_millis(earliest_end),
                seconds: earliest_end
                    .duration_since(latest)
                    .map_or(0.0, |d| d.as_secs_f64()),
                start_spread_ms: clock::millis_between(earliest_start, latest),
            },
            histogram_layout: first.layout,
            target_iops: self.target_iops,
            achieved_iops: self.achieved_iops,
            hosts: self.hosts,
            totals,
            esrp: EsrpMetrics::across(&servers),
            average_of_server_averages_ms: self
                .server_averages
                .into_iter()
                .map(|(k, v)| (k, mean(v.into_iter())))
                .collect(),
            below_median,
        })
    }
}

/// How far below the others a host may fall before it is flagged: a failing cable or path
/// shows as one server well under the rest of a solution.
pub const BELOW_MEDIAN_FRACTION: f64 = 0.40;

/// The figure a host is compared with the others by: transactional IOPS (performance,
/// stress), MB read per second summed over its databases (backup); none for other tests.
pub fn host_figure(test: TestKind, host: &AggregateHost) -> Option<(f64, &'static str)> {
    match test {
        TestKind::Performance | TestKind::Stress => host.achieved_iops.map(|v| (v, "IOPS")),
        TestKind::Backup => Some((host.backup_mb_per_sec().0.iter().sum(), "MB/s")),
        _ => None,
    }
}

/// Every host more than [`BELOW_MEDIAN_FRACTION`] below the median of the other hosts.
fn below_median(test: TestKind, hosts: &[AggregateHost]) -> Vec<String> {
    let figures: Vec<Option<(f64, &str)>> = hosts.iter().map(|h| host_figure(test, h)).collect();
    let mut out = Vec::new();
    for (i, host) in hosts.iter().enumerate() {
        let Some((value, unit)) = figures[i] else {
            continue;
        };
        let mut others: Vec<f64> = figures
            .iter()
            .enumerate()
            .filter(|(j, _)| *j != i)
            .filter_map(|(_, f)| f.map(|f| f.0))
            .collect();
        if others.is_empty() {
            continue;
        }
        others.sort_by(f64::total_cmp);
        let n = others.len();
        let median = if n % 2 == 1 {
            others[n / 2]
        } else {
            (others[n / 2 - 1] + others[n / 2]) / 2.0
        };
        if median > 0.0 && value < median * (1.0 - BELOW_MEDIAN_FRACTION) {
            out.push(format!(
                "{}: {value:.1} {unit}, {:.0} % below the median of the other servers ({median:.1}): check its paths, cables and disks",
                host.name,
                (1.0 - value / median) * 100.0
            ));
        }
    }
    out
}

/// The class names in the report's latency table, in Jetstress's order.
const CLASS_ORDER: [(&str, &str); 10] = [
    ("db_read", "I/O Database Reads"),
    ("db_write", "I/O Database Writes"),
    ("log_write", "I/O Log Writes"),
    ("log_read", "I/O Log Reads"),
    ("bdm_read", "Database Maintenance IO Reads"),
    ("replication_read", "Log Replication Reads"),
    ("backup_read", "Backup Reads"),
    ("checksum_read", "Checksum Reads"),
    ("db_extend", "Database Extension Writes"),
    ("flush_map", "Flush Map I/O"),
];

/// The aggregate's `report.md`: the reference reports' tables, made from the result alone.
pub fn markdown(a: &AggregateResult) -> String {
    let mut m = String::new();
    summary(&mut m, a);
    servers(&mut m, a);
    workload_tables(&mut m, a);
    latency_distribution(&mut m, a);
    backup_section(&mut m, a);
    recovery_table(&mut m, a);
    checksum_table(&mut m, a);
    verdicts(&mut m, a);
    m
}

/// The title and the test summary: the verdict, the window, the figures, the reasons.
fn summary(m: &mut String, a: &AggregateResult) {
    let rehearsals: Vec<&str> = a
        .hosts
        .iter()
        .filter(|h| h.rehearsal)
        .map(|h| h.name.as_str())
        .collect();
    let _ = writeln!(
        m,
        "# Aggregate {} test across {} servers{}\n",
        a.test.name(),
        a.hosts.len(),
        if rehearsals.is_empty() {
            ""
        } else {
            " (REHEARSAL)"
        }
    );
    let _ = writeln!(m, "## Test Summary\n\n| | |\n|---|---|");
    let _ = writeln!(m, "| Overall Test Result | {} |", verdict(a.verdict));
    if !rehearsals.is_empty() {
        let _ = writeln!(
            m,
            "| Rehearsal | {}: {} |",
            crate::report::REHEARSAL_LINE,
            rehearsals.join(", ")
        );
    }
    if !a.failing_hosts.is_empty() {
        let _ = writeln!(m, "| Failing servers | {} |", a.failing_hosts.join(", "));
    }
    let _ = writeln!(m, "| Servers | {} |", a.hosts.len());
    let _ = writeln!(
        m,
        "| Shared window | {} to {} ({:.1} s; starts spread over {:.1} ms) |",
        a.window.start, a.window.end, a.window.seconds, a.window.start_spread_ms
    );
    if let Some(achieved) = a.achieved_iops {
        let _ = writeln!(
            m,
            "| Achieved Transactional I/O per Second | {achieved:.3} |"
        );
    }
    if let Some(target) = a.target_iops {
        let _ = writeln!(m, "| Target Transactional I/O per Second | {target:.3} |");
    }
    let _ = writeln!(m, "| jetproof version | {} |", a.tool_version);
    for reason in &a.reasons {
        let _ = writeln!(m, "\nFAIL: {reason}");
    }
    for flag in &a.below_median {
        let _ = writeln!(m, "\nBELOW THE OTHER SERVERS: {flag}");
    }
}

/// One row per server: its verdict, target and achieved figures, start.
fn servers(m: &mut String, a: &AggregateResult) {
    let _ = writeln!(
        m,
        "\n## Servers\n\n| Server | Result | Target Transactional I/O per Second | Achieved Transactional I/O per Second | Measured start | Start skew (ms) |\n|---|---|---:|---:|---|---:|"
    );
    for h in &a.hosts {
        let _ = writeln!(
            m,
            "| {} | {} | {} | {} | {} | {} |",
            h.name,
            verdict(h.verdict),
            h.target_iops.map_or("-".into(), |t| format!("{t:.1}")),
            h.achieved_iops.map_or("-".into(), |t| format!("{t:.1}")),
            h.measured_start,
            h.start_skew_ms.map_or("-".into(), |s| format!("{s:.1}"))
        );
    }
}

/// A workload test's (performance, stress) ESRP tables.
fn workload_tables(m: &mut String, a: &AggregateResult) {
    let workload = matches!(a.test, TestKind::Performance | TestKind::Stress);
    if workload {
        let _ = writeln!(
            m,
            "\n## Individual Server Metrics\n\nThe sum of I/Os across databases and the average latency across all databases on each server (ESRP's per-server tables).\n\n| Server | Database disk transfers per second | Database disk reads per second | Database disk writes per second | Average database disk read latency (ms) | Average database disk write latency (ms) | Log disk writes per second | Average log disk write latency (ms) |\n|---|---:|---:|---:|---:|---:|---:|---:|"
        );
        for h in &a.hosts {
            let s = &h.server;
            let _ = writeln!(
                m,
                "| {} | {:.0} | {:.0} | {:.0} | {:.1} | {:.1} | {:.0} | {:.1} |",
                h.name,
                s.database_transfers_per_sec,
                s.database_reads_per_sec,
                s.database_writes_per_sec,
                s.database_read_avg_latency_ms,
                s.database_write_avg_latency_ms,
                s.log_writes_per_sec,
                s.log_write_avg_latency_ms
            );
        }
        let e = &a.esrp;
        let exact = |k: &str, f: fn(&ClassSummary) -> f64| {
            a.totals
                .get(k)
                .map_or("-".into(), |c| format!("{:.1}", f(c)))
        };
        let _ = writeln!(
            m,
            "\n## Aggregate Performance Across All Servers\n\nRates are sums over all servers. Latency as ESRP prints it is the average of server averages; beside it the I/O-weighted average and the 99th percentile of all I/Os (exactly merged histograms).\n\n| Database I/O | Sum / average of server averages (ESRP) | I/O-weighted average | p99 of all I/Os |\n|---|---:|---:|---:|"
        );
        let _ = writeln!(
            m,
            "| Database disk transfers per second | {:.0} | | |",
            e.database_transfers_per_sec
        );
        let _ = writeln!(
            m,
            "| Database disk reads per second | {:.0} | | |",
            e.database_reads_per_sec
        );
        let _ = writeln!(
            m,
            "| Database disk writes per second | {:.0} | | |",
            e.database_writes_per_sec
        );
        let _ = writeln!(
            m,
            "| Average database disk read latency (ms) | {:.1} | {} | {} |",
            e.database_read_avg_latency_ms,
            exact("db_read", |c| c.avg_latency_ms),
            exact("db_read", |c| c.p99_ms)
        );
        let _ = writeln!(
            m,
            "| Average database disk write latency (ms) | {:.1} | {} | {} |",
            e.database_write_avg_latency_ms,
            exact("db_write", |c| c.avg_latency_ms),
            exact("db_write", |c| c.p99_ms)
        );
        let _ = writeln!(m, "| **Transaction Log I/O** | | | |");
        let _ = writeln!(
            m,
            "| Log disk writes per second | {:.0} | | |",
            e.log_writes_per_sec
        );
        let _ = writeln!(
            m,
            "| Average log disk write latency (ms) | {:.1} | {} | {} |",
            e.log_write_avg_latency_ms,
            exact("log_write", |c| c.avg_latency_ms),
            exact("log_write", |c| c.p99_ms)
        );
    }
}

/// Every class's merged histograms, all servers together.
fn latency_distribution(m: &mut String, a: &AggregateResult) {
    if !a.totals.is_empty() {
        let _ = writeln!(
            m,
            "\n## Latency Distribution Across All Servers\n\nEvery class's histograms of every instance of every server merged exactly: the percentiles of all I/Os together.\n\n| Class | I/Os | I/Os per second (sum) | Average bytes | Average latency, I/O-weighted (ms) | Average of server averages (ms) | p50 (ms) | p95 (ms) | p99 (ms) | p99.9 (ms) | Max (ms) |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
        );
        for (key, label) in CLASS_ORDER {
            if let Some(c) = a.totals.get(key) {
                let _ = writeln!(
                    m,
                    "| {label} | {} | {:.1} | {:.0} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} |",
                    c.count,
                    c.ops_per_sec,
                    c.avg_bytes,
                    c.avg_latency_ms,
                    a.average_of_server_averages_ms
                        .get(key)
                        .copied()
                        .unwrap_or(0.0),
                    c.p50_ms,
                    c.p95_ms,
                    c.p99_ms,
                    c.p999_ms,
                    c.max_ms
                );
            }
        }
    }
}

/// A backup test's table.
fn backup_section(m: &mut String, a: &AggregateResult) {
    if a.test == TestKind::Backup {
        let _ = writeln!(m, "\n## Database Backup (Read-only) Performance\n");
        backup_table(m, &a.hosts);
        let total: f64 = a.hosts.iter().map(|h| h.backup_mb_per_sec().1).sum();
        let _ = writeln!(
            m,
            "\nMB read per second, whole solution (the servers' sums added): {:.2}",
            round2(total)
        );
    }
}

/// A recovery test's table.
fn recovery_table(m: &mut String, a: &AggregateResult) {
    if a.test == TestKind::Recovery {
        // The soft-recovery test says what it generated beside what it replayed (only the
        // generated files count toward ESRP's 500), as each host's report.md does.
        let generated = a.hosts.iter().any(|h| {
            h.totals
                .recovery()
                .is_some_and(|t| t.logs_generated.is_some())
        });
        let _ = writeln!(
            m,
            "\n## Transaction Log Recovery/Replay Performance\n\n| Server |{} Logs replayed | Recovery seconds | Average time to play one log file (sec) |\n|---|{}---:|---:|---:|",
            if generated { " Logs generated |" } else { "" },
            if generated { "---:|" } else { "" }
        );
        let (mut all, mut logs, mut generated_all) = (Vec::new(), 0.0, 0u64);
        for h in &a.hosts {
            let per_log: Vec<f64> = h
                .instance_figures
                .values()
                .filter_map(|f| f.seconds_per_log)
                .collect();
            let recovery = h.totals.recovery();
            let replayed = recovery.map_or(0.0, |t| t.logs_replayed as f64);
            logs += replayed;
            let made = recovery.and_then(|t| t.logs_generated);
            generated_all += made.unwrap_or(0);
            let _ = writeln!(
                m,
                "| {} |{} {replayed:.0} | {:.3} | {:.3} |",
                h.name,
                if generated {
                    format!(" {} |", made.map_or_else(|| "-".into(), |n| n.to_string()))
                } else {
                    String::new()
                },
                recovery.map_or(0.0, |t| t.recovery_seconds),
                mean(per_log.iter().copied())
            );
            all.extend(per_log);
        }
        let _ = writeln!(
            m,
            "| **All servers** |{} {logs:.0} | | {:.3} |",
            if generated {
                format!(" {generated_all} |")
            } else {
                String::new()
            },
            mean(all.iter().copied())
        );
    }
}

/// The database checksum statistics, per server and summed.
fn checksum_table(m: &mut String, a: &AggregateResult) {
    let checksum_totals = |h: &AggregateHost| -> Option<ChecksumTotals> {
        match a.test {
            // A checksum host without totals (stopped before its pass) still has its row.
            TestKind::Checksum => Some(h.totals.checksum().cloned().unwrap_or_default()),
            // A stress test's pass, or a performance test's with run.checksum_after_performance.
            TestKind::Stress | TestKind::Performance => h.totals.checksum().cloned(),
            _ => None,
        }
    };
    if a.hosts.iter().any(|h| checksum_totals(h).is_some()) {
        let _ = writeln!(
            m,
            "\n## Database Checksum Statistics\n\n| Server | Seen pages | Bad pages | Correctable pages | Wrong page-number pages | MBytes | Seconds |\n|---|---:|---:|---:|---:|---:|---:|"
        );
        let mut sum = [0.0f64; 6];
        for h in &a.hosts {
            let Some(t) = checksum_totals(h) else {
                continue;
            };
            let row = [
                t.pages_seen as f64,
                t.pages_bad as f64,
                t.pages_correctable as f64,
                t.pages_wrong_number as f64,
                t.checked_bytes as f64 / 1_048_576.0,
                t.seconds,
            ];
            for (s, v) in sum.iter_mut().zip(row) {
                *s += v;
            }
            let _ = writeln!(
                m,
                "| {} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} | {:.1} |",
                h.name, row[0], row[1], row[2], row[3], row[4], row[5]
            );
        }
        let _ = writeln!(
            m,
            "| **(Sum)** | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} | |",
            sum[0], sum[1], sum[2], sum[3], sum[4]
        );
    }
}

/// The verdict of every server and of the solution.
fn verdicts(m: &mut String, a: &AggregateResult) {
    let _ = writeln!(
        m,
        "\n## Verdict\n\n| Server | Result | Reasons |\n|---|---|---|"
    );
    for h in &a.hosts {
        let _ = writeln!(
            m,
            "| {} | {} | {} |",
            h.name,
            verdict(h.verdict),
            h.reasons.join("; ").replace('|', "\\|")
        );
    }
    let _ = writeln!(
        m,
        "| **Solution** | **{}** | {} |",
        verdict(a.verdict),
        if a.failing_hosts.is_empty() {
            "every server passes".to_string()
        } else {
            format!("failing: {}", a.failing_hosts.join(", "))
        }
    );
}

/// A verdict as the documents write it.
fn verdict(v: Verdict) -> &'static str {
    match v {
        Verdict::Pass => "Pass",
        Verdict::Fail => "Fail",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checksum::ChecksumTotals;
    use crate::sections::{RecoveryInstance, RecoveryTotals, ReplayFigures};
    use crate::{Host, InstanceFigures, InstanceResult, Totals};
    use jetproof_io::LatencyHistogram;

    /// The Hitachi AMS 2500 ESRP report (`reference/seed-hitachi-ams2500-exchange2010-esrp.txt`),
    /// Tables 16-31: per server, database transfers/s, reads/s, writes/s, read and write
    /// latency (ms), log writes/s, log write latency (ms), as printed.
    const HITACHI_SERVERS: [(&str, [f64; 7]); 16] = [
        ("SUN141", [779.0, 493.0, 286.0, 15.6, 6.7, 221.0, 4.1]),
        ("SUN142", [835.0, 529.0, 306.0, 14.7, 5.5, 245.0, 3.2]),
        ("SUN143", [767.0, 485.0, 282.0, 15.6, 6.7, 218.0, 4.1]),
        ("SUN144", [868.0, 549.0, 317.0, 14.3, 5.5, 254.0, 3.1]),
        ("SUN145", [863.0, 547.0, 316.0, 14.5, 5.6, 253.0, 3.1]),
        ("SUN146", [816.0, 517.0, 299.0, 15.0, 5.5, 242.0, 3.2]),
        ("SUN147", [817.0, 517.0, 300.0, 14.9, 5.5, 241.0, 3.2]),
        ("SUN148", [863.0, 547.0, 316.0, 14.3, 5.4, 253.0, 3.1]),
        ("SUN153", [849.0, 538.0, 311.0, 14.6, 5.6, 249.0, 3.2]),
        ("SUN154", [841.0, 533.0, 308.0, 14.5, 5.5, 246.0, 3.2]),
        ("SUN155", [830.0, 526.0, 304.0, 14.9, 5.5, 248.0, 2.9]),
        ("SUN156", [783.0, 496.0, 287.0, 15.6, 7.3, 226.0, 3.7]),
        ("SUN165", [858.0, 544.0, 314.0, 14.5, 5.6, 251.0, 3.2]),
        ("SUN166", [860.0, 545.0, 315.0, 14.3, 5.3, 252.0, 3.1]),
        ("SUN167", [832.0, 527.0, 305.0, 14.7, 5.5, 245.0, 3.2]),
        ("SUN168", [781.0, 494.0, 287.0, 15.4, 6.6, 222.0, 4.0]),
    ];

    /// Table 32, "Aggregate Performance for Exchange Server 2010", as printed.
    const HITACHI_AGGREGATE: [f64; 7] = [13_242.0, 8_387.0, 4_853.0, 14.8, 5.8, 3_866.0, 3.3];

    fn metrics(row: [f64; 7]) -> EsrpMetrics {
        EsrpMetrics {
            database_transfers_per_sec: row[0],
            database_reads_per_sec: row[1],
            database_writes_per_sec: row[2],
            database_read_avg_latency_ms: row[3],
            database_write_avg_latency_ms: row[4],
            log_writes_per_sec: row[5],
            log_write_avg_latency_ms: row[6],
        }
    }

    fn row(m: &EsrpMetrics) -> [f64; 7] {
        [
            m.database_transfers_per_sec,
            m.database_reads_per_sec,
            m.database_writes_per_sec,
            m.database_read_avg_latency_ms,
            m.database_write_avg_latency_ms,
            m.log_writes_per_sec,
            m.log_write_avg_latency_ms,
        ]
    }

    /// The aggregate table from the 16 per-server tables: the rates are exact sums; each
    /// latency is the average of the server averages. The servers' figures are printed to one
    /// decimal, so their average is known to ±0.05 ms, and the printed aggregate rounds the
    /// average of the unrounded figures: the two agree within 0.1 ms. Log write latency shows
    /// it: the printed per-server figures average exactly 3.35, printed 3.3 (the unrounded
    /// average was below 3.35). The I/O-weighted average is a different figure, and not what
    /// ESRP prints for reads: it is checked not to be taken for it.
    #[test]
    fn the_hitachi_aggregate_table_from_its_16_server_tables() {
        let servers: Vec<EsrpMetrics> = HITACHI_SERVERS.iter().map(|(_, r)| metrics(*r)).collect();
        let got = row(&EsrpMetrics::across(&servers));
        for (index, (got, printed)) in got.iter().zip(HITACHI_AGGREGATE).enumerate() {
            if [3, 4, 6].contains(&index) {
                assert!(
                    (got - printed).abs() <= 0.1 + 1e-9,
                    "row {index}: {got} against the printed {printed}"
                );
            } else {
                assert_eq!(*got, printed, "row {index}");
            }
        }
        assert_eq!(format!("{:.1}", got[3]), "14.8");
        assert_eq!(format!("{:.1}", got[4]), "5.8");
        assert!((got[6] - 3.35).abs() < 1e-9, "{}", got[6]);
        // Reads/s + writes/s = transfers/s only up to the servers' rounding (8387 + 4853 = 13240).
        assert_eq!(got[1] + got[2], 13_240.0);
    }

    /// SUN141's table (Table 16) from its five instances (Appendix B, "Transactional I/O
    /// Performance"): rates summed, latencies the average of the instances' averages.
    #[test]
    fn the_hitachi_server_table_from_its_five_instances() {
        // reads/s, read ms, writes/s, write ms, log writes/s, log write ms per instance.
        let instances = [
            [98.299, 16.633, 57.001, 7.488, 44.238, 4.113],
            [98.760, 15.195, 57.112, 6.585, 43.920, 4.007],
            [98.963, 15.303, 57.325, 6.357, 44.550, 4.012],
            [99.099, 15.144, 57.420, 6.445, 44.202, 4.092],
            [98.184, 15.851, 56.789, 6.534, 44.044, 4.131],
        ]
        .map(|i| EsrpInstance {
            reads_per_sec: i[0],
            read_avg_latency_ms: Some(i[1]),
            writes_per_sec: i[2],
            write_avg_latency_ms: Some(i[3]),
            log_writes_per_sec: i[4],
            log_write_avg_latency_ms: Some(i[5]),
        });
        let server = EsrpMetrics::server(&instances);
        let printed = HITACHI_SERVERS[0].1;
        let got = row(&server);
        let decimals = [0, 0, 0, 1, 1, 0, 1];
        for ((got, printed), places) in got.iter().zip(printed).zip(decimals) {
            assert_eq!(format!("{got:.places$}"), format!("{printed:.places$}"));
        }
    }

    fn seed() -> u64 {
        jetproof_test_support::seed_or_clock(7)
    }

    /// A small xorshift: the test needs reproducible latencies, not a crate.
    fn next(state: &mut u64) -> u64 {
        *state ^= *state << 13;
        *state ^= *state >> 7;
        *state ^= *state << 17;
        *state
    }

    fn class(values: &[u64], seconds: f64) -> ClassSummary {
        let latency = LatencyHistogram::from_values(values.iter().copied());
        let snapshot = ClassSnapshot {
            count: values.len() as u64,
            bytes: values.len() as u64 * 32_768,
            latency,
            intended_latency: None,
            sync_latency: LatencyHistogram::default(),
        };
        ClassSummary::from_snapshot(&snapshot, seconds).expect("not empty")
    }

    fn host(name: &str, start: &str, end: &str, classes: Vec<(&str, ClassSummary)>) -> HostInput {
        let mut result = TestResult::new(
            TestKind::Performance,
            start.into(),
            10.0,
            crate::Parameters::default(),
        );
        result.host = Host {
            name: name.into(),
            ..Host::this()
        };
        result.measured_start = Some(start.into());
        result.measured_end = Some(end.into());
        result.achieved_iops = Some(
            classes
                .iter()
                .filter(|(k, _)| *k == "db_read" || *k == "db_write")
                .map(|(_, c)| c.ops_per_sec)
                .sum(),
        );
        result.instances = vec![InstanceResult {
            name: "db1".into(),
            database_path: "/d".into(),
            log_path: "/l".into(),
            io: classes
                .into_iter()
                .map(|(k, c)| (k.to_string(), c))
                .collect(),
            figures: InstanceFigures::None,
        }];
        HostInput {
            path: PathBuf::from(format!("/results/{name}/result.json")),
            result,
        }
    }

    #[test]
    fn merged_percentiles_are_those_of_all_ios_and_rates_sum() {
        let seed = seed();
        let mut state = seed | 1;
        let mut all = Vec::new();
        let mut inputs = Vec::new();
        for index in 0..5 {
            let count = 500 + (next(&mut state) % 3000) as usize;
            // Each host its own spread (uniform over 10 µs to 10 µs + 2^index ms), so the
            // merged p99 is not any one host's.
            let values: Vec<u64> = (0..count)
                .map(|_| 10_000 + next(&mut state) % (1_000_000u64 << index))
                .collect();
            all.extend(values.iter().copied());
            inputs.push(host(
                &format!("h{index}"),
                "2026-11-26T23:40:00.000Z",
                "2026-11-26T23:40:10.000Z",
                vec![("db_read", class(&values, 10.0))],
            ));
        }
        let a = aggregate(&inputs).expect("aggregates");
        let union = LatencyHistogram::from_values(all.iter().copied());
        let read = &a.totals["db_read"];
        assert_eq!(read.count, all.len() as u64, "seed {seed}");
        assert_eq!(
            read.p99_ms,
            union.value_at_quantile_ns(0.99) as f64 / 1e6,
            "seed {seed}"
        );
        assert_eq!(
            read.histogram.as_ref().map(|h| &h.latency),
            Some(&union),
            "seed {seed}"
        );
        let exact_mean = all.iter().map(|&v| v as f64).sum::<f64>() / all.len() as f64 / 1e6;
        assert!(
            (read.avg_latency_ms - exact_mean).abs() < 1e-9,
            "seed {seed}"
        );
        let rates: f64 = inputs
            .iter()
            .map(|i| i.result.instances[0].io["db_read"].ops_per_sec)
            .sum();
        assert!((read.ops_per_sec - rates).abs() < 1e-9, "seed {seed}");
        assert_eq!(a.achieved_iops, Some(rates), "seed {seed}");
        assert!(a.aggregate);
        assert_eq!(a.window.seconds, 10.0);
        let report = markdown(&a);
        assert!(
            report.contains("## Aggregate Performance Across All Servers"),
            "{report}"
        );
        assert!(report.contains("average of server averages"), "{report}");
    }

    /// Soft recovery: logs replayed summed, seconds per log averaged per server and over every
    /// database of every server (ESRP's "Average time to play one log file"); checksum: the
    /// "(Sum)" of every server's pages.
    #[test]
    fn recovery_and_checksum_tables() {
        let reads = || vec![("log_read", class(&[1_000_000, 3_000_000], 10.0))];
        let mut inputs = Vec::new();
        for (name, per_log) in [("r1", [1.5, 1.7]), ("r2", [1.8, 2.0])] {
            let mut input = host(
                name,
                "2026-11-26T23:40:00.000Z",
                "2026-11-26T23:41:00.000Z",
                reads(),
            );
            input.result.test = TestKind::Recovery;
            let mut second = input.result.instances[0].clone();
            second.name = "db2".into();
            input.result.instances.push(second);
            for (instance, seconds) in input.result.instances.iter_mut().zip(per_log) {
                instance.figures = InstanceFigures::Recovery(Box::new(RecoveryInstance {
                    replay: Some(ReplayFigures {
                        seconds_per_log: seconds,
                        logs_replayed: 10,
                        ..ReplayFigures::default()
                    }),
                    ..RecoveryInstance::default()
                }));
            }
            input.result.totals = Totals::Recovery(RecoveryTotals {
                logs_replayed: 20,
                recovery_seconds: 40.0,
                generation_seconds: None,
                logs_generated: None,
            });
            inputs.push(input);
        }
        let report = markdown(&aggregate(&inputs).expect("aggregates"));
        assert!(report.contains("| r1 | 20 | 40.000 | 1.600 |"), "{report}");
        assert!(report.contains("| r2 | 20 | 40.000 | 1.900 |"), "{report}");
        assert!(
            report.contains("| **All servers** | 40 | | 1.750 |"),
            "{report}"
        );

        let mut inputs = Vec::new();
        for (name, seen, bad) in [("c1", 1000, 0), ("c2", 3000, 2)] {
            let mut input = host(
                name,
                "2026-11-26T23:40:00.000Z",
                "2026-11-26T23:41:00.000Z",
                reads(),
            );
            input.result.test = TestKind::Checksum;
            input.result.totals = Totals::Checksum(ChecksumTotals {
                pages_seen: seen,
                pages_bad: bad,
                checked_bytes: seen * 8192,
                ..ChecksumTotals::default()
            });
            if bad > 0 {
                input.result.set_reasons(vec!["db1: 2 bad pages".into()]);
            }
            inputs.push(input);
        }
        let whole = aggregate(&inputs).expect("aggregates");
        assert_eq!(whole.failing_hosts, ["c2"]);
        let report = markdown(&whole);
        assert!(
            report.contains("| **(Sum)** | 4000 | 2 | 0 | 0 | 31 | |"),
            "{report}"
        );
        assert!(
            report.contains("| **Solution** | **Fail** | failing: c2 |"),
            "{report}"
        );
    }

    #[test]
    fn refusals_name_the_file() {
        let one = |name: &str, start: &str, end: &str| {
            host(
                name,
                start,
                end,
                vec![("db_read", class(&[1_000_000, 2_000_000], 10.0))],
            )
        };
        let a = one("a", "2026-11-26T23:40:00.000Z", "2026-11-26T23:40:10.000Z");
        let refused = |inputs: &[HostInput], path: &str, words: &str| {
            let error = aggregate(inputs).expect_err(words).to_string();
            assert!(error.starts_with(path) && error.contains(words), "{error}");
        };
        // A host given twice.
        let mut twice = one("a", "2026-11-26T23:40:00.000Z", "2026-11-26T23:40:10.000Z");
        twice.path = "/elsewhere/result.json".into();
        refused(&[a.clone(), twice], "/elsewhere/result.json", "given twice");
        // Windows that do not overlap.
        let later = one("b", "2026-11-26T23:40:10.000Z", "2026-11-26T23:40:20.000Z");
        refused(
            &[a.clone(), later],
            "/results/b/result.json",
            "does not overlap",
        );
        // Another test.
        let mut backup = one("c", "2026-11-26T23:40:00.000Z", "2026-11-26T23:40:10.000Z");
        backup.result.test = TestKind::Backup;
        refused(
            &[a.clone(), backup],
            "/results/c/result.json",
            "is a backup result",
        );
        // Another schema version.
        let mut old = one("d", "2026-11-26T23:40:00.000Z", "2026-11-26T23:40:10.000Z");
        old.result.schema_version = 4;
        refused(
            &[a.clone(), old],
            "/results/d/result.json",
            "schema version 4",
        );
        // Another histogram layout.
        let mut coarse = one("e", "2026-11-26T23:40:00.000Z", "2026-11-26T23:40:10.000Z");
        if let Some(layout) = coarse.result.histogram_layout.as_mut() {
            layout.significant_digits = 3;
        }
        refused(
            &[a.clone(), coarse],
            "/results/e/result.json",
            "histogram layout",
        );
        // A class without its histogram.
        let mut bare = one("f", "2026-11-26T23:40:00.000Z", "2026-11-26T23:40:10.000Z");
        for c in bare.result.instances[0].io.values_mut() {
            c.histogram = None;
        }
        refused(
            &[a.clone(), bare],
            "/results/f/result.json",
            "has no histogram",
        );
        // No window at all.
        let mut windowless = one("g", "2026-11-26T23:40:00.000Z", "2026-11-26T23:40:10.000Z");
        windowless.result.measured_start = None;
        refused(
            &[a.clone(), windowless],
            "/results/g/result.json",
            "measured_start",
        );
        // A failing host fails the whole, named.
        let mut failing = one("h", "2026-11-26T23:40:05.000Z", "2026-11-26T23:40:12.000Z");
        failing
            .result
            .set_reasons(vec!["db1: database reads 30 ms average".into()]);
        let whole = aggregate(&[a, failing]).expect("aggregates");
        assert_eq!(whole.verdict, Verdict::Fail);
        assert_eq!(whole.failing_hosts, ["h"]);
        assert!(whole.reasons[0].contains("host h fails: db1: database reads 30 ms"));
        assert_eq!(whole.window.seconds, 5.0);
        assert_eq!(whole.window.start_spread_ms, 5000.0);
    }
}
