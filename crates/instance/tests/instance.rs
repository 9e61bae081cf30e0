//! The instance end to end on in-memory backends: page changes and commits reach the log, a
//! durable commit is durable when it returns, the write-ahead rule holds across a simulated power
//! loss (`jetproof_io::fault`), the checkpoint advances and depth flushing bounds it, clean
//! close/open works, a crashed database is refused, and redo of the durable log over the crashed
//! file gives back every durably committed change (recovery's redo half).
//!
//! Randomized tests print their seed; replay one with `JETPROOF_SEED=<seed>`.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use jetproof_engine::change;
use jetproof_engine::{Database, checksum, page};
use jetproof_instance::format::EngineRecord;
use jetproof_instance::group;
use jetproof_instance::{Instance, InstanceError, InstanceOptions, undo};
use jetproof_io::fault::{CrashMode, FaultBackend, FaultConfig};
use jetproof_io::mem::MemBackend;
use jetproof_io::{IoBackend, IoClass, OpenOptions};
use jetproof_log::{LogReader, LogRecord, Lsn, ReadOptions};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

mod common;

const DB: &str = "/inst/db.jpdb";
const LOGS: &str = "/inst/logs";
use common::PAGE;

fn options(cache_pages: u64) -> InstanceOptions {
    // The file is large enough that the tests never grow it.
    common::small_options(1024, 16, cache_pages)
}

/// An undo or rollback record (`jetproof_instance::undo`), which the redo tests skip.
fn is_undo(record: &LogRecord) -> bool {
    record.record_type == undo::RECORD_UNDO || record.record_type == undo::RECORD_ROLLBACK
}

fn paths() -> (&'static Path, &'static Path) {
    (Path::new(DB), Path::new(LOGS))
}

/// A new instance, closed and reopened, so every page of the new file is on disk and every
/// later change is logged.
fn fresh(backend: Arc<dyn IoBackend>, options: &InstanceOptions) -> Instance {
    let (db, logs) = paths();
    Instance::create(backend.clone(), db, logs, options.clone())
        .unwrap()
        .close()
        .unwrap();
    Instance::open(backend, db, logs, options.clone()).unwrap()
}

fn read_log(backend: Arc<dyn IoBackend>) -> (Vec<LogRecord>, Option<Lsn>) {
    common::read_log(backend, Path::new(LOGS))
}

#[test]
fn a_transaction_logs_its_page_changes_and_a_commit_record() {
    let backend = MemBackend::new();
    let instance = fresh(backend.clone(), &options(64));
    let id = instance.begin();
    assert!(instance.insert(b"alpha", b"1").unwrap());
    assert!(instance.insert(b"beta", b"2").unwrap());
    assert!(instance.replace(b"alpha", b"one").unwrap());
    assert!(instance.delete(b"beta").unwrap());
    let commit = instance.commit(false).unwrap().unwrap();
    assert!(instance.log().is_durable(commit));
    // A transaction that changed nothing writes no commit record.
    assert_eq!(instance.get(b"alpha").unwrap(), Some(b"one".to_vec()));
    assert_eq!(instance.commit(false).unwrap(), None);
    instance.close().unwrap();

    let (records, _) = read_log(backend);
    // Undo records (one per key, before its first change) are checked in `tests/undo.rs`.
    let ours: Vec<_> = records
        .iter()
        .filter(|r| r.transaction_id == id && !is_undo(r))
        .collect();
    let undo_records = records
        .iter()
        .filter(|r| r.transaction_id == id && is_undo(r))
        .count();
    // Inserts of absent keys carry their undo in their own records (ESE's insert record is its
    // own undo): no undo record.
    assert_eq!(undo_records, 0, "alpha and beta were absent");
    let decoded: Vec<_> = ours
        .iter()
        .flat_map(|r| group::engine_records(r.record_type, &r.payload).unwrap())
        .collect();
    // The commit record; after it, the purge of the record the delete marked, as no
    // transaction's (id 0).
    let commit_at = decoded
        .iter()
        .position(|d| matches!(d, EngineRecord::Commit { .. }))
        .unwrap();
    let carrying_undo = decoded
        .iter()
        .filter(|d| {
            matches!(
                d,
                EngineRecord::PageChange {
                    change: jetproof_engine::OwnedPageChange::LeafInsert { .. },
                    undo: jetproof_instance::format::RecordUndo::Absent,
                    ..
                }
            )
        })
        .count();
    assert_eq!(
        carrying_undo, 2,
        "the inserts of alpha and beta carry their undo"
    );
    let page_change = |d: &EngineRecord| match d {
        EngineRecord::PageChange { change, .. } => Some(change.clone()),
        EngineRecord::Commit { .. } => None,
    };
    let changes: Vec<_> = decoded[..commit_at]
        .iter()
        .filter_map(page_change)
        .collect();
    assert_eq!(
        decoded.len(),
        commit_at + 1,
        "nothing of the transaction after its commit"
    );
    let after: Vec<_> = records
        .iter()
        .filter(|r| r.lsn > commit && r.transaction_id == 0 && !is_undo(r))
        .flat_map(|r| group::engine_records(r.record_type, &r.payload).unwrap())
        .filter_map(|d| page_change(&d))
        .collect();
    use jetproof_engine::OwnedPageChange as C;
    assert!(changes.iter().any(
        |c| matches!(c, C::LeafInsert { key, value, .. } if key == b"alpha" && value == b"1")
    ));
    assert!(changes.iter().any(
        |c| matches!(c, C::LeafReplace { key, value, .. } if key == b"alpha" && value == b"one")
    ));
    assert!(
        changes
            .iter()
            .any(|c| matches!(c, C::LeafMark { key, deleted: true, .. } if key == b"beta"))
    );
    assert!(
        matches!(&after[..], [C::LeafDelete { key, .. }] if key == b"beta"),
        "{after:?}"
    );
    assert_eq!(
        decoded[commit_at],
        EngineRecord::Commit {
            // The commit counts every record of the transaction, its undo records included.
            page_changes: (changes.len() + undo_records) as u64
        }
    );
    let commit_record = ours
        .iter()
        .find(|r| r.record_type == jetproof_instance::format::RECORD_COMMIT)
        .unwrap();
    assert_eq!(commit_record.lsn, commit);
    // Every record of the log is the engine's and decodes.
    for record in records.iter().filter(|r| !is_undo(r)) {
        group::engine_records(record.record_type, &record.payload).unwrap();
    }
}

/// Durable commits from several sessions at once are durable when they return; lazy ones become
/// durable within the lazy-flush interval without anyone waiting.
#[test]
fn durable_commits_are_durable_on_return_and_lazy_ones_soon_after() {
    let backend = MemBackend::new();
    let instance = Arc::new(fresh(backend, &options(256)));
    let threads: Vec<_> = (0..4u8)
        .map(|thread| {
            let instance = instance.clone();
            std::thread::spawn(move || {
                let mut lazy = Vec::new();
                for n in 0..200u32 {
                    let key = [&[thread][..], &n.to_be_bytes()].concat();
                    instance.insert(&key, &[thread; 100]).unwrap();
                    let is_lazy = n % 2 == 0;
                    let lsn = instance.commit(is_lazy).unwrap().unwrap();
                    if is_lazy {
                        lazy.push(lsn);
                    } else {
                        assert!(instance.log().is_durable(lsn), "durable commit at {lsn}");
                    }
                }
                lazy
            })
        })
        .collect();
    let lazy: Vec<Lsn> = threads
        .into_iter()
        .flat_map(|t| t.join().unwrap())
        .collect();
    let last = lazy.iter().max().copied().unwrap();
    let started = Instant::now();
    while !instance.log().is_durable(last) {
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "a lazy commit was not made durable by the flusher"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    let counters = instance.counters();
    assert_eq!(counters.commit_records.load(Ordering::Relaxed), 800);
    Arc::into_inner(instance).unwrap().close().unwrap();
}

#[test]
fn a_clean_close_opens_again_and_a_crash_is_refused() {
    let backend = MemBackend::new();
    let (db, logs) = paths();
    let instance = fresh(backend.clone(), &options(64));
    instance.insert(b"kept", b"yes").unwrap();
    instance.commit(true).unwrap();
    let end = {
        let log = instance.log();
        log.flush().unwrap();
        log.end_lsn()
    };
    instance.close().unwrap();
    let instance = Instance::open(backend.clone(), db, logs, options(64)).unwrap();
    let header = instance.database().header();
    assert!(header.recovery_position.generation >= end.generation);
    assert_eq!(instance.get(b"kept").unwrap(), Some(b"yes".to_vec()));
    instance.insert(b"lost?", b"uncommitted").unwrap();
    // The unclean stop: dropped without close.
    drop(instance);
    let error = Instance::open(backend, db, logs, options(64)).unwrap_err();
    assert!(
        matches!(error, InstanceError::RecoveryNeeded { .. }),
        "{error}"
    );
    let message = error.to_string();
    assert!(message.contains("needs recovery"), "{message}");
    assert!(
        message.contains("run `jetproof recover` first"),
        "{message}"
    );
}

/// `jetproof init` creates databases without a log: the first open creates one.
#[test]
fn a_database_without_a_log_gets_a_new_one_and_a_missing_log_is_refused_later() {
    let backend = MemBackend::new();
    let (db, logs) = paths();
    let opts = options(64);
    Database::create(backend.as_ref(), db, opts.database.clone())
        .unwrap()
        .close()
        .unwrap();
    let instance = Instance::open(backend.clone(), db, logs, opts.clone()).unwrap();
    instance.insert(b"a", b"b").unwrap();
    instance.commit(false).unwrap();
    instance.close().unwrap();
    Instance::open(backend.clone(), db, logs, opts.clone())
        .unwrap()
        .close()
        .unwrap();
    // The log directory was lost while the database was closed.
    let other = Path::new("/inst/elsewhere");
    let error = Instance::open(backend, db, other, opts).unwrap_err();
    assert!(
        matches!(error, InstanceError::LogMismatch { .. }),
        "{error}"
    );
}

/// The checkpoint follows the flushed pages, and whenever it falls more than the depth behind
/// the log's end the oldest pages are flushed, so after every pass it is within the depth.
/// Generations before it are deleted unless kept.
#[test]
fn the_checkpoint_advances_and_stays_within_the_depth() {
    for keep_files in [false, true] {
        let seed = common::seed("the_checkpoint_advances_and_stays_within_the_depth");
        let mut rng = StdRng::seed_from_u64(seed);
        let backend = MemBackend::new();
        let mut opts = options(512);
        opts.checkpoint_depth_bytes = 192 << 10;
        opts.keep_files = keep_files;
        let instance = fresh(backend.clone(), &opts);
        let start = instance.log().checkpoint();
        let mut previous = start;
        let mut depth_flushes = 0;
        for n in 0..1500u32 {
            let key = rng.random_range(0..3000u32).to_be_bytes();
            let value = vec![n as u8; rng.random_range(50..400)];
            if !instance.insert(&key, &value).unwrap() {
                instance.replace(&key, &value).unwrap();
            }
            instance.commit(rng.random_bool(0.7)).unwrap();
            if n % 10 == 9 {
                let report = instance.checkpoint().unwrap();
                assert!(report.checkpoint >= previous, "seed {seed}");
                assert!(
                    report.depth_bytes <= opts.checkpoint_depth_bytes,
                    "seed {seed}: checkpoint {} is {} bytes behind the log",
                    report.checkpoint,
                    report.depth_bytes
                );
                depth_flushes += u32::from(report.flushed_for_depth);
                previous = report.checkpoint;
            }
        }
        assert!(
            depth_flushes > 0,
            "seed {seed}: the depth never forced a flush"
        );
        assert!(
            previous.generation > start.generation + 2,
            "seed {seed}: {start} -> {previous}"
        );
        let first = jetproof_log::log_file_path(Path::new(LOGS), 1);
        assert_eq!(backend.exists(&first), keep_files, "seed {seed}");
        instance.close().unwrap();
    }
}

/// Checkpoint maintenance flushes the pages dirty since before the depth and no more (ESE's
/// continuous maintenance). Pages are dirtied one after another along the log, each far from
/// the others in the file (so no write coalesces a neighbour) and kept dirty while a few KiB of
/// log are written on it; after a depth pass the checkpoint is then within one page's log of the
/// depth, not well inside it (until 2026-12-03 a pass flushed down to three quarters of the
/// depth: the depth's writes came in bursts of a quarter of its pages).
#[test]
fn a_depth_pass_flushes_only_what_is_older_than_the_depth() {
    let backend = MemBackend::new();
    let mut opts = options(1024);
    opts.checkpoint_depth_bytes = 192 << 10;
    let depth = opts.checkpoint_depth_bytes;
    let instance = fresh(backend.clone(), &opts);
    let value = vec![7u8; 400];
    // About nine records a page: keys 40 apart are on pages at least three apart.
    let keys: Vec<[u8; 4]> = (0..3000u32).map(|n| n.to_be_bytes()).collect();
    for key in &keys {
        assert!(instance.insert(key, &value).unwrap());
        instance.commit(false).unwrap();
    }
    instance.log().flush().unwrap();
    instance.database().cache().flush_all().unwrap();
    instance.checkpoint().unwrap();
    let per_page_log = 10;
    let mut touched = 0;
    for key in keys.iter().step_by(40) {
        for round in 0..per_page_log {
            let changed = vec![round as u8; 400];
            assert!(instance.replace(key, &changed).unwrap());
            instance.commit(false).unwrap();
        }
        touched += 1;
    }
    instance.log().flush().unwrap();
    let written_before = instance.database().cache_stats().pages_written;
    let report = instance.checkpoint().unwrap();
    let written = instance.database().cache_stats().pages_written - written_before;
    assert!(report.flushed_for_depth, "{report:?}");
    assert!(
        report.depth_bytes <= depth && report.depth_bytes >= depth / 8 * 7,
        "after the depth pass the checkpoint is {} bytes behind the log's end: it should be \
         just inside the depth of {depth} ({written} of {touched} pages written)",
        report.depth_bytes
    );
    instance.close().unwrap();
}

/// `flush_dirty_pages` writes every page dirtied before it (well inside the depth, where a
/// checkpoint pass writes nothing) and moves the checkpoint to the log's end.
#[test]
fn flushing_the_dirty_pages_writes_them_all_and_moves_the_checkpoint() {
    let backend = MemBackend::new();
    let instance = fresh(backend.clone(), &options(1024));
    for n in 0..500u32 {
        assert!(instance.insert(&n.to_be_bytes(), &[3u8; 300]).unwrap());
        instance.commit(n % 3 == 0).unwrap();
    }
    let pass = instance.checkpoint().unwrap();
    assert!(!pass.flushed_for_depth, "{pass:?}");
    assert!(instance.database().cache_stats().dirty_pages > 10);
    let report = instance.flush_dirty_pages().unwrap();
    assert_eq!(instance.database().cache_stats().dirty_pages, 0);
    assert_eq!(
        report.checkpoint,
        instance.log().flushed_lsn(),
        "{report:?}"
    );
    instance.close().unwrap();
}

/// The background checkpointer moves the checkpoint on its own.
#[test]
fn the_background_checkpointer_advances_the_checkpoint() {
    let backend = MemBackend::new();
    let mut opts = options(512);
    opts.checkpoint_interval = Some(Duration::from_millis(5));
    opts.checkpoint_write_interval = Duration::from_millis(5);
    opts.checkpoint_depth_bytes = 128 << 10;
    let instance = fresh(backend, &opts);
    let start = instance.log().checkpoint();
    for n in 0..2000u32 {
        instance.insert(&n.to_be_bytes(), &[7; 300]).unwrap();
        instance.commit(true).unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    while instance.log().checkpoint() <= start && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(instance.log().checkpoint() > start);
    assert_eq!(instance.checkpointer_failure(), None);
    instance.close().unwrap();
}

fn fault_backend(seed: u64) -> Arc<FaultBackend> {
    FaultBackend::new(FaultConfig {
        seed,
        ..FaultConfig::default()
    })
}

/// Every page write issued before the power failed, synced or not: any of them may have reached
/// the disk, so each must be covered by the durable log.
fn written_file(before_crash: &FaultBackend) -> Vec<u8> {
    before_crash.current_contents(Path::new(DB)).unwrap()
}

/// Every page on disk after the crash carries a log position the durable log covers.
fn assert_write_ahead(seed: u64, image: &[u8], end: Lsn) -> usize {
    let mut logged_pages = 0;
    for (number, bytes) in image.chunks_exact(PAGE).enumerate().skip(2) {
        let position = page::log_position(bytes).unwrap_or(0);
        if position != 0 {
            logged_pages += 1;
            assert!(
                Lsn::from_u64(position) < end,
                "seed {seed}: page {number} on disk has log position {} but the durable log ends at {end}",
                Lsn::from_u64(position)
            );
        }
    }
    logged_pages
}

/// One session, random transactions with lazy and durable commits, a small cache (so pages are
/// written under pressure, before their transactions commit too), then power lost.
#[test]
fn the_write_ahead_rule_holds_across_a_crash() {
    let seed = common::seed("the_write_ahead_rule_holds_across_a_crash");
    let mut logged_total = 0;
    for round in 0..6u64 {
        let seed = seed.wrapping_add(round);
        let mut rng = StdRng::seed_from_u64(seed);
        let backend = fault_backend(seed);
        let instance = fresh(backend.clone(), &options(24));
        for n in 0..rng.random_range(300..900u32) {
            let key = rng.random_range(0..2000u32).to_be_bytes();
            instance
                .insert(&key, &vec![n as u8; rng.random_range(10..900)])
                .unwrap();
            if rng.random_bool(0.3) {
                instance.commit(rng.random_bool(0.8)).unwrap();
            }
        }
        let crashed = backend.crash(CrashMode::SyncedOnly);
        std::mem::forget(instance); // its handles fail from now on; nothing to close
        let (_, end) = read_log(crashed.clone());
        logged_total += assert_write_ahead(seed, &written_file(&backend), end.unwrap());
    }
    // A short round may fit in the cache; together the rounds must have written logged pages.
    assert!(
        logged_total > 0,
        "seed {seed}: no logged page reached the disk"
    );
}

/// Four sessions commit while the power fails under them.
#[test]
fn the_write_ahead_rule_holds_when_the_power_fails_mid_run() {
    let seed = common::seed("the_write_ahead_rule_holds_when_the_power_fails_mid_run");
    let backend = fault_backend(seed);
    let instance = Arc::new(fresh(backend.clone(), &options(32)));
    let stop = Arc::new(AtomicBool::new(false));
    let threads: Vec<_> = (0..4u64)
        .map(|thread| {
            let instance = instance.clone();
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut rng = StdRng::seed_from_u64(seed ^ thread);
                while !stop.load(Ordering::Relaxed) {
                    let key = (rng.random_range(0..1000u64) * 4 + thread).to_be_bytes();
                    let ok = instance
                        .insert(&key, &vec![thread as u8; rng.random_range(10..600)])
                        .and_then(|_| instance.commit(rng.random_bool(0.7)));
                    if ok.is_err() {
                        break;
                    }
                }
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(150));
    let crashed = backend.crash(CrashMode::SyncedOnly);
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        t.join().unwrap();
    }
    drop(instance);
    let (_, end) = read_log(crashed.clone());
    let logged = assert_write_ahead(seed, &written_file(&backend), end.unwrap());
    assert!(logged > 0, "seed {seed}: no logged page reached the disk");
}

/// Recovery's redo half: decoding the durable log and redoing every page change (by update
/// stamp) over the file the crash left gives back every durably committed change. The run ends
/// with a durable commit, so every transaction is committed and undo has nothing to do.
/// Replayed from the log's first record over a file holding a random subset of the unsynced
/// page writes.
#[test]
fn redo_of_the_durable_log_gives_back_every_committed_change() {
    let seed = common::seed("redo_of_the_durable_log_gives_back_every_committed_change");
    for round in 0..4u64 {
        redo_case(seed.wrapping_add(round), false);
    }
}

/// The same, replayed from the checkpoint only (as recovery will), with the checkpoint moved
/// often and a small depth forcing page flushes, over a file holding only synced writes: the
/// checkpoint must never pass a change whose page write is not durable.
#[test]
fn redo_from_the_checkpoint_gives_back_every_committed_change() {
    let seed = common::seed("redo_from_the_checkpoint_gives_back_every_committed_change");
    for round in 0..4u64 {
        redo_case(seed.wrapping_add(round), true);
    }
}

fn redo_case(seed: u64, from_checkpoint: bool) {
    let mut rng = StdRng::seed_from_u64(seed);
    let backend = fault_backend(seed);
    let mut opts = options(24);
    if from_checkpoint {
        opts.keep_files = false;
        opts.checkpoint_depth_bytes = 96 << 10;
    }
    let instance = fresh(backend.clone(), &opts);
    let first_checkpoint = instance.log().checkpoint();
    let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
    let mut committed = BTreeSet::new();
    for n in 0..rng.random_range(300..900u32) {
        common::random_change(&instance, &mut rng, 400, &mut model);
        if rng.random_bool(0.4)
            && let Some(lsn) = instance.commit(rng.random_bool(0.7)).unwrap()
        {
            committed.insert(lsn);
        }
        if from_checkpoint && n % 16 == 15 {
            instance.checkpoint().unwrap();
        }
    }
    // The last transaction commits durably (and, the log being sequential, so is every lazy
    // commit before it).
    instance.insert(b"~last", b"durable").unwrap();
    model.insert(b"~last".to_vec(), b"durable".to_vec());
    committed.insert(instance.commit(false).unwrap().unwrap());
    let checkpoint = instance.log().checkpoint();
    let crashed = if from_checkpoint {
        // Only what was synced: unsynced page writes are all lost.
        backend.crash(CrashMode::SyncedOnly)
    } else {
        // A random subset of the unsynced page writes reached the disk.
        backend.crash(CrashMode::RandomSubset)
    };
    std::mem::forget(instance);

    let mut image = crashed.durable_contents(Path::new(DB)).unwrap();
    let records = if from_checkpoint {
        assert!(
            checkpoint.generation > first_checkpoint.generation,
            "seed {seed}: the checkpoint never moved ({first_checkpoint} -> {checkpoint})"
        );
        assert!(
            !crashed.exists(&jetproof_log::log_file_path(Path::new(LOGS), 1)),
            "seed {seed}: generation 1 should be deleted"
        );
        let (mut reader, found) = LogReader::from_checkpoint(
            crashed.clone(),
            Path::new(LOGS),
            None,
            ReadOptions::default(),
        )
        .unwrap();
        assert_eq!(found.checkpoint.lsn, checkpoint, "seed {seed}");
        let mut records = Vec::new();
        while let Some(record) = reader.next_record().unwrap() {
            records.push(record);
        }
        // Commits before the checkpoint are not read again: only those after it are checked.
        committed.retain(|lsn| *lsn >= checkpoint);
        records
    } else {
        read_log(crashed).0
    };
    let mut commits_found = BTreeSet::new();
    let mut applied = 0;
    let mut max_stamp = 0;
    let mut touched = BTreeSet::new();
    for record in records.iter().filter(|r| !is_undo(r)) {
        // A structural change is one group record: its changes redone together.
        for decoded in group::engine_records(record.record_type, &record.payload).unwrap() {
            match decoded {
                EngineRecord::Commit { .. } => {
                    commits_found.insert(record.lsn);
                }
                EngineRecord::PageChange {
                    page: number,
                    update_stamp,
                    change,
                    ..
                } => {
                    let at = number as usize * PAGE;
                    let bytes = &mut image[at..at + PAGE];
                    if change::redo(
                        bytes,
                        update_stamp,
                        record.lsn.to_u64(),
                        &change.as_change(),
                    )
                    .unwrap_or_else(|e| panic!("seed {seed}: page {number}: {e}"))
                    {
                        applied += 1;
                        touched.insert(number);
                    }
                    max_stamp = max_stamp.max(update_stamp);
                }
            }
        }
    }
    assert!(
        committed.is_subset(&commits_found),
        "seed {seed}: a durable commit is missing from the log"
    );
    assert!(applied > 0, "seed {seed}: nothing to redo");
    for &number in &touched {
        let at = number as usize * PAGE;
        checksum::seal(&mut image[at..at + PAGE]);
    }
    let recovered = MemBackend::new();
    recovered
        .open(Path::new(DB), &OpenOptions::create().buffered())
        .unwrap()
        .write_at(&image, 0, IoClass::DbWrite)
        .unwrap();
    let mut dirty_ok = options(64).database;
    dirty_ok.accept_dirty = true;
    let db = Database::open(recovered.as_ref(), Path::new(DB), dirty_ok).unwrap();
    db.advance_update_stamp(max_stamp);
    let stats = db.check().unwrap_or_else(|e| panic!("seed {seed}: {e}"));
    assert_eq!(stats.records, model.len() as u64, "seed {seed}");
    assert!(
        db.scan(b"", usize::MAX).unwrap().into_iter().eq(model),
        "seed {seed}: content differs after redo"
    );
}
