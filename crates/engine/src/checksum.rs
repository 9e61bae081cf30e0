//! Page checksums: detect any damage to a page, correct a single flipped bit, and recognise a page
//! written at the wrong position. `docs/checksum.md` is the reference; this header is its summary.
//!
//! A page is cut into 8 KiB *blocks* (one for 4 and 8 KiB pages, four for 32 KiB pages), as ESE
//! does for its large pages, so that one flipped bit can be corrected per 8 KiB and a torn write
//! that mixes blocks of two pages is caught. Block `k` owns the 8-byte *slot* at bytes
//! `8k..8k+8` of the page's checksum area (bytes 0..32); unused slots are zero.
//!
//! A slot holds, little-endian:
//!
//! | bytes | field |
//! |------:|-------|
//! | 0..4  | `crc`: CRC-32C, seeded with (page number, block index), over the block's data, then over the slot's `ecc` |
//! | 4..8  | `ecc`: low 16 bits = XOR of the indices of all set data bits; high 16 bits = XOR of their complements; XOR [`ECC_WHITENING`] |
//!
//! The *data* of block `k ≥ 1` is the whole block; the data of block 0 is the block minus its own
//! slot (so it includes the slots of the other blocks and the page header with the page number;
//! block 0 is therefore sealed last and repaired first). Blocks `k ≥ 1` fold the page number read
//! from the header into their CRC seed, which binds them to their page; block 0 already holds the
//! page number in its data, and folds 0 so that its CRC stays a fixed linear code of its data.
//!
//! Invariants the code relies on (the proofs are in `docs/checksum.md`):
//!
//! * CRC-32C has Hamming distance ≥ 4 over a block (≤ 65,600 bits): every error of one to three
//!   bits in data+`ecc` changes the CRC. So a matching CRC is the whole fast path of [`verify`],
//!   and no ECC work is done for a good page.
//! * One flipped data bit at index `i` changes `ecc` by `(i, !i)`: the two halves of the syndrome
//!   XOR to `0xFFFF`. Two flipped data bits give halves that XOR to 0; a data bit together with an
//!   `ecc` bit gives halves whose XOR has 15 bits set; one `ecc` bit gives a one-bit syndrome.
//!   These cases never overlap, so a repair is only attempted on a single-bit pattern, and every
//!   repair is confirmed by the CRC before it is accepted.
//!
//! The page's bytes came from disk (or are about to go there), so no index here may panic:
//! `clippy::indexing_slicing` is denied, as in `node.rs`. Every range below is inside the page
//! once `block_count` accepted its length; a range that is not (never, short of a bug) reads
//! as empty, which fails the CRC and makes the page [`PageCheck::Bad`], and writes nothing.
#![deny(clippy::indexing_slicing)]

use crate::page::{BLOCK_SIZE, CHECKSUM_AREA, OFFSET_PAGE_NUMBER};

/// The verdict on one page read from position `expected_page_number`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PageCheck {
    /// Checksums match and the page number is the page's position.
    Good,
    /// Exactly one bit is flipped; [`correct`] repairs it in memory. `bit` is the bit's index
    /// within the page (byte `bit / 8`, bit `bit % 8` counted from the least significant).
    Correctable { bit: usize },
    /// Checksums match (after any single-bit repair), but the page says it belongs at another
    /// position (a misdirected write).
    WrongPageNumber { found: u32 },
    /// Damaged beyond correction, never formatted, or not a page size the engine uses.
    Bad,
}

/// Bytes of checksum per block.
pub const SLOT_SIZE: usize = 8;

/// Blocks the checksum area has room for: pages are at most 32 KiB.
pub const MAX_BLOCKS: usize = (CHECKSUM_AREA.end - CHECKSUM_AREA.start) / SLOT_SIZE;

/// Smallest page, and the unit page sizes come in.
pub const MIN_PAGE_SIZE: usize = 4096;

/// XORed into every stored `ecc`, so that an all-zero (never written) block does not have a
/// matching all-zero ECC; its two halves XOR to a value no single-bit error can produce.
pub const ECC_WHITENING: u32 = 0x6A09_E667;

/// Seed material of every CRC, so that our checksums never match another program's CRC-32C.
const CRC_DOMAIN: [u8; 4] = *b"JPpg";

const BITS_PER_BYTE: usize = 8;

/// Bit `b` of a word's bit index (0..63) is set exactly for the positions in mask `b`.
const WORD_INDEX_MASKS: [u64; 6] = [
    0xAAAA_AAAA_AAAA_AAAA,
    0xCCCC_CCCC_CCCC_CCCC,
    0xF0F0_F0F0_F0F0_F0F0,
    0xFF00_FF00_FF00_FF00,
    0xFFFF_0000_FFFF_0000,
    0xFFFF_FFFF_0000_0000,
];

/// Words per group of the ECC loop: the group's position supplies the high bits of a word index.
const GROUP_WORDS: usize = 16;
const GROUP_BYTES: usize = GROUP_WORDS * 8;

/// Number of 8 KiB blocks of a page of `len` bytes, or None if the length is not a page size
/// (a multiple of 4 KiB from 4 KiB to 32 KiB).
fn block_count(len: usize) -> Option<usize> {
    if len < MIN_PAGE_SIZE || !len.is_multiple_of(MIN_PAGE_SIZE) || len > MAX_BLOCKS * BLOCK_SIZE {
        return None;
    }
    Some(len.div_ceil(BLOCK_SIZE))
}

fn block_range(len: usize, block: usize) -> std::ops::Range<usize> {
    let start = block * BLOCK_SIZE;
    start..(start + BLOCK_SIZE).min(len)
}

/// Reads go through the checked reader: a page too short for a field has no value for it
/// (`None`), which the callers turn into [`PageCheck::Bad`], never a panic.
fn read_u32(page: &[u8], offset: usize) -> Option<u32> {
    jetproof_io::bytes::u32_at(page, offset)
}

fn write_u32(page: &mut [u8], offset: usize, value: u32) {
    if let Some(field) = page.get_mut(offset..offset + 4) {
        field.copy_from_slice(&value.to_le_bytes());
    }
}

/// The page number stored in the header (not necessarily the page's position); `None` if the
/// page is too short to hold one.
pub fn stored_page_number(page: &[u8]) -> Option<u32> {
    read_u32(page, OFFSET_PAGE_NUMBER)
}

fn stored_crc(page: &[u8], block: usize) -> Option<u32> {
    read_u32(page, block * SLOT_SIZE)
}

fn stored_ecc(page: &[u8], block: usize) -> Option<u32> {
    read_u32(page, block * SLOT_SIZE + 4)
}

/// The page number a block's CRC folds in: 0 for block 0 (it holds the number in its data);
/// `None` if the page is too short to hold a page number.
fn fold_of(page: &[u8], block: usize) -> Option<u32> {
    if block == 0 {
        Some(0)
    } else {
        stored_page_number(page)
    }
}

/// True if the block's CRC, computed now, is the one stored; false if it is not or the page is
/// too short to hold it.
fn crc_matches(page: &[u8], block: usize) -> bool {
    fold_of(page, block)
        .is_some_and(|fold| Some(block_crc(page, block, fold)) == stored_crc(page, block))
}

fn crc_seed(page_number: u32, block: usize) -> u32 {
    let mut seed = [0u8; 12];
    seed[0..4].copy_from_slice(&CRC_DOMAIN);
    seed[4..8].copy_from_slice(&page_number.to_le_bytes());
    seed[8..12].copy_from_slice(&(block as u32).to_le_bytes());
    jetproof_io::crc::crc32c(&seed)
}

/// The CRC of a block as it should be stored: over the data, then over the stored `ecc`.
fn block_crc(page: &[u8], block: usize, page_number: u32) -> u32 {
    let range = block_range(page.len(), block);
    let data_start = if block == 0 { SLOT_SIZE } else { range.start };
    let ecc_at = block * SLOT_SIZE + 4;
    let data = page.get(data_start..range.end).unwrap_or_default();
    let ecc = page.get(ecc_at..ecc_at + 4).unwrap_or_default();
    jetproof_io::crc::crc32c_append(
        jetproof_io::crc::crc32c_append(crc_seed(page_number, block), data),
        ecc,
    )
}

fn parity(word: u64) -> u16 {
    (word.count_ones() & 1) as u16
}

/// XOR of the indices (bit `i` = byte `i / 8`, bit `i % 8`) of the set bits of `bytes`, and the
/// parity of their number. `bytes.len()` is a multiple of 128 and at most 8 KiB.
///
/// XOR is linear, so the per-bit sums never need a loop over bits: bits 0..5 of the result are
/// the parities of (XOR of all words) under [`WORD_INDEX_MASKS`]; bit `6 + j` is the parity of
/// the XOR of the words whose word index has bit `j` set. Words are taken 16 at a time, so that
/// bits 6..9 come from the word's position within its group and bits 10..15 from the group's
/// index. The loop keeps one accumulator per position (the XOR of that word of every group: 16
/// independent lanes, which the compiler keeps in vector registers) and folds each group's sum
/// into the six group-index accumulators; positions are combined once at the end. (Until
/// 2026-12-01 each group combined its 16 words into the four position sums itself: about three
/// XORs per 8 bytes, 2.3–3.0 µs per 8 KiB block here against 1.4–1.6 µs now; the sealing of
/// every page written was ~4% of a run's CPU on RAM-backed storage.)
fn xor_of_set_bit_indices(bytes: &[u8], skip_first_word: bool) -> (u16, bool) {
    let mut lanes = [0u64; GROUP_WORDS];
    let mut by_group = [0u64; 6];
    for (group, chunk) in bytes.chunks_exact(GROUP_BYTES).enumerate() {
        let mut sum = [0u64; GROUP_WORDS];
        for ((lane, word), raw) in lanes
            .iter_mut()
            .zip(sum.iter_mut())
            .zip(chunk.chunks_exact(8))
        {
            let mut le = [0u8; 8];
            le.copy_from_slice(raw);
            *word = u64::from_le_bytes(le);
            *lane ^= *word;
        }
        // The group's sum, halving: independent XORs, not a chain of sixteen.
        let mut half = GROUP_WORDS / 2;
        while half > 0 {
            let (low, high) = sum.split_at_mut(half);
            for (a, b) in low.iter_mut().zip(high.iter()) {
                *a ^= *b;
            }
            half /= 2;
        }
        let total = sum.first().copied().unwrap_or(0);
        for (j, acc) in by_group.iter_mut().enumerate() {
            let select = 0u64.wrapping_sub(((group >> j) & 1) as u64);
            *acc ^= total & select;
        }
    }
    if skip_first_word && let Some(first) = bytes.first_chunk::<8>() {
        // Word 0 has index 0: it is in lane 0 and in group 0's sum, which no group-index
        // accumulator takes, so XORing it out of lane 0 removes it.
        lanes[0] ^= u64::from_le_bytes(*first);
    }
    let mut all = 0u64;
    let mut within_group = [0u64; 4];
    for (position, lane) in lanes.iter().enumerate() {
        all ^= lane;
        for (j, acc) in within_group.iter_mut().enumerate() {
            if (position >> j) & 1 == 1 {
                *acc ^= lane;
            }
        }
    }
    let mut index = 0u16;
    for (b, mask) in WORD_INDEX_MASKS.iter().enumerate() {
        index |= parity(all & mask) << b;
    }
    for (j, acc) in within_group.iter().enumerate() {
        index |= parity(*acc) << (6 + j);
    }
    for (j, acc) in by_group.iter().enumerate() {
        index |= parity(*acc) << (10 + j);
    }
    (index, parity(all) == 1)
}

/// The `ecc` of a block as it should be stored.
fn block_ecc(page: &[u8], block: usize) -> u32 {
    let range = block_range(page.len(), block);
    let (index, odd) = xor_of_set_bit_indices(page.get(range).unwrap_or_default(), block == 0);
    let complement = if odd { index ^ 0xFFFF } else { index };
    ((u32::from(complement) << 16) | u32::from(index)) ^ ECC_WHITENING
}

/// Computes and stores the checksums of a page whose header (page number included) and body are
/// final. Unused slots of the checksum area are zeroed.
///
/// # Panics
/// If `page.len()` is not a page size (a multiple of 4 KiB up to 32 KiB): a programming error.
pub fn seal(page: &mut [u8]) {
    let (Some(blocks), Some(page_number)) = (block_count(page.len()), stored_page_number(page))
    else {
        panic!(
            "checksum::seal: a page of {} bytes; pages are 4 KiB to 32 KiB in steps of 4 KiB",
            page.len()
        );
    };
    if let Some(unused_slots) = page.get_mut(blocks * SLOT_SIZE..CHECKSUM_AREA.end) {
        unused_slots.fill(0);
    }
    // Block 0's data holds the other blocks' slots: it is sealed last.
    for block in (1..blocks).chain(std::iter::once(0)) {
        let ecc = block_ecc(page, block);
        write_u32(page, block * SLOT_SIZE + 4, ecc);
        // The page number lies outside the checksum area: sealing does not change it.
        let fold = if block == 0 { 0 } else { page_number };
        let crc = block_crc(page, block, fold);
        write_u32(page, block * SLOT_SIZE, crc);
    }
}

/// True if every block's CRC matches: the page holds no error of up to three bits in any block.
fn all_crcs_match(page: &[u8], blocks: usize) -> bool {
    (0..blocks).all(|block| crc_matches(page, block))
}

/// Checks a page read from position `expected_page_number`. Never modifies it.
pub fn verify(page: &[u8], expected_page_number: u32) -> PageCheck {
    let Some(blocks) = block_count(page.len()) else {
        return PageCheck::Bad;
    };
    if all_crcs_match(page, blocks) {
        let Some(found) = stored_page_number(page) else {
            return PageCheck::Bad;
        };
        return if found == expected_page_number {
            PageCheck::Good
        } else {
            PageCheck::WrongPageNumber { found }
        };
    }
    // The rare path: find out on a copy whether one bit explains the damage.
    let mut copy = page.to_vec();
    correct(&mut copy, expected_page_number)
}

/// Like [`verify`], and repairs a correctable page in memory (the caller decides whether to report
/// and whether to write it back; the checksum test never writes). A page found `Bad` is left as
/// it was. A page at the wrong position is still repaired if it had one flipped bit.
pub fn correct(page: &mut [u8], expected_page_number: u32) -> PageCheck {
    let Some(blocks) = block_count(page.len()) else {
        return PageCheck::Bad;
    };
    let mut repaired: Option<usize> = None;
    // Block 0 first: it holds the page number the others fold in, and their slots.
    for block in 0..blocks {
        match repair_block(page, block) {
            BlockRepair::Intact => {}
            BlockRepair::Fixed { bit } => {
                if let Some(first) = repaired {
                    // Two blocks each explained by one bit: two flipped bits are not correctable.
                    flip_bit(page, bit);
                    flip_bit(page, first);
                    return PageCheck::Bad;
                }
                repaired = Some(bit);
            }
            BlockRepair::Bad => {
                if let Some(first) = repaired {
                    flip_bit(page, first);
                }
                return PageCheck::Bad;
            }
        }
    }
    let Some(found) = stored_page_number(page) else {
        return PageCheck::Bad;
    };
    match repaired {
        _ if found != expected_page_number => PageCheck::WrongPageNumber { found },
        Some(bit) => PageCheck::Correctable { bit },
        None => PageCheck::Good,
    }
}

enum BlockRepair {
    Intact,
    Fixed { bit: usize },
    Bad,
}

fn flip_bit(page: &mut [u8], bit: usize) {
    if let Some(byte) = page.get_mut(bit / BITS_PER_BYTE) {
        *byte ^= 1 << (bit % BITS_PER_BYTE);
    }
}

/// Flips `bit` and keeps the flip only if the block's CRC then matches.
fn try_flip(page: &mut [u8], block: usize, bit: usize) -> BlockRepair {
    flip_bit(page, bit);
    if crc_matches(page, block) {
        BlockRepair::Fixed { bit }
    } else {
        flip_bit(page, bit);
        BlockRepair::Bad
    }
}

/// Checks one block and, if exactly one bit of its data or its slot is flipped, repairs it.
/// See the module header for why the cases below are disjoint.
fn repair_block(page: &mut [u8], block: usize) -> BlockRepair {
    let (Some(fold), Some(stored), Some(stored_ecc)) = (
        fold_of(page, block),
        stored_crc(page, block),
        stored_ecc(page, block),
    ) else {
        return BlockRepair::Bad;
    };
    let crc = block_crc(page, block, fold);
    if crc == stored {
        return BlockRepair::Intact;
    }
    let syndrome = block_ecc(page, block) ^ stored_ecc;
    let slot_bit = block * SLOT_SIZE * BITS_PER_BYTE;
    if syndrome == 0 {
        // Data and ecc agree: only the stored CRC can be damaged.
        let difference = crc ^ stored;
        if difference.count_ones() == 1 {
            let bit = slot_bit + difference.trailing_zeros() as usize;
            flip_bit(page, bit);
            return BlockRepair::Fixed { bit };
        }
        return BlockRepair::Bad;
    }
    if syndrome.count_ones() == 1 {
        // One bit of the stored ecc (a data bit would change 16 bits of the syndrome).
        let bit = slot_bit + 4 * BITS_PER_BYTE + syndrome.trailing_zeros() as usize;
        return try_flip(page, block, bit);
    }
    let index = (syndrome & 0xFFFF) as usize;
    if (syndrome >> 16) as usize ^ index != 0xFFFF {
        return BlockRepair::Bad;
    }
    let range = block_range(page.len(), block);
    let in_own_slot = block == 0 && index < SLOT_SIZE * BITS_PER_BYTE;
    if index >= range.len() * BITS_PER_BYTE || in_own_slot {
        return BlockRepair::Bad;
    }
    try_flip(page, block, range.start * BITS_PER_BYTE + index)
}

#[cfg(test)]
#[allow(clippy::indexing_slicing)]
mod tests {
    use super::*;
    use crate::page::{HEADER_SIZE, OFFSET_PAGE_TYPE, OFFSET_UPDATE_STAMP};
    use rand::rngs::StdRng;
    use rand::{Rng, RngCore, SeedableRng};

    const PAGE_SIZES: [usize; 4] = [4096, 8192, 16384, 32768];

    /// A sealed page with a realistic header and a seeded random body.
    fn sample_page(size: usize, page_number: u32, seed: u64) -> Vec<u8> {
        let mut rng = StdRng::seed_from_u64(seed);
        let mut page = vec![0u8; size];
        page[OFFSET_PAGE_NUMBER..OFFSET_PAGE_NUMBER + 4]
            .copy_from_slice(&page_number.to_le_bytes());
        page[OFFSET_PAGE_TYPE] = 5;
        page[OFFSET_UPDATE_STAMP..OFFSET_UPDATE_STAMP + 8].copy_from_slice(&seed.to_le_bytes());
        rng.fill_bytes(&mut page[HEADER_SIZE..]);
        seal(&mut page);
        page
    }

    /// The ECC by its definition, one bit at a time, to check the word-parallel version.
    fn slow_index_xor(bytes: &[u8], skip_first_word: bool) -> (u16, bool) {
        let mut index = 0usize;
        let mut count = 0usize;
        let start = if skip_first_word { 64 } else { 0 };
        for bit in start..bytes.len() * 8 {
            if bytes[bit / 8] >> (bit % 8) & 1 == 1 {
                index ^= bit;
                count += 1;
            }
        }
        (index as u16, count % 2 == 1)
    }

    #[test]
    fn checksum_ecc_matches_its_definition() {
        let seed = 0xECC;
        let mut rng = StdRng::seed_from_u64(seed);
        for len in [128usize, 4096, 8192] {
            for density in [0.0, 0.001, 0.5, 1.0] {
                let bytes: Vec<u8> = (0..len)
                    .map(|_| (0..8).fold(0u8, |b, i| b | (u8::from(rng.random_bool(density)) << i)))
                    .collect();
                for skip in [false, true] {
                    assert_eq!(
                        xor_of_set_bit_indices(&bytes, skip),
                        slow_index_xor(&bytes, skip),
                        "len {len} density {density} skip {skip} seed {seed}"
                    );
                }
            }
        }
    }

    #[test]
    fn checksum_sealed_pages_verify_good() {
        for (i, size) in PAGE_SIZES.into_iter().enumerate() {
            let page = sample_page(size, 1000 + i as u32, i as u64);
            assert_eq!(
                verify(&page, 1000 + i as u32),
                PageCheck::Good,
                "size {size}"
            );
            let mut copy = page.clone();
            assert_eq!(correct(&mut copy, 1000 + i as u32), PageCheck::Good);
            assert_eq!(copy, page);
            // Unused slots are zero.
            let blocks = size.div_ceil(BLOCK_SIZE);
            assert!(
                page[blocks * SLOT_SIZE..CHECKSUM_AREA.end]
                    .iter()
                    .all(|&b| b == 0)
            );
        }
    }

    /// Flips every bit of a page, one at a time, and checks each is found and undone exactly.
    fn every_single_bit_flip_is_corrected(size: usize, seed: u64) {
        let page_number = 77 + seed as u32;
        let original = sample_page(size, page_number, seed);
        let mut page = original.clone();
        for bit in 0..size * 8 {
            flip_bit(&mut page, bit);
            assert_eq!(
                verify(&page, page_number),
                PageCheck::Correctable { bit },
                "size {size} bit {bit} seed {seed}"
            );
            assert_eq!(
                correct(&mut page, page_number),
                PageCheck::Correctable { bit },
                "size {size} bit {bit} seed {seed}"
            );
            assert!(
                page == original,
                "size {size} bit {bit}: corrected page differs"
            );
        }
    }

    #[test]
    fn checksum_every_single_bit_flip_4k() {
        every_single_bit_flip_is_corrected(4096, 4);
    }

    #[test]
    fn checksum_every_single_bit_flip_8k() {
        every_single_bit_flip_is_corrected(8192, 8);
    }

    #[test]
    fn checksum_every_single_bit_flip_16k() {
        every_single_bit_flip_is_corrected(16384, 16);
    }

    #[test]
    fn checksum_every_single_bit_flip_32k() {
        every_single_bit_flip_is_corrected(32768, 32);
    }

    #[test]
    fn checksum_two_bit_flips_are_bad() {
        let seed = 0x2B17;
        let mut rng = StdRng::seed_from_u64(seed);
        for size in PAGE_SIZES {
            let original = sample_page(size, 5, seed);
            let bits = size * 8;
            let mut pairs: Vec<(usize, usize)> = (0..3000)
                .map(|_| (rng.random_range(0..bits), rng.random_range(0..bits)))
                .collect();
            // Pairs that stress the ECC: both in one slot, in the page number, adjacent bits,
            // and each bit paired with the same bit of another block.
            pairs.extend((0..64).map(|b| (b, (b + 1) % 64)));
            pairs.extend((0..32).map(|b| (OFFSET_PAGE_NUMBER * 8 + b, rng.random_range(0..bits))));
            pairs.extend(
                (0..bits)
                    .step_by(977)
                    .map(|b| (b, (b + BLOCK_SIZE * 8) % bits)),
            );
            for (a, b) in pairs {
                if a == b {
                    continue;
                }
                let mut page = original.clone();
                flip_bit(&mut page, a);
                flip_bit(&mut page, b);
                let damaged = page.clone();
                assert_eq!(
                    verify(&page, 5),
                    PageCheck::Bad,
                    "size {size} bits {a} {b} seed {seed}"
                );
                assert_eq!(
                    correct(&mut page, 5),
                    PageCheck::Bad,
                    "size {size} bits {a} {b}"
                );
                assert!(page == damaged, "a bad page is left as it was");
            }
        }
    }

    #[test]
    fn checksum_garbage_and_blank_pages_are_bad() {
        let seed = 0x6A4B;
        let mut rng = StdRng::seed_from_u64(seed);
        for size in PAGE_SIZES {
            assert_eq!(
                verify(&vec![0u8; size], 0),
                PageCheck::Bad,
                "zero page {size}"
            );
            assert_eq!(
                verify(&vec![0xFFu8; size], 0),
                PageCheck::Bad,
                "0xFF page {size}"
            );
            for round in 0..200 {
                let mut page = vec![0u8; size];
                rng.fill_bytes(&mut page);
                assert_eq!(
                    verify(&page, 3),
                    PageCheck::Bad,
                    "size {size} round {round} seed {seed}"
                );
            }
            // A good page with one block overwritten by garbage or zeros (a torn write).
            let original = sample_page(size, 9, seed);
            for block in 0..size.div_ceil(BLOCK_SIZE) {
                let range = block_range(size, block);
                let mut page = original.clone();
                page[range.clone()].fill(0);
                assert_eq!(
                    verify(&page, 9),
                    PageCheck::Bad,
                    "zeroed block {block} of {size}"
                );
                rng.fill_bytes(&mut page[range]);
                assert_eq!(
                    verify(&page, 9),
                    PageCheck::Bad,
                    "garbage block {block} of {size}"
                );
            }
        }
    }

    #[test]
    fn checksum_page_at_wrong_position_is_reported() {
        for size in PAGE_SIZES {
            let page = sample_page(size, 41, 1);
            assert_eq!(verify(&page, 42), PageCheck::WrongPageNumber { found: 41 });
            // With one bit flipped as well, the page is still recognised as the misplaced one.
            let mut flipped = page.clone();
            flip_bit(&mut flipped, size * 8 - 3);
            assert_eq!(
                verify(&flipped, 42),
                PageCheck::WrongPageNumber { found: 41 }
            );
        }
    }

    #[test]
    fn checksum_blocks_of_two_pages_mixed_are_bad() {
        // A torn write: the first 8 KiB of page 7 over page 8 (same content otherwise).
        let seven = sample_page(32768, 7, 3);
        let mut eight = sample_page(32768, 8, 4);
        eight[BLOCK_SIZE..2 * BLOCK_SIZE].copy_from_slice(&seven[BLOCK_SIZE..2 * BLOCK_SIZE]);
        assert_eq!(verify(&eight, 8), PageCheck::Bad);
        // Blocks of one page swapped with each other.
        let mut swapped = sample_page(32768, 8, 5);
        let (low, high) = swapped.split_at_mut(2 * BLOCK_SIZE);
        low[BLOCK_SIZE..].swap_with_slice(&mut high[..BLOCK_SIZE]);
        assert_eq!(verify(&swapped, 8), PageCheck::Bad);
    }

    #[test]
    fn checksum_short_input_has_no_page_number_not_a_panic() {
        for size in [0usize, 3, OFFSET_PAGE_NUMBER, OFFSET_PAGE_NUMBER + 3] {
            assert_eq!(stored_page_number(&vec![0xa5u8; size]), None, "size {size}");
            assert_eq!(stored_crc(&vec![0xa5u8; size], 4), None, "size {size}");
        }
        let page = sample_page(4096, 77, 1);
        assert_eq!(stored_page_number(&page), Some(77));
        assert_eq!(
            stored_page_number(&page[..OFFSET_PAGE_NUMBER + 4]),
            Some(77)
        );
    }

    #[test]
    fn checksum_odd_sizes_are_bad_not_a_panic() {
        for size in [0usize, 8, 100, 4095, 4097, 65536] {
            assert_eq!(verify(&vec![0u8; size], 0), PageCheck::Bad, "size {size}");
        }
    }
}
