//! Read-ahead during redo recovery (`jetproof_instance::recovery::ReplayOptions`): the replay's
//! reader threads read pages before the records that need them are redone, with several reads in
//! flight, and the recovered database is byte for byte the one a replay without read-ahead gives.
//!
//! Each case is a seeded run on the fault backend whose checkpoint never moves (every record is
//! replayed), with a small cache (pages are evicted during the run, so the replay reads many),
//! every page flushed and synced now and then (so the replay skips some records and applies
//! others), a transaction left open, and a power loss keeping only synced data. Randomized
//! tests print their seed; replay one with `JETPROOF_SEED=<seed>`.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use jetproof_instance::recovery::{ReplayOptions, recover_with};
use jetproof_instance::{Instance, InstanceOptions, RecoveryReport};
use jetproof_io::fault::{CrashMode, FaultBackend, FaultConfig};
use jetproof_io::{IoBackend, IoClass, IoError, IoFile, OpenOptions};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

mod common;

const DB: &str = "/ra/db.jpdb";
const LOGS: &str = "/ra/logs";

fn options() -> InstanceOptions {
    InstanceOptions {
        // The checkpoint stays at the log's start: the replay covers the whole run.
        checkpoint_depth_bytes: 1 << 40,
        ..common::small_options(2048, 16, 24)
    }
}

/// A seeded run, crashed keeping only synced data; returns the crashed backend.
fn crashed_run(seed: u64) -> Arc<FaultBackend> {
    let mut rng = StdRng::seed_from_u64(seed);
    let backend = FaultBackend::new(FaultConfig {
        seed,
        ..FaultConfig::default()
    });
    let (db, logs) = (Path::new(DB), Path::new(LOGS));
    Instance::create(backend.clone(), db, logs, options())
        .unwrap()
        .close()
        .unwrap();
    let instance = Instance::open(backend.clone(), db, logs, options()).unwrap();
    let mut model = BTreeMap::new();
    let keys = rng.random_range(300..1500u64);
    for _ in 0..rng.random_range(600..1200u32) {
        common::random_change(&instance, &mut rng, keys, &mut model);
        if rng.random_bool(0.4) {
            instance.commit(rng.random_bool(0.7)).unwrap();
        }
        // Now and then every page reaches the disk: the replay finds those changes already on
        // their pages and skips them.
        if rng.random_bool(0.01) {
            instance.database().flush().unwrap();
        }
    }
    instance.insert(b"~last", b"durable").unwrap();
    instance.commit(false).unwrap().unwrap();
    // A transaction left open: recovery takes it back.
    instance.begin();
    for n in 0..rng.random_range(1..10u32) {
        instance
            .insert(format!("~u{n:03}").as_bytes(), b"open")
            .unwrap();
    }
    instance.log().flush().unwrap();
    let crashed = backend.crash(CrashMode::SyncedOnly);
    std::mem::forget(instance);
    crashed
}

fn copy(from: &Arc<FaultBackend>, seed: u64) -> Arc<FaultBackend> {
    common::copy_instance_files(from, seed, Path::new(DB), Path::new(LOGS))
}

fn recover_on(backend: Arc<dyn IoBackend>, replay: &ReplayOptions) -> RecoveryReport {
    recover_with(backend, Path::new(DB), Path::new(LOGS), &options(), replay).unwrap()
}

/// The recovered database's content, checked (invariants, no key of the open transaction).
fn content(seed: u64, backend: &Arc<FaultBackend>) -> Vec<(Vec<u8>, Vec<u8>)> {
    let instance = Instance::open(backend.clone(), Path::new(DB), Path::new(LOGS), options())
        .unwrap_or_else(|e| panic!("seed {seed}: open after recovery: {e}"));
    instance
        .database()
        .check()
        .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
    let content = instance.scan(b"", usize::MAX).unwrap();
    assert!(
        !content.iter().any(|(k, _)| k.starts_with(b"~u")),
        "seed {seed}: the open transaction survived recovery"
    );
    assert!(
        content.iter().any(|(k, _)| k == b"~last"),
        "seed {seed}: the last durable commit is missing"
    );
    instance.close().unwrap();
    content
}

/// A backend whose database page reads (class `DbRead`) take a millisecond and are counted,
/// with the most that were in flight at once.
#[derive(Debug)]
struct SlowReads {
    inner: Arc<FaultBackend>,
    now: Arc<AtomicUsize>,
    most: Arc<AtomicUsize>,
}

#[derive(Debug)]
struct SlowFile {
    inner: Arc<dyn IoFile>,
    now: Arc<AtomicUsize>,
    most: Arc<AtomicUsize>,
}

impl IoFile for SlowFile {
    fn path(&self) -> &Path {
        self.inner.path()
    }
    fn read_at(&self, buf: &mut [u8], offset: u64, class: IoClass) -> Result<(), IoError> {
        if class != IoClass::DbRead {
            return self.inner.read_at(buf, offset, class);
        }
        let now = self.now.fetch_add(1, Ordering::SeqCst) + 1;
        self.most.fetch_max(now, Ordering::SeqCst);
        std::thread::sleep(Duration::from_millis(1));
        let result = self.inner.read_at(buf, offset, class);
        self.now.fetch_sub(1, Ordering::SeqCst);
        result
    }
    fn write_at(&self, data: &[u8], offset: u64, class: IoClass) -> Result<(), IoError> {
        self.inner.write_at(data, offset, class)
    }
    fn sync_data(&self, class: IoClass) -> Result<(), IoError> {
        self.inner.sync_data(class)
    }
    fn size(&self) -> Result<u64, IoError> {
        self.inner.size()
    }
    fn set_size(&self, size: u64) -> Result<(), IoError> {
        self.inner.set_size(size)
    }
    fn logical_block_size(&self) -> usize {
        self.inner.logical_block_size()
    }
}

impl IoBackend for SlowReads {
    fn name(&self) -> &'static str {
        "slow-reads"
    }
    fn open(&self, path: &Path, options: &OpenOptions) -> Result<Arc<dyn IoFile>, IoError> {
        Ok(Arc::new(SlowFile {
            inner: self.inner.open(path, options)?,
            now: self.now.clone(),
            most: self.most.clone(),
        }))
    }
    fn exists(&self, path: &Path) -> bool {
        self.inner.exists(path)
    }
    fn remove(&self, path: &Path) -> Result<(), IoError> {
        self.inner.remove(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> Result<(), IoError> {
        self.inner.rename(from, to)
    }
    fn sync_dir(&self, dir: &Path) -> Result<(), IoError> {
        self.inner.sync_dir(dir)
    }
    fn create_dir_all(&self, dir: &Path) -> Result<(), IoError> {
        self.inner.create_dir_all(dir)
    }
}

/// Recovers `backend` through [`SlowReads`]; returns the report and the most page reads that
/// were in flight at once.
fn recover_slowly(backend: &Arc<FaultBackend>, replay: &ReplayOptions) -> (RecoveryReport, usize) {
    let most = Arc::new(AtomicUsize::new(0));
    let slow = Arc::new(SlowReads {
        inner: backend.clone(),
        now: Arc::new(AtomicUsize::new(0)),
        most: most.clone(),
    });
    let report = recover_on(slow, replay);
    (report, most.load(Ordering::SeqCst))
}

/// With read-ahead, pages are read by the reader threads before the replay needs them, several
/// at once; the replay reads itself only the pages it found no read-ahead for. Without it, every
/// page is read by the replay, one at a time. Every page needed is read once either way (the
/// replay keeps every page here), so the reads split differently but add up to the same.
#[test]
fn the_replay_reads_pages_ahead_with_several_reads_in_flight() {
    let seed = common::seed("the_replay_reads_pages_ahead_with_several_reads_in_flight");
    let crashed = crashed_run(seed);
    let twin = copy(&crashed, seed);

    let (plain, plain_most) = recover_slowly(&twin, &ReplayOptions::without_read_ahead());
    eprintln!("seed {seed}: without read-ahead: {plain:?}, at most {plain_most} reads at once");
    let (ahead, ahead_most) = recover_slowly(&crashed, &ReplayOptions::default());
    eprintln!("seed {seed}: with read-ahead: {ahead:?}, at most {ahead_most} reads at once");

    assert!(
        plain.pages_read >= 20,
        "seed {seed}: the replay read too few pages for the test to mean anything: {plain:?}"
    );
    assert_eq!(plain.pages_read_ahead, 0, "seed {seed}");
    assert_eq!(
        plain_most, 1,
        "seed {seed}: reads overlapped without read-ahead"
    );
    assert!(
        ahead.pages_read_ahead > ahead.pages_read,
        "seed {seed}: most pages should be read ahead: {ahead:?}"
    );
    assert!(
        ahead_most >= 2,
        "seed {seed}: read-ahead never had two reads in flight ({ahead_most})"
    );
    assert_eq!(
        ahead.pages_read + ahead.pages_read_ahead,
        plain.pages_read,
        "seed {seed}: each page needed is read once with or without read-ahead"
    );
    assert_eq!(ahead.records_applied, plain.records_applied, "seed {seed}");
    assert_eq!(ahead.records_skipped, plain.records_skipped, "seed {seed}");
}

/// Recovery with read-ahead gives the same database, byte for byte, as recovery without it,
/// also when the replay keeps few pages (so it writes and forgets them while reads ahead are
/// under way) and with shallow and deep read-ahead.
#[test]
fn read_ahead_gives_the_same_database_as_a_replay_without_it() {
    let seed = common::seed("read_ahead_gives_the_same_database_as_a_replay_without_it");
    let variants = [
        ReplayOptions::default(),
        ReplayOptions {
            read_ahead_depth: 1,
            read_ahead_readers: 1,
            ..ReplayOptions::default()
        },
        ReplayOptions {
            read_ahead_depth: 3,
            read_ahead_readers: 2,
            page_map_min: 12,
        },
        ReplayOptions {
            read_ahead_depth: 64,
            read_ahead_readers: 8,
            page_map_min: 8,
        },
    ];
    for (round, replay) in variants.iter().enumerate() {
        let seed = seed.wrapping_add(round as u64);
        let crashed = crashed_run(seed);
        let twin = copy(&crashed, seed);
        let plain = recover_on(
            twin.clone(),
            &ReplayOptions {
                page_map_min: replay.page_map_min,
                ..ReplayOptions::without_read_ahead()
            },
        );
        let ahead = recover_on(crashed.clone(), replay);
        eprintln!("seed {seed}: {replay:?}: {ahead:?}");
        assert!(
            ahead.pages_read_ahead > 0,
            "seed {seed}: {replay:?}: nothing was read ahead"
        );
        assert_eq!(ahead.records_applied, plain.records_applied, "seed {seed}");
        assert_eq!(ahead.records_skipped, plain.records_skipped, "seed {seed}");
        assert_eq!(ahead.pages_written, plain.pages_written, "seed {seed}");
        assert_eq!(
            ahead.transactions_rolled_back, plain.transactions_rolled_back,
            "seed {seed}"
        );
        let (a, b) = (
            crashed.current_contents(Path::new(DB)).unwrap(),
            twin.current_contents(Path::new(DB)).unwrap(),
        );
        assert_eq!(
            a.len(),
            b.len(),
            "seed {seed}: {replay:?}: file sizes differ"
        );
        // How often the replay wrote a page depends on when it ran out of room (pages read ahead
        // count against it), and each write counts in the page's write count (the flush map's,
        // header bytes 38..40, under the checksum): compare the pages without both.
        let content_of = |page: &[u8]| {
            let mut page = page.to_vec();
            page[..32].fill(0);
            page[38..40].fill(0);
            page
        };
        let first_difference = a
            .chunks(common::PAGE)
            .zip(b.chunks(common::PAGE))
            .position(|(x, y)| content_of(x) != content_of(y));
        assert_eq!(
            first_difference, None,
            "seed {seed}: {replay:?}: the databases differ (first differing page shown)"
        );
        assert_eq!(content(seed, &crashed), content(seed, &twin), "seed {seed}");
    }
}
