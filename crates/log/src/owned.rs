//! Which files at the log's names jetproof made, told by their own content (issue 15: "foreign
//! means untouchable, whatever its name").
//!
//! A log directory may be shared with files jetproof did not make (`init --allow-foreign-files`),
//! and any of them may carry one of the log's names. So a name proves nothing; before the log
//! removes or replaces a file it checks the file's own marker:
//!
//! | file | jetproof's when |
//! | --- | --- |
//! | generation `E%08X.jplog` | a regular file whose header decodes (magic `JPLOGGEN`, checksum), names that generation, and the database the caller expects (when it knows one) |
//! | checkpoint `checkpoint.jpchk` | a regular file one of whose slots decodes (magic `JPLOGCHK`, checksum) and names the database expected |
//! | spare `Enext.jplogtmp` | a regular file no larger than a generation that holds only zeros (a spare is formatted as zeros; one cut short by a crash holds zeros or nothing: nothing to lose), or whose first block is a generation header of the database expected (a generation recycled by circular logging, or one whose installation was cut short) |
//!
//! Anything else, and every symbolic link, directory, FIFO or device at those names, is foreign:
//! never opened for writing, replaced or removed. The check reads through the I/O layer with
//! `no_follow`; the caller holds the owner lock, so no other jetproof command changes the
//! directory between the check and the removal.

use std::path::{Path, PathBuf};

use jetproof_io::{AlignedBuf, IoBackend, IoClass, IoError, OpenOptions};

use crate::checkpoint::{Checkpoint, SLOT_BYTES};
use crate::error::{LogError, Result};
use crate::format::{DATA_START, GenerationHeader, checkpoint_path, generation_path, spare_path};

/// The kinds of file the log keeps, by name.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum LogFileName {
    Generation(u64),
    Spare,
    Checkpoint,
}

impl LogFileName {
    /// What a file name is to the log, if anything: `E00000001.jplog`, `Enext.jplogtmp`,
    /// `checkpoint.jpchk`. A name the log would never write (`E1.jplog`, lower-case hex) is not
    /// one of its names.
    pub fn of(name: &str) -> Option<LogFileName> {
        if Some(std::ffi::OsStr::new(name)) == spare_path(Path::new("")).file_name() {
            return Some(LogFileName::Spare);
        }
        if Some(std::ffi::OsStr::new(name)) == checkpoint_path(Path::new("")).file_name() {
            return Some(LogFileName::Checkpoint);
        }
        let hex = name.strip_prefix('E')?.strip_suffix(".jplog")?;
        let generation = u64::from_str_radix(hex, 16).ok()?;
        (crate::format::generation_file_name(generation) == name)
            .then_some(LogFileName::Generation(generation))
    }

    /// The file's path in `dir`.
    pub fn path(self, dir: &Path) -> PathBuf {
        match self {
            LogFileName::Generation(generation) => generation_path(dir, generation),
            LogFileName::Spare => spare_path(dir),
            LogFileName::Checkpoint => checkpoint_path(dir),
        }
    }
}

/// What the marker of a file jetproof made says.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Owned {
    /// The database the file belongs to; `None` for a spare of zeros, which names none.
    pub database_id: Option<u128>,
}

/// Checks that the file at `path`, of kind `kind`, is jetproof's and (when `database_id` is
/// given) belongs to that database. `file_size_bytes` bounds a spare. Reads only.
pub fn check_owned(
    backend: &dyn IoBackend,
    path: &Path,
    kind: LogFileName,
    database_id: Option<u128>,
    file_size_bytes: Option<u64>,
) -> Result<Owned> {
    let not_ours = |reason: String| LogError::NotOurs {
        path: path.to_path_buf(),
        reason,
    };
    let file = match backend.open(path, &OpenOptions::read_only().buffered().no_follow()) {
        Ok(file) => file,
        Err(IoError::NotARegularFile { what, .. }) => {
            return Err(not_ours(format!("it is {what}")));
        }
        Err(error) => return Err(error.into()),
    };
    let size = file.size()?;
    let head_bytes = match kind {
        LogFileName::Checkpoint => 2 * SLOT_BYTES as u64,
        _ => DATA_START,
    };
    let mut head = AlignedBuf::zeroed(size.min(head_bytes) as usize);
    file.read_at(&mut head, 0, IoClass::LogRead)?;
    let check_id = |found: u128| match database_id {
        Some(expected) if expected != found => Err(not_ours(format!(
            "it belongs to database {found:#034x}, not to this one ({expected:#034x})"
        ))),
        _ => Ok(Owned {
            database_id: Some(found),
        }),
    };
    match kind {
        LogFileName::Generation(generation) => {
            let header = GenerationHeader::decode(&head)
                .map_err(|reason| not_ours(format!("its header is not a log header: {reason}")))?;
            if header.generation != generation {
                return Err(not_ours(format!(
                    "its header names generation {}",
                    header.generation
                )));
            }
            check_id(header.database_id)
        }
        LogFileName::Checkpoint => {
            let newest = head
                .chunks(SLOT_BYTES)
                .filter_map(Checkpoint::decode)
                .max_by_key(|c| c.sequence)
                .ok_or_else(|| not_ours("neither slot holds a jetproof checkpoint".into()))?;
            check_id(newest.database_id)
        }
        LogFileName::Spare => {
            if let Some(limit) = file_size_bytes
                && size > limit
            {
                return Err(not_ours(format!(
                    "it holds {size} bytes, more than a log file's {limit}"
                )));
            }
            if let Ok(header) = GenerationHeader::decode(&head) {
                return check_id(header.database_id);
            }
            // A spare is formatted as zeros: one that holds nothing else has nothing to lose.
            let mut chunk = AlignedBuf::zeroed((256usize << 10).min(size as usize));
            let mut offset = 0u64;
            while offset < size {
                let length = chunk.len().min((size - offset) as usize);
                file.read_at(&mut chunk[..length], offset, IoClass::LogRead)?;
                if let Some(at) = chunk[..length].iter().position(|&b| b != 0) {
                    return Err(not_ours(format!(
                        "it holds data (a non-zero byte at offset {}) and no jetproof log header",
                        offset + at as u64
                    )));
                }
                offset += length as u64;
            }
            Ok(Owned { database_id: None })
        }
    }
}

/// Removes the file at `kind`'s name in `dir` if it is jetproof's ([`check_owned`]); refuses
/// (and leaves it) otherwise. Nothing there is not an error.
pub fn remove_owned(
    backend: &dyn IoBackend,
    dir: &Path,
    kind: LogFileName,
    database_id: Option<u128>,
    file_size_bytes: Option<u64>,
) -> Result<()> {
    let path = kind.path(dir);
    if !backend.exists(&path) {
        return Ok(());
    }
    check_owned(backend, &path, kind, database_id, file_size_bytes)?;
    backend.remove(&path)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_recognised_exactly() {
        assert_eq!(
            LogFileName::of("E0000000A.jplog"),
            Some(LogFileName::Generation(10))
        );
        assert_eq!(LogFileName::of("Enext.jplogtmp"), Some(LogFileName::Spare));
        assert_eq!(
            LogFileName::of("checkpoint.jpchk"),
            Some(LogFileName::Checkpoint)
        );
        for other in [
            "E1.jplog",
            "E0000000a.jplog",
            "notes.txt",
            "E00000001.jplog.bak",
        ] {
            assert_eq!(LogFileName::of(other), None, "{other}");
        }
    }
}
