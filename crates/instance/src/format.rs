//! The byte layout of the engine's log records (`docs/log.md`, "The engine's log records").
//!
//! The log crate stores `record_type`, `transaction_id` and an opaque payload; this module gives
//! the payload its meaning. One [`RECORD_PAGE_CHANGE`] record per page change (physiological, as
//! ESE logs: page number, update stamp and what redo needs of the change; images without their
//! longest run of zeros, the page's free-space hole, as PostgreSQL logs full-page images), and one
//! [`RECORD_COMMIT`] record per transaction that changed anything. Recovery
//! decodes with [`decode`]; every length is checked against the payload, so a decoded record never
//! indexes past its bytes (the log's CRCs already caught damage; this is the pair check).
#![deny(clippy::indexing_slicing, clippy::unwrap_used)]

use jetproof_engine::change::{OwnedPageChange, PageChange};
use jetproof_io::bytes::{u32_at, u64_at};

/// `record_type` of a page change record.
pub const RECORD_PAGE_CHANGE: u8 = 1;
/// `record_type` of a commit record.
pub const RECORD_COMMIT: u8 = 2;

/// Bytes before the variable part of a page change payload in the first layout (written until
/// 2026-11-24, still decoded): page, kind, flags, two zero bytes, update stamp, index and the
/// three lengths at fixed width.
pub const PAGE_CHANGE_HEADER_BYTES: usize = 36;
/// Fixed bytes of the compact layout (written since 2026-11-24): page (u32), kind with
/// [`COMPACT_LAYOUT`] set, flags, update stamp (u64); then the index and the three lengths as
/// LEB128 varints (usually 1 – 3 bytes each), then the key and the two values. About 16 bytes less
/// per page change than the first layout.
pub const COMPACT_FIXED_BYTES: usize = 14;
/// Set in the kind byte (offset 4 in both layouts) of a compact page change. Every kind is below
/// it, so a build that knows only the first layout refuses a compact record as an unknown kind
/// instead of misreading it.
pub const COMPACT_LAYOUT: u8 = 0x80;
/// Bytes of a commit payload.
pub const COMMIT_BYTES: usize = 8;

const KIND_IMAGE: u8 = 1;
const KIND_LEAF_INSERT: u8 = 2;
/// Leaf replace with the old value (the first layout); still decoded, the old value dropped.
const KIND_LEAF_REPLACE_V1: u8 = 3;
/// Leaf delete with the old value (the first layout); still decoded, the old value dropped.
const KIND_LEAF_DELETE_V1: u8 = 4;
const KIND_MAP_BIT: u8 = 5;
const KIND_LEAF_REPLACE: u8 = 6;
const KIND_LEAF_DELETE: u8 = 7;
const KIND_NODE_SPLICE: u8 = 8;
/// A record marked deleted (flags bit 0 set) or its mark cleared: the key only.
const KIND_LEAF_MARK: u8 = 9;
/// A leaf replace ([`KIND_LEAF_REPLACE`]'s layout) that is its transaction's first change of the
/// key: the record's value on the page just before it is the transaction's undo (ESE's
/// deferred before image), which recovery takes from the page when it redoes the change.
/// Builds from before 2026-11-23 refuse it (unknown kind) rather than recover without it.
const KIND_LEAF_REPLACE_UNDO: u8 = 10;
/// A leaf insert ([`KIND_LEAF_INSERT`]'s layout) that is its transaction's first change of a key
/// that had no live record: its undo is to remove the key, implied by the record (as ESE's
/// insert record is its own undo), so no undo record is logged for it.
const KIND_LEAF_INSERT_UNDO: u8 = 11;
/// A leaf mark setting the deleted flag ([`KIND_LEAF_MARK`]'s layout) that is its transaction's
/// first change of the key: its undo is to clear the mark (ESE's flag delete record).
const KIND_LEAF_MARK_UNDO: u8 = 12;

/// What a page change record says of its transaction's undo for the key it changes (the
/// transaction's first change of the key; [`crate::undo`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RecordUndo {
    /// Nothing: the undo, if any, is an undo record of its own.
    #[default]
    None,
    /// A leaf replace: the key's value on the page just before the change is the undo (ESE's
    /// deferred before image: logged only if the page was written while the transaction was
    /// open, [`crate::deferred`]).
    OnPage,
    /// A leaf insert of a key that had no live record: undo removes it.
    Absent,
    /// A leaf mark of a live record: undo clears the mark.
    Marked,
}

/// The largest page an image may describe (the largest page size), so a damaged hole length
/// cannot ask for a huge allocation.
pub const MAX_IMAGE_BYTES: usize = 32 * 1024;
/// Zero runs shorter than this are not worth leaving out of an image.
const MIN_HOLE_BYTES: usize = 64;

/// The longest run of zero bytes in `data` (the first, if several are as long), as the range
/// an image leaves out; empty if no run reaches `MIN_HOLE_BYTES`. In a B+tree node it is the
/// free space between the slot array and the records (the engine keeps it zeroed); in a free
/// page, everything after the header.
///
/// Scans 8 bytes at a time: a run that can be the answer (at least `MIN_HOLE_BYTES`) spans
/// words, so only the zero bytes at the two ends of each non-zero word matter (a run inside one
/// word is at most 6 bytes). Gives exactly what a byte-by-byte scan gives (test
/// `image_hole_matches_a_byte_scan`); it was 3–4% of a run's CPU byte by byte.
pub fn image_hole(data: &[u8]) -> std::ops::Range<usize> {
    let mut best = 0..0;
    // Where the current run of zeros began: just after the last non-zero byte seen.
    let mut run_start = 0;
    fn end_run(at: usize, run_start: usize, best: &mut std::ops::Range<usize>) {
        if at - run_start > best.len() {
            *best = run_start..at;
        }
    }
    let words = data.chunks_exact(8);
    let tail = words.remainder();
    for (n, chunk) in words.enumerate() {
        let mut raw = [0u8; 8];
        raw.copy_from_slice(chunk);
        let word = u64::from_le_bytes(raw);
        if word == 0 {
            continue;
        }
        let at = n * 8;
        // Little-endian: the low byte is the first in memory.
        end_run(
            at + (word.trailing_zeros() / 8) as usize,
            run_start,
            &mut best,
        );
        run_start = at + 8 - (word.leading_zeros() / 8) as usize;
    }
    let tail_at = data.len() - tail.len();
    for (i, &byte) in tail.iter().enumerate() {
        if byte != 0 {
            end_run(tail_at + i, run_start, &mut best);
            run_start = tail_at + i + 1;
        }
    }
    end_run(data.len(), run_start, &mut best);
    if best.len() < MIN_HOLE_BYTES {
        0..0
    } else {
        best
    }
}

/// A decoded engine log record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EngineRecord {
    /// One change to one page, made with `update_stamp`.
    PageChange {
        page: u32,
        update_stamp: u64,
        change: OwnedPageChange,
        /// What the record says of its transaction's undo for the key.
        undo: RecordUndo,
    },
    /// The transaction committed; it had logged `page_changes` page change records before.
    Commit { page_changes: u64 },
}

/// Why a payload could not be decoded.
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    #[error("unknown log record type {0}")]
    UnknownRecordType(u8),
    #[error("unknown page change kind {0}")]
    UnknownChangeKind(u8),
    #[error("log record payload of {found} bytes, expected {expected}")]
    BadLength { expected: usize, found: usize },
    #[error("page change index {0} does not fit this machine's usize")]
    IndexTooLarge(u64),
    #[error("page image of {0} bytes, more than a page")]
    ImageTooLarge(u64),
    #[error("page change length field is not a valid varint (truncated or too long)")]
    BadVarint,
}

/// Writes the payload of a page change record to `out` (cleared first).
pub fn encode_page_change(
    page: u32,
    update_stamp: u64,
    change: &PageChange<'_>,
    out: &mut Vec<u8>,
) {
    out.clear();
    append_page_change(page, update_stamp, change, out);
}

/// [`encode_page_change`] of a change that is its transaction's first change of the key, whose
/// record carries the transaction's undo for it ([`RecordUndo`]): a leaf replace with
/// [`RecordUndo::OnPage`], a leaf insert with [`RecordUndo::Absent`], a leaf mark setting the flag
/// with [`RecordUndo::Marked`]. Returns whether it did; any other pairing is encoded as usual
/// (false), and the caller logs an undo record instead.
pub fn encode_page_change_with_undo(
    page: u32,
    update_stamp: u64,
    change: &PageChange<'_>,
    undo: RecordUndo,
    out: &mut Vec<u8>,
) -> bool {
    encode_page_change(page, update_stamp, change, out);
    let kind = match (change, undo) {
        (PageChange::LeafReplace { .. }, RecordUndo::OnPage) => KIND_LEAF_REPLACE_UNDO,
        (PageChange::LeafInsert { .. }, RecordUndo::Absent) => KIND_LEAF_INSERT_UNDO,
        (PageChange::LeafMark { deleted: true, .. }, RecordUndo::Marked) => KIND_LEAF_MARK_UNDO,
        _ => return false,
    };
    if let Some(at) = out.get_mut(4) {
        *at = kind | COMPACT_LAYOUT;
    }
    true
}

/// Appends the payload of a page change record to the end of `out` (which keeps what it
/// holds), so a group's members are encoded straight into the group's payload
/// ([`crate::group::GroupBuilder`]).
pub fn append_page_change(
    page: u32,
    update_stamp: u64,
    change: &PageChange<'_>,
    out: &mut Vec<u8>,
) {
    let (kind, flags, index, key, first, second): (u8, u8, u64, &[u8], &[u8], &[u8]) = match *change
    {
        // The index field holds the hole's length; the parts before and after it are the two
        // values.
        PageChange::Image { data } => {
            let hole = image_hole(data);
            (
                KIND_IMAGE,
                0,
                hole.len() as u64,
                &[],
                data.get(..hole.start).unwrap_or(data),
                data.get(hole.end..).unwrap_or(&[]),
            )
        }
        PageChange::LeafInsert { index, key, value } => {
            (KIND_LEAF_INSERT, 0, index as u64, key, value, &[])
        }
        PageChange::LeafReplace { index, key, value } => {
            (KIND_LEAF_REPLACE, 0, index as u64, key, value, &[])
        }
        PageChange::LeafDelete { index, key } => (KIND_LEAF_DELETE, 0, index as u64, key, &[], &[]),
        PageChange::LeafMark {
            index,
            key,
            deleted,
        } => (
            KIND_LEAF_MARK,
            u8::from(deleted),
            index as u64,
            key,
            &[],
            &[],
        ),
        // The index field packs the splice: keep, at, remove, level (u16 each, low to high).
        PageChange::NodeSplice {
            level,
            keep,
            at,
            remove,
            records,
        } => (
            KIND_NODE_SPLICE,
            0,
            u64::from(keep)
                | u64::from(at) << 16
                | u64::from(remove) << 32
                | u64::from(level) << 48,
            &[],
            records,
            &[],
        ),
        PageChange::MapBit { bit, used } => (KIND_MAP_BIT, u8::from(used), bit, &[], &[], &[]),
    };
    out.reserve(
        COMPACT_FIXED_BYTES + 4 * MAX_VARINT_BYTES + key.len() + first.len() + second.len(),
    );
    out.extend_from_slice(&page.to_le_bytes());
    out.push(kind | COMPACT_LAYOUT);
    out.push(flags);
    out.extend_from_slice(&update_stamp.to_le_bytes());
    put_varint(out, index);
    put_varint(out, key.len() as u64);
    put_varint(out, first.len() as u64);
    put_varint(out, second.len() as u64);
    out.extend_from_slice(key);
    out.extend_from_slice(first);
    out.extend_from_slice(second);
}

/// The payload of a commit record.
pub fn encode_commit(page_changes: u64) -> [u8; COMMIT_BYTES] {
    page_changes.to_le_bytes()
}

/// Decodes a record read back from the log.
pub fn decode(record_type: u8, payload: &[u8]) -> Result<EngineRecord, DecodeError> {
    match record_type {
        RECORD_COMMIT => {
            let bad_length = DecodeError::BadLength {
                expected: COMMIT_BYTES,
                found: payload.len(),
            };
            if payload.len() != COMMIT_BYTES {
                return Err(bad_length);
            }
            Ok(EngineRecord::Commit {
                page_changes: u64_at(payload, 0).ok_or(bad_length)?,
            })
        }
        RECORD_PAGE_CHANGE => decode_page_change(payload),
        other => Err(DecodeError::UnknownRecordType(other)),
    }
}

/// The longest LEB128 encoding of a u64.
const MAX_VARINT_BYTES: usize = 10;

fn put_varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push(value as u8 | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// The LEB128 varint at `*at`, which moves past it; `None` if it is truncated or longer than a
/// u64 allows.
fn take_varint(bytes: &[u8], at: &mut usize) -> Option<u64> {
    let mut value = 0u64;
    for n in 0..MAX_VARINT_BYTES {
        let byte = *bytes.get(*at)?;
        *at += 1;
        let part = u64::from(byte & 0x7f);
        // The tenth byte holds the top bit alone.
        if n == MAX_VARINT_BYTES - 1 && part > 1 {
            return None;
        }
        value |= part << (7 * n);
        if byte & 0x80 == 0 {
            return Some(value);
        }
    }
    None
}

/// A page change payload taken apart, in either layout.
struct Parts<'a> {
    page: u32,
    kind: u8,
    flags: u8,
    update_stamp: u64,
    index_or_bit: u64,
    key: &'a [u8],
    first: &'a [u8],
    second: &'a [u8],
}

/// A page change's key, first and second values.
type Body<'a> = (&'a [u8], &'a [u8], &'a [u8]);

/// Splits `body` into key, first and second of the given lengths, which must use it exactly.
fn split_body(
    body: &[u8],
    fixed: usize,
    key_len: usize,
    first_len: usize,
    second_len: usize,
) -> Result<Body<'_>, DecodeError> {
    let found = fixed + body.len();
    let expected = key_len
        .checked_add(first_len)
        .and_then(|n| n.checked_add(second_len))
        .and_then(|n| n.checked_add(fixed))
        .ok_or(DecodeError::BadLength {
            expected: usize::MAX,
            found,
        })?;
    if found != expected {
        return Err(DecodeError::BadLength { expected, found });
    }
    let (key, rest) = body.split_at(key_len);
    let (first, second) = rest.split_at(first_len);
    Ok((key, first, second))
}

/// The first layout: fixed-width header of [`PAGE_CHANGE_HEADER_BYTES`].
fn split_first_layout(payload: &[u8]) -> Result<Parts<'_>, DecodeError> {
    // A payload shorter than the fixed header is damage: every field read below says so.
    let short = || DecodeError::BadLength {
        expected: PAGE_CHANGE_HEADER_BYTES,
        found: payload.len(),
    };
    let header = payload.get(..PAGE_CHANGE_HEADER_BYTES).ok_or_else(short)?;
    let length = |at| u32_at(header, at).map(|n| n as usize).ok_or_else(short);
    let body = payload.get(PAGE_CHANGE_HEADER_BYTES..).unwrap_or(&[]);
    let (key, first, second) = split_body(
        body,
        PAGE_CHANGE_HEADER_BYTES,
        length(24)?,
        length(28)?,
        length(32)?,
    )?;
    Ok(Parts {
        page: u32_at(header, 0).ok_or_else(short)?,
        kind: header.get(4).copied().ok_or_else(short)?,
        flags: header.get(5).copied().ok_or_else(short)?,
        update_stamp: u64_at(header, 8).ok_or_else(short)?,
        index_or_bit: u64_at(header, 16).ok_or_else(short)?,
        key,
        first,
        second,
    })
}

/// The compact layout: [`COMPACT_FIXED_BYTES`], then four varints.
fn split_compact_layout(payload: &[u8]) -> Result<Parts<'_>, DecodeError> {
    let short = || DecodeError::BadLength {
        expected: COMPACT_FIXED_BYTES,
        found: payload.len(),
    };
    let header = payload.get(..COMPACT_FIXED_BYTES).ok_or_else(short)?;
    let mut at = COMPACT_FIXED_BYTES;
    let mut varint = || take_varint(payload, &mut at).ok_or(DecodeError::BadVarint);
    let index_or_bit = varint()?;
    let key_len = varint()?;
    let first_len = varint()?;
    let second_len = varint()?;
    let length = |n: u64| usize::try_from(n).map_err(|_| DecodeError::IndexTooLarge(n));
    let body = payload.get(at..).unwrap_or(&[]);
    let (key, first, second) = split_body(
        body,
        at,
        length(key_len)?,
        length(first_len)?,
        length(second_len)?,
    )?;
    Ok(Parts {
        page: u32_at(header, 0).ok_or_else(short)?,
        kind: header.get(4).copied().ok_or_else(short)? & !COMPACT_LAYOUT,
        flags: header.get(5).copied().ok_or_else(short)?,
        update_stamp: u64_at(header, 6).ok_or_else(short)?,
        index_or_bit,
        key,
        first,
        second,
    })
}

fn decode_page_change(payload: &[u8]) -> Result<EngineRecord, DecodeError> {
    let compact = payload
        .get(4)
        .is_some_and(|&kind| kind & COMPACT_LAYOUT != 0);
    let Parts {
        page,
        kind,
        flags,
        update_stamp,
        index_or_bit,
        key,
        first,
        second,
    } = if compact {
        split_compact_layout(payload)?
    } else {
        split_first_layout(payload)?
    };
    let (key_len, first_len, second_len) = (key.len(), first.len(), second.len());
    let index =
        || usize::try_from(index_or_bit).map_err(|_| DecodeError::IndexTooLarge(index_or_bit));
    let expect_empty = |part: &[u8], what_len: usize| {
        if part.is_empty() {
            Ok(())
        } else {
            Err(DecodeError::BadLength {
                expected: payload.len() - what_len,
                found: payload.len(),
            })
        }
    };
    let u16_at = |shift: u32| (index_or_bit >> shift) as u16;
    let change = match kind {
        KIND_IMAGE => {
            expect_empty(key, key_len)?;
            let hole = usize::try_from(index_or_bit)
                .ok()
                .filter(|&h| h <= MAX_IMAGE_BYTES)
                .ok_or(DecodeError::ImageTooLarge(index_or_bit))?;
            let total = first.len() + hole + second.len();
            if total > MAX_IMAGE_BYTES {
                return Err(DecodeError::ImageTooLarge(total as u64));
            }
            let mut data = Vec::with_capacity(total);
            data.extend_from_slice(first);
            data.resize(first.len() + hole, 0);
            data.extend_from_slice(second);
            OwnedPageChange::Image(data)
        }
        KIND_LEAF_INSERT | KIND_LEAF_INSERT_UNDO => {
            expect_empty(second, second_len)?;
            OwnedPageChange::LeafInsert {
                index: index()?,
                key: key.to_vec(),
                value: first.to_vec(),
            }
        }
        KIND_LEAF_REPLACE_V1 => OwnedPageChange::LeafReplace {
            index: index()?,
            key: key.to_vec(),
            value: second.to_vec(),
        },
        KIND_LEAF_DELETE_V1 => {
            expect_empty(second, second_len)?;
            OwnedPageChange::LeafDelete {
                index: index()?,
                key: key.to_vec(),
            }
        }
        KIND_LEAF_REPLACE | KIND_LEAF_REPLACE_UNDO => {
            expect_empty(second, second_len)?;
            OwnedPageChange::LeafReplace {
                index: index()?,
                key: key.to_vec(),
                value: first.to_vec(),
            }
        }
        KIND_LEAF_DELETE => {
            expect_empty(first, first_len)?;
            expect_empty(second, second_len)?;
            OwnedPageChange::LeafDelete {
                index: index()?,
                key: key.to_vec(),
            }
        }
        KIND_LEAF_MARK | KIND_LEAF_MARK_UNDO => {
            expect_empty(first, first_len)?;
            expect_empty(second, second_len)?;
            if kind == KIND_LEAF_MARK_UNDO && flags & 1 == 0 {
                // Its undo clears a mark it set: a cleared mark here is damage.
                return Err(DecodeError::UnknownChangeKind(kind));
            }
            OwnedPageChange::LeafMark {
                index: index()?,
                key: key.to_vec(),
                deleted: flags & 1 == 1,
            }
        }
        KIND_NODE_SPLICE => {
            expect_empty(key, key_len)?;
            expect_empty(second, second_len)?;
            OwnedPageChange::NodeSplice {
                keep: u16_at(0),
                at: u16_at(16),
                remove: u16_at(32),
                level: u16_at(48),
                records: first.to_vec(),
            }
        }
        KIND_MAP_BIT => {
            expect_empty(key, key_len)?;
            expect_empty(first, first_len)?;
            expect_empty(second, second_len)?;
            OwnedPageChange::MapBit {
                bit: index_or_bit,
                used: flags & 1 == 1,
            }
        }
        other => return Err(DecodeError::UnknownChangeKind(other)),
    };
    Ok(EngineRecord::PageChange {
        page,
        update_stamp,
        change,
        undo: match kind {
            KIND_LEAF_REPLACE_UNDO => RecordUndo::OnPage,
            KIND_LEAF_INSERT_UNDO => RecordUndo::Absent,
            KIND_LEAF_MARK_UNDO => RecordUndo::Marked,
            _ => RecordUndo::None,
        },
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    /// A page with a header, a free-space hole and records at the end.
    fn holed_page() -> Vec<u8> {
        let mut page = vec![0u8; 32768];
        page[..100].fill(7);
        page[30000..].fill(9);
        page[31000] = 0;
        page
    }

    fn every_variant() -> Vec<OwnedPageChange> {
        vec![
            OwnedPageChange::Image((0..4096u32).map(|i| i as u8).collect()),
            OwnedPageChange::Image(Vec::new()),
            OwnedPageChange::Image(holed_page()),
            OwnedPageChange::Image(vec![0; 8192]),
            OwnedPageChange::LeafInsert {
                index: 7,
                key: b"key-7".to_vec(),
                value: vec![9; 3000],
            },
            OwnedPageChange::LeafInsert {
                index: 0,
                key: Vec::new(),
                value: Vec::new(),
            },
            OwnedPageChange::LeafReplace {
                index: 3,
                key: b"k".to_vec(),
                value: vec![2; 20],
            },
            OwnedPageChange::LeafDelete {
                index: 12,
                key: b"gone".to_vec(),
            },
            OwnedPageChange::LeafMark {
                index: 4,
                key: b"marked".to_vec(),
                deleted: true,
            },
            OwnedPageChange::LeafMark {
                index: 0,
                key: b"back".to_vec(),
                deleted: false,
            },
            OwnedPageChange::NodeSplice {
                level: 3,
                keep: 65535,
                at: 7,
                remove: 2,
                records: vec![4; 300],
            },
            OwnedPageChange::NodeSplice {
                level: 0,
                keep: 0,
                at: 0,
                remove: 0,
                records: Vec::new(),
            },
            OwnedPageChange::MapBit {
                bit: 1 << 40,
                used: true,
            },
            OwnedPageChange::MapBit {
                bit: 0,
                used: false,
            },
        ]
    }

    #[test]
    fn every_page_change_round_trips() {
        let mut buf = Vec::new();
        for (n, change) in every_variant().into_iter().enumerate() {
            let page = 1000 + n as u32;
            let stamp = u64::MAX - n as u64;
            encode_page_change(page, stamp, &change.as_change(), &mut buf);
            let decoded = decode(RECORD_PAGE_CHANGE, &buf).unwrap();
            assert_eq!(
                decoded,
                EngineRecord::PageChange {
                    page,
                    update_stamp: stamp,
                    change: change.clone(),
                    undo: RecordUndo::None,
                }
            );
            // Only a leaf replace, a leaf insert and a leaf mark setting the flag carry their
            // undo (each its own kind), with the same bytes otherwise.
            let plain = buf.clone();
            let carries = match change {
                OwnedPageChange::LeafReplace { .. } => RecordUndo::OnPage,
                OwnedPageChange::LeafInsert { .. } => RecordUndo::Absent,
                OwnedPageChange::LeafMark { deleted: true, .. } => RecordUndo::Marked,
                _ => RecordUndo::None,
            };
            for undo in [RecordUndo::OnPage, RecordUndo::Absent, RecordUndo::Marked] {
                let with =
                    encode_page_change_with_undo(page, stamp, &change.as_change(), undo, &mut buf);
                assert_eq!(with, undo == carries, "{change:?} {undo:?}");
                assert_eq!(buf.len(), plain.len());
                assert_eq!(buf == plain, !with, "{change:?}");
                assert_eq!(
                    decode(RECORD_PAGE_CHANGE, &buf).unwrap(),
                    EngineRecord::PageChange {
                        page,
                        update_stamp: stamp,
                        change: change.clone(),
                        undo: if with { undo } else { RecordUndo::None },
                    }
                );
            }
        }
    }

    #[test]
    fn commit_round_trips() {
        assert_eq!(
            decode(RECORD_COMMIT, &encode_commit(42)).unwrap(),
            EngineRecord::Commit { page_changes: 42 }
        );
    }

    /// Every truncation or extension of a valid payload is refused, never misread or a panic.
    #[test]
    fn damaged_payloads_are_refused() {
        let mut buf = Vec::new();
        for change in every_variant() {
            encode_page_change(5, 6, &change.as_change(), &mut buf);
            for len in 0..buf.len() {
                assert!(decode(RECORD_PAGE_CHANGE, &buf[..len]).is_err(), "{len}");
            }
            let mut longer = buf.clone();
            longer.push(0);
            assert!(decode(RECORD_PAGE_CHANGE, &longer).is_err());
        }
        assert!(decode(RECORD_COMMIT, &[0; 7]).is_err());
        assert_eq!(decode(9, &[]), Err(DecodeError::UnknownRecordType(9)));
        encode_page_change(1, 1, &PageChange::MapBit { bit: 1, used: true }, &mut buf);
        buf[4] = 77 | COMPACT_LAYOUT;
        assert_eq!(
            decode(RECORD_PAGE_CHANGE, &buf),
            Err(DecodeError::UnknownChangeKind(77))
        );
        // A varint that never ends, or runs past eleven bytes, is refused.
        let mut endless = buf[..COMPACT_FIXED_BYTES].to_vec();
        endless.extend_from_slice(&[0xff; 12]);
        assert_eq!(
            decode(RECORD_PAGE_CHANGE, &endless),
            Err(DecodeError::BadVarint)
        );
        let mut overflow = buf[..COMPACT_FIXED_BYTES].to_vec();
        overflow.extend_from_slice(&[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02]);
        overflow.extend_from_slice(&[0, 0, 0]);
        assert_eq!(
            decode(RECORD_PAGE_CHANGE, &overflow),
            Err(DecodeError::BadVarint)
        );
        // Lengths that overflow when added are refused, not wrapped.
        let mut huge = buf[..COMPACT_FIXED_BYTES].to_vec();
        put_varint(&mut huge, 0);
        for _ in 0..3 {
            put_varint(&mut huge, u64::MAX / 2);
        }
        assert!(decode(RECORD_PAGE_CHANGE, &huge).is_err());
    }

    /// The same change in the first layout (36-byte fixed header), built from a compact payload.
    fn first_layout(compact: &[u8]) -> Vec<u8> {
        let parts = split_compact_layout(compact).unwrap();
        let mut out = Vec::new();
        out.extend_from_slice(&parts.page.to_le_bytes());
        out.push(compact[4] & !COMPACT_LAYOUT);
        out.push(parts.flags);
        out.extend_from_slice(&[0, 0]);
        out.extend_from_slice(&parts.update_stamp.to_le_bytes());
        out.extend_from_slice(&parts.index_or_bit.to_le_bytes());
        for part in [parts.key, parts.first, parts.second] {
            out.extend_from_slice(&(part.len() as u32).to_le_bytes());
        }
        for part in [parts.key, parts.first, parts.second] {
            out.extend_from_slice(part);
        }
        out
    }

    /// Logs written before the compact layout still decode, to the same records, undo kinds
    /// included; the compact layout is smaller for every change (by 17 – 22 bytes for leaf
    /// changes and images, 10 for a node splice).
    #[test]
    fn the_first_layout_still_decodes_and_the_compact_one_is_smaller() {
        let mut buf = Vec::new();
        for change in every_variant() {
            for undo in [
                RecordUndo::None,
                RecordUndo::OnPage,
                RecordUndo::Absent,
                RecordUndo::Marked,
            ] {
                encode_page_change_with_undo(9, 1 << 50, &change.as_change(), undo, &mut buf);
                let old = first_layout(&buf);
                assert_eq!(
                    decode(RECORD_PAGE_CHANGE, &old).unwrap(),
                    decode(RECORD_PAGE_CHANGE, &buf).unwrap(),
                    "{change:?} {undo:?}"
                );
                // Every change is smaller; a node splice least (its packed index takes a long
                // varint).
                assert!(old.len() >= buf.len() + 9, "{change:?}");
            }
        }
        // A flag delete of an 8-byte key: 36 + 8 bytes before, 14 + 4 + 8 now.
        let key = [7u8; 8];
        encode_page_change(
            3,
            4,
            &PageChange::LeafMark {
                index: 100,
                key: &key,
                deleted: true,
            },
            &mut buf,
        );
        assert_eq!(buf.len(), COMPACT_FIXED_BYTES + 4 + 8);
        assert_eq!(first_layout(&buf).len(), PAGE_CHANGE_HEADER_BYTES + 8);
        // A leaf insert of a 2,400-byte value at slot 200: 36 + 8 + 2,400 bytes before,
        // 14 + 6 + 8 + 2,400 now (slot and value length take two varint bytes each).
        let value = vec![1u8; 2400];
        encode_page_change(
            3,
            4,
            &PageChange::LeafInsert {
                index: 200,
                key: &key,
                value: &value,
            },
            &mut buf,
        );
        assert_eq!(buf.len(), COMPACT_FIXED_BYTES + 6 + 8 + 2400);
        assert_eq!(
            first_layout(&buf).len(),
            PAGE_CHANGE_HEADER_BYTES + 8 + 2400
        );
    }

    /// An image leaves out its longest zero run: a node with 30 KB free logs ~3 KB.
    #[test]
    fn images_are_logged_without_their_hole() {
        let mut buf = Vec::new();
        let page = holed_page();
        encode_page_change(1, 2, &PageChange::Image { data: &page }, &mut buf);
        // Compact header: 14 fixed bytes, the hole's length 29,900 (3 varint bytes), key length 0
        // (1), first 100 (1), second 2,768 (2).
        assert_eq!(buf.len(), COMPACT_FIXED_BYTES + 3 + 1 + 1 + 2 + 100 + 2768);
        assert_eq!(image_hole(&page), 100..30000);
        let EngineRecord::PageChange { change, .. } = decode(RECORD_PAGE_CHANGE, &buf).unwrap()
        else {
            panic!("not a page change")
        };
        assert_eq!(change, OwnedPageChange::Image(page));
        // Short zero runs are kept: no hole at all.
        let mut busy = vec![1u8; 4096];
        busy[10..20].fill(0);
        assert_eq!(image_hole(&busy), 0..0);
        assert_eq!(image_hole(&[]), 0..0);
        assert_eq!(image_hole(&[0; 64]), 0..64);
    }

    /// The longest zero run, byte by byte: what [`image_hole`] must give.
    fn byte_scan_hole(data: &[u8]) -> std::ops::Range<usize> {
        let mut best = 0..0;
        let mut start = None;
        for (i, &byte) in data.iter().chain(std::iter::once(&1u8)).enumerate() {
            match (byte, start) {
                (0, None) => start = Some(i),
                (_, Some(s)) if byte != 0 => {
                    if i - s > best.len() {
                        best = s..i;
                    }
                    start = None;
                }
                _ => {}
            }
        }
        if best.len() < MIN_HOLE_BYTES {
            0..0
        } else {
            best
        }
    }

    /// The word-at-a-time scan finds the same hole as a byte scan on pages with zero runs of
    /// every length at every alignment, ties included. Seeded: `JETPROOF_SEED` replays.
    #[test]
    fn image_hole_matches_a_byte_scan() {
        let (seed, mut next) = crate::test_rng::xorshift(0x401e_u64);
        for round in 0..3000 {
            let len = match round % 4 {
                0 => (next() % 300) as usize,
                1 => 4096,
                _ => (next() % 9000) as usize,
            };
            let mut page: Vec<u8> = (0..len).map(|_| 1 + (next() % 255) as u8).collect();
            // Zero runs around the threshold and long ones, at random offsets; sometimes two
            // of the same length (the first must win).
            for _ in 0..next() % 6 {
                if len == 0 {
                    break;
                }
                let run = match next() % 3 {
                    0 => 56 + (next() % 16) as usize,
                    1 => (next() % 8) as usize,
                    _ => (next() as usize) % len,
                };
                let at = (next() as usize) % len;
                let end = (at + run).min(len);
                page[at..end].fill(0);
                if next() % 4 == 0 {
                    let again = (next() as usize) % len;
                    let end = (again + (end - at)).min(len);
                    page[again..end].fill(0);
                }
            }
            assert_eq!(
                image_hole(&page),
                byte_scan_hole(&page),
                "seed {seed} round {round} len {len}"
            );
            let offset = (round % 8).min(page.len());
            assert_eq!(
                image_hole(&page[offset..]),
                byte_scan_hole(&page[offset..]),
                "seed {seed} round {round} offset {offset}"
            );
        }
        let page = holed_page();
        assert_eq!(image_hole(&page), byte_scan_hole(&page));
    }

    #[test]
    fn append_page_change_keeps_what_the_buffer_held() {
        let mut out = b"prefix".to_vec();
        let change = PageChange::LeafInsert {
            index: 2,
            key: b"k",
            value: b"v",
        };
        append_page_change(7, 8, &change, &mut out);
        let mut alone = Vec::new();
        encode_page_change(7, 8, &change, &mut alone);
        assert_eq!(&out[..6], b"prefix");
        assert_eq!(&out[6..], &alone[..]);
    }

    /// Records written by the first layout (replace and delete with the old value, images
    /// whole) still decode, to what redo needs.
    #[test]
    fn first_layout_records_still_decode() {
        let mut v1 = Vec::new();
        let push = |v: &mut Vec<u8>, kind: u8, index: u64, parts: [&[u8]; 3]| {
            v.clear();
            v.extend_from_slice(&9u32.to_le_bytes());
            v.extend_from_slice(&[kind, 0, 0, 0]);
            v.extend_from_slice(&5u64.to_le_bytes());
            v.extend_from_slice(&index.to_le_bytes());
            for part in parts {
                v.extend_from_slice(&(part.len() as u32).to_le_bytes());
            }
            for part in parts {
                v.extend_from_slice(part);
            }
        };
        let image = [3u8; 4096];
        let cases: [(u8, u64, [&[u8]; 3], OwnedPageChange); 3] = [
            (
                3,
                2,
                [b"key", b"old", b"new"],
                OwnedPageChange::LeafReplace {
                    index: 2,
                    key: b"key".to_vec(),
                    value: b"new".to_vec(),
                },
            ),
            (
                4,
                1,
                [b"key", b"old", b""],
                OwnedPageChange::LeafDelete {
                    index: 1,
                    key: b"key".to_vec(),
                },
            ),
            (
                1,
                0,
                [b"", &image, b""],
                OwnedPageChange::Image(image.to_vec()),
            ),
        ];
        for (kind, index, parts, expected) in cases {
            push(&mut v1, kind, index, parts);
            assert_eq!(
                decode(RECORD_PAGE_CHANGE, &v1).unwrap(),
                EngineRecord::PageChange {
                    page: 9,
                    update_stamp: 5,
                    change: expected,
                    undo: RecordUndo::None,
                }
            );
        }
    }

    /// Random damage to valid payloads decodes to a record or an error, never a panic or an
    /// allocation beyond a page. Seeded: `JETPROOF_SEED` replays.
    #[test]
    fn garbage_payloads_never_panic() {
        let (seed, mut next) = crate::test_rng::xorshift(0x5eed_f00d_u64);
        let mut buf = Vec::new();
        let variants = every_variant();
        for round in 0..20_000 {
            let change = &variants[round % variants.len()];
            encode_page_change(3, 4, &change.as_change(), &mut buf);
            for _ in 0..1 + next() % 4 {
                let at = (next() as usize) % buf.len();
                buf[at] = next() as u8;
            }
            if next() % 3 == 0 {
                buf.truncate((next() as usize) % (buf.len() + 1));
            }
            if let Ok(EngineRecord::PageChange {
                change: OwnedPageChange::Image(data),
                ..
            }) = decode(RECORD_PAGE_CHANGE, &buf)
            {
                assert!(data.len() <= MAX_IMAGE_BYTES, "seed {seed} round {round}");
            }
        }
    }
}
