//! `jetproof run` with database copies, through the real binary: with
//! `simulation.copies_per_database = 2` every instance's closed log generations are read back in
//! the `replication_read` class and the report shows Jetstress's "Log Replication I/O
//! Performance" table; with one copy there is no replication I/O at all.

use std::path::{Path, PathBuf};

use assert_cmd::Command;

mod common;
use common::LENIENT_THRESHOLDS;

/// Two 8 MiB databases of 8 KiB pages, buffered I/O, 64 KiB log generations (so several close
/// within the 2-second window), with `copies` copies per database and lenient thresholds (the
/// verdict is not what these tests check).
fn job(dir: &Path, copies: u32) -> PathBuf {
    let job = dir.join("job.toml");
    std::fs::write(
        &job,
        format!(
            "[storage]\ndatabases = 2\ndb_size = \"8MiB\"\npage_size = \"8KiB\"\ndirect_io = false\n\
             [workload]\nrecord_size = \"1KiB\"\nthreads = 2\n\
             [cache]\nmin_size = \"512KiB\"\nmax_size = \"1MiB\"\n\
             [log]\nfile_size = \"64KiB\"\nbuffer_size = \"64KiB\"\n\
             [simulation]\ncopies_per_database = {copies}\n\
             [run]\nduration = \"2s\"\nsample_interval = \"500ms\"\n{LENIENT_THRESHOLDS}"
        ),
    )
    .expect("write job");
    job
}

/// Runs the performance test; returns `result.json` and the terminal output.
fn run(dir: &Path, copies: u32) -> (serde_json::Value, String) {
    let job = job(dir, copies);
    let output = Command::cargo_bin("jetproof")
        .expect("binary built")
        .current_dir(dir)
        .args([
            "run",
            job.to_str().expect("utf-8"),
            "--test",
            "performance",
            "--out",
            "r",
        ])
        .output()
        .expect("run jetproof");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "exit {:?}\nstdout:\n{stdout}\nstderr:\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    let text = std::fs::read_to_string(dir.join("r/result.json")).expect("result.json");
    (serde_json::from_str(&text).expect("valid JSON"), stdout)
}

#[test]
fn two_copies_read_closed_generations_back_on_every_instance() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (r, stdout) = run(dir.path(), 2);
    assert!(
        stdout.contains("Log Replication I/O Performance"),
        "{stdout}"
    );
    let instances = r["instances"].as_array().expect("instances");
    assert_eq!(instances.len(), 2);
    for instance in instances {
        let replication = &instance["replication_read"];
        assert!(
            replication["count"].as_u64().expect("replication count") > 0,
            "{instance}"
        );
        // Each 64 KiB generation is read whole, in one read.
        assert_eq!(
            replication["avg_bytes"].as_f64(),
            Some(65_536.0),
            "{instance}"
        );
        let sent = &instance["log_replication"];
        assert!(
            sent["generations_read"].as_u64().expect("generations") > 0,
            "{instance}"
        );
        assert!(
            sent["frames_verified"].as_u64().expect("frames") > 0,
            "{instance}"
        );
    }
    let log = std::fs::read_to_string(dir.path().join("r/test.log")).expect("test.log");
    assert!(
        log.contains("Log replication: 2 copies per database"),
        "{log}"
    );
    assert!(log.contains("log files kept"), "{log}");
}

#[test]
fn one_copy_has_no_replication_reads() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (r, stdout) = run(dir.path(), 1);
    assert!(!stdout.contains("Log Replication"), "{stdout}");
    for instance in r["instances"].as_array().expect("instances") {
        let count = instance
            .get("replication_read")
            .and_then(|c| c["count"].as_u64())
            .unwrap_or(0);
        assert_eq!(count, 0, "{instance}");
        assert!(instance.get("log_replication").is_none(), "{instance}");
    }
}

/// Four copies: three passive copies, so every closed generation is read three times (one pass
/// per passive copy; `docs/workload.md`, "Log replication reads").
#[test]
fn four_copies_read_each_closed_generation_once_per_passive_copy() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (r, _) = run(dir.path(), 4);
    for instance in r["instances"].as_array().expect("instances") {
        let sent = &instance["log_replication"];
        let generations = sent["generations_read"].as_u64().expect("generations");
        assert!(generations > 0, "{instance}");
        assert_eq!(
            sent["bytes_read"].as_u64(),
            Some(3 * generations * 65_536),
            "{instance}"
        );
    }
    let log = std::fs::read_to_string(dir.path().join("r/test.log")).expect("test.log");
    assert!(
        log.contains("Log replication: 4 copies per database") && log.contains("(3 passes)"),
        "{log}"
    );
}
