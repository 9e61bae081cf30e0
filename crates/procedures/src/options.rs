//! How a database instance is opened from a job: one place for the cache, direct I/O and log
//! geometry, so a test run, the soft-recovery test and `jetproof recover` reopen a log with the
//! geometry it was written with. The I/O engine the job chose is storage's
//! (`jetproof_storage::backend`).

use std::sync::Arc;

use jetproof_engine::DatabaseOptions;
use jetproof_instance::InstanceOptions;
use jetproof_io::meter::InstanceStats;
use jetproof_job::Job;

/// Log files are kept when the job says so, and whenever a replication sender must read every
/// closed generation before it could be deleted.
pub(crate) fn keeps_log_files(job: &Job) -> bool {
    job.log.keep_files || job.simulation.copies_per_database > 1
}

/// The options a test run attaches the instance of the job's database `index` (its place among
/// `job.instances()`) with, metering into `stats`. The database's engine fills the space it
/// frees and the pages it grows by with the job's content ([`crate::page_content`]).
pub fn instance_options(job: &Job, index: usize, stats: Arc<InstanceStats>) -> InstanceOptions {
    let file_size_bytes = job.log.file_size.bytes();
    InstanceOptions {
        database: DatabaseOptions {
            stats: Some(stats),
            content: Some(crate::page_content::database_content(job, index)),
            ..crate::settings::Cache::of(job).database_options(job)
        },
        log_file_size_bytes: file_size_bytes,
        // The buffer is also the largest log write, which cannot exceed a generation's data area
        // (4 KiB of each file is its header).
        log_buffer_size_bytes: job
            .log
            .buffer_size
            .bytes()
            .min(file_size_bytes.saturating_sub(4096)) as usize,
        log_sector_size_bytes: job.log.sector_size.bytes() as usize,
        checkpoint_depth_bytes: job.checkpoint_depth().bytes(),
        keep_files: keeps_log_files(job),
        circular: job.log.circular,
        ..InstanceOptions::default()
    }
}

/// The options recovery reopens an instance with: those of a run, with no background
/// checkpointing and the job's own log retention.
pub fn recovery_options(job: &Job, index: usize, stats: Arc<InstanceStats>) -> InstanceOptions {
    InstanceOptions {
        keep_files: job.log.keep_files,
        checkpoint_interval: None,
        ..instance_options(job, index, stats)
    }
}
