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
