//! The database's public API: create, fill, close, reopen, and refusals.
#![allow(clippy::unwrap_used)]

mod common;

use common::{mem, small_options};
use jetproof_engine::{Database, EngineError, record_key};

#[test]
fn create_insert_close_reopen_every_page_size() {
    for page_size in [4096usize, 8192, 16384, 32768] {
        let (backend, path) = mem();
        let db = Database::create(backend.as_ref(), path, small_options(page_size, 64)).unwrap();
        let value_size = db.max_record_bytes() / 5;
        for i in 0..300u64 {
            let value = vec![(i % 251) as u8; value_size];
            assert!(db.insert(&record_key(i * 7 % 300), &value).unwrap());
        }
        assert!(!db.insert(&record_key(5), b"dup").unwrap());
        let stats = db.check().unwrap();
        assert_eq!(stats.records, 300, "page size {page_size}");
        assert!(stats.height >= 2, "page size {page_size}: {stats:?}");
        db.close().unwrap();

        let db = Database::open(backend.as_ref(), path, small_options(page_size, 64)).unwrap();
        for i in 0..300u64 {
            let value = db.get(&record_key(i)).unwrap().unwrap();
            // Key k was inserted at step i = k * 43 mod 300 (43 is 7's inverse mod 300).
            assert_eq!(
                value,
                vec![(i * 43 % 300 % 251) as u8; value_size],
                "key {i}"
            );
        }
        assert_eq!(db.check().unwrap().records, 300);
        db.close().unwrap();
    }
}

#[test]
fn unclean_stop_is_refused_until_recovery() {
    let (backend, path) = mem();
    let db = Database::create(backend.as_ref(), path, small_options(8192, 64)).unwrap();
    db.insert(b"k", b"v").unwrap();
    drop(db);
    let err = Database::open(backend.as_ref(), path, small_options(8192, 64)).unwrap_err();
    assert!(matches!(err, EngineError::DirtyShutdown { .. }), "{err}");
    let mut options = small_options(8192, 64);
    options.accept_dirty = true;
    Database::open(backend.as_ref(), path, options).unwrap();
}

#[test]
fn existing_file_is_not_overwritten() {
    let (backend, path) = mem();
    Database::create(backend.as_ref(), path, small_options(4096, 64))
        .unwrap()
        .close()
        .unwrap();
    let err = Database::create(backend.as_ref(), path, small_options(4096, 64)).unwrap_err();
    assert!(matches!(err, EngineError::AlreadyExists { .. }), "{err}");
}

/// A scan over a sequentially filled tree reads its leaves ahead, adjacent ones in one I/O.
#[test]
fn scans_read_ahead_in_large_ios() {
    let (backend, path) = mem();
    let options = small_options(8192, 256);
    let db = Database::create(backend.as_ref(), path, options.clone()).unwrap();
    let records = db
        .fill_sequential(
            600 * 8192,
            0,
            1500,
            |n, v| v.extend_from_slice(&n.to_le_bytes()),
            |_| {},
        )
        .unwrap();
    db.close().unwrap();
    let db = Database::open(backend.as_ref(), path, options).unwrap();
    let all = db.scan(b"", usize::MAX).unwrap();
    assert_eq!(all.len() as u64, records);
    assert!(all.windows(2).all(|w| w[0].0 < w[1].0));
    let stats = db.cache_stats();
    assert!(stats.readahead_pages > 300, "{stats:?}");
    assert!(
        stats.read_ios * 4 < stats.pages_read,
        "read-ahead should coalesce adjacent leaves: {stats:?}"
    );
    db.close().unwrap();
}
