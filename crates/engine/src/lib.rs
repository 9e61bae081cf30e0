//! jetproof's storage engine: an ESE-style database of fixed-size pages with checksums, a B+tree of
//! variable-size records, and a bounded page cache. It is the reason jetproof's I/O is realistic:
//! database reads and writes come from a real tree behind a real cache, not from a random-number
//! generator. It knows nothing of tests or reports, and reads and writes only through
//! `jetproof_io::IoFile`.
//!
//! Layering (each module uses only those listed before it): `page` (header layout) and `checksum`;
//! `header` (the database header page); `cache` (buffers, latches, flushing); `space` (space maps
//! and growth, over the cache); `node` (slotted B+tree pages); `btree` (the tree, over cache and
//! space); `db` (the public `Database`); `bulk` (the bulk loader of a new database, writing
//! pages directly beside the cache, which `db` then reloads).

pub mod btree;
pub mod bulk;
pub mod cache;
pub mod change;
pub mod checksum;
pub mod db;
pub mod error;
pub mod fill;
pub mod flushmap;
pub mod header;
pub mod node;
pub mod page;
pub mod space;

pub use btree::{Op, TreeStats};
pub use bulk::BulkLoader;
pub use cache::{CacheStats, NoLog, WriteAheadGate};
pub use change::{ChangeLog, NoChangeLog, OwnedPageChange, PageChange};
pub use db::{Database, DatabaseOptions, FillProgress, record_key};
pub use error::EngineError;
pub use fill::PageContent;
pub use flushmap::{FlushMap, MapIdentity, MapLoad, MapState, ReadCheck, flush_map_path};
pub use header::{DbHeader, DbState, HeaderError, LogPosition};
pub use space::{SpaceCensus, SpaceStats};
