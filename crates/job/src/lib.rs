//! The job file: one TOML document that says what is simulated, where the databases live, how the
//! workload behaves and what the thresholds are. `plan` writes it; `init`, `run`, `checksum` and
//! `recover` read it. Without a file, [`Job::default`] is the built-in job: small and safe, under
//! `./jetproof-data`.
//!
//! Every key is optional and has a default; unknown keys are refused (a typo must not silently
//! fall back to a default). [`Job::validate`] checks every value before any I/O and names the key
//! and the fix in its error.

pub mod units;

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

pub use units::{ByteSize, Span};

/// A complete job. Field names are the TOML keys.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
#[derive(Default)]
pub struct Job {
    pub simulation: Simulation,
    pub storage: Storage,
    pub workload: Workload,
    pub cache: Cache,
    pub log: Log,
    pub run: Run,
    pub thresholds: Thresholds,
}

/// What is being simulated: the mailbox profile behind the target rate and the database size.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Simulation {
    /// Mailboxes served by this server (all its databases together).
    pub mailboxes: u64,
    /// Transactional IOPS per mailbox, headroom included. 0 means no target: run flat out.
    pub iops_per_mailbox: f64,
    /// Mailbox quota; with `capacity_percent` it sizes the databases when `storage.db_size` is
    /// unset.
    pub mailbox_size: ByteSize,
    /// Share of the quota actually filled, in percent (1–100).
    pub capacity_percent: u32,
    /// Copies of each database (1 = no replication). Above 1, closed logs are read back as a
    /// replication sender would, and the checkpoint depth defaults to 100 MiB.
    pub copies_per_database: u32,
}

/// Where and how big the databases are.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Storage {
    /// Directory holding one folder per database instance (ignored for instances listed in
    /// `storage.instance`).
    pub data_dir: PathBuf,
    /// Number of database instances under `data_dir`.
    pub databases: u32,
    /// Size of each database. Unset: mailboxes × mailbox_size × capacity_percent / databases.
    pub db_size: Option<ByteSize>,
    /// Database page size: 4KiB, 8KiB, 16KiB or 32KiB (Exchange 2010 and later: 32KiB).
    pub page_size: ByteSize,
    /// How full `init` leaves each leaf, in percent (20–100): ESE's table density
    /// (`JetCreateTable`'s `ulDensity`, 80 when a table does not set it). Sequential loading keeps
    /// the rest free, so the workload's first inserts into a loaded leaf fit in place.
    pub table_density: u32,
    /// Bypass the host's page cache (O_DIRECT). Turning it off measures the host's memory, not the
    /// storage; reports then say so.
    pub direct_io: bool,
    /// Allow raw block devices as database or log paths. Their content is destroyed.
    pub allow_devices: bool,
    /// How the database and log files are read and written: "std" (pread/pwrite from each
    /// session's thread, the default), "io_uring", or "auto" (io_uring when the kernel allows
    /// it, else std, with a line in the test log). See docs/io.md.
    pub io_engine: IoEngine,
    /// Explicit instances, each with its own database file and log directory (as Jetstress lets
    /// each database and log sit on its own volume). When present, `data_dir` and `databases` are
    /// not used.
    pub instance: Vec<InstanceSpec>,
}

/// The I/O engine of `storage.io_engine` (and `--io-engine`).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Default)]
pub enum IoEngine {
    /// Portable positional I/O (pread/pwrite): every session thread waits for its own I/O.
    #[default]
    Std,
    /// io_uring rings: the same I/Os, and a flush's writes overlapped in one submission. An
    /// error (exit 2) when the kernel does not allow io_uring.
    IoUring,
    /// io_uring when it works here, else std (said in the test log).
    Auto,
}

impl IoEngine {
    /// Every value, as written in the job file.
    pub const ALL: [IoEngine; 3] = [IoEngine::Std, IoEngine::IoUring, IoEngine::Auto];

    /// The value as written in the job file.
    pub fn name(self) -> &'static str {
        match self {
            IoEngine::Std => "std",
            IoEngine::IoUring => "io_uring",
            IoEngine::Auto => "auto",
        }
    }
}

impl std::fmt::Display for IoEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for IoEngine {
    type Err = String;
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        IoEngine::ALL
            .into_iter()
            .find(|engine| engine.name() == text)
            .ok_or_else(|| {
                format!("{text:?} is not an I/O engine; use \"std\", \"io_uring\" or \"auto\"")
            })
    }
}

impl Serialize for IoEngine {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> Deserialize<'de> for IoEngine {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        text.parse()
            .map_err(|e| serde::de::Error::custom(format!("`storage.io_engine`: {e}")))
    }
}

/// One database instance placed explicitly.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InstanceSpec {
    pub name: String,
    pub database_path: PathBuf,
    pub log_path: PathBuf,
}

/// How sessions use the databases.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Workload {
    /// Sessions per database instance, or "auto" to find the smallest count that reaches the
    /// target.
    pub threads: Threads,
    pub insert_percent: u32,
    pub delete_percent: u32,
    pub replace_percent: u32,
    pub read_percent: u32,
    /// Share of commits that do not wait for the log to be durable.
    pub lazy_commit_percent: u32,
    /// Average record size. The default, 2,400 bytes, makes `init` hold what the seeds' databases
    /// hold per record on disk (1.5 TB for 522.9 M records: ~3,150 bytes with the pages' free
    /// space at the table density), see `docs/workload.md`.
    pub record_size: ByteSize,
    /// Background database maintenance: a paced sequential checksum scan while the workload runs.
    pub background_maintenance: bool,
    /// Read size of the maintenance scan and of the backup test.
    pub maintenance_read_size: ByteSize,
    /// How far the content `init` and the sessions write compresses (vdbench's `compratio`):
    /// 1.0 incompressible (the default: an array that compresses gains nothing, the
    /// conservative case) up to 8.0 (`docs/design.md`, "Content and data reduction").
    pub compression_ratio: f64,
    /// Blocks over distinct blocks of the data written (vdbench's `dedupratio`): 1.0, no block
    /// repeated (the default). Above 1, `init` lays down long-value pages (attachments) whose
    /// blocks repeat, a share [`long_value_share`] of each database's pages; at most
    /// [`max_dedup_ratio`] for the page size and `dedup_unit`.
    pub dedup_ratio: f64,
    /// The array's block (vdbench's `dedupunit`): duplicates and compression are measured on
    /// blocks of this size, aligned to it in the file. Default 8 KiB.
    pub dedup_unit: ByteSize,
}

/// Most sessions per instance that `threads = "auto"` may start (auto-tune's search stops
/// there; the host's thread check counts a run of "auto" at this many).
pub const AUTO_MAX_SESSIONS: u32 = 256;

/// A session count, or automatic tuning.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Threads {
    Auto,
    Fixed(u32),
}

impl Serialize for Threads {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Threads::Auto => s.serialize_str("auto"),
            Threads::Fixed(n) => s.serialize_u32(*n),
        }
    }
}

impl<'de> Deserialize<'de> for Threads {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Number(i64),
            Text(String),
        }
        match Raw::deserialize(d)? {
            Raw::Number(n) if n >= 0 => Ok(Threads::Fixed(
                u32::try_from(n).map_err(serde::de::Error::custom)?,
            )),
            Raw::Text(t) if t.eq_ignore_ascii_case("auto") => Ok(Threads::Auto),
            _ => Err(serde::de::Error::custom(
                "expected a positive number of sessions or \"auto\"",
            )),
        }
    }
}

/// The database cache of each instance.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Cache {
    /// Minimum cache size per instance (Jetstress: 32 MiB).
    pub min_size: ByteSize,
    /// Maximum cache size per instance (Jetstress: 256 MiB).
    pub max_size: ByteSize,
    /// Log distance after which the oldest dirty pages are flushed. Unset: 20 MiB for a single
    /// copy, 100 MiB when the database has copies.
    pub checkpoint_depth: Option<ByteSize>,
    /// Database page writes in flight at once per database (write-back depth), 1 to 1024.
    /// Default 32: ESE keeps up to 96 flush writes outstanding per process
    /// (`JET_paramCheckpointIOMax`, 8–1024), shared by its databases (`docs/design.md`,
    /// "Write-back").
    pub write_back_depth: i64,
}

/// The default of `cache.write_back_depth`.
pub const DEFAULT_WRITE_BACK_DEPTH: i64 = 32;

/// The most writes in flight `cache.write_back_depth` allows.
pub const MAX_WRITE_BACK_DEPTH: i64 = 1024;

/// The highest `workload.compression_ratio`: above it a 512-byte chunk of content holds fewer
/// than 64 random bytes and the pages' own structure (headers, slots, keys) decides the measured
/// figure more than the setting does (`docs/design.md`, "Content and data reduction").
pub const MAX_COMPRESSION_RATIO: f64 = 8.0;

/// Of the long-value pages `init` lays down for `workload.dedup_ratio` above 1, the share that
/// hold a copy of an attachment from the job's shared pool (the same file mailed to many
/// mailboxes, in this database or another); the rest hold attachments of their own.
pub const LONG_VALUE_POOL_SHARE: f64 = 0.9;

/// Pool draws per pool attachment, on average over the job: the pool's first copies are
/// distinct blocks too, so the pool is sized to be one hundredth of its draws.
pub const LONG_VALUE_POOL_COPIES: f64 = 100.0;

/// The most of a database's pages long values may take: the rest hold the records.
pub const MAX_LONG_VALUE_SHARE: f64 = 0.9;

/// Of a long-value page's `dedup_unit` blocks, the share that can repeat: all but the first,
/// which holds the page header (page number, checksums). 0 when a page is one block or less.
pub fn repeatable_block_share(page_size: u64, dedup_unit: u64) -> f64 {
    let blocks = page_size / dedup_unit.max(1);
    if blocks < 2 {
        return 0.0;
    }
    (blocks - 1) as f64 / blocks as f64
}

/// The share of a database's pages `init` makes long-value pages for `dedup_ratio`: a share
/// `1 - 1 / dedup_ratio` of all blocks must repeat, and of the long-value pages' blocks the
/// repeatable ones ([`repeatable_block_share`]) of the pool's pages
/// ([`LONG_VALUE_POOL_SHARE`], less the pool's own first copies) do. 0 at 1.0.
pub fn long_value_share(dedup_ratio: f64, page_size: u64, dedup_unit: u64) -> f64 {
    if !dedup_ratio.is_finite() || dedup_ratio <= 1.0 {
        return 0.0;
    }
    let repeated = repeatable_block_share(page_size, dedup_unit)
        * LONG_VALUE_POOL_SHARE
        * (1.0 - 1.0 / LONG_VALUE_POOL_COPIES);
    if repeated <= 0.0 {
        return f64::INFINITY;
    }
    (1.0 - 1.0 / dedup_ratio) / repeated
}

/// The highest `workload.dedup_ratio` a page size and `dedup_unit` can hold: long values on
/// [`MAX_LONG_VALUE_SHARE`] of the pages. 1.0 when a page is a single block.
pub fn max_dedup_ratio(page_size: u64, dedup_unit: u64) -> f64 {
    let repeated = MAX_LONG_VALUE_SHARE
        * repeatable_block_share(page_size, dedup_unit)
        * LONG_VALUE_POOL_SHARE
        * (1.0 - 1.0 / LONG_VALUE_POOL_COPIES);
    // Rounded down to two places, so the bound quoted is one the check accepts.
    ((1.0 / (1.0 - repeated)) * 100.0).floor() / 100.0
}

/// The transaction log of each instance.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Log {
    /// Size of one log generation file.
    pub file_size: ByteSize,
    /// Size of the in-memory log buffer (the largest log write).
    pub buffer_size: ByteSize,
    /// Log writes start and end on multiples of this: a durable commit's write fills its last
    /// sector, any other write's partial last sector is written again by the next write. 4 KiB
    /// as ESE's log segments since Exchange 2013; Exchange 2010 and earlier wrote 512-byte
    /// sectors. Raised to the device's alignment under direct I/O.
    pub sector_size: ByteSize,
    /// Keep log files older than the checkpoint (replication and soft recovery need them).
    pub keep_files: bool,
    /// Reuse log files instead of keeping them.
    pub circular: bool,
}

/// Timing of a test run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Run {
    /// Length of the measured window of a performance test.
    pub duration: Span,
    /// Length of the measured window of a stress test.
    pub stress_duration: Span,
    /// How often counters are sampled into samples.csv.
    pub sample_interval: Span,
    /// Log generations per instance for the soft-recovery test (ESRP: 500).
    pub recovery_log_files: u32,
    /// Verify every page and log file after a performance test, in the same run and result
    /// (ESRP's test set does: "checksum after performance and stress").
    pub checksum_after_performance: bool,
    /// Verify every page and log file after a stress test (Jetstress always does).
    pub checksum_after_stress: bool,
    /// This run is a rehearsal of a solution at its reduced scale (`jetproof job --from-solution
    /// FILE --rehearsal`), not a test of it: changes nothing that runs; every report and the
    /// ESRP document made from its result say so.
    pub rehearsal: bool,
}

/// Pass/fail thresholds. Maxima are judged on the per-interval averages, as Jetstress does.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Thresholds {
    pub db_read_avg_ms: f64,
    /// Unset: 100 ms for performance, 200 ms for stress.
    pub db_read_max_ms: Option<f64>,
    pub log_write_avg_ms: f64,
    /// Unset: 100 ms for performance, 200 ms for stress.
    pub log_write_max_ms: Option<f64>,
    /// The most *Database Page Fault Stalls/sec* (sessions waiting for a free cache buffer,
    /// all instances together) the measured window may average: Jetstress fails a test above 1.
    pub page_fault_stalls_per_sec: f64,
    /// Failure-mode verdict (issue 37): when set, the latency thresholds judge each
    /// *excursion* (a run of consecutive sample intervals in which an instance's interval
    /// average broke `db_read_avg_ms` or `log_write_avg_ms`) instead of the window's figures:
    /// the test passes when every excursion returned within bounds within this span.
    pub max_excursion: Option<Span>,
    /// With `max_excursion`: the most excursions the window may hold (unset: any number).
    pub max_excursions: Option<u32>,
}

impl Default for Simulation {
    fn default() -> Self {
        Simulation {
            mailboxes: 100,
            iops_per_mailbox: 0.0,
            mailbox_size: ByteSize::mib(10),
            capacity_percent: 100,
            copies_per_database: 1,
        }
    }
}

/// The data directory of the built-in default job.
pub const DEFAULT_DATA_DIR: &str = "./jetproof-data";

impl Default for Storage {
    fn default() -> Self {
        Storage {
            data_dir: PathBuf::from(DEFAULT_DATA_DIR),
            databases: 2,
            db_size: Some(ByteSize::mib(512)),
            page_size: ByteSize::kib(32),
            direct_io: true,
            allow_devices: false,
            io_engine: IoEngine::Std,
            table_density: 80,
            instance: Vec::new(),
        }
    }
}

impl Default for Workload {
    fn default() -> Self {
        Workload {
            threads: Threads::Fixed(2),
            insert_percent: 40,
            delete_percent: 20,
            replace_percent: 5,
            read_percent: 35,
            lazy_commit_percent: 70,
            record_size: ByteSize(2400),
            background_maintenance: true,
            maintenance_read_size: ByteSize::kib(256),
            compression_ratio: 1.0,
            dedup_ratio: 1.0,
            dedup_unit: ByteSize::kib(8),
        }
    }
}

impl Default for Cache {
    fn default() -> Self {
        // The built-in job's databases are small; a 32 MiB cache keeps them well over ten
        // times the cache, so reads still miss as they do on a real server. Jetstress's own
        // defaults (32 MiB / 256 MiB) are what `plan` writes for real sizes.
        Cache {
            min_size: ByteSize::mib(8),
            max_size: ByteSize::mib(32),
            checkpoint_depth: None,
            write_back_depth: DEFAULT_WRITE_BACK_DEPTH,
        }
    }
}

impl Default for Log {
    fn default() -> Self {
        Log {
            file_size: ByteSize::mib(1),
            buffer_size: ByteSize::mib(1),
            sector_size: ByteSize::kib(4),
            keep_files: false,
            circular: false,
        }
    }
}

impl Default for Run {
    fn default() -> Self {
        Run {
            duration: Span::secs(60),
            stress_duration: Span::secs(300),
            sample_interval: Span::secs(5),
            recovery_log_files: 32,
            checksum_after_performance: false,
            checksum_after_stress: true,
            rehearsal: false,
        }
    }
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            db_read_avg_ms: 20.0,
            db_read_max_ms: None,
            log_write_avg_ms: 10.0,
            log_write_max_ms: None,
            page_fault_stalls_per_sec: 1.0,
            max_excursion: None,
            max_excursions: None,
        }
    }
}

/// A job value that cannot be used. Names the key (as written in the job file, or the flag that
/// set it) and says how to fix it.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum JobError {
    #[error("{path}: {message}")]
    Parse { path: String, message: String },
    #[error("`{field}` {problem}; {fix}")]
    Invalid {
        field: String,
        problem: String,
        fix: String,
    },
}

fn invalid(field: &str, problem: impl Into<String>, fix: impl Into<String>) -> JobError {
    JobError::Invalid {
        field: field.to_string(),
        problem: problem.into(),
        fix: fix.into(),
    }
}

/// The smallest `simulation.iops_per_mailbox` other than 0: below it a run of hours does no I/O
/// at all and its verdict compares zeros (issue 34, point 6). Microsoft's tables start at 0.006.
pub const MIN_IOPS_PER_MAILBOX: f64 = 0.0001;

/// The largest `simulation.iops_per_mailbox`. Far above any mailbox (Microsoft's tables end at
/// 0.48) on purpose: an unreachable target is how a user asks auto-tune for the storage's limit.
pub const MAX_IOPS_PER_MAILBOX: f64 = 1_000_000.0;

/// The largest target of one server, `mailboxes × iops_per_mailbox`, in IOPS: a billion, a
/// thousand times what the fastest array does, and a figure every report still prints exactly.
pub const MAX_TARGET_IOPS: f64 = 1e9;

/// The largest latency threshold (`thresholds.*_ms`): an hour, in milliseconds.
pub const MAX_LATENCY_THRESHOLD_MS: f64 = 3_600_000.0;

/// The largest `thresholds.page_fault_stalls_per_sec` (Jetstress's limit is 1).
pub const MAX_STALLS_PER_SEC: f64 = 1_000_000.0;

/// The largest job file read: a job of a thousand instances is well under it.
pub const MAX_JOB_FILE_BYTES: u64 = 4 << 20;

/// The longest duration a job may give (a year): a test window, a stress window or a sample
/// interval beyond it is a mistake, and every clock sum on it stays far from overflow.
pub const MAX_SPAN: Span = Span(std::time::Duration::from_secs(366 * 24 * 3600));

/// The largest size a job may give (1 PiB): no database, cache or log file is larger, and every
/// sum and product of sizes in a run stays far from `u64::MAX`.
pub const MAX_BYTE_SIZE: ByteSize = ByteSize(1 << 50);

/// The page sizes the engine supports.
pub const PAGE_SIZES: [u64; 4] = [4096, 8192, 16384, 32768];

/// Where one database instance lives, resolved from the job.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Instance {
    pub name: String,
    pub database_path: PathBuf,
    pub log_path: PathBuf,
}

impl Job {
    /// Reads and validates a job file.
    ///
    /// The path must be a regular file (or a link to one) of at most [`MAX_JOB_FILE_BYTES`]; a
    /// device, directory, named pipe or socket is refused before it is read (reading `/dev/zero`
    /// would never end, and opening a pipe with no writer would wait forever), through the one
    /// checked reader, [`jetproof_io::input`].
    pub fn load(path: &Path) -> Result<Job, JobError> {
        use jetproof_io::input::{InputError, read_text};
        let text = read_text(path, MAX_JOB_FILE_BYTES).map_err(|e| JobError::Parse {
            path: path.display().to_string(),
            message: match e {
                InputError::NotRegular(what) => format!(
                    "is {what}, not a job file; give the path of a TOML job file (`jetproof plan --write-job FILE` writes one)"
                ),
                InputError::TooLarge { .. } => format!(
                    "{e}: no job file is that large; give the path of a TOML job file"
                ),
                other => format!("cannot read the job file: {other}"),
            },
        })?;
        Job::parse(&text, &path.display().to_string())
    }

    /// Parses and validates a job from TOML text; `origin` names it in errors.
    pub fn parse(text: &str, origin: &str) -> Result<Job, JobError> {
        let job: Job = toml::from_str(text).map_err(|e| JobError::Parse {
            path: origin.to_string(),
            message: e.to_string().trim_end().to_string(),
        })?;
        job.validate()?;
        Ok(job)
    }

    /// The job as TOML, as `plan --write-job` writes it.
    pub fn to_toml(&self) -> String {
        match toml::to_string_pretty(self) {
            Ok(text) => text,
            Err(e) => panic!("a job always serialises: {e}"),
        }
    }

    /// Target transactional IOPS for this server, or None to run flat out.
    pub fn target_iops(&self) -> Option<f64> {
        let target = self.simulation.mailboxes as f64 * self.simulation.iops_per_mailbox;
        (target > 0.0).then_some(target)
    }

    /// Size of each database file.
    pub fn db_size(&self) -> ByteSize {
        match self.storage.db_size {
            Some(size) => size,
            None => {
                let total = self.simulation.mailboxes as u128
                    * self.simulation.mailbox_size.bytes() as u128
                    * self.simulation.capacity_percent as u128
                    / 100;
                let count = self.instance_count().max(1) as u128;
                ByteSize(u64::try_from(total / count).unwrap_or(u64::MAX))
            }
        }
    }

    pub fn instance_count(&self) -> usize {
        if self.storage.instance.is_empty() {
            self.storage.databases as usize
        } else {
            self.storage.instance.len()
        }
    }

    /// The database instances, with their paths.
    pub fn instances(&self) -> Vec<Instance> {
        if !self.storage.instance.is_empty() {
            return self
                .storage
                .instance
                .iter()
                .map(|i| Instance {
                    name: i.name.clone(),
                    database_path: i.database_path.clone(),
                    log_path: i.log_path.clone(),
                })
                .collect();
        }
        (1..=self.storage.databases)
            .map(|n| {
                let dir = self.storage.data_dir.join(format!("db{n}"));
                Instance {
                    name: format!("db{n}"),
                    database_path: dir.join(format!("db{n}.jpdb")),
                    log_path: dir.join("logs"),
                }
            })
            .collect()
    }

    /// Checkpoint depth in force.
    pub fn checkpoint_depth(&self) -> ByteSize {
        self.cache
            .checkpoint_depth
            .unwrap_or(if self.simulation.copies_per_database > 1 {
                ByteSize::mib(100)
            } else {
                ByteSize::mib(20)
            })
    }

    /// Maximum of the database read latency, judged on interval averages.
    pub fn db_read_max_ms(&self, stress: bool) -> f64 {
        self.thresholds
            .db_read_max_ms
            .unwrap_or(if stress { 200.0 } else { 100.0 })
    }

    /// Maximum of the log write latency, judged on interval averages.
    pub fn log_write_max_ms(&self, stress: bool) -> f64 {
        self.thresholds
            .log_write_max_ms
            .unwrap_or(if stress { 200.0 } else { 100.0 })
    }

    /// Checks every value. Called by `parse`; call it again after applying overrides.
    pub fn validate(&self) -> Result<(), JobError> {
        self.check_bounds()?;
        self.check_simulation()?;
        self.check_instances()?;
        self.check_database_size()?;
        self.check_workload()?;
        self.check_cache()?;
        self.check_log_and_run()?;
        self.check_thresholds()?;
        Ok(())
    }

    /// The simulation's figures: IOPS per mailbox, the target, capacity, copies.
    fn check_simulation(&self) -> Result<(), JobError> {
        let s = &self.simulation;
        let iops = s.iops_per_mailbox;
        if !(iops == 0.0 || (MIN_IOPS_PER_MAILBOX..=MAX_IOPS_PER_MAILBOX).contains(&iops)) {
            return Err(invalid(
                "simulation.iops_per_mailbox",
                format!("is {}", shown(iops)),
                format!(
                    "give 0 (flat out, no target) or {MIN_IOPS_PER_MAILBOX} to \
                     {MAX_IOPS_PER_MAILBOX} (Microsoft's tables: 0.006 to 0.48)"
                ),
            ));
        }
        let target = s.mailboxes as f64 * iops;
        if target > MAX_TARGET_IOPS {
            return Err(invalid(
                "simulation.iops_per_mailbox",
                format!(
                    "({}) × simulation.mailboxes ({}) is a target of {} IOPS",
                    shown(iops),
                    s.mailboxes,
                    shown(target)
                ),
                format!("give a target of at most {MAX_TARGET_IOPS} IOPS per server"),
            ));
        }
        if !(1..=100).contains(&s.capacity_percent) {
            return Err(invalid(
                "simulation.capacity_percent",
                format!("is {}", s.capacity_percent),
                "give a percentage from 1 to 100",
            ));
        }
        if s.copies_per_database == 0 {
            return Err(invalid(
                "simulation.copies_per_database",
                "is 0",
                "give 1 for a single copy, or more for replicated databases",
            ));
        }

        Ok(())
    }

    /// The storage's page size, density, databases and instances (names, paths).
    fn check_instances(&self) -> Result<(), JobError> {
        let st = &self.storage;
        if !PAGE_SIZES.contains(&st.page_size.bytes()) {
            return Err(invalid(
                "storage.page_size",
                format!("is {}", st.page_size),
                "use 4KiB, 8KiB, 16KiB or 32KiB",
            ));
        }
        if !(20..=100).contains(&st.table_density) {
            return Err(invalid(
                "storage.table_density",
                format!("is {}", st.table_density),
                "give a percentage from 20 to 100 (ESE's range; 80 is ESE's default)",
            ));
        }
        if st.instance.is_empty() && st.databases == 0 {
            return Err(invalid(
                "storage.databases",
                "is 0",
                "give at least 1 database",
            ));
        }
        if st.instance.is_empty() && st.databases > 1024 {
            return Err(invalid(
                "storage.databases",
                format!("is {}", st.databases),
                "give at most 1024 databases per server",
            ));
        }
        let mut names = std::collections::HashSet::new();
        for (index, instance) in st.instance.iter().enumerate() {
            let field = format!("storage.instance[{index}]");
            if instance.name.is_empty()
                || !instance
                    .name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.')
            {
                return Err(invalid(
                    &format!("{field}.name"),
                    format!("is {:?}", instance.name),
                    "use letters, digits, '-', '_' and '.' only",
                ));
            }
            if !names.insert(instance.name.clone()) {
                return Err(invalid(
                    &format!("{field}.name"),
                    format!("repeats {:?}", instance.name),
                    "give every instance its own name",
                ));
            }
        }
        check_paths_not_shared(&st.instance)?;
        Ok(())
    }

    /// The database size against the page size and the mailboxes.
    fn check_database_size(&self) -> Result<(), JobError> {
        let s = &self.simulation;
        let st = &self.storage;
        let page = st.page_size.bytes();
        let db_size = self.db_size().bytes();
        // A database needs its header pages, a space map and room for a tree: 16 pages at least.
        if db_size < 16 * page {
            return Err(invalid(
                if st.db_size.is_some() {
                    "storage.db_size"
                } else {
                    "simulation.mailboxes"
                },
                format!("gives databases of {} bytes", db_size),
                format!(
                    "databases must hold at least 16 pages ({}); set storage.db_size or more mailboxes",
                    ByteSize(16 * page)
                ),
            ));
        }
        // Every mailbox needs at least a page of its own (init starts each in its own leaf);
        // more mailboxes than pages can never be filled, and a run would first look each of
        // them up (billions of seeks) before doing anything.
        let pages = db_size / page;
        let per_database = s.mailboxes / self.instance_count().max(1) as u64;
        if per_database > pages {
            return Err(invalid(
                "simulation.mailboxes",
                format!(
                    "({}) gives {per_database} mailboxes per database, and a database of {} holds {pages} pages",
                    s.mailboxes,
                    ByteSize(db_size)
                ),
                format!(
                    "every mailbox needs at least a page of its own: give at most {} mailboxes, or larger databases (storage.db_size)",
                    pages.saturating_mul(self.instance_count().max(1) as u64)
                ),
            ));
        }
        if !db_size.is_multiple_of(page) {
            return Err(invalid(
                "storage.db_size",
                format!(
                    "{} is not a whole number of {} pages",
                    ByteSize(db_size),
                    st.page_size
                ),
                "give a multiple of the page size",
            ));
        }

        Ok(())
    }

    /// The workload: threads, the mix, the record, compression, dedup, maintenance reads.
    fn check_workload(&self) -> Result<(), JobError> {
        let st = &self.storage;
        let page = st.page_size.bytes();
        let w = &self.workload;
        if let Threads::Fixed(n) = w.threads
            && !(1..=256).contains(&n)
        {
            return Err(invalid(
                "workload.threads",
                format!("is {n}"),
                "give 1 to 256 sessions per database, or \"auto\"",
            ));
        }
        let mix = w.insert_percent + w.delete_percent + w.replace_percent + w.read_percent;
        if mix != 100 {
            return Err(invalid(
                "workload.insert_percent",
                format!(
                    "with delete_percent, replace_percent and read_percent sums to {mix} ({}/{}/{}/{})",
                    w.insert_percent, w.delete_percent, w.replace_percent, w.read_percent
                ),
                "make the four shares of the operation mix sum to 100 (Jetstress default: 40/20/5/35)",
            ));
        }
        if w.lazy_commit_percent > 100 {
            return Err(invalid(
                "workload.lazy_commit_percent",
                format!("is {}", w.lazy_commit_percent),
                "give a percentage from 0 to 100",
            ));
        }
        let record = w.record_size.bytes();
        if record < 64 || record > page / 4 {
            return Err(invalid(
                "workload.record_size",
                format!("is {}", w.record_size),
                format!(
                    "give 64 bytes to a quarter of the page size ({})",
                    ByteSize(page / 4)
                ),
            ));
        }
        if !(1.0..=MAX_COMPRESSION_RATIO).contains(&w.compression_ratio) {
            return Err(invalid(
                "workload.compression_ratio",
                format!("is {}", w.compression_ratio),
                format!(
                    "give a ratio from 1.0 (incompressible, the default) to {MAX_COMPRESSION_RATIO:.1}"
                ),
            ));
        }
        let unit = w.dedup_unit.bytes();
        if !unit.is_power_of_two() || !(512..=64 * 1024).contains(&unit) {
            return Err(invalid(
                "workload.dedup_unit",
                format!("is {}", w.dedup_unit),
                "give the array's block, a power of two from 512B to 64KiB (default 8KiB)",
            ));
        }
        let max_dedup = max_dedup_ratio(page, unit);
        if !(1.0..=max_dedup).contains(&w.dedup_ratio) {
            let fix = if max_dedup <= 1.0 {
                format!(
                    "set workload.dedup_ratio = 1.0 (no duplicates, the default), or give a \
                     storage.page_size of at least twice workload.dedup_unit ({}): a page of one \
                     {} block holds its header in that block, so no block can repeat",
                    ByteSize(2 * unit),
                    w.dedup_unit
                )
            } else {
                format!(
                    "give a ratio from 1.0 (no duplicates, the default) to {max_dedup:.2} for \
                     {} pages and {} blocks: repeated blocks are attachments on long-value pages, \
                     at most {:.0}% of the pages, and each page's first block holds its header",
                    st.page_size,
                    w.dedup_unit,
                    MAX_LONG_VALUE_SHARE * 100.0
                )
            };
            return Err(invalid(
                "workload.dedup_ratio",
                format!("is {}", w.dedup_ratio),
                fix,
            ));
        }
        let scan = w.maintenance_read_size.bytes();
        if scan < page || !scan.is_multiple_of(page) || scan > 16 * ByteSize::MIB {
            return Err(invalid(
                "workload.maintenance_read_size",
                format!("is {}", w.maintenance_read_size),
                "give a multiple of the page size up to 16MiB (Exchange: 256KiB)",
            ));
        }

        Ok(())
    }

    /// The database cache: its sizes, the write-back and checkpoint depths.
    fn check_cache(&self) -> Result<(), JobError> {
        let page = self.storage.page_size.bytes();
        let c = &self.cache;
        if c.min_size.bytes() < 16 * page {
            return Err(invalid(
                "cache.min_size",
                format!("is {}", c.min_size),
                format!("give at least 16 pages ({})", ByteSize(16 * page)),
            ));
        }
        if c.max_size < c.min_size {
            return Err(invalid(
                "cache.max_size",
                format!("({}) is below cache.min_size ({})", c.max_size, c.min_size),
                "make the maximum at least the minimum",
            ));
        }
        if !(1..=MAX_WRITE_BACK_DEPTH).contains(&c.write_back_depth) {
            return Err(invalid(
                "cache.write_back_depth",
                format!("is {}", c.write_back_depth),
                format!(
                    "give 1 to {MAX_WRITE_BACK_DEPTH} writes in flight per database (default {DEFAULT_WRITE_BACK_DEPTH})"
                ),
            ));
        }
        if let Some(depth) = c.checkpoint_depth
            && depth.bytes() < self.log.file_size.bytes()
        {
            return Err(invalid(
                "cache.checkpoint_depth",
                format!(
                    "({depth}) is smaller than one log file ({})",
                    self.log.file_size
                ),
                "give at least one log file size (Exchange: 20MiB, 100MiB with copies)",
            ));
        }

        Ok(())
    }

    /// The log's sizes and the run's durations and counts.
    fn check_log_and_run(&self) -> Result<(), JobError> {
        let l = &self.log;
        if l.file_size.bytes() < 64 * ByteSize::KIB
            || !l.file_size.bytes().is_multiple_of(4096)
            || l.file_size.bytes() > ByteSize::GIB
        {
            return Err(invalid(
                "log.file_size",
                format!("is {}", l.file_size),
                "give a multiple of 4KiB from 64KiB to 1GiB (Exchange 2007 and later: 1MiB)",
            ));
        }
        if l.buffer_size.bytes() < 64 * ByteSize::KIB
            || !l.buffer_size.bytes().is_multiple_of(4096)
            || l.buffer_size > l.file_size
        {
            return Err(invalid(
                "log.buffer_size",
                format!("is {}", l.buffer_size),
                "give a multiple of 4KiB from 64KiB up to log.file_size",
            ));
        }
        if !l.sector_size.bytes().is_power_of_two()
            || l.sector_size.bytes() < 512
            || l.sector_size.bytes() > 64 * ByteSize::KIB
            || l.sector_size.bytes() * 4 > l.buffer_size.bytes()
        {
            return Err(invalid(
                "log.sector_size",
                format!("is {}", l.sector_size),
                "give a power of two from 512B to 64KiB and at most a quarter of log.buffer_size (ESE: 4KiB; Exchange 2010: 512B)",
            ));
        }

        let r = &self.run;
        if r.sample_interval.as_duration().as_millis() < 100 {
            return Err(invalid(
                "run.sample_interval",
                format!("is {}", r.sample_interval),
                "give at least 100ms (Jetstress: 15s)",
            ));
        }
        if r.duration.as_duration().is_zero() {
            return Err(invalid(
                "run.duration",
                "is zero",
                "give a duration like 2h or 90s",
            ));
        }
        if r.stress_duration.as_duration().is_zero() {
            return Err(invalid(
                "run.stress_duration",
                "is zero",
                "give a duration like 24h",
            ));
        }
        if r.recovery_log_files == 0 {
            return Err(invalid(
                "run.recovery_log_files",
                "is 0",
                "give at least 1 (ESRP: 500)",
            ));
        }

        Ok(())
    }

    /// The thresholds, and the excursion rule.
    fn check_thresholds(&self) -> Result<(), JobError> {
        let t = &self.thresholds;
        for (field, value) in [
            ("thresholds.db_read_avg_ms", Some(t.db_read_avg_ms)),
            ("thresholds.db_read_max_ms", t.db_read_max_ms),
            ("thresholds.log_write_avg_ms", Some(t.log_write_avg_ms)),
            ("thresholds.log_write_max_ms", t.log_write_max_ms),
        ] {
            if let Some(v) = value
                && (!v.is_finite() || v <= 0.0 || v > MAX_LATENCY_THRESHOLD_MS)
            {
                return Err(invalid(
                    field,
                    format!("is {}", shown(v)),
                    format!(
                        "give a latency in milliseconds above 0 and at most \
                         {MAX_LATENCY_THRESHOLD_MS} (an hour)"
                    ),
                ));
            }
        }
        let stalls = t.page_fault_stalls_per_sec;
        if !(0.0..=MAX_STALLS_PER_SEC).contains(&stalls) {
            return Err(invalid(
                "thresholds.page_fault_stalls_per_sec",
                format!("is {}", shown(stalls)),
                format!("give a rate of 0 to {MAX_STALLS_PER_SEC} (Jetstress's limit is 1)"),
            ));
        }
        if let Some(span) = &t.max_excursion
            && span.as_duration().is_zero()
        {
            return Err(invalid(
                "thresholds.max_excursion",
                format!("is {span}"),
                "give the longest excursion a failure-mode test may hold, e.g. \"60s\"",
            ));
        }
        if t.max_excursions.is_some() && t.max_excursion.is_none() {
            return Err(invalid(
                "thresholds.max_excursions",
                "is set without thresholds.max_excursion".to_string(),
                "set thresholds.max_excursion too (the count only applies to the failure-mode verdict)",
            ));
        }
        Ok(())
    }
}

/// A number as a message shows it: plainly in the ranges people write, else in exponent form
/// (1e-300 printed plainly is three hundred zeros).
fn shown(value: f64) -> String {
    if value == 0.0 || (1e-4..1e12).contains(&value.abs()) {
        format!("{value}")
    } else {
        format!("{value:e}")
    }
}

impl Job {
    /// Every duration at most [`MAX_SPAN`] and every size at most [`MAX_BYTE_SIZE`], checked
    /// first, so that no later check or clock sum works on a value near overflow (issue 34:
    /// `sample_interval = "18446744073709551615s"` panicked `run`).
    fn check_bounds(&self) -> Result<(), JobError> {
        for (field, span) in [
            ("run.duration", self.run.duration),
            ("run.stress_duration", self.run.stress_duration),
            ("run.sample_interval", self.run.sample_interval),
        ] {
            if span > MAX_SPAN {
                return Err(invalid(
                    field,
                    format!("is {span}"),
                    format!("give at most {MAX_SPAN} (a year)"),
                ));
            }
        }
        let sizes = [
            (
                "simulation.mailbox_size",
                Some(self.simulation.mailbox_size),
            ),
            ("storage.db_size", self.storage.db_size),
            ("storage.page_size", Some(self.storage.page_size)),
            ("workload.record_size", Some(self.workload.record_size)),
            (
                "workload.maintenance_read_size",
                Some(self.workload.maintenance_read_size),
            ),
            ("workload.dedup_unit", Some(self.workload.dedup_unit)),
            ("cache.min_size", Some(self.cache.min_size)),
            ("cache.max_size", Some(self.cache.max_size)),
            ("cache.checkpoint_depth", self.cache.checkpoint_depth),
            ("log.file_size", Some(self.log.file_size)),
            ("log.buffer_size", Some(self.log.buffer_size)),
            ("log.sector_size", Some(self.log.sector_size)),
        ];
        for (field, size) in sizes {
            if let Some(size) = size
                && size > MAX_BYTE_SIZE
            {
                return Err(invalid(
                    field,
                    format!("is {} bytes", size.bytes()),
                    format!("give at most {MAX_BYTE_SIZE}"),
                ));
            }
        }
        Ok(())
    }
}

/// Two instances may share neither a database file nor a log directory: their logs would
/// interleave (and recovery then fail), or two engines would write one file. Paths are compared
/// as the file system resolves them, as far as they exist (symbolic links, `.` and `..`, and
/// relative against absolute spellings), so one directory under two spellings is caught too.
fn check_paths_not_shared(instances: &[InstanceSpec]) -> Result<(), JobError> {
    for (key, path_of) in [
        (
            "log_path",
            (|i: &InstanceSpec| &i.log_path) as fn(&InstanceSpec) -> &PathBuf,
        ),
        ("database_path", |i: &InstanceSpec| &i.database_path),
    ] {
        // A map, not a list searched per instance: ten thousand instances were 50 million
        // comparisons (issue 34, point 5); this is one look-up each.
        let mut seen: std::collections::HashMap<PathBuf, usize> =
            std::collections::HashMap::with_capacity(instances.len());
        for (index, instance) in instances.iter().enumerate() {
            let resolved = resolve_existing(path_of(instance));
            if let Some(other) = seen.get(&resolved).and_then(|first| instances.get(*first)) {
                return Err(invalid(
                    &format!("storage.instance[{index}].{key}"),
                    format!(
                        "({}) is the same {} as instance {:?}'s ({}){}",
                        path_of(instance).display(),
                        if key == "log_path" {
                            "log directory"
                        } else {
                            "database file"
                        },
                        other.name,
                        path_of(other).display(),
                        if path_of(instance) == path_of(other) {
                            String::new()
                        } else {
                            format!(", both {}", resolved.display())
                        }
                    ),
                    format!(
                        "give instances {:?} and {:?} each their own {key}",
                        other.name, instance.name
                    ),
                ));
            }
            seen.entry(resolved).or_insert(index);
        }
    }
    Ok(())
}

/// `path` as the file system resolves it: the longest prefix that exists is canonicalised
/// (links followed), and the rest appended with `.` dropped and `..` taken lexically.
pub fn resolve_existing(path: &Path) -> PathBuf {
    let absolute = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir()
            .map(|cwd| cwd.join(path))
            .unwrap_or_else(|_| path.to_path_buf())
    };
    let mut existing = absolute.clone();
    let mut rest = Vec::new();
    let base = loop {
        if let Ok(resolved) = existing.canonicalize() {
            break resolved;
        }
        match (existing.file_name(), existing.parent()) {
            (Some(name), Some(parent)) => {
                rest.push(name.to_os_string());
                existing = parent.to_path_buf();
            }
            // Nothing of it exists (or `..` ends it): compare the spelling, made lexical.
            _ => {
                rest.clear();
                break PathBuf::new();
            }
        }
    };
    let mut resolved = if base.as_os_str().is_empty() {
        PathBuf::new()
    } else {
        base
    };
    let tail: Box<dyn Iterator<Item = std::path::Component<'_>>> =
        if resolved.as_os_str().is_empty() {
            Box::new(absolute.components())
        } else {
            Box::new(
                rest.iter()
                    .rev()
                    .map(|name| std::path::Component::Normal(name.as_os_str())),
            )
        };
    for component in tail {
        match component {
            std::path::Component::CurDir => {}
            std::path::Component::ParentDir => {
                resolved.pop();
            }
            other => resolved.push(other.as_os_str()),
        }
    }
    resolved
}

/// The overrides of `README.md`, from command-line flags. Each applies on top of the job file (or
/// the default job) and names its flag if the result is invalid.
#[derive(Clone, Debug, Default)]
pub struct Overrides {
    pub data_dir: Option<PathBuf>,
    pub databases: Option<u32>,
    pub db_size: Option<ByteSize>,
    pub threads: Option<Threads>,
    pub duration: Option<Span>,
    pub io_engine: Option<IoEngine>,
    /// `--cache-max` of `run` and `sweep`: cache.max_size, and cache.min_size lowered to it
    /// when above.
    pub cache_max: Option<ByteSize>,
}

impl Overrides {
    /// Applies the overrides and validates the result; errors name the flag.
    pub fn apply(&self, job: &mut Job) -> Result<(), JobError> {
        if let Some(dir) = &self.data_dir {
            if !job.storage.instance.is_empty() {
                return Err(invalid(
                    "--data-dir",
                    "cannot be used with a job that lists its instances in [[storage.instance]]",
                    "edit the instance paths in the job file instead",
                ));
            }
            job.storage.data_dir = dir.clone();
        }
        if let Some(n) = self.databases {
            if !job.storage.instance.is_empty() {
                return Err(invalid(
                    "--databases",
                    "cannot be used with a job that lists its instances in [[storage.instance]]",
                    "add or remove [[storage.instance]] entries in the job file instead",
                ));
            }
            job.storage.databases = n;
        }
        if let Some(size) = self.db_size {
            job.storage.db_size = Some(size);
        }
        if let Some(threads) = self.threads {
            job.workload.threads = threads;
        }
        if let Some(duration) = self.duration {
            job.run.duration = duration;
            job.run.stress_duration = duration;
        }
        if let Some(engine) = self.io_engine {
            job.storage.io_engine = engine;
        }
        if let Some(size) = self.cache_max {
            job.cache.max_size = size;
            job.cache.min_size = job.cache.min_size.min(size);
        }
        job.validate().map_err(|e| match e {
            JobError::Invalid {
                field,
                problem,
                fix,
            } => {
                let flag = match field.as_str() {
                    "storage.data_dir" => "--data-dir",
                    "storage.databases" if self.databases.is_some() => "--databases",
                    "storage.db_size" if self.db_size.is_some() => "--db-size",
                    "cache.max_size" | "cache.min_size" if self.cache_max.is_some() => {
                        "--cache-max"
                    }
                    "workload.threads" if self.threads.is_some() => "--threads",
                    "run.duration" | "run.stress_duration" if self.duration.is_some() => {
                        "--duration"
                    }
                    _ => "",
                };
                let field = if flag.is_empty() {
                    field
                } else {
                    format!("{flag} ({field})")
                };
                JobError::Invalid {
                    field,
                    problem,
                    fix,
                }
            }
            other => other,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_job_is_valid_and_round_trips() {
        let job = Job::default();
        job.validate().expect("default job is valid");
        let text = job.to_toml();
        let back = Job::parse(&text, "round trip").expect("written job parses");
        assert_eq!(back, job);
    }

    #[test]
    fn instances_sharing_a_log_path_are_refused_naming_both_and_the_key() {
        let text = "[[storage.instance]]\nname = \"a\"\ndatabase_path = \"/x/a.jpdb\"\nlog_path = \"/y/logs\"\n\
                    [[storage.instance]]\nname = \"b\"\ndatabase_path = \"/x/b.jpdb\"\nlog_path = \"/y/logs\"\n";
        let err = Job::parse(text, "j").expect_err("shared log path");
        let message = err.to_string();
        assert!(
            message.contains("storage.instance[1].log_path"),
            "{message}"
        );
        assert!(
            message.contains("\"a\"") && message.contains("\"b\""),
            "{message}"
        );
    }

    #[test]
    fn symlink_one_log_directory_under_two_spellings_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let logs = dir.path().join("logs");
        std::fs::create_dir(&logs).expect("mkdir");
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&logs, &link).expect("symlink");
        let spellings = [
            (logs.clone(), link.clone()),
            (logs.clone(), dir.path().join("sub/../logs/.")),
            // Not yet made, under a linked parent: resolved as far as it exists.
            (logs.join("a"), link.join("a")),
        ];
        for (first, second) in spellings {
            let text = format!(
                "[[storage.instance]]\nname = \"a\"\ndatabase_path = \"/x/a.jpdb\"\nlog_path = {:?}\n\
                 [[storage.instance]]\nname = \"b\"\ndatabase_path = \"/x/b.jpdb\"\nlog_path = {:?}\n",
                first.display().to_string(),
                second.display().to_string()
            );
            let err = Job::parse(&text, "j").expect_err("one directory, two spellings");
            assert!(
                err.to_string().contains("log_path"),
                "{} vs {}: {err}",
                first.display(),
                second.display()
            );
        }
        // Two different directories are fine.
        let text = format!(
            "[[storage.instance]]\nname = \"a\"\ndatabase_path = \"/x/a.jpdb\"\nlog_path = {:?}\n\
             [[storage.instance]]\nname = \"b\"\ndatabase_path = \"/x/b.jpdb\"\nlog_path = {:?}\n",
            logs.join("a").display().to_string(),
            logs.join("b").display().to_string()
        );
        Job::parse(&text, "j").expect("distinct log paths");
    }

    #[test]
    fn instances_sharing_a_database_file_by_another_spelling_are_refused() {
        let text = "[[storage.instance]]\nname = \"a\"\ndatabase_path = \"/x/a.jpdb\"\nlog_path = \"/y/a\"\n\
                    [[storage.instance]]\nname = \"b\"\ndatabase_path = \"/x/./z/../a.jpdb\"\nlog_path = \"/y/b\"\n";
        let err = Job::parse(text, "j").expect_err("shared database");
        assert!(
            err.to_string()
                .contains("storage.instance[1].database_path"),
            "{err}"
        );
    }

    /// Every key of the schema, dotted (`run.duration`; `storage.instance[].name` for the
    /// fields of an array of tables): the default job with every optional key set and one
    /// explicit instance, walked as TOML.
    fn schema_keys() -> Vec<String> {
        let mut job = Job::default();
        job.cache.checkpoint_depth = Some(ByteSize::mib(20));
        job.thresholds.db_read_max_ms = Some(100.0);
        job.thresholds.log_write_max_ms = Some(100.0);
        job.storage.instance.push(InstanceSpec {
            name: "a".into(),
            database_path: "/a.jpdb".into(),
            log_path: "/a".into(),
        });
        let value = toml::Value::try_from(&job).expect("a job is TOML");
        fn walk(prefix: &str, value: &toml::Value, keys: &mut Vec<String>) {
            match value {
                toml::Value::Table(table) => {
                    for (key, inner) in table {
                        let path = if prefix.is_empty() {
                            key.clone()
                        } else {
                            format!("{prefix}.{key}")
                        };
                        if !prefix.is_empty() {
                            keys.push(path.clone());
                        }
                        walk(&path, inner, keys);
                    }
                }
                toml::Value::Array(items) => {
                    for item in items.iter().filter(|i| i.is_table()) {
                        walk(&format!("{prefix}[]"), item, keys);
                    }
                }
                _ => {}
            }
        }
        let mut keys = Vec::new();
        walk("", &value, &mut keys);
        keys.sort();
        keys.dedup();
        keys
    }

    #[test]
    fn every_schema_key_is_in_docs_job_md() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/job.md");
        let docs = std::fs::read_to_string(&path).expect("docs/job.md");
        let keys = schema_keys();
        // The walk itself must see the keys it is meant to check.
        for known in [
            "run.checksum_after_performance",
            "cache.checkpoint_depth",
            "storage.instance[].log_path",
            "thresholds.db_read_max_ms",
        ] {
            assert!(
                keys.iter().any(|k| k == known),
                "{known} not walked: {keys:?}"
            );
        }
        let missing: Vec<&String> = keys
            .iter()
            .filter(|key| !docs.contains(&format!("| `{key}` |")))
            .collect();
        assert!(
            missing.is_empty(),
            "keys of the job schema without a row in docs/job.md: {missing:?}"
        );
    }

    #[test]
    fn empty_file_is_the_default_job() {
        assert_eq!(Job::parse("", "empty").expect("parses"), Job::default());
    }

    #[test]
    fn latency_maxima_default_to_100_ms_and_200_ms_under_stress_unless_set() {
        let job = Job::default();
        assert_eq!(job.db_read_max_ms(false), 100.0);
        assert_eq!(job.log_write_max_ms(false), 100.0);
        assert_eq!(job.db_read_max_ms(true), 200.0);
        assert_eq!(job.log_write_max_ms(true), 200.0);
        let set = Job::parse(
            "[thresholds]\ndb_read_max_ms = 150\nlog_write_max_ms = 50\n",
            "j",
        )
        .expect("parses");
        for stress in [false, true] {
            assert_eq!(set.db_read_max_ms(stress), 150.0);
            assert_eq!(set.log_write_max_ms(stress), 50.0);
        }
    }

    #[test]
    fn page_fault_stalls_default_to_jetstress_limit_and_a_negative_one_is_refused() {
        assert_eq!(Job::default().thresholds.page_fault_stalls_per_sec, 1.0);
        let set = Job::parse("[thresholds]\npage_fault_stalls_per_sec = 0\n", "j").expect("0");
        assert_eq!(set.thresholds.page_fault_stalls_per_sec, 0.0);
        let err = Job::parse("[thresholds]\npage_fault_stalls_per_sec = -1\n", "j")
            .expect_err("negative refused");
        let text = err.to_string();
        assert!(
            text.contains("thresholds.page_fault_stalls_per_sec") && text.contains("0 to 1000000"),
            "{text}"
        );
    }

    /// Issue 34, point 6: a rate that gives no I/O, or a target no report can print, is refused
    /// naming its key; the ends of each range are accepted.
    #[test]
    fn impossible_rates_are_refused_naming_the_key_and_the_range_ends_accepted() {
        for (text, key) in [
            (
                "[simulation]\niops_per_mailbox = 1e-300\n",
                "simulation.iops_per_mailbox",
            ),
            (
                "[simulation]\niops_per_mailbox = 1e308\n",
                "simulation.iops_per_mailbox",
            ),
            (
                "[simulation]\niops_per_mailbox = nan\n",
                "simulation.iops_per_mailbox",
            ),
            (
                "[simulation]\niops_per_mailbox = -0.1\n",
                "simulation.iops_per_mailbox",
            ),
            (
                "[simulation]\nmailboxes = 2000\niops_per_mailbox = 1000000.0\n\
                 [storage]\ndb_size = \"1GiB\"\n",
                "simulation.iops_per_mailbox",
            ),
            (
                "[thresholds]\ndb_read_avg_ms = 1e300\n",
                "thresholds.db_read_avg_ms",
            ),
            (
                "[thresholds]\nlog_write_max_ms = inf\n",
                "thresholds.log_write_max_ms",
            ),
            (
                "[thresholds]\npage_fault_stalls_per_sec = 1e7\n",
                "thresholds.page_fault_stalls_per_sec",
            ),
        ] {
            let err = Job::parse(text, "j").expect_err(text);
            assert!(err.to_string().contains(key), "{text}: {err}");
        }
        for text in [
            "[simulation]\niops_per_mailbox = 0\n",
            "[simulation]\niops_per_mailbox = 0.0001\n",
            "[simulation]\nmailboxes = 1000\niops_per_mailbox = 1000000.0\n\
             [storage]\ndb_size = \"1GiB\"\n",
            "[thresholds]\ndb_read_avg_ms = 3600000\npage_fault_stalls_per_sec = 1000000\n",
        ] {
            Job::parse(text, "j").unwrap_or_else(|e| panic!("{text}: {e}"));
        }
    }

    #[test]
    fn write_back_depth_defaults_to_32_and_a_bad_one_is_refused_naming_the_key() {
        assert_eq!(Job::default().cache.write_back_depth, 32);
        let set = Job::parse("[cache]\nwrite_back_depth = 1\n", "j").expect("1");
        assert_eq!(set.cache.write_back_depth, 1);
        for bad in ["0", "-3", "1025"] {
            let err = Job::parse(&format!("[cache]\nwrite_back_depth = {bad}\n"), "j")
                .expect_err("refused");
            let text = err.to_string();
            assert!(
                text.contains("cache.write_back_depth") && text.contains("1 to 1024"),
                "{bad}: {text}"
            );
        }
        let err = Job::parse("[cache]\nwrite_back_depth = \"many\"\n", "j").expect_err("text");
        assert!(err.to_string().contains("write_back_depth"), "{err}");
    }

    #[test]
    fn unknown_key_is_refused_with_its_name() {
        let err = Job::parse("[workload]\nthreds = 4\n", "job.toml").expect_err("refused");
        let text = err.to_string();
        assert!(text.contains("threds"), "{text}");
        assert!(text.contains("job.toml"), "{text}");
    }

    #[test]
    fn mix_must_sum_to_100() {
        let err = Job::parse("[workload]\nread_percent = 50\n", "j").expect_err("refused");
        let text = err.to_string();
        assert!(text.contains("insert_percent"), "{text}");
        assert!(text.contains("115"), "{text}");
    }

    #[test]
    fn log_sector_size_is_a_power_of_two_from_512_bytes() {
        let job = Job::parse("[log]\nsector_size = \"512B\"\n", "j").expect("512 bytes");
        assert_eq!(job.log.sector_size, ByteSize(512));
        assert_eq!(Job::default().log.sector_size, ByteSize::kib(4));
        for bad in ["3000B", "256B", "128KiB"] {
            let err = Job::parse(&format!("[log]\nsector_size = \"{bad}\"\n"), "j").expect_err(bad);
            assert!(err.to_string().contains("log.sector_size"), "{err}");
        }
        // A quarter of the buffer at most.
        let err = Job::parse(
            "[log]\nbuffer_size = \"64KiB\"\nsector_size = \"32KiB\"\n",
            "j",
        )
        .expect_err("half the buffer");
        assert!(err.to_string().contains("log.sector_size"), "{err}");
    }

    #[test]
    fn more_mailboxes_than_pages_are_refused_naming_the_key_and_the_most() {
        // Two databases of 8 MiB of 32 KiB pages: 256 pages each.
        let base = "[storage]\ndatabases = 2\ndb_size = \"8MiB\"\n";
        Job::parse(&format!("{base}[simulation]\nmailboxes = 512\n"), "j").expect("fits");
        let err = Job::parse(&format!("{base}[simulation]\nmailboxes = 514\n"), "j")
            .expect_err("one too many per database");
        let text = err.to_string();
        assert!(text.contains("simulation.mailboxes"), "{text}");
        assert!(text.contains("at most 512 mailboxes"), "{text}");
    }

    #[test]
    fn a_device_or_directory_as_the_job_file_is_refused_before_reading() {
        for (path, what) in [
            ("/dev/zero", "character device"),
            ("/dev/null", "character device"),
            ("/", "directory"),
        ] {
            let err = Job::load(Path::new(path)).expect_err(path);
            let text = err.to_string();
            assert!(text.contains(what) && text.contains(path), "{text}");
            assert!(text.contains("not a job file"), "{text}");
        }
    }

    #[test]
    fn dedup_ratios_map_to_long_value_shares_within_the_pages_bound() {
        let kib = 1024;
        assert_eq!(long_value_share(1.0, 32 * kib, 8 * kib), 0.0);
        // Half the blocks repeat: 3/4 of a page's blocks can, 0.9 x 0.99 of those pages do.
        let f = long_value_share(2.0, 32 * kib, 8 * kib);
        assert!((f * 0.75 * 0.9 * 0.99 - 0.5).abs() < 1e-12, "{f}");
        assert_eq!(max_dedup_ratio(32 * kib, 8 * kib), 2.5);
        assert_eq!(max_dedup_ratio(16 * kib, 8 * kib), 1.66);
        assert_eq!(max_dedup_ratio(8 * kib, 8 * kib), 1.0);
        assert!(
            long_value_share(max_dedup_ratio(32 * kib, 4 * kib), 32 * kib, 4 * kib)
                <= MAX_LONG_VALUE_SHARE
        );
        let parse = |extra: &str| Job::parse(&format!("[workload]\n{extra}\n"), "j");
        assert!(parse("dedup_ratio = 2.5").is_ok());
        let err = parse("dedup_ratio = 2.6").expect_err("above the bound");
        assert!(err.to_string().contains("to 2.50"), "{err}");
        let err = parse("dedup_ratio = 1.2\ndedup_unit = \"32KiB\"").expect_err("one block");
        assert!(err.to_string().contains("storage.page_size"), "{err}");
    }

    #[test]
    fn bad_page_size_names_the_field() {
        let err = Job::parse("[storage]\npage_size = \"12KiB\"\n", "j").expect_err("refused");
        assert!(err.to_string().contains("storage.page_size"), "{err}");
    }

    #[test]
    fn threads_accepts_auto_and_numbers() {
        let job = Job::parse("[workload]\nthreads = \"auto\"\n", "j").expect("auto");
        assert_eq!(job.workload.threads, Threads::Auto);
        let job = Job::parse("[workload]\nthreads = 8\n", "j").expect("8");
        assert_eq!(job.workload.threads, Threads::Fixed(8));
        assert!(Job::parse("[workload]\nthreads = -1\n", "j").is_err());
        assert!(Job::parse("[workload]\nthreads = 0\n", "j").is_err());
    }

    #[test]
    fn db_size_derives_from_mailboxes() {
        let job = Job::parse(
            "[simulation]\nmailboxes = 1000\nmailbox_size = \"1GiB\"\ncapacity_percent = 50\n[storage]\ndatabases = 4\n",
            "j",
        );
        // db_size defaults to Some in the built-in job, so the derived size needs it unset.
        let mut job = job.expect("parses");
        job.storage.db_size = None;
        assert_eq!(job.db_size(), ByteSize(1000 * ByteSize::GIB / 2 / 4));
    }

    #[test]
    fn explicit_instances_replace_data_dir() {
        let job = Job::parse(
            "[[storage.instance]]\nname = \"a\"\ndatabase_path = \"/x/a.jpdb\"\nlog_path = \"/y/a\"\n",
            "j",
        )
        .expect("parses");
        let instances = job.instances();
        assert_eq!(instances.len(), 1);
        assert_eq!(instances[0].database_path, PathBuf::from("/x/a.jpdb"));
    }

    #[test]
    fn overrides_name_their_flag() {
        let mut job = Job::default();
        let o = Overrides {
            threads: Some(Threads::Fixed(0)),
            ..Overrides::default()
        };
        let err = o.apply(&mut job).expect_err("refused");
        assert!(err.to_string().contains("--threads"), "{err}");
    }

    #[test]
    fn table_density_defaults_to_ese_and_refuses_values_outside_its_range() {
        assert_eq!(Job::default().storage.table_density, 80);
        let job = Job::parse("[storage]\ntable_density = 100\n", "j").expect("parses");
        assert_eq!(job.storage.table_density, 100);
        for bad in [0, 19, 101] {
            let err = Job::parse(&format!("[storage]\ntable_density = {bad}\n"), "j")
                .expect_err("refused");
            assert!(err.to_string().contains("storage.table_density"), "{err}");
        }
    }

    #[test]
    fn io_engine_takes_three_values_and_refuses_others_by_key() {
        assert_eq!(Job::default().storage.io_engine, IoEngine::Std);
        for engine in IoEngine::ALL {
            let text = format!("[storage]\nio_engine = \"{engine}\"\n");
            let job = Job::parse(&text, "j").expect("a known engine");
            assert_eq!(job.storage.io_engine, engine);
            assert_eq!(
                Job::parse(&job.to_toml(), "again").expect("round trip"),
                job
            );
        }
        let err =
            Job::parse("[storage]\nio_engine = \"uring\"\n", "job.toml").expect_err("refused");
        let text = err.to_string();
        for needle in [
            "job.toml",
            "storage.io_engine",
            "\"uring\"",
            "\"std\"",
            "\"io_uring\"",
            "\"auto\"",
        ] {
            assert!(text.contains(needle), "{needle} missing: {text}");
        }
        assert!(Job::parse("[storage]\nio_engine = 1\n", "j").is_err());
    }

    #[test]
    fn io_engine_override_replaces_the_job_value() {
        let mut job = Job::parse("[storage]\nio_engine = \"auto\"\n", "j").expect("parses");
        let o = Overrides {
            io_engine: Some(IoEngine::IoUring),
            ..Overrides::default()
        };
        o.apply(&mut job).expect("valid");
        assert_eq!(job.storage.io_engine, IoEngine::IoUring);
        Overrides::default().apply(&mut job).expect("valid");
        assert_eq!(
            job.storage.io_engine,
            IoEngine::IoUring,
            "no flag keeps the value"
        );
    }

    #[test]
    fn default_instances_live_under_data_dir() {
        let job = Job::default();
        let instances = job.instances();
        assert_eq!(instances.len(), 2);
        assert!(instances[1].database_path.starts_with(DEFAULT_DATA_DIR));
        assert_eq!(instances[1].name, "db2");
    }
}
