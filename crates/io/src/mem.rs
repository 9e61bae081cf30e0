//! An in-memory backend: files are byte vectors. For unit tests and for measuring the engine's
//! own CPU cost with no device in the way. Nothing is lost at a "crash": the fault backend
//! simulates that.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::{Mutex, RwLock};

use crate::{IoBackend, IoClass, IoError, IoFile, OpenOptions};

#[derive(Debug, Default)]
pub struct MemBackend {
    files: Mutex<HashMap<PathBuf, Arc<MemFile>>>,
    copies: Option<Arc<CopyAccount>>,
}

impl MemBackend {
    pub fn new() -> Arc<MemBackend> {
        Arc::new(MemBackend::default())
    }

    /// A backend that also accounts the time its files spend copying bytes in and out
    /// ([`MemBackend::copies`]): the part of an in-memory run's CPU that stands for the device
    /// (a real device moves the bytes by DMA), for `bench/ceiling.sh`'s engine floor. Each read,
    /// write and rename then reads the monotonic clock twice (the vDSO: no system call), around
    /// the copy only, after the file's lock is taken. A copy is CPU work with nothing to wait
    /// for, so its elapsed time is its CPU time unless the thread is preempted during it, which
    /// can only make the account larger. (The thread's CPU clock, tried first, is a system call
    /// per read and added ~5 µs per transactional I/O on this machine.)
    pub fn with_copy_accounting() -> Arc<MemBackend> {
        Arc::new(MemBackend {
            files: Mutex::default(),
            copies: Some(Arc::default()),
        })
    }

    /// What the files copied so far, if this backend accounts it.
    pub fn copies(&self) -> Option<Copies> {
        self.copies.as_ref().map(|account| Copies {
            nanos: account.nanos.load(Ordering::Relaxed),
            bytes: account.bytes.load(Ordering::Relaxed),
        })
    }
}

/// The time (elapsed, see [`MemBackend::with_copy_accounting`]) and bytes of an accounting
/// backend's copies so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Copies {
    pub nanos: u64,
    pub bytes: u64,
}

#[derive(Debug, Default)]
struct CopyAccount {
    nanos: AtomicU64,
    bytes: AtomicU64,
}

impl CopyAccount {
    /// Runs `copy` (of `bytes` bytes), adding the time spent in it.
    fn time<T>(account: Option<&CopyAccount>, bytes: usize, copy: impl FnOnce() -> T) -> T {
        let Some(account) = account else {
            return copy();
        };
        let start = std::time::Instant::now();
        let result = copy();
        let spent = start.elapsed();
        account.nanos.fetch_add(
            u64::try_from(spent.as_nanos()).unwrap_or(u64::MAX),
            Ordering::Relaxed,
        );
        account.bytes.fetch_add(bytes as u64, Ordering::Relaxed);
        result
    }
}

#[derive(Debug)]
pub struct MemFile {
    path: PathBuf,
    data: RwLock<Vec<u8>>,
    copies: Option<Arc<CopyAccount>>,
}

impl MemFile {
    /// A copy of the whole content, for tests.
    pub fn snapshot(&self) -> Vec<u8> {
        self.data.read().clone()
    }
}

fn not_found(op: &'static str, path: &Path) -> IoError {
    IoError::Path {
        op,
        path: path.to_path_buf(),
        source: std::io::Error::from(std::io::ErrorKind::NotFound),
    }
}

pub(crate) fn already_exists(path: &Path) -> IoError {
    IoError::Path {
        op: "create",
        path: path.to_path_buf(),
        source: std::io::Error::from(std::io::ErrorKind::AlreadyExists),
    }
}

impl IoBackend for MemBackend {
    fn name(&self) -> &'static str {
        "mem"
    }

    fn open(&self, path: &Path, options: &OpenOptions) -> Result<Arc<dyn IoFile>, IoError> {
        let mut files = self.files.lock();
        if let Some(file) = files.get(path) {
            if options.create_new {
                return Err(already_exists(path));
            }
            return Ok(file.clone());
        }
        if !options.create && !options.create_new {
            return Err(not_found("open", path));
        }
        let file = Arc::new(MemFile {
            path: path.to_path_buf(),
            data: RwLock::new(Vec::new()),
            copies: self.copies.clone(),
        });
        files.insert(path.to_path_buf(), file.clone());
        Ok(file)
    }

    fn exists(&self, path: &Path) -> bool {
        self.files.lock().contains_key(path)
    }

    fn remove(&self, path: &Path) -> Result<(), IoError> {
        match self.files.lock().remove(path) {
            Some(_) => Ok(()),
            None => Err(not_found("remove", path)),
        }
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<(), IoError> {
        let mut files = self.files.lock();
        let Some(file) = files.remove(from) else {
            return Err(not_found("rename", from));
        };
        let data = file.data.read();
        let copy = CopyAccount::time(self.copies.as_deref(), data.len(), || data.clone());
        drop(data);
        let moved = Arc::new(MemFile {
            path: to.to_path_buf(),
            data: RwLock::new(copy),
            copies: self.copies.clone(),
        });
        files.insert(to.to_path_buf(), moved);
        Ok(())
    }

    fn sync_dir(&self, _dir: &Path) -> Result<(), IoError> {
        Ok(())
    }

    fn create_dir_all(&self, _dir: &Path) -> Result<(), IoError> {
        Ok(())
    }
}

impl IoFile for MemFile {
    fn path(&self) -> &Path {
        &self.path
    }

    fn read_at(&self, buf: &mut [u8], offset: u64, _class: IoClass) -> Result<(), IoError> {
        let data = self.data.read();
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
        CopyAccount::time(self.copies.as_deref(), buf.len(), || {
            buf.copy_from_slice(&data[start..start + buf.len()]);
        });
        Ok(())
    }

    fn write_at(&self, src: &[u8], offset: u64, _class: IoClass) -> Result<(), IoError> {
        let mut data = self.data.write();
        let start = usize::try_from(offset).unwrap_or(usize::MAX);
        let end = start.saturating_add(src.len());
        if data.len() < end {
            data.resize(end, 0);
        }
        CopyAccount::time(self.copies.as_deref(), src.len(), || {
            data[start..end].copy_from_slice(src);
        });
        Ok(())
    }

    fn sync_data(&self, _class: IoClass) -> Result<(), IoError> {
        Ok(())
    }

    fn size(&self) -> Result<u64, IoError> {
        Ok(self.data.read().len() as u64)
    }

    fn set_size(&self, size: u64) -> Result<(), IoError> {
        let size = usize::try_from(size).unwrap_or(usize::MAX);
        self.data.write().resize(size, 0);
        Ok(())
    }

    fn logical_block_size(&self) -> usize {
        1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_accounting_backend_counts_every_byte_it_copies_and_the_time_of_the_copies() {
        let backend = MemBackend::with_copy_accounting();
        let options = OpenOptions::create();
        let file = backend.open(Path::new("/m/a"), &options).expect("open");
        assert_eq!(backend.copies(), Some(Copies::default()));
        let block = vec![7u8; 8 << 20];
        for i in 0..4u64 {
            file.write_at(&block, i * block.len() as u64, IoClass::DbWrite)
                .expect("write");
        }
        let mut back = vec![0u8; 8 << 20];
        file.read_at(&mut back, 8 << 20, IoClass::DbRead)
            .expect("read");
        assert_eq!(back, block);
        let after_io = backend.copies().expect("accounted");
        assert_eq!(after_io.bytes, 5 * (8 << 20));
        // 40 MiB copied take far more than the clock's resolution.
        assert!(after_io.nanos > 0, "{after_io:?}");
        backend
            .rename(Path::new("/m/a"), Path::new("/m/b"))
            .expect("rename");
        let after_rename = backend.copies().expect("accounted");
        assert_eq!(after_rename.bytes, after_io.bytes + (32 << 20));
        assert!(after_rename.nanos > after_io.nanos);
        // A failed read copies nothing.
        let moved = backend.open(Path::new("/m/b"), &options).expect("open");
        assert!(moved.read_at(&mut back, 40 << 20, IoClass::DbRead).is_err());
        assert_eq!(
            backend.copies().expect("accounted").bytes,
            after_rename.bytes
        );
    }

    #[test]
    fn a_plain_backend_accounts_nothing() {
        let backend = MemBackend::new();
        let options = OpenOptions::create();
        let file = backend.open(Path::new("/m/a"), &options).expect("open");
        file.write_at(&[1, 2, 3], 0, IoClass::DbWrite)
            .expect("write");
        assert_eq!(backend.copies(), None);
    }
}
