//! The checksum test's figures as `result.json` holds them (`docs/results.md`): per database
//! file, per instance's log files, and their sums. The checksum test and the stress test's
//! checksum pass (`jetproof-procedures`) fill them; reports and `jetproof aggregate` read them.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// At most this many damaged pages are listed per file (all are counted). A file of garbage
/// would otherwise list every page it has.
pub const MAX_LISTED_DAMAGED_PAGES: usize = 100_000;

/// What is wrong with a damaged page.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Damage {
    /// Damaged beyond correction (Jetstress: bad page).
    Bad,
    /// One flipped bit, which the checksum can correct (Jetstress: correctable page).
    Correctable,
    /// A sound page that belongs elsewhere: a misdirected write (Jetstress: wrong page-number).
    WrongPageNumber,
    /// A sound page older than its last acknowledged write (the flush map's count): the storage
    /// lost a write and returned an older copy.
    LostWrite,
    /// In a cleanly shut database, a sound page newer than the flush map's last write of it:
    /// written behind jetproof's back (or the map is stale).
    NewerThanFlushMap,
}

impl Damage {
    /// The kind as `result.json` writes it.
    pub fn name(self) -> &'static str {
        match self {
            Damage::Bad => "bad",
            Damage::Correctable => "correctable",
            Damage::WrongPageNumber => "wrong_page_number",
            Damage::LostWrite => "lost_write",
            Damage::NewerThanFlushMap => "newer_than_flush_map",
        }
    }
}

/// One damaged page, located.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DamagedPage {
    /// The page's position in the file (byte offset = page_number × page size).
    pub page_number: u64,
    pub damage: Damage,
    /// For a wrong page-number page: the number the page carries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub found_page_number: Option<u32>,
    /// For a correctable page: the flipped bit's index within the page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bit: Option<u64>,
    /// For a lost write (or a page newer than the flush map): the write count the map expects.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_write_count: Option<u16>,
    /// For a lost write (or a page newer than the flush map): the write count the page carries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub found_write_count: Option<u16>,
}

/// What the check found of a database's flush map.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlushMapFinding {
    pub path: PathBuf,
    /// `ok`, `missing` (lost writes cannot be checked), `damaged` (some map pages unreadable:
    /// their pages not checked) or `unusable` (stale or foreign: no page checked against it).
    pub status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Map pages whose committed copy is damaged.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub damaged_map_pages: Vec<u32>,
}

impl FlushMapFinding {
    /// A map that cannot vouch for its pages is damage; a missing one is only reported.
    pub fn is_damage(&self) -> bool {
        self.status == "damaged" || self.status == "unusable"
    }
}

/// A log position in `result.json`.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Position {
    pub generation: u64,
    pub offset: u64,
}

impl std::fmt::Display for Position {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.generation, self.offset)
    }
}

/// A database's shutdown state, as `eseutil /mh` shows it: clean or dirty shutdown, where
/// recovery starts, and which log generations it needs.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DatabaseState {
    /// `clean` (closed cleanly: every change is in the file) or `dirty` (not shut down cleanly:
    /// its logs must be replayed by `jetproof recover` before it is used or trusted).
    pub state: String,
    /// The header's recovery position: where the log stood at the last clean close (0:0: never
    /// attached to a log, as `jetproof init` leaves it).
    pub recovery_position: Position,
    /// The log's checkpoint (a replay would start here), when its checkpoint file is usable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint: Option<Position>,
    /// For a dirty database: the first and last log generation recovery needs (ESE's "Log
    /// Required"), from the checkpoint's to the newest found or recorded as installed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logs_required: Option<[u64; 2]>,
}

impl DatabaseState {
    pub fn is_dirty(&self) -> bool {
        self.state == "dirty"
    }
}

/// The checksum figures of one database file: a row of the seeds' "Checksum Statistics" table.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FileChecksum {
    /// The instance and its database file. The checksum test's `result.json` leaves them out
    /// (the instance's `name` and `database_path` say them); the stress test's checksum pass
    /// writes them beside the instance's own keys, as it always has.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub instance: String,
    #[serde(default, skip_serializing_if = "path_is_empty")]
    pub path: PathBuf,
    pub page_size: u32,
    /// Bytes of pages in the file, as its header counts them.
    pub size_bytes: u64,
    /// Bytes read and checked: `size_bytes` unless the pass was stopped early.
    pub checked_bytes: u64,
    /// Bytes past the last page the header counts; not checked. Up to one extent is what a
    /// growth that did not finish leaves.
    pub trailing_bytes: u64,
    /// Of those, bytes beyond what an unfinished growth can leave (one extent): appended to the
    /// file by something else. A fail verdict.
    #[serde(default)]
    pub appended_bytes: u64,
    /// Header copy 0 found older than copy 1 (a lost write of the header: copy 0 is always
    /// written first); damaged copies are in `damaged_pages` like any page. A fail verdict.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub header_copy_behind: Option<String>,
    /// Clean or dirty shutdown, and what recovery would need.
    #[serde(default)]
    pub database_state: DatabaseState,
    pub pages_seen: u64,
    pub pages_bad: u64,
    pub pages_correctable: u64,
    pub pages_wrong_number: u64,
    /// Pages older than their last acknowledged write (flush map).
    #[serde(default)]
    pub pages_lost_write: u64,
    /// Pages of a cleanly shut database newer than the flush map's last write of them.
    #[serde(default)]
    pub pages_newer_than_flush_map: u64,
    /// The database's flush map, as found (not `flush_map`: that key is the I/O class of the
    /// map's reads).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flush_map_state: Option<FlushMapFinding>,
    pub seconds: f64,
    /// MB (10^6 bytes) checked per second, as every `mb_per_sec` of `result.json`.
    pub mb_per_sec: f64,
    /// Every damaged page (up to [`MAX_LISTED_DAMAGED_PAGES`]), in file order.
    pub damaged_pages: Vec<DamagedPage>,
    /// Damaged pages counted but not listed, beyond the cap.
    #[serde(default)]
    pub damaged_pages_not_listed: u64,
}

impl FileChecksum {
    /// True when every page is perfect.
    pub fn is_clean(&self) -> bool {
        self.pages_damaged() == 0
            && !self
                .flush_map_state
                .as_ref()
                .is_some_and(FlushMapFinding::is_damage)
    }

    pub fn pages_damaged(&self) -> u64 {
        self.pages_bad
            + self.pages_correctable
            + self.pages_wrong_number
            + self.pages_lost_write
            + self.pages_newer_than_flush_map
    }
}

/// What the log verifier found wrong with one log file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogProblem {
    pub path: PathBuf,
    pub generation: u64,
    /// `bad` (damage in the log that recovery needs) or `torn_tail` (an unacknowledged last
    /// write, tolerated as recovery tolerates it).
    pub status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offset: Option<u64>,
    pub reason: String,
}

/// The log checksum figures of one instance (`docs/checksum.md`: "and log files").
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LogChecksum {
    pub instance: String,
    pub log_path: PathBuf,
    /// False when the instance has no log directory: nothing to verify.
    pub present: bool,
    pub files_seen: u64,
    pub files_good: u64,
    pub files_torn_tail: u64,
    pub files_bad: u64,
    /// Bytes of the log files checked.
    pub size_bytes: u64,
    /// A checkpoint file that exists but cannot be used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint_error: Option<String>,
    /// Log files exist but the checkpoint file does not: no replay can start, and a database
    /// that used this log cannot be attached. A fail verdict.
    #[serde(default)]
    pub checkpoint_missing: bool,
    /// The checkpoint (where a replay starts), when the checkpoint file is usable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint: Option<Position>,
    /// The newest generation the checkpoint file records as installed (checkpoint files
    /// written before 2026-11-25 do not say).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub newest_installed_generation: Option<u64>,
    /// The highest generation whose file was found.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub newest_found_generation: Option<u64>,
    /// Every log file that is not perfect, with the place and reason.
    pub problems: Vec<LogProblem>,
}

impl LogChecksum {
    /// True when no log file is bad and the checkpoint is usable (a torn tail is tolerated).
    pub fn is_clean(&self) -> bool {
        self.files_bad == 0 && self.checkpoint_error.is_none() && !self.checkpoint_missing
    }
}

/// Sums over all files: the "(Sum)" row.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ChecksumTotals {
    pub files: u64,
    pub size_bytes: u64,
    pub checked_bytes: u64,
    pub pages_seen: u64,
    pub pages_bad: u64,
    pub pages_correctable: u64,
    pub pages_wrong_number: u64,
    #[serde(default)]
    pub pages_lost_write: u64,
    #[serde(default)]
    pub pages_newer_than_flush_map: u64,
    /// Wall-clock seconds of the whole pass (the files are read at once).
    pub seconds: f64,
    pub mb_per_sec: f64,
    pub log_files_seen: u64,
    pub log_files_bad: u64,
    pub log_files_torn_tail: u64,
}

fn path_is_empty(path: &std::path::Path) -> bool {
    path.as_os_str().is_empty()
}
