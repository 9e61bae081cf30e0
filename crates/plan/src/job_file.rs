//! The job file `jetproof plan --write-job` writes: jetproof's marker (so that only a file
//! jetproof wrote is ever overwritten, `docs/refusals.md`), how it was made, the plan's
//! arithmetic in comments, then the job as TOML that `init` and `run` read unchanged.

use std::fmt::Write as _;
use std::path::Path;

use jetproof_job::Job;

use crate::{JOB_FILE_MARKER, Plan, format_bytes, format_number};

/// Why no job file text was made.
#[derive(Debug, thiserror::Error)]
pub enum JobFileError {
    /// The job the plan makes does not parse back (a size out of the job's range).
    #[error(
        "the plan makes a job that init would refuse: {0}; adjust --mailbox-size, --capacity-percent or --databases-per-server"
    )]
    WouldBeRefused(String),
}

/// The job file's text: jetproof's marker, how it was made (`command`: the command line after
/// `jetproof`), then the job as TOML. Parsed back before it
/// is returned, so a file that `init` would refuse is never written.
pub fn text(
    plan: &Plan,
    data_dir: Option<&Path>,
    esrp: bool,
    command: &str,
) -> Result<String, JobFileError> {
    let mut job = plan.job();
    if esrp {
        crate::apply_esrp(&mut job);
    }
    if let Some(dir) = data_dir {
        job.storage.data_dir = dir.to_path_buf();
    }
    let mut text = String::new();
    let _ = writeln!(text, "{JOB_FILE_MARKER}");
    let _ = writeln!(
        text,
        "# jetproof overwrites this file only while the line above is its first line."
    );
    let _ = writeln!(
        text,
        "# Made by jetproof {} from: jetproof {}",
        env!("CARGO_PKG_VERSION"),
        command
    );
    let _ = writeln!(
        text,
        "# One server of the plan: {} mailboxes × {} IOPS ({}) = {} target IOPS,",
        format_number(plan.mailboxes_per_server as f64),
        format_number(plan.iops_per_mailbox),
        crate::iops_with_headroom_text(
            plan.iops_per_mailbox_base,
            plan.inputs.headroom_percent,
            plan.iops_per_mailbox
        ),
        format_number(plan.target_iops_per_server)
    );
    let _ = writeln!(
        text,
        "# {} databases of {} each ({} mailboxes × {} quota × {}% capacity). Rerun the command for the arithmetic.",
        plan.inputs.databases_per_server,
        format_bytes(plan.test_database_size_bytes),
        format_number(plan.mailboxes_largest_database as f64),
        format_bytes(plan.mailbox_quota_bytes),
        plan.inputs.capacity_percent
    );
    if esrp {
        let _ = writeln!(
            text,
            "# ESRP test set (--esrp): run.duration 2h and run.stress_duration 24h, a checksum pass after each\n\
             # (run.checksum_after_performance, run.checksum_after_stress), 500 log files per instance for\n\
             # soft recovery (run.recovery_log_files). On every host, with one --start-at TIME per test:\n\
             #   jetproof init JOB\n\
             #   jetproof run JOB --test performance --start-at TIME --out results/HOST/performance\n\
             #   jetproof run JOB --test stress --start-at TIME --out results/HOST/stress\n\
             #   jetproof run JOB --test backup --start-at TIME --out results/HOST/backup\n\
             #   jetproof run JOB --test soft-recovery --start-at TIME --out results/HOST/soft-recovery\n\
             # then `jetproof esrp SOLUTION results/` writes the solution document (docs/esrp.md)."
        );
    }
    text.push('\n');
    text.push_str(&job.to_toml());
    Job::parse(&text, "the job plan would write")
        .map_err(|e| JobFileError::WouldBeRefused(e.to_string()))?;
    Ok(text)
}
