//! Hostile inputs through the real binary (issue 34, points 3, 5 and 6): special files where
//! jetproof reads a file (a named pipe as `result.json`, `samples.csv` or the job file, a link to
//! `/dev/zero` as `result.json`) are exit 2 naming the file, never a hang; a job of 10,000
//! `[[storage.instance]]` entries is checked (and a shared path among them still found);
//! impossible rates, `schema_version` 0 and a `--start-at` years ahead are exit 2 naming the key
//! or flag. Every command here runs under a timeout, so a hang fails the test instead of stalling
//! the suite.

use std::path::{Path, PathBuf};
use std::time::Duration;

mod common;
use common::{jetproof, small_job};

/// Longer than any of these commands takes when it does not hang.
const TIMEOUT: Duration = Duration::from_secs(60);

fn mkfifo(path: &Path) {
    let name = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).expect("path");
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(
        unsafe { libc::mkfifo(name.as_ptr(), 0o600) },
        0,
        "mkfifo {}",
        path.display()
    );
}

/// Runs `args` in `dir` under [`TIMEOUT`]; asserts exit 2 and that stderr holds every one of
/// `words`; returns stderr.
fn refused(dir: &Path, args: &[&str], words: &[&str]) -> String {
    let output = jetproof(dir)
        .args(args)
        .timeout(TIMEOUT)
        .output()
        .expect("runs");
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
    for word in words {
        assert!(stderr.contains(word), "{args:?}: no {word:?} in {stderr}");
    }
    stderr
}

/// A results directory holding a real `result.json` (of `init`), made once per test.
fn init_result(dir: &Path) -> PathBuf {
    let job = small_job(dir, "2s", "");
    jetproof(dir)
        .args(["init", job.to_str().expect("utf-8"), "--out", "good"])
        .timeout(TIMEOUT)
        .assert()
        .success();
    dir.join("good")
}

/// Everything under `dir`, by name: what a refused command must leave as it was.
fn names_under(dir: &Path) -> Vec<PathBuf> {
    let mut names: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("list")
        .flatten()
        .map(|e| e.path())
        .collect();
    names.sort();
    names
}

#[test]
fn special_files_as_result_json_or_samples_csv_are_refused_by_report_and_compare_without_hanging() {
    let root = tempfile::tempdir().expect("tempdir");
    let good = init_result(root.path());
    let text = std::fs::read_to_string(good.join("result.json")).expect("result.json");

    let fifo_json = root.path().join("fifo-json");
    std::fs::create_dir(&fifo_json).expect("dir");
    mkfifo(&fifo_json.join("result.json"));

    let fifo_samples = root.path().join("fifo-samples");
    std::fs::create_dir(&fifo_samples).expect("dir");
    std::fs::write(fifo_samples.join("result.json"), &text).expect("write");
    mkfifo(&fifo_samples.join("samples.csv"));

    let zero = root.path().join("zero");
    std::fs::create_dir(&zero).expect("dir");
    std::os::unix::fs::symlink("/dev/zero", zero.join("result.json")).expect("symlink");

    for (dir, file, what) in [
        ("fifo-json", "result.json", "named pipe"),
        ("fifo-samples", "samples.csv", "named pipe"),
        ("zero", "result.json", "character device"),
    ] {
        let before = names_under(&root.path().join(dir));
        refused(root.path(), &["report", dir], &[dir, file, what]);
        refused(
            root.path(),
            &["compare", "good", dir, "--out", "cmp"],
            &[dir, file, what],
        );
        refused(
            root.path(),
            &["compare", dir, "good", "--out", "cmp"],
            &[dir, file, what],
        );
        assert_eq!(names_under(&root.path().join(dir)), before, "{dir}");
        assert!(!root.path().join("cmp").exists(), "{dir}");
    }
    // The good directory itself still reports: the refusals are about the files, not the command.
    jetproof(root.path())
        .args(["report", "good"])
        .timeout(TIMEOUT)
        .assert()
        .success();
    assert!(good.join("report.html").is_file());
}

#[test]
fn a_named_pipe_as_the_job_file_is_refused_by_job_and_run_without_hanging() {
    let root = tempfile::tempdir().expect("tempdir");
    let fifo = root.path().join("job.toml");
    mkfifo(&fifo);
    refused(
        root.path(),
        &["job", "job.toml"],
        &["job.toml", "named pipe"],
    );
    refused(
        root.path(),
        &["run", "job.toml", "--test", "performance", "--out", "r"],
        &["job.toml", "named pipe"],
    );
    assert!(!root.path().join("r").exists());
    // A link to /dev/zero as the job file: refused before it is opened, as a device.
    std::os::unix::fs::symlink("/dev/zero", root.path().join("zero.toml")).expect("symlink");
    refused(
        root.path(),
        &["job", "zero.toml"],
        &["zero.toml", "character device"],
    );
}

#[test]
fn schema_version_0_and_newer_versions_are_refused_by_report_compare_and_aggregate_alike() {
    let root = tempfile::tempdir().expect("tempdir");
    init_result(root.path());
    let text = std::fs::read_to_string(root.path().join("good/result.json")).expect("read");
    let current = format!("\"schema_version\": {}", jetproof_results::SCHEMA_VERSION);
    assert!(text.contains(&current), "{text}");
    for (dir, version) in [("v0", 0), ("v99", 99)] {
        std::fs::create_dir(root.path().join(dir)).expect("dir");
        std::fs::write(
            root.path().join(dir).join("result.json"),
            text.replace(&current, &format!("\"schema_version\": {version}")),
        )
        .expect("write");
        let words = [dir, &format!("schema_version {version}") as &str];
        refused(root.path(), &["report", dir], &words);
        refused(
            root.path(),
            &["compare", "good", dir, "--out", "cmp"],
            &words,
        );
        // aggregate says it in its own words (every host must be at this version), naming the
        // version all the same.
        refused(
            root.path(),
            &["aggregate", dir, "--out", "agg"],
            &[dir, &format!("schema version {version}")],
        );
        assert!(!root.path().join(dir).join("report.html").exists());
        assert!(!root.path().join("cmp").exists() && !root.path().join("agg").exists());
    }
}

#[test]
fn impossible_rates_are_refused_naming_the_key_before_anything_is_made() {
    let root = tempfile::tempdir().expect("tempdir");
    for (extra, key) in [
        (
            "[simulation]\niops_per_mailbox = 1e-300\n",
            "simulation.iops_per_mailbox",
        ),
        (
            "[simulation]\niops_per_mailbox = 1e308\n",
            "simulation.iops_per_mailbox",
        ),
        (
            "[thresholds]\ndb_read_avg_ms = 1e300\n",
            "thresholds.db_read_avg_ms",
        ),
        (
            "[thresholds]\npage_fault_stalls_per_sec = 1e300\n",
            "thresholds.page_fault_stalls_per_sec",
        ),
    ] {
        let job = small_job(root.path(), "2s", extra);
        let job = job.to_str().expect("utf-8");
        refused(root.path(), &["job", job], &[key]);
        refused(root.path(), &["init", job, "--out", "i"], &[key]);
        refused(
            root.path(),
            &["run", job, "--test", "performance", "--out", "r"],
            &[key],
        );
        assert!(!root.path().join("i").exists() && !root.path().join("r").exists());
        assert!(!root.path().join("data").exists(), "{extra}");
    }
}

#[test]
fn a_start_more_than_7_days_ahead_is_refused_unless_forced() {
    let root = tempfile::tempdir().expect("tempdir");
    let job = small_job(root.path(), "2s", "");
    let job = job.to_str().expect("utf-8");
    for args in [
        vec!["run", job, "--test", "performance"],
        vec!["checksum", job],
    ] {
        let mut full = args.clone();
        full.extend(["--start-at", "9999-12-31T23:59:59Z", "--out", "r"]);
        refused(
            root.path(),
            &full,
            &["--start-at", "days ahead", "--force-start-at"],
        );
        assert!(!root.path().join("r").exists(), "{args:?}");
    }
    // 8 days ahead with --force-start-at: accepted; the run gets as far as waiting for the time,
    // and a Ctrl-C then stops it (not exit 2).
    jetproof(root.path())
        .args(["init", job, "--out", "i"])
        .timeout(TIMEOUT)
        .assert()
        .success();
    let at = jetproof_results::clock::rfc3339_millis(
        std::time::SystemTime::now() + Duration::from_secs(8 * 24 * 3600),
    );
    let child = common::spawn_jetproof(
        root.path(),
        &[
            "checksum",
            job,
            "--start-at",
            &at,
            "--force-start-at",
            "--out",
            "forced",
        ],
        true,
    );
    let started = std::time::Instant::now();
    let log = root.path().join("forced/test.log");
    while !std::fs::read_to_string(&log).is_ok_and(|l| l.contains("start time")) {
        assert!(
            started.elapsed() < TIMEOUT,
            "no wait for the start time in {}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let (status, _, stderr) = common::interrupt(child);
    assert_ne!(status.code(), Some(2), "{stderr}");
    // Without --start-at the flag means nothing: clap refuses it.
    refused(
        root.path(),
        &["checksum", job, "--force-start-at"],
        &["--start-at"],
    );
}

/// A job of `count` instances, each with its own database file and log directory under `root`.
fn many_instances(root: &Path, count: usize, shared_last_log: bool) -> String {
    use std::fmt::Write as _;
    let mut text = format!(
        "[simulation]\nmailboxes = {count}\niops_per_mailbox = 0.1\nmailbox_size = \"1MiB\"\n\
         [storage]\ndb_size = \"16MiB\"\n"
    );
    for index in 0..count {
        let log = if shared_last_log && index + 1 == count {
            0
        } else {
            index
        };
        let _ = write!(
            text,
            "[[storage.instance]]\nname = \"i{index}\"\n\
             database_path = \"{root}/d/i{index}/db.jpdb\"\nlog_path = \"{root}/d/i{log}/logs\"\n",
            root = root.display()
        );
    }
    text
}

/// Point 5's correctness at its size: 10,000 instances check and print; the same with the last
/// instance's log directory the first's is refused naming both. The time is measured by
/// `bench/job-check.sh`, not here.
#[test]
fn ten_thousand_instances_are_checked_and_a_shared_log_directory_among_them_is_found() {
    let root = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        root.path().join("many.toml"),
        many_instances(root.path(), 10_000, false),
    )
    .expect("write");
    let output = jetproof(root.path())
        .args(["job", "many.toml"])
        .timeout(TIMEOUT)
        .output()
        .expect("runs");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    std::fs::write(
        root.path().join("shared.toml"),
        many_instances(root.path(), 10_000, true),
    )
    .expect("write");
    refused(
        root.path(),
        &["job", "shared.toml"],
        &["storage.instance[9999].log_path", "\"i0\"", "\"i9999\""],
    );
}

/// A job of one instance at `database` with its log in `logs`, small enough to run in seconds.
fn one_instance_job(dir: &Path, name: &str, database: &Path, logs: &Path) -> String {
    let path = dir.join(name);
    std::fs::write(
        &path,
        format!(
            "[storage]\ndb_size = \"8MiB\"\ndirect_io = false\n\
             [[storage.instance]]\nname = \"db1\"\ndatabase_path = \"{}\"\nlog_path = \"{}\"\n\
             [cache]\nmin_size = \"1MiB\"\nmax_size = \"1MiB\"\n\
             [run]\nduration = \"2s\"\nsample_interval = \"500ms\"\n{}",
            database.display(),
            logs.display(),
            common::LENIENT_THRESHOLDS
        ),
    )
    .expect("write job");
    path.to_str().expect("utf-8").to_string()
}

/// Issue 34, point 7: a second job whose database is not made yet, given the log directory of
/// another job's live database. `init` used to take that log for a leftover of its own missing
/// database and remove it, and the first job's database could then never run again ("last used
/// with a log ... holds none"). Now `init` (and a run's init-if-missing) refuses before writing
/// anything, naming the directory and the database the log belongs to; the first job runs on.
/// The instance's own deleted database (its flush map still names the log's database) is still
/// started afresh by `init`, removing that log.
#[test]
fn a_log_directory_holding_another_jobs_log_is_refused_by_init_and_the_log_kept() {
    let root = tempfile::tempdir().expect("tempdir");
    let dir = root.path();
    let logs = dir.join("logs");
    std::fs::create_dir_all(dir.join("a")).expect("mkdir");
    std::fs::create_dir_all(dir.join("b")).expect("mkdir");
    let a = one_instance_job(dir, "a.toml", &dir.join("a/db1.jpdb"), &logs);
    let b = one_instance_job(dir, "b.toml", &dir.join("b/db1.jpdb"), &logs);
    let run = |job: &str, out: &str| {
        jetproof(dir)
            .args(["run", job, "--test", "performance", "--out", out, "--quiet"])
            .timeout(TIMEOUT)
            .output()
            .expect("runs")
    };
    let first = run(&a, "ra");
    assert_eq!(first.status.code(), Some(0), "{first:?}");
    let log_before = names_under(&logs);
    assert!(
        log_before.iter().any(|p| p.ends_with("checkpoint.jpchk")),
        "{log_before:?}"
    );
    for args in [
        vec!["init", b.as_str(), "--quiet"],
        vec!["init", b.as_str(), "--quiet", "--recreate"],
        vec!["run", b.as_str(), "--test", "performance", "--quiet"],
    ] {
        let stderr = refused(
            dir,
            &args,
            &[
                "log_path of db1",
                "holds the log of database",
                "a log directory of its own",
            ],
        );
        assert!(stderr.contains(&logs.display().to_string()), "{stderr}");
    }
    assert_eq!(names_under(&logs), log_before, "the log was touched");
    assert!(!dir.join("b/db1.jpdb").exists(), "a database was made");
    let again = run(&a, "ra2");
    assert_eq!(
        again.status.code(),
        Some(0),
        "the first job lost its log: {again:?}"
    );

    // The first job's own database deleted by hand: its flush map names the log's database,
    // so init starts afresh and removes that log.
    std::fs::remove_file(dir.join("a/db1.jpdb")).expect("remove");
    jetproof(dir)
        .args(["init", a.as_str(), "--quiet"])
        .timeout(TIMEOUT)
        .assert()
        .success();
    assert!(
        !names_under(&logs)
            .iter()
            .any(|p| p.ends_with("checkpoint.jpchk")),
        "the old log is still there"
    );
}
