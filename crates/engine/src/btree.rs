//! The B+tree of variable-size records, over the page cache.
//!
//! Concurrency (many sessions at once, page latches, no global lock):
//! * Readers descend with shared latches, latching the child before releasing the parent
//!   (latch coupling), so a reader never follows a pointer that a split or merge is changing.
//! * A writer first tries the optimistic path: shared latches down to the leaf's parent, an
//!   exclusive latch on the leaf, and a change that fits in the leaf (no split, no merge). Most
//!   changes end there.
//! * Otherwise it takes the pessimistic path: exclusive latches from the root down, releasing
//!   every ancestor as soon as a node is *safe* (it cannot split or underflow whatever happens
//!   below), and latching one sibling of each unsafe node for a possible merge. Latches are always
//!   taken top-down, and siblings only under their parent's exclusive latch, so there is no
//!   deadlock.
//! * No latch is held across a read from disk on the descent: when a child is not resident, the
//!   session releases everything, reads the child with no latch held, and starts again from the
//!   root (after a few restarts it reads with the parent latched, so progress is guaranteed);
//!   reads and the optimistic path share that shared-latched step (`Tree::descend`). A
//!   split may still wait on a stall flush or on file growth while holding the latches of the
//!   nodes it is splitting; both are rare and both are waits every session would share.
//! * The root page never moves: a root split moves the root's entries into two new pages, and a
//!   root left with one child takes that child's entries. The header names the root once.
//!
//! Node layout is in [`crate::node`]; interior entry 0's key stands for "everything below entry
//! 1". Separators are the first key of the right node at the time of the split.
#![deny(clippy::unwrap_used)]

use std::sync::atomic::AtomicU64;

use crate::cache::{PageCache, PageMut, PageRef};
use crate::change::{Before, ChangeLog, PageChange};
use crate::error::{EngineError, Result};
use crate::fill::{self, PageContent};
use crate::node::{self, Entries};
use crate::page::{self, PageType};
use crate::space::{LeafSplit, Space};

/// How many leaves a scan reads ahead (adjacent ones in one I/O).
const READ_AHEAD_PAGES: usize = 16;
/// Restarts (after reading a missing child with no latch) before reading under the latch.
const MAX_RESTARTS: u32 = 8;

/// How one shared-latched descent ([`Tree::descend`]) ended.
enum Descent<'a> {
    /// The node at the level asked for (or the root, if the tree is lower), share-latched.
    Reached { node: PageRef<'a>, level: u16 },
    /// A child was not in the cache: every latch was released and the child read in; start
    /// again from the root.
    Restart,
}

/// A change to one record.
///
/// Records marked deleted (flag delete, [`Op::MarkDeleted`]) are invisible to reads and count as
/// absent for [`Op::Insert`] and [`Op::Replace`]; `docs/design.md`, "Flag delete".
#[derive(Clone, Copy, Debug)]
pub enum Op<'a> {
    /// Adds a record, or brings back one marked deleted with the new value; no change if a live
    /// record has the key.
    Insert { key: &'a [u8], value: &'a [u8] },
    /// Replaces the value of a live record; no change if the key is absent or marked deleted.
    Replace { key: &'a [u8], value: &'a [u8] },
    /// Removes the record, live or marked deleted; no change if the key is absent.
    Delete { key: &'a [u8] },
    /// Marks a live record deleted, leaving it on its page (ESE's flag delete); no change if
    /// the key is absent or already marked.
    MarkDeleted { key: &'a [u8] },
    /// Clears the mark of a record marked deleted (the undo of [`Op::MarkDeleted`]); no change
    /// if the key is absent or live.
    Unmark { key: &'a [u8] },
    /// Removes a record marked deleted (the cleanup after its delete committed); no change if
    /// the key is absent or live.
    Purge { key: &'a [u8] },
}

impl<'a> Op<'a> {
    fn key(&self) -> &'a [u8] {
        match *self {
            Op::Insert { key, .. }
            | Op::Replace { key, .. }
            | Op::Delete { key }
            | Op::MarkDeleted { key }
            | Op::Unmark { key }
            | Op::Purge { key } => key,
        }
    }

    /// What this operation hands to [`ChangeLog::before_change`] when it changes the record it
    /// found: `record` is the record's value and whether it is marked deleted (`None`: absent).
    fn before<'v>(&self, record: Option<(&'v [u8], bool)>) -> Before<'v> {
        match (self, record) {
            (Op::MarkDeleted { .. }, _) => Before::Marking,
            (_, None) => Before::Absent,
            (_, Some((value, true))) => Before::Marked(value),
            (_, Some((value, false))) => Before::Value(value),
        }
    }
}

/// What a full walk of the tree found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TreeStats {
    pub records: u64,
    pub leaf_pages: u64,
    pub interior_pages: u64,
    /// Levels, leaves included (1 = the root is a leaf).
    pub height: u32,
    pub record_bytes: u64,
    /// Records marked deleted and not yet removed (not in `records` nor `record_bytes`).
    pub marked_records: u64,
}

/// A B+tree rooted at a fixed page.
#[derive(Debug)]
pub struct Tree<'a> {
    pub cache: &'a PageCache,
    pub space: &'a Space,
    pub stamp: &'a AtomicU64,
    pub root: u32,
    pub tree_id: u32,
    /// Where every page change is reported (the log), see [`crate::change`].
    pub log: &'a dyn ChangeLog,
    /// What the bytes a change frees are made of (`None`: zeros), see [`crate::fill`].
    pub content: Option<&'a dyn PageContent>,
}

struct PathNode<'a> {
    node: PageMut<'a>,
    /// The child followed from this node.
    child_index: usize,
    /// This node is the rightmost at its level.
    rightmost: bool,
    /// A sibling of this node (and its index in the parent), latched for a merge.
    sibling: Option<(PageMut<'a>, usize)>,
}

impl<'a> Tree<'a> {
    fn inconsistent(&self, page: u32, what: impl Into<String>) -> EngineError {
        EngineError::Inconsistent {
            path: self.cache.file().path().to_path_buf(),
            page,
            what: what.into(),
        }
    }

    fn next_stamp(&self, node: &PageMut<'_>) -> u64 {
        crate::space::stamp_after(self.stamp, node.data())
    }

    /// Reports a change just made to `node` and stamps the page with a new update stamp and the
    /// log position the log gave (or `lp`, the caller's, if later).
    fn logged(&self, node: &mut PageMut<'_>, lp: u64, change: PageChange<'_>) -> Result<()> {
        let stamp = self.next_stamp(node);
        let logged = self
            .log
            .record(node.page_number(), stamp, &change)
            .inspect_err(|e| self.cache.poison(e))?;
        node.stamp(stamp, logged.max(lp));
        Ok(())
    }

    /// Reports the page's whole new content (structural changes) and stamps it.
    fn logged_image(&self, node: &mut PageMut<'_>, lp: u64) -> Result<()> {
        let stamp = self.next_stamp(node);
        let logged = self
            .log
            .record(
                node.page_number(),
                stamp,
                &PageChange::Image { data: node.data() },
            )
            .inspect_err(|e| self.cache.poison(e))?;
        node.stamp(stamp, logged.max(lp));
        Ok(())
    }

    /// Fills the bytes of `node`'s free space that were not free before a change (in place, or a
    /// rewrite that kept the free space's bytes; `before`: its free range then) from the
    /// content, if there is one (they are zeros otherwise). The framing is unchanged.
    fn fill_freed(&self, node: &mut PageMut<'_>, before: std::ops::Range<usize>) {
        let Some(content) = self.content else {
            return;
        };
        let number = node.page_number();
        let after = node::free_range(node.data());
        for range in fill::newly_free(before, after) {
            if !range.is_empty() {
                fill::fill_range(node.node_data_mut(), number, range, content);
            }
        }
    }

    /// Fills all of `node`'s free space (after a rewrite, which zeroes it) from the content,
    /// if there is one. Called after the node's image, if it has one, was logged: the log
    /// leaves out the image's run of zeros, so the content never reaches it.
    fn fill_free_space(&self, node: &mut PageMut<'_>) {
        let Some(content) = self.content else {
            return;
        };
        let number = node.page_number();
        let range = if node::is_node(node.data()) {
            node::free_range(node.data())
        } else {
            page::HEADER_SIZE..node.data().len()
        };
        fill::fill_range(node.node_data_mut(), number, range, content);
    }

    fn check_node(&self, page: u32, data: &[u8], level: Option<u16>) -> Result<u16> {
        if !node::is_node(data) {
            return Err(self.inconsistent(page, "expected a B+tree page"));
        }
        let found = node::level(data);
        if let Some(expected) = level
            && found != expected
        {
            return Err(self.inconsistent(
                page,
                format!("node at level {found} where level {expected} was expected"),
            ));
        }
        if (page::page_type(data) == Some(PageType::Leaf)) != (found == 0) {
            return Err(self.inconsistent(page, "page type and level disagree"));
        }
        Ok(found)
    }

    fn child_of(&self, page: u32, data: &[u8], key: &[u8]) -> Result<(usize, u32)> {
        let index = node::interior_search(data, key)
            .ok_or_else(|| self.inconsistent(page, "malformed interior node"))?;
        let (_, child) = node::interior_entry(data, index)
            .ok_or_else(|| self.inconsistent(page, "malformed interior entry"))?;
        self.check_child(page, child)?;
        Ok((index, child))
    }

    /// A child pointer read from disk is checked before its latch is taken: one that names the
    /// node itself, the root, a header or a space map page (a damaged or stale node) would make
    /// the descent wait forever on a latch this very session holds. Deeper cycles cannot form:
    /// every node's level is checked to be its parent's minus one.
    fn check_child(&self, page: u32, child: u32) -> Result<()> {
        let ps = self.cache.config().page_size;
        if child == page
            || child == self.root
            || child < crate::header::HEADER_PAGES
            || crate::space::is_map_page(u64::from(child), ps)
        {
            return Err(self.inconsistent(
                page,
                format!("an interior entry points at page {child}, which cannot be a child here"),
            ));
        }
        Ok(())
    }

    /// Formats the tree's (empty) root leaf into a freshly created page.
    pub fn format_root(&self) -> Result<()> {
        let mut root = self.cache.create(self.root)?;
        page::write_common(root.data_mut(), self.root, PageType::Leaf, 0);
        page::put_u32(root.data_mut(), page::OFFSET_TREE, self.tree_id);
        Entries::from_leaf(Vec::<(Vec<u8>, Vec<u8>)>::new()).encode(root.data_mut(), 0);
        self.logged_image(&mut root, 0)?;
        self.fill_free_space(&mut root);
        Ok(())
    }

    /// The value stored under `key`.
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let leaf = self.read_leaf(key, &mut None)?;
        let page = leaf.page_number();
        let data = leaf.data();
        match node::leaf_search(data, key).ok_or_else(|| self.inconsistent(page, "bad leaf"))? {
            Ok(i) if node::leaf_is_deleted(data, i) == Some(false) => {
                let (_, value) = node::leaf_entry(data, i)
                    .ok_or_else(|| self.inconsistent(page, "malformed leaf entry"))?;
                Ok(Some(value.to_vec()))
            }
            Ok(_) | Err(_) => Ok(None),
        }
    }

    /// Descends with shared latches to the leaf that covers `key`. If `scan` is given, fills it
    /// with the lowest separator above the leaf's range (the next leaf's first key) and the pages
    /// to read ahead.
    fn read_leaf(&self, key: &[u8], scan: &mut Option<ScanHints>) -> Result<PageRef<'a>> {
        let mut restarts = 0;
        loop {
            if let Some(hints) = scan.as_mut() {
                *hints = ScanHints::default();
            }
            let visit = |level: u16, index: usize, data: &[u8]| {
                if let Some(hints) = scan.as_mut() {
                    if let Some((upper, _)) = node::interior_entry(data, index + 1) {
                        hints.upper = Some(upper.to_vec());
                    }
                    if level == 1 {
                        hints.read_ahead = (index + 1..index + 1 + READ_AHEAD_PAGES)
                            .filter_map(|i| node::interior_entry(data, i).map(|(_, c)| c))
                            .collect();
                    }
                }
            };
            match self.descend(key, 0, &mut restarts, visit)? {
                Descent::Reached { node, .. } => return Ok(node),
                Descent::Restart => continue,
            }
        }
    }

    /// One shared-latched descent from the root along `key`, down to the node at level `to`
    /// (or the root, if the root is lower), latch coupling on the way: each child is latched
    /// before its parent's latch is released. `visit(level, index, data)` sees each interior
    /// node passed through, with the index of the entry followed. A child not in the cache, while
    /// `restarts` is under [`MAX_RESTARTS`], releases every latch, is read with no latch held,
    /// counts a restart and returns [`Descent::Restart`]: the caller starts again from the root.
    /// Past that, the child is read with its parent latched, so progress is guaranteed.
    ///
    /// Used by reads ([`Self::read_leaf`]) and by the optimistic write down to the leaf's parent.
    /// The pessimistic path descends with exclusive latches, keeps a path of unsafe ancestors and
    /// latches siblings on the way, so it has its own loop ([`Self::modify_pessimistic`]).
    fn descend(
        &self,
        key: &[u8],
        to: u16,
        restarts: &mut u32,
        mut visit: impl FnMut(u16, usize, &[u8]),
    ) -> Result<Descent<'a>> {
        let mut node = self.cache.read(self.root)?;
        let mut level = self.check_node(self.root, node.data(), None)?;
        while level > to {
            let page = node.page_number();
            let data = node.data();
            let (index, child) = self.child_of(page, data, key)?;
            visit(level, index, data);
            let child_ref = match self.cache.read_if_resident(child) {
                Some(child_ref) => child_ref,
                None if *restarts < MAX_RESTARTS => {
                    drop(node);
                    drop(self.cache.read(child)?);
                    *restarts += 1;
                    return Ok(Descent::Restart);
                }
                None => self.cache.read(child)?,
            };
            self.check_node(child, child_ref.data(), Some(level - 1))?;
            node = child_ref;
            level -= 1;
        }
        Ok(Descent::Reached { node, level })
    }

    /// Up to `limit` records with keys at or above `start`, in key order, appended to `out`.
    /// Leaves ahead are read in before they are needed (read-ahead), adjacent ones in one I/O.
    pub fn scan(
        &self,
        start: &[u8],
        limit: usize,
        out: &mut Vec<(Vec<u8>, Vec<u8>)>,
    ) -> Result<()> {
        let mut cursor = start.to_vec();
        let wanted = out.len().saturating_add(limit);
        while out.len() < wanted {
            let mut hints = Some(ScanHints::default());
            let leaf = self.read_leaf(&cursor, &mut hints)?;
            let page = leaf.page_number();
            let data = leaf.data();
            let from = match node::leaf_search(data, &cursor)
                .ok_or_else(|| self.inconsistent(page, "bad leaf"))?
            {
                Ok(i) | Err(i) => i,
            };
            for i in from..node::count(data) {
                if out.len() >= wanted {
                    break;
                }
                let (k, v) = node::leaf_entry(data, i)
                    .ok_or_else(|| self.inconsistent(page, "malformed leaf entry"))?;
                if node::leaf_is_deleted(data, i) == Some(false) {
                    out.push((k.to_vec(), v.to_vec()));
                }
            }
            drop(leaf);
            let hints = hints.unwrap_or_default();
            match hints.upper {
                Some(upper) if out.len() < wanted => {
                    if hints
                        .read_ahead
                        .first()
                        .is_some_and(|&next| !self.cache.is_resident(next))
                    {
                        self.cache.prefetch(&hints.read_ahead);
                    }
                    // Separators only grow along a scan; one that does not (a damaged interior
                    // page with a good checksum) would make the scan loop forever.
                    if upper <= cursor {
                        return Err(
                            self.inconsistent(page, "separators out of order above this leaf")
                        );
                    }
                    cursor = upper;
                }
                _ => break,
            }
        }
        Ok(())
    }

    /// Applies `op`; returns whether it changed anything.
    pub fn modify(&self, op: Op<'_>, log_position: u64) -> Result<bool> {
        if let Some(done) = self.modify_optimistic(op, log_position)? {
            return Ok(done);
        }
        self.modify_pessimistic(op, log_position)
    }

    fn modify_optimistic(&self, op: Op<'_>, log_position: u64) -> Result<Option<bool>> {
        let key = op.key();
        let mut restarts = 0;
        'restart: loop {
            let (node, level) = match self.descend(key, 1, &mut restarts, |_, _, _| {})? {
                Descent::Reached { node, level } => (node, level),
                Descent::Restart => continue 'restart,
            };
            if level == 0 {
                drop(node);
                let mut leaf = self.cache.write(self.root)?;
                if self.check_node(self.root, leaf.data(), None)? != 0 {
                    continue 'restart;
                }
                return self.leaf_try(&mut leaf, op, true, log_position);
            }
            // The leaf's parent (level 1), shared; the leaf is latched exclusively, still
            // before the parent's latch is released.
            let page = node.page_number();
            let (_, child) = self.child_of(page, node.data(), key)?;
            let mut leaf = match self.cache.write_if_resident(child) {
                Some(leaf) => leaf,
                None if restarts < MAX_RESTARTS => {
                    drop(node);
                    drop(self.cache.read(child)?);
                    restarts += 1;
                    continue 'restart;
                }
                None => self.cache.write(child)?,
            };
            drop(node);
            self.check_node(child, leaf.data(), Some(0))?;
            return self.leaf_try(&mut leaf, op, false, log_position);
        }
    }

    /// The change within one latched leaf, if it needs no split and no merge.
    fn leaf_try(
        &self,
        leaf: &mut PageMut<'_>,
        op: Op<'_>,
        is_root: bool,
        log_position: u64,
    ) -> Result<Option<bool>> {
        let page = leaf.page_number();
        // Checked once after the leaf was read (or changed other than in place below), not at
        // every change: the in-place changes keep a valid framing valid.
        if !leaf.framing_checked() {
            node::validate(leaf.data()).ok_or_else(|| self.inconsistent(page, "malformed leaf"))?;
            leaf.mark_framing_checked();
        }
        debug_assert!(
            node::validate(leaf.data()).is_some(),
            "leaf {page}: framing broken by an in-place change"
        );
        let ps = leaf.data().len();
        let threshold = node::leaf_merge_threshold(ps);
        let found = node::leaf_search(leaf.data(), op.key())
            .ok_or_else(|| self.inconsistent(page, "bad leaf"))?;
        let used = node::used_bytes(leaf.data());
        let existing = match found {
            Ok(i) => {
                let (k, v) = node::leaf_entry(leaf.data(), i)
                    .ok_or_else(|| self.inconsistent(page, "malformed leaf entry"))?;
                let deleted = node::leaf_is_deleted(leaf.data(), i) == Some(true);
                Some((i, node::leaf_entry_bytes(k.len(), v.len()), deleted))
            }
            Err(_) => None,
        };
        // Hands the record's prior state to the log, borrowed from the latched leaf.
        let announce = |leaf: &PageMut<'_>| {
            let record = existing.and_then(|(i, _, deleted)| {
                node::leaf_entry(leaf.data(), i).map(|(_, value)| (value, deleted))
            });
            self.log.before_change(op.key(), op.before(record))
        };
        // A record's new value in place (a replace, or an insert over a record marked
        // deleted): None when the node's size changes past a split or a merge.
        let fits = |old: usize, key: &[u8], value: &[u8]| {
            let new_used =
                used.saturating_sub(old) + node::leaf_entry_bytes(key.len(), value.len());
            // A value of the same size is overwritten where it is, whatever the fill.
            new_used == used
                || (new_used <= node::capacity(ps) && (new_used >= threshold || is_root))
        };
        match (op, existing, found) {
            (Op::Insert { key, value }, None, Err(index)) => {
                if node::leaf_entry_bytes(key.len(), value.len()) > node::free_bytes(leaf.data()) {
                    return Ok(None);
                }
                announce(leaf)?;
                if !node::leaf_insert_in_place(leaf.node_data_mut(), index, key, value) {
                    return Err(self.inconsistent(page, "insert did not fit its free space"));
                }
                self.logged(
                    leaf,
                    log_position,
                    PageChange::LeafInsert { index, key, value },
                )?;
                self.space
                    .note_leaf_entry_change(0, node::leaf_entry_bytes(key.len(), value.len()));
                Ok(Some(true))
            }
            (Op::Insert { key, value }, Some((index, old, true)), _)
            | (Op::Replace { key, value }, Some((index, old, false)), _) => {
                if !fits(old, key, value) {
                    return Ok(None);
                }
                announce(leaf)?;
                let before = node::free_range(leaf.data());
                // Also clears a deletion mark: the record is live with its new value.
                if !node::leaf_replace_in_place(leaf.node_data_mut(), index, key, value) {
                    return Err(self.inconsistent(page, "malformed leaf entry"));
                }
                self.fill_freed(leaf, before);
                self.logged(
                    leaf,
                    log_position,
                    PageChange::LeafReplace { index, key, value },
                )?;
                self.space
                    .note_leaf_entry_change(old, node::leaf_entry_bytes(key.len(), value.len()));
                Ok(Some(true))
            }
            (Op::Delete { key }, Some((index, old, _)), _)
            | (Op::Purge { key }, Some((index, old, true)), _) => {
                if used.saturating_sub(old) < threshold && !is_root {
                    return Ok(None);
                }
                announce(leaf)?;
                let before = node::free_range(leaf.data());
                if !node::leaf_remove_in_place(leaf.node_data_mut(), index) {
                    return Err(self.inconsistent(page, "malformed leaf entry"));
                }
                self.fill_freed(leaf, before);
                self.logged(leaf, log_position, PageChange::LeafDelete { index, key })?;
                self.space.note_leaf_entry_change(old, 0);
                Ok(Some(true))
            }
            (Op::MarkDeleted { key }, Some((index, _, false)), _)
            | (Op::Unmark { key }, Some((index, _, true)), _) => {
                let deleted = matches!(op, Op::MarkDeleted { .. });
                announce(leaf)?;
                // The record keeps its size: never a split nor a merge.
                if !node::set_leaf_deleted(leaf.node_data_mut(), index, deleted) {
                    return Err(self.inconsistent(page, "malformed leaf entry"));
                }
                self.logged(
                    leaf,
                    log_position,
                    PageChange::LeafMark {
                        index,
                        key,
                        deleted,
                    },
                )?;
                Ok(Some(true))
            }
            (Op::Insert { .. }, None, Ok(_)) => Err(self.inconsistent(page, "search disagrees")),
            _ => Ok(Some(false)),
        }
    }

    /// Decodes a node for a change, after checking its framing (a page with a good checksum
    /// can still hold nonsense: it must give an error, not a panic or a corrupted neighbour).
    fn decode(&self, page: u32, data: &[u8]) -> Result<Entries> {
        node::validate(data).ok_or_else(|| self.inconsistent(page, "malformed node"))?;
        Entries::decode(data).ok_or_else(|| self.inconsistent(page, "malformed node"))
    }

    /// Can anything below `data` (a node at `level`) make it split or underflow, given `op`?
    fn is_safe(&self, data: &[u8], level: u16, op: Op<'_>) -> bool {
        let ps = data.len();
        let used = node::used_bytes(data);
        let free = node::free_bytes(data);
        if level == 0 {
            let threshold = node::leaf_merge_threshold(ps);
            let (existing, deleted) = match node::leaf_search(data, op.key()) {
                Some(Ok(i)) => (
                    node::leaf_entry(data, i)
                        .map_or(0, |(k, v)| node::leaf_entry_bytes(k.len(), v.len())),
                    node::leaf_is_deleted(data, i) == Some(true),
                ),
                _ => (0, false),
            };
            let resized = |key: &[u8], value: &[u8]| {
                let new_used =
                    used.saturating_sub(existing) + node::leaf_entry_bytes(key.len(), value.len());
                new_used <= node::capacity(ps) && new_used >= threshold
            };
            return match op {
                Op::Insert { key, value } => {
                    if existing == 0 {
                        free >= node::leaf_entry_bytes(key.len(), value.len())
                    } else {
                        !deleted || resized(key, value)
                    }
                }
                Op::Replace { key, value } => existing == 0 || deleted || resized(key, value),
                Op::Delete { .. } => used.saturating_sub(existing) >= threshold,
                Op::Purge { .. } => !deleted || used.saturating_sub(existing) >= threshold,
                Op::MarkDeleted { .. } | Op::Unmark { .. } => true,
            };
        }
        let threshold = node::merge_threshold(ps);
        let worst = node::interior_entry_bytes(node::MAX_KEY_BYTES);
        let no_split = free >= worst;
        let no_underflow = used >= threshold + worst;
        match op {
            Op::Insert { .. } => no_split,
            Op::Delete { .. } | Op::Purge { .. } => no_underflow,
            Op::Replace { .. } => no_split && no_underflow,
            Op::MarkDeleted { .. } | Op::Unmark { .. } => true,
        }
    }

    /// The pessimistic path. Its descent restarts as [`Self::descend`] does (same
    /// [`MAX_RESTARTS`], same unlatched read of a missing page), but is not that step: it latches
    /// exclusively from the root, keeps every unsafe ancestor latched on a path (releasing the
    /// path when a node is safe), latches a sibling of each unsafe node (which can miss too),
    /// and refuses pages already on the path; so it keeps its own loop.
    fn modify_pessimistic(&self, op: Op<'_>, log_position: u64) -> Result<bool> {
        let key = op.key();
        let mut restarts = 0;
        'restart: loop {
            let mut path: Vec<PathNode<'a>> = Vec::with_capacity(8);
            let mut level;
            if let Some((parent, rightmost)) = self.safe_leaf_parent(op, &mut restarts)? {
                self.space.note_structure_change(false);
                level = 1;
                path.push(PathNode {
                    node: parent,
                    child_index: 0,
                    rightmost,
                    sibling: None,
                });
            } else {
                self.space.note_structure_change(true);
                let root = self.cache.write(self.root)?;
                level = self.check_node(self.root, root.data(), None)?;
                path.push(PathNode {
                    node: root,
                    child_index: 0,
                    rightmost: true,
                    sibling: None,
                });
            }
            while level > 0 {
                let Some(top) = path.last_mut() else {
                    return Err(self.inconsistent(self.root, "empty path"));
                };
                let page = top.node.page_number();
                let data = top.node.data();
                let (index, child) = self.child_of(page, data, key)?;
                let count = node::count(data);
                let rightmost = top.rightmost && index + 1 == count;
                top.child_index = index;
                let sibling_choice = if index > 0 {
                    node::interior_entry(data, index - 1).map(|(_, c)| (c, index - 1))
                } else {
                    node::interior_entry(data, index + 1).map(|(_, c)| (c, index + 1))
                };
                // Pages this session holds exclusively: a child or sibling naming one of them
                // (damage) must be an error, never a wait on our own latch.
                let held = |p: u32| {
                    path.iter().any(|n| {
                        n.node.page_number() == p
                            || n.sibling
                                .as_ref()
                                .is_some_and(|(s, _)| s.page_number() == p)
                    })
                };
                if held(child) {
                    return Err(self.inconsistent(
                        page,
                        format!("an interior entry points at page {child}, already on the path"),
                    ));
                }
                if let Some((sibling, _)) = sibling_choice {
                    self.check_child(page, sibling)?;
                    if sibling == child || held(sibling) {
                        return Err(self.inconsistent(
                            page,
                            format!("interior entries name page {sibling} twice"),
                        ));
                    }
                }
                let child_node = match self.cache.write_if_resident(child) {
                    Some(n) => n,
                    None if restarts < MAX_RESTARTS => {
                        drop(path);
                        drop(self.cache.read(child)?);
                        restarts += 1;
                        continue 'restart;
                    }
                    None => self.cache.write(child)?,
                };
                self.check_node(child, child_node.data(), Some(level - 1))?;
                let safe = self.is_safe(child_node.data(), level - 1, op);
                let sibling_choice = if safe || level != 1 {
                    sibling_choice
                } else {
                    self.emptier_sibling(&path, index, child, sibling_choice)
                };
                let sibling = if safe {
                    None
                } else if let Some((sibling_page, sibling_index)) = sibling_choice {
                    let sibling_node = match self.cache.write_if_resident(sibling_page) {
                        Some(n) => n,
                        None if restarts < MAX_RESTARTS => {
                            drop(child_node);
                            drop(path);
                            drop(self.cache.read(sibling_page)?);
                            restarts += 1;
                            continue 'restart;
                        }
                        None => self.cache.write(sibling_page)?,
                    };
                    self.check_node(sibling_page, sibling_node.data(), Some(level - 1))?;
                    Some((sibling_node, sibling_index))
                } else {
                    None
                };
                if safe {
                    path.clear();
                }
                path.push(PathNode {
                    node: child_node,
                    child_index: 0,
                    rightmost,
                    sibling,
                });
                level -= 1;
            }
            return self.apply_at_leaf(path, op, log_position);
        }
    }

    /// Where the pessimistic path can start below the root: the leaf's parent, latched
    /// exclusively, when the tree has at least three levels and that parent is safe for `op`
    /// (it can take the entry a leaf split adds, or lose the one a merge removes, without
    /// changing itself). The descent to it is shared, and the parent is latched while its own
    /// parent is still latched shared (latch coupling, as every descent here), so the node
    /// latched is the one covering the key. With the bool: the parent is the rightmost node of
    /// its level. None (nothing held) when the tree is lower, the parent is not safe, or a page
    /// on the way was not in the cache: the caller then starts from the root.
    ///
    /// Why: a split or merge used to latch the root exclusively until it reached a safe node,
    /// and every other session's descent queued behind it on the root; at 128 sessions per
    /// database the wake-ups of those queues after each release took ~11% of the process's
    /// CPU (profile of 2026-11-28, `docs/design.md`, "B+tree"). ESE's splits likewise take
    /// write latches only on the pages they change (the rest of the path is read-intent).
    fn safe_leaf_parent(
        &self,
        op: Op<'_>,
        restarts: &mut u32,
    ) -> Result<Option<(PageMut<'a>, bool)>> {
        let key = op.key();
        let mut rightmost = true;
        let visit = |_: u16, index: usize, data: &[u8]| {
            rightmost &= index + 1 == node::count(data);
        };
        let grandparent = match self.descend(key, 2, restarts, visit)? {
            Descent::Reached { node, level: 2 } => node,
            Descent::Reached { .. } | Descent::Restart => return Ok(None),
        };
        let page = grandparent.page_number();
        let data = grandparent.data();
        let (index, child) = self.child_of(page, data, key)?;
        rightmost &= index + 1 == node::count(data);
        let Some(parent) = self.cache.write_if_resident(child) else {
            return Ok(None);
        };
        drop(grandparent);
        self.check_node(child, parent.data(), Some(1))?;
        if !self.is_safe(parent.data(), 1, op) {
            return Ok(None);
        }
        Ok(Some((parent, rightmost)))
    }

    /// The sibling a leaf that may merge is latched with: of its left and right siblings in
    /// its parent (the last node of `path`), the one holding fewer bytes if both are in the
    /// cache, else `choice` (the left one, or the right one of a first child). ESE checks its
    /// right sibling, then its left (`ErrBTICheckForMultipageOLC`), each only if in the cache;
    /// the emptier one is the one the leaf's records fit in if either is.
    fn emptier_sibling(
        &self,
        path: &[PathNode<'a>],
        index: usize,
        child: u32,
        choice: Option<(u32, usize)>,
    ) -> Option<(u32, usize)> {
        let (Some(parent), Some((left, left_index))) = (path.last(), choice) else {
            return choice;
        };
        if left_index > index {
            return choice;
        }
        let Some((_, right)) = node::interior_entry(parent.node.data(), index + 1) else {
            return choice;
        };
        let held = |p: u32| {
            p == child
                || path.iter().any(|n| {
                    n.node.page_number() == p
                        || n.sibling
                            .as_ref()
                            .is_some_and(|(s, _)| s.page_number() == p)
                })
        };
        if right == left
            || held(right)
            || self.check_child(parent.node.page_number(), right).is_err()
        {
            return choice;
        }
        let used = |p: u32| {
            self.cache
                .read_if_resident(p)
                .filter(|r| node::is_node(r.data()))
                .map(|r| node::used_bytes(r.data()))
        };
        match (used(left), used(right)) {
            (Some(l), Some(r)) if r < l => Some((right, index + 1)),
            _ => choice,
        }
    }

    fn apply_at_leaf(
        &self,
        mut path: Vec<PathNode<'a>>,
        op: Op<'_>,
        log_position: u64,
    ) -> Result<bool> {
        let Some(leaf) = path.last() else {
            return Err(self.inconsistent(self.root, "empty path"));
        };
        let page = leaf.node.page_number();
        let mut entries = self.decode(page, leaf.node.data())?;
        if !entries.is_leaf() {
            return Err(self.inconsistent(page, "expected a leaf"));
        }
        let found = entries.search(op.key());
        let old_len = entries.len();
        // Bytes of the key's entry before the change, and of the entry it leaves.
        let old_entry = found.map_or(0, |i| entries.entry_bytes(i));
        let mut new_entry = old_entry;
        let mut append = false;
        let mut hotpoint = None;
        // Each arm hands the key's prior state to the log before the entries change.
        let deleted = |i: usize| entries.is_deleted(i);
        let announce = |entries: &Entries| {
            let record = found
                .ok()
                .map(|i| (entries.value(i).unwrap_or_default(), entries.is_deleted(i)));
            self.log.before_change(op.key(), op.before(record))
        };
        match (op, found) {
            (Op::Insert { key, value }, Err(i)) => {
                announce(&entries)?;
                append = i == old_len && leaf.rightmost;
                // ESE's choice (`ErrBTINewSplit`, bt.cxx): an append split at the tree's right
                // edge overrides a hotpoint split, which a non-root leaf takes when the insert
                // follows the page's two newest records.
                if !append && page != self.root && is_hotpoint(leaf.node.data(), i) {
                    hotpoint = Some(i);
                }
                entries.insert_leaf(i, key, value);
                new_entry = node::leaf_entry_bytes(key.len(), value.len());
            }
            (Op::Insert { value, .. }, Ok(i)) if deleted(i) => {
                announce(&entries)?;
                entries.set_value(i, value);
                new_entry = entries.entry_bytes(i);
            }
            (Op::Replace { value, .. }, Ok(i)) if !deleted(i) => {
                announce(&entries)?;
                entries.set_value(i, value);
                new_entry = entries.entry_bytes(i);
            }
            (Op::Delete { .. }, Ok(i)) => {
                announce(&entries)?;
                entries.remove(i);
                new_entry = 0;
            }
            (Op::Purge { .. }, Ok(i)) if deleted(i) => {
                announce(&entries)?;
                entries.remove(i);
                new_entry = 0;
            }
            (Op::MarkDeleted { .. }, Ok(i)) if !deleted(i) => {
                announce(&entries)?;
                entries.set_deleted(i, true);
            }
            (Op::Unmark { .. }, Ok(i)) if deleted(i) => {
                announce(&entries)?;
                entries.set_deleted(i, false);
            }
            _ => return Ok(false),
        }
        let last = path.len() - 1;
        self.rebalance(&mut path, last, entries, append, hotpoint, log_position)?;
        if new_entry != old_entry {
            self.space.note_leaf_entry_change(old_entry, new_entry);
        }
        Ok(true)
    }

    /// Rewrites an existing node with `entries` at `level` and logs it as a splice of its own
    /// previous entries ([`PageChange::NodeSplice`]), which carries only the entries the node
    /// did not hold before.
    fn write_node(
        &self,
        node: &mut PageMut<'_>,
        entries: &Entries,
        level: u16,
        lp: u64,
    ) -> Result<()> {
        let page = node.page_number();
        let old = self.decode(page, node.data())?;
        let splice = node::splice_between(&old, entries);
        let (Ok(keep), Ok(at), Ok(remove)) = (
            u16::try_from(splice.keep),
            u16::try_from(splice.at),
            u16::try_from(splice.remove),
        ) else {
            return Err(self.inconsistent(page, "node with more than 65535 entries"));
        };
        let mut records = Vec::new();
        entries.encode_records(splice.inserted, &mut records);
        match self.content {
            // The bytes free before and after the rewrite keep the content they hold (it is
            // the content's at their place in the page); only those the rewrite gave up are
            // filled.
            Some(_) => {
                let before = node::free_range(node.data());
                entries.encode_keeping_free_space(node.data_mut(), level);
                self.fill_freed(node, before);
            }
            None => entries.encode(node.data_mut(), level),
        }
        self.logged(
            node,
            lp,
            PageChange::NodeSplice {
                level,
                keep,
                at,
                remove,
                records: &records,
            },
        )
    }

    /// A new node holding `entries`, returned latched: it belongs to the open group
    /// ([`ChangeLog::begin_group`]) until the group is logged and its pages stamped. `near`: the
    /// page being split, whose owned extent the new page is taken from if it can be, and its
    /// neighbours in its parent, nearest first ([`Space::allocate_near`]); `None` (a root
    /// split) takes any free page.
    fn new_node(
        &self,
        entries: &Entries,
        level: u16,
        lp: u64,
        near: Option<(u32, &[u32])>,
    ) -> Result<(u32, PageMut<'a>)> {
        let page = match near {
            Some((near, neighbours)) => self.space.allocate_near(self.cache, near, neighbours)?,
            None => self.space.allocate(self.cache)?,
        };
        let mut node = self.cache.create(page)?;
        let page_type = if level == 0 {
            PageType::Leaf
        } else {
            PageType::Interior
        };
        page::write_common(node.data_mut(), page, page_type, 0);
        page::put_u32(node.data_mut(), page::OFFSET_TREE, self.tree_id);
        // A new page's content comes from another page, which may already be on disk in its
        // later state at redo time: it is logged whole (the log leaves out its free space).
        entries.encode(node.data_mut(), level);
        self.logged_image(&mut node, lp)?;
        self.fill_free_space(&mut node);
        Ok((page, node))
    }

    /// Formats `node` as a free page; its space map bit is cleared only after the group is
    /// logged (`to_free`), so a crash can leak a page but never free one the tree still uses.
    fn free_node(&self, node: &mut PageMut<'_>, lp: u64, to_free: &mut Vec<u32>) -> Result<()> {
        let page = node.page_number();
        page::format_free(node.data_mut(), page);
        self.logged_image(node, lp)?;
        self.fill_free_space(node);
        to_free.push(page);
        Ok(())
    }

    /// Writes `pending` (the new entries of `path[at]`), splitting or merging as needed, as one
    /// group of changes ([`ChangeLog::begin_group`]): recovery applies a split or merge whole or
    /// not at all. Every page the group changes stays latched until the group is logged and the
    /// pages carry its log position (so none reaches the disk before the whole group is durable,
    /// and no other change to them is logged before it); freed pages return to the space map
    /// after that.
    fn rebalance(
        &self,
        path: &mut [PathNode<'a>],
        at: usize,
        pending: Entries,
        append: bool,
        hotpoint: Option<usize>,
        lp: u64,
    ) -> Result<()> {
        let first_stamp = self.stamp.load(std::sync::atomic::Ordering::Acquire);
        let mut held: Vec<PageMut<'a>> = Vec::new();
        let mut to_free = Vec::new();
        self.log.begin_group();
        if let Err(e) = self.rebalance_group(
            path,
            at,
            pending,
            append,
            hotpoint,
            lp,
            &mut held,
            &mut to_free,
        ) {
            self.log.discard_group();
            self.cache.poison(&e);
            return Err(e);
        }
        let position = self.log.end_group().inspect_err(|e| self.cache.poison(e))?;
        if position != 0 {
            let changed = |node: &mut PageMut<'a>| {
                let stamp = page::update_stamp(node.data()).unwrap_or(0);
                if stamp >= first_stamp {
                    let at = page::log_position(node.data()).unwrap_or(0);
                    node.stamp(stamp, at.max(position));
                }
            };
            for step in path.iter_mut() {
                changed(&mut step.node);
                if let Some((sibling, _)) = step.sibling.as_mut() {
                    changed(sibling);
                }
            }
            held.iter_mut().for_each(changed);
        }
        drop(held);
        for page in to_free {
            self.space.free(self.cache, page)?;
        }
        Ok(())
    }

    /// The changes of [`Tree::rebalance`], carried up the latched path.
    #[allow(clippy::too_many_arguments)]
    fn rebalance_group(
        &self,
        path: &mut [PathNode<'a>],
        mut at: usize,
        mut pending: Entries,
        mut append: bool,
        mut hotpoint: Option<usize>,
        lp: u64,
        held: &mut Vec<PageMut<'a>>,
        to_free: &mut Vec<u32>,
    ) -> Result<()> {
        let ps = self.cache.config().page_size;
        let capacity = node::capacity(ps);
        loop {
            // A split's new page may come from its neighbours' extents: read them from the
            // parent before the node is borrowed.
            let neighbours = match at.checked_sub(1).and_then(|p| path.get(p)) {
                Some(parent) if pending.bytes() > capacity => {
                    neighbours(parent.node.data(), parent.child_index)
                }
                _ => Vec::new(),
            };
            let Some(current) = path.get_mut(at) else {
                return Err(self.inconsistent(self.root, "path too short"));
            };
            let page = current.node.page_number();
            let level = node::level(current.node.data());
            let is_root = page == self.root;
            if pending.bytes() > capacity {
                // A hotpoint applies to the leaf only; the levels above split as usual.
                let hot = hotpoint
                    .take()
                    .and_then(|at| hotpoint_split(&pending, ps, at));
                if level == 0 {
                    self.space.note_leaf_split(match (hot, append) {
                        (Some(_), _) => LeafSplit::Hotpoint,
                        (None, true) => LeafSplit::Append,
                        (None, false) => LeafSplit::Even,
                    });
                } else {
                    self.space.note_interior_split();
                }
                let split = hot.unwrap_or_else(|| pending.split_point(ps, append));
                let mut right = pending.split_off(split);
                let separator = right.first_key().unwrap_or_default().to_vec();
                if !right.is_leaf() {
                    right.clear_first_key();
                }
                if is_root {
                    let (left_page, left) = self.new_node(&pending, level, lp, None)?;
                    held.push(left);
                    let (right_page, right_node) = self.new_node(&right, level, lp, None)?;
                    held.push(right_node);
                    let root_entries = Entries::from_interior([
                        (&[][..], left_page),
                        (separator.as_slice(), right_page),
                    ]);
                    self.write_node(&mut current.node, &root_entries, level + 1, lp)?;
                    return Ok(());
                }
                let (right_page, right_node) =
                    self.new_node(&right, level, lp, Some((page, &neighbours)))?;
                held.push(right_node);
                self.write_node(&mut current.node, &pending, level, lp)?;
                if at == 0 {
                    return Err(self.inconsistent(page, "split with no latched parent"));
                }
                at -= 1;
                let Some(parent) = path.get(at) else {
                    return Err(self.inconsistent(page, "path too short"));
                };
                let parent_page = parent.node.page_number();
                let mut parent_entries = self.decode(parent_page, parent.node.data())?;
                let index = parent.child_index + 1;
                if parent_entries.is_leaf() {
                    return Err(self.inconsistent(parent_page, "expected an interior node"));
                }
                append = append && parent.rightmost && index == parent_entries.len();
                parent_entries.insert_child(index, &separator, right_page);
                pending = parent_entries;
                continue;
            }
            // A leaf merges while the sibling it fills keeps the table density's free space
            // (ESE's merge, `node::leaf_merge_limit`); an interior node, while it fits.
            // A leaf left empty goes whatever its sibling holds (ESE's empty-page merge).
            let (threshold, limit) = if level == 0 && !pending.is_empty() {
                (node::leaf_merge_threshold(ps), node::leaf_merge_limit(ps))
            } else if level == 0 {
                (node::leaf_merge_threshold(ps), capacity)
            } else {
                (node::merge_threshold(ps), capacity)
            };
            if pending.bytes() < threshold
                && !is_root
                && at > 0
                && let Some((mut sibling, sibling_index)) = current.sibling.take()
            {
                {
                    let parent_at = at - 1;
                    let Some(parent) = path.get(parent_at) else {
                        return Err(self.inconsistent(page, "path too short"));
                    };
                    let parent_page = parent.node.page_number();
                    let child_index = parent.child_index;
                    let mut parent_entries = self.decode(parent_page, parent.node.data())?;
                    if parent_entries.is_leaf() {
                        return Err(self.inconsistent(parent_page, "expected an interior node"));
                    }
                    let sibling_entries = self.decode(sibling.page_number(), sibling.data())?;
                    let (left_index, right_index) = if sibling_index < child_index {
                        (sibling_index, child_index)
                    } else {
                        (child_index, sibling_index)
                    };
                    let separator = parent_entries.key(right_index).unwrap_or_default().to_vec();
                    let (mut combined, right_part) = if sibling_index < child_index {
                        (sibling_entries, pending.clone())
                    } else {
                        (pending.clone(), sibling_entries)
                    };
                    combined.append(right_part, &separator);
                    if combined.bytes() <= limit {
                        let Some(current) = path.get_mut(at) else {
                            return Err(self.inconsistent(page, "path too short"));
                        };
                        let survivor_page = if sibling_index < child_index {
                            self.write_node(&mut sibling, &combined, level, lp)?;
                            self.free_node(&mut current.node, lp, to_free)?;
                            sibling.page_number()
                        } else {
                            self.write_node(&mut current.node, &combined, level, lp)?;
                            self.free_node(&mut sibling, lp, to_free)?;
                            current.node.page_number()
                        };
                        let _ = left_index;
                        self.space.note_merge();
                        parent_entries.remove(right_index);
                        at = parent_at;
                        // A root left with one child takes the child's entries: the tree
                        // loses a level and the root stays where the header says.
                        if at == 0
                            && parent_page == self.root
                            && parent_entries.len() == 1
                            && parent_entries.child(0) == Some(survivor_page)
                        {
                            let Some(root) = path.get_mut(0) else {
                                return Err(self.inconsistent(page, "path too short"));
                            };
                            self.write_node(&mut root.node, &combined, level, lp)?;
                            if survivor_page == page {
                                if let Some(current) = path.get_mut(1) {
                                    self.free_node(&mut current.node, lp, to_free)?;
                                }
                            } else {
                                self.free_node(&mut sibling, lp, to_free)?;
                            }
                            held.push(sibling);
                            return Ok(());
                        }
                        held.push(sibling);
                        pending = parent_entries;
                        append = false;
                        continue;
                    }
                }
            }
            let Some(current) = path.get_mut(at) else {
                return Err(self.inconsistent(page, "path too short"));
            };
            self.write_node(&mut current.node, &pending, level, lp)?;
            return Ok(());
        }
    }

    /// Walks the whole tree and checks its invariants: page types and levels, key order within
    /// every node and within the bounds its parent gives it, every page marked in use by the
    /// space map and reached once. Meant for tests and for `check` after a run; takes shared
    /// latches one path at a time.
    pub fn check(&self) -> Result<TreeStats> {
        let mut stats = TreeStats::default();
        let mut seen = std::collections::HashSet::new();
        let height = self.check_subtree(self.root, None, None, None, &mut stats, &mut seen)?;
        stats.height = u32::from(height) + 1;
        Ok(stats)
    }

    fn check_subtree(
        &self,
        page: u32,
        level: Option<u16>,
        low: Option<&[u8]>,
        high: Option<&[u8]>,
        stats: &mut TreeStats,
        seen: &mut std::collections::HashSet<u32>,
    ) -> Result<u16> {
        if !seen.insert(page) {
            return Err(self.inconsistent(page, "page reached twice"));
        }
        if !self.space.is_used(self.cache, page)? {
            return Err(self.inconsistent(page, "tree page marked free in the space map"));
        }
        let node_ref = self.cache.read(page)?;
        let data = node_ref.data();
        let found_level = self.check_node(page, data, level)?;
        node::validate(data).ok_or_else(|| self.inconsistent(page, "malformed node"))?;
        let entries = self.decode(page, data)?;
        drop(node_ref);
        let in_bounds = |key: &[u8]| low.is_none_or(|l| key >= l) && high.is_none_or(|h| key < h);
        if entries.is_leaf() {
            stats.leaf_pages += 1;
            for i in 0..entries.len() {
                let (Some(key), Some(value)) = (entries.key(i), entries.value(i)) else {
                    return Err(self.inconsistent(page, "malformed leaf entry"));
                };
                if !in_bounds(key) {
                    return Err(self.inconsistent(page, "key outside its parent's range"));
                }
                if i > 0 && entries.key(i - 1).is_some_and(|prev| prev >= key) {
                    return Err(self.inconsistent(page, "keys out of order"));
                }
                if entries.is_deleted(i) {
                    stats.marked_records += 1;
                } else {
                    stats.records += 1;
                    stats.record_bytes += (key.len() + value.len()) as u64;
                }
            }
        } else {
            stats.interior_pages += 1;
            if entries.is_empty() {
                return Err(self.inconsistent(page, "interior node without children"));
            }
            for i in 0..entries.len() {
                let (Some(key), Some(child)) = (entries.key(i), entries.child(i)) else {
                    return Err(self.inconsistent(page, "malformed interior entry"));
                };
                if i > 0 {
                    if !in_bounds(key) {
                        return Err(self.inconsistent(page, "separator outside its range"));
                    }
                    if i > 1 && entries.key(i - 1).is_some_and(|prev| prev >= key) {
                        return Err(self.inconsistent(page, "separators out of order"));
                    }
                }
                let child_low = if i == 0 { low } else { Some(key) };
                let child_high = entries.key(i + 1).or(high);
                self.check_subtree(
                    child,
                    Some(found_level - 1),
                    child_low,
                    child_high,
                    stats,
                    seen,
                )?;
            }
        }
        Ok(found_level)
    }
}

/// How far either side of a split page its parent's children are looked at for free pages in
/// their owned extents ([`Space::allocate_near`]): pages of the same key range, so mostly of the
/// same mailbox (a mailbox holds 64 leaves in a 2 GiB database of 1,000 mailboxes).
const NEIGHBOURS_EACH_SIDE: usize = 32;

/// The children of `parent` beside its child `index`, nearest first, alternating left and
/// right (up to [`NEIGHBOURS_EACH_SIDE`] on each side).
fn neighbours(parent: &[u8], index: usize) -> Vec<u32> {
    let count = node::count(parent);
    let mut out = Vec::with_capacity(2 * NEIGHBOURS_EACH_SIDE);
    for distance in 1..=NEIGHBOURS_EACH_SIDE {
        let sides = [index.checked_sub(distance), Some(index + distance)];
        for i in sides.into_iter().flatten().filter(|&i| i < count) {
            if let Some((_, child)) = node::interior_entry(parent, i) {
                out.push(child);
            }
        }
    }
    out
}

/// ESE's hotpoint test (`ErrBTINewSplit` in bt.cxx): an insert at `index` of a leaf is at a
/// hotpoint when the two records just before it are the newest on the page, in key order, and
/// every record after it is older than both. ESE reads "newest" from where the records lie on the
/// page (it appends each new node to the page's free space and compaction keeps their order); so
/// do we: a record inserted in place, or encoded later in key order, lies below (at a lower
/// offset than) the older ones. Mail inserts, each at its mailbox's tail, form such a pattern
/// after two inserts at the same place.
fn is_hotpoint(page: &[u8], index: usize) -> bool {
    // Where a record lies: its value's offset orders records as their own offsets do.
    let at = |i: usize| node::leaf_value_range(page, i).map(|r| r.start);
    if index < 2 {
        return false;
    }
    let (Some(newest), Some(second)) = (at(index - 1), at(index - 2)) else {
        return false;
    };
    newest < second
        && (0..index - 2).all(|i| at(i).is_some_and(|o| o > second))
        && (index..node::count(page)).all(|i| at(i).is_some_and(|o| o > second))
}

/// ESE's hotpoint split (`BTISelectHotPointSplit`) for an insert that put the new entry at `at`
/// of `entries` (the overflowing leaf): the entries after the new one move to the new page, or,
/// for an insert at the end, the new entry alone does; the page being split keeps the rest full.
/// ESE does the first case as a split without the insert and then retries the insert, which
/// lands at the end of the page; when the page could not take it, that retry splits again at
/// the end. We make one split: when the left side would not fit, None (an even split instead).
fn hotpoint_split(entries: &Entries, page_size: usize, at: usize) -> Option<usize> {
    let n = entries.len();
    let split = if at + 1 >= n {
        n.checked_sub(1)?
    } else {
        at + 1
    };
    if split == 0 {
        return None;
    }
    let mut left = entries.clone();
    let right = left.split_off(split);
    let cap = node::capacity(page_size);
    (left.bytes() <= cap && right.bytes() <= cap).then_some(split)
}

#[derive(Debug, Default)]
struct ScanHints {
    upper: Option<Vec<u8>>,
    read_ahead: Vec<u32>,
}
