//! `jetproof run [JOB] --test performance|stress|backup|soft-recovery`: the Jetstress test types.
//!
//! Exit codes: 0 pass; 1 the verdict failed (reasons printed); 2 bad input; 3 a storage error
//! stopped an instance (for soft recovery: its log generation or its replay); 4 a panic stopped
//! every thread, `result.json` says so (`crate::panics`).

use std::path::PathBuf;

use jetproof_procedures::sequence::{self, Finished, Request, Test};
use jetproof_results::Verdict;

use crate::common::{CliError, JobArgs, ManyArgs, Outcome};

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
    let job = load(&args, test)?;
    let request = Request {
        test,
        out: args.out.clone(),
        to: args.to.clone(),
        log_files: args.log_files,
        start_at: args.many.start_at,
        db_size: args.job.db_size,
    };
    let front = crate::front::RunFront {
        job: &args.job,
        out: args.out.as_deref(),
        quiet: args.quiet,
        metrics_listen: args.metrics_listen.as_deref(),
        metrics: Default::default(),
    };
    let finished = sequence::run(&job, &request, &front).map_err(crate::front::failure)?;
    outcome(test, &finished)
}

/// The test asked for with `--test`. Without it, a job argument that names a test and is no
/// file (`jetproof run performance`) gets a did-you-mean (issue 32, point 12).
fn which_test(args: &Args) -> Result<Test, CliError> {
    use clap::ValueEnum as _;
    if let Some(test) = args.test {
        return Ok(match test {
            TestType::Performance => Test::Performance,
            TestType::Stress => Test::Stress,
            TestType::Backup => Test::Backup,
            TestType::SoftRecovery => Test::SoftRecovery,
        });
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

/// The flags the test does not use are refused, then the job is loaded with the overrides: all
/// bad input before any I/O (the sequence's own checks follow).
fn load(args: &Args, test: Test) -> Result<jetproof_job::Job, CliError> {
    let command = test.command();
    match test {
        // Backup reads what exists, with one reader per database, for as long as that takes.
        Test::Backup => {
            args.job
                .refuse_unused(&command, &["--threads", "--duration", "--db-size"])?;
        }
        // Soft recovery's length is its log files (`--log-files`), not a window.
        Test::SoftRecovery => args.job.refuse_unused(&command, &["--duration"])?,
        Test::Performance | Test::Stress => {}
    }
    if args.log_files.is_some() && test != Test::SoftRecovery {
        crate::common::refuse_flags(&command, &["--log-files"])?;
    }
    if args.metrics_listen.is_some() && !matches!(test, Test::Performance | Test::Stress) {
        crate::common::refuse_flags(&command, &["--metrics-listen"])?;
    }
    args.many.apply()?;
    if args.cache_max.is_some() && test == Test::Backup {
        crate::common::refuse_flags(&command, &["--cache-max"])?;
    }
    let job = args.job.load_with_cache(args.cache_max)?;
    if args.to.is_some() && test != Test::Backup {
        return Err(CliError::bad_input(anyhow::anyhow!(
            "--to: only the backup test writes a copy; drop --to or use --test backup"
        )));
    }
    Ok(job)
}

/// What a finished test prints, and its exit: a storage error is exit 3 whatever the verdict,
/// then the verdict.
fn outcome(test: Test, finished: &Finished) -> Result<Outcome, CliError> {
    let result = &finished.result;
    if test == Test::Backup {
        out!("{}", jetproof_results::report::backup_text(result));
    } else {
        out!("{}", jetproof_results::report::text(result));
    }
    if let Some((sessions, trials)) = result
        .parameters
        .autotune
        .as_ref()
        .and_then(|tune| Some((tune.chosen_sessions?, tune.trials.len())))
    {
        outln!(
            "Auto-tune: {sessions} session(s) per instance reach the target ({trials} trials; evidence in {})",
            finished.log.display()
        );
    }
    outln!("Result: {}", finished.out.file("result.json").display());
    if finished.storage_error() {
        let what = match test {
            Test::Performance | Test::Stress => "an instance",
            Test::SoftRecovery => "an instance or its recovery",
            Test::Backup => "the backup of a database",
        };
        return Err(CliError::runtime(anyhow::anyhow!(
            "a storage error stopped {what}; see the reasons above and {}",
            finished.log.display()
        )));
    }
    Ok(match result.verdict {
        Verdict::Pass => Outcome::Pass,
        Verdict::Fail => Outcome::Fail,
    })
}
