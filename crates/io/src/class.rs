//! I/O classes: every I/O belongs to exactly one, and its latency is recorded under it.

use serde::{Deserialize, Serialize};

/// What an I/O is for. The names are the keys used in `result.json` and `samples.csv`.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IoClass {
    /// A database page read by a transaction or the cache (Jetstress: I/O Database Reads).
    DbRead,
    /// A database page write by the cache's flusher (I/O Database Writes).
    DbWrite,
    /// A log buffer write (I/O Log Writes).
    LogWrite,
    /// A log file read: recovery replay (I/O Log Reads).
    LogRead,
    /// Background database maintenance's sequential scan (Database Maintenance IO Reads).
    BdmRead,
    /// Closed log generations read back for a database copy (Log Replication I/O).
    ReplicationRead,
    /// The backup test's streaming read.
    BackupRead,
    /// The checksum test's verifying read.
    ChecksumRead,
    /// Formatting of the database file's new pages when it grows by an extent (ESE's database
    /// extension): large sequential writes that are not the buffer manager's page writes, so
    /// they are kept out of `DbWrite` and its average size (`docs/faithfulness.md`).
    DbExtend,
    /// Reads and writes of a database's flush map file (lost-write detection): its own class,
    /// so that database reads and writes stay the buffer manager's page I/O alone.
    FlushMap,
}

impl IoClass {
    pub const COUNT: usize = 10;

    pub const ALL: [IoClass; IoClass::COUNT] = [
        IoClass::DbRead,
        IoClass::DbWrite,
        IoClass::LogWrite,
        IoClass::LogRead,
        IoClass::BdmRead,
        IoClass::ReplicationRead,
        IoClass::BackupRead,
        IoClass::ChecksumRead,
        IoClass::DbExtend,
        IoClass::FlushMap,
    ];

    /// The key used in `result.json` and `samples.csv`.
    pub fn key(self) -> &'static str {
        match self {
            IoClass::DbRead => "db_read",
            IoClass::DbWrite => "db_write",
            IoClass::LogWrite => "log_write",
            IoClass::LogRead => "log_read",
            IoClass::BdmRead => "bdm_read",
            IoClass::ReplicationRead => "replication_read",
            IoClass::BackupRead => "backup_read",
            IoClass::ChecksumRead => "checksum_read",
            IoClass::DbExtend => "db_extend",
            IoClass::FlushMap => "flush_map",
        }
    }

    /// Dense index, for per-class arrays.
    pub fn index(self) -> usize {
        self as usize
    }

    pub fn is_write(self) -> bool {
        matches!(
            self,
            IoClass::DbWrite | IoClass::LogWrite | IoClass::DbExtend
        )
    }
}
