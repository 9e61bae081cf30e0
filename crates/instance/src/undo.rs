//! Logical undo: how a transaction that never committed is taken back (issue 3, items 3 and 6).
//!
//! The page change records ([`crate::format`]) are physical redo: they say what happened to a
//! page, and splits and merges move records between pages without saying which. Undo is
//! therefore logical, as ESE's is (its version store keeps the before image of each operation,
//! and recovery rebuilds it from the log): before a transaction first changes a key, the instance
//! logs one [`RECORD_UNDO`] record with the key's state before the transaction (absent, or its
//! value). Taking the transaction back restores every such key to that state through the engine,
//! in reverse order, which logs ordinary page changes tagged with the transaction's id; a
//! [`RECORD_ROLLBACK`] record then ends the transaction.
//!
//! Why this is safe to repeat, so a crash in the middle of a rollback (or of recovery's undo) is
//! finished by the next recovery: a restore sets a key to an absolute state ("absent", or
//! "this value"), not a relative change, so restoring again after a partial restore gives the
//! same result. Why restoring one transaction's keys cannot overwrite another's committed change:
//! a key changed by an open transaction is locked to it until it commits or rolls back
//! ([`crate::Instance`]: a second writer gets [`crate::InstanceError::WriteConflict`], as ESE's
//! `JET_errWriteConflict`), so no later committed change of that key can precede the restore.
//! Why the undo record is always there when a change is: it is appended before the operation's
//! page changes, and the log is durable in order.
#![deny(clippy::indexing_slicing, clippy::unwrap_used)]

use crate::format::DecodeError;

/// `record_type` of an undo record: a key's state before the transaction first changed it.
pub const RECORD_UNDO: u8 = 3;
/// `record_type` of a rollback record: the transaction was taken back and is over.
pub const RECORD_ROLLBACK: u8 = 4;

/// Bytes before the key in an undo payload: flags (1), key length (4), value length (4).
pub const UNDO_HEADER_BYTES: usize = 9;

const FLAG_PRESENT: u8 = 1;

/// One key's state before a transaction changed it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UndoEntry {
    pub key: Vec<u8>,
    /// The value it had, or `None` when it did not exist.
    pub before: Option<Vec<u8>>,
}

/// Appends the payload of an undo record to `out` (cleared first).
pub fn encode_undo(key: &[u8], before: Option<&[u8]>, out: &mut Vec<u8>) {
    let value = before.unwrap_or(&[]);
    out.clear();
    out.reserve(UNDO_HEADER_BYTES + key.len() + value.len());
    out.push(if before.is_some() { FLAG_PRESENT } else { 0 });
    // Keys and values fit a page (at most 32 KiB), so their lengths fit in 32 bits.
    out.extend_from_slice(&(key.len() as u32).to_le_bytes());
    out.extend_from_slice(&(value.len() as u32).to_le_bytes());
    out.extend_from_slice(key);
    out.extend_from_slice(value);
}

fn u32_at(bytes: &[u8], at: usize) -> usize {
    let mut b = [0u8; 4];
    if let Some(s) = bytes.get(at..at + 4) {
        b.copy_from_slice(s);
    }
    u32::from_le_bytes(b) as usize
}

/// Decodes an undo payload; every length is checked against the payload.
pub fn decode_undo(payload: &[u8]) -> Result<UndoEntry, DecodeError> {
    let short = |expected: usize| DecodeError::BadLength {
        expected,
        found: payload.len(),
    };
    let Some(&flags) = payload.first() else {
        return Err(short(UNDO_HEADER_BYTES));
    };
    if payload.len() < UNDO_HEADER_BYTES {
        return Err(short(UNDO_HEADER_BYTES));
    }
    let key_len = u32_at(payload, 1);
    let value_len = u32_at(payload, 5);
    let expected = UNDO_HEADER_BYTES
        .saturating_add(key_len)
        .saturating_add(value_len);
    if payload.len() != expected {
        return Err(short(expected));
    }
    let key = payload
        .get(UNDO_HEADER_BYTES..UNDO_HEADER_BYTES + key_len)
        .ok_or_else(|| short(expected))?
        .to_vec();
    let value = payload
        .get(UNDO_HEADER_BYTES + key_len..expected)
        .ok_or_else(|| short(expected))?;
    let before = if flags & FLAG_PRESENT != 0 {
        Some(value.to_vec())
    } else if value.is_empty() {
        None
    } else {
        return Err(short(UNDO_HEADER_BYTES + key_len));
    };
    Ok(UndoEntry { key, before })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn undo_payloads_round_trip_and_damage_is_an_error() {
        let mut out = Vec::new();
        for (key, before) in [
            (&b"k"[..], None),
            (&b"key"[..], Some(&b"old value"[..])),
            (&b""[..], Some(&b""[..])),
        ] {
            encode_undo(key, before, &mut out);
            let decoded = decode_undo(&out).unwrap_or_else(|e| panic!("{key:?}: {e}"));
            assert_eq!(decoded.key, key);
            assert_eq!(decoded.before.as_deref(), before);
            // Every strict prefix is refused, never a panic.
            for cut in 0..out.len() {
                assert!(
                    decode_undo(out.get(..cut).unwrap_or(&[])).is_err(),
                    "cut {cut}"
                );
            }
        }
        // A value on an "absent" entry is damage.
        encode_undo(b"k", Some(b"v"), &mut out);
        if let Some(flags) = out.first_mut() {
            *flags = 0;
        }
        assert!(decode_undo(&out).is_err());
    }
}
