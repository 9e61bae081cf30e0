//! The checksum test: read every page of every database of the job, and every log file, and check
//! them, never writing.
//!
//! This is Jetstress's "Checksum Statistics" pass: per file, the pages seen, bad, correctable and
//! with a wrong page number, the size and the time taken, plus (our addition) the number of every
//! damaged page, so that damage is reported with its location (`docs/refusals.md`). The engine's
//! page checksum ([`jetproof_engine::checksum`]) decides each page's fate; this module only has to
//! read fast and count right.
//!
//! Speed is the point of its design: it must keep up with the storage (≥ 80% of fio's sequential
//! read bandwidth). Every file is read front to back in large reads (1 MiB by default, direct I/O
//! unless the job says otherwise) by a few reader threads that claim its chunks in order, so the
//! device sees one sequential stream with several reads in flight (what read-ahead gives a
//! buffered reader); its pages are verified by another thread while the next reads are under way:
//! a small ring of buffers passes between them, so the disk never waits for the CPU nor the CPU
//! for the disk. All files go at once, as Jetstress does.
//!
//! Each instance's log files are verified too (the seeds' "database and log checksum"), by the
//! log's own verifier ([`jetproof_log::verify_log_dir`]): frame checksums, headers tied to this
//! database, gaps. A torn tail (a last write never acknowledged) is reported and tolerated, as
//! recovery tolerates it; any other damage makes the verdict fail.
//!
//! Lost writes are found with each database's flush map (`jetproof_engine::flushmap`): a page
//! whose write count is older than the count of its last acknowledged write is a lost write; in
//! a cleanly shut database, one newer than the map was written behind jetproof's back. Both are
//! damage, located like the others. A missing map is reported (lost writes cannot be checked);
//! a map that cannot vouch for the pages (stale, damaged) makes the verdict fail.
//!
//! Before any page is read, every database's header is read and checked: a missing file is bad
//! input (run `jetproof init` first), a truncated, foreign or garbage file is a runtime error
//! naming the file. Damage inside a readable file is never an error: it is counted, located and
//! makes the verdict fail.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, mpsc};
use std::time::{Duration, Instant, SystemTime};

use jetproof_engine::checksum::{self, PageCheck};
use jetproof_engine::db::{FlushMapStatus, inspect_flush_map};
use jetproof_engine::flushmap::{FlushMap, ReadCheck, page_write_count};
use jetproof_engine::{DbHeader, DbState, HeaderError, flush_map_path};
use jetproof_io::meter::{InstanceStats, MeteredFile};
use jetproof_io::{AlignedBuf, IoBackend, IoClass, IoError, IoFile, OpenOptions};
use jetproof_job::{Instance, Job};
use jetproof_log::{FileStatus, LogError, ReadOptions, VerifyReport};
use jetproof_results::sections::{ChecksumInstance, ChecksumParameters};
use jetproof_results::{InstanceFigures, InstanceResult, Parameters, TestKind, TestResult, Totals};

/// Default size of each sequential read.
pub const DEFAULT_READ_SIZE: usize = 1 << 20;

/// Default reads in flight per file.
pub const DEFAULT_READS_IN_FLIGHT: usize = 4;

/// Buffers per file beyond one per reader: filled ones waiting for, or being checked by, the
/// verifier.
const VERIFY_BUFFERS: usize = 2;

pub use jetproof_results::checksum::{
    ChecksumTotals, Damage, DamagedPage, DatabaseState, FileChecksum, FlushMapFinding, LogChecksum,
    LogProblem, MAX_LISTED_DAMAGED_PAGES, Position,
};

/// Jetstress's "MBytes" are mebibytes (its tables: 50,150,498 pages of 32 KiB = 1,567,203 MBytes):
/// the statistics table shows file lengths in them, as Jetstress does.
const BYTES_PER_MIB: f64 = (1u64 << 20) as f64;

/// Rates in `result.json` (`mb_per_sec`) are MB/s of 10^6 bytes, in every test, as fio's.
const BYTES_PER_MB: f64 = 1e6;

/// How the test reads.
#[derive(Clone, Debug)]
pub struct ChecksumOptions {
    /// Bypass the host's page cache (the job's `storage.direct_io`).
    pub direct_io: bool,
    /// Size of each sequential read; rounded down to whole pages.
    pub read_size_bytes: usize,
    /// Reads in flight per file: one reader thread each, claiming the file's chunks in order, so
    /// the device sees a sequential stream with this queue depth (as the OS's read-ahead would
    /// give a buffered reader).
    pub reads_in_flight: usize,
    /// Set (by Ctrl-C) to stop early: the files' figures then cover the pages checked so far.
    pub stop: Option<Arc<AtomicBool>>,
    /// `--start-at`: the reads start at this moment of the host's clock, after every file was
    /// opened and its header checked (`crate::start`).
    pub start_at: Option<SystemTime>,
    /// The block the data reduction figures are taken on (`workload.dedup_unit`;
    /// `crate::reduction`).
    pub dedup_unit_bytes: usize,
}

impl ChecksumOptions {
    pub fn from_job(job: &Job) -> ChecksumOptions {
        ChecksumOptions {
            direct_io: job.storage.direct_io,
            read_size_bytes: DEFAULT_READ_SIZE,
            reads_in_flight: DEFAULT_READS_IN_FLIGHT,
            stop: None,
            start_at: None,
            dedup_unit_bytes: job.workload.dedup_unit.bytes() as usize,
        }
    }

    fn stop_requested(&self) -> bool {
        self.stop
            .as_ref()
            .is_some_and(|stop| stop.load(Ordering::Relaxed))
    }
}

/// How the test reports progress. Called from several threads at once.
pub trait Progress: Sync {
    /// The scan starts; `total_bytes` will be read across all files.
    fn start(&self, total_bytes: u64);
    /// `bytes` more have been read and checked (by any file's thread).
    fn advance(&self, bytes: u64);
    fn finish(&self);
}

/// Progress that goes nowhere (tests, scripts).
pub struct NoProgress;

impl Progress for NoProgress {
    fn start(&self, _total_bytes: u64) {}
    fn advance(&self, _bytes: u64) {}
    fn finish(&self) {}
}

/// The log checksum figures of one instance from the log verifier's report.
fn log_checksum_from_report(instance: &Instance, report: &VerifyReport) -> LogChecksum {
    let checkpoint = report.checkpoint.as_ref().map(|read| read.checkpoint);
    let mut figures = LogChecksum {
        instance: instance.name.clone(),
        log_path: instance.log_path.clone(),
        present: true,
        checkpoint_error: report.checkpoint_error.clone(),
        checkpoint_missing: report.checkpoint_missing(),
        checkpoint: checkpoint.map(|c| Position {
            generation: c.lsn.generation,
            offset: c.lsn.offset,
        }),
        newest_installed_generation: checkpoint
            .map(|c| c.newest_generation)
            .filter(|&newest| newest > 0),
        newest_found_generation: report
            .files
            .iter()
            .filter(|file| file.size_bytes > 0)
            .map(|file| file.generation)
            .max(),
        ..LogChecksum::default()
    };
    for file in &report.files {
        figures.files_seen += 1;
        figures.size_bytes += file.size_bytes;
        let problem = |status: &str, offset: Option<u64>, reason: &str| LogProblem {
            path: file.path.clone(),
            generation: file.generation,
            status: status.to_string(),
            offset,
            reason: reason.to_string(),
        };
        match &file.status {
            FileStatus::Good => figures.files_good += 1,
            FileStatus::TornTail { offset, reason, .. } => {
                figures.files_torn_tail += 1;
                figures
                    .problems
                    .push(problem("torn_tail", Some(*offset), reason));
            }
            FileStatus::Bad { offset, reason } => {
                figures.files_bad += 1;
                figures.problems.push(problem("bad", *offset, reason));
            }
        }
    }
    figures
}

/// The whole pass.
#[derive(Debug)]
pub struct ChecksumRun {
    /// One per database, in the job's instance order.
    pub files: Vec<FileChecksum>,
    /// One per instance, same order: its log files.
    pub logs: Vec<LogChecksum>,
    /// The I/O counters of each instance (class `checksum_read`), same order.
    pub stats: Vec<Arc<InstanceStats>>,
    pub instances: Vec<Instance>,
    pub elapsed: Duration,
    /// When the reads started on the host's clock, and `--start-at`'s time if given.
    pub reads_started: SystemTime,
    pub requested_start: Option<SystemTime>,
    /// With `--start-at`: every file was opened before the start time.
    pub ready_at_start: bool,
    /// Stopped early (Ctrl-C): some pages were not checked.
    pub interrupted: bool,
    /// Each file's data reduction figures, same order (`crate::reduction`).
    pub reduction: Vec<crate::reduction::Measured>,
}

impl ChecksumRun {
    pub fn totals(&self) -> ChecksumTotals {
        let seconds = self.elapsed.as_secs_f64();
        let mut totals = ChecksumTotals {
            files: self.files.len() as u64,
            seconds,
            ..ChecksumTotals::default()
        };
        for file in &self.files {
            totals.size_bytes += file.size_bytes;
            totals.checked_bytes += file.checked_bytes;
            totals.pages_seen += file.pages_seen;
            totals.pages_bad += file.pages_bad;
            totals.pages_correctable += file.pages_correctable;
            totals.pages_wrong_number += file.pages_wrong_number;
            totals.pages_lost_write += file.pages_lost_write;
            totals.pages_newer_than_flush_map += file.pages_newer_than_flush_map;
        }
        totals.mb_per_sec = mb_per_sec(totals.checked_bytes, seconds);
        for log in &self.logs {
            totals.log_files_seen += log.files_seen;
            totals.log_files_bad += log.files_bad;
            totals.log_files_torn_tail += log.files_torn_tail;
        }
        totals
    }

    /// True when every page of every database is perfect, every database was shut down
    /// cleanly, no file has bytes appended past its pages, and no log file is bad: the pass
    /// verdict.
    pub fn is_clean(&self) -> bool {
        self.files.iter().all(|file| {
            file.is_clean()
                && !file.database_state.is_dirty()
                && file.appended_bytes == 0
                && file.header_copy_behind.is_none()
        }) && self.logs.iter().all(LogChecksum::is_clean)
    }
}

fn mb_per_sec(bytes: u64, seconds: f64) -> f64 {
    if seconds > 0.0 {
        bytes as f64 / BYTES_PER_MB / seconds
    } else {
        0.0
    }
}

/// Why the pass could not be made. Damage found in pages is not an error: it is the result.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ChecksumError {
    /// A database is missing (`jetproof_storage::database::require_databases`, the check every test
    /// makes).
    #[error(transparent)]
    MissingDatabase(#[from] jetproof_storage::BadInput),
    #[error(
        "{path} (instance {instance}) is a directory, not a database file; check the job's database paths"
    )]
    NotAFile { instance: String, path: PathBuf },
    #[error(transparent)]
    Header(#[from] HeaderError),
    #[error(
        "{path}: the header counts {page_count} pages, more than page numbers can address; the header is damaged"
    )]
    TooManyPages { path: PathBuf, page_count: u64 },
    #[error(transparent)]
    Io(#[from] IoError),
    #[error("read the flush map {path}: {reason}")]
    FlushMap { path: PathBuf, reason: String },
    #[error("verify the log of instance {instance}: {source}")]
    Log {
        instance: String,
        #[source]
        source: LogError,
    },
    #[error("write the results: {0}")]
    Results(String),
}

impl ChecksumError {
    /// Errors that are the user's input (exit 2) rather than a failure while working (exit 3).
    pub fn is_bad_input(&self) -> bool {
        matches!(
            self,
            ChecksumError::MissingDatabase(_)
                | ChecksumError::NotAFile { .. }
                | ChecksumError::Io(IoError::DirectIoUnsupported { .. })
        )
    }
}

/// A database file opened and its header checked, ready to scan.
struct Target {
    instance: Instance,
    file: Arc<dyn IoFile>,
    stats: Arc<InstanceStats>,
    header: DbHeader,
    trailing_bytes: u64,
    appended_bytes: u64,
    header_copy_behind: Option<String>,
    /// The flush map to check pages against, if it can vouch for them.
    flush_map: Option<FlushMap>,
    flush_map_finding: FlushMapFinding,
}

/// Checks, before anything is written or read, that every database of the job exists and can be
/// opened as the job says (a file system that refuses direct I/O is found here): both are bad
/// input.
pub fn preflight(job: &Job, backend: &dyn IoBackend) -> Result<(), ChecksumError> {
    let instances = job.instances();
    check_exist(&instances, backend)?;
    let open = OpenOptions::read_only().with_direct(job.storage.direct_io);
    for instance in &instances {
        backend.open(&instance.database_path, &open)?;
    }
    Ok(())
}

fn check_exist(instances: &[Instance], backend: &dyn IoBackend) -> Result<(), ChecksumError> {
    jetproof_storage::database::require_instance_databases(instances, |path| backend.exists(path))?;
    for instance in instances {
        let path = &instance.database_path;
        if path.is_dir() {
            return Err(ChecksumError::NotAFile {
                instance: instance.name.clone(),
                path: path.clone(),
            });
        }
    }
    Ok(())
}

/// Opens every database and checks its header. Reads nothing else.
fn open_targets(
    instances: &[Instance],
    backend: &dyn IoBackend,
    options: &ChecksumOptions,
) -> Result<Vec<Target>, ChecksumError> {
    check_exist(instances, backend)?;
    let mut targets = Vec::with_capacity(instances.len());
    for instance in instances {
        let open = OpenOptions::read_only().with_direct(options.direct_io);
        let raw = backend.open(&instance.database_path, &open)?;
        let stats = InstanceStats::new(instance.name.clone());
        let file = MeteredFile::wrap(raw, stats.clone());
        let header = DbHeader::read_with_class(file.as_ref(), IoClass::ChecksumRead)?;
        if header.page_count > u64::from(u32::MAX) + 1 {
            return Err(ChecksumError::TooManyPages {
                path: instance.database_path.clone(),
                page_count: header.page_count,
            });
        }
        let trailing_bytes = file.size()?.saturating_sub(header.file_size_bytes());
        // A growth writes at most one extent of formatted pages before the header counts them.
        let growth_bytes = u64::from(header.extent_pages).max(1) * u64::from(header.page_size);
        let (flush_map, flush_map_finding) = open_flush_map(
            backend,
            &instance.database_path,
            &header,
            options.direct_io,
            &stats,
        )?;
        // A database on a device keeps its flush map in its log directory (`jetproof_storage::raw`): name
        // the real file.
        let map_path = if jetproof_storage::target::is_block_device(&instance.database_path) {
            jetproof_storage::raw::real_flush_map(&instance.database_path).unwrap_or_else(|| {
                jetproof_storage::raw::flush_map_of(&instance.database_path, &instance.log_path)
            })
        } else {
            flush_map_path(&instance.database_path)
        };
        let finding = |status: &str, reason: Option<String>, damaged: Vec<u32>| FlushMapFinding {
            path: map_path.clone(),
            status: status.to_string(),
            reason,
            damaged_map_pages: damaged,
        };
        // Bytes appended past the map's last slot: no reader looks there.
        let appended_to_map = backend
            .open(&map_path, &OpenOptions::read_only().buffered().no_follow())
            .ok()
            .and_then(|f| jetproof_engine::flushmap::appended_bytes(f.as_ref()).ok())
            .unwrap_or(0);
        let flush_map_finding = FlushMapFinding {
            path: map_path.clone(),
            ..flush_map_finding
        };
        let (flush_map, flush_map_finding) =
            if appended_to_map > 0 && flush_map_finding.status == "ok" {
                (
                    flush_map,
                    finding(
                        "damaged",
                        Some(format!(
                            "{appended_to_map} bytes appended past the map's last slot (neither a \
                         sealed slot nor zeros)"
                        )),
                        Vec::new(),
                    ),
                )
            } else {
                (flush_map, flush_map_finding)
            };
        let appended_bytes = trailing_bytes
            - jetproof_storage::database::growth_leftover_bytes(
                file.as_ref(),
                &header,
                trailing_bytes.min(growth_bytes),
            )?;
        targets.push(Target {
            instance: instance.clone(),
            file,
            stats,
            header,
            trailing_bytes,
            appended_bytes,
            header_copy_behind: jetproof_storage::database::header_copies(
                backend,
                &instance.database_path,
            )
            .behind,
            flush_map,
            flush_map_finding,
        });
    }
    Ok(targets)
}

/// Opens the flush map of the database at `path` read-only, for a check of its pages: the map
/// (none when missing or unusable) and what was found of it. I/O errors reading it are errors.
pub(crate) fn open_flush_map(
    backend: &dyn IoBackend,
    path: &Path,
    header: &DbHeader,
    direct_io: bool,
    stats: &Arc<InstanceStats>,
) -> Result<(Option<FlushMap>, FlushMapFinding), ChecksumError> {
    let map_path = flush_map_path(path);
    let status = inspect_flush_map(backend, path, header, direct_io, Some(stats)).map_err(|e| {
        ChecksumError::FlushMap {
            path: map_path.clone(),
            reason: e.to_string(),
        }
    })?;
    let finding = |status: &str, reason: Option<String>, damaged: Vec<u32>| FlushMapFinding {
        path: map_path.clone(),
        status: status.to_string(),
        reason,
        damaged_map_pages: damaged,
    };
    let (flush_map, flush_map_finding) = match status {
        FlushMapStatus::Usable { map, load } if load.damaged_map_pages.is_empty() => {
            (Some(*map), finding("ok", None, Vec::new()))
        }
        FlushMapStatus::Usable { map, load } => (
            Some(*map),
            finding(
                "damaged",
                Some("map pages damaged: the pages they describe are not checked for lost writes".into()),
                load.damaged_map_pages,
            ),
        ),
        FlushMapStatus::Missing => (
            None,
            finding(
                "missing",
                Some("no flush map: lost writes cannot be checked (a database made by an earlier build, or the file was removed)".into()),
                Vec::new(),
            ),
        ),
        FlushMapStatus::Unusable(why) => (None, finding("unusable", Some(why), Vec::new())),
    };
    Ok((flush_map, flush_map_finding))
}

/// Runs the checksum pass over every database of `job`. Never writes.
pub fn run(
    job: &Job,
    backend: &dyn IoBackend,
    options: &ChecksumOptions,
    progress: &dyn Progress,
) -> Result<ChecksumRun, ChecksumError> {
    check_instances(&job.instances(), backend, options, progress)
}

/// Like [`run`], over explicit instances: each database file and its log directory.
pub fn check_instances(
    instances: &[Instance],
    backend: &dyn IoBackend,
    options: &ChecksumOptions,
    progress: &dyn Progress,
) -> Result<ChecksumRun, ChecksumError> {
    let targets = open_targets(instances, backend, options)?;
    let total_bytes: u64 = targets.iter().map(|t| t.header.file_size_bytes()).sum();
    let mut ready_at_start = true;
    if let Some(at) = options.start_at {
        ready_at_start = !crate::start::reached(at);
        let never = AtomicBool::new(false);
        // Stopped while waiting: every reader sees the flag at once and reads nothing.
        let _ = crate::start::wait_until(at, options.stop.as_deref().unwrap_or(&never), || {});
    }
    progress.start(total_bytes);
    let reads_started = SystemTime::now();
    let started = Instant::now();
    let outcomes: Vec<
        Result<(FileChecksum, LogChecksum, crate::reduction::Measured), ChecksumError>,
    > = std::thread::scope(|scope| {
        let handles: Vec<_> = targets
            .iter()
            .map(|target| {
                scope.spawn(move || {
                    let (mut file, measured) = scan_target(target, options, progress, total_bytes)?;
                    let logs = if options.stop_requested() {
                        LogChecksum {
                            instance: target.instance.name.clone(),
                            log_path: target.instance.log_path.clone(),
                            ..LogChecksum::default()
                        }
                    } else {
                        verify_logs(target, backend, options)?
                    };
                    file.database_state = database_state(&target.header, &logs);
                    Ok((file, logs, measured))
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|handle| match handle.join() {
                Ok(outcome) => outcome,
                Err(panic) => std::panic::resume_unwind(panic),
            })
            .collect()
    });
    let elapsed = started.elapsed();
    progress.finish();
    let mut files = Vec::with_capacity(outcomes.len());
    let mut logs = Vec::with_capacity(outcomes.len());
    let mut reduction = Vec::with_capacity(outcomes.len());
    for outcome in outcomes {
        let (file, log, measured) = outcome?;
        files.push(file);
        logs.push(log);
        reduction.push(measured);
    }
    let interrupted = files.iter().any(|f| f.checked_bytes < f.size_bytes);
    Ok(ChecksumRun {
        interrupted,
        files,
        logs,
        stats: targets.iter().map(|t| t.stats.clone()).collect(),
        instances: targets.into_iter().map(|t| t.instance).collect(),
        elapsed,
        reads_started,
        requested_start: options.start_at,
        ready_at_start,
        reduction,
    })
}

/// The database's shutdown state from its header, and the generations a recovery would need
/// from what the log verifier found.
fn database_state(header: &DbHeader, logs: &LogChecksum) -> DatabaseState {
    let dirty = header.state == jetproof_engine::DbState::Dirty;
    let logs_required = match (dirty, logs.checkpoint) {
        (true, Some(checkpoint)) => {
            let last = logs
                .newest_found_generation
                .max(logs.newest_installed_generation)
                .unwrap_or(checkpoint.generation)
                .max(checkpoint.generation);
            Some([checkpoint.generation, last])
        }
        _ => None,
    };
    DatabaseState {
        state: if dirty { "dirty" } else { "clean" }.to_string(),
        recovery_position: Position {
            generation: header.recovery_position.generation,
            offset: header.recovery_position.offset,
        },
        checkpoint: logs.checkpoint,
        logs_required,
    }
}

/// The generations whose files a listing of `dir` finds (names exactly as the log writes them;
/// anything else there is not ours and is left alone).
fn list_generations(dir: &std::path::Path) -> Result<Vec<u64>, IoError> {
    let entries = std::fs::read_dir(dir).map_err(|source| IoError::Path {
        op: "list the log directory",
        path: dir.to_path_buf(),
        source,
    })?;
    let mut generations = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|source| IoError::Path {
            op: "list the log directory",
            path: dir.to_path_buf(),
            source,
        })?;
        if let Some(generation) = entry
            .file_name()
            .to_str()
            .and_then(jetproof_log::format::parse_generation_file_name)
        {
            generations.push(generation);
        }
    }
    generations.sort_unstable();
    Ok(generations)
}

/// Verifies every log file of the target's instance with the log's own verifier (frame
/// checksums, headers tied to this database, gaps), reading as the database scan does. The
/// files are found by listing the directory, so every `E*.jplog` file is verified whether or
/// not the checkpoint leads to it (with the checkpoint file gone, say).
fn verify_logs(
    target: &Target,
    backend: &dyn IoBackend,
    options: &ChecksumOptions,
) -> Result<LogChecksum, ChecksumError> {
    let instance = &target.instance;
    if !backend.exists(&instance.log_path) {
        return Ok(LogChecksum {
            instance: instance.name.clone(),
            log_path: instance.log_path.clone(),
            ..LogChecksum::default()
        });
    }
    let read = ReadOptions {
        direct_io: options.direct_io,
        read_size_bytes: options.read_size_bytes,
        class: IoClass::ChecksumRead,
        stats: Some(target.stats.clone()),
    };
    // A directory the process can list (the real backends); the test backends keep their files
    // in memory and are probed instead.
    let listed = if instance.log_path.is_dir() {
        Some(list_generations(&instance.log_path)?)
    } else if jetproof_storage::target::is_block_device(&instance.log_path) {
        // A log region's name table is its listing (`jetproof_storage::logregion`).
        Some(
            jetproof_storage::logregion::list_names(&instance.log_path)?
                .iter()
                .filter_map(|name| jetproof_log::format::parse_generation_file_name(name))
                .collect(),
        )
    } else {
        None
    };
    let report = jetproof_log::verify_log_dir_listed(
        backend,
        &instance.log_path,
        Some(target.header.database_id),
        &read,
        listed.as_deref(),
    )
    .map_err(|source| ChecksumError::Log {
        instance: instance.name.clone(),
        source,
    })?;
    let mut figures = log_checksum_from_report(instance, &report);
    appended_to_log_files(backend, &report, &mut figures);
    Ok(figures)
}

/// Bytes appended to the log's files: a generation file longer than the size its header says
/// (generations are preformatted to full size and never grow), a checkpoint file longer than its
/// two 4 KiB slots. The readers never look past those sizes, so nothing else finds them; each is
/// a bad file (a fail), as appended bytes are for a database.
fn appended_to_log_files(
    backend: &dyn IoBackend,
    report: &VerifyReport,
    figures: &mut LogChecksum,
) {
    const GENERATION_MAGIC: &[u8] = b"JPLOGGEN";
    const CHECKPOINT_FILE_BYTES: u64 = 2 * 4096;
    let open = OpenOptions::read_only().buffered().no_follow();
    for file in &report.files {
        let Ok(handle) = backend.open(&file.path, &open) else {
            continue;
        };
        let mut head = AlignedBuf::zeroed(4096);
        if handle.read_at(&mut head, 0, IoClass::ChecksumRead).is_err()
            || head.get(..8) != Some(GENERATION_MAGIC)
        {
            continue;
        }
        let Some(size) = jetproof_io::bytes::u64_at(&head, 40) else {
            continue;
        };
        let actual = handle.size().unwrap_or(0);
        if actual > size {
            if matches!(file.status, FileStatus::Good) {
                figures.files_good = figures.files_good.saturating_sub(1);
            }
            if !matches!(file.status, FileStatus::Bad { .. }) {
                figures.files_bad += 1;
            }
            figures.problems.push(LogProblem {
                path: file.path.clone(),
                generation: file.generation,
                status: "bad".to_string(),
                offset: Some(size),
                reason: format!(
                    "{} bytes appended past the generation's preformatted size ({size} bytes): \
                     a generation file never grows",
                    actual - size
                ),
            });
        }
    }
    let checkpoint = jetproof_log::format::checkpoint_path(&figures.log_path);
    if let Ok(handle) = backend.open(&checkpoint, &open)
        && let Ok(actual) = handle.size()
        && actual > CHECKPOINT_FILE_BYTES
        && figures.checkpoint_error.is_none()
    {
        figures.checkpoint_error = Some(format!(
            "{}: {} bytes appended past its two 4 KiB slots",
            checkpoint.display(),
            actual - CHECKPOINT_FILE_BYTES
        ));
    }
}

/// Counts of one file, filled as its pages are verified (chunks arrive in any order).
struct Tally {
    pages_seen: u64,
    pages_bad: u64,
    pages_correctable: u64,
    pages_wrong_number: u64,
    pages_lost_write: u64,
    pages_newer_than_flush_map: u64,
    /// Damaged pages; trimmed to the [`MAX_LISTED_DAMAGED_PAGES`] lowest page numbers whenever
    /// it holds twice that, so a file of garbage costs bounded memory and the listing does not
    /// depend on the order in which chunks were read.
    damaged_pages: Vec<DamagedPage>,
}

impl Tally {
    fn new() -> Tally {
        Tally {
            pages_seen: 0,
            pages_bad: 0,
            pages_correctable: 0,
            pages_wrong_number: 0,
            pages_lost_write: 0,
            pages_newer_than_flush_map: 0,
            damaged_pages: Vec::new(),
        }
    }

    fn trim(&mut self) {
        self.damaged_pages.sort_by_key(|page| page.page_number);
        self.damaged_pages.truncate(MAX_LISTED_DAMAGED_PAGES);
    }

    fn damaged_pages_not_listed(&self) -> u64 {
        let damaged = self.pages_bad
            + self.pages_correctable
            + self.pages_wrong_number
            + self.pages_lost_write
            + self.pages_newer_than_flush_map;
        damaged.saturating_sub(self.damaged_pages.len().min(MAX_LISTED_DAMAGED_PAGES) as u64)
    }

    /// The listed damaged pages, in page order.
    fn into_listed(mut self) -> Vec<DamagedPage> {
        self.trim();
        self.damaged_pages
    }

    /// Verifies the whole pages in `bytes`, the first of which is page `first_page`: each
    /// page's checksum, then (for a sound page) its write count against `flush_map`; a page
    /// newer than the map counts as damage only if `clean` (the database was shut down cleanly,
    /// so the map holds every write).
    fn check(
        &mut self,
        bytes: &[u8],
        page_size: usize,
        first_page: u64,
        flush_map: Option<&FlushMap>,
        clean: bool,
    ) {
        for (index, page) in bytes.chunks_exact(page_size).enumerate() {
            let page_number = first_page + index as u64;
            self.pages_seen += 1;
            // Page numbers above u32::MAX cannot occur: open_targets refuses such files.
            let expected = u32::try_from(page_number).unwrap_or(u32::MAX);
            let damaged = match checksum::verify(page, expected) {
                PageCheck::Good => {
                    let Some(map) = flush_map else {
                        continue;
                    };
                    // A read-only check: an unknown entry is learnt in memory only.
                    let (damage, expected, found) = match map.check_read(expected, page) {
                        ReadCheck::Behind { expected, found } => {
                            self.pages_lost_write += 1;
                            (Damage::LostWrite, expected, found)
                        }
                        ReadCheck::Ahead { expected, found } if clean => {
                            self.pages_newer_than_flush_map += 1;
                            (Damage::NewerThanFlushMap, expected, found)
                        }
                        _ => continue,
                    };
                    debug_assert_eq!(page_write_count(page), Some(found));
                    DamagedPage {
                        page_number,
                        damage,
                        found_page_number: None,
                        bit: None,
                        expected_write_count: Some(expected),
                        found_write_count: Some(found),
                    }
                }
                PageCheck::Correctable { bit } => {
                    self.pages_correctable += 1;
                    DamagedPage {
                        page_number,
                        damage: Damage::Correctable,
                        found_page_number: None,
                        bit: Some(bit as u64),
                        expected_write_count: None,
                        found_write_count: None,
                    }
                }
                PageCheck::WrongPageNumber { found } => {
                    self.pages_wrong_number += 1;
                    DamagedPage {
                        page_number,
                        damage: Damage::WrongPageNumber,
                        found_page_number: Some(found),
                        bit: None,
                        expected_write_count: None,
                        found_write_count: None,
                    }
                }
                PageCheck::Bad => {
                    self.pages_bad += 1;
                    DamagedPage {
                        page_number,
                        damage: Damage::Bad,
                        found_page_number: None,
                        bit: None,
                        expected_write_count: None,
                        found_write_count: None,
                    }
                }
            };
            self.damaged_pages.push(damaged);
            if self.damaged_pages.len() >= 2 * MAX_LISTED_DAMAGED_PAGES {
                self.trim();
            }
        }
    }
}

/// A buffer on its way from the reader to the verifier.
struct Filled {
    offset: u64,
    len: usize,
    buf: AlignedBuf,
}

/// Reads one file from start to end on a reader thread and verifies its pages on this one.
fn scan_target(
    target: &Target,
    options: &ChecksumOptions,
    progress: &dyn Progress,
    all_files_bytes: u64,
) -> Result<(FileChecksum, crate::reduction::Measured), IoError> {
    crate::test_hooks::panic_point("checksum");
    let page_size = target.header.page_size as usize;
    let total = target.header.file_size_bytes();
    let chunk = (options.read_size_bytes / page_size).max(1) * page_size;
    let unit = options.dedup_unit_bytes.max(512);
    let mut meter =
        crate::reduction::Meter::new(unit, total, all_files_bytes).map_err(|source| {
            IoError::Path {
                op: "start the zstd compressor for",
                path: target.instance.database_path.clone(),
                source,
            }
        })?;
    let file = target.file.as_ref();
    let started = Instant::now();

    let readers = options.reads_in_flight.max(1);
    let buffers = readers + VERIFY_BUFFERS;
    let (filled_tx, filled_rx) = mpsc::sync_channel::<Filled>(buffers);
    let (empty_tx, empty_rx) = mpsc::channel::<AlignedBuf>();
    for _ in 0..buffers {
        // The receiver is alive: it is ours until the readers end.
        let _ = empty_tx.send(AlignedBuf::zeroed(chunk));
    }
    let empty_rx = Mutex::new(empty_rx);
    let next_offset = AtomicU64::new(0);
    let stop = AtomicBool::new(false);
    let mut tally = Tally::new();
    let read_result = std::thread::scope(|scope| {
        // Each reader claims the next chunk of the file, reads it and hands it to the verifier.
        // The readers own the sending side: when the last one ends (done or failed), the channel
        // closes and the verifying loop below ends.
        let handles: Vec<_> = (0..readers)
            .map(|_| {
                let filled_tx = filled_tx.clone();
                let (empty_rx, next_offset, stop) = (&empty_rx, &next_offset, &stop);
                scope.spawn(move || -> Result<(), IoError> {
                    while !stop.load(Ordering::Relaxed) && !options.stop_requested() {
                        // Holding the lock while waiting is fine: whoever gets it takes the next
                        // free buffer.
                        let Ok(waiting) = empty_rx.lock() else {
                            break;
                        };
                        let Ok(mut buf) = waiting.recv() else {
                            break;
                        };
                        drop(waiting);
                        let offset = next_offset.fetch_add(chunk as u64, Ordering::Relaxed);
                        if offset >= total {
                            break;
                        }
                        let len = chunk.min(usize::try_from(total - offset).unwrap_or(chunk));
                        if let Err(error) =
                            file.read_at(&mut buf[..len], offset, IoClass::ChecksumRead)
                        {
                            stop.store(true, Ordering::Relaxed);
                            return Err(error);
                        }
                        if filled_tx.send(Filled { offset, len, buf }).is_err() {
                            break;
                        }
                    }
                    Ok(())
                })
            })
            .collect();
        drop(filled_tx);
        for filled in filled_rx.iter() {
            let first_page = filled.offset / page_size as u64;
            tally.check(
                &filled.buf[..filled.len],
                page_size,
                first_page,
                target.flush_map.as_ref(),
                target.header.state == DbState::Clean,
            );
            meter.observe(filled.offset, &filled.buf[..filled.len]);
            progress.advance(filled.len as u64);
            // Once the readers are done they take no buffers back: ignore that.
            let _ = empty_tx.send(filled.buf);
        }
        stop.store(true, Ordering::Relaxed);
        let mut result = Ok(());
        for handle in handles {
            match handle.join() {
                Ok(Err(error)) if result.is_ok() => result = Err(error),
                Ok(_) => {}
                Err(panic) => std::panic::resume_unwind(panic),
            }
        }
        result
    });
    read_result?;
    let seconds = started.elapsed().as_secs_f64();
    let checked_bytes = tally.pages_seen * page_size as u64;
    let (figures, kept) = meter.finish(total / unit as u64);
    let measured = crate::reduction::Measured {
        instance: target.instance.name.clone(),
        figures,
        kept,
    };
    let file = FileChecksum {
        instance: target.instance.name.clone(),
        path: target.instance.database_path.clone(),
        page_size: target.header.page_size,
        size_bytes: total,
        checked_bytes,
        trailing_bytes: target.trailing_bytes,
        appended_bytes: target.appended_bytes,
        header_copy_behind: target.header_copy_behind.clone(),
        // Filled in once the log is verified (`database_state`).
        database_state: DatabaseState::default(),
        pages_seen: tally.pages_seen,
        pages_bad: tally.pages_bad,
        pages_correctable: tally.pages_correctable,
        pages_wrong_number: tally.pages_wrong_number,
        pages_lost_write: tally.pages_lost_write,
        pages_newer_than_flush_map: tally.pages_newer_than_flush_map,
        flush_map_state: Some(target.flush_map_finding.clone()),
        seconds,
        mb_per_sec: mb_per_sec(checked_bytes, seconds),
        damaged_pages_not_listed: tally.damaged_pages_not_listed(),
        damaged_pages: tally.into_listed(),
    };
    Ok((file, measured))
}

/// The seeds' "Checksum Statistics - All" table, in Jetstress's words, for the terminal and the
/// test log.
pub fn statistics_table(run: &ChecksumRun) -> Vec<String> {
    let mut rows = vec![format!(
        "{:<40} {:>12} {:>10} {:>18} {:>24} {:>17}  {}",
        "Database",
        "Seen pages",
        "Bad pages",
        "Correctable pages",
        "Wrong page-number pages",
        "Lost-write pages",
        "File length / seconds taken"
    )];
    for file in &run.files {
        rows.push(format!(
            "{:<40} {:>12} {:>10} {:>18} {:>24} {:>17}  {:.0} MBytes / {:.2} sec ({:.0} MB/s)",
            file.path.display(),
            file.pages_seen,
            file.pages_bad,
            file.pages_correctable,
            file.pages_wrong_number,
            file.pages_lost_write + file.pages_newer_than_flush_map,
            file.checked_bytes as f64 / BYTES_PER_MIB,
            file.seconds,
            file.mb_per_sec
        ));
    }
    let totals = run.totals();
    rows.push(format!(
        "{:<40} {:>12} {:>10} {:>18} {:>24} {:>17}  {:.0} MBytes / {:.2} sec ({:.0} MB/s)",
        "(Sum)",
        totals.pages_seen,
        totals.pages_bad,
        totals.pages_correctable,
        totals.pages_wrong_number,
        totals.pages_lost_write + totals.pages_newer_than_flush_map,
        totals.checked_bytes as f64 / BYTES_PER_MIB,
        totals.seconds,
        totals.mb_per_sec
    ));
    rows.push(String::new());
    rows.push(format!(
        "{:<40} {:<16} {:>20} {:>20} {:>16}",
        "Database", "State", "Recovery position", "Checkpoint", "Logs required"
    ));
    for file in &run.files {
        let state = &file.database_state;
        rows.push(format!(
            "{:<40} {:<16} {:>20} {:>20} {:>16}",
            file.path.display(),
            if state.is_dirty() {
                "Dirty Shutdown"
            } else {
                "Clean Shutdown"
            },
            state.recovery_position.to_string(),
            state
                .checkpoint
                .map_or_else(|| "none".to_string(), |c| c.to_string()),
            match state.logs_required {
                Some([first, last]) => format!("{first}-{last}"),
                None => "0-0".to_string(),
            }
        ));
    }
    if totals.log_files_seen > 0 || run.logs.iter().any(|l| l.present) {
        rows.push(String::new());
        rows.push(format!(
            "{:<40} {:>12} {:>10} {:>18} {:>24}",
            "Log directory", "Log files", "Bad files", "Torn tail (ok)", "Checkpoint"
        ));
        for log in &run.logs {
            rows.push(format!(
                "{:<40} {:>12} {:>10} {:>18} {:>24}",
                log.log_path.display().to_string(),
                log.files_seen,
                log.files_bad,
                log.files_torn_tail,
                if !log.present && run.interrupted {
                    "not checked"
                } else if !log.present {
                    "no log directory"
                } else if log.checkpoint_error.is_some() {
                    "unusable"
                } else if log.checkpoint_missing {
                    "missing"
                } else if log.checkpoint.is_none() {
                    "none (no log yet)"
                } else {
                    "ok"
                }
            ));
        }
    }
    rows
}

/// One line per damaged page (at most `limit` per file), with its location.
pub fn damage_lines(run: &ChecksumRun, limit: usize) -> Vec<String> {
    let mut lines = Vec::new();
    for file in &run.files {
        for page in file.damaged_pages.iter().take(limit) {
            let offset = page.page_number * u64::from(file.page_size);
            let what = match page.damage {
                Damage::Bad => "bad page (damaged beyond correction)".to_string(),
                Damage::Correctable => match page.bit {
                    Some(bit) => format!(
                        "correctable page (one flipped bit: byte {} bit {} of the page)",
                        bit / 8,
                        bit % 8
                    ),
                    None => "correctable page".to_string(),
                },
                Damage::WrongPageNumber => match page.found_page_number {
                    Some(found) => format!(
                        "wrong page-number page (it carries page number {found}: a misdirected write)"
                    ),
                    None => "wrong page-number page".to_string(),
                },
                Damage::LostWrite => format!(
                    "lost write (the page carries write count {}, its last acknowledged write was count {}: the storage returned an older copy)",
                    page.found_write_count.unwrap_or(0),
                    page.expected_write_count.unwrap_or(0)
                ),
                Damage::NewerThanFlushMap => format!(
                    "newer than its last write in the flush map (write count {} where the map says {}): written behind jetproof's back, or the map is stale",
                    page.found_write_count.unwrap_or(0),
                    page.expected_write_count.unwrap_or(0)
                ),
            };
            lines.push(format!(
                "{}: page {} (byte offset {offset}): {what}",
                file.path.display(),
                page.page_number
            ));
        }
        let shown = file.damaged_pages.len().min(limit) as u64;
        let more = file.pages_damaged().saturating_sub(shown);
        if more > 0 {
            lines.push(format!(
                "{}: {more} more damaged pages (listed in result.json up to {MAX_LISTED_DAMAGED_PAGES})",
                file.path.display()
            ));
        }
    }
    lines.extend(state_problems(run));
    for file in &run.files {
        if let Some(map) = file.flush_map_state.as_ref().filter(|m| m.status != "ok") {
            lines.push(format!(
                "{}: flush map {}: {}{}",
                map.path.display(),
                map.status,
                map.reason.as_deref().unwrap_or(""),
                if map.damaged_map_pages.is_empty() {
                    String::new()
                } else {
                    format!(" (map pages {:?})", map.damaged_map_pages)
                }
            ));
        }
    }
    for log in &run.logs {
        if let Some(error) = &log.checkpoint_error {
            lines.push(format!(
                "{}: checkpoint unusable: {error}",
                log.log_path.display()
            ));
        }
        for problem in &log.problems {
            let at = match problem.offset {
                Some(offset) => format!(" at offset {offset}"),
                None => String::new(),
            };
            let what = if problem.status == "bad" {
                "bad log file"
            } else {
                "torn tail (an unacknowledged last write; tolerated)"
            };
            lines.push(format!(
                "{}{at}: {what}: {}",
                problem.path.display(),
                problem.reason
            ));
        }
    }
    lines
}

/// What makes a database whose pages are perfect still fail: a dirty shutdown (its logs must be
/// replayed first), bytes appended past its last page, a log without its checkpoint file. One
/// line each, naming the file and the fix.
pub fn state_problems(run: &ChecksumRun) -> Vec<String> {
    let mut lines = Vec::new();
    for file in &run.files {
        let state = &file.database_state;
        if state.is_dirty() {
            let required = match state.logs_required {
                Some([first, last]) => format!("log generations {first} to {last} required"),
                None => "its log has no usable checkpoint".to_string(),
            };
            lines.push(format!(
                "{}: dirty shutdown (not shut down cleanly; {required}): its pages may not hold \
                 every committed change; run `jetproof recover` to replay its logs",
                file.path.display()
            ));
        }
        if let Some(behind) = &file.header_copy_behind {
            lines.push(behind.clone());
        }
        if file.appended_bytes > 0 {
            lines.push(format!(
                "{}: {} bytes past the last page the header counts, {} of them neither the \
                 formatted or zeroed pages an unfinished growth leaves (at most one extent): \
                 bytes were appended to the file",
                file.path.display(),
                file.trailing_bytes,
                file.appended_bytes
            ));
        }
    }
    for log in &run.logs {
        if log.checkpoint_missing {
            lines.push(format!(
                "{}: {} log files but no checkpoint file ({}): recovery cannot start and the \
                 database cannot be attached",
                log.log_path.display(),
                log.files_seen,
                jetproof_log::format::checkpoint_path(&log.log_path).display()
            ));
        }
    }
    lines
}

/// The checksum test as `jetproof checksum` runs it: the pass, its statistics and damage in the
/// test log, the verdict, and `result.json` with the reports written into `out`.
pub struct ChecksumTest {
    pub run: ChecksumRun,
    pub result: TestResult,
    pub result_path: PathBuf,
    /// The "Checksum Statistics - All" table, one line per row.
    pub table: Vec<String>,
    /// Damage and database state, up to the caller's number of lines per file.
    pub damage: Vec<String>,
    /// Bytes past the last page that were not checked (an unfinished growth), one line per file.
    pub trailing: Vec<String>,
    /// Every page perfect, every database shut down cleanly, not interrupted.
    pub clean: bool,
    /// The verdict in words.
    pub verdict: String,
}

/// Runs the pass ([`run`]) and records it: the statistics table, every damaged page and the
/// verdict in `log`, `result.json` (with `io_engine`) and the reports in `out`. `damage_lines`:
/// how many damage lines per file [`ChecksumTest::damage`] keeps for the terminal (the log has
/// them all).
pub fn test(
    job: &Job,
    backend: &dyn IoBackend,
    options: &ChecksumOptions,
    progress: &dyn Progress,
    out: &jetproof_results::OutDir,
    log: &jetproof_results::TestLog,
    damage_lines_per_file: usize,
) -> Result<ChecksumTest, ChecksumError> {
    let started = jetproof_results::now_rfc3339();
    let run = match run(job, backend, options, progress) {
        Ok(run) => run,
        Err(error) => {
            log.line(format!("Checksum stopped: {error}"));
            return Err(error);
        }
    };
    let ended = jetproof_results::now_rfc3339();
    let table = statistics_table(&run);
    let damage = damage_lines(&run, damage_lines_per_file);
    log.line("Checksum Statistics - All");
    for row in &table {
        log.line(row);
    }
    for line in damage_lines(&run, MAX_LISTED_DAMAGED_PAGES) {
        log.line(line);
    }
    let trailing: Vec<String> = run
        .files
        .iter()
        .filter(|f| f.trailing_bytes > 0 && f.appended_bytes == 0)
        .map(|file| {
            format!(
                "{}: {} bytes past the last page the header counts were not checked (an unfinished growth)",
                file.path.display(),
                file.trailing_bytes
            )
        })
        .collect();
    for line in &trailing {
        log.line(line);
    }
    let reduction = crate::reduction::combine(
        crate::reduction::setting_of(job),
        run.reduction
            .iter()
            .map(|m| crate::reduction::Measured {
                instance: m.instance.clone(),
                figures: m.figures.clone(),
                kept: m.kept.clone(),
            })
            .collect(),
    );
    log.line(format!("Data reduction: {}", reduction.summary()));
    let clean = run.is_clean() && !run.interrupted;
    let dirty = run.files.iter().any(|f| f.database_state.is_dirty());
    let verdict = if clean {
        "pass, every page is perfect and every database was shut down cleanly".to_string()
    } else if dirty && run.files.iter().all(|f| f.is_clean()) {
        "FAIL, a database was not shut down cleanly (its pages are intact): run `jetproof recover` \
         to replay its logs"
            .to_string()
    } else if dirty {
        "FAIL, damage found, and a database was not shut down cleanly: run `jetproof recover` \
         to replay its logs"
            .to_string()
    } else {
        "FAIL, damage found".to_string()
    };
    log.line(if run.interrupted {
        "Interrupted: the figures cover the pages checked before the stop".to_string()
    } else {
        format!("Verdict: {verdict}")
    });
    let record = RunRecord {
        started,
        ended,
        log_file: Some(log.path().to_path_buf()),
    };
    let mut result = to_result(&run, job, &record);
    result.io_engine = Some(backend.name().to_string());
    let result_path = out
        .write_result_and_report(&result)
        .map_err(|e| ChecksumError::Results(e.to_string()))?;
    Ok(ChecksumTest {
        run,
        result,
        result_path,
        table,
        damage,
        trailing,
        clean,
        verdict,
    })
}

/// When and where the pass ran, for its `result.json`.
#[derive(Clone, Debug)]
pub struct RunRecord {
    /// RFC 3339, UTC.
    pub started: String,
    pub ended: String,
    pub log_file: Option<PathBuf>,
}

/// The `result.json` of a checksum pass (`docs/results.md`): verdict fail with one reason per
/// damaged file; per instance the `checksum_read` I/O figures and, in `extra`, the file's row of
/// the "Checksum Statistics" table (`pages_seen`, `pages_bad`, `pages_correctable`,
/// `pages_wrong_number`, `mb_per_sec`, …, and the damaged pages); in `totals` the "(Sum)" row.
pub fn to_result(run: &ChecksumRun, job: &Job, record: &RunRecord) -> TestResult {
    let mut reasons = Vec::new();
    if run.interrupted {
        let totals = run.totals();
        reasons.push(format!(
            "interrupted: {} of {} bytes checked; the figures cover those pages only",
            totals.checked_bytes, totals.size_bytes
        ));
    }
    for file in run.files.iter().filter(|f| !f.is_clean()) {
        let mut reason = format!(
            "{}: {} bad, {} correctable, {} wrong page-number pages",
            file.path.display(),
            file.pages_bad,
            file.pages_correctable,
            file.pages_wrong_number
        );
        if file.pages_lost_write > 0 {
            reason.push_str(&format!(", {} lost writes", file.pages_lost_write));
        }
        if file.pages_newer_than_flush_map > 0 {
            reason.push_str(&format!(
                ", {} pages newer than the flush map",
                file.pages_newer_than_flush_map
            ));
        }
        if let Some(map) = file.flush_map_state.as_ref().filter(|m| m.is_damage()) {
            reason.push_str(&format!(
                "; flush map {} {}: {}",
                map.path.display(),
                map.status,
                map.reason.as_deref().unwrap_or("")
            ));
        }
        reasons.push(reason);
    }
    reasons.extend(state_problems(run));
    for log in run
        .logs
        .iter()
        .filter(|l| l.files_bad > 0 || l.checkpoint_error.is_some())
    {
        reasons.push(format!(
            "{}: {} bad log files{}",
            log.log_path.display(),
            log.files_bad,
            match &log.checkpoint_error {
                Some(error) => format!("; checkpoint unusable: {error}"),
                None => String::new(),
            }
        ));
    }
    let instances = run
        .instances
        .iter()
        .zip(&run.files)
        .zip(&run.stats)
        .zip(&run.logs)
        .map(|(((instance, file), stats), log)| {
            // `name` and `database_path` of the instance already say which file it is.
            let file_figures = FileChecksum {
                instance: String::new(),
                path: PathBuf::new(),
                ..file.clone()
            };
            InstanceResult {
                name: instance.name.clone(),
                database_path: instance.database_path.clone(),
                log_path: instance.log_path.clone(),
                io: jetproof_results::io_results(stats, Duration::from_secs_f64(file.seconds)),
                figures: InstanceFigures::Checksum(Box::new(ChecksumInstance {
                    file: file_figures,
                    log_files: log.clone(),
                })),
            }
        })
        .collect();
    let totals = Totals::Checksum(run.totals());
    let mut parameters = Parameters::of_job(job);
    parameters.checksum = Some(ChecksumParameters {
        read_size_bytes: DEFAULT_READ_SIZE as u64,
        direct_io: job.storage.direct_io,
    });
    let data_reduction = crate::reduction::combine(
        crate::reduction::setting_of(job),
        run.reduction
            .iter()
            .map(|m| crate::reduction::Measured {
                instance: m.instance.clone(),
                figures: m.figures.clone(),
                kept: m.kept.clone(),
            })
            .collect(),
    );
    let mut result = TestResult {
        interrupted: run.interrupted,
        ended: record.ended.clone(),
        instances,
        log_file: record.log_file.clone(),
        totals,
        data_reduction: Some(data_reduction),
        ..TestResult::new(
            TestKind::Checksum,
            record.started.clone(),
            run.elapsed.as_secs_f64(),
            parameters,
        )
    };
    result.set_window(&jetproof_results::MeasuredWindow {
        requested: run.requested_start,
        start: run.reads_started,
        end: run.reads_started + run.elapsed,
        ready_at_start: run.ready_at_start,
    });
    result.set_reasons(reasons);
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    use jetproof_engine::DbState;
    use jetproof_engine::header::{FORMAT_VERSION, HEADER_PAGES};
    use jetproof_engine::page::{HEADER_SIZE, OFFSET_PAGE_NUMBER, OFFSET_PAGE_TYPE};
    use jetproof_io::std_backend::StdBackend;
    use rand::rngs::StdRng;
    use rand::{Rng, RngCore, SeedableRng};

    /// Writes a database file of `pages` sealed pages (two header pages, then leaves with random
    /// bodies) and returns its bytes.
    fn write_database(path: &Path, page_size: u32, pages: u64, seed: u64) -> Vec<u8> {
        let bytes = database_bytes(page_size, pages, seed);
        std::fs::write(path, &bytes).expect("write test database");
        bytes
    }

    /// The bytes of a database file of `pages` sealed pages: two header pages, then leaves with
    /// random bodies.
    fn database_bytes(page_size: u32, pages: u64, seed: u64) -> Vec<u8> {
        let mut rng = StdRng::seed_from_u64(seed);
        let size = page_size as usize;
        let mut bytes = vec![0u8; size * pages as usize];
        let header = DbHeader {
            format_version: FORMAT_VERSION,
            page_size,
            page_count: pages,
            state: DbState::Clean,
            root_page: HEADER_PAGES,
            recovery_position: Default::default(),
            database_id: u128::from(seed),
            created_unix_ns: 1,
            next_update_stamp: 1,
            sequence: 1,
            extent_pages: 16,
            used_pages: pages,
        };
        for (number, page) in bytes.chunks_exact_mut(size).enumerate() {
            if (number as u32) < HEADER_PAGES {
                header.encode(page, number as u32);
                continue;
            }
            page[OFFSET_PAGE_NUMBER..OFFSET_PAGE_NUMBER + 4]
                .copy_from_slice(&(number as u32).to_le_bytes());
            page[OFFSET_PAGE_TYPE] = 5;
            rng.fill_bytes(&mut page[HEADER_SIZE..]);
            checksum::seal(page);
        }
        bytes
    }

    fn instance(dir: &Path, name: &str) -> Instance {
        Instance {
            name: name.to_string(),
            database_path: dir.join(format!("{name}.jpdb")),
            log_path: dir.join(format!("{name}-logs")),
        }
    }

    /// An instance's checksum figures in result.json: flattened into the instance object, or
    /// under `extra` in the first layout of `jetproof_results`.
    fn instance_figures(json: &serde_json::Value, instance: usize) -> serde_json::Value {
        let object = &json["instances"][instance];
        if object.get("pages_seen").is_some() {
            object.clone()
        } else {
            object["extra"].clone()
        }
    }

    fn buffered(read_size_bytes: usize) -> ChecksumOptions {
        ChecksumOptions {
            direct_io: false,
            read_size_bytes,
            reads_in_flight: DEFAULT_READS_IN_FLIGHT,
            stop: None,
            start_at: None,
            dedup_unit_bytes: 8192,
        }
    }

    fn scan(instances: &[Instance], options: &ChecksumOptions) -> ChecksumRun {
        let backend = StdBackend::new();
        check_instances(instances, backend.as_ref(), options, &NoProgress).expect("scan")
    }

    #[test]
    fn checksum_clean_files_count_every_page() {
        let dir = tempfile::tempdir().expect("tempdir");
        let a = instance(dir.path(), "db1");
        let b = instance(dir.path(), "db2");
        write_database(&a.database_path, 8192, 300, 1);
        write_database(&b.database_path, 32768, 70, 2);
        // A read size that does not divide the file, to exercise the last short read.
        for readers in [1, 3] {
            let options = ChecksumOptions {
                reads_in_flight: readers,
                ..buffered(7 * 8192)
            };
            let run = scan(&[a.clone(), b.clone()], &options);
            assert!(run.is_clean(), "{readers} readers: {:?}", run.files);
            assert_eq!(run.totals().pages_seen, 370, "{readers} readers");
        }
        let run = scan(&[a, b], &buffered(5 * 32768));
        assert!(run.is_clean(), "{:?}", run.files);
        assert_eq!(run.files[0].pages_seen, 300, "{:?}", run.files[0]);
        assert_eq!(run.files[1].pages_seen, 70);
        let totals = run.totals();
        assert_eq!(totals.pages_seen, 370);
        assert_eq!(totals.size_bytes, 300 * 8192 + 70 * 32768);
        let reads = run.stats[1].class(IoClass::ChecksumRead).count();
        assert!(
            reads >= 70 / 5,
            "reads counted under checksum_read: {reads}"
        );
    }

    #[test]
    fn checksum_damage_is_counted_and_located() {
        let seed = 0xC4EC;
        let mut rng = StdRng::seed_from_u64(seed);
        let dir = tempfile::tempdir().expect("tempdir");
        let db = instance(dir.path(), "db1");
        let page = 4096usize;
        let pages = 200u64;
        let mut bytes = write_database(&db.database_path, page as u32, pages, seed);
        // One flipped bit in page 17, page 40 copied over page 90, garbage in page 150.
        let bit = rng.random_range(0..page * 8);
        bytes[17 * page + bit / 8] ^= 1 << (bit % 8);
        let forty = bytes[40 * page..41 * page].to_vec();
        bytes[90 * page..91 * page].copy_from_slice(&forty);
        rng.fill_bytes(&mut bytes[150 * page..151 * page]);
        std::fs::write(&db.database_path, &bytes).expect("rewrite");

        // Small reads, so that chunks are read by several readers and arrive out of order.
        let run = scan(std::slice::from_ref(&db), &buffered(16 * page));
        let file = &run.files[0];
        assert_eq!(file.pages_seen, pages);
        assert_eq!(
            (
                file.pages_correctable,
                file.pages_wrong_number,
                file.pages_bad
            ),
            (1, 1, 1),
            "seed {seed}: {file:?}"
        );
        assert_eq!(
            file.damaged_pages,
            vec![
                DamagedPage {
                    page_number: 17,
                    damage: Damage::Correctable,
                    found_page_number: None,
                    bit: Some(bit as u64),
                    expected_write_count: None,
                    found_write_count: None,
                },
                DamagedPage {
                    page_number: 90,
                    damage: Damage::WrongPageNumber,
                    found_page_number: Some(40),
                    bit: None,
                    expected_write_count: None,
                    found_write_count: None,
                },
                DamagedPage {
                    page_number: 150,
                    damage: Damage::Bad,
                    found_page_number: None,
                    bit: None,
                    expected_write_count: None,
                    found_write_count: None,
                },
            ]
        );
        assert!(!run.is_clean());
        let lines = damage_lines(&run, 10);
        assert!(
            lines[1].contains("page 90") && lines[1].contains("40"),
            "{lines:?}"
        );
        // The file was only read.
        assert_eq!(std::fs::read(&db.database_path).expect("read back"), bytes);

        let record = RunRecord {
            started: "2026-01-01T00:00:00Z".into(),
            ended: "2026-01-01T00:00:01Z".into(),
            log_file: None,
        };
        let result = to_result(&run, &Job::default(), &record);
        let json = serde_json::to_value(&result).expect("serialises");
        assert_eq!(json["test"], "checksum");
        assert_eq!(json["verdict"], "fail");
        assert_eq!(json["reasons"].as_array().map(Vec::len), Some(1), "{json}");
        let figures = instance_figures(&json, 0);
        assert_eq!(figures["pages_seen"], 200, "{json}");
        assert_eq!(figures["pages_correctable"], 1, "{json}");
        assert_eq!(figures["pages_wrong_number"], 1, "{json}");
        assert_eq!(figures["pages_bad"], 1, "{json}");
        assert!(figures["mb_per_sec"].is_number(), "{json}");
        assert_eq!(
            figures["damaged_pages"][1]["found_page_number"], 40,
            "{json}"
        );
        assert!(
            json["instances"][0]["checksum_read"]["count"].as_u64() > Some(0),
            "{json}"
        );
        assert_eq!(json["totals"]["pages_seen"], 200, "{json}");
    }

    /// Writes a log of about 3 MiB (several generations) for the database with `database_id`.
    fn write_log(dir: &Path, database_id: u128) {
        let backend: Arc<dyn IoBackend> = StdBackend::new();
        let log =
            jetproof_log::Log::create(backend, jetproof_log::LogOptions::new(dir, database_id))
                .expect("create log");
        let payload = vec![0x5Au8; 3000];
        for transaction_id in 0..1000 {
            let record = jetproof_log::Record {
                record_type: 1,
                transaction_id,
                payload: &payload,
            };
            log.append_and_commit(&record, jetproof_log::Durability::Lazy)
                .expect("append");
        }
        log.close().expect("close log");
    }

    #[test]
    fn checksum_verifies_log_files_too() {
        let seed = 11;
        let dir = tempfile::tempdir().expect("tempdir");
        let db = instance(dir.path(), "db1");
        write_database(&db.database_path, 8192, 64, seed);
        write_log(&db.log_path, u128::from(seed));

        let run = scan(std::slice::from_ref(&db), &buffered(DEFAULT_READ_SIZE));
        let log = &run.logs[0];
        assert!(log.present);
        assert!(log.files_seen >= 2, "{log:?}");
        assert!(run.is_clean(), "{log:?}");

        // Damage the middle of the first generation: durable log that recovery needs.
        let first = jetproof_log::format::generation_path(&db.log_path, 1);
        let mut bytes = std::fs::read(&first).expect("read generation 1");
        let middle = bytes.len() / 2;
        bytes[middle] ^= 0x40;
        std::fs::write(&first, &bytes).expect("damage generation 1");
        let run = scan(std::slice::from_ref(&db), &buffered(DEFAULT_READ_SIZE));
        let log = &run.logs[0];
        assert_eq!(log.files_bad, 1, "{log:?}");
        assert!(!run.is_clean());
        assert!(
            damage_lines(&run, 10)
                .iter()
                .any(|l| l.contains("E00000001")),
            "{:?}",
            damage_lines(&run, 10)
        );
        let record = RunRecord {
            started: String::new(),
            ended: String::new(),
            log_file: None,
        };
        let json = serde_json::to_value(to_result(&run, &Job::default(), &record)).expect("json");
        assert_eq!(json["verdict"], "fail");
        assert_eq!(
            instance_figures(&json, 0)["log_files"]["files_bad"],
            1,
            "{json}"
        );
        assert_eq!(json["totals"]["log_files_bad"], 1, "{json}");
    }

    #[test]
    fn checksum_reports_bytes_appended_past_the_last_page_and_tolerates_an_unfinished_growth() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = instance(dir.path(), "db1");
        let mut bytes = write_database(&db.database_path, 8192, 64, 21);
        // Up to one extent (16 pages here) is what a growth leaves before the header counts it.
        bytes.extend(vec![0u8; 16 * 8192]);
        std::fs::write(&db.database_path, &bytes).expect("grow");
        let run = scan(std::slice::from_ref(&db), &buffered(DEFAULT_READ_SIZE));
        assert!(run.is_clean(), "{:?}", run.files);
        assert_eq!(run.files[0].trailing_bytes, 16 * 8192);
        assert_eq!(run.files[0].appended_bytes, 0);
        // Anything beyond that was appended by something else.
        bytes.extend(b"appended by someone else");
        std::fs::write(&db.database_path, &bytes).expect("append");
        let run = scan(std::slice::from_ref(&db), &buffered(DEFAULT_READ_SIZE));
        assert!(!run.is_clean());
        assert_eq!(run.files[0].appended_bytes, 24);
        assert_eq!(run.files[0].pages_seen, 64, "every page still checked");
        let problems = state_problems(&run);
        assert!(
            problems.len() == 1 && problems[0].contains("bytes were appended"),
            "{problems:?}"
        );
        let record = RunRecord {
            started: String::new(),
            ended: String::new(),
            log_file: None,
        };
        let json = serde_json::to_value(to_result(&run, &Job::default(), &record)).expect("json");
        assert_eq!(json["verdict"], "fail");
        assert_eq!(instance_figures(&json, 0)["appended_bytes"], 24, "{json}");
        assert_eq!(
            instance_figures(&json, 0)["database_state"]["state"],
            "clean",
            "{json}"
        );
    }

    #[test]
    fn checksum_log_of_another_database_is_bad() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = instance(dir.path(), "db1");
        write_database(&db.database_path, 8192, 64, 12);
        write_log(&db.log_path, 999);
        let run = scan(std::slice::from_ref(&db), &buffered(DEFAULT_READ_SIZE));
        assert!(!run.is_clean(), "{:?}", run.logs);
    }

    #[test]
    fn checksum_io_error_mid_scan_is_an_error_not_a_hang() {
        use jetproof_io::fault::{FaultBackend, FaultConfig};
        let backend = FaultBackend::new(FaultConfig::default());
        let dir = Path::new("/fault");
        let db = instance(dir, "db1");
        backend.create_dir_all(dir).expect("mkdir");
        let file = backend
            .open(&db.database_path, &OpenOptions::create().buffered())
            .expect("create");
        file.write_at(&database_bytes(4096, 256, 5), 0, IoClass::DbWrite)
            .expect("write");
        drop(file);
        for readers in [1, 4] {
            // The header reads succeed; the scan's fifth or so read fails.
            let failing_after = backend.operations() + 8;
            backend.configure(|config| config.eio_after_ops = Some(failing_after));
            let options = ChecksumOptions {
                reads_in_flight: readers,
                ..buffered(8 * 4096)
            };
            let err = check_instances(
                std::slice::from_ref(&db),
                backend.as_ref(),
                &options,
                &NoProgress,
            )
            .expect_err("an injected EIO stops the pass");
            assert!(
                matches!(err, ChecksumError::Io(_)),
                "failed in the scan: {err:?}"
            );
            assert!(!err.is_bad_input(), "{err}");
            assert!(err.to_string().contains("db1.jpdb"), "{err}");
            backend.configure(|config| config.eio_after_ops = None);
        }
    }

    #[test]
    fn checksum_stopped_early_says_so() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = instance(dir.path(), "db1");
        write_database(&db.database_path, 4096, 64, 6);
        let options = ChecksumOptions {
            stop: Some(Arc::new(AtomicBool::new(true))),
            ..buffered(8 * 4096)
        };
        let run = scan(std::slice::from_ref(&db), &options);
        assert!(run.interrupted);
        assert!(run.files[0].checked_bytes < run.files[0].size_bytes);
        let record = RunRecord {
            started: String::new(),
            ended: String::new(),
            log_file: None,
        };
        let json = serde_json::to_value(to_result(&run, &Job::default(), &record)).expect("json");
        assert_eq!(json["interrupted"], true);
        assert_eq!(
            json["verdict"], "fail",
            "an unfinished pass proves nothing: {json}"
        );
    }

    #[test]
    fn checksum_missing_database_is_bad_input() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = instance(dir.path(), "db1");
        let backend = StdBackend::new();
        let err = check_instances(&[db], backend.as_ref(), &buffered(4096), &NoProgress)
            .expect_err("missing");
        assert!(err.is_bad_input());
        assert!(err.to_string().contains("jetproof init"), "{err}");
    }

    #[test]
    fn checksum_truncated_foreign_and_garbage_files_are_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = instance(dir.path(), "db1");
        let bytes = write_database(&db.database_path, 8192, 64, 3);
        let backend = StdBackend::new();
        let mut garbage = vec![0u8; 1 << 20];
        StdRng::seed_from_u64(3).fill_bytes(&mut garbage);
        let cases: [(&str, Vec<u8>); 4] = [
            ("truncated", bytes[..bytes.len() / 2].to_vec()),
            ("empty", Vec::new()),
            ("foreign", b"#!/bin/sh\necho precious\n".repeat(1000)),
            ("garbage", garbage),
        ];
        for (what, content) in cases {
            std::fs::write(&db.database_path, &content).expect("write case");
            let err = check_instances(
                std::slice::from_ref(&db),
                backend.as_ref(),
                &buffered(1 << 20),
                &NoProgress,
            )
            .expect_err(what);
            assert!(!err.is_bad_input(), "{what}: {err}");
            let text = err.to_string();
            assert!(text.contains("db1.jpdb"), "{what}: {text}");
        }
    }
}
