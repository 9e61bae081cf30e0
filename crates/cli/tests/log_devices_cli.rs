//! Logs on raw block devices (`docs/devices.md`, "A log on a device"): the log region on a loop
//! device of its own beside a database in a file or on another device, through init, a
//! performance test, checksum, kill -9 then recover, backup and soft recovery; and the refusals
//! (a ring too small, a foreign signature); and the database and its log sharing one device. Needs root and loop devices; where the kernel refuses them,
//! each test says so and returns.

mod common;

use std::io::{Seek, SeekFrom};
use std::path::Path;

use common::{LoopDevice, run_expecting as run};

/// A job of one 16 MiB database in a file, its log on `log`; `duration` of the window.
fn job(dir: &Path, database: &str, log: &str, duration: &str) -> String {
    let job = dir.join("logdev.toml");
    std::fs::write(
        &job,
        format!(
            "[storage]\ndb_size = \"16MiB\"\npage_size = \"8KiB\"\ndirect_io = true\nallow_devices = true\n\
             [[storage.instance]]\nname = \"ld\"\ndatabase_path = {database:?}\nlog_path = {log:?}\n\
             [workload]\nrecord_size = \"1KiB\"\nthreads = 2\n[cache]\nmin_size = \"512KiB\"\nmax_size = \"1MiB\"\n\
             [run]\nduration = {duration:?}\nsample_interval = \"500ms\"\n{}",
            common::LENIENT_THRESHOLDS
        ),
    )
    .expect("job");
    job.to_str().expect("utf-8").to_string()
}

/// The names the device's newer valid name table holds (`docs/devices.md`, the table layout).
fn region_names(device: &str) -> Vec<String> {
    let mut best: Option<(u64, Vec<String>)> = None;
    for copy in 0..2u64 {
        let block = common::read_device_at(device, (1 << 20) + copy * 4096, 4096);
        if &block[..8] != b"JPLOGDIR" {
            continue;
        }
        let sequence = u64::from_le_bytes(block[8..16].try_into().expect("8"));
        let count = u32::from_le_bytes(block[16..20].try_into().expect("4")) as usize;
        let names = (0..count)
            .map(|k| {
                let raw = &block[24 + 48 * k..24 + 48 * k + 32];
                let len = raw.iter().position(|b| *b == 0).unwrap_or(32);
                String::from_utf8_lossy(&raw[..len]).to_string()
            })
            .collect();
        if best.as_ref().is_none_or(|(s, _)| sequence > *s) {
            best = Some((sequence, names));
        }
    }
    best.map(|(_, names)| names).unwrap_or_default()
}

#[test]
fn a_log_on_its_own_device_runs_checks_and_recovers_after_kill_9() {
    let dir = tempfile::tempdir().expect("tempdir");
    let Some(device) = LoopDevice::new(dir.path(), "log.img", 64) else {
        return;
    };
    let job = job(dir.path(), "db/ld.jpdb", device.path(), "60s");
    run(dir.path(), &["init", &job, "--out", "i"], 0);
    // The layout header is the device's marker; nothing of jetproof's beside the node.
    assert_eq!(&common::read_device_at(device.path(), 0, 8), b"JPDEVLAY");
    let node_dir = device.device.parent().expect("/dev");
    assert!(!node_dir.join(format!("{}.jplock", device.name())).exists());
    // A second init recognises the device as jetproof's: --recreate, never --wipe-device.
    let (_, stderr) = run(dir.path(), &["init", &job, "--out", "i2"], 2);
    assert!(
        stderr.contains("already holds a jetproof log region"),
        "{stderr}"
    );
    assert!(!stderr.contains("--wipe-device"), "{stderr}");

    // A performance test, killed -9 once it measures.
    let mut child = common::spawn_until_measuring(dir.path(), &job, "p");
    // While the run lives, the log device is held exclusively.
    assert_eq!(
        common::exclusive_open_error(&device.device),
        Some(libc::EBUSY),
        "an O_EXCL open while the run holds the log device"
    );
    child.kill().expect("kill -9");
    child.wait().expect("reaped");
    // The log's files are in the region: the checkpoint and generations.
    let names = region_names(device.path());
    assert!(names.iter().any(|n| n == "checkpoint.jpchk"), "{names:?}");
    assert!(
        names
            .iter()
            .any(|n| n.starts_with('E') && n.ends_with(".jplog")),
        "{names:?}"
    );

    let (_, stderr) = run(
        dir.path(),
        &["run", &job, "--test", "performance", "--out", "p2"],
        2,
    );
    assert!(stderr.contains("not shut down cleanly"), "{stderr}");
    let (stdout, _) = run(dir.path(), &["recover", &job, "--out", "r"], 0);
    // The replay read the log off the device.
    assert!(stdout.contains("log_read"), "{stdout}");
    let recovered = common::result(&dir.path().join("r/result.json"));
    assert_eq!(recovered["verdict"], "pass", "{recovered}\n{stdout}");
    let (stdout, _) = run(dir.path(), &["checksum", &job, "--out", "c"], 0);
    assert!(stdout.contains("Verdict: pass"), "{stdout}");
    let checksum = common::result(&dir.path().join("c/result.json"));
    // The log was found on the device and verified.
    let log_files = &checksum["instances"][0]["log_files"];
    assert_eq!(log_files["present"], true, "{log_files}");
    assert!(
        log_files["files_good"].as_u64().expect("files_good") >= 1,
        "{log_files}"
    );
    assert_eq!(log_files["files_bad"], 0, "{log_files}");
    assert_eq!(log_files["log_path"], device.path(), "{log_files}");

    // And a clean performance test on the recovered database, its log on the device.
    let job = self::job(dir.path(), "db/ld.jpdb", device.path(), "2s");
    run(
        dir.path(),
        &["run", &job, "--test", "performance", "--out", "p3"],
        0,
    );
    let perf = common::result(&dir.path().join("p3/result.json"));
    assert_eq!(perf["verdict"], "pass", "{perf}");
    // The device's own view names the loop device as the log's.
    let devices = perf["totals"]["devices"].as_array().expect("devices");
    let on_loop = devices
        .iter()
        .find(|d| d["device"] == device.name().as_str())
        .unwrap_or_else(|| panic!("{} in {devices:?}", device.name()));
    assert!(on_loop["w_s"].as_f64().expect("w_s") > 0.0, "{on_loop}");

    // Backup, and soft recovery (its generations kept, 32 of 62 slots, then replayed).
    let (stdout, _) = run(
        dir.path(),
        &["run", &job, "--test", "backup", "--out", "b"],
        0,
    );
    assert!(stdout.contains("Database backup statistics"), "{stdout}");
    run(
        dir.path(),
        &["run", &job, "--test", "soft-recovery", "--out", "s"],
        0,
    );
    let soft = common::result(&dir.path().join("s/result.json"));
    assert_eq!(soft["verdict"], "pass", "{soft}");
}

#[test]
fn a_log_device_too_small_for_its_ring_or_carrying_a_file_system_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    // 4 MiB: 2 MiB of header and table, room for two 1 MiB slots; the ring needs three.
    let Some(small) = LoopDevice::new(dir.path(), "small.img", 4) else {
        return;
    };
    let job_small = job(dir.path(), "db/ld.jpdb", small.path(), "2s");
    let (_, stderr) = run(dir.path(), &["init", &job_small, "--out", "i"], 2);
    assert!(stderr.contains("log_path of ld"), "{stderr}");
    assert!(stderr.contains("at least 3 slots"), "{stderr}");
    assert!(
        common::read_device_at(small.path(), 0, 64 << 10)
            .iter()
            .all(|b| *b == 0),
        "nothing written"
    );
    // An ext4 superblock's magic at byte 1080: refused unless --wipe-device names it.
    let mut head = vec![0u8; 2048];
    head[1080] = 0x53;
    head[1081] = 0xEF;
    let Some(ext4) = LoopDevice::with_head(dir.path(), "ext4.img", 64, &head) else {
        return;
    };
    let job_ext4 = job(dir.path(), "db/ld.jpdb", ext4.path(), "2s");
    let (_, stderr) = run(dir.path(), &["init", &job_ext4, "--out", "i"], 2);
    assert!(stderr.contains("ext2/ext3/ext4"), "{stderr}");
    assert!(stderr.contains("--wipe-device"), "{stderr}");
    assert_eq!(
        common::read_device_at(ext4.path(), 1080, 2),
        [0x53, 0xEF],
        "left as it was"
    );
    run(
        dir.path(),
        &[
            "init",
            &job_ext4,
            "--wipe-device",
            ext4.path(),
            "--out",
            "w",
        ],
        0,
    );
    assert_eq!(&common::read_device_at(ext4.path(), 0, 8), b"JPDEVLAY");
    // The region logs the database in db/: with that database gone it belongs to none, and
    // init lays it out anew without --recreate (as it removes a log directory's files then).
    std::fs::remove_dir_all(dir.path().join("db")).expect("remove the database");
    run(dir.path(), &["init", &job_ext4, "--out", "again"], 0);
    assert_eq!(&common::read_device_at(ext4.path(), 0, 8), b"JPDEVLAY");
}

/// The database on one device, its log on another: init, a performance test killed -9, recover
/// replaying from the log device, checksum of both; the database's flush map in the data
/// directory (a log region has no room for it).
#[test]
fn a_database_and_its_log_on_two_devices_run_and_recover_after_kill_9() {
    let dir = tempfile::tempdir().expect("tempdir");
    let Some(database) = LoopDevice::new(dir.path(), "db.img", 128) else {
        return;
    };
    let Some(log) = LoopDevice::new(dir.path(), "log.img", 64) else {
        return;
    };
    let job = job(dir.path(), database.path(), log.path(), "60s");
    run(dir.path(), &["init", &job, "--out", "i"], 0);
    assert_eq!(&common::read_device_at(database.path(), 80, 8), b"JETPRFDB");
    assert_eq!(&common::read_device_at(log.path(), 0, 8), b"JPDEVLAY");
    assert!(
        dir.path()
            .join(format!("jetproof-data/{}.jpfm", database.name()))
            .is_file(),
        "the flush map in the data directory"
    );
    let mut child = common::spawn_until_measuring(dir.path(), &job, "p");
    // Both devices held exclusively while the run lives.
    for device in [&database, &log] {
        assert_eq!(
            common::exclusive_open_error(&device.device),
            Some(libc::EBUSY),
            "{} held",
            device.path()
        );
    }
    child.kill().expect("kill -9");
    child.wait().expect("reaped");
    let (_, stderr) = run(
        dir.path(),
        &["run", &job, "--test", "performance", "--out", "p2"],
        2,
    );
    assert!(stderr.contains("not shut down cleanly"), "{stderr}");
    let (stdout, _) = run(dir.path(), &["recover", &job, "--out", "r"], 0);
    assert!(stdout.contains("log_read"), "{stdout}");
    let (stdout, _) = run(dir.path(), &["checksum", &job, "--out", "c"], 0);
    assert!(stdout.contains("Verdict: pass"), "{stdout}");
    let checksum = common::result(&dir.path().join("c/result.json"));
    let instance = &checksum["instances"][0];
    assert_eq!(instance["log_files"]["log_path"], log.path(), "{instance}");
    assert_eq!(instance["log_files"]["files_bad"], 0, "{instance}");
    assert_eq!(instance["flush_map_state"]["status"], "ok", "{instance}");
    assert!(
        instance["flush_map_state"]["path"]
            .as_str()
            .expect("path")
            .ends_with(&format!("jetproof-data/{}.jpfm", database.name())),
        "{instance}"
    );
}

/// The database and its log sharing one device (`docs/devices.md`, the shared layout): the
/// layout header at byte 0, the log's slots, the database from its region's offset; init, a
/// performance test killed -9, recover replaying from the device, checksum; a device too small
/// for both refused before any write.
#[test]
fn a_database_and_its_log_sharing_one_device_run_and_recover_after_kill_9() {
    let dir = tempfile::tempdir().expect("tempdir");
    // 64 slots of 1 MiB after 2 MiB: the database region starts at 66 MiB.
    let Some(device) = LoopDevice::new(dir.path(), "shared.img", 192) else {
        return;
    };
    let job = job(dir.path(), device.path(), device.path(), "60s");
    run(dir.path(), &["init", &job, "--out", "i"], 0);
    assert_eq!(&common::read_device_at(device.path(), 0, 8), b"JPDEVLAY");
    let region = 66u64 << 20;
    assert_eq!(
        &common::read_device_at(device.path(), region + 80, 8),
        b"JETPRFDB"
    );
    assert!(
        common::read_device_at(device.path(), 80, 8) != b"JETPRFDB",
        "no database header at byte 0"
    );
    let mut child = common::spawn_until_measuring(dir.path(), &job, "p");
    child.kill().expect("kill -9");
    child.wait().expect("reaped");
    let names = region_names(device.path());
    assert!(names.iter().any(|n| n == "checkpoint.jpchk"), "{names:?}");
    let (_, stderr) = run(
        dir.path(),
        &["run", &job, "--test", "performance", "--out", "p2"],
        2,
    );
    assert!(stderr.contains("not shut down cleanly"), "{stderr}");
    let (stdout, _) = run(dir.path(), &["recover", &job, "--out", "r"], 0);
    assert!(stdout.contains("log_read"), "{stdout}");
    let (stdout, _) = run(dir.path(), &["checksum", &job, "--out", "c"], 0);
    assert!(stdout.contains("Verdict: pass"), "{stdout}");
    let checksum = common::result(&dir.path().join("c/result.json"));
    let instance = &checksum["instances"][0];
    assert_eq!(instance["log_files"]["files_bad"], 0, "{instance}");
    assert_eq!(instance["pages_bad"], 0, "{instance}");
    // A clean run after the recovery.
    let job = self::job(dir.path(), device.path(), device.path(), "2s");
    run(
        dir.path(),
        &["run", &job, "--test", "performance", "--out", "p3"],
        0,
    );
    let perf = common::result(&dir.path().join("p3/result.json"));
    assert_eq!(perf["verdict"], "pass", "{perf}");
    // Backup and soft recovery through the region.
    let (stdout, _) = run(
        dir.path(),
        &["run", &job, "--test", "backup", "--out", "b"],
        0,
    );
    assert!(stdout.contains("Database backup statistics"), "{stdout}");
    run(
        dir.path(),
        &["run", &job, "--test", "soft-recovery", "--out", "s"],
        0,
    );
    // Damage written to a page through the device is found at that page: the offsets are the
    // region's.
    let page = 200u64;
    {
        use std::io::Write;
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .open(&device.device)
            .expect("open device for writing");
        file.seek(SeekFrom::Start(region + page * 8192))
            .expect("seek");
        let garbage: Vec<u8> = (0..8192u64).map(|i| (i * 7 + 13) as u8).collect();
        file.write_all(&garbage).expect("damage");
        file.sync_all().expect("sync");
    }
    let (stdout, _) = run(dir.path(), &["checksum", &job, "--out", "d"], 1);
    assert!(
        stdout.contains(&format!("page {page} (byte offset {})", page * 8192)),
        "{stdout}"
    );
}

#[test]
fn a_shared_device_too_small_for_the_log_ring_and_the_database_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    // 66 MiB of header, table and slots leave 14 MiB, and the database needs 16 MiB.
    let Some(device) = LoopDevice::new(dir.path(), "shared.img", 80) else {
        return;
    };
    let job = job(dir.path(), device.path(), device.path(), "2s");
    let (_, stderr) = run(dir.path(), &["init", &job, "--out", "i"], 2);
    assert!(stderr.contains("log_path of ld"), "{stderr}");
    assert!(stderr.contains("do not fit"), "{stderr}");
    assert!(
        common::read_device_at(device.path(), 0, 64 << 10)
            .iter()
            .all(|b| *b == 0),
        "nothing written"
    );
}

/// Soft recovery keeps every generation it makes (32 by default): on a log device of 16 MiB
/// (14 slots) the ring fills, and that is a storage error naming the region (exit 3), never an
/// overwrite of a generation still needed.
#[test]
fn a_ring_too_small_for_the_jobs_log_stops_the_instance_with_a_storage_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let Some(device) = LoopDevice::new(dir.path(), "log.img", 16) else {
        return;
    };
    let job = job(dir.path(), "db/ld.jpdb", device.path(), "2s");
    run(dir.path(), &["init", &job, "--out", "i"], 0);
    let (_, stderr) = run(
        dir.path(),
        &["run", &job, "--test", "soft-recovery", "--out", "s"],
        3,
    );
    assert!(stderr.contains("storage error"), "{stderr}");
    let soft = common::result(&dir.path().join("s/result.json"));
    let reasons = soft["reasons"].to_string();
    assert!(
        reasons.contains(&format!("the log region on {} is full", device.path())),
        "{reasons}"
    );
    assert!(reasons.contains("14 slots"), "{reasons}");
    // Every generation the region names is whole and checks out: nothing was overwritten.
    let (stdout, _) = run(dir.path(), &["checksum", &job, "--out", "c"], 1);
    let checksum = common::result(&dir.path().join("c/result.json"));
    let log_files = &checksum["instances"][0]["log_files"];
    assert_eq!(log_files["files_bad"], 0, "{log_files}\n{stdout}");
    assert!(
        log_files["files_good"].as_u64().expect("files_good") >= 12,
        "{log_files}"
    );
}
