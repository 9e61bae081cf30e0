//! A fault-injecting, in-memory backend for crash and corruption tests.
//!
//! The model (also in `docs/io.md`):
//! * Each file has a **current** content (what reads see) and a **durable** content (what
//!   survives a crash). A write changes the current content and is remembered as *pending*;
//!   `sync_data` makes the current content durable and forgets the pending writes. A write to
//!   a file opened write-through ([`crate::OpenOptions::dsync`]) is durable when it returns:
//!   no crash loses or tears it (other pending writes of the file are not made durable by it).
//!   One that fails with the injected EIO (the power failing while it was in flight) may have
//!   partly reached the disk: it stays pending, so a crash keeps, loses or tears it.
//! * The **namespace** (create, rename, remove) is likewise current vs durable: a change becomes
//!   durable only when `sync_dir` is called on the directory holding the name (as POSIX
//!   requires), unless [`FaultConfig::sync_dir_required`] is off.
//! * [`FaultBackend::crash`] ends the simulated machine: every handle of this backend fails from
//!   then on with [`IoError::Crashed`], and a *new* backend is returned holding what survived,
//!   chosen by [`CrashMode`]: only synced data; synced data plus a seeded random subset of the
//!   pending writes (applied in their original order); everything but a torn last write, of
//!   which only a random prefix of sectors ([`FaultConfig::sector_size`], 512 B or 4 KiB)
//!   reached the disk; every pending write kept whole, lost or torn to any subset of its sectors;
//!   or every pending write cut to the same prefix. [`FaultBackend::crash_copy`] gives the same
//!   outcome without ending the backend, for tests that try several outcomes of one state.
//! * While running, with the probabilities of [`FaultConfig`]: a read may return data with one
//!   bit flipped (transient); a write may store one flipped bit (persistent), land at another
//!   offset (misdirected: the intended place keeps its old data), or be lost (reported as done,
//!   never stored). After [`FaultConfig::eio_after_ops`] operations every I/O fails with an
//!   injected EIO. Every operation can be slowed by [`FaultConfig::added_latency`], every sync
//!   (`sync_data`, a write-through write) by [`FaultConfig::sync_latency`]; with
//!   [`FaultConfig::fail_syncs`] every sync fails (the power failing), its write left pending.
//! * A device whose latency grows with its queue depth, for tests of load sweeps
//!   (`jetproof sweep`): with [`FaultConfig::read_latency_per_queued_read`] each read also takes
//!   that long once for every read in flight when it starts, itself included. N sessions each
//!   blocked in one read at a time then see about N × that latency: the thread count at which a
//!   latency threshold is crossed is known in advance.
//! * Targeted faults for named regression tests: [`FaultBackend::flip_bit`],
//!   [`FaultBackend::zero_range`].
//!
//! Determinism: all random choices come from one RNG seeded by [`FaultConfig::seed`], drawn
//! under the backend's lock in operation order, and the crash outcome from an RNG seeded by the
//! seed and the crash number. A single-threaded sequence of operations with the same seed
//! therefore replays exactly; [`FaultBackend::events`] lists every fault injected, to print with
//! a failing seed.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::writeq::{WriteCompletion, WriteQueue, WriteRequest};
use crate::{IoBackend, IoClass, IoError, IoFile, OpenOptions};

/// What to inject. The default injects nothing: a plain in-memory backend with crash semantics.
#[derive(Clone, Debug, PartialEq)]
pub struct FaultConfig {
    /// Seeds every random choice (see the module header).
    pub seed: u64,
    /// Alignment enforced on offsets, lengths and buffers, like direct I/O (1: none).
    pub logical_block_size: usize,
    /// Granularity of a torn write: 512 or 4096 bytes.
    pub sector_size: usize,
    /// Chance that a read returns one flipped bit (the stored data stays intact).
    pub read_bit_flip_probability: f64,
    /// Chance that a write stores one flipped bit.
    pub write_bit_flip_probability: f64,
    /// Chance that a write lands at another offset.
    pub misdirected_write_probability: f64,
    /// Chance that a write is reported done but never stored.
    pub lost_write_probability: f64,
    /// After this many operations (reads, writes, syncs), every operation fails with EIO.
    pub eio_after_ops: Option<u64>,
    /// Added to every read, write and sync.
    pub added_latency: Duration,
    /// Added to every read (a slow read path whose writes stay fast).
    pub read_latency: Duration,
    /// Added to every sync: `sync_data` and each write to a write-through file (a disk's flush;
    /// makes group commit observable).
    pub sync_latency: Duration,
    /// Every sync (`sync_data`, a write-through write) fails with an injected EIO, as when the
    /// power is failing: a write-through write is stored but stays pending (a crash keeps, loses
    /// or tears it), a `sync_data` makes nothing durable. A crash turns it off (the power is back).
    pub fail_syncs: bool,
    /// Added to a read once for every read in flight when it starts (itself included): latency
    /// that grows with the queue depth (see the module header). Zero: none.
    pub read_latency_per_queued_read: Duration,
    /// Namespace changes survive a crash only after `sync_dir` of their directory.
    pub sync_dir_required: bool,
}

impl Default for FaultConfig {
    fn default() -> Self {
        FaultConfig {
            seed: 0,
            logical_block_size: 1,
            sector_size: 4096,
            read_bit_flip_probability: 0.0,
            write_bit_flip_probability: 0.0,
            misdirected_write_probability: 0.0,
            lost_write_probability: 0.0,
            eio_after_ops: None,
            added_latency: Duration::ZERO,
            read_latency: Duration::ZERO,
            sync_latency: Duration::ZERO,
            fail_syncs: false,
            read_latency_per_queued_read: Duration::ZERO,
            sync_dir_required: true,
        }
    }
}

/// What survives [`FaultBackend::crash`].
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum CrashMode {
    /// Only what was synced (data by `sync_data`, names by `sync_dir`).
    SyncedOnly,
    /// Synced data plus a seeded random subset of the unsynced writes, in their original order.
    RandomSubset,
    /// Every unsynced write except the last one of each file, which is torn: a random strict
    /// prefix of its sectors reached the disk.
    TornLast,
    /// Synced data plus each pending write in order: with `tear_percent` % chance torn to a
    /// seeded random subset of its sectors (any subset, not a prefix: harsher than the 4 KiB
    /// atomicity the log assumes when `sector_size` is 512), else kept whole or lost with even
    /// chance. A write's whole extent counts toward the file's size (the size reached the disk;
    /// bytes not kept read as zeros).
    Scattered { tear_percent: u8 },
    /// Synced data plus the first `bytes` bytes of each pending write, deterministically
    /// (`usize::MAX`: every pending write whole; 0: none of their bytes). A write's whole extent
    /// counts toward the file's size, as with `Scattered`.
    KeepPrefix { bytes: usize },
}

/// One injected fault, for printing with a failing seed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FaultEvent {
    ReadBitFlip {
        path: PathBuf,
        offset: u64,
        bit: u64,
    },
    WriteBitFlip {
        path: PathBuf,
        offset: u64,
        bit: u64,
    },
    MisdirectedWrite {
        path: PathBuf,
        intended: u64,
        landed: u64,
        len: usize,
    },
    LostWrite {
        path: PathBuf,
        offset: u64,
        len: usize,
    },
    Eio {
        path: PathBuf,
        op: &'static str,
        offset: u64,
    },
    TornWrite {
        path: PathBuf,
        offset: u64,
        kept: usize,
        len: usize,
    },
    /// A write submitted to a write queue while another write of an overlapping range of the
    /// same file was still in flight: the order they reach the disk in is undefined, so the
    /// caller must never do this (the crash harness fails on it).
    OverlappingInFlight {
        path: PathBuf,
        offset: u64,
        len: usize,
        other_offset: u64,
        other_len: usize,
    },
    /// A write still in flight at a crash: `kept` of its `len` bytes reached the disk (0: lost;
    /// `len`: whole; between: torn), applied as the `order`-th of the in-flight writes.
    InFlightAtCrash {
        path: PathBuf,
        offset: u64,
        kept: usize,
        len: usize,
        order: usize,
    },
}

#[derive(Clone, Debug)]
enum Pending {
    /// `durable`: written through a write-through (dsync) file, so already on stable storage:
    /// kept whole at a crash, in its place in the order.
    Write {
        offset: u64,
        data: Vec<u8>,
        durable: bool,
    },
    SetSize(u64),
}

/// A write of a write queue, submitted and not completed: not in the current content yet.
#[derive(Clone, Debug)]
struct InFlight {
    id: u64,
    offset: u64,
    data: Vec<u8>,
}

#[derive(Clone, Debug, Default)]
struct Inode {
    current: Vec<u8>,
    durable: Vec<u8>,
    pending: Vec<Pending>,
    /// Writes of a write queue in flight (see [`FaultFile::native_write_queue`]).
    in_flight: Vec<InFlight>,
}

type InodeId = usize;

#[derive(Debug)]
struct State {
    config: FaultConfig,
    rng: StdRng,
    ops: u64,
    inodes: Vec<Inode>,
    names: HashMap<PathBuf, InodeId>,
    durable_names: HashMap<PathBuf, InodeId>,
    events: Vec<FaultEvent>,
    crashes: u64,
    /// Identifies queued writes in flight.
    next_write_id: u64,
}

#[derive(Debug)]
struct Shared {
    state: Mutex<State>,
    crashed: AtomicBool,
    /// Reads between their admission and their return (the queue depth of the latency model).
    reads_in_flight: AtomicU64,
}

/// The fault-injecting backend; see the module header.
#[derive(Debug)]
pub struct FaultBackend {
    shared: Arc<Shared>,
}

fn apply_write(data: &mut Vec<u8>, offset: u64, src: &[u8]) {
    let start = usize::try_from(offset).unwrap_or(usize::MAX);
    let end = start.saturating_add(src.len());
    if data.len() < end {
        data.resize(end, 0);
    }
    data[start..end].copy_from_slice(src);
}

/// Grows `data` to cover `len` bytes at `offset` (zeros); gives the start index.
fn extend_to(data: &mut Vec<u8>, offset: u64, len: usize) -> usize {
    let start = usize::try_from(offset).unwrap_or(usize::MAX);
    let end = start.saturating_add(len);
    if data.len() < end {
        data.resize(end, 0);
    }
    start
}

fn apply(data: &mut Vec<u8>, pending: &Pending) {
    match pending {
        Pending::Write {
            offset, data: src, ..
        } => apply_write(data, *offset, src),
        Pending::SetSize(size) => data.resize(usize::try_from(*size).unwrap_or(usize::MAX), 0),
    }
}

fn not_found(op: &'static str, path: &Path) -> IoError {
    IoError::Path {
        op,
        path: path.to_path_buf(),
        source: std::io::Error::from(std::io::ErrorKind::NotFound),
    }
}

impl FaultBackend {
    pub fn new(config: FaultConfig) -> Arc<FaultBackend> {
        Self::with_state(config, Vec::new(), HashMap::new(), 0)
    }

    fn with_state(
        config: FaultConfig,
        inodes: Vec<Inode>,
        names: HashMap<PathBuf, InodeId>,
        crashes: u64,
    ) -> Arc<FaultBackend> {
        let rng = StdRng::seed_from_u64(config.seed ^ crashes.wrapping_mul(0x9e37_79b9_7f4a_7c15));
        Arc::new(FaultBackend {
            shared: Arc::new(Shared {
                state: Mutex::new(State {
                    config,
                    rng,
                    ops: 0,
                    inodes,
                    durable_names: names.clone(),
                    names,
                    events: Vec::new(),
                    crashes,
                    next_write_id: 0,
                }),
                crashed: AtomicBool::new(false),
                reads_in_flight: AtomicU64::new(0),
            }),
        })
    }

    /// Changes what is injected from now on (e.g. arm faults after a clean setup).
    pub fn configure(&self, change: impl FnOnce(&mut FaultConfig)) {
        change(&mut self.shared.state.lock().config);
    }

    pub fn config(&self) -> FaultConfig {
        self.shared.state.lock().config.clone()
    }

    /// Operations (reads, writes, syncs) seen so far.
    pub fn operations(&self) -> u64 {
        self.shared.state.lock().ops
    }

    /// Every fault injected so far, in order.
    pub fn events(&self) -> Vec<FaultEvent> {
        self.shared.state.lock().events.clone()
    }

    /// What reads of `path` see now.
    pub fn current_contents(&self, path: &Path) -> Option<Vec<u8>> {
        let state = self.shared.state.lock();
        state
            .names
            .get(path)
            .map(|&id| state.inodes[id].current.clone())
    }

    /// What of `path` would survive a [`CrashMode::SyncedOnly`] crash.
    pub fn durable_contents(&self, path: &Path) -> Option<Vec<u8>> {
        let state = self.shared.state.lock();
        state
            .durable_names
            .get(path)
            .map(|&id| state.inodes[id].durable.clone())
    }

    /// Flips one bit of the stored data (current and durable): a targeted corruption.
    pub fn flip_bit(&self, path: &Path, offset: u64, bit: u8) -> Result<(), IoError> {
        let mut state = self.shared.state.lock();
        let Some(&id) = state.names.get(path) else {
            return Err(not_found("flip bit of", path));
        };
        let index = usize::try_from(offset).unwrap_or(usize::MAX);
        let inode = &mut state.inodes[id];
        for data in [&mut inode.current, &mut inode.durable] {
            if let Some(byte) = data.get_mut(index) {
                *byte ^= 1 << (bit % 8);
            }
        }
        Ok(())
    }

    /// Zeroes `[from, to)` of the stored data (current and durable): lost data on purpose. The
    /// range is clipped to each content's length.
    pub fn zero_range(&self, path: &Path, from: u64, to: u64) -> Result<(), IoError> {
        let mut state = self.shared.state.lock();
        let Some(&id) = state.names.get(path) else {
            return Err(not_found("zero a range of", path));
        };
        let inode = &mut state.inodes[id];
        for data in [&mut inode.current, &mut inode.durable] {
            let end = usize::try_from(to).unwrap_or(usize::MAX).min(data.len());
            let start = usize::try_from(from).unwrap_or(usize::MAX).min(end);
            data[start..end].fill(0);
        }
        Ok(())
    }

    /// Every operation after the next `ops` fails with an injected EIO (sets
    /// [`FaultConfig::eio_after_ops`] relative to the operations seen so far).
    pub fn fail_after(&self, ops: u64) {
        let mut state = self.shared.state.lock();
        state.config.eio_after_ops = Some(state.ops + ops);
    }

    /// Simulates a power loss; see the module header. This backend and its files fail from now
    /// on; the returned backend holds what survived, with fresh fault counters and the same
    /// configuration (but [`FaultConfig::fail_syncs`] off: the power is back).
    pub fn crash(&self, mode: CrashMode) -> Arc<FaultBackend> {
        self.shared.crashed.store(true, Ordering::SeqCst);
        self.survivor(mode)
    }

    /// What [`FaultBackend::crash`] would leave now, without ending this backend: it and its
    /// files keep working (a test can try several outcomes of one state, or look at a running
    /// system's durable state). The same state gives the same outcome.
    pub fn crash_copy(&self, mode: CrashMode) -> Arc<FaultBackend> {
        self.survivor(mode)
    }

    fn survivor(&self, mode: CrashMode) -> Arc<FaultBackend> {
        let mut state = self.shared.state.lock();
        let crashes = state.crashes + 1;
        let mut rng = StdRng::seed_from_u64(
            state.config.seed.rotate_left(17) ^ crashes.wrapping_mul(0xbf58_476d_1ce4_e5b9),
        );
        let sector = state.config.sector_size.max(1);
        let mut inodes = Vec::new();
        let mut names = HashMap::new();
        let mut events = Vec::new();
        // Sorted so that the RNG draws do not depend on hash order.
        let mut durable: Vec<(&PathBuf, &InodeId)> = state.durable_names.iter().collect();
        durable.sort();
        for (path, &id) in durable {
            let inode = &state.inodes[id];
            let mut data = inode.durable.clone();
            match mode {
                CrashMode::SyncedOnly => {}
                CrashMode::RandomSubset => {
                    for p in &inode.pending {
                        let kept = matches!(p, Pending::Write { durable: true, .. });
                        if kept || rng.random_bool(0.5) {
                            apply(&mut data, p);
                        }
                    }
                }
                CrashMode::Scattered { tear_percent } => {
                    for p in &inode.pending {
                        let Pending::Write {
                            offset,
                            data: src,
                            durable: false,
                        } = p
                        else {
                            apply(&mut data, p);
                            continue;
                        };
                        let start = extend_to(&mut data, *offset, src.len());
                        if rng.random_range(0..100u32) < u32::from(tear_percent) {
                            for (index, piece) in src.chunks(sector).enumerate() {
                                if rng.random_bool(0.5) {
                                    let at = start + index * sector;
                                    data[at..at + piece.len()].copy_from_slice(piece);
                                }
                            }
                        } else if rng.random_bool(0.5) {
                            data[start..start + src.len()].copy_from_slice(src);
                        }
                    }
                }
                CrashMode::KeepPrefix { bytes } => {
                    for p in &inode.pending {
                        let Pending::Write {
                            offset,
                            data: src,
                            durable: false,
                        } = p
                        else {
                            apply(&mut data, p);
                            continue;
                        };
                        let start = extend_to(&mut data, *offset, src.len());
                        let kept = bytes.min(src.len());
                        data[start..start + kept].copy_from_slice(&src[..kept]);
                    }
                }
                CrashMode::TornLast => {
                    let last_write = inode
                        .pending
                        .iter()
                        .rposition(|p| matches!(p, Pending::Write { durable: false, .. }));
                    for (i, p) in inode.pending.iter().enumerate() {
                        match (Some(i) == last_write, p) {
                            (
                                true,
                                Pending::Write {
                                    offset, data: src, ..
                                },
                            ) => {
                                let sectors = src.len().div_ceil(sector);
                                let kept_sectors = if sectors > 1 {
                                    rng.random_range(0..sectors)
                                } else {
                                    0
                                };
                                let kept = (kept_sectors * sector).min(src.len());
                                apply_write(&mut data, *offset, &src[..kept]);
                                events.push(FaultEvent::TornWrite {
                                    path: path.clone(),
                                    offset: *offset,
                                    kept,
                                    len: src.len(),
                                });
                            }
                            _ => apply(&mut data, p),
                        }
                    }
                }
            }
            // Writes still in flight reach the disk after every completed one, in any order,
            // whole, torn or not at all (only a crash that keeps unsynced data keeps any).
            if mode != CrashMode::SyncedOnly && !inode.in_flight.is_empty() {
                let mut order: Vec<usize> = (0..inode.in_flight.len()).collect();
                for i in (1..order.len()).rev() {
                    order.swap(i, rng.random_range(0..=i));
                }
                for (n, &i) in order.iter().enumerate() {
                    let write = &inode.in_flight[i];
                    let len = write.data.len();
                    let kept = if let CrashMode::KeepPrefix { bytes } = mode {
                        bytes.min(len)
                    } else {
                        match rng.random_range(0..3u32) {
                            0 => 0,
                            1 => len,
                            _ if mode == CrashMode::TornLast => {
                                let sectors = len.div_ceil(sector);
                                (rng.random_range(0..sectors.max(1)) * sector).min(len)
                            }
                            _ => {
                                if rng.random_bool(0.5) {
                                    len
                                } else {
                                    0
                                }
                            }
                        }
                    };
                    apply_write(&mut data, write.offset, &write.data[..kept]);
                    events.push(FaultEvent::InFlightAtCrash {
                        path: path.clone(),
                        offset: write.offset,
                        kept,
                        len,
                        order: n,
                    });
                }
            }
            names.insert(path.clone(), inodes.len());
            inodes.push(Inode {
                current: data.clone(),
                durable: data,
                pending: Vec::new(),
                in_flight: Vec::new(),
            });
        }
        state.events.extend(events.iter().cloned());
        let config = FaultConfig {
            fail_syncs: false,
            ..state.config.clone()
        };
        let next = Self::with_state(config, inodes, names, crashes);
        next.shared.state.lock().events = events;
        next
    }
}

/// Outcome of the per-operation fault checks.
struct Admitted {
    latency: Duration,
    /// Counted in `Shared::reads_in_flight` until it returns.
    queued_read: bool,
}

impl Shared {
    fn admit(
        &self,
        state: &mut State,
        op: &'static str,
        path: &Path,
        offset: u64,
    ) -> Result<Admitted, IoError> {
        if self.crashed.load(Ordering::SeqCst) {
            return Err(IoError::Crashed {
                path: path.to_path_buf(),
            });
        }
        state.ops += 1;
        if let Some(limit) = state.config.eio_after_ops
            && state.ops > limit
        {
            state.events.push(FaultEvent::Eio {
                path: path.to_path_buf(),
                op,
                offset,
            });
            return Err(IoError::Injected {
                op,
                path: path.to_path_buf(),
                offset,
                what: format!("EIO (every operation after the first {limit} fails)"),
            });
        }
        Ok(Admitted {
            latency: state.config.added_latency,
            queued_read: false,
        })
    }
}

impl IoBackend for FaultBackend {
    fn name(&self) -> &'static str {
        "fault"
    }

    fn open(&self, path: &Path, options: &OpenOptions) -> Result<Arc<dyn IoFile>, IoError> {
        if self.shared.crashed.load(Ordering::SeqCst) {
            return Err(IoError::Crashed {
                path: path.to_path_buf(),
            });
        }
        let mut state = self.shared.state.lock();
        let id = match state.names.get(path) {
            Some(_) if options.create_new => return Err(crate::mem::already_exists(path)),
            Some(&id) => id,
            None if options.create || options.create_new => {
                let id = state.inodes.len();
                state.inodes.push(Inode::default());
                state.names.insert(path.to_path_buf(), id);
                if !state.config.sync_dir_required {
                    state.durable_names.insert(path.to_path_buf(), id);
                }
                id
            }
            None => return Err(not_found("open", path)),
        };
        let block_size = if options.direct {
            state.config.logical_block_size.max(1)
        } else {
            1
        };
        Ok(Arc::new(FaultFile {
            shared: self.shared.clone(),
            path: path.to_path_buf(),
            inode: id,
            block_size,
            writable: options.write,
            dsync: options.dsync,
        }))
    }

    fn exists(&self, path: &Path) -> bool {
        self.shared.state.lock().names.contains_key(path)
    }

    fn remove(&self, path: &Path) -> Result<(), IoError> {
        let mut state = self.shared.state.lock();
        if state.names.remove(path).is_none() {
            return Err(not_found("remove", path));
        }
        if !state.config.sync_dir_required {
            state.durable_names.remove(path);
        }
        Ok(())
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<(), IoError> {
        let mut state = self.shared.state.lock();
        let Some(id) = state.names.remove(from) else {
            return Err(not_found("rename", from));
        };
        state.names.insert(to.to_path_buf(), id);
        if !state.config.sync_dir_required {
            state.durable_names.remove(from);
            state.durable_names.insert(to.to_path_buf(), id);
        }
        Ok(())
    }

    fn sync_dir(&self, dir: &Path) -> Result<(), IoError> {
        if self.shared.crashed.load(Ordering::SeqCst) {
            return Err(IoError::Crashed {
                path: dir.to_path_buf(),
            });
        }
        let mut state = self.shared.state.lock();
        let in_dir = |p: &Path| p.parent() == Some(dir);
        state.durable_names.retain(|p, _| !in_dir(p));
        let current: Vec<(PathBuf, InodeId)> = state
            .names
            .iter()
            .filter(|(p, _)| in_dir(p))
            .map(|(p, &id)| (p.clone(), id))
            .collect();
        state.durable_names.extend(current);
        Ok(())
    }

    fn create_dir_all(&self, _dir: &Path) -> Result<(), IoError> {
        // Directories are implicit in this model: a name's directory is its path's parent.
        Ok(())
    }
}

/// A file of the [`FaultBackend`].
#[derive(Debug)]
pub struct FaultFile {
    shared: Arc<Shared>,
    path: PathBuf,
    inode: InodeId,
    block_size: usize,
    writable: bool,
    /// Opened write-through: every write is durable when it returns.
    dsync: bool,
}

impl FaultFile {
    fn check_aligned(&self, offset: u64, len: usize, ptr: *const u8) -> Result<(), IoError> {
        let block = self.block_size;
        if block > 1
            && (!offset.is_multiple_of(block as u64)
                || !len.is_multiple_of(block)
                || !(ptr as usize).is_multiple_of(block))
        {
            return Err(IoError::Unaligned {
                path: self.path.clone(),
                offset,
                len,
                block_size: block,
            });
        }
        Ok(())
    }

    /// The power failing during a write-through write: it never returns success, and any part
    /// of it may have reached the disk. Pending, not durable: a crash keeps it whole, loses it
    /// or tears it.
    fn store_pending(&self, state: &mut State, offset: u64, src: &[u8]) {
        let inode = &mut state.inodes[self.inode];
        apply_write(&mut inode.current, offset, src);
        inode.pending.push(Pending::Write {
            offset,
            data: src.to_vec(),
            durable: false,
        });
    }

    /// A sync refused by [`FaultConfig::fail_syncs`], recorded as an injected EIO.
    fn failed_sync(&self, state: &mut State, offset: u64) -> IoError {
        state.events.push(FaultEvent::Eio {
            path: self.path.clone(),
            op: "fdatasync",
            offset,
        });
        IoError::Injected {
            op: "fdatasync",
            path: self.path.clone(),
            offset,
            what: "EIO (power failing)".into(),
        }
    }

    fn pause(admitted: Admitted) {
        if !admitted.latency.is_zero() {
            std::thread::sleep(admitted.latency);
        }
    }
}

impl IoFile for FaultFile {
    fn path(&self) -> &Path {
        &self.path
    }

    fn read_at(&self, buf: &mut [u8], offset: u64, _class: IoClass) -> Result<(), IoError> {
        self.check_aligned(offset, buf.len(), buf.as_ptr())?;
        let admitted = {
            let mut state = self.shared.state.lock();
            let admitted = self.shared.admit(&mut state, "read", &self.path, offset)?;
            let data = &state.inodes[self.inode].current;
            let start = usize::try_from(offset).unwrap_or(usize::MAX);
            let available = data.len().saturating_sub(start);
            if available < buf.len() {
                return Err(IoError::ShortRead {
                    path: self.path.clone(),
                    offset,
                    wanted: buf.len(),
                    got: available,
                });
            }
            buf.copy_from_slice(&data[start..start + buf.len()]);
            let p = state.config.read_bit_flip_probability;
            if p > 0.0 && !buf.is_empty() && state.rng.random_bool(p.min(1.0)) {
                let bit = state.rng.random_range(0..buf.len() as u64 * 8);
                buf[(bit / 8) as usize] ^= 1 << (bit % 8);
                state.events.push(FaultEvent::ReadBitFlip {
                    path: self.path.clone(),
                    offset,
                    bit,
                });
            }
            let per_read = state.config.read_latency_per_queued_read;
            let mut admitted = admitted;
            admitted.latency += state.config.read_latency;
            if !per_read.is_zero() {
                let depth = self.shared.reads_in_flight.fetch_add(1, Ordering::SeqCst) + 1;
                admitted.latency +=
                    per_read.saturating_mul(u32::try_from(depth).unwrap_or(u32::MAX));
                admitted.queued_read = true;
            }
            admitted
        };
        let queued = admitted.queued_read;
        Self::pause(admitted);
        if queued {
            self.shared.reads_in_flight.fetch_sub(1, Ordering::SeqCst);
        }
        Ok(())
    }

    fn write_at(&self, src: &[u8], offset: u64, _class: IoClass) -> Result<(), IoError> {
        self.check_aligned(offset, src.len(), src.as_ptr())?;
        if !self.writable {
            return Err(IoError::Os {
                op: "write",
                path: self.path.clone(),
                offset,
                len: src.len(),
                source: std::io::Error::from_raw_os_error(libc::EBADF),
            });
        }
        let admitted = {
            let mut state = self.shared.state.lock();
            let admitted = match self.shared.admit(&mut state, "write", &self.path, offset) {
                Ok(_) if self.dsync && state.config.fail_syncs => {
                    let error = self.failed_sync(&mut state, offset);
                    self.store_pending(&mut state, offset, src);
                    return Err(error);
                }
                Ok(admitted) => admitted,
                Err(error @ IoError::Injected { .. }) if self.dsync => {
                    self.store_pending(&mut state, offset, src);
                    return Err(error);
                }
                Err(error) => return Err(error),
            };
            let mut admitted = admitted;
            if self.dsync {
                admitted.latency += state.config.sync_latency;
            }
            let config = state.config.clone();
            let chance = |state: &mut State, p: f64| p > 0.0 && state.rng.random_bool(p.min(1.0));
            if chance(&mut state, config.lost_write_probability) {
                state.events.push(FaultEvent::LostWrite {
                    path: self.path.clone(),
                    offset,
                    len: src.len(),
                });
            } else {
                let mut target = offset;
                if chance(&mut state, config.misdirected_write_probability) && !src.is_empty() {
                    // Another slot of the same size within the file, as a disk that wrote the
                    // right data to the wrong sector.
                    let len = src.len() as u64;
                    let size = (state.inodes[self.inode].current.len() as u64).max(offset + len);
                    let slots = size / len;
                    if slots > 1 {
                        let mut slot = state.rng.random_range(0..slots - 1);
                        if slot >= offset / len {
                            slot += 1;
                        }
                        target = slot * len;
                        state.events.push(FaultEvent::MisdirectedWrite {
                            path: self.path.clone(),
                            intended: offset,
                            landed: target,
                            len: src.len(),
                        });
                    }
                }
                let mut data = src.to_vec();
                if chance(&mut state, config.write_bit_flip_probability) && !data.is_empty() {
                    let bit = state.rng.random_range(0..data.len() as u64 * 8);
                    data[(bit / 8) as usize] ^= 1 << (bit % 8);
                    state.events.push(FaultEvent::WriteBitFlip {
                        path: self.path.clone(),
                        offset: target,
                        bit,
                    });
                }
                let inode = &mut state.inodes[self.inode];
                apply_write(&mut inode.current, target, &data);
                if self.dsync {
                    // Durable now. It also stays among the pending writes, so that a crash that
                    // replays earlier unsynced writes over the durable content replays this one
                    // after them, as the disk would hold it.
                    apply_write(&mut inode.durable, target, &data);
                }
                inode.pending.push(Pending::Write {
                    offset: target,
                    data,
                    durable: self.dsync,
                });
            }
            admitted
        };
        Self::pause(admitted);
        Ok(())
    }

    fn sync_data(&self, _class: IoClass) -> Result<(), IoError> {
        let admitted = {
            let mut state = self.shared.state.lock();
            let mut admitted = self.shared.admit(&mut state, "fdatasync", &self.path, 0)?;
            if state.config.fail_syncs {
                return Err(self.failed_sync(&mut state, 0));
            }
            admitted.latency += state.config.sync_latency;
            let inode = &mut state.inodes[self.inode];
            inode.durable = inode.current.clone();
            inode.pending.clear();
            admitted
        };
        Self::pause(admitted);
        Ok(())
    }

    fn size(&self) -> Result<u64, IoError> {
        if self.shared.crashed.load(Ordering::SeqCst) {
            return Err(IoError::Crashed {
                path: self.path.clone(),
            });
        }
        Ok(self.shared.state.lock().inodes[self.inode].current.len() as u64)
    }

    fn set_size(&self, size: u64) -> Result<(), IoError> {
        if self.shared.crashed.load(Ordering::SeqCst) {
            return Err(IoError::Crashed {
                path: self.path.clone(),
            });
        }
        let mut state = self.shared.state.lock();
        let inode = &mut state.inodes[self.inode];
        let change = Pending::SetSize(size);
        apply(&mut inode.current, &change);
        inode.pending.push(change);
        Ok(())
    }

    fn logical_block_size(&self) -> usize {
        self.block_size
    }

    /// A queue whose writes stay in flight (not in the file's current content) until a reap
    /// completes them, a seeded random number at a time in a seeded random order; a crash then
    /// keeps, drops, tears or reorders the ones still in flight. A completion that hits the
    /// injected EIO (the machine dying) leaves its write in flight for the crash to decide.
    /// Writes overlapping one in flight are recorded ([`FaultEvent::OverlappingInFlight`]).
    fn native_write_queue(
        &self,
        depth: usize,
        class: IoClass,
    ) -> Option<Result<Box<dyn WriteQueue>, IoError>> {
        Some(Ok(Box::new(FaultQueue {
            file: FaultFile {
                shared: self.shared.clone(),
                path: self.path.clone(),
                inode: self.inode,
                block_size: self.block_size,
                writable: self.writable,
                dsync: self.dsync,
            },
            depth: depth.max(1),
            class,
            waiting: Vec::new(),
            refused: Vec::new(),
        })))
    }
}

/// The fault backend's write queue; see [`FaultFile::native_write_queue`].
#[derive(Debug)]
struct FaultQueue {
    file: FaultFile,
    depth: usize,
    class: IoClass,
    /// Submitted, not reaped: the in-flight id and the request.
    waiting: Vec<(u64, WriteRequest)>,
    refused: Vec<WriteCompletion>,
}

impl FaultQueue {
    fn refuse(&mut self, request: WriteRequest, error: IoError) {
        self.refused.push(WriteCompletion {
            tag: request.tag,
            buf: request.buf,
            len: request.len,
            result: Err(error),
        });
    }
}

impl WriteQueue for FaultQueue {
    fn depth(&self) -> usize {
        self.depth
    }
    fn in_flight(&self) -> usize {
        self.waiting.len() + self.refused.len()
    }
    fn submit(&mut self, request: WriteRequest) {
        let len = request.len.min(request.buf.len());
        let data = &request.buf[..len];
        if let Err(error) = self.file.check_aligned(request.offset, len, data.as_ptr()) {
            self.refuse(request, error);
            return;
        }
        if self.file.shared.crashed.load(Ordering::SeqCst) {
            let error = IoError::Crashed {
                path: self.file.path.clone(),
            };
            self.refuse(request, error);
            return;
        }
        let id = {
            let mut state = self.file.shared.state.lock();
            let id = state.next_write_id;
            state.next_write_id += 1;
            let end = request.offset + len as u64;
            let overlapping = state.inodes[self.file.inode]
                .in_flight
                .iter()
                .find(|w| w.offset < end && request.offset < w.offset + w.data.len() as u64)
                .map(|w| (w.offset, w.data.len()));
            if let Some((other_offset, other_len)) = overlapping {
                state.events.push(FaultEvent::OverlappingInFlight {
                    path: self.file.path.clone(),
                    offset: request.offset,
                    len,
                    other_offset,
                    other_len,
                });
            }
            state.inodes[self.file.inode].in_flight.push(InFlight {
                id,
                offset: request.offset,
                data: data.to_vec(),
            });
            id
        };
        self.waiting.push((id, request));
    }
    fn reap(&mut self, wait: bool, out: &mut Vec<WriteCompletion>) {
        let first = out.len();
        out.append(&mut self.refused);
        if self.waiting.is_empty() {
            return;
        }
        // Which complete now, and in what order: drawn under the lock, in operation order.
        let chosen: Vec<(u64, WriteRequest)> = {
            let mut state = self.file.shared.state.lock();
            let n = self.waiting.len();
            let least = usize::from(wait && out.len() == first);
            let count = state.rng.random_range(least..=n);
            let mut picked = Vec::with_capacity(count);
            for _ in 0..count {
                let i = state.rng.random_range(0..self.waiting.len());
                picked.push(self.waiting.swap_remove(i));
            }
            let inode = &mut state.inodes[self.file.inode];
            inode
                .in_flight
                .retain(|w| !picked.iter().any(|(id, _)| *id == w.id));
            picked
        };
        for (id, request) in chosen {
            let len = request.len.min(request.buf.len());
            let result = self
                .file
                .write_at(&request.buf[..len], request.offset, self.class);
            if matches!(result, Err(IoError::Injected { .. })) {
                // The machine is dying: the write may yet reach the disk, whole or in part.
                let mut state = self.file.shared.state.lock();
                state.inodes[self.file.inode].in_flight.push(InFlight {
                    id,
                    offset: request.offset,
                    data: request.buf[..len].to_vec(),
                });
            }
            out.push(WriteCompletion {
                tag: request.tag,
                buf: request.buf,
                len: request.len,
                result,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seed() -> u64 {
        jetproof_test_support::seed_or_clock(11)
    }

    fn open(backend: &FaultBackend, path: &str) -> Arc<dyn IoFile> {
        backend
            .open(Path::new(path), &OpenOptions::create().buffered())
            .expect("open")
    }

    #[test]
    fn crash_keeps_only_synced_data_and_names() {
        let backend = FaultBackend::new(FaultConfig::default());
        let file = open(&backend, "/d/a.log");
        file.write_at(b"synced", 0, IoClass::LogWrite).expect("w");
        file.sync_data(IoClass::LogWrite).expect("sync");
        backend.sync_dir(Path::new("/d")).expect("sync dir");
        file.write_at(b"LOST!!", 0, IoClass::LogWrite).expect("w");
        file.write_at(b"tail", 6, IoClass::LogWrite).expect("w");
        let unsynced_name = open(&backend, "/d/b.log");
        unsynced_name
            .write_at(b"x", 0, IoClass::LogWrite)
            .expect("w");
        unsynced_name.sync_data(IoClass::LogWrite).expect("sync");

        let after = backend.crash(CrashMode::SyncedOnly);
        assert!(matches!(
            file.write_at(b"z", 0, IoClass::LogWrite),
            Err(IoError::Crashed { .. })
        ));
        assert_eq!(
            after.current_contents(Path::new("/d/a.log")),
            Some(b"synced".to_vec())
        );
        assert!(
            !after.exists(Path::new("/d/b.log")),
            "a name never synced by sync_dir does not survive"
        );
        // The survivor is a working backend.
        let reopened = open(&after, "/d/a.log");
        let mut buf = [0u8; 6];
        reopened.read_at(&mut buf, 0, IoClass::LogRead).expect("r");
        assert_eq!(&buf, b"synced");
    }

    #[test]
    fn random_subset_is_seeded_and_in_order() {
        let seed = seed();
        let outcome = |seed| {
            let backend = FaultBackend::new(FaultConfig {
                seed,
                sync_dir_required: false,
                ..FaultConfig::default()
            });
            let file = open(&backend, "/f");
            file.write_at(&[0u8; 64], 0, IoClass::DbWrite).expect("w");
            file.sync_data(IoClass::DbWrite).expect("s");
            for i in 0..64u8 {
                file.write_at(&[i + 1], u64::from(i), IoClass::DbWrite)
                    .expect("w");
            }
            let after = backend.crash(CrashMode::RandomSubset);
            after.current_contents(Path::new("/f")).expect("file")
        };
        let first = outcome(seed);
        assert_eq!(
            first,
            outcome(seed),
            "seed {seed}: crash outcome must replay"
        );
        assert!(
            first
                .iter()
                .enumerate()
                .all(|(i, &b)| b == 0 || b == i as u8 + 1),
            "seed {seed}"
        );
        let kept = first.iter().filter(|&&b| b != 0).count();
        assert!(kept > 5 && kept < 59, "seed {seed}: kept {kept} of 64");
    }

    fn queued(file: &Arc<dyn IoFile>, depth: usize) -> Box<dyn WriteQueue> {
        crate::open_write_queue(file, depth, IoClass::DbWrite).expect("queue")
    }

    fn request(tag: u64, offset: u64, byte: u8, len: usize) -> WriteRequest {
        let mut buf = crate::AlignedBuf::zeroed(len);
        buf.fill(byte);
        WriteRequest {
            tag,
            offset,
            buf,
            len,
        }
    }

    #[test]
    fn queued_writes_are_invisible_until_reaped_and_complete_out_of_order() {
        let seed = seed();
        let backend = FaultBackend::new(FaultConfig {
            seed,
            ..FaultConfig::default()
        });
        let file = open(&backend, "/q");
        file.write_at(&[0u8; 16 * 512], 0, IoClass::DbWrite)
            .expect("w");
        let mut queue = queued(&file, 16);
        for i in 0..16u64 {
            queue.submit(request(i, i * 512, i as u8 + 1, 512));
        }
        assert_eq!(queue.in_flight(), 16);
        assert!(
            backend
                .current_contents(Path::new("/q"))
                .expect("file")
                .iter()
                .all(|&b| b == 0),
            "seed {seed}: a write in flight is not in the file yet"
        );
        let mut done = Vec::new();
        while queue.in_flight() > 0 {
            let before = done.len();
            queue.reap(true, &mut done);
            assert!(
                done.len() > before,
                "seed {seed}: a waiting reap completes one"
            );
        }
        let order: Vec<u64> = done.iter().map(|c| c.tag).collect();
        let mut sorted = order.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..16).collect::<Vec<_>>(), "seed {seed}");
        assert_ne!(
            order, sorted,
            "seed {seed}: 16 writes completed in submission order"
        );
        let data = backend.current_contents(Path::new("/q")).expect("file");
        for i in 0..16usize {
            assert!(
                data[i * 512..(i + 1) * 512]
                    .iter()
                    .all(|&b| b == i as u8 + 1)
            );
        }
        assert!(backend.events().is_empty(), "seed {seed}");
    }

    #[test]
    fn a_crash_keeps_drops_tears_and_reorders_writes_in_flight() {
        let seed = seed();
        let (mut whole, mut lost, mut torn) = (0, 0, 0);
        for case in 0..20u64 {
            let backend = FaultBackend::new(FaultConfig {
                seed: seed.wrapping_add(case),
                sync_dir_required: false,
                sector_size: 512,
                ..FaultConfig::default()
            });
            let file = open(&backend, "/q");
            file.write_at(&[0u8; 8 * 4096], 0, IoClass::DbWrite)
                .expect("w");
            file.sync_data(IoClass::DbWrite).expect("s");
            let mut queue = queued(&file, 8);
            for i in 0..8u64 {
                queue.submit(request(i, i * 4096, i as u8 + 1, 4096));
            }
            let mode = if case % 2 == 0 {
                CrashMode::TornLast
            } else {
                CrashMode::RandomSubset
            };
            let after = backend.crash(mode);
            let data = after.current_contents(Path::new("/q")).expect("file");
            for i in 0..8usize {
                let block = &data[i * 4096..(i + 1) * 4096];
                let kept = block.iter().take_while(|&&b| b == i as u8 + 1).count();
                assert!(
                    block[kept..].iter().all(|&b| b == 0),
                    "seed {}: block {i} is a prefix of its write",
                    seed.wrapping_add(case)
                );
                match kept {
                    0 => lost += 1,
                    4096 => whole += 1,
                    _ => torn += 1,
                }
            }
            let events = after.events();
            assert_eq!(
                events
                    .iter()
                    .filter(|e| matches!(e, FaultEvent::InFlightAtCrash { .. }))
                    .count(),
                8
            );
            drop(queue);
            // A synced-only crash keeps none of them.
            let backend = FaultBackend::new(FaultConfig {
                sync_dir_required: false,
                ..FaultConfig::default()
            });
            let file = open(&backend, "/q");
            let mut queue = queued(&file, 4);
            queue.submit(request(0, 0, 9, 512));
            let after = backend.crash(CrashMode::SyncedOnly);
            assert!(
                after
                    .current_contents(Path::new("/q"))
                    .expect("f")
                    .is_empty()
            );
        }
        assert!(
            whole > 0 && lost > 0 && torn > 0,
            "seed {seed}: {whole} {lost} {torn}"
        );
    }

    #[test]
    fn an_overlapping_write_in_flight_is_recorded() {
        let backend = FaultBackend::new(FaultConfig::default());
        let file = open(&backend, "/q");
        let mut queue = queued(&file, 4);
        queue.submit(request(0, 0, 1, 4096));
        queue.submit(request(1, 8192, 2, 4096));
        assert!(backend.events().is_empty());
        queue.submit(request(2, 2048, 3, 4096));
        assert!(matches!(
            backend.events().as_slice(),
            [FaultEvent::OverlappingInFlight {
                offset: 2048,
                other_offset: 0,
                ..
            }]
        ));
        let mut done = Vec::new();
        while queue.in_flight() > 0 {
            queue.reap(true, &mut done);
        }
    }

    #[test]
    fn torn_last_write_keeps_a_sector_prefix() {
        let seed = seed();
        for round in 0..20u64 {
            let backend = FaultBackend::new(FaultConfig {
                seed: seed.wrapping_add(round),
                sector_size: 512,
                sync_dir_required: false,
                ..FaultConfig::default()
            });
            let file = open(&backend, "/log");
            file.write_at(&[1u8; 512], 0, IoClass::LogWrite).expect("w");
            file.write_at(&[2u8; 4096], 512, IoClass::LogWrite)
                .expect("w");
            let after = backend.crash(CrashMode::TornLast);
            let data = after.current_contents(Path::new("/log")).expect("file");
            assert!(data[..512].iter().all(|&b| b == 1), "seed {seed}");
            let kept = data.len().saturating_sub(512);
            assert!(
                kept.is_multiple_of(512) && kept < 4096,
                "seed {seed}: kept {kept}"
            );
            assert!(data[512..].iter().all(|&b| b == 2), "seed {seed}");
            assert!(
                matches!(after.events().as_slice(), [FaultEvent::TornWrite { kept: k, .. }] if *k == kept),
                "seed {seed}"
            );
        }
    }

    #[test]
    fn eio_after_n_operations() {
        let backend = FaultBackend::new(FaultConfig {
            eio_after_ops: Some(3),
            ..FaultConfig::default()
        });
        let file = open(&backend, "/x");
        for i in 0..3u64 {
            file.write_at(&[1], i, IoClass::DbWrite)
                .expect("first three");
        }
        let error = file.sync_data(IoClass::DbWrite).expect_err("fourth fails");
        assert!(error.to_string().contains("EIO"), "{error}");
        assert_eq!(backend.operations(), 4);
    }

    #[test]
    fn lost_misdirected_and_flipped_writes_are_logged_and_real() {
        let seed = seed();
        let backend = FaultBackend::new(FaultConfig {
            seed,
            ..FaultConfig::default()
        });
        let file = open(&backend, "/db");
        for slot in 0..8u64 {
            file.write_at(&[0u8; 512], slot * 512, IoClass::DbWrite)
                .expect("w");
        }
        backend.configure(|c| c.lost_write_probability = 1.0);
        file.write_at(&[9u8; 512], 0, IoClass::DbWrite)
            .expect("lost");
        assert_eq!(backend.current_contents(Path::new("/db")).expect("f")[0], 0);
        backend.configure(|c| {
            c.lost_write_probability = 0.0;
            c.misdirected_write_probability = 1.0;
        });
        file.write_at(&[7u8; 512], 1024, IoClass::DbWrite)
            .expect("misdirected");
        let data = backend.current_contents(Path::new("/db")).expect("f");
        assert!(data[1024..1536].iter().all(|&b| b == 0), "seed {seed}");
        assert_eq!(data.iter().filter(|&&b| b == 7).count(), 512, "seed {seed}");
        backend.configure(|c| {
            c.misdirected_write_probability = 0.0;
            c.write_bit_flip_probability = 1.0;
        });
        file.write_at(&[0u8; 512], 2048, IoClass::DbWrite)
            .expect("flipped");
        let data = backend.current_contents(Path::new("/db")).expect("f");
        let ones: u32 = data[2048..2560].iter().map(|b| b.count_ones()).sum();
        assert_eq!(ones, 1, "seed {seed}");
        let events = backend.events();
        assert!(
            matches!(events[0], FaultEvent::LostWrite { .. }),
            "{events:?}"
        );
        assert!(
            matches!(events[1], FaultEvent::MisdirectedWrite { .. }),
            "{events:?}"
        );
        assert!(
            matches!(events[2], FaultEvent::WriteBitFlip { .. }),
            "{events:?}"
        );
    }

    #[test]
    fn read_latency_slows_reads_and_not_writes() {
        let backend = FaultBackend::new(FaultConfig {
            read_latency: Duration::from_millis(40),
            ..FaultConfig::default()
        });
        let file = open(&backend, "/r");
        let start = std::time::Instant::now();
        file.write_at(&[0u8; 64], 0, IoClass::DbWrite).expect("w");
        assert!(
            start.elapsed() < Duration::from_millis(40),
            "a write waited"
        );
        let mut buf = [0u8; 64];
        let start = std::time::Instant::now();
        file.read_at(&mut buf, 0, IoClass::DbRead).expect("r");
        assert!(start.elapsed() >= Duration::from_millis(40));
    }

    #[test]
    fn read_flips_are_transient_and_added_latency_applies() {
        let backend = FaultBackend::new(FaultConfig {
            read_bit_flip_probability: 1.0,
            added_latency: Duration::from_millis(5),
            ..FaultConfig::default()
        });
        let file = open(&backend, "/r");
        file.write_at(&[0u8; 64], 0, IoClass::DbWrite).expect("w");
        let mut buf = [0u8; 64];
        let start = std::time::Instant::now();
        file.read_at(&mut buf, 0, IoClass::DbRead).expect("r");
        assert!(start.elapsed() >= Duration::from_millis(5));
        assert_eq!(buf.iter().map(|b| b.count_ones()).sum::<u32>(), 1);
        assert!(
            backend
                .current_contents(Path::new("/r"))
                .expect("f")
                .iter()
                .all(|&b| b == 0)
        );
    }

    #[test]
    fn read_latency_grows_with_the_reads_in_flight() {
        // The per-read step is long (200 ms) so that a loaded machine's late thread start or
        // wake-up (tens of ms under a load of 40 on two cores) is small beside it: the four
        // reads below must all be admitted while the others are still in flight.
        let step = Duration::from_millis(200);
        let backend = FaultBackend::new(FaultConfig {
            read_latency_per_queued_read: step,
            ..FaultConfig::default()
        });
        let file = open(&backend, "/q");
        file.write_at(&[0u8; 64], 0, IoClass::DbWrite).expect("w");
        // Alone: one read in flight, one step (the quicker of two, so that a late wake-up is
        // not taken for a second read in flight).
        let alone = (0..2)
            .map(|_| {
                let start = std::time::Instant::now();
                file.read_at(&mut [0u8; 64], 0, IoClass::DbRead).expect("r");
                start.elapsed()
            })
            .min()
            .unwrap_or_default();
        assert!(alone >= step, "{alone:?}");
        assert!(alone < step * 2, "{alone:?}: more than one read in flight");
        // Four at once, released together: the last admitted sees four in flight (4 steps).
        let barrier = std::sync::Barrier::new(4);
        let times: Vec<Duration> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..4)
                .map(|_| {
                    let file = file.clone();
                    let barrier = &barrier;
                    scope.spawn(move || {
                        barrier.wait();
                        let begun = std::time::Instant::now();
                        file.read_at(&mut [0u8; 64], 0, IoClass::DbRead).expect("r");
                        begun.elapsed()
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("join"))
                .collect()
        });
        let slowest = times.iter().max().copied().unwrap_or_default();
        assert!(slowest >= step * 4, "{times:?}");
        assert_eq!(backend.shared.reads_in_flight.load(Ordering::SeqCst), 0);
    }

    #[test]
    fn targeted_bit_flip_persists_across_crash() {
        let backend = FaultBackend::new(FaultConfig {
            sync_dir_required: false,
            ..FaultConfig::default()
        });
        let file = open(&backend, "/p");
        file.write_at(&[0u8; 16], 0, IoClass::DbWrite).expect("w");
        file.sync_data(IoClass::DbWrite).expect("s");
        backend.flip_bit(Path::new("/p"), 3, 2).expect("flip");
        let after = backend.crash(CrashMode::SyncedOnly);
        assert_eq!(after.current_contents(Path::new("/p")).expect("f")[3], 4);
    }

    fn write_through(backend: &FaultBackend, path: &str) -> Arc<dyn IoFile> {
        backend
            .open(
                Path::new(path),
                &OpenOptions::create().buffered().with_dsync(true),
            )
            .expect("open")
    }

    #[test]
    fn failing_syncs_leave_writes_pending_and_slow_syncs_sleep() {
        let backend = FaultBackend::new(FaultConfig {
            sync_dir_required: false,
            sync_latency: Duration::from_millis(20),
            ..FaultConfig::default()
        });
        let plain = open(&backend, "/p");
        let through = write_through(&backend, "/t");
        let start = std::time::Instant::now();
        plain.write_at(b"old", 0, IoClass::DbWrite).expect("w");
        assert!(
            start.elapsed() < Duration::from_millis(20),
            "a plain write is not a sync"
        );
        plain.sync_data(IoClass::DbWrite).expect("s");
        through.write_at(b"old", 0, IoClass::LogWrite).expect("w");
        assert!(start.elapsed() >= Duration::from_millis(40), "two syncs");
        backend.configure(|c| c.fail_syncs = true);
        plain
            .write_at(b"new", 0, IoClass::DbWrite)
            .expect("a plain write still works");
        let error = plain.sync_data(IoClass::DbWrite).expect_err("sync fails");
        assert!(error.to_string().contains("power failing"), "{error}");
        let error = through
            .write_at(b"new", 0, IoClass::LogWrite)
            .expect_err("a write-through write fails");
        assert!(error.to_string().contains("power failing"), "{error}");
        assert_eq!(
            backend.current_contents(Path::new("/t")),
            Some(b"new".to_vec()),
            "the failed write-through write was stored"
        );
        for path in ["/p", "/t"] {
            assert_eq!(
                backend.durable_contents(Path::new(path)),
                Some(b"old".to_vec()),
                "{path}: nothing became durable"
            );
        }
        assert_eq!(backend.events().len(), 2);
        let kept = backend.crash_copy(CrashMode::KeepPrefix { bytes: usize::MAX });
        assert_eq!(
            kept.current_contents(Path::new("/t")),
            Some(b"new".to_vec())
        );
        let after = backend.crash(CrashMode::SyncedOnly);
        assert_eq!(
            after.current_contents(Path::new("/t")),
            Some(b"old".to_vec())
        );
        assert!(
            !after.config().fail_syncs,
            "the power is back after a crash"
        );
        write_through(&after, "/t")
            .write_at(b"yes", 0, IoClass::LogWrite)
            .expect("syncs work again");
    }

    #[test]
    fn keep_prefix_cuts_every_pending_write_and_keeps_the_size() {
        let backend = FaultBackend::new(FaultConfig {
            sync_dir_required: false,
            ..FaultConfig::default()
        });
        let file = open(&backend, "/f");
        file.write_at(&[1u8; 8], 0, IoClass::DbWrite).expect("w");
        file.sync_data(IoClass::DbWrite).expect("s");
        file.write_at(&[2u8; 4], 2, IoClass::DbWrite).expect("w");
        file.write_at(&[3u8; 4], 10, IoClass::DbWrite).expect("w");
        let cut = backend.crash_copy(CrashMode::KeepPrefix { bytes: 1 });
        assert_eq!(
            cut.current_contents(Path::new("/f")).expect("f"),
            [1, 1, 2, 1, 1, 1, 1, 1, 0, 0, 3, 0, 0, 0]
        );
        let none = backend.crash_copy(CrashMode::KeepPrefix { bytes: 0 });
        assert_eq!(
            none.current_contents(Path::new("/f")).expect("f"),
            [1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0]
        );
        let all = backend.crash_copy(CrashMode::KeepPrefix { bytes: usize::MAX });
        assert_eq!(
            all.current_contents(Path::new("/f")),
            backend.current_contents(Path::new("/f"))
        );
        // A copy leaves the backend running; the same state gives the same copy.
        file.write_at(&[4u8], 0, IoClass::DbWrite)
            .expect("still running");
        assert_eq!(
            backend
                .crash_copy(CrashMode::Scattered { tear_percent: 50 })
                .current_contents(Path::new("/f")),
            backend
                .crash_copy(CrashMode::Scattered { tear_percent: 50 })
                .current_contents(Path::new("/f"))
        );
    }

    #[test]
    fn scattered_keeps_loses_or_tears_each_write_to_any_subset_of_sectors() {
        let seed = seed();
        let (mut whole, mut lost, mut gapped) = (0, 0, 0);
        for case in 0..20u64 {
            let backend = FaultBackend::new(FaultConfig {
                seed: seed.wrapping_add(case),
                sector_size: 512,
                sync_dir_required: false,
                ..FaultConfig::default()
            });
            let file = open(&backend, "/s");
            file.write_at(&[0u8; 8 * 4096], 0, IoClass::DbWrite)
                .expect("w");
            file.sync_data(IoClass::DbWrite).expect("s");
            for i in 0..8u64 {
                file.write_at(&[i as u8 + 1; 4096], i * 4096, IoClass::DbWrite)
                    .expect("w");
            }
            let after = backend.crash(CrashMode::Scattered { tear_percent: 50 });
            let data = after.current_contents(Path::new("/s")).expect("file");
            assert_eq!(data.len(), 8 * 4096, "seed {seed}");
            for i in 0..8usize {
                let sectors: Vec<bool> = data[i * 4096..(i + 1) * 4096]
                    .chunks(512)
                    .map(|sector| {
                        let new = sector.iter().all(|&b| b == i as u8 + 1);
                        assert!(
                            new || sector.iter().all(|&b| b == 0),
                            "seed {seed}: whole sectors"
                        );
                        new
                    })
                    .collect();
                let kept = sectors.iter().filter(|&&new| new).count();
                match kept {
                    0 => lost += 1,
                    8 => whole += 1,
                    _ => {}
                }
                if sectors.windows(2).any(|pair| !pair[0] && pair[1]) {
                    gapped += 1;
                }
            }
        }
        assert!(
            whole > 0 && lost > 0 && gapped > 0,
            "seed {seed}: {whole} whole, {lost} lost, {gapped} torn with a gap"
        );
    }

    #[test]
    fn zero_range_and_fail_after_damage_on_purpose() {
        let backend = FaultBackend::new(FaultConfig {
            sync_dir_required: false,
            ..FaultConfig::default()
        });
        let file = open(&backend, "/z");
        file.write_at(&[7u8; 8], 0, IoClass::DbWrite).expect("w");
        file.sync_data(IoClass::DbWrite).expect("s");
        backend.zero_range(Path::new("/z"), 2, 4).expect("zero");
        backend
            .zero_range(Path::new("/z"), 6, 100)
            .expect("clipped");
        let expected = [7, 7, 0, 0, 7, 7, 0, 0];
        assert_eq!(
            backend.current_contents(Path::new("/z")).expect("f"),
            expected
        );
        assert_eq!(
            backend.durable_contents(Path::new("/z")).expect("f"),
            expected
        );
        assert!(backend.zero_range(Path::new("/none"), 0, 1).is_err());
        backend.fail_after(1);
        file.read_at(&mut [0u8; 1], 0, IoClass::DbRead)
            .expect("one more");
        assert!(file.read_at(&mut [0u8; 1], 0, IoClass::DbRead).is_err());
    }
}
