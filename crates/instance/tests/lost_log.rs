//! Recovery refuses a log that provably lost records (issue 15, point 5; `docs/log.md`, "The
//! log's end is proved"; `docs/design.md`, "Recovery", rows 14–17): the newest generation
//! deleted, cut short, or its tail zeroed after pages were written past it. Each is
//! `InstanceError::LostLog` naming the log file, where the log ends and the pages affected, and
//! the database stays dirty; with the log files put back, the same database recovers whole.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use jetproof_engine::{DbHeader, DbState};
use jetproof_instance::{Instance, InstanceError, InstanceOptions, recover};
use jetproof_io::fault::{FaultBackend, FaultConfig};
use jetproof_io::{IoBackend, IoClass, OpenOptions};
use jetproof_log::log_file_path;

mod common;

const DB: &str = "/lost/db.jpdb";
const LOGS: &str = "/lost/logs";

fn options() -> InstanceOptions {
    InstanceOptions {
        keep_files: true,
        ..common::small_options(512, 16, 48)
    }
}

/// A database stopped without a clean close after durable commits that filled at least three
/// log generations, its pages written after the last commit (so pages on disk carry positions
/// in the newest generation). Returns the backend, the model, and the newest generation.
fn stopped_after_writing_pages() -> (Arc<FaultBackend>, BTreeMap<Vec<u8>, Vec<u8>>, u64) {
    let backend = FaultBackend::new(FaultConfig::default());
    let (db, logs) = (Path::new(DB), Path::new(LOGS));
    Instance::create(backend.clone(), db, logs, options())
        .unwrap()
        .close()
        .unwrap();
    let instance = Instance::open(backend.clone(), db, logs, options()).unwrap();
    let mut model = BTreeMap::new();
    let mut n = 0u32;
    // Into the fourth generation's second half, so cutting it at 16 KiB loses records.
    while instance.log().end_lsn() < jetproof_log::Lsn::new(4, 40 << 10) {
        let key = format!("key{:05}", n % 300).into_bytes();
        let value = vec![(n % 251) as u8; 200 + (n as usize * 37) % 900];
        instance.replace(&key, &value).unwrap();
        if instance.get(&key).unwrap().is_none_or(|v| v != value) {
            instance.insert(&key, &value).unwrap();
        }
        model.insert(key, value);
        instance.commit(false).unwrap();
        n += 1;
    }
    // Pages reach the disk after the log they depend on (the write-ahead gate): positions in
    // the newest generation.
    instance.database().flush().unwrap();
    let newest = instance.log().end_lsn().generation;
    drop(instance);
    (backend, model, newest)
}

fn is_dirty(backend: &Arc<FaultBackend>) -> bool {
    let file = backend
        .open(Path::new(DB), &OpenOptions::read_only())
        .unwrap();
    DbHeader::read(file.as_ref()).unwrap().state == DbState::Dirty
}

fn content(backend: &Arc<FaultBackend>) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let instance = Instance::open(backend.clone(), Path::new(DB), Path::new(LOGS), options())
        .expect("open after recovery");
    let found = instance
        .scan(b"", usize::MAX)
        .unwrap()
        .into_iter()
        .collect();
    instance.close().unwrap();
    found
}

fn put_back(backend: &Arc<FaultBackend>, path: &Path, bytes: &[u8]) {
    let file = backend.open(path, &OpenOptions::create()).unwrap();
    file.set_size(bytes.len() as u64).unwrap();
    file.write_at(bytes, 0, IoClass::LogWrite).unwrap();
    file.sync_data(IoClass::LogWrite).unwrap();
    backend.sync_dir(Path::new(LOGS)).unwrap();
}

/// Recovers, expecting a lost log: returns the error's fields and checks the database stayed
/// dirty and a second attempt says the same.
fn expect_lost_log(
    backend: &Arc<FaultBackend>,
) -> (std::path::PathBuf, jetproof_log::Lsn, u64, String) {
    let (db, logs) = (Path::new(DB), Path::new(LOGS));
    let error = recover(backend.clone(), db, logs, &options()).expect_err("lost log");
    let message = error.to_string();
    let InstanceError::LostLog(lost) = error else {
        panic!("expected LostLog, got {message}");
    };
    let jetproof_instance::error::LostLog {
        log_file,
        log_end,
        pages,
        ..
    } = *lost;
    assert!(is_dirty(backend), "the database must stay dirty");
    assert!(
        message.contains(&log_file.display().to_string()) && message.contains("jetproof recover"),
        "{message}"
    );
    let again = recover(backend.clone(), db, logs, &options()).expect_err("still lost");
    assert!(matches!(again, InstanceError::LostLog(_)), "{again}");
    (log_file, log_end, pages.count, message)
}

#[test]
fn recovery_with_the_newest_generation_deleted_is_lost_log_and_the_database_stays_dirty() {
    let (backend, model, newest) = stopped_after_writing_pages();
    let path = log_file_path(Path::new(LOGS), newest);
    let saved = backend.current_contents(&path).unwrap();
    backend.remove(&path).unwrap();
    backend.sync_dir(Path::new(LOGS)).unwrap();
    let (log_file, log_end, pages, message) = expect_lost_log(&backend);
    assert_eq!(log_file, path);
    assert_eq!(log_end.generation, newest - 1, "{message}");
    assert!(pages > 0, "pages written past the end are named: {message}");
    assert!(message.contains("page(s)"), "{message}");
    // The file put back, the same database recovers with every durable commit.
    put_back(&backend, &path, &saved);
    let report = recover(backend.clone(), Path::new(DB), Path::new(LOGS), &options()).unwrap();
    assert!(!report.was_clean);
    assert_eq!(content(&backend), model);
}

#[test]
fn recovery_with_the_newest_generation_truncated_is_lost_log_never_a_torn_tail() {
    let (backend, model, newest) = stopped_after_writing_pages();
    let path = log_file_path(Path::new(LOGS), newest);
    let saved = backend.current_contents(&path).unwrap();
    let file = backend.open(&path, &OpenOptions::read_write()).unwrap();
    file.set_size(8192).unwrap();
    file.sync_data(IoClass::LogWrite).unwrap();
    drop(file);
    let (log_file, log_end, _, message) = expect_lost_log(&backend);
    assert_eq!(log_file, path);
    assert_eq!(log_end.generation, newest);
    assert!(log_end.offset <= 8192, "{message}");
    assert!(message.contains("truncated"), "{message}");
    put_back(&backend, &path, &saved);
    recover(backend.clone(), Path::new(DB), Path::new(LOGS), &options()).unwrap();
    assert_eq!(content(&backend), model);
}

#[test]
fn recovery_with_the_newest_generations_tail_zeroed_finds_the_pages_written_past_it() {
    // The file keeps its size, so the log alone reads a clean end; the pages the replay reads
    // that were written after the lost records show the loss.
    let (backend, _, newest) = stopped_after_writing_pages();
    let path = log_file_path(Path::new(LOGS), newest);
    let size = backend.current_contents(&path).unwrap().len();
    let file = backend.open(&path, &OpenOptions::read_write()).unwrap();
    let zeros = vec![0u8; size - (16 << 10)];
    file.write_at(&zeros, 16 << 10, IoClass::LogWrite).unwrap();
    file.sync_data(IoClass::LogWrite).unwrap();
    drop(file);
    let (log_file, log_end, pages, message) = expect_lost_log(&backend);
    assert_eq!(log_file, path);
    assert_eq!(log_end.generation, newest);
    assert!(pages > 0, "{message}");
}
