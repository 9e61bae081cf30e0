//! A small crash-simulating backend for the log's tests, until `jetproof_io`'s fault backend
//! lands. Files live in memory; every write is remembered as "pending" until the file is synced.
//! [`CrashBackend::crash`] returns the state a machine would find after power loss: synced data,
//! plus, per pending write, the whole write, none of it, or a torn part of it (a random subset of
//! its 512-byte pieces, which is harsher than the 4 KiB atomicity `docs/design.md` assumes).
//! Namespace operations (create, rename, remove) are durable at once: the log syncs the directory
//! after each, so this is what a synced directory gives. A write to a file opened write-through
//! (`OpenOptions::dsync`, the log's generation files) is a write followed by this backend's
//! fdatasync (same delay, same injected failure, counted in `syncs`): durable when it returns.

#![allow(dead_code)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::Duration;

use jetproof_io::{IoBackend, IoClass, IoError, IoFile, OpenOptions};
use parking_lot::Mutex;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

#[derive(Debug, Default)]
struct Content {
    current: Vec<u8>,
    synced: Vec<u8>,
    pending: Vec<(u64, Vec<u8>)>,
}

#[derive(Debug)]
pub struct CrashFile {
    path: PathBuf,
    content: Arc<Mutex<Content>>,
    backend: Arc<Shared>,
    dsync: bool,
}

#[derive(Debug, Default)]
struct Shared {
    /// Operations left before every I/O fails with EIO (negative: never).
    fail_after_ops: AtomicI64,
    sync_delay_us: AtomicU64,
    syncs: AtomicU64,
    /// When set, every sync fails (the write before it stays pending, as if power failed).
    fail_syncs: std::sync::atomic::AtomicBool,
}

impl Shared {
    fn tick(&self, op: &'static str, path: &Path, offset: u64) -> Result<(), IoError> {
        let left = self.fail_after_ops.load(Ordering::SeqCst);
        if left < 0 {
            return Ok(());
        }
        if left == 0 {
            return Err(IoError::Injected {
                op,
                path: path.to_path_buf(),
                offset,
                what: "EIO".into(),
            });
        }
        self.fail_after_ops.fetch_sub(1, Ordering::SeqCst);
        Ok(())
    }
}

#[derive(Debug)]
pub struct CrashBackend {
    files: Mutex<HashMap<PathBuf, Arc<Mutex<Content>>>>,
    shared: Arc<Shared>,
}

impl CrashBackend {
    pub fn new() -> Arc<CrashBackend> {
        let shared = Shared::default();
        shared.fail_after_ops.store(-1, Ordering::SeqCst);
        Arc::new(CrashBackend {
            files: Mutex::new(HashMap::new()),
            shared: Arc::new(shared),
        })
    }

    /// Every sync sleeps this long, as a disk's flush would (makes group commit observable).
    pub fn set_sync_delay(&self, delay: Duration) {
        self.shared
            .sync_delay_us
            .store(delay.as_micros() as u64, Ordering::SeqCst);
    }

    /// After `ops` more reads/writes/syncs, every I/O fails.
    pub fn fail_after(&self, ops: i64) {
        self.shared.fail_after_ops.store(ops, Ordering::SeqCst);
    }

    pub fn fail_syncs(&self, fail: bool) {
        self.shared.fail_syncs.store(fail, Ordering::SeqCst);
    }

    pub fn syncs(&self) -> u64 {
        self.shared.syncs.load(Ordering::SeqCst)
    }

    /// The state after a power loss. `tear_probability`: chance that a pending write is torn
    /// rather than kept or lost whole.
    pub fn crash(&self, rng: &mut StdRng, tear_probability: f64) -> Arc<CrashBackend> {
        let after = CrashBackend::new();
        let files = self.files.lock();
        for (path, content) in files.iter() {
            let content = content.lock();
            let mut image = content.synced.clone();
            for (offset, data) in &content.pending {
                let roll: f64 = rng.random();
                let start = *offset as usize;
                if image.len() < start + data.len() {
                    image.resize(start + data.len(), 0);
                }
                if roll < tear_probability {
                    for (index, piece) in data.chunks(512).enumerate() {
                        if rng.random_bool(0.5) {
                            let at = start + index * 512;
                            image[at..at + piece.len()].copy_from_slice(piece);
                        }
                    }
                } else if rng.random_bool(0.5) {
                    image[start..start + data.len()].copy_from_slice(data);
                }
            }
            let restored = Content {
                current: image.clone(),
                synced: image,
                pending: Vec::new(),
            };
            after
                .files
                .lock()
                .insert(path.clone(), Arc::new(Mutex::new(restored)));
        }
        after
    }

    /// The state after a power loss in which each pending write kept only its first
    /// `keep_bytes` bytes (a torn write, deterministically).
    pub fn crash_keep_prefix(&self, keep_bytes: usize) -> Arc<CrashBackend> {
        let after = CrashBackend::new();
        for (path, content) in self.files.lock().iter() {
            let content = content.lock();
            let mut image = content.synced.clone();
            for (offset, data) in &content.pending {
                let start = *offset as usize;
                let kept = &data[..keep_bytes.min(data.len())];
                if image.len() < start + data.len() {
                    image.resize(start + data.len(), 0);
                }
                image[start..start + kept.len()].copy_from_slice(kept);
            }
            let restored = Content {
                current: image.clone(),
                synced: image,
                pending: Vec::new(),
            };
            after
                .files
                .lock()
                .insert(path.clone(), Arc::new(Mutex::new(restored)));
        }
        after
    }

    /// Flips one bit of a file's durable and current content (media corruption).
    pub fn flip_bit(&self, path: &Path, offset: u64, bit: u8) {
        let files = self.files.lock();
        let content = files.get(path).expect("file to corrupt exists");
        let mut content = content.lock();
        let at = offset as usize;
        content.current[at] ^= 1 << bit;
        content.synced[at] ^= 1 << bit;
    }

    /// Zeroes `[from, to)` of a file's durable and current content (lost data).
    pub fn zero_range(&self, path: &Path, from: u64, to: u64) {
        let files = self.files.lock();
        let content = files.get(path).expect("file to damage exists");
        let mut content = content.lock();
        content.current[from as usize..to as usize].fill(0);
        content.synced[from as usize..to as usize].fill(0);
    }

    pub fn file_bytes(&self, path: &Path) -> Option<Vec<u8>> {
        self.files
            .lock()
            .get(path)
            .map(|c| c.lock().current.clone())
    }
}

fn not_found(op: &'static str, path: &Path) -> IoError {
    IoError::Path {
        op,
        path: path.to_path_buf(),
        source: std::io::Error::from(std::io::ErrorKind::NotFound),
    }
}

impl IoBackend for CrashBackend {
    fn name(&self) -> &'static str {
        "crash-test"
    }

    fn open(&self, path: &Path, options: &OpenOptions) -> Result<Arc<dyn IoFile>, IoError> {
        let mut files = self.files.lock();
        let content = match files.get(path) {
            Some(content) => content.clone(),
            None if options.create => {
                let content = Arc::new(Mutex::new(Content::default()));
                files.insert(path.to_path_buf(), content.clone());
                content
            }
            None => return Err(not_found("open", path)),
        };
        Ok(Arc::new(CrashFile {
            path: path.to_path_buf(),
            content,
            backend: self.shared.clone(),
            dsync: options.dsync,
        }))
    }

    fn exists(&self, path: &Path) -> bool {
        self.files.lock().contains_key(path)
    }

    fn remove(&self, path: &Path) -> Result<(), IoError> {
        self.files
            .lock()
            .remove(path)
            .map(|_| ())
            .ok_or_else(|| not_found("remove", path))
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<(), IoError> {
        let mut files = self.files.lock();
        let content = files
            .remove(from)
            .ok_or_else(|| not_found("rename", from))?;
        files.insert(to.to_path_buf(), content);
        Ok(())
    }

    fn sync_dir(&self, _dir: &Path) -> Result<(), IoError> {
        Ok(())
    }

    fn create_dir_all(&self, _dir: &Path) -> Result<(), IoError> {
        Ok(())
    }
}

impl CrashFile {
    /// The fdatasync part of `sync_data` and of a write-through write.
    fn make_durable(&self) -> Result<(), IoError> {
        if self.backend.fail_syncs.load(Ordering::SeqCst) {
            return Err(IoError::Injected {
                op: "fdatasync",
                path: self.path.clone(),
                offset: 0,
                what: "EIO (power failing)".into(),
            });
        }
        let delay = self.backend.sync_delay_us.load(Ordering::SeqCst);
        if delay > 0 {
            std::thread::sleep(Duration::from_micros(delay));
        }
        self.backend.syncs.fetch_add(1, Ordering::SeqCst);
        let mut content = self.content.lock();
        content.synced = content.current.clone();
        content.pending.clear();
        Ok(())
    }
}

impl IoFile for CrashFile {
    fn path(&self) -> &Path {
        &self.path
    }

    fn read_at(&self, buf: &mut [u8], offset: u64, _class: IoClass) -> Result<(), IoError> {
        self.backend.tick("read", &self.path, offset)?;
        let content = self.content.lock();
        let start = offset as usize;
        if content.current.len() < start + buf.len() {
            return Err(IoError::ShortRead {
                path: self.path.clone(),
                offset,
                wanted: buf.len(),
                got: content.current.len().saturating_sub(start),
            });
        }
        buf.copy_from_slice(&content.current[start..start + buf.len()]);
        Ok(())
    }

    fn write_at(&self, data: &[u8], offset: u64, _class: IoClass) -> Result<(), IoError> {
        self.backend.tick("write", &self.path, offset)?;
        let mut content = self.content.lock();
        let start = offset as usize;
        if content.current.len() < start + data.len() {
            content.current.resize(start + data.len(), 0);
        }
        content.current[start..start + data.len()].copy_from_slice(data);
        content.pending.push((offset, data.to_vec()));
        drop(content);
        if self.dsync {
            self.make_durable()?;
        }
        Ok(())
    }

    fn sync_data(&self, _class: IoClass) -> Result<(), IoError> {
        self.backend.tick("fdatasync", &self.path, 0)?;
        self.make_durable()
    }

    fn size(&self) -> Result<u64, IoError> {
        Ok(self.content.lock().current.len() as u64)
    }

    fn set_size(&self, size: u64) -> Result<(), IoError> {
        let mut content = self.content.lock();
        content.current.resize(size as usize, 0);
        // Size changes are treated as durable at once (metadata), like the namespace.
        let current_len = content.current.len();
        content.synced.resize(current_len, 0);
        Ok(())
    }

    fn logical_block_size(&self) -> usize {
        1
    }
}

/// A seed from `JETPROOF_SEED` or the clock, printed so a failure can be replayed.
pub fn seed(test: &str) -> u64 {
    jetproof_test_support::announced_seed(test)
}

pub fn rng(seed: u64) -> StdRng {
    StdRng::seed_from_u64(seed)
}
