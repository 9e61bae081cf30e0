//! The backup test: each database read start to end in large sequential reads (256 KiB by
//! default, as Exchange's streaming backup and the seeds' "Database Read" backup figures show),
//! all databases at once, timed per database and in total. Every page read is checksum-verified,
//! as ESE's streaming backup does, and checked against the database's flush map as
//! `jetproof checksum` checks it (a page older than its last acknowledged write is a lost write),
//! so a backup never silently copies damage. A flush map that cannot vouch for the pages, header
//! copy 0 behind copy 1, and bytes appended past the last page are reported too (each a fail). With a destination
//! directory the pages are also written there, making a verified copy.
//!
//! Reads only; the databases must be closed cleanly (a dirty database needs `jetproof recover`
//! first, as a real backup would need a consistent source).
//!
//! **The copy is what is on disk, verified; it is never a repair.** Every page is checked with
//! `checksum::verify`, which does not change the buffer, and the bytes read are the bytes
//! written: a correctable page (one flipped bit) is copied with its flipped bit and reported as
//! correctable, exactly as the verification reports it (`correctable_pages`, a reason in the
//! verdict, exit 1). Why not copy the corrected page: the copy would then differ from its source
//! in silence, and a backup that "fixes" what it reads hides the very damage a storage test is
//! there to find (the live database, read by the engine, corrects the bit in memory and counts
//! it; the file itself is only ever repaired by a write of the engine's). A bad or misdirected
//! page is copied as it is too and fails the verdict.
//!
//! **The copy never lands on a source.** `--to` is refused (exit 2, before any I/O) when it is,
//! after following symlinks, the directory of a database or log of the job; when a file the
//! backup would write is a database of the job (same device and inode, so hard links and
//! symlinked directories are caught); when such a file exists and is not a copy jetproof made
//! (or is a symlink); and when two instances would write the same file.
//!
//! **A copy under its name is always finished.** Each copy is written as `NAME.partial` beside
//! its final name (an earlier copy of that name is removed first), synced, read back (its
//! CRC-32C must be the one of the bytes read from the database) and only then renamed to
//! `NAME`, the directory synced. A backup that fails (a read or write error, a full target, the
//! copy read back different) or is stopped removes the partial file and still writes
//! `result.json`, with the reason (verdict fail; `error` in the database's section). One killed
//! outright leaves only `NAME.partial`, which the next backup to that directory (marked as
//! jetproof's) writes over; a `NAME.partial` that is not jetproof's is refused as any file.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime};

use jetproof_engine::checksum::{self, PageCheck};
use jetproof_engine::{DbHeader, DbState, ReadCheck};
use jetproof_io::meter::{InstanceStats, MeteredFile};
use jetproof_io::{AlignedBuf, IoBackend, IoClass, IoError, IoFile, OpenOptions};
use jetproof_job::{Instance, Job};
use jetproof_results::sections::{BackupInstance, BackupTotals};
use jetproof_results::{
    InstanceFigures, InstanceResult, OutDir, Parameters, TestKind, TestLog, TestResult, Totals,
    io_results,
};

use jetproof_storage::{BadInput, bad};

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BackupError {
    #[error(transparent)]
    BadInput(#[from] BadInput),
    #[error("{0}")]
    Io(#[from] IoError),
    #[error("{0}")]
    Header(#[from] jetproof_engine::HeaderError),
    #[error("{0}")]
    Results(String),
}

/// What the backup of one database found (a section of `result.json`).
pub use jetproof_results::sections::DatabaseBackup;

pub struct BackupOptions<'a> {
    pub backend: Arc<dyn IoBackend>,
    /// Write a verified copy of each database here.
    pub to: Option<PathBuf>,
    pub stop: &'a AtomicBool,
    /// Called with the total bytes read so far by all databases, and the total to read.
    pub progress: &'a (dyn Fn(u64, u64) + Sync),
    /// `--start-at`: the reads start at this moment of the host's clock, after every database
    /// was opened and checked (`crate::start`).
    pub start_at: Option<SystemTime>,
}

/// Checks the databases and the destination without writing (the destination's probe aside:
/// a scratch file jetproof creates and removes, to know its file system takes direct I/O).
pub fn preflight(job: &Job, to: Option<&Path>) -> Result<(), BackupError> {
    jetproof_storage::host::check_existing(job, &job.instances(), false)?;
    jetproof_storage::database::require_databases(job, Path::exists)?;
    if let Some(dir) = to {
        check_copy_targets(job, dir)?;
        let (state, entry) = jetproof_storage::target::dir_state(dir)?;
        if state == jetproof_storage::target::DirState::Foreign {
            return Err(bad(
                "--to",
                format!(
                    "{} holds files jetproof did not create ({}); give an empty or new directory",
                    dir.display(),
                    entry.unwrap_or_default()
                ),
            )
            .into());
        }
        jetproof_storage::host::probe_dir(dir, "--to", job.storage.direct_io)?;
    }
    Ok(())
}

/// The file of `instance`'s copy in the backup directory `dir`.
fn copy_path(dir: &Path, instance: &Instance) -> PathBuf {
    let name = instance
        .database_path
        .file_name()
        .map(|n| n.to_os_string())
        .unwrap_or_else(|| format!("{}.jpdb", instance.name).into());
    dir.join(name)
}

/// Device and inode of what `path` names, following symlinks; None when nothing is there.
fn identity(path: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

/// Refuses a backup directory that would put a copy on a source (see the module's header).
fn check_copy_targets(job: &Job, dir: &Path) -> Result<(), BadInput> {
    let instances = job.instances();
    if let Some(target_dir) = identity(dir) {
        for instance in &instances {
            let database_dir = instance
                .database_path
                .parent()
                .filter(|p| !p.as_os_str().is_empty())
                .unwrap_or(Path::new("."));
            for (what, source) in [
                ("the directory of the database", database_dir),
                ("the log directory", instance.log_path.as_path()),
            ] {
                if identity(source) == Some(target_dir) {
                    return Err(bad(
                        "--to",
                        format!(
                            "{} is {what} of {} ({}); a backup there would write over the live files. Give a directory of its own, like {}",
                            dir.display(),
                            instance.name,
                            source.display(),
                            dir.join("backup").display()
                        ),
                    ));
                }
            }
        }
    }
    let mut planned: Vec<(PathBuf, String)> = Vec::new();
    for instance in &instances {
        let target = copy_path(dir, instance);
        if let Some((_, other)) = planned.iter().find(|(path, _)| *path == target) {
            return Err(bad(
                "--to",
                format!(
                    "instances {other} and {} would both be copied to {} (their database files have the same name); back them up to separate directories, or rename a database",
                    instance.name,
                    target.display()
                ),
            ));
        }
        let target_identity = identity(&target);
        if let Some(source) = instances
            .iter()
            .find(|s| target_identity.is_some() && identity(&s.database_path) == target_identity)
        {
            return Err(bad(
                "--to",
                format!(
                    "{} is the database of {} itself ({}); the copy would be written over it. Give a directory of its own",
                    target.display(),
                    source.name,
                    source.database_path.display()
                ),
            ));
        }
        let link = std::fs::symlink_metadata(&target)
            .map(|m| m.file_type().is_symlink())
            .unwrap_or(false);
        if link {
            return Err(bad(
                "--to",
                format!(
                    "{} is a symbolic link; jetproof writes its copy only as a file of its own, never through a link. Give an empty or new directory",
                    target.display()
                ),
            ));
        }
        if target_identity.is_some() && !is_own_copy(dir, &target) {
            return Err(bad(
                "--to",
                format!(
                    "{} exists and is not a copy jetproof made; jetproof never overwrites it. Give an empty or new directory",
                    target.display()
                ),
            ));
        }
        // An unfinished copy an earlier backup left (killed mid-copy) is jetproof's own and is
        // written over; anything else at that name is kept and refused.
        let partial = partial_path(&target);
        if let Ok(meta) = std::fs::symlink_metadata(&partial) {
            let own = meta.is_file()
                && dir.join(jetproof_storage::target::MARKER).is_file()
                && jetproof_storage::target::partial_is_ours(&partial, job);
            if !own {
                return Err(bad(
                    "--to",
                    format!(
                        "{} exists and is not an unfinished copy jetproof made; jetproof never overwrites it. Give an empty or new directory",
                        partial.display()
                    ),
                ));
            }
        }
        planned.push((target, instance.name.clone()));
    }
    Ok(())
}

/// Is `file` a copy an earlier backup made: a regular file starting like a jetproof database,
/// in a directory marked as jetproof's?
fn is_own_copy(dir: &Path, file: &Path) -> bool {
    use std::io::Read;
    if !dir.join(jetproof_storage::target::MARKER).is_file() {
        return false;
    }
    // Checked before it is opened: a pipe there must not block, a device is not ours.
    let Ok(mut opened) = jetproof_io::input::open_regular(file, u64::MAX) else {
        return false;
    };
    let mut head = [0u8; 4096];
    let Ok(read) = opened.read(&mut head) else {
        return false;
    };
    jetproof_storage::database::looks_like_database(&head[..read])
}

pub fn backup(
    job: &Job,
    out: &OutDir,
    log: &TestLog,
    options: &BackupOptions<'_>,
) -> Result<TestResult, BackupError> {
    preflight(job, options.to.as_deref())?;
    let instances = job.instances();
    let read_size = job.workload.maintenance_read_size.bytes() as usize;
    let direct = job.storage.direct_io;

    // Open and check every database before reading any of them.
    let mut sources = Vec::new();
    for instance in &instances {
        sources.push(open_source(instance, direct, options, log)?);
    }
    let total_bytes: u64 = sources.iter().map(|s| s.header.file_size_bytes()).sum();
    if let Some(dir) = &options.to {
        jetproof_storage::target::make_own_dir(dir).map_err(|source| IoError::Path {
            op: "create directory",
            path: dir.clone(),
            source,
        })?;
    }

    log.line(format!(
        "Backup: {} database(s), {} bytes in all, {} KiB reads, all databases at once, I/O engine {}",
        sources.len(),
        total_bytes,
        read_size / 1024,
        options.backend.name()
    ));
    let mut ready_at_start = true;
    if let Some(at) = options.start_at {
        ready_at_start = !crate::start::reached(at);
        log.line(format!(
            "Waiting for the start time {} (--start-at) ...",
            jetproof_results::clock::rfc3339_millis(at)
        ));
        // Stopped while waiting: every reader sees the flag at once and reads nothing.
        let _ = crate::start::wait_until(at, options.stop, || {});
    }
    let started_at = jetproof_results::now_rfc3339();
    let wall_start = SystemTime::now();
    let started = Instant::now();
    let done = AtomicU64::new(0);
    let outcomes: Vec<Result<DatabaseBackup, BackupError>> = std::thread::scope(|scope| {
        let handles: Vec<_> = sources
            .iter()
            .map(|source| {
                let done = &done;
                scope.spawn(move || {
                    back_up_one(source, read_size, direct, options, done, total_bytes)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| match h.join() {
                Ok(result) => Ok(result),
                Err(_) => Err(BackupError::Results("a backup thread panicked".into())),
            })
            .collect()
    });
    let elapsed = started.elapsed();

    let Gathered {
        mut reasons,
        instance_results,
        interrupted,
        read_bytes,
    } = gather(&sources, outcomes, log)?;
    if interrupted {
        reasons.push("interrupted before every database was read".into());
    }
    let total_mb_per_sec = read_bytes as f64 / 1e6 / elapsed.as_secs_f64().max(1e-9);
    log.line(format!(
        "Backup total: {} MB in {:.1} s, {:.1} MB/s",
        read_bytes / 1_000_000,
        elapsed.as_secs_f64(),
        total_mb_per_sec
    ));
    let totals = Totals::Backup(BackupTotals {
        bytes: read_bytes,
        seconds: elapsed.as_secs_f64(),
        mb_per_sec: total_mb_per_sec,
    });
    let mut result = TestResult {
        interrupted,
        instances: instance_results,
        log_file: Some(log.path().to_path_buf()),
        totals,
        io_engine: Some(options.backend.name().to_string()),
        ..TestResult::new(
            TestKind::Backup,
            started_at,
            elapsed.as_secs_f64(),
            Parameters::of_job(job),
        )
    };
    result.set_window(&jetproof_results::MeasuredWindow {
        requested: options.start_at,
        start: wall_start,
        end: wall_start + elapsed,
        ready_at_start,
    });
    result.set_reasons(reasons);
    out.write_result_and_report(&result)
        .map_err(|e| BackupError::Results(e.to_string()))?;
    Ok(result)
}

/// Opens one database for the backup and checks it: clean, its flush map, its header copies,
/// bytes appended past its last page (the problems fail the verdict).
fn open_source(
    instance: &Instance,
    direct: bool,
    options: &BackupOptions<'_>,
    log: &TestLog,
) -> Result<Source, BackupError> {
    let stats = InstanceStats::new(instance.name.clone());
    let file = MeteredFile::wrap(
        options.backend.open(
            &instance.database_path,
            &OpenOptions::read_only().with_direct(direct),
        )?,
        stats.clone(),
    );
    let header = DbHeader::read_with_class(file.as_ref(), IoClass::BackupRead)?;
    if header.state != DbState::Clean {
        return Err(bad(
            format!("database of {}", instance.name),
            format!(
                "{} was not shut down cleanly; run `jetproof recover` first",
                instance.database_path.display()
            ),
        )
        .into());
    }
    let mut problems = Vec::new();
    // Opened as `checksum` opens it; a map that cannot vouch for the pages fails the verdict.
    let flush_map = flush_map(
        instance,
        &header,
        &stats,
        direct,
        options,
        log,
        &mut problems,
    );
    problems.extend(
        jetproof_storage::database::header_copies(
            options.backend.as_ref(),
            &instance.database_path,
        )
        .behind,
    );
    problems.extend(
        jetproof_storage::database::appended_bytes(
            options.backend.as_ref(),
            &instance.database_path,
        )
        .map(|a| format!("{a} (not copied)")),
    );
    Ok(Source {
        instance: instance.clone(),
        file,
        header,
        stats,
        flush_map,
        problems,
    })
}

/// The database's flush map, opened as `checksum` opens it; a map that cannot vouch for the
/// pages is a problem (it fails the verdict), a missing one is said in the test log.
fn flush_map(
    instance: &Instance,
    header: &DbHeader,
    stats: &Arc<InstanceStats>,
    direct: bool,
    options: &BackupOptions<'_>,
    log: &TestLog,
    problems: &mut Vec<String>,
) -> Option<jetproof_engine::FlushMap> {
    match crate::checksum::open_flush_map(
        options.backend.as_ref(),
        &instance.database_path,
        header,
        direct,
        stats,
    ) {
        Ok((map, finding)) => {
            let path = finding.path.display();
            match finding.status.as_str() {
                "damaged" => problems.push(format!(
                    "flush map {path} damaged (map pages {:?}): the pages they describe are \
                     not checked for lost writes",
                    finding.damaged_map_pages
                )),
                "unusable" => problems.push(format!(
                    "flush map {path} unusable: {}; lost writes cannot be checked",
                    finding.reason.as_deref().unwrap_or("")
                )),
                // A database made by an earlier build, or the map removed: as checksum,
                // not a failure (said in the test log).
                "missing" => log.line(format!(
                    "{}: no flush map ({path}): lost writes cannot be checked",
                    instance.name
                )),
                _ => {}
            }
            map
        }
        Err(e) => {
            let why = match e {
                crate::checksum::ChecksumError::FlushMap { path, reason } => {
                    format!("flush map {} cannot be read: {reason}", path.display())
                }
                other => other.to_string(),
            };
            problems.push(format!("{why}; lost writes cannot be checked"));
            None
        }
    }
}

/// Every database's backup, as the result's instances and reasons.
struct Gathered {
    reasons: Vec<String>,
    instance_results: Vec<InstanceResult>,
    interrupted: bool,
    read_bytes: u64,
}

/// What each database's backup found: its line of the test log, its damage and problems as
/// reasons, its figures.
fn gather(
    sources: &[Source],
    outcomes: Vec<Result<DatabaseBackup, BackupError>>,
    log: &TestLog,
) -> Result<Gathered, BackupError> {
    let mut reasons = Vec::new();
    let mut instance_results = Vec::new();
    let mut interrupted = false;
    let mut read_bytes = 0u64;
    for (source, outcome) in sources.iter().zip(outcomes) {
        let (instance, stats) = (&source.instance, &source.stats);
        let outcome = outcome?;
        read_bytes += outcome.bytes;
        if let Some(error) = &outcome.error {
            reasons.push(format!(
                "{}: the backup stopped: {error}; no copy is left under its name",
                instance.name
            ));
        } else if outcome.bytes < source.header.file_size_bytes() {
            interrupted = true;
        }
        log.line(format!(
            "{}: {} MB in {:.1} s, {:.1} MB/s; pages seen {}, bad {}, correctable {}, wrong page-number {}",
            instance.name,
            outcome.bytes / 1_000_000,
            outcome.seconds,
            outcome.mb_per_sec,
            outcome.pages_seen,
            outcome.bad_pages.len(),
            outcome.correctable_pages.len(),
            outcome.wrong_number_pages.len()
        ));
        let damaged = outcome.bad_pages.len()
            + outcome.correctable_pages.len()
            + outcome.wrong_number_pages.len()
            + outcome.lost_write_pages.len()
            + outcome.newer_than_flush_map_pages.len();
        if damaged > 0 {
            reasons.push(format!(
                "{}: {} damaged page(s) found while reading for backup (bad {:?}, correctable {:?}, wrong page-number {:?}, lost write {:?}, newer than the flush map {:?})",
                instance.name,
                damaged,
                first_few(&outcome.bad_pages),
                first_few(&outcome.correctable_pages),
                first_few(&outcome.wrong_number_pages),
                first_few(&outcome.lost_write_pages),
                first_few(&outcome.newer_than_flush_map_pages)
            ));
        }
        for problem in &source.problems {
            reasons.push(format!("{}: {problem}", instance.name));
        }
        instance_results.push(InstanceResult {
            name: instance.name.clone(),
            database_path: instance.database_path.clone(),
            log_path: instance.log_path.clone(),
            io: io_results(stats, Duration::from_secs_f64(outcome.seconds.max(1e-9))),
            figures: InstanceFigures::Backup(Box::new(BackupInstance { backup: outcome })),
        });
    }
    if interrupted {
        reasons.push("interrupted before every database was read".into());
    }
    Ok(Gathered {
        reasons,
        instance_results,
        interrupted,
        read_bytes,
    })
}

/// One database being read, opened and checked before any reading starts.
struct Source {
    instance: Instance,
    file: Arc<dyn IoFile>,
    header: DbHeader,
    stats: Arc<InstanceStats>,
    /// The flush map, when it can vouch for the pages: each page is checked against it as
    /// `jetproof checksum` checks it, so a lost write is never copied as a good page.
    flush_map: Option<jetproof_engine::FlushMap>,
    /// What is wrong beside the pages: a flush map that cannot vouch for them, header copy 0
    /// behind copy 1, bytes appended past the last page. Each fails the verdict.
    problems: Vec<String>,
}

fn first_few(pages: &[u64]) -> Vec<u64> {
    pages.iter().take(16).copied().collect()
}

fn back_up_one(
    source: &Source,
    read_size: usize,
    direct: bool,
    options: &BackupOptions<'_>,
    done: &AtomicU64,
    total_bytes: u64,
) -> DatabaseBackup {
    let (instance, file, header) = (&source.instance, source.file.as_ref(), &source.header);
    let page_size = header.page_size as usize;
    let size = header.file_size_bytes();
    let mut report = DatabaseBackup::default();
    let started = Instant::now();
    // The copy is written under `NAME.partial` and gets its name only once it is whole, synced
    // and read back equal (the module's header): a copy under its name is always finished.
    let copy = match &options.to {
        Some(dir) => {
            let path = copy_path(dir, instance);
            let partial = partial_path(&path);
            let opened = remove_earlier_copy(&path).and_then(|()| {
                let target = options
                    .backend
                    .open(&partial, &OpenOptions::create().with_direct(direct))?;
                target.set_size(size)?;
                Ok(target)
            });
            match opened {
                Ok(target) => Some((path, partial, target)),
                Err(e) => {
                    let _ = std::fs::remove_file(&partial);
                    report.error =
                        Some(format!("cannot start the copy {}: {e}", partial.display()));
                    return report;
                }
            }
        }
        None => None,
    };
    let mut buffer = AlignedBuf::zeroed(read_size);
    let mut offset = 0u64;
    let mut read_crc = 0u32;
    let mut error = None;
    while offset < size {
        if options.stop.load(Ordering::Relaxed) {
            break;
        }
        let length = (size - offset).min(read_size as u64) as usize;
        let chunk = &mut buffer[..length];
        if let Err(e) = file.read_at(chunk, offset, IoClass::BackupRead) {
            error = Some(format!(
                "reading {} at byte {offset}: {e}",
                instance.database_path.display()
            ));
            break;
        }
        // Verified without changing a byte: the copy is what is on disk (the module's header).
        for (index, page) in chunk.chunks_exact(page_size).enumerate() {
            let number = offset / page_size as u64 + index as u64;
            report.pages_seen += 1;
            let expected = u32::try_from(number).unwrap_or(u32::MAX);
            match checksum::verify(page, expected) {
                PageCheck::Good => match source
                    .flush_map
                    .as_ref()
                    .map(|m| m.check_read(expected, page))
                {
                    Some(ReadCheck::Behind { .. }) => report.lost_write_pages.push(number),
                    Some(ReadCheck::Ahead { .. }) => report.newer_than_flush_map_pages.push(number),
                    _ => {}
                },
                PageCheck::Correctable { .. } => report.correctable_pages.push(number),
                PageCheck::WrongPageNumber { .. } => report.wrong_number_pages.push(number),
                PageCheck::Bad => report.bad_pages.push(number),
            }
        }
        if let Some((_, partial, target)) = &copy {
            read_crc = jetproof_io::crc::crc32c_append(read_crc, chunk);
            if let Err(e) = target.write_at(chunk, offset, IoClass::DbWrite) {
                error = Some(format!(
                    "writing the copy {} at byte {offset}: {e}",
                    partial.display()
                ));
                break;
            }
        }
        offset += length as u64;
        let so_far = done.fetch_add(length as u64, Ordering::Relaxed) + length as u64;
        (options.progress)(so_far, total_bytes);
    }
    report.bytes = offset;
    report.seconds = started.elapsed().as_secs_f64();
    report.mb_per_sec = offset as f64 / 1e6 / report.seconds.max(1e-9);
    if let Some((path, partial, target)) = copy {
        // Finished: synced, read back, renamed. Not finished (an error, or stopped): removed.
        let finished = if error.is_none() && offset == size {
            finish_copy(
                target, &partial, &path, size, read_size, direct, read_crc, options,
            )
        } else {
            drop(target);
            Err(None)
        };
        match finished {
            Ok(()) => report.copy_path = Some(path),
            Err(why) => {
                let _ = std::fs::remove_file(&partial);
                error = error.or(why);
            }
        }
    }
    report.error = error;
    report
}

/// `NAME.partial`: where the copy named `copy` is written until it is finished.
pub fn partial_path(copy: &Path) -> PathBuf {
    let mut name = copy.file_name().unwrap_or_default().to_os_string();
    name.push(".partial");
    copy.with_file_name(name)
}

/// An earlier copy at `path` (checked to be jetproof's by `preflight`) is removed before the
/// new one is made, so that a file under the copy's name is always the copy of the last backup
/// that finished it, never one a failed backup left behind.
fn remove_earlier_copy(path: &Path) -> Result<(), IoError> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(IoError::Path {
            op: "remove the earlier copy",
            path: path.to_path_buf(),
            source: e,
        }),
        _ => Ok(()),
    }
}

/// Syncs the copy, reads it back (its CRC-32C must be the one of the bytes read from the
/// database), and renames it to its name, the directory synced after. `Err(reason)` leaves the
/// partial file for the caller to remove.
#[allow(clippy::too_many_arguments)]
fn finish_copy(
    target: Arc<dyn IoFile>,
    partial: &Path,
    path: &Path,
    size: u64,
    read_size: usize,
    direct: bool,
    read_crc: u32,
    options: &BackupOptions<'_>,
) -> Result<(), Option<String>> {
    let failed = |what: &str, e: &dyn std::fmt::Display| {
        Some(format!("{what} the copy {}: {e}", partial.display()))
    };
    target
        .sync_data(IoClass::DbWrite)
        .map_err(|e| failed("syncing", &e))?;
    drop(target);
    let copy = options
        .backend
        .open(partial, &OpenOptions::read_only().with_direct(direct))
        .map_err(|e| failed("reopening", &e))?;
    if copy.size().map_err(|e| failed("sizing", &e))? != size {
        return Err(Some(format!(
            "the copy {} is not {size} bytes long after it was written",
            partial.display()
        )));
    }
    let mut buffer = AlignedBuf::zeroed(read_size);
    let mut copy_crc = 0u32;
    let mut offset = 0u64;
    while offset < size {
        let length = (size - offset).min(read_size as u64) as usize;
        let chunk = &mut buffer[..length];
        copy.read_at(chunk, offset, IoClass::BackupRead)
            .map_err(|e| failed("reading back", &e))?;
        copy_crc = jetproof_io::crc::crc32c_append(copy_crc, chunk);
        offset += length as u64;
    }
    drop(copy);
    if copy_crc != read_crc {
        return Err(Some(format!(
            "the copy {} read back differs from what was read from the database (CRC-32C {copy_crc:08x}, expected {read_crc:08x})",
            partial.display()
        )));
    }
    std::fs::rename(partial, path).map_err(|e| failed("renaming", &e))?;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(|e| failed("syncing the directory of", &e))?;
    }
    Ok(())
}
