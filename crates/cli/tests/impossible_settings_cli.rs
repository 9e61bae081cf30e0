//! Impossible settings are refused with exit 2, one message naming the key and the fix, before
//! anything is deleted or created (issue 15, point 9): a cache larger than the machine's memory
//! (it used to abort the process with SIGABRT, leave the database dirty, and under
//! `init --recreate` delete the old databases first), more log files than the disk holds, a
//! device given as the job file.

mod common;

use std::path::Path;

use common::{jetproof, small_job};
use predicates::prelude::*;

/// Far beyond the memory of any machine these tests run on.
const IMPOSSIBLE_CACHE: &str = "[cache]\nmin_size = \"512KiB\"\nmax_size = \"64TiB\"\n";

/// The small job with the impossible cache (its own [cache] table replaces the small one's).
fn impossible_job(dir: &Path) -> std::path::PathBuf {
    let small = small_job(dir, "2s", "");
    let text = std::fs::read_to_string(&small).expect("job");
    let text = text.replace(
        "[cache]\nmin_size = \"512KiB\"\nmax_size = \"1MiB\"\n",
        IMPOSSIBLE_CACHE,
    );
    assert!(text.contains("64TiB"), "{text}");
    let path = dir.join("impossible.toml");
    std::fs::write(&path, text).expect("write job");
    path
}

/// An owner lock file (`*.jplock`): jetproof's bookkeeping, rewritten with its holder by every
/// command that takes the lock, refused or not.
fn is_lock_file(path: &Path) -> bool {
    path.extension().is_some_and(|e| e == "jplock")
}

/// Every file under `dir` but the lock files with its length and content, to show that nothing changed.
fn snapshot(dir: &Path) -> Vec<(std::path::PathBuf, Vec<u8>)> {
    let mut files = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(next) = stack.pop() {
        for entry in std::fs::read_dir(&next).expect("list").flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if !is_lock_file(&path) {
                files.push((path.clone(), std::fs::read(&path).expect("read")));
            }
        }
    }
    files.sort();
    files
}

fn assert_refused_for_memory(stderr: &str) {
    assert!(stderr.contains("cache.max_size"), "{stderr}");
    assert!(
        stderr.contains("64TiB per instance x 2 instance(s)"),
        "{stderr}"
    );
    assert!(stderr.contains("at most"), "the fix is given: {stderr}");
    assert_eq!(stderr.lines().count(), 1, "one message: {stderr}");
}

#[test]
fn init_with_a_cache_larger_than_the_machine_is_refused_before_anything_is_created() {
    let dir = tempfile::tempdir().expect("tempdir");
    let job = impossible_job(dir.path());
    let output = jetproof(dir.path())
        .args(["init", job.to_str().expect("utf-8"), "--out", "r"])
        .output()
        .expect("runs");
    assert_eq!(output.status.code(), Some(2));
    assert_refused_for_memory(&String::from_utf8_lossy(&output.stderr));
    assert!(
        !dir.path().join("jetproof-data").exists(),
        "nothing created"
    );
    assert!(!dir.path().join("r").exists(), "no results directory");
}

#[test]
fn init_recreate_with_a_cache_larger_than_the_machine_deletes_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let good = small_job(dir.path(), "2s", "");
    jetproof(dir.path())
        .args(["init", good.to_str().expect("utf-8"), "--out", "i"])
        .assert()
        .success();
    let data = dir.path().join("jetproof-data");
    let before = snapshot(&data);
    let job = impossible_job(dir.path());
    let output = jetproof(dir.path())
        .args([
            "init",
            job.to_str().expect("utf-8"),
            "--recreate",
            "--out",
            "again",
        ])
        .output()
        .expect("runs");
    assert_eq!(output.status.code(), Some(2));
    assert_refused_for_memory(&String::from_utf8_lossy(&output.stderr));
    assert_eq!(snapshot(&data), before, "the old databases are all there");
    assert!(!dir.path().join("again").exists());
}

#[test]
fn a_run_with_a_cache_larger_than_the_machine_is_refused_and_the_databases_stay_clean() {
    let dir = tempfile::tempdir().expect("tempdir");
    let good = small_job(dir.path(), "2s", "");
    let good = good.to_str().expect("utf-8");
    jetproof(dir.path())
        .args(["init", good, "--out", "i"])
        .assert()
        .success();
    let data = dir.path().join("jetproof-data");
    let before = snapshot(&data);
    let job = impossible_job(dir.path());
    for test in ["performance", "stress", "soft-recovery"] {
        let output = jetproof(dir.path())
            .args([
                "run",
                job.to_str().expect("utf-8"),
                "--test",
                test,
                "--out",
                "r",
            ])
            .output()
            .expect("runs");
        assert_eq!(output.status.code(), Some(2), "{test}");
        assert_refused_for_memory(&String::from_utf8_lossy(&output.stderr));
        assert!(
            !dir.path().join("r").exists(),
            "{test}: no results directory"
        );
    }
    assert_eq!(snapshot(&data), before, "nothing written");
    // Clean as before: nothing to recover, and the job that fits runs.
    jetproof(dir.path())
        .args(["recover", good])
        .assert()
        .success()
        .stdout(predicate::str::contains("nothing to recover"));
    jetproof(dir.path())
        .args([
            "run",
            good,
            "--test",
            "performance",
            "--duration",
            "1s",
            "--out",
            "ok",
        ])
        .assert()
        .success();
}

#[test]
fn soft_recovery_with_more_log_files_than_the_disk_holds_is_refused_naming_the_flag() {
    let dir = tempfile::tempdir().expect("tempdir");
    let job = small_job(dir.path(), "2s", "");
    let job = job.to_str().expect("utf-8");
    jetproof(dir.path())
        .args(["init", job, "--out", "i"])
        .assert()
        .success();
    let data = dir.path().join("jetproof-data");
    let before = snapshot(&data);
    // 4 billion generations of 1 MiB: petabytes.
    let output = jetproof(dir.path())
        .args([
            "run",
            job,
            "--test",
            "soft-recovery",
            "--log-files",
            "4000000000",
            "--out",
            "r",
        ])
        .output()
        .expect("runs");
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("--log-files"), "{stderr}");
    assert!(stderr.contains("free"), "{stderr}");
    assert!(!dir.path().join("r").exists());
    assert_eq!(snapshot(&data), before, "no log file written");
}

#[test]
fn a_device_given_as_the_job_file_is_refused_without_reading_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    // Reading /dev/zero as a job would never end.
    for command in [
        vec!["run", "/dev/zero", "--test", "performance"],
        vec!["init", "/dev/zero"],
        vec!["checksum", "/dev/null"],
    ] {
        let output = jetproof(dir.path())
            .args(&command)
            .timeout(std::time::Duration::from_secs(30))
            .output()
            .expect("runs");
        assert_eq!(output.status.code(), Some(2), "{command:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            stderr.contains("character device") && stderr.contains("not a job file"),
            "{command:?}: {stderr}"
        );
    }
    assert!(!dir.path().join("jetproof-data").exists());
}

#[test]
fn more_mailboxes_than_the_databases_have_pages_are_refused_before_anything_is_created() {
    let dir = tempfile::tempdir().expect("tempdir");
    // 100 billion mailboxes in two databases of 8 MiB: a run used to look up each of the 50
    // billion mailboxes per database before doing anything, for hours.
    let job = small_job(dir.path(), "2s", "[simulation]\nmailboxes = 100000000000\n");
    let job = job.to_str().expect("utf-8");
    for args in [
        vec!["init", job, "--out", "r"],
        vec!["run", job, "--test", "performance", "--out", "r"],
    ] {
        let output = jetproof(dir.path()).args(&args).output().expect("runs");
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            stderr.contains("simulation.mailboxes") && stderr.contains("at most 2048 mailboxes"),
            "{stderr}"
        );
    }
    assert!(!dir.path().join("jetproof-data").exists());
    assert!(!dir.path().join("r").exists());
}

#[test]
fn recover_with_an_impossible_cache_or_another_page_size_is_refused_and_the_logs_kept() {
    let dir = tempfile::tempdir().expect("tempdir");
    let good = small_job(dir.path(), "60s", "");
    let good = good.to_str().expect("utf-8");
    jetproof(dir.path())
        .args(["init", good, "--out", "i"])
        .assert()
        .success();
    // A run killed with SIGKILL leaves its databases dirty, with logs to replay.
    let mut child = common::spawn_jetproof(
        dir.path(),
        &["run", good, "--test", "performance", "--out", "killed"],
        false,
    );
    std::thread::sleep(std::time::Duration::from_secs(2));
    assert!(child.try_wait().expect("poll").is_none(), "ended early");
    child.kill().expect("SIGKILL");
    child.wait().expect("reap");
    let data = dir.path().join("jetproof-data");
    let before = snapshot(&data);

    let impossible = impossible_job(dir.path());
    let output = jetproof(dir.path())
        .args(["recover", impossible.to_str().expect("utf-8"), "--out", "r"])
        .output()
        .expect("runs");
    assert_eq!(output.status.code(), Some(2));
    assert_refused_for_memory(&String::from_utf8_lossy(&output.stderr));

    let other = dir.path().join("other.toml");
    std::fs::write(
        &other,
        std::fs::read_to_string(good)
            .expect("job")
            .replace("page_size = \"8KiB\"", "page_size = \"32KiB\""),
    )
    .expect("write");
    jetproof(dir.path())
        .args(["recover", other.to_str().expect("utf-8"), "--out", "r"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("storage.page_size"))
        .stderr(predicate::str::contains("made with 8KiB pages"));
    assert!(!dir.path().join("r").exists());
    assert_eq!(snapshot(&data), before, "nothing replayed, nothing removed");
    // The right job recovers them.
    jetproof(dir.path())
        .args(["recover", good, "--out", "ok"])
        .assert()
        .success();
}

#[test]
fn a_bad_write_back_depth_is_refused_naming_the_key_before_anything_is_created() {
    let dir = tempfile::tempdir().expect("tempdir");
    let small = small_job(dir.path(), "2s", "");
    let text = std::fs::read_to_string(&small).expect("job");
    for bad in ["0", "4096"] {
        let replaced = text.replace("[cache]\n", &format!("[cache]\nwrite_back_depth = {bad}\n"));
        assert!(replaced.contains("write_back_depth"), "{replaced}");
        let path = dir.path().join("depth.toml");
        std::fs::write(&path, replaced).expect("write job");
        for command in [
            vec!["init", path.to_str().expect("utf-8")],
            vec![
                "run",
                path.to_str().expect("utf-8"),
                "--test",
                "performance",
            ],
        ] {
            let output = jetproof(dir.path())
                .args(&command)
                .timeout(std::time::Duration::from_secs(30))
                .output()
                .expect("runs");
            assert_eq!(output.status.code(), Some(2), "{bad} {command:?}");
            let stderr = String::from_utf8_lossy(&output.stderr);
            assert!(
                stderr.contains("cache.write_back_depth") && stderr.contains("1 to 1024"),
                "{bad} {command:?}: {stderr}"
            );
        }
        assert!(!dir.path().join("jetproof-data").exists(), "{bad}");
    }
}

/// Issue 32, point 1: a performance or stress test whose cache maximum can hold the whole
/// database would read nothing from the storage once warm; it is refused before any I/O (no
/// database, no results folder), naming both sizes and the fix, and `--cache-max` (run and
/// sweep) is that fix: with it the same job is accepted.
#[test]
fn a_cache_that_holds_the_database_is_refused_and_cache_max_fixes_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    // The small job's databases are 8 MiB; a 16 MiB cache holds one whole.
    let small = small_job(dir.path(), "1s", "");
    let text = std::fs::read_to_string(&small)
        .expect("job")
        .replace("max_size = \"1MiB\"", "max_size = \"16MiB\"");
    assert!(text.contains("16MiB"), "{text}");
    let job = dir.path().join("big-cache.toml");
    std::fs::write(&job, text).expect("write job");
    let job = job.to_str().expect("utf-8");
    for test in ["performance", "stress"] {
        let output = jetproof(dir.path())
            .args(["run", job, "--test", test, "--out", "r"])
            .output()
            .expect("runs");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{test}: {stderr}");
        assert!(stderr.contains("cache.max_size"), "{stderr}");
        assert!(stderr.contains("16MiB"), "the cache's size: {stderr}");
        assert!(stderr.contains("8MiB"), "the database's size: {stderr}");
        assert!(stderr.contains("--cache-max"), "the fix: {stderr}");
        assert!(
            !dir.path().join("jetproof-data").exists(),
            "nothing created"
        );
        assert!(!dir.path().join("r").exists(), "no results directory");
    }
    // A sweep is refused the same way.
    let output = jetproof(dir.path())
        .args(["sweep", job, "--threads", "1", "--out", "s"])
        .output()
        .expect("runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("cache.max_size"), "{stderr}");
    assert!(!dir.path().join("s").exists(), "no sweep folder");
    // --cache-max below the database: the run goes ahead and its result carries the cache.
    jetproof(dir.path())
        .args([
            "run",
            job,
            "--test",
            "performance",
            "--cache-max",
            "1MiB",
            "--out",
            "r",
            "--quiet",
        ])
        .assert()
        .code(predicate::in_iter([0, 1]));
    let result = common::result(&dir.path().join("r").join("result.json"));
    assert_eq!(
        result["parameters"]["cache"]["max_size"], "1MiB",
        "{}",
        result["parameters"]
    );
    // The small job's minimum, 512 KiB, is below the new maximum and kept.
    assert_eq!(result["parameters"]["cache"]["min_size"], "512KiB");
    // Backup reads every database whole and has no cache to set.
    let output = jetproof(dir.path())
        .args(["run", job, "--test", "backup", "--cache-max", "1MiB"])
        .output()
        .expect("runs");
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("--cache-max"));
}
