//! "Foreign means untouchable, whatever its name" (issue 15, points 1 and 2), through the real
//! binary: a file jetproof did not make, or a symbolic link, at one of jetproof's names (log
//! files, the spare, the checkpoint, the database, its `.partial`) is never deleted, overwritten
//! or written through, `--allow-foreign-files` or `--recreate` notwithstanding. The command is
//! refused naming the file; the file (and a link's target) is compared byte for byte after.
//! Tests named `symlink_*` are the "symlink" column of the damage matrix.

mod common;

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use common::jetproof;

const FOREIGN: &[u8] = b"a user's file that only happens to have jetproof's name\n";

/// One 4 MiB database of 8 KiB pages, buffered I/O, a one-second run.
fn job(dir: &Path) -> PathBuf {
    let job = dir.join("job.toml");
    std::fs::write(
        &job,
        format!(
            "[storage]\ndatabases = 1\ndb_size = \"4MiB\"\npage_size = \"8KiB\"\ndirect_io = false\n\
             [workload]\nrecord_size = \"1KiB\"\nthreads = 1\n\
             [cache]\nmin_size = \"512KiB\"\nmax_size = \"1MiB\"\n\
             [run]\nduration = \"1s\"\nsample_interval = \"500ms\"\n{}",
            common::LENIENT_THRESHOLDS
        ),
    )
    .expect("write job");
    job
}

fn path_str(path: &Path) -> &str {
    path.to_str().expect("utf-8")
}

fn logs(dir: &Path) -> PathBuf {
    dir.join("jetproof-data/db1/logs")
}

/// Runs jetproof with `args` and returns (exit code, stderr).
fn run(dir: &Path, args: &[&str]) -> (Option<i32>, String) {
    let output = jetproof(dir).args(args).output().expect("run jetproof");
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn foreign_files_named_like_log_files_are_never_deleted_by_init() {
    for name in ["E00000001.jplog", "Enext.jplogtmp", "checkpoint.jpchk"] {
        let dir = tempfile::tempdir().expect("tempdir");
        let job = job(dir.path());
        std::fs::create_dir_all(logs(dir.path())).expect("mkdir");
        let foreign = logs(dir.path()).join(name);
        std::fs::write(&foreign, FOREIGN).expect("write");
        let (code, stderr) = run(
            dir.path(),
            &[
                "init",
                path_str(&job),
                "--allow-foreign-files",
                "--out",
                "r",
            ],
        );
        assert_eq!(code, Some(2), "{name}: {stderr}");
        assert!(stderr.contains(name), "{name}: names the file: {stderr}");
        assert!(stderr.contains("Move it away"), "{name}: {stderr}");
        assert_eq!(std::fs::read(&foreign).expect("read"), FOREIGN, "{name}");
        assert!(
            !dir.path().join("jetproof-data/db1/db1.jpdb").exists(),
            "{name}: nothing made"
        );
    }
}

#[test]
fn foreign_log_file_beside_a_database_survives_init_recreate() {
    let dir = tempfile::tempdir().expect("tempdir");
    let job = job(dir.path());
    jetproof(dir.path())
        .args(["run", path_str(&job), "--test", "performance", "--out", "a"])
        .assert()
        .success();
    let database = dir.path().join("jetproof-data/db1/db1.jpdb");
    let database_before = std::fs::read(&database).expect("read db");
    // A user's file with a generation's name, beside the database's own log.
    let foreign = logs(dir.path()).join("E000000FF.jplog");
    std::fs::write(&foreign, FOREIGN).expect("write");
    let (code, stderr) = run(
        dir.path(),
        &[
            "init",
            path_str(&job),
            "--recreate",
            "--allow-foreign-files",
            "--out",
            "b",
        ],
    );
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("E000000FF.jplog"), "{stderr}");
    assert_eq!(std::fs::read(&foreign).expect("read"), FOREIGN);
    assert_eq!(
        std::fs::read(&database).expect("read db"),
        database_before,
        "the database was not replaced either"
    );
    // Moved away, the recreate goes ahead and removes only jetproof's own log files.
    std::fs::rename(&foreign, dir.path().join("moved")).expect("move");
    std::fs::write(logs(dir.path()).join("notes.txt"), FOREIGN).expect("write");
    jetproof(dir.path())
        .args([
            "init",
            path_str(&job),
            "--recreate",
            "--allow-foreign-files",
            "--out",
            "c",
        ])
        .assert()
        .success();
    assert!(common::generation_files(&logs(dir.path())).is_empty());
    assert_eq!(
        std::fs::read(logs(dir.path()).join("notes.txt")).expect("read"),
        FOREIGN
    );
}

#[test]
fn symlink_at_the_spare_is_never_followed_by_init_or_run() {
    let dir = tempfile::tempdir().expect("tempdir");
    let job = job(dir.path());
    let victim = dir.path().join("victim.txt");
    std::fs::write(&victim, FOREIGN).expect("write");
    std::fs::create_dir_all(logs(dir.path())).expect("mkdir");
    let spare = logs(dir.path()).join("Enext.jplogtmp");
    symlink(&victim, &spare).expect("symlink");
    // init refuses before writing anything.
    let (code, stderr) = run(
        dir.path(),
        &[
            "init",
            path_str(&job),
            "--allow-foreign-files",
            "--out",
            "a",
        ],
    );
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("symbolic link"), "{stderr}");
    assert_eq!(std::fs::read(&victim).expect("read"), FOREIGN);

    // A link planted after init: the run's log refuses it, the database stays clean. (The
    // directories this test made are not jetproof's: init needs the flag to share them.)
    std::fs::remove_file(&spare).expect("rm link");
    jetproof(dir.path())
        .args([
            "init",
            path_str(&job),
            "--allow-foreign-files",
            "--out",
            "b",
        ])
        .assert()
        .success();
    jetproof(dir.path())
        .args(["run", path_str(&job), "--test", "performance", "--out", "c"])
        .assert()
        .success();
    let _ = std::fs::remove_file(&spare);
    symlink(&victim, &spare).expect("symlink");
    let (code, stderr) = run(
        dir.path(),
        &["run", path_str(&job), "--test", "performance", "--out", "d"],
    );
    assert_ne!(code, Some(0), "{stderr}");
    assert!(stderr.contains("Enext.jplogtmp"), "{stderr}");
    assert_eq!(
        std::fs::read(&victim).expect("read"),
        FOREIGN,
        "not written through the link"
    );
    assert!(
        spare
            .symlink_metadata()
            .expect("link")
            .file_type()
            .is_symlink()
    );
    // Nothing was written to the database: it is still clean and whole.
    std::fs::remove_file(&spare).expect("rm link");
    jetproof(dir.path())
        .args(["checksum", path_str(&job), "--out", "e"])
        .assert()
        .success();
}

#[test]
fn symlink_at_the_database_path_is_refused_by_init() {
    let dir = tempfile::tempdir().expect("tempdir");
    let job = job(dir.path());
    let victim = dir.path().join("victim.jpdb");
    std::fs::write(&victim, FOREIGN).expect("write");
    let db_dir = dir.path().join("jetproof-data/db1");
    std::fs::create_dir_all(&db_dir).expect("mkdir");
    let link = db_dir.join("db1.jpdb");
    symlink(&victim, &link).expect("symlink");
    for extra in [&[][..], &["--recreate"][..]] {
        let mut args = vec!["init", path_str(&job), "--allow-foreign-files", "--out"];
        args.push(if extra.is_empty() { "a" } else { "b" });
        args.extend_from_slice(extra);
        let (code, stderr) = run(dir.path(), &args);
        assert_eq!(code, Some(2), "{stderr}");
        assert!(stderr.contains("symbolic link"), "{stderr}");
        assert_eq!(std::fs::read(&victim).expect("read"), FOREIGN);
        assert!(
            link.symlink_metadata()
                .expect("link")
                .file_type()
                .is_symlink()
        );
    }
}

#[test]
fn symlink_or_foreign_file_at_the_partial_name_is_never_removed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let job = job(dir.path());
    let db_dir = dir.path().join("jetproof-data/db1");
    std::fs::create_dir_all(&db_dir).expect("mkdir");
    let partial = db_dir.join("db1.jpdb.partial");
    let victim = dir.path().join("victim");
    std::fs::write(&victim, FOREIGN).expect("write");
    symlink(&victim, &partial).expect("symlink");
    let (code, stderr) = run(
        dir.path(),
        &[
            "init",
            path_str(&job),
            "--allow-foreign-files",
            "--out",
            "a",
        ],
    );
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("db1.jpdb.partial"), "{stderr}");
    assert!(partial.symlink_metadata().is_ok(), "the link is kept");
    std::fs::remove_file(&partial).expect("rm");
    std::fs::write(&partial, FOREIGN).expect("write");
    let (code, stderr) = run(
        dir.path(),
        &[
            "init",
            path_str(&job),
            "--allow-foreign-files",
            "--out",
            "b",
        ],
    );
    assert_eq!(code, Some(2), "{stderr}");
    assert_eq!(std::fs::read(&partial).expect("read"), FOREIGN);
}

#[test]
fn allow_foreign_files_never_marks_a_foreign_directory_as_jetproofs() {
    let dir = tempfile::tempdir().expect("tempdir");
    let job = job(dir.path());
    let data = dir.path().join("jetproof-data");
    std::fs::create_dir_all(&data).expect("mkdir");
    std::fs::write(data.join("notes.txt"), FOREIGN).expect("write");
    jetproof(dir.path())
        .args([
            "init",
            path_str(&job),
            "--allow-foreign-files",
            "--out",
            "a",
        ])
        .assert()
        .success();
    assert!(
        !data.join(".jetproof").exists(),
        "no marker in a shared dir"
    );
    assert!(
        data.join("db1/.jetproof").exists(),
        "the directory jetproof made is marked"
    );
    // So a later init without the flag still sees the foreign file, and refuses.
    let (code, stderr) = run(
        dir.path(),
        &["init", path_str(&job), "--recreate", "--out", "b"],
    );
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("notes.txt"), "{stderr}");
    assert_eq!(
        std::fs::read(data.join("notes.txt")).expect("read"),
        FOREIGN
    );
}

#[test]
fn symlink_or_foreign_file_at_the_flush_map_name_is_never_replaced() {
    // The flush map beside a database (`<database>.jpfm`, lost-write detection) is replaced by
    // `init --recreate` only when its own signature says jetproof made it.
    for link in [false, true] {
        let dir = tempfile::tempdir().expect("tempdir");
        let job = job(dir.path());
        let job = path_str(&job);
        let (code, stderr) = run(dir.path(), &["init", job]);
        assert_eq!(code, Some(0), "{stderr}");
        let map = dir.path().join("jetproof-data/db1/db1.jpdb.jpfm");
        assert!(map.is_file(), "init made the flush map");
        std::fs::remove_file(&map).expect("remove the map");
        let target = dir.path().join("users-file");
        std::fs::write(&target, FOREIGN).expect("write");
        if link {
            symlink(&target, &map).expect("symlink");
        } else {
            std::fs::copy(&target, &map).expect("copy");
        }
        let (code, stderr) = run(dir.path(), &["init", job, "--recreate"]);
        assert_eq!(code, Some(2), "link {link}: {stderr}");
        assert!(stderr.contains("db1.jpdb.jpfm"), "link {link}: {stderr}");
        assert_eq!(
            std::fs::read(&target).expect("read"),
            FOREIGN,
            "link {link}"
        );
        if link {
            assert!(
                map.symlink_metadata()
                    .expect("link")
                    .file_type()
                    .is_symlink()
            );
        } else {
            assert_eq!(std::fs::read(&map).expect("read"), FOREIGN);
        }
    }
}
