//! `jetproof run [JOB] --test performance|stress|backup|soft-recovery`: the Jetstress test types.
//!
//! Exit codes: 0 pass; 1 the verdict failed (reasons printed); 2 bad input; 3 a storage error
//! stopped an instance (for soft recovery: its log generation or its replay); 4 a panic stopped
//! every thread, `result.json` says so (`crate::panics`).

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use anyhow::Context;
use jetproof_procedures::backup::{BackupError, BackupOptions};
use jetproof_procedures::performance::{RunError, RunOptions};
use jetproof_results::{OutDir, TestKind, TestLog, Verdict};
use jetproof_storage::lock::{self, OwnerLock};

use crate::common::{
    CliError, JobArgs, ManyArgs, Outcome, log_engine, log_owner_lock, select_backend,
};

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum TestType {
    Performance,
    Stress,
    Backup,
    SoftRecovery,
}

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pub job: JobArgs,
    #[command(flatten)]
    pub many: ManyArgs,
    /// The test to run (required).
    #[arg(long, value_enum)]
    pub test: Option<TestType>,
    /// Results directory (default ./jetproof-results/TEST-TIME/).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Backup: also write a verified copy of each database into DIR.
    #[arg(long, value_name = "DIR")]
    pub to: Option<PathBuf>,
    /// Soft recovery: log generations to generate per instance (overrides run.recovery_log_files).
    #[arg(long, value_name = "N")]
    pub log_files: Option<u32>,
    /// Each instance's database cache maximum, like 16MiB (overrides cache.max_size; lowers
    /// cache.min_size to it when above). A performance or stress test whose cache can hold the
    /// database is refused: it would measure nothing.
    #[arg(long, value_name = "SIZE")]
    pub cache_max: Option<jetproof_job::ByteSize>,
    /// No live view on stderr: neither the redrawn status on a terminal nor the line per
    /// sample interval on a pipe (every test, and the init a run starts).
    #[arg(long)]
    pub quiet: bool,
    /// Performance and stress: serve the test's live figures to Prometheus at
    /// `http://ADDR:PORT/metrics` while it runs (docs/metrics.md); a bare PORT listens on
    /// loopback only, another address is your choice to expose them.
    #[arg(long, value_name = "[ADDR:]PORT")]
    pub metrics_listen: Option<String>,
}

pub fn run(args: Args) -> Result<Outcome, CliError> {
    let test = which_test(&args)?;
    run_test(args, test)
}

impl Args {
    /// The test; set by [`run`] before anything else reads it.
    fn test(&self) -> TestType {
        self.test.unwrap_or(TestType::Performance)
    }
}

/// The test asked for with `--test`. Without it, a job argument that names a test and is no
/// file (`jetproof run performance`) gets a did-you-mean (issue 32, point 12).
fn which_test(args: &Args) -> Result<TestType, CliError> {
    use clap::ValueEnum as _;
    if let Some(test) = args.test {
        return Ok(test);
    }
    let names = "performance, stress, backup or soft-recovery";
    if let Some(word) = args.job.job.as_ref().filter(|p| !p.exists())
        && let Some(name) = word.to_str()
        && let Ok(test) = TestType::from_str(name, true)
    {
        let name = test
            .to_possible_value()
            .map(|v| v.get_name().to_string())
            .unwrap_or_default();
        return Err(CliError::bad_input(anyhow::anyhow!(
            "--test: `{name}` was taken as the job file (there is no such file); did you mean `jetproof run --test {name}`? The test is given with --test ({names}), the job file, if any, before it"
        )));
    }
    Err(CliError::bad_input(anyhow::anyhow!(
        "--test: give the test to run, one of {names}, like `jetproof run JOB --test performance`"
    )))
}

fn run_test(mut args: Args, test: TestType) -> Result<Outcome, CliError> {
    args.test = Some(test);
    let command = run_command(test);
    match args.test() {
        // Backup reads what exists, with one reader per database, for as long as that takes.
        TestType::Backup => {
            args.job
                .refuse_unused(&command, &["--threads", "--duration", "--db-size"])?;
        }
        // Soft recovery's length is its log files (`--log-files`), not a window.
        TestType::SoftRecovery => args.job.refuse_unused(&command, &["--duration"])?,
        TestType::Performance | TestType::Stress => {}
    }
    if args.log_files.is_some() && args.test() != TestType::SoftRecovery {
        crate::common::refuse_flags(&command, &["--log-files"])?;
    }
    if args.metrics_listen.is_some() && !matches!(test, TestType::Performance | TestType::Stress) {
        crate::common::refuse_flags(&command, &["--metrics-listen"])?;
    }
    args.many.apply()?;
    if args.cache_max.is_some() && args.test() == TestType::Backup {
        crate::common::refuse_flags(&command, &["--cache-max"])?;
    }
    let job = args.job.load_with_cache(args.cache_max)?;
    if args.to.is_some() && args.test() != TestType::Backup {
        return Err(CliError::bad_input(anyhow::anyhow!(
            "--to: only the backup test writes a copy; drop --to or use --test backup"
        )));
    }
    match args.test() {
        TestType::Backup => backup(&job, &args),
        TestType::Performance => performance(&job, &args, false),
        TestType::Stress => performance(&job, &args, true),
        TestType::SoftRecovery => soft_recovery(&job, &args),
    }
}

/// Initialises the databases when none exist yet, saying so: a newcomer's first command is a
/// single `run`. Returns init's owner lock (exclusive on every instance), which the run keeps.
fn init_if_missing(job: &jetproof_job::Job, args: &Args) -> Result<OwnerLock, CliError> {
    jetproof_storage::database::refuse_lost_databases(job).map_err(CliError::bad_input)?;
    errln!("jetproof: the databases do not exist yet; initialising them first (jetproof init)");
    let init_args = crate::commands::init::Args {
        job: args.job.clone(),
        out: args.out.as_ref().map(|o| o.join("init")),
        recreate: false,
        allow_foreign_files: false,
        wipe_device: Vec::new(),
        quiet: args.quiet,
    };
    let (_, owner) = crate::commands::init::run_locked(init_args, &run_command(args.test()))?;
    Ok(owner)
}

/// `--db-size` sizes databases that `run` creates; on databases that exist it changes nothing,
/// which is said rather than passed over.
fn warn_db_size(args: &Args) {
    if let Some(size) = args.job.db_size {
        errln!(
            "jetproof: --db-size {size}: the databases exist already, so it changes nothing \
             (it sizes databases that run or init create; `jetproof init --recreate` makes them \
             anew at that size)"
        );
    }
}

/// The command as the owner lock names it: "run --test performance".
fn run_command(test: TestType) -> String {
    let name = match test {
        TestType::Performance => "performance",
        TestType::Stress => "stress",
        TestType::Backup => "backup",
        TestType::SoftRecovery => "soft-recovery",
    };
    format!("run --test {name}")
}

/// The run's owner lock: exclusive (every test but backup writes), or shared for backup's reads.
/// Taken before any header is read, so a live owner is named instead of its dirty header being
/// taken for a crash; `init`'s lock when the run initialised the databases first.
fn owner_lock(
    job: &jetproof_job::Job,
    args: &Args,
    from_init: Option<OwnerLock>,
) -> Result<OwnerLock, CliError> {
    if let Some(owner) = from_init {
        return Ok(owner);
    }
    // Devices where database files are expected, and files a writer cannot write, are bad
    // input before the lock makes its files beside them.
    jetproof_storage::host::check_before_lock(job, args.test() != TestType::Backup)
        .map_err(CliError::bad_input)?;
    let access = if args.test() == TestType::Backup {
        lock::Access::Shared
    } else {
        lock::Access::Exclusive
    };
    lock::lock_instances(job, access, &run_command(args.test())).map_err(CliError::bad_input)
}

/// `--test soft-recovery`: generate N log files per instance with the checkpoint held, stop
/// uncleanly, replay and time it (`jetproof_procedures::soft_recovery`).
fn soft_recovery(job: &jetproof_job::Job, args: &Args) -> Result<Outcome, CliError> {
    let run_error = |e: RunError| match e {
        RunError::BadInput(bad) => CliError::bad_input(bad),
        other => CliError::runtime(other),
    };
    if args.log_files == Some(0) {
        return Err(CliError::bad_input(anyhow::anyhow!(
            "--log-files 0: soft recovery replays the log files it generates; give at least 1 (ESRP uses 500)"
        )));
    }
    let log_files = args.log_files.unwrap_or(job.run.recovery_log_files);
    jetproof_storage::host::check_job_fits(job).map_err(CliError::bad_input)?;
    let selected = select_backend(job)?;
    let from_init = if jetproof_procedures::performance::databases_exist(job) {
        warn_db_size(args);
        None
    } else {
        Some(init_if_missing(job, args)?)
    };
    let owner = owner_lock(job, args, from_init)?;
    jetproof_procedures::soft_recovery::preflight(job, log_files).map_err(run_error)?;
    crate::common::warn_memory(job);
    let out =
        OutDir::prepare(args.out.as_deref(), TestKind::Recovery).map_err(CliError::bad_input)?;
    crate::panics::write_failed_result(&out, TestKind::Recovery, job);
    let log = TestLog::create(&out.file("test.log"), false)
        .context("create the test log")
        .map_err(CliError::runtime)?;
    log_engine(&log, &selected, job);
    log_owner_lock(&log, &owner);
    let stop = stop_flag();
    errln!(
        "jetproof: soft-recovery test, {log_files} log file(s) per instance, then an unclean stop and replay; test log: {}",
        log.path().display()
    );
    let live = crate::live::Live::new(
        args.quiet,
        "soft recovery",
        job.run.sample_interval.as_duration(),
    );
    let options = RunOptions {
        backend: selected.backend.clone(),
        stop: &stop,
        seed: 0x6a70_7275_6e00_0002,
        start_at: args.many.start_at,
        live: Some(&live),
    };
    let result =
        jetproof_procedures::soft_recovery::soft_recovery(job, log_files, &out, &log, &options);
    live.finish();
    let result = result.map_err(run_error)?;

    out!("{}", jetproof_results::report::text(&result));
    outln!("Result: {}", out.file("result.json").display());
    if result
        .instances
        .iter()
        .any(|i| i.figures.storage_error().is_some())
    {
        return Err(CliError::runtime(anyhow::anyhow!(
            "a storage error stopped an instance or its recovery; see the reasons above and {}",
            log.path().display()
        )));
    }
    Ok(match result.verdict {
        Verdict::Pass => Outcome::Pass,
        Verdict::Fail => Outcome::Fail,
    })
}

fn performance(job: &jetproof_job::Job, args: &Args, stress: bool) -> Result<Outcome, CliError> {
    let run_error = |e: RunError| match e {
        RunError::BadInput(bad) => CliError::bad_input(bad),
        other => CliError::runtime(other),
    };
    let test = if stress {
        TestKind::Stress
    } else {
        TestKind::Performance
    };
    jetproof_procedures::performance::check_job(job).map_err(run_error)?;
    // Bound before any I/O: a bad address or a port in use is bad input, nothing done.
    let metrics = args
        .metrics_listen
        .as_deref()
        .map(crate::metrics::MetricsServer::bind)
        .transpose()?;
    let selected = select_backend(job)?;
    let from_init = if jetproof_procedures::performance::databases_exist(job) {
        warn_db_size(args);
        None
    } else {
        Some(init_if_missing(job, args)?)
    };
    let owner = owner_lock(job, args, from_init)?;
    jetproof_procedures::performance::preflight(job).map_err(run_error)?;
    crate::common::warn_memory(job);
    let out = OutDir::prepare(args.out.as_deref(), test).map_err(CliError::bad_input)?;
    crate::panics::write_failed_result(&out, test, job);
    let log = TestLog::create(&out.file("test.log"), false)
        .context("create the test log")
        .map_err(CliError::runtime)?;
    log_engine(&log, &selected, job);
    log_owner_lock(&log, &owner);
    let stop = stop_flag();
    let duration = if stress {
        job.run.stress_duration
    } else {
        job.run.duration
    };
    errln!(
        "jetproof: {} test, {} measured after the cache is warm; test log: {}",
        test.name(),
        duration,
        log.path().display()
    );
    let live = crate::live::Live::new(
        args.quiet,
        test.name(),
        job.run.sample_interval.as_duration(),
    );
    let watch = crate::metrics::Watch {
        live: &live,
        metrics: metrics.as_ref(),
    };
    let options = RunOptions {
        backend: selected.backend.clone(),
        stop: &stop,
        seed: 0x6a70_7275_6e00_0001,
        start_at: args.many.start_at,
        live: Some(&watch),
    };
    let checksum_after = if stress {
        job.run.checksum_after_stress
    } else {
        job.run.checksum_after_performance
    };
    let result = if checksum_after {
        jetproof_procedures::performance::with_checksum(job, stress, &out, &log, &options)
    } else {
        jetproof_procedures::performance::performance(job, stress, &out, &log, &options)
    };
    live.finish();
    let result = result.map_err(run_error)?;
    out!("{}", jetproof_results::report::text(&result));
    if let Some((sessions, trials)) = result
        .parameters
        .autotune
        .as_ref()
        .and_then(|tune| Some((tune.chosen_sessions?, tune.trials.len())))
    {
        outln!(
            "Auto-tune: {sessions} session(s) per instance reach the target ({trials} trials; evidence in {})",
            log.path().display()
        );
    }
    outln!("Result: {}", out.file("result.json").display());
    if result
        .instances
        .iter()
        .any(|i| i.figures.storage_error().is_some())
    {
        return Err(CliError::runtime(anyhow::anyhow!(
            "a storage error stopped an instance; see the reasons above and {}",
            log.path().display()
        )));
    }
    Ok(match result.verdict {
        Verdict::Pass => Outcome::Pass,
        Verdict::Fail => Outcome::Fail,
    })
}

/// The run's stop flag, set by Ctrl-C (SIGINT), SIGTERM or SIGHUP: the test ends its current
/// phase, closes the databases cleanly and writes what it measured, marked interrupted. A second
/// signal quits at once, for a user who cannot wait for the shut-down (the databases then need
/// recovery). See `crate::signals`.
fn stop_flag() -> Arc<AtomicBool> {
    crate::signals::stop_flag(crate::signals::RUN_STOPPING)
}

fn backup(job: &jetproof_job::Job, args: &Args) -> Result<Outcome, CliError> {
    let backup_error = |e: BackupError| match e {
        BackupError::BadInput(bad) => CliError::bad_input(bad),
        other => CliError::runtime(other),
    };
    let owner = owner_lock(job, args, None)?;
    jetproof_procedures::backup::preflight(job, args.to.as_deref()).map_err(backup_error)?;
    let selected = select_backend(job)?;
    let out =
        OutDir::prepare(args.out.as_deref(), TestKind::Backup).map_err(CliError::bad_input)?;
    crate::panics::write_failed_result(&out, TestKind::Backup, job);
    let log = TestLog::create(&out.file("test.log"), false)
        .context("create the test log")
        .map_err(CliError::runtime)?;
    log_engine(&log, &selected, job);
    log_owner_lock(&log, &owner);
    let stop = stop_flag();
    // A terminal gets the bar (indicatif hides it elsewhere); a pipe one plain line per sample
    // interval; --quiet neither.
    let live = crate::live::Live::for_pipe(args.quiet, job.run.sample_interval.as_duration());
    let started = std::time::Instant::now();
    let bar = if args.quiet {
        indicatif::ProgressBar::hidden()
    } else {
        indicatif::ProgressBar::new(0)
    };
    bar.set_style(crate::progress::bytes_style("Backup"));
    let progress = |done: u64, total: u64| {
        bar.set_length(total);
        bar.set_position(done);
        if live.is_quiet() {
            return;
        }
        let elapsed_s = started.elapsed().as_secs_f64();
        let (detail, eta_s) = jetproof_procedures::live::bytes_detail(done, total, elapsed_s);
        jetproof_procedures::live::LiveView::status(
            &live,
            &jetproof_procedures::live::PhaseStatus {
                phase: "backup".into(),
                elapsed_s,
                eta_s,
                detail,
                milestone: total > 0 && done >= total,
            },
        );
    };
    let options = BackupOptions {
        backend: selected.backend.clone(),
        to: args.to.clone(),
        start_at: args.many.start_at,
        stop: &stop,
        progress: &progress,
    };
    let result =
        jetproof_procedures::backup::backup(job, &out, &log, &options).map_err(backup_error)?;
    bar.finish_and_clear();

    out!("{}", jetproof_results::report::backup_text(&result));
    outln!("Result: {}", out.file("result.json").display());
    if result
        .instances
        .iter()
        .any(|i| i.figures.storage_error().is_some())
    {
        return Err(CliError::runtime(anyhow::anyhow!(
            "a storage error stopped the backup of a database; see the reasons above and {}",
            log.path().display()
        )));
    }
    Ok(match result.verdict {
        Verdict::Pass => Outcome::Pass,
        Verdict::Fail => Outcome::Fail,
    })
}
