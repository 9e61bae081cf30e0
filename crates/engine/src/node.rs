//! B+tree node layout: a slotted page.
//!
//! | offset | size | field (type-specific area of the page header) |
//! |-------:|-----:|-------|
//! | 68 | 2 | entry count |
//! | 70 | 2 | level (0 = leaf) |
//! | 72 | 2 | data start: offset of the lowest record byte |
//! | 74 | 6 | reserved, zero |
//!
//! After the header (offset 80) comes the slot array, one u16 record offset per entry in key
//! order; records are packed from the end of the page downwards. Leaf record: key length u16,
//! value length u16, key, value. Interior record: key length u16, child page u32, key; the key of
//! entry 0 of an interior node is ignored (it stands for "anything below entry 1"), and is stored
//! empty.
//!
//! The top bit of a leaf record's key length ([`DELETED_FLAG`]; keys are at most
//! [`MAX_KEY_BYTES`]) marks the record deleted, as ESE's flag delete does (`fNDDeleted`): a
//! transaction's delete only sets it, so undo needs no copy of the value, and the record is
//! removed once the transaction has committed (`docs/design.md`, "Flag delete"). Reads skip marked
//! records; every layout function below reports the key without the bit.
//!
//! Invariant: records are always packed (every change that removes bytes rebuilds the page), so
//! free space is exactly `data_start - (80 + 2 * count)` and needs no fragmentation bookkeeping.
//!
//! Everything here parses bytes that came from disk: no indexing that can panic, no unwrap. A
//! malformed node yields `None`, which the tree turns into an error naming the page.
#![deny(clippy::indexing_slicing, clippy::unwrap_used)]

use std::cmp::Ordering;

use crate::page::{self, HEADER_SIZE, OFFSET_TYPE_SPECIFIC, PageType};

const OFFSET_COUNT: usize = OFFSET_TYPE_SPECIFIC;
const OFFSET_LEVEL: usize = OFFSET_TYPE_SPECIFIC + 2;
const OFFSET_DATA_START: usize = OFFSET_TYPE_SPECIFIC + 4;
const SLOT_BYTES: usize = 2;
const LEAF_RECORD_OVERHEAD: usize = 4;
const INTERIOR_RECORD_OVERHEAD: usize = 6;

/// Bit of a leaf record's key length that marks the record deleted (flag delete).
pub const DELETED_FLAG: u16 = 0x8000;

/// Longest key the tree accepts (keeps interior nodes wide even with 4 KiB pages).
pub const MAX_KEY_BYTES: usize = 512;

/// Bytes available for slots and records.
pub fn capacity(page_size: usize) -> usize {
    page_size - HEADER_SIZE
}

/// Bytes a leaf entry occupies (slot included).
pub fn leaf_entry_bytes(key: usize, value: usize) -> usize {
    SLOT_BYTES + LEAF_RECORD_OVERHEAD + key + value
}

/// Bytes an interior entry occupies (slot included).
pub fn interior_entry_bytes(key: usize) -> usize {
    SLOT_BYTES + INTERIOR_RECORD_OVERHEAD + key
}

/// The largest leaf entry: any node holding entries no larger than half its capacity can always
/// be split into two nodes that fit.
pub fn max_leaf_entry_bytes(page_size: usize) -> usize {
    capacity(page_size) / 2
}

/// Below this many used bytes an interior node tries to merge with a sibling.
pub fn merge_threshold(page_size: usize) -> usize {
    capacity(page_size) / 4
}

/// The table density a leaf merge keeps free in the leaf it fills (ESE's default table density,
/// `JetCreateTable`'s 80%, as `init` fills leaves by default): ESE moves a leaf's records into a
/// sibling only while the sibling keeps `100 − density` percent of its page free
/// (`FBTICheckMergeableOneNode`, `CbBTIFreeDensity`, bt.cxx).
pub const LEAF_MERGE_DENSITY_PERCENT: usize = 80;

/// The most bytes a leaf may hold after a merge: `LEAF_MERGE_DENSITY_PERCENT` of its capacity.
pub fn leaf_merge_limit(page_size: usize) -> usize {
    capacity(page_size) * LEAF_MERGE_DENSITY_PERCENT / 100
}

/// A leaf left with fewer used bytes than this by a delete, purge or shrinking replace is
/// checked for a merge with a sibling: half the merge limit, since the smaller of two leaves
/// that fit together within the limit is at most half of it. ESE checks every leaf its cleanup
/// purged (`ErrBTISinglePageCleanup`: a leaf merges whenever all its records fit in a sibling
/// within the density, whatever its own fill); checking only those at most half the limit finds
/// the same pairs from their smaller side without latching a sibling on every purge. Until
/// 2026-11-27 leaves used the interior nodes' quarter, so deleted space was reused only once a
/// leaf fell under a quarter full (`docs/design.md`, "Merges").
pub fn leaf_merge_threshold(page_size: usize) -> usize {
    leaf_merge_limit(page_size) / 2
}

pub fn count(page: &[u8]) -> usize {
    page::get_u16(page, OFFSET_COUNT).unwrap_or(0) as usize
}

pub fn level(page: &[u8]) -> u16 {
    page::get_u16(page, OFFSET_LEVEL).unwrap_or(0)
}

pub fn is_node(page: &[u8]) -> bool {
    matches!(
        page::page_type(page),
        Some(PageType::Leaf | PageType::Interior)
    )
}

fn data_start(page: &[u8]) -> usize {
    page::get_u16(page, OFFSET_DATA_START).unwrap_or(0) as usize
}

/// Bytes used by slots and records.
pub fn used_bytes(page: &[u8]) -> usize {
    count(page) * SLOT_BYTES + page.len().saturating_sub(data_start(page))
}

pub fn free_bytes(page: &[u8]) -> usize {
    capacity(page.len()).saturating_sub(used_bytes(page))
}

/// Where the node's free space lies: from the end of its slot array to its lowest record byte
/// (empty if the framing is broken). What those bytes hold means nothing
/// ([`crate::fill`]).
pub fn free_range(page: &[u8]) -> std::ops::Range<usize> {
    let slots_end = HEADER_SIZE.saturating_add(count(page).saturating_mul(SLOT_BYTES));
    let start = data_start(page).min(page.len());
    slots_end.min(start)..start
}

/// Checks the node's framing: count, data start and every slot within bounds.
pub fn validate(page: &[u8]) -> Option<()> {
    let n = count(page);
    let slots_end = HEADER_SIZE.checked_add(n.checked_mul(SLOT_BYTES)?)?;
    let start = data_start(page);
    if start < slots_end || start > page.len() {
        return None;
    }
    let is_leaf = page::page_type(page)? == PageType::Leaf;
    if is_leaf != (level(page) == 0) {
        return None;
    }
    // Records are packed: their sizes must add up to exactly the bytes in use, which also rules
    // out overlapping records (that would otherwise decode into more bytes than a page holds).
    let mut total = 0usize;
    for i in 0..n {
        let offset = slot(page, i)?;
        if offset < start {
            return None;
        }
        total += if is_leaf {
            let (k, v) = leaf_entry(page, i)?;
            leaf_entry_bytes(k.len(), v.len())
        } else {
            let (k, _) = interior_entry(page, i)?;
            interior_entry_bytes(k.len())
        };
    }
    (total == used_bytes(page)).then_some(())
}

fn slot(page: &[u8], i: usize) -> Option<usize> {
    if i >= count(page) {
        return None;
    }
    page::get_u16(page, HEADER_SIZE + i * SLOT_BYTES).map(usize::from)
}

/// The key length field of the leaf record at `offset`: (key length, marked deleted).
fn leaf_key_len(page: &[u8], offset: usize) -> Option<(usize, bool)> {
    let field = page::get_u16(page, offset)?;
    Some((
        usize::from(field & !DELETED_FLAG),
        field & DELETED_FLAG != 0,
    ))
}

/// Entry `i` of a leaf: (key, value), whether or not it is marked deleted.
pub fn leaf_entry(page: &[u8], i: usize) -> Option<(&[u8], &[u8])> {
    let offset = slot(page, i)?;
    let (key_len, _) = leaf_key_len(page, offset)?;
    let value_len = usize::from(page::get_u16(page, offset + 2)?);
    let key_start = offset + LEAF_RECORD_OVERHEAD;
    let value_start = key_start + key_len;
    let key = page.get(key_start..value_start)?;
    let value = page.get(value_start..value_start + value_len)?;
    Some((key, value))
}

/// Whether leaf entry `i` is marked deleted.
pub fn leaf_is_deleted(page: &[u8], i: usize) -> Option<bool> {
    leaf_key_len(page, slot(page, i)?).map(|(_, deleted)| deleted)
}

/// Marks leaf entry `i` deleted or live, in place; false if there is no such entry.
pub fn set_leaf_deleted(page: &mut [u8], i: usize, deleted: bool) -> bool {
    let Some(offset) = slot(page, i) else {
        return false;
    };
    let Some((key_len, _)) = leaf_key_len(page, offset) else {
        return false;
    };
    let field = key_len as u16 | if deleted { DELETED_FLAG } else { 0 };
    page::put_u16(page, offset, field);
    true
}

/// Where the value of leaf entry `i` lies in the page (for replacing it in place).
pub fn leaf_value_range(page: &[u8], i: usize) -> Option<std::ops::Range<usize>> {
    let offset = slot(page, i)?;
    let (key_len, _) = leaf_key_len(page, offset)?;
    let value_len = usize::from(page::get_u16(page, offset + 2)?);
    let start = offset + LEAF_RECORD_OVERHEAD + key_len;
    let range = start..start + value_len;
    page.get(range.clone())?;
    Some(range)
}

/// Entry `i` of an interior node: (key, child page).
pub fn interior_entry(page: &[u8], i: usize) -> Option<(&[u8], u32)> {
    let offset = slot(page, i)?;
    let key_len = usize::from(page::get_u16(page, offset)?);
    let child = page::get_u32(page, offset + 2)?;
    let key_start = offset + INTERIOR_RECORD_OVERHEAD;
    let key = page.get(key_start..key_start + key_len)?;
    Some((key, child))
}

fn key_at(page: &[u8], i: usize, leaf: bool) -> Option<&[u8]> {
    if leaf {
        leaf_entry(page, i).map(|(k, _)| k)
    } else {
        interior_entry(page, i).map(|(k, _)| k)
    }
}

/// Leaf search: `Ok(i)` if entry `i` has the key, `Err(i)` for the position it would take.
pub fn leaf_search(page: &[u8], key: &[u8]) -> Option<Result<usize, usize>> {
    let (mut low, mut high) = (0usize, count(page));
    while low < high {
        let mid = low + (high - low) / 2;
        match key_at(page, mid, true)?.cmp(key) {
            Ordering::Less => low = mid + 1,
            Ordering::Greater => high = mid,
            Ordering::Equal => return Some(Ok(mid)),
        }
    }
    Some(Err(low))
}

/// Interior search: the index of the child whose range holds `key` (the last entry whose key is
/// at most `key`, entry 0 standing for everything below entry 1).
pub fn interior_search(page: &[u8], key: &[u8]) -> Option<usize> {
    let n = count(page);
    if n == 0 {
        return None;
    }
    let (mut low, mut high) = (1usize, n);
    while low < high {
        let mid = low + (high - low) / 2;
        if key_at(page, mid, false)? <= key {
            low = mid + 1;
        } else {
            high = mid;
        }
    }
    Some(low - 1)
}

/// One entry of [`Entries`]: where its key (and a leaf's value) lie in the arena, or an interior
/// entry's child page.
#[derive(Clone, Copy, Debug)]
struct Item {
    key_at: u32,
    key_len: u32,
    /// Leaf: where the value starts in the arena; interior: the child page.
    value_at_or_child: u32,
    /// Leaf: the value's length; interior: 0.
    value_len: u32,
    /// Leaf: the record is marked deleted ([`DELETED_FLAG`]).
    deleted: bool,
}

impl Item {
    /// A leaf entry whose key starts at `key_at`, its value right after the key.
    fn leaf(key_at: usize, key_len: usize, value_len: usize) -> Item {
        Item {
            key_at: to_u32(key_at),
            key_len: to_u32(key_len),
            value_at_or_child: to_u32(key_at + key_len),
            value_len: to_u32(value_len),
            deleted: false,
        }
    }

    /// The same leaf entry marked deleted (or not).
    fn marked(self, deleted: bool) -> Item {
        Item { deleted, ..self }
    }

    /// The same entry with its bytes `base` further into the arena (another arena appended).
    fn moved(&self, base: u32, leaf: bool) -> Item {
        Item {
            key_at: self.key_at + base,
            value_at_or_child: if leaf {
                self.value_at_or_child + base
            } else {
                self.value_at_or_child
            },
            ..*self
        }
    }

    fn interior(key_at: usize, key_len: usize, child: u32) -> Item {
        Item {
            key_at: to_u32(key_at),
            key_len: to_u32(key_len),
            value_at_or_child: child,
            value_len: 0,
            deleted: false,
        }
    }
}

/// A node's entries, decoded for a structural change.
///
/// Keys and values are not copied one by one: decoding copies the node's bytes once into an
/// arena, and each entry is a few offsets into it; new keys and values are appended to the arena.
/// (One `Vec` pair per entry was a fifth of the engine's CPU in a profile of the workload.)
#[derive(Clone, Debug)]
pub struct Entries {
    leaf: bool,
    arena: Vec<u8>,
    items: Vec<Item>,
}

impl PartialEq for Entries {
    fn eq(&self, other: &Entries) -> bool {
        self.leaf == other.leaf
            && self.len() == other.len()
            && (0..self.len()).all(|i| self.same_entry(i, other, i))
    }
}

impl Eq for Entries {}

fn to_u32(n: usize) -> u32 {
    // Arenas hold at most a few pages' bytes (page sizes are at most 32 KiB).
    u32::try_from(n).unwrap_or(u32::MAX)
}

impl Entries {
    fn empty(leaf: bool, arena_capacity: usize, items: usize) -> Entries {
        Entries {
            leaf,
            arena: Vec::with_capacity(arena_capacity),
            items: Vec::with_capacity(items),
        }
    }

    /// A leaf's entries from (key, value) pairs.
    pub fn from_leaf<K: AsRef<[u8]>, V: AsRef<[u8]>>(
        pairs: impl IntoIterator<Item = (K, V)>,
    ) -> Entries {
        let mut entries = Entries::empty(true, 0, 0);
        for (k, v) in pairs {
            let i = entries.len();
            entries.insert_leaf(i, k.as_ref(), v.as_ref());
        }
        entries
    }

    /// An interior node's entries from (key, child) pairs.
    pub fn from_interior<K: AsRef<[u8]>>(pairs: impl IntoIterator<Item = (K, u32)>) -> Entries {
        let mut entries = Entries::empty(false, 0, 0);
        for (k, c) in pairs {
            let i = entries.len();
            entries.insert_child(i, k.as_ref(), c);
        }
        entries
    }

    pub fn decode(page: &[u8]) -> Option<Entries> {
        let n = count(page);
        let leaf = level(page) == 0;
        let mut items = Vec::with_capacity(n + 1);
        for i in 0..n {
            let offset = slot(page, i)?;
            items.push(if leaf {
                let (key_len, deleted) = leaf_key_len(page, offset)?;
                let value_len = usize::from(page::get_u16(page, offset + 2)?);
                let key_at = offset + LEAF_RECORD_OVERHEAD;
                page.get(key_at..key_at + key_len + value_len)?;
                Item::leaf(key_at, key_len, value_len).marked(deleted)
            } else {
                let key_len = usize::from(page::get_u16(page, offset)?);
                let child = page::get_u32(page, offset + 2)?;
                let key_at = offset + INTERIOR_RECORD_OVERHEAD;
                page.get(key_at..key_at + key_len)?;
                Item::interior(key_at, key_len, child)
            });
        }
        let mut arena = Vec::with_capacity(page.len() + page.len() / 4);
        arena.extend_from_slice(page);
        Some(Entries { leaf, arena, items })
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    pub fn is_leaf(&self) -> bool {
        self.leaf
    }

    fn bytes_of(&self, item: &Item) -> &[u8] {
        let at = item.key_at as usize;
        self.arena
            .get(at..at + item.key_len as usize)
            .unwrap_or_default()
    }

    /// Key of entry `i`.
    pub fn key(&self, i: usize) -> Option<&[u8]> {
        self.items.get(i).map(|item| self.bytes_of(item))
    }

    /// Value of leaf entry `i`.
    pub fn value(&self, i: usize) -> Option<&[u8]> {
        let item = self.items.get(i).filter(|_| self.leaf)?;
        let at = item.value_at_or_child as usize;
        self.arena.get(at..at + item.value_len as usize)
    }

    /// Whether leaf entry `i` is marked deleted.
    pub fn is_deleted(&self, i: usize) -> bool {
        self.items.get(i).is_some_and(|item| item.deleted)
    }

    /// Marks leaf entry `i` deleted or live.
    pub fn set_deleted(&mut self, i: usize, deleted: bool) {
        if let Some(item) = self.items.get_mut(i).filter(|_| self.leaf) {
            item.deleted = deleted;
        }
    }

    /// Child page of interior entry `i`.
    pub fn child(&self, i: usize) -> Option<u32> {
        let item = self.items.get(i).filter(|_| !self.leaf)?;
        Some(item.value_at_or_child)
    }

    fn push_bytes(&mut self, bytes: &[u8]) -> u32 {
        let at = to_u32(self.arena.len());
        self.arena.extend_from_slice(bytes);
        at
    }

    /// Inserts a leaf entry at `i` (clamped to the end).
    pub fn insert_leaf(&mut self, i: usize, key: &[u8], value: &[u8]) {
        let key_at = self.push_bytes(key);
        self.push_bytes(value);
        let item = Item::leaf(key_at as usize, key.len(), value.len());
        self.items.insert(i.min(self.items.len()), item);
    }

    /// Inserts an interior entry at `i` (clamped to the end).
    pub fn insert_child(&mut self, i: usize, key: &[u8], child: u32) {
        let key_at = self.push_bytes(key);
        let item = Item::interior(key_at as usize, key.len(), child);
        self.items.insert(i.min(self.items.len()), item);
    }

    /// Gives leaf entry `i` the value `value`; the entry is live afterwards (a value set on a
    /// record marked deleted brings it back, as an insert over it does).
    pub fn set_value(&mut self, i: usize, value: &[u8]) {
        let at = self.push_bytes(value);
        if let Some(item) = self.items.get_mut(i) {
            item.value_at_or_child = at;
            item.value_len = to_u32(value.len());
            item.deleted = false;
        }
    }

    /// Removes entry `i`, if there is one.
    pub fn remove(&mut self, i: usize) {
        if i < self.items.len() {
            self.items.remove(i);
        }
    }

    /// Empties the key of the first entry (an interior node's entry 0 stands for "everything
    /// below entry 1" and stores no key).
    pub fn clear_first_key(&mut self) {
        if let Some(first) = self.items.first_mut() {
            first.key_len = 0;
        }
    }

    /// Leaf search among the entries: `Ok(i)` if entry `i` has the key, `Err(i)` for the
    /// position it would take.
    pub fn search(&self, key: &[u8]) -> std::result::Result<usize, usize> {
        self.items
            .binary_search_by(|item| self.bytes_of(item).cmp(key))
    }

    /// Bytes entry `i` occupies in its node (slot included); 0 past the end.
    pub fn entry_bytes(&self, i: usize) -> usize {
        self.items.get(i).map_or(0, |item| {
            if self.leaf {
                leaf_entry_bytes(item.key_len as usize, item.value_len as usize)
            } else {
                interior_entry_bytes(item.key_len as usize)
            }
        })
    }

    pub fn bytes(&self) -> usize {
        (0..self.len()).map(|i| self.entry_bytes(i)).sum()
    }

    pub fn first_key(&self) -> Option<&[u8]> {
        self.key(0)
    }

    /// Splits off entries `[at..]` (the arena is shared by copying it once).
    pub fn split_off(&mut self, at: usize) -> Entries {
        let items = self.items.split_off(at.min(self.items.len()));
        Entries {
            leaf: self.leaf,
            arena: self.arena.clone(),
            items,
        }
    }

    /// Appends `other` (its first interior key replaced by `separator`, which is needed once the
    /// entry is no longer first).
    pub fn append(&mut self, other: Entries, separator: &[u8]) {
        if self.leaf != other.leaf {
            // Levels are checked before merging; mixing kinds cannot happen.
            debug_assert!(false, "merging a leaf with an interior node");
            return;
        }
        let base = to_u32(self.arena.len());
        self.arena.extend_from_slice(&other.arena);
        let first = self.items.len();
        let leaf = self.leaf;
        self.items
            .extend(other.items.iter().map(|item| item.moved(base, leaf)));
        if !self.leaf && first < self.items.len() {
            let at = self.push_bytes(separator);
            if let Some(item) = self.items.get_mut(first) {
                item.key_at = at;
                item.key_len = to_u32(separator.len());
            }
        }
    }

    /// The split point for a node that overflowed: both halves fit, as balanced as possible by
    /// bytes; or, for an append at the right edge of the tree, everything but the last entry on
    /// the left (ESE's append split, which packs sequentially filled pages full).
    pub fn split_point(&self, page_size: usize, append: bool) -> usize {
        let n = self.len();
        let cap = capacity(page_size);
        let total = self.bytes();
        if append && n >= 2 && total - self.entry_bytes(n - 1) <= cap {
            return n - 1;
        }
        let mut left = 0usize;
        let mut best = (usize::MAX, 1usize);
        for i in 1..n {
            left += self.entry_bytes(i - 1);
            let right = total - left;
            if left <= cap && right <= cap {
                let imbalance = left.abs_diff(right);
                if imbalance < best.0 {
                    best = (imbalance, i);
                }
            }
        }
        best.1
    }

    /// Writes the entries into `page` as a node at `level`, packed. Keeps the common header
    /// fields (number, stamps, tree) and sets the type. The caller checked that they fit.
    ///
    /// `page` may not be the bytes the entries were decoded from (the arena is a copy), so
    /// encoding into the decoded page itself is safe.
    pub fn encode(&self, page: &mut [u8], level: u16) {
        let free = self.encode_keeping_free_space(page, level);
        if let Some(gap) = page.get_mut(free) {
            gap.fill(0);
        }
    }

    /// [`Entries::encode`] without touching the bytes of the node's new free space: they keep
    /// whatever they held (the caller fills what it must, [`crate::fill`]). Every other byte
    /// of the body is written (the slots, the records). Returns the free space's range.
    pub fn encode_keeping_free_space(&self, page: &mut [u8], level: u16) -> std::ops::Range<usize> {
        let page_type = if level == 0 {
            PageType::Leaf
        } else {
            PageType::Interior
        };
        page::put(page, page::OFFSET_PAGE_TYPE, &[page_type as u8]);
        page::put_u16(page, OFFSET_COUNT, self.len() as u16);
        page::put_u16(page, OFFSET_LEVEL, level);
        let mut end = page.len();
        for i in 0..self.len() {
            let record_bytes = self.record_bytes(i);
            // The caller checked that the entries fit; never underflow if it did not.
            debug_assert!(record_bytes <= end);
            end = end.saturating_sub(record_bytes);
            if let Some(dst) = page.get_mut(end..end + record_bytes) {
                self.write_record(i, dst);
            }
            page::put_u16(page, HEADER_SIZE + i * SLOT_BYTES, end as u16);
        }
        page::put_u16(page, OFFSET_DATA_START, end as u16);
        let slots_end = HEADER_SIZE + self.len() * SLOT_BYTES;
        slots_end.min(end)..end
    }

    /// Bytes of entry `i`'s record (slot excluded).
    fn record_bytes(&self, i: usize) -> usize {
        self.entry_bytes(i).saturating_sub(SLOT_BYTES)
    }

    /// Writes entry `i`'s record into `dst` (exactly [`Entries::record_bytes`] long).
    fn write_record(&self, i: usize, dst: &mut [u8]) {
        let Some(item) = self.items.get(i) else {
            return;
        };
        let key = self.bytes_of(item);
        let flag = if item.deleted { DELETED_FLAG } else { 0 };
        page::put_u16(dst, 0, key.len() as u16 | flag);
        if self.leaf {
            let value = self.value(i).unwrap_or_default();
            page::put_u16(dst, 2, value.len() as u16);
            page::put(dst, LEAF_RECORD_OVERHEAD, key);
            page::put(dst, LEAF_RECORD_OVERHEAD + key.len(), value);
        } else {
            page::put_u32(dst, 2, item.value_at_or_child);
            page::put(dst, INTERIOR_RECORD_OVERHEAD, key);
        }
    }

    /// The entries `range` in the records' own layout (leaf: key length u16, value length u16,
    /// key, value; interior: key length u16, child u32, key), concatenated: the payload of a
    /// [`crate::change::PageChange::NodeSplice`].
    pub fn encode_records(&self, range: std::ops::Range<usize>, out: &mut Vec<u8>) {
        for i in range.filter(|&i| i < self.len()) {
            let start = out.len();
            out.resize(start + self.record_bytes(i), 0);
            if let Some(dst) = out.get_mut(start..) {
                self.write_record(i, dst);
            }
        }
    }

    /// Parses what [`Entries::encode_records`] wrote; `None` if the bytes do not split exactly
    /// into records (a torn or garbage payload).
    pub fn decode_records(bytes: &[u8], leaf: bool) -> Option<Entries> {
        let mut items = Vec::new();
        let mut at = 0usize;
        while at < bytes.len() {
            let item = if leaf {
                let (key_len, deleted) = leaf_key_len(bytes, at)?;
                let value_len = usize::from(page::get_u16(bytes, at + 2)?);
                let key_at = at + LEAF_RECORD_OVERHEAD;
                at = key_at + key_len + value_len;
                Item::leaf(key_at, key_len, value_len).marked(deleted)
            } else {
                let key_len = usize::from(page::get_u16(bytes, at)?);
                let child = page::get_u32(bytes, at + 2)?;
                let key_at = at + INTERIOR_RECORD_OVERHEAD;
                at = key_at + key_len;
                Item::interior(key_at, key_len, child)
            };
            if at > bytes.len() {
                return None;
            }
            items.push(item);
        }
        Some(Entries {
            leaf,
            arena: bytes.to_vec(),
            items,
        })
    }

    /// Keeps the first `keep` entries, then replaces entries `at..at + remove` of those with
    /// `inserted`. `None` (self unchanged) if the ranges do not fit or the kinds differ.
    pub fn splice(
        &mut self,
        keep: usize,
        at: usize,
        remove: usize,
        inserted: Entries,
    ) -> Option<()> {
        let end = at.checked_add(remove)?;
        if keep > self.len() || end > keep || self.leaf != inserted.leaf {
            return None;
        }
        let base = to_u32(self.arena.len());
        self.arena.extend_from_slice(&inserted.arena);
        let leaf = self.leaf;
        self.items.truncate(keep);
        self.items.splice(
            at..end,
            inserted.items.iter().map(|item| item.moved(base, leaf)),
        );
        Some(())
    }

    fn same_entry(&self, i: usize, other: &Entries, j: usize) -> bool {
        if self.leaf != other.leaf {
            return false;
        }
        match (self.items.get(i), other.items.get(j)) {
            (Some(a), Some(b)) => {
                self.bytes_of(a) == other.bytes_of(b)
                    && if self.leaf {
                        a.deleted == b.deleted && self.value(i) == other.value(j)
                    } else {
                        a.value_at_or_child == b.value_at_or_child
                    }
            }
            _ => false,
        }
    }
}

/// How a node's entries went from `old` to `new`, as one splice of the old ones: keep the first
/// `keep`, replace `at..at + remove` of those with `new[inserted]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Splice {
    pub keep: usize,
    pub at: usize,
    pub remove: usize,
    pub inserted: std::ops::Range<usize>,
}

/// The splice that turns `old` into `new` carrying few entries: the common prefix is kept, and
/// the longest run ending `new` that is also a run of `old` (after the prefix) is kept where it
/// is, whatever `old` has after it being cut off. That covers what the tree does to an existing
/// node: an entry inserted, replaced or removed (one entry carried), the left half of a split
/// (a cut, plus the new entry if it landed there), a separator added or dropped, a merge that
/// appends a sibling's entries. Entries of different kinds (a root that changes level) share
/// nothing: the splice carries all of `new`.
pub fn splice_between(old: &Entries, new: &Entries) -> Splice {
    let (n, m) = (old.len(), new.len());
    if old.is_leaf() != new.is_leaf() {
        return Splice {
            keep: 0,
            at: 0,
            remove: 0,
            inserted: 0..m,
        };
    }
    let mut p = 0;
    while p < n.min(m) && old.same_entry(p, new, p) {
        p += 1;
    }
    // The last entry of `new`, if it comes from `old` after the prefix, ends the kept run.
    let mut end = p;
    let mut run = 0;
    if m > p
        && let Some(j) = (p..n).rev().find(|&j| old.same_entry(j, new, m - 1))
    {
        end = j + 1;
        run = 1;
        while run < m - p && run < end - p && old.same_entry(end - 1 - run, new, m - 1 - run) {
            run += 1;
        }
    }
    Splice {
        keep: end,
        at: p,
        remove: end - run - p,
        inserted: p..m - run,
    }
}

/// Writes a node's framing fields (entry count, level, data start) and its page type, for a
/// caller that placed the slots and records itself (the bulk loader).
pub fn set_framing(page: &mut [u8], entries: usize, level: u16, data_start: usize) {
    let page_type = if level == 0 {
        PageType::Leaf
    } else {
        PageType::Interior
    };
    page::put(page, page::OFFSET_PAGE_TYPE, &[page_type as u8]);
    page::put_u16(page, OFFSET_COUNT, entries as u16);
    page::put_u16(page, OFFSET_LEVEL, level);
    page::put_u16(page, OFFSET_DATA_START, data_start as u16);
}

/// Inserts a leaf entry at position `index` without rebuilding the page, if the free space
/// allows. Returns false (page untouched) if it does not.
pub fn leaf_insert_in_place(page: &mut [u8], index: usize, key: &[u8], value: &[u8]) -> bool {
    let n = count(page);
    let need = leaf_entry_bytes(key.len(), value.len());
    if need > free_bytes(page) || index > n {
        return false;
    }
    let record = LEAF_RECORD_OVERHEAD + key.len() + value.len();
    let Some(end) = data_start(page).checked_sub(record) else {
        return false;
    };
    page::put_u16(page, end, key.len() as u16);
    page::put_u16(page, end + 2, value.len() as u16);
    page::put(page, end + LEAF_RECORD_OVERHEAD, key);
    page::put(page, end + LEAF_RECORD_OVERHEAD + key.len(), value);
    let slot_at = HEADER_SIZE + index * SLOT_BYTES;
    let slots_end = HEADER_SIZE + n * SLOT_BYTES;
    page.copy_within(slot_at..slots_end, slot_at + SLOT_BYTES);
    page::put_u16(page, slot_at, end as u16);
    page::put_u16(page, OFFSET_COUNT, (n + 1) as u16);
    page::put_u16(page, OFFSET_DATA_START, end as u16);
    true
}

/// Removes leaf entry `index` without rebuilding the page: the records packed below it move up
/// by its size, the slots after it move down by one, and the bytes it freed are zeroed. Returns
/// false (page untouched) if the node is malformed there.
pub fn leaf_remove_in_place(page: &mut [u8], index: usize) -> bool {
    let n = count(page);
    let start = data_start(page);
    let (Some(offset), Some((key, value))) = (slot(page, index), leaf_entry(page, index)) else {
        return false;
    };
    let record = LEAF_RECORD_OVERHEAD + key.len() + value.len();
    let slots_end = HEADER_SIZE + n * SLOT_BYTES;
    if offset < start || start < slots_end || offset + record > page.len() {
        return false;
    }
    page.copy_within(start..offset, start + record);
    if let Some(freed) = page.get_mut(start..start + record) {
        freed.fill(0);
    }
    for i in 0..n {
        let at = HEADER_SIZE + i * SLOT_BYTES;
        if let Some(o) = page::get_u16(page, at).map(usize::from)
            && i != index
            && o < offset
        {
            page::put_u16(page, at, (o + record) as u16);
        }
    }
    let slot_at = HEADER_SIZE + index * SLOT_BYTES;
    page.copy_within(slot_at + SLOT_BYTES..slots_end, slot_at);
    page::put_u16(page, slots_end - SLOT_BYTES, 0);
    page::put_u16(page, OFFSET_COUNT, (n - 1) as u16);
    page::put_u16(page, OFFSET_DATA_START, (start + record) as u16);
    true
}

/// Gives leaf entry `index` (whose key is `key`) the value `value` without rebuilding the page:
/// overwritten where it is if the size is the same, else removed and inserted again at its slot.
/// The entry is live afterwards (a record marked deleted is brought back).
/// Returns false (page untouched) if the new value does not fit or the node is malformed there.
pub fn leaf_replace_in_place(page: &mut [u8], index: usize, key: &[u8], value: &[u8]) -> bool {
    let Some((old_key, old_value)) = leaf_entry(page, index) else {
        return false;
    };
    if old_key != key {
        return false;
    }
    if old_value.len() == value.len() {
        if let Some(range) = leaf_value_range(page, index)
            && let Some(dst) = page.get_mut(range)
        {
            dst.copy_from_slice(value);
            return set_leaf_deleted(page, index, false);
        }
        return false;
    }
    let old = leaf_entry_bytes(key.len(), old_value.len());
    if free_bytes(page) + old < leaf_entry_bytes(key.len(), value.len()) {
        return false;
    }
    leaf_remove_in_place(page, index) && leaf_insert_in_place(page, index, key, value)
}

#[cfg(test)]
#[allow(clippy::indexing_slicing, clippy::unwrap_used)]
mod tests {
    use super::*;

    const NO_PAIRS: [(&[u8], &[u8]); 0] = [];
    const NO_CHILDREN: [(&[u8], u32); 0] = [];

    fn leaf(page_size: usize, entries: &[(&[u8], &[u8])]) -> Vec<u8> {
        let mut page = vec![0u8; page_size];
        Entries::from_leaf(entries.iter().map(|(k, v)| (k.to_vec(), v.to_vec())))
            .encode(&mut page, 0);
        page
    }

    #[test]
    fn encode_search_and_in_place_insert_agree() {
        let mut page = leaf(4096, &[(b"b", b"2"), (b"d", b"4")]);
        validate(&page).unwrap();
        assert_eq!(leaf_search(&page, b"b"), Some(Ok(0)));
        assert_eq!(leaf_search(&page, b"c"), Some(Err(1)));
        assert_eq!(leaf_search(&page, b"e"), Some(Err(2)));
        assert!(leaf_insert_in_place(&mut page, 1, b"c", b"33"));
        validate(&page).unwrap();
        assert_eq!(leaf_entry(&page, 1), Some((&b"c"[..], &b"33"[..])));
        assert_eq!(leaf_entry(&page, 2), Some((&b"d"[..], &b"4"[..])));
        let decoded = Entries::decode(&page).unwrap();
        assert_eq!(decoded.len(), 3);
        assert_eq!(used_bytes(&page), decoded.bytes());
    }

    #[test]
    fn interior_search_picks_the_covering_child() {
        let mut page = vec![0u8; 4096];
        Entries::from_interior(vec![(vec![], 10), (b"m".to_vec(), 11), (b"t".to_vec(), 12)])
            .encode(&mut page, 1);
        validate(&page).unwrap();
        assert_eq!(interior_search(&page, b"a"), Some(0));
        assert_eq!(interior_search(&page, b"m"), Some(1));
        assert_eq!(interior_search(&page, b"s"), Some(1));
        assert_eq!(interior_search(&page, b"z"), Some(2));
    }

    #[test]
    fn garbage_is_rejected_without_panicking() {
        let mut page = leaf(4096, &[(b"k", b"v")]);
        page::put_u16(&mut page, HEADER_SIZE, 4095);
        assert!(validate(&page).is_none());
        let mut page = leaf(4096, &[(b"k", b"v")]);
        page::put_u16(&mut page, OFFSET_COUNT, 5000);
        assert!(validate(&page).is_none());
        assert!(Entries::decode(&page).is_none());
    }

    #[test]
    fn split_point_keeps_both_halves_within_capacity() {
        let value = vec![7u8; max_leaf_entry_bytes(4096) - 20];
        let entries = Entries::from_leaf(
            (0..3u8).map(|i| (vec![i], if i == 1 { value.clone() } else { vec![1; 10] })),
        );
        let at = entries.split_point(4096, false);
        let mut left = entries.clone();
        let right = left.split_off(at);
        assert!(left.bytes() <= capacity(4096) && right.bytes() <= capacity(4096));
        assert!(!left.is_empty() && !right.is_empty());
    }

    /// The splice found between two entry lists, applied to the first, gives the second: for
    /// the tree's own cases and for random pairs (seeded, deterministic).
    #[test]
    fn splice_between_rebuilds_the_new_entries() {
        let leaf = |keys: &[u8]| Entries::from_leaf(keys.iter().map(|&k| (vec![k], vec![k; 3])));
        let check = |old: &Entries, new: &Entries| {
            let splice = splice_between(old, new);
            let mut records = Vec::new();
            new.encode_records(splice.inserted.clone(), &mut records);
            let inserted = Entries::decode_records(&records, new.is_leaf()).unwrap();
            let mut rebuilt = old.clone();
            if old.is_leaf() == new.is_leaf() {
                rebuilt
                    .splice(splice.keep, splice.at, splice.remove, inserted)
                    .unwrap();
            } else {
                assert_eq!((splice.keep, splice.at, splice.remove), (0, 0, 0));
                rebuilt = inserted;
            }
            assert_eq!(&rebuilt, new, "{old:?} -> {new:?}: {splice:?}");
            splice
        };
        let old = leaf(&[1, 2, 3, 4, 5, 6]);
        // Left half of a split, the new record on the right: a cut, nothing carried.
        assert_eq!(check(&old, &leaf(&[1, 2, 3])).inserted.len(), 0);
        // Left half with the new record in it: one entry carried.
        assert_eq!(check(&old, &leaf(&[1, 2, 9, 3])).inserted.len(), 1);
        // Insert, delete, append (merge).
        assert_eq!(check(&old, &leaf(&[1, 2, 3, 9, 4, 5, 6])).inserted.len(), 1);
        assert_eq!(check(&old, &leaf(&[1, 2, 4, 5, 6])).inserted.len(), 0);
        assert_eq!(
            check(&old, &leaf(&[1, 2, 3, 4, 5, 6, 7, 8])).inserted.len(),
            2
        );
        // A level change carries everything.
        let interior = Entries::from_interior(vec![(vec![], 4), (vec![5], 6)]);
        assert_eq!(check(&old, &interior).inserted.len(), 2);
        assert_eq!(check(&interior, &old).inserted.len(), 6);
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move |n: u64| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % n.max(1)) as u8
        };
        for _ in 0..2000 {
            let old: Vec<u8> = (0..next(12)).map(|_| next(16)).collect();
            let new: Vec<u8> = (0..next(12)).map(|_| next(16)).collect();
            check(&leaf(&old), &leaf(&new));
        }
    }

    /// In-place insert, replace and remove against a sorted model: after every step the page
    /// is a valid packed node holding exactly the model's entries, with its free space zeroed.
    #[test]
    fn in_place_changes_keep_the_node_packed_and_equal_to_the_model() {
        let seed = jetproof_test_support::seed_or(0x5eed_0001);
        let mut state = seed | 1;
        let mut next = move |n: u64| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % n.max(1)
        };
        let mut page = leaf(4096, &[]);
        let mut model: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
        for step in 0..5000 {
            let key = vec![next(64) as u8, next(4) as u8];
            let value = vec![step as u8; next(300) as usize];
            let at = model.binary_search_by(|(k, _)| k.cmp(&key));
            match (next(3), at) {
                (0, Err(i)) => {
                    if leaf_insert_in_place(&mut page, i, &key, &value) {
                        model.insert(i, (key, value));
                    } else {
                        assert!(leaf_entry_bytes(key.len(), value.len()) > free_bytes(&page));
                    }
                }
                (1, Ok(i)) => {
                    let fits = free_bytes(&page) + leaf_entry_bytes(key.len(), model[i].1.len())
                        >= leaf_entry_bytes(key.len(), value.len());
                    assert_eq!(
                        leaf_replace_in_place(&mut page, i, &key, &value),
                        fits,
                        "seed {seed} step {step}"
                    );
                    if fits {
                        model[i].1 = value;
                    }
                }
                (_, Ok(i)) => {
                    assert!(
                        leaf_remove_in_place(&mut page, i),
                        "seed {seed} step {step}"
                    );
                    model.remove(i);
                }
                _ => continue,
            }
            assert!(validate(&page).is_some(), "seed {seed} step {step}");
            assert_eq!(
                Entries::decode(&page).unwrap(),
                Entries::from_leaf(model.iter().map(|(k, v)| (k, v))),
                "seed {seed} step {step}"
            );
            let free = HEADER_SIZE + count(&page) * SLOT_BYTES..data_start(&page);
            assert!(
                page[free].iter().all(|&b| b == 0),
                "seed {seed} step {step}"
            );
        }
        assert!(!leaf_remove_in_place(&mut page, model.len()));
        assert!(!leaf_replace_in_place(&mut page, 0, b"not the key", b""));
    }

    /// A deletion mark is part of the record: it survives decoding, re-encoding, the records
    /// of a splice and an in-place resize, a splice carries an entry whose mark changed, and a
    /// value set on a marked entry makes it live again.
    #[test]
    fn deletion_marks_travel_with_their_records() {
        let mut page = leaf(4096, &[(b"a", b"1"), (b"b", b"22"), (b"c", b"333")]);
        assert!(set_leaf_deleted(&mut page, 1, true));
        validate(&page).unwrap();
        assert_eq!(leaf_search(&page, b"b"), Some(Ok(1)));
        assert_eq!(leaf_entry(&page, 1), Some((&b"b"[..], &b"22"[..])));
        assert_eq!(leaf_is_deleted(&page, 1), Some(true));
        assert_eq!(leaf_is_deleted(&page, 0), Some(false));
        let entries = Entries::decode(&page).unwrap();
        assert!(entries.is_deleted(1) && !entries.is_deleted(2));
        let mut again = vec![0u8; 4096];
        entries.encode(&mut again, 0);
        assert_eq!(leaf_is_deleted(&again, 1), Some(true));
        let mut records = Vec::new();
        entries.encode_records(0..3, &mut records);
        assert_eq!(Entries::decode_records(&records, true).unwrap(), entries);
        // Only the mark differs: the splice carries that one entry.
        let mut unmarked = entries.clone();
        unmarked.set_deleted(1, false);
        assert_ne!(unmarked, entries);
        assert_eq!(splice_between(&entries, &unmarked).inserted, 1..2);
        // An in-place insert beside a marked record keeps its mark; a replace clears it.
        assert!(leaf_insert_in_place(&mut page, 2, b"bb", b"x"));
        assert_eq!(leaf_is_deleted(&page, 1), Some(true));
        assert!(leaf_remove_in_place(&mut page, 0));
        assert_eq!(leaf_is_deleted(&page, 0), Some(true));
        assert!(leaf_replace_in_place(&mut page, 0, b"b", b"99"));
        assert_eq!(leaf_is_deleted(&page, 0), Some(false));
        assert!(set_leaf_deleted(&mut page, 0, true));
        assert!(leaf_replace_in_place(&mut page, 0, b"b", b"a longer value"));
        assert_eq!(
            leaf_entry(&page, 0),
            Some((&b"b"[..], &b"a longer value"[..]))
        );
        assert_eq!(leaf_is_deleted(&page, 0), Some(false));
        validate(&page).unwrap();
        let mut decoded = Entries::decode(&page).unwrap();
        decoded.set_deleted(1, true);
        decoded.set_value(1, b"new");
        assert!(!decoded.is_deleted(1));
        assert!(!set_leaf_deleted(&mut page, 9, true));
    }

    #[test]
    fn garbage_records_are_refused() {
        assert!(Entries::decode_records(&[1], true).is_none());
        assert!(Entries::decode_records(&[1, 0, 0], true).is_none());
        assert!(Entries::decode_records(&[5, 0, 1, 0, 0, 0, 7], false).is_none());
        assert_eq!(
            Entries::decode_records(&[], false),
            Some(Entries::from_interior(NO_CHILDREN))
        );
        let mut e = Entries::from_leaf(vec![(vec![1], vec![])]);
        assert!(e.splice(2, 0, 0, Entries::from_leaf(NO_PAIRS)).is_none());
        assert!(e.splice(1, 1, 1, Entries::from_leaf(NO_PAIRS)).is_none());
        assert!(
            e.splice(1, usize::MAX, 1, Entries::from_leaf(NO_PAIRS))
                .is_none()
        );
        assert!(
            e.splice(1, 0, 0, Entries::from_interior(NO_CHILDREN))
                .is_none()
        );
    }
}
