//! jetproof's storage engine: an ESE-style database of fixed-size pages with checksums, a B+tree of
//! variable-size records, and a bounded page cache. It is the reason jetproof's I/O is realistic:
//! database reads and writes come from a real tree behind a real cache, not from a random-number
//! generator. It knows nothing of tests or reports, and reads and writes only through
//! `jetproof_io::IoFile`.

pub mod checksum;
pub mod header;
pub mod page;

pub use header::{DbHeader, DbState, HeaderError, LogPosition};
