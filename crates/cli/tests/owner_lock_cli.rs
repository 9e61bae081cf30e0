//! The owner lock through the real binary (issue 15, point 3): two commands on the same
//! databases at once. The second is refused with exit 2, naming the command and process that
//! hold the databases, and changes nothing (every file under the data directory, content and
//! modification time, compared before and after it); the first still ends with its normal
//! result. Two checksums share a cleanly shut database.
//!
//! Robust on a loaded machine: nothing waits a fixed time. A first `run` is caught live (the
//! test polls its lock file until it names the run's pid, then stops it with SIGSTOP so its files
//! hold still while the second command runs, and lets it go on with SIGCONT). A first `init` or
//! `checksum` is caught at its end: its standard output is a pipe the test filled beforehand, so
//! its first line of output blocks it, lock still held, after all its database and log I/O (the
//! test waits for its `result.json`); the test then drains the pipe and it ends as usual.

mod common;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

use common::{jetproof, small_job};

/// Generous: the first command must be seen holding its lock, whatever the machine's load.
const HOLD_TIMEOUT: Duration = Duration::from_secs(180);

fn path_str(path: &Path) -> &str {
    path.to_str().expect("utf-8 path")
}

/// Every file under `dir`: its content and modification time.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, (Vec<u8>, SystemTime)> {
    let mut files = BTreeMap::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(next) = pending.pop() {
        for entry in std::fs::read_dir(&next).expect("list").flatten() {
            let path = entry.path();
            let meta = entry.metadata().expect("stat");
            if meta.is_dir() {
                pending.push(path);
            } else {
                let content = std::fs::read(&path).expect("read");
                files.insert(path, (content, meta.modified().expect("mtime")));
            }
        }
    }
    files
}

fn assert_unchanged(
    before: &BTreeMap<PathBuf, (Vec<u8>, SystemTime)>,
    after: &BTreeMap<PathBuf, (Vec<u8>, SystemTime)>,
) {
    let added: Vec<_> = after.keys().filter(|p| !before.contains_key(*p)).collect();
    let removed: Vec<_> = before.keys().filter(|p| !after.contains_key(*p)).collect();
    let changed: Vec<_> = before
        .iter()
        .filter(|(p, v)| after.get(*p).is_some_and(|w| w != *v))
        .map(|(p, _)| p)
        .collect();
    assert!(
        added.is_empty() && removed.is_empty() && changed.is_empty(),
        "the refused command changed files: added {added:?}, removed {removed:?}, changed {changed:?}"
    );
}

/// Kills the first command if the test fails before it ends (never leaves it stopped).
struct First {
    child: Option<Child>,
}

impl First {
    fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .args([signal, &self.pid().to_string()])
            .status()
            .expect("kill");
        assert!(status.success(), "kill {signal}");
    }

    fn wait(mut self) -> (std::process::ExitStatus, String, String) {
        let child = self.child.take().expect("running");
        let output = child.wait_with_output().expect("wait");
        (
            output.status,
            String::from_utf8_lossy(&output.stdout).into_owned(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    }
}

impl Drop for First {
    fn drop(&mut self) {
        if let Some(child) = &mut self.child {
            let _ = Command::new("kill")
                .args(["-CONT", &child.id().to_string()])
                .status();
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn spawn(dir: &Path, args: &[&str], stdout: Stdio) -> First {
    let child = Command::new(assert_cmd::cargo::cargo_bin("jetproof"))
        .current_dir(dir)
        .args(args)
        .stdout(stdout)
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn jetproof");
    First { child: Some(child) }
}

/// A pipe whose buffer is already full: the first write of a process given its write end as
/// standard output blocks until [`drain`] reads. Returns the read end and the write end.
fn full_pipe() -> (std::io::PipeReader, std::io::PipeWriter) {
    let (reader, mut writer) = std::io::pipe().expect("pipe");
    let fd = writer.as_raw_fd();
    // SAFETY: fcntl on a descriptor we own; flags only.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    // SAFETY: as above.
    assert_eq!(
        unsafe { libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) },
        0
    );
    let filler = [b'#'; 4096];
    loop {
        match writer.write(&filler) {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
            Err(e) => panic!("fill pipe: {e}"),
        }
    }
    // Blocking again before the child shares it (the flag belongs to the open file, not the
    // descriptor: a non-blocking stdout would make the child's print fail instead of wait).
    // SAFETY: as above.
    assert_eq!(unsafe { libc::fcntl(fd, libc::F_SETFL, flags) }, 0);
    (reader, writer)
}

/// Reads everything from the pipe in the background; returns what followed the filler.
fn drain(mut reader: std::io::PipeReader) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = reader.read_to_end(&mut bytes);
        String::from_utf8_lossy(&bytes)
            .trim_start_matches('#')
            .to_string()
    })
}

/// Waits until the lock file at `path` names process `pid`.
fn wait_for_lock(path: &Path, pid: u32) {
    let needle = format!("\"pid\":{pid},");
    let started = Instant::now();
    loop {
        if std::fs::read_to_string(path).is_ok_and(|text| text.contains(&needle)) {
            return;
        }
        assert!(
            started.elapsed() < HOLD_TIMEOUT,
            "{} never named pid {pid}",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn wait_for_file(path: &Path) {
    let started = Instant::now();
    while !path.exists() {
        assert!(
            started.elapsed() < HOLD_TIMEOUT,
            "{} never appeared",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The lock files of the default layout's last instance (locks are taken in instance order,
/// database before log, so once these name a process it holds every instance's).
fn last_log_lock(data: &Path) -> PathBuf {
    data.join("db2/logs/log.jplock")
}

fn init(dir: &Path, job: &Path) {
    jetproof(dir)
        .args(["init", path_str(job), "--out", "init"])
        .assert()
        .success();
}

/// Runs `second` while `holder_pid` holds the databases; asserts it is refused with exit 2,
/// naming `holder_command` and the pid, and that it changed nothing under `data`.
fn assert_refused(dir: &Path, data: &Path, second: &[&str], holder_command: &str, holder_pid: u32) {
    let before = snapshot(data);
    let output = jetproof(dir).args(second).output().expect("second command");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(
        output.status.code(),
        Some(2),
        "{second:?} must be refused with exit 2; stderr: {stderr}"
    );
    assert!(
        stderr.contains("is in use by another jetproof command"),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!("`jetproof {holder_command}` holds it")),
        "names the holder's command: {stderr}"
    );
    assert!(
        stderr.contains(&format!("pid {holder_pid} on this host")),
        "names the holder's process: {stderr}"
    );
    assert!(
        !stderr.contains("was not shut down cleanly"),
        "a live owner is not taken for a crash: {stderr}"
    );
    assert_unchanged(&before, &snapshot(data));
}

/// The first command is a performance run, caught live; `second` is refused.
fn live_run_refuses(second: &[&str]) {
    let dir = tempfile::tempdir().expect("tempdir");
    let job = small_job(dir.path(), "3s", "");
    init(dir.path(), &job);
    let data = dir.path().join("jetproof-data");
    let first = spawn(
        dir.path(),
        &[
            "run",
            path_str(&job),
            "--test",
            "performance",
            "--out",
            "first",
        ],
        Stdio::piped(),
    );
    wait_for_lock(&last_log_lock(&data), first.pid());
    // Held still while the second command runs, so any change is the second command's.
    first.signal("-STOP");
    let mut second_args = second.to_vec();
    second_args.insert(1, path_str(&job));
    assert_refused(
        dir.path(),
        &data,
        &second_args,
        "run --test performance",
        first.pid(),
    );
    first.signal("-CONT");
    let (status, stdout, stderr) = first.wait();
    assert!(
        status.success(),
        "the first run ends as usual: {status}\n{stdout}\n{stderr}"
    );
    let result = common::result(&dir.path().join("first/result.json"));
    assert_eq!(result["verdict"], "pass", "{result}");
    // And the databases are clean and whole after it.
    jetproof(dir.path())
        .args(["checksum", path_str(&job), "--out", "after"])
        .assert()
        .success();
}

#[test]
fn owner_lock_run_then_recover_is_refused() {
    live_run_refuses(&["recover", "--out", "second"]);
}

#[test]
fn owner_lock_run_then_init_recreate_is_refused() {
    live_run_refuses(&["init", "--recreate", "--out", "second"]);
}

#[test]
fn owner_lock_run_then_backup_is_refused() {
    live_run_refuses(&["run", "--test", "backup", "--out", "second"]);
}

#[test]
fn owner_lock_run_then_checksum_is_refused() {
    live_run_refuses(&["checksum", "--out", "second"]);
}

#[test]
fn owner_lock_run_then_run_is_refused_as_in_use_not_as_dirty() {
    live_run_refuses(&["run", "--test", "performance", "--out", "second"]);
}

#[test]
fn owner_lock_run_then_soft_recovery_is_refused() {
    live_run_refuses(&["run", "--test", "soft-recovery", "--out", "second"]);
}

/// The first command is a checksum, held at its end (its output blocked) with its shared lock.
fn held_checksum(dir: &Path, job: &Path) -> (First, std::io::PipeReader) {
    let (reader, writer) = full_pipe();
    let first = spawn(
        dir,
        &["checksum", path_str(job), "--out", "first"],
        Stdio::from(writer),
    );
    wait_for_file(&dir.join("first/result.json"));
    wait_for_lock(&last_log_lock(&dir.join("jetproof-data")), first.pid());
    (first, reader)
}

#[test]
fn owner_lock_checksum_and_checksum_share_a_clean_database() {
    let dir = tempfile::tempdir().expect("tempdir");
    let job = small_job(dir.path(), "2s", "");
    init(dir.path(), &job);
    let data = dir.path().join("jetproof-data");
    let (first, reader) = held_checksum(dir.path(), &job);
    let before = snapshot(&data);
    let output = jetproof(dir.path())
        .args(["checksum", path_str(&job), "--out", "second"])
        .output()
        .expect("second checksum");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "a second reader shares the lock: {stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.contains("Verdict: pass"), "{stdout}");
    // Both readers are named in the lock file while they hold it; no database or log changed.
    let lock = std::fs::read_to_string(data.join("db1/db1.jpdb.jplock")).expect("lock file");
    assert!(
        lock.contains(&format!("\"pid\":{},", first.pid())),
        "{lock}"
    );
    let after = snapshot(&data);
    let without_locks = |files: &BTreeMap<PathBuf, (Vec<u8>, SystemTime)>| {
        files
            .iter()
            .filter(|(p, _)| p.extension().is_none_or(|x| x != "jplock"))
            .map(|(p, v)| (p.clone(), v.clone()))
            .collect::<BTreeMap<_, _>>()
    };
    assert_unchanged(&without_locks(&before), &without_locks(&after));
    let printed = drain(reader);
    let (status, _, stderr) = first.wait();
    assert!(status.success(), "the first checksum passes: {stderr}");
    assert!(
        printed.join().expect("drain").contains("Verdict: pass"),
        "the first checksum's normal output"
    );
}

#[test]
fn owner_lock_checksum_then_run_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let job = small_job(dir.path(), "2s", "");
    init(dir.path(), &job);
    let data = dir.path().join("jetproof-data");
    let (first, reader) = held_checksum(dir.path(), &job);
    assert_refused(
        dir.path(),
        &data,
        &[
            "run",
            path_str(&job),
            "--test",
            "performance",
            "--out",
            "second",
        ],
        "checksum",
        first.pid(),
    );
    let printed = drain(reader);
    let (status, _, stderr) = first.wait();
    assert!(status.success(), "the first checksum passes: {stderr}");
    assert!(printed.join().expect("drain").contains("Verdict: pass"));
}

#[test]
fn owner_lock_init_then_init_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let job = small_job(dir.path(), "2s", "");
    let data = dir.path().join("jetproof-data");
    let (reader, writer) = full_pipe();
    let first = spawn(
        dir.path(),
        &["init", path_str(&job), "--out", "first"],
        Stdio::from(writer),
    );
    wait_for_file(&dir.path().join("first/result.json"));
    wait_for_lock(&data.join("init.jplock"), first.pid());
    for second in [
        vec!["init", path_str(&job), "--out", "second"],
        vec!["init", path_str(&job), "--recreate", "--out", "third"],
    ] {
        assert_refused(dir.path(), &data, &second, "init", first.pid());
    }
    let printed = drain(reader);
    let (status, _, stderr) = first.wait();
    assert!(status.success(), "the first init ends as usual: {stderr}");
    assert!(
        printed
            .join()
            .expect("drain")
            .contains("Initialised 2 database(s)")
    );
    // The databases it made are whole.
    jetproof(dir.path())
        .args(["checksum", path_str(&job), "--out", "after"])
        .assert()
        .success();
}

#[test]
fn owner_lock_a_crashed_holder_leaves_a_lock_file_that_is_simply_reused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let job = small_job(dir.path(), "30s", "");
    init(dir.path(), &job);
    let data = dir.path().join("jetproof-data");
    let first = spawn(
        dir.path(),
        &[
            "run",
            path_str(&job),
            "--test",
            "performance",
            "--out",
            "first",
        ],
        Stdio::null(),
    );
    wait_for_lock(&last_log_lock(&data), first.pid());
    // Once the databases are attached (and so marked dirty) ...
    let log = dir.path().join("first/test.log");
    let started = Instant::now();
    while !std::fs::read_to_string(&log).is_ok_and(|t| t.contains("Starting transaction dispatch"))
    {
        assert!(started.elapsed() < HOLD_TIMEOUT, "the run never started");
        std::thread::sleep(Duration::from_millis(10));
    }
    // ... a crash: SIGKILL. The kernel releases the lock with the process; the file stays.
    first.signal("-KILL");
    let (status, _, _) = first.wait();
    assert!(!status.success());
    assert!(last_log_lock(&data).exists(), "the lock file is kept");
    // The next command takes the lock: the database is found dirty (a real crash), and the
    // advice to recover is right this time.
    let output = jetproof(dir.path())
        .args(["run", path_str(&job), "--test", "performance", "--out", "x"])
        .output()
        .expect("run");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("jetproof recover"), "{stderr}");
    assert!(!stderr.contains("in use"), "{stderr}");
    jetproof(dir.path())
        .args(["recover", path_str(&job), "--out", "recovered"])
        .assert()
        .success();
}
