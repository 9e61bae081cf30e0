//! Latency recording per (database instance, I/O class).
//!
//! [`MeteredFile`] wraps any [`IoFile`] and records, for every I/O, its byte count and its
//! latency from submission to completion into the [`InstanceStats`] it was given. Histograms are
//! log-linear (HdrHistogram, 2 significant digits: at most 1% error) in nanoseconds, so they
//! merge exactly across instances and hosts.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use hdrhistogram::Histogram;
use parking_lot::Mutex;

use crate::{IoClass, IoError, IoFile, ReadOp, WriteOp};

/// Counters of one I/O class of one instance.
#[derive(Debug)]
pub struct ClassStats {
    count: AtomicU64,
    bytes: AtomicU64,
    latency_ns: Mutex<Histogram<u64>>,
}

fn new_histogram() -> Histogram<u64> {
    match Histogram::new(2) {
        Ok(h) => h,
        Err(e) => panic!("histogram with 2 significant digits: {e}"),
    }
}

impl Default for ClassStats {
    fn default() -> Self {
        ClassStats {
            count: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            latency_ns: Mutex::new(new_histogram()),
        }
    }
}

impl ClassStats {
    pub fn record(&self, bytes: u64, latency_ns: u64) {
        self.count.fetch_add(1, Ordering::Relaxed);
        self.bytes.fetch_add(bytes, Ordering::Relaxed);
        // `record` grows the auto-resizing histogram; `saturating_record` would clamp to its
        // current (tiny) range instead.
        let mut histogram = self.latency_ns.lock();
        if histogram.record(latency_ns.max(1)).is_err() {
            histogram.saturating_record(latency_ns.max(1));
        }
    }

    pub fn count(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }

    pub fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }

    /// A copy of the latency histogram so far.
    pub fn histogram(&self) -> Histogram<u64> {
        self.latency_ns.lock().clone()
    }
}

/// All counters of one database instance (or, for tools like `probe`, of one target).
#[derive(Debug)]
pub struct InstanceStats {
    name: String,
    classes: [ClassStats; IoClass::COUNT],
}

impl InstanceStats {
    pub fn new(name: impl Into<String>) -> Arc<InstanceStats> {
        Arc::new(InstanceStats {
            name: name.into(),
            classes: Default::default(),
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn class(&self, class: IoClass) -> &ClassStats {
        &self.classes[class.index()]
    }
}

/// An [`IoFile`] that records every I/O into an [`InstanceStats`].
#[derive(Debug)]
pub struct MeteredFile {
    inner: Arc<dyn IoFile>,
    stats: Arc<InstanceStats>,
}

impl MeteredFile {
    pub fn wrap(inner: Arc<dyn IoFile>, stats: Arc<InstanceStats>) -> Arc<dyn IoFile> {
        Arc::new(MeteredFile { inner, stats })
    }

    fn timed<T>(
        &self,
        class: IoClass,
        bytes: usize,
        io: impl FnOnce() -> Result<T, IoError>,
    ) -> Result<T, IoError> {
        let start = Instant::now();
        let result = io();
        let elapsed = start.elapsed().as_nanos().min(u64::MAX as u128) as u64;
        if result.is_ok() {
            self.stats.class(class).record(bytes as u64, elapsed);
        }
        result
    }
}

impl IoFile for MeteredFile {
    fn path(&self) -> &Path {
        self.inner.path()
    }

    fn read_at(&self, buf: &mut [u8], offset: u64, class: IoClass) -> Result<(), IoError> {
        let len = buf.len();
        self.timed(class, len, || self.inner.read_at(buf, offset, class))
    }

    fn write_at(&self, data: &[u8], offset: u64, class: IoClass) -> Result<(), IoError> {
        self.timed(class, data.len(), || self.inner.write_at(data, offset, class))
    }

    fn sync_data(&self, class: IoClass) -> Result<(), IoError> {
        // Durability is part of the write it protects: counted in the histogram, not as an op.
        self.inner.sync_data(class)
    }

    fn size(&self) -> Result<u64, IoError> {
        self.inner.size()
    }

    fn set_size(&self, size: u64) -> Result<(), IoError> {
        self.inner.set_size(size)
    }

    fn logical_block_size(&self) -> usize {
        self.inner.logical_block_size()
    }

    fn read_batch(&self, ops: &mut [ReadOp<'_>], class: IoClass) -> Result<(), IoError> {
        // Each op of a batch counts as one I/O; the batch's latency is charged to each.
        let bytes: Vec<usize> = ops.iter().map(|op| op.buf.len()).collect();
        let start = Instant::now();
        self.inner.read_batch(ops, class)?;
        let elapsed = start.elapsed().as_nanos().min(u64::MAX as u128) as u64;
        for b in bytes {
            self.stats.class(class).record(b as u64, elapsed);
        }
        Ok(())
    }

    fn write_batch(&self, ops: &[WriteOp<'_>], class: IoClass) -> Result<(), IoError> {
        let start = Instant::now();
        self.inner.write_batch(ops, class)?;
        let elapsed = start.elapsed().as_nanos().min(u64::MAX as u128) as u64;
        for op in ops {
            self.stats.class(class).record(op.data.len() as u64, elapsed);
        }
        Ok(())
    }
}
