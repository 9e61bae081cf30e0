//! The instance's errors: the engine's and the log's, plus the refusals that belong to the
//! instance (a database that needs recovery, a log that does not match its database).

use std::path::PathBuf;

use jetproof_engine::{EngineError, HeaderError};
use jetproof_io::IoError;
use jetproof_log::{LogError, Lsn};

#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum InstanceError {
    #[error(transparent)]
    Engine(#[from] EngineError),
    #[error(transparent)]
    Log(#[from] LogError),
    #[error(transparent)]
    Io(#[from] IoError),
    #[error(transparent)]
    Header(#[from] HeaderError),
    /// The database was not shut down cleanly: its logs must be replayed before it is used.
    #[error(
        "{path}: the database was not shut down cleanly and needs recovery from its logs in {log_dir}; \
         run `jetproof recover` first"
    )]
    RecoveryNeeded { path: PathBuf, log_dir: PathBuf },
    /// The database names a log position but its log directory holds no log, or another one.
    #[error("{path}: {reason}; re-create with `jetproof init --recreate`")]
    LogMismatch { path: PathBuf, reason: String },
    /// Recovery cannot bring the database to the log's end (a missing checkpoint, a record that
    /// does not decode or redo, a page past the file's end). Log damage is a `Log` error, which
    /// names the file and offset.
    #[error("{path}: recovery failed: {reason}")]
    RecoveryImpossible { path: PathBuf, reason: String },
    /// The log lost records the database depends on (`docs/log.md`, "The log's end is proved"):
    /// a generation the log installed is missing or cut short, or pages the replay read carry
    /// changes past the end of the log that is left. Nothing was marked clean; the database
    /// stays dirty. Boxed: the details would make every `Result` of the crate large.
    #[error(transparent)]
    LostLog(Box<LostLog>),
    /// The key was changed by another transaction that is still open (ESE's
    /// `JET_errWriteConflict`); the caller rolls back its transaction and may try again.
    #[error("write conflict on key {key}: transaction {holder} has changed it and is still open")]
    WriteConflict { key: String, holder: u64 },
    /// Undo could not restore a key's state before the transaction (the database does not hold
    /// what the transaction left).
    #[error("cannot take back the change to key {key}: {reason}")]
    UndoFailed { key: String, reason: String },
    #[error("invalid instance option `{field}`: {reason}")]
    InvalidOption { field: &'static str, reason: String },
}

pub type Result<T, E = InstanceError> = std::result::Result<T, E>;

/// The details of [`InstanceError::LostLog`].
#[derive(Debug, thiserror::Error)]
#[error(
    "{path}: lost log: {reason}; the log that is left ends at {log_end} in {log_file};\
     {pages_ahead} the database stays dirty: restore the missing log files (or the database \
     and its logs from a backup) and run `jetproof recover` again"
)]
pub struct LostLog {
    pub path: PathBuf,
    /// The log file at fault (missing, cut short, or the last one found).
    pub log_file: PathBuf,
    pub log_end: Lsn,
    pub reason: String,
    /// The pages found carrying changes past `log_end` as a sentence ("" when none were among
    /// the pages the replay read).
    pub pages_ahead: String,
    /// The first of those pages and their count.
    pub pages: crate::visited::PagesAhead,
}
