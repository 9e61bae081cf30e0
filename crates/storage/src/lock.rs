//! The owner lock: one command at a time owns a database instance (issue 15).
//!
//! Every command that opens database or log files (`init`, `run` of every test type, `checksum`,
//! `recover`) takes it before it reads a header, and holds it to its end. A second command is
//! refused (exit 2) before it touches anything, with the command, process and host that hold it.
//! Without it a live run could be "recovered", re-initialised or backed up under its own feet
//! (the run then failed at shut-down leaving a dirty database or orphaned log generations), and
//! a second `run` was refused only by the dirty header, with advice to run `recover`: exactly the
//! destructive step while the first one lives.
//!
//! What is locked (advisory `flock(2)` locks on small lock files jetproof creates; see
//! `docs/design.md`, "The owner lock"):
//! * each instance's database: `<database file>.jplock` beside it (so two jobs naming the same
//!   database file collide even with different log directories); a database on a block device
//!   has no lock file beside its node: the device is held open with `O_EXCL` instead
//!   (`crate::raw`, `docs/devices.md`), by readers too;
//! * each instance's log stream: `log.jplock` in its log directory (so two databases can never
//!   write one log directory, whichever jobs they come from);
//! * for `init`, the data directory too: `init.jplock` in it, taken after the instances' (so a
//!   live owner of an instance refuses an init before it has made anything).
//!
//! Writers (`init`, `run --test performance|stress|soft-recovery`, `recover`) take every lock
//! exclusive; readers (`checksum`, `run --test backup`) take them shared, so readers share a
//! cleanly shut database with each other but never with a writer: a dirty database is never read
//! while one writes it.
//!
//! The kernel holds the lock, the file only names the holder: jetproof writes one JSON record
//! per holder into it (pid, host, boot id and process start time, so a record whose process is
//! gone is recognised, the command and its command line). A crash releases the lock with the
//! process; the lock file is left and simply reused, never deleted (deleting it would let two
//! processes lock two different files of one name). A lock file that holds anything but
//! jetproof's records, or a link or directory at its name, is foreign and refused, never
//! rewritten.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use jetproof_job::Job;
use serde::{Deserialize, Serialize};

/// First line of every lock file jetproof writes: its marker.
pub const LOCK_FILE_MARKER: &str = "# jetproof owner lock";

/// Extension of lock files.
pub const LOCK_SUFFIX: &str = ".jplock";

/// Name of an instance's log-stream lock, in its log directory.
pub const LOG_LOCK_NAME: &str = "log.jplock";

/// Name of the data directory's lock, taken by `init`.
pub const INIT_LOCK_NAME: &str = "init.jplock";

/// How a lock is held.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Access {
    /// Many readers at once (`checksum`, `run --test backup`); never beside a writer.
    Shared,
    /// One writer alone.
    Exclusive,
}

impl Access {
    fn word(self) -> &'static str {
        match self {
            Access::Shared => "shared",
            Access::Exclusive => "exclusive",
        }
    }
}

/// One holder, as its lock file records it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Holder {
    /// The jetproof command, like "run --test performance".
    pub command: String,
    pub access: Access,
    pub pid: u32,
    pub host: String,
    /// `/proc/sys/kernel/random/boot_id`: with `start_ticks`, names one process of one boot.
    pub boot_id: String,
    /// The process's start time in clock ticks after boot (`/proc/PID/stat`, field 22).
    pub start_ticks: u64,
    /// When the lock was taken (RFC 3339).
    pub since: String,
    /// The whole command line.
    pub command_line: String,
}

impl Holder {
    fn this_process(command: &str, access: Access) -> Holder {
        Holder {
            command: command.to_string(),
            access,
            pid: std::process::id(),
            host: host_name(),
            boot_id: boot_id(),
            start_ticks: start_ticks(std::process::id()).unwrap_or(0),
            since: humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string(),
            command_line: std::env::args().collect::<Vec<_>>().join(" "),
        }
    }

    /// Is this holder's process still running? `None` when this host cannot tell (another host
    /// on a shared file system).
    fn alive(&self) -> Option<bool> {
        if self.host != host_name() || self.boot_id != boot_id() {
            return None;
        }
        Some(start_ticks(self.pid) == Some(self.start_ticks))
    }

    fn describe(&self) -> String {
        let here = if self.host == host_name() {
            "this host".to_string()
        } else {
            format!("host {}", self.host)
        };
        format!(
            "`jetproof {}` holds it {} (pid {} on {}, since {}; command line: {})",
            self.command,
            self.access.word(),
            self.pid,
            here,
            self.since,
            self.command_line
        )
    }
}

fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into())
}

fn boot_id() -> String {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// Field 22 of `/proc/PID/stat` (the command name, field 2, may hold spaces and parentheses:
/// the fields are counted after its last ')').
fn start_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after_name = &stat[stat.rfind(')')? + 1..];
    after_name.split_whitespace().nth(19)?.parse().ok()
}

/// Why a lock was not taken.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LockError {
    /// Another command holds it. Bad input (exit 2): nothing was done.
    #[error(
        "{what} is in use by another jetproof command: {holders}. Wait for it to end, or stop it with Ctrl-C; never run `jetproof recover` or `jetproof init --recreate` while it runs (lock file {})",
        path.display()
    )]
    Held {
        what: String,
        path: PathBuf,
        holders: String,
    },
    /// Something jetproof did not make sits at the lock file's name. Bad input (exit 2).
    #[error(
        "{}: {reason}; jetproof never follows, rewrites or removes it. Move it away (it is where jetproof keeps the owner lock of {what})",
        path.display()
    )]
    Foreign {
        what: String,
        path: PathBuf,
        reason: String,
    },
    /// The lock file could not be made or locked (a read-only or full file system, no
    /// permission). Bad input for a writer (exit 2): it could not have written there either.
    #[error("{}: cannot take the owner lock of {what}: {source}", path.display())]
    Io {
        what: String,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// The locks one command holds; released when dropped (or by the kernel, at any exit).
#[derive(Debug, Default)]
pub struct OwnerLock {
    held: Vec<HeldLock>,
    /// Databases on block devices: an `O_EXCL` open held instead of a lock file
    /// (`crate::raw`).
    devices: Vec<crate::raw::ExclusiveHold>,
    /// Locks that could not be taken because their directory is read-only, for a reader only:
    /// nothing can write there, so there is nothing to exclude. One line each, for the test log.
    pub notes: Vec<String>,
}

#[derive(Debug)]
struct HeldLock {
    path: PathBuf,
    _file: File,
}

impl OwnerLock {
    /// The lock files held, for the test log.
    pub fn paths(&self) -> Vec<&Path> {
        self.held
            .iter()
            .map(|h| h.path.as_path())
            .chain(self.devices.iter().map(|d| d.path()))
            .collect()
    }

    /// Adds `other`'s locks to these (a run that first initialised its databases keeps init's
    /// locks for the whole command).
    pub fn absorb(&mut self, other: OwnerLock) {
        self.held.extend(other.held);
        self.devices.extend(other.devices);
        self.notes.extend(other.notes);
    }
}

/// Path of the lock file of a database file: `<database file>.jplock`.
pub fn database_lock_path(database_path: &Path) -> PathBuf {
    let mut name = database_path.as_os_str().to_os_string();
    name.push(LOCK_SUFFIX);
    PathBuf::from(name)
}

/// Locks every instance of the job for `command` (one of jetproof's commands, as its user typed
/// it, like "checksum" or "run --test performance"). An instance whose database does not exist
/// (nor is being made: no `.partial`, no lock file yet) is skipped: there is nothing to protect,
/// and the command refuses it for being missing.
pub fn lock_instances(job: &Job, access: Access, command: &str) -> Result<OwnerLock, LockError> {
    let mut lock = OwnerLock::default();
    let holder = Holder::this_process(command, access);
    for instance in job.instances() {
        let db_lock = database_lock_path(&instance.database_path);
        let partial = crate::target::partial_path(&instance.database_path);
        let present = [&instance.database_path, &partial, &db_lock]
            .iter()
            .any(|p| p.symlink_metadata().is_ok());
        if !present {
            continue;
        }
        let what = format!(
            "database {} ({})",
            instance.name,
            instance.database_path.display()
        );
        take_database(&mut lock, &instance.database_path, &what, &holder)?;
        if crate::target::is_block_device(&instance.log_path) {
            let what = format!(
                "the log of {} ({})",
                instance.name,
                instance.log_path.display()
            );
            take_device(&mut lock, &instance.log_path, &what)?;
        } else if instance.log_path.is_dir() {
            let what = format!(
                "the log of {} ({})",
                instance.name,
                instance.log_path.display()
            );
            take(
                &mut lock,
                &instance.log_path.join(LOG_LOCK_NAME),
                &what,
                &holder,
            )?;
        }
    }
    Ok(lock)
}

/// `init`'s locks, all exclusive: every instance's database and log, then the data directory's
/// (when the job uses one). Makes the directories (marked as jetproof's, as init would)
/// so the lock files have a place; call it after `jetproof_procedures::init::preflight` and run the
/// preflight again under the lock.
pub fn lock_for_init(job: &Job, command: &str) -> Result<OwnerLock, LockError> {
    let mut lock = OwnerLock::default();
    let holder = Holder::this_process(command, Access::Exclusive);
    let make_dir = |dir: &Path, what: &str| {
        crate::target::make_own_dir(dir).map_err(|source| LockError::Io {
            what: what.to_string(),
            path: dir.to_path_buf(),
            source,
        })
    };
    let data_dir = job.storage.instance.is_empty().then(|| {
        let dir = &job.storage.data_dir;
        (dir, format!("the data directory {}", dir.display()))
    });
    if let Some((dir, what)) = &data_dir {
        make_dir(dir, what)?;
    }
    // The instances first: a live owner of one of them refuses this init before it has made
    // anything, not even the data directory's lock file.
    for instance in job.instances() {
        let what = format!(
            "database {} ({})",
            instance.name,
            instance.database_path.display()
        );
        for dir in crate::target::instance_dirs(&instance) {
            make_dir(&dir, &what)?;
        }
        take_database(&mut lock, &instance.database_path, &what, &holder)?;
        let what = format!(
            "the log of {} ({})",
            instance.name,
            instance.log_path.display()
        );
        // A log on a device: the device held with O_EXCL, as a database's (`crate::logregion`).
        if crate::target::is_block_device(&instance.log_path) {
            take_device(&mut lock, &instance.log_path, &what)?;
        } else {
            take(
                &mut lock,
                &instance.log_path.join(LOG_LOCK_NAME),
                &what,
                &holder,
            )?;
        }
    }
    if let Some((dir, what)) = &data_dir {
        take(&mut lock, &dir.join(INIT_LOCK_NAME), what, &holder)?;
    }
    Ok(lock)
}

/// Refuses, creating nothing, when a writer holds any lock `init` would take: `init` checks
/// its targets before it makes its directories and takes [`lock_for_init`], and a live owner
/// must be named before a complaint about the targets it is using ("already holds a
/// database"). A shared probe (`LOCK_SH`, released at once) sees every exclusive holder and
/// never disturbs a reader; a writer starting in the same instant may be refused by it, which
/// costs nothing (exit 2, nothing done) and is never a second owner.
pub fn refuse_if_written(job: &Job) -> Result<(), LockError> {
    let mut files = Vec::new();
    for instance in job.instances() {
        files.push((
            database_lock_path(&instance.database_path),
            format!(
                "database {} ({})",
                instance.name,
                instance.database_path.display()
            ),
        ));
        files.push((
            instance.log_path.join(LOG_LOCK_NAME),
            format!(
                "the log of {} ({})",
                instance.name,
                instance.log_path.display()
            ),
        ));
    }
    if job.storage.instance.is_empty() {
        let dir = &job.storage.data_dir;
        files.push((
            dir.join(INIT_LOCK_NAME),
            format!("the data directory {}", dir.display()),
        ));
    }
    for (path, what) in files {
        if !path.symlink_metadata().is_ok_and(|m| m.is_file()) {
            continue;
        }
        let Ok(mut file) = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&path)
        else {
            continue;
        };
        // SAFETY: flock on a descriptor we own; it has no memory effects.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_SH | libc::LOCK_NB) } != 0 {
            let text = read_text(&mut file).unwrap_or_default();
            return Err(LockError::Held {
                what,
                path,
                holders: describe_holders(&text),
            });
        }
        // Closing the file releases the probe.
    }
    Ok(())
}

/// The owner lock of one database: `<database>.jplock` beside a file, an `O_EXCL` hold of a
/// block device.
fn take_database(
    lock: &mut OwnerLock,
    database: &Path,
    what: &str,
    holder: &Holder,
) -> Result<(), LockError> {
    if crate::target::is_block_device(database) {
        take_device(lock, database, what)
    } else {
        take(lock, &database_lock_path(database), what, holder)
    }
}

/// The owner lock of a database on a block device: the device opened with `O_EXCL` for the
/// command's life (no lock file beside a device node; a mount or another jetproof is then
/// refused by the kernel).
fn take_device(lock: &mut OwnerLock, device: &Path, what: &str) -> Result<(), LockError> {
    // Already held by this command (a run that initialised first, a sweep's points): a second
    // O_EXCL open of our own would be refused as busy.
    if crate::device::dev_num(device).is_some_and(crate::raw::held_here) {
        return Ok(());
    }
    match crate::raw::hold_exclusive(device) {
        Ok(hold) => {
            lock.devices.push(hold);
            Ok(())
        }
        Err(e) if e.raw_os_error() == Some(libc::EBUSY) => Err(LockError::Held {
            what: what.to_string(),
            path: device.to_path_buf(),
            holders:
                "another program (or another jetproof) holds the device open exclusively (O_EXCL)"
                    .to_string(),
        }),
        Err(source) => Err(LockError::Io {
            what: what.to_string(),
            path: device.to_path_buf(),
            source,
        }),
    }
}

/// Opens (or creates) one lock file, locks it without waiting and records `holder` in it.
fn take(lock: &mut OwnerLock, path: &Path, what: &str, holder: &Holder) -> Result<(), LockError> {
    let io_error = |source: std::io::Error| LockError::Io {
        what: what.to_string(),
        path: path.to_path_buf(),
        source,
    };
    let foreign = |reason: String| LockError::Foreign {
        what: what.to_string(),
        path: path.to_path_buf(),
        reason,
    };
    if let Ok(meta) = path.symlink_metadata()
        && !meta.file_type().is_file()
    {
        return Err(foreign(format!(
            "is {}, not jetproof's lock file",
            describe(meta.file_type())
        )));
    }
    let mut writable = true;
    let opened = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .mode(0o644)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path);
    let mut file = match opened {
        Ok(file) => file,
        // A reader on a read-only file system (a snapshot, a read-only mount) cannot create or
        // write the lock file, and needs no lock: nothing can write there either.
        Err(error)
            if holder.access == Access::Shared
                && matches!(
                    error.raw_os_error(),
                    Some(libc::EROFS) | Some(libc::EACCES) | Some(libc::EPERM)
                ) =>
        {
            match std::fs::OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_NOFOLLOW)
                .open(path)
            {
                Ok(file) => {
                    writable = false;
                    file
                }
                Err(_) => {
                    lock.notes.push(format!(
                        "No owner lock for {what}: {} cannot be created ({error}); read without one",
                        path.display()
                    ));
                    return Ok(());
                }
            }
        }
        Err(error) if error.raw_os_error() == Some(libc::ELOOP) => {
            return Err(foreign("is a symbolic link".into()));
        }
        Err(error) => return Err(io_error(error)),
    };
    let text = read_text(&mut file).map_err(io_error)?;
    if !text.is_empty() && !text.starts_with(LOCK_FILE_MARKER) {
        return Err(foreign(format!(
            "holds something else than jetproof's lock records (its first line is not \"{LOCK_FILE_MARKER}\")"
        )));
    }
    let operation = match holder.access {
        Access::Shared => libc::LOCK_SH,
        Access::Exclusive => libc::LOCK_EX,
    } | libc::LOCK_NB;
    // SAFETY: flock on a descriptor we own; it has no memory effects.
    if unsafe { libc::flock(file.as_raw_fd(), operation) } != 0 {
        let error = std::io::Error::last_os_error();
        if error.raw_os_error() != Some(libc::EWOULDBLOCK) {
            return Err(io_error(error));
        }
        // The holder may have rewritten the file since it was read above.
        let text = read_text(&mut file).map_err(io_error)?;
        return Err(LockError::Held {
            what: what.to_string(),
            path: path.to_path_buf(),
            holders: describe_holders(&text),
        });
    }
    if writable {
        // Under the lock: the records of other live holders (shared ones) are kept, those of
        // processes that are gone are dropped.
        let text = read_text(&mut file).map_err(io_error)?;
        let mut holders: Vec<Holder> = if holder.access == Access::Shared {
            parse_holders(&text)
                .into_iter()
                .filter(|h| h.access == Access::Shared && h.alive() != Some(false))
                .collect()
        } else {
            Vec::new()
        };
        holders.push(holder.clone());
        write_records(&file, &holders).map_err(io_error)?;
    }
    lock.held.push(HeldLock {
        path: path.to_path_buf(),
        _file: file,
    });
    Ok(())
}

fn describe(file_type: std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if file_type.is_symlink() {
        "a symbolic link"
    } else if file_type.is_dir() {
        "a directory"
    } else if file_type.is_fifo() {
        "a FIFO"
    } else if file_type.is_socket() {
        "a socket"
    } else {
        "a device"
    }
}

/// Reads the whole lock file (a few hundred bytes).
fn read_text(file: &mut File) -> std::io::Result<String> {
    let mut bytes = Vec::new();
    file.seek(SeekFrom::Start(0))?;
    file.take(1 << 20).read_to_end(&mut bytes)?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

fn parse_holders(text: &str) -> Vec<Holder> {
    text.lines()
        .filter(|line| line.starts_with('{'))
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect()
}

/// The records, written in one positional write and then cut to length, so a reader sees the
/// old text or the new one, never a mix of lines.
fn write_records(file: &File, holders: &[Holder]) -> std::io::Result<()> {
    let mut text = format!(
        "{LOCK_FILE_MARKER}: the processes below hold it while they work (the kernel's flock holds the lock; this text only names them). jetproof reuses this file; it is safe to delete when no jetproof command runs.\n"
    );
    for holder in holders {
        let line = serde_json::to_string(holder).map_err(std::io::Error::other)?;
        text.push_str(&line);
        text.push('\n');
    }
    file.write_all_at(text.as_bytes(), 0)?;
    file.set_len(text.len() as u64)?;
    Ok(())
}

/// The live holders named by a lock file, for the refusal.
fn describe_holders(text: &str) -> String {
    let holders = parse_holders(text);
    let live: Vec<&Holder> = holders
        .iter()
        .filter(|h| h.alive() != Some(false))
        .collect();
    if live.is_empty() {
        return "a process whose lock file names no live holder on this host (it may run on another host sharing this file system, or be just starting)".into();
    }
    live.iter()
        .map(|h| h.describe())
        .collect::<Vec<_>>()
        .join("; and ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn start_ticks_of_this_process_is_known_and_stable() {
        let first = start_ticks(std::process::id()).expect("own stat");
        assert_eq!(start_ticks(std::process::id()), Some(first));
        let holder = Holder::this_process("checksum", Access::Shared);
        assert_eq!(holder.alive(), Some(true));
        let gone = Holder {
            start_ticks: first.wrapping_add(1),
            ..holder
        };
        assert_eq!(gone.alive(), Some(false), "another start time: not us");
    }

    #[test]
    fn a_second_exclusive_taker_is_refused_naming_the_first() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("db.jplock");
        let mut first = OwnerLock::default();
        let holder = Holder::this_process("run --test performance", Access::Exclusive);
        take(&mut first, &path, "database db1", &holder).expect("first");
        let mut second = OwnerLock::default();
        let other = Holder::this_process("recover", Access::Exclusive);
        let error = take(&mut second, &path, "database db1", &other).expect_err("refused");
        let text = error.to_string();
        assert!(
            text.contains("`jetproof run --test performance` holds it exclusive"),
            "{text}"
        );
        assert!(
            text.contains(&format!("pid {}", std::process::id())),
            "{text}"
        );
        assert!(matches!(error, LockError::Held { .. }));
        // Readers are refused too while a writer holds it.
        let reader = Holder::this_process("checksum", Access::Shared);
        take(&mut second, &path, "database db1", &reader).expect_err("shared refused");
        drop(first);
        take(&mut second, &path, "database db1", &other).expect("free after the drop");
    }

    #[test]
    fn readers_share_and_both_are_named() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("db.jplock");
        let mut first = OwnerLock::default();
        take(
            &mut first,
            &path,
            "db",
            &Holder::this_process("checksum", Access::Shared),
        )
        .expect("first reader");
        let mut second = OwnerLock::default();
        take(
            &mut second,
            &path,
            "db",
            &Holder::this_process("run --test backup", Access::Shared),
        )
        .expect("second reader");
        let text = std::fs::read_to_string(&path).expect("read");
        assert_eq!(parse_holders(&text).len(), 2, "{text}");
        let mut writer = OwnerLock::default();
        let error = take(
            &mut writer,
            &path,
            "db",
            &Holder::this_process("recover", Access::Exclusive),
        )
        .expect_err("writer refused");
        let text = error.to_string();
        assert!(
            text.contains("`jetproof checksum` holds it shared")
                && text.contains("`jetproof run --test backup` holds it shared"),
            "{text}"
        );
    }

    #[test]
    fn symlink_foreign_lock_file_links_and_directories_are_refused_untouched() {
        let dir = tempfile::tempdir().expect("tempdir");
        let holder = Holder::this_process("init", Access::Exclusive);
        let foreign = dir.path().join("foreign.jplock");
        std::fs::write(&foreign, "my notes\n").expect("write");
        let error = take(&mut OwnerLock::default(), &foreign, "db", &holder).expect_err("foreign");
        assert!(matches!(error, LockError::Foreign { .. }), "{error}");
        assert_eq!(
            std::fs::read_to_string(&foreign).expect("read"),
            "my notes\n"
        );

        let victim = dir.path().join("victim");
        std::fs::write(&victim, "theirs").expect("write");
        let link = dir.path().join("link.jplock");
        std::os::unix::fs::symlink(&victim, &link).expect("symlink");
        let error = take(&mut OwnerLock::default(), &link, "db", &holder).expect_err("link");
        assert!(error.to_string().contains("symbolic link"), "{error}");
        assert_eq!(std::fs::read_to_string(&victim).expect("read"), "theirs");

        let dangling = dir.path().join("dangling.jplock");
        std::os::unix::fs::symlink(dir.path().join("nowhere"), &dangling).expect("symlink");
        take(&mut OwnerLock::default(), &dangling, "db", &holder).expect_err("dangling");
        assert!(
            !dir.path().join("nowhere").exists(),
            "nothing made through it"
        );
    }

    #[test]
    fn a_stale_lock_file_is_reused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("db.jplock");
        let dead = Holder {
            pid: u32::MAX,
            ..Holder::this_process("run --test stress", Access::Exclusive)
        };
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .expect("create");
        write_records(&file, &[dead]).expect("write");
        drop(file);
        let mut lock = OwnerLock::default();
        take(
            &mut lock,
            &path,
            "db",
            &Holder::this_process("recover", Access::Exclusive),
        )
        .expect("a record whose process is gone does not hold the lock");
        let holders = parse_holders(&std::fs::read_to_string(&path).expect("read"));
        assert_eq!(holders.len(), 1);
        assert_eq!(holders[0].command, "recover");
    }
}
