//! What the instance test binaries share.
#![allow(clippy::unwrap_used, dead_code)]

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use jetproof_instance::Instance;
use rand::Rng;
use rand::rngs::StdRng;

/// Every record of the log in `logs`, from its first generation, and where the log ends.
pub fn read_log(
    backend: Arc<dyn jetproof_io::IoBackend>,
    logs: &Path,
) -> (Vec<jetproof_log::LogRecord>, Option<jetproof_log::Lsn>) {
    let mut reader = jetproof_log::LogReader::open(
        backend,
        logs,
        None,
        jetproof_log::Lsn::new(1, jetproof_log::format::DATA_START),
        jetproof_log::ReadOptions::default(),
    )
    .unwrap();
    let mut records = Vec::new();
    while let Some(record) = reader.next_record().unwrap() {
        records.push(record);
    }
    (records, reader.summary().end)
}

/// The page size of every instance test, and their small options (4 KiB pages, 64 KiB log
/// files, no background checkpointer: `jetproof_test_support::instance::small_options`).
#[allow(unused_imports)] // each test binary uses only some of these
pub use jetproof_test_support::instance::{PAGE, small_options};

/// A test's first seed: `JETPROOF_SEED` if set, else the time; printed with how to replay it.
#[allow(unused_imports)] // each test binary uses only some of these
pub use jetproof_test_support::announced_seed as seed;

/// One random change through `instance`, mirrored in `model`: half inserts, three in ten
/// deletes, the rest replaces, of keys `0..keys`; a fifth of the values are large (over half the
/// largest record, so leaves split and merge), the rest small.
pub fn random_change(
    instance: &Instance,
    rng: &mut StdRng,
    keys: u64,
    model: &mut BTreeMap<Vec<u8>, Vec<u8>>,
) {
    let max = instance.database().max_record_bytes() - 8;
    let key = rng.random_range(0..keys).to_be_bytes().to_vec();
    let len = if rng.random_bool(0.2) {
        rng.random_range(max / 2..max)
    } else {
        rng.random_range(1..max / 6)
    };
    let value = vec![rng.random::<u8>(); len];
    match rng.random_range(0..10) {
        0..5 => {
            if instance.insert(&key, &value).unwrap() {
                model.insert(key, value);
            }
        }
        5..8 => {
            if instance.delete(&key).unwrap() {
                model.remove(&key);
            }
        }
        _ => {
            if instance.replace(&key, &value).unwrap() {
                model.insert(key, value);
            }
        }
    }
}

/// A synced copy, on a fresh fault backend seeded with `seed`, of the database `db` and the log
/// directory `logs` (checkpoint and every generation file) as `from` holds them now.
pub fn copy_instance_files(
    from: &std::sync::Arc<jetproof_io::fault::FaultBackend>,
    seed: u64,
    db: &std::path::Path,
    logs: &std::path::Path,
) -> std::sync::Arc<jetproof_io::fault::FaultBackend> {
    use jetproof_io::fault::{FaultBackend, FaultConfig};
    use jetproof_io::{IoBackend, IoClass, OpenOptions};
    let to = FaultBackend::new(FaultConfig {
        seed,
        ..FaultConfig::default()
    });
    to.create_dir_all(logs).unwrap();
    let mut files = vec![
        db.to_path_buf(),
        jetproof_engine::flush_map_path(db),
        jetproof_log::format::checkpoint_path(logs),
    ];
    for generation in 1..10_000 {
        let path = jetproof_log::log_file_path(logs, generation);
        if from.exists(&path) {
            files.push(path);
        }
    }
    for path in files {
        let data = from.current_contents(&path).unwrap();
        let file = to.open(&path, &OpenOptions::create().buffered()).unwrap();
        file.write_at(&data, 0, IoClass::DbWrite).unwrap();
        file.sync_data(IoClass::DbWrite).unwrap();
    }
    if let Some(parent) = db.parent() {
        to.sync_dir(parent).unwrap();
    }
    to.sync_dir(logs).unwrap();
    to
}

/// Every page of the database file `db` on `backend` verifies at its position (`context` names
/// the case in the failure).
pub fn assert_every_page_verifies(
    backend: &jetproof_io::fault::FaultBackend,
    db: &std::path::Path,
    context: &str,
) {
    use jetproof_engine::checksum;
    let image = backend.current_contents(db).unwrap();
    for (number, page) in image.chunks(PAGE).enumerate() {
        assert_eq!(
            checksum::verify(page, number as u32),
            checksum::PageCheck::Good,
            "{context}: page {number} does not verify after recovery"
        );
    }
}

/// Whether the database header at `db` says dirty (needs recovery).
pub fn is_dirty(backend: &std::sync::Arc<jetproof_io::fault::FaultBackend>, db: &Path) -> bool {
    use jetproof_io::{IoBackend, OpenOptions};
    let file = backend.open(db, &OpenOptions::read_only()).unwrap();
    jetproof_engine::DbHeader::read(file.as_ref())
        .unwrap()
        .state
        == jetproof_engine::DbState::Dirty
}
