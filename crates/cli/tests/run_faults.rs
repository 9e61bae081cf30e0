//! `jetproof run` when something goes wrong, through the real binary: a page damaged on the
//! storage is found by background database maintenance and fails the run naming the page; a
//! Ctrl-C (SIGINT) mid-run ends the window, writes the partial result marked interrupted and
//! leaves the databases closed cleanly (`recover` has nothing to do and a checksum passes after).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

mod common;
use common::{interrupt, jetproof, result, small_job, spawn_jetproof};

fn database_paths(dir: &Path) -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = walk(&dir.join("jetproof-data"))
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "jpdb"))
        .collect();
    paths.sort();
    paths
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).expect("read dir") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            found.extend(walk(&path));
        } else {
            found.push(path);
        }
    }
    found
}

#[test]
fn a_page_damaged_before_the_run_is_found_by_background_maintenance() {
    let dir = tempfile::tempdir().expect("tempdir");
    // A slow paced load (20 transactional IOPS): the damaged page must reach the maintenance
    // scan as it is on the storage, not be rewritten by the workload first (see below).
    let job = small_job(
        dir.path(),
        "2s",
        "[simulation]\nmailboxes = 100\niops_per_mailbox = 0.2\n",
    );
    let job = job.to_str().expect("utf-8");
    jetproof(dir.path())
        .args(["init", job, "--out", "i"])
        .assert()
        .success();
    let databases = database_paths(dir.path());
    assert_eq!(databases.len(), 2, "{databases:?}");
    let damaged = &databases[0];
    // Flip one bit 2 MiB into the first database (page 256, inside the records `init` wrote).
    // One bit, so that the attach (which reads leaves to find the mailboxes) and the sessions,
    // which correct such a page in memory without writing it, go on, and only the storage's copy
    // stays wrong; a page beyond repair that a session reads stops its instance instead (exit 3;
    // `maintenance.rs` tests that kind). The scan reaches it ~1.1 s after attaching (8 reads of
    // 256 KiB at 7/s); the slow load keeps the chance that a session rewrites that leaf and
    // flushes it before then well under 1%. (Not "the middle of the file": the scan would take
    // size / 1.84 MB/s to get there, and the file's size is `init`'s business.)
    let mut data = std::fs::read(damaged).expect("read database");
    let page = 256u64;
    let offset = page as usize * 8192 + 1000;
    assert!(data.len() >= 4 << 20, "{} bytes", data.len());
    data[offset] ^= 0x10;
    std::fs::write(damaged, data).expect("write database");

    let assert = jetproof(dir.path())
        .args(["run", job, "--test", "performance", "--out", "r"])
        .assert()
        .code(1);
    let output = String::from_utf8_lossy(&assert.get_output().stdout).to_string();
    let r = result(&dir.path().join("r/result.json"));
    assert_eq!(r["verdict"], "fail");
    let instance = r["instances"]
        .as_array()
        .expect("instances")
        .iter()
        .find(|i| {
            i["database_path"]
                .as_str()
                .is_some_and(|p| Path::new(p).file_name() == damaged.file_name())
        })
        .expect("the damaged instance")
        .clone();
    let found = &instance["background_maintenance"]["damaged_pages"];
    assert_eq!(found.as_array().map(|a| a.len()), Some(1), "{instance}");
    assert_eq!(found[0]["page"].as_u64(), Some(page), "{found}");
    assert_eq!(found[0]["kind"], "correctable", "{found}");
    assert_eq!(
        found[0]["bit"].as_u64(),
        Some((1000 * 8 + 4) as u64),
        "{found}"
    );
    let wanted = format!("page {page}: correctable page (one flipped bit");
    let reasons = r["reasons"].to_string();
    assert!(
        reasons.contains("background database maintenance found a damaged page")
            && reasons.contains(&wanted),
        "{reasons}"
    );
    assert!(output.contains(&wanted), "{output}");
    let log = std::fs::read_to_string(dir.path().join("r/test.log")).expect("log");
    assert!(
        log.contains("Background database maintenance found a damaged page")
            && log.contains(&wanted),
        "{log}"
    );
    // The other database is clean: its maintenance found nothing.
    for other in r["instances"].as_array().expect("instances") {
        if other["name"] != instance["name"] {
            let none = &other["background_maintenance"]["damaged_pages"];
            assert_eq!(none.as_array().map(|a| a.len()), Some(0), "{other}");
        }
    }
}

#[test]
fn ctrl_c_mid_run_writes_a_partial_result_and_closes_the_databases() {
    let dir = tempfile::tempdir().expect("tempdir");
    let job = small_job(dir.path(), "10m", "");
    let job = job.to_str().expect("utf-8");
    jetproof(dir.path())
        .args(["init", job, "--out", "i"])
        .assert()
        .success();
    let mut child = spawn_jetproof(
        dir.path(),
        &["run", job, "--test", "performance", "--out", "r"],
        true,
    );
    // Wait for the measured window to begin (the first sample line), then interrupt.
    let log_path = dir.path().join("r/test.log");
    let started = Instant::now();
    while !std::fs::read_to_string(&log_path)
        .is_ok_and(|l| l.contains("Performance logging started"))
    {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the window did not start"
        );
        assert!(child.try_wait().expect("poll").is_none(), "run ended early");
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_secs(2));
    let (exit, stdout, stderr) = interrupt(child);
    assert!(stderr.contains("interrupted: stopping cleanly"), "{stderr}");
    // An interrupted run is not a pass: the verdict fails with the reason (exit 1).
    assert_eq!(exit.code(), Some(1), "{stdout}");
    let r = result(&dir.path().join("r/result.json"));
    assert_eq!(r["interrupted"], true);
    assert_eq!(r["verdict"], "fail");
    assert!(
        r["reasons"].to_string().contains("interrupted"),
        "{}",
        r["reasons"]
    );
    let measured = r["totals"]["measured_seconds"].as_f64().expect("measured");
    assert!((1.0..60.0).contains(&measured), "{measured} s measured");
    assert!(r["achieved_iops"].as_f64().expect("achieved") > 0.0);
    let log = std::fs::read_to_string(&log_path).expect("log");
    assert!(log.contains("Databases are shut down."), "{log}");
    // Closed cleanly: `recover` has nothing to replay, the checksum test passes after it, and
    // another run (which refuses a database not shut down cleanly) attaches.
    jetproof(dir.path())
        .args(["recover", job, "--out", "rec"])
        .assert()
        .success()
        .stdout(predicates::str::contains("nothing to recover"));
    jetproof(dir.path())
        .args(["checksum", job, "--out", "c"])
        .assert()
        .success();
    jetproof(dir.path())
        .args([
            "run",
            job,
            "--test",
            "performance",
            "--duration",
            "1s",
            "--out",
            "again",
        ])
        .assert()
        .success();
}
