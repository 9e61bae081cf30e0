//! A database instance, as ESE's: one engine [`Database`] and one log stream ([`Log`]), tied
//! together so that every page change is logged before it can reach the disk (issue 3, items 1–5
//! as far as they meet the engine; recovery is [`recovery`], logical undo is [`undo`]).
//!
//! Invariants, and where they are kept (`docs/log.md`, "The engine's log records"):
//! * **Every page change is a log record** ([`mod@format`]): the engine reports each change
//!   under the page's exclusive latch to the instance's [`ChangeLog`], which appends one record tagged with
//!   the calling session's current transaction and returns its LSN, stamped on the page.
//! * **Write-ahead rule**: the cache's [`WriteAheadGate`] waits until the log is durable past a
//!   page's log position before writing the page.
//! * **Commit**: a transaction that changed anything is committed by appending a commit record;
//!   a durable commit returns once that record (and so every earlier record) is on stable storage,
//!   a lazy one at once (the log's flusher writes it within milliseconds). Group commit is the
//!   log's.
//! * **Checkpoint**: never ahead of the durable log, of the oldest dirty page's first unflushed
//!   change, nor of the log end when the oldest active transaction began (undo will need its
//!   records). When it falls more than the checkpoint depth behind the log's end, the oldest dirty
//!   pages are flushed so it can advance.
//! * **Undo** ([`mod@undo`]): before a transaction first changes a key, the key's prior state is
//!   logged, or carried by the change's own record when it is one leaf change (an insert's and a
//!   flag delete's undo are implied by them; a replaced value is on the page, and logged only if
//!   a page holding the change is written while the transaction is open: [`mod@deferred`], ESE's
//!   deferred before image), and the key is locked to the transaction until it ends; a second
//!   writer gets [`InstanceError::WriteConflict`]. [`Instance::rollback`], [`Instance::close`] (for
//!   transactions still open) and recovery (for transactions with no commit record) restore
//!   those states through the engine and log a rollback record.
//! * **Flag delete**: [`Instance::delete`] only marks the record deleted (its undo record needs
//!   no value); the commit removes the records its transaction marked (the purge, ESE's version
//!   store cleanup), before it releases their keys, and recovery purges marks whose purge did not
//!   reach the log (`docs/design.md`, "Flag delete").
//! * **Clean shutdown** ([`Instance::close`]): open transactions rolled back, pages and log
//!   flushed, a checkpoint at the log's end, the database header given that recovery position
//!   and marked clean. Dropping an instance
//!   without `close` is an unclean stop, and [`Instance::open`] then refuses the database until
//!   its logs are replayed.
//!
//! Transactions belong to a session, and a session is a thread (as the workload's are): the
//! current transaction of each thread and instance is kept in a thread-local, so the engine's
//! `ChangeLog` hook (called on the session's own thread) can tag each record with it.

pub mod deferred;
pub mod error;
pub mod format;
pub mod group;
mod readahead;
pub mod recovery;
#[cfg(test)]
mod test_rng;
pub mod undo;
pub mod visited;

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use jetproof_engine::change::{Before, ChangeLog, PageChange};
use jetproof_engine::{
    Database, DatabaseOptions, DbHeader, DbState, EngineError, LogPosition, WriteAheadGate,
};
use jetproof_io::{IoBackend, IoClass, OpenOptions};
use jetproof_log::format::{DATA_START, checkpoint_path};
use jetproof_log::{Durability, Log, LogOptions, Lsn, Record, Retention};

use crate::deferred::DeferredUndo;
use parking_lot::{Condvar, Mutex};

pub use error::{InstanceError, Result};
pub use recovery::{RecoveryReport, recover};
pub use undo::{Prior, UndoEntry};

/// How an instance is created or opened.
#[derive(Clone, Debug)]
pub struct InstanceOptions {
    /// The database's options; its `stats` and `direct_io` apply to the log files too, so log
    /// writes land in the same figures as the database's I/O.
    pub database: DatabaseOptions,
    /// Size of each log generation file (ESE: 1 MiB).
    pub log_file_size_bytes: u64,
    /// The log buffer, and so the largest log write.
    pub log_buffer_size_bytes: usize,
    /// Log writes start and end on multiples of this (raised to the file's alignment under
    /// direct I/O): `LogOptions::sector_size_bytes`.
    pub log_sector_size_bytes: usize,
    /// A lazy commit is made durable within this time at the latest (usually much sooner, by
    /// the next log write).
    pub lazy_flush_interval: Duration,
    /// When the checkpoint is further than this behind the log's end, the oldest dirty pages
    /// are flushed (`docs/log.md`, checkpoint depth: 20 MiB for a single copy).
    pub checkpoint_depth_bytes: u64,
    /// Keep log files the checkpoint no longer needs (replication and soft-recovery tests).
    pub keep_files: bool,
    /// Circular logging: reuse log files the checkpoint no longer needs (ignored when
    /// `keep_files`).
    pub circular: bool,
    /// How often the background checkpointer runs; `None`: only [`Instance::checkpoint`] calls
    /// (deterministic tests).
    pub checkpoint_interval: Option<Duration>,
    /// The checkpoint file is rewritten at most this often by the background checkpointer
    /// (each rewrite is a log-class write and an fdatasync), except after a depth flush.
    pub checkpoint_write_interval: Duration,
}

impl Default for InstanceOptions {
    fn default() -> Self {
        InstanceOptions {
            database: DatabaseOptions::default(),
            log_file_size_bytes: 1 << 20,
            log_buffer_size_bytes: 256 << 10,
            log_sector_size_bytes: 4096,
            // A bound, not a rhythm: lazy commits ride on the log's own writes (half the buffer
            // waiting, a durable commit, a page's write-ahead wait), as ESE's do.
            lazy_flush_interval: Duration::from_secs(1),
            checkpoint_depth_bytes: 20 << 20,
            keep_files: false,
            circular: false,
            checkpoint_interval: Some(Duration::from_millis(100)),
            checkpoint_write_interval: Duration::from_secs(1),
        }
    }
}

/// What one checkpoint pass did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CheckpointReport {
    /// The checkpoint after the pass.
    pub checkpoint: Lsn,
    /// Bytes of log from the checkpoint after the pass to the log's end the pass measured the
    /// depth against (its start): the log grows while the pass runs (sessions append
    /// meanwhile, and a page written before its lazy commits were durable makes the log write
    /// them, adding that write's 54-byte flush frame), so the depth the pass keeps is against the
    /// tip it saw, as ESE's checkpoint maintenance computes its preferred checkpoint from the tip
    /// when it runs.
    pub depth_bytes: u64,
    /// The pass flushed old dirty pages because the checkpoint was too far behind.
    pub flushed_for_depth: bool,
    /// The checkpoint file was rewritten.
    pub written: bool,
}

/// Counters of the instance's own work (the log's are in [`Log::stats`], the I/O in the
/// `InstanceStats` given in the options).
#[derive(Debug, Default)]
pub struct InstanceCounters {
    pub transactions_committed: AtomicU64,
    pub commit_records: AtomicU64,
    pub page_change_records: AtomicU64,
    pub depth_flushes: AtomicU64,
    /// The write I/Os of the checkpoint-depth flushes and the pages they carried (a share of
    /// the cache's writes: the rest are threshold flushes and scavenges).
    pub depth_flush_writes: AtomicU64,
    pub depth_flush_pages: AtomicU64,
    pub checkpoint_writes: AtomicU64,
    /// Undo records logged when the change was made (one per key per transaction, and one more
    /// for a key the transaction deleted and then inserted again), replaced values aside.
    pub undo_records: AtomicU64,
    /// Replaced values kept in memory as their transaction's undo instead of being logged
    /// ([`mod@deferred`]); those whose page was written while the transaction was open were
    /// logged then ([`Instance::deferred_undo_logged`]).
    pub undo_deferred: AtomicU64,
    /// Undo entries carried by the change's own record instead of an undo record: an insert of
    /// an absent key (undo removes it) and a flag delete (undo clears the mark), as ESE's insert
    /// and flag-delete records are their own undo.
    pub undo_in_records: AtomicU64,
    /// Records marked deleted that were removed after their transaction committed (or by
    /// recovery).
    pub records_purged: AtomicU64,
    /// Transactions taken back (by [`Instance::rollback`], at close, or by recovery).
    pub transactions_rolled_back: AtomicU64,
    /// Writes refused because another open transaction had changed the key.
    pub write_conflicts: AtomicU64,
    /// Persists of the database's flush map (lost-write detection), each paired with the
    /// checkpoint written after it.
    pub flush_map_persists: AtomicU64,
}

/// The checkpointer persists the flush map with a checkpoint when its changed map pages are at
/// most this many bytes per second since the last persist: every checkpoint for databases up to
/// ~15 GiB of 32 KiB pages (256 map pages), less often for larger ones, so that the map's writes
/// stay a small share of the database's (`docs/design.md`, "Lost-write detection").
pub const FLUSH_MAP_BYTES_PER_SEC: u64 = 1 << 20;

/// A session's transaction on one instance.
#[derive(Clone, Debug)]
struct ThreadTransaction {
    instance: u64,
    id: u64,
    page_changes: u64,
    /// Keys this transaction marked deleted: the commit purges them.
    marked: Vec<Vec<u8>>,
    /// It kept a replaced value in memory ([`mod@deferred`]): its end record is ordered
    /// against the write-ahead gate's undo records.
    deferred: bool,
}

thread_local! {
    /// The open transaction of this thread on each instance.
    static TRANSACTIONS: RefCell<Vec<ThreadTransaction>> = const { RefCell::new(Vec::new()) };
    /// The transaction the operation running on this thread belongs to (0: none).
    static CURRENT: Cell<u64> = const { Cell::new(0) };
    /// Page change records logged by the operation running on this thread.
    static LOGGED: Cell<u64> = const { Cell::new(0) };
    /// Encoding buffer, reused.
    static SCRATCH: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
    /// The page changes of the structural change (group) open on this thread, held back until
    /// it ends, encoded into one reused payload.
    static GROUP: RefCell<group::GroupBuilder> =
        const { RefCell::new(group::GroupBuilder::new()) };
    /// The undo of the write running on this thread, between [`Instance::write`] and the
    /// engine's `before_change` hook.
    static UNDO: RefCell<UndoSlot> = const { RefCell::new(UndoSlot::Idle) };
}

/// Whether the write running on this thread must log its key's prior state, and what it was.
#[derive(Debug, Default)]
enum UndoSlot {
    /// No write wants an undo record (a rollback's restore, a purge, recovery).
    #[default]
    Idle,
    /// The first write of a key in its transaction: the hook logs the undo record.
    Wanted,
    /// A later write of a key in its transaction: an undo record only if it brings back a record
    /// the transaction marked deleted (its value is about to be overwritten).
    Repeat,
    /// The hook found the key's prior state, not logged yet: if the write's change is the one
    /// leaf change that can carry it (a leaf replace for a value, a leaf insert for an absent
    /// key, a leaf mark for a live record: [`format::RecordUndo`]), its record says so; before
    /// any other change, it is logged as an undo record.
    Kept { key: Vec<u8>, prior: Prior },
    /// The key's prior state, for rollback, and where the log has it.
    Taken { prior: Prior, kept: Kept },
}

/// Where a transaction's undo entry for a key is in the log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kept {
    /// An undo record of its own (or its append failed).
    Logged,
    /// In the change's record (an insert's or flag delete's undo is implied by it).
    InRecord,
    /// A replaced value, in memory until a write of its page logs it ([`mod@deferred`]).
    InMemory,
}

/// The record kind that carries `prior` for a change of `key` shaped like `change`, if any.
fn carried_by(key: &[u8], prior: &Prior, change: &PageChange<'_>) -> format::RecordUndo {
    use format::RecordUndo as R;
    match (prior, change) {
        (Prior::Value(_), PageChange::LeafReplace { key: k, .. }) if *k == key => R::OnPage,
        (Prior::Absent, PageChange::LeafInsert { key: k, .. }) if *k == key => R::Absent,
        (
            Prior::Marked,
            PageChange::LeafMark {
                key: k,
                deleted: true,
                ..
            },
        ) if *k == key => R::Marked,
        _ => R::None,
    }
}

static NEXT_INSTANCE: AtomicU64 = AtomicU64::new(1);

fn log_failure(dir: &Path, error: &jetproof_log::LogError) -> EngineError {
    EngineError::Poisoned {
        path: dir.to_path_buf(),
        cause: error.to_string(),
    }
}

/// The engine's change hook: one log record per page change.
#[derive(Debug)]
struct LogSink {
    log: Arc<Log>,
    dir: PathBuf,
    deferred: Arc<DeferredUndo>,
}

impl LogSink {
    /// Logs the undo record of the write running on this thread if the hook kept the key's
    /// prior state and the change about to be recorded is not the one that can carry it.
    fn log_kept(&self) -> jetproof_engine::error::Result<()> {
        if !UNDO.with_borrow(|slot| matches!(slot, UndoSlot::Kept { .. })) {
            return Ok(());
        }
        let UndoSlot::Kept { key, prior } = UNDO.take() else {
            return Ok(());
        };
        let appended = self.append_undo(&key, &prior);
        UNDO.set(UndoSlot::Taken {
            prior,
            kept: Kept::Logged,
        });
        appended
    }

    fn append_undo(&self, key: &[u8], prior: &Prior) -> jetproof_engine::error::Result<()> {
        let appended = SCRATCH.with_borrow_mut(|buffer| {
            undo::encode_undo(key, prior, buffer);
            self.log.append(&Record {
                record_type: undo::RECORD_UNDO,
                transaction_id: CURRENT.get(),
                payload: buffer,
            })
        });
        appended.map(|_| ()).map_err(|e| log_failure(&self.dir, &e))
    }
}

impl ChangeLog for LogSink {
    fn record(
        &self,
        page: u32,
        update_stamp: u64,
        change: &PageChange<'_>,
    ) -> jetproof_engine::error::Result<u64> {
        // A kept prior state rides on the write's one leaf change of its key; any other change
        // first logs it as an undo record (a change that splits or merges its leaf, in a group).
        let carried = UNDO.with_borrow(|slot| match slot {
            UndoSlot::Kept { key, prior } if !GROUP.with_borrow(|g| g.is_open()) => {
                carried_by(key, prior, change)
            }
            _ => format::RecordUndo::None,
        });
        let keeps = carried != format::RecordUndo::None;
        if !keeps {
            self.log_kept()?;
        }
        // Space map bits are not held in a group: each is absolute, and the map page is shared
        // by every session (its latch is not kept for the group).
        if !matches!(change, PageChange::MapBit { .. }) {
            let held = GROUP.with_borrow_mut(|group| group.push(page, update_stamp, change));
            if held {
                LOGGED.set(LOGGED.get() + 1);
                // At or before where the group will be logged: the page's first unflushed
                // change for the checkpoint; the engine stamps the group's position at its end.
                return Ok(self.log.end_lsn().to_u64());
            }
        }
        let transaction_id = CURRENT.get();
        let lsn = SCRATCH.with_borrow_mut(|buffer| {
            if keeps {
                format::encode_page_change_with_undo(page, update_stamp, change, carried, buffer);
            } else {
                format::encode_page_change(page, update_stamp, change, buffer);
            }
            self.log.append(&Record {
                record_type: format::RECORD_PAGE_CHANGE,
                transaction_id,
                payload: buffer,
            })
        });
        if keeps && let UndoSlot::Kept { key, prior } = UNDO.take() {
            // Taken even if the append failed (the write fails; rollback needs the entry).
            // A value is registered with the gate before the page's latch is released, so no
            // write of the page can copy the change before the gate knows of it.
            let kept = match (&prior, &lsn) {
                (Prior::Value(value), Ok(_)) => {
                    self.deferred
                        .defer(page, transaction_id, &key, value.clone());
                    Kept::InMemory
                }
                (_, Ok(_)) => Kept::InRecord,
                (_, Err(_)) => Kept::Logged,
            };
            UNDO.set(UndoSlot::Taken { prior, kept });
        }
        let lsn = lsn.map_err(|e| log_failure(&self.dir, &e))?;
        LOGGED.set(LOGGED.get() + 1);
        Ok(lsn.to_u64())
    }

    fn begin_group(&self) {
        GROUP.with_borrow_mut(group::GroupBuilder::begin);
    }

    fn end_group(&self) -> jetproof_engine::error::Result<u64> {
        let transaction_id = CURRENT.get();
        let max = self.log.options().max_payload_bytes();
        let last = GROUP.with_borrow_mut(|group| {
            group.finish(max, |record_type, payload| {
                self.log.append(&Record {
                    record_type,
                    transaction_id,
                    payload,
                })
            })
        });
        let last = last.map_err(|e| log_failure(&self.dir, &e))?;
        Ok(last.map_or(0, Lsn::to_u64))
    }

    fn discard_group(&self) {
        GROUP.with_borrow_mut(group::GroupBuilder::discard);
    }

    fn before_change(&self, key: &[u8], before: Before<'_>) -> jetproof_engine::error::Result<()> {
        // A slot still holding a kept state belongs to an earlier call of this write that
        // recorded nothing: logged now, before this call's changes.
        self.log_kept()?;
        let prior = UNDO.with_borrow(|slot| match (slot, before) {
            (UndoSlot::Wanted, Before::Absent) => Some(Prior::Absent),
            (UndoSlot::Wanted, Before::Value(v)) => Some(Prior::Value(v.to_vec())),
            (UndoSlot::Wanted, Before::Marking) => Some(Prior::Marked),
            // A record marked deleted that no open transaction holds is a committed delete
            // whose purge has not run (it was lost in a crash, or failed): the key was absent.
            (UndoSlot::Wanted, Before::Marked(_)) => Some(Prior::Absent),
            // This transaction marked the record and now overwrites it: its value is needed.
            (UndoSlot::Repeat, Before::Marked(v)) => Some(Prior::Value(v.to_vec())),
            _ => None,
        });
        let Some(prior) = prior else {
            return Ok(());
        };
        // Kept, not logged yet: the change's own record may carry it (`record` above).
        UNDO.set(UndoSlot::Kept {
            key: key.to_vec(),
            prior,
        });
        Ok(())
    }
}

/// The cache's write-ahead gate: a page goes to disk only once its last change is durable, and
/// the values kept in memory as undo of open transactions' changes on it are logged first.
#[derive(Debug)]
struct LogGate {
    log: Arc<Log>,
    dir: PathBuf,
    deferred: Arc<DeferredUndo>,
}

impl WriteAheadGate for LogGate {
    fn is_durable(&self, log_position: u64) -> bool {
        // Position 0: the page was never changed under a log (created, or bulk loaded).
        log_position == 0 || self.log.is_durable(Lsn::from_u64(log_position))
    }
    fn ensure_durable(&self, log_position: u64) -> jetproof_engine::error::Result<()> {
        if log_position == 0 {
            return Ok(());
        }
        self.log
            .wait_durable(Lsn::from_u64(log_position))
            .map_err(|e| log_failure(&self.dir, &e))
    }
    fn before_write(
        &self,
        pages: &[u32],
        log_position: u64,
    ) -> jetproof_engine::error::Result<u64> {
        self.deferred
            .before_write(pages, &self.log, log_position)
            .map_err(|e| log_failure(&self.dir, &e))
    }
}

#[derive(Debug)]
struct Shared {
    id: u64,
    db: Option<Database>,
    log: Arc<Log>,
    log_dir: PathBuf,
    options: InstanceOptions,
    /// Active transactions and the log's end when each began (a lower bound of its records).
    active: Mutex<BTreeMap<u64, Lsn>>,
    /// Transactions that ended (committed or rolled back) whose end record may not be durable
    /// yet: (end record's position, log end when the transaction began). Until the end record
    /// is durable the checkpoint must not pass the transaction's undo records: a crash losing a
    /// commit record, or a rollback's restores, would leave changes with no way to take them
    /// back.
    committing: Mutex<Vec<(Lsn, Lsn)>>,
    /// Keys changed by open transactions, and which transaction holds each.
    locks: Mutex<HashMap<Vec<u8>, u64>>,
    /// The undo entries of each open transaction that changed anything, in the order logged.
    undo: Mutex<HashMap<u64, Vec<UndoEntry>>>,
    /// Replaced values kept in memory as undo ([`mod@deferred`]).
    deferred: Arc<DeferredUndo>,
    next_transaction: AtomicU64,
    checkpoint_lock: Mutex<Instant>,
    /// When the flush map was last persisted by the checkpointer.
    map_persisted: Mutex<Instant>,
    stop: Mutex<bool>,
    stop_signal: Condvar,
    /// The first error of the background checkpointer.
    failure: Mutex<Option<String>>,
    counters: InstanceCounters,
}

/// One database and its log. Shared by the sessions: every method takes `&self`.
#[derive(Debug)]
pub struct Instance {
    shared: Arc<Shared>,
    checkpointer: Option<JoinHandle<()>>,
}

fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(1, |d| d.as_micros().min(u128::from(u64::MAX / 2)) as u64)
}

pub(crate) fn log_options(dir: &Path, database_id: u128, options: &InstanceOptions) -> LogOptions {
    LogOptions {
        file_size_bytes: options.log_file_size_bytes,
        buffer_size_bytes: options.log_buffer_size_bytes,
        sector_size_bytes: options.log_sector_size_bytes,
        direct_io: options.database.direct_io,
        lazy_flush_interval: options.lazy_flush_interval,
        retention: if options.keep_files {
            Retention::KeepAll
        } else if options.circular {
            Retention::Circular
        } else {
            Retention::DeleteBeforeCheckpoint
        },
        stats: options.database.stats.clone(),
        ..LogOptions::new(dir, database_id)
    }
}

impl Instance {
    /// Creates a new database at `db_path` and a new log in `log_dir`.
    pub fn create(
        backend: Arc<dyn IoBackend>,
        db_path: &Path,
        log_dir: &Path,
        options: InstanceOptions,
    ) -> Result<Instance> {
        let db = Database::create(backend.as_ref(), db_path, options.database.clone())?;
        let log = Log::create(
            backend.clone(),
            log_options(log_dir, db.header().database_id, &options),
        )?;
        Ok(Self::assemble(db, log, log_dir, options))
    }

    /// Opens a database that was shut down cleanly, and its log (a new log if the log directory
    /// holds none and the database was never attached to one, as after `jetproof init`).
    /// A database left dirty by an unclean stop is refused: it needs recovery.
    pub fn open(
        backend: Arc<dyn IoBackend>,
        db_path: &Path,
        log_dir: &Path,
        options: InstanceOptions,
    ) -> Result<Instance> {
        // Read the header first, so a database needing recovery is refused before anything is
        // written to it or to its log.
        let header = {
            let file = backend.open(db_path, &OpenOptions::read_only().buffered())?;
            DbHeader::read(file.as_ref())?
        };
        if header.state == DbState::Dirty {
            return Err(InstanceError::RecoveryNeeded {
                path: db_path.to_path_buf(),
                log_dir: log_dir.to_path_buf(),
            });
        }
        let log_opts = log_options(log_dir, header.database_id, &options);
        let recovery = header.recovery_position;
        let log = if backend.exists(&checkpoint_path(log_dir)) {
            let (log, report) = Log::open(backend.clone(), log_opts)?;
            let checkpoint = LogPosition {
                generation: report.checkpoint.generation,
                offset: report.checkpoint.offset,
            };
            if recovery != LogPosition::default() && recovery != checkpoint {
                return Err(InstanceError::LogMismatch {
                    path: db_path.to_path_buf(),
                    reason: format!(
                        "the database was closed at log position {}:{} but the checkpoint in {} \
                         is {}",
                        recovery.generation,
                        recovery.offset,
                        log_dir.display(),
                        report.checkpoint
                    ),
                });
            }
            log
        } else {
            if recovery != LogPosition::default() {
                return Err(InstanceError::LogMismatch {
                    path: db_path.to_path_buf(),
                    reason: format!(
                        "the database was last used with a log (position {}:{}) but {} holds none",
                        recovery.generation,
                        recovery.offset,
                        log_dir.display()
                    ),
                });
            }
            Log::create(backend.clone(), log_opts)?
        };
        let db = Database::open(backend.as_ref(), db_path, options.database.clone())?;
        Ok(Self::assemble(db, log, log_dir, options))
    }

    /// Recovery's open, after redo: the database is dirty and its log is at the end of the
    /// replayed range. Stamps given out from now on are above `max_stamp` (the highest replayed)
    /// and the stamp stored with the checkpoint (above every page written before it). The
    /// database stays dirty until [`Instance::close`].
    pub(crate) fn open_for_recovery(
        backend: Arc<dyn IoBackend>,
        db_path: &Path,
        log_dir: &Path,
        mut options: InstanceOptions,
        max_stamp: u64,
    ) -> Result<Instance> {
        options.database.accept_dirty = true;
        let db = Database::open(backend.as_ref(), db_path, options.database.clone())?;
        db.advance_update_stamp(max_stamp);
        let (log, _) = Log::open(
            backend.clone(),
            log_options(log_dir, db.header().database_id, &options),
        )?;
        db.advance_update_stamp(log.checkpoint_engine_stamp());
        Ok(Self::assemble(db, log, log_dir, options))
    }

    fn assemble(db: Database, log: Log, log_dir: &Path, options: InstanceOptions) -> Instance {
        let log = Arc::new(log);
        let deferred = Arc::new(DeferredUndo::default());
        db.set_change_log(Arc::new(LogSink {
            log: log.clone(),
            dir: log_dir.to_path_buf(),
            deferred: deferred.clone(),
        }));
        db.set_write_ahead_gate(Arc::new(LogGate {
            log: log.clone(),
            dir: log_dir.to_path_buf(),
            deferred: deferred.clone(),
        }));
        let interval = options.checkpoint_interval;
        let shared = Arc::new(Shared {
            id: NEXT_INSTANCE.fetch_add(1, Ordering::Relaxed),
            db: Some(db),
            log,
            log_dir: log_dir.to_path_buf(),
            options,
            active: Mutex::new(BTreeMap::new()),
            committing: Mutex::new(Vec::new()),
            locks: Mutex::new(HashMap::new()),
            undo: Mutex::new(HashMap::new()),
            deferred,
            // Ids keep growing across runs, so a record of an earlier run is never taken for
            // one of this run's transactions.
            next_transaction: AtomicU64::new(now_us()),
            checkpoint_lock: Mutex::new(Instant::now()),
            map_persisted: Mutex::new(Instant::now()),
            stop: Mutex::new(false),
            stop_signal: Condvar::new(),
            failure: Mutex::new(None),
            counters: InstanceCounters::default(),
        });
        let checkpointer = interval.and_then(|interval| {
            let shared = shared.clone();
            std::thread::Builder::new()
                .name("jetproof-checkpoint".into())
                .spawn(move || checkpointer(&shared, interval))
                .ok()
        });
        Instance {
            shared,
            checkpointer,
        }
    }

    pub fn database(&self) -> &Database {
        self.shared.db()
    }

    pub fn log(&self) -> &Log {
        &self.shared.log
    }

    pub fn log_dir(&self) -> &Path {
        &self.shared.log_dir
    }

    pub fn counters(&self) -> &InstanceCounters {
        &self.shared.counters
    }

    /// Begins this thread's transaction on this instance (a no-op if one is open). Changes made
    /// without an explicit `begin` begin one implicitly.
    pub fn begin(&self) -> u64 {
        self.current_transaction()
    }

    fn current_transaction(&self) -> u64 {
        let instance = self.shared.id;
        if let Some(open) = TRANSACTIONS
            .with_borrow(|all| all.iter().find(|t| t.instance == instance).map(|t| t.id))
        {
            return open;
        }
        let id = self.shared.next_transaction.fetch_add(1, Ordering::Relaxed);
        {
            // The log's end now is at or before every record the transaction will write.
            let mut active = self.shared.active.lock();
            active.insert(id, self.shared.log.end_lsn());
        }
        TRANSACTIONS.with_borrow_mut(|all| {
            all.push(ThreadTransaction {
                instance,
                id,
                page_changes: 0,
                marked: Vec::new(),
                deferred: false,
            });
        });
        id
    }

    /// Runs a change in this thread's transaction, so its log records carry the transaction id.
    fn in_transaction<R>(
        &self,
        change: impl FnOnce(&Database) -> jetproof_engine::error::Result<R>,
    ) -> Result<R> {
        let id = self.current_transaction();
        let (result, logged) = self.logged_as(id, change);
        self.with_thread_transaction(|t| t.page_changes += logged);
        Ok(result?)
    }

    /// Runs `update` on this thread's open transaction on this instance, if there is one.
    fn with_thread_transaction(&self, update: impl FnOnce(&mut ThreadTransaction)) {
        let instance = self.shared.id;
        TRANSACTIONS.with_borrow_mut(|all| {
            if let Some(t) = all.iter_mut().find(|t| t.instance == instance) {
                update(t);
            }
        });
    }

    /// Runs `change` with its page change records tagged with transaction `id`; returns its
    /// result and how many records it logged.
    fn logged_as<R>(
        &self,
        id: u64,
        change: impl FnOnce(&Database) -> jetproof_engine::error::Result<R>,
    ) -> (jetproof_engine::error::Result<R>, u64) {
        let previous = CURRENT.replace(id);
        let previous_logged = LOGGED.replace(0);
        let result = change(self.shared.db());
        let logged = LOGGED.replace(previous_logged);
        CURRENT.set(previous);
        self.shared
            .counters
            .page_change_records
            .fetch_add(logged, Ordering::Relaxed);
        (result, logged)
    }

    /// One write of this thread's transaction to `key`: the key is locked to the transaction
    /// and, the first time, the engine's `before_change` hook ([`LogSink`]) logs the key's prior
    /// state for undo from the leaf the write has latched, before the write's own page changes.
    /// A write that changes nothing releases a key it had just locked.
    fn write(
        &self,
        key: &[u8],
        write: impl FnOnce(&Database) -> jetproof_engine::error::Result<bool>,
    ) -> Result<bool> {
        let id = self.current_transaction();
        let first = {
            let mut locks = self.shared.locks.lock();
            match locks.get(key) {
                Some(&holder) if holder == id => false,
                Some(&holder) => {
                    drop(locks);
                    self.shared
                        .counters
                        .write_conflicts
                        .fetch_add(1, Ordering::Relaxed);
                    return Err(InstanceError::WriteConflict {
                        key: hex(key),
                        holder,
                    });
                }
                None => {
                    locks.insert(key.to_vec(), id);
                    true
                }
            }
        };
        // The key is ours: nobody else can change it between the hook's read and the write.
        UNDO.set(if first {
            UndoSlot::Wanted
        } else {
            UndoSlot::Repeat
        });
        let result = self.in_transaction(write);
        // A prior state the hook kept but no change carried (the write failed before recording
        // anything): logged now, so whatever reached the log can be taken back.
        let kept = match UNDO.take() {
            UndoSlot::Kept { prior, .. } => {
                let appended = self.log_undo(id, key, &prior);
                UNDO.set(UndoSlot::Taken {
                    prior,
                    kept: Kept::Logged,
                });
                appended
            }
            other => {
                UNDO.set(other);
                Ok(())
            }
        };
        match UNDO.replace(UndoSlot::Idle) {
            // Registered even if the undo record's append (or the write) failed: whatever
            // reached the log can be taken back.
            UndoSlot::Taken { prior, kept } => {
                self.shared
                    .undo
                    .lock()
                    .entry(id)
                    .or_default()
                    .push(UndoEntry {
                        key: key.to_vec(),
                        before: prior,
                    });
                let counters = &self.shared.counters;
                match kept {
                    Kept::InMemory => {
                        counters.undo_deferred.fetch_add(1, Ordering::Relaxed);
                        self.with_thread_transaction(|t| t.deferred = true);
                    }
                    Kept::InRecord => {
                        counters.undo_in_records.fetch_add(1, Ordering::Relaxed);
                    }
                    Kept::Logged => {
                        counters.undo_records.fetch_add(1, Ordering::Relaxed);
                        self.with_thread_transaction(|t| t.page_changes += 1);
                    }
                }
            }
            // Nothing was about to change (or the write failed before): nothing to undo.
            UndoSlot::Wanted | UndoSlot::Idle => {
                self.shared.locks.lock().remove(key);
            }
            // A later write keeps the key it locked before.
            UndoSlot::Repeat => {}
            UndoSlot::Kept { .. } => unreachable!("taken above"),
        }
        kept?;
        result
    }

    /// Appends an undo record for transaction `id` (outside the engine's hook).
    fn log_undo(&self, id: u64, key: &[u8], prior: &Prior) -> Result<()> {
        let mut buffer = Vec::new();
        undo::encode_undo(key, prior, &mut buffer);
        self.shared.log.append(&Record {
            record_type: undo::RECORD_UNDO,
            transaction_id: id,
            payload: &buffer,
        })?;
        Ok(())
    }

    /// Adds a record in this thread's transaction; false if the key exists.
    pub fn insert(&self, key: &[u8], value: &[u8]) -> Result<bool> {
        self.write(key, |db| db.insert(key, value))
    }

    /// Replaces a record's value in this thread's transaction; false if the key is absent.
    pub fn replace(&self, key: &[u8], value: &[u8]) -> Result<bool> {
        self.write(key, |db| db.replace(key, value))
    }

    /// Deletes a record in this thread's transaction; false if the key is absent. The record is
    /// only marked deleted (reads no longer see it; undo clears the mark) and is removed when the
    /// transaction commits.
    pub fn delete(&self, key: &[u8]) -> Result<bool> {
        let marked = self.write(key, |db| db.mark_deleted(key))?;
        if marked {
            self.with_thread_transaction(|t| t.marked.push(key.to_vec()));
        }
        Ok(marked)
    }

    /// Reads a record (reads log nothing, and begin no transaction).
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        Ok(self.shared.db().get(key)?)
    }

    /// Up to `limit` records from `start` on, in key order.
    pub fn scan(&self, start: &[u8], limit: usize) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        Ok(self.shared.db().scan(start, limit)?)
    }

    /// Commits this thread's transaction: appends its commit record and, unless `lazy`, waits
    /// until it is on stable storage. Returns the commit record's position, or `None` when the
    /// transaction changed nothing (no record is written for it) or none was open.
    pub fn commit(&self, lazy: bool) -> Result<Option<Lsn>> {
        let instance = self.shared.id;
        let Some(transaction) = TRANSACTIONS.with_borrow_mut(|all| {
            let at = all.iter().position(|t| t.instance == instance)?;
            Some(all.swap_remove(at))
        }) else {
            return Ok(None);
        };
        let result = if transaction.page_changes == 0 {
            Ok(None)
        } else {
            let payload = format::encode_commit(transaction.page_changes);
            let log = &self.shared.log;
            self.shared
                .deferred
                .end(transaction.id, transaction.deferred, || {
                    log.append(&Record {
                        record_type: format::RECORD_COMMIT,
                        transaction_id: transaction.id,
                        payload: &payload,
                    })
                })
                .map(Some)
        };
        if transaction.deferred {
            self.shared.deferred.tidy(&self.shared.log);
        }
        // Committed: the records it marked deleted are removed now, while their keys are still
        // locked (no other transaction can have brought one back or marked it again). The purge
        // is logged after the commit record as no transaction's (id 0), as ESE's version-store
        // cleanup is: it is never taken back, and a checkpoint that falls between the commit
        // record and the purge must not make recovery see a transaction without its commit.
        // A crash that loses the purge leaves the marks, which recovery purges.
        let purged = match &result {
            Ok(Some(_)) => self.purge(&transaction.marked).map(|_| ()),
            _ => Ok(()),
        };
        // Appended (or failed): the transaction no longer holds its keys (a later change of
        // them is logged after this commit record and its purge), and holds the checkpoint back
        // only until they are durable.
        if let Ok(Some(_)) = &result {
            let end = self.shared.log.end_lsn();
            self.shared.hold_until_durable(transaction.id, end);
        }
        self.shared.end_transaction(transaction.id);
        let Some(lsn) = result? else {
            return Ok(None);
        };
        purged?;
        let counters = &self.shared.counters;
        counters.commit_records.fetch_add(1, Ordering::Relaxed);
        let durability = if lazy {
            Durability::Lazy
        } else {
            Durability::Durable
        };
        self.shared.log.commit(lsn, durability)?;
        counters
            .transactions_committed
            .fetch_add(1, Ordering::Relaxed);
        Ok(Some(lsn))
    }

    /// Removes the records in `keys` that are still marked deleted, logged as no transaction's
    /// (id 0: a committed transaction's cleanup, or recovery's), and returns how many it removed.
    /// No undo record: a purge is never taken back.
    pub(crate) fn purge(&self, keys: &[Vec<u8>]) -> Result<u64> {
        if keys.is_empty() {
            return Ok(0);
        }
        let (result, _) = self.logged_as(0, |db| {
            let mut purged = 0u64;
            for key in keys {
                purged += u64::from(db.purge(key)?);
            }
            Ok(purged)
        });
        let purged = result?;
        self.shared
            .counters
            .records_purged
            .fetch_add(purged, Ordering::Relaxed);
        Ok(purged)
    }

    /// Takes back this thread's transaction: every key it changed is restored to its state
    /// before the transaction (through the engine, logged), then a rollback record ends it.
    /// Returns whether there was anything to take back.
    pub fn rollback(&self) -> Result<bool> {
        let instance = self.shared.id;
        let Some(transaction) = TRANSACTIONS.with_borrow_mut(|all| {
            let at = all.iter().position(|t| t.instance == instance)?;
            Some(all.swap_remove(at))
        }) else {
            return Ok(false);
        };
        // Kept registered until the end, so the keys stay locked while they are restored.
        let entries = self
            .shared
            .undo
            .lock()
            .get(&transaction.id)
            .cloned()
            .unwrap_or_default();
        let result = self.take_back(transaction.id, &entries);
        if let Ok(Some(end)) = &result {
            self.shared.hold_until_durable(transaction.id, *end);
        }
        self.shared.end_transaction(transaction.id);
        result?;
        Ok(!entries.is_empty())
    }

    /// Restores `entries` (in reverse) as transaction `id` and logs its rollback record. Used by
    /// [`Instance::rollback`], [`Instance::close`] and recovery, which passes the entries it
    /// read from the log.
    /// Returns the rollback record's position (`None`: nothing to take back, nothing logged).
    pub(crate) fn take_back(&self, id: u64, entries: &[UndoEntry]) -> Result<Option<Lsn>> {
        if entries.is_empty() {
            return Ok(None);
        }
        for entry in entries.iter().rev() {
            let key = entry.key.as_slice();
            let (result, _) = self.logged_as(id, |db| {
                Ok(match &entry.before {
                    // Whatever the key holds, live or marked deleted, goes.
                    Prior::Absent => {
                        db.delete(key)?;
                        true
                    }
                    Prior::Value(value) => {
                        match db.get(key)? {
                            Some(now) if now == *value => {}
                            Some(_) => {
                                db.replace(key, value)?;
                            }
                            // Absent or marked deleted: an insert brings a marked record back.
                            None => {
                                db.insert(key, value)?;
                            }
                        }
                        true
                    }
                    // The record is still on its page: clear its mark (already live after a
                    // partial rollback: nothing to do). Gone would mean it was purged while
                    // this transaction held the key, which cannot happen.
                    Prior::Marked => db.unmark(key)? || db.get(key)?.is_some(),
                })
            });
            if !result? {
                return Err(InstanceError::UndoFailed {
                    key: hex(key),
                    reason: "the record this transaction marked deleted is gone".into(),
                });
            }
        }
        let log = &self.shared.log;
        let end = self.shared.deferred.end(id, true, || {
            log.append(&Record {
                record_type: undo::RECORD_ROLLBACK,
                transaction_id: id,
                payload: &[],
            })
        })?;
        self.shared
            .counters
            .transactions_rolled_back
            .fetch_add(1, Ordering::Relaxed);
        Ok(Some(end))
    }

    /// Recovery's undo of a transaction that has no commit record: registered as active while
    /// its keys are restored, so a checkpoint cannot pass its undo records before its rollback
    /// record is logged.
    pub(crate) fn roll_back_recovered(&self, id: u64, entries: &[UndoEntry]) -> Result<()> {
        self.shared
            .active
            .lock()
            .insert(id, self.shared.log.end_lsn());
        let result = self.take_back(id, entries);
        if let Ok(Some(end)) = &result {
            self.shared.hold_until_durable(id, *end);
        }
        self.shared.active.lock().remove(&id);
        result.map(|_| ())
    }

    /// Runs one checkpoint pass now (the background checkpointer runs the same), and always
    /// rewrites the checkpoint file if the checkpoint moved.
    pub fn checkpoint(&self) -> Result<CheckpointReport> {
        self.shared.checkpoint_pass(true)
    }

    /// Writes every page dirty since before the log's end as of now (the write-ahead gate makes
    /// the log durable first), while sessions go on: pages they latch or change meanwhile may
    /// stay dirty. Then a checkpoint pass, which moves the checkpoint past what was written.
    /// A performance test calls it when the caches are warm, so the measured window does not
    /// inherit the unpaced warm-up's backlog of dirty pages (`docs/workload.md`, "Pacing").
    pub fn flush_dirty_pages(&self) -> Result<CheckpointReport> {
        let end = self.shared.log.end_lsn();
        self.shared.db().flush_older_than(end.to_u64())?;
        self.shared.checkpoint_pass(true)
    }

    /// The log written so far, in bytes of log since the first generation (the log's tip as
    /// one position; the pacing controller's measure of log per transaction).
    pub fn log_bytes(&self) -> u64 {
        linear(
            self.shared.log.end_lsn(),
            self.shared.options.log_file_size_bytes,
        )
    }

    /// For every dirty page, the log still to be written before checkpoint-depth flushing
    /// writes it (0 for one already due), ascending: continuous checkpoint maintenance writes a
    /// page when its first change not yet written falls the checkpoint depth behind the log's
    /// tip, so the depth flushes' writes are known ahead, as a function of the log to come.
    pub fn depth_due(&self) -> Vec<u64> {
        let options = &self.shared.options;
        let file_size = options.log_file_size_bytes;
        let tip = linear(self.shared.log.end_lsn(), file_size);
        let mut due: Vec<u64> = self
            .shared
            .db()
            .dirty_first_changes()
            .into_iter()
            .map(|first| {
                (linear(Lsn::from_u64(first), file_size) + options.checkpoint_depth_bytes)
                    .saturating_sub(tip)
            })
            .collect();
        due.sort_unstable();
        due
    }

    /// The checkpoint depth, in bytes of log.
    pub fn checkpoint_depth_bytes(&self) -> u64 {
        self.shared.options.checkpoint_depth_bytes
    }

    /// Replaced values kept as undo that were logged because a page holding the change was
    /// written while their transaction was open ([`mod@deferred`]), and those kept right now.
    pub fn deferred_undo_logged(&self) -> (u64, u64) {
        let d = &self.shared.deferred;
        d.tidy(&self.shared.log);
        (d.logged() as u64, d.held() as u64)
    }

    /// The error that stopped the background checkpointer, if any.
    pub fn checkpointer_failure(&self) -> Option<String> {
        self.shared.failure.lock().clone()
    }

    /// Clean shutdown: every dirty page flushed (the log made durable first, by the write-ahead
    /// gate), the log flushed, a checkpoint at its end, the database header given that recovery
    /// position and marked clean, the log closed. Transactions still open (of any session) are
    /// rolled back first.
    pub fn close(mut self) -> Result<()> {
        self.stop_checkpointer();
        let open: Vec<(u64, Vec<UndoEntry>)> = self
            .shared
            .undo
            .lock()
            .iter()
            .map(|(id, entries)| (*id, entries.clone()))
            .collect();
        for (id, entries) in open {
            let result = self.take_back(id, &entries);
            self.shared.end_transaction(id);
            result?;
        }
        let shared = &self.shared;
        let db = shared.db();
        db.flush()?;
        shared.log.flush()?;
        let end = shared.log.flushed_lsn();
        if end > shared.log.checkpoint() {
            // The flush map's snapshot first, paired with the checkpoint (see `checkpoint_pass`).
            db.persist_flush_map(end.to_u64())?;
            shared
                .log
                .write_checkpoint_stamped(end, Some(db.next_update_stamp()))?;
        }
        db.set_recovery_position(LogPosition {
            generation: end.generation,
            offset: end.offset,
        })?;
        let Some(shared) = Arc::get_mut(&mut self.shared) else {
            return Err(InstanceError::InvalidOption {
                field: "instance",
                reason: "closed while still in use by another thread".into(),
            });
        };
        if let Some(db) = shared.db.take() {
            db.close()?;
        }
        // Everything appended is durable and the checkpoint names the end: dropping the log now
        // loses nothing (its `close` would only flush again).
        Ok(())
    }

    fn stop_checkpointer(&mut self) {
        *self.shared.stop.lock() = true;
        self.shared.stop_signal.notify_all();
        if let Some(handle) = self.checkpointer.take() {
            let _ = handle.join();
        }
    }
}

impl Drop for Instance {
    /// Without [`Instance::close`], an unclean stop: the database header stays dirty.
    fn drop(&mut self) {
        self.stop_checkpointer();
    }
}

/// Bytes of log between two positions, counting each generation as its data area.
fn log_distance_bytes(from: Lsn, to: Lsn, file_size_bytes: u64) -> u64 {
    linear(to, file_size_bytes).saturating_sub(linear(from, file_size_bytes))
}

fn linear(lsn: Lsn, file_size_bytes: u64) -> u64 {
    let usable = file_size_bytes.saturating_sub(DATA_START).max(1);
    lsn.generation
        .saturating_mul(usable)
        .saturating_add(lsn.offset.saturating_sub(DATA_START))
}

/// The position `bytes` of log before `lsn` (an approximation across generations, used only as
/// a threshold for flushing).
fn back_by(lsn: Lsn, bytes: u64, file_size_bytes: u64) -> Lsn {
    let usable = file_size_bytes.saturating_sub(DATA_START).max(1);
    let at = linear(lsn, file_size_bytes).saturating_sub(bytes);
    Lsn::new(at / usable, at % usable + DATA_START)
}

/// A key, printable.
fn hex(key: &[u8]) -> String {
    key.iter().map(|b| format!("{b:02x}")).collect()
}

impl Shared {
    /// Transaction `id` ended with the record at `end`: until that record is durable, the
    /// checkpoint stays at or before where the transaction began.
    fn hold_until_durable(&self, id: u64, end: Lsn) {
        if let Some(&begun) = self.active.lock().get(&id) {
            self.committing.lock().push((end, begun));
        }
    }

    /// The transaction is over (committed, rolled back, or failed): it no longer holds the
    /// checkpoint back nor its keys.
    fn end_transaction(&self, id: u64) {
        self.active.lock().remove(&id);
        if let Some(entries) = self.undo.lock().remove(&id) {
            let mut locks = self.locks.lock();
            for entry in entries {
                if locks.get(&entry.key) == Some(&id) {
                    locks.remove(&entry.key);
                }
            }
        }
    }

    fn db(&self) -> &Database {
        match &self.db {
            Some(db) => db,
            // `db` is only taken by `close`, which consumes the instance.
            None => unreachable!("the database is taken only when the instance is closed"),
        }
    }

    /// The oldest log position recovery would still need now.
    fn needed_position(&self) -> Lsn {
        // The durable end is read first: every record appended after this read is at or after
        // it, and every record appended before it belongs to a transaction registered before the
        // `active` snapshot below (registered at begin) or to a page already dirty (marked before
        // its operation returned), so the minimum cannot skip a record still needed.
        let mut needed = self.log.flushed_lsn();
        {
            // A commit record that starts before the durable end is wholly durable (the log
            // writes whole records).
            let mut committing = self.committing.lock();
            committing.retain(|&(commit, _)| commit >= needed);
            if let Some(&(_, begun)) = committing.iter().min_by_key(|(_, begun)| *begun) {
                needed = needed.min(begun);
            }
        }
        if let Some(&begun) = self.active.lock().values().min() {
            needed = needed.min(begun);
        }
        if let Some(position) = self.db().oldest_dirty_log_position()
            && position != 0
        {
            needed = needed.min(Lsn::from_u64(position));
        }
        needed
    }

    fn checkpoint_pass(&self, force_write: bool) -> Result<CheckpointReport> {
        let mut last_write = self.checkpoint_lock.lock();
        let file_size = self.options.log_file_size_bytes;
        let depth = self.options.checkpoint_depth_bytes;
        let mut needed = self.needed_position();
        let mut flushed_for_depth = false;
        let tip = self.log.end_lsn();
        if log_distance_bytes(needed, tip, file_size) > depth {
            // Continuous checkpoint maintenance, as ESE's (`BFIMaintCheckpointDepthIFlushPages`
            // flushes every page whose oldest change is before the preferred checkpoint, the
            // log's tip less the depth, each time it runs): the pages dirty since before the
            // depth behind the tip, and no more. Each pass flushes the pages that crossed that
            // line since the last one (100 ms of log), so the depth's writes are spread evenly
            // over the run instead of coming in bursts of a quarter of the depth's pages.
            let threshold = back_by(tip, depth, file_size);
            let flushed = self.db().flush_older_than(threshold.to_u64())?;
            self.counters.depth_flushes.fetch_add(1, Ordering::Relaxed);
            self.counters
                .depth_flush_writes
                .fetch_add(flushed.writes, Ordering::Relaxed);
            self.counters
                .depth_flush_pages
                .fetch_add(flushed.pages, Ordering::Relaxed);
            flushed_for_depth = true;
            needed = self.needed_position();
        }
        let current = self.log.checkpoint();
        // A depth flush does not force a write: under continuous maintenance nearly every pass
        // flushes a few pages, and the checkpoint file (a write and an fdatasync of the log
        // device, with the database file's fdatasync before it) is rewritten at most once per
        // interval, as it is without depth flushes.
        let due = force_write || last_write.elapsed() >= self.options.checkpoint_write_interval;
        let mut written = false;
        if needed > current && due {
            // The flush map's snapshot must pair with every checkpoint written: a page written
            // after the snapshot then always has a record recovery replays. Persisting it syncs
            // the database file first, which the checkpoint needs anyway (pages written since
            // the last checkpoint are not synced by the cache: a checkpoint past their changes
            // would lose both the page write and the need to redo it at a crash). A large map
            // is persisted less often than checkpoints are written (at most
            // FLUSH_MAP_BYTES_PER_SEC of map pages a second, on average), and the checkpoint
            // then moves only as far as its last snapshot.
            let db = self.db();
            let since = self.map_persisted.lock().elapsed();
            let map_bytes = db.flush_map().dirty_map_pages() as u64
                * jetproof_engine::flushmap::BLOCK_BYTES as u64;
            let map_due = since.as_secs_f64() * FLUSH_MAP_BYTES_PER_SEC as f64 >= map_bytes as f64
                || force_write;
            if map_due {
                db.persist_flush_map(needed.to_u64())?;
                *self.map_persisted.lock() = Instant::now();
                self.counters
                    .flush_map_persists
                    .fetch_add(1, Ordering::Relaxed);
            } else {
                db.file().sync_data(IoClass::DbWrite)?;
            }
            let target = needed.min(Lsn::from_u64(db.flush_map_checkpoint()));
            if target > current {
                // Every page written so far carries a stamp below this one: recovery starts
                // its stamps above it (and above every replayed one), whatever the header says.
                let stamp = db.next_update_stamp();
                self.log.write_checkpoint_stamped(target, Some(stamp))?;
                self.counters
                    .checkpoint_writes
                    .fetch_add(1, Ordering::Relaxed);
                *last_write = Instant::now();
                written = true;
            }
        }
        let checkpoint = self.log.checkpoint();
        Ok(CheckpointReport {
            checkpoint,
            depth_bytes: log_distance_bytes(checkpoint, tip, file_size),
            flushed_for_depth,
            written,
        })
    }
}

fn checkpointer(shared: &Shared, interval: Duration) {
    let mut stop = shared.stop.lock();
    while !*stop {
        shared.stop_signal.wait_for(&mut stop, interval);
        if *stop {
            break;
        }
        drop(stop);
        if let Err(error) = shared.checkpoint_pass(false) {
            *shared.failure.lock() = Some(error.to_string());
            return;
        }
        stop = shared.stop.lock();
    }
}
