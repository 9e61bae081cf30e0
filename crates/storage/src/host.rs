//! What this host and the files already there allow, checked before a command writes anything
//! (`docs/refusals.md`: an impossible setting gets one message naming the key and the fix, exit 2,
//! before any I/O; nothing is deleted or created first). The job's own checks (`Job::validate`)
//! need no I/O; these need the host: its memory and thread limits, its file systems, and the
//! databases already made.
//!
//! * **Memory.** Every instance's cache may grow to `cache.max_size`, and all instances live in
//!   one process: the sum over instances of the caches and the log buffers must fit in the
//!   machine's memory, which is `MemTotal` of `/proc/meminfo`, or the process's cgroup memory
//!   limit when that is lower (v2 `memory.max`, v1 `memory.limit_in_bytes`, the lowest along the
//!   cgroup's path). Above it the job is refused; above `MemAvailable` only (memory other
//!   programs hold now) it is a warning, since the kernel can reclaim much of that. `init` checks
//!   the job it makes databases for as a whole, so an impossible run is refused before the fill.
//! * **Threads.** Sessions and each instance's background threads against the kernel's
//!   `threads-max` and the cgroup's `pids.max`.
//! * **Paths.** A device or other non-regular file where a database file is expected; a
//!   directory that cannot be written (a read-only file system); a file system that refuses
//!   direct I/O, probed on a scratch file jetproof creates (`O_EXCL`, so never an existing file)
//!   and removes at once.
//! * **Existing databases**: the job's `storage.page_size` must be the one they were made with.
//!
//! Every figure the checks compare is read by a small function and passed to a pure one, so the
//! rules are unit-tested with any machine's figures.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use jetproof_engine::DbHeader;
use jetproof_io::std_backend::StdBackend;
use jetproof_io::{AlignedBuf, IoBackend, IoClass, IoError, OpenOptions};
use jetproof_job::{ByteSize, Instance, Job, Threads};

use crate::{BadInput, bad};

/// Threads an instance runs besides its sessions: the cache's flusher, the log's writer, the
/// checkpointer, background maintenance, the replication sender, recovery's readers (8), with
/// room to spare.
const THREADS_PER_INSTANCE: u64 = 16;

/// Threads of the process besides the instances' (the main thread, sampling, progress).
const THREADS_FIXED: u64 = 16;

/// The machine's memory as the checks see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HostMemory {
    /// `MemTotal` of `/proc/meminfo`.
    pub total_bytes: u64,
    /// `MemAvailable` of `/proc/meminfo`: what can be had now without swapping.
    pub available_bytes: u64,
    /// The lowest memory limit of the process's cgroup and its ancestors, if any is set.
    pub cgroup_limit_bytes: Option<u64>,
}

impl HostMemory {
    /// This machine's figures, or None where `/proc/meminfo` cannot be read (then nothing is
    /// checked: jetproof does not refuse a job on a guess).
    pub fn read() -> Option<HostMemory> {
        let (total_bytes, available_bytes) =
            parse_meminfo(&std::fs::read_to_string("/proc/meminfo").ok()?)?;
        Some(HostMemory {
            total_bytes,
            available_bytes,
            cgroup_limit_bytes: cgroup_limit("memory", &["memory.max", "memory.limit_in_bytes"]),
        })
    }

    /// The most the process can hold: `MemTotal`, or the cgroup's limit when lower.
    pub fn limit_bytes(&self) -> u64 {
        self.cgroup_limit_bytes
            .map_or(self.total_bytes, |limit| limit.min(self.total_bytes))
    }

    fn limit_source(&self) -> &'static str {
        match self.cgroup_limit_bytes {
            Some(limit) if limit < self.total_bytes => "the memory limit of this process's cgroup",
            _ => "MemTotal in /proc/meminfo",
        }
    }
}

/// `MemTotal` and `MemAvailable` of a `/proc/meminfo` text, in bytes.
pub fn parse_meminfo(text: &str) -> Option<(u64, u64)> {
    let field = |name: &str| {
        text.lines()
            .find_map(|line| line.strip_prefix(name)?.strip_prefix(':'))
            .and_then(|rest| rest.trim().strip_suffix("kB"))
            .and_then(|kib| kib.trim().parse::<u64>().ok())
            .map(|kib| kib.saturating_mul(1024))
    };
    let total = field("MemTotal")?;
    // Kernels before 3.14 have no MemAvailable: take MemFree, the lower figure.
    let available = field("MemAvailable").or_else(|| field("MemFree"))?;
    Some((total, available))
}

/// A cgroup limit file's value: a number of bytes (or pids), or None for no limit ("max", or
/// the huge number cgroup v1 writes for none).
pub fn parse_cgroup_limit(text: &str) -> Option<u64> {
    let value = text.trim().parse::<u64>().ok()?;
    (value < 1 << 62).then_some(value)
}

/// The lowest limit in any of `files` along this process's cgroup path of `controller` (and the
/// cgroup root as mounted, which is all a container sees of itself).
fn cgroup_limit(controller: &str, files: &[&str]) -> Option<u64> {
    let membership = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let mut dirs = Vec::new();
    for line in membership.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(_), Some(controllers), Some(path)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        let path = path.trim_start_matches('/');
        let roots: Vec<PathBuf> = if controllers.is_empty() {
            // cgroup v2 (unified), mounted at /sys/fs/cgroup or, on hybrid hosts, under it.
            vec![
                PathBuf::from("/sys/fs/cgroup"),
                PathBuf::from("/sys/fs/cgroup/unified"),
            ]
        } else if controllers.split(',').any(|c| c == controller) {
            vec![PathBuf::from("/sys/fs/cgroup").join(controller)]
        } else {
            continue;
        };
        for root in roots {
            let mut dir = root.join(path);
            loop {
                dirs.push(dir.clone());
                if dir == root || !dir.pop() {
                    break;
                }
            }
        }
    }
    dirs.iter()
        .flat_map(|dir| files.iter().map(move |file| dir.join(file)))
        .filter_map(|file| std::fs::read_to_string(file).ok())
        .filter_map(|text| parse_cgroup_limit(&text))
        .min()
}

/// A size for a reader: MiB, GiB or TiB with one decimal.
fn human(bytes: u64) -> String {
    let value = bytes as f64;
    let (unit, scale) = [("TiB", 1u64 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20)]
        .into_iter()
        .find(|&(_, scale)| bytes >= scale)
        .unwrap_or(("KiB", 1 << 10));
    format!("{:.1} {unit}", value / scale as f64)
}

/// What every instance may hold at once: its cache at `cache.max_size` and its log buffer.
pub fn memory_needed_bytes(job: &Job) -> u64 {
    let per_instance = job
        .cache
        .max_size
        .bytes()
        .saturating_add(job.log.buffer_size.bytes());
    per_instance.saturating_mul(job.instance_count() as u64)
}

/// Refuses a job whose caches cannot fit in this machine's memory (see the module's header).
pub fn check_memory(job: &Job, memory: &HostMemory) -> Result<(), BadInput> {
    let needed = memory_needed_bytes(job);
    let limit = memory.limit_bytes();
    if needed <= limit {
        return Ok(());
    }
    let instances = job.instance_count().max(1) as u64;
    // The largest cache that fits with the log buffers, in whole MiB.
    let fitting = (limit / instances)
        .saturating_sub(job.log.buffer_size.bytes())
        .saturating_div(ByteSize::MIB)
        .saturating_mul(ByteSize::MIB);
    Err(bad(
        "cache.max_size",
        format!(
            "{} per instance x {instances} instance(s), with the log buffers (log.buffer_size), needs {} of memory, and this machine has {} ({}); give a cache.max_size of at most {} (less, to leave room for the host; Jetstress uses 256MiB), or fewer databases",
            job.cache.max_size,
            human(needed),
            human(limit),
            memory.limit_source(),
            ByteSize(fitting),
        ),
    ))
}

/// A warning when the caches fit in the machine's memory but not in what is available now.
pub fn memory_warning(job: &Job, memory: &HostMemory) -> Option<String> {
    let needed = memory_needed_bytes(job);
    (needed > memory.available_bytes && needed <= memory.limit_bytes()).then(|| {
        format!(
            "warning: the caches and log buffers may grow to {} and only {} is available now (MemAvailable); the run may swap or be stopped by the kernel's out-of-memory killer (cache.max_size)",
            human(needed),
            human(memory.available_bytes)
        )
    })
}

/// The most threads this process may start, as far as the host tells.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HostThreads {
    /// `/proc/sys/kernel/threads-max`, and the cgroup's `pids.max` when lower.
    pub limit: Option<u64>,
}

impl HostThreads {
    pub fn read() -> HostThreads {
        let kernel = std::fs::read_to_string("/proc/sys/kernel/threads-max")
            .ok()
            .and_then(|t| parse_cgroup_limit(&t));
        let cgroup = cgroup_limit("pids", &["pids.max"]);
        HostThreads {
            limit: [kernel, cgroup].into_iter().flatten().min(),
        }
    }
}

/// Threads a run of the job may start: every instance's sessions (with `threads = "auto"`, the
/// most auto-tune tries) and background threads.
pub fn threads_needed(job: &Job) -> u64 {
    let sessions = match job.workload.threads {
        Threads::Fixed(n) => u64::from(n),
        Threads::Auto => u64::from(jetproof_job::AUTO_MAX_SESSIONS),
    };
    (sessions + THREADS_PER_INSTANCE) * job.instance_count() as u64 + THREADS_FIXED
}

/// Refuses a job that would start more threads than the host allows.
pub fn check_threads(job: &Job, threads: &HostThreads) -> Result<(), BadInput> {
    let needed = threads_needed(job);
    match threads.limit {
        Some(limit) if needed > limit => Err(bad(
            "workload.threads",
            format!(
                "{} session(s) per instance x {} instance(s), with their background threads, need about {needed} threads, and this host allows {limit} (kernel.threads-max, or the cgroup's pids.max); give fewer sessions per database (a number, not \"auto\") or fewer databases",
                match job.workload.threads {
                    Threads::Fixed(n) => n.to_string(),
                    Threads::Auto => format!("up to {} (auto)", jetproof_job::AUTO_MAX_SESSIONS),
                },
                job.instance_count()
            ),
        )),
        _ => Ok(()),
    }
}

/// The checks of memory and threads against this host: what every command that attaches
/// databases (`init`, `run`, `recover`) runs first.
pub fn check_job_fits(job: &Job) -> Result<(), BadInput> {
    if let Some(memory) = HostMemory::read() {
        check_memory(job, &memory)?;
    }
    check_threads(job, &HostThreads::read())
}

/// [`check_database_file`] for every instance of the job: no file is read or made, so it runs
/// before the owner lock, whose lock file would otherwise be made beside a device.
pub fn check_database_files(job: &Job) -> Result<(), BadInput> {
    for instance in job.instances() {
        // A block device gets the same safety checks and words from every command
        // (`crate::device`), and must hold jetproof's marker; a database there opens as a file
        // (`crate::raw`), a log there is a log region (`crate::logregion`).
        if crate::target::is_block_device(&instance.log_path) {
            let field = format!("log_path of {}", instance.name);
            crate::device::check_device(
                &instance.log_path,
                &field,
                crate::device::DeviceUse::Existing,
                crate::device::rules(job, &[]),
            )?;
            // A log region beside a database in a file (`crate::logregion`); the rest is not
            // built.
            crate::logregion::check_existing(&instance)?;
        }
        if crate::target::is_block_device(&instance.database_path) {
            crate::device::check_device(
                &instance.database_path,
                &format!("database path of {}", instance.name),
                crate::device::DeviceUse::Existing,
                crate::device::rules(job, &[]),
            )?;
            continue;
        }
        check_database_file(&instance)?;
    }
    Ok(())
}

/// What can be checked before the owner lock is taken (`crate::lock` makes its lock files beside
/// the databases and in the log directories): no file is read or made. Every database path holds
/// a regular file or nothing; for a command that writes (`writes`), every existing database and
/// its log directory can be written (a read-only file system is named as such).
pub fn check_before_lock(job: &Job, writes: bool) -> Result<(), BadInput> {
    check_database_files(job)?;
    if writes {
        for instance in job.instances() {
            if instance.database_path.is_file() {
                check_writable_file(
                    &instance.database_path,
                    &format!("database of {}", instance.name),
                )?;
                if !crate::target::is_block_device(&instance.log_path) {
                    check_writable_dir(
                        &instance.log_path,
                        &format!("log directory of {}", instance.name),
                    )?;
                }
            }
        }
    }
    Ok(())
}

/// What kind of thing is at a path, in words, when it is not a regular file (after following
/// symlinks); None for a regular file or nothing at all.
fn not_a_file(path: &Path) -> Option<&'static str> {
    let meta = std::fs::metadata(path).ok()?;
    let kind = meta.file_type();
    if kind.is_file() {
        None
    } else if kind.is_block_device() {
        Some("a block device")
    } else if kind.is_char_device() {
        Some("a character device")
    } else if kind.is_dir() {
        Some("a directory")
    } else if kind.is_fifo() {
        Some("a named pipe")
    } else if kind.is_socket() {
        Some("a socket")
    } else {
        Some("not a regular file")
    }
}

/// Refuses a database path that holds a device, directory or anything but a regular file: the
/// engine keeps its databases in files (raw devices are measured with `jetproof probe`).
pub fn check_database_file(instance: &Instance) -> Result<(), BadInput> {
    let path = &instance.database_path;
    let Some(kind) = not_a_file(path) else {
        return Ok(());
    };
    let fix = if kind == "a block device" {
        "databases on raw devices are not supported yet: put a file system on the device and give a path on it (`jetproof probe --allow-device` measures the raw device)"
    } else {
        "give the path of a database file (`jetproof init` makes it)"
    };
    Err(bad(
        format!("database path of {}", instance.name),
        format!("{} is {kind}, not a database file; {fix}", path.display()),
    ))
}

/// The nearest directory that exists at or above `path` (where a missing directory would be
/// created), or the error of the first thing in the way that is not a directory.
fn existing_ancestor(path: &Path, field: &str) -> Result<PathBuf, BadInput> {
    let mut probe = if path.as_os_str().is_empty() {
        PathBuf::from(".")
    } else {
        path.to_path_buf()
    };
    loop {
        match std::fs::metadata(&probe) {
            Ok(meta) if meta.is_dir() => return Ok(probe),
            Ok(_) => {
                return Err(bad(
                    field,
                    format!(
                        "{} is in the way: it exists and is not a directory; choose another path",
                        probe.display()
                    ),
                ));
            }
            Err(_) => {
                if !probe.pop() || probe.as_os_str().is_empty() {
                    return Ok(PathBuf::from("."));
                }
            }
        }
    }
}

/// Refuses a directory (or, when it does not exist yet, the directory it would be made in) that
/// this process cannot write: a read-only file system, or no permission.
pub fn check_writable_dir(dir: &Path, field: &str) -> Result<(), BadInput> {
    let existing = existing_ancestor(dir, field)?;
    let Ok(cpath) = CString::new(existing.as_os_str().as_bytes()) else {
        return Ok(());
    };
    // SAFETY: cpath is NUL-terminated; access only reads it. It reports EROFS even to root.
    let rc = unsafe { libc::access(cpath.as_ptr(), libc::W_OK | libc::X_OK) };
    if rc == 0 {
        return Ok(());
    }
    let error = std::io::Error::last_os_error();
    let why = if error.raw_os_error() == Some(libc::EROFS) {
        "it is on a read-only file system".to_string()
    } else {
        format!("this user cannot write there ({error})")
    };
    Err(bad(
        field,
        format!(
            "{} cannot be written: {why}; choose a writable directory (or remount the file system read-write)",
            existing.display()
        ),
    ))
}

/// Refuses a file that must be written but cannot be (read-only file system, no permission).
fn check_writable_file(path: &Path, field: &str) -> Result<(), BadInput> {
    let Ok(cpath) = CString::new(path.as_os_str().as_bytes()) else {
        return Ok(());
    };
    // SAFETY: as in check_writable_dir.
    let rc = unsafe { libc::access(cpath.as_ptr(), libc::W_OK) };
    if rc == 0 {
        return Ok(());
    }
    let error = std::io::Error::last_os_error();
    let why = if error.raw_os_error() == Some(libc::EROFS) {
        "it is on a read-only file system".to_string()
    } else {
        format!("this user cannot write it ({error})")
    };
    Err(bad(
        field,
        format!(
            "{} cannot be written: {why}; this command writes to the database (use `jetproof checksum` to verify a read-only copy)",
            path.display()
        ),
    ))
}

fn direct_io_refused(dir: &Path, field: &str) -> BadInput {
    bad(
        field,
        format!(
            "the file system of {} refuses direct I/O (O_DIRECT), or keeps its files in memory as tmpfs does; put the data on a disk-backed file system, or set `storage.direct_io = false` in the job (results then measure the host's page cache)",
            dir.display()
        ),
    )
}

/// Probes the directory `dir` (or, when it does not exist yet, the directory it would be made
/// in): a scratch file is created there with `O_EXCL` and `O_NOFOLLOW` (so no existing file is
/// ever touched), and removed at once. That finds what `access` cannot (a file system such as
/// /proc that takes no new files); with `direct`, the file is also opened for direct I/O as the
/// databases will be and one aligned block is written, which finds a file system that refuses
/// O_DIRECT, or accepts it and keeps the data in memory (tmpfs).
pub fn probe_dir(dir: &Path, field: &str, direct: bool) -> Result<(), BadInput> {
    check_writable_dir(dir, field)?;
    let existing = existing_ancestor(dir, field)?;
    let scratch = existing.join(format!(
        ".jetproof-probe.{}.{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0)
    ));
    let created = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&scratch);
    if let Err(error) = created {
        return Err(bad(
            field,
            format!(
                "cannot create a file in {} ({error}); choose a writable directory",
                existing.display()
            ),
        ));
    }
    let outcome = if direct {
        (|| -> Result<(), IoError> {
            let file =
                StdBackend::new().open(&scratch, &OpenOptions::read_write().with_direct(true))?;
            let data = AlignedBuf::zeroed(file.logical_block_size().max(512));
            file.write_at(&data, 0, IoClass::DbWrite)
        })()
    } else {
        Ok(())
    };
    let _ = std::fs::remove_file(&scratch);
    match outcome {
        Ok(()) => Ok(()),
        Err(IoError::DirectIoUnsupported { .. }) => Err(direct_io_refused(&existing, field)),
        Err(IoError::Os { source, .. } | IoError::Path { source, .. })
            if source.raw_os_error() == Some(libc::EINVAL) =>
        {
            Err(direct_io_refused(&existing, field))
        }
        Err(other) => Err(bad(
            field,
            format!(
                "a direct I/O probe in {} failed ({other}); choose another directory",
                existing.display()
            ),
        )),
    }
}

/// What `init` checks of every directory it would create or fill, after the targets' own checks
/// (foreign files, devices, free space): it can be written, and takes direct I/O when the job
/// asks for it ([`probe_dir`]).
pub fn check_new_targets(job: &Job) -> Result<(), BadInput> {
    let mut seen: Vec<PathBuf> = Vec::new();
    for instance in job.instances() {
        for dir in crate::target::instance_dirs(&instance) {
            let field = if job.storage.instance.is_empty() {
                "storage.data_dir".to_string()
            } else {
                format!("directory of {}", instance.name)
            };
            let existing = existing_ancestor(&dir, &field)?;
            if seen.contains(&existing) {
                continue;
            }
            probe_dir(&existing, &field, job.storage.direct_io)?;
            seen.push(existing);
        }
    }
    Ok(())
}

/// Refuses every directory `init` would create or fill that cannot be written, with `access`
/// only (no file made): run before the targets' own checks, so a read-only path is named as
/// such and not as a lack of free space.
pub fn check_new_dirs_writable(job: &Job) -> Result<(), BadInput> {
    for instance in job.instances() {
        for dir in crate::target::instance_dirs(&instance) {
            let field = if job.storage.instance.is_empty() {
                "storage.data_dir".to_string()
            } else {
                format!("directory of {}", instance.name)
            };
            check_writable_dir(&dir, &field)?;
        }
    }
    Ok(())
}

/// What a command checks of the databases that exist, before it writes (`writes`) or only
/// reads them: each is a regular file made with the job's page size; for a writer, the file and
/// its log directory are writable, and both take direct I/O when the job asks for it. A database
/// that does not exist, or whose header cannot be read, is left to the command's own checks
/// (a missing database is bad input there; a damaged header is a storage error).
///
/// The files are opened through the portable backend whatever the job's engine: these checks
/// read one header and open files, the same on every engine.
pub fn check_existing(job: &Job, instances: &[Instance], writes: bool) -> Result<(), BadInput> {
    let backend = StdBackend::new();
    for instance in instances {
        // A database on a device (its safety checks passed, `check_database_files`) opens
        // through the job's device permission (`crate::raw`); its log directory is a directory.
        if job.storage.allow_devices && crate::target::is_block_device(&instance.database_path) {
            let devices = crate::raw::wrap(job, backend.clone());
            check_page_size(job, devices.as_ref(), instance)?;
            if writes {
                let log_field = format!("log directory of {}", instance.name);
                // A log device was checked by its own rules (`crate::logregion::check_existing`).
                if !crate::target::is_block_device(&instance.log_path) {
                    probe_dir(&instance.log_path, &log_field, job.storage.direct_io)?;
                }
            }
            continue;
        }
        check_database_file(instance)?;
        let path = &instance.database_path;
        if !path.is_file() {
            continue;
        }
        check_page_size(job, backend.as_ref(), instance)?;
        if !writes {
            continue;
        }
        let field = format!("database of {}", instance.name);
        check_writable_file(path, &field)?;
        if job.storage.direct_io {
            match backend.open(path, &OpenOptions::read_write().with_direct(true)) {
                Err(IoError::DirectIoUnsupported { .. }) => {
                    return Err(direct_io_refused(path.parent().unwrap_or(path), &field));
                }
                Err(IoError::Path { source, .. })
                    if source.raw_os_error() == Some(libc::EINVAL) =>
                {
                    return Err(direct_io_refused(path.parent().unwrap_or(path), &field));
                }
                _ => {}
            }
        }
        let log_field = format!("log directory of {}", instance.name);
        // A log device was checked by its own rules (`crate::logregion::check_existing`).
        if !crate::target::is_block_device(&instance.log_path) {
            probe_dir(&instance.log_path, &log_field, job.storage.direct_io)?;
        }
    }
    Ok(())
}

/// Refuses a job whose `storage.page_size` is not the page size `instance`'s database was made
/// with: the figures of a run (flush thresholds, sizes in pages, the cache in pages) would be
/// computed with the wrong one. Adopting the database's size silently would hide that the job
/// describes other databases; a page size is fixed when `init` makes the database.
pub fn check_page_size(
    job: &Job,
    backend: &dyn IoBackend,
    instance: &Instance,
) -> Result<(), BadInput> {
    let Ok(file) = backend.open(
        &instance.database_path,
        &OpenOptions::read_only().buffered(),
    ) else {
        return Ok(());
    };
    let Ok(header) = DbHeader::read(file.as_ref()) else {
        return Ok(());
    };
    let made_with = u64::from(header.page_size);
    if made_with == job.storage.page_size.bytes() {
        return Ok(());
    }
    Err(bad(
        "storage.page_size",
        format!(
            "is {}, and {} was made with {} pages; set `storage.page_size = \"{}\"` in the job (a database's page size is fixed when `jetproof init` makes it), or make new databases with `jetproof init --recreate`",
            job.storage.page_size,
            instance.database_path.display(),
            ByteSize(made_with),
            ByteSize(made_with)
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIB: u64 = ByteSize::GIB;

    fn memory(total_gib: u64, available_gib: u64, cgroup_gib: Option<u64>) -> HostMemory {
        HostMemory {
            total_bytes: total_gib * GIB,
            available_bytes: available_gib * GIB,
            cgroup_limit_bytes: cgroup_gib.map(|g| g * GIB),
        }
    }

    fn job_with_cache(max: ByteSize, databases: u32) -> Job {
        let mut job = Job::default();
        job.storage.databases = databases;
        job.cache.max_size = max;
        job
    }

    #[test]
    fn meminfo_gives_total_and_available_in_bytes() {
        let text = "MemTotal:       24683656 kB\nMemFree:        20462572 kB\nMemAvailable:   23480940 kB\n";
        assert_eq!(
            parse_meminfo(text),
            Some((24683656 * 1024, 23480940 * 1024))
        );
        // An old kernel without MemAvailable: MemFree.
        let old = "MemTotal: 100 kB\nMemFree: 40 kB\n";
        assert_eq!(parse_meminfo(old), Some((102400, 40960)));
        assert_eq!(parse_meminfo("nonsense"), None);
    }

    #[test]
    fn cgroup_limits_read_max_and_the_v1_unlimited_value_as_none() {
        assert_eq!(parse_cgroup_limit("max\n"), None);
        assert_eq!(parse_cgroup_limit("9223372036854771712\n"), None);
        assert_eq!(parse_cgroup_limit("4294967296\n"), Some(4 * GIB));
        assert_eq!(parse_cgroup_limit("4096"), Some(4096));
    }

    #[test]
    fn a_cache_larger_than_the_machine_is_refused_naming_the_key_and_the_fix() {
        let job = job_with_cache(ByteSize(64 << 40), 2);
        let error = check_memory(&job, &memory(24, 22, None)).expect_err("64 TiB > 24 GiB");
        assert_eq!(error.field, "cache.max_size");
        for needle in ["64TiB", "2 instance(s)", "24.0 GiB", "MemTotal", "at most"] {
            assert!(error.message.contains(needle), "{needle}: {error}");
        }
        // The fix it gives fits.
        let mut fixed = job.clone();
        fixed.cache.max_size = ByteSize(
            (24 * GIB / 2 - fixed.log.buffer_size.bytes()) / ByteSize::MIB * ByteSize::MIB,
        );
        check_memory(&fixed, &memory(24, 22, None)).expect("the suggested size fits");
    }

    #[test]
    fn the_sum_over_instances_counts_not_one_cache() {
        // 8 GiB each fits alone in 24 GiB, four of them do not.
        let job = job_with_cache(ByteSize::gib(8), 4);
        let error = check_memory(&job, &memory(24, 22, None)).expect_err("32 GiB > 24 GiB");
        assert!(error.message.contains("4 instance(s)"), "{error}");
        check_memory(&job_with_cache(ByteSize::gib(8), 2), &memory(24, 22, None))
            .expect("16 GiB fits");
    }

    #[test]
    fn a_cgroup_limit_below_the_machine_is_the_limit_and_is_named() {
        let job = job_with_cache(ByteSize::gib(4), 2);
        check_memory(&job, &memory(24, 22, None)).expect("fits the machine");
        let error = check_memory(&job, &memory(24, 22, Some(6))).expect_err("not the cgroup");
        assert!(error.message.contains("cgroup"), "{error}");
        // A cgroup limit above the machine's memory changes nothing.
        check_memory(&job, &memory(24, 22, Some(64))).expect("the machine's memory rules");
    }

    #[test]
    fn above_available_memory_is_a_warning_not_a_refusal() {
        let job = job_with_cache(ByteSize::gib(8), 2);
        let host = memory(24, 10, None);
        check_memory(&job, &host).expect("16 GiB fits in 24");
        let warning = memory_warning(&job, &host).expect("16 GiB > 10 GiB available");
        assert!(warning.contains("MemAvailable"), "{warning}");
        assert_eq!(memory_warning(&job, &memory(24, 20, None)), None);
    }

    #[test]
    fn too_many_threads_are_refused_naming_the_sessions() {
        let mut job = Job::default();
        job.storage.databases = 1024;
        job.workload.threads = Threads::Fixed(256);
        let error = check_threads(&job, &HostThreads { limit: Some(4096) }).expect_err("refused");
        assert_eq!(error.field, "workload.threads");
        assert!(error.message.contains("4096"), "{error}");
        check_threads(&job, &HostThreads { limit: None }).expect("no limit known");
        check_threads(&Job::default(), &HostThreads { limit: Some(4096) }).expect("default");
    }

    #[test]
    fn a_read_only_directory_is_refused_before_anything_is_made() {
        // /proc takes no new files or directories, whatever `access` says to root.
        let error = probe_dir(
            Path::new("/proc/jetproof-test/data"),
            "storage.data_dir",
            false,
        )
        .expect_err("refused");
        assert!(error.message.contains("/proc"), "{error}");
        let dir = tempfile::tempdir().expect("tempdir");
        check_writable_dir(&dir.path().join("new/deeper"), "storage.data_dir").expect("writable");
    }

    #[test]
    fn the_direct_io_probe_leaves_nothing_behind() {
        let dir = tempfile::tempdir().expect("tempdir");
        // Whatever this file system says of direct I/O, the scratch file is gone afterwards.
        probe_dir(dir.path(), "storage.data_dir", false).expect("a temporary directory");
        let _ = probe_dir(dir.path(), "storage.data_dir", true);
        let left: Vec<_> = std::fs::read_dir(dir.path())
            .expect("list")
            .filter_map(|e| e.ok())
            .collect();
        assert!(left.is_empty(), "{left:?}");
    }

    #[test]
    fn a_character_device_is_not_a_database_file() {
        let instance = Instance {
            name: "db1".into(),
            database_path: PathBuf::from("/dev/null"),
            log_path: PathBuf::from("/tmp"),
        };
        let error = check_database_file(&instance).expect_err("refused");
        assert!(error.message.contains("character device"), "{error}");
    }
}
