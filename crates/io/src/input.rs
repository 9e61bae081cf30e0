//! The one way jetproof reads a file it is given (a job file, `result.json`, `samples.csv`, a
//! solution file, …): the path must be a regular file or a symbolic link to one, and no larger
//! than a bound the caller names (issue 34, point 3).
//!
//! Why it exists: `std::fs::read` on a named pipe blocks until a writer comes (forever, when none
//! does), and on `/dev/zero` reads until memory runs out. So the path is looked at (`stat`,
//! following links) before it is opened — a device is never opened at all, since opening one can
//! have effects of its own — then opened with `O_NONBLOCK` (a pipe that took the path's place in
//! between does not block the open) and looked at again through the opened descriptor (`fstat`),
//! which is what is read. At most `max_bytes + 1` bytes are read, so a file that grows while it is
//! read cannot exhaust memory either.
//!
//! Files under `/proc` and `/sys` (sizes of 0, contents made on read) are not read through here.

use std::fmt;
use std::fs::{File, Metadata};
use std::io::Read;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

/// Why a file could not be read as an input.
#[derive(Debug)]
#[non_exhaustive]
pub enum InputError {
    /// There is nothing at the path.
    Missing,
    /// Something other than a regular file is there; the words say what ("a named pipe").
    NotRegular(&'static str),
    /// The file is larger than the bound the caller gave.
    TooLarge { size_bytes: u64, max_bytes: u64 },
    /// The text form was asked for and the bytes are not UTF-8.
    NotUtf8,
    /// The system refused the `stat`, open or read.
    Io(std::io::Error),
}

impl InputError {
    /// True when there is nothing at the path (so an optional input is simply absent).
    pub fn is_missing(&self) -> bool {
        matches!(self, InputError::Missing)
    }
}

impl fmt::Display for InputError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InputError::Missing => write!(f, "no such file"),
            InputError::NotRegular(what) => {
                write!(f, "is {what}, not a regular file")
            }
            InputError::TooLarge {
                size_bytes,
                max_bytes,
            } => write!(
                f,
                "is {size_bytes} bytes, more than the {max_bytes} bytes jetproof reads of such a file"
            ),
            InputError::NotUtf8 => write!(f, "is not UTF-8 text"),
            InputError::Io(e) => write!(f, "cannot read it: {e}"),
        }
    }
}

impl std::error::Error for InputError {}

/// What a file type is, in words, when it is not a regular file.
fn not_regular(metadata: &Metadata) -> Option<&'static str> {
    let kind = metadata.file_type();
    if kind.is_file() {
        None
    } else if kind.is_fifo() {
        Some("a named pipe (FIFO)")
    } else if kind.is_char_device() {
        Some("a character device")
    } else if kind.is_block_device() {
        Some("a block device")
    } else if kind.is_dir() {
        Some("a directory")
    } else if kind.is_socket() {
        Some("a socket")
    } else {
        Some("not a regular file")
    }
}

fn io_error(e: std::io::Error) -> InputError {
    if e.kind() == std::io::ErrorKind::NotFound {
        InputError::Missing
    } else {
        InputError::Io(e)
    }
}

/// Opens `path` for reading if it is a regular file (or a link to one) of at most `max_bytes`;
/// never blocks on a pipe, never opens a device.
pub fn open_regular(path: &Path, max_bytes: u64) -> Result<File, InputError> {
    let before = std::fs::metadata(path).map_err(io_error)?;
    if let Some(what) = not_regular(&before) {
        return Err(InputError::NotRegular(what));
    }
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(io_error)?;
    let opened = file.metadata().map_err(InputError::Io)?;
    if let Some(what) = not_regular(&opened) {
        return Err(InputError::NotRegular(what));
    }
    if opened.len() > max_bytes {
        return Err(InputError::TooLarge {
            size_bytes: opened.len(),
            max_bytes,
        });
    }
    Ok(file)
}

/// Reads the whole of `path`, checked as [`open_regular`] checks it.
pub fn read_bytes(path: &Path, max_bytes: u64) -> Result<Vec<u8>, InputError> {
    let file = open_regular(path, max_bytes)?;
    let mut bytes = Vec::new();
    file.take(max_bytes.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(InputError::Io)?;
    if bytes.len() as u64 > max_bytes {
        return Err(InputError::TooLarge {
            size_bytes: bytes.len() as u64,
            max_bytes,
        });
    }
    Ok(bytes)
}

/// Reads the whole of `path` as UTF-8 text, checked as [`open_regular`] checks it.
pub fn read_text(path: &Path, max_bytes: u64) -> Result<String, InputError> {
    String::from_utf8(read_bytes(path, max_bytes)?).map_err(|_| InputError::NotUtf8)
}

/// Like [`read_text`], but a path with nothing at it is `Ok(None)` (an optional input such as
/// `samples.csv`); anything else there that is not a readable regular file is still an error.
pub fn read_optional_text(path: &Path, max_bytes: u64) -> Result<Option<String>, InputError> {
    match read_text(path, max_bytes) {
        Ok(text) => Ok(Some(text)),
        Err(InputError::Missing) => Ok(None),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_regular_file_and_a_link_to_one_are_read() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("a.json");
        std::fs::write(&file, "{}").expect("write");
        let link = dir.path().join("link.json");
        std::os::unix::fs::symlink(&file, &link).expect("symlink");
        assert_eq!(read_text(&file, 2).expect("file"), "{}");
        assert_eq!(read_text(&link, 2).expect("link"), "{}");
    }

    #[test]
    fn a_fifo_is_refused_without_blocking() {
        let dir = tempfile::tempdir().expect("tempdir");
        let fifo = dir.path().join("result.json");
        let name = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).expect("path");
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o600) }, 0);
        let error = read_text(&fifo, 1 << 20).expect_err("a fifo");
        assert!(error.to_string().contains("named pipe"), "{error}");
        assert!(matches!(
            read_optional_text(&fifo, 1 << 20),
            Err(InputError::NotRegular(_))
        ));
    }

    #[test]
    fn devices_and_directories_are_refused_and_missing_is_told_apart() {
        let dir = tempfile::tempdir().expect("tempdir");
        let zero = dir.path().join("zero");
        std::os::unix::fs::symlink("/dev/zero", &zero).expect("symlink");
        assert!(matches!(
            read_bytes(&zero, 1 << 20),
            Err(InputError::NotRegular("a character device"))
        ));
        assert!(matches!(
            read_bytes(dir.path(), 1 << 20),
            Err(InputError::NotRegular("a directory"))
        ));
        let missing = dir.path().join("none");
        assert!(read_bytes(&missing, 1).expect_err("missing").is_missing());
        assert!(read_optional_text(&missing, 1).expect("absent").is_none());
    }

    #[test]
    fn a_file_over_the_bound_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("big");
        std::fs::write(&file, [b'x'; 11]).expect("write");
        assert!(matches!(
            read_bytes(&file, 10),
            Err(InputError::TooLarge {
                size_bytes: 11,
                max_bytes: 10
            })
        ));
        assert_eq!(read_bytes(&file, 11).expect("at the bound").len(), 11);
    }
}
