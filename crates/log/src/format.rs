//! Byte layouts of the generation files (see `docs/log.md` for the tables and the reasoning).
//!
//! Invariants this module keeps:
//! * every frame carries its own position `(generation, offset)` under its header checksum, so a
//!   frame left over from an earlier use of the same bytes (a recycled file, a torn tail that was
//!   abandoned) can never be taken for a current one;
//! * frames are 8-byte aligned and never span two generation files;
//! * a header that is all zeros is "nothing written here", anything else that fails its checksum
//!   is damage.

use std::path::{Path, PathBuf};

use crate::lsn::Lsn;

/// First bytes of every generation file.
pub const GENERATION_MAGIC: [u8; 8] = *b"JPLOGGEN";
/// Version of the generation file and frame layouts written by this build. Version 2 (2026-11-23)
/// lets a flush frame's payload run past its 32 bytes of [`FlushInfo`] with zeros, to fill the
/// last sector of a durable commit's write (`docs/log.md`, "Filling the partial sector").
pub const FORMAT_VERSION: u32 = 2;
/// The oldest version this build reads (version 1 logs are version 2 logs without sector fill).
pub const OLDEST_READABLE_VERSION: u32 = 1;
/// The generation header occupies the first 4 KiB block; frames start after it, so that the
/// header is never rewritten by a log write, even under direct I/O.
pub const DATA_START: u64 = 4096;
/// Bytes of the generation header that are meaningful (the rest of the block is zero).
pub const GENERATION_HEADER_BYTES: usize = 76;

/// Every frame starts on a multiple of this.
pub const FRAME_ALIGN: u64 = 8;
/// Size of a frame header.
pub const FRAME_HEADER_BYTES: usize = 40;
/// Size of a flush frame's payload.
pub const FLUSH_PAYLOAD_BYTES: usize = 32;
/// A flush frame, whole.
pub const FLUSH_FRAME_BYTES: u64 = (FRAME_HEADER_BYTES + FLUSH_PAYLOAD_BYTES) as u64;
/// A generation-end frame, whole.
pub const GEN_END_FRAME_BYTES: u64 = FRAME_HEADER_BYTES as u64;

/// What a frame is.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum FrameKind {
    /// A record appended by the engine.
    Record = 1,
    /// Written at the end of every log write: where the write started and how far the log was
    /// durable before it. Lets a reader tell a torn tail from damage in the middle.
    Flush = 2,
    /// The generation ends here; the log continues at the next generation's first frame.
    GenerationEnd = 3,
}

impl FrameKind {
    fn from_u8(value: u8) -> Option<FrameKind> {
        match value {
            1 => Some(FrameKind::Record),
            2 => Some(FrameKind::Flush),
            3 => Some(FrameKind::GenerationEnd),
            _ => None,
        }
    }
}

/// File name of a generation: `E00000001.jplog` (the number in hex, as ESE's `E00000001.log`).
pub fn generation_file_name(generation: u64) -> String {
    format!("E{generation:08X}.jplog")
}

pub fn generation_path(dir: &Path, generation: u64) -> PathBuf {
    dir.join(generation_file_name(generation))
}

/// The preformatted file that becomes the next generation (ESE's `edbtmp.log`).
pub fn spare_path(dir: &Path) -> PathBuf {
    dir.join("Enext.jplogtmp")
}

pub fn checkpoint_path(dir: &Path) -> PathBuf {
    dir.join("checkpoint.jpchk")
}

pub const fn align_up(value: u64, align: u64) -> u64 {
    value.div_ceil(align) * align
}

pub const fn align_down(value: u64, align: u64) -> u64 {
    value / align * align
}

/// Bytes a frame with `payload_bytes` of payload occupies, padding included.
pub const fn frame_bytes(payload_bytes: usize) -> u64 {
    align_up((FRAME_HEADER_BYTES + payload_bytes) as u64, FRAME_ALIGN)
}

fn le_u32(bytes: &[u8], at: usize) -> u32 {
    let mut raw = [0u8; 4];
    if let Some(src) = bytes.get(at..at + 4) {
        raw.copy_from_slice(src);
    }
    u32::from_le_bytes(raw)
}

fn le_u64(bytes: &[u8], at: usize) -> u64 {
    let mut raw = [0u8; 8];
    if let Some(src) = bytes.get(at..at + 8) {
        raw.copy_from_slice(src);
    }
    u64::from_le_bytes(raw)
}

fn le_u128(bytes: &[u8], at: usize) -> u128 {
    let mut raw = [0u8; 16];
    if let Some(src) = bytes.get(at..at + 16) {
        raw.copy_from_slice(src);
    }
    u128::from_le_bytes(raw)
}

/// The header of a generation file (block 0).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct GenerationHeader {
    pub database_id: u128,
    pub generation: u64,
    pub file_size_bytes: u64,
    /// Where the log ended before this generation: the previous generation's end frame, or the
    /// end of its valid data when the log was reopened after a crash. A reader must find the
    /// previous generation valid up to exactly here.
    pub previous_end: Lsn,
    pub created_unix_ms: u64,
}

impl GenerationHeader {
    /// Writes the header into the start of `block` (which must be at least
    /// [`GENERATION_HEADER_BYTES`] long and is otherwise left as is).
    pub fn encode(&self, block: &mut [u8]) {
        let header = &mut block[..GENERATION_HEADER_BYTES];
        header.fill(0);
        header[0..8].copy_from_slice(&GENERATION_MAGIC);
        header[8..12].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
        header[12..16].copy_from_slice(&(DATA_START as u32).to_le_bytes());
        header[16..32].copy_from_slice(&self.database_id.to_le_bytes());
        header[32..40].copy_from_slice(&self.generation.to_le_bytes());
        header[40..48].copy_from_slice(&self.file_size_bytes.to_le_bytes());
        header[48..56].copy_from_slice(&self.previous_end.generation.to_le_bytes());
        header[56..64].copy_from_slice(&self.previous_end.offset.to_le_bytes());
        header[64..72].copy_from_slice(&self.created_unix_ms.to_le_bytes());
        let crc = crc32c::crc32c(&header[..72]);
        header[72..76].copy_from_slice(&crc.to_le_bytes());
    }

    /// Parses and checks a header; the error is a sentence for [`crate::LogError::BadHeader`].
    pub fn decode(block: &[u8]) -> Result<GenerationHeader, String> {
        let Some(header) = block.get(..GENERATION_HEADER_BYTES) else {
            return Err(format!(
                "file is shorter than its {GENERATION_HEADER_BYTES}-byte header"
            ));
        };
        if header[0..8] != GENERATION_MAGIC {
            return Err("not a jetproof log file (magic mismatch)".into());
        }
        let stored = le_u32(header, 72);
        let computed = crc32c::crc32c(&header[..72]);
        if stored != computed {
            return Err(format!(
                "header checksum mismatch (stored {stored:#010x}, computed {computed:#010x})"
            ));
        }
        let version = le_u32(header, 8);
        if !(OLDEST_READABLE_VERSION..=FORMAT_VERSION).contains(&version) {
            return Err(format!(
                "format version {version}, this build reads versions {OLDEST_READABLE_VERSION} to {FORMAT_VERSION}"
            ));
        }
        let data_start = u64::from(le_u32(header, 12));
        if data_start != DATA_START {
            return Err(format!(
                "data starts at {data_start}, expected {DATA_START}"
            ));
        }
        Ok(GenerationHeader {
            database_id: le_u128(header, 16),
            generation: le_u64(header, 32),
            file_size_bytes: le_u64(header, 40),
            previous_end: Lsn::new(le_u64(header, 48), le_u64(header, 56)),
            created_unix_ms: le_u64(header, 64),
        })
    }
}

/// The payload of a flush frame.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct FlushInfo {
    /// The log was durable up to here before this write was issued: any damage before this
    /// position is corruption of durable data, not a torn write.
    pub durable_before: Lsn,
    /// Offset (in this generation) where this write's new data started.
    pub write_start: u64,
    /// Number of this write since the log was opened.
    pub write_sequence: u64,
}

impl FlushInfo {
    pub fn encode(&self) -> [u8; FLUSH_PAYLOAD_BYTES] {
        let mut out = [0u8; FLUSH_PAYLOAD_BYTES];
        out[0..8].copy_from_slice(&self.durable_before.generation.to_le_bytes());
        out[8..16].copy_from_slice(&self.durable_before.offset.to_le_bytes());
        out[16..24].copy_from_slice(&self.write_start.to_le_bytes());
        out[24..32].copy_from_slice(&self.write_sequence.to_le_bytes());
        out
    }

    /// Reads the first 32 bytes; what follows (format version 2) is the sector fill, zeros.
    pub fn decode(payload: &[u8]) -> Option<FlushInfo> {
        if payload.len() < FLUSH_PAYLOAD_BYTES {
            return None;
        }
        Some(FlushInfo {
            durable_before: Lsn::new(le_u64(payload, 0), le_u64(payload, 8)),
            write_start: le_u64(payload, 16),
            write_sequence: le_u64(payload, 24),
        })
    }
}

/// Encodes a frame at the start of `out` (exactly [`frame_bytes`]`(payload.len())` long; the
/// padding is zeroed). `position` is where the frame will live in the log.
pub fn encode_frame(
    out: &mut [u8],
    kind: FrameKind,
    position: Lsn,
    record_type: u8,
    transaction_id: u64,
    payload: &[u8],
) {
    encode_frame_with_crc(
        out,
        kind,
        position,
        record_type,
        transaction_id,
        payload,
        crc32c::crc32c(payload),
    );
}

/// [`encode_frame`] with the payload's CRC-32C computed beforehand (`payload_crc` must be
/// `crc32c(payload)`): [`crate::Log::append`] computes it before taking the log's mutex, so the
/// pass over the payload is not made while other sessions wait to append.
pub fn encode_frame_with_crc(
    out: &mut [u8],
    kind: FrameKind,
    position: Lsn,
    record_type: u8,
    transaction_id: u64,
    payload: &[u8],
    payload_crc: u32,
) {
    let end = FRAME_HEADER_BYTES + payload.len();
    out[FRAME_HEADER_BYTES..end].copy_from_slice(payload);
    out[end..].fill(0);
    write_frame_header(
        out,
        kind,
        position,
        record_type,
        transaction_id,
        payload.len(),
        payload_crc,
    );
}

/// A log-internal frame (record type 0, transaction 0) whose payload is `payload` followed by
/// `fill` zero bytes (a flush frame filling its sector, format version 2), encoded at the start
/// of `out` (exactly [`frame_bytes`]`(payload.len() + fill)` long) without building the payload
/// anywhere else.
pub fn encode_frame_filled(
    out: &mut [u8],
    kind: FrameKind,
    position: Lsn,
    payload: &[u8],
    fill: usize,
) {
    let end = FRAME_HEADER_BYTES + payload.len();
    out[FRAME_HEADER_BYTES..end].copy_from_slice(payload);
    out[end..].fill(0);
    let payload_len = payload.len() + fill;
    let payload_crc = crc32c::crc32c(&out[FRAME_HEADER_BYTES..FRAME_HEADER_BYTES + payload_len]);
    write_frame_header(out, kind, position, 0, 0, payload_len, payload_crc);
}

/// The 40-byte frame header at the start of `out`, its own CRC last.
fn write_frame_header(
    out: &mut [u8],
    kind: FrameKind,
    position: Lsn,
    record_type: u8,
    transaction_id: u64,
    payload_len: usize,
    payload_crc: u32,
) {
    let header = &mut out[..FRAME_HEADER_BYTES];
    header[4] = kind as u8;
    header[5] = record_type;
    header[6..8].fill(0);
    header[8..12].copy_from_slice(&(payload_len as u32).to_le_bytes());
    header[12..16].copy_from_slice(&payload_crc.to_le_bytes());
    header[16..24].copy_from_slice(&position.generation.to_le_bytes());
    header[24..32].copy_from_slice(&position.offset.to_le_bytes());
    header[32..40].copy_from_slice(&transaction_id.to_le_bytes());
    let crc = crc32c::crc32c(&header[4..FRAME_HEADER_BYTES]);
    header[0..4].copy_from_slice(&crc.to_le_bytes());
}

/// A frame found valid at some offset of a generation's bytes.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Frame {
    pub kind: FrameKind,
    pub record_type: u8,
    pub transaction_id: u64,
    pub offset: u64,
    pub payload_bytes: usize,
}

impl Frame {
    pub fn total_bytes(&self) -> u64 {
        frame_bytes(self.payload_bytes)
    }

    pub fn end(&self) -> u64 {
        self.offset + self.total_bytes()
    }

    /// The payload inside the generation's bytes (whose first byte is file offset 0).
    pub fn payload<'a>(&self, file: &'a [u8]) -> &'a [u8] {
        let start = self.offset as usize + FRAME_HEADER_BYTES;
        file.get(start..start + self.payload_bytes).unwrap_or(&[])
    }
}

/// What sits at an offset of a generation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decoded {
    Valid(Frame),
    /// Nothing of this generation was written here: the header is all zeros, or it is a valid
    /// frame of an earlier generation (a recycled file, see circular logging).
    Empty,
    /// Something is written here but it is not a whole, valid frame of this generation.
    Damaged(String),
}

/// Reads the frame that should start at `offset` of `file` (the generation's whole content,
/// file offset 0 at index 0), which belongs to `generation`.
pub fn decode_frame(file: &[u8], generation: u64, offset: u64) -> Decoded {
    let start = offset as usize;
    let Some(header) = file.get(start..start + FRAME_HEADER_BYTES) else {
        return Decoded::Damaged("frame header runs past the end of the file".into());
    };
    if header.iter().all(|&byte| byte == 0) {
        return Decoded::Empty;
    }
    let stored = le_u32(header, 0);
    let computed = crc32c::crc32c(&header[4..]);
    if stored != computed {
        return Decoded::Damaged(format!(
            "frame header checksum mismatch (stored {stored:#010x}, computed {computed:#010x})"
        ));
    }
    let frame_generation = le_u64(header, 16);
    let frame_offset = le_u64(header, 24);
    if frame_generation < generation {
        // A valid frame of an earlier generation: a recycled file's old content. Nothing of this
        // generation was written here.
        return Decoded::Empty;
    }
    if frame_generation != generation || frame_offset != offset {
        return Decoded::Damaged(format!(
            "frame belongs to position {frame_generation}:{frame_offset}, not {generation}:{offset} \
             (stale or misdirected data)"
        ));
    }
    let Some(kind) = FrameKind::from_u8(header[4]) else {
        return Decoded::Damaged(format!("unknown frame kind {}", header[4]));
    };
    let payload_bytes = le_u32(header, 8) as usize;
    let payload_start = start + FRAME_HEADER_BYTES;
    let Some(payload) = file.get(payload_start..payload_start + payload_bytes) else {
        return Decoded::Damaged(format!(
            "frame payload of {payload_bytes} bytes runs past the end of the file"
        ));
    };
    let stored_payload = le_u32(header, 12);
    let computed_payload = crc32c::crc32c(payload);
    if stored_payload != computed_payload {
        return Decoded::Damaged(format!(
            "payload checksum mismatch over {payload_bytes} bytes \
             (stored {stored_payload:#010x}, computed {computed_payload:#010x})"
        ));
    }
    Decoded::Valid(Frame {
        kind,
        record_type: header[5],
        transaction_id: le_u64(header, 32),
        offset,
        payload_bytes,
    })
}

/// Quick test used when searching past damage: could a frame of `generation` start at `offset`?
/// (Its stored position matches; the checksum is checked by [`decode_frame`] afterwards.)
pub fn position_matches(file: &[u8], generation: u64, offset: u64) -> bool {
    let start = offset as usize;
    file.len() >= start + FRAME_HEADER_BYTES
        && le_u64(file, start + 24) == offset
        && le_u64(file, start + 16) == generation
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frame_round_trip_and_damage() {
        let payload = b"insert key=value on page 7";
        let len = frame_bytes(payload.len()) as usize;
        let mut file = vec![0u8; 4096 + len + 64];
        encode_frame(
            &mut file[4096..4096 + len],
            FrameKind::Record,
            Lsn::new(3, 4096),
            9,
            42,
            payload,
        );
        let Decoded::Valid(frame) = decode_frame(&file, 3, 4096) else {
            panic!("frame should decode");
        };
        assert_eq!(frame.payload(&file), payload);
        assert_eq!((frame.record_type, frame.transaction_id), (9, 42));
        assert_eq!(decode_frame(&file, 3, 4096 + len as u64), Decoded::Empty);
        // Read as generation 4 (the file was recycled), it is old content: nothing written.
        assert_eq!(decode_frame(&file, 4, 4096), Decoded::Empty);
        // A frame of a later generation or another offset is misplaced: damage.
        assert!(matches!(decode_frame(&file, 2, 4096), Decoded::Damaged(_)));
        file[4096 + 45] ^= 1;
        assert!(matches!(decode_frame(&file, 3, 4096), Decoded::Damaged(_)));
    }

    #[test]
    fn generation_header_round_trip() {
        let header = GenerationHeader {
            database_id: 0x1234_5678_9abc_def0_1122_3344_5566_7788,
            generation: 17,
            file_size_bytes: 1 << 20,
            previous_end: Lsn::new(16, 1000),
            created_unix_ms: 5,
        };
        let mut block = vec![0u8; 4096];
        header.encode(&mut block);
        assert_eq!(GenerationHeader::decode(&block), Ok(header));
        block[20] ^= 0x10;
        assert!(GenerationHeader::decode(&block).is_err());
    }
}
