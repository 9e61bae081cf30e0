//! What marks a file or a device as jetproof's, and the names of the files it makes in steps:
//! the `.partial` rule, the database signature, the log layout's magic, the flush map's check,
//! and the options that widen what may be touched. A leaf of the crate (it imports none of its
//! other files), so that the targets' checks (`target`), the devices' (`device`) and the
//! backends (`raw`, `logregion`) can all ask it without reaching each other in a circle.

use std::os::unix::fs::FileTypeExt as _;
use std::path::{Path, PathBuf};

use jetproof_engine::header::SIGNATURE;
use jetproof_io::bytes::array_at;

/// Suffix of a database still being made. Never opened as a database; removed by the next init.
pub const PARTIAL_SUFFIX: &str = ".partial";

/// The name a file has while it is being made: `NAME.partial` ([`PARTIAL_SUFFIX`]), renamed to
/// `NAME` only once whole. The one naming rule of every file jetproof makes in steps (a database
/// by init, its flush map, a block device's map), so the checks that recognise a partial file and
/// the procedures that make one cannot disagree.
pub fn partial_path(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_os_string();
    name.push(PARTIAL_SUFFIX);
    PathBuf::from(name)
}

/// Is `path` a block device?
pub fn is_block_device(path: &Path) -> bool {
    std::fs::metadata(path)
        .map(|m| m.file_type().is_block_device())
        .unwrap_or(false)
}

/// Options that widen what may be touched.
#[derive(Debug, Clone, Default)]
pub struct Permissions {
    /// Put jetproof's files into directories that hold foreign files (never replacing them).
    pub allow_foreign_files: bool,
    /// Replace databases (and their logs) that jetproof made earlier.
    pub recreate: bool,
    /// Block devices (`--wipe-device`) whose foreign signature init may destroy
    /// (`crate::device`).
    pub wipe_devices: Vec<PathBuf>,
}

/// The regular file at `path` opened for reading without following a link; `None` for anything
/// else (nothing there, a link, a FIFO, a device) or a file that cannot be opened.
pub(crate) fn open_regular(path: &Path) -> Option<std::sync::Arc<dyn jetproof_io::IoFile>> {
    use jetproof_io::{IoBackend, OpenOptions};
    if !path.symlink_metadata().is_ok_and(|m| m.is_file()) {
        return None;
    }
    jetproof_io::std_backend::StdBackend::new()
        .open(path, &OpenOptions::read_only().buffered().no_follow())
        .ok()
}

/// Is `path` a regular file holding a jetproof flush map (its signature)?
pub fn flush_map_is_ours(path: &Path) -> bool {
    open_regular(path).is_some_and(|file| jetproof_engine::flushmap::is_flush_map(file.as_ref()))
}

/// Magic of the layout header at byte 0 of a log or shared device.
pub const LAYOUT_MAGIC: &[u8; 8] = b"JPDEVLAY";

/// Does the device at `path` start with a layout header (valid or damaged)?
pub fn looks_like_layout(head: &[u8]) -> bool {
    array_at::<8>(head, 0).as_ref() == Some(LAYOUT_MAGIC)
}

/// Offset of the signature in a header page (see `crates/engine/src/header.rs`).
const SIGNATURE_OFFSET: usize = 80;

/// Does this first block of a file carry a jetproof database signature? A cheap test used before
/// any write, to tell jetproof's own databases from foreign files.
pub fn looks_like_database(head: &[u8]) -> bool {
    head.get(SIGNATURE_OFFSET..SIGNATURE_OFFSET + SIGNATURE.len()) == Some(&SIGNATURE[..])
}
