//! Lost writes (the storage acknowledged a page write and later returned an older copy of the
//! page) are found by the flush map: the next read of the page names it, a stale space map page
//! stops the open instead of handing out pages in use, and a flush map that cannot vouch for the
//! pages (stale, another database's, damaged) is refused with the way to start afresh; a missing
//! one is made anew with every page unknown.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;

use common::small_options;
use jetproof_engine::db::FlushMapOpened;
use jetproof_engine::flushmap::page_write_count;
use jetproof_engine::{Database, EngineError, flush_map_path, record_key};
use jetproof_io::mem::MemBackend;
use jetproof_io::{IoBackend, IoClass, OpenOptions};

const PAGE: usize = 8192;
const PATH: &str = "/d/db.jpdb";

fn raw_page(backend: &MemBackend, number: u64) -> Vec<u8> {
    let file = backend
        .open(Path::new(PATH), &OpenOptions::read_only().buffered())
        .unwrap();
    let mut page = vec![0u8; PAGE];
    file.read_at(&mut page, number * PAGE as u64, IoClass::DbRead)
        .unwrap();
    page
}

fn put_raw_page(backend: &MemBackend, number: u64, page: &[u8]) {
    let file = backend
        .open(Path::new(PATH), &OpenOptions::read_write().buffered())
        .unwrap();
    file.write_at(page, number * PAGE as u64, IoClass::DbWrite)
        .unwrap();
}

fn contents(backend: &MemBackend, path: &Path) -> Vec<u8> {
    let file = backend
        .open(path, &OpenOptions::read_only().buffered())
        .unwrap();
    let mut bytes = vec![0u8; file.size().unwrap() as usize];
    file.read_at(&mut bytes, 0, IoClass::FlushMap).unwrap();
    bytes
}

fn put_contents(backend: &MemBackend, path: &Path, bytes: &[u8]) {
    let file = backend
        .open(path, &OpenOptions::create().buffered())
        .unwrap();
    file.set_size(bytes.len() as u64).unwrap();
    file.write_at(bytes, 0, IoClass::FlushMap).unwrap();
}

/// The error opening the database gives (a `Database` is not printed: its cache is large).
fn refused(backend: &MemBackend) -> EngineError {
    match Database::open(backend, Path::new(PATH), small_options(PAGE, 32)) {
        Ok(_) => panic!("the database opened"),
        Err(error) => error,
    }
}

fn value(n: u64, round: u8) -> Vec<u8> {
    let mut v = vec![round; 600];
    v[..8].copy_from_slice(&n.to_le_bytes());
    v
}

/// A closed database of 200 records.
fn filled(backend: &MemBackend) {
    let db = Database::create(backend, Path::new(PATH), small_options(PAGE, 32)).unwrap();
    for n in 0..200 {
        db.insert(&record_key(n), &value(n, 0)).unwrap();
    }
    db.close().unwrap();
}

/// The leaf holding record `n`, found in the raw file.
fn leaf_of(backend: &MemBackend, n: u64) -> u64 {
    let file = backend
        .open(Path::new(PATH), &OpenOptions::read_only().buffered())
        .unwrap();
    let pages = file.size().unwrap() / PAGE as u64;
    let key = record_key(n);
    (3..pages)
        .find(|&number| {
            let page = raw_page(backend, number);
            jetproof_engine::page::page_type(&page) == Some(jetproof_engine::page::PageType::Leaf)
                && (0..jetproof_engine::node::count(&page)).any(|i| {
                    jetproof_engine::node::leaf_entry(&page, i).is_some_and(|(k, _)| k == key)
                })
        })
        .unwrap_or_else(|| panic!("record {n} is in no leaf"))
}

/// Changes record `n` and closes: its leaf is written again, with the next write count.
fn rewrite(backend: &MemBackend, n: u64, round: u8) {
    let db = Database::open(backend, Path::new(PATH), small_options(PAGE, 32)).unwrap();
    db.replace(&record_key(n), &value(n, round)).unwrap();
    db.close().unwrap();
}

#[test]
fn an_older_copy_of_a_page_put_back_is_a_lost_write_at_its_next_read() {
    let backend = MemBackend::new();
    filled(&backend);
    let leaf = leaf_of(&backend, 77);
    let before = raw_page(&backend, leaf);
    rewrite(&backend, 77, 1);
    let after = raw_page(&backend, leaf);
    let (old, new) = (
        page_write_count(&before).unwrap(),
        page_write_count(&after).unwrap(),
    );
    assert_eq!(new, old.wrapping_add(1), "the rewrite counted one write");
    // The storage "loses" the write: the page reads back as it was.
    put_raw_page(&backend, leaf, &before);
    let db = Database::open(&*backend, Path::new(PATH), small_options(PAGE, 32)).unwrap();
    let error = db.get(&record_key(77)).unwrap_err();
    match &error {
        EngineError::LostWrite {
            page,
            expected,
            found,
            ..
        } => {
            assert_eq!(u64::from(*page), leaf);
            assert_eq!((*expected, *found), (new, old));
        }
        other => panic!("expected a lost write, got {other}"),
    }
    assert!(error.to_string().contains(PATH), "{error}");
    // Records on other leaves are unaffected.
    let other = (0..200).find(|&n| leaf_of(&backend, n) != leaf).unwrap();
    assert_eq!(db.get(&record_key(other)).unwrap(), Some(value(other, 0)));
}

#[test]
fn a_stale_space_map_page_stops_the_open_instead_of_handing_out_pages_in_use() {
    // Issue 15, item 7: an older copy of space-map page 2 put back made the next run hang (two
    // sessions waiting on the latch of a page handed out twice).
    let backend = MemBackend::new();
    filled(&backend);
    let map_before = raw_page(&backend, 2);
    // More records: the tree grows, the map marks more pages used.
    let db = Database::open(&*backend, Path::new(PATH), small_options(PAGE, 32)).unwrap();
    for n in 200..400 {
        db.insert(&record_key(n), &value(n, 0)).unwrap();
    }
    db.close().unwrap();
    assert_ne!(raw_page(&backend, 2), map_before, "the map page changed");
    put_raw_page(&backend, 2, &map_before);
    let error = refused(&backend);
    assert!(
        matches!(error, EngineError::LostWrite { page: 2, .. }),
        "expected a lost write of page 2, got {error}"
    );
}

#[test]
fn a_stale_flush_map_is_refused_and_says_how_to_start_afresh() {
    let backend = MemBackend::new();
    filled(&backend);
    let map_path = flush_map_path(Path::new(PATH));
    let old_map = contents(&backend, &map_path);
    rewrite(&backend, 5, 1);
    put_contents(&backend, &map_path, &old_map);
    let error = refused(&backend);
    let text = error.to_string();
    assert!(matches!(error, EngineError::FlushMap { .. }), "{text}");
    assert!(text.contains("stale"), "{text}");
    assert!(text.contains("delete the flush map"), "{text}");
    // The user's way out: remove it; the database opens with every page unknown, and lost
    // writes are found again from each page's next write on.
    backend.remove(&map_path).unwrap();
    let db = Database::open(&*backend, Path::new(PATH), small_options(PAGE, 32)).unwrap();
    assert_eq!(db.flush_map_opened(), Some(&FlushMapOpened::Recreated));
    assert_eq!(db.get(&record_key(5)).unwrap(), Some(value(5, 1)));
    db.close().unwrap();
    let leaf = leaf_of(&backend, 5);
    let before = raw_page(&backend, leaf);
    rewrite(&backend, 5, 2);
    put_raw_page(&backend, leaf, &before);
    let db = Database::open(&*backend, Path::new(PATH), small_options(PAGE, 32)).unwrap();
    assert!(matches!(
        db.get(&record_key(5)),
        Err(EngineError::LostWrite { .. })
    ));
}

#[test]
fn another_databases_or_a_damaged_flush_map_is_refused() {
    let backend = MemBackend::new();
    filled(&backend);
    let map_path = flush_map_path(Path::new(PATH));
    let ours = contents(&backend, &map_path);
    // Another database's map.
    let other = MemBackend::new();
    filled(&other);
    put_contents(&backend, &map_path, &contents(&other, &map_path));
    let error = refused(&backend);
    assert!(error.to_string().contains("another database"), "{error}");
    // A damaged map page (both its slots: the committed one is what counts).
    let mut damaged = ours.clone();
    for block in [2, 2 + jetproof_engine::flushmap::CHUNK_MAP_PAGES] {
        damaged[block * 4096 + 300] ^= 0x20;
    }
    put_contents(&backend, &map_path, &damaged);
    let error = refused(&backend);
    assert!(error.to_string().contains("damaged"), "{error}");
    put_contents(&backend, &map_path, &ours);
    Database::open(&*backend, Path::new(PATH), small_options(PAGE, 32))
        .unwrap()
        .close()
        .unwrap();
}
