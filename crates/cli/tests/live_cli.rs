//! The live view of a workload test (issue 17): under a pseudo-terminal (`script`, util-linux)
//! the status line is redrawn with each sample's figures; on a pipe, one plain line per sample
//! interval; `--quiet` silences both.

mod common;

use std::process::Command;

use common::{jetproof, small_job};

/// The elapsed seconds of each live line in `text` ("measuring E/D s").
fn elapsed(text: &str) -> Vec<String> {
    text.split("measuring ")
        .skip(1)
        .filter_map(|rest| rest.split('/').next().map(str::to_string))
        .collect()
}

#[test]
fn a_pipe_gets_one_plain_line_per_sample_and_quiet_none() {
    let dir = tempfile::tempdir().expect("tempdir");
    let job = small_job(dir.path(), "3s", "");
    jetproof(dir.path())
        .arg("init")
        .arg(&job)
        .assert()
        .success();
    let out = jetproof(dir.path())
        .args(["run", "--test", "performance", "--out", "piped"])
        .arg(&job)
        .output()
        .expect("run");
    assert!(out.status.success(), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("jetproof: measuring "))
        .collect();
    // Six half-second intervals in 3 s (a late one may merge): at least four, in order.
    assert!(lines.len() >= 4, "{stderr}");
    let seconds: Vec<f64> = elapsed(&lines.join("\n"))
        .iter()
        .map(|s| s.parse().expect("seconds"))
        .collect();
    assert!(seconds.windows(2).all(|w| w[0] <= w[1]), "{seconds:?}");
    for line in &lines {
        assert!(
            line.contains("transactional IOPS")
                && line.contains("DB reads avg")
                && line.contains("log writes avg")
                && line.contains("verdict so far: pass"),
            "{line}"
        );
    }
    assert!(
        !stderr.contains('\r') && !stderr.contains('\u{1b}'),
        "no redraws on a pipe"
    );

    let quiet = jetproof(dir.path())
        .args(["run", "--test", "performance", "--quiet", "--out", "quiet"])
        .arg(&job)
        .output()
        .expect("run");
    assert!(quiet.status.success());
    let stderr = String::from_utf8_lossy(&quiet.stderr);
    assert!(!stderr.contains("measuring"), "{stderr}");
}

#[test]
fn a_terminal_sees_the_status_redrawn_with_new_figures() {
    let Ok(script) = which("script") else {
        panic!("`script` (util-linux) is needed to run jetproof under a pseudo-terminal");
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let job = small_job(dir.path(), "3s", "");
    jetproof(dir.path())
        .arg("init")
        .arg(&job)
        .assert()
        .success();
    let binary = assert_cmd::cargo::cargo_bin("jetproof");
    let command = format!(
        "{} run {} --test performance --out tty",
        binary.display(),
        job.display()
    );
    let out = Command::new(script)
        .current_dir(dir.path())
        .args(["-qfec", &command, "/dev/null"])
        .output()
        .expect("script");
    assert!(out.status.success(), "{out:?}");
    let screen = String::from_utf8_lossy(&out.stdout);
    let seen = elapsed(&screen);
    assert!(
        screen.contains("pass | measuring "),
        "the verdict leads: {screen}"
    );
    let mut distinct = seen.clone();
    distinct.dedup();
    assert!(
        distinct.len() >= 3,
        "the status shows at least three different moments of the window: {seen:?}\n{screen}"
    );
    assert!(
        screen.contains('\r') || screen.contains("\u{1b}["),
        "the line is redrawn in place: {screen}"
    );
    assert!(
        !screen.contains("jetproof: measuring"),
        "no plain lines on a terminal"
    );
    assert!(
        screen.contains("Overall Test Result"),
        "the summary follows"
    );
}

fn which(name: &str) -> Result<std::path::PathBuf, ()> {
    let path = std::env::var_os("PATH").ok_or(())?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
        .ok_or(())
}
