//! Issue 18, part 1: ESRP test-set jobs. `plan --esrp` writes ESRP's durations and passes,
//! `jetproof job --default` prints the built-in job as TOML that reads back as the same job, the
//! examples under `jobs/` parse and validate and carry the figures `plan` gives for their
//! shapes, and `run.checksum_after_performance` / `run.checksum_after_stress` are honoured by
//! real runs.

use std::path::{Path, PathBuf};

use predicates::prelude::*;

mod common;
use common::{jetproof, result, small_job};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[test]
fn job_default_prints_the_built_in_job_and_it_reads_back_the_same() {
    let dir = tempfile::tempdir().expect("tempdir");
    let output = jetproof(dir.path())
        .args(["job", "--default"])
        .output()
        .expect("runs");
    assert!(output.status.success());
    let text = String::from_utf8(output.stdout).expect("utf-8");
    let job = jetproof_job::Job::parse(&text, "job --default").expect("parses");
    assert_eq!(job, jetproof_job::Job::default());
    assert!(text.contains("[run]") && text.contains("checksum_after_stress = true"));
    // Nothing was created by printing.
    assert_eq!(std::fs::read_dir(dir.path()).expect("dir").count(), 0);
}

#[test]
fn job_file_is_checked_and_printed_with_defaults_or_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let good = dir.path().join("good.toml");
    std::fs::write(&good, "[run]\nduration = \"2h\"\n").expect("write");
    let output = jetproof(dir.path())
        .args(["job", "good.toml"])
        .output()
        .expect("runs");
    assert!(output.status.success());
    let job = jetproof_job::Job::parse(&String::from_utf8_lossy(&output.stdout), "printed")
        .expect("parses");
    assert_eq!(job.run.duration.as_duration().as_secs(), 7200);
    assert_eq!(job.storage.databases, 2, "defaults filled in");
    std::fs::write(dir.path().join("bad.toml"), "[run]\nduraton = \"2h\"\n").expect("write");
    jetproof(dir.path())
        .args(["job", "bad.toml"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("duraton"));
    jetproof(dir.path()).args(["job"]).assert().code(2);
}

#[test]
fn plan_esrp_writes_esrp_durations_and_checksums() {
    let dir = tempfile::tempdir().expect("tempdir");
    jetproof(dir.path())
        .args([
            "plan",
            "--mailboxes",
            "1000",
            "--iops-per-mailbox",
            "0.16",
            "--headroom",
            "0",
            "--databases-per-server",
            "3",
            "--copies",
            "2",
            "--mailbox-size",
            "5GiB",
            "--write-job",
            "job.toml",
            "--esrp",
        ])
        .assert()
        .success();
    let job = jetproof_job::Job::load(&dir.path().join("job.toml")).expect("loads");
    assert_eq!(job.run.duration.as_duration().as_secs(), 2 * 3600);
    assert_eq!(job.run.stress_duration.as_duration().as_secs(), 24 * 3600);
    assert_eq!(job.run.recovery_log_files, 500);
    assert!(job.run.checksum_after_performance);
    assert!(job.run.checksum_after_stress);
    let text = std::fs::read_to_string(dir.path().join("job.toml")).expect("reads");
    assert!(text.contains("--test soft-recovery"), "{text}");
    // Without --write-job, --esrp has nothing to write: refused.
    jetproof(dir.path())
        .args([
            "plan",
            "--mailboxes",
            "10",
            "--iops-per-mailbox",
            "1",
            "--esrp",
        ])
        .assert()
        .code(2);
}

/// Each example under `jobs/` parses and validates, has ESRP's test set, and carries the
/// figures `plan` gives for the shape its header names.
#[test]
fn example_jobs_parse_validate_and_match_their_plans() {
    let cases: [(&str, f64, u32, u64, u32); 4] = [
        // file, target IOPS, databases, database size GiB, copies
        ("hitachi-ams2500-one-host.toml", 459.0, 5, 1530, 2),
        ("infortrend-ds1016r.toml", 160.0, 3, 1670, 2),
        ("four-copy-low-load.toml", 120.0, 4, 940, 4),
        ("typical-mailbox-data.toml", 121.2, 2, 1000, 2),
    ];
    let dir = repo().join("jobs");
    let mut seen = std::fs::read_dir(&dir)
        .expect("jobs/")
        .filter_map(|e| e.ok())
        .filter(|e| e.path().extension().is_some_and(|x| x == "toml"))
        .count();
    for (file, target, databases, gib, copies) in cases {
        let path = dir.join(file);
        let job = jetproof_job::Job::load(&path).unwrap_or_else(|e| panic!("{file}: {e}"));
        job.validate().expect("validates");
        let achieved = job.target_iops().expect("a target");
        assert!((achieved - target).abs() < 1e-9, "{file}: {achieved}");
        assert_eq!(job.instance_count(), databases as usize, "{file}");
        assert_eq!(job.db_size(), jetproof_job::ByteSize::gib(gib), "{file}");
        assert_eq!(job.simulation.copies_per_database, copies, "{file}");
        assert_eq!(job.run.duration.as_duration().as_secs(), 7200, "{file}");
        assert_eq!(
            job.run.stress_duration.as_duration().as_secs(),
            86_400,
            "{file}"
        );
        assert_eq!(job.run.recovery_log_files, 500, "{file}");
        assert!(job.run.checksum_after_performance, "{file}");
        let text = std::fs::read_to_string(&path).expect("reads");
        assert!(text.starts_with("# "), "{file} starts with its comment");
        // Content settings (issue 33): the typical-mailbox example sets one and says where
        // its figure comes from; the others keep the conservative default.
        if file == "typical-mailbox-data.toml" {
            assert_eq!(job.workload.compression_ratio, 1.3, "{file}");
            assert!(text.contains("No published measurement"), "{file}");
        } else {
            assert_eq!(job.workload.compression_ratio, 1.0, "{file}");
        }
        assert_eq!(job.workload.dedup_ratio, 1.0, "{file}");
        // The plan command in the header gives the same server.
        // The header's command: from the line naming `jetproof plan` through the first line
        // that does not continue with a backslash.
        let mut plan_line = String::new();
        for line in text.lines().skip_while(|l| !l.contains("jetproof plan")) {
            let part = line.trim_start_matches('#').trim();
            plan_line.push_str(part.trim_end_matches('\\'));
            plan_line.push(' ');
            if !part.ends_with('\\') {
                break;
            }
        }
        let args: Vec<&str> = plan_line
            .split_whitespace()
            .skip_while(|w| *w != "plan")
            .skip(1)
            .take_while(|w| *w != "--write-job")
            .collect();
        assert!(args.contains(&"--mailboxes"), "{file}: {plan_line}");
        let output = jetproof(&dir)
            .arg("plan")
            .args(&args)
            .arg("--json")
            .output()
            .expect("runs");
        assert!(output.status.success(), "{file}: {args:?}");
        let plan: serde_json::Value = serde_json::from_slice(&output.stdout).expect("json");
        assert_eq!(
            plan["target_iops_per_server"].as_f64(),
            Some(target),
            "{file}"
        );
        assert_eq!(
            plan["test_database_size_bytes"].as_u64(),
            Some(gib << 30),
            "{file}"
        );
        seen -= 1;
    }
    assert_eq!(seen, 0, "every job under jobs/ is checked here");
}

#[test]
fn checksum_after_performance_verifies_every_page_in_the_same_result() {
    let dir = tempfile::tempdir().expect("tempdir");
    let job = small_job(dir.path(), "1s", "checksum_after_performance = true\n");
    let job = job.to_str().expect("utf-8");
    jetproof(dir.path())
        .args(["run", job, "--test", "performance", "--out", "p", "--quiet"])
        .assert()
        .success()
        .stdout(predicate::str::contains("Database Checksum Statistics"));
    let r = result(&dir.path().join("p/result.json"));
    assert_eq!(r["test"], "performance");
    assert_eq!(r["verdict"], "pass");
    assert!(
        r["totals"]["checksum"]["pages_seen"]
            .as_u64()
            .expect("pages")
            > 0
    );
    for instance in r["instances"].as_array().expect("instances") {
        let size = std::fs::metadata(
            dir.path()
                .join(instance["database_path"].as_str().expect("path")),
        )
        .expect("database")
        .len();
        assert_eq!(
            instance["pages_seen"].as_u64().map(|p| p * 8192),
            Some(size)
        );
    }
}

#[test]
fn checksum_after_stress_false_skips_the_pass() {
    let dir = tempfile::tempdir().expect("tempdir");
    let job = small_job(dir.path(), "1s", "checksum_after_stress = false\n");
    let job = job.to_str().expect("utf-8");
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
            "--quiet",
        ])
        .assert()
        .success()
        .stdout(predicate::str::contains("Database Checksum Statistics").not());
    let r = result(&dir.path().join("s/result.json"));
    assert_eq!(r["test"], "stress");
    assert!(r["totals"].get("checksum").is_none(), "{}", r["totals"]);
}
