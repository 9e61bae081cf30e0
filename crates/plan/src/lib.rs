//! Sizing arithmetic: a mailbox profile in, the figures a storage design is defended with out —
//! target transactional IOPS per server and in total, mailboxes per database, database and log
//! volume sizes, back-end IOPS after the RAID write penalty, and the disks needed — plus a job
//! file for one server that `init` and `run` read unchanged.
//!
//! This crate does no I/O. Every figure is computed once, in [`plan`] (which runs the sizing's
//! steps in order, one function per section, in `steps.rs`), and recorded as a [`Step`] (what,
//! formula, figure) in the order it was computed, so the printed arithmetic is the arithmetic
//! that ran, never a separate rendering of it. The formulas and their sources (the
//! reference ESRP and Jetstress reports, Microsoft's sizing guidance) are in `docs/plan.md`.
//!
//! Rounding rules, stated once: IOPS are kept to two decimals (so 0.15 × 1.2 × 2,550 prints 459,
//! not 459.00000000000006); counts of things that must carry a load — mailboxes per server,
//! disks — round up; so do mailboxes per database (whole mailboxes: 750 over 4 databases is
//! 188, as the Lenovo report sizes it), and sizes are computed for that largest database so
//! every volume fits.

pub mod job_file;
pub mod render;
mod steps;
pub mod tables;

use jetproof_job::{ByteSize, Job, Threads};
use serde::{Serialize, Serializer};
use steps::Sizing;

pub use tables::{DiskKind, ExchangeVersion, RaidLevel};

/// First line of every job file `plan --write-job` writes. A file that starts with it was made by
/// jetproof and may be overwritten; any other file is refused (`docs/refusals.md`).
pub const JOB_FILE_MARKER: &str = "# Written by `jetproof plan`.";

/// Jetstress's database cache per instance (minimum and maximum), written into job files.
pub const JETSTRESS_CACHE_MIN: ByteSize = ByteSize(32 * ByteSize::MIB);
pub const JETSTRESS_CACHE_MAX: ByteSize = ByteSize(256 * ByteSize::MIB);

/// ESRP's test set, as the ESRP-Storage reports run it: a 2-hour performance test, a 24-hour
/// stress test, each followed by a checksum of every page and log file, a backup test, and a
/// soft recovery of 500 log files per instance (Hitachi and Infortrend reports, "Test Result
/// Summary" and appendices).
pub const ESRP_PERFORMANCE_SECONDS: u64 = 2 * 3600;
pub const ESRP_STRESS_SECONDS: u64 = 24 * 3600;
pub const ESRP_RECOVERY_LOG_FILES: u32 = 500;

/// Sets a job's durations and passes to ESRP's test set ([`ESRP_PERFORMANCE_SECONDS`] ...):
/// what `plan --esrp --write-job` writes. The backup test needs no setting.
pub fn apply_esrp(job: &mut Job) {
    job.run.duration = jetproof_job::Span::secs(ESRP_PERFORMANCE_SECONDS);
    job.run.stress_duration = jetproof_job::Span::secs(ESRP_STRESS_SECONDS);
    job.run.recovery_log_files = ESRP_RECOVERY_LOG_FILES;
    job.run.checksum_after_performance = true;
    job.run.checksum_after_stress = true;
}

/// Which of the overheads Exchange adds to the quota are counted. All on by default.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Overheads {
    /// Free pages inside the database: one day of messages per mailbox.
    pub white_space: bool,
    /// The Recoverable Items folder (dumpster): the retention window of messages plus 1.2% of the
    /// quota (single item recovery) and 5.8% (calendar version logging).
    pub deleted_item_retention: bool,
    /// The content (search) index beside the database.
    pub content_index: bool,
    /// Free space kept on every database and log volume.
    pub free_space_reserve: bool,
}

impl Default for Overheads {
    fn default() -> Self {
        Overheads {
            white_space: true,
            deleted_item_retention: true,
            content_index: true,
            free_space_reserve: true,
        }
    }
}

/// Everything the sizing takes. Field names follow the `jetproof plan` flags; errors name flags.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PlanInputs {
    /// Mailboxes in the whole solution (all servers).
    pub mailboxes: u64,
    /// Transactional IOPS per mailbox before headroom. When unset, looked up from
    /// `messages_per_day` in the table of `exchange_version`.
    pub iops_per_mailbox: Option<f64>,
    /// Messages sent and received per mailbox per day. Also sizes white space, retention and logs.
    pub messages_per_day: Option<u32>,
    /// Unset: 2013 (whose table `plan` also applies to 2016 and 2019; see `docs/plan.md`).
    pub exchange_version: Option<ExchangeVersion>,
    /// Growth allowance added to the IOPS per mailbox, in percent (ESRP: 20).
    pub headroom_percent: f64,
    /// Mailbox quota.
    pub mailbox_size: ByteSize,
    pub servers: u64,
    pub databases_per_server: u64,
    /// Copies of each database, active included (1 = no DAG).
    pub copies_per_database: u32,
    /// Share of the quota filled when testing, in percent (1-100; Jetstress "capacity percentage").
    pub capacity_percent: u32,
    /// Share of transactional I/O that is reads, in percent.
    pub read_percent: f64,
    /// Share that is writes. Unset: 100 - read. HP's Appendix A uses 66/33, which sums to 99.
    pub write_percent: Option<f64>,
    pub raid: RaidLevel,
    /// Random IOPS one disk sustains. Unset: the typical figure of `disk_kind`.
    pub disk_iops: Option<f64>,
    /// Unset with `disk_iops` unset: 7.2k rpm, the most conservative kind.
    pub disk_kind: Option<DiskKind>,
    /// Capacity of one disk as the array formats it (before RAID). Unset: no capacity-bound
    /// disk count.
    pub disk_size: Option<ByteSize>,
    /// Disks per RAID group, parity or mirror included (Hitachi's 8D+1P: 9). Unset: the
    /// level's common width ([`RaidLevel::default_group_disks`]).
    pub raid_group_disks: Option<u32>,
    pub overheads: Overheads,
    /// Average message size for white space and retention (Microsoft's tables: 75 KB).
    pub message_size: ByteSize,
    /// Deleted item retention window in days (Exchange default: 14).
    pub deleted_item_retention_days: u32,
    /// Content index share of the database in percent. Unset: the version's figure.
    pub content_index_percent: Option<f64>,
    /// Free space reserved on each volume, in percent (Microsoft's examples: 20).
    pub free_space_percent: f64,
    /// Days the log volume must hold logs if truncation (backup, replication) stops (Microsoft: 3).
    pub log_truncation_failure_days: u32,
    /// Size of one transaction log file. Unset: the version's (1 MiB for 2007 and later, 5 MiB
    /// for 2003).
    pub log_file_size: Option<ByteSize>,
    /// The log volume as this share of the database volume instead of the calculator's rule
    /// (Hitachi's best practice: "Log LUs should be at least 10 percent of the size of the
    /// database LUs"). Unset: the calculator's rule.
    pub log_volume_percent: Option<f64>,
    /// Share of a database's mailboxes moved in a week, whose logs the log volume holds (1%).
    pub mailbox_move_percent: f64,
    /// Database page size used to round the job file's database size (job default: 32 KiB).
    pub page_size: ByteSize,
}

impl Default for PlanInputs {
    fn default() -> Self {
        PlanInputs {
            mailboxes: 0,
            iops_per_mailbox: None,
            messages_per_day: None,
            exchange_version: None,
            headroom_percent: 20.0,
            mailbox_size: ByteSize::gib(2),
            servers: 1,
            databases_per_server: 1,
            copies_per_database: 1,
            capacity_percent: 100,
            read_percent: 60.0,
            write_percent: None,
            raid: RaidLevel::Raid10,
            disk_iops: None,
            disk_kind: None,
            disk_size: None,
            raid_group_disks: None,
            overheads: Overheads::default(),
            message_size: ByteSize::kib(75),
            deleted_item_retention_days: 14,
            content_index_percent: None,
            free_space_percent: 20.0,
            log_truncation_failure_days: 3,
            log_file_size: None,
            log_volume_percent: None,
            mailbox_move_percent: 1.0,
            page_size: ByteSize::kib(32),
        }
    }
}

/// An input that cannot be sized. Names the flag and says how to fix it.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum PlanError {
    #[error("`{flag}` {problem}; {fix}")]
    Invalid {
        flag: &'static str,
        problem: String,
        fix: String,
    },
}

impl PlanError {
    /// The flag the error is about.
    pub fn flag(&self) -> &'static str {
        match self {
            PlanError::Invalid { flag, .. } => flag,
        }
    }
}

fn invalid(flag: &'static str, problem: impl Into<String>, fix: impl Into<String>) -> PlanError {
    PlanError::Invalid {
        flag,
        problem: problem.into(),
        fix: fix.into(),
    }
}

/// One line of the arithmetic: what is computed, how, and the result with its unit.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Step {
    pub description: String,
    pub formula: String,
    pub figure: String,
}

/// The sizing of a solution. Byte figures are per database unless named otherwise.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Plan {
    pub inputs: PlanInputs,
    pub exchange_version: ExchangeVersion,
    /// IOPS per mailbox before headroom, and where it came from.
    #[serde(serialize_with = "whole_as_integer")]
    pub iops_per_mailbox_base: f64,
    pub iops_per_mailbox_source: String,
    /// IOPS per mailbox with headroom: what the job file's target uses.
    #[serde(serialize_with = "whole_as_integer")]
    pub iops_per_mailbox: f64,
    pub mailboxes_per_server: u64,
    pub mailboxes_per_database: u64,
    /// Mailboxes of the largest database when the split is uneven; sizes are computed for it.
    pub mailboxes_largest_database: u64,
    #[serde(serialize_with = "whole_as_integer")]
    pub target_iops_per_server: f64,
    #[serde(serialize_with = "whole_as_integer")]
    pub target_iops_per_database: f64,
    #[serde(serialize_with = "whole_as_integer")]
    pub target_iops_total: f64,
    #[serde(serialize_with = "whole_as_integer")]
    pub read_iops_total: f64,
    #[serde(serialize_with = "whole_as_integer")]
    pub write_iops_total: f64,
    pub raid_write_penalty: u32,
    #[serde(serialize_with = "whole_as_integer")]
    pub backend_iops_per_server: f64,
    #[serde(serialize_with = "whole_as_integer")]
    pub backend_iops_total: f64,
    /// Back-end IOPS if every copy of every database is on the same storage; same as
    /// `backend_iops_total` with one copy.
    #[serde(serialize_with = "whole_as_integer")]
    pub backend_iops_all_copies: f64,
    #[serde(serialize_with = "whole_as_integer")]
    pub disk_iops: f64,
    pub disk_iops_source: String,
    /// Database disks the back-end IOPS need (HP's Appendix A arithmetic), whole solution.
    pub disks_needed_for_iops: u64,
    /// Database disks the database volumes of one copy of every database need, in whole RAID
    /// groups; None without `disk_size`.
    pub disks_needed_for_capacity: Option<u64>,
    /// The larger of the two: the database disks of the solution (one copy of each database).
    pub disks_needed: u64,
    pub disks_needed_per_server: u64,
    pub disks_needed_all_copies: u64,
    /// Disks per RAID group in force, parity or mirror included.
    pub raid_group_disks: u32,
    /// Of them, the disks that hold data (the rest hold parity or mirrors).
    pub raid_group_data_disks: u32,
    /// Capacity of one disk as given with `disk_size`.
    pub disk_size_bytes: Option<u64>,
    /// Capacity one RAID group offers after RAID: data disks × disk size.
    pub raid_group_usable_bytes: Option<u64>,
    /// Disks (whole RAID groups) that hold the log volumes of one copy of every database, kept
    /// apart from the database disks as both reference solutions do; None without `disk_size`.
    pub log_disks_needed: Option<u64>,
    /// `disks_needed` + `log_disks_needed`.
    pub disks_needed_with_logs: Option<u64>,
    /// The database size Microsoft recommends at most for this version and copy count; None
    /// where no figure is published (2003).
    pub database_size_recommended_max_bytes: Option<u64>,
    /// Where that figure comes from.
    pub database_size_recommended_max_source: Option<String>,
    pub mailbox_quota_bytes: u64,
    /// Per mailbox.
    pub white_space_bytes: u64,
    /// Per mailbox.
    pub deleted_item_retention_bytes: u64,
    /// Per mailbox: quota + white space + deleted item retention.
    pub mailbox_on_disk_bytes: u64,
    pub database_size_bytes: u64,
    #[serde(serialize_with = "whole_as_integer")]
    pub content_index_percent: f64,
    pub content_index_bytes: u64,
    pub database_volume_bytes: u64,
    pub log_volume_bytes: u64,
    /// Database and log volumes of every copy of every database of the solution.
    pub storage_total_bytes: u64,
    /// What `init` fills per database: largest database's mailboxes × quota × capacity %.
    pub test_database_size_bytes: u64,
    /// Jetstress's cache per database instance while testing.
    pub database_cache_min_bytes: u64,
    pub database_cache_max_bytes: u64,
    /// Production database cache per database from Microsoft's per-mailbox table (2010 and
    /// later, with a messages-per-day profile); None otherwise.
    pub database_cache_production_bytes: Option<u64>,
    pub steps: Vec<Step>,
    /// Things the engineer should know that are not errors.
    pub notes: Vec<String>,
    /// Things that go against published guidance (a database larger than Microsoft
    /// recommends); the plan is still made.
    pub warnings: Vec<String>,
}

/// Writes a float that is a whole number as an integer (459, not 459.0), so readers that compare
/// JSON numbers as integers see what the report printed.
fn whole_as_integer<S: Serializer>(value: &f64, serializer: S) -> Result<S::Ok, S::Error> {
    if value.is_finite() && value.fract() == 0.0 && value.abs() < 9.0e15 {
        serializer.serialize_i64(*value as i64)
    } else {
        serializer.serialize_f64(*value)
    }
}

/// Rounds to `decimals` places; used on every IOPS figure so float noise never shows or counts.
fn round_to(value: f64, decimals: i32) -> f64 {
    let scale = 10f64.powi(decimals);
    (value * scale).round() / scale
}

/// A number as people write it in reports: thousands separated, trailing zeros dropped.
pub fn format_number(value: f64) -> String {
    let rounded = round_to(value, 4);
    let text = format!("{rounded:.4}");
    let (whole, fraction) = text.split_once('.').unwrap_or((&text, ""));
    let fraction = fraction.trim_end_matches('0');
    let (sign, digits) = match whole.strip_prefix('-') {
        Some(rest) => ("-", rest),
        None => ("", whole),
    };
    let mut grouped = String::new();
    for (index, digit) in digits.chars().enumerate() {
        if index > 0 && (digits.len() - index) % 3 == 0 {
            grouped.push(',');
        }
        grouped.push(digit);
    }
    if fraction.is_empty() {
        format!("{sign}{grouped}")
    } else {
        format!("{sign}{grouped}.{fraction}")
    }
}

/// A byte count in the largest binary unit, two decimals: "1.49 TiB".
/// The IOPS per mailbox as a report states it: the base figure and the headroom as given, then
/// what is tested ("0.13 + 20% headroom = 0.156 tested"), as the Lenovo report writes "0.13 (0.16
/// tested for 20% growth)"; without headroom the figure alone ("0.16, no headroom added").
pub fn iops_with_headroom_text(base: f64, headroom_percent: f64, tested: f64) -> String {
    if headroom_percent == 0.0 {
        format!("{}, no headroom added", format_number(base))
    } else {
        format!(
            "{} + {}% headroom = {} tested",
            format_number(base),
            format_number(headroom_percent),
            format_number(tested)
        )
    }
}

pub fn format_bytes(bytes: u64) -> String {
    let units = [
        (1u64 << 40, "TiB"),
        (ByteSize::GIB, "GiB"),
        (ByteSize::MIB, "MiB"),
        (ByteSize::KIB, "KiB"),
    ];
    for (unit, name) in units {
        if bytes >= unit {
            return format!(
                "{} {name}",
                format_number(round_to(bytes as f64 / unit as f64, 2))
            );
        }
    }
    format!("{bytes} B")
}

fn percent_of(bytes: f64, percent: f64) -> f64 {
    bytes * percent / 100.0
}

fn to_bytes(value: f64) -> u64 {
    // Sizes are computed in f64 (percentages) and always round up: a volume a byte short is
    // a volume too small.
    if value <= 0.0 {
        0
    } else if value >= u64::MAX as f64 {
        u64::MAX
    } else {
        value.ceil() as u64
    }
}

fn check_percent(flag: &'static str, value: f64, fix: &str) -> Result<(), PlanError> {
    if !value.is_finite() || !(0.0..=100.0).contains(&value) {
        return Err(invalid(flag, format!("is {value}"), fix));
    }
    Ok(())
}

/// Checks every input before any arithmetic; the first problem is returned with its flag.
pub fn validate(inputs: &PlanInputs) -> Result<(), PlanError> {
    validate_profile(inputs)?;
    validate_layout(inputs)?;
    validate_disks(inputs)?;
    validate_overheads(inputs)?;
    Ok(())
}

/// The mailboxes and their profile: count, IOPS or messages per day, headroom, size.
fn validate_profile(inputs: &PlanInputs) -> Result<(), PlanError> {
    if inputs.mailboxes == 0 {
        return Err(invalid(
            "--mailboxes",
            "is 0",
            "give the number of mailboxes of the whole solution, like --mailboxes 1000",
        ));
    }
    match (inputs.iops_per_mailbox, inputs.messages_per_day) {
        (None, None) => {
            return Err(invalid(
                "--iops-per-mailbox",
                "is missing",
                "give --iops-per-mailbox (like 0.15), or --messages-per-day with --exchange-version",
            ));
        }
        (Some(iops), _) if !iops.is_finite() || iops <= 0.0 || iops > 100.0 => {
            return Err(invalid(
                "--iops-per-mailbox",
                format!("is {iops}"),
                "give a figure above 0 (published profiles range from 0.03 to 1.5)",
            ));
        }
        _ => {}
    }
    if let Some(messages) = inputs.messages_per_day {
        let version = inputs
            .exchange_version
            .unwrap_or(ExchangeVersion::Exchange2013);
        if messages == 0 {
            return Err(invalid(
                "--messages-per-day",
                "is 0",
                "give the messages sent and received per mailbox per day, like 150",
            ));
        }
        let limit = tables::table_limit(version);
        if inputs.iops_per_mailbox.is_none() && messages > limit {
            return Err(invalid(
                "--messages-per-day",
                format!("is {messages}, beyond Exchange {version}'s table (up to {limit})"),
                "give --iops-per-mailbox from your own measurements instead",
            ));
        }
    }
    if !inputs.headroom_percent.is_finite()
        || inputs.headroom_percent < 0.0
        || inputs.headroom_percent > 1000.0
    {
        return Err(invalid(
            "--headroom",
            format!("is {}", inputs.headroom_percent),
            "give a percentage of 0 or more (ESRP uses 20)",
        ));
    }
    Ok(())
}

/// Servers, databases and copies.
fn validate_layout(inputs: &PlanInputs) -> Result<(), PlanError> {
    if inputs.mailbox_size.bytes() == 0 {
        return Err(invalid(
            "--mailbox-size",
            "is 0",
            "give the mailbox quota, like 2GiB",
        ));
    }
    if inputs.servers == 0 {
        return Err(invalid(
            "--servers",
            "is 0",
            "give the number of mailbox servers carrying active databases, 1 or more",
        ));
    }
    if inputs.servers > inputs.mailboxes {
        return Err(invalid(
            "--servers",
            format!(
                "({}) is more than --mailboxes ({})",
                inputs.servers, inputs.mailboxes
            ),
            "give at most one server per mailbox",
        ));
    }
    if inputs.databases_per_server == 0 {
        return Err(invalid(
            "--databases-per-server",
            "is 0",
            "give 1 or more databases per server",
        ));
    }
    if inputs.databases_per_server > 1024 {
        return Err(invalid(
            "--databases-per-server",
            format!("is {}", inputs.databases_per_server),
            "give at most 1024 databases per server (a job holds up to 1024)",
        ));
    }
    let per_server = inputs.mailboxes.div_ceil(inputs.servers);
    if inputs.databases_per_server > per_server {
        return Err(invalid(
            "--databases-per-server",
            format!(
                "({}) is more than the {per_server} mailboxes each server carries",
                inputs.databases_per_server
            ),
            "give fewer databases per server, or more mailboxes, so every database holds a mailbox",
        ));
    }
    if inputs.copies_per_database == 0 || inputs.copies_per_database > 16 {
        return Err(invalid(
            "--copies",
            format!("is {}", inputs.copies_per_database),
            "give 1 for a single copy, or 2 to 16 copies per database (a DAG holds up to 16)",
        ));
    }
    if !(1..=100).contains(&inputs.capacity_percent) {
        return Err(invalid(
            "--capacity-percent",
            format!("is {}", inputs.capacity_percent),
            "give a percentage from 1 to 100",
        ));
    }
    Ok(())
}

/// The write share, the disks and the RAID group.
fn validate_disks(inputs: &PlanInputs) -> Result<(), PlanError> {
    check_percent(
        "--read-percent",
        inputs.read_percent,
        "give the read share of transactional I/O from 0 to 100, like 60",
    )?;
    if let Some(write) = inputs.write_percent {
        check_percent(
            "--write-percent",
            write,
            "give the write share from 0 to 100, or leave it out for 100 - read",
        )?;
        if inputs.read_percent + write > 100.0 {
            return Err(invalid(
                "--write-percent",
                format!(
                    "({write}) with --read-percent ({}) sums to {}",
                    inputs.read_percent,
                    inputs.read_percent + write
                ),
                "make the read and write shares sum to 100 or less",
            ));
        }
        if inputs.read_percent + write <= 0.0 {
            return Err(invalid(
                "--write-percent",
                "with --read-percent sums to 0",
                "give the shares of reads and writes",
            ));
        }
    }
    if let Some(disk) = inputs.disk_iops
        && (!disk.is_finite() || disk <= 0.0)
    {
        return Err(invalid(
            "--disk-iops",
            format!("is {disk}"),
            "give the random IOPS one disk sustains, above 0 (measure it with `jetproof probe`, or give --disk-kind)",
        ));
    }
    if let Some(size) = inputs.disk_size
        && size.bytes() < ByteSize::MIB
    {
        return Err(invalid(
            "--disk-size",
            format!("is {size}"),
            "give the capacity of one disk as the array formats it, like 450GB or 1.8TiB",
        ));
    }
    if let Some(group) = inputs.raid_group_disks
        && (group > 64 || inputs.raid.data_disks(group).is_none())
    {
        return Err(invalid(
            "--raid-group-disks",
            format!("is {group} for {}", inputs.raid),
            format!(
                "give the disks of one RAID group, parity or mirror included, up to 64: at least {} for {}{} (8D+1P is 9, or write 8+1)",
                inputs.raid.minimum_disks(),
                inputs.raid,
                if inputs.raid == RaidLevel::Raid10 {
                    ", an even count"
                } else {
                    ""
                }
            ),
        ));
    }
    Ok(())
}

/// The message size, the content index, free space, the log and the page size.
fn validate_overheads(inputs: &PlanInputs) -> Result<(), PlanError> {
    if inputs.message_size.bytes() == 0 {
        return Err(invalid(
            "--message-size",
            "is 0",
            "give the average message size (Microsoft's tables: 75KiB)",
        ));
    }
    if let Some(index) = inputs.content_index_percent {
        check_percent(
            "--content-index-percent",
            index,
            "give a percentage of the database size from 0 to 100",
        )?;
    }
    if !inputs.free_space_percent.is_finite()
        || inputs.free_space_percent < 0.0
        || inputs.free_space_percent >= 100.0
    {
        return Err(invalid(
            "--free-space-percent",
            format!("is {}", inputs.free_space_percent),
            "give a percentage from 0 to below 100 (Microsoft: 20)",
        ));
    }
    if inputs.log_file_size.is_some_and(|size| size.bytes() == 0) {
        return Err(invalid(
            "--log-file-size",
            "is 0",
            "give the size of one log file (Exchange 2007 and later: 1MiB; 2003: 5MiB)",
        ));
    }
    if inputs.log_truncation_failure_days == 0 {
        return Err(invalid(
            "--log-retention-days",
            "is 0",
            "give the days of logs the volume must hold when truncation stops, at least 1 (Microsoft: 3)",
        ));
    }
    if let Some(percent) = inputs.log_volume_percent {
        check_percent(
            "--log-volume-percent",
            percent,
            "give a percentage of the database volume from 0 to 100 (Hitachi: 10)",
        )?;
    }
    check_percent(
        "--mailbox-move-percent",
        inputs.mailbox_move_percent,
        "give a percentage from 0 to 100 (Microsoft: 1)",
    )?;
    if !jetproof_job::PAGE_SIZES.contains(&inputs.page_size.bytes()) {
        return Err(invalid(
            "--page-size",
            format!("is {}", inputs.page_size),
            "use 4KiB, 8KiB, 16KiB or 32KiB",
        ));
    }
    Ok(())
}

/// Sizes the solution. Validates first; then runs the steps of the sizing in order (in
/// `steps.rs`, one function per section), every figure recorded as a step.
pub fn plan(inputs: &PlanInputs) -> Result<Plan, PlanError> {
    validate(inputs)?;
    let mut sizing = Sizing::new(inputs);
    let iops = sizing.iops_per_mailbox()?;
    let mailboxes = sizing.mailboxes();
    let targets = sizing.targets(&mailboxes, &iops);
    let backend = sizing.backend(&targets);
    let iops_disks = sizing.disks_for_iops(&backend);
    let mailbox = sizing.mailbox_on_disk();
    let volume = sizing.database_volume(&mailboxes, &mailbox);
    let log_rule = sizing.log_rule(&iops);
    let log_volume = sizing.log_volume(log_rule, &mailboxes, &mailbox, &volume);
    let storage_total = sizing.storage_total(&volume, log_volume);
    let group = sizing.raid_group();
    let capacity = sizing.capacity_disks(&group, &volume, log_volume);
    let disks = sizing.disks_needed(&iops_disks, &capacity, &group);
    let recommended = sizing.recommended_size(&mailboxes, &mailbox, &volume);
    let test_database = sizing.test_database(&mailboxes)?;
    let caches = sizing.caches(&mailboxes, test_database);

    Ok(Plan {
        inputs: inputs.clone(),
        exchange_version: sizing.version,
        iops_per_mailbox_base: iops.base,
        iops_per_mailbox_source: iops.source,
        iops_per_mailbox: iops.with_headroom,
        mailboxes_per_server: mailboxes.per_server,
        mailboxes_per_database: mailboxes.per_database,
        mailboxes_largest_database: mailboxes.largest_database,
        target_iops_per_server: targets.server,
        target_iops_per_database: targets.database,
        target_iops_total: targets.total,
        read_iops_total: backend.reads_total,
        write_iops_total: backend.writes_total,
        raid_write_penalty: backend.penalty,
        backend_iops_per_server: backend.server,
        backend_iops_total: backend.total,
        backend_iops_all_copies: backend.all_copies,
        disk_iops: iops_disks.disk_iops,
        disk_iops_source: iops_disks.source,
        disks_needed_for_iops: disks.for_iops,
        disks_needed_for_capacity: capacity.total,
        disks_needed: disks.total,
        disks_needed_per_server: disks.server,
        disks_needed_all_copies: disks.all_copies,
        raid_group_disks: group.disks,
        raid_group_data_disks: group.data_disks,
        disk_size_bytes: inputs.disk_size.map(ByteSize::bytes),
        raid_group_usable_bytes: group.usable,
        log_disks_needed: capacity.logs,
        disks_needed_with_logs: capacity.logs.map(|logs| disks.total.saturating_add(logs)),
        database_size_recommended_max_bytes: recommended.as_ref().map(|r| r.0),
        database_size_recommended_max_source: recommended.map(|r| r.1),
        mailbox_quota_bytes: inputs.mailbox_size.bytes(),
        white_space_bytes: to_bytes(mailbox.white_space),
        deleted_item_retention_bytes: to_bytes(mailbox.retention),
        mailbox_on_disk_bytes: to_bytes(mailbox.on_disk),
        database_size_bytes: to_bytes(volume.database),
        content_index_percent: volume.index_percent,
        content_index_bytes: to_bytes(volume.index),
        database_volume_bytes: to_bytes(volume.volume),
        log_volume_bytes: to_bytes(log_volume),
        storage_total_bytes: to_bytes(storage_total),
        test_database_size_bytes: test_database,
        database_cache_min_bytes: caches.min,
        database_cache_max_bytes: caches.max,
        database_cache_production_bytes: caches.production,
        steps: sizing.steps.0,
        notes: sizing.notes,
        warnings: sizing.warnings,
    })
}

impl Plan {
    /// The job for ONE server of the plan (the busiest), as `init` and `run` read it: the
    /// server's mailboxes at the target IOPS per mailbox (headroom included), its databases at
    /// the test size, and Jetstress's cache sizes. Everything else is the default job.
    pub fn job(&self) -> Job {
        let mut job = Job::default();
        job.simulation.mailboxes = self.mailboxes_per_server;
        job.simulation.iops_per_mailbox = self.iops_per_mailbox;
        job.simulation.mailbox_size = self.inputs.mailbox_size;
        job.simulation.capacity_percent = self.inputs.capacity_percent;
        job.simulation.copies_per_database = self.inputs.copies_per_database;
        // validate() caps databases per server at 1024, well inside u32.
        job.storage.databases = u32::try_from(self.inputs.databases_per_server).unwrap_or(1024);
        job.storage.db_size = Some(ByteSize(self.test_database_size_bytes));
        job.storage.page_size = self.inputs.page_size;
        job.cache.min_size = ByteSize(self.database_cache_min_bytes);
        job.cache.max_size = ByteSize(self.database_cache_max_bytes);
        // A target is set, so let the run find the sessions that reach it (`docs/workload.md`).
        job.workload.threads = Threads::Auto;
        job
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn infortrend() -> PlanInputs {
        PlanInputs {
            mailboxes: 1000,
            iops_per_mailbox: Some(0.16),
            headroom_percent: 0.0,
            mailbox_size: ByteSize::gib(5),
            servers: 1,
            databases_per_server: 3,
            copies_per_database: 2,
            ..PlanInputs::default()
        }
    }

    fn hitachi() -> PlanInputs {
        PlanInputs {
            mailboxes: 40_800,
            iops_per_mailbox: Some(0.15),
            headroom_percent: 20.0,
            mailbox_size: ByteSize::gib(3),
            servers: 16,
            databases_per_server: 5,
            copies_per_database: 2,
            raid: RaidLevel::Raid5,
            ..PlanInputs::default()
        }
    }

    fn hp(disk_iops: f64) -> PlanInputs {
        PlanInputs {
            mailboxes: 5000,
            iops_per_mailbox: Some(1.0),
            headroom_percent: 0.0,
            mailbox_size: ByteSize::mib(100),
            read_percent: 66.0,
            write_percent: Some(33.0),
            raid: RaidLevel::Raid10,
            disk_iops: Some(disk_iops),
            capacity_percent: 75,
            ..PlanInputs::default()
        }
    }

    #[test]
    fn infortrend_1000_mailboxes() {
        let plan = plan(&infortrend()).expect("plans");
        assert_eq!(plan.target_iops_total, 160.0);
        assert_eq!(plan.target_iops_per_server, 160.0);
        assert_eq!(plan.mailboxes_per_database, 334, "1,000 / 3 rounded up");
        assert_eq!(plan.mailboxes_largest_database, 334);
        assert!(plan.notes.iter().any(|n| n.contains("334")));
    }

    #[test]
    fn uneven_servers_size_the_busiest() {
        let plan = plan(&PlanInputs {
            servers: 3,
            databases_per_server: 1,
            ..infortrend()
        })
        .expect("plans");
        assert_eq!(plan.mailboxes_per_server, 334);
        assert_eq!(plan.target_iops_per_server, 53.44);
        assert_eq!(plan.target_iops_total, 160.0);
        assert!(
            plan.notes.iter().any(|n| n.contains("busiest")),
            "{:?}",
            plan.notes
        );
    }

    #[test]
    fn hitachi_40800_mailboxes() {
        let plan = plan(&hitachi()).expect("plans");
        assert_eq!(plan.iops_per_mailbox, 0.18);
        assert_eq!(plan.mailboxes_per_server, 2550);
        assert_eq!(plan.mailboxes_per_database, 510);
        assert_eq!(plan.target_iops_per_server, 459.0);
        assert_eq!(plan.target_iops_total, 7344.0);
        // Hitachi's Table 6: 40,800 × 3 GB = 122,400 GB tested; our test size per database is
        // 510 × 3 GiB at 100% capacity.
        assert_eq!(plan.test_database_size_bytes, 510 * 3 * ByteSize::GIB);
    }

    #[test]
    fn hp_appendix_a() {
        let a = plan(&hp(180.0)).expect("plans");
        assert_eq!(a.target_iops_total, 5000.0);
        assert_eq!(a.read_iops_total, 3300.0);
        assert_eq!(a.write_iops_total, 1650.0);
        assert_eq!(a.backend_iops_total, 6600.0);
        assert_eq!(a.disks_needed, 37);
        let b = plan(&hp(150.0)).expect("plans");
        assert_eq!(b.backend_iops_total, 6600.0);
        assert_eq!(b.disks_needed, 44);
        assert!(a.notes.iter().any(|n| n.contains("99%")), "{:?}", a.notes);
    }

    #[test]
    fn hp_appendix_a_stays_iops_bound_with_its_72_gb_disks() {
        // HP's constants: "Disk Type = 72 GB-15K", 5,000 users of 100 MB, VRAID1.
        let inputs = PlanInputs {
            disk_size: Some(ByteSize::gib(72)),
            exchange_version: Some(ExchangeVersion::Exchange2003),
            ..hp(180.0)
        };
        let a = plan(&inputs).expect("plans");
        assert_eq!(a.disks_needed_for_iops, 37);
        // 5,000 × (100 MiB + 7% retention), no content index in 2003, / 0.8 free = 653 GiB over
        // 72 GiB mirrored pairs: 10 pairs.
        assert_eq!(a.disks_needed_for_capacity, Some(20));
        assert_eq!(a.disks_needed, 37);
        assert!(
            a.steps.iter().any(|s| s.formula.contains("IOPS-bound")),
            "{:?}",
            a.steps
        );
        assert!(a.warnings.is_empty(), "2003 has no recommended size");
    }

    fn hitachi_capacity() -> PlanInputs {
        // Table 9: 450 GB disks in RAID-5 (8D+1P) groups, 153,216 GB formatted over 48 groups
        // = 3,192 GB per group = 399 GB per data disk. The pool was sized for the tested
        // databases (122,400 GB, 79.9% used): quota only, with the 20% free-space reserve.
        PlanInputs {
            disk_size: Some(ByteSize::gib(399)),
            raid_group_disks: Some(9),
            disk_kind: Some(DiskKind::Rpm15k),
            overheads: Overheads {
                white_space: false,
                deleted_item_retention: false,
                content_index: false,
                free_space_reserve: true,
            },
            // Its log LUs: "at least 10 percent of the size of the database LUs" (line 446).
            log_volume_percent: Some(10.0),
            ..hitachi()
        }
    }

    #[test]
    fn hitachi_raid_layout_is_capacity_bound_432_database_and_45_log_disks() {
        let p = plan(&hitachi_capacity()).expect("plans");
        assert_eq!(p.raid_group_data_disks, 8);
        assert_eq!(p.raid_group_usable_bytes, Some(3192 * ByteSize::GIB));
        assert_eq!(p.database_volume_bytes * 80, 153_000 * ByteSize::GIB);
        assert_eq!(p.disks_needed_for_capacity, Some(432), "48 groups of 8D+1P");
        assert_eq!(p.log_disks_needed, Some(45), "5 groups for the log pool");
        assert_eq!(
            p.disks_needed_with_logs,
            Some(477),
            "Table 7: 477 disks tested"
        );
        // 7,344 × 60% + 4 × 7,344 × 40% = 16,156.8 back-end IOPS / 180 = 90 disks.
        assert_eq!(p.disks_needed_for_iops, 90);
        assert_eq!(p.disks_needed, 432);
        assert_eq!(p.disks_needed_all_copies, 864);
        assert!(
            p.warnings.is_empty(),
            "1.5 TiB with two copies is under 2 TB"
        );
    }

    #[test]
    fn a_database_over_microsofts_size_warns_naming_the_figure() {
        let one_copy = plan(&PlanInputs {
            copies_per_database: 1,
            ..hitachi()
        })
        .expect("plans");
        assert_eq!(one_copy.warnings.len(), 1, "{:?}", one_copy.warnings);
        let warning = &one_copy.warnings[0];
        assert!(
            warning.contains("200 GB without database copies"),
            "{warning}"
        );
        assert!(warning.contains("Microsoft"), "{warning}");
        let many_databases = plan(&PlanInputs {
            databases_per_server: 64,
            copies_per_database: 1,
            ..hitachi()
        })
        .expect("plans");
        // 2,550 / 64 → 40 mailboxes × 3 GiB and overheads: about 128 GiB, under 200 GB.
        assert!(
            many_databases.warnings.is_empty(),
            "{:?}",
            many_databases.warnings
        );
    }

    #[test]
    fn raid_group_disks_must_suit_the_level() {
        for (raid, group, ok) in [
            (RaidLevel::Raid5, 9, true),
            (RaidLevel::Raid5, 2, false),
            (RaidLevel::Raid10, 3, false),
            (RaidLevel::Raid10, 8, true),
            (RaidLevel::Raid6, 65, false),
        ] {
            let result = plan(&PlanInputs {
                raid,
                raid_group_disks: Some(group),
                disk_size: Some(ByteSize::gib(100)),
                ..hitachi()
            });
            assert_eq!(result.is_ok(), ok, "{raid} {group}: {result:?}");
            if let Err(e) = result {
                assert_eq!(e.flag(), "--raid-group-disks");
            }
        }
        let tiny = plan(&PlanInputs {
            disk_size: Some(ByteSize(1000)),
            ..hitachi()
        });
        assert_eq!(tiny.map_err(|e| e.flag()), Err("--disk-size"));
    }

    #[test]
    fn without_a_disk_size_capacity_is_not_counted_and_a_note_says_so() {
        let p = plan(&hitachi()).expect("plans");
        assert_eq!(p.disks_needed_for_capacity, None);
        assert_eq!(p.disks_needed, p.disks_needed_for_iops);
        assert!(p.notes.iter().any(|n| n.contains("--disk-size")));
    }

    #[test]
    fn raid_penalties_change_the_back_end() {
        let expected = [
            (RaidLevel::Raid0, 5000.0),
            (RaidLevel::Raid10, 7000.0),
            (RaidLevel::Raid5, 11000.0),
            (RaidLevel::Raid6, 15000.0),
        ];
        for (raid, backend) in expected {
            let inputs = PlanInputs {
                raid,
                write_percent: None,
                read_percent: 60.0,
                ..hp(100.0)
            };
            let plan = plan(&inputs).expect("plans");
            assert_eq!(plan.backend_iops_total, backend, "{raid}");
            assert_eq!(plan.disks_needed, (backend / 100.0) as u64, "{raid}");
        }
    }

    #[test]
    fn messages_per_day_use_the_version_table() {
        let inputs = PlanInputs {
            mailboxes: 1000,
            messages_per_day: Some(200),
            exchange_version: Some(ExchangeVersion::Exchange2013),
            databases_per_server: 3,
            ..PlanInputs::default()
        };
        let plan = plan(&inputs).expect("plans");
        assert_eq!(plan.iops_per_mailbox_base, 0.134);
        // Infortrend's "0.16 (200 messages, including 20% overhead)" is 0.134 × 1.2 rounded.
        assert_eq!(plan.iops_per_mailbox, 0.1608);
        assert_eq!(
            plan.database_cache_production_bytes,
            Some(334 * 12 * ByteSize::MIB)
        );
    }

    #[test]
    fn overheads_are_each_shown_and_switchable() {
        let base = PlanInputs {
            mailboxes: 100,
            iops_per_mailbox: Some(0.1),
            messages_per_day: Some(100),
            exchange_version: Some(ExchangeVersion::Exchange2010),
            mailbox_size: ByteSize::gib(1),
            ..PlanInputs::default()
        };
        let all = plan(&base).expect("plans");
        let quota = ByteSize::GIB as f64;
        let white = 100.0 * 75.0 * 1024.0;
        let retention = 100.0 * 75.0 * 1024.0 * 14.0 + quota * 0.07;
        assert_eq!(all.white_space_bytes, white as u64);
        assert_eq!(all.deleted_item_retention_bytes, retention.ceil() as u64);
        let database = 100.0 * (quota + white + retention);
        assert!((all.database_size_bytes as f64 - database).abs() <= 1.0);
        assert_eq!(all.content_index_percent, 10.0);
        let volume = (database * 1.1) / 0.8;
        assert!((all.database_volume_bytes as f64 - volume).abs() <= 2.0);
        for step in [
            "White space",
            "Deleted item",
            "Content index",
            "Database volume",
        ] {
            assert!(
                all.steps.iter().any(|s| s.description.starts_with(step)),
                "{step}"
            );
        }

        let none = plan(&PlanInputs {
            overheads: Overheads {
                white_space: false,
                deleted_item_retention: false,
                content_index: false,
                free_space_reserve: false,
            },
            ..base
        })
        .expect("plans");
        assert_eq!(none.white_space_bytes, 0);
        assert_eq!(none.deleted_item_retention_bytes, 0);
        assert_eq!(none.content_index_bytes, 0);
        assert_eq!(none.database_size_bytes, 100 * ByteSize::GIB);
        assert_eq!(none.database_volume_bytes, 100 * ByteSize::GIB);
    }

    #[test]
    fn bad_inputs_name_their_flag() {
        let cases: Vec<(PlanInputs, &str)> = vec![
            (
                PlanInputs {
                    mailboxes: 0,
                    ..hitachi()
                },
                "--mailboxes",
            ),
            (
                PlanInputs {
                    servers: 0,
                    ..hitachi()
                },
                "--servers",
            ),
            (
                PlanInputs {
                    read_percent: 101.0,
                    ..hitachi()
                },
                "--read-percent",
            ),
            (
                PlanInputs {
                    disk_iops: Some(0.0),
                    ..hitachi()
                },
                "--disk-iops",
            ),
            (
                PlanInputs {
                    iops_per_mailbox: Some(-1.0),
                    ..hitachi()
                },
                "--iops-per-mailbox",
            ),
            (
                PlanInputs {
                    iops_per_mailbox: None,
                    messages_per_day: None,
                    ..hitachi()
                },
                "--iops-per-mailbox",
            ),
            (
                PlanInputs {
                    databases_per_server: 0,
                    ..hitachi()
                },
                "--databases-per-server",
            ),
            (
                PlanInputs {
                    databases_per_server: 3000,
                    ..hitachi()
                },
                "--databases-per-server",
            ),
            (
                PlanInputs {
                    mailboxes: 10,
                    servers: 5,
                    databases_per_server: 3,
                    ..hitachi()
                },
                "--databases-per-server",
            ),
            (
                PlanInputs {
                    copies_per_database: 0,
                    ..hitachi()
                },
                "--copies",
            ),
            (
                PlanInputs {
                    headroom_percent: -5.0,
                    ..hitachi()
                },
                "--headroom",
            ),
            (
                PlanInputs {
                    write_percent: Some(50.0),
                    read_percent: 60.0,
                    ..hitachi()
                },
                "--write-percent",
            ),
            (
                PlanInputs {
                    iops_per_mailbox: None,
                    messages_per_day: Some(900),
                    ..hitachi()
                },
                "--messages-per-day",
            ),
            (
                PlanInputs {
                    mailbox_size: ByteSize(10),
                    ..hitachi()
                },
                "--mailbox-size",
            ),
        ];
        for (inputs, flag) in cases {
            let error = plan(&inputs).expect_err(flag);
            assert_eq!(error.flag(), flag, "{error}");
            assert!(error.to_string().contains(flag), "{error}");
        }
    }

    #[test]
    fn the_job_is_valid_and_carries_the_plan() {
        let plan = plan(&hitachi()).expect("plans");
        let job = plan.job();
        job.validate().expect("valid job");
        let back = Job::parse(&job.to_toml(), "round trip").expect("parses");
        assert_eq!(back.simulation.mailboxes, 2550);
        assert_eq!(back.storage.databases, 5);
        assert_eq!(back.target_iops(), Some(459.0));
        assert_eq!(back.cache.max_size, ByteSize::mib(256));
        assert_eq!(back.storage.db_size.map(|s| s.bytes() % 32768), Some(0));
    }

    #[test]
    fn the_esrp_job_has_esrp_durations_and_checksums() {
        let mut job = plan(&hitachi()).expect("plans").job();
        apply_esrp(&mut job);
        job.validate().expect("valid");
        let back = Job::parse(&job.to_toml(), "esrp").expect("parses");
        assert_eq!(back.run.duration.as_duration().as_secs(), 7200);
        assert_eq!(back.run.stress_duration.as_duration().as_secs(), 86_400);
        assert_eq!(back.run.recovery_log_files, 500);
        assert!(back.run.checksum_after_performance && back.run.checksum_after_stress);
    }

    #[test]
    fn json_has_the_named_figures_as_integers_when_whole() {
        let plan = plan(&hitachi()).expect("plans");
        let value = serde_json::to_value(&plan).expect("serialises");
        assert_eq!(value["target_iops_per_server"], serde_json::json!(459));
        assert_eq!(value["target_iops_total"], serde_json::json!(7344));
        for key in [
            "mailboxes_per_server",
            "mailboxes_per_database",
            "backend_iops_total",
            "disks_needed",
            "disks_needed_for_iops",
            "disks_needed_for_capacity",
            "database_volume_bytes",
            "log_volume_bytes",
            "warnings",
            "steps",
        ] {
            assert!(value.get(key).is_some(), "{key}");
        }
    }

    #[test]
    fn numbers_format_as_reports_print_them() {
        assert_eq!(format_number(7344.0), "7,344");
        assert_eq!(format_number(0.18000000000000002), "0.18");
        assert_eq!(format_number(1234567.5), "1,234,567.5");
        assert_eq!(format_bytes(3 * ByteSize::GIB), "3 GiB");
        assert_eq!(format_bytes(1536), "1.5 KiB");
    }
}
