//! `jetproof init` through the real binary: what a newcomer and a script see.

use std::path::Path;

use assert_cmd::Command;
use predicates::prelude::*;

fn jetproof(dir: &Path) -> Command {
    let mut cmd = Command::cargo_bin("jetproof").expect("binary built");
    cmd.current_dir(dir);
    cmd
}

/// A small job: two 4 MiB databases of 8 KiB pages, buffered I/O so it runs on any file system.
fn small_job(dir: &Path) -> std::path::PathBuf {
    let job = dir.join("job.toml");
    std::fs::write(
        &job,
        "[storage]\ndatabases = 2\ndb_size = \"4MiB\"\npage_size = \"8KiB\"\ndirect_io = false\n[workload]\nrecord_size = \"1KiB\"\n[cache]\nmin_size = \"1MiB\"\nmax_size = \"2MiB\"\n",
    )
    .expect("write job");
    job
}

/// A job that places its instances itself names their paths in init's summary, not the
/// `data_dir` it does not use.
#[test]
fn init_names_the_instances_paths_when_the_job_lists_them() {
    let dir = tempfile::tempdir().expect("tempdir");
    let job = dir.path().join("job.toml");
    std::fs::write(
        &job,
        "[storage]\ndb_size = \"4MiB\"\npage_size = \"8KiB\"\ndirect_io = false\n\
         [[storage.instance]]\nname = \"alpha\"\ndatabase_path = \"vol-a/alpha.jpdb\"\nlog_path = \"vol-a/logs\"\n\
         [[storage.instance]]\nname = \"beta\"\ndatabase_path = \"vol-b/beta.jpdb\"\nlog_path = \"vol-b/logs\"\n\
         [workload]\nrecord_size = \"1KiB\"\n[cache]\nmin_size = \"1MiB\"\nmax_size = \"2MiB\"\n",
    )
    .expect("write job");
    let out = jetproof(dir.path())
        .args(["init", job.to_str().expect("utf-8"), "--out", "r"])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let out = String::from_utf8(out).expect("utf-8");
    assert!(
        out.contains("Initialised 2 database(s) of 4MiB at the instances' paths:"),
        "{out}"
    );
    assert!(
        out.contains("  alpha: vol-a/alpha.jpdb (logs vol-a/logs)"),
        "{out}"
    );
    assert!(
        out.contains("  beta: vol-b/beta.jpdb (logs vol-b/logs)"),
        "{out}"
    );
    assert!(!out.contains("jetproof-data"), "{out}");
    assert!(dir.path().join("vol-b/beta.jpdb").is_file());
}

#[test]
fn init_creates_filled_databases_and_a_result() {
    let dir = tempfile::tempdir().expect("tempdir");
    let job = small_job(dir.path());
    jetproof(dir.path())
        .args(["init", job.to_str().expect("utf-8"), "--out", "r"])
        .assert()
        .success()
        .stdout(predicate::str::contains(
            "Initialised 2 database(s) of 4MiB under ./jetproof-data",
        ));
    for n in [1, 2] {
        let db = dir.path().join(format!("jetproof-data/db{n}/db{n}.jpdb"));
        let size = std::fs::metadata(&db).expect("database exists").len();
        assert!(size >= 4 << 20, "db{n} is {size} bytes");
    }
    let result: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("r/result.json")).expect("result.json"),
    )
    .expect("valid JSON");
    assert_eq!(result["test"], "init");
    assert_eq!(result["verdict"], "pass");
    assert!(
        result["totals"]["records_per_database"]
            .as_u64()
            .expect("records")
            > 100
    );
    // Every database is written by the engine (none is a copy since issue 33).
    for n in 0..2 {
        assert!(
            result["instances"][n]["db_write"]["count"]
                .as_u64()
                .expect("writes")
                > 0
        );
        // A copy read the whole first database; a fill reads only what the engine checks.
        let read = result["instances"][n]["db_read"]["bytes"]
            .as_u64()
            .unwrap_or(0);
        assert!(read < 1 << 20, "db{} read {read} bytes", n + 1);
    }
    let log = std::fs::read_to_string(dir.path().join("r/test.log")).expect("test.log");
    assert!(log.contains("Creating and filling 2 database(s)"), "{log}");
    assert!(!log.contains("Duplicating"), "{log}");
}

#[test]
fn a_second_init_refuses_without_recreate_and_replaces_with_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let job = small_job(dir.path());
    let job = job.to_str().expect("utf-8");
    jetproof(dir.path())
        .args(["init", job, "--out", "a"])
        .assert()
        .success();
    jetproof(dir.path())
        .args(["init", job, "--out", "b"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--recreate"));
    assert!(!dir.path().join("b").exists(), "nothing done on bad input");
    jetproof(dir.path())
        .args(["init", job, "--out", "c", "--recreate"])
        .assert()
        .success();
}

#[test]
fn foreign_files_in_the_data_directory_are_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let job = small_job(dir.path());
    let data = dir.path().join("jetproof-data");
    std::fs::create_dir_all(&data).expect("mkdir");
    std::fs::write(data.join("payroll.xlsx"), "precious").expect("write");
    jetproof(dir.path())
        .args(["init", job.to_str().expect("utf-8"), "--out", "r"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("payroll.xlsx"))
        .stderr(predicate::str::contains("--allow-foreign-files"));
    assert_eq!(
        std::fs::read_to_string(data.join("payroll.xlsx")).expect("still there"),
        "precious"
    );
}

#[test]
fn bad_job_fields_exit_2_naming_the_field() {
    let dir = tempfile::tempdir().expect("tempdir");
    let job = dir.path().join("bad.toml");
    std::fs::write(&job, "[workload]\ninsert_percent = 50\n").expect("write");
    jetproof(dir.path())
        .args(["init", job.to_str().expect("utf-8")])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("insert_percent"));
    std::fs::write(&job, "[storage]\npage_sise = \"8KiB\"\n").expect("write");
    jetproof(dir.path())
        .args(["init", job.to_str().expect("utf-8")])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("page_sise"));
    jetproof(dir.path())
        .args(["init", "--db-size", "12KiB"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--db-size"));
    assert!(
        !dir.path().join("jetproof-data").exists(),
        "nothing created on bad input"
    );
}
