//! `jetproof init [JOB]`: create the job's databases and fill them to size.

use std::path::PathBuf;

use anyhow::Context;
use jetproof_procedures::init::{InitError, InitOptions};
use jetproof_results::{OutDir, TestKind, TestLog};
use jetproof_storage::lock::{self, OwnerLock};
use jetproof_storage::target::Permissions;

use crate::common::{CliError, JobArgs, Outcome, log_engine, log_owner_lock, select_backend};

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pub job: JobArgs,
    /// Results directory (default ./jetproof-results/init-TIME/).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Replace databases that jetproof made earlier (never anything else).
    #[arg(long)]
    pub recreate: bool,
    /// Make only the databases that are missing: when every database of the job is already one
    /// the job would have made (closed cleanly, its page size and size), do nothing and exit 0;
    /// when some are, keep them and make the rest. One that is there but differs is refused.
    #[arg(long, conflicts_with = "recreate")]
    pub if_missing: bool,
    /// Place jetproof's files in directories that hold other files (those are never touched).
    #[arg(long)]
    pub allow_foreign_files: bool,
    /// Destroy the file system, partition table or RAID signature on this block device (a
    /// database or log path of the job, named exactly; repeat for several). Never overrides a
    /// device that is mounted, open exclusively elsewhere or held by MD/LVM/device-mapper.
    #[arg(long, value_name = "DEVICE")]
    pub wipe_device: Vec<PathBuf>,
    /// No progress on stderr: neither the bars on a terminal nor the plain line per sample
    /// interval on a pipe.
    #[arg(long)]
    pub quiet: bool,
}

pub fn run(args: Args) -> Result<Outcome, CliError> {
    // Init fills the databases with its own loader, for as long as that takes.
    args.job
        .refuse_unused("init", &["--threads", "--duration"])?;
    run_locked(args, "init").map(|(outcome, _lock)| outcome)
}

/// `init`, returning the owner lock it took (`command` names the command in the lock file), so
/// that `run`, which initialises missing databases first, holds it to its own end.
pub fn run_locked(args: Args, command: &str) -> Result<(Outcome, OwnerLock), CliError> {
    let job = args.job.load()?;
    let permissions = Permissions {
        allow_foreign_files: args.allow_foreign_files,
        recreate: args.recreate,
        wipe_devices: args.wipe_device.clone(),
    };
    // A live writer of these databases is named first, before anything is made; then the
    // targets are checked once before anything is made (bad input costs nothing), and again by
    // `init` under the lock, where no other command can change them any more.
    lock::refuse_if_written(&job).map_err(CliError::bad_input)?;
    if args.if_missing && jetproof_procedures::init::all_present(&job).map_err(init_error)? {
        errln!(
            "jetproof: init --if-missing: all {} database(s) of the job are there, each as the job would make it; nothing to do",
            job.instances().len()
        );
        let owner = lock::lock_for_init(&job, command).map_err(CliError::bad_input)?;
        return Ok((Outcome::Pass, owner));
    }
    jetproof_procedures::init::preflight(&job, &permissions).map_err(init_error)?;
    crate::common::warn_memory(&job);
    let selected = select_backend(&job)?;
    let command = if args.recreate {
        format!("{command} --recreate")
    } else {
        command.to_string()
    };
    let owner = lock::lock_for_init(&job, &command).map_err(CliError::bad_input)?;
    let out = OutDir::prepare(args.out.as_deref(), TestKind::Init).map_err(CliError::bad_input)?;
    crate::panics::write_failed_result(&out, TestKind::Init, &job);
    let log = TestLog::create(&out.file("test.log"), false)
        .context("create the test log")
        .map_err(CliError::runtime)?;
    log_engine(&log, &selected, &job);
    log_owner_lock(&log, &owner);

    // Init checks the flag between records and chunks; what it left under `.partial` names is
    // removed by the next init, which then goes on. A database on a device has no `.partial`
    // name: it is left dirty, and only `--recreate` makes it anew (`docs/devices.md`).
    let stop = crate::signals::stop_flag(
        match jetproof_procedures::init::interrupted_targets(&job) {
            (devices, _) if devices.is_empty() => {
                "interrupted: stopping init; the next `jetproof init` removes the partial databases and goes on"
            }
            (_, false) => {
                "interrupted: stopping init; the databases on devices are left dirty and half-filled, and only `jetproof init --recreate` makes them anew"
            }
            (_, true) => {
                "interrupted: stopping init; the next `jetproof init` removes the partial databases in files, and those on devices are left dirty and half-filled: only `jetproof init --recreate` makes them anew"
            }
        },
    );

    // A terminal gets the bars (indicatif hides them elsewhere), a pipe one plain line per
    // sample interval and one per phase, --quiet nothing.
    let bar = crate::progress::Bar::default();
    let live = crate::live::Live::for_pipe(args.quiet, job.run.sample_interval.as_duration());
    let plain = jetproof_procedures::live::BytesStatus::new(&live, "init");
    let progress: &dyn jetproof_procedures::init::Progress = if args.quiet {
        &jetproof_procedures::init::NoProgress
    } else if !live.is_quiet() {
        &plain
    } else {
        &bar
    };
    let options = InitOptions {
        permissions,
        backend: selected.backend.clone(),
        progress,
        stop: &stop,
        seed: jetproof_procedures::init::CONTENT_SEED,
    };
    let summary =
        jetproof_procedures::init::init(&job, &out, &log, &options).map_err(init_error)?;
    let totals = summary.result.totals.init().cloned().unwrap_or_default();
    if job.storage.instance.is_empty() {
        outln!(
            "Initialised {} database(s) of {} under {}",
            summary.result.instances.len(),
            job.db_size(),
            job.storage.data_dir.display()
        );
    } else {
        // `[[storage.instance]]` places each database itself; `data_dir` is not used.
        outln!(
            "Initialised {} database(s) of {} at the instances' paths:",
            summary.result.instances.len(),
            job.db_size()
        );
        for instance in &summary.result.instances {
            outln!(
                "  {}: {} (logs {})",
                instance.name,
                instance.database_path.display(),
                instance.log_path.display()
            );
        }
    }
    if totals.resumed.is_some() {
        outln!(
            "  resumed:     the complete databases already there kept, only the missing ones made (an interrupted init's leftovers removed)"
        );
    }
    outln!(
        "  filling:     {:>8.1} MB/s  ({:.0} records per database, {:.1} s)",
        totals.fill_mb_per_sec,
        totals.records_per_database.unwrap_or(0),
        totals.fill_seconds
    );
    if let Some(reduction) = &summary.result.data_reduction {
        let all = &reduction.across_databases;
        outln!(
            "  content:     compresses {:.2}:1 (set {:.2}), {:.2}% of {} blocks duplicated across all databases",
            all.compression_ratio,
            reduction.setting.compression_ratio,
            all.duplicate_share * 100.0,
            jetproof_results::reduction::unit_label(reduction.setting.dedup_unit_bytes)
        );
    }
    outln!(
        "  total:       {:>8.1} MB/s  ({:.2} GB written in {:.1} s)",
        totals.mb_per_sec,
        totals.bytes_written as f64 / 1e9,
        totals.seconds
    );
    outln!("Result: {}", summary.result_path.display());
    Ok((Outcome::Pass, owner))
}

fn init_error(error: InitError) -> CliError {
    match error {
        InitError::BadInput(bad) => CliError::bad_input(bad),
        other => CliError::runtime(other),
    }
}
