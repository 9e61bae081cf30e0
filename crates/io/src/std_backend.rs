//! The portable backend: positional reads and writes (pread/pwrite) from any number of threads,
//! with O_DIRECT by default.
//!
//! What opening checks, before any I/O, so that a bad target is refused with a clear message
//! (`docs/refusals.md`) rather than measured wrongly:
//! * a raw block device is opened only when [`OpenOptions::allow_device`] is set;
//! * direct I/O must really bypass the page cache: a file system that rejects O_DIRECT (EINVAL)
//!   *or* accepts it while keeping data in memory (tmpfs and ramfs, which accept O_DIRECT since
//!   Linux 6.6) is [`IoError::DirectIoUnsupported`];
//! * the alignment direct I/O needs is asked of the kernel (statx `STATX_DIOALIGN`, Linux 6.1+;
//!   `BLKSSZGET` for devices) instead of assumed, and every I/O is checked against it, so an
//!   unaligned request is a typed [`IoError::Unaligned`] and not a kernel EINVAL.
//!
//! After a failed write or sync the file is poisoned: it refuses further work
//! ([`IoError::Poisoned`]), because after a failed fdatasync the kernel may already have dropped
//! the dirty pages, and carrying on would report a durability that does not exist.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::{IoBackend, IoClass, IoError, IoFile, OpenOptions};

/// Used when the kernel cannot tell (no STATX_DIOALIGN): 4 KiB satisfies 512-byte and 4 KiB
/// sector devices alike, and [`crate::AlignedBuf`] is aligned to it.
pub const FALLBACK_DIRECT_ALIGNMENT: usize = 4096;

#[derive(Debug, Default)]
pub struct StdBackend;

impl StdBackend {
    pub fn new() -> Arc<StdBackend> {
        Arc::new(StdBackend)
    }

    /// Opens with the concrete type, for callers that want [`StdFile`]'s extras.
    pub fn open_std(&self, path: &Path, options: &OpenOptions) -> Result<Arc<StdFile>, IoError> {
        open_file(path, options).map(Arc::new)
    }
}

/// An open file or block device of the portable backend.
#[derive(Debug)]
pub struct StdFile {
    pub(crate) path: PathBuf,
    pub(crate) file: File,
    pub(crate) block_size: usize,
    pub(crate) is_device: bool,
    pub(crate) direct: bool,
    pub(crate) poisoned: AtomicBool,
}

pub(crate) fn path_error(op: &'static str, path: &Path, source: std::io::Error) -> IoError {
    IoError::Path {
        op,
        path: path.to_path_buf(),
        source,
    }
}

/// Is the file system holding `file` one that keeps "direct" I/O in memory?
// f_type's width differs between architectures, hence the casts.
#[allow(clippy::unnecessary_cast)]
fn is_memory_file_system(file: &File) -> bool {
    // SAFETY: statfs is plain data; fstatfs fills it or fails.
    let mut stat: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: the fd is valid for the life of `file`, `stat` is a valid out pointer.
    if unsafe { libc::fstatfs(file.as_raw_fd(), &mut stat) } != 0 {
        return false;
    }
    const RAMFS_MAGIC: i64 = 0x8584_58f6;
    let magic = stat.f_type as i64;
    magic == libc::TMPFS_MAGIC as i64 || magic == RAMFS_MAGIC
}

/// The direct-I/O alignment the kernel reports for `file`, if it reports one.
fn statx_dio_alignment(file: &File) -> Option<usize> {
    // SAFETY: statx is plain data; the kernel fills it or fails.
    let mut stx: libc::statx = unsafe { std::mem::zeroed() };
    let empty = c"";
    // SAFETY: valid fd, NUL-terminated empty path with AT_EMPTY_PATH, valid out pointer.
    let rc = unsafe {
        libc::statx(
            file.as_raw_fd(),
            empty.as_ptr(),
            libc::AT_EMPTY_PATH,
            libc::STATX_DIOALIGN,
            &mut stx,
        )
    };
    if rc != 0 || stx.stx_mask & libc::STATX_DIOALIGN == 0 {
        return None;
    }
    let offset = stx.stx_dio_offset_align as usize;
    let memory = stx.stx_dio_mem_align as usize;
    if offset == 0 {
        // The kernel says this file does not support direct I/O at all.
        return Some(0);
    }
    Some(offset.max(memory))
}

/// The logical sector size of a block device.
fn device_sector_size(file: &File) -> Option<usize> {
    let mut size: libc::c_int = 0;
    // SAFETY: BLKSSZGET writes one int through the pointer.
    let rc = unsafe { libc::ioctl(file.as_raw_fd(), libc::BLKSSZGET, &mut size) };
    (rc == 0 && size > 0).then_some(size as usize)
}

/// The size in bytes of a block device (its metadata says 0).
pub(crate) fn device_size(file: &File) -> Option<u64> {
    // The end of a device is its size; positional I/O never uses the file offset this moves.
    // SAFETY: lseek on a valid fd has no memory effects.
    let end = unsafe { libc::lseek(file.as_raw_fd(), 0, libc::SEEK_END) };
    u64::try_from(end).ok()
}

/// Opens `path` as [`OpenOptions`] say, with every check of the module header.
pub(crate) fn open_file(path: &Path, options: &OpenOptions) -> Result<StdFile, IoError> {
    // Refuse a device before opening it for writing: opening alone is harmless, but the check
    // belongs before anything that could lead to I/O.
    if let Ok(meta) = std::fs::metadata(path)
        && meta.file_type().is_block_device()
        && !options.allow_device
    {
        return Err(IoError::DeviceNotAllowed {
            path: path.to_path_buf(),
        });
    }
    if options.no_follow {
        refuse_non_file(path, options)?;
    }
    // A refusal leaves nothing behind: a file this call created is removed again. (Whether
    // something existed is asked without following a link, so a link is never removed here.)
    let existed = path.symlink_metadata().is_ok();
    open_checked(path, options).inspect_err(|_| {
        if !existed && (options.create || options.create_new) {
            let _ = std::fs::remove_file(path);
        }
    })
}

/// What a non-file entry is, for [`IoError::NotARegularFile`].
pub(crate) fn describe_file_type(file_type: std::fs::FileType) -> &'static str {
    if file_type.is_symlink() {
        "a symbolic link"
    } else if file_type.is_dir() {
        "a directory"
    } else if file_type.is_fifo() {
        "a FIFO"
    } else if file_type.is_socket() {
        "a socket"
    } else if file_type.is_char_device() {
        "a character device"
    } else if file_type.is_block_device() {
        "a block device"
    } else {
        "not a regular file"
    }
}

/// For [`OpenOptions::no_follow`]: refuses a link, and anything but a regular file (or an
/// allowed device), before opening it; opening a FIFO would block, and a link would lead
/// elsewhere. O_NOFOLLOW then closes the gap between this look and the open.
fn refuse_non_file(path: &Path, options: &OpenOptions) -> Result<(), IoError> {
    let Ok(meta) = path.symlink_metadata() else {
        return Ok(());
    };
    let file_type = meta.file_type();
    if file_type.is_file() || (file_type.is_block_device() && options.allow_device) {
        return Ok(());
    }
    Err(IoError::NotARegularFile {
        path: path.to_path_buf(),
        what: describe_file_type(file_type),
    })
}

/// [`open_file`] without the clean-up of a file it created before refusing it.
fn open_checked(path: &Path, options: &OpenOptions) -> Result<StdFile, IoError> {
    let mut open = std::fs::OpenOptions::new();
    open.read(true).write(options.write || options.create_new);
    if options.create_new {
        open.create_new(true);
    } else if options.create {
        open.create(true);
    }
    let mut flags = 0;
    if options.no_follow || options.create_new {
        flags |= libc::O_NOFOLLOW;
    }
    if options.direct {
        flags |= libc::O_DIRECT;
    }
    if options.dsync {
        // Write-through: each write is durable when it returns (io_uring writes on this
        // descriptor too).
        flags |= libc::O_DSYNC;
    }
    if flags != 0 {
        open.custom_flags(flags);
    }
    let file = match open.open(path) {
        Ok(file) => file,
        Err(error) if options.direct && error.raw_os_error() == Some(libc::EINVAL) => {
            return Err(IoError::DirectIoUnsupported {
                path: path.to_path_buf(),
            });
        }
        Err(error) if error.raw_os_error() == Some(libc::ELOOP) => {
            return Err(IoError::NotARegularFile {
                path: path.to_path_buf(),
                what: "a symbolic link",
            });
        }
        Err(error) => return Err(path_error("open", path, error)),
    };
    let meta = file.metadata().map_err(|e| path_error("stat", path, e))?;
    let is_device = meta.file_type().is_block_device();
    if is_device && !options.allow_device {
        return Err(IoError::DeviceNotAllowed {
            path: path.to_path_buf(),
        });
    }
    let block_size = if !options.direct {
        1
    } else if is_device {
        // The device node lives on devtmpfs, so neither the file-system type nor (before Linux
        // 6.11) statx speaks for the device itself: ask the device.
        let reported = statx_dio_alignment(&file).filter(|&a| a > 0);
        device_sector_size(&file)
            .into_iter()
            .chain(reported)
            .max()
            .unwrap_or(FALLBACK_DIRECT_ALIGNMENT)
    } else {
        if is_memory_file_system(&file) {
            return Err(IoError::DirectIoUnsupported {
                path: path.to_path_buf(),
            });
        }
        match statx_dio_alignment(&file) {
            Some(0) => {
                return Err(IoError::DirectIoUnsupported {
                    path: path.to_path_buf(),
                });
            }
            Some(alignment) => alignment,
            None => FALLBACK_DIRECT_ALIGNMENT,
        }
    };
    Ok(StdFile {
        path: path.to_path_buf(),
        file,
        block_size,
        is_device,
        direct: options.direct,
        poisoned: AtomicBool::new(false),
    })
}

impl IoBackend for StdBackend {
    fn name(&self) -> &'static str {
        "std"
    }

    fn open(&self, path: &Path, options: &OpenOptions) -> Result<Arc<dyn IoFile>, IoError> {
        Ok(Arc::new(open_file(path, options)?))
    }

    fn exists(&self, path: &Path) -> bool {
        path.symlink_metadata().is_ok()
    }

    fn remove(&self, path: &Path) -> Result<(), IoError> {
        std::fs::remove_file(path).map_err(|e| path_error("remove", path, e))
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<(), IoError> {
        std::fs::rename(from, to).map_err(|e| path_error("rename", from, e))
    }

    fn rename_new(&self, from: &Path, to: &Path) -> Result<(), IoError> {
        rename_no_replace(from, to)
    }

    fn sync_dir(&self, dir: &Path) -> Result<(), IoError> {
        let handle = File::open(dir).map_err(|e| path_error("open directory", dir, e))?;
        handle
            .sync_all()
            .map_err(|e| path_error("sync directory", dir, e))
    }

    fn create_dir_all(&self, dir: &Path) -> Result<(), IoError> {
        std::fs::create_dir_all(dir).map_err(|e| path_error("create directory", dir, e))
    }
}

/// Renames `from` to `to` unless something exists at `to`, atomically: renameat2 with
/// RENAME_NOREPLACE (Linux 3.15+, ext4, XFS, btrfs, tmpfs). File systems without it (NFS, some
/// FUSE ones) answer EINVAL: there a hard link, which also refuses an existing name, then the
/// removal of the old name do the same, the file briefly having both names.
pub(crate) fn rename_no_replace(from: &Path, to: &Path) -> Result<(), IoError> {
    use std::os::unix::ffi::OsStrExt;
    let c_path = |path: &Path| {
        std::ffi::CString::new(path.as_os_str().as_bytes())
            .map_err(|e| path_error("rename", path, std::io::Error::other(e)))
    };
    let (c_from, c_to) = (c_path(from)?, c_path(to)?);
    // SAFETY: both paths are NUL-terminated and live across the call; AT_FDCWD resolves
    // relative paths as rename(2) does.
    let rc = unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            c_from.as_ptr(),
            libc::AT_FDCWD,
            c_to.as_ptr(),
            libc::RENAME_NOREPLACE,
        )
    };
    if rc == 0 {
        return Ok(());
    }
    let error = std::io::Error::last_os_error();
    match error.raw_os_error() {
        Some(libc::EINVAL) | Some(libc::ENOSYS) | Some(libc::EOPNOTSUPP) => {
            std::fs::hard_link(from, to).map_err(|e| path_error("rename onto", to, e))?;
            std::fs::remove_file(from).map_err(|e| path_error("remove", from, e))
        }
        _ => Err(path_error("rename onto", to, error)),
    }
}

impl StdFile {
    /// Is this a raw block device?
    pub fn is_device(&self) -> bool {
        self.is_device
    }

    /// Was it opened with O_DIRECT?
    pub fn is_direct(&self) -> bool {
        self.direct
    }

    pub(crate) fn raw_fd(&self) -> i32 {
        self.file.as_raw_fd()
    }

    pub(crate) fn check_aligned(
        &self,
        offset: u64,
        len: usize,
        ptr: *const u8,
    ) -> Result<(), IoError> {
        let block = self.block_size;
        if block > 1
            && (!offset.is_multiple_of(block as u64)
                || !len.is_multiple_of(block)
                || !(ptr as usize).is_multiple_of(block))
        {
            return Err(IoError::Unaligned {
                path: self.path.clone(),
                offset,
                len,
                block_size: block,
            });
        }
        Ok(())
    }

    pub(crate) fn check_poisoned(&self) -> Result<(), IoError> {
        if self.poisoned.load(Ordering::Acquire) {
            return Err(IoError::Poisoned {
                path: self.path.clone(),
            });
        }
        Ok(())
    }

    pub(crate) fn poison(&self) {
        self.poisoned.store(true, Ordering::Release);
    }

    pub(crate) fn os_error(
        &self,
        op: &'static str,
        offset: u64,
        len: usize,
        source: std::io::Error,
    ) -> IoError {
        IoError::Os {
            op,
            path: self.path.clone(),
            offset,
            len,
            source,
        }
    }

    /// pread until `buf` is full; end of file is [`IoError::ShortRead`].
    pub(crate) fn pread_all(
        &self,
        buf: &mut [u8],
        offset: u64,
        from: usize,
    ) -> Result<(), IoError> {
        let mut done = from;
        while done < buf.len() {
            match self.file.read_at(&mut buf[done..], offset + done as u64) {
                Ok(0) => {
                    return Err(IoError::ShortRead {
                        path: self.path.clone(),
                        offset,
                        wanted: buf.len(),
                        got: done,
                    });
                }
                Ok(n) => done += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(self.os_error("read", offset, buf.len(), e)),
            }
        }
        Ok(())
    }
}

impl IoFile for StdFile {
    fn path(&self) -> &Path {
        &self.path
    }

    fn read_at(&self, buf: &mut [u8], offset: u64, _class: IoClass) -> Result<(), IoError> {
        self.check_poisoned()?;
        self.check_aligned(offset, buf.len(), buf.as_ptr())?;
        self.pread_all(buf, offset, 0)
    }

    fn write_at(&self, data: &[u8], offset: u64, _class: IoClass) -> Result<(), IoError> {
        self.check_poisoned()?;
        self.check_aligned(offset, data.len(), data.as_ptr())?;
        self.file.write_all_at(data, offset).map_err(|e| {
            self.poison();
            self.os_error("write", offset, data.len(), e)
        })
    }

    fn sync_data(&self, _class: IoClass) -> Result<(), IoError> {
        self.check_poisoned()?;
        self.file.sync_data().map_err(|e| {
            self.poison();
            self.os_error("fdatasync", 0, 0, e)
        })
    }

    fn size(&self) -> Result<u64, IoError> {
        if self.is_device {
            return device_size(&self.file).ok_or_else(|| {
                path_error(
                    "size of device",
                    &self.path,
                    std::io::Error::last_os_error(),
                )
            });
        }
        self.file
            .metadata()
            .map(|m| m.len())
            .map_err(|e| path_error("stat", &self.path, e))
    }

    fn set_size(&self, size: u64) -> Result<(), IoError> {
        if self.is_device {
            // A device cannot grow; asking for no more than it has is fine.
            let have = self.size()?;
            if size <= have {
                return Ok(());
            }
            return Err(path_error(
                "grow device",
                &self.path,
                std::io::Error::other(format!(
                    "the device holds {have} bytes, {size} were asked for"
                )),
            ));
        }
        self.file
            .set_len(size)
            .map_err(|e| path_error("set length of", &self.path, e))
    }

    fn logical_block_size(&self) -> usize {
        self.block_size
    }
}
