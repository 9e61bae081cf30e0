//! A database: one file, its header, its space maps, its page cache and its record tree.
//!
//! Life cycle and what the header says at each step:
//! * `create`: formats the whole initial file (every page sealed), writes both header copies
//!   marked *dirty*, creates the root leaf. A crash during create leaves a dirty file that `open`
//!   refuses, so it can never be mistaken for a finished database.
//! * `open`: refuses a dirty database (unless `accept_dirty`, for recovery), then marks it dirty
//!   before any other write.
//! * `close`: flushes every dirty page, syncs, then marks the header clean (copy 0, sync, copy 1,
//!   sync). Dropping a `Database` without `close` is an unclean stop: the header stays dirty.
//!
//! Header writes always go copy 0, sync, copy 1, sync, each with a higher sequence, so that a
//! torn header write leaves the other copy intact (see [`crate::header`]).
#![deny(clippy::indexing_slicing, clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use jetproof_io::meter::{InstanceStats, MeteredFile};
use jetproof_io::{AlignedBuf, IoBackend, IoClass, IoFile, OpenOptions};
use parking_lot::Mutex;

use crate::btree::{Op, Tree, TreeStats};
use crate::bulk::BulkLoader;
use crate::cache::{CacheConfig, CacheStats, PageCache, WriteAheadGate};
use crate::change::{ChangeLog, NoChangeLog};
use crate::error::{EngineError, Result};
use crate::flushmap::{FlushMap, MapIdentity, MapLoad, MapState, flush_map_path};
use crate::header::{DbHeader, DbState, FORMAT_VERSION, HEADER_PAGES, LogPosition};
use crate::node;
use crate::space::{self, OnGrow, Space, SpaceCensus, SpaceStats};

/// The tree id stored in the pages of the record tree.
pub(crate) const RECORD_TREE_ID: u32 = 1;

/// How a database is created or opened.
#[derive(Clone, Debug)]
pub struct DatabaseOptions {
    /// Page size for `create` (4096, 8192, 16384 or 32768); `open` uses the file's.
    pub page_size: usize,
    /// Size the file is created with (rounded up to whole pages, at least 16 pages).
    pub initial_size_bytes: u64,
    /// The file grows by this much at a time (rounded up to whole pages).
    pub extent_bytes: u64,
    /// Cache buffers allocated up front (Jetstress default: 32 MiB).
    pub cache_min_bytes: u64,
    /// Cache buffers at most (Jetstress default: 256 MiB); flush thresholds derive from it.
    pub cache_max_bytes: u64,
    /// Open the file with O_DIRECT.
    pub direct_io: bool,
    /// Every I/O of the database is recorded here (latency per class), if given.
    pub stats: Option<Arc<InstanceStats>>,
    /// Flush from a background thread (normal) or inline (deterministic tests).
    pub flush_thread: bool,
    /// Open a database whose header says dirty (for log replay).
    pub accept_dirty: bool,
    /// Page writes in flight at once (write-back depth; `docs/design.md`, "Write-back").
    pub write_back_depth: usize,
    /// What the bytes that hold nothing are made of: the space a change frees in a page, the
    /// body of a page freed, of every free page formatted (at create and when the file grows),
    /// and the long-value pages growth lays down ([`crate::fill`]). `None` (the default): zeros
    /// and no long-value pages, as before issue 33.
    pub content: Option<Arc<dyn crate::fill::PageContent>>,
}

/// Pages a database file grows by at a time unless told otherwise: ESE's default database
/// extension (`JET_paramDbExtensionSize`, 256 pages; 8 MiB of 32 KiB pages), which the
/// reference reports' growths show (`docs/faithfulness.md`, "Growth per Jetstress batch").
pub const DEFAULT_EXTENSION_PAGES: u64 = 256;

impl Default for DatabaseOptions {
    fn default() -> Self {
        DatabaseOptions {
            page_size: 32 * 1024,
            initial_size_bytes: 8 * 1024 * 1024,
            extent_bytes: DEFAULT_EXTENSION_PAGES * 32 * 1024,
            cache_min_bytes: 32 * 1024 * 1024,
            cache_max_bytes: 256 * 1024 * 1024,
            direct_io: true,
            stats: None,
            flush_thread: true,
            accept_dirty: false,
            write_back_depth: crate::cache::DEFAULT_WRITE_BACK_DEPTH,
            content: None,
        }
    }
}

/// Progress of [`Database::fill_sequential`].
#[derive(Clone, Debug, Default)]
pub struct FillProgress {
    pub records: u64,
    pub file_size_bytes: u64,
    pub target_bytes: u64,
}

/// Keeps the two header copies and writes them in order.
#[derive(Debug)]
struct HeaderStore {
    file: Arc<dyn IoFile>,
    header: Mutex<DbHeader>,
}

impl HeaderStore {
    /// Applies `change` and writes copy 0, sync, copy 1, sync.
    fn update(&self, change: impl FnOnce(&mut DbHeader)) -> Result<()> {
        let mut header = self.header.lock();
        change(&mut header);
        header.sequence += 1;
        let page_size = header.page_size as usize;
        let mut page = AlignedBuf::zeroed(page_size);
        for number in 0..HEADER_PAGES {
            header.encode(&mut page, number);
            self.file.write_at(
                &page,
                u64::from(number) * page_size as u64,
                IoClass::DbWrite,
            )?;
            self.file.sync_data(IoClass::DbWrite)?;
        }
        Ok(())
    }
}

/// An open database. All operations take `&self` and may be called from many threads at once.
#[derive(Debug)]
pub struct Database {
    path: PathBuf,
    header: Arc<HeaderStore>,
    cache: PageCache,
    space: Space,
    stamp: Arc<AtomicU64>,
    root: u32,
    closed: bool,
    log: parking_lot::RwLock<Arc<dyn ChangeLog>>,
    /// A change log or write-ahead gate was installed: a bulk load is refused from then on.
    logged: AtomicBool,
    /// The flush map: every page's last write count (lost-write detection).
    flush_map: Arc<FlushMap>,
    /// What opening the flush map found (`None` for a new database).
    flush_map_opened: Option<FlushMapOpened>,
    /// What freed space and formatted free pages are made of ([`DatabaseOptions::content`]).
    content: Option<Arc<dyn crate::fill::PageContent>>,
}

/// How the flush map was found when the database was opened.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FlushMapOpened {
    /// Loaded; its committed snapshot.
    Loaded(MapLoad),
    /// There was none (a database made by an earlier build, or the file was removed): a new one
    /// was made with every page unknown, so lost writes are detected from each page's next
    /// read or write on. Worth a line in the test log.
    Recreated,
}

/// A position as the log and the flush map store it (`Lsn::to_u64`'s packing).
pub fn packed_position(position: LogPosition) -> u64 {
    (position.generation << 32) | (position.offset & 0xffff_ffff)
}

fn round_pages(bytes: u64, page_size: usize, at_least: u64) -> u64 {
    bytes.div_ceil(page_size as u64).max(at_least)
}

fn random_id() -> u128 {
    use std::hash::{BuildHasher, Hasher};
    let mut id = 0u128;
    for _ in 0..2 {
        let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
        hasher.write_u128(now_ns().into());
        id = (id << 64) | u128::from(hasher.finish());
    }
    id
}

fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos().min(u128::from(u64::MAX)) as u64)
}

fn validate(options: &DatabaseOptions) -> Result<()> {
    if !crate::page::PAGE_SIZES.contains(&options.page_size) {
        return Err(EngineError::InvalidOption {
            field: "page_size",
            reason: format!(
                "{} bytes; choose 4096, 8192, 16384 or 32768",
                options.page_size
            ),
        });
    }
    if options.cache_max_bytes < 16 * options.page_size as u64 {
        return Err(EngineError::InvalidOption {
            field: "cache_max_bytes",
            reason: format!(
                "{} bytes is less than 16 pages; raise it",
                options.cache_max_bytes
            ),
        });
    }
    if options.cache_min_bytes > options.cache_max_bytes {
        return Err(EngineError::InvalidOption {
            field: "cache_min_bytes",
            reason: "larger than cache_max_bytes".into(),
        });
    }
    if options.write_back_depth == 0 || options.write_back_depth > jetproof_io::writeq::MAX_DEPTH {
        return Err(EngineError::InvalidOption {
            field: "write_back_depth",
            reason: format!(
                "{} writes in flight; choose 1 to {}",
                options.write_back_depth,
                jetproof_io::writeq::MAX_DEPTH
            ),
        });
    }
    Ok(())
}

impl Database {
    /// Creates a new database file at `path` (refusing an existing one) and opens it.
    pub fn create(
        backend: &dyn IoBackend,
        path: &Path,
        options: DatabaseOptions,
    ) -> Result<Database> {
        validate(&options)?;
        if backend.exists(path) {
            return Err(EngineError::AlreadyExists {
                path: path.to_path_buf(),
            });
        }
        // A new file, never one that was there or a link's target.
        let file = backend.open(
            path,
            &OpenOptions::create_new().with_direct(options.direct_io),
        )?;
        let file = match &options.stats {
            Some(stats) => MeteredFile::wrap(file, stats.clone()),
            None => file,
        };
        let ps = options.page_size;
        let page_count = round_pages(options.initial_size_bytes, ps, 16);
        space::format_range_with(
            file.as_ref(),
            ps,
            0,
            page_count,
            options.content.as_deref(),
            &|_| false,
        )?;
        let header = DbHeader {
            format_version: FORMAT_VERSION,
            page_size: ps as u32,
            page_count,
            state: DbState::Dirty,
            // The root is the first page the allocator hands out: right after map page 2.
            root_page: 3,
            recovery_position: LogPosition::default(),
            database_id: random_id(),
            created_unix_ns: now_ns(),
            next_update_stamp: 1,
            sequence: 0,
            extent_pages: round_pages(options.extent_bytes, ps, 1) as u32,
            used_pages: 0,
        };
        let store = Arc::new(HeaderStore {
            file: file.clone(),
            header: Mutex::new(header.clone()),
        });
        store.update(|_| {})?;
        // The file's name must survive a crash as well as its content.
        if let Some(dir) = path.parent() {
            backend.sync_dir(dir)?;
        }
        let flush_map = Arc::new(FlushMap::create(
            backend,
            &flush_map_path(path),
            identity_of(&header),
            page_count,
            options.direct_io,
            options.stats.as_ref(),
        )?);
        let db = Self::assemble(path, file, store, header, &options, flush_map, None)?;
        let root = db.space.allocate(&db.cache)?;
        if root != db.root {
            return Err(EngineError::Inconsistent {
                path: path.to_path_buf(),
                page: root,
                what: format!("the first allocation should be page {}", db.root),
            });
        }
        db.with_tree(|tree| tree.format_root())?;
        Ok(db)
    }

    /// Opens an existing database. Refuses one that was not closed cleanly unless
    /// `options.accept_dirty`.
    pub fn open(
        backend: &dyn IoBackend,
        path: &Path,
        options: DatabaseOptions,
    ) -> Result<Database> {
        let file = backend.open(
            path,
            &OpenOptions::read_write().with_direct(options.direct_io),
        )?;
        let file = match &options.stats {
            Some(stats) => MeteredFile::wrap(file, stats.clone()),
            None => file,
        };
        let header = DbHeader::read(file.as_ref())?;
        if header.state == DbState::Dirty && !options.accept_dirty {
            return Err(EngineError::DirtyShutdown {
                path: path.to_path_buf(),
            });
        }
        let options = DatabaseOptions {
            page_size: header.page_size as usize,
            ..options
        };
        validate(&options)?;
        let (flush_map, opened) = open_flush_map(backend, path, &header, &options)?;
        let store = Arc::new(HeaderStore {
            file: file.clone(),
            header: Mutex::new(header.clone()),
        });
        // Everything that can fail while attaching (the cache's memory, a damaged or
        // inconsistent space map) is found before the header says dirty: a database whose
        // attach fails is left exactly as it was, clean, and needs no recovery. Building the
        // cache and the space maps only reads.
        let database = Self::assemble(
            path,
            file,
            store.clone(),
            header,
            &options,
            Arc::new(flush_map),
            Some(opened),
        )?;
        store.update(|h| h.state = DbState::Dirty)?;
        Ok(database)
    }

    fn assemble(
        path: &Path,
        file: Arc<dyn IoFile>,
        store: Arc<HeaderStore>,
        header: DbHeader,
        options: &DatabaseOptions,
        flush_map: Arc<FlushMap>,
        flush_map_opened: Option<FlushMapOpened>,
    ) -> Result<Database> {
        let ps = header.page_size as usize;
        let config = CacheConfig {
            page_size: ps,
            min_pages: (options.cache_min_bytes / ps as u64) as usize,
            max_pages: (options.cache_max_bytes / ps as u64) as usize,
            flush_thread: options.flush_thread,
            flush_map: Some(flush_map.clone()),
            write_back_depth: options.write_back_depth,
        };
        let stamp = Arc::new(AtomicU64::new(header.next_update_stamp.max(1)));
        let content = options.content.clone();
        let (cache, space) =
            Self::load_state(file, &store, &header, config, &stamp, content.clone())?;
        Ok(Database {
            path: path.to_path_buf(),
            header: store,
            cache,
            space,
            stamp,
            root: header.root_page,
            closed: false,
            log: parking_lot::RwLock::new(Arc::new(NoChangeLog)),
            logged: AtomicBool::new(false),
            flush_map,
            flush_map_opened,
            content,
        })
    }

    /// Builds the cache and the space maps from the file, as `open` does.
    fn load_state(
        file: Arc<dyn IoFile>,
        store: &Arc<HeaderStore>,
        header: &DbHeader,
        config: CacheConfig,
        stamp: &Arc<AtomicU64>,
        content: Option<Arc<dyn crate::fill::PageContent>>,
    ) -> Result<(PageCache, Space)> {
        let grow_map = config.flush_map.clone();
        let cache = PageCache::new(file, config)?;
        let grow_store = store.clone();
        let on_grow = OnGrow(Box::new(move |page_count| {
            // The new pages are formatted (write count 0) and synced before this is called.
            if let Some(map) = &grow_map {
                map.grow(page_count);
            }
            grow_store.update(|h| h.page_count = page_count)
        }));
        let space = Space::load(
            &cache,
            header.page_count,
            u64::from(header.extent_pages),
            stamp.clone(),
            on_grow,
        )?
        .with_content(content);
        Ok((cache, space))
    }

    /// Runs `f` on the record tree, with the current change log.
    fn with_tree<R>(&self, f: impl FnOnce(&Tree<'_>) -> Result<R>) -> Result<R> {
        let log = self.log.read().clone();
        f(&Tree {
            cache: &self.cache,
            space: &self.space,
            stamp: &self.stamp,
            root: self.root,
            tree_id: RECORD_TREE_ID,
            log: log.as_ref(),
            content: self.content.as_deref(),
        })
    }

    pub(crate) fn check_record(&self, key: &[u8], value: &[u8]) -> Result<()> {
        let max = self.max_record_bytes();
        if key.len() > node::MAX_KEY_BYTES || key.len() + value.len() > max {
            return Err(EngineError::RecordTooLarge {
                size_bytes: key.len() + value.len(),
                key_bytes: key.len(),
                max_bytes: max.min(key.len().max(node::MAX_KEY_BYTES)),
            });
        }
        Ok(())
    }

    /// The largest key + value this database accepts (keys are at most 512 bytes).
    pub fn max_record_bytes(&self) -> usize {
        node::max_leaf_entry_bytes(self.page_size()) - node::leaf_entry_bytes(0, 0)
    }

    /// Adds a record. Returns false (and changes nothing) if the key exists.
    pub fn insert(&self, key: &[u8], value: &[u8]) -> Result<bool> {
        self.check_record(key, value)?;
        self.with_tree(|tree| tree.modify(Op::Insert { key, value }, 0))
    }

    /// Replaces a record's value. Returns false if the key is absent.
    pub fn replace(&self, key: &[u8], value: &[u8]) -> Result<bool> {
        self.check_record(key, value)?;
        self.with_tree(|tree| tree.modify(Op::Replace { key, value }, 0))
    }

    /// Removes a record (live or marked deleted). Returns false if the key is absent.
    pub fn delete(&self, key: &[u8]) -> Result<bool> {
        self.with_tree(|tree| tree.modify(Op::Delete { key }, 0))
    }

    /// Marks a live record deleted and leaves it on its page (ESE's flag delete): reads no
    /// longer see it, and [`Database::unmark`] brings it back. Returns false if the key is
    /// absent or already marked.
    pub fn mark_deleted(&self, key: &[u8]) -> Result<bool> {
        self.with_tree(|tree| tree.modify(Op::MarkDeleted { key }, 0))
    }

    /// Clears the deletion mark of a record. Returns false if the key is absent or live.
    pub fn unmark(&self, key: &[u8]) -> Result<bool> {
        self.with_tree(|tree| tree.modify(Op::Unmark { key }, 0))
    }

    /// Removes a record marked deleted. Returns false if the key is absent or live.
    pub fn purge(&self, key: &[u8]) -> Result<bool> {
        self.with_tree(|tree| tree.modify(Op::Purge { key }, 0))
    }

    /// Like insert/replace/delete, with the log position of the log record that describes the
    /// change (stamped on every page it touches, for the write-ahead rule and for redo).
    pub fn modify_logged(&self, op: Op<'_>, log_position: u64) -> Result<bool> {
        if let Op::Insert { key, value } | Op::Replace { key, value } = op {
            self.check_record(key, value)?;
        }
        self.with_tree(|tree| tree.modify(op, log_position))
    }

    /// The value stored under `key`.
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.with_tree(|tree| tree.get(key))
    }

    /// Up to `limit` records from `start` on, in key order (with read-ahead).
    pub fn scan(&self, start: &[u8], limit: usize) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let mut out = Vec::new();
        self.with_tree(|tree| tree.scan(start, limit, &mut out))?;
        Ok(out)
    }

    /// Adds records with ascending keys (8-byte big-endian record numbers from `first_record`)
    /// and `value_bytes`-byte values until the file reaches `target_bytes`. Sequential keys take
    /// the append split, so leaves are packed full and written in large adjacent runs. `value`
    /// makes each record's value; `progress` is called every 1024 records. Returns the number of
    /// records added.
    pub fn fill_sequential(
        &self,
        target_bytes: u64,
        first_record: u64,
        value_bytes: usize,
        mut value: impl FnMut(u64, &mut Vec<u8>),
        mut progress: impl FnMut(&FillProgress),
    ) -> Result<u64> {
        let mut buf = Vec::with_capacity(value_bytes);
        let mut record = first_record;
        loop {
            // Stop when the pages in use reach the target: the file is then at most one extent
            // larger, and every extent is formatted.
            let used_bytes = self.space.used_pages() * self.page_size() as u64;
            if used_bytes >= target_bytes {
                break;
            }
            for _ in 0..1024 {
                buf.clear();
                value(record, &mut buf);
                buf.resize(value_bytes, 0);
                let key = record_key(record);
                self.check_record(&key, &buf)?;
                self.with_tree(|tree| {
                    tree.modify(
                        Op::Insert {
                            key: &key,
                            value: &buf,
                        },
                        0,
                    )
                })?;
                record += 1;
            }
            progress(&FillProgress {
                records: record - first_record,
                file_size_bytes: self.file_size_bytes(),
                target_bytes,
            });
        }
        Ok(record - first_record)
    }

    /// Starts a bulk load: records appended in strictly ascending key order are packed into
    /// leaves and written with large sequential writes, beside the cache (see
    /// [`crate::bulk`]). Only for a new, empty database with no change log or write-ahead gate
    /// (`BulkLoadRefused` otherwise): a bulk load is not logged, as ESE's initial creation of a
    /// database is not a recoverable transaction. The database is held until
    /// [`BulkLoader::finish`], after which it is used as usual.
    pub fn bulk_load(&mut self) -> Result<BulkLoader<'_>> {
        BulkLoader::start(self)
    }

    pub(crate) fn is_logged(&self) -> bool {
        self.logged.load(Ordering::Acquire)
    }

    /// A new update stamp (for a page the bulk loader writes).
    pub(crate) fn take_update_stamp(&self) -> u64 {
        self.stamp.fetch_add(1, Ordering::AcqRel)
    }

    /// The bulk loader wrote and synced every page below `page_count` (`used_pages` of them in
    /// use per the maps it wrote): raise the count in both header copies, then drop the cache,
    /// whose copies of the root and map pages are stale, and reload cache and maps from the file.
    pub(crate) fn finish_bulk_load(&mut self, page_count: u64, used_pages: u64) -> Result<()> {
        let next = self.stamp.load(Ordering::Acquire);
        self.header.update(|h| {
            h.page_count = page_count;
            h.used_pages = used_pages;
            h.next_update_stamp = next;
        })?;
        let header = self.header();
        let config = self.cache.config().clone();
        self.cache.stop();
        let (cache, space) = Self::load_state(
            self.cache.file().clone(),
            &self.header,
            &header,
            config,
            &self.stamp,
            self.content.clone(),
        )?;
        self.cache = cache;
        self.space = space;
        if self.space.used_pages() != used_pages {
            return Err(EngineError::Inconsistent {
                path: self.path.clone(),
                page: space::map_page_for(0, self.page_size()) as u32,
                what: format!(
                    "after the bulk load the space maps count {} pages in use, {} were written",
                    self.space.used_pages(),
                    used_pages
                ),
            });
        }
        Ok(())
    }

    /// Flushes every dirty page, syncs, and marks the header clean.
    pub fn close(mut self) -> Result<()> {
        self.close_inner()
    }

    fn close_inner(&mut self) -> Result<()> {
        self.cache.flush_all()?;
        self.cache.stop();
        self.cache.file().sync_data(IoClass::DbWrite)?;
        let next = self.stamp.load(Ordering::Acquire);
        let used = self.space.used_pages();
        let page_count = self.space.page_count();
        // The map's clean snapshot names the header this close is about to write (its stamp and
        // sequence), so that a map left from another close is recognised as stale.
        let (recovery_position, header_sequence) = {
            let header = self.header.header.lock();
            (header.recovery_position, header.sequence + 1)
        };
        self.flush_map
            .persist_clean(packed_position(recovery_position), next, header_sequence)?;
        self.header.update(|h| {
            h.state = DbState::Clean;
            h.next_update_stamp = next;
            h.used_pages = used;
            h.page_count = page_count;
        })?;
        self.closed = true;
        Ok(())
    }

    /// Writes every dirty page now (a checkpoint of the cache), without closing.
    pub fn flush(&self) -> Result<()> {
        self.cache.flush_all()?;
        self.cache.file().sync_data(IoClass::DbWrite)?;
        Ok(())
    }

    /// Checks the tree's and the space map's invariants (a full walk; for tests and checks).
    pub fn check(&self) -> Result<TreeStats> {
        self.with_tree(|tree| tree.check())
    }

    /// Installs the log's change sink: every page change is reported to it from now on
    /// (see [`crate::change`]).
    pub fn set_change_log(&self, log: Arc<dyn ChangeLog>) {
        self.logged.store(true, Ordering::Release);
        self.space.set_change_log(log.clone());
        *self.log.write() = log;
    }

    /// Makes sure update stamps given out from now on are above `stamp` (after a replay, the
    /// highest stamp seen in the log: the header's value is from the last clean close).
    pub fn advance_update_stamp(&self, stamp: u64) {
        self.stamp
            .fetch_max(stamp.saturating_add(1), Ordering::AcqRel);
    }

    /// Installs the log's write-ahead gate.
    pub fn set_write_ahead_gate(&self, gate: Arc<dyn WriteAheadGate>) {
        self.logged.store(true, Ordering::Release);
        self.cache.set_write_ahead_gate(gate);
    }

    /// The lowest log position among changes not yet written to the file (`None`: all written).
    /// The checkpoint may advance up to here.
    pub fn oldest_dirty_log_position(&self) -> Option<u64> {
        self.cache.oldest_dirty_log_position()
    }

    /// Writes every page dirty since before `log_position` (checkpoint-depth flushing).
    pub fn flush_older_than(&self, log_position: u64) -> Result<crate::cache::Flushed> {
        self.cache.flush_older_than(log_position)
    }

    /// The first change not yet written of every dirty page (log positions).
    pub fn dirty_first_changes(&self) -> Vec<u64> {
        self.cache.dirty_first_changes()
    }

    /// Records where recovery must start (the checkpoint), in both header copies.
    pub fn set_recovery_position(&self, position: LogPosition) -> Result<()> {
        self.header.update(|h| h.recovery_position = position)
    }

    pub fn header(&self) -> DbHeader {
        self.header.header.lock().clone()
    }

    pub fn cache_stats(&self) -> CacheStats {
        self.cache.stats()
    }

    pub fn cache(&self) -> &PageCache {
        &self.cache
    }

    /// The next update stamp (dbtime) to be given out.
    pub fn next_update_stamp(&self) -> u64 {
        self.stamp.load(Ordering::Acquire)
    }

    pub fn page_size(&self) -> usize {
        self.cache.config().page_size
    }

    pub fn page_count(&self) -> u64 {
        self.space.page_count()
    }

    pub fn used_pages(&self) -> u64 {
        self.space.used_pages()
    }

    /// Where the pages taken and given back since open came from and went (`docs/design.md`,
    /// "Where new pages go").
    pub fn space_stats(&self) -> SpaceStats {
        self.space.stats()
    }

    /// How the file's free pages lie now (a walk of the space maps, which stay in memory).
    pub fn space_census(&self) -> Result<SpaceCensus> {
        self.space.census(&self.cache)
    }

    pub fn file_size_bytes(&self) -> u64 {
        self.page_count() * self.page_size() as u64
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn file(&self) -> &Arc<dyn IoFile> {
        self.cache.file()
    }

    /// The flush map (lost-write detection).
    pub fn flush_map(&self) -> &Arc<FlushMap> {
        &self.flush_map
    }

    /// What opening the flush map found (`None` for a database created by this handle).
    pub fn flush_map_opened(&self) -> Option<&FlushMapOpened> {
        self.flush_map_opened.as_ref()
    }

    /// Persists the flush map paired with `checkpoint` (a log position, `Lsn::to_u64`, computed
    /// before this call): the database file is synced first, so this also makes every page
    /// write so far durable. The instance calls it before it writes that checkpoint, and never
    /// writes a checkpoint past [`Database::flush_map_checkpoint`].
    pub fn persist_flush_map(&self, checkpoint: u64) -> Result<()> {
        self.flush_map
            .persist(self.cache.file().as_ref(), Some(checkpoint))
    }

    /// The checkpoint the flush map's committed snapshot pairs with.
    pub fn flush_map_checkpoint(&self) -> u64 {
        self.flush_map.persisted_checkpoint()
    }
}

fn identity_of(header: &DbHeader) -> MapIdentity {
    MapIdentity {
        database_id: header.database_id,
        created_unix_ns: header.created_unix_ns,
    }
}

/// Why a loaded flush map cannot vouch for a database. The message is the sentence `checksum`,
/// backup and a run print (tests match on "it is stale").
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MapVouchError {
    #[error(
        "it is stale: it was not written by the database's last clean shutdown (it says {found:?}; the database header's update stamp is {header_stamp}, its sequence {header_sequence})"
    )]
    Stale {
        /// What the map says of how it was left.
        found: MapState,
        /// The database header's next update stamp.
        header_stamp: u64,
        /// The database header's sequence.
        header_sequence: u64,
    },
}

/// Can a loaded flush map vouch for the database of `header`? A clean database's map must be the
/// one its last clean close wrote (same update stamp and header sequence); a dirty database's
/// map is judged by recovery against the checkpoint.
pub fn vouches_for(header: &DbHeader, load: &MapLoad) -> std::result::Result<(), MapVouchError> {
    if header.state != DbState::Clean {
        return Ok(());
    }
    match load.state {
        MapState::Clean {
            stamp,
            header_sequence,
        } if stamp == header.next_update_stamp && header_sequence == header.sequence => Ok(()),
        found => Err(MapVouchError::Stale {
            found,
            header_stamp: header.next_update_stamp,
            header_sequence: header.sequence,
        }),
    }
}

/// A database's flush map as a read-only check (`jetproof checksum`) finds it.
#[derive(Debug)]
pub enum FlushMapStatus {
    /// Loaded; `load.damaged_map_pages` are map pages whose entries are unknown.
    Usable { map: Box<FlushMap>, load: MapLoad },
    /// There is none: lost writes cannot be checked.
    Missing,
    /// It exists but cannot vouch for the pages (stale, another database's, not a map, both
    /// headers damaged): the reason.
    Unusable(String),
}

/// Opens the flush map of the database at `path` (whose header is `header`) read-only, for a
/// check. Never writes; I/O errors are errors, problems of the map are in the status.
pub fn inspect_flush_map(
    backend: &dyn IoBackend,
    path: &Path,
    header: &DbHeader,
    direct_io: bool,
    stats: Option<&Arc<InstanceStats>>,
) -> Result<FlushMapStatus> {
    let map_path = flush_map_path(path);
    if !backend.exists(&map_path) {
        return Ok(FlushMapStatus::Missing);
    }
    match FlushMap::open(
        backend,
        &map_path,
        identity_of(header),
        header.page_count,
        direct_io,
        false,
        stats,
    ) {
        Ok((map, load)) => Ok(match vouches_for(header, &load) {
            Ok(()) => FlushMapStatus::Usable {
                map: Box::new(map),
                load,
            },
            Err(why) => FlushMapStatus::Unusable(why.to_string()),
        }),
        Err(EngineError::FlushMap { what, .. }) => Ok(FlushMapStatus::Unusable(what)),
        Err(other) => Err(other),
    }
}

/// Opens the database's flush map, or makes a new one of unknown entries if there is none.
/// A map that cannot vouch for the pages (damaged, another database's, left from another clean
/// close) is an error whose message says how to start lost-write detection afresh.
fn open_flush_map(
    backend: &dyn IoBackend,
    path: &Path,
    header: &DbHeader,
    options: &DatabaseOptions,
) -> Result<(FlushMap, FlushMapOpened)> {
    let map_path = flush_map_path(path);
    let identity = identity_of(header);
    if !backend.exists(&map_path) {
        let map = FlushMap::create_unknown(
            backend,
            &map_path,
            identity,
            header.page_count,
            options.direct_io,
            options.stats.as_ref(),
        )?;
        return Ok((map, FlushMapOpened::Recreated));
    }
    let restart = "; if the storage is trusted, delete the flush map file to restart lost-write detection (pages are then checked only from their next write)";
    let (map, load) = FlushMap::open(
        backend,
        &map_path,
        identity,
        header.page_count,
        options.direct_io,
        true,
        options.stats.as_ref(),
    )
    .map_err(|error| match error {
        EngineError::FlushMap { path, what } => EngineError::FlushMap {
            path,
            what: format!("{what}{restart}"),
        },
        other => other,
    })?;
    if !load.damaged_map_pages.is_empty() {
        return Err(EngineError::FlushMap {
            path: map_path,
            what: format!(
                "map pages {:?} are damaged (their committed copy fails its checksum): the last write of the pages they describe is unknown{restart}",
                load.damaged_map_pages
            ),
        });
    }
    if let Err(why) = vouches_for(header, &load) {
        return Err(EngineError::FlushMap {
            path: map_path,
            what: format!("{why}{restart}"),
        });
    }
    Ok((map, FlushMapOpened::Loaded(load)))
}

/// The key of record number `n` in sequentially filled databases: 8 bytes, big-endian, so that
/// key order is number order.
pub fn record_key(n: u64) -> [u8; 8] {
    n.to_be_bytes()
}

#[cfg(test)]
#[allow(clippy::indexing_slicing, clippy::unwrap_used)]
mod tests {
    use super::*;

    fn clean_header() -> DbHeader {
        DbHeader {
            format_version: FORMAT_VERSION,
            page_size: 8192,
            page_count: 64,
            state: DbState::Clean,
            root_page: 3,
            recovery_position: LogPosition::default(),
            database_id: 1,
            created_unix_ns: 2,
            next_update_stamp: 40,
            sequence: 7,
            extent_pages: 16,
            used_pages: 4,
        }
    }

    fn load(state: MapState) -> MapLoad {
        MapLoad {
            state,
            sequence: 1,
            checkpoint: 0,
            pages_covered: 64,
            damaged_map_pages: Vec::new(),
        }
    }

    /// A clean database's map vouches only if its last clean close wrote it; the refusal is
    /// typed and keeps the sentence the CLI prints ("it is stale").
    #[test]
    fn vouches_for_refuses_a_stale_map_with_a_typed_error() {
        let header = clean_header();
        let written = MapState::Clean {
            stamp: 40,
            header_sequence: 7,
        };
        assert_eq!(vouches_for(&header, &load(written)), Ok(()));
        for found in [
            MapState::Running,
            MapState::Clean {
                stamp: 39,
                header_sequence: 7,
            },
            MapState::Clean {
                stamp: 40,
                header_sequence: 6,
            },
        ] {
            let error = vouches_for(&header, &load(found)).unwrap_err();
            assert_eq!(
                error,
                MapVouchError::Stale {
                    found,
                    header_stamp: 40,
                    header_sequence: 7,
                }
            );
            assert_eq!(
                error.to_string(),
                format!(
                    "it is stale: it was not written by the database's last clean shutdown (it says {found:?}; the database header's update stamp is 40, its sequence 7)"
                )
            );
        }
        // A dirty database's map is judged by recovery, not here.
        let dirty = DbHeader {
            state: DbState::Dirty,
            ..header
        };
        assert_eq!(vouches_for(&dirty, &load(MapState::Running)), Ok(()));
    }
}
