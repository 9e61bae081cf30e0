//! The init procedure: create the job's databases and fill them to size.
//!
//! As Jetstress does, the first database is made by the engine — records appended in key order
//! through the engine's bulk loader (packed leaves, interior levels, space maps and header, all
//! written with large sequential writes) until the file reaches the sized capacity — and the
//! others are copies of it made with large sequential I/O ("Duplicating databases"). Each database is built under a `.partial` name
//! and renamed only when complete and closed cleanly, so an interrupted init leaves nothing a later
//! command would mistake for a finished database; the next init removes the leftovers (they are
//! jetproof's own).
//!
//! Every check of the targets (foreign files, devices, free space) runs before the first write:
//! see [`crate::target`].
//!
//! **An interrupted init is finished by the next one.** Interrupted while filling, it leaves
//! `db1.jpdb.partial`; while duplicating, `db1.jpdb` complete and the copy in progress under its
//! `.partial` name. The next `init` (without `--recreate`) removes those leftovers — only files it
//! can tell as its own by their content (`target::partial_is_ours`) — and makes what is missing:
//! with the first database complete
//! ([`is_resumable`]: closed cleanly, of the job's page size and size), it is kept and copied to
//! the missing others. Anything else that exists is refused as before (`--recreate`).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use jetproof_engine::flushmap;
use jetproof_engine::{Database, DatabaseOptions, flush_map_path};
use jetproof_io::meter::{InstanceStats, MeteredFile};
use jetproof_io::{AlignedBuf, IoBackend, IoClass, IoError, OpenOptions};
use jetproof_job::{ByteSize, Instance, Job};
use jetproof_results::sections::InitTotals;
use jetproof_results::{
    InstanceFigures, InstanceResult, OutDir, Parameters, TestKind, TestLog, TestResult, Totals,
    io_results,
};
use jetproof_workload::keys::FillPlan;
use rand::{Rng, SeedableRng};

use crate::target::{self, BadInput, PARTIAL_SUFFIX, Permissions};

/// First guess of what a record costs in the file beyond its value (key, node entry, leaf
/// slack); the fill plan corrects it from the file's real growth.
const RECORD_OVERHEAD_GUESS: u64 = 600;

/// Mailboxes served by each database: the job's mailboxes spread over its databases.
pub fn mailboxes_per_database(job: &Job) -> u32 {
    let per = job.simulation.mailboxes / job.instance_count().max(1) as u64;
    u32::try_from(per.max(1)).unwrap_or(u32::MAX)
}

/// Size a database file starts at before it grows.
const INITIAL_SIZE: u64 = 8 << 20;

/// The smallest growth step (for small databases).
const MIN_EXTENT_SIZE: u64 = 1 << 20;

/// The step a database of `target_bytes` grows by, while it is filled and in the tests after:
/// ESE's 256 pages ([`jetproof_engine::db::DEFAULT_EXTENSION_PAGES`]; the reference reports'
/// databases grew by multiples of 8 MiB in every test, two of them by no multiple of 16 MiB), but
/// at most a sixteenth of the target (at least [`MIN_EXTENT_SIZE`]), so a small database's file ends close to its
/// target.
fn extent_bytes(target_bytes: u64, page_size: u64) -> u64 {
    (target_bytes / 16).clamp(
        MIN_EXTENT_SIZE,
        (jetproof_engine::db::DEFAULT_EXTENSION_PAGES * page_size).max(MIN_EXTENT_SIZE),
    )
}

/// Size of one read and one write of the duplication step.
pub const COPY_CHUNK: usize = 4 << 20;

/// Chunks of the duplication step in flight at once.
pub const COPY_STREAMS: usize = 4;

/// How init reports progress: called often, from the working thread.
pub trait Progress: Sync {
    /// A new phase begins, with its total in bytes.
    fn phase(&self, name: &str, total_bytes: u64);
    /// `done_bytes` of the current phase are complete.
    fn advance(&self, done_bytes: u64);
    fn finish(&self);
}

/// Progress that goes nowhere (tests, scripts).
pub struct NoProgress;

impl Progress for NoProgress {
    fn phase(&self, _name: &str, _total_bytes: u64) {}
    fn advance(&self, _done_bytes: u64) {}
    fn finish(&self) {}
}

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum InitError {
    /// Found before any write: nothing was done.
    #[error(transparent)]
    BadInput(#[from] BadInput),
    #[error("{0}")]
    Io(#[from] IoError),
    #[error("{path}: {message}")]
    Engine { path: PathBuf, message: String },
    /// Stopped by a signal. `on_devices`: the job's databases on block devices, which have no
    /// `.partial` name (`docs/devices.md`, "Crash behaviour"); `in_files`: whether any database
    /// is a file. [`init`] fills both in; the fill and the copies return it empty.
    #[error("{}", interrupted_message(on_devices, *in_files))]
    Interrupted {
        on_devices: Vec<PathBuf>,
        in_files: bool,
    },
    #[error("{0}")]
    Results(String),
}

impl InitError {
    fn interrupted() -> Self {
        InitError::Interrupted {
            on_devices: Vec::new(),
            in_files: true,
        }
    }

    /// An interruption says what it left of this job's databases: `.partial` files, or dirty
    /// databases on devices.
    fn naming(self, job: &Job) -> Self {
        match self {
            InitError::Interrupted { .. } => {
                let (on_devices, in_files) = interrupted_targets(job);
                InitError::Interrupted {
                    on_devices,
                    in_files,
                }
            }
            other => other,
        }
    }
}

/// The job's database paths that are block devices, and whether any database is a file.
pub fn interrupted_targets(job: &Job) -> (Vec<PathBuf>, bool) {
    let devices: Vec<PathBuf> = crate::raw::device_databases(job)
        .into_iter()
        .map(|(device, _)| device)
        .collect();
    let in_files = job.instances().len() > devices.len();
    (devices, in_files)
}

/// What an interrupted init left, and what makes it whole: a database in a file is left under
/// its `.partial` name, which the next init removes; one on a device is built in place and left
/// dirty and half-filled, which only `init --recreate` makes anew.
pub fn interrupted_message(on_devices: &[PathBuf], in_files: bool) -> String {
    let devices = on_devices
        .iter()
        .map(|d| d.display().to_string())
        .collect::<Vec<_>>()
        .join(", ");
    let files = format!(
        "the partial databases in files are left under *{PARTIAL_SUFFIX} names, which the next `jetproof init` removes before making what is missing"
    );
    let on_device = format!(
        "the database(s) on {devices} are left dirty and half-filled (a device has no second name for a partial database), and only `jetproof init --recreate` makes them anew"
    );
    match (on_devices.is_empty(), in_files) {
        (true, _) => format!("interrupted; {files}"),
        (false, false) => format!("interrupted; {on_device}"),
        (false, true) => format!("interrupted; {files}; {on_device}"),
    }
}

/// What init did.
#[derive(Debug, Clone)]
pub struct InitSummary {
    pub result: TestResult,
    pub result_path: PathBuf,
}

pub struct InitOptions<'a> {
    pub permissions: Permissions,
    pub backend: Arc<dyn IoBackend>,
    pub progress: &'a dyn Progress,
    /// Set from a signal handler to stop between records or chunks.
    pub stop: &'a AtomicBool,
    /// Seed of the record contents (the workload's randomness is separate).
    pub seed: u64,
}

/// Checks everything that can be checked without writing. `init` calls it first; the CLI may call
/// it before preparing the results directory so bad input costs nothing at all.
///
/// With `--recreate` nothing is deleted before every check here has passed: the targets, the
/// job against this host's memory and threads (the whole job, so that a run it cannot make is
/// refused before the fill), and the directories (writable, taking direct I/O when asked).
pub fn preflight(job: &Job, permissions: &Permissions) -> Result<(), InitError> {
    crate::host::check_new_dirs_writable(job)?;
    target::check_init_targets(job, permissions)?;
    let instances = job.instances();
    if !permissions.recreate && is_resumable(&instances) {
        check_resumable_first(job, &instances[0])?;
    }
    crate::host::check_job_fits(job)?;
    crate::host::check_new_targets(job)?;
    Ok(())
}

/// True when the job's databases are what an init interrupted while duplicating leaves: the
/// first database exists and some other does not (a missing first one is never a leftover:
/// it is made before any copy).
pub fn is_resumable(instances: &[Instance]) -> bool {
    let mut exists = instances.iter().map(|i| i.database_path.is_file());
    exists.next() == Some(true) && exists.any(|e| !e)
}

/// Checks that the first database, which a resumed init copies, is one the job would have made:
/// closed cleanly (init renames it into place only then), of the job's page size, and of the
/// job's size (the fill ends at most one extent past it).
fn check_resumable_first(job: &Job, first: &Instance) -> Result<(), BadInput> {
    let refuse = |why: String| {
        crate::target::bad(
            "--recreate",
            format!(
                "{} exists and other databases of the job do not, as an interrupted init leaves them, but {why}; pass --recreate to make every database anew",
                first.database_path.display()
            ),
        )
    };
    let backend = jetproof_io::std_backend::StdBackend::new();
    let header = backend
        .open(&first.database_path, &OpenOptions::read_only().buffered())
        .map_err(|e| e.to_string())
        .and_then(|file| jetproof_engine::DbHeader::read(file.as_ref()).map_err(|e| e.to_string()))
        .map_err(|e| refuse(format!("its header cannot be read ({e})")))?;
    if header.state != jetproof_engine::DbState::Clean {
        return Err(refuse(
            "it was not shut down cleanly (run `jetproof recover` first)".into(),
        ));
    }
    if u64::from(header.page_size) != job.storage.page_size.bytes() {
        return Err(refuse(format!(
            "it has {} pages and the job says storage.page_size = {}",
            ByteSize(u64::from(header.page_size)),
            job.storage.page_size
        )));
    }
    let target = job.db_size().bytes();
    let size = header.file_size_bytes();
    // The fill ends at most one of the file's own growth steps past the target (its header
    // says which: databases made before 2026-11-29 grew by 32 MiB).
    let step = u64::from(header.extent_pages).max(1) * u64::from(header.page_size);
    if size < target || size > target + step {
        return Err(refuse(format!(
            "it is {} and the job's databases are {}",
            ByteSize(size),
            job.db_size()
        )));
    }
    Ok(())
}

/// Creates and fills the job's databases.
pub fn init(
    job: &Job,
    out: &OutDir,
    log: &TestLog,
    options: &InitOptions<'_>,
) -> Result<InitSummary, InitError> {
    preflight(job, &options.permissions)?;
    let started_at = jetproof_results::now_rfc3339();
    let started = Instant::now();
    let instances = job.instances();
    let db_size = job.db_size();

    log.line(format!(
        "Preparing {} database(s) of {} each ({} pages of {}), direct I/O {}, I/O engine {}",
        instances.len(),
        db_size,
        db_size.bytes() / job.storage.page_size.bytes(),
        job.storage.page_size,
        if job.storage.direct_io { "on" } else { "off" },
        options.backend.name(),
    ));
    for instance in &instances {
        log.line(format!(
            "Instance {}: database {}, logs {}",
            instance.name,
            instance.database_path.display(),
            instance.log_path.display()
        ));
    }

    // Decided before anything is removed: an interrupted init's complete databases are kept.
    let resuming = !options.permissions.recreate && is_resumable(&instances);
    let kept: Vec<bool> = instances
        .iter()
        .map(|i| resuming && i.database_path.is_file())
        .collect();
    prepare_directories(job, &instances, options)?;

    let first = instances
        .first()
        .ok_or_else(|| BadInput {
            field: "storage.databases".into(),
            message: "the job has no database instances".into(),
        })
        .map_err(InitError::BadInput)?;

    // Phase 1: the first database, record by record through the engine (or, resuming an
    // interrupted init, the first database it completed).
    let fill_stats = InstanceStats::new(first.name.clone());
    let fill_started = Instant::now();
    let fill = if resuming {
        let bytes = std::fs::metadata(&first.database_path)
            .map(|m| m.len())
            .map_err(|source| IoError::Path {
                op: "stat",
                path: first.database_path.clone(),
                source,
            })?;
        log.line(format!(
            "Resuming an interrupted init: {} is complete and kept; making the {} missing database(s) from it",
            first.database_path.display(),
            kept.iter().filter(|k| !**k).count()
        ));
        Filled { records: 0, bytes }
    } else {
        log.line(format!(
            "Creating and filling {} (leaves filled to the table density, {}%)",
            first.database_path.display(),
            job.storage.table_density
        ));
        let fill = fill_database(job, first, &fill_stats, options).map_err(|e| e.naming(job))?;
        log.line(format!(
            "Filled {}: {} records, {} written in {:.1} s ({:.1} MB/s)",
            first.name,
            fill.records,
            ByteSize(fill.bytes),
            fill_started.elapsed().as_secs_f64(),
            mb_per_sec(fill.bytes, fill_started.elapsed())
        ));
        fill
    };
    let fill_elapsed = fill_started.elapsed();

    // Phase 2: the others, copied (those an interrupted init completed are kept).
    let mut copy_stats = Vec::new();
    let copy_started = Instant::now();
    let mut copied_bytes = 0u64;
    let to_copy: Vec<&Instance> = instances
        .iter()
        .zip(&kept)
        .skip(1)
        .filter(|(_, kept)| !**kept)
        .map(|(instance, _)| instance)
        .collect();
    if !to_copy.is_empty() {
        log.line(format!(
            "Duplicating databases: {} copies of {}",
            to_copy.len(),
            first.name
        ));
        let total = fill.bytes * to_copy.len() as u64;
        options.progress.phase("Duplicating databases", total);
        for (index, instance) in to_copy.iter().enumerate() {
            let stats = InstanceStats::new(instance.name.clone());
            let base = fill.bytes * index as u64;
            copied_bytes += copy_database(
                job,
                &first.database_path,
                &instance.database_path,
                &stats,
                options,
                base,
            )
            .map_err(|e| e.naming(job))?;
            copy_stats.push(((*instance).clone(), stats));
        }
        let elapsed = copy_started.elapsed();
        log.line(format!(
            "Duplicated {} in {:.1} s ({:.1} MB/s)",
            ByteSize(copied_bytes),
            elapsed.as_secs_f64(),
            mb_per_sec(copied_bytes, elapsed)
        ));
    }
    let copy_elapsed = copy_started.elapsed();
    options.progress.finish();

    let elapsed = started.elapsed();
    let written = if resuming { 0 } else { fill.bytes } + copied_bytes;
    log.line(format!(
        "Done: {} written in {:.1} s ({:.1} MB/s)",
        ByteSize(written),
        elapsed.as_secs_f64(),
        mb_per_sec(written, elapsed)
    ));

    let mut instance_results = vec![instance_result(first, &fill_stats, fill_elapsed)];
    for (instance, stats) in &copy_stats {
        instance_results.push(instance_result(instance, stats, copy_elapsed));
    }
    let totals = Totals::Init(InitTotals {
        // On resuming, the records were counted by the interrupted init; this one copied its
        // database.
        resumed: resuming.then_some(true),
        records_per_database: (!resuming).then_some(fill.records),
        database_bytes: fill.bytes,
        fill_seconds: fill_elapsed.as_secs_f64(),
        fill_mb_per_sec: mb_per_sec(fill.bytes, fill_elapsed),
        duplicate_bytes: copied_bytes,
        duplicate_seconds: copy_elapsed.as_secs_f64(),
        duplicate_mb_per_sec: mb_per_sec(copied_bytes, copy_elapsed),
        bytes_written: written,
        seconds: elapsed.as_secs_f64(),
        mb_per_sec: mb_per_sec(written, elapsed),
    });

    let result = TestResult {
        instances: instance_results,
        log_file: Some(log.path().to_path_buf()),
        totals,
        io_engine: Some(options.backend.name().to_string()),
        ..TestResult::new(
            TestKind::Init,
            started_at,
            elapsed.as_secs_f64(),
            Parameters::of_job(job),
        )
    };
    let result_path = out
        .write_result_and_report(&result)
        .map_err(|e| InitError::Results(e.to_string()))?;
    Ok(InitSummary {
        result,
        result_path,
    })
}

fn mb_per_sec(bytes: u64, elapsed: Duration) -> f64 {
    bytes as f64 / 1_000_000.0 / elapsed.as_secs_f64().max(1e-9)
}

fn instance_result(
    instance: &Instance,
    stats: &InstanceStats,
    elapsed: Duration,
) -> InstanceResult {
    InstanceResult {
        name: instance.name.clone(),
        database_path: instance.database_path.clone(),
        log_path: instance.log_path.clone(),
        io: io_results(stats, elapsed),
        figures: InstanceFigures::None,
    }
}

pub(crate) fn partial_path(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_os_string();
    name.push(PARTIAL_SUFFIX);
    PathBuf::from(name)
}

/// Creates the directories (marked as jetproof's), removes jetproof's own leftovers, and with
/// `--recreate` the databases jetproof made earlier.
fn prepare_directories(
    job: &Job,
    instances: &[Instance],
    options: &InitOptions<'_>,
) -> Result<(), InitError> {
    let own_dir = |dir: &Path| {
        target::make_own_dir(dir).map_err(|source| IoError::Path {
            op: "create directory",
            path: dir.to_path_buf(),
            source,
        })
    };
    if job.storage.instance.is_empty() {
        own_dir(&job.storage.data_dir)?;
    }
    for instance in instances {
        for dir in target::instance_dirs(instance) {
            own_dir(&dir)?;
        }
        // A log on a device is laid out anew (`crate::logregion`): what log was there is gone,
        // and the first attach creates the new one in the region.
        if target::is_block_device(&instance.log_path) {
            crate::logregion::format_for_init(job, instance)?;
            // A database on a device then keeps its flush map in the data directory.
            if target::is_block_device(&instance.database_path) {
                own_dir(&crate::raw::flush_map_dir(job, instance))?;
            }
        }
        // check_init_targets (run again under the owner lock) made sure each file removed here
        // is jetproof's by its own content; the log's removal checks once more.
        let partial = partial_path(&instance.database_path);
        if options.backend.exists(&partial) {
            options.backend.remove(&partial)?;
        }
        remove_flush_map(&flush_map_path(&partial), options)?;
        let database = &instance.database_path;
        let is_file = database.symlink_metadata().is_ok_and(|m| m.is_file());
        if options.permissions.recreate && is_file {
            // The old database's log goes first, recognised by the database's identity, and the
            // database after it: a crash between the two leaves the database and what remains
            // of its log, which the next `init --recreate` removes the same way.
            let id = target::database_id(database);
            remove_log_files(job, instance, id, options)?;
            options.backend.remove(database)?;
            remove_flush_map(&flush_map_path(database), options)?;
        } else if !is_file {
            // No database: a log left in its directory belongs to none (a database removed by
            // hand, or an init cut short); its files are known by their own marker.
            remove_log_files(job, instance, None, options)?;
        }
    }
    Ok(())
}

/// Removes a flush map jetproof made (its signature says so); anything else in its place is an
/// error naming it, never removed.
fn remove_flush_map(path: &Path, options: &InitOptions<'_>) -> Result<(), InitError> {
    flushmap::remove_if_ours(options.backend.as_ref(), path)
        .map(|_| ())
        .map_err(|e| InitError::Engine {
            path: path.to_path_buf(),
            message: e.to_string(),
        })
}

/// Renames a database made under its partial name into place: its flush map first, so that
/// a crash in between never leaves the database without the map its pages were written with.
fn rename_into_place(
    partial: &Path,
    to: &Path,
    options: &InitOptions<'_>,
) -> Result<(), InitError> {
    // A map of an earlier database at the target name is ours to replace; anything else stops.
    remove_flush_map(&flush_map_path(to), options)?;
    options
        .backend
        .rename_new(&flush_map_path(partial), &flush_map_path(to))?;
    // Never over something that appeared at the database's name meanwhile.
    options.backend.rename_new(partial, to)?;
    if let Some(parent) = to.parent() {
        options.backend.sync_dir(parent)?;
    }
    Ok(())
}

/// Removes jetproof's log files (generations, the spare, the checkpoint) from the instance's log
/// directory: they belong to a database that is gone, and the new database's first attach
/// creates its own log. Only files whose content says they are jetproof's (of database
/// `database_id`, when known) are removed; every other file is left alone.
fn remove_log_files(
    job: &Job,
    instance: &Instance,
    database_id: Option<u128>,
    options: &InitOptions<'_>,
) -> Result<(), InitError> {
    let file_size = job.log.file_size.bytes();
    let kinds = target::own_log_files(instance, database_id, file_size)?;
    for kind in kinds {
        jetproof_log::owned::remove_owned(
            options.backend.as_ref(),
            &instance.log_path,
            kind,
            database_id,
            Some(file_size),
        )
        .map_err(|e| InitError::Engine {
            path: kind.path(&instance.log_path),
            message: e.to_string(),
        })?;
    }
    if instance.log_path.is_dir() {
        options.backend.sync_dir(&instance.log_path)?;
    }
    Ok(())
}

struct Filled {
    records: u64,
    bytes: u64,
}

/// Creates the first database under its partial name, fills it through the engine to the sized
/// capacity, closes it cleanly and renames it into place.
fn fill_database(
    job: &Job,
    instance: &Instance,
    stats: &Arc<InstanceStats>,
    options: &InitOptions<'_>,
) -> Result<Filled, InitError> {
    let partial = partial_path(&instance.database_path);
    let target_bytes = job.db_size().bytes();
    let engine_error = |e: &dyn std::fmt::Display| InitError::Engine {
        path: partial.clone(),
        message: e.to_string(),
    };
    let page_size = job.storage.page_size.bytes();
    let db_options = DatabaseOptions {
        page_size: page_size as usize,
        // Start small: the bulk loader writes the pages past the initial size itself, and ends
        // the file on an extent boundary (the tail formatted free).
        initial_size_bytes: (16 * page_size).max(INITIAL_SIZE.min(target_bytes)),
        // Small databases grow in small steps, so the file ends close to its target.
        extent_bytes: extent_bytes(target_bytes, page_size),
        cache_min_bytes: job.cache.min_size.bytes(),
        cache_max_bytes: job.cache.max_size.bytes(),
        direct_io: job.storage.direct_io,
        stats: Some(stats.clone()),
        write_back_depth: job.cache.write_back_depth.clamp(1, 1024) as usize,
        ..DatabaseOptions::default()
    };
    let mut database = Database::create(options.backend.as_ref(), &partial, db_options)
        .map_err(|e| engine_error(&e))?;

    options
        .progress
        .phase(&format!("Filling {}", instance.name), target_bytes);
    let mut rng = rand::rngs::StdRng::seed_from_u64(options.seed);
    let record_size = job.workload.record_size.bytes() as usize;
    let mut value = vec![0u8; record_size * 2];
    rng.fill(&mut value[..]);
    let start_bytes = database.used_pages() * page_size;
    // Keys come in ascending order (mailbox by mailbox), so the engine's bulk loader fills the
    // leaves (to the table density, as ESE's sequential loading does) and writes them in large
    // sequential writes instead of inserting record by record.
    let mut loader = database
        .bulk_load()
        .map_err(|e| engine_error(&e))?
        .with_density(job.storage.table_density);
    // Records are mail items: each mailbox of this database gets its share, in key order.
    let mut plan = FillPlan::new(
        mailboxes_per_database(job),
        target_bytes,
        start_bytes,
        record_size as u64 + RECORD_OVERHEAD_GUESS,
    );
    loop {
        if options.stop.load(Ordering::Relaxed) {
            return Err(InitError::interrupted());
        }
        // The database is full when the pages in use reach the target; the file is then at
        // most one extent larger, every page of it formatted.
        let used = loader.used_bytes();
        if plan.records().is_multiple_of(64) {
            options.progress.advance(used.min(target_bytes));
        }
        let Some(key) = plan.next(used) else {
            break;
        };
        // Each mailbox starts a leaf and an owned extent of its own, the rest of the previous
        // mailbox's last extent left free for that mailbox's later splits: Exchange keeps each
        // mailbox in tables of its own (docs/workload.md, "Records are mail items").
        if key.item == 0 {
            loader.end_extent().map_err(|e| engine_error(&e))?;
        }
        // Record sizes vary around the average, as mail items do: half to one and a half.
        let length = rng.random_range(record_size / 2..=record_size * 3 / 2);
        let start = rng.random_range(0..value.len() - length);
        loader
            .append(&key.encode(), &value[start..start + length])
            .map_err(|e| engine_error(&e))?;
    }
    loader.finish().map_err(|e| engine_error(&e))?;
    let records = plan.records();
    database.close().map_err(|e| engine_error(&e))?;
    // Through the backend: a database on a device has its own size, not the device's.
    let bytes = options
        .backend
        .open(&partial, &OpenOptions::read_only().buffered())
        .and_then(|file| file.size())
        .unwrap_or(target_bytes);
    rename_into_place(&partial, &instance.database_path, options)?;
    options.progress.advance(target_bytes);
    Ok(Filled { records, bytes })
}

/// Copies a small file of jetproof's (a flush map) whole, and syncs the copy.
fn copy_small_file(from: &Path, to: &Path, options: &InitOptions<'_>) -> Result<(), InitError> {
    let source = options
        .backend
        .open(from, &OpenOptions::read_only().buffered().no_follow())?;
    let size = source.size()?;
    let mut bytes = vec![0u8; usize::try_from(size).unwrap_or(usize::MAX)];
    source.read_at(&mut bytes, 0, IoClass::FlushMap)?;
    let target = options
        .backend
        .open(to, &OpenOptions::create_new().buffered())?;
    target.write_at(&bytes, 0, IoClass::FlushMap)?;
    target.sync_data(IoClass::FlushMap)?;
    Ok(())
}

/// Copies a closed database file with large sequential direct I/O, under the partial name, then
/// renames it into place. Returns the bytes copied.
fn copy_database(
    job: &Job,
    from: &Path,
    to: &Path,
    stats: &Arc<InstanceStats>,
    options: &InitOptions<'_>,
    progress_base: u64,
) -> Result<u64, InitError> {
    let partial = partial_path(to);
    let direct = job.storage.direct_io;
    let source = MeteredFile::wrap(
        options
            .backend
            .open(from, &OpenOptions::read_only().with_direct(direct))?,
        stats.clone(),
    );
    let target = MeteredFile::wrap(
        options
            .backend
            .open(&partial, &OpenOptions::create_new().with_direct(direct))?,
        stats.clone(),
    );
    let size = source.size()?;
    target.set_size(size)?;
    // Several chunks in flight at once, each copied by its own thread in file order (chunk i by
    // thread i mod COPY_STREAMS): the device sees a sequential stream with a queue depth of
    // COPY_STREAMS, as Jetstress's duplication does, instead of one read, then one write.
    let chunks = size.div_ceil(COPY_CHUNK as u64);
    let copied = AtomicU64::new(0);
    let outcome: Result<(), InitError> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..COPY_STREAMS as u64)
            .map(|stream| {
                let (source, target, copied) = (&source, &target, &copied);
                scope.spawn(move || -> Result<(), InitError> {
                    let mut buffer = AlignedBuf::zeroed(COPY_CHUNK);
                    let mut chunk = stream;
                    while chunk < chunks {
                        if options.stop.load(Ordering::Relaxed) {
                            return Err(InitError::interrupted());
                        }
                        let offset = chunk * COPY_CHUNK as u64;
                        let length = (size - offset).min(COPY_CHUNK as u64) as usize;
                        // Database files are whole pages, so every chunk stays block-aligned.
                        let data = &mut buffer[..length];
                        source.read_at(data, offset, IoClass::DbRead)?;
                        target.write_at(data, offset, IoClass::DbWrite)?;
                        let done = copied.fetch_add(length as u64, Ordering::Relaxed);
                        options
                            .progress
                            .advance(progress_base + done + length as u64);
                        chunk += COPY_STREAMS as u64;
                    }
                    Ok(())
                })
            })
            .collect();
        workers.into_iter().try_for_each(|w| {
            w.join()
                .unwrap_or(Err(InitError::Results("a copy thread panicked".into())))
        })
    });
    outcome?;
    target.sync_data(IoClass::DbWrite)?;
    drop(target);
    // The copy is the same database, page for page: its flush map is the source's.
    copy_small_file(&flush_map_path(from), &flush_map_path(&partial), options)?;
    rename_into_place(&partial, to, options)?;
    Ok(size)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_interruption_names_partial_files_only_for_databases_in_files() {
        let files = interrupted_message(&[], true);
        assert!(files.contains(".partial"), "{files}");
        assert!(!files.contains("--recreate"), "{files}");
        let device = interrupted_message(&[PathBuf::from("/dev/loop3")], false);
        assert!(!device.contains(".partial"), "{device}");
        assert!(device.contains("/dev/loop3"), "{device}");
        assert!(device.contains("init --recreate"), "{device}");
        let both = interrupted_message(&[PathBuf::from("/dev/loop3")], true);
        assert!(
            both.contains(".partial") && both.contains("init --recreate"),
            "{both}"
        );
    }
}
