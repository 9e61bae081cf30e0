//! `jetproof recover` through the real binary: a performance run killed with SIGKILL leaves its
//! databases dirty; `recover` replays their logs and reports it, after which `checksum` passes and
//! a new run attaches and passes. Clean databases: nothing to do, exit 0.

use std::time::Duration;

use predicates::prelude::*;

mod common;
use common::{jetproof, small_job};

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

    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_jetproof"))
        .current_dir(dir.path())
        .args(["run", job_arg, "--test", "performance", "--out", "killed"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn jetproof run");
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
        .stdout(predicate::str::contains("Log files replayed"))
        .stdout(predicate::str::contains("seconds per log file"))
        .stdout(predicate::str::contains("Records applied"));
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
    }
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
