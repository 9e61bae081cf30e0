//! Logical undo: how a transaction that never committed is taken back (issue 3, items 3 and 6).
//!
//! The page change records ([`crate::format`]) are physical redo: they say what happened to a
//! page, and splits and merges move records between pages without saying which. Undo is
//! therefore logical, as ESE's is (its version store keeps the before image of each operation,
//! and recovery rebuilds it from the log): before a transaction first changes a key, the instance
//! logs one [`RECORD_UNDO`] record with the key's state before the transaction ([`Prior`]:
//! absent, its value, or, for a delete, only that the record was live). Taking the transaction
//! back restores every such key to that state through the engine, in reverse order, which logs
//! ordinary page changes tagged with the transaction's id; a [`RECORD_ROLLBACK`] record then ends
//! the transaction.
//!
//! A delete is a flag delete, as in ESE (`docs/design.md`, "Flag delete"): it only marks the
//! record deleted, so its undo record carries no value ([`Prior::Marked`]: clearing the mark
//! restores it), and the record is removed once the transaction has committed. ESE's version
//! store likewise keeps no before-image for a flag delete, the node itself being the before-image.
//! The one case that needs a value after all: a transaction that deleted a record and then
//! inserts the key again overwrites the marked record, so that insert has the marked record's
//! value ([`Prior::Value`]) as a second undo entry of the key; taken back first, it restores the
//! value, and the first entry then finds the record live.
//!
//! Why this is safe to repeat, so a crash in the middle of a rollback (or of recovery's undo) is
//! finished by the next recovery: a restore sets a key to an absolute state ("absent", or
//! "this value"), not a relative change, so restoring again after a partial restore gives the
//! same result. Why restoring one transaction's keys cannot overwrite another's committed change:
//! a key changed by an open transaction is locked to it until it commits or rolls back
//! ([`crate::Instance`]: a second writer gets [`crate::InstanceError::WriteConflict`], as ESE's
//! `JET_errWriteConflict`), so no later committed change of that key can precede the restore.
//! Why the undo record is always there when a change is: it is appended before the operation's
//! page changes, and the log is durable in order. When the first change of a key is one leaf
//! change, its record carries the undo instead ([`crate::format::RecordUndo`]: an insert of an
//! absent key and a flag delete imply theirs, as ESE's records do). The exception is a value that a leaf replace
//! overwrites ([`Prior::Value`] of a write made in place): it is kept in memory and logged only if
//! a page holding the change is written while the transaction is open, and otherwise recovery
//! takes it from the page as it redoes the replace ([`crate::deferred`], ESE's deferred before
//! image).
#![deny(clippy::indexing_slicing, clippy::unwrap_used)]

use jetproof_io::bytes::u32_at;

use crate::format::DecodeError;

/// `record_type` of an undo record: a key's state before the transaction first changed it.
pub const RECORD_UNDO: u8 = 3;
/// `record_type` of a rollback record: the transaction was taken back and is over.
pub const RECORD_ROLLBACK: u8 = 4;

/// Bytes before the key in an undo payload: flags (1), key length (4), value length (4).
pub const UNDO_HEADER_BYTES: usize = 9;

const FLAG_PRESENT: u8 = 1;
const FLAG_MARKED: u8 = 2;

/// A key's state before a transaction changed it, as undo restores it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Prior {
    /// There was no live record: undo removes whatever the key holds.
    Absent,
    /// The record had this value: undo gives it back, live.
    Value(Vec<u8>),
    /// The record was live and the transaction marked it deleted (flag delete): its value is
    /// still on the page, and undo clears the mark.
    Marked,
}

impl Prior {
    /// The value the payload carries, if any.
    pub fn value(&self) -> Option<&[u8]> {
        match self {
            Prior::Value(v) => Some(v),
            Prior::Absent | Prior::Marked => None,
        }
    }
}

/// One key's state before a transaction changed it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UndoEntry {
    pub key: Vec<u8>,
    pub before: Prior,
}

/// Appends the payload of an undo record to `out` (cleared first).
pub fn encode_undo(key: &[u8], before: &Prior, out: &mut Vec<u8>) {
    let value = before.value().unwrap_or(&[]);
    out.clear();
    out.reserve(UNDO_HEADER_BYTES + key.len() + value.len());
    out.push(match before {
        Prior::Absent => 0,
        Prior::Value(_) => FLAG_PRESENT,
        Prior::Marked => FLAG_MARKED,
    });
    // Keys and values fit a page (at most 32 KiB), so their lengths fit in 32 bits.
    out.extend_from_slice(&(key.len() as u32).to_le_bytes());
    out.extend_from_slice(&(value.len() as u32).to_le_bytes());
    out.extend_from_slice(key);
    out.extend_from_slice(value);
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
    let length = |at| {
        u32_at(payload, at)
            .map(|n| n as usize)
            .ok_or_else(|| short(UNDO_HEADER_BYTES))
    };
    let key_len = length(1)?;
    let value_len = length(5)?;
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
    let before = match flags {
        FLAG_PRESENT => Prior::Value(value.to_vec()),
        0 if value.is_empty() => Prior::Absent,
        FLAG_MARKED if value.is_empty() => Prior::Marked,
        // A value where none belongs, or unknown flags: damage.
        _ => return Err(short(UNDO_HEADER_BYTES + key_len)),
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
            (&b"k"[..], Prior::Absent),
            (&b"key"[..], Prior::Value(b"old value".to_vec())),
            (&b""[..], Prior::Value(Vec::new())),
            (&b"deleted"[..], Prior::Marked),
        ] {
            encode_undo(key, &before, &mut out);
            let decoded = decode_undo(&out).unwrap_or_else(|e| panic!("{key:?}: {e}"));
            assert_eq!(decoded.key, key);
            assert_eq!(decoded.before, before);
            // Every strict prefix is refused, never a panic.
            for cut in 0..out.len() {
                assert!(
                    decode_undo(out.get(..cut).unwrap_or(&[])).is_err(),
                    "cut {cut}"
                );
            }
        }
        // A value on an "absent" or "marked" entry is damage, and so are unknown flags.
        for flags in [0, FLAG_MARKED, 4, FLAG_PRESENT | FLAG_MARKED] {
            encode_undo(b"k", &Prior::Value(b"v".to_vec()), &mut out);
            if let Some(first) = out.first_mut() {
                *first = flags;
            }
            assert!(decode_undo(&out).is_err(), "flags {flags}");
        }
    }
}
