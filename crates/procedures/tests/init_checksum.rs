//! The procedures through their public API, on the in-memory fault backend: `init` makes and
//! fills a small job's databases, then the checksum pass reads every page back and counts what
//! it finds. The job is `jetproof_test_support::job::SmallJob`; the results directory is a
//! temporary one on disk, the databases and logs live in the backend.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use jetproof_io::fault::{FaultBackend, FaultConfig};
use jetproof_job::Job;
use jetproof_procedures::checksum::{self, ChecksumOptions, ChecksumRun};
use jetproof_procedures::init::{self, InitOptions};
use jetproof_results::{OutDir, TestKind, TestLog};
use jetproof_storage::target::Permissions;
use jetproof_test_support::job::SmallJob;

const DATABASES: u32 = 2;
const DB_BYTES: u64 = 4 << 20;
const PAGE_BYTES: u64 = 8 << 10;

/// The small job in `dir`, parsed; its databases hold 10 mailboxes each.
fn job(dir: &Path) -> Job {
    let text = SmallJob {
        mailboxes: Some(10 * DATABASES),
        ..SmallJob::new(DATABASES, "4MiB").in_dir(&dir.join("data"))
    }
    .text();
    Job::parse(&text, "test job").expect("the small job parses")
}

/// `init` of `job` on a fresh fault backend (names durable at once), seeded by
/// `JETPROOF_SEED` or a fixed default.
fn initialised(job: &Job, dir: &Path) -> Arc<FaultBackend> {
    let seed = jetproof_test_support::seed_or(0x1417);
    let backend = FaultBackend::new(FaultConfig {
        seed,
        sync_dir_required: false,
        ..FaultConfig::default()
    });
    let out = OutDir::prepare(Some(&dir.join("init")), TestKind::Init).expect("out dir");
    let log = TestLog::create(&out.file("test.log"), false).expect("test log");
    let stop = AtomicBool::new(false);
    let summary = init::init(
        job,
        &out,
        &log,
        &InitOptions {
            permissions: Permissions::default(),
            backend: backend.clone(),
            progress: &init::NoProgress,
            stop: &stop,
            seed,
        },
    )
    .unwrap_or_else(|error| panic!("seed {seed}: init: {error}"));
    assert!(summary.result.reasons.is_empty(), "{:?}", summary.result);
    assert!(summary.result_path.exists());
    backend
}

fn checked(job: &Job, backend: &FaultBackend) -> ChecksumRun {
    checksum::run(
        job,
        backend,
        &ChecksumOptions::from_job(job),
        &checksum::NoProgress,
    )
    .expect("checksum pass")
}

#[test]
fn init_then_checksum_finds_every_page_of_every_database_good() {
    let dir = tempfile::tempdir().expect("tempdir");
    let job = job(dir.path());
    let backend = initialised(&job, dir.path());
    let run = checked(&job, &backend);
    let totals = run.totals();
    let pages = u64::from(DATABASES) * DB_BYTES / PAGE_BYTES;
    assert_eq!(totals.files, u64::from(DATABASES));
    assert_eq!(totals.size_bytes, u64::from(DATABASES) * DB_BYTES);
    assert_eq!(totals.checked_bytes, totals.size_bytes);
    assert_eq!(totals.pages_seen, pages);
    assert_eq!(
        (
            totals.pages_bad,
            totals.pages_correctable,
            totals.pages_wrong_number,
            totals.pages_lost_write,
            totals.pages_newer_than_flush_map
        ),
        (0, 0, 0, 0, 0)
    );
    assert_eq!((totals.log_files_bad, totals.log_files_torn_tail), (0, 0));
    // Init makes no log (the first run creates it): nothing to verify, nothing bad.
    assert_eq!(totals.log_files_seen, 0, "{totals:?}");
    for (file, instance) in run.files.iter().zip(job.instances()) {
        assert_eq!(file.path, instance.database_path);
        assert_eq!(u64::from(file.page_size), PAGE_BYTES);
        assert_eq!((file.trailing_bytes, file.appended_bytes), (0, 0));
        assert!(!file.database_state.is_dirty());
    }
    assert!(run.is_clean(), "{:?}", run.files);
}

#[test]
fn a_flipped_bit_on_the_disk_is_found_in_its_page() {
    let dir = tempfile::tempdir().expect("tempdir");
    let job = job(dir.path());
    let backend = initialised(&job, dir.path());
    let victim = &job.instances()[1].database_path;
    // A page well inside the file, past the header pages.
    let page = 100;
    backend
        .flip_bit(victim, page * PAGE_BYTES + 1000, 3)
        .expect("flip");
    let run = checked(&job, &backend);
    let totals = run.totals();
    assert_eq!(
        totals.pages_seen,
        u64::from(DATABASES) * DB_BYTES / PAGE_BYTES
    );
    // One bit: the page's ECC can correct it (bad pages are those it cannot).
    assert_eq!(
        (totals.pages_bad, totals.pages_correctable),
        (0, 1),
        "one damaged page: {totals:?}"
    );
    let damaged: Vec<(u64, Option<u64>)> = run.files[1]
        .damaged_pages
        .iter()
        .map(|damaged| (damaged.page_number, damaged.bit))
        .collect();
    assert_eq!(
        damaged,
        [(page, Some(1000 * 8 + 3))],
        "the page and its bit"
    );
    assert!(run.files[0].is_clean(), "the other database is untouched");
    assert!(!run.files[1].is_clean());
    assert!(!run.is_clean());
}
