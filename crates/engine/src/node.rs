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

/// Below this many used bytes a node tries to merge with a sibling.
pub fn merge_threshold(page_size: usize) -> usize {
    capacity(page_size) / 4
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

/// Entry `i` of a leaf: (key, value).
pub fn leaf_entry(page: &[u8], i: usize) -> Option<(&[u8], &[u8])> {
    let offset = slot(page, i)?;
    let key_len = usize::from(page::get_u16(page, offset)?);
    let value_len = usize::from(page::get_u16(page, offset + 2)?);
    let key_start = offset + LEAF_RECORD_OVERHEAD;
    let value_start = key_start + key_len;
    let key = page.get(key_start..value_start)?;
    let value = page.get(value_start..value_start + value_len)?;
    Some((key, value))
}

/// Where the value of leaf entry `i` lies in the page (for replacing it in place).
pub fn leaf_value_range(page: &[u8], i: usize) -> Option<std::ops::Range<usize>> {
    let offset = slot(page, i)?;
    let key_len = usize::from(page::get_u16(page, offset)?);
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

/// A node's entries, decoded for a structural change.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Entries {
    Leaf(Vec<(Vec<u8>, Vec<u8>)>),
    Interior(Vec<(Vec<u8>, u32)>),
}

impl Entries {
    pub fn decode(page: &[u8]) -> Option<Entries> {
        let n = count(page);
        if level(page) == 0 {
            (0..n)
                .map(|i| leaf_entry(page, i).map(|(k, v)| (k.to_vec(), v.to_vec())))
                .collect::<Option<Vec<_>>>()
                .map(Entries::Leaf)
        } else {
            (0..n)
                .map(|i| interior_entry(page, i).map(|(k, c)| (k.to_vec(), c)))
                .collect::<Option<Vec<_>>>()
                .map(Entries::Interior)
        }
    }

    pub fn len(&self) -> usize {
        match self {
            Entries::Leaf(e) => e.len(),
            Entries::Interior(e) => e.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn entry_bytes(&self, i: usize) -> usize {
        match self {
            Entries::Leaf(e) => e
                .get(i)
                .map_or(0, |(k, v)| leaf_entry_bytes(k.len(), v.len())),
            Entries::Interior(e) => e.get(i).map_or(0, |(k, _)| interior_entry_bytes(k.len())),
        }
    }

    pub fn bytes(&self) -> usize {
        (0..self.len()).map(|i| self.entry_bytes(i)).sum()
    }

    pub fn first_key(&self) -> Option<&[u8]> {
        match self {
            Entries::Leaf(e) => e.first().map(|(k, _)| k.as_slice()),
            Entries::Interior(e) => e.first().map(|(k, _)| k.as_slice()),
        }
    }

    /// Splits off entries `[at..]`.
    pub fn split_off(&mut self, at: usize) -> Entries {
        match self {
            Entries::Leaf(e) => Entries::Leaf(e.split_off(at)),
            Entries::Interior(e) => Entries::Interior(e.split_off(at)),
        }
    }

    /// Appends `other` (its first interior key replaced by `separator`, which is needed once the
    /// entry is no longer first).
    pub fn append(&mut self, other: Entries, separator: &[u8]) {
        match (self, other) {
            (Entries::Leaf(a), Entries::Leaf(b)) => a.extend(b),
            (Entries::Interior(a), Entries::Interior(mut b)) => {
                if let Some(first) = b.first_mut() {
                    first.0 = separator.to_vec();
                }
                a.extend(b);
            }
            // Levels are checked before merging; mixing kinds cannot happen.
            _ => debug_assert!(false, "merging a leaf with an interior node"),
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
    pub fn encode(&self, page: &mut [u8], level: u16) {
        let page_type = if level == 0 {
            PageType::Leaf
        } else {
            PageType::Interior
        };
        page::put(page, page::OFFSET_PAGE_TYPE, &[page_type as u8]);
        page::put_u16(page, OFFSET_COUNT, self.len() as u16);
        page::put_u16(page, OFFSET_LEVEL, level);
        if let Some(body) = page.get_mut(HEADER_SIZE..) {
            body.fill(0);
        }
        let mut end = page.len();
        for i in 0..self.len() {
            let (record_bytes, key, tail): (usize, &[u8], Vec<u8>) = match self {
                Entries::Leaf(e) => {
                    let Some((k, v)) = e.get(i) else { break };
                    let mut tail = Vec::with_capacity(LEAF_RECORD_OVERHEAD);
                    tail.extend_from_slice(&(k.len() as u16).to_le_bytes());
                    tail.extend_from_slice(&(v.len() as u16).to_le_bytes());
                    (LEAF_RECORD_OVERHEAD + k.len() + v.len(), k, tail)
                }
                Entries::Interior(e) => {
                    let Some((k, c)) = e.get(i) else { break };
                    let mut tail = Vec::with_capacity(INTERIOR_RECORD_OVERHEAD);
                    tail.extend_from_slice(&(k.len() as u16).to_le_bytes());
                    tail.extend_from_slice(&c.to_le_bytes());
                    (INTERIOR_RECORD_OVERHEAD + k.len(), k, tail)
                }
            };
            // The caller checked that the entries fit; never underflow if it did not.
            debug_assert!(record_bytes <= end);
            end = end.saturating_sub(record_bytes);
            page::put(page, end, &tail);
            page::put(page, end + tail.len(), key);
            if let Entries::Leaf(e) = self
                && let Some((_, v)) = e.get(i)
            {
                page::put(page, end + tail.len() + key.len(), v);
            }
            page::put_u16(page, HEADER_SIZE + i * SLOT_BYTES, end as u16);
        }
        page::put_u16(page, OFFSET_DATA_START, end as u16);
    }
}

impl Entries {
    /// The entries `range` in the records' own layout (leaf: key length u16, value length u16,
    /// key, value; interior: key length u16, child u32, key), concatenated: the payload of a
    /// [`crate::change::PageChange::NodeSplice`].
    pub fn encode_records(&self, range: std::ops::Range<usize>, out: &mut Vec<u8>) {
        match self {
            Entries::Leaf(e) => {
                for (k, v) in e.get(range).unwrap_or_default() {
                    out.extend_from_slice(&(k.len() as u16).to_le_bytes());
                    out.extend_from_slice(&(v.len() as u16).to_le_bytes());
                    out.extend_from_slice(k);
                    out.extend_from_slice(v);
                }
            }
            Entries::Interior(e) => {
                for (k, c) in e.get(range).unwrap_or_default() {
                    out.extend_from_slice(&(k.len() as u16).to_le_bytes());
                    out.extend_from_slice(&c.to_le_bytes());
                    out.extend_from_slice(k);
                }
            }
        }
    }

    /// Parses what [`Entries::encode_records`] wrote; `None` if the bytes do not split exactly
    /// into records (a torn or garbage payload).
    pub fn decode_records(bytes: &[u8], leaf: bool) -> Option<Entries> {
        let mut rest = bytes;
        let mut take = |n: usize| -> Option<&[u8]> {
            let (head, tail) = rest.split_at_checked(n)?;
            rest = tail;
            Some(head)
        };
        let mut leaves = Vec::new();
        let mut interiors = Vec::new();
        while let Some(len) = take(2) {
            let key_len = usize::from(page::get_u16(len, 0)?);
            if leaf {
                let value_len = usize::from(page::get_u16(take(2)?, 0)?);
                let key = take(key_len)?.to_vec();
                let value = take(value_len)?.to_vec();
                leaves.push((key, value));
            } else {
                let child = page::get_u32(take(4)?, 0)?;
                let key = take(key_len)?.to_vec();
                interiors.push((key, child));
            }
        }
        // `take(2)` failed: either nothing was left (done) or one stray byte (garbage).
        if !rest.is_empty() {
            return None;
        }
        Some(if leaf {
            Entries::Leaf(leaves)
        } else {
            Entries::Interior(interiors)
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
        if keep > self.len() || end > keep {
            return None;
        }
        match (self, inserted) {
            (Entries::Leaf(e), Entries::Leaf(new)) => {
                e.truncate(keep);
                e.splice(at..end, new);
            }
            (Entries::Interior(e), Entries::Interior(new)) => {
                e.truncate(keep);
                e.splice(at..end, new);
            }
            _ => return None,
        }
        Some(())
    }

    fn same_entry(&self, i: usize, other: &Entries, j: usize) -> bool {
        match (self, other) {
            (Entries::Leaf(a), Entries::Leaf(b)) => a.get(i).is_some() && a.get(i) == b.get(j),
            (Entries::Interior(a), Entries::Interior(b)) => {
                a.get(i).is_some() && a.get(i) == b.get(j)
            }
            _ => false,
        }
    }

    pub fn is_leaf(&self) -> bool {
        matches!(self, Entries::Leaf(_))
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

#[cfg(test)]
#[allow(clippy::indexing_slicing, clippy::unwrap_used)]
mod tests {
    use super::*;

    fn leaf(page_size: usize, entries: &[(&[u8], &[u8])]) -> Vec<u8> {
        let mut page = vec![0u8; page_size];
        Entries::Leaf(
            entries
                .iter()
                .map(|(k, v)| (k.to_vec(), v.to_vec()))
                .collect(),
        )
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
        Entries::Interior(vec![(vec![], 10), (b"m".to_vec(), 11), (b"t".to_vec(), 12)])
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
        let entries = Entries::Leaf(
            (0..3u8)
                .map(|i| (vec![i], if i == 1 { value.clone() } else { vec![1; 10] }))
                .collect(),
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
        let leaf =
            |keys: &[u8]| Entries::Leaf(keys.iter().map(|&k| (vec![k], vec![k; 3])).collect());
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
        let interior = Entries::Interior(vec![(vec![], 4), (vec![5], 6)]);
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

    #[test]
    fn garbage_records_are_refused() {
        assert!(Entries::decode_records(&[1], true).is_none());
        assert!(Entries::decode_records(&[1, 0, 0], true).is_none());
        assert!(Entries::decode_records(&[5, 0, 1, 0, 0, 0, 7], false).is_none());
        assert_eq!(
            Entries::decode_records(&[], false),
            Some(Entries::Interior(Vec::new()))
        );
        let mut e = Entries::Leaf(vec![(vec![1], vec![])]);
        assert!(e.splice(2, 0, 0, Entries::Leaf(vec![])).is_none());
        assert!(e.splice(1, 1, 1, Entries::Leaf(vec![])).is_none());
        assert!(e.splice(1, usize::MAX, 1, Entries::Leaf(vec![])).is_none());
        assert!(e.splice(1, 0, 0, Entries::Interior(vec![])).is_none());
    }
}
