//! Redo recovery of a database left dirty by an unclean stop (issue 3, item 6): the log is
//! replayed from the checkpoint over the file, each page change redone only where the page is
//! older than the change (its update stamp), so replaying over pages written at any time before
//! the crash brings every page to the log's end. `docs/log.md`, "Recovery", has the case table.
//! The pages the next records name are read ahead by a few reader threads ([`ReplayOptions`],
//! `crate::readahead`), so several reads are in flight while the replay redoes the records
//! before them; which thread reads a page, and when, never changes what redo does with it.
//!
//! Before anything is logged, written back or marked, the log's end is checked
//! (`check_log_end`, over the pages the replay read: `crate::visited`): a log that provably lost
//! records (a generation missing or cut short, synced data gone, a page carrying a change past
//! the end) is [`InstanceError::LostLog`] and the database stays dirty (`docs/log.md`, "The log's
//! end is proved").
//!
//! The steps, each a method of `Replay`, in this order (each crash point leaves a state the
//! next `recover` finishes):
//! 1. Redo (`Replay::redo`), then the log's end checked (`Replay::check_log_end`) and every
//!    loser's replace found on its page matched to an undo record
//!    (`Replay::check_undo_logged_before_write`); the undo values taken from pages logged
//!    (`Replay::log_undo_taken_from_pages`); pages written and synced (`Replay::write_back`).
//!    A crash here leaves the header dirty and the checkpoint where it was: the next run replays
//!    again, and redo skips what already reached the disk.
//! 2. Undo, then a clean close (`Replay::undo_and_close`): the instance is opened over the
//!    still-dirty database (its update stamp advanced past every replayed stamp), every
//!    transaction with undo records but neither a commit nor a rollback record in the log (a
//!    loser) is taken back through the engine ([`crate::undo`]: its keys restored to their state
//!    before it, logged as ordinary page changes, then a rollback record), and the instance is
//!    closed cleanly: pages flushed and synced, the log flushed, the checkpoint moved to the
//!    log's end, and only then the header given that recovery position and marked clean. A crash
//!    before the checkpoint moved leaves everything to replay again: redo repeats the restores
//!    that were logged, and undo restores the losers again (a restore sets an absolute state, so
//!    repeating it is harmless). A crash after it leaves the header dirty with nothing left to
//!    replay or undo.
#![deny(clippy::indexing_slicing, clippy::unwrap_used)]

use std::collections::btree_map::Entry;
use std::collections::{BTreeMap, BTreeSet, HashSet, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use jetproof_engine::change::{self, OwnedPageChange};
use jetproof_engine::checksum::PageCheck;
use jetproof_engine::flushmap::{FlushMap, MapIdentity, ReadCheck};
use jetproof_engine::{DbHeader, DbState, checksum, flush_map_path, node, page};
use jetproof_io::meter::MeteredFile;
use jetproof_io::{AlignedBuf, IoBackend, IoClass, IoFile, OpenOptions};
use jetproof_log::{LogReader, LogRecord, Lsn, ReadOptions, TornTail, read_checkpoint};

use crate::format::{self, DecodeError, EngineRecord, RecordUndo};
use crate::group::{self, GroupPart};
use crate::readahead::Readers;
use crate::undo::{self, Prior, UndoEntry};
use crate::visited::VisitedPages;
use crate::{Instance, InstanceError, InstanceOptions, Result};

/// Pages kept in memory between writes, at least; recovery keeps up to the instance's cache
/// maximum (the memory the run would have used), and when more are being worked on they are
/// all written and forgotten. Most records of a soft recovery find their page already current
/// (flushed before the crash), so every page kept saves reading it again for the next record.
const PAGE_MAP_MIN: usize = 256;

/// Pages the replay asks for ahead of the record it is redoing, at most (read or being read and
/// not used yet; `docs/log.md`, "Read-ahead during replay"). Never more than a quarter of the
/// pages the replay keeps, which they count against.
pub const READ_AHEAD_DEPTH: usize = 64;

/// Reader threads per replay: page reads in flight at once, at most (each reads one page at a
/// time, so the backend sees this queue depth per database).
pub const READ_AHEAD_READERS: usize = 8;

/// Log records decoded ahead of the one being redone, at most, to find the pages to read ahead
/// (fewer when [`READ_AHEAD_DEPTH`] pages are already asked for).
const LOOK_AHEAD_RECORDS: usize = 4096;

/// Payload bytes of the records decoded ahead, at most (and one record more).
const LOOK_AHEAD_BYTES: usize = 8 << 20;

/// How the replay reads its pages; [`recover`] uses the default.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReplayOptions {
    /// Pages asked for ahead of the replay and not used yet, at most; 0 turns read-ahead off
    /// (every page is read by the replaying thread when a record needs it, as before).
    pub read_ahead_depth: usize,
    /// Reader threads (0 turns read-ahead off).
    pub read_ahead_readers: usize,
    /// The least number of pages the replay keeps in memory whatever the cache maximum (tests
    /// lower it to make the replay write and forget its pages often).
    pub page_map_min: usize,
}

impl Default for ReplayOptions {
    fn default() -> Self {
        ReplayOptions {
            read_ahead_depth: READ_AHEAD_DEPTH,
            read_ahead_readers: READ_AHEAD_READERS,
            page_map_min: PAGE_MAP_MIN,
        }
    }
}

impl ReplayOptions {
    /// No read-ahead: the replay reads each page itself when a record needs it.
    pub fn without_read_ahead() -> ReplayOptions {
        ReplayOptions {
            read_ahead_depth: 0,
            read_ahead_readers: 0,
            ..ReplayOptions::default()
        }
    }
}

/// What one recovery did.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RecoveryReport {
    /// The database was clean: nothing was replayed or written.
    pub was_clean: bool,
    /// Log generation files read from the checkpoint on.
    pub logs_replayed: u64,
    /// Page changes redone (the page was older than the change).
    pub records_applied: u64,
    /// Page changes already on the page (its update stamp was at or past the change's).
    pub records_skipped: u64,
    /// Commit records read.
    pub commits: u64,
    /// Transactions with changes in the replayed log but no commit or rollback record.
    pub uncommitted_transactions: u64,
    /// Of those, the ones taken back by undo (each had undo records; the others had only page
    /// changes of a rollback already complete in content, and are ended the same way).
    pub transactions_rolled_back: u64,
    /// Undo entries restored (one per key per transaction taken back).
    pub undo_entries: u64,
    /// Records still marked deleted after undo (committed deletes whose purge did not reach
    /// the log), removed.
    pub records_purged: u64,
    /// CPU time of the recovering thread (redo and undo), seconds.
    pub cpu_seconds: f64,
    /// Structural changes whose last part never reached the log, left out (`crate::group`).
    pub groups_dropped: u64,
    /// Distinct pages written back.
    pub pages_written: u64,
    /// Pages the replaying thread read itself, waiting for each (not read ahead).
    pub pages_read: u64,
    /// Pages read ahead by the reader threads and then used by the replay.
    pub pages_read_ahead: u64,
    /// Of those, the ones still being read when the replay needed them (it waited for the rest
    /// of that read instead of reading the page itself).
    pub read_ahead_waits: u64,
    pub seconds: f64,
    /// `seconds / logs_replayed` (0 when none was).
    pub seconds_per_log: f64,
    /// A torn write at the log's end, tolerated.
    pub torn_tail: Option<TornTail>,
    /// The flush map could not vouch for the pages the replay did not read (it was missing, or
    /// its snapshot was older than the checkpoint): lost-write detection starts afresh for them
    /// (each is checked from its next read or write on). Worth a line in the test log.
    pub flush_map_restarted: bool,
    /// Pages the replay read with one flipped bit (page, bit), corrected in memory and written
    /// back with their redo: the storage returned them damaged, and the write repaired the file;
    /// reported so that the repair is never silent.
    pub pages_corrected: Vec<(u32, usize)>,
}

/// Replays the log of a dirty database (see the module header); a no-op on a clean one. Pages
/// are read ahead with the default [`ReplayOptions`].
pub fn recover(
    backend: Arc<dyn IoBackend>,
    db_path: &Path,
    log_dir: &Path,
    options: &InstanceOptions,
) -> Result<RecoveryReport> {
    recover_with(
        backend,
        db_path,
        log_dir,
        options,
        &ReplayOptions::default(),
    )
}

/// [`recover`] with the replay's page reading chosen by `replay` (read-ahead changes which
/// thread reads a page and when, never what the replay does with it). The steps are
/// `Replay`'s methods, in the module header's order.
pub fn recover_with(
    backend: Arc<dyn IoBackend>,
    db_path: &Path,
    log_dir: &Path,
    options: &InstanceOptions,
    replay: &ReplayOptions,
) -> Result<RecoveryReport> {
    let started = Instant::now();
    let Some(mut replay) = Replay::start(backend, db_path, log_dir, options, replay)? else {
        return Ok(RecoveryReport {
            was_clean: true,
            ..RecoveryReport::default()
        });
    };
    replay.redo()?;
    replay.check_log_end()?;
    replay.check_undo_logged_before_write()?;
    replay.log_undo_taken_from_pages()?;
    replay.write_back()?;
    let mut report = replay.undo_and_close()?;
    report.seconds = started.elapsed().as_secs_f64();
    report.seconds_per_log = if report.logs_replayed == 0 {
        0.0
    } else {
        report.seconds / report.logs_replayed as f64
    };
    Ok(report)
}

/// One recovery of one dirty database: what the replay has read so far and what it still owes
/// (the module header gives the steps and why they come in this order).
struct Replay<'a> {
    backend: Arc<dyn IoBackend>,
    db_path: &'a Path,
    log_dir: &'a Path,
    options: &'a InstanceOptions,
    database_id: u128,
    /// The checkpoint the replay starts from: its position (the flush map's snapshot is paired
    /// with it) and the engine's update stamp at it (for the lost-log check).
    checkpoint_lsn: u64,
    checkpoint_stamp: u64,
    reader: LogReader,
    look_ahead: LookAhead,
    pages: PageMap,
    /// Pages the replay keeps in memory at most (read ahead included) before writing them.
    page_map_limit: usize,
    /// A map whose snapshot is older than the checkpoint cannot vouch for the pages the replay
    /// does not read (one of them may have been written after it with no record left to
    /// replay): its "behind" checks stay sound (no page is ever legitimately older than a
    /// committed snapshot), but after the replay its other entries are forgotten.
    map_older_than_checkpoint: bool,
    report: RecoveryReport,
    /// Transactions with changes read and no commit or rollback read yet.
    open: BTreeSet<u64>,
    /// The undo entries of each transaction not yet ended, in log order.
    losers: BTreeMap<u64, Vec<UndoEntry>>,
    /// Of those, the replaced values taken from the pages (`RecordUndo::OnPage`): not in the
    /// log, and no longer on their pages once these are written, so logged before that
    /// ([`Replay::log_undo_taken_from_pages`]).
    from_pages: BTreeMap<u64, Vec<UndoEntry>>,
    /// Keys whose first replace was already on its page (written after the change): the value
    /// must then be in an undo record that the write-ahead gate logged before the write.
    logged_before_write: BTreeMap<u64, Vec<(Vec<u8>, Lsn)>>,
    /// Parts of each transaction's group (structural change) read so far.
    groups: BTreeMap<u64, Vec<EngineRecord>>,
    /// Keys marked deleted by the replayed records and not seen removed or brought back since
    /// (a purge, an insert over the mark, its undo): those still marked once the losers are
    /// taken back belong to committed deletes whose purge was lost, and are purged. (A purge
    /// that merged leaves is a node splice, which names no key: that key is looked up for
    /// nothing.)
    marked: HashSet<Vec<u8>>,
    cpu_started: std::time::Duration,
    /// The highest update stamp of the records read.
    max_stamp: u64,
    /// The position of the last record replayed (for the check that it only grows).
    replayed_to: Option<Lsn>,
    /// The log provably ended early (a generation missing or cut short): every record before
    /// the loss is redone in memory, then the loss is reported with the pages it shows on.
    lost: Option<jetproof_log::LogError>,
}

/// What the replay does after one record.
enum Next {
    Record,
    /// The log provably lost records here ([`Replay::lost`]): no record after it is redone.
    Stop,
}

impl<'a> Replay<'a> {
    /// Opens the database file and its log from the checkpoint; `None` if the database is
    /// clean (nothing to replay, nothing written).
    fn start(
        backend: Arc<dyn IoBackend>,
        db_path: &'a Path,
        log_dir: &'a Path,
        options: &'a InstanceOptions,
        replay: &ReplayOptions,
    ) -> Result<Option<Replay<'a>>> {
        let file = backend.open(
            db_path,
            &OpenOptions::read_write().with_direct(options.database.direct_io),
        )?;
        // The replay's page reads and writes are metered with the log reads, so a soft-recovery
        // test can report the I/O of the replay (Jetstress's recovery I/O table).
        let file = match &options.database.stats {
            Some(stats) => MeteredFile::wrap(file, stats.clone()),
            None => file,
        };
        let header = DbHeader::read_with_class(file.as_ref(), IoClass::DbRead)?;
        if header.state == DbState::Clean {
            return Ok(None);
        }
        let Some(checkpoint) = read_checkpoint(&*backend, log_dir, Some(header.database_id))?
        else {
            return Err(InstanceError::RecoveryImpossible {
                path: db_path.to_path_buf(),
                reason: format!(
                    "it is dirty but {} holds no log checkpoint to replay from",
                    log_dir.display()
                ),
            });
        };
        let read_options = ReadOptions {
            direct_io: options.database.direct_io,
            class: IoClass::LogRead,
            stats: options.database.stats.clone(),
            ..ReadOptions::default()
        };
        let (reader, _) = LogReader::from_checkpoint(
            backend.clone(),
            log_dir,
            Some(header.database_id),
            read_options,
        )?;
        let page_map_limit =
            usize::try_from(options.database.cache_max_bytes / u64::from(header.page_size))
                .unwrap_or(usize::MAX)
                .max(replay.page_map_min)
                .max(1);
        let flush_map = open_flush_map(&*backend, db_path, &header, options)?;
        let checkpoint_lsn = checkpoint.checkpoint.lsn.to_u64();
        let map_older_than_checkpoint = flush_map
            .as_ref()
            .is_some_and(|map| map.persisted_checkpoint() < checkpoint_lsn);
        let pages = PageMap::new(
            file,
            db_path,
            header.page_size as usize,
            replay,
            page_map_limit,
            flush_map,
        )?;
        Ok(Some(Replay {
            backend,
            db_path,
            log_dir,
            options,
            database_id: header.database_id,
            checkpoint_lsn,
            checkpoint_stamp: checkpoint.checkpoint.engine_stamp,
            reader,
            look_ahead: LookAhead::default(),
            pages,
            page_map_limit,
            map_older_than_checkpoint,
            report: RecoveryReport::default(),
            open: BTreeSet::new(),
            losers: BTreeMap::new(),
            from_pages: BTreeMap::new(),
            logged_before_write: BTreeMap::new(),
            groups: BTreeMap::new(),
            marked: HashSet::new(),
            cpu_started: jetproof_io::sample::thread_cpu_time(),
            max_stamp: 0,
            replayed_to: None,
            lost: None,
        }))
    }

    /// Step 1, redo: every record from the checkpoint to the log's end (or to the loss that
    /// ended it early), in log order, the pages its records name read ahead.
    fn redo(&mut self) -> Result<()> {
        loop {
            self.look_ahead.fill(&mut self.reader, &mut self.pages);
            let Some(ahead) = self.look_ahead.pop() else {
                return Ok(());
            };
            if let Next::Stop = self.redo_record(ahead)? {
                return Ok(());
            }
        }
    }

    /// One record: undo and rollback records change the transaction's bookkeeping, a group
    /// part is held until its last part comes, and page changes and commits are redone.
    fn redo_record(&mut self, ahead: Ahead) -> Result<Next> {
        let Ahead {
            lsn,
            transaction_id,
            body,
            ..
        } = ahead;
        // Invariant: the replay's position only grows, from the checkpoint on; a record read
        // twice or out of order would be redone over a later change of its page. (A failed
        // read carries no position.)
        if !matches!(body, Body::Failed(_)) {
            debug_assert!(
                self.replayed_to < Some(lsn) && lsn.to_u64() >= self.checkpoint_lsn,
                "replay goes from {:?} to {lsn} (checkpoint {})",
                self.replayed_to,
                Lsn::from_u64(self.checkpoint_lsn)
            );
            self.replayed_to = Some(lsn);
        }
        let changes = match body {
            Body::Failed(InstanceError::Log(error @ jetproof_log::LogError::LostLog { .. })) => {
                self.lost = Some(error);
                return Ok(Next::Stop);
            }
            Body::Failed(e) => return Err(e),
            Body::Undo(entry) => {
                let entry =
                    entry.map_err(|e| self.impossible(format!("undo record at {lsn}"), e))?;
                self.open.insert(transaction_id);
                self.losers.entry(transaction_id).or_default().push(entry);
                return Ok(Next::Record);
            }
            Body::Rollback => {
                self.end_transaction(transaction_id);
                return Ok(Next::Record);
            }
            Body::Group(part) => {
                // A structural change: applied only once its last part is read.
                let part = part.map_err(|e| self.impossible(format!("log record at {lsn}"), e))?;
                self.groups
                    .entry(transaction_id)
                    .or_default()
                    .extend(part.changes);
                if part.more {
                    return Ok(Next::Record);
                }
                self.groups.remove(&transaction_id).unwrap_or_default()
            }
            Body::Change(decoded) => {
                vec![decoded.map_err(|e| self.impossible(format!("log record at {lsn}"), e))?]
            }
        };
        for decoded in changes {
            match decoded {
                EngineRecord::Commit { .. } => {
                    self.report.commits += 1;
                    self.end_transaction(transaction_id);
                }
                EngineRecord::PageChange {
                    page,
                    update_stamp,
                    change,
                    undo,
                } => self.redo_change(lsn, transaction_id, page, update_stamp, &change, undo)?,
            }
        }
        // Pages read ahead count against the limit: the pages about to be needed stay, the
        // others are written and forgotten.
        if self.pages.held() > self.page_map_limit {
            self.pages.write_all()?;
        }
        self.pages.visited.settle(lsn, self.max_stamp);
        Ok(Next::Record)
    }

    /// A commit or rollback record: the transaction is over, nothing of it is undone.
    fn end_transaction(&mut self, transaction_id: u64) {
        self.open.remove(&transaction_id);
        self.losers.remove(&transaction_id);
        self.from_pages.remove(&transaction_id);
        self.logged_before_write.remove(&transaction_id);
        self.pages.unpin(transaction_id);
    }

    /// One page change: redone if the page is older than it, and the transaction's undo for
    /// its key noted (implied by the record, or taken from the page before the change).
    fn redo_change(
        &mut self,
        lsn: Lsn,
        transaction_id: u64,
        page: u32,
        update_stamp: u64,
        change: &OwnedPageChange,
        undo: RecordUndo,
    ) -> Result<()> {
        let undo_from_page = undo == RecordUndo::OnPage && transaction_id != 0;
        if transaction_id != 0 {
            self.open.insert(transaction_id);
            if let Some(entry) = implied_undo(change, undo) {
                self.losers.entry(transaction_id).or_default().push(entry);
            }
        }
        self.track_marked(change);
        self.max_stamp = self.max_stamp.max(update_stamp);
        let bytes = self.pages.get(page)?;
        // The transaction's undo for this key is the value the page holds before the change,
        // if the page is older than it (else the page was written after the change, and the
        // value was logged before that write).
        let before = match change {
            OwnedPageChange::LeafReplace { index, key, .. }
                if undo_from_page && page::update_stamp(bytes).unwrap_or(0) < update_stamp =>
            {
                match node::leaf_entry(bytes, *index) {
                    Some((k, value)) if k == key.as_slice() => Some(UndoEntry {
                        key: key.clone(),
                        before: Prior::Value(value.to_vec()),
                    }),
                    _ => {
                        return Err(impossible(
                            self.db_path,
                            self.log_dir,
                            format!("page {page}, log record at {lsn}"),
                            format!("the replaced record is not at index {index}"),
                        ));
                    }
                }
            }
            _ => None,
        };
        let stamp_before = page::update_stamp(bytes).unwrap_or(0);
        let applied = change::redo(bytes, update_stamp, lsn.to_u64(), &change.as_change())
            .map_err(|e| {
                impossible(
                    self.db_path,
                    self.log_dir,
                    format!("page {page}, log record at {lsn}"),
                    e,
                )
            })?;
        // Invariant: redo applies a record exactly where the page's stamp is below the
        // record's, and leaves the page stamped with it; a record applied twice, or skipped on
        // a page older than it, corrupts the page, and a stamp that went back would let a later
        // record be applied twice.
        debug_assert!(
            applied == (stamp_before < update_stamp)
                && page::update_stamp(bytes).unwrap_or(0) == stamp_before.max(update_stamp),
            "page {page}: record at {lsn} with stamp {update_stamp} over stamp {stamp_before}, \
             applied {applied}"
        );
        if let Some(entry) = before.filter(|_| applied) {
            // Kept in memory (pinned) until the transaction's end is read: written now, the
            // page would lose the value a crash of this recovery needs.
            self.pages.pin(page, transaction_id);
            self.losers
                .entry(transaction_id)
                .or_default()
                .push(entry.clone());
            self.from_pages
                .entry(transaction_id)
                .or_default()
                .push(entry);
        }
        if let OwnedPageChange::LeafReplace { key, .. } = change
            && undo_from_page
            && !applied
        {
            self.logged_before_write
                .entry(transaction_id)
                .or_default()
                .push((key.clone(), lsn));
        }
        if applied {
            self.report.records_applied += 1;
            self.pages.mark_dirty(page);
        } else {
            self.report.records_skipped += 1;
        }
        Ok(())
    }

    /// Keeps [`Replay::marked`]: a delete mark adds its key, a change that removes or brings
    /// back a key takes it out.
    fn track_marked(&mut self, change: &OwnedPageChange) {
        match change {
            OwnedPageChange::LeafMark {
                key, deleted: true, ..
            } => {
                self.marked.insert(key.clone());
            }
            OwnedPageChange::LeafMark { key, .. }
            | OwnedPageChange::LeafDelete { key, .. }
            | OwnedPageChange::LeafReplace { key, .. }
                if !self.marked.is_empty() =>
            {
                self.marked.remove(key);
            }
            _ => {}
        }
    }

    /// Recovery cannot go on: the record at `at` is damaged (`what` says how).
    fn impossible(&self, at: String, what: impl std::fmt::Display) -> InstanceError {
        impossible(self.db_path, self.log_dir, at, what)
    }

    /// Before anything is logged, written back or marked: the log's end must be one a crash
    /// can leave, and no page the replay read may carry a change past it ([`check_log_end`]).
    fn check_log_end(&mut self) -> Result<()> {
        check_log_end(
            self.db_path,
            self.log_dir,
            self.lost.take(),
            self.reader.summary().end,
            &self.pages.visited,
            self.max_stamp,
            self.checkpoint_stamp,
        )
    }

    /// A loser's replace found already on its page must have its value in an undo record:
    /// without it the transaction could not be taken back, and that is damage, not a choice.
    fn check_undo_logged_before_write(&mut self) -> Result<()> {
        // A group whose last part never reached the log: its pages were latched until the
        // whole group was logged, so none of it is on disk and no later record depends on it.
        self.report.groups_dropped = self.groups.len() as u64;
        for (id, keys) in &self.logged_before_write {
            let entries = self.losers.get(id).map(Vec::as_slice).unwrap_or_default();
            for (key, at) in keys {
                let found = entries
                    .iter()
                    .any(|e| e.key == *key && matches!(e.before, Prior::Value(_)));
                if !found {
                    return Err(InstanceError::RecoveryImpossible {
                        path: self.db_path.to_path_buf(),
                        reason: format!(
                            "the uncommitted replace logged at {at} in {} is on its page, but \
                             no undo record holds the value it replaced",
                            self.log_dir.display()
                        ),
                    });
                }
            }
        }
        Ok(())
    }

    /// The losers' replaced values taken from pages go to the log (durable) before those pages
    /// are written: a crash from here on, and the next recovery finds them there.
    fn log_undo_taken_from_pages(&mut self) -> Result<()> {
        if self.from_pages.is_empty() {
            return Ok(());
        }
        let (log, _) = jetproof_log::Log::open(
            self.backend.clone(),
            crate::log_options(self.log_dir, self.database_id, self.options),
        )?;
        let mut buffer = Vec::new();
        for (&id, entries) in &self.from_pages {
            for entry in entries {
                undo::encode_undo(&entry.key, &entry.before, &mut buffer);
                log.append(&jetproof_log::Record {
                    record_type: undo::RECORD_UNDO,
                    transaction_id: id,
                    payload: &buffer,
                })?;
            }
        }
        log.flush()?;
        drop(log);
        self.pages.unpin_all();
        Ok(())
    }

    /// The end of step 1: every changed page written and synced, the flush map persisted with
    /// the checkpoint the replay started from, and the replay's figures reported.
    fn write_back(&mut self) -> Result<()> {
        self.pages.write_all()?;
        self.pages.sync()?;
        if let Some(map) = &self.pages.flush_map {
            if self.map_older_than_checkpoint {
                map.forget_except(&self.pages.checked);
                self.report.flush_map_restarted = true;
            }
            // Paired with the checkpoint the replay started from: the database's open in step
            // 2 loads this snapshot, and its close persists it clean.
            map.persist(self.pages.file.as_ref(), Some(self.checkpoint_lsn))?;
        } else {
            self.report.flush_map_restarted = true;
        }
        let report = &mut self.report;
        report.pages_corrected = self.pages.corrected.clone();
        report.pages_written = self.pages.written.len() as u64;
        report.pages_read = self.pages.reads.synchronous;
        report.pages_read_ahead = self.pages.reads.ahead;
        report.read_ahead_waits = self.pages.reads.waits;
        let summary = self.reader.summary();
        report.logs_replayed = summary.generations.len() as u64;
        report.torn_tail = summary.torn_tail.clone();
        report.uncommitted_transactions = self.open.len() as u64;
        Ok(())
    }

    /// Step 2: undo, then a clean close. The database stays dirty until the close, so a crash
    /// in between is finished by the next recovery.
    fn undo_and_close(self) -> Result<RecoveryReport> {
        let Replay {
            backend,
            db_path,
            log_dir,
            options,
            reader,
            pages,
            mut report,
            losers,
            marked,
            cpu_started,
            max_stamp,
            open,
            ..
        } = self;
        drop(pages);
        // Invariant: undo rolls back only transactions with no commit or rollback in the log
        // (their end removes them from both sets); undoing a committed one loses its data.
        assert!(
            losers.keys().all(|id| open.contains(id)),
            "a transaction to roll back is not open"
        );
        let mut instance_options = options.clone();
        instance_options.checkpoint_interval = None;
        let instance =
            Instance::open_for_recovery(backend, db_path, log_dir, instance_options, max_stamp)?;
        for (&id, entries) in losers.iter().rev() {
            instance.roll_back_recovered(id, entries)?;
            report.transactions_rolled_back += 1;
            report.undo_entries += entries.len() as u64;
        }
        // No transaction is open now: every record still marked deleted is a committed delete.
        let mut marked: Vec<Vec<u8>> = marked.into_iter().collect();
        marked.sort_unstable();
        report.records_purged = instance.purge(&marked)?;
        instance.close()?;
        report.cpu_seconds = jetproof_io::sample::thread_cpu_time()
            .saturating_sub(cpu_started)
            .as_secs_f64();
        // The log reader (its files open) lives until the instance is closed, as it always has.
        drop(reader);
        Ok(report)
    }
}

/// The undo entry a record implies by itself (an insert of an absent key, a flag delete): the
/// entry an undo record would have given, at its place.
fn implied_undo(change: &OwnedPageChange, undo: RecordUndo) -> Option<UndoEntry> {
    let (key, before) = match (change, undo) {
        (OwnedPageChange::LeafInsert { key, .. }, RecordUndo::Absent) => (key, Prior::Absent),
        (OwnedPageChange::LeafMark { key, .. }, RecordUndo::Marked) => (key, Prior::Marked),
        _ => return None,
    };
    Some(UndoEntry {
        key: key.clone(),
        before,
    })
}

/// [`InstanceError::RecoveryImpossible`] for damage at `at` (a record's position, and its page
/// if it has one) in the log directory.
fn impossible(
    db_path: &Path,
    log_dir: &Path,
    at: String,
    what: impl std::fmt::Display,
) -> InstanceError {
    InstanceError::RecoveryImpossible {
        path: db_path.to_path_buf(),
        reason: format!("{at} in {}: {what}", log_dir.display()),
    }
}

/// The log records read and decoded ahead of the one being redone, whose pages are asked for
/// ahead; a record is still redone (or its damage reported) only when its turn comes.
#[derive(Default)]
struct LookAhead {
    window: VecDeque<Ahead>,
    /// Payload bytes of the records in the window.
    bytes: usize,
    /// The reader has no more records (or failed: the failure is the window's last record).
    log_ended: bool,
}

impl LookAhead {
    /// Reads records until the window holds one, then on while it is within
    /// [`LOOK_AHEAD_RECORDS`] and [`LOOK_AHEAD_BYTES`] and pages may still be read ahead.
    fn fill(&mut self, reader: &mut LogReader, pages: &mut PageMap) {
        while !self.log_ended && (self.window.is_empty() || self.has_room(pages)) {
            let ahead = match reader.next_record() {
                Ok(Some(record)) => Ahead::decode(record),
                Ok(None) => {
                    self.log_ended = true;
                    return;
                }
                Err(e) => {
                    // Reported when the replay reaches it, after every record before it.
                    self.log_ended = true;
                    Ahead::failed(e.into())
                }
            };
            ahead.for_each_page(|page| pages.read_ahead(page));
            self.bytes += ahead.bytes;
            self.window.push_back(ahead);
        }
    }

    fn has_room(&self, pages: &mut PageMap) -> bool {
        self.window.len() < LOOK_AHEAD_RECORDS
            && self.bytes < LOOK_AHEAD_BYTES
            && pages.read_ahead_room()
    }

    /// The next record to redo, in log order.
    fn pop(&mut self) -> Option<Ahead> {
        let ahead = self.window.pop_front()?;
        self.bytes -= ahead.bytes;
        Some(ahead)
    }
}

/// The lost-log decision after the replay: `lost` is the reader's proof that the log ended early
/// (a missing or cut generation), `end` where the log found ends otherwise; the pages the replay
/// read are checked against that end ([`VisitedPages::pages_ahead_of_the_log`]). Either finding
/// is [`InstanceError::LostLog`], and the database is left as it is: dirty.
fn check_log_end(
    db_path: &Path,
    log_dir: &Path,
    lost: Option<jetproof_log::LogError>,
    end: Option<Lsn>,
    visited: &VisitedPages,
    max_stamp: u64,
    checkpoint_stamp: u64,
) -> Result<()> {
    let (log_file, log_end, reason) = match lost {
        Some(jetproof_log::LogError::LostLog {
            path,
            log_end,
            reason,
        }) => (path, log_end, Some(reason)),
        Some(other) => return Err(other.into()),
        None => match end {
            Some(end) => (
                jetproof_log::log_file_path(log_dir, end.generation),
                end,
                None,
            ),
            // The replay stopped before the log's end (an error was returned instead).
            None => return Ok(()),
        },
    };
    let pages = visited.pages_ahead_of_the_log(log_end, max_stamp, checkpoint_stamp);
    if reason.is_none() && pages.count == 0 {
        return Ok(());
    }
    let pages_ahead = if pages.count == 0 {
        String::new()
    } else {
        format!(
            " {} page(s) on disk carry changes past that end: {pages};",
            pages.count
        )
    };
    Err(InstanceError::LostLog(Box::new(crate::error::LostLog {
        path: db_path.to_path_buf(),
        log_file,
        log_end,
        reason: reason.unwrap_or_else(|| {
            "pages on disk were written after log records that are no longer in the log (its \
             newest generation lost its tail, or the log was replaced)"
                .to_string()
        }),
        pages_ahead,
        pages,
    })))
}

/// A log record read ahead of the replay, decoded (its payload is not kept).
struct Ahead {
    lsn: Lsn,
    transaction_id: u64,
    body: Body,
    /// Its payload's length, counted against [`LOOK_AHEAD_BYTES`].
    bytes: usize,
}

enum Body {
    Undo(std::result::Result<UndoEntry, DecodeError>),
    Rollback,
    /// A part of a group record.
    Group(std::result::Result<GroupPart, DecodeError>),
    /// A page change or a commit (or an unknown record type: the error).
    Change(std::result::Result<EngineRecord, DecodeError>),
    /// Reading the log failed here.
    Failed(InstanceError),
}

impl Ahead {
    fn decode(record: LogRecord) -> Ahead {
        let body = match record.record_type {
            undo::RECORD_UNDO => Body::Undo(undo::decode_undo(&record.payload)),
            undo::RECORD_ROLLBACK => Body::Rollback,
            group::RECORD_GROUP => Body::Group(group::decode_group(&record.payload)),
            other => Body::Change(format::decode(other, &record.payload)),
        };
        Ahead {
            lsn: record.lsn,
            transaction_id: record.transaction_id,
            body,
            bytes: record.payload.len(),
        }
    }

    fn failed(error: InstanceError) -> Ahead {
        Ahead {
            lsn: Lsn::default(),
            transaction_id: 0,
            body: Body::Failed(error),
            bytes: 0,
        }
    }

    /// Every page the record changes, in order (repeats included).
    fn for_each_page(&self, mut f: impl FnMut(u32)) {
        let changes: &[EngineRecord] = match &self.body {
            Body::Change(Ok(change)) => std::slice::from_ref(change),
            Body::Group(Ok(part)) => &part.changes,
            _ => &[],
        };
        for change in changes {
            if let EngineRecord::PageChange { page, .. } = change {
                f(*page);
            }
        }
    }
}

/// How the replay's pages were read.
#[derive(Default)]
struct ReadCounts {
    /// By the replaying thread, when a record needed the page.
    synchronous: u64,
    /// By a reader thread, and then used.
    ahead: u64,
    /// Of those, still being read when needed.
    waits: u64,
}

/// The pages asked for ahead of the replay (`crate::readahead`): read and waiting to be used,
/// or being read. A page is never both here and in the replay's map.
struct ReadAhead {
    readers: Option<Readers>,
    depth: usize,
    ready: BTreeMap<u32, AlignedBuf>,
    in_flight: BTreeSet<u32>,
}

impl ReadAhead {
    fn start(
        file: &Arc<dyn IoFile>,
        page_size: usize,
        replay: &ReplayOptions,
        page_map_limit: usize,
    ) -> ReadAhead {
        // The pages read ahead count against the pages the replay keeps; a quarter of them at
        // most, so writing and forgetting the others always leaves room.
        let depth = replay.read_ahead_depth.min(page_map_limit / 4);
        let readers = if depth == 0 || replay.read_ahead_readers == 0 {
            None
        } else {
            Readers::start(file, page_size, replay.read_ahead_readers.min(depth))
        };
        ReadAhead {
            readers,
            depth,
            ready: BTreeMap::new(),
            in_flight: BTreeSet::new(),
        }
    }

    /// Pages held or being read.
    fn held(&self) -> usize {
        self.ready.len() + self.in_flight.len()
    }

    /// Takes in the reads that have finished, without waiting.
    fn collect(&mut self) {
        let Some(readers) = &self.readers else {
            return;
        };
        while let Some((page, result)) = readers.try_next() {
            self.in_flight.remove(&page);
            // A failed read is forgotten: the replay reads the page itself and reports it.
            if let Ok(bytes) = result {
                self.ready.insert(page, bytes);
            }
        }
    }

    /// Whether another page may be asked for.
    fn room(&mut self) -> bool {
        if self.readers.is_none() {
            return false;
        }
        self.collect();
        self.held() < self.depth
    }

    /// Asks for `page` unless it is already held or asked for, or the depth is reached. The
    /// caller checks that the replay does not hold the page and that it is inside the file.
    fn request(&mut self, page: u32) {
        if self.ready.contains_key(&page) || self.in_flight.contains(&page) || !self.room() {
            return;
        }
        if let Some(readers) = &self.readers
            && readers.request(page)
        {
            self.in_flight.insert(page);
        }
    }

    /// The page's bytes if it was read ahead, waiting for its read if it is still going on;
    /// `None` if it was not asked for or its read failed.
    fn take(&mut self, page: u32, counts: &mut ReadCounts) -> Option<AlignedBuf> {
        if let Some(bytes) = self.ready.remove(&page) {
            counts.ahead += 1;
            return Some(bytes);
        }
        if !self.in_flight.contains(&page) {
            return None;
        }
        counts.waits += 1;
        loop {
            let Some((done, result)) = self.readers.as_ref().and_then(Readers::next) else {
                // Every reader has stopped: nothing asked for will come.
                self.in_flight.clear();
                return None;
            };
            self.in_flight.remove(&done);
            match result {
                Ok(bytes) if done == page => {
                    counts.ahead += 1;
                    return Some(bytes);
                }
                Ok(bytes) => {
                    self.ready.insert(done, bytes);
                }
                Err(_) if done == page => return None,
                Err(_) => {}
            }
        }
    }
}

/// Checks a page the replay read: its checksum (a single flipped bit is corrected; anything
/// worse, a torn or damaged page, stops the recovery naming it: redo over it would seal the damage
/// in), then the flush map (a page older than its last acknowledged write is a lost write; a
/// newer one was written after the map's snapshot, which the replay brings the map to).
fn verify_page(
    path: &Path,
    flush_map: Option<&FlushMap>,
    page: u32,
    bytes: &mut [u8],
) -> Result<Option<usize>> {
    let mut corrected = None;
    match checksum::correct(bytes, page) {
        PageCheck::Good => {}
        PageCheck::Correctable { bit } => corrected = Some(bit),
        PageCheck::WrongPageNumber { found } => {
            return Err(jetproof_engine::EngineError::WrongPageNumber {
                path: path.to_path_buf(),
                page,
                found,
            }
            .into());
        }
        _ => {
            return Err(jetproof_engine::EngineError::BadPage {
                path: path.to_path_buf(),
                page,
            }
            .into());
        }
    }
    let Some(map) = flush_map else {
        return Ok(corrected);
    };
    match map.check_read(page, bytes) {
        ReadCheck::Behind { expected, found } => Err(jetproof_engine::EngineError::LostWrite {
            path: path.to_path_buf(),
            page,
            expected,
            found,
        }
        .into()),
        ReadCheck::Ahead { found, .. } => {
            map.adopt(page, found);
            Ok(corrected)
        }
        ReadCheck::Match | ReadCheck::Learnt => Ok(corrected),
    }
}

/// The database's flush map for the replay, or `None` if it has none (the database's open
/// after the replay makes a new one). A map that cannot be used is an error naming it.
fn open_flush_map(
    backend: &dyn IoBackend,
    db_path: &Path,
    header: &DbHeader,
    options: &InstanceOptions,
) -> Result<Option<FlushMap>> {
    let path = flush_map_path(db_path);
    if !backend.exists(&path) {
        return Ok(None);
    }
    let (map, load) = FlushMap::open(
        backend,
        &path,
        MapIdentity {
            database_id: header.database_id,
            created_unix_ns: header.created_unix_ns,
        },
        header.page_count,
        options.database.direct_io,
        true,
        options.database.stats.as_ref(),
    )?;
    if !load.damaged_map_pages.is_empty() {
        return Err(jetproof_engine::EngineError::FlushMap {
            path,
            what: format!(
                "map pages {:?} are damaged (their committed copy fails its checksum): the last write of the pages they describe is unknown; if the storage is trusted, delete the flush map file to restart lost-write detection",
                load.damaged_map_pages
            ),
        }
        .into());
    }
    Ok(Some(map))
}

/// The pages being worked on, read from the file on first use or ahead of it.
struct PageMap {
    file: Arc<dyn IoFile>,
    path: PathBuf,
    page_size: usize,
    page_count: u64,
    pages: BTreeMap<u32, AlignedBuf>,
    dirty: BTreeSet<u32>,
    written: BTreeSet<u32>,
    /// Pages holding a value taken as an unfinished transaction's undo, by transaction: kept
    /// (not written) until its end is read or the values are logged.
    pins: BTreeMap<u64, Vec<u32>>,
    pinned: BTreeMap<u32, usize>,
    read_ahead: ReadAhead,
    reads: ReadCounts,
    /// Every page as first read from disk, for the lost-log check ([`check_log_end`]).
    visited: VisitedPages,
    /// The database's flush map: each page read is checked against it (a page older than its
    /// last acknowledged write is a lost write), and each page written counts on from it.
    flush_map: Option<FlushMap>,
    /// Every page the replay read (and so checked, and brought to the map).
    checked: BTreeSet<u32>,
    /// Pages read with one flipped bit (page, bit), corrected in memory.
    corrected: Vec<(u32, usize)>,
}

impl PageMap {
    fn new(
        file: Arc<dyn IoFile>,
        path: &Path,
        page_size: usize,
        replay: &ReplayOptions,
        page_map_limit: usize,
        flush_map: Option<FlushMap>,
    ) -> Result<PageMap> {
        let page_count = file.size()? / page_size as u64;
        let read_ahead = ReadAhead::start(&file, page_size, replay, page_map_limit);
        Ok(PageMap {
            file,
            path: path.to_path_buf(),
            page_size,
            page_count,
            pages: BTreeMap::new(),
            dirty: BTreeSet::new(),
            written: BTreeSet::new(),
            pins: BTreeMap::new(),
            pinned: BTreeMap::new(),
            read_ahead,
            reads: ReadCounts::default(),
            visited: VisitedPages::default(),
            flush_map,
            checked: BTreeSet::new(),
            corrected: Vec::new(),
        })
    }

    /// Pages in memory: worked on, read ahead, or being read ahead.
    fn held(&self) -> usize {
        self.pages.len() + self.read_ahead.held()
    }

    /// Whether another page may be read ahead now.
    fn read_ahead_room(&mut self) -> bool {
        self.read_ahead.room()
    }

    /// Asks for `page` to be read ahead if the replay does not hold it (best effort).
    fn read_ahead(&mut self, page: u32) {
        if !self.pages.contains_key(&page) && u64::from(page) < self.page_count {
            self.read_ahead.request(page);
        }
    }

    fn get(&mut self, page: u32) -> Result<&mut [u8]> {
        let bytes = match self.pages.entry(page) {
            Entry::Occupied(entry) => entry.into_mut(),
            Entry::Vacant(entry) => {
                // The engine formats and syncs new extents and raises the header's page count
                // before it hands out their pages, so a logged page is always inside the file:
                // one past its end is damage, not a growth to redo.
                if u64::from(page) >= self.page_count {
                    return Err(InstanceError::RecoveryImpossible {
                        path: self.path.clone(),
                        reason: format!(
                            "the log changes page {page}, past the file's end ({} pages)",
                            self.page_count
                        ),
                    });
                }
                let bytes = match self.read_ahead.take(page, &mut self.reads) {
                    Some(bytes) => bytes,
                    None => {
                        let mut bytes = AlignedBuf::zeroed(self.page_size);
                        self.file.read_at(
                            &mut bytes,
                            u64::from(page) * self.page_size as u64,
                            IoClass::DbRead,
                        )?;
                        self.reads.synchronous += 1;
                        bytes
                    }
                };
                let mut bytes = bytes;
                if let Some(bit) =
                    verify_page(&self.path, self.flush_map.as_ref(), page, &mut bytes)?
                    && !self.corrected.iter().any(|&(p, _)| p == page)
                {
                    self.corrected.push((page, bit));
                }
                self.checked.insert(page);
                self.visited.record(page, &bytes);
                entry.insert(bytes)
            }
        };
        Ok(&mut bytes[..])
    }

    fn mark_dirty(&mut self, page: u32) {
        self.dirty.insert(page);
    }

    /// Keeps `page` in memory until `transaction`'s end is read ([`PageMap::unpin`]).
    fn pin(&mut self, page: u32, transaction: u64) {
        self.pins.entry(transaction).or_default().push(page);
        *self.pinned.entry(page).or_default() += 1;
    }

    fn unpin(&mut self, transaction: u64) {
        for page in self.pins.remove(&transaction).unwrap_or_default() {
            if let Entry::Occupied(mut count) = self.pinned.entry(page) {
                *count.get_mut() -= 1;
                if *count.get() == 0 {
                    count.remove();
                }
            }
        }
    }

    fn unpin_all(&mut self) {
        self.pins.clear();
        self.pinned.clear();
    }

    /// Seals and writes every changed page, and forgets them all (not the pages read ahead:
    /// the replay does not hold those yet, so they are unchanged and about to be needed).
    fn write_all(&mut self) -> Result<()> {
        for (&page, bytes) in &mut self.pages {
            if self.dirty.contains(&page) && !self.pinned.contains_key(&page) {
                let count = self
                    .flush_map
                    .as_ref()
                    .map(|map| map.stamp_for_write(page, bytes));
                checksum::seal(bytes);
                self.file.write_at(
                    bytes,
                    u64::from(page) * self.page_size as u64,
                    IoClass::DbWrite,
                )?;
                if let (Some(map), Some(count)) = (&self.flush_map, count) {
                    map.written(page, count);
                }
                self.written.insert(page);
            }
        }
        let pinned = &self.pinned;
        self.pages.retain(|page, _| pinned.contains_key(page));
        self.dirty.retain(|page| pinned.contains_key(page));
        Ok(())
    }

    fn sync(&self) -> Result<()> {
        Ok(self.file.sync_data(IoClass::DbWrite)?)
    }
}
