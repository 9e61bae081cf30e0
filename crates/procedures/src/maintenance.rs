//! Background database maintenance (BDM): while the workload runs, each instance's database is
//! read start to end in large sequential reads (`workload.maintenance_read_size`, 256 KiB as in
//! the seeds) and every page's checksum is verified, as Exchange's 24×7 ESE scan does. When the
//! scan reaches the end it starts again, until the run ends.
//!
//! Why it exists: it is part of the load Jetstress puts on the storage (the seeds show ~7 reads/s
//! of ~256 KiB per instance, a separate I/O class that does not count as transactional IOPS), and
//! it is the run's own check that the storage returns what was written.
//!
//! Invariants:
//!
//! * Reads go through the instance's metered file with [`IoClass::BdmRead`], so they appear in
//!   that instance's `bdm_read` figures and never in `db_read`.
//! * The scan is paced to a byte rate ([`BYTES_PER_SEC`]: 7 reads/s of 256 KiB ≈ 1.8 MB/s per
//!   instance); with another read size the byte rate stays and the read rate changes. A scan that
//!   falls behind (a slow device) resumes the pace from now instead of bursting to catch up.
//! * A page can be read while the cache is writing it (a torn, in-flight page). A page that fails
//!   verification is therefore re-read alone after a pause ([`RECHECK_PAUSES`]) and reported only
//!   if every re-read fails too. The cache writes a whole page in one write and seals it first, so
//!   a page that stays damaged across pauses of 20 ms and 200 ms is damaged on the storage.
//! * Damage is reported (file, page number, kind), never repaired: nothing here writes.
//! * Lost writes are found with the database's flush map: the count of each page's last
//!   completed write is read *before* the read is issued, so a page whose write completes during
//!   the read can only look newer (ignored), never older. A page older than that count lost a
//!   write; it is re-read like damage before being reported.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use std::sync::Arc;

use jetproof_engine::checksum::{self, PageCheck};
use jetproof_engine::flushmap::{Compare, FlushMap, compare, page_write_count};
use jetproof_io::{AlignedBuf, IoClass, IoError, IoFile};

/// The scan's pace per instance, in bytes per second: the seeds' ~7 maintenance reads/s of
/// 256 KiB (Infortrend ESRP: 6.6–8.5 reads/s, 261,900 average bytes).
pub const BYTES_PER_SEC: f64 = 7.0 * 262_144.0;

/// Pauses before each re-read of a page that failed verification (torn in-flight page check).
pub const RECHECK_PAUSES: [Duration; 2] = [Duration::from_millis(20), Duration::from_millis(200)];

/// Longest single sleep, so that the end of the run is noticed promptly.
const POLL: Duration = Duration::from_millis(50);

pub use jetproof_results::sections::{
    MaintenanceDamage as Damage, MaintenanceDamagedPage as DamagedPage,
};

/// How one instance's scan is run.
#[derive(Clone, Debug)]
pub struct ScanConfig {
    /// Bytes per read (a multiple of the page size).
    pub read_size: usize,
    pub page_size: usize,
    /// Pace in bytes per second (0 or less: unpaced, for tests).
    pub bytes_per_sec: f64,
    /// The database's flush map (lost-write detection), if checked.
    pub flush_map: Option<Arc<FlushMap>>,
}

/// What one instance's scan has done so far; shared with the run, which reads it at the end.
#[derive(Debug, Default)]
pub struct ScanState {
    /// Complete passes over the file.
    pub passes: AtomicU64,
    pub pages_verified: AtomicU64,
    /// Pages that failed once and were good when re-read (read while the cache wrote them).
    pub pages_rechecked_good: AtomicU64,
    damaged: Mutex<BTreeMap<u64, DamagedPage>>,
}

impl ScanState {
    /// Damaged pages found, in page order, each once however many passes saw it.
    pub fn damaged(&self) -> Vec<DamagedPage> {
        self.damaged
            .lock()
            .map(|d| d.values().cloned().collect())
            .unwrap_or_default()
    }

    /// Records a damaged page; true the first time this page is seen.
    fn record(&self, page: DamagedPage) -> bool {
        match self.damaged.lock() {
            Ok(mut d) => d.insert(page.page, page).is_none(),
            Err(_) => false,
        }
    }
}

/// Scans `file` start to end, again and again, until `stop` says so. `page_count` gives the
/// database's current size in pages (it can grow during the run). `on_damage` is told of each
/// damaged page the first time it is found, and `on_pass` of each complete pass (pages, seconds).
/// Returns the first I/O error (the caller stops the instance).
pub fn scan(
    file: &dyn IoFile,
    config: &ScanConfig,
    page_count: &dyn Fn() -> u64,
    state: &ScanState,
    stop: &dyn Fn() -> bool,
    on_damage: &dyn Fn(&DamagedPage),
    on_pass: &dyn Fn(u64, f64),
) -> Result<(), IoError> {
    let page_size = config.page_size.max(1);
    let read_size = (config.read_size / page_size).max(1) * page_size;
    let mut buffer = AlignedBuf::zeroed(read_size);
    let mut single = AlignedBuf::zeroed(page_size);
    let gap = (config.bytes_per_sec > 0.0)
        .then(|| Duration::from_secs_f64(read_size as f64 / config.bytes_per_sec));
    let mut next_read = Instant::now();
    while !stop() {
        let pass_started = Instant::now();
        let total = page_count().saturating_mul(page_size as u64);
        let mut offset = 0u64;
        while offset < total {
            if let Some(gap) = gap {
                if !wait_until(next_read, stop) {
                    return Ok(());
                }
                let now = Instant::now();
                // Behind by more than one read: resume the pace from now, without a burst.
                next_read = if now > next_read + gap {
                    now + gap
                } else {
                    next_read + gap
                };
            } else if stop() {
                return Ok(());
            }
            let length = (total - offset).min(read_size as u64) as usize;
            let chunk = &mut buffer[..length];
            let first_page = offset / page_size as u64;
            let expected: Vec<Option<u16>> = (0..length / page_size)
                .map(|index| expected_count(config, first_page + index as u64))
                .collect();
            file.read_at(chunk, offset, IoClass::BdmRead)?;
            for (index, page) in chunk.chunks_exact(page_size).enumerate() {
                let number = first_page + index as u64;
                state.pages_verified.fetch_add(1, Ordering::Relaxed);
                let Some(damage) = damage_of(page, number, expected.get(index).copied().flatten())
                else {
                    continue;
                };
                match recheck(file, config, &mut single, number, damage, stop)? {
                    None => {
                        state.pages_rechecked_good.fetch_add(1, Ordering::Relaxed);
                    }
                    Some(damage) => {
                        let found = DamagedPage {
                            file: file.path().to_path_buf(),
                            page: number,
                            damage,
                        };
                        if state.record(found.clone()) {
                            on_damage(&found);
                        }
                    }
                }
            }
            offset += length as u64;
        }
        state.passes.fetch_add(1, Ordering::Relaxed);
        on_pass(
            total / page_size as u64,
            pass_started.elapsed().as_secs_f64(),
        );
        if total == 0 && !wait_until(Instant::now() + POLL, stop) {
            return Ok(());
        }
    }
    Ok(())
}

/// The flush map's count of page `number`'s last completed write, if known.
fn expected_count(config: &ScanConfig, number: u64) -> Option<u16> {
    let map = config.flush_map.as_ref()?;
    map.expected(u32::try_from(number).ok()?)
}

/// The damage of a page read from position `number`, or None when it is good. `expected_count`:
/// the count of the page's last completed write before the read was issued.
fn damage_of(page: &[u8], number: u64, expected_count: Option<u16>) -> Option<Damage> {
    // Page numbers beyond u32 cannot be a page's own number: such a page is at the wrong place.
    let expected = u32::try_from(number).unwrap_or(u32::MAX);
    match checksum::verify(page, expected) {
        PageCheck::Good => {
            let expected = expected_count?;
            let found = page_write_count(page)?;
            match compare(found, expected) {
                Compare::Behind(_) => Some(Damage::LostWrite { expected, found }),
                Compare::Equal | Compare::Ahead(_) => None,
            }
        }
        PageCheck::Correctable { bit } => Some(Damage::Correctable { bit }),
        PageCheck::WrongPageNumber { found } => Some(Damage::WrongPageNumber { found }),
        PageCheck::Bad => Some(Damage::Bad),
    }
}

/// Re-reads a page that failed verification after each pause; None as soon as it reads good
/// (it was read mid-write), else the damage of the last read. A stop during the pauses keeps the
/// first finding: the page was not seen good again.
fn recheck(
    file: &dyn IoFile,
    config: &ScanConfig,
    buffer: &mut AlignedBuf,
    number: u64,
    first: Damage,
    stop: &dyn Fn() -> bool,
) -> Result<Option<Damage>, IoError> {
    let page_size = buffer.len() as u64;
    let mut damage = first;
    for pause in RECHECK_PAUSES {
        if !wait_until(Instant::now() + pause, stop) {
            break;
        }
        let expected = expected_count(config, number);
        file.read_at(&mut buffer[..], number * page_size, IoClass::BdmRead)?;
        match damage_of(&buffer[..], number, expected) {
            None => return Ok(None),
            Some(again) => damage = again,
        }
    }
    Ok(Some(damage))
}

/// Sleeps until `when`, polling `stop`; false if stopped first.
fn wait_until(when: Instant, stop: &dyn Fn() -> bool) -> bool {
    loop {
        if stop() {
            return false;
        }
        let now = Instant::now();
        if now >= when {
            return true;
        }
        std::thread::sleep((when - now).min(POLL));
    }
}

/// The test log's line describing the scan, in Jetstress's manner.
pub fn describe(read_size_bytes: u64, instances: usize) -> String {
    let reads_per_sec = BYTES_PER_SEC / read_size_bytes.max(1) as f64;
    format!(
        "Background database maintenance: on, {} KiB reads, paced at {:.1} reads/s ({:.2} MB/s) per instance ({} instances), verifying every page's checksum; damaged pages fail the test.",
        read_size_bytes / 1024,
        reads_per_sec,
        BYTES_PER_SEC / 1e6,
        instances
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use jetproof_io::IoBackend;
    use jetproof_io::OpenOptions;
    use jetproof_io::meter::{InstanceStats, MeteredFile};
    use std::path::Path;
    use std::sync::Arc;
    use std::sync::atomic::AtomicBool;

    const PAGE: usize = 8192;

    /// Writes a file of `pages` sealed, numbered pages.
    fn sealed_file(path: &Path, pages: u64) {
        let mut data = vec![0u8; pages as usize * PAGE];
        for (number, page) in data.chunks_exact_mut(PAGE).enumerate() {
            page[32..36].copy_from_slice(&(number as u32).to_le_bytes());
            checksum::seal(page);
        }
        std::fs::write(path, data).expect("write file");
    }

    fn open(path: &Path, stats: &Arc<InstanceStats>) -> Arc<dyn IoFile> {
        let backend = jetproof_io::std_backend::StdBackend::new();
        let file = backend
            .open(path, &OpenOptions::read_only().with_direct(false))
            .expect("open");
        MeteredFile::wrap(file, stats.clone())
    }

    fn config() -> ScanConfig {
        ScanConfig {
            read_size: 262_144,
            page_size: PAGE,
            bytes_per_sec: 0.0,
            flush_map: None,
        }
    }

    /// Runs one full pass and stops.
    fn one_pass(file: &dyn IoFile, pages: u64, state: &ScanState) -> Vec<DamagedPage> {
        let found = Mutex::new(Vec::new());
        scan(
            file,
            &config(),
            &|| pages,
            state,
            &|| state.passes.load(Ordering::Relaxed) >= 1,
            &|d| found.lock().expect("lock").push(d.clone()),
            &|_, _| {},
        )
        .expect("scan");
        found.into_inner().expect("lock")
    }

    #[test]
    fn a_clean_file_is_read_in_full_reads_and_every_page_verified() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("db");
        sealed_file(&path, 100);
        let stats = InstanceStats::new("i");
        let file = open(&path, &stats);
        let state = ScanState::default();
        assert!(one_pass(file.as_ref(), 100, &state).is_empty());
        assert_eq!(state.pages_verified.load(Ordering::Relaxed), 100);
        let bdm = stats.class(IoClass::BdmRead);
        // 100 pages of 8 KiB = 3 reads of 256 KiB and one of 4 pages.
        assert_eq!(bdm.count(), 4);
        assert_eq!(bdm.bytes(), 100 * PAGE as u64);
        assert_eq!(stats.class(IoClass::DbRead).count(), 0);
    }

    #[test]
    fn damage_is_found_with_its_page_and_kind() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("db");
        sealed_file(&path, 64);
        let mut data = std::fs::read(&path).expect("read");
        // Page 10: one flipped bit. Page 40: a whole byte. Page 50: a copy of page 3.
        data[10 * PAGE + 4000] ^= 0x04;
        data[40 * PAGE + 5000] ^= 0xFF;
        let copy = data[3 * PAGE..4 * PAGE].to_vec();
        data[50 * PAGE..51 * PAGE].copy_from_slice(&copy);
        std::fs::write(&path, data).expect("write");
        let stats = InstanceStats::new("i");
        let file = open(&path, &stats);
        let state = ScanState::default();
        let found = one_pass(file.as_ref(), 64, &state);
        let pages: Vec<(u64, Damage)> = found.iter().map(|d| (d.page, d.damage.clone())).collect();
        assert_eq!(
            pages,
            vec![
                (10, Damage::Correctable { bit: 4000 * 8 + 2 }),
                (40, Damage::Bad),
                (50, Damage::WrongPageNumber { found: 3 }),
            ]
        );
        assert_eq!(state.damaged(), found);
        assert!(
            found[1].to_string().contains("page 40: bad page"),
            "{}",
            found[1]
        );
    }

    #[test]
    fn a_page_torn_in_flight_is_not_reported() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("db");
        sealed_file(&path, 32);
        let good = std::fs::read(&path).expect("read");
        let mut torn = good.clone();
        torn[20 * PAGE + 100] ^= 0xFF;
        std::fs::write(&path, &torn).expect("write");
        let stats = InstanceStats::new("i");
        let file = open(&path, &stats);
        let state = ScanState::default();
        let repaired = AtomicBool::new(false);
        // The "cache" finishes its write right after the scan first reads the damaged page: the
        // first BDM read is the whole file (32 pages = one 256 KiB read). The write is made in
        // the scan's own thread, from `stop`, which the scan polls during the recheck's pause,
        // so it lands after the first read and before the re-read whatever the machine's load
        // (a writer thread polling for the read was late once on a loaded machine), and in
        // place: only the page, never a truncated file.
        let found = Mutex::new(Vec::new());
        scan(
            file.as_ref(),
            &config(),
            &|| 32,
            &state,
            &|| {
                if stats.class(IoClass::BdmRead).count() >= 1 && !repaired.load(Ordering::Relaxed) {
                    use std::os::unix::fs::FileExt as _;
                    let page = 20 * PAGE;
                    std::fs::OpenOptions::new()
                        .write(true)
                        .open(&path)
                        .and_then(|f| f.write_all_at(&good[page..page + PAGE], page as u64))
                        .expect("repair");
                    repaired.store(true, Ordering::Relaxed);
                }
                state.passes.load(Ordering::Relaxed) >= 1
            },
            &|d| found.lock().expect("lock").push(d.clone()),
            &|_, _| {},
        )
        .expect("scan");
        let found = found.into_inner().expect("lock");
        assert!(found.is_empty(), "{found:?}");
        assert!(repaired.load(Ordering::Relaxed));
        assert_eq!(state.pages_rechecked_good.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn the_pace_holds_the_byte_rate() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("db");
        sealed_file(&path, 64);
        let stats = InstanceStats::new("i");
        let file = open(&path, &stats);
        let state = ScanState::default();
        let started = Instant::now();
        // 64 KiB reads at 640 KiB/s: 10 reads/s; stop after 0.5 s.
        let config = ScanConfig {
            read_size: 65_536,
            page_size: PAGE,
            bytes_per_sec: 655_360.0,
            flush_map: None,
        };
        scan(
            file.as_ref(),
            &config,
            &|| 64,
            &state,
            &|| started.elapsed() >= Duration::from_millis(500),
            &|_| {},
            &|_, _| {},
        )
        .expect("scan");
        let reads = stats.class(IoClass::BdmRead).count();
        assert!((4..=7).contains(&reads), "{reads} reads in 0.5 s at 10/s");
    }
}
