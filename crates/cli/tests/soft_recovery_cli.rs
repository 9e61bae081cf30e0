//! `jetproof run --test soft-recovery` through the real binary: on small databases (which the
//! run initialises itself) with 64 KiB log generations, four generations per instance are
//! written with the checkpoint held, the instances are stopped uncleanly and replayed. The result
//! must show every generation replayed with its timing and the replay's own I/O, and the
//! databases must be clean after it: `checksum` passes and a performance run attaches.

use predicates::prelude::*;

mod common;
use common::{jetproof, small_job};

#[test]
fn soft_recovery_replays_the_generated_logs_and_leaves_clean_databases() {
    let dir = tempfile::tempdir().expect("tempdir");
    let job = small_job(
        dir.path(),
        "60s",
        "[log]\nfile_size = \"64KiB\"\nbuffer_size = \"64KiB\"\n",
    );
    let job_arg = job.to_str().expect("utf-8");
    // No `init` first: the run initialises the missing databases itself.
    jetproof(dir.path())
        .args([
            "run",
            job_arg,
            "--test",
            "soft-recovery",
            "--log-files",
            "4",
            "--out",
            "soft",
        ])
        .assert()
        .success()
        .stdout(predicate::str::contains("Soft Recovery Statistics"))
        .stdout(predicate::str::contains("Overall Test Result: Pass"));

    let result: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("soft/result.json")).expect("result.json"),
    )
    .expect("valid JSON");
    assert_eq!(result["test"], "recovery");
    assert_eq!(result["verdict"], "pass", "{result}");
    let instances = result["instances"].as_array().expect("instances");
    assert_eq!(instances.len(), 2, "{result}");
    for instance in instances {
        assert!(
            instance["logs_generated"].as_u64().expect("logs_generated") >= 4,
            "{instance}"
        );
        // The checkpoint was held at attach: every generated file is replayed.
        assert!(
            instance["logs_replayed"].as_u64().expect("logs_replayed") >= 4,
            "{instance}"
        );
        let seconds = instance["seconds"].as_f64().expect("seconds");
        let per_log = instance["seconds_per_log"]
            .as_f64()
            .expect("seconds_per_log");
        assert!(
            seconds > 0.0 && per_log > 0.0 && per_log <= seconds,
            "{instance}"
        );
        assert!(
            instance["records_applied"]
                .as_u64()
                .expect("records_applied")
                > 0,
            "{instance}"
        );
        // The replay read the log in large sequential reads.
        let log_read = &instance["log_read"];
        assert!(
            log_read["count"].as_u64().expect("log_read count") > 0,
            "{instance}"
        );
        assert!(
            log_read["avg_bytes"].as_f64().expect("avg_bytes") > 0.0,
            "{instance}"
        );
        // The replay's page reads and writes are measured too: every page it wrote back is a
        // database write of the replay (the header writes of the clean close come on top).
        let pages_written = instance["pages_written"].as_u64().expect("pages_written");
        assert!(pages_written > 0, "{instance}");
        assert!(
            instance["db_write"]["count"]
                .as_u64()
                .expect("db_write count")
                >= pages_written,
            "{instance}"
        );
        assert!(
            instance["db_read"]["count"]
                .as_u64()
                .expect("db_read count")
                > 0,
            "{instance}"
        );
        // Only the replay's classes are reported.
        assert!(instance.get("log_write").is_none(), "{instance}");
    }
    let report = std::fs::read_to_string(dir.path().join("soft/report.md")).expect("report.md");
    for words in [
        "## Soft Recovery Statistics",
        "## Soft Recovery I/O Performance",
        "| db1 | log_read |",
    ] {
        assert!(report.contains(words), "{words:?} missing from:\n{report}");
    }
    assert!(
        !report.contains("Transactional I/O Performance"),
        "a replay's I/O is not transactional:\n{report}"
    );
    let test_log = std::fs::read_to_string(dir.path().join("soft/test.log")).expect("test.log");
    for words in [
        "Generating log files",
        "Log files generated",
        "Recovering databases",
        "Soft recovery took",
    ] {
        assert!(
            test_log.contains(words),
            "{words:?} missing from:\n{test_log}"
        );
    }

    // Recovered databases are clean: checksum passes, recover has nothing to do, a run attaches.
    jetproof(dir.path())
        .args(["checksum", job_arg, "--out", "sum"])
        .assert()
        .success();
    jetproof(dir.path())
        .args(["recover", job_arg])
        .assert()
        .success()
        .stdout(predicate::str::contains("nothing to recover"));
    jetproof(dir.path())
        .args([
            "run",
            job_arg,
            "--test",
            "performance",
            "--duration",
            "1s",
            "--out",
            "after",
        ])
        .assert()
        .success();
}

#[test]
fn zero_log_files_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let job = small_job(
        dir.path(),
        "60s",
        "[log]\nfile_size = \"64KiB\"\nbuffer_size = \"64KiB\"\n",
    );
    jetproof(dir.path())
        .args([
            "run",
            job.to_str().expect("utf-8"),
            "--test",
            "soft-recovery",
            "--log-files",
            "0",
        ])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--log-files"));
}
