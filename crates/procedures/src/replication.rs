//! Log replication reads: when `simulation.copies_per_database > 1`, each instance has a
//! replication sender beside its sessions that reads every closed log generation back, start to
//! end, in large sequential reads, once for each passive copy (`copies - 1`), as the senders of
//! replicated copies (Exchange's log shipping) would.
//!
//! Why it exists: it is part of the load Jetstress puts on the log volume when copies are
//! configured (the seeds' "Log Replication I/O Performance" table: ~1.5 reads/s of ~232 KB per
//! instance), a separate I/O class (`replication_read`) that is not transactional IOPS.
//!
//! Invariants:
//!
//! * One sender per instance reads each closed generation once per passive copy
//!   ([`SenderConfig::passes`], `copies - 1`): each passive copy ships the whole log. The
//!   reports' evidence for it (the Lenovo report, four copies, reads more log bytes than its log
//!   writes carry; with two copies the reads match the log's growth) is in
//!   `docs/journal/2026-12-02-low-load-replication.md`.
//! * A generation is closed once the log's durable end ([`jetproof_log::Log::flushed_lsn`]) is in
//!   a later generation: every byte of it, its end frame included, is then on stable storage and
//!   the writer never touches it again.
//! * Reads are [`READ_SIZE`] bytes (the last one of a file shorter), go through the instance's
//!   metered file with [`IoClass::ReplicationRead`], and use the job's direct-I/O setting.
//! * Every frame read is verified (its checksum, which covers its position, and its generation;
//!   in logs of format 1 and 2 both checksums and the stored position) and the file's
//!   header must name this generation of this database: damage is an error naming the file and
//!   offset, never repaired. Nothing here writes.
//! * The caller keeps log files while a sender runs (`keep_files`), so a generation cannot be
//!   deleted before it is read.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use jetproof_io::meter::{InstanceStats, MeteredFile};
use jetproof_io::{AlignedBuf, IoBackend, IoClass, IoError, OpenOptions};
use jetproof_log::format::{
    DATA_START, Decoded, FrameKind, GenerationHeader, HeaderError, decode_frame,
};
use jetproof_log::{Lsn, log_file_path};

/// Bytes per replication read: 256 KiB, near the seeds' ~232 KB average (a generation of the
/// default 1 MiB is read in four reads; a smaller file in one read of its size).
pub const READ_SIZE: usize = 256 * 1024;

/// How often the sender looks for a newly closed generation; also how promptly it stops.
const POLL: Duration = Duration::from_millis(50);

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReplicationError {
    #[error("{0}")]
    Io(#[from] IoError),
    #[error("{path}: closed log generation is missing")]
    Missing { path: PathBuf },
    #[error("{path}: bad log header: {reason}")]
    BadHeader { path: PathBuf, reason: HeaderError },
    #[error("{path}: offset {offset}: {reason}")]
    Damaged {
        path: PathBuf,
        offset: u64,
        reason: String,
    },
}

/// Where one instance's sender reads, and how.
#[derive(Clone, Debug)]
pub struct SenderConfig {
    pub dir: PathBuf,
    pub database_id: u128,
    pub direct_io: bool,
    pub read_size: usize,
    /// How many times each closed generation is read: one pass per passive copy
    /// ([`passes_for_copies`]); at least 1.
    pub passes: u32,
}

/// The reading passes a closed generation gets with `copies` copies per database: one per
/// passive copy (`copies - 1`), none without copies.
pub fn passes_for_copies(copies: u32) -> u32 {
    copies.saturating_sub(1)
}

/// What one sender has done; shared with the run, which reads it at the end.
#[derive(Debug, Default)]
pub struct SenderState {
    pub generations_read: AtomicU64,
    pub bytes_read: AtomicU64,
    pub frames_verified: AtomicU64,
}

/// Reads every generation from `first` on as it is closed (`durable_end` is the log's durable
/// end, polled), until `stop`. Generations closed before `first` are not read: a sender ships
/// from where the log was when it started.
pub fn send(
    backend: &dyn IoBackend,
    config: &SenderConfig,
    stats: &Arc<InstanceStats>,
    first: u64,
    durable_end: &dyn Fn() -> Lsn,
    state: &SenderState,
    stop: &dyn Fn() -> bool,
) -> Result<(), ReplicationError> {
    let mut next = first.max(1);
    while !stop() {
        if next < durable_end().generation {
            for _ in 0..config.passes.max(1) {
                read_generation(backend, config, stats, next, state)?;
            }
            state.generations_read.fetch_add(1, Ordering::Relaxed);
            next += 1;
        } else {
            std::thread::sleep(POLL);
        }
    }
    Ok(())
}

/// Reads one closed generation start to end and verifies its header and frames (one pass: the
/// caller counts the generation).
pub fn read_generation(
    backend: &dyn IoBackend,
    config: &SenderConfig,
    stats: &Arc<InstanceStats>,
    generation: u64,
    state: &SenderState,
) -> Result<(), ReplicationError> {
    let path = log_file_path(&config.dir, generation);
    if !backend.exists(&path) {
        return Err(ReplicationError::Missing { path });
    }
    let mut file = backend.open(
        &path,
        &OpenOptions::read_only().with_direct(config.direct_io),
    )?;
    let size = file.size()?;
    // Direct reads need whole blocks; the writer always makes whole-block files, but a file
    // that is not is read through the page cache rather than refused.
    if config.direct_io && !size.is_multiple_of(4096) {
        file = backend.open(&path, &OpenOptions::read_only().with_direct(false))?;
    }
    let file = MeteredFile::wrap(file, stats.clone());
    let length = usize::try_from(size).map_err(|_| ReplicationError::BadHeader {
        path: path.clone(),
        reason: HeaderError::TooLargeForMemory { size },
    })?;
    let mut bytes = AlignedBuf::zeroed(length);
    let chunk = (config.read_size / 4096).max(1) * 4096;
    let mut offset = 0usize;
    while offset < length {
        let end = (offset + chunk).min(length);
        file.read_at(
            &mut bytes[offset..end],
            offset as u64,
            IoClass::ReplicationRead,
        )?;
        offset = end;
    }
    state.bytes_read.fetch_add(size, Ordering::Relaxed);
    let header =
        GenerationHeader::decode(&bytes).map_err(|reason| ReplicationError::BadHeader {
            path: path.clone(),
            reason,
        })?;
    if header.generation != generation || header.database_id != config.database_id {
        return Err(ReplicationError::BadHeader {
            path,
            reason: HeaderError::NotTheGenerationSent {
                found_generation: header.generation,
                found_database: header.database_id,
                generation,
                database: config.database_id,
            },
        });
    }
    let frames = verify_frames(&bytes, &header, &path)?;
    state.frames_verified.fetch_add(frames, Ordering::Relaxed);
    Ok(())
}

/// Walks the frames of a closed generation up to its end frame (or, for a generation closed by
/// reopening the log after a crash, up to the first unwritten space). Returns the frame count.
fn verify_frames(
    bytes: &[u8],
    header: &GenerationHeader,
    path: &Path,
) -> Result<u64, ReplicationError> {
    let generation = header.generation;
    let mut position = DATA_START;
    let mut frames = 0u64;
    while position < bytes.len() as u64 {
        match decode_frame(bytes, generation, position, header.layout()) {
            Decoded::Valid(frame) => {
                frames += 1;
                position = frame.end();
                if frame.kind == FrameKind::GenerationEnd {
                    break;
                }
            }
            Decoded::Empty => break,
            Decoded::Damaged(reason) => {
                return Err(ReplicationError::Damaged {
                    path: path.to_path_buf(),
                    offset: position,
                    reason,
                });
            }
        }
    }
    Ok(frames)
}

/// The test log's line on replication.
pub fn describe(copies: u32, instances: usize) -> String {
    format!(
        "Log replication: {copies} copies per database: one sender per instance ({instances} instances) reads each closed log generation once per passive copy ({} pass{}), in {} KiB reads, verifying every frame; log files are kept.",
        passes_for_copies(copies),
        if passes_for_copies(copies) == 1 {
            ""
        } else {
            "es"
        },
        READ_SIZE / 1024
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use jetproof_io::IoBackend;
    use jetproof_io::mem::MemBackend;
    use jetproof_log::{Durability, Log, LogOptions, Record, Retention};

    fn write_log(backend: &Arc<MemBackend>, dir: &Path, generations: u64) -> Log {
        let backend: Arc<dyn IoBackend> = backend.clone();
        let log = Log::create(
            backend,
            LogOptions {
                file_size_bytes: 64 * 1024,
                buffer_size_bytes: 16 * 1024,
                retention: Retention::KeepAll,
                ..LogOptions::new(dir, 7)
            },
        )
        .expect("create log");
        let payload = [0x5au8; 1000];
        while log.flushed_lsn().generation <= generations {
            log.append_and_commit(
                &Record {
                    record_type: 1,
                    transaction_id: 1,
                    payload: &payload,
                },
                Durability::Durable,
            )
            .expect("append");
        }
        log
    }

    #[test]
    fn closed_generations_are_read_once_each_and_metered_as_replication() {
        let backend = MemBackend::new();
        let dir = Path::new("/logs");
        let log = write_log(&backend, dir, 3);
        let stats = InstanceStats::new("db1");
        let config = SenderConfig {
            dir: dir.to_path_buf(),
            database_id: 7,
            direct_io: false,
            read_size: READ_SIZE,
            passes: 1,
        };
        let state = SenderState::default();
        let end = log.flushed_lsn();
        send(
            backend.as_ref(),
            &config,
            &stats,
            1,
            &|| end,
            &state,
            &|| state.generations_read.load(Ordering::Relaxed) >= end.generation - 1,
        )
        .expect("send");
        let closed = end.generation - 1;
        assert_eq!(state.generations_read.load(Ordering::Relaxed), closed);
        assert!(state.frames_verified.load(Ordering::Relaxed) > closed);
        let replication = stats.class(IoClass::ReplicationRead).snapshot();
        // 64 KiB files: one read each, of the whole file.
        assert_eq!(replication.count, closed);
        assert_eq!(replication.bytes, closed * 64 * 1024);
        assert_eq!(stats.class(IoClass::LogRead).snapshot().count, 0);
        log.close().expect("close");
    }

    #[test]
    fn each_closed_generation_is_read_once_per_pass() {
        let backend = MemBackend::new();
        let dir = Path::new("/logs");
        let log = write_log(&backend, dir, 3);
        let stats = InstanceStats::new("db1");
        let config = SenderConfig {
            dir: dir.to_path_buf(),
            database_id: 7,
            direct_io: false,
            read_size: READ_SIZE,
            passes: passes_for_copies(4),
        };
        let state = SenderState::default();
        let end = log.flushed_lsn();
        send(
            backend.as_ref(),
            &config,
            &stats,
            1,
            &|| end,
            &state,
            &|| state.generations_read.load(Ordering::Relaxed) >= end.generation - 1,
        )
        .expect("send");
        let closed = end.generation - 1;
        assert_eq!(state.generations_read.load(Ordering::Relaxed), closed);
        let replication = stats.class(IoClass::ReplicationRead).snapshot();
        // Three passive copies: three whole reads of every 64 KiB file.
        assert_eq!(replication.count, 3 * closed);
        assert_eq!(replication.bytes, 3 * closed * 64 * 1024);
        assert_eq!(
            state.bytes_read.load(Ordering::Relaxed),
            3 * closed * 64 * 1024
        );
        assert_eq!(passes_for_copies(2), 1);
        assert_eq!(passes_for_copies(1), 0);
        log.close().expect("close");
    }

    #[test]
    fn a_damaged_frame_is_reported_with_file_and_offset() {
        let backend = MemBackend::new();
        let dir = Path::new("/logs");
        let log = write_log(&backend, dir, 2);
        let path = log_file_path(dir, 1);
        let file = backend
            .open(&path, &OpenOptions::read_write())
            .expect("open");
        file.write_at(&[0xff; 8], DATA_START + 40, IoClass::LogWrite)
            .expect("damage");
        let config = SenderConfig {
            dir: dir.to_path_buf(),
            database_id: 7,
            direct_io: false,
            read_size: READ_SIZE,
            passes: 1,
        };
        let error = read_generation(
            backend.as_ref(),
            &config,
            &InstanceStats::new("db1"),
            1,
            &SenderState::default(),
        )
        .expect_err("damage found");
        let text = error.to_string();
        assert!(text.contains("E00000001.jplog"), "{text}");
        assert!(matches!(error, ReplicationError::Damaged { .. }), "{text}");
        let wrong_database = SenderConfig {
            database_id: 8,
            ..config
        };
        let error = read_generation(
            backend.as_ref(),
            &wrong_database,
            &InstanceStats::new("db1"),
            2,
            &SenderState::default(),
        )
        .expect_err("wrong database");
        assert!(
            matches!(error, ReplicationError::BadHeader { .. }),
            "{error}"
        );
        log.close().expect("close");
    }
}
