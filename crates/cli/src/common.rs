//! What every command shares: the job argument and its overrides, and the error kinds that decide
//! the exit code.

use std::path::PathBuf;

use jetproof_job::{ByteSize, IoEngine, Job, Overrides, Span, Threads};
use jetproof_storage::backend::SelectedBackend;

/// How a command ended, when it ran to the end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Pass,
    Fail,
}

/// Why a command did not run to the end.
#[derive(Debug)]
pub enum CliError {
    /// Bad input: nothing was done. Exit code 2.
    BadInput(anyhow::Error),
    /// Something failed while working (an I/O error, a damaged file). Exit code 3.
    Runtime(anyhow::Error),
}

impl CliError {
    pub fn bad_input(error: impl Into<anyhow::Error>) -> CliError {
        CliError::BadInput(error.into())
    }
    pub fn runtime(error: impl Into<anyhow::Error>) -> CliError {
        CliError::Runtime(error.into())
    }
}

/// The job file and the common overrides (`README.md`), for every command that works on databases.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct JobArgs {
    /// The TOML job file. Without one, the built-in default job: small, under ./jetproof-data.
    #[arg(value_name = "JOB")]
    pub job: Option<PathBuf>,
    /// Directory holding the databases (overrides storage.data_dir).
    #[arg(long, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// Number of databases (overrides storage.databases).
    #[arg(long, value_name = "N")]
    pub databases: Option<u32>,
    /// Size of each database, like 512MiB or 200GiB (overrides storage.db_size).
    #[arg(long, value_name = "SIZE")]
    pub db_size: Option<ByteSize>,
    /// Sessions per database, or "auto" (overrides workload.threads).
    #[arg(long, value_name = "N|auto", value_parser = parse_threads)]
    pub threads: Option<Threads>,
    /// Length of the measured window, like 90s or 2h (overrides run.duration).
    #[arg(long, value_name = "D")]
    pub duration: Option<Span>,
    /// How database and log files are read and written: std, io_uring or auto (overrides
    /// storage.io_engine; default std).
    #[arg(long, value_name = "ENGINE", value_parser = parse_io_engine)]
    pub io_engine: Option<IoEngine>,
}

/// Bad input naming `flags`, given to `command`, which does not use them.
/// A results directory's `samples.csv` (absent: `None`), read by `report` and `compare` alike;
/// anything that is not one jetproof wrote is bad input naming the file.
pub fn read_samples(path: &std::path::Path) -> Result<Option<String>, CliError> {
    jetproof_results::read_samples_csv(path).map_err(|e| {
        CliError::bad_input(anyhow::anyhow!(
            "{}: {e}; samples.csv is the file jetproof writes beside result.json, remove what \
             is there instead",
            path.display()
        ))
    })
}

pub fn refuse_flags(command: &str, flags: &[&str]) -> Result<(), CliError> {
    if flags.is_empty() {
        return Ok(());
    }
    Err(CliError::bad_input(anyhow::anyhow!(
        "{}: `{command}` does not use {}; drop {}",
        flags.join(", "),
        if flags.len() == 1 { "it" } else { "them" },
        if flags.len() == 1 { "it" } else { "them" }
    )))
}

/// `--io-engine`'s value, for every command that takes it (`run`, `init`, `sweep`, ...).
pub fn parse_io_engine(text: &str) -> Result<IoEngine, String> {
    text.parse()
        .map_err(|e| format!("{e} (the flag overrides storage.io_engine)"))
}

fn parse_threads(text: &str) -> Result<Threads, String> {
    if text.eq_ignore_ascii_case("auto") {
        return Ok(Threads::Auto);
    }
    text.parse::<u32>()
        .map(Threads::Fixed)
        .map_err(|_| format!("`{text}` is not a session count; give a number like 8, or auto"))
}

impl JobArgs {
    /// Refuses (bad input, exit 2, before any I/O) the overrides among `unused` ("--threads",
    /// "--duration", "--db-size") that were given to `command`, which would ignore them in
    /// silence: a user who passes `--duration 2h` to `checksum` must learn it means nothing there.
    pub fn refuse_unused(&self, command: &str, unused: &[&str]) -> Result<(), CliError> {
        let given: Vec<&str> = unused
            .iter()
            .copied()
            .filter(|flag| match *flag {
                "--threads" => self.threads.is_some(),
                "--duration" => self.duration.is_some(),
                "--db-size" => self.db_size.is_some(),
                _ => false,
            })
            .collect();
        refuse_flags(command, &given)
    }

    /// Loads the job (or the default) and applies the overrides. Errors are bad input.
    pub fn load(&self) -> Result<Job, CliError> {
        self.load_with_cache(None)
    }

    /// [`JobArgs::load`] with `--cache-max` (of `run` and `sweep`, the commands whose caches
    /// decide what is measured) applied too.
    pub fn load_with_cache(&self, cache_max: Option<ByteSize>) -> Result<Job, CliError> {
        let mut job = match &self.job {
            Some(path) => Job::load(path).map_err(CliError::bad_input)?,
            None => Job::default(),
        };
        let overrides = Overrides {
            data_dir: self.data_dir.clone(),
            databases: self.databases,
            db_size: self.db_size,
            threads: self.threads,
            duration: self.duration,
            io_engine: self.io_engine,
            cache_max,
        };
        overrides.apply(&mut job).map_err(CliError::bad_input)?;
        Ok(job)
    }
}

/// Opens the I/O engine the job chose (`storage.io_engine`, or `--io-engine`), before any I/O:
/// an engine the kernel refuses is bad input (exit 2) naming the key and the fix. With "auto"
/// falling back to std, says so on stderr; [`log_engine`] puts it in the test log.
pub fn select_backend(job: &Job) -> Result<SelectedBackend, CliError> {
    let selected = jetproof_storage::backend::select_backend(job).map_err(CliError::bad_input)?;
    if let Some(why) = &selected.fallback {
        errln!("jetproof: storage.io_engine = \"auto\": {why}");
    }
    Ok(selected)
}

/// The test-log lines naming the owner locks and the I/O engine: the run sequence's, shared by
/// every command that writes a test log.
pub use jetproof_procedures::sequence::{log_engine, log_owner_lock};

/// Says on stderr when the job's caches fit in this machine's memory but not in what is
/// available now (a job that cannot fit at all is refused by the procedures' checks).
pub fn warn_memory(job: &Job) {
    use jetproof_storage::host::{HostMemory, memory_warning};
    if let Some(warning) = HostMemory::read().and_then(|memory| memory_warning(job, &memory)) {
        errln!("jetproof: {warning}");
    }
}

/// `--start-at` and `--host-name`, shared by `run` and `checksum` (`docs/many-servers.md`).
#[derive(clap::Args, Debug, Clone, Default)]
pub struct ManyArgs {
    /// Start the measured part (performance/stress window, backup's reads, soft recovery's
    /// replay, checksum's reads) at TIME on this host's clock, after attaching and warming up:
    /// RFC 3339 (2026-11-26T23:40:00Z, 2026-11-26 23:40:00+01:00) or Unix seconds. Give every
    /// host the same TIME to measure one window.
    #[arg(long, value_name = "TIME", value_parser = parse_start_at)]
    pub start_at: Option<std::time::SystemTime>,
    /// Accept a --start-at more than 7 days ahead (refused without it: such a start is
    /// almost always a mistyped date, and the command would wait, attached, until then).
    #[arg(long, requires = "start_at")]
    pub force_start_at: bool,
    /// The name this host has in result.json (default: its hostname), so that `jetproof
    /// aggregate` can tell apart runs on one machine or in namespaces sharing a hostname.
    #[arg(long, value_name = "NAME", value_parser = parse_host_name)]
    pub host_name: Option<String>,
}

fn parse_start_at(text: &str) -> Result<std::time::SystemTime, String> {
    jetproof_results::clock::parse_time(text)
}

fn parse_host_name(text: &str) -> Result<String, String> {
    let name = text.trim();
    if name.is_empty() || name.len() > 253 || name.chars().any(|c| c.is_control() || c == '/') {
        return Err(format!(
            "`{text}` is not a host name; give 1 to 253 printable characters without `/`"
        ));
    }
    Ok(name.to_string())
}

impl ManyArgs {
    /// Applies `--host-name` and refuses a start time already past, or more than 7 days ahead
    /// without `--force-start-at` (bad input, exit 2): both before any I/O.
    pub fn apply(&self) -> Result<(), CliError> {
        if let Some(name) = &self.host_name {
            jetproof_results::host::set_name(name);
        }
        if let Some(at) = self.start_at {
            jetproof_procedures::start::check_start_at(at, self.force_start_at)
                .map_err(CliError::bad_input)?;
        }
        Ok(())
    }
}

/// Set once standard output could not be written.
static STDOUT_FAILED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Writes to standard output (what `outln!` and `out!` expand to). A write that fails (a closed
/// pipe, a terminal gone after SIGHUP, a full disk) never panics: the first failure is said on
/// stderr, later output is dropped, and the command goes on: a test still writes its result
/// files and exits with its verdict; `plan`, `job`, `completions` and `man`, whose product is
/// what they print, exit 3.
pub fn write_out(args: std::fmt::Arguments<'_>) {
    use std::io::Write as _;
    write_out_with(|out| out.write_fmt(args));
}

/// [`write_out`] for bytes.
pub fn write_out_bytes(bytes: &[u8]) {
    use std::io::Write as _;
    write_out_with(|out| out.write_all(bytes));
}

fn write_out_with(write: impl FnOnce(&mut std::io::StdoutLock<'static>) -> std::io::Result<()>) {
    use std::io::Write as _;
    use std::sync::atomic::Ordering;
    if STDOUT_FAILED.load(Ordering::Relaxed) {
        return;
    }
    let mut out = std::io::stdout().lock();
    if let Err(e) = write(&mut out).and_then(|()| out.flush())
        && !STDOUT_FAILED.swap(true, Ordering::Relaxed)
    {
        write_err(format_args!(
            "jetproof: cannot write to standard output ({e}); nothing more is printed there (result files are written as usual)\n"
        ));
    }
}

/// Whether a write to standard output failed.
pub fn stdout_failed() -> bool {
    STDOUT_FAILED.load(std::sync::atomic::Ordering::Relaxed)
}

/// Writes to standard error (what `errln!` expands to); a failure is ignored, since there is
/// nowhere left to say it.
pub fn write_err(args: std::fmt::Arguments<'_>) {
    use std::io::Write as _;
    let _ = std::io::stderr().lock().write_fmt(args);
}
