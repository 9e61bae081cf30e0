//! The log's errors. Every variant that concerns a file names it, and where a byte position
//! matters (corruption, a torn tail) the offset too, so `jetproof recover` and `jetproof checksum`
//! can say exactly where the log is damaged.

use std::path::PathBuf;

use jetproof_io::IoError;

use crate::lsn::Lsn;

#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    /// The device or file system failed; the I/O error names the file and offset.
    #[error(transparent)]
    Io(#[from] IoError),

    /// An earlier write or sync failed, so the log accepts no more work (a storage tester must
    /// report the failure, not limp on with a log whose durable end is unknown).
    #[error("log {dir} is poisoned by an earlier failure and accepts no more work: {cause}")]
    Poisoned { dir: PathBuf, cause: String },

    /// The log was closed.
    #[error("log {dir} is closed")]
    Closed { dir: PathBuf },

    #[error("log record of {size_bytes} bytes exceeds the maximum of {max_bytes} bytes")]
    RecordTooLarge { size_bytes: usize, max_bytes: usize },

    #[error("log option `{field}`: {reason}")]
    InvalidOptions { field: &'static str, reason: String },

    /// Damage inside the range that must be replayed: later valid data (or a later generation)
    /// shows that the damaged bytes had been written and made durable.
    #[error("log file {path} is corrupt at offset {offset}: {reason}")]
    Corrupt {
        path: PathBuf,
        offset: u64,
        reason: String,
    },

    #[error("log file {path} has a bad header: {reason}")]
    BadHeader {
        path: PathBuf,
        reason: crate::format::HeaderError,
    },

    #[error(
        "log file {path} belongs to database {found:#034x}, expected {expected:#034x}; \
         the log directory holds another database's logs"
    )]
    WrongDatabase {
        path: PathBuf,
        expected: u128,
        found: u128,
    },

    /// A generation needed for replay does not exist although a later one does, or the
    /// checkpoint names a generation that is gone.
    #[error("log generation {generation} ({path}) is missing: {reason}")]
    MissingGeneration {
        generation: u64,
        path: PathBuf,
        reason: String,
    },

    #[error("checkpoint file {path}: {reason}")]
    BadCheckpoint { path: PathBuf, reason: String },

    /// The checkpoint says the database needs the log from a position the log never reached.
    #[error("checkpoint {path} names log position {checkpoint} but the log ends at {log_end}")]
    CheckpointBeyondLog {
        path: PathBuf,
        checkpoint: Lsn,
        log_end: Lsn,
    },

    /// The log provably ends too early: a generation the log installed is missing, or a
    /// generation file is shorter than its preformatted size. A crash cannot leave either (files
    /// are preformatted to full size and every installed generation is recorded in the
    /// checkpoint file before a record can be durable in it), so records that were durable may
    /// be gone. `log_end` is where the log that is left ends; `path` is the file at fault.
    #[error(
        "lost log: {path}: {reason}; the log that is left ends at {log_end}, so records that \
         were durable may be gone. Restore the missing log files (or the whole database and \
         its logs from a backup); recovery will not mark the database clean without them"
    )]
    LostLog {
        path: PathBuf,
        log_end: Lsn,
        reason: String,
    },

    /// A replay was asked to start at a position that is not the start of a record.
    #[error("log file {path}: offset {offset} is not the start of a log record")]
    NotARecordBoundary { path: PathBuf, offset: u64 },

    #[error("log directory {dir} already holds a log ({path}); open it instead of creating one")]
    AlreadyExists { dir: PathBuf, path: PathBuf },

    #[error("log directory {dir} holds no log (no checkpoint file {path})")]
    NotFound { dir: PathBuf, path: PathBuf },

    /// A file at one of the log's names that jetproof did not make (or that belongs to another
    /// database): it is never written, replaced or removed (`crate::owned`).
    #[error(
        "{path} is not a log file of this database ({reason}); jetproof never writes, replaces or removes a file it did not make: move it away, or give the instance another log_path"
    )]
    NotOurs { path: PathBuf, reason: String },
}

pub type Result<T, E = LogError> = std::result::Result<T, E>;
