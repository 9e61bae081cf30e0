//! An interrupted `init` is finished by the next one (issue 15, point 10): its message always
//! said "the next init removes the partial databases", yet after an interrupted duplication (the
//! first database complete, a copy under its `.partial` name; since issue 33 every database is
//! filled, and an interrupted init leaves some complete and one `.partial`) the next init refused and only
//! `--recreate` helped. Now it removes what it can tell as its own, keeps the complete
//! databases and makes the missing ones; a `.partial` file that is not jetproof's is refused and
//! kept.

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::{jetproof, signal, spawn_jetproof};
use predicates::prelude::*;

/// Three 8 MiB databases of 8 KiB pages, buffered I/O.
fn job(dir: &Path, databases: u32, size: &str) -> String {
    let path = dir.join("job.toml");
    std::fs::write(
        &path,
        format!(
            "[storage]\ndatabases = {databases}\ndb_size = \"{size}\"\npage_size = \"8KiB\"\ndirect_io = false\n\
             [workload]\nrecord_size = \"1KiB\"\n[cache]\nmin_size = \"512KiB\"\nmax_size = \"1MiB\"\n"
        ),
    )
    .expect("job");
    path.to_str().expect("utf-8").to_string()
}

fn database(dir: &Path, n: u32) -> PathBuf {
    dir.join(format!("jetproof-data/db{n}/db{n}.jpdb"))
}

fn partial(dir: &Path, n: u32) -> PathBuf {
    dir.join(format!("jetproof-data/db{n}/db{n}.jpdb.partial"))
}

/// What an interrupted init leaves: db1 complete (renamed into place), db2's fill cut short
/// under its partial name (a prefix of a complete database, as the fill writes it), db3 not
/// begun.
fn interrupted_init(dir: &Path, job: &str) {
    jetproof(dir)
        .args(["init", job, "--out", "i"])
        .assert()
        .success();
    std::fs::rename(database(dir, 2), partial(dir, 2)).expect("rename");
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(partial(dir, 2))
        .expect("open");
    file.set_len(3 << 20).expect("cut short");
    std::fs::remove_file(database(dir, 3)).expect("rm");
}

#[test]
fn after_an_interrupted_init_the_next_init_removes_the_partial_and_goes_on() {
    let dir = tempfile::tempdir().expect("tempdir");
    let job = job(dir.path(), 3, "8MiB");
    interrupted_init(dir.path(), &job);
    let first = std::fs::read(database(dir.path(), 1)).expect("db1");

    jetproof(dir.path())
        .args(["init", &job, "--out", "again"])
        .assert()
        .success()
        .stdout(predicate::str::contains("resumed"));
    assert!(
        !partial(dir.path(), 2).exists(),
        "the partial database is gone"
    );
    // The complete database was kept as it was, and the others were filled anew: each its own
    // content (issue 33), none a copy of db1.
    assert!(std::fs::read(database(dir.path(), 1)).expect("db1") == first);
    for n in [2, 3] {
        let made = std::fs::read(database(dir.path(), n)).expect("db");
        assert!(
            made.len() == first.len() && made != first,
            "db{n} is its own"
        );
    }
    let log = std::fs::read_to_string(dir.path().join("again/test.log")).expect("log");
    assert!(log.contains("Resuming an interrupted init"), "{log}");
    common::valid_result(&dir.path().join("again/result.json"), "init");
    // Every database checks out.
    jetproof(dir.path())
        .args(["checksum", &job, "--out", "c"])
        .assert()
        .success();
    // Complete now: a further init refuses without --recreate, as before.
    jetproof(dir.path())
        .args(["init", &job, "--out", "third"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--recreate"));
}

#[test]
fn a_partial_file_jetproof_did_not_leave_is_refused_and_kept() {
    let dir = tempfile::tempdir().expect("tempdir");
    let job = job(dir.path(), 3, "8MiB");
    interrupted_init(dir.path(), &job);
    std::fs::write(partial(dir.path(), 2), "someone's file, named like ours").expect("write");
    jetproof(dir.path())
        .args(["init", &job, "--out", "again"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("db2.jpdb.partial"))
        .stderr(predicate::str::contains("jetproof never removes it"));
    assert_eq!(
        std::fs::read_to_string(partial(dir.path(), 2)).expect("kept"),
        "someone's file, named like ours"
    );
    assert!(!database(dir.path(), 3).exists(), "nothing made");
    assert!(!dir.path().join("again").exists());
}

#[test]
fn a_first_database_of_another_size_is_not_resumed_from() {
    let dir = tempfile::tempdir().expect("tempdir");
    let small = job(dir.path(), 3, "8MiB");
    interrupted_init(dir.path(), &small);
    // The job changed between the interrupted init and this one: db1 is not a database it
    // describes.
    let bigger = job(dir.path(), 3, "16MiB");
    jetproof(dir.path())
        .args(["init", &bigger, "--out", "again"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--recreate"))
        .stderr(predicate::str::contains("16MiB"));
    assert!(partial(dir.path(), 2).exists(), "nothing removed");
}

#[test]
fn sigterm_during_init_stops_it_and_the_next_init_finishes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let job = job(dir.path(), 2, "64MiB");
    let mut child = spawn_jetproof(dir.path(), &["init", &job, "--out", "i"], true);
    let log = dir.path().join("i/test.log");
    let started = Instant::now();
    while !std::fs::read_to_string(&log).is_ok_and(|l| l.contains("Creating and filling")) {
        if started.elapsed() > Duration::from_secs(60) || child.try_wait().ok().flatten().is_some()
        {
            let _ = child.kill();
            panic!("init did not start filling within 60 s, or ended early");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let (exit, _stdout, stderr) = signal(child, "TERM");
    assert_eq!(exit.code(), Some(3), "{stderr}");
    assert!(stderr.contains("interrupted"), "{stderr}");
    assert!(stderr.contains("next `jetproof init`"), "{stderr}");
    assert!(
        !database(dir.path(), 1).exists(),
        "no database under its final name"
    );
    jetproof(dir.path())
        .args(["init", &job, "--out", "again"])
        .assert()
        .success();
    assert!(!partial(dir.path(), 1).exists());
    assert!(database(dir.path(), 2).exists());
}

/// `init --if-missing` (issue 32: the playbook inits "where missing" whatever the job's paths):
/// with every database there it does nothing (exit 0, says so, no results folder, databases
/// untouched); with one removed it makes that one only; with one that the job would not make
/// (another size) it refuses before any write, keeping it, and it cannot be combined with
/// `--recreate`.
#[test]
fn init_if_missing_makes_only_what_is_missing_and_refuses_what_differs() {
    let dir = tempfile::tempdir().expect("tempdir");
    let job = job(dir.path(), 2, "8MiB");
    jetproof(dir.path())
        .args(["init", &job, "--if-missing", "--quiet", "--out", "first"])
        .assert()
        .success();
    let modified = |n| {
        std::fs::metadata(database(dir.path(), n))
            .and_then(|m| m.modified())
            .expect("mtime")
    };
    let (db1, db2) = (modified(1), modified(2));
    jetproof(dir.path())
        .args(["init", &job, "--if-missing", "--quiet", "--out", "second"])
        .assert()
        .success()
        .stderr(predicate::str::contains(
            "all 2 database(s) of the job are there",
        ));
    assert!(!dir.path().join("second").exists());
    assert_eq!((modified(1), modified(2)), (db1, db2));
    std::fs::remove_file(database(dir.path(), 2)).expect("rm");
    jetproof(dir.path())
        .args(["init", &job, "--if-missing", "--quiet", "--out", "third"])
        .assert()
        .success();
    assert_eq!(modified(1), db1, "db1 was kept");
    assert!(database(dir.path(), 2).is_file(), "db2 was made");
    // The job now asks for larger databases: the ones there are not what it would make.
    let bigger = with_size(&job, "16MiB");
    jetproof(dir.path())
        .args([
            "init",
            &bigger,
            "--if-missing",
            "--quiet",
            "--out",
            "fourth",
        ])
        .assert()
        .code(2)
        .stderr(
            predicate::str::contains("--if-missing keeps it")
                .and(predicate::str::contains("the job's databases are 16MiB")),
        );
    assert_eq!(modified(1), db1, "db1 was kept");
    jetproof(dir.path())
        .args(["init", &job, "--if-missing", "--recreate"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("cannot be used with"));
}

/// A copy of the job file `job` beside it with databases of `size`.
fn with_size(job: &str, size: &str) -> String {
    let text = std::fs::read_to_string(job).expect("job");
    let (before, after) = text.split_once("db_size = \"").expect("db_size");
    let rest = after.split_once('"').expect("quote").1;
    let path = format!("{job}-{size}.toml");
    std::fs::write(&path, format!("{before}db_size = \"{size}\"{rest}")).expect("job");
    path
}
