//! Files at the log's names that jetproof did not make (issue 15, points 1 and 2): on a real
//! directory through the portable backend, a link, a foreign file or another database's file
//! named `Enext.jplogtmp`, `E00000001.jplog`, `E00000002.jplog` or `checkpoint.jpchk` is never
//! written, replaced or removed; the log refuses to start (or stops) and names the file. A spare
//! the log itself left behind (zeros) is still formatted anew.

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use jetproof_io::IoBackend;
use jetproof_io::std_backend::StdBackend;
use jetproof_log::format::{checkpoint_path, generation_path, spare_path};
use jetproof_log::{Durability, Log, LogError, LogOptions, Record};

const DATABASE: u128 = 0x5eed;
const OTHER_DATABASE: u128 = 0xbad;

fn disk_dir() -> tempfile::TempDir {
    let base = std::env::var_os("JETPROOF_TEST_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_TARGET_TMPDIR")));
    tempfile::tempdir_in(base).expect("temp dir on disk")
}

fn options(dir: &Path, database: u128) -> LogOptions {
    LogOptions {
        file_size_bytes: 64 << 10,
        buffer_size_bytes: 32 << 10,
        ..LogOptions::new(dir, database)
    }
}

fn backend() -> Arc<dyn IoBackend> {
    StdBackend::new()
}

/// A log with a few records, closed cleanly.
fn closed_log(dir: &Path) {
    let log = Log::create(backend(), options(dir, DATABASE)).expect("create");
    commit(&log, 3);
    log.close().expect("close");
}

fn commit(log: &Log, count: usize) {
    let payload = vec![7u8; 100];
    for id in 0..count {
        log.append_and_commit(
            &Record {
                record_type: 1,
                transaction_id: id as u64 + 1,
                payload: &payload,
            },
            Durability::Durable,
        )
        .expect("commit");
    }
}

fn assert_not_ours(result: Result<impl std::fmt::Debug, LogError>, path: &Path) {
    match result {
        Err(error @ LogError::NotOurs { .. }) => {
            assert!(
                error.to_string().contains(&path.display().to_string()),
                "{error}"
            );
        }
        other => panic!("expected NotOurs for {}, got {other:?}", path.display()),
    }
}

#[test]
fn symlink_spare_is_never_written_through_by_create() {
    let tmp = disk_dir();
    let dir = tmp.path().join("logs");
    std::fs::create_dir(&dir).expect("mkdir");
    let victim = tmp.path().join("victim.txt");
    std::fs::write(&victim, b"someone's precious data").expect("write");
    symlink(&victim, spare_path(&dir)).expect("symlink");
    assert_not_ours(
        Log::create(backend(), options(&dir, DATABASE)),
        &spare_path(&dir),
    );
    assert_eq!(
        std::fs::read(&victim).expect("read"),
        b"someone's precious data"
    );
    assert!(
        spare_path(&dir)
            .symlink_metadata()
            .expect("link")
            .file_type()
            .is_symlink()
    );
    assert!(!checkpoint_path(&dir).exists(), "no log was started");
}

#[test]
fn symlink_spare_is_never_removed_or_followed_by_open() {
    let tmp = disk_dir();
    let dir = tmp.path().join("logs");
    closed_log(&dir);
    let _ = std::fs::remove_file(spare_path(&dir));
    let victim = tmp.path().join("victim.txt");
    std::fs::write(&victim, b"theirs").expect("write");
    symlink(&victim, spare_path(&dir)).expect("symlink");
    assert_not_ours(
        Log::open(backend(), options(&dir, DATABASE)),
        &spare_path(&dir),
    );
    assert_eq!(std::fs::read(&victim).expect("read"), b"theirs");
    assert!(spare_path(&dir).symlink_metadata().is_ok(), "link left");
}

#[test]
fn a_foreign_file_named_like_the_spare_is_left_and_refused() {
    let tmp = disk_dir();
    let dir = tmp.path().join("logs");
    closed_log(&dir);
    std::fs::write(spare_path(&dir), b"my notes, not a log").expect("write");
    assert_not_ours(
        Log::open(backend(), options(&dir, DATABASE)),
        &spare_path(&dir),
    );
    assert_eq!(
        std::fs::read(spare_path(&dir)).expect("read"),
        b"my notes, not a log"
    );
}

#[test]
fn a_spare_of_zeros_left_by_the_log_is_formatted_anew() {
    let tmp = disk_dir();
    let dir = tmp.path().join("logs");
    closed_log(&dir);
    // What a crash leaves while a spare is formatted: a short file of zeros.
    std::fs::write(spare_path(&dir), vec![0u8; 8192]).expect("write");
    let (log, _) = Log::open(backend(), options(&dir, DATABASE)).expect("open");
    commit(&log, 2);
    log.close().expect("close");
}

#[test]
fn a_foreign_first_generation_without_a_checkpoint_is_left_and_refused() {
    let tmp = disk_dir();
    let dir = tmp.path().join("logs");
    std::fs::create_dir(&dir).expect("mkdir");
    let first = generation_path(&dir, 1);
    std::fs::write(&first, b"a file that only has our name").expect("write");
    assert_not_ours(Log::create(backend(), options(&dir, DATABASE)), &first);
    assert_eq!(
        std::fs::read(&first).expect("read"),
        b"a file that only has our name"
    );
}

#[test]
fn another_databases_first_generation_is_left_and_refused() {
    let tmp = disk_dir();
    let dir = tmp.path().join("logs");
    let log = Log::create(backend(), options(&dir, OTHER_DATABASE)).expect("create other");
    log.close().expect("close");
    std::fs::remove_file(checkpoint_path(&dir)).expect("rm checkpoint");
    let before = std::fs::read(generation_path(&dir, 1)).expect("read");
    assert_not_ours(
        Log::create(backend(), options(&dir, DATABASE)),
        &generation_path(&dir, 1),
    );
    assert_eq!(
        std::fs::read(generation_path(&dir, 1)).expect("read"),
        before
    );
}

#[test]
fn symlink_checkpoint_dangling_is_an_existing_log_and_nothing_is_made_through_it() {
    let tmp = disk_dir();
    let dir = tmp.path().join("logs");
    std::fs::create_dir(&dir).expect("mkdir");
    let target = tmp.path().join("made-through-the-link");
    symlink(&target, checkpoint_path(&dir)).expect("symlink");
    let error = Log::create(backend(), options(&dir, DATABASE)).expect_err("refused");
    assert!(matches!(error, LogError::AlreadyExists { .. }), "{error}");
    assert!(!target.exists(), "nothing created through the link");
}

#[test]
fn a_foreign_file_at_the_next_generations_name_stops_the_log_and_is_kept() {
    let tmp = disk_dir();
    let dir = tmp.path().join("logs");
    let log = Log::create(backend(), options(&dir, DATABASE)).expect("create");
    let second = generation_path(&dir, 2);
    std::fs::write(&second, b"not ours").expect("write");
    // 64 KiB generations: a few hundred records of 100 bytes roll over.
    let payload = vec![3u8; 100];
    let mut failed = None;
    for id in 0..2000u64 {
        if let Err(error) = log.append_and_commit(
            &Record {
                record_type: 1,
                transaction_id: id + 1,
                payload: &payload,
            },
            Durability::Durable,
        ) {
            failed = Some(error);
            break;
        }
    }
    let error = failed.expect("the rollover onto a foreign file fails");
    assert!(
        error.to_string().contains("E00000002.jplog"),
        "names the file: {error}"
    );
    assert_eq!(std::fs::read(&second).expect("read"), b"not ours");
    drop(log);
}
