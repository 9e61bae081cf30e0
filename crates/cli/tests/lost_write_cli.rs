//! Lost writes through the real binary: a run writes pages, then the storage "loses" some of
//! those writes (the pages are put back as they were before the run, with valid checksums). The
//! flush map finds them: `checksum` and a backup name each page, the next run's background maintenance names
//! one and fails, and `recover` of a crashed database refuses to replay over one. Issue 15,
//! point 7.

use std::path::{Path, PathBuf};
use std::time::Duration;

use predicates::prelude::*;

mod common;
use common::{jetproof, small_job, spawn_jetproof};

const PAGE: usize = 8192;

fn database(dir: &Path) -> PathBuf {
    dir.join("jetproof-data/db1/db1.jpdb")
}

/// The pages whose bytes differ between two copies of a database file.
fn changed_pages(before: &[u8], after: &[u8]) -> Vec<usize> {
    (0..before.len().min(after.len()) / PAGE)
        .filter(|&n| n >= 2 && before[n * PAGE..(n + 1) * PAGE] != after[n * PAGE..(n + 1) * PAGE])
        .collect()
}

/// Puts pages `pages` of `before` back into the database file: their later writes are "lost".
fn lose_writes(dir: &Path, before: &[u8], pages: &[usize]) {
    let mut now = std::fs::read(database(dir)).expect("database");
    for &n in pages {
        now[n * PAGE..(n + 1) * PAGE].copy_from_slice(&before[n * PAGE..(n + 1) * PAGE]);
    }
    std::fs::write(database(dir), now).expect("write database");
}

fn one_database_job(dir: &Path, duration: &str) -> PathBuf {
    let job = small_job(dir, duration, "");
    let text = std::fs::read_to_string(&job)
        .expect("job")
        .replace("databases = 2", "databases = 1");
    std::fs::write(&job, text).expect("job");
    job
}

#[test]
fn checksum_and_the_next_run_find_writes_the_storage_lost() {
    let dir = tempfile::tempdir().expect("tempdir");
    let job = one_database_job(dir.path(), "3s");
    let job = job.to_str().expect("utf-8");
    jetproof(dir.path()).args(["init", job]).assert().success();
    let before = std::fs::read(database(dir.path())).expect("database");
    jetproof(dir.path())
        .args(["run", job, "--test", "performance", "--out", "first"])
        .assert()
        .success();
    let after = std::fs::read(database(dir.path())).expect("database");
    let changed = changed_pages(&before, &after);
    assert!(changed.len() >= 3, "the run wrote pages: {changed:?}");
    let lost: Vec<usize> = changed
        .iter()
        .copied()
        .step_by(changed.len() / 3)
        .take(3)
        .collect();
    lose_writes(dir.path(), &before, &lost);

    // Every lost write is found and located; a flipped bit would not explain it (the pages'
    // checksums are good).
    let assert = jetproof(dir.path())
        .args(["checksum", job, "--out", "check"])
        .assert()
        .code(1)
        .stdout(predicate::str::contains("lost write"));
    let stdout = String::from_utf8_lossy(&assert.get_output().stdout).to_string();
    let result = common::result(&dir.path().join("check/result.json"));
    assert_eq!(result["verdict"], "fail", "{result}");
    let instance = &result["instances"][0];
    let figures = if instance.get("pages_lost_write").is_some() {
        instance.clone()
    } else {
        instance["extra"].clone()
    };
    assert_eq!(figures["pages_lost_write"], lost.len() as u64, "{figures}");
    assert_eq!(figures["pages_bad"], 0, "{figures}");
    assert_eq!(figures["flush_map_state"]["status"], "ok", "{figures}");
    let listed: Vec<u64> = figures["damaged_pages"]
        .as_array()
        .expect("damaged_pages")
        .iter()
        .filter(|p| p["damage"] == "lost_write")
        .map(|p| p["page_number"].as_u64().expect("page_number"))
        .collect();
    assert_eq!(
        listed,
        lost.iter().map(|&n| n as u64).collect::<Vec<_>>(),
        "{stdout}"
    );
    for n in &lost {
        assert!(stdout.contains(&format!("page {n} ")), "page {n}: {stdout}");
    }

    // A backup reads every page too: it names the same pages and fails (exit 1).
    jetproof(dir.path())
        .args(["run", job, "--test", "backup", "--out", "backup"])
        .assert()
        .code(1)
        .stdout(predicate::str::contains("lost write"));
    let result = common::result(&dir.path().join("backup/result.json"));
    let backup = &result["instances"][0]["extra"]["backup"];
    let backup = if backup.is_null() {
        &result["instances"][0]["backup"]
    } else {
        backup
    };
    assert_eq!(
        backup["lost_write_pages"],
        serde_json::json!(lost),
        "{result}"
    );

    // The next run's background maintenance reads every page: it finds a lost write, and the
    // verdict fails naming it (the run may also stop at a session's read of one: exit 3).
    let run = jetproof(dir.path())
        .args([
            "run",
            job,
            "--test",
            "performance",
            "--duration",
            "12s",
            "--out",
            "second",
        ])
        .assert();
    let code = run.get_output().status.code();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&run.get_output().stdout),
        String::from_utf8_lossy(&run.get_output().stderr)
    );
    assert!(code == Some(1) || code == Some(3), "exit {code:?}: {text}");
    assert!(text.contains("lost write"), "{text}");
}

#[test]
fn recovery_refuses_to_replay_over_a_lost_write() {
    let dir = tempfile::tempdir().expect("tempdir");
    let job = one_database_job(dir.path(), "60s");
    let job = job.to_str().expect("utf-8");
    jetproof(dir.path()).args(["init", job]).assert().success();
    let before = std::fs::read(database(dir.path())).expect("database");
    let mut child = spawn_jetproof(
        dir.path(),
        &["run", job, "--test", "performance", "--out", "killed"],
        false,
    );
    std::thread::sleep(Duration::from_secs(4));
    assert!(
        child.try_wait().expect("status").is_none(),
        "the run ended before it was killed"
    );
    child.kill().expect("SIGKILL");
    child.wait().expect("reap");
    let after = std::fs::read(database(dir.path())).expect("database");
    let changed = changed_pages(&before, &after);
    assert!(!changed.is_empty(), "the run wrote pages");
    // Every write of the run lost: the replay reads some of these pages, and each of them is
    // older than the flush map's snapshot says it was written.
    lose_writes(dir.path(), &before, &changed);
    jetproof(dir.path())
        .args(["recover", job, "--out", "rec"])
        .assert()
        .code(3)
        .stderr(predicate::str::contains("lost write"));
    // Nothing was marked clean: the database still needs recovery.
    jetproof(dir.path())
        .args(["run", job, "--test", "performance", "--duration", "1s"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("recover"));
}
