//! `jetproof probe` run as a user runs it: the real binary, short durations, small files in a
//! temporary directory on a disk-backed file system.

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use predicates::prelude::*;

fn dir() -> tempfile::TempDir {
    tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("temp dir")
}

fn probe(path: &Path) -> Command {
    let mut cmd = Command::cargo_bin("jetproof").expect("binary");
    cmd.arg("probe")
        .arg("--path")
        .arg(path)
        .args(["--file-size", "2MiB", "--duration", "300ms"]);
    cmd
}

fn json(cmd: &mut Command) -> serde_json::Value {
    let out = cmd
        .arg("--json")
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    serde_json::from_slice(&out).expect("one JSON object on stdout")
}

#[test]
fn json_has_the_promised_fields() {
    let dir = dir();
    let path = dir.path().join("probe.dat");
    let report = json(probe(&path).args([
        "--block-size",
        "4KiB",
        "--read-percent",
        "100",
        "--queue-depth",
        "4",
        "--random",
    ]));
    for key in [
        "iops",
        "mb_per_sec",
        "avg_latency_ms",
        "p99_latency_ms",
        "cpu_percent",
        "p50_latency_ms",
        "p999_latency_ms",
        "max_latency_ms",
    ] {
        assert!(report[key].is_number(), "{key} missing in {report}");
    }
    assert!(report["iops"].as_f64().unwrap_or(0.0) > 0.0, "{report}");
    assert_eq!(report["block_size_bytes"], 4096);
    assert_eq!(report["queue_depth"], 4);
    assert_eq!(report["file_created"], true);
    let data = std::fs::read(&path).expect("file");
    assert_eq!(data.len(), 2 << 20);
    assert!(
        data[4096..].iter().all(|&b| b != 0),
        "filled with non-zero data"
    );
}

#[test]
fn mixed_sequential_on_std_and_reuse_of_own_file() {
    let dir = dir();
    let path = dir.path().join("mixed.dat");
    let first = json(probe(&path).args([
        "--read-percent",
        "70",
        "--queue-depth",
        "2",
        "--sequential",
        "--backend",
        "std",
        "--block-size",
        "8KiB",
    ]));
    assert_eq!(first["backend"], "std");
    assert!(
        first["writes"]["count"].as_u64().unwrap_or(0) > 0,
        "{first}"
    );
    assert!(first["reads"]["count"].as_u64().unwrap_or(0) > 0, "{first}");
    // Probe may write again into a file it made.
    let second = json(probe(&path).args(["--read-percent", "50"]));
    assert_eq!(second["file_created"], false);
}

#[test]
fn foreign_file_is_never_written() {
    let dir = dir();
    let path: PathBuf = dir.path().join("precious.edb");
    std::fs::write(&path, vec![7u8; 1 << 20]).expect("foreign file");
    probe(&path)
        .args(["--read-percent", "70"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--path").and(predicate::str::contains("not made by")));
    assert_eq!(std::fs::read(&path).expect("read"), vec![7u8; 1 << 20]);
    // Reading it is harmless and allowed.
    probe(&path)
        .args(["--read-percent", "100", "--block-size", "4KiB"])
        .assert()
        .success();
    assert_eq!(std::fs::read(&path).expect("read"), vec![7u8; 1 << 20]);
}

#[test]
fn bad_input_exits_2_naming_the_flag_before_any_io() {
    let dir = dir();
    let path = dir.path().join("never.dat");
    let cases: [(&[&str], &str); 9] = [
        (&["--block-size", "1000"], "--block-size"),
        (
            &["--block-size", "1MiB", "--file-size", "1MiB"],
            "--file-size",
        ),
        (&["--file-size", "900TiB"], "--file-size"),
        (&["--block-size", "0"], "--block-size"),
        (&["--read-percent", "101"], "--read-percent"),
        (&["--queue-depth", "0"], "--queue-depth"),
        (&["--duration", "0s"], "--duration"),
        (&["--io-engine", "floppy"], "--io-engine"),
        (&["--backend", "floppy"], "--io-engine"),
    ];
    for (args, flag) in cases {
        probe(&path)
            .args(args)
            .assert()
            .code(2)
            .stderr(predicate::str::contains(flag));
        assert!(!path.exists(), "{flag}: nothing may be created");
    }
    Command::cargo_bin("jetproof")
        .expect("binary")
        .args(["probe", "--path"])
        .arg(&path)
        .args(["--random", "--sequential"])
        .assert()
        .code(2);
}

#[test]
fn tmpfs_and_devices_are_refused_with_the_fix() {
    let shm = Path::new("/dev/shm");
    let on_tmpfs = std::fs::read_to_string("/proc/mounts")
        .map(|m| m.lines().any(|l| l.contains(" /dev/shm tmpfs ")))
        .unwrap_or(false);
    if on_tmpfs {
        let dir = tempfile::tempdir_in(shm).expect("dir on tmpfs");
        let path = dir.path().join("p.dat");
        probe(&path)
            .assert()
            .code(2)
            .stderr(predicate::str::contains("--buffered"));
        assert!(!path.exists(), "nothing left behind");
    }
    use std::os::unix::fs::FileTypeExt;
    if let Some(device) = ["/dev/loop0", "/dev/vda", "/dev/sda"]
        .into_iter()
        .find(|p| {
            std::fs::metadata(p)
                .map(|m| m.file_type().is_block_device())
                .unwrap_or(false)
        })
    {
        probe(Path::new(device))
            .assert()
            .code(2)
            .stderr(predicate::str::contains("--allow-device"));
    }
}
