//! `jetproof run` through the real binary: each built test type runs on small databases and
//! writes a valid result; thresholds decide the verdict; bad input exits 2.

use predicates::prelude::*;

mod common;
use common::{jetproof, result, small_job};

#[test]
fn performance_initialises_first_then_measures_and_passes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let job = small_job(dir.path(), "2s", "");
    jetproof(dir.path())
        .args([
            "run",
            job.to_str().expect("utf-8"),
            "--test",
            "performance",
            "--out",
            "r",
        ])
        .assert()
        .success()
        .stderr(predicate::str::contains("initialising them first"))
        .stdout(predicate::str::contains("Overall Test Result: Pass"))
        .stdout(predicate::str::contains("Transactional I/O Performance"));
    let r = result(&dir.path().join("r/result.json"));
    assert_eq!(r["test"], "performance");
    assert_eq!(r["verdict"], "pass");
    assert!(r["achieved_iops"].as_f64().expect("achieved") > 0.0);
    for instance in r["instances"].as_array().expect("instances") {
        let read = &instance["db_read"];
        assert!(read["count"].as_u64().expect("count") > 0, "{instance}");
        assert!(read["p99_ms"].as_f64().expect("p99") >= read["p50_ms"].as_f64().expect("p50"));
        assert!(read["max_interval_avg_ms"].as_f64().is_some(), "{instance}");
        assert!(
            read["histogram"]["latency"]["count"]
                .as_u64()
                .expect("histogram")
                > 0
        );
    }
    // Background maintenance ran beside the workload in 256 KiB reads (8 MiB files: every read
    // is whole), paced near the seeds' 7 reads/s, and it is not counted as transactional I/O.
    let mut transactional = 0.0;
    for instance in r["instances"].as_array().expect("instances") {
        let bdm = &instance["bdm_read"];
        assert_eq!(bdm["avg_bytes"].as_f64(), Some(262_144.0), "{instance}");
        let rate = bdm["ops_per_sec"].as_f64().expect("bdm rate");
        assert!(
            (3.0..=12.0).contains(&rate),
            "{rate} BDM reads/s: {instance}"
        );
        assert!(
            instance["background_maintenance"]["pages_verified"]
                .as_u64()
                .expect("pages verified")
                > 0
        );
        transactional += ["db_read", "db_write"]
            .iter()
            .filter_map(|c| instance[c]["ops_per_sec"].as_f64())
            .sum::<f64>();
    }
    let achieved = r["achieved_iops"].as_f64().expect("achieved");
    assert!(
        (achieved - transactional).abs() <= 1e-6 * achieved,
        "{achieved} vs {transactional}"
    );
    // Jetstress's Initial and Final Database Size: the files' lengths at attach and at the end
    // of the window; the final one is the file as it stands after the run (no growth at close).
    let mut initial_sum = 0;
    let mut final_sum = 0;
    for instance in r["instances"].as_array().expect("instances") {
        let figure = |key: &str| instance[key].as_u64().unwrap_or_else(|| panic!("{key}"));
        let (initial, last) = (
            figure("db_size_initial_bytes"),
            figure("db_size_final_bytes"),
        );
        assert!(initial >= 8 << 20 && last >= initial, "{instance}");
        let path = dir
            .path()
            .join(instance["database_path"].as_str().expect("path"));
        let on_disk = std::fs::metadata(&path).expect("database").len();
        assert_eq!(last, on_disk, "{instance}");
        let used = figure("db_used_final_bytes");
        assert!(used > 0 && used <= last, "{instance}");
        assert!(figure("db_used_initial_bytes") <= initial, "{instance}");
        initial_sum += initial;
        final_sum += last;
    }
    assert!(
        r["host_counters"]["database_page_fault_stalls_per_sec"]["average"]
            .as_f64()
            .is_some(),
        "{}",
        r["host_counters"]
    );
    let report = std::fs::read_to_string(dir.path().join("r/report.md")).expect("report");
    for words in [
        "## Database Sizing and Throughput".to_string(),
        format!("| Initial Database Size (bytes) | {initial_sum} |"),
        format!("| Final Database Size (bytes) | {final_sum} |"),
        "| Database Files (Count) | 2 |".to_string(),
        "| Thread Count | 2 (per database) |".to_string(),
        "## Database Configuration".to_string(),
        "Database Page Fault Stalls/sec".to_string(),
    ] {
        assert!(report.contains(&words), "missing {words:?} in\n{report}");
    }
    let samples = std::fs::read_to_string(dir.path().join("r/samples.csv")).expect("samples");
    assert!(samples.lines().count() > 2, "{samples}");
    let log = std::fs::read_to_string(dir.path().join("r/test.log")).expect("log");
    for phase in [
        "Attaching databases",
        "Database cache settings",
        "Database flush thresholds",
        "Operation mix: Sessions 2, Inserts 40%",
        "Attaining prerequisites",
        "Background database maintenance: on, 256 KiB reads, paced at 7.0 reads/s",
        "Databases are shut down",
    ] {
        assert!(log.contains(phase), "missing {phase:?} in\n{log}");
    }
    // The databases were closed cleanly: a backup (which refuses dirty ones) runs on them.
    jetproof(dir.path())
        .args([
            "run",
            job.to_str().expect("utf-8"),
            "--test",
            "backup",
            "--out",
            "b",
        ])
        .assert()
        .success()
        .stdout(predicate::str::contains("Database backup statistics"));
    let b = result(&dir.path().join("b/result.json"));
    assert_eq!(b["test"], "backup");
    assert!(b["totals"]["mb_per_sec"].as_f64().expect("rate") > 0.0);
    assert!(
        b["instances"][1]["backup_read"]["avg_bytes"]
            .as_f64()
            .expect("bytes")
            > 0.0
    );
}

#[test]
fn an_impossible_threshold_fails_with_its_reason() {
    let dir = tempfile::tempdir().expect("tempdir");
    let job = small_job(
        dir.path(),
        "2s",
        "[thresholds]\ndb_read_avg_ms = 0.000001\n",
    );
    jetproof(dir.path())
        .args([
            "run",
            job.to_str().expect("utf-8"),
            "--test",
            "performance",
            "--out",
            "r",
        ])
        .assert()
        .code(1)
        .stdout(predicate::str::contains("Overall Test Result: Fail"))
        .stdout(predicate::str::contains(
            "I/O Database Reads Average Latency",
        ));
    let r = result(&dir.path().join("r/result.json"));
    assert_eq!(r["verdict"], "fail");
    assert!(
        r["reasons"][0]
            .as_str()
            .expect("reason")
            .contains("above the limit of 0.000001 ms"),
        "{}",
        r["reasons"]
    );
}

#[test]
fn a_mix_that_does_not_sum_to_100_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let job = small_job(dir.path(), "2s", "");
    let text = std::fs::read_to_string(&job).expect("read") + "";
    std::fs::write(
        &job,
        text.replace("threads = 2", "threads = 2\nread_percent = 30"),
    )
    .expect("write");
    jetproof(dir.path())
        .args(["run", job.to_str().expect("utf-8"), "--test", "performance"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("sums to 95"));
    assert!(!dir.path().join("jetproof-data").exists());
    assert!(!dir.path().join("jetproof-results").exists());
}

#[test]
fn backup_without_databases_says_to_init() {
    let dir = tempfile::tempdir().expect("tempdir");
    let job = small_job(dir.path(), "2s", "");
    jetproof(dir.path())
        .args(["run", job.to_str().expect("utf-8"), "--test", "backup"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("jetproof init"));
}

#[test]
fn stress_ends_with_a_checksum_of_every_page() {
    let dir = tempfile::tempdir().expect("tempdir");
    let job = small_job(dir.path(), "2s", "");
    let job = job.to_str().expect("utf-8");
    jetproof(dir.path())
        .args(["init", job, "--out", "i"])
        .assert()
        .success();
    jetproof(dir.path())
        .args([
            "run",
            job,
            "--test",
            "stress",
            "--duration",
            "1s",
            "--out",
            "s",
        ])
        .assert()
        .success()
        .stdout(predicate::str::contains("Database Checksum Statistics"));
    let r = result(&dir.path().join("s/result.json"));
    assert_eq!(r["test"], "stress");
    assert_eq!(r["verdict"], "pass");
    // The job's own maxima (lenient, see `common::LENIENT_THRESHOLDS`) stand; stress's 200 ms
    // default for unset maxima is checked in `jetproof-job`'s unit tests.
    assert_eq!(r["parameters"]["limits"]["db_read_max_ms"], 10000.0);
    for instance in r["instances"].as_array().expect("instances") {
        let seen = instance["pages_seen"].as_u64().expect("pages_seen");
        let size = std::fs::metadata(
            instance["database_path"]
                .as_str()
                .map(|p| dir.path().join(p))
                .expect("path"),
        )
        .expect("database")
        .len();
        assert_eq!(seen * 8192, size, "every page of {instance} seen");
        assert_eq!(instance["pages_bad"], 0);
    }
    let log = std::fs::read_to_string(dir.path().join("s/test.log")).expect("log");
    assert!(
        log.contains("Overall test result after the checksum pass: Pass"),
        "{log}"
    );
}

#[test]
fn auto_tune_picks_a_session_count_and_reports_its_trials() {
    let dir = tempfile::tempdir().expect("tempdir");
    // 100 transactional IOPS: one session per instance reaches it on any machine.
    let job = small_job(
        dir.path(),
        "2s",
        "[simulation]\nmailboxes = 100\niops_per_mailbox = 1.0\n",
    );
    let text = std::fs::read_to_string(&job).expect("read");
    std::fs::write(&job, text.replace("threads = 2", "threads = \"auto\"")).expect("write");
    let job = job.to_str().expect("utf-8");
    jetproof(dir.path())
        .args(["init", job, "--out", "i"])
        .assert()
        .success();
    // The verdict depends on the paced window's noise at so low a rate: not asserted here.
    jetproof(dir.path())
        .args(["run", job, "--test", "performance", "--out", "r"])
        .assert()
        .code(predicate::in_iter([0, 1]))
        .stdout(predicate::str::contains("Auto-tune: "));
    let r = result(&dir.path().join("r/result.json"));
    let tune = &r["parameters"]["autotune"];
    assert_eq!(tune["outcome"], "chosen", "{tune}");
    let chosen = tune["chosen_sessions"].as_u64().expect("chosen");
    assert!(chosen >= 1);
    assert_eq!(
        r["parameters"]["sessions_per_instance"].as_u64(),
        Some(chosen)
    );
    assert_eq!(r["instances"][0]["sessions"].as_u64(), Some(chosen));
    // The trial sample is two sample intervals after one to settle.
    assert_eq!(tune["trial_settle_s"].as_f64(), Some(0.5));
    assert_eq!(tune["trial_measure_s"].as_f64(), Some(1.0));
    let trials = tune["trials"].as_array().expect("trials");
    let last_passing = trials
        .iter()
        .filter(|t| t["passed"] == true)
        .map(|t| t["sessions"].as_u64().expect("sessions"))
        .min();
    assert_eq!(last_passing, Some(chosen), "{tune}");
    let read_limit = r["parameters"]["limits"]["db_read_avg_ms"]
        .as_f64()
        .expect("the job's read latency limit");
    for t in trials {
        if t["passed"] == true {
            assert!(t["achieved_iops"].as_f64().expect("iops") >= 105.0, "{t}");
            assert!(
                t["db_read_avg_ms"].as_f64().expect("latency") <= read_limit,
                "{t}"
            );
        }
    }
    let log = std::fs::read_to_string(dir.path().join("r/test.log")).expect("log");
    assert!(log.contains("Operation mix: Sessions auto"), "{log}");
    assert!(
        log.contains("Auto-tune trial: 1 session per instance:"),
        "{log}"
    );
    assert!(
        log.contains(&format!("Auto-tune chose {chosen} session")),
        "{log}"
    );
}

#[test]
fn auto_tune_fails_clearly_when_the_target_is_out_of_reach() {
    let dir = tempfile::tempdir().expect("tempdir");
    // 10^9 transactional IOPS: no storage reaches it.
    let job = small_job(
        dir.path(),
        "2s",
        "[simulation]\nmailboxes = 1000\niops_per_mailbox = 1000000.0\n",
    );
    let text = std::fs::read_to_string(&job).expect("read");
    std::fs::write(
        &job,
        text.replace("threads = 2", "threads = \"auto\"")
            .replace("duration = \"2s\"", "duration = \"1s\""),
    )
    .expect("write");
    let job = job.to_str().expect("utf-8");
    jetproof(dir.path())
        .args(["init", job, "--out", "i"])
        .assert()
        .success();
    jetproof(dir.path())
        .args(["run", job, "--test", "performance", "--out", "r"])
        .assert()
        .code(1)
        .stdout(predicate::str::contains("Overall Test Result: Fail"));
    let r = result(&dir.path().join("r/result.json"));
    let tune = &r["parameters"]["autotune"];
    assert_eq!(tune["outcome"], "unreachable", "{tune}");
    assert!(tune["chosen_sessions"].is_null());
    let why = tune["why"].as_str().expect("why");
    assert!(why.contains("target of 1000000000.0 IOPS"), "{why}");
    assert!(!tune["trials"].as_array().expect("trials").is_empty());
    let reasons = r["reasons"].to_string();
    assert!(
        reasons.contains(
            "auto-tune: the storage cannot reach the target of 1000000000.0 transactional IOPS"
        ),
        "{reasons}"
    );
    let log = std::fs::read_to_string(dir.path().join("r/test.log")).expect("log");
    assert!(
        log.contains("Auto-tune: the storage cannot reach the target"),
        "{log}"
    );
}

#[test]
fn auto_tune_without_a_target_is_refused_before_anything_is_written() {
    let dir = tempfile::tempdir().expect("tempdir");
    let job = small_job(dir.path(), "2s", "");
    jetproof(dir.path())
        .args([
            "run",
            job.to_str().expect("utf-8"),
            "--test",
            "performance",
            "--threads",
            "auto",
        ])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("simulation.iops_per_mailbox"));
    assert!(!dir.path().join("jetproof-data").exists());
    assert!(!dir.path().join("jetproof-results").exists());
}
