//! `jetproof recover` through the real binary: a performance run killed with SIGKILL leaves its
//! databases dirty; `recover` replays their logs and reports it, after which `checksum` passes and
//! a new run attaches and passes. Clean databases: nothing to do, exit 0.

use std::time::Duration;

use predicates::prelude::*;

mod common;
use common::{generation_files, jetproof, small_job, spawn_jetproof};

#[test]
fn a_run_killed_with_sigkill_is_recovered_then_checks_and_runs_clean() {
    let dir = tempfile::tempdir().expect("tempdir");
    let job = small_job(dir.path(), "60s", "");
    let job_arg = job.to_str().expect("utf-8");
    jetproof(dir.path())
        .args(["init", job_arg])
        .assert()
        .success();
    // Clean databases: nothing to do.
    jetproof(dir.path())
        .args(["recover", job_arg])
        .assert()
        .success()
        .stdout(predicate::str::contains("nothing to recover"));

    let mut child = spawn_jetproof(
        dir.path(),
        &["run", job_arg, "--test", "performance", "--out", "killed"],
        false,
    );
    std::thread::sleep(Duration::from_secs(2));
    assert!(
        child.try_wait().expect("child status").is_none(),
        "the run ended before it was killed"
    );
    // `Child::kill` sends SIGKILL on Unix: no clean shutdown.
    child.kill().expect("SIGKILL");
    child.wait().expect("reap");

    // The killed run left the databases dirty: a new run is refused with how to go on.
    jetproof(dir.path())
        .args(["run", job_arg, "--test", "performance", "--duration", "1s"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("run `jetproof recover` first"));

    jetproof(dir.path())
        .args(["recover", job_arg, "--out", "rec"])
        .assert()
        .success()
        .stdout(predicate::str::contains("Soft Recovery Statistics"))
        .stdout(predicate::str::contains("Log files replayed"))
        .stdout(predicate::str::contains("Seconds per log"))
        .stdout(predicate::str::contains("Records applied"))
        .stdout(predicate::str::contains("Soft Recovery I/O Performance"))
        // The live view on a pipe: the replay's progress, ending when both instances did.
        .stderr(predicate::str::contains("jetproof: replay "))
        .stderr(predicate::str::contains("0 of 2 instance(s) replaying"));
    let result: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("rec/result.json")).expect("result.json"),
    )
    .expect("valid JSON");
    assert_eq!(result["test"], "recovery");
    assert_eq!(result["verdict"], "pass");
    let instances = result["instances"].as_array().expect("instances");
    assert_eq!(instances.len(), 2, "{result}");
    for instance in instances {
        assert!(
            instance["logs_replayed"].as_u64().expect("logs_replayed") >= 1,
            "{instance}"
        );
        assert!(instance["seconds"].as_f64().is_some(), "{instance}");
        assert!(instance["seconds_per_log"].as_f64().is_some(), "{instance}");
        assert!(instance["records_applied"].as_u64().is_some(), "{instance}");
        assert!(
            instance["log_read"]["count"].as_u64().expect("log_read") > 0,
            "{instance}"
        );
        // The replay's whole I/O table, as the soft-recovery test reports it: every page a
        // record touched was read, every page it changed written back (plus the header writes
        // of the clean close); no log writes.
        let touched = instance["records_applied"]
            .as_u64()
            .expect("records_applied")
            + instance["records_skipped"]
                .as_u64()
                .expect("records_skipped");
        if touched > 0 {
            assert!(
                instance["db_read"]["count"].as_u64().expect("db_read") > 0,
                "{instance}"
            );
            // Every page the replay needed was read once: ahead by the readers, or by itself.
            let read = instance["pages_read"].as_u64().expect("pages_read")
                + instance["pages_read_ahead"]
                    .as_u64()
                    .expect("pages_read_ahead");
            assert!(read > 0, "{instance}");
            assert!(
                instance["read_ahead_waits"]
                    .as_u64()
                    .expect("read_ahead_waits")
                    <= instance["pages_read_ahead"].as_u64().unwrap_or(0),
                "{instance}"
            );
        }
        let pages_written = instance["pages_written"].as_u64().expect("pages_written");
        assert!(
            instance["db_write"]["count"].as_u64().unwrap_or(0) >= pages_written,
            "{instance}"
        );
        assert!(instance.get("log_write").is_none(), "{instance}");
        // The run was killed with transactions open: undo takes back those it can name.
        assert!(
            instance["transactions_rolled_back"]
                .as_u64()
                .expect("transactions_rolled_back")
                <= instance["uncommitted_transactions"]
                    .as_u64()
                    .expect("uncommitted_transactions"),
            "{instance}"
        );
        // Present whether or not a killed run left committed deletes unpurged.
        assert!(instance["records_purged"].is_u64(), "{instance}");
        assert!(
            instance["cpu_seconds"].as_f64().expect("cpu_seconds") >= 0.0,
            "{instance}"
        );
        if instance["records_applied"].as_u64() > Some(0) {
            assert!(
                instance["cpu_us_per_record"]
                    .as_f64()
                    .expect("cpu_us_per_record")
                    > 0.0,
                "{instance}"
            );
        }
    }
    assert!(dir.path().join("rec/report.md").exists());
    assert!(dir.path().join("rec/test.log").exists());

    jetproof(dir.path())
        .args(["checksum", job_arg, "--out", "sum"])
        .assert()
        .success();
    // Recovered databases are clean: a second recover has nothing to do.
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
        .success()
        .stdout(predicate::str::contains("Overall Test Result: Pass"));
}

/// A failed recovery's verdict: a soft-recovery run (checkpoint held, every generation kept) is
/// killed once db1's log has grown by a few generations, and one bit is flipped in the first
/// record of a generation that later ones vouch for. `recover` must fail with exit 3, write a
/// result whose verdict is fail and whose reason names that file and the offset, leave db1 dirty
/// (a second `recover` fails the same way) and still recover db2.
#[test]
fn a_corrupted_log_in_the_needed_range_fails_recovery_with_file_and_offset() {
    let dir = tempfile::tempdir().expect("tempdir");
    let job = small_job(
        dir.path(),
        "60s",
        "[log]\nfile_size = \"64KiB\"\nbuffer_size = \"64KiB\"\n",
    );
    let job_arg = job.to_str().expect("utf-8");
    jetproof(dir.path())
        .args(["init", job_arg])
        .assert()
        .success();
    let logs = dir.path().join("jetproof-data/db1/logs");
    let before = generation_files(&logs).len();
    let mut child = spawn_jetproof(
        dir.path(),
        &[
            "run",
            job_arg,
            "--test",
            "soft-recovery",
            "--log-files",
            "1000",
            "--out",
            "killed",
        ],
        false,
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while generation_files(&logs).len() < before + 5 {
        assert!(
            child.try_wait().expect("child status").is_none(),
            "the soft-recovery run ended before it was killed"
        );
        assert!(
            std::time::Instant::now() < deadline,
            "db1's log did not grow by 5 generations in 60 s"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().expect("SIGKILL");
    child.wait().expect("reap");

    // Generations are renamed into place only when started, and each is complete once a later
    // one exists: the third from the end has two after it and lies after the held checkpoint.
    let files = generation_files(&logs);
    let victim = files[files.len() - 3].clone();
    // One bit of the first record frame after the 4 KiB generation header: its first payload
    // byte, after the 22-byte frame header (log format 3, `docs/log.md`). Frames are packed, so
    // a byte further on may already belong to the next frame (a commit record's is 30 bytes).
    let offset = 4096 + 22;
    let mut bytes = std::fs::read(&victim).expect("read the generation");
    bytes[offset] ^= 1 << 3;
    std::fs::write(&victim, &bytes).expect("write the generation back");

    // Named as the job names it (relative to the working directory), and the frame that holds
    // the flipped bit starts the generation's data.
    let victim_text = victim
        .strip_prefix(dir.path())
        .expect("under the test directory")
        .display()
        .to_string();
    let at_offset = "is corrupt at offset 4096";
    let assert = jetproof(dir.path())
        .args(["recover", job_arg, "--out", "rec"])
        .assert()
        .code(3)
        .stderr(predicate::str::contains(victim_text.as_str()));
    let stdout = String::from_utf8_lossy(&assert.get_output().stdout).to_string();
    assert!(stdout.contains("Overall Test Result: Fail"), "{stdout}");
    let result = common::result(&dir.path().join("rec/result.json"));
    assert_eq!(result["test"], "recovery");
    assert_eq!(result["verdict"], "fail", "{result}");
    let reasons = result["reasons"].as_array().expect("reasons");
    assert_eq!(reasons.len(), 1, "{result}");
    let reason = reasons[0].as_str().expect("reason");
    assert!(
        reason.starts_with("db1: recovery failed")
            && reason.contains(&victim_text)
            && reason.contains(at_offset)
            && reason.contains("stays dirty"),
        "{reason}"
    );
    let instances = result["instances"].as_array().expect("instances");
    assert_eq!(instances.len(), 2, "{result}");
    let db1 = &instances[0];
    assert_eq!(db1["name"], "db1");
    assert!(
        db1["error"].as_str().expect("error").contains(&victim_text),
        "{db1}"
    );
    assert!(db1.get("logs_replayed").is_none(), "{db1}");
    // The other instance (whose log grew at its own pace) is replayed all the same.
    let db2 = &instances[1];
    assert_eq!(db2["name"], "db2");
    assert!(
        db2["logs_replayed"].as_u64().expect("logs_replayed") >= 1 && db2.get("error").is_none(),
        "{db2}"
    );

    // db1 stays dirty: recovery is tried again and fails the same way; db2 is not replayed.
    jetproof(dir.path())
        .args(["recover", job_arg, "--out", "again"])
        .assert()
        .code(3)
        .stderr(predicate::str::contains(victim_text.as_str()));
    let again = common::result(&dir.path().join("again/result.json"));
    let names: Vec<&str> = again["instances"]
        .as_array()
        .expect("instances")
        .iter()
        .filter_map(|i| i["name"].as_str())
        .collect();
    assert_eq!(names, ["db1"], "{again}");
}

/// A log file with a garbage header: `recover` names that file once in its error, with what is
/// wrong and that the database stays dirty (said once); a generation cut short (a lost log,
/// whose message says already that the database stays dirty and what to do) says so once too.
#[test]
fn a_bad_log_header_is_reported_naming_the_file_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let job = small_job(dir.path(), "60s", "");
    let job_arg = job.to_str().expect("utf-8");
    jetproof(dir.path())
        .args(["init", job_arg])
        .assert()
        .success();
    let mut child = spawn_jetproof(
        dir.path(),
        &["run", job_arg, "--test", "performance", "--out", "killed"],
        false,
    );
    std::thread::sleep(Duration::from_secs(2));
    assert!(
        child.try_wait().expect("child status").is_none(),
        "the run ended before it was killed"
    );
    child.kill().expect("SIGKILL");
    child.wait().expect("reap");

    // The oldest generation is where db1's replay starts reading.
    let files = generation_files(&dir.path().join("jetproof-data/db1/logs"));
    let victim = files.first().expect("a generation file").clone();
    let victim_text = victim
        .strip_prefix(dir.path())
        .expect("under the test directory")
        .display()
        .to_string();
    let original = std::fs::read(&victim).expect("read the generation");
    let mut garbage = original.clone();
    for (i, byte) in garbage.iter_mut().take(4096).enumerate() {
        *byte = b"garbage!"[i % 8];
    }
    std::fs::write(&victim, &garbage).expect("write garbage over the header");

    let failed_line = |out: &std::process::Output| -> String {
        let stderr = String::from_utf8_lossy(&out.stderr);
        stderr
            .lines()
            .find(|l| l.contains("db1: recovery failed"))
            .unwrap_or_else(|| panic!("no failure line: {stderr}"))
            .to_string()
    };
    let out = jetproof(dir.path())
        .args(["recover", job_arg, "--out", "bad-header", "--quiet"])
        .output()
        .expect("recover");
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    let line = failed_line(&out);
    assert_eq!(line.matches(victim_text.as_str()).count(), 1, "{line}");
    assert!(
        line.contains("has a bad header: not a jetproof log file"),
        "{line}"
    );
    assert_eq!(line.matches("stays dirty").count(), 1, "{line}");
    let result = common::result(&dir.path().join("bad-header/result.json"));
    let reason = result["reasons"][0].as_str().expect("reason");
    assert_eq!(reason.matches(victim_text.as_str()).count(), 1, "{reason}");

    // The header put back, the generation cut short of it: a lost log.
    std::fs::write(&victim, &original[..100]).expect("cut the generation short");
    let out = jetproof(dir.path())
        .args(["recover", job_arg, "--out", "cut", "--quiet"])
        .output()
        .expect("recover");
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    let line = failed_line(&out);
    assert!(line.contains("lost log"), "{line}");
    assert!(line.contains(victim_text.as_str()), "{line}");
    assert_eq!(line.matches("stays dirty").count(), 1, "{line}");
    let result = common::result(&dir.path().join("cut/result.json"));
    let reason = result["reasons"][0].as_str().expect("reason");
    assert_eq!(reason.matches("stays dirty").count(), 1, "{reason}");
}
