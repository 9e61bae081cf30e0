//! The log's behaviour tests: commits, group commit, lazy flush timer, rollover and retention,
//! poisoning. Crash and corruption cases are in `crash.rs`. Randomised tests print their seed;
//! replay one with `JETPROOF_SEED=<seed> cargo nextest run -p jetproof-log <test>`.

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{backend, rng, seed};
use jetproof_io::IoBackend;
use jetproof_io::IoClass;
use jetproof_io::fault::CrashMode;
use jetproof_io::meter::InstanceStats;
use jetproof_log::format::DATA_START;
use jetproof_log::{
    Durability, Log, LogError, LogOptions, LogReader, LogStats, Lsn, ReadOptions, Record,
    Retention, WriteTrigger, log_file_path, verify_log_dir,
};
use rand::Rng;

fn options(dir: &Path) -> LogOptions {
    LogOptions {
        file_size_bytes: 64 << 10,
        buffer_size_bytes: 16 << 10,
        lazy_flush_interval: Duration::from_millis(2),
        ..LogOptions::new(dir, 0xD8_0000_0000_0000_0000_0000_0000_0001)
    }
}

fn payload(index: u64, size: usize) -> Vec<u8> {
    (0..size)
        .map(|byte| (index.wrapping_mul(31).wrapping_add(byte as u64 * 7) % 251) as u8)
        .collect()
}

fn read_all(backend: Arc<dyn IoBackend>, dir: &Path, from: Lsn) -> Vec<jetproof_log::LogRecord> {
    let reader = LogReader::open(backend, dir, None, from, ReadOptions::default()).expect("open");
    reader.collect::<Result<Vec<_>, _>>().expect("read")
}

#[test]
fn records_round_trip_across_generations() {
    let seed = seed("records_round_trip_across_generations");
    let mut rng = rng(seed);
    let backend = backend();
    let dir = PathBuf::from("/db/log");
    let log = Log::create(backend.clone(), options(&dir)).expect("create");
    let mut expected = Vec::new();
    for index in 0..600u64 {
        let size = rng.random_range(0..3000);
        let body = payload(index, size);
        let durability = if rng.random_bool(0.3) {
            Durability::Durable
        } else {
            Durability::Lazy
        };
        let lsn = log
            .append_and_commit(
                &Record {
                    record_type: (index % 7) as u8,
                    transaction_id: index,
                    payload: &body,
                },
                durability,
            )
            .expect("append");
        expected.push((lsn, index, body));
    }
    let last_generation = log.end_lsn().generation;
    assert!(
        last_generation > 10,
        "seed {seed}: only {last_generation} generations"
    );
    log.close().expect("close");
    let records = read_all(backend.clone(), &dir, Lsn::new(1, DATA_START));
    assert_eq!(records.len(), expected.len(), "seed {seed}");
    for (record, (lsn, index, body)) in records.iter().zip(&expected) {
        assert_eq!(record.lsn, *lsn, "seed {seed}");
        assert_eq!(record.transaction_id, *index, "seed {seed}");
        assert_eq!(record.record_type, (*index % 7) as u8, "seed {seed}");
        assert_eq!(&record.payload, body, "seed {seed}");
    }
    // Reading from the middle starts exactly at that record.
    let (middle_lsn, middle_index, _) = &expected[300];
    let tail = read_all(backend.clone(), &dir, *middle_lsn);
    assert_eq!(tail.len(), 300, "seed {seed}");
    assert_eq!(tail[0].transaction_id, *middle_index, "seed {seed}");
    let report = verify_log_dir(&*backend, &dir, None, &ReadOptions::default()).expect("verify");
    assert!(report.is_clean(), "seed {seed}: {report:#?}");
    // The next generation may have been named ahead (format version 4): not begun, empty.
    let files = report.files.len() as u64;
    assert!(
        files == last_generation || files == last_generation + 1,
        "seed {seed}: {files} files for {last_generation} generations"
    );
    for file in report.files.iter().skip(last_generation as usize) {
        assert_eq!((file.frames, file.records), (0, 0), "seed {seed}: {file:?}");
    }
    assert_eq!(
        report.files.iter().map(|file| file.records).sum::<u64>(),
        600,
        "seed {seed}"
    );
}

#[test]
fn a_record_inside_a_frame_is_not_a_start_position() {
    let backend = backend();
    let dir = PathBuf::from("/db/log");
    let log = Log::create(backend.clone(), options(&dir)).expect("create");
    let body = payload(1, 100);
    let record = Record {
        record_type: 1,
        transaction_id: 1,
        payload: &body,
    };
    let lsn = log
        .append_and_commit(&record, Durability::Durable)
        .expect("append");
    log.close().expect("close");
    let inside = Lsn::new(lsn.generation, lsn.offset + 8);
    let error = LogReader::open(backend, &dir, None, inside, ReadOptions::default())
        .expect("open")
        .next()
        .expect("an item")
        .expect_err("inside a frame");
    assert!(
        matches!(error, LogError::NotARecordBoundary { .. }),
        "{error}"
    );
}

/// A log whose writes are only its committers' own (the timer at 10 s), each sync taking
/// `sync_delay`.
fn committers_log(sync_delay: Duration, file_size: u64, buffer_size: usize) -> Arc<Log> {
    let backend = backend();
    backend.configure(|c| c.sync_latency = sync_delay);
    let dir = PathBuf::from("/db/log");
    Arc::new(
        Log::create(
            backend.clone(),
            LogOptions {
                file_size_bytes: file_size,
                buffer_size_bytes: buffer_size,
                // Keep the timer out of the way: only the committers write.
                lazy_flush_interval: Duration::from_secs(10),
                ..options(&dir)
            },
        )
        .expect("create"),
    )
}

/// `committers` threads each make `commits_each` durable commits of `payload_len(thread)` bytes
/// and check each is durable when it returns; gives the longest a commit waited.
fn commit_from_threads(
    log: &Arc<Log>,
    committers: usize,
    commits_each: usize,
    payload_len: impl Fn(usize) -> usize + Sync,
) -> Duration {
    let longest = std::sync::Mutex::new(Duration::ZERO);
    std::thread::scope(|scope| {
        for thread in 0..committers {
            let (log, longest, payload_len) = (log.clone(), &longest, &payload_len);
            scope.spawn(move || {
                for commit in 0..commits_each {
                    let body = payload((thread * 1000 + commit) as u64, payload_len(thread));
                    let record = Record {
                        record_type: 2,
                        transaction_id: (thread * 1000 + commit) as u64,
                        payload: &body,
                    };
                    let started = std::time::Instant::now();
                    let lsn = log
                        .append_and_commit(&record, Durability::Durable)
                        .expect("commit");
                    let waited = started.elapsed();
                    assert!(
                        log.flushed_lsn() > lsn,
                        "durable commit returned before its write"
                    );
                    let mut longest = longest.lock().expect("longest");
                    *longest = (*longest).max(waited);
                }
            });
        }
    });
    longest.into_inner().expect("longest")
}

fn group_commit_run(committers: usize, commits_each: usize) -> (u64, u64) {
    let log = committers_log(Duration::from_millis(2), 1 << 20, 64 << 10);
    let writes_before = LogStats::get(&log.stats().writes);
    commit_from_threads(&log, committers, commits_each, |_| 200);
    let writes = LogStats::get(&log.stats().writes) - writes_before;
    let commits = LogStats::get(&log.stats().durable_commits);
    (commits, writes)
}

#[test]
fn concurrent_durable_commits_share_log_writes() {
    let (commits, writes) = group_commit_run(1, 20);
    assert_eq!(
        (commits, writes),
        (20, 20),
        "one committer: one write per commit"
    );
    let (commits, writes) = group_commit_run(16, 20);
    assert_eq!(commits, 320);
    assert!(
        writes * 3 <= commits,
        "16 committers: {writes} log writes for {commits} durable commits; expected sharing"
    );
}

/// Many durable committers on one log with only their own writes to wake them (the timer set
/// to 10 s): each waits on the write that covers its record or on the next one, and one of the
/// next write's waiters starts it. A lost wake-up would leave a committer asleep until the
/// timer; every commit here must return well before it (and after its record is durable).
#[test]
fn every_durable_committer_is_woken_by_the_write_that_covers_it() {
    let log = committers_log(Duration::from_millis(1), 256 << 10, 32 << 10);
    let longest = commit_from_threads(&log, 48, 40, |thread| 100 + thread * 7);
    assert!(
        longest < Duration::from_secs(5),
        "a durable commit waited {longest:?}: woken by the 10 s timer, not by a log write"
    );
    let commits = LogStats::get(&log.stats().durable_commits);
    let writes = LogStats::get(&log.stats().writes);
    assert_eq!(commits, 48 * 40);
    assert!(
        writes * 2 <= commits,
        "{writes} writes for {commits} commits"
    );
    assert!(
        LogStats::get(&log.stats().generations_created) > 0,
        "the run should cross generations (rollovers among the waits)"
    );
}

/// A durable commit's writer that finds, when its write completes, durable commits waiting for
/// records it did not cover writes once more for them at once (ESE's deferred write), instead of
/// waking one of them to write: the device gets the next write without a wake-up in between.
/// Once per commit: each deferred write follows a durable commit's own write, and every other
/// next write is handed to a waiter.
#[test]
fn a_durable_commits_writer_writes_once_more_at_once_for_the_commits_that_arrived_during_it() {
    let log = committers_log(Duration::from_millis(2), 256 << 10, 32 << 10);
    let longest = commit_from_threads(&log, 16, 30, |thread| 200 + thread * 11);
    assert!(
        longest < Duration::from_secs(5),
        "a commit waited {longest:?}"
    );
    let stats = log.stats();
    let deferred = LogStats::get(&stats.deferred_writes);
    let handoffs = LogStats::get(&stats.handoffs);
    let commit_writes = stats.writes_by(WriteTrigger::DurableCommit);
    // A deferred write that ends a generation is counted as a rollover.
    let writes = LogStats::get(&stats.writes);
    assert!(
        deferred > 0,
        "16 committers on 2 ms writes: some write must find commits waiting ({commit_writes} \
         commit writes, {handoffs} hand-offs)"
    );
    assert!(
        2 * deferred <= writes,
        "{deferred} deferred writes of {writes}: a writer wrote more than once more"
    );
    // Hand-offs are timed from the completion that woke the waiter to its write.
    if handoffs > 0 {
        assert!(LogStats::get(&stats.handoff_gap_ns_total) > 0);
    }
}

#[test]
fn lazy_commits_become_durable_within_the_timer() {
    let backend = backend();
    // Slow syncs: a lazy commit that waited for a log write would take at least this long.
    backend.configure(|c| c.sync_latency = Duration::from_millis(40));
    let dir = PathBuf::from("/db/log");
    let log = Log::create(
        backend.clone(),
        LogOptions {
            lazy_flush_interval: Duration::from_millis(5),
            ..options(&dir)
        },
    )
    .expect("create");
    for round in 0..10u64 {
        let body = payload(round, 300);
        let record = Record {
            record_type: 3,
            transaction_id: round,
            payload: &body,
        };
        let started = Instant::now();
        let lsn = log
            .append_and_commit(&record, Durability::Lazy)
            .expect("lazy");
        assert!(
            started.elapsed() < Duration::from_millis(20),
            "lazy commit waited"
        );
        while log.flushed_lsn() <= lsn {
            assert!(
                started.elapsed() < Duration::from_millis(500),
                "round {round}: lazy commit not durable after 500 ms (timer 5 ms, sync 40 ms)"
            );
            std::thread::sleep(Duration::from_micros(200));
        }
    }
    // Made durable by the timer, not by a commit: nobody waited, yet every record is synced.
    assert_eq!(LogStats::get(&log.stats().durable_commits), 0);
    assert!(LogStats::get(&log.stats().writes) >= 1);
    let synced = backend.crash_copy(CrashMode::KeepPrefix { bytes: 0 });
    log.close().expect("close");
    assert_eq!(read_all(synced, &dir, Lsn::new(1, DATA_START)).len(), 10);
}

#[test]
fn log_writes_are_metered_and_sized_by_the_traffic() {
    let backend = backend();
    let dir = PathBuf::from("/db/log");
    let stats = InstanceStats::new("db1");
    let log = Log::create(
        backend.clone(),
        LogOptions {
            stats: Some(stats.clone()),
            sector_size_bytes: 512,
            ..options(&dir)
        },
    )
    .expect("create");
    let before_count = stats.class(IoClass::LogWrite).count();
    let before_bytes = stats.class(IoClass::LogWrite).bytes();
    let body = payload(9, 100);
    let record = Record {
        record_type: 1,
        transaction_id: 1,
        payload: &body,
    };
    log.append_and_commit(&record, Durability::Durable)
        .expect("commit");
    let count = stats.class(IoClass::LogWrite).count() - before_count;
    let bytes = stats.class(IoClass::LogWrite).bytes() - before_bytes;
    // One write of the record and the flush frame, rounded to one 512-byte sector. The
    // background flusher may have preformatted the spare meanwhile: not a log write, so not in
    // the class (counted in `LogStats::format_*` instead).
    assert_eq!((count, bytes), (1, 512));
    log.close().expect("close");
}

/// A durable commit's write fills the rest of its last sector (as ESE's `fLGFillPartialSector`):
/// the next record starts on a fresh sector, so no write rewrites a sector an earlier write
/// carried; the fill is counted apart from the records, and the log reads back whole after a
/// reopen. With the option off, records follow each other and the partial sector is rewritten.
#[test]
fn a_durable_commit_fills_its_last_sector_and_the_next_write_starts_on_a_fresh_one() {
    for fill in [true, false] {
        let backend = backend();
        let dir = PathBuf::from("/db/log");
        let stats = InstanceStats::new("db1");
        let options = LogOptions {
            stats: Some(stats.clone()),
            sector_size_bytes: 512,
            fill_partial_sector: fill,
            lazy_flush_interval: Duration::from_secs(60),
            ..options(&dir)
        };
        let log = Log::create(backend.clone(), options.clone()).expect("create");
        let before_bytes = stats.class(IoClass::LogWrite).bytes();
        let mut lsns = Vec::new();
        for index in 0..20u64 {
            let body = payload(index, 100 + 37 * index as usize);
            let record = Record {
                record_type: 1,
                transaction_id: index,
                payload: &body,
            };
            lsns.push(
                log.append_and_commit(&record, Durability::Durable)
                    .expect("commit"),
            );
        }
        let written = stats.class(IoClass::LogWrite).bytes() - before_bytes;
        let log_bytes = log.flushed_lsn().offset - lsns[0].offset;
        let filled = LogStats::get(&log.stats().fill_bytes);
        let on_boundary = lsns[1..].iter().filter(|l| l.offset % 512 == 0).count();
        if fill {
            assert_eq!(
                on_boundary, 19,
                "every record after a durable commit starts a sector"
            );
            assert!(filled > 0, "the fill is counted");
            // Each write carries its record once, never an earlier write's sector again.
            assert_eq!(
                written, log_bytes,
                "{written} written for {log_bytes} of log"
            );
        } else {
            assert!(
                on_boundary < 5,
                "{on_boundary} records on a boundary without fill"
            );
            assert_eq!(filled, 0);
            assert!(written > log_bytes, "the partial sector is rewritten");
        }
        log.close().expect("close");
        let (reopened, report) = Log::open(backend.clone(), options).expect("reopen");
        assert!(report.torn_tail.is_none(), "{report:#?}");
        reopened.close().expect("close");
        let (mut reader, _) =
            LogReader::from_checkpoint(backend.clone(), &dir, None, ReadOptions::default())
                .expect("reader");
        let mut read = Vec::new();
        while let Some(record) = reader.next_record().expect("read") {
            read.push(record.lsn);
        }
        assert_eq!(read, lsns, "fill {fill}: every record read back, in order");
    }
}

#[test]
fn rollover_deletes_generations_before_the_checkpoint() {
    let backend = backend();
    let dir = PathBuf::from("/db/log");
    let log = Log::create(
        backend.clone(),
        LogOptions {
            retention: Retention::DeleteBeforeCheckpoint,
            ..options(&dir)
        },
    )
    .expect("create");
    let mut checkpoint_index = 0;
    let mut lsns = Vec::new();
    for index in 0..2000u64 {
        let body = payload(index, 1500);
        let record = Record {
            record_type: 1,
            transaction_id: index,
            payload: &body,
        };
        lsns.push(
            log.append_and_commit(&record, Durability::Lazy)
                .expect("append"),
        );
        if index % 300 == 299 {
            log.flush().expect("flush");
            checkpoint_index = index as usize - 100;
            log.write_checkpoint(lsns[checkpoint_index])
                .expect("checkpoint");
        }
    }
    log.flush().expect("flush");
    let checkpoint = log.checkpoint();
    assert_eq!(checkpoint, lsns[checkpoint_index]);
    assert_eq!(log.oldest_generation(), checkpoint.generation);
    for generation in 1..checkpoint.generation {
        assert!(
            !backend.exists(&log_file_path(&dir, generation)),
            "generation {generation} kept"
        );
    }
    log.close().expect("close");
    let (reader, _) =
        LogReader::from_checkpoint(backend.clone(), &dir, None, ReadOptions::default())
            .expect("from checkpoint");
    let records = reader.collect::<Result<Vec<_>, _>>().expect("read");
    assert_eq!(records.len(), 2000 - checkpoint_index);
    assert_eq!(records[0].lsn, checkpoint);
    // A position in a deleted generation is reported as missing.
    let error = LogReader::open(backend, &dir, None, lsns[0], ReadOptions::default())
        .expect_err("deleted generation");
    assert!(
        matches!(error, LogError::MissingGeneration { generation: 1, .. }),
        "{error}"
    );
}

#[test]
fn circular_logging_reuses_old_files() {
    let backend = backend();
    let dir = PathBuf::from("/db/log");
    let log = Log::create(
        backend.clone(),
        LogOptions {
            retention: Retention::Circular,
            ..options(&dir)
        },
    )
    .expect("create");
    let mut lsns = Vec::new();
    for index in 0..3000u64 {
        let body = payload(index, 700);
        let record = Record {
            record_type: 1,
            transaction_id: index,
            payload: &body,
        };
        lsns.push(
            log.append_and_commit(&record, Durability::Lazy)
                .expect("append"),
        );
        if index % 100 == 99 {
            log.flush().expect("flush");
            log.write_checkpoint(lsns[index as usize - 50])
                .expect("checkpoint");
        }
    }
    log.close().expect("close");
    let (reader, checkpoint) =
        LogReader::from_checkpoint(backend.clone(), &dir, None, ReadOptions::default())
            .expect("from checkpoint");
    let records = reader
        .collect::<Result<Vec<_>, _>>()
        .expect("read recycled files");
    assert_eq!(records[0].lsn, checkpoint.checkpoint.lsn);
    assert_eq!(records.last().map(|r| r.transaction_id), Some(2999));
    let report = verify_log_dir(&*backend, &dir, None, &ReadOptions::default()).expect("verify");
    assert!(report.is_clean(), "{report:#?}");
    assert!(
        report.files.len() <= 4,
        "old generations were not recycled: {}",
        report.files.len()
    );
}

#[test]
fn a_failed_sync_poisons_the_log() {
    let backend = backend();
    let dir = PathBuf::from("/db/log");
    let log = Log::create(backend.clone(), options(&dir)).expect("create");
    let body = payload(1, 100);
    let record = Record {
        record_type: 1,
        transaction_id: 1,
        payload: &body,
    };
    log.append_and_commit(&record, Durability::Durable)
        .expect("first commit");
    backend.configure(|c| c.fail_syncs = true);
    let error = log
        .append_and_commit(&record, Durability::Durable)
        .expect_err("sync fails");
    assert!(matches!(error, LogError::Io(_)), "{error}");
    backend.configure(|c| c.fail_syncs = false);
    for attempt in [
        log.append(&record).map(|_| ()),
        log.commit(Lsn::new(1, DATA_START), Durability::Lazy),
        log.flush(),
        log.write_checkpoint(Lsn::new(1, DATA_START)),
    ] {
        assert!(
            matches!(attempt, Err(LogError::Poisoned { .. })),
            "{attempt:?}"
        );
    }
}

#[test]
fn a_failed_write_poisons_the_log() {
    let backend = backend();
    let dir = PathBuf::from("/db/log");
    let log = Log::create(backend.clone(), options(&dir)).expect("create");
    let body = payload(1, 100);
    let record = Record {
        record_type: 1,
        transaction_id: 1,
        payload: &body,
    };
    backend.fail_after(0);
    assert!(log.append_and_commit(&record, Durability::Durable).is_err());
    assert!(matches!(
        log.append(&record),
        Err(LogError::Poisoned { .. })
    ));
}

#[test]
fn oversized_records_and_foreign_logs_are_refused() {
    let backend = backend();
    let dir = PathBuf::from("/db/log");
    let log = Log::create(backend.clone(), options(&dir)).expect("create");
    let max = log.options().max_payload_bytes();
    let big = vec![0u8; max + 1];
    let error = log
        .append(&Record {
            record_type: 1,
            transaction_id: 1,
            payload: &big,
        })
        .expect_err("too large");
    assert!(matches!(error, LogError::RecordTooLarge { .. }), "{error}");
    let fits = vec![1u8; max];
    log.append_and_commit(
        &Record {
            record_type: 1,
            transaction_id: 1,
            payload: &fits,
        },
        Durability::Durable,
    )
    .expect("largest record fits");
    log.close().expect("close");
    assert!(matches!(
        Log::create(backend.clone(), options(&dir)),
        Err(LogError::AlreadyExists { .. })
    ));
    let mut other = options(&dir);
    other.database_id = 99;
    assert!(matches!(
        Log::open(backend, other),
        Err(LogError::WrongDatabase { .. })
    ));
}

#[test]
fn reads_are_metered_as_log_reads_in_large_sequential_reads() {
    let backend = backend();
    let dir = PathBuf::from("/db/log");
    let log = Log::create(backend.clone(), options(&dir)).expect("create");
    let body = payload(5, 2000);
    for index in 0..100 {
        log.append(&Record {
            record_type: 1,
            transaction_id: index,
            payload: &body,
        })
        .expect("append");
    }
    let generations = log.end_lsn().generation;
    log.close().expect("close");
    let stats = InstanceStats::new("replication");
    let reader = LogReader::open(
        backend.clone(),
        &dir,
        None,
        Lsn::new(1, DATA_START),
        ReadOptions {
            read_size_bytes: 32 << 10,
            class: IoClass::ReplicationRead,
            stats: Some(stats.clone()),
            ..ReadOptions::default()
        },
    )
    .expect("open");
    assert_eq!(reader.count(), 100);
    let reads = stats.class(IoClass::ReplicationRead);
    // Every generation read whole, once, in 32 KiB reads (64 KiB files: two each); the next
    // generation, if it was named ahead (not begun), only its first read.
    let whole = (generations * (64 << 10), generations * 2);
    let got = (reads.bytes(), reads.count());
    assert!(
        got == whole || got == (whole.0 + (32 << 10), whole.1 + 1),
        "{got:?} for {generations} generations"
    );
    assert_eq!(stats.class(IoClass::LogRead).count(), 0);
}

#[test]
fn no_write_runs_past_the_end_of_a_generation() {
    // Durable commits of random sizes end generations in every possible state: the space left
    // after the last write may be just enough for the generation-end frame and no more.
    let seed = seed("no_write_runs_past_the_end_of_a_generation");
    let mut rng = rng(seed);
    let backend = backend();
    let dir = PathBuf::from("/db/log");
    let log = Log::create(
        backend.clone(),
        LogOptions {
            sector_size_bytes: 512,
            ..options(&dir)
        },
    )
    .expect("create");
    let mut count = 0u64;
    while log.end_lsn().generation < 150 {
        let body = payload(count, rng.random_range(0..600));
        log.append_and_commit(
            &Record {
                record_type: 1,
                transaction_id: count,
                payload: &body,
            },
            Durability::Durable,
        )
        .expect("commit");
        count += 1;
    }
    let last = log.end_lsn().generation;
    log.close().expect("close");
    for generation in 1..=last {
        let size = backend
            .current_contents(&log_file_path(&dir, generation))
            .map(|bytes| bytes.len());
        assert_eq!(size, Some(64 << 10), "seed {seed}: generation {generation}");
    }
    assert_eq!(
        read_all(backend, &dir, Lsn::new(1, DATA_START)).len() as u64,
        count
    );
}

/// Log writes go out of the buffer itself and the buffers are swapped and reused (2026-11-22,
/// `docs/log.md` "Log write"), so a buffer holds bytes of earlier writes past the log's end.
/// Every write must still carry zeros after its last frame up to its rounded-up end (a reader
/// takes them for "nothing written"), and the rewritten partial sector the same bytes as before:
/// records of 0xFF bytes of every size, written one, two or three at a time with 512-byte
/// sectors, checked after every write, then all read back.
#[test]
fn every_write_ends_in_zeros_though_its_buffer_held_other_bytes() {
    let seed = seed("every_write_ends_in_zeros_though_its_buffer_held_other_bytes");
    let mut rng = rng(seed);
    let backend = backend();
    let dir = PathBuf::from("/db/log");
    let sector = 512u64;
    let log = Log::create(
        backend.clone(),
        LogOptions {
            sector_size_bytes: sector as usize,
            // Only this test's flushes write.
            lazy_flush_interval: Duration::from_secs(3600),
            ..options(&dir)
        },
    )
    .expect("create");
    let mut expected = Vec::new();
    for index in 0..400u64 {
        for _ in 0..rng.random_range(1..=3) {
            let body = vec![0xFF; rng.random_range(0..2500)];
            let lsn = log
                .append(&Record {
                    record_type: 1,
                    transaction_id: index,
                    payload: &body,
                })
                .expect("append");
            expected.push((lsn, body));
        }
        log.flush().expect("flush");
        let end = log.flushed_lsn();
        let bytes = backend
            .current_contents(&log_file_path(&dir, end.generation))
            .expect("generation file");
        let rounded = end.offset.div_ceil(sector) * sector;
        let tail = &bytes[end.offset as usize..rounded as usize];
        assert!(
            tail.iter().all(|&byte| byte == 0),
            "seed {seed}: write {index} left non-zero bytes after its end {end}"
        );
    }
    log.close().expect("close");
    let records = read_all(backend.clone(), &dir, Lsn::new(1, DATA_START));
    assert_eq!(records.len(), expected.len(), "seed {seed}");
    for (record, (lsn, body)) in records.iter().zip(&expected) {
        assert_eq!((record.lsn, &record.payload), (*lsn, body), "seed {seed}");
    }
    let report = verify_log_dir(&*backend, &dir, None, &ReadOptions::default()).expect("verify");
    assert!(report.is_clean(), "seed {seed}: {report:#?}");
}

/// A backend on which the spare log file (the next generation, preformatted in the background)
/// can be opened once (by `Log::create`) and never again: every other file works.
#[derive(Debug)]
struct NoSpareBackend(Arc<dyn IoBackend>, std::sync::atomic::AtomicUsize);

impl IoBackend for NoSpareBackend {
    fn name(&self) -> &'static str {
        "no-spare"
    }
    fn open(
        &self,
        path: &Path,
        options: &jetproof_io::OpenOptions,
    ) -> Result<Arc<dyn jetproof_io::IoFile>, jetproof_io::IoError> {
        if path.file_name() == jetproof_log::format::spare_path(Path::new("")).file_name()
            && self.1.fetch_add(1, std::sync::atomic::Ordering::Relaxed) >= 1
        {
            return Err(jetproof_io::IoError::Os {
                op: "open",
                path: path.to_path_buf(),
                offset: 0,
                len: 0,
                source: std::io::Error::from_raw_os_error(5),
            });
        }
        self.0.open(path, options)
    }
    fn exists(&self, path: &Path) -> bool {
        self.0.exists(path)
    }
    fn remove(&self, path: &Path) -> Result<(), jetproof_io::IoError> {
        self.0.remove(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> Result<(), jetproof_io::IoError> {
        self.0.rename(from, to)
    }
    fn sync_dir(&self, dir: &Path) -> Result<(), jetproof_io::IoError> {
        self.0.sync_dir(dir)
    }
    fn create_dir_all(&self, dir: &Path) -> Result<(), jetproof_io::IoError> {
        self.0.create_dir_all(dir)
    }
}

/// A failed background preformat of the next generation file is a storage error like any
/// other: the log stops, and the next commit says what failed and where, without waiting for
/// a rollover that needs the file (which may never come). Records fill the first generation;
/// its rollover takes the spare made at create, and the preformat of the next one fails.
#[test]
fn a_failed_preformat_of_the_next_file_stops_the_log_and_is_reported() {
    let dir = PathBuf::from("/logs");
    let backend: Arc<dyn IoBackend> = Arc::new(NoSpareBackend(
        jetproof_io::mem::MemBackend::new(),
        0.into(),
    ));
    let log = Log::create(backend, options(&dir)).expect("create");
    let started = Instant::now();
    let payload = payload(1, 1000);
    let error = loop {
        let record = Record {
            record_type: 1,
            transaction_id: 1,
            payload: &payload,
        };
        match log.append_and_commit(&record, Durability::Durable) {
            Err(error) => break error,
            Ok(_) => {
                assert!(
                    started.elapsed() < Duration::from_secs(30),
                    "the failed preformat was never reported"
                );
                std::thread::sleep(Duration::from_millis(1));
            }
        }
    };
    let message = error.to_string();
    assert!(
        message.contains("preformatting the next log file"),
        "{message}"
    );
    assert!(message.contains("Enext.jplogtmp"), "{message}");
}

/// Appends a record of `body` and commits it.
fn commit(log: &Log, body: &[u8], transaction_id: u64, durability: Durability) -> Lsn {
    let record = Record {
        record_type: 1,
        transaction_id,
        payload: body,
    };
    log.append_and_commit(&record, durability).expect("commit")
}

/// Polls until `lsn` is durable; a generous bound, not a speed check.
fn wait_until_durable(log: &Log, lsn: Lsn, what: &str) {
    let started = Instant::now();
    while log.flushed_lsn() <= lsn {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "{what}: {lsn} not durable after 20 s"
        );
        std::thread::sleep(Duration::from_micros(200));
    }
}

#[test]
fn every_log_write_is_counted_under_what_started_it() {
    let backend = backend();
    let dir = PathBuf::from("/db/log");
    let log = Log::create(
        backend.clone(),
        LogOptions {
            // Only the triggers under test write: the timer never runs out here.
            lazy_flush_interval: Duration::from_secs(3600),
            ..options(&dir)
        },
    )
    .expect("create");
    let small = payload(1, 100);
    let by = |log: &Log, trigger: WriteTrigger| log.stats().writes_by(trigger);

    commit(&log, &small, 1, Durability::Durable);
    assert_eq!(by(&log, WriteTrigger::DurableCommit), 1);

    let lsn = commit(&log, &small, 2, Durability::Lazy);
    assert!(
        !log.is_durable(lsn),
        "a small lazy commit waits for a write"
    );
    log.wait_durable(lsn).expect("write-ahead wait");
    assert_eq!(by(&log, WriteTrigger::WriteAhead), 1);

    commit(&log, &small, 3, Durability::Lazy);
    log.flush().expect("flush");
    assert_eq!(by(&log, WriteTrigger::Flush), 1);

    // Lazily appended bytes wake the background flusher once half the 16 KiB buffer waits.
    let large = payload(4, 5000);
    let lsn = commit(&log, &large, 4, Durability::Lazy);
    std::thread::sleep(Duration::from_millis(20));
    assert!(!log.is_durable(lsn), "5000 bytes are below the threshold");
    let lsn = commit(&log, &large, 5, Durability::Lazy);
    wait_until_durable(&log, lsn, "10000 lazily committed bytes");
    assert_eq!(by(&log, WriteTrigger::Capacity), 1);

    // Fill the 64 KiB generation: the write that ends it is a rollover write.
    let mut id = 6;
    while log.end_lsn().generation == 1 {
        commit(&log, &large, id, Durability::Lazy);
        id += 1;
    }
    log.flush().expect("flush");
    assert!(by(&log, WriteTrigger::Rollover) >= 1);
    assert_eq!(by(&log, WriteTrigger::LazyTimer), 0);
    let total: u64 = WriteTrigger::ALL.iter().map(|&t| by(&log, t)).sum();
    assert_eq!(total, LogStats::get(&log.stats().writes));
    log.close().expect("close");

    // A timer that runs out writes what lazy commits left behind.
    let dir = PathBuf::from("/db/log2");
    let log = Log::create(
        backend.clone(),
        LogOptions {
            lazy_flush_interval: Duration::from_millis(5),
            ..options(&dir)
        },
    )
    .expect("create");
    let lsn = commit(&log, &small, 1, Durability::Lazy);
    wait_until_durable(&log, lsn, "a lazy commit under a 5 ms timer");
    assert_eq!(by(&log, WriteTrigger::LazyTimer), 1);
    assert_eq!(LogStats::get(&log.stats().writes), 1);
    log.close().expect("close");

    // A threshold of one sector: a 5000-byte lazy commit wakes the flusher by itself.
    let dir = PathBuf::from("/db/log3");
    let sector = LogOptions {
        lazy_flush_interval: Duration::from_secs(3600),
        write_threshold_bytes: Some(4096),
        ..options(&dir)
    };
    let log = Log::create(backend.clone(), sector).expect("create");
    let lsn = commit(&log, &large, 1, Durability::Lazy);
    wait_until_durable(&log, lsn, "a 5000-byte lazy commit, 4 KiB threshold");
    assert_eq!(by(&log, WriteTrigger::Capacity), 1);
    log.close().expect("close");
    let dir = PathBuf::from("/db/log4");
    for bad in [0, (16 << 10) + 1] {
        let error = Log::create(
            backend.clone(),
            LogOptions {
                write_threshold_bytes: Some(bad),
                ..options(&dir)
            },
        )
        .expect_err("threshold outside the buffer");
        assert!(
            matches!(
                error,
                LogError::InvalidOptions {
                    field: "write_threshold_bytes",
                    ..
                }
            ),
            "{error}"
        );
    }
}

/// A log upgraded from format version 2: its older generation holds 40-byte, 8-byte aligned
/// frames, the next one (written after the upgrade) compact version 3 frames. Both read back, in
/// order, and the directory verifies clean. Built by hand: this build writes only version 3.
#[test]
fn a_version_2_generation_followed_by_a_version_3_one_reads_back() {
    use jetproof_io::OpenOptions;
    use jetproof_log::format::{
        FORMAT_VERSION, FlushInfo, FrameKind, FrameLayout, GenerationHeader, encode_frame,
        encode_legacy_frame,
    };
    let dir = PathBuf::from("/db/log");
    let database_id = 0xD8_0000_0000_0000_0000_0000_0000_0002u128;
    let backend = backend();
    let file_size = 64u64 << 10;
    // (generation, layout, records): each file ends with a flush frame; the first with a
    // generation-end frame after it.
    let mut expected = Vec::new();
    let mut previous_end = Lsn::ZERO;
    for (generation, version, records) in [(1u64, 2u32, 3u64), (2, FORMAT_VERSION, 4)] {
        let layout = FrameLayout::of_version(version);
        let mut file = vec![0u8; file_size as usize];
        GenerationHeader {
            database_id,
            generation,
            file_size_bytes: file_size,
            previous_end,
            created_unix_ms: 1,
            format_version: version,
            begun: true,
        }
        .encode(&mut file);
        let mut at = DATA_START;
        let mut put = |kind: FrameKind, record_type: u8, tx: u64, body: &[u8], at: &mut u64| {
            let size = layout.frame_bytes(body.len());
            let out = &mut file[*at as usize..(*at + size) as usize];
            let position = Lsn::new(generation, *at);
            match layout {
                FrameLayout::Legacy => {
                    encode_legacy_frame(out, kind, position, record_type, tx, body)
                }
                FrameLayout::Compact => encode_frame(out, kind, position, record_type, tx, body),
            }
            *at += size;
        };
        for n in 0..records {
            let body = payload(generation * 10 + n, 100 + n as usize * 37);
            expected.push((Lsn::new(generation, at), generation * 10 + n, body.clone()));
            put(FrameKind::Record, 1, generation * 10 + n, &body, &mut at);
        }
        let flush = FlushInfo {
            durable_before: Lsn::new(generation, DATA_START),
            write_start: DATA_START,
            write_sequence: generation,
        }
        .encode();
        put(FrameKind::Flush, 0, 0, &flush, &mut at);
        if generation == 1 {
            put(FrameKind::GenerationEnd, 0, 0, &[], &mut at);
            previous_end = Lsn::new(1, at);
        }
        let handle = backend
            .open(&log_file_path(&dir, generation), &OpenOptions::create())
            .expect("create");
        handle.write_at(&file, 0, IoClass::LogWrite).expect("write");
    }
    let read = read_all(backend.clone(), &dir, Lsn::new(1, DATA_START));
    let got: Vec<(Lsn, u64, Vec<u8>)> = read
        .into_iter()
        .map(|record| (record.lsn, record.transaction_id, record.payload))
        .collect();
    assert_eq!(got, expected);
    let report = verify_log_dir(&*backend, &dir, Some(database_id), &ReadOptions::default())
        .expect("verify");
    assert!(report.is_clean(), "{report:#?}");
    assert_eq!(report.files.len(), 2, "{report:#?}");
}
