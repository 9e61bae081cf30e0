//! The bridge between procedures and the engine's database files: recognising one, and the
//! naming of files a procedure creates.

use std::path::Path;

use jetproof_job::{Instance, Job};

pub use crate::marks::looks_like_database;
use crate::{BadInput, bad};

/// The smallest growth step (for small databases).
const MIN_EXTENT_SIZE: u64 = 1 << 20;

/// The step a database of `target_bytes` grows by, while it is filled and in the tests after:
/// ESE's 256 pages ([`jetproof_engine::db::DEFAULT_EXTENSION_PAGES`]; the reference reports'
/// databases grew by multiples of 8 MiB in every test, two of them by no multiple of 16 MiB), but
/// at most a sixteenth of the target (at least `MIN_EXTENT_SIZE`, 1 MiB), so a small database's file ends close to its
/// target.
pub fn extent_bytes(target_bytes: u64, page_size: u64) -> u64 {
    (target_bytes / 16).clamp(
        MIN_EXTENT_SIZE,
        (jetproof_engine::db::DEFAULT_EXTENSION_PAGES * page_size).max(MIN_EXTENT_SIZE),
    )
}

/// Bad input unless every database of the job exists (`exists` says whether a path does: the
/// run's I/O backend, or the file system before a backend is chosen): the one "run `jetproof
/// init` first" check of every test that reads existing databases.
pub fn require_databases(job: &Job, exists: impl Fn(&Path) -> bool) -> Result<(), BadInput> {
    require_instance_databases(&job.instances(), exists)
}

/// [`require_databases`] for instances already taken from the job.
pub fn require_instance_databases(
    instances: &[Instance],
    exists: impl Fn(&Path) -> bool,
) -> Result<(), BadInput> {
    for instance in instances {
        if !exists(&instance.database_path) {
            return Err(bad(
                format!("database of {}", instance.name),
                format!(
                    "{} does not exist; run `jetproof init` first (with the same job and flags)",
                    instance.database_path.display()
                ),
            ));
        }
    }
    Ok(())
}

/// A database that is missing while its flush map is there was deleted or lost, not never made:
/// a run does not initialise over it (that would remove its log, and with it the evidence, and
/// report a pass). Refused (bad input, nothing done), naming what is left (the map and any log
/// files). A `.partial` file beside it is an interrupted `init`, which the run's init finishes.
/// Log files with no map are refused by the run's init, as another database's log.
pub fn refuse_lost_databases(job: &Job) -> Result<(), BadInput> {
    for instance in job.instances() {
        let db = &instance.database_path;
        let mut partial = db.as_os_str().to_owned();
        partial.push(crate::marks::PARTIAL_SUFFIX);
        if db.symlink_metadata().is_ok() || Path::new(&partial).exists() {
            continue;
        }
        let mut left = Vec::new();
        let map = jetproof_engine::flush_map_path(db);
        if map.symlink_metadata().is_err() {
            // Without its flush map nothing says a log in the directory was this database's:
            // the run's init refuses a log of another database itself
            // (`target::check_init_targets`), and one that is not jetproof's.
            continue;
        }
        left.push(format!("its flush map {}", map.display()));
        let log_files = std::fs::read_dir(&instance.log_path)
            .map(|entries| {
                entries
                    .filter_map(|e| e.ok())
                    .filter(|e| {
                        let name = e.file_name();
                        let name = name.to_string_lossy();
                        name == "checkpoint.jpchk"
                            || (name.starts_with('E') && name.ends_with(".jplog"))
                    })
                    .count()
            })
            .unwrap_or(0);
        if log_files > 0 {
            left.push(format!(
                "{log_files} log file(s) in {}",
                instance.log_path.display()
            ));
        }
        if !left.is_empty() {
            return Err(bad(
                format!("database of {}", instance.name),
                format!(
                    "{} is missing, but {} are there: the database was deleted or lost, not \
                     never made, and a run does not initialise over it; restore it, or start \
                     afresh with `jetproof init` (which removes jetproof's own files left there)",
                    db.display(),
                    left.join(" and ")
                ),
            ));
        }
    }
    Ok(())
}

/// What a database's two header copies (pages 0 and 1) show beyond the header they give: a copy
/// that is damaged (one flipped bit, beyond correction, another page's bytes), or copy 0 older
/// than copy 1. The header is always written copy 0, sync, copy 1, sync, so a crash leaves copy
/// 1 behind copy 0 or a torn copy, never copy 0 whole and behind: only a lost write does that.
/// `DbHeader::read` takes the good copy with the higher sequence and says nothing of the other;
/// a run rewrites both copies when it marks the database dirty, so without this the damage would
/// be repaired in silence. Empty when both copies are whole and copy 0 is not behind, or when
/// the header cannot be read at all (the callers report that themselves).
pub fn header_copy_findings(
    backend: &dyn jetproof_io::IoBackend,
    path: &std::path::Path,
) -> Vec<String> {
    let copies = header_copies(backend, path);
    copies.damaged.into_iter().chain(copies.behind).collect()
}

/// [`header_copy_findings`], kept apart: the damaged copies (which a page-by-page check finds
/// on its own) and copy 0 behind copy 1 (which only this comparison finds).
#[derive(Debug, Default)]
pub struct HeaderCopies {
    pub damaged: Vec<String>,
    pub behind: Option<String>,
}

/// See [`header_copy_findings`].
pub fn header_copies(backend: &dyn jetproof_io::IoBackend, path: &std::path::Path) -> HeaderCopies {
    use jetproof_engine::checksum::{self, PageCheck};
    let Ok(file) = backend.open(path, &jetproof_io::OpenOptions::read_only().buffered()) else {
        return HeaderCopies::default();
    };
    let Ok(header) = jetproof_engine::DbHeader::read(file.as_ref()) else {
        return HeaderCopies::default();
    };
    let page_size = header.page_size as usize;
    let mut pages = jetproof_io::AlignedBuf::zeroed(2 * page_size);
    if file
        .read_at(&mut pages, 0, jetproof_io::IoClass::DbRead)
        .is_err()
    {
        return HeaderCopies::default();
    }
    let mut copies = HeaderCopies::default();
    let mut sequences = [None, None];
    for (number, page) in pages.chunks_exact(page_size).enumerate() {
        let what = match checksum::verify(page, number as u32) {
            PageCheck::Good => {
                sequences[number] = jetproof_io::bytes::u64_at(page, 160);
                continue;
            }
            PageCheck::Correctable { bit } => format!("has one flipped bit (bit {bit})"),
            PageCheck::WrongPageNumber { found } => {
                format!("holds page {found} (a wrong page-number page: misdirected write)")
            }
            PageCheck::Bad => "is damaged beyond correction".to_string(),
        };
        copies.damaged.push(format!(
            "{}: database header copy {number} (page {number}) {what}; the other copy was used",
            path.display()
        ));
    }
    if let [Some(first), Some(second)] = sequences
        && first < second
    {
        copies.behind = Some(format!(
            "{}: database header copy 0 (page 0) is older than copy 1 (sequence {first} < \
             {second}): copy 0 is always written first, so the storage lost a write of it (a \
             lost write); copy 1 was used",
            path.display()
        ));
    }
    copies
}

/// Bytes past the last page a database's header counts that an unfinished growth cannot leave
/// (formatted or zeroed pages, at most one extent): appended to the file by something else. A
/// message naming the file and the count, or `None` (nothing appended, or the header cannot be
/// read: the callers report that themselves).
pub fn appended_bytes(
    backend: &dyn jetproof_io::IoBackend,
    path: &std::path::Path,
) -> Option<String> {
    let file = backend
        .open(path, &jetproof_io::OpenOptions::read_only().buffered())
        .ok()?;
    let header = jetproof_engine::DbHeader::read(file.as_ref()).ok()?;
    let trailing = file.size().ok()?.saturating_sub(header.file_size_bytes());
    let growth = u64::from(header.extent_pages).max(1) * u64::from(header.page_size);
    let leftover = growth_leftover_bytes(file.as_ref(), &header, trailing.min(growth)).ok()?;
    let appended = trailing - leftover;
    (appended > 0).then(|| {
        format!(
            "{}: {appended} bytes past the last page the header counts that an unfinished \
             growth cannot leave: bytes were appended to the file",
            path.display()
        )
    })
}

/// How many of the first `bytes` past the header's last page are what an unfinished growth
/// leaves: whole pages, each formatted (a sealed page at its own position) or still zeros (a
/// format write the crash cut). The rest of the trailing bytes were appended by something else.
pub fn growth_leftover_bytes(
    file: &dyn jetproof_io::IoFile,
    header: &jetproof_engine::DbHeader,
    bytes: u64,
) -> Result<u64, jetproof_io::IoError> {
    use jetproof_engine::checksum::{self, PageCheck};
    let page_size = u64::from(header.page_size);
    let whole = bytes / page_size * page_size;
    if whole == 0 {
        return Ok(0);
    }
    let mut buf = jetproof_io::AlignedBuf::zeroed(usize::try_from(whole).unwrap_or(usize::MAX));
    file.read_at(
        &mut buf,
        header.file_size_bytes(),
        jetproof_io::IoClass::ChecksumRead,
    )?;
    let first = header.page_count;
    let leftover = buf
        .chunks_exact(page_size as usize)
        .enumerate()
        .take_while(|(i, page)| {
            let number = u32::try_from(first + *i as u64).unwrap_or(u32::MAX);
            page.iter().all(|&b| b == 0)
                || matches!(checksum::verify(page, number), PageCheck::Good)
        })
        .count() as u64;
    Ok(leftover * page_size)
}
