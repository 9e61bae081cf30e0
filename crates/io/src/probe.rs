//! `jetproof probe`: raw random or sequential I/O through this layer, to know a device before a
//! test (and, in reports, to say what share of it a test used).
//!
//! Two engines keep `queue_depth` I/Os outstanding for the whole run:
//! * io_uring: one thread, a [`crate::uring::UringQueue`] of registered buffers; each completion
//!   is recorded and its slot resubmitted at once (what fio's io_uring engine does);
//! * std: `queue_depth` threads each doing synchronous positional I/O through
//!   [`crate::meter::MeteredFile`] (what fio's psync engine with as many jobs does).
//!
//! Latency is from submission to completion, recorded into the same histograms as every other
//! I/O of jetproof (class `db_read` for reads, `db_write` for writes).
//!
//! Data safety (`docs/refusals.md`): probe writes only into a file it created itself. A file it
//! creates begins with a 4 KiB header block carrying [`PROBE_MAGIC`]; I/O never touches that
//! block, so the mark survives and a later probe may write into the file again. Any other existing
//! file is only read (`read_percent` 100) or refused; a block device needs `allow_device`. Every
//! check runs before the first I/O.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::hist::ClassSummary;
use crate::meter::{InstanceSnapshot, InstanceStats, MeteredFile};
use crate::sample::{DiskSample, Sampler, process_cpu_time};
use crate::uring::{Completion, UringBackend, UringFile};
use crate::{AlignedBuf, BackendChoice, IoClass, IoError, IoFile, OpenOptions, select_backend};

/// First bytes of a file made by probe.
pub const PROBE_MAGIC: &[u8; 16] = b"JETPROOF-PROBE\x001";
/// Size of the header block that carries the mark; I/O starts after it.
pub const HEADER_BYTES: u64 = 4096;

/// Random or sequential offsets.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Pattern {
    Random,
    Sequential,
}

/// What to run.
#[derive(Clone, Debug)]
pub struct ProbeSpec {
    pub path: PathBuf,
    pub block_size: u64,
    /// Share of reads, 0..=100; the rest are writes.
    pub read_percent: u32,
    pub queue_depth: usize,
    pub duration: Duration,
    pub pattern: Pattern,
    /// Size of the file to create when it is absent.
    pub file_size: u64,
    pub backend: BackendChoice,
    /// O_DIRECT (default). Off measures the page cache, and the report says so.
    pub direct: bool,
    pub allow_device: bool,
    pub seed: u64,
}

/// Why probe did not run.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    /// A flag or the target is unusable; nothing was done.
    #[error("{flag}: {message}")]
    BadInput { flag: &'static str, message: String },
    /// The target was refused by the I/O layer before any I/O (device, direct I/O, alignment).
    #[error(transparent)]
    Refused(IoError),
    /// An I/O failed while running.
    #[error(transparent)]
    Io(#[from] IoError),
}

fn bad(flag: &'static str, message: impl Into<String>) -> ProbeError {
    ProbeError::BadInput {
        flag,
        message: message.into(),
    }
}

/// Checks the flags alone, before looking at the target.
pub fn validate(spec: &ProbeSpec) -> Result<(), ProbeError> {
    if spec.block_size == 0 || !spec.block_size.is_multiple_of(512) {
        return Err(bad(
            "--block-size",
            format!(
                "{} bytes is not a multiple of 512; direct I/O moves whole sectors (try 4KiB, 8KiB or 32KiB)",
                spec.block_size
            ),
        ));
    }
    if spec.block_size > 64 << 20 {
        return Err(bad("--block-size", "at most 64MiB"));
    }
    if spec.read_percent > 100 {
        return Err(bad(
            "--read-percent",
            format!(
                "{} is over 100; give the share of reads, 0 to 100",
                spec.read_percent
            ),
        ));
    }
    if spec.queue_depth == 0 || spec.queue_depth > 4096 {
        return Err(bad(
            "--queue-depth",
            format!("{} is outside 1..=4096", spec.queue_depth),
        ));
    }
    if spec.duration.is_zero() {
        return Err(bad("--duration", "must be longer than zero, like 10s"));
    }
    if spec.file_size < HEADER_BYTES + spec.block_size {
        return Err(bad(
            "--file-size",
            format!(
                "{} bytes cannot hold the 4KiB header and one {}-byte block",
                spec.file_size, spec.block_size
            ),
        ));
    }
    Ok(())
}

/// What probe measured; `--json` prints it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ProbeReport {
    pub path: PathBuf,
    pub backend: String,
    pub direct_io: bool,
    pub pattern: Pattern,
    pub block_size_bytes: u64,
    pub read_percent: u32,
    pub queue_depth: usize,
    pub file_size_bytes: u64,
    pub file_created: bool,
    pub duration_s: f64,
    pub ios: u64,
    pub iops: f64,
    /// Decimal megabytes (10^6 bytes) per second, as fio's "MB/s".
    pub mb_per_sec: f64,
    pub avg_latency_ms: f64,
    pub p50_latency_ms: f64,
    pub p95_latency_ms: f64,
    pub p99_latency_ms: f64,
    pub p999_latency_ms: f64,
    pub max_latency_ms: f64,
    #[serde(serialize_with = "ClassSummary::serialize_latency_figures")]
    pub reads: ClassSummary,
    #[serde(serialize_with = "ClassSummary::serialize_latency_figures")]
    pub writes: ClassSummary,
    /// This process's CPU time over the run, as a share of one CPU (as `top` shows it).
    pub cpu_percent: f64,
    /// This process's CPU time per I/O, in microseconds.
    pub cpu_us_per_io: f64,
    /// Busy share of all the host's CPUs over the run.
    pub host_cpu_percent: Option<f64>,
    /// The kernel's counters for the device behind the path, over the run.
    pub device: Option<DiskSample>,
    /// Full histograms (exact-merge form), for aggregation.
    pub histograms: InstanceSnapshot,
    pub warnings: Vec<String>,
}

/// The target after the safety checks: where I/O may go and whether writes are allowed.
struct Target {
    region_start: u64,
    region_blocks: u64,
    file_size: u64,
    created: bool,
}

fn has_probe_mark(path: &Path) -> bool {
    use std::io::Read;
    let mut head = [0u8; 16];
    std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut head))
        .map(|()| &head == PROBE_MAGIC)
        .unwrap_or(false)
}

fn free_bytes(dir: &Path) -> Option<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes()).ok()?;
    // SAFETY: statvfs is plain data filled by the call.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: valid NUL-terminated path and out pointer.
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return None;
    }
    Some(st.f_bavail as u64 * st.f_frsize as u64)
}

/// Fills a buffer with non-zero pseudo-random bytes (no compression or dedup shortcut).
fn fill_nonzero(buf: &mut [u8], seed: u64) {
    let mut x = seed | 1;
    for chunk in buf.chunks_mut(8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        for (b, v) in chunk.iter_mut().zip(x.to_le_bytes()) {
            *b = v | 1;
        }
    }
}

/// Decides what may be done with the target; runs before any I/O.
fn inspect(
    spec: &ProbeSpec,
    warnings: &mut Vec<String>,
) -> Result<(bool, Option<u64>), ProbeError> {
    use std::os::unix::fs::FileTypeExt;
    let writes = spec.read_percent < 100;
    match std::fs::metadata(&spec.path) {
        Ok(meta) if meta.is_dir() => Err(bad(
            "--path",
            format!(
                "{} is a directory; give a file (it is created if absent)",
                spec.path.display()
            ),
        )),
        Ok(meta) if meta.file_type().is_block_device() => {
            if !spec.allow_device {
                return Err(ProbeError::Refused(IoError::DeviceNotAllowed {
                    path: spec.path.clone(),
                }));
            }
            if writes {
                warnings.push(format!(
                    "writing to block device {}: its content is being destroyed (--allow-device)",
                    spec.path.display()
                ));
            }
            Ok((false, None))
        }
        Ok(meta) if meta.is_file() => {
            if has_probe_mark(&spec.path) {
                if meta.len() != spec.file_size {
                    warnings.push(format!(
                        "{} exists (made by an earlier probe): using its size, {} bytes",
                        spec.path.display(),
                        meta.len()
                    ));
                }
                Ok((false, Some(meta.len())))
            } else if writes {
                Err(bad(
                    "--path",
                    format!(
                        "{} exists and was not made by jetproof probe; probe writes only into files it created (give a new path), or use --read-percent 100 to only read this one",
                        spec.path.display()
                    ),
                ))
            } else {
                Ok((false, Some(meta.len())))
            }
        }
        Ok(_) => Err(bad(
            "--path",
            format!(
                "{} is neither a regular file nor a block device",
                spec.path.display()
            ),
        )),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let parent = spec
                .path
                .parent()
                .filter(|p| !p.as_os_str().is_empty())
                .unwrap_or(Path::new("."));
            if !parent.is_dir() {
                return Err(bad(
                    "--path",
                    format!("directory {} does not exist", parent.display()),
                ));
            }
            if let Some(free) = free_bytes(parent)
                && free < spec.file_size
            {
                return Err(bad(
                    "--file-size",
                    format!(
                        "{} bytes do not fit: {} has {free} bytes free",
                        spec.file_size,
                        parent.display()
                    ),
                ));
            }
            Ok((true, None))
        }
        Err(e) => Err(bad("--path", format!("{}: {e}", spec.path.display()))),
    }
}

/// Writes the header and fills the file with non-zero data, 1 MiB at a time, then syncs.
fn create_file(file: &dyn IoFile, size: u64, seed: u64) -> Result<(), IoError> {
    let chunk = 1u64 << 20;
    let mut header = AlignedBuf::zeroed(HEADER_BYTES as usize);
    header[..16].copy_from_slice(PROBE_MAGIC);
    header[16..24].copy_from_slice(&size.to_le_bytes());
    let mut buf = AlignedBuf::zeroed(chunk as usize);
    fill_nonzero(&mut buf, seed);
    file.set_size(size)?;
    let mut offset = HEADER_BYTES;
    while offset < size {
        let len = (size - offset).min(chunk);
        // The tail may be shorter than a direct-I/O block; set_size already covered it.
        let len = len - len % file.logical_block_size().max(1) as u64;
        if len == 0 {
            break;
        }
        file.write_at(&buf[..len as usize], offset, IoClass::DbWrite)?;
        offset += len;
    }
    file.sync_data(IoClass::DbWrite)?;
    // The mark goes last: a file cut short by a crash is not taken for a finished probe file.
    file.write_at(&header, 0, IoClass::DbWrite)?;
    file.sync_data(IoClass::DbWrite)
}

/// A tiny fast generator for offsets and the read/write choice; quality is ample for that.
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
    fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next()) * u128::from(n)) >> 64) as u64
    }
}

/// Chooses each I/O's offset and direction.
struct Chooser {
    rng: XorShift,
    pattern: Pattern,
    next_block: u64,
    blocks: u64,
    start: u64,
    block_size: u64,
    read_percent: u64,
}

impl Chooser {
    fn next(&mut self) -> (u64, bool) {
        let block = match self.pattern {
            Pattern::Random => self.rng.below(self.blocks),
            Pattern::Sequential => {
                let b = self.next_block;
                self.next_block = (self.next_block + 1) % self.blocks;
                b
            }
        };
        let write = self.read_percent < 100 && self.rng.below(100) >= self.read_percent;
        (self.start + block * self.block_size, write)
    }
}

/// Runs the probe. Bad input and refusals come back before any I/O.
pub fn run(spec: &ProbeSpec) -> Result<ProbeReport, ProbeError> {
    validate(spec)?;
    let mut warnings = Vec::new();
    let (create, existing_size) = inspect(spec, &mut warnings)?;
    let (backend, fallback) = select_backend(spec.backend).map_err(ProbeError::Refused)?;
    warnings.extend(fallback);
    if !spec.direct {
        warnings.push(
            "buffered I/O (--buffered): these figures measure the host's page cache, not the storage"
                .to_owned(),
        );
    }
    let writes = spec.read_percent < 100;
    let base = if create {
        OpenOptions::create()
    } else if writes {
        OpenOptions::read_write()
    } else {
        OpenOptions::read_only()
    };
    let options = base
        .with_direct(spec.direct)
        .with_allow_device(spec.allow_device);
    let uring = backend.name() == "io_uring";
    let (file, uring_file): (Arc<dyn IoFile>, Option<Arc<UringFile>>) = if uring {
        let concrete = UringBackend::new()
            .and_then(|b| b.open_uring(&spec.path, &options))
            .map_err(refusal)?;
        (concrete.clone() as Arc<dyn IoFile>, Some(concrete))
    } else {
        (backend.open(&spec.path, &options).map_err(refusal)?, None)
    };
    let block = file.logical_block_size() as u64;
    if !spec.block_size.is_multiple_of(block) || !HEADER_BYTES.is_multiple_of(block) {
        if create {
            let _ = backend.remove(&spec.path);
        }
        return Err(bad(
            "--block-size",
            format!(
                "{} bytes is not a multiple of the {block}-byte block that direct I/O needs on {}",
                spec.block_size,
                spec.path.display()
            ),
        ));
    }
    let target = prepare(spec, file.as_ref(), create, existing_size)?;
    if target.region_blocks == 0 {
        return Err(bad(
            "--block-size",
            format!(
                "{} holds no whole {}-byte block after its header",
                spec.path.display(),
                spec.block_size
            ),
        ));
    }
    let stats = InstanceStats::new("probe");
    let mut sampler = Sampler::new(vec![stats.clone()], std::slice::from_ref(&spec.path));
    let cpu_before = process_cpu_time();
    let started = Instant::now();
    let chooser = |thread: u64| Chooser {
        rng: XorShift(spec.seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ (thread + 1) | 1),
        pattern: spec.pattern,
        next_block: (thread * target.region_blocks / spec.queue_depth as u64)
            % target.region_blocks,
        blocks: target.region_blocks,
        start: target.region_start,
        block_size: spec.block_size,
        read_percent: u64::from(spec.read_percent),
    };
    match uring_file {
        Some(f) => run_uring(spec, &f, &stats, chooser(0))?,
        None => run_threads(spec, &file, &stats, chooser)?,
    }
    let elapsed = started.elapsed().as_secs_f64();
    let cpu = process_cpu_time().saturating_sub(cpu_before).as_secs_f64();
    let sample = sampler.sample();
    let snapshot = stats.snapshot();
    let reads = stats.class(IoClass::DbRead).snapshot();
    let write_snap = stats.class(IoClass::DbWrite).snapshot();
    let mut all = reads.clone();
    all.merge(&write_snap);
    let total = all.summary(elapsed);
    let ios = all.count;
    Ok(ProbeReport {
        path: spec.path.clone(),
        backend: backend.name().to_owned(),
        direct_io: spec.direct,
        pattern: spec.pattern,
        block_size_bytes: spec.block_size,
        read_percent: spec.read_percent,
        queue_depth: spec.queue_depth,
        file_size_bytes: target.file_size,
        file_created: target.created,
        duration_s: elapsed,
        ios,
        iops: total.ops_per_sec,
        mb_per_sec: all.bytes as f64 / 1e6 / elapsed.max(1e-9),
        avg_latency_ms: total.avg_latency_ms,
        p50_latency_ms: total.p50_ms,
        p95_latency_ms: total.p95_ms,
        p99_latency_ms: total.p99_ms,
        p999_latency_ms: total.p999_ms,
        max_latency_ms: total.max_ms,
        reads: reads.summary(elapsed),
        writes: write_snap.summary(elapsed),
        cpu_percent: 100.0 * cpu / elapsed.max(1e-9),
        cpu_us_per_io: if ios > 0 { cpu * 1e6 / ios as f64 } else { 0.0 },
        host_cpu_percent: sample.host.cpu_percent,
        device: sample.disks.into_iter().next(),
        histograms: snapshot,
        warnings,
    })
}

/// Opening errors that are the target's fault are bad input; others are runtime errors.
fn refusal(error: IoError) -> ProbeError {
    match error {
        IoError::DeviceNotAllowed { .. }
        | IoError::DirectIoUnsupported { .. }
        | IoError::UringUnavailable { .. }
        | IoError::Unaligned { .. } => ProbeError::Refused(error),
        IoError::Path { ref source, .. }
            if matches!(
                source.kind(),
                std::io::ErrorKind::NotFound | std::io::ErrorKind::PermissionDenied
            ) || source.raw_os_error() == Some(libc::EROFS) =>
        {
            ProbeError::Refused(error)
        }
        other => ProbeError::Io(other),
    }
}

fn prepare(
    spec: &ProbeSpec,
    file: &dyn IoFile,
    create: bool,
    existing_size: Option<u64>,
) -> Result<Target, ProbeError> {
    if create {
        let size = spec.file_size - spec.file_size % spec.block_size.max(HEADER_BYTES);
        create_file(file, size, spec.seed)?;
        return Ok(Target {
            region_start: HEADER_BYTES,
            region_blocks: (size - HEADER_BYTES) / spec.block_size,
            file_size: size,
            created: true,
        });
    }
    match existing_size {
        // A file probe made: skip its header.
        Some(size) if has_probe_mark(&spec.path) => Ok(Target {
            region_start: HEADER_BYTES,
            region_blocks: size.saturating_sub(HEADER_BYTES) / spec.block_size,
            file_size: size,
            created: false,
        }),
        // A foreign file (read only) or a device: the whole of it.
        _ => {
            let size = file.size()?;
            Ok(Target {
                region_start: 0,
                region_blocks: size / spec.block_size,
                file_size: size,
                created: false,
            })
        }
    }
}

fn run_uring(
    spec: &ProbeSpec,
    file: &Arc<UringFile>,
    stats: &InstanceStats,
    mut chooser: Chooser,
) -> Result<(), ProbeError> {
    let depth = spec.queue_depth;
    let mut queue = file.queue(depth, spec.block_size as usize)?;
    let mut submitted_at = vec![Instant::now(); depth];
    let mut is_write = vec![false; depth];
    let mut offsets = vec![0u64; depth];
    for slot in 0..depth {
        if let Some(buf) = queue.buffer_mut(slot) {
            fill_nonzero(buf, spec.seed ^ slot as u64);
        }
    }
    let (reads, writes) = (stats.class(IoClass::DbRead), stats.class(IoClass::DbWrite));
    let deadline = crate::clock::later(Instant::now(), spec.duration);
    let push = |queue: &mut crate::uring::UringQueue,
                chooser: &mut Chooser,
                slot: usize,
                is_write: &mut [bool],
                offsets: &mut [u64],
                submitted_at: &mut [Instant]|
     -> Result<(), IoError> {
        let (offset, write) = chooser.next();
        is_write[slot] = write;
        offsets[slot] = offset;
        submitted_at[slot] = Instant::now();
        queue.push(slot, offset, write)
    };
    for slot in 0..depth {
        push(
            &mut queue,
            &mut chooser,
            slot,
            &mut is_write,
            &mut offsets,
            &mut submitted_at,
        )?;
    }
    let mut done: Vec<Completion> = Vec::with_capacity(depth);
    let mut first_error = None;
    while queue.in_flight() > 0 {
        queue.submit_and_wait(1)?;
        done.clear();
        queue.reap(&mut done);
        let now = Instant::now();
        let more = now < deadline && first_error.is_none();
        for c in &done {
            match &c.result {
                Ok(n) if *n as u64 == spec.block_size => {
                    let ns = now.duration_since(submitted_at[c.slot]).as_nanos() as u64;
                    let class = if is_write[c.slot] { writes } else { reads };
                    class.record(spec.block_size, ns);
                }
                Ok(n) => {
                    first_error.get_or_insert(IoError::ShortRead {
                        path: spec.path.clone(),
                        offset: offsets[c.slot],
                        wanted: spec.block_size as usize,
                        got: *n,
                    });
                }
                Err(e) => {
                    first_error.get_or_insert(IoError::Os {
                        op: if is_write[c.slot] { "write" } else { "read" },
                        path: spec.path.clone(),
                        offset: offsets[c.slot],
                        len: spec.block_size as usize,
                        source: std::io::Error::from_raw_os_error(
                            e.raw_os_error().unwrap_or(libc::EIO),
                        ),
                    });
                }
            }
            if more {
                push(
                    &mut queue,
                    &mut chooser,
                    c.slot,
                    &mut is_write,
                    &mut offsets,
                    &mut submitted_at,
                )?;
            }
        }
    }
    match first_error {
        Some(e) => Err(e.into()),
        None => Ok(()),
    }
}

fn run_threads(
    spec: &ProbeSpec,
    file: &Arc<dyn IoFile>,
    stats: &Arc<InstanceStats>,
    chooser: impl Fn(u64) -> Chooser,
) -> Result<(), ProbeError> {
    let metered = MeteredFile::wrap(file.clone(), stats.clone());
    let deadline = crate::clock::later(Instant::now(), spec.duration);
    let failed = AtomicBool::new(false);
    let results: Vec<Result<(), IoError>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..spec.queue_depth as u64)
            .map(|t| {
                let metered = metered.clone();
                let mut chooser = chooser(t);
                let failed = &failed;
                s.spawn(move || -> Result<(), IoError> {
                    let mut buf = AlignedBuf::zeroed(spec.block_size as usize);
                    fill_nonzero(&mut buf, spec.seed ^ t);
                    while Instant::now() < deadline && !failed.load(Ordering::Relaxed) {
                        let (offset, write) = chooser.next();
                        let result = if write {
                            metered.write_at(&buf, offset, IoClass::DbWrite)
                        } else {
                            metered.read_at(&mut buf, offset, IoClass::DbRead)
                        };
                        if let Err(e) = result {
                            failed.store(true, Ordering::Relaxed);
                            return Err(e);
                        }
                    }
                    Ok(())
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| match h.join() {
                Ok(r) => r,
                Err(panic) => std::panic::resume_unwind(panic),
            })
            .collect()
    });
    for r in results {
        r?;
    }
    Ok(())
}
