//! Standard output that cannot be written (a closed pipe, a terminal gone after SIGHUP, a full
//! disk: here `/dev/full`, which fails every write with ENOSPC) is never a panic. It is said once
//! on stderr; a test still writes its result files and exits with its verdict; commands whose
//! product is what they print (`plan`, `job`, `completions`, `man`) exit 3.

mod common;
use common::small_job;

/// The binary run in `dir` with its standard output on `/dev/full` and its stderr captured.
fn jetproof_to_dev_full(dir: &std::path::Path, args: &[&str]) -> std::process::Output {
    std::process::Command::new(assert_cmd::cargo::cargo_bin("jetproof"))
        .current_dir(dir)
        .args(args)
        .stdout(dev_full())
        .stderr(std::process::Stdio::piped())
        .output()
        .expect("runs")
}

fn dev_full() -> std::fs::File {
    std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .expect("/dev/full")
}

fn assert_said_without_panic(stderr: &[u8]) {
    let stderr = String::from_utf8_lossy(stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(
        stderr.contains("cannot write to standard output"),
        "{stderr}"
    );
}

#[test]
fn printing_commands_exit_3_when_their_output_cannot_be_written() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cases: &[&[&str]] = &[
        &[
            "plan",
            "--mailboxes",
            "100000",
            "--iops-per-mailbox",
            "0.15",
        ],
        &["job", "--default"],
        &["completions", "bash"],
        &["man"],
    ];
    for args in cases {
        let output = jetproof_to_dev_full(dir.path(), args);
        assert_eq!(output.status.code(), Some(3), "{args:?}");
        assert_said_without_panic(&output.stderr);
    }
}

#[test]
fn a_test_with_its_output_gone_still_writes_its_results_and_its_verdict() {
    let dir = tempfile::tempdir().expect("tempdir");
    let job = small_job(dir.path(), "2s", "");
    let job = job.to_str().expect("utf-8");
    let output = jetproof_to_dev_full(
        dir.path(),
        &["run", job, "--test", "performance", "--out", "r"],
    );
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_said_without_panic(&output.stderr);
    let result: serde_json::Value = serde_json::from_slice(
        &std::fs::read(dir.path().join("r/result.json")).expect("result.json"),
    )
    .expect("json");
    assert_eq!(result["verdict"], "pass", "{result}");
}
