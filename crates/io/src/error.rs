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
        "{path}: the file system refuses direct I/O (O_DIRECT); put the data on a disk-backed file system, or set `direct_io = false` in the job (results then measure the host's page cache)"
    )]
    DirectIoUnsupported { path: PathBuf },
    #[error("{op} {path} at offset {offset}: injected fault: {what}")]
    Injected {
        op: &'static str,
        path: PathBuf,
        offset: u64,
        what: String,
    },
    #[error("{path}: an earlier write or sync failed; this file accepts no more work")]
    Poisoned { path: PathBuf },
}
