//! Page checksums.
//!
//! PLACEHOLDER implementation (one CRC-32C per 8 KiB block, detection only); the ECC scheme that
//! also corrects a single flipped bit replaces it behind the same three functions.

use crate::page::{BLOCK_SIZE, CHECKSUM_AREA, OFFSET_PAGE_NUMBER};

/// The verdict on one page read from position `expected_page_number`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PageCheck {
    /// Checksums match and the page number is the page's position.
    Good,
    /// Exactly one bit is flipped; `correct` can repair it in memory. `block` is the 8 KiB block,
    /// `bit` the bit's index within the page.
    Correctable { bit: usize },
    /// Checksums match, but the page says it belongs at another position (a misdirected write).
    WrongPageNumber { found: u32 },
    /// Damaged beyond correction (or never formatted).
    Bad,
}

fn block_checksum(page: &[u8], block: usize) -> u64 {
    let start = block * BLOCK_SIZE;
    let end = (start + BLOCK_SIZE).min(page.len());
    let data_start = if block == 0 { CHECKSUM_AREA.end } else { start };
    u64::from(crc32c::crc32c(&page[data_start..end]))
}

fn blocks(page: &[u8]) -> usize {
    page.len().div_ceil(BLOCK_SIZE)
}

/// Computes and stores the checksums of a page whose header and body are final.
pub fn seal(page: &mut [u8]) {
    for block in 0..blocks(page) {
        let sum = block_checksum(page, block);
        page[block * 8..block * 8 + 8].copy_from_slice(&sum.to_le_bytes());
    }
}

/// Checks a page read from position `expected_page_number`. Never modifies it.
pub fn verify(page: &[u8], expected_page_number: u32) -> PageCheck {
    for block in 0..blocks(page) {
        let mut stored = [0u8; 8];
        stored.copy_from_slice(&page[block * 8..block * 8 + 8]);
        if u64::from_le_bytes(stored) != block_checksum(page, block) {
            return PageCheck::Bad;
        }
    }
    let mut number = [0u8; 4];
    number.copy_from_slice(&page[OFFSET_PAGE_NUMBER..OFFSET_PAGE_NUMBER + 4]);
    let found = u32::from_le_bytes(number);
    if found != expected_page_number {
        return PageCheck::WrongPageNumber { found };
    }
    PageCheck::Good
}

/// Like `verify`, and repairs a correctable page in memory (the caller decides whether to report
/// and whether to write it back; the checksum test never writes).
pub fn correct(page: &mut [u8], expected_page_number: u32) -> PageCheck {
    verify(page, expected_page_number)
}
