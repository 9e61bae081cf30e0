//! jetproof's write-ahead log (issue 3): one stream per database instance, written sequentially
//! into numbered generation files (`E00000001.jplog`, 1 MiB by default) from a log buffer, with
//! lazy and durable commits, group commit, and a two-slot checkpoint file.
//!
//! The promises this crate keeps, and the tests that hold it to them, are in `docs/log.md`:
//! * a durable commit returns only after its record is on stable storage, and concurrent durable
//!   commits share log writes ([`Log::commit`], [`Log::wait_durable`]);
//! * every frame is checksummed and carries its own position, so a torn or corrupted write is
//!   detected; a reader tolerates and reports a torn tail and refuses damage in the middle of the
//!   log, naming file and offset ([`LogReader`], [`verify_log_dir`]);
//! * all I/O goes through `jetproof_io`, classed `LogWrite` / `LogRead` / `ReplicationRead`.
//!
//! The engine appends records and commits; recovery reads them back with [`LogReader`] from the
//! checkpoint, then opens the log for writing with [`Log::open`].

pub mod checkpoint;
pub mod error;
pub mod format;
pub mod lsn;
pub mod owned;
pub mod reader;
pub mod scan;
pub mod writer;

pub use checkpoint::{Checkpoint, CheckpointRead, read_checkpoint};
pub use error::{LogError, Result};
pub use lsn::{Durability, LogRecord, Lsn, Record};
pub use reader::{
    FileReport, FileStatus, LogReader, ReadSummary, VerifyReport, verify_log_dir,
    verify_log_dir_listed,
};
pub use scan::{ReadOptions, TornTail};
pub use writer::{Log, LogOptions, LogStats, OpenReport, Retention, WriteTrigger, log_file_path};
