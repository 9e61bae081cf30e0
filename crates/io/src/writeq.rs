//! Asynchronous writes with several in flight: what the page cache's write-back uses so that a
//! database's writes are not at queue depth 1 (issue 22).
//!
//! A [`WriteQueue`] takes writes that own their buffers ([`WriteRequest`]) and hands each back
//! once complete ([`WriteCompletion`]), in whatever order the storage completes them. The
//! caller bounds what is in flight (it submits only while `in_flight() < depth()`). How the
//! writes overlap depends on the backend ([`open_write_queue`]):
//!
//! | backend | queue |
//! | --- | --- |
//! | io_uring | [`crate::uring::UringWriteQueue`]: one ring, every write in flight through it, completions reaped by the caller |
//! | fault | [`crate::fault`]'s queue: writes stay in flight (not applied) until reaped, completed in a seeded random order, and a crash keeps, drops, tears or reorders them |
//! | std, mem, others | [`ThreadQueue`]: a pool of writer threads (started as needed, at most `depth`), each doing one `write_at` |
//! | any, depth 1 | [`InlineQueue`]: the write is done in `submit` (no thread hop) |
//!
//! Invariant (every implementation): a completion is reported only after the write completed
//! (for the fault backend: after it was applied to the file's current content); the caller
//! relies on it to record the page's write count only for a completed write.

use std::collections::VecDeque;
use std::fmt::Debug;
use std::sync::Arc;
use std::thread::JoinHandle;

use parking_lot::{Condvar, Mutex};

use crate::{AlignedBuf, IoClass, IoError, IoFile};

/// The most writes a queue may keep in flight (the job key `cache.write_back_depth` is
/// refused above it).
pub const MAX_DEPTH: usize = 1024;

/// One write: `buf[..len]` at `offset`. The queue owns the buffer until the completion.
#[derive(Debug)]
pub struct WriteRequest {
    /// The caller's name for the write, given back with its completion.
    pub tag: u64,
    pub offset: u64,
    pub buf: AlignedBuf,
    pub len: usize,
}

/// A completed (or failed) write, with its buffer back.
#[derive(Debug)]
pub struct WriteCompletion {
    pub tag: u64,
    pub buf: AlignedBuf,
    pub len: usize,
    pub result: Result<(), IoError>,
}

/// Writes to one file with up to [`WriteQueue::depth`] in flight; see the module header.
/// Used by one thread at a time (the cache's flush lock).
pub trait WriteQueue: Send + Debug {
    /// The most writes in flight at once.
    fn depth(&self) -> usize;
    /// Writes submitted and not yet reaped.
    fn in_flight(&self) -> usize;
    /// Starts a write. The caller keeps `in_flight() < depth()`; a write refused at once is
    /// returned as a completion with its error by the next [`WriteQueue::reap`].
    fn submit(&mut self, request: WriteRequest);
    /// Moves the completed writes into `out`; with `wait`, waits until at least one is there
    /// (unless nothing is in flight).
    fn reap(&mut self, wait: bool, out: &mut Vec<WriteCompletion>);
    /// Waits for every write in flight and moves all completions into `out`. The default
    /// reaps one wait at a time; a queue whose completions wake the caller (the thread pool)
    /// wakes it once, when the last write is done, instead of once per write.
    fn reap_all(&mut self, out: &mut Vec<WriteCompletion>) {
        while self.in_flight() > 0 {
            self.reap(true, out);
        }
    }
    /// Waits until at most `target` writes are in flight and moves the completions into `out`.
    /// As [`WriteQueue::reap_all`], the thread pool wakes the caller once, when enough writes
    /// are done, not once per write (the page cache's flusher waits for half its queue this
    /// way before it looks for more to write).
    fn reap_down_to(&mut self, target: usize, out: &mut Vec<WriteCompletion>) {
        while self.in_flight() > target {
            self.reap(true, out);
        }
    }
}

/// A queue over `file` with up to `depth` writes in flight (at least 1, at most
/// [`MAX_DEPTH`]): the backend's own if it has one, else a pool of writer threads (depth 1:
/// inline).
pub fn open_write_queue(
    file: &Arc<dyn IoFile>,
    depth: usize,
    class: IoClass,
) -> Result<Box<dyn WriteQueue>, IoError> {
    let depth = depth.clamp(1, MAX_DEPTH);
    if let Some(queue) = file.native_write_queue(depth, class) {
        return queue;
    }
    if depth == 1 {
        return Ok(Box::new(InlineQueue {
            file: file.clone(),
            class,
            done: Vec::new(),
        }));
    }
    Ok(Box::new(ThreadQueue::new(file.clone(), depth, class)))
}

/// Depth 1: the write is done in `submit`.
#[derive(Debug)]
pub struct InlineQueue {
    file: Arc<dyn IoFile>,
    class: IoClass,
    done: Vec<WriteCompletion>,
}

impl WriteQueue for InlineQueue {
    fn depth(&self) -> usize {
        1
    }
    fn in_flight(&self) -> usize {
        self.done.len()
    }
    fn submit(&mut self, request: WriteRequest) {
        let data = request.buf.get(..request.len).unwrap_or(&[]);
        let result = self.file.write_at(data, request.offset, self.class);
        self.done.push(WriteCompletion {
            tag: request.tag,
            buf: request.buf,
            len: request.len,
            result,
        });
    }
    fn reap(&mut self, _wait: bool, out: &mut Vec<WriteCompletion>) {
        out.append(&mut self.done);
    }
}

#[derive(Debug, Default)]
struct PoolState {
    jobs: VecDeque<WriteRequest>,
    done: Vec<WriteCompletion>,
    /// Threads waiting for a job.
    idle: usize,
    /// While the reaper waits: the number of completions it waits for (0: nobody waits).
    /// A writer wakes it only when that many are there, so a reaper waiting for a whole
    /// batch is woken once, not once per write.
    wake_at: usize,
    stop: bool,
}

#[derive(Debug, Default)]
struct Pool {
    state: Mutex<PoolState>,
    /// Signalled when a job arrives (or stop).
    work: Condvar,
    /// Signalled when a completion arrives.
    completed: Condvar,
}

/// A pool of writer threads, each doing one synchronous `write_at` at a time: as many writes
/// in flight as threads busy. Threads are started as writes need them, up to `depth`, and live
/// as long as the queue.
#[derive(Debug)]
pub struct ThreadQueue {
    file: Arc<dyn IoFile>,
    class: IoClass,
    depth: usize,
    in_flight: usize,
    pool: Arc<Pool>,
    threads: Vec<JoinHandle<()>>,
}

impl ThreadQueue {
    pub fn new(file: Arc<dyn IoFile>, depth: usize, class: IoClass) -> ThreadQueue {
        ThreadQueue {
            file,
            class,
            depth: depth.max(1),
            in_flight: 0,
            pool: Arc::new(Pool::default()),
            threads: Vec::new(),
        }
    }

    fn worker(pool: Arc<Pool>, file: Arc<dyn IoFile>, class: IoClass) {
        loop {
            let request = {
                let mut state = pool.state.lock();
                loop {
                    if let Some(request) = state.jobs.pop_front() {
                        break request;
                    }
                    if state.stop {
                        return;
                    }
                    state.idle += 1;
                    pool.work.wait(&mut state);
                    state.idle -= 1;
                }
            };
            let data = request.buf.get(..request.len).unwrap_or(&[]);
            let result = file.write_at(data, request.offset, class);
            let mut state = pool.state.lock();
            state.done.push(WriteCompletion {
                tag: request.tag,
                buf: request.buf,
                len: request.len,
                result,
            });
            if state.wake_at != 0 && state.done.len() >= state.wake_at {
                pool.completed.notify_one();
            }
        }
    }

    /// Threads started so far (for tests).
    pub fn threads(&self) -> usize {
        self.threads.len()
    }
}

impl WriteQueue for ThreadQueue {
    fn depth(&self) -> usize {
        self.depth
    }
    fn in_flight(&self) -> usize {
        self.in_flight
    }
    fn submit(&mut self, request: WriteRequest) {
        self.in_flight += 1;
        let need_thread = {
            let mut state = self.pool.state.lock();
            state.jobs.push_back(request);
            state.idle < state.jobs.len() && self.threads.len() < self.depth
        };
        if need_thread {
            let (pool, file, class) = (self.pool.clone(), self.file.clone(), self.class);
            match std::thread::Builder::new()
                .name("jetproof-write".into())
                .spawn(move || Self::worker(pool, file, class))
            {
                Ok(handle) => self.threads.push(handle),
                // No thread to be had: the threads there are take the job in turn; with none
                // at all, do it here.
                Err(_) if self.threads.is_empty() => {
                    let mut state = self.pool.state.lock();
                    while let Some(request) = state.jobs.pop_front() {
                        let data = request.buf.get(..request.len).unwrap_or(&[]);
                        let result = self.file.write_at(data, request.offset, self.class);
                        state.done.push(WriteCompletion {
                            tag: request.tag,
                            buf: request.buf,
                            len: request.len,
                            result,
                        });
                    }
                }
                Err(_) => {}
            }
        }
        self.pool.work.notify_one();
    }
    fn reap(&mut self, wait: bool, out: &mut Vec<WriteCompletion>) {
        self.reap_at_least(usize::from(wait), out);
    }
    fn reap_all(&mut self, out: &mut Vec<WriteCompletion>) {
        self.reap_at_least(self.in_flight, out);
    }
    fn reap_down_to(&mut self, target: usize, out: &mut Vec<WriteCompletion>) {
        self.reap_at_least(self.in_flight.saturating_sub(target), out);
    }
}

impl ThreadQueue {
    /// Moves the completions into `out` once at least `want` (at most what is in flight) are
    /// there, sleeping until the writer that completes the `want`th wakes it.
    fn reap_at_least(&mut self, want: usize, out: &mut Vec<WriteCompletion>) {
        let want = want.min(self.in_flight);
        let mut state = self.pool.state.lock();
        while state.done.len() < want {
            state.wake_at = want;
            self.pool.completed.wait(&mut state);
        }
        state.wake_at = 0;
        self.in_flight -= state.done.len().min(self.in_flight);
        out.append(&mut state.done);
    }
}

impl Drop for ThreadQueue {
    fn drop(&mut self) {
        // The writes queued are finished first: a worker takes jobs before it looks at `stop`.
        self.pool.state.lock().stop = true;
        self.pool.work.notify_all();
        for handle in self.threads.drain(..) {
            let _ = handle.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mem::MemBackend;
    use crate::{IoBackend, OpenOptions};
    use std::path::Path;

    fn run(depth: usize) {
        let backend = MemBackend::new();
        let file = backend
            .open(Path::new("/q"), &OpenOptions::create().buffered())
            .expect("open");
        let mut queue = open_write_queue(&file, depth, IoClass::DbWrite).expect("queue");
        assert_eq!(queue.depth(), depth);
        let mut done = Vec::new();
        for i in 0..64u64 {
            while queue.in_flight() >= queue.depth() {
                queue.reap(true, &mut done);
            }
            let mut buf = AlignedBuf::zeroed(4096);
            buf.fill(i as u8 + 1);
            queue.submit(WriteRequest {
                tag: i,
                offset: i * 4096,
                buf,
                len: 4096,
            });
            assert!(queue.in_flight() <= depth);
        }
        while queue.in_flight() > 0 {
            queue.reap(true, &mut done);
        }
        let mut tags: Vec<u64> = done.iter().map(|c| c.tag).collect();
        tags.sort_unstable();
        assert_eq!(tags, (0..64).collect::<Vec<_>>());
        assert!(done.iter().all(|c| c.result.is_ok() && c.len == 4096));
        let mut back = vec![0u8; 4096];
        for i in 0..64u64 {
            file.read_at(&mut back, i * 4096, IoClass::DbRead)
                .expect("read");
            assert!(back.iter().all(|&b| b == i as u8 + 1), "block {i}");
        }
    }

    #[test]
    fn every_write_completes_once_and_lands_at_any_depth() {
        for depth in [1, 2, 8, 32] {
            run(depth);
        }
    }

    #[test]
    fn reap_all_returns_every_write_in_flight_at_once() {
        let backend = MemBackend::new();
        let file = backend
            .open(Path::new("/q"), &OpenOptions::create().buffered())
            .expect("open");
        for depth in [1, 4, 32] {
            let mut queue = open_write_queue(&file, depth, IoClass::DbWrite).expect("queue");
            for i in 0..depth as u64 {
                queue.submit(WriteRequest {
                    tag: i,
                    offset: i * 512,
                    buf: AlignedBuf::zeroed(512),
                    len: 512,
                });
            }
            let mut done = Vec::new();
            queue.reap_all(&mut done);
            assert_eq!(queue.in_flight(), 0, "depth {depth}");
            let mut tags: Vec<u64> = done.iter().map(|c| c.tag).collect();
            tags.sort_unstable();
            assert_eq!(tags, (0..depth as u64).collect::<Vec<_>>(), "depth {depth}");
            // Nothing in flight: returns at once with nothing.
            queue.reap_all(&mut done);
            assert_eq!(done.len(), depth);
        }
    }

    #[test]
    fn reap_down_to_leaves_at_most_the_target_in_flight() {
        let backend = MemBackend::new();
        let file = backend
            .open(Path::new("/q"), &OpenOptions::create().buffered())
            .expect("open");
        for depth in [1, 4, 32] {
            let mut queue = open_write_queue(&file, depth, IoClass::DbWrite).expect("queue");
            for i in 0..depth as u64 {
                queue.submit(WriteRequest {
                    tag: i,
                    offset: i * 512,
                    buf: AlignedBuf::zeroed(512),
                    len: 512,
                });
            }
            let mut done = Vec::new();
            let target = depth / 2;
            queue.reap_down_to(target, &mut done);
            assert!(queue.in_flight() <= target, "depth {depth}");
            assert_eq!(done.len() + queue.in_flight(), depth, "depth {depth}");
            queue.reap_all(&mut done);
            let mut tags: Vec<u64> = done.iter().map(|c| c.tag).collect();
            tags.sort_unstable();
            assert_eq!(tags, (0..depth as u64).collect::<Vec<_>>(), "depth {depth}");
        }
    }

    #[test]
    fn a_thread_queue_starts_no_more_threads_than_its_depth() {
        let backend = MemBackend::new();
        let file = backend
            .open(Path::new("/q"), &OpenOptions::create().buffered())
            .expect("open");
        let mut queue = ThreadQueue::new(file, 3, IoClass::DbWrite);
        let mut done = Vec::new();
        for i in 0..20u64 {
            while queue.in_flight() >= 3 {
                queue.reap(true, &mut done);
            }
            queue.submit(WriteRequest {
                tag: i,
                offset: 0,
                buf: AlignedBuf::zeroed(512),
                len: 512,
            });
        }
        while queue.in_flight() > 0 {
            queue.reap(true, &mut done);
        }
        assert_eq!(done.len(), 20);
        assert!(queue.threads() <= 3, "{} threads", queue.threads());
    }
}
