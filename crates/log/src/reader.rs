//! Reading the log back: the replay iterator for recovery and the verifier for
//! `jetproof checksum`.
//!
//! Both read generation files whole, in large sequential reads, verify every frame's checksums and
//! position, and never write. The reader yields the records from a start position (normally the
//! checkpoint) to the end of the valid log; a torn tail is tolerated and reported in
//! [`ReadSummary::torn_tail`], damage in the middle is an error naming the file and offset.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use jetproof_io::IoBackend;

use crate::checkpoint::{CheckpointRead, read_checkpoint};
use crate::error::{LogError, Result};
use crate::format::{DATA_START, FrameKind, checkpoint_path, generation_path};
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
        let reader = LogReader::open(
            backend,
            dir,
            database_id,
            checkpoint.checkpoint.lsn,
            options,
        )?;
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
                    self.summary.torn_tail = analysis.torn_tail.clone();
                    self.finished = true;
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
                let next = read_ahead.peek()?.map(|next| next.header);
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
    /// True when nothing is bad (a torn tail is tolerated).
    pub fn is_clean(&self) -> bool {
        self.checkpoint_error.is_none()
            && self
                .files
                .iter()
                .all(|file| !matches!(file.status, FileStatus::Bad { .. }))
    }
}

/// Verifies every generation file of the log in `dir` (all that exist around the checkpoint's
/// generation, older kept ones included) and the checkpoint file. Never writes. Errors only when
/// the directory cannot be read at all; damage is reported per file.
pub fn verify_log_dir(
    backend: &dyn IoBackend,
    dir: &Path,
    database_id: Option<u128>,
    options: &ReadOptions,
) -> Result<VerifyReport> {
    let mut report = VerifyReport::default();
    let anchor = match read_checkpoint(backend, dir, database_id) {
        Ok(Some(read)) => {
            let generation = read.checkpoint.lsn.generation;
            report.checkpoint = Some(read);
            generation
        }
        Ok(None) => 1,
        Err(error) => {
            report.checkpoint_error = Some(error.to_string());
            1
        }
    };
    let database_id = database_id.or(report.checkpoint.as_ref().map(|c| c.checkpoint.database_id));
    // Without a directory listing, find the first generation by walking back from the anchor.
    let mut first = anchor;
    while first > 1 && backend.exists(&generation_path(dir, first - 1)) {
        first -= 1;
    }
    if !backend.exists(&generation_path(dir, first)) {
        // The checkpoint's generation is gone; look for anything a little later.
        match (first..=first + GAP_PROBE_GENERATIONS)
            .find(|&generation| backend.exists(&generation_path(dir, generation)))
        {
            Some(found) => {
                report
                    .files
                    .push(missing_report(dir, first, "the checkpoint needs it"));
                first = found;
            }
            None => return Ok(report),
        }
    }
    let mut generation = first;
    loop {
        let path = generation_path(dir, generation);
        if !backend.exists(&path) {
            // A gap: report it and verify what lies beyond, so one lost file hides nothing.
            match (generation + 1..=generation + GAP_PROBE_GENERATIONS)
                .find(|&later| backend.exists(&generation_path(dir, later)))
            {
                Some(later) => {
                    report
                        .files
                        .push(missing_report(dir, generation, "later generations exist"));
                    generation = later;
                    continue;
                }
                None => break,
            }
        }
        let file_report = match analyse_generation(backend, dir, generation, database_id, options) {
            Ok(Some(analysis)) => good_report(&analysis),
            Ok(None) => break,
            Err(error) => bad_report(backend, dir, generation, database_id, options, error),
        };
        report.files.push(file_report);
        generation += 1;
    }
    Ok(report)
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
        status: match &analysis.torn_tail {
            Some(torn) => FileStatus::TornTail {
                offset: torn.offset,
                bytes: torn.bytes,
                reason: torn.reason.clone(),
            },
            None => FileStatus::Good,
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
