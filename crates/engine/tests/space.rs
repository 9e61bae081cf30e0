//! Free-space management across a space-map group boundary: growth formats the next group's map
//! page at its fixed position, the allocator never hands out map or header pages, freed pages
//! come back, and the maps read back the same after a flush.
#![allow(clippy::unwrap_used)]

use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use jetproof_engine::cache::{CacheConfig, PageCache};
use jetproof_engine::page::{self, PageType};
use jetproof_engine::space::{
    OWNED_EXTENT_PAGES, OnGrow, Space, format_range, is_map_page, pages_per_map,
};
use jetproof_io::mem::MemBackend;
use jetproof_io::{IoBackend, IoClass, IoFile, OpenOptions};

const PAGE: usize = 4096;

fn cache(file: &Arc<dyn IoFile>) -> PageCache {
    PageCache::new(
        file.clone(),
        CacheConfig {
            page_size: PAGE,
            min_pages: 16,
            max_pages: 64,
            flush_thread: false,
            flush_map: None,
            write_back_depth: jetproof_engine::cache::DEFAULT_WRITE_BACK_DEPTH,
        },
    )
    .unwrap()
}

#[test]
fn allocation_crosses_a_map_group_and_survives_reload() {
    let backend = MemBackend::new();
    let file = backend
        .open(Path::new("/s/db.jpdb"), &OpenOptions::create().buffered())
        .unwrap();
    format_range(file.as_ref(), PAGE, 0, 64).unwrap();
    let per_map = pages_per_map(PAGE);
    let grown = Arc::new(AtomicU64::new(0));
    let seen = grown.clone();
    let cache = cache(&file);
    let space = Space::load(
        &cache,
        64,
        4096,
        Arc::new(AtomicU64::new(1)),
        OnGrow(Box::new(move |count| {
            seen.store(count, Ordering::SeqCst);
            Ok(())
        })),
    )
    .unwrap();
    assert_eq!(space.used_pages(), 3, "two header copies and the first map");

    let mut allocated = HashSet::new();
    let mut highest = 0u64;
    while highest <= per_map + 100 {
        let page = space.allocate(&cache).unwrap();
        assert!(page >= 3, "header or first map handed out: {page}");
        assert!(
            !is_map_page(u64::from(page), PAGE),
            "map page {page} handed out"
        );
        assert!(allocated.insert(page), "page {page} handed out twice");
        highest = highest.max(u64::from(page));
    }
    assert_eq!(grown.load(Ordering::SeqCst), space.page_count());
    assert_eq!(file.size().unwrap(), space.page_count() * PAGE as u64);
    // The second group's map page was formatted at its fixed position and marks itself in use.
    let mut raw = vec![0u8; PAGE];
    file.read_at(&mut raw, per_map * PAGE as u64, IoClass::DbRead)
        .unwrap();
    assert_eq!(page::page_type(&raw), Some(PageType::SpaceMap));
    assert!(space.is_used(&cache, per_map as u32).unwrap());

    // Everything below the highest page was handed out, in order, except the second map.
    assert_eq!(allocated.len() as u64, highest - 3);
    // Freed pages are handed out again (lowest first) before any page above them.
    let count = space.page_count();
    for page in [5u32, 77, (per_map + 3) as u32] {
        space.free(&cache, page).unwrap();
        assert!(!space.is_used(&cache, page).unwrap());
    }
    let again: Vec<u32> = (0..3).map(|_| space.allocate(&cache).unwrap()).collect();
    assert_eq!(again, vec![5, 77, (per_map + 3) as u32]);
    assert_eq!(space.page_count(), count);

    let used = space.used_pages();
    cache.flush_all().unwrap();
    drop(space);
    drop(cache);
    let cache = cache_again(&file);
    let space = Space::load(
        &cache,
        count,
        4096,
        Arc::new(AtomicU64::new(1)),
        OnGrow(Box::new(|_| Ok(()))),
    )
    .unwrap();
    assert_eq!(space.used_pages(), used);
    for &page in allocated.iter().take(500) {
        assert!(space.is_used(&cache, page).unwrap(), "page {page}");
    }
}

fn cache_again(file: &Arc<dyn IoFile>) -> PageCache {
    cache(file)
}

/// A split's new page comes from the split page's own owned extent when it has a free page
/// (after the split page first); otherwise from a neighbour's extent; otherwise from a wholly
/// free extent (whose rest the new page's own splits then use); with none wholly free, from any
/// free page; the file grows only when no page is free; map and header pages are never handed
/// out. Owned extents fit map groups at every page size.
#[test]
fn a_split_page_comes_from_the_split_pages_own_extent() {
    for page_size in [4096usize, 8192, 16384, 32768] {
        assert_eq!(
            pages_per_map(page_size) % OWNED_EXTENT_PAGES,
            0,
            "{page_size}"
        );
    }
    let backend = MemBackend::new();
    let file = backend
        .open(Path::new("/s/db.jpdb"), &OpenOptions::create().buffered())
        .unwrap();
    format_range(file.as_ref(), PAGE, 0, 64).unwrap();
    let cache = cache(&file);
    let space = Space::load(
        &cache,
        64,
        32,
        Arc::new(AtomicU64::new(1)),
        OnGrow(Box::new(|_| Ok(()))),
    )
    .unwrap();
    // Two "mailboxes": A uses pages 3..=20 (extent 0 and the start of extent 16), B 32..=35.
    for _ in 3..=20 {
        space.allocate(&cache).unwrap();
    }
    for page in 21..32 {
        // 21..32: the free rest of the extent A grows into.
        assert!(!space.is_used(&cache, page).unwrap());
    }
    // 15's extent (0..16) has no free page, so a split of 15 (B's first) gets the first wholly
    // free extent (32..48), and the later splits of that new page take 33, 34, 35.
    assert_eq!(space.allocate_near(&cache, 15, &[]).unwrap(), 32);
    let b: Vec<u32> = (0..3)
        .map(|_| space.allocate_near(&cache, 32, &[]).unwrap())
        .collect();
    assert_eq!(b, vec![33, 34, 35]);
    // A split of A's page 20 takes the free pages after it in its own extent, 21..32.
    let a: Vec<u32> = (0..11)
        .map(|_| space.allocate_near(&cache, 20, &[]).unwrap())
        .collect();
    assert_eq!(a, (21..32).collect::<Vec<u32>>());
    // A's extent is full now: its next split takes a wholly free extent (48..64), not the free
    // pages after B's 35.
    assert_eq!(space.allocate_near(&cache, 20, &[]).unwrap(), 48);
    // A later split of A's page 20 whose parent also points at 48 (the page the last split
    // made, a neighbour) takes 49 from 48's extent rather than another extent.
    assert_eq!(space.allocate_near(&cache, 20, &[5, 48]).unwrap(), 49);
    // With no wholly free extent left, a split takes a page that space freed among pages in
    // use (a merge freed B's 33, and 34 and 35 are still B's) before the file grows; the rests
    // of extents after their last page in use (B's 36..48, 48's 50..64) are their owners' room
    // and are never taken: the file grows instead, and the split takes the new extent's first
    // page.
    let count = space.page_count();
    assert_eq!(count, 64);
    space.free(&cache, 33).unwrap();
    assert_eq!(space.allocate_near(&cache, 20, &[]).unwrap(), 33);
    assert_eq!(
        space.page_count(),
        count,
        "no growth while a freed page is free"
    );
    let next = space.allocate_near(&cache, 20, &[]).unwrap();
    assert!(space.page_count() > count, "grew");
    assert_eq!(next, 64);
    for page in (36..48).chain(50..64) {
        assert!(
            !space.is_used(&cache, page).unwrap(),
            "{page} is its owner's room"
        );
    }
    // A page freed in the split page's own extent comes back first, after the split page or
    // before it.
    space.free(&cache, 25).unwrap();
    assert_eq!(space.allocate_near(&cache, 20, &[]).unwrap(), 25);
    // Before it, the nearest first.
    space.free(&cache, 17).unwrap();
    space.free(&cache, 18).unwrap();
    assert_eq!(space.allocate_near(&cache, 20, &[]).unwrap(), 18);
    assert_eq!(space.allocate_near(&cache, 20, &[]).unwrap(), 17);
    let stats = space.stats();
    assert_eq!(stats.pages_from_neighbour_extent, 1);
    assert_eq!(stats.pages_from_anywhere, 18 + 1);
    assert_eq!(stats.pages_freed, 4);
    assert_eq!(stats.extensions, 1);
    for page in b.iter().chain(&a) {
        assert!(!is_map_page(u64::from(*page), PAGE));
        assert!(*page > 2);
    }
}
