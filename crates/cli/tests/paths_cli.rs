//! Bad places and mismatched databases are bad input (exit 2, one message naming the key and the
//! fix, nothing changed), not runtime errors (issue 15, point 10): a read-only file system, a
//! file system that refuses direct I/O, a device where a database file is expected, a job whose
//! page size is not the databases'. And a run that fails while attaching (a damaged space map)
//! leaves the database as it was, clean, so `recover` has nothing to do.
//!
//! The read-only and memory file systems are tmpfs mounts made for the test (CI and the
//! developers' machines run as root); without root, a directory without write permission and
//! /dev/shm stand in for them.

mod common;

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command as Process;

use common::{jetproof, small_job};
use predicates::prelude::*;

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// A tmpfs mounted at `at` for the test's life.
struct Mount(PathBuf);

impl Mount {
    fn tmpfs(at: &Path, options: &str) -> Option<Mount> {
        std::fs::create_dir_all(at).expect("mount point");
        let mounted = Process::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("{options},size=256m"),
                "tmpfs",
            ])
            .arg(at)
            .status()
            .is_ok_and(|s| s.success());
        mounted.then(|| Mount(at.to_path_buf()))
    }

    fn remount_read_only(&self) {
        let status = Process::new("mount")
            .args(["-o", "remount,ro"])
            .arg(&self.0)
            .status()
            .expect("mount");
        assert!(status.success(), "remount read-only");
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        let _ = Process::new("umount").arg(&self.0).status();
    }
}

/// The small job with `direct_io` set, placed under `data_dir`.
fn job_at(dir: &Path, data_dir: &Path, direct: bool) -> String {
    let path = small_job(dir, "2s", "");
    let text = std::fs::read_to_string(&path).expect("job").replace(
        "direct_io = false",
        &format!(
            "direct_io = {direct}\ndata_dir = {:?}",
            data_dir.display().to_string()
        ),
    );
    let path = dir.join(if direct { "direct.toml" } else { "job.toml" });
    std::fs::write(&path, text).expect("write job");
    path.to_str().expect("utf-8").to_string()
}

/// An owner lock file (`*.jplock`): jetproof's bookkeeping, rewritten with its holder by every
/// command that takes the lock, refused or not.
fn is_lock_file(path: &Path) -> bool {
    path.extension().is_some_and(|e| e == "jplock")
}

/// Every file under `dir` but the lock files, with its inode and bytes.
fn files_under(dir: &Path) -> Vec<(PathBuf, u64, Vec<u8>)> {
    let mut files = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(next) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&next) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if !is_lock_file(&path) {
                let meta = std::fs::metadata(&path).expect("stat");
                files.push((
                    path.clone(),
                    meta.ino(),
                    std::fs::read(&path).expect("read"),
                ));
            }
        }
    }
    files.sort();
    files
}

/// Runs jetproof with `args` in `dir`, expects exit 2 and one line on stderr holding every
/// needle; returns stderr.
fn refused(dir: &Path, args: &[&str], needles: &[&str]) -> String {
    let output = jetproof(dir).args(args).output().expect("runs");
    let stderr = String::from_utf8_lossy(&output.stderr).to_string();
    assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
    for needle in needles {
        assert!(
            stderr.contains(needle),
            "{args:?}: {needle:?} missing: {stderr}"
        );
    }
    assert_eq!(stderr.lines().count(), 1, "{args:?}: one message: {stderr}");
    stderr
}

#[test]
fn init_on_a_read_only_file_system_is_refused_once_with_exit_2() {
    let dir = tempfile::tempdir().expect("tempdir");
    let place = dir.path().join("ro");
    let _mount = if is_root() {
        Some(Mount::tmpfs(&place, "ro").expect("root mounts a read-only tmpfs"))
    } else {
        std::fs::create_dir(&place).expect("mkdir");
        std::fs::set_permissions(&place, std::fs::Permissions::from_mode(0o555)).expect("chmod");
        None
    };
    let job = job_at(dir.path(), &place.join("data"), false);
    let stderr = refused(
        dir.path(),
        &["init", &job, "--out", "r"],
        &[
            "storage.data_dir",
            "cannot be written",
            "writable directory",
        ],
    );
    if is_root() {
        assert_eq!(
            stderr.matches("read-only file system").count(),
            1,
            "said once: {stderr}"
        );
    }
    assert!(!place.join("data").exists(), "nothing created");
    assert!(!dir.path().join("r").exists(), "no results directory");
}

#[test]
fn a_run_on_a_file_system_made_read_only_is_refused_and_changes_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let place = dir.path().join("fs");
    let mount = if is_root() {
        Some(Mount::tmpfs(&place, "rw").expect("root mounts a tmpfs"))
    } else {
        None
    };
    let job = job_at(dir.path(), &place.join("data"), false);
    jetproof(dir.path())
        .args(["init", &job, "--out", "i"])
        .assert()
        .success();
    match &mount {
        Some(mount) => mount.remount_read_only(),
        None => {
            for n in [1, 2] {
                let db = place.join(format!("data/db{n}"));
                for dir in [db.join("logs"), db.clone()] {
                    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o555))
                        .expect("chmod");
                }
            }
        }
    }
    let before = files_under(&place);
    for test in ["performance", "soft-recovery"] {
        refused(
            dir.path(),
            &["run", &job, "--test", test, "--out", "r"],
            &["database of db1", "cannot be written"],
        );
    }
    assert_eq!(files_under(&place), before, "nothing changed");
    assert!(!dir.path().join("r").exists());
    // Reading is still fine: a checksum of a read-only copy passes.
    jetproof(dir.path())
        .args(["checksum", &job, "--out", "c"])
        .assert()
        .success();
}

/// A file system that refuses direct I/O or keeps its files in memory: a tmpfs of our own as
/// root, else /dev/shm (also tmpfs).
fn memory_file_system(dir: &Path) -> (Option<Mount>, PathBuf) {
    if is_root() {
        let place = dir.join("tmpfs");
        let mount = Mount::tmpfs(&place, "rw").expect("root mounts a tmpfs");
        (Some(mount), place)
    } else {
        let place = tempfile::Builder::new()
            .prefix("jetproof-test")
            .tempdir_in("/dev/shm")
            .expect("/dev/shm")
            .keep();
        (None, place)
    }
}

#[test]
fn init_with_direct_io_on_a_file_system_that_refuses_it_is_refused_with_exit_2() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (_mount, place) = memory_file_system(dir.path());
    let job = job_at(dir.path(), &place.join("data"), true);
    refused(
        dir.path(),
        &["init", &job, "--out", "r"],
        &[
            "storage.data_dir",
            "direct I/O",
            "storage.direct_io = false",
        ],
    );
    let left: Vec<_> = std::fs::read_dir(&place)
        .expect("list")
        .flatten()
        .map(|e| e.path())
        .collect();
    assert!(left.is_empty(), "the probe left nothing: {left:?}");
    assert!(!dir.path().join("r").exists());
}

#[test]
fn a_run_with_direct_io_on_databases_in_memory_is_refused_with_exit_2() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (_mount, place) = memory_file_system(dir.path());
    let buffered = job_at(dir.path(), &place.join("data"), false);
    jetproof(dir.path())
        .args(["init", &buffered, "--out", "i"])
        .assert()
        .success();
    let before = files_under(&place);
    let direct = job_at(dir.path(), &place.join("data"), true);
    refused(
        dir.path(),
        &["run", &direct, "--test", "performance", "--out", "r"],
        &["database of db1", "direct I/O", "storage.direct_io = false"],
    );
    assert_eq!(files_under(&place), before, "nothing changed");
}

/// A job of one instance whose database path is `path`.
fn device_job(dir: &Path, path: &Path) -> String {
    let job = dir.join("device.toml");
    std::fs::write(
        &job,
        format!(
            "[storage]\ndb_size = \"8MiB\"\npage_size = \"8KiB\"\ndirect_io = false\n\
             [[storage.instance]]\nname = \"dev\"\ndatabase_path = {:?}\nlog_path = \"logs\"\n\
             [workload]\nrecord_size = \"1KiB\"\n[cache]\nmin_size = \"512KiB\"\nmax_size = \"1MiB\"\n",
            path.display().to_string()
        ),
    )
    .expect("job");
    job.to_str().expect("utf-8").to_string()
}

#[test]
fn a_character_device_as_a_database_is_refused_by_every_command() {
    let dir = tempfile::tempdir().expect("tempdir");
    let job = device_job(dir.path(), Path::new("/dev/null"));
    for args in [
        vec!["run", &job, "--test", "performance", "--out", "r"],
        vec!["run", &job, "--test", "soft-recovery", "--out", "r"],
        vec!["run", &job, "--test", "backup", "--out", "r"],
        vec!["checksum", &job, "--out", "r"],
        vec!["recover", &job, "--out", "r"],
    ] {
        refused(
            dir.path(),
            &args,
            &["database path of dev", "/dev/null is a character device"],
        );
    }
    assert!(!dir.path().join("r").exists());
    assert!(!dir.path().join("logs").exists(), "no log directory made");
}

#[test]
fn a_block_device_as_a_database_is_refused_by_every_command() {
    let dir = tempfile::tempdir().expect("tempdir");
    // A block device node of our own (loop device numbers; nothing opens it), or one of the
    // host's when mknod is not allowed.
    let node = dir.path().join("blockdev");
    let made = Process::new("mknod")
        .arg(&node)
        .args(["b", "7", "250"])
        .status()
        .is_ok_and(|s| s.success());
    let node = if made {
        node
    } else {
        PathBuf::from("/dev/loop0")
    };
    assert!(
        std::fs::metadata(&node).is_ok_and(|m| {
            use std::os::unix::fs::FileTypeExt;
            m.file_type().is_block_device()
        }),
        "no block device node to test with"
    );
    let job = device_job(dir.path(), &node);
    for args in [
        vec!["run", &job, "--test", "performance", "--out", "r"],
        vec!["run", &job, "--test", "backup", "--out", "r"],
        vec!["checksum", &job, "--out", "r"],
        vec!["recover", &job, "--out", "r"],
    ] {
        refused(
            dir.path(),
            &args,
            &[
                "database path of dev",
                "is a block device",
                "storage.allow_devices = true",
            ],
        );
    }
    // init names the same setting, in the same words (`devices_cli` has the other refusals).
    refused(
        dir.path(),
        &["init", &job, "--out", "r"],
        &["database path of dev", "storage.allow_devices = true"],
    );
}

#[test]
fn a_job_whose_page_size_is_not_the_databases_is_refused_naming_both() {
    let dir = tempfile::tempdir().expect("tempdir");
    let job = small_job(dir.path(), "2s", "");
    let job = job.to_str().expect("utf-8");
    jetproof(dir.path())
        .args(["init", job, "--out", "i"])
        .assert()
        .success();
    let data = dir.path().join("jetproof-data");
    let before = files_under(&data);
    let other = dir.path().join("other.toml");
    std::fs::write(
        &other,
        std::fs::read_to_string(job)
            .expect("job")
            .replace("page_size = \"8KiB\"", "page_size = \"32KiB\""),
    )
    .expect("write");
    let other = other.to_str().expect("utf-8");
    for args in [
        vec!["run", other, "--test", "performance", "--out", "r"],
        vec!["run", other, "--test", "stress", "--out", "r"],
        vec!["run", other, "--test", "soft-recovery", "--out", "r"],
        vec!["run", other, "--test", "backup", "--out", "r"],
        vec!["checksum", other, "--out", "r"],
    ] {
        refused(
            dir.path(),
            &args,
            &[
                "storage.page_size",
                "is 32KiB",
                "made with 8KiB pages",
                "page_size = \"8KiB\"",
            ],
        );
    }
    assert_eq!(files_under(&data), before, "nothing changed");
    assert!(!dir.path().join("r").exists());
}

#[test]
fn a_run_that_fails_on_a_damaged_space_map_leaves_the_database_clean() {
    let dir = tempfile::tempdir().expect("tempdir");
    let job = small_job(dir.path(), "2s", "");
    let job = job.to_str().expect("utf-8");
    jetproof(dir.path())
        .args(["init", job, "--out", "i"])
        .assert()
        .success();
    // Page 2 (8 KiB pages) is db1's first space map: garble 40 bytes of it.
    let path = dir.path().join("jetproof-data/db1/db1.jpdb");
    let mut bytes = std::fs::read(&path).expect("read");
    for byte in &mut bytes[2 * 8192 + 200..2 * 8192 + 240] {
        *byte ^= 0x5a;
    }
    std::fs::write(&path, &bytes).expect("damage");
    let output = jetproof(dir.path())
        .args(["run", job, "--test", "performance", "--out", "r"])
        .output()
        .expect("runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    // A storage error: exit 3, with the file and the page.
    assert_eq!(output.status.code(), Some(3), "{stderr}");
    assert!(stderr.contains("db1.jpdb: page 2 is damaged"), "{stderr}");
    // The database was left as it was: clean (nothing to recover) and byte for byte the same.
    assert!(
        std::fs::read(&path).expect("read") == bytes,
        "the file changed"
    );
    jetproof(dir.path())
        .args(["recover", job, "--out", "rec"])
        .assert()
        .success()
        .stdout(predicate::str::contains("nothing to recover"));
    // The damage is still reported where it is.
    jetproof(dir.path())
        .args(["checksum", job, "--out", "c"])
        .assert()
        .code(1)
        .stdout(predicate::str::contains("page 2 (byte offset 16384)"));
}
