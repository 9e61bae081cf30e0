//! The crash harness of issue 3: seeded runs of random transactions (several operations each,
//! durable and lazy commits, some rolled back) through an `Instance` on the fault backend, cut at
//! a random point (every I/O fails with EIO after a random number of operations, as a dying
//! machine's would), then a crash of a random kind (only synced data survives; or a random
//! subset of the unsynced writes too; or the last unsynced write of each file torn), then
//! `recover`, and a check against a model:
//! * every durably committed transaction is present and nothing uncommitted is visible: the
//!   recovered content is exactly the model after some prefix of the committed transactions,
//!   at least up to the last commit that was confirmed durable (later lazy commits may or may
//!   not have reached the log);
//! * the tree's invariants hold, no record is left marked deleted, and every page's checksum
//!   verifies.
//!
//! One case in five (when the log is not damaged) also loses database writes after the crash:
//! one to three pages are put back as an older copy the run had written (valid checksums, an
//! older write count), as a storage that acknowledged a write and later returned the page as it
//! was. Every such loss must be reported as a lost write naming a page put back (by `recover`,
//! by the first read after it, or by a checksum of every page against the flush map), or be
//! harmless (the recovered content is still exactly a committed prefix: the lost write was one
//! the replay writes again); a lost write reported for a page nobody put back is a false alarm
//! and fails the seed, in every case.
//!
//! Write-back (issue 22): each seed runs at a write-back depth of 1, 2, 4, 8 or 32 writes in
//! flight (`JETPROOF_WRITE_BACK_DEPTH` forces one). The fault backend completes queued writes in
//! a random order, leaves those the dying machine's EIO met in flight, and at the crash keeps,
//! drops, tears or reorders every write still in flight; a write submitted over a range still in
//! flight (two writes of one page at once) fails the seed.
//!
//! CI runs `JETPROOF_CRASH_SEEDS` seeds (default 24) from a time-based first seed; the long mode
//! runs thousands (`docs/log.md`, "Recovery": `JETPROOF_CRASH_SEEDS=5000 cargo nextest run -p
//! jetproof-instance --release --profile long -E 'test(crash_harness)'`). A failing case prints its seed; rerun
//! it alone with `JETPROOF_SEED=<seed> JETPROOF_CRASH_SEEDS=1`, then add it to `REGRESSIONS`.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use std::collections::BTreeMap;
use std::path::Path;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use jetproof_engine::db::{FlushMapStatus, inspect_flush_map};
use jetproof_engine::flushmap::ReadCheck;
use jetproof_engine::{DbHeader, EngineError};
use jetproof_instance::{Instance, InstanceError, InstanceOptions, recover};
use jetproof_io::fault::{CrashMode, FaultBackend, FaultConfig, FaultEvent};
use jetproof_io::{IoBackend, IoClass, OpenOptions};
use jetproof_log::format::DATA_START;
use jetproof_log::{LogError, Lsn, log_file_path};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const DB: &str = "/crash/db.jpdb";
const LOGS: &str = "/crash/logs";
mod common;

const KEYS: u64 = 200;

/// Seeds that once failed, run on every CI run (timing decides whether a seed reproduces, so a
/// regression seed passing is weaker evidence than its failing was).
/// 1795316968780921813, 1795316968780924577: a rolled-back transaction's inserts stayed after
/// recovery; the checkpoint had passed its undo records before its restores were durable.
const REGRESSIONS: &[u64] = &[1_795_316_968_780_921_813, 1_795_316_968_780_924_577];

/// A value as the model keeps it: `len` copies of `byte` (cheap to clone per commit).
type Value = (u8, usize);
type Model = BTreeMap<u64, Value>;

fn seed_count() -> u64 {
    std::env::var("JETPROOF_CRASH_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(24)
}

fn options() -> InstanceOptions {
    InstanceOptions {
        log_buffer_size_bytes: 16 << 10,
        checkpoint_depth_bytes: 64 << 10,
        keep_files: false,
        ..common::small_options(512, 12, 20)
    }
}

fn key(k: u64) -> [u8; 8] {
    k.to_be_bytes()
}

/// What a run promised: the model after each commit that was (or may have been) appended, and
/// how many of them are certainly durable.
struct Promise {
    /// `snapshots[0]` is the content before the first transaction.
    snapshots: Vec<Model>,
    /// `snapshots[..=durable]` are certainly in the log.
    durable: usize,
    /// `commits[k]`: where the commit record that made `snapshots[k + 1]` was appended.
    commits: Vec<Lsn>,
}

/// Damage done to the newest log generation after the crash, as a person or a failing device
/// could (issue 15): never something a crash leaves.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Damage {
    None,
    /// The newest generation file removed.
    Deleted,
    /// Cut to this many bytes (inside its header block, or mid-file).
    Truncated(u64),
    /// Zeroed from this offset to its end, its size kept (an acknowledged write the device did
    /// not keep): the log alone cannot tell this from a clean end.
    ZeroedFrom(u64),
}

/// How often each outcome of the damage cases happened (printed at the end of the run).
#[derive(Default)]
struct Tally {
    damaged: AtomicU64,
    reported: AtomicU64,
    /// Zeroed tails refused by recovery with another error than a lost log (still dirty).
    zeroed_refused: AtomicU64,
    /// Zeroed tails recovered without a report although they lost durable commits or left
    /// content that is no committed prefix: the documented limit (`docs/design.md`,
    /// "Recovery", row 17), until a record of each page's flushes can show them.
    zeroed_unreported_losses: AtomicU64,
    /// Cases with database writes lost after the crash.
    lost_writes: AtomicU64,
    /// ... reported by `recover` (it refused, naming a page put back).
    lost_writes_by_recover: AtomicU64,
    /// ... reported by the first read after recovery (opening, checking the tree, scanning).
    lost_writes_by_read: AtomicU64,
    /// ... reported by a check of every page against the flush map (as `jetproof checksum`).
    lost_writes_by_checksum: AtomicU64,
    /// ... unreported, content correct, and every page put back written anew by the replay.
    lost_writes_rewritten: AtomicU64,
    /// Database writes still in flight at a crash, by what reached the disk.
    in_flight_whole: AtomicU64,
    in_flight_torn: AtomicU64,
    in_flight_lost: AtomicU64,
    /// Cases whose crash found at least one database write in flight.
    cases_with_writes_in_flight: AtomicU64,
}

static TALLY: Tally = Tally {
    damaged: AtomicU64::new(0),
    reported: AtomicU64::new(0),
    zeroed_refused: AtomicU64::new(0),
    zeroed_unreported_losses: AtomicU64::new(0),
    lost_writes: AtomicU64::new(0),
    lost_writes_by_recover: AtomicU64::new(0),
    lost_writes_by_read: AtomicU64::new(0),
    lost_writes_by_checksum: AtomicU64::new(0),
    lost_writes_rewritten: AtomicU64::new(0),
    in_flight_whole: AtomicU64::new(0),
    in_flight_torn: AtomicU64::new(0),
    in_flight_lost: AtomicU64::new(0),
    cases_with_writes_in_flight: AtomicU64::new(0),
};

/// Why a recovered database failed its checks.
enum Failure {
    /// A read named this page a lost write.
    LostWrite(u32, String),
    /// Anything else.
    Other(String),
}

impl Failure {
    fn of_instance(error: InstanceError, context: &str, doing: &str) -> Failure {
        match error {
            InstanceError::Engine(EngineError::LostWrite { page, .. }) => Failure::LostWrite(
                page,
                format!("{context}: {doing}: page {page} a lost write"),
            ),
            error => Failure::Other(format!("{context}: {doing}: {error}")),
        }
    }

    fn of_engine(error: EngineError, context: &str, doing: &str) -> Failure {
        Failure::of_instance(InstanceError::Engine(error), context, doing)
    }

    fn message(&self) -> &str {
        match self {
            Failure::LostWrite(_, message) | Failure::Other(message) => message,
        }
    }
}

/// The write-back depths the seeds run at.
const DEPTHS: [usize; 5] = [1, 2, 4, 8, 32];

/// The seed's write-back depth: drawn from its own generator, so that the draws of the run
/// (and the regression seeds) are those they were before depths existed.
fn write_back_depth(seed: u64) -> usize {
    std::env::var("JETPROOF_WRITE_BACK_DEPTH")
        .ok()
        .and_then(|d| d.parse().ok())
        .unwrap_or_else(|| {
            DEPTHS
                [StdRng::seed_from_u64(seed ^ 0x5752_4954_4542_4143).random_range(0..DEPTHS.len())]
        })
}

/// One transaction of 1–4 writes, then a lazy or durable commit or a rollback. Errors (the
/// injected EIO) end the run; the model learns only what surely happened.
fn transaction(
    instance: &Instance,
    rng: &mut StdRng,
    max: usize,
    promise: &mut Promise,
) -> Result<(), String> {
    let mut pending = promise.snapshots.last().cloned().unwrap_or_default();
    for _ in 0..rng.random_range(1..=4u32) {
        let k = rng.random_range(0..KEYS);
        let len = if rng.random_bool(0.2) {
            rng.random_range(max / 2..max)
        } else {
            rng.random_range(1..max / 6)
        };
        let byte: u8 = rng.random();
        let value = vec![byte; len];
        match rng.random_range(0..10) {
            0..5 => {
                if instance
                    .insert(&key(k), &value)
                    .map_err(|e| e.to_string())?
                {
                    pending.insert(k, (byte, len));
                }
            }
            5..8 => {
                if instance.delete(&key(k)).map_err(|e| e.to_string())? {
                    pending.remove(&k);
                }
            }
            _ => {
                // Half the replaces keep the value's length, so they are made in place and their
                // prior value is kept in memory rather than logged (ESE's deferred before image).
                let value = match pending.get(&k) {
                    Some(&(_, old)) if rng.random_bool(0.5) => vec![byte; old],
                    _ => value,
                };
                let len = value.len();
                if instance
                    .replace(&key(k), &value)
                    .map_err(|e| e.to_string())?
                {
                    pending.insert(k, (byte, len));
                }
            }
        }
    }
    match rng.random_range(0..10) {
        0 => {
            instance.rollback().map_err(|e| e.to_string())?;
        }
        n => {
            let lazy = n <= 7;
            // Whether or not the commit returns, its record may be in the log.
            promise.snapshots.push(pending);
            let committed = instance.commit(lazy).map_err(|e| e.to_string())?;
            match committed {
                // Nothing changed: no commit record.
                None => {
                    promise.snapshots.pop();
                }
                Some(lsn) => {
                    promise.commits.push(lsn);
                    if !lazy {
                        promise.durable = promise.snapshots.len() - 1;
                    }
                }
            }
        }
    }
    Ok(())
}

fn expand(model: &Model) -> Vec<(Vec<u8>, Vec<u8>)> {
    model
        .iter()
        .map(|(k, (byte, len))| (key(*k).to_vec(), vec![*byte; *len]))
        .collect()
}

/// One seeded case, its log written in sectors of `log_sector` bytes.
fn one_case(seed: u64, log_sector: usize) {
    let mut rng = StdRng::seed_from_u64(seed);
    let backend = FaultBackend::new(FaultConfig {
        seed,
        ..FaultConfig::default()
    });
    let (db, logs) = (Path::new(DB), Path::new(LOGS));
    let depth = write_back_depth(seed);
    let base = options();
    let opts = InstanceOptions {
        log_sector_size_bytes: log_sector,
        database: jetproof_engine::DatabaseOptions {
            write_back_depth: depth,
            ..base.database.clone()
        },
        ..base
    };
    Instance::create(backend.clone(), db, logs, opts.clone())
        .unwrap()
        .close()
        .unwrap();
    let instance = Instance::open(backend.clone(), db, logs, opts.clone()).unwrap();
    let max = instance.database().max_record_bytes() - 8;
    let transactions = rng.random_range(40..160u32);
    // Roughly 10–20 I/O operations per transaction: cut somewhere in the run, or not at all.
    let cut = rng
        .random_bool(0.8)
        .then(|| backend.operations() + rng.random_range(1..u64::from(transactions) * 12));
    backend.configure(|c| c.eio_after_ops = cut);
    let mut promise = Promise {
        snapshots: vec![Model::new()],
        durable: 0,
        commits: Vec::new(),
    };
    let mut stopped = None;
    // The database as it was at one point of the run: where lost writes' older copies come from.
    let older_at = rng.random_range(0..transactions);
    let mut older = Vec::new();
    for n in 0..transactions {
        if n == older_at {
            older = backend.current_contents(db).unwrap_or_default();
        }
        if let Err(e) = transaction(&instance, &mut rng, max, &mut promise) {
            stopped = Some(e);
            break;
        }
        if n % 8 == 7
            && let Err(e) = instance.checkpoint()
        {
            stopped = Some(e.to_string());
            break;
        }
    }
    // A transaction left open at the crash (if the run was not cut already): deletes, and
    // replaces in place (their prior values kept in memory), its pages sometimes written before
    // the crash (the prior values then logged first by the write-ahead gate).
    if stopped.is_none() {
        let model = promise.snapshots.last().cloned().unwrap_or_default();
        for _ in 0..rng.random_range(1..6u32) {
            let k = rng.random_range(0..KEYS);
            let done = match model.get(&k) {
                Some(&(byte, len)) if rng.random_bool(0.5) => {
                    instance.replace(&key(k), &vec![byte.wrapping_add(1); len])
                }
                _ => instance.delete(&key(k)),
            };
            if done.is_err() {
                break;
            }
        }
        if rng.random_bool(0.5) {
            let _ = instance.log().flush();
        }
        if rng.random_bool(0.3) {
            let _ = instance.database().flush();
        }
    }
    // Issue 22: three cases in four that were not cut die in the middle of a flush of every dirty
    // page, after a few of the flush's operations: its writes still in flight then meet the
    // crash (kept, dropped, torn or reordered). Drawn from a generator of its own, so the draws
    // above are those of the seed before write-back had a depth.
    let mut writes_rng = StdRng::seed_from_u64(seed ^ 0x4d49_4446_4c49_4748);
    if stopped.is_none() && writes_rng.random_bool(0.75) {
        let dirty = instance.database().cache_stats().dirty_pages as u64;
        let cut = backend.operations() + writes_rng.random_range(0..dirty + 3);
        backend.configure(|c| c.eio_after_ops = Some(cut));
        let _ = instance.database().flush();
    }
    let drawn = rng.random_range(0..3);
    // `JETPROOF_CRASH_MODE=0|1|2` forces one kind (to tell which one a failing seed needs).
    let mode = match std::env::var("JETPROOF_CRASH_MODE")
        .ok()
        .and_then(|m| m.parse().ok())
        .unwrap_or(drawn)
    {
        0 => CrashMode::SyncedOnly,
        1 => CrashMode::RandomSubset,
        _ => CrashMode::TornLast,
    };
    let crashed = backend.crash(mode);
    crashed.configure(|c| c.eio_after_ops = None);
    // Never two writes of one range in flight at once (one write of a page at a time).
    if let Some(overlap) = backend
        .events()
        .into_iter()
        .find(|e| matches!(e, FaultEvent::OverlappingInFlight { .. }))
    {
        panic!("seed {seed} (write-back depth {depth}): {overlap:?}");
    }
    let mut any_in_flight = false;
    for event in crashed.events() {
        if let FaultEvent::InFlightAtCrash {
            path, kept, len, ..
        } = event
            && path == Path::new(DB)
        {
            any_in_flight = true;
            let tally = if kept == 0 {
                &TALLY.in_flight_lost
            } else if kept == len {
                &TALLY.in_flight_whole
            } else {
                &TALLY.in_flight_torn
            };
            tally.fetch_add(1, Ordering::Relaxed);
        }
    }
    if any_in_flight {
        TALLY
            .cases_with_writes_in_flight
            .fetch_add(1, Ordering::Relaxed);
    }
    let newest_before_crash = instance.log().end_lsn().generation;
    // Every I/O on the old backend fails from the crash on, so dropping (which stops the log's
    // flusher thread and frees the cache) cannot reach the crashed copy.
    drop(instance);

    // One case in four damages the newest log generation the crash left (`JETPROOF_DAMAGE=0..3`
    // forces one kind: none, deleted, truncated, zeroed tail).
    let damage_kind = std::env::var("JETPROOF_DAMAGE")
        .ok()
        .and_then(|d| d.parse().ok())
        .unwrap_or_else(|| {
            if rng.random_bool(0.25) {
                rng.random_range(1..4u32)
            } else {
                0
            }
        });
    let (damage, newest) =
        damage_newest_generation(&crashed, newest_before_crash, damage_kind, &mut rng);
    // One undamaged case in five loses database writes (`JETPROOF_LOST_WRITES=0|1` forces).
    let lose = std::env::var("JETPROOF_LOST_WRITES")
        .ok()
        .and_then(|d| d.parse::<u32>().ok())
        .map_or_else(|| rng.random_bool(0.2), |d| d == 1);
    let lost = if damage == Damage::None && lose {
        lose_database_writes(&crashed, &older, &mut rng)
    } else {
        Vec::new()
    };
    // Durable commits the log still holds: all of them, unless a zeroed tail (which the log
    // cannot tell from its end) removed some; those the check below allows to be missing only
    // when no page showed the loss.
    let durable_kept = match damage {
        Damage::ZeroedFrom(offset) => {
            let zeroed = Lsn::new(newest, offset);
            (0..=promise.durable)
                .rev()
                .find(|&k| k == 0 || promise.commits[k - 1] < zeroed)
                .unwrap_or(0)
        }
        _ => promise.durable,
    };

    let context = format!(
        "seed {seed} ({mode:?}, {log_sector}-byte log sectors, write-back depth {depth}, cut after \
         {cut:?} ops, stopped by {stopped:?}, {} commits, {} durable, damage {damage:?} to \
         generation {newest}, lost writes of pages {lost:?})",
        promise.snapshots.len() - 1,
        promise.durable
    );
    if damage != Damage::None {
        TALLY.damaged.fetch_add(1, Ordering::Relaxed);
    }
    if !lost.is_empty() {
        TALLY.lost_writes.fetch_add(1, Ordering::Relaxed);
    }
    let zeroed = matches!(damage, Damage::ZeroedFrom(_));
    let report = match recover(crashed.clone(), db, logs, &opts) {
        Ok(report) => report,
        Err(InstanceError::Engine(EngineError::LostWrite { page, .. })) => {
            assert!(
                lost.contains(&page),
                "{context}: recovery reported page {page} a lost write, which nobody put back \
                 (a false alarm)"
            );
            assert!(
                common::is_dirty(&crashed, db),
                "{context}: the database was marked clean after a lost write"
            );
            TALLY.lost_writes_by_recover.fetch_add(1, Ordering::Relaxed);
            return;
        }
        // The loss is reported: typed, naming the file, and the database left dirty. A
        // missing generation the replay needs, or a checkpoint past the end of what is left,
        // are reported losses too.
        Err(
            e @ (InstanceError::LostLog(_)
            | InstanceError::Log(
                LogError::MissingGeneration { .. } | LogError::CheckpointBeyondLog { .. },
            )),
        ) if damage != Damage::None => {
            assert!(
                common::is_dirty(&crashed, db),
                "{context}: the database was marked clean after a lost log ({e})"
            );
            TALLY.reported.fetch_add(1, Ordering::Relaxed);
            return;
        }
        Err(e) if zeroed && common::is_dirty(&crashed, db) => {
            // Refused by another recovery error (the zeroed tail left the pages inconsistent
            // with the log): reported, the database still dirty, though not as a lost log.
            TALLY.zeroed_refused.fetch_add(1, Ordering::Relaxed);
            let _ = e;
            return;
        }
        Err(e) => panic!("{context}: recovery failed: {e}"),
    };
    match check_recovered(&crashed, &opts, &promise, durable_kept, &report, &context) {
        Ok(()) => {}
        Err(Failure::LostWrite(page, message)) if !lost.is_empty() => {
            assert!(
                lost.contains(&page),
                "{message}, which nobody put back (a false alarm)"
            );
            TALLY.lost_writes_by_read.fetch_add(1, Ordering::Relaxed);
            return;
        }
        // The documented limit (`docs/design.md`, "Recovery", row 17): a zeroed tail whose lost
        // records no page the replay read shows. Counted and printed, not hidden.
        Err(_) if zeroed => {
            TALLY
                .zeroed_unreported_losses
                .fetch_add(1, Ordering::Relaxed);
            return;
        }
        Err(failure) if !lost.is_empty() => {
            panic!("{}: the lost writes went undetected", failure.message())
        }
        Err(failure) => panic!("{}", failure.message()),
    }
    // Every page against the flush map, as `jetproof checksum` of the clean database: a page
    // behind it is a lost write, and must be one put back; after a clean shutdown no page may be
    // ahead of it.
    let (behind, ahead) = flush_map_check(&crashed, &context);
    assert!(
        ahead.is_empty(),
        "{context}: pages {ahead:?} are newer than the clean database's flush map"
    );
    if let Some(page) = behind.iter().find(|page| !lost.contains(page)) {
        panic!("{context}: page {page} is behind the flush map, though nobody put it back");
    }
    if !behind.is_empty() {
        TALLY
            .lost_writes_by_checksum
            .fetch_add(1, Ordering::Relaxed);
    } else if !lost.is_empty() {
        let now = crashed.current_contents(db).unwrap_or_default();
        let page = common::PAGE;
        let at = |bytes: &[u8], n: u32| {
            bytes
                .get(n as usize * page..(n as usize + 1) * page)
                .map(<[u8]>::to_vec)
        };
        if lost.iter().all(|&n| at(&now, n) != at(&older, n)) {
            TALLY.lost_writes_rewritten.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Puts back, in the crashed database, one to three pages as `older` held them (pages the run
/// wrote again since): lost writes. Returns their numbers (none if no page changed).
fn lose_database_writes(crashed: &Arc<FaultBackend>, older: &[u8], rng: &mut StdRng) -> Vec<u32> {
    let db = Path::new(DB);
    let now = crashed.current_contents(db).unwrap_or_default();
    let page = common::PAGE;
    let candidates: Vec<usize> = (2..older.len().min(now.len()) / page)
        .filter(|&n| {
            let old = &older[n * page..(n + 1) * page];
            old.iter().any(|&b| b != 0) && old != &now[n * page..(n + 1) * page]
        })
        .collect();
    let mut lost = Vec::new();
    let count = rng.random_range(1..=3usize).min(candidates.len());
    let file = crashed.open(db, &OpenOptions::read_write()).unwrap();
    while lost.len() < count {
        let n = candidates[rng.random_range(0..candidates.len())];
        if lost.contains(&(n as u32)) {
            continue;
        }
        file.write_at(
            &older[n * page..(n + 1) * page],
            (n * page) as u64,
            IoClass::DbWrite,
        )
        .unwrap();
        lost.push(n as u32);
    }
    file.sync_data(IoClass::DbWrite).unwrap();
    lost
}

/// Every page of the (clean) database checked against its flush map: the pages behind it (lost
/// writes) and those ahead of it.
fn flush_map_check(crashed: &Arc<FaultBackend>, context: &str) -> (Vec<u32>, Vec<u32>) {
    let db = Path::new(DB);
    let file = crashed.open(db, &OpenOptions::read_only()).unwrap();
    let header = DbHeader::read(file.as_ref()).unwrap();
    let map = match inspect_flush_map(crashed.as_ref(), db, &header, false, None).unwrap() {
        FlushMapStatus::Usable { map, load } => {
            assert!(
                load.damaged_map_pages.is_empty(),
                "{context}: flush map pages {:?} damaged",
                load.damaged_map_pages
            );
            map
        }
        other => panic!(
            "{context}: the clean database's flush map is not usable: {}",
            match other {
                FlushMapStatus::Missing => "missing".to_string(),
                FlushMapStatus::Unusable(why) => why,
                FlushMapStatus::Usable { .. } => unreachable!(),
            }
        ),
    };
    let image = crashed.current_contents(db).unwrap();
    let (mut behind, mut ahead) = (Vec::new(), Vec::new());
    for (n, page) in image.chunks_exact(common::PAGE).enumerate().skip(2) {
        match map.check_read(n as u32, page) {
            ReadCheck::Behind { .. } => behind.push(n as u32),
            ReadCheck::Ahead { .. } => ahead.push(n as u32),
            _ => {}
        }
    }
    (behind, ahead)
}

/// The checks after a recovery that succeeded: the instance opens, the tree's invariants hold,
/// no record is left marked deleted, the content is the model after a committed prefix from
/// the `durable_kept`-th commit on, and every page verifies.
fn check_recovered(
    crashed: &Arc<FaultBackend>,
    opts: &InstanceOptions,
    promise: &Promise,
    durable_kept: usize,
    report: &jetproof_instance::RecoveryReport,
    context: &str,
) -> Result<(), Failure> {
    let (db, logs) = (Path::new(DB), Path::new(LOGS));
    let instance = Instance::open(crashed.clone(), db, logs, opts.clone())
        .map_err(|e| Failure::of_instance(e, context, "open after recovery"))?;
    let stats = instance
        .database()
        .check()
        .map_err(|e| Failure::of_engine(e, context, "check"))?;
    // No transaction is open after recovery: a delete's mark was either purged (committed) or
    // cleared (taken back).
    if stats.marked_records != 0 {
        return Err(Failure::Other(format!(
            "{context}: {} records left marked deleted ({report:?})",
            stats.marked_records
        )));
    }
    let found = instance
        .scan(b"", usize::MAX)
        .map_err(|e| Failure::of_instance(e, context, "scan"))?;
    let matches: Vec<usize> = (durable_kept..promise.snapshots.len())
        .filter(|&k| expand(&promise.snapshots[k]) == found)
        .collect();
    if !matches.is_empty() && matches.iter().all(|&k| k < promise.durable) {
        // Durable commits lost with a zeroed tail (`durable_kept` is `durable` otherwise).
        return Err(Failure::Other(format!(
            "{context}: durable commits after {} lost without a report",
            matches[0]
        )));
    }
    if matches.is_empty() {
        // The nearest candidate, and how the content differs from it.
        let found_map: BTreeMap<Vec<u8>, Vec<u8>> = found.iter().cloned().collect();
        let differences = |k: usize| {
            let expected: BTreeMap<Vec<u8>, Vec<u8>> =
                expand(&promise.snapshots[k]).into_iter().collect();
            let mut diff: Vec<String> = Vec::new();
            for (key, value) in &expected {
                match found_map.get(key) {
                    None => diff.push(format!("missing {key:?}")),
                    Some(v) if v != value => diff.push(format!(
                        "{key:?}: {} bytes, expected {}",
                        v.len(),
                        value.len()
                    )),
                    _ => {}
                }
            }
            for key in found_map.keys().filter(|k| !expected.contains_key(*k)) {
                diff.push(format!("unexpected {key:?}"));
            }
            diff
        };
        let nearest = (0..promise.snapshots.len())
            .min_by_key(|&k| differences(k).len())
            .unwrap_or(0);
        return Err(Failure::Other(format!(
            "{context}: the recovered content is no committed prefix from the last durable \
             commit on ({} records found; nearest: after commit {nearest}, differing in {:?}; \
             {report:?})",
            found.len(),
            differences(nearest)
        )));
    }
    instance
        .close()
        .map_err(|e| Failure::of_instance(e, context, "close"))?;
    common::assert_every_page_verifies(crashed, db, context);
    Ok(())
}

/// Damages the newest generation file the crash left (`kind`: 0 none, 1 deleted, 2 truncated,
/// 3 zeroed tail). Returns the damage and that generation.
fn damage_newest_generation(
    backend: &Arc<FaultBackend>,
    newest_before_crash: u64,
    kind: u32,
    rng: &mut StdRng,
) -> (Damage, u64) {
    let logs = Path::new(LOGS);
    // The crash may have lost the newest install: the highest generation whose file is left.
    let Some(newest) = (1..=newest_before_crash + 1)
        .rev()
        .find(|&g| backend.exists(&log_file_path(logs, g)))
    else {
        return (Damage::None, 0);
    };
    let path = log_file_path(logs, newest);
    let size = backend
        .current_contents(&path)
        .map_or(0, |bytes| bytes.len() as u64);
    let damage = match kind {
        0 => return (Damage::None, newest),
        1 => {
            backend.remove(&path).unwrap();
            backend.sync_dir(logs).unwrap();
            return (Damage::Deleted, newest);
        }
        2 => Damage::Truncated(if rng.random_bool(0.2) {
            rng.random_range(0..DATA_START)
        } else {
            rng.random_range(DATA_START..size.max(DATA_START + 1))
        }),
        _ => Damage::ZeroedFrom(rng.random_range(DATA_START..size.max(DATA_START + 1))),
    };
    let file = backend.open(&path, &OpenOptions::read_write()).unwrap();
    match damage {
        Damage::Truncated(to) => file.set_size(to).unwrap(),
        Damage::ZeroedFrom(from) if from < size => {
            let before = backend.current_contents(&path).unwrap_or_default();
            if before
                .get(from as usize..)
                .is_none_or(|tail| tail.iter().all(|&b| b == 0))
            {
                // Nothing written there: no damage.
                return (Damage::None, newest);
            }
            let zeros = vec![0u8; (size - from) as usize];
            file.write_at(&zeros, from, IoClass::LogWrite).unwrap();
        }
        _ => {}
    }
    file.sync_data(IoClass::LogWrite).unwrap();
    (damage, newest)
}

#[test]
fn crash_harness_recovers_exactly_a_committed_prefix() {
    let first = common::seed("crash_harness_recovers_exactly_a_committed_prefix");
    let count = seed_count();
    eprintln!(
        "crash harness: seeds {first}..{} (replay one with JETPROOF_SEED=<seed> \
         JETPROOF_CRASH_SEEDS=1)",
        first.wrapping_add(count)
    );
    for &seed in REGRESSIONS {
        one_case(seed, 4096);
    }
    // Cases are independent: one thread per core, each taking the next seed.
    let next = std::sync::atomic::AtomicU64::new(0);
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get());
    std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| {
                loop {
                    let n = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    if n >= count {
                        break;
                    }
                    // One seed in four writes its log in 512-byte sectors (`log.sector_size`,
                    // as Exchange 2010's logs), the rest in 4 KiB ones.
                    let seed = first.wrapping_add(n);
                    one_case(seed, if seed.is_multiple_of(4) { 512 } else { 4096 });
                }
            });
        }
    });
    let damaged = TALLY.damaged.load(Ordering::Relaxed);
    let reported = TALLY.reported.load(Ordering::Relaxed);
    let refused = TALLY.zeroed_refused.load(Ordering::Relaxed);
    let unreported = TALLY.zeroed_unreported_losses.load(Ordering::Relaxed);
    let lost = TALLY.lost_writes.load(Ordering::Relaxed);
    let by_recover = TALLY.lost_writes_by_recover.load(Ordering::Relaxed);
    let by_read = TALLY.lost_writes_by_read.load(Ordering::Relaxed);
    let by_checksum = TALLY.lost_writes_by_checksum.load(Ordering::Relaxed);
    let rewritten = TALLY.lost_writes_rewritten.load(Ordering::Relaxed);
    eprintln!(
        "crash harness: {count} seeds; {damaged} with the newest generation damaged: {reported} \
         reported as a lost log, {} recovered whole; zeroed tails: {refused} refused by another \
         recovery error, {unreported} lost data no page the replay read showed (the documented \
         limit). Deleted and truncated generations: 0 undetected losses (each would fail its \
         seed)",
        damaged - reported - refused - unreported
    );
    eprintln!(
        "crash harness: {lost} cases lost database writes after the crash: {by_recover} \
         reported by recover, {by_read} by the first read after it, {by_checksum} by the \
         checksum against the flush map, {} harmless (the content still a committed prefix; \
         {rewritten} of them with every page put back written anew by the replay). 0 undetected, 0 false alarms (each would fail its seed)",
        lost - by_recover - by_read - by_checksum
    );
    let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
    eprintln!(
        "crash harness: {} seeds crashed with database writes in flight: {} of those writes \
         reached the disk whole, {} torn, {} not at all (completed out of order at every depth \
         above 1; depths {DEPTHS:?})",
        load(&TALLY.cases_with_writes_in_flight),
        load(&TALLY.in_flight_whole),
        load(&TALLY.in_flight_torn),
        load(&TALLY.in_flight_lost)
    );
}
