//! One run sequence for every test of `jetproof run` (performance, stress, backup, soft
//! recovery): the steps around a test, in one audited order, so that "refused before any I/O"
//! holds by construction and not because each command calls the checks in the right order.
//!
//! The order ([`run`]):
//!
//! 1. the request's and the job's checks, reading nothing but the job and `/proc`
//!    (`check_job`, the job fits this host, `--log-files 0` refused);
//! 2. [`Front::checked`]: the front's own checks before any I/O (the CLI binds `--metrics-listen`);
//! 3. the I/O engine (`storage.io_engine`, "auto" falling back to std is said);
//! 4. databases that do not exist yet are initialised first ([`Front::init`], which holds init's
//!    owner lock); backup never initialises, it reads what exists;
//! 5. otherwise the host checks before the lock, then the owner lock: exclusive, or shared for
//!    backup's reads, taken before any header is read;
//! 6. the test's preflight under the lock (files, headers, directories), and the memory warning;
//! 7. the output folder, what a panic writes there ([`Front::out_ready`]), the test log with the
//!    I/O engine and the owner lock named;
//! 8. the test itself, watched by the front's live view ([`Front::watch`]).
//!
//! The front (the command line) maps its arguments to a [`Request`] and the [`Finished`] result or
//! the [`Failure`] to an exit code, once.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::SystemTime;

use jetproof_job::{ByteSize, Job};
use jetproof_results::{OutDir, TestKind, TestLog, TestResult};
use jetproof_storage::backend::SelectedBackend;
use jetproof_storage::lock::{self, OwnerLock};
use jetproof_storage::{BadInput, bad};

use crate::backup::{BackupError, BackupOptions};
use crate::live::LiveView;
use crate::run::{RunError, RunOptions};

/// The tests of `jetproof run`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Test {
    Performance,
    Stress,
    Backup,
    SoftRecovery,
}

impl Test {
    /// The kind its results are written as.
    pub fn kind(self) -> TestKind {
        match self {
            Test::Performance => TestKind::Performance,
            Test::Stress => TestKind::Stress,
            Test::Backup => TestKind::Backup,
            Test::SoftRecovery => TestKind::Recovery,
        }
    }

    /// The command as the owner lock names it: "run --test performance".
    pub fn command(self) -> String {
        let name = match self {
            Test::Performance => "performance",
            Test::Stress => "stress",
            Test::Backup => "backup",
            Test::SoftRecovery => "soft-recovery",
        };
        format!("run --test {name}")
    }

    /// Seed of the sessions' random choices.
    fn seed(self) -> u64 {
        match self {
            Test::SoftRecovery => 0x6a70_7275_6e00_0002,
            _ => 0x6a70_7275_6e00_0001,
        }
    }
}

/// What the command asks of a run, beyond the job.
#[derive(Clone, Debug)]
pub struct Request {
    pub test: Test,
    /// Results directory (None: `./jetproof-results/TEST-TIME/`).
    pub out: Option<PathBuf>,
    /// Backup: also write a verified copy of each database here.
    pub to: Option<PathBuf>,
    /// Soft recovery: log generations per instance (None: `run.recovery_log_files`).
    pub log_files: Option<u32>,
    /// `--start-at` (`crate::start`).
    pub start_at: Option<SystemTime>,
    /// `--db-size`, said to change nothing when the databases exist already.
    pub db_size: Option<ByteSize>,
}

/// How the test is watched: the live view (performance, stress, soft recovery) and backup's
/// progress (bytes read so far, bytes to read).
pub struct View<'a> {
    pub live: Option<&'a dyn LiveView>,
    pub progress: &'a (dyn Fn(u64, u64) + Sync),
}

/// The command's side of the sequence: how it talks to the user. It decides nothing of the
/// order.
pub trait Front {
    /// The front's own failure (its init, its listener).
    type Error;
    /// A line for the user on stderr, without the "jetproof: " the front puts before it.
    fn say(&self, line: &str);
    /// The checks passed and nothing was done yet: the front's own checks before any I/O.
    fn checked(&self, test: Test) -> Result<(), Self::Error>;
    /// Initialises the job's databases, none of which exists yet, returning init's owner lock
    /// (exclusive on every instance), which the run keeps.
    fn init(&self, job: &Job, test: Test) -> Result<OwnerLock, Self::Error>;
    /// The output folder is ready: what a panic writes there.
    fn out_ready(&self, out: &OutDir, kind: TestKind, job: &Job);
    /// The run's stop flag (Ctrl-C: the test ends early and keeps what it measured).
    fn stop(&self) -> Arc<AtomicBool>;
    /// Runs the test under the front's live view, finishing the view after it.
    fn watch<R>(&self, test: Test, job: &Job, run: impl FnOnce(View<'_>) -> R) -> R;
}

/// Why a run did not finish. `BadInput`: nothing was done (exit 2); the others stopped it.
#[derive(Debug)]
pub enum Failure<E> {
    BadInput(BadInput),
    Front(E),
    /// The owner lock was not taken (bad input: nothing was done).
    Lock(lock::LockError),
    /// The results directory cannot be used (bad input: nothing was done).
    OutDir(jetproof_results::OutDirError),
    /// The test log could not be created.
    TestLog(std::io::Error),
    Run(RunError),
    Backup(BackupError),
}

impl<E> From<RunError> for Failure<E> {
    fn from(error: RunError) -> Self {
        match error {
            RunError::BadInput(bad) => Failure::BadInput(bad),
            other => Failure::Run(other),
        }
    }
}

impl<E> From<BackupError> for Failure<E> {
    fn from(error: BackupError) -> Self {
        match error {
            BackupError::BadInput(bad) => Failure::BadInput(bad),
            other => Failure::Backup(other),
        }
    }
}

impl<E> From<BadInput> for Failure<E> {
    fn from(error: BadInput) -> Self {
        Failure::BadInput(error)
    }
}

/// A test that ran to its end (its verdict may still be fail).
pub struct Finished {
    pub result: TestResult,
    pub out: OutDir,
    /// The test log's path.
    pub log: PathBuf,
    /// The owner lock, held until the command ends.
    pub owner: OwnerLock,
}

impl Finished {
    /// True when a storage error stopped an instance (exit 3 whatever the verdict).
    pub fn storage_error(&self) -> bool {
        self.result
            .instances
            .iter()
            .any(|i| i.figures.storage_error().is_some())
    }
}

/// Runs `request.test` on `job` through the steps of the module's order.
pub fn run<F: Front>(
    job: &Job,
    request: &Request,
    front: &F,
) -> Result<Finished, Failure<F::Error>> {
    let test = request.test;
    let log_files = check(job, request)?;
    front.checked(test).map_err(Failure::Front)?;
    let selected = select_backend(job, front)?;
    let from_init = if test == Test::Backup {
        None
    } else if crate::performance::databases_exist(job) {
        warn_db_size(request, front);
        None
    } else {
        jetproof_storage::database::refuse_lost_databases(job)?;
        front.say("the databases do not exist yet; initialising them first (jetproof init)");
        Some(front.init(job, test).map_err(Failure::Front)?)
    };
    let owner = match from_init {
        Some(owner) => owner,
        None => owner_lock(job, test)?,
    };
    match test {
        Test::Performance | Test::Stress => crate::performance::preflight(job)?,
        Test::SoftRecovery => crate::soft_recovery::preflight(job, log_files)?,
        Test::Backup => crate::backup::preflight(job, request.to.as_deref())?,
    }
    if test != Test::Backup {
        warn_memory(job, front);
    }
    let out = OutDir::prepare(request.out.as_deref(), test.kind()).map_err(Failure::OutDir)?;
    front.out_ready(&out, test.kind(), job);
    let log = TestLog::create(&out.file("test.log"), false).map_err(Failure::TestLog)?;
    log_engine(&log, &selected, job);
    log_owner_lock(&log, &owner);
    let result = test_itself(job, request, log_files, &selected, &out, &log, front)?;
    let log = log.path().to_path_buf();
    Ok(Finished {
        result,
        out,
        log,
        owner,
    })
}

/// Step 1: what the request and the job need, read from the job and `/proc` only. Returns the
/// soft-recovery test's log files.
fn check<E>(job: &Job, request: &Request) -> Result<u32, Failure<E>> {
    let log_files = request.log_files.unwrap_or(job.run.recovery_log_files);
    match request.test {
        Test::Performance | Test::Stress => crate::performance::check_job(job)?,
        Test::SoftRecovery => {
            if request.log_files == Some(0) {
                return Err(bad(
                    "--log-files 0",
                    "soft recovery replays the log files it generates; give at least 1 (ESRP uses 500)",
                )
                .into());
            }
            jetproof_storage::host::check_job_fits(job)?;
        }
        Test::Backup => {}
    }
    Ok(log_files)
}

/// Step 3: the I/O engine the job chose, before any I/O: an engine the kernel refuses is bad
/// input naming the key and the fix. With "auto" falling back to std, says so.
pub fn select_backend<F: Front>(job: &Job, front: &F) -> Result<SelectedBackend, BadInput> {
    let selected = jetproof_storage::backend::select_backend(job)?;
    if let Some(why) = &selected.fallback {
        front.say(&format!("storage.io_engine = \"auto\": {why}"));
    }
    Ok(selected)
}

/// `--db-size` sizes databases that `run` creates; on databases that exist it changes nothing,
/// which is said rather than passed over.
fn warn_db_size<F: Front>(request: &Request, front: &F) {
    if let Some(size) = request.db_size {
        front.say(&format!(
            "--db-size {size}: the databases exist already, so it changes nothing \
             (it sizes databases that run or init create; `jetproof init --recreate` makes them \
             anew at that size)"
        ));
    }
}

/// Step 5: the run's owner lock, exclusive (every test but backup writes) or shared for
/// backup's reads. Devices where database files are expected, and files a writer cannot write,
/// are bad input before the lock makes its files beside them.
fn owner_lock<E>(job: &Job, test: Test) -> Result<OwnerLock, Failure<E>> {
    jetproof_storage::host::check_before_lock(job, test != Test::Backup)?;
    let access = if test == Test::Backup {
        lock::Access::Shared
    } else {
        lock::Access::Exclusive
    };
    lock::lock_instances(job, access, &test.command()).map_err(Failure::Lock)
}

/// Says when the job's caches fit in this machine's memory but not in what is available now (a
/// job that cannot fit at all is refused by the checks).
pub fn warn_memory<F: Front>(job: &Job, front: &F) {
    use jetproof_storage::host::{HostMemory, memory_warning};
    if let Some(warning) = HostMemory::read().and_then(|memory| memory_warning(job, &memory)) {
        front.say(&warning);
    }
}

/// The test-log lines naming the owner locks held (and those a reader could not take on a
/// read-only file system).
pub fn log_owner_lock(log: &TestLog, lock: &OwnerLock) {
    let paths = lock.paths();
    if !paths.is_empty() {
        log.line(format!(
            "Owner lock held for the whole command: {}",
            paths
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    for note in &lock.notes {
        log.line(note);
    }
}

/// The test-log lines naming the I/O engine in use (and why, when "auto" fell back to std), the
/// CRC-32C implementation the process chose (`jetproof_io::crc`), and the open-file limit the
/// run has (raised at start to the hard limit, `jetproof_io::limits`).
pub fn log_engine(log: &TestLog, selected: &SelectedBackend, job: &Job) {
    log.line(selected.log_line(job));
    // CPU per I/O depends on it by a few µs per page on fast storage (`jetproof_io::crc`).
    log.line(format!(
        "Checksums: CRC-32C by {} (the faster of crc-fast and crc32c on this CPU, timed at start)",
        jetproof_io::crc::implementation()
    ));
    if let Ok((soft, hard)) = jetproof_io::limits::open_file_limits() {
        log.line(format!(
            "Open files: limit {} (hard limit {})",
            jetproof_io::limits::shown(soft),
            jetproof_io::limits::shown(hard)
        ));
    }
}

/// Step 8: the test, watched by the front.
fn test_itself<F: Front>(
    job: &Job,
    request: &Request,
    log_files: u32,
    selected: &SelectedBackend,
    out: &OutDir,
    log: &TestLog,
    front: &F,
) -> Result<TestResult, Failure<F::Error>> {
    let test = request.test;
    let stop = front.stop();
    match test {
        Test::Performance | Test::Stress => {
            let stress = test == Test::Stress;
            let duration = if stress {
                job.run.stress_duration
            } else {
                job.run.duration
            };
            front.say(&format!(
                "{} test, {duration} measured after the cache is warm; test log: {}",
                test.kind().name(),
                log.path().display()
            ));
        }
        Test::SoftRecovery => front.say(&format!(
            "soft-recovery test, {log_files} log file(s) per instance, then an unclean stop and replay; test log: {}",
            log.path().display()
        )),
        Test::Backup => {}
    }
    front.watch(test, job, |view| {
        let options = RunOptions {
            backend: selected.backend.clone(),
            stop: &stop,
            seed: test.seed(),
            start_at: request.start_at,
            live: view.live,
        };
        Ok(match test {
            Test::Performance | Test::Stress => {
                let stress = test == Test::Stress;
                let checksum_after = if stress {
                    job.run.checksum_after_stress
                } else {
                    job.run.checksum_after_performance
                };
                if checksum_after {
                    crate::performance::with_checksum(job, stress, out, log, &options)?
                } else {
                    crate::performance::performance(job, stress, out, log, &options)?
                }
            }
            Test::SoftRecovery => {
                crate::soft_recovery::soft_recovery(job, log_files, out, log, &options)?
            }
            Test::Backup => {
                let backup = BackupOptions {
                    backend: selected.backend.clone(),
                    to: request.to.clone(),
                    start_at: request.start_at,
                    stop: &stop,
                    progress: view.progress,
                };
                crate::backup::backup(job, out, log, &backup)?
            }
        })
    })
}
