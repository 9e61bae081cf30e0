//! Microsoft's published per-mailbox figures, by Exchange version and messages per day, and the
//! typical random IOPS of a disk by kind. Every table names its source; `docs/plan.md` quotes the
//! same sources and says which versions each applies to.
//!
//! Lookups round *up* to the next row: a profile of 120 messages a day is sized as the 150-message
//! row, so the plan never assumes less load than the user described. Beyond the last row there is
//! no published figure and the lookup fails; the caller then asks for `--iops-per-mailbox`.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// The Exchange versions whose sizing tables `plan` knows.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ExchangeVersion {
    #[serde(rename = "2003")]
    Exchange2003,
    #[serde(rename = "2010")]
    Exchange2010,
    #[serde(rename = "2013")]
    Exchange2013,
    #[serde(rename = "2016")]
    Exchange2016,
    #[serde(rename = "2019")]
    Exchange2019,
}

impl ExchangeVersion {
    pub const ALL: [ExchangeVersion; 5] = [
        ExchangeVersion::Exchange2003,
        ExchangeVersion::Exchange2010,
        ExchangeVersion::Exchange2013,
        ExchangeVersion::Exchange2016,
        ExchangeVersion::Exchange2019,
    ];

    /// Share of the database size taken by the content (search) index, in percent.
    /// 2010: 10% (Microsoft, "Understanding Mailbox Database and Log Capacity Factors").
    /// 2013 and later: 20% (Microsoft, "Ask the Perf Guy: Sizing Exchange 2013 Deployments").
    /// 2003: full-text indexing was optional and off by default, so nothing is added.
    pub fn content_index_percent(self) -> f64 {
        match self {
            ExchangeVersion::Exchange2003 => 0.0,
            ExchangeVersion::Exchange2010 => 10.0,
            _ => 20.0,
        }
    }
}

impl fmt::Display for ExchangeVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let year = match self {
            ExchangeVersion::Exchange2003 => "2003",
            ExchangeVersion::Exchange2010 => "2010",
            ExchangeVersion::Exchange2013 => "2013",
            ExchangeVersion::Exchange2016 => "2016",
            ExchangeVersion::Exchange2019 => "2019",
        };
        f.write_str(year)
    }
}

impl FromStr for ExchangeVersion {
    type Err = String;
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let year = text
            .trim()
            .trim_start_matches("exchange")
            .trim_start_matches("Exchange");
        ExchangeVersion::ALL
            .into_iter()
            .find(|v| v.to_string() == year.trim())
            .ok_or_else(|| {
                format!("`{text}` is not a version with a sizing table; give 2003, 2010, 2013, 2016 or 2019")
            })
    }
}

/// One row of Microsoft's 2003 user-profile table: the profile name, messages sent and received
/// per day, database IOPS per user, and the mailbox size the profile assumes.
/// Source: Microsoft, "Optimizing Storage for Exchange Server 2003", section "How to Calculate Your
/// Disk I/O Requirements" (learn.microsoft.com/previous-versions/tn-archive/bb125019(v=exchg.65)).
pub const EXCHANGE_2003_PROFILES: [(&str, u32, f64); 4] = [
    ("light (20 sent / 50 received)", 70, 0.5),
    ("average (30 sent / 75 received)", 105, 0.75),
    ("heavy (40 sent / 100 received)", 140, 1.0),
    ("large (60 sent / 150 received)", 210, 1.5),
];

/// Rows of the 2010 and 2013 tables: messages sent and received per mailbox per day.
pub const MESSAGE_ROWS: [u32; 10] = [50, 100, 150, 200, 250, 300, 350, 400, 450, 500];

/// Exchange 2010, IOPS per mailbox for a stand-alone database (one copy) and with two or more
/// copies (mailbox resiliency, DAG), per row of [`MESSAGE_ROWS`] (75 KB average message).
/// Source: Microsoft, "Understanding Database and Log Performance Factors", Exchange 2010
/// (learn.microsoft.com/previous-versions/office/exchange-server-2010/ee832791(v=exchg.141)),
/// table "Database cache and estimated IOPS per mailbox based on message activity".
pub const EXCHANGE_2010_IOPS_SINGLE_COPY: [f64; 10] =
    [0.06, 0.12, 0.18, 0.24, 0.30, 0.36, 0.42, 0.48, 0.54, 0.60];
pub const EXCHANGE_2010_IOPS_WITH_COPIES: [f64; 10] =
    [0.05, 0.10, 0.15, 0.20, 0.25, 0.30, 0.35, 0.40, 0.45, 0.50];

/// Exchange 2013 (applied to 2016 and 2019 too), IOPS per mailbox, active or passive copy.
/// Source: Microsoft Exchange Team Blog, "Ask the Perf Guy: Sizing Exchange 2013 Deployments"
/// (techcommunity.microsoft.com, May 2013), table of IOPS per mailbox by messages per day.
pub const EXCHANGE_2013_IOPS: [f64; 10] = [
    0.034, 0.067, 0.101, 0.134, 0.168, 0.201, 0.235, 0.268, 0.302, 0.335,
];

/// Database cache per mailbox in MiB for the rows of [`MESSAGE_ROWS`]: 3 MB per 50 messages,
/// identical in the 2010 and 2013 sources above.
pub const DATABASE_CACHE_MIB_PER_MAILBOX: [u64; 10] = [3, 6, 9, 12, 15, 18, 21, 24, 27, 30];

/// 1 MiB transaction log files generated per mailbox per day for the rows of [`MESSAGE_ROWS`]:
/// 10 per 50 messages. Source: Microsoft, "Understanding Mailbox Database and Log Capacity
/// Factors", Exchange 2010 (ee832796(v=exchg.141)), table "Number of transaction logs generated
/// per mailbox profile"; the 2013 sizing post keeps the same rates.
pub const LOG_FILES_PER_MAILBOX_PER_DAY: [u64; 10] = [10, 20, 30, 40, 50, 60, 70, 80, 90, 100];

/// What a table lookup found: the figure, and the row it came from, in words.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TableFigure {
    pub value: f64,
    pub row: String,
    pub source: &'static str,
}

const SOURCE_2003: &str =
    "Microsoft, Optimizing Storage for Exchange Server 2003 (bb125019), user profiles table";
const SOURCE_2010: &str =
    "Microsoft, Understanding Database and Log Performance Factors, Exchange 2010 (ee832791)";
const SOURCE_2013: &str =
    "Microsoft Exchange Team Blog, Ask the Perf Guy: Sizing Exchange 2013 Deployments (2013)";

/// Index of the first row of [`MESSAGE_ROWS`] at or above `messages_per_day`.
fn message_row(messages_per_day: u32) -> Option<usize> {
    MESSAGE_ROWS.iter().position(|&row| row >= messages_per_day)
}

/// IOPS per mailbox from the version's table, before headroom. `copies` matters for 2010 only.
pub fn iops_per_mailbox(
    version: ExchangeVersion,
    messages_per_day: u32,
    copies: u32,
) -> Option<TableFigure> {
    match version {
        ExchangeVersion::Exchange2003 => EXCHANGE_2003_PROFILES
            .iter()
            .find(|(_, messages, _)| *messages >= messages_per_day)
            .map(|(name, messages, iops)| TableFigure {
                value: *iops,
                row: format!("Exchange 2003 {name} profile, {messages} messages/day"),
                source: SOURCE_2003,
            }),
        ExchangeVersion::Exchange2010 => {
            let index = message_row(messages_per_day)?;
            let (table, kind) = if copies > 1 {
                (
                    &EXCHANGE_2010_IOPS_WITH_COPIES,
                    "with database copies (DAG)",
                )
            } else {
                (&EXCHANGE_2010_IOPS_SINGLE_COPY, "single database copy")
            };
            Some(TableFigure {
                value: *table.get(index)?,
                row: format!(
                    "Exchange 2010 {kind}, {} messages/day row",
                    MESSAGE_ROWS.get(index)?
                ),
                source: SOURCE_2010,
            })
        }
        ExchangeVersion::Exchange2013
        | ExchangeVersion::Exchange2016
        | ExchangeVersion::Exchange2019 => {
            let index = message_row(messages_per_day)?;
            Some(TableFigure {
                value: *EXCHANGE_2013_IOPS.get(index)?,
                row: format!(
                    "Exchange 2013 table (used for {version}), {} messages/day row",
                    MESSAGE_ROWS.get(index)?
                ),
                source: SOURCE_2013,
            })
        }
    }
}

/// The largest messages-per-day figure the version's table covers.
pub fn table_limit(version: ExchangeVersion) -> u32 {
    match version {
        ExchangeVersion::Exchange2003 => 210,
        _ => 500,
    }
}

/// Database cache per mailbox (MiB) for 2010 and later; 2003 had one fixed store cache and no
/// per-mailbox figure.
pub fn database_cache_mib_per_mailbox(
    version: ExchangeVersion,
    messages_per_day: u32,
) -> Option<u64> {
    if version == ExchangeVersion::Exchange2003 {
        return None;
    }
    DATABASE_CACHE_MIB_PER_MAILBOX
        .get(message_row(messages_per_day)?)
        .copied()
}

/// Log files of 1 MiB generated per mailbox per day (2010 and 2013 tables; applied to every
/// version, see `docs/plan.md`).
pub fn log_files_per_mailbox_per_day(messages_per_day: u32) -> Option<u64> {
    LOG_FILES_PER_MAILBOX_PER_DAY
        .get(message_row(messages_per_day)?)
        .copied()
}

/// The size of one transaction log file: 1 MiB since Exchange 2007, 5 MiB in Exchange 2003
/// (Microsoft, *Understanding Mailbox Database and Log Capacity Factors*; Exchange 2003's
/// E00*.log files are 5 MB).
pub fn log_file_bytes(version: ExchangeVersion) -> u64 {
    match version {
        ExchangeVersion::Exchange2003 => 5 << 20,
        _ => 1 << 20,
    }
}

/// The message profile an IOPS-per-mailbox figure is in: the first row of [`MESSAGE_ROWS`]
/// whose IOPS in the version's table is at least `iops` (None beyond the table, and for 2003,
/// whose profiles have no log table of their own: the 2010 rows are used by message count).
pub fn messages_for_iops(version: ExchangeVersion, iops: f64, copies: u32) -> Option<u32> {
    MESSAGE_ROWS.iter().copied().find(|&m| {
        iops_per_mailbox(version, m, copies).is_some_and(|figure| figure.value + 1e-9 >= iops)
    })
}

/// Kinds of disk with a typical random-I/O figure, for when the user has not measured one.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DiskKind {
    #[serde(rename = "7.2k")]
    Rpm7200,
    #[serde(rename = "10k")]
    Rpm10k,
    #[serde(rename = "15k")]
    Rpm15k,
    Ssd,
}

impl DiskKind {
    /// Typical small random IOPS one disk of this kind sustains at Exchange latencies. These are
    /// planning figures, not measurements: measure the real disk with `jetproof probe`. 15k: the
    /// 180 array IOPS per spindle of the HP EVA8000 report, Appendix A, example A; 7.2k and 10k:
    /// the usual rule-of-thumb values (75, 125); SSD: a deliberately low 5,000, since flash
    /// devices vary by orders of magnitude.
    pub fn typical_iops(self) -> f64 {
        match self {
            DiskKind::Rpm7200 => 75.0,
            DiskKind::Rpm10k => 125.0,
            DiskKind::Rpm15k => 180.0,
            DiskKind::Ssd => 5000.0,
        }
    }
}

impl fmt::Display for DiskKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            DiskKind::Rpm7200 => "7.2k rpm",
            DiskKind::Rpm10k => "10k rpm",
            DiskKind::Rpm15k => "15k rpm",
            DiskKind::Ssd => "SSD",
        })
    }
}

impl FromStr for DiskKind {
    type Err = String;
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text.trim().to_ascii_lowercase().as_str() {
            "7.2k" | "7200" | "7k2" | "7.2krpm" | "nl-sas" | "sata" => Ok(DiskKind::Rpm7200),
            "10k" | "10000" => Ok(DiskKind::Rpm10k),
            "15k" | "15000" => Ok(DiskKind::Rpm15k),
            "ssd" | "flash" => Ok(DiskKind::Ssd),
            _ => Err(format!(
                "`{text}` is not a disk kind; give 7.2k, 10k, 15k or ssd"
            )),
        }
    }
}

/// RAID levels and their write penalty: back-end I/Os per front-end write.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum RaidLevel {
    #[serde(rename = "0")]
    Raid0,
    /// Mirroring, and striped mirrors (RAID 1/10, 1+0): every write goes to two disks.
    #[serde(rename = "10")]
    Raid10,
    /// Read data and parity, write data and parity: four I/Os per write.
    #[serde(rename = "5")]
    Raid5,
    /// As RAID 5 with two parities: six I/Os per write.
    #[serde(rename = "6")]
    Raid6,
}

impl RaidLevel {
    pub fn write_penalty(self) -> u32 {
        match self {
            RaidLevel::Raid0 => 1,
            RaidLevel::Raid10 => 2,
            RaidLevel::Raid5 => 4,
            RaidLevel::Raid6 => 6,
        }
    }

    /// The fewest disks the level can be built from.
    pub fn minimum_disks(self) -> u64 {
        match self {
            RaidLevel::Raid0 => 1,
            RaidLevel::Raid10 => 2,
            RaidLevel::Raid5 => 3,
            RaidLevel::Raid6 => 4,
        }
    }

    /// Disks per RAID group when none is given: a mirrored pair for RAID 1/10, 4D+1P for
    /// RAID 5 and 6D+2P for RAID 6 (common widths, not a standard: give yours), one disk for
    /// RAID 0.
    pub fn default_group_disks(self) -> u32 {
        match self {
            RaidLevel::Raid0 => 1,
            RaidLevel::Raid10 => 2,
            RaidLevel::Raid5 => 5,
            RaidLevel::Raid6 => 8,
        }
    }

    /// Disks of a group of `group_disks` that hold data: all for RAID 0, half for RAID 1/10,
    /// all but one for RAID 5, all but two for RAID 6. None when the level cannot be built from
    /// that many disks (RAID 1/10 needs an even count).
    pub fn data_disks(self, group_disks: u32) -> Option<u32> {
        if u64::from(group_disks) < self.minimum_disks() {
            return None;
        }
        match self {
            RaidLevel::Raid0 => Some(group_disks),
            RaidLevel::Raid10 => group_disks.is_multiple_of(2).then_some(group_disks / 2),
            RaidLevel::Raid5 => Some(group_disks - 1),
            RaidLevel::Raid6 => Some(group_disks - 2),
        }
    }
}

/// The largest database Microsoft recommends for a version and copy count, and where the figure
/// is published. Exchange 2010: 200 GB for a database without copies, 2 TB with two or more
/// highly available copies (Microsoft, "Mailbox Server Storage Design", Exchange 2010, section
/// on database size). Exchange 2013, 2016 and 2019: the same two figures (Microsoft, "Exchange
/// Server storage configuration options", best practice for database size). The page titles
/// are cited from memory, not re-fetched: `docs/plan.md` says so.
/// Read as binary units (200 GiB, 2 TiB), the stricter reading would be decimal; the difference
/// is 7% and said in `docs/plan.md`. Exchange 2003 has no such recommendation (its Standard
/// edition's hard limits, 16 GB and 75 GB from SP2, are licence limits, not guidance): None.
pub fn recommended_max_database_bytes(
    version: ExchangeVersion,
    copies: u32,
) -> Option<(u64, String)> {
    const GIB: u64 = 1 << 30;
    let (bytes, what) = if copies >= 2 {
        (2048 * GIB, "2 TB with two or more highly available copies")
    } else {
        (200 * GIB, "200 GB without database copies")
    };
    let source = match version {
        ExchangeVersion::Exchange2003 => return None,
        ExchangeVersion::Exchange2010 => {
            "Microsoft, Mailbox Server Storage Design, Exchange 2010, database size"
        }
        _ => {
            "Microsoft, Exchange Server storage configuration options (2013 and later), database size"
        }
    };
    Some((bytes, format!("{what} (Exchange {version}; {source})")))
}

impl fmt::Display for RaidLevel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RaidLevel::Raid0 => "RAID 0",
            RaidLevel::Raid10 => "RAID 1/10",
            RaidLevel::Raid5 => "RAID 5",
            RaidLevel::Raid6 => "RAID 6",
        })
    }
}

impl FromStr for RaidLevel {
    type Err = String;
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text.trim().to_ascii_lowercase().trim_start_matches("raid") {
            "0" => Ok(RaidLevel::Raid0),
            "1" | "10" | "1+0" | "1/10" => Ok(RaidLevel::Raid10),
            "5" => Ok(RaidLevel::Raid5),
            "6" => Ok(RaidLevel::Raid6),
            _ => Err(format!(
                "`{text}` is not a RAID level; give 0, 1, 10, 5 or 6"
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookups_round_up_to_the_next_row() {
        let v = ExchangeVersion::Exchange2013;
        let figure = iops_per_mailbox(v, 200, 2).expect("in table");
        assert_eq!(figure.value, 0.134);
        let figure = iops_per_mailbox(v, 120, 2).expect("in table");
        assert_eq!(figure.value, 0.101, "120 messages is sized as the 150 row");
        assert!(iops_per_mailbox(v, 501, 1).is_none());
    }

    #[test]
    fn exchange_2010_depends_on_copies() {
        let v = ExchangeVersion::Exchange2010;
        assert_eq!(iops_per_mailbox(v, 150, 1).map(|f| f.value), Some(0.18));
        // Hitachi's 0.15 IOPS per user is the 150-message row with copies.
        assert_eq!(iops_per_mailbox(v, 150, 2).map(|f| f.value), Some(0.15));
    }

    #[test]
    fn exchange_2003_profiles() {
        let v = ExchangeVersion::Exchange2003;
        // HP's 1 IOPS per user is the 2003 heavy profile.
        assert_eq!(iops_per_mailbox(v, 140, 1).map(|f| f.value), Some(1.0));
        assert_eq!(iops_per_mailbox(v, 71, 1).map(|f| f.value), Some(0.75));
        assert!(iops_per_mailbox(v, 211, 1).is_none());
        assert_eq!(database_cache_mib_per_mailbox(v, 100), None);
    }

    #[test]
    fn raid_groups_hold_data_on_all_but_their_redundancy() {
        assert_eq!(RaidLevel::Raid5.data_disks(9), Some(8));
        assert_eq!(RaidLevel::Raid6.data_disks(8), Some(6));
        assert_eq!(RaidLevel::Raid10.data_disks(2), Some(1));
        assert_eq!(RaidLevel::Raid10.data_disks(3), None);
        assert_eq!(RaidLevel::Raid5.data_disks(2), None);
        assert_eq!(RaidLevel::Raid0.data_disks(1), Some(1));
        for raid in [
            RaidLevel::Raid0,
            RaidLevel::Raid10,
            RaidLevel::Raid5,
            RaidLevel::Raid6,
        ] {
            assert!(
                raid.data_disks(raid.default_group_disks()).is_some(),
                "{raid}"
            );
        }
    }

    #[test]
    fn recommended_database_size_follows_copies_and_version() {
        let v = ExchangeVersion::Exchange2013;
        assert_eq!(
            recommended_max_database_bytes(v, 1).map(|r| r.0),
            Some(200 << 30)
        );
        assert_eq!(
            recommended_max_database_bytes(v, 2).map(|r| r.0),
            Some(2048 << 30)
        );
        assert!(recommended_max_database_bytes(ExchangeVersion::Exchange2003, 1).is_none());
    }

    #[test]
    fn parsing() {
        assert_eq!("2016".parse(), Ok(ExchangeVersion::Exchange2016));
        assert!("2007".parse::<ExchangeVersion>().is_err());
        assert_eq!("1".parse(), Ok(RaidLevel::Raid10));
        assert_eq!("10".parse(), Ok(RaidLevel::Raid10));
        assert_eq!("raid6".parse(), Ok(RaidLevel::Raid6));
        assert!("4".parse::<RaidLevel>().is_err());
        assert_eq!("15k".parse(), Ok(DiskKind::Rpm15k));
        assert!("floppy".parse::<DiskKind>().is_err());
    }
}
