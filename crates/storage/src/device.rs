//! Raw block devices at a job's paths: what must be true before jetproof touches one
//! (`docs/devices.md`).
//!
//! A device is used only when the job says `storage.allow_devices = true`, and never when
//!
//! * it, or a partition of it, is mounted (`/proc/self/mountinfo`) or used as swap
//!   (`/proc/swaps`);
//! * it, or a partition of it, has a holder in `/sys/dev/block/MAJ:MIN/holders` (an MD array,
//!   an LVM volume or another device-mapper target is built on it);
//! * another program holds it open exclusively (`open(O_EXCL)` answers `EBUSY`);
//! * it carries a file-system, partition-table or RAID signature that jetproof did not write,
//!   unless the user names that very device with `--wipe-device DEVICE` (`init` only: the only
//!   command that writes a device from scratch).
//!
//! The signatures are read directly (no libblkid): ext2/3/4, XFS, btrfs, GPT, MBR with
//! partition entries, NTFS/FAT boot sectors, LVM2 physical volumes, MD superblocks (0.90, 1.0,
//! 1.1, 1.2), swap, LUKS and ISO 9660. A device jetproof initialised carries the database
//! header's signature at its start, which is its marker: later commands recognise it as ours.
//!
//! Every check here reads at most a few hundred KiB and writes nothing; it runs before the owner
//! lock and before any other I/O, and a refusal is bad input (exit 2) saying what was found and
//! the fix.

use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use crate::{BadInput, bad};

/// How far into a device the signatures reach (btrfs's superblock at 64 KiB + 64, swap's at the
/// end of a 64 KiB page).
const HEAD_BYTES: usize = 72 * 1024;

/// How much of a device's end is read (MD 0.90's superblock lies within its last 128 KiB).
const TAIL_BYTES: u64 = 128 * 1024;

/// A block device's numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DevNum {
    pub major: u32,
    pub minor: u32,
}

impl DevNum {
    pub fn of_rdev(rdev: u64) -> DevNum {
        DevNum {
            major: (((rdev >> 8) & 0xfff) | ((rdev >> 32) & !0xfff)) as u32,
            minor: ((rdev & 0xff) | ((rdev >> 12) & !0xff)) as u32,
        }
    }

    fn parse(text: &str) -> Option<DevNum> {
        let (major, minor) = text.trim().split_once(':')?;
        Some(DevNum {
            major: major.parse().ok()?,
            minor: minor.parse().ok()?,
        })
    }

    fn sys_dir(self) -> PathBuf {
        PathBuf::from(format!("/sys/dev/block/{}:{}", self.major, self.minor))
    }
}

impl std::fmt::Display for DevNum {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.major, self.minor)
    }
}

/// The device numbers of the block device at `path` (after following links), None when it is
/// not one.
pub fn dev_num(path: &Path) -> Option<DevNum> {
    let meta = std::fs::metadata(path).ok()?;
    meta.file_type()
        .is_block_device()
        .then(|| DevNum::of_rdev(meta.rdev()))
}

/// What a command means to do with a device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeviceUse {
    /// `init`: writes the device from scratch. A foreign signature is refused unless the device
    /// is named by `--wipe-device`; a blank device or one of jetproof's is taken.
    Init,
    /// `run`, `checksum`, `recover`: the device must carry jetproof's marker (a database `init`
    /// made there).
    Existing,
    /// `probe` writing raw I/O: as `Init`, with no marker expected afterwards.
    Probe,
}

/// The settings that decide whether a device may be touched.
#[derive(Debug, Clone, Copy)]
pub struct DeviceRules<'a> {
    /// `storage.allow_devices` (or `probe --allow-device`).
    pub allowed: bool,
    /// How to allow it, named in the refusal (`storage.allow_devices = true`).
    pub allow_hint: &'a str,
    /// The devices named by `--wipe-device`.
    pub wipe: &'a [PathBuf],
}

/// What was found on a device that may be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceFound {
    pub dev: DevNum,
    /// A jetproof database header at its start.
    pub ours: bool,
    /// The foreign signature the user allowed `--wipe-device` to destroy.
    pub wiped: Option<String>,
}

/// The rules of a job: `storage.allow_devices`, and the devices `--wipe-device` names.
pub fn rules<'a>(job: &jetproof_job::Job, wipe: &'a [PathBuf]) -> DeviceRules<'a> {
    DeviceRules {
        allowed: job.storage.allow_devices,
        allow_hint: "set `storage.allow_devices = true` in the job to allow it",
        wipe,
    }
}

/// Devices this process holds open with `O_EXCL` (the owner lock), so that its own safety checks
/// do not mistake it for another program.
pub(crate) static HELD: std::sync::Mutex<Vec<DevNum>> = std::sync::Mutex::new(Vec::new());

/// Is the device `dev` held exclusively by this process ([`crate::raw::hold_exclusive`])?
pub fn held_here(dev: DevNum) -> bool {
    HELD.lock().is_ok_and(|held| held.contains(&dev))
}

/// Checks the block device at `path` (the job's `field`) for `purpose`. Reads, never writes.
pub fn check_device(
    path: &Path,
    field: &str,
    purpose: DeviceUse,
    rules: DeviceRules<'_>,
) -> Result<DeviceFound, BadInput> {
    let shown = path.display();
    let Some(dev) = dev_num(path) else {
        return Err(bad(field, format!("{shown} is not a block device")));
    };
    if !rules.allowed {
        return Err(bad(
            field,
            format!(
                "{shown} is a block device; jetproof writes to a device only when told to, since its content is destroyed: {}",
                rules.allow_hint
            ),
        ));
    }
    let family = family(dev);
    if let Some(mount) = mounted(&family) {
        return Err(bad(
            field,
            format!(
                "{shown} is in use: {mount}; jetproof never writes to a mounted device. Unmount it first, or choose another device"
            ),
        ));
    }
    if let Some(swap) = swap_in_use(&family) {
        return Err(bad(
            field,
            format!(
                "{shown} is in use as swap ({swap}); jetproof never writes to it. `swapoff {swap}` first, or choose another device"
            ),
        ));
    }
    if let Some((member, holders)) = held(&family) {
        return Err(bad(
            field,
            format!(
                "{shown} is part of a storage stack: {member} is held by {} (an MD array, LVM volume or device-mapper target is built on it; /sys/dev/block/{member}/holders); jetproof never writes under one. Take it out of that stack first, or choose another device",
                holders.join(", ")
            ),
        ));
    }
    // This process's own owner lock holds the device exclusively (`crate::raw`): read it
    // without claiming it again.
    let opened = if held_here(dev) {
        std::fs::File::open(path)
    } else {
        open_exclusive(path)
    };
    let file = opened.map_err(|e| {
        if e.raw_os_error() == Some(libc::EBUSY) {
            bad(
                field,
                format!(
                    "{shown} is open exclusively by another program (open with O_EXCL says busy: a mount, an MD/LVM/device-mapper stack, or a program such as mkfs or another jetproof holds it); stop it first, or choose another device"
                ),
            )
        } else {
            bad(field, format!("{shown} cannot be opened: {e}"))
        }
    })?;
    let (head, tail, size) =
        read_ends(&file).map_err(|e| bad(field, format!("{shown} cannot be read: {e}")))?;
    drop(file);
    // A database header, or the layout header of a log region (`crate::logregion`).
    let ours = crate::marks::looks_like_database(&head) || crate::marks::looks_like_layout(&head);
    let foreign = if ours {
        None
    } else {
        foreign_signature(&head, &tail, size)
    };
    let named = rules.wipe.iter().any(|w| dev_num(w) == Some(dev));
    match (purpose, foreign) {
        (DeviceUse::Existing, found) if !ours => Err(bad(
            field,
            format!(
                "{shown} holds no jetproof database ({}); make one there with `jetproof init`",
                found
                    .map(|f| format!("it carries {f}"))
                    .unwrap_or_else(|| "no jetproof marker at its start".to_string())
            ),
        )),
        (DeviceUse::Init | DeviceUse::Probe, Some(found)) if !named => Err(bad(
            field,
            format!(
                "{shown} carries {found}, which jetproof did not write; its content would be destroyed. If that is what you want, pass `--wipe-device {shown}`"
            ),
        )),
        (_, found) => Ok(DeviceFound {
            dev,
            ours,
            wiped: found,
        }),
    }
}

/// Every `--wipe-device` names a device the command uses: a typo must not pass unnoticed.
pub fn check_wipe_names(wipe: &[PathBuf], used: &[PathBuf]) -> Result<(), BadInput> {
    for named in wipe {
        let Some(dev) = dev_num(named) else {
            return Err(bad(
                "--wipe-device",
                format!("{} is not a block device", named.display()),
            ));
        };
        if !used.iter().any(|u| dev_num(u) == Some(dev)) {
            return Err(bad(
                "--wipe-device",
                format!(
                    "{} is not a device of this job; --wipe-device names the exact device a database or log path gives",
                    named.display()
                ),
            ));
        }
    }
    Ok(())
}

/// Opens the device at `path` with `O_EXCL`: `EBUSY` when anyone (a mount, an MD/LVM/dm stack,
/// another program) claims it exclusively.
pub(crate) fn open_exclusive(path: &Path) -> std::io::Result<std::fs::File> {
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_EXCL | libc::O_CLOEXEC)
        .open(path)
}

/// The first [`HEAD_BYTES`] and last [`TAIL_BYTES`] of the device, and its size.
fn read_ends(file: &std::fs::File) -> std::io::Result<(Vec<u8>, Vec<u8>, u64)> {
    let mut file = file;
    let size = file.seek(SeekFrom::End(0))?;
    file.seek(SeekFrom::Start(0))?;
    let mut head = vec![0u8; HEAD_BYTES.min(size as usize)];
    file.read_exact(&mut head)?;
    let tail_start = size.saturating_sub(TAIL_BYTES);
    file.seek(SeekFrom::Start(tail_start))?;
    let mut tail = vec![0u8; (size - tail_start) as usize];
    file.read_exact(&mut tail)?;
    Ok((head, tail, size))
}

/// The device and its partitions.
fn family(dev: DevNum) -> Vec<DevNum> {
    let mut all = vec![dev];
    if let Ok(entries) = std::fs::read_dir(dev.sys_dir()) {
        for entry in entries.flatten() {
            let part = entry.path();
            if part.join("partition").exists()
                && let Some(num) = std::fs::read_to_string(part.join("dev"))
                    .ok()
                    .and_then(|t| DevNum::parse(&t))
            {
                all.push(num);
            }
        }
    }
    all
}

/// "DEVICE mounted at MOUNTPOINT (TYPE)" for the first mount of one of `family`.
fn mounted(family: &[DevNum]) -> Option<String> {
    let text = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    for line in text.lines() {
        let fields: Vec<&str> = line.split(' ').collect();
        let Some(sep) = fields.iter().position(|f| *f == "-") else {
            continue;
        };
        let (Some(num), Some(point), Some(fstype), Some(source)) = (
            fields.get(2).and_then(|t| DevNum::parse(t)),
            fields.get(4),
            fields.get(sep + 1),
            fields.get(sep + 2),
        ) else {
            continue;
        };
        let source = unescape(source);
        // The mount's device number (btrfs shows an anonymous one), or its source's.
        let hit = family.contains(&num)
            || (source.starts_with('/')
                && dev_num(Path::new(&source)).is_some_and(|d| family.contains(&d)));
        if hit {
            return Some(format!(
                "{source} is mounted at {} ({fstype})",
                unescape(point)
            ));
        }
    }
    None
}

/// The swap area of `family` in `/proc/swaps`.
fn swap_in_use(family: &[DevNum]) -> Option<String> {
    let text = std::fs::read_to_string("/proc/swaps").ok()?;
    text.lines().skip(1).find_map(|line| {
        let name = unescape(line.split_whitespace().next()?);
        dev_num(Path::new(&name))
            .is_some_and(|d| family.contains(&d))
            .then_some(name)
    })
}

/// The first member of `family` with holders, and their names.
fn held(family: &[DevNum]) -> Option<(DevNum, Vec<String>)> {
    family.iter().find_map(|dev| {
        let holders: Vec<String> = std::fs::read_dir(dev.sys_dir().join("holders"))
            .ok()?
            .flatten()
            .map(|e| e.file_name().to_string_lossy().to_string())
            .collect();
        (!holders.is_empty()).then_some((*dev, holders))
    })
}

/// mountinfo's and /proc/swaps's octal escapes (`\040` for a space).
fn unescape(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\'
            && i + 3 < bytes.len()
            && bytes[i + 1..i + 4]
                .iter()
                .all(|b| (b'0'..=b'7').contains(b))
        {
            let value = bytes[i + 1..i + 4]
                .iter()
                .fold(0u32, |v, b| v * 8 + u32::from(b - b'0'));
            out.push(value as u8);
            i += 4;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).to_string()
}

/// The first foreign signature found in a device's first bytes (`head`, from offset 0) and last
/// bytes (`tail`, ending at `size`), in words.
pub fn foreign_signature(head: &[u8], tail: &[u8], size: u64) -> Option<String> {
    let at = |offset: usize, magic: &[u8]| head.get(offset..offset + magic.len()) == Some(magic);
    if at(1080, &[0x53, 0xef]) {
        return Some("an ext2/ext3/ext4 file system (magic 0xEF53 at byte 1080)".into());
    }
    if at(0, b"XFSB") {
        return Some("an XFS file system (\"XFSB\" at byte 0)".into());
    }
    if at(65600, b"_BHRfS_M") {
        return Some("a btrfs file system (\"_BHRfS_M\" at byte 65600)".into());
    }
    for sector in [0usize, 512, 1024, 1536] {
        if at(sector, b"LABELONE") {
            return Some(format!(
                "an LVM physical volume label (\"LABELONE\" at byte {sector})"
            ));
        }
    }
    if at(0, b"LUKS\xba\xbe") {
        return Some("a LUKS encrypted volume (\"LUKS\" at byte 0)".into());
    }
    for offset in [512usize, 4096] {
        if at(offset, b"EFI PART") {
            return Some(format!(
                "a GPT partition table (\"EFI PART\" at byte {offset})"
            ));
        }
    }
    const MD_MAGIC: [u8; 4] = 0xa92b_4efc_u32.to_le_bytes();
    for (offset, version) in [(4096usize, "1.2"), (0, "1.1")] {
        if at(offset, &MD_MAGIC) {
            return Some(format!(
                "an MD RAID superblock (version {version}, at byte {offset})"
            ));
        }
    }
    let sectors = size / 512;
    let tail_start = size - tail.len() as u64;
    let at_end = |offset: u64, magic: &[u8]| {
        offset >= tail_start
            && tail
                .get((offset - tail_start) as usize..(offset - tail_start) as usize + magic.len())
                == Some(magic)
    };
    if sectors >= 16 && at_end(((sectors - 16) & !7) * 512, &MD_MAGIC) {
        return Some("an MD RAID superblock (version 1.0, near the device's end)".into());
    }
    if sectors >= 128 && at_end(((sectors & !127) - 128) * 512, &MD_MAGIC) {
        return Some("an MD RAID superblock (version 0.90, near the device's end)".into());
    }
    for page in [4096usize, 8192, 16384, 65536] {
        if at(page - 10, b"SWAPSPACE2") || at(page - 10, b"SWAP-SPACE") {
            return Some(format!(
                "a swap area (\"SWAPSPACE2\" at byte {})",
                page - 10
            ));
        }
    }
    if at(32769, b"CD001") {
        return Some("an ISO 9660 file system".into());
    }
    if at(510, &[0x55, 0xaa]) {
        if at(3, b"NTFS    ") {
            return Some("an NTFS file system".into());
        }
        if at(54, b"FAT") || at(82, b"FAT32") {
            return Some("a FAT file system".into());
        }
        let entries = (0..4).filter(|i| head.get(446 + 16 * i + 4).is_some_and(|t| *t != 0));
        let count = entries.count();
        if count > 0 {
            return Some(format!(
                "an MBR partition table ({count} partition entr{}; 0x55AA at byte 510)",
                if count == 1 { "y" } else { "ies" }
            ));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blank(size: usize) -> Vec<u8> {
        vec![0u8; size]
    }

    #[test]
    fn each_signature_is_named() {
        let size = 1u64 << 20;
        type Mark = Box<dyn Fn(&mut Vec<u8>, &mut Vec<u8>)>;
        let cases: Vec<(Mark, &str)> = vec![
            (
                Box::new(|h, _| h[1080..1082].copy_from_slice(&[0x53, 0xef])),
                "ext2/ext3/ext4",
            ),
            (Box::new(|h, _| h[0..4].copy_from_slice(b"XFSB")), "XFS"),
            (
                Box::new(|h, _| h[65600..65608].copy_from_slice(b"_BHRfS_M")),
                "btrfs",
            ),
            (
                Box::new(|h, _| h[512..520].copy_from_slice(b"EFI PART")),
                "GPT",
            ),
            (
                Box::new(|h, _| h[512..520].copy_from_slice(b"LABELONE")),
                "LVM",
            ),
            (
                Box::new(|h, _| h[4096..4100].copy_from_slice(&0xa92b_4efc_u32.to_le_bytes())),
                "version 1.2",
            ),
            (
                Box::new(|h, _| h[4086..4096].copy_from_slice(b"SWAPSPACE2")),
                "swap",
            ),
            (
                Box::new(|h, _| {
                    h[510..512].copy_from_slice(&[0x55, 0xaa]);
                    h[446 + 4] = 0x83;
                }),
                "MBR partition table (1 partition entry",
            ),
            (
                Box::new(move |_, t| {
                    // 1.0: 8 KiB before the end, 4 KiB aligned.
                    let at = t.len() - 8192;
                    t[at..at + 4].copy_from_slice(&0xa92b_4efc_u32.to_le_bytes());
                }),
                "version 1.0",
            ),
        ];
        for (mark, expected) in cases {
            let mut head = blank(HEAD_BYTES);
            let mut tail = blank(TAIL_BYTES as usize);
            mark(&mut head, &mut tail);
            let found = foreign_signature(&head, &tail, size);
            assert!(
                found.as_deref().is_some_and(|f| f.contains(expected)),
                "{expected}: {found:?}"
            );
        }
        assert_eq!(
            foreign_signature(&blank(HEAD_BYTES), &blank(TAIL_BYTES as usize), size),
            None
        );
        // A boot sector's 0x55AA without partition entries is no partition table.
        let mut head = blank(HEAD_BYTES);
        head[510..512].copy_from_slice(&[0x55, 0xaa]);
        assert_eq!(foreign_signature(&head, &[], size), None);
    }

    #[test]
    fn a_short_device_is_read_without_panicking() {
        assert_eq!(foreign_signature(&[0u8; 100], &[0u8; 100], 100), None);
        assert_eq!(foreign_signature(&[], &[], 0), None);
    }

    #[test]
    fn device_numbers_and_escapes() {
        // makedev(259, 3) as glibc encodes it.
        let rdev = (259u64 << 8) | 3;
        assert_eq!(
            DevNum::of_rdev(rdev),
            DevNum {
                major: 259,
                minor: 3
            }
        );
        assert_eq!(unescape("/mnt/a\\040b"), "/mnt/a b");
        assert_eq!(unescape("/plain"), "/plain");
        assert_eq!(unescape("\\04"), "\\04");
    }
}
