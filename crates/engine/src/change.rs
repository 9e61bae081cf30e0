//! Page changes as the log records them, and their redo.
//!
//! Every change the engine makes to a page is reported, while the page is still latched
//! exclusively, to the database's [`ChangeLog`] as one [`PageChange`]: physiological (which page,
//! what change within it), as ESE logs. The common changes are small (a leaf insert, replace or
//! delete carries the record, and for undo the old value); structural changes (splits, merges, new
//! and freed pages) carry the page's whole new image, which is rare (about one change in ten for
//! an insert-heavy mix). The log returns the log position of its record, which is stamped on the
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
    /// The page's whole new content (splits, merges, rebuilt nodes, new and freed pages).
    Image { data: &'a [u8] },
    /// A record inserted at slot `index` of a leaf.
    LeafInsert {
        index: usize,
        key: &'a [u8],
        value: &'a [u8],
    },
    /// The value of the record at slot `index` replaced (`old_value` is for undo).
    LeafReplace {
        index: usize,
        key: &'a [u8],
        old_value: &'a [u8],
        new_value: &'a [u8],
    },
    /// The record at slot `index` removed (`old_value` is for undo).
    LeafDelete {
        index: usize,
        key: &'a [u8],
        old_value: &'a [u8],
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
        old_value: Vec<u8>,
        new_value: Vec<u8>,
    },
    LeafDelete {
        index: usize,
        key: Vec<u8>,
        old_value: Vec<u8>,
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
            PageChange::LeafReplace {
                index,
                key,
                old_value,
                new_value,
            } => OwnedPageChange::LeafReplace {
                index,
                key: key.to_vec(),
                old_value: old_value.to_vec(),
                new_value: new_value.to_vec(),
            },
            PageChange::LeafDelete {
                index,
                key,
                old_value,
            } => OwnedPageChange::LeafDelete {
                index,
                key: key.to_vec(),
                old_value: old_value.to_vec(),
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
            OwnedPageChange::LeafReplace {
                index,
                key,
                old_value,
                new_value,
            } => PageChange::LeafReplace {
                index: *index,
                key,
                old_value,
                new_value,
            },
            OwnedPageChange::LeafDelete {
                index,
                key,
                old_value,
            } => PageChange::LeafDelete {
                index: *index,
                key,
                old_value,
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
        PageChange::LeafReplace {
            index,
            key,
            new_value,
            ..
        } => {
            if node::leaf_search(page_bytes, key) != Some(Ok(index)) {
                return Err(bad("replaced record not at its slot"));
            }
            let mut entries = Entries::decode(page_bytes).ok_or_else(|| bad("malformed leaf"))?;
            if let Entries::Leaf(records) = &mut entries
                && let Some(slot) = records.get_mut(index)
            {
                slot.1 = new_value.to_vec();
            }
            if entries.bytes() > node::capacity(page_bytes.len()) {
                return Err(bad("replaced record does not fit"));
            }
            entries.encode(page_bytes, 0);
        }
        PageChange::LeafDelete { index, key, .. } => {
            if node::leaf_search(page_bytes, key) != Some(Ok(index)) {
                return Err(bad("deleted record not at its slot"));
            }
            let mut entries = Entries::decode(page_bytes).ok_or_else(|| bad("malformed leaf"))?;
            if let Entries::Leaf(records) = &mut entries {
                records.remove(index);
            }
            entries.encode(page_bytes, 0);
        }
        PageChange::MapBit { bit, used } => {
            if !crate::space::set_map_bit(page_bytes, bit, used) {
                return Err(bad("space map bit outside the page"));
            }
        }
    }
    Ok(())
}
