//! The live view of the phases outside the measured window (issue 17): warm-up, auto-tune steps,
//! the stress test's checksum pass, init, backup, checksum, soft recovery's log generation and
//! replay. On a pipe each phase gets plain lines (phase, elapsed, ETA, figures); `--quiet`
//! silences them; under a pseudo-terminal the status is redrawn instead.

mod common;

use std::path::Path;
use std::process::Command;

use common::{LENIENT_THRESHOLDS, jetproof};

/// The plain live lines of `stderr` whose phase starts with `phase`.
fn lines<'a>(stderr: &'a str, phase: &str) -> Vec<&'a str> {
    stderr
        .lines()
        .filter(|l| l.starts_with(&format!("jetproof: {phase}")))
        .collect()
}

/// The percent figures ("42.0%") of `lines`, in order.
fn percents(lines: &[&str]) -> Vec<f64> {
    lines
        .iter()
        .filter_map(|l| {
            let end = l.find("% (")?;
            let start = l[..end].rfind(' ')? + 1;
            l[start..end].parse().ok()
        })
        .collect()
}

fn stderr_of(dir: &Path, args: &[&str]) -> String {
    stderr_of_verdict(dir, args, false)
}

/// As `stderr_of`; with `either_verdict` a failed verdict (exit 1) is accepted too: a paced run
/// on a loaded 2-core CI machine can fall short of its target, which is not what is tested.
fn stderr_of_verdict(dir: &Path, args: &[&str], either_verdict: bool) -> String {
    let out = jetproof(dir).args(args).output().expect("runs");
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    let code = out.status.code();
    assert!(
        code == Some(0) || (either_verdict && code == Some(1)),
        "{args:?}: {code:?} {stderr}"
    );
    assert!(
        !stderr.contains('\r') && !stderr.contains('\u{1b}'),
        "no redraws on a pipe: {stderr}"
    );
    stderr
}

/// A job of two 16 MiB databases; `threads` and a target as given.
fn job(dir: &Path, workload: &str) -> String {
    let job = dir.join("job.toml");
    std::fs::write(
        &job,
        format!(
            "[storage]\ndatabases = 2\ndb_size = \"16MiB\"\npage_size = \"8KiB\"\ndirect_io = false\n\
             [workload]\nrecord_size = \"1KiB\"\n{workload}\n\
             [cache]\nmin_size = \"512KiB\"\nmax_size = \"1MiB\"\n\
             [run]\nduration = \"1s\"\nstress_duration = \"1s\"\nsample_interval = \"500ms\"\n\
             [simulation]\nmailboxes = 100\niops_per_mailbox = 1.0\n{LENIENT_THRESHOLDS}"
        ),
    )
    .expect("write job");
    job.to_str().expect("utf-8").to_string()
}

#[test]
fn init_backup_checksum_and_soft_recovery_print_their_progress_on_a_pipe_and_quiet_silences_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let job = job(dir.path(), "threads = 2");

    let init = stderr_of(dir.path(), &["init", &job, "--out", "init"]);
    let filling = lines(&init, "init: Filling");
    assert!(!filling.is_empty(), "{init}");
    assert!(
        filling
            .iter()
            .any(|l| l.contains("100.0% (32.00 of 32.00 MiB)")),
        "the fill (both databases at once) ends at their size: {init}"
    );

    let backup = stderr_of(dir.path(), &["run", &job, "--test", "backup", "--out", "b"]);
    let progress = lines(&backup, "backup ");
    let seen = percents(&progress);
    // Two 16 MiB databases (and their growth's pages): the last line says all of it was read.
    assert!(
        seen.len() >= 2 && seen.windows(2).all(|w| w[0] <= w[1]),
        "{backup}"
    );
    assert_eq!(seen.last().copied(), Some(100.0), "{backup}");
    assert!(
        progress
            .iter()
            .all(|l| l.contains(" s") && l.contains(" MB/s") && !l.contains("MiB/s")),
        "elapsed and rate (MB/s of 10^6 bytes, as in result.json) on every line: {backup}"
    );

    let checksum = stderr_of(dir.path(), &["checksum", &job, "--out", "c"]);
    let seen = percents(&lines(&checksum, "checksum "));
    assert_eq!(seen.last().copied(), Some(100.0), "{checksum}");

    let recovery = stderr_of(
        dir.path(),
        &[
            "run",
            &job,
            "--test",
            "soft-recovery",
            "--log-files",
            "2",
            "--out",
            "r",
        ],
    );
    let generation = lines(&recovery, "log generation ");
    assert!(
        generation
            .iter()
            .any(|l| l.contains("100.0% (4 of 4 log files, 2 per instance)")),
        "{recovery}"
    );
    let replay = lines(&recovery, "replay ");
    assert!(
        replay
            .last()
            .is_some_and(|l| l.contains("0 of 2 instance(s) replaying")),
        "the replay's end is told: {recovery}"
    );

    for args in [
        vec!["run", &job, "--test", "backup", "--quiet", "--out", "bq"],
        vec!["checksum", &job, "--quiet", "--out", "cq"],
        vec!["init", &job, "--recreate", "--quiet", "--out", "iq"],
    ] {
        let quiet = stderr_of(dir.path(), &args);
        assert!(
            !quiet.contains('%') && !quiet.contains("ETA"),
            "{args:?}: --quiet prints no progress: {quiet}"
        );
    }
}

#[test]
fn a_stress_test_with_auto_tune_tells_warm_up_each_step_and_its_checksum_pass() {
    let dir = tempfile::tempdir().expect("tempdir");
    let job = job(dir.path(), "threads = \"auto\"");
    jetproof(dir.path())
        .args(["init", &job, "--quiet", "--out", "init"])
        .assert()
        .success();
    let stderr = stderr_of_verdict(
        dir.path(),
        &["run", &job, "--test", "stress", "--out", "s"],
        true,
    );
    let warm = lines(&stderr, "warm-up ");
    assert!(!warm.is_empty(), "{stderr}");
    // The paced warm-up settles its estimate: its ETA counts down to the window.
    assert!(warm.iter().all(|l| l.contains("caches")), "{stderr}");
    let tune = lines(&stderr, "auto-tune step 1 ");
    assert!(
        tune.iter()
            .any(|l| l.contains("trying 1 session per instance")
                && l.contains("target of 100 transactional IOPS")),
        "{stderr}"
    );
    assert!(
        tune.iter()
            .any(|l| l.contains("transactional IOPS (target 100)")
                && l.contains("database reads avg")
                && l.contains("(limit 1000)")
                && (l.ends_with("target reached")
                    || l.ends_with("short of the target")
                    || l.ends_with("latency thresholds broken"))),
        "each step's result against the target and the thresholds: {stderr}"
    );
    let measuring = lines(&stderr, "measuring ");
    assert!(!measuring.is_empty(), "{stderr}");
    let checksum = lines(&stderr, "checksum after the stress test ");
    assert_eq!(percents(&checksum).last().copied(), Some(100.0), "{stderr}");
    // In order: warm-up, auto-tune, the window, the checksum pass.
    let at = |line: &str| stderr.find(line).expect("found");
    assert!(at(warm[0]) < at(tune[0]), "{stderr}");
    assert!(at(tune[tune.len() - 1]) < at(measuring[0]), "{stderr}");
    assert!(
        at(measuring[measuring.len() - 1]) < at(checksum[0]),
        "{stderr}"
    );
}

#[test]
fn a_terminal_sees_soft_recovery_redrawn_not_plain_lines() {
    let Some(script) = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|d| d.join("script"))
            .find(|p| p.is_file())
    }) else {
        panic!("`script` (util-linux) is needed to run jetproof under a pseudo-terminal");
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let job = job(dir.path(), "threads = 2");
    jetproof(dir.path())
        .args(["init", &job, "--quiet", "--out", "init"])
        .assert()
        .success();
    let binary = assert_cmd::cargo::cargo_bin("jetproof");
    let command = format!(
        "{} run {job} --test soft-recovery --log-files 3 --out tty",
        binary.display()
    );
    let out = Command::new(script)
        .current_dir(dir.path())
        .args(["-qfec", &command, "/dev/null"])
        .output()
        .expect("script");
    assert!(out.status.success(), "{out:?}");
    let screen = String::from_utf8_lossy(&out.stdout);
    assert!(
        screen.contains("log generation ") && screen.contains("log files, 3 per instance"),
        "{screen}"
    );
    assert!(
        screen.contains('\r') || screen.contains("\u{1b}["),
        "redrawn in place: {screen}"
    );
    assert!(
        !screen.contains("jetproof: log generation") && !screen.contains("jetproof: replay"),
        "no plain lines on a terminal: {screen}"
    );
}

/// A terminal's progress bars give the rate in MB/s of 10^6 bytes, as `result.json` and the
/// reports do, never MiB/s.
#[test]
fn a_terminal_sees_init_checksum_and_backup_rates_in_mb_per_second() {
    let Some(script) = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|d| d.join("script"))
            .find(|p| p.is_file())
    }) else {
        panic!("`script` (util-linux) is needed to run jetproof under a pseudo-terminal");
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let job = job(dir.path(), "threads = 2");
    let binary = assert_cmd::cargo::cargo_bin("jetproof");
    for (what, command) in [
        (
            "init",
            format!("{} init {job} --out init", binary.display()),
        ),
        (
            "checksum",
            format!("{} checksum {job} --out c", binary.display()),
        ),
        (
            "backup",
            format!("{} run {job} --test backup --out b", binary.display()),
        ),
    ] {
        let out = Command::new(&script)
            .current_dir(dir.path())
            .args(["-qfec", &command, "/dev/null"])
            .output()
            .expect("script");
        assert!(out.status.success(), "{what}: {out:?}");
        let screen = String::from_utf8_lossy(&out.stdout);
        // The bar's rate, before its ETA (the final summary says MB/s too).
        assert!(screen.contains(" MB/s ETA "), "{what}: {screen}");
        assert!(!screen.contains("MiB/s"), "{what}: {screen}");
    }
}

/// `--quiet` is a switch on `init`, `checksum` and `recover` (new there): given a value it is
/// bad input, exit 2, naming the flag, before anything is made.
#[test]
fn quiet_with_a_value_is_refused_before_any_io() {
    let dir = tempfile::tempdir().expect("tempdir");
    let job = job(dir.path(), "threads = 2");
    for command in ["init", "checksum", "recover"] {
        let out = jetproof(dir.path())
            .args([command, &job, "--quiet=yes"])
            .output()
            .expect("run");
        assert_eq!(out.status.code(), Some(2), "{command}: {out:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("--quiet"), "{command}: {stderr}");
        let mut entries: Vec<String> = std::fs::read_dir(dir.path())
            .expect("list")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        entries.sort();
        assert_eq!(entries, ["job.toml"], "{command} made something");
    }
}
