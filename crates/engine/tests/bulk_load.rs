//! The bulk loader: a database filled by `Database::bulk_load` must be indistinguishable, to
//! every later user, from one filled record by record: the tree checks, every record reads back,
//! every page of the file verifies, the space map and header counts agree, and random inserts,
//! replaces and deletes against a `BTreeMap` model keep working across close and reopen.
//! Seeded: the seed is printed, and `JETPROOF_SEED=<seed>` replays a run.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

mod common;

use std::collections::BTreeMap;

use common::{mem, seed, small_options};
use jetproof_engine::checksum::{self, PageCheck};
use jetproof_engine::{Database, EngineError, NoLog};
use jetproof_io::{IoBackend, IoClass, OpenOptions};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const PAGE_SIZES: [usize; 4] = [4096, 8192, 16384, 32768];

fn key(n: u64) -> Vec<u8> {
    // Variable-length keys in ascending order: a shared prefix, then the number, then a tail.
    let mut key = format!("mbx{:08}", n / 7).into_bytes();
    key.extend_from_slice(&n.to_be_bytes());
    key.extend(std::iter::repeat_n(b'x', (n % 5) as usize));
    key
}

fn value(rng: &mut StdRng, max: usize) -> Vec<u8> {
    let len = if rng.random_bool(0.1) {
        rng.random_range(max / 2..=max)
    } else {
        rng.random_range(0..max / 4)
    };
    let byte: u8 = rng.random();
    let mut v = vec![byte; len];
    if let Some(first) = v.first_mut() {
        *first = rng.random();
    }
    v
}

/// Every page of the file verifies at its position, and the header's counts match the maps.
fn verify_file(backend: &dyn IoBackend, path: &std::path::Path, context: &str) {
    let file = backend.open(path, &OpenOptions::read_only()).unwrap();
    let header = jetproof_engine::DbHeader::read(file.as_ref()).unwrap();
    let ps = header.page_size as usize;
    let mut page = vec![0u8; ps];
    for n in 0..header.page_count {
        file.read_at(&mut page, n * ps as u64, IoClass::DbRead)
            .unwrap();
        assert_eq!(
            checksum::verify(&page, n as u32),
            PageCheck::Good,
            "{context}: page {n} of {}",
            header.page_count
        );
    }
}

fn load_check_and_use(page_size: usize, seed: u64, records: u64) {
    let context = format!("seed {seed}, page size {page_size}, {records} records");
    let mut rng = StdRng::seed_from_u64(seed);
    let (backend, path) = mem();
    let options = small_options(page_size, 32);
    let mut db = Database::create(backend.as_ref(), path, options.clone()).unwrap();
    let max = db.max_record_bytes() - 40;
    let mut model = BTreeMap::new();
    {
        let mut loader = db.bulk_load().unwrap();
        for n in 0..records {
            let (k, v) = (key(n), value(&mut rng, max));
            loader
                .append(&k, &v)
                .unwrap_or_else(|e| panic!("{context}: {e}"));
            model.insert(k, v);
        }
        assert_eq!(loader.records(), records);
        assert!(loader.used_bytes() >= 4 * page_size as u64);
        loader.finish().unwrap_or_else(|e| panic!("{context}: {e}"));
    }
    let stats = db.check().unwrap_or_else(|e| panic!("{context}: {e}"));
    assert_eq!(stats.records, records, "{context}");
    // The maps count the headers, the map pages, the root and every tree page.
    let map_pages = db.page_count().div_ceil(((page_size - 80) * 8) as u64);
    assert_eq!(
        db.used_pages(),
        2 + map_pages + stats.leaf_pages + stats.interior_pages,
        "{context}"
    );
    db.close().unwrap();
    verify_file(backend.as_ref(), path, &context);

    let db = Database::open(backend.as_ref(), path, options.clone()).unwrap();
    assert_eq!(db.header().used_pages, db.used_pages(), "{context}");
    db.check().unwrap_or_else(|e| panic!("{context}: {e}"));
    for (k, v) in &model {
        assert_eq!(db.get(k).unwrap().as_ref(), Some(v), "{context}: key {k:?}");
    }
    let scanned = db.scan(b"", usize::MAX).unwrap();
    assert_eq!(scanned.len(), model.len(), "{context}");

    // Random changes against the model, inside and beyond the loaded key range.
    for step in 0..600u64 {
        let n = rng.random_range(0..records + records / 4 + 10);
        let k = key(n);
        match rng.random_range(0..3) {
            0 => {
                let v = value(&mut rng, max);
                let added = db.insert(&k, &v).unwrap();
                assert_eq!(added, !model.contains_key(&k), "{context}: step {step}");
                model.entry(k).or_insert(v);
            }
            1 => {
                let v = value(&mut rng, max);
                let replaced = db.replace(&k, &v).unwrap();
                assert_eq!(replaced, model.contains_key(&k), "{context}: step {step}");
                if replaced {
                    model.insert(k, v);
                }
            }
            _ => {
                let deleted = db.delete(&k).unwrap();
                assert_eq!(
                    deleted,
                    model.remove(&k).is_some(),
                    "{context}: step {step}"
                );
            }
        }
    }
    let stats = db.check().unwrap_or_else(|e| panic!("{context}: {e}"));
    assert_eq!(stats.records, model.len() as u64, "{context}");
    db.close().unwrap();
    verify_file(backend.as_ref(), path, &context);
    let db = Database::open(backend.as_ref(), path, options).unwrap();
    db.check().unwrap_or_else(|e| panic!("{context}: {e}"));
    for (k, v) in &model {
        assert_eq!(db.get(k).unwrap().as_ref(), Some(v), "{context}: key {k:?}");
    }
    db.close().unwrap();
}

#[test]
fn bulk_load_every_page_size_round_trips_and_stays_usable() {
    let seed = seed("bulk_load_every_page_size_round_trips_and_stays_usable");
    let mut rng = StdRng::seed_from_u64(seed);
    for page_size in PAGE_SIZES {
        for records in [1, 2, rng.random_range(3..60), rng.random_range(500..3000)] {
            load_check_and_use(page_size, rng.random(), records);
        }
    }
}

/// 4 KiB pages, enough records to cross the first space map group (32,128 pages): the loader's
/// placeholder map is replaced by the final one, and the maps stay right.
#[test]
fn bulk_load_across_a_space_map_group() {
    let seed = seed("bulk_load_across_a_space_map_group");
    let mut rng = StdRng::seed_from_u64(seed);
    let (backend, path) = mem();
    let options = small_options(4096, 64);
    let mut db = Database::create(backend.as_ref(), path, options.clone()).unwrap();
    // Two records of 1,950 bytes per 4 KiB leaf: 68,000 records take 34,000 leaves.
    let records = 68_000u64;
    let value_bytes = 1950;
    {
        let mut loader = db.bulk_load().unwrap();
        let v = vec![0x5Au8; value_bytes];
        for n in 0..records {
            loader.append(&n.to_be_bytes(), &v).unwrap();
        }
        loader.finish().unwrap();
    }
    assert!(db.page_count() > 32_128 + 10, "{}", db.page_count());
    let stats = db.check().unwrap();
    assert_eq!(stats.records, records);
    let map_pages = db.page_count().div_ceil(32_128);
    assert_eq!(
        db.used_pages(),
        2 + map_pages + stats.leaf_pages + stats.interior_pages
    );
    // New pages are allocated after the loaded ones, and the tree keeps working.
    for _ in 0..200 {
        let n = rng.random_range(0..records * 2);
        db.insert(&n.to_be_bytes(), b"new").unwrap();
    }
    db.check().unwrap();
    db.close().unwrap();
    verify_file(backend.as_ref(), path, &format!("seed {seed}"));
    let db = Database::open(backend.as_ref(), path, options).unwrap();
    assert_eq!(
        db.get(&(records - 1).to_be_bytes())
            .unwrap()
            .map(|v| v.len()),
        Some(value_bytes)
    );
    db.check().unwrap();
    db.close().unwrap();
}

#[test]
fn bulk_load_refuses_keys_that_do_not_ascend() {
    let (backend, path) = mem();
    let mut db = Database::create(backend.as_ref(), path, small_options(8192, 32)).unwrap();
    let mut loader = db.bulk_load().unwrap();
    loader.append(b"b", b"1").unwrap();
    for bad in [&b"b"[..], &b"a"[..], &b""[..]] {
        let err = loader.append(bad, b"2").unwrap_err();
        assert!(
            matches!(err, EngineError::KeysNotAscending { record: 1, .. }),
            "{err}"
        );
    }
    loader.append(b"c", b"3").unwrap();
    loader.finish().unwrap();
    assert_eq!(db.get(b"b").unwrap(), Some(b"1".to_vec()));
    assert_eq!(db.get(b"c").unwrap(), Some(b"3".to_vec()));
    assert_eq!(db.get(b"a").unwrap(), None);
    assert_eq!(db.check().unwrap().records, 2);
    db.close().unwrap();
}

#[test]
fn bulk_load_refuses_a_database_that_is_not_empty_or_is_logged() {
    let (backend, path) = mem();
    let options = small_options(4096, 32);
    let mut db = Database::create(backend.as_ref(), path, options.clone()).unwrap();
    db.insert(b"k", b"v").unwrap();
    let err = db.bulk_load().unwrap_err();
    assert!(matches!(err, EngineError::BulkLoadRefused { .. }), "{err}");
    // Emptied again, but it has had a life: still refused only if pages remain in use; an
    // emptied single-leaf tree is the same as a new one, so that is accepted.
    db.delete(b"k").unwrap();
    db.bulk_load().unwrap().finish().unwrap();
    db.close().unwrap();

    // A loaded database refuses a second load.
    let mut db = Database::open(backend.as_ref(), path, options.clone()).unwrap();
    {
        let mut loader = db.bulk_load().unwrap();
        for n in 0..200u32 {
            loader.append(&n.to_be_bytes(), &[7u8; 300]).unwrap();
        }
        loader.finish().unwrap();
    }
    let err = db.bulk_load().unwrap_err();
    assert!(matches!(err, EngineError::BulkLoadRefused { .. }), "{err}");
    db.close().unwrap();

    // A logged database refuses: a bulk load is not logged.
    let (backend, path) = mem();
    let mut db = Database::create(backend.as_ref(), path, options).unwrap();
    db.set_write_ahead_gate(std::sync::Arc::new(NoLog));
    let err = db.bulk_load().unwrap_err();
    assert!(matches!(err, EngineError::BulkLoadRefused { .. }), "{err}");
    db.close().unwrap();
}

#[test]
fn bulk_load_refuses_records_too_large() {
    let (backend, path) = mem();
    let mut db = Database::create(backend.as_ref(), path, small_options(4096, 32)).unwrap();
    let too_big = vec![0u8; db.max_record_bytes() + 1];
    let mut loader = db.bulk_load().unwrap();
    let err = loader.append(b"k", &too_big).unwrap_err();
    assert!(matches!(err, EngineError::RecordTooLarge { .. }), "{err}");
    loader.finish().unwrap();
    assert_eq!(db.check().unwrap().records, 0);
    db.close().unwrap();
}

/// A loader dropped without `finish` leaves the database empty and usable.
#[test]
fn abandoned_bulk_load_leaves_an_empty_database() {
    let (backend, path) = mem();
    let options = small_options(8192, 32);
    let mut db = Database::create(backend.as_ref(), path, options.clone()).unwrap();
    {
        let mut loader = db.bulk_load().unwrap();
        for n in 0..5000u32 {
            loader.append(&n.to_be_bytes(), &[1u8; 200]).unwrap();
        }
    }
    assert_eq!(db.check().unwrap().records, 0);
    for n in 0..300u32 {
        db.insert(&n.to_be_bytes(), &[2u8; 500]).unwrap();
    }
    assert_eq!(db.check().unwrap().records, 300);
    db.close().unwrap();
    verify_file(backend.as_ref(), path, "abandoned");
    let db = Database::open(backend.as_ref(), path, options).unwrap();
    assert_eq!(db.check().unwrap().records, 300);
    db.close().unwrap();
}

/// Loads `records` mail-sized records (2,900 bytes, 32 KiB pages) at `density`, then inserts one
/// record after every 10th loaded key; returns the leaf pages after the load and after the
/// inserts.
fn leaves_at_density(density: u32, records: u64) -> (u64, u64) {
    let (backend, path) = mem();
    let mut db = Database::create(backend.as_ref(), path, small_options(32768, 32)).unwrap();
    let value = vec![7u8; 2900];
    {
        let mut loader = db.bulk_load().unwrap().with_density(density);
        for n in 0..records {
            loader.append(&key(n), &value).unwrap();
        }
        loader.finish().unwrap();
    }
    let loaded = db.check().unwrap().leaf_pages;
    for n in (0..records).step_by(10) {
        let mut k = key(n);
        k.push(0);
        assert!(db.insert(&k, &value).unwrap());
    }
    let after = db.check().unwrap();
    assert_eq!(after.records, records + records.div_ceil(10));
    (loaded, after.leaf_pages)
}

/// ESE's table density: a sequential load leaves `100 − density` percent of each leaf free, so
/// a later insert into a loaded leaf fits in place; packed leaves (100) split at once.
#[test]
fn bulk_load_density_leaves_room_for_later_inserts() {
    let records = 660;
    let (packed, packed_after) = leaves_at_density(100, records);
    let (loose, loose_after) = leaves_at_density(80, records);
    // ~11 records per packed leaf, ~8-9 at 80%.
    assert!(
        loose * 100 >= packed * 115,
        "{loose} leaves at 80% vs {packed} at 100%"
    );
    assert_eq!(loose_after, loose, "inserts into 80% leaves split some");
    assert!(
        packed_after > packed,
        "inserts into packed leaves never split"
    );
}

/// Leaf pages of the database file by the mailbox (the first 4 key bytes) of their first record,
/// read raw from the file after close: (mailbox, page number) for every leaf.
fn leaves_by_mailbox(
    backend: &dyn IoBackend,
    path: &std::path::Path,
    page_size: usize,
) -> Vec<(u32, u64)> {
    let file = backend.open(path, &OpenOptions::read_only()).unwrap();
    let pages = file.size().unwrap() / page_size as u64;
    let mut buf = vec![0u8; page_size];
    let mut leaves = Vec::new();
    for number in 3..pages {
        file.read_at(&mut buf, number * page_size as u64, IoClass::DbRead)
            .unwrap();
        if jetproof_engine::page::page_type(&buf) == Some(jetproof_engine::page::PageType::Leaf)
            && jetproof_engine::node::count(&buf) > 0
        {
            let (key, _) = jetproof_engine::node::leaf_entry(&buf, 0).unwrap();
            leaves.push((u32::from_be_bytes(key[..4].try_into().unwrap()), number));
        }
    }
    leaves
}

/// `end_extent` between mailboxes (as `init` calls it): each mailbox's first leaf starts an
/// owned extent, the rest of the previous one is left free (and marked free), the tree checks and
/// reads back; and a mailbox's later splits take the free pages of its own last extent, so its
/// new leaves sit next to its own pages, not at the end of the file after other mailboxes'.
#[test]
fn mailboxes_start_owned_extents_and_grow_into_their_own_free_pages() {
    let (backend, path) = mem();
    let page_size = 32768;
    let mut db = Database::create(backend.as_ref(), path, small_options(page_size, 64)).unwrap();
    let value = vec![7u8; 2400];
    let mailbox_key = |mailbox: u32, item: u32| {
        let mut key = mailbox.to_be_bytes().to_vec();
        key.extend_from_slice(&item.to_be_bytes());
        key
    };
    let mailboxes = 6u32;
    let items = 40u32; // ~4 leaves of 10 records at 80% density: 12 pages of each extent free
    {
        let mut loader = db.bulk_load().unwrap().with_density(80);
        for mailbox in 0..mailboxes {
            loader.end_extent().unwrap();
            for item in 0..items {
                loader.append(&mailbox_key(mailbox, item), &value).unwrap();
            }
        }
        loader.finish().unwrap();
    }
    let loaded = db.check().unwrap();
    assert_eq!(loaded.records, u64::from(mailboxes * items));
    let used = db.used_pages();
    assert!(
        db.page_count() >= used + 5 * 8,
        "the extents' free rests are free: {used} used of {}",
        db.page_count()
    );
    // Each mailbox appends 60 more items at its tail, round robin, as the workload does.
    for item in items..items + 60 {
        for mailbox in 0..mailboxes {
            assert!(db.insert(&mailbox_key(mailbox, item), &value).unwrap());
        }
    }
    let after = db.check().unwrap();
    assert_eq!(after.records, u64::from(mailboxes * (items + 60)));
    for mailbox in 0..mailboxes {
        for item in [0, items - 1, items + 59] {
            assert_eq!(
                db.get(&mailbox_key(mailbox, item)).unwrap().as_deref(),
                Some(&value[..])
            );
        }
    }
    db.close().unwrap();
    verify_file(backend.as_ref(), path, "owned extents");
    let leaves = leaves_by_mailbox(backend.as_ref(), path, page_size);
    let first_leaf = |mailbox: u32| {
        leaves
            .iter()
            .filter(|(m, _)| *m == mailbox)
            .map(|(_, p)| *p)
            .min()
            .unwrap()
    };
    for mailbox in 1..mailboxes {
        assert_eq!(
            first_leaf(mailbox) % 16,
            0,
            "mailbox {mailbox} starts an extent: {leaves:?}"
        );
    }
    // Every mailbox's leaves come in runs of its own: walking the leaves in page order, the
    // owner changes at most once per 16-page extent (never page by page, as when every split
    // took the next page at the end of the file).
    let mut by_page = leaves.clone();
    by_page.sort_by_key(|(_, p)| *p);
    let changes = by_page.windows(2).filter(|w| w[0].0 != w[1].0).count() as u64;
    let extents = db_pages(&by_page) / 16 + 1;
    assert!(
        changes <= extents,
        "{changes} owner changes over {extents} extents: {by_page:?}"
    );
}

fn db_pages(leaves: &[(u32, u64)]) -> u64 {
    leaves.iter().map(|(_, p)| *p).max().unwrap_or(0)
}

/// `with_long_values`: the share of the pages laid down is long-value pages (type 6, tree 2,
/// bodies the filler's, in whole runs), each sealed and counted used; the record tree checks,
/// reads back and stays usable, and no long-value page is handed out by later growth.
#[test]
fn long_value_pages_take_their_share_and_leave_the_tree_usable() {
    use jetproof_engine::bulk::{LONG_VALUE_RUN_PAGES, LONG_VALUE_TREE_ID};
    use jetproof_engine::page::{self, PageType};
    let (backend, path) = mem();
    let page_size = 32768;
    let options = small_options(page_size, 64);
    let mut db = Database::create(backend.as_ref(), path, options.clone()).unwrap();
    let value = vec![5u8; 2400];
    let records = 4000u64;
    let mut filled = 0u8;
    {
        let mut loader = db.bulk_load().unwrap().with_long_values(
            0.75,
            Box::new(move |body: &mut [u8]| {
                filled = filled.wrapping_add(1);
                body.fill(filled | 0x80);
            }),
        );
        for n in 0..records {
            loader.append(&key(n), &value).unwrap();
        }
        assert!(loader.long_value_pages() > 0);
        assert_eq!(loader.long_value_pages() % LONG_VALUE_RUN_PAGES as u64, 0);
        loader.finish().unwrap();
    }
    let stats = db.check().unwrap();
    assert_eq!(stats.records, records);
    db.close().unwrap();
    verify_file(backend.as_ref(), path, "long values");

    let file = backend.open(path, &OpenOptions::read_only()).unwrap();
    let pages = file.size().unwrap() / page_size as u64;
    let mut buf = vec![0u8; page_size];
    let mut long_values = 0u64;
    for number in 4..pages {
        file.read_at(&mut buf, number * page_size as u64, IoClass::DbRead)
            .unwrap();
        if page::page_type(&buf) == Some(PageType::LongValue) {
            long_values += 1;
            assert_eq!(
                page::get_u32(&buf, page::OFFSET_TREE),
                Some(LONG_VALUE_TREE_ID)
            );
            let body = &buf[page::HEADER_SIZE..];
            assert!(body.iter().all(|b| *b == body[0] && *b & 0x80 != 0));
        }
    }
    drop(file);
    let share = long_values as f64 / (pages - 4) as f64;
    assert!(
        (0.70..=0.76).contains(&share),
        "{long_values} of {pages}: {share}"
    );
    // Used pages: headers, maps, tree pages and the long values.
    let db = Database::open(backend.as_ref(), path, options).unwrap();
    let map_pages = db.page_count().div_ceil(((page_size - 80) * 8) as u64);
    assert_eq!(
        db.used_pages(),
        2 + map_pages + stats.leaf_pages + stats.interior_pages + long_values
    );
    // Growth never hands out a long-value page: inserts keep them all.
    for n in records..records + 2000 {
        db.insert(&key(n), &value).unwrap();
    }
    db.check().unwrap();
    db.close().unwrap();
    let file = backend.open(path, &OpenOptions::read_only()).unwrap();
    let mut after = 0u64;
    for number in 4..file.size().unwrap() / page_size as u64 {
        file.read_at(&mut buf, number * page_size as u64, IoClass::DbRead)
            .unwrap();
        after += u64::from(page::page_type(&buf) == Some(PageType::LongValue));
    }
    assert_eq!(after, long_values);
}
