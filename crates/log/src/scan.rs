//! Scanning one generation file and deciding where its valid log ends.
//!
//! This is the log's half of the recovery decision table in `docs/log.md`. The rules:
//! * frames are read in order from [`DATA_START`]; the valid log of a generation is the longest
//!   run of valid frames, ended by a generation-end frame, by the end the *next* generation's
//!   header names (`previous_end`), by an all-zero header (nothing written), or by damage;
//! * when the valid run stops before its end, the rest of the file is searched for valid frames of
//!   this generation. A flush frame found there says how far the log was durable before that later
//!   write: if that is past the stop, durable data was damaged (corruption in the middle).
//!   Otherwise the damage lies in writes that were never acknowledged: a torn tail.
#![deny(clippy::indexing_slicing, clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use jetproof_io::meter::{InstanceStats, MeteredFile};
use jetproof_io::{AlignedBuf, IoBackend, IoClass, OpenOptions};

use crate::error::{LogError, Result};
use crate::format::{
    DATA_START, Decoded, FlushInfo, Frame, FrameKind, FrameLayout, GenerationHeader, HeaderError,
    align_down, decode_frame, generation_path, position_matches,
};
use crate::lsn::Lsn;

/// How a generation file is read.
#[derive(Clone, Debug)]
pub struct ReadOptions {
    pub direct_io: bool,
    /// Size of each sequential read.
    pub read_size_bytes: usize,
    /// `LogRead` for recovery and verification, `ReplicationRead` for a copy's log shipping.
    pub class: IoClass,
    pub stats: Option<Arc<InstanceStats>>,
}

impl Default for ReadOptions {
    fn default() -> Self {
        ReadOptions {
            direct_io: false,
            read_size_bytes: 1 << 20,
            class: IoClass::LogRead,
            stats: None,
        }
    }
}

/// A generation file's whole content, read.
#[derive(Debug)]
pub(crate) struct GenerationFile {
    pub path: PathBuf,
    pub header: GenerationHeader,
    pub bytes: AlignedBuf,
}

/// Reads a whole generation in large sequential reads and checks its header.
/// `Ok(None)` when the file does not exist.
pub(crate) fn load_generation(
    backend: &dyn IoBackend,
    dir: &Path,
    generation: u64,
    database_id: Option<u128>,
    options: &ReadOptions,
) -> Result<Option<GenerationFile>> {
    let path = generation_path(dir, generation);
    if !backend.exists(&path) {
        return Ok(None);
    }
    let mut file = backend.open(
        &path,
        &OpenOptions::read_only().with_direct(options.direct_io),
    )?;
    let size = file.size()?;
    if size < DATA_START {
        return Err(cut_before_data(&path, generation, size));
    }
    // Direct reads need whole blocks; a file whose size is not a multiple of 4 KiB (never made by
    // the writer, but possible after damage) is read through the page cache instead.
    if options.direct_io && !size.is_multiple_of(4096) {
        file = backend.open(&path, &OpenOptions::read_only().with_direct(false))?;
    }
    let file = match &options.stats {
        Some(stats) => MeteredFile::wrap(file, stats.clone()),
        None => file,
    };
    let mut bytes = AlignedBuf::zeroed(size as usize);
    let chunk = align_down(options.read_size_bytes.max(4096) as u64, 4096) as usize;
    let mut offset = 0usize;
    while offset < bytes.len() {
        let end = (offset + chunk).min(bytes.len());
        if let Some(chunk) = bytes.get_mut(offset..end) {
            file.read_at(chunk, offset as u64, options.class)?;
        }
        // A generation named ahead and not begun is not read past its first chunk.
        if offset == 0
            && let Ok(header) = GenerationHeader::decode(bytes.get(..end).unwrap_or_default())
            && !header.begun
        {
            check_header(&path, &header, generation, database_id)?;
            return match cut_not_begun(&path, &header, size) {
                Some(lost) => Err(lost),
                None => Ok(None),
            };
        }
        offset = end;
    }
    let header = GenerationHeader::decode(&bytes).map_err(|reason| LogError::BadHeader {
        path: path.clone(),
        reason,
    })?;
    check_header(&path, &header, generation, database_id)?;
    // A generation named ahead and never begun holds no record: readers take it as absent
    // (`docs/log.md`, "Naming the next generation ahead"), unless it was cut short.
    if !header.begun {
        return match cut_not_begun(&path, &header, size) {
            Some(lost) => Err(lost),
            None => Ok(None),
        };
    }
    Ok(Some(GenerationFile {
        path,
        header,
        bytes,
    }))
}

/// Reads only the header block of a generation. `Ok(None)` when the file does not exist or
/// was never begun (named ahead: it holds no record).
pub(crate) fn load_header(
    backend: &dyn IoBackend,
    dir: &Path,
    generation: u64,
    database_id: Option<u128>,
    options: &ReadOptions,
) -> Result<Option<GenerationHeader>> {
    Ok(
        load_header_any(backend, dir, generation, database_id, options)?
            .filter(|header| header.begun),
    )
}

/// [`load_header`], begun or not.
pub(crate) fn load_header_any(
    backend: &dyn IoBackend,
    dir: &Path,
    generation: u64,
    database_id: Option<u128>,
    options: &ReadOptions,
) -> Result<Option<GenerationHeader>> {
    let path = generation_path(dir, generation);
    if !backend.exists(&path) {
        return Ok(None);
    }
    let file = backend.open(
        &path,
        &OpenOptions::read_only().with_direct(options.direct_io),
    )?;
    let size = file.size()?;
    if size < DATA_START {
        return Err(cut_before_data(&path, generation, size));
    }
    let file = match &options.stats {
        Some(stats) => MeteredFile::wrap(file, stats.clone()),
        None => file,
    };
    let mut block = AlignedBuf::zeroed(DATA_START as usize);
    file.read_at(&mut block, 0, options.class)?;
    let header = GenerationHeader::decode(&block).map_err(|reason| LogError::BadHeader {
        path: path.clone(),
        reason,
    })?;
    check_header(&path, &header, generation, database_id)?;
    if !header.begun
        && let Some(lost) = cut_not_begun(&path, &header, size)
    {
        return Err(lost);
    }
    Ok(Some(header))
}

/// A generation not begun that is shorter than its header's size: it holds no record, but a
/// crash cannot cut a file (generations are preformatted to full size before they are named),
/// so the log's files were damaged, and that is reported as for any generation cut short.
fn cut_not_begun(path: &Path, header: &GenerationHeader, size: u64) -> Option<LogError> {
    (size < header.file_size_bytes).then(|| LogError::LostLog {
        path: path.to_path_buf(),
        log_end: Lsn::new(header.generation, 0),
        reason: format!(
            "the generation file (named ahead, not begun) is {size} bytes but its header says \
             {} (generation files are preformatted to full size, so it was truncated)",
            header.file_size_bytes
        ),
    })
}

/// A generation file cut shorter than its header block: lost log (the writer installs only
/// preformatted, synced files). The end is given as the generation's start; a reader that knows
/// where the log before it ended says so instead.
fn cut_before_data(path: &Path, generation: u64, size: u64) -> LogError {
    LogError::LostLog {
        path: path.to_path_buf(),
        log_end: Lsn::new(generation, 0),
        reason: format!(
            "the generation file is {size} bytes, shorter than its {DATA_START}-byte header \
             block: it was truncated (generation files are preformatted to full size)"
        ),
    }
}

fn check_header(
    path: &Path,
    header: &GenerationHeader,
    generation: u64,
    database_id: Option<u128>,
) -> Result<()> {
    if header.generation != generation {
        return Err(LogError::BadHeader {
            path: path.to_path_buf(),
            reason: HeaderError::WrongGeneration {
                found: header.generation,
            },
        });
    }
    if let Some(expected) = database_id
        && header.database_id != expected
    {
        return Err(LogError::WrongDatabase {
            path: path.to_path_buf(),
            expected,
            found: header.database_id,
        });
    }
    Ok(())
}

/// Why the valid run of frames stopped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Stop {
    /// A generation-end frame: the log continues in the next generation.
    GenerationEnd,
    /// Reached the end named by the next generation's header.
    Limit,
    /// Nothing written after the last valid frame, and no valid frame anywhere after it.
    Clean,
    /// Something other than a valid frame at `offset`.
    Damaged {
        offset: u64,
        reason: String,
        /// The latest durable position claimed by any valid flush frame after the damage.
        attested_durable: Option<Lsn>,
        /// Bytes from `offset` to the end of the last non-zero byte of the file.
        damaged_bytes: u64,
    },
}

/// The result of scanning one generation.
#[derive(Clone, Debug)]
pub(crate) struct GenerationScan {
    pub frames: Vec<Frame>,
    /// End of the last valid frame of the run.
    pub valid_end: u64,
    pub stop: Stop,
    pub flushes: u64,
}

/// Scans `file` (the generation's whole content, its frames in `layout`). `limit`: the end named
/// by the next generation.
pub(crate) fn scan_generation(
    file: &[u8],
    generation: u64,
    layout: FrameLayout,
    limit: Option<u64>,
) -> GenerationScan {
    let mut frames = Vec::new();
    let mut flushes = 0;
    let mut position = DATA_START;
    let stop = loop {
        if limit == Some(position) {
            break Stop::Limit;
        }
        match decode_frame(file, generation, position, layout) {
            Decoded::Valid(frame) => {
                if let Some(limit) = limit
                    && frame.end() > limit
                {
                    break damaged(
                        file,
                        generation,
                        layout,
                        position,
                        format!(
                            "frame runs to {} past the end {limit} that the next generation names",
                            frame.end()
                        ),
                    );
                }
                frames.push(frame);
                position = frame.end();
                match frame.kind {
                    FrameKind::GenerationEnd => break Stop::GenerationEnd,
                    FrameKind::Flush => flushes += 1,
                    FrameKind::Record => {}
                }
            }
            Decoded::Empty => {
                let later = search_after(file, generation, layout, position);
                if later.found_any {
                    break damaged_with(
                        file,
                        position,
                        "nothing written here, but valid frames follow".into(),
                        later,
                    );
                }
                break Stop::Clean;
            }
            Decoded::Damaged(reason) => break damaged(file, generation, layout, position, reason),
        }
    };
    GenerationScan {
        frames,
        valid_end: position,
        stop,
        flushes,
    }
}

struct Later {
    found_any: bool,
    attested_durable: Option<Lsn>,
}

fn damaged(file: &[u8], generation: u64, layout: FrameLayout, offset: u64, reason: String) -> Stop {
    let later = search_after(file, generation, layout, offset);
    damaged_with(file, offset, reason, later)
}

fn damaged_with(file: &[u8], offset: u64, reason: String, later: Later) -> Stop {
    let last_nonzero_end = file
        .iter()
        .rposition(|&byte| byte != 0)
        .map_or(0, |index| index as u64 + 1);
    Stop::Damaged {
        offset,
        reason,
        attested_durable: later.attested_durable,
        damaged_bytes: last_nonzero_end.saturating_sub(offset),
    }
}

/// Looks for valid frames of `generation` after `offset` (at every position a frame of `layout`
/// may start: every byte since version 3, every 8 bytes before; the damage may have hidden where
/// the next frame starts).
fn search_after(file: &[u8], generation: u64, layout: FrameLayout, offset: u64) -> Later {
    let mut later = Later {
        found_any: false,
        attested_durable: None,
    };
    let mut position = offset + layout.align();
    while position < file.len() as u64 {
        if position_matches(file, generation, position, layout)
            && let Decoded::Valid(frame) = decode_frame(file, generation, position, layout)
        {
            later.found_any = true;
            if frame.kind == FrameKind::Flush
                && let Some(info) = FlushInfo::decode(frame.payload(file))
            {
                later.attested_durable = later.attested_durable.max(Some(info.durable_before));
            }
            position = frame.end();
            continue;
        }
        position += layout.align();
    }
    later
}

/// A torn tail: the end of the last generation holds bytes that are not a valid continuation of
/// the log and that no later write vouches for. Tolerated, and reported.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TornTail {
    pub path: PathBuf,
    pub generation: u64,
    /// Where the valid log ends and the torn bytes start.
    pub offset: u64,
    /// How many bytes after `offset` are discarded (up to the last non-zero byte of the file).
    pub bytes: u64,
    pub reason: String,
}

/// What one generation contributes to the log.
#[derive(Debug)]
pub(crate) struct Analysis {
    pub file: GenerationFile,
    pub scan: GenerationScan,
    /// Where the log continues: the next generation's header, or (for the last generation) where
    /// a writer reopening the log continues.
    pub end: Lsn,
    pub torn_tail: Option<TornTail>,
    /// True when a later generation exists.
    pub continued: bool,
    /// Why the log provably lost data here (the file is shorter than its preformatted size):
    /// the log ends at `end` and the reader reports [`LogError::LostLog`] after this
    /// generation's records.
    pub lost: Option<String>,
}

impl Analysis {
    /// The [`LogError::LostLog`] this generation ends in, if any.
    pub(crate) fn lost_log(&self) -> Option<LogError> {
        self.lost.as_ref().map(|reason| LogError::LostLog {
            path: self.file.path.clone(),
            log_end: self.end,
            reason: reason.clone(),
        })
    }
}

/// How many generation numbers past a missing one are probed for a later file: the backend has
/// no directory listing, and generations are deleted oldest first, so a gap in the middle shows
/// as a file present shortly after a missing one.
pub(crate) const GAP_PROBE_GENERATIONS: u64 = 16;

/// Scans generation `generation` and classifies its end, looking at the next generation's header
/// (and probing for a gap) to know whether it is the last one.
pub(crate) fn analyse_generation(
    backend: &dyn IoBackend,
    dir: &Path,
    generation: u64,
    database_id: Option<u128>,
    options: &ReadOptions,
) -> Result<Option<Analysis>> {
    let Some(file) = load_generation(backend, dir, generation, database_id, options)? else {
        return Ok(None);
    };
    let next = load_header(backend, dir, generation + 1, database_id, options)?;
    analyse_loaded(backend, dir, file, next).map(Some)
}

/// [`analyse_generation`] once the generation's bytes and the next generation's header (if it
/// exists) are in memory; lets the replay reader read ahead while this runs.
pub(crate) fn analyse_loaded(
    backend: &dyn IoBackend,
    dir: &Path,
    file: GenerationFile,
    next: Option<GenerationHeader>,
) -> Result<Analysis> {
    let generation = file.header.generation;
    // With no next header, a later file means a gap, unless the next file is there (named
    // ahead and not begun, or cut inside its header: both judged by the caller).
    if next.is_none() && !backend.exists(&generation_path(dir, generation + 1)) {
        for later in generation + 2..=generation + 1 + GAP_PROBE_GENERATIONS {
            // A later file named ahead and never begun holds nothing: what is missing before
            // it is judged as the newest generations' loss (the checkpoint file names it).
            let not_begun = || {
                matches!(
                    load_header_any(backend, dir, later, None, &ReadOptions::default()),
                    Ok(Some(header)) if !header.begun
                )
            };
            if backend.exists(&generation_path(dir, later)) && !not_begun() {
                return Err(LogError::MissingGeneration {
                    generation: generation + 1,
                    path: generation_path(dir, generation + 1),
                    reason: format!("generation {later} exists, so the log has a gap"),
                });
            }
        }
    }
    let limit = match next {
        Some(header) if header.previous_end.generation != generation => {
            return Err(LogError::BadHeader {
                path: generation_path(dir, generation + 1),
                reason: HeaderError::PreviousEndElsewhere {
                    previous_end: header.previous_end,
                    generation,
                },
            });
        }
        Some(header) => Some(header.previous_end.offset),
        None => None,
    };
    let scan = scan_generation(&file.bytes, generation, file.header.layout(), limit);
    // A file shorter than its header's size cannot come from a crash (generations are
    // preformatted to full size and synced before they are installed): whatever the scan found
    // in it, the log ends where its valid frames end, and what followed is lost, never a torn
    // tail.
    let size_bytes = file.bytes.len() as u64;
    if size_bytes < file.header.file_size_bytes {
        return Ok(Analysis {
            end: Lsn::new(generation, scan.valid_end),
            continued: false,
            lost: Some(format!(
                "the generation file is {size_bytes} bytes but its header says \
                 {} (generation files are preformatted to full size, so it was truncated)",
                file.header.file_size_bytes
            )),
            file,
            scan,
            torn_tail: None,
        });
    }
    let mut torn_tail = None;
    match (&scan.stop, limit) {
        (Stop::Limit, Some(_)) => {}
        (Stop::GenerationEnd, Some(limit)) if scan.valid_end == limit => {}
        (stop, Some(limit)) => {
            let (offset, what) = match stop {
                Stop::Damaged { offset, reason, .. } => (*offset, reason.clone()),
                _ => (scan.valid_end, "the valid frames end here".into()),
            };
            return Err(LogError::Corrupt {
                path: file.path.clone(),
                offset,
                reason: format!(
                    "{what}; generation {} follows and says this one runs to offset {limit}",
                    generation + 1
                ),
            });
        }
        (Stop::GenerationEnd | Stop::Clean | Stop::Limit, None) => {}
        (
            Stop::Damaged {
                offset,
                reason,
                attested_durable,
                damaged_bytes,
            },
            None,
        ) => {
            if let Some(attested) = attested_durable
                && *attested > Lsn::new(generation, *offset)
            {
                return Err(LogError::Corrupt {
                    path: file.path.clone(),
                    offset: *offset,
                    reason: format!(
                        "{reason}; a later log write records the log as durable up to {attested}"
                    ),
                });
            }
            torn_tail = Some(TornTail {
                path: file.path.clone(),
                generation,
                offset: *offset,
                bytes: *damaged_bytes,
                reason: reason.clone(),
            });
        }
    }
    Ok(Analysis {
        end: Lsn::new(generation, scan.valid_end),
        continued: limit.is_some(),
        file,
        scan,
        torn_tail,
        lost: None,
    })
}
