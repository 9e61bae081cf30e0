//! `jetproof init` through the real binary: what a newcomer and a script see.

use std::path::Path;

mod common;

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

/// `init` whose disk fills up while it fills the databases (another program takes the room
/// after the checks) fails with exit 3 and still writes `result.json`, verdict fail, with the
/// reason (issue 34, point 7). CI runs as root, for the tmpfs.
#[test]
fn init_that_fails_on_a_full_disk_writes_result_json_with_the_reason() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("small");
    std::fs::create_dir(&data).expect("mount point");
    let mounted = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=200m", "tmpfs"])
        .arg(&data)
        .status()
        .expect("mount runs");
    assert!(
        mounted.success(),
        "mounting a tmpfs needs root (CI runs as root)"
    );
    struct Unmount<'a>(&'a std::path::Path);
    impl Drop for Unmount<'_> {
        fn drop(&mut self) {
            let _ = std::process::Command::new("umount").arg(self.0).status();
        }
    }
    let _unmount = Unmount(&data);
    let path = common::small_job(dir.path(), "2s", "");
    let text = std::fs::read_to_string(&path)
        .expect("job")
        .replace("db_size = \"8MiB\"", "db_size = \"32MiB\"")
        .replace(
            "direct_io = false",
            &format!(
                "direct_io = false\ndata_dir = {:?}",
                data.display().to_string()
            ),
        );
    std::fs::write(&path, text).expect("job");
    let job = path.to_str().expect("utf-8").to_string();
    let child = common::spawn_jetproof(dir.path(), &["init", &job, "--out", "i", "--quiet"], true);
    // Once the fill has begun, the rest of the file system is taken.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let started = || {
        walk(&data)
            .iter()
            .any(|p| p.to_string_lossy().ends_with(".partial"))
    };
    while !started() {
        assert!(std::time::Instant::now() < deadline, "the fill never began");
        std::thread::sleep(std::time::Duration::from_micros(200));
    }
    let mut filler = std::fs::File::create(data.join("filler")).expect("filler");
    let block = vec![0x5au8; 1 << 20];
    while std::io::Write::write_all(&mut filler, &block).is_ok() {}
    let output = child.wait_with_output().expect("init ends");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(3), "{stderr}");
    let r = common::result(&dir.path().join("i/result.json"));
    assert_eq!(r["verdict"], "fail", "{r}");
    assert_eq!(r["test"], "init", "{r}");
    let reasons = r["reasons"].to_string();
    assert!(
        reasons.contains("init failed") && reasons.contains("No space left on device"),
        "{reasons}"
    );
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            found.extend(walk(&path));
        } else {
            found.push(path);
        }
    }
    found
}
