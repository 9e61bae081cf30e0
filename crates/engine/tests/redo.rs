//! The change log is enough to redo: every page change reported to a `ChangeLog`, replayed with
//! `change::redo` over the file as a crash left it (some pages flushed, others not, at random
//! points), gives back exactly the records of the model. This is the engine's half of crash
//! recovery (issue 3 adds the log files, commits and undo).
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use common::{seed, small_options};
use jetproof_engine::change::{self, ChangeLog, OwnedPageChange, PageChange};
use jetproof_engine::{Database, checksum, page};
use jetproof_io::mem::MemBackend;
use jetproof_io::{IoBackend, IoClass, OpenOptions};
use parking_lot::Mutex;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

#[derive(Debug, Default)]
struct Recorder {
    next: AtomicU64,
    records: Mutex<Vec<(u32, u64, u64, OwnedPageChange)>>,
}

impl ChangeLog for Recorder {
    fn record(
        &self,
        page: u32,
        update_stamp: u64,
        change: &PageChange<'_>,
    ) -> jetproof_engine::error::Result<u64> {
        let position = self.next.fetch_add(1, Ordering::Relaxed) + 1;
        self.records
            .lock()
            .push((page, update_stamp, position, change.to_owned_change()));
        Ok(position)
    }
}

/// Content for the bytes that hold nothing (issue 33): never zero, so a redo that depended on
/// free space being zeros would go wrong.
#[derive(Debug)]
struct Ones;

impl jetproof_engine::PageContent for Ones {
    fn fill_free(&self, page: u32, offset: usize, out: &mut [u8]) {
        for (i, byte) in out.iter_mut().enumerate() {
            *byte = ((page as usize + offset + i) % 255) as u8 + 1;
        }
    }
}

fn run(page_size: usize, seed: u64) {
    run_with(page_size, seed, None);
}

/// `content`: what the live database writes where its pages hold nothing; redo (which knows
/// nothing of it) must rebuild the records all the same.
fn run_with(page_size: usize, seed: u64, content: Option<Arc<dyn jetproof_engine::PageContent>>) {
    let mut rng = StdRng::seed_from_u64(seed);
    let backend = MemBackend::new();
    let path = Path::new("/r/db.jpdb");
    let options = jetproof_engine::DatabaseOptions {
        content,
        ..small_options(page_size, 20)
    };
    Database::create(backend.as_ref(), path, options.clone())
        .unwrap()
        .close()
        .unwrap();
    let db = Database::open(backend.as_ref(), path, options.clone()).unwrap();
    let recorder = Arc::new(Recorder::default());
    db.set_change_log(recorder.clone());
    // Value and whether the record is marked deleted (flag delete).
    let mut model: BTreeMap<Vec<u8>, (Vec<u8>, bool)> = BTreeMap::new();
    let max = db.max_record_bytes() - 8;
    for _ in 0..1500 {
        let key = rng.random_range(0..400u64).to_be_bytes().to_vec();
        let len = if rng.random_bool(0.2) {
            rng.random_range(max / 2..max)
        } else {
            rng.random_range(1..max / 6)
        };
        let value = vec![rng.random::<u8>(); len];
        match rng.random_range(0..12) {
            0..5 => {
                if db.insert(&key, &value).unwrap() {
                    model.insert(key, (value, false));
                }
            }
            5..7 => {
                if db.delete(&key).unwrap() {
                    model.remove(&key);
                }
            }
            7 => {
                if db.mark_deleted(&key).unwrap()
                    && let Some(entry) = model.get_mut(&key)
                {
                    entry.1 = true;
                }
            }
            8 => {
                if db.unmark(&key).unwrap()
                    && let Some(entry) = model.get_mut(&key)
                {
                    entry.1 = false;
                }
            }
            9 => {
                if db.purge(&key).unwrap() {
                    model.remove(&key);
                }
            }
            _ => {
                let value = match model.get(&key) {
                    Some((old, _)) if rng.random_bool(0.5) => vec![rng.random(); old.len()],
                    _ => value,
                };
                if db.replace(&key, &value).unwrap() {
                    model.insert(key, (value, false));
                }
            }
        }
    }
    // The crash: the file as it is, with whatever the cache had written so far.
    let file = backend
        .open(path, &OpenOptions::read_only().buffered())
        .unwrap();
    let mut image = vec![0u8; file.size().unwrap() as usize];
    file.read_at(&mut image, 0, IoClass::DbRead).unwrap();
    let stats = db.cache_stats();
    drop(db);
    assert!(
        stats.pages_written > 0,
        "seed {seed}: the run should flush some pages"
    );

    // Redo every change over the crashed image, then seal what changed.
    let records = recorder.records.lock().clone();
    let mut touched = std::collections::BTreeSet::new();
    let mut applied = 0;
    let mut max_stamp = 0;
    for (page_number, stamp, position, change) in &records {
        let at = *page_number as usize * page_size;
        let bytes = &mut image[at..at + page_size];
        if change::redo(bytes, *stamp, *position, &change.as_change())
            .unwrap_or_else(|e| panic!("seed {seed}: page {page_number}: {e}"))
        {
            applied += 1;
            touched.insert(*page_number);
        }
        max_stamp = max_stamp.max(*stamp);
    }
    assert!(
        applied > 0 && applied < records.len(),
        "seed {seed}: {applied} of {}",
        records.len()
    );
    for &number in &touched {
        let at = number as usize * page_size;
        checksum::seal(&mut image[at..at + page_size]);
        assert_eq!(page::page_number(&image[at..at + page_size]), Some(number));
    }
    let recovered = MemBackend::new();
    let out = recovered
        .open(path, &OpenOptions::create().buffered())
        .unwrap();
    out.write_at(&image, 0, IoClass::DbWrite).unwrap();

    let mut dirty_ok = options.clone();
    dirty_ok.accept_dirty = true;
    let db = Database::open(recovered.as_ref(), path, dirty_ok).unwrap();
    db.advance_update_stamp(max_stamp);
    let stats = db.check().unwrap_or_else(|e| panic!("seed {seed}: {e}"));
    let marked = model.values().filter(|(_, marked)| *marked).count();
    let model: BTreeMap<Vec<u8>, Vec<u8>> = model
        .into_iter()
        .filter(|(_, (_, marked))| !marked)
        .map(|(k, (v, _))| (k, v))
        .collect();
    assert_eq!(stats.records, model.len() as u64, "seed {seed}");
    assert_eq!(stats.marked_records, marked as u64, "seed {seed}");
    assert!(marked > 0, "seed {seed}: no record left marked deleted");
    let all = db.scan(b"", usize::MAX).unwrap();
    assert!(
        all.into_iter().eq(model.clone()),
        "seed {seed}: content differs after redo"
    );
    // The recovered database works on: more changes, a clean close, a normal open.
    db.insert(b"after-recovery", b"yes").unwrap();
    db.close().unwrap();
    let db = Database::open(recovered.as_ref(), path, options).unwrap();
    assert_eq!(db.get(b"after-recovery").unwrap(), Some(b"yes".to_vec()));
    assert_eq!(db.check().unwrap().records, model.len() as u64 + 1);
    db.close().unwrap();
}

#[test]
fn redo_4k() {
    run(4096, seed("redo_4k"));
}

#[test]
fn redo_32k() {
    run(32768, seed("redo_32k"));
}

/// The live database's freed space and free pages hold content, not zeros: redo does not
/// depend on them (it rebuilds nodes from their records, images from the log).
#[test]
fn redo_with_content_in_the_free_space() {
    for page_size in [4096, 32768] {
        run_with(page_size, seed("redo_with_content"), Some(Arc::new(Ones)));
    }
}

/// Many sessions at once: each page's changes reach the log in the order they were made (they
/// are reported under the page's exclusive latch), so redo still rebuilds the crashed file.
#[test]
fn redo_after_concurrent_sessions() {
    let seed = seed("redo_after_concurrent_sessions");
    let page_size = 8192;
    let backend = MemBackend::new();
    let path = Path::new("/r/db.jpdb");
    let mut options = small_options(page_size, 32);
    options.flush_thread = true;
    Database::create(backend.as_ref(), path, options.clone())
        .unwrap()
        .close()
        .unwrap();
    let db = Arc::new(Database::open(backend.as_ref(), path, options.clone()).unwrap());
    let recorder = Arc::new(Recorder::default());
    db.set_change_log(recorder.clone());
    let max = db.max_record_bytes() / 3;
    let threads: Vec<_> = (0..4u64)
        .map(|thread| {
            let db = db.clone();
            std::thread::spawn(move || {
                let mut rng = StdRng::seed_from_u64(seed ^ thread);
                let mut model = BTreeMap::new();
                for _ in 0..800 {
                    let key = (rng.random_range(0..300u64) * 4 + thread)
                        .to_be_bytes()
                        .to_vec();
                    let value = vec![thread as u8; rng.random_range(1..max)];
                    if rng.random_bool(0.65) {
                        if db.insert(&key, &value).unwrap() {
                            model.insert(key, value);
                        }
                    } else if db.delete(&key).unwrap() {
                        model.remove(&key);
                    }
                }
                model
            })
        })
        .collect();
    let mut model = BTreeMap::new();
    for t in threads {
        model.extend(t.join().unwrap());
    }
    let file = backend
        .open(path, &OpenOptions::read_only().buffered())
        .unwrap();
    let mut image = vec![0u8; file.size().unwrap() as usize];
    file.read_at(&mut image, 0, IoClass::DbRead).unwrap();
    drop(db);
    let records = recorder.records.lock().clone();
    let mut max_stamp = 0;
    let mut touched = std::collections::BTreeSet::new();
    for (page_number, stamp, position, change) in &records {
        let at = *page_number as usize * page_size;
        if change::redo(
            &mut image[at..at + page_size],
            *stamp,
            *position,
            &change.as_change(),
        )
        .unwrap_or_else(|e| panic!("seed {seed}: page {page_number}: {e}"))
        {
            touched.insert(*page_number);
        }
        max_stamp = max_stamp.max(*stamp);
    }
    for &number in &touched {
        let at = number as usize * page_size;
        checksum::seal(&mut image[at..at + page_size]);
    }
    let recovered = MemBackend::new();
    recovered
        .open(path, &OpenOptions::create().buffered())
        .unwrap()
        .write_at(&image, 0, IoClass::DbWrite)
        .unwrap();
    options.accept_dirty = true;
    let db = Database::open(recovered.as_ref(), path, options).unwrap();
    db.advance_update_stamp(max_stamp);
    assert_eq!(
        db.check().unwrap().records,
        model.len() as u64,
        "seed {seed}"
    );
    let all = db.scan(b"", usize::MAX).unwrap();
    assert!(
        all.into_iter().eq(model),
        "seed {seed}: content differs after redo"
    );
}

/// A change the log refuses stops the database: memory now holds a change the log does not know.
#[test]
fn a_change_log_failure_poisons_the_database() {
    #[derive(Debug)]
    struct Refusing;
    impl ChangeLog for Refusing {
        fn record(
            &self,
            _: u32,
            _: u64,
            _: &PageChange<'_>,
        ) -> jetproof_engine::error::Result<u64> {
            Err(jetproof_engine::EngineError::InvalidOption {
                field: "log",
                reason: "log disk full (test)".into(),
            })
        }
    }
    let backend = MemBackend::new();
    let path = Path::new("/r/db.jpdb");
    let db = Database::create(backend.as_ref(), path, small_options(4096, 32)).unwrap();
    db.insert(b"a", b"1").unwrap();
    db.set_change_log(Arc::new(Refusing));
    assert!(db.insert(b"b", b"2").is_err());
    let err = db.get(b"a").unwrap_err();
    assert!(err.to_string().contains("log disk full"), "{err}");
}

/// Every kind of page change, redone in order over the pages as they were before the first
/// change, gives byte for byte (after sealing) the pages the live engine wrote: redo of a node
/// splice, an image (new right halves, freed pages), a leaf insert, replace, delete or deletion
/// mark and a map bit is exact, not merely equivalent. Random inserts (some large, so leaves split), deletes
/// (so they merge) and replaces of either size; the test checks each kind occurred.
#[test]
fn redo_over_the_pre_state_gives_the_live_bytes() {
    for (page_size, name) in [(4096, "live_bytes_4k"), (32768, "live_bytes_32k")] {
        let seed = seed(name);
        let mut rng = StdRng::seed_from_u64(seed);
        let backend = MemBackend::new();
        let path = Path::new("/r/db.jpdb");
        let options = small_options(page_size, 16);
        Database::create(backend.as_ref(), path, options.clone())
            .unwrap()
            .close()
            .unwrap();
        let read_file = || {
            let file = backend
                .open(path, &OpenOptions::read_only().buffered())
                .unwrap();
            let mut image = vec![0u8; file.size().unwrap() as usize];
            file.read_at(&mut image, 0, IoClass::DbRead).unwrap();
            image
        };
        let before = read_file();
        let db = Database::open(backend.as_ref(), path, options.clone()).unwrap();
        let recorder = Arc::new(Recorder::default());
        db.set_change_log(recorder.clone());
        let max = db.max_record_bytes() - 8;
        for step in 0..3000 {
            // Grow first, then churn: deletes outnumber inserts in the second half, so leaves
            // underflow and merge, and the tree loses levels again.
            let insert_share = if step < 1500 { 0.7 } else { 0.3 };
            let key = rng.random_range(0..600u64).to_be_bytes().to_vec();
            let len = if rng.random_bool(0.2) {
                rng.random_range(max / 2..max)
            } else {
                rng.random_range(1..max / 8)
            };
            let value = vec![rng.random::<u8>(); len];
            if rng.random_bool(insert_share) {
                // Also brings back a record marked deleted.
                db.insert(&key, &value).unwrap();
            } else if rng.random_bool(0.5) {
                db.delete(&key).unwrap();
            } else if rng.random_bool(0.4) {
                // Flag delete: marks, and the marks' undo and cleanup.
                match rng.random_range(0..3) {
                    0 => db.mark_deleted(&key).unwrap(),
                    1 => db.unmark(&key).unwrap(),
                    _ => db.purge(&key).unwrap(),
                };
            } else {
                let same_size = db
                    .get(&key)
                    .unwrap()
                    .map(|old| vec![rng.random(); old.len()]);
                let value = match same_size {
                    Some(v) if rng.random_bool(0.5) => v,
                    _ => value,
                };
                db.replace(&key, &value).unwrap();
            }
        }
        db.close().unwrap();
        let after = read_file();

        let records = recorder.records.lock().clone();
        let mut kinds = std::collections::HashSet::new();
        let mut image = before.clone();
        image.resize(after.len(), 0);
        // Pages the file grew by were formatted free (and synced) before use, unlogged.
        for number in before.len() / page_size..after.len() / page_size {
            let at = number * page_size;
            page::format_free(&mut image[at..at + page_size], number as u32);
        }
        let mut touched = std::collections::BTreeSet::new();
        for (page_number, stamp, position, change) in &records {
            kinds.insert(std::mem::discriminant(change));
            let at = *page_number as usize * page_size;
            let applied = change::redo(
                &mut image[at..at + page_size],
                *stamp,
                *position,
                &change.as_change(),
            )
            .unwrap_or_else(|e| panic!("seed {seed}: page {page_number}: {e}"));
            assert!(applied, "seed {seed}: page {page_number} already newer");
            touched.insert(*page_number);
        }
        for &number in &touched {
            let at = number as usize * page_size;
            // The write count (header bytes 38..40) counts the writes that put the page on disk
            // (the flush map's), not a change: redo does not produce it, the writer stamps it.
            let count = page::OFFSET_WRITE_COUNT;
            image[at + count..at + count + 2].copy_from_slice(&after[at + count..at + count + 2]);
            checksum::seal(&mut image[at..at + page_size]);
            let differ: Vec<usize> = (0..page_size)
                .filter(|&i| image[at + i] != after[at + i])
                .collect();
            assert!(
                differ.is_empty(),
                "seed {seed}: page {number} differs from the live page after redo at {} bytes, \
                 first {:?}; last change {:?}",
                differ.len(),
                &differ[..differ.len().min(8)],
                records
                    .iter()
                    .rev()
                    .find(|r| r.0 == number)
                    .map(|r| (r.1, r.3.clone())),
            );
        }
        let every_kind = [
            OwnedPageChange::Image(Vec::new()),
            OwnedPageChange::LeafInsert {
                index: 0,
                key: Vec::new(),
                value: Vec::new(),
            },
            OwnedPageChange::LeafReplace {
                index: 0,
                key: Vec::new(),
                value: Vec::new(),
            },
            OwnedPageChange::LeafDelete {
                index: 0,
                key: Vec::new(),
            },
            OwnedPageChange::LeafMark {
                index: 0,
                key: Vec::new(),
                deleted: true,
            },
            OwnedPageChange::NodeSplice {
                level: 0,
                keep: 0,
                at: 0,
                remove: 0,
                records: Vec::new(),
            },
            OwnedPageChange::MapBit { bit: 0, used: true },
        ];
        for kind in &every_kind {
            assert!(
                kinds.contains(&std::mem::discriminant(kind)),
                "seed {seed}: no {kind:?} in {} records",
                records.len()
            );
        }
    }
}
