//! `jetproof recover [JOB]`: soft recovery. Every instance of the job whose database was left
//! dirty by an unclean stop has its log replayed from the checkpoint (`jetproof_instance::recover`:
//! redo, then undo of the transactions without a commit record), all of them concurrently, and is
//! marked clean so tests can attach again. The replay and its report are the soft-recovery test's
//! (`jetproof_procedures::soft_recovery::recover_job`): per instance log files replayed, seconds,
//! seconds per log file, records applied, transactions rolled back, the replaying thread's CPU
//! time per record applied and the replay's I/O (`log_read`, `db_read`, `db_write`), in `result.json` (test "recovery"), `test.log` and `report.md` under `--out`.
//!
//! Exit codes: 0 every dirty database was recovered, or every database was clean (nothing to
//! do); 2 bad input (a missing database: run `jetproof init` first; a bad job field; an unusable
//! `--out`); 3 recovery failed (a damaged or missing log file, named with its offset; an I/O
//! error): `result.json` is still written, with verdict fail and the reason. A failed instance
//! stays dirty; the others are recovered and clean.

use std::path::PathBuf;

use anyhow::Context;
use jetproof_procedures::performance::RunError;
use jetproof_procedures::soft_recovery::{dirty_databases, recover_job};
use jetproof_results::{OutDir, TestKind, TestLog, Verdict};
use jetproof_storage::lock;

use crate::common::{CliError, JobArgs, Outcome, log_engine, log_owner_lock, select_backend};

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pub job: JobArgs,
    /// Results directory (default ./jetproof-results/recovery-TIME/).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// No live view on stderr: neither the redrawn status on a terminal nor the plain line per
    /// sample interval on a pipe.
    #[arg(long)]
    pub quiet: bool,
}

pub fn run(args: Args) -> Result<Outcome, CliError> {
    let run_error = |e: RunError| match e {
        RunError::BadInput(bad) => CliError::bad_input(bad),
        other => CliError::runtime(other),
    };
    args.job
        .refuse_unused("recover", &["--threads", "--duration", "--db-size"])?;
    let job = args.job.load()?;
    let selected = select_backend(&job)?;
    let backend = selected.backend.clone();
    // Devices where database files are expected, and files that cannot be written, are bad
    // input before the lock makes its files beside them.
    jetproof_storage::host::check_before_lock(&job, true).map_err(CliError::bad_input)?;
    // Before any header is read: a database whose run is still live is refused as in use (not
    // taken for one left dirty by a crash, which is what recovery is for).
    let owner = lock::lock_instances(&job, lock::Access::Exclusive, "recover")
        .map_err(CliError::bad_input)?;
    // Which databases need recovery, before anything is written.
    let dirty = dirty_databases(&job, &backend).map_err(run_error)?;
    if !dirty.iter().any(|&d| d) {
        outln!(
            "Every database of the job ({}) was shut down cleanly: nothing to recover.",
            dirty.len()
        );
        return Ok(Outcome::Pass);
    }
    jetproof_procedures::soft_recovery::recover_preflight(&job, &dirty).map_err(run_error)?;
    crate::common::warn_memory(&job);

    let out =
        OutDir::prepare(args.out.as_deref(), TestKind::Recovery).map_err(CliError::bad_input)?;
    crate::panics::write_failed_result(&out, TestKind::Recovery, &job);
    let log = TestLog::create(&out.file("test.log"), false)
        .context("create the test log")
        .map_err(CliError::runtime)?;
    log.line(format!(
        "jetproof {} recover: replaying the logs of the databases not shut down cleanly",
        jetproof_results::tool_version()
    ));
    log_engine(&log, &selected, &job);
    log_owner_lock(&log, &owner);
    let live = crate::live::Live::new(args.quiet, "recover", job.run.sample_interval.as_duration());
    let result = recover_job(&job, &dirty, &backend, &out, &log, Some(&live));
    live.finish();
    let result = result.map_err(run_error)?;
    out!("{}", jetproof_results::report::text(&result));
    let result_path = out.file("result.json");
    outln!("Results: {}", result_path.display());
    let replay_failed = result.instances.iter().any(|instance| {
        instance
            .figures
            .recovery()
            .is_some_and(|r| r.error.is_some())
    });
    match result.verdict {
        Verdict::Pass => Ok(Outcome::Pass),
        // Every replay succeeded, but the storage returned damage it had to correct (pages with
        // a flipped bit): the databases are recovered, the verdict fails (exit 1).
        Verdict::Fail if !replay_failed => Ok(Outcome::Fail),
        // A replay that failed is a runtime error (a damaged or missing log, an I/O error), not
        // a threshold verdict: exit 3, with the reasons (file and offset) on stderr too.
        Verdict::Fail => Err(CliError::runtime(anyhow::anyhow!(
            "{}; see {}",
            result.reasons.join("; "),
            result_path.display()
        ))),
    }
}
