//! jetproof's I/O layer: the only code that touches files.
//!
//! Everything above this crate (the engine, the log, the test procedures) reads and writes through
//! the [`IoFile`] trait, obtained from an [`IoBackend`]. That keeps three promises:
//!
//! * every I/O carries an [`IoClass`], so its latency lands in the right histogram
//!   (see [`meter`]);
//! * the backend can be swapped: portable positional I/O ([`std_backend`]), an in-memory one for
//!   fast tests ([`mem`]), io_uring, and a fault-injecting one for crash tests;
//! * buffers handed to direct I/O are aligned ([`AlignedBuf`]).
//!
//! The trait is synchronous: the engine's sessions are threads, like ESE's. The cache's
//! write-back keeps several writes in flight through a [`WriteQueue`] ([`writeq`]): the
//! backend's own (io_uring, fault) or a pool of writer threads.

pub mod buf;
pub mod bytes;
pub mod class;
pub mod clock;
pub mod crc;
pub mod error;
pub mod fault;
pub mod fixed;
pub mod hist;
pub mod input;
pub mod limits;
pub mod mem;
pub mod meter;
pub mod probe;
pub mod sample;
pub mod std_backend;
pub mod uring;
pub mod writeq;

use std::fmt::Debug;
use std::path::Path;
use std::sync::Arc;

pub use buf::{AlignedBuf, AlignedSlab, AllocError, SlabSlot};
pub use class::IoClass;
pub use error::IoError;
pub use hist::{ClassSummary, LatencyHistogram};
pub use meter::{ClassSnapshot, InstanceSnapshot, InstanceStats, MeteredFile};
pub use writeq::{WriteCompletion, WriteQueue, WriteRequest, open_write_queue};

/// How a file is opened.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OpenOptions {
    /// Create the file if it does not exist (never truncates an existing one).
    pub create: bool,
    /// Create the file and fail if anything already exists at the path (O_CREAT|O_EXCL, which
    /// also refuses a symbolic link, dangling or not): for files jetproof makes, so that one
    /// it did not make is never reused or overwritten. Implies `create`.
    pub create_new: bool,
    /// Refuse a symbolic link at the path (O_NOFOLLOW) and anything that is not a regular file
    /// or an allowed device: for the log's files, which jetproof alone makes, so that a link
    /// planted there never leads a write to a file jetproof did not make.
    pub no_follow: bool,
    /// Open for writing as well as reading.
    pub write: bool,
    /// Bypass the host's page cache (O_DIRECT). Buffers, offsets and lengths must then be
    /// multiples of [`IoFile::logical_block_size`].
    pub direct: bool,
    /// Allow a raw block device as the target. Off by default: jetproof never writes to a device
    /// unless the user said so (`docs/refusals.md`: job key `storage.allow_devices = true`, or
    /// `probe --allow-device`).
    pub allow_device: bool,
    /// Write-through (O_DSYNC): every write returns only once its data is on stable storage, so
    /// its latency includes durability and no separate `sync_data` is needed for it. What ESE
    /// does for log files (they are opened write-through), so that a log write's measured
    /// latency is Jetstress's "I/O Log Writes Average Latency".
    pub dsync: bool,
}

impl OpenOptions {
    pub fn read_only() -> Self {
        OpenOptions {
            create: false,
            write: false,
            direct: true,
            allow_device: false,
            dsync: false,
            create_new: false,
            no_follow: false,
        }
    }
    pub fn read_write() -> Self {
        OpenOptions {
            create: false,
            write: true,
            direct: true,
            allow_device: false,
            dsync: false,
            create_new: false,
            no_follow: false,
        }
    }
    pub fn create() -> Self {
        OpenOptions {
            create: true,
            write: true,
            direct: true,
            allow_device: false,
            dsync: false,
            create_new: false,
            no_follow: false,
        }
    }
    pub fn buffered(mut self) -> Self {
        self.direct = false;
        self
    }
    pub fn with_direct(mut self, direct: bool) -> Self {
        self.direct = direct;
        self
    }
    /// See [`OpenOptions::allow_device`].
    pub fn with_allow_device(mut self, allow: bool) -> Self {
        self.allow_device = allow;
        self
    }
    /// See [`OpenOptions::dsync`].
    pub fn with_dsync(mut self, dsync: bool) -> Self {
        self.dsync = dsync;
        self
    }
    /// A new file that must not exist yet ([`OpenOptions::create_new`]), never through a link.
    pub fn create_new() -> Self {
        OpenOptions {
            create_new: true,
            no_follow: true,
            ..OpenOptions::create()
        }
    }
    /// See [`OpenOptions::no_follow`].
    pub fn no_follow(mut self) -> Self {
        self.no_follow = true;
        self
    }
}

/// One write of a batch.
#[derive(Debug)]
pub struct WriteOp<'a> {
    pub offset: u64,
    pub data: &'a [u8],
}

/// One read of a batch.
#[derive(Debug)]
pub struct ReadOp<'a> {
    pub offset: u64,
    pub buf: &'a mut [u8],
}

/// An open file (or block device). Shared between threads; all methods take `&self`.
///
/// Reads and writes are positional and complete: a read that finds fewer bytes than asked
/// (end of file) is [`IoError::ShortRead`], never a silently shorter buffer.
pub trait IoFile: Send + Sync + Debug {
    /// The path the file was opened with, for error messages.
    fn path(&self) -> &Path;

    /// Reads exactly `buf.len()` bytes at `offset`.
    fn read_at(&self, buf: &mut [u8], offset: u64, class: IoClass) -> Result<(), IoError>;

    /// Writes all of `data` at `offset`.
    fn write_at(&self, data: &[u8], offset: u64, class: IoClass) -> Result<(), IoError>;

    /// Makes every completed write durable (fdatasync). The class says on whose behalf, so the
    /// cost of durability is measured with the writes it protects.
    fn sync_data(&self, class: IoClass) -> Result<(), IoError>;

    /// Current size in bytes.
    fn size(&self) -> Result<u64, IoError>;

    /// Grows (or shrinks) the file to `size` bytes. New bytes read as zero.
    fn set_size(&self, size: u64) -> Result<(), IoError>;

    /// The alignment that buffers, offsets and lengths must respect (1 for buffered I/O).
    fn logical_block_size(&self) -> usize;

    /// Several reads at once. Backends that can queue them (io_uring) overlap them; the default
    /// issues them one after the other. Returns the first error.
    fn read_batch(&self, ops: &mut [ReadOp<'_>], class: IoClass) -> Result<(), IoError> {
        for op in ops.iter_mut() {
            self.read_at(op.buf, op.offset, class)?;
        }
        Ok(())
    }

    /// Several writes at once; see [`IoFile::read_batch`].
    fn write_batch(&self, ops: &[WriteOp<'_>], class: IoClass) -> Result<(), IoError> {
        for op in ops {
            self.write_at(op.data, op.offset, class)?;
        }
        Ok(())
    }

    /// The backend's own asynchronous write queue of `depth` writes in flight, if it has one
    /// (io_uring, the fault backend); `None` lets [`open_write_queue`] use writer threads.
    fn native_write_queue(
        &self,
        _depth: usize,
        _class: IoClass,
    ) -> Option<Result<Box<dyn WriteQueue>, IoError>> {
        None
    }
}

/// A way of opening files. Also covers the few namespace operations the engine needs, so that an
/// in-memory or fault-injecting backend can simulate a whole directory.
pub trait IoBackend: Send + Sync + Debug {
    /// A short name for reports ("std", "io_uring", "mem", "fault").
    fn name(&self) -> &'static str;

    fn open(&self, path: &Path, options: &OpenOptions) -> Result<Arc<dyn IoFile>, IoError>;

    /// Is there anything at `path`? A symbolic link counts, dangling or not (it is never
    /// followed), so a name that is taken is never mistaken for a free one.
    fn exists(&self, path: &Path) -> bool;

    /// Removes the directory entry at `path` (a link itself, never its target).
    fn remove(&self, path: &Path) -> Result<(), IoError>;

    /// Atomically replaces `to` with `from`.
    fn rename(&self, from: &Path, to: &Path) -> Result<(), IoError>;

    /// Renames `from` to `to` only if nothing exists at `to`: for installing a file jetproof
    /// made under a name where a file it did not make may have appeared. Fails with
    /// [`std::io::ErrorKind::AlreadyExists`] otherwise. Backends with an atomic no-replace
    /// rename (Linux renameat2) use it; this default checks first, which is enough for the
    /// in-memory backends that have no other writer.
    fn rename_new(&self, from: &Path, to: &Path) -> Result<(), IoError> {
        if self.exists(to) {
            return Err(IoError::Path {
                op: "rename onto",
                path: to.to_path_buf(),
                source: std::io::Error::from(std::io::ErrorKind::AlreadyExists),
            });
        }
        self.rename(from, to)
    }

    /// Makes the directory's entries (creations, renames, removals) durable.
    fn sync_dir(&self, dir: &Path) -> Result<(), IoError>;

    /// Creates the directory and its parents.
    fn create_dir_all(&self, dir: &Path) -> Result<(), IoError>;
}

/// Which backend the user asked for (job key or `--backend` flag).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BackendChoice {
    /// io_uring when it works here, else the portable backend (with a warning).
    #[default]
    Auto,
    /// The portable backend (pread/pwrite).
    Std,
    /// io_uring, or an error if it is unavailable.
    IoUring,
}

impl std::str::FromStr for BackendChoice {
    type Err = String;
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "auto" => Ok(BackendChoice::Auto),
            "std" => Ok(BackendChoice::Std),
            "io_uring" | "io-uring" | "uring" => Ok(BackendChoice::IoUring),
            other => Err(format!(
                "`{other}` is not a backend; use std, io_uring or auto"
            )),
        }
    }
}

/// Opens the backend the user chose. With [`BackendChoice::Auto`] an unusable io_uring falls
/// back to the portable backend and the second value says why, for the log and the report.
pub fn select_backend(
    choice: BackendChoice,
) -> Result<(Arc<dyn IoBackend>, Option<String>), IoError> {
    match choice {
        BackendChoice::Std => Ok((std_backend::StdBackend::new(), None)),
        BackendChoice::IoUring => Ok((uring::UringBackend::new()?, None)),
        BackendChoice::Auto => match uring::UringBackend::new() {
            Ok(backend) => Ok((backend, None)),
            Err(error) => Ok((
                std_backend::StdBackend::new(),
                Some(format!("{error}; using the portable backend instead")),
            )),
        },
    }
}
