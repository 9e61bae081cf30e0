//! Redo recovery of a database left dirty by an unclean stop (issue 3, item 6): the log is
//! replayed from the checkpoint over the file, each page change redone only where the page is
//! older than the change (its update stamp), so replaying over pages written at any time before
//! the crash brings every page to the log's end. `docs/log.md`, "Recovery", has the case table.
//!
//! Why the steps are in this order (each crash point leaves a state the next `recover` finishes):
//! 1. Redo, pages written and synced. A crash here leaves the header dirty and the checkpoint
//!    where it was: the next run replays again, and redo skips what already reached the disk.
//! 2. Undo, then a clean close: the instance is opened over the still-dirty database (its
//!    update stamp advanced past every replayed stamp), every transaction with undo records but
//!    neither a commit nor a rollback record in the log (a loser) is taken back through the
//!    engine ([`crate::undo`]: its keys restored to their state before it, logged as ordinary
//!    page changes, then a rollback record), and the instance is closed cleanly: pages flushed
//!    and synced, the log flushed, the checkpoint moved to the log's end, and only then the
//!    header given that recovery position and marked clean. A crash before the checkpoint moved
//!    leaves everything to replay again: redo repeats the restores that were logged, and undo
//!    restores the losers again (a restore sets an absolute state, so repeating it is harmless).
//!    A crash after it leaves the header dirty with nothing left to replay or undo.
#![deny(clippy::indexing_slicing, clippy::unwrap_used)]

use std::collections::btree_map::Entry;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use jetproof_engine::change;
use jetproof_engine::{DbHeader, DbState, checksum};
use jetproof_io::meter::MeteredFile;
use jetproof_io::{AlignedBuf, IoBackend, IoClass, IoFile, OpenOptions};
use jetproof_log::{LogReader, ReadOptions, TornTail, read_checkpoint};

use crate::format::{self, EngineRecord};
use crate::group;
use crate::undo::{self, UndoEntry};
use crate::{Instance, InstanceError, InstanceOptions, Result};

/// Pages kept in memory between writes, at least; recovery keeps up to the instance's cache
/// maximum (the memory the run would have used), and when more are being worked on they are
/// all written and forgotten. Most records of a soft recovery find their page already current
/// (flushed before the crash), so every page kept saves reading it again for the next record.
const PAGE_MAP_MIN: usize = 256;

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
    /// CPU time of the recovering thread (redo and undo), seconds.
    pub cpu_seconds: f64,
    /// Structural changes whose last part never reached the log, left out (`crate::group`).
    pub groups_dropped: u64,
    /// Distinct pages written back.
    pub pages_written: u64,
    pub seconds: f64,
    /// `seconds / logs_replayed` (0 when none was).
    pub seconds_per_log: f64,
    /// A torn write at the log's end, tolerated.
    pub torn_tail: Option<TornTail>,
}

/// Replays the log of a dirty database (see the module header); a no-op on a clean one.
pub fn recover(
    backend: Arc<dyn IoBackend>,
    db_path: &Path,
    log_dir: &Path,
    options: &InstanceOptions,
) -> Result<RecoveryReport> {
    let started = Instant::now();
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
        return Ok(RecoveryReport {
            was_clean: true,
            ..RecoveryReport::default()
        });
    }
    let Some(_checkpoint) = read_checkpoint(&*backend, log_dir, Some(header.database_id))? else {
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
    let (mut reader, _) = LogReader::from_checkpoint(
        backend.clone(),
        log_dir,
        Some(header.database_id),
        read_options,
    )?;
    let mut pages = PageMap::new(file, db_path, header.page_size as usize)?;
    let page_map_limit =
        usize::try_from(options.database.cache_max_bytes / u64::from(header.page_size))
            .unwrap_or(usize::MAX)
            .max(PAGE_MAP_MIN);
    let mut report = RecoveryReport::default();
    let mut open: BTreeSet<u64> = BTreeSet::new();
    // The undo entries of each transaction not yet ended, in log order.
    let mut losers: BTreeMap<u64, Vec<UndoEntry>> = BTreeMap::new();
    // Parts of each transaction's group (structural change) read so far.
    let mut groups: BTreeMap<u64, Vec<EngineRecord>> = BTreeMap::new();
    let cpu_started = jetproof_io::sample::thread_cpu_time();
    let mut max_stamp = 0u64;
    while let Some(record) = reader.next_record()? {
        match record.record_type {
            undo::RECORD_UNDO => {
                let entry = undo::decode_undo(&record.payload).map_err(|e| {
                    InstanceError::RecoveryImpossible {
                        path: db_path.to_path_buf(),
                        reason: format!(
                            "undo record at {} in {}: {e}",
                            record.lsn,
                            log_dir.display()
                        ),
                    }
                })?;
                open.insert(record.transaction_id);
                losers.entry(record.transaction_id).or_default().push(entry);
                continue;
            }
            undo::RECORD_ROLLBACK => {
                open.remove(&record.transaction_id);
                losers.remove(&record.transaction_id);
                continue;
            }
            _ => {}
        }
        let bad = |e: format::DecodeError| InstanceError::RecoveryImpossible {
            path: db_path.to_path_buf(),
            reason: format!("log record at {} in {}: {e}", record.lsn, log_dir.display()),
        };
        let changes = if record.record_type == group::RECORD_GROUP {
            // A structural change: applied only once its last part is read.
            let part = group::decode_group(&record.payload).map_err(bad)?;
            let held = groups.entry(record.transaction_id).or_default();
            held.extend(part.changes);
            if part.more {
                continue;
            }
            groups.remove(&record.transaction_id).unwrap_or_default()
        } else {
            vec![format::decode(record.record_type, &record.payload).map_err(bad)?]
        };
        for decoded in changes {
            match decoded {
                EngineRecord::Commit { .. } => {
                    report.commits += 1;
                    open.remove(&record.transaction_id);
                    losers.remove(&record.transaction_id);
                }
                EngineRecord::PageChange {
                    page,
                    update_stamp,
                    change,
                } => {
                    if record.transaction_id != 0 {
                        open.insert(record.transaction_id);
                    }
                    max_stamp = max_stamp.max(update_stamp);
                    let bytes = pages.get(page)?;
                    let applied = change::redo(
                        bytes,
                        update_stamp,
                        record.lsn.to_u64(),
                        &change.as_change(),
                    )
                    .map_err(|e| InstanceError::RecoveryImpossible {
                        path: db_path.to_path_buf(),
                        reason: format!(
                            "page {page}, log record at {} in {}: {e}",
                            record.lsn,
                            log_dir.display()
                        ),
                    })?;
                    if applied {
                        report.records_applied += 1;
                        pages.mark_dirty(page);
                    } else {
                        report.records_skipped += 1;
                    }
                }
            }
        }
        if pages.len() > page_map_limit {
            pages.write_all()?;
        }
    }
    // A group whose last part never reached the log: its pages were latched until the whole
    // group was logged, so none of it is on disk and no later record depends on it.
    report.groups_dropped = groups.len() as u64;
    pages.write_all()?;
    pages.sync()?;
    report.pages_written = pages.written.len() as u64;
    let summary = reader.summary();
    report.logs_replayed = summary.generations.len() as u64;
    report.torn_tail = summary.torn_tail.clone();
    report.uncommitted_transactions = open.len() as u64;
    drop(pages);

    // Step 2: undo, then a clean close. The database stays dirty until the close, so a crash
    // in between is finished by the next recovery.
    let mut instance_options = options.clone();
    instance_options.checkpoint_interval = None;
    let instance =
        Instance::open_for_recovery(backend, db_path, log_dir, instance_options, max_stamp)?;
    for (&id, entries) in losers.iter().rev() {
        instance.roll_back_recovered(id, entries)?;
        report.transactions_rolled_back += 1;
        report.undo_entries += entries.len() as u64;
    }
    instance.close()?;
    report.cpu_seconds = jetproof_io::sample::thread_cpu_time()
        .saturating_sub(cpu_started)
        .as_secs_f64();

    report.seconds = started.elapsed().as_secs_f64();
    report.seconds_per_log = if report.logs_replayed == 0 {
        0.0
    } else {
        report.seconds / report.logs_replayed as f64
    };
    Ok(report)
}

/// The pages being worked on, read from the file on first use.
struct PageMap {
    file: Arc<dyn IoFile>,
    path: PathBuf,
    page_size: usize,
    page_count: u64,
    pages: BTreeMap<u32, AlignedBuf>,
    dirty: BTreeSet<u32>,
    written: BTreeSet<u32>,
}

impl PageMap {
    fn new(file: Arc<dyn IoFile>, path: &Path, page_size: usize) -> Result<PageMap> {
        let page_count = file.size()? / page_size as u64;
        Ok(PageMap {
            file,
            path: path.to_path_buf(),
            page_size,
            page_count,
            pages: BTreeMap::new(),
            dirty: BTreeSet::new(),
            written: BTreeSet::new(),
        })
    }

    fn len(&self) -> usize {
        self.pages.len()
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
                let mut bytes = AlignedBuf::zeroed(self.page_size);
                self.file.read_at(
                    &mut bytes,
                    u64::from(page) * self.page_size as u64,
                    IoClass::DbRead,
                )?;
                entry.insert(bytes)
            }
        };
        Ok(&mut bytes[..])
    }

    fn mark_dirty(&mut self, page: u32) {
        self.dirty.insert(page);
    }

    /// Seals and writes every changed page, and forgets them all.
    fn write_all(&mut self) -> Result<()> {
        for (&page, bytes) in &mut self.pages {
            if self.dirty.contains(&page) {
                checksum::seal(bytes);
                self.file.write_at(
                    bytes,
                    u64::from(page) * self.page_size as u64,
                    IoClass::DbWrite,
                )?;
                self.written.insert(page);
            }
        }
        self.pages.clear();
        self.dirty.clear();
        Ok(())
    }

    fn sync(&self) -> Result<()> {
        Ok(self.file.sync_data(IoClass::DbWrite)?)
    }
}
