//! A damaged database file never makes the engine panic: a flipped bit is corrected and counted,
//! worse damage is an error naming the file and page, and a file that is not a database (or is
//! cut short) is refused when opened.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;

use common::small_options;
use jetproof_engine::{Database, EngineError, HeaderError, record_key};
use jetproof_io::mem::MemBackend;
use jetproof_io::{IoBackend, IoClass, OpenOptions};

const PAGE: usize = 8192;

fn filled(backend: &MemBackend, path: &Path) -> u64 {
    let db = Database::create(backend, path, small_options(PAGE, 32)).unwrap();
    let records = db
        .fill_sequential(
            64 * PAGE as u64,
            0,
            1000,
            |n, v| v.extend_from_slice(&n.to_le_bytes()),
            |_| {},
        )
        .unwrap();
    db.close().unwrap();
    records
}

/// The leaf page holding record `n`: found by looking for its record in the raw file.
fn page_of(backend: &MemBackend, path: &Path, n: u64) -> u64 {
    let file = backend
        .open(path, &OpenOptions::read_only().buffered())
        .unwrap();
    let size = file.size().unwrap();
    let mut page = vec![0u8; PAGE];
    // A leaf record: key length 8, value length 1000, then the key.
    let mut key = vec![8, 0, 0xE8, 0x03];
    key.extend_from_slice(&record_key(n));
    for number in 3..size / PAGE as u64 {
        file.read_at(&mut page, number * PAGE as u64, IoClass::DbRead)
            .unwrap();
        if jetproof_engine::page::page_type(&page) == Some(jetproof_engine::page::PageType::Leaf)
            && page.windows(key.len()).any(|w| w == key)
        {
            return number;
        }
    }
    panic!("record {n} not found in any leaf");
}

#[test]
fn flipped_bit_is_corrected_and_garbage_is_reported_by_page() {
    let backend = MemBackend::new();
    let path = Path::new("/d/db.jpdb");
    let records = filled(&backend, path);
    let raw = backend
        .open(path, &OpenOptions::read_write().buffered())
        .unwrap();

    let flipped = page_of(&backend, path, records / 2);
    let offset = flipped * PAGE as u64 + 3000;
    let mut byte = [0u8; 1];
    raw.read_at(&mut byte, offset, IoClass::DbRead).unwrap();
    raw.write_at(&[byte[0] ^ 0x04], offset, IoClass::DbWrite)
        .unwrap();

    let garbage = page_of(&backend, path, records / 4);
    raw.write_at(&[0xEE; 64], garbage * PAGE as u64 + 4000, IoClass::DbWrite)
        .unwrap();

    let db = Database::open(backend.as_ref(), path, small_options(PAGE, 32)).unwrap();
    let value = db.get(&record_key(records / 2)).unwrap().unwrap();
    assert_eq!(&value[..8], &(records / 2).to_le_bytes());
    assert_eq!(db.cache_stats().pages_corrected, 1);

    let err = db.get(&record_key(records / 4)).unwrap_err();
    match &err {
        EngineError::BadPage { page, path: p } => {
            assert_eq!(u64::from(*page), garbage);
            assert_eq!(p, path);
        }
        other => panic!("expected BadPage, got {other}"),
    }
    // Other records are still readable.
    assert!(db.get(&record_key(0)).unwrap().is_some());
}

#[test]
fn foreign_truncated_and_garbage_files_are_refused_on_open() {
    let backend = MemBackend::new();
    let options = small_options(PAGE, 32);
    let write = |name: &str, content: &[u8]| {
        let file = backend
            .open(Path::new(name), &OpenOptions::create().buffered())
            .unwrap();
        file.write_at(content, 0, IoClass::DbWrite).unwrap();
    };
    write(
        "/foreign",
        &b"PK\x03\x04 not a database at all".repeat(1000),
    );
    let err = Database::open(backend.as_ref(), Path::new("/foreign"), options.clone()).unwrap_err();
    assert!(
        matches!(err, EngineError::Header(HeaderError::NotADatabase { .. })),
        "{err}"
    );

    let path = Path::new("/cut.jpdb");
    filled(&backend, path);
    let raw = backend
        .open(path, &OpenOptions::read_write().buffered())
        .unwrap();
    raw.set_size(20 * PAGE as u64).unwrap();
    let err = Database::open(backend.as_ref(), path, options.clone()).unwrap_err();
    assert!(
        matches!(err, EngineError::Header(HeaderError::Truncated { .. })),
        "{err}"
    );
    assert!(err.to_string().contains("/cut.jpdb"), "{err}");
}

/// The header's state as stored on disk (read-only).
fn stored_state(backend: &MemBackend, path: &Path) -> jetproof_engine::DbState {
    let file = backend
        .open(path, &OpenOptions::read_only().buffered())
        .unwrap();
    jetproof_engine::DbHeader::read(file.as_ref())
        .unwrap()
        .state
}

#[test]
fn an_attach_that_fails_on_a_damaged_space_map_leaves_the_database_clean() {
    let backend = MemBackend::new();
    let path = Path::new("/d/db.jpdb");
    filled(&backend, path);
    // Page 2 is the first space map (after the two header copies).
    let raw = backend
        .open(path, &OpenOptions::read_write().buffered())
        .unwrap();
    let mut page = vec![0u8; PAGE];
    raw.read_at(&mut page, 2 * PAGE as u64, IoClass::DbRead)
        .unwrap();
    for byte in &mut page[100..140] {
        *byte ^= 0x5a;
    }
    raw.write_at(&page, 2 * PAGE as u64, IoClass::DbWrite)
        .unwrap();
    let Err(error) = Database::open(backend.as_ref(), path, small_options(PAGE, 32)) else {
        panic!("a damaged space map must fail the attach");
    };
    assert!(
        matches!(error, EngineError::BadPage { page: 2, .. }),
        "{error}"
    );
    assert_eq!(
        stored_state(&backend, path),
        jetproof_engine::DbState::Clean,
        "nothing was changed: the database needs no recovery"
    );
}

#[test]
fn a_cache_beyond_any_machine_is_an_error_and_the_database_stays_clean() {
    let backend = MemBackend::new();
    let path = Path::new("/d/db.jpdb");
    filled(&backend, path);
    let mut options = small_options(PAGE, 32);
    // 2^50 bytes of 8 KiB pages: a frame table of 2^37 entries, more than any address space.
    options.cache_max_bytes = 1 << 50;
    let Err(error) = Database::open(backend.as_ref(), path, options) else {
        panic!("a cache of 2^50 bytes must be refused");
    };
    assert!(matches!(error, EngineError::OutOfMemory { .. }), "{error}");
    assert!(error.to_string().contains("cache.max_size"), "{error}");
    assert_eq!(
        stored_state(&backend, path),
        jetproof_engine::DbState::Clean
    );
    // The same database opens with a sane cache.
    Database::open(backend.as_ref(), path, small_options(PAGE, 32))
        .unwrap()
        .close()
        .unwrap();
}

/// An interior entry that names its own node, the root or another child of the path (a damaged
/// node whose checksum is good: sealed after the damage) is reported, never waited on: the
/// descent would otherwise take a latch the session already holds and hang (issue 15, point 7).
#[test]
fn an_interior_entry_naming_a_page_on_the_path_is_an_error_not_a_hang() {
    let backend = MemBackend::new();
    let path = Path::new("/d/db.jpdb");
    let records = filled(&backend, path);
    let raw = backend
        .open(path, &OpenOptions::read_write().buffered())
        .unwrap();
    let mut root = vec![0u8; PAGE];
    raw.read_at(&mut root, 3 * PAGE as u64, IoClass::DbRead)
        .unwrap();
    assert!(
        jetproof_engine::node::level(&root) >= 1,
        "the root is an interior node"
    );
    // Every child pointer of the root now names the root itself.
    let count = jetproof_engine::node::count(&root);
    for i in 0..count {
        let slot = u16::from_le_bytes([root[80 + 2 * i], root[81 + 2 * i]]) as usize;
        root[slot + 2..slot + 6].copy_from_slice(&3u32.to_le_bytes());
    }
    jetproof_engine::checksum::seal(&mut root);
    raw.write_at(&root, 3 * PAGE as u64, IoClass::DbWrite)
        .unwrap();
    // Opening with a flush map would catch a page rewritten behind its back; this one is
    // damage that kept its write count (the map cannot tell), which the descent must refuse.
    let db = Database::open(backend.as_ref(), path, small_options(PAGE, 32)).unwrap();
    let (sender, receiver) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let read = db
            .get(&record_key(records / 2))
            .err()
            .map(|e| e.to_string());
        let write = db
            .insert(&record_key(records + 1), &[1u8; 100])
            .err()
            .map(|e| e.to_string());
        let _ = sender.send((read, write));
    });
    let (read, write) = receiver
        .recv_timeout(std::time::Duration::from_secs(20))
        .expect("the descent hung on a latch it held");
    for error in [read, write] {
        let error = error.expect("an error, not a value");
        assert!(error.contains("page 3"), "{error}");
        assert!(error.contains("cannot be a child"), "{error}");
    }
}
