//! The test-specific sections of `result.json` as Rust types: the totals of each test, the
//! figures each test adds to an instance object, and what the procedure decided beside the job in
//! `parameters` (`docs/results.md`, "Test-specific totals").
//!
//! They serialise to the keys and number types the document has always had (integers stay
//! integers, rates stay floating point), so the JSON is unchanged; reading a document back picks
//! the section types by its `test` (see [`crate::TestResult`]'s `Deserialize`). A key a section
//! does not know is dropped on reading, as serde does; `tests::*round_trip*` and the fixtures in
//! `tests/fixtures/` check that every key jetproof writes is known.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::checksum::{ChecksumTotals, FileChecksum, LogChecksum};
use crate::verdict::Limits;

/// `totals` of a result: one variant per kind of test, serialised as its bare object.
#[derive(Clone, Debug, Default, PartialEq)]
pub enum Totals {
    /// No totals (the key is left out).
    #[default]
    None,
    Init(InitTotals),
    /// Performance and stress.
    Workload(WorkloadTotals),
    Checksum(ChecksumTotals),
    Backup(BackupTotals),
    /// `jetproof recover` and the soft-recovery test.
    Recovery(RecoveryTotals),
}

impl Serialize for Totals {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Totals::None => serializer.serialize_unit(),
            Totals::Init(t) => sorted(t, serializer),
            Totals::Workload(t) => sorted(t, serializer),
            Totals::Checksum(t) => sorted(t, serializer),
            Totals::Backup(t) => sorted(t, serializer),
            Totals::Recovery(t) => sorted(t, serializer),
        }
    }
}

impl Serialize for InstanceFigures {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            InstanceFigures::None => serializer.serialize_unit(),
            InstanceFigures::Workload(f) => sorted(f, serializer),
            InstanceFigures::Checksum(f) => sorted(f, serializer),
            InstanceFigures::Backup(f) => sorted(f, serializer),
            InstanceFigures::Recovery(f) => sorted(f, serializer),
        }
    }
}

/// Serialises a section with its keys in sorted order, as `result.json` has always had them (they
/// were maps before they were types), so that the document is the same byte for byte.
fn sorted<T: Serialize, S: serde::Serializer>(
    section: &T,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    use serde::ser::Error as _;
    let value = serde_json::to_value(section).map_err(S::Error::custom)?;
    debug_assert!(
        value.as_object().is_none_or(|map| map.keys().is_sorted()),
        "serde_json's map keeps keys sorted"
    );
    value.serialize(serializer)
}

impl Totals {
    pub fn is_none(&self) -> bool {
        matches!(self, Totals::None)
    }

    pub fn init(&self) -> Option<&InitTotals> {
        match self {
            Totals::Init(t) => Some(t),
            _ => None,
        }
    }

    pub fn workload(&self) -> Option<&WorkloadTotals> {
        match self {
            Totals::Workload(t) => Some(t),
            _ => None,
        }
    }

    /// The checksum test's totals, or the stress test's checksum pass's.
    pub fn checksum(&self) -> Option<&ChecksumTotals> {
        match self {
            Totals::Checksum(t) => Some(t),
            Totals::Workload(t) => t.checksum.as_ref(),
            _ => None,
        }
    }

    pub fn backup(&self) -> Option<&BackupTotals> {
        match self {
            Totals::Backup(t) => Some(t),
            _ => None,
        }
    }

    pub fn recovery(&self) -> Option<&RecoveryTotals> {
        match self {
            Totals::Recovery(t) => Some(t),
            _ => None,
        }
    }
}

/// `init`'s totals.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct InitTotals {
    /// An init that finished an interrupted one (copied its database): the records were counted
    /// by the first, so `records_per_database` is absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resumed: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub records_per_database: Option<u64>,
    pub database_bytes: u64,
    pub fill_seconds: f64,
    pub fill_mb_per_sec: f64,
    pub duplicate_bytes: u64,
    pub duplicate_seconds: f64,
    pub duplicate_mb_per_sec: f64,
    pub bytes_written: u64,
    pub seconds: f64,
    pub mb_per_sec: f64,
}

/// The performance and stress tests' totals.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct WorkloadTotals {
    pub measured_seconds: f64,
    pub transactions: u64,
    /// User + system CPU of the whole process over the measured window.
    pub process_cpu_seconds: f64,
    /// `process_cpu_seconds` in µs ÷ the window's database reads and writes; absent when there
    /// were none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_us_per_transactional_io: Option<f64>,
    /// The stress test's checksum pass.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checksum: Option<ChecksumTotals>,
    /// The devices behind the databases and logs, as the kernel saw them (issue 21).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub devices: Vec<crate::devices::DeviceWindow>,
    /// The events recorded with `jetproof mark` while the test ran (issue 37).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub marks: Vec<crate::excursion::Mark>,
    /// Every run of consecutive sample intervals in which an instance broke a latency
    /// threshold (issue 37; absent when there was none, and from results written before).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub excursions: Vec<crate::excursion::Excursion>,
}

/// The backup test's totals.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct BackupTotals {
    pub bytes: u64,
    pub seconds: f64,
    pub mb_per_sec: f64,
}

/// Recovery's totals (`jetproof recover` and the soft-recovery test).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RecoveryTotals {
    /// All replays, wall clock.
    pub recovery_seconds: f64,
    pub logs_replayed: u64,
    /// The soft-recovery test's log generation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generation_seconds: Option<f64>,
    /// The soft-recovery test: log files this test generated, all instances (the instances'
    /// `logs_generated` summed). `logs_replayed` also holds what was there before the test (the
    /// generation open at attach, and any an earlier test left past its checkpoint); only these
    /// count toward ESRP's 500 per instance. Absent for `jetproof recover` and in older results.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logs_generated: Option<u64>,
}

/// The test-specific figures of one instance, written beside its I/O classes in the instance
/// object.
#[derive(Clone, Debug, Default, PartialEq)]
pub enum InstanceFigures {
    /// None (init).
    #[default]
    None,
    /// Performance and stress.
    Workload(Box<WorkloadInstance>),
    Checksum(Box<ChecksumInstance>),
    Backup(Box<BackupInstance>),
    /// `jetproof recover` and the soft-recovery test.
    Recovery(Box<RecoveryInstance>),
}

impl InstanceFigures {
    pub fn workload(&self) -> Option<&WorkloadInstance> {
        match self {
            InstanceFigures::Workload(w) => Some(w),
            _ => None,
        }
    }

    pub fn workload_mut(&mut self) -> Option<&mut WorkloadInstance> {
        match self {
            InstanceFigures::Workload(w) => Some(w),
            _ => None,
        }
    }

    /// The checksum test's figures, or the stress test's checksum pass's.
    pub fn checksum(&self) -> Option<&ChecksumInstance> {
        match self {
            InstanceFigures::Checksum(c) => Some(c),
            InstanceFigures::Workload(w) => w.checksum.as_ref(),
            _ => None,
        }
    }

    pub fn backup(&self) -> Option<&BackupInstance> {
        match self {
            InstanceFigures::Backup(b) => Some(b),
            _ => None,
        }
    }

    pub fn recovery(&self) -> Option<&RecoveryInstance> {
        match self {
            InstanceFigures::Recovery(r) => Some(r),
            _ => None,
        }
    }

    /// A storage error stopped the instance (workload), its replay or its log generation
    /// (recovery).
    pub fn storage_error(&self) -> Option<&str> {
        match self {
            InstanceFigures::Workload(w) => w.error.as_deref(),
            InstanceFigures::Recovery(r) => r.error.as_deref().or(r.generation_error.as_deref()),
            InstanceFigures::Backup(b) => b.backup.error.as_deref(),
            _ => None,
        }
    }
}

/// One instance of a performance or stress test.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct WorkloadInstance {
    pub transactions: u64,
    pub transactions_per_sec: f64,
    pub achieved_iops: f64,
    pub sessions: u32,
    pub database_page_fault_stalls: u64,
    pub database_page_fault_stalls_per_sec: f64,
    pub cache_hits: u64,
    pub cache_misses: u64,
    pub db_size_initial_bytes: u64,
    pub db_size_final_bytes: u64,
    pub db_used_initial_bytes: u64,
    pub db_used_final_bytes: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub db_growth_bytes_per_transactional_io: Option<f64>,
    /// The space accounting from attach (issue 23): where split pages came from, what merges
    /// gave back, the file's growth, and how the free pages lie at the end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub db_space: Option<DbSpace>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paced_transactions_per_sec: Option<f64>,
    /// A storage error that stopped the instance.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub background_maintenance: Option<BackgroundMaintenance>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_replication: Option<LogReplication>,
    /// Pages read with one flipped bit and corrected in memory, from the attach on (absent from
    /// a run stopped before the measured window ended).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pages_corrected: Option<u64>,
    /// The first of them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub corrected_pages: Option<Vec<CorrectedPage>>,
    /// Damage found in the file before the attach.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file_problems: Option<Vec<String>>,
    /// The stress test's checksum pass over this instance.
    #[serde(flatten, default, skip_serializing_if = "Option::is_none")]
    pub checksum: Option<ChecksumInstance>,
}

/// A database's space accounting over a workload test (`db_space`, `docs/results.md`): counts
/// over the measured window (from attach until 2026-11-29), sizes at the end.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DbSpace {
    /// Split pages from the split page's own extent, a neighbour's extent, a wholly free
    /// extent, or elsewhere (root splits; pages merges freed among pages in use).
    pub pages_from_own_extent: u64,
    pub pages_from_neighbour_extent: u64,
    pub pages_from_free_extent: u64,
    pub pages_from_anywhere: u64,
    /// Pages given back by merges.
    pub pages_freed: u64,
    /// Times the file grew, and by how many bytes.
    pub extensions: u64,
    pub extension_bytes: u64,
    /// Leaf splits by kind.
    pub leaf_splits_append: u64,
    pub leaf_splits_hotpoint: u64,
    pub leaf_splits_even: u64,
    pub merges: u64,
    /// At the end: bytes of pages in use, free bytes in wholly free extents and in extents
    /// partly in use.
    pub final_used_bytes: u64,
    pub final_free_bytes_in_free_extents: u64,
    pub final_free_bytes_in_used_extents: u64,
    /// Of the last, the bytes of free pages with a page in use after them in their extent
    /// (space merges freed, which any split takes before the file grows; the rest is the room
    /// after each extent's last page in use, its owner's). Absent before 2026-11-29.
    #[serde(default)]
    pub final_free_bytes_between_used_pages: u64,
    /// Splits of interior nodes (the root's included). Absent before 2026-11-29.
    #[serde(default)]
    pub interior_splits: u64,
    /// Bytes of leaf entries (records with their keys and per-record overhead, as they lie in
    /// the leaves) that the window's changes added and removed; their difference is the bytes
    /// in records the database gained. Absent before 2026-11-29.
    #[serde(default)]
    pub leaf_bytes_added: u64,
    #[serde(default)]
    pub leaf_bytes_removed: u64,
}

/// Background database maintenance's figures of one instance.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct BackgroundMaintenance {
    pub passes: u64,
    pub pages_verified: u64,
    pub pages_rechecked_good: u64,
    pub damaged_pages: Vec<MaintenanceDamagedPage>,
}

/// What background database maintenance found a damaged page to be.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum MaintenanceDamage {
    /// Damaged beyond correction.
    Bad,
    /// One flipped bit (ESE would correct it in memory; the storage still returned it wrong).
    Correctable { bit: usize },
    /// A sound page that belongs at another position (a misdirected write).
    WrongPageNumber { found: u32 },
    /// A sound page older than its last completed write (the flush map's count): a lost write.
    LostWrite { expected: u16, found: u16 },
}

impl std::fmt::Display for MaintenanceDamage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MaintenanceDamage::Bad => write!(f, "bad page (checksum mismatch)"),
            MaintenanceDamage::Correctable { bit } => {
                write!(f, "correctable page (one flipped bit, bit {bit})")
            }
            MaintenanceDamage::WrongPageNumber { found } => {
                write!(f, "wrong page-number page (it says it is page {found})")
            }
            MaintenanceDamage::LostWrite { expected, found } => write!(
                f,
                "lost write (it carries write count {found}; its last completed write was count {expected})"
            ),
        }
    }
}

/// One page background database maintenance found damaged, with where it is.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MaintenanceDamagedPage {
    pub file: PathBuf,
    pub page: u64,
    #[serde(flatten)]
    pub damage: MaintenanceDamage,
}

impl std::fmt::Display for MaintenanceDamagedPage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} page {}: {}",
            self.file.display(),
            self.page,
            self.damage
        )
    }
}

/// Log replication's figures of one instance (copies > 1).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LogReplication {
    pub copies: u32,
    pub generations_read: u64,
    pub bytes_read: u64,
    pub frames_verified: u64,
}

/// A page read with one flipped bit, corrected.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CorrectedPage {
    pub page: u32,
    pub bit: u64,
}

/// One instance of the checksum test (or the stress test's checksum pass): its database file's
/// figures and its log files'.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ChecksumInstance {
    #[serde(flatten)]
    pub file: FileChecksum,
    pub log_files: LogChecksum,
}

/// One instance of the backup test.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct BackupInstance {
    pub backup: DatabaseBackup,
}

/// What the backup of one database found.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DatabaseBackup {
    pub bytes: u64,
    pub seconds: f64,
    pub mb_per_sec: f64,
    pub pages_seen: u64,
    /// Pages whose checksum failed (not correctable), by page number.
    pub bad_pages: Vec<u64>,
    /// Pages with a single flipped bit (the copy holds them as on disk, flipped bit included:
    /// a backup never repairs).
    pub correctable_pages: Vec<u64>,
    pub wrong_number_pages: Vec<u64>,
    /// Pages whose checksum is good but which are older than their last acknowledged write
    /// (the flush map's count): lost writes, copied as they are and reported.
    pub lost_write_pages: Vec<u64>,
    /// Pages newer than the flush map says they were written (the database was shut down
    /// cleanly, so the map holds every write): written behind jetproof's back.
    pub newer_than_flush_map_pages: Vec<u64>,
    /// The finished copy (`--to`): set only once the copy was written whole, synced, read back
    /// equal to what was read from the database, and renamed from `NAME.partial` to its name.
    pub copy_path: Option<PathBuf>,
    /// Why the backup of this database stopped (a read or write error, the copy read back
    /// different): no copy is left under its name. Absent when none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// One instance of a recovery (`jetproof recover`, the soft-recovery test).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RecoveryInstance {
    /// Soft recovery: log files generated before the replay.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logs_generated: Option<u64>,
    /// Soft recovery: a storage error stopped the log generation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generation_error: Option<String>,
    /// What the replay did (absent when it failed).
    #[serde(flatten, default, skip_serializing_if = "Option::is_none")]
    pub replay: Option<ReplayFigures>,
    /// Why the replay failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The log provably lost records (`docs/log.md`): where it ends and the pages past it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lost_log: Option<LostLog>,
    /// The replay's rates per sample interval (the job's `run.sample_interval`), the last one
    /// ending when the replay did. Absent in results older than schema 5's 2026-11-27 addition.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub replay_samples: Vec<ReplaySample>,
}

/// One sample interval of a replay: its I/O rates over that interval.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ReplaySample {
    /// Seconds from the replays' start to the interval's end.
    pub elapsed_s: f64,
    /// The interval's length in seconds (the last one is shorter: it ends with the replay).
    pub interval_s: f64,
    /// Log MB (10^6 bytes) read per second.
    pub log_read_mb_per_sec: f64,
    pub db_reads_per_sec: f64,
    pub db_writes_per_sec: f64,
}

/// The figures of one replay.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ReplayFigures {
    pub logs_replayed: u64,
    pub seconds: f64,
    pub seconds_per_log: f64,
    pub records_applied: u64,
    pub records_skipped: u64,
    pub pages_written: u64,
    pub pages_read: u64,
    pub pages_read_ahead: u64,
    pub read_ahead_waits: u64,
    pub uncommitted_transactions: u64,
    pub transactions_rolled_back: u64,
    pub undo_entries: u64,
    pub records_purged: u64,
    pub torn_tail: bool,
    /// Pages the replay read with one flipped bit, corrected and written back.
    pub pages_corrected: Vec<CorrectedPage>,
    /// CPU time of the replaying thread.
    pub cpu_seconds: f64,
    /// `cpu_seconds` ÷ `seconds`.
    pub cpu_share: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_us_per_record: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_us_per_record_replayed: Option<f64>,
}

/// Where a log that lost records ends, and the pages on disk with changes past that end.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LostLog {
    pub log_file: PathBuf,
    pub log_end: crate::checksum::Position,
    /// The first 20 of them.
    pub pages: Vec<u32>,
    pub page_count: u64,
}

/// `parameters`: the job as run (its TOML as JSON, kept as it is: the job's own crate owns its
/// shape) and what the procedure decided beside it. Serialised as one object, keys sorted.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
pub struct Parameters {
    /// Performance and stress: the sessions each instance ran with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sessions_per_instance: Option<u32>,
    /// Performance and stress: the thresholds the verdict was judged on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<Limits>,
    /// Performance and stress: whether the log's I/O is measured (always, since the engine
    /// writes its log).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_integrated: Option<bool>,
    /// Performance and stress with auto-tune.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub autotune: Option<Autotune>,
    /// The checksum test's reads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checksum: Option<ChecksumParameters>,
    /// The soft-recovery test's settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub soft_recovery: Option<SoftRecoveryParameters>,
    /// `jetproof recover`'s settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recover: Option<RecoverParameters>,
    /// The job as run.
    #[serde(flatten)]
    pub job: serde_json::Map<String, serde_json::Value>,
}

/// `Parameters` as serialised by derive: the decided keys, then the job's.
#[derive(Serialize)]
struct ParametersOut<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    sessions_per_instance: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    limits: Option<&'a Limits>,
    #[serde(skip_serializing_if = "Option::is_none")]
    log_integrated: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    autotune: Option<&'a Autotune>,
    #[serde(skip_serializing_if = "Option::is_none")]
    checksum: Option<&'a ChecksumParameters>,
    #[serde(skip_serializing_if = "Option::is_none")]
    soft_recovery: Option<&'a SoftRecoveryParameters>,
    #[serde(skip_serializing_if = "Option::is_none")]
    recover: Option<&'a RecoverParameters>,
    #[serde(flatten)]
    job: &'a serde_json::Map<String, serde_json::Value>,
}

impl Serialize for Parameters {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        sorted(
            &ParametersOut {
                sessions_per_instance: self.sessions_per_instance,
                limits: self.limits.as_ref(),
                log_integrated: self.log_integrated,
                autotune: self.autotune.as_ref(),
                checksum: self.checksum.as_ref(),
                soft_recovery: self.soft_recovery.as_ref(),
                recover: self.recover.as_ref(),
                job: &self.job,
            },
            serializer,
        )
    }
}

impl Parameters {
    /// The job (anything that serialises to a JSON object) with nothing decided yet.
    pub fn of_job<J: Serialize>(job: &J) -> Parameters {
        let job = match serde_json::to_value(job) {
            Ok(serde_json::Value::Object(map)) => map,
            _ => serde_json::Map::new(),
        };
        Parameters {
            job,
            ..Parameters::default()
        }
    }

    /// A table of the job (`workload`, `cache`, `storage`, …), when the job has it.
    pub fn job_table(&self, key: &str) -> Option<&serde_json::Map<String, serde_json::Value>> {
        self.job.get(key)?.as_object()
    }
}

/// What auto-tune did (`docs/workload.md`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Autotune {
    /// `chosen`, `unreachable` or `stopped`.
    pub outcome: String,
    pub chosen_sessions: Option<u32>,
    pub sessions_used: u32,
    pub why: Option<String>,
    pub target_iops: Option<f64>,
    pub margin: f64,
    pub trial_settle_s: f64,
    pub trial_measure_s: f64,
    /// Every trial, as the auto-tuner recorded it.
    pub trials: Vec<AutotuneTrial>,
}

/// What one auto-tune trial measured. The fields are in alphabetical order because that is the
/// order `result.json` has always had them in (they were written through a JSON map).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct AutotuneTrial {
    /// Transactional IOPS (database reads + writes per second) over all instances.
    pub achieved_iops: f64,
    /// The worst instance's database read average latency.
    pub db_read_avg_ms: f64,
    /// The worst instance's log write average latency, when log writes occurred.
    pub log_write_avg_ms: Option<f64>,
    /// Reached the target (with the margin) within the thresholds.
    pub passed: bool,
    pub sessions: u32,
    /// The slowest instance's transactional IOPS times the number of instances.
    pub slowest_instance_iops_times_instances: f64,
    /// Every instance held the average latency thresholds.
    pub within_thresholds: bool,
}

/// The checksum test's reads.
#[derive(Copy, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ChecksumParameters {
    pub read_size_bytes: u64,
    pub direct_io: bool,
}

/// The soft-recovery test's settings.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SoftRecoveryParameters {
    pub log_files: u64,
    pub sessions: u32,
    pub recovery: String,
}

/// `jetproof recover`'s settings.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RecoverParameters {
    pub recovery: String,
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// A `db_space` written before 2026-11-29 (no `final_free_bytes_between_used_pages`,
    /// `interior_splits`, `leaf_bytes_added`, `leaf_bytes_removed`) still reads, with those
    /// counts 0, and a new one keeps them through a round trip.
    #[test]
    fn db_space_of_an_older_result_reads_with_the_newer_counts_zero() {
        let old = r#"{"pages_from_own_extent": 5, "pages_from_neighbour_extent": 1,
            "pages_from_free_extent": 2, "pages_from_anywhere": 0, "pages_freed": 0,
            "extensions": 1, "extension_bytes": 8388608, "leaf_splits_append": 0,
            "leaf_splits_hotpoint": 7, "leaf_splits_even": 1, "merges": 0,
            "final_used_bytes": 1048576, "final_free_bytes_in_free_extents": 0,
            "final_free_bytes_in_used_extents": 32768}"#;
        let space: DbSpace = serde_json::from_str(old).unwrap();
        assert_eq!(space.leaf_splits_hotpoint, 7);
        assert_eq!(
            (
                space.final_free_bytes_between_used_pages,
                space.interior_splits,
                space.leaf_bytes_added,
                space.leaf_bytes_removed
            ),
            (0, 0, 0, 0)
        );
        let new = DbSpace {
            interior_splits: 3,
            leaf_bytes_added: 1_000,
            leaf_bytes_removed: 400,
            ..space
        };
        let again: DbSpace = serde_json::from_str(&serde_json::to_string(&new).unwrap()).unwrap();
        assert_eq!(again, new);
    }
}
