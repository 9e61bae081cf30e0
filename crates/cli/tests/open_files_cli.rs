//! The open-file limit (`docs/io.md`, "Open files"): with the io_uring engine a session reading
//! at once holds a ring, one descriptor per file, so a few hundred sessions pass the usual soft
//! limit of 1024. jetproof raises its soft limit to the hard limit at start; what is left (the
//! hard limit) is reported naming the limit and the fix, never as "io_uring is not available".

use std::path::Path;
use std::process::Command;

mod common;
use common::{jetproof, small_job};

/// The common small job with 64 sessions per database (up to ~128 rings at once with io_uring)
/// and a 4 MiB cache for them.
fn many_sessions_job(dir: &Path) {
    let job = small_job(dir, "2s", "");
    let text = std::fs::read_to_string(&job)
        .expect("job")
        .replacen("threads = 2", "threads = 64", 1)
        .replacen("max_size = \"1MiB\"", "max_size = \"4MiB\"", 1);
    std::fs::write(&job, text).expect("write job");
}

/// `jetproof run` of `job` with the io_uring engine under the shell's `ulimit` arguments.
fn run_under_ulimit(dir: &Path, ulimit: &str, out: &str) -> std::process::Output {
    let script = format!(
        "ulimit {ulimit} && exec \"$0\" run job.toml --test performance --io-engine io_uring --out {out} --quiet"
    );
    Command::new("sh")
        .arg("-c")
        .arg(script)
        .arg(env!("CARGO_BIN_EXE_jetproof"))
        .current_dir(dir)
        .output()
        .expect("run sh")
}

#[test]
fn a_low_soft_limit_is_raised_to_the_hard_limit_and_the_test_log_says_so() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path();
    many_sessions_job(dir);
    jetproof(dir)
        .args(["init", "job.toml", "--quiet"])
        .assert()
        .success();
    let hard = String::from_utf8_lossy(
        &Command::new("sh")
            .args(["-c", "ulimit -Hn"])
            .output()
            .expect("ulimit -Hn")
            .stdout,
    )
    .trim()
    .to_string();
    assert_ne!(hard, "64", "the test needs a hard limit above 64");
    // A soft limit of 64 under a higher hard limit: the run takes the hard limit.
    let output = run_under_ulimit(dir, "-Sn 64", "soft");
    assert!(
        output.status.success(),
        "soft limit 64, hard {hard}:\n{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let log = std::fs::read_to_string(dir.join("soft/test.log")).expect("test.log");
    let want = format!("Open files: limit {hard} (hard limit {hard})");
    assert!(log.contains(&want), "want {want:?} in:\n{log}");
}
