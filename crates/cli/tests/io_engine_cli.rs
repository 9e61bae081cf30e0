//! The I/O engine choice (`storage.io_engine`, `--io-engine`) through the real binary: a bad
//! value is refused with exit 2 before anything is written, naming the key or flag and the
//! allowed values; io_uring carries every test type that opens database and log files, and
//! `result.json` and the test log say which engine ran.

use std::path::Path;

use predicates::prelude::*;

mod common;
use common::{jetproof, result, small_job, valid_result};

/// Whether this kernel lets us make an io_uring ring (a container may forbid it).
fn uring_works() -> bool {
    jetproof_io::uring::UringBackend::new().is_ok()
}

fn test_log(path: &Path) -> String {
    std::fs::read_to_string(path).expect("test.log")
}

#[test]
fn an_unknown_engine_in_the_job_exits_2_naming_the_key_and_the_values() {
    let dir = tempfile::tempdir().expect("tempdir");
    let job = small_job(dir.path(), "2s", "");
    let text = std::fs::read_to_string(&job).expect("job");
    std::fs::write(
        &job,
        text.replace("[storage]\n", "[storage]\nio_engine = \"uring\"\n"),
    )
    .expect("write job");
    for command in [
        vec!["run", "--test", "performance"],
        vec!["init"],
        vec!["checksum"],
        vec!["recover"],
    ] {
        let mut args = vec![command[0], job.to_str().expect("utf-8")];
        args.extend(&command[1..]);
        args.extend(["--out", "r"]);
        jetproof(dir.path())
            .args(&args)
            .assert()
            .code(2)
            .stderr(predicate::str::contains("storage.io_engine"))
            .stderr(predicate::str::contains("\"uring\""))
            .stderr(predicate::str::contains(
                "use \"std\", \"io_uring\" or \"auto\"",
            ));
    }
    // Nothing was done: no databases, no results directory.
    assert!(!dir.path().join("jetproof-data").exists());
    assert!(!dir.path().join("r").exists());
}

#[test]
fn an_unknown_engine_flag_exits_2_naming_the_flag_and_the_values() {
    let dir = tempfile::tempdir().expect("tempdir");
    let job = small_job(dir.path(), "2s", "");
    jetproof(dir.path())
        .args([
            "run",
            job.to_str().expect("utf-8"),
            "--test",
            "performance",
            "--io-engine",
            "aio",
            "--out",
            "r",
        ])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--io-engine"))
        .stderr(predicate::str::contains(
            "use \"std\", \"io_uring\" or \"auto\"",
        ))
        .stderr(predicate::str::contains("storage.io_engine"));
    assert!(!dir.path().join("jetproof-data").exists());
    assert!(!dir.path().join("r").exists());
}

#[test]
fn the_default_engine_is_std_and_result_json_says_so() {
    let dir = tempfile::tempdir().expect("tempdir");
    let job = small_job(dir.path(), "2s", "");
    jetproof(dir.path())
        .args(["init", job.to_str().expect("utf-8"), "--out", "init"])
        .assert()
        .success();
    let result = valid_result(&dir.path().join("init/result.json"), "init");
    assert_eq!(result.io_engine.as_deref(), Some("std"));
    let log = test_log(&dir.path().join("init/test.log"));
    assert!(
        log.contains("I/O engine: std (storage.io_engine = \"std\")"),
        "{log}"
    );
    assert!(log.contains("direct I/O off, I/O engine std"), "{log}");
    // The CRC-32C implementation the process timed and chose (`jetproof_io::crc`).
    assert!(
        log.contains("Checksums: CRC-32C by crc-fast (")
            || log.contains("Checksums: CRC-32C by crc32c ("),
        "{log}"
    );
}

/// io_uring through init, a performance run on direct I/O, backup, soft recovery and checksum:
/// every result names it. Where the kernel refuses io_uring, asking for it is exit 2 naming the
/// key and the fix, and "auto" falls back to std, saying so.
#[test]
fn io_uring_carries_every_test_type_and_is_named_in_the_results() {
    let dir = tempfile::tempdir().expect("tempdir");
    let job = small_job(
        dir.path(),
        "2s",
        "[log]\nfile_size = \"64KiB\"\nbuffer_size = \"64KiB\"\n",
    );
    // Direct I/O, as a real run: the temporary directory is on a disk-backed file system here
    // (a tmpfs one would be refused with exit 2 naming storage.direct_io).
    let text = std::fs::read_to_string(&job).expect("job");
    std::fs::write(&job, text.replace("direct_io = false", "direct_io = true")).expect("write job");
    let job_arg = job.to_str().expect("utf-8");
    let run = |args: &[&str]| {
        let mut all = args.to_vec();
        all.insert(1, job_arg);
        jetproof(dir.path()).args(all).assert()
    };

    if !uring_works() {
        run(&["run", "--test", "performance", "--io-engine", "io_uring"])
            .code(2)
            .stderr(predicate::str::contains("storage.io_engine"))
            .stderr(predicate::str::contains("--io-engine std"));
        run(&["init", "--io-engine", "auto", "--out", "init"])
            .success()
            .stderr(predicate::str::contains("so std is used"));
        let result = valid_result(&dir.path().join("init/result.json"), "init");
        assert_eq!(result.io_engine.as_deref(), Some("std"));
        eprintln!("io_uring is not available on this kernel: only the refusal was tested");
        return;
    }

    // The run initialises the databases first, through the same engine.
    run(&[
        "run",
        "--test",
        "performance",
        "--io-engine",
        "io_uring",
        "--out",
        "perf",
    ])
    .success()
    .stdout(predicate::str::contains("I/O Engine"));
    let perf = valid_result(&dir.path().join("perf/result.json"), "performance");
    assert_eq!(perf.io_engine.as_deref(), Some("io_uring"));
    assert_eq!(
        perf.parameters.job["storage"]["io_engine"], "io_uring",
        "the job as run"
    );
    assert!(perf.achieved_iops.expect("achieved") > 0.0);
    for instance in &perf.instances {
        for class in ["db_read", "log_write"] {
            assert!(
                instance.io.get(class).is_some_and(|c| c.count > 0),
                "{} has no {class}",
                instance.name
            );
        }
    }
    let log = test_log(&dir.path().join("perf/test.log"));
    for line in [
        "I/O engine: io_uring (storage.io_engine = \"io_uring\")",
        "Attaching databases (I/O engine io_uring) ...",
    ] {
        assert!(log.contains(line), "{line:?} missing:\n{log}");
    }
    let init = result(&dir.path().join("perf/init/result.json"));
    assert_eq!(
        init["io_engine"], "io_uring",
        "the initialisation before the run"
    );

    run(&[
        "run",
        "--test",
        "backup",
        "--io-engine",
        "io_uring",
        "--out",
        "backup",
    ])
    .success();
    let backup = valid_result(&dir.path().join("backup/result.json"), "backup");
    assert_eq!(backup.io_engine.as_deref(), Some("io_uring"));
    assert!(
        test_log(&dir.path().join("backup/test.log")).contains("I/O engine io_uring"),
        "backup test log"
    );

    run(&[
        "run",
        "--test",
        "soft-recovery",
        "--log-files",
        "2",
        "--io-engine",
        "io_uring",
        "--out",
        "soft",
    ])
    .success();
    let soft = valid_result(&dir.path().join("soft/result.json"), "recovery");
    assert_eq!(soft.io_engine.as_deref(), Some("io_uring"));
    assert!(
        test_log(&dir.path().join("soft/test.log"))
            .contains("Attaching databases (I/O engine io_uring) ..."),
        "soft-recovery test log"
    );

    // The job file's key, "auto": io_uring works here, so io_uring it is.
    let text = std::fs::read_to_string(&job).expect("job");
    std::fs::write(
        &job,
        text.replace("[storage]\n", "[storage]\nio_engine = \"auto\"\n"),
    )
    .expect("write job");
    run(&["checksum", "--out", "checksum"]).success();
    let checksum = valid_result(&dir.path().join("checksum/result.json"), "checksum");
    assert_eq!(checksum.io_engine.as_deref(), Some("io_uring"));
    assert_eq!(checksum.parameters.job["storage"]["io_engine"], "auto");
    assert!(
        test_log(&dir.path().join("checksum/test.log"))
            .contains("I/O engine: io_uring (storage.io_engine = \"auto\")"),
        "checksum test log"
    );
}
