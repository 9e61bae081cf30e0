//! Byte layouts of the generation files (see `docs/log.md` for the tables and the reasoning).
//!
//! Invariants this module keeps:
//! * every frame is bound to its own position `(generation, offset)`: since format version 3 the
//!   generation is stored and the offset is covered by the frame's checksum without being stored
//!   (versions 1 and 2 stored both), so a frame left over from an earlier use of the same bytes (a
//!   recycled file, a torn tail that was abandoned) can never be taken for a current one;
//! * frames never span two generation files (versions 1 and 2 also kept them 8-byte aligned;
//!   version 3 packs them);
//! * a header that is all zeros is "nothing written here", anything else that fails its checksum
//!   is damage.
#![deny(clippy::indexing_slicing, clippy::unwrap_used)]

use std::path::{Path, PathBuf};

use jetproof_io::bytes;

use crate::lsn::Lsn;

/// First bytes of every generation file.
pub const GENERATION_MAGIC: [u8; 8] = *b"JPLOGGEN";
/// Version of the generation file and frame layouts written by this build. Version 2 (2026-11-23)
/// lets a flush frame's payload run past its 32 bytes of [`FlushInfo`] with zeros, to fill the
/// last sector of a durable commit's write (`docs/log.md`, "Filling the partial sector").
/// Version 3 (2026-11-24) has the compact 22-byte frame header and no alignment padding
/// ([`FrameLayout::Compact`]). Version 4 (2026-11-28) names a generation ahead of its use: the
/// header at offset 0 ("copy A", written when the file is named) says nothing of the log before
/// it, and a second copy at [`HEADER_COPY_OFFSET`] ("copy B", written with the generation's first
/// log write) carries `previous_end`; a generation without a valid copy B is "not begun" and
/// holds no record (`docs/log.md`, "Naming the next generation ahead").
pub const FORMAT_VERSION: u32 = 4;
/// Offset of a version 4 header's second copy (copy B) in the header block: in another 512-byte
/// sector than copy A, so a torn write of the block that begins the generation leaves copy A.
pub const HEADER_COPY_OFFSET: usize = 2048;
/// The oldest version this build reads (version 1 logs are version 2 logs without sector fill).
pub const OLDEST_READABLE_VERSION: u32 = 1;
/// The generation header occupies the first 4 KiB block; frames start after it, so that the
/// header is never rewritten by a log write, even under direct I/O.
pub const DATA_START: u64 = 4096;
/// Bytes of the generation header that are meaningful (the rest of the block is zero).
pub const GENERATION_HEADER_BYTES: usize = 76;

/// Every frame written by this build starts on a multiple of this (1: packed).
pub const FRAME_ALIGN: u64 = FrameLayout::Compact.align();
/// Size of a frame header written by this build.
pub const FRAME_HEADER_BYTES: usize = FrameLayout::Compact.header_bytes();
/// Size of a flush frame's payload.
pub const FLUSH_PAYLOAD_BYTES: usize = 32;
/// A flush frame, whole.
pub const FLUSH_FRAME_BYTES: u64 = (FRAME_HEADER_BYTES + FLUSH_PAYLOAD_BYTES) as u64;
/// A generation-end frame, whole.
pub const GEN_END_FRAME_BYTES: u64 = FRAME_HEADER_BYTES as u64;

/// The frame layout of a generation, given by its header's format version.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum FrameLayout {
    /// Versions 1 and 2: a 40-byte header (its own CRC-32C, kind, record type, payload length,
    /// the payload's CRC-32C, generation and offset as u64, transaction id), frames 8-byte
    /// aligned.
    Legacy,
    /// Version 3: a 22-byte header (one CRC-32C over the payload, the rest of the header and the
    /// frame's offset; kind, record type, payload length, generation as u32, transaction id),
    /// frames packed. About 24 bytes less per record than [`FrameLayout::Legacy`]; ESE's log
    /// records carry no checksum or position of their own at all (its checksums cover a log
    /// write's sectors), so this is the nearer of the two to what ESE writes.
    Compact,
}

impl FrameLayout {
    /// The layout of a generation whose header says `version` (one this build reads).
    pub const fn of_version(version: u32) -> FrameLayout {
        if version >= 3 {
            FrameLayout::Compact
        } else {
            FrameLayout::Legacy
        }
    }

    pub const fn header_bytes(self) -> usize {
        match self {
            FrameLayout::Legacy => 40,
            FrameLayout::Compact => 22,
        }
    }

    pub const fn align(self) -> u64 {
        match self {
            FrameLayout::Legacy => 8,
            FrameLayout::Compact => 1,
        }
    }

    /// Bytes a frame with `payload_bytes` of payload occupies in this layout, padding included.
    pub const fn frame_bytes(self, payload_bytes: usize) -> u64 {
        align_up((self.header_bytes() + payload_bytes) as u64, self.align())
    }
}

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

/// The generation a file name gives, if it is a generation file's name exactly as
/// [`generation_file_name`] writes it (for a directory listing; anything else is not ours).
pub fn parse_generation_file_name(name: &str) -> Option<u64> {
    let digits = name.strip_prefix('E')?.strip_suffix(".jplog")?;
    if digits.len() < 8 || !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let generation = u64::from_str_radix(digits, 16).ok()?;
    (generation_file_name(generation) == name).then_some(generation)
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

/// Bytes a frame with `payload_bytes` of payload occupies in the layout this build writes.
pub const fn frame_bytes(payload_bytes: usize) -> u64 {
    FrameLayout::Compact.frame_bytes(payload_bytes)
}

/// Why a generation header block is refused: by its own bytes, or by what it says against the
/// file's name and its neighbours. The messages are the sentences [`crate::LogError::BadHeader`]
/// and the CLI print (tests match on them).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum HeaderError {
    #[error("file is shorter than its {GENERATION_HEADER_BYTES}-byte header")]
    Short,
    #[error("not a jetproof log file (magic mismatch)")]
    BadMagic,
    #[error("header checksum mismatch (stored {stored:#010x}, computed {computed:#010x})")]
    ChecksumMismatch { stored: u32, computed: u32 },
    #[error(
        "format version {version}, this build reads versions {OLDEST_READABLE_VERSION} to {FORMAT_VERSION}"
    )]
    UnsupportedVersion { version: u32 },
    #[error("data starts at {data_start}, expected {DATA_START}")]
    WrongDataStart { data_start: u64 },
    /// A good header in the file of another generation (its name says `expected`).
    #[error("header says generation {found}")]
    WrongGeneration { found: u64 },
    /// The next generation's header names an end of the log before it that is not in this
    /// generation (the file after `generation` was checked).
    #[error(
        "says the log before it ended at {previous_end}, which is not in generation {generation}"
    )]
    PreviousEndElsewhere { previous_end: Lsn, generation: u64 },
    /// Log shipping: the file is not the generation of the database it was sent for.
    #[error(
        "it is generation {found_generation} of database {found_database:032x}, not generation {generation} of {database:032x}"
    )]
    NotTheGenerationSent {
        found_generation: u64,
        found_database: u128,
        generation: u64,
        database: u128,
    },
    /// Log shipping reads a whole generation into memory: one larger than the address space.
    #[error("file of {size} bytes does not fit in memory")]
    TooLargeForMemory { size: u64 },
}

/// `out` after `header_bytes`: `payload`, then zeros to its end. Callers size `out` with
/// [`frame_bytes`]; a shorter one is their bug, caught in debug builds, and nothing is written
/// past its end.
fn put_payload(out: &mut [u8], header_bytes: usize, payload: &[u8]) {
    debug_assert!(out.len() >= header_bytes + payload.len());
    if let Some(body) = out.get_mut(header_bytes..) {
        let n = payload.len().min(body.len());
        if let (Some(dst), Some(src)) = (body.get_mut(..n), payload.get(..n)) {
            dst.copy_from_slice(src);
        }
        if let Some(rest) = body.get_mut(n..) {
            rest.fill(0);
        }
    }
}

/// Copies a header built in a fixed array to the start of `out` (same contract as
/// [`put_payload`]).
fn put_header(out: &mut [u8], header: &[u8]) {
    debug_assert!(out.len() >= header.len());
    if let Some(dst) = out.get_mut(..header.len()) {
        dst.copy_from_slice(header);
    }
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
    /// Meaningful only when `begun` (a generation not begun decodes with [`Lsn::ZERO`]).
    pub previous_end: Lsn,
    pub created_unix_ms: u64,
    /// The format version the generation was written in ([`FORMAT_VERSION`] for a new one); it
    /// gives the generation's [`FrameLayout`].
    pub format_version: u32,
    /// The generation's first log write has made it part of the log (version 4: copy B is
    /// valid; versions 1 to 3 are always begun). A generation not begun was named ahead and
    /// holds no record; readers take it as empty.
    pub begun: bool,
}

impl GenerationHeader {
    /// The layout of this generation's frames.
    pub const fn layout(&self) -> FrameLayout {
        FrameLayout::of_version(self.format_version)
    }

    /// The 76 bytes of one header copy, naming `previous_end`.
    fn encode_copy(&self, previous_end: Lsn) -> [u8; GENERATION_HEADER_BYTES] {
        let mut header = [0u8; GENERATION_HEADER_BYTES];
        header[0..8].copy_from_slice(&GENERATION_MAGIC);
        header[8..12].copy_from_slice(&self.format_version.to_le_bytes());
        header[12..16].copy_from_slice(&(DATA_START as u32).to_le_bytes());
        header[16..32].copy_from_slice(&self.database_id.to_le_bytes());
        header[32..40].copy_from_slice(&self.generation.to_le_bytes());
        header[40..48].copy_from_slice(&self.file_size_bytes.to_le_bytes());
        header[48..56].copy_from_slice(&previous_end.generation.to_le_bytes());
        header[56..64].copy_from_slice(&previous_end.offset.to_le_bytes());
        header[64..72].copy_from_slice(&self.created_unix_ms.to_le_bytes());
        let crc = jetproof_io::crc::crc32c(&header[..72]);
        header[72..76].copy_from_slice(&crc.to_le_bytes());
        header
    }

    /// Writes the header into the start of `block` (at least [`GENERATION_HEADER_BYTES`] long;
    /// for version 4, [`DATA_START`] long, and otherwise left as is). Version 4: copy A (no
    /// `previous_end`) at offset 0, and copy B (with it) at [`HEADER_COPY_OFFSET`] when `begun`,
    /// zeros there when not. Versions 1 to 3: the one copy, with `previous_end`.
    pub fn encode(&self, block: &mut [u8]) {
        if self.format_version < 4 {
            put_header(block, &self.encode_copy(self.previous_end));
            return;
        }
        put_header(block, &self.encode_copy(Lsn::ZERO));
        if let Some(copy) =
            block.get_mut(HEADER_COPY_OFFSET..HEADER_COPY_OFFSET + GENERATION_HEADER_BYTES)
        {
            if self.begun {
                copy.copy_from_slice(&self.encode_copy(self.previous_end));
            } else {
                copy.fill(0);
            }
        }
    }

    /// Begins a version 4 generation in its header block: writes copy B with `previous_end`
    /// and leaves copy A (the block's first bytes) as it is.
    pub fn encode_begun(&mut self, block: &mut [u8], previous_end: Lsn) {
        self.previous_end = previous_end;
        self.begun = true;
        if let Some(copy) =
            block.get_mut(HEADER_COPY_OFFSET..HEADER_COPY_OFFSET + GENERATION_HEADER_BYTES)
        {
            copy.copy_from_slice(&self.encode_copy(previous_end));
        }
    }

    /// Parses and checks a header; the error's message is a sentence for
    /// [`crate::LogError::BadHeader`]. A version 4 header whose copy B is missing, torn or not
    /// this generation's decodes as not begun (copy A alone identifies the file).
    pub fn decode(block: &[u8]) -> Result<GenerationHeader, HeaderError> {
        let mut header = Self::decode_copy(block, 0)?;
        if header.format_version < 4 {
            return Ok(header);
        }
        header.previous_end = Lsn::ZERO;
        header.begun = false;
        if let Ok(copy) = Self::decode_copy(block, HEADER_COPY_OFFSET)
            && copy.format_version == header.format_version
            && copy.database_id == header.database_id
            && copy.generation == header.generation
            && copy.file_size_bytes == header.file_size_bytes
        {
            header.previous_end = copy.previous_end;
            header.begun = true;
        }
        Ok(header)
    }

    fn decode_copy(block: &[u8], at: usize) -> Result<GenerationHeader, HeaderError> {
        let header: [u8; GENERATION_HEADER_BYTES] =
            bytes::array_at(block, at).ok_or(HeaderError::Short)?;
        if header[0..8] != GENERATION_MAGIC {
            return Err(HeaderError::BadMagic);
        }
        // Every field lies inside the fixed-size header: `Short` below is unreachable, and
        // keeps the reads checked.
        let field32 = |at| bytes::u32_at(&header, at).ok_or(HeaderError::Short);
        let field64 = |at| bytes::u64_at(&header, at).ok_or(HeaderError::Short);
        let stored = field32(72)?;
        let computed = jetproof_io::crc::crc32c(&header[..72]);
        if stored != computed {
            return Err(HeaderError::ChecksumMismatch { stored, computed });
        }
        let version = field32(8)?;
        if !(OLDEST_READABLE_VERSION..=FORMAT_VERSION).contains(&version) {
            return Err(HeaderError::UnsupportedVersion { version });
        }
        let data_start = u64::from(field32(12)?);
        if data_start != DATA_START {
            return Err(HeaderError::WrongDataStart { data_start });
        }
        Ok(GenerationHeader {
            database_id: bytes::u128_at(&header, 16).ok_or(HeaderError::Short)?,
            generation: field64(32)?,
            file_size_bytes: field64(40)?,
            previous_end: Lsn::new(field64(48)?, field64(56)?),
            created_unix_ms: field64(64)?,
            format_version: version,
            begun: true,
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
        Some(FlushInfo {
            durable_before: Lsn::new(bytes::u64_at(payload, 0)?, bytes::u64_at(payload, 8)?),
            write_start: bytes::u64_at(payload, 16)?,
            write_sequence: bytes::u64_at(payload, 24)?,
        })
    }
}

/// Encodes a frame at the start of `out` (exactly [`frame_bytes`]`(payload.len())` long),
/// in the layout this build writes. `position` is where the frame will live in the log.
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
        jetproof_io::crc::crc32c(payload),
    );
}

/// [`encode_frame`] with the payload's CRC-32C computed beforehand (`payload_crc` must be
/// `crc32c(payload)`): [`crate::Log::append`] computes it before taking the log's mutex, so the
/// pass over the payload is not made while other sessions wait to append (the frame's checksum
/// continues from it over the 22-byte header and the offset).
pub fn encode_frame_with_crc(
    out: &mut [u8],
    kind: FrameKind,
    position: Lsn,
    record_type: u8,
    transaction_id: u64,
    payload: &[u8],
    payload_crc: u32,
) {
    put_payload(out, FRAME_HEADER_BYTES, payload);
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
/// `fill` zero bytes (a flush frame filling its sector, format version 2 on), encoded at the
/// start of `out` (exactly [`frame_bytes`]`(payload.len() + fill)` long) without building the
/// payload anywhere else.
pub fn encode_frame_filled(
    out: &mut [u8],
    kind: FrameKind,
    position: Lsn,
    payload: &[u8],
    fill: usize,
) {
    put_payload(out, FRAME_HEADER_BYTES, payload);
    let payload_len = payload.len() + fill;
    let filled = out
        .get(FRAME_HEADER_BYTES..FRAME_HEADER_BYTES + payload_len)
        .unwrap_or_default();
    let payload_crc = jetproof_io::crc::crc32c(filled);
    write_frame_header(out, kind, position, 0, 0, payload_len, payload_crc);
}

/// The checksum of a version 3 frame: CRC-32C over the payload, then the header after the
/// checksum field, then the frame's offset in its file (little-endian u64), which is not stored.
fn compact_crc(payload_crc: u32, header_rest: &[u8], offset: u64) -> u32 {
    let crc = jetproof_io::crc::crc32c_append(payload_crc, header_rest);
    jetproof_io::crc::crc32c_append(crc, &offset.to_le_bytes())
}

/// The 22-byte frame header (version 3) at the start of `out`, its checksum first.
fn write_frame_header(
    out: &mut [u8],
    kind: FrameKind,
    position: Lsn,
    record_type: u8,
    transaction_id: u64,
    payload_len: usize,
    payload_crc: u32,
) {
    let mut header = [0u8; FRAME_HEADER_BYTES];
    header[4] = kind as u8;
    header[5] = record_type;
    header[6..10].copy_from_slice(&(payload_len as u32).to_le_bytes());
    // Generations are numbered in 32 bits (file names hold eight hex digits).
    header[10..14].copy_from_slice(&(position.generation as u32).to_le_bytes());
    header[14..22].copy_from_slice(&transaction_id.to_le_bytes());
    let crc = compact_crc(payload_crc, &header[4..FRAME_HEADER_BYTES], position.offset);
    header[0..4].copy_from_slice(&crc.to_le_bytes());
    put_header(out, &header);
}

/// A frame of a version 1 or 2 generation at the start of `out` (this build no longer writes
/// them; tests use it to check that such logs are still read).
#[doc(hidden)]
pub fn encode_legacy_frame(
    out: &mut [u8],
    kind: FrameKind,
    position: Lsn,
    record_type: u8,
    transaction_id: u64,
    payload: &[u8],
) {
    const HEADER: usize = FrameLayout::Legacy.header_bytes();
    put_payload(out, HEADER, payload);
    let mut header = [0u8; HEADER];
    header[4] = kind as u8;
    header[5] = record_type;
    header[6..8].fill(0);
    header[8..12].copy_from_slice(&(payload.len() as u32).to_le_bytes());
    header[12..16].copy_from_slice(&jetproof_io::crc::crc32c(payload).to_le_bytes());
    header[16..24].copy_from_slice(&position.generation.to_le_bytes());
    header[24..32].copy_from_slice(&position.offset.to_le_bytes());
    header[32..40].copy_from_slice(&transaction_id.to_le_bytes());
    let crc = jetproof_io::crc::crc32c(&header[4..HEADER]);
    header[0..4].copy_from_slice(&crc.to_le_bytes());
    put_header(out, &header);
}

/// A frame found valid at some offset of a generation's bytes.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Frame {
    pub kind: FrameKind,
    pub record_type: u8,
    pub transaction_id: u64,
    pub offset: u64,
    pub payload_bytes: usize,
    pub layout: FrameLayout,
}

impl Frame {
    pub fn total_bytes(&self) -> u64 {
        self.layout.frame_bytes(self.payload_bytes)
    }

    pub fn end(&self) -> u64 {
        self.offset + self.total_bytes()
    }

    /// The payload inside the generation's bytes (whose first byte is file offset 0).
    pub fn payload<'a>(&self, file: &'a [u8]) -> &'a [u8] {
        let start = self.offset as usize + self.layout.header_bytes();
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
/// file offset 0 at index 0), which belongs to `generation`, written in `layout`.
pub fn decode_frame(file: &[u8], generation: u64, offset: u64, layout: FrameLayout) -> Decoded {
    match layout {
        FrameLayout::Legacy => decode_legacy_frame(file, generation, offset),
        FrameLayout::Compact => decode_compact_frame(file, generation, offset),
    }
}

fn decode_compact_frame(file: &[u8], generation: u64, offset: u64) -> Decoded {
    const HEADER: usize = FrameLayout::Compact.header_bytes();
    let start = offset as usize;
    let fields = |header: &[u8; HEADER]| {
        Some((
            bytes::u32_at(header, 0)?,
            bytes::u32_at(header, 6)? as usize,
            u64::from(bytes::u32_at(header, 10)?),
            bytes::u64_at(header, 14)?,
        ))
    };
    let Some((header, (stored, payload_bytes, frame_generation, transaction_id))) =
        bytes::array_at::<HEADER>(file, start).and_then(|h| Some((h, fields(&h)?)))
    else {
        return Decoded::Damaged("frame header runs past the end of the file".into());
    };
    if header.iter().all(|&byte| byte == 0) {
        return Decoded::Empty;
    }
    let payload_start = start + HEADER;
    let Some(payload) = file.get(payload_start..payload_start + payload_bytes) else {
        if legacy_frame_of_earlier_generation(file, generation, offset) {
            return Decoded::Empty;
        }
        return Decoded::Damaged(format!(
            "frame payload of {payload_bytes} bytes runs past the end of the file"
        ));
    };
    let computed = compact_crc(jetproof_io::crc::crc32c(payload), &header[4..], offset);
    if stored != computed {
        if legacy_frame_of_earlier_generation(file, generation, offset) {
            return Decoded::Empty;
        }
        return Decoded::Damaged(format!(
            "frame checksum mismatch over {payload_bytes} bytes of payload (stored \
             {stored:#010x}, computed {computed:#010x}): damaged, or written for another position"
        ));
    }
    if frame_generation < generation {
        // A valid frame of an earlier generation at this very offset: a recycled file's old
        // content. Nothing of this generation was written here.
        return Decoded::Empty;
    }
    if frame_generation != generation {
        return Decoded::Damaged(format!(
            "frame belongs to generation {frame_generation}, not {generation} (stale or \
             misdirected data)"
        ));
    }
    let Some(kind) = FrameKind::from_u8(header[4]) else {
        return Decoded::Damaged(format!("unknown frame kind {}", header[4]));
    };
    Decoded::Valid(Frame {
        kind,
        record_type: header[5],
        transaction_id,
        offset,
        payload_bytes,
        layout: FrameLayout::Compact,
    })
}

/// Whether a valid version 1 or 2 frame of an earlier generation starts at `offset`: a file
/// recycled by circular logging after an upgrade still holds its old frames past the new end.
fn legacy_frame_of_earlier_generation(file: &[u8], generation: u64, offset: u64) -> bool {
    offset.is_multiple_of(FrameLayout::Legacy.align())
        && matches!(decode_legacy_frame(file, u64::MAX, offset), Decoded::Empty)
        && {
            let start = offset as usize;
            file.get(start..start + FrameLayout::Legacy.header_bytes())
                .is_some_and(|header| {
                    header.iter().any(|&byte| byte != 0)
                        && bytes::u64_at(header, 16).is_some_and(|g| g < generation)
                })
        }
}

fn decode_legacy_frame(file: &[u8], generation: u64, offset: u64) -> Decoded {
    const HEADER: usize = FrameLayout::Legacy.header_bytes();
    let start = offset as usize;
    let fields = |header: &[u8; HEADER]| {
        Some((
            bytes::u32_at(header, 0)?,
            bytes::u32_at(header, 8)? as usize,
            bytes::u32_at(header, 12)?,
            bytes::u64_at(header, 16)?,
            bytes::u64_at(header, 24)?,
            bytes::u64_at(header, 32)?,
        ))
    };
    let Some((
        header,
        (stored, payload_bytes, stored_payload, frame_generation, frame_offset, transaction_id),
    )) = bytes::array_at::<HEADER>(file, start).and_then(|h| Some((h, fields(&h)?)))
    else {
        return Decoded::Damaged("frame header runs past the end of the file".into());
    };
    if header.iter().all(|&byte| byte == 0) {
        return Decoded::Empty;
    }
    let computed = jetproof_io::crc::crc32c(&header[4..]);
    if stored != computed {
        return Decoded::Damaged(format!(
            "frame header checksum mismatch (stored {stored:#010x}, computed {computed:#010x})"
        ));
    }
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
    let payload_start = start + HEADER;
    let Some(payload) = file.get(payload_start..payload_start + payload_bytes) else {
        return Decoded::Damaged(format!(
            "frame payload of {payload_bytes} bytes runs past the end of the file"
        ));
    };
    let computed_payload = jetproof_io::crc::crc32c(payload);
    if stored_payload != computed_payload {
        return Decoded::Damaged(format!(
            "payload checksum mismatch over {payload_bytes} bytes \
             (stored {stored_payload:#010x}, computed {computed_payload:#010x})"
        ));
    }
    Decoded::Valid(Frame {
        kind,
        record_type: header[5],
        transaction_id,
        offset,
        payload_bytes,
        layout: FrameLayout::Legacy,
    })
}

/// Quick test used when searching past damage: could a frame of `generation` start at `offset`?
/// (Its stored generation, and in the legacy layout its stored offset, match; the checksum is
/// checked by [`decode_frame`] afterwards.)
pub fn position_matches(file: &[u8], generation: u64, offset: u64, layout: FrameLayout) -> bool {
    let start = offset as usize;
    match layout {
        FrameLayout::Legacy => {
            file.len() >= start + FrameLayout::Legacy.header_bytes()
                && bytes::u64_at(file, start + 24) == Some(offset)
                && bytes::u64_at(file, start + 16) == Some(generation)
        }
        FrameLayout::Compact => {
            file.len() >= start + FrameLayout::Compact.header_bytes()
                && bytes::u32_at(file, start + 10).map(u64::from) == Some(generation)
        }
    }
}

#[cfg(test)]
#[allow(clippy::indexing_slicing, clippy::unwrap_used)]
mod tests {
    use super::*;

    fn sample_header() -> GenerationHeader {
        GenerationHeader {
            database_id: 0x0123_4567_89ab_cdef_0011_2233_4455_6677,
            generation: 9,
            file_size_bytes: 1 << 20,
            previous_end: Lsn::new(8, 5000),
            created_unix_ms: 1_700_000_000_000,
            format_version: FORMAT_VERSION,
            begun: true,
        }
    }

    /// Every cut of a header block, and garbage in each checked field, is a typed error whose
    /// message is the sentence users see; never a panic, never a header of zeros.
    #[test]
    fn header_short_or_garbage_is_a_typed_error_not_a_panic() {
        let mut block = vec![0u8; 4096];
        sample_header().encode(&mut block);
        assert_eq!(GenerationHeader::decode(&block), Ok(sample_header()));
        for cut in 0..GENERATION_HEADER_BYTES {
            assert_eq!(
                GenerationHeader::decode(&block[..cut]),
                Err(HeaderError::Short),
                "cut {cut}"
            );
        }
        assert_eq!(
            HeaderError::Short.to_string(),
            "file is shorter than its 76-byte header"
        );
        let mut magic = block.clone();
        magic[0] ^= 1;
        let error = GenerationHeader::decode(&magic).unwrap_err();
        assert_eq!(error, HeaderError::BadMagic);
        assert_eq!(
            error.to_string(),
            "not a jetproof log file (magic mismatch)"
        );
        let mut torn = block.clone();
        torn[40] ^= 0x10;
        let error = GenerationHeader::decode(&torn).unwrap_err();
        assert!(
            matches!(error, HeaderError::ChecksumMismatch { .. }),
            "{error}"
        );
        assert!(
            error
                .to_string()
                .starts_with("header checksum mismatch (stored 0x")
        );
        // A valid checksum over a version or data start this build does not read.
        let reseal = |at: usize, value: u32| {
            let mut bad = block.clone();
            bad[at..at + 4].copy_from_slice(&value.to_le_bytes());
            let crc = jetproof_io::crc::crc32c(&bad[..72]);
            bad[72..76].copy_from_slice(&crc.to_le_bytes());
            GenerationHeader::decode(&bad).unwrap_err()
        };
        let error = reseal(8, 99);
        assert_eq!(error, HeaderError::UnsupportedVersion { version: 99 });
        assert_eq!(
            error.to_string(),
            format!(
                "format version 99, this build reads versions {OLDEST_READABLE_VERSION} to {FORMAT_VERSION}"
            )
        );
        let error = reseal(12, 512);
        assert_eq!(error, HeaderError::WrongDataStart { data_start: 512 });
        assert_eq!(
            error.to_string(),
            format!("data starts at 512, expected {DATA_START}")
        );
    }

    /// A frame whose header would run past the file, or past `usize::MAX`, is damage.
    #[test]
    fn frames_cut_short_are_damaged_not_a_panic() {
        let payload = b"abc";
        let len = frame_bytes(payload.len()) as usize;
        let mut file = vec![0u8; 4096 + len];
        encode_frame(
            &mut file[4096..],
            FrameKind::Record,
            Lsn::new(2, 4096),
            1,
            7,
            payload,
        );
        for layout in [FrameLayout::Compact, FrameLayout::Legacy] {
            for offset in [file.len() as u64 - 3, u64::MAX - 2, usize::MAX as u64] {
                assert!(
                    matches!(decode_frame(&file, 2, offset, layout), Decoded::Damaged(_)),
                    "{layout:?} at {offset}"
                );
            }
        }
        for cut in 4096..file.len() {
            assert!(
                matches!(
                    decode_frame(&file[..cut], 2, 4096, FrameLayout::Compact),
                    Decoded::Damaged(_)
                ),
                "cut {cut}"
            );
        }
        assert_eq!(FlushInfo::decode(&[0xff; FLUSH_PAYLOAD_BYTES - 1]), None);
    }

    #[test]
    fn frame_round_trip_and_damage() {
        let payload = b"insert key=value on page 7";
        let len = frame_bytes(payload.len()) as usize;
        assert_eq!(len, 22 + payload.len(), "version 3 frames are packed");
        let mut file = vec![0u8; 4096 + len + 64];
        encode_frame(
            &mut file[4096..4096 + len],
            FrameKind::Record,
            Lsn::new(3, 4096),
            9,
            42,
            payload,
        );
        let compact = FrameLayout::Compact;
        let Decoded::Valid(frame) = decode_frame(&file, 3, 4096, compact) else {
            panic!("frame should decode");
        };
        assert_eq!(frame.payload(&file), payload);
        assert_eq!((frame.record_type, frame.transaction_id), (9, 42));
        assert_eq!(frame.end(), 4096 + len as u64);
        assert_eq!(
            decode_frame(&file, 3, 4096 + len as u64, compact),
            Decoded::Empty
        );
        // Read as generation 4 (the file was recycled), it is old content: nothing written.
        assert_eq!(decode_frame(&file, 4, 4096, compact), Decoded::Empty);
        // A frame of a later generation is misplaced: damage.
        assert!(matches!(
            decode_frame(&file, 2, 4096, compact),
            Decoded::Damaged(_)
        ));
        // The same bytes at another offset: the offset is under the checksum, so damage.
        let mut moved = vec![0u8; 4104 + len + 64];
        moved[4104..4104 + len].copy_from_slice(&file[4096..4096 + len]);
        assert!(matches!(
            decode_frame(&moved, 3, 4104, compact),
            Decoded::Damaged(_)
        ));
        // One bit anywhere in the header or the payload is damage.
        for byte in [0, 4, 6, 10, 14, 21, 22, 22 + payload.len() - 1] {
            let mut bad = file.clone();
            bad[4096 + byte] ^= 1;
            assert!(
                matches!(decode_frame(&bad, 3, 4096, compact), Decoded::Damaged(_)),
                "bit flipped in byte {byte}"
            );
        }
    }

    #[test]
    fn legacy_frames_are_still_read_and_old_ones_are_empty_space() {
        let payload = b"a version 2 record";
        let legacy = FrameLayout::Legacy;
        let len = legacy.frame_bytes(payload.len()) as usize;
        assert_eq!(len, (40 + payload.len()).div_ceil(8) * 8);
        let mut file = vec![0u8; 4096 + len + 64];
        encode_legacy_frame(
            &mut file[4096..4096 + len],
            FrameKind::Record,
            Lsn::new(5, 4096),
            1,
            77,
            payload,
        );
        let Decoded::Valid(frame) = decode_frame(&file, 5, 4096, legacy) else {
            panic!("legacy frame should decode");
        };
        assert_eq!(frame.payload(&file), payload);
        assert_eq!((frame.transaction_id, frame.end()), (77, 4096 + len as u64));
        assert!(position_matches(&file, 5, 4096, legacy));
        // A generation of version 3 recycled from a version 2 one: the old frame at the new
        // log's end is unwritten space, not damage.
        assert_eq!(
            decode_frame(&file, 6, 4096, FrameLayout::Compact),
            Decoded::Empty
        );
        // But read as its own generation under the wrong layout it is not a valid frame.
        assert!(matches!(
            decode_frame(&file, 5, 4096, FrameLayout::Compact),
            Decoded::Damaged(_)
        ));
    }

    #[test]
    fn generation_header_round_trip() {
        let header = GenerationHeader {
            database_id: 0x1234_5678_9abc_def0_1122_3344_5566_7788,
            generation: 17,
            file_size_bytes: 1 << 20,
            previous_end: Lsn::new(16, 1000),
            created_unix_ms: 5,
            format_version: FORMAT_VERSION,
            begun: true,
        };
        let mut block = vec![0u8; 4096];
        header.encode(&mut block);
        assert_eq!(GenerationHeader::decode(&block), Ok(header));
        block[20] ^= 0x10;
        assert!(GenerationHeader::decode(&block).is_err());
    }

    /// Version 4: a generation named ahead decodes as not begun; copy B begins it; a torn or
    /// foreign copy B leaves it not begun (copy A alone still identifies the file), never an
    /// error and never a wrong `previous_end`.
    #[test]
    fn a_header_not_begun_is_begun_by_its_second_copy_and_a_torn_copy_leaves_it_not_begun() {
        let mut named = sample_header();
        named.begun = false;
        named.previous_end = Lsn::ZERO;
        let mut block = vec![0u8; 4096];
        named.encode(&mut block);
        assert_eq!(GenerationHeader::decode(&block), Ok(named));
        let copy_a = block[..HEADER_COPY_OFFSET].to_vec();
        let mut begun = named;
        begun.encode_begun(&mut block, Lsn::new(8, 5000));
        assert_eq!(
            &block[..HEADER_COPY_OFFSET],
            &copy_a[..],
            "copy A unchanged"
        );
        assert_eq!(GenerationHeader::decode(&block), Ok(sample_header()));
        // Every torn state of copy B (a prefix of its bytes new, the rest zero, as the old
        // block had) reads as not begun.
        for cut in 0..GENERATION_HEADER_BYTES {
            let mut torn = block.clone();
            torn[HEADER_COPY_OFFSET + cut..HEADER_COPY_OFFSET + GENERATION_HEADER_BYTES].fill(0);
            assert_eq!(GenerationHeader::decode(&torn), Ok(named), "cut {cut}");
        }
        // A copy B of another generation (a recycled file's old header) does not begin it.
        let mut other = sample_header();
        other.generation = 3;
        let mut stale = vec![0u8; 4096];
        other.encode(&mut stale);
        let mut recycled = block.clone();
        recycled[HEADER_COPY_OFFSET..HEADER_COPY_OFFSET + GENERATION_HEADER_BYTES].copy_from_slice(
            &stale[HEADER_COPY_OFFSET..HEADER_COPY_OFFSET + GENERATION_HEADER_BYTES],
        );
        assert_eq!(GenerationHeader::decode(&recycled), Ok(named));
        // A damaged copy A is still an error, whatever copy B says.
        let mut bad = block.clone();
        bad[40] ^= 1;
        assert!(matches!(
            GenerationHeader::decode(&bad),
            Err(HeaderError::ChecksumMismatch { .. })
        ));
    }
}
