//! Crash and corruption tests of the log: each row of the crash table in `docs/log.md` names the
//! test here that covers it. Randomised tests print their seed; replay one with
//! `JETPROOF_SEED=<seed> cargo nextest run -p jetproof-log <test>`.

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use common::{backend, rng, seed, seeded_backend};
use jetproof_io::IoBackend;
use jetproof_io::fault::{CrashMode, FaultBackend};
use jetproof_log::format::{DATA_START, GenerationHeader};
use jetproof_log::{
    Durability, FileStatus, Log, LogError, LogOptions, LogReader, Lsn, ReadOptions, Record,
    Retention, log_file_path, read_checkpoint, verify_log_dir,
};
use rand::Rng;
use rand::rngs::StdRng;

const DATABASE: u128 = 0xC0FFEE;

fn options(dir: &Path) -> LogOptions {
    LogOptions {
        file_size_bytes: 64 << 10,
        buffer_size_bytes: 16 << 10,
        lazy_flush_interval: Duration::from_millis(1),
        ..LogOptions::new(dir, DATABASE)
    }
}

/// A log that writes only when its callers do (the timer at 10 s).
fn quiet_log(backend: &Arc<FaultBackend>, dir: &Path) -> Log {
    Log::create(
        backend.clone(),
        LogOptions {
            lazy_flush_interval: Duration::from_secs(10),
            ..options(dir)
        },
    )
    .expect("create")
}

/// After a crash that left generation 2 not begun: the log reads its `records` records to the
/// end of generation 1 with no torn tail, verifies clean, and reopens in generation 2 right
/// after that end; gives the reopened log.
fn reopened_after_generation_one(crashed: &Arc<FaultBackend>, dir: &Path, records: usize) -> Log {
    let (read, summary, _) = read_from_checkpoint(crashed.clone(), dir).expect("read");
    assert_eq!(read.len(), records, "the records before the crash, no more");
    assert_eq!(summary.torn_tail, None);
    let end = summary.end.expect("end");
    assert_eq!(end.generation, 1);
    let report =
        verify_log_dir(&**crashed, dir, Some(DATABASE), &ReadOptions::default()).expect("verify");
    assert!(report.is_clean(), "{report:#?}");
    let (log, report) = Log::open(crashed.clone(), options(dir)).expect("reopen");
    assert_eq!((report.previous_end, report.generation), (end, 2));
    log
}

fn body(rng: &mut StdRng, max: usize) -> Vec<u8> {
    let size = rng.random_range(0..max);
    (0..size).map(|_| rng.random()).collect()
}

#[derive(Clone, Debug)]
struct Expected {
    lsn: Lsn,
    record_type: u8,
    transaction_id: u64,
    payload: Vec<u8>,
}

fn read_from_checkpoint(
    backend: Arc<dyn IoBackend>,
    dir: &Path,
) -> Result<(Vec<jetproof_log::LogRecord>, jetproof_log::ReadSummary, Lsn), LogError> {
    let (mut reader, checkpoint) =
        LogReader::from_checkpoint(backend, dir, Some(DATABASE), ReadOptions::default())?;
    let mut records = Vec::new();
    while let Some(record) = reader.next_record()? {
        records.push(record);
    }
    Ok((records, reader.summary().clone(), checkpoint.checkpoint.lsn))
}

/// One seeded run: several cycles of random appends and commits (durable and lazy, with the
/// background flusher writing concurrently), each ended by a power loss that keeps synced data
/// and a random part of unsynced writes (some torn). After each crash: every durably committed
/// record is read back intact, in order, and nothing after a torn point is returned.
fn crash_run(seed: u64) {
    let mut rng = rng(seed);
    let dir = PathBuf::from("/db/log");
    let retention = if rng.random_bool(0.5) {
        Retention::KeepAll
    } else {
        Retention::DeleteBeforeCheckpoint
    };
    // Half the runs fill the partial sector at durable commits (the default), half rewrite it.
    let fill_partial_sector = rng.random_bool(0.5);
    let mut backend = seeded_backend(rng.random());
    let mut log = Log::create(
        backend.clone(),
        LogOptions {
            retention,
            fill_partial_sector,
            ..options(&dir)
        },
    )
    .expect("create");
    let mut model: Vec<Expected> = Vec::new();
    let mut next_transaction = 0u64;
    for cycle in 0..3 {
        let mut must_survive = 0usize; // model[..must_survive] was durably committed
        let operations = rng.random_range(20..250);
        for _ in 0..operations {
            let payload = body(&mut rng, 2500);
            let record_type = rng.random();
            next_transaction += 1;
            let record = Record {
                record_type,
                transaction_id: next_transaction,
                payload: &payload,
            };
            let lsn = log.append(&record).expect("append");
            model.push(Expected {
                lsn,
                record_type,
                transaction_id: next_transaction,
                payload: payload.clone(),
            });
            if rng.random_bool(0.3) {
                log.commit(lsn, Durability::Durable)
                    .expect("durable commit");
                must_survive = model.len();
            } else {
                log.commit(lsn, Durability::Lazy).expect("lazy commit");
            }
            if rng.random_bool(0.03) {
                let durable = log.flushed_lsn();
                let candidates: Vec<Lsn> = model
                    .iter()
                    .map(|expected| expected.lsn)
                    .filter(|lsn| *lsn < durable && *lsn >= log.checkpoint())
                    .collect();
                if let Some(lsn) = candidates.get(rng.random_range(0..candidates.len().max(1))) {
                    log.write_checkpoint(*lsn).expect("checkpoint");
                }
            }
        }
        if rng.random_bool(0.5) {
            // Power fails during the last write: it stays unsynced and may be torn.
            backend.configure(|c| c.fail_syncs = true);
            let payload = body(&mut rng, 2500);
            next_transaction += 1;
            if let Ok(lsn) = log.append(&Record {
                record_type: 1,
                transaction_id: next_transaction,
                payload: &payload,
            }) {
                model.push(Expected {
                    lsn,
                    record_type: 1,
                    transaction_id: next_transaction,
                    payload,
                });
                assert!(log.commit(lsn, Durability::Durable).is_err(), "seed {seed}");
            }
        }
        let crashed = backend.crash_copy(CrashMode::Scattered { tear_percent: 50 });
        drop(log);

        let (records, summary, checkpoint) = read_from_checkpoint(crashed.clone(), &dir)
            .unwrap_or_else(|error| panic!("seed {seed} cycle {cycle}: read after crash: {error}"));
        let first = model.partition_point(|expected| expected.lsn < checkpoint);
        let must_survive_after_checkpoint = must_survive.saturating_sub(first);
        assert!(
            records.len() >= must_survive_after_checkpoint,
            "seed {seed} cycle {cycle}: {} records read, {} durably committed after the checkpoint",
            records.len(),
            must_survive_after_checkpoint
        );
        assert!(
            first + records.len() <= model.len(),
            "seed {seed} cycle {cycle}: more records than appended"
        );
        for (record, expected) in records.iter().zip(&model[first..]) {
            assert_eq!(record.lsn, expected.lsn, "seed {seed} cycle {cycle}");
            assert_eq!(
                record.transaction_id, expected.transaction_id,
                "seed {seed}"
            );
            assert_eq!(record.record_type, expected.record_type, "seed {seed}");
            assert!(
                record.payload == expected.payload,
                "seed {seed}: payload differs"
            );
        }
        // Lost (never acknowledged) records leave the model.
        model.truncate(first + records.len());
        let end = summary.end.expect("a finished read knows its end");
        if let Some(torn) = &summary.torn_tail {
            assert_eq!(
                torn.offset, end.offset,
                "seed {seed}: torn tail starts at the end"
            );
            assert!(torn.bytes > 0, "seed {seed}");
        }
        let report = verify_log_dir(&*crashed, &dir, Some(DATABASE), &ReadOptions::default())
            .expect("verify");
        assert!(report.is_clean(), "seed {seed} cycle {cycle}: {report:#?}");

        backend = crashed;
        backend.configure(|c| c.fail_syncs = false);
        let (reopened, open_report) = Log::open(
            backend.clone(),
            LogOptions {
                retention,
                fill_partial_sector,
                ..options(&dir)
            },
        )
        .unwrap_or_else(|error| panic!("seed {seed} cycle {cycle}: reopen: {error}"));
        assert_eq!(open_report.previous_end, end, "seed {seed} cycle {cycle}");
        assert_eq!(
            open_report.torn_tail, summary.torn_tail,
            "seed {seed} cycle {cycle}"
        );
        log = reopened;
    }
    log.close().expect("close");
    let (records, summary, checkpoint) =
        read_from_checkpoint(backend.clone(), &dir).expect("final read");
    let first = model.partition_point(|expected| expected.lsn < checkpoint);
    assert_eq!(
        records.len(),
        model.len() - first,
        "seed {seed}: final read"
    );
    assert!(
        summary.torn_tail.is_none(),
        "seed {seed}: a closed log has no torn tail"
    );
}

#[test]
fn crashes_keep_every_durable_commit() {
    let base = seed("crashes_keep_every_durable_commit");
    let runs: u64 = std::env::var("JETPROOF_CRASH_RUNS")
        .ok()
        .and_then(|runs| runs.parse().ok())
        .unwrap_or(40);
    for run in 0..runs {
        crash_run(base.wrapping_add(run));
    }
}

/// Durable commits, then a write that power loss tears; returns the backend after the crash, the
/// records that were durable and the durable end before the torn write.
fn torn_write(keep_new_bytes: u64) -> (Arc<FaultBackend>, Vec<Lsn>, Lsn) {
    let backend = backend();
    let dir = PathBuf::from("/db/log");
    let log = quiet_log(&backend, &dir);
    let payload = vec![0x5a; 1000];
    let mut durable = Vec::new();
    for index in 0..5 {
        let record = Record {
            record_type: 1,
            transaction_id: index,
            payload: &payload,
        };
        durable.push(
            log.append_and_commit(&record, Durability::Durable)
                .expect("commit"),
        );
    }
    let end = log.flushed_lsn();
    backend.configure(|c| c.fail_syncs = true);
    for index in 5..8 {
        let record = Record {
            record_type: 1,
            transaction_id: index,
            payload: &payload,
        };
        let lsn = log.append(&record).expect("append");
        if index == 7 {
            assert!(log.commit(lsn, Durability::Durable).is_err());
        }
    }
    // The write started at the sector holding `end`; keep the old part and `keep_new_bytes`.
    let crashed = backend.crash_copy(CrashMode::KeepPrefix {
        bytes: (end.offset % 4096 + keep_new_bytes) as usize,
    });
    drop(log);
    (crashed, durable, end)
}

#[test]
fn a_torn_tail_is_tolerated_and_reported() {
    let dir = PathBuf::from("/db/log");
    for keep_new_bytes in [0, 8, 100, 1500] {
        let (backend, durable, end) = torn_write(keep_new_bytes);
        let (records, summary, _) = read_from_checkpoint(backend.clone(), &dir).expect("read");
        let lsns: Vec<Lsn> = records.iter().map(|record| record.lsn).collect();
        // A whole record that survived the tear may be read; nothing torn is.
        assert!(
            lsns.starts_with(&durable),
            "keep {keep_new_bytes}: {lsns:?}"
        );
        assert!(
            records
                .iter()
                .all(|record| record.payload == vec![0x5a; 1000])
        );
        let report = verify_log_dir(&*backend, &dir, Some(DATABASE), &ReadOptions::default())
            .expect("verify");
        assert!(report.is_clean(), "{report:#?}");
        if keep_new_bytes == 0 {
            assert_eq!(lsns, durable);
            assert_eq!(
                summary.torn_tail, None,
                "nothing written after the end: no torn tail"
            );
            continue;
        }
        let torn = summary.torn_tail.clone().expect("torn tail reported");
        let read_end = summary.end.expect("end known");
        assert_eq!(torn.path, log_file_path(&dir, 1));
        assert_eq!(
            (torn.generation, torn.offset),
            (read_end.generation, read_end.offset)
        );
        // Counted up to the last non-zero byte, so trailing zero bytes of the tear are not.
        assert!(torn.bytes > 0, "keep {keep_new_bytes}: {torn:?}");
        assert!(
            torn.offset + torn.bytes <= end.offset + keep_new_bytes,
            "{torn:?}"
        );
        let record_frame = jetproof_log::format::frame_bytes(1000);
        if keep_new_bytes < record_frame {
            // Not even the first new record (1,022 bytes) is whole: the log ends where it was
            // durable.
            assert_eq!(lsns, durable, "keep {keep_new_bytes}");
            assert_eq!(torn.offset, end.offset);
        } else {
            // The first new record landed whole before the tear; it is read (it was never
            // acknowledged, so recovery treats its transaction as uncommitted).
            assert_eq!(lsns.len(), durable.len() + 1, "keep {keep_new_bytes}");
            assert_eq!(torn.offset, end.offset + record_frame);
        }
        let end = read_end;
        assert!(matches!(
            report.files[0].status,
            FileStatus::TornTail { offset, .. } if offset == end.offset
        ));

        // Reopening abandons the torn tail and continues in a new generation; the whole log then
        // reads back through the old tail.
        let (log, open_report) = Log::open(backend.clone(), options(&dir)).expect("reopen");
        assert_eq!(open_report.torn_tail, Some(torn));
        assert_eq!(open_report.generation, 2);
        let payload = vec![0x77; 10];
        let after = log
            .append_and_commit(
                &Record {
                    record_type: 2,
                    transaction_id: 99,
                    payload: &payload,
                },
                Durability::Durable,
            )
            .expect("commit after reopen");
        log.close().expect("close");
        let (records, summary, _) = read_from_checkpoint(backend.clone(), &dir).expect("read");
        assert_eq!(records.len(), lsns.len() + 1);
        assert_eq!(records.last().map(|record| record.lsn), Some(after));
        assert_eq!(summary.torn_tail, None);
        let report = verify_log_dir(&*backend, &dir, Some(DATABASE), &ReadOptions::default())
            .expect("verify");
        assert!(report.is_clean(), "{report:#?}");
    }
}

fn committed_log(
    records: u64,
    payload_bytes: usize,
    file_size_bytes: u64,
) -> (Arc<FaultBackend>, Vec<Lsn>) {
    let backend = backend();
    let dir = PathBuf::from("/db/log");
    let log = Log::create(
        backend.clone(),
        LogOptions {
            file_size_bytes,
            ..options(&dir)
        },
    )
    .expect("create");
    let payload = vec![0x33; payload_bytes];
    let lsns = (0..records)
        .map(|index| {
            log.append_and_commit(
                &Record {
                    record_type: 1,
                    transaction_id: index,
                    payload: &payload,
                },
                Durability::Durable,
            )
            .expect("commit")
        })
        .collect();
    log.close().expect("close");
    (backend, lsns)
}

#[test]
fn corruption_in_the_middle_is_an_error_with_file_and_offset() {
    let dir = PathBuf::from("/db/log");
    // A flipped payload bit, a flipped header bit, and a lost (zeroed) frame.
    for damage in 0..3 {
        let (backend, lsns) = committed_log(20, 500, 64 << 10);
        let victim = lsns[5];
        let path = log_file_path(&dir, victim.generation);
        match damage {
            0 => backend
                .flip_bit(&path, victim.offset + 100, 3)
                .expect("file to corrupt exists"),
            1 => backend
                .flip_bit(&path, victim.offset + 9, 0)
                .expect("file to corrupt exists"),
            _ => backend
                .zero_range(&path, victim.offset, victim.offset + 64)
                .expect("file to damage exists"),
        }
        let error = read_from_checkpoint(backend.clone(), &dir).expect_err("corrupt");
        match &error {
            LogError::Corrupt {
                path: at, offset, ..
            } => {
                assert_eq!(
                    (at, *offset),
                    (&path, victim.offset),
                    "damage {damage}: {error}"
                );
            }
            other => panic!("damage {damage}: expected Corrupt, got {other}"),
        }
        let report = verify_log_dir(&*backend, &dir, Some(DATABASE), &ReadOptions::default())
            .expect("verify");
        assert!(!report.is_clean());
        assert!(matches!(
            report.files[0].status,
            FileStatus::Bad { offset: Some(offset), .. } if offset == victim.offset
        ));
        assert!(matches!(
            Log::open(backend.clone(), options(&dir)),
            Err(LogError::Corrupt { .. })
        ));
    }
}

#[test]
fn corruption_at_the_end_of_a_generation_followed_by_another_is_an_error() {
    let dir = PathBuf::from("/db/log");
    let (backend, lsns) = committed_log(100, 2000, 64 << 10);
    let last_of_first = *lsns
        .iter()
        .rfind(|lsn| lsn.generation == 1)
        .expect("generation 1 has records");
    let path = log_file_path(&dir, 1);
    backend
        .flip_bit(&path, last_of_first.offset + 200, 1)
        .expect("file to corrupt exists");
    let error = read_from_checkpoint(backend.clone(), &dir).expect_err("corrupt");
    assert!(
        matches!(&error, LogError::Corrupt { path: at, offset, .. } if *at == path && *offset == last_of_first.offset),
        "{error}"
    );
}

#[test]
fn damage_to_the_last_write_alone_reads_as_a_torn_tail() {
    // Documented limit (docs/log.md): a bit flip in the very last write, which no later write
    // vouches for, is indistinguishable from a torn write. It is reported, not hidden.
    let dir = PathBuf::from("/db/log");
    let (backend, lsns) = committed_log(10, 500, 64 << 10);
    // Generation 1 ends with the close's write; damage the last record.
    let victim = *lsns.last().expect("records");
    backend
        .flip_bit(&log_file_path(&dir, 1), victim.offset + 100, 0)
        .expect("file to corrupt exists");
    let (records, summary, _) = read_from_checkpoint(backend, &dir).expect("read");
    assert_eq!(records.len(), 9);
    let torn = summary.torn_tail.expect("reported");
    assert_eq!(torn.offset, victim.offset);
}

#[test]
fn a_missing_generation_is_an_error() {
    let dir = PathBuf::from("/db/log");
    let (backend, lsns) = committed_log(100, 2000, 64 << 10);
    let last = lsns.last().expect("records").generation;
    assert!(last >= 3);
    backend.remove(&log_file_path(&dir, 2)).expect("remove");
    let error = read_from_checkpoint(backend.clone(), &dir).expect_err("gap");
    assert!(
        matches!(error, LogError::MissingGeneration { generation: 2, .. }),
        "{error}"
    );
    assert!(matches!(
        Log::open(backend.clone(), options(&dir)),
        Err(LogError::MissingGeneration { generation: 2, .. })
    ));
    let report =
        verify_log_dir(&*backend, &dir, Some(DATABASE), &ReadOptions::default()).expect("verify");
    assert!(!report.is_clean(), "{report:#?}");
    // Generation 1 is bad (the log breaks after it), 2 is reported missing, 3.. are verified.
    let statuses: Vec<(u64, bool)> = report
        .files
        .iter()
        .map(|file| {
            (
                file.generation,
                matches!(file.status, FileStatus::Bad { .. }),
            )
        })
        .collect();
    assert_eq!(
        &statuses[..3],
        &[(1, true), (2, true), (3, false)],
        "{report:#?}"
    );
    // The generation after the last may have been named ahead (not begun, empty, good).
    let files = report.files.len() as u64;
    assert!(files == last || files == last + 1, "{report:#?}");
    for file in report.files.iter().skip(last as usize) {
        assert_eq!(
            (file.frames, &file.status),
            (0, &FileStatus::Good),
            "{report:#?}"
        );
    }
}

#[test]
fn a_checkpoint_ahead_of_the_log_is_refused() {
    // The log lost data it had synced (the disk lied): the checkpoint names a position past the
    // end of what is left.
    let dir = PathBuf::from("/db/log");
    let backend = backend();
    let log = Log::create(backend.clone(), options(&dir)).expect("create");
    let payload = vec![1u8; 300];
    let mut lsns = Vec::new();
    for index in 0..10 {
        lsns.push(
            log.append_and_commit(
                &Record {
                    record_type: 1,
                    transaction_id: index,
                    payload: &payload,
                },
                Durability::Durable,
            )
            .expect("commit"),
        );
    }
    log.write_checkpoint(lsns[8]).expect("checkpoint");
    log.close().expect("close");
    let path = log_file_path(&dir, 1);
    backend
        .zero_range(&path, lsns[3].offset, 64 << 10)
        .expect("file to damage exists");
    let error = read_from_checkpoint(backend.clone(), &dir).expect_err("ahead");
    assert!(
        matches!(error, LogError::CheckpointBeyondLog { .. }),
        "{error}"
    );
    let error = Log::open(backend, options(&dir)).expect_err("ahead");
    assert!(
        matches!(error, LogError::CheckpointBeyondLog { .. }),
        "{error}"
    );
}

#[test]
fn the_checkpoint_survives_a_crash_mid_write() {
    let base = seed("the_checkpoint_survives_a_crash_mid_write");
    let dir = PathBuf::from("/db/log");
    for run in 0..30 {
        let seed = base.wrapping_add(run);
        let mut rng = rng(seed);
        let backend = seeded_backend(rng.random());
        let log = Log::create(backend.clone(), options(&dir)).expect("create");
        let payload = vec![2u8; 100];
        let mut lsns = Vec::new();
        for index in 0..rng.random_range(3..20) {
            lsns.push(
                log.append_and_commit(
                    &Record {
                        record_type: 1,
                        transaction_id: index,
                        payload: &payload,
                    },
                    Durability::Durable,
                )
                .expect("commit"),
            );
            if rng.random_bool(0.3) {
                log.write_checkpoint(*lsns.last().expect("one"))
                    .expect("checkpoint");
            }
        }
        let old = log.checkpoint();
        let new = *lsns.last().expect("records");
        backend.configure(|c| c.fail_syncs = true);
        assert!(log.write_checkpoint(new).is_err(), "seed {seed}");
        let crashed = backend.crash_copy(CrashMode::Scattered { tear_percent: 70 });
        drop(log);
        let read = read_checkpoint(&*crashed, &dir, Some(DATABASE))
            .unwrap_or_else(|error| panic!("seed {seed}: {error}"))
            .expect("checkpoint file exists");
        assert!(
            read.checkpoint.lsn == old || read.checkpoint.lsn == new,
            "seed {seed}: checkpoint {} is neither old {old} nor new {new}",
            read.checkpoint.lsn
        );
        let (records, _, _) = read_from_checkpoint(crashed, &dir)
            .unwrap_or_else(|error| panic!("seed {seed}: {error}"));
        assert_eq!(
            records.first().map(|record| record.lsn),
            Some(read.checkpoint.lsn)
        );
    }
}

#[test]
fn rollover_across_many_generations_survives_a_crash() {
    let dir = PathBuf::from("/db/log");
    let backend = backend();
    let log = Log::create(backend.clone(), options(&dir)).expect("create");
    let payload = vec![9u8; 1200];
    let mut last = Lsn::ZERO;
    for index in 0..3000u64 {
        last = log
            .append_and_commit(
                &Record {
                    record_type: 1,
                    transaction_id: index,
                    payload: &payload,
                },
                if index % 50 == 0 {
                    Durability::Durable
                } else {
                    Durability::Lazy
                },
            )
            .expect("append");
    }
    log.wait_durable(last).expect("durable");
    let crashed = backend.crash_copy(CrashMode::KeepPrefix { bytes: 0 });
    drop(log);
    assert!(last.generation > 50, "only {} generations", last.generation);
    let reader = LogReader::open(
        crashed,
        &dir,
        Some(DATABASE),
        Lsn::new(1, DATA_START),
        ReadOptions::default(),
    )
    .expect("open");
    let records = reader.collect::<Result<Vec<_>, _>>().expect("read");
    assert_eq!(records.len(), 3000);
    assert!(
        records
            .windows(2)
            .all(|pair| pair[0].transaction_id + 1 == pair[1].transaction_id)
    );
}

#[test]
fn a_crash_during_rollover_leaves_a_readable_log() {
    // The write that ends generation 1 reaches the disk but its sync fails: generation 2 is never
    // installed. The log must read to the generation-end frame and reopen after it.
    let dir = PathBuf::from("/db/log");
    let backend = backend();
    let log = quiet_log(&backend, &dir);
    let payload = vec![4u8; 3000];
    let mut lsns = Vec::new();
    loop {
        let lsn = log
            .append(&Record {
                record_type: 1,
                transaction_id: lsns.len() as u64,
                payload: &payload,
            })
            .expect("append");
        if lsn.generation > 1 {
            break;
        }
        lsns.push(lsn);
        log.commit(lsn, Durability::Durable).expect("commit");
        let next_end = log.end_lsn().offset
            + jetproof_log::format::frame_bytes(payload.len())
            + jetproof_log::format::FLUSH_FRAME_BYTES
            + jetproof_log::format::GEN_END_FRAME_BYTES;
        if next_end > 64 << 10 {
            // The next append must roll over; make that write's sync fail.
            backend.configure(|c| c.fail_syncs = true);
            let error = log
                .append(&Record {
                    record_type: 1,
                    transaction_id: 999,
                    payload: &payload,
                })
                .expect_err("rollover write fails");
            assert!(matches!(error, LogError::Io(_)), "{error}");
            break;
        }
    }
    // Everything written survives, including the unsynced generation-end write.
    let crashed = backend.crash_copy(CrashMode::KeepPrefix { bytes: usize::MAX });
    drop(log);
    // Generation 2 was named ahead (format version 4), or is not there at all; either way it
    // was never begun.
    if let Some(bytes) = crashed.current_contents(&log_file_path(&dir, 2)) {
        let header = GenerationHeader::decode(&bytes).expect("header");
        assert!(!header.begun, "{header:?}");
    }
    let (records, summary, _) = read_from_checkpoint(crashed.clone(), &dir).expect("read");
    assert_eq!(records.len(), lsns.len());
    assert_eq!(summary.torn_tail, None);
    let end = summary.end.expect("end");
    let (log, report) = Log::open(crashed.clone(), options(&dir)).expect("reopen");
    assert_eq!((report.previous_end, report.generation), (end, 2));
    log.close().expect("close");
    let report =
        verify_log_dir(&*crashed, &dir, Some(DATABASE), &ReadOptions::default()).expect("verify");
    assert!(report.is_clean(), "{report:#?}");
    assert!((2..=3).contains(&report.files.len()), "{report:#?}");
}

#[test]
fn a_damaged_generation_header_is_an_error() {
    let dir = PathBuf::from("/db/log");
    let (backend, _) = committed_log(10, 100, 64 << 10);
    backend
        .flip_bit(&log_file_path(&dir, 1), 20, 2)
        .expect("file to corrupt exists");
    let error = read_from_checkpoint(backend.clone(), &dir).expect_err("bad header");
    assert!(matches!(error, LogError::BadHeader { .. }), "{error}");
    let report =
        verify_log_dir(&*backend, &dir, Some(DATABASE), &ReadOptions::default()).expect("verify");
    assert!(
        matches!(report.files[0].status, FileStatus::Bad { .. }),
        "{report:#?}"
    );
}

#[test]
fn a_crash_during_create_can_be_created_again() {
    // Generation 1 was installed but the checkpoint was never written: no log exists yet.
    let dir = PathBuf::from("/db/log");
    let backend = backend();
    let log = Log::create(backend.clone(), options(&dir)).expect("create");
    drop(log);
    backend
        .remove(&jetproof_log::format::checkpoint_path(&dir))
        .expect("remove checkpoint");
    assert!(matches!(
        Log::open(backend.clone(), options(&dir)),
        Err(LogError::NotFound { .. })
    ));
    let log = Log::create(backend.clone(), options(&dir)).expect("create again");
    let payload = vec![1u8; 10];
    let lsn = log
        .append_and_commit(
            &Record {
                record_type: 1,
                transaction_id: 1,
                payload: &payload,
            },
            Durability::Durable,
        )
        .expect("commit");
    log.close().expect("close");
    // With a record in generation 1, a missing checkpoint is not an interrupted create: refuse.
    backend
        .remove(&jetproof_log::format::checkpoint_path(&dir))
        .expect("remove checkpoint");
    assert!(matches!(
        Log::create(backend.clone(), options(&dir)),
        Err(LogError::AlreadyExists { .. })
    ));
    let records = read_all_from(backend, &dir);
    assert_eq!(records.first().map(|record| record.lsn), Some(lsn));
}

fn read_all_from(backend: Arc<FaultBackend>, dir: &Path) -> Vec<jetproof_log::LogRecord> {
    LogReader::open(
        backend,
        dir,
        Some(DATABASE),
        Lsn::new(1, DATA_START),
        ReadOptions::default(),
    )
    .expect("open")
    .collect::<Result<Vec<_>, _>>()
    .expect("read")
}

/// Truncates a file to `size` bytes (its durable content too): damage, not a crash.
fn truncate(backend: &FaultBackend, path: &Path, size: u64) {
    let file = backend
        .open(path, &jetproof_io::OpenOptions::read_write())
        .expect("open to truncate");
    file.set_size(size).expect("truncate");
    file.sync_data(jetproof_io::IoClass::LogWrite)
        .expect("sync");
}

/// Reads from the checkpoint as far as it goes: the records before the error, and the error.
fn read_until_error(
    backend: Arc<dyn IoBackend>,
    dir: &Path,
) -> (Vec<jetproof_log::LogRecord>, Option<LogError>) {
    let (mut reader, _) =
        LogReader::from_checkpoint(backend, dir, Some(DATABASE), ReadOptions::default())
            .expect("reader");
    let mut records = Vec::new();
    loop {
        match reader.next_record() {
            Ok(Some(record)) => records.push(record),
            Ok(None) => return (records, None),
            Err(error) => return (records, Some(error)),
        }
    }
}

#[test]
fn the_newest_generation_deleted_is_lost_log_naming_the_file_and_the_end() {
    // Row 20 of the crash table: generation 1 ends with its generation-end frame, which a crash
    // during rollover can also leave; the checkpoint file recorded generation 2 as installed,
    // so its absence is a loss, not that crash.
    let dir = PathBuf::from("/db/log");
    let (backend, lsns) = committed_log(100, 2000, 64 << 10);
    let newest = lsns.last().expect("records").generation;
    assert!(newest >= 3);
    let newest_path = log_file_path(&dir, newest);
    backend.remove(&newest_path).expect("remove");
    let (records, error) = read_until_error(backend.clone(), &dir);
    let kept = lsns.iter().filter(|lsn| lsn.generation < newest).count();
    assert_eq!(records.len(), kept, "every record before the loss is read");
    match error {
        Some(LogError::LostLog { path, log_end, .. }) => {
            assert_eq!(path, newest_path);
            assert_eq!(log_end.generation, newest - 1);
        }
        other => panic!("expected LostLog, got {other:?}"),
    }
    assert!(matches!(
        Log::open(backend.clone(), options(&dir)),
        Err(LogError::LostLog { .. })
    ));
    let report =
        verify_log_dir(&*backend, &dir, Some(DATABASE), &ReadOptions::default()).expect("verify");
    assert!(!report.is_clean(), "{report:#?}");
    // The generation after it may have been named ahead (not begun, empty): the deleted one is
    // the lost one either way.
    let last = report
        .files
        .iter()
        .find(|file| file.generation == newest)
        .expect("the deleted generation is reported");
    assert!(
        matches!(&last.status, FileStatus::Bad { reason, .. } if reason.contains("lost log")),
        "{report:#?}"
    );
    // Two generations gone: both named.
    backend
        .remove(&log_file_path(&dir, newest - 1))
        .expect("remove");
    let (_, error) = read_until_error(backend.clone(), &dir);
    assert!(
        matches!(&error, Some(LogError::LostLog { path, .. }) if *path == log_file_path(&dir, newest - 1)),
        "{error:?}"
    );
}

#[test]
fn a_truncated_generation_is_lost_log_never_a_torn_tail() {
    // Row 21: generations are preformatted to full size, so a short file cannot be a crash's.
    let dir = PathBuf::from("/db/log");
    for (case, cut) in ["mid-file", "inside the header", "middle generation"]
        .into_iter()
        .enumerate()
    {
        let (backend, lsns) = committed_log(100, 2000, 64 << 10);
        let newest = lsns.last().expect("records").generation;
        let (victim, size) = match case {
            // Half of the newest generation's records survive.
            0 => {
                let in_newest: Vec<&Lsn> =
                    lsns.iter().filter(|lsn| lsn.generation == newest).collect();
                (newest, in_newest[in_newest.len() / 2].offset + 100)
            }
            1 => (newest, 100),
            _ => (1, 30 << 10),
        };
        let path = log_file_path(&dir, victim);
        truncate(&backend, &path, size);
        let (records, error) = read_until_error(backend.clone(), &dir);
        match &error {
            Some(LogError::LostLog {
                path: at, log_end, ..
            }) => {
                assert_eq!(at, &path, "{cut}");
                assert!(
                    records.iter().all(|record| record.lsn < *log_end),
                    "{cut}: no record past the end"
                );
                if case == 0 {
                    assert_eq!(log_end.generation, newest, "{cut}");
                    assert!(log_end.offset <= size, "{cut}");
                }
            }
            other => panic!("{cut}: expected LostLog, got {other:?}"),
        }
        let expected_records = lsns
            .iter()
            .filter(|lsn| {
                lsn.generation < victim
                    || (lsn.generation == victim && lsn.offset + 2000 + 22 <= size)
            })
            .count();
        assert_eq!(records.len(), expected_records, "{cut}");
        let reopened = Log::open(backend.clone(), options(&dir));
        if case < 2 {
            assert!(
                matches!(reopened, Err(LogError::LostLog { .. })),
                "{cut}: {:?}",
                reopened.err()
            );
        }
        let report = verify_log_dir(&*backend, &dir, Some(DATABASE), &ReadOptions::default())
            .expect("verify");
        let file = report
            .files
            .iter()
            .find(|file| file.generation == victim)
            .expect("reported");
        assert!(
            matches!(&file.status, FileStatus::Bad { reason, .. } if reason.contains("lost log") || reason.contains("truncated")),
            "{cut}: {report:#?}"
        );
    }
}

#[test]
fn the_verifier_finds_every_generation_by_listing_without_the_checkpoint() {
    // `jetproof checksum` lists the directory: with the checkpoint file gone (and generation 1
    // deleted by retention long ago, so probing from 1 finds nothing), every file is still
    // verified, and the missing checkpoint is reported.
    let dir = PathBuf::from("/db/log");
    let (backend, lsns) = committed_log(700, 2000, 64 << 10);
    let newest = lsns.last().expect("records").generation;
    assert!(newest >= 20, "{newest}");
    for generation in 1..=17 {
        backend
            .remove(&log_file_path(&dir, generation))
            .expect("remove old");
    }
    backend
        .remove(&jetproof_log::format::checkpoint_path(&dir))
        .expect("remove checkpoint");
    let probed =
        verify_log_dir(&*backend, &dir, Some(DATABASE), &ReadOptions::default()).expect("verify");
    assert!(probed.files.is_empty(), "probing from 1 finds nothing");
    let listed: Vec<u64> = (18..=newest).collect();
    let report = jetproof_log::verify_log_dir_listed(
        &*backend,
        &dir,
        Some(DATABASE),
        &ReadOptions::default(),
        Some(&listed),
    )
    .expect("verify");
    assert_eq!(
        report
            .files
            .iter()
            .map(|f| f.generation)
            .collect::<Vec<_>>(),
        listed
    );
    assert!(report.checkpoint_missing(), "{report:#?}");
    assert!(report.is_clean(), "{report:#?}");
    // A listed file with damage is reported bad.
    backend
        .flip_bit(&log_file_path(&dir, 19), 20, 1)
        .expect("file to corrupt exists");
    let report = jetproof_log::verify_log_dir_listed(
        &*backend,
        &dir,
        Some(DATABASE),
        &ReadOptions::default(),
        Some(&listed),
    )
    .expect("verify");
    assert!(!report.is_clean());
    assert_eq!(
        jetproof_log::format::parse_generation_file_name("E0000000A.jplog"),
        Some(10)
    );
    for foreign in [
        "E0000000a.jplog",
        "E0000001.jplog",
        "E0000000A.jplog.bak",
        "x.jplog",
    ] {
        assert_eq!(
            jetproof_log::format::parse_generation_file_name(foreign),
            None,
            "{foreign}"
        );
    }
}

#[test]
fn a_zeroed_tail_before_the_durable_end_the_checkpoint_file_recorded_is_lost_log() {
    // Row 23: every checkpoint file write records how far the log was durable; a log found
    // ending before that lost synced data. Zeroed after it, the tail reads as the log's end
    // (the documented limit: nothing in the log proves those last writes).
    let dir = PathBuf::from("/db/log");
    for zero_before_the_recorded_end in [true, false] {
        let backend = backend();
        let log = Log::create(backend.clone(), options(&dir)).expect("create");
        let payload = vec![9u8; 500];
        let mut lsns = Vec::new();
        for index in 0..20 {
            lsns.push(
                log.append_and_commit(
                    &Record {
                        record_type: 1,
                        transaction_id: index,
                        payload: &payload,
                    },
                    Durability::Durable,
                )
                .expect("commit"),
            );
            if index == 10 {
                log.write_checkpoint(lsns[2]).expect("checkpoint");
            }
        }
        log.close().expect("close");
        // How far the checkpoint file says the log was durable: the checkpoint written at
        // commit 10, or later when the log wrote the file again in the background (naming the
        // next generation ahead); CI once found it past commit 15, which this test took for
        // "after the recorded end".
        let recorded = read_checkpoint(&*backend, &dir, Some(DATABASE))
            .expect("read the checkpoint")
            .expect("a checkpoint file")
            .checkpoint
            .durable_end;
        let from = if zero_before_the_recorded_end {
            lsns[6].offset
        } else {
            // The first commit at or past the recorded end (or the end itself past them all).
            lsns.iter()
                .map(|lsn| lsn.offset)
                .find(|&offset| offset >= recorded.offset && offset >= lsns[11].offset)
                .unwrap_or(recorded.offset)
        };
        assert_eq!(recorded.generation, 1, "{recorded:?}");
        assert!(
            lsns[6].offset < recorded.offset,
            "the checkpoint at commit 10 records commit 6 durable: {recorded:?}"
        );
        backend
            .zero_range(&log_file_path(&dir, 1), from, 64 << 10)
            .expect("file to damage exists");
        let (records, error) = read_until_error(backend.clone(), &dir);
        if zero_before_the_recorded_end {
            assert!(
                matches!(&error, Some(LogError::LostLog { log_end, .. }) if log_end.offset == from),
                "{error:?}"
            );
            assert!(matches!(
                Log::open(backend.clone(), options(&dir)),
                Err(LogError::LostLog { .. })
            ));
            let report = verify_log_dir(&*backend, &dir, Some(DATABASE), &ReadOptions::default())
                .expect("verify");
            assert!(!report.is_clean(), "{report:#?}");
        } else {
            assert!(error.is_none(), "{error:?}");
        }
        assert_eq!(
            records.len(),
            lsns.iter().filter(|lsn| lsn.offset < from).count() - 2
        );
    }
}

/// Polls `ready` every 100 ms for up to 10 s (the background names the next generation ahead).
fn wait_for(what: &str, mut ready: impl FnMut() -> bool) {
    for _ in 0..100 {
        if ready() {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("{what}: not within 10 s");
}

/// The checkpoint file names `generation` as the newest installed, and its file is there.
fn named_ahead(backend: &FaultBackend, dir: &Path, generation: u64) -> bool {
    backend.exists(&log_file_path(dir, generation))
        && read_checkpoint(backend, dir, Some(DATABASE))
            .ok()
            .flatten()
            .is_some_and(|read| read.checkpoint.newest_generation == generation)
}

fn not_begun(backend: &FaultBackend, path: &Path) -> bool {
    let bytes = backend.current_contents(path).expect("the file exists");
    !GenerationHeader::decode(&bytes).expect("header").begun
}

#[test]
fn a_generation_named_ahead_reads_as_empty_and_the_log_is_begun_in_it_at_open() {
    // Row 29: the next generation is named (and recorded in the checkpoint file) before it is
    // begun; a crash then leaves it not begun. It holds no record; deleted, it is a loss.
    let dir = PathBuf::from("/db/log");
    let backend = backend();
    let log = Log::create(backend.clone(), options(&dir)).expect("create");
    let payload = vec![5u8; 1000];
    let mut lsns: Vec<Lsn> = Vec::new();
    while lsns.last().is_none_or(|lsn| lsn.generation < 2) {
        let lsn = log
            .append_and_commit(
                &Record {
                    record_type: 1,
                    transaction_id: lsns.len() as u64,
                    payload: &payload,
                },
                Durability::Durable,
            )
            .expect("commit");
        lsns.push(lsn);
    }
    // Generation 2 is begun (its first write returned); the background names 3 ahead.
    wait_for("generation 3 named ahead", || {
        named_ahead(&backend, &dir, 3)
    });
    let crashed = backend.crash_copy(CrashMode::KeepPrefix { bytes: 0 });
    drop(log);
    let third = log_file_path(&dir, 3);
    assert!(not_begun(&crashed, &third));
    let (records, summary, _) = read_from_checkpoint(crashed.clone(), &dir).expect("read");
    assert_eq!(records.len(), lsns.len());
    assert_eq!(summary.torn_tail, None);
    let end = summary.end.expect("end");
    assert_eq!(end.generation, 2);
    let report =
        verify_log_dir(&*crashed, &dir, Some(DATABASE), &ReadOptions::default()).expect("verify");
    assert!(report.is_clean(), "{report:#?}");
    let named = report.files.last().expect("files");
    assert_eq!((named.generation, named.frames), (3, 0), "{report:#?}");
    // Deleted, the generation named ahead is reported lost (the checkpoint file names it).
    let deleted = crashed.crash_copy(CrashMode::KeepPrefix { bytes: 0 });
    deleted.remove(&third).expect("remove");
    let (_, error) = read_until_error(deleted.clone(), &dir);
    assert!(
        matches!(&error, Some(LogError::LostLog { path, .. }) if *path == third),
        "{error:?}"
    );
    assert!(matches!(
        Log::open(deleted, options(&dir)),
        Err(LogError::LostLog { .. })
    ));
    // Cut short, it lost nothing, but a crash cannot cut a file: reported like any cut
    // generation (row 26), and `Log::open` refuses.
    let cut = crashed.crash_copy(CrashMode::KeepPrefix { bytes: 0 });
    truncate(&cut, &third, 30 << 10);
    let (records_left, error) = read_until_error(cut.clone(), &dir);
    assert_eq!(
        records_left.len(),
        lsns.len(),
        "every record before it is read"
    );
    assert!(
        matches!(&error, Some(LogError::LostLog { path, .. }) if *path == third),
        "{error:?}"
    );
    assert!(matches!(
        Log::open(cut, options(&dir)),
        Err(LogError::LostLog { .. })
    ));
    // Reopened, the log is begun in generation 3 and continues there.
    let (log, report) = Log::open(crashed.clone(), options(&dir)).expect("open");
    assert_eq!((report.generation, report.previous_end), (3, end));
    assert!(!not_begun(&crashed, &third));
    let lsn = log
        .append_and_commit(
            &Record {
                record_type: 2,
                transaction_id: 7777,
                payload: b"after",
            },
            Durability::Durable,
        )
        .expect("commit");
    assert_eq!(lsn.generation, 3);
    log.close().expect("close");
    let records = read_all_from(crashed.clone(), &dir);
    assert_eq!(records.len(), lsns.len() + 1);
    assert_eq!(records.last().map(|r| r.lsn), Some(lsn));
    let report =
        verify_log_dir(&*crashed, &dir, Some(DATABASE), &ReadOptions::default()).expect("verify");
    assert!(report.is_clean(), "{report:#?}");
}

#[test]
fn a_crash_between_the_generation_end_and_the_next_generations_first_write_reads_to_the_end_frame()
{
    // Row 30: the rollover wrote the generation-end frame and took the generation named ahead,
    // with no I/O of its own; the crash comes before the first write of the new generation.
    let dir = PathBuf::from("/db/log");
    let backend = backend();
    let log = quiet_log(&backend, &dir);
    wait_for("generation 2 named ahead", || {
        named_ahead(&backend, &dir, 2)
    });
    let payload = vec![4u8; 3000];
    let mut lsns = Vec::new();
    let unwritten = loop {
        let lsn = log
            .append(&Record {
                record_type: 1,
                transaction_id: lsns.len() as u64,
                payload: &payload,
            })
            .expect("append");
        if lsn.generation > 1 {
            break lsn;
        }
        log.commit(lsn, Durability::Durable).expect("commit");
        lsns.push(lsn);
    };
    assert_eq!(unwritten.generation, 2);
    assert_eq!(
        log.stats()
            .rollovers
            .load(std::sync::atomic::Ordering::Relaxed),
        1
    );
    assert_eq!(
        log.stats()
            .rollovers_without_spare
            .load(std::sync::atomic::Ordering::Relaxed),
        0,
        "the rollover took the generation named ahead"
    );
    // Not durable: the durable end is still the end of generation 1.
    assert!(!log.is_durable(unwritten));
    assert_eq!(log.flushed_lsn().generation, 1);
    let crashed = backend.crash_copy(CrashMode::KeepPrefix { bytes: usize::MAX });
    drop(log);
    let second = log_file_path(&dir, 2);
    assert!(not_begun(&crashed, &second));
    let log = reopened_after_generation_one(&crashed, &dir, lsns.len());
    log.close().expect("close");
    assert_eq!(read_all_from(crashed.clone(), &dir).len(), lsns.len());
    let report =
        verify_log_dir(&*crashed, &dir, Some(DATABASE), &ReadOptions::default()).expect("verify");
    assert!(report.is_clean(), "{report:#?}");
}

#[test]
fn a_torn_header_copy_leaves_the_generation_not_begun_and_its_frames_are_never_read() {
    // Row 31: the first write of a generation (its header block with copy B, then its first
    // frames) torn by a crash so that the frames reached the disk and copy B did not. The write
    // was never acknowledged: the generation is not begun, its frames are not read, and the open
    // that begins it zeroes them first.
    let dir = PathBuf::from("/db/log");
    let backend = backend();
    let log = quiet_log(&backend, &dir);
    let payload = vec![6u8; 3000];
    let mut lsns = Vec::new();
    loop {
        let lsn = log
            .append_and_commit(
                &Record {
                    record_type: 1,
                    transaction_id: lsns.len() as u64,
                    payload: &payload,
                },
                Durability::Durable,
            )
            .expect("commit");
        if lsn.generation > 1 {
            break;
        }
        lsns.push(lsn);
    }
    let crashed = backend.crash_copy(CrashMode::KeepPrefix { bytes: usize::MAX });
    drop(log);
    let second = log_file_path(&dir, 2);
    assert!(!not_begun(&crashed, &second), "the first write began it");
    // The header's second copy (its own 512-byte sector) did not reach the disk.
    let copy_b = jetproof_log::format::HEADER_COPY_OFFSET as u64;
    crashed
        .zero_range(&second, copy_b, copy_b + 512)
        .expect("file to damage exists");
    assert!(not_begun(&crashed, &second));
    let stale = crashed.current_contents(&second).expect("file");
    assert!(
        stale[DATA_START as usize..DATA_START as usize + 64]
            .iter()
            .any(|&byte| byte != 0),
        "the first write's frames are on the disk"
    );
    // The unacknowledged record is not read.
    let log = reopened_after_generation_one(&crashed, &dir, lsns.len());
    let begun = crashed.current_contents(&second).expect("file");
    assert!(
        begun[DATA_START as usize..].iter().all(|&byte| byte == 0),
        "the stale frames are zeroed before the generation is begun"
    );
    let lsn = log
        .append_and_commit(
            &Record {
                record_type: 3,
                transaction_id: 4242,
                payload: b"new",
            },
            Durability::Durable,
        )
        .expect("commit");
    log.close().expect("close");
    let records = read_all_from(crashed.clone(), &dir);
    assert_eq!(records.len(), lsns.len() + 1);
    let last = records.last().expect("records");
    assert_eq!((last.lsn, last.payload.as_slice()), (lsn, &b"new"[..]));
    let report =
        verify_log_dir(&*crashed, &dir, Some(DATABASE), &ReadOptions::default()).expect("verify");
    assert!(report.is_clean(), "{report:#?}");
}
