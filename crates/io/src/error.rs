//! Errors of the I/O layer. Every variant names the file, and where it applies the offset and
//! length, so that a storage error can be reported with its location.

use std::path::PathBuf;

#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum IoError {
    #[error("{op} {path} at offset {offset} ({len} bytes): {source}")]
    Os {
        op: &'static str,
        path: PathBuf,
        offset: u64,
        len: usize,
        #[source]
        source: std::io::Error,
    },
    #[error("{op} {path}: {source}")]
    Path {
        op: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("read {path} at offset {offset}: wanted {wanted} bytes, the file ends after {got}")]
    ShortRead {
        path: PathBuf,
        offset: u64,
        wanted: usize,
        got: usize,
    },
    #[error(
        "{path}: offset {offset} or length {len} is not a multiple of the {block_size}-byte block that direct I/O needs"
    )]
    Unaligned {
        path: PathBuf,
        offset: u64,
        len: usize,
        block_size: usize,
    },
    #[error(
        "{path}: the file system refuses direct I/O (O_DIRECT), or keeps it in memory as tmpfs does; put the data on a disk-backed file system, or set `storage.direct_io = false` in the job (`--buffered` for probe; results then measure the host's page cache)"
    )]
    DirectIoUnsupported { path: PathBuf },
    #[error("{op} {path} at offset {offset}: injected fault: {what}")]
    Injected {
        op: &'static str,
        path: PathBuf,
        offset: u64,
        what: String,
    },
    #[error(
        "{path} is a block device; jetproof writes to a device only when told to: set `storage.allow_devices = true` in the job, or pass `--allow-device` to `jetproof probe`"
    )]
    DeviceNotAllowed { path: PathBuf },
    #[error(
        "io_uring is not available here ({source}); it may be disabled by the kernel (sysctl kernel.io_uring_disabled) or blocked by a seccomp filter (containers); use the portable engine (`--io-engine std`)"
    )]
    UringUnavailable {
        #[source]
        source: std::io::Error,
    },
    /// The process ran out of file descriptors (EMFILE/ENFILE) making something it needs for
    /// I/O on `path` (an io_uring is one descriptor per session reading at once). jetproof raises
    /// its soft limit to the hard one at start (`raise_open_file_limit`), so what is left is the
    /// hard limit or the system's.
    #[error(
        "{op} for {path}: too many open files ({source}); jetproof already raised its soft limit to the hard limit ({limit}); raise the hard limit (`ulimit -Hn`, systemd `LimitNOFILE=`), or run fewer sessions (workload.threads)"
    )]
    OutOfFileDescriptors {
        op: &'static str,
        path: PathBuf,
        limit: String,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "{path}: the simulated machine crashed; reopen the files from the backend returned by crash()"
    )]
    Crashed { path: PathBuf },
    #[error("{path}: an earlier write or sync failed; this file accepts no more work")]
    Poisoned { path: PathBuf },
    /// A path where jetproof keeps a file of its own holds something else: a symbolic link, a
    /// directory, a FIFO, a socket or a device. It is never followed, opened or replaced.
    #[error(
        "{path} is {what}, not a file jetproof made; jetproof never follows a link or writes through one, and never replaces what it did not make: move it away"
    )]
    NotARegularFile { path: PathBuf, what: &'static str },
}
