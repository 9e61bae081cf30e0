//! The soft-recovery test (issue 5, item 6), as Jetstress's: every instance is attached with its
//! checkpoint held where it was at attach, the transaction mix runs flat out until each log has
//! grown by N generation files (`run.recovery_log_files`; ESRP uses 500), the instances are then
//! stopped uncleanly (dropped without `close`, as a crash would leave them: the log's durable
//! records stay, nothing else is flushed), and the logs are replayed and timed.
//!
//! Why each choice:
//! * **The checkpoint is held** by attaching with `checkpoint_interval: None` (no background
//!   checkpointer; nothing else moves the checkpoint) and `keep_files: true`: so no log file is
//!   deleted and recovery has to replay every generation written, which is what is timed.
//!   Dirty pages still leave the cache under its own pressure (the write-ahead gate holds), so
//!   the replay meets pages both older and newer than the log, as after a real crash.
//! * **Recovery runs concurrently**, one thread per instance, as Jetstress replays its storage
//!   groups at once: the storage sees the load of all replays together. Each instance is timed
//!   by `jetproof_instance::recover` itself, and measured into a fresh `InstanceStats`, so its
//!   I/O table (`log_read`, `db_read`, `db_write`) is the replay's alone; the clean open and close
//!   that end a recovery (a few header I/Os) are inside it, and their log writes are left out.
//! * **Sessions**: the job's fixed count per instance; with `threads = "auto"` (nothing to tune
//!   against here) [`AUTO_SESSIONS`].
//!
//! A recovery that fails fails the verdict with the instance named, and leaves that database
//! dirty for `jetproof recover`; the others are recovered and clean.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime};

use jetproof_engine::{DbHeader, DbState};
use jetproof_instance::{Instance as LoggedInstance, RecoveryReport, recover};
use jetproof_io::meter::InstanceStats;
use jetproof_io::{IoBackend, IoClass, OpenOptions};
use jetproof_job::Job;
use jetproof_results::checksum::Position;
use jetproof_results::sections::{
    CorrectedPage, LostLog, RecoverParameters, RecoveryInstance, RecoveryTotals, ReplayFigures,
    ReplaySample, SoftRecoveryParameters,
};
use jetproof_results::{
    InstanceFigures, InstanceResult, OutDir, Parameters, TestKind, TestLog, TestResult, Totals,
};
use jetproof_workload::mailboxes::Mailboxes;
use jetproof_workload::pacer::Pacer;
use jetproof_workload::session::{InstanceLoad, LoadCounters, run_session};
use jetproof_workload::store::Store;

use crate::init::mailboxes_per_database;
use crate::run::{RunError, RunOptions};
use crate::store::{EngineStore, require_clean};
use jetproof_storage::bad;
use jetproof_storage::database::require_databases;

/// Sessions per instance when the job says `threads = "auto"` (`crate::settings`).
pub use crate::settings::AUTO_SESSIONS;

/// How often the generator checks how far each log has grown.
const POLL: Duration = Duration::from_millis(20);

/// The I/O classes of a replay reported per instance.
const REPLAY_CLASSES: [&str; 3] = ["log_read", "db_read", "db_write"];

/// One instance while its log files are generated.
struct Generating {
    name: String,
    log_path: std::path::PathBuf,
    instance: Arc<LoggedInstance>,
    load: InstanceLoad,
    first_generation: u64,
    done: AtomicBool,
    failed: AtomicBool,
    error: std::sync::Mutex<Option<String>>,
}

impl Generating {
    fn generated(&self) -> u64 {
        self.instance
            .log()
            .end_lsn()
            .generation
            .saturating_sub(self.first_generation)
    }

    fn set_error(&self, text: String) {
        self.failed.store(true, Ordering::Relaxed);
        if let Ok(mut slot) = self.error.lock()
            && slot.is_none()
        {
            *slot = Some(text);
        }
    }
}

/// Checks, before anything is written, that the soft-recovery test can run: the job fits this
/// host (memory, threads), the existing databases can be attached (`jetproof_storage::host::check_existing`),
/// and the `log_files` generations each instance will write fit in the free space of its log
/// directory's file system (summed per file system): a test that would fill the disk half way
/// is refused, naming `--log-files` and the figures.
pub fn preflight(job: &Job, log_files: u32) -> Result<(), RunError> {
    jetproof_storage::host::check_job_fits(job)?;
    jetproof_storage::host::check_existing(job, &job.instances(), true)?;
    let per_instance = u64::from(log_files).saturating_mul(job.log.file_size.bytes());
    let mut need: BTreeMap<u64, (u64, u64, std::path::PathBuf)> = BTreeMap::new();
    for instance in job.instances() {
        if let Some((available, device)) = jetproof_storage::target::free_space(&instance.log_path)
        {
            let entry = need
                .entry(device)
                .or_insert((0, available, instance.log_path.clone()));
            entry.0 = entry.0.saturating_add(per_instance);
        }
    }
    for (needed, available, path) in need.values() {
        if needed > available {
            return Err(bad(
                "--log-files",
                format!(
                    "{log_files} log file(s) of {} per instance need {} on the file system of {}, which has {} free; give fewer log files (--log-files or run.recovery_log_files), smaller ones (log.file_size), or put the logs elsewhere",
                    job.log.file_size,
                    jetproof_job::ByteSize(*needed),
                    path.display(),
                    jetproof_job::ByteSize(*available)
                ),
            )
            .into());
        }
    }
    Ok(())
}

/// Checks, before anything is written, what `jetproof recover` needs of the databases it will
/// replay (`dirty`, from [`dirty_databases`]): the job fits this host, and each of those
/// databases is a file of the job's page size that can be written with its log directory.
pub fn recover_preflight(job: &Job, dirty: &[bool]) -> Result<(), RunError> {
    jetproof_storage::host::check_job_fits(job)?;
    let replayed: Vec<_> = job
        .instances()
        .into_iter()
        .zip(dirty)
        .filter(|(_, d)| **d)
        .map(|(instance, _)| instance)
        .collect();
    jetproof_storage::host::check_existing(job, &replayed, true)?;
    Ok(())
}

/// Runs the soft-recovery test with `log_files` generations per instance; writes `result.json`
/// and returns the result. Errors are for what prevents the test from running at all (a missing
/// or dirty database, a failed attach); a failed recovery is in the verdict.
pub fn soft_recovery(
    job: &Job,
    log_files: u32,
    out: &OutDir,
    log: &TestLog,
    options: &RunOptions<'_>,
) -> Result<TestResult, RunError> {
    if log_files == 0 {
        return Err(bad(
            "--log-files",
            "soft recovery replays the log files it generated; give at least 1 (ESRP uses 500)",
        )
        .into());
    }
    let instances = job.instances();
    require_databases(job, |path| options.backend.exists(path))?;
    for instance in &instances {
        require_clean(job, options.backend.as_ref(), instance)?;
    }
    let sessions =
        crate::settings::Sessions::of(job, crate::settings::Workload::SoftRecovery).count();
    let started_at = jetproof_results::now_rfc3339();
    let started = Instant::now();
    log.line("Preparing for testing ...");
    log.line(format!(
        "Attaching databases (I/O engine {}) ...",
        options.backend.name()
    ));
    let generating = attach_all(job, &instances, options)?;
    let w = &job.workload;
    log.line(format!(
        "Operation mix: Sessions {sessions}, Inserts {}%, Deletes {}%, Replaces {}%, Reads {}%, Lazy Commits {}%.",
        w.insert_percent, w.delete_percent, w.replace_percent, w.read_percent, w.lazy_commit_percent
    ));
    log.line(format!(
        "Generating log files ... ({log_files} per instance, checkpoint held)"
    ));
    let generation_started = Instant::now();
    generate(&generating, sessions, log_files, options);
    let generation_seconds = generation_started.elapsed().as_secs_f64();
    let interrupted = options.stop.load(Ordering::Relaxed);
    // With --start-at, the generation ends at the start time at the latest, so the replay (the
    // timed part) starts then; fewer log files than asked are then replayed, and said so.
    let cut_by_start = !interrupted
        && options.start_at.is_some_and(crate::start::reached)
        && generating
            .iter()
            .any(|g| g.generated() < u64::from(log_files) && !g.failed.load(Ordering::Relaxed));
    let progress: Vec<String> = generating
        .iter()
        .map(|g| {
            format!(
                "{} ({:.1}% generated)",
                g.log_path.display(),
                g.generated() as f64 * 100.0 / f64::from(log_files)
            )
        })
        .collect();
    log.line(progress.join(", "));
    log.line(format!(
        "Log files generated in {generation_seconds:.1} seconds{}.",
        if interrupted {
            " (interrupted: replaying what was generated)"
        } else if cut_by_start {
            " (the start time arrived first: replaying what was generated; ready_at_start: false)"
        } else {
            ""
        }
    ));

    // The unclean stop: every reference dropped, no `close`. Only what the log made durable and
    // what the cache happened to write survive.
    log.line("Stopping the databases uncleanly (dropped without shut-down, as a crash) ...");
    let stopped = stop_uncleanly(generating);

    if let Some(at) = options.start_at {
        log.line(format!(
            "Waiting for the start time {} (--start-at) ...",
            jetproof_results::clock::rfc3339_millis(at)
        ));
        // Stopped while waiting: the replay still runs, so the databases are left clean.
        let _ = crate::start::wait_until(at, options.stop, || {});
    }
    log.line("Recovering databases ...");
    let recovery_wall_start = SystemTime::now();
    let recovery_started = Instant::now();
    let all: Vec<&jetproof_job::Instance> = instances.iter().collect();
    let replays = replay(job, &options.backend, &all, options.live);
    let recovery_span = recovery_started.elapsed();
    let recovery_seconds = recovery_span.as_secs_f64();

    let mut reasons = Vec::new();
    if interrupted {
        reasons.push(format!(
            "interrupted before {log_files} log files per instance were generated (what was generated was replayed)"
        ));
    }
    let mut results = Vec::with_capacity(instances.len());
    let mut timings = Vec::new();
    let mut total_logs = 0u64;
    let mut total_generated = 0u64;
    for ((instance, (name, _, generated, generation_error)), replayed) in
        instances.iter().zip(stopped).zip(replays)
    {
        if let Some(error) = &generation_error {
            reasons.push(format!(
                "{name}: a storage error stopped the log generation: {error}"
            ));
        }
        let figures = RecoveryInstance {
            logs_generated: Some(generated),
            generation_error,
            ..RecoveryInstance::default()
        };
        total_generated += generated;
        if let Ok(report) = &replayed.outcome {
            timings.push(format!("{name} ({:.3})", report.seconds));
            total_logs += report.logs_replayed;
        }
        for line in replayed.log_lines() {
            log.line(line);
        }
        // Generated and replayed apart: the replay starts at the checkpoint, so it also plays
        // the generation that was open at attach and any an earlier test left past its
        // checkpoint. Only what this test generated counts toward ESRP's 500.
        if let Ok(report) = &replayed.outcome {
            log.line(format!(
                "{name}: Log files generated by this test: {generated} (of {log_files} asked); replayed: {}, of which {} were there before the test (left by an earlier test past its checkpoint, or the file open at attach).",
                report.logs_replayed,
                report.logs_replayed.saturating_sub(generated)
            ));
        }
        let (result, reason) = replayed.into_result(instance, figures);
        reasons.extend(reason);
        results.push(result);
    }
    log.line(timings.join(", "));
    log.line(format!(
        "Recovery of all instances (concurrently) took {recovery_seconds:.3} seconds."
    ));

    let mut parameters = Parameters::of_job(job);
    parameters.soft_recovery = Some(SoftRecoveryParameters {
        log_files: log_files.into(),
        sessions,
        recovery: "concurrent".into(),
    });
    let mut result = TestResult::new(
        TestKind::Recovery,
        started_at,
        started.elapsed().as_secs_f64(),
        parameters,
    );
    result.interrupted = interrupted;
    result.set_window(&jetproof_results::MeasuredWindow {
        requested: options.start_at,
        start: recovery_wall_start,
        end: recovery_wall_start + recovery_span,
        ready_at_start: !cut_by_start,
    });
    result.instances = results;
    result.log_file = Some(log.path().to_path_buf());
    result.io_engine = Some(options.backend.name().to_string());
    log.line(format!(
        "Log files generated by this test: {total_generated} in all ({log_files} asked per instance); replayed: {total_logs} in all."
    ));
    result.totals = Totals::Recovery(RecoveryTotals {
        recovery_seconds,
        logs_replayed: total_logs,
        generation_seconds: Some(generation_seconds),
        logs_generated: Some(total_generated),
    });
    finish(result, reasons, log, out)
}

/// Attaches every instance with the checkpoint held (no checkpointer runs, no log file is
/// deleted), and finds its mailboxes; on an error every instance attached is closed cleanly.
fn attach_all(
    job: &Job,
    instances: &[jetproof_job::Instance],
    options: &RunOptions<'_>,
) -> Result<Vec<Generating>, RunError> {
    let mix = crate::settings::Settings::of(job, false).mix;
    let mut generating = Vec::with_capacity(instances.len());
    for (index, instance) in instances.iter().enumerate() {
        // The checkpoint held: no checkpointer runs, and no log file is deleted.
        let mut attach_options =
            crate::options::instance_options(job, index, InstanceStats::new(instance.name.clone()));
        attach_options.keep_files = true;
        attach_options.checkpoint_interval = None;
        let opened = LoggedInstance::open(
            options.backend.clone(),
            &instance.database_path,
            &instance.log_path,
            attach_options,
        )?;
        let opened = Arc::new(opened);
        let store: Arc<dyn Store> = Arc::new(EngineStore(opened.clone()));
        let mailboxes = match Mailboxes::discover(store.as_ref(), mailboxes_per_database(job)) {
            Ok(mailboxes) => mailboxes,
            Err(e) => {
                // Nothing was changed yet: close this one cleanly; the ones attached before it
                // are closed cleanly too, so a refused test leaves no database dirty.
                drop(store);
                if let Ok(opened) = Arc::try_unwrap(opened) {
                    let _ = opened.close();
                }
                close_all(generating);
                return Err(RunError::Results(format!("{}: {e}", instance.name)));
            }
        };
        let first_generation = opened.log().end_lsn().generation;
        generating.push(Generating {
            name: instance.name.clone(),
            log_path: instance.log_path.clone(),
            instance: opened,
            load: InstanceLoad {
                store,
                mailboxes: Arc::new(mailboxes),
                mix,
                record_size: job.workload.record_size.bytes() as usize,
                compression_ratio: job.workload.compression_ratio,
                // Unpaced: flat out.
                pacer: Arc::new(Pacer::new()),
                counters: Arc::new(LoadCounters::default()),
            },
            first_generation,
            done: AtomicBool::new(false),
            failed: AtomicBool::new(false),
            error: std::sync::Mutex::new(None),
        });
    }
    Ok(generating)
}

/// The unclean stop: every reference dropped, no `close`. Returns each instance's name, log
/// path, generations generated and generation error.
fn stop_uncleanly(
    generating: Vec<Generating>,
) -> Vec<(String, std::path::PathBuf, u64, Option<String>)> {
    let mut stopped = Vec::with_capacity(generating.len());
    for g in generating {
        let generated = g.generated();
        let error = g.error.lock().ok().and_then(|e| e.clone());
        let Generating {
            name,
            log_path,
            instance,
            load,
            ..
        } = g;
        drop(load);
        drop(instance);
        stopped.push((name, log_path, generated, error));
    }

    stopped
}

/// The end of a recovery test (soft recovery or `jetproof recover`): the verdict from the
/// reasons, its line in the test log, `result.json` and `report.md`.
fn finish(
    mut result: TestResult,
    reasons: Vec<String>,
    log: &TestLog,
    out: &OutDir,
) -> Result<TestResult, RunError> {
    result.set_reasons(reasons);
    log.line(format!(
        "Overall test result: {}",
        match result.verdict {
            jetproof_results::Verdict::Pass => "Pass",
            jetproof_results::Verdict::Fail => "Fail",
        }
    ));
    out.write_result_and_report(&result)
        .map_err(|e| RunError::Results(e.to_string()))?;
    Ok(result)
}

/// One instance's replay: the I/O it did (metered from its start) and what recovery reported, or
/// why it failed. Shared by the soft-recovery test and `jetproof recover`, so both report the
/// same figures under the same keys.
pub struct Replay {
    pub name: String,
    pub stats: Arc<InstanceStats>,
    pub outcome: Result<RecoveryReport, String>,
    /// When the replay failed on a lost log (`docs/log.md`, "The log's end is proved"): the
    /// log file, where the log left ends, and the pages on disk carrying changes past it.
    pub lost_log: Option<LostLog>,
    /// The replay's rates per sample interval (`replay_samples` of `result.json`).
    pub samples: Vec<ReplaySample>,
}

/// Samples one replay's counters every sample interval, and once more when it ends.
struct ReplaySampler {
    stats: Arc<InstanceStats>,
    /// When the last sample was taken, and the counters then: log bytes read, database reads
    /// and writes.
    last: (Instant, u64, u64, u64),
    samples: Vec<ReplaySample>,
    finished: bool,
}

impl ReplaySampler {
    fn new(stats: Arc<InstanceStats>, started: Instant) -> ReplaySampler {
        ReplaySampler {
            stats,
            last: (started, 0, 0, 0),
            samples: Vec::new(),
            finished: false,
        }
    }

    /// Records the interval since the last sample (nothing once the replay has finished).
    fn sample(&mut self, started: Instant) {
        if self.finished {
            return;
        }
        let now = Instant::now();
        let interval_s = now.duration_since(self.last.0).as_secs_f64();
        if interval_s <= 0.0 {
            return;
        }
        let log_read = self.stats.class(IoClass::LogRead).bytes();
        let db_reads = self.stats.class(IoClass::DbRead).count();
        let db_writes = self.stats.class(IoClass::DbWrite).count();
        let per_sec = |now: u64, then: u64| now.saturating_sub(then) as f64 / interval_s;
        self.samples.push(ReplaySample {
            elapsed_s: now.duration_since(started).as_secs_f64(),
            interval_s,
            log_read_mb_per_sec: per_sec(log_read, self.last.1) / 1e6,
            db_reads_per_sec: per_sec(db_reads, self.last.2),
            db_writes_per_sec: per_sec(db_writes, self.last.3),
        });
        self.last = (now, log_read, db_reads, db_writes);
    }

    /// The replay ended: its last, shorter interval, once.
    fn finish(&mut self, started: Instant) {
        if !self.finished {
            self.sample(started);
            self.finished = true;
        }
    }
}

/// The `lost_log` object of an instance's `result.json` entry, for a lost-log failure.
fn lost_log_json(error: &jetproof_instance::InstanceError) -> Option<LostLog> {
    let jetproof_instance::InstanceError::LostLog(lost) = error else {
        return None;
    };
    let jetproof_instance::error::LostLog {
        log_file,
        log_end,
        pages,
        ..
    } = lost.as_ref();
    Some(LostLog {
        log_file: log_file.clone(),
        log_end: Position {
            generation: log_end.generation,
            offset: log_end.offset,
        },
        pages: pages.listed.clone(),
        page_count: pages.count,
    })
}

impl Replay {
    /// The test-log lines of this replay, in Jetstress's words.
    pub fn log_lines(&self) -> Vec<String> {
        let name = &self.name;
        let report = match &self.outcome {
            Ok(report) => report,
            Err(error) => return vec![format!("{name}: recovery failed: {error}")],
        };
        let mut lines = vec![
            format!(
                "{name}: Soft recovery took {:.3} seconds / {} logs ({:.3} seconds per log file).",
                report.seconds, report.logs_replayed, report.seconds_per_log
            ),
            format!(
                "{name}: Log files replayed: {}, Records applied: {} (already on their pages: {}), pages written: {}.",
                report.logs_replayed,
                report.records_applied,
                report.records_skipped,
                report.pages_written
            ),
        ];
        if let Some(torn) = &report.torn_tail {
            lines.push(format!(
                "{name}: torn log tail tolerated: {} bytes at offset {} of {} ({})",
                torn.bytes,
                torn.offset,
                torn.path.display(),
                torn.reason
            ));
        }
        if report.uncommitted_transactions > 0 {
            lines.push(format!(
                "{name}: {} transaction(s) without a commit record; {} rolled back by undo ({} key(s) restored).",
                report.uncommitted_transactions,
                report.transactions_rolled_back,
                report.undo_entries
            ));
        }
        if report.records_purged > 0 {
            lines.push(format!(
                "{name}: {} record(s) of committed deletes whose purge was not in the log, purged.",
                report.records_purged
            ));
        }
        lines.push(format!(
            "{name}: Replay CPU time {:.3} seconds ({}; the replaying thread was busy {:.0}% of the replay).",
            report.cpu_seconds,
            match cpu_us_per_record(report) {
                Some(us) => format!("{us:.2} µs per record applied"),
                None => "no record applied".to_string(),
            },
            cpu_share(report) * 100.0
        ));
        lines.push(format!(
            "{name}: Pages read ahead {} ({} still in flight when needed), read by the replay itself {}.",
            report.pages_read_ahead, report.read_ahead_waits, report.pages_read
        ));
        lines
    }

    /// The instance's `result.json` entry: the recovery figures added to `figures`, and the
    /// replay's I/O classes (`REPLAY_CLASSES`) over its own time; with the reason for the
    /// verdict when the replay failed (the database stays dirty).
    pub fn into_result(
        self,
        instance: &jetproof_job::Instance,
        mut figures: RecoveryInstance,
    ) -> (InstanceResult, Option<String>) {
        let mut io = BTreeMap::new();
        let mut reason = None;
        figures.replay_samples = self.samples.clone();
        match &self.outcome {
            Ok(report) => {
                io = jetproof_results::io_results(
                    &self.stats,
                    Duration::from_secs_f64(report.seconds),
                );
                io.retain(|class, _| REPLAY_CLASSES.contains(&class.as_str()));
                let replayed = report.records_applied + report.records_skipped;
                figures.replay = Some(ReplayFigures {
                    logs_replayed: report.logs_replayed,
                    seconds: report.seconds,
                    seconds_per_log: report.seconds_per_log,
                    records_applied: report.records_applied,
                    records_skipped: report.records_skipped,
                    pages_written: report.pages_written,
                    pages_read: report.pages_read,
                    pages_read_ahead: report.pages_read_ahead,
                    read_ahead_waits: report.read_ahead_waits,
                    uncommitted_transactions: report.uncommitted_transactions,
                    transactions_rolled_back: report.transactions_rolled_back,
                    undo_entries: report.undo_entries,
                    records_purged: report.records_purged,
                    torn_tail: report.torn_tail.is_some(),
                    pages_corrected: report
                        .pages_corrected
                        .iter()
                        .map(|&(page, bit)| CorrectedPage {
                            page,
                            bit: bit as u64,
                        })
                        .collect(),
                    cpu_seconds: report.cpu_seconds,
                    cpu_share: cpu_share(report),
                    cpu_us_per_record: cpu_us_per_record(report),
                    cpu_us_per_record_replayed: (replayed > 0)
                        .then(|| report.cpu_seconds / replayed as f64 * 1e6),
                });
                if !report.pages_corrected.is_empty() {
                    let listed: Vec<String> = report
                        .pages_corrected
                        .iter()
                        .take(16)
                        .map(|(page, bit)| format!("page {page} (bit {bit})"))
                        .collect();
                    reason = Some(format!(
                        "{}: the replay read {} page(s) with one flipped bit, corrected in memory \
                         and written back with their redo ({}): the storage returned them damaged",
                        self.name,
                        report.pages_corrected.len(),
                        listed.join(", ")
                    ));
                }
            }
            Err(error) => {
                // A lost log's message says already that the database stays dirty, and what to
                // do about it.
                let dirty = if self.lost_log.is_some() {
                    ""
                } else {
                    " (the database stays dirty)"
                };
                reason = Some(format!("{}: recovery failed: {error}{dirty}", self.name));
                figures.error = Some(format!("recovery failed: {error}"));
                figures.lost_log = self.lost_log.clone();
            }
        }
        let result = InstanceResult {
            name: self.name,
            database_path: instance.database_path.clone(),
            log_path: instance.log_path.clone(),
            io,
            figures: InstanceFigures::Recovery(Box::new(figures)),
        };
        (result, reason)
    }
}

/// CPU µs of the replaying thread per record applied (issue 3's figure: is the replay bound by
/// the CPU or by the device); None when no record was applied.
pub fn cpu_us_per_record(report: &RecoveryReport) -> Option<f64> {
    (report.records_applied > 0).then(|| report.cpu_seconds / report.records_applied as f64 * 1e6)
}

/// The share of the replay's wall-clock time the replaying thread spent on the CPU (0 to 1):
/// near 1 the replay is CPU-bound, well under 1 it waits for the device.
pub fn cpu_share(report: &RecoveryReport) -> f64 {
    if report.seconds > 0.0 {
        report.cpu_seconds / report.seconds
    } else {
        0.0
    }
}

/// Replays the logs of `instances` concurrently, one thread each (as Jetstress replays its
/// storage groups at once), each metered into fresh stats so its I/O table is its own.
pub fn replay(
    job: &Job,
    backend: &Arc<dyn IoBackend>,
    instances: &[&jetproof_job::Instance],
    live: Option<&dyn crate::live::LiveView>,
) -> Vec<Replay> {
    // What a live view is told: the log bytes the replays have read against the log files on
    // disk (the replay starts at the checkpoint, so it may end short of 100%).
    let log_bytes: u64 = if live.is_some() {
        instances.iter().map(|i| log_files_bytes(&i.log_path)).sum()
    } else {
        0
    };
    let started = Instant::now();
    let interval = job.run.sample_interval.as_duration();
    // Each replay says when it ends (its index), so the watcher wakes at once: it records the
    // replay's last, shorter interval then, and adds no time to the timed replay.
    let (ended, ends) = std::sync::mpsc::channel::<usize>();
    std::thread::scope(|scope| {
        let handles: Vec<_> = instances
            .iter()
            .enumerate()
            .map(|(index, instance)| {
                let stats = InstanceStats::new(instance.name.clone());
                let recovery_options = crate::options::recovery_options(job, index, stats.clone());
                let backend = backend.clone();
                let ended = ended.clone();
                let handle = scope.spawn(move || {
                    let outcome = recover(
                        backend,
                        &instance.database_path,
                        &instance.log_path,
                        &recovery_options,
                    )
                    .map_err(|e| (e.to_string(), lost_log_json(&e)));
                    let _ = ended.send(index);
                    outcome
                });
                (instance.name.clone(), stats, handle)
            })
            .collect();
        let mut samplers: Vec<ReplaySampler> = handles
            .iter()
            .map(|(_, stats, _)| ReplaySampler::new(stats.clone(), started))
            .collect();
        let mut next_sample = jetproof_io::clock::later(started, interval);
        let mut next_status = started;
        loop {
            while let Ok(index) = ends.try_recv() {
                if let Some(sampler) = samplers.get_mut(index) {
                    sampler.finish(started);
                }
            }
            // A thread that panicked never says so; it is finished all the same.
            for ((_, _, handle), sampler) in handles.iter().zip(samplers.iter_mut()) {
                if handle.is_finished() {
                    sampler.finish(started);
                }
            }
            let running = samplers.iter().filter(|s| !s.finished).count();
            let now = Instant::now();
            if now >= next_sample {
                for sampler in samplers.iter_mut() {
                    sampler.sample(started);
                }
                while next_sample <= now {
                    next_sample = jetproof_io::clock::later(next_sample, interval);
                }
            }
            if let Some(live) = live
                && (now >= next_status || running == 0)
            {
                let read: u64 = handles
                    .iter()
                    .map(|(_, stats, _)| stats.class(IoClass::LogRead).bytes())
                    .sum();
                let elapsed_s = started.elapsed().as_secs_f64();
                let (bytes, eta_s) =
                    crate::live::bytes_detail(read.min(log_bytes), log_bytes, elapsed_s);
                live.status(&crate::live::PhaseStatus {
                    phase: "replay".into(),
                    elapsed_s,
                    eta_s,
                    detail: format!(
                        "log read {bytes} of the log files on disk; {running} of {} instance(s) replaying",
                        handles.len()
                    ),
                    milestone: running == 0,
                });
                next_status = now + Duration::from_millis(100);
            }
            if running == 0 {
                break;
            }
            let mut wake = next_sample;
            if live.is_some() {
                wake = wake.min(next_status);
            }
            let timeout = wake.saturating_duration_since(Instant::now());
            if let Ok(index) = ends.recv_timeout(timeout)
                && let Some(sampler) = samplers.get_mut(index)
            {
                sampler.finish(started);
            }
        }
        handles
            .into_iter()
            .zip(samplers)
            .map(|((name, stats, handle), sampler)| {
                let (outcome, lost_log) = match handle.join() {
                    Ok(Ok(report)) => (Ok(report), None),
                    Ok(Err((error, lost_log))) => (Err(error), lost_log),
                    Err(_) => (Err("the recovery thread panicked".to_string()), None),
                };
                Replay {
                    name,
                    stats,
                    outcome,
                    lost_log,
                    samples: sampler.samples,
                }
            })
            .collect()
    })
}

/// Which databases of the job were left dirty (need recovery), in `job.instances()` order, read
/// from their headers before anything is written. A missing database is bad input.
pub fn dirty_databases(job: &Job, backend: &Arc<dyn IoBackend>) -> Result<Vec<bool>, RunError> {
    // A device where a database file is expected, or a job of another page size, is bad input
    // before any header is read as a database's.
    jetproof_storage::host::check_existing(job, &job.instances(), false)?;
    require_databases(job, |path| backend.exists(path))?;
    let mut dirty = Vec::new();
    for instance in job.instances() {
        let file = backend.open(
            &instance.database_path,
            &OpenOptions::read_only().buffered(),
        )?;
        let header = DbHeader::read(file.as_ref())
            .map_err(|e| RunError::Results(format!("{}: {e}", instance.database_path.display())))?;
        dirty.push(header.state == DbState::Dirty);
    }
    Ok(dirty)
}

/// `jetproof recover`: replays, concurrently, the log of every instance whose database is
/// `dirty` (from [`dirty_databases`]), writes `result.json` (test `recovery`, the same figures as
/// the soft-recovery test) and returns it. A failed replay fails the verdict, names the log file
/// and offset in its reason and leaves that database dirty; the others are recovered.
pub fn recover_job(
    job: &Job,
    dirty: &[bool],
    backend: &Arc<dyn IoBackend>,
    out: &OutDir,
    log: &TestLog,
    live: Option<&dyn crate::live::LiveView>,
) -> Result<TestResult, RunError> {
    let started_at = jetproof_results::now_rfc3339();
    let started = Instant::now();
    let instances = job.instances();
    let mut to_replay = Vec::new();
    for (instance, &is_dirty) in instances.iter().zip(dirty) {
        if is_dirty {
            log.line(format!(
                "{}: recovering {} from the logs in {}",
                instance.name,
                instance.database_path.display(),
                instance.log_path.display()
            ));
            to_replay.push(instance);
        } else {
            log.line(format!(
                "{}: database {} is clean; nothing to do",
                instance.name,
                instance.database_path.display()
            ));
        }
    }
    log.line("Recovering databases ...");
    crate::test_hooks::panic_point("recover");
    let recovery_started = Instant::now();
    let replays = replay(job, backend, &to_replay, live);
    let recovery_seconds = recovery_started.elapsed().as_secs_f64();
    let mut reasons = Vec::new();
    let mut results = Vec::with_capacity(replays.len());
    let mut total_logs = 0u64;
    for (instance, replayed) in to_replay.into_iter().zip(replays) {
        if let Ok(report) = &replayed.outcome {
            total_logs += report.logs_replayed;
        }
        for line in replayed.log_lines() {
            log.line(line);
        }
        let (result, reason) = replayed.into_result(instance, RecoveryInstance::default());
        reasons.extend(reason);
        results.push(result);
    }
    log.line(format!(
        "Recovery of all instances (concurrently) took {recovery_seconds:.3} seconds."
    ));
    let mut parameters = Parameters::of_job(job);
    parameters.recover = Some(RecoverParameters {
        recovery: "concurrent".into(),
    });
    let mut result = TestResult::new(
        TestKind::Recovery,
        started_at,
        started.elapsed().as_secs_f64(),
        parameters,
    );
    result.instances = results;
    result.log_file = Some(log.path().to_path_buf());
    result.io_engine = Some(backend.name().to_string());
    result.totals = Totals::Recovery(RecoveryTotals {
        recovery_seconds,
        logs_replayed: total_logs,
        generation_seconds: None,
        logs_generated: None,
    });
    finish(result, reasons, log, out)
}

/// Runs `sessions` sessions per instance, flat out, until each instance's log has grown by
/// `log_files` generations, its sessions failed, or the run was interrupted.
fn generate(generating: &[Generating], sessions: u32, log_files: u32, options: &RunOptions<'_>) {
    let started = Instant::now();
    std::thread::scope(|scope| {
        for (index, g) in generating.iter().enumerate() {
            for session in 0..sessions {
                let seed = options
                    .seed
                    .wrapping_add((index as u64) << 32)
                    .wrapping_add(u64::from(session));
                scope.spawn(move || {
                    // Each session also looks at the count itself (an atomic load) between
                    // transactions: waiting for the watcher's next poll let a fast log run
                    // past the files asked (5 generated where 4 were asked, issue 32).
                    let stopped = || {
                        options.stop.load(Ordering::Relaxed)
                            || g.done.load(Ordering::Relaxed)
                            || g.failed.load(Ordering::Relaxed)
                            || g.generated() >= u64::from(log_files)
                    };
                    if let Err(error) = run_session(&g.load, seed, &stopped) {
                        g.set_error(error.to_string());
                    }
                });
            }
        }
        loop {
            let mut all_stopped = true;
            for g in generating {
                if g.generated() >= u64::from(log_files) {
                    g.done.store(true, Ordering::Relaxed);
                }
                if !g.done.load(Ordering::Relaxed) && !g.failed.load(Ordering::Relaxed) {
                    all_stopped = false;
                }
            }
            if let Some(live) = options.live {
                let generated: u64 = generating.iter().map(|g| g.generated()).sum();
                let wanted = u64::from(log_files) * generating.len() as u64;
                let elapsed_s = started.elapsed().as_secs_f64();
                let fraction = generated.min(wanted) as f64 / wanted.max(1) as f64;
                live.status(&crate::live::PhaseStatus {
                    phase: "log generation".into(),
                    elapsed_s,
                    eta_s: (fraction > 0.0).then(|| elapsed_s * (1.0 - fraction) / fraction),
                    detail: format!(
                        "{:.1}% ({generated} of {wanted} log files, {log_files} per instance)",
                        fraction * 100.0
                    ),
                    milestone: all_stopped,
                });
            }
            if all_stopped
                || options.stop.load(Ordering::Relaxed)
                || options.start_at.is_some_and(crate::start::reached)
            {
                for g in generating {
                    g.done.store(true, Ordering::Relaxed);
                }
                break;
            }
            std::thread::sleep(POLL);
        }
    });
}

/// Bytes of the log generation files (named as the log names them) in `dir`; 0 when it cannot
/// be read.
fn log_files_bytes(dir: &std::path::Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(|e| e.ok())
                .filter(|e| {
                    e.file_name()
                        .to_str()
                        .and_then(jetproof_log::format::parse_generation_file_name)
                        .is_some()
                })
                .filter_map(|e| e.metadata().ok())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0)
}

/// Closes instances attached before the test was refused (nothing was run on them).
fn close_all(generating: Vec<Generating>) {
    for g in generating {
        let Generating { instance, load, .. } = g;
        drop(load);
        if let Ok(instance) = Arc::try_unwrap(instance) {
            let _ = instance.close();
        }
    }
}
