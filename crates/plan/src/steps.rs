//! The steps of [`plan`](crate::plan), one function per section of the sizing, in the order
//! they run: the IOPS per mailbox, the mailboxes, the target IOPS, the back-end IOPS and the
//! disks they need, the mailbox on disk, the database and its volume, the log volume, the
//! storage of every copy, the RAID groups and the disks capacity needs, the disks needed, the
//! recommended database size, the test database and the caches. Each step reads the inputs
//! (through [`Sizing`]) and the figures of the steps before it, passed as the small structs
//! the earlier steps return, and records its arithmetic as [`Step`]s, notes and warnings in
//! [`Sizing`], in the order they are computed.

use jetproof_job::ByteSize;

use crate::{
    DiskKind, ExchangeVersion, JETSTRESS_CACHE_MAX, JETSTRESS_CACHE_MIN, PlanError, PlanInputs,
    Step, format_bytes, format_number, invalid, percent_of, round_to, tables, to_bytes,
};

/// Records steps as they are computed.
pub(crate) struct Steps(pub(crate) Vec<Step>);

impl Steps {
    fn push(&mut self, description: &str, formula: String, figure: String) {
        self.0.push(Step {
            description: description.to_string(),
            formula,
            figure,
        });
    }
}

/// What every step reads and adds to: the inputs, the Exchange version and the copies per
/// database in force, and the steps, notes and warnings recorded so far.
pub(crate) struct Sizing<'a> {
    pub(crate) inputs: &'a PlanInputs,
    pub(crate) version: ExchangeVersion,
    pub(crate) copies: u32,
    pub(crate) steps: Steps,
    pub(crate) notes: Vec<String>,
    pub(crate) warnings: Vec<String>,
}

/// The IOPS per mailbox before headroom, where it came from, and with headroom.
pub(crate) struct Iops {
    pub(crate) base: f64,
    pub(crate) source: String,
    pub(crate) with_headroom: f64,
}

/// Mailboxes per server (the busiest) and per database (the largest; the same figure, every
/// database sized for the most it holds).
pub(crate) struct Mailboxes {
    pub(crate) per_server: u64,
    pub(crate) per_database: u64,
    pub(crate) largest_database: u64,
}

/// Target transactional IOPS per server, per database and in total.
pub(crate) struct Targets {
    pub(crate) server: f64,
    pub(crate) database: f64,
    pub(crate) total: f64,
}

/// The RAID write penalty, and the reads, writes and back-end IOPS the read and write shares
/// give.
pub(crate) struct Backend {
    pub(crate) penalty: u32,
    pub(crate) reads_total: f64,
    pub(crate) writes_total: f64,
    pub(crate) total: f64,
    pub(crate) server: f64,
    /// Back-end IOPS if every copy of every database is on the same storage.
    pub(crate) all_copies: f64,
}

/// The IOPS of one disk, where it came from, and the disks the back-end IOPS need (in total,
/// per server, and for every copy on the same storage).
pub(crate) struct IopsDisks {
    pub(crate) disk_iops: f64,
    pub(crate) source: String,
    pub(crate) total: u64,
    pub(crate) server: u64,
    pub(crate) all_copies: u64,
}

/// One mailbox on disk, in bytes: the quota, white space, deleted item retention and their sum.
pub(crate) struct MailboxOnDisk {
    pub(crate) quota: f64,
    pub(crate) white_space: f64,
    pub(crate) retention: f64,
    pub(crate) on_disk: f64,
}

/// The largest database, its content index and its volume (with the free space reserve), in
/// bytes, and the content index and free space percentages in force.
pub(crate) struct DatabaseVolume {
    pub(crate) database: f64,
    pub(crate) index_percent: f64,
    pub(crate) index: f64,
    pub(crate) free: f64,
    pub(crate) volume: f64,
}

/// The messages per day, the log files per mailbox per day and why that profile applies, as
/// the calculator's log rule takes them; with the size of one log file.
pub(crate) struct LogRule {
    pub(crate) log_file_bytes: u64,
    pub(crate) by_rule: Option<(u32, u64, String)>,
}

/// A RAID group: its disks, those that hold data, and its usable capacity (None without
/// `disk_size`).
pub(crate) struct RaidGroup {
    pub(crate) disks: u32,
    pub(crate) data_disks: u32,
    pub(crate) usable: Option<u64>,
}

/// The disks capacity needs, in whole RAID groups: database disks in total and per server, and
/// log disks; all None without `disk_size`.
pub(crate) struct CapacityDisks {
    pub(crate) total: Option<u64>,
    pub(crate) server: Option<u64>,
    pub(crate) logs: Option<u64>,
}

/// The database disks: for IOPS alone, and the larger of IOPS and capacity in total, per server
/// and for every copy.
pub(crate) struct Disks {
    pub(crate) for_iops: u64,
    pub(crate) total: u64,
    pub(crate) server: u64,
    pub(crate) all_copies: u64,
}

/// The caches per database instance while testing (minimum, maximum) and in production.
pub(crate) struct Caches {
    pub(crate) min: u64,
    pub(crate) max: u64,
    pub(crate) production: Option<u64>,
}

/// `bytes` with the free space reserve: the volume of which `free` percent stays free.
fn reserve(bytes: f64, free: f64) -> f64 {
    bytes / (1.0 - free / 100.0)
}

/// `bytes` in whole RAID groups of `usable` bytes each, counted in disks (`group_disks` per
/// group).
fn whole_groups(bytes: f64, usable: u64, group_disks: u32) -> u64 {
    let groups = round_to(bytes / usable as f64, 6).ceil();
    let groups = if groups >= u64::MAX as f64 {
        u64::MAX
    } else {
        groups as u64
    };
    groups.saturating_mul(u64::from(group_disks))
}

/// The cache per instance the job file carries (minimum, maximum): Jetstress's 32 MiB / 256 MiB
/// when the test database is at least 16 times the maximum; below that, a sixteenth of the
/// database in whole pages (at least 16 pages, the job's smallest cache), the minimum lowered to
/// it. A run whose cache maximum holds the database is refused (`docs/refusals.md`), so a
/// rehearsal's small databases would otherwise get a job that cannot run; a sixteenth keeps
/// most reads misses, as the cache of a full-size database does. The same sixteenth is what the
/// refusal suggests.
fn test_cache(test_database: u64, page: u64) -> (u64, u64) {
    let max = JETSTRESS_CACHE_MAX.bytes();
    if test_database / 16 >= max {
        return (JETSTRESS_CACHE_MIN.bytes(), max);
    }
    let max = (test_database / 16 / page * page).max(16 * page);
    (JETSTRESS_CACHE_MIN.bytes().min(max), max)
}

impl<'a> Sizing<'a> {
    /// Starts a sizing of `inputs` (validated): the Exchange version (2013 when unset) and the
    /// copies per database, nothing recorded yet.
    pub(crate) fn new(inputs: &'a PlanInputs) -> Self {
        Sizing {
            inputs,
            version: inputs
                .exchange_version
                .unwrap_or(ExchangeVersion::Exchange2013),
            copies: inputs.copies_per_database,
            steps: Steps(Vec::new()),
            notes: Vec::new(),
            warnings: Vec::new(),
        }
    }

    /// The IOPS per mailbox before headroom (`iops_per_mailbox`, or the version's table row of
    /// `messages_per_day` and the copies; a note when both are given) and with `headroom_percent`.
    pub(crate) fn iops_per_mailbox(&mut self) -> Result<Iops, PlanError> {
        let inputs = self.inputs;
        // IOPS per mailbox: given, or from the version's table.
        let table = inputs
            .messages_per_day
            .and_then(|m| tables::iops_per_mailbox(self.version, m, self.copies));
        let (iops_base, iops_source) = match (inputs.iops_per_mailbox, &table) {
            (Some(iops), Some(figure)) => {
                self.notes.push(format!(
                    "--iops-per-mailbox {} is used; the {} gives {} for this profile",
                    format_number(iops),
                    figure.row,
                    format_number(figure.value)
                ));
                (iops, "given with --iops-per-mailbox".to_string())
            }
            (Some(iops), None) => (iops, "given with --iops-per-mailbox".to_string()),
            (None, Some(figure)) => (figure.value, format!("{} ({})", figure.row, figure.source)),
            (None, None) => {
                // validate() refuses this combination; kept as an error, not a panic.
                return Err(invalid(
                    "--messages-per-day",
                    "has no row in the table",
                    "give --iops-per-mailbox",
                ));
            }
        };
        self.steps.push(
            "IOPS per mailbox before headroom",
            iops_source.clone(),
            format_number(iops_base),
        );
        let iops = round_to(iops_base * (1.0 + inputs.headroom_percent / 100.0), 6);
        self.steps.push(
            "IOPS per mailbox with headroom",
            format!(
                "{} × (1 + {}%)",
                format_number(iops_base),
                format_number(inputs.headroom_percent)
            ),
            format_number(iops),
        );
        Ok(Iops {
            base: iops_base,
            source: iops_source,
            with_headroom: iops,
        })
    }

    /// Mailboxes per server and per database from `mailboxes`, `servers` and
    /// `databases_per_server`, both rounded up (a note when a division leaves a remainder).
    pub(crate) fn mailboxes(&mut self) -> Mailboxes {
        let inputs = self.inputs;
        // Mailboxes.
        let per_server = inputs.mailboxes.div_ceil(inputs.servers);
        self.steps.push(
            "Mailboxes per server",
            format!(
                "{} mailboxes / {} servers{}",
                format_number(inputs.mailboxes as f64),
                inputs.servers,
                if inputs.mailboxes.is_multiple_of(inputs.servers) {
                    ""
                } else {
                    ", rounded up (the busiest server)"
                }
            ),
            format_number(per_server as f64),
        );
        if !inputs.mailboxes.is_multiple_of(inputs.servers) {
            self.notes.push(format!(
                "{} mailboxes do not divide evenly over {} servers: the busiest server carries {per_server}, and the per-server figures and the job file are for it",
                inputs.mailboxes, inputs.servers
            ));
        }
        // Whole mailboxes, rounded up: every database is sized for the most it holds. The Lenovo
        // report sizes 750 / 4 as 188; Infortrend's prints 1,000 / 3 as 333 (rounded down), but its
        // databases must still hold 334 between them, so the plan says 334 and notes the division.
        let per_database = per_server.div_ceil(inputs.databases_per_server);
        let largest_database = per_database;
        let even = per_server.is_multiple_of(inputs.databases_per_server);
        self.steps.push(
            "Mailboxes per database",
            format!(
                "{} / {} databases{}",
                format_number(per_server as f64),
                inputs.databases_per_server,
                if even {
                    ""
                } else {
                    ", rounded up to whole mailboxes"
                }
            ),
            format_number(per_database as f64),
        );
        if !even {
            self.notes.push(format!(
                "{} mailboxes per server do not divide into {} databases ({}): each database is sized for {per_database} whole mailboxes, rounded up (the Lenovo ESRP report sizes 750 / 4 as 188)",
                per_server,
                inputs.databases_per_server,
                format_number(round_to(per_server as f64 / inputs.databases_per_server as f64, 2))
            ));
        }
        Mailboxes {
            per_server,
            per_database,
            largest_database,
        }
    }

    /// Target transactional IOPS per server, per database and in total: the mailboxes of each
    /// (the busiest server, the largest database, `mailboxes`) × the IOPS with headroom.
    pub(crate) fn targets(&mut self, mailboxes: &Mailboxes, iops: &Iops) -> Targets {
        let inputs = self.inputs;
        let per_server = mailboxes.per_server;
        let largest_database = mailboxes.largest_database;
        let iops = iops.with_headroom;
        // Target transactional IOPS.
        let target_server = round_to(per_server as f64 * iops, 2);
        self.steps.push(
            "Target transactional IOPS per server",
            format!(
                "{} mailboxes × {}",
                format_number(per_server as f64),
                format_number(iops)
            ),
            format_number(target_server),
        );
        let target_database = round_to(largest_database as f64 * iops, 2);
        self.steps.push(
            "Target transactional IOPS per database",
            format!(
                "{} mailboxes × {}",
                format_number(largest_database as f64),
                format_number(iops)
            ),
            format_number(target_database),
        );
        let target_total = round_to(inputs.mailboxes as f64 * iops, 2);
        self.steps.push(
            "Target transactional IOPS in total",
            format!(
                "{} mailboxes × {}",
                format_number(inputs.mailboxes as f64),
                format_number(iops)
            ),
            format_number(target_total),
        );
        Targets {
            server: target_server,
            database: target_database,
            total: target_total,
        }
    }

    /// Reads, writes and back-end IOPS (in total, per server, and for every copy) from the
    /// targets, `read_percent`, `write_percent` (unset: 100 - read; a note when the two sum to
    /// less than 100) and the write penalty of `raid` (HP EVA8000 report, Appendix A).
    pub(crate) fn backend(&mut self, targets: &Targets) -> Backend {
        let inputs = self.inputs;
        let target_total = targets.total;
        let target_server = targets.server;
        // Back-end IOPS after the RAID write penalty (HP EVA8000 report, Appendix A).
        let read_percent = inputs.read_percent;
        let write_percent = inputs.write_percent.unwrap_or(100.0 - read_percent);
        if read_percent + write_percent < 100.0 {
            self.notes.push(format!(
                "read and write shares sum to {}%: {}% of the I/O is not counted (HP's Appendix A does the same with 66/33)",
                format_number(read_percent + write_percent),
                format_number(100.0 - read_percent - write_percent)
            ));
        }
        let penalty = inputs.raid.write_penalty();
        let reads_total = round_to(target_total * read_percent / 100.0, 2);
        let writes_total = round_to(target_total * write_percent / 100.0, 2);
        self.steps.push(
            "Reads and writes per second in total",
            format!(
                "{} × {}% reads; {} × {}% writes",
                format_number(target_total),
                format_number(read_percent),
                format_number(target_total),
                format_number(write_percent)
            ),
            format!(
                "{} reads + {} writes",
                format_number(reads_total),
                format_number(writes_total)
            ),
        );
        let backend = |target: f64| {
            round_to(
                target * read_percent / 100.0 + f64::from(penalty) * target * write_percent / 100.0,
                2,
            )
        };
        let backend_total = backend(target_total);
        self.steps.push(
            "Back-end IOPS in total (RAID write penalty)",
            format!(
                "({} × {}%) + ({penalty} × ({} × {}%)) for {}",
                format_number(target_total),
                format_number(read_percent),
                format_number(target_total),
                format_number(write_percent),
                inputs.raid
            ),
            format_number(backend_total),
        );
        let backend_server = backend(target_server);
        self.steps.push(
            "Back-end IOPS per server",
            format!(
                "({} × {}%) + ({penalty} × ({} × {}%))",
                format_number(target_server),
                format_number(read_percent),
                format_number(target_server),
                format_number(write_percent)
            ),
            format_number(backend_server),
        );
        Backend {
            penalty,
            reads_total,
            writes_total,
            total: backend_total,
            server: backend_server,
            all_copies: round_to(backend_total * f64::from(self.copies), 2),
        }
    }

    /// The IOPS of one disk and where it came from: `disk_iops`, or the typical figure of
    /// `disk_kind`, or of a 7.2k rpm disk (with a note).
    fn disk_iops(&mut self) -> (f64, String) {
        let inputs = self.inputs;
        let (disk_iops, disk_source) = match (inputs.disk_iops, inputs.disk_kind) {
            (Some(disk), _) => (disk, "given with --disk-iops".to_string()),
            (None, Some(kind)) => (
                kind.typical_iops(),
                format!("typical for {kind}, from --disk-kind; measure with `jetproof probe`"),
            ),
            (None, None) => {
                let kind = DiskKind::Rpm7200;
                self.notes.push(format!(
                    "no --disk-iops: the typical figure of a {kind} disk ({}) is assumed; measure yours with `jetproof probe`",
                    format_number(kind.typical_iops())
                ));
                (
                    kind.typical_iops(),
                    format!("assumed: typical for {kind}, the most conservative kind"),
                )
            }
        };
        self.steps.push(
            "IOPS per disk",
            disk_source.clone(),
            format_number(disk_iops),
        );
        (disk_iops, disk_source)
    }

    /// The IOPS of one disk (see [`Sizing::disk_iops`]) and the disks the back-end IOPS need,
    /// rounded up, at least the minimum of `raid`: in total, per server, and for every copy (a
    /// step when there is more than one).
    pub(crate) fn disks_for_iops(&mut self, backend: &Backend) -> IopsDisks {
        let inputs = self.inputs;
        let copies = self.copies;
        let (disk_iops, disk_source) = self.disk_iops();
        let disks_for = |backend: f64| -> u64 {
            // Rounded before the ceiling so 6,600 / 150 is 44, not 45 by float noise.
            let disks = round_to(backend / disk_iops, 6).ceil();
            let disks = if disks >= u64::MAX as f64 {
                u64::MAX
            } else {
                disks as u64
            };
            disks.max(inputs.raid.minimum_disks())
        };
        let backend_total = backend.total;
        let backend_server = backend.server;
        let disks_total = disks_for(backend_total);
        self.steps.push(
            "Disks needed for IOPS in total",
            format!(
                "{} back-end IOPS / {} IOPS per disk, rounded up (at least {} for {})",
                format_number(backend_total),
                format_number(disk_iops),
                inputs.raid.minimum_disks(),
                inputs.raid
            ),
            format_number(disks_total as f64),
        );
        let disks_server = disks_for(backend_server);
        self.steps.push(
            "Disks needed for IOPS per server",
            format!(
                "{} / {}, rounded up",
                format_number(backend_server),
                format_number(disk_iops)
            ),
            format_number(disks_server as f64),
        );
        let backend_copies = backend.all_copies;
        let disks_copies = disks_for(backend_copies);
        if copies > 1 {
            self.steps.push(
                "Back-end IOPS and disks if all copies share the storage",
                format!(
                    "{} × {copies} copies; / {} per disk",
                    format_number(backend_total),
                    format_number(disk_iops)
                ),
                format!(
                    "{} IOPS, {} disks",
                    format_number(backend_copies),
                    format_number(disks_copies as f64)
                ),
            );
        }
        IopsDisks {
            disk_iops,
            source: disk_source,
            total: disks_total,
            server: disks_server,
            all_copies: disks_copies,
        }
    }

    /// White space per mailbox in bytes: one day of messages (`messages_per_day` ×
    /// `message_size`); 0 when switched off, or without a message profile (with a note).
    fn white_space(&mut self) -> f64 {
        let inputs = self.inputs;
        let message = inputs.message_size.bytes() as f64;
        match (inputs.overheads.white_space, inputs.messages_per_day) {
            (false, _) => {
                self.steps.push(
                    "White space per mailbox",
                    "switched off (--no-white-space)".to_string(),
                    "0".to_string(),
                );
                0.0
            }
            (true, None) => {
                self.notes.push(
                    "white space is one day of messages: give --messages-per-day to count it"
                        .to_string(),
                );
                self.steps.push(
                    "White space per mailbox",
                    "needs --messages-per-day; not counted".to_string(),
                    "0".to_string(),
                );
                0.0
            }
            (true, Some(m)) => {
                let bytes = f64::from(m) * message;
                self.steps.push(
                    "White space per mailbox",
                    format!(
                        "{m} messages/day × {}",
                        format_bytes(inputs.message_size.bytes())
                    ),
                    format_bytes(to_bytes(bytes)),
                );
                bytes
            }
        }
    }

    /// Deleted item retention (Recoverable Items) per mailbox in bytes: the retention window's
    /// messages (`messages_per_day` × `message_size` × `deleted_item_retention_days`) plus 1.2%
    /// and 5.8% of the quota `mailbox_size`; 0 when switched off.
    fn retention(&mut self) -> f64 {
        let inputs = self.inputs;
        let quota = inputs.mailbox_size.bytes() as f64;
        let message = inputs.message_size.bytes() as f64;
        let messages = inputs.messages_per_day;
        if inputs.overheads.deleted_item_retention {
            let days = f64::from(inputs.deleted_item_retention_days);
            let deleted = messages.map_or(0.0, |m| f64::from(m) * message * days);
            let bytes = deleted + quota * 0.012 + quota * 0.058;
            let formula = match messages {
                Some(m) => format!(
                    "{m} messages/day × {} × {} days + quota × 1.2% + quota × 5.8%",
                    format_bytes(inputs.message_size.bytes()),
                    inputs.deleted_item_retention_days
                ),
                None => "quota × 1.2% + quota × 5.8% (give --messages-per-day to add the retention window's messages)".to_string(),
            };
            self.steps.push(
                "Deleted item retention (Recoverable Items) per mailbox",
                formula,
                format_bytes(to_bytes(bytes)),
            );
            bytes
        } else {
            self.steps.push(
                "Deleted item retention (Recoverable Items) per mailbox",
                "switched off (--no-deleted-item-retention)".to_string(),
                "0".to_string(),
            );
            0.0
        }
    }

    /// One mailbox on disk: the quota (`mailbox_size`) + white space + deleted item retention
    /// (Microsoft, "Understanding Mailbox Database and Log Capacity Factors").
    pub(crate) fn mailbox_on_disk(&mut self) -> MailboxOnDisk {
        let inputs = self.inputs;
        // Capacity (Microsoft, "Understanding Mailbox Database and Log Capacity Factors").
        let quota = inputs.mailbox_size.bytes() as f64;
        let white_space = self.white_space();
        let retention = self.retention();
        let on_disk = quota + white_space + retention;
        self.steps.push(
            "Mailbox size on disk",
            format!(
                "quota {} + white space {} + retention {}",
                format_bytes(inputs.mailbox_size.bytes()),
                format_bytes(to_bytes(white_space)),
                format_bytes(to_bytes(retention))
            ),
            format_bytes(to_bytes(on_disk)),
        );
        MailboxOnDisk {
            quota,
            white_space,
            retention,
            on_disk,
        }
    }

    /// The largest database (its mailboxes × a mailbox on disk), its content index
    /// (`content_index_percent`, or the version's), and its volume with `free_space_percent`
    /// kept free; the index and the reserve 0 when switched off.
    pub(crate) fn database_volume(
        &mut self,
        mailboxes: &Mailboxes,
        mailbox: &MailboxOnDisk,
    ) -> DatabaseVolume {
        let inputs = self.inputs;
        let version = self.version;
        let largest_database = mailboxes.largest_database;
        let on_disk = mailbox.on_disk;
        let database = largest_database as f64 * on_disk;
        self.steps.push(
            "Database size",
            format!(
                "{} mailboxes × {}",
                format_number(largest_database as f64),
                format_bytes(to_bytes(on_disk))
            ),
            format_bytes(to_bytes(database)),
        );
        let index_percent = if inputs.overheads.content_index {
            inputs
                .content_index_percent
                .unwrap_or(version.content_index_percent())
        } else {
            0.0
        };
        let index = percent_of(database, index_percent);
        self.steps.push(
            "Content index",
            if inputs.overheads.content_index {
                format!(
                    "database × {}% ({})",
                    format_number(index_percent),
                    if inputs.content_index_percent.is_some() {
                        "given".to_string()
                    } else {
                        format!("Exchange {version}")
                    }
                )
            } else {
                "switched off (--no-content-index)".to_string()
            },
            format_bytes(to_bytes(index)),
        );
        let free = if inputs.overheads.free_space_reserve {
            inputs.free_space_percent
        } else {
            0.0
        };
        let database_volume = reserve(database + index, free);
        self.steps.push(
            "Database volume",
            if inputs.overheads.free_space_reserve {
                format!(
                    "(database + content index) / (1 - {}% free space)",
                    format_number(free)
                )
            } else {
                "database + content index (free space reserve switched off)".to_string()
            },
            format_bytes(to_bytes(database_volume)),
        );
        DatabaseVolume {
            database,
            index_percent,
            index,
            free,
            volume: database_volume,
        }
    }

    /// What the calculator's log rule takes: the size of one log file (`log_file_size`, or the
    /// version's), and the messages per day (`messages_per_day`, or the version's table row the
    /// IOPS per mailbox before headroom falls in) with the log files a mailbox writes a day.
    pub(crate) fn log_rule(&self, iops: &Iops) -> LogRule {
        let inputs = self.inputs;
        let version = self.version;
        let iops_base = iops.base;
        // The log volume by the Exchange calculator's rule (Microsoft, *Understanding Mailbox
        // Database and Log Capacity Factors*; docs/plan.md, section 8): the logs a database's
        // mailboxes write in the days truncation may stop, plus the logs of a week's mailbox moves,
        // with the free-space reserve. Its inputs: the messages per day (given, or the profile the
        // IOPS per mailbox is in the version's table), the log file size and the retention days.
        let log_file_bytes = inputs
            .log_file_size
            .map_or(tables::log_file_bytes(version), ByteSize::bytes);
        let log_messages = match inputs.messages_per_day {
            Some(m) => Some((m, "given with --messages-per-day".to_string())),
            None => tables::messages_for_iops(version, iops_base, self.copies).map(|m| {
                (
                    m,
                    format!(
                        "the {m} messages/day row: the first whose IOPS per mailbox in the {version} table is at least {}",
                        format_number(iops_base)
                    ),
                )
            }),
        };
        let by_rule = log_messages
            .and_then(|(m, why)| tables::log_files_per_mailbox_per_day(m).map(|l| (m, l, why)));
        LogRule {
            log_file_bytes,
            by_rule,
        }
    }

    /// The log volume of the largest database: `log_volume_percent` of the database volume when
    /// given; else the calculator's rule (its mailboxes' logs for `log_truncation_failure_days`
    /// plus `mailbox_move_percent` of them moved, with the free space reserve; a note when the
    /// message profile is assumed); else, with no message profile, 10% of the database volume.
    pub(crate) fn log_volume(
        &mut self,
        rule: LogRule,
        mailboxes: &Mailboxes,
        mailbox: &MailboxOnDisk,
        volume: &DatabaseVolume,
    ) -> f64 {
        let inputs = self.inputs;
        let largest_database = mailboxes.largest_database;
        let log_file_bytes = rule.log_file_bytes;
        let (quota, free, database_volume) = (mailbox.quota, volume.free, volume.volume);
        match (inputs.log_volume_percent, rule.by_rule) {
            (Some(percent), _) => {
                let bytes = percent_of(database_volume, percent);
                self.steps.push(
                    "Log volume",
                    format!(
                        "database volume × {}% (--log-volume-percent; Hitachi's best practice: at least 10%)",
                        format_number(percent)
                    ),
                    format_bytes(to_bytes(bytes)),
                );
                bytes
            }
            (None, Some((m, logs, why))) => {
                let days = f64::from(inputs.log_truncation_failure_days);
                let daily = largest_database as f64 * logs as f64 * log_file_bytes as f64;
                let moves =
                    percent_of(largest_database as f64, inputs.mailbox_move_percent) * quota;
                let bytes = reserve(daily * days + moves, free);
                if inputs.messages_per_day.is_none() {
                    self.notes.push(format!(
                        "the log volume assumes {m} messages per day ({why}); give --messages-per-day for your profile"
                    ));
                }
                self.steps.push(
                    "Log volume",
                    format!(
                        "({} mailboxes × {logs} logs/day ({m} messages/day) × {} per log × {} days + {}% of mailboxes moved × quota) / (1 - {}% free)",
                        format_number(largest_database as f64),
                        format_bytes(log_file_bytes),
                        inputs.log_truncation_failure_days,
                        format_number(inputs.mailbox_move_percent),
                        format_number(free)
                    ),
                    format_bytes(to_bytes(bytes)),
                );
                bytes
            }
            (None, None) => {
                let bytes = database_volume * 0.10;
                self.steps.push(
                    "Log volume",
                    "database volume × 10% (no message profile: the IOPS per mailbox is beyond the version's table; Hitachi's ratio, 175 GB log LU per 1,750 GB database LU; give --messages-per-day for Microsoft's log formula)".to_string(),
                    format_bytes(to_bytes(bytes)),
                );
                bytes
            }
        }
    }

    /// Database and log volumes of every copy of every database: (database volume + log
    /// volume) × `servers` × `databases_per_server` × the copies.
    pub(crate) fn storage_total(&mut self, volume: &DatabaseVolume, log_volume: f64) -> f64 {
        let inputs = self.inputs;
        let copies = self.copies;
        let databases_all = inputs.servers as f64 * inputs.databases_per_server as f64;
        let storage_total = (volume.volume + log_volume) * databases_all * f64::from(copies);
        self.steps.push(
            "Storage for every copy of every database",
            format!(
                "(database volume + log volume) × {} servers × {} databases × {copies} copies",
                inputs.servers, inputs.databases_per_server
            ),
            format_bytes(to_bytes(storage_total)),
        );
        storage_total
    }

    /// The RAID group in force: `raid_group_disks` (or the level's common width), its data
    /// disks, and its usable capacity (data disks × `disk_size`; None without it).
    pub(crate) fn raid_group(&self) -> RaidGroup {
        let inputs = self.inputs;
        let group_disks = inputs
            .raid_group_disks
            .unwrap_or(inputs.raid.default_group_disks());
        let data_disks = inputs.raid.data_disks(group_disks).unwrap_or(1).max(1);
        let group_usable = inputs
            .disk_size
            .map(|size| size.bytes().saturating_mul(u64::from(data_disks)));
        RaidGroup {
            disks: group_disks,
            data_disks,
            usable: group_usable,
        }
    }

    /// Disks for capacity with `disk_size`: one copy of every database on the storage under
    /// test, the database volumes (in total and of one server) and the log volumes each on
    /// disks of their own (both reference solutions keep them apart), counted in whole RAID
    /// groups. Without `disk_size`, none, and a note.
    pub(crate) fn capacity_disks(
        &mut self,
        group: &RaidGroup,
        volume: &DatabaseVolume,
        log_volume: f64,
    ) -> CapacityDisks {
        let inputs = self.inputs;
        let (group_disks, data_disks) = (group.disks, group.data_disks);
        let database_volume = volume.volume;
        let databases_all = inputs.servers as f64 * inputs.databases_per_server as f64;
        let database_pool = database_volume * databases_all;
        let log_pool = log_volume * databases_all;
        let per_server_pool = database_volume * inputs.databases_per_server as f64;
        let (Some(size), Some(usable)) = (inputs.disk_size, group.usable) else {
            self.notes.push(
                "no --disk-size: disks are counted for IOPS only; give the capacity of one disk to count them for capacity too".to_string(),
            );
            return CapacityDisks {
                total: None,
                server: None,
                logs: None,
            };
        };
        let group_text = format!(
            "{group_disks} disks per group ({data_disks} of data{})",
            if inputs.raid_group_disks.is_some() {
                ""
            } else {
                ", the level's common width: give --raid-group-disks"
            }
        );
        self.steps.push(
            "Usable capacity of one RAID group",
            format!(
                "{data_disks} data disks × {} for {} with {group_text}",
                format_bytes(size.bytes()),
                inputs.raid
            ),
            format_bytes(usable),
        );
        let database_disks = whole_groups(database_pool, usable, group_disks);
        self.steps.push(
            "Disks needed for capacity (database volumes, one copy)",
            format!(
                "{} database volume × {} databases / {} per group, rounded up to whole groups × {group_disks}",
                format_bytes(to_bytes(database_volume)),
                format_number(databases_all),
                format_bytes(usable)
            ),
            format_number(database_disks as f64),
        );
        let log_disks = whole_groups(log_pool, usable, group_disks);
        self.steps.push(
            "Log disks needed for capacity (log volumes, one copy)",
            format!(
                "{} log volume × {} databases / {} per group, rounded up to whole groups × {group_disks}",
                format_bytes(to_bytes(log_volume)),
                format_number(databases_all),
                format_bytes(usable)
            ),
            format_number(log_disks as f64),
        );
        CapacityDisks {
            total: Some(database_disks),
            server: Some(whole_groups(per_server_pool, usable, group_disks)),
            logs: Some(log_disks),
        }
    }

    /// The database disks: the larger of the IOPS and capacity counts, in total, per server and
    /// for every copy (a step saying which bound, and a note when the total is not a whole
    /// number of RAID groups).
    pub(crate) fn disks_needed(
        &mut self,
        iops: &IopsDisks,
        capacity: &CapacityDisks,
        group: &RaidGroup,
    ) -> Disks {
        let copies = self.copies;
        let group_disks = group.disks;
        let capacity_total = capacity.total;
        let disks_iops_total = iops.total;
        let disks_total = iops.total.max(capacity_total.unwrap_or(0));
        let disks_server = iops.server.max(capacity.server.unwrap_or(0));
        let disks_copies = iops.all_copies.max(
            capacity_total
                .map(|d| d.saturating_mul(u64::from(copies)))
                .unwrap_or(0),
        );
        if let Some(capacity) = capacity_total {
            self.steps.push(
                "Disks needed (the larger of IOPS and capacity)",
                format!(
                    "max({} for IOPS, {} for capacity): {}-bound",
                    format_number(disks_iops_total as f64),
                    format_number(capacity as f64),
                    if capacity > disks_iops_total {
                        "capacity"
                    } else {
                        "IOPS"
                    }
                ),
                format_number(disks_total as f64),
            );
            if !disks_total.is_multiple_of(u64::from(group_disks)) {
                self.notes.push(format!(
                    "{disks_total} disks is not a whole number of {group_disks}-disk RAID groups: the IOPS count is HP's, not rounded to groups; round up if your array builds fixed groups"
                ));
            }
        }
        Disks {
            for_iops: disks_iops_total,
            total: disks_total,
            server: disks_server,
            all_copies: disks_copies,
        }
    }

    /// Microsoft's recommended largest database for the version and copies, if published, and
    /// a warning when the database is larger.
    pub(crate) fn recommended_size(
        &mut self,
        mailboxes: &Mailboxes,
        mailbox: &MailboxOnDisk,
        volume: &DatabaseVolume,
    ) -> Option<(u64, String)> {
        let copies = self.copies;
        let (database, on_disk) = (volume.database, mailbox.on_disk);
        // Microsoft's recommended largest database.
        let recommended = tables::recommended_max_database_bytes(self.version, copies);
        if let Some((limit, source)) = &recommended
            && to_bytes(database) > *limit
        {
            self.warnings.push(format!(
                "each database holds {} ({} mailboxes × {}), more than Microsoft recommends: {source}. Use more databases per server (--databases-per-server){}",
                format_bytes(to_bytes(database)),
                format_number(mailboxes.largest_database as f64),
                format_bytes(to_bytes(on_disk)),
                if copies < 2 {
                    ", or two or more highly available copies"
                } else {
                    ""
                }
            ));
        }
        recommended
    }

    /// What `init` fills per database: the largest database's mailboxes × `mailbox_size` ×
    /// `capacity_percent`, rounded up to whole pages of `page_size`; refused under 32 pages.
    pub(crate) fn test_database(&mut self, mailboxes: &Mailboxes) -> Result<u64, PlanError> {
        let inputs = self.inputs;
        let largest_database = mailboxes.largest_database;
        let quota = inputs.mailbox_size.bytes() as f64;
        // What the test fills, and the caches.
        let page = inputs.page_size.bytes();
        let test_data =
            largest_database as f64 * quota * f64::from(inputs.capacity_percent) / 100.0;
        let test_database = to_bytes(test_data).div_ceil(page).saturating_mul(page);
        self.steps.push(
            "Test database size (what init fills)",
            format!(
                "{} mailboxes × {} × {}% capacity, rounded up to {} pages",
                format_number(largest_database as f64),
                format_bytes(inputs.mailbox_size.bytes()),
                inputs.capacity_percent,
                inputs.page_size
            ),
            format_bytes(test_database),
        );
        // 32 pages at least: the job's cache (16 pages at least, `cache.min_size`) must stay below
        // the database, or the run is refused (it would measure nothing but the log).
        if test_database < 32 * page {
            return Err(invalid(
                "--mailbox-size",
                format!(
                    "gives test databases of {} ({} mailboxes × {} × {}%)",
                    format_bytes(test_database),
                    largest_database,
                    inputs.mailbox_size,
                    inputs.capacity_percent
                ),
                format!(
                    "a database needs at least 32 pages ({}), twice the smallest cache; give a larger --mailbox-size or --capacity-percent, or fewer --databases-per-server",
                    ByteSize(32 * page)
                ),
            ));
        }
        Ok(test_database)
    }

    /// The database cache per instance while testing (from the test database and `page_size`,
    /// see [`test_cache`]) and per database in production (the largest database's mailboxes ×
    /// the version's MiB per mailbox for `messages_per_day`, where the table has one).
    pub(crate) fn caches(&mut self, mailboxes: &Mailboxes, test_database: u64) -> Caches {
        let inputs = self.inputs;
        let version = self.version;
        let largest_database = mailboxes.largest_database;
        let messages = inputs.messages_per_day;
        let page = inputs.page_size.bytes();
        let (cache_min, cache_max) = test_cache(test_database, page);
        self.steps.push(
            "Database cache per instance while testing",
            if cache_max == JETSTRESS_CACHE_MAX.bytes() {
                "Jetstress defaults (the test database is at least 16 times the 256 MiB maximum)"
                    .to_string()
            } else {
                format!(
                    "the test database / 16, whole pages, at least 16 pages: Jetstress's {} maximum would hold most or all of the {} database, and a run whose cache holds the database is refused (it would measure nothing but the log)",
                    format_bytes(JETSTRESS_CACHE_MAX.bytes()),
                    format_bytes(test_database)
                )
            },
            format!(
                "{} minimum, {} maximum",
                format_bytes(cache_min),
                format_bytes(cache_max)
            ),
        );
        let production_cache = messages
            .and_then(|m| tables::database_cache_mib_per_mailbox(version, m))
            .map(|mib| largest_database * mib * ByteSize::MIB);
        if let (Some(bytes), Some(m)) = (production_cache, messages) {
            self.steps.push(
                "Database cache per database in production",
                format!(
                    "{} mailboxes × {} MiB ({m} messages/day, Exchange {version} table)",
                    format_number(largest_database as f64),
                    tables::database_cache_mib_per_mailbox(version, m).unwrap_or(0)
                ),
                format_bytes(bytes),
            );
        }
        Caches {
            min: cache_min,
            max: cache_max,
            production: production_cache,
        }
    }
}
