//! The checkpoint file: the oldest log position the database still needs.
//!
//! Atomicity comes from two slots, not from the disk: the file holds two 4 KiB slots and each
//! update writes the slot the previous update did *not* write, with a sequence number one higher,
//! then syncs. A crash in the middle of an update can damage only the slot being written; the
//! other slot still holds the previous checkpoint, and the reader takes the valid slot with the
//! highest sequence. So the checkpoint is always either the old or the new value, never neither.
//! (Write-temp-then-rename would need a directory sync per update; two slots need one fdatasync.)
#![deny(clippy::indexing_slicing, clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use jetproof_io::{AlignedBuf, IoBackend, IoClass, IoError, IoFile, OpenOptions};

use jetproof_io::bytes;

use crate::error::{LogError, Result};
use crate::format::checkpoint_path;
use crate::lsn::Lsn;

pub const CHECKPOINT_MAGIC: [u8; 8] = *b"JPLOGCHK";
/// Version 2 added `engine_stamp`, version 3 (2026-11-25) `newest_generation`; version 1 and 2
/// slots are still read (with a stamp of 0 for version 1 and a newest generation of 0, unknown,
/// for both). Builds before version 3 refuse a version 3 slot.
pub const CHECKPOINT_VERSION: u32 = 3;
/// Each slot is one 4 KiB block, so it can be written with direct I/O on its own.
pub const SLOT_BYTES: usize = 4096;
const SLOT_MEANINGFUL_BYTES: usize = 108;

/// One checkpoint.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Checkpoint {
    pub database_id: u128,
    /// Increases by one with every update; picks the newer slot.
    pub sequence: u64,
    /// Replay starts here: every record before it is reflected in the database file.
    pub lsn: Lsn,
    /// Size of the log's generation files, so a reader needs no other configuration.
    pub log_file_size_bytes: u64,
    pub written_unix_ms: u64,
    /// A value the log's user stores with the checkpoint: the engine's next update stamp when
    /// the checkpoint was taken, so recovery never gives out a stamp a page already carries
    /// (0: unknown, as in version 1 files).
    pub engine_stamp: u64,
    /// The newest generation the log has installed (version 3; 0: unknown, as in older files).
    /// Written as part of installing each generation, before any record can be durable in it,
    /// so a log found ending before this generation has lost files (`docs/log.md`, "The
    /// log's end is proved").
    pub newest_generation: u64,
    /// How far the log was durable when this slot was written (version 3; [`Lsn::ZERO`]:
    /// unknown): a log found ending before it lost synced data.
    pub durable_end: Lsn,
}

impl Checkpoint {
    /// Writes the checkpoint at the start of `slot` and zeros the rest; a slot shorter than
    /// [`SLOT_MEANINGFUL_BYTES`] (a caller's bug: slots are [`SLOT_BYTES`]) gets what fits.
    fn encode(&self, slot_out: &mut [u8]) {
        let mut slot = [0u8; SLOT_MEANINGFUL_BYTES];
        slot[0..8].copy_from_slice(&CHECKPOINT_MAGIC);
        slot[8..12].copy_from_slice(&CHECKPOINT_VERSION.to_le_bytes());
        slot[16..32].copy_from_slice(&self.database_id.to_le_bytes());
        slot[32..40].copy_from_slice(&self.sequence.to_le_bytes());
        slot[40..48].copy_from_slice(&self.lsn.generation.to_le_bytes());
        slot[48..56].copy_from_slice(&self.lsn.offset.to_le_bytes());
        slot[56..64].copy_from_slice(&self.log_file_size_bytes.to_le_bytes());
        slot[64..72].copy_from_slice(&self.written_unix_ms.to_le_bytes());
        slot[72..80].copy_from_slice(&self.engine_stamp.to_le_bytes());
        slot[80..88].copy_from_slice(&self.newest_generation.to_le_bytes());
        slot[88..96].copy_from_slice(&self.durable_end.generation.to_le_bytes());
        slot[96..104].copy_from_slice(&self.durable_end.offset.to_le_bytes());
        let crc = jetproof_io::crc::crc32c(&slot[..104]);
        slot[104..108].copy_from_slice(&crc.to_le_bytes());
        debug_assert!(slot_out.len() >= SLOT_MEANINGFUL_BYTES);
        for (dst, src) in slot_out
            .iter_mut()
            .zip(slot.iter().chain(std::iter::repeat(&0)))
        {
            *dst = *src;
        }
    }

    pub(crate) fn decode(slot: &[u8]) -> Option<Checkpoint> {
        let slot: [u8; SLOT_MEANINGFUL_BYTES] = bytes::array_at(slot, 0)?;
        if slot[0..8] != CHECKPOINT_MAGIC {
            return None;
        }
        let field = |at: usize| bytes::u64_at(&slot, at);
        let version = bytes::u32_at(&slot, 8)?;
        // Version 1: CRC of the first 72 bytes at 72; version 2: stamp at 72, CRC of 80 at 80;
        // version 3: newest generation at 80, durable end at 88, CRC of 104 at 104.
        let covered = match version {
            1 => 72,
            2 => 80,
            CHECKPOINT_VERSION => 104,
            _ => return None,
        };
        if bytes::u32_at(&slot, covered)? != jetproof_io::crc::crc32c(slot.get(..covered)?) {
            return None;
        }
        Some(Checkpoint {
            database_id: bytes::u128_at(&slot, 16)?,
            sequence: field(32)?,
            lsn: Lsn::new(field(40)?, field(48)?),
            log_file_size_bytes: field(56)?,
            written_unix_ms: field(64)?,
            engine_stamp: if version == 1 { 0 } else { field(72)? },
            newest_generation: if version >= 3 { field(80)? } else { 0 },
            durable_end: if version >= 3 {
                Lsn::new(field(88)?, field(96)?)
            } else {
                Lsn::ZERO
            },
        })
    }
}

pub(crate) fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|elapsed| elapsed.as_millis() as u64)
        .unwrap_or(0)
}

/// What the reader found in each slot, for the verifier's report.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckpointRead {
    pub path: PathBuf,
    /// The newest valid slot.
    pub checkpoint: Checkpoint,
    /// Slots that held no valid checkpoint (a torn update, or never written).
    pub invalid_slots: Vec<usize>,
}

/// Reads the checkpoint of the log in `dir`. `Ok(None)` when there is no checkpoint file; an
/// error when the file exists but neither slot is valid, or belongs to another database.
pub fn read_checkpoint(
    backend: &dyn IoBackend,
    dir: &Path,
    database_id: Option<u128>,
) -> Result<Option<CheckpointRead>> {
    let path = checkpoint_path(dir);
    if !backend.exists(&path) {
        return Ok(None);
    }
    let file = backend.open(
        &path,
        &OpenOptions::read_only().with_direct(false).no_follow(),
    )?;
    // Aligned, so that the read also works on a backend that enforces direct I/O's rules.
    let mut bytes = AlignedBuf::zeroed(2 * SLOT_BYTES);
    let size = file.size()?;
    let readable = size.min(bytes.len() as u64) as usize;
    if let Some(head) = bytes.get_mut(..readable) {
        file.read_at(head, 0, IoClass::LogRead)?;
    }
    let mut best: Option<Checkpoint> = None;
    let mut invalid_slots = Vec::new();
    for (slot_index, slot) in bytes.chunks(SLOT_BYTES).enumerate() {
        match Checkpoint::decode(slot) {
            Some(found) if best.is_none_or(|b| found.sequence > b.sequence) => best = Some(found),
            Some(_) => {}
            None => invalid_slots.push(slot_index),
        }
    }
    let Some(checkpoint) = best else {
        return Err(LogError::BadCheckpoint {
            path,
            reason: "neither of its two slots holds a valid checkpoint".into(),
        });
    };
    if let Some(expected) = database_id
        && checkpoint.database_id != expected
    {
        return Err(LogError::WrongDatabase {
            path,
            expected,
            found: checkpoint.database_id,
        });
    }
    Ok(Some(CheckpointRead {
        path,
        checkpoint,
        invalid_slots,
    }))
}

/// Writes checkpoints, alternating slots. One per log.
#[derive(Debug)]
pub struct CheckpointWriter {
    file: Arc<dyn IoFile>,
    last: Checkpoint,
    slot: AlignedBuf,
}

impl CheckpointWriter {
    /// Creates the checkpoint file of a new log with its first checkpoint.
    pub(crate) fn create(
        backend: &dyn IoBackend,
        dir: &Path,
        direct: bool,
        first: Checkpoint,
    ) -> Result<CheckpointWriter> {
        let path = checkpoint_path(dir);
        // A new file, never one that was there (a foreign file, or a link to one).
        let file = backend.open(&path, &OpenOptions::create_new().with_direct(direct))?;
        let mut writer = CheckpointWriter {
            file,
            last: Checkpoint {
                sequence: first.sequence.wrapping_sub(1),
                ..first
            },
            slot: AlignedBuf::zeroed(SLOT_BYTES),
        };
        // Both slots exist from the start, so a later update never extends the file (an
        // extending write would need the file size, i.e. metadata, to be synced too).
        writer.file.set_size(2 * SLOT_BYTES as u64)?;
        writer.write(first.lsn, Some(first.engine_stamp))?;
        backend.sync_dir(dir)?;
        Ok(writer)
    }

    /// Opens the checkpoint file of an existing log, continuing after `last`.
    pub(crate) fn open(
        backend: &dyn IoBackend,
        dir: &Path,
        direct: bool,
        last: Checkpoint,
    ) -> Result<CheckpointWriter> {
        let path = checkpoint_path(dir);
        let file = backend.open(
            &path,
            &OpenOptions::read_write().with_direct(direct).no_follow(),
        )?;
        if file.size()? < 2 * SLOT_BYTES as u64 {
            file.set_size(2 * SLOT_BYTES as u64)?;
        }
        Ok(CheckpointWriter {
            file,
            last,
            slot: AlignedBuf::zeroed(SLOT_BYTES),
        })
    }

    pub fn last(&self) -> Checkpoint {
        self.last
    }

    pub fn path(&self) -> &Path {
        self.file.path()
    }

    /// Durably records `lsn` as the new checkpoint (one 4 KiB write and one fdatasync), with
    /// `engine_stamp` (or the last one, if `None`).
    pub fn write(&mut self, lsn: Lsn, engine_stamp: Option<u64>) -> Result<Checkpoint, IoError> {
        self.write_durable(lsn, engine_stamp, lsn)
    }

    /// [`CheckpointWriter::write`], recording that the log was durable up to `durable_end`.
    pub fn write_durable(
        &mut self,
        lsn: Lsn,
        engine_stamp: Option<u64>,
        durable_end: Lsn,
    ) -> Result<Checkpoint, IoError> {
        // Invariants: the checkpoint never passes the durable end of the log (recovery would
        // start after records it needs) and never moves back (it would replay from a place
        // whose pages were already written over).
        assert!(
            lsn <= durable_end,
            "checkpoint {lsn} past the durable end {durable_end}"
        );
        assert!(
            lsn >= self.last.lsn,
            "checkpoint {lsn} before the current one {}",
            self.last.lsn
        );
        self.write_slot(lsn, engine_stamp, self.last.newest_generation, durable_end)
    }

    /// Durably records that generation `generation` is installed (the checkpoint itself does
    /// not move): one 4 KiB write and one fdatasync per generation, made before any record can
    /// be durable in it. The recorded generation never goes back.
    pub fn record_installed(
        &mut self,
        generation: u64,
        durable_end: Lsn,
    ) -> Result<Checkpoint, IoError> {
        let newest = self.last.newest_generation.max(generation);
        self.write_slot(self.last.lsn, None, newest, durable_end)
    }

    fn write_slot(
        &mut self,
        lsn: Lsn,
        engine_stamp: Option<u64>,
        newest_generation: u64,
        durable_end: Lsn,
    ) -> Result<Checkpoint, IoError> {
        let next = Checkpoint {
            durable_end: self.last.durable_end.max(durable_end),
            sequence: self.last.sequence.wrapping_add(1),
            lsn,
            written_unix_ms: unix_ms(),
            engine_stamp: engine_stamp.unwrap_or(self.last.engine_stamp),
            newest_generation,
            ..self.last
        };
        next.encode(&mut self.slot);
        let offset = (next.sequence % 2) * SLOT_BYTES as u64;
        self.file.write_at(&self.slot, offset, IoClass::LogWrite)?;
        self.file.sync_data(IoClass::LogWrite)?;
        self.last = next;
        Ok(next)
    }
}

#[cfg(test)]
#[allow(clippy::indexing_slicing, clippy::unwrap_used)]
mod tests {
    use super::*;
    use jetproof_io::mem::MemBackend;

    /// A slot cut anywhere before its checksum's end, or full of garbage, holds no checkpoint:
    /// `None`, never a panic.
    #[test]
    fn checkpoint_short_or_garbage_slot_is_none_not_a_panic() {
        let checkpoint = Checkpoint {
            database_id: 7,
            sequence: 3,
            lsn: Lsn::new(2, 4096),
            log_file_size_bytes: 1 << 20,
            written_unix_ms: 1,
            engine_stamp: 5,
            newest_generation: 2,
            durable_end: Lsn::new(2, 4096),
        };
        let mut slot = vec![0xeeu8; SLOT_BYTES];
        checkpoint.encode(&mut slot);
        assert!(slot[SLOT_MEANINGFUL_BYTES..].iter().all(|&b| b == 0));
        assert_eq!(Checkpoint::decode(&slot), Some(checkpoint));
        for cut in 0..SLOT_MEANINGFUL_BYTES {
            assert_eq!(Checkpoint::decode(&slot[..cut]), None, "cut {cut}");
        }
        assert_eq!(Checkpoint::decode(&[0xff; SLOT_BYTES]), None);
    }

    #[test]
    fn newest_valid_slot_wins_and_a_torn_slot_falls_back() {
        let backend = MemBackend::new();
        let dir = Path::new("/log");
        let first = Checkpoint {
            database_id: 7,
            sequence: 1,
            lsn: Lsn::new(1, 4096),
            log_file_size_bytes: 1 << 20,
            written_unix_ms: 0,
            engine_stamp: 0,
            newest_generation: 1,
            durable_end: Lsn::ZERO,
        };
        let mut writer = CheckpointWriter::create(&*backend, dir, false, first).expect("create");
        writer.write(Lsn::new(2, 4096), Some(11)).expect("write 2");
        writer.write(Lsn::new(3, 8192), None).expect("write 3");
        let read = read_checkpoint(&*backend, dir, Some(7))
            .expect("read")
            .expect("present");
        assert_eq!(read.checkpoint.lsn, Lsn::new(3, 8192));
        assert_eq!(
            read.checkpoint.engine_stamp, 11,
            "kept from the write before"
        );
        // Tear the newest slot (sequence 3 lives in slot 1): the previous checkpoint remains.
        let file = backend
            .open(&checkpoint_path(dir), &OpenOptions::read_write())
            .expect("open");
        file.write_at(&[0xff; 100], SLOT_BYTES as u64 + 30, IoClass::LogWrite)
            .expect("tear");
        let read = read_checkpoint(&*backend, dir, Some(7))
            .expect("read")
            .expect("present");
        assert_eq!(read.checkpoint.lsn, Lsn::new(2, 4096));
        assert_eq!(read.invalid_slots, vec![1]);
        assert!(matches!(
            read_checkpoint(&*backend, dir, Some(8)),
            Err(LogError::WrongDatabase { .. })
        ));
    }

    #[test]
    fn installs_are_recorded_and_older_slots_still_read() {
        let backend = MemBackend::new();
        let dir = Path::new("/log");
        let first = Checkpoint {
            database_id: 7,
            sequence: 1,
            lsn: Lsn::new(1, 4096),
            log_file_size_bytes: 1 << 20,
            written_unix_ms: 0,
            engine_stamp: 5,
            newest_generation: 1,
            durable_end: Lsn::ZERO,
        };
        let mut writer = CheckpointWriter::create(&*backend, dir, false, first).expect("create");
        writer
            .record_installed(2, Lsn::new(2, 4096))
            .expect("install 2");
        writer.write(Lsn::new(1, 8192), Some(9)).expect("move");
        // Never goes back.
        writer
            .record_installed(1, Lsn::new(1, 9000))
            .expect("install 1 again");
        let read = read_checkpoint(&*backend, dir, Some(7))
            .expect("read")
            .expect("present");
        assert_eq!(read.checkpoint.newest_generation, 2);
        assert_eq!(
            read.checkpoint.lsn,
            Lsn::new(1, 8192),
            "an install moves nothing"
        );
        assert_eq!(read.checkpoint.engine_stamp, 9);
        assert_eq!(
            read.checkpoint.durable_end,
            Lsn::new(2, 4096),
            "never goes back"
        );
        // A version 2 slot (as builds before 2026-11-25 wrote it) reads with newest unknown.
        let mut slot = AlignedBuf::zeroed(SLOT_BYTES);
        Checkpoint {
            sequence: 100,
            ..read.checkpoint
        }
        .encode(&mut slot);
        slot[8..12].copy_from_slice(&2u32.to_le_bytes());
        slot[80..88].fill(0);
        let crc = jetproof_io::crc::crc32c(&slot[..80]);
        slot[80..84].copy_from_slice(&crc.to_le_bytes());
        let decoded = Checkpoint::decode(&slot).expect("version 2 decodes");
        assert_eq!(decoded.newest_generation, 0);
        assert_eq!(decoded.durable_end, Lsn::ZERO);
        assert_eq!(decoded.engine_stamp, 9);
        assert_eq!(decoded.lsn, Lsn::new(1, 8192));
    }
}
