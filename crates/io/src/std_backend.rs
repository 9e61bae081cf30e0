//! The portable backend: positional reads and writes (pread/pwrite) from any number of threads,
//! with O_DIRECT when asked.

use std::fs::File;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::{IoBackend, IoClass, IoError, IoFile, OpenOptions};

#[derive(Debug, Default)]
pub struct StdBackend;

impl StdBackend {
    pub fn new() -> Arc<StdBackend> {
        Arc::new(StdBackend)
    }
}

#[derive(Debug)]
pub struct StdFile {
    path: PathBuf,
    file: File,
    block_size: usize,
}

fn path_error(op: &'static str, path: &Path, source: std::io::Error) -> IoError {
    IoError::Path {
        op,
        path: path.to_path_buf(),
        source,
    }
}

impl IoBackend for StdBackend {
    fn name(&self) -> &'static str {
        "std"
    }

    fn open(&self, path: &Path, options: &OpenOptions) -> Result<Arc<dyn IoFile>, IoError> {
        let mut open = std::fs::OpenOptions::new();
        open.read(true).write(options.write);
        if options.create {
            open.create(true);
        }
        if options.direct {
            open.custom_flags(libc::O_DIRECT);
        }
        let file = match open.open(path) {
            Ok(file) => file,
            Err(error) if options.direct && error.raw_os_error() == Some(libc::EINVAL) => {
                return Err(IoError::DirectIoUnsupported {
                    path: path.to_path_buf(),
                });
            }
            Err(error) => return Err(path_error("open", path, error)),
        };
        let block_size = if options.direct { 4096 } else { 1 };
        Ok(Arc::new(StdFile {
            path: path.to_path_buf(),
            file,
            block_size,
        }))
    }

    fn exists(&self, path: &Path) -> bool {
        path.exists()
    }

    fn remove(&self, path: &Path) -> Result<(), IoError> {
        std::fs::remove_file(path).map_err(|e| path_error("remove", path, e))
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<(), IoError> {
        std::fs::rename(from, to).map_err(|e| path_error("rename", from, e))
    }

    fn sync_dir(&self, dir: &Path) -> Result<(), IoError> {
        let handle = File::open(dir).map_err(|e| path_error("open directory", dir, e))?;
        handle
            .sync_all()
            .map_err(|e| path_error("sync directory", dir, e))
    }

    fn create_dir_all(&self, dir: &Path) -> Result<(), IoError> {
        std::fs::create_dir_all(dir).map_err(|e| path_error("create directory", dir, e))
    }
}

impl StdFile {
    fn check_aligned(&self, offset: u64, len: usize, ptr: *const u8) -> Result<(), IoError> {
        let block = self.block_size;
        if block > 1
            && (offset % block as u64 != 0 || len % block != 0 || (ptr as usize) % block != 0)
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

    fn os_error(
        &self,
        op: &'static str,
        offset: u64,
        len: usize,
        source: std::io::Error,
    ) -> IoError {
        IoError::Os {
            op,
            path: self.path.clone(),
            offset,
            len,
            source,
        }
    }
}

impl IoFile for StdFile {
    fn path(&self) -> &Path {
        &self.path
    }

    fn read_at(&self, buf: &mut [u8], offset: u64, _class: IoClass) -> Result<(), IoError> {
        self.check_aligned(offset, buf.len(), buf.as_ptr())?;
        let mut done = 0;
        while done < buf.len() {
            match self.file.read_at(&mut buf[done..], offset + done as u64) {
                Ok(0) => {
                    return Err(IoError::ShortRead {
                        path: self.path.clone(),
                        offset,
                        wanted: buf.len(),
                        got: done,
                    });
                }
                Ok(n) => done += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(self.os_error("read", offset, buf.len(), e)),
            }
        }
        Ok(())
    }

    fn write_at(&self, data: &[u8], offset: u64, _class: IoClass) -> Result<(), IoError> {
        self.check_aligned(offset, data.len(), data.as_ptr())?;
        self.file
            .write_all_at(data, offset)
            .map_err(|e| self.os_error("write", offset, data.len(), e))
    }

    fn sync_data(&self, _class: IoClass) -> Result<(), IoError> {
        self.file
            .sync_data()
            .map_err(|e| self.os_error("fdatasync", 0, 0, e))
    }

    fn size(&self) -> Result<u64, IoError> {
        self.file
            .metadata()
            .map(|m| m.len())
            .map_err(|e| path_error("stat", &self.path, e))
    }

    fn set_size(&self, size: u64) -> Result<(), IoError> {
        self.file
            .set_len(size)
            .map_err(|e| path_error("set length of", &self.path, e))
    }

    fn logical_block_size(&self) -> usize {
        self.block_size
    }
}
