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
//! | 38     | 2    | write count: the count of the write that put the page on disk (flush map) |
//! | 40     | 8    | update stamp (database-wide, monotonic: ESE's dbtime) |
//! | 48     | 8    | log position of the last change (for the write-ahead rule) |
//! | 56     | 4    | owning tree (0 for pages that belong to no tree) |
//! | 60     | 4    | previous page at the same level (not maintained yet: 0; scans use the parent) |
//! | 64     | 4    | next page at the same level (not maintained yet: 0) |
//! | 68     | 12   | type-specific (B+tree nodes: see `crate::node`) |
//! | 80     | ...  | body |
#![deny(clippy::indexing_slicing, clippy::unwrap_used)]

pub const HEADER_SIZE: usize = 80;
pub const CHECKSUM_AREA: std::ops::Range<usize> = 0..32;
pub const BLOCK_SIZE: usize = 8192;

pub const OFFSET_PAGE_NUMBER: usize = 32;
pub const OFFSET_PAGE_TYPE: usize = 36;
pub const OFFSET_FLAGS: usize = 37;
/// The page's write count (u16), stamped into each write's sealed copy and recorded in the flush
/// map once the write completed (`crate::flushmap`).
pub const OFFSET_WRITE_COUNT: usize = 38;
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
    /// A long value's chunk (an attachment's bytes, ESE's long-value pages): the header, then
    /// the chunk to the end of the page. `init` lays them down when `workload.dedup_ratio` is
    /// above 1 ([`crate::bulk::BulkLoader::with_long_values`]), and so does a run's growth
    /// ([`crate::fill::PageContent::long_value_share`]); no tree refers to them yet.
    LongValue = 6,
}

impl PageType {
    pub fn from_byte(byte: u8) -> Option<PageType> {
        Some(match byte {
            1 => PageType::Free,
            2 => PageType::DatabaseHeader,
            3 => PageType::SpaceMap,
            4 => PageType::Interior,
            5 => PageType::Leaf,
            6 => PageType::LongValue,
            _ => return None,
        })
    }
}

/// Page sizes a database may have.
pub const PAGE_SIZES: [usize; 4] = [4096, 8192, 16384, 32768];

/// Reads a little-endian u16 at `offset`; `None` if the page is too short.
pub fn get_u16(page: &[u8], offset: usize) -> Option<u16> {
    jetproof_io::bytes::u16_at(page, offset)
}

/// Reads a little-endian u32 at `offset`; `None` if the page is too short.
pub fn get_u32(page: &[u8], offset: usize) -> Option<u32> {
    jetproof_io::bytes::u32_at(page, offset)
}

/// Reads a little-endian u64 at `offset`; `None` if the page is too short.
pub fn get_u64(page: &[u8], offset: usize) -> Option<u64> {
    jetproof_io::bytes::u64_at(page, offset)
}

/// Writes `bytes` at `offset`. Callers pass offsets of the fixed layout, which every page size
/// holds; an out-of-range write is a bug and is ignored rather than panicking on disk data paths.
pub fn put(page: &mut [u8], offset: usize, bytes: &[u8]) {
    debug_assert!(offset + bytes.len() <= page.len());
    if let Some(dst) = page.get_mut(offset..offset + bytes.len()) {
        dst.copy_from_slice(bytes);
    }
}

pub fn put_u16(page: &mut [u8], offset: usize, value: u16) {
    put(page, offset, &value.to_le_bytes());
}

pub fn put_u32(page: &mut [u8], offset: usize, value: u32) {
    put(page, offset, &value.to_le_bytes());
}

pub fn put_u64(page: &mut [u8], offset: usize, value: u64) {
    put(page, offset, &value.to_le_bytes());
}

/// Fills the common header fields (after the checksum area) of a page being formatted. The rest
/// of the header (flags, log position, tree, neighbours, type-specific) is zero.
pub fn write_common(page: &mut [u8], number: u32, page_type: PageType, update_stamp: u64) {
    if let Some(header) = page.get_mut(CHECKSUM_AREA.end..HEADER_SIZE) {
        header.fill(0);
    }
    put_u32(page, OFFSET_PAGE_NUMBER, number);
    put(page, OFFSET_PAGE_TYPE, &[page_type as u8]);
    put_u64(page, OFFSET_UPDATE_STAMP, update_stamp);
}

/// Formats `page` as a free page numbered `number` and seals it. Growth writes these, so that
/// every page of the file is checked even before first use.
pub fn format_free(page: &mut [u8], number: u32) {
    page.fill(0);
    write_common(page, number, PageType::Free, 0);
    crate::checksum::seal(page);
}

/// [`format_free`] with the body (everything after the header) made by `fill` instead of
/// zeros: the bulk loader's free pages under `init`'s content (issue 33). Checksums cover the
/// body; nothing reads it.
pub fn format_free_filled(page: &mut [u8], number: u32, fill: &mut dyn FnMut(&mut [u8])) {
    if let Some(header) = page.get_mut(..HEADER_SIZE) {
        header.fill(0);
    }
    if let Some(body) = page.get_mut(HEADER_SIZE..) {
        fill(body);
    }
    write_common(page, number, PageType::Free, 0);
    crate::checksum::seal(page);
}

/// The page's stored number, type and update stamp, for reports.
pub fn page_number(page: &[u8]) -> Option<u32> {
    get_u32(page, OFFSET_PAGE_NUMBER)
}

pub fn page_type(page: &[u8]) -> Option<PageType> {
    PageType::from_byte(page.get(OFFSET_PAGE_TYPE).copied()?)
}

pub fn update_stamp(page: &[u8]) -> Option<u64> {
    get_u64(page, OFFSET_UPDATE_STAMP)
}

pub fn log_position(page: &[u8]) -> Option<u64> {
    get_u64(page, OFFSET_LOG_POSITION)
}
