//! The job resolved once into the typed settings the procedures run with: the sessions per
//! instance, the cache, the latency limits and the operation mix. No procedure reads
//! `job.cache.*` or `job.workload.threads` itself; they ask here (the instance options, built
//! from these, are `crate::options`).
//!
//! `workload.threads = "auto"`, per test, in this one place ([`Sessions::of`]):
//!
//! - performance and stress: auto-tune ([`Sessions::Autotune`]): trials from one session per
//!   instance up to `jetproof_job::AUTO_MAX_SESSIONS`, the count that reaches the target
//!   (`simulation.iops_per_mailbox`) measured; refused without a target (`check_job`);
//! - soft recovery: [`AUTO_SESSIONS`] sessions per instance, fixed: its
//!   log generation has no target to tune for;
//! - backup, init and checksum: no sessions (one reader or loader per database).
//!
//! The host checks (`jetproof_storage::host::check_job_fits`) bound an "auto" run by the most it
//! may reach, `AUTO_MAX_SESSIONS`.

use jetproof_engine::DatabaseOptions;
use jetproof_job::{ByteSize, Job, Threads};
use jetproof_results::verdict::Limits;
use jetproof_workload::mix::Mix;

/// Soft recovery's sessions per instance when the job says `threads = "auto"`.
pub const AUTO_SESSIONS: u32 = 4;

/// The sessions per instance a test runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sessions {
    /// This many, the whole run.
    Fixed(u32),
    /// Tuned to reach the target (performance and stress with `threads = "auto"`).
    Autotune,
}

/// The tests whose sessions [`Sessions::of`] resolves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Workload {
    /// Performance or stress: "auto" is auto-tune.
    Measured,
    /// Soft recovery's log generation: "auto" is the soft-recovery default.
    SoftRecovery,
}

impl Sessions {
    /// The job's `workload.threads` for `test` (the module's list).
    pub fn of(job: &Job, test: Workload) -> Sessions {
        match (job.workload.threads, test) {
            (Threads::Fixed(n), _) => Sessions::Fixed(n),
            (Threads::Auto, Workload::Measured) => Sessions::Autotune,
            (Threads::Auto, Workload::SoftRecovery) => Sessions::Fixed(AUTO_SESSIONS),
        }
    }

    /// The fixed count, None when tuned.
    pub fn fixed(self) -> Option<u32> {
        match self {
            Sessions::Fixed(n) => Some(n),
            Sessions::Autotune => None,
        }
    }

    /// The count a soft-recovery run uses: fixed, or before any tuning one session per
    /// instance (what auto-tune's warm-up starts from).
    pub fn count(self) -> u32 {
        self.fixed().unwrap_or(1)
    }

    /// As the test log's operation-mix line shows it.
    pub fn label(self) -> String {
        match self {
            Sessions::Fixed(n) => n.to_string(),
            Sessions::Autotune => "auto (tuned below)".to_string(),
        }
    }
}

/// Each instance's database cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cache {
    pub min_size: ByteSize,
    pub max_size: ByteSize,
    /// Page writes in flight at once, 1..=1024 (validated when the job was read; clamped here
    /// all the same, as the engine's bound).
    pub write_back_depth: usize,
}

impl Cache {
    pub fn of(job: &Job) -> Cache {
        Cache {
            min_size: job.cache.min_size,
            max_size: job.cache.max_size,
            write_back_depth: job.cache.write_back_depth.clamp(1, 1024) as usize,
        }
    }

    /// The engine's database options for this cache and the job's direct I/O (the rest
    /// default: the page size, initial size and growth are init's).
    pub fn database_options(self, job: &Job) -> DatabaseOptions {
        DatabaseOptions {
            cache_min_bytes: self.min_size.bytes(),
            cache_max_bytes: self.max_size.bytes(),
            direct_io: job.storage.direct_io,
            write_back_depth: self.write_back_depth,
            ..DatabaseOptions::default()
        }
    }
}

/// The settings of a performance or stress run, resolved once at its start.
#[derive(Clone, Copy, Debug)]
pub struct Settings {
    pub sessions: Sessions,
    pub cache: Cache,
    /// The latency limits the run is judged against (the stress maxima for stress).
    pub limits: Limits,
    pub mix: Mix,
}

impl Settings {
    pub fn of(job: &Job, stress: bool) -> Settings {
        Settings {
            sessions: Sessions::of(job, Workload::Measured),
            cache: Cache::of(job),
            limits: limits(job, stress),
            mix: Mix::from_job(&job.workload),
        }
    }
}

/// The latency limits in force: the job's thresholds, with the stress maxima for stress.
pub fn limits(job: &Job, stress: bool) -> Limits {
    Limits {
        db_read_avg_ms: job.thresholds.db_read_avg_ms,
        db_read_max_ms: job.db_read_max_ms(stress),
        log_write_avg_ms: job.thresholds.log_write_avg_ms,
        log_write_max_ms: job.log_write_max_ms(stress),
        page_fault_stalls_per_sec: job.thresholds.page_fault_stalls_per_sec,
        max_excursion_s: job
            .thresholds
            .max_excursion
            .map(|s| s.as_duration().as_secs_f64()),
        max_excursions: job.thresholds.max_excursions,
    }
}
