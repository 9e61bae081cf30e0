//! Raw block devices at a job's paths, on loop devices made in each test's temporary directory
//! (`docs/devices.md`): the safety refusals (allow_devices unset, mounted, a foreign signature,
//! open exclusively elsewhere, held by device-mapper), each exit 2 before any I/O, naming what
//! was found and the fix. Needs root and loop devices; where the kernel refuses them, each test
//! says so and returns.

mod common;

use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::Command as Process;

use common::{LoopDevice, jetproof};

/// A mount, unmounted when dropped.
struct Mounted {
    point: PathBuf,
}

impl Mounted {
    fn new(device: &str, point: &Path) -> Mounted {
        std::fs::create_dir_all(point).expect("mount point");
        let status = Process::new("mount")
            .arg(device)
            .arg(point)
            .status()
            .expect("mount runs");
        assert!(status.success(), "mount {device}");
        Mounted {
            point: point.to_path_buf(),
        }
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        let _ = Process::new("umount").arg(&self.point).status();
    }
}

/// A device-mapper linear target over a device, removed when dropped.
struct DmLinear {
    name: String,
}

impl DmLinear {
    fn new(device: &str, sectors: u64) -> Option<DmLinear> {
        let name = format!("jetproof-test-{}", std::process::id());
        let status = Process::new("dmsetup")
            .args(["create", &name, "--table"])
            .arg(format!("0 {sectors} linear {device} 0"))
            .status();
        match status {
            Ok(s) if s.success() => Some(DmLinear { name }),
            other => {
                eprintln!("skipped the device-mapper case: dmsetup create failed ({other:?})");
                None
            }
        }
    }
}

impl Drop for DmLinear {
    fn drop(&mut self) {
        let _ = Process::new("dmsetup")
            .args(["remove", &self.name])
            .status();
    }
}

fn mkfs_ext4(device: &str) {
    let status = Process::new("mkfs.ext4")
        .args(["-q", "-F", device])
        .status()
        .expect("mkfs.ext4 runs");
    assert!(status.success(), "mkfs.ext4 {device}");
}

/// A job of one instance whose database is `device`; `allow` sets `storage.allow_devices`.
fn device_job(dir: &Path, device: &str, allow: bool) -> String {
    let job = dir.join("device.toml");
    std::fs::write(
        &job,
        format!(
            "[storage]\ndb_size = \"8MiB\"\npage_size = \"8KiB\"\ndirect_io = false\nallow_devices = {allow}\n\
             [[storage.instance]]\nname = \"dev\"\ndatabase_path = {device:?}\nlog_path = \"logs\"\n\
             [workload]\nrecord_size = \"1KiB\"\nthreads = 2\n[cache]\nmin_size = \"512KiB\"\nmax_size = \"1MiB\"\n\
             [run]\nduration = \"2s\"\nsample_interval = \"500ms\"\n{}",
            common::LENIENT_THRESHOLDS
        ),
    )
    .expect("job");
    job.to_str().expect("utf-8").to_string()
}

/// Runs jetproof in `dir` with `args`; asserts exit 2 with one line naming each of `needles`,
/// and that nothing was made (no results or log directory).
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
    assert!(!dir.join("r").exists(), "{args:?}: no results directory");
    assert!(!dir.join("logs").exists(), "{args:?}: no log directory");
    stderr
}

/// The first `len` bytes of a device.
fn head(device: &str, len: usize) -> Vec<u8> {
    use std::io::Read;
    let mut bytes = vec![0u8; len];
    std::fs::File::open(device)
        .expect("open device")
        .read_exact(&mut bytes)
        .expect("read device");
    bytes
}

fn every_command(job: &str) -> Vec<Vec<&str>> {
    vec![
        vec!["init", job, "--out", "r"],
        vec!["run", job, "--test", "performance", "--out", "r"],
        vec!["run", job, "--test", "backup", "--out", "r"],
        vec!["checksum", job, "--out", "r"],
        vec!["recover", job, "--out", "r"],
    ]
}

#[test]
fn a_device_without_allow_devices_is_refused_by_every_command_naming_the_setting() {
    let dir = tempfile::tempdir().expect("tempdir");
    let Some(device) = LoopDevice::new(dir.path(), "disk.img", 16) else {
        return;
    };
    let job = device_job(dir.path(), device.path(), false);
    let before = head(device.path(), 8192);
    for args in every_command(&job) {
        refused(
            dir.path(),
            &args,
            &[
                device.path(),
                "is a block device",
                "storage.allow_devices = true",
            ],
        );
    }
    assert_eq!(head(device.path(), 8192), before, "the device unchanged");
}

#[test]
fn a_mounted_device_is_refused_even_with_wipe_device() {
    let dir = tempfile::tempdir().expect("tempdir");
    let Some(device) = LoopDevice::new(dir.path(), "disk.img", 16) else {
        return;
    };
    mkfs_ext4(device.path());
    let point = dir.path().join("mnt");
    let mount = Mounted::new(device.path(), &point);
    let job = device_job(dir.path(), device.path(), true);
    for args in every_command(&job) {
        refused(
            dir.path(),
            &args,
            &["is mounted at", "mnt", "Unmount it first"],
        );
    }
    refused(
        dir.path(),
        &["init", &job, "--out", "r", "--wipe-device", device.path()],
        &["is mounted at"],
    );
    drop(mount);
    // Unmounted, the file system's signature is what stops init.
    refused(
        dir.path(),
        &["init", &job, "--out", "r"],
        &["ext2/ext3/ext4", "--wipe-device"],
    );
}

#[test]
fn a_device_with_an_ext4_signature_is_refused_unless_named_by_wipe_device() {
    let dir = tempfile::tempdir().expect("tempdir");
    let Some(device) = LoopDevice::new(dir.path(), "disk.img", 16) else {
        return;
    };
    let Some(other) = LoopDevice::new(dir.path(), "other.img", 4) else {
        return;
    };
    mkfs_ext4(device.path());
    let before = head(device.path(), 72 * 1024);
    let job = device_job(dir.path(), device.path(), true);
    let message = refused(
        dir.path(),
        &["init", &job, "--out", "r"],
        &[
            device.path(),
            "an ext2/ext3/ext4 file system (magic 0xEF53 at byte 1080)",
            "which jetproof did not write",
            &format!("--wipe-device {}", device.path()),
        ],
    );
    assert!(message.contains("database path of dev"), "{message}");
    // Commands that expect jetproof's database find none there.
    for args in &every_command(&job)[1..] {
        refused(
            dir.path(),
            args,
            &[
                "holds no jetproof database",
                "ext2/ext3/ext4",
                "jetproof init",
            ],
        );
    }
    // --wipe-device naming another device is no licence for this one, and is itself refused.
    refused(
        dir.path(),
        &["init", &job, "--out", "r", "--wipe-device", other.path()],
        &["--wipe-device", "not a device of this job"],
    );
    assert_eq!(
        head(device.path(), 72 * 1024),
        before,
        "the file system untouched"
    );
}

#[test]
fn a_device_open_exclusively_elsewhere_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let Some(device) = LoopDevice::new(dir.path(), "disk.img", 16) else {
        return;
    };
    let job = device_job(dir.path(), device.path(), true);
    // This test process holds the device as mkfs or a mount would: O_EXCL.
    let holder = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_EXCL)
        .open(&device.device)
        .expect("open the device exclusively");
    for args in every_command(&job) {
        refused(
            dir.path(),
            &args,
            &["open exclusively by another program", "O_EXCL"],
        );
    }
    drop(holder);
}

#[test]
fn a_device_under_device_mapper_is_refused_naming_the_holder() {
    let dir = tempfile::tempdir().expect("tempdir");
    let Some(device) = LoopDevice::new(dir.path(), "disk.img", 16) else {
        return;
    };
    let Some(dm) = DmLinear::new(device.path(), 16 * 2048) else {
        return;
    };
    let job = device_job(dir.path(), device.path(), true);
    for args in every_command(&job) {
        refused(
            dir.path(),
            &args,
            &["part of a storage stack", "held by dm-", "holders"],
        );
    }
    drop(dm);
}

#[test]
fn a_blank_device_is_taken_by_init_alone() {
    let dir = tempfile::tempdir().expect("tempdir");
    let Some(device) = LoopDevice::new(dir.path(), "disk.img", 16) else {
        return;
    };
    let job = device_job(dir.path(), device.path(), true);
    // Every command but init expects jetproof's database there; none says "set
    // allow_devices" when it is set, and none exits 3.
    for args in &every_command(&job)[1..] {
        let message = refused(
            dir.path(),
            args,
            &[
                "holds no jetproof database",
                "no jetproof marker",
                "jetproof init",
            ],
        );
        assert!(!message.contains("allow_devices"), "{message}");
    }
    // An ext4 signature named by --wipe-device is destroyed by init, which leaves its marker.
    mkfs_ext4(device.path());
    let output = jetproof(dir.path())
        .args(["init", &job, "--out", "r", "--wipe-device", device.path()])
        .output()
        .expect("runs");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let now = head(device.path(), 72 * 1024);
    assert_eq!(&now[80..88], b"JETPRFDB", "jetproof's marker");
    assert_ne!(
        &now[1080..1082],
        &[0x53, 0xef],
        "the ext4 signature is gone"
    );
}

/// The device's view beside ours: the databases on an ext4 file system on a loop device, the
/// logs elsewhere (the test's temporary directory); a performance test reports each device as
/// `iostat -x` shows it, per interval in samples.csv and over the window in result.json and
/// report.md.
#[test]
fn a_performance_test_reports_the_devices_behind_its_databases_and_logs() {
    let dir = tempfile::tempdir().expect("tempdir");
    // 512 MiB (sparse): an unpaced 3 s run on a fast machine grows the 16 MiB database by tens
    // of MiB, and a full file system would stop the instance (seen at 64 MiB).
    let Some(device) = LoopDevice::new(dir.path(), "disk.img", 512) else {
        return;
    };
    mkfs_ext4(device.path());
    let point = dir.path().join("mnt");
    let _mount = Mounted::new(device.path(), &point);
    let loop_name = device
        .device
        .file_name()
        .and_then(|n| n.to_str())
        .expect("name")
        .to_string();
    let job = dir.path().join("view.toml");
    std::fs::write(
        &job,
        format!(
            "[storage]\ndb_size = \"16MiB\"\npage_size = \"8KiB\"\ndirect_io = true\n\
             [[storage.instance]]\nname = \"one\"\ndatabase_path = {:?}\nlog_path = {:?}\n\
             [workload]\nrecord_size = \"1KiB\"\nthreads = 2\n[cache]\nmin_size = \"512KiB\"\nmax_size = \"1MiB\"\n\
             [run]\nduration = \"3s\"\nsample_interval = \"500ms\"\n{}",
            point.join("data/one.jpdb").display().to_string(),
            dir.path().join("logs/one").display().to_string(),
            common::LENIENT_THRESHOLDS
        ),
    )
    .expect("job");
    let job = job.to_str().expect("utf-8");
    let output = jetproof(dir.path())
        .args(["run", job, "--test", "performance", "--out", "r", "--quiet"])
        .output()
        .expect("runs");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let result = common::result(&dir.path().join("r/result.json"));
    let devices = result["totals"]["devices"].as_array().expect("devices");
    let on_loop = devices
        .iter()
        .find(|d| d["device"] == loop_name.as_str())
        .unwrap_or_else(|| panic!("{loop_name} in {devices:?}"));
    assert_eq!(on_loop["databases"], serde_json::json!(["one"]));
    assert_eq!(on_loop["logs"], serde_json::json!([]));
    // Direct reads and writes of the database reached the loop device.
    assert!(on_loop["r_s"].as_f64().expect("r_s") > 0.0, "{on_loop}");
    assert!(on_loop["w_s"].as_f64().expect("w_s") > 0.0, "{on_loop}");
    let util = on_loop["util_percent"].as_f64().expect("util");
    assert!((0.0..=100.0).contains(&util), "{on_loop}");
    let log_device = devices
        .iter()
        .find(|d| d["logs"] == serde_json::json!(["one"]))
        .expect("the log's device");
    assert_ne!(log_device["device"], loop_name.as_str());

    // samples.csv: the database's rows name the loop device, the log's rows the other one.
    let samples = std::fs::read_to_string(dir.path().join("r/samples.csv")).expect("samples");
    let mut lines = samples.lines();
    let header: Vec<&str> = lines.next().expect("header").split(',').collect();
    let col = |name: &str| header.iter().position(|h| *h == name).expect(name);
    let (class, dev, r_s) = (col("class"), col("device"), col("dev_r_s"));
    let mut db_rows = 0;
    for line in lines {
        let cells: Vec<&str> = line.split(',').collect();
        assert_eq!(cells.len(), header.len(), "{line}");
        if cells[class] == "db_read" {
            assert_eq!(cells[dev], loop_name, "{line}");
            assert!(cells[r_s].parse::<f64>().is_ok(), "{line}");
            db_rows += 1;
        } else if cells[class] == "log_write" {
            assert_ne!(cells[dev], loop_name, "{line}");
        }
    }
    assert!(db_rows > 0, "{samples}");

    let report = std::fs::read_to_string(dir.path().join("r/report.md")).expect("report");
    assert!(report.contains("## Device\n"), "{report}");
    assert!(
        report.contains(&format!("| {loop_name} | one database |")),
        "{report}"
    );
    for column in [
        "r_await (ms)",
        "w_await (ms)",
        "aqu-sz",
        "%util",
        "Our Read Avg (ms)",
    ] {
        assert!(report.contains(column), "{column} missing: {report}");
    }
}

/// A disk whose partition is mounted is refused as a whole: the partition is named.
#[test]
fn a_device_whose_partition_is_mounted_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    // An MBR with one Linux partition from sector 2048 to the end of 32 MiB.
    let mut mbr = vec![0u8; 512];
    let entry = &mut mbr[446..462];
    entry[4] = 0x83;
    entry[8..12].copy_from_slice(&2048u32.to_le_bytes());
    entry[12..16].copy_from_slice(&(32 * 2048 - 2048u32).to_le_bytes());
    mbr[510] = 0x55;
    mbr[511] = 0xaa;
    let Some(device) = LoopDevice::with_head(dir.path(), "disk.img", 32, &mbr) else {
        return;
    };
    let partition = format!("{}p1", device.path());
    let appeared = (0..50).any(|_| {
        std::thread::sleep(std::time::Duration::from_millis(100));
        Path::new(&partition).exists()
    });
    if !appeared {
        eprintln!("skipped: the kernel made no partition device {partition}");
        return;
    }
    mkfs_ext4(&partition);
    let mount = Mounted::new(&partition, &dir.path().join("mnt"));
    let job = device_job(dir.path(), device.path(), true);
    for args in every_command(&job) {
        refused(
            dir.path(),
            &args,
            &[&format!("{partition} is mounted at"), "Unmount it first"],
        );
    }
    drop(mount);
    // Unmounted, the partition table is what init finds.
    refused(
        dir.path(),
        &["init", &job, "--out", "r"],
        &["an MBR partition table (1 partition entry", "--wipe-device"],
    );
}
