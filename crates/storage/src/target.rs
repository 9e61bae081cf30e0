//! Where databases go, and what jetproof may touch there (`docs/refusals.md`).
//!
//! The rule: jetproof never destroys what it did not create. Every directory jetproof creates
//! gets a marker file, [`MARKER`]; a directory with the marker is jetproof's, an empty one may
//! become jetproof's, and one holding anything else is *foreign*: it is refused unless the user
//! says `--allow-foreign-files`, and even then jetproof only adds its own files beside the foreign
//! ones and never replaces any of them. Raw block devices are refused unless the job says
//! `storage.allow_devices = true`.
//!
//! Within a directory, a file is jetproof's only when its own content says so, whatever its name
//! (issue 15): a database by its header signature, a `.partial` database by its first page, a
//! log file by its header's magic and database identity ([`jetproof_log::owned`]). A foreign
//! file at one of jetproof's names, or any symbolic link there, is refused before anything is
//! written, and never removed or replaced: `--allow-foreign-files` lets jetproof's files share a
//! directory, it never lets jetproof delete. `docs/design.md`, "Foreign files".
//!
//! All checks here run before any write, so bad input costs nothing.

use std::collections::HashMap;
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use jetproof_job::{ByteSize, Instance, Job};

/// The marker file in every directory jetproof creates.
pub const MARKER: &str = ".jetproof";

/// Room reserved per instance for log files and the checkpoint, on top of the database.
pub const LOG_ROOM: ByteSize = ByteSize(64 * ByteSize::MIB);

use crate::marks::open_regular;
pub use crate::marks::{
    PARTIAL_SUFFIX, Permissions, flush_map_is_ours, is_block_device, partial_path,
};
use crate::{BadInput, bad};

/// What a directory is to jetproof.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DirState {
    Missing,
    Empty,
    Ours,
    /// Holds entries jetproof did not create (the first is named for the message).
    Foreign,
}

pub fn dir_state(dir: &Path) -> Result<(DirState, Option<String>), BadInput> {
    if !dir.exists() {
        return Ok((DirState::Missing, None));
    }
    if !dir.is_dir() {
        return Err(bad(
            dir.display().to_string(),
            "exists and is not a directory; choose another path",
        ));
    }
    if dir.join(MARKER).exists() {
        return Ok((DirState::Ours, None));
    }
    let entries: Vec<_> = std::fs::read_dir(dir)
        .map_err(|e| bad(dir.display().to_string(), format!("cannot be listed: {e}")))?
        .flatten()
        .collect();
    if entries.is_empty() {
        return Ok((DirState::Empty, None));
    }
    // Name a file the user will recognise as theirs: not one of jetproof's lock files or
    // directories, which a shared directory also holds.
    let jetproofs = |entry: &std::fs::DirEntry| {
        entry.file_name().to_string_lossy().ends_with(".jplock")
            || entry.path().join(MARKER).exists()
    };
    let example = entries
        .iter()
        .find(|e| !jetproofs(e))
        .or(entries.first())
        .map(|e| e.file_name().to_string_lossy().to_string());
    Ok((DirState::Foreign, example))
}

/// Bytes available to an unprivileged writer on the file system holding `path` (or its nearest
/// existing ancestor), and that file system's device id.
pub fn free_space(path: &Path) -> Option<(u64, u64)> {
    let mut probe = path.to_path_buf();
    while !probe.exists() {
        if !probe.pop() {
            probe = PathBuf::from(".");
            break;
        }
    }
    if probe.as_os_str().is_empty() {
        probe = PathBuf::from(".");
    }
    let device = std::fs::metadata(&probe).ok()?.dev();
    let cpath = CString::new(probe.as_os_str().as_bytes()).ok()?;
    // SAFETY: statvfs writes into the zeroed struct we own; cpath is NUL-terminated.
    let mut stat: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    let rc = unsafe { libc::statvfs(cpath.as_ptr(), &mut stat) };
    if rc != 0 {
        return None;
    }
    Some((stat.f_bavail as u64 * stat.f_frsize as u64, device))
}

/// The directories an instance needs: the database's folder and the log folder.
pub fn instance_dirs(instance: &Instance) -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    // A device's node lives in /dev: no directory of jetproof's there (`crate::raw`).
    if let Some(parent) = instance.database_path.parent()
        && !parent.as_os_str().is_empty()
        && !is_block_device(&instance.database_path)
    {
        dirs.push(parent.to_path_buf());
    }
    // A log path that is a device is no directory: the device's checks refuse it.
    if !dirs.contains(&instance.log_path) && !is_block_device(&instance.log_path) {
        dirs.push(instance.log_path.clone());
    }
    dirs
}

/// Checks that `init` may create the job's databases. Runs no write.
pub fn check_init_targets(job: &Job, permissions: &Permissions) -> Result<(), BadInput> {
    let instances = job.instances();
    let used: Vec<PathBuf> = instances
        .iter()
        .flat_map(|i| [i.database_path.clone(), i.log_path.clone()])
        .collect();
    crate::device::check_wipe_names(&permissions.wipe_devices, &used)?;
    let mut seen = HashMap::new();
    for instance in &instances {
        if let Some(other) = seen.insert(instance.database_path.clone(), instance.name.clone()) {
            return Err(bad(
                "storage.instance",
                format!(
                    "instances {other} and {} share the database path {}; give each its own",
                    instance.name,
                    instance.database_path.display()
                ),
            ));
        }
    }

    // The data directory itself (only when the job uses it).
    if job.storage.instance.is_empty() {
        let (state, entry) = dir_state(&job.storage.data_dir)?;
        if state == DirState::Foreign && !permissions.allow_foreign_files {
            return Err(foreign_error(
                "storage.data_dir",
                &job.storage.data_dir,
                entry,
            ));
        }
    }

    for instance in &instances {
        let path = &instance.database_path;
        if is_block_device(&instance.log_path) {
            crate::logregion::check_for_init(job, permissions, instance)?;
        }
        if is_block_device(path) {
            crate::raw::check_for_init(job, permissions, instance)?;
        } else if let Ok(meta) = path.symlink_metadata()
            && meta.file_type().is_symlink()
        {
            return Err(bad(
                format!("database path of {}", instance.name),
                format!(
                    "{} is a symbolic link; jetproof never replaces a link or writes through one. Give the real path in the job, or move the link away",
                    path.display()
                ),
            ));
        } else if path.exists() {
            if !path.is_file() {
                return Err(bad(
                    format!("database path of {}", instance.name),
                    format!(
                        "{} exists and is not a file; choose another path",
                        path.display()
                    ),
                ));
            }
            // The header's signature says jetproof made it (a database in a directory shared
            // with foreign files has no directory marker to ask).
            let ours = jetproof_engine_signature(path);
            if !ours {
                return Err(bad(
                    format!("database path of {}", instance.name),
                    format!(
                        "{} exists and is not a database jetproof made; jetproof never overwrites it. Choose another --data-dir or path",
                        path.display()
                    ),
                ));
            }
            // An interrupted init left some databases complete and others missing: the next init
            // finishes it ([`is_resumable`]).
            if !permissions.recreate && !is_resumable(&instances) {
                return Err(bad(
                    "--recreate",
                    format!(
                        "{} already holds a jetproof database; run the tests on it, or pass --recreate to replace the databases jetproof made",
                        path.display()
                    ),
                ));
            }
        }
        for dir in instance_dirs(instance) {
            let (state, entry) = dir_state(&dir)?;
            if state == DirState::Foreign && !permissions.allow_foreign_files {
                return Err(foreign_error(
                    &format!("directory of {}", instance.name),
                    &dir,
                    entry,
                ));
            }
        }
        let partial = partial_path(path);
        if partial.symlink_metadata().is_ok() && !partial_is_ours(&partial, job) {
            return Err(bad(
                format!("database path of {}", instance.name),
                format!(
                    "{} is not a database jetproof was making (a link, or no jetproof page at its start); jetproof never removes it. Move it away",
                    partial.display()
                ),
            ));
        }
        // The databases' flush maps (lost-write detection), which init replaces: only maps
        // jetproof made (their signature), never a link or anything else.
        for map in [
            jetproof_engine::flush_map_path(path),
            jetproof_engine::flush_map_path(&partial),
        ] {
            if map.symlink_metadata().is_ok() && !flush_map_is_ours(&map) {
                return Err(bad(
                    format!("database path of {}", instance.name),
                    format!(
                        "{} is not a flush map jetproof made (a link, or no jetproof signature); jetproof never replaces it. Move it away",
                        map.display()
                    ),
                ));
            }
        }
        let id = database_id(path);
        let logs = own_log_files(instance, id, job.log.file_size.bytes())?;
        // No database at its path, yet a log of a database in its log directory. When the flush
        // map left at the database's path names that database, the log is this instance's own
        // (its database was deleted or lost), and init removes it as it starts afresh. Otherwise
        // it is another database's, maybe another job's that shares the directory: removing it
        // could cost a live database its log, so nothing is removed and nothing written. A
        // database on a device is judged by the device's own checks.
        let own_map = map_database_id(&jetproof_engine::flush_map_path(path));
        if id.is_none()
            && !is_block_device(path)
            && let Some((kind, owner)) = logs
                .iter()
                .find_map(|&(k, o)| o.filter(|&o| Some(o) != own_map).map(|o| (k, o)))
        {
            return Err(bad(
                format!("log_path of {}", instance.name),
                format!(
                    "{} holds the log of database {owner:#034x} ({} among others), and there is no database at {}: the log is another database's, maybe another job's that shares this directory, and jetproof never removes it. Give this instance a log directory of its own; or, if that database is gone for good, remove its log files (E*.jplog, Enext.jplogtmp, checkpoint.jpchk) from {} yourself",
                    instance.log_path.display(),
                    kind.path(&instance.log_path).display(),
                    path.display(),
                    instance.log_path.display(),
                ),
            ));
        }
    }

    // Free space, summed per file system. A block device needs none.
    let mut need: HashMap<u64, (u64, u64, PathBuf)> = HashMap::new();
    for instance in &instances {
        let db_bytes = if is_block_device(&instance.database_path) {
            0
        } else {
            job.db_size().bytes()
        };
        for (path, bytes) in [
            (&instance.database_path, db_bytes),
            (&instance.log_path, LOG_ROOM.bytes()),
        ] {
            if let Some((available, device)) = free_space(path) {
                let entry = need.entry(device).or_insert((0, available, path.clone()));
                entry.0 += bytes;
            }
        }
    }
    for (needed, available, path) in need.values() {
        if needed > available {
            return Err(bad(
                "storage.db_size",
                format!(
                    "the databases and logs need {} on the file system of {}, which has {} free; make the databases smaller (--db-size) or fewer (--databases), or use another --data-dir",
                    ByteSize(*needed),
                    path.display(),
                    ByteSize(*available)
                ),
            ));
        }
    }
    Ok(())
}

fn foreign_error(field: &str, dir: &Path, entry: Option<String>) -> BadInput {
    bad(
        field,
        format!(
            "{} holds files jetproof did not create ({}); choose an empty or new directory, or pass --allow-foreign-files to place jetproof's files beside them (they are never touched)",
            dir.display(),
            entry.unwrap_or_default()
        ),
    )
}

/// The database a flush map at `path` names, when it is a regular file and a flush map.
fn map_database_id(path: &Path) -> Option<u128> {
    jetproof_engine::flushmap::map_database_id(open_regular(path)?.as_ref())
}

/// The identity (`database_id`) in the header of the database at `path`, when it exists and its
/// header can be read.
pub fn database_id(path: &Path) -> Option<u128> {
    jetproof_engine::header::DbHeader::read(open_regular(path)?.as_ref())
        .ok()
        .map(|h| h.database_id)
}

/// Is `path` (a database's `.partial` name) a database jetproof was making? A regular file whose
/// first block carries the header signature (the header was written), or whose first page is a
/// jetproof page (a fill cut short before its header: pages are formatted first), or whose first
/// 4 KiB are zeros (a copy cut short before its first chunk: the file was sized first).
pub fn partial_is_ours(path: &Path, job: &Job) -> bool {
    use std::io::Read;
    if !path.symlink_metadata().is_ok_and(|m| m.is_file()) {
        return false;
    }
    let page_size = job.storage.page_size.bytes() as usize;
    let mut head = vec![0u8; page_size.max(4096)];
    let Ok(file) = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags_nofollow()
        .open(path)
    else {
        return false;
    };
    let mut read = 0;
    let mut reader = file;
    while read < head.len() {
        match reader.read(&mut head[read..]) {
            Ok(0) => break,
            Ok(n) => read += n,
            Err(_) => return false,
        }
    }
    let head = &head[..read];
    if read == 0 || crate::database::looks_like_database(head) {
        return true;
    }
    if head.len() >= page_size
        && jetproof_engine::checksum::verify(&head[..page_size], 0)
            == jetproof_engine::checksum::PageCheck::Good
    {
        return true;
    }
    head.iter().take(4096).all(|&b| b == 0)
}

/// O_NOFOLLOW for `std::fs::OpenOptions`.
trait NoFollow {
    fn custom_flags_nofollow(&mut self) -> &mut Self;
}

impl NoFollow for std::fs::OpenOptions {
    fn custom_flags_nofollow(&mut self) -> &mut Self {
        use std::os::unix::fs::OpenOptionsExt;
        self.custom_flags(libc::O_NOFOLLOW)
    }
}

/// The files at the log's names in an instance's log directory, each checked to be jetproof's
/// (and this database's, when `database_id` is known) before `init` removes any of them, with the
/// database each names (none for a spare of zeros). One that is not jetproof's is bad input
/// naming it: it would block the new log, and it is never removed.
pub fn own_log_files(
    instance: &Instance,
    database_id: Option<u128>,
    file_size_bytes: u64,
) -> Result<Vec<(jetproof_log::owned::LogFileName, Option<u128>)>, BadInput> {
    use jetproof_log::owned::{LogFileName, check_owned};
    let Ok(entries) = std::fs::read_dir(&instance.log_path) else {
        return Ok(Vec::new());
    };
    let backend = jetproof_io::std_backend::StdBackend::new();
    let mut found = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(kind) = name.to_str().and_then(LogFileName::of) else {
            continue;
        };
        let path = entry.path();
        let owned = match check_owned(&*backend, &path, kind, database_id, Some(file_size_bytes)) {
            Ok(owned) => owned,
            Err(error) => {
                let why = match error {
                    jetproof_log::LogError::NotOurs { reason, .. } => reason,
                    other => other.to_string(),
                };
                return Err(bad(
                    format!("log_path of {}", instance.name),
                    format!(
                        "{} has a log file's name but is not {} ({why}); jetproof never removes or writes it, and the log cannot start beside it. Move it away, or give the instance another log directory",
                        path.display(),
                        if database_id.is_some() {
                            "a log file of this database"
                        } else {
                            "a jetproof log file"
                        }
                    ),
                ));
            }
        };
        found.push((kind, owned.database_id));
    }
    Ok(found)
}

/// Does the file start like a jetproof database? Reads its first bytes only.
fn jetproof_engine_signature(path: &Path) -> bool {
    use std::io::Read;
    let mut head = [0u8; 4096];
    let Ok(mut file) = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags_nofollow()
        .open(path)
    else {
        return false;
    };
    let Ok(read) = file.read(&mut head) else {
        return false;
    };
    crate::database::looks_like_database(&head[..read])
}

/// Creates `dir` (and parents) and marks it as jetproof's, unless it already is. A directory
/// that already holds foreign files (allowed by `--allow-foreign-files`) is not marked: it is
/// not jetproof's, and a marker would make a later command take it for jetproof's.
pub fn make_own_dir(dir: &Path) -> std::io::Result<()> {
    let state = dir_state(dir).ok().map(|(state, _)| state);
    std::fs::create_dir_all(dir)?;
    let marker = dir.join(MARKER);
    if matches!(state, Some(DirState::Missing) | Some(DirState::Empty)) && !marker.exists() {
        std::fs::write(
            &marker,
            format!(
                "This directory was created by jetproof {}. jetproof only ever replaces files it made here.\n",
                env!("CARGO_PKG_VERSION")
            ),
        )?;
    }
    Ok(())
}

/// True when the job's databases are what an interrupted init leaves: some databases exist
/// (each renamed into place once complete) and some do not.
pub fn is_resumable(instances: &[Instance]) -> bool {
    let exists: Vec<bool> = instances
        .iter()
        .map(|i| i.database_path.is_file())
        .collect();
    exists.iter().any(|e| *e) && exists.iter().any(|e| !*e)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job_in(dir: &Path) -> Job {
        let mut job = Job::default();
        job.storage.data_dir = dir.join("data");
        job.storage.db_size = Some(ByteSize::mib(1));
        job
    }

    #[test]
    fn fresh_directory_is_accepted() {
        let dir = tempfile::tempdir().expect("tempdir");
        check_init_targets(&job_in(dir.path()), &Permissions::default()).expect("accepted");
    }

    #[test]
    fn foreign_files_are_refused_unless_allowed() {
        let dir = tempfile::tempdir().expect("tempdir");
        let job = job_in(dir.path());
        std::fs::create_dir_all(&job.storage.data_dir).expect("mkdir");
        std::fs::write(job.storage.data_dir.join("notes.txt"), "mine").expect("write");
        let err = check_init_targets(&job, &Permissions::default()).expect_err("refused");
        assert!(err.message.contains("notes.txt"), "{err}");
        assert!(err.message.contains("--allow-foreign-files"), "{err}");
        let allowed = Permissions {
            allow_foreign_files: true,
            ..Permissions::default()
        };
        check_init_targets(&job, &allowed).expect("allowed");
    }

    #[test]
    fn a_foreign_file_at_the_database_path_is_never_accepted() {
        let dir = tempfile::tempdir().expect("tempdir");
        let job = job_in(dir.path());
        let db = &job.instances()[0].database_path;
        std::fs::create_dir_all(db.parent().expect("parent")).expect("mkdir");
        std::fs::write(db, "not a database").expect("write");
        let permissive = Permissions {
            allow_foreign_files: true,
            recreate: true,
            ..Permissions::default()
        };
        let err = check_init_targets(&job, &permissive).expect_err("refused");
        assert!(err.message.contains("never overwrites"), "{err}");
    }

    #[test]
    fn impossible_size_is_refused_naming_db_size() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut job = job_in(dir.path());
        job.storage.db_size = Some(ByteSize(1 << 60));
        let err = check_init_targets(&job, &Permissions::default()).expect_err("refused");
        assert_eq!(err.field, "storage.db_size");
    }
}
