//! Reading the log back: the replay iterator for recovery and the verifier for
//! `jetproof checksum`.
//!
//! Both read generation files whole, in large sequential reads, verify every frame's checksums and
//! position, and never write. The reader yields the records from a start position (normally the
//! checkpoint) to the end of the valid log; a torn tail is tolerated and reported in
//! [`ReadSummary::torn_tail`], damage in the middle is an error naming the file and offset.
#![deny(clippy::indexing_slicing, clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use jetproof_io::IoBackend;

use crate::checkpoint::{Checkpoint, CheckpointRead, read_checkpoint};
use crate::error::{LogError, Result};
use crate::format::{DATA_START, FrameKind, HEADER_COPY_OFFSET, checkpoint_path, generation_path};
use crate::lsn::{LogRecord, Lsn};
use crate::scan::{
    Analysis, GAP_PROBE_GENERATIONS, GenerationFile, ReadOptions, TornTail, analyse_generation,
    analyse_loaded, load_generation,
};

/// What a completed read saw.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReadSummary {
    /// Generations read, in order.
    pub generations: Vec<u64>,
    pub records: u64,
    /// Where the valid log ends (a writer reopening the log continues after it).
    pub end: Option<Lsn>,
    /// The last generation read ends with its generation-end frame: the next write goes to the
    /// next generation (named ahead and not begun), not after `end`.
    pub ended: bool,
    pub torn_tail: Option<TornTail>,
}

/// Iterates the records of a log from a position, across generations.
#[derive(Debug)]
pub struct LogReader {
    backend: Arc<dyn IoBackend>,
    dir: PathBuf,
    database_id: Option<u128>,
    options: ReadOptions,
    start: Lsn,
    next_generation: u64,
    current: Option<Analysis>,
    /// The next generation, being read by a helper thread while this one is scanned and its
    /// records consumed, so replay keeps the device busy.
    read_ahead: Option<ReadAhead>,
    frame_index: usize,
    finished: bool,
    summary: ReadSummary,
    /// The checkpoint read (when opened from it): the newest generation it records as installed
    /// and the durable end it records prove how far the log must reach.
    checkpoint: Option<crate::checkpoint::Checkpoint>,
    /// The file after the current generation was cut before its header ([`LogError::LostLog`]):
    /// reported once the current generation's records have been read.
    lost_after: Option<LogError>,
}

impl LogReader {
    /// Reads from `start`, which must be the start of a frame (a record LSN, a checkpoint, or a
    /// generation's first data byte).
    pub fn open(
        backend: Arc<dyn IoBackend>,
        dir: &Path,
        database_id: Option<u128>,
        start: Lsn,
        options: ReadOptions,
    ) -> Result<LogReader> {
        let start = if start.offset < DATA_START {
            Lsn::new(start.generation.max(1), DATA_START)
        } else {
            start
        };
        if !backend.exists(&generation_path(dir, start.generation)) {
            return Err(LogError::MissingGeneration {
                generation: start.generation,
                path: generation_path(dir, start.generation),
                reason: format!("replay must start at {start}"),
            });
        }
        Ok(LogReader {
            backend,
            dir: dir.to_path_buf(),
            database_id,
            options,
            start,
            next_generation: start.generation,
            current: None,
            read_ahead: None,
            frame_index: 0,
            finished: false,
            summary: ReadSummary::default(),
            checkpoint: None,
            lost_after: None,
        })
    }

    /// Reads from the checkpoint recorded in `dir`.
    pub fn from_checkpoint(
        backend: Arc<dyn IoBackend>,
        dir: &Path,
        database_id: Option<u128>,
        options: ReadOptions,
    ) -> Result<(LogReader, CheckpointRead)> {
        let Some(checkpoint) = read_checkpoint(&*backend, dir, database_id)? else {
            return Err(LogError::NotFound {
                dir: dir.to_path_buf(),
                path: checkpoint_path(dir),
            });
        };
        let database_id = database_id.or(Some(checkpoint.checkpoint.database_id));
        let mut reader = LogReader::open(
            backend,
            dir,
            database_id,
            checkpoint.checkpoint.lsn,
            options,
        )?;
        reader.checkpoint = Some(checkpoint.checkpoint);
        Ok((reader, checkpoint))
    }

    /// What has been read so far; complete once [`LogReader::next_record`] returned `Ok(None)`.
    pub fn summary(&self) -> &ReadSummary {
        &self.summary
    }

    /// The next record, `Ok(None)` at the end of the valid log.
    pub fn next_record(&mut self) -> Result<Option<LogRecord>> {
        loop {
            if self.finished {
                return Ok(None);
            }
            if let Some(analysis) = &self.current {
                if let Some(frame) = analysis.scan.frames.get(self.frame_index) {
                    self.frame_index += 1;
                    if frame.kind != FrameKind::Record {
                        continue;
                    }
                    self.summary.records += 1;
                    return Ok(Some(LogRecord {
                        lsn: Lsn::new(analysis.file.header.generation, frame.offset),
                        record_type: frame.record_type,
                        transaction_id: frame.transaction_id,
                        payload: frame.payload(&analysis.file.bytes).to_vec(),
                    }));
                }
                if !analysis.continued {
                    self.summary.end = Some(analysis.end);
                    self.summary.ended =
                        matches!(analysis.scan.stop, crate::scan::Stop::GenerationEnd);
                    self.finished = true;
                    // The log's end must be one a crash can leave (`docs/log.md`, "The log's
                    // end is proved"): not in a cut file, not before a generation the log
                    // installed.
                    let lost = analysis
                        .lost_log()
                        .or_else(|| {
                            self.lost_after.take().map(|error| match error {
                                LogError::LostLog { path, reason, .. } => LogError::LostLog {
                                    path,
                                    log_end: analysis.end,
                                    reason,
                                },
                                other => other,
                            })
                        })
                        .or_else(|| {
                            self.checkpoint.as_ref().and_then(|checkpoint| {
                                before_proved_end(
                                    &*self.backend,
                                    &self.dir,
                                    analysis.end,
                                    checkpoint,
                                )
                            })
                        });
                    if let Some(lost) = lost {
                        self.current = None;
                        return Err(lost);
                    }
                    self.summary.torn_tail = analysis.torn_tail.clone();
                    self.current = None;
                    return Ok(None);
                }
            }
            self.load_next()?;
        }
    }

    fn load_next(&mut self) -> Result<()> {
        let generation = self.next_generation;
        let read_ahead = self.read_ahead.get_or_insert_with(|| {
            ReadAhead::start(
                self.backend.clone(),
                &self.dir,
                generation,
                self.database_id,
                self.options.clone(),
            )
        });
        let file = match read_ahead.take()? {
            Some(file) => {
                // The next generation's header says where this one ends; the read-ahead has
                // usually read that file already.
                let next = match read_ahead.peek() {
                    Ok(next) => next.map(|next| next.header),
                    // The next file is cut before its header: this generation is the last one
                    // left, and the loss is reported after its records.
                    Err(lost @ LogError::LostLog { .. }) => {
                        self.lost_after = Some(lost);
                        None
                    }
                    Err(error) => return Err(error),
                };
                Some(analyse_loaded(&*self.backend, &self.dir, file, next)?)
            }
            None => None,
        };
        let Some(analysis) = file else {
            return Err(LogError::MissingGeneration {
                generation,
                path: generation_path(&self.dir, generation),
                reason: format!("generation {} says the log continues here", generation - 1),
            });
        };
        self.frame_index = 0;
        if generation == self.start.generation {
            // Skip to the start, which must be a frame boundary of the valid log.
            let start = self.start.offset;
            if start > analysis.scan.valid_end {
                // A file cut short is the cause, when it is one: say so.
                if let Some(lost) = analysis.lost_log() {
                    return Err(lost);
                }
                return Err(LogError::CheckpointBeyondLog {
                    path: analysis.file.path.clone(),
                    checkpoint: self.start,
                    log_end: analysis.end,
                });
            }
            if start != DATA_START && start != analysis.scan.valid_end {
                match analysis
                    .scan
                    .frames
                    .binary_search_by_key(&start, |f| f.offset)
                {
                    Ok(index) => self.frame_index = index,
                    Err(_) => {
                        return Err(LogError::NotARecordBoundary {
                            path: analysis.file.path.clone(),
                            offset: start,
                        });
                    }
                }
            } else if start == analysis.scan.valid_end {
                self.frame_index = analysis.scan.frames.len();
            }
        }
        self.summary.generations.push(generation);
        self.next_generation = generation + 1;
        self.current = Some(analysis);
        Ok(())
    }
}

/// The loss when a log found ending at `end` stops before `newest_installed`, the newest
/// generation the checkpoint file records as installed (0: unknown, an older checkpoint file).
/// A crash during rollover or open leaves the log ending in the generation before the one being
/// installed only while the checkpoint file does not name that one yet; once it does, the
/// generation was on disk, and only its removal (or a lost directory entry) can make it missing.
///
/// Since format version 4 the checkpoint file names a generation as soon as it is named ahead
/// (before it is begun): a log ending in g while the checkpoint file names g+1 is whole when
/// g+1's file is there and not begun (it holds no record). Deleted, it is a loss like any.
pub(crate) fn missing_newest(
    backend: &dyn IoBackend,
    dir: &Path,
    database_id: u128,
    end: Lsn,
    newest_installed: u64,
) -> Option<LogError> {
    if end.generation >= newest_installed {
        return None;
    }
    if newest_installed == end.generation + 1
        && matches!(
            crate::scan::load_header_any(
                backend,
                dir,
                newest_installed,
                Some(database_id),
                &ReadOptions::default()
            ),
            Ok(Some(header)) if !header.begun
        )
    {
        return None;
    }
    let first_missing = end.generation + 1;
    let which = if first_missing == newest_installed {
        format!("generation {newest_installed} is missing")
    } else {
        format!("generations {first_missing} to {newest_installed} are missing")
    };
    Some(LogError::LostLog {
        path: generation_path(dir, first_missing),
        log_end: end,
        reason: format!(
            "{which}: the checkpoint file {} records generation {newest_installed} as installed, \
             but the log ends in generation {}",
            checkpoint_path(dir).display(),
            end.generation
        ),
    })
}

/// The loss when a log found ending at `end` stops before what the checkpoint file proves it
/// reached: a generation it records as installed ([`missing_newest`]), or the durable end it
/// recorded when it was last written (synced log data gone: a zeroed or lost tail).
pub(crate) fn before_proved_end(
    backend: &dyn IoBackend,
    dir: &Path,
    end: Lsn,
    checkpoint: &crate::checkpoint::Checkpoint,
) -> Option<LogError> {
    missing_newest(
        backend,
        dir,
        checkpoint.database_id,
        end,
        checkpoint.newest_generation,
    )
    .or_else(|| {
        (end < checkpoint.durable_end).then(|| LogError::LostLog {
            path: generation_path(dir, end.generation),
            log_end: end,
            reason: format!(
                "the log's valid frames end at {end}, but the checkpoint file {} records the log \
                 as durable up to {} (synced log data is gone: a zeroed or lost tail)",
                checkpoint_path(dir).display(),
                checkpoint.durable_end
            ),
        })
    })
}

/// Generations read in order by a helper thread, up to two ahead of the one being scanned, so
/// the device always has the next large read to do while the reader checks frames and the
/// caller applies records.
#[derive(Debug)]
struct ReadAhead {
    receiver: std::sync::mpsc::Receiver<Result<Option<GenerationFile>>>,
    peeked: Option<Option<GenerationFile>>,
}

impl ReadAhead {
    fn start(
        backend: Arc<dyn IoBackend>,
        dir: &Path,
        first: u64,
        database_id: Option<u128>,
        options: ReadOptions,
    ) -> ReadAhead {
        let (sender, receiver) = std::sync::mpsc::sync_channel(2);
        let dir = dir.to_path_buf();
        std::thread::spawn(move || {
            let mut generation = first;
            loop {
                let loaded = load_generation(&*backend, &dir, generation, database_id, &options);
                let more = matches!(loaded, Ok(Some(_)));
                // A send fails when the reader is gone: stop reading.
                if sender.send(loaded).is_err() || !more {
                    return;
                }
                generation += 1;
            }
        });
        ReadAhead {
            receiver,
            peeked: None,
        }
    }

    fn receive(&self) -> Result<Option<GenerationFile>> {
        // A closed channel means the helper stopped after reporting a missing file or an error.
        self.receiver.recv().unwrap_or(Ok(None))
    }

    /// The next generation in order (`None`: it does not exist).
    fn take(&mut self) -> Result<Option<GenerationFile>> {
        match self.peeked.take() {
            Some(peeked) => Ok(peeked),
            None => self.receive(),
        }
    }

    /// The generation after the one last taken, without taking it.
    fn peek(&mut self) -> Result<Option<&GenerationFile>> {
        if self.peeked.is_none() {
            self.peeked = Some(self.receive()?);
        }
        Ok(self.peeked.as_ref().and_then(|peeked| peeked.as_ref()))
    }
}

impl Iterator for LogReader {
    type Item = Result<LogRecord>;

    fn next(&mut self) -> Option<Self::Item> {
        match self.next_record() {
            Ok(Some(record)) => Some(Ok(record)),
            Ok(None) => None,
            Err(error) => {
                self.finished = true;
                Some(Err(error))
            }
        }
    }
}

/// The verifier's verdict on one generation file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FileStatus {
    /// Every frame up to the end of the log in this file is valid.
    Good,
    /// The last generation ends in a torn write (tolerated).
    TornTail {
        offset: u64,
        bytes: u64,
        reason: String,
    },
    /// Damage in the needed range, a bad header, or a gap.
    Bad { offset: Option<u64>, reason: String },
}

/// One generation file as the verifier saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileReport {
    pub path: PathBuf,
    pub generation: u64,
    pub size_bytes: u64,
    /// 4 KiB blocks in the file.
    pub blocks: u64,
    /// Valid frames: records, flush frames and the generation-end frame.
    pub frames: u64,
    pub records: u64,
    pub log_writes: u64,
    /// Bytes of valid log in the file (header excluded).
    pub used_bytes: u64,
    pub status: FileStatus,
}

/// The verifier's report on a log directory.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct VerifyReport {
    pub checkpoint: Option<CheckpointRead>,
    /// A checkpoint file that exists but cannot be used.
    pub checkpoint_error: Option<String>,
    pub files: Vec<FileReport>,
}

impl VerifyReport {
    /// True when nothing is bad (a torn tail is tolerated). A missing checkpoint file is not judged
    /// here ([`VerifyReport::checkpoint_missing`]): a log without one may be an interrupted create.
    pub fn is_clean(&self) -> bool {
        self.checkpoint_error.is_none()
            && self
                .files
                .iter()
                .all(|file| !matches!(file.status, FileStatus::Bad { .. }))
    }
}

impl VerifyReport {
    /// Generation files exist but no checkpoint file: nothing says where a replay starts, and a
    /// database that used this log cannot be attached or recovered.
    pub fn checkpoint_missing(&self) -> bool {
        self.checkpoint.is_none() && self.checkpoint_error.is_none() && !self.files.is_empty()
    }
}

/// Verifies every generation file of the log in `dir` (all that exist around the checkpoint's
/// generation, older kept ones included) and the checkpoint file. Never writes. Errors only when
/// the directory cannot be read at all; damage is reported per file. Without a directory
/// listing, files are found by probing generation numbers; [`verify_log_dir_listed`] takes the
/// generations a listing found.
pub fn verify_log_dir(
    backend: &dyn IoBackend,
    dir: &Path,
    database_id: Option<u128>,
    options: &ReadOptions,
) -> Result<VerifyReport> {
    verify_log_dir_listed(backend, dir, database_id, options, None)
}

/// [`verify_log_dir`] over the generations `listed` (those whose files a directory listing found,
/// [`crate::format::parse_generation_file_name`]) when given, so that files the checkpoint does
/// not lead to (the checkpoint file lost, generations far from it) are verified too. Every
/// generation from the first found (or the checkpoint's, if earlier) to the last found (or the
/// newest the checkpoint file records as installed, if later) is reported: verified, or missing.
pub fn verify_log_dir_listed(
    backend: &dyn IoBackend,
    dir: &Path,
    database_id: Option<u128>,
    options: &ReadOptions,
    listed: Option<&[u64]>,
) -> Result<VerifyReport> {
    let mut report = VerifyReport::default();
    match read_checkpoint(backend, dir, database_id) {
        Ok(found) => report.checkpoint = found,
        Err(error) => report.checkpoint_error = Some(error.to_string()),
    }
    let checkpoint = report.checkpoint.as_ref().map(|read| read.checkpoint);
    let anchor = checkpoint.map_or(1, |c| c.lsn.generation);
    let newest_installed = checkpoint.map_or(0, |c| c.newest_generation);
    let database_id = database_id.or(checkpoint.map(|c| c.database_id));
    let present: std::collections::BTreeSet<u64> = match listed {
        Some(listed) => listed.iter().copied().collect(),
        None => probe_generations(backend, dir, anchor),
    };
    let (Some(&first_present), Some(&last_present)) = (present.first(), present.last()) else {
        // No generation file at all: the checkpoint's own generation (and any it records as
        // installed) is missing if there is a checkpoint.
        if checkpoint.is_some() {
            for generation in anchor..=newest_installed.max(anchor) {
                report.files.push(missing_report(
                    dir,
                    generation,
                    "the checkpoint needs it; no log file is left",
                ));
            }
        }
        return Ok(report);
    };
    let first = if checkpoint.is_some() {
        first_present.min(anchor)
    } else {
        first_present
    };
    let last = last_present.max(newest_installed);
    // A newest generation named ahead and not begun holds no record: the log ends in the one
    // before it, which gets the end-of-log checks.
    let not_begun = |generation: u64| {
        matches!(
            crate::scan::load_header_any(backend, dir, generation, database_id, options),
            Ok(Some(header)) if !header.begun
        )
    };
    let last_begun = if not_begun(last_present) {
        present
            .range(..last_present)
            .next_back()
            .copied()
            .unwrap_or(last_present)
    } else {
        last_present
    };
    for generation in first..=last {
        if !present.contains(&generation) {
            // Reported, and what lies beyond is verified, so one lost file hides nothing.
            let reason = if generation > last_begun {
                format!(
                    "the checkpoint file records generation {newest_installed} as installed \
                     (lost log)"
                )
            } else if checkpoint.is_some() && generation == anchor {
                "the checkpoint needs it".to_string()
            } else {
                "later generations exist".to_string()
            };
            report.files.push(missing_report(dir, generation, &reason));
            continue;
        }
        if not_begun(generation) {
            let path = generation_path(dir, generation);
            let size_bytes = backend
                .open(&path, &jetproof_io::OpenOptions::read_only())
                .and_then(|file| file.size())
                .unwrap_or(0);
            report.files.push(FileReport {
                path,
                generation,
                size_bytes,
                blocks: size_bytes.div_ceil(4096),
                frames: 0,
                records: 0,
                log_writes: 0,
                used_bytes: 0,
                status: if generation == last_present {
                    FileStatus::Good
                } else {
                    FileStatus::Bad {
                        offset: Some(HEADER_COPY_OFFSET as u64),
                        reason: "never begun (its header's second copy is not valid), but later \
                                 generations exist"
                            .into(),
                    }
                },
            });
            continue;
        }
        let file_report = match analyse_generation(backend, dir, generation, database_id, options) {
            Ok(Some(analysis)) if generation == last_begun && analysis.lost.is_none() => {
                let mut file = good_report(&analysis);
                let lost = checkpoint
                    .as_ref()
                    .map(|c| Checkpoint {
                        // Missing later generations are reported as such, above.
                        newest_generation: 0,
                        ..*c
                    })
                    .and_then(|c| before_proved_end(backend, dir, analysis.end, &c));
                if let Some(lost) = lost {
                    file.status = FileStatus::Bad {
                        offset: Some(analysis.end.offset),
                        reason: format!("lost log: {lost}"),
                    };
                }
                file
            }
            Ok(Some(analysis)) => good_report(&analysis),
            Ok(None) => missing_report(dir, generation, "it disappeared while being verified"),
            Err(error) => bad_report(backend, dir, generation, database_id, options, error),
        };
        report.files.push(file_report);
    }
    Ok(report)
}

/// The generations found without a listing: walking back from `anchor` while files exist, then
/// forward, across gaps of up to [`GAP_PROBE_GENERATIONS`] numbers.
fn probe_generations(
    backend: &dyn IoBackend,
    dir: &Path,
    anchor: u64,
) -> std::collections::BTreeSet<u64> {
    let exists = |generation: u64| backend.exists(&generation_path(dir, generation));
    let mut present = std::collections::BTreeSet::new();
    let mut first = anchor;
    while first > 1 && exists(first - 1) {
        first -= 1;
    }
    let mut generation = first;
    loop {
        if exists(generation) {
            present.insert(generation);
            generation += 1;
            continue;
        }
        match (generation + 1..=generation + GAP_PROBE_GENERATIONS).find(|&later| exists(later)) {
            Some(later) => generation = later,
            None => break,
        }
    }
    present
}

fn good_report(analysis: &Analysis) -> FileReport {
    let size_bytes = analysis.file.bytes.len() as u64;
    let records = analysis
        .scan
        .frames
        .iter()
        .filter(|frame| frame.kind == FrameKind::Record)
        .count() as u64;
    FileReport {
        path: analysis.file.path.clone(),
        generation: analysis.file.header.generation,
        size_bytes,
        blocks: size_bytes.div_ceil(4096),
        frames: analysis.scan.frames.len() as u64,
        records,
        log_writes: analysis.scan.flushes,
        used_bytes: analysis.scan.valid_end.saturating_sub(DATA_START),
        status: match (&analysis.lost, &analysis.torn_tail) {
            (Some(reason), _) => FileStatus::Bad {
                offset: Some(analysis.scan.valid_end),
                reason: format!("lost log: {reason}"),
            },
            (None, Some(torn)) => FileStatus::TornTail {
                offset: torn.offset,
                bytes: torn.bytes,
                reason: torn.reason.clone(),
            },
            (None, None) => FileStatus::Good,
        },
    }
}

fn missing_report(dir: &Path, generation: u64, reason: &str) -> FileReport {
    FileReport {
        path: generation_path(dir, generation),
        generation,
        size_bytes: 0,
        blocks: 0,
        frames: 0,
        records: 0,
        log_writes: 0,
        used_bytes: 0,
        status: FileStatus::Bad {
            offset: None,
            reason: format!("missing: {reason}"),
        },
    }
}

fn bad_report(
    backend: &dyn IoBackend,
    dir: &Path,
    generation: u64,
    database_id: Option<u128>,
    options: &ReadOptions,
    error: LogError,
) -> FileReport {
    let path = generation_path(dir, generation);
    let offset = match &error {
        LogError::Corrupt {
            offset, path: bad, ..
        } if *bad == path => Some(*offset),
        _ => None,
    };
    // Count what is valid before the damage, for the report.
    let (frames, records, log_writes, used_bytes, size_bytes) =
        match crate::scan::load_generation(backend, dir, generation, database_id, options) {
            Ok(Some(file)) => {
                let scan = crate::scan::scan_generation(
                    &file.bytes,
                    generation,
                    file.header.layout(),
                    None,
                );
                let records = scan
                    .frames
                    .iter()
                    .filter(|frame| frame.kind == FrameKind::Record)
                    .count() as u64;
                (
                    scan.frames.len() as u64,
                    records,
                    scan.flushes,
                    scan.valid_end.saturating_sub(DATA_START),
                    file.bytes.len() as u64,
                )
            }
            _ => (0, 0, 0, 0, 0),
        };
    FileReport {
        path,
        generation,
        size_bytes,
        blocks: size_bytes.div_ceil(4096),
        frames,
        records,
        log_writes,
        used_bytes,
        status: FileStatus::Bad {
            offset,
            reason: error.to_string(),
        },
    }
}
