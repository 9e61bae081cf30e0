//! Targets on sparse files, through this crate alone: what init may make where, a database that
//! was lost (its flush map or log left behind), and the `.partial` naming rule the checks and
//! the procedures share.

use std::path::Path;

use jetproof_job::{ByteSize, Job};
use jetproof_storage::database::{refuse_lost_databases, require_databases};
use jetproof_storage::target::{self, DirState, PARTIAL_SUFFIX, Permissions, partial_path};

fn job_in(dir: &Path) -> Job {
    let mut job = Job::default();
    job.storage.data_dir = dir.join("data");
    job.storage.db_size = Some(ByteSize::mib(1));
    job
}

#[test]
fn a_missing_database_is_run_init_first_and_a_lost_one_is_refused_naming_what_is_left() {
    let dir = tempfile::tempdir().expect("tempdir");
    let job = job_in(dir.path());
    let db = job.instances()[0].database_path.clone();

    let missing = require_databases(&job, Path::exists).expect_err("no database yet");
    assert!(missing.field.starts_with("database of "), "{missing}");
    assert!(
        missing.message.contains("run `jetproof init` first"),
        "{missing}"
    );
    // Never made: nothing is left, so a run may initialise.
    refuse_lost_databases(&job).expect("nothing left behind");

    // A flush map (sparse, as big as a real one) is left where the database was: lost.
    std::fs::create_dir_all(db.parent().expect("parent")).expect("dirs");
    let map = jetproof_engine::flush_map_path(&db);
    std::fs::File::create(&map)
        .and_then(|f| f.set_len(8 << 20))
        .expect("sparse flush map");
    let lost = refuse_lost_databases(&job).expect_err("a lost database");
    assert!(lost.to_string().contains("its flush map"), "{lost}");
    assert!(map.exists(), "the evidence is never removed");

    // An interrupted init's `.partial` file is not a loss: the run's init finishes it.
    let partial = partial_path(&db);
    assert_eq!(
        partial.as_os_str().len(),
        db.as_os_str().len() + PARTIAL_SUFFIX.len()
    );
    std::fs::write(&partial, b"").expect("partial");
    refuse_lost_databases(&job).expect("an interrupted init is resumed, not refused");
}

#[test]
fn a_sparse_foreign_file_at_the_database_path_is_refused_and_left_as_it_was() {
    let dir = tempfile::tempdir().expect("tempdir");
    let job = job_in(dir.path());
    let db = job.instances()[0].database_path.clone();
    std::fs::create_dir_all(db.parent().expect("parent")).expect("dirs");
    std::fs::File::create(&db)
        .and_then(|f| f.set_len(64 << 20))
        .expect("sparse foreign file");
    let permissions = Permissions {
        allow_foreign_files: true,
        ..Permissions::default()
    };
    let refused = target::check_init_targets(&job, &permissions)
        .expect_err("a foreign file at jetproof's name");
    assert!(!refused.field.is_empty(), "{refused}");
    assert_eq!(
        std::fs::metadata(&db).expect("still there").len(),
        64 << 20,
        "never replaced or truncated"
    );
    let (state, entry) = target::dir_state(db.parent().expect("parent")).expect("readable");
    assert_eq!(state, DirState::Foreign);
    assert!(entry.is_some());
}
