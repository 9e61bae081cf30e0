//! The byte layout of the engine's log records (`docs/log.md`, "The engine's log records").
//!
//! The log crate stores `record_type`, `transaction_id` and an opaque payload; this module gives
//! the payload its meaning. One [`RECORD_PAGE_CHANGE`] record per page change (physiological, as
//! ESE logs: page number, update stamp, the change and, for replace and delete, the old value that
//! undo needs), and one [`RECORD_COMMIT`] record per transaction that changed anything. Recovery
//! decodes with [`decode`]; every length is checked against the payload, so a decoded record never
//! indexes past its bytes (the log's CRCs already caught damage; this is the pair check).
#![deny(clippy::indexing_slicing, clippy::unwrap_used)]

use jetproof_engine::change::{OwnedPageChange, PageChange};

/// `record_type` of a page change record.
pub const RECORD_PAGE_CHANGE: u8 = 1;
/// `record_type` of a commit record.
pub const RECORD_COMMIT: u8 = 2;

/// Bytes before the variable part of a page change payload.
pub const PAGE_CHANGE_HEADER_BYTES: usize = 36;
/// Bytes of a commit payload.
pub const COMMIT_BYTES: usize = 8;

const KIND_IMAGE: u8 = 1;
const KIND_LEAF_INSERT: u8 = 2;
const KIND_LEAF_REPLACE: u8 = 3;
const KIND_LEAF_DELETE: u8 = 4;
const KIND_MAP_BIT: u8 = 5;

/// A decoded engine log record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EngineRecord {
    /// One change to one page, made with `update_stamp`.
    PageChange {
        page: u32,
        update_stamp: u64,
        change: OwnedPageChange,
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
}

/// Appends the payload of a page change record to `out` (cleared first).
pub fn encode_page_change(
    page: u32,
    update_stamp: u64,
    change: &PageChange<'_>,
    out: &mut Vec<u8>,
) {
    let (kind, flags, index, key, first, second): (u8, u8, u64, &[u8], &[u8], &[u8]) = match *change
    {
        PageChange::Image { data } => (KIND_IMAGE, 0, 0, &[], data, &[]),
        PageChange::LeafInsert { index, key, value } => {
            (KIND_LEAF_INSERT, 0, index as u64, key, value, &[])
        }
        PageChange::LeafReplace {
            index,
            key,
            old_value,
            new_value,
        } => (
            KIND_LEAF_REPLACE,
            0,
            index as u64,
            key,
            old_value,
            new_value,
        ),
        PageChange::LeafDelete {
            index,
            key,
            old_value,
        } => (KIND_LEAF_DELETE, 0, index as u64, key, old_value, &[]),
        PageChange::MapBit { bit, used } => (KIND_MAP_BIT, u8::from(used), bit, &[], &[], &[]),
    };
    out.clear();
    out.reserve(PAGE_CHANGE_HEADER_BYTES + key.len() + first.len() + second.len());
    out.extend_from_slice(&page.to_le_bytes());
    out.push(kind);
    out.push(flags);
    out.extend_from_slice(&[0, 0]);
    out.extend_from_slice(&update_stamp.to_le_bytes());
    out.extend_from_slice(&index.to_le_bytes());
    // Page sizes are at most 32 KiB, so every part fits in 32 bits.
    out.extend_from_slice(&(key.len() as u32).to_le_bytes());
    out.extend_from_slice(&(first.len() as u32).to_le_bytes());
    out.extend_from_slice(&(second.len() as u32).to_le_bytes());
    out.extend_from_slice(key);
    out.extend_from_slice(first);
    out.extend_from_slice(second);
}

/// The payload of a commit record.
pub fn encode_commit(page_changes: u64) -> [u8; COMMIT_BYTES] {
    page_changes.to_le_bytes()
}

fn u32_at(bytes: &[u8], at: usize) -> u32 {
    let mut b = [0u8; 4];
    if let Some(s) = bytes.get(at..at + 4) {
        b.copy_from_slice(s);
    }
    u32::from_le_bytes(b)
}

fn u64_at(bytes: &[u8], at: usize) -> u64 {
    let mut b = [0u8; 8];
    if let Some(s) = bytes.get(at..at + 8) {
        b.copy_from_slice(s);
    }
    u64::from_le_bytes(b)
}

/// Decodes a record read back from the log.
pub fn decode(record_type: u8, payload: &[u8]) -> Result<EngineRecord, DecodeError> {
    match record_type {
        RECORD_COMMIT => {
            if payload.len() != COMMIT_BYTES {
                return Err(DecodeError::BadLength {
                    expected: COMMIT_BYTES,
                    found: payload.len(),
                });
            }
            Ok(EngineRecord::Commit {
                page_changes: u64_at(payload, 0),
            })
        }
        RECORD_PAGE_CHANGE => decode_page_change(payload),
        other => Err(DecodeError::UnknownRecordType(other)),
    }
}

fn decode_page_change(payload: &[u8]) -> Result<EngineRecord, DecodeError> {
    let Some(header) = payload.get(..PAGE_CHANGE_HEADER_BYTES) else {
        return Err(DecodeError::BadLength {
            expected: PAGE_CHANGE_HEADER_BYTES,
            found: payload.len(),
        });
    };
    let page = u32_at(header, 0);
    let kind = header.get(4).copied().unwrap_or(0);
    let flags = header.get(5).copied().unwrap_or(0);
    let update_stamp = u64_at(header, 8);
    let index_or_bit = u64_at(header, 16);
    let key_len = u32_at(header, 24) as usize;
    let first_len = u32_at(header, 28) as usize;
    let second_len = u32_at(header, 32) as usize;
    let expected = PAGE_CHANGE_HEADER_BYTES + key_len + first_len + second_len;
    if payload.len() != expected {
        return Err(DecodeError::BadLength {
            expected,
            found: payload.len(),
        });
    }
    let body = payload.get(PAGE_CHANGE_HEADER_BYTES..).unwrap_or(&[]);
    let (key, rest) = body.split_at(key_len);
    let (first, second) = rest.split_at(first_len);
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
    let change = match kind {
        KIND_IMAGE => {
            expect_empty(key, key_len)?;
            expect_empty(second, second_len)?;
            OwnedPageChange::Image(first.to_vec())
        }
        KIND_LEAF_INSERT => {
            expect_empty(second, second_len)?;
            OwnedPageChange::LeafInsert {
                index: index()?,
                key: key.to_vec(),
                value: first.to_vec(),
            }
        }
        KIND_LEAF_REPLACE => OwnedPageChange::LeafReplace {
            index: index()?,
            key: key.to_vec(),
            old_value: first.to_vec(),
            new_value: second.to_vec(),
        },
        KIND_LEAF_DELETE => {
            expect_empty(second, second_len)?;
            OwnedPageChange::LeafDelete {
                index: index()?,
                key: key.to_vec(),
                old_value: first.to_vec(),
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
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    fn every_variant() -> Vec<OwnedPageChange> {
        vec![
            OwnedPageChange::Image((0..4096u32).map(|i| i as u8).collect()),
            OwnedPageChange::Image(Vec::new()),
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
                old_value: vec![1; 10],
                new_value: vec![2; 20],
            },
            OwnedPageChange::LeafDelete {
                index: 12,
                key: b"gone".to_vec(),
                old_value: vec![5; 100],
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
                    change
                }
            );
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
        buf[4] = 77;
        assert_eq!(
            decode(RECORD_PAGE_CHANGE, &buf),
            Err(DecodeError::UnknownChangeKind(77))
        );
    }
}
