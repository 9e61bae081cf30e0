//! The device checks on real block devices: loop devices over sparse files, as the CLI's
//! `devices_cli.rs` makes them, but through this crate alone (no binary). Skipped, saying why,
//! where loop devices cannot be made (not root, no `losetup`, a container without loop
//! devices).

use std::path::{Path, PathBuf};

use jetproof_storage::device::{DeviceRules, DeviceUse, check_device};

/// A loop device over a sparse file of `mib` MiB starting with `head`, detached when dropped.
struct LoopDevice {
    device: PathBuf,
}

impl LoopDevice {
    fn new(dir: &Path, mib: u64, head: &[u8]) -> Option<LoopDevice> {
        use std::io::Write;
        let backing = dir.join("backing");
        let mut file = std::fs::File::create(&backing).expect("backing file");
        file.set_len(mib << 20)
            .expect("size the sparse backing file");
        file.write_all(head).expect("write the head");
        drop(file);
        match std::process::Command::new("losetup")
            .args(["-f", "--show"])
            .arg(&backing)
            .output()
        {
            Ok(out) if out.status.success() => Some(LoopDevice {
                device: PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()),
            }),
            Ok(out) => {
                eprintln!(
                    "skipped: the kernel refuses a loop device here (losetup: {})",
                    String::from_utf8_lossy(&out.stderr).trim()
                );
                None
            }
            Err(e) => {
                eprintln!("skipped: no losetup ({e})");
                None
            }
        }
    }
}

impl Drop for LoopDevice {
    fn drop(&mut self) {
        let _ = std::process::Command::new("losetup")
            .arg("-d")
            .arg(&self.device)
            .status();
    }
}

fn rules(allowed: bool, wipe: &[PathBuf]) -> DeviceRules<'_> {
    DeviceRules {
        allowed,
        allow_hint: "set `storage.allow_devices = true` in the job to allow it",
        wipe,
    }
}

#[test]
fn a_device_is_refused_unless_the_job_allows_devices() {
    let dir = tempfile::tempdir().expect("tempdir");
    let Some(device) = LoopDevice::new(dir.path(), 16, &[]) else {
        return;
    };
    let refused = check_device(
        &device.device,
        "storage.database_path",
        DeviceUse::Init,
        rules(false, &[]),
    )
    .expect_err("a device the job does not allow");
    assert_eq!(refused.field, "storage.database_path");
    assert!(
        refused.message.contains("storage.allow_devices = true"),
        "{refused}"
    );

    // Allowed, a blank device is free for init: not ours, nothing to wipe.
    let found = check_device(
        &device.device,
        "storage.database_path",
        DeviceUse::Init,
        rules(true, &[]),
    )
    .expect("a blank device the job allows");
    assert!(!found.ours);
    assert_eq!(found.wiped, None);

    // But a test that reads an existing database finds none on it.
    let missing = check_device(
        &device.device,
        "storage.database_path",
        DeviceUse::Existing,
        rules(true, &[]),
    )
    .expect_err("no database on a blank device");
    assert!(
        missing.message.contains("holds no jetproof database"),
        "{missing}"
    );
    assert!(missing.message.contains("jetproof init"), "{missing}");
}

#[test]
fn a_foreign_file_system_on_a_device_is_refused_unless_named_for_wiping() {
    let dir = tempfile::tempdir().expect("tempdir");
    // The ext2/3/4 superblock magic, 0xEF53 at byte 1080.
    let mut head = vec![0u8; 4096];
    head[1080..1082].copy_from_slice(&[0x53, 0xef]);
    let Some(device) = LoopDevice::new(dir.path(), 16, &head) else {
        return;
    };
    let refused = check_device(
        &device.device,
        "storage.database_path",
        DeviceUse::Init,
        rules(true, &[]),
    )
    .expect_err("a device carrying a file system");
    assert!(refused.message.contains("ext2/ext3/ext4"), "{refused}");
    assert!(refused.message.contains("--wipe-device"), "{refused}");

    let wipe = [device.device.clone()];
    let found = check_device(
        &device.device,
        "storage.database_path",
        DeviceUse::Init,
        rules(true, &wipe),
    )
    .expect("named with --wipe-device");
    assert!(!found.ours);
    let wiped = found.wiped.expect("what would be destroyed is named");
    assert!(wiped.contains("ext2/ext3/ext4"), "{wiped}");
    // The check only reads: the signature is still there.
    let mut back = [0u8; 2];
    {
        use std::io::{Read, Seek, SeekFrom};
        let mut file = std::fs::File::open(&device.device).expect("open the device");
        file.seek(SeekFrom::Start(1080)).expect("seek");
        file.read_exact(&mut back).expect("read");
    }
    assert_eq!(back, [0x53, 0xef]);
}

#[test]
fn a_regular_file_is_not_a_device() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("sparse");
    std::fs::File::create(&file)
        .and_then(|f| f.set_len(16 << 20))
        .expect("sparse file");
    let refused = check_device(&file, "storage.log_path", DeviceUse::Init, rules(true, &[]))
        .expect_err("a file is no device");
    assert_eq!(refused.field, "storage.log_path");
    assert!(
        refused.message.contains("is not a block device"),
        "{refused}"
    );
}
