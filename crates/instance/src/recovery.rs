//! Redo recovery of a database left dirty by an unclean stop (issue 3, item 6): the log is
//! replayed from the checkpoint over the file, each page change redone only where the page is
//! older than the change (its update stamp), so replaying over pages written at any time before
//! the crash brings every page to the log's end. `docs/log.md`, "Recovery", has the case table.
//!
//! Why the steps are in this order (each crash point leaves a state the next `recover` finishes):
//! 1. Redo, pages written and synced. A crash here leaves the header dirty and the checkpoint
//!    where it was: the next run replays again, and redo skips what already reached the disk.
//! 2. The database opened, its update stamp advanced past every replayed stamp, its recovery
//!    position set to the checkpoint it was replayed from, closed clean: a consistent clean pair
//!    (header = checkpoint file), and the stamp is persisted before the checkpoint can move.
//! 3. The instance opened and closed cleanly: the checkpoint and the header's recovery position
//!    move to the log's end (a crash inside leaves the header dirty with a persisted stamp, and
//!    the next run replays at most that empty stretch).
//!
//! Undo is not built: a transaction whose records are in the log but whose commit record is not
//! keeps its changes. Undoing them through the engine would need the logical operation of every
//! change, and structural changes (splits, merges) are logged as page images that do not carry
//! it; so recovery counts such transactions and reports them instead of pretending.
#![deny(clippy::indexing_slicing, clippy::unwrap_used)]

use std::collections::btree_map::Entry;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use jetproof_engine::change;
use jetproof_engine::{Database, DbHeader, DbState, LogPosition, checksum};
use jetproof_io::meter::MeteredFile;
use jetproof_io::{AlignedBuf, IoBackend, IoClass, IoFile, OpenOptions};
use jetproof_log::{LogReader, ReadOptions, TornTail, read_checkpoint};

use crate::format::{self, EngineRecord};
use crate::{Instance, InstanceError, InstanceOptions, Result};

/// Pages kept in memory between writes; when more are being worked on, they are all written.
const PAGE_MAP_LIMIT: usize = 256;

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
    /// Transactions with page changes in the replayed log but no commit record: their changes
    /// remain in the database (undo is not built).
    pub uncommitted_transactions: u64,
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
    let Some(found) = read_checkpoint(&*backend, log_dir, Some(header.database_id))? else {
        return Err(InstanceError::RecoveryImpossible {
            path: db_path.to_path_buf(),
            reason: format!(
                "it is dirty but {} holds no log checkpoint to replay from",
                log_dir.display()
            ),
        });
    };
    let checkpoint = found.checkpoint.lsn;
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
    let mut report = RecoveryReport::default();
    let mut open: BTreeSet<u64> = BTreeSet::new();
    let mut max_stamp = 0u64;
    while let Some(record) = reader.next_record()? {
        let decoded = format::decode(record.record_type, &record.payload).map_err(|e| {
            InstanceError::RecoveryImpossible {
                path: db_path.to_path_buf(),
                reason: format!("log record at {} in {}: {e}", record.lsn, log_dir.display()),
            }
        })?;
        match decoded {
            EngineRecord::Commit { .. } => {
                report.commits += 1;
                open.remove(&record.transaction_id);
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
                if pages.len() > PAGE_MAP_LIMIT {
                    pages.write_all()?;
                }
            }
        }
    }
    pages.write_all()?;
    pages.sync()?;
    report.pages_written = pages.written.len() as u64;
    let summary = reader.summary();
    report.logs_replayed = summary.generations.len() as u64;
    report.torn_tail = summary.torn_tail.clone();
    report.uncommitted_transactions = open.len() as u64;
    drop(pages);

    // Step 2: a clean header naming the checkpoint replayed from, with the stamp persisted.
    let mut db_options = options.database.clone();
    db_options.accept_dirty = true;
    let db = Database::open(backend.as_ref(), db_path, db_options)?;
    db.advance_update_stamp(max_stamp);
    db.set_recovery_position(LogPosition {
        generation: checkpoint.generation,
        offset: checkpoint.offset,
    })?;
    db.close()?;

    // Step 3: the checkpoint and the recovery position to the log's end.
    let mut instance_options = options.clone();
    instance_options.checkpoint_interval = None;
    Instance::open(backend, db_path, log_dir, instance_options)?.close()?;

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
