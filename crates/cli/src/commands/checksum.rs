//! `jetproof checksum [JOB]`: verify every page of every database of the job, never writing, and
//! print the seeds' "Checksum Statistics" table with the location of every damaged page.
//!
//! Exit codes: 0 every page is perfect and every database was shut down cleanly; 1 some page is
//! bad, correctable or has a wrong page number, a database is dirty (not shut down cleanly: run
//! `jetproof recover`), bytes were appended past its last page, or a log file is bad or has lost
//! its checkpoint file (the verdict is fail: damage is reported, never repaired; every page is
//! checked all the same); 2 bad input (a missing
//! database: run `jetproof init` first; a bad job field; an unusable `--out`); 3 a file that
//! cannot be checked (truncated, foreign, garbage), an I/O error, or Ctrl-C (the pages checked
//! until then are still reported and written to result.json, marked interrupted).

use std::path::PathBuf;

use anyhow::Context;
use indicatif::ProgressBar;
use jetproof_procedures::checksum::{self, ChecksumError, ChecksumOptions, ChecksumTest};
use jetproof_results::{OutDir, TestKind, TestLog};
use jetproof_storage::lock;

use crate::common::{
    CliError, JobArgs, ManyArgs, Outcome, log_engine, log_owner_lock, select_backend,
};

/// Damaged pages printed per file on the terminal; result.json lists them all.
const DAMAGE_LINES_PER_FILE: usize = 20;

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pub job: JobArgs,
    #[command(flatten)]
    pub many: ManyArgs,
    /// Results directory (default ./jetproof-results/checksum-TIME/).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// No progress on stderr: neither the bar on a terminal nor the plain line per sample
    /// interval on a pipe.
    #[arg(long)]
    pub quiet: bool,
}

pub fn run(args: Args) -> Result<Outcome, CliError> {
    args.job
        .refuse_unused("checksum", &["--threads", "--duration", "--db-size"])?;
    args.many.apply()?;
    let job = args.job.load()?;
    let selected = select_backend(&job)?;
    let backend = selected.backend.clone();
    // A device where a database file is expected is bad input before anything is made or
    // read, the lock file beside it included (`jetproof_storage::host`).
    jetproof_storage::host::check_before_lock(&job, false).map_err(CliError::bad_input)?;
    // Shared with other readers, never with a writer: taken before any header is read.
    let owner = lock::lock_instances(&job, lock::Access::Shared, "checksum")
        .map_err(CliError::bad_input)?;
    // A job of another page size than the databases' is bad input before anything is checked.
    jetproof_storage::host::check_existing(&job, &job.instances(), false)
        .map_err(CliError::bad_input)?;
    checksum::preflight(&job, backend.as_ref()).map_err(checksum_error)?;
    let out =
        OutDir::prepare(args.out.as_deref(), TestKind::Checksum).map_err(CliError::bad_input)?;
    crate::panics::write_failed_result(&out, TestKind::Checksum, &job);
    let log = TestLog::create(&out.file("test.log"), false)
        .context("create the test log")
        .map_err(CliError::runtime)?;

    // Ctrl-C, SIGTERM or SIGHUP stops the readers; what was checked is still reported and
    // written.
    let stop = crate::signals::stop_flag(
        "interrupted: stopping the checksum pass; the pages checked so far are reported",
    );
    let options = ChecksumOptions {
        stop: Some(stop),
        start_at: args.many.start_at,
        ..ChecksumOptions::from_job(&job)
    };
    log.line(format!(
        "jetproof {} checksum: verifying every page of {} database(s)",
        jetproof_results::tool_version(),
        job.instances().len()
    ));
    log_engine(&log, &selected, &job);
    log_owner_lock(&log, &owner);
    for instance in job.instances() {
        log.line(format!(
            "Instance {}: database {}",
            instance.name,
            instance.database_path.display()
        ));
    }
    log.line(format!(
        "Reading each file front to back in {} KiB reads, {} in flight per file, {}; one verifier thread per file",
        options.read_size_bytes / 1024,
        options.reads_in_flight,
        if options.direct_io {
            "direct I/O"
        } else {
            "buffered I/O (storage.direct_io = false: figures include the host's page cache)"
        }
    ));

    if let Some(at) = options.start_at {
        log.line(format!(
            "Waiting for the start time {} (--start-at): the files are opened first, the reads start then",
            jetproof_results::clock::rfc3339_millis(at)
        ));
    }
    // A terminal gets the bar, a pipe one plain line per sample interval, --quiet nothing.
    let bar = Bar::new();
    let live = crate::live::Live::for_pipe(args.quiet, job.run.sample_interval.as_duration());
    let plain = jetproof_procedures::live::BytesStatus::new(&live, "checksum");
    let progress: &dyn checksum::Progress = if args.quiet {
        &checksum::NoProgress
    } else if !live.is_quiet() {
        &plain
    } else {
        &bar
    };
    let ChecksumTest {
        run,
        result_path,
        table,
        damage,
        trailing,
        clean,
        verdict,
        ..
    } = checksum::test(
        &job,
        backend.as_ref(),
        &options,
        progress,
        &out,
        &log,
        DAMAGE_LINES_PER_FILE,
    )
    .map_err(checksum_error)?;

    outln!("Checksum Statistics - All");
    for row in &table {
        outln!("{row}");
    }
    if !damage.is_empty() {
        outln!();
        outln!("Damage and state:");
        for line in &damage {
            outln!("  {line}");
        }
    }
    for line in &trailing {
        outln!("  {line}");
    }
    outln!();
    if run.interrupted {
        outln!("Results so far: {}", result_path.display());
        return Err(CliError::runtime(anyhow::anyhow!(
            "interrupted before every page was checked; the figures above cover the pages checked"
        )));
    }
    outln!("Verdict: {verdict}");
    outln!("Results: {}", result_path.display());
    Ok(if clean { Outcome::Pass } else { Outcome::Fail })
}

fn checksum_error(error: ChecksumError) -> CliError {
    if error.is_bad_input() {
        CliError::bad_input(error)
    } else {
        CliError::runtime(error)
    }
}

/// One progress bar for the whole pass, fed by every file's thread. Hidden when stderr is not a
/// terminal.
struct Bar {
    bar: ProgressBar,
}

impl Bar {
    fn new() -> Bar {
        let bar = ProgressBar::hidden();
        bar.set_style(crate::progress::bytes_style("Checksum"));
        Bar { bar }
    }
}

impl checksum::Progress for Bar {
    fn start(&self, total_bytes: u64) {
        self.bar.set_length(total_bytes);
        self.bar
            .set_draw_target(indicatif::ProgressDrawTarget::stderr());
    }

    fn advance(&self, bytes: u64) {
        self.bar.inc(bytes);
    }

    fn finish(&self) {
        self.bar.finish_and_clear();
    }
}
