//! The engine over the fault-injecting backend: direct-I/O alignment respected, transient read
//! bit flips corrected, a failed write poisons the database instead of letting it limp on, and
//! what a crash keeps after `close` is a clean, complete database.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;

use common::{seed, small_options};
use jetproof_engine::{Database, EngineError, record_key};
use jetproof_io::fault::{CrashMode, FaultBackend, FaultConfig};

const PAGE: usize = 8192;

fn config(seed: u64) -> FaultConfig {
    FaultConfig {
        seed,
        // As strict as O_DIRECT on a 4 KiB-sector device: every offset, length and buffer.
        logical_block_size: 4096,
        ..FaultConfig::default()
    }
}

fn fill(db: &Database, records: u64) {
    for n in 0..records {
        let value = vec![(n % 256) as u8; 700];
        assert!(db.insert(&record_key(n * 7 % records), &value).unwrap());
    }
}

#[test]
fn aligned_io_and_clean_close_survive_a_crash() {
    let seed = seed("aligned_io_and_clean_close_survive_a_crash");
    let backend = FaultBackend::new(config(seed));
    let path = Path::new("/f/db.jpdb");
    let mut options = small_options(PAGE, 48);
    options.direct_io = true;
    let db = Database::create(backend.as_ref(), path, options.clone()).unwrap();
    fill(&db, 2000);
    db.close().unwrap();
    let survivor = backend.crash(CrashMode::SyncedOnly);
    let db = Database::open(survivor.as_ref(), path, options).unwrap();
    let stats = db.check().unwrap();
    assert_eq!(stats.records, 2000, "seed {seed}");
    for n in (0..2000).step_by(97) {
        let value = db.get(&record_key(n * 7 % 2000)).unwrap().unwrap();
        assert_eq!(value, vec![(n % 256) as u8; 700], "seed {seed}");
    }
    db.close().unwrap();
}

#[test]
fn crash_without_close_is_refused_as_dirty() {
    let seed = seed("crash_without_close_is_refused_as_dirty");
    let backend = FaultBackend::new(config(seed));
    let path = Path::new("/f/db.jpdb");
    let db = Database::create(backend.as_ref(), path, small_options(PAGE, 48)).unwrap();
    fill(&db, 500);
    let survivor = backend.crash(CrashMode::RandomSubset);
    drop(db);
    let err = Database::open(survivor.as_ref(), path, small_options(PAGE, 48)).unwrap_err();
    assert!(matches!(err, EngineError::DirtyShutdown { .. }), "{err}");
}

#[test]
fn transient_read_bit_flips_are_corrected() {
    let seed = seed("transient_read_bit_flips_are_corrected");
    let backend = FaultBackend::new(config(seed));
    let path = Path::new("/f/db.jpdb");
    let options = small_options(PAGE, 24);
    let db = Database::create(backend.as_ref(), path, options.clone()).unwrap();
    fill(&db, 1500);
    db.close().unwrap();
    backend.configure(|c| c.read_bit_flip_probability = 0.05);
    let db = Database::open(backend.as_ref(), path, options).unwrap();
    for n in 0..1500 {
        let value = db.get(&record_key(n * 7 % 1500)).unwrap().unwrap();
        assert_eq!(value, vec![(n % 256) as u8; 700], "seed {seed}");
    }
    assert!(
        db.cache_stats().pages_corrected > 0,
        "seed {seed}: {:?}",
        db.cache_stats()
    );
}

#[test]
fn a_failed_write_poisons_the_database() {
    let seed = seed("a_failed_write_poisons_the_database");
    let backend = FaultBackend::new(config(seed));
    let path = Path::new("/f/db.jpdb");
    let db = Database::create(backend.as_ref(), path, small_options(PAGE, 64)).unwrap();
    fill(&db, 300);
    backend.configure(|c| c.eio_after_ops = Some(0));
    let err = db.flush().unwrap_err();
    assert!(matches!(err, EngineError::Io(_)), "{err}");
    backend.configure(|c| c.eio_after_ops = None);
    // Even with the device healthy again, the database refuses work until reopened.
    let err = db.get(&record_key(1)).unwrap_err();
    assert!(matches!(err, EngineError::Poisoned { .. }), "{err}");
    // The first failure is named, with its location.
    assert!(err.to_string().contains("injected"), "{err}");
    assert!(err.to_string().contains("/f/db.jpdb"), "{err}");
    let err = db.insert(b"new", b"v").unwrap_err();
    assert!(matches!(err, EngineError::Poisoned { .. }), "{err}");
    assert!(db.close().is_err());
}
