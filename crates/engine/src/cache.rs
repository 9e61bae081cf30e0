//! The page cache: a bounded set of page buffers between the B+tree and the file.
//!
//! Invariants, and why:
//! * A page is in at most one frame (`MapState::table`), so a latch on the frame is a latch on the
//!   page. Frames change page only under the map mutex, and only when unpinned and clean: a pinned
//!   frame is never reused under its holder, and a dirty page is never dropped unwritten.
//! * The map mutex is never held across an I/O. A page being read in is latched exclusively by its
//!   reader; other sessions wanting it wait on that page's latch, not on the cache.
//! * Every page read is verified (`checksum::correct`) before anyone sees it: single-bit flips are
//!   repaired in memory and counted, anything worse is a typed error naming the file and page.
//! * Every page written is sealed in a private copy right before the write, so the checksum always
//!   matches what goes to disk, and sessions are never blocked by a write in progress (the flusher
//!   holds a page's latch only while copying it).
//! * With a flush map (`crate::flushmap`), the copy carries the page's next write count, the map
//!   records it once the write completed, and every page read must carry the map's count: an
//!   older one is a lost write (`EngineError::LostWrite`). A page is never in two writes at once
//!   (a flush pass writes each page at most once, waits for all its writes before it ends, and
//!   a frame being written is skipped), so a page's counts complete in order whatever order
//!   the storage completes different pages' writes in.
//! * Write-back keeps up to `CacheConfig::write_back_depth` writes in flight per database
//!   (`jetproof_io::WriteQueue`: io_uring's own ring, or writer threads), as ESE keeps many
//!   flush writes outstanding. A page's write count is recorded in the flush map and the page
//!   marked clean only when its write has completed.
//! * Before writing, the flusher asks the [`WriteAheadGate`] to make the log durable up to the
//!   highest log position of the pages in the write (the write-ahead rule; a no-op until the log
//!   exists).
//! * Flushing starts when clean buffers fall under `max_pages / 100` and stops at `max_pages / 50`
//!   (`docs/design.md`, ESE's thresholds), and writes runs of adjacent dirty pages as one I/O of
//!   up to 512 KiB.
//!
//! Frame indices are created by the cache and always below `frames.len()`, so indexing the frame
//! table cannot fail; disk data is never used as an index here.
#![allow(clippy::indexing_slicing)]

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use jetproof_io::{
    AlignedBuf, AlignedSlab, IoClass, IoFile, SlabSlot, WriteCompletion, WriteQueue, WriteRequest,
    open_write_queue,
};
use parking_lot::{Condvar, Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard};

use crate::checksum::{self, PageCheck};
use crate::error::{EngineError, Result};
use crate::flushmap::FlushMap;
use crate::page;

#[path = "cache_writeback.rs"]
mod writeback;

/// The largest single write (and read-ahead read) the cache issues: `docs/design.md`.
pub const MAX_IO_BYTES: usize = 512 * 1024;

const NO_PAGE: u32 = u32::MAX;

/// The frames' page buffers are allocated this many bytes at a time (whole pages), as the cache
/// grows: one aligned allocation per chunk instead of one per page, which cost glibc's
/// allocator an alignment's worth (4 KiB) more per page (`AlignedSlab`).
const CHUNK_BYTES: usize = 2 << 20;

/// The write-ahead rule's hook. Before the cache writes a dirty page, it calls
/// [`WriteAheadGate::ensure_durable`] with the highest log position among the pages of the write;
/// the log makes itself durable up to there (or fails, and the write does not happen).
pub trait WriteAheadGate: Send + Sync + std::fmt::Debug {
    /// Is the log already durable up to `log_position`? Cheap; used to skip the call below.
    fn is_durable(&self, log_position: u64) -> bool;
    /// Returns once the log is durable up to `log_position`.
    fn ensure_durable(&self, log_position: u64) -> Result<()>;
    /// Called before a write of `pages`, whose changes reach log position `log_position`, with
    /// none of them latched: returns the log position that must be durable before the write
    /// (at least `log_position`). The instance logs here the before images it had kept in
    /// memory for uncommitted changes on these pages (ESE's deferred undo info), so that a page
    /// on disk never holds a change whose undo recovery could not find.
    fn before_write(&self, _pages: &[u32], log_position: u64) -> Result<u64> {
        Ok(log_position)
    }
}

/// The gate used while there is no log: everything counts as durable.
#[derive(Debug, Default)]
pub struct NoLog;

impl WriteAheadGate for NoLog {
    fn is_durable(&self, _log_position: u64) -> bool {
        true
    }
    fn ensure_durable(&self, _log_position: u64) -> Result<()> {
        Ok(())
    }
}

/// Sizes and behaviour of a cache.
#[derive(Clone, Debug)]
pub struct CacheConfig {
    pub page_size: usize,
    /// Buffers allocated up front.
    pub min_pages: usize,
    /// Buffers at most; eviction starts when all are in use.
    pub max_pages: usize,
    /// Flush from a background thread (true, as ESE does) or inline in the session that crosses
    /// the start threshold (false: deterministic, for tests).
    pub flush_thread: bool,
    /// The database's flush map (lost-write detection): every page read is checked against it,
    /// every page write stamps the page's next write count and records it once complete.
    pub flush_map: Option<Arc<FlushMap>>,
    /// Page writes in flight at once (job key `cache.write_back_depth`; 1 = one write at a
    /// time, waited for). See `docs/design.md`, "Write-back".
    pub write_back_depth: usize,
}

/// Write-back's default depth: writes in flight per database (`docs/design.md`, "Write-back").
pub const DEFAULT_WRITE_BACK_DEPTH: usize = 32;

impl CacheConfig {
    /// Flushing starts when clean buffers fall below this many (ESE: pages / 100).
    pub fn flush_start_clean_pages(&self) -> usize {
        (self.max_pages / 100).max(1)
    }
    /// Flushing stops when clean buffers reach this many (ESE: pages / 50).
    pub fn flush_stop_clean_pages(&self) -> usize {
        (self.max_pages / 50).max(2)
    }
}

#[derive(Debug, Default)]
struct Counters {
    /// Hits of the resident-only paths; `lookup`'s hits and every miss are in `MapState`.
    hits: AtomicU64,
    evictions: AtomicU64,
    page_fault_stalls: AtomicU64,
    pages_read: AtomicU64,
    read_ios: AtomicU64,
    pages_written: AtomicU64,
    write_ios: AtomicU64,
    pages_corrected: AtomicU64,
    /// The first [`CORRECTED_LISTED`] pages read with one flipped bit (page, bit), so that a
    /// command can name what it corrected in memory instead of only counting it.
    corrected: Mutex<Vec<(u32, usize)>>,
    readahead_pages: AtomicU64,
    flushes: AtomicU64,
}

/// How many corrected pages the cache names ([`PageCache::corrected_pages`]); the count goes on.
pub const CORRECTED_LISTED: usize = 16;

/// What one flush pass wrote: its write I/Os and the pages they carried.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Flushed {
    pub writes: u64,
    pub pages: u64,
}

/// A snapshot of the cache's counters (monotonic since the cache was made) and levels.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CacheStats {
    pub hits: u64,
    pub misses: u64,
    pub evictions: u64,
    /// Times a session found no free buffer and had to wait for a flush (Jetstress: Database Page
    /// Fault Stalls).
    pub page_fault_stalls: u64,
    pub pages_read: u64,
    pub read_ios: u64,
    pub pages_written: u64,
    pub write_ios: u64,
    /// Pages read with one flipped bit, repaired in memory.
    pub pages_corrected: u64,
    /// Pages brought in by read-ahead (also counted in `pages_read`).
    pub readahead_pages: u64,
    /// Flush passes run (threshold, stall or close).
    pub flushes: u64,
    pub resident_pages: usize,
    pub dirty_pages: usize,
    pub max_pages: usize,
}

#[derive(Debug)]
struct FrameData {
    /// The page's bytes: frame `f`'s slot of the cache's slab, or empty until the frame is
    /// first used (frames past `min_pages` get their memory as the cache grows).
    buf: SlabSlot,
    /// The B+tree checked this node's framing (`node::validate`) since the bytes were last
    /// filled from the file or changed by anything but the tree's in-place leaf changes
    /// ([`PageMut::node_data_mut`], which keep a valid framing valid): the tree checks a leaf
    /// once when it is read, not at every change (`docs/design.md`, "Checks on read").
    framing_checked: bool,
}

#[derive(Debug)]
struct Frame {
    latch: RwLock<FrameData>,
    page: AtomicU32,
    pins: AtomicU32,
    referenced: AtomicBool,
    dirty: AtomicBool,
    valid: AtomicBool,
    version: AtomicU64,
    /// Log position of the change that made the page dirty (clean → dirty): the checkpoint
    /// cannot pass it until the page is written (ESE's lgposOldestBegin0).
    first_dirty_log_position: AtomicU64,
    /// A write of this page is in flight: no other write of it starts until it completes.
    writing: AtomicBool,
}

/// The page table's hash: page numbers are chosen by the cache's own allocator, not by an
/// adversary, so a multiplicative (Fibonacci) hash of the `u32` spreads them well at a fraction
/// of SipHash's cost, on a lookup every page access makes under the map mutex.
#[derive(Default)]
struct PageHasher(u64);

impl Hasher for PageHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_u32(&mut self, page: u32) {
        // The high bits of the product are the well-mixed ones; hashbrown uses the top 7 bits
        // as a tag and the low bits as the bucket, so fold the high half down.
        let product = (u64::from(page) ^ self.0).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        self.0 = product ^ (product >> 32);
    }
}

type PageTable = HashMap<u32, usize, BuildHasherDefault<PageHasher>>;

/// What the flush lock guards: the flush hand (a frame index: where the next pass starts its
/// clock order), the write queue and the writes in flight, and the buffers writes are sealed
/// into, kept from write to write so a write does not allocate and zero up to 512 KiB (and,
/// for direct I/O, fault its pages in) each time.
#[derive(Debug)]
struct FlushState {
    hand: u32,
    /// Opened at the first write (`write_back_depth` writes in flight).
    queue: Option<Box<dyn WriteQueue>>,
    /// Buffers of completed writes, for the next ones.
    free_bufs: Vec<AlignedBuf>,
    in_flight: HashMap<u64, InFlightWrite>,
    /// Pages in the writes in flight.
    in_flight_pages: usize,
    next_tag: u64,
    /// A pass's walk and the pages of its runs, kept from pass to pass for their allocations.
    scratch: PassScratch,
}

/// Where a flush pass's walk over the frames is ([`CacheInner::next_seed`]).
#[derive(Debug, Default)]
struct PassScratch {
    /// Frames walked from the pass's start.
    walk: usize,
    /// Dirty frames met with their reference bit set, `(page, frame)`: seeds once the walk has
    /// gone round.
    referenced: Vec<(u32, usize)>,
    /// The next of `referenced` to seed.
    next_referenced: usize,
    /// This pass's number (wrapping; never 0 once a pass ran).
    pass: u32,
    /// Per frame, the number of the last pass that put it in one of its runs (written, or found
    /// latched or in flight): no second run of the pass takes it. A frame given another page
    /// during the pass stays taken for the rest of it (just loaded, it is not dirty anyway).
    taken: Vec<u32>,
}

impl PassScratch {
    fn is_taken(&self, frame: usize) -> bool {
        self.taken.get(frame) == Some(&self.pass)
    }

    fn take(&mut self, frame: usize) {
        if let Some(slot) = self.taken.get_mut(frame) {
            *slot = self.pass;
        }
    }
}

/// A write in flight: its pages (page, frame), each page's version when copied and the write
/// count stamped on the copy.
#[derive(Debug)]
struct InFlightWrite {
    frames: Vec<(u32, usize)>,
    versions: Vec<u64>,
    counts: Vec<u16>,
}

#[derive(Debug)]
struct MapState {
    table: PageTable,
    free: Vec<usize>,
    allocated: usize,
    clock_hand: usize,
    /// Hits and misses of `lookup`, counted under the map mutex (its cache line is already
    /// ours there; a shared atomic would be one more line moving between cores per access).
    /// `stats` adds them to the atomic counters of the other paths.
    hits: u64,
    misses: u64,
}

#[derive(Debug)]
struct FlushSignal {
    wanted: bool,
    /// Cold dirty pages the clock passed since the flusher last took this: as many to clean.
    scavenge: usize,
    stop: bool,
}

#[derive(Debug)]
pub(crate) struct CacheInner {
    file: Arc<dyn IoFile>,
    config: CacheConfig,
    frames: Vec<Frame>,
    /// The frames' page buffers, allocated [`CHUNK_BYTES`] at a time (declared after
    /// `frames`, whose slots point into it, so that it is dropped after them).
    slab: AlignedSlab,
    map: Mutex<MapState>,
    dirty_count: AtomicUsize,
    counters: Counters,
    gate: RwLock<Arc<dyn WriteAheadGate>>,
    flush_lock: Mutex<FlushState>,
    /// Callers other than the flusher waiting for (or holding) `flush_lock`: the flusher's
    /// continued write-back yields to them (`cache_writeback.rs`).
    flush_waiters: AtomicUsize,
    signal: Mutex<FlushSignal>,
    signal_cv: Condvar,
    poisoned: AtomicBool,
    /// Cold dirty pages the eviction clock passed and could not evict since the last scavenge:
    /// the flusher writes as many (`flush_goal`).
    scavenge_wanted: AtomicUsize,
    /// The error that poisoned the cache, for every later error.
    poison_cause: Mutex<Option<String>>,
}

/// The page cache of one database file. Cheap to share: all methods take `&self`.
#[derive(Debug)]
pub struct PageCache {
    inner: Arc<CacheInner>,
    flusher: Mutex<Option<JoinHandle<()>>>,
}

/// A page latched shared. The page stays resident while this lives.
pub struct PageRef<'a> {
    cache: &'a CacheInner,
    frame: usize,
    guard: Option<RwLockReadGuard<'a, FrameData>>,
    page: u32,
}

/// A page latched exclusively. Changes made through [`PageMut::data_mut`] mark it dirty.
pub struct PageMut<'a> {
    cache: &'a CacheInner,
    frame: usize,
    guard: Option<RwLockWriteGuard<'a, FrameData>>,
    page: u32,
    modified: bool,
}

impl PageRef<'_> {
    pub fn data(&self) -> &[u8] {
        match &self.guard {
            Some(guard) => &guard.buf,
            None => &[],
        }
    }
    pub fn page_number(&self) -> u32 {
        self.page
    }
}

impl Drop for PageRef<'_> {
    fn drop(&mut self) {
        drop(self.guard.take());
        self.cache.frames[self.frame]
            .pins
            .fetch_sub(1, Ordering::AcqRel);
    }
}

impl PageMut<'_> {
    pub fn data(&self) -> &[u8] {
        match &self.guard {
            Some(guard) => &guard.buf,
            None => &[],
        }
    }
    /// The page's bytes, for changing. The page is dirty from now on, and its node framing
    /// counts as unchecked (the B+tree checks it again before its next change).
    pub fn data_mut(&mut self) -> &mut [u8] {
        self.modified = true;
        match &mut self.guard {
            Some(guard) => {
                guard.framing_checked = false;
                &mut guard.buf
            }
            None => &mut [],
        }
    }
    /// Like [`Self::data_mut`], for the B+tree's in-place changes of a leaf whose framing it
    /// checked: those keep a valid framing valid (`node::leaf_insert_in_place` and its
    /// siblings), so the check stays.
    pub(crate) fn node_data_mut(&mut self) -> &mut [u8] {
        self.modified = true;
        match &mut self.guard {
            Some(guard) => &mut guard.buf,
            None => &mut [],
        }
    }
    /// Did the B+tree check this node's framing since the bytes were read or last changed
    /// by anything else ([`Self::mark_framing_checked`])?
    pub(crate) fn framing_checked(&self) -> bool {
        self.guard
            .as_ref()
            .is_some_and(|guard| guard.framing_checked)
    }
    /// Records that the framing was just checked and found valid.
    pub(crate) fn mark_framing_checked(&mut self) {
        if let Some(guard) = &mut self.guard {
            guard.framing_checked = true;
        }
    }
    pub fn page_number(&self) -> u32 {
        self.page
    }
    /// Records a change: sets the page's update stamp and log position.
    /// The two fields are no part of a node's framing, so a framing check stays.
    pub fn stamp(&mut self, update_stamp: u64, log_position: u64) {
        let data = self.node_data_mut();
        page::put_u64(data, page::OFFSET_UPDATE_STAMP, update_stamp);
        page::put_u64(data, page::OFFSET_LOG_POSITION, log_position);
    }
}

impl Drop for PageMut<'_> {
    fn drop(&mut self) {
        let frame = &self.cache.frames[self.frame];
        if self.modified {
            // Under the exclusive latch, so the flusher (which compares versions under a shared
            // latch) never misses a change.
            frame.version.fetch_add(1, Ordering::AcqRel);
            if !frame.dirty.swap(true, Ordering::AcqRel) {
                let log_position = page::log_position(self.data()).unwrap_or(0);
                frame
                    .first_dirty_log_position
                    .store(log_position, Ordering::Release);
                self.cache.dirty_count.fetch_add(1, Ordering::AcqRel);
            }
        }
        drop(self.guard.take());
        frame.pins.fetch_sub(1, Ordering::AcqRel);
        if self.modified {
            self.cache.after_dirty();
        }
    }
}

/// How long `create` waits for the latch of a page the allocator handed out before it reports
/// the page as in use (see `CacheInner::create`).
const CREATE_LATCH_WAIT: Duration = Duration::from_secs(2);

enum Lookup {
    /// Resident: the frame, pinned.
    Hit(usize),
    /// Not resident: a frame now mapped to the page, pinned, latched exclusively, not valid.
    Load(usize),
    /// No free buffer.
    Stall,
}

/// How a caller of `CacheInner::acquire` wants its page: latched shared (`read`) or exclusively
/// (`write`), read from the file if not resident; or latched exclusively and zeroed, never read
/// (`create`). A type per mode, so that each caller's loop is compiled for its own mode (the
/// page access every B+tree step makes pays no run-time choice).
trait Access {
    type Guard<'a>;
    /// The page was just handed out by the allocator: no hit or miss is counted, and its frame
    /// is latched by [`Access::latch`] whether it was resident or not (never read).
    const CREATE: bool;
    /// Latches frame `f`, which [`CacheInner::lookup`] found (or, when creating, mapped) and
    /// pinned for `page`: `None` if the frame no longer holds the page loaded (the caller
    /// unpins it and looks again); an error leaves the unpinning to the caller too.
    fn latch(cache: &CacheInner, f: usize, page: u32) -> Result<Option<Self::Guard<'_>>>;
    /// The latch of a frame this caller has just loaded, held exclusively.
    fn loaded(guard: RwLockWriteGuard<'_, FrameData>) -> Self::Guard<'_>;
}

/// `read`: a shared latch.
struct Shared;

/// `write`: an exclusive latch.
struct Exclusive;

/// `create`: an exclusive latch on a zeroed buffer.
struct Created;

impl Access for Shared {
    type Guard<'a> = RwLockReadGuard<'a, FrameData>;
    const CREATE: bool = false;

    fn latch(cache: &CacheInner, f: usize, page: u32) -> Result<Option<Self::Guard<'_>>> {
        let frame = &cache.frames[f];
        let guard = frame.latch.read();
        Ok(frame.holds_loaded(page).then_some(guard))
    }

    fn loaded(guard: RwLockWriteGuard<'_, FrameData>) -> Self::Guard<'_> {
        RwLockWriteGuard::downgrade(guard)
    }
}

impl Access for Exclusive {
    type Guard<'a> = RwLockWriteGuard<'a, FrameData>;
    const CREATE: bool = false;

    fn latch(cache: &CacheInner, f: usize, page: u32) -> Result<Option<Self::Guard<'_>>> {
        let frame = &cache.frames[f];
        let guard = frame.latch.write();
        Ok(frame.holds_loaded(page).then_some(guard))
    }

    fn loaded(guard: RwLockWriteGuard<'_, FrameData>) -> Self::Guard<'_> {
        guard
    }
}

impl Access for Created {
    type Guard<'a> = RwLockWriteGuard<'a, FrameData>;
    const CREATE: bool = true;

    fn latch(cache: &CacheInner, f: usize, page: u32) -> Result<Option<Self::Guard<'_>>> {
        let frame = &cache.frames[f];
        // A page just handed out by the allocator has no other user. If its latch stays taken,
        // the space map gave out a page in use (a damaged map, possibly a page this very
        // session holds): report it instead of waiting forever.
        let Some(mut guard) = frame.latch.try_write_for(CREATE_LATCH_WAIT) else {
            return Err(EngineError::Inconsistent {
                path: cache.path().to_path_buf(),
                page,
                what: "the space map handed out a page that is in use".into(),
            });
        };
        if frame.page.load(Ordering::Acquire) != page {
            return Ok(None);
        }
        if guard.buf.is_empty() {
            if let Err(error) = cache.ensure_buffer(f, &mut guard) {
                cache.abandon(f, page);
                return Err(error);
            }
        } else {
            guard.buf.fill(0);
        }
        guard.framing_checked = false;
        frame.valid.store(true, Ordering::Release);
        Ok(Some(guard))
    }

    fn loaded(guard: RwLockWriteGuard<'_, FrameData>) -> Self::Guard<'_> {
        // Never called: a created page is not loaded (`CREATE` skips the load).
        guard
    }
}

impl Frame {
    /// Whether the frame holds `page`, loaded (checked under its latch: a frame changes page
    /// only unlatched and unpinned, and a failed load leaves it invalid).
    fn holds_loaded(&self, page: u32) -> bool {
        self.valid.load(Ordering::Acquire) && self.page.load(Ordering::Acquire) == page
    }
}

impl PageCache {
    /// A cache over `file`. Starts the flusher thread if the config asks for it.
    pub fn new(file: Arc<dyn IoFile>, config: CacheConfig) -> Result<PageCache> {
        if !page::PAGE_SIZES.contains(&config.page_size) {
            return Err(EngineError::InvalidOption {
                field: "page_size",
                reason: format!(
                    "{} is not one of 4096, 8192, 16384, 32768",
                    config.page_size
                ),
            });
        }
        if config.max_pages < 16 || config.min_pages > config.max_pages {
            return Err(EngineError::InvalidOption {
                field: "cache_max_bytes",
                reason: format!(
                    "the cache needs at least 16 pages and min ({}) <= max ({})",
                    config.min_pages, config.max_pages
                ),
            });
        }
        // Every table sized by the cache's page count is allocated fallibly: the count comes
        // from the user's cache size, and a size beyond this machine must be an error the
        // caller reports (before the database is marked dirty), not an abort.
        let out_of_memory =
            |what: &'static str, bytes: usize| EngineError::OutOfMemory { what, bytes };
        // The frame table first: the largest of them (a frame per page, against a chunk-table
        // entry per CHUNK_BYTES), so an impossible size fails before anything is written.
        let mut frames = Vec::new();
        frames.try_reserve_exact(config.max_pages).map_err(|_| {
            out_of_memory(
                "the page cache's frame table",
                config.max_pages.saturating_mul(size_of::<Frame>()),
            )
        })?;
        let slab = AlignedSlab::try_new(
            config.page_size,
            config.max_pages,
            CHUNK_BYTES / config.page_size,
        )
        .map_err(|e| out_of_memory("the page cache's chunk table", e.bytes))?;
        for i in 0..config.max_pages {
            let buf = if i < config.min_pages {
                // SAFETY: slot i is handed out once, to frame i, here; the slab lives in the
                // same CacheInner and is dropped after the frames.
                unsafe { slab.slot(i) }
                    .map_err(|e| out_of_memory("the page cache's minimum buffers", e.bytes))?
            } else {
                SlabSlot::empty()
            };
            frames.push(Frame {
                latch: RwLock::new(FrameData {
                    buf,
                    framing_checked: false,
                }),
                page: AtomicU32::new(NO_PAGE),
                pins: AtomicU32::new(0),
                referenced: AtomicBool::new(false),
                dirty: AtomicBool::new(false),
                valid: AtomicBool::new(false),
                version: AtomicU64::new(0),
                first_dirty_log_position: AtomicU64::new(0),
                writing: AtomicBool::new(false),
            });
        }
        let mut free = Vec::new();
        free.try_reserve_exact(config.min_pages).map_err(|_| {
            out_of_memory(
                "the page cache's free list",
                config.min_pages.saturating_mul(size_of::<usize>()),
            )
        })?;
        free.extend((0..config.min_pages).rev());
        let inner = Arc::new(CacheInner {
            file,
            frames,
            slab,
            map: Mutex::new(MapState {
                table: PageTable::default(),
                free,
                allocated: config.min_pages,
                clock_hand: 0,
                hits: 0,
                misses: 0,
            }),
            dirty_count: AtomicUsize::new(0),
            counters: Counters::default(),
            gate: RwLock::new(Arc::new(NoLog)),
            flush_lock: Mutex::new(FlushState {
                hand: 0,
                queue: None,
                free_bufs: Vec::new(),
                in_flight: HashMap::new(),
                in_flight_pages: 0,
                next_tag: 0,
                scratch: PassScratch::default(),
            }),
            flush_waiters: AtomicUsize::new(0),
            signal: Mutex::new(FlushSignal {
                wanted: false,
                scavenge: 0,
                stop: false,
            }),
            scavenge_wanted: AtomicUsize::new(0),
            poison_cause: Mutex::new(None),
            signal_cv: Condvar::new(),
            poisoned: AtomicBool::new(false),
            config,
        });
        let flusher = if inner.config.flush_thread {
            let worker = inner.clone();
            let handle = std::thread::Builder::new()
                .name("jetproof-flush".into())
                .spawn(move || worker.flusher_loop())
                .map_err(|e| EngineError::InvalidOption {
                    field: "flush_thread",
                    reason: format!("cannot start the flush thread: {e}"),
                })?;
            Some(handle)
        } else {
            None
        };
        Ok(PageCache {
            inner,
            flusher: Mutex::new(flusher),
        })
    }

    pub fn config(&self) -> &CacheConfig {
        &self.inner.config
    }

    pub fn file(&self) -> &Arc<dyn IoFile> {
        &self.inner.file
    }

    /// Installs the write-ahead gate (the log, once it exists).
    pub fn set_write_ahead_gate(&self, gate: Arc<dyn WriteAheadGate>) {
        *self.inner.gate.write() = gate;
    }

    /// The page, latched shared; read from the file if not resident.
    pub fn read(&self, page: u32) -> Result<PageRef<'_>> {
        self.inner.read(page)
    }

    /// The page, latched exclusively; read from the file if not resident.
    pub fn write(&self, page: u32) -> Result<PageMut<'_>> {
        self.inner.write(page)
    }

    /// The page latched shared if it is resident and loaded, without any I/O or waiting for one.
    pub fn read_if_resident(&self, page: u32) -> Option<PageRef<'_>> {
        self.inner.if_resident(page).map(|(frame, guard)| PageRef {
            cache: &self.inner,
            frame,
            guard: Some(guard),
            page,
        })
    }

    /// The page latched exclusively if it is resident and loaded, without any I/O.
    pub fn write_if_resident(&self, page: u32) -> Option<PageMut<'_>> {
        self.inner
            .if_resident_write(page)
            .map(|(frame, guard)| PageMut {
                cache: &self.inner,
                frame,
                guard: Some(guard),
                page,
                modified: false,
            })
    }

    /// Is the page resident and loaded (a hint: it may be evicted right after)?
    pub fn is_resident(&self, page: u32) -> bool {
        let map = self.inner.map.lock();
        map.table
            .get(&page)
            .is_some_and(|&f| self.inner.frames[f].valid.load(Ordering::Acquire))
    }

    /// A page just allocated: latched exclusively, without reading it (its content on disk is a
    /// formatted free page the caller is about to replace). The buffer is zeroed.
    pub fn create(&self, page: u32) -> Result<PageMut<'_>> {
        self.inner.create(page)
    }

    /// Keeps `page` resident for the life of the cache (space map pages).
    pub fn pin_forever(&self, page: u32) -> Result<()> {
        let page_ref = self.read(page)?;
        self.inner.frames[page_ref.frame]
            .pins
            .fetch_add(1, Ordering::AcqRel);
        Ok(())
    }

    /// Reads the non-resident pages among `pages` in runs of adjacent pages, each run one I/O of
    /// at most 512 KiB. Best effort: stops when no buffer is free, and leaves errors to be
    /// reported by the read that needs the page.
    pub fn prefetch(&self, pages: &[u32]) {
        self.inner.prefetch(pages);
    }

    /// Writes every dirty page (adjacent ones coalesced). Used by close.
    pub fn flush_all(&self) -> Result<()> {
        self.inner.check_poisoned()?;
        let mut guard = self.inner.lock_flush();
        for _ in 0..64 {
            if self.inner.dirty_count.load(Ordering::Acquire) == 0 {
                break;
            }
            self.inner.flush_pass(&mut guard, usize::MAX)?;
        }
        if self.inner.dirty_count.load(Ordering::Acquire) != 0 {
            return Err(EngineError::InvalidOption {
                field: "close",
                reason: "dirty pages remain latched by running sessions; stop them before close"
                    .into(),
            });
        }
        Ok(())
    }

    /// The lowest log position among the changes not yet written (the oldest dirty page's first
    /// change), or `None` if nothing is dirty. The checkpoint may advance up to here.
    pub fn oldest_dirty_log_position(&self) -> Option<u64> {
        let map = self.inner.map.lock();
        (0..map.allocated)
            .filter(|&f| self.inner.frames[f].dirty.load(Ordering::Acquire))
            .map(|f| {
                self.inner.frames[f]
                    .first_dirty_log_position
                    .load(Ordering::Acquire)
            })
            .min()
    }

    /// Writes every page that has been dirty since before `log_position` (with its adjacent
    /// dirty pages, as any flush): how the checkpoint is advanced when it falls too far behind
    /// the log (checkpoint depth, `docs/design.md`).
    ///
    /// Returns what the pass wrote (its completions are all processed under the flush lock, so
    /// the counts are this pass's own): the pacing controller tells the checkpoint's writes
    /// from the others by them.
    pub fn flush_older_than(&self, log_position: u64) -> Result<Flushed> {
        self.inner.check_poisoned()?;
        let mut guard = self.inner.lock_flush();
        let counters = &self.inner.counters;
        let writes = counters.write_ios.load(Ordering::Relaxed);
        let pages = counters.pages_written.load(Ordering::Relaxed);
        self.inner
            .flush_pass_filtered(&mut guard, usize::MAX, Some(log_position))?;
        Ok(Flushed {
            writes: counters.write_ios.load(Ordering::Relaxed) - writes,
            pages: counters.pages_written.load(Ordering::Relaxed) - pages,
        })
    }

    /// The first change not yet written of every dirty page (log positions, in no order): what
    /// checkpoint-depth flushing will write, and when. Read without the map's mutex, as a flush
    /// pass reads the frames (an estimate: frames change meanwhile).
    pub fn dirty_first_changes(&self) -> Vec<u64> {
        let allocated = self.inner.map.lock().allocated.min(self.inner.frames.len());
        self.inner.frames[..allocated]
            .iter()
            .filter(|frame| {
                frame.dirty.load(Ordering::Acquire) && frame.page.load(Ordering::Acquire) != NO_PAGE
            })
            .map(|frame| frame.first_dirty_log_position.load(Ordering::Acquire))
            .collect()
    }

    /// Runs one threshold flush now, as the flusher would (for tests and for sessions that want
    /// to help).
    pub fn flush_to_threshold(&self) -> Result<()> {
        let mut guard = self.inner.lock_flush();
        let stop = self.inner.config.flush_stop_clean_pages();
        self.inner.flush_pass(&mut guard, stop)
    }

    /// Clean (reusable) buffers: allocated clean frames plus those not yet allocated.
    pub fn clean_pages(&self) -> usize {
        self.inner.clean_pages()
    }

    /// The first pages read with one flipped bit since the cache was made, each with the bit
    /// (as `checksum::correct` numbers it): they were repaired in memory only, the storage
    /// still holds them damaged until the engine writes them again.
    pub fn corrected_pages(&self) -> Vec<(u32, usize)> {
        self.inner.counters.corrected.lock().clone()
    }

    pub fn stats(&self) -> CacheStats {
        let c = &self.inner.counters;
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let (lookup_hits, lookup_misses, resident_pages) = {
            let map = self.inner.map.lock();
            (map.hits, map.misses, map.table.len())
        };
        CacheStats {
            hits: load(&c.hits) + lookup_hits,
            misses: lookup_misses,
            evictions: load(&c.evictions),
            page_fault_stalls: load(&c.page_fault_stalls),
            pages_read: load(&c.pages_read),
            read_ios: load(&c.read_ios),
            pages_written: load(&c.pages_written),
            write_ios: load(&c.write_ios),
            pages_corrected: load(&c.pages_corrected),
            readahead_pages: load(&c.readahead_pages),
            flushes: load(&c.flushes),
            resident_pages,
            dirty_pages: self.inner.dirty_count.load(Ordering::Relaxed),
            max_pages: self.inner.config.max_pages,
        }
    }

    /// Stops the flusher thread (dirty pages stay dirty; call [`PageCache::flush_all`] first).
    pub fn stop(&self) {
        {
            let mut signal = self.inner.signal.lock();
            signal.stop = true;
        }
        self.inner.signal_cv.notify_all();
        if let Some(handle) = self.flusher.lock().take() {
            let _ = handle.join();
        }
    }

    /// Stops the cache: every later operation fails with `Poisoned` naming `cause`. Used when
    /// a change could not be logged (memory then holds a change the log does not know).
    pub fn poison(&self, cause: &EngineError) {
        self.inner.poison(cause);
    }

    pub fn is_poisoned(&self) -> bool {
        self.inner.poisoned.load(Ordering::Acquire)
    }
}

impl Drop for PageCache {
    fn drop(&mut self) {
        self.stop();
    }
}

impl CacheInner {
    fn path(&self) -> &Path {
        self.file.path()
    }

    /// Stops the cache after a failed write, remembering the first cause for every later error.
    fn poison(&self, cause: &EngineError) {
        let mut first = self.poison_cause.lock();
        if first.is_none() {
            *first = Some(cause.to_string());
        }
        self.poisoned.store(true, Ordering::Release);
    }

    fn check_poisoned(&self) -> Result<()> {
        if self.poisoned.load(Ordering::Acquire) {
            return Err(EngineError::Poisoned {
                path: self.path().to_path_buf(),
                cause: self
                    .poison_cause
                    .lock()
                    .clone()
                    .unwrap_or_else(|| "unknown".into()),
            });
        }
        Ok(())
    }

    fn clean_pages(&self) -> usize {
        self.config
            .max_pages
            .saturating_sub(self.dirty_count.load(Ordering::Acquire))
    }

    fn after_dirty(&self) {
        if self.clean_pages() >= self.config.flush_start_clean_pages() {
            return;
        }
        if self.config.flush_thread {
            let mut signal = self.signal.lock();
            if !signal.wanted {
                signal.wanted = true;
                self.signal_cv.notify_one();
            }
        } else if let Some(mut guard) = self.flush_lock.try_lock() {
            // Errors poison the cache; the next operation reports them.
            let _ = self.flush_pass(&mut guard, self.config.flush_stop_clean_pages());
        }
    }

    fn flusher_loop(&self) {
        loop {
            let scavenge;
            {
                let mut signal = self.signal.lock();
                while !signal.wanted && !signal.stop {
                    self.signal_cv
                        .wait_for(&mut signal, Duration::from_millis(200));
                    if self.clean_pages() < self.config.flush_start_clean_pages() {
                        signal.wanted = true;
                    }
                    // Cold dirty pages fewer than a batch wait for this tick.
                    let passed = self.scavenge_wanted.swap(0, Ordering::AcqRel);
                    if passed > 0 {
                        signal.scavenge = signal.scavenge.saturating_add(passed);
                        signal.wanted = true;
                    }
                }
                if signal.stop {
                    return;
                }
                signal.wanted = false;
                scavenge = std::mem::take(&mut signal.scavenge);
            }
            if self.poisoned.load(Ordering::Acquire) {
                continue;
            }
            let mut guard = self.flush_lock.lock();
            let _ = self.background_pass(&mut guard, self.flush_goal(scavenge));
        }
    }

    /// How many clean buffers a flush pass aims for: the stop threshold (`docs/design.md`), or,
    /// when the clock passed `scavenge` cold dirty pages, that many more than there are now (at
    /// most the stop threshold's count more): the scavenge writes what the clock could not evict,
    /// as ESE's scavenger writes the dirty pages it meets at the LRU end, not a block of the cache
    /// at once (until 2026-12-07 every sighting asked for the stop threshold's count more, ~2% of
    /// the cache in one burst).
    fn flush_goal(&self, scavenge: usize) -> usize {
        let stop = self.config.flush_stop_clean_pages();
        let clean = self.clean_pages();
        // Below the start threshold the pass is a threshold flush whatever else it is.
        if scavenge == 0 || clean < self.config.flush_start_clean_pages() {
            return stop;
        }
        (clean + scavenge.min(stop)).min(self.config.max_pages)
    }

    /// How many cold dirty pages the clock passes before a scavenge is asked at once (fewer wait
    /// for the flusher's next tick, at most 200 ms): an eighth of the stop threshold, at most 16
    /// (one 512 KiB write of 32 KiB pages), so that a flush pass, which walks the frames from the
    /// flush hand (all of them when every dirty one was referenced lately), is not run for each
    /// page the clock passes.
    fn scavenge_batch(&self) -> usize {
        (self.config.flush_stop_clean_pages() / 8).clamp(1, 16)
    }

    /// Called after a lookup: passes on the clock's request to write cold dirty pages.
    fn maybe_scavenge(&self) {
        // Read before swapping: this runs on every page access, and a swap would take the
        // flag's cache line exclusively from the other cores each time.
        if self.scavenge_wanted.load(Ordering::Relaxed) < self.scavenge_batch() {
            return;
        }
        let passed = self.scavenge_wanted.swap(0, Ordering::AcqRel);
        if passed == 0 {
            return;
        }
        if self.config.flush_thread {
            let mut signal = self.signal.lock();
            signal.scavenge = signal.scavenge.saturating_add(passed);
            if !signal.wanted {
                signal.wanted = true;
                self.signal_cv.notify_one();
            }
        } else if let Some(mut guard) = self.flush_lock.try_lock() {
            let _ = self.flush_pass(&mut guard, self.flush_goal(passed));
        }
    }

    /// Finds the page's frame, pinning it, or maps a new frame to it. Never does I/O.
    fn lookup(&self, page: u32, create: bool) -> Lookup {
        let mut map = self.map.lock();
        if let Some(&f) = map.table.get(&page) {
            let frame = &self.frames[f];
            frame.pins.fetch_add(1, Ordering::AcqRel);
            frame.referenced.store(true, Ordering::Relaxed);
            if !create {
                map.hits += 1;
            }
            return Lookup::Hit(f);
        }
        let Some(f) = self.take_frame(&mut map) else {
            return Lookup::Stall;
        };
        let frame = &self.frames[f];
        frame.page.store(page, Ordering::Release);
        frame.pins.store(1, Ordering::Release);
        frame.valid.store(false, Ordering::Release);
        frame.referenced.store(true, Ordering::Relaxed);
        map.table.insert(page, f);
        if !create {
            map.misses += 1;
        }
        Lookup::Load(f)
    }

    /// A frame to reuse: free, never used, or evicted by the clock. Under the map mutex.
    fn take_frame(&self, map: &mut MapState) -> Option<usize> {
        if let Some(f) = map.free.pop() {
            return Some(f);
        }
        if map.allocated < self.frames.len() {
            map.allocated += 1;
            return Some(map.allocated - 1);
        }
        let count = map.allocated;
        // Cold dirty pages passed, added to the scavenge request once after the walk (one
        // atomic add per eviction, not one per page passed).
        let mut passed = 0usize;
        let found = 'walk: {
            for _ in 0..2 * count {
                let f = map.clock_hand;
                map.clock_hand = (map.clock_hand + 1) % count;
                let frame = &self.frames[f];
                if frame.pins.load(Ordering::Acquire) != 0 {
                    continue;
                }
                // Second chance for every page, dirty or clean, so that recency is known for both.
                if frame.referenced.swap(false, Ordering::Relaxed) {
                    continue;
                }
                if frame.dirty.load(Ordering::Acquire) {
                    // A cold dirty page: the one to evict if it were written. Ask the flusher to
                    // write cold pages (ESE's scavenging of the LRU end), so that pages that are no
                    // longer used do not hold the cache forever.
                    passed += 1;
                    continue;
                }
                // Invariant: a frame whose write is in flight is still dirty (its write's completion
                // clears `writing` before `dirty`), so the clock never evicts it: evicting it would
                // reuse the frame while the write's page is still being written from its copy and a
                // failed write could no longer leave the page dirty.
                debug_assert!(
                    !frame.writing.load(Ordering::Acquire),
                    "the clock evicts frame {f}, whose write is in flight"
                );
                let old = frame.page.load(Ordering::Acquire);
                if old != NO_PAGE {
                    if map.table.get(&old) == Some(&f) {
                        map.table.remove(&old);
                    }
                    self.counters.evictions.fetch_add(1, Ordering::Relaxed);
                }
                frame.page.store(NO_PAGE, Ordering::Release);
                frame.valid.store(false, Ordering::Release);
                break 'walk Some(f);
            }
            None
        };
        if passed > 0 {
            self.scavenge_wanted.fetch_add(passed, Ordering::AcqRel);
        }
        found
    }

    /// Called when a session finds no free buffer: count the stall and flush.
    fn stall(&self, attempt: u32) -> Result<()> {
        self.check_poisoned()?;
        self.counters
            .page_fault_stalls
            .fetch_add(1, Ordering::Relaxed);
        if attempt > 50 {
            return Err(EngineError::CacheExhausted {
                frames: self.frames.len(),
            });
        }
        let mut guard = self.lock_flush();
        if self.dirty_count.load(Ordering::Acquire) == 0 {
            // Everything is clean but pinned or just referenced: let others move on.
            drop(guard);
            std::thread::sleep(Duration::from_micros(100));
            return Ok(());
        }
        // The clean buffers there are must all be pinned or in use: write some dirty ones,
        // whatever the thresholds say.
        let goal =
            (self.clean_pages() + self.config.flush_stop_clean_pages()).min(self.config.max_pages);
        self.flush_pass(&mut guard, goal)
    }

    /// Undoes a failed load: the frame no longer holds the page.
    fn abandon(&self, f: usize, page: u32) {
        let mut map = self.map.lock();
        if map.table.get(&page) == Some(&f) {
            map.table.remove(&page);
        }
        let frame = &self.frames[f];
        frame.page.store(NO_PAGE, Ordering::Release);
        frame.valid.store(false, Ordering::Release);
    }

    /// Gives frame `f` its page buffer if it has none yet (its first use). Called with the
    /// frame's latch held exclusively (`data` is behind it).
    /// When the allocator cannot give the buffer's chunk, the frame stays without one and the
    /// error is returned (the caller gives the frame up): the cache cannot grow, the process
    /// goes on.
    fn ensure_buffer(&self, f: usize, data: &mut FrameData) -> Result<()> {
        if data.buf.is_empty() {
            // SAFETY: frame f's buffer is empty until this sets it, and nothing empties it again,
            // so slot f is handed out at most once (at construction for f < min_pages, or here);
            // the exclusive latch keeps two sessions from both finding it empty. The slab is
            // dropped after the frames. A failed call hands nothing out.
            data.buf = unsafe { self.slab.slot(f) }.map_err(|e| EngineError::OutOfMemory {
                what: "a page cache buffer chunk",
                bytes: e.bytes,
            })?;
        }
        Ok(())
    }

    /// Reads `page` into the frame's buffer and verifies it.
    fn load_into(&self, f: usize, data: &mut FrameData, page: u32) -> Result<()> {
        self.ensure_buffer(f, data)?;
        let offset = u64::from(page) * self.config.page_size as u64;
        data.framing_checked = false;
        self.file.read_at(&mut data.buf, offset, IoClass::DbRead)?;
        self.counters.pages_read.fetch_add(1, Ordering::Relaxed);
        self.counters.read_ios.fetch_add(1, Ordering::Relaxed);
        self.verify(&mut data.buf, page)
    }

    fn verify(&self, buf: &mut [u8], page: u32) -> Result<()> {
        self.verify_checksum(buf, page)?;
        match &self.config.flush_map {
            Some(map) => map.verify_read(self.path(), page, buf),
            None => Ok(()),
        }
    }

    fn verify_checksum(&self, buf: &mut [u8], page: u32) -> Result<()> {
        match checksum::correct(buf, page) {
            PageCheck::Good => Ok(()),
            PageCheck::Correctable { bit } => {
                self.counters
                    .pages_corrected
                    .fetch_add(1, Ordering::Relaxed);
                let mut listed = self.counters.corrected.lock();
                if listed.len() < CORRECTED_LISTED && !listed.iter().any(|&(p, _)| p == page) {
                    listed.push((page, bit));
                }
                Ok(())
            }
            PageCheck::WrongPageNumber { found } => Err(EngineError::WrongPageNumber {
                path: self.path().to_path_buf(),
                page,
                found,
            }),
            _ => Err(EngineError::BadPage {
                path: self.path().to_path_buf(),
                page,
            }),
        }
    }

    fn read(&self, page: u32) -> Result<PageRef<'_>> {
        let (frame, guard) = self.acquire::<Shared>(page)?;
        Ok(PageRef {
            cache: self,
            frame,
            guard: Some(guard),
            page,
        })
    }

    fn write(&self, page: u32) -> Result<PageMut<'_>> {
        let (frame, guard) = self.acquire::<Exclusive>(page)?;
        Ok(PageMut {
            cache: self,
            frame,
            guard: Some(guard),
            page,
            modified: false,
        })
    }

    fn create(&self, page: u32) -> Result<PageMut<'_>> {
        let (frame, guard) = self.acquire::<Created>(page)?;
        Ok(PageMut {
            cache: self,
            frame,
            guard: Some(guard),
            page,
            modified: true,
        })
    }

    /// The one lookup/latch/load loop behind `read`, `write` and `create` (`A` says which):
    /// the page's frame found or mapped and pinned ([`CacheInner::lookup`]), then latched, and
    /// read from the file if it was not resident; a stall (no free buffer) flushes and tries
    /// again, and so does a frame that changed page or lost its load while this waited for its
    /// latch. Returns the frame, pinned, and its latch.
    #[inline]
    fn acquire<A: Access>(&self, page: u32) -> Result<(usize, A::Guard<'_>)> {
        self.check_poisoned()?;
        let mut attempt = 0;
        loop {
            let lookup = self.lookup(page, A::CREATE);
            self.maybe_scavenge();
            let f = match lookup {
                Lookup::Stall => {
                    attempt += 1;
                    self.stall(attempt)?;
                    continue;
                }
                Lookup::Load(f) if !A::CREATE => {
                    let guard = self.load(f, page)?;
                    return Ok((f, A::loaded(guard)));
                }
                Lookup::Hit(f) | Lookup::Load(f) => f,
            };
            match A::latch(self, f, page) {
                Ok(Some(guard)) => return Ok((f, guard)),
                // Its loader failed, or the frame changed page: try again (after a failed
                // load, likely failing the same way and reporting it).
                Ok(None) => {
                    self.frames[f].pins.fetch_sub(1, Ordering::AcqRel);
                }
                Err(error) => {
                    self.frames[f].pins.fetch_sub(1, Ordering::AcqRel);
                    return Err(error);
                }
            }
        }
    }

    /// Reads `page` into frame `f` (just mapped to it by [`CacheInner::lookup`], pinned) under
    /// its exclusive latch, and marks the frame valid. On failure the frame is given up and
    /// unpinned.
    fn load(&self, f: usize, page: u32) -> Result<RwLockWriteGuard<'_, FrameData>> {
        let frame = &self.frames[f];
        let mut guard = frame.latch.write();
        match self.load_into(f, &mut guard, page) {
            Ok(()) => {
                frame.valid.store(true, Ordering::Release);
                Ok(guard)
            }
            Err(e) => {
                self.abandon(f, page);
                drop(guard);
                frame.pins.fetch_sub(1, Ordering::AcqRel);
                Err(e)
            }
        }
    }

    fn pin_if_valid(&self, page: u32) -> Option<usize> {
        let map = self.map.lock();
        let &f = map.table.get(&page)?;
        let frame = &self.frames[f];
        if !frame.valid.load(Ordering::Acquire) {
            return None;
        }
        frame.pins.fetch_add(1, Ordering::AcqRel);
        frame.referenced.store(true, Ordering::Relaxed);
        Some(f)
    }

    fn if_resident_write(&self, page: u32) -> Option<(usize, RwLockWriteGuard<'_, FrameData>)> {
        let f = self.pin_if_valid(page)?;
        let frame = &self.frames[f];
        let guard = frame.latch.write();
        if frame.valid.load(Ordering::Acquire) && frame.page.load(Ordering::Acquire) == page {
            self.counters.hits.fetch_add(1, Ordering::Relaxed);
            Some((f, guard))
        } else {
            drop(guard);
            frame.pins.fetch_sub(1, Ordering::AcqRel);
            None
        }
    }

    fn if_resident(&self, page: u32) -> Option<(usize, RwLockReadGuard<'_, FrameData>)> {
        let f = {
            let map = self.map.lock();
            let &f = map.table.get(&page)?;
            let frame = &self.frames[f];
            if !frame.valid.load(Ordering::Acquire) {
                return None;
            }
            frame.pins.fetch_add(1, Ordering::AcqRel);
            frame.referenced.store(true, Ordering::Relaxed);
            f
        };
        let frame = &self.frames[f];
        // A valid frame is latched exclusively only by a session changing it in memory, never
        // across an I/O, so waiting here is short.
        let guard = frame.latch.read();
        if frame.valid.load(Ordering::Acquire) && frame.page.load(Ordering::Acquire) == page {
            self.counters.hits.fetch_add(1, Ordering::Relaxed);
            Some((f, guard))
        } else {
            drop(guard);
            frame.pins.fetch_sub(1, Ordering::AcqRel);
            None
        }
    }

    fn prefetch(&self, pages: &[u32]) {
        if self.poisoned.load(Ordering::Acquire) {
            return;
        }
        let mut wanted: Vec<u32> = pages.to_vec();
        wanted.sort_unstable();
        wanted.dedup();
        let max_run = (MAX_IO_BYTES / self.config.page_size).max(1);
        let mut index = 0;
        while index < wanted.len() {
            // Map a run of adjacent non-resident pages to frames, latched exclusively.
            let mut run: Vec<(u32, usize)> = Vec::new();
            {
                let mut map = self.map.lock();
                while index < wanted.len() {
                    let page = wanted[index];
                    if let Some(&(last, _)) = run.last()
                        && (page != last + 1 || run.len() >= max_run)
                    {
                        break;
                    }
                    index += 1;
                    if map.table.contains_key(&page) {
                        if run.is_empty() {
                            continue;
                        }
                        break;
                    }
                    // Read-ahead never forces a stall: it only uses buffers that are free now.
                    if self.clean_pages() <= self.config.flush_start_clean_pages() {
                        index = wanted.len();
                        break;
                    }
                    let Some(f) = self.take_frame(&mut map) else {
                        index = wanted.len();
                        break;
                    };
                    let frame = &self.frames[f];
                    frame.page.store(page, Ordering::Release);
                    frame.pins.store(1, Ordering::Release);
                    frame.valid.store(false, Ordering::Release);
                    frame.referenced.store(false, Ordering::Relaxed);
                    map.table.insert(page, f);
                    run.push((page, f));
                }
            }
            let Some(&(first, _)) = run.first() else {
                continue;
            };
            let mut guards: Vec<RwLockWriteGuard<'_, FrameData>> = run
                .iter()
                .map(|&(_, f)| self.frames[f].latch.write())
                .collect();
            let ps = self.config.page_size;
            let mut buf = AlignedBuf::zeroed(ps * run.len());
            let offset = u64::from(first) * ps as u64;
            let read_ok = self.file.read_at(&mut buf, offset, IoClass::DbRead).is_ok();
            if read_ok {
                self.counters.read_ios.fetch_add(1, Ordering::Relaxed);
            }
            for (i, (&(page, f), guard)) in run.iter().zip(guards.iter_mut()).enumerate() {
                let frame = &self.frames[f];
                let mut ok = false;
                if read_ok && self.ensure_buffer(f, guard).is_ok() {
                    guard.framing_checked = false;
                    guard.buf.copy_from_slice(&buf[i * ps..(i + 1) * ps]);
                    ok = self.verify(&mut guard.buf, page).is_ok();
                    self.counters.pages_read.fetch_add(1, Ordering::Relaxed);
                    self.counters
                        .readahead_pages
                        .fetch_add(1, Ordering::Relaxed);
                }
                if ok {
                    frame.valid.store(true, Ordering::Release);
                } else {
                    self.abandon(f, page);
                }
            }
            drop(guards);
            for &(_, f) in &run {
                self.frames[f].pins.fetch_sub(1, Ordering::AcqRel);
            }
        }
    }

    /// One flush pass: writes dirty pages until `clean_goal` buffers are clean (or every dirty
    /// page was tried). Seeds are taken in clock order from the flush hand (a frame index),
    /// pages not referenced lately first: they are the ones eviction will want next, so hot
    /// pages stay dirty in memory and absorb more changes, as in ESE. Each seed is written
    /// together with the dirty pages adjacent to it on disk, up to 512 KiB in one I/O. The caller
    /// holds the flush lock, which owns the hand and the write buffer.
    fn flush_pass(&self, state: &mut FlushState, clean_goal: usize) -> Result<()> {
        self.flush_pass_filtered(state, clean_goal, None)
    }

    /// A flush pass whose seeds are only pages dirty since before `older_than`, if given. Its
    /// writes go out with up to `write_back_depth` in flight; the pass returns once every one
    /// of them completed (or failed), so after it no write of this pass is in flight.
    fn flush_pass_filtered(
        &self,
        state: &mut FlushState,
        clean_goal: usize,
        older_than: Option<u64>,
    ) -> Result<()> {
        self.check_poisoned()?;
        let issued = self.issue_pass(state, clean_goal, older_than);
        let drained = self.drain(state);
        issued.and(drained)
    }

    /// Waits for every write in flight and processes its completion. The first error is
    /// returned (the cache is poisoned by then); the other writes are still waited for.
    fn drain(&self, state: &mut FlushState) -> Result<()> {
        let Some(queue) = state.queue.as_mut() else {
            return Ok(());
        };
        let mut done: Vec<WriteCompletion> = Vec::new();
        queue.reap_all(&mut done);
        self.complete(state, done)
    }

    /// Processes the writes completed so far (with `wait`, at least one if any is in flight):
    /// each completed write's pages take their write counts in the flush map, then are marked
    /// clean if unchanged since their copy. A failed write poisons the cache.
    fn reap(&self, state: &mut FlushState, wait: bool) -> Result<()> {
        let Some(queue) = state.queue.as_mut() else {
            return Ok(());
        };
        let mut done: Vec<WriteCompletion> = Vec::new();
        queue.reap(wait, &mut done);
        self.complete(state, done)
    }

    /// Processes completed writes: see [`Self::reap`].
    fn complete(&self, state: &mut FlushState, done: Vec<WriteCompletion>) -> Result<()> {
        let mut first_error = None;
        for completion in done {
            let Some(write) = state.in_flight.remove(&completion.tag) else {
                continue;
            };
            state.in_flight_pages -= write.frames.len();
            if state.free_bufs.len() < self.config.write_back_depth.max(1) {
                state.free_bufs.push(completion.buf);
            }
            if let Err(e) = completion.result {
                for &(_, f) in &write.frames {
                    self.frames[f].writing.store(false, Ordering::Release);
                }
                // STYLE: after a failed write the instance stops rather than limping on.
                let e = EngineError::from(e);
                self.poison(&e);
                first_error.get_or_insert(e);
                continue;
            }
            self.counters.write_ios.fetch_add(1, Ordering::Relaxed);
            self.counters
                .pages_written
                .fetch_add(write.frames.len() as u64, Ordering::Relaxed);
            // The write completed: only now may the map hold its counts (a persist's snapshot
            // must never hold a count newer than what the storage acknowledged).
            if let Some(map) = &self.config.flush_map {
                for (&(page, _), &count) in write.frames.iter().zip(&write.counts) {
                    map.written(page, count);
                }
            }
            for (&(page, f), &version) in write.frames.iter().zip(&write.versions) {
                let frame = &self.frames[f];
                let was_writing = frame.writing.swap(false, Ordering::AcqRel);
                // Invariant: the frame of a completed write was marked as written from the issue
                // until now; if not, two writes of one page were in flight at once and the older
                // could land last.
                debug_assert!(
                    was_writing,
                    "page {page}: a completed write's frame was not writing"
                );
                // Never wait for a latch here: its holder may be a session waiting for this very
                // flush (a stall). A page we cannot latch stays dirty and is written again later.
                let Some(_guard) = frame.latch.try_read() else {
                    continue;
                };
                if frame.page.load(Ordering::Acquire) == page
                    && frame.version.load(Ordering::Acquire) == version
                    && frame.dirty.swap(false, Ordering::AcqRel)
                {
                    let before = self.dirty_count.fetch_sub(1, Ordering::AcqRel);
                    // Invariant: the dirty count never underflows (each frame counts once, from
                    // its first change to the write that cleans it); a wrap would make the
                    // cache's clean-buffer figure and its flush thresholds wrong.
                    debug_assert!(before > 0, "the dirty page count underflowed");
                }
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// A buffer of at least `bytes` for a write: a completed write's, or a new one (whole
    /// powers of two of pages, so that buffers are reused across run lengths).
    fn take_buffer(&self, state: &mut FlushState, bytes: usize) -> AlignedBuf {
        if let Some(i) = state.free_bufs.iter().position(|b| b.len() >= bytes) {
            return state.free_bufs.swap_remove(i);
        }
        let ps = self.config.page_size;
        let pages = bytes.div_ceil(ps).next_power_of_two();
        // Kept and reused write after write: registered with io_uring where it is in use, so
        // that no write pins its pages (`jetproof_io::fixed`).
        AlignedBuf::zeroed_registered((pages * ps).min(MAX_IO_BYTES.max(ps)).max(bytes))
    }

    /// The next seed of a flush pass, walking the frames in clock order from `state.hand`'s
    /// position at the pass's start (`walk` counts the frames walked): first every dirty frame
    /// whose reference bit is clear, as it is met; then, once the walk has gone round, the
    /// referenced ones it met, in the order it met them. Only frames first dirtied before
    /// `older_than` when given; frames whose page is already in one of the pass's runs are
    /// skipped. `(page, frame)`, read without the map's mutex: the run's pages are checked again
    /// under their latches.
    fn next_seed(
        &self,
        scratch: &mut PassScratch,
        start: usize,
        allocated: usize,
        older_than: Option<u64>,
    ) -> Option<(u32, usize)> {
        while scratch.walk < allocated {
            let f = (start + scratch.walk) % allocated;
            scratch.walk += 1;
            let frame = &self.frames[f];
            let page = frame.page.load(Ordering::Acquire);
            if page == NO_PAGE || !frame.dirty.load(Ordering::Acquire) {
                continue;
            }
            let old_enough = older_than
                .is_none_or(|limit| frame.first_dirty_log_position.load(Ordering::Acquire) < limit);
            if !old_enough || scratch.is_taken(f) {
                continue;
            }
            if frame.referenced.load(Ordering::Relaxed) {
                scratch.referenced.push((page, f));
                continue;
            }
            return Some((page, f));
        }
        while scratch.next_referenced < scratch.referenced.len() {
            let (page, f) = scratch.referenced[scratch.next_referenced];
            scratch.next_referenced += 1;
            if !scratch.is_taken(f) {
                return Some((page, f));
            }
        }
        None
    }

    /// A run around a seed: the seed and the dirty resident pages adjacent to it not yet in one
    /// of the pass's runs, forwards first, then backwards, at most `max_run` pages, in page
    /// order, `(page, frame)` (one look-up in the page table under the map's mutex per page);
    /// returns the seed's index in it.
    fn run_around(
        &self,
        scratch: &PassScratch,
        seed: (u32, usize),
        max_run: usize,
        run: &mut Vec<(u32, usize)>,
    ) -> usize {
        run.clear();
        let map = self.map.lock();
        let dirty_frame = |page: u32| -> Option<usize> {
            let &f = map.table.get(&page)?;
            let frame = &self.frames[f];
            (!scratch.is_taken(f)
                && frame.page.load(Ordering::Acquire) == page
                && frame.dirty.load(Ordering::Acquire))
            .then_some(f)
        };
        let mut forward = Vec::new();
        let mut page = seed.0;
        while 1 + forward.len() < max_run
            && let Some(next) = page.checked_add(1)
            && next != NO_PAGE
            && let Some(f) = dirty_frame(next)
        {
            forward.push((next, f));
            page = next;
        }
        page = seed.0;
        while 1 + forward.len() + run.len() < max_run
            && let Some(previous) = page.checked_sub(1)
            && let Some(f) = dirty_frame(previous)
        {
            run.push((previous, f));
            page = previous;
        }
        drop(map);
        run.reverse();
        let seed_at = run.len();
        run.push(seed);
        run.extend(forward);
        seed_at
    }

    /// Issues a flush pass's writes (see [`CacheInner::flush_pass_filtered`]); the caller
    /// drains them.
    ///
    /// Seeds come in clock order from the flush hand, unreferenced frames first
    /// ([`CacheInner::next_seed`]), each grown into a run of adjacent dirty pages
    /// ([`CacheInner::run_around`]); the pass stops once the clean buffers and the pages in
    /// flight reach `clean_goal`. Its cost is the frames walked to the seeds it writes and a
    /// page-table look-up per page of a run, not a scan and sort of the whole cache: passes
    /// come about once per write (`docs/design.md`, "Write-back"), and until 2026-12-07 every
    /// pass collected and sorted every dirty frame first (`docs/journal/2026-12-07-flush-pass.md`).
    fn issue_pass(
        &self,
        state: &mut FlushState,
        clean_goal: usize,
        older_than: Option<u64>,
    ) -> Result<()> {
        if state.queue.is_none() {
            let queue =
                open_write_queue(&self.file, self.config.write_back_depth, IoClass::DbWrite)
                    .map_err(EngineError::from)?;
            state.queue = Some(queue);
        }
        self.counters.flushes.fetch_add(1, Ordering::Relaxed);
        let allocated = self.map.lock().allocated.max(1).min(self.frames.len());
        let start = state.hand as usize % allocated;
        let mut scratch = std::mem::take(&mut state.scratch);
        scratch.walk = 0;
        scratch.next_referenced = 0;
        scratch.referenced.clear();
        scratch.pass = scratch.pass.wrapping_add(1).max(1);
        if scratch.pass == 1 {
            // First pass, or the number wrapped: no frame may look taken by an old pass.
            scratch.taken.clear();
        }
        scratch.taken.resize(self.frames.len(), 0);
        let result = self.issue_runs(
            state,
            &mut scratch,
            clean_goal,
            older_than,
            start,
            allocated,
        );
        state.scratch = scratch;
        result
    }

    fn issue_runs(
        &self,
        state: &mut FlushState,
        scratch: &mut PassScratch,
        clean_goal: usize,
        older_than: Option<u64>,
        start: usize,
        allocated: usize,
    ) -> Result<()> {
        let max_run = (MAX_IO_BYTES / self.config.page_size).max(1);
        let ps = self.config.page_size;
        let mut candidates: Vec<(u32, usize)> = Vec::new();
        while let Some(seed) = self.next_seed(scratch, start, allocated, older_than) {
            // A free place in the queue (completions processed meanwhile mark pages clean),
            // waited for before any latch of the next run is taken.
            while state
                .queue
                .as_ref()
                .is_some_and(|q| q.in_flight() >= q.depth())
            {
                self.reap(state, true)?;
            }
            // Pages in flight will be clean once written: do not write more than the goal needs.
            if self.clean_pages() + state.in_flight_pages >= clean_goal {
                break;
            }
            state.hand = (seed.1 + 1) as u32;
            let seed_at = self.run_around(scratch, seed, max_run, &mut candidates);
            // Latch what can be latched right now; keep the contiguous part around the seed.
            let mut guards: Vec<Option<RwLockReadGuard<'_, FrameData>>> = candidates
                .iter()
                .map(|&(page, f)| {
                    let frame = &self.frames[f];
                    let guard = frame.latch.try_read()?;
                    (frame.page.load(Ordering::Acquire) == page
                        && frame.dirty.load(Ordering::Acquire)
                        && !frame.writing.load(Ordering::Acquire))
                    .then_some(guard)
                })
                .collect();
            for &(_, f) in &candidates {
                scratch.take(f);
            }
            if guards[seed_at].is_none() {
                continue;
            }
            let mut first = seed_at;
            while first > 0 && guards[first - 1].is_some() {
                first -= 1;
            }
            let mut last = seed_at;
            while last + 1 < guards.len() && guards[last + 1].is_some() {
                last += 1;
            }
            let run: Vec<(u32, usize, RwLockReadGuard<'_, FrameData>)> = guards
                .drain(first..=last)
                .zip(&candidates[first..=last])
                .filter_map(|(guard, &(page, f))| guard.map(|g| (page, f, g)))
                .collect();
            drop(guards);
            let Some(first_page) = run.first().map(|(page, _, _)| *page) else {
                continue;
            };
            // The flush map's bound on how far a page may run ahead of its persisted count
            // (`flushmap::MAX_WRITES_BETWEEN_PERSISTS`): persist before writing on.
            if let Some(map) = &self.config.flush_map
                && map.needs_persist()
                && let Err(e) = map.persist(self.file.as_ref(), None)
            {
                self.poison(&e);
                return Err(e);
            }
            // Every byte of the write is a page copied in below: a reused buffer is not zeroed.
            let len = ps * run.len();
            let mut write_buf = self.take_buffer(state, len);
            let buf = &mut write_buf[..len];
            let mut versions = Vec::with_capacity(run.len());
            let mut counts = Vec::with_capacity(run.len());
            let mut max_log_position = 0u64;
            for (i, (page, f, guard)) in run.iter().enumerate() {
                let slot = &mut buf[i * ps..(i + 1) * ps];
                slot.copy_from_slice(&guard.buf);
                if let Some(map) = &self.config.flush_map {
                    counts.push(map.stamp_for_write(*page, slot));
                }
                checksum::seal(slot);
                // Invariant: the copy written names the page it is written to (the seal folds
                // that number into the checksums); under another number it reads back as damaged.
                // (The number only: the whole seal's verification would be one more CRC pass
                // per page write in debug builds.)
                debug_assert_eq!(
                    checksum::stored_page_number(slot),
                    Some(*page),
                    "page {page} is written under another page number"
                );
                versions.push(self.frames[*f].version.load(Ordering::Acquire));
                max_log_position = max_log_position.max(page::log_position(slot).unwrap_or(0));
            }
            let frames: Vec<(u32, usize)> = run.iter().map(|(p, f, _)| (*p, *f)).collect();
            drop(run);
            // Invariant: a run is consecutive pages, since one write at the first page's offset
            // carries them all; a gap would put every later page of the run at a wrong place.
            debug_assert!(
                frames.windows(2).all(|w| w[1].0 == w[0].0 + 1),
                "a write run of pages {frames:?} is not consecutive"
            );
            let gate = self.gate.read().clone();
            let page_numbers: Vec<u32> = frames.iter().map(|&(page, _)| page).collect();
            let needed = match gate.before_write(&page_numbers, max_log_position) {
                Ok(needed) => needed.max(max_log_position),
                Err(e) => {
                    self.poison(&e);
                    return Err(e);
                }
            };
            if !gate.is_durable(needed)
                && let Err(e) = gate.ensure_durable(needed)
            {
                self.poison(&e);
                return Err(e);
            }
            // Invariant (the write-ahead rule): the log is durable up to the newest change of
            // every page in the write, and past the before images logged for it; a page on disk
            // ahead of the durable log holds a change that recovery can neither redo nor undo.
            debug_assert!(
                gate.is_durable(needed),
                "pages {page_numbers:?} written before the log is durable to {needed}"
            );
            let offset = u64::from(first_page) * ps as u64;
            for &(page, f) in &frames {
                let was_writing = self.frames[f].writing.swap(true, Ordering::AcqRel);
                // Invariant: at most one write per page in flight (runs take only frames not
                // writing, under their latches); two could complete out of order and leave the
                // older copy on disk.
                debug_assert!(!was_writing, "page {page} has a second write in flight");
            }
            let tag = state.next_tag;
            state.next_tag = state.next_tag.wrapping_add(1);
            state.in_flight_pages += frames.len();
            state.in_flight.insert(
                tag,
                InFlightWrite {
                    frames,
                    versions,
                    counts,
                },
            );
            if let Some(queue) = state.queue.as_mut() {
                queue.submit(WriteRequest {
                    tag,
                    offset,
                    buf: write_buf,
                    len,
                });
            }
            // Whatever completed meanwhile, processed at once: its pages are clean sooner.
            self.reap(state, false)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::path::Path;
    use std::sync::atomic::Ordering;

    use jetproof_io::mem::MemBackend;
    use jetproof_io::{IoBackend, IoClass, IoFile, OpenOptions};

    use super::{CacheConfig, DEFAULT_WRITE_BACK_DEPTH, PageCache};

    fn frame_of(cache: &PageCache, page: u32) -> usize {
        *cache.inner.map.lock().table.get(&page).unwrap()
    }

    /// The pages of `pages` whose copy in the file carries the stamp the test gave it in memory
    /// (page + 1): the ones written so far.
    fn on_disk(file: &dyn IoFile, page_size: usize, pages: &[u32]) -> Vec<u32> {
        let mut buf = vec![0u8; page_size];
        pages
            .iter()
            .copied()
            .filter(|&page| {
                file.read_at(
                    &mut buf,
                    u64::from(page) * page_size as u64,
                    IoClass::DbRead,
                )
                .unwrap();
                crate::page::update_stamp(&buf) == Some(u64::from(page) + 1)
            })
            .collect()
    }

    /// A flush pass seeds its runs in clock order from the flush hand, the frames whose
    /// reference bit is clear first, grows each seed into a run of the adjacent dirty pages on
    /// both sides, and stops at its goal; the next pass goes on from where the hand was left.
    /// Each pass here has a goal of one more clean page than there are: it writes one run.
    #[test]
    fn a_pass_seeds_cold_frames_first_in_clock_order_and_grows_runs_both_ways() {
        let page_size = 4096;
        let file = MemBackend::new()
            .open(Path::new("/c/db.jpdb"), &OpenOptions::create().buffered())
            .unwrap();
        crate::space::format_range(file.as_ref(), page_size, 0, 200).unwrap();
        let cache = PageCache::new(
            file.clone(),
            CacheConfig {
                page_size,
                min_pages: 16,
                max_pages: 64,
                flush_thread: false,
                flush_map: None,
                write_back_depth: DEFAULT_WRITE_BACK_DEPTH,
            },
        )
        .unwrap();
        let pages = [10u32, 20, 30, 39, 40, 41, 50, 60];
        for page in pages {
            cache.write(page).unwrap().stamp(u64::from(page) + 1, 0);
        }
        // Cold (reference bit clear): 40 and 20. The hand starts at 30's frame.
        for page in pages {
            cache.inner.frames[frame_of(&cache, page)]
                .referenced
                .store(page != 40 && page != 20, Ordering::Relaxed);
        }
        let clock: Vec<usize> = pages.iter().map(|&p| frame_of(&cache, p)).collect();
        let mut state = cache.inner.flush_lock.lock();
        state.hand = frame_of(&cache, 30) as u32;
        let mut pass = || {
            let goal = cache.inner.clean_pages() + 1;
            cache.inner.flush_pass(&mut state, goal).unwrap();
            on_disk(file.as_ref(), page_size, &pages)
        };
        // 40 first, with its neighbours on both sides in the same run; then 20.
        assert_eq!(pass(), vec![39, 40, 41], "frames in clock order: {clock:?}");
        assert_eq!(pass(), vec![20, 39, 40, 41], "frames: {clock:?}");
        // Then the referenced ones in clock order from after 20's frame: with frames taken in
        // the order the pages were dirtied, 30, 50, 60 and, round the clock, 10.
        let hand = frame_of(&cache, 20);
        let mut referenced: Vec<(usize, u32)> = [10u32, 30, 50, 60]
            .iter()
            .map(|&p| (frame_of(&cache, p), p))
            .collect();
        referenced.sort_by_key(|&(f, _)| (f <= hand, f));
        let mut expected = vec![20, 39, 40, 41];
        for (_, page) in referenced {
            expected.push(page);
            expected.sort_unstable();
            assert_eq!(pass(), expected, "frames: {clock:?}");
        }
        assert_eq!(cache.inner.dirty_count.load(Ordering::Acquire), 0);
    }
}
