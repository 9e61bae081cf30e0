//! The engine's error type. Every variant that concerns stored data names the file and, where it
//! applies, the page, so that a storage tester can report where the damage is.

use std::path::PathBuf;

use jetproof_io::IoError;

use crate::header::HeaderError;

#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error(transparent)]
    Io(#[from] IoError),
    #[error(transparent)]
    Header(#[from] HeaderError),
    /// A page failed its checksum and could not be corrected.
    #[error(
        "{path}: page {page} is damaged (checksum mismatch that one bit flip does not explain)"
    )]
    BadPage { path: PathBuf, page: u32 },
    /// A page's checksum is good but it names another position: a misdirected write.
    #[error("{path}: page {page} holds page {found} (a wrong page-number page: misdirected write)")]
    WrongPageNumber {
        path: PathBuf,
        page: u32,
        found: u32,
    },
    /// A page's checksum is good but its content breaks the B+tree's or space map's rules.
    #[error("{path}: page {page} is inconsistent: {what}")]
    Inconsistent {
        path: PathBuf,
        page: u32,
        what: String,
    },
    /// A page read back older than its last write: the storage acknowledged a write of the page
    /// and later returned older data (a lost write), detected by the flush map.
    #[error(
        "{path}: page {page} is a lost write: it carries write count {found}, but its last write (count {expected}) was acknowledged by the storage; the storage returned an older copy of the page"
    )]
    LostWrite {
        path: PathBuf,
        page: u32,
        expected: u16,
        found: u16,
    },
    /// The flush map file cannot be used (damaged, stale, another database's).
    #[error("flush map {path}: {what}")]
    FlushMap { path: PathBuf, what: String },
    #[error("invalid database option `{field}`: {reason}")]
    InvalidOption { field: &'static str, reason: String },
    #[error(
        "record of {size_bytes} bytes (key {key_bytes}) exceeds the maximum of {max_bytes} bytes for this page size"
    )]
    RecordTooLarge {
        size_bytes: usize,
        key_bytes: usize,
        max_bytes: usize,
    },
    #[error(
        "{path}: the database was not shut down cleanly; replay its logs first (`jetproof recover`)"
    )]
    DirtyShutdown { path: PathBuf },
    #[error("{path}: the database already exists; refusing to overwrite it")]
    AlreadyExists { path: PathBuf },
    #[error("{path}: the database file cannot grow beyond {max_pages} pages")]
    Full { path: PathBuf, max_pages: u64 },
    /// `Database::bulk_load` on a database that is not new and empty, or that is logged.
    #[error("{path}: bulk load refused: {reason}")]
    BulkLoadRefused { path: PathBuf, reason: String },
    /// A bulk load was given a key not above the previous one (record number `record`, counted
    /// from 0); the record was not added.
    #[error(
        "{path}: bulk load record {record}: keys must be strictly ascending; this key is not above the previous one"
    )]
    KeysNotAscending { path: PathBuf, record: u64 },
    /// The allocator could not give memory whose size an option decides (the cache's buffers
    /// or its frame table): reported, never an abort of the process.
    #[error(
        "out of memory: {what} needs {bytes} bytes that the allocator could not give; make the cache smaller (cache.max_size, cache.min_size)"
    )]
    OutOfMemory { what: &'static str, bytes: usize },
    #[error("page cache: every one of its {frames} buffers is pinned; raise cache_max_bytes")]
    CacheExhausted { frames: usize },
    /// A write or the write-ahead gate failed earlier; `cause` is that first error, with its
    /// location. The instance stops instead of limping on (STYLE: errors).
    #[error("{path}: an earlier write failed ({cause}); the database accepts no more work")]
    Poisoned { path: PathBuf, cause: String },
}

pub type Result<T, E = EngineError> = std::result::Result<T, E>;
