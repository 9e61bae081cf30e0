//! `result.json`: the versioned result of one test run (`docs/results.md`). Every report is made
//! from it, so it holds figures, never prose: the terminal summary and the Markdown/HTML reports
//! are views of this document.
//!
//! Also here, because every test procedure needs them the same way: the results directory (created
//! before any work, never overwriting what jetproof did not write), the timestamped test log, and
//! the host description.

pub mod aggregate;
pub mod checksum;
pub mod clock;
pub mod compare;
pub mod compare_html;
pub mod devices;
pub mod esrp;
pub mod esrp_check;
pub mod excursion;
pub mod host;
pub mod html;
pub mod outdir;
pub mod reduction;
pub mod report;
pub mod sections;
pub mod svg;
pub mod sweep;
pub mod testlog;
pub mod verdict;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, SystemTime};

/// The figures of one I/O class (one struct for the whole product: `jetproof_io`'s).
pub use jetproof_io::ClassSummary;
use jetproof_io::IoClass;
pub use jetproof_io::hist::HistogramLayout;
use jetproof_io::meter::InstanceSnapshot;
use serde::{Deserialize, Serialize};

pub use host::Host;
pub use outdir::{OutDir, OutDirError};
pub use sections::{InstanceFigures, Parameters, Totals};
pub use testlog::TestLog;

/// Version of the `result.json` layout. Bumped when a key is added that readers may rely on, and
/// on any incompatible change; `docs/results.md` keeps the history (2: `io_engine`; 3: the
/// databases' sizes and the page fault stall rate of workload tests; 4: the checksum test's
/// database state and log checkpoint findings, recovery's `lost_log`; lost-write detection: the
/// `flush_map` I/O class and the checksum test's lost-write figures; 5: the measured part's
/// wall-clock start and end, `--start-at`'s requested start and skew, the histogram layout,
/// `mb_per_sec` in MB/s everywhere, the damage matrix's findings).
pub const SCHEMA_VERSION: u32 = 5;

/// The most bytes of a `result.json` jetproof reads (`report`, `compare`, `aggregate`, `sweep`):
/// a result of a thousand instances with every histogram is a few MB; a larger file is not one.
pub const MAX_RESULT_JSON_BYTES: u64 = 256 << 20;

/// The most bytes of a `samples.csv` jetproof reads: one row per instance and sample interval,
/// about 200 bytes, so a week of 1-second samples of 8 instances.
pub const MAX_SAMPLES_CSV_BYTES: u64 = 1 << 30;

/// The one check of a document's `schema_version` every reader makes (`report`, `compare`,
/// `aggregate`, `sweep`): versions 1 to [`SCHEMA_VERSION`] read (keys added since are optional);
/// 0 and later versions are not ours. `aggregate` further needs every host at one version.
pub fn check_schema_version(version: u32) -> Result<(), String> {
    if (1..=SCHEMA_VERSION).contains(&version) {
        Ok(())
    } else {
        Err(format!(
            "schema_version {version}: this jetproof reads versions 1 to {SCHEMA_VERSION}; {}",
            if version == 0 {
                "no jetproof writes version 0, so this is not a jetproof result"
            } else {
                "it was written by a newer jetproof; read it with that version"
            }
        ))
    }
}

/// Reads a `result.json` through the checked reader ([`jetproof_io::input`]): a regular file of
/// at most [`MAX_RESULT_JSON_BYTES`], never a pipe or a device.
pub fn read_result_json(path: &std::path::Path) -> Result<String, jetproof_io::input::InputError> {
    jetproof_io::input::read_text(path, MAX_RESULT_JSON_BYTES)
}

/// Reads a `samples.csv` when there is one, through the checked reader; nothing at the path is
/// `Ok(None)`, a pipe, a device or a file over [`MAX_SAMPLES_CSV_BYTES`] an error.
pub fn read_samples_csv(
    path: &std::path::Path,
) -> Result<Option<String>, jetproof_io::input::InputError> {
    jetproof_io::input::read_optional_text(path, MAX_SAMPLES_CSV_BYTES)
}

/// The test that produced a result.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TestKind {
    Init,
    Performance,
    Stress,
    Checksum,
    Backup,
    Recovery,
}

/// The tests of ESRP's set, in the order the ESRP document and an aggregate report them
/// (`esrp::TESTS`).
pub const ESRP_TESTS: [TestKind; 4] = [
    TestKind::Performance,
    TestKind::Stress,
    TestKind::Backup,
    TestKind::Recovery,
];

impl TestKind {
    pub fn name(self) -> &'static str {
        match self {
            TestKind::Init => "init",
            TestKind::Performance => "performance",
            TestKind::Stress => "stress",
            TestKind::Checksum => "checksum",
            TestKind::Backup => "backup",
            TestKind::Recovery => "recovery",
        }
    }
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    Pass,
    Fail,
}

/// One test run.
///
/// Reading one back picks the types of `totals` and of each instance's test-specific figures by
/// `test` ([`sections`]); a key none of them knows is dropped.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TestResult {
    pub schema_version: u32,
    pub tool_version: String,
    pub test: TestKind,
    pub verdict: Verdict,
    /// Every reason the verdict is fail (empty on pass).
    pub reasons: Vec<String>,
    /// True when the run was stopped early (Ctrl-C or an error): the figures cover what ran.
    #[serde(default)]
    pub interrupted: bool,
    pub host: Host,
    /// RFC 3339, UTC.
    pub started: String,
    pub ended: String,
    pub duration_s: f64,
    /// When the measured part began and ended on the host's clock (RFC 3339 UTC with
    /// milliseconds): the window of a performance or stress test, backup's reads, soft
    /// recovery's replay, checksum's reads. What `jetproof aggregate` lines hosts up by. Absent
    /// before schema version 5 and from `init` and `recover`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measured_start: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measured_end: Option<String>,
    /// `--start-at`: the start asked for (RFC 3339 UTC, milliseconds), `measured_start` minus
    /// it in milliseconds, and whether everything meant to happen before (attach, warm-up,
    /// auto-tune, log generation) was done by then. Absent without `--start-at`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requested_start: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_skew_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_at_start: Option<bool>,
    /// The bucket layout of every `histogram` in this document: results merge exactly only
    /// when their layouts are equal. Absent before schema version 5 (the layout was the same,
    /// unstated).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub histogram_layout: Option<HistogramLayout>,
    /// The I/O engine that read and wrote the files ("std", "io_uring"; "mem" or "fault" in
    /// tests): what ran, where `parameters.storage.io_engine` is what the job asked for ("auto"
    /// may become either). Absent from schema version 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub io_engine: Option<String>,
    /// The job as run, with everything the procedure decided (sessions, cache sizes, …).
    pub parameters: Parameters,
    pub target_iops: Option<f64>,
    pub achieved_iops: Option<f64>,
    pub instances: Vec<InstanceResult>,
    pub host_counters: Option<HostCounters>,
    pub log_file: Option<PathBuf>,
    pub samples_file: Option<PathBuf>,
    /// Test-specific totals (init: bytes written and rate; checksum: totals; …).
    #[serde(skip_serializing_if = "Totals::is_none")]
    pub totals: Totals,
    /// How far an array that compresses and deduplicates could reduce the database files, per
    /// database and across them (`init` and `checksum`; absent from other tests and from results
    /// written before issue 33).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_reduction: Option<reduction::DataReduction>,
}

/// `TestResult` as read, before its sections are typed by `test`.
#[derive(Deserialize)]
struct TestResultWire {
    schema_version: u32,
    tool_version: String,
    test: TestKind,
    verdict: Verdict,
    reasons: Vec<String>,
    #[serde(default)]
    interrupted: bool,
    host: Host,
    started: String,
    ended: String,
    duration_s: f64,
    #[serde(default)]
    measured_start: Option<String>,
    #[serde(default)]
    measured_end: Option<String>,
    #[serde(default)]
    requested_start: Option<String>,
    #[serde(default)]
    start_skew_ms: Option<f64>,
    #[serde(default)]
    ready_at_start: Option<bool>,
    #[serde(default)]
    histogram_layout: Option<HistogramLayout>,
    #[serde(default)]
    io_engine: Option<String>,
    parameters: Parameters,
    target_iops: Option<f64>,
    achieved_iops: Option<f64>,
    instances: Vec<WireInstance>,
    host_counters: Option<HostCounters>,
    log_file: Option<PathBuf>,
    samples_file: Option<PathBuf>,
    #[serde(default)]
    totals: serde_json::Map<String, serde_json::Value>,
    #[serde(default)]
    data_reduction: Option<reduction::DataReduction>,
}

impl<'de> Deserialize<'de> for TestResult {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        use serde::de::Error as _;
        let wire = TestResultWire::deserialize(deserializer)?;
        check_schema_version(wire.schema_version).map_err(D::Error::custom)?;
        let test = wire.test;
        let totals = typed_totals(test, wire.totals)
            .map_err(|e| D::Error::custom(format!("totals: {e}")))?;
        let instances = wire
            .instances
            .into_iter()
            .map(|i| {
                let figures = typed_figures(test, i.extra)
                    .map_err(|e| D::Error::custom(format!("instance {}: {e}", i.name)))?;
                Ok(InstanceResult {
                    name: i.name,
                    database_path: i.database_path,
                    log_path: i.log_path,
                    io: i.io,
                    figures,
                })
            })
            .collect::<Result<Vec<_>, D::Error>>()?;
        Ok(TestResult {
            schema_version: wire.schema_version,
            tool_version: wire.tool_version,
            test,
            verdict: wire.verdict,
            reasons: wire.reasons,
            interrupted: wire.interrupted,
            host: wire.host,
            started: wire.started,
            ended: wire.ended,
            duration_s: wire.duration_s,
            measured_start: wire.measured_start,
            measured_end: wire.measured_end,
            requested_start: wire.requested_start,
            start_skew_ms: wire.start_skew_ms,
            ready_at_start: wire.ready_at_start,
            histogram_layout: wire.histogram_layout,
            io_engine: wire.io_engine,
            parameters: wire.parameters,
            target_iops: wire.target_iops,
            achieved_iops: wire.achieved_iops,
            instances,
            host_counters: wire.host_counters,
            log_file: wire.log_file,
            samples_file: wire.samples_file,
            totals,
            data_reduction: wire.data_reduction,
        })
    }
}

/// The totals object of a `test` result as its type (also each host's in an aggregate).
pub(crate) fn typed_totals(
    test: TestKind,
    map: serde_json::Map<String, serde_json::Value>,
) -> Result<Totals, serde_json::Error> {
    if map.is_empty() {
        return Ok(Totals::None);
    }
    let value = serde_json::Value::Object(map);
    Ok(match test {
        TestKind::Init => Totals::Init(serde_json::from_value(value)?),
        TestKind::Performance | TestKind::Stress => {
            Totals::Workload(serde_json::from_value(value)?)
        }
        TestKind::Checksum => Totals::Checksum(serde_json::from_value(value)?),
        TestKind::Backup => Totals::Backup(serde_json::from_value(value)?),
        TestKind::Recovery => Totals::Recovery(serde_json::from_value(value)?),
    })
}

/// The test-specific keys of an instance object of a `test` result as their type.
fn typed_figures(
    test: TestKind,
    map: serde_json::Map<String, serde_json::Value>,
) -> Result<InstanceFigures, serde_json::Error> {
    if map.is_empty() {
        return Ok(InstanceFigures::None);
    }
    let value = serde_json::Value::Object(map);
    Ok(match test {
        TestKind::Init => InstanceFigures::None,
        TestKind::Performance | TestKind::Stress => {
            InstanceFigures::Workload(Box::new(serde_json::from_value(value)?))
        }
        TestKind::Checksum => InstanceFigures::Checksum(Box::new(serde_json::from_value(value)?)),
        TestKind::Backup => InstanceFigures::Backup(Box::new(serde_json::from_value(value)?)),
        TestKind::Recovery => InstanceFigures::Recovery(Box::new(serde_json::from_value(value)?)),
    })
}

impl TestResult {
    /// A result of `test` that ends now: versions, host and end time filled in, no instances or
    /// totals yet, verdict pass until [`TestResult::set_reasons`] says otherwise.
    pub fn new(
        test: TestKind,
        started: String,
        duration_s: f64,
        parameters: Parameters,
    ) -> TestResult {
        TestResult {
            schema_version: SCHEMA_VERSION,
            tool_version: tool_version(),
            test,
            verdict: Verdict::Pass,
            reasons: Vec::new(),
            interrupted: false,
            host: Host::this(),
            started,
            ended: now_rfc3339(),
            duration_s,
            measured_start: None,
            measured_end: None,
            requested_start: None,
            start_skew_ms: None,
            ready_at_start: None,
            histogram_layout: Some(HistogramLayout::current()),
            io_engine: None,
            parameters,
            target_iops: None,
            achieved_iops: None,
            instances: Vec::new(),
            host_counters: None,
            log_file: None,
            samples_file: None,
            totals: Totals::None,
            data_reduction: None,
        }
    }

    /// Records the measured part's wall-clock window (and, with `--start-at`, what was asked).
    pub fn set_window(&mut self, window: &MeasuredWindow) {
        self.measured_start = Some(clock::rfc3339_millis(window.start));
        self.measured_end = Some(clock::rfc3339_millis(window.end));
        if let Some(requested) = window.requested {
            self.requested_start = Some(clock::rfc3339_millis(requested));
            self.start_skew_ms = Some(clock::millis_between(requested, window.start));
            self.ready_at_start = Some(window.ready_at_start);
        }
    }

    /// Sets the reasons and the verdict they imply: fail when there is any.
    pub fn set_reasons(&mut self, reasons: Vec<String>) {
        self.verdict = if reasons.is_empty() {
            Verdict::Pass
        } else {
            Verdict::Fail
        };
        self.reasons = reasons;
    }
}

/// The measured part of a test on the host's clock.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct MeasuredWindow {
    /// `--start-at`, when given.
    pub requested: Option<SystemTime>,
    pub start: SystemTime,
    pub end: SystemTime,
    /// With `--start-at`: everything meant to happen before it was done in time.
    pub ready_at_start: bool,
}

/// Host counters over the measured window.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HostCounters {
    pub cpu_percent: Stat,
    pub available_memory_mb: Stat,
    /// Jetstress's "Database Page Fault Stalls/sec": times per second a session found no free
    /// buffer in the database cache and waited for a flush, all instances together, per sample
    /// interval. Absent from schema versions before 3.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub database_page_fault_stalls_per_sec: Option<Stat>,
}

#[derive(Copy, Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Stat {
    pub average: f64,
    pub min: f64,
    pub max: f64,
}

/// One database instance.
///
/// In JSON the I/O classes and the test-specific figures sit side by side in the instance object
/// (`instances[].db_read.p99_ms`, `instances[].pages_seen`, `docs/results.md`); reading it back sorts each
/// key into `io` when it names an I/O class and into `figures` otherwise, typed by the test
/// ([`TestResult`]'s `Deserialize`). The classes are read straight into [`ClassSummary`] (not
/// through a `serde_json::Value` first): their histograms are most of a result's bytes, and
/// `jetproof aggregate` reads a thousand hosts' results.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct InstanceResult {
    pub name: String,
    pub database_path: PathBuf,
    pub log_path: PathBuf,
    /// One entry per I/O class that occurred, keyed `db_read`, `db_write`, `log_write`, ….
    #[serde(flatten)]
    pub io: BTreeMap<String, ClassSummary>,
    /// Test-specific figures of this instance (checksum per file, transactions, recovery
    /// timings, …).
    #[serde(flatten)]
    pub figures: InstanceFigures,
}

/// An instance object as read: its classes typed, its test-specific keys not yet.
struct WireInstance {
    name: String,
    database_path: PathBuf,
    log_path: PathBuf,
    io: BTreeMap<String, ClassSummary>,
    extra: serde_json::Map<String, serde_json::Value>,
}

impl<'de> Deserialize<'de> for WireInstance {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct InstanceVisitor;

        impl<'de> serde::de::Visitor<'de> for InstanceVisitor {
            type Value = WireInstance;

            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an instance object")
            }

            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<WireInstance, A::Error> {
                use serde::de::Error as _;
                let (mut name, mut database_path, mut log_path) = (None, None, None);
                let mut io = BTreeMap::new();
                let mut extra = serde_json::Map::new();
                while let Some(key) = map.next_key::<String>()? {
                    match key.as_str() {
                        "name" => name = Some(map.next_value::<String>()?),
                        "database_path" => database_path = Some(map.next_value::<PathBuf>()?),
                        "log_path" => log_path = Some(map.next_value::<PathBuf>()?),
                        class if IoClass::ALL.iter().any(|c| c.key() == class) => {
                            let figures: ClassSummary = map.next_value().map_err(|e| {
                                A::Error::custom(format!(
                                    "instance {}: `{class}`: {e}",
                                    name.as_deref().unwrap_or("?")
                                ))
                            })?;
                            io.insert(key, figures);
                        }
                        _ => {
                            extra.insert(key, map.next_value::<serde_json::Value>()?);
                        }
                    }
                }
                Ok(WireInstance {
                    name: name.ok_or_else(|| A::Error::missing_field("name"))?,
                    database_path: database_path
                        .ok_or_else(|| A::Error::missing_field("database_path"))?,
                    log_path: log_path.ok_or_else(|| A::Error::missing_field("log_path"))?,
                    io,
                    extra,
                })
            }
        }

        deserializer.deserialize_map(InstanceVisitor)
    }
}

/// The per-class figures of an instance snapshot covering `seconds`, keyed as in `result.json`.
pub fn snapshot_results(
    snapshot: &InstanceSnapshot,
    seconds: f64,
) -> BTreeMap<String, ClassSummary> {
    snapshot
        .classes
        .iter()
        .filter_map(|(class, snap)| {
            ClassSummary::from_snapshot(snap, seconds).map(|r| (class.key().to_string(), r))
        })
        .collect()
}

/// The per-class figures of an instance's stats, keyed as in `result.json`.
pub fn io_results(
    stats: &jetproof_io::meter::InstanceStats,
    elapsed: Duration,
) -> BTreeMap<String, ClassSummary> {
    IoClass::ALL
        .iter()
        .filter_map(|&class| {
            let seconds = elapsed.as_secs_f64();
            ClassSummary::from_snapshot(&stats.class(class).snapshot(), seconds)
                .map(|result| (class.key().to_string(), result))
        })
        .collect()
}

/// Now, as RFC 3339 UTC with seconds.
pub fn now_rfc3339() -> String {
    humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string()
}

/// The version of this build of jetproof.
pub fn tool_version() -> String {
    env!("CARGO_PKG_VERSION").to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use jetproof_io::meter::InstanceStats;

    #[test]
    fn class_result_from_recorded_ios() {
        let stats = InstanceStats::new("db1");
        for ms in 1..=100u64 {
            stats.class(IoClass::DbRead).record(32768, ms * 1_000_000);
        }
        let results = io_results(&stats, Duration::from_secs(10));
        let read = results.get("db_read").expect("db_read present");
        assert_eq!(read.count, 100);
        assert!((read.ops_per_sec - 10.0).abs() < 1e-9);
        assert!((read.avg_bytes - 32768.0).abs() < 1e-9);
        assert!((read.avg_latency_ms - 50.5).abs() < 0.5, "{read:?}");
        assert!((read.p99_ms - 99.0).abs() < 1.0, "{read:?}");
        assert!((read.max_ms - 100.0).abs() < 1.0, "{read:?}");
        assert!(!results.contains_key("db_write"));
    }

    #[test]
    fn instance_classes_flatten_into_the_instance_object() {
        let stats = InstanceStats::new("db1");
        stats.class(IoClass::LogWrite).record(4096, 500_000);
        let instance = InstanceResult {
            name: "db1".into(),
            database_path: "/d/db1.jpdb".into(),
            log_path: "/d/logs".into(),
            io: io_results(&stats, Duration::from_secs(1)),
            figures: InstanceFigures::Backup(Box::new(sections::BackupInstance {
                backup: sections::DatabaseBackup {
                    pages_seen: 128,
                    ..Default::default()
                },
            })),
        };
        let value = serde_json::to_value(&instance).expect("serialises");
        assert!(value["log_write"]["avg_bytes"].is_number(), "{value}");
        assert_eq!(value["backup"]["pages_seen"], 128, "{value}");
        let mut result =
            TestResult::new(TestKind::Backup, now_rfc3339(), 1.0, Parameters::default());
        result.instances.push(instance);
        let text = serde_json::to_string(&result).expect("serialises");
        let back: TestResult = serde_json::from_str(&text).expect("parses back");
        assert_eq!(back, result);
    }
}
