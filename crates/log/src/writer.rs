//! The log writer: the log buffer, log writes, group commit, generation rollover, checkpoints.
//!
//! Invariants (see `docs/log.md` for the protocol and crash table):
//! * Records are appended to the buffer under one mutex; a record's LSN is the file position its
//!   frame will occupy. The buffer mirrors the file from `buffer_start` (a sector boundary) to
//!   `append_end`; bytes past `append_end` are left over from earlier use, and each write zeroes
//!   the rounded-up tail it carries past the last frame.
//! * At most one log write is in flight (`flushing`). A write covers everything appended when it
//!   starts, ends with a flush frame, starts at the sector holding the durable end (rewriting the
//!   partial last sector with the same bytes plus new ones; a durable commit's write fills its
//!   last sector instead, so the next write starts on a fresh one) and is written through (O_DSYNC)
//!   before the durable end moves. It goes out of the buffer itself: the writer swaps the buffer
//!   with a spare one holding a copy of the last partial sector, where appends continue. So
//!   every acknowledged write is on stable storage, the durable end is always a frame boundary,
//!   and only the one write in flight can be torn by a crash.
//! * Committers that find a write in flight wait for it and then one of them writes everything
//!   appended meanwhile: that is group commit; no timer is needed for it.
//! * A generation is finished by a write that ends with a generation-end frame. The next
//!   generation's file was named ahead in the background (format version 4: zero-filled, its
//!   header's first copy saying "not begun", synced, renamed into place, the directory synced,
//!   and recorded in the checkpoint file), so the rollover itself does no I/O; the first log
//!   write of g+1 rewrites its header block with the second copy naming `previous_end` in the
//!   same write as its first frames. Records of generation g+1 are never durable unless g is
//!   complete, and never before the checkpoint file names g+1.
//! * A failed write or sync poisons the log: the durable end is then unknown, so every later call
//!   fails with [`LogError::Poisoned`] instead of acknowledging commits it cannot vouch for.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use jetproof_io::meter::{InstanceStats, MeteredFile};
use jetproof_io::{AlignedBuf, IoBackend, IoClass, IoError, IoFile, OpenOptions};
use parking_lot::{Condvar, Mutex};

use crate::checkpoint::{Checkpoint, CheckpointWriter, read_checkpoint, unix_ms};
use crate::error::{LogError, Result};
use crate::format::{
    DATA_START, FLUSH_FRAME_BYTES, FORMAT_VERSION, FlushInfo, FrameKind, GEN_END_FRAME_BYTES,
    GenerationHeader, align_down, align_up, checkpoint_path, encode_frame_filled,
    encode_frame_with_crc, frame_bytes, generation_path, spare_path,
};
use crate::lsn::{Durability, Lsn, Record};
use crate::owned::{self, LogFileName};
use crate::scan::{ReadOptions, TornTail, analyse_generation};

/// What happens to generation files the checkpoint no longer needs.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Retention {
    /// Keep every generation (replication and soft-recovery tests need them).
    KeepAll,
    /// Delete generations wholly before the checkpoint.
    DeleteBeforeCheckpoint,
    /// Circular logging: reuse generations wholly before the checkpoint as the next generation's
    /// file, without reformatting it.
    Circular,
}

/// How a log is opened.
#[derive(Clone, Debug)]
pub struct LogOptions {
    /// Directory of the generation files and the checkpoint file.
    pub dir: PathBuf,
    /// Ties every file to its database; a file of another database is refused.
    pub database_id: u128,
    /// Size of each generation file (1 MiB, as ESE's).
    pub file_size_bytes: u64,
    /// Size of the log buffer; also the largest log write.
    pub buffer_size_bytes: usize,
    /// Open the files with O_DIRECT.
    pub direct_io: bool,
    /// Log writes start and end on multiples of this (at least the file's logical block size,
    /// 4 KiB under direct I/O). Tests raise it to exercise the partial-sector rewrite.
    pub sector_size_bytes: usize,
    /// A lazy commit is written by the background flusher within this time.
    pub lazy_flush_interval: Duration,
    /// The background flusher is woken to write once this many bytes wait past the durable
    /// end. `None`: half the buffer, as ESE's log writer is signalled when half its buffer is
    /// full. (`Some(4096)` gives the policy before 2026-11-22's change: a write per full
    /// sector.)
    pub write_threshold_bytes: Option<usize>,
    /// A durable commit's write fills the rest of its last sector (the flush frame's payload
    /// runs on in zeros to the sector's end), so the next write starts on a fresh sector instead
    /// of rewriting that one, as ESE pads the partial sector at a durable commit
    /// (`fLGFillPartialSector`). Costs log space (counted in [`LogStats::fill_bytes`]), saves
    /// the rewrite. `false`: every write rewrites the partial sector (the behaviour before
    /// 2026-11-23, kept for comparison and for the tests of the rewrite).
    pub fill_partial_sector: bool,
    pub retention: Retention,
    /// Every log I/O is recorded here when given.
    pub stats: Option<Arc<InstanceStats>>,
}

impl LogOptions {
    pub fn new(dir: impl Into<PathBuf>, database_id: u128) -> LogOptions {
        LogOptions {
            dir: dir.into(),
            database_id,
            file_size_bytes: 1 << 20,
            buffer_size_bytes: 256 << 10,
            direct_io: false,
            sector_size_bytes: 4096,
            lazy_flush_interval: Duration::from_millis(5),
            write_threshold_bytes: None,
            fill_partial_sector: true,
            retention: Retention::KeepAll,
            stats: None,
        }
    }

    fn validate(&self) -> Result<()> {
        let invalid = |field, reason: String| Err(LogError::InvalidOptions { field, reason });
        if !self.sector_size_bytes.is_power_of_two()
            || !(512..=65536).contains(&self.sector_size_bytes)
        {
            return invalid(
                "sector_size_bytes",
                format!(
                    "{} is not a power of two from 512 bytes to 64 KiB",
                    self.sector_size_bytes
                ),
            );
        }
        if !self.file_size_bytes.is_multiple_of(4096)
            || self.file_size_bytes < 64 << 10
            || self.file_size_bytes > 1 << 32
        {
            return invalid(
                "file_size_bytes",
                format!(
                    "{} must be a multiple of 4096 between 64 KiB and 4 GiB",
                    self.file_size_bytes
                ),
            );
        }
        if self.buffer_size_bytes < 4 * self.sector_size_bytes
            || self.buffer_size_bytes as u64 > self.file_size_bytes - DATA_START
        {
            return invalid(
                "buffer_size_bytes",
                format!(
                    "{} must hold at least 4 sectors and fit in a generation file",
                    self.buffer_size_bytes
                ),
            );
        }
        if let Some(threshold) = self.write_threshold_bytes
            && !(1..=self.buffer_size_bytes).contains(&threshold)
        {
            return invalid(
                "write_threshold_bytes",
                format!(
                    "{threshold} must be from 1 byte to the buffer size ({})",
                    self.buffer_size_bytes
                ),
            );
        }
        Ok(())
    }

    /// The bytes waiting past the durable end that wake the background flusher.
    pub fn write_threshold(&self) -> u64 {
        self.write_threshold_bytes
            .unwrap_or(self.buffer_size_bytes / 2) as u64
    }

    /// The largest record payload: a record must fit in the buffer and in a generation together
    /// with the frames every write and every generation end need.
    pub fn max_payload_bytes(&self) -> usize {
        let room = (self.buffer_size_bytes as u64)
            .saturating_sub(self.sector_size_bytes as u64)
            .min(self.file_size_bytes.saturating_sub(DATA_START))
            .saturating_sub(FLUSH_FRAME_BYTES + GEN_END_FRAME_BYTES + 64);
        room as usize
    }
}

/// What started a log write: each log write is counted under exactly one trigger
/// ([`LogStats::writes_by`]; `docs/log.md`, "What starts a log write").
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum WriteTrigger {
    /// A durable commit found its record not yet durable and no write in flight, and wrote.
    DurableCommit,
    /// [`Log::wait_durable`] called from outside a commit: the cache's write-ahead gate before
    /// it writes a page whose newest change is not durable yet (evictions and checkpoint-depth
    /// flushes alike).
    WriteAhead,
    /// [`Log::flush`] or [`Log::close`].
    Flush,
    /// The background flusher, woken by an append because the bytes waiting past the durable
    /// end reached [`LogOptions::write_threshold`] (half the buffer by default: ESE's
    /// "capacity" write).
    Capacity,
    /// The background flusher's timer (`lazy_flush_interval`) ran out with records waiting.
    LazyTimer,
    /// An append found no room in the buffer and wrote to make some.
    BufferFull,
    /// The write that ends a generation (a record did not fit in it), whoever issued it.
    Rollover,
}

impl WriteTrigger {
    /// Every trigger, in the order of [`LogStats::writes_by`]'s counters.
    pub const ALL: [WriteTrigger; 7] = [
        WriteTrigger::DurableCommit,
        WriteTrigger::WriteAhead,
        WriteTrigger::Flush,
        WriteTrigger::Capacity,
        WriteTrigger::LazyTimer,
        WriteTrigger::BufferFull,
        WriteTrigger::Rollover,
    ];

    /// A short name for reports.
    pub fn name(self) -> &'static str {
        match self {
            WriteTrigger::DurableCommit => "durable commit",
            WriteTrigger::WriteAhead => "write-ahead",
            WriteTrigger::Flush => "flush",
            WriteTrigger::Capacity => "capacity",
            WriteTrigger::LazyTimer => "lazy timer",
            WriteTrigger::BufferFull => "buffer full",
            WriteTrigger::Rollover => "rollover",
        }
    }
}

/// Counters of the log's own work (the I/O latencies are in the [`InstanceStats`]).
#[derive(Debug, Default)]
pub struct LogStats {
    pub records: AtomicU64,
    pub record_bytes: AtomicU64,
    pub durable_commits: AtomicU64,
    pub lazy_commits: AtomicU64,
    /// Log writes (write-through: each is durable when it returns).
    pub writes: AtomicU64,
    pub write_bytes: AtomicU64,
    /// Time spent in log writes, durability included, summed over all log writes.
    pub write_latency_ns_total: AtomicU64,
    /// Time spent in a separate fdatasync after log writes: 0 since log files are written
    /// through (kept for readers of older figures).
    pub sync_latency_ns_total: AtomicU64,
    pub generations_created: AtomicU64,
    /// Bytes written to zero-fill new generation files. Not log writes: the formatting is not
    /// metered in the `log_write` I/O class (see `docs/log.md`, "Preformatting is not a log
    /// write").
    pub format_bytes: AtomicU64,
    /// Writes that preformatted generation files (zero fill and header), and their time,
    /// the final fdatasync included.
    pub format_writes: AtomicU64,
    pub format_latency_ns_total: AtomicU64,
    pub checkpoints: AtomicU64,
    /// Rollovers, and their time from the start of the generation-end write until the next
    /// generation is taken (named ahead by the background since format version 4; named and
    /// recorded in the checkpoint file inline when none was ready): what a durable commit that
    /// arrives during a rollover waits for besides its own log write (`docs/log.md`,
    /// "Generations").
    pub rollovers: AtomicU64,
    pub rollover_latency_ns_total: AtomicU64,
    /// Of that, the time waiting for the spare's lock (held by the background while it formats
    /// or names the next spare), and the rollovers that found no generation named ahead and
    /// named one inline (formatting it too when no spare was formatted).
    pub rollover_spare_wait_ns_total: AtomicU64,
    pub rollovers_without_spare: AtomicU64,
    /// Bytes of log space given to sector fill (ESE: `cbLGBytesWasted`): zeros ending durable
    /// commits' writes on a sector boundary ([`LogOptions::fill_partial_sector`]). Part of
    /// `write_bytes`, not of `record_bytes`.
    pub fill_bytes: AtomicU64,
    /// Writes a durable commit's writer issued at once when its own write completed, for the
    /// durable commits that had arrived during it (ESE's deferred write,
    /// `ErrLGIDeferredWrite`): no waiter had to be woken and scheduled before the device got
    /// them. Counted under [`WriteTrigger::DurableCommit`] too.
    pub deferred_writes: AtomicU64,
    /// Writes handed to a waiting durable commit instead (woken to write next), and the time
    /// from the completion that woke it until its write started: the serial step between the
    /// device's completion and the next write that a deferred write removes.
    pub handoffs: AtomicU64,
    pub handoff_gap_ns_total: AtomicU64,
    /// Log writes by what started them, indexed like [`WriteTrigger::ALL`]; they sum to
    /// `writes`. Read with [`LogStats::writes_by`].
    writes_by_trigger: [AtomicU64; WriteTrigger::ALL.len()],
}

impl LogStats {
    pub fn get(counter: &AtomicU64) -> u64 {
        counter.load(Ordering::Relaxed)
    }

    /// How many log writes `trigger` started.
    pub fn writes_by(&self, trigger: WriteTrigger) -> u64 {
        Self::get(&self.writes_by_trigger[trigger as usize])
    }
}

/// What opening an existing log found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OpenReport {
    /// The checkpoint recorded in the log directory.
    pub checkpoint: Lsn,
    /// Where the previous run's valid log ended; the new generation's header names it.
    pub previous_end: Lsn,
    /// A torn write at the previous end, abandoned (its records were never acknowledged).
    pub torn_tail: Option<TornTail>,
    /// The generation new records go to.
    pub generation: u64,
}

struct State {
    generation: u64,
    file: Arc<dyn IoFile>,
    buffer: AlignedBuf,
    /// File offset of `buffer[0]`; a sector boundary.
    buffer_start: u64,
    /// File offset where the next frame goes.
    append_end: u64,
    /// Everything before this is on stable storage. Always a frame boundary.
    durable: Lsn,
    flushing: bool,
    /// The background flusher was woken to write and has not taken the mutex since: appends
    /// need not wake it again.
    flusher_woken: bool,
    /// A rollover took the spare, or the generation was just begun: the background flusher is
    /// woken to prepare (format, then name ahead) the next one at once (as ESE starts creating
    /// `edbtmp.log` right after a switch), not at its next timer, which may be a second away
    /// while generations fill many times a second.
    spare_wanted: bool,
    /// The current generation's first log write has written its header's second copy (format
    /// version 4). Until then `durable` stays at `previous_end` (the end of the generation
    /// before), the header block sits at the buffer's start (`buffer_start` 0), and the next
    /// write begins at offset 0.
    begun: bool,
    /// Where the log ended before the current generation.
    previous_end: Lsn,
    /// A record did not fit in this generation: the next write ends it.
    rollover_requested: bool,
    poisoned: Option<String>,
    closed: bool,
    write_sequence: u64,
    /// Where the write in flight ends (set while `flushing`): a record before it is durable
    /// once that write completes.
    in_flight_end: Lsn,
    /// A durable commit sleeps for a record the write in flight does not cover: that write's
    /// completion starts the next one at once (the deferred write, `Inner::write_then`).
    next_wanted: bool,
    /// When a completed write handed the next one to a waiter (none wrote at once), for
    /// [`LogStats::handoff_gap_ns_total`].
    handed_on_at: Option<std::time::Instant>,
    /// Reused for every write, so the buffer can take appends while a write is in flight.
    write_buffer: Option<AlignedBuf>,
    /// Oldest generation file that still exists.
    oldest_generation: u64,
}

struct Inner {
    backend: Arc<dyn IoBackend>,
    options: LogOptions,
    sector: u64,
    /// [`LogOptions::write_threshold`].
    write_threshold: u64,
    state: Mutex<State>,
    /// `State::durable` packed ([`Lsn::to_u64`]), readable without the mutex: the cache asks
    /// [`Log::is_durable`] before every page write.
    durable_packed: AtomicU64,
    /// `(State::generation, State::append_end)` packed, stored under the mutex whenever either
    /// moves, so [`Log::end_lsn`] needs no mutex (the instance asks it for every page change of
    /// a split or merge, and at every transaction's start).
    end_packed: AtomicU64,
    /// Set once the log is poisoned or closed (both also in [`State`]): a lazy commit checks
    /// this instead of taking the mutex.
    unusable: AtomicBool,
    /// Signalled whenever the durable end, the generation or the poisoned state changes.
    changed: Condvar,
    /// Where a durable commit waits while a write is in flight, by write number parity: on
    /// `[n % 2]` if write n (in flight) makes its record durable, else on `[(n + 1) % 2]` for
    /// the write after it. When write n completes only `[n % 2]` is woken (all of them, all
    /// satisfied) and one waiter of the other, which starts the next write for them all. Until
    /// 2026-11-28 every waiter woke at every write and most went back to sleep (issue 22).
    durable_waiters: [Condvar; 2],
    /// Wakes the background flusher.
    wake_flusher: Condvar,
    /// The preformatted next generation file, and the next generation named ahead.
    spare: Mutex<Spares>,
    checkpoint: Mutex<CheckpointWriter>,
    /// Serialises retention (it runs after a checkpoint write, outside the checkpoint's lock,
    /// which the background takes while holding the spare's).
    retention: Mutex<()>,
    stats: LogStats,
}

/// The files the background prepares for the next rollover.
struct Spares {
    /// A zero-filled (or recycled) file at the spare's path, not named yet.
    staged: Option<Arc<dyn IoFile>>,
    /// The next generation, named ahead (its header not begun, its name durable) and recorded
    /// in the checkpoint file: a rollover takes it without any I/O.
    named: Option<NamedGeneration>,
    /// The newest generation this log has given a name to: a spare is named ahead only when
    /// the current generation is that one and is begun, so at most one generation is ever not
    /// begun, and it is the newest.
    newest_named: u64,
}

/// A generation named ahead, not begun.
struct NamedGeneration {
    generation: u64,
    /// Open for writing, write-through, metered like every generation file.
    file: Arc<dyn IoFile>,
    header: GenerationHeader,
    /// The header block as written (copy A, zeros where copy B goes).
    block: AlignedBuf,
}

impl std::fmt::Debug for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Log")
            .field("dir", &self.options.dir)
            .finish()
    }
}

/// One log stream (one per database instance). Shared by the sessions: every method takes `&self`.
#[derive(Debug)]
pub struct Log {
    inner: Arc<Inner>,
    flusher: Option<JoinHandle<()>>,
}

impl Log {
    /// Creates a new, empty log in `options.dir`: generation 1 and a checkpoint at its start.
    pub fn create(backend: Arc<dyn IoBackend>, options: LogOptions) -> Result<Log> {
        options.validate()?;
        let dir = options.dir.clone();
        backend.create_dir_all(&dir)?;
        if backend.exists(&checkpoint_path(&dir)) {
            return Err(LogError::AlreadyExists {
                path: checkpoint_path(&dir),
                dir,
            });
        }
        let first_path = generation_path(&dir, 1);
        if backend.exists(&first_path) {
            // Generation 1 without a checkpoint: a create interrupted by a crash, since the
            // checkpoint is written before any record can be. Start over only if it is this
            // database's (its header says so: a generation's header is synced before the file
            // gets its name) and really holds no record; anything else is someone's log or a
            // file jetproof did not make, and is left alone.
            owned::check_owned(
                &*backend,
                &first_path,
                LogFileName::Generation(1),
                Some(options.database_id),
                None,
            )?;
            let read_options = ReadOptions {
                direct_io: options.direct_io,
                ..ReadOptions::default()
            };
            let empty = match crate::scan::load_generation(
                &*backend,
                &dir,
                1,
                Some(options.database_id),
                &read_options,
            ) {
                Ok(Some(file)) => {
                    crate::scan::scan_generation(&file.bytes, 1, file.header.layout(), None)
                        .frames
                        .is_empty()
                }
                Ok(None) => true,
                Err(_) => false,
            };
            if !empty {
                return Err(LogError::AlreadyExists {
                    dir,
                    path: first_path,
                });
            }
            backend.remove(&first_path)?;
        }
        let first = Lsn::new(1, DATA_START);
        let file = install_generation(&*backend, &options, None, 1, Lsn::ZERO, None)?;
        // The generation exists (and its directory entry is synced) before a checkpoint names it.
        let checkpoint = CheckpointWriter::create(
            &*backend,
            &dir,
            options.direct_io,
            Checkpoint {
                database_id: options.database_id,
                sequence: 1,
                lsn: first,
                log_file_size_bytes: options.file_size_bytes,
                written_unix_ms: unix_ms(),
                engine_stamp: 0,
                newest_generation: 1,
                durable_end: first,
            },
        )?;
        Ok(Log::start(backend, options, file, first, 1, checkpoint))
    }

    /// Opens an existing log to continue writing: finds the end of the valid log (tolerating and
    /// reporting a torn tail), then starts a new generation after it. Recovery must have replayed
    /// the log first; opening does not replay.
    pub fn open(backend: Arc<dyn IoBackend>, options: LogOptions) -> Result<(Log, OpenReport)> {
        options.validate()?;
        let dir = options.dir.clone();
        let Some(checkpoint) = read_checkpoint(&*backend, &dir, Some(options.database_id))? else {
            return Err(LogError::NotFound {
                path: checkpoint_path(&dir),
                dir,
            });
        };
        let checkpoint = checkpoint.checkpoint;
        if checkpoint.log_file_size_bytes != options.file_size_bytes {
            return Err(LogError::InvalidOptions {
                field: "file_size_bytes",
                reason: format!(
                    "{} differs from the {} bytes this log was created with",
                    options.file_size_bytes, checkpoint.log_file_size_bytes
                ),
            });
        }
        let start = checkpoint.lsn.generation;
        if !backend.exists(&generation_path(&dir, start)) {
            return Err(LogError::MissingGeneration {
                generation: start,
                path: generation_path(&dir, start),
                reason: format!("the checkpoint names {}", checkpoint.lsn),
            });
        }
        let mut last = start;
        while backend.exists(&generation_path(&dir, last + 1)) {
            last += 1;
        }
        let mut oldest = start;
        while oldest > 1 && backend.exists(&generation_path(&dir, oldest - 1)) {
            oldest -= 1;
        }
        let read_options = ReadOptions {
            direct_io: options.direct_io,
            stats: options.stats.clone(),
            ..ReadOptions::default()
        };
        // A newest generation named ahead and never begun (format version 4) holds no record:
        // the log ends in the one before it, and the log continues in it (begun here).
        let not_begun = matches!(
            crate::scan::load_header_any(
                &*backend,
                &dir,
                last,
                Some(options.database_id),
                &read_options,
            )?,
            Some(header) if !header.begun
        );
        if not_begun && last == start {
            return Err(LogError::Corrupt {
                path: generation_path(&dir, last),
                offset: crate::format::HEADER_COPY_OFFSET as u64,
                reason: format!(
                    "the checkpoint names {}, but this generation was never begun (its header's \
                     second copy is not valid)",
                    checkpoint.lsn
                ),
            });
        }
        let end_generation = if not_begun { last - 1 } else { last };
        let Some(analysis) = analyse_generation(
            &*backend,
            &dir,
            end_generation,
            Some(options.database_id),
            &read_options,
        )?
        else {
            return Err(LogError::MissingGeneration {
                generation: end_generation,
                path: generation_path(&dir, end_generation),
                reason: "it disappeared while the log was being opened".into(),
            });
        };
        // The end found must be one a crash can leave (`docs/log.md`, "The log's end is
        // proved"): continuing after a lost end would also give a lost generation's number, and
        // positions pages may carry, to new records.
        if let Some(lost) = analysis.lost_log() {
            return Err(lost);
        }
        if checkpoint.lsn > analysis.end {
            return Err(LogError::CheckpointBeyondLog {
                path: checkpoint_path(&dir),
                checkpoint: checkpoint.lsn,
                log_end: analysis.end,
            });
        }
        if let Some(lost) =
            crate::reader::before_proved_end(&*backend, &dir, analysis.end, &checkpoint)
        {
            return Err(lost);
        }
        let generation = if not_begun { last } else { last + 1 };
        // A spare left by the previous run is formatted anew; one jetproof did not make (or a
        // link) is refused and left as it is.
        owned::remove_owned(
            &*backend,
            &dir,
            LogFileName::Spare,
            Some(options.database_id),
            Some(options.file_size_bytes),
        )?;
        let file = if not_begun {
            begin_in_place(&*backend, &options, generation, analysis.end)?
        } else {
            install_generation(&*backend, &options, None, generation, analysis.end, None)?
        };
        let mut checkpoint_writer =
            CheckpointWriter::open(&*backend, &dir, options.direct_io, checkpoint)?;
        // Recorded before any record can be durable in it, as at rollover.
        // The end found is not recorded as durable: frames a crash left unsynced may read back
        // now and still be lost by a later power failure. The durable end recorded before stays.
        checkpoint_writer.record_installed(generation, Lsn::ZERO)?;
        let report = OpenReport {
            checkpoint: checkpoint.lsn,
            previous_end: analysis.end,
            torn_tail: analysis.torn_tail,
            generation,
        };
        let log = Log::start(
            backend,
            options,
            file,
            Lsn::new(generation, DATA_START),
            oldest,
            checkpoint_writer,
        );
        Ok((log, report))
    }

    fn start(
        backend: Arc<dyn IoBackend>,
        options: LogOptions,
        file: Arc<dyn IoFile>,
        start: Lsn,
        oldest_generation: u64,
        checkpoint: CheckpointWriter,
    ) -> Log {
        let sector = options.sector_size_bytes.max(file.logical_block_size()) as u64;
        // The effective sector (direct I/O may raise it) also bounds the record size.
        let mut options = options;
        options.sector_size_bytes = sector as usize;
        // Room for a whole buffer rounded up to sectors, plus the sector a write's end is rounded
        // up into (the generation-end frame may sit there), plus the header block that a
        // generation's first write carries before its frames.
        let capacity = align_up(options.buffer_size_bytes as u64, sector) as usize
            + sector as usize
            + DATA_START as usize;
        let state = State {
            generation: start.generation,
            file,
            // Both buffers are written from, write after write: registered with io_uring where
            // it is in use, so that no log write pins its pages (`jetproof_io::fixed`).
            buffer: AlignedBuf::zeroed_registered(capacity),
            buffer_start: start.offset,
            append_end: start.offset,
            durable: start,
            flushing: false,
            flusher_woken: false,
            // The next generation is prepared (formatted and named ahead) at once.
            spare_wanted: true,
            begun: true,
            previous_end: Lsn::ZERO,
            rollover_requested: false,
            poisoned: None,
            closed: false,
            write_sequence: 0,
            in_flight_end: Lsn::default(),
            next_wanted: false,
            handed_on_at: None,
            write_buffer: Some(AlignedBuf::zeroed_registered(capacity)),
            oldest_generation,
        };
        let inner = Arc::new(Inner {
            backend,
            write_threshold: options.write_threshold(),
            options,
            sector,
            state: Mutex::new(state),
            durable_packed: AtomicU64::new(start.to_u64()),
            end_packed: AtomicU64::new(start.to_u64()),
            unusable: AtomicBool::new(false),
            changed: Condvar::new(),
            durable_waiters: [Condvar::new(), Condvar::new()],
            wake_flusher: Condvar::new(),
            spare: Mutex::new(Spares {
                staged: None,
                named: None,
                newest_named: start.generation,
            }),
            checkpoint: Mutex::new(checkpoint),
            retention: Mutex::new(()),
            stats: LogStats::default(),
        });
        let thread_inner = inner.clone();
        let flusher = std::thread::Builder::new()
            .name("jetproof-log-flusher".into())
            .spawn(move || background_flusher(&thread_inner))
            .ok();
        Log { inner, flusher }
    }

    /// Appends a record to the log buffer and returns its LSN. Does not wait for the disk unless
    /// the buffer is full or the generation must roll over.
    pub fn append(&self, record: &Record<'_>) -> Result<Lsn> {
        let inner = &*self.inner;
        let max = inner.options.max_payload_bytes();
        if record.payload.len() > max {
            return Err(LogError::RecordTooLarge {
                size_bytes: record.payload.len(),
                max_bytes: max,
            });
        }
        let size = frame_bytes(record.payload.len());
        // Outside the mutex: the one pass over the payload besides its copy into the buffer.
        let payload_crc = jetproof_io::crc::crc32c(record.payload);
        let mut state = inner.state.lock();
        loop {
            inner.check_usable(&state)?;
            if state.rollover_requested {
                if !state.flushing {
                    inner.write(&mut state, WriteTrigger::Rollover)?;
                } else {
                    inner.changed.wait(&mut state);
                }
                continue;
            }
            let end_in_file = state.append_end + size + FLUSH_FRAME_BYTES + GEN_END_FRAME_BYTES;
            if end_in_file > inner.options.file_size_bytes {
                state.rollover_requested = true;
                continue;
            }
            // The header block a generation's first write carries (buffer_start 0) has room of
            // its own in the buffer.
            let end_in_buffer =
                state.append_end + size + FLUSH_FRAME_BYTES - state.buffer_start.max(DATA_START);
            if end_in_buffer > inner.options.buffer_size_bytes as u64 {
                if !state.flushing && unwritten_bytes(&state) == 0 {
                    // Nothing left to write, and still no room: the record can never fit.
                    return Err(LogError::RecordTooLarge {
                        size_bytes: record.payload.len(),
                        max_bytes: max,
                    });
                }
                if !state.flushing {
                    inner.write(&mut state, WriteTrigger::BufferFull)?;
                } else {
                    inner.changed.wait(&mut state);
                }
                continue;
            }
            let lsn = Lsn::new(state.generation, state.append_end);
            let at = (state.append_end - state.buffer_start) as usize;
            encode_frame_with_crc(
                &mut state.buffer[at..at + size as usize],
                FrameKind::Record,
                lsn,
                record.record_type,
                record.transaction_id,
                record.payload,
                payload_crc,
            );
            state.append_end += size;
            inner.publish_end(&state);
            // Start a write once the write threshold (half the buffer by default) waits past
            // the durable end, as ESE signals its log writer for a "capacity" write when half
            // its buffer is full (`LOG_WRITE_BUFFER::ErrLGLogRec`); so appenders rarely find the
            // buffer full. Durable commits and the write-ahead gate write for themselves and
            // lazy commits ride on those writes; the background flusher's timer is only a
            // bound. (Until 2026-11-22 a single full sector woke the flusher: about two log
            // writes in three at the seeds' rate, which ESE does not issue.)
            let unwritten = unwritten_bytes(&state);
            if !state.flushing && !state.flusher_woken && unwritten >= inner.write_threshold {
                state.flusher_woken = true;
                inner.wake_flusher.notify_one();
            }
            drop(state);
            inner.stats.records.fetch_add(1, Ordering::Relaxed);
            inner
                .stats
                .record_bytes
                .fetch_add(record.payload.len() as u64, Ordering::Relaxed);
            return Ok(lsn);
        }
    }

    /// Commits a transaction whose last record is at `lsn`: a durable commit returns once that
    /// record is on stable storage, a lazy one at once.
    pub fn commit(&self, lsn: Lsn, durability: Durability) -> Result<()> {
        match durability {
            Durability::Durable => {
                self.inner
                    .stats
                    .durable_commits
                    .fetch_add(1, Ordering::Relaxed);
                self.wait_durable_for(lsn, WriteTrigger::DurableCommit)
            }
            Durability::Lazy => {
                self.inner
                    .stats
                    .lazy_commits
                    .fetch_add(1, Ordering::Relaxed);
                // No mutex unless the log is poisoned or closed (then for the error's cause).
                if self.inner.unusable.load(Ordering::Acquire) {
                    self.inner.check_usable(&self.inner.state.lock())
                } else {
                    Ok(())
                }
            }
        }
    }

    /// Appends a record and commits with it as the transaction's last record.
    pub fn append_and_commit(&self, record: &Record<'_>, durability: Durability) -> Result<Lsn> {
        let lsn = self.append(record)?;
        self.commit(lsn, durability)?;
        Ok(lsn)
    }

    /// Waits until the record at `lsn` (and everything before it) is on stable storage, writing
    /// the log itself if no write is in flight. This is the write-ahead rule's gate: the cache
    /// calls it before writing a page whose last change is logged at `lsn`.
    pub fn wait_durable(&self, lsn: Lsn) -> Result<()> {
        self.wait_durable_for(lsn, WriteTrigger::WriteAhead)
    }

    /// [`Log::wait_durable`], counting a write it issues under `trigger`.
    fn wait_durable_for(&self, lsn: Lsn, trigger: WriteTrigger) -> Result<()> {
        let inner = &*self.inner;
        let mut state = inner.state.lock();
        loop {
            if let Some(cause) = &state.poisoned {
                return Err(inner.poisoned(cause));
            }
            if state.durable > lsn {
                return Ok(());
            }
            if state.closed {
                return Err(LogError::Closed {
                    dir: inner.options.dir.clone(),
                });
            }
            if end_of(&state) <= lsn {
                return Err(LogError::InvalidOptions {
                    field: "lsn",
                    reason: format!(
                        "{lsn} was never appended (the log ends at {}:{})",
                        state.generation, state.append_end
                    ),
                });
            }
            if state.flushing {
                let number = state.write_sequence;
                let covered = lsn < state.in_flight_end;
                let slot = if covered {
                    number % 2
                } else {
                    (number + 1) % 2
                } as usize;
                if !covered {
                    state.next_wanted = true;
                }
                inner.durable_waiters[slot].wait(&mut state);
                let next = (state.write_sequence % 2) as usize;
                if slot == next && state.durable > lsn && !state.flushing {
                    // Woken to start the next write but already durable (not expected: a
                    // waiter on the next write's slot was not covered by the one before):
                    // hand the start on rather than leave the others asleep.
                    inner.durable_waiters[next].notify_one();
                }
            } else if trigger == WriteTrigger::DurableCommit {
                // A durable commit writes, and when durable commits arrived during its write
                // for records it did not cover, writes once more for them at once (ESE's
                // deferred write, `ErrLGIDeferredWrite`): the device gets them the moment this
                // write completes, not after a waiter has been woken and scheduled. Once: the
                // writer's own transaction waits for that write too, so the next is handed on.
                if inner.write_then(&mut state, trigger, true)?
                    && state.poisoned.is_none()
                    && !state.closed
                {
                    inner.stats.deferred_writes.fetch_add(1, Ordering::Relaxed);
                    inner.write_then(&mut state, trigger, false)?;
                }
            } else {
                inner.write(&mut state, trigger)?;
            }
        }
    }

    /// Writes and syncs everything appended so far.
    pub fn flush(&self) -> Result<()> {
        let inner = &*self.inner;
        let mut state = inner.state.lock();
        let target = end_of(&state);
        loop {
            if let Some(cause) = &state.poisoned {
                return Err(inner.poisoned(cause));
            }
            if state.durable >= target && !state.rollover_requested {
                return Ok(());
            }
            if state.flushing {
                inner.changed.wait(&mut state);
            } else {
                inner.write(&mut state, WriteTrigger::Flush)?;
            }
        }
    }

    /// Everything before this position is on stable storage (a frame boundary). Lock-free.
    pub fn flushed_lsn(&self) -> Lsn {
        Lsn::from_u64(self.inner.durable_packed.load(Ordering::Acquire))
    }

    /// Is the record at `lsn` on stable storage? Lock-free; the cache's cheap check before
    /// [`Log::wait_durable`].
    pub fn is_durable(&self, lsn: Lsn) -> bool {
        self.flushed_lsn() > lsn
    }

    /// Where the next record will go (the end of the log buffer). Lock-free; a concurrent
    /// append may have moved it further by the time the caller looks.
    pub fn end_lsn(&self) -> Lsn {
        Lsn::from_u64(self.inner.end_packed.load(Ordering::Acquire))
    }

    /// The last checkpoint written.
    pub fn checkpoint(&self) -> Lsn {
        self.inner.checkpoint.lock().last().lsn
    }

    /// Durably records `lsn` as the oldest position recovery needs, then applies the retention
    /// rule to generations wholly before it. `lsn` must not be ahead of the durable log.
    pub fn write_checkpoint(&self, lsn: Lsn) -> Result<()> {
        self.write_checkpoint_stamped(lsn, None)
    }

    /// The engine's stamp stored with the last checkpoint (see [`Checkpoint::engine_stamp`]).
    pub fn checkpoint_engine_stamp(&self) -> u64 {
        self.inner.checkpoint.lock().last().engine_stamp
    }

    /// [`Log::write_checkpoint`], storing `engine_stamp` with it (`None`: the previous one).
    pub fn write_checkpoint_stamped(&self, lsn: Lsn, engine_stamp: Option<u64>) -> Result<()> {
        let inner = &*self.inner;
        let durable = {
            let state = inner.state.lock();
            inner.check_usable(&state)?;
            state.durable
        };
        if lsn > durable {
            return Err(LogError::CheckpointBeyondLog {
                path: checkpoint_path(&inner.options.dir),
                checkpoint: lsn,
                log_end: durable,
            });
        }
        let mut checkpoint = inner.checkpoint.lock();
        if lsn < checkpoint.last().lsn {
            return Err(LogError::InvalidOptions {
                field: "checkpoint",
                reason: format!(
                    "{lsn} is before the current checkpoint {}",
                    checkpoint.last().lsn
                ),
            });
        }
        if let Err(error) = checkpoint.write_durable(lsn, engine_stamp, durable) {
            return Err(inner.poison(error));
        }
        inner.stats.checkpoints.fetch_add(1, Ordering::Relaxed);
        // Outside the checkpoint's lock (the background takes it while holding the spare's,
        // which retention takes), under retention's own, so two checkpoints never delete the
        // same files.
        drop(checkpoint);
        let _retention = inner.retention.lock();
        inner.apply_retention(lsn.generation)
    }

    pub fn stats(&self) -> &LogStats {
        &self.inner.stats
    }

    pub fn options(&self) -> &LogOptions {
        &self.inner.options
    }

    /// The oldest generation file still present.
    pub fn oldest_generation(&self) -> u64 {
        self.inner.state.lock().oldest_generation
    }

    /// Writes everything appended, stops the background flusher and refuses further work.
    pub fn close(mut self) -> Result<()> {
        let result = self.flush();
        self.stop();
        result
    }

    fn stop(&mut self) {
        {
            let mut state = self.inner.state.lock();
            state.closed = true;
            self.inner.unusable.store(true, Ordering::Release);
        }
        self.inner.wake_flusher.notify_all();
        self.inner.wake_every_waiter();
        if let Some(handle) = self.flusher.take() {
            // A panic in the flusher thread has already poisoned nothing we could recover here.
            let _ = handle.join();
        }
    }
}

impl Drop for Log {
    /// Dropping without [`Log::close`] is like a crash of the process: appended records that no
    /// write covered are lost, which is what crash tests want.
    fn drop(&mut self) {
        self.stop();
    }
}

impl Inner {
    fn check_usable(&self, state: &State) -> Result<()> {
        if let Some(cause) = &state.poisoned {
            return Err(self.poisoned(cause));
        }
        if state.closed {
            return Err(LogError::Closed {
                dir: self.options.dir.clone(),
            });
        }
        Ok(())
    }

    fn poisoned(&self, cause: &str) -> LogError {
        LogError::Poisoned {
            dir: self.options.dir.clone(),
            cause: cause.to_string(),
        }
    }

    /// Marks the log unusable after a failed write or sync and returns the original error.
    fn poison(&self, error: IoError) -> LogError {
        self.mark_poisoned(error.to_string());
        LogError::Io(error)
    }

    /// Marks the log unusable for `cause` (the first cause stays) and wakes every waiter.
    fn mark_poisoned(&self, cause: String) {
        let mut state = self.state.lock();
        if state.poisoned.is_none() {
            state.poisoned = Some(cause);
            self.unusable.store(true, Ordering::Release);
        }
        drop(state);
        self.wake_every_waiter();
    }

    /// Wakes everyone waiting on the log (poisoned, closed).
    fn wake_every_waiter(&self) {
        self.changed.notify_all();
        for waiters in &self.durable_waiters {
            waiters.notify_all();
        }
    }

    /// One log write: everything appended so far plus a flush frame (and a generation-end frame
    /// when rolling over), then fdatasync. Called with the state locked and no write in flight;
    /// unlocks around the I/O. The write is counted under `trigger`, or under
    /// [`WriteTrigger::Rollover`] when it ends the generation.
    fn write(
        &self,
        state: &mut parking_lot::MutexGuard<'_, State>,
        trigger: WriteTrigger,
    ) -> Result<()> {
        self.write_then(state, trigger, false).map(drop)
    }

    /// [`Inner::write`]; with `may_continue`, a write that completes while durable commits wait
    /// for records it did not cover wakes none of them to write next and returns true: the
    /// caller writes next itself, still holding the state's lock (the deferred write). Otherwise
    /// one of those waiters is woken to write (a hand-off) and it returns false.
    fn write_then(
        &self,
        state: &mut parking_lot::MutexGuard<'_, State>,
        trigger: WriteTrigger,
        may_continue: bool,
    ) -> Result<bool> {
        let rollover = state.rollover_requested;
        if unwritten_bytes(state) == 0 && !rollover {
            if state.next_wanted {
                // Nothing to write after all (not expected while a waiter wants more): hand on
                // rather than leave the next write's waiters asleep.
                state.next_wanted = false;
                self.durable_waiters[((state.write_sequence + 1) % 2) as usize].notify_one();
            }
            return Ok(false);
        }
        state.flushing = true;
        // Everything appended so far goes in this write: whoever waited for "the next write"
        // is covered by it; waiters arriving during it set the flag again.
        state.next_wanted = false;
        if let Some(handed_on) = state.handed_on_at.take() {
            self.stats.handoffs.fetch_add(1, Ordering::Relaxed);
            self.stats
                .handoff_gap_ns_total
                .fetch_add(nanos_since(handed_on), Ordering::Relaxed);
        }
        // A generation not begun: its first write starts at offset 0 with the header block
        // (copy A as written when it was named, copy B naming `previous_end`), which sits at the
        // buffer's start, and its new data at the data start.
        let begins = !state.begun;
        let write_start = if begins {
            DATA_START
        } else {
            state.durable.offset
        };
        // Room: every append leaves space for a flush frame and a generation-end frame after it,
        // and every write's flush frame leaves space for a generation-end frame. So a rollover
        // write with new records has room for both, and one without new records (the previous
        // write's flush frame already took its share) carries only the generation-end frame.
        let new_records = state.append_end > write_start;
        if new_records {
            let info = FlushInfo {
                durable_before: state.durable,
                write_start,
                write_sequence: state.write_sequence,
            };
            // A durable commit's flush frame runs on in zeros to the sector's end (format
            // version 2): the write ends on a sector boundary and the next one starts there.
            let fill = self.sector_fill(state, trigger, rollover);
            self.append_internal(state, FrameKind::Flush, &info.encode(), fill);
            if fill > 0 {
                self.stats.fill_bytes.fetch_add(fill, Ordering::Relaxed);
            }
        }
        if rollover {
            self.append_internal(state, FrameKind::GenerationEnd, &[], 0);
        }
        let end = state.append_end;
        state.in_flight_end = Lsn::new(state.generation, end);
        debug_assert!(
            end <= self.options.file_size_bytes,
            "log write would end at {end}, past the {}-byte generation",
            self.options.file_size_bytes
        );
        let first = if begins {
            0
        } else {
            align_down(write_start, self.sector)
        };
        let last = align_up(end, self.sector);
        // Invariant: the write covers whole sectors from the sector holding the durable end (or
        // the generation's start) through the end of its last frame, inside the buffer; a write
        // short of that leaves frames unwritten, one before it overwrites durable frames with
        // other bytes.
        debug_assert!(
            first.is_multiple_of(self.sector)
                && last.is_multiple_of(self.sector)
                && first <= write_start
                && end <= last
                && first >= state.buffer_start
                && (last - state.buffer_start) as usize <= state.buffer.len(),
            "log write [{first}, {last}) for frames [{write_start}, {end}) with buffer at {}",
            state.buffer_start
        );
        let from = (first - state.buffer_start) as usize;
        let length = (last - first) as usize;
        // The write goes out of the buffer itself: the buffer is swapped with the spare one,
        // which gets only the sector holding the write's end (rewritten by the next write), and
        // appends continue there while the write is in flight. Bytes past the end of the log in
        // a buffer are left over from earlier use, so the rounded-up tail of the write is zeroed
        // (a reader must find zeros, "nothing written", after the last frame).
        let used = (end - state.buffer_start) as usize;
        let tail = (last - end) as usize;
        state.buffer[used..used + tail].fill(0);
        let keep_from = align_down(end, self.sector);
        let kept = (end - keep_from) as usize;
        let mut next = state
            .write_buffer
            .take()
            .unwrap_or_else(|| AlignedBuf::zeroed_registered(state.buffer.len()));
        next[..kept].copy_from_slice(&state.buffer[used - kept..used]);
        let write_buffer = std::mem::replace(&mut state.buffer, next);
        state.buffer_start = keep_from;
        let file = state.file.clone();
        let generation = state.generation;
        let previous_end = Lsn::new(generation, end);

        let result = parking_lot::MutexGuard::unlocked(
            state,
            || -> Result<Option<NamedGeneration>, IoError> {
                // The generation file is written through (O_DSYNC, as ESE writes its logs):
                // the write returns once durable, so its latency is the log write's whole cost
                // and no fdatasync follows.
                let begun = std::time::Instant::now();
                file.write_at(&write_buffer[from..from + length], first, IoClass::LogWrite)?;
                self.stats
                    .write_latency_ns_total
                    .fetch_add(nanos_since(begun), Ordering::Relaxed);
                if rollover {
                    return self
                        .next_generation(generation, previous_end, begun)
                        .map(Some);
                }
                Ok(None)
            },
        );
        state.write_buffer = Some(write_buffer);
        state.flushing = false;
        let next_file = match result {
            Ok(next_file) => next_file,
            Err(error) => {
                if state.poisoned.is_none() {
                    state.poisoned = Some(error.to_string());
                    self.unusable.store(true, Ordering::Release);
                }
                self.wake_every_waiter();
                return Err(LogError::Io(error));
            }
        };
        self.stats.writes.fetch_add(1, Ordering::Relaxed);
        let trigger = if rollover {
            WriteTrigger::Rollover
        } else {
            trigger
        };
        self.stats.writes_by_trigger[trigger as usize].fetch_add(1, Ordering::Relaxed);
        self.stats
            .write_bytes
            .fetch_add(length as u64, Ordering::Relaxed);
        let completed = state.write_sequence;
        state.write_sequence += 1;
        match next_file {
            Some(next) => self.install_generation(state, next, generation, previous_end),
            None => {
                // Invariant: the durable end only grows: a write ends past where the log was
                // durable before it (a commit acknowledged before a smaller durable end would be
                // reported durable twice, or not at all).
                debug_assert!(
                    Lsn::new(generation, end) > state.durable,
                    "a log write ending at {} moves the durable end back from {}",
                    Lsn::new(generation, end),
                    state.durable
                );
                // The buffer already starts at the sector holding the durable end.
                state.durable = Lsn::new(generation, end);
                self.durable_packed
                    .store(state.durable.to_u64(), Ordering::Release);
                if begins {
                    // Begun: the next generation may be named ahead now.
                    state.begun = true;
                    state.spare_wanted = true;
                    self.wake_flusher.notify_one();
                }
            }
        }
        self.changed.notify_all();
        self.durable_waiters[(completed % 2) as usize].notify_all();
        if may_continue && state.next_wanted {
            // The caller writes next, at once (the deferred write).
            return Ok(true);
        }
        if state.next_wanted {
            state.handed_on_at = Some(std::time::Instant::now());
        }
        // One of the next write's waiters, if any (none asleep: nothing happens).
        self.durable_waiters[((completed + 1) % 2) as usize].notify_one();
        Ok(false)
    }

    /// A rollover's next generation, after the write that ended this one (`begun`: when that
    /// write started): the one named ahead, or, when none is ready, one formatted, named and
    /// recorded here.
    fn next_generation(
        &self,
        generation: u64,
        previous_end: Lsn,
        begun: std::time::Instant,
    ) -> Result<NamedGeneration, IoError> {
        // The next generation was named ahead (and recorded in the checkpoint file)
        // by the background; the spare's lock is held only while it is taken, or,
        // when none is ready, while one is formatted, named and recorded here.
        let waited = std::time::Instant::now();
        let mut spares = self.spare.lock();
        self.stats
            .rollover_spare_wait_ns_total
            .fetch_add(nanos_since(waited), Ordering::Relaxed);
        let next = match spares.named.take() {
            Some(named) if named.generation == generation + 1 => named,
            Some(named) => {
                return Err(IoError::Injected {
                    op: "create generation",
                    path: generation_path(&self.options.dir, generation + 1),
                    offset: 0,
                    what: format!(
                        "the generation named ahead is {}, not {} (a bug)",
                        named.generation,
                        generation + 1
                    ),
                });
            }
            None => {
                self.stats
                    .rollovers_without_spare
                    .fetch_add(1, Ordering::Relaxed);
                let as_io = |error: LogError| match error {
                    LogError::Io(io) => io,
                    other => IoError::Injected {
                        op: "create generation",
                        path: generation_path(&self.options.dir, generation + 1),
                        offset: 0,
                        what: other.to_string(),
                    },
                };
                let staged = spares.staged.take();
                let named = name_generation(
                    &*self.backend,
                    &self.options,
                    staged,
                    generation + 1,
                    Some(&self.stats),
                )
                .map_err(as_io)?;
                // Recorded before any record can be durable in it (`docs/log.md`,
                // "The log's end is proved").
                self.checkpoint
                    .lock()
                    .record_installed(generation + 1, previous_end)?;
                spares.newest_named = generation + 1;
                named
            }
        };
        drop(spares);
        self.stats.rollovers.fetch_add(1, Ordering::Relaxed);
        self.stats
            .rollover_latency_ns_total
            .fetch_add(nanos_since(begun), Ordering::Relaxed);
        Ok(next)
    }

    /// Makes `next` the generation appends go to, not begun, after a rollover write ended
    /// `generation` at `previous_end`.
    fn install_generation(
        &self,
        state: &mut parking_lot::MutexGuard<'_, State>,
        next: NamedGeneration,
        generation: u64,
        previous_end: Lsn,
    ) {
        // The new generation is not begun: its header block goes at the buffer's start
        // (copy A exactly as written when it was named, copy B naming where this
        // generation ended), and its first write carries it. Until then the durable
        // end stays here, at the end of the generation-end frame.
        let NamedGeneration {
            file: next_file,
            mut header,
            block,
            ..
        } = next;
        // Invariant: generation numbers only grow, one at a time, and the generation ended is
        // the one being written; the end recorded for it is not before its durable end.
        assert_eq!(
            state.generation, generation,
            "rollover from generation {generation} while generation {} is current",
            state.generation
        );
        assert!(
            previous_end >= state.durable,
            "generation {generation} ends at {previous_end}, before its durable end {}",
            state.durable
        );
        state.generation = generation + 1;
        state.file = next_file;
        state.begun = false;
        state.previous_end = previous_end;
        state.buffer_start = 0;
        let header_block = &mut state.buffer[..DATA_START as usize];
        header_block.copy_from_slice(&block);
        header.encode_begun(header_block, previous_end);
        state.append_end = DATA_START;
        self.publish_end(state);
        state.durable = previous_end;
        self.durable_packed
            .store(state.durable.to_u64(), Ordering::Release);
        state.rollover_requested = false;
        self.stats
            .generations_created
            .fetch_add(1, Ordering::Relaxed);
        // The next spare can be formatted now; it is named once this one is begun.
        state.spare_wanted = true;
        self.wake_flusher.notify_one();
    }

    /// How many zero bytes the flush frame of this write carries past its [`FlushInfo`] so the
    /// write ends on a sector boundary: non-zero only for a durable commit's write (ESE fills the
    /// partial sector when a durable commit's record sits in it, `fLGFillPartialSector` in
    /// `ErrLGWaitForWrite`), when the option is on, the end is not already on a boundary, and the
    /// generation keeps room for its generation-end frame after the filled sector (otherwise the
    /// write ends where it would have and the next one rewrites its last sector, as before).
    /// The buffer always has room: an append leaves room for a flush frame within
    /// `buffer_size_bytes`, and the buffer holds that rounded up to a sector, plus one.
    fn sector_fill(&self, state: &State, trigger: WriteTrigger, rollover: bool) -> u64 {
        if !self.options.fill_partial_sector || rollover || trigger != WriteTrigger::DurableCommit {
            return 0;
        }
        let plain_end = state.append_end + FLUSH_FRAME_BYTES;
        let filled_end = align_up(plain_end, self.sector);
        if filled_end + GEN_END_FRAME_BYTES > self.options.file_size_bytes {
            return 0;
        }
        filled_end - plain_end
    }

    /// Appends a log-internal frame whose payload is `payload` then `fill` zero bytes; room for
    /// it was reserved by [`Log::append`] (and, for the fill, checked by [`Inner::sector_fill`]).
    fn append_internal(&self, state: &mut State, kind: FrameKind, payload: &[u8], fill: u64) {
        let size = frame_bytes(payload.len() + fill as usize);
        let lsn = Lsn::new(state.generation, state.append_end);
        // Invariant: a log-internal frame fits the generation file (its room was reserved by
        // the appends); past the file's end, its bytes would never be read back.
        debug_assert!(
            state.append_end + size <= self.options.file_size_bytes,
            "a {kind:?} frame at {lsn} runs past the generation's end"
        );
        let at = (state.append_end - state.buffer_start) as usize;
        encode_frame_filled(
            &mut state.buffer[at..at + size as usize],
            kind,
            lsn,
            payload,
            fill as usize,
        );
        state.append_end += size;
        self.publish_end(state);
    }

    /// Mirrors the end of the log for [`Log::end_lsn`]; called with the mutex held, so the
    /// value only grows.
    fn publish_end(&self, state: &State) {
        self.end_packed
            .store(end_of(state).to_u64(), Ordering::Release);
    }

    fn apply_retention(&self, checkpoint_generation: u64) -> Result<()> {
        if self.options.retention == Retention::KeepAll {
            return Ok(());
        }
        let dir = &self.options.dir;
        let oldest = self.state.lock().oldest_generation;
        for generation in oldest..checkpoint_generation {
            let path = generation_path(dir, generation);
            let mut spare = self.spare.lock();
            // Only this database's generation is removed or recycled: a file put at its name
            // by someone else stops the log rather than being deleted.
            let owned = owned::check_owned(
                &*self.backend,
                &path,
                LogFileName::Generation(generation),
                Some(self.options.database_id),
                None,
            );
            match owned {
                Ok(_) => {}
                // Already gone (a previous retention pass was cut short): nothing to do.
                Err(LogError::Io(IoError::Path { source, .. }))
                    if source.kind() == std::io::ErrorKind::NotFound => {}
                Err(error) => return Err(error),
            }
            if !self.backend.exists(&path) {
                drop(spare);
                self.state.lock().oldest_generation = generation + 1;
                continue;
            }
            if self.options.retention == Retention::Circular && spare.staged.is_none() {
                // Reuse the file as the next generation: its old frames carry an older
                // generation number, so readers treat them as unwritten space.
                self.backend.rename_new(&path, &spare_path(dir))?;
                let file = self.backend.open(
                    &spare_path(dir),
                    &OpenOptions::read_write()
                        .with_direct(self.options.direct_io)
                        .no_follow(),
                )?;
                // Not metered: installing it is file creation, not a log write.
                spare.staged = Some(file);
            } else {
                self.backend.remove(&path)?;
            }
            drop(spare);
            self.state.lock().oldest_generation = generation + 1;
        }
        self.backend.sync_dir(dir)?;
        Ok(())
    }

    /// Prepares the next generation ahead of time: formats the spare (zeros, synced), and once
    /// the current generation is begun, names it as the next generation (its header not begun,
    /// renamed into place, the directory synced) and records that name in the checkpoint file.
    /// A rollover then takes it without any I/O of its own (`docs/log.md`, "Naming the next
    /// generation ahead").
    fn prepare_spare(&self) -> Result<()> {
        let mut spares = self.spare.lock();
        if spares.named.is_some() {
            return Ok(());
        }
        if spares.staged.is_none() {
            spares.staged = Some(format_spare(
                &*self.backend,
                &self.options,
                Some(&self.stats),
            )?);
        }
        let (generation, begun, durable) = {
            let state = self.state.lock();
            if state.closed || state.poisoned.is_some() {
                return Ok(());
            }
            (state.generation, state.begun, state.durable)
        };
        // At most one generation is not begun, and it is the newest: the next is named only
        // once the current one (the newest named) has been begun. (A rollover that took the
        // named spare may not have moved `state.generation` yet: `newest_named` is ahead then.)
        if !begun || spares.newest_named != generation {
            return Ok(());
        }
        let named = name_generation(
            &*self.backend,
            &self.options,
            spares.staged.take(),
            generation + 1,
            Some(&self.stats),
        )?;
        // Its name is durable: the checkpoint file may name it now, before any record can be
        // durable in it (a rollover cannot take it before this returns: it waits for the
        // spare's lock). The durable end recorded is a real one, the current generation's.
        self.checkpoint
            .lock()
            .record_installed(generation + 1, durable)?;
        spares.newest_named = generation + 1;
        spares.named = Some(named);
        Ok(())
    }
}

/// Bytes appended past the durable end (in a generation not begun, past its data start).
fn unwritten_bytes(state: &State) -> u64 {
    if state.begun {
        state.append_end.saturating_sub(state.durable.offset)
    } else {
        state.append_end.saturating_sub(DATA_START)
    }
}

/// The end of the log: where the next record goes, or, in a generation not begun that holds
/// nothing yet, the end of the generation before (the same position: nothing lies between).
fn end_of(state: &State) -> Lsn {
    if !state.begun && state.append_end <= DATA_START {
        state.previous_end
    } else {
        Lsn::new(state.generation, state.append_end)
    }
}

fn background_flusher(inner: &Inner) {
    let interval = inner.options.lazy_flush_interval;
    // The lazy timer runs from the last write or capacity wake-up, as before; a wake-up only to
    // prepare the spare does not restart it, so a lazy commit is still written within the
    // interval.
    let mut deadline = jetproof_io::clock::later(std::time::Instant::now(), interval);
    loop {
        {
            let mut state = inner.state.lock();
            if state.closed || state.poisoned.is_some() {
                return;
            }
            // Woken while it was busy (formatting the spare, or writing): the wake-up found no
            // waiter, so do not sleep through it.
            if !state.flusher_woken && !state.spare_wanted {
                inner.wake_flusher.wait_until(&mut state, deadline);
            }
            let timer_due = std::time::Instant::now() >= deadline;
            let woken = state.flusher_woken;
            let trigger = if woken {
                WriteTrigger::Capacity
            } else {
                WriteTrigger::LazyTimer
            };
            state.flusher_woken = false;
            state.spare_wanted = false;
            if state.closed || state.poisoned.is_some() {
                return;
            }
            if woken || timer_due {
                deadline = jetproof_io::clock::later(std::time::Instant::now(), interval);
                let pending = unwritten_bytes(&state) > 0;
                if !state.flushing && (pending || state.rollover_requested) {
                    // A failure poisons the log; the waiting sessions see it.
                    let _ = inner.write(&mut state, trigger);
                }
            }
        }
        // Outside the state lock: formatting takes a while and appends must not wait for it.
        if let Err(error) = inner.prepare_spare() {
            // A failed write to the log's volume is a storage error like any other: the log
            // stops and every later append, commit or close reports it, with the file. (It was
            // once left to the rollover that needs the file, which may never come: a clean
            // close or the end of a recovery then hid it.)
            inner.mark_poisoned(format!("preformatting the next log file: {error}"));
            return;
        }
    }
}

fn nanos_since(begun: std::time::Instant) -> u64 {
    begun.elapsed().as_nanos().min(u128::from(u64::MAX)) as u64
}

/// Creates and zero-fills the spare file (ESE's `edbtmp.log`) and syncs it.
fn format_spare(
    backend: &dyn IoBackend,
    options: &LogOptions,
    stats: Option<&LogStats>,
) -> Result<Arc<dyn IoFile>> {
    let path = spare_path(&options.dir);
    // A spare left over (a create or rollover cut short) is ours to format anew only if its
    // content says so; then the file is made new, so nothing that was there is written.
    owned::remove_owned(
        backend,
        &options.dir,
        LogFileName::Spare,
        Some(options.database_id),
        Some(options.file_size_bytes),
    )?;
    // Not metered in the `log_write` class: Jetstress's "I/O Log Writes" are the log buffer's
    // writes, and the seeds' figures leave no room for a generation's worth of formatting
    // (`docs/log.md`, "Preformatting is not a log write"). Counted in `LogStats` instead.
    let file = backend.open(
        &path,
        &OpenOptions::create_new().with_direct(options.direct_io),
    )?;
    let begun = std::time::Instant::now();
    let chunk_bytes = (256usize << 10).min(options.file_size_bytes as usize);
    let zeros = AlignedBuf::zeroed(chunk_bytes);
    let mut offset = 0;
    let mut writes = 0;
    while offset < options.file_size_bytes {
        let length = chunk_bytes.min((options.file_size_bytes - offset) as usize);
        file.write_at(&zeros[..length], offset, IoClass::LogWrite)?;
        offset += length as u64;
        writes += 1;
    }
    file.sync_data(IoClass::LogWrite)?;
    if let Some(stats) = stats {
        stats
            .format_bytes
            .fetch_add(options.file_size_bytes, Ordering::Relaxed);
        stats.format_writes.fetch_add(writes, Ordering::Relaxed);
        stats
            .format_latency_ns_total
            .fetch_add(nanos_since(begun), Ordering::Relaxed);
    }
    Ok(file)
}

/// Names the spare (formatting one if none is given) as generation `generation`, not begun: writes
/// its header block (copy A; zeros where copy B goes), syncs, renames it into place (never over
/// a file at that name), syncs the directory, and opens it for writing. The caller records the
/// name in the checkpoint file before handing it to a rollover.
fn name_generation(
    backend: &dyn IoBackend,
    options: &LogOptions,
    spare: Option<Arc<dyn IoFile>>,
    generation: u64,
    stats: Option<&LogStats>,
) -> Result<NamedGeneration> {
    let header = GenerationHeader {
        database_id: options.database_id,
        generation,
        file_size_bytes: options.file_size_bytes,
        previous_end: Lsn::ZERO,
        created_unix_ms: unix_ms(),
        format_version: FORMAT_VERSION,
        begun: false,
    };
    let mut block = AlignedBuf::zeroed(DATA_START as usize);
    header.encode(&mut block);
    let file = place_generation(backend, options, spare, generation, &block, stats)?;
    Ok(NamedGeneration {
        generation,
        file,
        header,
        block,
    })
}

/// What naming ahead and installing share: takes the spare (formatting one if none is given),
/// writes `block` (the generation's header block) at its start and syncs it, renames it to the
/// generation's name (never over a file that appeared there: a foreign file, or a gap in the
/// numbering that a later generation fills — that stops the log instead), syncs the directory,
/// and opens it for log writes.
fn place_generation(
    backend: &dyn IoBackend,
    options: &LogOptions,
    spare: Option<Arc<dyn IoFile>>,
    generation: u64,
    block: &AlignedBuf,
    stats: Option<&LogStats>,
) -> Result<Arc<dyn IoFile>> {
    let dir = &options.dir;
    let spare = match spare {
        Some(spare) => spare,
        None => format_spare(backend, options, stats)?,
    };
    let begun = std::time::Instant::now();
    spare.write_at(block, 0, IoClass::LogWrite)?;
    spare.sync_data(IoClass::LogWrite)?;
    if let Some(stats) = stats {
        stats.format_writes.fetch_add(1, Ordering::Relaxed);
        stats
            .format_latency_ns_total
            .fetch_add(nanos_since(begun), Ordering::Relaxed);
    }
    drop(spare);
    let path = generation_path(dir, generation);
    backend.rename_new(&spare_path(dir), &path)?;
    backend.sync_dir(dir)?;
    open_generation_for_writing(backend, options, &path)
}

/// Begins, at [`Log::open`], a generation that was named ahead and never begun: its data area
/// is zeroed and synced first (a torn first write may have left frames of this generation
/// there, which must never be read as part of the new history), then its header block is
/// rewritten with copy A unchanged and copy B naming `previous_end`, and synced. A crash in
/// between leaves it not begun, and the next open does it again.
fn begin_in_place(
    backend: &dyn IoBackend,
    options: &LogOptions,
    generation: u64,
    previous_end: Lsn,
) -> Result<Arc<dyn IoFile>> {
    let path = generation_path(&options.dir, generation);
    let read_options = ReadOptions {
        direct_io: options.direct_io,
        ..ReadOptions::default()
    };
    let Some(mut header) = crate::scan::load_header_any(
        backend,
        &options.dir,
        generation,
        Some(options.database_id),
        &read_options,
    )?
    else {
        return Err(LogError::MissingGeneration {
            generation,
            path,
            reason: "it disappeared while the log was being opened".into(),
        });
    };
    let file = backend.open(
        &path,
        &OpenOptions::read_write()
            .with_direct(options.direct_io)
            .no_follow(),
    )?;
    let chunk_bytes = (256usize << 10).min(options.file_size_bytes as usize);
    let zeros = AlignedBuf::zeroed(chunk_bytes);
    let mut offset = DATA_START;
    while offset < options.file_size_bytes {
        let length = chunk_bytes.min((options.file_size_bytes - offset) as usize);
        file.write_at(&zeros[..length], offset, IoClass::LogWrite)?;
        offset += length as u64;
    }
    file.sync_data(IoClass::LogWrite)?;
    let mut block = AlignedBuf::zeroed(DATA_START as usize);
    header.begun = false;
    header.encode(&mut block);
    header.encode_begun(&mut block, previous_end);
    file.write_at(&block, 0, IoClass::LogWrite)?;
    file.sync_data(IoClass::LogWrite)?;
    drop(file);
    open_generation_for_writing(backend, options, &path)
}

/// A generation file opened for log writes: write-through (a log write is durable when it
/// returns, see `Inner::write`), no link followed, metered when the options ask.
fn open_generation_for_writing(
    backend: &dyn IoBackend,
    options: &LogOptions,
    path: &Path,
) -> Result<Arc<dyn IoFile>> {
    let file = backend.open(
        path,
        &OpenOptions::read_write()
            .with_direct(options.direct_io)
            .with_dsync(true)
            .no_follow(),
    )?;
    Ok(match &options.stats {
        Some(stats) => MeteredFile::wrap(file, stats.clone()),
        None => file,
    })
}

/// Turns the spare (formatting one if none is given) into generation `generation`, begun at
/// once (`Log::create`, and `Log::open` when no generation was named ahead): writes its
/// header (both copies, `previous_end` in copy B), syncs, renames it into place, syncs the
/// directory, and reopens it for writing.
fn install_generation(
    backend: &dyn IoBackend,
    options: &LogOptions,
    spare: Option<Arc<dyn IoFile>>,
    generation: u64,
    previous_end: Lsn,
    stats: Option<&LogStats>,
) -> Result<Arc<dyn IoFile>> {
    let mut block = AlignedBuf::zeroed(DATA_START as usize);
    GenerationHeader {
        database_id: options.database_id,
        generation,
        file_size_bytes: options.file_size_bytes,
        previous_end,
        created_unix_ms: unix_ms(),
        format_version: FORMAT_VERSION,
        begun: true,
    }
    .encode(&mut block);
    place_generation(backend, options, spare, generation, &block, stats)
}

/// Path helpers re-exported for tools.
pub fn log_file_path(dir: &Path, generation: u64) -> PathBuf {
    generation_path(dir, generation)
}
