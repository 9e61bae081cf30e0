//! The command line's side of the run sequence (`jetproof_procedures::sequence`): how `jetproof
//! run` talks to its user (stderr, the live view, the progress bar, the metrics listener, the
//! panic writer, the signals), and the one mapping of the sequence's failures to exit codes.

use std::cell::RefCell;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use jetproof_job::Job;
use jetproof_procedures::sequence::{Failure, Front, Test, View};
use jetproof_results::{OutDir, TestKind};
use jetproof_storage::lock::OwnerLock;

use crate::common::{CliError, JobArgs};

/// What of `run`'s flags the front needs.
pub struct RunFront<'a> {
    /// The job flags, for the init a run starts.
    pub job: &'a JobArgs,
    /// `--out`: the init a run starts writes under `OUT/init`.
    pub out: Option<&'a std::path::Path>,
    pub quiet: bool,
    pub metrics_listen: Option<&'a str>,
    /// `--metrics-listen`, bound once the checks passed.
    pub metrics: RefCell<Option<crate::metrics::MetricsServer>>,
}

/// The exit of a run that did not finish: bad input is exit 2 (nothing was done), the rest 3.
pub fn failure(failure: Failure<CliError>) -> CliError {
    match failure {
        Failure::BadInput(bad) => CliError::bad_input(bad),
        Failure::Front(error) => error,
        Failure::Lock(error) => CliError::bad_input(error),
        Failure::OutDir(error) => CliError::bad_input(error),
        Failure::TestLog(error) => {
            CliError::runtime(anyhow::Error::from(error).context("create the test log"))
        }
        Failure::Run(error) => CliError::runtime(error),
        Failure::Backup(error) => CliError::runtime(error),
    }
}

impl Front for RunFront<'_> {
    type Error = CliError;

    fn say(&self, line: &str) {
        errln!("jetproof: {line}");
    }

    /// Bound before any I/O: a bad address or a port in use is bad input, nothing done.
    fn checked(&self, _test: Test) -> Result<(), CliError> {
        if let Some(listen) = self.metrics_listen {
            *self.metrics.borrow_mut() = Some(crate::metrics::MetricsServer::bind(listen)?);
        }
        Ok(())
    }

    /// `jetproof init` as a newcomer's first `run` needs it, its results under `OUT/init`.
    fn init(&self, _job: &Job, test: Test) -> Result<OwnerLock, CliError> {
        let init_args = crate::commands::init::Args {
            job: self.job.clone(),
            out: self.out.map(|o| o.join("init")),
            recreate: false,
            if_missing: false,
            allow_foreign_files: false,
            wipe_device: Vec::new(),
            quiet: self.quiet,
        };
        let (_, owner) = crate::commands::init::run_locked(init_args, &test.command())?;
        Ok(owner)
    }

    fn out_ready(&self, out: &OutDir, kind: TestKind, job: &Job) {
        crate::panics::write_failed_result(out, kind, job);
    }

    /// Set by Ctrl-C (SIGINT), SIGTERM or SIGHUP: the test ends its current phase, closes the
    /// databases cleanly and writes what it measured, marked interrupted. A second signal quits
    /// at once, for a user who cannot wait for the shut-down (the databases then need recovery).
    /// See `crate::signals`.
    fn stop(&self) -> Arc<AtomicBool> {
        crate::signals::stop_flag(crate::signals::RUN_STOPPING)
    }

    fn watch<R>(&self, test: Test, job: &Job, run: impl FnOnce(View<'_>) -> R) -> R {
        let quiet = self.quiet;
        let every = job.run.sample_interval.as_duration();
        let none = |_: u64, _: u64| {};
        match test {
            Test::Performance | Test::Stress => {
                let live = crate::live::Live::new(quiet, test.kind().name(), every);
                let metrics = self.metrics.borrow();
                let watch = crate::metrics::Watch {
                    live: &live,
                    metrics: metrics.as_ref(),
                };
                let result = run(View {
                    live: Some(&watch),
                    progress: &none,
                });
                live.finish();
                result
            }
            Test::SoftRecovery => {
                let live = crate::live::Live::new(quiet, "soft recovery", every);
                let result = run(View {
                    live: Some(&live),
                    progress: &none,
                });
                live.finish();
                result
            }
            Test::Backup => backup_watch(quiet, every, run),
        }
    }
}

/// Backup's view: a terminal gets the bar (indicatif hides it elsewhere); a pipe one plain line
/// per sample interval; --quiet neither.
fn backup_watch<R>(quiet: bool, every: std::time::Duration, run: impl FnOnce(View<'_>) -> R) -> R {
    let live = crate::live::Live::for_pipe(quiet, every);
    let started = std::time::Instant::now();
    let bar = if quiet {
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
    let result = run(View {
        live: None,
        progress: &progress,
    });
    bar.finish_and_clear();
    result
}
