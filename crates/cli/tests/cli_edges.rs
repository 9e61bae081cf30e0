//! The command line's edges (issue 20): flags a command does not use are refused (exit 2,
//! naming the flag) before anything is made; `--db-size` on databases that exist is said to
//! change nothing; probe takes `--io-engine` like every other command (`--backend` is its old
//! name); shell completions and manual pages come from the parser's own definitions.

use predicates::prelude::*;

mod common;
use common::{jetproof, small_job};

#[test]
fn flags_a_command_does_not_use_are_refused_before_anything_is_made() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cases: &[(&[&str], &str)] = &[
        (&["checksum", "--threads", "4"], "--threads"),
        (&["checksum", "--duration", "2h"], "--duration"),
        (&["checksum", "--db-size", "1GiB"], "--db-size"),
        (&["recover", "--threads", "4"], "--threads"),
        (&["recover", "--duration", "2h"], "--duration"),
        (&["recover", "--db-size", "1GiB"], "--db-size"),
        (&["init", "--duration", "2h"], "--duration"),
        (&["init", "--threads", "4"], "--threads"),
        (
            &["run", "--test", "backup", "--log-files", "5"],
            "log-files",
        ),
        (
            &["run", "--test", "backup", "--duration", "1m"],
            "--duration",
        ),
        (&["run", "--test", "backup", "--threads", "2"], "--threads"),
        (
            &["run", "--test", "performance", "--log-files", "5"],
            "log-files",
        ),
        (
            &["run", "--test", "stress", "--log-files", "5"],
            "log-files",
        ),
        (
            &["run", "--test", "soft-recovery", "--duration", "1m"],
            "--duration",
        ),
    ];
    for (args, flag) in cases {
        jetproof(dir.path()).args(*args).assert().code(2).stderr(
            predicate::str::contains(*flag).and(
                predicate::str::contains("does not use")
                    .or(predicate::str::contains("only the backup test")),
            ),
        );
        let made: Vec<_> = std::fs::read_dir(dir.path())
            .expect("list")
            .map(|e| e.expect("entry").file_name())
            .collect();
        assert!(made.is_empty(), "{args:?} made {made:?}");
    }
}

#[test]
fn db_size_on_databases_that_exist_is_said_to_change_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let job = small_job(dir.path(), "1s", "");
    let job = job.to_str().expect("utf-8");
    jetproof(dir.path()).args(["init", job]).assert().success();
    jetproof(dir.path())
        .args([
            "run",
            job,
            "--test",
            "performance",
            "--db-size",
            "64MiB",
            "--out",
            "r",
        ])
        .assert()
        .success()
        .stderr(
            predicate::str::contains("--db-size").and(predicate::str::contains("exist already")),
        );
}

#[test]
fn completions_and_manual_pages_cover_every_command() {
    let dir = tempfile::tempdir().expect("tempdir");
    for shell in ["bash", "zsh", "fish"] {
        let out = jetproof(dir.path())
            .args(["completions", shell])
            .assert()
            .success()
            .get_output()
            .stdout
            .clone();
        let text = String::from_utf8(out).expect("utf-8");
        for word in [
            "checksum",
            "recover",
            "probe",
            "completions",
            "io-engine",
            "log-files",
        ] {
            assert!(text.contains(word), "{shell}: {word} missing");
        }
    }
    let page = jetproof(dir.path())
        .arg("man")
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let page = String::from_utf8(page).expect("utf-8");
    assert!(
        page.starts_with(".ie") || page.contains(".TH jetproof"),
        "{page}"
    );
    let run = jetproof(dir.path())
        .args(["man", "run"])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let run = String::from_utf8(run).expect("utf-8");
    assert!(run.contains(".TH jetproof-run"), "{run}");
    assert!(
        run.contains("soft\\-recovery") || run.contains("soft-recovery"),
        "{run}"
    );
    jetproof(dir.path())
        .args(["man", "frobnicate"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("no command `frobnicate`"));
    assert_eq!(
        std::fs::read_dir(dir.path()).expect("list").count(),
        0,
        "nothing is written"
    );
}

#[test]
fn probe_takes_io_engine_and_still_its_old_name() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("p.dat");
    let path = path.to_str().expect("utf-8");
    for flag in ["--io-engine", "--backend"] {
        let out = jetproof(dir.path())
            .args([
                "probe",
                "--path",
                path,
                "--file-size",
                "2MiB",
                "--duration",
                "200ms",
                flag,
                "std",
                "--json",
                "--buffered",
            ])
            .assert()
            .success()
            .get_output()
            .stdout
            .clone();
        let json: serde_json::Value = serde_json::from_slice(&out).expect("json");
        assert_eq!(json["backend"], "std", "{flag}: {json}");
    }
}

/// Issue 32, point 12: `jetproof run performance` takes the word as a job file; with no such
/// file, the refusal says which flag was meant (exit 2, nothing made). Without any test, the
/// refusal lists the tests.
#[test]
fn a_test_name_given_as_the_job_file_gets_a_did_you_mean() {
    let dir = tempfile::tempdir().expect("tempdir");
    for (word, flag) in [
        ("performance", "--test performance"),
        ("Stress", "--test stress"),
        ("soft-recovery", "--test soft-recovery"),
    ] {
        let output = jetproof(dir.path())
            .args(["run", word])
            .output()
            .expect("runs");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains("did you mean"), "{stderr}");
        assert!(stderr.contains(flag), "{flag}: {stderr}");
    }
    let output = jetproof(dir.path()).args(["run"]).output().expect("runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--test"), "{stderr}");
    assert!(stderr.contains("soft-recovery"), "{stderr}");
    assert!(!stderr.contains("did you mean"), "{stderr}");
    assert_eq!(
        std::fs::read_dir(dir.path()).expect("list").count(),
        0,
        "nothing made"
    );
}

/// `jetproof --version` names the commit it was built from (issue 37, `build.rs`): the crate
/// version and `(commit HASH)`, HASH being this checkout's `git rev-parse --short=12 HEAD`
/// (with `-dirty` for uncommitted changes), or "unknown" when built outside git.
#[test]
fn version_names_the_commit_it_was_built_from() {
    let dir = tempfile::tempdir().expect("tempdir");
    let output = jetproof(dir.path())
        .arg("--version")
        .output()
        .expect("run --version");
    assert!(output.status.success());
    let text = String::from_utf8(output.stdout).expect("utf-8");
    let head = std::process::Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned());
    let expected = match head {
        Some(hash) => format!("jetproof {} (commit {hash}", env!("CARGO_PKG_VERSION")),
        None => format!("jetproof {} (commit unknown)", env!("CARGO_PKG_VERSION")),
    };
    assert!(text.starts_with(&expected), "{text:?} vs {expected:?}");
}

/// Issue 32, item 12: each command's `--help` lists only the overrides it uses: `init` makes
/// the databases (no sessions, no window), `checksum` and `recover` read what exists (no size
/// either); `run` keeps them all. Given anyway, they are still refused by name (exit 2).
#[test]
fn help_lists_only_the_overrides_a_command_uses() {
    let dir = tempfile::tempdir().expect("tempdir");
    let help = |command: &str| {
        let output = jetproof(dir.path())
            .args([command, "--help"])
            .output()
            .expect("runs");
        assert!(output.status.success(), "{command} --help");
        String::from_utf8_lossy(&output.stdout).into_owned()
    };
    let init = help("init");
    assert!(
        !init.contains("--threads") && !init.contains("--duration"),
        "{init}"
    );
    assert!(
        init.contains("--db-size") && init.contains("--data-dir"),
        "{init}"
    );
    for command in ["checksum", "recover"] {
        let text = help(command);
        for flag in ["--threads", "--duration", "--db-size"] {
            assert!(!text.contains(flag), "{command} lists {flag}: {text}");
        }
    }
    let run = help("run");
    for flag in ["--threads", "--duration", "--db-size", "--cache-max"] {
        assert!(run.contains(flag), "run lacks {flag}: {run}");
    }
    let output = jetproof(dir.path())
        .args(["init", "--threads", "4"])
        .output()
        .expect("runs");
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("--threads"));
    assert!(!dir.path().join("jetproof-data").exists());
}
