//! A panic anywhere stops everything (issue 34, item 1): a panic on the main thread or on a
//! session thread ends the whole process at once with exit 4, `result.json` says fail with the
//! panic's message, and the databases are left as a crash leaves them, so `recover` brings them
//! back. The panic is injected through the debug build's `JETPROOF_TEST_PANIC`
//! (`jetproof_procedures::test_hooks`). Also: a duration or size beyond its bound is refused
//! with the job (exit 2 naming the key), where `sample_interval = "18446744073709551615s"` once
//! panicked `run`.

mod common;

use std::time::{Duration, Instant};

use common::{jetproof, result, run_expecting, small_job};

/// Runs a ten-minute performance test with a panic injected at `place`, and checks that the
/// process ends within 60 s with exit 4, says the panic once, writes `result.json` (verdict
/// fail, the message its reason), and that `recover` then replays the dirty databases and
/// `checksum` finds them sound.
fn a_panic_at_stops_everything(place: &str) {
    let dir = tempfile::tempdir().expect("tempdir");
    let job = small_job(dir.path(), "10m", "");
    let job = job.to_str().expect("utf-8");
    run_expecting(dir.path(), &["init", job, "--out", "i"], 0);
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("jetproof"))
        .current_dir(dir.path())
        .args(["run", job, "--test", "performance", "--out", "r", "--quiet"])
        .env("JETPROOF_TEST_PANIC", place)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn jetproof");
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if started.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            panic!("a panic at `{place}` did not end the process within 60 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let output = child.wait_with_output().expect("output");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(status.code(), Some(4), "panic at {place}: {stderr}");
    let said = format!("test panic injected at `{place}`");
    assert_eq!(stderr.matches(&said).count(), 1, "{stderr}");
    assert!(stderr.contains("internal error (a bug)"), "{stderr}");
    assert!(stderr.contains("need `jetproof recover`"), "{stderr}");
    let r = result(&dir.path().join("r/result.json"));
    assert_eq!(r["verdict"], "fail", "{r}");
    assert_eq!(r["test"], "performance", "{r}");
    assert_eq!(r["interrupted"], true, "{r}");
    assert!(r["reasons"].to_string().contains(&said), "{}", r["reasons"]);
    // Left as a crash leaves them: dirty, and recovered.
    let (stdout, _) = run_expecting(dir.path(), &["recover", job, "--out", "rec"], 0);
    assert!(!stdout.contains("nothing to recover"), "{stdout}");
    run_expecting(dir.path(), &["checksum", job, "--out", "c"], 0);
}

#[test]
fn a_panic_on_the_main_thread_stops_every_thread_and_writes_a_failed_result() {
    a_panic_at_stops_everything("main");
}

#[test]
fn a_panic_on_a_session_thread_stops_every_thread_and_writes_a_failed_result() {
    a_panic_at_stops_everything("session");
}

#[test]
fn a_duration_or_size_beyond_its_bound_is_refused_naming_the_key() {
    let dir = tempfile::tempdir().expect("tempdir");
    for (key, extra, said) in [
        (
            "run.sample_interval",
            "",
            "sample_interval = \"18446744073709551615s\"",
        ),
        ("run.duration", "", "duration = \"367days\""),
        ("run.stress_duration", "", "stress_duration = \"400days\""),
        ("cache.max_size", "[cache]\nmax_size = \"2PiB\"\n", ""),
        ("storage.db_size", "", ""),
    ] {
        let text = match key {
            "run.sample_interval" | "run.duration" | "run.stress_duration" => {
                format!("[run]\n{said}\n{extra}")
            }
            "storage.db_size" => "[storage]\ndb_size = \"2000TiB\"\n".to_string(),
            _ => extra.to_string(),
        };
        let job = dir.path().join("job.toml");
        std::fs::write(&job, text).expect("write job");
        let job = job.to_str().expect("utf-8");
        for args in [
            vec!["job", job],
            vec!["run", job, "--test", "performance", "--out", "r"],
        ] {
            let (_, stderr) = run_expecting(dir.path(), &args, 2);
            assert!(stderr.contains(&format!("`{key}`")), "{key}: {stderr}");
            assert!(stderr.contains("give at most"), "{key}: {stderr}");
        }
        assert!(!dir.path().join("r").exists(), "{key}: nothing made");
    }
    // The bound is a year: a year runs (here: is accepted by `job`).
    let job = dir.path().join("job.toml");
    std::fs::write(&job, "[run]\nstress_duration = \"366days\"\n").expect("write job");
    jetproof(dir.path())
        .args(["job", job.to_str().expect("utf-8")])
        .assert()
        .success();
    // probe's own --duration too.
    let (_, stderr) = run_expecting(
        dir.path(),
        &["probe", "--path", "p", "--duration", "400days"],
        2,
    );
    assert!(stderr.contains("--duration"), "{stderr}");
    assert!(!dir.path().join("p").exists());
}

/// Runs `args` with a panic injected at `place` and checks the process ends with exit 4, says
/// the panic once and leaves `out/result.json` with verdict fail and the panic as its reason.
fn panics_with_a_failed_result(dir: &std::path::Path, args: &[&str], place: &str, out: &str) {
    let output = jetproof(dir)
        .args(args)
        .args(["--out", out])
        .env("JETPROOF_TEST_PANIC", place)
        .timeout(Duration::from_secs(60))
        .output()
        .expect("runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(
        output.status.code(),
        Some(4),
        "{args:?} at {place}: {stderr}"
    );
    let said = format!("test panic injected at `{place}`");
    assert_eq!(stderr.matches(&said).count(), 1, "{stderr}");
    let r = result(&dir.join(out).join("result.json"));
    assert_eq!(r["verdict"], "fail", "{r}");
    assert_eq!(r["interrupted"], true, "{r}");
    assert!(r["reasons"].to_string().contains(&said), "{}", r["reasons"]);
}

/// Issue 34: `init`, `checksum` and `recover` stopped by a panic used to exit 4 with no
/// `result.json`; each now writes one (verdict fail, the panic its reason), as `run` does, and
/// what it left is taken up by the next command: init finishes its partial databases, recover
/// replays what the panicked recover did not.
#[test]
fn init_checksum_and_recover_stopped_by_a_panic_write_a_failed_result() {
    let dir = tempfile::tempdir().expect("tempdir");
    let job = small_job(dir.path(), "10m", "");
    let job = job.to_str().expect("utf-8");
    panics_with_a_failed_result(dir.path(), &["init", job, "--quiet"], "init", "i1");
    run_expecting(dir.path(), &["init", job, "--out", "i2", "--quiet"], 0);
    panics_with_a_failed_result(dir.path(), &["checksum", job, "--quiet"], "checksum", "c1");
    // Dirty databases for recover: a run stopped by a panic leaves them as a crash does.
    let output = jetproof(dir.path())
        .args(["run", job, "--test", "performance", "--out", "r", "--quiet"])
        .env("JETPROOF_TEST_PANIC", "main")
        .timeout(Duration::from_secs(60))
        .output()
        .expect("runs");
    assert_eq!(output.status.code(), Some(4), "{output:?}");
    panics_with_a_failed_result(dir.path(), &["recover", job, "--quiet"], "recover", "rec1");
    let (stdout, _) = run_expecting(dir.path(), &["recover", job, "--out", "rec2"], 0);
    assert!(!stdout.contains("nothing to recover"), "{stdout}");
    run_expecting(dir.path(), &["checksum", job, "--out", "c2"], 0);
}
