//! `jetproof run --test backup --to DIR` through the real binary (issue 15, point 8): a copy never
//! lands on a source (the database's own directory once rewrote the live file in place, same
//! inode), never over a file jetproof did not make, and never "repairs": the copy is what is on
//! disk, verified, with a correctable page copied as it is and reported.

mod common;

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use common::{jetproof, result, small_job};

const PAGE_SIZE: usize = 8192;

/// The small job's databases, made by `init`; returns the job's path as text.
fn initialised(dir: &Path) -> String {
    let job = small_job(dir, "2s", "");
    let job = job.to_str().expect("utf-8").to_string();
    jetproof(dir)
        .args(["init", &job, "--out", "i"])
        .assert()
        .success();
    job
}

fn database(dir: &Path, n: u32) -> PathBuf {
    dir.join(format!("jetproof-data/db{n}/db{n}.jpdb"))
}

/// What shows that a file was not touched: its inode, length, modification time and bytes.
fn fingerprint(path: &Path) -> (u64, u64, i64, i64, Vec<u8>) {
    let meta = std::fs::metadata(path).expect("exists");
    (
        meta.ino(),
        meta.len(),
        meta.mtime(),
        meta.mtime_nsec(),
        std::fs::read(path).expect("read"),
    )
}

/// Runs a backup to `to` and expects it refused: exit 2, one line on stderr naming `--to` and
/// containing `needle`, no results directory, every database untouched.
fn refused(dir: &Path, job: &str, to: &Path, needle: &str) {
    let before: Vec<_> = (1..=2).map(|n| fingerprint(&database(dir, n))).collect();
    let output = jetproof(dir)
        .args([
            "run",
            job,
            "--test",
            "backup",
            "--to",
            to.to_str().expect("utf-8"),
            "--out",
            "b",
        ])
        .output()
        .expect("runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("--to") && stderr.contains(needle),
        "{stderr}"
    );
    assert_eq!(stderr.lines().count(), 1, "one message: {stderr}");
    assert!(!dir.join("b").exists(), "nothing done");
    let after: Vec<_> = (1..=2).map(|n| fingerprint(&database(dir, n))).collect();
    assert!(before == after, "a database was touched");
}

#[test]
fn backup_to_the_database_directory_is_refused_and_the_database_is_untouched() {
    let dir = tempfile::tempdir().expect("tempdir");
    let job = initialised(dir.path());
    refused(
        dir.path(),
        &job,
        &dir.path().join("jetproof-data/db1"),
        "the directory of the database of db1",
    );
    // Spelled another way (relative, with a dot segment): the same directory.
    refused(
        dir.path(),
        &job,
        Path::new("./jetproof-data/db2/../db2"),
        "the directory of the database of db2",
    );
}

#[test]
fn backup_to_a_symlink_of_the_database_directory_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let job = initialised(dir.path());
    let link = dir.path().join("looks-new");
    std::os::unix::fs::symlink(dir.path().join("jetproof-data/db1"), &link).expect("symlink");
    refused(
        dir.path(),
        &job,
        &link,
        "the directory of the database of db1",
    );
}

#[test]
fn backup_to_the_log_directory_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let job = initialised(dir.path());
    refused(
        dir.path(),
        &job,
        &dir.path().join("jetproof-data/db2/logs"),
        "the log directory of db2",
    );
}

#[test]
fn backup_to_a_directory_holding_a_hard_link_of_a_database_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let job = initialised(dir.path());
    let to = dir.path().join("copies");
    std::fs::create_dir(&to).expect("mkdir");
    // A jetproof-marked directory, with db1.jpdb a second name of the live database.
    std::fs::write(to.join(".jetproof"), "marker").expect("marker");
    std::fs::hard_link(database(dir.path(), 1), to.join("db1.jpdb")).expect("hard link");
    refused(dir.path(), &job, &to, "is the database of db1 itself");
}

#[test]
fn backup_over_a_file_jetproof_did_not_make_is_refused_and_the_file_kept() {
    let dir = tempfile::tempdir().expect("tempdir");
    let job = initialised(dir.path());
    let to = dir.path().join("copies");
    std::fs::create_dir(&to).expect("mkdir");
    std::fs::write(to.join(".jetproof"), "marker").expect("marker");
    std::fs::write(to.join("db2.jpdb"), "someone's notes").expect("foreign file");
    refused(dir.path(), &job, &to, "not a copy jetproof made");
    assert_eq!(
        std::fs::read_to_string(to.join("db2.jpdb")).expect("kept"),
        "someone's notes"
    );
    // A symlink where a copy would go is never written through.
    std::fs::remove_file(to.join("db2.jpdb")).expect("rm");
    std::fs::write(dir.path().join("elsewhere"), "keep me").expect("write");
    std::os::unix::fs::symlink(dir.path().join("elsewhere"), to.join("db2.jpdb")).expect("ln");
    refused(dir.path(), &job, &to, "symbolic link");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("elsewhere")).expect("kept"),
        "keep me"
    );
}

#[test]
fn two_instances_whose_copies_would_share_a_name_are_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let job = dir.path().join("job.toml");
    std::fs::write(
        &job,
        "[storage]\ndb_size = \"8MiB\"\npage_size = \"8KiB\"\ndirect_io = false\n\
         [[storage.instance]]\nname = \"a\"\ndatabase_path = \"a/db.jpdb\"\nlog_path = \"a/logs\"\n\
         [[storage.instance]]\nname = \"b\"\ndatabase_path = \"b/db.jpdb\"\nlog_path = \"b/logs\"\n\
         [workload]\nrecord_size = \"1KiB\"\n[cache]\nmin_size = \"512KiB\"\nmax_size = \"1MiB\"\n",
    )
    .expect("job");
    let job = job.to_str().expect("utf-8");
    jetproof(dir.path())
        .args(["init", job, "--out", "i"])
        .assert()
        .success();
    let output = jetproof(dir.path())
        .args([
            "run", job, "--test", "backup", "--to", "copies", "--out", "b",
        ])
        .output()
        .expect("runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("--to") && stderr.contains("instances a and b would both be copied"),
        "{stderr}"
    );
    assert!(!dir.path().join("copies").exists());
}

#[test]
fn a_backup_copy_holds_a_correctable_page_as_on_disk_and_reports_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let job = initialised(dir.path());
    let source = database(dir.path(), 1);
    let mut bytes = std::fs::read(&source).expect("read");
    let page = bytes.len() / PAGE_SIZE / 2;
    bytes[page * PAGE_SIZE + 3001] ^= 0x04;
    std::fs::write(&source, &bytes).expect("flip one bit");
    let before = fingerprint(&source);

    let output = jetproof(dir.path())
        .args([
            "run", &job, "--test", "backup", "--to", "copies", "--out", "b",
        ])
        .output()
        .expect("runs");
    // Damage found fails the verdict (exit 1), with the page named.
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let r = result(&dir.path().join("b/result.json"));
    let found = &r["instances"][0]["backup"];
    assert_eq!(found["correctable_pages"][0], page as u64, "{found}");
    assert_eq!(found["bad_pages"].as_array().map(Vec::len), Some(0));
    assert!(
        r["reasons"].to_string().contains("correctable"),
        "{}",
        r["reasons"]
    );
    // The copy is the bytes on disk, flipped bit included; the source is untouched.
    let copy = std::fs::read(dir.path().join("copies/db1.jpdb")).expect("copy");
    assert!(copy == bytes, "the copy differs from the source's bytes");
    assert!(fingerprint(&source) == before, "the source was written");
    // The other database was copied whole and is perfect.
    assert!(
        std::fs::read(dir.path().join("copies/db2.jpdb")).expect("copy")
            == std::fs::read(database(dir.path(), 2)).expect("source")
    );
    // A second backup to the same directory replaces jetproof's own copies.
    jetproof(dir.path())
        .args([
            "run", &job, "--test", "backup", "--to", "copies", "--out", "b2",
        ])
        .assert()
        .code(1);
}

/// Whether a copy under its final name in `to` is whole: for each database, either no file
/// under the copy's name, or one equal to the source; returns how many are missing.
fn copies_missing_or_whole(dir: &Path, to: &Path) -> usize {
    let mut missing = 0;
    for n in 1..=2 {
        let copy = to.join(format!("db{n}.jpdb"));
        if copy.exists() {
            assert!(
                std::fs::read(&copy).expect("copy") == std::fs::read(database(dir, n)).expect("db"),
                "{} is under its name but is not the whole database",
                copy.display()
            );
        } else {
            missing += 1;
        }
    }
    missing
}

/// A tmpfs of `size` mounted at `at` for the test's life (CI runs as root).
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(at: &Path, size: &str) -> Tmpfs {
        std::fs::create_dir_all(at).expect("mount point");
        let status = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(at)
            .status()
            .expect("mount runs");
        assert!(
            status.success(),
            "mounting a tmpfs needs root (CI runs as root)"
        );
        Tmpfs(at.to_path_buf())
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg(&self.0).status();
    }
}

#[test]
fn a_backup_to_a_full_target_leaves_no_copy_under_its_name_and_writes_result_json() {
    let dir = tempfile::tempdir().expect("tempdir");
    let job = initialised(dir.path());
    // Room for one 8 MiB copy and not two.
    let to = dir.path().join("small");
    let _mount = Tmpfs::mount(&to, "12m");
    let output = jetproof(dir.path())
        .args([
            "run",
            &job,
            "--test",
            "backup",
            "--to",
            to.to_str().expect("utf-8"),
            "--out",
            "b",
        ])
        .output()
        .expect("runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    // A storage error: exit 3, after result.json was written.
    assert_eq!(output.status.code(), Some(3), "{stderr}");
    let r = result(&dir.path().join("b/result.json"));
    assert_eq!(r["verdict"], "fail", "{r}");
    let reasons = r["reasons"].to_string();
    assert!(
        reasons.contains("the backup stopped") && reasons.contains("No space left on device"),
        "{reasons}"
    );
    let errors: Vec<_> = r["instances"]
        .as_array()
        .expect("instances")
        .iter()
        .filter(|i| i["backup"]["error"].is_string())
        .collect();
    assert!(!errors.is_empty(), "{r}");
    for failed in &errors {
        assert!(failed["backup"]["copy_path"].is_null(), "{failed}");
    }
    assert!(copies_missing_or_whole(dir.path(), &to) >= 1);
    let partials: Vec<_> = std::fs::read_dir(&to)
        .expect("ls")
        .map(|e| e.expect("entry").file_name())
        .filter(|n| n.to_string_lossy().ends_with(".partial"))
        .collect();
    assert!(partials.is_empty(), "unfinished copies left: {partials:?}");
}

#[test]
fn a_backup_killed_mid_copy_leaves_no_copy_under_its_name_and_the_next_one_finishes() {
    let dir = tempfile::tempdir().expect("tempdir");
    // Larger databases read in small pieces: the copy lasts long enough to be killed.
    let path = small_job(dir.path(), "2s", "");
    let text = std::fs::read_to_string(&path)
        .expect("job")
        .replace("db_size = \"8MiB\"", "db_size = \"48MiB\"")
        .replace(
            "record_size = \"1KiB\"",
            "record_size = \"1KiB\"\nmaintenance_read_size = \"64KiB\"",
        );
    std::fs::write(&path, text).expect("job");
    let job = path.to_str().expect("utf-8").to_string();
    jetproof(dir.path())
        .args(["init", &job, "--out", "i"])
        .assert()
        .success();
    let to = dir.path().join("copies");
    let partial = to.join("db1.jpdb.partial");
    let mut child = common::spawn_jetproof(
        dir.path(),
        &[
            "run", &job, "--test", "backup", "--to", "copies", "--out", "b", "--quiet",
        ],
        false,
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !partial.exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "the copy never started"
        );
        std::thread::sleep(std::time::Duration::from_micros(200));
    }
    child.kill().expect("SIGKILL");
    child.wait().expect("reaped");
    assert!(
        partial.exists(),
        "killed mid-copy, the unfinished copy keeps its .partial name"
    );
    assert!(
        copies_missing_or_whole(dir.path(), &to) >= 1,
        "db1 was killed mid-copy and must have no copy under its name"
    );
    // The next backup to that directory writes over the unfinished copy and finishes.
    jetproof(dir.path())
        .args([
            "run", &job, "--test", "backup", "--to", "copies", "--out", "b2",
        ])
        .assert()
        .success();
    assert_eq!(copies_missing_or_whole(dir.path(), &to), 0);
    assert!(!partial.exists());
    let r = result(&dir.path().join("b2/result.json"));
    assert_eq!(r["verdict"], "pass", "{r}");
}

#[test]
fn a_partial_name_holding_a_file_jetproof_did_not_make_is_refused_and_kept() {
    let dir = tempfile::tempdir().expect("tempdir");
    let job = initialised(dir.path());
    let to = dir.path().join("copies");
    std::fs::create_dir(&to).expect("mkdir");
    std::fs::write(to.join(".jetproof"), "marker").expect("marker");
    std::fs::write(to.join("db1.jpdb.partial"), "someone's notes").expect("foreign file");
    refused(
        dir.path(),
        &job,
        &to,
        "not an unfinished copy jetproof made",
    );
    assert_eq!(
        std::fs::read_to_string(to.join("db1.jpdb.partial")).expect("kept"),
        "someone's notes"
    );
}
