//! An in-memory backend: files are byte vectors. For unit tests and for measuring the engine's
//! own CPU cost with no device in the way. Nothing is lost at a "crash": the fault backend
//! simulates that.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};

use crate::{IoBackend, IoClass, IoError, IoFile, OpenOptions};

#[derive(Debug, Default)]
pub struct MemBackend {
    files: Mutex<HashMap<PathBuf, Arc<MemFile>>>,
}

impl MemBackend {
    pub fn new() -> Arc<MemBackend> {
        Arc::new(MemBackend::default())
    }
}

#[derive(Debug)]
pub struct MemFile {
    path: PathBuf,
    data: RwLock<Vec<u8>>,
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
        let moved = Arc::new(MemFile {
            path: to.to_path_buf(),
            data: RwLock::new(file.data.read().clone()),
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
        buf.copy_from_slice(&data[start..start + buf.len()]);
        Ok(())
    }

    fn write_at(&self, src: &[u8], offset: u64, _class: IoClass) -> Result<(), IoError> {
        let mut data = self.data.write();
        let start = usize::try_from(offset).unwrap_or(usize::MAX);
        let end = start.saturating_add(src.len());
        if data.len() < end {
            data.resize(end, 0);
        }
        data[start..end].copy_from_slice(src);
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
