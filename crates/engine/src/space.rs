//! Free-space management: space map pages, and growth of the file in extents.
//!
//! The file is divided into groups of `B = (page_size - 80) * 8` pages; one space map page per
//! group holds one bit per page of the group (1 = in use). The map page of group 0 is page 2
//! (pages 0 and 1 are the header copies); the map page of group k > 0 is the group's first page,
//! `k * B`. Fixed positions mean the maps need no directory, and a 32 KiB map covers 8 GiB.
//!
//! Invariants, and why:
//! * Every page below `page_count` is formatted and sealed on disk, free or not: growth writes
//!   whole extents of formatted free pages (and the new groups' map pages) in large sequential
//!   writes, syncs them, and only then raises the page count in the header. A crash in between
//!   leaves formatted pages beyond the count, never unformatted pages below it.
//! * Map pages stay pinned in the cache for the life of the database, so that allocating or
//!   freeing a page changes a map page in memory without any I/O; they are written by the
//!   cache's flusher like every other page.
//! * The allocator's mutex is held only for the bitmap search, except during growth, which
//!   writes while holding it: growth is rare (one extent at a time) and every session that needs a
//!   page would have to wait for it anyway.
#![deny(clippy::indexing_slicing, clippy::unwrap_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use jetproof_io::{AlignedBuf, IoClass, IoFile};
use parking_lot::Mutex;

use crate::cache::PageCache;
use crate::change::{ChangeLog, NoChangeLog, PageChange};
use crate::checksum;
use crate::error::{EngineError, Result};
use crate::fill::PageContent;
use crate::header::HEADER_PAGES;
use crate::page::{self, HEADER_SIZE, PageType};

/// The largest write growth issues.
const GROWTH_WRITE_BYTES: usize = 1024 * 1024;
/// Page numbers stay below this (u32::MAX marks "no page" in the cache).
const MAX_PAGES: u64 = u32::MAX as u64 - 1;

/// Pages of an owned extent: the unit in which a mailbox's pages are placed together (ESE's
/// default secondary extent, `cpageSEDefault`, 16 pages). Owned extents are aligned to multiples
/// of it; a space map group (`pages_per_map`) holds a whole number of them for every page size.
/// See [`Space::allocate_near`] and `docs/design.md`, "Where new pages go".
pub const OWNED_EXTENT_PAGES: u64 = 16;

/// Pages covered by one space map page.
pub fn pages_per_map(page_size: usize) -> u64 {
    ((page_size - HEADER_SIZE) * 8) as u64
}

/// The space map page of the group that holds `page`.
pub fn map_page_for(page: u64, page_size: usize) -> u64 {
    let group = page / pages_per_map(page_size);
    if group == 0 {
        u64::from(HEADER_PAGES)
    } else {
        group * pages_per_map(page_size)
    }
}

/// Is `page` a space map page?
pub fn is_map_page(page: u64, page_size: usize) -> bool {
    map_page_for(page, page_size) == page
}

/// Formats pages `[from, to)` of a file as free pages (map pages as maps marking themselves, and
/// for group 0 the header pages, in use), in sequential writes of up to 1 MiB, then syncs. Their
/// bodies are zeros ([`format_range_with`] for other content).
///
/// The writes are metered as [`IoClass::DbExtend`], not `DbWrite`: they extend the file (ESE's
/// database extension), they are not the cache's page writes whose count and average size the
/// reference reports describe (`docs/faithfulness.md`, "Database extension writes").
pub fn format_range(file: &dyn IoFile, page_size: usize, from: u64, to: u64) -> Result<()> {
    format_range_with(file, page_size, from, to, None, &|_| false)
}

/// [`format_range`] with each free page's body made by `content` (zeros without one); a page
/// `long_value` names is formatted as a long-value page instead ([`PageType::LongValue`], tree
/// [`crate::bulk::LONG_VALUE_TREE_ID`], its body `content`'s long value), which the caller
/// marks in use. Without `content` no page is a long-value page. The writes are the same
/// whatever the content: same offsets, same sizes, same count.
pub fn format_range_with(
    file: &dyn IoFile,
    page_size: usize,
    from: u64,
    to: u64,
    content: Option<&dyn PageContent>,
    long_value: &dyn Fn(u64) -> bool,
) -> Result<()> {
    let per_write = (GROWTH_WRITE_BYTES / page_size) as u64;
    let mut buf = AlignedBuf::zeroed(per_write as usize * page_size);
    let mut start = from;
    while start < to {
        let count = per_write.min(to - start);
        for i in 0..count {
            let number = start + i;
            let offset = (i as usize) * page_size;
            let Some(slot) = buf.get_mut(offset..offset + page_size) else {
                break;
            };
            let number32 = number as u32;
            if is_map_page(number, page_size) {
                format_map(slot, number32);
            } else if let Some(content) = content {
                if long_value(number) {
                    format_long_value(slot, number32, content);
                } else {
                    page::format_free_filled(slot, number32, &mut |body| {
                        content.fill_free(number32, HEADER_SIZE, body)
                    });
                }
            } else {
                page::format_free(slot, number32);
            }
        }
        let bytes = count as usize * page_size;
        let Some(data) = buf.get(..bytes) else {
            break;
        };
        file.write_at(data, start * page_size as u64, IoClass::DbExtend)?;
        start += count;
    }
    file.sync_data(IoClass::DbExtend)?;
    Ok(())
}

/// A long-value page (an attachment's chunk) as growth lays it down: the header, then
/// `content`'s long value to the end of the page, sealed. No tree refers to it (as `init`'s).
fn format_long_value(slot: &mut [u8], number: u32, content: &dyn PageContent) {
    if let Some(header) = slot.get_mut(..HEADER_SIZE) {
        header.fill(0);
    }
    page::write_common(slot, number, PageType::LongValue, 0);
    page::put_u32(slot, page::OFFSET_TREE, crate::bulk::LONG_VALUE_TREE_ID);
    if let Some(body) = slot.get_mut(HEADER_SIZE..) {
        content.fill_long_value(number, body);
    }
    checksum::seal(slot);
}

/// A fresh map page: marks itself in use, and in group 0 the two header pages too.
/// A new update stamp for a change to `page_bytes`: above every stamp given out since open and
/// above the page's own. Redo needs each page's stamps to grow; the database-wide counter alone
/// does not promise that after a recovery that replayed no record (its start, from the header,
/// can be below stamps that pages written before the crash carry).
pub(crate) fn stamp_after(counter: &AtomicU64, page_bytes: &[u8]) -> u64 {
    let current = page::update_stamp(page_bytes).unwrap_or(0);
    counter.fetch_max(current.saturating_add(1), Ordering::AcqRel);
    counter.fetch_add(1, Ordering::AcqRel)
}

pub(crate) fn format_map(slot: &mut [u8], number: u32) {
    format_map_unsealed(slot, number);
    checksum::seal(slot);
}

/// [`format_map`] without the seal, for a caller that sets more bits first (the bulk loader).
pub(crate) fn format_map_unsealed(slot: &mut [u8], number: u32) {
    slot.fill(0);
    page::write_common(slot, number, PageType::SpaceMap, 0);
    let page_size = slot.len();
    let group_start = (u64::from(number) / pages_per_map(page_size)) * pages_per_map(page_size);
    set_bit(slot, u64::from(number) - group_start, true);
    if group_start == 0 {
        for header in 0..u64::from(HEADER_PAGES) {
            set_bit(slot, header, true);
        }
    }
}

/// Pages marked in use among the first `pages` bits of a map page.
pub(crate) fn count_used(map: &[u8], pages: u64) -> u64 {
    let full_bytes = (pages / 8) as usize;
    let whole: u64 = map
        .get(HEADER_SIZE..HEADER_SIZE + full_bytes)
        .map_or(0, |bytes| {
            bytes.iter().map(|b| u64::from(b.count_ones())).sum()
        });
    whole
        + (full_bytes as u64 * 8..pages)
            .filter(|&b| get_bit(map, b))
            .count() as u64
}

fn set_bit(map: &mut [u8], bit: u64, used: bool) {
    set_map_bit(map, bit, used);
}

/// Sets or clears bit `bit` of a space map page; false if the bit is outside the page.
pub fn set_map_bit(map: &mut [u8], bit: u64, used: bool) -> bool {
    let index = HEADER_SIZE + (bit / 8) as usize;
    let Some(byte) = map.get_mut(index) else {
        return false;
    };
    let mask = 1u8 << (bit % 8);
    if used {
        *byte |= mask;
    } else {
        *byte &= !mask;
    }
    true
}

/// The runs of free pages in the owned extent `[extent, to)` that end at a page in use, as (first
/// page, length): the space merges freed among an owner's pages, which any split may take before
/// the file grows ([`Space::allocate_near`], step 4). A run that reaches the extent's end is not
/// one: it is the owner's rest. `map` is the map page of the group starting at `group_start`.
fn freed_runs(
    map: &[u8],
    group_start: u64,
    extent: u64,
    to: u64,
) -> impl Iterator<Item = (u64, u64)> + '_ {
    let mut run_start = extent;
    (extent..to).filter_map(move |page| {
        if !get_bit(map, page - group_start) {
            return None;
        }
        let run = (run_start, page - run_start);
        run_start = page + 1;
        (run.1 > 0).then_some(run)
    })
}

fn get_bit(map: &[u8], bit: u64) -> bool {
    let index = HEADER_SIZE + (bit / 8) as usize;
    map.get(index)
        .is_some_and(|byte| byte & (1u8 << (bit % 8)) != 0)
}

/// Where the pages a database took and gave back came from and went, since it was opened (the
/// space accounting of issue 23, `docs/design.md`, "Where new pages go"): every allocation is
/// counted under the first place that had a page.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SpaceStats {
    /// Split pages taken from the split page's own owned extent.
    pub pages_from_own_extent: u64,
    /// Split pages taken from an owned extent that already holds a neighbour of the split page
    /// (a page the split page's parent points to): the same key range's space.
    pub pages_from_neighbour_extent: u64,
    /// Split pages that started a wholly free owned extent (found free, or made by growth).
    pub pages_from_free_extent: u64,
    /// Pages taken by `allocate` (a root split, a fallback): the first free page anywhere.
    pub pages_from_anywhere: u64,
    /// Pages given back (by merges).
    pub pages_freed: u64,
    /// Times the file grew, and the pages it grew by.
    pub extensions: u64,
    pub extension_pages: u64,
    /// Leaf splits by how the split point was chosen (ESE's append and hotpoint splits, and
    /// the even split of everything else: an insert in the middle, or a replace that grew).
    pub leaf_splits_append: u64,
    pub leaf_splits_hotpoint: u64,
    pub leaf_splits_even: u64,
    /// Merges of an underfull node into a sibling (each frees a page).
    pub merges: u64,
    /// Splits of interior nodes, the root's included (each takes a page, the root's two).
    pub interior_splits: u64,
    /// Bytes of leaf entries (a record's key, value, record header and slot, as it lies in its
    /// leaf) that changes added and removed: an insert adds its entry, a delete or purge
    /// removes one, a replace (or an insert over a record marked deleted) removes the old and
    /// adds the new; a mark changes nothing. Splits and merges move entries and count nothing.
    /// Their difference over a window is the bytes in records the tree gained, the first line
    /// of the space accounting (issue 23, `docs/design.md`, "Where new pages go").
    pub leaf_bytes_added: u64,
    pub leaf_bytes_removed: u64,
    /// Changes that needed the pessimistic path (a split, a merge, a record that grew past its
    /// leaf), by where its exclusive latches began: at the leaf's parent, with the path above
    /// only share-latched, or at the root (a low tree, or a parent that itself must change).
    /// Counted per attempt: a descent restarted for a page not in the cache counts again.
    pub structure_changes_from_leaf_parent: u64,
    pub structure_changes_from_root: u64,
    /// Pages growth laid down as long-value pages (attachments: [`PageContent::long_value_share`]),
    /// among `extension_pages`, marked in use.
    pub long_value_pages: u64,
}

/// The free space of a database's file at one moment (a walk of the space maps).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SpaceCensus {
    pub page_count: u64,
    pub used_pages: u64,
    /// Free pages in owned extents wholly free (the space a split may start a new extent in).
    pub free_pages_in_free_extents: u64,
    /// Free pages in owned extents that also hold pages in use (a split page's own extent, or
    /// pages left single by merges).
    pub free_pages_in_used_extents: u64,
    /// Of those, the ones with a page in use after them in their extent: space a merge freed
    /// inside an owner's pages, which any split may take before the file grows
    /// ([`Space::allocate_near`], step 4). The others are the rests of extents, after their last
    /// page in use: their owner's room.
    pub free_pages_between_used: u64,
}

#[derive(Debug, Default)]
struct Counters {
    own: AtomicU64,
    neighbour: AtomicU64,
    free_extent: AtomicU64,
    anywhere: AtomicU64,
    freed: AtomicU64,
    extensions: AtomicU64,
    extension_pages: AtomicU64,
    splits_append: AtomicU64,
    splits_hotpoint: AtomicU64,
    splits_even: AtomicU64,
    merges: AtomicU64,
    interior_splits: AtomicU64,
    leaf_bytes_added: AtomicU64,
    leaf_bytes_removed: AtomicU64,
    from_leaf_parent: AtomicU64,
    from_root: AtomicU64,
    long_value_pages: AtomicU64,
}

/// How a leaf split chose its split point, for [`SpaceStats`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LeafSplit {
    Append,
    Hotpoint,
    Even,
}

fn bump(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::Relaxed);
}

#[derive(Debug)]
struct SpaceState {
    /// Where the search for a wholly free owned extent resumes (next fit).
    extent_hint: u64,
    page_count: u64,
    /// Search starts here: the lowest page that may be free.
    hint: u64,
    used: u64,
    /// Owned extents growth added since open that could be long-value pages, and those it
    /// made long-value pages ([`PageContent::long_value_share`]).
    growth_extents: u64,
    long_value_extents: u64,
}

/// The page allocator of one database.
#[derive(Debug)]
pub struct Space {
    page_size: usize,
    extent_pages: u64,
    state: Mutex<SpaceState>,
    /// Called after growth with the new page count, to persist it in the header.
    on_grow: OnGrow,
    stamp: Arc<AtomicU64>,
    log: parking_lot::RwLock<Arc<dyn ChangeLog>>,
    counters: Counters,
    /// What free pages formatted by growth hold, and whether it lays long values down.
    content: Option<Arc<dyn PageContent>>,
}

/// Persists a new page count after growth (the database writes it into both header copies).
pub struct OnGrow(pub Box<dyn Fn(u64) -> Result<()> + Send + Sync>);

impl std::fmt::Debug for OnGrow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("OnGrow")
    }
}

impl Space {
    /// Loads the maps of a file of `page_count` pages, pinning them in `cache`.
    pub fn load(
        cache: &PageCache,
        page_count: u64,
        extent_pages: u64,
        stamp: Arc<AtomicU64>,
        on_grow: OnGrow,
    ) -> Result<Space> {
        let page_size = cache.config().page_size;
        let per_map = pages_per_map(page_size);
        let mut used = 0u64;
        let mut group_start = 0u64;
        while group_start < page_count {
            let map_page = map_page_for(group_start, page_size) as u32;
            cache.pin_forever(map_page)?;
            let map = cache.read(map_page)?;
            if page::page_type(map.data()) != Some(PageType::SpaceMap) {
                return Err(EngineError::Inconsistent {
                    path: cache.file().path().to_path_buf(),
                    page: map_page,
                    what: "expected a space map page".into(),
                });
            }
            let in_group = per_map.min(page_count - group_start);
            used += (0..in_group).filter(|&b| get_bit(map.data(), b)).count() as u64;
            group_start += per_map;
        }
        Ok(Space {
            page_size,
            extent_pages: extent_pages.max(1),
            state: Mutex::new(SpaceState {
                extent_hint: 0,
                page_count,
                hint: 0,
                used,
                growth_extents: 0,
                long_value_extents: 0,
            }),
            on_grow,
            stamp,
            log: parking_lot::RwLock::new(Arc::new(NoChangeLog)),
            counters: Counters::default(),
            content: None,
        })
    }

    /// Formats the free pages of growth with `content`'s bodies and lays its long-value share
    /// of growth down as long-value pages ([`crate::fill`]).
    pub fn with_content(mut self, content: Option<Arc<dyn PageContent>>) -> Space {
        self.content = content;
        self
    }

    /// Where changes to space map pages are reported (the log).
    pub fn set_change_log(&self, log: Arc<dyn ChangeLog>) {
        *self.log.write() = log;
    }

    pub fn page_count(&self) -> u64 {
        self.state.lock().page_count
    }

    pub fn used_pages(&self) -> u64 {
        self.state.lock().used
    }

    /// The counters of [`SpaceStats`], since the database was opened.
    pub fn stats(&self) -> SpaceStats {
        let c = &self.counters;
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        SpaceStats {
            pages_from_own_extent: get(&c.own),
            pages_from_neighbour_extent: get(&c.neighbour),
            pages_from_free_extent: get(&c.free_extent),
            pages_from_anywhere: get(&c.anywhere),
            pages_freed: get(&c.freed),
            extensions: get(&c.extensions),
            extension_pages: get(&c.extension_pages),
            leaf_splits_append: get(&c.splits_append),
            leaf_splits_hotpoint: get(&c.splits_hotpoint),
            leaf_splits_even: get(&c.splits_even),
            merges: get(&c.merges),
            interior_splits: get(&c.interior_splits),
            leaf_bytes_added: get(&c.leaf_bytes_added),
            leaf_bytes_removed: get(&c.leaf_bytes_removed),
            structure_changes_from_leaf_parent: get(&c.from_leaf_parent),
            structure_changes_from_root: get(&c.from_root),
            long_value_pages: get(&c.long_value_pages),
        }
    }

    /// Counts a leaf split (the tree calls it).
    pub fn note_leaf_split(&self, kind: LeafSplit) {
        bump(match kind {
            LeafSplit::Append => &self.counters.splits_append,
            LeafSplit::Hotpoint => &self.counters.splits_hotpoint,
            LeafSplit::Even => &self.counters.splits_even,
        });
    }

    /// Counts a pessimistic change by where its exclusive latches began (the tree calls it).
    pub fn note_structure_change(&self, from_root: bool) {
        bump(if from_root {
            &self.counters.from_root
        } else {
            &self.counters.from_leaf_parent
        });
    }

    /// Counts a merge (the tree calls it).
    pub fn note_merge(&self) {
        bump(&self.counters.merges);
    }

    /// Counts a split of an interior node (the tree calls it).
    pub fn note_interior_split(&self) {
        bump(&self.counters.interior_splits);
    }

    /// Counts a change of one leaf entry: `removed` bytes of the entry before (0 if none) and
    /// `added` bytes after (0 if none), as [`crate::node::leaf_entry_bytes`] gives them (the
    /// tree calls it).
    pub fn note_leaf_entry_change(&self, removed: usize, added: usize) {
        if removed > 0 {
            self.counters
                .leaf_bytes_removed
                .fetch_add(removed as u64, Ordering::Relaxed);
        }
        if added > 0 {
            self.counters
                .leaf_bytes_added
                .fetch_add(added as u64, Ordering::Relaxed);
        }
    }

    /// Walks the space maps: how the file's free pages lie ([`SpaceCensus`]).
    pub fn census(&self, cache: &PageCache) -> Result<SpaceCensus> {
        let state = self.state.lock();
        let count = state.page_count;
        let mut census = SpaceCensus {
            page_count: count,
            used_pages: state.used,
            ..SpaceCensus::default()
        };
        let per_map = pages_per_map(self.page_size);
        let mut extent = 0u64;
        while extent < count {
            let group_start = extent - extent % per_map;
            let map = cache.read(map_page_for(extent, self.page_size) as u32)?;
            let end = (group_start + per_map).min(count);
            while extent < end {
                let to = (extent + OWNED_EXTENT_PAGES).min(end);
                let free = (extent..to)
                    .filter(|&p| !get_bit(map.data(), p - group_start))
                    .count() as u64;
                if free == to - extent {
                    census.free_pages_in_free_extents += free;
                } else {
                    census.free_pages_in_used_extents += free;
                    census.free_pages_between_used +=
                        freed_runs(map.data(), group_start, extent, to)
                            .map(|(_, run)| run)
                            .sum::<u64>();
                }
                extent = to;
            }
        }
        Ok(census)
    }

    /// Allocates a free page, growing the file by an extent if none is free.
    pub fn allocate(&self, cache: &PageCache) -> Result<u32> {
        let mut state = self.state.lock();
        loop {
            if let Some(page) = self.find_free(cache, &state)? {
                self.claim(cache, &mut state, page)?;
                bump(&self.counters.anywhere);
                state.hint = page + 1;
                return Ok(page as u32);
            }
            self.grow(cache, &mut state)?;
        }
    }

    /// Allocates a page for a node split off `near` (the page being split), where ESE's split
    /// would put it. ESE gives a split the first free page after the split page in the tree's
    /// own space (`ErrSPGetPage` with the split page as hint, `space.cxx`): every page the tree
    /// freed is in that space (its available-extent tree), and only when none is left does the
    /// tree take a new extent from the database, which grows the file only when it has no free
    /// extent either. Since Exchange 2010 each mailbox's data lives in tables of its own. Our
    /// one tree keyed by mailbox stands in for that with owned extents
    /// ([`OWNED_EXTENT_PAGES`]-aligned, which `init` gives each mailbox's pages) and with
    /// `neighbours`, the pages beside `near` in its parent, nearest first (the same key range,
    /// so the same mailbox but at its edges). In order:
    /// 1. a free page in `near`'s owned extent (the first after `near`, else the nearest
    ///    before);
    /// 2. a free page in the owned extent of a neighbour (where an earlier split of the same
    ///    key range started an extent, or a merge freed a page);
    /// 3. the first page of a wholly free owned extent, whose rest is then left to the new
    ///    page's own later splits;
    /// 4. a free page that has a page in use after it in its extent (`find_free_far`: the
    ///    middle of the longest such run): space a merge freed is reused before the file grows.
    ///    The rest of an extent after its last page in use is never taken here: it is its
    ///    owner's room, as a table's extents are its own in ESE (until 2026-11-29 step 4 took
    ///    any free page, so the rests `init` leaves every mailbox, ~1.5% of the file, kept the
    ///    file from growing for the first ~45 minutes of the faithfulness job:
    ///    `docs/faithfulness.md`, "Growth per Jetstress batch");
    /// 5. only then, growth of the file, and the first page of its first new extent.
    ///
    /// See `docs/design.md`, "Where new pages go".
    pub fn allocate_near(&self, cache: &PageCache, near: u32, neighbours: &[u32]) -> Result<u32> {
        let near = u64::from(near);
        let mut state = self.state.lock();
        let mut found = self.find_free_in_extent(cache, &state, near)?;
        let mut counter = &self.counters.own;
        if found.is_none() {
            counter = &self.counters.neighbour;
            let own = near / OWNED_EXTENT_PAGES;
            let mut looked = Vec::with_capacity(neighbours.len());
            for &page in neighbours {
                let page = u64::from(page);
                let extent = page / OWNED_EXTENT_PAGES;
                if extent == own || looked.contains(&extent) {
                    continue;
                }
                looked.push(extent);
                found = self.find_free_in_extent(cache, &state, page)?;
                if found.is_some() {
                    break;
                }
            }
        }
        if found.is_none() {
            counter = &self.counters.free_extent;
            found = self.find_free_extent(cache, &state)?;
            if found.is_none() {
                counter = &self.counters.anywhere;
                found = self.find_free_far(cache, &state)?;
            }
            if found.is_none() {
                counter = &self.counters.free_extent;
                self.grow(cache, &mut state)?;
                found = self.find_free_extent(cache, &state)?;
            }
            if std::ptr::eq(counter, &self.counters.free_extent)
                && let Some(page) = found
            {
                state.extent_hint = page + OWNED_EXTENT_PAGES;
            }
        }
        let Some(page) = found else {
            drop(state);
            return self.allocate(cache);
        };
        self.claim(cache, &mut state, page)?;
        bump(counter);
        Ok(page as u32)
    }

    /// Marks `page`, found free in the maps, in use. A damaged map must never hand out a header
    /// or map page: that would overwrite the database's own bookkeeping.
    fn claim(&self, cache: &PageCache, state: &mut SpaceState, page: u64) -> Result<()> {
        if page <= u64::from(HEADER_PAGES) || is_map_page(page, self.page_size) {
            return Err(EngineError::Inconsistent {
                path: cache.file().path().to_path_buf(),
                page: map_page_for(page, self.page_size) as u32,
                what: format!("the space map says page {page} (its own or a header) is free"),
            });
        }
        // Invariant: the maps hand out only pages inside the file; a page past its end would be
        // written where no space map accounts for it.
        debug_assert!(
            page < state.page_count,
            "page {page} allocated past the file's {} pages",
            state.page_count
        );
        self.mark(cache, page, true)?;
        state.used += 1;
        Ok(())
    }

    /// A free page in `near`'s owned extent: the first after `near`, else the first before it
    /// (a page a merge freed there).
    fn find_free_in_extent(
        &self,
        cache: &PageCache,
        state: &SpaceState,
        near: u64,
    ) -> Result<Option<u64>> {
        let extent_start = near - near % OWNED_EXTENT_PAGES;
        let end = (extent_start + OWNED_EXTENT_PAGES).min(state.page_count);
        if extent_start >= end {
            return Ok(None);
        }
        let per_map = pages_per_map(self.page_size);
        let group_start = near - near % per_map;
        let map = cache.read(map_page_for(near, self.page_size) as u32)?;
        let free = |page: &u64| !get_bit(map.data(), *page - group_start);
        Ok((near + 1..end)
            .find(free)
            .or_else(|| (extent_start..near.min(end)).rev().find(free)))
    }

    /// A free page that space freed inside an owner's pages, for a split whose own and
    /// neighbours' extents are full when no owned extent is wholly free: the middle page of the
    /// longest run of free pages that ends at a page in use inside an owned extent (the first
    /// such run if several tie). Such pages are the ones merges freed; a run that reaches the
    /// extent's end is its owner's rest (its tail's room) and is left to it. Taking the first
    /// free page anywhere (as until 2026-11-27) put the new page
    /// right after another mailbox's tail page, both hot, so flushes wrote them together and
    /// database writes grew 10% over 600 s; the last page of the largest rest still put the
    /// next borrower from another mailbox beside the first (`docs/design.md`, "Where new pages
    /// go"). The middle of the longest run leaves free pages on both sides: the owner's room
    /// next to its tail, and the new page's own later splits' room after it (step 1).
    fn find_free_far(&self, cache: &PageCache, state: &SpaceState) -> Result<Option<u64>> {
        let count = state.page_count;
        let per_map = pages_per_map(self.page_size);
        // (run length, first page of the run) of the longest run so far.
        let mut best: Option<(u64, u64)> = None;
        let mut group_start = 0u64;
        while group_start < count {
            let map = cache.read(map_page_for(group_start, self.page_size) as u32)?;
            let data = map.data();
            let end = (group_start + per_map).min(count);
            let mut extent = group_start;
            while extent < end {
                let to = (extent + OWNED_EXTENT_PAGES).min(end);
                let index = HEADER_SIZE + ((extent - group_start) / 8) as usize;
                // Skip a full extent (two whole map bytes) without looking at its pages.
                if to - extent == OWNED_EXTENT_PAGES
                    && data.get(index..index + 2) == Some(&[0xFF, 0xFF][..])
                {
                    extent = to;
                    continue;
                }
                for (first, run) in freed_runs(data, group_start, extent, to) {
                    if best.is_none_or(|(longest, _)| run > longest) {
                        best = Some((run, first));
                    }
                }
                extent = to;
            }
            group_start += per_map;
        }
        Ok(best.map(|(run, first)| first + run / 2))
    }

    /// The first page of the first owned extent, at or after the extent hint (wrapping once),
    /// whose pages are all free and below the page count.
    fn find_free_extent(&self, cache: &PageCache, state: &SpaceState) -> Result<Option<u64>> {
        let count = state.page_count - state.page_count % OWNED_EXTENT_PAGES;
        let hint = state.extent_hint - state.extent_hint % OWNED_EXTENT_PAGES;
        self.scan_maps(cache, hint, count, |data, group_start, from, to| {
            // An owned extent is two whole bytes of the map (16 bits, byte aligned): `from` and
            // `to` are multiples of the extent, and so are map groups.
            (from..to)
                .step_by(OWNED_EXTENT_PAGES as usize)
                .find(|&extent| {
                    let index = HEADER_SIZE + ((extent - group_start) / 8) as usize;
                    data.get(index..index + 2) == Some(&[0, 0][..])
                })
        })
    }

    /// Searches the maps for pages `[hint, count)` and then `[0, hint)`, one map group at a time:
    /// `find(map data, group start, from, to)` looks at the pages `[from, to)` of one group and
    /// returns the page it wants, if any; the first one found is returned.
    fn scan_maps(
        &self,
        cache: &PageCache,
        hint: u64,
        count: u64,
        mut find: impl FnMut(&[u8], u64, u64, u64) -> Option<u64>,
    ) -> Result<Option<u64>> {
        let per_map = pages_per_map(self.page_size);
        let hint = hint.min(count);
        for (from, to) in [(hint, count), (0, hint)] {
            let mut page = from;
            while page < to {
                let group_start = page - page % per_map;
                let group_end = (group_start + per_map).min(to);
                let map = cache.read(map_page_for(page, self.page_size) as u32)?;
                if let Some(found) = find(map.data(), group_start, page, group_end) {
                    return Ok(Some(found));
                }
                page = group_end;
            }
        }
        Ok(None)
    }

    /// Returns `page` to the free pool. The caller has already reformatted it as a free page.
    pub fn free(&self, cache: &PageCache, page: u32) -> Result<()> {
        let mut state = self.state.lock();
        // Invariant: a page freed lies in the file and is not its header or a space map page
        // (freeing one would let the allocator hand out the database's own bookkeeping).
        debug_assert!(
            u64::from(page) < state.page_count
                && u64::from(page) > u64::from(HEADER_PAGES)
                && !is_map_page(u64::from(page), self.page_size),
            "page {page} freed: outside the file's {} pages, or a header or map page",
            state.page_count
        );
        self.mark(cache, u64::from(page), false)?;
        bump(&self.counters.freed);
        // Invariant: the count of pages in use never goes below zero (a free without its
        // allocation would make the space figures wrong).
        debug_assert!(state.used > 0, "page {page} freed with no page in use");
        state.used = state.used.saturating_sub(1);
        state.hint = state.hint.min(u64::from(page));
        Ok(())
    }

    /// Is `page` marked in use? (For consistency checks.)
    pub fn is_used(&self, cache: &PageCache, page: u32) -> Result<bool> {
        let map_page = map_page_for(u64::from(page), self.page_size) as u32;
        let map = cache.read(map_page)?;
        Ok(get_bit(
            map.data(),
            u64::from(page) % pages_per_map(self.page_size),
        ))
    }

    fn mark(&self, cache: &PageCache, page: u64, used: bool) -> Result<()> {
        let map_page = map_page_for(page, self.page_size) as u32;
        let mut map = cache.write(map_page)?;
        let stamp = stamp_after(&self.stamp, map.data());
        let bit = page % pages_per_map(self.page_size);
        // Invariant: a page is allocated only while its bit says free (the searches return
        // only such pages); otherwise two owners would share one page. (Not checked for a
        // free: which pages are freed comes from the tree's pages, which may be damaged.)
        debug_assert!(
            !used || !get_bit(map.data(), bit),
            "page {page} allocated while in use"
        );
        set_bit(map.data_mut(), bit, used);
        let log = self.log.read().clone();
        let log_position = log
            .record(map_page, stamp, &PageChange::MapBit { bit, used })
            .inspect_err(|e| cache.poison(e))?;
        map.stamp(stamp, log_position);
        Ok(())
    }

    /// The first free page at or after the hint, wrapping around once.
    fn find_free(&self, cache: &PageCache, state: &SpaceState) -> Result<Option<u64>> {
        self.scan_maps(
            cache,
            state.hint,
            state.page_count,
            |data, group_start, from, to| {
                let mut bit = from - group_start;
                while group_start + bit < to {
                    // Skip whole bytes that are full.
                    if bit.is_multiple_of(8) && group_start + bit + 8 <= to {
                        let index = HEADER_SIZE + (bit / 8) as usize;
                        if data.get(index) == Some(&0xFF) {
                            bit += 8;
                            continue;
                        }
                    }
                    if !get_bit(data, bit) {
                        return Some(group_start + bit);
                    }
                    bit += 1;
                }
                None
            },
        )
    }

    fn grow(&self, cache: &PageCache, state: &mut SpaceState) -> Result<()> {
        let old = state.page_count;
        let new = (old + self.extent_pages).min(MAX_PAGES);
        if new <= old {
            return Err(EngineError::Full {
                path: cache.file().path().to_path_buf(),
                max_pages: MAX_PAGES,
            });
        }
        let long_values = self.long_value_extents(state, old, new);
        let is_long_value = |page: u64| {
            long_values
                .binary_search(&(page - page % OWNED_EXTENT_PAGES))
                .is_ok()
        };
        format_range_with(
            cache.file().as_ref(),
            self.page_size,
            old,
            new,
            self.content.as_deref(),
            &is_long_value,
        )?;
        let per_map = pages_per_map(self.page_size);
        let mut group_start = old.div_ceil(per_map) * per_map;
        while group_start < new {
            cache.pin_forever(map_page_for(group_start, self.page_size) as u32)?;
            state.used += 1;
            group_start += per_map;
        }
        state.page_count = new;
        state.hint = state.hint.min(old);
        bump(&self.counters.extensions);
        self.counters
            .extension_pages
            .fetch_add(new - old, Ordering::Relaxed);
        (self.on_grow.0)(new)?;
        // The long-value pages are formatted, synced and inside the file (the header says so):
        // mark them in use, so that no allocation hands them out. The marks are logged as every
        // map change is; a crash before they are durable leaves the pages free (recreated, not
        // read, when allocated), never a page in use that the maps call free.
        for &extent in &long_values {
            for page in extent..extent + OWNED_EXTENT_PAGES {
                self.mark(cache, page, true)?;
                state.used += 1;
            }
            self.counters
                .long_value_pages
                .fetch_add(OWNED_EXTENT_PAGES, Ordering::Relaxed);
        }
        Ok(())
    }

    /// The owned extents of growth `[old, new)` to lay down as long-value pages: whole extents
    /// with no map page, as close to the content's share of all such extents growth added since
    /// open as whole extents allow, spread evenly, and never all of this growth's (the split that
    /// grew the file needs a free extent). None without content or at a share of 0.
    fn long_value_extents(&self, state: &mut SpaceState, old: u64, new: u64) -> Vec<u64> {
        let share = self
            .content
            .as_ref()
            .map_or(0.0, |content| content.long_value_share());
        if !(share.is_finite() && share > 0.0) {
            return Vec::new();
        }
        let share = share.min(crate::fill::MAX_LONG_VALUE_SHARE);
        let mut chosen = Vec::new();
        let mut candidates = 0u64;
        let mut extent = old.div_ceil(OWNED_EXTENT_PAGES) * OWNED_EXTENT_PAGES;
        while extent + OWNED_EXTENT_PAGES <= new {
            let holds_structure = extent <= u64::from(HEADER_PAGES)
                || (extent..extent + OWNED_EXTENT_PAGES).any(|p| is_map_page(p, self.page_size));
            if !holds_structure {
                candidates += 1;
                state.growth_extents += 1;
                if (state.long_value_extents + 1) as f64 <= share * state.growth_extents as f64 {
                    state.long_value_extents += 1;
                    chosen.push(extent);
                }
            }
            extent += OWNED_EXTENT_PAGES;
        }
        if candidates > 0 && chosen.len() as u64 == candidates {
            chosen.pop();
            state.long_value_extents -= 1;
        }
        chosen
    }
}
