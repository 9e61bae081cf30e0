//! `jetproof aggregate` through the real binary (`docs/many-servers.md`): real results of a
//! performance test and a backup, and copies of them edited into each case the command must
//! refuse (exit 2, naming the file), combine (a directory of hosts' directories) or fail (a
//! failing host named).

use std::path::Path;

use serde_json::Value;

mod common;
use common::{jetproof, result, small_job};

/// A copy of results directory `from` as `to`, its result.json changed by `edit`.
fn copy_edited(root: &Path, from: &str, to: &str, edit: impl FnOnce(&mut Value)) {
    let target = root.join(to);
    std::fs::create_dir_all(&target).expect("dir");
    let mut value = result(&root.join(from).join("result.json"));
    edit(&mut value);
    std::fs::write(
        target.join("result.json"),
        serde_json::to_string_pretty(&value).expect("json"),
    )
    .expect("write");
}

fn rename_host(value: &mut Value, name: &str) {
    value["host"]["name"] = Value::from(name);
}

/// Runs `jetproof aggregate ARGS` in `root`: exit code, stdout, stderr.
fn aggregate(root: &Path, args: &[&str]) -> (Option<i32>, String, String) {
    let mut full = vec!["aggregate"];
    full.extend(args);
    let output = jetproof(root).args(&full).output().expect("aggregate");
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

fn refused(root: &Path, args: &[&str], file: &str, words: &str) {
    let (code, stdout, stderr) = aggregate(root, args);
    assert_eq!(code, Some(2), "{args:?}: {stdout}{stderr}");
    assert!(
        stderr.contains(file) && stderr.contains(words),
        "{args:?}: expected {file} and {words:?} in {stderr}"
    );
}

#[test]
fn aggregate_refuses_what_does_not_combine_and_names_the_file() {
    let root = tempfile::tempdir().expect("tempdir");
    let root = root.path();
    let job = small_job(root, "1s", "");
    let job = job.to_str().expect("utf-8");
    jetproof(root).args(["init", job]).assert().success();
    jetproof(root)
        .args([
            "run",
            job,
            "--test",
            "performance",
            "--host-name",
            "a",
            "--out",
            "ra",
        ])
        .assert()
        .success();
    jetproof(root)
        .args([
            "run",
            job,
            "--test",
            "backup",
            "--host-name",
            "b",
            "--out",
            "rb",
        ])
        .assert()
        .success();

    refused(root, &["ra", "rb"], "rb/result.json", "is a backup result");
    refused(root, &["ra", "ra"], "ra/result.json", "given twice");
    copy_edited(root, "ra", "rc", |v| {
        rename_host(v, "c");
        v["schema_version"] = Value::from(4);
    });
    refused(root, &["ra", "rc"], "rc/result.json", "schema version 4");
    copy_edited(root, "ra", "rd", |v| {
        rename_host(v, "d");
        v["histogram_layout"]["significant_digits"] = Value::from(3);
    });
    refused(root, &["ra", "rd"], "rd/result.json", "histogram layout");
    copy_edited(root, "ra", "re", |v| {
        rename_host(v, "e");
        let shift = |text: &str| {
            let time = jetproof_results::clock::parse_time(text).expect("time");
            jetproof_results::clock::rfc3339_millis(time + std::time::Duration::from_secs(3600))
        };
        let (start, end) = (
            shift(v["measured_start"].as_str().expect("start")),
            shift(v["measured_end"].as_str().expect("end")),
        );
        v["measured_start"] = Value::from(start);
        v["measured_end"] = Value::from(end);
    });
    refused(root, &["ra", "re"], "re/result.json", "does not overlap");
    refused(root, &["nowhere"], "nowhere", "not a results directory");
    // --out naming a host's own directory would overwrite its result.
    refused(
        root,
        &["ra", "--out", "ra"],
        "ra",
        "a host's result being aggregated",
    );
    assert_eq!(result(&root.join("ra/result.json"))["host"]["name"], "a");

    // A directory of hosts' directories; the aggregate written beside them is skipped next time.
    copy_edited(root, "ra", "set/a", |_| {});
    copy_edited(root, "ra", "set/f", |v| rename_host(v, "f"));
    let (code, stdout, stderr) = aggregate(root, &["set", "--out", "set/aggregate"]);
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    let whole = result(&root.join("set/aggregate/result.json"));
    let one = result(&root.join("ra/result.json"));
    let reads: u64 = one["instances"]
        .as_array()
        .expect("instances")
        .iter()
        .map(|i| i["db_read"]["count"].as_u64().expect("count"))
        .sum();
    assert_eq!(
        whole["totals"]["db_read"]["count"].as_u64(),
        Some(2 * reads)
    );
    assert_eq!(whole["hosts"].as_array().map(|h| h.len()), Some(2));
    let (code, stdout, stderr) = aggregate(root, &["set", "--out", "again"]);
    assert_eq!(
        code,
        Some(0),
        "the aggregate among the hosts is skipped: {stdout}{stderr}"
    );

    // A failing host fails the whole, named; the others still count.
    copy_edited(root, "ra", "rg", |v| {
        rename_host(v, "g");
        v["verdict"] = Value::from("fail");
        v["reasons"] = serde_json::json!(["db1: database read average 31.0 ms over 20 ms"]);
    });
    let (code, stdout, stderr) = aggregate(root, &["ra", "rg", "--out", "ag"]);
    assert_eq!(code, Some(1), "{stdout}{stderr}");
    assert!(stdout.contains("host g fails"), "{stdout}");
    let report = std::fs::read_to_string(root.join("ag/report.md")).expect("report");
    assert!(
        report.contains("| **Solution** | **Fail** | failing: g |"),
        "{report}"
    );
}

/// Backup results aggregate into the backup table: MB/s per database, per server, in total.
#[test]
fn backup_results_give_mb_per_sec_per_database_server_and_total() {
    let root = tempfile::tempdir().expect("tempdir");
    let root = root.path();
    let job = small_job(root, "1s", "");
    let job = job.to_str().expect("utf-8");
    jetproof(root).args(["init", job]).assert().success();
    jetproof(root)
        .args([
            "run",
            job,
            "--test",
            "backup",
            "--host-name",
            "b1",
            "--out",
            "b1",
        ])
        .assert()
        .success();
    copy_edited(root, "b1", "b2", |v| rename_host(v, "b2"));
    let (code, stdout, stderr) = aggregate(root, &["b1", "b2", "--out", "agg"]);
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    // A server's MB/s is the sum of its databases' as printed (two decimals): per database ×
    // databases = per server; the solution's the sum of the servers'.
    let one = result(&root.join("b1/result.json"));
    let server: f64 = one["instances"]
        .as_array()
        .expect("instances")
        .iter()
        .map(|i| (i["backup"]["mb_per_sec"].as_f64().expect("MB/s") * 100.0).round() / 100.0)
        .sum();
    let report = std::fs::read_to_string(root.join("agg/report.md")).expect("report");
    assert!(
        report.contains("## Database Backup (Read-only) Performance"),
        "{report}"
    );
    assert!(
        report.contains(&format!(
            "MB read per second, whole solution (the servers' sums added): {:.2}",
            2.0 * server
        )),
        "{report}"
    );
    let whole = result(&root.join("agg/result.json"));
    assert_eq!(whole["test"], "backup");
    assert!(
        whole["totals"]["backup_read"]["count"]
            .as_u64()
            .expect("count")
            > 0
    );
}

/// Soft recovery and checksum results aggregate into their tables: logs replayed and seconds
/// per log per server and overall; seen and bad pages per server and their sum.
#[test]
fn soft_recovery_and_checksum_results_give_their_tables() {
    let root = tempfile::tempdir().expect("tempdir");
    let root = root.path();
    let job = small_job(root, "1s", "");
    let job = job.to_str().expect("utf-8");
    jetproof(root).args(["init", job]).assert().success();
    jetproof(root)
        .args(["run", job, "--test", "soft-recovery", "--log-files", "2"])
        .args(["--host-name", "s1", "--out", "s1"])
        .assert()
        .success();
    jetproof(root)
        .args(["checksum", job, "--host-name", "c1", "--out", "c1"])
        .assert()
        .success();
    copy_edited(root, "s1", "s2", |v| rename_host(v, "s2"));
    copy_edited(root, "c1", "c2", |v| rename_host(v, "c2"));

    let (code, stdout, stderr) = aggregate(root, &["s1", "s2", "--out", "as"]);
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    let one = result(&root.join("s1/result.json"));
    let logs = one["totals"]["logs_replayed"]
        .as_u64()
        .expect("logs replayed");
    assert!(
        logs >= 4,
        "two instances replay at least 2 logs each: {logs}"
    );
    let per_log: Vec<f64> = one["instances"]
        .as_array()
        .expect("instances")
        .iter()
        .map(|i| i["seconds_per_log"].as_f64().expect("seconds per log"))
        .collect();
    let average = per_log.iter().sum::<f64>() / per_log.len() as f64;
    let report = std::fs::read_to_string(root.join("as/report.md")).expect("report");
    assert!(
        report.contains("## Transaction Log Recovery/Replay Performance"),
        "{report}"
    );
    // What the test generated beside what it replayed (only the generated count toward
    // ESRP's 500), per server and summed.
    let generated = one["totals"]["logs_generated"]
        .as_u64()
        .expect("logs generated");
    assert!(
        report.contains("| Server | Logs generated | Logs replayed |"),
        "{report}"
    );
    assert!(
        report.contains(&format!(
            "| **All servers** | {} | {} | | {average:.3} |",
            2 * generated,
            2 * logs
        )),
        "{report}"
    );

    let (code, stdout, stderr) = aggregate(root, &["c1", "c2", "--out", "ac"]);
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    let one = result(&root.join("c1/result.json"));
    let seen = one["totals"]["pages_seen"].as_u64().expect("pages seen");
    let report = std::fs::read_to_string(root.join("ac/report.md")).expect("report");
    assert!(
        report.contains("## Database Checksum Statistics"),
        "{report}"
    );
    assert!(
        report.contains(&format!("| **(Sum)** | {} | 0 | 0 | 0 |", 2 * seen)),
        "{report}"
    );
}
