//! The init procedure: create the job's databases and fill them to size.
//!
//! Every database is made by the engine — records appended in key order through the engine's
//! bulk loader (leaves filled to the table density, interior levels, space maps and header, all
//! written with large sequential writes) until the file reaches the sized capacity — each from
//! a content stream of its own ([`jetproof_workload::content`]), so no block of one database
//! equals a block of another and the data compresses as `workload.compression_ratio` says
//! (issue 33). Until then the first database was filled and the others were block-for-block
//! copies of it, which an array that deduplicates stores for free. The databases are filled at
//! once ([`MAX_FILLS_AT_ONCE`]): a fill spends most of its time waiting on its writes. What each
//! fill writes is measured as it is written ([`crate::reduction`]): the result's
//! `data_reduction`.
//!
//! Each database is built under a `.partial` name and renamed only when complete and closed
//! cleanly, so an interrupted init leaves nothing a later command would mistake for a finished
//! database; the next init removes the leftovers (they are jetproof's own).
//!
//! Every check of the targets (foreign files, devices, free space) runs before the first write:
//! see [`jetproof_storage::target`].
//!
//! **An interrupted init is finished by the next one.** Interrupted, it leaves the databases
//! it completed in place and the others under their `.partial` names. The next `init` (without
//! `--recreate`) removes those leftovers — only files it can tell as its own by their content
//! (`target::partial_is_ours`) — and makes what is missing: the complete databases
//! ([`is_resumable`]: closed cleanly, of the job's page size and size) are kept (and measured by
//! reading them). Anything else that exists is refused as before (`--recreate`).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use jetproof_engine::flushmap;
use jetproof_engine::{Database, DatabaseOptions, flush_map_path};
use jetproof_io::meter::InstanceStats;
use jetproof_io::{AlignedBuf, IoBackend, IoClass, IoError, OpenOptions};
use jetproof_job::{ByteSize, Instance, Job};
use jetproof_results::sections::InitTotals;
use jetproof_results::{
    InstanceFigures, InstanceResult, OutDir, Parameters, TestKind, TestLog, TestResult, Totals,
    io_results,
};
use jetproof_workload::content::{Attachments, Content};
use jetproof_workload::keys::FillPlan;
use rand::{Rng, SeedableRng};

use jetproof_storage::BadInput;
use jetproof_storage::target::{self, PARTIAL_SUFFIX, Permissions, partial_path};

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

use jetproof_storage::database::extent_bytes;

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
    let devices: Vec<PathBuf> = jetproof_storage::raw::device_databases(job)
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
    jetproof_storage::host::check_new_dirs_writable(job)?;
    target::check_init_targets(job, permissions)?;
    let instances = job.instances();
    if !permissions.recreate && is_resumable(&instances) {
        for instance in instances.iter().filter(|i| i.database_path.is_file()) {
            check_resumable(job, instance)?;
        }
    }
    jetproof_storage::host::check_job_fits(job)?;
    jetproof_storage::host::check_new_targets(job)?;
    Ok(())
}

pub use jetproof_storage::target::is_resumable;

/// Checks that a database a resumed init keeps is one the job would have made: closed cleanly
/// (init renames it into place only then), of the job's page size, and of the job's size (the
/// fill ends at most one extent past it).
fn check_resumable(job: &Job, first: &Instance) -> Result<(), BadInput> {
    check_complete(
        job,
        first,
        "exists and other databases of the job do not, as an interrupted init leaves them, but",
    )
}

/// Checks that the database of `instance` is one the job would have made (see
/// [`check_resumable`]); `context` opens the refusal after the path.
fn check_complete(job: &Job, first: &Instance, context: &str) -> Result<(), BadInput> {
    let refuse = |why: String| {
        jetproof_storage::bad(
            "--recreate",
            format!(
                "{} {context} {why}; pass --recreate to make every database anew",
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

/// `init --if-missing`: are all the job's databases there already, each one the job would have
/// made (closed cleanly, of the job's page size and size)? `Ok(false)` when one or more are
/// missing (init then makes those and keeps the others, as it finishes an interrupted init); a
/// database that is there but is not one the job would have made is refused (exit 2, with why
/// and `--recreate`), as a resumed init refuses it. A database on a block device is there when
/// the device holds a jetproof database header; a device without one is missing.
pub fn all_present(job: &Job) -> Result<bool, InitError> {
    let instances = job.instances();
    let mut present = 0;
    for instance in &instances {
        let path = &instance.database_path;
        let there = if jetproof_storage::marks::is_block_device(path) {
            holds_database_header(path)
        } else {
            path.symlink_metadata().is_ok()
        };
        if there {
            check_complete(job, instance, "exists (--if-missing keeps it) but")?;
            present += 1;
        }
    }
    Ok(present == instances.len())
}

/// Does the device at `path` start with a jetproof database header?
fn holds_database_header(path: &Path) -> bool {
    let backend = jetproof_io::std_backend::StdBackend::new();
    backend
        .open(path, &OpenOptions::read_only().buffered())
        .ok()
        .is_some_and(|file| jetproof_engine::DbHeader::read(file.as_ref()).is_ok())
}

/// Creates and fills the job's databases. One that fails after its checks (a full disk, a
/// write error, an interrupt) still writes `result.json`: verdict fail, the error as its reason,
/// as every other test does (issue 34, point 7).
pub fn init(
    job: &Job,
    out: &OutDir,
    log: &TestLog,
    options: &InitOptions<'_>,
) -> Result<InitSummary, InitError> {
    preflight(job, &options.permissions)?;
    let started_at = jetproof_results::now_rfc3339();
    let started = Instant::now();
    let outcome = make_and_fill(job, out, log, options, started_at.clone(), started);
    if let Err(error) = &outcome
        && !matches!(error, InitError::BadInput(_))
    {
        log.line(format!("Init failed: {error}"));
        let mut result = TestResult {
            instances: job
                .instances()
                .iter()
                .map(|i| instance_result(i, &InstanceStats::new(i.name.clone()), Duration::ZERO))
                .collect(),
            log_file: Some(log.path().to_path_buf()),
            totals: Totals::Init(InitTotals::default()),
            io_engine: Some(options.backend.name().to_string()),
            interrupted: matches!(error, InitError::Interrupted { .. }),
            ..TestResult::new(
                TestKind::Init,
                started_at,
                started.elapsed().as_secs_f64(),
                Parameters::of_job(job),
            )
        };
        result.set_reasons(vec![format!("init failed: {error}")]);
        // The error is what the user must see; a result that cannot be written is said in the
        // test log beside it.
        if let Err(e) = out.write_result_and_report(&result) {
            log.line(format!(
                "The failed init's result.json cannot be written: {e}"
            ));
        }
    }
    outcome
}

fn make_and_fill(
    job: &Job,
    out: &OutDir,
    log: &TestLog,
    options: &InitOptions<'_>,
    started_at: String,
    started: Instant,
) -> Result<InitSummary, InitError> {
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

    if instances.is_empty() {
        return Err(InitError::BadInput(BadInput {
            field: "storage.databases".into(),
            message: "the job has no database instances".into(),
        }));
    }
    if resuming {
        log.line(format!(
            "Resuming an interrupted init: {} complete database(s) kept ({}); making the {} missing one(s)",
            kept.iter().filter(|k| **k).count(),
            instances
                .iter()
                .zip(&kept)
                .filter(|(_, k)| **k)
                .map(|(i, _)| i.name.as_str())
                .collect::<Vec<_>>()
                .join(", "),
            kept.iter().filter(|k| !**k).count()
        ));
    }

    // Every database is made by the engine, each from a content stream of its own, so no block
    // of one equals a block of another (issue 33); they are filled at once, since a fill waits
    // on its writes far more than it computes (`docs/design.md`, "Bulk load").
    let to_fill: Vec<(usize, &Instance)> = instances
        .iter()
        .enumerate()
        .filter(|(index, _)| !kept[*index])
        .collect();
    let job_bytes = job.db_size().bytes() * instances.len() as u64;
    log.line(format!(
        "Creating and filling {} database(s), {} at a time, through the engine (leaves filled to the table density, {}%; content compressing {:.2}:1, no block repeated)",
        to_fill.len(),
        fills_at_once(to_fill.len()),
        job.storage.table_density,
        job.workload.compression_ratio,
    ));
    let fill_started = Instant::now();
    let progress = SharedProgress::new(
        options.progress,
        job.db_size().bytes() * to_fill.len() as u64,
    );
    let filled =
        fill_all(job, &to_fill, job_bytes, options, &progress).map_err(|e| e.naming(job))?;
    let fill_elapsed = fill_started.elapsed();
    let filled_bytes: u64 = filled.iter().map(|f| f.bytes).sum();
    for fill in &filled {
        log.line(format!(
            "Filled {}: {} records, {} written in {:.1} s ({:.1} MB/s)",
            fill.instance.name,
            fill.records,
            ByteSize(fill.bytes),
            fill.elapsed.as_secs_f64(),
            mb_per_sec(fill.bytes, fill.elapsed)
        ));
    }
    options.progress.finish();

    // The kept databases (a resumed init) are measured by reading them back.
    let mut measured = Vec::with_capacity(instances.len());
    for (index, instance) in instances.iter().enumerate() {
        match filled.iter().position(|f| f.index == index) {
            Some(at) => measured.push(crate::reduction::Measured {
                instance: instance.name.clone(),
                figures: filled[at].reduction.0.clone(),
                kept: filled[at].reduction.1.clone(),
            }),
            None => {
                let (figures, kept) = measure_kept(job, instance, job_bytes, options)?;
                measured.push(crate::reduction::Measured {
                    instance: instance.name.clone(),
                    figures,
                    kept,
                });
            }
        }
    }
    let data_reduction = crate::reduction::combine(crate::reduction::setting_of(job), measured);
    log.line(data_reduction.summary());

    let elapsed = started.elapsed();
    log.line(format!(
        "Done: {} written in {:.1} s ({:.1} MB/s)",
        ByteSize(filled_bytes),
        elapsed.as_secs_f64(),
        mb_per_sec(filled_bytes, elapsed)
    ));

    let instance_results = instances
        .iter()
        .enumerate()
        .map(
            |(index, instance)| match filled.iter().find(|f| f.index == index) {
                Some(fill) => instance_result(instance, &fill.stats, fill.elapsed),
                None => instance_result(
                    instance,
                    &InstanceStats::new(instance.name.clone()),
                    Duration::ZERO,
                ),
            },
        )
        .collect();
    let totals = Totals::Init(InitTotals {
        // On resuming, some databases were made by the interrupted init.
        resumed: resuming.then_some(true),
        records_per_database: filled.first().map(|f| f.records),
        database_bytes: filled.first().map_or(0, |f| f.bytes),
        fill_seconds: fill_elapsed.as_secs_f64(),
        fill_mb_per_sec: mb_per_sec(filled_bytes, fill_elapsed),
        // Nothing is copied since issue 33: every database is filled.
        duplicate_bytes: 0,
        duplicate_seconds: 0.0,
        duplicate_mb_per_sec: 0.0,
        bytes_written: filled_bytes,
        seconds: elapsed.as_secs_f64(),
        mb_per_sec: mb_per_sec(filled_bytes, elapsed),
    });

    let result = TestResult {
        instances: instance_results,
        log_file: Some(log.path().to_path_buf()),
        totals,
        io_engine: Some(options.backend.name().to_string()),
        data_reduction: Some(data_reduction),
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
        // A log on a device is laid out anew (`jetproof_storage::logregion`): what log was there is gone,
        // and the first attach creates the new one in the region.
        if target::is_block_device(&instance.log_path) {
            jetproof_storage::logregion::format_for_init(job, instance)?;
            // A database on a device then keeps its flush map in the data directory.
            if target::is_block_device(&instance.database_path) {
                own_dir(&jetproof_storage::raw::flush_map_dir(job, instance))?;
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
    let files = target::own_log_files(instance, database_id, file_size)?;
    for (kind, _) in files {
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

/// What filling one database did.
struct Filled<'a> {
    /// Its position among the job's instances.
    index: usize,
    instance: &'a Instance,
    records: u64,
    bytes: u64,
    elapsed: Duration,
    stats: Arc<InstanceStats>,
    /// Its data reduction figures and kept content hashes (`crate::reduction`).
    reduction: (jetproof_results::reduction::ReductionFigures, Vec<u64>),
}

/// Databases filled at once, at most: each fill is a loader thread and a writer thread waiting
/// mostly on its writes (about a second of CPU per 2 GB), so a few at once keep the device
/// busier than one; more would only split the same bandwidth.
pub const MAX_FILLS_AT_ONCE: usize = 4;

fn fills_at_once(databases: usize) -> usize {
    databases.clamp(1, MAX_FILLS_AT_ONCE)
}

/// One progress bar over several fills at once: each fill reports its own bytes done, this adds
/// them up.
struct SharedProgress<'a> {
    progress: &'a dyn Progress,
    done: AtomicU64,
}

impl<'a> SharedProgress<'a> {
    fn new(progress: &'a dyn Progress, total_bytes: u64) -> SharedProgress<'a> {
        progress.phase("Filling databases", total_bytes);
        SharedProgress {
            progress,
            done: AtomicU64::new(0),
        }
    }

    fn add(&self, bytes: u64) {
        let done = self.done.fetch_add(bytes, Ordering::Relaxed) + bytes;
        self.progress.advance(done);
    }
}

/// Fills the databases `to_fill` (index among the job's instances, instance), up to
/// [`MAX_FILLS_AT_ONCE`] at a time; the first error stops the others (as an interruption).
fn fill_all<'a>(
    job: &Job,
    to_fill: &[(usize, &'a Instance)],
    job_bytes: u64,
    options: &InitOptions<'_>,
    progress: &SharedProgress<'_>,
) -> Result<Vec<Filled<'a>>, InitError> {
    let next = AtomicU64::new(0);
    let failed = AtomicBool::new(false);
    let outcomes: Vec<Result<Vec<Filled<'a>>, InitError>> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..fills_at_once(to_fill.len()))
            .map(|_| {
                let (next, failed) = (&next, &failed);
                scope.spawn(move || {
                    let mut done = Vec::new();
                    loop {
                        let at = next.fetch_add(1, Ordering::Relaxed) as usize;
                        let Some(&(index, instance)) = to_fill.get(at) else {
                            return Ok(done);
                        };
                        if failed.load(Ordering::Relaxed) {
                            return Ok(done);
                        }
                        match fill_database(
                            job, index, instance, job_bytes, options, progress, failed,
                        ) {
                            Ok(fill) => done.push(fill),
                            Err(e) => {
                                failed.store(true, Ordering::Relaxed);
                                return Err(e);
                            }
                        }
                    }
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|w| {
                w.join()
                    .unwrap_or(Err(InitError::Results("a fill thread panicked".into())))
            })
            .collect()
    });
    let mut filled = Vec::new();
    let mut first_error = None;
    for outcome in outcomes {
        match outcome {
            Ok(done) => filled.extend(done),
            // A fill stopped because another failed reports as interrupted; the real error wins.
            Err(InitError::Interrupted { .. }) if first_error.is_some() => {}
            Err(e @ InitError::Interrupted { .. }) => {
                first_error.get_or_insert(e);
            }
            Err(e) => {
                if matches!(first_error, None | Some(InitError::Interrupted { .. })) {
                    first_error = Some(e);
                }
            }
        }
    }
    if let Some(e) = first_error {
        return Err(e);
    }
    filled.sort_by_key(|f| f.index);
    Ok(filled)
}

/// The seed of the job's content that `jetproof init` (and after it every run, for the space its
/// engine frees and the pages it grows by: [`crate::page_content`]) makes the databases' content
/// from.
pub const CONTENT_SEED: u64 = 0x6a65_7470_726f_6f66;

/// The seed of database `index`'s content: each database a stream of its own.
pub(crate) fn content_seed(seed: u64, index: usize) -> u64 {
    seed ^ (index as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

/// Creates database `index` under its partial name, fills it through the engine to the sized
/// capacity with content of the job's setting, measures what it writes, closes it cleanly and
/// renames it into place.
fn fill_database<'a>(
    job: &Job,
    index: usize,
    instance: &'a Instance,
    job_bytes: u64,
    options: &InitOptions<'_>,
    progress: &SharedProgress<'_>,
    others_failed: &AtomicBool,
) -> Result<Filled<'a>, InitError> {
    crate::test_hooks::panic_point("init");
    let started = Instant::now();
    let stats = InstanceStats::new(instance.name.clone());
    let partial = partial_path(&instance.database_path);
    let target_bytes = job.db_size().bytes();
    // A database on a device is made in place: its partial name exists only inside the raw
    // backend, and a message names the device.
    let shown = if jetproof_storage::target::is_block_device(&instance.database_path) {
        instance.database_path.clone()
    } else {
        partial.clone()
    };
    let engine_error = |e: &dyn std::fmt::Display| InitError::Engine {
        path: shown.clone(),
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
        stats: Some(stats.clone()),
        ..crate::settings::Cache::of(job).database_options(job)
    };
    let mut database = Database::create(options.backend.as_ref(), &partial, db_options)
        .map_err(|e| engine_error(&e))?;

    let seed = content_seed(options.seed, index);
    let ratio = job.workload.compression_ratio;
    let unit = job.workload.dedup_unit.bytes() as usize;
    let meter = crate::reduction::Meter::new(unit, target_bytes, job_bytes)
        .map_err(|e| InitError::Results(format!("the zstd compressor: {e}")))?;
    let meter = Arc::new(std::sync::Mutex::new(meter));
    let observer = {
        let meter = meter.clone();
        Box::new(move |offset: u64, bytes: &[u8]| {
            if let Ok(mut meter) = meter.lock() {
                meter.observe(offset, bytes);
            }
        })
    };
    // Record values and the free space between them come from two streams of the same
    // setting (one for each, so neither depends on how the other is cut).
    let mut content = Content::new(ratio, seed);
    let mut free_space = Content::new(ratio, !seed);
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let record_size = job.workload.record_size.bytes() as usize;
    let mut value = vec![0u8; record_size * 3 / 2 + 1];
    let start_bytes = database.used_pages() * page_size;
    // Keys come in ascending order (mailbox by mailbox), so the engine's bulk loader fills the
    // leaves (to the table density, as ESE's sequential loading does) and writes them in large
    // sequential writes instead of inserting record by record.
    let mut loader = database
        .bulk_load()
        .map_err(|e| engine_error(&e))?
        .with_density(job.storage.table_density)
        .with_filler(Box::new(move |bytes: &mut [u8]| free_space.fill(bytes)))
        .with_observer(observer);
    // A dedup ratio above 1: long-value pages (attachments, a share of them copies from the
    // job's pool) between the leaves, a share of the pages that makes the blocks that repeat
    // the setting's (docs/design.md, "Content and data reduction").
    let (long_value_share, pool) = crate::page_content::long_value_layout(job);
    if long_value_share > 0.0 {
        let mut attachments = Attachments::new(ratio, options.seed, seed, pool);
        loader = loader.with_long_values(
            long_value_share,
            Box::new(move |body: &mut [u8]| attachments.fill_page(body)),
        );
    }
    // Records are mail items: each mailbox of this database gets its share, in key order.
    let guess = (record_size as u64 + RECORD_OVERHEAD_GUESS) as f64 / (1.0 - long_value_share);
    let mut plan = FillPlan::new(
        mailboxes_per_database(job),
        target_bytes,
        start_bytes,
        guess as u64,
    );
    let mut reported = 0u64;
    loop {
        if options.stop.load(Ordering::Relaxed) || others_failed.load(Ordering::Relaxed) {
            return Err(InitError::interrupted());
        }
        // The database is full when the pages in use reach the target; the file is then at
        // most one extent larger, every page of it formatted.
        let used = loader.used_bytes();
        if plan.records().is_multiple_of(64) {
            let now = used.min(target_bytes);
            progress.add(now.saturating_sub(reported));
            reported = reported.max(now);
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
        let Some(value) = value.get_mut(..length) else {
            break;
        };
        content.fill(value);
        loader
            .append(&key.encode(), value)
            .map_err(|e| engine_error(&e))?;
    }
    loader.finish().map_err(|e| engine_error(&e))?;
    let records = plan.records();
    database.close().map_err(|e| engine_error(&e))?;
    // Through the backend: a database on a device has its own size, not the device's.
    let file = options
        .backend
        .open(&partial, &OpenOptions::read_only().buffered())?;
    let bytes = file.size().unwrap_or(target_bytes);
    // The loader showed the meter every page but the two header pages, which the close wrote.
    let mut meter = Arc::try_unwrap(meter)
        .ok()
        .and_then(|m| m.into_inner().ok())
        .ok_or_else(|| InitError::Results("the data reduction meter is still in use".into()))?;
    let mut headers = vec![0u8; 2 * page_size as usize];
    file.read_at(&mut headers, 0, IoClass::DbRead)?;
    meter.observe(0, &headers);
    drop(file);
    let reduction = meter.finish(bytes / unit as u64);
    rename_into_place(&partial, &instance.database_path, options)?;
    progress.add(target_bytes.saturating_sub(reported));
    Ok(Filled {
        index,
        instance,
        records,
        bytes,
        elapsed: started.elapsed(),
        stats,
        reduction,
    })
}

/// Measures a database an interrupted init completed (kept by a resumed one) by reading it.
fn measure_kept(
    job: &Job,
    instance: &Instance,
    job_bytes: u64,
    options: &InitOptions<'_>,
) -> Result<(jetproof_results::reduction::ReductionFigures, Vec<u64>), InitError> {
    let unit = job.workload.dedup_unit.bytes() as usize;
    let file = options.backend.open(
        &instance.database_path,
        &OpenOptions::read_only().with_direct(job.storage.direct_io),
    )?;
    let size = file.size()?;
    let mut meter = crate::reduction::Meter::new(unit, size, job_bytes)
        .map_err(|e| InitError::Results(format!("the zstd compressor: {e}")))?;
    let mut buffer = AlignedBuf::zeroed(MEASURE_READ_BYTES);
    let mut offset = 0u64;
    while offset < size {
        if options.stop.load(Ordering::Relaxed) {
            return Err(InitError::interrupted());
        }
        let length = (size - offset).min(MEASURE_READ_BYTES as u64) as usize;
        let data = &mut buffer[..length];
        file.read_at(data, offset, IoClass::DbRead)?;
        meter.observe(offset, data);
        offset += length as u64;
    }
    Ok(meter.finish(size / unit as u64))
}

/// Read size of [`measure_kept`]: database files are whole pages, so every read stays aligned.
const MEASURE_READ_BYTES: usize = 4 << 20;

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
