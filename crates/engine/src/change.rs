//! Page changes as the log records them, and their redo.
//!
//! Every change the engine makes to a page is reported, while the page is still latched
//! exclusively, to the database's [`ChangeLog`] as one [`PageChange`]: physiological (which page,
//! what change within it), as ESE logs. The common changes are small (a leaf insert or replace
//! carries the record, a delete its key; only what redo needs: undo is logged apart, logically,
//! by the instance). Structural changes to an existing node (the left half of a split, a parent
//! gaining or losing a separator, the survivor of a merge) are [`PageChange::NodeSplice`]s,
//! derived from the node's own previous entries, so they carry only the entries it did not hold
//! before. Only a page whose new content cannot be derived from its own previous state (the new
//! right half of a split, a new root child, a freed page) is logged as an image, which the log
//! stores without its free-space hole. The log returns the log position of its record, which is stamped on the
//! page with the change's update stamp: the cache will not write the page before the log is
//! durable up to there (see [`crate::cache::WriteAheadGate`]).
//!
//! Redo ([`redo`]) applies a change to a page read from disk only if the page's update stamp is
//! older than the change's: replaying a log over a file whose pages were written at different
//! times brings every page to the same point, whatever was flushed before the crash.
//!
//! Invariant that makes index-based changes replayable: a leaf's slots are in key order and
//! records are packed, so two leaves with the same records have the same slot for each key and
//! the same free space, however their bytes were laid out.
#![deny(clippy::indexing_slicing, clippy::unwrap_used)]

use crate::node::{self, Entries};
use crate::page;

/// One change to one page.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PageChange<'a> {
    /// The page's whole new content (new and freed pages, and nodes whose new content shares
    /// nothing with the old). The log stores it without its longest run of zeros (the free-space
    /// hole), see `jetproof_instance::format`.
    Image { data: &'a [u8] },
    /// A record inserted at slot `index` of a leaf.
    LeafInsert {
        index: usize,
        key: &'a [u8],
        value: &'a [u8],
    },
    /// The value of the record at slot `index` replaced. Redo needs only the new value; undo is
    /// logged apart, logically, by the instance.
    LeafReplace {
        index: usize,
        key: &'a [u8],
        value: &'a [u8],
    },
    /// The record at slot `index` removed.
    LeafDelete { index: usize, key: &'a [u8] },
    /// The record at slot `index` marked deleted, or its mark cleared (ESE's flag delete and
    /// its undo): the record stays on the page, so nothing but its key is logged.
    LeafMark {
        index: usize,
        key: &'a [u8],
        deleted: bool,
    },
    /// A node rewritten from its own previous entries (splits, merges, separators added to or
    /// dropped from a parent, changes made on the tree's pessimistic path): keep the first
    /// `keep` entries, replace entries `at..at + remove` of those with `records` (entries in
    /// the node's record layout, see [`Entries::encode_records`]), and write the result
    /// packed as a node at `level`. Derived from the page's own previous state only, so it is
    /// replayable per page; it carries only the entries the page did not already hold (the
    /// left half of a split carries none, or the one new record).
    NodeSplice {
        level: u16,
        keep: u16,
        at: u16,
        remove: u16,
        records: &'a [u8],
    },
    /// A space map bit set (page in use) or cleared (page free).
    MapBit { bit: u64, used: bool },
}

/// An owned copy of a [`PageChange`], for logs kept in memory (tests) or decoded from a log file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OwnedPageChange {
    Image(Vec<u8>),
    LeafInsert {
        index: usize,
        key: Vec<u8>,
        value: Vec<u8>,
    },
    LeafReplace {
        index: usize,
        key: Vec<u8>,
        value: Vec<u8>,
    },
    LeafDelete {
        index: usize,
        key: Vec<u8>,
    },
    LeafMark {
        index: usize,
        key: Vec<u8>,
        deleted: bool,
    },
    NodeSplice {
        level: u16,
        keep: u16,
        at: u16,
        remove: u16,
        records: Vec<u8>,
    },
    MapBit {
        bit: u64,
        used: bool,
    },
}

impl PageChange<'_> {
    pub fn to_owned_change(&self) -> OwnedPageChange {
        match *self {
            PageChange::Image { data } => OwnedPageChange::Image(data.to_vec()),
            PageChange::LeafInsert { index, key, value } => OwnedPageChange::LeafInsert {
                index,
                key: key.to_vec(),
                value: value.to_vec(),
            },
            PageChange::LeafReplace { index, key, value } => OwnedPageChange::LeafReplace {
                index,
                key: key.to_vec(),
                value: value.to_vec(),
            },
            PageChange::LeafDelete { index, key } => OwnedPageChange::LeafDelete {
                index,
                key: key.to_vec(),
            },
            PageChange::LeafMark {
                index,
                key,
                deleted,
            } => OwnedPageChange::LeafMark {
                index,
                key: key.to_vec(),
                deleted,
            },
            PageChange::NodeSplice {
                level,
                keep,
                at,
                remove,
                records,
            } => OwnedPageChange::NodeSplice {
                level,
                keep,
                at,
                remove,
                records: records.to_vec(),
            },
            PageChange::MapBit { bit, used } => OwnedPageChange::MapBit { bit, used },
        }
    }
}

impl OwnedPageChange {
    pub fn as_change(&self) -> PageChange<'_> {
        match self {
            OwnedPageChange::Image(data) => PageChange::Image { data },
            OwnedPageChange::LeafInsert { index, key, value } => PageChange::LeafInsert {
                index: *index,
                key,
                value,
            },
            OwnedPageChange::LeafReplace { index, key, value } => PageChange::LeafReplace {
                index: *index,
                key,
                value,
            },
            OwnedPageChange::LeafDelete { index, key } => {
                PageChange::LeafDelete { index: *index, key }
            }
            OwnedPageChange::LeafMark {
                index,
                key,
                deleted,
            } => PageChange::LeafMark {
                index: *index,
                key,
                deleted: *deleted,
            },
            OwnedPageChange::NodeSplice {
                level,
                keep,
                at,
                remove,
                records,
            } => PageChange::NodeSplice {
                level: *level,
                keep: *keep,
                at: *at,
                remove: *remove,
                records,
            },
            OwnedPageChange::MapBit { bit, used } => PageChange::MapBit {
                bit: *bit,
                used: *used,
            },
        }
    }
}

/// Where page changes go: the log, once it exists.
pub trait ChangeLog: Send + Sync + std::fmt::Debug {
    /// Records `change` to `page`, made with update stamp `update_stamp`, and returns the log
    /// position of the record (stamped on the page). Called with the page latched exclusively,
    /// so the changes of one page arrive in the order they were made.
    fn record(
        &self,
        page: u32,
        update_stamp: u64,
        change: &PageChange<'_>,
    ) -> crate::error::Result<u64>;

    /// Starts a group on the calling thread: the page changes it records until
    /// [`ChangeLog::end_group`] (space map bits aside) are one structural change (a split or a
    /// merge), which recovery must apply whole or not at all, as ESE logs a split as one record.
    /// While a group is open, `record` may hold the change back and return a position at or
    /// before where the group will be logged; the caller keeps every page of the group latched
    /// until `end_group` and then stamps them with the position it returns.
    fn begin_group(&self) {}

    /// Logs the group's changes as one atomic unit and returns the log position every page of
    /// the group must carry (0 if nothing was held back).
    fn end_group(&self) -> crate::error::Result<u64> {
        Ok(0)
    }

    /// Drops the group's held changes (the change failed half way; the cache is poisoned).
    fn discard_group(&self) {}

    /// Called once per operation that is about to change a record, with the leaf that holds
    /// (or will hold) `key` latched exclusively and before any of the operation's page changes
    /// is recorded: `before` is what the operation finds and what it will do ([`Before`]). The
    /// instance logs its undo record here, from the leaf the operation has latched anyway,
    /// instead of looking the key up once more.
    fn before_change(&self, _key: &[u8], _before: Before<'_>) -> crate::error::Result<()> {
        Ok(())
    }
}

/// What an operation found under its key, and what it is about to do to it
/// ([`ChangeLog::before_change`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Before<'a> {
    /// No record: the operation inserts one.
    Absent,
    /// A live record with this value, which the operation replaces or removes.
    Value(&'a [u8]),
    /// A live record that the operation only marks deleted: its value stays on the page, so
    /// undoing the operation needs only to clear the mark.
    Marking,
    /// A record marked deleted, with this value, which the operation brings back (an insert
    /// over it, or clearing the mark) or removes.
    Marked(&'a [u8]),
}

/// The change log used while there is no log: records nothing, returns log position 0.
#[derive(Debug, Default)]
pub struct NoChangeLog;

impl ChangeLog for NoChangeLog {
    fn record(&self, _: u32, _: u64, _: &PageChange<'_>) -> crate::error::Result<u64> {
        Ok(0)
    }
}

/// Why a change could not be redone.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("cannot redo on this page: {0}")]
pub struct RedoError(pub String);

/// Applies `change` (made with `update_stamp`, logged at `log_position`) to `page_bytes` if the
/// page is older than the change. Returns whether it was applied. The page is left unsealed (the
/// cache seals on write; a caller writing directly seals with `checksum::seal`).
pub fn redo(
    page_bytes: &mut [u8],
    update_stamp: u64,
    log_position: u64,
    change: &PageChange<'_>,
) -> Result<bool, RedoError> {
    let current = page::update_stamp(page_bytes).unwrap_or(0);
    if current >= update_stamp {
        return Ok(false);
    }
    apply(page_bytes, change)?;
    page::put_u64(page_bytes, page::OFFSET_UPDATE_STAMP, update_stamp);
    page::put_u64(page_bytes, page::OFFSET_LOG_POSITION, log_position);
    Ok(true)
}

/// Applies `change` to the page, whatever its stamp.
pub fn apply(page_bytes: &mut [u8], change: &PageChange<'_>) -> Result<(), RedoError> {
    let bad = |what: &str| RedoError(what.to_string());
    match *change {
        PageChange::Image { data } => {
            if data.len() != page_bytes.len() {
                return Err(bad("image of another page size"));
            }
            page_bytes.copy_from_slice(data);
        }
        PageChange::LeafInsert { index, key, value } => {
            if node::leaf_search(page_bytes, key) != Some(Err(index))
                || !node::leaf_insert_in_place(page_bytes, index, key, value)
            {
                return Err(bad("leaf insert does not fit the page's records"));
            }
        }
        PageChange::LeafReplace { index, key, value } => {
            if node::leaf_search(page_bytes, key) != Some(Ok(index)) {
                return Err(bad("replaced record not at its slot"));
            }
            // As the tree does it (the same function), so redo gives the live page's bytes,
            // not only its records.
            if !node::leaf_replace_in_place(page_bytes, index, key, value) {
                return Err(bad("replaced record does not fit"));
            }
        }
        PageChange::LeafDelete { index, key } => {
            if node::leaf_search(page_bytes, key) != Some(Ok(index))
                || !node::leaf_remove_in_place(page_bytes, index)
            {
                return Err(bad("deleted record not at its slot"));
            }
        }
        PageChange::LeafMark {
            index,
            key,
            deleted,
        } => {
            if node::leaf_search(page_bytes, key) != Some(Ok(index))
                || !node::set_leaf_deleted(page_bytes, index, deleted)
            {
                return Err(bad("marked record not at its slot"));
            }
        }
        PageChange::NodeSplice {
            level,
            keep,
            at,
            remove,
            records,
        } => {
            node::validate(page_bytes).ok_or_else(|| bad("spliced page is not a valid node"))?;
            let mut entries = Entries::decode(page_bytes)
                .ok_or_else(|| bad("spliced page is not a valid node"))?;
            let inserted = Entries::decode_records(records, level == 0)
                .ok_or_else(|| bad("malformed records in a node splice"))?;
            let (keep, at, remove) = (usize::from(keep), usize::from(at), usize::from(remove));
            if entries.is_leaf() != inserted.is_leaf() {
                // A node that changes kind (a root split or collapse) keeps none of its entries.
                if keep != 0 || at != 0 || remove != 0 {
                    return Err(bad("node splice keeps entries of another kind"));
                }
                entries = inserted;
            } else {
                entries
                    .splice(keep, at, remove, inserted)
                    .ok_or_else(|| bad("node splice outside the page's entries"))?;
            }
            if entries.bytes() > node::capacity(page_bytes.len())
                || entries.len() > usize::from(u16::MAX)
            {
                return Err(bad("node splice does not fit the page"));
            }
            entries.encode(page_bytes, level);
        }
        PageChange::MapBit { bit, used } => {
            if !crate::space::set_map_bit(page_bytes, bit, used) {
                return Err(bad("space map bit outside the page"));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::indexing_slicing, clippy::unwrap_used)]
mod tests {
    use super::*;

    fn leaf(entries: &[(&[u8], &[u8])]) -> Vec<u8> {
        let mut page = vec![0u8; 4096];
        page::write_common(&mut page, 7, page::PageType::Leaf, 1);
        Entries::from_leaf(entries.iter().map(|(k, v)| (k.to_vec(), v.to_vec())))
            .encode(&mut page, 0);
        page
    }

    /// A splice that does not fit the page it is redone on is an error naming why, never a
    /// panic or a changed page: garbage records, ranges past the entries, another kind, too
    /// large, a page that is not a node.
    #[test]
    fn bad_splices_are_errors() {
        let page = leaf(&[(b"a", b"1"), (b"b", b"2")]);
        let mut records = Vec::new();
        Entries::from_leaf(vec![(b"c".to_vec(), vec![9; 5000])]).encode_records(0..1, &mut records);
        let cases: Vec<PageChange<'_>> = vec![
            PageChange::NodeSplice {
                level: 0,
                keep: 2,
                at: 2,
                remove: 0,
                records: &[1, 2, 3],
            },
            PageChange::NodeSplice {
                level: 0,
                keep: 3,
                at: 0,
                remove: 0,
                records: &[],
            },
            PageChange::NodeSplice {
                level: 0,
                keep: 2,
                at: 2,
                remove: 1,
                records: &[],
            },
            PageChange::NodeSplice {
                level: 1,
                keep: 1,
                at: 1,
                remove: 0,
                records: &[],
            },
            PageChange::NodeSplice {
                level: 0,
                keep: 2,
                at: 2,
                remove: 0,
                records: &records,
            },
        ];
        for change in &cases {
            let mut copy = page.clone();
            assert!(apply(&mut copy, change).is_err(), "{change:?}");
            assert_eq!(copy, page, "{change:?} changed the page");
        }
        let mut free = vec![0u8; 4096];
        page::format_free(&mut free, 3);
        let splice = PageChange::NodeSplice {
            level: 0,
            keep: 0,
            at: 0,
            remove: 0,
            records: &[],
        };
        assert!(apply(&mut free, &splice).is_err());
    }

    /// Redo of a splice over the page before it gives exactly the page the tree wrote.
    #[test]
    fn a_splice_redone_gives_the_new_node() {
        let before = leaf(&[(b"a", b"1"), (b"b", b"2"), (b"c", b"3"), (b"d", b"4")]);
        let old = Entries::decode(&before).unwrap();
        for new in [
            Entries::from_leaf(vec![
                (b"a".to_vec(), b"1".to_vec()),
                (b"b".to_vec(), b"2".to_vec()),
            ]),
            Entries::from_leaf(vec![
                (b"a".to_vec(), b"1".to_vec()),
                (b"ab".to_vec(), b"x".to_vec()),
            ]),
            Entries::from_interior(vec![(Vec::new(), 10), (b"c".to_vec(), 11)]),
        ] {
            let mut live = before.clone();
            let level = u16::from(!new.is_leaf());
            new.encode(&mut live, level);
            let splice = node::splice_between(&old, &new);
            let mut records = Vec::new();
            new.encode_records(splice.inserted.clone(), &mut records);
            let mut redone = before.clone();
            let change = PageChange::NodeSplice {
                level,
                keep: splice.keep as u16,
                at: splice.at as u16,
                remove: splice.remove as u16,
                records: &records,
            };
            assert!(redo(&mut redone, 5, 6, &change).unwrap());
            page::put_u64(&mut live, page::OFFSET_UPDATE_STAMP, 5);
            page::put_u64(&mut live, page::OFFSET_LOG_POSITION, 6);
            assert_eq!(redone, live, "{new:?}");
            // Already applied: skipped.
            assert!(!redo(&mut redone, 5, 6, &change).unwrap());
        }
    }
}
