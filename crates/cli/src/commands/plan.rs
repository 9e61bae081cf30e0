//! `jetproof plan`: sizing. Parses the flags into `jetproof_plan::PlanInputs`, prints the plan
//! (a table, or one JSON object with `--json`) and, with `--write-job FILE`, writes the job for one
//! server that `init` and `run` read unchanged.
//!
//! Every check happens before anything is written: bad flags, a job the plan would make invalid,
//! and a `--write-job` path that holds a file jetproof did not write (`docs/refusals.md`: never
//! overwrite what jetproof did not create). Plan takes no job file.

use std::path::{Path, PathBuf};

use anyhow::anyhow;
use jetproof_job::ByteSize;
use jetproof_plan::{DiskKind, ExchangeVersion, JOB_FILE_MARKER, Overheads, PlanInputs, RaidLevel};

use crate::common::{CliError, Outcome};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Mailboxes in the whole solution (all servers).
    #[arg(long, value_name = "N", value_parser = parse_count, allow_negative_numbers = true)]
    pub mailboxes: u64,
    /// Transactional IOPS per mailbox before headroom (ESRP profiles: 0.03 to 1.5).
    #[arg(long, value_name = "X", allow_negative_numbers = true)]
    pub iops_per_mailbox: Option<f64>,
    /// Messages sent and received per mailbox per day: looks the IOPS up in the version's table
    /// when --iops-per-mailbox is not given, and sizes white space, retention and logs.
    #[arg(long, value_name = "M", value_parser = parse_count_u32, allow_negative_numbers = true)]
    pub messages_per_day: Option<u32>,
    /// Exchange version whose tables apply: 2003, 2010, 2013, 2016 or 2019 [default: 2013].
    #[arg(long, value_name = "V")]
    pub exchange_version: Option<ExchangeVersion>,
    /// Headroom added to the IOPS per mailbox, in percent.
    #[arg(
        long,
        value_name = "PERCENT",
        default_value_t = 20.0,
        allow_negative_numbers = true,
        value_parser = parse_percent
    )]
    pub headroom: f64,
    /// Mailbox servers carrying active databases.
    #[arg(long, value_name = "S", default_value_t = 1, value_parser = parse_count, allow_negative_numbers = true)]
    pub servers: u64,
    /// Active databases per server.
    #[arg(long, value_name = "D", default_value_t = 1, value_parser = parse_count, allow_negative_numbers = true)]
    pub databases_per_server: u64,
    /// Copies of each database, the active one included (1 = no DAG).
    #[arg(long, value_name = "C", default_value_t = 1, value_parser = parse_count_u32, allow_negative_numbers = true)]
    pub copies: u32,
    /// Mailbox quota, like 2GiB or 500MiB.
    #[arg(long, value_name = "SIZE", default_value = "2GiB")]
    pub mailbox_size: ByteSize,
    /// Share of the quota filled when testing, in percent (Jetstress "capacity percentage").
    #[arg(long, value_name = "PERCENT", default_value_t = 100, value_parser = parse_percent_u32, allow_negative_numbers = true)]
    pub capacity_percent: u32,
    /// Share of transactional I/O that is reads, in percent; "R/W" gives both shares, as in
    /// HP's Appendix A "66/33" (which sums to 99).
    #[arg(
        long,
        value_name = "R",
        default_value = "60",
        allow_negative_numbers = true,
        value_parser = parse_read_share
    )]
    pub read_percent: ReadShare,
    /// Share that is writes, in percent [default: 100 - read]. HP's Appendix A uses 66/33.
    #[arg(long, value_name = "W", allow_negative_numbers = true, value_parser = parse_percent)]
    pub write_percent: Option<f64>,
    /// RAID level: 0, 1 or 10 (write penalty 2), 5 (4), 6 (6).
    #[arg(long, value_name = "0|1|10|5|6", default_value = "10")]
    pub raid: RaidLevel,
    /// Random IOPS one disk sustains (measure with `jetproof probe`).
    #[arg(long, value_name = "I", allow_negative_numbers = true)]
    pub disk_iops: Option<f64>,
    /// Disk kind whose typical IOPS to assume without --disk-iops: 7.2k (75), 10k (125),
    /// 15k (180), ssd (5000) [default: 7.2k].
    #[arg(long, value_name = "KIND")]
    pub disk_kind: Option<DiskKind>,
    /// Capacity of one disk as the array formats it (before RAID), like 450GB: counts the disks
    /// the database and log volumes need, beside those the IOPS need.
    #[arg(long, value_name = "SIZE")]
    pub disk_size: Option<ByteSize>,
    /// Disks per RAID group, parity or mirror included: 9, or 8+1 (8D+1P) [default: 2 for
    /// RAID 1/10, 5 (4+1) for RAID 5, 8 (6+2) for RAID 6].
    #[arg(long, value_name = "N|D+P", value_parser = parse_raid_group)]
    pub raid_group_disks: Option<u32>,
    /// Average message size, for white space and deleted item retention.
    #[arg(long, value_name = "SIZE", default_value = "75KiB")]
    pub message_size: ByteSize,
    /// Deleted item retention window in days.
    #[arg(long, value_name = "DAYS", default_value_t = 14, value_parser = parse_count_u32, allow_negative_numbers = true)]
    pub retention_days: u32,
    /// Size of one transaction log file, for the log volume [default: 1MiB; 5MiB for 2003].
    #[arg(long, value_name = "SIZE")]
    pub log_file_size: Option<ByteSize>,
    /// Days of logs the log volume holds if truncation (backup, replication) stops.
    #[arg(long, value_name = "DAYS", default_value_t = 3, value_parser = parse_count_u32, allow_negative_numbers = true)]
    pub log_retention_days: u32,
    /// The log volume as this share of the database volume, instead of the calculator's rule
    /// (Hitachi's best practice: 10).
    #[arg(long, value_name = "PERCENT", allow_negative_numbers = true, value_parser = parse_percent)]
    pub log_volume_percent: Option<f64>,
    /// Share of a database's mailboxes moved in a week, whose logs the log volume holds.
    #[arg(long, value_name = "PERCENT", default_value_t = 1.0, allow_negative_numbers = true, value_parser = parse_percent)]
    pub mailbox_move_percent: f64,
    /// Content index share of the database in percent [default: 10 for 2010, 20 for 2013 and
    /// later, 0 for 2003].
    #[arg(long, value_name = "PERCENT", allow_negative_numbers = true, value_parser = parse_percent)]
    pub content_index_percent: Option<f64>,
    /// Free space kept on every database and log volume, in percent.
    #[arg(
        long,
        value_name = "PERCENT",
        default_value_t = 20.0,
        allow_negative_numbers = true,
        value_parser = parse_percent
    )]
    pub free_space_percent: f64,
    /// Do not count database white space.
    #[arg(long)]
    pub no_white_space: bool,
    /// Do not count deleted item retention (Recoverable Items).
    #[arg(long)]
    pub no_deleted_item_retention: bool,
    /// Do not count the content index.
    #[arg(long)]
    pub no_content_index: bool,
    /// Do not reserve free space on the volumes.
    #[arg(long)]
    pub no_free_space_reserve: bool,
    /// Database page size of the written job: 4KiB, 8KiB, 16KiB or 32KiB.
    #[arg(long, value_name = "SIZE", default_value = "32KiB")]
    pub page_size: ByteSize,
    /// Data directory written into the job file [default: the built-in job's ./jetproof-data].
    #[arg(long, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Write the job for one server of the plan to FILE (refuses files jetproof did not write).
    #[arg(long, value_name = "FILE")]
    pub write_job: Option<PathBuf>,
    /// With --write-job: ESRP's test set in the job (2 h performance and 24 h stress, each with
    /// a checksum pass after it, 500 log files per instance for soft recovery).
    #[arg(long, requires = "write_job")]
    pub esrp: bool,
    /// Write the solution file to FILE: the plan's flags and figures, the servers, the job, ESRP's
    /// test set and a rehearsal scale; what `jetproof esrp` reads (docs/esrp.md, "The solution
    /// file"). Refuses files jetproof did not write.
    #[arg(long, value_name = "FILE")]
    pub write_solution: Option<PathBuf>,
    /// With --write-solution: the servers' names, comma-separated, as their results will name
    /// them (`--host-name`, inventory names); as many as --servers [default: server1 ...].
    #[arg(
        long,
        value_name = "NAMES",
        value_delimiter = ',',
        requires = "write_solution"
    )]
    pub hosts: Vec<String>,
}

fn parse_count(text: &str) -> Result<u64, String> {
    let trimmed = text.trim().replace([',', '_'], "");
    if trimmed.starts_with('-') {
        return Err(format!(
            "`{text}` is negative; give a whole number of 1 or more"
        ));
    }
    trimmed
        .parse::<u64>()
        .map_err(|_| format!("`{text}` is not a whole number; give one like 1000"))
}

/// A percentage, with or without a trailing `%`. Range checks are the plan library's, so its
/// message names the flag and the fix.
fn parse_percent(text: &str) -> Result<f64, String> {
    let number = text.trim().trim_end_matches('%').trim();
    number
        .parse::<f64>()
        .ok()
        .filter(|value| value.is_finite())
        .ok_or_else(|| format!("`{text}` is not a percentage; give a number like 20"))
}

/// `--read-percent`: the read share, optionally with the write share after a slash.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ReadShare {
    pub read: f64,
    pub write: Option<f64>,
}

fn parse_read_share(text: &str) -> Result<ReadShare, String> {
    match text.split_once('/') {
        Some((read, write)) => Ok(ReadShare {
            read: parse_percent(read)?,
            write: Some(parse_percent(write)?),
        }),
        None => Ok(ReadShare {
            read: parse_percent(text)?,
            write: None,
        }),
    }
}

/// `--raid-group-disks`: a disk count ("9") or data plus parity ("8+1", "8D+1P", "6D+2P").
fn parse_raid_group(text: &str) -> Result<u32, String> {
    let lower = text.trim().to_ascii_lowercase();
    match lower.split_once('+') {
        Some((data, parity)) => {
            let data = parse_count_u32(data.trim().trim_end_matches('d'))?;
            let parity = parse_count_u32(parity.trim().trim_end_matches('p'))?;
            data.checked_add(parity)
                .ok_or_else(|| format!("`{text}` is too large"))
        }
        None => parse_count_u32(&lower),
    }
}

fn parse_percent_u32(text: &str) -> Result<u32, String> {
    parse_count_u32(text.trim().trim_end_matches('%').trim())
}

fn parse_count_u32(text: &str) -> Result<u32, String> {
    let value = parse_count(text)?;
    u32::try_from(value).map_err(|_| format!("`{text}` is too large"))
}

impl Args {
    pub(crate) fn inputs(&self) -> Result<PlanInputs, CliError> {
        let write_percent = match (self.read_percent.write, self.write_percent) {
            (Some(_), Some(_)) => {
                return Err(CliError::bad_input(anyhow!(
                    "`--write-percent` repeats the write share already given in --read-percent R/W; give one of them"
                )));
            }
            (from_read, from_flag) => from_read.or(from_flag),
        };
        Ok(PlanInputs {
            mailboxes: self.mailboxes,
            iops_per_mailbox: self.iops_per_mailbox,
            messages_per_day: self.messages_per_day,
            exchange_version: self.exchange_version,
            headroom_percent: self.headroom,
            mailbox_size: self.mailbox_size,
            servers: self.servers,
            databases_per_server: self.databases_per_server,
            copies_per_database: self.copies,
            capacity_percent: self.capacity_percent,
            read_percent: self.read_percent.read,
            write_percent,
            raid: self.raid,
            disk_iops: self.disk_iops,
            disk_kind: self.disk_kind,
            disk_size: self.disk_size,
            raid_group_disks: self.raid_group_disks,
            overheads: Overheads {
                white_space: !self.no_white_space,
                deleted_item_retention: !self.no_deleted_item_retention,
                content_index: !self.no_content_index,
                free_space_reserve: !self.no_free_space_reserve,
            },
            message_size: self.message_size,
            deleted_item_retention_days: self.retention_days,
            content_index_percent: self.content_index_percent,
            free_space_percent: self.free_space_percent,
            log_truncation_failure_days: self.log_retention_days,
            log_file_size: self.log_file_size,
            log_volume_percent: self.log_volume_percent,
            mailbox_move_percent: self.mailbox_move_percent,
            page_size: self.page_size,
        })
    }
}

pub fn run(args: Args) -> Result<Outcome, CliError> {
    let plan = jetproof_plan::plan(&args.inputs()?).map_err(CliError::bad_input)?;

    // Everything about the job file is checked before anything is written.
    let job_text = match &args.write_job {
        Some(path) => {
            let text = jetproof_plan::job_file::text(
                &plan,
                args.data_dir.as_deref(),
                args.esrp,
                &command_line(),
            )
            .map_err(|e| CliError::bad_input(anyhow!("{e}")))?;
            check_target(path, "--write-job")?;
            Some((path, text))
        }
        None => None,
    };
    let solution_text = match &args.write_solution {
        Some(path) => {
            let text = solution_file(&args, &plan)?;
            check_target(path, "--write-solution")?;
            Some((path, text))
        }
        None => None,
    };
    if let Some((path, text)) = &solution_text {
        std::fs::write(path, text).map_err(|e| {
            CliError::runtime(anyhow!("write solution file {}: {e}", path.display()))
        })?;
    }
    if let Some((path, text)) = &job_text {
        std::fs::write(path, text)
            .map_err(|e| CliError::runtime(anyhow!("write job file {}: {e}", path.display())))?;
    }

    if args.json {
        let text = serde_json::to_string_pretty(&plan)
            .map_err(|e| CliError::runtime(anyhow!("serialise the plan as JSON: {e}")))?;
        outln!("{text}");
    } else {
        out!(
            "{}",
            jetproof_plan::render::render(&plan, job_text.as_ref().map(|(path, _)| path.as_path()))
        );
    }
    Ok(Outcome::Pass)
}

/// The command line that made the job file, as its header names it (arguments with spaces quoted).
fn command_line() -> String {
    std::env::args()
        .skip(1)
        .map(|arg| {
            if arg.is_empty() || arg.contains(char::is_whitespace) {
                format!("{arg:?}")
            } else {
                arg
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Refuses a path that holds something jetproof did not write, or whose directory is missing.
pub(crate) fn check_target(path: &Path, flag: &str) -> Result<(), CliError> {
    let shown = path.display();
    if path.is_dir() {
        return Err(CliError::bad_input(anyhow!(
            "`{flag}` {shown} is a directory; give a file path, like {shown}/job.toml"
        )));
    }
    if let Some(parent) = path.parent()
        && !parent.as_os_str().is_empty()
        && !parent.is_dir()
    {
        return Err(CliError::bad_input(anyhow!(
            "`{flag}` {shown}: the directory {} does not exist; create it first",
            parent.display()
        )));
    }
    if path
        .symlink_metadata()
        .is_ok_and(|m| m.file_type().is_symlink())
    {
        // The write would go wherever the link points, checked or not when it is written.
        return Err(CliError::bad_input(anyhow!(
            "`{flag}` {shown} is a symbolic link; jetproof writes its job and solution files only in place of a regular file it wrote: give the path of the file itself, or another path"
        )));
    }
    if path.exists() || path.symlink_metadata().is_ok() {
        // Only a regular file can be a job file plan wrote; a pipe there is not opened to wait.
        let ours = jetproof_io::input::read_text(path, jetproof_job::MAX_JOB_FILE_BYTES)
            .ok()
            .is_some_and(|text| text.lines().next() == Some(JOB_FILE_MARKER));
        if !ours {
            return Err(CliError::bad_input(anyhow!(
                "`{flag}` refuses to overwrite {shown}: jetproof did not write it (its first line is not \"{JOB_FILE_MARKER}\"); give another path, or move the file away yourself"
            )));
        }
    }
    Ok(())
}

/// The solution file ESRP's test set is for: the test set and its rehearsal scale.
#[derive(serde::Serialize)]
struct TestSet {
    performance: jetproof_job::Span,
    checksum_after_performance: bool,
    stress: jetproof_job::Span,
    checksum_after_stress: bool,
    backup: bool,
    soft_recovery_log_files: u32,
}

/// A dry run of the set: the same tests, shorter, fewer logs. Not an ESRP test.
#[derive(serde::Serialize)]
struct Rehearsal {
    performance: jetproof_job::Span,
    stress: jetproof_job::Span,
    soft_recovery_log_files: u32,
}

/// The plan's figures, as the solution file records them for its reader.
#[derive(serde::Serialize)]
struct PlanFigures {
    servers: u64,
    mailboxes_per_server: u64,
    mailboxes_per_database: u64,
    databases_per_server: u64,
    copies_per_database: u32,
    iops_per_mailbox: f64,
    target_iops_per_server: f64,
    target_iops_total: f64,
    test_database_size_bytes: u64,
}

#[derive(serde::Serialize)]
struct SolutionFile<'a> {
    servers: &'a [String],
    plan: Vec<String>,
    plan_figures: PlanFigures,
    tests: TestSet,
    rehearsal: Rehearsal,
    job: &'a jetproof_job::Job,
}

/// The rehearsal scale `--write-solution` writes (docs/esrp.md): minutes, not hours.
pub const REHEARSAL_PERFORMANCE_SECONDS: u64 = 120;
pub const REHEARSAL_STRESS_SECONDS: u64 = 300;
pub const REHEARSAL_LOG_FILES: u32 = 20;

/// The flags of this command line that size the plan: everything but the ones that say where
/// to write and how to print (`--write-job`, `--write-solution`, `--hosts`, `--json`, `--esrp`,
/// `--data-dir`), which `jetproof esrp` would refuse or ignore.
fn sizing_flags() -> Vec<String> {
    const WITH_VALUE: [&str; 4] = ["--write-job", "--write-solution", "--hosts", "--data-dir"];
    const ALONE: [&str; 2] = ["--json", "--esrp"];
    let mut kept = Vec::new();
    let mut args = std::env::args().skip(2);
    while let Some(arg) = args.next() {
        let name = arg.split_once('=').map_or(arg.as_str(), |(name, _)| name);
        if WITH_VALUE.contains(&name) {
            if !arg.contains('=') {
                args.next();
            }
        } else if !ALONE.contains(&name) {
            kept.push(arg);
        }
    }
    kept
}

/// The text of the solution file: jetproof's marker, how it was made, then TOML that
/// `jetproof esrp` reads (checked here by reading it back, and the job by `Job::parse`).
fn solution_file(args: &Args, plan: &jetproof_plan::Plan) -> Result<String, CliError> {
    let servers: Vec<String> = if args.hosts.is_empty() {
        (1..=plan.inputs.servers)
            .map(|n| format!("server{n}"))
            .collect()
    } else {
        args.hosts.iter().map(|h| h.trim().to_string()).collect()
    };
    if servers.len() as u64 != plan.inputs.servers {
        return Err(CliError::bad_input(anyhow!(
            "`--hosts` names {} servers but `--servers` is {}; give one name per server",
            servers.len(),
            plan.inputs.servers
        )));
    }
    if let Some(blank) = servers.iter().position(String::is_empty) {
        return Err(CliError::bad_input(anyhow!(
            "`--hosts`: name {} is empty; give names like h1,h2",
            blank + 1
        )));
    }
    let mut sorted = servers.clone();
    sorted.sort();
    if let Some(pair) = sorted.windows(2).find(|w| w[0] == w[1]) {
        return Err(CliError::bad_input(anyhow!(
            "`--hosts` names {} twice; give each server once",
            pair[0]
        )));
    }
    let mut job = plan.job();
    jetproof_plan::apply_esrp(&mut job);
    if let Some(dir) = &args.data_dir {
        job.storage.data_dir = dir.clone();
    }
    let file = SolutionFile {
        servers: &servers,
        plan: sizing_flags(),
        plan_figures: PlanFigures {
            servers: plan.inputs.servers,
            mailboxes_per_server: plan.mailboxes_per_server,
            mailboxes_per_database: plan.mailboxes_per_database,
            databases_per_server: plan.inputs.databases_per_server,
            copies_per_database: plan.inputs.copies_per_database,
            iops_per_mailbox: plan.iops_per_mailbox,
            target_iops_per_server: plan.target_iops_per_server,
            target_iops_total: plan.target_iops_total,
            test_database_size_bytes: plan.test_database_size_bytes,
        },
        tests: TestSet {
            performance: job.run.duration,
            checksum_after_performance: job.run.checksum_after_performance,
            stress: job.run.stress_duration,
            checksum_after_stress: job.run.checksum_after_stress,
            backup: true,
            soft_recovery_log_files: job.run.recovery_log_files,
        },
        rehearsal: Rehearsal {
            performance: jetproof_job::Span::secs(REHEARSAL_PERFORMANCE_SECONDS),
            stress: jetproof_job::Span::secs(REHEARSAL_STRESS_SECONDS),
            soft_recovery_log_files: REHEARSAL_LOG_FILES,
        },
        job: &job,
    };
    let body = toml::to_string_pretty(&file)
        .map_err(|e| CliError::runtime(anyhow!("serialise the solution file: {e}")))?;
    let mut text = String::new();
    text.push_str(JOB_FILE_MARKER);
    text.push('\n');
    text.push_str("# jetproof overwrites this file only while the line above is its first line.\n");
    text.push_str(&format!(
        "# Made by jetproof {} from: jetproof {}\n",
        env!("CARGO_PKG_VERSION"),
        command_line()
    ));
    text.push_str(
        "# The solution file `jetproof esrp SOLUTION RESULTS_DIR` reads (docs/esrp.md): the servers,\n\
         # the plan's flags (`plan`, computed again by esrp) and figures, ESRP's test set (`tests`),\n\
         # a rehearsal scale for a dry run (`rehearsal`: not an ESRP test) and the job every server\n\
         # runs (`job`, docs/job.md). Add vendor, product, storage_hardware ... (docs/esrp.md).\n\n",
    );
    text.push_str(&body);
    // What was written must read back as a solution esrp accepts, its job as a valid job.
    let solution: jetproof_results::esrp::Solution = toml::from_str(&text)
        .map_err(|e| CliError::runtime(anyhow!("the solution file does not read back: {e}")))?;
    let job_text = solution
        .job
        .as_ref()
        .map(toml::to_string)
        .transpose()
        .map_err(|e| CliError::runtime(anyhow!("the solution's job: {e}")))?
        .unwrap_or_default();
    jetproof_job::Job::parse(&job_text, "the solution's job").map_err(|e| {
        CliError::bad_input(anyhow!(
            "{e}; adjust --mailbox-size, --capacity-percent or --databases-per-server"
        ))
    })?;
    Ok(text)
}
