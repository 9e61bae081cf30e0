//! Databases on raw block devices (`docs/devices.md`, "The layout on a device").
//!
//! A database on a device starts at byte 0 of the device, exactly as it would in a file: its two
//! header pages are the device's jetproof marker ([`crate::device`] recognises a device as ours by
//! the header's signature). The places where the rest of jetproof assumes a file are bridged
//! here, in one backend that wraps the job's I/O backend ([`RawBackend`]), so that the engine,
//! the instances and every procedure open a device as they open a file:
//!
//! * **Size.** A device has a fixed size (`BLKGETSIZE64`); the database uses a prefix of it. The
//!   file the engine sees ([`DeviceFile`]) has the database's size: its header's page count when
//!   it is opened, then whatever the engine grows it to; growing past the device's end is an
//!   error naming both sizes, as a full file system would be.
//! * **`.partial` then rename.** `init` builds a database under `<path>.partial` and renames it
//!   into place; on a device both names are the device, the rename does nothing, and removing
//!   either never removes the device node.
//! * **The flush map** (lost-write detection, `<database>.jpfm` beside a file) lives in the
//!   instance's log directory, on a file system: `<log_path>/<device name>.jpfm` (in
//!   `storage.data_dir` when the log is on a device too).
//! * **The owner lock** is an `O_EXCL` open of the device held for the command's life
//!   ([`hold_exclusive`]), which also keeps a mount or `mkfs` from taking the device after the
//!   safety checks; the log directory keeps its lock file.
//! * **The permission** (`storage.allow_devices`) reaches the I/O layer here: only the devices at
//!   the job's database paths, which passed [`crate::device::check_device`], are opened with
//!   `allow_device`.
//!
//! Logs on a device are [`crate::logregion`]'s (the flush map then goes to `storage.data_dir`,
//! [`flush_map_dir`]); a database sharing its device with its log starts at the layout's
//! database region ([`database_region`]), and every offset is moved by it.

use std::collections::HashMap;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use jetproof_io::{IoBackend, IoClass, IoError, IoFile, OpenOptions, ReadOp, WriteOp, WriteQueue};
use jetproof_job::Job;

pub use crate::device::held_here;
use crate::device::{DevNum, HELD, dev_num};

/// `BLKGETSIZE64`: `_IOR(0x12, 114, size_t)`, numbered for this architecture by libc's `_IOR`
/// (libc has the request's number for the block sizes, not for this one).
const BLKGETSIZE64: libc::Ioctl = libc::_IOR::<libc::size_t>(0x12, 114);

/// The size of the block device open as `file`, in bytes: `BLKGETSIZE64`, else its end.
pub fn device_bytes(file: &std::fs::File) -> Option<u64> {
    let mut size: u64 = 0;
    // SAFETY: BLKGETSIZE64 writes one u64 through the pointer.
    let rc = unsafe { libc::ioctl(file.as_raw_fd(), BLKGETSIZE64, &mut size) };
    if rc == 0 {
        return Some(size);
    }
    // SAFETY: lseek on a valid fd has no memory effects (positional I/O never uses the offset).
    let end = unsafe { libc::lseek(file.as_raw_fd(), 0, libc::SEEK_END) };
    u64::try_from(end).ok()
}

/// A device's logical (`BLKSSZGET`) and physical (`BLKPBSZGET`) block sizes.
pub fn block_sizes(file: &std::fs::File) -> (Option<u32>, Option<u32>) {
    let ask = |request: libc::Ioctl| {
        let mut size: libc::c_uint = 0;
        // SAFETY: both ioctls write one int through the pointer.
        let rc = unsafe { libc::ioctl(file.as_raw_fd(), request, &mut size) };
        (rc == 0 && size > 0).then_some(size)
    };
    (ask(libc::BLKSSZGET), ask(libc::BLKPBSZGET))
}

/// Does the device (or file) at `path` start with a jetproof database header (the marker)? On a
/// device shared with its log, the database region's start.
pub fn looks_like_database_at(path: &Path) -> bool {
    use std::io::{Read, Seek, SeekFrom};
    let base = database_region(path).map_or(0, |(offset, _)| offset);
    let mut head = vec![0u8; 4096];
    std::fs::File::open(path)
        .and_then(|mut f| {
            f.seek(SeekFrom::Start(base))?;
            f.read_exact(&mut head)
        })
        .is_ok_and(|()| crate::marks::looks_like_database(&head))
}

/// The database region (offset, length) of a device laid out to share a database and its log
/// (`crate::logregion`), if it is one.
pub fn database_region(path: &Path) -> Option<(u64, u64)> {
    let backend = jetproof_io::std_backend::StdBackend::new();
    crate::logregion::read_layout(backend.as_ref(), path)
        .ok()
        .filter(|layout| layout.database_offset != 0)
        .map(|layout| (layout.database_offset, layout.database_bytes))
}

/// A file seen from `base` on (a header read at a shared device's database region).
#[derive(Debug)]
struct Based {
    inner: Arc<dyn IoFile>,
    base: u64,
}

impl IoFile for Based {
    fn path(&self) -> &Path {
        self.inner.path()
    }
    fn read_at(&self, buf: &mut [u8], offset: u64, class: IoClass) -> Result<(), IoError> {
        self.inner.read_at(buf, self.base + offset, class)
    }
    fn write_at(&self, data: &[u8], offset: u64, class: IoClass) -> Result<(), IoError> {
        self.inner.write_at(data, self.base + offset, class)
    }
    fn sync_data(&self, class: IoClass) -> Result<(), IoError> {
        self.inner.sync_data(class)
    }
    fn size(&self) -> Result<u64, IoError> {
        Ok(self.inner.size()?.saturating_sub(self.base))
    }
    fn set_size(&self, _size: u64) -> Result<(), IoError> {
        Ok(())
    }
    fn logical_block_size(&self) -> usize {
        self.inner.logical_block_size()
    }
}

/// What jetproof knows of a device at a database path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Geometry {
    pub bytes: u64,
    pub logical_block: u32,
    pub physical_block: u32,
}

/// The size and block sizes of the device at `path` (opened read-only, not exclusively).
pub fn geometry(path: &Path) -> std::io::Result<Geometry> {
    let file = std::fs::File::open(path)?;
    let bytes = device_bytes(&file).ok_or_else(std::io::Error::last_os_error)?;
    let (logical, physical) = block_sizes(&file);
    let logical_block = logical.unwrap_or(512);
    Ok(Geometry {
        bytes,
        logical_block,
        physical_block: physical.unwrap_or(logical_block),
    })
}

/// An exclusive hold on a device: released (and forgotten by [`held_here`]) when dropped.
#[derive(Debug)]
pub struct ExclusiveHold {
    dev: DevNum,
    path: PathBuf,
    _file: std::fs::File,
}

impl ExclusiveHold {
    /// The device held.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for ExclusiveHold {
    fn drop(&mut self) {
        if let Ok(mut held) = HELD.lock()
            && let Some(at) = held.iter().position(|d| *d == self.dev)
        {
            held.remove(at);
        }
    }
}

/// Opens the device at `path` with `O_EXCL` and keeps it so: no mount, `mkfs`, MD/LVM assembly
/// or other jetproof can claim it while the hold lives (`EBUSY` when someone already does).
pub fn hold_exclusive(path: &Path) -> std::io::Result<ExclusiveHold> {
    let file = crate::device::open_exclusive(path)?;
    let dev = dev_num(path).ok_or_else(|| std::io::Error::other("not a block device"))?;
    if let Ok(mut held) = HELD.lock() {
        held.push(dev);
    }
    Ok(ExclusiveHold {
        dev,
        path: path.to_path_buf(),
        _file: file,
    })
}

/// The flush map of a database on the device at `device`, whose log directory is `log_path`:
/// `<log_path>/<device name>.jpfm` (a device node's directory, /dev, is no place for it).
pub fn flush_map_of(device: &Path, log_path: &Path) -> PathBuf {
    let name = device
        .file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_else(|| "device".to_string());
    log_path.join(format!("{name}.jpfm"))
}

/// One database on a device, and the names the rest of jetproof gives its parts.
#[derive(Debug, Clone)]
struct RawDb {
    device: PathBuf,
    partial: PathBuf,
    /// `<device>.jpfm` and `<device>.partial.jpfm`, as the engine names them ...
    map: PathBuf,
    partial_map: PathBuf,
    /// ... and where they really are.
    real_map: PathBuf,
    real_partial_map: PathBuf,
}

/// What a path names under [`RawBackend`].
enum Name<'a> {
    /// The device (or its `.partial` name, `partial` true).
    Device(&'a RawDb, bool),
    /// Anything else, at this real path.
    Path(PathBuf),
}

/// The job's I/O backend, with its devices' databases opened as files (module header).
#[derive(Debug)]
pub struct RawBackend {
    inner: Arc<dyn IoBackend>,
    dbs: Vec<RawDb>,
    /// Each device's database size as last set, so a reopen in the same command sees what the
    /// engine grew it to.
    sizes: Sizes,
}

/// Each device database's size as the engine last set it.
type Sizes = Arc<Mutex<HashMap<PathBuf, u64>>>;

/// The job's database paths that are block devices, each with the directory of its flush map
/// ([`flush_map_dir`]).
pub fn device_databases(job: &Job) -> Vec<(PathBuf, PathBuf)> {
    job.instances()
        .into_iter()
        .filter(|i| crate::marks::is_block_device(&i.database_path))
        .map(|i| (i.database_path.clone(), flush_map_dir(job, &i)))
        .collect()
}

/// Where the flush map of a database on a device is kept: its log directory, or, when the log
/// is on a device too (a log region has no room for a map that grows with the database), the
/// job's `storage.data_dir` on a file system.
pub fn flush_map_dir(job: &Job, instance: &jetproof_job::Instance) -> PathBuf {
    if crate::marks::is_block_device(&instance.log_path) {
        job.storage.data_dir.clone()
    } else {
        instance.log_path.clone()
    }
}

/// The real flush map of each device database a [`RawBackend`] of this process opens, so that
/// reports name the file (`checksum`).
static REAL_MAPS: Mutex<Vec<(PathBuf, PathBuf)>> = Mutex::new(Vec::new());

/// The real flush map of the database on `device`, as this process's [`RawBackend`] keeps it.
pub fn real_flush_map(device: &Path) -> Option<PathBuf> {
    REAL_MAPS.lock().ok().and_then(|maps| {
        maps.iter()
            .find(|(d, _)| d == device)
            .map(|(_, map)| map.clone())
    })
}

/// Wraps `inner` so that the job's device databases open as files; `inner` itself when the job
/// has none or does not allow devices.
pub fn wrap(job: &Job, inner: Arc<dyn IoBackend>) -> Arc<dyn IoBackend> {
    let devices = device_databases(job);
    if devices.is_empty() || !job.storage.allow_devices {
        return inner;
    }
    RawBackend::over(inner, devices)
}

impl RawBackend {
    /// `inner` with the databases at `devices` (each with its log directory) opened as files.
    pub fn over(inner: Arc<dyn IoBackend>, devices: Vec<(PathBuf, PathBuf)>) -> Arc<dyn IoBackend> {
        let dbs = devices
            .into_iter()
            .map(|(device, log_path)| {
                let partial = crate::marks::partial_path(&device);
                let real_map = flush_map_of(&device, &log_path);
                let real_partial_map = crate::marks::partial_path(&real_map);
                if let Ok(mut maps) = REAL_MAPS.lock() {
                    maps.retain(|(d, _)| *d != device);
                    maps.push((device.clone(), real_map.clone()));
                }
                RawDb {
                    map: jetproof_engine::flush_map_path(&device),
                    partial_map: jetproof_engine::flush_map_path(&partial),
                    device,
                    partial,
                    real_map,
                    real_partial_map,
                }
            })
            .collect();
        Arc::new(RawBackend {
            inner,
            dbs,
            sizes: Arc::new(Mutex::new(HashMap::new())),
        })
    }
}

impl RawBackend {
    fn name_of(&self, path: &Path) -> Name<'_> {
        for db in &self.dbs {
            if path == db.device {
                return Name::Device(db, false);
            }
            if path == db.partial {
                return Name::Device(db, true);
            }
            if path == db.map {
                return Name::Path(db.real_map.clone());
            }
            if path == db.partial_map {
                return Name::Path(db.real_partial_map.clone());
            }
        }
        Name::Path(path.to_path_buf())
    }

    fn open_device(&self, db: &RawDb, options: &OpenOptions) -> Result<Arc<dyn IoFile>, IoError> {
        let writes = options.write || options.create || options.create_new;
        let device_options = OpenOptions {
            create: false,
            create_new: false,
            no_follow: false,
            write: writes,
            allow_device: true,
            ..options.clone()
        };
        let file = self.inner.open(&db.device, &device_options)?;
        // BLKGETSIZE64 where the device is real; the I/O layer's size (its end) otherwise.
        let whole_device = match geometry(&db.device) {
            Ok(geometry) => geometry.bytes,
            Err(_) => file.size()?,
        };
        // A device shared with the log (`crate::logregion`): the database is its region.
        let (base, device_bytes) = match database_region(&db.device) {
            Some((offset, length)) => (offset, length.min(whole_device.saturating_sub(offset))),
            None => (0, whole_device),
        };
        // A database made anew (`create_new`, as `init` makes one under its `.partial` name).
        let fresh = options.create_new;
        let known = self.sizes.lock().ok().and_then(|mut sizes| {
            if fresh {
                sizes.remove(&db.device);
            }
            sizes.get(&db.device).copied()
        });
        // A database being made starts empty; an existing one has its header's size (or what
        // this command last grew it to).
        let logical = if fresh {
            0
        } else if let Some(size) = known {
            size
        } else {
            let at_base = Based {
                inner: file.clone(),
                base,
            };
            match jetproof_engine::DbHeader::read(&at_base) {
                Ok(header) => header
                    .page_count
                    .saturating_mul(u64::from(header.page_size))
                    .min(device_bytes),
                Err(_) => device_bytes,
            }
        };
        Ok(Arc::new(DeviceFile {
            inner: file,
            base,
            device: db.device.clone(),
            device_bytes,
            logical: AtomicU64::new(logical),
            sizes: self.sizes.clone(),
        }))
    }
}

/// A database on a device, as the engine sees it: a file of the database's size, which can grow
/// up to the device's end (module header).
#[derive(Debug)]
pub struct DeviceFile {
    inner: Arc<dyn IoFile>,
    /// Where the database starts on the device: 0, or the shared layout's database region.
    base: u64,
    device: PathBuf,
    device_bytes: u64,
    logical: AtomicU64,
    sizes: Sizes,
}

impl DeviceFile {
    /// A write ending at `end` grows the database as it grows a file (the engine's bulk loader
    /// writes past the end instead of sizing first); past the device's end it is refused.
    fn written_to(&self, end: u64) -> Result<(), IoError> {
        if end > self.logical.load(Ordering::Acquire) {
            self.set_size_at_least(end)?;
        }
        Ok(())
    }

    fn set_size_at_least(&self, size: u64) -> Result<(), IoError> {
        self.check_room(size)?;
        let before = self.logical.fetch_max(size, Ordering::AcqRel);
        if before < size
            && let Ok(mut sizes) = self.sizes.lock()
        {
            let entry = sizes.entry(self.device.clone()).or_insert(0);
            *entry = (*entry).max(size);
        }
        Ok(())
    }

    fn check_room(&self, size: u64) -> Result<(), IoError> {
        if size > self.device_bytes {
            return Err(IoError::Path {
                op: "grow the database on",
                path: self.device.clone(),
                source: std::io::Error::other(format!(
                    "the device holds {} bytes and the database needs {size}; use a larger device or a smaller storage.db_size",
                    self.device_bytes
                )),
            });
        }
        Ok(())
    }
}

impl IoFile for DeviceFile {
    fn path(&self) -> &Path {
        self.inner.path()
    }

    fn read_at(&self, buf: &mut [u8], offset: u64, class: IoClass) -> Result<(), IoError> {
        self.inner.read_at(buf, self.base + offset, class)
    }

    fn write_at(&self, data: &[u8], offset: u64, class: IoClass) -> Result<(), IoError> {
        self.written_to(offset + data.len() as u64)?;
        self.inner.write_at(data, self.base + offset, class)
    }

    fn sync_data(&self, class: IoClass) -> Result<(), IoError> {
        self.inner.sync_data(class)
    }

    fn size(&self) -> Result<u64, IoError> {
        Ok(self.logical.load(Ordering::Acquire))
    }

    fn set_size(&self, size: u64) -> Result<(), IoError> {
        self.check_room(size)?;
        self.logical.store(size, Ordering::Release);
        if let Ok(mut sizes) = self.sizes.lock() {
            sizes.insert(self.device.clone(), size);
        }
        Ok(())
    }

    fn logical_block_size(&self) -> usize {
        self.inner.logical_block_size()
    }

    fn read_batch(&self, ops: &mut [ReadOp<'_>], class: IoClass) -> Result<(), IoError> {
        if self.base == 0 {
            return self.inner.read_batch(ops, class);
        }
        let mut moved: Vec<ReadOp<'_>> = ops
            .iter_mut()
            .map(|op| ReadOp {
                offset: self.base + op.offset,
                buf: &mut *op.buf,
            })
            .collect();
        self.inner.read_batch(&mut moved, class)
    }

    fn write_batch(&self, ops: &[WriteOp<'_>], class: IoClass) -> Result<(), IoError> {
        if let Some(end) = ops.iter().map(|op| op.offset + op.data.len() as u64).max() {
            self.written_to(end)?;
        }
        if self.base == 0 {
            return self.inner.write_batch(ops, class);
        }
        let moved: Vec<WriteOp<'_>> = ops
            .iter()
            .map(|op| WriteOp {
                offset: self.base + op.offset,
                data: op.data,
            })
            .collect();
        self.inner.write_batch(&moved, class)
    }

    fn native_write_queue(
        &self,
        depth: usize,
        class: IoClass,
    ) -> Option<Result<Box<dyn WriteQueue>, IoError>> {
        // A queue's offsets are the device's: only where the database starts at byte 0 (a
        // shared device's database uses writer threads over `write_at`).
        if self.base != 0 {
            return None;
        }
        self.inner.native_write_queue(depth, class)
    }
}

impl IoBackend for RawBackend {
    fn name(&self) -> &'static str {
        self.inner.name()
    }

    fn open(&self, path: &Path, options: &OpenOptions) -> Result<Arc<dyn IoFile>, IoError> {
        match self.name_of(path) {
            Name::Device(db, _) => self.open_device(db, options),
            Name::Path(real) => self.inner.open(&real, options),
        }
    }

    fn exists(&self, path: &Path) -> bool {
        match self.name_of(path) {
            // The database exists when the device carries the marker; the `.partial` name never
            // does (an interrupted init leaves a dirty header, `docs/devices.md`).
            Name::Device(db, partial) => !partial && looks_like_database_at(&db.device),
            Name::Path(real) => self.inner.exists(&real),
        }
    }

    fn remove(&self, path: &Path) -> Result<(), IoError> {
        match self.name_of(path) {
            // Never the device node: the database is overwritten by the next init instead.
            Name::Device(..) => Ok(()),
            Name::Path(real) => self.inner.remove(&real),
        }
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<(), IoError> {
        match (self.name_of(from), self.name_of(to)) {
            (Name::Device(..), _) | (_, Name::Device(..)) => Ok(()),
            (Name::Path(from), Name::Path(to)) => self.inner.rename(&from, &to),
        }
    }

    fn rename_new(&self, from: &Path, to: &Path) -> Result<(), IoError> {
        match (self.name_of(from), self.name_of(to)) {
            (Name::Device(..), _) | (_, Name::Device(..)) => Ok(()),
            (Name::Path(from), Name::Path(to)) => self.inner.rename_new(&from, &to),
        }
    }

    fn sync_dir(&self, dir: &Path) -> Result<(), IoError> {
        self.inner.sync_dir(dir)
    }

    fn create_dir_all(&self, dir: &Path) -> Result<(), IoError> {
        self.inner.create_dir_all(dir)
    }
}

/// Does the database header on the device at `path` say dirty?
fn header_is_dirty(path: &Path) -> bool {
    let backend = jetproof_io::std_backend::StdBackend::new();
    let base = database_region(path).map_or(0, |(offset, _)| offset);
    backend
        .open(
            path,
            &OpenOptions::read_only().buffered().with_allow_device(true),
        )
        .ok()
        .and_then(|file| jetproof_engine::DbHeader::read(&Based { inner: file, base }).ok())
        .is_some_and(|header| header.state == jetproof_engine::DbState::Dirty)
}

/// `init`'s checks of a database path that is a block device, before anything is written: the
/// safety checks of [`crate::device`], then what the database needs of the device (room for
/// `storage.db_size`, pages whole blocks for direct I/O), an earlier database of jetproof's there
/// replaced only with `--recreate`, and the flush map's place in the log directory free or
/// jetproof's.
pub fn check_for_init(
    job: &Job,
    permissions: &crate::marks::Permissions,
    instance: &jetproof_job::Instance,
) -> Result<(), crate::BadInput> {
    use crate::bad;
    let path = &instance.database_path;
    let field = format!("database path of {}", instance.name);
    let found = crate::device::check_device(
        path,
        &field,
        crate::device::DeviceUse::Init,
        crate::device::rules(job, &permissions.wipe_devices),
    )?;
    let shown = path.display();
    let geometry =
        geometry(path).map_err(|e| bad(&field, format!("{shown} cannot be sized: {e}")))?;
    let page = job.storage.page_size.bytes();
    if !page.is_multiple_of(u64::from(geometry.logical_block)) {
        return Err(bad(
            &field,
            format!(
                "{shown} has {}-byte logical blocks and storage.page_size is {page} bytes; a page must be whole blocks. Choose a page size that is a multiple of {}",
                geometry.logical_block, geometry.logical_block
            ),
        ));
    }
    if job.storage.direct_io && !page.is_multiple_of(u64::from(geometry.physical_block)) {
        return Err(bad(
            &field,
            format!(
                "{shown} has {}-byte physical blocks and storage.page_size is {page} bytes: every page write would be a read-modify-write of a block, which no real database does. Choose a page size that is a multiple of {}",
                geometry.physical_block, geometry.physical_block
            ),
        ));
    }
    // The fill stops once the pages in use reach the target, and the file then ends at most one
    // growth step past it (`crate::database::extent_bytes`): the device needs room for that step too, or the fill
    // fails after writing most of the device (a 32 MiB database needed 33,685,504 bytes).
    let target = job.db_size().bytes();
    let step = crate::database::extent_bytes(target, page);
    let needed = target.saturating_add(step);
    if needed > geometry.bytes {
        return Err(bad(
            "storage.db_size",
            format!(
                "the database of {} needs up to {needed} bytes ({target} of storage.db_size and the growth step of {step} its fill may end past it) and {shown} holds {}; make the database smaller (storage.db_size at most {}) or use a larger device",
                instance.name,
                geometry.bytes,
                geometry.bytes.saturating_sub(step) / page * page
            ),
        ));
    }
    // Ours when a database header is there (at the database region of a shared device).
    if found.ours && looks_like_database_at(path) && !permissions.recreate {
        // An init interrupted on a device leaves its dirty header (there is no `.partial` name
        // to tell it from a database a run left dirty): say so.
        let why = if header_is_dirty(path) {
            " (its header says it was not shut down cleanly: a run that stopped, which `jetproof recover` replays, or an init that was interrupted, which only --recreate makes anew)"
        } else {
            ""
        };
        return Err(bad(
            "--recreate",
            format!(
                "{shown} already holds a jetproof database{why}; run the tests on it, or pass --recreate to replace it"
            ),
        ));
    }
    let map = flush_map_of(path, &flush_map_dir(job, instance));
    for map in [map.clone(), crate::marks::partial_path(&map)] {
        if map.symlink_metadata().is_ok() && !crate::marks::flush_map_is_ours(&map) {
            return Err(bad(
                &field,
                format!(
                    "{} is not a flush map jetproof made (a link, or no jetproof signature); it is where the flush map of the database on {shown} is kept, and jetproof never replaces it. Move it away",
                    map.display()
                ),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use jetproof_engine::{Database, DatabaseOptions};

    /// libc's `_IOR` gives the number `<linux/fs.h>` has on the generic-ioctl 64-bit
    /// architectures.
    #[cfg(all(
        target_env = "gnu",
        any(
            target_arch = "x86_64",
            target_arch = "aarch64",
            target_arch = "riscv64"
        )
    ))]
    #[test]
    fn blkgetsize64_has_the_kernels_number() {
        assert_eq!(BLKGETSIZE64, 0x8008_1272);
    }
    use jetproof_io::mem::MemBackend;

    const DEVICE: &str = "/dev/fake0";
    const DEVICE_BYTES: u64 = 16 << 20;

    /// A mem backend holding a 16 MiB "device" (a file of that size), and the raw backend over it.
    fn backends() -> (Arc<dyn IoBackend>, Arc<dyn IoBackend>) {
        let mem: Arc<dyn IoBackend> = MemBackend::new();
        mem.create_dir_all(Path::new("/dev")).expect("dir");
        mem.create_dir_all(Path::new("/logs")).expect("dir");
        let device = mem
            .open(Path::new(DEVICE), &OpenOptions::create().buffered())
            .expect("device");
        device.set_size(DEVICE_BYTES).expect("size");
        let raw = RawBackend::over(
            mem.clone(),
            vec![(PathBuf::from(DEVICE), PathBuf::from("/logs"))],
        );
        (mem, raw)
    }

    fn options() -> DatabaseOptions {
        DatabaseOptions {
            page_size: 8192,
            initial_size_bytes: 1 << 20,
            direct_io: false,
            ..DatabaseOptions::default()
        }
    }

    #[test]
    fn a_database_made_under_its_partial_name_lands_on_the_device_with_its_map_in_the_log_dir() {
        let (mem, raw) = backends();
        let device = Path::new(DEVICE);
        let partial = crate::marks::partial_path(device);
        assert!(!raw.exists(&partial), "the partial name never exists");
        let db = Database::create(raw.as_ref(), &partial, options()).expect("create");
        db.close().expect("close");
        // The flush map went to the log directory, under the device's name; nothing beside it.
        assert!(mem.exists(Path::new("/logs/fake0.jpfm.partial")));
        raw.rename_new(
            &jetproof_engine::flush_map_path(&partial),
            &jetproof_engine::flush_map_path(device),
        )
        .expect("map into place");
        raw.rename_new(&partial, device).expect("a no-op");
        assert!(mem.exists(Path::new("/logs/fake0.jpfm")));
        assert!(!mem.exists(Path::new("/dev/fake0.jpfm")));
        assert!(!mem.exists(Path::new("/dev/fake0.partial")));
        // The device carries the database; removing it never removes the node.
        raw.remove(device).expect("a no-op");
        assert!(mem.exists(device));
        // Reopened, the database has its header's size, not the device's.
        let file = raw
            .open(device, &OpenOptions::read_only().buffered())
            .expect("open");
        let size = file.size().expect("size");
        assert!((1 << 20..DEVICE_BYTES).contains(&size), "{size}");
        let db = Database::open(raw.as_ref(), device, options()).expect("reopen");
        db.close().expect("close");
    }

    #[test]
    fn a_database_cannot_grow_past_its_device() {
        let (_mem, raw) = backends();
        let file = raw
            .open(Path::new(DEVICE), &OpenOptions::create_new().buffered())
            .expect("open");
        assert_eq!(file.size().expect("size"), 0, "a new database starts empty");
        file.set_size(DEVICE_BYTES).expect("the whole device");
        let error = file
            .set_size(DEVICE_BYTES + 8192)
            .expect_err("past the end");
        assert!(error.to_string().contains("the device holds"), "{error}");
        // A write past the database's size grows it, as a file grows.
        file.set_size(8192).expect("shrink");
        file.write_at(&[1u8; 8192], 65536, IoClass::DbWrite)
            .expect("write");
        assert_eq!(file.size().expect("size"), 65536 + 8192);
        let error = file
            .write_at(&[1u8; 8192], DEVICE_BYTES, IoClass::DbWrite)
            .expect_err("past the end");
        assert!(error.to_string().contains("the device holds"), "{error}");
    }
}
