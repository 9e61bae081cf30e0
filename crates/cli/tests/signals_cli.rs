//! SIGTERM and SIGHUP (a service manager's stop, a CI timeout, a closed terminal) stop a command
//! as Ctrl-C does: the run ends its phase, closes the databases cleanly and writes `result.json`
//! marked interrupted (issue 15, point 10). The Ctrl-C case itself is in `run_faults.rs`.

mod common;

use std::time::{Duration, Instant};

use common::{jetproof, result, signal, small_job, spawn_jetproof};

/// Starts a ten-minute performance run, waits for its measured window, sends `name`, and checks
/// that the run stopped cleanly: exit 1 (an interrupted run is not a pass), result.json written
/// and marked interrupted, the databases closed (nothing to recover; another run attaches).
fn a_run_stops_cleanly_on(name: &str) {
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
    let log_path = dir.path().join("r/test.log");
    let started = Instant::now();
    while !std::fs::read_to_string(&log_path)
        .is_ok_and(|l| l.contains("Performance logging started"))
    {
        if started.elapsed() > Duration::from_secs(60) || child.try_wait().ok().flatten().is_some()
        {
            let _ = child.kill();
            panic!("the measured window did not start within 60 s, or the run ended early");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_secs(2));
    let (exit, stdout, stderr) = signal(child, name);
    assert!(
        stderr.contains("interrupted: stopping cleanly"),
        "SIG{name}: {stderr}"
    );
    assert_eq!(exit.code(), Some(1), "SIG{name}: {stdout}\n{stderr}");
    let r = result(&dir.path().join("r/result.json"));
    assert_eq!(r["interrupted"], true, "SIG{name}");
    assert_eq!(r["verdict"], "fail");
    assert!(
        r["reasons"].to_string().contains("interrupted"),
        "{}",
        r["reasons"]
    );
    let log = std::fs::read_to_string(&log_path).expect("log");
    assert!(log.contains("Databases are shut down."), "{log}");
    jetproof(dir.path())
        .args(["recover", job, "--out", "rec"])
        .assert()
        .success()
        .stdout(predicates::str::contains("nothing to recover"));
    jetproof(dir.path())
        .args(["checksum", job, "--out", "c"])
        .assert()
        .success();
}

#[test]
fn sigterm_mid_run_writes_a_partial_result_and_closes_the_databases() {
    a_run_stops_cleanly_on("TERM");
}

#[test]
fn sighup_mid_run_writes_a_partial_result_and_closes_the_databases() {
    a_run_stops_cleanly_on("HUP");
}
