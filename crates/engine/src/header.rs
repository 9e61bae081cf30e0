//! The database header page, kept twice (pages 0 and 1).
//!
//! Why twice: the header is rewritten in place (clean/dirty state, page count after growth,
//! recovery position), and a torn or lost write of it must not make the whole database unreadable.
//! Both copies carry a `sequence` that grows with every rewrite; a reader takes the valid copy
//! with the highest sequence. Writers update page 0, sync, then page 1, sync (see
//! [`crate::db`]), so at any crash point at least one copy is complete.
//!
//! [`DbHeader::read`] is used read-only by `jetproof checksum` before it knows anything about the
//! file: it must turn a truncated, foreign or garbage file into a [`HeaderError`], never a panic.
//! Every field read from disk is range-checked here.
//!
//! Body layout (little-endian, after the common page header of [`crate::page`]; the reference
//! table is in `docs/design.md`):
//!
//! | offset | size | field |
//! |-------:|-----:|-------|
//! | 80  | 8  | signature `JETPRFDB` |
//! | 88  | 4  | format version |
//! | 92  | 4  | page size in bytes |
//! | 96  | 8  | page count (pages formatted in the file, headers included) |
//! | 104 | 1  | state: 1 clean, 2 dirty |
//! | 105 | 3  | reserved, zero |
//! | 108 | 4  | root page of the record tree |
//! | 112 | 8  | recovery position: log generation |
//! | 120 | 8  | recovery position: byte offset in that generation |
//! | 128 | 16 | database identity: random id |
//! | 144 | 8  | database identity: creation time, ns since the Unix epoch |
//! | 152 | 8  | next update stamp (dbtime) |
//! | 160 | 8  | header sequence (the newer copy wins) |
//! | 168 | 4  | growth extent, in pages |
//! | 172 | 4  | reserved, zero |
//! | 176 | 8  | pages in use at the last clean close (informational) |
#![deny(clippy::indexing_slicing, clippy::unwrap_used)]

use std::path::PathBuf;

use jetproof_io::{AlignedBuf, IoClass, IoError, IoFile};

use crate::checksum::{self, PageCheck};
use crate::page::{self, PageType};

/// Signature at offset 80 of both header pages.
pub const SIGNATURE: [u8; 8] = *b"JETPRFDB";
/// The format this code writes and reads (history in `docs/design.md`).
pub const FORMAT_VERSION: u32 = 1;
/// Page sizes a database may have.
pub const PAGE_SIZES: [u32; 4] = [4096, 8192, 16384, 32768];
/// Pages 0 and 1 hold the two header copies.
pub const HEADER_PAGES: u32 = 2;

const OFFSET_SIGNATURE: usize = 80;
const OFFSET_VERSION: usize = 88;
const OFFSET_PAGE_SIZE: usize = 92;
const OFFSET_PAGE_COUNT: usize = 96;
const OFFSET_STATE: usize = 104;
const OFFSET_ROOT: usize = 108;
const OFFSET_LOG_GENERATION: usize = 112;
const OFFSET_LOG_OFFSET: usize = 120;
const OFFSET_DATABASE_ID: usize = 128;
const OFFSET_CREATED: usize = 144;
const OFFSET_NEXT_STAMP: usize = 152;
const OFFSET_SEQUENCE: usize = 160;
const OFFSET_EXTENT: usize = 168;
const OFFSET_USED_PAGES: usize = 176;
/// The smallest read that covers every header field: one 4 KiB block, the smallest page size.
const PROBE_SIZE: usize = 4096;

/// Whether the database was closed cleanly.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum DbState {
    /// Closed by `close()`: every change is in the file.
    Clean,
    /// Open, or stopped without `close()`: the logs must be replayed before use.
    Dirty,
}

/// A position in the database's log stream: where recovery starts.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LogPosition {
    pub generation: u64,
    pub offset: u64,
}

/// The decoded database header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DbHeader {
    pub format_version: u32,
    pub page_size: u32,
    /// Pages formatted in the file, the two header pages included.
    pub page_count: u64,
    pub state: DbState,
    /// Root page of the record tree (fixed for the life of the database).
    pub root_page: u32,
    pub recovery_position: LogPosition,
    pub database_id: u128,
    pub created_unix_ns: u64,
    pub next_update_stamp: u64,
    pub sequence: u64,
    pub extent_pages: u32,
    pub used_pages: u64,
}

/// Why a file's header cannot be used. Each variant names the file.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum HeaderError {
    #[error(
        "{path}: truncated database file: {size_bytes} bytes, but {needed_bytes} are needed ({what})"
    )]
    Truncated {
        path: PathBuf,
        size_bytes: u64,
        needed_bytes: u64,
        what: &'static str,
    },
    #[error("{path}: not a jetproof database (no database signature in pages 0 and 1)")]
    NotADatabase { path: PathBuf },
    #[error(
        "{path}: database format version {found} is not supported (this jetproof reads version {FORMAT_VERSION})"
    )]
    UnsupportedVersion { path: PathBuf, found: u32 },
    #[error("{path}: both header pages (0 and 1) are damaged; page 0: {page0}; page 1: {page1}")]
    BothCopiesDamaged {
        path: PathBuf,
        page0: String,
        page1: String,
    },
    #[error("read database header: {0}")]
    Io(#[from] IoError),
}

impl DbHeader {
    /// Size of the file this header describes.
    pub fn file_size_bytes(&self) -> u64 {
        self.page_count * u64::from(self.page_size)
    }

    /// Reads and checks the header of a database file, read-only, with [`IoClass::DbRead`].
    pub fn read(file: &dyn IoFile) -> Result<DbHeader, HeaderError> {
        Self::read_with_class(file, IoClass::DbRead)
    }

    /// Like [`DbHeader::read`], tagging the reads with `class` (the checksum command uses
    /// [`IoClass::ChecksumRead`]).
    pub fn read_with_class(file: &dyn IoFile, class: IoClass) -> Result<DbHeader, HeaderError> {
        let path = file.path().to_path_buf();
        let size_bytes = file.size()?;
        if size_bytes < PROBE_SIZE as u64 {
            return Err(HeaderError::Truncated {
                path,
                size_bytes,
                needed_bytes: 2 * PROBE_SIZE as u64,
                what: "two header pages",
            });
        }
        // Which page sizes are worth trying: the one page 0 claims, then every size for page 1
        // (page 0 may be the damaged copy, and then its page-size field cannot be trusted).
        let mut probe = AlignedBuf::zeroed(PROBE_SIZE);
        file.read_at(&mut probe, 0, class)?;
        let mut candidates: Vec<(u32, u32)> = Vec::new(); // (page number, page size)
        if let Some(page_size) = probe_page_size(&probe) {
            candidates.push((0, page_size));
            candidates.push((1, page_size));
        }
        for page_size in PAGE_SIZES {
            if !candidates.contains(&(1, page_size)) {
                candidates.push((1, page_size));
            }
        }

        let mut signature_seen = probe_has_signature(&probe);
        let mut best: Option<DbHeader> = None;
        let mut damage: [Option<String>; 2] = [None, None];
        for (number, page_size) in candidates {
            let offset = u64::from(number) * u64::from(page_size);
            if offset + u64::from(page_size) > size_bytes {
                continue;
            }
            if number == 1 {
                file.read_at(&mut probe, offset, class)?;
                if !probe_has_signature(&probe) {
                    continue;
                }
                signature_seen = true;
                if probe_page_size(&probe) != Some(page_size) {
                    continue;
                }
            }
            let mut page = AlignedBuf::zeroed(page_size as usize);
            file.read_at(&mut page, offset, class)?;
            let outcome = match checksum::correct(&mut page, number) {
                PageCheck::Good | PageCheck::Correctable { .. } => decode(&page, &path),
                PageCheck::WrongPageNumber { found } => Err(HeaderDecode::Damaged(format!(
                    "holds page number {found} (a misdirected write)"
                ))),
                PageCheck::Bad => Err(HeaderDecode::Damaged("checksum mismatch".to_string())),
            };
            match outcome {
                Ok(header) => {
                    if best.as_ref().is_none_or(|b| header.sequence > b.sequence) {
                        best = Some(header);
                    }
                }
                Err(HeaderDecode::Version(found)) => {
                    return Err(HeaderError::UnsupportedVersion { path, found });
                }
                Err(HeaderDecode::Damaged(what)) => {
                    if let Some(slot) = damage.get_mut(number as usize) {
                        slot.get_or_insert(what);
                    }
                }
            }
        }
        let Some(header) = best else {
            if !signature_seen {
                return Err(HeaderError::NotADatabase { path });
            }
            let [page0, page1] = damage.map(|d| d.unwrap_or_else(|| "unreadable".to_string()));
            return Err(HeaderError::BothCopiesDamaged { path, page0, page1 });
        };
        if size_bytes < header.file_size_bytes() {
            return Err(HeaderError::Truncated {
                path,
                size_bytes,
                needed_bytes: header.file_size_bytes(),
                what: "the page count in the header",
            });
        }
        Ok(header)
    }

    /// Formats header copy `number` (0 or 1) into `page` (whose length is the page size), sealed.
    pub fn encode(&self, page: &mut [u8], number: u32) {
        page.fill(0);
        page::write_common(
            page,
            number,
            PageType::DatabaseHeader,
            self.next_update_stamp,
        );
        put(page, OFFSET_SIGNATURE, &SIGNATURE);
        put(page, OFFSET_VERSION, &self.format_version.to_le_bytes());
        put(page, OFFSET_PAGE_SIZE, &self.page_size.to_le_bytes());
        put(page, OFFSET_PAGE_COUNT, &self.page_count.to_le_bytes());
        let state: u8 = match self.state {
            DbState::Clean => 1,
            DbState::Dirty => 2,
        };
        put(page, OFFSET_STATE, &[state]);
        put(page, OFFSET_ROOT, &self.root_page.to_le_bytes());
        put(
            page,
            OFFSET_LOG_GENERATION,
            &self.recovery_position.generation.to_le_bytes(),
        );
        put(
            page,
            OFFSET_LOG_OFFSET,
            &self.recovery_position.offset.to_le_bytes(),
        );
        put(page, OFFSET_DATABASE_ID, &self.database_id.to_le_bytes());
        put(page, OFFSET_CREATED, &self.created_unix_ns.to_le_bytes());
        put(
            page,
            OFFSET_NEXT_STAMP,
            &self.next_update_stamp.to_le_bytes(),
        );
        put(page, OFFSET_SEQUENCE, &self.sequence.to_le_bytes());
        put(page, OFFSET_EXTENT, &self.extent_pages.to_le_bytes());
        put(page, OFFSET_USED_PAGES, &self.used_pages.to_le_bytes());
        checksum::seal(page);
    }
}

use crate::page::put;

fn probe_has_signature(probe: &[u8]) -> bool {
    probe.get(OFFSET_SIGNATURE..OFFSET_SIGNATURE + 8) == Some(&SIGNATURE[..])
}

fn probe_page_size(probe: &[u8]) -> Option<u32> {
    if !probe_has_signature(probe) {
        return None;
    }
    let size = page::get_u32(probe, OFFSET_PAGE_SIZE)?;
    PAGE_SIZES.contains(&size).then_some(size)
}

enum HeaderDecode {
    Version(u32),
    Damaged(String),
}

impl From<String> for HeaderDecode {
    fn from(what: String) -> Self {
        HeaderDecode::Damaged(what)
    }
}

/// Decodes a page whose checksum is good. Range-checks every field.
fn decode(page: &[u8], _path: &std::path::Path) -> Result<DbHeader, HeaderDecode> {
    let field = |offset: usize| page::get_u64(page, offset).ok_or("short page".to_string());
    let field32 = |offset: usize| page::get_u32(page, offset).ok_or("short page".to_string());
    if page.get(page::OFFSET_PAGE_TYPE).copied() != Some(PageType::DatabaseHeader as u8) {
        return Err("page type is not a database header".to_string().into());
    }
    if !probe_has_signature(page) {
        return Err("no database signature".to_string().into());
    }
    let format_version = field32(OFFSET_VERSION)?;
    if format_version != FORMAT_VERSION {
        return Err(HeaderDecode::Version(format_version));
    }
    let page_size = field32(OFFSET_PAGE_SIZE)?;
    if !PAGE_SIZES.contains(&page_size) || page_size as usize != page.len() {
        return Err(format!("page size field {page_size} does not match the page").into());
    }
    let page_count = field(OFFSET_PAGE_COUNT)?;
    if page_count < u64::from(HEADER_PAGES) || page_count > u64::from(u32::MAX) {
        return Err(format!("page count {page_count} is impossible").into());
    }
    let state = match page.get(OFFSET_STATE).copied() {
        Some(1) => DbState::Clean,
        Some(2) => DbState::Dirty,
        other => return Err(format!("state byte {other:?} is neither clean nor dirty").into()),
    };
    let root_page = field32(OFFSET_ROOT)?;
    if u64::from(root_page) >= page_count || root_page < HEADER_PAGES {
        return Err(format!("root page {root_page} is outside the file").into());
    }
    let database_id =
        jetproof_io::bytes::u128_at(page, OFFSET_DATABASE_ID).ok_or("short page".to_string())?;
    Ok(DbHeader {
        format_version,
        page_size,
        page_count,
        state,
        root_page,
        recovery_position: LogPosition {
            generation: field(OFFSET_LOG_GENERATION)?,
            offset: field(OFFSET_LOG_OFFSET)?,
        },
        database_id,
        created_unix_ns: field(OFFSET_CREATED)?,
        next_update_stamp: field(OFFSET_NEXT_STAMP)?,
        sequence: field(OFFSET_SEQUENCE)?,
        extent_pages: field32(OFFSET_EXTENT)?,
        used_pages: field(OFFSET_USED_PAGES)?,
    })
}

#[cfg(test)]
#[allow(clippy::indexing_slicing)]
mod tests {
    use super::*;
    use jetproof_io::mem::MemBackend;
    use jetproof_io::{IoBackend, OpenOptions};
    use std::path::Path;
    use std::sync::Arc;

    fn sample(page_size: u32) -> DbHeader {
        DbHeader {
            format_version: FORMAT_VERSION,
            page_size,
            page_count: 8,
            state: DbState::Clean,
            root_page: 3,
            recovery_position: LogPosition {
                generation: 7,
                offset: 4096,
            },
            database_id: 0x1234_5678_9abc_def0_1122_3344_5566_7788,
            created_unix_ns: 1_700_000_000_000_000_000,
            next_update_stamp: 99,
            sequence: 5,
            extent_pages: 32,
            used_pages: 4,
        }
    }

    fn file_with(header: &DbHeader) -> Arc<dyn IoFile> {
        let backend = MemBackend::new();
        let file = backend
            .open(Path::new("/db/test.jpdb"), &OpenOptions::create())
            .expect("open");
        let ps = header.page_size as usize;
        let mut image = vec![0u8; ps * header.page_count as usize];
        for n in 0..2u32 {
            let page = &mut image[n as usize * ps..(n as usize + 1) * ps];
            header.encode(page, n);
        }
        file.write_at(&image, 0, IoClass::DbWrite).expect("write");
        file
    }

    #[test]
    fn round_trip_every_page_size() {
        for ps in PAGE_SIZES {
            let header = sample(ps);
            let file = file_with(&header);
            assert_eq!(DbHeader::read(file.as_ref()).expect("read"), header);
        }
    }

    #[test]
    fn damaged_first_copy_falls_back_to_second() {
        for ps in PAGE_SIZES {
            let header = sample(ps);
            let file = file_with(&header);
            // Garbage over the whole of page 0, page-size field included.
            file.write_at(&vec![0xA5u8; ps as usize], 0, IoClass::DbWrite)
                .expect("write");
            assert_eq!(DbHeader::read(file.as_ref()).expect("read"), header);
        }
    }

    #[test]
    fn newer_copy_wins() {
        let header = sample(8192);
        let file = file_with(&header);
        let mut newer = header.clone();
        newer.sequence += 1;
        newer.state = DbState::Dirty;
        let mut page = vec![0u8; 8192];
        newer.encode(&mut page, 1);
        file.write_at(&page, 8192, IoClass::DbWrite).expect("write");
        assert_eq!(DbHeader::read(file.as_ref()).expect("read"), newer);
    }

    #[test]
    fn both_copies_damaged_is_reported() {
        let header = sample(32768);
        let file = file_with(&header);
        file.write_at(&[0xFF; 16], 200, IoClass::DbWrite)
            .expect("write");
        file.write_at(&[0xFF; 16], 32768 + 200, IoClass::DbWrite)
            .expect("write");
        let err = DbHeader::read(file.as_ref()).expect_err("damaged");
        assert!(
            matches!(err, HeaderError::BothCopiesDamaged { .. }),
            "{err}"
        );
    }

    #[test]
    fn garbage_foreign_empty_and_truncated_files_are_refused() {
        let backend = MemBackend::new();
        let open = |name: &str, content: &[u8]| {
            let file = backend
                .open(Path::new(name), &OpenOptions::create())
                .expect("open");
            if !content.is_empty() {
                file.write_at(content, 0, IoClass::DbWrite).expect("write");
            }
            file
        };
        let empty = open("/empty", &[]);
        assert!(matches!(
            DbHeader::read(empty.as_ref()),
            Err(HeaderError::Truncated { .. })
        ));
        let short = open("/short", &[1, 2, 3]);
        assert!(matches!(
            DbHeader::read(short.as_ref()),
            Err(HeaderError::Truncated { .. })
        ));
        let mut noise = vec![0u8; 200_000];
        let mut x: u32 = 12345;
        for b in noise.iter_mut() {
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
            *b = (x >> 16) as u8;
        }
        let garbage = open("/garbage", &noise);
        assert!(matches!(
            DbHeader::read(garbage.as_ref()),
            Err(HeaderError::NotADatabase { .. })
        ));
        // A real header whose file was cut short of its page count.
        let header = sample(4096);
        let mut image = vec![0u8; 4096 * 3];
        header.encode(&mut image[..4096], 0);
        header.encode(&mut image[4096..8192], 1);
        let cut = open("/cut", &image);
        let err = DbHeader::read(cut.as_ref()).expect_err("truncated");
        assert!(matches!(err, HeaderError::Truncated { .. }), "{err}");
        assert!(err.to_string().contains("/cut"), "{err}");
    }

    #[test]
    fn future_version_is_refused_by_name() {
        let mut header = sample(4096);
        header.format_version = 99;
        let file = file_with(&header);
        let err = DbHeader::read(file.as_ref()).expect_err("version");
        assert!(
            matches!(err, HeaderError::UnsupportedVersion { found: 99, .. }),
            "{err}"
        );
    }
}
