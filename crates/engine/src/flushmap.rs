//! The flush map: for every page, the count of its last write, kept beside the database so that a
//! page read back older than its last write (a **lost write**: the storage acknowledged a write,
//! and later returned older data) is detected, as ESE's flush map (`.jfm`, since Exchange 2013)
//! does. `docs/design.md`, "Lost-write detection", is the reference; the decisions in brief:
//!
//! * Every page write by the cache (and by recovery, the bulk loader) stamps the page's **write
//!   count** (u16, page header bytes 38..40) into the sealed copy: the map's count plus one. When
//!   the write has completed, the map holds that count. A page read back must carry the map's
//!   count; one that carries an older count lost a write (`Behind`), one that carries a newer
//!   count was written behind the map's back (`Ahead`).
//! * Counts wrap; they are compared in modular arithmetic over half the range (32,768). The
//!   map is persisted at least every [`MAX_WRITES_BETWEEN_PERSISTS`] page writes (of any page),
//!   so a page's count on disk is never more than that many writes ahead of its persisted count,
//!   and "ahead" and "behind" are never confused.
//! * The persisted map is a **snapshot**: its dirty map pages are copied first, then the database
//!   file is synced, then the copies are written to the map file, synced, and only then its
//!   header (the commit) is written and synced. Every count in a committed snapshot is therefore
//!   the count of a write that is durable: a page on disk is never legitimately behind the
//!   persisted map, even after a crash. It may be ahead (written after the snapshot); the
//!   snapshot names the checkpoint it pairs with, the instance never writes a checkpoint past it,
//!   so every page written after the snapshot has a log record at or after the checkpoint, and
//!   recovery reads it (and accepts it being ahead). Pages recovery does not read were not
//!   written after the snapshot, so for them the map is exact.
//! * Two slots per map page and two header copies, used alternately by the parity of the
//!   persist's sequence number: a crash in the middle of a persist leaves the previous snapshot
//!   whole (each slot is rewritten only when the other holds the committed snapshot). The slots
//!   of one parity lie side by side in chunks of [`CHUNK_MAP_PAGES`], so a persist writes runs
//!   of changed map pages in writes of up to 512 KiB.
//! * The bound on how far a page may run ahead of its persisted count is kept per map page: a
//!   persist is due once [`MAX_WRITES_BETWEEN_PERSISTS`] writes have landed in the range of one
//!   map page since the last snapshot (the instance persists far more often than that, with each
//!   checkpoint it writes; this bound is for correctness, not cadence).
//! * An entry may be **unknown** (a map created for an existing database whose map was missing,
//!   or a range the persisted map did not cover): it is not checked, and is learnt from the page
//!   the first time the page is read or written.
//!
//! Map file layout (block = 4 KiB, little-endian):
//!
//! | block | holds |
//! | ---: | --- |
//! | 0, 1 | header copies (the one of the committed sequence's parity is current) |
//! | 2 + 256 c + 128 s + j | map page 128 c + j, slot s (s = persist sequence mod 2) |
//!
//! Header (in a block): 0..4 CRC-32C of bytes 4..128; 4 magic `JPFLUSHM`; 12 version (1);
//! 16 block size; 20 entries per map page; 24 database id (u128); 40 database creation time
//! (ns); 48 committed sequence; 56 database pages covered; 64 checkpoint (the log position the
//! snapshot pairs with, `Lsn::to_u64`); 72 state (1 running, 2 clean); 80 the database's next
//! update stamp at the clean close; 88 the database header's sequence after the clean close;
//! 96 persist time (Unix ms); 104..128 zero.
//!
//! Map page slot: 0..4 CRC-32C of bytes 4..4096 followed by the block number (u64, not stored);
//! 4 map page index (u32); 8 the sequence of the persist that wrote it; 16..24 zero; 24..263
//! known bits (entry j: bit j % 8 of byte 24 + j / 8); 264..4088 counts (u16 × 1,912).
//!
//! This module parses bytes read from disk: it denies `indexing_slicing` and reads only through
//! checked accessors.
#![deny(clippy::indexing_slicing, clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU16, AtomicU32, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use jetproof_io::bytes::{u16_at, u32_at, u64_at, u128_at};
use jetproof_io::meter::{InstanceStats, MeteredFile};
use jetproof_io::{AlignedBuf, IoBackend, IoClass, IoFile, OpenOptions};
use parking_lot::{Mutex, RwLock};

use crate::error::{EngineError, Result};
use crate::page;

/// The map file's block size: its header copies and map page slots are this long.
pub const BLOCK_BYTES: usize = 4096;

/// Database pages described by one map page.
pub const ENTRIES_PER_MAP_PAGE: usize = 1912;

/// The map is persisted before more page writes than this have landed in one map page's range
/// since the last snapshot (half the count's range, with a margin): see the module header.
pub const MAX_WRITES_BETWEEN_PERSISTS: u32 = 16_384;

/// Map pages per chunk: the slots of one parity of a chunk are adjacent on disk.
pub const CHUNK_MAP_PAGES: usize = 128;

/// Format version of the map file.
pub const FORMAT_VERSION: u32 = 1;

const MAGIC: &[u8; 8] = b"JPFLUSHM";
const HEADER_BLOCKS: u64 = 2;

/// The block holding map page `index`'s slot `slot`.
fn slot_block(index: usize, slot: u8) -> u64 {
    let chunk = (index / CHUNK_MAP_PAGES) as u64;
    let within = (index % CHUNK_MAP_PAGES) as u64;
    HEADER_BLOCKS
        + chunk * 2 * CHUNK_MAP_PAGES as u64
        + u64::from(slot) * CHUNK_MAP_PAGES as u64
        + within
}
/// Bytes at the end of a map file that the map did not write: a part block, and the whole
/// blocks after the last one that is a header copy, a sealed slot (its checksum over its block
/// number matches) or zeros (a slot never written). No reader looks at them, so only
/// `jetproof checksum` can report them (appended by something else). Reads the file.
pub fn appended_bytes(file: &dyn IoFile) -> Result<u64> {
    let size = file.size()?;
    let whole = size / BLOCK_BYTES as u64 * BLOCK_BYTES as u64;
    let mut bytes = AlignedBuf::zeroed(usize::try_from(whole).unwrap_or(usize::MAX));
    if whole > 0 {
        file.read_at(&mut bytes, 0, IoClass::FlushMap)?;
    }
    let ours = bytes
        .chunks_exact(BLOCK_BYTES)
        .enumerate()
        .rposition(|(index, block)| {
            index < HEADER_BLOCKS as usize
                || block.iter().all(|&b| b == 0)
                || u32_at(block, 0) == Some(slot_checksum(block, index as u64))
        })
        .map_or(0, |last| (last as u64 + 1) * BLOCK_BYTES as u64);
    Ok(size - ours)
}

const HEADER_CRC_END: usize = 128;
const SLOT_KNOWN_AT: usize = 24;
const SLOT_COUNTS_AT: usize = 264;
const KNOWN_BYTES: usize = ENTRIES_PER_MAP_PAGE.div_ceil(8);
// The slot layout: known bits, then the counts, inside one block.
const _: () = assert!(
    SLOT_KNOWN_AT + KNOWN_BYTES <= SLOT_COUNTS_AT
        && SLOT_COUNTS_AT + 2 * ENTRIES_PER_MAP_PAGE <= BLOCK_BYTES
);

const STATE_RUNNING: u8 = 1;
const STATE_CLEAN: u8 = 2;

/// The flush map file of the database at `database_path`: the database's file name with
/// `.jpfm` appended (appended rather than replacing the extension, so that two databases can
/// never share a map whatever their names).
pub fn flush_map_path(database_path: &Path) -> PathBuf {
    let mut name = database_path.as_os_str().to_owned();
    name.push(".jpfm");
    PathBuf::from(name)
}

/// A page's write count as stored in its header (bytes 38..40).
pub fn page_write_count(page_bytes: &[u8]) -> Option<u16> {
    u16_at(page_bytes, page::OFFSET_WRITE_COUNT)
}

/// Stores a write count in a page's header (before it is sealed).
pub fn set_page_write_count(page_bytes: &mut [u8], count: u16) {
    page::put_u16(page_bytes, page::OFFSET_WRITE_COUNT, count);
}

/// How a page's count on disk compares with the map's.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Compare {
    Equal,
    /// The page carries a count this many writes newer than the map's.
    Ahead(u16),
    /// The page carries a count this many writes older than the map's: it lost a write.
    Behind(u16),
}

/// Compares two wrapping counts over half their range.
pub fn compare(on_disk: u16, expected: u16) -> Compare {
    let ahead = on_disk.wrapping_sub(expected);
    if ahead == 0 {
        Compare::Equal
    } else if ahead < 0x8000 {
        Compare::Ahead(ahead)
    } else {
        Compare::Behind(expected.wrapping_sub(on_disk))
    }
}

/// What a read of a page found, checked against the map.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum ReadCheck {
    /// The counts agree.
    Match,
    /// The map did not know the page; it does now.
    Learnt,
    /// The page is older than its last write: a lost write.
    Behind { expected: u16, found: u16 },
    /// The page is newer than the map's last write.
    Ahead { expected: u16, found: u16 },
}

/// Which database a map belongs to (from the database header).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct MapIdentity {
    pub database_id: u128,
    pub created_unix_ns: u64,
}

/// How the committed snapshot was left.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum MapState {
    /// Persisted while the database was open (or by recovery).
    Running,
    /// Persisted at a clean close: `stamp` is the database's next update stamp then, and
    /// `header_sequence` the database header's sequence after the close.
    Clean { stamp: u64, header_sequence: u64 },
}

/// What loading a map file found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MapLoad {
    pub state: MapState,
    /// The committed persist's sequence number.
    pub sequence: u64,
    /// The log position (`Lsn::to_u64`) the snapshot pairs with: a checkpoint written after it
    /// is never past it.
    pub checkpoint: u64,
    /// Database pages the snapshot describes (pages past it are unknown).
    pub pages_covered: u64,
    /// Map pages whose committed slot failed its checks: their entries are unknown.
    pub damaged_map_pages: Vec<u32>,
}

/// Why a map file could not be used at all.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MapFileError {
    #[error("shorter than its two header blocks ({size_bytes} bytes)")]
    Truncated { size_bytes: u64 },
    #[error("not a jetproof flush map (no `JPFLUSHM` signature in either header copy)")]
    NotAFlushMap,
    #[error("both header copies are damaged")]
    BothHeadersDamaged,
    #[error("format version {found}; this build reads version {FORMAT_VERSION}")]
    UnsupportedVersion { found: u32 },
    #[error("it belongs to another database (its identity differs from the database header's)")]
    WrongDatabase,
}

/// The in-memory table: a count and a known bit per database page, and per map page which of
/// the two slots still lacks its latest content.
#[derive(Debug, Default)]
struct Table {
    counts: Vec<AtomicU16>,
    known: Vec<AtomicU8>,
    /// Bit s set: slot s of this map page is older than the table.
    dirty: Vec<AtomicU8>,
    /// Page writes recorded in this map page's range since the last snapshot.
    writes: Vec<AtomicU32>,
}

impl Table {
    fn len(&self) -> u64 {
        self.counts.len() as u64
    }

    fn grow(&mut self, pages: u64, known: bool) {
        let Ok(pages) = usize::try_from(pages) else {
            return;
        };
        let old = self.counts.len();
        if pages <= old {
            return;
        }
        self.counts.resize_with(pages, || AtomicU16::new(0));
        self.known
            .resize_with(pages.div_ceil(8), || AtomicU8::new(0));
        if known {
            for page in old..pages {
                self.set_known(page);
            }
        }
        let map_pages = pages.div_ceil(ENTRIES_PER_MAP_PAGE);
        self.dirty.resize_with(map_pages, || AtomicU8::new(0));
        self.writes.resize_with(map_pages, || AtomicU32::new(0));
        for map_page in old / ENTRIES_PER_MAP_PAGE..map_pages {
            if let Some(flags) = self.dirty.get(map_page) {
                flags.store(0b11, Ordering::Release);
            }
        }
    }

    fn is_known(&self, page: usize) -> bool {
        self.known
            .get(page / 8)
            .is_some_and(|bits| bits.load(Ordering::Acquire) & (1 << (page % 8)) != 0)
    }

    fn set_known(&self, page: usize) {
        if let Some(bits) = self.known.get(page / 8) {
            bits.fetch_or(1 << (page % 8), Ordering::AcqRel);
        }
    }

    fn mark_dirty(&self, page: usize) {
        if let Some(flags) = self.dirty.get(page / ENTRIES_PER_MAP_PAGE) {
            // Read first: most writes find the map page already dirty, and a plain load keeps
            // the cache line shared.
            // SeqCst, paired with the snapshot's `fetch_and` then count load in `commit`: either
            // the snapshot sees this count, or this sees the bit cleared and sets it again.
            if flags.load(Ordering::SeqCst) != 0b11 {
                flags.store(0b11, Ordering::SeqCst);
            }
        }
    }

    fn set(&self, page: usize, count: u16) {
        if let Some(entry) = self.counts.get(page) {
            entry.store(count, Ordering::SeqCst);
            self.set_known(page);
            self.mark_dirty(page);
        }
    }

    fn get(&self, page: usize) -> Option<u16> {
        if !self.is_known(page) {
            return None;
        }
        self.counts.get(page).map(|c| c.load(Ordering::Acquire))
    }

    /// Encodes map page `index` into a slot image (without its checksum).
    fn encode(&self, index: usize, sequence: u64, out: &mut [u8]) {
        out.fill(0);
        put_u32(out, 4, index as u32);
        put_u64(out, 8, sequence);
        let first = index * ENTRIES_PER_MAP_PAGE;
        for j in 0..ENTRIES_PER_MAP_PAGE {
            let page = first + j;
            if page >= self.counts.len() {
                break;
            }
            if self.is_known(page) {
                if let Some(byte) = out.get_mut(SLOT_KNOWN_AT + j / 8) {
                    *byte |= 1 << (j % 8);
                }
                let count = self
                    .counts
                    .get(page)
                    .map_or(0, |c| c.load(Ordering::SeqCst));
                put_u16(out, SLOT_COUNTS_AT + 2 * j, count);
            }
        }
    }

    /// Takes map page `index`'s entries from a slot image.
    fn decode(&self, index: usize, slot: &[u8], pages_covered: u64) {
        let first = index * ENTRIES_PER_MAP_PAGE;
        for j in 0..ENTRIES_PER_MAP_PAGE {
            let page = first + j;
            if page as u64 >= pages_covered || page >= self.counts.len() {
                break;
            }
            let known = slot
                .get(SLOT_KNOWN_AT + j / 8)
                .is_some_and(|byte| byte & (1 << (j % 8)) != 0);
            if known && let Some(count) = u16_at(slot, SLOT_COUNTS_AT + 2 * j) {
                if let Some(entry) = self.counts.get(page) {
                    entry.store(count, Ordering::Release);
                }
                self.set_known(page);
            }
        }
    }
}

/// The open map file and what its committed header says.
#[derive(Debug)]
struct Store {
    file: Arc<dyn IoFile>,
    identity: MapIdentity,
    /// The last committed persist.
    sequence: u64,
    checkpoint: u64,
    /// Persists done by this process (for tests and reports).
    persists: u64,
}

/// A database's flush map. Shared by the cache (which checks reads and records writes) and the
/// database (which persists it). All methods take `&self`.
#[derive(Debug)]
pub struct FlushMap {
    path: PathBuf,
    table: RwLock<Table>,
    /// A map page's range reached [`MAX_WRITES_BETWEEN_PERSISTS`] writes since the snapshot.
    persist_due: AtomicBool,
    store: Mutex<Store>,
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis().min(u128::from(u64::MAX)) as u64)
}

fn map_error(path: &Path, what: impl Into<String>) -> EngineError {
    EngineError::FlushMap {
        path: path.to_path_buf(),
        what: what.into(),
    }
}

fn open_file(
    backend: &dyn IoBackend,
    path: &Path,
    options: &OpenOptions,
    stats: Option<&Arc<InstanceStats>>,
) -> Result<Arc<dyn IoFile>> {
    let file = backend.open(path, options)?;
    Ok(match stats {
        Some(stats) => MeteredFile::wrap(file, stats.clone()),
        None => file,
    })
}

impl FlushMap {
    /// Creates the map file of a new database whose `page_count` pages were all just formatted
    /// (write count 0, known), and commits it. A file already at `path` is replaced only if it
    /// is a jetproof flush map (its signature); anything else is refused.
    pub fn create(
        backend: &dyn IoBackend,
        path: &Path,
        identity: MapIdentity,
        page_count: u64,
        direct_io: bool,
        stats: Option<&Arc<InstanceStats>>,
    ) -> Result<FlushMap> {
        Self::create_with(backend, path, identity, page_count, true, direct_io, stats)
    }

    /// Creates a map for an existing database whose map is missing: every entry unknown (learnt
    /// from each page as it is read or written), committed at once so a crash finds it.
    pub fn create_unknown(
        backend: &dyn IoBackend,
        path: &Path,
        identity: MapIdentity,
        page_count: u64,
        direct_io: bool,
        stats: Option<&Arc<InstanceStats>>,
    ) -> Result<FlushMap> {
        Self::create_with(backend, path, identity, page_count, false, direct_io, stats)
    }

    fn create_with(
        backend: &dyn IoBackend,
        path: &Path,
        identity: MapIdentity,
        page_count: u64,
        known: bool,
        direct_io: bool,
        stats: Option<&Arc<InstanceStats>>,
    ) -> Result<FlushMap> {
        if backend.exists(path) {
            let existing = open_file(
                backend,
                path,
                &OpenOptions::read_only().with_direct(direct_io).no_follow(),
                None,
            )?;
            if !is_flush_map(existing.as_ref()) {
                return Err(map_error(
                    path,
                    "a file that is not a jetproof flush map is in the way; move it elsewhere",
                ));
            }
            drop(existing);
            backend.remove(path)?;
        }
        let file = open_file(
            backend,
            path,
            &OpenOptions::create_new().with_direct(direct_io),
            stats,
        )?;
        let mut table = Table::default();
        table.grow(page_count, known);
        let map = FlushMap {
            path: path.to_path_buf(),
            table: RwLock::new(table),
            persist_due: AtomicBool::new(false),
            store: Mutex::new(Store {
                file,
                identity,
                sequence: 0,
                checkpoint: 0,
                persists: 0,
            }),
        };
        // Both slots of every map page and both header copies, so that either parity is whole
        // from the start.
        map.commit(None, 0, MapState::Running)?;
        map.commit(None, 0, MapState::Running)?;
        if let Some(dir) = path.parent() {
            backend.sync_dir(dir)?;
        }
        Ok(map)
    }

    /// Opens the map file at `path` for the database of `identity` with `page_count` pages, and
    /// loads its committed snapshot. Damaged map pages are reported in [`MapLoad`] (their
    /// entries stay unknown); a file that cannot be used at all is [`EngineError::FlushMap`].
    pub fn open(
        backend: &dyn IoBackend,
        path: &Path,
        identity: MapIdentity,
        page_count: u64,
        direct_io: bool,
        writable: bool,
        stats: Option<&Arc<InstanceStats>>,
    ) -> Result<(FlushMap, MapLoad)> {
        let options = if writable {
            OpenOptions::read_write()
        } else {
            OpenOptions::read_only()
        }
        .with_direct(direct_io)
        .no_follow();
        let file = open_file(backend, path, &options, stats)?;
        let (table, load) = read_map(file.as_ref(), path, identity, page_count)?;
        let map = FlushMap {
            path: path.to_path_buf(),
            table: RwLock::new(table),
            persist_due: AtomicBool::new(false),
            store: Mutex::new(Store {
                file,
                identity,
                sequence: load.sequence,
                checkpoint: load.checkpoint,
                persists: 0,
            }),
        };
        Ok((map, load))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Database pages the map describes.
    pub fn page_count(&self) -> u64 {
        self.table.read().len()
    }

    /// The database grew to `page_count` pages, newly formatted (write count 0).
    pub fn grow(&self, page_count: u64) {
        if page_count > self.table.read().len() {
            self.table.write().grow(page_count, true);
        }
    }

    /// The count the page's last completed write carried, if known.
    pub fn expected(&self, page: u32) -> Option<u16> {
        self.table.read().get(page as usize)
    }

    /// Checks a page just read (its checksum verified) against the map; an unknown entry is
    /// learnt from it.
    pub fn check_read(&self, page: u32, page_bytes: &[u8]) -> ReadCheck {
        let found = page_write_count(page_bytes).unwrap_or(0);
        let table = self.table.read();
        match table.get(page as usize) {
            None => {
                table.set(page as usize, found);
                ReadCheck::Learnt
            }
            Some(expected) => match compare(found, expected) {
                Compare::Equal => ReadCheck::Match,
                Compare::Behind(_) => ReadCheck::Behind { expected, found },
                Compare::Ahead(_) => ReadCheck::Ahead { expected, found },
            },
        }
    }

    /// Like [`FlushMap::check_read`], as an error naming the file and page.
    pub fn verify_read(&self, database_path: &Path, page: u32, page_bytes: &[u8]) -> Result<()> {
        match self.check_read(page, page_bytes) {
            ReadCheck::Match | ReadCheck::Learnt => Ok(()),
            ReadCheck::Behind { expected, found } => Err(EngineError::LostWrite {
                path: database_path.to_path_buf(),
                page,
                expected,
                found,
            }),
            ReadCheck::Ahead { expected, found } => Err(EngineError::Inconsistent {
                path: database_path.to_path_buf(),
                page,
                what: format!(
                    "it carries write count {found}, newer than {expected}, the count of its last write recorded in the flush map {}: it was written behind jetproof's back, or the flush map is stale",
                    self.path.display()
                ),
            }),
        }
    }

    /// Takes `count` as the page's count on disk (recovery: a page found written after the
    /// snapshot, which the replay accepted).
    pub fn adopt(&self, page: u32, count: u16) {
        self.table.read().set(page as usize, count);
    }

    /// Forgets every entry but those of `keep` (they become unknown, learnt from the page's
    /// next read or write): recovery's answer to a snapshot older than the checkpoint.
    pub fn forget_except(&self, keep: &std::collections::BTreeSet<u32>) {
        let table = self.table.read();
        for (byte_index, bits) in table.known.iter().enumerate() {
            let mut mask = 0u8;
            for bit in 0..8 {
                let page = (byte_index * 8 + bit) as u32;
                if keep.contains(&page) {
                    mask |= 1 << bit;
                }
            }
            bits.fetch_and(mask, Ordering::AcqRel);
        }
        for flags in &table.dirty {
            flags.store(0b11, Ordering::SeqCst);
        }
    }

    /// The count to stamp on the next write of `page`, whose copy in memory carries
    /// `in_memory` (used when the map does not know the page).
    pub fn count_for_write(&self, page: u32, in_memory: u16) -> u16 {
        self.expected(page).unwrap_or(in_memory).wrapping_add(1)
    }

    /// Stamps `page_bytes` (the private copy about to be sealed and written) with its next
    /// write count, and returns it.
    pub fn stamp_for_write(&self, page: u32, page_bytes: &mut [u8]) -> u16 {
        let in_memory = page_write_count(page_bytes).unwrap_or(0);
        let count = self.count_for_write(page, in_memory);
        set_page_write_count(page_bytes, count);
        count
    }

    /// A write of `page` carrying `count` completed.
    pub fn written(&self, page: u32, count: u16) {
        let table = self.table.read();
        table.set(page as usize, count);
        if let Some(writes) = table.writes.get(page as usize / ENTRIES_PER_MAP_PAGE)
            && writes.fetch_add(1, Ordering::AcqRel) + 1 >= MAX_WRITES_BETWEEN_PERSISTS
        {
            self.persist_due.store(true, Ordering::Release);
        }
    }

    /// Must the map be persisted before the next page write (see
    /// [`MAX_WRITES_BETWEEN_PERSISTS`])?
    pub fn needs_persist(&self) -> bool {
        self.persist_due.load(Ordering::Acquire)
    }

    /// Map pages changed since the last persist (of either slot): what the next persist writes,
    /// about.
    pub fn dirty_map_pages(&self) -> usize {
        self.table
            .read()
            .dirty
            .iter()
            .filter(|flags| flags.load(Ordering::Relaxed) != 0)
            .count()
    }

    /// The log position the committed snapshot pairs with: no checkpoint may be written past it.
    pub fn persisted_checkpoint(&self) -> u64 {
        self.store.lock().checkpoint
    }

    /// Persists done since the map was opened or created.
    pub fn persists(&self) -> u64 {
        self.store.lock().persists
    }

    /// Persists the map: snapshot of the changed map pages, `sync_data` of the database file
    /// (so every count in the snapshot is of a durable write), the snapshot written and synced,
    /// then the header committed and synced. `checkpoint`: the log position the snapshot pairs
    /// with (computed before this call); `None` keeps the previous one, which is always valid.
    pub fn persist(&self, database_file: &dyn IoFile, checkpoint: Option<u64>) -> Result<()> {
        self.commit(
            Some(database_file),
            checkpoint.unwrap_or(0),
            MapState::Running,
        )
        .map(|_| ())
    }

    /// Persists the map at a clean close (see [`MapState::Clean`]); the database file must have
    /// been synced after its last page write.
    pub fn persist_clean(&self, checkpoint: u64, stamp: u64, header_sequence: u64) -> Result<()> {
        self.commit(
            None,
            checkpoint,
            MapState::Clean {
                stamp,
                header_sequence,
            },
        )
        .map(|_| ())
    }

    /// One persist (see [`FlushMap::persist`]). `checkpoint` 0 keeps the previous one.
    fn commit(
        &self,
        database_file: Option<&dyn IoFile>,
        checkpoint: u64,
        state: MapState,
    ) -> Result<u64> {
        let mut store = self.store.lock();
        let sequence = store.sequence + 1;
        let slot = (sequence % 2) as u8;
        // The snapshot first: a write completing after this point is not in it, and one that
        // completed before it is made durable by the sync below.
        self.persist_due.store(false, Ordering::Release);
        let (mut images, pages_covered, counted) = {
            let table = self.table.read();
            let counted: Vec<u32> = table
                .writes
                .iter()
                .map(|writes| writes.swap(0, Ordering::AcqRel))
                .collect();
            let mut images: Vec<(usize, AlignedBuf)> = Vec::new();
            for (index, flags) in table.dirty.iter().enumerate() {
                if flags.fetch_and(!(1 << slot), Ordering::SeqCst) & (1 << slot) == 0 {
                    continue;
                }
                let mut image = AlignedBuf::zeroed(BLOCK_BYTES);
                table.encode(index, sequence, &mut image);
                images.push((index, image));
            }
            (images, table.len(), counted)
        };
        let result = (|| {
            if let Some(file) = database_file {
                file.sync_data(IoClass::DbWrite)?;
            }
            for (index, image) in &mut images {
                seal_slot(image, slot_block(*index, slot));
            }
            // Runs of adjacent map pages of one chunk are adjacent on disk: one write each.
            let mut run = 0;
            while run < images.len() {
                let mut end = run + 1;
                while let (Some((last, _)), Some((next, _))) =
                    (images.get(end - 1), images.get(end))
                    && *next == *last + 1
                    && *next % CHUNK_MAP_PAGES != 0
                {
                    end += 1;
                }
                let Some(&(first, _)) = images.get(run) else {
                    break;
                };
                let mut bytes = AlignedBuf::zeroed((end - run) * BLOCK_BYTES);
                for (i, (_, image)) in images.get(run..end).unwrap_or(&[]).iter().enumerate() {
                    if let Some(dst) = bytes.get_mut(i * BLOCK_BYTES..(i + 1) * BLOCK_BYTES) {
                        dst.copy_from_slice(image);
                    }
                }
                store.file.write_at(
                    &bytes,
                    slot_block(first, slot) * BLOCK_BYTES as u64,
                    IoClass::FlushMap,
                )?;
                run = end;
            }
            if !images.is_empty() {
                store.file.sync_data(IoClass::FlushMap)?;
            }
            let checkpoint = if checkpoint == 0 {
                store.checkpoint
            } else {
                checkpoint.max(store.checkpoint)
            };
            let mut header = AlignedBuf::zeroed(BLOCK_BYTES);
            encode_header(
                &mut header,
                &store.identity,
                sequence,
                pages_covered,
                checkpoint,
                state,
            );
            store.file.write_at(
                &header,
                u64::from(slot) * BLOCK_BYTES as u64,
                IoClass::FlushMap,
            )?;
            store.file.sync_data(IoClass::FlushMap)?;
            Ok::<u64, EngineError>(checkpoint)
        })();
        match result {
            Ok(checkpoint) => {
                store.sequence = sequence;
                store.checkpoint = checkpoint;
                store.persists += 1;
                Ok(sequence)
            }
            Err(error) => {
                // The snapshot's pages are not on disk: dirty them again (the caller stops the
                // instance anyway; this keeps the table truthful).
                let table = self.table.read();
                for (index, _) in &images {
                    if let Some(flags) = table.dirty.get(*index) {
                        flags.fetch_or(1 << slot, Ordering::AcqRel);
                    }
                }
                for (writes, count) in table.writes.iter().zip(counted) {
                    writes.fetch_add(count, Ordering::AcqRel);
                }
                self.persist_due.store(true, Ordering::Release);
                Err(error)
            }
        }
    }
}

/// Removes the flush map at `path` if there is one and it is a jetproof flush map (its
/// signature); a file of any other content is left alone and reported. Returns whether a map
/// was removed.
pub fn remove_if_ours(backend: &dyn IoBackend, path: &Path) -> Result<bool> {
    if !backend.exists(path) {
        return Ok(false);
    }
    // Never through a link: a link is not ours, whatever it points at (the open refuses it).
    let file = backend.open(path, &OpenOptions::read_only().buffered().no_follow())?;
    if !is_flush_map(file.as_ref()) {
        return Err(map_error(
            path,
            "a file that is not a jetproof flush map is in the way; move it elsewhere",
        ));
    }
    drop(file);
    backend.remove(path)?;
    Ok(true)
}

/// Is `file` a jetproof flush map (a header copy with the signature)?
pub fn is_flush_map(file: &dyn IoFile) -> bool {
    let mut block = AlignedBuf::zeroed(BLOCK_BYTES);
    (0..HEADER_BLOCKS).any(|copy| {
        file.read_at(&mut block, copy * BLOCK_BYTES as u64, IoClass::FlushMap)
            .is_ok()
            && block.get(4..12) == Some(MAGIC.as_slice())
    })
}

/// The database a flush map names (its newest valid header copy), if `file` is one.
pub fn map_database_id(file: &dyn IoFile) -> Option<u128> {
    let mut block = AlignedBuf::zeroed(BLOCK_BYTES);
    (0..HEADER_BLOCKS)
        .filter_map(|copy| {
            file.read_at(&mut block, copy * BLOCK_BYTES as u64, IoClass::FlushMap)
                .ok()?;
            decode_header(&block).ok()
        })
        .max_by_key(|header| header.sequence)
        .map(|header| header.identity.database_id)
}

/// A decoded header copy.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Header {
    identity: MapIdentity,
    sequence: u64,
    pages_covered: u64,
    checkpoint: u64,
    state: MapState,
}

fn encode_header(
    out: &mut [u8],
    identity: &MapIdentity,
    sequence: u64,
    pages_covered: u64,
    checkpoint: u64,
    state: MapState,
) {
    out.fill(0);
    if let Some(magic) = out.get_mut(4..12) {
        magic.copy_from_slice(MAGIC);
    }
    put_u32(out, 12, FORMAT_VERSION);
    put_u32(out, 16, BLOCK_BYTES as u32);
    put_u32(out, 20, ENTRIES_PER_MAP_PAGE as u32);
    put_u128(out, 24, identity.database_id);
    put_u64(out, 40, identity.created_unix_ns);
    put_u64(out, 48, sequence);
    put_u64(out, 56, pages_covered);
    put_u64(out, 64, checkpoint);
    let (state_byte, stamp, header_sequence) = match state {
        MapState::Running => (STATE_RUNNING, 0, 0),
        MapState::Clean {
            stamp,
            header_sequence,
        } => (STATE_CLEAN, stamp, header_sequence),
    };
    if let Some(byte) = out.get_mut(72) {
        *byte = state_byte;
    }
    put_u64(out, 80, stamp);
    put_u64(out, 88, header_sequence);
    put_u64(out, 96, now_ms());
    let crc = out
        .get(4..HEADER_CRC_END)
        .map_or(0, jetproof_io::crc::crc32c);
    put_u32(out, 0, crc);
}

/// Why a header copy was not taken.
enum HeaderProblem {
    NoSignature,
    Damaged,
    Version(u32),
}

fn decode_header(block: &[u8]) -> std::result::Result<Header, HeaderProblem> {
    if block.get(4..12) != Some(MAGIC.as_slice()) {
        return Err(HeaderProblem::NoSignature);
    }
    let stored = u32_at(block, 0).ok_or(HeaderProblem::Damaged)?;
    let computed = block
        .get(4..HEADER_CRC_END)
        .map(jetproof_io::crc::crc32c)
        .ok_or(HeaderProblem::Damaged)?;
    if stored != computed {
        return Err(HeaderProblem::Damaged);
    }
    let version = u32_at(block, 12).ok_or(HeaderProblem::Damaged)?;
    if version != FORMAT_VERSION {
        return Err(HeaderProblem::Version(version));
    }
    if u32_at(block, 16) != Some(BLOCK_BYTES as u32)
        || u32_at(block, 20) != Some(ENTRIES_PER_MAP_PAGE as u32)
    {
        return Err(HeaderProblem::Damaged);
    }
    let field = |offset| u64_at(block, offset).ok_or(HeaderProblem::Damaged);
    let state = match block.get(72).copied() {
        Some(STATE_RUNNING) => MapState::Running,
        Some(STATE_CLEAN) => MapState::Clean {
            stamp: field(80)?,
            header_sequence: field(88)?,
        },
        _ => return Err(HeaderProblem::Damaged),
    };
    Ok(Header {
        identity: MapIdentity {
            database_id: u128_at(block, 24).ok_or(HeaderProblem::Damaged)?,
            created_unix_ns: field(40)?,
        },
        sequence: field(48)?,
        pages_covered: field(56)?,
        checkpoint: field(64)?,
        state,
    })
}

fn slot_checksum(slot: &[u8], block: u64) -> u32 {
    let body = slot.get(4..).unwrap_or(&[]);
    jetproof_io::crc::crc32c_append(jetproof_io::crc::crc32c(body), &block.to_le_bytes())
}

fn seal_slot(slot: &mut [u8], block: u64) {
    let crc = slot_checksum(slot, block);
    put_u32(slot, 0, crc);
}

/// Reads the whole map file and loads its committed snapshot.
fn read_map(
    file: &dyn IoFile,
    path: &Path,
    identity: MapIdentity,
    page_count: u64,
) -> Result<(Table, MapLoad)> {
    let size = file.size()?;
    if size < HEADER_BLOCKS * BLOCK_BYTES as u64 {
        return Err(map_error(
            path,
            MapFileError::Truncated { size_bytes: size }.to_string(),
        ));
    }
    let mut headers = AlignedBuf::zeroed(2 * BLOCK_BYTES);
    file.read_at(&mut headers, 0, IoClass::FlushMap)?;
    let copies = [
        decode_header(headers.get(..BLOCK_BYTES).unwrap_or(&[])),
        decode_header(headers.get(BLOCK_BYTES..).unwrap_or(&[])),
    ];
    let mut best: Option<Header> = None;
    for header in copies.iter().flatten() {
        if best.as_ref().is_none_or(|b| header.sequence > b.sequence) {
            best = Some(header.clone());
        }
    }
    let Some(header) = best else {
        let problem = if copies
            .iter()
            .all(|c| matches!(c, Err(HeaderProblem::NoSignature)))
        {
            MapFileError::NotAFlushMap
        } else if let Some(found) = copies.iter().find_map(|c| match c {
            Err(HeaderProblem::Version(v)) => Some(*v),
            _ => None,
        }) {
            MapFileError::UnsupportedVersion { found }
        } else {
            MapFileError::BothHeadersDamaged
        };
        return Err(map_error(path, problem.to_string()));
    };
    if header.identity != identity {
        return Err(map_error(path, MapFileError::WrongDatabase.to_string()));
    }
    let mut table = Table::default();
    table.grow(page_count, false);
    let slot = (header.sequence % 2) as u8;
    let map_pages = header.pages_covered.div_ceil(ENTRIES_PER_MAP_PAGE as u64);
    let mut damaged = Vec::new();
    // A chunk at a time: both slots of 128 map pages, 1 MiB.
    let mut buf = AlignedBuf::zeroed(2 * CHUNK_MAP_PAGES * BLOCK_BYTES);
    let mut index = 0usize;
    while (index as u64) < map_pages {
        let n = (map_pages as usize - index).min(CHUNK_MAP_PAGES);
        let first_block = slot_block(index, 0);
        let available = size.saturating_sub(first_block * BLOCK_BYTES as u64);
        let whole = usize::try_from(available)
            .unwrap_or(usize::MAX)
            .min(buf.len())
            / BLOCK_BYTES
            * BLOCK_BYTES;
        if let Some(chunk) = buf.get_mut(..whole)
            && whole > 0
        {
            file.read_at(chunk, first_block * BLOCK_BYTES as u64, IoClass::FlushMap)?;
        }
        for i in 0..n {
            let map_page = index + i;
            let slot_at = |s: u8| {
                let at = (slot_block(map_page, s) - first_block) as usize * BLOCK_BYTES;
                if at + BLOCK_BYTES <= whole {
                    buf.get(at..at + BLOCK_BYTES)
                } else {
                    None
                }
            };
            let image = slot_at(slot);
            let good = image.is_some_and(|image| {
                u32_at(image, 0) == Some(slot_checksum(image, slot_block(map_page, slot)))
                    && u32_at(image, 4) == Some(map_page as u32)
                    && u64_at(image, 8).is_some_and(|written| {
                        written <= header.sequence && written % 2 == u64::from(slot) && written > 0
                    })
            });
            let flags = table.dirty.get(map_page);
            match image {
                Some(image) if good => {
                    table.decode(map_page, image, header.pages_covered);
                    // The other slot must be rewritten before the next persist of its parity
                    // commits, unless it already holds the same entries.
                    let same = slot_at(1 - slot).is_some_and(|other| {
                        other.get(SLOT_KNOWN_AT..) == image.get(SLOT_KNOWN_AT..)
                    });
                    if let Some(flags) = flags {
                        flags.store(if same { 0 } else { 1 << (1 - slot) }, Ordering::SeqCst);
                    }
                }
                _ => damaged.push(map_page as u32),
            }
        }
        index += n;
    }
    Ok((
        table,
        MapLoad {
            state: header.state,
            sequence: header.sequence,
            checkpoint: header.checkpoint,
            pages_covered: header.pages_covered,
            damaged_map_pages: damaged,
        },
    ))
}

fn put_u16(out: &mut [u8], offset: usize, value: u16) {
    page::put(out, offset, &value.to_le_bytes());
}

fn put_u32(out: &mut [u8], offset: usize, value: u32) {
    page::put(out, offset, &value.to_le_bytes());
}

fn put_u64(out: &mut [u8], offset: usize, value: u64) {
    page::put(out, offset, &value.to_le_bytes());
}

fn put_u128(out: &mut [u8], offset: usize, value: u128) {
    page::put(out, offset, &value.to_le_bytes());
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;
    use jetproof_io::fault::{CrashMode, FaultBackend, FaultConfig};
    use jetproof_io::mem::MemBackend;

    const ID: MapIdentity = MapIdentity {
        database_id: 0x1234_5678_9abc_def0_1122_3344_5566_7788,
        created_unix_ns: 42,
    };

    fn page_with_count(count: u16) -> Vec<u8> {
        let mut page = vec![0u8; 4096];
        set_page_write_count(&mut page, count);
        page
    }

    /// A database file stand-in: persist syncs it, nothing else.
    fn db_file(backend: &dyn IoBackend) -> Arc<dyn IoFile> {
        backend
            .open(Path::new("/d/db.jpdb"), &OpenOptions::create().buffered())
            .unwrap()
    }

    fn open(backend: &dyn IoBackend, pages: u64) -> (FlushMap, MapLoad) {
        FlushMap::open(
            backend,
            Path::new("/d/db.jpdb.jpfm"),
            ID,
            pages,
            false,
            true,
            None,
        )
        .unwrap()
    }

    fn create(backend: &dyn IoBackend, pages: u64) -> FlushMap {
        FlushMap::create(
            backend,
            Path::new("/d/db.jpdb.jpfm"),
            ID,
            pages,
            false,
            None,
        )
        .unwrap()
    }

    #[test]
    fn counts_compare_over_half_their_range() {
        assert_eq!(compare(5, 5), Compare::Equal);
        assert_eq!(compare(6, 5), Compare::Ahead(1));
        assert_eq!(compare(4, 5), Compare::Behind(1));
        assert_eq!(compare(0, u16::MAX), Compare::Ahead(1), "wraps forwards");
        assert_eq!(compare(u16::MAX, 0), Compare::Behind(1), "wraps backwards");
        assert_eq!(compare(0x7fff, 0), Compare::Ahead(0x7fff));
        assert_eq!(compare(0x8000, 0), Compare::Behind(0x8000));
    }

    #[test]
    fn a_new_map_knows_every_page_at_count_zero_and_each_write_counts_one_up() {
        let backend = MemBackend::new();
        let map = create(backend.as_ref(), 5000);
        assert_eq!(map.expected(0), Some(0));
        assert_eq!(map.expected(4999), Some(0));
        let mut page = page_with_count(0);
        let count = map.stamp_for_write(7, &mut page);
        assert_eq!(count, 1);
        assert_eq!(page_write_count(&page), Some(1));
        // Until the write completes the map still expects the old count.
        assert_eq!(map.check_read(7, &page_with_count(0)), ReadCheck::Match);
        map.written(7, count);
        assert_eq!(map.check_read(7, &page), ReadCheck::Match);
        assert_eq!(
            map.check_read(7, &page_with_count(0)),
            ReadCheck::Behind {
                expected: 1,
                found: 0
            }
        );
        assert_eq!(
            map.check_read(7, &page_with_count(2)),
            ReadCheck::Ahead {
                expected: 1,
                found: 2
            }
        );
        let error = map
            .verify_read(Path::new("/d/db.jpdb"), 7, &page_with_count(0))
            .unwrap_err();
        assert!(
            matches!(error, EngineError::LostWrite { page: 7, .. }),
            "{error}"
        );
        assert!(error.to_string().contains("lost write"), "{error}");
    }

    #[test]
    fn a_persisted_map_reopens_with_every_count_and_the_checkpoint() {
        let backend = MemBackend::new();
        let file = db_file(backend.as_ref());
        let map = create(backend.as_ref(), 3 * ENTRIES_PER_MAP_PAGE as u64 + 10);
        // Pages in three map pages, written a few times each.
        let pages = [1u32, 1911, 1912, 5000, 5745];
        for (i, &page) in pages.iter().enumerate() {
            for _ in 0..=i {
                let count = map.count_for_write(page, 0);
                map.written(page, count);
            }
        }
        map.persist(file.as_ref(), Some(777)).unwrap();
        drop(map);
        let (map, load) = open(backend.as_ref(), 3 * ENTRIES_PER_MAP_PAGE as u64 + 10);
        assert_eq!(load.state, MapState::Running);
        assert_eq!(load.checkpoint, 777);
        assert!(load.damaged_map_pages.is_empty(), "{load:?}");
        for (i, &page) in pages.iter().enumerate() {
            assert_eq!(map.expected(page), Some(i as u16 + 1), "page {page}");
        }
        assert_eq!(map.expected(2), Some(0));
    }

    #[test]
    fn the_other_slot_is_brought_up_to_date_after_a_reopen() {
        // Slot 1 holds an older state of map page 0 when the map is reopened on slot 0's
        // snapshot; a persist into slot 1 with no new change must still write map page 0 there.
        let backend = MemBackend::new();
        let file = db_file(backend.as_ref());
        let map = create(backend.as_ref(), 100);
        map.written(3, 1);
        map.persist(file.as_ref(), None).unwrap(); // sequence 3, slot 1
        map.written(3, 2);
        map.persist(file.as_ref(), None).unwrap(); // sequence 4, slot 0
        drop(map);
        let (map, load) = open(backend.as_ref(), 100);
        assert_eq!(load.sequence, 4);
        assert_eq!(map.expected(3), Some(2));
        map.persist(file.as_ref(), None).unwrap(); // sequence 5, slot 1
        drop(map);
        let (map, load) = open(backend.as_ref(), 100);
        assert_eq!(load.sequence, 5);
        assert_eq!(
            map.expected(3),
            Some(2),
            "slot 1 was left with the older count"
        );
    }

    #[test]
    fn a_clean_persist_says_so_and_binds_the_database_state() {
        let backend = MemBackend::new();
        let map = create(backend.as_ref(), 10);
        map.persist_clean(99, 1234, 17).unwrap();
        drop(map);
        let (_, load) = open(backend.as_ref(), 10);
        assert_eq!(
            load.state,
            MapState::Clean {
                stamp: 1234,
                header_sequence: 17
            }
        );
        assert_eq!(load.checkpoint, 99);
    }

    #[test]
    fn unknown_entries_are_learnt_and_pages_past_the_snapshot_are_unknown() {
        let backend = MemBackend::new();
        let file = db_file(backend.as_ref());
        let map = FlushMap::create_unknown(
            backend.as_ref(),
            Path::new("/d/db.jpdb.jpfm"),
            ID,
            50,
            false,
            None,
        )
        .unwrap();
        assert_eq!(map.expected(10), None);
        assert_eq!(map.check_read(10, &page_with_count(9)), ReadCheck::Learnt);
        assert_eq!(map.expected(10), Some(9));
        assert_eq!(
            map.count_for_write(11, 4),
            5,
            "an unknown page counts on from its copy"
        );
        map.grow(80);
        assert_eq!(
            map.expected(79),
            Some(0),
            "grown pages are formatted: count 0"
        );
        map.persist(file.as_ref(), None).unwrap();
        drop(map);
        // The database has grown further since: pages past the snapshot are unknown.
        let (map, load) = open(backend.as_ref(), 90);
        assert_eq!(load.pages_covered, 80);
        assert_eq!(map.expected(10), Some(9));
        assert_eq!(map.expected(11), None);
        assert_eq!(map.expected(79), Some(0));
        assert_eq!(map.expected(85), None);
    }

    #[test]
    fn a_damaged_map_page_is_reported_and_its_entries_are_unknown() {
        let backend = MemBackend::new();
        let map = create(backend.as_ref(), 2 * ENTRIES_PER_MAP_PAGE as u64);
        map.written(ENTRIES_PER_MAP_PAGE as u32 + 1, 1);
        let file = db_file(backend.as_ref());
        map.persist(file.as_ref(), None).unwrap(); // sequence 3: slot 1
        drop(map);
        // Flip a byte in map page 1's slot 1.
        let raw = backend
            .open(
                Path::new("/d/db.jpdb.jpfm"),
                &OpenOptions::read_write().buffered(),
            )
            .unwrap();
        let mut block = vec![0u8; BLOCK_BYTES];
        let at = slot_block(1, 1) * BLOCK_BYTES as u64;
        raw.read_at(&mut block, at, IoClass::FlushMap).unwrap();
        block[300] ^= 0x10;
        raw.write_at(&block, at, IoClass::FlushMap).unwrap();
        let (map, load) = open(backend.as_ref(), 2 * ENTRIES_PER_MAP_PAGE as u64);
        assert_eq!(load.damaged_map_pages, vec![1]);
        assert_eq!(map.expected(0), Some(0));
        assert_eq!(map.expected(ENTRIES_PER_MAP_PAGE as u32 + 1), None);
    }

    #[test]
    fn foreign_files_and_other_databases_maps_are_refused() {
        let backend = MemBackend::new();
        let path = Path::new("/d/db.jpdb.jpfm");
        let foreign = backend
            .open(path, &OpenOptions::create().buffered())
            .unwrap();
        foreign
            .write_at(&[7u8; 3 * BLOCK_BYTES], 0, IoClass::DbWrite)
            .unwrap();
        drop(foreign);
        let error = FlushMap::create(backend.as_ref(), path, ID, 10, false, None).unwrap_err();
        assert!(
            error.to_string().contains("not a jetproof flush map"),
            "{error}"
        );
        let error = FlushMap::open(backend.as_ref(), path, ID, 10, false, true, None).unwrap_err();
        assert!(
            error.to_string().contains("not a jetproof flush map"),
            "{error}"
        );
        backend.remove(path).unwrap();
        drop(create(backend.as_ref(), 10));
        let other = MapIdentity {
            database_id: 1,
            ..ID
        };
        let error =
            FlushMap::open(backend.as_ref(), path, other, 10, false, true, None).unwrap_err();
        assert!(error.to_string().contains("another database"), "{error}");
        // Our own map may be replaced.
        drop(create(backend.as_ref(), 10));
    }

    #[test]
    fn a_crash_at_any_point_of_a_persist_leaves_a_whole_snapshot() {
        // Cut the persist after each of its operations in turn, crash keeping a random subset of
        // the unsynced writes, and reopen: the map is the old snapshot or the new one, never a
        // mix, and never damaged.
        let mut outcomes = [0u32; 2];
        for cut in 0..12u64 {
            for mode in [
                CrashMode::SyncedOnly,
                CrashMode::RandomSubset,
                CrashMode::TornLast,
            ] {
                let backend = FaultBackend::new(FaultConfig {
                    seed: cut * 7 + 1,
                    ..FaultConfig::default()
                });
                let pages = 3 * ENTRIES_PER_MAP_PAGE as u64;
                let file = db_file(backend.as_ref());
                let map = create(backend.as_ref(), pages);
                for page in [0u32, 2000, 4000] {
                    map.written(page, 1);
                }
                map.persist(file.as_ref(), Some(10)).unwrap();
                for page in [0u32, 2000, 4000] {
                    map.written(page, 2);
                }
                let ops = backend.operations();
                backend.configure(|c| c.eio_after_ops = Some(ops + cut));
                let finished = map.persist(file.as_ref(), Some(20)).is_ok();
                let after = backend.crash(mode);
                let (map, load) = open(after.as_ref(), pages);
                assert!(
                    load.damaged_map_pages.is_empty(),
                    "cut {cut} {mode:?}: {load:?}"
                );
                let expected = if load.checkpoint == 20 { 2 } else { 1 };
                outcomes[usize::from(expected) - 1] += 1;
                if finished {
                    assert_eq!(
                        load.checkpoint, 20,
                        "cut {cut} {mode:?}: a finished persist survives"
                    );
                }
                for page in [0u32, 2000, 4000] {
                    assert_eq!(
                        map.expected(page),
                        Some(expected),
                        "cut {cut} {mode:?} page {page}"
                    );
                }
            }
        }
        assert!(
            outcomes[0] > 0 && outcomes[1] > 0,
            "the cuts must fall both before and after the commit: {outcomes:?}"
        );
    }

    #[test]
    fn maps_over_several_chunks_round_trip_and_a_busy_map_page_asks_for_a_persist() {
        let backend = MemBackend::new();
        let file = db_file(backend.as_ref());
        let pages = (2 * CHUNK_MAP_PAGES + 3) as u64 * ENTRIES_PER_MAP_PAGE as u64;
        let map = create(backend.as_ref(), pages);
        let step = ENTRIES_PER_MAP_PAGE as u64 * 5 + 17;
        let touched: Vec<u32> = (0..pages)
            .step_by(step as usize)
            .map(|p| p as u32)
            .collect();
        for (i, &page) in touched.iter().enumerate() {
            map.written(page, (i % 1000) as u16 + 1);
        }
        assert!(!map.needs_persist());
        map.persist(file.as_ref(), Some(5)).unwrap();
        drop(map);
        let (map, load) = open(backend.as_ref(), pages);
        assert!(load.damaged_map_pages.is_empty());
        for (i, &page) in touched.iter().enumerate() {
            assert_eq!(
                map.expected(page),
                Some((i % 1000) as u16 + 1),
                "page {page}"
            );
        }
        for _ in 0..MAX_WRITES_BETWEEN_PERSISTS {
            assert!(!map.needs_persist());
            let count = map.count_for_write(3, 0);
            map.written(3, count);
        }
        assert!(
            map.needs_persist(),
            "one map page's range reached the bound"
        );
        map.persist(file.as_ref(), None).unwrap();
        assert!(!map.needs_persist());
        assert_eq!(
            map.dirty_map_pages(),
            1,
            "only the other slot of map page 0 lags"
        );
    }
}
