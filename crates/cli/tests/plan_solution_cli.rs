//! `jetproof plan --write-solution FILE` through the real binary (issue 32, item 11): the file
//! holds the servers, the plan's sizing flags and figures, ESRP's test set, a rehearsal scale and
//! the job; `jetproof esrp` reads it (an unknown key would be exit 2 naming the key); bad
//! `--hosts` and a file jetproof did not write are refused with exit 2, nothing written.

use assert_cmd::Command;
use predicates::prelude::*;

fn jetproof() -> Command {
    match Command::cargo_bin("jetproof") {
        Ok(command) => command,
        Err(e) => panic!("the jetproof binary is built for tests: {e}"),
    }
}

const SIZING: [&str; 10] = [
    "--mailboxes",
    "600",
    "--iops-per-mailbox",
    "0.1",
    "--servers",
    "2",
    "--databases-per-server",
    "2",
    "--mailbox-size",
    "64MiB",
];

#[test]
fn write_solution_holds_servers_plan_tests_rehearsal_and_job_and_esrp_reads_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("solution.toml");
    jetproof()
        .arg("plan")
        .args(SIZING)
        .args(["--write-solution"])
        .arg(&path)
        .args(["--hosts", "h1,h2", "--data-dir", "/srv/jp-data"])
        .assert()
        .success();
    let text = std::fs::read_to_string(&path).expect("written");
    assert_eq!(text.lines().next(), Some("# Written by `jetproof plan`."));
    let file: toml::Value = toml::from_str(&text).expect("TOML");

    let strings = |key: &str| -> Vec<String> {
        file[key]
            .as_array()
            .unwrap_or_else(|| panic!("{key} is a list"))
            .iter()
            .map(|v| v.as_str().expect("string").to_string())
            .collect()
    };
    assert_eq!(strings("servers"), ["h1", "h2"]);
    // Only the sizing flags: esrp computes the plan again from them.
    assert_eq!(strings("plan"), SIZING);

    let figures = &file["plan_figures"];
    assert_eq!(figures["mailboxes_per_server"].as_integer(), Some(300));
    assert_eq!(figures["mailboxes_per_database"].as_integer(), Some(150));
    assert_eq!(figures["target_iops_per_server"].as_float(), Some(36.0));
    assert_eq!(figures["target_iops_total"].as_float(), Some(72.0));

    let tests = &file["tests"];
    assert_eq!(tests["performance"].as_str(), Some("2h"));
    assert_eq!(tests["stress"].as_str(), Some("1day"));
    assert_eq!(tests["checksum_after_performance"].as_bool(), Some(true));
    assert_eq!(tests["checksum_after_stress"].as_bool(), Some(true));
    assert_eq!(tests["backup"].as_bool(), Some(true));
    assert_eq!(tests["soft_recovery_log_files"].as_integer(), Some(500));
    let rehearsal = &file["rehearsal"];
    assert_eq!(rehearsal["performance"].as_str(), Some("2m"));
    assert_eq!(rehearsal["stress"].as_str(), Some("5m"));
    assert_eq!(rehearsal["soft_recovery_log_files"].as_integer(), Some(20));

    // The job is one `init` and `run` accept: `jetproof job FILE` checks it.
    let job_path = dir.path().join("job.toml");
    std::fs::write(
        &job_path,
        toml::to_string(&file["job"]).expect("job serialises"),
    )
    .expect("write job");
    let job = jetproof().arg("job").arg(&job_path).assert().success();
    let job_text = String::from_utf8_lossy(&job.get_output().stdout).into_owned();
    for line in [
        "mailboxes = 300",
        "databases = 2",
        "data_dir = \"/srv/jp-data\"",
        "duration = \"2h\"",
        "recovery_log_files = 500",
        "checksum_after_performance = true",
    ] {
        assert!(job_text.contains(line), "job lacks {line}:\n{job_text}");
    }

    // esrp reads the file: past the solution, it stops at the (empty) results, not a key.
    let results = dir.path().join("results");
    std::fs::create_dir(&results).expect("results dir");
    jetproof()
        .arg("esrp")
        .arg(&path)
        .arg(&results)
        .arg("--out")
        .arg(dir.path().join("esrp"))
        .assert()
        .code(2)
        .stderr(predicate::str::contains("holds no results"))
        .stderr(predicate::str::contains("unknown field").not());

    // Written again over its own file: allowed (the marker is its first line).
    jetproof()
        .arg("plan")
        .args(SIZING)
        .args(["--write-solution"])
        .arg(&path)
        .args(["--hosts", "h1,h2"])
        .assert()
        .success();
}

#[test]
fn bad_hosts_and_foreign_files_exit_2_writing_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("solution.toml");
    for (hosts, message) in [
        ("h1,h2,h3", "`--hosts` names 3 servers but `--servers` is 2"),
        ("h1,h1", "`--hosts` names h1 twice"),
        ("h1,", "`--hosts`: name 2 is empty"),
    ] {
        jetproof()
            .arg("plan")
            .args(SIZING)
            .arg("--write-solution")
            .arg(&path)
            .args(["--hosts", hosts])
            .assert()
            .code(2)
            .stderr(predicate::str::contains(message));
        assert!(!path.exists(), "{hosts}: nothing written");
    }
    std::fs::write(&path, "vendor = \"mine\"\n").expect("foreign file");
    jetproof()
        .arg("plan")
        .args(SIZING)
        .arg("--write-solution")
        .arg(&path)
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "`--write-solution` refuses to overwrite",
        ));
    assert_eq!(
        std::fs::read_to_string(&path).expect("kept"),
        "vendor = \"mine\"\n"
    );
}
