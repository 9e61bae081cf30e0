//! The bulk loader: fills a new, empty database with records in ascending key order, at the
//! speed of sequential writes.
//!
//! Why it exists: `jetproof init` must fill the first database at a large fraction of the disk's
//! sequential write bandwidth (issue 2), and the record-by-record path cannot: each insert
//! descends the tree (~16 µs of CPU), and the inserting session blocks in cache flushes and in
//! the formatting of every extent. ESE builds a new database the same way it is done here: the
//! initial creation is not a logged, crash-recoverable transaction.
//!
//! How: leaves are built directly in large aligned batch buffers (records packed up to the table
//! density, [`BulkLoader::with_density`]; 100% packs as many as fit, as the append split does),
//! sealed there, and handed to a writer thread that writes
//! each batch with one sequential write while the next batch fills (CPU and I/O overlap). Tree
//! pages get consecutive page numbers from page 4 on; a space map position met on the way gets a
//! placeholder map page, so every batch is contiguous. `finish` builds the interior levels bottom
//! up from the first key of each child (their pages follow the leaves), writes the top node into
//! the fixed root page 3, formats the tail of the last extent as free pages, syncs, writes the
//! final space map pages, syncs, and only then raises the page count and used pages in both
//! header copies. The database then reloads its cache and space maps from the file, as `open`
//! does.
//!
//! Invariants kept:
//! * every page below the header's page count is formatted and sealed at every moment: the
//!   loader writes beyond the old count (or over free pages below it) and raises the count last;
//! * the result is the tree the insert path would build (packed leaves, first key of the right
//!   node as separator, root at page 3), so `check`, get, insert, delete and replace work on it;
//! * pages carry log position 0 and the loader refuses a database with a change log or
//!   write-ahead gate installed: a bulk load is *not logged*. It is only for `init` of a new
//!   database; an interrupted load leaves a dirty file (init builds it under a `.partial` name,
//!   which the next init removes), never something `open` accepts.
//! * an abandoned loader (dropped without `finish`) leaves the database empty: the pages it
//!   wrote are not referenced by the tree, are marked free, and are recreated when allocated.
#![deny(clippy::indexing_slicing, clippy::unwrap_used)]

use std::sync::Arc;
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::thread::JoinHandle;

use jetproof_io::{AlignedBuf, IoClass, IoError, IoFile};

use crate::checksum;
use crate::db::{Database, RECORD_TREE_ID};
use crate::error::{EngineError, Result};
use crate::header::HEADER_PAGES;
use crate::node::{self, Entries};
use crate::page::{self, HEADER_SIZE, PageType};
use crate::space;

/// Bytes of one batch: one sequential write. Larger than fio's 1 MiB reference block, so that
/// the gap between two writes (queue depth 1) costs less.
const BATCH_BYTES: usize = 4 << 20;
/// Batch buffers: one being filled, one being written, one being measured, one ready, so that
/// no stage waits while another is merely slower for a moment.
const BATCH_BUFFERS: usize = 4;
/// The first page the loader places tree pages at (0, 1: header; 2: map; 3: root).
const FIRST_TREE_PAGE: u64 = 4;
/// Page numbers stay below this (u32::MAX marks "no page" in the cache).
const MAX_PAGES: u64 = u32::MAX as u64 - 1;
/// Leaf record header: key length u16, value length u16.
const LEAF_RECORD_OVERHEAD: usize = 4;
const SLOT_BYTES: usize = 2;

/// A batch on its way to the writer: buffer, file offset, bytes to write.
type Batch = (AlignedBuf, u64, usize);

/// Sees every byte the loader writes, with its file offset, once it is written (from a meter
/// thread of the loader's, so that measuring what is written overlaps with the next write and
/// the building of the batch after it):
/// `init`'s data reduction figures ([`BulkLoader::with_observer`]).
pub type WriteObserver = Box<dyn FnMut(u64, &[u8]) + Send>;

/// Fills the bytes of a page that hold no record (the gap between a leaf's slots and its records,
/// the body of a free page): [`BulkLoader::with_filler`]. Without one they are zeros.
pub type Filler = Box<dyn FnMut(&mut [u8]) + Send>;

/// Fills the body (everything after the page header) of the next long-value page:
/// [`BulkLoader::with_long_values`]. Called once per page, in page order.
pub type LongValueFiller = Box<dyn FnMut(&mut [u8]) + Send>;

/// Long-value pages are laid down in runs of this many pages (a space map's owned extent), each
/// run right after a completed leaf.
pub const LONG_VALUE_RUN_PAGES: usize = 16;

/// The tree id long-value pages carry (the record tree is 1).
pub const LONG_VALUE_TREE_ID: u32 = 2;

/// Long values to lay down between the leaves.
struct LongValues {
    /// Share of the loader's pages (from page 4 on) to make long-value pages.
    share: f64,
    fill: LongValueFiller,
    written: u64,
}

/// The observer, shared by the loader (set after start, used at `finish`) and its writer.
type SharedObserver = Arc<std::sync::Mutex<Option<WriteObserver>>>;

fn observe(observer: &SharedObserver, offset: u64, bytes: &[u8]) {
    if let Ok(mut guard) = observer.lock()
        && let Some(observe) = guard.as_mut()
    {
        observe(offset, bytes);
    }
}

/// The threads that write batches in order, measure them, and return their buffers: the writer
/// writes each batch and hands it to the meter thread, which shows it to the observer (`init`'s
/// data reduction figures) and gives the buffer back. Measuring a batch so overlaps the next
/// batch's write instead of delaying it (it did until 2026-12-02: zstd and XXH3 of each batch
/// ran on the writer thread before its write, about 1.5 ms of CPU per 4 MiB, more on a busy
/// machine).
struct Writer {
    batches: Option<SyncSender<Batch>>,
    returned: Receiver<std::result::Result<AlignedBuf, IoError>>,
    handles: Vec<JoinHandle<()>>,
}

impl Writer {
    fn start(file: Arc<dyn IoFile>, observer: SharedObserver) -> Writer {
        let (batches, incoming) = sync_channel::<Batch>(BATCH_BUFFERS);
        let (give_back, returned) = sync_channel(BATCH_BUFFERS);
        let (to_meter, written) = sync_channel::<Batch>(BATCH_BUFFERS);
        let write_failed = give_back.clone();
        let writer = std::thread::Builder::new()
            .name("jetproof-bulk-writer".into())
            .spawn(move || {
                for (buf, offset, bytes) in incoming {
                    let data = buf.get(..bytes).unwrap_or(&buf[..]);
                    match file.write_at(data, offset, IoClass::DbWrite) {
                        Ok(()) => {
                            if to_meter.send((buf, offset, bytes)).is_err() {
                                return;
                            }
                        }
                        Err(e) => {
                            let _ = write_failed.send(Err(e));
                            return;
                        }
                    }
                }
            })
            .ok();
        let meter = std::thread::Builder::new()
            .name("jetproof-bulk-meter".into())
            .spawn(move || {
                for (buf, offset, bytes) in written {
                    observe(&observer, offset, buf.get(..bytes).unwrap_or(&buf[..]));
                    if give_back.send(Ok(buf)).is_err() {
                        return;
                    }
                }
            })
            .ok();
        Writer {
            batches: Some(batches),
            returned,
            handles: writer.into_iter().chain(meter).collect(),
        }
    }

    /// Waits for every batch sent to be written; the first write error if any.
    fn stop(&mut self) -> std::result::Result<Vec<AlignedBuf>, IoError> {
        self.batches = None;
        let mut first_error = None;
        let mut buffers = Vec::new();
        while let Ok(outcome) = self.returned.recv() {
            match outcome {
                Ok(buf) => buffers.push(buf),
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        for handle in self.handles.drain(..) {
            let _ = handle.join();
        }
        match first_error {
            Some(e) => Err(e),
            None => Ok(buffers),
        }
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        let _ = self.stop();
    }
}

/// Fills a new, empty database with records in strictly ascending key order. Made by
/// [`Database::bulk_load`]; holds the database exclusively until [`BulkLoader::finish`].
pub struct BulkLoader<'a> {
    db: &'a mut Database,
    file: Arc<dyn IoFile>,
    page_size: usize,
    batch_pages: usize,
    /// Pages `batch_first .. batch_first + batch_count` are complete in `batch`; the slot after
    /// them holds the leaf being built.
    batch: AlignedBuf,
    batch_first: u64,
    batch_count: usize,
    spare: Vec<AlignedBuf>,
    writer: Writer,
    /// Bytes a leaf keeps free for later inserts (ESE's `cbDensityFree`); see
    /// [`BulkLoader::with_density`].
    density_free: usize,
    /// The leaf being built: entries, offset of its lowest record byte, bytes used.
    leaf_entries: usize,
    leaf_end: usize,
    leaf_used_bytes: usize,
    /// Leaves completed (and sent towards the file).
    leaves: u64,
    last_key: Option<Vec<u8>>,
    /// (first key, page) of every leaf, the open one included: the entries of level 1.
    children: Vec<(Vec<u8>, u32)>,
    records: u64,
    /// The header's page count when the load began: pages below it are formatted already.
    initial_page_count: u64,
    /// Pages among the tree's left free by [`BulkLoader::end_extent`] (ascending).
    gaps: Vec<u64>,
    /// Set after any error: the loader accepts nothing more.
    failed: Option<String>,
    observer: SharedObserver,
    filler: Option<Filler>,
    long_values: Option<LongValues>,
}

impl std::fmt::Debug for BulkLoader<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BulkLoader")
            .field("path", &self.db.path())
            .field("records", &self.records)
            .field("leaves", &self.leaves)
            .finish()
    }
}

impl<'a> BulkLoader<'a> {
    /// Checks that the database is new and empty and unlogged, writes its cached pages out (so
    /// the cache never writes a stale copy over what the loader writes), and starts the writer.
    pub(crate) fn start(db: &'a mut Database) -> Result<BulkLoader<'a>> {
        let refuse = |db: &Database, reason: String| EngineError::BulkLoadRefused {
            path: db.path().to_path_buf(),
            reason,
        };
        if db.is_logged() {
            return Err(refuse(
                db,
                "a change log or write-ahead gate is installed; a bulk load is not logged and \
                 is only for filling a new database before any log exists"
                    .into(),
            ));
        }
        let page_size = db.page_size();
        let header = db.header();
        let page_count = db.page_count();
        let map_pages = page_count.div_ceil(space::pages_per_map(page_size));
        let expected_used = u64::from(HEADER_PAGES) + map_pages + 1;
        let root_records = {
            let root = db.cache().read(header.root_page)?;
            node::is_node(root.data()).then(|| node::count(root.data()))
        };
        // The loader places tree pages from page 4 on and the final root at page 3.
        if u64::from(header.root_page) + 1 != FIRST_TREE_PAGE {
            return Err(refuse(
                db,
                format!("the root is page {}, not 3", header.root_page),
            ));
        }
        if root_records != Some(0) || db.used_pages() != expected_used {
            return Err(refuse(
                db,
                format!(
                    "the database is not empty ({} pages in use, {} expected for an empty one)",
                    db.used_pages(),
                    expected_used
                ),
            ));
        }
        db.flush()?;
        let file = db.file().clone();
        let batch_pages = (BATCH_BYTES / page_size).max(1);
        let mut spare: Vec<AlignedBuf> = (0..BATCH_BUFFERS)
            .map(|_| AlignedBuf::zeroed(batch_pages * page_size))
            .collect();
        let batch = spare
            .pop()
            .unwrap_or_else(|| AlignedBuf::zeroed(batch_pages * page_size));
        let observer: SharedObserver = Arc::new(std::sync::Mutex::new(None));
        let mut loader = BulkLoader {
            writer: Writer::start(file.clone(), observer.clone()),
            observer,
            filler: None,
            long_values: None,
            db,
            file,
            page_size,
            batch_pages,
            batch,
            batch_first: FIRST_TREE_PAGE,
            batch_count: 0,
            spare,
            density_free: 0,
            leaf_entries: 0,
            leaf_end: page_size,
            leaf_used_bytes: 0,
            leaves: 0,
            last_key: None,
            children: Vec::new(),
            records: 0,
            initial_page_count: page_count,
            gaps: Vec::new(),
            failed: None,
        };
        loader.skip_map_positions()?;
        Ok(loader)
    }

    /// Hands every byte the loader writes from now on to `observer`, with its file offset,
    /// the leaf and free pages of every batch once written (from the loader's meter thread),
    /// then at `finish` the root (page 3) and group 0's space map (page 2). The other space map
    /// pages are seen as the placeholders the batches carry, so every page the loader writes is
    /// seen once; the header pages (0, 1), written by the close, are not.
    pub fn with_observer(self, observer: WriteObserver) -> Self {
        if let Ok(mut slot) = self.observer.lock() {
            *slot = Some(observer);
        }
        self
    }

    /// Fills the bytes that hold no record with `filler` instead of zeros: each leaf's gap
    /// between its slot array and its records (what the table density leaves free), and the
    /// body of every free page the loader formats (the rest of each mailbox's owned extent and
    /// the file's tail). `init` gives the job's content ([`crate`] never reads those bytes:
    /// checksums cover them, nothing else looks at them), so that free space compresses as the
    /// records do instead of as zeros (issue 33).
    pub fn with_filler(mut self, filler: Filler) -> Self {
        self.filler = Some(filler);
        self
    }

    /// Makes a `share` (0 to 0.95) of the pages the loader lays down long-value pages (ESE keeps
    /// a table's long values, attachments above all, on long-value pages of their own tree): in
    /// runs of [`LONG_VALUE_RUN_PAGES`], each run right after a completed leaf or a mailbox's
    /// free extent rest ([`BulkLoader::end_extent`]) whenever a whole run keeps them within the
    /// share, so leaves stay packed and no page is left free for them. Each page is
    /// [`PageType::LongValue`] with tree [`LONG_VALUE_TREE_ID`], its body made by `fill`, and
    /// counts as used in the space maps. No tree refers to them: `get`, `check` and a run never
    /// read them (the record tree holds no long-value references yet). `init` uses them for
    /// `workload.dedup_ratio` above 1 (issue 33): an attachment stored twice repeats every block
    /// of its pages but the header's. A share of 0 or less (or not finite) lays down none.
    pub fn with_long_values(mut self, share: f64, fill: LongValueFiller) -> Self {
        self.long_values = (share.is_finite() && share > 0.0).then_some(LongValues {
            share: share.min(0.95),
            fill,
            written: 0,
        });
        self
    }

    /// Long-value pages laid down so far.
    pub fn long_value_pages(&self) -> u64 {
        self.long_values.as_ref().map_or(0, |lv| lv.written)
    }

    /// Records appended so far.
    pub fn records(&self) -> u64 {
        self.records
    }

    /// Bytes of the file in use if the load finished now: every page up to the leaf being built
    /// (headers and maps included). The interior levels, written at `finish`, add about one page
    /// per few hundred leaves.
    pub fn used_bytes(&self) -> u64 {
        let open_leaf = u64::from(self.leaf_entries > 0);
        (self.next_page() + open_leaf) * self.page_size as u64
    }

    /// Page number of the next slot of the batch.
    fn next_page(&self) -> u64 {
        self.batch_first + self.batch_count as u64
    }

    fn check_usable(&self) -> Result<()> {
        match &self.failed {
            Some(cause) => Err(EngineError::Poisoned {
                path: self.db.path().to_path_buf(),
                cause: cause.clone(),
            }),
            None => Ok(()),
        }
    }

    /// Remembers the first error: the loader stops, and so does the database's cache (STYLE:
    /// after a failed write the instance accepts no more work).
    fn fail(&mut self, error: EngineError) -> EngineError {
        if self.failed.is_none() {
            self.failed = Some(error.to_string());
            self.db.cache().poison(&error);
        }
        error
    }

    /// Fills leaves only to `percent` of a page (ESE's table density, `JetCreateTable`'s
    /// `ulDensity`: 20–100, 80 when a table does not set it): sequential loading keeps
    /// `(100 − percent)%` of each leaf free, so later inserts into a loaded leaf fit in place
    /// instead of splitting it at once. A leaf always takes at least one record. Values outside
    /// 20–100 are clamped. Interior pages are packed whatever the density.
    pub fn with_density(mut self, percent: u32) -> Self {
        let percent = percent.clamp(20, 100) as usize;
        self.density_free = self.page_size * (100 - percent) / 100;
        self
    }

    /// Adds a record. Keys must be strictly ascending (`KeysNotAscending` otherwise, and the
    /// record is not added); records must fit a leaf as for [`Database::insert`].
    pub fn append(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        self.check_usable()?;
        self.db.check_record(key, value)?;
        if let Some(last) = &self.last_key
            && key <= last.as_slice()
        {
            return Err(EngineError::KeysNotAscending {
                path: self.db.path().to_path_buf(),
                record: self.records,
            });
        }
        let need = node::leaf_entry_bytes(key.len(), value.len());
        let room = if self.leaf_entries == 0 {
            node::capacity(self.page_size)
        } else {
            node::capacity(self.page_size).saturating_sub(self.density_free)
        };
        if self.leaf_used_bytes + need > room {
            self.complete_leaf().map_err(|e| self.fail(e))?;
        }
        if self.leaf_entries == 0 {
            let page = self.next_page() as u32;
            self.children.push((key.to_vec(), page));
        }
        let slot_start = self.batch_count * self.page_size;
        let record_bytes = LEAF_RECORD_OVERHEAD + key.len() + value.len();
        let end = self.leaf_end - record_bytes;
        let entries = self.leaf_entries;
        let Some(leaf) = self.batch.get_mut(slot_start..slot_start + self.page_size) else {
            return Err(self.fail(EngineError::Inconsistent {
                path: self.db.path().to_path_buf(),
                page: 0,
                what: "bulk loader: batch slot out of range".into(),
            }));
        };
        page::put_u16(leaf, end, key.len() as u16);
        page::put_u16(leaf, end + 2, value.len() as u16);
        page::put(leaf, end + LEAF_RECORD_OVERHEAD, key);
        page::put(leaf, end + LEAF_RECORD_OVERHEAD + key.len(), value);
        page::put_u16(leaf, HEADER_SIZE + entries * SLOT_BYTES, end as u16);
        self.leaf_end = end;
        self.leaf_entries += 1;
        self.leaf_used_bytes += need;
        match &mut self.last_key {
            Some(last) => {
                last.clear();
                last.extend_from_slice(key);
            }
            None => self.last_key = Some(key.to_vec()),
        }
        self.records += 1;
        Ok(())
    }

    /// Ends what has been loaded so far on an owned-extent boundary
    /// ([`space::OWNED_EXTENT_PAGES`]): the open leaf is completed and the rest of its extent is
    /// left free, so that the records appended next start a leaf and an extent of their own and
    /// the pages of what came before can grow into the free pages after them
    /// ([`crate::space::Space::allocate_near`]). `init` calls it between mailboxes, whose data
    /// Exchange (since 2010) keeps in tables of their own, each with its own extents. Does
    /// nothing before the first record.
    pub fn end_extent(&mut self) -> Result<()> {
        self.check_usable()?;
        if self.records == 0 {
            return Ok(());
        }
        let outcome = self.end_extent_inner();
        outcome.map_err(|e| self.fail(e))
    }

    fn end_extent_inner(&mut self) -> Result<()> {
        if self.leaf_entries > 0 {
            self.complete_leaf()?;
        }
        while !self.next_page().is_multiple_of(space::OWNED_EXTENT_PAGES) {
            let number = self.push_free_page()?;
            self.gaps.push(number);
        }
        self.push_long_values()
    }

    /// Formats the next slot as a free page and moves past it; returns its page number.
    fn push_free_page(&mut self) -> Result<u64> {
        let number = self.next_page();
        let slot_start = self.batch_count * self.page_size;
        if let Some(slot) = self.batch.get_mut(slot_start..slot_start + self.page_size) {
            match self.filler.as_mut() {
                Some(fill) => page::format_free_filled(slot, number as u32, fill),
                None => page::format_free(slot, number as u32),
            }
        }
        self.advance_slot()?;
        Ok(number)
    }

    /// Seals the leaf being built into its slot and moves to the next slot.
    fn complete_leaf(&mut self) -> Result<()> {
        let number = self.next_page() as u32;
        let stamp = self.db.take_update_stamp();
        let slot_start = self.batch_count * self.page_size;
        let (entries, end) = (self.leaf_entries, self.leaf_end);
        if let Some(leaf) = self.batch.get_mut(slot_start..slot_start + self.page_size) {
            seal_leaf(leaf, number, stamp, entries, end, self.filler.as_mut());
        }
        self.leaf_entries = 0;
        self.leaf_end = self.page_size;
        self.leaf_used_bytes = 0;
        self.leaves += 1;
        self.advance_slot()?;
        self.push_long_values()
    }

    /// Lays down the long-value pages owed, in whole runs ([`BulkLoader::with_long_values`]).
    fn push_long_values(&mut self) -> Result<()> {
        loop {
            let laid = self.next_page().saturating_sub(FIRST_TREE_PAGE);
            let run = LONG_VALUE_RUN_PAGES as u64;
            let due = self
                .long_values
                .as_ref()
                .is_some_and(|lv| (lv.written + run) as f64 <= lv.share * (laid + run) as f64);
            if !due {
                return Ok(());
            }
            self.push_long_value_run()?;
        }
    }

    fn push_long_value_run(&mut self) -> Result<()> {
        for _ in 0..LONG_VALUE_RUN_PAGES {
            let number = self.next_page();
            let stamp = self.db.take_update_stamp();
            let slot_start = self.batch_count * self.page_size;
            if let (Some(slot), Some(lv)) = (
                self.batch.get_mut(slot_start..slot_start + self.page_size),
                self.long_values.as_mut(),
            ) {
                if let Some(header) = slot.get_mut(..HEADER_SIZE) {
                    header.fill(0);
                }
                if let Some(body) = slot.get_mut(HEADER_SIZE..) {
                    (lv.fill)(body);
                }
                page::write_common(slot, number as u32, PageType::LongValue, stamp);
                page::put_u32(slot, page::OFFSET_TREE, LONG_VALUE_TREE_ID);
                checksum::seal(slot);
                lv.written += 1;
            }
            self.advance_slot()?;
        }
        Ok(())
    }

    /// Counts the slot just filled as complete; sends the batch when full; skips map positions.
    fn advance_slot(&mut self) -> Result<()> {
        self.batch_count += 1;
        if self.batch_count == self.batch_pages {
            self.send_batch()?;
        }
        self.skip_map_positions()
    }

    /// A space map position at the next slot gets a placeholder map (the final one is written
    /// at `finish`), so that the batch stays contiguous.
    fn skip_map_positions(&mut self) -> Result<()> {
        while space::is_map_page(self.next_page(), self.page_size) {
            let number = self.next_page() as u32;
            let slot_start = self.batch_count * self.page_size;
            if let Some(slot) = self.batch.get_mut(slot_start..slot_start + self.page_size) {
                space::format_map(slot, number);
            }
            self.batch_count += 1;
            if self.batch_count == self.batch_pages {
                self.send_batch()?;
            }
        }
        if self.next_page() >= MAX_PAGES {
            return Err(EngineError::Full {
                path: self.db.path().to_path_buf(),
                max_pages: MAX_PAGES,
            });
        }
        Ok(())
    }

    /// Hands the complete pages of the batch to the writer and takes a free buffer.
    fn send_batch(&mut self) -> Result<()> {
        if self.batch_count == 0 {
            return Ok(());
        }
        let next = match self.spare.pop() {
            Some(buf) => buf,
            None => match self.writer.returned.recv() {
                Ok(Ok(buf)) => buf,
                Ok(Err(e)) => return Err(e.into()),
                Err(_) => return Err(self.writer_gone()),
            },
        };
        let full = std::mem::replace(&mut self.batch, next);
        let offset = self.batch_first * self.page_size as u64;
        let bytes = self.batch_count * self.page_size;
        let sent = match &self.writer.batches {
            Some(sender) => sender.send((full, offset, bytes)).is_ok(),
            None => false,
        };
        if !sent {
            // The writer stopped after an error: report that error. The meter may still give
            // back buffers of batches written before it, on the same channel and ahead of the
            // error: taking the first message alone lost the error ("writer thread stopped"
            // where the disk was full).
            loop {
                match self.writer.returned.recv() {
                    Ok(Ok(_written)) => continue,
                    Ok(Err(e)) => return Err(e.into()),
                    Err(_) => return Err(self.writer_gone()),
                }
            }
        }
        self.batch_first += self.batch_count as u64;
        self.batch_count = 0;
        Ok(())
    }

    fn writer_gone(&self) -> EngineError {
        EngineError::Poisoned {
            path: self.db.path().to_path_buf(),
            cause: "the bulk loader's writer thread stopped".into(),
        }
    }

    /// Writes the interior levels, the root, the free tail of the last extent, the space maps
    /// and the header; then the database reloads its cache and maps from the file.
    pub fn finish(mut self) -> Result<()> {
        self.check_usable()?;
        let outcome = self.finish_inner();
        outcome.map_err(|e| self.fail(e))
    }

    fn finish_inner(&mut self) -> Result<()> {
        if self.records == 0 {
            // Nothing was written: the database is as created.
            self.writer.stop()?;
            return Ok(());
        }
        let page_size = self.page_size;
        let mut root = AlignedBuf::zeroed(page_size);
        if self.leaves == 0 {
            // One leaf in all: it becomes the root, in place of the empty one.
            let stamp = self.db.take_update_stamp();
            let slot_start = self.batch_count * page_size;
            if let Some(leaf) = self.batch.get(slot_start..slot_start + page_size) {
                root.copy_from_slice(leaf);
            }
            seal_leaf(
                &mut root,
                3,
                stamp,
                self.leaf_entries,
                self.leaf_end,
                self.filler.as_mut(),
            );
        } else {
            if self.leaf_entries > 0 {
                self.complete_leaf()?;
            }
            // Interior levels, bottom up, until one node remains: the root.
            let mut level = 1u16;
            let mut children = std::mem::take(&mut self.children);
            loop {
                let nodes = pack_interior(children, page_size);
                if let [single] = nodes.as_slice() {
                    let stamp = self.db.take_update_stamp();
                    encode_interior(&mut root, 3, stamp, single, level);
                    break;
                }
                let mut parents = Vec::with_capacity(nodes.len());
                for entries in nodes {
                    let number = self.next_page() as u32;
                    let stamp = self.db.take_update_stamp();
                    let slot_start = self.batch_count * page_size;
                    let first_key = entries.first().map(|(k, _)| k.clone()).unwrap_or_default();
                    if let Some(slot) = self.batch.get_mut(slot_start..slot_start + page_size) {
                        encode_interior(slot, number, stamp, &entries, level);
                    }
                    parents.push((first_key, number));
                    self.advance_slot()?;
                }
                children = parents;
                level += 1;
            }
        }
        let tree_end = self.next_page();
        // The file ends on an extent boundary, as growth would leave it; the pages past the tree
        // that lie beyond the old page count are formatted free (or as maps) here.
        let extent = u64::from(self.db.header().extent_pages).max(1);
        let old = self.initial_page_count;
        let new = if tree_end <= old {
            old
        } else {
            (old + (tree_end - old).div_ceil(extent) * extent).min(MAX_PAGES)
        };
        while self.next_page() < new {
            self.push_free_page()?;
        }
        // skip_map_positions may have placed a map at `new` or beyond: never past the count.
        let written_end = self.next_page();
        self.send_batch()?;
        self.writer.stop()?;
        let new = new.max(written_end);
        self.file.sync_data(IoClass::DbWrite)?;

        // The tree pages were written with write count 0, as formatted pages carry; the root and
        // the maps were written by the cache before, so they count on from the flush map.
        let flush_map = self.db.flush_map().clone();
        flush_map.grow(new);
        let mut counts = Vec::new();
        let root_count = flush_map.stamp_for_write(3, &mut root);
        checksum::seal(&mut root);
        counts.push((3u32, root_count));
        // Root and final space maps, then the header: the count covers only synced pages.
        observe(&self.observer, 3 * page_size as u64, &root);
        self.file
            .write_at(&root, 3 * page_size as u64, IoClass::DbWrite)?;
        let per_map = space::pages_per_map(page_size);
        let mut used = 0u64;
        let mut map = AlignedBuf::zeroed(page_size);
        let mut group_start = 0u64;
        while group_start < new {
            let map_page = space::map_page_for(group_start, page_size);
            space::format_map_unsealed(&mut map, map_page as u32);
            let from = group_start.max(3);
            let to = (group_start + per_map).min(tree_end);
            for page_number in from..to.max(from) {
                space::set_map_bit(&mut map, page_number - group_start, true);
            }
            let group = group_start..group_start + per_map;
            for &gap in self.gaps.iter().filter(|gap| group.contains(gap)) {
                space::set_map_bit(&mut map, gap - group_start, false);
            }
            counts.push((
                map_page as u32,
                flush_map.stamp_for_write(map_page as u32, &mut map),
            ));
            checksum::seal(&mut map);
            let in_group = per_map.min(new - group_start);
            used += space::count_used(&map, in_group);
            // Group 0's map is in no batch; the others' placeholders were observed there.
            if map_page == 2 {
                observe(&self.observer, map_page * page_size as u64, &map);
            }
            self.file
                .write_at(&map, map_page * page_size as u64, IoClass::DbWrite)?;
            group_start += per_map;
        }
        self.file.sync_data(IoClass::DbWrite)?;
        for (page, count) in counts {
            flush_map.written(page, count);
        }
        self.db.finish_bulk_load(new, used)
    }
}

/// Fills the header of a leaf whose records and slots are in place, fills the gap between
/// slots and records (zeros without a filler), and seals it.
fn seal_leaf(
    leaf: &mut [u8],
    number: u32,
    stamp: u64,
    entries: usize,
    end: usize,
    filler: Option<&mut Filler>,
) {
    if let Some(area) = leaf.get_mut(..page::CHECKSUM_AREA.end) {
        area.fill(0);
    }
    page::write_common(leaf, number, PageType::Leaf, stamp);
    page::put_u32(leaf, page::OFFSET_TREE, RECORD_TREE_ID);
    node::set_framing(leaf, entries, 0, end);
    let slots_end = HEADER_SIZE + entries * SLOT_BYTES;
    if let Some(gap) = leaf.get_mut(slots_end..end) {
        match filler {
            Some(fill) => fill(gap),
            None => gap.fill(0),
        }
    }
    checksum::seal(leaf);
}

fn encode_interior(
    page: &mut [u8],
    number: u32,
    stamp: u64,
    entries: &[(Vec<u8>, u32)],
    level: u16,
) {
    page.fill(0);
    page::write_common(page, number, PageType::Interior, stamp);
    page::put_u32(page, page::OFFSET_TREE, RECORD_TREE_ID);
    // Entry 0's key stands for "everything below entry 1" and is stored empty.
    let stored: Vec<(Vec<u8>, u32)> = entries
        .iter()
        .enumerate()
        .map(|(i, (k, c))| (if i == 0 { Vec::new() } else { k.clone() }, *c))
        .collect();
    Entries::from_interior(stored).encode(page, level);
    checksum::seal(page);
}

/// Packs (first key, child) entries into interior nodes, as full as they go; a last node of a
/// single child takes one entry from its left neighbour, so that no interior node but the root
/// is left with one child.
fn pack_interior(children: Vec<(Vec<u8>, u32)>, page_size: usize) -> Vec<Vec<(Vec<u8>, u32)>> {
    let capacity = node::capacity(page_size);
    let mut nodes: Vec<Vec<(Vec<u8>, u32)>> = Vec::new();
    let mut current: Vec<(Vec<u8>, u32)> = Vec::new();
    let mut used = 0usize;
    for (key, child) in children {
        let bytes = if current.is_empty() {
            node::interior_entry_bytes(0)
        } else {
            node::interior_entry_bytes(key.len())
        };
        if !current.is_empty() && used + bytes > capacity {
            nodes.push(std::mem::take(&mut current));
            used = node::interior_entry_bytes(0);
        } else {
            used += bytes;
        }
        current.push((key, child));
    }
    if !current.is_empty() {
        nodes.push(current);
    }
    let count = nodes.len();
    if count >= 2
        && nodes.last().is_some_and(|n| n.len() == 1)
        && let Some(moved) = nodes.get_mut(count - 2).and_then(|n| n.pop())
        && let Some(last) = nodes.last_mut()
    {
        last.insert(0, moved);
    }
    nodes
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    #[test]
    fn interior_packing_fits_and_leaves_no_single_child_node() {
        for page_size in page::PAGE_SIZES {
            for n in [2usize, 3, 500, 501, 1000, 4097] {
                let children: Vec<(Vec<u8>, u32)> = (0..n)
                    .map(|i| ((i as u64).to_be_bytes().to_vec(), i as u32))
                    .collect();
                let nodes = pack_interior(children, page_size);
                let mut seen = 0;
                for node_entries in &nodes {
                    assert!(node_entries.len() >= 2 || nodes.len() == 1);
                    let bytes: usize = node_entries
                        .iter()
                        .enumerate()
                        .map(|(i, (k, _))| {
                            node::interior_entry_bytes(if i == 0 { 0 } else { k.len() })
                        })
                        .sum();
                    assert!(bytes <= node::capacity(page_size), "{page_size} {n}");
                    seen += node_entries.len();
                }
                assert_eq!(seen, n);
            }
        }
    }
}
