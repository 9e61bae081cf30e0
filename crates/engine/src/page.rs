//! The page: the unit of every database read and write.
//!
//! Byte layout of the common page header (little-endian; `docs/design.md` is the reference):
//!
//! | offset | size | field |
//! |-------:|-----:|-------|
//! | 0      | 32   | checksum area: one 8-byte checksum per 8 KiB block (4 for a 32 KiB page) |
//! | 32     | 4    | page number (its position in the file), folded into every checksum |
//! | 36     | 1    | page type ([`PageType`]) |
//! | 37     | 1    | flags |
//! | 38     | 2    | reserved, zero |
//! | 40     | 8    | update stamp (database-wide, monotonic: ESE's dbtime) |
//! | 48     | 8    | log position of the last change (for the write-ahead rule) |
//! | 56     | 4    | owning tree (0 for pages that belong to no tree) |
//! | 60     | 4    | previous page at the same level (0 = none) |
//! | 64     | 4    | next page at the same level (0 = none) |
//! | 68     | 12   | type-specific (B+tree nodes: level, item count, free space) |
//! | 80     | ...  | body |

pub const HEADER_SIZE: usize = 80;
pub const CHECKSUM_AREA: std::ops::Range<usize> = 0..32;
pub const BLOCK_SIZE: usize = 8192;

pub const OFFSET_PAGE_NUMBER: usize = 32;
pub const OFFSET_PAGE_TYPE: usize = 36;
pub const OFFSET_FLAGS: usize = 37;
pub const OFFSET_UPDATE_STAMP: usize = 40;
pub const OFFSET_LOG_POSITION: usize = 48;
pub const OFFSET_TREE: usize = 56;
pub const OFFSET_PREV: usize = 60;
pub const OFFSET_NEXT: usize = 64;
pub const OFFSET_TYPE_SPECIFIC: usize = 68;

/// What a page holds.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum PageType {
    /// Formatted but unused.
    Free = 1,
    /// One of the two database header pages.
    DatabaseHeader = 2,
    /// Free-space map.
    SpaceMap = 3,
    /// B+tree interior node.
    Interior = 4,
    /// B+tree leaf.
    Leaf = 5,
}

impl PageType {
    pub fn from_byte(byte: u8) -> Option<PageType> {
        Some(match byte {
            1 => PageType::Free,
            2 => PageType::DatabaseHeader,
            3 => PageType::SpaceMap,
            4 => PageType::Interior,
            5 => PageType::Leaf,
            _ => return None,
        })
    }
}
