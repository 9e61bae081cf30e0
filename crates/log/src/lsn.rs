//! Log positions and records.
//!
//! An [`Lsn`] is a byte position in the log stream: the generation (file number) and the byte
//! offset inside that file. Positions order lexicographically, so a later generation is always
//! later in the log. The LSN of a record is the offset of its frame; the log's durable end
//! ([`crate::Log::flushed_lsn`]) is always a frame boundary, so a record at `lsn` is durable
//! exactly when `lsn < flushed_lsn()`.

use std::fmt;

/// A position in the log: `(generation, byte offset in that generation's file)`.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Lsn {
    pub generation: u64,
    pub offset: u64,
}

impl Lsn {
    /// Before every record of every log.
    pub const ZERO: Lsn = Lsn {
        generation: 0,
        offset: 0,
    };

    pub const fn new(generation: u64, offset: u64) -> Lsn {
        Lsn { generation, offset }
    }

    /// A compact form for page headers and cache bookkeeping: generation in the high 32 bits,
    /// offset in the low 32 (log files are at most 4 GiB, checked by [`crate::LogOptions`]).
    /// Order is preserved as long as the generation fits in 32 bits.
    pub const fn to_u64(self) -> u64 {
        (self.generation << 32) | (self.offset & 0xffff_ffff)
    }

    pub const fn from_u64(packed: u64) -> Lsn {
        Lsn {
            generation: packed >> 32,
            offset: packed & 0xffff_ffff,
        }
    }
}

impl fmt::Display for Lsn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.generation, self.offset)
    }
}

/// A record to append. The log does not interpret `record_type` or `payload`: the engine defines
/// them (insert on page P, update stamp before/after, commit, ...).
#[derive(Copy, Clone, Debug)]
pub struct Record<'a> {
    pub record_type: u8,
    pub transaction_id: u64,
    pub payload: &'a [u8],
}

/// A record read back from the log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogRecord {
    pub lsn: Lsn,
    pub record_type: u8,
    pub transaction_id: u64,
    pub payload: Vec<u8>,
}

/// How long a commit waits.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Durability {
    /// Return once the record is on stable storage (group commit shares the log write).
    Durable,
    /// Return at once; the next log write or the lazy-flush timer makes it durable.
    Lazy,
}
